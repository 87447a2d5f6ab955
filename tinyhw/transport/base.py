"""The transport seam: the one small interface every way of reaching a device implements.

A transport gives config-space access, BAR regions (aligned 32-bit and bulk
accesses), BAR information, the device identity, counters, a clock and ``close()``.
Optional abilities (DMA host buffers, bridge SRAM, reset) are separate small
interfaces checked with :func:`require` (the feature needs it) or :func:`has` (the feature asks), never with
``isinstance`` or ``hasattr`` at the feature (``tests/repo/test_ability_checks.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from tinyhw.errors import NotAvailableYet, Refused
from tinyhw.formats.pciconfig import COMMAND_BUS_MASTER, REG_COMMAND
from tinyhw.transport.clock import Clock, WallClock
from tinyhw.transport.counters import Counters

if TYPE_CHECKING:  # TypeIs is typing's from Python 3.13; the checker reads typing_extensions' (no runtime import)
    from typing_extensions import TypeIs

A = TypeVar("A")


@dataclass(frozen=True)
class BarInfo:
    """One BAR as the transport knows it (sizes learned by sizing or from the OS)."""

    index: int
    address: int
    size: int
    kind: str  # "memory" or "io"
    prefetchable: bool = False
    is_64bit: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The BAR as a JSON-ready dict (the keys of ``probe --json``)."""
        return {
            "index": self.index,
            "address": self.address,
            "size": self.size,
            "kind": self.kind,
            "prefetchable": self.prefetchable,
            "is_64bit": self.is_64bit,
        }


@dataclass(frozen=True)
class Identity:
    """Who the device is: ids from config space, and where it sits."""

    vendor_id: int
    device_id: int
    revision: int
    class_code: int
    subsystem_vendor_id: int
    subsystem_id: int
    location: str  # "0000:03:00.0", "usb:2-3 bus 4 dev 0 fn 0", "mock:navi31"


