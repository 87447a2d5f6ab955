"""Abilities are asked for one way: ``require()`` (the feature needs one) or ``has()`` (it asks), both in
tinyhw/transport/base.py. The source of the package is scanned: an ``isinstance`` against an ability, or a
``hasattr``/``getattr`` probing for one of an ability's methods, anywhere else is a finding."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import tinyhw
from tinyhw.transport import abilities, batch, clock

ROOT = Path(tinyhw.__file__).parent
HELPERS = {"transport/base.py"}  # where require() and has() do the isinstance themselves


def _abilities() -> dict[str, type]:
    """Every runtime-checkable protocol of the transport package: the abilities of a transport, of a pyusb backend
    (QueuedBulk) and of a clock (Measuring)."""
    found = {}
    for module in (abilities, batch, clock):
        for name, value in vars(module).items():
            if inspect.isclass(value) and getattr(value, "_is_runtime_protocol", False) \
                    and value.__module__ == module.__name__:
                found[name] = value
    return found


ABILITIES = _abilities()
METHODS = {m for ability in ABILITIES.values() for m in abilities.ability_methods(ability)}


def _names(node: ast.expr) -> list[str]:
    """The class names an isinstance's second argument names (a name, ``module.Name``, or a tuple of them)."""
    if isinstance(node, ast.Tuple):
        return [n for elt in node.elts for n in _names(elt)]
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    return []


def findings(source: str, where: str) -> list[str]:
    """Raw ability checks in ``source``: isinstance against an ability, hasattr/getattr for an ability method."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2):
            continue
        call, arg = node.func.id, node.args[1]
        if call == "isinstance":
            out += [f"{where}:{node.lineno}: isinstance(..., {n}): use has() or require()"
                    for n in _names(arg) if n in ABILITIES]
        elif call in ("hasattr", "getattr") and isinstance(arg, ast.Constant) and arg.value in METHODS:
            out.append(f"{where}:{node.lineno}: {call}(..., {arg.value!r}) probes an ability: use has() or require()")
    return out


def test_the_scan_knows_the_abilities() -> None:
    assert {"DmaBuffers", "BridgeSram", "Batching", "QueuedBulk", "Measuring", "ConfigSize"} <= set(ABILITIES)
    assert {"dma_alloc", "write_sram", "submit", "config_size", "resize_bar"} <= METHODS


def test_the_scan_finds_each_raw_check() -> None:
    src = ("if isinstance(t, DmaBuffers): pass\n"
           "if isinstance(t, (int, abilities.BridgeSram)): pass\n"
           "if hasattr(t, 'dma_alloc'): pass\n"
           "f = getattr(t, 'resize_bar', None)\n"
           "if has(t, DmaBuffers) and isinstance(t, int) and hasattr(t, 'name'): pass\n")
    assert [f.split(": ", 1)[0] for f in findings(src, "x.py")] == ["x.py:1", "x.py:2", "x.py:3", "x.py:4"]


def test_no_raw_ability_check_in_the_package() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in HELPERS:
            found += findings(path.read_text(), rel)
    assert not found, "\n".join(found)
