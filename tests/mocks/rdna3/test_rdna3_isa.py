"""Single-instruction table tests of the emulated RDNA3 shader core, from the ISA reference's definitions.

Every expected value is computed here independently of the core: Python integers for integer and scalar
operations, ``struct`` for IEEE conversions, ``fractions.Fraction`` with a correct-rounding reference for
arithmetic (rdna3isa.round_float). Instructions are hand-encoded (rdna3isa), decoded and compiled by the core.
"""

from __future__ import annotations

import math
import random
import struct
from fractions import Fraction

import numpy as np
import pytest
from rdna3isa import (
    exact,
    f16,
    f32,
    f64,
    from16,
    from32,
    from64,
    round_float,
    run,
    sop1,
    sop2,
    sopc,
    sopk,
    sopp,
    v,
    vop1,
    vop2,
    vop3,
    vopc,
    wave,
)

from tinyhw.mocks.rdna3 import fp
from tinyhw.mocks.rdna3.state import MODE_DEFAULT

U32 = np.uint32
PZ, NZ, QNAN, SNAN = 0x00000000, 0x80000000, 0x7FC00000, 0x7F800001
EXEC, VCC, NULL = 126, 106, 124


def _lanes(w, n: int, vals: list[int]) -> None:
    w.v[n, :len(vals)] = vals


def _vals(w, n: int, k: int) -> list[int]:
    return [int(x) for x in w.v[n, :k]]


# ---- IEEE min/max with the ISA's signed-zero order ----------------------------------------------------------------

MAXMIN = [  # (a, b, max bits, min bits)
    (PZ, NZ, PZ, NZ), (NZ, PZ, PZ, NZ), (NZ, NZ, NZ, NZ), (f32(1.0), f32(-2.0), f32(1.0), f32(-2.0)),
    (QNAN, f32(3.0), f32(3.0), f32(3.0)), (f32(3.0), QNAN, f32(3.0), f32(3.0)),
    (SNAN, f32(3.0), SNAN | 0x400000, SNAN | 0x400000), (f32(3.0), SNAN, SNAN | 0x400000, SNAN | 0x400000),
]


@pytest.mark.parametrize("enc", ["VOP2", "VOP3"])
def test_max_min_f32_signed_zero_and_nan(enc: str) -> None:
    for name, col in (("v_max_f32", 2), ("v_min_f32", 3)):
        w = wave()
        _lanes(w, 1, [r[0] for r in MAXMIN])
        _lanes(w, 2, [r[1] for r in MAXMIN])
        words = vop2(name + "_e32", 3, v(1), 2) if enc == "VOP2" else vop3(name + "_e64", 3, v(1), v(2))
        run(words, w)
        assert _vals(w, 3, len(MAXMIN)) == [r[col] for r in MAXMIN], name


def test_max3_min3_med3_f32_zeros_and_nan() -> None:
    cases = [  # a, b, c
        (PZ, NZ, NZ), (NZ, PZ, NZ), (NZ, NZ, PZ), (f32(1.0), f32(5.0), f32(3.0)), (f32(3.0), QNAN, f32(1.0)),
    ]
    want = {"v_max3_f32": [PZ, PZ, PZ, f32(5.0), f32(3.0)], "v_min3_f32": [NZ, NZ, NZ, f32(1.0), f32(1.0)],
            # med3: max3 == S0 (as floats: -0 == +0) gives max(S1, S2), == S1 max(S0, S2), else max(S0, S1); NaN: min3
            "v_med3_f32": [NZ, PZ, PZ, f32(3.0), f32(1.0)]}
    for name, expect in want.items():
        w = wave()
        for i in range(3):
            _lanes(w, 1 + i, [c[i] for c in cases])
        run(vop3(name, 4, v(1), v(2), v(3)), w)
        assert _vals(w, 4, len(cases)) == expect, name


# ---- fused multiply-add: exact, one rounding ----------------------------------------------------------------------

def _hard_fma_cases(rng: random.Random, n: int) -> list[tuple[int, int, int]]:
    out = []
    for _ in range(n):
        a = rng.getrandbits(32) & 0x7FFFFFFF
        a = (a & 0x807FFFFF) | rng.randrange(100, 150) << 23
        b = (rng.getrandbits(32) & 0x807FFFFF) | rng.randrange(100, 150) << 23
        p = exact(a, "f32") * exact(b, "f32")
        kind = rng.randrange(4)
        if kind == 0:      # c cancels the product's rounded value: the result is the product's low bits
            c = round_float(-p, "f32")
        elif kind == 1:    # c lands the sum near an f32 midpoint
            c = round_float(-p + Fraction(rng.choice([1, -1]), 2 ** rng.randrange(20, 60)), "f32")
        elif kind == 2:    # tiny results (denormal range)
            c = round_float(-p * (1 + Fraction(1, 2 ** rng.randrange(1, 30))), "f32")
        else:
            c = (rng.getrandbits(32) & 0x807FFFFF) | rng.randrange(60, 190) << 23
        out.append((a, b, c))
    return out


