"""Table tests: float arithmetic, rounding and converts against IEEE 754 and the ISA reference's definitions.

32 lanes = 32 cases per instruction, from edge values (signed zeros, infinities, quiet NaN, the smallest and largest
subnormals and normals, halfway cases) and seeded random bit patterns of nearby exponents. Expected values are exact
rationals (``fractions.Fraction``) rounded by rdna3isa.round_float, or the guide's definition in Python integers; a
NaN result is checked to be a quiet NaN (the payload is not pinned here). MODE is the default: denormals kept,
round to nearest even, IEEE mode on.
"""

from __future__ import annotations

import math
import random
import zlib
from collections.abc import Callable
from fractions import Fraction

import pytest
from rdna3isa import exact, round_float, run, v, vop1, vop2, vop3, wave

M32 = (1 << 32) - 1
FMT = {"f16": (10, 5), "f32": (23, 8), "f64": (52, 11)}
NAN = None  # "any quiet NaN"


def _bits(fmt: str) -> int:
    m, e = FMT[fmt]
    return 1 + m + e


def _is_nan(x: int, fmt: str) -> bool:
    m, e = FMT[fmt]
    return (x >> m) & ((1 << e) - 1) == (1 << e) - 1 and x & ((1 << m) - 1) != 0


def _is_inf(x: int, fmt: str) -> bool:
    m, e = FMT[fmt]
    return x & ((1 << (m + e)) - 1) == ((1 << e) - 1) << m


def _sign(x: int, fmt: str) -> int:
    return x >> (_bits(fmt) - 1) & 1


def _inf(sign: int, fmt: str) -> int:
    m, e = FMT[fmt]
    return sign << (m + e) | ((1 << e) - 1) << m


def _zero(sign: int, fmt: str) -> int:
    return sign << (_bits(fmt) - 1)


def _specials(fmt: str) -> list[int]:
    m, e = FMT[fmt]
    s = 1 << (m + e)
    one = ((1 << (e - 1)) - 1) << m
    vals = [0, 1, (1 << m) - 1, 1 << m, ((1 << e) - 2) << m | ((1 << m) - 1), one, one | 1 << (m - 1),
            _inf(0, fmt), ((1 << e) - 1) << m | 1 << (m - 1)]
    return vals + [x | s for x in vals]


def _inputs(fmt: str, seed: int, n: int = 32) -> list[int]:
    """Edge values and random patterns; half the random ones have an exponent near 1.0 so sums do not collapse."""
    rng = random.Random(seed)
    m, e = FMT[fmt]
    bias = (1 << (e - 1)) - 1
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.35:
            out.append(rng.choice(_specials(fmt)))
        elif r < 0.7:
            exp = bias + rng.randint(-4, 4)
            out.append(rng.getrandbits(1) << (m + e) | exp << m | rng.getrandbits(m))
        else:
            out.append(rng.getrandbits(_bits(fmt)))
    return out


def _quiet_nan_or(want: int | None, got: int, fmt: str) -> bool:
    if want is NAN:
        m, _e = FMT[fmt]
        return _is_nan(got, fmt) and bool(got >> (m - 1) & 1)
    return got == want


def add(a: int, b: int, fmt: str) -> int | None:
    if _is_nan(a, fmt) or _is_nan(b, fmt):
        return NAN
    if _is_inf(a, fmt) or _is_inf(b, fmt):
        if _is_inf(a, fmt) and _is_inf(b, fmt) and _sign(a, fmt) != _sign(b, fmt):
            return NAN
        return a if _is_inf(a, fmt) else b
    x = exact(a, fmt) + exact(b, fmt)
    if x == 0:
        both = _sign(a, fmt) & _sign(b, fmt)      # -0 + -0 = -0; an exact zero sum is +0 in round-to-nearest
        return _zero(both, fmt)
    return round_float(x, fmt)


