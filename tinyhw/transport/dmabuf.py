"""What every host buffer a device reaches at one IOVA range shares (specs/pci-vfio-remote.md §8.8, §9.1).

:class:`IovaBuffer` is the DMA-buffer interface (``size``, ``iova``, ``contiguous``, ``addr``, ``read``,
``write``) over some host memory ``mem`` its subclass provides: VFIO's pinned mappings
(:class:`tinyhw.pci.dma.DmaBuffer`) and an emulated board's buffers (:class:`tinyhw.mocks.common.iommu.HostBuffer`).
An IOVA range is contiguous for the device whatever the host pages behind it are. Physical-address buffers
(:class:`tinyhw.transport.physmem.PhysBuffer`) have the same interface but one address per page.
"""

from __future__ import annotations

from typing import Any

PAGE = 4096


class IovaBuffer:
    """``size`` bytes (rounded up to whole pages) the device reaches from ``iova`` on, set by whoever maps
    it; the subclass puts the host memory in ``mem`` (anything sliceable as bytes)."""

    #: the device is handed one address for all of it
    contiguous = True
    #: the host page size the size is rounded to (a subclass mapping real pages takes the host's own)
    page = PAGE

    def __init__(self, size: int) -> None:
        if size <= 0:
            raise ValueError("a dma buffer needs a positive size")
        self.size = (size + self.page - 1) & ~(self.page - 1)
        self.iova: int | None = None
        self.mem: Any = None

    def addr(self, offset: int = 0) -> int:
        """The device address (IOVA) of the byte at ``offset``."""
        if self.iova is None:
            raise ValueError("the buffer is not mapped for the device")
        return self.iova + offset

    def read(self, offset: int = 0, length: int | None = None) -> bytes:
        """``length`` bytes of the buffer from ``offset`` (default: to its end)."""
        end = self.size if length is None else offset + length
        return bytes(self.mem[offset:end])

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        """Copy ``data`` into the buffer at ``offset`` (the host side's CPU write)."""
        self.mem[offset:offset + len(data)] = data
