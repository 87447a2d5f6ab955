"""Abilities are asked for one way: ``require()`` (the feature needs one) or ``has()`` (it asks), both in
tinyhw/transport/base.py. The source of the package is scanned: an ``isinstance`` against an ability, or a
``hasattr``/``getattr`` probing for one of an ability's methods, anywhere else is a finding. In the features (every
package but the transports, the emulators and the opener) so is a test of a transport's class (``isinstance``
against a transport class, ``hasattr``/``getattr`` on a transport) and a reach into a transport's internals (a
private attribute, its ``bridge``, ``board`` or pyusb ``backend``)."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import tinyhw
from tinyhw.transport import abilities, batch, clock

ROOT = Path(tinyhw.__file__).parent
HELPERS = {"transport/base.py"}  # where require() and has() do the isinstance themselves
#: the packages that implement transports (they reach their own internals), the emulators and the opener (which
#: builds a transport around an emulated board and hands the board out as ``Opened.board``)
IMPLEMENTERS = ("transport/", "pci/", "usb/", "remote/", "cuda/", "mocks/", "connect/", "autogen/")
#: names a transport goes by in the features (``transport``, ``t``, the one a wrapper wraps, ``gpu.transport``)
TRANSPORT_NAMES = {"transport", "t", "tr", "inner"}
#: a transport's internals no feature touches: the bridge and board objects behind it, its pyusb backend
INTERNALS = {"bridge", "board", "backend"}
#: attributes a feature may still ask a transport for by name, (file, attribute): none (sysfs's PCI function of
#: ``pci:``/``vfio:`` is the OsPciFunction ability)
KNOWN: set[tuple[str, str]] = set()


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


def _transport_classes() -> set[str]:
    """The names of the package's transport classes: Transport and every class deriving from one (read from the
    source, so that no emulator or optional extra has to be imported)."""
    bases: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases.setdefault(node.name, set()).update(n for b in node.bases for n in _names(b))
    found = {"Transport"}
    while True:
        more = {name for name, of in bases.items() if of & found} - found
        if not more:
            return found
        found |= more


TRANSPORT_CLASSES = _transport_classes()


def _is_transport(node: ast.expr) -> bool:
    """Whether ``node`` names a transport: one of :data:`TRANSPORT_NAMES`, or ``X.transport`` / ``X.inner``."""
    if isinstance(node, ast.Name):
        return node.id in TRANSPORT_NAMES
    if isinstance(node, ast.Attribute):  # X.transport, X.inner, X.tr; of X.t only self.t (a wrapper's transport)
        return node.attr in TRANSPORT_NAMES - {"t"} or (
            node.attr == "t" and isinstance(node.value, ast.Name) and node.value.id == "self")
    return False


def feature_findings(source: str, where: str) -> list[str]:
    """What a feature may not do with a transport: test its class (isinstance against a transport class,
    hasattr/getattr on it) or reach into its internals (a private attribute, :data:`INTERNALS`)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) >= 2:
            call, arg = node.func.id, node.args[1]
            if call == "isinstance":
                out += [f"{where}:{node.lineno}: isinstance(..., {n}) tests a transport's class: use has() or require()"
                        for n in _names(arg) if n in TRANSPORT_CLASSES]
            elif call in ("hasattr", "getattr") and _is_transport(node.args[0]) and not (
                    isinstance(arg, ast.Constant) and (where, arg.value) in KNOWN):
                out.append(f"{where}:{node.lineno}: {call}() on a transport: use has() or require() with an ability")
        elif isinstance(node, ast.Attribute) and _is_transport(node.value):
            private = node.attr.startswith("_") and not node.attr.startswith("__")
            if private or node.attr in INTERNALS:
                out.append(f"{where}:{node.lineno}: {ast.unparse(node)} reaches into a transport: use an ability")
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


def test_the_scan_knows_the_transport_classes() -> None:
    assert {"Transport", "UsbTransport", "SysfsTransport", "VfioTransport", "RemoteTransport", "RecordingTransport",
            "DirectTransport"} <= TRANSPORT_CLASSES
    assert "BarRegion" not in TRANSPORT_CLASSES


def test_the_feature_scan_finds_each_reach_into_a_transport() -> None:
    src = ("if isinstance(t, UsbTransport): pass\n"
           "if isinstance(dev.transport, (int, usb.transport.UsbTransport)): pass\n"
           "if hasattr(transport, 'reset'): pass\n"
           "f = getattr(gpu.transport, 'bridge', None)\n"
           "x = transport._dev\n"
           "y = self.transport.bridge\n"
           "z = opened.transport.board\n"
           "w = self.t._ctrl\n"
           "if isinstance(t, Trace) and trace.t._index and gpu._regs and transport.__class__ and t.name: pass\n"
           "b = opened.board\n")
    assert [f.split(": ", 1)[0] for f in feature_findings(src, "x.py")] == [f"x.py:{n}" for n in range(1, 9)]


def test_no_feature_reaches_into_a_transport() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if not rel.startswith(IMPLEMENTERS):
            found += feature_findings(path.read_text(), rel)
    assert not found, "\n".join(found)


def test_no_raw_ability_check_in_the_package() -> None:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel not in HELPERS:
            found += findings(path.read_text(), rel)
    assert not found, "\n".join(found)
