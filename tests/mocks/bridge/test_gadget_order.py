"""The FunctionFS front end keeps the host's order: bulk OUT data the host has sent reaches the device core
before the host's next request (specs/usb-real-stack-harness.md, specs/asm24-usb-bridge.md §6).

Regression test for the flaky usb guest tier (``test_write_interrupted_by_a_disconnect_is_finished_by_resume``:
"verify failed at 0x1e2b00 in sector 482: flash 0x02, expected 0xe2"). The gadget's transfer log of that run
shows the cause: a page program's streamed write of the ROM_SW data window (0xF0 OUT mode 1, then a 256-byte
bulk OUT) reached the core AFTER the host's next request, the single-TLP write of ROM_SW_COMMAND. The kernel
completes the host's bulk OUT when the ep2 thread's read returns, but that thread hands the data to the core
only once it holds the gadget lock; in the slow guest the ep0 thread got there first. To the core that is a
new 0xF0 OUT inside a stream, which cancels it (§6); the data then found nothing armed and was dropped (logged
"timeout"), and the page program (PP) fired with the window still holding the last RDSR capture (SR1 = 0x02,
WEL): 0x02 where 0xe2 belonged. The chip was idle throughout; the flash driver did nothing wrong (its sector
read-back caught the bad page and the job stopped resumable).

Here the real usb and flash drivers run against the front end through a fake kernel (socket pairs, as in
tests/mocks/bridge/test_gadget_ffs.py) whose ep2 thread is held back after its read until the ep0 thread has begun
serving the next request: the late delivery is forced, so the test is deterministic.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import termios
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.mocks.bridge.test_gadget_ffs import FakeFfs
from tinyhw.boards.navi31 import NAVI31, Navi31UsbOptions
from tinyhw.flash.device import FlashDevice
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.mocks.bridge.asm24 import Asm24Bridge, Timeout
from tinyhw.mocks.bridge.gadget import ENABLE, SETUP, Event, FunctionFsGadget, ffs_descriptors, ffs_strings
from tinyhw.mocks.bridge.pyusb_backend import Asm24Backend, usb_error
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.usb import tlp
from tinyhw.usb.transport import UsbTransport

#: the failing run's page: sector 482, page 0xb00, erased before the job; the image's pattern (s + i) & 0xff
PAGE_ADDR = 0x1E2B00
PAGE_DATA = bytes((482 + i) & 0xFF for i in range(256))


class LateOutGadget(FunctionFsGadget):
    """The ep2 thread is descheduled right after its read returns (the kernel has completed the host's bulk
    OUT): it hands the data on only once the ep0 thread has begun serving the host's next request."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.next_request = threading.Event()
        self.held_back = 0

    def _setup(self, ev: Event) -> None:
        self.next_request.set()
        super()._setup(ev)

    def _read_out(self, n: int) -> bytes:
        self.next_request.clear()  # the request that armed this read has been served already
        data = super()._read_out(n)
        if self.next_request.wait(2.0):
            self.held_back += 1
            time.sleep(0.1)  # long enough for the ep0 thread to take the lock first, if it may
        return data


