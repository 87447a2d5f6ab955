"""The faults every emulated product shares live in tinyhw/mocks/common/faults.py, apart from any one product's
blocks."""

from __future__ import annotations

import ast
from pathlib import Path

import tinyhw
from tinyhw.mocks.amd import gpuvm, sdma
from tinyhw.mocks.common import faults, iommu, physram
from tinyhw.mocks.nvidia import nv_gsp

MOCKS = Path(tinyhw.__file__).parent / "mocks"


def test_bus_fault_is_one_shared_class() -> None:
    assert iommu.BusFault is physram.BusFault is sdma.BusFault is faults.BusFault
    assert issubclass(nv_gsp.BusError, faults.BusFault)
    assert "BusFault" not in vars(gpuvm)  # not the AMD GPU VM's: the IOMMU and the NVIDIA board raise it too


def test_no_module_takes_the_bus_fault_from_a_product_module() -> None:
    found = []
    for path in sorted(MOCKS.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and any(a.name == "BusFault" for a in node.names) \
                    and node.module != "tinyhw.mocks.common.faults":
                found.append(f"{path.relative_to(MOCKS)}:{node.lineno}: from {node.module} import BusFault")
    assert not found, "\n".join(found)
