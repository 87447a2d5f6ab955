"""The ``pci:`` transport: a PCI function through sysfs (specs/pci-vfio-remote.md §2, §3.1, §6, §7.1, §10).

* Config space through the ``config`` file (pread/pwrite; the kernel splits accesses, §3.1).
  Without root only 64 bytes are readable (§2.7); what could be read is returned.
* BARs through ``resourceN`` mapped shared (``resourceN_wc`` for a prefetchable BAR when the
  kernel offers it, §6.1), accessed as single aligned 32-bit loads and stores
  (:mod:`tinyhw.pci.mmio`, §6.3).
* A function bound to a kernel driver is not mapped or written unless ``force_bound``: two
  drivers programming one device corrupt each other's state (a GPU driver may have queues,
  page tables and firmware running; a stray write can hang the device or the machine).
* BAR resize through ``resourceN_resize`` (§7.1): read the supported-size bitmap, write the
  decimal bit index; the kernel recreates the ``resourceN`` files, so mappings are dropped.
* Read-only peeks (:meth:`SysfsTransport.peek32`, specs/nv-bringup.md §15 tier 2): one ``PROT_READ``
  shared mapping of just the 4 KiB page of ``resourceN`` holding the register, opened ``O_RDONLY``; no
  lock, no memory-decode change, allowed while a driver owns the device (that is what it is for).
* Kernel-cached attributes (:meth:`SysfsTransport.attribute`) and the nvidia driver's informational files
  (:meth:`SysfsTransport.driver_files`; ``$TINYHW_PROCFS`` stands for ``/proc`` in tests): no device access.
* The per-device lock (key = the PCI address, shared with ``vfio:`` and the remote server)
  is taken before the first state-changing access: a BAR mapping, a config write, a reset
  or a resize. Reading config space does not lock (``lspci`` does not either).
"""

from __future__ import annotations

import contextlib
import mmap
import os
from typing import Any

from tinyhw.errors import DeviceNotFound, EnvironmentProblem, Refused, TransportError
from tinyhw.pci.mmio import MappedRegion, open_readwrite
from tinyhw.pci.scan import PciFunction, read_function
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo, set_bus_master
from tinyhw.transport.lock import DeviceLock
from tinyhw.transport.physmem import (
    RESERVE_HINT,
    HugetlbBackend,
    PhysicalMemory,
    check_iommu,
    free_hugepages,
    start_guardian,
)

DEFAULT_SYSFS = "/sys"
CONFIG_MAX = 4096
COMMAND_MEMORY = 0x2
FORCE_BOUND_RISK = (
    "the kernel driver keeps programming the device too: registers written behind its back can corrupt its "
    "state, hang the device or the machine, and lose data on storage or network devices"
)

__all__ = ["DEFAULT_SYSFS", "FORCE_BOUND_RISK", "SysfsTransport", "devices_dir", "open_function",
           "permission_problem", "procfs_root", "sysfs_root", "test_hook", "write_attr"]


#: the explicit, test-only switch that lets a privileged process honour the test hooks below (the test suite sets it)
TEST_HOOKS_SWITCH = "TINYHW_TEST_HOOKS"


def test_hook(name: str) -> str | None:
    """The value of the test hook ``$name`` (a fake tree's path), or None when unset or not honoured.

    A privileged process (euid 0, or set-uid) ignores the hooks unless ``$TINYHW_TEST_HOOKS`` is ``1``: under
    ``sudo`` with the environment kept they would otherwise redirect the config file opened read-write and the
    pagemap whose physical addresses are handed to the device.
    """
    value = os.environ.get(name)
    if not value:
        return None
    privileged = os.geteuid() == 0 or os.geteuid() != os.getuid()
    if privileged and os.environ.get(TEST_HOOKS_SWITCH) != "1":
        return None
    return value


def procfs_root() -> str:
    """Where procfs is mounted: ``$TINYHW_PROCFS`` (a fake tree in tests; see :func:`test_hook`) or ``/proc``."""
    return test_hook("TINYHW_PROCFS") or "/proc"


