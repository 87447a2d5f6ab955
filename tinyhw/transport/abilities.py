"""Optional abilities of a transport, each its own small interface (ARCHITECTURE.md, "The transport seam").

A feature that needs one asks with :func:`tinyhw.transport.base.require`, which returns the
transport or raises a clear "the X transport cannot ..." error, and one that can do without asks with
:func:`tinyhw.transport.base.has`, so no feature tests a transport's class (``isinstance``, ``hasattr``) or
reaches into its internals. :class:`Batching` (queued accesses sent together, the
``remote:`` transport) and :class:`BatchTimes` (the far end's own time of each batch) live with their operations
in :mod:`tinyhw.transport.batch`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from tinyhw.transport.base import BarInfo
from tinyhw.transport.batch import Batching, BatchTimes

__all__ = ["LTSSM_LINK_UP", "LTSSM_STATES", "RUNTIME_ACTIVE", "WAKING_ATTRIBUTES", "Batching", "BatchTimes",
           "BridgeSram", "BulkQueue", "ConfigSize", "DmaBuffers", "DeviceAttributes", "Interrupts", "LinkState",
           "OsPciFunction", "PciePower", "PhysicalDma", "QueuedBulk", "ReadOnlyPeek", "ResizableBars", "Resettable",
           "TRANSPORT_ABILITIES", "TransferTap", "ability_methods", "device_awake"]


@runtime_checkable
class Resettable(Protocol):
    """A function-level reset the transport can issue (sysfs ``reset``, VFIO_DEVICE_RESET)."""

    def reset(self) -> None:
        """Reset the function (sysfs ``reset``: the kernel picks the method; VFIO: VFIO_DEVICE_RESET); raises Refused
        when the device offers no reset."""


@runtime_checkable
class DmaBuffers(Protocol):
    """Pinned host buffers mapped for device DMA at an IOVA (VFIO type1)."""

    def dma_alloc(self, size: int, iova: int | None = None) -> Any:
        """Allocate ``size`` bytes (rounded up to pages) of pinned host memory visible to the device at ``iova`` (the
        next free one when None); returns the buffer (``size``, ``read``/``write``); raises Refused for an unaligned
        ``iova``."""

    def dma_free(self, buf: Any) -> None:
        """Unmap ``buf`` from the device and release its host memory."""


@runtime_checkable
class PhysicalDma(Protocol):
    """Host memory the device reaches at physical addresses (``pci:`` with no IOMMU translating its requests:
    :mod:`tinyhw.transport.physmem`), for features that need DMA where no IOMMU mapping is available."""

    def physical_memory(self) -> Any:
        """Check what physical-address DMA needs (no translating IOMMU, CAP_SYS_ADMIN for pagemap, free 2 MiB huge
        pages; Refused or EnvironmentProblem naming the fix otherwise) and return a new
        :class:`~tinyhw.transport.physmem.PhysicalMemory` (``dma_alloc``/``dma_free``/``reserve``/``close``), whose
        ``close`` turns the function's bus mastering off before it frees anything."""


@runtime_checkable
class Interrupts(Protocol):
    """Device interrupts delivered to the host (VFIO eventfds)."""

    def enable_irqs(self, kind: str = "msi", count: int = 1) -> list[int]:
        """Route ``count`` vectors of ``kind`` (``"intx"``, ``"msi"``, ``"msix"``) to new eventfds and return them;
        raises Refused when the device has fewer."""

    def wait_irq(self, fd: int, timeout_s: float) -> int:
        """Block until the eventfd ``fd`` fires or ``timeout_s`` seconds pass; returns how many interrupts arrived (0 on
        time-out)."""


#: Sysfs attributes whose read touches the device, from Linux 6.12 ``drivers/pci/pci-sysfs.c``: the show/read
#: functions of ``current_link_speed``, ``current_link_width``, ``max_link_width``, ``secondary_bus_number``,
#: ``subordinate_bus_number``, ``config`` and ``resourceN_resize`` (not listed: read only to resize) call
#: ``pci_config_pm_runtime_get()``, which runtime-resumes the parent bridge (``pm_runtime_get_sync``) and a
#: device in D3cold, then read config space; ``rom`` maps and reads the expansion ROM. None of them is read
#: while the device sleeps. Kernel-cached, no device access: ``vendor``, ``device``, ``subsystem_*``,
#: ``class``, ``revision``, ``resource``, ``numa_node``, ``power_state`` (``pdev->current_state``),
#: ``max_link_speed`` (6.12: the cached ``supported_speeds``), the ``driver`` and ``iommu_group`` links, and
#: ``power/runtime_status`` (drivers/base/power/sysfs.c).
WAKING_ATTRIBUTES = ("current_link_speed", "current_link_width", "max_link_width", "secondary_bus_number",
                     "subordinate_bus_number", "config", "rom")
