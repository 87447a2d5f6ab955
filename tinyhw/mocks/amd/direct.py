"""``mock:navi31``, ``mock:navi33``: an emulated AMD board attached directly, as a native PCIe function would be.

The transport seam of ARCHITECTURE.md ("The transport seam", "Emulated boards", "Counters",
"Device lock") over a :class:`~tinyhw.mocks.amd.board.AmdBoard` (built from its description) with BARs assigned
as a BIOS/OS would (specs/pci-vfio-remote.md §3.14). Every register or config access advances the board's
virtual clock by 1 us. A block of plain VRAM through the mapped BAR (a memcpy, what ``bench copy``
does; §6.1: a prefetchable BAR mapped write-combining) is timed as the link would carry it, not as
a loop of register accesses (inferred, see :func:`burst_seconds`). Faults ``disconnect@N`` /
``timeout@N`` count BAR register accesses (dwords; a block of k dwords is k accesses), 1-based,
from the moment the transport is opened, which for the CLI is the start of the command's process.
Config accesses are not counted but fail too once the board has gone away.

Host DMA memory: like ``VfioTransport`` the transport offers ``dma_alloc``/``dma_free`` (the
``DmaBuffers`` ability): host buffers mapped at IOVAs by an emulated IOMMU (:mod:`tinyhw.mocks.common.iommu`),
which is the board's bus attachment, so the GPU's system pages resolve through that map and an
unmapped IOVA is an IOMMU fault. Their bytes cross the link at its Link Status rate, on the board clock.
"""

from __future__ import annotations

from tinyhw.boards.amd import AmdBoardOptions
from tinyhw.boards.spec import BoardSpec
from tinyhw.errors import DeviceTimeout, Disconnected, Refused
from tinyhw.formats.pciconfig import parse_config
from tinyhw.mocks.amd.board import AmdBoard
from tinyhw.mocks.common.iommu import EmulatedIommu, HostBuffer, link_rate
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo

#: Modelled latency of one register or config access on native PCIe.
ACCESS_LATENCY = 1e-6
#: A burst through the mapped BAR (all inferred, not measured): write-combined stores leave the CPU as
#: posted 64-byte writes (TLP overhead as :func:`~tinyhw.mocks.common.iommu.link_rate`), streamed at the link's
#: rate, then one round trip to flush them; uncached loads are non-posted 32-byte reads (AVX2 memcpy),
#: one in flight, each a round trip.
WC_BURST, UC_READ = 64, 32


