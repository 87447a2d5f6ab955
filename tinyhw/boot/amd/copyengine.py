"""The copy engine's bring-up: VMID0 page tables, GMC (MMHUB + GC hub), IH rings, MEC enable, SDMA0 queue 0.

Order (:func:`bring_up`): page tables, MMHUB (step 3), GC hub (9a), TLB invalidation, IH (4), MEC (9d), doorbell
aperture + routing (2, 10), SDMA (10). The emulated board keeps no VRAM between commands, so a process that
copies runs :func:`bring_up` itself after the board is booted (`tinyhw am boot` runs it as its last step too).

Which address goes where (amd-bringup.md §4.5): inside page tables -- the hubs' PAGE_TABLE_BASE_ADDR, every PDE and
every PTE into VRAM -- and in the two default-address registers (system aperture default, L2 protection fault
default: page numbers) the *physical* VRAM address (:func:`phys`, the offset from VRAM's start on a single board);
the system aperture bounds, ring bases, write-back addresses and every address in a packet the *MC* address
(:meth:`AmGpu.mc`, FB base + offset).

Spec: specs/amd-bringup.md §4.2 steps 3 (hub programming), 4 (IH rings), 9a (GC hub = step 3), 9d (MEC enable),
10 (SDMA ≥ 6 start and doorbell routing) and the queue facts after the table (one SDMA queue, engine 0 queue 0,
doorbell 256 + (pipe + 4·queue)·10 → index 0x100 for queue 0); §4.5 (VA base 0x2000_0000_0000, root at PDB2,
4 KiB / 2 MiB pages, PTE bits, MTYPE_UC = 3); specs/asm24-usb-bridge.md §7.2 (the bridge addresses the GPU
reaches as system pages), §9.1 (1 MiB SDMA ring, written without reading the read pointer, zero-filled tail
before a wrap). Register and field names come from the generated databases.

Layout (tinyhw's own, above the boot layout of :mod:`tinyhw.boot.amd.layout`, still inside a 256 MiB BAR0):
page tables at 80 MiB (PDB2, PDB1, PDB0, one PTB for the bridge pages, the GMC scratch and dummy pages),
the SDMA read-pointer write-back page, the 1 MiB SDMA ring, two 256 KiB IH rings and their write-pointer page.
The bridge pages appear at VA base + their offsets: SRAM (512 KiB) at +0, ``sys_buf`` (PCIe 0x820000) at
+0x80000, ``cq_buf`` (PCIe 0x822000) at +0x82000.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tinyhw.boot.amd.sdmapkt import nop_fill
from tinyhw.errors import DeviceTimeout
from tinyhw.transport.wait import poll

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

KiB, MiB = 1 << 10, 1 << 20
VA_BASE = 0x2000_0000_0000
VA_SPAN = 1 << 44
PT_BASE = 80 * MiB  # PDB2, PDB1, PDB0, PTB: four 4 KiB tables
SCRATCH_PAGE, DUMMY_PAGE = PT_BASE + 0x4000, PT_BASE + 0x5000
RPTR_PAGE = PT_BASE + 0x6000
IH_WPTR = PT_BASE + 0x7000
SDMA_RING, SDMA_RING_SIZE = PT_BASE + 1 * MiB, 1 * MiB
IH_RINGS, IH_RING_SIZE = PT_BASE + 2 * MiB, 256 * KiB
#: PTBs of :func:`build_page_tables`' extra windows (free until the copy engine's DMA windows use the same pages)
EXTRA_PTBS, EXTRA_PTB_COUNT = PT_BASE + 0x8000, 8
SDMA_DOORBELL_INDEX = 0x100  # 256 + (pipe 0 + 4 * queue 0) * 10 (§4.2)

#: PTE bits (§4.5, gfx10/11)
VALID, SYSTEM, SNOOPED, EXE, READ, WRITE = 1, 1 << 1, 1 << 2, 1 << 4, 1 << 5, 1 << 6
HUGE = 1 << 54
MTYPE_UC = 3 << 48
RW = VALID | READ | WRITE | EXE

#: bridge pages mapped as system memory: (bus address, size, offset from VA_BASE) (asm24 spec §7.2)
SRAM_BUS, SRAM_SIZE = 0x200000, 512 * KiB
SYS_BUF_BUS, CQ_BUF_BUS = 0x820000, 0x822000
BRIDGE_PAGES = ((SRAM_BUS, SRAM_SIZE, 0), (SYS_BUF_BUS, 4 * KiB, 0x80000), (CQ_BUF_BUS, 4 * KiB, 0x82000))


def phys(offset: int) -> int:
    """The physical VRAM address of VRAM byte ``offset``, what a page table, a PDE, a VRAM PTE and the default-address
    registers hold (amd-bringup.md §4.5: physical offset + XGMI offset, and the XGMI offset is 0 off a hive)."""
    return offset


def bridge_va(bus: int) -> int:
    """The GPU virtual address of bridge bus address ``bus``."""
    for base, size, off in BRIDGE_PAGES:
        if base <= bus < base + size:
            return VA_BASE + off + bus - base
    raise ValueError(f"bus address 0x{bus:x} is not a mapped bridge page")


def fields(gpu: AmGpu, reg: str, **values: int) -> int:
    """A register value built from named fields (database masks and shifts)."""
    out = 0
    for name, v in values.items():
        f = gpu.asic.field(f"{reg}.{name}")
        out |= (v << f.shift) & f.mask
    return out


@dataclass
class CopyEngine:
    """What :func:`bring_up` set up: where the ring is, where we are in it, how to reach the bridge."""

    gpu: AmGpu
    ring_mc: int
    doorbell_byte: int
    wptr: int = 0  # bytes, monotonic (the ring position is wptr mod size)
    stats: dict[str, int] = field(default_factory=lambda: {"submissions": 0, "dwords": 0, "wraps": 0})

    def mc(self, offset: int) -> int:
        """The GPU's memory-controller address of VRAM byte ``offset`` (see :meth:`AmGpu.mc`)."""
        return self.gpu.mc(offset)

    def submit(self, dwords: list[int]) -> None:
        """Write a submission into the ring (never split across the wrap: zero NOPs fill the tail) and ring."""
        size = SDMA_RING_SIZE
        body = list(dwords)
        pos = self.wptr % size
        if 4 * len(body) >= size:
            raise ValueError(f"an sdma submission of {4 * len(body)} bytes does not fit the {size}-byte ring")
        if pos + 4 * len(body) > size:
            tail = (size - pos) // 4
            self.gpu.vram_write(SDMA_RING + pos, b"".join(d.to_bytes(4, "little") for d in nop_fill(tail)))
            self.wptr += 4 * tail
            pos = 0
            self.stats["wraps"] += 1
        self.gpu.vram_write(SDMA_RING + pos, b"".join((d & 0xFFFFFFFF).to_bytes(4, "little") for d in body))
        self.wptr += 4 * len(body)
        self.stats["submissions"] += 1
        self.stats["dwords"] += len(body)
        self.gpu.hdp_flush()
        bar = self.gpu.transport.bar(2)
        bar.write32(self.doorbell_byte, self.wptr & 0xFFFFFFFF)
        bar.write32(self.doorbell_byte + 4, self.wptr >> 32)

    def rptr(self) -> int:
        """The engine's ring read pointer in bytes, from its write-back slot in VRAM (one 8-byte VRAM read)."""
        return int.from_bytes(self.gpu.vram_read(RPTR_PAGE, 8), "little")

    def wait_idle(self, timeout: float = 10.0) -> None:
        """Wait until the engine consumed everything submitted (its read pointer write-back)."""
        try:
            poll(self.gpu.clock, self.rptr, lambda r: r >= self.wptr, timeout=timeout, interval=0.0,
                 what="the sdma engine to drain its ring")
        except DeviceTimeout as e:
            missed = self.missed_doorbell()
            raise DeviceTimeout(f"sdma0 did not consume its ring in {timeout:g} s (read pointer 0x{self.rptr():x}, "
                                f"write pointer 0x{self.wptr:x}): " + (missed or "the copy engine is hung"),
                                hint="reset the gpu (`tinyhw am reset`) and boot again") from e

    def missed_doorbell(self) -> str | None:
        """When the engine's write pointer (SDMA0_QUEUE0_RB_WPTR) is not what the driver rang, say so with the
        doorbell route as programmed (the NBIO delivered the doorbell nowhere); None when the engine saw it."""
        g = self.gpu
        seen = g.rd("gc.SDMA0_QUEUE0_RB_WPTR_HI") << 32 | g.rd("gc.SDMA0_QUEUE0_RB_WPTR")
        if seen == self.wptr:
            return None
        return (f"sdma0 never saw the doorbell (SDMA0_QUEUE0_RB_WPTR 0x{seen:x}, the driver rang 0x{self.wptr:x} at "
                f"BAR2 byte 0x{self.doorbell_byte:x}; doorbell route: {doorbell_route(g)})")


