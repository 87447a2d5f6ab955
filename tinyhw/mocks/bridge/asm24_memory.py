"""Memory of the emulated ASM24 bridge: the 8051's XDATA space, the SRAM and the queue pages.

Implements specs/asm24-usb-bridge.md §7.1 (XDATA map), §7.2 (bridge-internal PCIe addresses the
GPU reaches), §4.2 (E4/E5 semantics: read-only 0x7000 page, 16-bit addresses) and §12
(the four windows alias the same backing memory that the bus-master side sees).

Backing stores and their aliases:

==================  =========  ================  ==========================================
PCIe address        size       XDATA window      role
==================  =========  ================  ==========================================
0x200000-0x27FFFF   512 KiB    0xF000 (4 KiB)    SRAM, 32 slots of 16 KiB (0xF2 engine)
0x800000-0x8001FF   512 B      0xB000            "admin queue" page
0x820000-0x820FFF   4 KiB      0xA000            ``sys_buf`` page (copy-in drain fence at +0x800)
0x822000-0x8227FF   2 KiB      0xB800            ``cq_buf``; a write into 0x822000-0x822FFF
                                                 releases an armed 0xF2 SRAM->host transfer
==================  =========  ================  ==========================================

Everything else in XDATA is a plain 64 KiB byte array (firmware RAM, USB buffers, engine
registers); the TLP engine and link model write their registers into it.
"""

from __future__ import annotations

SRAM_BASE = 0x200000
SRAM_SIZE = 512 * 1024
SLOT_SIZE = 16 * 1024
SECTOR = 512
ADMIN_Q_BASE, ADMIN_Q_SIZE = 0x800000, 0x200
SQ_BASE, SQ_SIZE = 0x820000, 0x1000
CQ_BASE, CQ_SIZE = 0x822000, 0x800
#: A bus-master write anywhere in this range releases a pending 0xF2 read (tinygrad maps 4 KiB).
CQ_RELEASE = (0x822000, 0x823000)

LANDING_BUF = 0x7000  # bulk-OUT landing buffer, read-only to E5 (§4.2)
STREAM_BUF = 0x8000  # streaming reads are assembled here (§6)
READ_ONLY = (0x7000, 0x8000)

#: XDATA ranges whose contents are modelled (a strict board flags E5 writes anywhere else).
MODELLED_WRITES = ((0x8000, 0x9000), (0xA000, 0xB000), (0xB000, 0xB200), (0xB200, 0xB2A0),
                   (0xB400, 0xB500), (0xB800, 0xC000), (0xF000, 0x10000))


class BridgeMemory:
    """XDATA plus the shared SRAM and queue pages, with the windows aliasing them."""

    def __init__(self) -> None:
        self.xdata = bytearray(0x10000)
        self.sram = bytearray(SRAM_SIZE)
        self.admin_q = bytearray(ADMIN_Q_SIZE)
        self.sq = bytearray(SQ_SIZE)
        self.cq = bytearray(CQ_SIZE)
        # (xdata start, length, backing store): E4/E5 inside a window touch the backing store.
        self.windows: tuple[tuple[int, int, bytearray], ...] = (
            (0xF000, 0x1000, self.sram),
            (0xA000, SQ_SIZE, self.sq),
            (0xB000, ADMIN_Q_SIZE, self.admin_q),
            (0xB800, CQ_SIZE, self.cq),
        )
        self.pcie_regions: tuple[tuple[int, int, bytearray], ...] = (
            (SRAM_BASE, SRAM_SIZE, self.sram),
            (ADMIN_Q_BASE, ADMIN_Q_SIZE, self.admin_q),
            (SQ_BASE, SQ_SIZE, self.sq),
            (CQ_BASE, CQ_SIZE, self.cq),
        )

    # -- XDATA (the 8051 view) -------------------------------------------------------------
    def _locate(self, addr: int) -> tuple[bytearray, int, int]:
        """(store, offset in it, bytes until the region ends) for XDATA ``addr``."""
        for start, size, store in self.windows:
            if start <= addr < start + size:
                return store, addr - start, start + size - addr
        end = min((s for s, _, _ in self.windows if s > addr), default=0x10000)
        return self.xdata, addr, end - addr

    def read(self, addr: int, length: int) -> bytes:
        """``length`` bytes from XDATA ``addr``; the 16-bit address wraps like the 8051's DPTR."""
        out = bytearray()
        addr &= 0xFFFF
        while len(out) < length:
            store, off, avail = self._locate(addr)
            n = min(avail, length - len(out))
            out += store[off : off + n]
            addr = (addr + n) & 0xFFFF
        return bytes(out)

    def write(self, addr: int, data: bytes, *, cpu: bool = True) -> None:
        """Write XDATA. ``cpu`` writes (E5) to the read-only landing page are ignored, as on hardware."""
        addr &= 0xFFFF
        pos = 0
        while pos < len(data):
            store, off, avail = self._locate(addr)
            n = min(avail, len(data) - pos)
            if not (cpu and store is self.xdata and READ_ONLY[0] <= addr < READ_ONLY[1]):
                store[off : off + n] = data[pos : pos + n]
            pos += n
            addr = (addr + n) & 0xFFFF

    def put_be(self, addr: int, size: int, value: int) -> None:
        """Store a big-endian register value (TLP engine registers keep the MSB first)."""
        self.xdata[addr : addr + size] = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "big")

    # -- the PCIe (bus-master) view ---------------------------------------------------------------
    def _region(self, addr: int, length: int) -> tuple[bytearray, int] | None:
        for base, size, store in self.pcie_regions:
            if base <= addr and addr + length <= base + size:
                return store, addr - base
        return None

    def pcie_write(self, addr: int, data: bytes) -> bool:
        """Write bridge memory at PCIe ``addr``; False when the range is not backed (dropped)."""
        hit = self._region(addr, len(data))
        if hit is None:
            return False
        store, off = hit
        store[off : off + len(data)] = data
        return True

    def pcie_read(self, addr: int, length: int) -> bytes | None:
        """Bridge memory at PCIe (bus-master) address ``addr``, ``length`` bytes; None when the range is not wholly
        inside one backed region (the read gets no data)."""
        hit = self._region(addr, length)
        if hit is None:
            return None
        store, off = hit
        return bytes(store[off : off + length])


def xdata_write_modelled(addr: int) -> bool:
    """True when an E5 write to ``addr`` lands in a range this model covers."""
    return any(lo <= addr < hi for lo, hi in MODELLED_WRITES) or READ_ONLY[0] <= addr < READ_ONLY[1]
