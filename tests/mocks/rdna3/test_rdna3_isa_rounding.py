"""MODE round modes (FP_ROUND: toward +infinity, -infinity, zero) on the float operations they change.

The expected value of each lane is the exact result (``fractions.Fraction``) rounded in the mode's direction, found
here independently of the core: the round-to-nearest-even reference rdna3isa.round_float gives one neighbour and a
step of one unit in the last place gives the other; the direction picks between them. Exact zero sums are -0 only
when rounding toward -infinity (IEEE 754 6.3). ``s_round_mode`` sets the mode in a kernel-like sequence.

The tests of the other float operations (ldexp, dx9, mullit, cubema, fract, sqrt, trig_preop, div_fmas/div_scale,
packed f16, VOPD, fma_mix, dot2, pk_fmac, WMMA, VINTERP, OMOD) assemble their instructions with llvm-mc-19 and
take expected values from :func:`rdir`, a second rounding function written here (units in the last place counted
in ``Fraction``), never from the core's ``rounding.round_bits``. The transcendentals (rcp, rsq, exp, log, sin, cos)
take theirs from series evaluated here at 120 digits (see their section). Two tests keep the categories honest:
every VALU mnemonic of the decoder table is in exactly one of ``rounding``'s sets, and run under a directed mode
none stops the dispatch (``REFUSED`` is empty).
"""

from __future__ import annotations

import decimal
import functools
import math
import random
import zlib
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from rdna3asm import HAVE_LLVM_MC
from rdna3isa import exact, f16, f32, f64, go, round_float, run, sopp, v, vop1, vop2, vop3, wave

from tinyhw.mocks.rdna3 import Unimplemented
from tinyhw.mocks.rdna3.state import MODE_DEFAULT

FMT = {"f16": (10, 5), "f32": (23, 8), "f64": (52, 11)}
UP, DOWN, ZERO = 1, 2, 3
M32 = (1 << 32) - 1


def _width(fmt: str) -> int:
    m, e = FMT[fmt]
    return 1 + m + e


def _special(x: int, fmt: str) -> bool:
    m, e = FMT[fmt]
    return (x >> m) & ((1 << e) - 1) == (1 << e) - 1


def directed(x: Fraction, fmt: str, mode: int) -> int:
    """``x`` rounded in ``mode`` from its two neighbours in ``fmt`` (nearest-even reference and one ulp step)."""
    m, e = FMT[fmt]
    sign = 1 << (m + e)
    inf = ((1 << e) - 1) << m
    a = abs(x)
    r = round_float(a, fmt)                                # nearest even of the magnitude (maybe +inf)
    if r == inf:
        lo, hi = inf - 1, inf                              # the largest finite value, infinity
    elif exact(r, fmt) > a:
        lo, hi = r - 1, r
    elif exact(r, fmt) < a:
        lo, hi = r, r + 1
    else:
        lo = hi = r
    neg = x < 0
    if mode == ZERO:
        pick = lo
    elif mode == UP:
        pick = lo if neg else hi
    else:
        pick = hi if neg else lo
    return pick | (sign if neg else 0)


def _inputs(fmt: str, seed: int) -> list[int]:
    m, e = FMT[fmt]
    bias = (1 << (e - 1)) - 1
    rng = random.Random(seed)
    big = ((1 << e) - 2) << m | ((1 << m) - 1)             # the largest finite value
    out = [big, big | 1 << (m + e), 1, 1 | 1 << (m + e), bias << m, (bias << m) | 1 << (m + e)]
    while len(out) < 32:
        exp = bias + rng.randint(-3, 3) if rng.random() < 0.7 else rng.randint(0, (1 << e) - 2)
        out.append(rng.getrandbits(1) << (m + e) | exp << m | rng.getrandbits(m))
    return out


def _mode(fmt: str, rnd: int) -> int:
    return MODE_DEFAULT | (rnd if fmt == "f32" else rnd << 2)


def _put(w, n: int, vals: list[int], fmt: str) -> None:
    if fmt == "f64":
        w.v[n], w.v[n + 1] = [x & M32 for x in vals], [x >> 32 for x in vals]
    else:
        w.v[n] = vals


def _get(w, n: int, fmt: str) -> list[int]:
    if fmt == "f64":
        return [int(p) | int(q) << 32 for p, q in zip(w.v[n, :32], w.v[n + 1, :32], strict=True)]
    return [int(x) & ((1 << _width(fmt)) - 1) for x in w.v[n, :32]]


def _zero_sum(signs: tuple[int, int], mode: int) -> int:
    return signs[0] if signs[0] == signs[1] else int(mode == DOWN)


OPS = {"add": (2, lambda a, b: a + b), "sub": (2, lambda a, b: a - b), "mul": (2, lambda a, b: a * b),
       "fma": (3, lambda a, b, c: a * b + c)}


@pytest.mark.parametrize("mode", [UP, DOWN, ZERO])
@pytest.mark.parametrize(("op", "fmt"), [(op, fmt) for op in sorted(OPS) for fmt in ("f16", "f32", "f64")
                                         if (op, fmt) != ("sub", "f64")])     # gfx11 has no v_sub_f64
def test_arithmetic_rounds_in_the_mode_direction(op: str, fmt: str, mode: int) -> None:
    n, f = OPS[op]
    seed = zlib.crc32(f"{op}{fmt}{mode}".encode())
    srcs = [_inputs(fmt, seed + i) for i in range(n)]
    srcs[1][:2] = [srcs[0][0], srcs[0][1]]                  # max + max overflows; max - max cancels
    if op == "add":
        srcs[1][2] = srcs[0][2] ^ 1 << (_width(fmt) - 1)      # x + (-x): an exact zero sum
    w = wave(_mode(fmt, mode))
    regs = [1, 3, 5]
    for r, vals in zip(regs, srcs, strict=False):
        _put(w, r, vals, fmt)
    name = f"v_{op}_{fmt}"
    run(vop3(name if op in ("fma",) or fmt == "f64" else f"{name}_e64", 8, *[v(r) for r in regs[:n]]), w)
    got = _get(w, 8, fmt)
    sbit = _width(fmt) - 1
    for i in range(32):
        ops = [s[i] for s in srcs]
        if any(_special(x, fmt) for x in ops):
            continue
        x = f(*[exact(o, fmt) for o in ops])
        if x == 0:
            signs = [o >> sbit & 1 for o in ops]
            if op == "mul":
                want = (signs[0] ^ signs[1]) << sbit
            elif op == "fma":
                want = _zero_sum((signs[0] ^ signs[1], signs[2]), mode) << sbit
            else:
                want = _zero_sum((signs[0], signs[1] ^ (op == "sub")), mode) << sbit
        else:
            want = directed(x, fmt, mode)
        assert got[i] == want, (name, mode, i, [hex(o) for o in ops], hex(got[i]), hex(want))


CVTS = [("v_cvt_f16_f32", "f32", "f16"), ("v_cvt_f32_f64", "f64", "f32"), ("v_cvt_f32_i32", "i32", "f32"),
        ("v_cvt_f32_u32", "u32", "f32"), ("v_cvt_f16_i16", "i16", "f16"), ("v_cvt_f16_u16", "u16", "f16")]


@pytest.mark.parametrize("mode", [UP, DOWN, ZERO])
@pytest.mark.parametrize(("name", "src", "dst"), CVTS)
def test_converts_round_in_the_destination_mode(name: str, src: str, dst: str, mode: int) -> None:
    rng = random.Random(zlib.crc32(f"{name}{mode}".encode()))
    if src in FMT:
        xs = _inputs(src, rng.getrandbits(16))
        m, e = FMT[src]
        dm, de = FMT[dst]
        bias, dbias = (1 << (e - 1)) - 1, (1 << (de - 1)) - 1
        for i, k in enumerate((dbias, dbias + 1, -dbias - dm, -dbias - dm - 2, 1 - dbias, -dbias - 3)):
            xs[6 + i] = rng.getrandbits(1) << (m + e) | (bias + k) << m | rng.getrandbits(m)
    else:
        bits = int(src[1:])
        xs = [rng.getrandbits(bits) for _ in range(32)]
        xs[:4] = [0, (1 << bits) - 1, 1 << (bits - 1), (1 << (bits - 1)) - 1]
    w = wave(_mode(dst, mode))
    _put(w, 2, xs, "f64" if src == "f64" else "f32")
    run(vop1(f"{name}_e32", 6, v(2)), w)
    got = _get(w, 6, dst)
    for x, g in zip(xs, got, strict=True):
        if src in FMT:
            if _special(x, src):
                continue
            val = exact(x, src)
        else:
            bits = int(src[1:])
            val = Fraction(x - (1 << bits) if src[0] == "i" and x >> (bits - 1) else x)
        want = (x >> (_width(src) - 1) & 1) << (_width(dst) - 1) if val == 0 and src in FMT else \
            (0 if val == 0 else directed(val, dst, mode))
        assert g == want, (name, mode, hex(x), hex(g), hex(want))


