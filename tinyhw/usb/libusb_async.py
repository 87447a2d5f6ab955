"""libusb-1.0's asynchronous bulk transfers through ctypes, on the device handle pyusb already opened.

Facts from libusb 1.0's public header and API documentation (specs/asm24-usb-bridge.md §4.7 names the published
host's use of them): ``struct libusb_transfer`` is {dev_handle*, uint8 flags, uchar endpoint, uchar type, uint
timeout (ms), enum status, int length, int actual_length, callback, void *user_data, uchar *buffer, int
num_iso_packets, iso descriptors[]}; ``libusb_fill_bulk_transfer`` is an inline function, so the fields are set
here; ``libusb_alloc_transfer(0)`` / ``libusb_submit_transfer`` / ``libusb_cancel_transfer`` /
``libusb_free_transfer``; completions are delivered by ``libusb_handle_events_timeout_completed`` on the thread
that calls it (here: the caller's, inside ``submit``/``wait``/``abort``). Transfers on one endpoint complete in
submission order. A transfer's buffer and struct are freed only after its callback ran (after a cancel too);
one that never reports back (it should not happen) is kept alive for the rest of the process rather than freed
under libusb. Errors are raised as pyusb's (``USBError`` / ``USBTimeoutError`` with libusb's codes) so that the
caller's usual conversion applies.

:class:`LibusbAsync` is the adapter that gives pyusb's libusb-1.0 backend the queued-bulk interface
(:class:`tinyhw.transport.abilities.QueuedBulk`); it is the one place tinyhw relies on pyusb's internals.
"""

from __future__ import annotations

import ctypes
import errno
import time
from typing import Any

from tinyhw.transport.submitq import QueueLifetime
from tinyhw.usb.device import _usb

TRANSFER_TYPE_BULK = 2
# enum libusb_transfer_status
COMPLETED, ERROR, TIMED_OUT, CANCELLED, STALL, NO_DEVICE, OVERFLOW = range(7)
ERROR_NOT_FOUND, ERROR_NO_DEVICE = -5, -4
# status -> (libusb error code, message, errno) as pyusb reports the same condition from a synchronous transfer
_STATUS_ERRORS = {
    ERROR: (-1, "Input/Output Error", errno.EIO),
    TIMED_OUT: (-7, "Operation timed out", errno.ETIMEDOUT),
    CANCELLED: (-1, "Transfer cancelled", errno.EIO),
    STALL: (-9, "Pipe error", errno.EPIPE),
    NO_DEVICE: (-4, "No such device (it may have been disconnected)", errno.ENODEV),
    OVERFLOW: (-8, "Overflow", errno.EOVERFLOW),
}
_LEAKED: list[Any] = []  # transfers that never reported back: their memory must outlive libusb's use of it
REAP_S = 2.0  # how long abort waits for cancelled transfers to report back


class Transfer(ctypes.Structure):
    """``struct libusb_transfer`` without its flexible array of iso packet descriptors (none for bulk)."""

    _fields_ = [
        ("dev_handle", ctypes.c_void_p),
        ("flags", ctypes.c_uint8),
        ("endpoint", ctypes.c_ubyte),
        ("type", ctypes.c_ubyte),
        ("timeout", ctypes.c_uint),
        ("status", ctypes.c_int),
        ("length", ctypes.c_int),
        ("actual_length", ctypes.c_int),
        ("callback", ctypes.c_void_p),
        ("user_data", ctypes.c_void_p),
        ("buffer", ctypes.c_void_p),
        ("num_iso_packets", ctypes.c_int),
    ]


class Timeval(ctypes.Structure):
    """libusb's ``struct timeval`` (seconds and microseconds) for ``libusb_handle_events_timeout``."""

    _fields_ = [("tv_sec", ctypes.c_long), ("tv_usec", ctypes.c_long)]


