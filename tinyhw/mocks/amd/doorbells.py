"""The emulated Navi31's doorbell routing: which block a BAR2 doorbell write reaches, from the NBIO's registers.

Facts: specs/amd-bringup.md §1.1 (BAR2 holds the doorbells), §3.3 (NBIO 4.3.0: RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN
enables the doorbell BAR; ``S2A_DOORBELL_ENTRY_n_CTRL`` route doorbells: enable, AWID, AWADDR[31:28], range
offset/size), §4.2 steps 2 (aperture on), 9c (the GC's ports 0 and 3 with AWID 3 and 6, AWADDR 0x3, no range) and
10 (SDMA0: port 2, AWID 0xE, range offset = the doorbell's dword index, size 4). Fields by name from the register
database (``nbio_4_3_0``).

The model (the range and AWID semantics are inferred from how §4.2 programs the ports):

* With the aperture off, no doorbell reaches any block.
* An enabled entry whose RANGE_SIZE is non-zero claims the BAR2 dwords RANGE_OFFSET .. RANGE_OFFSET + RANGE_SIZE - 1.
* An enabled entry whose RANGE_SIZE is zero (the GC's ports of step 9c) takes every doorbell no sized entry claims.
* The AWID names the block: 3 and 6 (the GC's ports) reach the command processor (``"cp"``), 0xE reaches SDMA0
  (``"sdma"``); any other AWID reaches no modelled block.

Both the command processor's and SDMA0's doorbells are gated by the route: a doorbell write reaches the block its
route names and no other (an SDMA doorbell outside any SDMA range, or with the aperture off, moves nothing).
"""

from __future__ import annotations

from typing import Protocol

from tinyhw.regs.asic import Asic

ENTRIES = 16
AWID_BLOCK = {3: "cp", 6: "cp", 0xE: "sdma"}


class Registers(Protocol):
    """The board's register file as the router reads it (its storage is replaced at a mode-1 reset)."""

    values: dict[int, int]


class DoorbellRouter:
    """Routes BAR2 doorbell writes by the NBIO registers held in the board's register file."""

    def __init__(self, regs: Asic, regfile: Registers) -> None:
        self.regfile = regfile
        self.aperture = regs.offset("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN")
        self.aperture_en = regs.field("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN.BIF_DOORBELL_APER_EN")
        self.entries = []
        for n in range(ENTRIES):
            reg, f = f"nbio.S2A_DOORBELL_ENTRY_{n}_CTRL", f"S2A_DOORBELL_PORT{n}"
            self.entries.append((regs.offset(reg), *(regs.field(f"{reg}.{f}_{x}") for x in
                                                     ("ENABLE", "AWID", "RANGE_OFFSET", "RANGE_SIZE"))))

    def block(self, offset: int) -> str | None:
        """The block a doorbell write at BAR2 byte ``offset`` reaches, None when it reaches none."""
        values = self.regfile.values
        aper = values.get(self.aperture, 0)
        if not (aper & self.aperture_en.mask):
            return None
        dword = offset // 4
        catch_all = None
        for at, enable, awid, start, size in self.entries:
            v = values.get(at, 0)
            if not (v & enable.mask):
                continue
            first, count = (v & start.mask) >> start.shift, (v & size.mask) >> size.shift
            block = AWID_BLOCK.get((v & awid.mask) >> awid.shift)
            if count and first <= dword < first + count:
                return block
            if not count and catch_all is None:
                catch_all = block
        return catch_all