def _pte_table(entries: dict[int, int]) -> bytes:
    out = bytearray(4 * KiB)
    for i, e in entries.items():
        out[8 * i:8 * i + 8] = e.to_bytes(8, "little")
    return bytes(out)


def build_page_tables(gpu: AmGpu, windows: tuple[tuple[int, int, int], ...] = ()) -> None:
    """VMID0: PDB2 -> PDB1 -> PDB0 -> one PTB whose 4 KiB system PTEs name the bridge pages (§4.5; each PDE holds its
    table's physical VRAM address). ``windows`` ((offset from VA_BASE, bus address, size), 4 KiB aligned, inside the
    first 1 GiB) map more bridge pages as system pages; a 2 MiB VA region past the first gets its own PTB from
    :data:`EXTRA_PTBS` on (the boot's firmware staging uses them; :func:`bring_up` rebuilds the tables without them)."""
    pdb2, pdb1, pdb0, ptb = (PT_BASE + i * 4 * KiB for i in range(4))
    regions: dict[int, dict[int, int]] = {0: {}}
    for bus, size, off in BRIDGE_PAGES:
        for p in range(0, size, 4 * KiB):
            regions[0][(off + p) >> 12] = (bus + p) | RW | SYSTEM | SNOOPED | MTYPE_UC
    for off, bus, size in windows:
        if off % (4 * KiB) or bus % (4 * KiB) or not 0 <= off < off + size <= 1 << 30:
            raise ValueError(f"window at va offset 0x{off:x} is not 4 KiB aligned inside the first 1 GiB")
        for p in range(0, size, 4 * KiB):
            page = (off + p) >> 12
            regions.setdefault(page >> 9, {})[page & 511] = (bus + p) | RW | SYSTEM | SNOOPED | MTYPE_UC
    extra = sorted(r for r in regions if r)
    if len(extra) > EXTRA_PTB_COUNT:
        raise ValueError(f"the windows need more than {EXTRA_PTB_COUNT} extra page tables")
    where = {0: ptb, **{r: EXTRA_PTBS + i * 4 * KiB for i, r in enumerate(extra)}}
    tables = bytearray()
    tables += _pte_table({0: phys(pdb1) | VALID})
    tables += _pte_table({0: phys(pdb0) | VALID})
    tables += _pte_table({r: phys(where[r]) | VALID for r in regions})
    tables += _pte_table(regions[0])
    tables += bytes(8 * KiB)  # scratch + dummy pages
    gpu.vram_write(PT_BASE, bytes(tables))
    if extra:
        gpu.vram_write(EXTRA_PTBS, b"".join(_pte_table(regions[r]) for r in extra))


