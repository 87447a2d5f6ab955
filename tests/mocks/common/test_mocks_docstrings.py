"""Every public class, function and method in ``tinyhw/mocks`` has a docstring, and no module there is imported
under a one- or two-letter alias (``import x as P``) or bound to a one-letter name (``G = mod.CONSTANTS``).

AST based: public means a name without a leading underscore, at module level or inside a public class (functions
nested in functions are private helpers). A docstring must say something: at least three words, not the name alone.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from testpaths import ROOT

MOCKS = ROOT / "tinyhw" / "mocks"
#: the one short alias the whole Python world reads the same way
CONVENTIONAL = {"np"}


def public_defs(source: str) -> list[tuple[str, ast.AST]]:
    """(qualified name, node) of every public class, function and method of ``source``."""
    out: list[tuple[str, ast.AST]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            definition = isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            if definition and not child.name.startswith("_"):
                out.append((prefix + child.name, child))
                if isinstance(child, ast.ClassDef):
                    visit(child, prefix + child.name + ".")

    visit(ast.parse(source), "")
    return out


def undocumented(source: str) -> list[str]:
    """Public definitions of ``source`` whose docstring is missing or says no more than the name."""
    bad = []
    for name, node in public_defs(source):
        doc = ast.get_docstring(node)  # type: ignore[arg-type]
        words = (doc or "").split()
        if len(words) < 3 or doc.strip(" .").lower().replace(" ", "_") == name.split(".")[-1].lower():
            bad.append(f"{node.lineno}: {name}")  # type: ignore[attr-defined]
    return bad


def short_aliases(source: str) -> list[str]:
    """Imports bound to a name of one or two characters (``np`` excepted), and module attributes bound to a
    one-letter module-level name (``G = psp_gfx_if.CONSTANTS``)."""
    tree = ast.parse(source)
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if alias.asname and len(alias.asname) <= 2 and alias.asname not in CONVENTIONAL:
                    full = f"{node.module}.{alias.name}" if isinstance(node, ast.ImportFrom) else alias.name
                    bad.append(f"{node.lineno}: import {full} as {alias.asname}")
    imported = {a.asname or a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Attribute):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            for target in node.targets:
                if isinstance(target, ast.Name) and len(target.id.lstrip("_")) == 1 and \
                        isinstance(root, ast.Name) and root.id in imported:
                    bad.append(f"{node.lineno}: {target.id} = {ast.unparse(node.value)}")
    return bad


def _modules() -> list[Path]:
    return sorted(MOCKS.rglob("*.py"))


def test_the_scan_counts_the_mocks_package() -> None:
    total = sum(len(public_defs(p.read_text())) for p in _modules())
    assert total > 500  # about 530 public definitions: the scan sees methods and the rdna3 subpackage


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(MOCKS)))
def test_every_public_definition_has_a_docstring(path: Path) -> None:
    assert undocumented(path.read_text()) == []


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(MOCKS)))
def test_no_short_module_aliases(path: Path) -> None:
    assert short_aliases(path.read_text()) == []


def test_the_checks_catch_what_they_forbid() -> None:
    src = ('import numpy as np\nfrom tinyhw.mocks.amd import flashregs as R\nimport struct as pk\n'
           'from tinyhw.autogen import psp_gfx_if\nG = psp_gfx_if.CONSTANTS\nPSP_GFX = psp_gfx_if.CONSTANTS\n'
           'class Board:\n    """The board, with its BARs."""\n\n    def read(self):\n        pass\n\n'
           '    def _private(self):\n        pass\n\n    def close(self):\n        """Close."""\n\n'
           'def helper():\n    """Helper."""\n\n    def inner():\n        pass\n')
    assert short_aliases(src) == ["2: import tinyhw.mocks.amd.flashregs as R", "3: import struct as pk",
                                  "5: G = psp_gfx_if.CONSTANTS"]
    assert undocumented(src) == ["10: Board.read", "16: Board.close", "19: helper"]