def test_fma32_is_exactly_rounded_against_fractions() -> None:
    """Property test: fp.fma32 equals the exact a*b+c rounded once to nearest even (fractions.Fraction)."""
    rng = random.Random(34)
    cases = _hard_fma_cases(rng, 3000)
    # double-rounding traps: c + a*b = c + half an ulp of c - (2^-46 of that), so the float64 sum rounds to the
    # exact f32 midpoint while the exact sum lies just below (or, with the signs flipped, just above) it
    for _ in range(400):
        e = rng.randrange(-100, 100)
        c = (rng.getrandbits(1) << 31) | (e + 127) << 23 | rng.getrandbits(23)
        i = rng.randrange(-20, 20)
        sa = rng.choice([1.0, -1.0])
        a = f32(sa * (1 + 2 ** -23) * 2.0 ** i)
        b = f32(rng.choice([1.0, -1.0]) * (1 - 2 ** -23) * 2.0 ** (e - 23 - i - 1))
        cases.append((a, b, c))
    arr = np.array(cases, dtype=U32)
    got = fp.fma32(arr[:, 0].view(np.float32), arr[:, 1].view(np.float32), arr[:, 2].view(np.float32)).view(U32)
    for (a, b, c), g in zip(cases, got.tolist(), strict=True):
        want = round_float(exact(a, "f32") * exact(b, "f32") + exact(c, "f32"), "f32")
        if want & 0x7FFFFFFF == 0:         # an exact zero: +0 under round to nearest (both addends nonzero)
            assert g & 0x7FFFFFFF == 0
        else:
            assert g == want, (hex(a), hex(b), hex(c))


def test_fma16_and_fma64_are_exactly_rounded_against_fractions() -> None:
    rng = random.Random(7)
    a16 = [rng.getrandbits(16) & 0x7BFF ^ rng.getrandbits(1) << 15 for _ in range(2000)]
    b16 = [rng.getrandbits(16) & 0x7BFF ^ rng.getrandbits(1) << 15 for _ in range(2000)]
    c16 = [rng.getrandbits(16) & 0x7BFF ^ rng.getrandbits(1) << 15 for _ in range(2000)]
    got = fp.fma16(*(np.array(x, np.uint16).view(np.float16) for x in (a16, b16, c16))).view(np.uint16).tolist()
    for a, b, c, g in zip(a16, b16, c16, got, strict=True):
        want = round_float(exact(a, "f16") * exact(b, "f16") + exact(c, "f16"), "f16")
        assert g == want or (want & 0x7FFF == 0 and g & 0x7FFF == 0), (hex(a), hex(b), hex(c))
    for _ in range(300):
        a, b = rng.uniform(-4, 4), rng.uniform(-4, 4)
        c = -float(Fraction(a) * Fraction(b)) * rng.choice([1, 1 + 2 ** -40])
        g = fp.fma64(np.array([a]), np.array([b]), np.array([c]))[0]
        assert f64(float(g)) == round_float(Fraction(a) * Fraction(b) + Fraction(c), "f64") or g == 0


def test_v_fma_f32_instruction_and_fmac() -> None:
    a, b, c = f32(1.0 + 2 ** -23), f32(1.0 - 2 ** -24), f32(-1.0)
    want = round_float(exact(a, "f32") * exact(b, "f32") + exact(c, "f32"), "f32")
    w = wave()
    w.v[1, 0], w.v[2, 0], w.v[3, 0] = a, b, c
    run(vop3("v_fma_f32", 4, v(1), v(2), v(3)), w)
    assert int(w.v[4, 0]) == want
    w.v[5, 0] = c
    run(vop2("v_fmac_f32_e32", 5, v(1), 2), w)
    assert int(w.v[5, 0]) == want


# ---- VOP3 output modifiers ----------------------------------------------------------------------------------------

def test_clamp_and_omod_on_f32() -> None:
    xs = [(0.7, 0.6), (-0.5, 0.25), (0.25, 0.125), (float("nan"), 1.0), (-0.0, -0.0), (3e38, 3e38)]
    for omod, k in ((0, 1.0), (1, 2.0), (2, 4.0), (3, 0.5)):
        for clamp in (0, 1):
            for dx10 in (0, 1):
                mode = MODE_DEFAULT & ~(1 << 8) | dx10 << 8
                w = wave(mode)
                _lanes(w, 1, [f32(a) for a, _ in xs])
                _lanes(w, 2, [f32(b) for _, b in xs])
                run(vop3("v_add_f32_e64", 3, v(1), v(2), clamp=clamp, omod=omod), w)
                for i, (a, b) in enumerate(xs):
                    r = from32(f32(from32(f32(a + b)) * k))           # the sum, then OMOD, each rounded to f32
                    if clamp:
                        # [0, 1] with -0 < +0 (so -0 clamps to +0); NaN -> 0 under DX10_CLAMP
                        r = (0.0 if dx10 else r) if math.isnan(r) else 0.0 if r <= 0 else min(r, 1.0)
                    got = int(w.v[3, i])
                    if math.isnan(r):
                        assert math.isnan(from32(got))
                    else:
                        assert got == f32(r), (a, b, omod, clamp)


def test_clamp_saturates_integer_adds() -> None:
    w = wave()
    _lanes(w, 1, [0xFFFFFFFF, 0, 5, 0x7FFFFFFF])
    _lanes(w, 2, [1, 1, 3, 1])
    run(vop3("v_add_nc_u32_e64", 3, v(1), v(2), clamp=1), w)
    assert _vals(w, 3, 4) == [0xFFFFFFFF, 1, 8, 0x80000000]
    run(vop3("v_sub_nc_u32_e64", 3, v(1), v(2), clamp=1), w)
    assert _vals(w, 3, 4) == [0xFFFFFFFE, 0, 2, 0x7FFFFFFE]
    run(vop3("v_add_nc_i32", 3, v(1), v(2), clamp=1), w)
    assert _vals(w, 3, 4) == [0, 1, 8, 0x7FFFFFFF]
    run(vop3("v_add_nc_u32_e64", 3, v(1), v(2)), w)       # no clamp: wraps
    assert _vals(w, 3, 4) == [0, 1, 8, 0x80000000]


