"""Table tests of the shader core's division helpers, VOP3 extras, VOP3P dot products, fma_mix and WMMA.

Instructions are assembled by llvm-mc-19 from their text (skipped without it), decoded and compiled by the core and
run on one wave. Expected values are computed here, independently of the core: ``fractions.Fraction`` with the
correct-rounding reference rdna3isa.round_float for float results, Python integers for the rest, and the register
layouts of the ISA reference / LLVM AMDGPUUsage written out element by element.
"""

from __future__ import annotations

import math
import random
import shutil
from fractions import Fraction

import numpy as np
import pytest
from rdna3isa import exact, f16, f32, from16, from32, go, round_float, wave

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")






def p2(e: int) -> int:
    """The f32 bits of 2**e (normal range)."""
    return (127 + e) << 23


# ---- the division macro: v_div_scale, v_rcp, fma refinement, v_div_fmas, v_div_fixup -------------------------------

DIV_MACRO = [  # LLVM's f32 division expansion (v0 = v0 / v1), as compilers emit it for gfx1100
    "v_div_scale_f32 v2, null, v1, v1, v0", "v_div_scale_f32 v5, vcc_lo, v0, v1, v0", "v_rcp_f32_e32 v3, v2",
    "v_fma_f32 v4, -v2, v3, 1.0", "v_fmac_f32_e32 v3, v4, v3", "v_mul_f32_e32 v4, v5, v3",
    "v_fma_f32 v6, -v2, v4, v5", "v_fmac_f32_e32 v4, v6, v3", "v_fma_f32 v2, -v2, v4, v5",
    "v_div_fmas_f32 v2, v2, v3, v4", "v_div_fixup_f32 v0, v2, v1, v0",
]


def test_division_macro_is_correctly_rounded_including_scaled_cases() -> None:
    """The whole macro gives the correctly rounded quotient, also where v_div_scale scales (denormal and huge
    quotients, denormal denominators) so v_div_fmas must post-scale; and the IEEE special cases via v_div_fixup."""
    rng = random.Random(5)
    pairs = [(1.0, 3.0), (-7.0, 2.0), (1e-40, 3.0), (3.0, 1e-40), (1e38, 1e-3), (1e-38, 1e30), (2.0 ** -149, 3.0),
             (3e38, 7e-39), (1.0, 0.0), (0.0, 0.0), (-1.0, float("inf")), (float("inf"), float("inf")),
             (5.0, -0.0), (float("nan"), 1.0)]
    while len(pairs) < 32:
        pairs.append((from32(rng.getrandbits(31) | rng.getrandbits(1) << 31),
                      from32(rng.getrandbits(31) | rng.getrandbits(1) << 31)))
    w = wave()
    w.v[0] = [f32(n) for n, _d in pairs]
    w.v[1] = [f32(d) for _n, d in pairs]
    nb, db = [int(x) for x in w.v[0]], [int(x) for x in w.v[1]]
    for line in DIV_MACRO:
        go(w, line)
    for i, (n, d) in enumerate(zip(nb, db, strict=True)):
        got = int(w.v[0, i])
        fn, fd = from32(n), from32(d)
        if math.isnan(fn) or math.isnan(fd) or (fn == 0 and fd == 0) or (abs(fn) == abs(fd) == float("inf")):
            assert got & 0x7F800000 == 0x7F800000 and got & 0x7FFFFF, (i, hex(got))        # a NaN
            continue
        sign = (n ^ d) & 0x80000000
        if fd == 0 or abs(fn) == float("inf"):
            assert got == sign | 0x7F800000, i
        elif fn == 0 or abs(fd) == float("inf"):
            assert got == sign, i
        else:
            assert got == round_float(exact(n, "f32") / exact(d, "f32"), "f32"), (i, fn, fd, hex(got))


def test_div_scale_branches_and_vcc() -> None:
    """Each branch of the guide's v_div_scale_f32 pseudocode (S0, S1 denominator, S2 numerator)."""
    one, three = f32(1.0), f32(3.0)
    cases = [  # (S0, S1, S2, D, VCC)
        (three, three, one, three, 0),                            # nothing to do: D = S0
        (one, 0, one, 0x7FC00000, 0),                              # zero denominator: NaN
        (one, one, 0, 0x7FC00000, 0),                              # zero numerator: NaN
        (p2(-100), p2(-100), p2(100), p2(-36), 1),                 # exponent(S2) - exponent(S1) >= 96, S0 == S1
        (p2(100), p2(-100), p2(100), p2(100), 1),                  # ... S0 != S1: flag only
        (p2(-100) | 1 << 31, p2(-100) | 1 << 31, p2(100), p2(-36) | 1 << 31, 1),   # signs kept (SDST is not ABS)
        (0x00000100, 0x00000100, p2(-40), p2(-141 + 64), 0),       # denormal denominator: scaled up
        (0x00000100, 0x00000100, one, p2(-141 + 64), 1),           # ... with a large numerator: the first branch
        (p2(-120), p2(10), p2(-120), p2(-56), 1),                  # the quotient is denormal, S0 == S2
        (p2(-110), p2(-20), p2(-110), p2(-46), 0),                 # exponent(S2) <= 23: the numerator is tiny
    ]
    w = wave()
    for col, k in ((0, 1), (1, 2), (2, 3)):
        w.v[k, :len(cases)] = [c[col] for c in cases]
    go(w, "v_div_scale_f32 v4, s10, v1, v2, v3")
    assert [int(x) for x in w.v[4, :len(cases)]] == [c[3] for c in cases]
    assert w.s[10] == sum(c[4] << i for i, c in enumerate(cases))


def test_div_fixup_special_cases_and_f16_f64_forms() -> None:
    q = f32(1.0 / 3.0)
    inf, nan = 0x7F800000, 0x7FC00000
    cases = [  # (quotient, denominator, numerator, result)
        (q, f32(3.0), f32(1.0), q), (q, f32(-3.0), f32(1.0), q | 1 << 31), (q, 0, 0, 0xFFC00000),
        (q, inf, inf, 0xFFC00000), (q, 0, f32(-2.0), 0xFF800000), (q, f32(2.0), inf, inf), (q, inf, f32(1.0), 0),
        (q, f32(-2.0), 0, 1 << 31), (q, f32(1.0), 0x7F800001, 0x7FC00001), (q, 0x7F800002, f32(1.0), 0x7FC00002),
        (q, nan, 0x7FA00000, 0x7FE00000), (q, p2(100), p2(-100), 0),
    ]
    w = wave()
    for col, k in ((0, 1), (1, 2), (2, 3)):
        w.v[k, :len(cases)] = [c[col] for c in cases]
    go(w, "v_div_fixup_f32 v4, v1, v2, v3")
    assert [hex(int(x)) for x in w.v[4, :len(cases)]] == [hex(c[3]) for c in cases]
    w = wave()
    w.v[1, :4] = [f16(0.5), f16(0.5), f16(0.5), 0x0001]
    w.v[2, :4] = [f16(2.0), 0, 0x7C00, f16(2.0 ** 15)]
    w.v[3, :4] = [f16(-1.0), f16(1.0), 0, f16(2.0 ** -14)]       # the last: the f16 pseudocode has no underflow
    w.v[4] = 0xABCD0000
    go(w, "v_div_fixup_f16 v4, v1, v2, v3")
    assert [int(x) for x in w.v[4, :4]] == [0xABCD0000 | f16(-0.5), 0xABCD7C00, 0xABCD0000, 0xABCD0001]