CALLBACK = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class PyBuffer(ctypes.Structure):
    """CPython's ``Py_buffer`` (the buffer protocol's view struct, Include/pybuffer.h): ``buf`` is the first byte."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.c_void_p),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_GET_BUFFER = ctypes.pythonapi.PyObject_GetBuffer
_GET_BUFFER.argtypes = (ctypes.py_object, ctypes.POINTER(PyBuffer), ctypes.c_int)
_GET_BUFFER.restype = ctypes.c_int
_RELEASE_BUFFER = ctypes.pythonapi.PyBuffer_Release
_RELEASE_BUFFER.argtypes = (ctypes.POINTER(PyBuffer),)
_RELEASE_BUFFER.restype = None
PYBUF_SIMPLE = 0  # a contiguous run of bytes, read-only is fine


class Pinned:
    """``data``'s bytes held in place for libusb: a buffer-protocol export of ``data`` itself (bytes, bytearray, a
    contiguous memoryview slice of either, an array), so the transfer reads the caller's memory with no copy and the
    exporter cannot be resized or freed until :meth:`release` (after the transfer reported back). Only what exports
    no contiguous buffer is copied once (``copied``)."""

    def __init__(self, data: Any) -> None:
        self.view = PyBuffer()
        self.copied = False
        try:
            if _GET_BUFFER(data, ctypes.byref(self.view), PYBUF_SIMPLE) != 0:  # pragma: no cover - raises instead
                raise BufferError("no simple buffer")
            self.held = True
        except (BufferError, TypeError):
            data = bytes(memoryview(data).cast("B")) if isinstance(data, memoryview) else bytes(data)
            _GET_BUFFER(data, ctypes.byref(self.view), PYBUF_SIMPLE)
            self.held, self.copied = True, True
        self.data = data  # the exporter stays alive as long as the pin
        self.length = self.view.len
        self.address = self.view.buf

    def release(self) -> None:
        """Give the export back (once)."""
        if self.held:
            self.held = False
            _RELEASE_BUFFER(ctypes.byref(self.view))


def _bind(lib: Any, name: str, restype: Any, *argtypes: Any) -> Any:
    """Our own prototype of a libusb function (pyusb's function objects keep their own argtypes)."""
    return ctypes.CFUNCTYPE(restype, *argtypes)((name, lib))


def _error(code: int, message: str, err: int) -> Exception:
    usb = _usb()
    cls = usb.core.USBTimeoutError if code == -7 else usb.core.USBError
    return cls(message, code, err)


class LibusbAsync:
    """pyusb's libusb-1.0 backend seen through :class:`tinyhw.transport.abilities.QueuedBulk`.

    pyusb has no public way to the libusb context and device handle it holds, so this adapter relies on these
    internals of pyusb 1.x (checked with 1.2 and 1.3):

    * the backend object is a ``usb.backend.libusb1._LibUSB`` with ``lib`` (the ctypes library of libusb-1.0) and
      ``ctx`` (its ``libusb_context *``);
    * ``usb.core.Device._ctx`` is a ``usb.core._ResourceManager`` whose ``managed_open()`` returns the open
      ``_DeviceHandle`` (opening it if needed), and that handle's ``handle`` is the ``libusb_device_handle *``.

    :meth:`adapt` checks them before anything is queued and returns None when they do not hold (another backend,
    another pyusb): the caller then uses its worker-thread fallback (:mod:`tinyhw.usb.queued`).
    """

    queue_kind = "libusb-async"

    def __init__(self, lib: Any, ctx: Any) -> None:
        self.lib, self.ctx = lib, ctx

    @classmethod
    def adapt(cls, backend: Any) -> LibusbAsync | None:
        """The adapter for ``backend``, or None unless it is pyusb's libusb-1.0 backend as described above."""
        try:
            import usb.core
            from usb.backend import libusb1
        except ImportError:  # pragma: no cover - part of pyusb
            return None
        backend_class = getattr(libusb1, "_LibUSB", None)
        manager = getattr(usb.core, "_ResourceManager", None)
        if backend_class is None or not isinstance(backend, backend_class) \
                or not callable(getattr(manager, "managed_open", None)):
            return None
        lib, ctx = getattr(backend, "lib", None), getattr(backend, "ctx", None)
        return None if lib is None or ctx is None else cls(lib, ctx)

    @staticmethod
    def device_handle(device: Any) -> Any:
        """The ``libusb_device_handle *`` pyusb opened for ``device`` (a ``usb.core.Device``)."""
        return device._ctx.managed_open().handle

    def open_bulk_queue(self, device: Any, ep: int, depth: int, timeout_ms: int) -> LibusbBulkQueue:
        """A :class:`LibusbBulkQueue` on endpoint ``ep`` of ``device``'s libusb handle, ``depth`` transfers in flight,
        ``timeout_ms`` ms each."""
        return LibusbBulkQueue(self.lib, self.ctx, self.device_handle(device), ep, depth, timeout_ms)


class LibusbBulkQueue(QueueLifetime):
    """Bulk OUT transfers on ``ep`` of an open libusb handle, at most ``depth`` in flight."""

    def __init__(self, lib: Any, ctx: Any, handle: Any, ep: int, depth: int, timeout_ms: int) -> None:
        self.ctx = ctx.value if isinstance(ctx, ctypes.c_void_p) else ctx
        self.handle = handle.value if isinstance(handle, ctypes.c_void_p) else handle
        self.ep, self.depth, self.timeout_ms = ep, depth, timeout_ms
        vp = ctypes.c_void_p
        self._alloc = _bind(lib, "libusb_alloc_transfer", vp, ctypes.c_int)
        self._submit = _bind(lib, "libusb_submit_transfer", ctypes.c_int, vp)
        self._cancel = _bind(lib, "libusb_cancel_transfer", ctypes.c_int, vp)
        self._free = _bind(lib, "libusb_free_transfer", None, vp)
        self._events = _bind(lib, "libusb_handle_events_timeout_completed", ctypes.c_int, vp,
                             ctypes.POINTER(Timeval), ctypes.POINTER(ctypes.c_int))
        self._cb = CALLBACK(self._done)  # kept alive as long as this queue
        self.slots: dict[int, list] = {}  # ticket -> [transfer address, length, status or None, actual, pin]
        self.by_addr: dict[int, int] = {}
        self.submitted = 0
        self.copies = 0  # transfers whose data had to be copied (no contiguous buffer to pin); 0 for bytes and views
        self.finished = 0  # every ticket up to this one completed without error
        self.error: Exception | None = None
        self.closed = False

    # -- libusb's callback (on the thread handling events: ours) ------------------------------------------
    def _done(self, addr: int) -> None:
        ticket = self.by_addr.get(addr)
        if ticket is None:
            return
        t = Transfer.from_address(addr)
        slot = self.slots[ticket]
        slot[2], slot[3] = t.status, t.actual_length

    def _pump(self, seconds: float = 0.1) -> None:
        tv = Timeval(int(seconds), int((seconds % 1) * 1e6))
        rc = self._events(self.ctx, ctypes.byref(tv), None)
        if rc < 0 and rc != -10:  # LIBUSB_ERROR_INTERRUPTED: just look again
            self._latch(_error(rc, f"libusb event handling failed ({rc})", errno.EIO))
        self._reap()

    def _reap(self) -> None:
        """Account completed transfers in order; free their memory; latch the first failure."""
        while self.finished < self.submitted:
            slot = self.slots.get(self.finished + 1)
            if slot is None or slot[2] is None:
                break
            status, actual = slot[2], slot[3]
            self._release(self.finished + 1)
            if status != COMPLETED or actual != slot[1]:
                if self.error is None:
                    if status == COMPLETED:
                        self._latch(_error(-1, f"short bulk write: {actual} of {slot[1]} bytes", errno.EIO))
                    else:
                        self._latch(_error(*_STATUS_ERRORS.get(status, (-99, f"status {status}", errno.EIO))))
                return
            self.finished += 1

    def _release(self, ticket: int) -> None:
        slot = self.slots.pop(ticket)
        self.by_addr.pop(slot[0], None)
        self._free(slot[0])
        slot[4].release()

    def _latch(self, e: Exception) -> None:
        if self.error is None:
            self.error = e
            self._cancel_all()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    def _cancel_all(self) -> None:
        for slot in self.slots.values():
            if slot[2] is None:
                self._cancel(slot[0])  # NOT_FOUND: already done or never submitted; the callback still comes

    def _until(self, ready: Any, limit_s: float) -> bool:
        deadline = time.monotonic() + limit_s
        while True:
            self._reap()  # completions may have been delivered inside pyusb's synchronous calls meanwhile
            if ready():
                return True
            if time.monotonic() > deadline:
                return False
            self._pump()

    # -- the queue ---------------------------------------------------------------------------------------
    def submit(self, data: bytes | bytearray | memoryview) -> int:
        """Submit one asynchronous bulk OUT of ``data``; returns its ticket, blocking while ``depth`` are in flight;
        raises the latched failure, or a time-out as ``USBError``."""
        self._raise()
        if self.closed:
            raise _error(-2, "bulk queue is closed", errno.EINVAL)
        limit = self.timeout_ms / 1000 + 1.0
        if not self._until(lambda: self.error is not None or self.submitted - self.finished < self.depth, limit):
            self._latch(_error(-7, "Operation timed out", errno.ETIMEDOUT))
        self._raise()
        # zero-copy: libusb reads the caller's bytes in place, pinned (a buffer export) until the transfer reported
        pin = Pinned(data if len(data) else b"\0")  # a valid address even for a zero-length transfer
        length = pin.length if len(data) else 0
        addr = self._alloc(0)
        if not addr:
            pin.release()
            raise _error(-11, "Insufficient memory", errno.ENOMEM)
        t = Transfer.from_address(addr)
        t.dev_handle, t.flags, t.endpoint, t.type = self.handle, 0, self.ep, TRANSFER_TYPE_BULK
        t.timeout, t.status, t.length, t.actual_length = self.timeout_ms, 0, length, 0
        t.callback = ctypes.cast(self._cb, ctypes.c_void_p).value
        t.user_data, t.buffer, t.num_iso_packets = None, pin.address, 0
        ticket = self.submitted + 1
        self.slots[ticket] = [addr, length, None, 0, pin]
        self.by_addr[addr] = ticket
        self.copies += pin.copied
        rc = self._submit(addr)
        if rc != 0:
            self.slots.pop(ticket)
            self.by_addr.pop(addr, None)
            self._free(addr)
            pin.release()
            err = _error(rc, "No such device (it may have been disconnected)", errno.ENODEV) if rc == ERROR_NO_DEVICE \
                else _error(rc, f"libusb_submit_transfer failed ({rc})", errno.EIO)
            self._latch(err)
            raise err
        self.submitted = ticket
        return ticket

    def wait(self, ticket: int) -> None:
        """Handle libusb events until transfer ``ticket`` and all before it completed; raises the latched failure, or a
        time-out as ``USBError``."""
        limit = (ticket - self.finished) * (self.timeout_ms / 1000) + 1.0
        if not self._until(lambda: self.error is not None or self.finished >= ticket, limit):
            self._latch(_error(-7, "Operation timed out", errno.ETIMEDOUT))
        self._raise()

    def abort(self) -> None:
        """Cancel what is outstanding and reap it (bounded); what never reports back is kept, not freed."""
        if self.closed:
            return
        self.closed = True
        self._cancel_all()
        def reported() -> bool:
            return all(s[2] is not None for s in self.slots.values())

        self._until(reported, REAP_S)  # event-handling failures are latched, not raised
        for ticket in sorted(self.slots):
            if self.slots[ticket][2] is not None:
                self._release(ticket)
        if self.slots:
            _LEAKED.append((self._cb, list(self.slots.values())))
            self.slots.clear()