# ---- MODE: denormals from the kernel descriptor, s_denorm_mode, s_setreg ----------------------------------------

TINY = f32(1e-20)


@pytest.mark.parametrize("den", [0, 1, 2, 3])
def test_f32_denormal_modes(den: int) -> None:
    """FP_DENORM f32 (bits 5:4): bit 0 keeps denormal inputs, bit 1 keeps denormal results."""
    mode = MODE_DEFAULT & ~0x30 | den << 4
    w = wave(mode)
    denorm = 0x00000400                                  # an f32 denormal
    _lanes(w, 1, [TINY, denorm, denorm | 0x80000000])
    _lanes(w, 2, [TINY, f32(1.0), f32(1.0)])
    run(vop2("v_mul_f32_e32", 3, v(1), 2), w)
    prod = round_float(exact(TINY, "f32") ** 2, "f32")                   # a denormal result
    keep_in, keep_out = den & 1, den >> 1
    assert int(w.v[3, 0]) == (prod if keep_out else 0)
    assert int(w.v[3, 1]) == (denorm if keep_in and keep_out else 0)
    assert int(w.v[3, 2]) == (denorm | 0x80000000 if keep_in and keep_out else 0x80000000)   # sign kept


def test_denorm_mode_from_rsrc1_s_denorm_mode_and_setreg() -> None:
    from tinyhw.mocks.rdna3.state import mode_from_rsrc1

    assert mode_from_rsrc1(0xF0 << 12 | 1 << 21 | 1 << 23) == MODE_DEFAULT
    assert mode_from_rsrc1(0) == 0
    w = wave(0)
    run(sopp("s_denorm_mode", 0xF), w)
    assert w.mode == 0xF0
    run(sopp("s_round_mode", 0x0), w)
    # s_setreg_b32 hwreg(HW_REG_MODE, 4, 2) = s7 (2): FP_DENORM f32 = 2; s_getreg_b32 reads it back
    w.s[7] = 2
    run(sopk("s_setreg_b32", 7, 1 | 4 << 6 | 1 << 11), w)
    assert w.mode == 0xE0
    run(sopk("s_getreg_b32", 8, 1 | 0 << 6 | 31 << 11), w)
    assert w.s[8] == 0xE0
    run(sopk("s_setreg_imm32_b32", 0, 1 | 8 << 6 | 1 << 11, lit=3), w)   # DX10_CLAMP and IEEE
    assert w.mode == 0x3E0


def test_round_mode_on_an_operation_it_is_not_modelled_for_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.mocks.rdna3 import Unimplemented, rounding

    w = wave(MODE_DEFAULT | 1)                     # f32 toward +infinity (test_rdna3_isa_rounding.py: what rounds)
    w.v[1] = 0x3F000000                            # 0.5
    with monkeypatch.context() as m:               # every VALU operation has a rule now: take v_exp_f32's away
        m.delitem(rounding.DIRECTED, "v_exp_f32")
        with pytest.raises(Unimplemented, match="round mode"):
            run(vop1("v_exp_f32_e32", 3, v(1)), w)
    run(vop1("v_exp_f32_e32", 3, v(1)), w)         # with it: sqrt(2) = 1.41421354.. rounded up
    assert int(w.v[3, 0]) == 0x3FB504F4


# ---- lanes --------------------------------------------------------------------------------------------------------

def test_readlane_and_writelane() -> None:
    w = wave()
    _lanes(w, 1, list(range(100, 132)))
    w.s[4] = 37                                    # lane 37 & 31 = 5
    run(vop3("v_readlane_b32", 9, v(1), 4), w)
    assert w.s[9] == 105
    w.s[126] = 0                                   # EXEC ignored by both
    w.s[10] = 0xDEAD
    run(vop3("v_writelane_b32", 2, 10, 128 + 7), w)
    assert int(w.v[2, 7]) == 0xDEAD and int(w.v[2, 6]) == 0


# ---- compares: v_cmpx_*_e64, 64- and 16-bit -----------------------------------------------------------------------