def test_div_fmas_post_scales_only_vcc_lanes() -> None:
    w = wave()
    w.v[1, :3] = [f32(2.0), f32(1.5), f32(1.0 / 3)]
    w.v[2, :3] = [f32(3.0), f32(3.0), f32(3.0)]
    w.v[3, :3] = [f32(1.0), p2(40), p2(-1)]
    w.s[106] = 0b110
    go(w, "v_div_fmas_f32 v4, v1, v2, v3")
    want = [f32(7.0),
            round_float((Fraction(9, 2) + Fraction(2) ** 40) * Fraction(2) ** 64, "f32"),
            round_float((exact(f32(1.0 / 3), "f32") * 3 + Fraction(1, 2)) * Fraction(2) ** -64, "f32")]
    assert [int(x) for x in w.v[4, :3]] == want


# ---- VOP3 integer extras -----------------------------------------------------------------------------------------

def _bytes(x: int) -> list[int]:
    return [x >> 8 * i & 0xFF for i in range(4)]


def test_sad_msad_perm_lerp_bfm() -> None:
    rng = random.Random(3)
    a, b, c = ([rng.getrandbits(32) for _ in range(32)] for _ in range(3))
    b[0] &= 0xFF00FF00            # zero reference bytes for v_msad_u8
    sel = [rng.choice([0, 3, 7, 8, 9, 10, 11, 12, 13, 0xFF]) | rng.getrandbits(3) << 8 | 0x0C << 16 | 0x0D << 24
           for _ in range(32)]
    w = wave()
    w.v[1], w.v[2], w.v[3], w.v[9] = a, b, c, sel
    want = {
        "v_sad_u8": [(z + sum(abs(p - q) for p, q in zip(_bytes(x), _bytes(y), strict=True))) & 0xFFFFFFFF
                     for x, y, z in zip(a, b, c, strict=True)],
        "v_sad_hi_u8": [(z + (sum(abs(p - q) for p, q in zip(_bytes(x), _bytes(y), strict=True)) << 16)) & 0xFFFFFFFF
                        for x, y, z in zip(a, b, c, strict=True)],
        "v_msad_u8": [(z + sum(abs(p - q) for p, q in zip(_bytes(x), _bytes(y), strict=True) if q)) & 0xFFFFFFFF
                      for x, y, z in zip(a, b, c, strict=True)],
        "v_sad_u16": [(z + abs((x & 0xFFFF) - (y & 0xFFFF)) + abs((x >> 16) - (y >> 16))) & 0xFFFFFFFF
                      for x, y, z in zip(a, b, c, strict=True)],
        "v_sad_u32": [(abs(x - y) + z) & 0xFFFFFFFF for x, y, z in zip(a, b, c, strict=True)],
        "v_lerp_u8": [sum(((p + q + (z >> 8 * i & 1)) >> 1) << 8 * i
                          for i, (p, q) in enumerate(zip(_bytes(x), _bytes(y), strict=True)))
                      for x, y, z in zip(a, b, c, strict=True)],
    }
    for name, exp in want.items():
        go(w, f"{name} v4, v1, v2, v3")
        assert [int(x) for x in w.v[4]] == exp, name

    def perm(x: int, y: int, s: int) -> int:
        data = (x << 32 | y).to_bytes(8, "little")
        out = 0
        for i in range(4):
            k = s >> 8 * i & 0xFF
            byte = (0xFF if k >= 13 else 0 if k == 12 else 0xFF * (data[2 * (k - 8) + 1] >> 7) if k >= 8
                    else data[k])
            out |= byte << 8 * i
        return out
    go(w, "v_perm_b32 v4, v1, v2, v9")
    assert [int(x) for x in w.v[4]] == [perm(x, y, s) for x, y, s in zip(a, b, sel, strict=True)]
    go(w, "v_bfm_b32 v4, v1, v2")
    assert [int(x) for x in w.v[4]] == [((1 << (x & 31)) - 1) << (y & 31) & 0xFFFFFFFF for x, y in
                                        zip(a, b, strict=True)]


def test_16_bit_min3_max3_med3_keep_the_other_half_and_op_sel() -> None:
    rng = random.Random(8)
    a, b, c = ([rng.getrandbits(32) for _ in range(32)] for _ in range(3))
    w = wave()
    w.v[1], w.v[2], w.v[3], w.v[4] = a, b, c, [0x12345678] * 32

    def s16(x: int) -> int:
        return x - 0x10000 if x >> 15 else x
    for name, fn in (("v_min3_i16", lambda *t: min(map(s16, t)) & 0xFFFF), ("v_max3_u16", max),
                     ("v_med3_i16", lambda *t: sorted(map(s16, t))[1] & 0xFFFF),
                     ("v_med3_u16", lambda *t: sorted(t)[1])):
        go(w, f"{name} v4, v1, v2, v3 op_sel:[1,0,1,1]")          # S0 and S2 high halves, result to the high half
        want = [0x5678 | fn(x >> 16, y & 0xFFFF, z >> 16) << 16 for x, y, z in zip(a, b, c, strict=True)]
        assert [int(x) for x in w.v[4]] == want, name


def test_maxmin_minmax_and_packed_converts() -> None:
    w = wave()
    xs = [(1.0, 5.0, 3.0), (-0.0, 0.0, 1.0), (7.0, 2.0, -1.0), (float("nan"), 2.0, 9.0)]
    for col, k in ((0, 1), (1, 2), (2, 3)):
        w.v[k, :4] = [f32(r[col]) for r in xs]
    go(w, "v_maxmin_f32 v4, v1, v2, v3")
    assert [int(x) for x in w.v[4, :4]] == [f32(3.0), 0, f32(-1.0), f32(2.0)]
    go(w, "v_minmax_f32 v4, v1, v2, v3")
    assert [int(x) for x in w.v[4, :4]] == [f32(3.0), f32(1.0), f32(2.0), f32(9.0)]
    w.v[1, :4] = [f32(x) for x in (40000.0, -40000.0, -1.5, float("nan"))]
    w.v[2, :4] = [f32(x) for x in (2.9, 70000.0, -0.5, 1.0)]
    go(w, "v_cvt_pk_i16_f32 v4, v1, v2")
    assert [int(x) for x in w.v[4, :4]] == [0x7FFF | 2 << 16, 0x8000 | 0x7FFF << 16, 0xFFFF, 1 << 16]
    go(w, "v_cvt_pk_u16_f32 v4, v1, v2")
    assert [int(x) for x in w.v[4, :4]] == [40000 | 2 << 16, 0 | 0xFFFF << 16, 0, 1 << 16]
    w.v[1, :2] = [70000, 0xFFFF8000]
    w.v[2, :2] = [5, 0x7FFFFFFF]
    go(w, "v_cvt_pk_u16_u32 v4, v1, v2")
    assert [int(x) for x in w.v[4, :2]] == [0xFFFF | 5 << 16, 0xFFFF | 0xFFFF << 16]
    go(w, "v_cvt_pk_i16_i32 v4, v1, v2")
    assert [int(x) for x in w.v[4, :2]] == [0x7FFF | 5 << 16, 0x8000 | 0x7FFF << 16]


def test_dx9_zero_multiplies() -> None:
    w = wave()
    w.v[1, :4] = [0, 1 << 31, f32(2.0), f32(3.0)]
    w.v[2, :4] = [0x7F800000, 0x7FC00000, f32(3.0), 1 << 31]
    w.v[3, :4] = [f32(5.0)] * 4
    go(w, "v_mul_dx9_zero_f32_e32 v4, v1, v2")
    assert [int(x) for x in w.v[4, :4]] == [0, 0, f32(6.0), 0]
    go(w, "v_fma_dx9_zero_f32 v4, v1, v2, v3")
    assert [int(x) for x in w.v[4, :4]] == [f32(5.0), f32(5.0), f32(11.0), f32(5.0)]


