"""Register file of the emulated Navi31 for the AM boot path: GC, SDMA, MMHUB, OSSSYS, HDP, NBIO, MP0/MP1.

Facts: specs/amd-bringup.md §3.3 (the key registers and what they mean), §3.4 (Navi31 placement),
§4.2 (every register the boot order writes, steps 2-13), §9 (how the passive registers answer:
invalidation ACK/semaphore, RLC safe mode, CP_STAT, bootload status, HQD active/dequeue, FB
location, HDP flush remap), §10.4 (the passive registers a faithful emulator must reproduce).
Offsets come from the generated register database (``tinyhw.regs``, ASIC profile ``navi31``).

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
  0x80004 (register flush) is an HDP flush (counted in ``hdp_flushes``).
* ``CP_STAT`` reads busy (0x84000000, invented bits) and ``RLC_RLCS_BOOTLOAD_STATUS`` 0 until RLC
  autoload completes (:mod:`tinyhw.mocks.pspboot`); then 0 and bit 31 (``bootload_complete``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from functools import cache, partial

from tinyhw.autogen import sources
from tinyhw.regs import asic
from tinyhw.regs.fixed import CONFIG_MEMSIZE, MM_DATA, MM_INDEX, MM_INDEX_HI, fixed

_A = asic("navi31")
BAR5_SIZE = 1 << 20
BLOCKS = ("gc", "mmhub", "osssys", "hdp", "nbio", "mp0", "mp1")


def off(name: str) -> int:
    return _A.offset(name)


SCRATCH = {n: off(f"gc.SCRATCH_REG{n}") for n in range(8)}
CP_STAT = off("gc.CP_STAT")
RLC_BOOTLOAD_STATUS = off("gc.RLC_RLCS_BOOTLOAD_STATUS")
BOOTLOAD_COMPLETE = _A.field("gc.RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE").mask
RLC_SAFE_MODE = off("gc.RLC_SAFE_MODE")
RLC_SAFE_MODE_CMD = _A.field("gc.RLC_SAFE_MODE.CMD").mask
CP_HQD_ACTIVE = off("gc.CP_HQD_ACTIVE")
CP_HQD_DEQUEUE_REQUEST = off("gc.CP_HQD_DEQUEUE_REQUEST")
FB_BASE = off("mmhub.MMMC_VM_FB_LOCATION_BASE")
FB_TOP = off("mmhub.MMMC_VM_FB_LOCATION_TOP")
GC_FB_BASE = off("gc.GCMC_VM_FB_LOCATION_BASE")
GC_FB_TOP = off("gc.GCMC_VM_FB_LOCATION_TOP")
HDP_FLUSH_REMAP = off("nbio.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL")
HDP_FLUSH_HOLE = 0x80000  # MMIO remap hole (inferred: Linux MMIO_REG_HOLE_OFFSET); +0 mem flush, +4 reg flush
RSMU_INDEX = off("nbio.BIF_BX_PF0_RSMU_INDEX")
RSMU_DATA = off("nbio.BIF_BX_PF0_RSMU_DATA")
CP_STAT_BUSY = 0x84000000  # invented busy bits before RLC autoload

#: Power-on FB placement (inferred), in 16 MiB units.
FB_BASE_UNITS = 0x8000

#: Offsets other models own (never plain storage here).
_OWNED = {fixed(n).offset for n in (MM_INDEX, MM_DATA, MM_INDEX_HI, CONFIG_MEMSIZE)}


@cache
def register_offsets() -> dict[int, str]:
    """Byte offset -> name of every database register of :data:`BLOCKS` (first name wins).

    Read straight from the generated tables' text (the placement rule of §3.1 with the profile's
    bases), not through per-register lookups: building the board must stay cheap."""
    out: dict[int, str] = {}
    for block in BLOCKS:
        spec = _A.blocks[block]
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
def _by_pattern() -> tuple[frozenset[int], frozenset[int]]:
    acks, sems = set(), set()
    for offset, name in register_offsets().items():
        bare = name.split(".", 1)[1]
        if "_INVALIDATE_ENG" in bare and bare.endswith("_ACK"):
            acks.add(offset)
        elif "_INVALIDATE_ENG" in bare and bare.endswith("_SEM"):
            sems.add(offset)
    return frozenset(acks), frozenset(sems)


class RegisterFile:
    """Plain storage for the database registers of the boot path, plus the §9 passive behaviours."""

    def __init__(self, vram_size: int) -> None:
        self.vram_size = vram_size
        self.known = register_offsets()
        self.acks, self.sems = _by_pattern()
        self.values: dict[int, int] = {}
        self.writes = 0  # register writes this process
        self.autoload_done = False
        self.rsmu_index = 0
        self.power_on()

    def power_on(self) -> None:
        """Power-on / mode-1-reset values."""
        top = FB_BASE_UNITS + (self.vram_size >> 24) - 1
        self.values = {FB_BASE: FB_BASE_UNITS, FB_TOP: top, GC_FB_BASE: FB_BASE_UNITS, GC_FB_TOP: top,
                       HDP_FLUSH_REMAP: HDP_FLUSH_HOLE}
        self.hdp_flushes = 0
        self.autoload_done = False
        self.rsmu_index = 0

    @property
    def fb_base(self) -> int:
        """MC address of VRAM byte 0 (§4.5: (FB_LOCATION_BASE & 0xFFFFFF) << 24)."""
        return (self.values.get(FB_BASE, 0) & 0xFFFFFF) << 24

    # -- state ---------------------------------------------------------------------------------------------
    def to_state(self) -> dict[str, object]:
        return {"values": {f"{k:x}": v for k, v in sorted(self.values.items())}, "autoload": self.autoload_done}

    def from_state(self, state: dict) -> None:
        vals = state.get("values", {})
        self.values.update({int(k, 16): int(v) & 0xFFFFFFFF for k, v in vals.items()})
        self.autoload_done = bool(state.get("autoload", False))

    # -- access --------------------------------------------------------------------------------------------
    def covers(self, offset: int) -> bool:
        return offset in self.known and offset not in _OWNED

    def read(self, offset: int) -> int:
        if offset in self.acks:
            return 0xFFFF
        if offset in self.sems:
            return 1
        if offset == CP_STAT:
            return 0 if self.autoload_done else CP_STAT_BUSY
        if offset == RLC_BOOTLOAD_STATUS:
            return (self.values.get(offset, 0) & ~BOOTLOAD_COMPLETE) | (BOOTLOAD_COMPLETE if self.autoload_done else 0)
        if offset == RLC_SAFE_MODE:
            return self.values.get(offset, 0) & ~RLC_SAFE_MODE_CMD
        if offset == RSMU_INDEX:
            return self.rsmu_index
        if offset == RSMU_DATA:
            return self.read(self.rsmu_index & ~3) if self.covers(self.rsmu_index & ~3) else 0
        return self.values.get(offset, 0)

    def write(self, offset: int, value: int) -> None:
        self.writes += 1
        if offset == RSMU_INDEX:
            self.rsmu_index = value
            return
        if offset == RSMU_DATA:
            if self.covers(self.rsmu_index & ~3):
                self.write(self.rsmu_index & ~3, value)
            return
        if offset == CP_HQD_DEQUEUE_REQUEST and value:
            self.values[CP_HQD_ACTIVE] = self.values.get(CP_HQD_ACTIVE, 0) & ~1
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
