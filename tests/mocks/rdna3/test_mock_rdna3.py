"""The emulated RDNA3 shader core (tinyhw.mocks.rdna3): probes, LDS and barriers, instruction classes, errors.

The four committed gfx1100 probes run on a flat memory with small grids and must pass the host's own checks
(tinyhw.kernels.probes) and equal an exact numpy answer (fma: the fused one, bit for bit). Hand-assembled
programs (encodings from llvm-mc-19, re-checked below when it is installed) exercise the instruction
classes one by one through the final wave state.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rdna3help import ROOT, fma_expected, run_probe

from tinyhw.formats.amdisa import decode_at, text_section
from tinyhw.kernels.probes import PROBES
from tinyhw.mocks.rdna3 import (
    DispatchRegs,
    FlatMemory,
    MemoryFault,
    ShaderFault,
    Unimplemented,
    WatchdogExpired,
    run_dispatch,
)

BASE = 0x10_0000_0000


@pytest.mark.parametrize("name", ["pattern", "bandwidth", "fma", "atomic"])
def test_probe_passes_the_hosts_check(name: str) -> None:
    outs, n, res = run_probe(name, groups=4)
    check = PROBES[name].check(n, outs)
    assert check.ok, check.detail
    assert res.workgroups == 4 and res.lane_instructions == 32 * res.wave_instructions


def test_probe_outputs_equal_numpy() -> None:
    outs, n, _ = run_probe("pattern", groups=4)
    want = (np.arange(n, dtype=np.uint64) * 0x9E3779B1 + 0x1234567).astype(np.uint32)
    assert np.array_equal(np.frombuffer(outs["out"], "<u4"), want)
    outs, n, _ = run_probe("bandwidth", groups=4)
    inp = np.frombuffer(PROBES["bandwidth"].inputs(n)["in"], "<u4")
    assert np.array_equal(np.frombuffer(outs["out"], "<u4"), inp ^ np.uint32(0x5A5A5A5A))
    outs, n, res = run_probe("fma", groups=2)  # 128 elements per workgroup, 256 starting values
    got = np.frombuffer(outs["out"], "<u4")
    assert np.array_equal(got, np.tile(fma_expected(), n // 256).view("<u4"))   # fused: bit-exact
    assert (res.waves, res.per_mnemonic["v_fma_f32"]) == (2, 2 * 64 * 4)    # 64 steps x 4 elements per wave


def test_atomic_tickets_and_counter() -> None:
    outs, n, res = run_probe("atomic", groups=2)
    tickets = np.frombuffer(outs["out"], "<u4")
    assert sorted(tickets.tolist()) == list(range(n))
    assert struct.unpack_from("<I", outs["counter"])[0] == n  # counter[1]: the cpu start gate, unused here
    assert res.per_mnemonic["global_atomic_add_u32"] == res.waves        # one atomic per wave (mbcnt trick)


def test_counters_are_exact() -> None:
    _, _, res = run_probe("pattern", groups=3)
    # E_8192_32_4: 20 instructions from the entry to s_endpgm, one wave per workgroup
    assert (res.waves, res.wave_instructions) == (3, 60)
    assert sum(res.per_mnemonic.values()) == res.wave_instructions
    assert res.per_mnemonic["global_store_b128"] == 3 and res.cycles > 0


# ---- LDS and s_barrier: the captured custom_lds_sync program (out[i] = i < 127 ? lds[i + 1] : -1) -----------

def _flat_program(mem: FlatMemory, words: list[int] | bytes) -> int:
    raw = words if isinstance(words, bytes) else struct.pack(f"<{len(words)}I", *words)
    return mem.alloc(raw + struct.pack("<4I", *[0xBF9F0000] * 4), align=256)


def _regs(entry: int, user: tuple[int, ...], block: tuple[int, int, int], grid: tuple[int, int, int] = (1, 1, 1),
          lds_units: int = 0, vgprs: int = 16, tidig: int = 0) -> DispatchRegs:
    rsrc1 = vgprs // 8 - 1
    rsrc2 = len(user) << 1 | 1 << 7 | tidig << 11 | lds_units << 15
    return DispatchRegs(pgm_lo=entry >> 8 & 0xFFFFFFFF, pgm_hi=entry >> 40 & 0xFF, rsrc1=rsrc1, rsrc2=rsrc2,
                        user_data=user, num_thread=block, dim=grid)


def test_lds_and_barrier_across_the_waves_of_a_workgroup() -> None:
    elf = (ROOT / "tests/data/sqtt/gfx1100/profile_sync_run_0/program_0_custom_lds_sync.elf").read_bytes()
    found = text_section(elf)
    assert found
    mem = FlatMemory(BASE, 1 << 20)
    entry = _flat_program(mem, found[1])
    out = mem.alloc(128 * 4 * 2)
    ka = mem.alloc(struct.pack("<Q", out), align=64)
    res = run_dispatch(_regs(entry, (ka & 0xFFFFFFFF, ka >> 32), (128, 1, 1), (2, 1, 1), lds_units=1), mem)
    got = np.frombuffer(mem.read(out, 512), "<u4")
    want = np.array([i + 1 for i in range(127)] + [0xFFFFFFFF], dtype=np.uint32)
    assert np.array_equal(got, want)           # lanes 31/63/95 read what the next wave stored before the barrier
    assert res.waves == 8 and res.per_mnemonic["s_barrier"] == 8


# ---- instruction classes from hand-assembled words -----------------------------------------------------------

PROGRAM_SCALAR = [
    ("s_add_u32 s10, s2, s3", (0x800A0302,)),
    ("s_addc_u32 s11, 0, 0", (0x820B8080,)),
    ("s_cmp_lt_u32 s10, 5", (0xBF0A850A,)),
    ("s_cselect_b32 s12, 1, 2", (0x980C8281,)),
    ("s_mov_b32 s15, 0", (0xBE8F0080,)),
    ("s_add_i32 s15, s15, 1", (0x810F810F,)),
    ("s_cmpk_lt_u32 s15, 0xa", (0xB68F000A,)),
    ("s_cbranch_scc1 65533", (0xBFA2FFFD,)),
    ("s_endpgm", (0xBFB00000,)),
]
PROGRAM_VECTOR = [
    ("s_mov_b32 s20, exec_lo", (0xBE94007E,)),
    ("v_mbcnt_lo_u32_b32 v2, -1, 0", (0xD71F0002, 0x000100C1)),
    ("v_cmpx_gt_u32_e32 16, v0", (0x7D980090,)),
    ("v_mov_b32_e32 v1, 7", (0x7E020287,)),
    ("s_mov_b32 exec_lo, s20", (0xBEFE0014,)),
    ("v_add_co_u32 v3, vcc_lo, v0, s4", (0xD7006A03, 0x00000900)),
    ("v_mov_b32_e32 v14, 0", (0x7E1C0280,)),
    ("v_add_co_ci_u32_e32 v4, vcc_lo, 0, v14, vcc_lo", (0x40081C80,)),
    ("v_mov_b32_e32 v6, 0x3f800001", (0x7E0C02FF, 0x3F800001)),
    ("v_mov_b32_e32 v7, 0x3f800001", (0x7E0E02FF, 0x3F800001)),
    ("v_mov_b32_e32 v8, 0xbf800002", (0x7E1002FF, 0xBF800002)),
    ("v_fma_f32 v5, v6, v7, v8", (0xD6130005, 0x04220F06)),
    ("v_mul_f32_e32 v9, v6, v7", (0x10120F06,)),
    ("v_add_f32_e32 v9, v9, v8", (0x06121109,)),
    ("v_dual_mov_b32 v10, v0 :: v_dual_mov_b32 v11, v2", (0xCA100100, 0x0A0A0102)),
    ("v_dual_mov_b32 v10, v11 :: v_dual_add_nc_u32 v11, v10, v2", (0xCA20010B, 0x0A0A050A)),
    ("v_mov_b32_e32 v13, 0x12345678", (0x7E1A02FF, 0x12345678)),
    ("v_bfe_u32 v12, v13, 4, 8", (0xD610000C, 0x0221090D)),
    ("v_cmpx_lt_u32_e32 2, v0", (0x7D920082,)),
    ("v_readfirstlane_b32 s13, v0", (0x7E1A0500,)),
    ("s_endpgm", (0xBFB00000,)),
]
#: an instruction the core refuses (a graphics-only lighting multiply)
PROGRAM_SIN = [("s_sendmsg sendmsg(MSG_INTERRUPT)", (0xBFB60001,)), ("s_endpgm", (0xBFB00000,))]  # no interrupts
PROGRAM_HANG = [("s_branch 65535", (0xBFA0FFFF,))]
PROGRAMS = (PROGRAM_SCALAR, PROGRAM_VECTOR, PROGRAM_SIN, PROGRAM_HANG)
#: packed f16 (VOP3P); op_sel / op_sel_hi / neg_lo are in the words (the decoder's text leaves them out)
PROGRAM_PACKED = [
    ("v_mov_b32_e32 v0, 0x40003c00", (0x7E0002FF, 0x40003C00)),   # lo 1.0, hi 2.0
    ("v_mov_b32_e32 v1, 0x42004400", (0x7E0202FF, 0x42004400)),   # lo 4.0, hi 3.0
    ("v_mov_b32_e32 v2, 0xbc003800", (0x7E0402FF, 0xBC003800)),   # lo 0.5, hi -1.0
    ("v_pk_fma_f16 v3, v0, v1, v2", (0xCC0E4003, 0x1C0A0300)),
    ("v_pk_fma_f16 v4, v0, v1, v2 op_sel:[1,0,0] op_sel_hi:[0,1,1]", (0xCC0E4804, 0x140A0300)),
    ("v_pk_mul_f16 v5, v0, v1 neg_lo:[1,0]", (0xCC104005, 0x38020300)),
    ("s_endpgm", (0xBFB00000,)),
]


def _run(program: list[tuple[str, tuple[int, ...]]], user: tuple[int, ...], block: tuple[int, int, int],
         **kw: object) -> list:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, [w for _, ws in program for w in ws])
    waves: list = []
    run_dispatch(_regs(entry, user, block), mem, on_wave_end=waves.append, **kw)  # type: ignore[arg-type]
    return waves


def test_scalar_alu_carry_compare_select_and_loop() -> None:
    (w,) = _run(PROGRAM_SCALAR, (0, 0, 0xFFFFFFFF, 2), (32, 1, 1))
    assert (w.s[10], w.s[11], w.s[12], w.s[15]) == (1, 1, 1, 10)
    assert w.s[4] == 0          # the workgroup id X follows the 4 user SGPRs


def test_vector_alu_exec_masking_carry_vopd_fma_and_partial_wave() -> None:
    w0, w1 = _run(PROGRAM_VECTOR, (0, 0, 0, 0, 0xFFFFFFF0), (40, 1, 1))
    lanes = np.arange(32)
    assert np.array_equal(w0.v[2], lanes) and np.array_equal(w1.v[2, :8], lanes[:8])   # v_mbcnt_lo: lane ids
    assert (w0.s[20], w1.s[20]) == (0xFFFFFFFF, 0xFF)              # initial EXEC: the partial wave has 8 lanes
    assert (w0.s[126], w1.s[126]) == (0xFFFFFFF8, 0xFF)            # EXEC after v_cmpx_lt_u32 2, x
    assert np.array_equal(w0.v[1], np.where(lanes < 16, 7, 0))    # v_cmpx masked the write
    assert np.array_equal(w1.v[1], np.zeros(32))                   # x = 32.. : no lane below 16
    assert np.array_equal(w0.v[4], (lanes >= 16).astype(np.uint32))   # carry out of v_add_co_u32 into v_add_co_ci
    assert np.array_equal(w0.v[3], (lanes + 0xFFFFFFF0) & 0xFFFFFFFF)
    assert w0.v[5, 0] == 0x28800000                               # fused: 2**-46; the unfused pair gives 0
    assert w0.v[9, 0] == 0
    assert np.array_equal(w0.v[10], lanes) and np.array_equal(w0.v[11], 2 * lanes)   # VOPD reads before writing
    assert w0.v[12, 0] == 0x67
    assert (w0.s[13], w1.s[13]) == (3, 32)                         # v_readfirstlane: lowest active lane
    assert not w1.v[1:, 8:].any()                                  # lanes beyond the work-items never written


def test_packed_f16_fma_and_mul_with_op_sel_and_neg() -> None:
    """VOP3P v_pk_fma_f16 / v_pk_mul_f16 (what tinygrad's f16 kernels use): each half of the result from the halves
    OP_SEL (low) and OP_SEL_HI (high) pick, NEG_LO negating the low half's operand, packed low | high << 16."""
    (w,) = _run(PROGRAM_PACKED, (), (32, 1, 1))
    assert w.v[3, 0] == 0x45004480   # lo 1*4+0.5 = 4.5, hi 2*3-1 = 5
    assert w.v[4, 0] == 0x40004840   # lo v0.hi*v1.lo+v2.lo = 8.5, hi v0.lo*v1.hi+v2.hi = 2
    assert w.v[5, 0] == 0x4600C400   # lo -(1)*4 = -4, hi 2*3 = 6


def test_unimplemented_instruction_stops_with_mnemonic_encoding_and_pc() -> None:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, [w for _, ws in PROGRAM_SIN for w in ws])
    with pytest.raises(Unimplemented) as e:
        run_dispatch(_regs(entry, (), (32, 1, 1)), mem)
    assert (e.value.mnemonic, e.value.encoding, e.value.pc) == ("s_sendmsg", "bfb60001", entry)
    assert "s_sendmsg" in str(e.value) and f"0x{entry:x}" in str(e.value)
    res = run_dispatch(_regs(entry, (), (32, 1, 1)), mem, strict=False)
    assert res.skipped == {"s_sendmsg": 1}