def map_vram_2m(gpu: AmGpu, va_offset: int, vram: int, size: int) -> None:
    """Map VRAM ``vram`` at VA_BASE + ``va_offset`` with 2 MiB pages (PDB0 entries with PDE-is-PTE, holding physical
    VRAM addresses)."""
    if va_offset % (2 * MiB) or vram % (2 * MiB) or not 2 * MiB <= va_offset < 1 << 30:
        raise ValueError("2 MiB mappings need 2 MiB alignment inside the first 1 GiB (one PDB0) above the bridge pages")
    pdb0 = PT_BASE + 2 * 4 * KiB
    for i in range(0, size, 2 * MiB):
        entry = phys(vram + i) | RW | HUGE | MTYPE_UC
        gpu.vram_write(pdb0 + 8 * ((va_offset + i) >> 21), entry.to_bytes(8, "little"))
    invalidate(gpu)


def map_vram_pages(gpu: AmGpu, va_offset: int, vram: int, span: int, ranges: list[tuple[int, int]], tables: int,
                   room: int) -> int:
    """Map only the byte ranges ``ranges`` ([(start, end)], 4 KiB aligned, relative to ``vram`` and the VA) of the
    ``span`` bytes of VRAM at offset ``vram`` to VA_BASE + ``va_offset`` (entries hold physical VRAM addresses, §4.5)
    and leave every other page of ``span`` unmapped, so
    an access there faults: 2 MiB pages (PDB0 entries with PDE-is-PTE) where a whole one is mapped, a 4 KiB table of
    4 KiB PTEs (one after the other from VRAM ``tables``, at most ``room`` bytes of them) for each 2 MiB page that is
    mapped in part, invalid PDB0 entries for the rest. Returns the number of 4 KiB tables written."""
    if va_offset % (2 * MiB) or vram % (2 * MiB) or span % (2 * MiB) or tables % (4 * KiB) or \
            not 2 * MiB <= va_offset < va_offset + span <= 1 << 30:
        raise ValueError("bounded mappings need 2 MiB alignment inside the first 1 GiB and 4 KiB aligned tables")
    pages: set[int] = set()
    for lo, hi in ranges:
        if lo % (4 * KiB) or hi % (4 * KiB) or not 0 <= lo <= hi <= span:
            raise ValueError(f"range 0x{lo:x}..0x{hi:x} is not 4 KiB aligned inside the 0x{span:x}-byte span")
        pages.update(range(lo >> 12, hi >> 12))
    entries, written = bytearray(), bytearray()
    for i in range(0, span, 2 * MiB):
        here = [j for j in range(512) if (i >> 12) + j in pages]
        if len(here) == 512:
            entry = phys(vram + i) | RW | HUGE | MTYPE_UC
        elif here:
            if len(written) + 4 * KiB > room:
                raise ValueError(f"the mapping needs more than {room // (4 * KiB)} page tables")
            entry = phys(tables + len(written)) | VALID
            written += _pte_table({j: phys(vram + i + 4 * KiB * j) | RW | MTYPE_UC for j in here})
        else:
            entry = 0
        entries += entry.to_bytes(8, "little")
    if written:
        gpu.vram_write(tables, bytes(written))
    gpu.vram_write(PT_BASE + 2 * 4 * KiB + 8 * (va_offset >> 21), bytes(entries))
    invalidate(gpu)
    return len(written) // (4 * KiB)