#: Runtime-PM states in which the device is powered (sysfs ``power/runtime_status``).
RUNTIME_ACTIVE = ("active", "unsupported")


def device_awake(power_state: str | None, runtime_status: str | None) -> bool:
    """True when reading a :data:`WAKING_ATTRIBUTES` attribute cannot resume anything: the function is in D0 and
    runtime-active (an absent attribute, as on kernels without runtime PM, does not count against it)."""
    return power_state in (None, "D0") and runtime_status in (None, *RUNTIME_ACTIVE)


@runtime_checkable
class DeviceAttributes(Protocol):
    """What the OS already knows about the function, read without touching the device (sysfs attribute files
    such as ``vendor``, ``power_state`` or ``power/runtime_status``; ``driver`` and ``iommu_group`` give the
    link's name), and the informational files of the driver that owns it (``/proc/driver/nvidia/...``).
    Exception: the :data:`WAKING_ATTRIBUTES` do touch the device; read them only when :func:`device_awake`."""

    def attribute(self, name: str) -> str | None:
        """The stripped text of sysfs attribute ``name`` of the function (``driver``/``iommu_group``: the link's target
        name), or None when absent."""

    def driver_files(self) -> dict[str, str]:
        """The host driver's own information files (for nvidia: module and driver version, per-GPU information) by name,
        when present; never reads the device."""


@runtime_checkable
class ConfigSize(Protocol):
    """The size of the function's config space as the OS exposes it (``pci:`` sysfs, ``vfio:``)."""

    def config_size(self) -> int:
        """256 (conventional) or 4096 (extended config space): the bytes of config space that can be read."""


@runtime_checkable
class OsPciFunction(Protocol):
    """The OS's own record of the PCI function (``pci:`` sysfs, ``vfio:``): its address, BARs, driver and IOMMU
    group as the sysfs scan finds them, for ``pci show``."""

    def pci_function(self) -> Any:
        """The function as the OS's PCI scan describes it (a :class:`tinyhw.pci.scan.PciFunction`)."""


@runtime_checkable
class ResizableBars(Protocol):
    """BAR resizing through the OS's Resizable BAR files (``pci:`` sysfs ``resourceN_resize``)."""

    def resizable_sizes(self, index: int) -> list[int] | None:
        """The sizes in bytes BAR ``index`` can take; None when it is not resizable."""

    def resize_bar(self, index: int, size: int) -> BarInfo:
        """Resize BAR ``index`` to ``size`` bytes (the function must have no driver); returns the new BarInfo."""


@runtime_checkable
class ReadOnlyPeek(Protocol):
    """Single 32-bit reads of a memory BAR through a read-only mapping of only the page holding the register:
    no write, no lock, no memory-decode change, allowed while a kernel driver owns the device."""

    def peek32(self, bar: int, offset: int) -> int:
        """Read the 32-bit register at byte ``offset`` (4-aligned) of memory BAR ``bar``; raises Refused outside the
        BAR."""


class BulkQueue(Protocol):
    """Bulk OUT transfers on one endpoint, several in flight, completing in submission order (specs/asm24-usb-
    bridge.md §4.7): ``submit(data) -> ticket`` (1, 2, ...; blocks while the queue's depth is outstanding),
    ``wait(ticket)`` (that transfer and all before it done), ``close()`` (wait for all, release) and ``abort()``
    (cancel what is outstanding, reap it, release; never raises, never hangs on a vanished device). The first
    failure is latched: every later call raises it. Errors are pyusb's (``usb.core.USBError``)."""

    def submit(self, data: bytes | bytearray | memoryview) -> int:
        """Queue one bulk OUT transfer of ``data``; returns its ticket (1, 2, ...), blocking while the queue is full."""

    def wait(self, ticket: int) -> None:
        """Block until transfer ``ticket`` and every one before it completed; raises the latched first failure."""

    def close(self) -> None:
        """Wait for every submitted transfer, then release the queue; raises the first failure not raised yet."""

    def abort(self) -> None:
        """Cancel and reap the outstanding transfers and release the queue; never raises."""


