"""Table tests of the rare forms of the shader core (tinyhw/mocks/rdna3/rare.py): ds_condxchg32_rtn_b64, the BVH
stack, LDSDIR, buffer loads to LDS, s_rfe_b64, messages with return, the halts, the subvector loops, the hardware
registers, the aperture operands and FLAT into the LDS and private apertures, and a clang-19 OpenCL kernel whose
generic pointers reach a private array and ``__local`` memory.

Instructions are assembled by llvm-mc-19 (skipped without it), decoded, compiled and run on one wave. Expected values
come from the ISA reference guide's pseudocode computed here with Python integers and ``struct``, never from the core.
"""

from __future__ import annotations

import dataclasses
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
from rdna3isa import asm, f32, go, wave

from tinyhw.mocks.rdna3 import FlatMemory, ShaderFault, Unimplemented, rare
from tinyhw.mocks.rdna3.salu import END

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
M32 = (1 << 32) - 1
EXEC_LO, EXEC_HI, M0, VCC = 126, 127, 125, 106
BASE = 0x10_0000_0000
PC = 0x1000                     # where rdna3isa.run places the instruction






def lds_put(w, at: int, *vals: int) -> None:
    """Dwords ``vals`` into the wave's LDS from byte ``at``."""
    w.lds[at:at + 4 * len(vals)] = np.frombuffer(struct.pack(f"<{len(vals)}I", *vals), np.uint8)


def lds_get(w, at: int) -> int:
    """The LDS dword at byte ``at``."""
    return struct.unpack("<I", bytes(w.lds[at:at + 4]))[0]


# ---- DS ------------------------------------------------------------------------------------------------------------

def test_condxchg32_writes_each_half_iff_its_top_bit_is_set() -> None:
    w = wave()
    w.s[EXEC_LO] = 0b1011
    for i in range(8):
        lds_put(w, 16 * i, 0x1000 + i, 0x2000 + i)
    w.v[1] = [16 * i + 2 for i in range(32)]        # + offset 3 -> & 0xFFF8 aligns down to 16 i
    his = [1 << 31 | 0x123, 0x456, 1 << 31 | 0x7FFFFFFF, 0]
    los = [1 << 31 | 0xAAA, 1 << 31 | 0xBBB, 0x777, 0]
    w.v[4, :4], w.v[5, :4] = los, his
    w.v[2], w.v[3] = 0xDEAD, 0xBEEF
    go(w, "ds_condxchg32_rtn_b64 v[2:3], v1, v[4:5] offset:3")
    for lane in range(4):
        a = 16 * lane
        if not w.s[EXEC_LO] >> lane & 1:
            assert (lds_get(w, a), lds_get(w, a + 4), int(w.v[2, lane])) == (0x1000 + lane, 0x2000 + lane, 0xDEAD)
            continue
        assert (int(w.v[2, lane]), int(w.v[3, lane])) == (0x1000 + lane, 0x2000 + lane)
        lo, hi = los[lane], his[lane]
        assert lds_get(w, a) == (lo & 0x7FFFFFFF if lo >> 31 else 0x1000 + lane)
        assert lds_get(w, a + 4) == (hi & 0x7FFFFFFF if hi >> 31 else 0x2000 + lane)


def _bvh_ref(lds: dict[int, int], sa: int, last: int, data: list[int], size_dw: int) -> tuple[int, int]:
    """The guide's push/pop pseudocode with the model's INVALID_NODE (all ones) and wrap: (new ADDR, return)."""
    inv, span = 0xFFFFFFFF, 4 * size_dw
    base, idx = (sa >> 18) << 2, (sa & 0xFFFF) % span

    def ok(d: int) -> bool:
        return d != inv and not (last != inv and d == last)
    for d in data[:3]:
        if ok(d):
            lds[base + idx] = d
            idx = (idx + 4) % span
        elif d == last:
            break
    if ok(data[3]):
        ret = data[3]
    else:
        ret = lds.get(base + idx, 0)
        lds[base + idx] = inv
        idx = (idx - 4) % span
    return (sa & ~0xFFFF & M32) | idx, ret