def test_a_scratch_ring_size_is_refused_only_for_a_kernel_that_enables_scratch() -> None:
    """COMPUTE_TMPRING_SIZE is the queue's scratch ring (WAVES, WAVESIZE; amd-compute.md §2.4), which a driver may set
    for every dispatch; a kernel uses scratch only with RSRC2.SCRATCH_EN (= ENABLE_PRIVATE_SEGMENT, §3.3). A ring
    size with SCRATCH_EN clear runs; SCRATCH_EN set needs the scratch base too (COMPUTE_DISPATCH_SCRATCH_BASE)."""
    mem = FlatMemory(BASE, 1 << 16)
    regs = _regs(_flat_program(mem, [0xBFB00000]), (), (32, 1, 1))  # s_endpgm
    ring = 0x40 << 12 | 32  # WAVESIZE 0x40, WAVES 32
    assert run_dispatch(dataclasses.replace(regs, tmpring_size=ring), mem).waves == 1
    with pytest.raises(ShaderFault, match="scratch_base is 0"):
        run_dispatch(dataclasses.replace(regs, rsrc2=regs.rsrc2 | 1, tmpring_size=ring), mem)
    with_base = dataclasses.replace(regs, rsrc2=regs.rsrc2 | 1, tmpring_size=ring, scratch_base_lo=BASE >> 8)
    assert run_dispatch(with_base, mem).waves == 1


