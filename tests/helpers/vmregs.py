"""Test helper: what tinyhw's driver left in an emulated Navi31's GPU VM registers and page tables, read from the
emulator's side (its register file and VRAM), against amd-bringup.md §4.5."""

from __future__ import annotations

from tinyhw.boot.amd import copyengine
from tinyhw.mocks.amd.amregs import FB_BASE_UNITS

FB_BASE = FB_BASE_UNITS << 24  # the emulated board's MC address of VRAM byte 0


def check_physical_vm(board, vram_size: int) -> None:
    """Both hubs: PAGE_TABLE_BASE_ADDR = root's physical address | valid; system aperture default and L2 protection
    fault default = physical page numbers of the scratch and dummy pages; system aperture low/high = MC >> 18; the
    copy engine's PDB2 -> PDB1 -> PDB0 -> PTB chain of physical PDEs (valid bit set)."""
    assert FB_BASE, "the check needs a board whose MC addresses differ from its physical ones"
    regs, values = board.regs, board.regfile.values

    def rd(name: str) -> int:
        return values.get(regs.offset(name), 0)

    def rd64(hi: str, lo: str) -> int:
        return rd(hi) << 32 | rd(lo)

    for hub in ("gc.GC", "mmhub.MM"):
        root = rd64(f"{hub}VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", f"{hub}VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32")
        assert root == copyengine.PT_BASE | 1, (hub, hex(root))
        scratch = rd64(f"{hub}MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_MSB", f"{hub}MC_VM_SYSTEM_APERTURE_DEFAULT_ADDR_LSB")
        assert scratch == copyengine.SCRATCH_PAGE >> 12, (hub, hex(scratch))
        dummy = rd64(f"{hub}VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", f"{hub}VM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32")
        assert dummy == copyengine.DUMMY_PAGE >> 12, (hub, hex(dummy))
        assert rd(f"{hub}MC_VM_SYSTEM_APERTURE_LOW_ADDR") == FB_BASE >> 18
        assert rd(f"{hub}MC_VM_SYSTEM_APERTURE_HIGH_ADDR") == (FB_BASE + vram_size - 1) >> 18
    for level in range(3):  # PDB2, PDB1, PDB0: entry 0 names the next table
        table = copyengine.PT_BASE + level * 4096
        pde = int.from_bytes(board.vram.read(table, 8), "little")
        assert pde == (table + 4096) | 1, (level, hex(pde))