def test_s_round_mode_sets_the_mode_the_next_add_uses() -> None:
    w = wave()
    w.v[1] = 0x3F800000                                     # 1.0
    w.v[2] = 0x33800000                                     # 2^-24: half an ulp of 1.0
    run(sopp("s_round_mode", UP), w)                        # f32 toward +infinity
    run(vop2("v_add_f32_e32", 3, v(1), 2), w)
    assert int(w.v[3, 0]) == 0x3F800001
    run(sopp("s_round_mode", ZERO), w)
    run(vop2("v_add_f32_e32", 3, v(1), 2), w)
    assert int(w.v[3, 0]) == 0x3F800000
    run(sopp("s_round_mode", UP << 2), w)                   # f16/f64 modes only: f32 back to nearest even
    run(vop2("v_add_f32_e32", 3, v(1), 2), w)
    assert int(w.v[3, 0]) == 0x3F800000                     # the tie goes to even


def test_exact_operations_ignore_the_mode_and_rcp_rounds_in_it() -> None:
    w = wave(_mode("f32", ZERO))
    w.v[1] = 0x3FC00000                                     # 1.5
    w.v[2] = 0xBF800000                                     # -1.0
    run(vop2("v_max_f32_e32", 3, v(1), 2), w)
    assert int(w.v[3, 0]) == 0x3FC00000
    run(vop1("v_floor_f32_e32", 3, v(1)), w)
    assert int(w.v[3, 0]) == 0x3F800000
    run(vop1("v_cvt_i32_f32_e32", 3, v(1)), w)
    assert int(w.v[3, 0]) == 1
    run(vop1("v_rcp_f32_e32", 3, v(1)), w)                 # 1/1.5 toward zero (no operation refuses now)
    assert int(w.v[3, 0]) == 0x3F2AAAAA


# ---- the rest of the float operations: llvm-mc-19-assembled, expected from a second rounding function --------------

needs_mc = pytest.mark.skipif(not HAVE_LLVM_MC, reason="llvm-mc-19 is not installed")
KINDS = {"f16": (10, 5), "f32": (23, 8), "f64": (52, 11), "bf16": (7, 8)}


def _log2_floor(a: Fraction) -> int:
    """floor(log2(a)) for a > 0: a guess from the bit lengths, corrected by doubling/halving."""
    k = a.numerator.bit_length() - a.denominator.bit_length()
    while a >= Fraction(2) ** (k + 1):
        k += 1
    while a < Fraction(2) ** k:
        k -= 1
    return k


def rdir(x: Fraction, fmt: str, mode: int) -> int:
    """The non-zero ``x`` rounded to ``fmt`` in ``mode``, by counting units in the last place: the magnitude's
    floor in ulps (exponent found by doubling/halving), then one ulp more when the direction asks for it; past
    the largest finite value infinity, unless the direction is toward the largest finite value."""
    m, e = KINDS[fmt]
    bias = (1 << (e - 1)) - 1
    neg = x < 0
    a = abs(x)
    k = _log2_floor(a)
    k = max(k, 1 - bias)
    ulp = Fraction(2) ** (k - m)
    n = math.floor(a / ulp)
    r = a - n * ulp
    if mode == 0:
        up = r > ulp / 2 or (r == ulp / 2 and n % 2 == 1)
    else:
        up = r != 0 and (mode == UP and not neg or mode == DOWN and neg)
    mag = (n + up) * ulp
    top = (1 << e) - 1
    big = (2 - Fraction(2) ** -m) * Fraction(2) ** bias
    if mag > big:
        toward_inf = mode == 0 or (mode == UP and not neg) or (mode == DOWN and neg)
        bits = top << m if toward_inf else (top - 1) << m | ((1 << m) - 1)
    elif mag >= Fraction(2) ** (1 - bias):
        kk = _log2_floor(mag)
        bits = (kk + bias) << m | int(mag / Fraction(2) ** (kk - m)) - (1 << m)
    else:
        bits = int(mag / Fraction(2) ** (1 - bias - m))
    return bits | int(neg) << (m + e)


def val(bits: int, fmt: str) -> Fraction | None:
    """The exact value of ``fmt`` bits (None: infinity or NaN)."""
    m, e = KINDS[fmt]
    if bits >> m & ((1 << e) - 1) == (1 << e) - 1:
        return None
    if fmt == "bf16":
        return exact(bits << 16, "f32")
    return exact(bits, fmt)


def zero_or(x: Fraction, fmt: str, mode: int, signs: tuple[int, int]) -> int:
    """``x`` rounded, or for an exact zero the IEEE sign rule of a sum whose two addends have ``signs``."""
    if x != 0:
        return rdir(x, fmt, mode)
    m, e = KINDS[fmt]
    return _zero_sum(signs, mode) << (m + e)


def test_the_test_rounding_function_agrees_with_round_float_to_nearest() -> None:
    rng = random.Random(5)
    for _ in range(300):
        x = Fraction(rng.getrandbits(40) + 1, 1 << rng.randint(0, 80)) * (-1) ** rng.getrandbits(1)
        for fmt in ("f16", "f32", "f64"):
            assert rdir(x, fmt, 0) == round_float(x, fmt) | (0 if x > 0 else 1 << (_width(fmt) - 1))


MODES = [UP, DOWN, ZERO]


