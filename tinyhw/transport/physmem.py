"""Host memory a device reaches at its physical address: DMA buffers for ``pci:`` (specs/pci-vfio-remote.md §9).

Without VFIO nobody maps host memory for the device: it reaches RAM at physical addresses, which only
works when no IOMMU translates its requests (no IOMMU, or its group in ``identity`` mode). What this
module does about the dangers of handing a device physical addresses (§9.3-§9.6):

* **Huge pages only.** Memory comes in 2 MiB ``MAP_HUGETLB`` chunks from the pool reserved in
  ``/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages``. A chunk is physically contiguous, is never
  swapped, is not moved by compaction (hugetlb pages are not on the LRU; the kernel may still migrate them
  for memory hot-remove, inferred), and when the process ends it goes back to the huge-page pool, not to
  the kernel's general allocator: a device write that comes late lands in a free huge page, not in some
  other program's memory.
* **Checked translation.** Physical addresses come from ``/proc/self/pagemap``; an entry that is not
  present, is swapped, or has PFN 0 (what a caller without CAP_SYS_ADMIN reads) is refused, never handed
  to the device as address 0 (§9.3).
* **Quiesce before free.** :meth:`PhysicalMemory.close` first calls the ``quiesce`` hook the transport gives
  (clear the function's bus-master bit), then unmaps: no DMA can reach a page after it is released.
* **A guardian for a killed process.** After :meth:`PhysicalMemory.reserve` has mapped the chunks, a forked
  watcher (:func:`start_guardian`, given by the ``pci:`` transport) shares them and holds the function's config
  file. When this process ends in any way, SIGKILL included, the watcher sees its pipe close, clears bus
  mastering, and only then exits and lets the pages go: no window in which the device can write into pages
  someone else owns. The chunks are shared mappings, so a fork shares them rather than copying them: the
  physical addresses stay the parent's (no copy-on-write to move them).

A buffer up to 2 MiB is carved from one chunk and is contiguous (``buf.iova`` is its first byte's physical
address, ``buf.addr(offset)`` any byte's); a larger one spans chunks and is a scatter list
(``buf.contiguous`` False; callers that hand the device one address must check it). The mapping and the
translation are a :class:`PhysicalBackend`: :class:`HugetlbBackend` is the real one; an emulated board
supplies its own (emulated RAM with invented physical addresses).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import mmap
import os
import signal
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from tinyhw.errors import EnvironmentProblem, OperationFailed, Refused
from tinyhw.formats.pciconfig import COMMAND_BUS_MASTER, REG_COMMAND

PAGE = 4096
CHUNK = 2 << 20
MAP_HUGETLB = 0x40000
MAP_HUGE_2MB = 21 << 26
PFN_MASK = (1 << 55) - 1
PRESENT, SWAPPED = 1 << 63, 1 << 62
HUGEPAGES = "kernel/mm/hugepages/hugepages-2048kB"
RESERVE_HINT = ("reserve 2 MiB huge pages first, e.g. `echo 64 | sudo tee /sys/kernel/mm/hugepages/hugepages-2048kB/"
                "nr_hugepages` (64 pages = 128 MiB), or use vfio:ADDR (the IOMMU then maps ordinary memory)")

__all__ = ["CHUNK", "RESERVE_HINT", "HugetlbBackend", "PhysBuffer", "PhysicalBackend", "PhysicalMemory",
           "check_iommu", "chunk_address", "free_hugepages", "start_guardian", "translate_pagemap"]


def chunk_address(mem: mmap.mmap) -> int:
    """The virtual address ``mem`` is mapped at (the ctypes view is dropped at once, so ``mem`` can still close)."""
    anchor = ctypes.c_char.from_buffer(mem)
    try:
        return ctypes.addressof(anchor)
    finally:
        del anchor


class PhysicalBackend(Protocol):
    """Where chunks come from and how their physical addresses are found."""

    def map_chunk(self) -> mmap.mmap:
        """A new, populated, locked 2 MiB chunk of host memory; raises EnvironmentProblem when none is left."""

    def translate(self, chunk: mmap.mmap, vaddr: int) -> list[int]:
        """The physical address of each 4 KiB page of ``chunk`` (mapped at ``vaddr``), checked."""

    def unmap_chunk(self, chunk: mmap.mmap) -> None:
        """Give the chunk back (the device must no longer reach it)."""


def translate_pagemap(path: str, vaddr: int, npages: int) -> list[int]:
    """The physical address of each of ``npages`` 4 KiB pages from ``vaddr``, from the pagemap file ``path``
    (§9.3: one u64 per page at ``vaddr / 4096 * 8``; PFN in bits 0-54, swapped bit 62, present bit 63).
    Refuses (EnvironmentProblem) an entry that is not present, is swapped or reads PFN 0."""
    want = 8 * npages
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        raise EnvironmentProblem(f"cannot read {path} ({e.strerror or e})",
                                 hint="run as root: physical addresses need CAP_SYS_ADMIN") from e
    try:
        data = os.pread(fd, want, (vaddr // PAGE) * 8)
    finally:
        os.close(fd)
    if len(data) != want:
        raise EnvironmentProblem(f"{path} gave {len(data)} of {want} bytes for 0x{vaddr:x}")
    out = []
    for i, (entry,) in enumerate(struct.iter_unpack("<Q", data)):
        where = f"page 0x{vaddr + i * PAGE:x}"
        if not entry & PRESENT or entry & SWAPPED:
            raise EnvironmentProblem(f"{path}: {where} is {'swapped out' if entry & SWAPPED else 'not present'}; "
                                     "refusing to hand the device its address", hint="check memory pressure")
        pfn = entry & PFN_MASK
        if not pfn:
            raise EnvironmentProblem(f"{path} hides physical addresses from this process (pfn 0 for {where})",
                                     hint="run as root: physical addresses need CAP_SYS_ADMIN")
        out.append(pfn * PAGE)
    return out


def free_hugepages(sysfs: str = "/sys") -> int | None:
    """Free 2 MiB huge pages in the pool (None when the kernel has no hugetlb support or the file is unreadable)."""
    try:
        with open(os.path.join(sysfs, HUGEPAGES, "free_hugepages")) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return None


def check_iommu(sysfs: str, address: str, group: int | None) -> None:
    """Refuse (exit 2) a function whose DMA an IOMMU translates: physical addresses would not reach host memory
    (or worse, reach what another mapping put there). No group: no IOMMU. A group whose ``type`` reads
    ``identity`` passes requests through untranslated."""
    if group is None:
        return
    path = os.path.join(sysfs, "kernel", "iommu_groups", str(group), "type")
    try:
        with open(path) as f:
            kind = f.read().strip()
    except OSError:
        kind = "unknown (no type attribute)"
    if kind != "identity":
        raise Refused(f"{address} is behind an iommu that translates its dma (iommu group {group}, type {kind}): "
                      "physical addresses would not reach host memory",
                      hint=f"use vfio:{address} (tinyhw --device pci:{address} pci bind --yes), or, with the device "
                           f"unbound, `echo identity | sudo tee {path}`")


class HugetlbBackend:
    """Real huge pages: ``mmap(MAP_SHARED|MAP_ANONYMOUS|MAP_HUGETLB|MAP_HUGE_2MB|MAP_POPULATE)``, ``mlock``, every
    page touched, translated through ``pagemap`` (default ``/proc/self/pagemap``)."""

    def __init__(self, pagemap: str = "/proc/self/pagemap") -> None:
        self.pagemap = pagemap

    def probe(self) -> None:
        """Refuse (EnvironmentProblem) early when pagemap hides physical frames: translate one ordinary page."""
        page = mmap.mmap(-1, PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        try:
            page[0] = 1
            translate_pagemap(self.pagemap, chunk_address(page), 1)
        finally:
            page.close()

    def map_chunk(self) -> mmap.mmap:
        """A 2 MiB huge page, locked and populated."""
        flags = mmap.MAP_SHARED | mmap.MAP_ANONYMOUS | MAP_HUGETLB | MAP_HUGE_2MB | getattr(mmap, "MAP_POPULATE", 0)
        try:
            mem = mmap.mmap(-1, CHUNK, flags=flags, prot=mmap.PROT_READ | mmap.PROT_WRITE)
        except OSError as e:
            if e.errno in (errno.ENOMEM, errno.EINVAL):
                raise EnvironmentProblem("no free 2 MiB huge page for device memory "
                                         f"({os.strerror(e.errno).lower()})", hint=RESERVE_HINT) from e
            raise
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.mlock(ctypes.c_void_p(chunk_address(mem)), ctypes.c_size_t(CHUNK)) != 0:
            err = ctypes.get_errno()
            mem.close()
            raise EnvironmentProblem(f"cannot lock a 2 MiB huge page in memory ({os.strerror(err).lower()})",
                                     hint="run as root or raise RLIMIT_MEMLOCK (ulimit -l)")
        for off in range(0, CHUNK, PAGE):
            mem[off] = 0
        return mem

    def translate(self, chunk: mmap.mmap, vaddr: int) -> list[int]:
        """Physical addresses from pagemap; a huge page must read as 512 consecutive frames."""
        pages = translate_pagemap(self.pagemap, vaddr, CHUNK // PAGE)
        if any(b - a != PAGE for a, b in zip(pages, pages[1:], strict=False)):
            raise EnvironmentProblem(f"the huge page at 0x{vaddr:x} is not physically contiguous in {self.pagemap}")
        return pages

    def unmap_chunk(self, chunk: mmap.mmap) -> None:
        """Unmap (the kernel returns the page to the huge-page pool)."""
        with contextlib.suppress(BufferError):
            chunk.close()


#: the signals the guardian keeps blocked for its whole life: every one that ends or stops a process by default and
#: can be blocked (``pkill -f tinyhw`` or a ``kill`` of its pid reaches the guardian too, with its parent; only
#: SIGKILL can end it before its work is done)
GUARDIAN_BLOCKS = tuple(sorted({getattr(signal, n) for n in (
    "SIGHUP", "SIGINT", "SIGQUIT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGPIPE", "SIGALRM", "SIGTSTP", "SIGTTIN",
    "SIGTTOU", "SIGVTALRM", "SIGPROF", "SIGXCPU", "SIGXFSZ", "SIGPOLL", "SIGPWR", "SIGSTKFLT") if hasattr(signal, n)}))


def _clear_bus_master(fd: int, command_offset: int) -> None:
    command = int.from_bytes(os.pread(fd, 2, command_offset), "little")
    if command & COMMAND_BUS_MASTER:
        os.pwrite(fd, (command & ~COMMAND_BUS_MASTER).to_bytes(2, "little"), command_offset)


def _close_all_but(keep: tuple[int, ...]) -> None:
    """Close every descriptor but ``keep`` (close_range: nothing is listed, so nothing can fail to be)."""
    low = 0
    for k in sorted(keep):
        os.closerange(low, k)
        low = k + 1
    os.closerange(low, max(os.sysconf("SC_OPEN_MAX"), low + 1, 1 << 20))


def start_guardian(config_path: str, command_offset: int = REG_COMMAND) -> Callable[[], None]:
    """Fork a watcher that clears the function's bus-master bit (COMMAND bit 2, through the sysfs ``config`` file at
    ``config_path``) as soon as this process ends or calls the returned stop function, whichever comes first. It
    shares every mapping this process has now (the reserved chunks among them) and exits only after the bit is
    clear, so the memory outlives the device's last chance to write it. It leaves the terminal's session (no
    Ctrl-C or hang-up reaches it), keeps every blockable signal that would end or stop it blocked
    (:data:`GUARDIAN_BLOCKS`, from before the fork on, so none lands in between), and closes every descriptor it
    inherited but the pipe and the config file.

    The watcher reports once it is set up; one that cannot set itself up clears the bit at once and exits, and this
    function then raises :class:`OperationFailed` (the holder is told, never left with bus mastering unguarded).
    """
    fd = os.open(config_path, os.O_RDWR | os.O_CLOEXEC)
    read_end, write_end = os.pipe()
    ready_read, ready_write = os.pipe()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, GUARDIAN_BLOCKS)
    try:
        pid = os.fork()
    except OSError:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for d in (fd, read_end, write_end, ready_read, ready_write):
            os.close(d)
        raise
    if pid == 0:  # the watcher: only os calls from here (no locks, no Python-level cleanup)
        code = 1
        try:
            try:
                _close_all_but((read_end, fd, ready_write))  # sockets, pipes, the terminal, our own write end
                os.setsid()
                os.write(ready_write, b"1")
                os.close(ready_write)
            except BaseException:
                _clear_bus_master(fd, command_offset)  # unguarded from here on: stop the device's dma now
                raise
            while os.read(read_end, 64):
                pass
            _clear_bus_master(fd, command_offset)
            code = 0
        finally:
            os._exit(code)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    os.close(read_end)
    os.close(fd)
    os.close(ready_write)
    try:
        ready = os.read(ready_read, 1)
    finally:
        os.close(ready_read)
    if ready != b"1":
        os.close(write_end)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        with contextlib.suppress(OSError):  # the watcher cleared it on its way out; make sure
            cfg = os.open(config_path, os.O_RDWR | os.O_CLOEXEC)
            try:
                _clear_bus_master(cfg, command_offset)
            finally:
                os.close(cfg)
        raise OperationFailed("the guardian that clears bus mastering if this process dies could not start; bus "
                              "mastering was cleared and the device is not used",
                              hint="rerun; if it persists, run with -v and report it")

    def stop() -> None:
        os.close(write_end)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)

    return stop


@dataclass
class _Chunk:
    mem: mmap.mmap
    vaddr: int
    pages: list[int]
    used: int = 0


class PhysBuffer:
    """``size`` bytes of host memory and the physical address of each 4 KiB page (the DMA-buffer interface:
    ``size``, ``iova``, ``read``, ``write``, ``addr``, ``contiguous``)."""

    def __init__(self, size: int, parts: list[tuple[_Chunk, int, int]]) -> None:
        self.size = size
        self._parts = parts  # (chunk, offset in chunk, length), in order
        self.pages = [p for chunk, off, n in parts for p in chunk.pages[off // PAGE:(off + n) // PAGE]]
        self.contiguous = all(b - a == PAGE for a, b in zip(self.pages, self.pages[1:], strict=False))
        self.iova: int | None = self.pages[0]
        self.closed = False

    def addr(self, offset: int = 0) -> int:
        """The device (physical) address of the byte at ``offset``."""
        if not 0 <= offset < self.size:
            raise ValueError(f"offset 0x{offset:x} is outside the {self.size}-byte buffer")
        return self.pages[offset // PAGE] + offset % PAGE

    def _spans(self, offset: int, length: int) -> list[tuple[_Chunk, int, int, int]]:
        """(chunk, chunk offset, buffer offset, length) pieces covering ``offset .. offset+length``."""
        if self.closed:
            raise ValueError("the buffer was freed")
        if offset < 0 or length < 0 or offset + length > self.size:
            raise ValueError(f"0x{offset:x}+0x{length:x} is outside the {self.size}-byte buffer")
        out, at = [], 0
        for chunk, coff, n in self._parts:
            lo, hi = max(offset, at), min(offset + length, at + n)
            if lo < hi:
                out.append((chunk, coff + lo - at, lo - offset, hi - lo))
            at += n
        return out

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes from ``offset`` (default: to the end)."""
        length = self.size - offset if length is None else length
        out = bytearray(length)
        for chunk, coff, boff, n in self._spans(offset, length):
            out[boff:boff + n] = chunk.mem[coff:coff + n]
        return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        """Copy ``data`` into the buffer at ``offset``."""
        view = memoryview(data)
        for chunk, coff, boff, n in self._spans(offset, len(view)):
            chunk.mem[coff:coff + n] = view[boff:boff + n]


