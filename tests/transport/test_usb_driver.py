"""The usb driver's vendor requests against the emulated bridge (through pyusb): XDATA, SRAM DMA,
streams, byte-lane config accesses, packet sizes from the descriptors."""

from __future__ import annotations

import pytest

from tinyhw.boards.navi31 import NAVI31
from tinyhw.connect import open_device
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.transport.devstr import parse_device
from tinyhw.usb.transport import UsbTransport


@pytest.fixture
def usb_board():
    opened = open_device(parse_device("mock:navi31-usb,timing=instant"))
    try:
        yield opened
    finally:
        opened.close()


def _bridge_core(opened):
    return opened.transport.found.device._ctx.backend.bridge


def test_xdata_read_write_and_window(usb_board) -> None:
    br = usb_board.transport.bridge
    assert br.xdata_read(0xB450, 1) == b"\x78"
    br.xdata_write(0xF010, 0x5A)  # 0xF000 is a window onto SRAM 0x200000
    assert br.xdata_read(0xF000, 0x20)[0x10] == 0x5A
    before = usb_board.transport.counters.usb_transfers
    data = br.xdata_read(0xF000, 600)  # split into 255-byte pieces on SuperSpeed
    assert len(data) == 600 and usb_board.transport.counters.usb_transfers - before == 3
    with pytest.raises(Refused):
        br.xdata_read(0xFFF0, 0x20)


def test_sram_dma_write_then_read_released_by_the_gpu(usb_board) -> None:
    br = usb_board.transport.bridge
    payload = bytes(range(256)) * 40  # 10 KiB, not a multiple of 512
    br.sram_write(0, payload)
    assert br.xdata_read(0xF000, 255) == payload[:255]  # XDATA window onto the first 4 KiB
    br.sram_read_arm(len(payload))
    core = _bridge_core(usb_board)
    core.dma_write(0x82200C, b"\0\0\0\0")  # the GPU's release write (asm24-usb-bridge.md §9.4)
    assert br.sram_read_collect(len(payload)) == payload


def test_unreleased_sram_read_times_out(usb_board) -> None:
    br = usb_board.transport.bridge
    br.sram_read_arm(512)
    with pytest.raises(DeviceTimeout):
        br.sram_read_collect(512)


def test_streams_and_single_accesses_agree(usb_board) -> None:
    t = usb_board.transport
    vram = t.bar(0)
    blob = bytes((i * 7) & 0xFF for i in range(3000 * 4))
    vram.write(0x1000, blob)
    assert vram.read(0x1000, len(blob)) == blob
    assert vram.read32(0x1004) == int.from_bytes(blob[4:8], "little")
    vram.write32(0x2000, 0xCAFEF00D)
    assert vram.read(0x2000, 4) == (0xCAFEF00D).to_bytes(4, "little")
    with pytest.raises(Refused):
        vram.read(0x1002, 4)


def test_config_byte_lanes(usb_board) -> None:
    t = usb_board.transport
    assert t.config_read(0x00, 2) == 0x1002 and t.config_read(0x02, 2) == 0x744C
    assert t.config_read(0x08, 1) == 0xC8 and t.config_read(0x0B, 1) == 0x03
    before = t.config_read(0x0C, 4)
    t.config_write(0x0C, 1, 0x10)  # cache line size: one byte lane; header type (byte 2) must not change
    after = t.config_read(0x0C, 4)
    assert after & 0xFF == 0x10 and after >> 8 == before >> 8
    assert t.config_read(0x0E, 1) == (before >> 16) & 0xFF


def test_packet_sizes_come_from_the_descriptors() -> None:
    for speed, packet, ep0 in (("ss", 1024, 512), ("hs", 512, 64)):
        opened = open_device(parse_device(f"mock:navi31-usb,speed={speed}"))
        try:
            ep = opened.transport.endpoints
            assert (ep.in_packet, ep.out_packet, ep.ep0_packet) == (packet, packet, ep0)
            assert (ep.bulk_in, ep.bulk_out) == (0x81, 0x02)
            before = opened.transport.counters.usb_transfers
            assert len(opened.transport.bridge.xdata_read(0xF000, 255)) == 255
            assert opened.transport.counters.usb_transfers - before == (1 if speed == "ss" else 4)
        finally:
            opened.close()


def test_no_bridge_present_is_exit_3() -> None:
    from tinyhw.boards.navi31 import Navi31UsbOptions
    from tinyhw.mocks.amd.board import Navi31Board
    from tinyhw.mocks.bridge.pyusb_backend import make_backend
    from tinyhw.mocks.common.vclock import VirtualClock

    clock = VirtualClock()
    board = Navi31Board(Navi31UsbOptions(), clock, attach="usb", spec=NAVI31)
    try:
        backend = make_backend(board, Navi31UsbOptions(), clock)
        with pytest.raises(Exception) as e:
            UsbTransport("5", backend=backend, clock=clock)
        assert getattr(e.value, "exit_code", None) == 3 and "usb:5" in str(e.value)
    finally:
        board.close()


class _Dev:
    """A stand-in pyusb device whose transfers fail as libusb does when a device leaves mid-transfer."""

    def __init__(self, second: Exception | None) -> None:
        self.second = second
        self.calls = 0

    def ctrl_transfer(self, *args):
        import usb.core

        self.calls += 1
        if self.calls == 1:
            raise usb.core.USBError("Input/Output Error", error_code=-1, errno=5)
        if self.second is not None:
            raise self.second
        return bytes([0x78])


def test_io_error_of_a_vanished_device_is_a_disconnect() -> None:
    import usb.core

    from tinyhw.errors import Disconnected, TransportError
    from tinyhw.mocks.common.vclock import VirtualClock
    from tinyhw.transport.counters import Counters
    from tinyhw.usb.bridge import Asm24
    from tinyhw.usb.device import Endpoints

    ep = Endpoints(0x81, 0x02, 1024, 1024, 512)
    gone = Asm24(_Dev(usb.core.USBError("No such device", error_code=-4, errno=19)), ep, Counters(), VirtualClock())
    with pytest.raises(Disconnected, match="device disconnected during xdata read"):
        gone.xdata_read(0xB450, 1)
    still_there = Asm24(_Dev(None), ep, Counters(), VirtualClock())
    with pytest.raises(TransportError, match="usb i/o error") as e:
        still_there.xdata_read(0xB450, 1)
    assert not isinstance(e.value, Disconnected)
