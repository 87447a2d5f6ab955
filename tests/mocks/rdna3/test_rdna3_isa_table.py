"""Table tests: each integer SALU/VALU instruction against the ISA reference's definition, on random and edge inputs.

One table per encoding (SOP2, SOP1, SOPC, VOP2, VOP3 two- and three-source, VOP3 64-bit shifts, VOPC). Every
row is the guide's pseudocode for that opcode written again here in plain Python integers (32 lanes of a VALU
instruction are 32 cases; a scalar instruction runs once per input pair), never the core's own code. The inputs
mix edge values (0, 1, the sign bit, all ones, 16- and 24-bit boundaries) with seeded random words.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Callable

import pytest
from rdna3isa import run, sop1, sop2, sopc, v, vop2, vop3, vopc, wave

M32, M64 = (1 << 32) - 1, (1 << 64) - 1
VCC = 106
EDGES = [0, 1, 2, 31, 32, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 0x7FFFFF, 0x800000, 0xFFFFFF,
         0x7FFFFFFF, 0x80000000, 0xFFFFFFFE, 0xFFFFFFFF, 0x12345678, 0xDEADBEEF]


def _words(seed: int, n: int = 32) -> list[int]:
    rng = random.Random(seed)
    out = [rng.choice(EDGES) if rng.random() < 0.4 else rng.getrandbits(32) for _ in range(n)]
    return out


def sx(x: int, bits: int) -> int:
    """``x``'s low ``bits`` bits as a signed integer."""
    x &= (1 << bits) - 1
    return x - (1 << bits) if x >> (bits - 1) else x


def popc(x: int) -> int:
    return bin(x).count("1")


def _bfe_u(x: int, off: int, width: int, bits: int = 32) -> int:
    return (x >> off) & ((1 << width) - 1) & ((1 << bits) - 1)


def _bfe_i(x: int, off: int, width: int, bits: int = 32) -> int:
    """The guide's signed extract: S0 as a signed integer shifted right (arithmetic), masked, sign-extended."""
    return sx((sx(x, bits) >> off) & ((1 << width) - 1), width) & ((1 << bits) - 1) if width else 0


def _scc(d: int) -> tuple[int, int]:
    """A result and the SCC of the instructions that set it to result != 0."""
    return d, int(d != 0)


# ---- SOP2 (32-bit): (S0, S1, SCC in) -> (D, SCC out or None = unchanged) ------------------------------------------

def _sat_scc_add(a: int, b: int) -> int:
    return int(sx(a, 32) + sx(b, 32) != sx(a + b, 32))


