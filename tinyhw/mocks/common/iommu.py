"""Host DMA memory of ``mock:navi31``: pinned buffers behind an emulated IOMMU, reached over the board's PCIe link.

What VFIO type1 gives a process (specs/pci-vfio-remote.md §8.8, §9.1): page-aligned host buffers made
visible to the device at an IOVA chosen by the process; the device then sees IOVAs only and reaches
nothing else. Here a buffer is plain host memory (a bytearray) and the map is a table IOVA -> buffer.

The GPU's bus-master reads and writes of "system" pages (PTEs with the system bit, amd-bringup.md §4.5)
arrive as :meth:`EmulatedIommu.dma_read` / :meth:`dma_write` (the board's bus attachment, as the ASM24
bridge is on the usb board). An IOVA no buffer covers is an IOMMU fault: nothing is read or written, the
fault is logged (as the kernel logs a DMAR/AMD-Vi fault) and the access raises
:class:`~tinyhw.mocks.common.faults.BusFault`, which stops the emulated SDMA engine without a fence: the driver
sees its copy time out, as on hardware. With the function's COMMAND bus-master bit clear (specs/pci-vfio-remote.md
§3.4) no request leaves the device: the same stop, logged as dropped.

Time: every byte crosses the board's PCIe link, charged on the board's virtual clock at the link's
payload rate (speed x width from the function's Link Status, 8b/10b below 8 GT/s, 128b/130b from 8 GT/s,
specs/pci-vfio-remote.md §3.7) times the share of a TLP that is payload: 256-byte payloads (MPS/MRRS)
with 24 bytes of header, sequence number, LCRC and framing each (inferred: typical x86 root-port values;
read completions are charged the same).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import Any

from tinyhw.errors import Refused
from tinyhw.mocks.common.faults import BusFault
from tinyhw.transport.dmabuf import IovaBuffer

PAGE = 4096
#: GT/s per speed code and the share of the line that is data after encoding
LANE_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
TLP_PAYLOAD, TLP_OVERHEAD = 256, 24  # inferred (see the module docstring)
FIRST_IOVA = 1 << 20  # like VfioTransport: buffers from 1 MiB up unless the caller names an IOVA


def link_rate(speed: int, width: int, payload: int = TLP_PAYLOAD) -> float:
    """Payload bytes per second one direction of a PCIe link carries in TLPs of ``payload`` bytes (encoding and
    TLP overhead): DMA by default, 64 for write-combined CPU stores."""
    gts = LANE_GTS.get(speed, 2.5)
    encoding = 8 / 10 if speed <= 2 else 128 / 130
    return gts * 1e9 * encoding / 8 * max(width, 1) * payload / (payload + TLP_OVERHEAD)


class HostBuffer(IovaBuffer):
    """Host memory mapped for the emulated device at ``iova`` (the interface of ``tinyhw.pci.dma.DmaBuffer``)."""

    def __init__(self, size: int) -> None:
        super().__init__(size)
        self.mem = bytearray(self.size)

    def close(self) -> None:
        """Free the buffer's memory (it reads empty afterwards)."""
        self.mem = bytearray()


class EmulatedIommu:
    """IOVA -> host buffer map of one emulated function, and its bus-master data path (``board.attach_bus``)."""

    def __init__(self, clock: Any, rate: float, master: Callable[[], bool] = lambda: True) -> None:
        self.clock = clock
        self.rate = rate  # bytes per second over the link
        self.master = master  # the function's COMMAND bus-master bit: without it no request leaves the device
        self._starts: list[int] = []
        self._bufs: list[HostBuffer] = []
        self.next_iova = FIRST_IOVA
        self.faults: list[str] = []
        self.stats = {"dma_reads": 0, "dma_writes": 0, "bytes_read": 0, "bytes_written": 0, "faults": 0}

    # -- the host side (the transport's dma_alloc / dma_free) ----------------------------------------------------
    def map(self, buf: HostBuffer, iova: int | None) -> None:
        """Map ``buf`` at IOVA ``iova`` (when None: the first IOVA past every buffer mapped so far) and set
        ``buf.iova``. Refused for an IOVA that is not page aligned or that overlaps a mapped buffer."""
        iova = self.next_iova if iova is None else iova
        if iova % PAGE or iova < 0:
            raise Refused(f"iova 0x{iova:x} is not page aligned")
        i = bisect.bisect_right(self._starts, iova)
        if (i and self._starts[i - 1] + self._bufs[i - 1].size > iova) or \
                (i < len(self._starts) and iova + buf.size > self._starts[i]):
            raise Refused(f"iova 0x{iova:x} (+0x{buf.size:x}) overlaps a mapped dma buffer")
        self._starts.insert(i, iova)
        self._bufs.insert(i, buf)
        buf.iova = iova
        self.next_iova = max(self.next_iova, iova + buf.size)

    def unmap(self, buf: HostBuffer) -> bool:
        """Remove ``buf``'s mapping; True when it was mapped."""
        for i, b in enumerate(self._bufs):
            if b is buf:
                del self._starts[i], self._bufs[i]
                return True
        return False

    def buffers(self) -> list[HostBuffer]:
        """The mapped buffers, in IOVA order."""
        return list(self._bufs)

    # -- the device side (bus-master accesses of system pages) -----------------------------------------------------
    def _find(self, addr: int, length: int, what: str) -> tuple[HostBuffer, int]:
        if not self.master():
            self.stats["faults"] += 1
            message = f"device {what} of {length} bytes at iova 0x{addr:x} dropped: bus mastering is off"
            self.faults.append(message)
            raise BusFault(message)
        i = bisect.bisect_right(self._starts, addr) - 1
        if i >= 0 and addr + length <= self._starts[i] + self._bufs[i].size:
            return self._bufs[i], addr - self._starts[i]
        self.stats["faults"] += 1
        message = f"iommu fault: device {what} of {length} bytes at iova 0x{addr:x}, which no dma buffer maps"
        self.faults.append(message)
        raise BusFault(message)

    def _charge(self, n: int) -> None:
        self.clock.advance(n / self.rate)

    def dma_read(self, addr: int, length: int) -> bytes:
        """A device read of ``length`` bytes at IOVA ``addr``: the buffer's bytes, and the clock advances at the link's
        DMA rate. Raises :class:`~tinyhw.mocks.common.faults.BusFault` (logged and counted as a fault) while bus
        mastering is
        off or when no buffer maps the whole range."""
        buf, off = self._find(addr, length, "read")
        self.stats["dma_reads"] += 1
        self.stats["bytes_read"] += length
        self._charge(length)
        return bytes(buf.mem[off:off + length])

    def dma_write(self, addr: int, data: bytes) -> bool:
        """A device write of ``data`` at IOVA ``addr`` into the mapped buffer; the clock advances at the link's DMA
        rate. Raises :class:`~tinyhw.mocks.common.faults.BusFault` (logged and counted as a fault) while bus mastering
        is off
        or when no buffer maps the whole range."""
        buf, off = self._find(addr, len(data), "write")
        self.stats["dma_writes"] += 1
        self.stats["bytes_written"] += len(data)
        self._charge(len(data))
        buf.mem[off:off + len(data)] = data
        return True
