"""MODE round modes other than nearest even, for the VALU operations whose result they change.

MODE.FP_ROUND (hwreg MODE bits 3:0, set from RSRC1.FLOAT_MODE, ``s_round_mode`` and ``s_setreg``) holds two 2-bit
modes: bits 1:0 for f32 results, bits 3:2 for f16 and f64 results; the values are LLVM SIDefines.h's
FP_ROUND_ROUND_TO_NEAREST (0), _TO_INF (1, toward +infinity), _TO_NEGINF (2) and _TO_ZERO (3). A conversion uses
the mode of its destination format. bf16 results (``v_dot2_bf16_bf16``, bf16 WMMA) use bits 3:2 with the 16-bit
formats: the guide names only single, double and half precision, so this is a choice not checked on hardware.

Under a directed mode the core computes each lane's exact result (``fractions.Fraction``: sums, products and fused
multiply-adds of the operands, ``x * 2**n``, the converted value, a reciprocal, or for a square root a rational that
every mode rounds as it rounds the irrational root) and rounds it once in that direction (:func:`round_bits`),
subnormals and overflow included (toward zero, or away from the overflowing side's infinity, the largest finite
value). Lanes with an infinite or NaN operand keep the nearest-even path's result (rounding cannot change it), and
an exact zero result keeps its IEEE sign: a product's is the XOR of the signs; a sum of two addends of unlike sign
(or a non-zero sum that cancels) is +0, except -0 when rounding toward -infinity.

The transcendentals (``v_rcp*``, ``v_rsq*``, ``v_exp*`` = 2**x, ``v_log*`` = log2 x, ``v_sin*``/``v_cos*`` of
2*pi*x) are approximations in the guide, which gives only error bounds (``V_RCP_F32`` 1 ULP, ...). The model's
choice, not checked on hardware: under a directed mode each returns its exact mathematical result rounded once in
that direction (within 1 ULP of it, so inside the guide's bounds), with the nearest path's special cases (a zero,
infinite, NaN or negative operand where the result is an infinity or NaN keeps the nearest path's result; MODE
denormal flushing as for every operation). The rational results are exact: 1/x, 1/sqrt(x) through the square
root's rational (sqrt(1/x)), 2**n for an integer n, log2 of a power of two, 0 and +-1 at the quarter turns (sin's
zero has the operand's sign, IEEE sinPi's rule; cos's zero and log2(1) are +0). Every other result is irrational:
it is evaluated with :mod:`decimal` at 80 digits (series written here for pi and sin/cos; decimal's correctly
rounded ``exp``/``ln``) and replaced by a rational that lies in the same gap between rounding boundaries, checked
from the error bound, with more digits when the check fails (:func:`_settle`).

Every VALU mnemonic of the decoder table is in exactly one of these sets (a test checks it, so a new operation
cannot fall through silently):

- :data:`DIRECTED`: rounded here, from the operation's exact result (the common VALU path calls :func:`directed`);
- :data:`DIRECTED_IN_MODULE`: rounded in directed modes by the module that computes them (the dot products, mixed
  fma, WMMA and ``v_pk_fmac_f16`` in ``wmma.py``, ``v_div_fmas``/``v_div_scale`` in ``vmath.py``, VINTERP in
  ``lanes.py``, the packed and VOPD forms through their scalar operation's :data:`DIRECTED` entry), with
  :func:`fma_lanes`, :func:`directed` and :func:`round_bits`;
- :data:`ROUND_FREE`: no round mode changes the result (exact by definition: min/max, moves, rounding to integral
  values, exact widening converts, float-to-int converts, which truncate or round as their names say, selections
  and sign changes, compares);
- :data:`REFUSED`: empty now; an operation put here would stop the dispatch under a directed mode with a message
  naming the operation and the mode (:func:`refusal`);
- :data:`NOT_FLOAT`: integer and bit operations (no float operand or result).
"""

from __future__ import annotations

import decimal
import functools
import math
from collections.abc import Callable
from decimal import Decimal
from fractions import Fraction

import numpy as np

__all__ = ["DIRECTED", "DIRECTED_IN_MODULE", "NOT_FLOAT", "REFUSED", "ROUND_FREE", "Undecided", "directed", "fma_lanes",
           "mode_of", "refusal", "round_bits", "sqrt_proxy", "value"]

