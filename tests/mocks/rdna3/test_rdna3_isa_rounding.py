"""MODE round modes (FP_ROUND: toward +infinity, -infinity, zero) on the float operations they change.

The expected value of each lane is the exact result (``fractions.Fraction``) rounded in the mode's direction, found
here independently of the core: the round-to-nearest-even reference rdna3isa.round_float gives one neighbour and a
step of one unit in the last place gives the other; the direction picks between them. Exact zero sums are -0 only
when rounding toward -infinity (IEEE 754 6.3). ``s_round_mode`` sets the mode in a kernel-like sequence.
"""

from __future__ import annotations

import random
import zlib
from fractions import Fraction

import pytest
from rdna3isa import exact, round_float, run, sopp, v, vop1, vop2, vop3, wave

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


def test_exact_operations_ignore_the_mode_and_others_refuse_it() -> None:
    w = wave(_mode("f32", ZERO))
    w.v[1] = 0x3FC00000                                     # 1.5
    w.v[2] = 0xBF800000                                     # -1.0
    run(vop2("v_max_f32_e32", 3, v(1), 2), w)
    assert int(w.v[3, 0]) == 0x3FC00000
    run(vop1("v_floor_f32_e32", 3, v(1)), w)
    assert int(w.v[3, 0]) == 0x3F800000
    run(vop1("v_cvt_i32_f32_e32", 3, v(1)), w)
    assert int(w.v[3, 0]) == 1
    with pytest.raises(Unimplemented, match=r"round mode 0x3 \(f32 toward zero\) on v_rcp_f32: an approximation"):
        run(vop1("v_rcp_f32_e32", 3, v(1)), w)
