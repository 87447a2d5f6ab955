"""The emulated shader core's SQTT emitter (tinyhw/mocks/rdna3/sqtt.py) and the thread-trace registers
(tinyhw/mocks/amd/thread_trace.py), below the board: packets placed at arbitrary cycles decode (tinyhw's decoder, and
and tinygrad's) to exactly those cycles and fields; the masks decide which waves are traced; a full
buffer stops at size - 32 bytes, counts what it dropped and says so through WPTR; a write GPUVM refuses sets
STATUS.WRITE_ERROR.

Sabotage shown red: TS_DELTA_SHORT carrying the gap without its -4 (the property test fails at the first gap of
4..19 cycles that does not fit the packet's own field).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kernelshelp import tinygrad_sqtt

from tinyhw.formats.sqtt import decode
from tinyhw.mocks.amd.gpuvm import VmFault
from tinyhw.mocks.amd.thread_trace import ThreadTrace
from tinyhw.mocks.rdna3.sqtt import DispatchTrace, Masks, SeStream
from tinyhw.regs import asic

A = asic("navi31")
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FIELDS = {"WAVESTART": {"sa": 1, "simd": 3, "wgp": 7, "wave": 31, "id7": 0x3FFF}, "WAVEEND": {"sa": 1, "simd": 3,
          "wgp": 7, "wave": 31}, "INST": {"wave": 31, "op": 0x7F}, "VALUINST": {"wave": 31},
          "IMMEDIATE": {"wave": 31}, "ALUEXEC": {"src": 3}, "VMEMEXEC": {"src": 3}}


@st.composite
def _packets(draw: st.DrawFn) -> list[tuple[str, int, dict[str, int]]]:
    out, t = [], 0
    for _ in range(draw(st.integers(1, 60))):
        name = draw(st.sampled_from(sorted(FIELDS)))
        t += draw(st.one_of(st.integers(0, 40), st.integers(0, 1 << 20), st.integers(0, 1 << 40)))
        out.append((name, t, {k: draw(st.integers(0, hi)) for k, hi in FIELDS[name].items()}))
    return out


@pytest.fixture(scope="module")
def tg_decode() -> Callable[[bytes], list]:
    """tinygrad's decoder, imported once before the property test runs (its import raises the recursion limit)."""
    tg = tinygrad_sqtt()
    return lambda data: list(tg.decode(data))


@SETTINGS
@given(_packets())
def test_packets_decode_at_their_cycles(tg_decode: Callable[[bytes], list],
                                        packets: list[tuple[str, int, dict[str, int]]]) -> None:
    s = SeStream()
    s.header()
    for name, t, f in packets:
        s.put(name, t, **f)
    blob = s.take(final=True)
    assert len(blob) % 32 == 0
    trace = decode(blob)
    assert trace.layout == 3 and trace.name(0) == "LAYOUT_HEADER"
    real = [i for i in range(len(trace)) if trace.name(i) in FIELDS]
    assert [(trace.name(i), int(trace.time[i])) for i in real] == [(n, t) for n, t, _ in packets]
    for i, (_, _, f) in zip(real, packets, strict=True):
        got = trace.fields(i)
        assert {k: got[k] for k in f} == f
    theirs = tg_decode(blob)
    assert [(type(p).__name__, p._time) for p in theirs] == [(trace.name(i), int(trace.time[i]))
                                                             for i in range(len(trace))]


class _Board:
    """The few board services the thread-trace block uses: the register file, GPU memory, the clock, events."""

    def __init__(self, mapped: int = 1 << 24) -> None:
        self.regs = A
        self.values: dict[int, int] = {}
        self.mem: dict[int, bytes] = {}
        self.mapped = mapped
        self.events: list[Callable[[], None]] = []

    def reg_read(self, offset: int) -> int:
        return self.values.get(offset, 0)

    def command_now(self) -> float:
        return 0.0

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        self.events.append(fn)

    def gpu_write(self, vmid: int, va: int, data: bytes, at: float | None = None) -> None:
        if va + len(data) > self.mapped:
            raise VmFault(f"0x{va:x} not mapped")
        self.mem[va] = data

    def run_events(self) -> None:
        while self.events:
            self.events.pop(0)()


def _field(path: str, v: int) -> int:
    f = A.field(f"gc.{path}")
    return (v << f.shift) & f.mask


def _programmed(board: _Board, size: int, base: int = 0x10000) -> ThreadTrace:
    tt = ThreadTrace(board, A, ses=2, shader_hz=2.5e9)  # type: ignore[arg-type]
    gfx = A.offset("gc.GRBM_GFX_INDEX")
    board.values[gfx] = _field("GRBM_GFX_INDEX.SE_BROADCAST_WRITES", 1)
    tt.write("BUF0_BASE", base >> 12)
    tt.write("BUF0_SIZE", _field("SQ_THREAD_TRACE_BUF0_SIZE.SIZE", size >> 12))
    tt.write("MASK", _field("SQ_THREAD_TRACE_MASK.WTYPE_INCLUDE", 0x40))
    tt.write("CTRL", _field("SQ_THREAD_TRACE_CTRL.MODE", 1))
    board.values[gfx] = 0  # SE 0 selected for reads
    return tt


