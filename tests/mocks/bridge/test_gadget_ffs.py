"""The FunctionFS front end against a fake FunctionFS: socket pairs stand for ep0/ep1/ep2 and the
test plays the kernel (events in, replies and stalls out), per specs/usb-real-stack-harness.md.

Observable on the fake: IN replies and OUT stalls (an empty write) on ep0, bulk data on ep1/ep2;
an acknowledgement and an IN stall are zero-length reads, visible only through the core's log.
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
import time
from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31UsbOptions
from tinyhw.boards.options import FaultPlan
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.mocks.bridge.asm24 import Asm24Bridge
from tinyhw.mocks.bridge.gadget import (
    ALL_CTRL_RECIP,
    DISABLE,
    ENABLE,
    SETUP,
    UNBIND,
    Event,
    FunctionFsGadget,
    ffs_descriptors,
    ffs_strings,
)
from tinyhw.mocks.common.vclock import VirtualClock


def test_descriptor_blob_v2_fs_and_hs() -> None:
    blob = ffs_descriptors()
    magic, length, flags, fs_count, hs_count = struct.unpack_from("<IIIII", blob)
    assert (magic, length, fs_count, hs_count) == (3, len(blob), 3, 3)
    assert flags == 0x01 | 0x02 | ALL_CTRL_RECIP
    descs, pos = [], 20
    while pos < len(blob):
        descs.append(blob[pos:pos + blob[pos]])
        pos += blob[pos]
    assert pos == len(blob)
    intf_fs, in_fs, out_fs, intf_hs, in_hs, out_hs = descs
    for intf in (intf_fs, intf_hs):  # vendor class 0xff/0xff/0xff, two endpoints (§2)
        assert intf[1] == 4 and intf[4] == 2 and tuple(intf[5:8]) == (0xFF, 0xFF, 0xFF)
    for ep, addr, mps in ((in_fs, 0x81, 64), (out_fs, 0x02, 64), (in_hs, 0x81, 512), (out_hs, 0x02, 512)):
        assert struct.unpack("<BBBBHB", ep) == (7, 5, addr, 0x02, mps, 0)


def test_strings_blob() -> None:
    blob = ffs_strings(("custom v0.1",))
    assert struct.unpack_from("<IIII", blob) == (2, len(blob), 1, 1)
    assert blob[16:] == b"\x09\x04custom v0.1\0"


class FakeFfs:
    """The kernel's side of a FunctionFS instance: one SOCK_SEQPACKET pair per endpoint file."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.pairs = {n: socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET) for n in ("ep0", "ep1", "ep2")}
        for name in self.pairs:
            (tmp / name).touch()
        self.kernel = {n: p[0] for n, p in self.pairs.items()}
        for s in self.kernel.values():
            s.settimeout(2.0)

    def opener(self, path: str, flags: int) -> int:
        fd = os.dup(self.pairs[Path(path).name][1].fileno())
        os.set_blocking(fd, not flags & os.O_NONBLOCK)
        return fd

    def event(self, etype: int, rt: int = 0, req: int = 0, wv: int = 0, wi: int = 0, wlen: int = 0) -> None:
        self.kernel["ep0"].send(Event(etype, rt, req, wv, wi, wlen).pack())

    def recv(self, name: str = "ep0", timeout: float = 2.0) -> bytes | None:
        self.kernel[name].settimeout(timeout)
        try:
            return self.kernel[name].recv(1 << 20)
        except TimeoutError:
            return None

    def close(self) -> None:
        for a, b in self.pairs.values():
            a.close()
            b.close()


@pytest.fixture
def rig(tmp_path: Path):
    made = []

    def make(faults: str = "") -> tuple[FunctionFsGadget, FakeFfs, Asm24Bridge]:
        options = Navi31UsbOptions(flash=tmp_path / "flash.bin", speed="hs", faults=FaultPlan.parse(faults))
        clock = VirtualClock()
        board = Navi31Board(options, clock, attach="usb", spec=NAVI31)
        bridge = Asm24Bridge(board, options, clock)
        ffs = FakeFfs(tmp_path)
        disconnects = threading.Event()
        gadget = FunctionFsGadget(bridge, tmp_path, opener=ffs.opener, on_disconnect=disconnects.set)
        gadget.disconnects = disconnects  # type: ignore[attr-defined]
        gadget.open()
        assert ffs.recv() == ffs_descriptors()
        assert ffs.recv() == ffs_strings()
        gadget.start()
        ffs.event(ENABLE)
        made.append((gadget, ffs, board))
        return gadget, ffs, bridge

    yield make
    for gadget, ffs, board in made:
        assert gadget.stop()
        gadget.close()
        ffs.close()
        board.close()