RNE, UP, DOWN, ZERO = 0, 1, 2, 3
#: (mantissa bits, exponent bits) of each float kind the VALU tables use
FORMATS = {"f": (23, 8), "h": (10, 5), "d": (52, 11), "b": (7, 8)}
MODE_NAMES = {UP: "toward +infinity", DOWN: "toward -infinity", ZERO: "toward zero"}


def round_bits(x: Fraction, kind: str, mode: int) -> int:
    """The bits of the non-zero rational ``x`` rounded to ``kind`` ("f", "h", "d", "b") in ``mode`` (RNE, UP, DOWN,
    ZERO)."""
    mbits, ebits = FORMATS[kind]
    bias = (1 << (ebits - 1)) - 1
    sign = 1 if x < 0 else 0
    a = -x if sign else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, 1 - bias)                                 # subnormals share the smallest exponent's quantum
    q = a / Fraction(2) ** (e - mbits)
    n = q.numerator // q.denominator
    rem = q - n
    away = (mode == UP and not sign) or (mode == DOWN and sign)
    if rem and (away or (mode == RNE and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1)))):
        n += 1
    if n >> (mbits + 1):                                 # carried into the next binade
        n >>= 1
        e += 1
    top = sign << (mbits + ebits)
    if e > bias:                                         # overflow: infinity, or the largest finite value
        to_inf = mode == RNE or away
        return top | (((1 << ebits) - 1) << mbits if to_inf else ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1))
    if n >> mbits:
        return top | (e + bias) << mbits | (n & ((1 << mbits) - 1))
    return top | n                                       # subnormal (or a zero after rounding down)


def value(bits: int, kind: str) -> Fraction | None:
    """The exact value of float bits, None for an infinity or NaN."""
    mbits, ebits = FORMATS[kind]
    bias = (1 << (ebits - 1)) - 1
    e = bits >> mbits & ((1 << ebits) - 1)
    if e == (1 << ebits) - 1:
        return None
    m = bits & ((1 << mbits) - 1)
    v = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0 else \
        (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias)
    return -v if bits >> (mbits + ebits) & 1 else v