@runtime_checkable
class QueuedBulk(Protocol):
    """A pyusb backend that queues bulk OUT transfers itself (pyusb has only synchronous ones).

    The USB driver (:mod:`tinyhw.usb.queued`) asks the backend a device was opened with (pyusb's public
    ``Device.backend``) for this interface: the emulated bridge's backend (:mod:`tinyhw.mocks.bridge.pyusb_backend`)
    provides it natively; pyusb's libusb-1.0 backend gets it through one adapter
    (:class:`tinyhw.usb.libusb_async.LibusbAsync`); any other backend gets a worker thread's synchronous writes.
    ``queue_kind`` names the implementation (in stats and figures); ``open_bulk_queue`` takes the opened pyusb
    device (``usb.core.Device``, interface claimed), the endpoint, the most transfers in flight and each
    transfer's time limit in milliseconds.
    """

    queue_kind: str

    def open_bulk_queue(self, device: Any, ep: int, depth: int, timeout_ms: int) -> BulkQueue:
        """A :class:`BulkQueue` on endpoint ``ep`` of the opened pyusb ``device``, ``depth`` transfers in flight at
        most, each limited to ``timeout_ms`` milliseconds."""


@runtime_checkable
class BridgeSram(Protocol):
    """The ASM24 USB bridge's 512 KiB SRAM (32 slots of 16 KiB, at PCIe 0x200000 for the GPU), its 0xF2 DMA engine
    and its XDATA (where the GPU's drain fence lands): specs/asm24-usb-bridge.md §4.2, §4.5, §7.2, §9. Only the
    ``usb`` transport (``usb:``, ``mock:navi31-usb``) has it; the copy path of :mod:`tinyhw.boot.amd.usbcopy` is built
    on these operations alone.

    * ``arm_host_to_sram(first_slot, length)``: arm the engine so that the next ``length`` bytes (a multiple of
      512) of bulk OUT on the data endpoint land in the SRAM from ``first_slot`` on; nothing is sent.
    * ``write_sram(slot, data)``: arm and send ``data`` (padded to 512 bytes) in one bulk OUT, waiting for it.
    * ``open_sram_queue(depth, timeout, what)``: the queued bulk OUT seam on the data endpoint (several armed
      transfers in flight, :mod:`tinyhw.usb.queued`): a context manager with ``kind``, ``submit(data) -> ticket``
      and ``wait(ticket)``; ``sram_queue_kind()`` names what it opens ("libusb-async", "emulated", "worker").
    * ``arm_sram_to_host(length)``: arm an SRAM -> host transfer of ``length`` bytes from slot 0, released by a
      GPU write into 0x822000; ``collect_sram(length, into=None)``: the bulk IN of that transfer (into ``into``
      when given).
    * ``read_xdata(address, length)`` / ``write_xdata(address, value)``: the bridge's 16-bit XDATA space, one byte
      written per call (the fence at 0xA800 is PCIe 0x820800).
    """

    def arm_host_to_sram(self, first_slot: int, length: int) -> None:
        """Arm the 0xF2 engine: the next ``length`` bytes (a multiple of 512) of bulk OUT land in the SRAM from
        ``first_slot`` on."""

    def write_sram(self, slot: int, data: bytes | bytearray | memoryview) -> None:
        """Arm and send ``data`` (padded to 512 bytes) into SRAM slot ``slot`` in one bulk OUT, waiting for it."""

    def open_sram_queue(self, depth: int, timeout: float, what: str) -> Any:
        """The queued bulk OUT seam on the data endpoint (``depth`` in flight, ``timeout`` seconds each, ``what`` names
        it in errors)."""

    def sram_queue_kind(self) -> str:
        """Which implementation :meth:`open_sram_queue` uses (``"libusb-async"``, ``"emulated"`` or ``"worker"``), for
        stats and figures."""

    def arm_sram_to_host(self, length: int) -> None:
        """Arm an SRAM -> host transfer of ``length`` bytes from slot 0 (released by a GPU write into the bridge's
        XDATA)."""

    def collect_sram(self, length: int, into: Any = None) -> bytes | int:
        """Read the ``length`` bytes armed by :meth:`arm_sram_to_host` with bulk IN: returned, or with ``into`` (a
        writable buffer of at least ``length`` bytes) put there without a buffer allocated per read (the count is
        returned)."""

    def read_xdata(self, address: int, length: int) -> bytes:
        """Read ``length`` bytes of the bridge's XDATA at ``address`` (one control transfer)."""

    def write_xdata(self, address: int, value: int) -> None:
        """Write the byte ``value`` to the bridge's XDATA at ``address`` (one control transfer)."""


