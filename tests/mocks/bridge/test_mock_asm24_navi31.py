"""The emulated ASM24 bridge with the real emulated Navi31 board behind it (``Navi31Board(attach="usb", spec=NAVI31)``).

Spec: specs/asm24-usb-bridge.md §8 (enumeration incl. Resizable BAR, BAR assignment) and §6
(streams into VRAM), driven through pyusb only.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
import usb.core

from tests.mocks.bridge.test_mock_asm24 import (
    assign_bars,
    cfg_read,
    cfg_write,
    open_bridge,
    parse_record,
    program_bridges,
    tlp_completion,
    tlp_request,
)
from tinyhw.boards.navi31 import NAVI31

navi31 = pytest.importorskip("tinyhw.mocks.amd.board")


@pytest.fixture
def board(tmp_path: Path) -> Iterator[object]:
    from tinyhw.boards.navi31 import Navi31UsbOptions

    b = navi31.Navi31Board(Navi31UsbOptions(strict=True, flash=tmp_path / "flash.bin"), attach="usb", spec=NAVI31)
    yield b
    b.close()


def _rebar_to_largest(dev: usb.core.Device) -> int:
    """§8 step 2: walk the extended capabilities from 0x100 to REBAR (0x15) and pick the largest size."""
    off = 0x100
    while off:
        hdr = cfg_read(dev, 4, 0, 0, off)[0]
        if hdr & 0xFFFF == 0x15:
            cap = cfg_read(dev, 4, 0, 0, off + 4)[0]
            k = (cap >> 4).bit_length() - 1
            ctrl = cfg_read(dev, 4, 0, 0, off + 8)[0]
            cfg_write(dev, (4, 0, 0), off + 8, ctrl & ~0x1F00 | k << 8)
            return 1 << (k + 20)
        off = hdr >> 20 & ~3
    raise AssertionError("no resizable bar capability")


def test_enumerate_resize_and_assign_the_navi31(board: object) -> None:
    dev, _, _ = open_bridge(board)
    program_bridges(dev)
    assert cfg_read(dev, 4, 0, 0, 0)[:2] == (0x744C1002, 0)
    size = _rebar_to_largest(dev)
    bars = assign_bars(dev)
    assert bars[0] == (0x8_0000_0000, size) and size == 32 << 30
    assert bars[2][1] == 2 << 20 and bars[5] == (0x10000000, 1 << 20)
    assert 4 not in bars  # the I/O BAR is skipped


def test_vram_stream_round_trip_counts_board_accesses(board: object) -> None:
    dev, bridge, _ = open_bridge(board)
    program_bridges(dev)
    vram = assign_bars(dev)[0][0]
    data = bytes(range(256)) * 8
    before = board.accesses  # type: ignore[attr-defined]
    tlp_request(dev, 0x60, 0xF, vram + 0x2000, len(data) // 4, mode=1)
    assert dev.write(0x02, data) == len(data)
    tlp_request(dev, 0x20, 0xF, vram + 0x2000, len(data) // 4, mode=2)
    assert bytes(dev.read(0x81, len(data))) == data
    assert board.accesses - before == 2 * len(data) // 4  # type: ignore[attr-defined]
    tlp_request(dev, 0x20, 0xF, vram + 0x2004, 0)
    assert parse_record(tlp_completion(dev))[:2] == (struct.unpack_from("<I", data, 4)[0], 0)
    assert bridge.stats()["stream_dwords_written"] == 512


def test_disconnect_fault_reaches_the_board(board: object, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []
    monkeypatch.setattr(board, "disconnect", lambda: seen.append(True))
    dev, _, _ = open_bridge(board, faults="disconnect@1")
    with pytest.raises(usb.core.USBError):
        cfg_read(dev, 0, 0, 0, 0)
    assert seen == [True]


def test_a_gadget_transfer_of_a_streamed_write_lands_as_one_block(tmp_path: Path) -> None:
    """FunctionFS hands the core a bulk OUT transfer the kernel has already completed, with no host time limit
    (``timeout=None``, what ``tinyhw mock gadget`` passes). Its packets of an armed streaming write land as one burst
    into VRAM, not one Python round per 512-byte packet (a megabyte packet by packet kept the core busy for seconds
    in the emulated guest, past the 5 s tinygrad's libusb stack waits for its next 0xF0 request), with exactly the
    effect of the packet-by-packet path a pyusb host (with a time limit) takes: VRAM, the landing page, the TLP
    engine's registers, the counters and the modelled time."""
    from tinyhw.boards.navi31 import Navi31UsbOptions
    from tinyhw.mocks.bridge.asm24_memory import LANDING_BUF

    data = bytes((i * 7 + i // 512) & 0xFF for i in range((1 << 20) + 200))  # 2048 packets and a short one
    seen = {}
    for how in ("pyusb", "gadget"):
        b = navi31.Navi31Board(Navi31UsbOptions(strict=True, speed="hs", flash=tmp_path / f"{how}.bin"), attach="usb",
                               spec=NAVI31)
        try:
            dev, bridge, clock = open_bridge(b, speed="hs")
            program_bridges(dev)
            vram = assign_bars(dev)[0][0]
            bursts: list[int] = []
            block = b.mem_write_block
            b.mem_write_block = lambda bar, off, d, _b=block, _n=bursts: _n.append(len(d)) or _b(bar, off, d)  # type: ignore[method-assign]
            before = bridge.stats()
            tlp_request(dev, 0x60, 0xF, vram + 0x10000, len(data) // 4, mode=1)
            t1 = clock.now()
            sent = dev.write(0x02, data, timeout=5000) if how == "pyusb" else bridge.bulk_out(0x02, data)
            after, t2 = bridge.stats(), clock.now()
            assert sent == len(data)
            seen[how] = {
                "vram": b.vram.read(0x10000, len(data)),  # type: ignore[attr-defined]
                "landing": bytes(bridge.memory.read(LANDING_BUF, 512)),
                "engine": bytes(bridge.memory.read(0xB210, 0x90)),
                "counters": {k: after[k] - before[k] for k in ("stream_dwords_written", "tlp_writes", "bytes_out")},
                "remaining": bridge.endpoints.stream_remaining,
                "bursts": bursts,
                "write_s": t2 - t1,
            }
        finally:
            b.close()
    pyusb, gadget = seen["pyusb"], seen["gadget"]
    assert pyusb["vram"] == gadget["vram"] == data
    assert pyusb["landing"] == gadget["landing"]
    assert pyusb["engine"] == gadget["engine"]
    assert pyusb["counters"] == gadget["counters"]
    assert pyusb["remaining"] == gadget["remaining"] == 0
    assert gadget["write_s"] == pytest.approx(pyusb["write_s"], rel=1e-9)
    assert len(pyusb["bursts"]) == 2049 and gadget["bursts"] == [len(data)]
