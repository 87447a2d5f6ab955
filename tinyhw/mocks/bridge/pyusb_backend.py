"""The pyusb front end of the emulated ASM24 bridge: a ``usb.backend.IBackend`` over the device core.

Implements the host-visible side of specs/asm24-usb-bridge.md §2-§3 (enumeration, descriptors,
bus/address/port, speed) for pyusb, so that ``usb.core.find(..., backend=make_backend(...))``
hands the real USB driver an emulated device. All protocol behaviour lives in
:mod:`tinyhw.mocks.bridge.asm24`; this module only translates: pyusb arrays and millisecond time limits
in, core exceptions out as libusb's errors (timeout: ``USBTimeoutError`` -7 ETIMEDOUT; stall: -9
EPIPE; disconnect: -4 ENODEV; overflow: -8 EOVERFLOW), with libusb's messages.

This is the only module of :mod:`tinyhw.mocks` that imports pyusb; the rest of the package (and
any other front end) works without it.

Queued bulk OUT (libusb's asynchronous transfers as the published host uses them, §4.7): the backend
provides the documented queued-bulk interface (:class:`tinyhw.transport.abilities.QueuedBulk`,
``queue_kind = "emulated"``), which ``tinyhw.usb.queued`` asks of the backend a device was opened with.
:meth:`Asm24Backend.open_bulk_queue` takes the opened pyusb device and finds the handle pyusb opened on it by its
public bus and address (the backend keeps the handles it hands out). Transfers
submitted while the previous one of the queue is still in flight (in virtual time) reach the core marked
``queued`` and pay the pipe's ``bulk_gap_s`` instead of the full ``bulk_overhead_s``; they complete in submission
order at their modelled times, made by one enlisted worker thread (:class:`tinyhw.transport.submitq.SubmitQueue`)
that passes the clock's gate like any transfer, so runs stay deterministic. Errors are pyusb's, as from
``bulk_write``.

Hybrid clock: everything this backend does on a driver's thread (the conversions, the queue's
bookkeeping, the core's work) is the emulator's, not the host's: each entry point runs inside
``clock.service()``, and the queue's worker is enlisted ``host=False``, so a hybrid clock charges the driver's
threads only the CPU time they spend outside (tinyhw's and pyusb's own code). That is why the backend sets the
clock's ``hybrid_ok``. libusb's and the kernel's own CPU time per transfer, which this backend stands in for, is
therefore on no clock (the per-transfer costs the core models stand for the device side only).

Threads: libusb is thread-safe and so is this backend: every call into the core holds one lock, and
each transfer first passes the clock's gate (:meth:`tinyhw.mocks.common.vclock.VirtualClock.gate`), so
the transfers of a driver's threads reach the core in virtual-time order (deterministic runs).
"""

from __future__ import annotations

import array
import errno
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import wraps
from typing import Any, TypeVar

import usb.backend
import usb.core

from tinyhw.boards.amd import AmdBoardUsbOptions
from tinyhw.mocks.bridge.asm24 import Asm24Bridge, Disconnect, Overflow, Stall, Timeout, UsbFault
from tinyhw.mocks.bridge.pcie_switch import Endpoint
from tinyhw.mocks.bridge.usb_descriptors import (
    SPEED_HIGH,
    SPEED_SUPER_PLUS,
    ConfigDesc,
    DeviceDesc,
    EndpointDesc,
    InterfaceDesc,
    parse_configuration,
    parse_device,
)
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.transport.submitq import SubmitQueue, WorkerBacked

# libusb error codes and messages, as pyusb's libusb1 backend raises them.
_ERRORS: dict[type[UsbFault], tuple[int, str, int]] = {
    Timeout: (-7, "Operation timed out", errno.ETIMEDOUT),
    Stall: (-9, "Pipe error", errno.EPIPE),
    Disconnect: (-4, "No such device (it may have been disconnected)", errno.ENODEV),
    Overflow: (-8, "Overflow", errno.EOVERFLOW),
}
_NOT_FOUND = (-5, "Entity not found", errno.ENOENT)


def usb_error(exc: UsbFault) -> usb.core.USBError:
    """The pyusb exception a libusb backend raises for the same condition."""
    code, message, err = _ERRORS.get(type(exc), (-99, "Unknown error", 0))
    cls = usb.core.USBTimeoutError if isinstance(exc, Timeout) else usb.core.USBError
    return cls(message, code, err)


F = TypeVar("F", bound=Callable[..., Any])


def _serviced(fn: F) -> F:
    """Run ``fn`` as the emulator's own work on the caller's thread (``clock.service()``: not host cpu time)."""

    @wraps(fn)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.clock.service():
            return fn(self, *args, **kwargs)

    return run  # type: ignore[return-value]