def program_hub(gpu: AmGpu, hub: str) -> None:
    """Program one memory hub (``hub``: the register prefix "mmhub.MM" or "gc.GC") as amd-bringup.md §4.2 step 3
    says: AGP off, the system aperture over VRAM (MC addresses >> 18), the default pages (physical page numbers,
    §4.5), L1 TLB and L2, and VM context 0 over tinyhw's VA range with its page-table root (physical address | valid,
    §4.5)."""
    fb_top = gpu.fb_base + gpu.vram_size - 1
    gpu.wr(f"{hub}MC_VM_AGP_BASE", 0)
    gpu.wr(f"{hub}MC_VM_AGP_BOT", 0xFFFFFFFFFFFF >> 24)
    gpu.wr(f"{hub}MC_VM_AGP_TOP", 0)
    gpu.wr(f"{hub}MC_VM_SYSTEM_APERTURE_LOW_ADDR", gpu.fb_base >> 18)
    gpu.wr(f"{hub}MC_VM_SYSTEM_APERTURE_HIGH_ADDR", fb_top >> 18)
    gpu.wr(f"{hub}MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB", phys(SCRATCH_PAGE) >> 12)
    gpu.wr(f"{hub}MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", phys(SCRATCH_PAGE) >> 44)
    gpu.wr(f"{hub}VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", phys(DUMMY_PAGE) >> 12)
    gpu.wr(f"{hub}VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", phys(DUMMY_PAGE) >> 44)
    gpu.wr(f"{hub}VM_L2_PROTECTION_FAULT_CNTL2",
           fields(gpu, f"{hub}VM_L2_PROTECTION_FAULT_CNTL2", ACTIVE_PAGE_MIGRATION_PTE_READ_RETRY=1))
    gpu.wr(f"{hub}MC_VM_MX_L1_TLB_CNTL", fields(gpu, f"{hub}MC_VM_MX_L1_TLB_CNTL", ENABLE_L1_TLB=1,
                                                SYSTEM_ACCESS_MODE=3, ENABLE_ADVANCED_DRIVER_MODEL=1, MTYPE=3))
    gpu.wr(f"{hub}VM_L2_CNTL", fields(gpu, f"{hub}VM_L2_CNTL", ENABLE_L2_CACHE=1, ENABLE_L2_FRAGMENT_PROCESSING=0))
    start, end = VA_BASE >> 12, (VA_BASE + VA_SPAN - 1) >> 12
    gpu.wr(f"{hub}VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", start & 0xFFFFFFFF)
    gpu.wr(f"{hub}VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", start >> 32)
    gpu.wr(f"{hub}VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", end & 0xFFFFFFFF)
    gpu.wr(f"{hub}VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32", end >> 32)
    root = phys(PT_BASE) | VALID
    gpu.wr(f"{hub}VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", root & 0xFFFFFFFF)
    gpu.wr(f"{hub}VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", root >> 32)
    gpu.wr(f"{hub}VM_CONTEXT0_CNTL", fields(gpu, f"{hub}VM_CONTEXT0_CNTL", ENABLE_CONTEXT=1, PAGE_TABLE_DEPTH=3))
    for i in range(18):
        gpu.wr(f"{hub}VM_INVALIDATE_ENG{i}_ADDR_RANGE_LO32", 0xFFFFFFFF)
        gpu.wr(f"{hub}VM_INVALIDATE_ENG{i}_ADDR_RANGE_HI32", 0x1F)