SOP2_32: dict[str, Callable[[int, int, int], tuple[int, int | None]]] = {
    "s_add_u32": lambda a, b, c: ((a + b) & M32, int(a + b > M32)),
    "s_sub_u32": lambda a, b, c: ((a - b) & M32, int(b > a)),
    "s_add_i32": lambda a, b, c: ((a + b) & M32, _sat_scc_add(a, b)),
    "s_sub_i32": lambda a, b, c: ((a - b) & M32, int(sx(a, 32) - sx(b, 32) != sx(a - b, 32))),
    "s_addc_u32": lambda a, b, c: ((a + b + c) & M32, int(a + b + c > M32)),
    "s_subb_u32": lambda a, b, c: ((a - b - c) & M32, int(b + c > a)),
    "s_absdiff_i32": lambda a, b, c: (abs(sx(a, 32) - sx(b, 32)) & M32, int(abs(sx(a, 32) - sx(b, 32)) & M32 != 0)),
    "s_lshl_b32": lambda a, b, c: (a << (b & 31) & M32, int(a << (b & 31) & M32 != 0)),
    "s_lshr_b32": lambda a, b, c: (a >> (b & 31), int(a >> (b & 31) != 0)),
    "s_ashr_i32": lambda a, b, c: (sx(a, 32) >> (b & 31) & M32, int(sx(a, 32) >> (b & 31) != 0)),
    "s_lshl1_add_u32": lambda a, b, c: (((a << 1) + b) & M32, int((a << 1) + b > M32)),
    "s_lshl2_add_u32": lambda a, b, c: (((a << 2) + b) & M32, int((a << 2) + b > M32)),
    "s_lshl3_add_u32": lambda a, b, c: (((a << 3) + b) & M32, int((a << 3) + b > M32)),
    "s_lshl4_add_u32": lambda a, b, c: (((a << 4) + b) & M32, int((a << 4) + b > M32)),
    "s_min_i32": lambda a, b, c: (a if sx(a, 32) < sx(b, 32) else b, int(sx(a, 32) < sx(b, 32))),
    "s_min_u32": lambda a, b, c: (a if a < b else b, int(a < b)),
    "s_max_i32": lambda a, b, c: (a if sx(a, 32) >= sx(b, 32) else b, int(sx(a, 32) >= sx(b, 32))),
    "s_max_u32": lambda a, b, c: (a if a >= b else b, int(a >= b)),
    "s_and_b32": lambda a, b, c: (a & b, int(a & b != 0)),
    "s_or_b32": lambda a, b, c: (a | b, int(a | b != 0)),
    "s_xor_b32": lambda a, b, c: (a ^ b, int(a ^ b != 0)),
    "s_nand_b32": lambda a, b, c: (~(a & b) & M32, int(~(a & b) & M32 != 0)),
    "s_nor_b32": lambda a, b, c: (~(a | b) & M32, int(~(a | b) & M32 != 0)),
    "s_xnor_b32": lambda a, b, c: (~(a ^ b) & M32, int(~(a ^ b) & M32 != 0)),
    "s_and_not1_b32": lambda a, b, c: (a & ~b & M32, int(a & ~b & M32 != 0)),
    "s_or_not1_b32": lambda a, b, c: ((a | ~b) & M32, int((a | ~b) & M32 != 0)),
    "s_bfe_u32": lambda a, b, c: (_bfe_u(a, b & 31, b >> 16 & 0x7F), int(_bfe_u(a, b & 31, b >> 16 & 0x7F) != 0)),
    "s_bfe_i32": lambda a, b, c: (_bfe_i(a, b & 31, b >> 16 & 0x7F), int(_bfe_i(a, b & 31, b >> 16 & 0x7F) != 0)),
    "s_bfm_b32": lambda a, b, c: ((((1 << (a & 31)) - 1) << (b & 31)) & M32, None),
    "s_mul_i32": lambda a, b, c: ((sx(a, 32) * sx(b, 32)) & M32, None),
    "s_mul_hi_u32": lambda a, b, c: ((a * b) >> 32, None),
    "s_mul_hi_i32": lambda a, b, c: ((sx(a, 32) * sx(b, 32)) >> 32 & M32, None),
    "s_cselect_b32": lambda a, b, c: (a if c else b, None),
    "s_pack_ll_b32_b16": lambda a, b, c: ((b & 0xFFFF) << 16 | a & 0xFFFF, None),
    "s_pack_lh_b32_b16": lambda a, b, c: (b & 0xFFFF0000 | a & 0xFFFF, None),
    "s_pack_hh_b32_b16": lambda a, b, c: (b & 0xFFFF0000 | a >> 16, None),
    "s_pack_hl_b32_b16": lambda a, b, c: ((b & 0xFFFF) << 16 | a >> 16, None),
}

# 64-bit: S0 64-bit, S1 64-bit (or a 32-bit shift count / bfe control read from its low word)
SOP2_64: dict[str, Callable[[int, int, int], tuple[int, int | None]]] = {
    "s_lshl_b64": lambda a, b, c: (a << (b & 63) & M64, int(a << (b & 63) & M64 != 0)),
    "s_lshr_b64": lambda a, b, c: (a >> (b & 63), int(a >> (b & 63) != 0)),
    "s_ashr_i64": lambda a, b, c: (sx(a, 64) >> (b & 63) & M64, int(sx(a, 64) >> (b & 63) != 0)),
    "s_and_b64": lambda a, b, c: (a & b, int(a & b != 0)),
    "s_or_b64": lambda a, b, c: (a | b, int(a | b != 0)),
    "s_xor_b64": lambda a, b, c: (a ^ b, int(a ^ b != 0)),
    "s_nand_b64": lambda a, b, c: (~(a & b) & M64, int(~(a & b) & M64 != 0)),
    "s_nor_b64": lambda a, b, c: (~(a | b) & M64, int(~(a | b) & M64 != 0)),
    "s_xnor_b64": lambda a, b, c: (~(a ^ b) & M64, int(~(a ^ b) & M64 != 0)),
    "s_and_not1_b64": lambda a, b, c: (a & ~b & M64, int(a & ~b & M64 != 0)),
    "s_or_not1_b64": lambda a, b, c: ((a | ~b) & M64, int((a | ~b) & M64 != 0)),
    "s_bfe_u64": lambda a, b, c: _scc(_bfe_u(a, b & 63, b >> 16 & 0x7F, 64)),
    "s_bfe_i64": lambda a, b, c: _scc(_bfe_i(a, b & 63, b >> 16 & 0x7F, 64)),
    "s_bfm_b64": lambda a, b, c: ((((1 << (a & 63)) - 1) << (b & 63)) & M64, None),
    "s_cselect_b64": lambda a, b, c: (a if c else b, None),
}
SRC1_32_IN_64 = {"s_lshl_b64", "s_lshr_b64", "s_ashr_i64", "s_bfe_u64", "s_bfe_i64", "s_bfm_b64"}
SRC0_32_IN_64 = {"s_bfm_b64"}