def mul(a: int, b: int, fmt: str) -> int | None:
    if _is_nan(a, fmt) or _is_nan(b, fmt):
        return NAN
    s = _sign(a, fmt) ^ _sign(b, fmt)
    if _is_inf(a, fmt) or _is_inf(b, fmt):
        other = b if _is_inf(a, fmt) else a
        if not _is_inf(other, fmt) and exact(other, fmt) == 0:
            return NAN
        return _inf(s, fmt)
    x = exact(a, fmt) * exact(b, fmt)
    return _zero(s, fmt) if x == 0 else round_float(x, fmt)


def neg(b: int, fmt: str) -> int:
    return b ^ 1 << (_bits(fmt) - 1)


ARITH: dict[str, tuple[str, Callable[[int, int, str], int | None]]] = {
    "v_add_f32": ("f32", add),
    "v_sub_f32": ("f32", lambda a, b, f: add(a, neg(b, f), f)),
    "v_subrev_f32": ("f32", lambda a, b, f: add(b, neg(a, f), f)),
    "v_mul_f32": ("f32", mul),
    "v_add_f16": ("f16", add),
    "v_sub_f16": ("f16", lambda a, b, f: add(a, neg(b, f), f)),
    "v_subrev_f16": ("f16", lambda a, b, f: add(b, neg(a, f), f)),
    "v_mul_f16": ("f16", mul),
}


def _vals(w, n: int) -> list[int]:
    return [int(x) for x in w.v[n, :32]]


@pytest.mark.parametrize("name", sorted(ARITH))
def test_vop2_float_arithmetic(name: str) -> None:
    fmt, ref = ARITH[name]
    seed = zlib.crc32(name.encode())
    a, b = _inputs(fmt, seed), _inputs(fmt, seed + 1)
    for words in (vop2(f"{name}_e32", 4, v(1), 2), vop3(f"{name}_e64", 4, v(1), v(2))):
        w = wave()
        w.v[1], w.v[2] = a, b
        w.v[4] = 0x5A5A0000
        run(words, w)
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            got = _vals(w, 4)[i]
            if fmt == "f16":
                assert got >> 16 == 0x5A5A, name           # the high half is kept
                got &= 0xFFFF
            want = ref(x, y, fmt)
            assert _quiet_nan_or(want, got, fmt), (name, hex(x), hex(y), hex(got), want and hex(want))


def _lanes64(w, n: int, vals: list[int]) -> None:
    w.v[n] = [x & M32 for x in vals]
    w.v[n + 1] = [x >> 32 for x in vals]


def _get64(w, n: int) -> list[int]:
    return [int(p) | int(q) << 32 for p, q in zip(w.v[n, :32], w.v[n + 1, :32], strict=True)]


@pytest.mark.parametrize(("name", "ref"), [("v_add_f64", add), ("v_mul_f64", mul)])
def test_vop3_f64_arithmetic(name: str, ref: Callable[[int, int, str], int | None]) -> None:
    seed = zlib.crc32(name.encode())
    a, b = _inputs("f64", seed), _inputs("f64", seed + 1)
    w = wave()
    _lanes64(w, 2, a)
    _lanes64(w, 4, b)
    run(vop3(name, 6, v(2), v(4)), w)
    for x, y, got in zip(a, b, _get64(w, 6), strict=True):
        want = ref(x, y, "f64")
        assert _quiet_nan_or(want, got, "f64"), (name, hex(x), hex(y), hex(got))


# ---- rounding to integral values ------------------------------------------------------------------------------------

def _integral(x: int, fmt: str, how: Callable[[Fraction], int]) -> int | None:
    if _is_nan(x, fmt):
        return NAN
    if _is_inf(x, fmt):
        return x
    r = how(exact(x, fmt))
    return _zero(_sign(x, fmt), fmt) if r == 0 else round_float(Fraction(r), fmt)


def _rne(q: Fraction) -> int:
    f = math.floor(q)
    d = q - f
    return f + 1 if d > Fraction(1, 2) or (d == Fraction(1, 2) and f % 2) else f


HOW: dict[str, Callable[[Fraction], int]] = {"trunc": math.trunc, "floor": math.floor, "ceil": math.ceil,
                                             "rndne": _rne}