@pytest.mark.parametrize("code", [0, 1])
def test_bvh_stack_pushes_valid_nodes_and_pops_when_the_last_is_invalid(code: int) -> None:
    inv = 0xFFFFFFFF
    cases = [  # (ADDR, last node, DATA1[0..3])
        ((4 << 18) | 8, inv, [11, 12, inv, 13]),        # push 11, 12; return 13
        ((8 << 18) | 4, 7, [21, 7, 22, inv]),           # push 21, stop at the last node; pop
        ((12 << 18) | 0, inv, [inv, inv, inv, inv]),    # nothing pushed; pop an empty slot
        ((16 << 18) | 28, 5, [31, 32, 33, 5]),          # push three, wrapping at 8 dwords; DATA1[3] is the last: pop
    ]
    w = wave()
    w.lds = np.zeros(1024, np.uint8)
    w.s[EXEC_LO] = 0xF
    ref: dict[int, int] = {}
    for lane, (sa, last, data) in enumerate(cases):
        w.v[1, lane], w.v[3, lane] = sa, last
        for i, d in enumerate(data):
            w.v[4 + i, lane] = d
        base = (sa >> 18) << 2
        for k in range(16):                       # recognisable old stack contents
            ref[base + 4 * k] = 0x100 * lane + k
            lds_put(w, base + 4 * k, 0x100 * lane + k)
    go(w, f"ds_bvh_stack_rtn_b32 v2, v1, v3, v[4:7] offset:{code << 12}")
    for lane, (sa, last, data) in enumerate(cases):
        addr, ret = _bvh_ref(ref, sa, last, data, 8 << code)
        assert (int(w.v[1, lane]), int(w.v[2, lane])) == (addr, ret), lane
    assert all(lds_get(w, a) == x for a, x in ref.items())


# ---- LDSDIR --------------------------------------------------------------------------------------------------------

def test_ldsdir_fields_are_what_llvm_mc_encodes() -> None:
    from tinyhw.formats.amdisa import decode_at

    for text, want in (("lds_param_load v7, attr13.w wait_vdst:5", {"vdst": 7, "attr": 13, "attrchan": 3,
                                                                      "waitvdst": 5}),
                       ("lds_direct_load v200 wait_vdst:1", {"vdst": 200, "waitvdst": 1})):
        inst = decode_at(struct.pack("<I", *asm(text)) + bytes(16), 0, "gfx11")
        assert inst.encoding == "LDSDIR" and inst.mnemonic == text.split()[0]
        assert {k: inst.fields[k] for k in want} == want, text


@pytest.mark.parametrize(("kind", "want"), [(0, 0xF4), (1, 0xF3F4), (2, 0xF1F2F3F4), (4, 0xFFFFFFF4),
                                            (5, 0xFFFFF3F4)])
