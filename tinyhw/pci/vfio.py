"""The ``vfio:`` transport: a PCI function bound to vfio-pci, behind a real IOMMU (specs/pci-vfio-remote.md §8, §9).

Open sequence (§8.9, type1): take the device lock; open the container ``/dev/vfio/vfio``
(API version 0, TYPE1v2 or TYPE1 supported); open the group ``/dev/vfio/<N>`` and require it
viable; attach it to the container; select the IOMMU type; get the device fd by name.
Regions come from GET_REGION_INFO: config space (region 7) is read with pread/pwrite at its
offset; BARs are mapped when the region allows it (else accessed with 4-byte pread/pwrite,
which vfio-pci issues as one 32-bit access). Reset is VFIO_DEVICE_RESET; interrupts are
eventfds registered with SET_IRQS (§8.7); DMA buffers are pinned host memory mapped at IOVAs
with VFIO_IOMMU_MAP_DMA and unmapped on close (§8.8).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import select
import struct
from dataclasses import dataclass
from typing import Any

from tinyhw.errors import EnvironmentProblem, Refused, TransportError
from tinyhw.pci import vfio_abi as abi
from tinyhw.pci.bind import VFIO_DRIVER
from tinyhw.pci.dma import PAGE, DmaBuffer
from tinyhw.pci.mmio import ALL_ONES, MappedRegion
from tinyhw.pci.scan import PciFunction
from tinyhw.pci.sysfs import DEFAULT_SYSFS, open_function, permission_problem
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo, set_bus_master
from tinyhw.transport.lock import DeviceLock

CONFIG_MAX = 4096
DEFAULT_IOVA_BASE = 0x10_0000  # 1 MiB: low enough for devices with narrow DMA masks (edu: 28 bits)


@dataclass(frozen=True)
class RegionInfo:
    """One VFIO region of the device (VFIO_DEVICE_GET_REGION_INFO): its index, flags, size and offset in the device fd.
    """

    index: int
    flags: int
    size: int
    offset: int

    @property
    def mappable(self) -> bool:
        """True when vfio-pci lets the region be mmapped."""
        return bool(self.flags & abi.REGION_INFO_FLAG_MMAP)


class PreadRegion(BarRegion):
    """A BAR vfio-pci does not let us mmap: each dword is one 4-byte pread/pwrite on the device fd."""

    def __init__(self, info: BarInfo, fd: int, base: int, t: VfioTransport) -> None:
        super().__init__(info)
        self.fd, self.base, self.t, self.path = fd, base, t, f"vfio region {info.index}"

    def read32(self, offset: int) -> int:
        """One 4-byte pread of the device fd at ``offset`` (4-aligned) of the BAR."""
        self.check(offset, 4)
        return int.from_bytes(self.t._pread(self.base + offset, 4, "bar read"), "little")

    def write32(self, offset: int, value: int) -> None:
        """One 4-byte pwrite of ``value`` at ``offset`` (4-aligned) of the BAR."""
        self.check(offset, 4)
        self.t._pwrite(self.base + offset, (value & ALL_ONES).to_bytes(4, "little"), "bar write")

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset``, one 4-byte pread per dword."""
        self.check(offset, length)
        return b"".join(self.read32(offset + i).to_bytes(4, "little") for i in range(0, length, 4))

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset``, one 4-byte pwrite per dword."""
        self.check(offset, len(data))
        for i in range(0, len(data), 4):
            self.write32(offset + i, int.from_bytes(data[i:i + 4], "little"))


def _ioctl(fd: int, request: int, arg: Any, what: str) -> int:
    try:
        return fcntl.ioctl(fd, request, arg)
    except PermissionError as e:
        raise permission_problem(what, "/dev/vfio", e) from e
    except OSError as e:
        raise TransportError(f"vfio {what} failed ({e.strerror})") from e


def _memlock() -> str:
    """The soft RLIMIT_MEMLOCK, as ``ulimit -l`` shows it (KiB or unlimited)."""
    soft = resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]
    return "unlimited" if soft == resource.RLIM_INFINITY else f"{soft >> 10} KiB"


class VfioTransport(Transport):
    """Native PCIe through VFIO (device string ``vfio:DDDD:BB:DD.F``)."""

    name = "vfio"

    def __init__(self, address: str, *, sysfs: str = DEFAULT_SYSFS, dev_vfio: str = "/dev/vfio") -> None:
        super().__init__()
        self.sysfs = sysfs
        self.function = open_function(sysfs, address)
        self.address = self.function.address
        self.lock = DeviceLock(self.address, backend="vfio")
        self.container = self.group = self.device = -1
        self.dma: list[DmaBuffer] = []
        self.eventfds: dict[int, list[int]] = {}
        self._next_iova = DEFAULT_IOVA_BASE
        self._regions: dict[int, RegionInfo] = {}
        fn = self.function
        if fn.driver != VFIO_DRIVER:
            raise Refused(f"{self.address} is bound to {fn.driver or 'no driver'}, not {VFIO_DRIVER}",
                          hint=f"bind it first: tinyhw --device pci:{self.address} pci bind --yes")
        if fn.iommu_group is None:
            raise EnvironmentProblem(f"{self.address} has no iommu group",
                                     hint="boot with the iommu on (intel_iommu=on or amd_iommu=on)")
        self.lock.acquire()
        try:
            self._open(dev_vfio, fn.iommu_group)
        except BaseException:
            self.close()
            raise

    def _open(self, dev_vfio: str, group: int) -> None:
        self.container = self._open_node(os.path.join(dev_vfio, "vfio"))
        version = _ioctl(self.container, abi.VFIO_GET_API_VERSION, 0, "get api version")
        if version != abi.VFIO_API_VERSION:
            raise EnvironmentProblem(f"vfio api version {version} (expected {abi.VFIO_API_VERSION})")
        types = [t for t in (abi.VFIO_TYPE1v2_IOMMU, abi.VFIO_TYPE1_IOMMU)
                 if _ioctl(self.container, abi.VFIO_CHECK_EXTENSION, t, "check extension") > 0]
        if not types:
            raise EnvironmentProblem("the vfio container supports no type1 iommu", hint="load vfio_iommu_type1")
        self.group = self._open_node(os.path.join(dev_vfio, str(group)))
        status = abi.buffer(abi.GROUP_STATUS, 0)
        _ioctl(self.group, abi.VFIO_GROUP_GET_STATUS, status, "get group status")
        if not abi.GROUP_STATUS.unpack(status)[1] & abi.GROUP_FLAGS_VIABLE:
            raise Refused(f"iommu group {group} is not viable: every function in it must be bound to vfio-pci "
                          "or to no driver", hint=f"see /sys/kernel/iommu_groups/{group}/devices")
        _ioctl(self.group, abi.VFIO_GROUP_SET_CONTAINER, bytearray(struct.pack("<i", self.container)),
               "set container")
        _ioctl(self.container, abi.VFIO_SET_IOMMU, types[0], "set iommu")
        self.iommu_type = types[0]
        self.device = _ioctl(self.group, abi.VFIO_GROUP_GET_DEVICE_FD, bytearray(self.address.encode() + b"\0"),
                             "get device fd")
        info = abi.buffer(abi.DEVICE_INFO, 0, 0, 0, 0, 0)
        _ioctl(self.device, abi.VFIO_DEVICE_GET_INFO, info, "get device info")
        _, self.device_flags, self.num_regions, self.num_irqs, _, _ = abi.DEVICE_INFO.unpack(info)
        iommu = abi.buffer(abi.IOMMU_TYPE1_INFO, 0, 0, 0, 0)
        _ioctl(self.container, abi.VFIO_IOMMU_GET_INFO, iommu, "get iommu info")
        self.iova_pgsizes = abi.IOMMU_TYPE1_INFO.unpack(iommu)[2]

    @staticmethod
    def _open_node(path: str) -> int:
        try:
            return os.open(path, os.O_RDWR | os.O_CLOEXEC)
        except FileNotFoundError as e:
            raise EnvironmentProblem(f"{path} does not exist", hint="load vfio-pci (modprobe vfio-pci)") from e
        except PermissionError as e:
            raise permission_problem("open", path, e) from e
        except OSError as e:  # EBUSY: another process has the group open
            raise EnvironmentProblem(f"cannot open {path} ({e.strerror})",
                                     hint="another process may be using the device through vfio") from e

    # -- regions --------------------------------------------------------------------------------------------
    def region(self, index: int) -> RegionInfo:
        """The :class:`RegionInfo` of VFIO region ``index`` (asked once, then cached); raises TransportError when the
        ioctl fails."""
        if index not in self._regions:
            buf = abi.buffer(abi.REGION_INFO, 0, index, 0, 0, 0)
            _ioctl(self.device, abi.VFIO_DEVICE_GET_REGION_INFO, buf, f"get region {index} info")
            _, flags, _, _, size, offset = abi.REGION_INFO.unpack(buf)
            self._regions[index] = RegionInfo(index, flags, size, offset)
        return self._regions[index]

    def _pread(self, pos: int, n: int, what: str) -> bytes:
        try:
            data = os.pread(self.device, n, pos)
        except OSError as e:
            raise TransportError(f"vfio {what} at 0x{pos:x} failed ({e.strerror})") from e
        self.counters.round_trips += 1
        self.counters.bytes_in += len(data)
        if what == "bar read":
            self.counters.reg_reads += 1
            self.counters.tlp_reads += 1
        return data

    def _pwrite(self, pos: int, data: bytes, what: str) -> None:
        try:
            n = os.pwrite(self.device, data, pos)
        except OSError as e:
            raise TransportError(f"vfio {what} at 0x{pos:x} failed ({e.strerror})") from e
        if n != len(data):
            raise TransportError(f"vfio {what} at 0x{pos:x} wrote {n} of {len(data)} bytes")
        self.counters.bytes_out += n
        if what == "bar write":
            self.counters.reg_writes += 1
            self.counters.tlp_writes += 1

    # -- config space (region 7, §8.6) ---------------------------------------------------------------------------
    def pci_function(self) -> PciFunction:
        """The function as the sysfs scan describes it (address, BARs, driver, IOMMU group)."""
        return self.function

    def config_size(self) -> int:
        """Bytes of config space vfio-pci exposes (the config region's size, at most 4096; 256 when it reports none)."""
        return min(self.region(abi.PCI_CONFIG_REGION_INDEX).size, CONFIG_MAX) or 256

    def config_bytes(self, offset: int = 0, length: int = 256) -> bytes:
        """Up to ``length`` bytes of config space from ``offset`` (one pread of region 7), cut at the region's end."""
        region = self.region(abi.PCI_CONFIG_REGION_INDEX)
        length = max(0, min(length, region.size - offset))
        return self._pread(region.offset + offset, length, "config read") if length else b""

    def config_read(self, offset: int, size: int = 4) -> int:
        """Read ``size`` (1, 2, 4; naturally aligned) bytes of config space (0xff past the region's end); raises Refused
        for a bad size or offset."""
        if size not in (1, 2, 4) or offset % size or not 0 <= offset < CONFIG_MAX:
            raise Refused(f"config read of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000")
        return int.from_bytes(self.config_bytes(offset, size).ljust(size, b"\xff"), "little")

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Write ``size`` (1, 2, 4; naturally aligned) bytes of config space through vfio-pci (which virtualizes some
        fields); raises Refused for a bad size or offset."""
        if size not in (1, 2, 4) or offset % size or not 0 <= offset < CONFIG_MAX:
            raise Refused(f"config write of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000")
        region = self.region(abi.PCI_CONFIG_REGION_INDEX)
        self._pwrite(region.offset + offset, (value & ((1 << 8 * size) - 1)).to_bytes(size, "little"),
                     "config write")

    def set_bus_master(self, enable: bool = True) -> None:
        """Set or clear COMMAND bit 2: without it the device's DMA never reaches host memory."""
        set_bus_master(self, enable)

    # -- BARs -------------------------------------------------------------------------------------------------
    def bars(self) -> list[BarInfo]:
        """The function's BARs, sized by their VFIO regions."""
        out = []
        for b in self.function.bars:
            size = self.region(b.index).size if b.index < self.num_regions else 0
            out.append(BarInfo(b.index, b.address, size or b.size, b.kind, b.prefetchable, b.is_64bit))
        return out

    def _make_region(self, info: BarInfo) -> BarRegion:
        region = self.region(info.index)
        if region.mappable:
            try:
                return MappedRegion(info, self.device, region.offset, self.counters, f"vfio region {info.index}")
            except OSError:
                pass  # fall back to pread/pwrite below
        return PreadRegion(info, self.device, region.offset, self)

    # -- reset, interrupts (§8.7) ----------------------------------------------------------------------------
    def reset(self) -> None:
        """VFIO_DEVICE_RESET; raises Refused when the device offers no VFIO reset."""
        if not self.device_flags & abi.DEVICE_FLAGS_RESET:
            raise Refused(f"{self.address} offers no vfio reset")
        _ioctl(self.device, abi.VFIO_DEVICE_RESET, 0, "device reset")

    def irq_count(self, kind: str = "msi") -> int:
        """How many vectors of ``kind`` (intx, msi, msix) the device has."""
        buf = abi.buffer(abi.IRQ_INFO, 0, abi.IRQ_INDEX_NAMES[kind], 0)
        _ioctl(self.device, abi.VFIO_DEVICE_GET_IRQ_INFO, buf, f"get {kind} irq info")
        return abi.IRQ_INFO.unpack(buf)[3]

    def enable_irqs(self, kind: str = "msi", count: int = 1) -> list[int]:
        """Route ``count`` vectors of ``kind`` (intx, msi, msix) to new eventfds; returns them."""
        available = self.irq_count(kind)
        if count > available:
            raise Refused(f"{self.address} has {available} {kind} vector(s), {count} asked for")
        self.disable_irqs(kind)
        fds = [os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK) for _ in range(count)]
        index = abi.IRQ_INDEX_NAMES[kind]
        try:
            _ioctl(self.device, abi.VFIO_DEVICE_SET_IRQS,
                   abi.irq_set(index, abi.IRQ_SET_DATA_EVENTFD | abi.IRQ_SET_ACTION_TRIGGER, 0, fds),
                   f"enable {kind} interrupts")
        except BaseException:
            for fd in fds:
                os.close(fd)
            raise
        self.eventfds[index] = fds
        return fds

    def wait_irq(self, fd: int, timeout_s: float) -> int:
        """Wait for interrupts on ``fd``; returns how many arrived (0 on timeout)."""
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0, int(timeout_s * 1000))):
            return 0
        return os.eventfd_read(fd)

    def disable_irqs(self, kind: str = "msi") -> None:
        """Stop routing ``kind`` interrupts and close their eventfds (nothing when none are enabled)."""
        index = abi.IRQ_INDEX_NAMES[kind]
        fds = self.eventfds.pop(index, None)
        if fds is None:
            return
        with contextlib.suppress(TransportError):
            _ioctl(self.device, abi.VFIO_DEVICE_SET_IRQS,
                   abi.irq_set(index, abi.IRQ_SET_DATA_NONE | abi.IRQ_SET_ACTION_TRIGGER, 0, []),
                   f"disable {kind} interrupts")
        for fd in fds:
            os.close(fd)

    # -- DMA (§8.8) ----------------------------------------------------------------------------------------
    def dma_alloc(self, size: int, iova: int | None = None) -> DmaBuffer:
        """Pinned host memory visible to the device at ``iova`` (next free one from 1 MiB when None)."""
        buf = DmaBuffer(size)
        iova = self._next_iova if iova is None else iova
        if iova % PAGE:
            buf.close()
            raise Refused(f"iova 0x{iova:x} is not page aligned")
        arg = abi.buffer(abi.DMA_MAP, abi.DMA_MAP_FLAG_READ | abi.DMA_MAP_FLAG_WRITE, buf.vaddr, iova, buf.size)
        try:
            _ioctl(self.container, abi.VFIO_IOMMU_MAP_DMA, arg, f"map dma at iova 0x{iova:x}")
        except TransportError as e:
            buf.close()
            if isinstance(e.__cause__, OSError) and e.__cause__.errno == errno.ENOMEM:
                # §9.2: type1 pins count against RLIMIT_MEMLOCK; unprivileged processes often have 8 MiB
                raise EnvironmentProblem(
                    f"cannot pin a {buf.size >> 10} KiB dma buffer for the device: the kernel refused to lock "
                    f"more memory (RLIMIT_MEMLOCK, ulimit -l: {_memlock()})",
                    hint="raise the limit (ulimit -l, /etc/security/limits.conf), run as root, or use smaller "
                         "sizes") from e
            raise
        except BaseException:
            buf.close()
            raise
        buf.iova = iova
        self.dma.append(buf)
        self._next_iova = max(self._next_iova, iova + buf.size)
        return buf

    def dma_free(self, buf: DmaBuffer) -> None:
        """Unmap ``buf`` from the IOMMU (if this transport mapped it) and release its host memory."""
        if buf in self.dma:
            self.dma.remove(buf)
            arg = abi.buffer(abi.DMA_UNMAP, 0, buf.iova or 0, buf.size)
            with contextlib.suppress(TransportError):
                _ioctl(self.container, abi.VFIO_IOMMU_UNMAP_DMA, arg, f"unmap dma at iova 0x{buf.iova:x}")
        buf.close()

    # -- identity, lifetime -----------------------------------------------------------------------------------
    def identity(self) -> Identity:
        """The function's ids and address, from sysfs."""
        return self.function.identity

    def info(self) -> TransportInfo:
        """``probe`` facts: the IOMMU group and the bound driver."""
        return TransportInfo(transport=self.name, extra={"iommu_group": self.function.iommu_group,
                                                         "driver": self.function.driver})

    def close(self) -> None:
        """Disable interrupts, unmap DMA buffers and BARs, close the device, group and container fds, and release the
        device lock (idempotent)."""
        for kind in list(abi.IRQ_INDEX_NAMES):
            if self.device >= 0:
                self.disable_irqs(kind)
        for buf in list(self.dma):
            self.dma_free(buf)
        for region in self._bar_regions.values():
            if isinstance(region, MappedRegion):
                region.close()
        self._bar_regions.clear()
        if self.device >= 0:
            os.close(self.device)
        if self.group >= 0:
            with contextlib.suppress(OSError):
                fcntl.ioctl(self.group, abi.VFIO_GROUP_UNSET_CONTAINER)
            os.close(self.group)
        if self.container >= 0:
            os.close(self.container)
        self.device = self.group = self.container = -1
        self.lock.release()