@pytest.mark.parametrize("fmt", ["f16", "f32", "f64"])
@pytest.mark.parametrize("how", sorted(HOW))
def test_round_to_integral(how: str, fmt: str) -> None:
    xs = _inputs(fmt, zlib.crc32(f"{how}{fmt}".encode()))
    m, e = FMT[fmt]
    bias = (1 << (e - 1)) - 1
    half = (bias - 1) << m                                     # 0.5, 1.5, 2.5, -0.5 ...: halfway cases
    xs[:6] = [half, half | 1 << (_bits(fmt) - 1), bias << m | 1 << (m - 1), (bias + 1) << m | 1 << (m - 2),
              (bias + 1) << m | 1 << (m - 2) | 1 << (_bits(fmt) - 1), 1]
    w = wave()
    if fmt == "f64":
        _lanes64(w, 2, xs)
        run(vop1(f"v_{how}_f64_e32", 6, v(2)), w)
        got = _get64(w, 6)
    else:
        w.v[2] = xs
        run(vop1(f"v_{how}_{fmt}_e32", 6, v(2)), w)
        got = [g & ((1 << _bits(fmt)) - 1) for g in _vals(w, 6)]
    for x, g in zip(xs, got, strict=True):
        assert _quiet_nan_or(_integral(x, fmt, HOW[how]), g, fmt), (how, fmt, hex(x), hex(g))


# ---- converts --------------------------------------------------------------------------------------------------------

def _to_int(x: int, fmt: str, lo: int, hi: int, how: Callable[[Fraction], int] = math.trunc) -> int:
    """The guide's f32_to_i32 / f32_to_u32 family: NaN gives 0, out-of-range values saturate."""
    if _is_nan(x, fmt):
        return 0
    if _is_inf(x, fmt):
        return hi if not _sign(x, fmt) else lo
    return max(lo, min(hi, how(exact(x, fmt))))


def _half_up(q: Fraction) -> int:
    """Round half toward +infinity, exactly. The guide writes v_cvt_nearest_i32_f32 as floor(S0.f32 + 0.5F) and
    notes "0.5ULP accuracy": an f32 addition would round 0.49999997 + 0.5 up to 1.0, an error over one half, so
    the model (and this table) read it as the exact floor(x + 1/2); a choice not checked on hardware."""
    return math.floor(q + Fraction(1, 2))


CVT_TO_INT: dict[str, tuple[str, Callable[[int], int]]] = {
    "v_cvt_i32_f32": ("f32", lambda x: _to_int(x, "f32", -(1 << 31), (1 << 31) - 1) & M32),
    "v_cvt_u32_f32": ("f32", lambda x: _to_int(x, "f32", 0, M32)),
    "v_cvt_i32_f64": ("f64", lambda x: _to_int(x, "f64", -(1 << 31), (1 << 31) - 1) & M32),
    "v_cvt_u32_f64": ("f64", lambda x: _to_int(x, "f64", 0, M32)),
    "v_cvt_floor_i32_f32": ("f32", lambda x: _to_int(x, "f32", -(1 << 31), (1 << 31) - 1, math.floor) & M32),
    "v_cvt_nearest_i32_f32": ("f32", lambda x: _to_int(x, "f32", -(1 << 31), (1 << 31) - 1, _half_up) & M32),
}


@pytest.mark.parametrize("name", sorted(CVT_TO_INT))
def test_float_to_int_converts(name: str) -> None:
    fmt, ref = CVT_TO_INT[name]
    xs = _inputs(fmt, zlib.crc32(name.encode()))
    big = {"f32": [0x4F000000, 0x4EFFFFFF, 0xCF000000, 0xCF000001, 0x4F800000, 0x4F7FFFFF, 0x3EFFFFFF, 0xBF000000],
           "f64": [0x41DFFFFFFFC00000, 0x41E0000000000000, 0xC1E0000000000000, 0xC1E0000000200000,
                   0x41EFFFFFFFE00000, 0x41F0000000000000, 0x3FDFFFFFFFFFFFFF, 0xBFE0000000000000]}[fmt]
    xs[:len(big)] = big                                        # around 2^31, 2^32 and the halves
    w = wave()
    if fmt == "f64":
        _lanes64(w, 2, xs)
    else:
        w.v[2] = xs
    run(vop1(f"{name}_e32", 6, v(2)), w)
    assert _vals(w, 6) == [ref(x) for x in xs], name