def test_cmpx_e64_writes_exec_and_64_bit_compares() -> None:
    w = wave()
    w.s[126] = 0xF
    _lanes(w, 1, [1, 5, 3, 9])
    _lanes(w, 2, [4, 4, 4, 4])
    run(vop3("v_cmpx_lt_u32_e64", 0x7E, v(1), v(2)), w)
    assert w.s[EXEC] == 0b0101
    w = wave()
    lo = [(x & 0xFFFFFFFF) for x in (-1, 5, 1 << 40, -(1 << 40))]
    hi = [(x >> 32) & 0xFFFFFFFF for x in (-1, 5, 1 << 40, -(1 << 40))]
    _lanes(w, 2, lo)
    _lanes(w, 3, hi)
    w.s[126] = 0xF
    run(vop3("v_cmp_lt_i64_e64", 8, v(2), 128), w)       # < 0, signed
    assert w.s[8] == 0b1001
    run(vop3("v_cmp_gt_u64_e64", 8, v(2), 128 + 5), w)   # > 5, unsigned
    assert w.s[8] == 0b1101
    _lanes(w, 4, [f64(x) & 0xFFFFFFFF for x in (1.5, -0.0, float("nan"), 2.0)])
    _lanes(w, 5, [f64(x) >> 32 for x in (1.5, -0.0, float("nan"), 2.0)])
    run(vop3("v_cmp_ge_f64_e64", 9, v(4), 242), w)       # >= 1.0 (inline f64 constant)
    assert w.s[9] == 0b1001
    run(vop3("v_cmp_class_f64_e64", 9, v(4), 128 + 32), w)   # class bit 5: -0
    assert w.s[9] == 0b0010
    _lanes(w, 6, [f16(1.0) | f16(-3.0) << 16, f16(2.0) | f16(0.5) << 16])
    w.s[126] = 0x3
    run(vop3("v_cmp_lt_f16_e64", 10, v(6), 242, opsel=1), w)   # high half < 1.0 (an f16 inline constant)
    assert w.s[10] == 0b11
    run(vopc("v_cmp_lt_f16_e32", 242, 6), w)                    # 1.0 < low half
    assert w.s[VCC] == 0b10


# ---- f16 ----------------------------------------------------------------------------------------------------------

def test_f16_converts_round_to_nearest_even() -> None:
    xs = [1.0, 65504.0, 65520.0, 1e-8, -2.5, 1 + 2 ** -11, 1 + 3 * 2 ** -12, float("inf"), 6e-5]
    w = wave()
    _lanes(w, 1, [f32(x) for x in xs])
    w.v[2, :] = 0xABCD0000
    run(vop1("v_cvt_f16_f32_e32", 2, v(1)), w)
    for i, x in enumerate(xs):
        assert int(w.v[2, i]) == 0xABCD0000 | f16(from32(f32(x))), x     # high half kept
    run(vop1("v_cvt_f32_f16_e32", 3, v(2)), w)
    for i, _x in enumerate(xs):
        assert int(w.v[3, i]) == f32(from16(int(w.v[2, i]) & 0xFFFF))


def test_f16_arithmetic_op_sel_and_pack() -> None:
    rng = random.Random(16)
    a = [rng.getrandbits(16) & 0x7BFF for _ in range(32)]
    b = [rng.getrandbits(16) & 0x7BFF | rng.getrandbits(1) << 15 for _ in range(32)]
    for name, op in (("v_add_f16_e32", lambda x, y: x + y), ("v_mul_f16_e32", lambda x, y: x * y),
                     ("v_sub_f16_e32", lambda x, y: x - y)):
        w = wave()
        w.v[1] = a
        w.v[2] = b
        w.v[3, :] = 0x12340000
        run(vop2(name, 3, v(1), 2), w)
        for i in range(32):
            want = round_float(op(exact(a[i], "f16"), exact(b[i], "f16")), "f16")
            assert int(w.v[3, i]) & 0xFFFF == want or (want & 0x7FFF == 0 and int(w.v[3, i]) & 0x7FFF == 0)
            assert int(w.v[3, i]) >> 16 == 0x1234
    # VOP3 op_sel: sources from the high halves, the result into the high half (low half kept)
    w = wave()
    w.v[1, 0] = f16(3.0) << 16 | f16(100.0)
    w.v[2, 0] = f16(0.5) << 16 | f16(200.0)
    w.v[3, 0] = 0x5555
    run(vop3("v_mul_f16_e64", 3, v(1), v(2), opsel=0b1011), w)
    assert int(w.v[3, 0]) == f16(1.5) << 16 | 0x5555
    run(vop3("v_fma_f16", 4, v(1), v(2), v(1), opsel=0b0001), w)      # 3.0 * 200 + 100
    assert int(w.v[4, 0]) & 0xFFFF == f16(700.0)
    run(vop3("v_pack_b32_f16", 5, v(1), v(2), neg=0b10), w)
    assert int(w.v[5, 0]) == (f16(-200.0) << 16 | f16(100.0))


# ---- fract, f64 ---------------------------------------------------------------------------------------------------

def test_fract_f32_and_f64() -> None:
    xs = [1.75, -0.25, -1e-10, 1e20, 3.0, float("inf"), -2.5]
    w = wave()
    _lanes(w, 1, [f32(x) for x in xs])
    run(vop1("v_fract_f32_e32", 2, v(1)), w)
    for i, x in enumerate(xs):
        x32 = from32(f32(x))
        if math.isinf(x32):
            assert math.isnan(from32(int(w.v[2, i])))
            continue
        want = round_float(Fraction(x32) - math.floor(x32), "f32")          # S0 + -floor(S0), rounded once
        assert int(w.v[2, i]) == min(want, 0x3F7FFFFF), x                     # the guide: clamped below 1.0
    _lanes(w, 4, [f64(x) & 0xFFFFFFFF for x in xs])
    _lanes(w, 5, [f64(x) >> 32 for x in xs])
    run(vop1("v_fract_f64_e32", 6, v(4)), w)
    for i, x in enumerate(xs[:5]):
        got = int(w.v[6, i]) | int(w.v[7, i]) << 32
        assert got == min(round_float(Fraction(x) - math.floor(x), "f64"), 0x3FEFFFFFFFFFFFFF), x