def _fill(tt: ThreadTrace, packets: int) -> None:
    trace = tt.for_dispatch(0.0)
    assert trace is not None
    s = trace.streams[0]
    assert s is not None
    for i in range(packets):
        s.put("VALUINST", 3 * i, wave=i & 31)
    tt.after_dispatch()


def _status(tt: ThreadTrace, field: str) -> int:
    return A.reg("gc.SQ_THREAD_TRACE_STATUS").decode(tt.read("STATUS"))[field]


def test_finish_then_stop_writes_the_stream_and_moves_wptr() -> None:
    board = _Board()
    tt = _programmed(board, 64 << 10)
    _fill(tt, 100)
    tt.on_event(55)  # THREAD_TRACE_FINISH
    assert _status(tt, "FINISH_PENDING") == 1
    board.run_events()
    assert _status(tt, "FINISH_PENDING") == 0 and _status(tt, "FINISH_DONE") == 1
    tt.write("CTRL", 0)
    assert _status(tt, "BUSY") == 1
    board.run_events()
    assert _status(tt, "BUSY") == 0
    wptr = A.reg("gc.SQ_THREAD_TRACE_WPTR").decode(tt.read("WPTR"))["OFFSET"]
    length = (wptr - 0x10000 // 32) * 32  # absolute on gfx11.0
    data = b"".join(board.mem[a] for a in sorted(board.mem) if a < 0x10000 + (64 << 10))
    assert length == len(data) and length % 32 == 0
    t = decode(data)
    assert len(t.indices("VALUINST")) == 100 and int(t.time[t.indices("VALUINST")[-1]]) == 297
    assert tt.read("DROPPED_CNTR") == 0


def test_a_full_buffer_stops_at_size_minus_32_and_counts_the_drop() -> None:
    board = _Board()
    tt = _programmed(board, 4096)
    _fill(tt, 6000)  # 12-bit packets: about 9 KB, twice the buffer
    tt.write("CTRL", 0)
    board.run_events()
    wptr = A.reg("gc.SQ_THREAD_TRACE_WPTR").decode(tt.read("WPTR"))["OFFSET"]
    assert (wptr - 0x10000 // 32) * 32 == 4096 - 32
    assert sum(len(v) for v in board.mem.values()) == 4096 - 32
    assert tt.read("DROPPED_CNTR") > 0
    assert all(a + len(v) <= 0x10000 + 4096 - 32 for a, v in board.mem.items())


def test_a_refused_write_sets_write_error() -> None:
    board = _Board(mapped=0x10000)
    tt = _programmed(board, 4096)
    _fill(tt, 400)
    assert _status(tt, "WRITE_ERROR") == 1 and not board.mem


def test_masks_pick_the_instruction_traced_wave() -> None:
    """Only the wave on SIMD_SEL of WGP_SEL in SA_SEL gets instruction packets; TOKEN_EXCLUDE bit 8 (INST) and
    bit 4 (WAVESTARTEND) take their packets away; without the compute wave type nothing is traced."""
    class W:
        def __init__(self, index: int) -> None:
            self.index = index

    def run(masks: Masks) -> list[str]:
        s = SeStream()
        tr = DispatchTrace([s], [masks], [0])
        waves = [W(i) for i in range(2)]
        for w in waves:
            tr.wave_start(w, 0)
        inst = type("I", (), {"mnemonic": "s_mov_b32", "encoding": "SOP1", "fields": {}})()
        for w in waves:
            tr.issue(w, inst, 1, False)
            tr.wave_end(w)
        t = decode(s.take(final=True))
        return [t.name(i) for i in range(len(t)) if t.name(i) not in ("NOP", "LAYOUT_HEADER", "TS_DELTA_SHORT")]

    base = Masks(simd_sel=1, wgp_sel=0, sa_sel=0, wtype_include=0x40, token_exclude=0)
    assert run(base) == ["WAVESTART", "WAVESTART", "WAVEEND", "INST", "WAVEEND"]  # wave 1 is on SIMD 1
    assert run(Masks(0, 0, 0, 0x40, 1 << 8)) == ["WAVESTART", "WAVESTART", "WAVEEND", "WAVEEND"]
    assert run(Masks(0, 0, 0, 0x40, 1 << 4)) == ["INST"]
    assert run(Masks(0, 0, 0, 0x01, 0)) == []
