"""The emulated Navi31's performance counters: the SQ counters per WGP and GRBM's, for the events the core can count.

Facts: specs/sqtt-pmc.md §9.2-§9.4: CP_PERFMON_CNTL.PERFMON_STATE (0 reset/stop, 1 count), PERFMON_SAMPLE_ENABLE
latches the counts; the k-th SQ counter is selected by SQ_PERFCOUNTER<2k>_SELECT.PERF_SEL and read from
SQ_PERFCOUNTER<k>_LO per SE / SA / WGP (GRBM_GFX_INDEX SE_INDEX, SA_INDEX, INSTANCE_INDEX = WGP << 2), at most 8;
GRBM_PERFCOUNTER0/1 (64 bit); COMPUTE_PERFCOUNT_ENABLE gates a dispatch's counting; gfx11 event ids (§9.4 table).
Every offset and field from the register database.

Events modelled (counts exact for the core's execution; the cycles are the cost model's, see
:mod:`tinyhw.mocks.rdna3.sqtt` for the placement on SE/SA/WGP): SQ_WAVES (4) waves started, SQ_INSTS_VALU (62)
VALU instructions (VOP1/2/3/C/3P/VOPD), SQ_INSTS_SALU (58) SALU instructions (SOP1/2/C/K), SQ_WAVE_CYCLES (24) the
waves' lifetimes summed, and GRBM_GUI_ACTIVE (2) the dispatches' cycles (the longest SE). Any other event counts 0.
"""

from __future__ import annotations

from collections.abc import Callable

from tinyhw.mocks.common.services import BoardServices
from tinyhw.regs.asic import Asic

__all__ = ["EVENTS", "PerfMon"]

#: gfx11 event id -> what the core counts (§9.4)
EVENTS = {4: "waves", 62: "valu", 58: "salu", 24: "wave_cycles"}
GRBM_GUI_ACTIVE = 2
SQ_COUNTERS, SQ_SELECTS, GRBM_COUNTERS = 8, 16, 2


class PerfMon:
    """CP_PERFMON_CNTL, the SQ and GRBM counter registers, and the per-WGP counts the shader core feeds."""

    def __init__(self, services: BoardServices, regs: Asic) -> None:
        self.s = services
        self.regs = regs
        self.gfx_index = regs.offset("gc.GRBM_GFX_INDEX")
        self.cntl = regs.offset("gc.CP_PERFMON_CNTL")

        def fld(path: str) -> tuple[int, int]:
            f = regs.field(f"gc.{path}")
            return f.mask, f.shift
        self.f = {p: fld(p) for p in ("CP_PERFMON_CNTL.PERFMON_STATE", "CP_PERFMON_CNTL.PERFMON_SAMPLE_ENABLE",
                                      "GRBM_GFX_INDEX.SE_INDEX", "GRBM_GFX_INDEX.SA_INDEX",
                                      "GRBM_GFX_INDEX.INSTANCE_INDEX", "SQ_PERFCOUNTER0_SELECT.PERF_SEL",
                                      "GRBM_PERFCOUNTER0_SELECT.PERF_SEL")}
        self.sq_select = [regs.offset(f"gc.SQ_PERFCOUNTER{i}_SELECT") for i in range(SQ_SELECTS)]
        self.sq_lo = [regs.offset(f"gc.SQ_PERFCOUNTER{i}_LO") for i in range(SQ_COUNTERS)]
        self.grbm_select = [regs.offset(f"gc.GRBM_PERFCOUNTER{i}_SELECT") for i in range(GRBM_COUNTERS)]
        self.grbm_lo = [regs.offset(f"gc.GRBM_PERFCOUNTER{i}_LO") for i in range(GRBM_COUNTERS)]
        self.grbm_hi = [regs.offset(f"gc.GRBM_PERFCOUNTER{i}_HI") for i in range(GRBM_COUNTERS)]
        self.power_on()

    def power_on(self) -> None:
        """Power-on / mode-1 reset: nothing counted, counting off."""
        self.state = 0
        self.counts: dict[tuple[int, int, int], dict[str, int]] = {}
        self.gui_active = 0
        self.latched: dict[tuple[int, int, int], dict[str, int]] = {}
        self.latched_gui = 0

    def _get(self, value: int, path: str) -> int:
        mask, shift = self.f[path]
        return (value & mask) >> shift

    @property
    def counting(self) -> bool:
        """True while CP_PERFMON_CNTL.PERFMON_STATE is 1 (counting)."""
        return self.state == 1

    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """BAR5 handlers: CP_PERFMON_CNTL and the counter read registers (the selects stay the register file's)."""
        reads: dict[int, Callable[[], int]] = {self.cntl: lambda: self.s.reg_read(self.cntl)}
        writes: dict[int, Callable[[int], None]] = {self.cntl: self._cntl}
        for k, off in enumerate(self.sq_lo):
            reads[off] = lambda k=k: self._sq(k)
            writes[off] = lambda v: None
        for k in range(GRBM_COUNTERS):
            reads[self.grbm_lo[k]] = lambda k=k: self._grbm(k) & 0xFFFFFFFF
            reads[self.grbm_hi[k]] = lambda k=k: self._grbm(k) >> 32
            writes[self.grbm_lo[k]] = writes[self.grbm_hi[k]] = lambda v: None
        return reads, writes

    def _cntl(self, value: int) -> None:
        self.s.reg_write(self.cntl, value & 0xFFFFFFFF)
        state = self._get(value, "CP_PERFMON_CNTL.PERFMON_STATE")
        if self._get(value, "CP_PERFMON_CNTL.PERFMON_SAMPLE_ENABLE"):
            self.latched = {k: dict(v) for k, v in self.counts.items()}
            self.latched_gui = self.gui_active
        if state == 0:
            self.counts, self.gui_active = {}, 0
        self.state = state

    def _sq(self, k: int) -> int:
        idx = self.s.reg_read(self.gfx_index)
        key = (self._get(idx, "GRBM_GFX_INDEX.SE_INDEX"), self._get(idx, "GRBM_GFX_INDEX.SA_INDEX"),
               self._get(idx, "GRBM_GFX_INDEX.INSTANCE_INDEX") >> 2)
        event = self._get(self.s.reg_read(self.sq_select[2 * k]), "SQ_PERFCOUNTER0_SELECT.PERF_SEL")
        what = EVENTS.get(event)
        return (self.latched.get(key, {}).get(what, 0) if what else 0) & 0xFFFFFFFF

    def _grbm(self, k: int) -> int:
        event = self._get(self.s.reg_read(self.grbm_select[k]), "GRBM_PERFCOUNTER0_SELECT.PERF_SEL")
        return self.latched_gui if event == GRBM_GUI_ACTIVE else 0

    def add_dispatch(self, counts: dict[tuple[int, int, int], dict[str, int]], cycles: int) -> None:
        """A counted dispatch's per-WGP counts and its cycles (the shader core's observer collected them)."""
        for key, c in counts.items():
            mine = self.counts.setdefault(key, {})
            for name, v in c.items():
                mine[name] = mine.get(name, 0) + v
        self.gui_active += cycles