def test_watchdog_stops_a_shader_that_never_ends() -> None:
    mem = FlatMemory(BASE, 1 << 16)
    entry = _flat_program(mem, [0xBFA0FFFF])
    with pytest.raises(WatchdogExpired):
        run_dispatch(_regs(entry, (), (32, 1, 1)), mem, watchdog=1000)


def test_memory_fault_propagates_and_lds_is_bounds_checked() -> None:
    mem = FlatMemory(BASE, 1 << 16)
    # global_store_b32 v[0:1], v0, off  (v0 = x, v1 = 0: address far outside the window)
    entry = _flat_program(mem, [0xDC6A0000, 0x007C0000, 0xBFB00000])
    with pytest.raises(MemoryFault):
        run_dispatch(_regs(entry, (), (32, 1, 1)), mem)
    # ds_store_b32 v0, v0 then ds_load_b32 v1, v0 without LDS: out of range, so no write and loads read 0
    entry = _flat_program(mem, [0xD8340000, 0x00000000, 0xD8D80000, 0x01000000, 0xBFB00000])
    waves: list = []
    run_dispatch(_regs(entry, (), (32, 1, 1)), mem, on_wave_end=waves.append)
    assert not waves[0].v[1].any()                  # no LDS at all: every lane reads 0


def test_hand_programs_decode_as_written() -> None:
    for program in PROGRAMS:
        for text, words in program:
            inst = decode_at(struct.pack(f"<{len(words)}I", *words) + bytes(8), 0, "gfx11")
            assert inst.text == text and inst.size == 4 * len(words)


