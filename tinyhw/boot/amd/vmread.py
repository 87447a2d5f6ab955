"""Read GPU virtual memory (VMID0) from the host: walk the page tables in VRAM, read the VRAM behind them.

Spec: specs/amd-bringup.md §4.5 (one VA range from GCVM_CONTEXT0_PAGE_TABLE_START_ADDR, root at PDB2 from
GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR, four levels of 512 entries over 4 KiB pages, PDE-is-PTE bit 54 for 2 MiB
and 1 GiB pages, address bits 47:12, bit 0 valid, bit 1 system; the root, every PDE and every VRAM PTE hold the
*physical* VRAM address, the offset from VRAM's start on a single board, never the MC address). Used
for what the command processor reads at a GPU address: ring buffers and indirect buffers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyhw.errors import OperationFailed

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

VALID, SYSTEM, HUGE = 1, 1 << 1, 1 << 54
ADDR = 0x0000_FFFF_FFFF_F000
LEVELS = (39, 30, 21, 12)  # PDB2, PDB1, PDB0, PTB: the VA bit each level's index starts at
PAGE = 4096


class VmReader:
    """VMID0 reads through the GC hub's page tables (read once per reader)."""

    def __init__(self, gpu: AmGpu) -> None:
        self.gpu = gpu
        rd = gpu.rd
        self.root = (rd("gc.GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32") << 32
                     | rd("gc.GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"))
        self.start = (rd("gc.GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32") << 32
                      | rd("gc.GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32")) << 12
        self._cache: dict[int, int] = {}

    def _vram(self, phys: int, what: str) -> int:
        """The VRAM offset of physical VRAM address ``phys`` (a page-table address, §4.5)."""
        if not 0 <= phys < self.gpu.vram_size:
            raise OperationFailed(f"{what}: physical address 0x{phys:x} is not in vram")
        return phys

    def translate(self, va: int) -> int:
        """The VRAM byte offset behind ``va``; :class:`OperationFailed` when it is unmapped or system memory."""
        page = va & ~(PAGE - 1)
        if page in self._cache:
            return self._cache[page] + (va & (PAGE - 1))
        if not self.root & VALID:
            raise OperationFailed("gpu vm context 0 has no page table (GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR not valid)")
        rel = va - self.start
        if rel < 0:
            raise OperationFailed(f"gpu address 0x{va:x} is below the vm range (starts at 0x{self.start:x})")
        entry = self.root
        for level, shift in enumerate(LEVELS):
            table = self._vram(entry & ADDR, f"page table for 0x{va:x}")
            index = rel >> shift & 0x1FF
            entry = int.from_bytes(self.gpu.vram_read(table + 8 * index, 8), "little")
            if not entry & VALID:
                raise OperationFailed(f"gpu address 0x{va:x} is not mapped (level {level} entry {index} invalid)")
            if entry & HUGE or shift == 12:
                if entry & SYSTEM:
                    raise OperationFailed(f"gpu address 0x{va:x} is system memory (not readable through vram)")
                span = 1 << shift
                phys = self._vram((entry & ADDR & ~(span - 1)) + (rel & (span - 1) & ~(PAGE - 1)),
                                  f"gpu address 0x{va:x}")
                self._cache[page] = phys
                return phys + (va & (PAGE - 1))
        raise AssertionError("unreachable")

    def read(self, va: int, length: int) -> bytes:
        """``length`` bytes (dword multiple) at ``va``, page by page."""
        out = bytearray()
        while length > 0:
            n = min(length, PAGE - (va & (PAGE - 1)))
            out += self.gpu.vram_read(self.translate(va), n)
            va += n
            length -= n
        return bytes(out)