def invalidate(gpu: AmGpu, hubs: tuple[str, ...] = ("mmhub.MM", "gc.GC")) -> None:
    """Flush the TLBs of ``hubs`` (both by default) for VMID0 through engine 17 and wait for the acknowledgement."""
    for hub in hubs:
        gpu.wr(f"{hub}VM_INVALIDATE_ENG17_REQ", fields(gpu, f"{hub}VM_INVALIDATE_ENG17_REQ", PER_VMID_INVALIDATE_REQ=1))
        poll(gpu.clock, functools.partial(gpu.rd, f"{hub}VM_INVALIDATE_ENG17_ACK"), lambda v: bool(v & 1),
             timeout=1.0, interval=0.0, what=f"the {hub[:-2]} tlb invalidation")


def wr_far(gpu: AmGpu, name: str, value: int) -> None:
    """Write a register past the register BAR through BIF_BX_PF0_RSMU_INDEX/DATA (amd-bringup.md §3.1)."""
    at = gpu.offset(name)
    if at + 4 <= gpu.mmio.size:
        gpu.wr(name, value)
        return
    gpu.wr("nbio.BIF_BX_PF0_RSMU_INDEX", at)
    gpu.wr("nbio.BIF_BX_PF0_RSMU_DATA", value)


def rd_far(gpu: AmGpu, name: str) -> int:
    """Read a register past the register BAR through BIF_BX_PF0_RSMU_INDEX/DATA (amd-bringup.md §3.1)."""
    at = gpu.offset(name)
    if at + 4 <= gpu.mmio.size:
        return gpu.rd(name)
    gpu.wr("nbio.BIF_BX_PF0_RSMU_INDEX", at)
    return gpu.rd("nbio.BIF_BX_PF0_RSMU_DATA")