def _log_len(gadget: FunctionFsGadget, n: int, timeout: float = 2.0) -> list:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        with gadget.lock:
            log = list(gadget.bridge.log)
        if len(log) >= n:
            return log
        time.sleep(0.005)
    raise AssertionError(f"the core saw {len(log)} transfers, expected {n}")


def test_vendor_in_and_out_requests(rig) -> None:
    gadget, ffs, bridge = rig()
    ffs.event(SETUP, 0xC0, 0xE4, 0xB450, 0, 1)  # LTSSM: link up (§7.1)
    assert ffs.recv() == b"\x78"
    ffs.event(SETUP, 0x40, 0xE5, 0xF010, 0x5A, 0)  # one byte into the SRAM window, acknowledged
    _log_len(gadget, 2)
    ffs.event(SETUP, 0xC0, 0xE4, 0xF010, 0, 2)
    assert ffs.recv() == b"\x5a\x00"
    log = _log_len(gadget, 3)
    assert [r.status for r in log] == ["ok", "ok", "ok"]
    assert bridge.configuration == 1 and gadget.event_counts["enable"] == 1


def test_out_data_stage_read_only_when_taken(rig) -> None:
    gadget, ffs, bridge = rig()
    # 0xF0 OUT with the wrong length: stalled before any data moves (an empty write = OUT stall)
    ffs.event(SETUP, 0x40, 0xF0, 0x0004, 0, 8)
    assert ffs.recv() == b""
    # a configuration read of the root port's id register through 0xF0 OUT (12 bytes) + 0xF0 IN (8)
    ffs.event(SETUP, 0x40, 0xF0, 0x0F04, 0, 12)
    ffs.kernel["ep0"].send(struct.pack("<III", 0, 0, 0))
    _log_len(gadget, 2)
    ffs.event(SETUP, 0xC0, 0xF0, 0, 0, 8)
    record = ffs.recv()
    assert record is not None and len(record) == 8 and record[7] == 0  # result 0: completed
    assert [r.status for r in _log_len(gadget, 3)] == ["stall", "ok", "ok"]


def test_unknown_vendor_requests_follow_the_firmware(rig) -> None:
    """§4.8: wLength 0 is acknowledged; otherwise no data stage, the host times out."""
    gadget, ffs, bridge = rig()
    ffs.event(SETUP, 0x40, 0xE7, 0, 0, 0)
    _log_len(gadget, 1)
    ffs.event(SETUP, 0xC0, 0xE7, 0, 0, 16)  # IN: nothing is written back
    assert ffs.recv(timeout=0.3) is None
    ffs.event(SETUP, 0x40, 0xE7, 0, 0, 4)  # OUT with data: the data stage is never read
    _log_len(gadget, 3)
    ffs.event(SETUP, 0xC0, 0xE4, 0xB450, 0, 1)  # the next request is served normally
    assert ffs.recv() == b"\x78"
    assert [r.status for r in _log_len(gadget, 4)] == ["ok", "timeout", "timeout", "ok"]


def test_in_stall_is_logged(rig) -> None:
    gadget, ffs, bridge = rig()
    ffs.event(SETUP, 0xC0, 0xF0, 0, 0, 4)  # 0xF0 IN must ask for 8 bytes
    assert ffs.recv(timeout=0.3) is None
    assert _log_len(gadget, 1)[0].status == "stall"


def test_bulk_out_and_in_through_f2(rig) -> None:
    gadget, ffs, bridge = rig()
    ffs.event(SETUP, 0x40, 0xF2, 1, 0x0100, 0)  # host -> SRAM, 1 sector at slot 0
    _log_len(gadget, 1)
    payload = bytes(range(256)) * 2
    ffs.kernel["ep2"].send(payload)
    log = _log_len(gadget, 2)
    assert (log[1].kind, log[1].endpoint, log[1].length, log[1].status) == ("bulk_out", 0x02, 512, "ok")
    assert bytes(bridge.memory.sram[:512]) == payload
    ffs.event(SETUP, 0x40, 0xF2, 0x8001, 0x0100, 0)  # SRAM -> host, released by a GPU write into 0x822000
    _log_len(gadget, 3)
    with gadget.lock:
        assert bridge.endpoints.dma_release(0x82200C, 4)
        gadget.lock.notify_all()
    assert ffs.recv("ep1") == payload
    log = _log_len(gadget, 4)
    assert (log[3].kind, log[3].endpoint, log[3].length, log[3].status) == ("bulk_in", 0x81, 512, "ok")


