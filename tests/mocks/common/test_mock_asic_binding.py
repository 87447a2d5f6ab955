"""No emulated block binds an ASIC's register database at import time: the board that builds a block passes it in.

An AST scan of every module under ``tinyhw/mocks``: code that runs when the module is imported (module and class
bodies, decorators, default arguments) must not call an ``asic*`` lookup, and no code there may name an ASIC by a
string (``asic("navi31")``): a board finds its database from its description, a block is handed it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest
from testpaths import ROOT

MOCKS = ROOT / "tinyhw" / "mocks"
LOOKUPS = ("asic", "asic_for_device", "asic_from_device", "flash_registers")


def _called_name(call: ast.Call) -> str:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return ""


def _import_time_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node evaluated when the module is imported: function and lambda bodies are skipped, their decorators
    and defaults are not."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            stack.extend(node.decorator_list)
            stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        if isinstance(node, ast.Lambda):
            stack.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        stack.extend(ast.iter_child_nodes(node))


def import_time_bindings(source: str) -> list[str]:
    """``line: call`` of every register-database lookup that runs when ``source`` is imported."""
    tree = ast.parse(source)
    return [f"{n.lineno}: {ast.unparse(n)}" for n in _import_time_nodes(tree)
            if isinstance(n, ast.Call) and _called_name(n) in LOOKUPS]


def named_asics(source: str) -> list[str]:
    """``line: call`` of every ``asic*("literal")`` call anywhere in ``source``."""
    return [f"{n.lineno}: {ast.unparse(n)}" for n in ast.walk(ast.parse(source))
            if isinstance(n, ast.Call) and _called_name(n) in LOOKUPS
            and any(isinstance(a, ast.Constant) and isinstance(a.value, str) for a in n.args)]


def _modules() -> list[Path]:
    return sorted(MOCKS.rglob("*.py"))


def test_the_scan_sees_every_mocks_module() -> None:
    names = {p.name for p in _modules()}
    assert {"smuio.py", "psp.py", "gd25.py", "amregs.py", "cp.py", "board.py", "flashregs.py"} <= names


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(MOCKS)))
def test_no_mocks_module_binds_an_asic_at_import(path: Path) -> None:
    source = path.read_text()
    assert import_time_bindings(source) == [], f"{path.name} looks up a register database at import"
    assert named_asics(source) == [], f"{path.name} names an ASIC; take the board's database instead"


@pytest.mark.parametrize(("source", "caught"), [
    ('from tinyhw.regs import asic\n_A = asic("navi31")\n', True),
    ('import tinyhw.regs as r\nOFF = r.asic("navi31").offset("gc.CP_STAT")\n', True),
    ('class B:\n    regs = asic("navi31")\n', True),
    ('def f(regs=asic("navi31")):\n    return regs\n', True),
    ('@register(flash_registers(DB))\ndef f():\n    pass\n', True),
    ("def f(db):\n    return flash_registers(db)\n", False),
    ("class B:\n    def __init__(self, regs):\n        self.regs = regs\n", False),
])
def test_the_scan_catches_import_time_bindings(source: str, caught: bool) -> None:
    assert bool(import_time_bindings(source)) is caught


def test_the_scan_catches_a_lazily_named_asic() -> None:
    lazy = 'def __getattr__(name):\n    return asic("navi31")\n'
    assert import_time_bindings(lazy) == [] and named_asics(lazy) == ['2: asic(\'navi31\')']