def _pairs(seed: int, n: int = 48) -> list[tuple[int, int]]:
    a, b = _words(seed, n), _words(seed + 1, n)
    rng = random.Random(seed + 2)
    # bit-field controls with widths that stay within the operand (the guide leaves wider masks to C's shifts)
    return [(x, (y & 0xFF80FFFF | min(y >> 16 & 0x7F, 32) << 16) if rng.random() < 0.5
             else rng.randrange(32) | rng.randrange(33) << 16) for x, y in zip(a, b, strict=True)]


def _s64(w, n: int) -> int:
    return int(w.s[n]) | int(w.s[n + 1]) << 32


@pytest.mark.parametrize("name", sorted(SOP2_32))
def test_sop2_32(name: str) -> None:
    w = wave()
    for a, b in _pairs(zlib.crc32(name.encode())) + [(x, x) for x in EDGES]:
        for scc in (0, 1):
            w.s[2], w.s[3], w.s[10] = a, b, 0x5555AAAA
            w.scc = scc
            run(sop2(name, 10, 2, 3), w)
            d, sc = SOP2_32[name](a, b, scc)
            assert (int(w.s[10]), w.scc) == (d, scc if sc is None else sc), (name, hex(a), hex(b), scc)


@pytest.mark.parametrize("name", sorted(SOP2_64))
def test_sop2_64(name: str) -> None:
    w = wave()
    rng = random.Random(len(name))
    for a0, b0 in _pairs(7 + len(name)):
        a = a0 if name in SRC0_32_IN_64 else a0 | rng.choice([0, M32, rng.getrandbits(32)]) << 32
        if name in SRC1_32_IN_64:
            b = b0 & 0xFFFF003F if name.startswith("s_bfe") else b0
            b = b & ~(0x7F << 16) | min(b >> 16 & 0x7F, 64) << 16 if name.startswith("s_bfe") else b
        else:
            b = b0 | rng.getrandbits(32) << 32
        for scc in (0, 1):
            w.s[2], w.s[3], w.s[4], w.s[5] = a & M32, a >> 32, b & M32, b >> 32
            w.scc = scc
            run(sop2(name, 10, 2, 4), w)
            d, sc = SOP2_64[name](a, b & M32 if name in SRC1_32_IN_64 else b, scc)
            assert (_s64(w, 10), w.scc) == (d, scc if sc is None else sc), (name, hex(a), hex(b), scc)


# ---- SOP1: S0 -> (D, SCC out or None) -----------------------------------------------------------------------------

def _clz(x: int, bits: int) -> int:
    return bits - x.bit_length() if x else -1 & M32


def _ctz(x: int) -> int:
    return (x & -x).bit_length() - 1 if x else M32


def _cls(x: int, bits: int) -> int:
    s = sx(x, bits)
    if s in (0, -1):
        return M32
    return bits - (s if s >= 0 else ~s).bit_length()      # the guide: the index of the first bit unlike the sign