def test_lds_direct_load_types_and_exec_per_quad(kind: int, want: int) -> None:
    w = wave()
    lds_put(w, 40, 0xF1F2F3F4)
    w.s[M0] = kind << 16 | 40
    w.s[EXEC_LO] = 1 << 4 | 1 << 22                 # quads 1 and 5
    w.v[1] = 7
    go(w, "lds_direct_load v1 wait_vdst:2")
    quads = {1, 5}
    assert [int(x) for x in w.v[1]] == [want if lane // 4 in quads else 7 for lane in range(32)]


def test_lds_direct_load_reserved_type_faults() -> None:
    w = wave()
    w.s[M0] = 3 << 16
    with pytest.raises(ShaderFault, match="reserved"):
        go(w, "lds_direct_load v1")


@pytest.mark.parametrize(("attr", "chan"), [(0, 0), (2, 1), (1, 3)])
def test_lds_param_load_reads_p0_p10_p20_per_quad(attr: int, chan: int) -> None:
    w = wave()
    w.lds = np.zeros(4096, np.uint8)
    for i in range(800):
        lds_put(w, 128 + 4 * i, 0x5000 + i)
    mask = 0b0110_0100                               # quads 2, 5 and 6 begin new primitives
    w.s[M0] = (mask >> 1) << 16 | 128
    w.s[EXEC_LO] = 0xFFFF_0F0F & ~0xF000_0000        # quads 0, 2, 4, 5, 6 active
    w.v[1] = 0xAB
    go(w, f"lds_param_load v1, attr{attr}.{'xyzw'[chan]}")
    prims = 1 + bin(mask >> 1).count("1")
    for lane in range(32):
        q, j = divmod(lane, 4)
        if not (w.s[EXEC_LO] >> (4 * q)) & 0xF:
            assert w.v[1, lane] == 0xAB
            continue
        prim = bin(mask & ((2 << q) - 2)).count("1")
        want = 0x5000 + attr * prims * 12 + prim * 12 + 4 * j + chan if j < 3 else 0
        assert int(w.v[1, lane]) == want, lane


# ---- buffer loads to LDS -------------------------------------------------------------------------------------------

def _vsharp(w, base: int, nrec: int, stride: int = 0, fmt: int = 0) -> None:
    w.s[8], w.s[9], w.s[10] = base & M32, (base >> 32) | stride << 16, nrec
    w.s[11] = 3 << 28 | fmt << 12 | 0xFAC        # raw range check (OOB_SELECT 3), DST_SEL xyzw


@pytest.mark.parametrize(("op", "conv"), [
    ("b32", lambda b: struct.unpack("<I", b[:4])[0]), ("u8", lambda b: b[0]),
    ("i8", lambda b: b[0] - 256 * (b[0] >> 7) & M32), ("u16", lambda b: struct.unpack("<H", b[:2])[0]),
    ("i16", lambda b: struct.unpack("<h", b[:2])[0] & M32)])
def test_buffer_load_lds_puts_the_loaded_dword_at_m0_plus_4_lane(op: str, conv) -> None:
    mem = FlatMemory(BASE, 1 << 16)
    data = bytes((i * 37 + 0x81) & 0xFF for i in range(256))
    mem.write(BASE + 0x100, data)
    w = wave(mem=mem)
    _vsharp(w, BASE + 0x100, 200)                  # bytes from 200 on are out of range
    w.s[EXEC_LO] = 0xFFFF_FFF7
    w.s[M0] = 0x10000 | 24                         # M0[15:0] = 24
    w.v[1] = [8 * i for i in range(32)]
    keep = w.v.copy()
    go(w, f"buffer_load_lds_{op} v1, s[8:11], 0 offen offset:4")
    size = {"b32": 4, "u8": 1, "i8": 1, "u16": 2, "i16": 2}[op]
    for lane in range(32):
        at = 24 + 4 + 4 * lane
        o = 8 * lane + 4
        want = conv(data[o:o + 4]) if o + size <= 200 else 0
        assert lds_get(w, at) == (want if lane != 3 else 0), lane
    assert (w.v == keep).all()                     # no VGPR is written


def test_buffer_load_lds_format_x_converts_through_the_v_sharp() -> None:
    mem = FlatMemory(BASE, 1 << 16)
    mem.write(BASE, struct.pack("<8H", *[0, 65535, 32768, 1, 9, 10, 11, 12]))
    w = wave(mem=mem)
    _vsharp(w, BASE, 16, fmt=7)                    # BUF_FMT_16_UNORM
    w.s[EXEC_LO] = 0xF
    w.s[M0] = 0
    w.v[1] = [2 * i for i in range(32)]
    go(w, "buffer_load_lds_format_x v1, s[8:11], 0 offen")
    assert [lds_get(w, 4 * i) for i in range(4)] == [f32(x / 65535) for x in (0, 65535, 32768, 1)]


# ---- scalar control and messages -----------------------------------------------------------------------------------

def test_rfe_jumps_to_s0() -> None:
    w = wave()
    w.s[4], w.s[5] = 0x1234_5678, 0x9A
    assert go(w, "s_rfe_b64 s[4:5]") == 0x9A_1234_5678


@pytest.mark.parametrize(("msg", "wide"), [(m, b) for m in ("MSG_RTN_GET_DOORBELL", "MSG_RTN_GET_DDID",
                                                            "MSG_RTN_GET_TMA", "MSG_RTN_GET_TBA",
                                                            "MSG_RTN_GET_REALTIME") for b in (0, 1)])
def test_sendmsg_rtn_values(msg: str, wide: int) -> None:
    w = wave()
    w.hw = rare.HwInfo(doorbell=0x2A, dispatch_id=0x1234_5678)
    w.s[2], w.s[3] = 0xAAAA, 0xBBBB
    dst = "s[2:3]" if wide else "s2"
    go(w, f"s_sendmsg_rtn_b{64 if wide else 32} {dst}, sendmsg({msg})")
    want = {"MSG_RTN_GET_DOORBELL": 0x2A, "MSG_RTN_GET_DDID": 0x1234_5678, "MSG_RTN_GET_TMA": 0,
            "MSG_RTN_GET_TBA": 0, "MSG_RTN_GET_REALTIME": 1}[msg]
    assert (int(w.s[2]), int(w.s[3])) == (want & M32, want >> 32 if wide else 0xBBBB)
    if msg == "MSG_RTN_GET_REALTIME":               # the clock moves on with every read
        go(w, f"s_sendmsg_rtn_b{64 if wide else 32} {dst}, sendmsg({msg})")
        assert w.s[2] == 2


def test_sendmsg_rtn_doorbell_without_a_queue_is_0bad_and_unknown_ids_fault() -> None:
    w = wave()
    go(w, "s_sendmsg_rtn_b32 s2, sendmsg(MSG_RTN_GET_DOORBELL)")
    assert w.s[2] == 0x0BAD
    for msg in ("MSG_RTN_SAVE_WAVE", "0x7", "0x86"):     # (0xff would be the literal operand)
        with pytest.raises(ShaderFault, match="s_sendmsg_rtn message"):
            go(w, f"s_sendmsg_rtn_b32 s2, sendmsg({msg})")


def test_halts_stop_the_dispatch_and_setkill_ends_the_wave() -> None:
    w = wave()
    for text in ("s_sethalt 1", "s_sethalt 5", "s_sendmsghalt sendmsg(MSG_INTERRUPT)"):
        with pytest.raises(ShaderFault, match="halted"):
            go(w, text)
    assert go(w, "s_sethalt 4") is None
    assert go(w, "s_setkill 1") == END


def _subvector(begin: bool, lo: int, hi: int, d: int) -> tuple[int, int, int, bool]:
    """The RDNA2 guide's S_SUBVECTOR_LOOP_BEGIN/END: (EXEC_LO, EXEC_HI, D, jumped)."""
    if begin:
        if lo == 0 and hi == 0:
            return lo, hi, d, True
        if lo == 0:
            return lo, hi, lo, False
        return lo, 0, hi, False
    if hi != 0:
        return d, hi, d, False
    if d == 0:
        return lo, hi, d, False
    return 0, d, lo, True


@pytest.mark.parametrize("begin", [True, False])
def test_subvector_loop_begin_and_end(begin: bool) -> None:
    name = "s_subvector_loop_begin s2, 3" if begin else "s_subvector_loop_end s2, -3"
    target = PC + 4 + 4 * (3 if begin else -3)
    for lo, hi, d in ((0, 0, 9), (0, 0xF0, 9), (0xF, 0xF0, 9), (0xF, 0, 0), (0xF, 0, 0x30), (0, 0xF, 0x30)):
        w = wave()
        w.s[EXEC_LO], w.s[EXEC_HI], w.s[2] = lo, hi, d
        r = go(w, name)
        elo, ehi, ed, jump = _subvector(begin, lo, hi, d)
        assert (int(w.s[EXEC_LO]), int(w.s[EXEC_HI]), int(w.s[2])) == (elo, ehi, ed), (lo, hi, d)
        assert r == (target if jump else None)


# ---- hardware registers --------------------------------------------------------------------------------------------

def test_getreg_of_every_hardware_register() -> None:
    w = wave()
    w.v = np.zeros((48, 32), np.uint32)             # 48 VGPRs: GPR_ALLOC.VGPR_SIZE = 48 / 4 - 1
    w.lds = np.zeros(3 * 512, np.uint8)             # 1536 bytes: LDS_ALLOC.LDS_SIZE = 1536 >> 8
    w.index = 3
    w.hw = rare.HwInfo(sh_mem_bases=0x0005_0007, waves_per_group=2)
    w.scratch, w.scratch_size = 0x12_3456_7800, 4096
    w.scc, w.s[VCC] = 1, 0
    w.s[EXEC_LO] = 0
    want = {
        "HW_REG_STATUS": 1 | 1 << 9 | 1 << 10 | 1 << 11 | 1 << 16 | 1 << 29, "HW_REG_TRAPSTS": 0,
        "HW_REG_GPR_ALLOC": 11 << 12, "HW_REG_LDS_ALLOC": 6 << 12, "HW_REG_IB_STS": 0,
        "HW_REG_SH_MEM_BASES": 0x0005_0007, "HW_REG_FLAT_SCR_LO": 0x3456_7800, "HW_REG_FLAT_SCR_HI": 0x12,
        "HW_REG_HW_ID1": 3 | 1 << 29, "HW_REG_HW_ID2": 1 << 8, "14": 0,
    }
    for name, value in want.items():
        go(w, f"s_getreg_b32 s2, hwreg({name})")
        assert w.s[2] == value, name
    go(w, "s_getreg_b32 s2, hwreg(HW_REG_STATUS, 9, 3)")          # EXECZ, VCCZ, IN_WG
    assert w.s[2] == 0b111
    go(w, "s_getreg_b32 s2, hwreg(HW_REG_SHADER_CYCLES)")
    first = int(w.s[2])
    go(w, "s_getreg_b32 s3, hwreg(HW_REG_SHADER_CYCLES)")
    assert 0 < first < w.s[3] < 1 << 20


@pytest.mark.parametrize(("vgprs", "lds_bytes"), [(8, 0), (24, 256), (256, 65536), (96, 64 * 1024 - 512)])
def test_gpr_and_lds_alloc_read_back_as_linux_gfx11_trap_handler_decodes_them(vgprs: int, lds_bytes: int) -> None:
    """Linux's ``cwsr_trap_handler_gfx10.asm`` (gfx11 path) saves (VGPR_SIZE + 1) * 4 VGPRs (GPR_ALLOC bits 19:12)
    and LDS_SIZE << 8 bytes of LDS (LDS_ALLOC bits 20:12): the fields must read back so it saves exactly the
    wave's VGPRs and the workgroup's LDS."""
    w = wave()
    w.v = np.zeros((vgprs, 32), np.uint32)
    w.lds = np.zeros(lds_bytes, np.uint8)
    go(w, "s_getreg_b32 s2, hwreg(HW_REG_GPR_ALLOC, 12, 8)")
    go(w, "s_getreg_b32 s3, hwreg(HW_REG_LDS_ALLOC, 12, 9)")
    assert ((int(w.s[2]) + 1) * 4, int(w.s[3]) << 8) == (vgprs, lds_bytes)


def test_setreg_writes_trapsts_and_ignores_read_only_registers() -> None:
    w = wave()
    w.s[4] = 0x1FF
    go(w, "s_setreg_b32 hwreg(HW_REG_TRAPSTS, 0, 9), s4")
    go(w, "s_setreg_imm32_b32 hwreg(HW_REG_TRAPSTS, 10, 1), 1")
    go(w, "s_getreg_b32 s2, hwreg(HW_REG_TRAPSTS)")
    assert w.s[2] == 0x1FF | 1 << 10
    for reg in ("HW_REG_STATUS", "HW_REG_HW_ID1", "HW_REG_FLAT_SCR_LO", "HW_REG_SH_MEM_BASES", "14"):
        before = rare.hwreg_value(w, 14 if reg == "14" else asm_id(reg))
        go(w, f"s_setreg_imm32_b32 hwreg({reg}), 0xffffffff")
        assert rare.hwreg_value(w, 14 if reg == "14" else asm_id(reg)) == before, reg


def asm_id(name: str) -> int:
    """The register id llvm-mc-19 encodes for hwreg(``name``)."""
    return asm(f"s_getreg_b32 s2, hwreg({name})")[0] & 0x3F


def test_reserved_and_snapshot_registers_are_refused() -> None:
    w = wave()
    for reg in ("52", "HW_REG_PERF_SNAPSHOT_DATA", "HW_REG_PERF_SNAPSHOT_PC_LO"):
        with pytest.raises(Unimplemented, match="hardware register"):
            go(w, f"s_getreg_b32 s2, hwreg({reg})")


def test_aperture_operands_read_sh_mem_bases() -> None:
    w = wave()
    w.hw = rare.HwInfo(sh_mem_bases=0x1234_ABCD)
    go(w, "s_mov_b64 s[2:3], src_shared_base")
    go(w, "s_mov_b64 s[4:5], src_private_limit")
    go(w, "s_mov_b32 s6, src_shared_limit")
    go(w, "v_mov_b32 v1, src_private_base")
    assert [int(w.s[i]) for i in range(2, 7)] == [0, 0x1234 << 16, M32, 0xABCD << 16, M32]
    assert (w.v[1] == 0).all()
    w.hw = None                                     # the default: tinygrad's SH_MEM_BASES (shared 1, private 2)
    go(w, "s_mov_b64 s[2:3], src_private_base")
    assert (int(w.s[2]), int(w.s[3])) == (0, 2 << 16)


# ---- FLAT into the apertures ---------------------------------------------------------------------------------------

SHARED, PRIVATE = 1 << 48, 2 << 48


def _flat_wave() -> tuple:
    mem = FlatMemory(BASE, 1 << 16)
    w = wave(mem=mem)
    w.lds = np.zeros(512, np.uint8)
    w.scratch, w.scratch_size = BASE + 0x8000, 128 * 32    # 128 private bytes per lane
    return mem, w


def _addr(w, lane: int, a: int) -> None:
    w.v[2, lane], w.v[3, lane] = a & M32, a >> 32


def _private(w, lane: int, p: int) -> int:
    """The VA of private byte ``p`` of ``lane`` (the SCRATCH swizzle)."""
    return w.scratch + (p // 4) * 128 + 4 * lane + p % 4


def test_flat_load_and_store_reach_global_lds_and_private_memory() -> None:
    mem, w = _flat_wave()
    for lane in range(32):                 # lanes 0..9 global, 10..19 LDS, 20..31 private
        if lane < 10:
            mem.write(BASE + 0x100 + 8 * lane, struct.pack("<2I", 0xA000 + lane, 0xB000 + lane))
            _addr(w, lane, BASE + 0x100 + 8 * lane)
        elif lane < 20:
            lds_put(w, 8 * lane, 0xC000 + lane, 0xD000 + lane)
            _addr(w, lane, SHARED + 8 * lane)
        else:
            p = 8 * (lane - 20)
            mem.write(_private(w, lane, p), struct.pack("<I", 0xE000 + lane))
            mem.write(_private(w, lane, p + 4), struct.pack("<I", 0xF000 + lane))
            _addr(w, lane, PRIVATE + p)
    go(w, "flat_load_b64 v[4:5], v[2:3]")
    for lane in range(32):
        hi = 0xA000 if lane < 10 else 0xC000 if lane < 20 else 0xE000
        assert (int(w.v[4, lane]), int(w.v[5, lane])) == (hi + lane, hi + 0x1000 + lane), lane
    w.v[6] = [0x7700 + i for i in range(32)]
    go(w, "flat_store_b32 v[2:3], v6 offset:4")
    for lane in range(32):
        if lane < 10:
            got = struct.unpack("<I", mem.read(BASE + 0x100 + 8 * lane + 4, 4))[0]
        elif lane < 20:
            got = lds_get(w, 8 * lane + 4)
        else:
            got = struct.unpack("<I", mem.read(_private(w, lane, 8 * (lane - 20) + 4), 4))[0]
        assert got == 0x7700 + lane, lane


def test_flat_aperture_test_uses_the_vgpr_address_without_the_offset() -> None:
    """RDNA4 guide, Flat Addressing: "The aperture test uses only the base address, not the IOFFSET"; the private
    address is then addr[31:0] of VGPR + IOFFSET. A VGPR address at the top of the private aperture plus offset 8
    stays private (at private byte 4), though VGPR + 8 lies past the aperture."""
    mem, w = _flat_wave()
    w.s[EXEC_LO] = 1
    mem.write(_private(w, 0, 4), struct.pack("<I", 0x600D))
    _addr(w, 0, PRIVATE + 0xFFFF_FFFC)
    go(w, "flat_load_b32 v4, v[2:3] offset:8")
    assert int(w.v[4, 0]) == 0x600D


def test_flat_atomics_on_lds_with_and_without_return() -> None:
    mem, w = _flat_wave()
    w.s[EXEC_LO] = 0xFF
    lds_put(w, 64, 100)
    for lane in range(8):
        _addr(w, lane, SHARED + 64)
    w.v[6] = [lane + 1 for lane in range(32)]
    w.v[4] = 0x55
    go(w, "flat_atomic_add_u32 v4, v[2:3], v6 glc")
    olds = [100 + sum(range(1, lane + 1)) for lane in range(8)]       # lane order
    assert [int(x) for x in w.v[4, :8]] == olds and lds_get(w, 64) == 100 + 36
    w.v[0] = 0x1234                                                   # VDST (0) of a swap without GLC
    go(w, "flat_atomic_swap_b32 v[2:3], v6")                          # no GLC: no VGPR is written
    assert [int(x) for x in w.v[4, :8]] == olds and lds_get(w, 64) == 8 and (w.v[0] == 0x1234).all()
    w.v[7] = 8                                                        # cmpswap: DATA = new, DATA + 1 = compare
    w.v[6] = 0x99
    go(w, "flat_atomic_cmpswap_b32 v4, v[2:3], v[6:7] glc")
    assert lds_get(w, 64) == 0x99 and int(w.v[4, 0]) == 8


def test_flat_atomics_on_private_memory_use_the_lanes_own_bytes() -> None:
    mem, w = _flat_wave()
    w.s[EXEC_LO] = 0b1110
    for lane in range(4):
        _addr(w, lane, PRIVATE + 16)
        mem.write(_private(w, lane, 16), struct.pack("<I", 1000 * lane))
        mem.write(_private(w, lane, 20), struct.pack("<I", 7 + lane))
    w.v[6] = [lane + 1 for lane in range(32)]
    w.v[4] = 0x55
    go(w, "flat_atomic_add_u32 v4, v[2:3], v6 glc")
    for lane in range(4):
        got = struct.unpack("<I", mem.read(_private(w, lane, 16), 4))[0]
        assert got == 1000 * lane + (lane + 1 if lane else 0)
        assert w.v[4, lane] == (1000 * lane if lane else 0x55)
    w.v[7] = 1                                    # 64-bit add of 2^32 + lane + 1: its dwords lie 128 bytes apart
    go(w, "flat_atomic_add_u64 v[2:3], v[6:7]")
    for lane in (1, 2, 3):
        lo = struct.unpack("<I", mem.read(_private(w, lane, 16), 4))[0]
        hi = struct.unpack("<I", mem.read(_private(w, lane, 20), 4))[0]
        assert (lo, hi) == (1000 * lane + 2 * (lane + 1), 7 + lane + 1)


def test_flat_hole_faults() -> None:
    mem, w = _flat_wave()
    w.s[EXEC_LO] = 1
    _addr(w, 0, 3 << 48)                                              # no aperture, not canonical
    with pytest.raises(ShaderFault, match="MEMVIOL"):
        go(w, "flat_load_b32 v4, v[2:3]")
    w.hw = rare.HwInfo(sh_mem_bases=0)                                # both apertures disabled: a hole
    _addr(w, 0, SHARED)
    with pytest.raises(ShaderFault, match="MEMVIOL"):
        go(w, "flat_load_b32 v4, v[2:3]")


# ---- a clang-19 kernel with generic pointers -----------------------------------------------------------------------

KERNEL = r"""
#define get_global_id(d) (__builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x())
#define get_local_id(d) __builtin_amdgcn_workitem_id_x()
#define barrier(f) do { __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup"); __builtin_amdgcn_s_barrier(); \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup"); } while (0)
__attribute__((noinline)) void bump(int *p, int n, int v) { for (int i = 0; i < n; i++) p[i] = p[i] * 3 + v + i; }
__attribute__((noinline)) int addat(int *p, int v) {
  return __opencl_atomic_fetch_add((atomic_int *)p, v, memory_order_relaxed, memory_scope_work_group); }
__kernel void k(__global int *out, __global const int *in) {
  __local int sh[64];
  int priv[8];
  int g = get_global_id(0), l = get_local_id(0);
  for (int i = 0; i < 8; i++) priv[i] = in[g] + i;
  sh[l] = in[g] * 2;
  barrier(CLK_LOCAL_MEM_FENCE);
  bump(priv, 8, l);
  bump(&sh[l], 1, 7);
  barrier(CLK_LOCAL_MEM_FENCE);
  int old = addat(&sh[0], 1);
  barrier(CLK_LOCAL_MEM_FENCE);
  int s = 0; for (int i = 0; i < 8; i++) s += priv[i] * (i + 1);
  out[g] = s + sh[l] + (old >= 0) + sh[0];
}
"""


@pytest.mark.skipif(not shutil.which("clang-19") or not shutil.which("ld.lld-19"), reason="clang-19/ld.lld-19 needed")
def test_clang_kernel_with_generic_pointers_to_private_and_local(tmp_path: Path) -> None:
    from tinyhw.mocks.rdna3 import dispatch_regs, load_kernel, run_dispatch, scratch_ring_bytes

    cl, obj, co = tmp_path / "k.cl", tmp_path / "k.o", tmp_path / "k.co"
    cl.write_text(KERNEL)
    subprocess.run(["clang-19", "-x", "cl", "-cl-std=CL2.0", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100",
                    "-nogpulib", "-O2", "-mllvm", "-disable-promote-alloca-to-lds", "-c", str(cl), "-o", str(obj)],
                   check=True, capture_output=True)
    subprocess.run(["ld.lld-19", "-shared", "--build-id=none", str(obj), "-o", str(co)], check=True,
                   capture_output=True)
    mem = FlatMemory(0x7F00_0000_0000, 4 << 20)
    lk = load_kernel(co.read_bytes(), mem)
    block, groups = 64, 2
    n = block * groups
    ins = [(i * 7919) % 1000 + 1 for i in range(n)]
    src = mem.alloc(struct.pack(f"<{n}i", *ins))
    out = mem.alloc(bytes(4 * n))
    kernarg = mem.alloc(struct.pack("<2Q", out, src) + bytes(256), align=64)
    ring = scratch_ring_bytes(lk.kd, (block, 1, 1))
    regs = dispatch_regs(lk.kd, lk.entry, kernarg, (groups, 1, 1), (block, 1, 1), scratch=mem.alloc(ring))
    res = run_dispatch(regs, mem)
    got = struct.unpack(f"<{n}i", mem.read(out, 4 * n))
    want = []
    for g in range(n):
        gr, lane = divmod(g, block)
        sh = [ins[gr * block + j] * 2 * 3 + 7 for j in range(block)]
        sh[0] += block
        s = sum(((ins[g] + i) * 3 + lane + i) * (i + 1) for i in range(8))
        want.append((s + sh[lane] + 1 + sh[0] + (1 << 31)) % (1 << 32) - (1 << 31))
    assert list(got) == want
    ran = res.per_mnemonic       # what the test is for: generic accesses through both apertures and scratch
    for m in ("flat_load_b32", "flat_store_b32", "flat_atomic_add_u32", "scratch_store_b128", "s_mov_b64"):
        assert ran.get(m), m
    assert dataclasses.replace(regs).sh_mem_bases == 0x0001_0002


def test_a_dispatch_hands_its_sh_mem_bases_and_ids_to_every_wave() -> None:
    """run_dispatch gives each wave the dispatch's SH_MEM_BASES, doorbell and dispatch id (DispatchRegs), its index in
    the workgroup (HW_ID1.WAVE_ID) and whether it shares the workgroup (STATUS.IN_WG)."""
    from tinyhw.mocks.rdna3 import DispatchRegs, run_dispatch

    lines = ["s_getreg_b32 s2, hwreg(HW_REG_SH_MEM_BASES)", "s_mov_b64 s[4:5], src_shared_base",
             "s_sendmsg_rtn_b32 s6, sendmsg(MSG_RTN_GET_DOORBELL)", "s_sendmsg_rtn_b32 s7, sendmsg(MSG_RTN_GET_DDID)",
             "s_getreg_b32 s8, hwreg(HW_REG_HW_ID1, 0, 5)", "s_getreg_b32 s9, hwreg(HW_REG_STATUS, 11, 1)",
             "s_endpgm"]
    words = [x for t in lines for x in asm(t)]
    mem = FlatMemory(BASE, 1 << 16)
    entry = mem.alloc(struct.pack(f"<{len(words)}I", *words) + struct.pack("<4I", *[0xBF9F0000] * 4), align=256)
    regs = DispatchRegs(pgm_lo=entry >> 8 & M32, pgm_hi=entry >> 40 & 0xFF, rsrc1=1, rsrc2=1 << 7,
                        num_thread=(64, 1, 1), dim=(2, 1, 1), sh_mem_bases=0x0005_0007, doorbell=0x33, dispatch_id=9)
    seen: list[list[int]] = []
    run_dispatch(regs, mem, on_wave_end=lambda w: seen.append([int(w.s[i]) for i in range(2, 10)]))
    assert len(seen) == 4
    for i, s in enumerate(seen):
        assert s == [0x0005_0007, 0, 0, 5 << 16, 0x33, 9, i % 2, 1], i   # s3 is not written
