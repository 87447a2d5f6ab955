"""Queued bulk-OUT transfers on one endpoint: several in flight, completing in submission order.

Spec: specs/asm24-usb-bridge.md §4.7 (the published host's asynchronous layer: transfers on one endpoint complete
in the order they were submitted; the first failure is latched and every later wait raises it) and §12 item 12
(control and bulk endpoints progress independently). pyusb itself has only synchronous transfers, so
:func:`open_bulk_queue` asks the backend the device was opened with (pyusb's public ``Device.backend``) for the
documented queued-bulk interface, :class:`tinyhw.transport.abilities.QueuedBulk` (:func:`queued_bulk`):

* ``"emulated"`` — the emulated bridge's pyusb backend provides it (:mod:`tinyhw.mocks.bridge.pyusb_backend`; handed to
  us, never imported);
* ``"libusb-async"`` — pyusb's libusb-1.0 backend gets it through one adapter, libusb's asynchronous API on the
  handle pyusb opened (:class:`tinyhw.usb.libusb_async.LibusbAsync`, which lists the pyusb internals it needs);
* ``"worker"`` — anything else, or a pyusb the adapter does not recognise: synchronous writes made by one worker
  thread (:class:`tinyhw.transport.submitq.SubmitQueue`), one transfer in flight at a time.

Whatever the kind, the queue's interface is the same (:class:`tinyhw.transport.abilities.BulkQueue`):
``submit(data) -> ticket`` (blocks while ``depth`` transfers are outstanding), ``wait(ticket)`` (that transfer and
all before it done), ``close()`` (wait for all, release) and ``abort()`` (cancel what is outstanding, reap it,
release; never raises, never hangs on a vanished device). Errors come out on the caller's thread as tinyhw errors,
converted by ``convert`` (default: the usual choke point :func:`tinyhw.usb.device.convert_usb_error`: disconnect
-> :class:`~tinyhw.errors.Disconnected`, time-out -> :class:`~tinyhw.errors.DeviceTimeout`).
``TINYHW_USB_QUEUE=worker`` forces the fallback.
"""

from __future__ import annotations

import array
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tinyhw.transport.abilities import BulkQueue, QueuedBulk
from tinyhw.transport.base import has
from tinyhw.transport.clock import Clock
from tinyhw.transport.submitq import QueueLifetime, SubmitQueue, WorkerBacked
from tinyhw.usb.device import _usb, convert_usb_error

KINDS = ("emulated", "libusb-async", "worker")


class QueuedBulkOut(QueueLifetime):
    """A :class:`BulkQueue` whose errors are tinyhw errors (use as a context manager: close, or abort on error)."""

    def __init__(self, inner: BulkQueue, kind: str, convert: Callable[[Exception], Exception],
                 on_submit: Callable[[int], None] | None = None) -> None:
        self.inner, self.kind, self.convert, self.on_submit = inner, kind, convert, on_submit
        self.submitted = 0

    @contextmanager
    def _converted(self) -> Iterator[None]:
        usb = _usb()
        try:
            yield
        except usb.core.USBError as e:
            raise self.convert(e) from e

    def submit(self, data: bytes | bytearray | memoryview) -> int:
        """Queue one bulk OUT of ``data`` and return its ticket; pyusb errors become tinyhw errors."""
        with self._converted():
            self.submitted = self.inner.submit(data)
        if self.on_submit is not None:
            self.on_submit(len(data))
        return self.submitted

    def wait(self, ticket: int) -> None:
        """Block until transfer ``ticket`` and all before it completed (nothing for ticket 0); pyusb errors become
        tinyhw errors."""
        if ticket > 0:
            with self._converted():
                self.inner.wait(ticket)

    def close(self) -> None:
        """Wait for every transfer, then release the queue; pyusb errors become tinyhw errors."""
        with self._converted():
            self.inner.close()

    def abort(self) -> None:
        """Cancel what is outstanding and release the queue; never raises."""
        self.inner.abort()


class _WorkerQueue(WorkerBacked):
    """The fallback: pyusb's synchronous ``dev.write`` made by one worker thread, in order."""

    def __init__(self, dev: Any, ep: int, depth: int, timeout_ms: int, clock: Clock) -> None:
        self.dev, self.ep, self.timeout_ms = dev, ep, timeout_ms
        self.q = SubmitQueue(clock, depth=depth, name="tinyhw-usb-bulk-worker")

    def _write(self, data: bytes | bytearray | memoryview | array.array) -> None:
        if isinstance(data, memoryview):
            # pyusb turns a memoryview into its array element by element (~10 ms per 256 KiB, the hybrid clock
            # showed it: 20 MB/s); one frombytes is a memcpy
            buf = array.array("B")
            buf.frombytes(data)
            data = buf
        n = self.dev.write(self.ep, data, self.timeout_ms)
        if n != len(data):
            usb = _usb()
            raise usb.core.USBError(f"short bulk write: {n} of {len(data)} bytes", -1, 5)

    def submit(self, data: bytes | bytearray | memoryview) -> int:
        return self.q.submit(self._write, data)


def queued_bulk(dev: Any) -> QueuedBulk | None:
    """The queued-bulk interface for the opened pyusb device ``dev``: its backend's own, the libusb-1.0 adapter's,
    or None (the worker fallback; also when ``TINYHW_USB_QUEUE=worker``)."""
    if os.environ.get("TINYHW_USB_QUEUE") == "worker":
        return None
    backend = dev.backend
    if has(backend, QueuedBulk):
        return backend
    from tinyhw.usb.libusb_async import LibusbAsync

    return LibusbAsync.adapt(backend)


def queue_kind(dev: Any) -> str:
    """Which implementation :func:`open_bulk_queue` would use for this (opened) pyusb device: one of :data:`KINDS`."""
    provider = queued_bulk(dev)
    return "worker" if provider is None else provider.queue_kind


def open_bulk_queue(dev: Any, ep: int, depth: int, *, clock: Clock, timeout: float = 10.0,
                    what: str = "bulk out", convert: Callable[[Exception], Exception] | None = None,
                    kind: str | None = None, on_submit: Callable[[int], None] | None = None) -> QueuedBulkOut:
    """A queue of bulk OUT transfers to endpoint ``ep`` of the opened pyusb device ``dev`` (interface claimed),
    at most ``depth`` in flight, each with a time limit of ``timeout`` seconds. ``kind="worker"`` forces the
    fallback (default: :func:`queue_kind`); ``on_submit(nbytes)`` is called for each transfer submitted."""
    if depth < 1:
        raise ValueError("a bulk queue needs depth >= 1")
    if kind not in (None, *KINDS):
        raise ValueError(f"unknown bulk queue kind {kind!r}; known: {', '.join(KINDS)}")
    conv = convert or (lambda e: convert_usb_error(e, what))
    provider = None if kind == "worker" else queued_bulk(dev)
    chosen = "worker" if provider is None else provider.queue_kind
    if kind is not None and kind != chosen:
        raise ValueError(f"bulk queue kind {kind!r} is not available for this device (it offers {chosen!r})")
    timeout_ms = max(1, int(timeout * 1000))
    usb = _usb()
    try:
        inner: BulkQueue = _WorkerQueue(dev, ep, depth, timeout_ms, clock) if provider is None else \
            provider.open_bulk_queue(dev, ep, depth, timeout_ms)
    except usb.core.USBError as e:
        raise conv(e) from e
    return QueuedBulkOut(inner, chosen, conv, on_submit)