CVT_FROM_INT: dict[str, tuple[str, Callable[[int], Fraction]]] = {
    "v_cvt_f32_i32": ("f32", lambda x: Fraction(x - (1 << 32) if x >> 31 else x)),
    "v_cvt_f32_u32": ("f32", Fraction),
    "v_cvt_f64_i32": ("f64", lambda x: Fraction(x - (1 << 32) if x >> 31 else x)),
    "v_cvt_f64_u32": ("f64", Fraction),
    "v_cvt_f32_ubyte0": ("f32", lambda x: Fraction(x & 0xFF)),
    "v_cvt_f32_ubyte1": ("f32", lambda x: Fraction(x >> 8 & 0xFF)),
    "v_cvt_f32_ubyte2": ("f32", lambda x: Fraction(x >> 16 & 0xFF)),
    "v_cvt_f32_ubyte3": ("f32", lambda x: Fraction(x >> 24)),
    "v_cvt_f16_u16": ("f16", lambda x: Fraction(x & 0xFFFF)),
    "v_cvt_f16_i16": ("f16", lambda x: Fraction((x & 0xFFFF) - (1 << 16) if x >> 15 & 1 else x & 0xFFFF)),
}


@pytest.mark.parametrize("name", sorted(CVT_FROM_INT))
def test_int_to_float_converts(name: str) -> None:
    fmt, ref = CVT_FROM_INT[name]
    rng = random.Random(zlib.crc32(name.encode()))
    xs = [0, 1, M32, 0x7FFFFFFF, 0x80000000, 0x01000001, 0xFFFF, 0x8000, 0x7FFF, 0xFFF1, 0x0800_0001] + \
        [rng.getrandbits(32) for _ in range(21)]
    w = wave()
    w.v[2] = xs
    w.v[6] = w.v[7] = 0x5A5A5A5A
    run(vop1(f"{name}_e32", 6, v(2)), w)
    got = _get64(w, 6) if fmt == "f64" else _vals(w, 6)
    for x, g in zip(xs, got, strict=True):
        if fmt == "f16":
            assert g >> 16 == 0x5A5A
        assert g & ((1 << _bits(fmt)) - 1) == round_float(ref(x), fmt), (name, hex(x), hex(g))


CVT_FLOAT: dict[str, tuple[str, str]] = {
    "v_cvt_f16_f32": ("f32", "f16"), "v_cvt_f32_f16": ("f16", "f32"), "v_cvt_f64_f32": ("f32", "f64"),
    "v_cvt_f32_f64": ("f64", "f32"),
}


@pytest.mark.parametrize("name", sorted(CVT_FLOAT))
def test_float_to_float_converts(name: str) -> None:
    src, dst = CVT_FLOAT[name]
    xs = _inputs(src, zlib.crc32(name.encode()))
    m, e = FMT[src]
    bias = (1 << (e - 1)) - 1
    if _bits(dst) < _bits(src):                               # values that land near the narrow format's limits
        dm, de = FMT[dst]
        dbias = (1 << (de - 1)) - 1
        for i, k in enumerate((dbias, dbias + 1, -dbias - dm, -dbias - dm - 1, 1 - dbias)):
            xs[i] = (bias + k) << m | random.Random(i).getrandbits(m)
    w = wave()
    if src == "f64":
        _lanes64(w, 2, xs)
    else:
        w.v[2] = xs
    w.v[6] = w.v[7] = 0x5A5A5A5A
    run(vop1(f"{name}_e32", 6, v(2)), w)
    got = _get64(w, 6) if dst == "f64" else _vals(w, 6)
    for x, g32 in zip(xs, got, strict=True):
        if dst == "f16":
            assert g32 >> 16 == 0x5A5A
        g = g32 & ((1 << _bits(dst)) - 1)
        want: int | None
        if _is_nan(x, src):
            want = NAN
        elif _is_inf(x, src):
            want = _inf(_sign(x, src), dst)
        elif exact(x, src) == 0:
            want = _zero(_sign(x, src), dst)
        else:
            want = round_float(exact(x, src), dst)
        assert _quiet_nan_or(want, g, dst), (name, hex(x), hex(g), want and hex(want))