@needs_mc
@pytest.mark.parametrize("mode", [0, *MODES])
@pytest.mark.parametrize("fmt", ["f16", "f32", "f64"])
def test_ldexp_rounds_overflow_and_subnormal_results(fmt: str, mode: int) -> None:
    m, e = FMT[fmt]
    bias = (1 << (e - 1)) - 1
    rng = random.Random(zlib.crc32(f"ldexp{fmt}{mode}".encode()))
    xs = _inputs(fmt, rng.getrandbits(16))
    ns = [rng.choice([bias + 3, -bias - m // 2, -bias - m - 3, 5, -5, -(bias + m + 40), 2 * bias + 5])
          for _ in range(32)]
    ns[:3] = [1, -1, -2]                                   # the largest value doubles: overflow; 1 ulp halves
    w = wave(_mode(fmt, mode))
    _put(w, 1, xs, fmt)
    w.v[5] = [n & (0xFFFF if fmt == "f16" else M32) for n in ns]
    go(w, {"f16": "v_ldexp_f16_e64 v8, v1, v5", "f32": "v_ldexp_f32 v8, v1, v5",
           "f64": "v_ldexp_f64 v[8:9], v[1:2], v5"}[fmt])
    got = _get(w, 8, fmt)
    for i in range(32):
        x = val(xs[i], fmt)
        if x is None or x == 0:
            continue
        want = rdir(x * Fraction(2) ** ns[i], fmt, mode)
        assert got[i] == want, (fmt, mode, i, hex(xs[i]), ns[i], hex(got[i]), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_dx9_zero_products_round_in_the_mode_and_keep_the_zero_rule(mode: int) -> None:
    rng = random.Random(zlib.crc32(f"dx9{mode}".encode()))
    a, b, c = (_inputs("f32", rng.getrandbits(16)) for _ in range(3))
    a[3], b[3] = 0x80000000, 0x7F800000                   # -0 * inf: +0 (mul), S2 (fma)
    a[4], b[4] = 0x7FC00000, 0                             # NaN * 0: +0
    b[5], c[5] = a[5] ^ 0x80000000, 0x3F800000             # -x*x + 1
    a[6], b[6], c[6] = 0x3F800000, 0x3F800000, 0xBF800000  # 1 * 1 + -1: an exact zero
    a[7], b[7], c[7] = 0x80000000, 0x3F800000, 0           # -0 * 1 + +0: S2 (+0), not fma's -0 toward -inf
    a[8], b[8], c[8] = 0x3F800000, 0x80000000, 0x80000000  # 1 * -0 + -0: S2 (-0)
    w = wave(_mode("f32", mode))
    w.v[1], w.v[2], w.v[3] = a, b, c
    go(w, "v_mul_dx9_zero_f32_e64 v8, v1, v2")
    go(w, "v_fma_dx9_zero_f32 v9, v1, v2, v3")
    for i in range(32):
        x, y, z = (val(t[i], "f32") for t in (a, b, c))
        if x == 0 or y == 0:
            assert int(w.v[8, i]) == 0 and int(w.v[9, i]) == c[i], i
            continue
        if x is None or y is None:
            continue
        assert int(w.v[8, i]) == rdir(x * y, "f32", mode), i
        if z is not None:
            want = zero_or(x * y + z, "f32", mode, ((a[i] ^ b[i]) >> 31, c[i] >> 31))
            assert int(w.v[9, i]) == want, (i, hex(int(w.v[9, i])), hex(want))


def _h(x: int, hi: int) -> int:
    return x >> 16 if hi else x & 0xFFFF


@needs_mc
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["add", "mul", "fma"])
def test_packed_f16_halves_round_in_the_f16_mode(op: str, mode: int) -> None:
    rng = random.Random(zlib.crc32(f"pk{op}{mode}".encode()))
    lo = [_inputs("f16", rng.getrandbits(16)) for _ in range(3)]
    hi = [_inputs("f16", rng.getrandbits(16)) for _ in range(3)]
    lo[1][7] = hi[0][7] ^ 0x8000                           # (op_sel) a.hi + (-a.hi) in the low result: zero
    regs = [[lh | hh << 16 for lh, hh in zip(lo[j], hi[j], strict=True)] for j in range(3)]
    w = wave(_mode("f16", mode) | ZERO)                    # the f32 field toward zero: packed f16 must not use it
    for j in range(3):
        w.v[1 + j] = regs[j]
    n = 3 if op == "fma" else 2
    srcs = ", ".join(f"v{1 + j}" for j in range(n))
    sel, sel_hi, neg_lo, neg_hi = [1, 0, 0], [0, 1, 1], [0, 1, 0], [1, 0, 0]
    mods = (f" op_sel:[{','.join(map(str, sel[:n]))}] op_sel_hi:[{','.join(map(str, sel_hi[:n]))}]"
            f" neg_lo:[{','.join(map(str, neg_lo[:n]))}] neg_hi:[{','.join(map(str, neg_hi[:n]))}]")
    go(w, f"v_pk_{op}_f16 v8, {srcs}{mods}")
    f = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "fma": lambda x, y, z: x * y + z}[op]
    for i in range(32):
        got = int(w.v[8, i])
        for half, (sels, negs) in enumerate(((sel, neg_lo), (sel_hi, neg_hi))):
            ops = [_h(regs[j][i], sels[j]) ^ (negs[j] << 15) for j in range(n)]
            vals = [val(o, "f16") for o in ops]
            if any(v is None for v in vals):
                continue
            x = f(*vals)
            signs = (ops[0] >> 15, ops[1] >> 15) if op == "add" else ((ops[0] ^ ops[1]) >> 15, ops[-1] >> 15)
            want = ((ops[0] ^ ops[1]) & 0x8000 if x == 0 else rdir(x, "f16", mode)) if op == "mul" else \
                zero_or(x, "f16", mode, signs)
            assert _h(got, half) == want, (op, mode, i, half, [hex(o) for o in ops], hex(_h(got, half)), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_fma_mix_rounds_once_in_the_destination_mode(mode: int) -> None:
    rng = random.Random(zlib.crc32(f"mix{mode}".encode()))
    a16, c16 = _inputs("f16", rng.getrandbits(16)), _inputs("f16", rng.getrandbits(16))
    b32 = _inputs("f32", rng.getrandbits(16))
    for i in range(32):                                    # keep products near the f16 range
        if rng.random() < 0.7:
            b32[i] = rng.getrandbits(1) << 31 | (127 + rng.randint(-12, 12)) << 23 | rng.getrandbits(23)
    b32[9], a16[9], c16[9] = 0x3F800000, 0x3C00, 0xBC00    # 1 * 1 + -1: zero
    for fmt, text in (("f32", "v_fma_mix_f32 v8, v1, v2, v3 op_sel_hi:[1,0,1]"),
                      ("f16", "v_fma_mixlo_f16 v8, v1, v2, v3 op_sel_hi:[1,0,1]"),
                      ("f16", "v_fma_mixhi_f16 v8, v1, v2, v3 op_sel_hi:[1,0,1]")):
        w = wave(_mode(fmt, mode))
        w.v[1], w.v[2], w.v[3] = a16, b32, c16
        w.v[8] = 0xDEADBEEF
        go(w, text)
        for i in range(32):
            vals = [val(a16[i], "f16"), val(b32[i], "f32"), val(c16[i], "f16")]
            if any(v is None for v in vals):
                continue
            x = vals[0] * vals[1] + vals[2]
            want = zero_or(x, fmt, mode, ((a16[i] >> 15) ^ (b32[i] >> 31), c16[i] >> 15))
            got = int(w.v[8, i])
            if "mixhi" in text:
                assert got == (want << 16 | 0xBEEF), (text, i)
            elif "mixlo" in text:
                assert got == (0xDEAD0000 | want), (text, i)
            else:
                assert got == want, (text, i, hex(got), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_vopd_halves_round_as_their_vop2_forms(mode: int) -> None:
    rng = random.Random(zlib.crc32(f"vopd{mode}".encode()))
    a, b, c, d = (_inputs("f32", rng.getrandbits(16)) for _ in range(4))
    b[0] = 0                                               # dx9: 0 * x = +0
    w = wave(_mode("f32", mode))
    w.v[0], w.v[1], w.v[2], w.v[3] = a, b, c, d
    go(w, "v_dual_mul_dx9_zero_f32 v10, v0, v1 :: v_dual_add_f32 v11, v2, v3")
    for i in range(32):
        x, y, z, t = (val(r[i], "f32") for r in (a, b, c, d))
        if None in (x, y, z, t):
            continue
        mul = (a[i] ^ b[i]) & 0x80000000 if x * y == 0 else rdir(x * y, "f32", mode)
        assert int(w.v[10, i]) == (0 if x == 0 or y == 0 else mul), i
        assert int(w.v[11, i]) == zero_or(z + t, "f32", mode, (c[i] >> 31, d[i] >> 31)), i
    w = wave(_mode("f32", mode))
    w.v[0], w.v[1], w.v[2], w.v[3], w.v[13] = a, b, c, d, b
    go(w, "v_dual_mul_f32 v12, v0, v1 :: v_dual_fmac_f32 v13, v2, v3")
    for i in range(32):
        p, q = val(a[i], "f32"), val(b[i], "f32")
        if p is not None and q is not None:
            assert int(w.v[12, i]) == ((a[i] ^ b[i]) & 0x80000000 if p * q == 0 else rdir(p * q, "f32", mode)), i
        x, y, z = (val(r[i], "f32") for r in (c, d, b))
        if None in (x, y, z):
            continue
        want = zero_or(x * y + z, "f32", mode, ((c[i] ^ d[i]) >> 31, b[i] >> 31))
        assert int(w.v[13, i]) == want, (i, hex(int(w.v[13, i])), hex(want))


def _sqrt_dir(x: Fraction, fmt: str, mode: int) -> int:
    """sqrt(``x``) (> 0) rounded in ``mode``: the two neighbours of the float64 root compared by their exact squares
    (and, to nearest, the square of the midpoint)."""
    m, e = KINDS[fmt]
    r = rdir(Fraction(math.sqrt(x)), fmt, ZERO)
    lo = r
    while val(lo, fmt) ** 2 > x:
        lo -= 1
    while val(lo + 1, fmt) is not None and val(lo + 1, fmt) ** 2 <= x:
        lo += 1
    if val(lo, fmt) ** 2 == x or mode in (DOWN, ZERO):
        return lo
    if mode == UP:
        return lo + 1
    mid = (val(lo, fmt) + val(lo + 1, fmt)) / 2
    return lo + 1 if mid * mid < x else lo                 # a root is never exactly a midpoint of the grid


@needs_mc
@pytest.mark.parametrize("mode", [0, *MODES])
@pytest.mark.parametrize("fmt", ["f16", "f32", "f64"])
def test_sqrt_is_correctly_rounded_in_every_mode(fmt: str, mode: int) -> None:
    m, e = FMT[fmt]
    rng = random.Random(zlib.crc32(f"sqrt{fmt}{mode}".encode()))
    xs = [x & ~(1 << (m + e)) for x in _inputs(fmt, rng.getrandbits(16))]
    xs[6:10] = [1, 2, 4 << m | 1, (0x3F800000 if fmt == "f32" else xs[9])]         # subnormals, a perfect square
    xs[10] = (1 << (m + e)) | 5                             # negative: NaN in every mode
    w = wave(_mode(fmt, mode))
    _put(w, 1, xs, fmt)
    go(w, {"f16": "v_sqrt_f16_e32 v8, v1", "f32": "v_sqrt_f32_e32 v8, v1", "f64": "v_sqrt_f64_e32 v[8:9], v[1:2]"}[fmt])
    got = _get(w, 8, fmt)
    for i in range(32):
        x = val(xs[i], fmt)
        if i == 10:
            assert _special(got[i], fmt) and got[i] & ((1 << m) - 1), i
            continue
        if x is None or x == 0:
            continue
        want = _sqrt_dir(x, fmt, mode)
        assert got[i] == want, (fmt, mode, i, hex(xs[i]), hex(got[i]), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_dot2_rounds_each_add_in_the_mode(mode: int) -> None:
    rng = random.Random(zlib.crc32(f"dot2{mode}".encode()))
    a, b = (_inputs("f16", rng.getrandbits(16)) for _ in range(2))
    a2, b2 = (_inputs("f16", rng.getrandbits(16)) for _ in range(2))
    c = _inputs("f32", rng.getrandbits(16))
    for i in range(32):
        if rng.random() < 0.8:
            c[i] = rng.getrandbits(1) << 31 | (127 + rng.randint(-8, 8)) << 23 | rng.getrandbits(23)
    w = wave(_mode("f32", mode))
    w.v[1] = [x | y << 16 for x, y in zip(a, a2, strict=True)]
    w.v[2] = [x | y << 16 for x, y in zip(b, b2, strict=True)]
    w.v[3] = c
    go(w, "v_dot2_f32_f16 v8, v1, v2, v3")
    w.v[9] = c
    go(w, "v_dot2acc_f32_f16 v9, v1, v2")
    w.v[11] = c
    go(w, "v_dual_mul_f32 v10, v6, v7 :: v_dual_dot2acc_f32_f16 v11, v1, v2")      # the VOPD half
    for i in range(32):
        vs = [val(t[i], "f16") for t in (a, b, a2, b2)]
        acc = val(c[i], "f32")
        if acc is None or None in vs:
            continue
        bits, sign = c[i], c[i] >> 31
        for x, y, sx in ((vs[0], vs[1], (a[i] ^ b[i]) >> 15), (vs[2], vs[3], (a2[i] ^ b2[i]) >> 15)):
            s = x * y + acc
            bits = zero_or(s, "f32", mode, (sx, sign))
            acc, sign = val(bits, "f32"), bits >> 31
            if acc is None:
                break
        if acc is None:
            continue
        assert int(w.v[8, i]) == bits, (mode, i, hex(int(w.v[8, i])), hex(bits))
        assert int(w.v[9, i]) == bits and int(w.v[11, i]) == bits, i


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_div_fmas_rounds_the_scaled_fma_in_the_mode(mode: int) -> None:
    rng = random.Random(zlib.crc32(f"fmas{mode}".encode()))
    a, b, c = (_inputs("f32", rng.getrandbits(16)) for _ in range(3))
    for i in range(0, 32, 3):                              # operands whose scaled result is subnormal
        c[i] = rng.getrandbits(1) << 31 | (rng.randint(1, 60)) << 23 | rng.getrandbits(23)
        a[i] = (127 + rng.randint(-30, -5)) << 23 | rng.getrandbits(23)
        b[i] = (127 + rng.randint(-40, 0)) << 23 | rng.getrandbits(23)
    w = wave(_mode("f32", mode))
    w.v[1], w.v[2], w.v[3] = a, b, c
    w.s[106] = 0x5555_5555
    go(w, "v_div_fmas_f32 v8, v1, v2, v3")
    for i in range(32):
        x, y, z = (val(t[i], "f32") for t in (a, b, c))
        if None in (x, y, z):
            continue
        s = x * y + z
        if 0x5555_5555 >> i & 1:
            s *= Fraction(2) ** (64 if c[i] >> 23 & 0xFF > 127 else -64)
        want = zero_or(s, "f32", mode, ((a[i] ^ b[i]) >> 31, c[i] >> 31))
        assert int(w.v[8, i]) == want, (i, hex(int(w.v[8, i])), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_fract_cubema_and_mullit_round_in_the_mode(mode: int) -> None:
    w = wave(_mode("f32", mode))
    tiny = [0x80000001, 0xB0000000, 0xC0000000, 0x40000000, 0x3FC00001, 0xCB000001]  # -min, -2^-31, -2, 2, ...
    w.v[1] = tiny + [0x3F800000] * 26
    go(w, "v_fract_f32_e32 v8, v1")
    for i, x in enumerate(tiny):
        q = exact(x, "f32")
        want = zero_or(q - math.floor(q), "f32", mode, (x >> 31, 1 - (x >> 31)))
        want = want if want >> 31 else min(want, 0x3F7FFFFF)                 # the guide: "clamped to 0x3f7fffff"
        assert int(w.v[8, i]) == want, (i, hex(int(w.v[8, i])), hex(want))
    big = 0x7F7FFFFF
    w.v[1], w.v[2], w.v[3] = [big, 0x3F800000] * 16, [0, 0xFF7FFFFF] * 16, [0x3F800000, 0] * 16
    go(w, "v_cubema_f32 v8, v1, v2, v3")                  # 2 * the major axis: overflow rounds
    assert int(w.v[8, 0]) == (0x7F800000 if mode == UP else big)
    assert int(w.v[8, 1]) == (0xFF800000 if mode == DOWN else 0xFF7FFFFF)
    w.v[1], w.v[2], w.v[3] = [0x3F800001] * 32, [0x3F800001] * 32, [0x3F800000, 0] * 16
    go(w, "v_mullit_f32 v8, v1, v2, v3")
    x = exact(0x3F800001, "f32") ** 2
    assert int(w.v[8, 0]) == rdir(x, "f32", mode) and int(w.v[8, 1]) == 0xFF7FFFFF


@needs_mc
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_wmma_rounds_its_exact_sum_once_in_the_mode(kind: str, mode: int) -> None:
    """Each element's exact sum rounded once in the result format's field (bf16: the f16/f64 field, the model's
    choice); an exactly zero element is -0 toward -infinity, else +0 (the model's choice)."""
    rng = random.Random(zlib.crc32(f"wmma{kind}{mode}".encode()))
    m, e = KINDS[kind]
    bias = (1 << (e - 1)) - 1

    def el() -> int:
        return rng.getrandbits(1) << 15 | (bias + rng.randint(-5, 5)) << m | rng.getrandbits(m)
    A = [[el() for _ in range(16)] for _ in range(16)]
    B = [[el() for _ in range(16)] for _ in range(16)]
    for k in range(16):
        B[k][0] = 0                                         # column 0: every product a zero
    for fmt in ("f32", kind):
        w = wave(_mode("f32" if fmt == "f32" else "f16", mode) | (ZERO if fmt != "f32" else ZERO << 2))
        for lane in range(32):
            for k in range(16):
                r, sh = k // 2, 16 * (k % 2)
                w.v[8 + r, lane] = int(w.v[8 + r, lane]) | A[lane % 16][k] << sh
                w.v[16 + r, lane] = int(w.v[16 + r, lane]) | B[k][lane % 16] << sh
        cm, ce = KINDS[fmt]
        C = [[0 if col == 0 else rng.getrandbits(1) << (cm + ce) | (((1 << (ce - 1)) - 1 + 3) << cm)
              | rng.getrandbits(cm) for col in range(16)] for _ in range(16)]
        for r in range(16):
            for col in range(16):
                w.v[r // 2, col + 16 * (r % 2)] = C[r][col]
        go(w, f"v_wmma_{fmt}_16x16x16_{kind} v[0:7], v[8:15], v[16:23], v[0:7]")
        for r in range(16):
            for col in range(16):
                x = sum(val(A[r][k], kind) * val(B[k][col], kind) for k in range(16)) + val(C[r][col], fmt)
                got = int(w.v[r // 2, col + 16 * (r % 2)]) & ((1 << (1 + cm + ce)) - 1)
                want = rdir(x, fmt, mode) if x else int(mode == DOWN) << (cm + ce)
                assert got == want, (fmt, r, col, hex(got), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["f16", "bf16"])
def test_16_bit_dot2_forms_and_pk_fmac_round_in_the_f16_field(kind: str, mode: int) -> None:
    rng = random.Random(zlib.crc32(f"dot16{kind}{mode}".encode()))
    fmt = kind
    m, e = KINDS[fmt]

    def rnd16() -> int:
        return rng.getrandbits(1) << 15 | ((1 << (e - 1)) - 1 + rng.randint(-4, 4)) << m | rng.getrandbits(m)
    a, b, c = ([rnd16() | rnd16() << 16 for _ in range(32)] for _ in range(3))
    a[0], b[0], c[0] = 0x3C00 if kind == "f16" else 0x3F80, 0x3C00 if kind == "f16" else 0x3F80, 0
    w = wave(_mode("f16", mode) | ZERO)                      # the f32 field must not matter
    w.v[1], w.v[2], w.v[3] = a, b, c
    w.v[4] = 0xDEADBEEF
    go(w, f"v_dot2_{kind}_{kind} v4, v1, v2, v3 op_sel:[0,0,1,0]")   # S2 from the high half, result to the low
    for i in range(32):
        acc, sign, bits = val(c[i] >> 16, fmt), c[i] >> 31, c[i] >> 16
        for h in (0, 16):
            x, y = a[i] >> h & 0xFFFF, b[i] >> h & 0xFFFF
            t = val(x, fmt) * val(y, fmt) + acc
            bits = zero_or(t, fmt, mode, ((x ^ y) >> 15, sign))
            acc, sign = val(bits, fmt), bits >> 15
            if acc is None:
                break
        if acc is None:
            continue
        assert int(w.v[4, i]) == 0xDEAD0000 | bits, (kind, i, hex(int(w.v[4, i])), hex(bits))
    if kind == "bf16":
        w = wave(_mode("f32", mode))
        w.v[1], w.v[2], w.v[3] = a, b, [x & 0xFFFF0000 for x in c]
        go(w, "v_dot2_f32_bf16 v4, v1, v2, v3")
        for i in range(32):
            acc, sign, bits = val(c[i] >> 16, fmt), c[i] >> 31, c[i] & 0xFFFF0000
            for h in (0, 16):
                x, y = a[i] >> h & 0xFFFF, b[i] >> h & 0xFFFF
                bits = zero_or(val(x, fmt) * val(y, fmt) + acc, "f32", mode, ((x ^ y) >> 15, sign))
                acc, sign = val(bits, "f32"), bits >> 31
            assert int(w.v[4, i]) == bits, i
        return
    w.v[4] = c
    go(w, "v_pk_fmac_f16 v4, v1, v2")
    for i in range(32):
        got = int(w.v[4, i])
        for h in (0, 16):
            x, y, z = (t[i] >> h & 0xFFFF for t in (a, b, c))
            want = zero_or(val(x, fmt) * val(y, fmt) + val(z, fmt), fmt, mode, ((x ^ y) >> 15, z >> 15))
            assert got >> h & 0xFFFF == want, (i, h)


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_fmac_dx9_and_the_rtz_pack_keep_their_rules(mode: int) -> None:
    rng = random.Random(zlib.crc32(f"fmacdx9{mode}".encode()))
    a, b, c = (_inputs("f32", rng.getrandbits(16)) for _ in range(3))
    a[2] = 0
    w = wave(_mode("f32", mode) | mode << 2)
    w.v[1], w.v[2], w.v[3] = a, b, c
    go(w, "v_fmac_dx9_zero_f32_e32 v3, v1, v2")
    for i in range(32):
        x, y, z = (val(t[i], "f32") for t in (a, b, c))
        if x == 0 or y == 0:
            assert int(w.v[3, i]) == c[i], i
        elif None not in (x, y, z):
            assert int(w.v[3, i]) == zero_or(x * y + z, "f32", mode, ((a[i] ^ b[i]) >> 31, c[i] >> 31)), i
    w.v[1], w.v[2] = a, b
    go(w, "v_cvt_pk_rtz_f16_f32_e64 v5, v1, v2")           # toward zero in every mode
    for i in range(32):
        for h, src in ((0, a), (16, b)):
            x = val(src[i], "f32")
            if x is None:
                continue
            want = (src[i] >> 31) << 15 if x == 0 else rdir(x, "f16", ZERO)
            assert int(w.v[5, i]) >> h & 0xFFFF == want, (i, h)


def _two_over_pi(n: int) -> int:
    """floor(2/pi * 2**n), pi from the arctangent series of pi/4 = 4 atan(1/5) - atan(1/239) summed in Fraction
    (exact rationals, a truncation error below 2**-(n + 8))."""
    def atan_inv(k: int) -> Fraction:
        total, term, j = Fraction(0), Fraction(1, k), 0
        while term > Fraction(1, 1 << (n + 16)):
            total += term / (2 * j + 1) * (-1) ** j
            term /= k * k
            j += 1
        return total
    pi = 4 * (4 * atan_inv(5) - atan_inv(239))
    return math.floor(2 / pi * 2 ** n)


@needs_mc
@pytest.mark.parametrize("mode", [0, *MODES])
def test_trig_preop_rounds_its_subnormal_segments_in_the_mode(mode: int) -> None:
    bits = _two_over_pi(1201)
    segs = [18, 19, 20, 21, 22, 23, 31, 0]
    w = wave(_mode("f64", mode))
    w.v[2], w.v[3] = 0, 0x3FF00000                           # S0 = 1.0: exponent field 1023, no extra shift
    w.v[4] = segs * 4
    go(w, "v_trig_preop_f64 v[6:7], v[2:3], v4")
    for i, k in enumerate(segs):
        shift = 53 * k
        drop = 1201 - 53 - shift
        chunk = (bits >> drop if drop >= 0 else bits << -drop) & ((1 << 53) - 1)
        x = Fraction(chunk) * Fraction(2) ** (-53 - shift)
        want = rdir(x, "f64", mode) if x else 0
        got = int(w.v[6, i]) | int(w.v[7, i]) << 32
        assert got == want, (mode, k, hex(got), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_div_scale_down_scaling_rounds_in_the_mode(mode: int) -> None:
    """f64: where 1/S1 is denormal (S1 huge) and S2/S1 underflows to 0, S0 is scaled by 2**-128; a small S0 then
    becomes subnormal and loses bits (f32 never gets there: the guide tests its reciprocal in f64)."""
    rng = random.Random(zlib.crc32(f"divscale{mode}".encode()))
    num = [rng.getrandbits(1) << 63 | rng.randint(100, 140) << 52 | rng.getrandbits(52) for _ in range(32)]
    w = wave(_mode("f64", mode))
    _put(w, 2, num, "f64")
    _put(w, 4, [0x7FE8000000000000] * 32, "f64")             # 1/S1 is an f64 denormal
    go(w, "v_div_scale_f64 v[6:7], vcc_lo, v[2:3], v[4:5], v[2:3]")     # S0 = the numerator
    got = _get(w, 6, "f64")
    for i in range(32):
        x = val(num[i], "f64") * Fraction(2) ** -128
        assert got[i] == rdir(x, "f64", mode), (i, hex(num[i]), hex(got[i]))


@needs_mc
@pytest.mark.parametrize(("m32", "m16"), [(UP, DOWN), (DOWN, UP), (ZERO, ZERO), (UP, 0), (0, DOWN)])
def test_vinterp_rounds_its_fma_and_f16_conversion_in_their_fields(m32: int, m16: int) -> None:
    rng = random.Random(zlib.crc32(f"interp{m32}{m16}".encode()))
    p = [rng.getrandbits(1) << 31 | (127 + rng.randint(-10, 10)) << 23 | rng.getrandbits(23) for _ in range(32)]
    ij = [rng.getrandbits(1) << 31 | (127 + rng.randint(-10, 10)) << 23 | rng.getrandbits(23) for _ in range(32)]
    acc = [rng.getrandbits(1) << 31 | (127 + rng.randint(-10, 10)) << 23 | rng.getrandbits(23) for _ in range(32)]
    q = [i // 4 * 4 for i in range(32)]
    for text in ("v_interp_p10_f32 v4, v1, v2, v1", "v_interp_p2_f16_f32 v4, v1, v2, v3",
                 "v_interp_p2_rtz_f16_f32 v4, v1, v2, v3"):
        w = wave(MODE_DEFAULT | m32 | m16 << 2)
        w.v[1], w.v[2], w.v[3], w.v[4] = p, ij, acc, 0xDEAD0000
        go(w, text)
        for i in range(32):
            if "p10" in text:
                x = exact(p[q[i] + 1], "f32") * exact(ij[i], "f32") + exact(p[q[i]], "f32")
                want = rdir(x, "f32", m32)
            else:                                          # the _f16_f32 forms read S0 as f16 (the low half)
                p0 = val(p[q[i] + 2] & 0xFFFF, "f16")
                if p0 is None:
                    continue
                x = p0 * exact(ij[i], "f32") + exact(acc[i], "f32")
                want = rdir(x, "f16", ZERO) if "rtz" in text else rdir(val(rdir(x, "f32", m32), "f32"), "f16", m16)
                want |= 0xDEAD0000
            assert int(w.v[4, i]) == want, (text, i, hex(int(w.v[4, i])), hex(want))


@needs_mc
@pytest.mark.parametrize("mode", [0, *MODES])
@pytest.mark.parametrize("fmt", ["f16", "f32", "f64"])
def test_omod_scaling_rounds_in_the_mode(fmt: str, mode: int) -> None:
    """OMOD after the operation's rounding (the model's reading): div:2 of a value just above the smallest normal
    is an inexact subnormal, mul:4 of a large value overflows."""
    m, e = FMT[fmt]
    rng = random.Random(zlib.crc32(f"omod{fmt}{mode}".encode()))
    xs = [1 << m | rng.getrandbits(m) | 1 for _ in range(16)] + \
         [((1 << e) - 3) << m | rng.getrandbits(m) for _ in range(16)]
    xs = [x | rng.getrandbits(1) << (m + e) for x in xs]
    one = {"f16": 0x3C00, "f32": 0x3F800000, "f64": 0x3FF0000000000000}[fmt]
    for omod, k in (("div:2", -1), ("mul:4", 2), ("mul:2", 1)):
        w = wave(_mode(fmt, mode))
        _put(w, 1, xs, fmt)
        _put(w, 4, [one] * 32, fmt)
        regs = ("v[8:9], v[1:2], v[4:5]" if fmt == "f64" else "v8, v1, v4")
        go(w, f"v_mul_{fmt}{'' if fmt == 'f64' else '_e64'} {regs} {omod}")
        got = _get(w, 8, fmt)
        for i in range(32):
            want = rdir(exact(xs[i], fmt) * Fraction(2) ** k, fmt, mode)
            assert got[i] == want, (fmt, omod, i, hex(xs[i]), hex(got[i]), hex(want))


KERNEL = """s_round_mode 0x5
v_add_nc_u32 v1, s2, v0
v_cvt_f32_u32 v1, v1
v_mul_f32 v2, 0x3eaaaaab, v1
v_sqrt_f32 v4, v1
v_add_f32 v4, v4, v2
v_mul_f32_e64 v4, v4, v4 div:2
v_pk_add_f16 v5, v2, v4
v_xor_b32 v4, v4, v5
s_lshl_b32 s4, s2, 5
v_add_nc_u32 v5, s4, v0
v_lshlrev_b32 v5, 2, v5
global_store_b32 v5, v4, s[0:1]
s_endpgm"""


@needs_mc
def test_directed_rounding_in_a_lockstep_dispatch_equals_one_wave_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """``s_round_mode`` (f32 and f16 toward +infinity), then converts, adds, a product, a square root, OMOD and a
    packed f16 add: 8 one-wave workgroups in lockstep give each lane the value computed here, and the same words
    run one wave at a time."""
    import dataclasses
    import struct

    from rdna3asm import asm_many

    from tests.mocks.rdna3.test_mock_rdna3 import _flat_program, _regs
    from tinyhw.mocks.rdna3 import FlatMemory, dispatch, run_dispatch

    words = [x for ws in asm_many([ln for ln in KERNEL.splitlines() if ln.strip()]) for x in ws]

    def once() -> tuple[list[int], int]:
        mem = FlatMemory(0x10_0000_0000, 1 << 16)
        entry = _flat_program(mem, words)
        out = mem.alloc(4 * 256)
        regs = _regs(entry, (out & M32, out >> 32), (32, 1, 1), (8, 1, 1))
        regs = dataclasses.replace(regs, rsrc1=regs.rsrc1 | 0xF0 << 12)       # FLOAT_MODE: denormals kept
        res = run_dispatch(regs, mem)
        return list(struct.unpack("<256I", mem.read(out, 4 * 256))), res.lockstep_workgroups
    got, wide = once()
    assert wide == 8
    for g in range(8):
        for i in range(32):
            v1 = Fraction(i + g)
            v2 = rdir(v1 * exact(0x3EAAAAAB, "f32"), "f32", UP) if v1 else 0
            v4 = val(_sqrt_dir(v1, "f32", UP), "f32") if v1 else Fraction(0)
            v4 = val(rdir(v4 + val(v2, "f32"), "f32", UP), "f32") if v2 else v4
            v4b = rdir(val(rdir(v4 * v4, "f32", UP), "f32") / 2, "f32", UP) if v4 else 0
            halves = []
            for h in (0, 16):
                x, y = val(v2 >> h & 0xFFFF, "f16"), val(v4b >> h & 0xFFFF, "f16")
                halves.append(0 if x is None or y is None else (rdir(x + y, "f16", UP) if x + y else
                              (v2 >> h & 0x8000) & (v4b >> h & 0x8000)))
            want = v4b ^ (halves[0] | halves[1] << 16)
            if any(val(t >> h & 0xFFFF, "f16") is None for t in (v2, v4b) for h in (0, 16)):
                continue                                    # an f16 half that is infinite or NaN: not checked
            assert got[32 * g + i] == want, (g, i, hex(got[32 * g + i]), hex(want))
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)
    assert once() == (got, 0)


# ---- the transcendentals: expected values from series evaluated here at 120 digits --------------------------------
# Independent of the core's evaluation (decimal's exp/ln, Machin's pi, octant reduction): pi by the Gauss-Legendre
# iteration, ln by the atanh series, exp and sin/cos by their Taylor series on the unreduced argument. Each value is
# rounded with rdir at both ends of its error interval (10**-100 relative, far above the error of a 120-digit
# evaluation); the test asserts both ends round alike, i.e. 120 digits decide every rounding tested, and that the
# core (80 digits, settled) gives that rounding. The rational cases (rcp; rsq by the square-root test's integer
# method; 2**integer, log2 of a power of two, the quarter turns) are computed exactly.

_PREC = 120


@functools.lru_cache(maxsize=1)
def _pi120() -> Decimal:
    """pi by the Gauss-Legendre (AGM) iteration at 130 digits."""
    with decimal.localcontext() as ctx:
        ctx.prec = _PREC + 10
        a, b, t, p = Decimal(1), 1 / Decimal(2).sqrt(), Decimal(1) / 4, Decimal(1)
        for _ in range(12):
            a, b, t, p = (a + b) / 2, (a * b).sqrt(), t - p * ((a - b) / 2) ** 2, 2 * p
        return (a + b) ** 2 / (4 * t)


def _series(start: Decimal, step: Callable[[Decimal, int], Decimal]) -> Decimal:
    """The sum of terms from ``start`` by ``term = step(term, k)`` until a term is below 10**-130 of the sum."""
    total, term, k = start, start, 1
    while abs(term) > Decimal(10) ** -(_PREC + 10) * max(abs(total), Decimal(10) ** -400):
        term = step(term, k)
        total += term
        k += 1
    return total


def _ln_ref(x: Fraction) -> Decimal:
    """ln x = k ln 2 + 2 atanh((m - 1) / (m + 1)) with x = m * 2**k, m in [1, 2)."""
    k = _log2_floor(x)
    m = x / Fraction(2) ** k
    with decimal.localcontext() as ctx:
        ctx.prec = _PREC + 10

        def atanh2(z: Decimal) -> Decimal:
            z2 = z * z
            return 2 * _series(z, lambda t, j: t * z2 * (2 * j - 1) / (2 * j + 1))
        md = Decimal(m.numerator) / Decimal(m.denominator)
        return k * atanh2(Decimal(1) / 3) + atanh2((md - 1) / (md + 1))


def _ref(op: str, x: Fraction) -> Fraction | Decimal | None:
    """The exact result (Fraction) where it is rational, else a 120-digit value (Decimal); None: a special case."""
    with decimal.localcontext() as ctx:
        ctx.prec = _PREC + 10
        xd = Decimal(x.numerator) / Decimal(x.denominator)
        if op == "rcp":
            return None if x == 0 else 1 / x
        if op == "exp":
            if abs(x) > 2000:                      # past every format's range: 2**+-2000 rounds alike
                return Fraction(2) ** (2000 if x > 0 else -2000)
            if x.denominator == 1:
                return Fraction(2) ** int(x)
            n = math.floor(x)
            y = (xd - n) * _ln_ref(Fraction(2))
            return _series(Decimal(1), lambda t, j: t * y / j) * Decimal(2) ** n
        if op == "log":
            if x <= 0:
                return None
            k = _log2_floor(x)
            return Fraction(k) if x == Fraction(2) ** k else _ln_ref(x) / _ln_ref(Fraction(2))
        r = x - math.floor(x)                      # sin/cos of 2 pi x: r in [0, 1), then [-1/2, 1/2)
        if op == "cos":
            r += Fraction(1, 4)                    # cos(2 pi r) = sin(2 pi (r + 1/4))
        r -= math.floor(r + Fraction(1, 2))
        if 4 * r == math.floor(4 * r):             # the quarter turns: r = -1/2, -1/4, 0, 1/4
            return Fraction({-2: 0, -1: -1, 0: 0, 1: 1}[int(4 * r)])
        y = 2 * _pi120() * Decimal(r.numerator) / Decimal(r.denominator)
        y2 = y * y
        return _series(y, lambda t, j: -t * y2 / ((2 * j) * (2 * j + 1)))


def _rsq_dir(x: Fraction, fmt: str, mode: int) -> int:
    """1/sqrt(x) (x > 0) rounded in a directed mode by integer comparisons: the largest y with y * y * x <= 1, the
    next value up when rounding up and y * y * x != 1 (the result is positive: toward zero is toward -infinity)."""
    lo = rdir(Fraction(1 / math.sqrt(float(x))), fmt, ZERO)
    while val(lo, fmt) ** 2 * x > 1:
        lo -= 1
    while val(lo + 1, fmt) is not None and val(lo + 1, fmt) ** 2 * x <= 1:
        lo += 1
    return lo if mode != UP or val(lo, fmt) ** 2 * x == 1 else lo + 1


def _special_want(op: str, x: int, fmt: str) -> int | str | None:
    """The result of a special case (a zero, infinite, NaN or out-of-domain operand): bits, "nan", or None."""
    m, e = FMT[fmt]
    sbit, inf = 1 << (m + e), ((1 << e) - 1) << m
    neg, mag = x & sbit, x & (sbit - 1)
    if mag > inf:
        return "nan"
    if op == "rcp" and mag in (0, inf):
        return neg | (inf if mag == 0 else 0)
    if op == "rsq" and (mag in (0, inf) or neg):
        return neg | inf if mag == 0 else "nan" if neg else 0
    if op == "log" and (mag in (0, inf) or neg):
        return sbit | inf if mag == 0 else "nan" if neg else inf
    if op == "exp" and mag == inf:
        return 0 if neg else inf
    if op in ("sin", "cos") and mag == inf:
        return "nan"
    return None


def _want_trans(op: str, x: int, fmt: str, mode: int) -> int | str:
    """The expected bits of ``op`` on ``x`` rounded in ``mode`` ("nan": any NaN)."""
    sp = _special_want(op, x, fmt)
    if sp is not None:
        return sp
    m, e = FMT[fmt]
    xv = exact(x, fmt)
    if op == "rsq":
        return _rsq_dir(xv, fmt, mode)
    y = _ref(op, xv)
    assert y is not None
    if isinstance(y, Fraction):
        if y == 0:                                 # sin: the operand's sign; cos and log2(1): +0
            return (x >> (m + e)) << (m + e) if op == "sin" else 0
        return rdir(y, fmt, mode)
    yf = Fraction(y)
    eps = Fraction(1, 10 ** 100)
    lo, hi = rdir(yf * (1 - eps), fmt, mode), rdir(yf * (1 + eps), fmt, mode)
    assert lo == hi, (op, fmt, hex(x), "120 digits do not decide this rounding")
    return lo


def _trans_inputs(op: str, fmt: str, seed: int) -> list[int]:
    """32 operands: random ones (_inputs) with the special and exact cases of ``op`` in front."""
    m, e = FMT[fmt]
    bias, sbit = (1 << (e - 1)) - 1, 1 << (m + e)
    inf = ((1 << e) - 1) << m

    def num(x: float) -> int:
        return {"f16": f16, "f32": f32, "f64": f64}[fmt](x)
    xs = _inputs(fmt, seed)
    if op in ("rsq", "log"):
        xs = [x & ~sbit if i % 5 else x for i, x in enumerate(xs)]          # mostly positive
    nan = inf | 1 << (m - 1)
    tiny = 2.0 ** (1 - bias - m)                                            # the smallest subnormal
    fixed = {
        "rcp": [0, sbit, inf, sbit | inf, nan, num(4.0), num(-0.25), 1, 2, num(3.0), num(1.5 * 2.0 ** bias)],
        "rsq": [0, sbit, inf, sbit | num(4.0), nan, num(4.0), num(0.0625), 1, 2, num(2.0), num(2.0 ** (bias - 1))],
        "exp": [inf, sbit | inf, nan, 0, num(3.0), num(-2.0), num(1 - bias - m - 0.5), num(-bias - 2.25),
                num(bias + 1.5), num(2.0 ** -(m + 5)), num(-(2.0 ** -(m + 5))), num(1 - bias - 0.25)],
        "log": [0, sbit, inf, nan, sbit | num(2.0), num(1.0), num(0.5), 1, num(2.0 ** bias), num(1 + 2.0 ** -m),
                num(1 - 2.0 ** -(m + 1)), num(tiny * 3)],
        "sin": [0, sbit, inf, nan, num(0.25), num(0.5), num(0.75), num(-0.5), num(1.0), num(-0.25), num(2.0 ** -10),
                1, sbit | 1, num(256.25 if fmt == "f16" else 1000.75), num(0.125), num(-0.375)],
    }
    fixed["cos"] = fixed["sin"]
    f = fixed[op]
    return f + xs[len(f):]


TRANS = [(op, fmt) for op in ("rcp", "rsq", "exp", "log", "sin", "cos") for fmt in ("f16", "f32", "f64")
         if fmt != "f64" or op in ("rcp", "rsq")]


@needs_mc
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("op", "fmt"), TRANS)
def test_transcendentals_round_their_exact_result_in_the_mode(op: str, fmt: str, mode: int) -> None:
    """v_rcp/rsq/exp/log/sin/cos in each width and directed mode: each lane the exact result rounded once in the
    mode (the model's choice), with the special cases, subnormal and overflowing results (rcp of the smallest
    subnormal, exp past the range: toward zero, the largest finite value) and the exact cases."""
    xs = _trans_inputs(op, fmt, zlib.crc32(f"trans{op}{fmt}{mode}".encode()))
    w = wave(_mode(fmt, mode))
    _put(w, 1, xs, fmt)
    regs = "v[8:9], v[1:2]" if fmt == "f64" else "v8, v1"
    go(w, f"v_{op}_{fmt}_e32 {regs}")
    got = _get(w, 8, fmt)
    m, e = FMT[fmt]
    for i, x in enumerate(xs):
        want = _want_trans(op, x, fmt, mode)
        if want == "nan":
            assert _special(got[i], fmt) and got[i] & ((1 << m) - 1), (op, fmt, mode, hex(x), hex(got[i]))
        else:
            assert got[i] == want, (op, fmt, mode, i, hex(x), hex(got[i]), hex(int(want)))


@needs_mc
@pytest.mark.parametrize("mode", MODES)
def test_rcp_iflag_and_the_overflowing_reciprocals(mode: int) -> None:
    """v_rcp_iflag_f32 rounds as v_rcp_f32; 1/(smallest subnormal) overflows in every width: infinity away from
    zero's direction, else the largest finite value."""
    for fmt, text in (("f32", "v_rcp_iflag_f32_e32 v8, v1"), ("f16", "v_rcp_f16_e32 v8, v1"),
                      ("f64", "v_rcp_f64_e32 v[8:9], v[1:2]")):
        m, e = FMT[fmt]
        sbit, maxf, inf = 1 << (m + e), ((1 << e) - 2) << m | ((1 << m) - 1), ((1 << e) - 1) << m
        xs = [1, sbit | 1, *_inputs(fmt, mode)[2:]]
        w = wave(_mode(fmt, mode))
        _put(w, 1, xs, fmt)
        go(w, text)
        got = _get(w, 8, fmt)
        assert got[0] == (inf if mode == UP else maxf), (fmt, mode)
        assert got[1] == sbit | (inf if mode == DOWN else maxf), (fmt, mode)
        for i in range(2, 32):
            want = _want_trans("rcp", xs[i], fmt, mode)
            assert want == "nan" or got[i] == want, (fmt, mode, i)


@needs_mc
def test_transcendental_forms_read_their_own_mode_field() -> None:
    """v_exp_f16 reads bits 3:2, v_exp_f32 bits 1:0: the other field's direction leaves the result at nearest
    even (equal to the mode-0 run), its own field changes some lanes."""
    rng = random.Random(11)
    for fmt, other, own in (("f16", UP, UP << 2), ("f32", UP << 2, UP)):
        m, e = FMT[fmt]
        bias = (1 << (e - 1)) - 1
        xs = [(bias - 2 + rng.randint(0, 3)) << m | rng.getrandbits(m) for _ in range(32)]
        res = []
        for mode in (0, other, own):
            w = wave(MODE_DEFAULT | mode)
            _put(w, 1, xs, fmt)
            go(w, f"v_exp_{fmt}_e32 v8, v1")
            res.append(_get(w, 8, fmt))
        assert res[1] == res[0]
        assert res[2] != res[0]
        assert res[2] == [_want_trans("exp", x, fmt, UP) for x in xs]


@needs_mc
def test_transcendentals_flush_denormals_per_mode_in_a_directed_mode() -> None:
    """FP_DENORM's f32 bits cleared: a subnormal operand is read as a zero (rcp: +inf) and a subnormal result
    (rcp of a large value, rounded up) is written as +0."""
    w = wave((MODE_DEFAULT & ~0x30) | UP)
    w.v[1] = [1, f32(1.5 * 2.0 ** 127), f32(3.0)] * 10 + [0, 0]
    go(w, "v_rcp_f32_e32 v8, v1")
    assert [int(x) for x in w.v[8, :3]] == [0x7F800000, 0, rdir(Fraction(1, 3), "f32", UP)]


def test_the_core_evaluation_settles_at_80_digits_for_many_operands(monkeypatch: pytest.MonkeyPatch) -> None:
    """The core's decision interval (80 digits) is never undecided for random f16/f32 operands of exp, log and
    sin: _settle returns at its first precision; checked by counting its approximations."""
    from tinyhw.mocks.rdna3 import rounding

    rng = random.Random(7)
    calls: list[int] = []
    real = rounding._settle

    def counting(approx: Callable[[int], Fraction], what: str) -> Fraction:
        def wrapped(d: int) -> Fraction:
            calls.append(d)
            return approx(d)
        return real(wrapped, what)
    monkeypatch.setattr(rounding, "_settle", counting)
    for _ in range(300):
        x = exact(rng.getrandbits(1) << 31 | rng.randint(100, 150) << 23 | rng.getrandbits(23), "f32")
        for fn in (rounding._exp2, rounding._log2, lambda y: rounding._turns(y, False)):
            fn(x)
    assert len(calls) > 500 and set(calls) == {80}


# ---- every VALU operation is in exactly one category --------------------------------------------------------------

def test_every_valu_mnemonic_is_in_exactly_one_rounding_category() -> None:
    import re

    from tinyhw.formats.rdna3_ops import OPS
    from tinyhw.mocks.rdna3 import rounding

    cats = {"DIRECTED": set(rounding.DIRECTED), "DIRECTED_IN_MODULE": rounding.DIRECTED_IN_MODULE,
            "ROUND_FREE": rounding.ROUND_FREE, "REFUSED": rounding.REFUSED, "NOT_FLOAT": rounding.NOT_FLOAT}
    names = set()
    for (enc, _op), (mn, _t) in OPS.items():
        if enc.startswith(("VOP", "VINTERP")):
            for part in mn.split("::"):
                names.add(re.sub(r"(_e32|_e64)?(_dpp)?$", "", part))
    bad = {n: [c for c, s in cats.items() if n in s] for n in sorted(names)}
    bad = {n: c for n, c in bad.items() if len(c) != 1}
    assert not bad, bad
    assert len(names) > 480
    floaty = re.compile(r"f16|f32|f64|bf16")
    assert not {n for n in rounding.NOT_FLOAT if floaty.search(n)}


def test_the_refusal_message_names_operation_and_mode() -> None:
    """REFUSED is empty; the message an operation without a rounding rule would stop with names it and the mode."""
    from tinyhw.mocks.rdna3 import rounding

    assert not rounding.REFUSED
    msg = rounding.refusal("v_new_f32", 2 << 2 | 1)
    assert msg == ("MODE round mode 0x9 (f32 toward +infinity; f16/f64 toward -infinity) on v_new_f32: only "
                   "round-to-nearest-even is modelled for it")


def test_no_valu_operation_refuses_a_directed_mode_when_run() -> None:
    """Every VALU table entry's sample encoding (tinyhw.autogen.genisa's generator) run under MODE.FP_ROUND 0xF:
    it stops with a round-mode refusal exactly when its mnemonic is in REFUSED, which is empty: nothing refuses
    (other refusals, of invalid samples or unmodelled operands, are not about rounding)."""
    import re
    import struct

    from tinyhw.autogen import genisa
    from tinyhw.formats.amdisa import decode_at
    from tinyhw.mocks.rdna3 import rounding
    from tinyhw.mocks.rdna3.dispatch import _compile
    from tinyhw.mocks.rdna3.state import Wave

    rng = random.Random(3)
    regs = np.array([rng.choice([0x3FC00000, 0x3E00, 0x40490FDB, 1, 7]) for _ in range(256 * 32)],
                    dtype=np.uint32).reshape(256, 32)
    seen: dict[str, bool] = {}
    for enc, _op, ws, _fields in genisa._words():
        if not enc.startswith(("VOP", "VINTERP")):
            continue
        raw = struct.pack(f"<{len(ws[0])}I", *ws[0])
        inst = decode_at(raw + bytes(16), 0, "gfx11")
        try:
            fn = _compile(inst, raw[:inst.size], 0, True, {})
        except Unimplemented:
            continue
        w = Wave(256, np.zeros(256, np.uint8), None, (0, 0, 0), 0)      # the samples name VGPRs up to 255
        w.s[126], w.mode = M32, MODE_DEFAULT | 0xF
        w.v[:] = regs
        try:
            fn(w)
            refused = False
        except Unimplemented as e:
            refused = "round mode" in str(e)
        except (IndexError, ValueError):
            continue
        for part in inst.mnemonic.split("::"):
            name = re.sub(r"(_e32|_e64)?(_dpp)?$", "", part)
            seen[name] = seen.get(name, False) or refused
    assert len(seen) >= 499          # every VALU mnemonic but the 5 whose sample is invalid (cndmask_b16, lane ops)
    wrong = {n: r for n, r in seen.items() if r != (n in rounding.REFUSED)}
    assert not wrong, wrong
    assert not {n for n, r in seen.items() if r}
    trans = {"v_rcp_f64", "v_rsq_f16", "v_exp_f32", "v_log_f16", "v_sin_f32", "v_cos_f16", "v_rcp_iflag_f32"}
    assert trans <= set(seen)