class FfsHost(Asm24Backend):
    """The host side of the fake kernel: vendor requests go through ep0 as SETUP events (+ data) and bulk
    data through ep1/ep2, so the gadget's threads hand them to the core; standard requests, which the real
    kernel answers from the descriptors, go straight to the core. A request without an IN data stage is
    complete when the core has logged it (the gadget's acknowledgement is a zero-length read, invisible here)."""

    def __init__(self, gadget: FunctionFsGadget, ffs: FakeFfs) -> None:
        super().__init__(gadget.bridge)
        self.gadget, self.ffs = gadget, ffs

    def _control(self, dev_handle: Any, setup: tuple[int, int, int, int], data: bytes | int,
                 timeout: int) -> bytes | int:
        rt = setup[0]
        if not rt & 0x60:
            with self.gadget.lock:
                return super()._control(dev_handle, setup, data, timeout)
        log = self.gadget.bridge.log
        with self.gadget.lock:
            seen = len(log)
        self.ffs.event(SETUP, *setup, data if isinstance(data, int) else len(data))
        if rt & 0x80:
            reply = self.ffs.recv("ep0", timeout=5.0)
            if reply is None:
                raise usb_error(Timeout("no data stage"))
            return reply
        assert isinstance(data, bytes)
        if data:
            self.ffs.kernel["ep0"].send(data)

        def served() -> Any:
            return next((r for r in log[seen:] if r.kind == "control"), None)

        with self.gadget.lock:
            assert self.gadget.lock.wait_for(served, timeout=5.0), f"request {setup} never reached the core"
            status = served().status
        if status != "ok":
            raise usb_error(Timeout(status))
        return len(data)

    def bulk_write(self, dev_handle: Any, ep: int, intf: int, data: Any, timeout: int) -> int:
        """Complete, as the kernel does, once the gadget's read has taken the data (the socket's queue is empty)."""
        payload = data.tobytes()
        sock = self.ffs.kernel["ep2"]
        sock.send(payload)
        deadline = time.monotonic() + (timeout / 1000 if timeout else 5.0)
        queued = array.array("i", [0])
        while True:
            fcntl.ioctl(sock.fileno(), termios.TIOCOUTQ, queued)  # SIOCOUTQ: bytes the peer has not read
            if not queued[0]:
                return len(payload)
            if time.monotonic() > deadline:
                raise usb_error(Timeout("bulk out not taken"))
            time.sleep(0.0005)

    def bulk_read(self, dev_handle: Any, ep: int, intf: int, buff: Any, timeout: int) -> int:
        got = self.ffs.recv("ep1", timeout=timeout / 1000 if timeout else 5.0)
        if got is None:
            raise usb_error(Timeout("bulk in"))
        memoryview(buff).cast("B")[: len(got)] = got
        return len(got)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[LateOutGadget, Navi31Board, FfsHost]]:
    options = Navi31UsbOptions(flash=tmp_path / "flash.bin", speed="hs", strict=True)
    clock = VirtualClock()
    board = Navi31Board(options, clock, attach="usb", spec=NAVI31)
    ffs = FakeFfs(tmp_path)
    gadget = LateOutGadget(Asm24Bridge(board, options, clock), tmp_path, opener=ffs.opener)
    gadget.out_landing_s = 5.0  # far above the 0.1 s hold-back, even on a loaded machine
    try:
        gadget.open()
        assert ffs.recv() == ffs_descriptors() and ffs.recv() == ffs_strings()
        gadget.start()
        ffs.event(ENABLE)
        yield gadget, board, FfsHost(gadget, ffs)
    finally:
        assert gadget.stop()
        gadget.close()
        ffs.close()
        board.close()


def test_window_data_that_lands_late_is_still_programmed(served, tmp_path: Path) -> None:
    gadget, board, host = served
    t = UsbTransport("", backend=host, clock=board.clock, lock=False, emulated=True)
    try:
        with FlashDevice(t) as dev:
            assert dev.chip.read(PAGE_ADDR, 256) == b"\xff" * 256  # erased: no erase needed, as in the job
            dev.chip.program_page(PAGE_ADDR, PAGE_DATA, sector=482)
            back = dev.chip.read(PAGE_ADDR, 256)
    finally:
        with contextlib.suppress(Exception):
            t.close()
    assert gadget.held_back >= 1  # the page's window write was delivered late
    assert gadget.out_landing["landed"] >= 1 and gadget.out_landing["given_up"] == 0
    assert back == PAGE_DATA, f"flash 0x{back[0]:02x}, expected 0x{PAGE_DATA[0]:02x} at 0x{PAGE_ADDR:06x}"
    log = gadget.bridge.log
    streams = [i for i, r in enumerate(log) if r.kind == "control" and r.setup[1] == 0xF0 and r.setup[3] == 1]
    assert streams
    for i in streams:  # each streamed write's data reached the core right after its setup, and was taken
        assert (log[i + 1].kind, log[i + 1].status) == ("bulk_out", "ok"), log[i:i + 3]
    assert gadget.errors == []


