"""Floating-point helpers of the shader core: fused multiply-adds with one rounding, IEEE min/max, denormal flushing.

Everything works on numpy lane arrays of raw bit patterns (uint16 for f16, uint32 for f32, uint64 for f64) or
on the matching float views. The rules are the RDNA3 ISA reference's:

- ``v_fma_*`` round once. An f32 (or f16) product is exact in float64; the sum is rounded in float64 and
  then to the narrow format, which is the correct rounding except when the float64 sum lands exactly on a
  rounding midpoint of the narrow format while the exact sum does not (double rounding). Those lanes (rare:
  a float64 sum whose discarded bits are exactly one half, or a result in the narrow format's denormal
  range) are redone with the float64 sum rounded to odd (error-free TwoSum), which makes the final rounding
  correct (round-to-odd in >= p + 2 bits). f64 fma is done exactly with Python integers per lane.
- ``v_max_*`` / ``v_min_*`` are IEEE maxNum/minNum with the ISA's signed-zero order (-0 < +0): max(+0, -0)
  is +0, min(+0, -0) is -0; a quiet NaN operand gives the other operand; in IEEE mode a signalling NaN
  operand gives that NaN quieted.
- MODE.FP_DENORM flushes denormal inputs and/or outputs to a zero of the same sign.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np

F16, F32, F64 = np.float16, np.float32, np.float64
U16, U32, U64 = np.uint16, np.uint32, np.uint64

_M29, _H28 = U64((1 << 29) - 1), U64(1 << 28)          # f64 bits an f32 rounding drops; their midpoint
_M42, _H41 = U64((1 << 42) - 1), U64(1 << 41)          # the same for f16
_EXP64 = U64(0x7FF << 52)
_TINY32 = U64((1023 - 126) << 52)                        # |x| below 2^-126: f32 denormal range
_TINY16 = U64((1023 - 14) << 52)                         # |x| below 2^-14: f16 denormal range
_ONE, _TINY32X2 = U64(1), U64((1023 - 126) << 53) - U64(1)


def _round_odd_sum(p: np.ndarray, c: np.ndarray) -> np.ndarray:
    """p + c in float64 rounded to odd: exact, or the neighbour with an odd last bit on the side of the error."""
    s = p + c
    bb = s - p
    err = (p - (s - bb)) + (c - bb)
    fix = (err != 0) & ((s.view(U64) & U64(1)) == 0) & np.isfinite(s)
    if np.count_nonzero(fix):
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Fused multiply-add of float32 arrays with one rounding (see the module text)."""
    p = a.astype(F64) * b.astype(F64)
    c64 = c.astype(F64)
    s = p + c64
    u = s.view(U64)
    # suspicious lanes: the discarded 29 bits are exactly one half, or 0 < |s| < 2^-126 (u << 1 drops the sign;
    # minus one sends zero to the top of the range)
    if np.count_nonzero(((u & _M29) == _H28) | (((u << _ONE) - _ONE) < _TINY32X2)):
        s = _round_odd_sum(p, c64)
    return s.astype(F32)


def fma16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Fused multiply-add of float16 arrays with one rounding. For f16 operands the float64 sum is exact whenever
    the result is finite (the operands span at most 2^16..2^-24 and the product has 22 bits), so the single
    rounding to f16 is correct; the midpoint check is kept as a guard."""
    p = a.astype(F64) * b.astype(F64)
    c64 = c.astype(F64)
    s = p + c64
    u = s.view(U64)
    if (((u & _M42) == _H41) | (((u & _EXP64) < _TINY16) & (s != 0))).any():
        s = _round_odd_sum(p, c64)
    with np.errstate(over="ignore"):                   # an f16 overflow rounds to infinity: no warning
        return s.astype(F16)


def _fma64_one(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return a * b + c                       # inf/NaN: IEEE (inf*0 -> NaN, inf-inf -> NaN)
    p = Fraction(a) * Fraction(b)
    r = p + Fraction(c)
    if r == 0:                                  # sign of an exact zero: -0 only if both addends are -0 (RNE)
        ps = math.copysign(1.0, a) * math.copysign(1.0, b)
        if p == 0 and c == 0:
            return -0.0 if ps < 0 and math.copysign(1.0, c) < 0 else 0.0
        return 0.0
    try:
        return float(r)                         # Fraction -> float is correctly rounded (nearest even)
    except OverflowError:
        return math.inf if r > 0 else -math.inf


def fma64(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Fused multiply-add of float64 arrays, exact per lane (Python rationals), one rounding to nearest even."""
    return np.array([_fma64_one(x, y, z) for x, y, z in zip(a.tolist(), b.tolist(), c.tolist(), strict=True)],
                    dtype=F64)


_SIGN = {U16: 0x8000, U32: 0x80000000, U64: 1 << 63}
_QUIET = {U16: 0x200, U32: 0x400000, U64: 1 << 51}
_FL = {U16: F16, U32: F32, U64: F64}


def is_snan(u: np.ndarray) -> np.ndarray:
    """Lanes holding a signalling NaN (exponent all ones, quiet bit clear, mantissa not zero)."""
    t = u.dtype.type
    f = u.view(_FL[t])
    return np.isnan(f) & ((u & t(_QUIET[t])) == 0)


def fmax_bits(a: np.ndarray, b: np.ndarray, ieee: bool = True) -> np.ndarray:
    """v_max_* on raw bit arrays (uint16/32/64): IEEE maxNum, -0 < +0, NaN rules of the module text."""
    return _minmax(a, b, True, ieee)


def fmin_bits(a: np.ndarray, b: np.ndarray, ieee: bool = True) -> np.ndarray:
    """v_min_* on raw bit arrays: IEEE minNum, -0 < +0, NaN rules of the module text."""
    return _minmax(a, b, False, ieee)


def _minmax(a: np.ndarray, b: np.ndarray, is_max: bool, ieee: bool) -> np.ndarray:
    t = a.dtype.type
    fa, fb = a.view(_FL[t]), b.view(_FL[t])
    r = np.where(fa > fb if is_max else fa < fb, a, b)
    r = np.where(fa == fb, (a & b) if is_max else (a | b), r)    # equal: only +0/-0 differ in bits
    na, nb = np.isnan(fa), np.isnan(fb)
    if np.count_nonzero(na) or np.count_nonzero(nb):
        r = np.where(nb, a, r)
        r = np.where(na, b, r)                 # S0 NaN -> S1 (also when both are NaN)
        if ieee:
            q = t(_QUIET[t])
            r = np.where(is_snan(b), b | q, r)
            r = np.where(is_snan(a), a | q, r)
    return r.astype(t)


def flush_bits(u: np.ndarray) -> np.ndarray:
    """Denormals (exponent field zero) replaced by a zero of the same sign; other values unchanged."""
    t = u.dtype.type
    exp = {U16: 0x7C00, U32: 0x7F800000, U64: 0x7FF << 52}[t]
    return np.where((u & t(exp)) == 0, u & t(_SIGN[t]), u).astype(t)


def ieee_aware(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Mark an operation whose result depends on MODE.IEEE (it takes ``ieee=``)."""
    fn.__dict__["ieee_aware"] = True
    return fn