# ---- VOP3 input modifiers: ABS then NEG on each float source ---------------------------------------------------------

def _maxnum(a: int, b: int, fmt: str) -> int:
    """IEEE maxNum of two non-NaN values with -0 < +0."""
    x, y = exact(a, fmt) if not _is_inf(a, fmt) else _inf_value(a, fmt), \
        exact(b, fmt) if not _is_inf(b, fmt) else _inf_value(b, fmt)
    if x == y:
        return a if _sign(a, fmt) < _sign(b, fmt) else b
    return a if x > y else b


def _minnum(a: int, b: int, fmt: str) -> int:
    x, y = exact(a, fmt) if not _is_inf(a, fmt) else _inf_value(a, fmt), \
        exact(b, fmt) if not _is_inf(b, fmt) else _inf_value(b, fmt)
    if x == y:
        return a if _sign(a, fmt) > _sign(b, fmt) else b
    return a if x < y else b


def _inf_value(x: int, fmt: str) -> Fraction:
    big = Fraction(2) ** 2000
    return -big if _sign(x, fmt) else big


def _fma(a: int, b: int, c: int, fmt: str) -> int | None:
    p = mul(a, b, fmt) if _is_inf(a, fmt) or _is_inf(b, fmt) or exact(a, fmt) * exact(b, fmt) == 0 else None
    if p is None:                                  # a finite non-zero product: one rounding of a * b + c
        if _is_inf(c, fmt):
            return c
        x = exact(a, fmt) * exact(b, fmt) + exact(c, fmt)
        return _zero(0, fmt) if x == 0 else round_float(x, fmt)
    return add(p, c, fmt)


MODS: dict[str, tuple[int, Callable[..., int | None]]] = {
    "add": (2, add), "mul": (2, mul), "fma": (3, _fma),
    "max": (2, _maxnum), "min": (2, _minnum),
    "max3": (3, lambda a, b, c, f: _maxnum(_maxnum(a, b, f), c, f)),
    "min3": (3, lambda a, b, c, f: _minnum(_minnum(a, b, f), c, f)),
}


@pytest.mark.parametrize("fmt", ["f16", "f32"])
@pytest.mark.parametrize("op", sorted(MODS))
def test_vop3_abs_and_neg_on_each_source(op: str, fmt: str) -> None:
    n, ref = MODS[op]
    seed = zlib.crc32(f"mods{op}{fmt}".encode())
    srcs = [[x for x in _inputs(fmt, seed + k, 64) if not _is_nan(x, fmt)][:32] for k in range(n)]
    sign = 1 << (_bits(fmt) - 1)
    name = f"v_{op}_{fmt}" + ("_e64" if n == 2 else "")
    for abs_, neg in ((0b001, 0), (0, 0b010), (0b011, 0b001), (0b111, 0b111), (0b100, 0b110)):
        w = wave()
        for k in range(n):
            w.v[1 + k] = srcs[k]
        run(vop3(name, 5, *[v(1 + k) for k in range(n)], abs_=abs_, neg=neg), w)
        for i in range(32):
            args = []
            for k in range(n):
                x = srcs[k][i]
                if abs_ >> k & 1:
                    x &= sign - 1
                if neg >> k & 1:
                    x ^= sign
                args.append(x)
            want = ref(*args, fmt)
            got = int(w.v[5, i]) & ((1 << _bits(fmt)) - 1)
            assert _quiet_nan_or(want, got, fmt), (op, fmt, abs_, neg, [hex(a) for a in args], hex(got))