def test_a_stream_whose_data_never_comes_delays_the_next_request_once(tmp_path: Path) -> None:
    """A host that arms a streamed write and moves on without its data (a killed process): the next request the data
    could affect waits out the landing time once, the ones after it are served at once, and a fresh arm is waited
    for again. Reads the data cannot affect never wait."""
    options = Navi31UsbOptions(flash=tmp_path / "flash.bin", speed="hs", strict=True)
    clock = VirtualClock()
    board = Navi31Board(options, clock, attach="usb", spec=NAVI31)
    ffs = FakeFfs(tmp_path)
    gadget = FunctionFsGadget(Asm24Bridge(board, options, clock), tmp_path, opener=ffs.opener)
    gadget.out_landing_s = 0.3
    try:
        gadget.open()
        assert ffs.recv() == ffs_descriptors() and ffs.recv() == ffs_strings()
        gadget.start()
        ffs.event(ENABLE)
        log = gadget.bridge.log

        def arm() -> None:
            wv, wi, data = tlp.setup_packet(tlp.MWR64, 0xF, tlp.MODE_STREAM_WRITE, 0x10000000, 64)
            n = len(log)  # before the request: the gadget may serve it before this thread runs again
            ffs.event(SETUP, 0x40, 0xF0, wv, wi, len(data))
            ffs.kernel["ep0"].send(data)
            with gadget.lock:
                assert gadget.lock.wait_for(lambda: len(log) > n, timeout=2.0)
            assert gadget.bridge.endpoints.out_pending() == 256

        def xdata(addr: int, n: int = 1) -> tuple[bytes, float]:
            t0 = time.monotonic()
            ffs.event(SETUP, 0xC0, 0xE4, addr, 0, n)
            return ffs.recv(), time.monotonic() - t0

        # the waits are proved by the counters (a wait either lands or is given up); the times only bound below
        arm()
        # reads the pending data cannot change are answered at once: the LTSSM, the drain fence an asynchronous
        # host (tinygrad's copy-in) reads before it sends the data it armed
        assert xdata(0xB450)[0] == b"\x78" and xdata(0xA800, 8)[0] == bytes(8)
        assert gadget.out_landing == {"landed": 0, "given_up": 0}
        # a read of the TLP engine's registers (a streamed write's TLPs end up described there) waits for the data
        assert xdata(0xB296)[1] >= 0.3  # the data might still have been on its way
        assert gadget.out_landing == {"landed": 0, "given_up": 1}
        xdata(0xB296)  # given up on: not waited for again
        assert gadget.out_landing == {"landed": 0, "given_up": 1}
        arm()  # a new 0xF0 OUT: the old stream is cancelled, the new one is waited for
        assert xdata(0xB296)[1] >= 0.3
        assert [(r.kind, r.status) for r in log] == [("control", "ok")] * 7
        assert gadget.out_landing == {"landed": 0, "given_up": 2}
    finally:
        assert gadget.stop()
        gadget.close()
        ffs.close()
        board.close()


@pytest.mark.parametrize(("rt", "req", "addr", "length", "bank", "independent"), [
    (0xC0, 0xE4, 0xB450, 1, 0, True),  # LTSSM
    (0xC0, 0xE4, 0xA800, 8, 0, True),  # the copy-in drain fence in sys_buf
    (0xC0, 0xE4, 0x6FFF, 1, 0, True),  # the byte below the landing page
    (0xC0, 0xE4, 0x6FFF, 2, 0, False),  # into the landing page
    (0xC0, 0xE4, 0xB29F, 1, 0, False),  # the TLP engine's registers
    (0xC0, 0xE4, 0xB2A0, 1, 0, True),
    (0xC0, 0xE4, 0xEFFF, 2, 0, False),  # into the SRAM window
    (0xC0, 0xE4, 0xB450, 1, 1, False),  # the other bank: not judged, waits
    (0xC0, 0xF0, 0, 8, 0, False),  # a TLP completion, a stream: wait
    (0x40, 0xE5, 0xB450, 0, 0, False),  # writes wait
])
def test_which_requests_wait_for_out_data(rt: int, req: int, addr: int, length: int, bank: int,
                                          independent: bool) -> None:
    """Only XDATA reads of bytes no bulk OUT data reaches or changes skip the wait (asm24-usb-bridge.md §4.2, §6)."""
    from tinyhw.mocks.bridge.gadget import independent_of_out_data

    assert independent_of_out_data(Event(SETUP, rt, req, addr, bank << 8, length)) is independent