@pytest.mark.skipif(not shutil.which("llvm-mc-19") and os.environ.get("TINYHW_REQUIRE_COMPILE") != "1",  # CI: required
                    reason="llvm-mc-19 is not installed")
def test_hand_programs_are_what_llvm_mc_assembles(tmp_path: Path) -> None:
    src = tmp_path / "p.s"
    rows = [row for program in (*PROGRAMS, PROGRAM_PACKED) for row in program]
    src.write_text("\n".join(t for t, _ in rows) + "\n")
    r = subprocess.run(["llvm-mc-19", "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding", str(src)],
                       capture_output=True, text=True, check=True, timeout=60)
    got = []
    for line in r.stdout.splitlines():
        if "encoding:" in line:
            raw = bytes(int(x, 16) for x in line.split("encoding: [")[1].rstrip("]").split(","))
            got.append(struct.unpack(f"<{len(raw) // 4}I", raw))
    assert got == [ws for _, ws in rows]


def test_every_inventory_instruction_is_implemented() -> None:
    """Each instruction of tests/data/rdna3/inventory.s (§9.3's 69 mnemonics and more) compiles in strict mode."""
    from tinyhw.mocks.rdna3.dispatch import _compile

    rows = (ROOT / "tests/data/rdna3/inventory.txt").read_text().splitlines()
    names = set()
    for line in rows:
        words = [int(x, 16) for x in line.split("\t")[0].split()]
        raw = struct.pack(f"<{len(words)}I", *words)
        inst = decode_at(raw, 0, "gfx11")
        _compile(inst, raw, 0x1000, True, {})          # raises Unimplemented if not modelled
        names.add(inst.mnemonic)
    assert len(names) >= 69