def test_nothing_moves_while_the_core_would_nak(rig) -> None:
    gadget, ffs, bridge = rig()
    ffs.kernel["ep2"].send(b"\0" * 64)  # nothing armed: the data waits, unread
    time.sleep(0.2)
    assert bridge.log == [] and ffs.recv("ep1", timeout=0.1) is None


def test_disable_unbind_and_enable_reconfigure(rig) -> None:
    gadget, ffs, bridge = rig()
    ffs.event(DISABLE)
    deadline = time.monotonic() + 60  # a hang bound, not a speed check
    while bridge.configuration and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bridge.configuration == 0 and not gadget.enabled
    ffs.event(ENABLE)
    ffs.event(SETUP, 0xC0, 0xE4, 0xB450, 0, 1)
    assert ffs.recv() == b"\x78"
    ffs.event(UNBIND)
    while gadget.enabled and time.monotonic() < deadline:
        time.sleep(0.01)
    assert bridge.configuration == 0


def test_disconnect_fault_takes_the_device_off_the_bus(rig) -> None:
    gadget, ffs, bridge = rig("disconnect@2")
    ffs.event(SETUP, 0xC0, 0xE4, 0xB450, 0, 1)
    assert ffs.recv() == b"\x78"
    ffs.event(SETUP, 0xC0, 0xE4, 0xB450, 0, 1)
    assert gadget.disconnects.wait(2.0)  # type: ignore[attr-defined]
    assert ffs.recv(timeout=0.2) is None
    assert [r.status for r in _log_len(gadget, 2)] == ["ok", "disconnect"]


def test_ep0_closed_by_the_kernel_ends_the_service(rig) -> None:
    gadget, ffs, bridge = rig()
    ffs.kernel["ep0"].close()
    deadline = time.monotonic() + 60  # a hang bound, not a speed check
    while gadget.running and time.monotonic() < deadline:
        time.sleep(0.01)
    assert gadget.stopping and not any(t.name == "gadget-ep0" and t.is_alive() for t in threading.enumerate())


def test_wall_paced_clock_never_lags_wall_time() -> None:
    from tinyhw.mocks.bridge.gadget import WallPacedClock

    c = WallPacedClock()
    c.advance(5.0)
    assert 5.0 <= c.now() < 5.5
    t = c.now()
    time.sleep(0.02)
    assert c.now() == t  # ahead of wall time: only advance moves it
    c2 = WallPacedClock()
    time.sleep(0.05)
    assert c2.now() >= 0.05  # idle: wall time passes on the device too


# (bmRequestType, bRequest, wValue, wIndex, wLength or OUT data): link state, a config read of the root
# port (0xF0 OUT + IN), an XDATA write and read-back, unknown requests with and without data, a bad 0xF0.
SEQUENCE = [
    (0xC0, 0xE4, 0xB450, 0, 1), (0x40, 0xF0, 0x0F04, 0, bytes(12)), (0xC0, 0xF0, 0, 0, 8),
    (0x40, 0xE5, 0xF020, 0x33, b""), (0xC0, 0xE4, 0xF020, 0, 4), (0x40, 0xE7, 0, 0, b""),
    (0xC0, 0xE7, 0, 0, 16), (0x40, 0xE7, 0, 0, b"\1\2"), (0x40, 0xF0, 0x0004, 0, bytes(8)), (0xC0, 0xE4, 0xB450, 0, 1),
]


def test_both_front_ends_give_the_core_the_same_transfers(rig, tmp_path: Path) -> None:
    """One device core, two front ends: the same requests leave the same transfer log."""
    import usb.core

    from tinyhw.mocks.bridge.pyusb_backend import make_backend

    options = Navi31UsbOptions(flash=tmp_path / "flash.bin", speed="hs")
    clock = VirtualClock()
    board = Navi31Board(options, clock, attach="usb", spec=NAVI31)
    backend = make_backend(board, options, clock)
    dev = usb.core.find(idVendor=0xADD1, backend=backend)
    for rt, req, wv, wi, data in SEQUENCE:
        with contextlib.suppress(usb.core.USBError):
            dev.ctrl_transfer(rt, req, wv, wi, data, 1000)
    expected = list(backend.bridge.log)
    board.close()

    gadget, ffs, bridge = rig()
    for n, (rt, req, wv, wi, data) in enumerate(SEQUENCE, 1):
        ffs.event(SETUP, rt, req, wv, wi, data if isinstance(data, int) else len(data))
        if isinstance(data, bytes) and data and req == 0xF0 and len(data) == 12:
            ffs.kernel["ep0"].send(data)
        _log_len(gadget, n)
        while ffs.recv(timeout=0.05) is not None:  # replies and stalls, not compared here
            pass
    assert _log_len(gadget, len(SEQUENCE)) == expected
