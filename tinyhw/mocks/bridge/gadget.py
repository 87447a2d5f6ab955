"""The FunctionFS front end of the emulated ASM24 bridge: the device core served as a real USB device.

Implements specs/usb-real-stack-harness.md ("Gadget set-up" step 3 and "ep0 events") over the
device core of :mod:`tinyhw.mocks.bridge.asm24` (identity: specs/asm24-usb-bridge.md §2-§3). Like the
pyusb front end it only translates; every decision (answers, stalls, requests left unanswered,
faults, counters) is the core's:

- ep0 (one thread): 12-byte events. SETUP -> :meth:`Asm24Bridge.control`; an IN reply is written
  to ep0, an OUT data stage is read from ep0 only once the core takes it (:class:`DataStage`), a
  request without data is acknowledged by a zero-length read. A stall is the opposite operation
  (a read for IN, a write for OUT). A request the core leaves unanswered (:class:`Timeout`) gets
  no data stage: the host times out, and the kernel cancels the setup when the next event
  arrives. ENABLE (SET_CONFIGURATION / SET_INTERFACE) and DISABLE reach the core as the
  configuration changes they are; UNBIND unconfigures it.
- ep1 (bulk IN 0x81) and ep2 (bulk OUT 0x02), one thread each: the kernel shows packets, not the
  host's transfers, so the core says how much it will move (``endpoints.in_pending``,
  ``endpoints.out_pending``) and that much is one transfer; nothing is queued while the core would NAK.
- Order: the host's transfers reach the core in the order the host made them. The kernel completes a
  bulk OUT as soon as the ep2 thread's read returns, and a synchronous host (libusb, the custom
  firmware's host) then sends its next request at once, while the ep2 thread may not yet hold the lock
  to hand the data on. So a request (or SET_CONFIGURATION) that arrives while the core still expects
  OUT data it was told of first waits for that data to land (at most :data:`OUT_LANDING_S`; a host that
  armed a stream and never sent its data is then served, once). Without this a streamed write could
  reach the core after the next 0xF0 request, which cancels the stream (asm24-usb-bridge.md §6), and
  the data was dropped: a page program then programmed a stale ROM_SW window (the flaky resume test).
  Only requests the pending data can affect wait: an XDATA read (0xE4) of bytes no bulk OUT data reaches
  or changes (:func:`independent_of_out_data`) is answered at once, as the device answers it whatever its
  bulk pipe does. An asynchronous host sends such reads before the data on purpose: tinygrad's copy-in
  queues an 0xF2 arm and an 0xE4 read of the drain fence together and sends the chunk only when both are
  answered; waiting for that chunk cost :data:`OUT_LANDING_S` a chunk (and under load, its 1 s timeout).
- :class:`Disconnect` from the core (``disconnect@N``) asks the owner to take the device off the
  bus (``on_disconnect``: unbind the UDC), which is what the host then sees.
- Time: the host waits on its wall clock, so the core runs on a :class:`WallPacedClock` (modelled
  time never lags wall time) and is handed no host time limit (``timeout=None``).
- EPIPE, EBADF or ENODEV on ep0 end the service (the function is gone); ESHUTDOWN or EPIPE on a
  bulk endpoint end that transfer (endpoint disabled or reset) and the thread waits for the next.

Not forwarded by the kernel, hence not seen by the core: standard requests (GET_DESCRIPTOR,
CLEAR_FEATURE(halt), ...), which the kernel answers from the descriptors written here. A bulk
stall halts the endpoint in the kernel and clears it in the core at once.

The configfs side (gadget, configuration, UDC binding) is :mod:`tinyhw.mocks.bridge.gadget_configfs`.
No third-party library: os.read/os.write on the FunctionFS files, select.epoll, threads.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import struct
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.mocks.bridge.asm24 import Asm24Bridge, DataStage, Disconnect, Stall, Timeout, UsbFault
from tinyhw.mocks.bridge.usb_descriptors import EP_IN, EP_OUT, PRODUCT, bulk_interface
from tinyhw.mocks.common.vclock import VirtualClock

# FunctionFS user-space ABI (include/uapi/linux/usb/functionfs.h)
DESCRIPTORS_MAGIC_V2 = 3
STRINGS_MAGIC = 2
HAS_FS_DESC, HAS_HS_DESC, HAS_SS_DESC = 0x01, 0x02, 0x04
ALL_CTRL_RECIP = 0x40
EVENT_SIZE = 12
BIND, UNBIND, ENABLE, DISABLE, SETUP, SUSPEND, RESUME = range(7)
EVENT_NAMES = ("bind", "unbind", "enable", "disable", "setup", "suspend", "resume")
LANGID_EN_US = 0x0409
#: longest a request waits for bulk OUT data the core expects (see "Order" above): far above any scheduling
#: delay of the ep2 thread, paid in full only after a host armed a stream and never sent its data
OUT_LANDING_S = 0.5

#: XDATA that bulk OUT data reaches or changes (asm24-usb-bridge.md §4.2, §6, §7.1): the landing page of streamed
#: write packets, the TLP engine's registers (a streamed write's TLPs end up described there), the SRAM window
#: (0xF2 data)
OUT_DATA_XDATA = ((0x7000, 0x8000), (0xB200, 0xB2A0), (0xF000, 0x10000))

_GONE = (errno.EPIPE, errno.EBADF, errno.ENODEV)  # ep0: the function or file system has gone
_ENDED = (errno.ESHUTDOWN, errno.EPIPE, errno.ECONNRESET, errno.EIDRM)  # a bulk transfer was aborted


def _descriptor_count(blob: bytes) -> int:
    pos = count = 0
    while pos + 2 <= len(blob) and blob[pos]:
        pos += blob[pos]
        count += 1
    return count


def ffs_descriptors() -> bytes:
    """The v2 descriptors blob written first to ep0: full- and high-speed sets of interface 0 with
    bulk 0x81/0x02 (64 / 512-byte packets), and ALL_CTRL_RECIP so the bridge's vendor requests to
    the *device* (bmRequestType 0x40/0xC0) reach the function."""
    fs, hs = bulk_interface("fs"), bulk_interface("hs")
    counts = struct.pack("<II", _descriptor_count(fs), _descriptor_count(hs))
    body = counts + fs + hs
    return struct.pack("<III", DESCRIPTORS_MAGIC_V2, 12 + len(body), HAS_FS_DESC | HAS_HS_DESC | ALL_CTRL_RECIP) + body


def ffs_strings(strings: tuple[str, ...] = (PRODUCT,)) -> bytes:
    """The strings blob written second: one language (en-US) with NUL-terminated UTF-8 strings."""
    body = struct.pack("<H", LANGID_EN_US) + b"".join(s.encode() + b"\0" for s in strings)
    return struct.pack("<IIII", STRINGS_MAGIC, 16 + len(body), len(strings), 1) + body


def independent_of_out_data(ev: Event) -> bool:
    """True for a request bulk OUT data cannot affect: an XDATA read (0xE4, bank 0, no wrap) of bytes outside
    :data:`OUT_DATA_XDATA`. It needs no wait for OUT data the core expects (see "Order" above); every other
    request (0xF0 and 0xF2, which cancel or add to what the data is for, 0xE5, reads of those bytes) does."""
    if (ev.type, ev.rt, ev.req, ev.wi) != (SETUP, 0xC0, 0xE4, 0):
        return False
    lo, hi = ev.wv, ev.wv + ev.wlen
    return hi <= 0x10000 and not any(lo < end and start < hi for start, end in OUT_DATA_XDATA)


class WallPacedClock(VirtualClock):
    """The emulator's clock when a real host drives it: never behind the wall time since start.

    The host waits on its wall clock (a flash erase polled for a second), so the modelled time
    must pass at least as fast; modelled latencies still push it ahead (``advance``).
    """

    def __init__(self) -> None:
        super().__init__(0.0)
        self._t0 = time.monotonic()

    def now(self) -> float:
        """Seconds since the clock started: the wall time elapsed, or the modelled time when latencies pushed it further
        ahead."""
        return max(self._t, time.monotonic() - self._t0)

    def advance(self, seconds: float) -> None:
        """Move the modelled time ``seconds`` past now (never behind the wall clock); non-positive values do nothing."""
        if seconds > 0:
            self._t = self.now() + seconds


@dataclass(frozen=True)
class Event:
    """One ep0 event: its type and, for SETUP, the setup packet."""

    type: int
    rt: int = 0
    req: int = 0
    wv: int = 0
    wi: int = 0
    wlen: int = 0

    @classmethod
    def parse(cls, raw: bytes) -> Event:
        """Decode one 12-byte ``usb_functionfs_event`` read from ep0 (setup packet fields, then the event type)."""
        rt, req, wv, wi, wlen, etype = struct.unpack("<BBHHHB3x", raw)
        return cls(etype, rt, req, wv, wi, wlen)

    def pack(self) -> bytes:
        """The 12-byte ``usb_functionfs_event`` this event is (the inverse of :meth:`parse`).
        """
        return struct.pack("<BBHHHB3x", self.rt, self.req, self.wv, self.wi, self.wlen, self.type)

    @property
    def name(self) -> str:
        """The FunctionFS event's name (``bind``, ``setup``, ...), or ``event N`` for a type the kernel headers do not
        name."""
        return EVENT_NAMES[self.type] if self.type < len(EVENT_NAMES) else f"event {self.type}"


def _retry(fn: Callable[[], Any]) -> Any:
    """Repeat a system call interrupted by a signal or refused while the kernel holds its lock."""
    while True:
        try:
            return fn()
        except InterruptedError:
            continue
        except BlockingIOError:
            threading.Event().wait(0.002)


class FunctionFsGadget:
    """Serves ``bridge`` on the FunctionFS instance mounted at ``ffs_dir``.

    :meth:`open` writes the descriptors and strings (do it before binding the UDC), :meth:`start`
    runs the three threads, :meth:`stop` ends them (bulk transfers still in flight end when the
    UDC is unbound), :meth:`close` closes the files. ``opener(path, flags)`` opens a file
    (default :func:`os.open`; tests hand socket pairs). ``on_disconnect`` is called (from its own
    thread) when the core disconnects. The core is only touched under :attr:`lock`.
    """

    def __init__(self, bridge: Asm24Bridge, ffs_dir: Path | str, *,
                 opener: Callable[[str, int], int] = os.open,
                 on_disconnect: Callable[[], None] | None = None) -> None:
        self.bridge = bridge
        bridge.hold_bus_writes = False  # a real host on a wall-paced clock: the GPU's writes land at once
        self.dir = Path(ffs_dir)
        self.opener = opener
        self.on_disconnect = on_disconnect
        self.lock = threading.Condition()
        self.enabled = False
        self.stopping = False
        self.event_counts: dict[str, int] = {}  # ep0 events seen, by name (for the report)
        self.errors: list[str] = []  # unexpected errors met while serving (the service goes on)
        self.teardown_errors: list[str] = []  # set-up steps whose undoing failed (gadget_configfs)
        self.ep0 = self.ep_in = self.ep_out = -1
        self._threads: list[threading.Thread] = []
        self._wake_r, self._wake_w = os.pipe()
        self._wait_any = select.epoll()  # level-triggered: an event to read, or stop
        self._wait_new = select.epoll()  # edge-triggered: a new ep0 event after a pending setup
        self._disconnect_requested = False
        #: how long a request waits for expected bulk OUT data (tests shorten it)
        self.out_landing_s = OUT_LANDING_S
        #: the OUT data the core expects was waited for in vain: later requests do not wait for it again
        self._out_given_up = False
        #: requests that found the core still expecting bulk OUT data: "landed" (it came first), "given_up"
        self.out_landing = {"landed": 0, "given_up": 0}

    # -- set-up -------------------------------------------------------------------------------------
    def open(self) -> None:
        """Open ep0 and write the descriptors and strings; ep1 and ep2 then exist."""
        self.ep0 = self.opener(str(self.dir / "ep0"), os.O_RDWR | os.O_CLOEXEC)
        _retry(lambda: os.write(self.ep0, ffs_descriptors()))
        _retry(lambda: os.write(self.ep0, ffs_strings()))
        self.ep_in = self.opener(str(self.dir / "ep1"), os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        self.ep_out = self.opener(str(self.dir / "ep2"), os.O_RDWR | os.O_CLOEXEC | os.O_NONBLOCK)
        for ep in (self._wait_any, self._wait_new):
            ep.register(self._wake_r, select.EPOLLIN)
        self._wait_any.register(self.ep0, select.EPOLLIN)
        self._wait_new.register(self.ep0, select.EPOLLIN | select.EPOLLET)

    def start(self) -> None:
        """Start the three daemon threads that serve ep0 (setup requests), the bulk IN and the bulk OUT endpoint."""
        for name, target in (("ep0", self._ep0_loop), ("ep1-in", self._in_loop), ("ep2-out", self._out_loop)):
            t = threading.Thread(target=target, name=f"gadget-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float = 5.0) -> bool:
        """Ask every thread to end and wait for them; False if one is still blocked in a transfer."""
        with self.lock:
            self.stopping = True
            self.lock.notify_all()
        os.write(self._wake_w, b"x")
        for t in self._threads:
            t.join(timeout)
        return not any(t.is_alive() for t in self._threads)

    def close(self) -> None:
        """Close the endpoint files and the wake-up pipe, which ends the serving threads; safe to call twice."""
        for fd in (self.ep_in, self.ep_out, self.ep0):
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.ep0 = self.ep_in = self.ep_out = -1
        for ep in (self._wait_any, self._wait_new):
            ep.close()
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1

    @property
    def running(self) -> bool:
        """True while any of the serving threads is still alive."""
        return any(t.is_alive() for t in self._threads)

    def _note(self, message: str) -> None:
        self.errors.append(message)
        print(f"gadget: {message}", file=sys.stderr)

    # -- ep0 -----------------------------------------------------------------------------------------------
    def _ep0_loop(self) -> None:
        try:
            while not self.stopping:
                event = self._next_event()
                if event is not None:
                    self._dispatch(event)
        except OSError as e:
            if e.errno not in _GONE:
                self._note(f"ep0 failed: {e}")
        finally:
            with self.lock:
                self.stopping = True
                self.enabled = False
                self.lock.notify_all()

    def _next_event(self) -> Event | None:
        if not any(fd != self._wake_r for fd, _ in self._wait_any.poll()):
            return None
        try:
            raw = _retry(lambda: os.read(self.ep0, EVENT_SIZE))
        except OSError as e:
            if e.errno == errno.EIDRM:  # the setup left unanswered was cancelled by the host's next request
                return None
            raise
        if len(raw) < EVENT_SIZE:
            if not raw:
                raise OSError(errno.EPIPE, "ep0 closed")
            return None
        return Event.parse(raw[:EVENT_SIZE])

    def _dispatch(self, ev: Event) -> None:
        self.event_counts[ev.name] = self.event_counts.get(ev.name, 0) + 1
        if ev.type == SETUP:
            self._setup(ev)
        elif ev.type in (ENABLE, DISABLE, UNBIND):
            with self.lock:
                if ev.type == ENABLE:
                    self._let_out_data_land()
                self.enabled = ev.type == ENABLE
                # ENABLE follows SET_CONFIGURATION(1) and SET_INTERFACE(0, 0): both reset the endpoints.
                with contextlib.suppress(UsbFault):  # a disconnected core: nothing to configure
                    self.bridge.control(0x00, 9, 1 if self.enabled else 0, 0, 0)
                self.lock.notify_all()

    def _receive(self, n: int) -> bytes:
        """The OUT data stage, read once the core takes it; the host may have given up meanwhile."""
        try:
            return _retry(lambda: os.read(self.ep0, n))
        except OSError as e:
            if e.errno in (errno.EIDRM, errno.ECONNRESET, errno.ESHUTDOWN):
                raise Timeout("the host cancelled the request before its data stage") from None
            raise

    def _setup(self, ev: Event) -> None:
        self._wait_new.poll(0)  # forget wakeups up to here: only a later event cancels this setup
        is_in = bool(ev.rt & 0x80)
        data: int | bytes | DataStage = ev.wlen if is_in else (DataStage(ev.wlen, self._receive) if ev.wlen else b"")
        outcome: str
        reply: bytes | int = b""
        with self.lock:
            if not independent_of_out_data(ev):
                self._let_out_data_land()
            expected = self._out_expected()
            try:
                reply = self.bridge.control(ev.rt, ev.req, ev.wv, ev.wi, data)
                outcome = "ok"
            except Stall:
                outcome = "stall"
            except Timeout:
                outcome = "silent"
            except Disconnect:
                outcome = "disconnect"
            except Exception as e:  # strict-emulation errors must not end the service
                self._note(f"request 0x{ev.rt:02x}/0x{ev.req:02x} wValue 0x{ev.wv:04x} wIndex 0x{ev.wi:04x}: {e}")
                outcome = "stall"
            if self._out_expected() != expected:  # a new arm or a cancel: wait for it afresh
                self._out_given_up = False
            self.lock.notify_all()
        if outcome == "ok":
            self._answer(ev, reply)
        elif outcome == "stall":
            self._stall(is_in)
        else:
            if outcome == "disconnect":
                self._request_disconnect()
            self._wait_cancelled()

    def _out_expected(self) -> tuple[int, int]:
        """What the core expects on ep2: (bytes, arms so far)."""
        eps = self.bridge.endpoints
        return eps.out_pending(), eps.out_arms

    def _let_out_data_land(self) -> None:
        """Under the lock, before the core sees the host's next request: if the core expects bulk OUT data
        (a streamed write or a 0xF2 arm it answered), give the ep2 thread the chance to hand it on first.
        A synchronous host sent that data before this request; the kernel completed it, only our thread
        may lag. Ends when the data has landed, the bus goes, or after :attr:`out_landing_s`."""
        pending = self.bridge.endpoints.out_pending
        if self._out_given_up or not pending():
            return
        deadline = time.monotonic() + self.out_landing_s
        while pending() and self.enabled and not self.stopping and not self.bridge.disconnected:
            left = deadline - time.monotonic()
            if left <= 0:
                self._out_given_up = True  # the host armed a transfer and moved on without sending it
                self.out_landing["given_up"] += 1
                return
            self.lock.wait(left)
        if not pending():
            self.out_landing["landed"] += 1

    def _answer(self, ev: Event, reply: bytes | int) -> None:
        try:
            if isinstance(reply, bytes) and ev.rt & 0x80:
                _retry(lambda: os.write(self.ep0, reply))
            elif not ev.wlen:
                _retry(lambda: os.read(self.ep0, 0))  # status stage of a request without data
        except OSError as e:
            if e.errno not in (errno.EIDRM, errno.ESRCH, errno.ECONNRESET, errno.ESHUTDOWN):
                raise

    def _stall(self, is_in: bool) -> None:
        """Stall the pending request: the operation opposite to its direction."""
        try:
            if is_in:
                _retry(lambda: os.read(self.ep0, 0))
            else:
                _retry(lambda: os.write(self.ep0, b""))
        except OSError as e:
            if e.errno not in (errno.EL2HLT, errno.EIDRM, errno.ESRCH, errno.EBADMSG, errno.ECONNRESET,
                               errno.ESHUTDOWN):
                raise

    def _wait_cancelled(self) -> None:
        """Leave the setup unanswered until the kernel reports a newer event (which cancels it) or stop."""
        while not self.stopping:
            if self._wait_new.poll(1.0):
                return

    def _request_disconnect(self) -> None:
        if self._disconnect_requested or self.on_disconnect is None:
            return
        self._disconnect_requested = True
        threading.Thread(target=self.on_disconnect, name="gadget-disconnect", daemon=True).start()

    # -- bulk endpoints ------------------------------------------------------------------------------------
    def _wait_for(self, pending: Callable[[], int]) -> int:
        """Under the lock: wait until enabled with something to move (returns how much) or stopping (0)."""
        while not self.stopping:
            if self.enabled and not self.bridge.disconnected:
                n = pending()
                if n:
                    return n
            self.lock.wait(0.5)
        return 0

    def _in_loop(self) -> None:
        while True:
            with self.lock:
                n = self._wait_for(self.bridge.endpoints.in_pending)
                if not n:
                    return
                try:
                    data = self.bridge.bulk_in(EP_IN, n)
                except Stall:
                    self._halt(self.ep_in, EP_IN)
                    continue
                except Disconnect:
                    self._request_disconnect()
                    continue
                except UsbFault:
                    continue
            if data and not self._bulk_io(lambda d=data: os.write(self.ep_in, d)):
                return

    def _out_loop(self) -> None:
        while True:
            with self.lock:
                n = self._wait_for(self.bridge.endpoints.out_pending)
            if not n:
                return
            got: list[bytes] = []
            if not self._bulk_io(lambda g=got, k=n: g.append(self._read_out(k))):
                return
            if not got:
                continue
            with self.lock:
                self._out_given_up = False
                try:
                    self.bridge.bulk_out(EP_OUT, got[0])
                except Stall:
                    self._halt(self.ep_out, EP_OUT)
                except Disconnect:
                    self._request_disconnect()
                except Timeout:  # the host's transfer has completed, yet the core no longer takes it
                    self._note(f"bulk out data of {len(got[0])} bytes the host sent was refused by the core "
                               "(nothing armed any more)")
                except UsbFault:
                    pass  # the data already moved on the bus; the core logged its verdict
                self.lock.notify_all()

    def _read_out(self, n: int) -> bytes:
        """One read of bulk OUT data from ep2: returns once the kernel has completed the host's transfer."""
        return os.read(self.ep_out, n)

    def _bulk_io(self, op: Callable[[], Any]) -> bool:
        """One bulk read or write; False when the service is ending. EAGAIN: the endpoint is not
        enabled (FunctionFS with O_NONBLOCK) - wait for a change and let the caller ask again."""
        while not self.stopping:
            try:
                op()
                return True
            except InterruptedError:
                continue
            except BlockingIOError:
                with self.lock:
                    self.lock.wait(0.01)
                return True
            except OSError as e:
                if e.errno in _ENDED:
                    return not self.stopping
                if e.errno in (errno.EBADF, errno.ENODEV):
                    return False
                self._note(f"bulk transfer failed: {e}")
                return not self.stopping
        return False

    def _halt(self, fd: int, ep: int) -> None:
        """A stalled bulk transfer: halt the endpoint (the opposite operation on its file); the host's
        CLEAR_FEATURE(halt) is answered by the kernel, so the core's halt is cleared now."""
        try:
            if ep & 0x80:
                os.read(fd, 0)
            else:
                os.write(fd, b"")
        except OSError:
            pass
        self.bridge.endpoints.halt_cleared(ep)
