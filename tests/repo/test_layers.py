"""The layer rules of ARCHITECTURE.md ("Layers (who may import whom)"), checked by walking every import.

``MAY_IMPORT`` is that table written out, one row per package: the tinyhw packages it may import besides
itself. Every import counts: module-level, inside functions and ``if TYPE_CHECKING:``, relative
(``from ..mocks import x`` is resolved against the importing file), and ``importlib.import_module`` /
``__import__`` with a constant name. ``connect`` (device strings to open transports) sits in front of the
transports: it may import layers 0-2, mocks included; only ``cli`` and ``tinyhw/__init__.py`` (the lazy
``tinyhw.open``) may import it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import tinyhw

ROOT = Path(tinyhw.__file__).parent

DATA = {"autogen"}
CORE = {"errors", "fileio", "transport", "regs", "formats", "progress", "boards", "commands"}
TRANSPORTS = {"pci", "usb", "remote", "mocks", "cuda"}  # cuda: the cuda:N device object (driver API)
ENGINES = {"flash", "firmware", "probe", "boot"}  # layer 3a
TOOLS = {"bench", "prof", "kernels", "trace"}  # layer 3b: "layers 0-1 and 3a; never each other"
FEATURES = ENGINES | TOOLS

# package -> the tinyhw packages it may import (itself always allowed). "" is tinyhw/__init__.py and __main__.py.
MAY_IMPORT: dict[str, set[str]] = {
    "autogen": set(),
    # layer 1: stdlib and layer 0; core packages use each other (errors, the transport interfaces) ...
    **{p: DATA | CORE for p in CORE},
    # ... except formats, which is pure: only tinyhw.errors.
    "formats": {"errors"},
    # layer 2: layers 0-1, never each other (mocks hands usb a pyusb backend; usb never imports mocks).
    **{p: DATA | CORE for p in TRANSPORTS},
    # in front of the transports: layers 0-2, mocks included.
    "connect": DATA | CORE | TRANSPORTS,
    # layer 3: layers 0-1; handed a transport, never construct one, never import mocks, connect or each other ...
    **{p: DATA | CORE for p in ENGINES},
    # ... except that a tool (3b) composes engines (3a): a copy bench over the sram path imports tinyhw.boot.
    **{p: DATA | CORE | ENGINES for p in TOOLS},
    # servers in front of a device (tinyhw serve): open it through connect, serve the remote protocol, and
    # drive the flash engine for serprog; only the cli imports them.
    "serve": DATA | CORE | TRANSPORTS | {"connect", "flash"},
    # the labgrid integration (3 1/2, beside the servers): opens boards through connect and drives the engines and
    # tools as labgrid driver steps (bench copy is a 3b tool); only a user's labgrid environment imports it.
    "labgrid": DATA | CORE | TRANSPORTS | {"connect"} | FEATURES,
    # peer drivers (ARCHITECTURE.md testing tier 5, beside the servers): adapters that put a peer driver's lowest
    # layer on an emulated board, opened through connect; only tests and a user's own code import them.
    "peers": DATA | CORE | TRANSPORTS | {"connect"},
    # layer 4: everything.
    "cli": DATA | CORE | TRANSPORTS | {"connect", "serve"} | FEATURES,
    "": {"errors", "connect", "cli"},
}
FRONT_END_ONLY = {"click", "rich"}  # third-party packages only tinyhw.cli may import
#: third-party labgrid: only the labgrid integration and the labgrid: opener (inside its functions) import it
LABGRID_ONLY = {"labgrid": ("labgrid", "connect/place.py")}


def _package(module: str) -> str | None:
    """The tinyhw package a dotted module name belongs to ("" for ``tinyhw`` itself); None if not tinyhw."""
    parts = module.split(".")
    if parts[0] != "tinyhw":
        return None
    # ``from tinyhw import __version__`` names an attribute of the root, not a package
    return parts[1] if len(parts) > 1 and parts[1] in MAY_IMPORT else ""


def _resolve(path: Path, level: int, module: str | None) -> str:
    """The absolute module of ``from <level dots><module> import ...`` written in ``path`` (under ROOT)."""
    package = ["tinyhw", *path.relative_to(ROOT).parent.parts]
    if level > len(package):
        raise AssertionError(f"{path}: relative import beyond the top of tinyhw")
    base = package[: len(package) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(path: Path) -> list[str]:
    """Every module name ``path`` imports, wherever the import sits."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = _resolve(path, node.level, node.module) if node.level else (node.module or "")
            names.append(module)
            names += [f"{module}.{a.name}" for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in ("import_module", "__import__"):
                names.append(node.args[0].value)
    return names


def _source_package(path: Path) -> str:
    rel = path.relative_to(ROOT)
    return rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 else ""


def violations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        src = _source_package(path)
        if src not in MAY_IMPORT:
            found.append(f"{rel}: package {src!r} has no row; add it to ARCHITECTURE.md's table and MAY_IMPORT")
            continue
        for name in _imports(path):
            top = name.split(".")[0]
            if top in FRONT_END_ONLY and src != "cli":
                found.append(f"{rel}: imports {top} (only tinyhw.cli may)")
            if top in LABGRID_ONLY and src not in LABGRID_ONLY[top] and str(rel) not in LABGRID_ONLY[top]:
                found.append(f"{rel}: imports {top} (only tinyhw.labgrid and the labgrid: opener may)")
            dst = _package(name)
            if dst is None or dst == src:
                continue
            if dst == "" and src != "":
                # ``import tinyhw`` / ``from tinyhw import __version__``: the package root holds only the
                # version and the lazy tinyhw.open; names imported from it are checked as submodules above.
                continue
            if dst not in MAY_IMPORT[src]:
                found.append(f"{rel}: {src or 'tinyhw'} may not import tinyhw.{dst} ({name})")
    return sorted(set(found))


def test_no_layer_violations() -> None:
    assert violations() == []


def test_every_package_has_a_row() -> None:
    present = {p.name for p in ROOT.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert present <= set(MAY_IMPORT), present - set(MAY_IMPORT)


BAD = {
    # file under the fake tinyhw -> (source, the violation the walker must report)
    "flash/ops.py": ("from ..mocks import navi31\n", "flash may not import tinyhw.mocks"),
    "flash/late.py": ("def f():\n    from tinyhw.usb.transport import UsbTransport\n",
                      "flash may not import tinyhw.usb"),
    "firmware/open.py": ("import tinyhw.connect\n", "firmware may not import tinyhw.connect"),
    "probe/x.py": ("from tinyhw.flash import ops\n", "probe may not import tinyhw.flash"),
    "mocks/bad.py": ("from tinyhw.usb.bridge import Asm24\nimport click\n", "mocks may not import tinyhw.usb"),
    "usb/dyn.py": ("import importlib\nimportlib.import_module('tinyhw.mocks.amd.board')\n",
                   "usb may not import tinyhw.mocks"),
    "formats/impure.py": ("from . import x\nfrom ..transport import base\n", "formats may not import tinyhw.transport"),
    "pci/conn.py": ("from tinyhw.connect import open_device\n", "pci may not import tinyhw.connect"),
    "regs/up.py": ("from tinyhw.pci import sysfs\n", "regs may not import tinyhw.pci"),
    "bench/side.py": ("from tinyhw.prof import capture\n", "bench may not import tinyhw.prof"),  # tool -> tool
    "boot/up.py": ("from tinyhw.bench import copy\n", "boot may not import tinyhw.bench"),  # engine -> tool
    "probe/lg.py": ("def f():\n    import labgrid.factory\n", "imports labgrid (only tinyhw.labgrid"),
    "connect/up.py": ("from tinyhw.labgrid import TinyhwDriver\n", "connect may not import tinyhw.labgrid"),
}


def test_walker_catches_each_kind_of_violation(tmp_path: Path, monkeypatch) -> None:
    """Relative, function-level, dynamic, feature->transport/connect/feature, upward: the walker sees them all."""
    fake = tmp_path / "tinyhw"
    for rel, (source, _) in BAD.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(source)
    (fake / "flash" / "fine.py").write_text("from . import ops\nfrom ..errors import TinyhwError\n")
    (fake / "newpkg").mkdir()
    (fake / "newpkg" / "__init__.py").write_text("")
    monkeypatch.setattr(sys.modules[__name__], "ROOT", fake)
    found = violations()
    for rel, (_, expected) in BAD.items():
        assert any(f.startswith(rel) and expected in f for f in found), (rel, expected, found)
    assert any("mocks/bad.py: imports click" in f for f in found)
    assert any("'newpkg' has no row" in f for f in found)
    assert not any(f.startswith("flash/fine.py") for f in found)


def test_relative_imports_resolve() -> None:
    assert _resolve(ROOT / "flash" / "ops.py", 2, "mocks") == "tinyhw.mocks"
    assert _resolve(ROOT / "flash" / "ops.py", 1, None) == "tinyhw.flash"
    assert _resolve(ROOT / "flash" / "__init__.py", 1, "ops") == "tinyhw.flash.ops"
    assert _resolve(ROOT / "__init__.py", 1, "connect") == "tinyhw.connect"


def test_labgrid_is_loaded_only_by_the_labgrid_feature() -> None:
    """The CLI, tinyhw.open and the connect layer (the labgrid: opener included) run without loading labgrid:
    it is imported inside the opener's functions only."""
    import subprocess
    import sys

    code = ("import sys, tinyhw, tinyhw.cli.app, tinyhw.connect, tinyhw.connect.place, tinyhw.boards.registry\n"
            "from tinyhw.transport.devstr import parse_device\n"
            "parse_device('labgrid:gpu-bench')\n"
            "with tinyhw.open('mock:ad102') as d: d.transport.identity()\n"
            "print(sorted(m for m in sys.modules if m == 'labgrid' or m.startswith('labgrid.')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout


# --- packages by product (tinyhw/mocks, tinyhw/boot) ---
#: sub-packages of a package -> the sibling sub-packages they may import. The emulators are packages by product:
#: ``common`` imports no product; the bridge never imports a board (``connect.bridged_board`` joins them at the
#: ``Endpoint`` seam); the AMD board owns the RDNA3 shader core; the NVIDIA board only shared parts. The root
#: ``tinyhw/mocks/__init__.py`` imports none of them. The AMD and NVIDIA drivers never import each other; both
#: take the vendor-neutral parts (the step log, the firmware cache rule) from ``boot.common``, which imports neither.
PRODUCT_MAY_IMPORT: dict[str, dict[str, set[str]]] = {
    "mocks": {"": set(), "common": set(), "rdna3": set(), "bridge": {"common"}, "amd": {"common", "rdna3"},
              "nvidia": {"common"}},
    "boot": {"": set(), "common": set(), "amd": {"common"}, "nv": {"common"}},
}


def product_violations(root: Path | None = None) -> list[str]:
    """Imports between the sub-packages of ``mocks`` and ``boot`` that PRODUCT_MAY_IMPORT does not allow."""
    root = root or ROOT
    found = []
    for package, table in PRODUCT_MAY_IMPORT.items():
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root / package)
            src = rel.parts[0] if len(rel.parts) > 1 else ""
            if src not in table:
                found.append(f"{package}/{rel}: sub-package {src!r} has no row in PRODUCT_MAY_IMPORT")
                continue
            for name in _imports(path):
                parts = name.split(".")
                if parts[:2] != ["tinyhw", package] or len(parts) < 3 or parts[2] not in table:
                    continue
                if parts[2] != src and parts[2] not in table[src]:
                    found.append(f"{package}/{rel}: {package}.{src or '__init__'} may not import {package}.{parts[2]}")
    return sorted(set(found))


def test_products_import_only_what_their_row_allows() -> None:
    assert product_violations() == []


def test_product_walker_sees_a_board_importing_another(tmp_path: Path) -> None:
    for rel, source in {"mocks/nvidia/x.py": "from tinyhw.mocks.amd import gpuvm\n",
                        "mocks/bridge/y.py": "def f():\n    import tinyhw.mocks.amd.board\n",
                        "mocks/common/z.py": "from tinyhw.mocks.common import faults\n",
                        "boot/amd/w.py": "from tinyhw.boot.nv import rpc\n",
                        "boot/nv/v.py": "from tinyhw.boot.amd.sequence import boot\n",
                        "boot/common/u.py": "from tinyhw.boot.amd import firmware\n",
                        "boot/nv/t.py": "from tinyhw.boot.common.steps import StepLog\n"}.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(source)
    found = product_violations(tmp_path)
    assert found == ["boot/amd/w.py: boot.amd may not import boot.nv",
                     "boot/common/u.py: boot.common may not import boot.amd",
                     "boot/nv/v.py: boot.nv may not import boot.amd",
                     "mocks/bridge/y.py: mocks.bridge may not import mocks.amd",
                     "mocks/nvidia/x.py: mocks.nvidia may not import mocks.amd"], found