class BarRegion:
    """Accesses to one memory BAR. Offsets are bytes from the BAR start.

    ``read32``/``write32`` are single aligned dword accesses (registers);
    ``read``/``write`` move dword-aligned blocks (a streamed transfer where the
    transport has one). A block read across a register with side effects is not
    the same as repeated ``read32`` of it.
    """

    def __init__(self, info: BarInfo) -> None:
        self.info = info

    @property
    def size(self) -> int:
        """The BAR's size in bytes."""
        return self.info.size

    def check(self, offset: int, length: int) -> None:
        """Raise Refused unless ``length`` bytes at ``offset`` lie inside the BAR and both are multiples of 4."""
        # the range first: an offset past the bar is out of range whatever its alignment
        if offset < 0 or length < 0 or offset + length > self.info.size:
            raise Refused(
                f"bar{self.info.index} access at {offset:#x} of {length:#x} bytes is outside the bar "
                f"(size 0x{self.info.size:x})"
            )
        if offset % 4 or length % 4:
            raise Refused(f"bar{self.info.index} access at 0x{offset:x} of 0x{length:x} bytes is not dword aligned")

    def read32(self, offset: int) -> int:
        """Read the 32-bit word at byte ``offset`` (4-aligned) of the BAR."""
        raise NotImplementedError

    def write32(self, offset: int, value: int) -> None:
        """Write the 32-bit ``value`` at byte ``offset`` (4-aligned) of the BAR."""
        raise NotImplementedError

    def read(self, offset: int, length: int) -> bytes:
        """Read ``length`` bytes (a multiple of 4) from byte ``offset`` (4-aligned) of the BAR."""
        raise NotImplementedError

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` (a multiple of 4 bytes) at byte ``offset`` (4-aligned) of the BAR."""
        raise NotImplementedError


@dataclass
class TransportInfo:
    """Extra facts a transport reports for ``probe`` (bridge product string, link state...)."""

    transport: str
    emulated: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


class Transport:
    """Base class of every transport. Subclasses implement the ``_``-free methods below."""

    #: short name shown to users: "usb", "pci", "vfio", "mock"
    name = "transport"
    #: True for emulated boards (``--stats`` then adds ``modelled_s``)
    emulated = False

    def __init__(self, clock: Clock | None = None) -> None:
        self.counters = Counters()
        self.clock: Clock = clock or WallClock()
        self._bar_regions: dict[int, BarRegion] = {}

    @property
    def broken(self) -> bool:
        """Whether the way to the device failed for good (a ``remote:`` session whose connection was lost): nothing
        more gets through, and closing it only drops it. False unless a transport says otherwise."""
        return False

    # -- config space -------------------------------------------------------------
    def config_read(self, offset: int, size: int = 4) -> int:
        """Read 1, 2 or 4 bytes of the function's config space (little-endian, not crossing a dword)."""
        raise NotImplementedError

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Write the low ``size`` (1, 2 or 4) bytes of ``value`` at ``offset`` of the function's config space."""
        raise NotImplementedError

    def config_bytes(self, offset: int = 0, length: int = 256) -> bytes:
        """Read a dword-aligned block of config space (one dword read each)."""
        out = bytearray()
        for off in range(offset, offset + length, 4):
            out += self.config_read(off, 4).to_bytes(4, "little")
        return bytes(out)

    # -- BARs -----------------------------------------------------------------------
    def bars(self) -> list[BarInfo]:
        """The function's BARs as :class:`BarInfo`: memory and I/O, each with its index, address and size."""
        raise NotImplementedError

    def bar(self, index: int) -> BarRegion:
        """The region object of memory BAR ``index``."""
        if index not in self._bar_regions:
            infos = {b.index: b for b in self.bars()}
            info = infos.get(index)
            if info is None or info.size == 0:
                raise Refused(f"bar{index} is not implemented by this device (bars: {sorted(infos)})")
            if info.kind != "memory":
                raise Refused(f"bar{index} is an i/o bar; only memory bars can be accessed")
            self._bar_regions[index] = self._make_region(info)
        return self._bar_regions[index]

    def bars_changed(self) -> None:
        """Forget the BAR region objects: the function's BAR sizes or addresses changed (a Resizable BAR write, a
        reassignment), so the next :meth:`bar` builds each anew from :meth:`bars`."""
        self._bar_regions.clear()

    def _make_region(self, info: BarInfo) -> BarRegion:
        raise NotImplementedError

    # -- identity, info, lifetime ---------------------------------------------------------
    def identity(self) -> Identity:
        """Who the device is: vendor/device/class ids from config space and where it sits."""
        raise NotImplementedError

    def info(self) -> TransportInfo:
        """Extra facts for ``probe``: the transport's name, whether it is emulated, and per-transport details."""
        return TransportInfo(transport=self.name, emulated=self.emulated)

    def stats(self) -> dict[str, Any]:
        """Counters for ``--stats`` (the CLI adds ``elapsed_s``)."""
        d: dict[str, Any] = self.counters.as_dict()
        if self.emulated:
            d["modelled_s"] = round(self.clock.now(), 9)
        return d

    def close(self) -> None:
        """Release the device (and its lock). Safe to call twice."""

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def require(transport: Transport, ability: type[A], what: str, *, refuse: bool = False, hint: str | None = None) -> A:
    """Return ``transport`` if it implements the optional ``ability`` interface, else a clear error: "the X
    transport cannot ``what``" (:class:`NotAvailableYet`, exit 3; with ``refuse`` a :class:`Refused`, exit 2, for
    a feature the user asked of a device that can never have it)."""
    if not isinstance(transport, ability):
        error = Refused if refuse else NotAvailableYet
        raise error(f"the {transport.name} transport cannot {what}", hint=hint)
    return transport


def has(obj: object, ability: type[A]) -> TypeIs[A]:
    """True when ``obj`` (a transport, a pyusb backend, a clock) offers the optional ``ability`` interface of
    :mod:`tinyhw.transport.abilities`; the one way a feature asks, where :func:`require` is the one way it insists."""
    return isinstance(obj, ability)


def set_bus_master(t: Transport, on: bool) -> bool:
    """COMMAND bit 2 (specs/pci-vfio-remote.md §3.4) of ``t``'s config space on or off, read back to flush the write;
    True when it changed (vfio-pci hands a freshly opened function over with bus mastering off: no DMA leaves the
    device then)."""
    cmd = t.config_read(REG_COMMAND, 2)
    want = (cmd | COMMAND_BUS_MASTER) if on else (cmd & ~COMMAND_BUS_MASTER)
    if want == cmd:
        return False
    t.config_write(REG_COMMAND, 2, want)
    t.config_read(REG_COMMAND, 2)
    return True