def test_f64_add_mul_fma_and_converts() -> None:
    rng = random.Random(64)
    xs = [rng.uniform(-1e3, 1e3) for _ in range(32)]
    ys = [rng.uniform(-1e3, 1e3) for _ in range(32)]
    w = wave()
    w.v[2], w.v[3] = [f64(x) & 0xFFFFFFFF for x in xs], [f64(x) >> 32 for x in xs]
    w.v[4], w.v[5] = [f64(x) & 0xFFFFFFFF for x in ys], [f64(x) >> 32 for x in ys]

    def get(n: int) -> list[float]:
        return [from64(int(w.v[n, i]) | int(w.v[n + 1, i]) << 32) for i in range(32)]

    run(vop3("v_add_f64", 6, v(2), v(4)), w)
    assert get(6) == [x + y for x, y in zip(xs, ys, strict=True)]          # Python floats are IEEE doubles
    run(vop3("v_mul_f64", 6, v(2), v(4), neg=1), w)
    assert get(6) == [-x * y for x, y in zip(xs, ys, strict=True)]
    run(vop3("v_fma_f64", 6, v(2), v(4), v(2)), w)
    for x, y, g in zip(xs, ys, get(6), strict=True):
        assert f64(g) == round_float(Fraction(x) * Fraction(y) + Fraction(x), "f64")
    run(vop1("v_cvt_f32_f64_e32", 8, v(2)), w)
    assert _vals(w, 8, 32) == [f32(x) for x in xs]
    run(vop1("v_cvt_i32_f64_e32", 8, v(2)), w)
    assert _vals(w, 8, 32) == [int(x) & 0xFFFFFFFF for x in xs]            # toward zero
    run(vop1("v_cvt_f64_f32_e32", 6, v(8)), w)


# ---- integers -----------------------------------------------------------------------------------------------------

def _clz(x: int) -> int:
    return 32 - x.bit_length() if x else 0xFFFFFFFF


def test_bit_scans_reverse_and_extracts() -> None:
    rng = random.Random(3)
    xs = [0, 1, 0x80000000, 0xFFFFFFFF, 0x40000000, 0x00F00000] + [rng.getrandbits(32) for _ in range(26)]
    w = wave()
    w.v[1] = xs
    run(vop1("v_clz_i32_u32_e32", 2, v(1)), w)
    assert _vals(w, 2, 32) == [_clz(x) for x in xs]
    run(vop1("v_ctz_i32_b32_e32", 2, v(1)), w)
    assert _vals(w, 2, 32) == [((x & -x).bit_length() - 1) & 0xFFFFFFFF if x else 0xFFFFFFFF for x in xs]
    run(vop1("v_cls_i32_e32", 2, v(1)), w)
    assert _vals(w, 2, 32) == [_clz(x ^ 0xFFFFFFFF if x >> 31 else x) for x in xs]
    run(vop1("v_bfrev_b32_e32", 2, v(1)), w)
    assert _vals(w, 2, 32) == [int(f"{x:032b}"[::-1], 2) for x in xs]
    run(vop3("v_bfe_i32", 2, v(1), 128 + 4, 128 + 8), w)
    assert _vals(w, 2, 32) == [((x >> 4 & 0xFF) ^ 0x80) - 0x80 & 0xFFFFFFFF for x in xs]


def test_16_bit_integer_ops_keep_the_high_half() -> None:
    w = wave()
    _lanes(w, 1, [0xAAAA0005, 0xAAAAFFFF, 0xAAAA8000])
    _lanes(w, 2, [0x00000003, 0x00000002, 0x00000001])
    w.v[3, :] = 0x77770000
    run(vop3("v_mul_lo_u16", 3, v(1), v(2)), w)
    assert _vals(w, 3, 3) == [0x7777000F, 0x7777FFFE, 0x77778000]
    run(vop3("v_ashrrev_i16", 3, v(2), v(1)), w)
    assert _vals(w, 3, 3) == [0x77770000, 0x7777FFFF, 0x7777C000]
    run(vop3("v_add_nc_u16", 3, v(1), v(2), clamp=1), w)
    assert _vals(w, 3, 3) == [0x77770008, 0x7777FFFF, 0x77778001]


# ---- scalar ---------------------------------------------------------------------------------------------------------

def _s64(w, n: int) -> int:
    return w.s[n] | w.s[n + 1] << 32


def test_scalar_64_bit_and_bit_field_ops() -> None:
    w = wave()
    x = 0xF123_4567_89AB_CDEF
    w.s[2], w.s[3] = x & 0xFFFFFFFF, x >> 32
    w.s[4] = 8 | 20 << 16                                           # offset 8, width 20
    run(sop2("s_bfe_u64", 6, 2, 4), w)
    assert _s64(w, 6) == x >> 8 & 0xFFFFF and w.scc == 1
    w.s[4] = 40 | 24 << 16                                          # bits 63:40 sign-extended
    run(sop2("s_bfe_i64", 6, 2, 4), w)
    assert _s64(w, 6) == ((x >> 40 & 0xFFFFFF) - (1 << 24)) & (2 ** 64 - 1)
    w.scc = 0
    run(sop2("s_cselect_b64", 8, 2, 128 + 9), w)
    assert _s64(w, 8) == 9
    run(sopc("s_cmp_eq_u64", 2, 2), w)
    assert w.scc == 1
    w.s[5] = 63
    run(sopc("s_bitcmp1_b64", 2, 5), w)
    assert w.scc == 1
    run(sop2("s_lshl2_add_u32", 10, 255, 128 + 1, lit=0x40000000), w)
    assert w.s[10] == 1 and w.scc == 1                              # (0x40000000 << 2) + 1 carries out
    run(sop2("s_pack_hl_b32_b16", 11, 2, 2), w)
    assert w.s[11] == (x & 0xFFFF) << 16 | (x >> 16 & 0xFFFF)
    run(sop2("s_absdiff_i32", 12, 128 + 3, 193 + 4), w)             # |3 - (-5)|
    assert w.s[12] == 8 and w.scc == 1
    run(sop1("s_brev_b32", 13, 2), w)
    assert w.s[13] == int(f"{x & 0xFFFFFFFF:032b}"[::-1], 2)
    run(sop1("s_clz_i32_u32", 13, 128 + 1), w)
    assert w.s[13] == 31
    run(sop1("s_sext_i32_i8", 13, 128 + 0x3F), w)
    assert w.s[13] == 0x3F
    run(sop1("s_abs_i32", 13, 193 + 6), w)                          # -7
    assert w.s[13] == 7 and w.scc == 1
    run(sop1("s_not_b64", 14, 2), w)
    assert _s64(w, 14) == ~x & (2 ** 64 - 1)