def _quadmask(x: int, bits: int) -> int:
    return sum(1 << i for i in range(bits // 4) if x >> (4 * i) & 0xF)


def _wqm(x: int, bits: int) -> int:
    return sum(0xF << (4 * i) for i in range(bits // 4) if x >> (4 * i) & 0xF)


SOP1_32: dict[str, Callable[[int], tuple[int, int | None]]] = {
    "s_mov_b32": lambda a: (a, None),
    "s_brev_b32": lambda a: (int(f"{a:032b}"[::-1], 2), None),
    "s_ctz_i32_b32": lambda a: (_ctz(a), None),
    "s_clz_i32_u32": lambda a: (_clz(a, 32), None),
    "s_cls_i32": lambda a: (_cls(a, 32), None),
    "s_sext_i32_i8": lambda a: (sx(a, 8) & M32, None),
    "s_sext_i32_i16": lambda a: (sx(a, 16) & M32, None),
    "s_abs_i32": lambda a: (abs(sx(a, 32)) & M32, int(abs(sx(a, 32)) & M32 != 0)),
    "s_bcnt0_i32_b32": lambda a: (32 - popc(a), int(32 - popc(a) != 0)),
    "s_bcnt1_i32_b32": lambda a: (popc(a), int(popc(a) != 0)),
    "s_quadmask_b32": lambda a: (_quadmask(a, 32), int(_quadmask(a, 32) != 0)),
    "s_wqm_b32": lambda a: (_wqm(a, 32), int(_wqm(a, 32) != 0)),
    "s_not_b32": lambda a: (~a & M32, int(~a & M32 != 0)),
}
SOP1_64: dict[str, Callable[[int], tuple[int, int | None]]] = {
    "s_mov_b64": lambda a: (a, None),
    "s_brev_b64": lambda a: (int(f"{a:064b}"[::-1], 2), None),
    "s_quadmask_b64": lambda a: (_quadmask(a, 64), int(_quadmask(a, 64) != 0)),
    "s_wqm_b64": lambda a: (_wqm(a, 64), int(_wqm(a, 64) != 0)),
    "s_not_b64": lambda a: (~a & M64, int(~a & M64 != 0)),
    "s_bitreplicate_b64_b32": lambda a: (sum(3 << (2 * i) for i in range(32) if a >> i & 1), None),
}
# 64-bit source, 32-bit result
SOP1_64_TO_32: dict[str, Callable[[int], tuple[int, int | None]]] = {
    "s_ctz_i32_b64": lambda a: (_ctz(a) if a else M32, None),
    "s_clz_i32_u64": lambda a: (_clz(a, 64), None),
    "s_cls_i32_i64": lambda a: (_cls(a, 64), None),
    "s_bcnt0_i32_b64": lambda a: (64 - popc(a), int(64 - popc(a) != 0)),
    "s_bcnt1_i32_b64": lambda a: (popc(a), int(popc(a) != 0)),
}


@pytest.mark.parametrize("name", sorted(SOP1_32) + sorted(SOP1_64) + sorted(SOP1_64_TO_32))
def test_sop1(name: str) -> None:
    w = wave()
    wide_src = name in SOP1_64 or name in SOP1_64_TO_32
    wide_dst = name in SOP1_64
    ref = {**SOP1_32, **SOP1_64, **SOP1_64_TO_32}[name]
    lo, hi = _words(31), _words(32)
    for a0, a1 in zip(lo, hi, strict=True):
        a = a0 | a1 << 32 if wide_src else a0
        if name == "s_bitreplicate_b64_b32":
            a = a0
        for scc in (0, 1):
            w.s[2], w.s[3], w.s[10], w.s[11] = a & M32, a >> 32, 0x5555AAAA, 0x3333CCCC
            w.scc = scc
            run(sop1(name, 10, 2), w)
            d, sc = ref(a)
            got = _s64(w, 10) if wide_dst else int(w.s[10])
            assert (got, w.scc) == (d, scc if sc is None else sc), (name, hex(a), scc)
            if not wide_dst:
                assert int(w.s[11]) == 0x3333CCCC


def test_sop1_bitset_and_cmov() -> None:
    w = wave()
    for a in _words(41):
        w.s[10], w.s[11], w.s[2] = 0x0F0F0F0F, 0xF0F0F0F0, a
        run(sop1("s_bitset1_b32", 10, 2), w)
        assert int(w.s[10]) == 0x0F0F0F0F | 1 << (a & 31)
        run(sop1("s_bitset0_b32", 10, 2), w)
        assert int(w.s[10]) == 0x0F0F0F0F & ~(1 << (a & 31)) & M32
        w.s[10], w.s[11] = 0x0F0F0F0F, 0xF0F0F0F0
        run(sop1("s_bitset1_b64", 10, 2), w)
        assert _s64(w, 10) == (0xF0F0F0F0_0F0F0F0F | 1 << (a & 63))
        run(sop1("s_bitset0_b64", 10, 2), w)
        assert _s64(w, 10) == (0xF0F0F0F0_0F0F0F0F & ~(1 << (a & 63)) & M64)
        for scc in (0, 1):
            w.scc, w.s[12] = scc, 7
            run(sop1("s_cmov_b32", 12, 2), w)
            assert int(w.s[12]) == (a if scc else 7) and w.scc == scc


# ---- SOPC: (S0, S1) -> SCC ----------------------------------------------------------------------------------------

_ORDER: dict[str, Callable[[int, int], bool]] = {
    "eq": int.__eq__, "lg": int.__ne__, "gt": int.__gt__, "ge": int.__ge__, "lt": int.__lt__, "le": int.__le__}


def _signed(f: Callable[[int, int], bool]) -> Callable[[int, int], bool]:
    return lambda a, b: f(sx(a, 32), sx(b, 32))


SOPC: dict[str, Callable[[int, int], bool]] = {
    **{f"s_cmp_{op}_i32": _signed(f) for op, f in _ORDER.items()},
    **{f"s_cmp_{op}_u32": f for op, f in _ORDER.items()},
    "s_bitcmp0_b32": lambda a, b: not a >> (b & 31) & 1,
    "s_bitcmp1_b32": lambda a, b: bool(a >> (b & 31) & 1),
}


@pytest.mark.parametrize("name", sorted(SOPC))
def test_sopc(name: str) -> None:
    w = wave()
    pairs = _pairs(51) + [(x, x) for x in EDGES]
    for a, b in pairs:
        w.s[2], w.s[3] = a, b
        w.scc = 1 - int(SOPC[name](a, b))
        run(sopc(name, 2, 3), w)
        assert w.scc == int(SOPC[name](a, b)), (name, hex(a), hex(b))


def test_sopc_64() -> None:
    w = wave()
    rng = random.Random(5)
    for _ in range(40):
        a = rng.getrandbits(64)
        b = a if rng.random() < 0.3 else a ^ 1 << rng.randrange(64)
        w.s[2], w.s[3], w.s[4], w.s[5] = a & M32, a >> 32, b & M32, b >> 32
        run(sopc("s_cmp_eq_u64", 2, 4), w)
        assert w.scc == int(a == b)
        run(sopc("s_cmp_lg_u64", 2, 4), w)
        assert w.scc == int(a != b)
        w.s[6] = rng.getrandbits(32)
        run(sopc("s_bitcmp1_b64", 2, 6), w)
        assert w.scc == a >> (int(w.s[6]) & 63) & 1
        run(sopc("s_bitcmp0_b64", 2, 6), w)
        assert w.scc == 1 - (a >> (int(w.s[6]) & 63) & 1)


# ---- VALU: 32 lanes = 32 cases ------------------------------------------------------------------------------------

def _u24(x: int) -> int:
    return x & 0xFFFFFF


VOP2_INT: dict[str, Callable[[int, int], int]] = {
    "v_mul_i32_i24": lambda a, b: sx(a, 24) * sx(b, 24) & M32,
    "v_mul_hi_i32_i24": lambda a, b: sx(a, 24) * sx(b, 24) >> 32 & M32,
    "v_mul_u32_u24": lambda a, b: _u24(a) * _u24(b) & M32,
    "v_mul_hi_u32_u24": lambda a, b: _u24(a) * _u24(b) >> 32,
    "v_min_i32": lambda a, b: a if sx(a, 32) < sx(b, 32) else b,
    "v_max_i32": lambda a, b: a if sx(a, 32) > sx(b, 32) else b,
    "v_min_u32": min,
    "v_max_u32": max,
    "v_lshlrev_b32": lambda a, b: b << (a & 31) & M32,
    "v_lshrrev_b32": lambda a, b: b >> (a & 31),
    "v_ashrrev_i32": lambda a, b: sx(b, 32) >> (a & 31) & M32,
    "v_and_b32": lambda a, b: a & b,
    "v_or_b32": lambda a, b: a | b,
    "v_xor_b32": lambda a, b: a ^ b,
    "v_xnor_b32": lambda a, b: ~(a ^ b) & M32,
    "v_add_nc_u32": lambda a, b: (a + b) & M32,
    "v_sub_nc_u32": lambda a, b: (a - b) & M32,
    "v_subrev_nc_u32": lambda a, b: (b - a) & M32,
}
# VOP3-only two-source integer operations
VOP3_INT2: dict[str, Callable[[int, int], int]] = {
    "v_mul_lo_u32": lambda a, b: a * b & M32,
    "v_mul_hi_u32": lambda a, b: a * b >> 32,
    "v_mul_hi_i32": lambda a, b: sx(a, 32) * sx(b, 32) >> 32 & M32,
    "v_bfm_b32": lambda a, b: ((1 << (a & 31)) - 1) << (b & 31) & M32,
    "v_bcnt_u32_b32": lambda a, b: (popc(a) + b) & M32,
    "v_add_nc_i32": lambda a, b: (a + b) & M32,
    "v_sub_nc_i32": lambda a, b: (a - b) & M32,
    "v_lshlrev_b16": lambda a, b: b << (a & 15) & 0xFFFF,
    "v_lshrrev_b16": lambda a, b: (b & 0xFFFF) >> (a & 15),
    "v_ashrrev_i16": lambda a, b: sx(b, 16) >> (a & 15) & 0xFFFF,
    "v_and_b16": lambda a, b: a & b & 0xFFFF,
    "v_or_b16": lambda a, b: (a | b) & 0xFFFF,
    "v_xor_b16": lambda a, b: (a ^ b) & 0xFFFF,
    "v_add_nc_u16": lambda a, b: (a + b) & 0xFFFF,
    "v_sub_nc_u16": lambda a, b: (a - b) & 0xFFFF,
    "v_mul_lo_u16": lambda a, b: (a & 0xFFFF) * (b & 0xFFFF) & 0xFFFF,
    "v_add_nc_i16": lambda a, b: (a + b) & 0xFFFF,
    "v_sub_nc_i16": lambda a, b: (a - b) & 0xFFFF,
    "v_max_u16": lambda a, b: max(a & 0xFFFF, b & 0xFFFF),
    "v_min_u16": lambda a, b: min(a & 0xFFFF, b & 0xFFFF),
    "v_max_i16": lambda a, b: max(sx(a, 16), sx(b, 16)) & 0xFFFF,
    "v_min_i16": lambda a, b: min(sx(a, 16), sx(b, 16)) & 0xFFFF,
}
SIXTEEN = {k for k in VOP3_INT2 if k.endswith("16")}


def _bytes(x: int) -> list[int]:
    return [x >> (8 * i) & 0xFF for i in range(4)]


def _sad8(a: int, b: int) -> int:
    return sum(abs(x - y) for x, y in zip(_bytes(a), _bytes(b), strict=True))


def _med3(a: int, b: int, c: int) -> int:
    return sorted([a, b, c])[1]


VOP3_INT3: dict[str, Callable[[int, int, int], int]] = {
    "v_mad_i32_i24": lambda a, b, c: (sx(a, 24) * sx(b, 24) + sx(c, 32)) & M32,
    "v_mad_u32_u24": lambda a, b, c: (_u24(a) * _u24(b) + c) & M32,
    "v_bfe_u32": lambda a, b, c: _bfe_u(a, b & 31, c & 31),
    "v_bfe_i32": lambda a, b, c: _bfe_i(a, b & 31, c & 31),
    "v_bfi_b32": lambda a, b, c: (a & b) | (~a & c & M32),
    "v_lerp_u8": lambda a, b, c: sum(((x + y + (c >> (8 * i) & 1)) >> 1) << (8 * i)
                                     for i, (x, y) in enumerate(zip(_bytes(a), _bytes(b), strict=True))),
    "v_alignbit_b32": lambda a, b, c: ((a << 32 | b) >> (c & 31)) & M32,
    "v_alignbyte_b32": lambda a, b, c: ((a << 32 | b) >> (8 * (c & 3))) & M32,
    "v_min3_i32": lambda a, b, c: min(sx(a, 32), sx(b, 32), sx(c, 32)) & M32,
    "v_min3_u32": min,
    "v_max3_i32": lambda a, b, c: max(sx(a, 32), sx(b, 32), sx(c, 32)) & M32,
    "v_max3_u32": max,
    "v_med3_i32": lambda a, b, c: _med3(sx(a, 32), sx(b, 32), sx(c, 32)) & M32,
    "v_med3_u32": _med3,
    "v_sad_u8": lambda a, b, c: (_sad8(a, b) + c) & M32,
    "v_sad_hi_u8": lambda a, b, c: ((_sad8(a, b) << 16) + c) & M32,
    "v_sad_u16": lambda a, b, c: (abs((a & 0xFFFF) - (b & 0xFFFF)) + abs((a >> 16) - (b >> 16)) + c) & M32,
    "v_sad_u32": lambda a, b, c: (abs(a - b) + c) & M32,
    "v_msad_u8": lambda a, b, c: (sum(abs(x - y) for x, y in zip(_bytes(a), _bytes(b), strict=True) if y) + c) & M32,
    "v_xor3_b32": lambda a, b, c: a ^ b ^ c,
    "v_xad_u32": lambda a, b, c: ((a ^ b) + c) & M32,
    "v_lshl_add_u32": lambda a, b, c: ((a << (b & 31)) + c) & M32,
    "v_add_lshl_u32": lambda a, b, c: ((a + b) << (c & 31)) & M32,
    "v_add3_u32": lambda a, b, c: (a + b + c) & M32,
    "v_lshl_or_b32": lambda a, b, c: (a << (b & 31) & M32) | c,
    "v_and_or_b32": lambda a, b, c: (a & b) | c,
    "v_or3_b32": lambda a, b, c: a | b | c,
    "v_mad_u32_u16": lambda a, b, c: ((a & 0xFFFF) * (b & 0xFFFF) + c) & M32,
    "v_mad_i32_i16": lambda a, b, c: (sx(a, 16) * sx(b, 16) + sx(c, 32)) & M32,
    "v_maxmin_u32": lambda a, b, c: min(max(a, b), c),
    "v_minmax_u32": lambda a, b, c: max(min(a, b), c),
    "v_maxmin_i32": lambda a, b, c: min(max(sx(a, 32), sx(b, 32)), sx(c, 32)) & M32,
    "v_minmax_i32": lambda a, b, c: max(min(sx(a, 32), sx(b, 32)), sx(c, 32)) & M32,
    "v_mad_u16": lambda a, b, c: ((a & 0xFFFF) * (b & 0xFFFF) + (c & 0xFFFF)) & 0xFFFF,
    "v_mad_i16": lambda a, b, c: (sx(a, 16) * sx(b, 16) + sx(c, 16)) & 0xFFFF,
    "v_min3_i16": lambda a, b, c: min(sx(a, 16), sx(b, 16), sx(c, 16)) & 0xFFFF,
    "v_min3_u16": lambda a, b, c: min(a & 0xFFFF, b & 0xFFFF, c & 0xFFFF),
    "v_max3_i16": lambda a, b, c: max(sx(a, 16), sx(b, 16), sx(c, 16)) & 0xFFFF,
    "v_max3_u16": lambda a, b, c: max(a & 0xFFFF, b & 0xFFFF, c & 0xFFFF),
    "v_med3_i16": lambda a, b, c: _med3(sx(a, 16), sx(b, 16), sx(c, 16)) & 0xFFFF,
    "v_med3_u16": lambda a, b, c: _med3(a & 0xFFFF, b & 0xFFFF, c & 0xFFFF),
}
SIXTEEN3 = {"v_mad_u16", "v_mad_i16", "v_min3_i16", "v_min3_u16", "v_max3_i16", "v_max3_u16", "v_med3_i16",
            "v_med3_u16"}
KEEP = 0x7777_0000      # what the destination held: a 16-bit result keeps its high half


def _lanes3(seed: int) -> tuple[list[int], list[int], list[int]]:
    return _words(seed), _words(seed + 1), _words(seed + 2)


def _vals(w, n: int) -> list[int]:
    return [int(x) for x in w.v[n, :32]]


@pytest.mark.parametrize("name", sorted(VOP2_INT))
def test_vop2_and_its_vop3_form(name: str) -> None:
    a, b, _ = _lanes3(len(name) * 7)
    want = [VOP2_INT[name](x, y) for x, y in zip(a, b, strict=True)]
    for words in (vop2(f"{name}_e32", 4, v(1), 2), vop3(f"{name}_e64", 4, v(1), v(2))):
        w = wave()
        w.v[1], w.v[2] = a, b
        run(words, w)
        assert _vals(w, 4) == want, name


def test_vop2_scalar_and_constant_sources() -> None:
    """SRC0 as an SGPR, an inline constant and a literal (the same operation, another operand path)."""
    b = _words(77)
    w = wave()
    w.v[2] = b
    w.s[7] = 0xF0F0F0F0
    run(vop2("v_and_b32_e32", 4, 7, 2), w)
    assert _vals(w, 4) == [0xF0F0F0F0 & x for x in b]
    run(vop2("v_add_nc_u32_e32", 4, 128 + 5, 2), w)                # inline 5
    assert _vals(w, 4) == [(x + 5) & M32 for x in b]
    run(vop2("v_sub_nc_u32_e32", 4, 193 + 2, 2), w)                # inline -3
    assert _vals(w, 4) == [(M32 - 2 - x) & M32 for x in b]
    run(vop2("v_xor_b32_e32", 4, 255, 2, lit=0x13579BDF), w)
    assert _vals(w, 4) == [0x13579BDF ^ x for x in b]


@pytest.mark.parametrize("name", sorted(VOP3_INT2))
def test_vop3_two_sources(name: str) -> None:
    a, b, _ = _lanes3(len(name) * 11)
    w = wave()
    w.v[1], w.v[2], w.v[4] = a, b, KEEP
    run(vop3(name, 4, v(1), v(2)), w)
    want = [VOP3_INT2[name](x, y) | (KEEP if name in SIXTEEN else 0) for x, y in zip(a, b, strict=True)]
    assert _vals(w, 4) == want, name


@pytest.mark.parametrize("name", sorted(VOP3_INT3))
def test_vop3_three_sources(name: str) -> None:
    a, b, c = _lanes3(len(name) * 13)
    w = wave()
    w.v[1], w.v[2], w.v[3], w.v[4] = a, b, c, KEEP
    run(vop3(name, 4, v(1), v(2), v(3)), w)
    want = [VOP3_INT3[name](x, y, z) | (KEEP if name in SIXTEEN3 else 0) for x, y, z in zip(a, b, c, strict=True)]
    assert _vals(w, 4) == want, name


def test_mbcnt_counts_the_lanes_below() -> None:
    a, b, _ = _lanes3(91)
    w = wave()
    w.v[2] = b
    w.s[8] = a[0]
    run(vop3("v_mbcnt_lo_u32_b32", 4, 8, v(2)), w)
    assert _vals(w, 4) == [(popc(a[0] & ((1 << lane) - 1)) + b[lane]) & M32 for lane in range(32)]
    run(vop3("v_mbcnt_hi_u32_b32", 4, 8, v(2)), w)           # wave32: no lane has a bit in 63:32 below it
    assert _vals(w, 4) == b


SHIFT64: dict[str, Callable[[int, int], int]] = {
    "v_lshlrev_b64": lambda s, x: x << (s & 63) & M64,
    "v_lshrrev_b64": lambda s, x: x >> (s & 63),
    "v_ashrrev_i64": lambda s, x: sx(x, 64) >> (s & 63) & M64,
}


@pytest.mark.parametrize("name", sorted(SHIFT64))
def test_vop3_64_bit_shifts(name: str) -> None:
    s, lo, hi = _lanes3(101 + len(name))
    x = [a | b << 32 for a, b in zip(lo, hi, strict=True)]
    w = wave()
    w.v[1], w.v[2], w.v[3] = s, lo, hi
    run(vop3(name, 4, v(1), v(2)), w)
    got = [int(p) | int(q) << 32 for p, q in zip(w.v[4, :32], w.v[5, :32], strict=True)]
    assert got == [SHIFT64[name](a, b) for a, b in zip(s, x, strict=True)], name


def test_carry_chains_through_vcc_and_an_sgpr_pair() -> None:
    a, b, c = _lanes3(111)
    cin = random.Random(112).getrandbits(32)
    w = wave()
    w.v[1], w.v[2] = a, b
    w.s[VCC] = cin
    run(vop2("v_add_co_ci_u32_e32", 4, v(1), 2), w)
    sums = [x + y + (cin >> i & 1) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    assert _vals(w, 4) == [s & M32 for s in sums]
    assert int(w.s[VCC]) == sum(1 << i for i, s in enumerate(sums) if s > M32)
    w.s[VCC] = cin
    run(vop2("v_sub_co_ci_u32_e32", 4, v(1), 2), w)
    diffs = [x - y - (cin >> i & 1) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    assert _vals(w, 4) == [d & M32 for d in diffs]
    assert int(w.s[VCC]) == sum(1 << i for i, d in enumerate(diffs) if d < 0)
    w.s[VCC] = cin
    run(vop2("v_subrev_co_ci_u32_e32", 4, v(1), 2), w)
    diffs = [y - x - (cin >> i & 1) for i, (x, y) in enumerate(zip(a, b, strict=True))]
    assert _vals(w, 4) == [d & M32 for d in diffs]
    assert int(w.s[VCC]) == sum(1 << i for i, d in enumerate(diffs) if d < 0)
    run(vop3("v_add_co_u32", 4, v(1), v(2), abs_=20), w)     # VOP3SD: the carry-out into s20
    assert _vals(w, 4) == [(x + y) & M32 for x, y in zip(a, b, strict=True)]
    assert int(w.s[20]) == sum(1 << i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x + y > M32)
    run(vop3("v_sub_co_u32", 4, v(1), v(2), abs_=20), w)
    assert int(w.s[20]) == sum(1 << i for i, (x, y) in enumerate(zip(a, b, strict=True)) if y > x)
    w.v[3] = c
    w.v[5] = _words(113)
    run(vop3("v_mad_u64_u32", 6, v(1), v(2), v(3), abs_=20), w)   # S2 = v[3:4]: c | (old v4) << 32
    acc = [z | int(h) << 32 for z, h in zip(c, w.v[4, :32], strict=True)]
    full = [x * y + s for x, y, s in zip(a, b, acc, strict=True)]
    assert [int(p) | int(q) << 32 for p, q in zip(w.v[6, :32], w.v[7, :32], strict=True)] == [f & M64 for f in full]
    assert int(w.s[20]) == sum(1 << i for i, f in enumerate(full) if f > M64)


# ---- VOPC integer compares: the lane mask in VCC ------------------------------------------------------------------

CMP = {"f": lambda a, b: False, "lt": int.__lt__, "eq": int.__eq__, "le": int.__le__, "gt": int.__gt__,
       "ne": int.__ne__, "ge": int.__ge__, "t": lambda a, b: True}


@pytest.mark.parametrize(("op", "ty"), [(op, ty) for ty in ("i32", "u32", "i16", "u16") for op in sorted(CMP)
                                       if not (ty.endswith("16") and op in "ft")])   # gfx11 has no 16-bit f/t
def test_vopc_integer_compares(op: str, ty: str) -> None:
    name = f"v_cmp_{op}_{ty}_e32"
    a, b, _ = _lanes3(121)
    b = [x if i % 4 == 0 else y for i, (x, y) in enumerate(zip(a, b, strict=True))]        # some equal pairs
    bits = int(ty[1:])

    def conv(x: int) -> int:
        return sx(x, bits) if ty[0] == "i" else x & ((1 << bits) - 1)

    w = wave()
    w.v[1], w.v[2] = a, b
    w.s[VCC] = 0xA5A5A5A5
    run(vopc(name, v(1), 2), w)
    want = sum(1 << i for i, (x, y) in enumerate(zip(a, b, strict=True)) if CMP[op](conv(x), conv(y)))
    assert int(w.s[VCC]) == want, name


@pytest.mark.parametrize("ty", ["i64", "u64"])
@pytest.mark.parametrize("op", sorted(CMP))
def test_vopc_64_bit_compares(op: str, ty: str) -> None:
    a0, a1, b0 = _lanes3(131)
    b1 = [y if i % 3 else x for i, (x, y) in enumerate(zip(a1, _words(134), strict=True))]
    b0 = [y if i % 5 else x for i, (x, y) in enumerate(zip(a0, b0, strict=True))]
    a = [x | y << 32 for x, y in zip(a0, a1, strict=True)]
    b = [x | y << 32 for x, y in zip(b0, b1, strict=True)]
    w = wave()
    w.v[1], w.v[2], w.v[3], w.v[4] = a0, a1, b0, b1
    run(vopc(f"v_cmp_{op}_{ty}_e32", v(1), 3), w)
    conv = (lambda x: sx(x, 64)) if ty[0] == "i" else (lambda x: x)
    assert int(w.s[VCC]) == sum(1 << i for i, (x, y) in enumerate(zip(a, b, strict=True)) if CMP[op](conv(x), conv(y)))