@runtime_checkable
class TransferTap(Protocol):
    """A transport that reports its own wire transfers (the ASM24 bridge's vendor requests and bulk transfers) to
    one object, for a recording (:mod:`tinyhw.transport.record`). ``tap_transfers(tap)`` installs ``tap`` (None
    removes it); after each transfer the transport calls ``tap.control(request_type, request, value, index, data)``
    for a vendor request (bit 7 of ``request_type``: IN) or ``tap.bulk(endpoint, length, data)`` for a bulk
    transfer (bit 7 of ``endpoint``: IN); ``data`` the bytes sent or received (empty when not at hand)."""

    def tap_transfers(self, tap: Any) -> None:
        """Install ``tap`` (None removes it) to be told of every wire transfer from now on."""


#: The LTSSM byte of a trained link on the bridge's custom firmware (specs/asm24-usb-bridge.md §4 table, XDATA 0xB450).
LTSSM_LINK_UP = 0x78
#: What the LTSSM values the bridge's firmware is known to show mean (specs/asm24-usb-bridge.md, XDATA map).
LTSSM_STATES = {0x00: "detect.quiet", 0x01: "detect.active", 0x4C: "training wedged in configuration",
                0x78: "link up"}


@dataclass(frozen=True)
class LinkState:
    """The PCIe link behind the bridge as its LTSSM register shows it: ``ltssm`` the byte, ``up`` whether it is
    trained (0x78), ``powered`` whether the host left the PCIe side on (False after :meth:`PciePower.power_off`)."""

    ltssm: int
    up: bool
    powered: bool

    @property
    def name(self) -> str:
        """The LTSSM value's meaning ("link up", "detect.quiet", ...; "training" for other values)."""
        return LTSSM_STATES.get(self.ltssm, "training")

    def as_dict(self) -> dict[str, Any]:
        """The JSON form (``ltssm`` an integer, ``state`` its name, ``up``, ``powered``)."""
        return {"ltssm": self.ltssm, "state": self.name, "up": self.up, "powered": self.powered}


@runtime_checkable
class PciePower(Protocol):
    """The ASM24 bridge's PCIe power toggle (vendor request 0xF3, specs/asm24-usb-bridge.md §4.6): off asserts
    PERST#, stops link training and drops the 3.3 V and 12 V rails, so the GPU loses all its state; on powers the
    rails, trains the link and enumerates the GPU again (its BARs placed anew). While the PCIe side is off every
    config and BAR access fails with one clear error instead of reaching the dead link."""

    def power_on(self, timeout: float = 5.0) -> LinkState:
        """Power the PCIe side on (nothing sent when the link is already up and powered), wait up to ``timeout``
        seconds for the link to train and enumerate the GPU; raises LinkDown naming the LTSSM state when it does
        not come up."""

    def power_off(self, timeout: float = 2.0) -> LinkState:
        """Power the PCIe side off and check, for up to ``timeout`` seconds, that the link left L0; raises
        OperationFailed when the bridge still reports a trained link."""

    def link_state(self) -> LinkState:
        """The LTSSM register now (one XDATA read) and whether the host left the PCIe side powered."""


#: Every optional ability a transport may have, the one list of them: a wrapper that stands in for a transport (a
#: recording, :mod:`tinyhw.transport.record`) offers exactly those of these the wrapped transport has.
#: (:class:`QueuedBulk` and :class:`BulkQueue` are abilities of a pyusb backend and of its queue, not of a transport.)
TRANSPORT_ABILITIES: tuple[type, ...] = (Resettable, DmaBuffers, PhysicalDma, Interrupts, DeviceAttributes,
                                         ReadOnlyPeek, BridgeSram, PciePower, TransferTap, Batching, BatchTimes,
                                         ConfigSize, ResizableBars, OsPciFunction)


def ability_methods(ability: type) -> tuple[str, ...]:
    """The public methods that make up ``ability`` (one of :data:`TRANSPORT_ABILITIES`), read from the class itself
    so that a method added to an ability is known everywhere at once."""
    return tuple(name for name, value in vars(ability).items() if not name.startswith("_") and callable(value))
