"""Finding and opening the bridge over pyusb, and the one place USB errors become tinyhw errors.

Facts: asm24-usb-bridge.md §2 (identity, open sequence), §3 (endpoints), §4.7 (transfer rules),
§10 (failure modes). Endpoint addresses and packet sizes come from the descriptors.
"""

from __future__ import annotations

import errno
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from tinyhw.errors import (
    DeviceNotFound,
    DeviceTimeout,
    Disconnected,
    EnvironmentProblem,
    TransportError,
    install_hint,
)

#: (vendor, product) pairs of the custom firmware, in the order they are searched (§2)
BRIDGE_IDS = ((0xADD1, 0x0001), (0x3801, 0x0001))
#: product-string prefixes the custom firmware (or a patched stock part) reports
PRODUCT_PREFIXES = ("custom", "AS2462")

T = TypeVar("T")


class UsbIoError(TransportError):
    """libusb's generic I/O error: a transfer in flight when the device vanishes may end this way
    rather than with NO_DEVICE, so the bridge layer checks whether the device is still there."""


def _usb() -> Any:
    try:
        import usb.core
        import usb.util
    except ImportError as e:  # pragma: no cover - pyusb is a declared dependency
        raise EnvironmentProblem("pyusb is not installed", hint=install_hint(None, "pyusb")) from e
    return usb


def default_backend() -> Any:
    """libusb-1.0 through pyusb, or a clear environment error."""
    _usb()
    import usb.backend.libusb1

    backend = usb.backend.libusb1.get_backend()
    if backend is None:
        raise EnvironmentProblem(
            "libusb-1.0 was not found", hint="install it (apt-get install libusb-1.0-0) or use --device mock:navi31-usb"
        )
    return backend


def convert_usb_error(e: Exception, what: str) -> Exception:
    """Map a pyusb exception to the tinyhw family (the single choke point, §10)."""
    usb = _usb()
    if isinstance(e, usb.core.USBTimeoutError):
        return DeviceTimeout(f"usb {what} timed out", hint="check the cable and the bridge's power; replug and retry")
    if isinstance(e, usb.core.USBError):
        code = getattr(e, "backend_error_code", None)
        err = getattr(e, "errno", None)
        if code == -4 or err == errno.ENODEV:
            return Disconnected(f"device disconnected during {what}",
                                hint="replug the bridge and run the command again")
        if code == -3 or err in (errno.EACCES, errno.EPERM):
            return EnvironmentProblem(
                f"no permission to use the usb bridge ({what})", hint="run as root or add a udev rule for add1:0001"
            )
        if code == -6 or err == errno.EBUSY:
            return EnvironmentProblem(f"usb interface busy during {what}", hint="another program has claimed it")
        if code == -9 or err == errno.EPIPE:
            return TransportError(f"usb endpoint stalled during {what}")
        if code == -1 or err == errno.EIO:
            return UsbIoError(f"usb i/o error during {what}", hint="check the cable; replug the bridge and retry")
        return TransportError(f"usb error during {what}: {e}")
    return e


@contextmanager
def usb_errors(what: str) -> Iterator[None]:
    """Context manager: a ``usb.core.USBError`` raised inside becomes the matching tinyhw error, its message naming
    ``what``."""
    usb = _usb()
    try:
        yield
    except usb.core.USBError as e:
        raise convert_usb_error(e, what) from e


