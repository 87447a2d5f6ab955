"""Host staging of a DMA-buffer copy: user memory -> pinned DMA buffer and back, measured alone (``--path staging``).

Every DMA copy from ordinary (pageable) memory starts or ends with a host memcpy into or out of the pinned buffer
the device reaches (specs/pci-vfio-remote.md §8.8, §9.1: type1 ``MAP_DMA`` pins the buffer and gives it an
IOVA). This path measures only that memcpy, on the host's wall clock, on any transport that can map DMA
buffers (``vfio:``; ``mock:navi31`` emulates the map with real host memory, so its figures are measured too).
No byte crosses the PCIe link: the results carry ``host_only`` and no link limit, and must never be read as
device bandwidth. Offsets are byte offsets in the buffer; sizes larger than the buffer are skipped.
"""

from __future__ import annotations

from tinyhw.bench.copy import CopyPath
from tinyhw.errors import Refused
from tinyhw.transport.abilities import DmaBuffers
from tinyhw.transport.base import Transport, has
from tinyhw.transport.clock import WallClock

MAX_BUFFER = 256 << 20
LABEL = "host staging: user memory <-> pinned dma buffer (no device transfer)"


class Staging:
    """One pinned DMA buffer of ``size`` bytes on ``transport``; ``close()`` unmaps and frees it."""

    def __init__(self, transport: Transport, size: int) -> None:
        if not has(transport, DmaBuffers):
            raise Refused(f"--path staging needs host dma buffers, which the {transport.name} transport cannot map",
                          hint="bind the device to vfio-pci (tinyhw --device pci:ADDR pci bind --yes), use vfio:ADDR")
        if not 0 < size <= MAX_BUFFER:
            raise Refused(f"a staging buffer of 0x{size:x} bytes is outside 1 byte .. {MAX_BUFFER >> 20} MiB")
        self.transport = transport
        self.buf = transport.dma_alloc(size)

    def write(self, offset: int, data: bytes) -> None:
        """Copy ``data`` into the pinned buffer at ``offset`` (host memory only; the device is not touched)."""
        self.buf.write(offset, data)

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes of the pinned buffer from ``offset``."""
        return self.buf.read(offset, length)

    def path(self) -> CopyPath:
        """The bench's copy path: wall-clock timed, no link limit, sizes up to the buffer."""
        return CopyPath(f"{LABEL} at iova 0x{self.buf.iova:x}", self.write, self.read, size_limit=self.buf.size,
                        clock=WallClock(), host_only=True)

    def close(self) -> None:
        """Unmap and free the buffer (idempotent)."""
        if self.buf is not None:
            self.transport.dma_free(self.buf)
            self.buf = None


def staging_size(sizes: list[int], offset: int) -> int:
    """The buffer a bench run needs: its largest copy at ``offset``, page-rounded, at most 256 MiB."""
    need = offset + max(sizes)
    return min(MAX_BUFFER, (need + 4095) & ~4095)