def sysfs_root() -> str:
    """Where sysfs is mounted: ``$TINYHW_SYSFS`` (a fake tree in tests, §13.1; see :func:`test_hook`) or ``/sys``."""
    return test_hook("TINYHW_SYSFS") or DEFAULT_SYSFS


def devices_dir(sysfs: str) -> str:
    """``<sysfs>/bus/pci/devices``, the folder of one link per PCI function."""
    return os.path.join(sysfs, "bus", "pci", "devices")


def permission_problem(what: str, path: str, e: OSError) -> EnvironmentProblem:
    """A missing-permission error (exit 3) that says how to get the permission."""
    return EnvironmentProblem(f"cannot {what} {path} ({e.strerror.lower() if e.strerror else e})",
                              hint="run as root (needs CAP_SYS_ADMIN and CAP_DAC_OVERRIDE), or check kernel lockdown")


def write_attr(path: str, text: str) -> None:
    """One ``write()`` of ``text`` to an existing sysfs attribute (never creates a file, §2.6).

    FileNotFoundError and PermissionError pass through for the caller to word; other OSErrors too.
    """
    fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def open_function(sysfs: str, address: str) -> PciFunction:
    """The function ``address`` under ``sysfs``; DeviceNotFound (exit 3) when there is none."""
    root = devices_dir(sysfs)
    if not os.path.isdir(os.path.join(root, address)):
        raise DeviceNotFound(f"no pci function {address} in {root}", hint="`tinyhw pci list` shows the addresses")
    return read_function(root, address)


