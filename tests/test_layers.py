"""The layer rules of ARCHITECTURE.md, checked by walking every import in the package."""

from __future__ import annotations

import ast
from pathlib import Path

import tinyhw

ROOT = Path(tinyhw.__file__).parent

LAYER = {
    "autogen": 0,
    "errors": 1, "fileio": 1, "transport": 1, "regs": 1, "formats": 1, "progress": 1, "boards": 1,
    "pci": 2, "usb": 2, "remote": 2, "mocks": 2, "connect": 2.5,
    "flash": 3, "firmware": 3, "probe": 3, "bench": 3, "boot": 3, "prof": 3, "kernels": 3,
    "serve": 3.5,
    "cli": 4,
    "cuda": 2,  # the cuda:N device object over the CUDA driver API: transport-like, built by tinyhw.connect
}
FRONT_END_ONLY = {"click", "rich"}


def _package(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "tinyhw" or len(parts) < 2:
        return None
    return parts[1]


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
    return names


def violations() -> list[str]:
    found = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        src_pkg = rel.parts[0].removesuffix(".py") if len(rel.parts) > 1 or rel.stem not in ("__init__", "__main__") \
            else None
        if src_pkg is None or src_pkg in ("__init__", "__main__"):
            continue
        assert src_pkg in LAYER, f"{rel}: package {src_pkg!r} has no layer; add it to ARCHITECTURE.md and this test"
        src_layer = LAYER[src_pkg]
        for name in _imports(path):
            top = name.split(".")[0]
            if top in FRONT_END_ONLY and src_pkg != "cli":
                found.append(f"{rel}: imports {top} (only tinyhw.cli may)")
            dst_pkg = _package(name)
            if dst_pkg is None or dst_pkg == src_pkg or dst_pkg not in LAYER:
                continue
            dst_layer = LAYER[dst_pkg]
            if src_pkg == "formats" and dst_pkg != "errors":
                found.append(f"{rel}: formats is pure and may import only tinyhw.errors, not tinyhw.{dst_pkg}")
            elif dst_layer > src_layer or (dst_layer == src_layer and src_layer >= 2):
                found.append(f"{rel}: layer {src_layer} ({src_pkg}) imports layer {dst_layer} (tinyhw.{dst_pkg})")
    return sorted(set(found))


def test_no_layer_violations() -> None:
    assert violations() == []


def test_walker_catches_a_violation(tmp_path: Path, monkeypatch) -> None:
    """The walker itself must see an upward import, or the test above proves nothing."""
    fake = tmp_path / "tinyhw"
    (fake / "mocks").mkdir(parents=True)
    (fake / "mocks" / "bad.py").write_text("from tinyhw.usb.bridge import Asm24\nimport click\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", fake)
    found = violations()
    assert any("layer 2 (mocks) imports layer 2 (tinyhw.usb)" in f for f in found)
    assert any("imports click" in f for f in found)
