"""SQ thread-trace packets the emulated RDNA3 shader core emits while it executes (gfx11, layout 3).

Written from specs/sqtt-pmc.md §5.1 (nibble framing: a packet's bit k is bit k mod 4 of its (k div 4)-th nibble,
the low nibble of a byte first), §5.2 (time is the running sum of the packets' delta fields; TS_DELTA_SHORT adds
its field + 4; a TS_DELTA_OR_MARK with rt = 0 adds its 36-bit field), §5.3 (the RDNA3 packet layouts below,
typed from that table, never from a decoder), §5.6 (INST op codes) and §12 (which instruction gives which packet).
The tables here are the emulator's own: a mock never shares protocol code with the decoder it is checked against.

:class:`SeStream` is one shader engine's packet stream: :meth:`SeStream.put` places a packet at a shader-clock
cycle, carrying the gap since the previous packet in the packet's own delta field when it fits, else in a
timestamp packet before it. :class:`DispatchTrace` is what :func:`tinyhw.mocks.rdna3.run_dispatch` is handed when
the trace is on: the core calls :meth:`~DispatchTrace.wave_start`, :meth:`~DispatchTrace.issue` and
:meth:`~DispatchTrace.wave_end`, and it places each wave on an SE/SA/WGP/SIMD (model below) and emits the packets
the trace's masks let through, at the cycle of the core's cost model.

Placement and time (modelled, not measured): workgroup *g* of a dispatch (in the core's X, Y, Z order) runs on
SE *g* mod SEs; the *k*-th workgroup of an SE (*k* = *g* div SEs) on WGP *k* mod 4 of SA (*k* div 4) mod 2 (Navi31:
4 WGPs per SA, 2 SAs per SE); wave *i* of a workgroup on SIMD *i* mod 4 of the WGP, in wave slot *i* div 4. Each
SE has its own clock in shader cycles: it starts at the dispatch's launch cycle and advances by the cost of every
instruction a wave of that SE executes (the core runs an SE's waves one after another), so packet times are the
cost model's issue cycles.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["LAYOUT_WORD", "PACKETS", "DispatchTrace", "Masks", "SeStream", "TracedWave", "inst_packet"]

#: name -> (bits, encoding value over the low bits, {field: (hi, lo)}) of the RDNA3 packets emitted (§5.3)
PACKETS: dict[str, tuple[int, int, dict[str, tuple[int, int]]]] = {
    "LAYOUT_HEADER": (64, 0b0010001, {"layout": (12, 7), "sel_a": (31, 28)}),
    "TS_DELTA_SHORT": (8, 0b1000, {"delta": (7, 4)}),
    "TS_DELTA_OR_MARK": (48, 0b0000001, {"pl": (8, 8), "rt": (9, 9), "delta": (47, 12)}),
    "WAVESTART": (32, 0b01100, {"delta": (6, 5), "sa": (7, 7), "simd": (9, 8), "wgp": (12, 10), "wave": (17, 13),
                                "id7": (31, 18)}),
    "WAVEEND": (20, 0b10101, {"delta": (7, 5), "sa": (8, 8), "simd": (10, 9), "wgp": (13, 11), "wave": (19, 15)}),
    "INST": (20, 0b010, {"delta": (6, 4), "wave": (12, 8), "op": (19, 13)}),
    "VALUINST": (12, 0b011, {"delta": (5, 3), "wave": (11, 7)}),
    "IMMEDIATE": (12, 0b1101, {"delta": (6, 4), "wave": (11, 7)}),
    "ALUEXEC": (8, 0b1110, {"delta": (5, 4), "src": (7, 6)}),
    "VMEMEXEC": (8, 0b1111, {"delta": (5, 4), "src": (7, 6)}),
}
#: the first 8 bytes of every real gfx1100 capture (specs/sqtt-pmc.md §11.3: 91 01 90 68 00 00 00 00): a
#: LAYOUT_HEADER with layout 3 and sel_a 6
LAYOUT_WORD = 0x68900191
SHORT_MIN, SHORT_MAX = 4, 4 + 15           # TS_DELTA_SHORT: field + 4
LONG_MAX = (1 << 36) - 1                   # TS_DELTA_OR_MARK delta 47:12

#: INST op codes (§5.6, RDNA3 InstOp)
OP = {"SALU": 0x00, "SMEM_RD": 0x01, "JUMP": 0x03, "JUMP_NO": 0x04, "MESSAGE": 0x09, "VALUT_4": 0x0B,
      "VALUB_2": 0x0D, "VALUB_4": 0x0E, "VALUB_16": 0x0F, "BARRIER": 0x13, "FLAT_RD_2": 0x1C, "FLAT_WR_3": 0x1D,
      "SGMEM_RD_1": 0x21, "SGMEM_RD_2": 0x22, "SGMEM_WR_2": 0x24, "LDS_RD": 0x29, "LDS_WR_2": 0x2B,
      "SALU_WR_EXEC": 0x72, "VALU1_WR_EXEC": 0x73}
#: TOKEN_MASK.TOKEN_EXCLUDE bits (§2.1, gfx11)
EXCL_VMEMEXEC, EXCL_ALUEXEC, EXCL_VALUINST, EXCL_WAVESTARTEND, EXCL_IMMEDIATE, EXCL_INST = 0, 1, 2, 4, 5, 8
WTYPE_CS = 1 << 6  # MASK.WTYPE_INCLUDE: compute waves (§2.1)
WGPS_PER_SA, SAS_PER_SE, SIMDS_PER_WGP = 4, 2, 4

_COUNTED = {**{e: "valu" for e in ("VOP1", "VOP2", "VOP3", "VOPC", "VOP3P", "VOPD")},
            **{e: "salu" for e in ("SOP1", "SOP2", "SOPC", "SOPK")}}
_IMMEDIATE = ("s_nop", "s_clause", "s_sleep", "s_set_inst_prefetch_distance", "s_wait_idle", "s_wait_event")
_SILENT = ("s_delay_alu", "s_wait_alu", "s_barrier_wait")
_TRANS = ("exp", "log", "rcp", "rsq", "sqrt", "sin", "cos", "ceil", "floor", "trunc", "rndne", "fract", "frexp")


def inst_packet(inst: Any, taken: bool) -> tuple[str, int] | None:
    """The packet an executed instruction gives (§12): ``("INST", op)``, ``("VALUINST", 0)``,
    ``("IMMEDIATE", 0)``, or None (``s_endpgm``, whose packet is WAVEEND, and the hints that give none)."""
    m: str = inst.mnemonic or ""
    enc: str = inst.encoding
    if m.startswith("s_endpgm") or m in _SILENT:
        return None
    if m in _IMMEDIATE or m.startswith(("s_waitcnt", "s_wait_")):
        return "IMMEDIATE", 0
    if m == "s_barrier":
        return "INST", OP["BARRIER"]
    if m == "s_branch" or m.startswith("s_cbranch"):
        return "INST", OP["JUMP" if taken else "JUMP_NO"]
    if m == "s_sendmsg":
        return "INST", OP["MESSAGE"]
    if enc == "SMEM":
        return "INST", OP["SMEM_RD"]
    if enc in ("SOP1", "SOP2", "SOPC", "SOPK", "SOPP"):
        return "INST", OP["SALU_WR_EXEC" if "saveexec" in m else "SALU"]
    if enc == "DS":
        return "INST", OP["LDS_WR_2" if "store" in m or "write" in m else "LDS_RD"]
    if enc == "FLAT":
        store = "store" in m or "atomic" in m
        if m.startswith("global_"):
            if store:
                return "INST", OP["SGMEM_WR_2"]
            null_saddr = (inst.fields.get("saddr", 0x7C) & 0x7F) in (0x7C, 0x7D)
            return "INST", OP["SGMEM_RD_2" if null_saddr else "SGMEM_RD_1"]
        return "INST", OP["FLAT_WR_3" if store else "FLAT_RD_2"]
    if m.startswith("v_"):
        if m.startswith("v_cmpx"):
            return "INST", OP["VALU1_WR_EXEC"]
        if "f64" in m:
            return "INST", OP["VALUB_16"]
        if m.endswith(("_b64", "_i64", "_u64")) and ("lshl" in m or "lshr" in m or "ashr" in m):
            return "INST", OP["VALUB_2"]
        if m.startswith("v_mad") and "64" in m:
            return "INST", OP["VALUB_4"]
        if any(m.startswith(f"v_{t}_") for t in _TRANS):
            return "INST", OP["VALUT_4"]
        return "VALUINST", 0
    return "INST", OP["SALU"]


class SeStream:
    """One shader engine's packet stream: packets placed at shader-clock cycles, packed into nibbles."""

    def __init__(self) -> None:
        self.acc = 0          # the packed bits so far (little-endian: bit 0 is the first packet's bit 0)
        self.bits = 0
        self.time = 0         # the cycle of the last packet (what the decoder's running sum holds)
        self.packets = 0
        self.log: list[tuple[str, int, dict[str, int]]] = []  # (name, cycle, fields) of every packet placed

    def _raw(self, name: str, fields: dict[str, int]) -> None:
        bits, value, layout = PACKETS[name]
        for fname, v in fields.items():
            hi, lo = layout[fname]
            value |= (v & ((1 << (hi - lo + 1)) - 1)) << lo
        self.acc |= value << self.bits
        self.bits += bits
        self.packets += 1

    def header(self) -> None:
        """The LAYOUT_HEADER every RDNA3 stream starts with (no delta field: time stays 0)."""
        self.acc |= LAYOUT_WORD << self.bits
        self.bits += 64
        self.packets += 1
        self.log.append(("LAYOUT_HEADER", self.time, {"layout": 3, "sel_a": 6}))

    def put(self, name: str, cycle: int, **fields: int) -> None:
        """Place packet ``name`` at ``cycle`` (never before the last packet): the gap goes into its delta field,
        or, when it does not fit, into timestamp packets before it (TS_DELTA_SHORT for 4..19 cycles, else
        TS_DELTA_OR_MARK with rt = pl = 0)."""
        gap = max(0, cycle - self.time)
        hi, lo = PACKETS[name][2]["delta"]
        own_max = (1 << (hi - lo + 1)) - 1
        own = min(gap, own_max)
        rest = gap - own
        if 0 < rest < SHORT_MIN:          # too small for a timestamp packet: move cycles out of the own field
            own, rest = gap - SHORT_MIN, SHORT_MIN
        while rest:
            if rest <= SHORT_MAX:
                self._raw("TS_DELTA_SHORT", {"delta": rest - SHORT_MIN})
                self.time += rest
                self.log.append(("TS_DELTA_SHORT", self.time, {"delta": rest - SHORT_MIN}))
                rest = 0
            else:
                step = min(rest, LONG_MAX)
                if 0 < rest - step < SHORT_MIN:
                    step -= SHORT_MIN
                self._raw("TS_DELTA_OR_MARK", {"delta": step})
                self.time += step
                self.log.append(("TS_DELTA_OR_MARK", self.time, {"delta": step}))
                rest -= step
        fields["delta"] = own
        self._raw(name, fields)
        self.time += own
        self.log.append((name, self.time, fields))

    def take(self, final: bool) -> bytes:
        """The whole 32-byte chunks packed so far (all of it, zero-padded, when ``final``), removed from the
        stream. The final flush adds 8 zero bytes first, so that a decoder's 16-nibble look-ahead window reaches
        past the last packet (inferred, like the zero padding real captures end in)."""
        if final:
            self.bits = -(-self.bits // 8) * 8 + 64
            self.bits = -(-self.bits // 256) * 256
        whole = self.bits // 256 * 256
        if not whole:
            return b""
        data = (self.acc & ((1 << whole) - 1)).to_bytes(whole // 8, "little")
        self.acc >>= whole
        self.bits -= whole
        return data


@dataclass(frozen=True)
class Masks:
    """What one SE's SQ_THREAD_TRACE_MASK / TOKEN_MASK let through (fields by name from the register database)."""

    simd_sel: int
    wgp_sel: int
    sa_sel: int
    wtype_include: int
    token_exclude: int

    def emits(self, bit: int) -> bool:
        """True when TOKEN_EXCLUDE does not exclude token ``bit``."""
        return not self.token_exclude >> bit & 1


@dataclass
class TracedWave:
    """Where a wave runs (its SE, SA, WGP, SIMD and wave slot) and whether its instructions are traced."""

    se: int
    sa: int
    wgp: int
    simd: int
    slot: int
    itrace: bool
    start: int = 0


@dataclass
class DispatchTrace:
    """The trace of one dispatch: per-SE streams (None where the SE does not trace), the masks, the clocks.

    ``streams[se]`` and ``masks[se]`` come from the thread-trace block (:mod:`tinyhw.mocks.amd.thread_trace`); the
    core calls :meth:`wave_start`, :meth:`issue` and :meth:`wave_end`. With ``counts`` (a dict) it also counts,
    per (SE, SA, WGP), the waves, VALU and SALU instructions and wave cycles the performance counters report
    (:mod:`tinyhw.mocks.amd.perfmon`).
    """

    streams: list[SeStream | None]
    masks: list[Masks]
    start_cycle: list[int]
    clock: list[int] = field(default_factory=list)
    waves: dict[int, TracedWave] = field(default_factory=dict)
    groups: int = 0
    started: int = 0
    counts: dict[tuple[int, int, int], dict[str, int]] | None = None

    @classmethod
    def counting_only(cls, ses: int, start: int = 0) -> DispatchTrace:
        """An observer that emits no packet and only counts (performance counters without the trace)."""
        return cls([None] * ses, [Masks(0, 0, 0, 0, 0x7FF)] * ses, [start] * ses, counts={})

    def cycles(self) -> int:
        """The dispatch's cycles so far: the longest SE's."""
        return max((c - s for c, s in zip(self.clock, self.start_cycle, strict=True)), default=0)

    def __post_init__(self) -> None:
        self.clock = [max(st, s.time if s else 0) for st, s in zip(self.start_cycle, self.streams, strict=True)]

    def wave_start(self, wave: Any, group: int) -> None:
        """Place a new wave (workgroup ``group`` of the dispatch, its ``wave.index``) and emit WAVESTART."""
        ses = len(self.streams)
        se, k = group % ses, group // ses
        sa, wgp = (k // WGPS_PER_SA) % SAS_PER_SE, k % WGPS_PER_SA
        simd, slot = wave.index % SIMDS_PER_WGP, (wave.index // SIMDS_PER_WGP) & 0x1F
        m = self.masks[se]
        on = self.streams[se] is not None and bool(m.wtype_include & WTYPE_CS)
        itrace = on and m.emits(EXCL_INST) and (sa, wgp, simd) == (m.sa_sel, m.wgp_sel, m.simd_sel)
        self.waves[id(wave)] = TracedWave(se, sa, wgp, simd, slot, itrace, self.clock[se])
        if self.counts is not None:
            c = self.counts.setdefault((se, sa, wgp), {})
            c["waves"] = c.get("waves", 0) + 1
        self.started += 1
        s = self.streams[se]
        if on and s is not None and m.emits(EXCL_WAVESTARTEND):
            s.put("WAVESTART", self.clock[se], sa=sa, simd=simd, wgp=wgp, wave=slot, id7=self.started & 0x3FFF)

    def issue(self, wave: Any, inst: Any, cost: int, taken: bool) -> None:
        """The wave issued ``inst`` (``taken``: a branch jumped) at its SE's clock; the clock moves on by ``cost``
        (the core's cost model for it)."""
        tw = self.waves[id(wave)]
        se = tw.se
        at = self.clock[se]
        self.clock[se] = at + cost
        if self.counts is not None:
            kind = _COUNTED.get(inst.encoding)
            if kind is not None:
                c = self.counts.setdefault((se, tw.sa, tw.wgp), {})
                c[kind] = c.get(kind, 0) + 1
        if not tw.itrace:
            return
        pkt = inst_packet(inst, taken)
        if pkt is None:
            return
        name, op = pkt
        m, s = self.masks[se], self.streams[se]
        assert s is not None
        if name == "INST" and m.emits(EXCL_INST):
            s.put("INST", at, wave=tw.slot, op=op)
        elif name == "VALUINST" and m.emits(EXCL_VALUINST):
            s.put("VALUINST", at, wave=tw.slot)
        elif name == "IMMEDIATE" and m.emits(EXCL_IMMEDIATE):
            s.put("IMMEDIATE", at, wave=tw.slot)

    def wave_end(self, wave: Any) -> None:
        """The wave executed ``s_endpgm``: WAVEEND at its SE's clock."""
        tw = self.waves.pop(id(wave))
        if self.counts is not None:
            c = self.counts.setdefault((tw.se, tw.sa, tw.wgp), {})
            c["wave_cycles"] = c.get("wave_cycles", 0) + self.clock[tw.se] - tw.start
        s, m = self.streams[tw.se], self.masks[tw.se]
        if s is not None and m.wtype_include & WTYPE_CS and m.emits(EXCL_WAVESTARTEND):
            s.put("WAVEEND", self.clock[tw.se], sa=tw.sa, simd=tw.simd, wgp=tw.wgp, wave=tw.slot)