class SysfsTransport(Transport):
    """Native PCIe through sysfs files (device string ``pci:DDDD:BB:DD.F``)."""

    name = "pci"

    def __init__(self, address: str, *, sysfs: str = DEFAULT_SYSFS, force_bound: bool = False,
                 write_combining: bool = True) -> None:
        super().__init__()
        self.sysfs = sysfs
        self.force_bound = force_bound
        self.write_combining = write_combining
        self.function = open_function(sysfs, address)
        self.address = self.function.address
        self.path = self.function.path
        self.lock = DeviceLock(self.address, backend="pci")
        self._config_fd: int | None = None
        self._config_writable = False
        self._peek_pages: dict[tuple[int, int], mmap.mmap] = {}
        self._memories: list[PhysicalMemory] = []

    # -- helpers ------------------------------------------------------------------------------------------
    def _file(self, name: str) -> str:
        return os.path.join(self.path, name)

    def refresh(self) -> PciFunction:
        """Re-read the function's attributes (after a resize or a bind)."""
        self.function = open_function(self.sysfs, self.address)
        return self.function

    def _claim(self, what: str) -> None:
        """Before a state-changing access: refuse a driver-bound function, then take the device lock."""
        drv = self.refresh().driver
        if drv is not None and not self.force_bound:
            hint = ("use --device vfio:" + self.address if drv == "vfio-pci" else
                    f"unbind {drv} first, or pass --force-bound if you accept that {FORCE_BOUND_RISK}")
            raise Refused(f"{self.address} is bound to the kernel driver {drv}; refusing to {what}", hint=hint)
        self.lock.acquire()

    def _config(self, writable: bool) -> int:
        if self._config_fd is None or (writable and not self._config_writable):
            path = self._file("config")
            try:
                fd = os.open(path, (os.O_RDWR if writable else os.O_RDONLY) | os.O_CLOEXEC)
            except PermissionError as e:
                raise permission_problem("open", path, e) from e
            except OSError as e:
                raise TransportError(f"cannot open {path} ({e.strerror})") from e
            if self._config_fd is not None:
                os.close(self._config_fd)
            self._config_fd, self._config_writable = fd, writable
        return self._config_fd

    # -- config space (§3.1) -----------------------------------------------------------------------------------
    def config_bytes(self, offset: int = 0, length: int = 256) -> bytes:
        """Up to ``length`` bytes from ``offset`` in one read; shorter where the file ends (64 bytes unprivileged)."""
        try:
            data = os.pread(self._config(False), length, offset)
        except OSError as e:
            raise TransportError(f"config read at 0x{offset:x} of {self.address} failed ({e.strerror})") from e
        self.counters.round_trips += 1
        self.counters.bytes_in += len(data)
        return data

    def pci_function(self) -> PciFunction:
        """The function as the sysfs scan describes it (address, BARs, driver, IOMMU group)."""
        return self.function

    def config_size(self) -> int:
        """256 (conventional) or 4096 (extended config space): the size of the ``config`` file."""
        try:
            return min(os.fstat(self._config(False)).st_size, CONFIG_MAX) or 256
        except OSError:
            return 256

    def config_read(self, offset: int, size: int = 4) -> int:
        """Read ``size`` (1, 2, 4; naturally aligned) bytes of config space through the ``config`` file; raises Refused
        for a bad size or offset, EnvironmentProblem when the file is shorter (non-root sees only 64 bytes)."""
        if size not in (1, 2, 4) or offset % size or not 0 <= offset < CONFIG_MAX:
            raise Refused(f"config read of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000")
        data = self.config_bytes(offset, size)
        if len(data) != size:
            raise EnvironmentProblem(f"config space of {self.address} at 0x{offset:x} is not readable "
                                     f"(only {offset + len(data):#x} bytes)", hint="run as root to read all of it")
        return int.from_bytes(data, "little")

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Write ``size`` (1, 2, 4; naturally aligned) bytes of config space through the ``config`` file; refuses a
        function a driver owns (unless forced) and bad sizes or offsets."""
        if size not in (1, 2, 4) or offset % size or not 0 <= offset < CONFIG_MAX:
            raise Refused(f"config write of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000")
        self._claim(f"write its config space at 0x{offset:x}")
        try:
            n = os.pwrite(self._config(True), (value & ((1 << 8 * size) - 1)).to_bytes(size, "little"), offset)
        except OSError as e:
            raise TransportError(f"config write at 0x{offset:x} of {self.address} failed ({e.strerror})") from e
        if n != size:
            raise TransportError(f"config write at 0x{offset:x} of {self.address} wrote {n} of {size} bytes")
        self.counters.bytes_out += size

    # -- BARs (§6) ----------------------------------------------------------------------------------------------
    def bars(self) -> list[BarInfo]:
        """The function's BARs as the kernel assigned them (from the ``resource`` file)."""
        return self.function.bars

    def _make_region(self, info: BarInfo) -> BarRegion:
        self._claim(f"map bar{info.index}")
        plain = self._file(f"resource{info.index}")
        wc = plain + "_wc"
        use_wc = info.prefetchable and self.write_combining and os.path.exists(wc)
        path = wc if use_wc else plain
        if not os.path.exists(path):
            raise EnvironmentProblem(f"{path} does not exist: the kernel offers no mapping of bar{info.index}",
                                     hint="some virtual machines expose no resourceN files; use vfio: there")
        self._ensure_memory_decode()
        try:
            fd = open_readwrite(path)
        except PermissionError as e:
            raise permission_problem("open", path, e) from e
        except OSError as e:
            raise TransportError(f"cannot open {path} ({e.strerror})") from e
        try:
            region = MappedRegion(info, fd, 0, self.counters, path, write_combining=use_wc)
        except PermissionError as e:
            raise permission_problem("map", path, e) from e
        except (OSError, ValueError) as e:
            raise TransportError(f"cannot map {path} ({getattr(e, 'strerror', None) or e})") from e
        finally:
            os.close(fd)  # the mapping keeps the BAR; the descriptor is not needed
        return region

    def _ensure_memory_decode(self) -> None:
        """An unbound function may have memory decoding off; ``enable`` turns it on (§2.6)."""
        try:
            command = self.config_read(0x04, 2)
        except EnvironmentProblem:
            return
        if command & COMMAND_MEMORY:
            return
        try:
            write_attr(self._file("enable"), "1")
        except OSError as e:
            raise TransportError(f"memory decoding of {self.address} is off and enabling it failed ({e.strerror})",
                                 hint="write 1 to its sysfs enable file as root") from e

    # -- resize (§7.1), reset ---------------------------------------------------------------------------------
    def resizable_sizes(self, index: int) -> list[int] | None:
        """Sizes in bytes ``resourceN_resize`` offers for BAR ``index``; None without a Resizable BAR file."""
        path = self._file(f"resource{index}_resize")
        try:
            with open(path) as f:
                bitmap = int(f.read().strip(), 16)
        except FileNotFoundError:
            return None
        except PermissionError as e:
            raise permission_problem("read", path, e) from e
        except ValueError as e:
            raise TransportError(f"{path} does not hold a hex bitmap") from e
        return [1 << (k + 20) for k in range(bitmap.bit_length()) if bitmap >> k & 1]

    def resize_bar(self, index: int, size: int) -> BarInfo:
        """Resize BAR ``index`` to ``size`` bytes through ``resourceN_resize``; return the new BarInfo."""
        sizes = self.resizable_sizes(index)
        if sizes is None:
            raise Refused(f"bar{index} of {self.address} is not resizable (no resource{index}_resize)")
        if size not in sizes:
            offered = ", ".join(f"0x{s:x}" for s in sizes) or "none"
            raise Refused(f"bar{index} cannot be 0x{size:x} bytes (supported: {offered})")
        self._claim(f"resize bar{index}")  # the kernel also refuses (EBUSY) while a driver is bound
        region = self._bar_regions.pop(index, None)
        if isinstance(region, MappedRegion):
            region.close()
        path = self._file(f"resource{index}_resize")
        try:
            write_attr(path, str(size.bit_length() - 21))
        except PermissionError as e:
            raise permission_problem("write", path, e) from e
        except OSError as e:
            raise TransportError(f"resizing bar{index} of {self.address} to 0x{size:x} failed ({e.strerror})",
                                 hint="the upstream bridge window may be too small; a driver may be bound") from e
        fn = self.refresh()
        # the kernel re-assigns the BAR; an empty line means it could not place it
        return next((b for b in fn.bars if b.index == index), BarInfo(index, 0, 0, "memory"))

    def reset(self) -> None:
        """Function-level reset through the ``reset`` file (the kernel picks the method)."""
        self._claim("reset it")
        path = self._file("reset")
        try:
            write_attr(path, "1")
        except FileNotFoundError as e:
            raise Refused(f"{self.address} has no reset method (no {path})") from e
        except OSError as e:
            raise TransportError(f"reset of {self.address} failed ({e.strerror})") from e

    # -- abilities: DeviceAttributes, ReadOnlyPeek ----------------------------------------------------------
    def attribute(self, name: str) -> str | None:
        """A sysfs attribute of the function (``driver``/``iommu_group``: the link's name); None when absent."""
        path = self._file(name)
        if name in ("driver", "iommu_group"):
            return os.path.basename(os.readlink(path)) if os.path.exists(path) else None
        try:
            with open(path) as f:
                return f.read().strip()
        except (OSError, UnicodeDecodeError):
            return None

    def driver_files(self) -> dict[str, str]:
        """The nvidia driver's version and per-GPU information files, when present (never the device)."""
        proc = procfs_root()
        out = {}
        for key, path in (("module_version", os.path.join(self.sysfs, "module", "nvidia", "version")),
                          ("driver_version", os.path.join(proc, "driver", "nvidia", "version")),
                          ("gpu_information", os.path.join(proc, "driver", "nvidia", "gpus", self.address,
                                                           "information"))):
            try:
                with open(path) as f:
                    out[key] = f.read().strip()
            except (OSError, UnicodeDecodeError):
                continue
        return out

    def peek32(self, bar: int, offset: int) -> int:
        """One 32-bit read at ``offset`` of BAR ``bar`` through a read-only mapping of that page only."""
        info = next((b for b in self.function.bars if b.index == bar and b.kind == "memory"), None)
        if info is None or offset % 4 or not 0 <= offset < info.size:
            raise Refused(f"bar{bar} offset 0x{offset:x} is not a dword inside a memory bar of {self.address}")
        page = offset & ~(mmap.PAGESIZE - 1)
        key = (bar, page)
        mm = self._peek_pages.get(key)
        if mm is None:
            path = self._file(f"resource{bar}")
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except PermissionError as e:
                raise permission_problem("open", path, e) from e
            except OSError as e:
                raise TransportError(f"cannot open {path} ({e.strerror})") from e
            try:
                mm = mmap.mmap(fd, mmap.PAGESIZE, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ, offset=page)
            except PermissionError as e:
                raise permission_problem("map", path, e) from e
            except OSError as e:
                raise TransportError(f"cannot map page 0x{page:x} of {path} read-only ({e.strerror})",
                                     hint="the region may be claimed exclusively (iomem=strict) or the kernel locked "
                                          "down; not retried another way") from e
            finally:
                os.close(fd)
            self._peek_pages[key] = mm
        view = memoryview(mm).cast("I")
        try:
            value = view[(offset - page) >> 2]  # one 32-bit load
        finally:
            view.release()
        c = self.counters
        c.reg_reads += 1
        c.tlp_reads += 1
        c.round_trips += 1
        c.bytes_in += 4
        return value

    # -- host memory at physical addresses (§9) ---------------------------------------------------------------
    def physical_memory(self) -> PhysicalMemory:
        """Physical-address DMA buffers for this function (:mod:`tinyhw.transport.physmem`), after the checks:
        not driver-bound (the lock is taken), no IOMMU translating its requests, pagemap readable with physical
        frames (root), at least one free 2 MiB huge page. Closing the transport (or the memory) turns bus
        mastering off before the pages are freed; once the memory is reserved a guardian process does the same if
        this process is killed (:func:`~tinyhw.transport.physmem.start_guardian`)."""
        self._claim("give it host memory")
        check_iommu(self.sysfs, self.address, self.refresh().iommu_group)
        free = free_hugepages(self.sysfs)
        if not free:
            raise EnvironmentProblem(f"no free 2 MiB huge pages ({'none' if free == 0 else 'no hugetlb support'}) "
                                     f"for {self.address}'s host memory", hint=RESERVE_HINT)
        backend = HugetlbBackend(os.path.join(procfs_root(), "self", "pagemap"))
        backend.probe()
        config = self._file("config")
        memory = PhysicalMemory(backend, quiesce=lambda: set_bus_master(self, False),
                                guardian=lambda: start_guardian(config))
        self._memories.append(memory)
        return memory

    # -- identity, info, lifetime -----------------------------------------------------------------------------
    def identity(self) -> Identity:
        """The function's ids and address, from sysfs."""
        return self.function.identity

    def info(self) -> TransportInfo:
        """``probe`` facts: the bound driver, the IOMMU group and the sysfs path."""
        fn = self.function
        extra: dict[str, Any] = {"driver": fn.driver, "iommu_group": fn.iommu_group, "path": self.path}
        return TransportInfo(transport=self.name, emulated=False, extra=extra)

    def close(self) -> None:
        """Free host memory (bus mastering off first), unmap every BAR and peek page, close the config file and
        release the device lock (idempotent)."""
        for memory in self._memories:
            with contextlib.suppress(OSError, TransportError):
                memory.close()
        self._memories.clear()
        for region in self._bar_regions.values():
            if isinstance(region, MappedRegion):
                region.close()
        self._bar_regions.clear()
        for mm in self._peek_pages.values():
            with contextlib.suppress(BufferError):
                mm.close()
        self._peek_pages.clear()
        if self._config_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._config_fd)
            self._config_fd = None
        self.lock.release()