def setup_doorbells(gpu: AmGpu) -> None:
    """§4.2 step 2 (doorbell aperture on) and step 10's routing: port 2, awid 0xe, offset = SDMA index * 2, size 4."""
    gpu.wr("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", 1)
    reg = "nbio.S2A_DOORBELL_ENTRY_2_CTRL"
    wr_far(gpu, reg, fields(gpu, reg, S2A_DOORBELL_PORT2_ENABLE=1, S2A_DOORBELL_PORT2_AWID=0xE,
                            S2A_DOORBELL_PORT2_RANGE_OFFSET=SDMA_DOORBELL_INDEX * 2, S2A_DOORBELL_PORT2_RANGE_SIZE=4))


def doorbell_route(gpu: AmGpu) -> str:
    """The SDMA doorbell's path as programmed, in words: the doorbell aperture and NBIO port 2 (want enabled, AWID
    0xE, a range covering the queue's doorbell dwords)."""
    aper = gpu.rd("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN")
    reg, f = "nbio.S2A_DOORBELL_ENTRY_2_CTRL", "S2A_DOORBELL_PORT2"
    v = rd_far(gpu, reg)
    d = gpu.asic.reg(reg).decode(v)
    first, count = d.get(f"{f}_RANGE_OFFSET", 0), d.get(f"{f}_RANGE_SIZE", 0)
    want = SDMA_DOORBELL_INDEX * 2
    ok = d.get(f"{f}_ENABLE") == 1 and d.get(f"{f}_AWID") == 0xE and first <= want and want + 1 < first + count
    return (f"RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN.BIF_DOORBELL_APER_EN={aper & 1}, {reg[5:]} 0x{v:08x} "
            f"({'routed' if ok else 'not routed'}: ENABLE={d.get(f'{f}_ENABLE', 0)} AWID=0x{d.get(f'{f}_AWID', 0):x} "
            f"RANGE_OFFSET=0x{first:x} RANGE_SIZE={count}, want AWID 0xe over dwords 0x{want:x}-0x{want + 1:x})")


