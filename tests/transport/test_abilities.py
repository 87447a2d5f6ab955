"""Optional abilities are checked explicitly, with a clear error when a transport lacks them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import tinyhw
from tinyhw.connect import open_device
from tinyhw.errors import NotAvailableYet
from tinyhw.pci.sysfs import SysfsTransport
from tinyhw.pci.vfio import VfioTransport
from tinyhw.transport.abilities import DmaBuffers, Interrupts, Resettable
from tinyhw.transport.base import require
from tinyhw.transport.devstr import parse_device


def test_native_transports_declare_their_abilities() -> None:
    assert issubclass(VfioTransport, DmaBuffers) and issubclass(VfioTransport, Interrupts)
    assert issubclass(VfioTransport, Resettable) and issubclass(SysfsTransport, Resettable)
    assert not issubclass(SysfsTransport, DmaBuffers)


@pytest.mark.parametrize("board", ["mock:navi31-usb"])  # mock:navi31 has host dma buffers (tests/bench/test_dmacopy.py)
def test_missing_ability_is_a_clear_error(board: str) -> None:
    opened = open_device(parse_device(board))
    try:
        with pytest.raises(NotAvailableYet, match="cannot allocate dma buffers"):
            require(opened.transport, DmaBuffers, "allocate dma buffers")
    finally:
        opened.close()


# -- features use abilities, never a transport's internals (ARCHITECTURE.md, "The transport seam") -------------------

ROOT = Path(tinyhw.__file__).parent
#: the features (layer 3a and 3b) and the front end; they are handed a transport and may use only its seam
FEATURE_PACKAGES = ("flash", "firmware", "probe", "boot", "bench", "prof", "kernels", "cli")
#: what the usb transport holds inside: its bridge object (the vendor requests) and its pyusb pieces
TRANSPORT_INSIDES = {"bridge", "found", "endpoints", "enumeration"}


def reach_violations(root: Path = ROOT) -> list[str]:
    """Every place a feature module reads another object's private attribute (``x._ctrl``, ``x.bridge._ctrl``;
    ``self``/``cls`` are its own), one of the usb transport's insides (``transport.bridge``), or asks for either
    by name (``getattr(t, "bridge")``, ``hasattr(t, "_dev")``)."""
    found = []
    for package in FEATURE_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            rel = path.relative_to(root)
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Attribute):
                    name = node.attr
                    own = isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")
                    private = name.startswith("_") and not name.startswith("__") and not own
                    if private or name in TRANSPORT_INSIDES:
                        found.append(f"{rel}:{node.lineno}: reads {ast.unparse(node)}")
                elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                        and node.func.id in ("getattr", "hasattr", "setattr") and len(node.args) > 1 \
                        and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str):
                    name = node.args[1].value
                    if (name.startswith("_") and not name.startswith("__")) or name in TRANSPORT_INSIDES:
                        found.append(f"{rel}:{node.lineno}: asks for {name!r} ({ast.unparse(node)})")
    return found


def test_features_reach_no_transport_internals() -> None:
    assert reach_violations() == []


REACH = {
    # file under a fake tinyhw -> source that reaches past the seam
    "boot/copy.py": "def f(engine):\n    engine.gpu.transport.bridge.xdata_read(0, 1)\n",
    "bench/arm.py": "def f(sram):\n    sram._ctrl(0x40, 0xF2, 1, 0, b'', 1.0, 'arm')\n",
    "cli/look.py": "def f(t):\n    return getattr(t, 'bridge', None)\n",
    "flash/dev.py": "def f(t):\n    return hasattr(t, '_dev')\n",
}


def test_the_reach_scan_sees_each_kind(tmp_path: Path) -> None:
    fake = tmp_path / "tinyhw"
    for rel, source in REACH.items():
        (fake / rel).parent.mkdir(parents=True, exist_ok=True)
        (fake / rel).write_text(source)
    (fake / "boot" / "fine.py").write_text("class C:\n    def f(self):\n        return self._x, self.__class__\n")
    found = reach_violations(fake)
    for rel in REACH:
        assert any(f.startswith(rel) for f in found), (rel, found)
    assert not any(f.startswith("boot/fine.py") for f in found)


def test_bridge_sram_is_the_usb_transports_only() -> None:
    """The usb transport (mock:navi31-usb here) has the bridge-SRAM ability; a direct board and the remote
    transport (which forwards no vendor request) get the same one-line refusal (exit 2) from every sram path."""
    from tinyhw.bench import sram_path
    from tinyhw.boot.amd.usbcopy import open_copier
    from tinyhw.errors import Refused
    from tinyhw.remote.client import RemoteTransport
    from tinyhw.transport.abilities import BridgeSram
    from tinyhw.usb.transport import UsbTransport

    assert issubclass(UsbTransport, BridgeSram)
    assert not issubclass(RemoteTransport, BridgeSram)
    opened = open_device(parse_device("mock:navi31"))
    try:
        for call in (sram_path, open_copier):
            with pytest.raises(Refused, match="cannot copy through the usb bridge's sram") as e:
                call(opened.transport)
            assert e.value.exit_code == 2
    finally:
        opened.close()


def test_bridge_sram_operations_send_the_specs_requests() -> None:
    """Each named operation is the §4.5/§4.2 request it names (read back from the emulated bridge's log and SRAM)."""
    from tinyhw.errors import Refused

    opened = open_device(parse_device("mock:navi31-usb"))
    try:
        t = opened.transport
        emulated = t.found.device._ctx.backend.bridge
        t.write_sram(1, b"\x5a" * 600)  # arm 2 sectors at slot 1 (one slot), one 1024-byte bulk OUT
        arm, data = emulated.log[-2:]
        assert (arm.setup.rt, arm.setup.req, arm.setup.wv, arm.setup.wi) == (0x40, 0xF2, 2, 1 | 1 << 8)
        assert data.kind == "bulk_out" and data.length == 1024
        assert bytes(emulated.memory.sram[0x4000:0x4000 + 601]) == b"\x5a" * 600 + b"\0"
        t.arm_host_to_sram(16, 0x40000)  # the second copy-in window: 512 sectors from slot 16, 16 slots
        setup = emulated.log[-1].setup
        assert (setup.req, setup.wv, setup.wi) == (0xF2, 0x200, 16 | 16 << 8)
        for slot, length in ((0, 1000), (31, 0x8000), (0, 0)):
            with pytest.raises(Refused, match="must be a positive multiple of 512"):
                t.arm_host_to_sram(slot, length)
        t.write_xdata(0xA800, 0x42)
        assert t.read_xdata(0xA800, 2)[0] == 0x42
        assert t.sram_queue_kind() == "emulated"
    finally:
        opened.close()