def burst_seconds(nbytes: int, write: bool, speed: int, width: int) -> float:
    """Modelled time of a VRAM burst of ``nbytes`` through the BAR mapping on a link of ``speed`` x ``width``."""
    if write:  # plus one round trip: the fence / read-back that makes posted writes visible
        return ACCESS_LATENCY + nbytes / link_rate(speed, width, WC_BURST)
    return -(-nbytes // UC_READ) * ACCESS_LATENCY


class DirectTransport(Transport):
    """The emulated board reached with no bridge in between (name ``mock``)."""

    name = "mock"
    emulated = True

    def __init__(self, options: AmdBoardOptions, *, lock: bool = True, spec: BoardSpec) -> None:
        clock = VirtualClock()
        super().__init__(clock)
        self.vclock = clock
        self.options = options
        self._closed = False
        self.board = AmdBoard(options, clock, attach="direct", lock=lock, spec=spec)  # the board takes the device lock
        self.accesses = 0
        disconnects = options.faults.at("disconnect")
        self._disconnect_at = min(disconnects) if disconnects else None
        self._timeouts = set(options.faults.at("timeout"))
        self._gone = False
        self._faulty = (self._disconnect_at is not None or bool(self._timeouts)
                        or options.faults.has("psp-disconnect") or options.faults.has("psp-cut-commit"))
        self.link = self._link_status()
        self.iommu = EmulatedIommu(clock, link_rate(*self.link), master=lambda: bool(self.board.pci.command & 4))
        self.board.attach_bus(self.iommu)  # the gpu's system pages are host memory behind the iommu

    def _link_status(self) -> tuple[int, int]:
        """(speed code, width) of the board's link, from its own Link Status (read without counting)."""
        image = b"".join(self.board.cfg_read32(o).to_bytes(4, "little") for o in range(0, 0x100, 4))
        pcie = parse_config(image).express
        if pcie is None or not pcie.has_link or not pcie.lnksta.width:
            return 1, 1
        return pcie.lnksta.current_speed, pcie.lnksta.width

    # -- host dma buffers (the DmaBuffers ability, as VfioTransport) -------------------------------------------
    def dma_alloc(self, size: int, iova: int | None = None) -> HostBuffer:
        """Host memory visible to the emulated gpu at ``iova`` (the next free one from 1 MiB when None)."""
        self._check_gone()
        buf = HostBuffer(size)
        self.iommu.map(buf, iova)
        return buf

    def dma_free(self, buf: HostBuffer) -> None:
        """Unmap host buffer ``buf`` from the emulated IOMMU and free it (the ``DmaBuffers`` ability)."""
        self.iommu.unmap(buf)
        buf.close()

    def burst_seconds(self, nbytes: int, *, write: bool) -> float:
        """Modelled seconds of a VRAM burst of ``nbytes`` through the mapped BAR on this board's link (see
        :func:`burst_seconds`; inferred)."""
        return burst_seconds(nbytes, write, *self.link)

    # -- faults ---------------------------------------------------------------------------------------------------
    def _fault(self, bar: int, offset: int) -> None:
        """Called for every access while a fault is planned or the board is gone; raises when it hits."""
        n = self.accesses
        if self.board.lost and not self._gone:
            self._gone = True
            raise Disconnected(f"the emulated {self.board.spec.name} lost power (register access {n}, bar{bar} "
                               f"offset 0x{offset:x})",
                               hint="power-cycle the board and rerun the command")
        if self._gone:
            raise Disconnected(f"the emulated {self.board.spec.name} has gone away",
                               hint="reconnect the board and rerun the command")
        if n == self._disconnect_at:
            self._gone = True
            self.board.disconnect()
            raise Disconnected(f"the emulated {self.board.spec.name} went away at register access {n} (bar{bar} "
                               f"offset 0x{offset:x})",
                               hint="reconnect the board and rerun the command")
        if n in self._timeouts:
            raise DeviceTimeout(f"register access {n} (bar{bar} offset 0x{offset:x}) timed out",
                                hint="check the board and rerun the command")

    def _check_gone(self) -> None:
        if self._gone:
            raise Disconnected(f"the emulated {self.board.spec.name} has gone away",
                               hint="reconnect the board and rerun the command")

    # -- config space ---------------------------------------------------------------------------------------------
    def config_read(self, offset: int, size: int = 4) -> int:
        """Read ``size`` (1, 2 or 4) naturally aligned bytes of config space at ``offset``; one round trip of 1 us of
        virtual time. Refused when misaligned or outside 4 KiB, Disconnected once the board is gone."""
        _check_cfg(offset, size)
        self._check_gone()
        self.vclock.advance(ACCESS_LATENCY)
        c = self.counters
        c.round_trips += 1
        c.bytes_in += size
        shift = 8 * (offset & 3)
        return (self.board.cfg_read32(offset & ~3) >> shift) & ((1 << (8 * size)) - 1)

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Write the low ``size`` bytes of ``value`` to config space at ``offset`` (only those byte lanes change); 1 us
        of virtual time. Refused when misaligned or outside 4 KiB, Disconnected once the board is gone."""
        _check_cfg(offset, size)
        self._check_gone()
        self.vclock.advance(ACCESS_LATENCY)
        self.counters.bytes_out += size
        shift = 8 * (offset & 3)
        value &= (1 << (8 * size)) - 1
        self.board.cfg_write32(offset & ~3, value << shift, ((1 << size) - 1) << (offset & 3))

    # -- BARs -------------------------------------------------------------------------------------------------------
    def bars(self) -> list[BarInfo]:
        """The board's BARs as its config space places them now (address, size, memory or I/O, prefetchable, 64-bit)."""
        out = []
        for index, address, size, flags in self.board.resources():
            io = bool(flags & 1)
            out.append(BarInfo(index=index, address=address, size=size, kind="io" if io else "memory",
                               prefetchable=not io and bool(flags & 8), is_64bit=not io and (flags & 6) == 4))
        return out

    def _make_region(self, info: BarInfo) -> BarRegion:
        return _MockRegion(info, self)

    # -- identity, info, lifetime -------------------------------------------------------------------------------
    def identity(self) -> Identity:
        """Vendor, device, revision, class and subsystem ids read from config space (three counted reads), located at
        ``mock:<board>`` (``mock:navi31``)."""
        ids = self.config_read(0x00)
        rev_class = self.config_read(0x08)
        sub = self.config_read(0x2C)
        return Identity(vendor_id=ids & 0xFFFF, device_id=ids >> 16, revision=rev_class & 0xFF,
                        class_code=rev_class >> 8, subsystem_vendor_id=sub & 0xFFFF, subsystem_id=sub >> 16,
                        location=f"mock:{self.board.spec.name}")

    def info(self) -> TransportInfo:
        """What the transport is: emulated ``mock``, its board (``navi31``), attached directly."""
        return TransportInfo(transport="mock", emulated=True, extra={"board": self.board.spec.name, "attach": "direct"})

    def close(self) -> None:
        """Free every host DMA buffer still mapped and close the board (flash file, state file, device lock); safe to
        call twice."""
        if self._closed:
            return
        self._closed = True
        for buf in self.iommu.buffers():
            self.dma_free(buf)
        self.board.close()


def _check_cfg(offset: int, size: int) -> None:
    if size not in (1, 2, 4) or offset % size or not 0 <= offset <= 0x1000 - size:
        raise Refused(f"config access of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000 bytes")


class _MockRegion(BarRegion):
    """Dword accesses to one BAR of the board; blocks are loops of dword accesses."""

    def __init__(self, info: BarInfo, transport: DirectTransport) -> None:
        super().__init__(info)
        self._t = transport
        self._index = info.index
        self._size = info.size

    def read32(self, offset: int) -> int:
        if offset & 3 or not 0 <= offset < self._size:
            self.check(offset, 4)
        t = self._t
        t.accesses += 1
        if t._faulty or t._gone:
            t._fault(self._index, offset)
        t.vclock.advance(ACCESS_LATENCY)
        c = t.counters
        c.reg_reads += 1
        c.round_trips += 1
        c.bytes_in += 4
        return t.board.mem_read32(self._index, offset)

    def write32(self, offset: int, value: int) -> None:
        if offset & 3 or not 0 <= offset < self._size:
            self.check(offset, 4)
        t = self._t
        t.accesses += 1
        if t._faulty or t._gone:
            t._fault(self._index, offset)
        t.vclock.advance(ACCESS_LATENCY)
        c = t.counters
        c.reg_writes += 1
        c.bytes_out += 4
        t.board.mem_write32(self._index, offset, value & 0xFFFFFFFF)

    def read(self, offset: int, length: int) -> bytes:
        self.check(offset, length)
        t = self._t
        n = length // 4
        if n > 1 and not (t._faulty or t._gone):
            got = t.board.mem_read_block(self._index, offset, length)
            if got is not None:  # a burst of plain VRAM: the counts of n dword reads, the time of a memcpy
                t.accesses += n
                t.vclock.advance(t.burst_seconds(length, write=False))
                c = t.counters
                c.reg_reads += n
                c.round_trips += n
                c.bytes_in += 4 * n
                return got
        out = bytearray()
        for off in range(offset, offset + length, 4):
            out += self.read32(off).to_bytes(4, "little")
        return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        self.check(offset, len(data))
        t = self._t
        n = len(data) // 4
        if n > 1 and not (t._faulty or t._gone) and t.board.mem_write_block(self._index, offset, bytes(data)):
            # a burst to plain VRAM: the counts of n dword writes, the time of a write-combined memcpy
            t.accesses += n
            t.vclock.advance(t.burst_seconds(len(data), write=True))
            c = t.counters
            c.reg_writes += n
            c.bytes_out += 4 * n
            return
        for i in range(0, len(data), 4):
            self.write32(offset + i, int.from_bytes(data[i:i + 4], "little"))