# ---- VOP3P dot products and fma_mix --------------------------------------------------------------------------------

def _rand_h(rng: random.Random) -> int:
    return rng.getrandbits(16) & 0xBBFF        # finite f16 values of moderate magnitude, both signs


def test_dot2_f32_f16_sequential_rounding_neg_and_clamp() -> None:
    rng = random.Random(21)
    a = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    b = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    c = [f32(rng.uniform(-4, 4)) for _ in range(32)]
    c[0] = f32(1.0)
    a[0], b[0] = f16(2.0 ** -11) | f16(2.0 ** -11) << 16, f16(1.0) | f16(1.0) << 16   # 1 + 2^-11 + 2^-11: two adds
    w = wave()
    w.v[1], w.v[2], w.v[3] = a, b, c
    for mods, na, clamp in (("", 0, False), (" neg_lo:[1,0,0] neg_hi:[0,1,0]", 1, False), (" clamp", 0, True)):
        go(w, "v_dot2_f32_f16 v4, v1, v2, v3" + mods)
        for i in range(32):
            lo = exact(a[i] & 0xFFFF, "f16") * exact(b[i] & 0xFFFF, "f16") * (-1 if na else 1)
            hi = exact(a[i] >> 16, "f16") * exact(b[i] >> 16, "f16") * (-1 if na else 1)
            t = round_float(exact(c[i], "f32") + lo, "f32")
            t = round_float(exact(t, "f32") + hi, "f32")
            if clamp:
                x = from32(t)
                t = f32(min(max(x, 0.0), 1.0)) if not math.isnan(x) else 0
            assert int(w.v[4, i]) == t or (int(w.v[4, i]) | t) == 1 << 31, (i, mods)