def call(what: str, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
    """``fn(*args, **kw)`` with pyusb's errors converted (as :func:`usb_errors`, without a generator or an import per
    call: every transfer comes through here)."""
    try:
        return fn(*args, **kw)
    except Exception as e:
        if isinstance(e, _usb().core.USBError):
            raise convert_usb_error(e, what) from e
        raise


@dataclass(frozen=True)
class FoundBridge:
    """One ASM24 bridge found on the bus: its device-string name (``usb:BUS-ADDR``), bus, address, USB ids and the pyusb
    device."""

    name: str  # "usb:BUS-ADDR"
    bus: int
    address: int
    vendor_id: int
    product_id: int
    device: Any  # usb.core.Device


def find_bridges(backend: Any | None = None) -> list[FoundBridge]:
    """Every bridge with the custom firmware's ids, in the spec's order (read-only, opens nothing)."""
    usb = _usb()
    backend = backend or default_backend()
    found: list[FoundBridge] = []
    for vid, pid in BRIDGE_IDS:
        with usb_errors("enumeration"):
            devs = list(usb.core.find(find_all=True, idVendor=vid, idProduct=pid, backend=backend) or [])
        for d in sorted(devs, key=lambda d: (d.bus or 0, d.address or 0)):
            found.append(FoundBridge(f"usb:{d.bus}-{d.address}", d.bus or 0, d.address or 0, vid, pid, d))
    return found


def select_bridge(target: str, backend: Any | None = None) -> FoundBridge:
    """Pick the bridge named by a ``usb`` device-string target ("", "N" or "BUS-ADDR")."""
    bridges = find_bridges(backend)
    if not bridges:
        raise DeviceNotFound(
            "no asm24 usb bridge with the custom firmware was found (looked for add1:0001 and 3801:0001)",
            hint="plug one in, or try the emulated board: --device mock:navi31-usb",
        )
    if target == "":
        return bridges[0]
    if "-" in target:
        for b in bridges:
            if f"{b.bus}-{b.address}" == target:
                return b
        raise DeviceNotFound(f"no bridge at usb:{target}", hint="tinyhw list shows the bridges present")
    index = int(target)
    if index >= len(bridges):
        raise DeviceNotFound(f"no bridge usb:{index}: {len(bridges)} present", hint="tinyhw list shows them")
    return bridges[index]


def read_string(dev: Any, index: int, what: str) -> str | None:
    """The USB string descriptor ``index`` of ``dev`` (None for index 0); USB errors become tinyhw errors naming
    ``what``."""
    usb = _usb()
    if not index:
        return None
    with usb_errors(f"reading the {what} string"):
        return usb.util.get_string(dev, index)


@dataclass(frozen=True)
class Endpoints:
    """The bridge's bulk endpoint addresses and the packet sizes of the bulk endpoints and of endpoint 0."""

    bulk_in: int
    bulk_out: int
    in_packet: int
    out_packet: int
    ep0_packet: int

    @property
    def superspeed(self) -> bool:
        """SuperSpeed links have 1024-byte bulk packets (§3); High-Speed 512."""
        return self.in_packet >= 1024

    @property
    def xdata_read_max(self) -> int:
        """Largest 0xE4 piece: the firmware caps reads at 512 (SS) / 64 (HS) bytes; the host splits at 255 (§4.2)."""
        return min(255, self.ep0_packet)


def find_endpoints(dev: Any) -> Endpoints:
    """Bulk endpoints of interface 0, alt 0, from the active configuration's descriptors (§3)."""
    usb = _usb()
    with usb_errors("reading descriptors"):
        cfg = dev.get_active_configuration()
        intf = cfg[(0, 0)]
        ep_in = ep_out = None
        for ep in intf:
            if usb.util.endpoint_type(ep.bmAttributes) != usb.util.ENDPOINT_TYPE_BULK:
                continue
            if usb.util.endpoint_direction(ep.bEndpointAddress) == usb.util.ENDPOINT_IN:
                ep_in = ep_in or ep
            else:
                ep_out = ep_out or ep
    if ep_in is None or ep_out is None:
        raise TransportError("the bridge's interface 0 has no bulk in/out endpoint pair",
                             hint="is this the custom firmware?")
    return Endpoints(
        bulk_in=ep_in.bEndpointAddress,
        bulk_out=ep_out.bEndpointAddress,
        in_packet=ep_in.wMaxPacketSize & 0x7FF,
        out_packet=ep_out.wMaxPacketSize & 0x7FF,
        # SuperSpeed devices give EP0's size as an exponent (9 -> 512 bytes); USB 2 as bytes.
        ep0_packet=(1 << dev.bMaxPacketSize0) if dev.bcdUSB >= 0x0300 else dev.bMaxPacketSize0,
    )
