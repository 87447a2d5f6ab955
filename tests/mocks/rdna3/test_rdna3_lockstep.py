"""Workgroups in lockstep on the emulated RDNA3 core: the same memory, wave state and counters as one at a time.

The dispatcher steps the waves of several workgroups together (a VALU instruction once over all their lanes) and
keeps the run only when running them one workgroup after another could not have given anything else; otherwise it
undoes the run and does exactly that. Every comparison here is against ``LOCKSTEP_WAVES = 1`` (no lockstep at all).
"""

from __future__ import annotations

import shutil
import struct

import clcorpushelp
import corpushelp
import numpy as np
import pytest
import tccorpushelp
from rdna3asm import asm_many
from rdna3help import run_probe

from tests.mocks.rdna3.test_mock_rdna3 import PROGRAM_VECTOR, _flat_program, _regs
from tinyhw.mocks.rdna3 import FlatMemory, dispatch, run_dispatch

BASE = 0x10_0000_0000
needs_mc = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")


@pytest.fixture
def runs(lockstep_runs: list[bool]) -> list[bool]:
    """Whether each lockstep run of the test was kept (True) or undone (False)."""
    return lockstep_runs


def _one_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)


@pytest.mark.parametrize("name", ["pattern", "bandwidth", "fma", "atomic"])
def test_probes_equal_one_workgroup_at_a_time(name: str, runs: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    outs, _, res = run_probe(name, groups=5)
    assert runs and all(runs)
    _one_at_a_time(monkeypatch)
    outs1, _, res1 = run_probe(name, groups=5)
    assert outs == outs1 and res.to_doc() == res1.to_doc()


@pytest.mark.parametrize("helper", [corpushelp, clcorpushelp, tccorpushelp], ids=["tinygrad", "clang", "tensorcore"])
def test_corpus_equals_one_workgroup_at_a_time(helper: object, runs: list[bool],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    meta, arrays = helper.load_corpus()      # type: ignore[attr-defined]
    entries = meta["kernels"]

    def outcome(e: dict) -> tuple:
        try:
            out, res = helper.run_on_core(e, arrays)      # type: ignore[attr-defined]
            return out.tobytes(), res.to_doc()
        except Exception as exc:        # a known gap: the same error either way
            return type(exc).__name__, str(exc)
    got = [outcome(e) for e in entries]
    assert sum(runs) >= len(entries) // 4      # many fixtures have several workgroups and run in lockstep
    _one_at_a_time(monkeypatch)
    for e, want in zip(entries, got, strict=True):
        assert outcome(e) == want, e.get("seed", e.get("name"))


def _vector_states(grid: tuple[int, int, int]) -> list[tuple]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, [w for _, ws in PROGRAM_VECTOR for w in ws])
    waves: list = []
    run_dispatch(_regs(entry, (0, 0, 0, 0, 0xFFFFFFF0), (40, 1, 1), grid), mem, on_wave_end=waves.append)
    return [(w.wg, w.index, list(w.s), w.scc, w.v.copy(), w.pc, w.mode) for w in waves]


def _equal(a: list[tuple], b: list[tuple]) -> bool:
    return len(a) == len(b) and all(x[:4] == y[:4] and np.array_equal(x[4], y[4]) and x[5:] == y[5:]
                                    for x, y in zip(a, b, strict=True))


def test_partial_waves_per_wave_instructions_and_sgpr_writes(runs: list[bool],
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Two waves per workgroup, the second with 8 lanes (EXEC differs between the waves), v_cmpx and carries writing
    SGPRs per wave, v_readfirstlane run wave by wave, the workgroup id read as a VALU source."""
    got = _vector_states((3, 1, 1))
    assert runs == [True]
    _one_at_a_time(monkeypatch)
    assert _equal(got, _vector_states((3, 1, 1)))


# every wave: v1 = buf[0] + 1; buf[0] = v1 (all lanes the same address). One wave after another count up to the
# number of waves; in lockstep every wave would read 0, so the run must be undone.
RACE = [0xDC520000, 0x01000002,     # global_load_b32 v1, v2, s[0:1]
        0xBF8903F7,                 # s_waitcnt vmcnt(0)
        0x4A020281,                 # v_add_nc_u32_e32 v1, 1, v1
        0xDC6A0000, 0x00000102,     # global_store_b32 v2, v1, s[0:1]
        0xBFB00000]                 # s_endpgm


def _race(groups: int) -> tuple[int, dict]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, RACE)
    buf = mem.alloc(4)
    res = run_dispatch(_regs(entry, (buf & 0xFFFFFFFF, buf >> 32), (64, 1, 1), (groups, 1, 1)), mem)
    return struct.unpack("<I", mem.read(buf, 4))[0], res.to_doc()


def test_a_wave_reading_what_an_earlier_wave_wrote_undoes_the_lockstep_run(runs: list[bool],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    value, doc = _race(6)
    assert runs == [False]                      # tried, found reordered, undone
    assert value == 12                          # 6 workgroups x 2 waves, one after another
    _one_at_a_time(monkeypatch)
    assert _race(6) == (value, doc)


# every workgroup (one lane): buf[64 - 4 * id] (8 bytes) = (id, id). Workgroup id + 1 stores 4 bytes below id, so the
# two stores share a dword; one after another, the later workgroup's value stays there.
OVERLAP = [0x84038202,              # s_lshl_b32 s3, s2, 2
           0x7E020202,              # v_mov_b32_e32 v1, s2
           0x7E040202,              # v_mov_b32_e32 v2, s2
           0x7E060203,              # v_mov_b32_e32 v3, s3
           0x4C0606C0,              # v_sub_nc_u32_e32 v3, 64, v3
           0xDC6E0000, 0x00000103,  # global_store_b64 v3, v[1:2], s[0:1]
           0xBFB00000]              # s_endpgm


def _overlap(groups: int) -> tuple[list[int], dict]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, OVERLAP)
    buf = mem.alloc(128)
    res = run_dispatch(_regs(entry, (buf & 0xFFFFFFFF, buf >> 32), (1, 1, 1), (groups, 1, 1)), mem)
    return list(struct.unpack("<32I", mem.read(buf, 128))), res.to_doc()


def test_stores_that_overlap_unequally_keep_the_later_waves_bytes(runs: list[bool],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    got, doc = _overlap(6)
    assert runs == [True]
    assert got[11:18] == [5, 5, 4, 3, 2, 1, 0]      # dword 16 - id: id + 1 (its high half) where that one ran
    _one_at_a_time(monkeypatch)
    assert _overlap(6) == (got, doc)


# workgroup 1 skips the v_mov: its waves take another PC than the others'
BRANCH = [0xBF068100,               # s_cmp_eq_u32 s0, 1 (s0: the workgroup id X)
          0xBFA20001,               # s_cbranch_scc1 1
          0x7E020285,               # v_mov_b32_e32 v1, 5
          0xBFB00000]               # s_endpgm


def _branch_states() -> list[tuple]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, BRANCH)
    waves: list = []
    run_dispatch(_regs(entry, (), (32, 1, 1), (3, 1, 1)), mem, on_wave_end=waves.append)
    return [(w.wg, w.index, list(w.s), w.scc, w.v.copy(), w.pc, w.mode) for w in waves]


def test_waves_that_branch_apart_meet_again(runs: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    """Workgroup 1 jumps over the v_mov; the others run it alone and meet it at s_endpgm; the run is kept."""
    got = _branch_states()
    assert runs == [True]
    assert [int(st[4][1, 0]) for st in got] == [5, 0, 5]
    _one_at_a_time(monkeypatch)
    assert _equal(got, _branch_states())


# every wave (one a workgroup) reads buf[0]; workgroup 1's waves part from the others at the branch; then each adds
# 1 and stores it. One after another the count reaches 3; the reads were stepped together, the stores not.
PART_RACE = """v_mov_b32 v2, 0
global_load_b32 v1, v2, s[0:1]
s_waitcnt vmcnt(0)
s_cmp_eq_u32 s2, 1
s_cbranch_scc1 1
v_mov_b32 v3, 5
v_add_nc_u32 v1, 1, v1
global_store_b32 v2, v1, s[0:1]
s_endpgm"""


@needs_mc
def test_what_waves_do_after_they_part_is_checked_against_the_steps_before(runs: list[bool],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, _asm(PART_RACE))
    buf = mem.alloc(4)
    res = run_dispatch(_regs(entry, (buf & 0xFFFFFFFF, buf >> 32), (32, 1, 1), (3, 1, 1)), mem)
    assert runs == [False] and res.lockstep_workgroups == 0
    assert struct.unpack("<I", mem.read(buf, 4))[0] == 3


def _asm(text: str) -> list[int]:
    """The dwords llvm-mc-19 encodes a gfx1100 program (one instruction a line, no labels) to."""
    return [w for words in asm_many([ln for ln in text.splitlines() if ln.strip()]) for w in words]


# every program below ends by storing v4 at out[64 x workgroup id + work-item id] (s[0:1] out, s2 the group id)
STORE_V4 = """s_lshl_b32 s4, s2, 6
v_add_nc_u32 v5, s4, v0
v_lshlrev_b32 v5, 2, v5
global_store_b32 v5, v4, s[0:1]
s_endpgm"""


# Two waves a workgroup (64 work-items, v0 = id), s[0:1] the output, s2 the workgroup id. Each lane stores
# id + 1000 * wg at LDS[4 id] and reads it back (the same wave's write: fine in one barrier interval); after the
# barrier it reads the other wave's word LDS[4 (id ^ 32)] and a word past the LDS's 512 bytes (which reads 0);
# out[64 wg + id] = the other wave's word + (own word << 16) + the word past the end.
EXCHANGE = """s_mul_i32 s3, s2, 1000
v_add_nc_u32 v2, s3, v0
v_lshlrev_b32 v1, 2, v0
ds_store_b32 v1, v2
ds_load_b32 v6, v1
s_waitcnt lgkmcnt(0)
s_barrier
v_xor_b32 v3, 32, v0
v_lshlrev_b32 v3, 2, v3
ds_load_b32 v4, v3
ds_load_b32 v7, v1 offset:2048
s_waitcnt lgkmcnt(0)
v_lshlrev_b32 v6, 16, v6
v_add_nc_u32 v4, v4, v6
v_add_nc_u32 v4, v4, v7
""" + STORE_V4

# A race: every lane of each wave stores (id >> 5) + 1 + 10 * wg at LDS[0], then (no barrier between the waves)
# reads LDS[0]. One wave after another, each wave reads its own value; stepped together without the check, wave 0
# would read wave 1's.
RACE_LDS = """v_lshrrev_b32 v2, 5, v0
s_mul_i32 s3, s2, 10
v_add3_u32 v2, v2, s3, 1
v_mov_b32 v1, 0
ds_store_b32 v1, v2
s_waitcnt lgkmcnt(0)
ds_load_b32 v4, v1
s_waitcnt lgkmcnt(0)
s_barrier
""" + STORE_V4

# ds_append by both waves on one counter (LDS[0], M0 = 0) in one barrier interval: wave 0's lanes get 0, wave 1's 32.
APPEND = """s_mov_b32 m0, 0
ds_append v4
s_waitcnt lgkmcnt(0)
""" + STORE_V4


def _lds_kernel(text: str, groups: int, lds_units: int = 1) -> tuple[list[int], dict, int]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, _asm(text))
    out = mem.alloc(256 * groups)
    res = run_dispatch(_regs(entry, (out & 0xFFFFFFFF, out >> 32), (64, 1, 1), (groups, 1, 1), lds_units=lds_units),
                       mem)
    return list(struct.unpack(f"<{64 * groups}I", mem.read(out, 256 * groups))), res.to_doc(), res.lockstep_workgroups


@needs_mc
def test_lds_exchange_after_a_barrier_runs_in_lockstep(runs: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    got, doc, wide = _lds_kernel(EXCHANGE, 5)
    assert runs == [True] and wide == 5
    assert got == [((i ^ 32) + 1000 * g + ((i + 1000 * g) << 16)) & 0xFFFFFFFF for g in range(5) for i in range(64)]
    _one_at_a_time(monkeypatch)
    assert _lds_kernel(EXCHANGE, 5) == (got, doc, 0)


# EXCHANGE with the DS forms that run wave by wave: each lane stores v = id + 1000 wg at LDS[4 id] and LDS[4 id + 256]
# (2addr) and its low half at LDS[512 + 4 id] (d16_hi); after the barrier it loads the other wave's three;
# out = the two words + the half.
EXCHANGE_PER_WAVE = """s_mul_i32 s3, s2, 1000
v_add_nc_u32 v2, s3, v0
v_lshlrev_b32 v1, 2, v0
ds_store_2addr_b32 v1, v2, v2 offset1:64
v_lshlrev_b32 v8, 16, v2
ds_store_b16_d16_hi v1, v8 offset:512
s_waitcnt lgkmcnt(0)
s_barrier
v_xor_b32 v3, 32, v0
v_lshlrev_b32 v3, 2, v3
ds_load_2addr_b32 v[4:5], v3 offset1:64
v_mov_b32 v6, 0
ds_load_u16_d16 v6, v3 offset:512
s_waitcnt lgkmcnt(0)
v_add_nc_u32 v4, v4, v5
v_add_nc_u32 v4, v4, v6
""" + STORE_V4


@needs_mc
def test_lds_exchange_wave_by_wave_after_a_barrier_runs_in_lockstep(runs: list[bool],
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    got, doc, wide = _lds_kernel(EXCHANGE_PER_WAVE, 3, lds_units=2)
    assert runs == [True] and wide == 3
    other = [(i ^ 32) + 1000 * g for g in range(3) for i in range(64)]
    assert got == [2 * o + (o & 0xFFFF) for o in other]
    _one_at_a_time(monkeypatch)
    assert _lds_kernel(EXCHANGE_PER_WAVE, 3, lds_units=2) == (got, doc, 0)


@needs_mc
def test_two_waves_writing_one_lds_word_between_barriers_run_one_at_a_time(runs: list[bool],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    got, doc, wide = _lds_kernel(RACE_LDS, 4)
    assert runs == [False] and wide == 0            # tried, the race seen, undone
    assert got == [(i >> 5) + 1 + 10 * g for g in range(4) for i in range(64)]
    _one_at_a_time(monkeypatch)
    assert _lds_kernel(RACE_LDS, 4) == (got, doc, 0)


@needs_mc
def test_ds_append_of_two_waves_on_one_counter_runs_one_at_a_time(runs: list[bool],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A choice: ds_append/consume and the DS atomics are a read and a write of their bytes, so two waves on one
    counter in one barrier interval undo the run (one at a time, wave 0 takes the counter first)."""
    got, doc, _ = _lds_kernel(APPEND, 3)
    assert runs == [False]
    assert got == [0] * 32 + [32] * 32 + [0] * 32 + [32] * 32 + [0] * 32 + [32] * 32
    _one_at_a_time(monkeypatch)
    assert _lds_kernel(APPEND, 3) == (got, doc, 0)


@pytest.mark.parametrize("helper", [corpushelp, clcorpushelp, tccorpushelp], ids=["tinygrad", "clang", "tensorcore"])
def test_multi_wave_lds_reductions_run_in_lockstep(helper: object) -> None:
    """The corpus kernels whose workgroups have several waves exchanging through LDS with s_barrier run every
    workgroup in lockstep (16 tinygrad reductions, clang's lds_reduce, a tensor-core corpus row sum)."""
    meta, arrays = helper.load_corpus()      # type: ignore[attr-defined]
    seen = 0
    for e in meta["kernels"]:
        try:
            _, res = helper.run_on_core(e, arrays)      # type: ignore[attr-defined]
        except Exception:       # a known gap of the clang corpus
            continue
        if res.per_mnemonic.get("s_barrier") and res.workgroups > 1 and res.waves > res.workgroups:
            seen += 1
            assert res.lockstep_workgroups == res.workgroups, e.get("seed", e.get("name"))
    assert seen >= {corpushelp: 16, clcorpushelp: 1, tccorpushelp: 1}[helper]


def _tree_sum(threads: int) -> str:
    """A workgroup of ``threads`` work-items (s[0:1] in, s[2:3] out, s4 the workgroup id) sums its slice of ``in``
    through LDS: each stride s (threads / 2 .. 1) in turn, work-items below s add LDS[id + s] into LDS[id]
    (``if``: EXEC saved, the block skipped when EXEC is 0), then s_barrier; work-item 0 stores the sum."""
    block = ["ds_load_b32 v4, v1 offset:{off}", "ds_load_b32 v5, v1", "s_waitcnt lgkmcnt(0)",
             "v_add_nc_u32 v4, v4, v5", "ds_store_b32 v1, v4", "s_waitcnt lgkmcnt(0)"]
    skip = len(_asm("\n".join(block).format(off=4)))
    lines = [f"s_lshl_b32 s5, s4, {(threads * 4).bit_length() - 1}", "v_lshlrev_b32 v1, 2, v0",
             "v_add_nc_u32 v2, s5, v1", "global_load_b32 v3, v2, s[0:1]", "s_waitcnt vmcnt(0)", "ds_store_b32 v1, v3",
             "s_waitcnt lgkmcnt(0)", "s_barrier"]
    stride = threads // 2
    while stride:
        lines += [f"v_cmp_gt_u32 vcc_lo, {stride}, v0", "s_and_saveexec_b32 s6, vcc_lo", f"s_cbranch_execz {skip}",
                  *(x.format(off=4 * stride) for x in block), "s_or_b32 exec_lo, exec_lo, s6", "s_barrier"]
        stride //= 2
    store = ["ds_load_b32 v4, v1", "s_waitcnt lgkmcnt(0)", "s_lshl_b32 s7, s4, 2", "v_mov_b32 v6, s7",
             "global_store_b32 v6, v4, s[2:3]"]
    lines += ["v_cmp_eq_u32 vcc_lo, 0, v0", "s_and_saveexec_b32 s6, vcc_lo",
              f"s_cbranch_execz {len(_asm(chr(10).join(store)))}", *store, "s_endpgm"]
    return "\n".join(lines)


def _tree_run(groups: int) -> tuple[list[int], dict, int]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, _asm(_tree_sum(64)))
    data = [(i * 2654435761) & 0xFFFFF for i in range(64 * groups)]
    src, out = mem.alloc(struct.pack(f"<{len(data)}I", *data)), mem.alloc(4 * groups)
    user = (src & 0xFFFFFFFF, src >> 32, out & 0xFFFFFFFF, out >> 32)
    res = run_dispatch(_regs(entry, user, (64, 1, 1), (groups, 1, 1), lds_units=1), mem)
    want = [sum(data[64 * g:64 * g + 64]) & 0xFFFFFFFF for g in range(groups)]
    got = list(struct.unpack(f"<{groups}I", mem.read(out, 4 * groups)))
    assert got == want
    return got, res.to_doc(), res.lockstep_workgroups


def _spy_apart(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """What each call of the dispatcher's _apart returned (the PC where the parted waves met again, or -1)."""
    met: list[int] = []
    orig = dispatch._Dispatch._apart

    def spy(self: dispatch._Dispatch, *a: object) -> int:
        met.append(orig(self, *a))      # type: ignore[arg-type]
        return met[-1]
    monkeypatch.setattr(dispatch._Dispatch, "_apart", spy)
    return met


@needs_mc
def test_waves_that_skip_an_if_wait_while_the_others_run_it_in_lockstep(runs: list[bool],
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A tree reduction: at each stride the waves with no work-item below it skip the block; the others step through
    it together while they wait at its end, so the run never parts."""
    met = _spy_apart(monkeypatch)
    got, doc, wide = _tree_run(4)
    assert runs == [True] and wide == 4 and met == []
    _one_at_a_time(monkeypatch)
    assert _tree_run(4) == (got, doc, 0)


# 64 work-items (two waves) a workgroup: wave 0 takes the "then" branch (v3 = 7) and jumps over the "else" (v3 = 9)
# that wave 1 takes; each stores v3 at LDS[4 id] and they meet at the barrier; out[64 wg + id] = the other wave's.
IF_ELSE = """v_cmp_gt_u32 vcc_lo, 32, v0
s_cbranch_vccz 2
v_mov_b32 v3, 7
s_branch 1
v_mov_b32 v3, 9
v_lshlrev_b32 v1, 2, v0
ds_store_b32 v1, v3
s_waitcnt lgkmcnt(0)
s_barrier
v_xor_b32 v2, 32, v0
v_lshlrev_b32 v2, 2, v2
ds_load_b32 v3, v2
s_waitcnt lgkmcnt(0)
s_lshl_b32 s4, s2, 6
v_add_nc_u32 v5, s4, v0
v_lshlrev_b32 v5, 2, v5
global_store_b32 v5, v3, s[0:1]
s_endpgm"""


@needs_mc
def test_waves_that_part_inside_a_barrier_interval_go_on_in_lockstep_after_it(
        runs: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    """The waves of the "then" jump past the "else": they part; each runs to the barrier one at a time, and there
    they are stepped together again."""
    met = _spy_apart(monkeypatch)
    got, doc, wide = _lds_kernel(IF_ELSE, 3)
    assert runs == [True] and wide == 3 and len(met) == 1 and met[0] > 0
    assert got == ([9] * 32 + [7] * 32) * 3
    _one_at_a_time(monkeypatch)
    assert _lds_kernel(IF_ELSE, 3) == (got, doc, 0)


# one wave a workgroup: workgroup 1 branches over the barrier, so the waves part; workgroup 0's wave waits at the
# barrier while workgroup 1's runs to its end, then workgroup 0's goes on. Each does buf[0] = 3 buf[0] + id + 1:
# one after another 0 -> 1 -> 5; workgroup 1 first would give 2 -> 7.
PART_ORDER = """v_mov_b32 v2, 0
s_cmp_eq_u32 s2, 1
s_cbranch_scc1 1
s_barrier
global_load_b32 v1, v2, s[0:1]
s_waitcnt vmcnt(0)
v_mul_u32_u24 v1, 3, v1
s_add_u32 s3, s2, 1
v_add_nc_u32 v1, s3, v1
global_store_b32 v2, v1, s[0:1]
s_endpgm"""


def _part_order() -> tuple[int, dict, int]:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, _asm(PART_ORDER))
    buf = mem.alloc(4)
    res = run_dispatch(_regs(entry, (buf & 0xFFFFFFFF, buf >> 32), (32, 1, 1), (2, 1, 1)), mem)
    return struct.unpack("<I", mem.read(buf, 4))[0], res.to_doc(), res.lockstep_workgroups


@needs_mc
def test_a_workgroup_that_goes_on_after_a_later_one_ended_is_checked(runs: list[bool],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The run parts, runs one at a time to its end, and is undone: its counters too."""
    value, doc, wide = _part_order()
    assert runs == [False] and wide == 0
    assert value == 5
    _one_at_a_time(monkeypatch)
    assert _part_order() == (value, doc, 0)


# Both waves store to LDS[0] at one step (wave 0 1, wave 1 2), then wave 0 alone stores 7 there (wave 1's EXEC is 0);
# after the barrier every lane reads LDS[0]. One after another wave 1's 2 is last; stepped together without the
# check 7 would be.
SAME_STEP = """v_lshrrev_b32 v2, 5, v0
v_add_nc_u32 v2, 1, v2
v_mov_b32 v1, 0
ds_store_b32 v1, v2
v_cmp_gt_u32 vcc_lo, 32, v0
s_and_saveexec_b32 s6, vcc_lo
v_mov_b32 v3, 7
ds_store_b32 v1, v3
s_or_b32 exec_lo, exec_lo, s6
s_waitcnt lgkmcnt(0)
s_barrier
ds_load_b32 v4, v1
s_waitcnt lgkmcnt(0)
""" + STORE_V4


# Both waves load LDS[0] (0) at one step, then wave 0 alone stores 7 there; out = what each loaded. One after
# another wave 1 loads after wave 0's store: 7.
SAME_STEP_READ = """v_mov_b32 v1, 0
ds_load_b32 v4, v1
s_waitcnt lgkmcnt(0)
v_cmp_gt_u32 vcc_lo, 32, v0
s_and_saveexec_b32 s6, vcc_lo
v_mov_b32 v3, 7
ds_store_b32 v1, v3
s_or_b32 exec_lo, exec_lo, s6
s_waitcnt lgkmcnt(0)
""" + STORE_V4


# Wave 1 alone loads LDS[0..8), then wave 0 alone loads it and stores 7, 7 there (2addr forms: run wave by wave);
# out = what wave 1 loaded (wave 0's lanes: 0). One after another wave 1 loads after wave 0's store: 7.
READERS = """v_mov_b32 v1, 0
v_mov_b32 v4, 0
v_cmp_le_u32 vcc_lo, 32, v0
s_and_saveexec_b32 s6, vcc_lo
ds_load_2addr_b32 v[4:5], v1 offset1:1
s_or_b32 exec_lo, exec_lo, s6
v_cmp_gt_u32 vcc_lo, 32, v0
s_and_saveexec_b32 s6, vcc_lo
ds_load_2addr_b32 v[6:7], v1 offset1:1
v_mov_b32 v3, 7
ds_store_2addr_b32 v1, v3, v3 offset1:1
s_or_b32 exec_lo, exec_lo, s6
s_waitcnt lgkmcnt(0)
""" + STORE_V4


@needs_mc
@pytest.mark.parametrize(("text", "want"), [(SAME_STEP, [2] * 64), (SAME_STEP_READ, [0] * 32 + [7] * 32),
                                            (READERS, [0] * 32 + [7] * 32)],
                         ids=["store-store", "load-store", "two-readers-wave-by-wave"])
def test_two_waves_on_one_lds_word_at_one_step_run_one_at_a_time(text: str, want: list[int], runs: list[bool],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    got, doc, wide = _lds_kernel(text, 2)
    assert runs == [False] and wide == 0
    assert got == want * 2
    _one_at_a_time(monkeypatch)
    assert _lds_kernel(text, 2) == (got, doc, 0)


# one wave a workgroup; buf[0] starts at 5. Workgroup 2 alone loads buf[0] (the others wait: a sub-run of one wave),
# then workgroup 1 alone stores 9 there; out[wg] (buf + 16) = what it loaded (0 if none). One after another,
# workgroup 2 runs after workgroup 1 and loads 9; the load stepped first would read 5.
SUB_ORDER = """v_mov_b32 v2, 0
v_mov_b32 v1, 0
s_cmp_lg_u32 s2, 2
s_cbranch_scc1 3
global_load_b32 v1, v2, s[0:1]
s_waitcnt vmcnt(0)
s_cmp_lg_u32 s2, 1
s_cbranch_scc1 3
v_mov_b32 v3, 9
global_store_b32 v2, v3, s[0:1]
s_lshl_b32 s4, s2, 2
v_mov_b32 v4, s4
global_store_b32 v4, v1, s[0:1] offset:16
s_endpgm"""


@needs_mc
def test_accesses_of_a_sub_run_are_logged_as_their_own_waves(runs: list[bool]) -> None:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, _asm(SUB_ORDER))
    buf = mem.alloc(struct.pack("<I", 5) + bytes(28))
    res = run_dispatch(_regs(entry, (buf & 0xFFFFFFFF, buf >> 32), (32, 1, 1), (3, 1, 1)), mem)
    assert runs == [False] and res.lockstep_workgroups == 0
    assert struct.unpack("<I", mem.read(buf, 4))[0] == 9
    assert list(struct.unpack("<3I", mem.read(buf + 16, 12))) == [0, 0, 9]