def test_waits_and_cache_invalidates_are_no_ops() -> None:
    from rdna3isa import OPC

    w = wave()
    before = (list(w.s), w.scc, w.v.copy(), w.mode)
    for m in ("s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt", "s_waitcnt_lgkmcnt"):
        assert run(sopk(m, NULL, 0), w) is None
    for m in ("s_gl1_inv", "s_dcache_inv"):
        _enc, op = OPC[m]
        assert run([0xF4000000 | op << 18, 0xF8000000], w) is None
    for m in ("buffer_gl0_inv", "buffer_gl1_inv"):
        _enc, op = OPC[m]
        assert run([0xE0000000 | op << 18, 0], w) is None
    assert list(w.s) == before[0] and w.scc == before[1] and np.array_equal(w.v, before[2]) and w.mode == before[3]


def test_pc_moves_and_call() -> None:
    from rdna3isa import PC

    w = wave()
    run(sop1("s_getpc_b64", 4, 0), w)
    assert _s64(w, 4) == PC + 4
    w.s[6], w.s[7] = 0x2000, 0
    assert run(sop1("s_swappc_b64", 8, 6), w) == 0x2000 and _s64(w, 8) == PC + 4
    assert run(sop1("s_setpc_b64", 0, 6), w) == 0x2000
    assert run(sopk("s_call_b64", 10, -2), w) == PC + 4 - 8 and _s64(w, 10) == PC + 4


