"""The emulated bridge's bulk endpoints are a composed object: every attribute they use they define,
and their module does not import the bridge back (issue 10 item 16)."""

from __future__ import annotations

import ast
import inspect

from tinyhw.boards.navi31 import Navi31UsbOptions
from tinyhw.mocks.bridge import asm24_endpoints
from tinyhw.mocks.bridge.asm24 import Asm24Bridge
from tinyhw.mocks.bridge.asm24_endpoints import BulkEndpoints
from tinyhw.mocks.common.vclock import VirtualClock


def _undefined_self_attributes(cls: type) -> set[str]:
    """``self.X`` read anywhere in ``cls`` but neither assigned in ``__init__`` nor defined on the class."""
    tree = ast.parse(inspect.getsource(cls))
    init = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "__init__")
    assigned = {t.attr for n in ast.walk(init) if isinstance(n, (ast.Assign, ast.AnnAssign))
                for tgt in (n.targets if isinstance(n, ast.Assign) else [n.target])
                for t in ast.walk(tgt) if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                and t.value.id == "self"}
    used = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
            and n.value.id == "self"}
    return {a for a in used - assigned if not hasattr(cls, a)}


def test_endpoints_define_what_they_use() -> None:
    assert _undefined_self_attributes(BulkEndpoints) == set()


def test_no_mixin_and_no_import_back_to_the_bridge() -> None:
    source = inspect.getsource(asm24_endpoints)
    assert "tinyhw.mocks.bridge.asm24 " not in source + " " and "from tinyhw.mocks.bridge.asm24 import" not in source
    assert "Mixin" not in source
    assert Asm24Bridge.__mro__ == (Asm24Bridge, object)


def test_the_bridge_owns_one_endpoints_object(tmp_path) -> None:
    class Board:  # no TLP is sent here, so the board needs nothing
        pass

    bridge = Asm24Bridge(Board(), Navi31UsbOptions(flash=tmp_path / "f.bin"), VirtualClock())
    eps = bridge.endpoints
    assert isinstance(eps, BulkEndpoints)
    assert eps.counters is bridge.counters and eps.warnings is bridge.warnings and eps.busy is bridge.busy
    eps.arm_sram_read(8)
    assert eps.in_pending() == 0 and eps.dma_release(0x822000, 4) and eps.in_pending() == 8