def _seconds(timeout_ms: int, bridge: Asm24Bridge) -> float:
    """libusb time limit (ms; 0 = wait forever) -> the core's seconds."""
    return timeout_ms / 1000.0 if timeout_ms else bridge.timing.hang_s


@dataclass
class _Device:
    """Opaque device id handed to pyusb by ``enumerate_devices``."""

    bridge: Asm24Bridge
    bus: int
    address: int
    port_numbers: tuple[int, ...]


@dataclass
class _Handle:
    device: _Device
    claimed: set[int] = field(default_factory=set)
    open: bool = True


class Asm24Backend(usb.backend.IBackend):
    """A pyusb backend whose bus holds emulated ASM24 bridges (addresses ``first_address``, +1, ...).

    ``kernel_driver_active`` starts True to exercise a driver's detach path when asked. Provides
    :class:`tinyhw.transport.abilities.QueuedBulk` (:meth:`open_bulk_queue`).
    """

    queue_kind = "emulated"

    def __init__(self, bridges: Asm24Bridge | Sequence[Asm24Bridge], *, bus: int = 1, first_address: int = 7,
                 kernel_driver_active: bool = False) -> None:
        items = [bridges] if isinstance(bridges, Asm24Bridge) else list(bridges)
        self.devices = [_Device(b, bus, first_address + i, (2 + i,)) for i, b in enumerate(items)]
        self.bridge = items[0]
        self.kernel_driver = {id(d): kernel_driver_active for d in self.devices}
        self.handles: dict[int, _Handle] = {}  # id(_Device) -> the handle open on it (pyusb opens one per device)
        self.lock = threading.RLock()  # one caller at a time in the cores (libusb is thread-safe)
        self.clock = self.bridge.clock
        for b in items:
            b.clock.hybrid_ok = True  # every transfer below runs inside clock.service()

    # -- enumeration and descriptors -----------------------------------------------------------
    def enumerate_devices(self) -> list[_Device]:
        """The bridges still on the bus (a disconnected one has gone away)."""
        return [d for d in self.devices if not d.bridge.disconnected]

    def get_parent(self, dev: _Device) -> None:
        """The device's parent hub: none is modelled (the bridge sits on a root port)."""
        return None

    def get_device_descriptor(self, dev: _Device) -> DeviceDesc:
        """The bridge's device descriptor as pyusb expects it, with its bus, address, port path and speed
        (SuperSpeedPlus on ``speed=ss``, else high speed)."""
        b = dev.bridge
        return parse_device(b.identity.device(), bus=dev.bus, address=dev.address, port_numbers=dev.port_numbers,
                            speed=SPEED_SUPER_PLUS if b.speed == "ss" else SPEED_HIGH)

    def get_configuration_descriptor(self, dev: _Device, config: int) -> ConfigDesc:
        """The bridge's one configuration descriptor (index 0); IndexError for another index."""
        if config != 0:
            raise IndexError(f"invalid configuration index {config}")
        return parse_configuration(dev.bridge.identity.configuration())

    def get_interface_descriptor(self, dev: _Device, intf: int, alt: int, config: int) -> InterfaceDesc:
        """Interface ``intf`` alternate setting ``alt`` of configuration ``config``; IndexError when it does not exist.
        """
        cfg = self.get_configuration_descriptor(dev, config)
        if intf >= len(cfg.interfaces) or alt >= len(cfg.interfaces[intf]):
            raise IndexError(f"invalid interface {intf} alternate setting {alt}")
        return cfg.interfaces[intf][alt]

    def get_endpoint_descriptor(self, dev: _Device, ep: int, intf: int, alt: int, config: int) -> EndpointDesc:
        """Endpoint ``ep`` (an index) of that interface setting; IndexError when it does not exist."""
        endpoints = self.get_interface_descriptor(dev, intf, alt, config).endpoints
        if ep >= len(endpoints):
            raise IndexError(f"invalid endpoint index {ep}")
        return endpoints[ep]

    # -- handles, configuration, interfaces ------------------------------------------------------------
    def _bridge(self, handle: _Handle, *, transfer: bool = False) -> Asm24Bridge:
        """The core behind ``handle``; a disconnected one fails here unless the core answers (transfers)."""
        if not handle.open:
            raise usb.core.USBError("Invalid parameter", -2, errno.EINVAL)
        if handle.device.bridge.disconnected and not transfer:
            raise usb_error(Disconnect("gone"))
        return handle.device.bridge

    def open_device(self, dev: _Device) -> _Handle:
        """Open a handle on the bridge (libusb_open); a disconnected bridge raises pyusb's no-device error."""
        if dev.bridge.disconnected:
            raise usb_error(Disconnect("gone"))
        handle = self.handles[id(dev)] = _Handle(dev)
        return handle

    def close_device(self, dev_handle: _Handle) -> None:
        """Close the handle (libusb_close); its claimed interfaces go with it."""
        dev_handle.open = False
        if self.handles.get(id(dev_handle.device)) is dev_handle:
            del self.handles[id(dev_handle.device)]

    def _handle_of(self, device: Any) -> _Handle:
        """The handle open on the pyusb device ``device`` (found by its public ``bus`` and ``address``)."""
        for d in self.devices:
            if (d.bus, d.address) == (device.bus, device.address) and id(d) in self.handles:
                return self.handles[id(d)]
        raise usb.core.USBError("Invalid parameter", -2, errno.EINVAL)  # not opened (or closed): as libusb says

    @_serviced
    def set_configuration(self, dev_handle: _Handle, config_value: int) -> None:
        """SET_CONFIGURATION as a standard control request the bridge answers."""
        self._control(dev_handle, (0x00, 9, config_value, 0), 0, 1000)

    def get_configuration(self, dev_handle: _Handle) -> int:
        """The bridge's current configuration value, from libusb's cache (no transfer)."""
        return self._bridge(dev_handle).configuration  # libusb answers from its cache

    @_serviced
    def set_interface_altsetting(self, dev_handle: _Handle, intf: int, altsetting: int) -> None:
        """SET_INTERFACE as a standard control request the bridge answers."""
        self._control(dev_handle, (0x01, 11, altsetting, intf), 0, 1000)

    def claim_interface(self, dev_handle: _Handle, intf: int) -> None:
        """Claim interface ``intf``: only interface 0 of a configured bridge exists; busy while the emulated kernel
        driver (uas) holds it."""
        bridge = self._bridge(dev_handle)
        if intf != 0 or bridge.configuration == 0:
            raise usb.core.USBError(_NOT_FOUND[1], _NOT_FOUND[0], _NOT_FOUND[2])
        if self.kernel_driver[id(dev_handle.device)]:
            raise usb.core.USBError("Resource busy", -6, errno.EBUSY)
        dev_handle.claimed.add(intf)

    def release_interface(self, dev_handle: _Handle, intf: int) -> None:
        """Release interface ``intf`` on this handle."""
        dev_handle.claimed.discard(intf)

    def is_kernel_driver_active(self, dev_handle: _Handle, intf: int) -> bool:
        """True while the emulated kernel driver is bound to the bridge's interface."""
        self._bridge(dev_handle)
        return self.kernel_driver[id(dev_handle.device)]

    def detach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        """Unbind the emulated kernel driver from the bridge's interface."""
        self._bridge(dev_handle)
        self.kernel_driver[id(dev_handle.device)] = False

    def attach_kernel_driver(self, dev_handle: _Handle, intf: int) -> None:
        """Bind the emulated kernel driver to the bridge's interface again."""
        self._bridge(dev_handle)
        self.kernel_driver[id(dev_handle.device)] = True

    # -- transfers -----------------------------------------------------------------------------------
    def _control(self, dev_handle: _Handle, setup: tuple[int, int, int, int], data: bytes | int,
                 timeout: int) -> bytes | int:
        bridge = self._bridge(dev_handle, transfer=True)
        bridge.clock.gate()
        try:
            with self.lock:
                return bridge.control(*setup, data, timeout=_seconds(timeout, bridge))
        except UsbFault as exc:
            raise usb_error(exc) from None

    @_serviced
    def ctrl_transfer(self, dev_handle: _Handle, bmRequestType: int, bRequest: int, wValue: int, wIndex: int,
                      *data_timeout: Any) -> int:
        """pyusb passes the data array and the time limit (ms) positionally after the setup fields."""
        data, timeout = data_timeout
        setup = (bmRequestType, bRequest, wValue, wIndex)
        length = len(data) * data.itemsize
        if bmRequestType & 0x80:
            reply = self._control(dev_handle, setup, length, timeout)
            assert isinstance(reply, bytes)
            memoryview(data).cast("B")[: len(reply)] = reply
            return len(reply)
        sent = self._control(dev_handle, setup, data.tobytes(), timeout)
        assert isinstance(sent, int)
        return sent

    @_serviced
    def bulk_write(self, dev_handle: _Handle, ep: int, intf: int, data: array.array, timeout: int) -> int:
        """A bulk OUT transfer of ``data`` on endpoint ``ep`` with pyusb's timeout in ms, through the virtual-time gate
        and the queued-bulk path; returns the bytes written, raises pyusb's USBError for a stall, timeout or
        disconnect."""
        bridge = self._bridge(dev_handle, transfer=True)
        return self._queued_write(dev_handle, ep, data.tobytes(), _seconds(timeout, bridge), False)

    @_serviced
    def open_bulk_queue(self, device: Any, ep: int, depth: int, timeout_ms: int) -> _BulkQueue:
        """A queue of bulk OUT transfers on ``ep`` of the opened pyusb ``device`` with at most ``depth`` in flight
        (``timeout_ms`` each)."""
        dev_handle = self._handle_of(device)
        bridge = self._bridge(dev_handle, transfer=True)
        return _BulkQueue(self, dev_handle, ep, depth, _seconds(timeout_ms, bridge), bridge.clock)

    def _queued_write(self, dev_handle: _Handle, ep: int, data: bytes, timeout_s: float, queued: bool) -> int:
        """One bulk OUT into the core; ``queued``: submitted while its queue's previous transfer was in flight."""
        bridge = self._bridge(dev_handle, transfer=True)
        bridge.clock.gate()
        try:
            with self.lock:
                return bridge.bulk_out(ep, data, timeout=timeout_s, queued=queued)
        except UsbFault as exc:
            raise usb_error(exc) from None

    @_serviced
    def bulk_read(self, dev_handle: _Handle, ep: int, intf: int, buff: array.array, timeout: int) -> int:
        """A bulk IN transfer of up to ``len(buff)`` bytes on endpoint ``ep`` into ``buff``, through the virtual-time
        gate; returns the bytes read, raises pyusb's USBError for a stall, timeout or disconnect."""
        bridge = self._bridge(dev_handle, transfer=True)
        bridge.clock.gate()
        try:
            with self.lock:
                got = bridge.bulk_in(ep, len(buff) * buff.itemsize, timeout=_seconds(timeout, bridge))
        except UsbFault as exc:
            raise usb_error(exc) from None
        memoryview(buff).cast("B")[: len(got)] = got
        return len(got)

    @_serviced
    def clear_halt(self, dev_handle: _Handle, ep: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) on endpoint ``ep`` as a standard control request the bridge answers."""
        self._control(dev_handle, (0x02, 1, 0, ep), 0, 1000)

    @_serviced
    def reset_device(self, dev_handle: _Handle) -> None:
        """A USB port reset; libusb re-applies the active configuration afterwards, so do we."""
        bridge = self._bridge(dev_handle)
        config = bridge.configuration
        bridge.bus_reset()
        self._control(dev_handle, (0x00, 9, config, 0), 0, 1000)


class _BulkQueue(WorkerBacked):
    """``submit(data) -> ticket``, ``wait(ticket)``, ``close()``, ``abort()``; raises pyusb's errors (the first
    failure latched). A transfer counts as queued when it was submitted before its predecessor finished."""

    def __init__(self, backend: Asm24Backend, handle: _Handle, ep: int, depth: int, timeout_s: float,
                 clock: VirtualClock) -> None:
        self.backend, self.handle, self.ep, self.timeout_s, self.clock = backend, handle, ep, timeout_s, clock
        self.last_done: float | None = None  # the worker's time when the previous transfer finished
        self.q = SubmitQueue(clock, depth=depth, name="tinyhw-usb-bulk-queue", host=False)  # libusb's part

    @_serviced
    def submit(self, data: bytes | bytearray | memoryview) -> int:
        return self.q.submit(self._one, bytes(data))

    @_serviced
    def wait(self, ticket: int) -> None:
        self.q.wait(ticket)

    @_serviced
    def close(self) -> None:
        self.q.close()

    @_serviced
    def abort(self) -> None:
        self.q.abort()

    def _one(self, data: bytes) -> None:
        queued = self.last_done is not None and self.q.handed_at < self.last_done  # submitted while one was in flight
        n = self.backend._queued_write(self.handle, self.ep, data, self.timeout_s, queued)
        if n != len(data):  # pragma: no cover - the core accepts all or raises
            raise usb.core.USBError("Short write", -1, errno.EIO)
        self.last_done = self.clock.now()


def make_backend(board: Endpoint, options: AmdBoardUsbOptions, clock: VirtualClock, **kwargs: Any) -> Asm24Backend:
    """One emulated bridge with ``board`` behind it, on a fresh pyusb backend (``backend.bridge``).

    ``kwargs`` go to :class:`Asm24Bridge` (``timing``, ``gpu_bus``, ``serial``, ``vendor_id``).
    """
    return Asm24Backend(Asm24Bridge(board, options, clock, **kwargs))