def setup_ih(gpu: AmGpu) -> None:
    """§4.2 step 4: two 256 KiB IH rings; ring 0 with write-pointer write-back and interrupts, doorbell rptr off."""
    size_log2 = (IH_RING_SIZE // 4).bit_length() - 1
    gpu.wr("osssys.IH_DOORBELL_RPTR", 0)
    for ring, suffix in ((0, ""), (1, "_RING1")):
        base = gpu.mc(IH_RINGS + ring * IH_RING_SIZE)
        gpu.wr(f"osssys.IH_RB_BASE{suffix}", base >> 8)
        gpu.wr(f"osssys.IH_RB_BASE_HI{suffix}", base >> 40)
        gpu.wr(f"osssys.IH_RB_WPTR{suffix}", 0)
        gpu.wr(f"osssys.IH_RB_RPTR{suffix}", 0)
    gpu.wr("osssys.IH_RB_WPTR_ADDR_LO", gpu.mc(IH_WPTR) & 0xFFFFFFFF)
    gpu.wr("osssys.IH_RB_WPTR_ADDR_HI", gpu.mc(IH_WPTR) >> 32)
    gpu.wr("osssys.IH_RB_CNTL_RING1", fields(gpu, "osssys.IH_RB_CNTL_RING1", RB_SIZE=size_log2, MC_SNOOP=1,
                                             RB_ENABLE=1))
    gpu.wr("osssys.IH_RB_CNTL", fields(gpu, "osssys.IH_RB_CNTL", RB_SIZE=size_log2, WPTR_WRITEBACK_ENABLE=1,
                                       MC_SNOOP=1, RB_ENABLE=1, ENABLE_INTR=1))


def enable_mec(gpu: AmGpu) -> None:
    """§4.2 step 9d (gfx10+): MEC pipe 0 out of reset, active, not halted."""
    gpu.wr("gc.CP_MEC_RS64_CNTL", fields(gpu, "gc.CP_MEC_RS64_CNTL", MEC_PIPE0_RESET=0, MEC_PIPE0_ACTIVE=1, MEC_HALT=0))


def start_sdma(gpu: AmGpu) -> CopyEngine:
    """§4.2 step 10 for SDMA 6 and the queue: ring, read-pointer write-back, doorbell; engine unhalted."""
    gpu.wr("gc.SDMA0_WATCHDOG_CNTL", fields(gpu, "gc.SDMA0_WATCHDOG_CNTL", QUEUE_HANG_COUNT=100))
    gpu.wr("gc.SDMA0_UTCL1_CNTL", fields(gpu, "gc.SDMA0_UTCL1_CNTL", RESP_MODE=3, REDO_DELAY=9))
    gpu.wr("gc.SDMA0_UTCL1_PAGE", fields(gpu, "gc.SDMA0_UTCL1_PAGE", RD_L2_POLICY=2, WR_L2_POLICY=3, LLC_NOALLOC=1))
    gpu.wr("gc.SDMA0_QUEUE0_RB_CNTL", 0)
    gpu.vram_write(RPTR_PAGE, bytes(8))
    ring_mc = gpu.mc(SDMA_RING)
    gpu.wr("gc.SDMA0_QUEUE0_RB_BASE", ring_mc >> 8)
    gpu.wr("gc.SDMA0_QUEUE0_RB_BASE_HI", ring_mc >> 40)
    for reg in ("RB_RPTR", "RB_RPTR_HI", "RB_WPTR", "RB_WPTR_HI"):
        gpu.wr(f"gc.SDMA0_QUEUE0_{reg}", 0)
    gpu.wr("gc.SDMA0_QUEUE0_RB_RPTR_ADDR_LO", gpu.mc(RPTR_PAGE) & 0xFFFFFFFF)
    gpu.wr("gc.SDMA0_QUEUE0_RB_RPTR_ADDR_HI", gpu.mc(RPTR_PAGE) >> 32)
    dword_index = SDMA_DOORBELL_INDEX * 2  # 64-bit doorbells: two dwords each (BAR2 byte 8 * index)
    gpu.wr("gc.SDMA0_QUEUE0_DOORBELL_OFFSET", fields(gpu, "gc.SDMA0_QUEUE0_DOORBELL_OFFSET", OFFSET=dword_index))
    gpu.wr("gc.SDMA0_QUEUE0_DOORBELL", fields(gpu, "gc.SDMA0_QUEUE0_DOORBELL", ENABLE=1))
    gpu.wr("gc.SDMA0_CNTL", fields(gpu, "gc.SDMA0_CNTL", TRAP_ENABLE=1))
    size_log2 = (SDMA_RING_SIZE // 4).bit_length() - 1
    gpu.wr("gc.SDMA0_QUEUE0_RB_CNTL", fields(gpu, "gc.SDMA0_QUEUE0_RB_CNTL", RB_SIZE=size_log2,
                                             RPTR_WRITEBACK_ENABLE=1, RB_ENABLE=1))
    gpu.wr("gc.SDMA0_F32_CNTL", fields(gpu, "gc.SDMA0_F32_CNTL", HALT=0, TH1_RESET=0))
    return CopyEngine(gpu, ring_mc, 4 * dword_index)


def bring_up(gpu: AmGpu) -> CopyEngine:
    """Page tables, both hubs, IH, MEC, SDMA0: the copy engine ready for :mod:`tinyhw.boot.amd.usbcopy`."""
    build_page_tables(gpu)
    program_hub(gpu, "mmhub.MM")
    program_hub(gpu, "gc.GC")
    invalidate(gpu)
    setup_ih(gpu)
    enable_mec(gpu)
    setup_doorbells(gpu)
    return start_sdma(gpu)


def check_engine(engine: CopyEngine) -> None:
    """Raise when the engine cannot be used (a VM fault is pending)."""
    if engine.gpu.rd("gc.GCVM_L2_PROTECTION_FAULT_STATUS"):
        raise DeviceTimeout("a gpu vm fault is pending (GCVM_L2_PROTECTION_FAULT_STATUS != 0)",
                            hint="reset the gpu (`tinyhw am reset`) and boot again")


def summary(engine: CopyEngine) -> dict[str, int]:
    """The ``--json`` detail of the boot step "copy engine"."""
    return {"sdma_ring": engine.ring_mc, "sdma_doorbell": engine.doorbell_byte, "page_table": phys(PT_BASE)}