def test_dot4_dot8_integer_signedness_and_clamp() -> None:
    rng = random.Random(4)
    a = [rng.getrandbits(32) for _ in range(32)]
    b = [rng.getrandbits(32) for _ in range(32)]
    c = [rng.getrandbits(32) for _ in range(32)]
    a[0], b[0], c[0] = 0x7F7F7F7F, 0x7F7F7F7F, 0x7FFFFF00      # overflows: clamp saturates
    w = wave()
    w.v[1], w.v[2], w.v[3] = a, b, c

    def el(x: int, bits: int, signed: bool) -> list[int]:
        out = []
        for k in range(32 // bits):
            e = x >> bits * k & ((1 << bits) - 1)
            out.append(e - (1 << bits) if signed and e >> (bits - 1) else e)
        return out
    for name, bits, sa, sb, clamp, mods in (("v_dot4_u32_u8", 8, 0, 0, 0, ""), ("v_dot4_i32_iu8", 8, 1, 1, 0,
                                            " neg_lo:[1,1,0]"), ("v_dot4_i32_iu8", 8, 1, 0, 1,
                                            " neg_lo:[1,0,0] clamp"), ("v_dot8_i32_iu4", 4, 0, 1, 0,
                                            " neg_lo:[0,1,0]"), ("v_dot8_u32_u4", 4, 0, 0, 1, " clamp")):
        go(w, f"{name} v4, v1, v2, v3{mods}")
        signed_out = "_i32_" in name
        for i in range(32):
            acc = (c[i] - (1 << 32) if signed_out and c[i] >> 31 else c[i])
            acc += sum(x * y for x, y in zip(el(a[i], bits, bool(sa)), el(b[i], bits, bool(sb)), strict=True))
            if clamp:
                acc = max(-(1 << 31), min((1 << 31) - 1, acc)) if signed_out else max(0, min(0xFFFFFFFF, acc))
            assert int(w.v[4, i]) == acc & 0xFFFFFFFF, (name, mods, i)


def test_fma_mix_single_rounding_and_halves() -> None:
    rng = random.Random(9)
    a = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    b = [f32(rng.uniform(-100, 100)) for _ in range(32)]
    c = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    w = wave()
    w.v[1], w.v[2], w.v[3], w.v[4] = a, b, c, [0xDEAD0000 | i for i in range(32)]
    # S0: f16 high half, S1: f32 negated, S2: f16 low half with abs
    go(w, "v_fma_mix_f32 v5, v1, -v2, |v3| op_sel:[1,0,0] op_sel_hi:[1,0,1]")
    go(w, "v_fma_mixlo_f16 v4, v1, -v2, |v3| op_sel:[1,0,0] op_sel_hi:[1,0,1]")
    for i in range(32):
        x = exact(a[i] >> 16, "f16") * -exact(b[i], "f32") + abs(exact(c[i] & 0xFFFF, "f16"))
        assert int(w.v[5, i]) == round_float(x, "f32"), i
        assert int(w.v[4, i]) == 0xDEAD0000 | round_float(x, "f16"), i
    go(w, "v_fma_mixhi_f16 v4, v1, v2, v3 op_sel_hi:[1,1,1] clamp")      # v2's low half read as f16
    for i in range(32):
        x = exact(a[i] & 0xFFFF, "f16") * exact(b[i] & 0xFFFF, "f16") + exact(c[i] & 0xFFFF, "f16")
        r = round_float(x, "f16")
        r = f16(min(max(from16(r), 0.0), 1.0))
        assert int(w.v[4, i]) >> 16 == r and int(w.v[4, i]) & 0xFFFF == (0xDEAD0000 | round_float(
            exact(a[i] >> 16, "f16") * -exact(b[i], "f32") + abs(exact(c[i] & 0xFFFF, "f16")), "f16")) & 0xFFFF, i


# ---- WMMA ---------------------------------------------------------------------------------------------------------

def _load_ab(w, base: int, m: list[list[int]], per_reg: int, bits: int, row_major: bool) -> None:
    """Place a 16x16 operand in the gfx11 layout: lane l (and l + 16) holds row l (A) / column l (B), K element k
    at VGPR base + k // per_reg, bit offset bits * (k % per_reg)."""
    for lane in range(32):
        for k in range(16):
            val = m[lane % 16][k] if row_major else m[k][lane % 16]
            r = base + k // per_reg
            sh = bits * (k % per_reg)
            w.v[r, lane] = (int(w.v[r, lane]) & ~(((1 << bits) - 1) << sh)) | (val & ((1 << bits) - 1)) << sh


def _c_get(w, base: int, row: int, col: int) -> int:
    """Element (row, col) of a C/D matrix: VGPR base + row // 2, lane col + 16 * (row % 2)."""
    return int(w.v[base + row // 2, col + 16 * (row % 2)])


def _c_put(w, base: int, row: int, col: int, val: int) -> None:
    w.v[base + row // 2, col + 16 * (row % 2)] = val


@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_wmma_f32_layout_and_single_rounding(kind: str) -> None:
    rng = random.Random(16 if kind == "f16" else 17)

    def rnd() -> int:
        x = rng.uniform(-3, 3) * 2.0 ** rng.randint(-8, 8)
        return f16(x) if kind == "f16" else f32(x) >> 16

    def val(h: int) -> Fraction:
        return exact(h, "f16") if kind == "f16" else exact(h << 16, "f32")
    A = [[rnd() for _ in range(16)] for _ in range(16)]
    B = [[rnd() for _ in range(16)] for _ in range(16)]
    C = [[f32(rng.uniform(-100, 100)) for _ in range(16)] for _ in range(16)]
    A[0][0], B[0][0], C[0][0] = (f16(1.0), f16(2.0 ** -11), f32(1.0)) if kind == "f16" else (0x3F80, 0x3380, f32(1.0))
    A[0][1:], B[1:16] = [0] * 15, [[0] * 16 for _ in range(15)]
    w = wave()
    _load_ab(w, 8, A, 2, 16, True)
    _load_ab(w, 16, B, 2, 16, False)
    for r in range(16):
        for cc in range(16):
            _c_put(w, 0, r, cc, C[r][cc])
    go(w, f"v_wmma_f32_16x16x16_{kind} v[0:7], v[8:15], v[16:23], v[0:7]")
    for r in range(16):
        for cc in range(16):
            x = sum(val(A[r][k]) * val(B[k][cc]) for k in range(16)) + exact(C[r][cc], "f32")
            assert _c_get(w, 0, r, cc) == round_float(x, "f32"), (r, cc)


def test_wmma_f16_output_op_sel_keeps_the_other_half() -> None:
    rng = random.Random(18)
    A = [[f16(rng.uniform(-2, 2)) for _ in range(16)] for _ in range(16)]
    B = [[f16(rng.uniform(-2, 2)) for _ in range(16)] for _ in range(16)]
    C = [[f16(rng.uniform(-8, 8)) for _ in range(16)] for _ in range(16)]
    for hi in (0, 1):
        w = wave()
        _load_ab(w, 8, A, 2, 16, True)
        _load_ab(w, 16, B, 2, 16, False)
        for r in range(16):
            for cc in range(16):
                _c_put(w, 0, r, cc, (C[r][cc] << 16 | 0x1234) if hi else (0x5678 << 16 | C[r][cc]))
        go(w, "v_wmma_f16_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]" + (" op_sel:[0,0,1]" if hi else ""))
        for r in range(16):
            for cc in range(16):
                x = sum(exact(A[r][k], "f16") * exact(B[k][cc], "f16") for k in range(16)) + exact(C[r][cc], "f16")
                want = round_float(x, "f16")
                got = _c_get(w, 0, r, cc)
                assert got == ((want << 16 | 0x1234) if hi else (0x5678 << 16 | want)), (hi, r, cc)


@pytest.mark.parametrize("kind", ["iu8", "iu4"])
def test_wmma_i32_signedness_and_clamp(kind: str) -> None:
    rng = random.Random(19)
    bits, per = (8, 4) if kind == "iu8" else (4, 8)
    A = [[rng.getrandbits(bits) for _ in range(16)] for _ in range(16)]
    B = [[rng.getrandbits(bits) for _ in range(16)] for _ in range(16)]
    C = [[rng.getrandbits(32) for _ in range(16)] for _ in range(16)]
    C[0][0] = 0x7FFFFFF0
    A[0] = [(1 << (bits - 1)) - 1] * 16
    for r in range(16):
        B[r][0] = (1 << (bits - 1)) - 1

    def sx(x: int, signed: bool) -> int:
        return x - (1 << bits) if signed and x >> (bits - 1) else x
    nb = 16 // per
    text = f"v_wmma_i32_16x16x16_{kind} v[0:7], v[8:{7 + nb}], v[{8 + nb}:{7 + 2 * nb}], v[0:7]"
    for sa, sb, clamp in ((0, 0, 0), (1, 0, 0), (1, 1, 1)):
        w = wave()
        _load_ab(w, 8, A, per, bits, True)
        _load_ab(w, 8 + nb, B, per, bits, False)
        for r in range(16):
            for cc in range(16):
                _c_put(w, 0, r, cc, C[r][cc])
        mods = (f" neg_lo:[{sa},{sb},0]" if sa or sb else "") + (" clamp" if clamp else "")
        go(w, text + mods)
        for r in range(16):
            for cc in range(16):
                acc = (C[r][cc] - (1 << 32) if C[r][cc] >> 31 else C[r][cc])
                acc += sum(sx(A[r][k], bool(sa)) * sx(B[k][cc], bool(sb)) for k in range(16))
                if clamp:
                    acc = max(-(1 << 31), min((1 << 31) - 1, acc))
                assert _c_get(w, 0, r, cc) == acc & 0xFFFFFFFF, (mods, r, cc)


def test_wmma_refuses_partial_exec() -> None:
    from tinyhw.mocks.rdna3 import Unimplemented

    w = wave()
    w.s[126] = 0xFFFF
    with pytest.raises(Unimplemented, match="EXEC"):
        go(w, "v_wmma_f32_16x16x16_f16 v[0:7], v[8:15], v[16:23], v[0:7]")
    assert np.all(w.v[:8] == 0)


# ---- memory: d16 loads/stores and float atomics --------------------------------------------------------------------

def _mem_wave(data: bytes):
    from tinyhw.mocks.rdna3 import FlatMemory

    mem = FlatMemory(0x10000, 0x1000)
    buf = mem.alloc(data)
    w = wave(mem=mem)
    w.v[2] = buf & 0xFFFFFFFF
    w.v[3] = buf >> 32
    return w, mem, buf


def test_global_d16_loads_keep_the_other_half_and_hi_stores() -> None:
    w, mem, buf = _mem_wave(bytes([0x81, 0x7F, 0x34, 0x12, 0, 0, 0, 0]))
    w.s[126] = 1
    w.v[4] = 0xAAAABBBB
    for text, want in (("global_load_d16_u8 v4, v[2:3], off", 0xAAAA0081),
                       ("global_load_d16_hi_i8 v4, v[2:3], off", 0xFF810081),
                       ("global_load_d16_i8 v4, v[2:3], off offset:1", 0xFF81007F),
                       ("global_load_d16_b16 v4, v[2:3], off offset:2", 0xFF811234),
                       ("global_load_d16_hi_b16 v4, v[2:3], off offset:2", 0x12341234),
                       ("global_load_d16_hi_u8 v4, v[2:3], off", 0x00811234)):
        go(w, text)
        assert int(w.v[4, 0]) == want, text
    w.v[5] = 0xCAFEBEEF
    go(w, "global_store_d16_hi_b16 v[2:3], v5, off offset:4")
    go(w, "global_store_d16_hi_b8 v[2:3], v5, off offset:6")
    assert mem.read(buf + 4, 4) == bytes([0xFE, 0xCA, 0xFE, 0])


def test_ds_d16_loads_and_hi_stores() -> None:
    w = wave()
    w.lds[:4] = [0x80, 0x01, 0xFE, 0xFF]
    w.v[1] = 0
    w.v[4] = 0x11112222
    w.s[126] = 1
    for text, want in (("ds_load_u8_d16_hi v4, v1", 0x00802222), ("ds_load_i8_d16 v4, v1", 0x0080FF80),
                       ("ds_load_u16_d16 v4, v1 offset:2", 0x0080FFFE),
                       ("ds_load_i8_d16_hi v4, v1 offset:1", 0x0001FFFE),
                       ("ds_load_u16_d16_hi v4, v1", 0x0180FFFE), ("ds_load_u8_d16 v4, v1 offset:3", 0x018000FF)):
        go(w, text)
        assert int(w.v[4, 0]) == want, text
    w.v[5] = 0xABCD1234
    go(w, "ds_store_b16_d16_hi v1, v5 offset:8")
    go(w, "ds_store_b8_d16_hi v1, v5 offset:10")
    assert list(w.lds[8:12]) == [0xCD, 0xAB, 0xCD, 0]


F32_ATOMIC = {  # the ISA pseudocode on Python floats rounded through struct
    "add": lambda o, d, e: f32(from32(o) + from32(d)),
    "min": lambda o, d, e: d if from32(d) < from32(o) else o,
    "max": lambda o, d, e: d if from32(d) > from32(o) else o,
    "cmpswap": lambda o, d, e: d if from32(o) == from32(e) else o,
}


@pytest.mark.parametrize("op", sorted(F32_ATOMIC))
def test_global_and_flat_float_atomics_in_lane_order(op: str) -> None:
    import struct

    olds = [f32(x) for x in (1.5, -0.0, 3.0, 1e30)] + [0x7FC00000]
    w, mem, buf = _mem_wave(struct.pack("<5I", *olds))
    w.s[126] = 0b111111
    offs = [0, 4, 8, 12, 16, 0]                                # lanes 0 and 5 hit the same dword
    w.v[2, :6] = [(buf + o) & 0xFFFFFFFF for o in offs]
    w.v[3, :6] = [(buf + o) >> 32 for o in offs]
    data = [f32(x) for x in (2.25, 0.0, 3.0, 1e-30, 1.0, 0.125)]
    cmp = [f32(x) for x in (1.5, 0.0, 2.0, 1e30, 1.0, 3.75)]
    w.v[6, :6] = data
    w.v[7, :6] = cmp
    src = "v[6:7]" if op == "cmpswap" else "v6"
    prefix = "flat" if op == "min" else "global"
    go(w, f"{prefix}_atomic_{op}_f32 v4, v[2:3], {src}{', off' if prefix == 'global' else ''} glc")
    mem_now, rets = list(olds), []
    for lane in range(6):
        i = offs[lane] // 4
        rets.append(mem_now[i])
        mem_now[i] = F32_ATOMIC[op](mem_now[i], data[lane], cmp[lane])
    assert list(struct.unpack("<5I", mem.read(buf, 20))) == mem_now
    assert [int(x) for x in w.v[4, :6]] == rets


def test_ds_float_atomics_f32_and_f64() -> None:
    import struct

    w = wave()
    w.s[126] = 0b111
    w.lds[:8] = np.frombuffer(struct.pack("<2f", 1.0, 2.0 ** 24), dtype=np.uint8)
    w.v[1, :3] = [0, 4, 0]
    w.v[2, :3] = [f32(0.5), f32(1.0), f32(0.25)]
    go(w, "ds_add_rtn_f32 v4, v1, v2")
    assert [int(x) for x in w.v[4, :3]] == [f32(1.0), f32(2.0 ** 24), f32(1.5)]
    assert struct.unpack("<2f", w.lds[:8].tobytes()) == (1.75, 2.0 ** 24)        # 2^24 + 1 rounds to even
    w.lds[16:32] = np.frombuffer(struct.pack("<2d", 5.0, -1.0), dtype=np.uint8)
    w.v[1, :3] = [16, 24, 16]
    w.v[2, :3] = [0, 0, 0]
    w.v[3, :3] = [0x40200000, 0xC0000000, 0x40100000]         # high dwords: 8.0, -2.0, 4.0
    go(w, "ds_max_rtn_f64 v[4:5], v1, v[2:3]")
    assert struct.unpack("<2d", w.lds[16:32].tobytes()) == (8.0, -1.0)
    go(w, "ds_min_f64 v1, v[2:3]")
    assert struct.unpack("<2d", w.lds[16:32].tobytes()) == (4.0, -2.0)
    w.v[1, :3] = [0, 0, 0]
    w.v[2, :3] = [f32(9.0), 0, 0]                                # new value (DATA)
    w.v[3, :3] = [f32(1.75), f32(1.0), f32(1.0)]                 # compare value (DATA2)
    w.s[126] = 1
    go(w, "ds_cmpstore_rtn_f32 v4, v1, v2, v3")
    assert struct.unpack("<f", w.lds[:4].tobytes())[0] == 9.0 and int(w.v[4, 0]) == f32(1.75)


# ---- buffer (MUBUF) through a V# -----------------------------------------------------------------------------------

def _vsharp(w, base: int, stride: int, nrec: int, oob: int, add_tid: int = 0) -> None:
    """A V# in s[8:11]: BASE, STRIDE (dword 1 bits 29:16), NUM_RECORDS, ADD_TID_ENABLE (bit 23), OOB_SELECT (29:28)."""
    w.s[8], w.s[9] = base & 0xFFFFFFFF, (base >> 32) & 0xFFFF | stride << 16
    w.s[10], w.s[11] = nrec, 0x14 << 12 | add_tid << 23 | oob << 28


def test_buffer_raw_loads_and_stores_are_range_checked_per_dword() -> None:
    import struct

    w, mem, buf = _mem_wave(struct.pack("<8I", *range(100, 108)))
    _vsharp(w, buf, 0, 20, 3)                                  # raw: 20 bytes = dwords 0..4
    w.s[126] = 0b111
    w.s[2] = 4                                                 # SOFFSET: not part of the range check
    w.v[1, :3] = [0, 8, 12]
    go(w, "buffer_load_b64 v[4:5], v1, s[8:11], s2 offen offset:4")   # dwords at 8+off .. (soffset 4)
    # lane 0: offset 4 (+4 soffset) -> dwords 2,3 ok; lane 1: offset 12 -> 3 ok, 16+4=20 ok; lane 2: 16 ok, 20 oob
    assert [int(x) for x in w.v[4, :3]] == [102, 104, 105] and [int(x) for x in w.v[5, :3]] == [103, 105, 0]
    w.v[6, :3] = [7, 8, 9]
    go(w, "buffer_store_b32 v6, v1, s[8:11], 0 offen offset:8")      # offsets 8, 16, 20 (the last out of range)
    assert list(struct.unpack("<8I", mem.read(buf, 32))) == [100, 101, 7, 103, 8, 105, 106, 107]
    go(w, "buffer_load_u16 v7, v1, s[8:11], 0 offen offset:8")       # offsets 8, 16, 20: a 2-byte access at 20
    assert [int(x) for x in w.v[7, :3]] == [7, 8, 0]


def test_buffer_structured_index_stride_add_tid_and_atomics() -> None:
    import struct

    w, mem, buf = _mem_wave(struct.pack("<16I", *range(16)))
    _vsharp(w, buf, 8, 3, 1)                                   # 8-byte records, 3 of them, index checked
    w.s[126] = 0b1111
    w.v[1, :4] = [0, 1, 2, 3]
    go(w, "buffer_load_b32 v4, v1, s[8:11], 0 idxen offset:4")
    assert [int(x) for x in w.v[4, :4]] == [1, 3, 5, 0]
    w.v[5, :4] = [10, 20, 30, 40]
    go(w, "buffer_atomic_add_u32 v5, v1, s[8:11], 0 idxen glc")
    assert [int(x) for x in w.v[5, :4]] == [0, 2, 4, 0]
    assert list(struct.unpack("<8I", mem.read(buf, 32))) == [10, 1, 22, 3, 34, 5, 6, 7]
    _vsharp(w, buf, 4, 100, 1, add_tid=1)                      # ADD_TID_ENABLE: the lane id joins the index
    w.v[1, :4] = [8, 8, 8, 8]
    go(w, "buffer_load_b32 v6, v1, s[8:11], 0 idxen")
    assert [int(x) for x in w.v[6, :4]] == [8, 9, 10, 11]
    _vsharp(w, buf, 0, 0, 2)                                   # OOB_SELECT 2: no range check
    w.v[1, :4] = [0, 4, 8, 12]
    go(w, "buffer_load_b32 v6, v1, s[8:11], 0 offen")
    assert [int(x) for x in w.v[6, :4]] == [10, 1, 22, 3]


# ---- the rest of VOP1/VOP3: trig_preop, qsad, norm converts, small forms ------------------------------------------

def _two_over_pi_fraction_bits(n: int) -> int:
    """floor(2/pi * 2**n) from a decimal-arithmetic pi (the series of the Python decimal module's recipe; a method
    other than the core's)."""
    import decimal

    with decimal.localcontext() as ctx:
        ctx.prec = n // 3 + 40
        three = decimal.Decimal(3)
        lasts, t, s, k, na, d, da = 0, three, 3, 1, 0, 0, 24
        while s != lasts:
            lasts = s
            k, na = k + na, na + 8
            d, da = d + da, da + 32
            t = (t * k) / d
            s += t
        return int((decimal.Decimal(2) / s) * (decimal.Decimal(2) ** n))


def test_trig_preop_segments_of_two_over_pi() -> None:
    from rdna3isa import f64, from64

    bits = _two_over_pi_fraction_bits(1201)
    w = wave()
    xs = [1.0, 1.0, 1.0, 2.0 ** 60, 1e300, -3.0]
    segs = [0, 1, 2, 0, 1, 22]
    for i, (x, k) in enumerate(zip(xs, segs, strict=True)):
        u = f64(x)
        w.v[2, i], w.v[3, i], w.v[4, i] = u & 0xFFFFFFFF, u >> 32, k
    go(w, "v_trig_preop_f64 v[6:7], v[2:3], v4")
    for i, (x, k) in enumerate(zip(xs, segs, strict=True)):
        e = f64(x) >> 52 & 0x7FF
        shift = 53 * k + max(e - 1077, 0)
        chunk = (bits >> (1201 - 53 - shift) if 1201 - 53 - shift >= 0 else bits << (53 + shift - 1201)) & (2 ** 53 - 1)
        want = Fraction(chunk) * Fraction(2) ** (-53 - shift + (128 if e >= 1968 else 0))
        got = from64(int(w.v[6, i]) | int(w.v[7, i]) << 32)
        assert Fraction(got) == Fraction(float(want)), (i, got, float(want))
    seg = [from64(int(w.v[6, i]) | int(w.v[7, i]) << 32) for i in range(3)]
    assert abs(Fraction(seg[0]) + Fraction(seg[1]) + Fraction(seg[2]) - Fraction(bits, 2 ** 1201)) < Fraction(2) ** -158


def test_qsad_pk_and_norm_converts() -> None:
    rng = random.Random(12)
    a = [rng.getrandbits(64) for _ in range(32)]
    b = [rng.getrandbits(32) for _ in range(32)]
    c = [rng.getrandbits(64) for _ in range(32)]
    w = wave()
    w.v[2], w.v[3] = [x & 0xFFFFFFFF for x in a], [x >> 32 for x in a]
    w.v[4] = b
    w.v[6], w.v[7] = [x & 0xFFFFFFFF for x in c], [x >> 32 for x in c]
    for name, masked in (("v_qsad_pk_u16_u8", False), ("v_mqsad_pk_u16_u8", True)):
        go(w, f"{name} v[8:9], v[2:3], v4, v[6:7]")
        for i in range(32):
            want = 0
            for k in range(4):
                win, acc = a[i] >> 8 * k & 0xFFFFFFFF, c[i] >> 16 * k & 0xFFFF
                sad = acc + sum(abs(p - q) for p, q in zip(_bytes(win), _bytes(b[i]), strict=True)
                                if q or not masked)
                want |= (sad & 0xFFFF) << 16 * k
            assert int(w.v[8, i]) | int(w.v[9, i]) << 32 == want, (name, i)
    xs = [0.5, -0.5, 1.5, -2.0, 0.0, float("nan"), 1.0 / 65535, 0.25 / 32767, 3.0 / 65535 / 2]
    w.v[1, :len(xs)] = [f32(x) for x in xs]
    w.v[5, :len(xs)] = [f16(x) for x in xs]

    def rne(x: Fraction) -> int:
        n = math.floor(x)
        return n + (1 if x - n > Fraction(1, 2) or (x - n == Fraction(1, 2) and n & 1) else 0)

    def snorm(bits: int, fmt: str) -> int:
        x = exact(bits, fmt) if (bits >> (10 if fmt == "f16" else 23) & (0x1F if fmt == "f16" else 0xFF)) != (
            0x1F if fmt == "f16" else 0xFF) else Fraction(0)
        return rne(min(max(x, Fraction(-1)), Fraction(1)) * 32767) & 0xFFFF

    def unorm(bits: int, fmt: str) -> int:
        x = exact(bits, fmt) if (bits >> (10 if fmt == "f16" else 23) & (0x1F if fmt == "f16" else 0xFF)) != (
            0x1F if fmt == "f16" else 0xFF) else Fraction(0)
        return rne(min(max(x, Fraction(0)), Fraction(1)) * 65535)
    go(w, "v_cvt_pk_norm_i16_f32 v8, v1, v1")
    assert [int(x) & 0xFFFF for x in w.v[8, :len(xs)]] == [snorm(f32(x), "f32") for x in xs]
    go(w, "v_cvt_pk_norm_u16_f16 v8, v5, v5")
    assert [int(x) >> 16 for x in w.v[8, :len(xs)]] == [unorm(f16(x), "f16") for x in xs]
    w.v[8] = 0xBEEF0000
    go(w, "v_cvt_norm_i16_f16_e32 v8, v5")
    assert [int(x) for x in w.v[8, :len(xs)]] == [0xBEEF0000 | snorm(f16(x), "f16") for x in xs]


def test_small_vop1_vop3_forms() -> None:
    w = wave()
    w.v[1, :4] = [0x0, 0x7, 0x8, 0xF3]
    go(w, "v_cvt_off_f32_i4_e32 v2, v1")
    assert [int(x) for x in w.v[2, :4]] == [0, f32(7 / 16), f32(-0.5), f32(3 / 16)]
    w.v[1, :3] = [0x8000_7FFF, 0x0100_00FF, 0xFFFF_0001]
    w.v[2] = 0xAAAA0000
    go(w, "v_sat_pk_u8_i16_e32 v2, v1")
    assert [int(x) for x in w.v[2, :3]] == [0xAAAA00FF, 0xAAAAFFFF, 0xAAAA0001]
    w.v[3, :2], w.v[4, :2] = [1, 2], [3, 4]
    w.s[126] = 0b01
    go(w, "v_swap_b32 v3, v4")
    assert [int(x) for x in w.v[3, :2]] == [3, 2] and [int(x) for x in w.v[4, :2]] == [1, 4]
    w.s[126] = 0xFFFFFFFF
    w.v[10], w.v[11], w.v[12] = 10, 11, 12
    w.s[125] = 2                                              # M0
    go(w, "v_movrels_b32_e32 v5, v10")
    go(w, "v_movreld_b32_e32 v6, v10")
    assert int(w.v[5, 0]) == 12 and int(w.v[8, 0]) == 10
    w.s[125] = 1 | 3 << 16
    go(w, "v_movrelsd_2_b32_e32 v20, v10")
    assert int(w.v[23, 0]) == 11
    w.v[1, :2] = [f16(1.0) | f16(2.0) << 16, f16(-3.0) | f16(0.5) << 16]
    w.v[2, :2] = [f16(5.0) | f16(6.0) << 16, f16(7.0) | f16(8.0) << 16]
    w.v[3] = 0xFFFF0000
    w.s[4] = 0b10
    go(w, "v_cndmask_b16 v3, v1, v2, s4")                        # low halves; the high half of v3 kept
    assert [int(x) for x in w.v[3, :2]] == [0xFFFF0000 | f16(1.0), 0xFFFF0000 | f16(7.0)]
    w.v[1, :2] = [0, f32(0.25)]
    go(w, "v_sin_f32_e32 v4, v1")
    go(w, "v_cos_f32_e32 v5, v1")
    assert [int(x) for x in w.v[4, :2]] == [0, f32(1.0)] and [int(x) for x in w.v[5, :2]] == [f32(1.0), 0]
    w.v[1, :4] = [f32(0.5), f32(-0.5), f32(0.75), f32(-3.75)]      # whole quarter turns: exactly 0 or +-1
    go(w, "v_sin_f32_e32 v4, v1")
    go(w, "v_cos_f32_e32 v5, v1")
    assert [int(x) for x in w.v[4, :4]] == [0, 1 << 31, f32(-1.0), f32(1.0)]     # a zero sin has S0's sign
    assert [int(x) for x in w.v[5, :4]] == [f32(-1.0), f32(-1.0), 0, 0]          # a zero cos is +0


def test_packed_vop2_and_vop3_dot2_forms_and_vopd_halves() -> None:
    rng = random.Random(31)
    a = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    b = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    c = [_rand_h(rng) | _rand_h(rng) << 16 for _ in range(32)]
    w = wave()
    w.v[1], w.v[2], w.v[3] = a, b, c
    go(w, "v_pk_fmac_f16 v3, v1, v2")
    for i in range(32):
        for h in (0, 16):
            x = exact(a[i] >> h & 0xFFFF, "f16") * exact(b[i] >> h & 0xFFFF, "f16") + exact(c[i] >> h & 0xFFFF, "f16")
            got = int(w.v[3, i]) >> h & 0xFFFF
            want = round_float(x, "f16")
            assert got == want or (got | want) == 0x8000, (i, h)
    w.v[3] = c
    w.v[4] = 0x12340000
    go(w, "v_dot2_f16_f16 v4, v1, v2, v3 op_sel:[0,0,1,0]")      # S2 from the high half, result to the low half
    for i in range(32):
        t = round_float(exact(c[i] >> 16, "f16") + exact(a[i] & 0xFFFF, "f16") * exact(b[i] & 0xFFFF, "f16"), "f16")
        t = round_float(exact(t, "f16") + exact(a[i] >> 16, "f16") * exact(b[i] >> 16, "f16"), "f16")
        got = int(w.v[4, i])
        assert got >> 16 == 0x1234 and (got & 0xFFFF == t or ((got & 0xFFFF) | t) == 0x8000), i
    # bf16: bits are the top halves of f32 values
    ab = [f32(rng.uniform(-4, 4)) >> 16 | (f32(rng.uniform(-4, 4)) >> 16) << 16 for _ in range(32)]
    bb = [f32(rng.uniform(-4, 4)) >> 16 | (f32(rng.uniform(-4, 4)) >> 16) << 16 for _ in range(32)]
    acc = [f32(rng.uniform(-4, 4)) for _ in range(32)]
    w.v[1], w.v[2], w.v[3] = ab, bb, acc

    def bf(x: int) -> Fraction:
        return exact((x & 0xFFFF) << 16, "f32")
    go(w, "v_dot2_f32_bf16 v4, v1, v2, v3")
    for i in range(32):
        t = round_float(exact(acc[i], "f32") + bf(ab[i]) * bf(bb[i]), "f32")
        t = round_float(exact(t, "f32") + bf(ab[i] >> 16) * bf(bb[i] >> 16), "f32")
        assert int(w.v[4, i]) == t or (int(w.v[4, i]) | t) == 1 << 31, i
    w.v[3] = [x >> 16 for x in acc]                               # a bf16 accumulator in the low half
    go(w, "v_dot2_bf16_bf16 v4, v1, v2, v3")
    for i in range(32):
        s0 = _round_bf16_ref(exact(acc[i] >> 16 << 16, "f32") + bf(ab[i]) * bf(bb[i]))
        s1 = _round_bf16_ref(exact(s0 << 16, "f32") + bf(ab[i] >> 16) * bf(bb[i] >> 16))
        got = int(w.v[4, i]) & 0xFFFF
        assert got == s1 or (got | s1) == 0x8000, i
    # VOPD halves: v_dual_mul_dx9_zero_f32 and v_dual_dot2acc_f32_f16
    w.v[1, :2] = [0, f32(2.0)]
    w.v[2, :2] = [0x7F800000, f32(3.0)]
    w.v[4, :2] = [f16(1.0) | f16(2.0) << 16, f16(0.5) | f16(0.25) << 16]
    w.v[5, :2] = [f16(3.0) | f16(4.0) << 16, f16(8.0) | f16(4.0) << 16]
    w.v[7, :2] = [f32(1.0), f32(-1.0)]
    go(w, "v_dual_mul_dx9_zero_f32 v8, v1, v2 :: v_dual_dot2acc_f32_f16 v7, v4, v5")
    assert [int(x) for x in w.v[8, :2]] == [0, f32(6.0)] and [int(x) for x in w.v[7, :2]] == [f32(12.0), f32(4.0)]


def _round_bf16_ref(x: Fraction) -> int:
    """Exact value -> bf16 bits, nearest even (bf16 is f32's exponent range with 7 fraction bits)."""
    if x == 0:
        return 0
    sign = 0x8000 if x < 0 else 0
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, -126)
    q = a / Fraction(2) ** (e - 7)
    n = math.floor(q)
    if q - n > Fraction(1, 2) or (q - n == Fraction(1, 2) and n & 1):
        n += 1
    if n >> 8:
        n >>= 1
        e += 1
    if e > 127:
        return sign | 0x7F80
    if n >> 7:
        return sign | (e + 127) << 7 | (n & 0x7F)
    return sign | n


DIV_MACRO_F64 = [  # LLVM's f64 division expansion (v[0:1] = v[0:1] / v[2:3])
    "v_div_scale_f64 v[4:5], null, v[2:3], v[2:3], v[0:1]",
    "v_div_scale_f64 v[10:11], vcc_lo, v[0:1], v[2:3], v[0:1]",
    "v_rcp_f64_e32 v[6:7], v[4:5]", "v_fma_f64 v[8:9], -v[4:5], v[6:7], 1.0",
    "v_fma_f64 v[6:7], v[6:7], v[8:9], v[6:7]",
    "v_fma_f64 v[8:9], -v[4:5], v[6:7], 1.0", "v_fma_f64 v[6:7], v[6:7], v[8:9], v[6:7]",
    "v_mul_f64 v[8:9], v[10:11], v[6:7]", "v_fma_f64 v[4:5], -v[4:5], v[8:9], v[10:11]",
    "v_div_fmas_f64 v[4:5], v[4:5], v[6:7], v[8:9]", "v_div_fixup_f64 v[0:1], v[4:5], v[2:3], v[0:1]",
]


def test_f64_division_macro_is_correctly_rounded() -> None:
    from rdna3isa import f64, from64

    rng = random.Random(64)
    pairs = [(1.0, 3.0), (-7.0, 2.0), (1e-310, 3.0), (3.0, 1e-310), (1e308, 1e-3), (1e-300, 1e30),
             (5e-324, 3.0), (1.7e308, 7e-309), (2.0 ** -1000, 2.0 ** 60)]
    while len(pairs) < 32:
        pairs.append((from64(rng.getrandbits(63) | rng.getrandbits(1) << 63),
                      from64(rng.getrandbits(63) | rng.getrandbits(1) << 63)))
    pairs = [(n, d) for n, d in pairs if math.isfinite(n) and math.isfinite(d) and d != 0][:32]
    w = wave()
    for i, (n, d) in enumerate(pairs):
        w.v[0, i], w.v[1, i] = f64(n) & 0xFFFFFFFF, f64(n) >> 32
        w.v[2, i], w.v[3, i] = f64(d) & 0xFFFFFFFF, f64(d) >> 32
    for line in DIV_MACRO_F64:
        go(w, line)
    for i, (n, d) in enumerate(pairs):
        got = int(w.v[0, i]) | int(w.v[1, i]) << 32
        assert got == round_float(Fraction(n) / Fraction(d), "f64"), (i, n, d, from64(got), n / d)


def test_ds_storexchg_2addr_and_wrap() -> None:
    import struct

    w = wave()
    w.lds[:] = np.arange(256, dtype=np.uint8)
    words = list(struct.unpack("<64I", w.lds.tobytes()))
    w.s[126] = 0b11
    w.v[1, :2] = [0, 248]                                      # lane 1: the second element (+12) is out of range
    w.v[2, :2] = [0xA0, 0xA1]
    w.v[3, :2] = [0xB0, 0xB1]
    go(w, "ds_storexchg_2addr_rtn_b32 v[4:5], v1, v2, v3 offset0:1 offset1:3")
    assert [int(x) for x in w.v[4, :2]] == [words[1], words[63]] and [int(x) for x in w.v[5, :2]] == [words[3], 0]
    now = list(struct.unpack("<64I", w.lds.tobytes()))
    assert (now[1], now[3], now[63]) == (0xA0, 0xB0, 0xA1) and now[:1] + now[4:63] == words[:1] + words[4:63]
    w.s[126] = 0b111
    w.lds[:12] = np.frombuffer(struct.pack("<3I", 10, 3, 7), dtype=np.uint8)
    w.v[1, :3] = [0, 4, 8]
    w.v[2, :3] = [4, 4, 7]                                     # DATA: the wrap bound
    w.v[3, :3] = [100, 100, 100]                               # DATA2: added below the bound
    go(w, "ds_wrap_rtn_b32 v4, v1, v2, v3")
    assert [int(x) for x in w.v[4, :3]] == [10, 3, 7]
    assert struct.unpack("<3I", w.lds[:12].tobytes()) == (6, 103, 0)


def test_cube_map_face_and_coordinates() -> None:
    pts = [(1.0, 0.5, -0.25), (-2.0, 1.0, 1.5), (0.1, -0.7, 0.2), (0.1, 0.7, -0.2), (0.3, 0.2, 0.9), (0.3, 0.2, -0.9),
           (1.0, 1.0, 1.0), (-1.0, 1.0, 0.5)]

    def ref(x: float, y: float, z: float) -> tuple[float, float, float, float]:
        if abs(z) >= abs(x) and abs(z) >= abs(y):
            return (5.0 if z < 0 else 4.0), (-x if z < 0 else x), -y, 2 * z
        if abs(y) >= abs(x):
            return (3.0 if y < 0 else 2.0), x, (-z if y < 0 else z), 2 * y
        return (1.0 if x < 0 else 0.0), (z if x < 0 else -z), -y, 2 * x
    w = wave()
    for k, col in ((1, 0), (2, 1), (3, 2)):
        w.v[k, :len(pts)] = [f32(p[col]) for p in pts]
    for j, name in enumerate(("v_cubeid_f32", "v_cubesc_f32", "v_cubetc_f32", "v_cubema_f32")):
        go(w, f"{name} v4, v1, v2, v3")
        assert [int(x) for x in w.v[4, :len(pts)]] == [f32(ref(*(from32(f32(c)) for c in p))[j]) for p in pts], name


def test_swaprel_and_mqsad_u32() -> None:
    w = wave()
    w.v[12], w.v[23] = 12, 23
    w.s[125] = 2 | 3 << 16                                    # M0: source +2, destination +3
    w.s[126] = 0b1
    go(w, "v_swaprel_b32 v20, v10")
    assert (int(w.v[23, 0]), int(w.v[12, 0]), int(w.v[23, 1]), int(w.v[12, 1])) == (12, 23, 23, 12)
    rng = random.Random(13)
    a = [rng.getrandbits(64) for _ in range(32)]
    b = [rng.getrandbits(32) & 0xFF00FFFF for _ in range(32)]
    c = [[rng.getrandbits(32) for _ in range(32)] for _ in range(4)]
    w.s[126] = 0xFFFFFFFF
    w.v[2], w.v[3], w.v[4] = [x & 0xFFFFFFFF for x in a], [x >> 32 for x in a], b
    for i in range(4):
        w.v[6 + i] = c[i]
    go(w, "v_mqsad_u32_u8 v[10:13], v[2:3], v4, v[6:9]")
    for i in range(4):
        for lane in range(32):
            win = a[lane] >> 8 * i & 0xFFFFFFFF
            want = (c[i][lane] + sum(abs(p - q) for p, q in zip(_bytes(win), _bytes(b[lane]), strict=True) if q))
            assert int(w.v[10 + i, lane]) == want & 0xFFFFFFFF, (i, lane)


# ---- packed operations with constant operands ------------------------------------------------------------------------

PACKED_CONSTS = [  # (instruction, S0 lanes, expected lanes): inline integers are sign-extended 32-bit values; inline
    # floats are f16 bits (high half 0) for the f16 operations and f32 bits for the integer ones (LLVM
    # AMDGPUBaseInfo.cpp getInlineEncodingV216 records this as the hardware's behaviour); a literal is its 32 bits
    ("v_pk_add_u16 v4, v1, 1", [0x0005_0007], [0x0005_0008]),
    ("v_pk_add_u16 v4, v1, -1", [0x0005_0007], [0x0004_0006]),
    ("v_pk_add_u16 v4, v1, 1.0", [0x0005_0007], [0x3F85_0007]),          # f32 1.0 = 0x3F800000
    ("v_pk_add_u16 v4, v1, 0x12345678", [0x0001_0001], [0x1235_5679]),
    ("v_pk_add_u16 v4, v1, 1 op_sel_hi:[1,0]", [0x0005_0007], [0x0006_0008]),   # the low half in both
    ("v_pk_add_f16 v4, v1, 1.0", [0x4000_4000], [0x4000_4200]),         # 2+1 low, 2+0 high
    ("v_pk_mul_f16 v4, v1, 0.5 op_sel_hi:[1,0]", [0x4400_4000], [0x4000_3C00]),   # 0.5 in both halves
    ("v_pk_fma_f16 v4, v1, v1, -1.0 op_sel_hi:[1,1,0]", [0x4000_3C00], [0x4200_0000]),  # x*x - 1
    ("v_dot2_f32_f16 v4, v1, 1.0, 0", [0x4000_3C00], [0x3F80_0000]),    # 1*1 + 2*0
    ("v_dot2_f32_bf16 v4, v1, 1.0, 0", [0x4000_3F80], [0x3F80_0000]),   # bf16 1.0 in the low half
    ("v_dot4_u32_u8 v4, v1, 1, 0", [0x0403_0201], [0x0000_0001]),       # only byte 0 of 0x00000001 is 1
    ("v_dot4_u32_u8 v4, v1, -1, 0", [0x0403_0201], [10 * 255]),
]


@pytest.mark.parametrize(("text", "a", "want"), PACKED_CONSTS)
def test_packed_operations_read_constants_as_the_hardware_does(text: str, a: list[int], want: list[int]) -> None:
    w = wave()
    w.v[1, :len(a)] = a
    go(w, text)
    assert [int(x) for x in w.v[4, :len(want)]] == want, text