class PhysicalMemory:
    """DMA buffers at physical addresses (the ``DmaBuffers`` interface: ``dma_alloc``/``dma_free``), carved from 2 MiB
    chunks of ``backend``. ``quiesce`` stops the device's DMA (bus mastering off) before anything is unmapped."""

    def __init__(self, backend: PhysicalBackend, quiesce: Callable[[], Any] | None = None,
                 guardian: Callable[[], Callable[[], None]] | None = None) -> None:
        self.backend = backend
        self.quiesce = quiesce
        self.guardian = guardian  # started once the chunks are reserved; returns its stop function
        self._stop_guardian: Callable[[], None] | None = None
        self.chunks: list[_Chunk] = []
        self.live: list[PhysBuffer] = []

    def _new_chunk(self) -> _Chunk:
        if self._stop_guardian is not None:  # forked already: it would not share this chunk, nor guard it
            raise OperationFailed("host memory beyond what was reserved up front: the guardian, forked after the "
                                  "reservation, would not hold it, so a killed process could free it while the "
                                  "device still writes there",
                                  hint="reserve every allocation's size first (PhysicalMemory.reserve)")
        mem = self.backend.map_chunk()
        try:
            vaddr = chunk_address(mem)
            pages = self.backend.translate(mem, vaddr)
        except BaseException:
            self.backend.unmap_chunk(mem)
            raise
        chunk = _Chunk(mem, vaddr, pages)
        self.chunks.append(chunk)
        return chunk

    def reserve(self, sizes: list[int]) -> int:
        """Map, up front, every chunk the allocations ``sizes`` (in order) will need, so that running out of huge
        pages is found before the device is touched, then start the guardian (when there is one): from then on an
        allocation that needs a new chunk is refused, as the guardian would not share it; returns how many chunks
        are mapped."""
        need = self.chunks_for(sizes, [CHUNK - c.used for c in self.chunks])
        for got in range(need):
            try:
                self._new_chunk()
            except EnvironmentProblem as e:
                raise EnvironmentProblem(f"this needs {need} free 2 MiB huge pages ({need * 2} MiB) of host memory "
                                         f"for the device; {got} could be had ({e.message})", hint=RESERVE_HINT) from e
        if self.guardian is not None and self._stop_guardian is None:
            self._stop_guardian = self.guardian()
        return len(self.chunks)

    @staticmethod
    def chunks_for(sizes: list[int], free: list[int] | None = None) -> int:
        """How many new chunks ``sizes`` need given the free bytes of existing chunks (the allocator's own rule)."""
        room = list(free or [])
        new = 0
        for asked in sizes:
            size = -(-asked // PAGE) * PAGE
            if size > CHUNK:
                new += -(-size // CHUNK)
                room += [CHUNK - size % CHUNK] if size % CHUNK else []
                continue
            for i, r in enumerate(room):
                if r >= size:
                    room[i] -= size
                    break
            else:
                new += 1
                room.append(CHUNK - size)
        return new

    def dma_alloc(self, size: int, iova: int | None = None) -> PhysBuffer:
        """``size`` bytes (page rounded, zeroed): contiguous up to 2 MiB, a scatter list beyond. ``iova`` must be None
        (the kernel chose the physical addresses)."""
        if iova is not None:
            raise Refused("a physical-memory dma buffer cannot be placed at a chosen address (the kernel picks it)")
        if size <= 0:
            raise ValueError("a dma buffer needs a positive size")
        size = -(-size // PAGE) * PAGE
        parts: list[tuple[_Chunk, int, int]] = []
        if size <= CHUNK:
            chunk = next((c for c in self.chunks if CHUNK - c.used >= size), None) or self._new_chunk()
            parts.append((chunk, chunk.used, size))
            chunk.used += size
        else:
            left = size
            while left:
                n = min(left, CHUNK)
                chunk = next((c for c in self.chunks if c.used == 0), None) or self._new_chunk()
                parts.append((chunk, 0, n))
                chunk.used += n
                left -= n
        buf = PhysBuffer(size, parts)
        buf.write(0, bytes(size))
        self.live.append(buf)
        return buf

    def dma_free(self, buf: PhysBuffer) -> None:
        """Forget ``buf`` (its pages stay mapped, and reachable by the device, until :meth:`close`)."""
        if buf in self.live:
            self.live.remove(buf)
        buf.closed = True

    def close(self) -> None:
        """Stop the device's DMA (``quiesce``), then unmap every chunk (idempotent)."""
        if not self.chunks:
            return
        try:
            if self.quiesce is not None:
                self.quiesce()
        finally:  # a device that cannot be quiesced (gone) gets its pages back in the huge-page pool all the same
            for buf in self.live:
                buf.closed = True
            self.live.clear()
            chunks, self.chunks = self.chunks, []
            for chunk in chunks:
                self.backend.unmap_chunk(chunk.mem)
            if self._stop_guardian is not None:
                stop, self._stop_guardian = self._stop_guardian, None
                stop()