def test_scalar_buffer_load_bounds() -> None:
    from rdna3isa import OPC

    from tinyhw.mocks.rdna3 import FlatMemory

    mem = FlatMemory(0x10000, 0x1000)
    base = mem.alloc(struct.pack("<8I", *range(11, 19)))
    w = wave(mem=mem)
    w.s[8:12] = [base & 0xFFFFFFFF, base >> 32, 20, 0]             # NUM_RECORDS = 20 bytes: dwords 0..4
    _enc, op = OPC["s_buffer_load_b128"]
    run([0xF4000000 | op << 18 | 16 << 6 | 8 // 2, 0xF8000000 | 8], w)   # offset 8: dwords 2..5
    assert w.s[16:20] == [13, 14, 15, 0]


def test_cvt_pk_rtz_f16_f32_truncates_toward_zero() -> None:
    import bisect

    finite = sorted(from16(b) for b in range(0x7C00))           # every non-negative finite f16, ascending

    def rtz(x: float) -> int:
        if math.isnan(x):
            return -1
        k = bisect.bisect_right(finite, abs(x)) - 1                 # the largest magnitude not above |x|
        return f16(math.copysign(finite[k], x))

    rng = random.Random(5)
    xs = [1.0 + 2 ** -11, -(1.0 + 3 * 2 ** -12), 65519.0, 1e9, -1e9, 3e-8, -6.1e-5, float("inf")]
    xs += [from32(rng.getrandbits(32) & 0x8FFFFFFF | rng.randrange(100, 145) << 23) for _ in range(24)]
    ys = list(reversed(xs))
    w = wave()
    w.v[1] = [f32(x) for x in xs]
    w.v[2] = [f32(y) for y in ys]
    run(vop2("v_cvt_pk_rtz_f16_f32_e32", 3, v(1), 2), w)
    for i in range(32):
        lo, hi = rtz(from32(f32(xs[i]))), rtz(from32(f32(ys[i])))
        if math.isinf(xs[i]):
            lo = f16(xs[i])
        if math.isinf(ys[i]):
            hi = f16(ys[i])
        assert int(w.v[3, i]) == hi << 16 | lo, (xs[i], ys[i])


# ---- memory: LDS and global/flat atomics, 2addr forms, FLAT ---------------------------------------------------------

def _ds(m: str, vdst: int, addr: int, data0: int = 0, data1: int = 0, offset: int = 0, off1: int = 0) -> list[int]:
    from rdna3isa import OPC

    _enc, op = OPC[m]
    return [0xD8000000 | op << 18 | off1 << 8 | offset, vdst << 24 | data1 << 16 | data0 << 8 | addr]


ATOMIC32 = {  # name: (old, data, data2) -> new, from the ISA pseudocode
    "add": lambda o, d, e: o + d, "sub": lambda o, d, e: o - d, "rsub": lambda o, d, e: d - o,
    "inc": lambda o, d, e: 0 if o >= d else o + 1, "dec": lambda o, d, e: d if o == 0 or o > d else o - 1,
    "min_i32": lambda o, d, e: min(o - (o >> 31 << 32), d - (d >> 31 << 32)),
    "max_u32": lambda o, d, e: max(o, d), "and": lambda o, d, e: o & d, "xor": lambda o, d, e: o ^ d,
    "cmpstore": lambda o, d, e: d if o == e else o, "mskor": lambda o, d, e: (o & ~d) | e,
}


@pytest.mark.parametrize("op", sorted(ATOMIC32))
def test_ds_atomics_with_return_in_lane_order(op: str) -> None:
    name = {"min_i32": "ds_min_rtn_i32", "max_u32": "ds_max_rtn_u32", "and": "ds_and_rtn_b32",
            "xor": "ds_xor_rtn_b32", "cmpstore": "ds_cmpstore_rtn_b32", "mskor": "ds_mskor_rtn_b32"}.get(
        op, f"ds_{op}_rtn_u32")
    w = wave()
    w.s[126] = 0x0000000F
    mem0 = [5, 0xFFFFFFF0, 7, 0]
    w.lds[:16] = np.array(mem0, dtype="<u4").view(np.uint8)
    addrs, d0, d1 = [0, 4, 8, 0], [3, 0x20, 7, 9], [5, 1, 99, 2]        # lanes 0 and 3 hit the same dword
    _lanes(w, 1, addrs)
    _lanes(w, 2, d0)
    _lanes(w, 3, d1)
    run(_ds(name, 4, 1, 2, 3), w)
    mem, rets = list(mem0), []
    for lane in range(4):
        i = addrs[lane] // 4
        rets.append(mem[i])
        mem[i] = ATOMIC32[op](mem[i], d0[lane], d1[lane]) & 0xFFFFFFFF
    assert list(w.lds[:16].view("<u4")) == mem
    assert _vals(w, 4, 4) == rets


def test_ds_2addr_loads_and_stores_and_64_bit_add() -> None:
    w = wave()
    w.lds[:] = np.arange(256, dtype=np.uint8)
    _lanes(w, 1, [0, 16])
    w.s[126] = 0x3
    run(_ds("ds_load_2addr_b32", 4, 1, offset=1, off1=3), w)           # dwords at +4 and +12
    words = np.arange(256, dtype=np.uint8).view("<u4")
    assert _vals(w, 4, 2) == [int(words[1]), int(words[5])] and _vals(w, 5, 2) == [int(words[3]), int(words[7])]
    _lanes(w, 2, [0xAAAA, 0xBBBB])
    _lanes(w, 3, [0xCCCC, 0xDDDD])
    run(_ds("ds_store_2addr_stride64_b32", 0, 1, 2, 3, offset=0, off1=1), w)      # +0 and +256 (out of range)
    assert int(w.lds[0:4].view("<u4")[0]) == 0xAAAA and int(w.lds[16:20].view("<u4")[0]) == 0xBBBB
    assert bytes(w.lds[4:16]) == bytes(range(4, 16))
    w.lds[32:40] = np.frombuffer((2 ** 32 - 1).to_bytes(8, "little"), dtype=np.uint8)
    _lanes(w, 1, [32])
    _lanes(w, 6, [1])
    _lanes(w, 7, [0])
    w.s[126] = 1
    run(_ds("ds_add_rtn_u64", 8, 1, 6), w)
    assert int.from_bytes(w.lds[32:40].tobytes(), "little") == 2 ** 32 and _vals(w, 8, 1) == [2 ** 32 - 1]


def test_global_and_flat_atomics_64_bit_and_cmpswap() -> None:
    from rdna3isa import OPC

    from tinyhw.mocks.rdna3 import FlatMemory, ShaderFault

    mem = FlatMemory(0x10000, 0x1000)
    buf = mem.alloc(struct.pack("<QII", 2 ** 40, 7, 9))
    w = wave(mem=mem)
    w.s[126] = 1
    _lanes(w, 2, [buf & 0xFFFFFFFF])
    _lanes(w, 3, [buf >> 32])
    _lanes(w, 4, [5])
    _lanes(w, 5, [1])                                         # data = 2^32 + 5

    def flat(m: str, seg: int, vdst: int, data: int, offset: int = 0, glc: int = 1) -> list[int]:
        _enc, op = OPC[m]
        return [0xDC000000 | op << 18 | seg << 16 | glc << 14 | offset, vdst << 24 | 0x7C << 16 | data << 8 | 2]

    run(flat("global_atomic_add_u64", 2, 8, 4), w)
    assert struct.unpack_from("<Q", mem.read(buf, 8))[0] == 2 ** 40 + 2 ** 32 + 5
    assert _vals(w, 8, 1) == [0] and _vals(w, 9, 1) == [2 ** 40 >> 32]
    _lanes(w, 6, [100])                                       # new value
    _lanes(w, 7, [7])                                         # compare value: matches
    run(flat("flat_atomic_cmpswap_b32", 0, 10, 6, offset=8), w)
    assert struct.unpack_from("<I", mem.read(buf + 8, 4))[0] == 100 and _vals(w, 10, 1) == [7]
    run(flat("flat_atomic_cmpswap_b32", 0, 10, 6, offset=12), w)   # 9 != 7: unchanged
    assert struct.unpack_from("<I", mem.read(buf + 12, 4))[0] == 9 and _vals(w, 10, 1) == [9]
    run(flat("flat_load_b32", 0, 11, 0, offset=8), w)
    assert _vals(w, 11, 1) == [100]
    _lanes(w, 3, [0x8000_0000])                     # bit 63 set, not canonical, in no aperture: MEMVIOL
    with pytest.raises(ShaderFault, match="MEMVIOL"):
        run(flat("flat_load_b32", 0, 11, 0), w)


# ---- VOP3P packed 16-bit math ------------------------------------------------------------------------------------

def _vop3p(m: str, vdst: int, s0: int, s1: int, s2: int = 0, *, opsel: int = 0, opsel_hi: int = 7, neg_lo: int = 0,
           neg_hi: int = 0, clamp: int = 0) -> list[int]:
    from rdna3isa import OPC

    enc, op = OPC[m]
    assert enc == "VOP3P"
    w0 = 0xCC000000 | op << 16 | clamp << 15 | (opsel_hi >> 2 & 1) << 14 | opsel << 11 | neg_hi << 8 | vdst
    return [w0, neg_lo << 29 | (opsel_hi & 3) << 27 | s2 << 18 | s1 << 9 | s0]


def _halves(x: int) -> tuple[int, int]:
    return x & 0xFFFF, x >> 16


def test_packed_f16_math_with_op_sel_and_neg() -> None:
    rng = random.Random(11)
    a = [rng.getrandbits(16) & 0x5BFF | rng.getrandbits(16) << 16 & 0x5BFF0000 for _ in range(32)]
    b = [rng.getrandbits(16) & 0x5BFF | rng.getrandbits(16) << 16 & 0x5BFF0000 for _ in range(32)]
    c = [rng.getrandbits(16) & 0x5BFF | rng.getrandbits(16) << 16 & 0x5BFF0000 for _ in range(32)]
    for opsel, opsel_hi, neg_lo, neg_hi in ((0, 7, 0, 0), (0b011, 0b100, 0b001, 0b010), (0b110, 0b001, 0b111, 0)):
        w = wave()
        w.v[1], w.v[2], w.v[3] = a, b, c
        run(_vop3p("v_pk_fma_f16", 4, v(1), v(2), v(3), opsel=opsel, opsel_hi=opsel_hi, neg_lo=neg_lo,
                   neg_hi=neg_hi), w)
        for i in range(32):
            srcs = [_halves(x[i]) for x in (a, b, c)]

            def pick(sel: int, neg: int, srcs: list[tuple[int, int]] = srcs) -> list[Fraction]:
                return [exact(s[sel >> k & 1], "f16") * (-1 if neg >> k & 1 else 1) for k, s in enumerate(srcs)]
            lo, hi = pick(opsel, neg_lo), pick(opsel_hi, neg_hi)
            want_lo = round_float(lo[0] * lo[1] + lo[2], "f16")
            want_hi = round_float(hi[0] * hi[1] + hi[2], "f16")
            got_lo, got_hi = _halves(int(w.v[4, i]))
            for g, want in ((got_lo, want_lo), (got_hi, want_hi)):
                assert g == want or (g & 0x7FFF == 0 and want & 0x7FFF == 0), (i, opsel, opsel_hi)


def test_packed_integer_math_and_clamp() -> None:
    w = wave()
    _lanes(w, 1, [0xFFFF_0001, 0x8000_7FFF])
    _lanes(w, 2, [0x0002_FFFF, 0x0003_0002])
    run(_vop3p("v_pk_add_u16", 3, v(1), v(2)), w)
    assert _vals(w, 3, 2) == [0x0001_0000, 0x8003_8001]
    run(_vop3p("v_pk_add_u16", 3, v(1), v(2), clamp=1), w)
    assert _vals(w, 3, 2) == [0xFFFF_FFFF, 0x8003_8001]
    run(_vop3p("v_pk_mul_lo_u16", 3, v(1), v(2), opsel=0b01, opsel_hi=0b10), w)   # lo: a.hi*b.lo, hi: a.lo*b.hi
    assert _vals(w, 3, 2) == [(0xFFFF * 0xFFFF & 0xFFFF) | (1 * 2) << 16,
                              (0x8000 * 2 & 0xFFFF) | (0x7FFF * 3 & 0xFFFF) << 16]
    run(_vop3p("v_pk_add_u16", 3, 128 + 1, v(2)), w)      # inline 1: the 32-bit value 1 (high half 0)
    assert _vals(w, 3, 2) == [0x0002_0000, 0x0003_0003]


def test_frexp_mant_and_exp() -> None:
    xs = [1.0, 0.75, -6.0, 1e-40, -3e38, 0.0, -0.0, float("inf"), float("nan"), 2.0 ** -149]
    w = wave()
    _lanes(w, 1, [f32(x) for x in xs])
    run(vop1("v_frexp_mant_f32_e32", 2, v(1)), w)
    run(vop1("v_frexp_exp_i32_f32_e32", 3, v(1)), w)
    for i, x in enumerate(xs):
        x32 = from32(f32(x))
        if not math.isfinite(x32):
            assert int(w.v[2, i]) == f32(x32) or math.isnan(from32(int(w.v[2, i])))
            assert int(w.v[3, i]) == 0
            continue
        m, e = math.frexp(x32)                              # Python's frexp: m in [0.5, 1), exact
        assert int(w.v[2, i]) == f32(m) and int(w.v[3, i]) == e & 0xFFFFFFFF, x