def sqrt_proxy(x: Fraction) -> Fraction | None:
    """A rational that every round mode rounds to the same f16/f32/f64 bits as sqrt(``x``) (``x`` > 0; None for
    ``x`` <= 0): sqrt(x) itself when it is rational, else the midpoint of the interval [n, n + 1) * 2**-q that holds
    the root, with q chosen so that 2**-q is at most a quarter of the root's f64 unit in the last place; every
    representable neighbour and rounding midpoint is then a multiple of 2**-q, so the root and the proxy lie strictly
    between the same two of them."""
    if x <= 0:
        return None
    e = x.numerator.bit_length() - x.denominator.bit_length()        # floor(log2 x) or one less
    q = 60 - ((e - 2) >> 1)
    big = x * Fraction(2) ** (2 * q)
    n = math.isqrt(big.numerator // big.denominator)                # floor(sqrt(big))
    if n * n == big:
        return Fraction(n) / Fraction(2) ** q
    return Fraction(2 * n + 1, 2) / Fraction(2) ** q


def _trig_preop(a_bits: int, seg: int) -> Fraction:
    """v_trig_preop_f64's exact value: the 53-bit segment of 2/pi times its power of two (vmath's reading of the
    guide's pseudocode), before the one rounding to f64 (subnormal results round)."""
    # vmath uses this module's helpers, so it is imported when first needed
    from tinyhw.mocks.rdna3 import vmath

    chunk, scale = vmath.trig_preop_exact(a_bits >> 52 & 0x7FF, seg)
    return Fraction(chunk) * Fraction(2) ** scale


def _major(x: Fraction, y: Fraction, z: Fraction) -> Fraction:
    """The cube-map major axis coordinate (v_cubema_f32's choice: z, then y, then x)."""
    if abs(z) >= abs(x) and abs(z) >= abs(y):
        return z
    return y if abs(y) >= abs(x) else x


def _pow2(n: Fraction) -> Fraction:
    """2**n for an integer exponent, clamped to +-2400 (past any f64 result's range either way)."""
    return Fraction(2) ** max(-2400, min(2400, int(n)))


# ---- the transcendentals: exact where the result is rational, else a proxy from a high-precision value --------------
#
# Why a few dozen digits decide every rounding: each value below that is not handled exactly is irrational (2**x for
# a non-integer rational x; log2 of a rational that is not a power of two; sin(2*pi*t) for a dyadic t off the
# quarter turns, by Niven's theorem the only rational values are 0, +-1/2, +-1 and +-1/2 needs t = 1/12 + k/2 or
# 5/12 + k/2, never dyadic), so it is never a representable value nor a rounding midpoint. :func:`_settle` does not
# rely on a bound of how close it may come to one (the table maker's dilemma): it checks, for each value, that the
# whole interval the approximation's error allows lies strictly between two neighbouring multiples of a quarter of
# the f64 unit in the last place (2**-55 of the value's binade), and repeats at twice the digits otherwise, then
# stops the dispatch (:class:`Undecided`). At 80 digits the interval is about 10**-80 ~ 2**-265 relative; the
# closest approach of these values to that grid, measured over every finite f16 operand of exp, log, sin and cos
# and 40000 random f32 operands (exponents -37..13) when this was written, is about 2**-74 relative (what a
# random position in a 2**-55 grid gives over ~2**19 draws), so a retry is not expected ever to happen (a test
# asserts that none did for 900 f32 evaluations). The tests evaluate every tested input independently at 120
# digits and assert that the rounding is decided there and equal in every mode.
_DIGITS = (80, 160, 320, 640)


class Undecided(ArithmeticError):
    """A transcendental's rounding that :func:`_settle` could not decide (not expected to happen: the VALU turns it
    into ``Unimplemented``, so the dispatch stops rather than return a guess)."""


@functools.lru_cache(maxsize=8)
def _ln2(prec: int) -> Decimal:
    """ln 2 to ``prec`` significant digits (decimal's ln is correctly rounded)."""
    with decimal.localcontext() as ctx:
        ctx.prec = prec
        return Decimal(2).ln()


def _atan_inv(n: int, prec: int) -> Decimal:
    """atan(1/n) for an integer n > 1 by its Taylor series, in the current context (``prec`` digits)."""
    x2 = Decimal(n * n)
    term = Decimal(1) / n
    total, k, eps = term, 1, Decimal(10) ** -(prec + 2)
    while abs(term) > eps * abs(total):
        term = -term / x2
        total += term / (2 * k + 1)
        k += 1
    return total


@functools.lru_cache(maxsize=8)
def _pi(prec: int) -> Decimal:
    """pi to about ``prec`` significant digits by Machin's formula 16 atan(1/5) - 4 atan(1/239)."""
    with decimal.localcontext() as ctx:
        ctx.prec = prec + 10
        p = 16 * _atan_inv(5, prec + 10) - 4 * _atan_inv(239, prec + 10)
        ctx.prec = prec
        return +p


def _dec(x: Fraction) -> Decimal:
    """The dyadic rational ``x`` (a denominator that is a power of two) as an exact Decimal."""
    k = x.denominator.bit_length() - 1
    assert x.denominator == 1 << k
    return Decimal(f"{x.numerator * 5 ** k}E-{k}")


def _floor_log2(a: Fraction) -> int:
    """floor(log2(a)) for a > 0."""
    k = a.numerator.bit_length() - a.denominator.bit_length()
    return k - 1 if Fraction(2) ** k > a else k


def _settle(approx: Callable[[int], Fraction], what: str) -> Fraction:
    """A rational that every round mode rounds to the same f16/f32/f64 bits as the irrational non-zero value y
    that ``approx(d)`` approximates with a relative error below 10**-d: the midpoint of the interval
    (n * u, (n + 1) * u) that holds y, u a quarter of y's f64 unit in the last place (every representable value and
    rounding midpoint of those formats near y is a multiple of u). The interval is known once the approximation's
    error interval lies strictly inside one; the digits double until it does (see the comment above)."""
    for digits in _DIGITS:
        v = approx(digits)
        a, eps = abs(v), Fraction(1, 10 ** digits)
        lo, hi = a * (1 - eps), a * (1 + eps)
        unit = Fraction(2) ** (_floor_log2(lo) - 54)
        n = math.floor(lo / unit)
        if n * unit < lo and hi < (n + 1) * unit:
            p = (n + Fraction(1, 2)) * unit
            return -p if v < 0 else p
    raise Undecided(f"{what}: the directed rounding was not decided at {_DIGITS[-1]} digits")


def _rcp(x: Fraction) -> Fraction | None:
    """1/x (exact); None for a zero operand (the nearest path's signed infinity, which no mode changes)."""
    return None if x == 0 else 1 / x


def _rsq(x: Fraction) -> Fraction | None:
    """A rational that rounds as 1/sqrt(x) in every mode (sqrt(1/x), 1/x rational); None for x <= 0 (infinity or
    NaN, kept)."""
    return None if x <= 0 else sqrt_proxy(1 / x)


def _exp2(x: Fraction) -> Fraction:
    """2**x: exact for an integer x, past every format's range for |x| > 1100 (2**int(x) rounds as 2**x there),
    else 2**floor(x) * exp(f ln 2) for the fraction f, settled."""
    if x.denominator == 1 or abs(x) > 1100:
        return _pow2(x)
    n = math.floor(x)
    f = _dec(x - n)

    def approx(d: int) -> Fraction:
        # f exact, ln 2 and the product within 10**-(d+9) relative, exp correctly rounded: below 10**-(d+8)
        with decimal.localcontext() as ctx:
            ctx.prec = d + 10
            return Fraction((f * _ln2(d + 10)).exp())
    return _settle(approx, "v_exp") * Fraction(2) ** n


def _log2(x: Fraction) -> Fraction | None:
    """log2(x): exact (an integer) for a power of two, else ln(x) / ln 2 settled; None for x <= 0 (-inf, NaN)."""
    if x <= 0:
        return None
    k = _floor_log2(x)
    if x == Fraction(2) ** k:
        return Fraction(k)
    xd = _dec(x)

    def approx(d: int) -> Fraction:
        # x exact; ln x, ln 2 and the quotient each within 10**-(d+9) relative: below 10**-(d+8)
        with decimal.localcontext() as ctx:
            ctx.prec = d + 10
            return Fraction(xd.ln() / _ln2(d + 10))
    return _settle(approx, "v_log")


def _sin_series(t: Decimal, want_cos: bool, d: int) -> Fraction:
    """sin(2*pi*t) (or cos) for 0 < t <= 1/8, by the Taylor series at d + 10 digits: the angle is within
    2 * 10**-(d+9) relative, each of the at most ~60 terms is rounded once and no term exceeds the sum's magnitude
    (y <= pi/4, sin y >= 0.9 y, cos y >= 0.7), so the result is well within 10**-d relative."""
    with decimal.localcontext() as ctx:
        ctx.prec = d + 10
        y = 2 * _pi(d + 10) * t
        y2 = y * y
        term = Decimal(1) if want_cos else y
        total, k, eps = term, 1 if want_cos else 2, Decimal(10) ** -(d + 12)
        while abs(term) > eps * abs(total):
            term = -term * y2 / (k * (k + 1))
            total += term
            k += 2
        return Fraction(total)


def _turns(x: Fraction, want_cos: bool) -> Fraction:
    """sin(2*pi*x) (``want_cos``: cos): x reduced modulo 1 exactly, then to a quarter turn and an octant by the
    symmetries (exact in rationals); 0, +-1 exactly at the quarter turns, else settled from the series."""
    r = x - math.floor(x)
    if want_cos:                                      # cos(2 pi r) = sin(2 pi (r + 1/4))
        r += Fraction(1, 4)
    q = math.floor(4 * r)
    t = r - Fraction(q, 4)                            # sin(2 pi (q/4 + t)): sin, cos, -sin, -cos of 2 pi t
    if t == 0:
        return Fraction((0, 1, 0, -1)[q % 4])
    use_cos = bool(q & 1)
    if t > Fraction(1, 8):                            # sin(2 pi t) = cos(2 pi (1/4 - t)) and back
        t, use_cos = Fraction(1, 4) - t, not use_cos
    td = _dec(t)
    v = _settle(lambda d: _sin_series(td, use_cos, d), "v_sin/v_cos")
    return -v if q % 4 >= 2 else v


_NEG_MAX_F32 = -(2 - Fraction(1, 1 << 23)) * Fraction(2) ** 127

# name -> (how the exact result is formed from the operands, which operands are addends for the zero-sign rule);
# ``make`` may return None: that lane keeps the nearest-even path's result (its result is exact there)
_Op = tuple[Callable[..., Fraction | None], str]
_SUM: _Op = (lambda a, b: a + b, "sum")
_FMA: _Op = (lambda a, b, c: a * b + c, "fma")
_DX9_FMA: _Op = (lambda a, b, c: None if a == 0 or b == 0 else a * b + c, "fma")
DIRECTED: dict[str, _Op] = {
    **{f"v_add_{t}": _SUM for t in ("f16", "f32", "f64")},
    **{f"v_sub_{t}": (lambda a, b: a - b, "sub") for t in ("f16", "f32", "f64")},
    **{f"v_subrev_{t}": (lambda a, b: b - a, "subrev") for t in ("f16", "f32", "f64")},
    **{f"v_mul_{t}": (lambda a, b: a * b, "mul") for t in ("f16", "f32", "f64")},
    **{f"v_{op}_{t}": _FMA for op in ("fma", "fmac", "fmamk", "fmaak") for t in ("f16", "f32", "f64")},
    **{n: (lambda a: a, "cvt") for n in ("v_cvt_f16_f32", "v_cvt_f32_f64", "v_cvt_f32_i32", "v_cvt_f32_u32",
                                        "v_cvt_f16_i16", "v_cvt_f16_u16")},
    # x * 2**n: only an overflowing or subnormal result rounds
    **{f"v_ldexp_{t}": (lambda a, n: a * _pow2(n), "ldexp") for t in ("f16", "f32", "f64")},
    # dx9 rule: a zero factor gives +0 (mul) or S2 (fma) whatever the other operand is: exact, kept
    "v_mul_dx9_zero_f32": (lambda a, b: None if a == 0 or b == 0 else a * b, "mul"),
    "v_fma_dx9_zero_f32": _DX9_FMA, "v_fmac_dx9_zero_f32": _DX9_FMA,
    # -MAX_FLOAT when S1 is -MAX_FLOAT or S2 <= 0 (the non-finite cases keep the nearest path's), else S0 * S1
    "v_mullit_f32": (lambda a, b, c: None if b == _NEG_MAX_F32 or c <= 0 else a * b, "mul"),
    "v_cubema_f32": (lambda x, y, z: 2 * _major(x, y, z), "mul"),              # 2 * major axis: overflow rounds
    # S0 + -floor(S0), clamped to the largest value below 1.0 (the guide: "Obey round mode, result clamped")
    **{f"v_fract_{t}": (lambda a, m=m: min(a - math.floor(a), 1 - Fraction(1, 2 << m)), "fract")
       for t, m in (("f16", 10), ("f32", 23), ("f64", 52))},
    **{f"v_sqrt_{t}": (sqrt_proxy, "sqrt") for t in ("f16", "f32", "f64")},
    "v_trig_preop_f64": (_trig_preop, "raw"),
    # the transcendentals: exact for rcp, settled proxies for the rest (see the module text and _settle)
    **{f"v_rcp_{t}": (_rcp, "rcp") for t in ("f16", "f32", "f64")}, "v_rcp_iflag_f32": (_rcp, "rcp"),
    **{f"v_rsq_{t}": (_rsq, "rsq") for t in ("f16", "f32", "f64")},
    **{f"v_exp_{t}": (_exp2, "exp") for t in ("f16", "f32")},
    **{f"v_log_{t}": (_log2, "log") for t in ("f16", "f32")},
    **{f"v_sin_{t}": (lambda x: _turns(x, False), "sin") for t in ("f16", "f32")},
    **{f"v_cos_{t}": (lambda x: _turns(x, True), "cos") for t in ("f16", "f32")},
}
#: the integer operands, by operand index: (width, signed)
_INT_SRC: dict[str, dict[int, tuple[int, bool]]] = {
    "v_cvt_f32_i32": {0: (32, True)}, "v_cvt_f32_u32": {0: (32, False)}, "v_cvt_f16_i16": {0: (16, True)},
    "v_cvt_f16_u16": {0: (16, False)}, "v_ldexp_f32": {1: (32, True)}, "v_ldexp_f64": {1: (32, True)},
    "v_ldexp_f16": {1: (16, True)},
}

#: rounded in directed modes by the module that computes them (see the module text)
DIRECTED_IN_MODULE = frozenset({
    "v_dot2_f32_f16", "v_dot2_f32_bf16", "v_dot2_f16_f16", "v_dot2_bf16_bf16", "v_dot2acc_f32_f16",
    "v_dual_dot2acc_f32_f16", "v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16", "v_pk_fmac_f16",
    "v_wmma_f32_16x16x16_f16", "v_wmma_f32_16x16x16_bf16", "v_wmma_f16_16x16x16_f16", "v_wmma_bf16_16x16x16_bf16",
    "v_div_fmas_f32", "v_div_fmas_f64", "v_div_scale_f32", "v_div_scale_f64",
    # per half / per VOPD half through the scalar operation's DIRECTED entry (valu.py's _PK and _DUAL2)
    "v_pk_add_f16", "v_pk_mul_f16", "v_pk_fma_f16", "v_dual_add_f32", "v_dual_sub_f32", "v_dual_subrev_f32",
    "v_dual_mul_f32", "v_dual_fmac_f32", "v_dual_fmaak_f32", "v_dual_fmamk_f32", "v_dual_mul_dx9_zero_f32",
    # VINTERP (lanes.py): the fma in the f32 field's direction, P2's f16 conversion in the f16 field's
    "v_interp_p10_f32", "v_interp_p2_f32", "v_interp_p10_f16_f32", "v_interp_p2_f16_f32",
})

ROUND_FREE = frozenset({
    *(f"v_{op}_{t}" for op in ("max", "min", "max3", "min3", "med3", "maxmin", "minmax", "floor", "ceil", "trunc",
                               "rndne", "frexp_mant") for t in ("f16", "f32", "f64")),
    "v_cvt_f32_f16", "v_cvt_f64_f32", "v_cvt_f64_i32", "v_cvt_f64_u32", "v_cvt_i32_f32", "v_cvt_u32_f32",
    "v_cvt_i32_f64", "v_cvt_u32_f64", "v_cvt_i16_f16", "v_cvt_u16_f16", "v_cvt_floor_i32_f32",
    "v_cvt_nearest_i32_f32", "v_cvt_f32_ubyte0", "v_cvt_f32_ubyte1", "v_cvt_f32_ubyte2", "v_cvt_f32_ubyte3",
    "v_cvt_off_f32_i4", "v_frexp_exp_i32_f32", "v_frexp_exp_i32_f64", "v_frexp_exp_i16_f16", "v_cvt_pk_rtz_f16_f32",
    "v_mov_b16", "v_cndmask_b16",
    # float-to-int converts: their own rounding (toward zero; the norm and u8 forms to nearest, vmath's choice)
    "v_cvt_pk_i16_f32", "v_cvt_pk_u16_f32", "v_cvt_norm_i16_f16", "v_cvt_norm_u16_f16", "v_cvt_pk_norm_i16_f16",
    "v_cvt_pk_norm_u16_f16", "v_cvt_pk_norm_i16_f32", "v_cvt_pk_norm_u16_f32", "v_cvt_pk_u8_f32",
    # selections, sign changes and moves of float bits: the cube face id and face coordinates (S0, S1, S2 or a
    # negation), v_div_fixup (a special value or the quotient's magnitude with a sign), packing two halves
    "v_cubeid_f32", "v_cubesc_f32", "v_cubetc_f32", "v_div_fixup_f16", "v_div_fixup_f32", "v_div_fixup_f64",
    "v_pack_b32_f16", "v_pk_max_f16", "v_pk_min_f16", "v_dual_max_f32", "v_dual_min_f32",
    # a fixed direction whatever the mode: toward zero
    "v_interp_p10_rtz_f16_f32", "v_interp_p2_rtz_f16_f32",
    # compares and classes (they never reach this module)
    *(f"v_{c}_{cond}_{t}" for c in ("cmp", "cmpx") for t in ("f16", "f32", "f64")
      for cond in ("f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "t",
                   "class")),
})

#: operations refused under a directed mode (:func:`refusal`): none now (the transcendentals moved to DIRECTED); kept
#: so that a new operation with no rounding rule has a category to go to
REFUSED: frozenset[str] = frozenset()

#: VALU operations without a float operand or result: the round mode does not concern them
NOT_FLOAT = frozenset({
    "v_add3_u32", "v_add_co_ci_u32", "v_add_co_u32", "v_add_lshl_u32", "v_add_nc_i16", "v_add_nc_i32",
    "v_add_nc_u16", "v_add_nc_u32", "v_alignbit_b32", "v_alignbyte_b32", "v_and_b16", "v_and_b32", "v_and_or_b32",
    "v_ashrrev_i16", "v_ashrrev_i32", "v_ashrrev_i64", "v_bcnt_u32_b32", "v_bfe_i32", "v_bfe_u32", "v_bfi_b32",
    "v_bfm_b32", "v_bfrev_b32", "v_cls_i32", "v_clz_i32_u32", "v_cndmask_b32", "v_ctz_i32_b32", "v_cvt_i32_i16",
    "v_cvt_pk_i16_i32", "v_cvt_pk_u16_u32", "v_cvt_u32_u16", "v_dot4_i32_iu8", "v_dot4_u32_u8", "v_dot8_i32_iu4",
    "v_dot8_u32_u4", "v_dual_add_nc_u32", "v_dual_and_b32", "v_dual_cndmask_b32", "v_dual_lshlrev_b32",
    "v_dual_mov_b32", "v_lerp_u8", "v_lshl_add_u32", "v_lshl_or_b32", "v_lshlrev_b16", "v_lshlrev_b32",
    "v_lshlrev_b64", "v_lshrrev_b16", "v_lshrrev_b32", "v_lshrrev_b64", "v_mad_i16", "v_mad_i32_i16",
    "v_mad_i32_i24", "v_mad_i64_i32", "v_mad_u16", "v_mad_u32_u16", "v_mad_u32_u24", "v_mad_u64_u32", "v_max3_i16",
    "v_max3_i32", "v_max3_u16", "v_max3_u32", "v_max_i16", "v_max_i32", "v_max_u16", "v_max_u32", "v_maxmin_i32",
    "v_maxmin_u32", "v_mbcnt_hi_u32_b32", "v_mbcnt_lo_u32_b32", "v_med3_i16", "v_med3_i32", "v_med3_u16",
    "v_med3_u32", "v_min3_i16", "v_min3_i32", "v_min3_u16", "v_min3_u32", "v_min_i16", "v_min_i32", "v_min_u16",
    "v_min_u32", "v_minmax_i32", "v_minmax_u32", "v_mov_b32", "v_movreld_b32", "v_movrels_b32", "v_movrelsd_2_b32",
    "v_movrelsd_b32", "v_mqsad_pk_u16_u8", "v_mqsad_u32_u8", "v_msad_u8", "v_mul_hi_i32", "v_mul_hi_i32_i24",
    "v_mul_hi_u32", "v_mul_hi_u32_u24", "v_mul_i32_i24", "v_mul_lo_u16", "v_mul_lo_u32", "v_mul_u32_u24", "v_nop",
    "v_not_b16", "v_not_b32", "v_or3_b32", "v_or_b16", "v_or_b32", "v_perm_b32", "v_permlane16_b32",
    "v_permlane64_b32", "v_permlanex16_b32", "v_pipeflush", "v_pk_add_i16", "v_pk_add_u16", "v_pk_ashrrev_i16",
    "v_pk_lshlrev_b16", "v_pk_lshrrev_b16", "v_pk_mad_i16", "v_pk_mad_u16", "v_pk_max_i16", "v_pk_max_u16",
    "v_pk_min_i16", "v_pk_min_u16", "v_pk_mul_lo_u16", "v_pk_sub_i16", "v_pk_sub_u16", "v_qsad_pk_u16_u8",
    "v_readfirstlane_b32", "v_readlane_b32", "v_sad_hi_u8", "v_sad_u16", "v_sad_u32", "v_sad_u8", "v_sat_pk_u8_i16",
    "v_sub_co_ci_u32", "v_sub_co_u32", "v_sub_nc_i16", "v_sub_nc_i32", "v_sub_nc_u16", "v_sub_nc_u32",
    "v_subrev_co_ci_u32", "v_subrev_co_u32", "v_subrev_nc_u32", "v_swap_b32", "v_swaprel_b32",
    "v_wmma_i32_16x16x16_iu4", "v_wmma_i32_16x16x16_iu8", "v_writelane_b32", "v_xad_u32", "v_xnor_b32",
    "v_xor3_b32", "v_xor_b16", "v_xor_b32",
    *(f"v_{c}_{cond}_{t}" for c in ("cmp", "cmpx") for t in ("i16", "i32", "i64", "u16", "u32", "u64")
      for cond in ("f", "lt", "eq", "le", "gt", "ne", "ge", "t")),
})


def refusal(name: str, mode_reg: int) -> str:
    """The one-line reason a float operation refuses a directed round mode (MODE.FP_ROUND ``mode_reg & 0xF``)."""
    modes = "; ".join(f"{k} {MODE_NAMES[m]}" for k, m in (("f32", mode_reg & 3), ("f16/f64", mode_reg >> 2 & 3)) if m)
    return f"MODE round mode {mode_reg & 0xF:#x} ({modes}) on {name}: only round-to-nearest-even is modelled for it"


def _sign(bits: int, kind: str) -> int:
    mbits, ebits = FORMATS[kind]
    return bits >> (mbits + ebits) & 1


_SUMS = frozenset({"sum", "sub", "subrev", "fma", "fract"})


def _zero_sign(how: str, signs: list[int], mode: int) -> int | None:
    """The sign of an exact zero sum (None: keep the nearest-even result's, as for products and conversions)."""
    if how == "sub":
        signs = [signs[0], signs[1] ^ 1]
    elif how == "subrev":
        signs = [signs[1], signs[0] ^ 1]
    elif how == "fma":
        signs = [signs[0] ^ signs[1], signs[2]]
    elif how == "fract":                     # S0 + -floor(S0): floor keeps the sign, so the addends' signs differ
        signs = [signs[0], signs[0] ^ 1]
    elif how != "sum":
        return None
    if signs[0] == signs[1]:                 # only when both addends are zeros of one sign: that sign
        return None
    return 1 if mode == DOWN else 0


def directed(name: str, kinds: str, dk: str, args: tuple[np.ndarray, ...], nearest: np.ndarray, mode: int
             ) -> np.ndarray:
    """``name``'s result under round ``mode`` (UP, DOWN or ZERO) from its operand bits ``args`` (kinds ``kinds``) and
    its nearest-even result ``nearest`` (destination kind ``dk``): each lane with finite operands rounded from its
    exact value, the rest as ``nearest``."""
    make, how = DIRECTED[name]
    out = np.array(nearest, copy=True)
    flat = out.reshape(-1)
    ops = [np.broadcast_to(np.asarray(a), out.shape).reshape(-1) for a in args]
    ints = _INT_SRC.get(name, {})
    mbits, ebits = FORMATS[dk]
    for lane in range(flat.size):
        raw = [int(o[lane]) for o in ops]
        if how == "raw":
            exact = make(*raw)
        else:
            vals: list[Fraction | None] = []
            for i, (r, k) in enumerate(zip(raw, kinds, strict=True)):
                if i in ints:
                    width, signed = ints[i]
                    x = r & ((1 << width) - 1)
                    vals.append(Fraction(x - (1 << width) if signed and x >> (width - 1) else x))
                else:
                    vals.append(value(r, k))
            if any(v is None for v in vals):
                continue
            exact = make(*vals)
        if exact is None:
            continue
        if exact == 0:                       # the nearest-even result's zero, unless the sign rule says otherwise
            if how in _SUMS:
                s = _zero_sign(how, [_sign(r, k) for r, k in zip(raw, kinds, strict=True)], mode)
            else:                            # sin: the operand's sign (IEEE sinPi), cos (cosPi) and log2(1): +0
                s = _sign(raw[0], kinds[0]) if how == "sin" else 0 if how in ("cos", "log") else None
            if s is not None:
                flat[lane] = s << (mbits + ebits)
            continue
        flat[lane] = round_bits(exact, dk, mode)
    return out


def fma_lanes(a: np.ndarray, b: np.ndarray, c: np.ndarray, nearest: np.ndarray, dk: str, mode: int,
              scale: np.ndarray | None = None) -> np.ndarray:
    """The bits (kind ``dk``) of 2**``scale`` * (a * b + c) rounded once in ``mode``, lane by lane: ``a``, ``b``, ``c``
    are float64 arrays holding the operands' exact values (f16, bf16, f32 or f64 operands widened), ``nearest`` the
    nearest-even result's bits, kept where an operand is infinite or NaN. An exact zero has the fused multiply-add's
    IEEE sign (the product's and the addend's when they agree, else -0 only toward -infinity)."""
    out = np.array(nearest, copy=True)
    flat = out.reshape(-1)
    xs, ys, zs = (np.broadcast_to(np.asarray(v, dtype=np.float64), out.shape).reshape(-1).tolist() for v in (a, b, c))
    sc = [0] * flat.size if scale is None else np.broadcast_to(scale, out.shape).reshape(-1).tolist()
    mbits, ebits = FORMATS[dk]
    for i, (x, y, z) in enumerate(zip(xs, ys, zs, strict=True)):
        if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
            continue
        t = Fraction(x) * Fraction(y) + Fraction(z)
        if t == 0:
            ps, cs = (math.copysign(1.0, x) < 0) ^ (math.copysign(1.0, y) < 0), math.copysign(1.0, z) < 0
            flat[i] = int(ps if ps == cs else mode == DOWN) << (mbits + ebits)
            continue
        flat[i] = round_bits(t * Fraction(2) ** int(sc[i]), dk, mode)
    return out


def mode_of(mode_reg: int, dk: str) -> int:
    """The FP_ROUND mode that applies to a result of kind ``dk`` (f32: bits 1:0; f16, bf16 and f64: bits 3:2)."""
    return mode_reg & 3 if dk == "f" else mode_reg >> 2 & 3
