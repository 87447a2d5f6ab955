"""Host RAM of an emulated board that has no IOMMU in front of it: the device reaches host memory at physical
addresses, as a ``pci:`` function does (specs/pci-vfio-remote.md §9).

It is a :class:`~tinyhw.transport.physmem.PhysicalBackend`: the host side's chunks are ordinary anonymous
mappings (no huge pages needed in tests) and their "physical" addresses are invented, 2 MiB aligned, placed
far apart and in falling order, so that a driver which assumes two chunks are adjacent, or that a scatter
buffer is contiguous, hands the device an address no chunk covers. The device side
(:meth:`EmulatedRam.dma_read` / :meth:`dma_write`) resolves a physical address to the chunk's bytes, and
checks what a real machine would not: an access that runs past a chunk (into memory nobody gave the device),
an access to a chunk already given back (after the process freed it, the page belongs to someone else), and a
chunk given back while the function can still master the bus. Each is logged in :attr:`EmulatedRam.faults`,
and the unsafe ones in :attr:`EmulatedRam.violations`, which tests require to stay empty.
"""

from __future__ import annotations

import bisect
import mmap
from collections.abc import Callable
from typing import Any

from tinyhw.errors import EnvironmentProblem
from tinyhw.mocks.common.faults import BusFault

PAGE = 4096
CHUNK = 2 << 20
FIRST_BASE = 0x7_F000_0000  # the first chunk's invented physical address; later ones fall by STRIDE
STRIDE = 0x0_0460_0000  # 70 MiB: chunks are never adjacent


class EmulatedRam:
    """Invented physical memory: chunks the host maps, found by physical address for the device's DMA."""

    def __init__(self, clock: Any, rate: float, master: Callable[[], bool] = lambda: True,
                 limit: int = 64) -> None:
        self.clock = clock
        self.rate = rate
        self.master = master
        self.limit = limit  # huge pages in the emulated pool
        self._bases: list[int] = []
        self._chunks: list[mmap.mmap] = []
        self._freed: list[tuple[int, int]] = []
        self._made = 0
        self.faults: list[str] = []
        self.violations: list[str] = []
        self.stats = {"dma_reads": 0, "dma_writes": 0, "bytes_read": 0, "bytes_written": 0, "faults": 0,
                      "chunks": 0}

    # -- the host side (PhysicalBackend) ----------------------------------------------------------------------------
    def map_chunk(self) -> mmap.mmap:
        """A zeroed 2 MiB chunk; EnvironmentProblem when the emulated pool (``limit`` chunks) is used up."""
        if len(self._chunks) >= self.limit:
            raise EnvironmentProblem(f"no free 2 MiB huge page for device memory (the emulated pool of {self.limit} "
                                     "is used up)", hint="free some, or reserve more huge pages")
        mem = mmap.mmap(-1, CHUNK, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        base = FIRST_BASE - self._made * STRIDE
        self._made += 1
        i = bisect.bisect_right(self._bases, base)
        self._bases.insert(i, base)
        self._chunks.insert(i, mem)
        self.stats["chunks"] += 1
        return mem

    def translate(self, chunk: mmap.mmap, vaddr: int) -> list[int]:
        """The chunk's 512 invented page addresses (what pagemap would give for a huge page)."""
        base = self._bases[self._index(chunk)]
        return [base + i * PAGE for i in range(CHUNK // PAGE)]

    def unmap_chunk(self, chunk: mmap.mmap) -> None:
        """The host gives the chunk back; a violation when the function could still master the bus then."""
        i = self._index(chunk)
        base = self._bases.pop(i)
        self._chunks.pop(i)
        if self.master():
            self.violations.append(f"host memory at 0x{base:x} freed while the device could still dma into it "
                                   "(bus mastering on)")
        self._freed.append((base, base + CHUNK))
        chunk.close()

    def live_chunks(self) -> int:
        """How many chunks the host holds now (mapped and not given back)."""
        return len(self._chunks)

    def _index(self, chunk: mmap.mmap) -> int:
        for i, mem in enumerate(self._chunks):
            if mem is chunk:
                return i
        raise ValueError("not a chunk of this emulated ram")

    # -- the device side (bus-master accesses) ---------------------------------------------------------------------
    def _find(self, addr: int, length: int, what: str) -> tuple[mmap.mmap, int]:
        def fault(message: str, unsafe: bool = False) -> BusFault:
            self.stats["faults"] += 1
            self.faults.append(message)
            if unsafe:
                self.violations.append(message)
            return BusFault(message)

        if not self.master():
            raise fault(f"device {what} of {length} bytes at 0x{addr:x} dropped: bus mastering is off")
        i = bisect.bisect_right(self._bases, addr) - 1
        if i >= 0 and addr < self._bases[i] + CHUNK:
            if addr + length <= self._bases[i] + CHUNK:
                return self._chunks[i], addr - self._bases[i]
            raise fault(f"device {what} of {length} bytes at 0x{addr:x} runs past the host's huge page at "
                        f"0x{self._bases[i]:x} into memory it was never given", unsafe=True)
        if any(lo <= addr < hi for lo, hi in self._freed):
            raise fault(f"device {what} of {length} bytes at 0x{addr:x}: host memory already freed", unsafe=True)
        raise fault(f"device {what} of {length} bytes at physical 0x{addr:x}, which is no host memory tinyhw gave it",
                    unsafe=True)

    def dma_read(self, addr: int, length: int) -> bytes:
        """A device read of host memory at physical ``addr`` (BusFault when it reaches no live chunk)."""
        mem, off = self._find(addr, length, "read")
        self.stats["dma_reads"] += 1
        self.stats["bytes_read"] += length
        self.clock.advance(length / self.rate)
        return bytes(mem[off:off + length])

    def dma_write(self, addr: int, data: bytes) -> bool:
        """A device write of host memory at physical ``addr`` (BusFault when it reaches no live chunk)."""
        mem, off = self._find(addr, len(data), "write")
        self.stats["dma_writes"] += 1
        self.stats["bytes_written"] += len(data)
        self.clock.advance(len(data) / self.rate)
        mem[off:off + len(data)] = data
        return True
