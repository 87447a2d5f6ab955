"""Register file of the emulated Navi31 for the AM boot path: GC, SDMA, MMHUB, OSSSYS, HDP, NBIO, MP0/MP1.

Facts: specs/amd-bringup.md §3.3 (the key registers and what they mean), §3.4 (Navi31 placement),
§4.2 (every register the boot order writes, steps 2-13), §9 (how the passive registers answer:
invalidation ACK/semaphore, RLC safe mode, CP_STAT, bootload status, HQD active/dequeue, FB
location, HDP flush remap), §10.4 (the passive registers a faithful emulator must reproduce).
Offsets come from the register database the board passes in (``tinyhw.regs.Asic``; ``navi31`` for the
Navi31 board), looked up when the file is built, never at import.

Behaviour (what a driver sees):

* Every register the database defines for those blocks inside the 1 MiB register BAR is
  readable and writable storage (power-on value 0 unless listed below); a write is recorded
  (``writes`` counter and the per-offset map) and persists in the board state file until a
  mode-1 reset. Registers beyond the BAR are reached through ``BIF_BX_PF0_RSMU_INDEX/DATA``
  (§3.1), with the same storage.
* ``MMMC_VM_FB_LOCATION_BASE/TOP`` (and the GC hub's copies) read the FB placement the
  firmware programs at power-on: base 0x8000 (MC 0x80_0000_0000, inferred: where Linux finds
  the framebuffer on Navi3x) and top = base + VRAM/16 MiB - 1; writes are kept.
* ``*_INVALIDATE_ENG*_ACK`` read 0xFFFF (every VMID acknowledged), ``*_INVALIDATE_ENG*_SEM`` read 1
  (semaphore acquired), ``RLC_SAFE_MODE`` bit 0 (``cmd``) reads back cleared (acknowledged),
  ``CP_HQD_DEQUEUE_REQUEST`` clears ``CP_HQD_ACTIVE``, ``GCVM_L2_PROTECTION_FAULT_STATUS`` reads 0
  until written. ``BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL`` powers on holding 0x80000, the MMIO remap hole
  (inferred: Linux's ``MMIO_REG_HOLE_OFFSET``); a write of any value to BAR5 0x80000 (memory flush) or
  0x80004 (register flush) is an HDP flush (counted in ``hdp_flushes``). So is a write to the NBIO's
  ``BIF_BX_PF0_GPU_HDP_FLUSH_REQ`` (what the CP's WAIT_REG_MEM write-then-wait writes), which completes at once:
  ``BIF_BX_PF0_GPU_HDP_FLUSH_DONE`` then holds the requested bits (inferred: amdgpu waits for the request's bit
  there).
* ``CP_STAT`` reads busy (0x84000000, invented bits) and ``RLC_RLCS_BOOTLOAD_STATUS`` 0 until RLC
  autoload completes (:mod:`tinyhw.mocks.amd.pspboot`); then 0 and bit 31 (``bootload_complete``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache, partial

from tinyhw.autogen import sources
from tinyhw.regs.asic import Asic
from tinyhw.regs.fixed import CONFIG_MEMSIZE, MM_DATA, MM_INDEX, MM_INDEX_HI, fixed

BAR5_SIZE = 1 << 20
BLOCKS = ("gc", "mmhub", "osssys", "hdp", "nbio", "mp0", "mp1")
HDP_FLUSH_HOLE = 0x80000  # MMIO remap hole (inferred: Linux MMIO_REG_HOLE_OFFSET); +0 mem flush, +4 reg flush
CP_STAT_BUSY = 0x84000000  # invented busy bits before RLC autoload

#: Power-on FB placement (inferred), in 16 MiB units.
FB_BASE_UNITS = 0x8000

#: Offsets other models own (never plain storage here).
_OWNED = {fixed(n).offset for n in (MM_INDEX, MM_DATA, MM_INDEX_HI, CONFIG_MEMSIZE)}


@cache
def register_offsets(regs: Asic) -> dict[int, str]:
    """Byte offset -> name of every register of :data:`BLOCKS` in database ``regs`` (first name wins).

    Read straight from the generated tables' text (the placement rule of §3.1 with the profile's
    bases), not through per-register lookups: building the board must stay cheap."""
    out: dict[int, str] = {}
    for block in BLOCKS:
        spec = regs.blocks[block]
        bases = spec.bases
        prefix = spec.prefix.upper()
        for line in importlib.import_module(sources.module_name(spec.table)).REGS.split("\n"):
            if not line:
                continue
            name, seg_text, dword, _ = line.split(" ")
            if prefix and not name.upper().startswith(prefix):
                continue
            seg = int(seg_text)
            if seg < len(bases) and bases[seg] is not None:
                out.setdefault(4 * (bases[seg] + int(dword, 16)), f"{block}.{name}")
    return out


@cache
def _by_pattern(regs: Asic) -> tuple[frozenset[int], frozenset[int]]:
    acks, sems = set(), set()
    for offset, name in register_offsets(regs).items():
        bare = name.split(".", 1)[1]
        if "_INVALIDATE_ENG" in bare and bare.endswith("_ACK"):
            acks.add(offset)
        elif "_INVALIDATE_ENG" in bare and bare.endswith("_SEM"):
            sems.add(offset)
    return frozenset(acks), frozenset(sems)


class RegisterFile:
    """Plain storage for the database registers of the boot path, plus the §9 passive behaviours.

    ``regs`` is the board's register database; every offset the file treats specially (CP_STAT, the RLC
    bootload status and safe mode, the FB location, the HDP flush remap, the RSMU window) is looked up in it.
    """

    def __init__(self, regs: Asic, vram_size: int) -> None:
        def off(name: str) -> int:
            return regs.offset(name)

        self.vram_size = vram_size
        self.cp_stat = off("gc.CP_STAT")
        self.rlc_bootload_status = off("gc.RLC_RLCS_BOOTLOAD_STATUS")
        self.bootload_complete = regs.field("gc.RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE").mask
        self.rlc_safe_mode = off("gc.RLC_SAFE_MODE")
        self.rlc_safe_mode_cmd = regs.field("gc.RLC_SAFE_MODE.CMD").mask
        self.cp_hqd_active = off("gc.CP_HQD_ACTIVE")
        self.cp_hqd_dequeue_request = off("gc.CP_HQD_DEQUEUE_REQUEST")
        self.fb_location = (off("mmhub.MMMC_VM_FB_LOCATION_BASE"), off("mmhub.MMMC_VM_FB_LOCATION_TOP"),
                            off("gc.GCMC_VM_FB_LOCATION_BASE"), off("gc.GCMC_VM_FB_LOCATION_TOP"))
        self.hdp_flush_remap = off("nbio.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL")
        #: GPU_HDP_FLUSH_REQ -> GPU_HDP_FLUSH_DONE: a request is an HDP flush, done at once (the CP's write-then-wait)
        self.hdp_flush_req = off("nbio.BIF_BX_PF0_GPU_HDP_FLUSH_REQ")
        self.hdp_flush_done = off("nbio.BIF_BX_PF0_GPU_HDP_FLUSH_DONE")
        #: BIF_BX_PF0_RSMU_INDEX / _DATA: the indirect window to registers past the BAR (§3.1)
        self.rsmu_index_reg = off("nbio.BIF_BX_PF0_RSMU_INDEX")
        self.rsmu_data_reg = off("nbio.BIF_BX_PF0_RSMU_DATA")
        self.known = register_offsets(regs)
        self.acks, self.sems = _by_pattern(regs)
        self.values: dict[int, int] = {}
        self.writes = 0  # register writes this process
        self.autoload_done = False
        self.rsmu_index = 0
        self.power_on()

    def power_on(self) -> None:
        """Power-on / mode-1-reset values: the FB placement of a 16 MiB-unit VRAM and the HDP remap hole."""
        top = FB_BASE_UNITS + (self.vram_size >> 24) - 1
        base_mm, top_mm, base_gc, top_gc = self.fb_location
        self.values.clear()  # in place: the blocks were handed this storage when they were built
        self.values.update({base_mm: FB_BASE_UNITS, top_mm: top, base_gc: FB_BASE_UNITS, top_gc: top,
                            self.hdp_flush_remap: HDP_FLUSH_HOLE})
        self.hdp_flushes = 0
        self.autoload_done = False
        self.rsmu_index = 0

    @property
    def fb_base(self) -> int:
        """MC address of VRAM byte 0 (§4.5: (FB_LOCATION_BASE & 0xFFFFFF) << 24)."""
        return (self.values.get(self.fb_location[0], 0) & 0xFFFFFF) << 24

    def to_state(self) -> dict[str, object]:
        """The stored values (hex offset -> value) and the autoload flag, for the board state file."""
        return {"values": {f"{k:x}": v for k, v in sorted(self.values.items())}, "autoload": self.autoload_done}

    def from_state(self, state: dict) -> None:
        """Restore stored values and the autoload flag written by :meth:`to_state` (values masked to 32 bits)."""
        vals = state.get("values", {})
        self.values.update({int(k, 16): int(v) & 0xFFFFFFFF for k, v in vals.items()})
        self.autoload_done = bool(state.get("autoload", False))

    # -- access --------------------------------------------------------------------------------------------
    def covers(self, offset: int) -> bool:
        """True when ``offset`` is a database register of the boot-path blocks that this file stores (not one another
        model owns)."""
        return offset in self.known and offset not in _OWNED

    def read(self, offset: int) -> int:
        """The value a driver reads at ``offset``: the passive answers (invalidation ACK 0xFFFF, semaphore 1, CP_STAT
        busy until autoload, bootload-complete bit, RLC safe-mode CMD cleared, the RSMU window), else the stored
        value (0 at power-on)."""
        if offset in self.acks:
            return 0xFFFF
        if offset in self.sems:
            return 1
        if offset == self.cp_stat:
            return 0 if self.autoload_done else CP_STAT_BUSY
        if offset == self.rlc_bootload_status:
            done = self.bootload_complete if self.autoload_done else 0
            return (self.values.get(offset, 0) & ~self.bootload_complete) | done
        if offset == self.rlc_safe_mode:
            return self.values.get(offset, 0) & ~self.rlc_safe_mode_cmd
        if offset == self.rsmu_index_reg:
            return self.rsmu_index
        if offset == self.rsmu_data_reg:
            return self.read(self.rsmu_index & ~3) if self.covers(self.rsmu_index & ~3) else 0
        return self.values.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        """Store ``value`` at ``offset`` and count the write; RSMU_INDEX/DATA reach the register the index names, a
        DEQUEUE_REQUEST clears CP_HQD_ACTIVE."""
        self.writes += 1
        if offset == self.rsmu_index_reg:
            self.rsmu_index = value
            return
        if offset == self.rsmu_data_reg:
            if self.covers(self.rsmu_index & ~3):
                self.write(self.rsmu_index & ~3, value)
            return
        if offset == self.cp_hqd_dequeue_request and value:
            self.values[self.cp_hqd_active] = self.values.get(self.cp_hqd_active, 0) & ~1
        if offset == self.hdp_flush_req:  # the flush completes at once: DONE shows the requested bits (inferred)
            self.hdp_flushes += 1
            self.values[self.hdp_flush_done] = value & 0xFFFFFFFF
        self.values[offset] = value & 0xFFFFFFFF

    def handlers(self, skip: set[int]) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """BAR5 handlers for every covered offset inside the BAR that ``skip`` does not name."""
        reads: dict[int, Callable[[], int]] = {}
        writes: dict[int, Callable[[int], None]] = {}
        for offset in self.known:
            if offset >= BAR5_SIZE or offset in skip or offset in _OWNED:
                continue
            reads[offset] = partial(self.read, offset)
            writes[offset] = partial(self.write, offset)
        for offset in (HDP_FLUSH_HOLE, HDP_FLUSH_HOLE + 4):  # the remapped HDP flush registers
            reads[offset] = lambda: 0
            writes[offset] = self._hdp_flush
        return reads, writes

    def _hdp_flush(self, _value: int) -> None:
        self.writes += 1
        self.hdp_flushes += 1
