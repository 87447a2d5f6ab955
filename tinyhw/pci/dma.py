"""Host memory a device can DMA into (specs/pci-vfio-remote.md §8.8, §9.1, §9.4).

A :class:`DmaBuffer` is a page-aligned, shared anonymous mapping, touched so every page is
present. With VFIO type1 the kernel pins it and makes it visible to the device at an IOVA
(``VFIO_IOMMU_MAP_DMA``); the device then never sees a physical address and cannot reach
anything else (§8.8). Pinning by the IOMMU driver is also what keeps the pages from being
migrated, which ``mlock`` alone does not promise (§9.4).
"""

from __future__ import annotations

import contextlib
import ctypes
import mmap

from tinyhw.transport.dmabuf import IovaBuffer

PAGE = mmap.PAGESIZE


class DmaBuffer(IovaBuffer):
    """``size`` bytes of host memory mapped for a device at ``iova`` (set by the transport that maps it)."""

    page = PAGE

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.mem = mmap.mmap(-1, self.size, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS,
                             prot=mmap.PROT_READ | mmap.PROT_WRITE)
        for off in range(0, self.size, PAGE):  # populate every page before the kernel pins it
            self.mem[off] = 0
        self._anchor: ctypes.c_char | None = ctypes.c_char.from_buffer(self.mem)
        self.vaddr = ctypes.addressof(self._anchor)

    def close(self) -> None:
        """Unmap the host memory (the transport unmaps it from the device first)."""
        if self._anchor is not None:
            self._anchor = None
            with contextlib.suppress(BufferError):
                self.mem.close()
