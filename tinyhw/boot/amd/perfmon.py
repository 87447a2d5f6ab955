"""Performance counters (PMC) of a booted Navi3x for one dispatch: SQ counters per WGP and GRBM's, by name.

Layer 3 (boot). Spec: specs/sqtt-pmc.md §9.2 (the sample layout: per counter ``SEs x SAs x WGPs`` 8-byte records
for SQ on gfx10+, one for GRBM; regions in the order asked), §9.3 (start: CP_PERFMON_CNTL state 0,
SQ_PERFCOUNTER_CTRL with CS_EN, SQ_PERFCOUNTER_CTRL2 FORCE_EN and VMID_EN, each counter's select, the dispatch's
COMPUTE_PERFCOUNT_ENABLE, CP_PERFMON_CNTL state 0 then 1; read: PERFMON_SAMPLE_ENABLE latches, then per
SE/SA/WGP with GRBM_GFX_INDEX (INSTANCE_INDEX = WGP << 2) the k-th SQ counter from SQ_PERFCOUNTER<k>_LO, selected
by SQ_PERFCOUNTER<2k>_SELECT, at most 8), §9.4 (the gfx11 event ids of the counters below). Registers and fields by
name from the gc_11_0_0 database; the host reads the counters over MMIO rather than with COPY_DATA packets.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd import pm4
from tinyhw.boot.amd.copyengine import fields
from tinyhw.errors import Refused

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

__all__ = ["COUNTERS", "DEFAULT_COUNTERS", "PerfCounters", "parse_counters"]

#: counter name -> (block, gfx11 event id) (specs/sqtt-pmc.md §9.4)
COUNTERS = {"SQ_BUSY_CYCLES": ("SQ", 3), "SQ_WAVES": ("SQ", 4), "SQ_WAVE_CYCLES": ("SQ", 24),
            "SQ_INSTS_SALU": ("SQ", 58), "SQ_INSTS_VALU": ("SQ", 62), "SQC_LDS_BANK_CONFLICT": ("SQ", 256),
            "SQC_LDS_IDX_ACTIVE": ("SQ", 261), "GRBM_GUI_ACTIVE": ("GRBM", 2)}
DEFAULT_COUNTERS = ("SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_WAVE_CYCLES", "GRBM_GUI_ACTIVE")
SQ_MAX, GRBM_MAX = 8, 2
SAS_PER_SE, WGPS_PER_SA = 2, 4


def parse_counters(text: str) -> tuple[str, ...]:
    """``--counters`` (comma-separated names, or ``default``) -> names; refused (exit 2) naming the known ones."""
    names = DEFAULT_COUNTERS if text.strip().lower() == "default" else tuple(
        n.strip().upper() for n in text.split(",") if n.strip())
    if not names:
        raise Refused("--counters names no counter", hint=f"e.g. --counters {','.join(DEFAULT_COUNTERS)}")
    bad = [n for n in names if n not in COUNTERS]
    if bad:
        raise Refused(f"unknown counter {bad[0][:40]!r}; tinyhw samples {', '.join(sorted(COUNTERS))}")
    if len(set(names)) != len(names):
        raise Refused("--counters names a counter twice")
    for block, most in (("SQ", SQ_MAX), ("GRBM", GRBM_MAX)):
        if sum(COUNTERS[n][0] == block for n in names) > most:
            raise Refused(f"{block} is out of perfcounter registers: at most {most} {block} counters at once")
    return tuple(names)


@dataclass(frozen=True)
class PerfCounters:
    """The counters of one dispatch on a GPU with ``shader_engines`` SEs (see the module docstring)."""

    gpu: AmGpu
    names: tuple[str, ...]
    shader_engines: int = 6

    def _slots(self) -> list[tuple[str, str, int, int]]:
        """(name, block, event, slot) in the order asked; slots count per block from 0."""
        used = {"SQ": 0, "GRBM": 0}
        out = []
        for n in self.names:
            block, event = COUNTERS[n]
            out.append((n, block, event, used[block]))
            used[block] += 1
        return out

    def _broadcast(self) -> None:
        g = self.gpu
        g.wr("gc.GRBM_GFX_INDEX", fields(g, "gc.GRBM_GFX_INDEX", SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1,
                                        INSTANCE_BROADCAST_WRITES=1))

    def _perfmon(self, state: int, sample: int = 0) -> None:
        self.gpu.wr("gc.CP_PERFMON_CNTL", fields(self.gpu, "gc.CP_PERFMON_CNTL", PERFMON_STATE=state,
                                                 PERFMON_SAMPLE_ENABLE=sample))

    def start(self) -> None:
        """Program the selects and start counting (§9.3 steps 1-6; step 5 is :meth:`before_dispatch`)."""
        g = self.gpu
        self._broadcast()
        self._perfmon(0)
        g.wr("gc.SQ_PERFCOUNTER_CTRL", fields(g, "gc.SQ_PERFCOUNTER_CTRL", CS_EN=1, PS_EN=1, GS_EN=1, HS_EN=1))
        g.wr("gc.SQ_PERFCOUNTER_CTRL2", fields(g, "gc.SQ_PERFCOUNTER_CTRL2", FORCE_EN=1, VMID_EN=0xFFFF))
        for _, block, event, slot in self._slots():
            reg = f"gc.SQ_PERFCOUNTER{2 * slot}_SELECT" if block == "SQ" else f"gc.GRBM_PERFCOUNTER{slot}_SELECT"
            g.wr(reg, fields(g, reg, PERF_SEL=event))
        self._perfmon(0)
        self._perfmon(1)

    def before_dispatch(self) -> list[int]:
        """COMPUTE_PERFCOUNT_ENABLE = 1 for the dispatch (a SET_SH_REG before DISPATCH_DIRECT)."""
        g = self.gpu
        return pm4.set_sh_reg(g.offset("gc.COMPUTE_PERFCOUNT_ENABLE"),
                              [fields(g, "gc.COMPUTE_PERFCOUNT_ENABLE", PERFCOUNT_ENABLE=1)])

    def read(self) -> tuple[bytes, list[dict[str, Any]]]:
        """After the fence: latch, read every record, stop; (blob, samples) in the form ``prof`` reads (§9.2)."""
        g = self.gpu
        self._broadcast()
        self._perfmon(1, sample=1)
        blob = bytearray()
        samples: list[dict[str, Any]] = []
        try:
            for name, block, _, slot in self._slots():
                off = len(blob)
                if block == "SQ":
                    dims = (self.shader_engines, SAS_PER_SE, WGPS_PER_SA)
                    for se in range(dims[0]):
                        for sa in range(dims[1]):
                            for wgp in range(dims[2]):
                                g.wr("gc.GRBM_GFX_INDEX", fields(g, "gc.GRBM_GFX_INDEX", SE_INDEX=se, SA_INDEX=sa,
                                                                INSTANCE_INDEX=wgp << 2))
                                blob += struct.pack("<Q", g.rd(f"gc.SQ_PERFCOUNTER{slot}_LO"))
                    self._broadcast()
                    reg = f"regSQ_PERFCOUNTER{slot}"
                else:
                    dims = (1, 1, 1)
                    lo, hi = g.rd(f"gc.GRBM_PERFCOUNTER{slot}_LO"), g.rd(f"gc.GRBM_PERFCOUNTER{slot}_HI")
                    blob += struct.pack("<Q", hi << 32 | lo)
                    reg = f"regGRBM_PERFCOUNTER{slot}"
                samples.append({"name": name, "block": block, "xcc": 1, "inst": 1, "se": dims[0], "sa": dims[1],
                                "wgp": dims[2], "off": off, "size": len(blob) - off, "regsample": reg})
        finally:
            self._broadcast()
            self._perfmon(0)
        return bytes(blob), samples
