"""More VALU arithmetic of the shader core: the division helpers, sums of absolute differences, byte permutes,
16-bit three-operand min/max, packed converts and the rest of VOP1/VOP2/VOP3 the RDNA3 ISA reference defines.

Every entry follows the ISA reference guide's pseudocode for the instruction (the guide is the spec; no code was
copied from any other project). :data:`TYPED_EXTRA` holds operations in the form of
:data:`tinyhw.mocks.rdna3.valu.TYPED` ((source kinds, destination kind, function of raw bit arrays)); the VALU
compiler looks names up there when its own table lacks them, so the modifiers (neg/abs, op_sel, clamp/omod), the
MODE denormal flushing and the EXEC-masked write come from the common path. :func:`compile_special` compiles the
few that read or write more than one VGPR result: ``v_div_scale_*`` (VOP3SD: VDST and a lane mask in SDST),
``v_div_fmas_*`` (reads VCC), ``v_cndmask_b16`` (a lane mask source), ``v_swap_b32``, the ``v_movrel*`` indexed
moves and ``v_swaprel_b32``, ``v_mqsad_u32_u8`` (a 128-bit result), and the no-ops ``v_nop``/``v_pipeflush``;
these take the neg/abs source modifiers but not the MODE denormal flushing (the guide: "input denormals are not
flushed" for v_div_fmas).

Choices where the guide leaves something open (each in the function's docstring):

- ``v_div_fixup_*``: UNDERFLOW_F32/F64/F16 is not defined by the guide; the model returns a zero of the result's
  sign (the value reported measured on RDNA3.5 hardware), and the OVERFLOW branch is unreachable (an infinite or
  NaN denominator was handled earlier). A NaN quotient in the last branch (what the division macro computes
  for a quotient that overflows) gives the signed infinity, also as reported measured on RDNA3.5; the
  pseudocode's ``sign_out ? -abs(S0) : abs(S0)`` would keep the NaN.
- ``v_div_fmas_*``: the post-scale factor of the guide (2**32) cannot complete its division macro; see
  :func:`_div_fmas` for the factor used.
- ``v_div_scale_*``: when no branch assigns D0, D0 is S0 (the guide's pseudocode only writes the scaled cases);
  the NaN of the zero cases is the default quiet NaN (0x7FC00000 / 0x7FF8000000000000).
- ``v_sin_f32``/``v_cos_f32``: sin(2*pi*S0) computed as the correctly rounded value of the float64 result after an
  exact reduction of S0 modulo 1 and to the nearest quarter turn, so whole quarter turns give exactly 0 or +-1 (the
  guide allows 1 ULP of error).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import fp, rounding
from tinyhw.mocks.rdna3.state import M0, NULL, VCC, Wave, bits_to_int, int_to_bits, s_get, v_get, v_get64, v_put

__all__ = ["TYPED_EXTRA", "compile_special", "trig_preop_exact"]

F16, F32, F64 = np.float16, np.float32, np.float64
U16, U32, U64, I16, I32, I64 = np.uint16, np.uint32, np.uint64, np.int16, np.int32, np.int64
Fn = Callable[[Wave], Any]

# raw format facts: unsigned type, float type, mantissa bits, exponent field mask, sign bit, default quiet NaN
_FMT = {"h": (U16, F16, 10, 0x1F, 0x8000, 0x7E00), "f": (U32, F32, 23, 0xFF, 0x80000000, 0x7FC00000),
        "d": (U64, F64, 52, 0x7FF, 1 << 63, 0x7FF8000000000000)}


def _exp(u: np.ndarray, k: str) -> np.ndarray:
    """The biased exponent field of raw float bits (the guide's ``exponent()``) as int64."""
    t, _ft, mb, em, _s, _q = _FMT[k]
    return ((u >> t(mb)) & t(em)).astype(I64)


def _div_fixup(k: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """v_div_fixup_f16/f32/f64 (S0 quotient, S1 denominator, S2 numerator), the guide's chain of special cases:
    NaN numerator then denominator (quieted), 0/0 and inf/inf give the negative default NaN, x/0 and inf/y a
    signed infinity, x/inf and 0/y a signed zero, an underflowing quotient (f32/f64: an exponent difference below
    the guide's -150 / -1075; the f16 pseudocode has no such branch) a signed zero, a NaN quotient a signed
    infinity, else the quotient's magnitude with the sign of S1 xor S2."""
    t, ft, mb, em, sign, _q = _FMT[k]
    quiet = t(1 << (mb - 1))
    inf = t(em << mb)
    neg_nan = t(sign | em << mb | 1 << (mb - 1))
    limit = {"h": None, "f": -150, "d": -1075}[k]      # the f16 pseudocode has no underflow branch
    ts = t(sign)
    mag = t(sign - 1)

    def op(q: np.ndarray, d: np.ndarray, n: np.ndarray) -> np.ndarray:
        fd, fnum = d.view(ft), n.view(ft)
        so = (d ^ n) & ts
        under = (_exp(n, k) - _exp(d, k)) < limit if limit is not None else np.zeros(len(q), dtype=bool)
        conds = [np.isnan(fnum), np.isnan(fd), (fd == 0) & (fnum == 0), np.isinf(fd) & np.isinf(fnum),
                 (fd == 0) | np.isinf(fnum), np.isinf(fd) | (fnum == 0), under]
        vals = [n | quiet, d | quiet, np.full_like(q, neg_nan), np.full_like(q, neg_nan), so | inf, so, so]
        last = np.where(np.isnan(q.view(ft)), so | inf, so | (q & mag))
        return np.select(conds, vals, last).astype(t)
    return op


def div_scale(k: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, mode: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """v_div_scale_f32/f64: (D0 bits, VCC bool per lane) for S0 ``a`` (the value to scale), S1 ``b`` (the
    denominator), S2 ``c`` (the numerator), the guide's pseudocode branch by branch (first match wins). Under a
    directed round ``mode`` the scaled values (ldexp by 2**+-64 / 2**+-128, which round only when they overflow or
    fall below the normal range) round in that direction; the branch conditions' own quotient and reciprocal stay
    rounded to nearest even (a choice: the guide does not say how they round)."""
    t, ft, mb, _em, _sign, qnan = _FMT[k]
    big, scale, tiny = (96, 64, 23) if k == "f" else (768, 128, 53)
    fa, fb, fc = a.view(ft), b.view(ft), c.view(ft)
    _fa64, fb64, fc64 = fa.astype(F64), fb.astype(F64), fc.astype(F64)
    eb, ec = _exp(b, k), _exp(c, k)
    with np.errstate(all="ignore"):
        if k == "f":
            rcp = (1.0 / fb64)                                   # 1.0 / 64'F(S1): an f64 result
            rcp_den = (rcp != 0) & (np.abs(rcp) < np.finfo(F64).tiny)
            quo = (fc / fb).astype(F32)                          # S2 / S1 in f32
            quo_den = (quo != 0) & (np.abs(quo) < np.finfo(F32).tiny)
        else:
            rcp = 1.0 / fb64
            rcp_den = (rcp != 0) & (np.abs(rcp) < np.finfo(F64).tiny)
            quo = fc64 / fb64
            quo_den = (quo != 0) & (np.abs(quo) < np.finfo(F64).tiny)
        b_den = (fb64 != 0) & (np.abs(fb64) < float(np.finfo(ft).tiny))
        up = _ldexp_bits(k, a, scale)
        down = _ldexp_bits(k, a, -scale)
    if mode:
        name, kinds = ("v_ldexp_f32", "fw") if k == "f" else ("v_ldexp_f64", "dw")
        up = rounding.directed(name, kinds, k, (a, np.full(len(a), scale, U32)), up, mode)
        down = rounding.directed(name, kinds, k, (a, np.full(len(a), -scale & 0xFFFFFFFF, U32)), down, mode)
    zero = (fc64 == 0) | (fb64 == 0)
    c1 = ~zero & ((ec - eb) >= big)
    c2 = ~zero & ~c1 & b_den
    c3 = ~zero & ~c1 & ~c2 & rcp_den & quo_den
    c4 = ~zero & ~c1 & ~c2 & ~c3 & rcp_den
    c5 = ~zero & ~c1 & ~c2 & ~c3 & ~c4 & quo_den
    c6 = ~zero & ~c1 & ~c2 & ~c3 & ~c4 & ~c5 & (ec <= tiny)
    a_is_b, a_is_c = fa == fb, fa == fc
    d = np.select([zero, c1 & a_is_b, c2, c3 & a_is_b, c4, c5 & a_is_c, c6],
                  [np.full_like(a, qnan), up, up, up, down, up, up], a).astype(t)
    return d, c1 | c3 | c5


def _ldexp_bits(k: str, a: np.ndarray, e: int) -> np.ndarray:
    """ldexp of raw float bits by a constant, one rounding (exact in float64 for f16/f32; f64 per lane)."""
    t, ft = _FMT[k][0], _FMT[k][1]
    if k == "d":
        return np.array([_f64_ldexp(x, e) for x in a.view(F64).tolist()], dtype=F64).view(U64)
    return np.ldexp(a.view(ft).astype(F64), e).astype(ft).view(t)


def _f64_ldexp(x: float, e: int) -> float:
    if not math.isfinite(x) or x == 0:
        return x
    try:
        return math.ldexp(x, e)
    except OverflowError:
        return math.copysign(math.inf, x)


def _div_fmas(k: str, a: np.ndarray, b: np.ndarray, c: np.ndarray, vcc: np.ndarray, mode: int = 0) -> np.ndarray:
    """v_div_fmas_f32/f64: fma(S0, S1, S2); in lanes whose VCC bit is set the result is post-scaled. The guide's
    pseudocode writes the scale as 2**32 (2**64 for f64), which cannot undo v_div_scale's 2**64 (2**128) in the
    guide's own division macro; the model uses the rule reported measured on RDNA hardware: 2**64 when S2's
    exponent field is above 127 (the quotient was scaled down), else 2**-64 (f64: 2**128 / 2**-128 around 1023).
    The scaled fused multiply-add is rounded once (exact product and scaling, one rounding); under a directed round
    ``mode`` in that direction."""
    if mode:
        near = _div_fmas(k, a, b, c, vcc)
        e = np.where(vcc, np.where(_exp(c, k) > (127 if k == "f" else 1023), 1, -1), 0) * (64 if k == "f" else 128)
        ft = F32 if k == "f" else F64
        return rounding.fma_lanes(a.view(ft), b.view(ft), c.view(ft), near, k, mode, e)
    if k == "f":
        up = _exp(c, "f") > 127
        sc = np.where(vcc, np.where(up, 2.0 ** 64, 2.0 ** -64), 1.0)
        p = a.view(F32).astype(F64) * b.view(F32).astype(F64) * sc        # exact: powers of two, f32 products
        with np.errstate(all="ignore"):
            return fp._round_odd_sum(p, c.view(F32).astype(F64) * sc).astype(F32).view(U32)
    up = _exp(c, "d") > 1023
    out = []
    for x, y, z, v, u in zip(a.view(F64).tolist(), b.view(F64).tolist(), c.view(F64).tolist(), vcc.tolist(),
                             up.tolist(), strict=True):
        out.append(_fma64_scaled(x, y, z, (128 if u else -128) if v else 0))
    return np.array(out, dtype=F64).view(U64)


def _fma64_scaled(a: float, b: float, c: float, e: int) -> float:
    """2**e * fma(a, b, c) rounded once to f64 (exact rationals)."""
    if not (math.isfinite(a) and math.isfinite(b) and math.isfinite(c)):
        return (a * b + c) * 2.0 ** e
    if e == 0:
        return fp._fma64_one(a, b, c)
    r = (Fraction(a) * Fraction(b) + Fraction(c)) * Fraction(2) ** e
    if r == 0:
        return fp._fma64_one(a, b, c)
    try:
        return float(r)
    except OverflowError:
        return math.inf if r > 0 else -math.inf


# ---- integer helpers ----------------------------------------------------------------------------------------------

def _bytes(x: np.ndarray) -> list[np.ndarray]:
    return [((x >> U32(8 * i)) & U32(0xFF)).astype(I64) for i in range(4)]


def _sad_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_sad_u8: S2 + the sum of |S0 byte - S1 byte| over the four bytes (wraps at 32 bits)."""
    s = sum(np.abs(x - y) for x, y in zip(_bytes(a), _bytes(b), strict=True))
    return (c.astype(I64) + s).astype(U32)


def _sad_hi_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_sad_hi_u8: S2 + (the byte sum of absolute differences << 16)."""
    s = sum(np.abs(x - y) for x, y in zip(_bytes(a), _bytes(b), strict=True))
    return (c.astype(I64) + (s << 16)).astype(U32)


def _msad_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_msad_u8: v_sad_u8 leaving out the bytes where S1 (the reference) is zero."""
    s = sum(np.where(y == 0, 0, np.abs(x - y)) for x, y in zip(_bytes(a), _bytes(b), strict=True))
    return (c.astype(I64) + s).astype(U32)


def _sad_u16(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_sad_u16: S2 + |lo16(S0) - lo16(S1)| + |hi16(S0) - hi16(S1)|."""
    s = sum(np.abs(((a >> U32(h)) & U32(0xFFFF)).astype(I64) - ((b >> U32(h)) & U32(0xFFFF)).astype(I64))
            for h in (0, 16))
    return (c.astype(I64) + s).astype(U32)


def _sad_u32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_sad_u32: |S0 - S1| + S2 (unsigned, wraps)."""
    return (np.abs(a.astype(I64) - b.astype(I64)) + c.astype(I64)).astype(U32)


def _perm(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_perm_b32: each result byte selected by the matching byte of S2 from the eight bytes of {S0, S1} (S1 the
    low dword): 0-7 a byte, 8-11 the sign of byte 1/3/5/7 replicated, 12 zero, 13 and above 0xFF."""
    data = (a.astype(U64) << U64(32)) | b.astype(U64)
    out = np.zeros(len(a), dtype=U32)
    for i in range(4):
        sel = ((c >> U32(8 * i)) & U32(0xFF)).astype(I64)
        byte = ((data >> (U64(8) * np.minimum(sel, 7).astype(U64))) & U64(0xFF)).astype(U32)
        signs = [((data >> U64(8 * j + 7)) & U64(1)).astype(U32) * U32(0xFF) for j in (1, 3, 5, 7)]
        r = np.select([sel >= 13, sel == 12, sel == 11, sel == 10, sel == 9, sel == 8],
                      [np.full(len(a), 0xFF, U32), np.zeros(len(a), U32), signs[3], signs[2], signs[1], signs[0]],
                      byte)
        out |= r.astype(U32) << U32(8 * i)
    return out


def _lerp_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_lerp_u8: per byte (S0 + S1 + bit 0 of S2's byte) >> 1 (the rounding average)."""
    out = np.zeros(len(a), dtype=U32)
    for i, (x, y) in enumerate(zip(_bytes(a), _bytes(b), strict=True)):
        r = ((x + y + ((c >> U32(8 * i)).astype(I64) & 1)) >> 1) & 0xFF
        out |= r.astype(U32) << U32(8 * i)
    return out


def _bfm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """v_bfm_b32: ((1 << S0[4:0]) - 1) << S1[4:0]."""
    return (((U32(1) << (a & U32(31))) - U32(1)) << (b & U32(31))).astype(U32)


def _sat(x: np.ndarray, lo: int, hi: int, t: Any) -> np.ndarray:
    return np.clip(x, lo, hi).astype(I64).astype(t)


def _f_to_int16(x: np.ndarray, signed: bool) -> np.ndarray:
    """f32 -> i16/u16 as v_cvt_i16_f32/v_cvt_u16_f32: toward zero, saturated, NaN gives 0."""
    lo, hi = (-32768, 32767) if signed else (0, 65535)
    f = np.nan_to_num(x.astype(F64), nan=0.0, posinf=hi, neginf=lo)
    return np.clip(np.trunc(f), lo, hi).astype(I64).astype(U32) & U32(0xFFFF)


def _pack16(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    return (lo.astype(U32) & U32(0xFFFF)) | (hi.astype(U32) & U32(0xFFFF)) << U32(16)


def _s16(x: np.ndarray) -> np.ndarray:
    return x.view(I16).astype(I64)


def _med3i(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


_ieee = fp.ieee_aware


_maxmin = _ieee(lambda a, b, c, ieee=True: fp.fmin_bits(fp.fmax_bits(a, b, ieee), c, ieee))
_minmax = _ieee(lambda a, b, c, ieee=True: fp.fmax_bits(fp.fmin_bits(a, b, ieee), c, ieee))


def _mul_dx9(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """v_mul_dx9_zero_f32: +0 when either operand is (+-)0 (so 0 * inf and 0 * NaN are 0), else S0 * S1."""
    fa, fb = a.view(F32), b.view(F32)
    return np.where((fa == 0) | (fb == 0), U32(0), (fa * fb).view(U32)).astype(U32)


def _fma_dx9(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_fma_dx9_zero_f32: S2 when S0 or S1 is (+-)0, else fma(S0, S1, S2) (one rounding)."""
    fa, fb = a.view(F32), b.view(F32)
    return np.where((fa == 0) | (fb == 0), c, fp.fma32(fa, fb, c.view(F32)).view(U32)).astype(U32)


_NEG_MAX_F32 = U32(0xFF7FFFFF)       # -MAX_FLOAT_F32


def _mullit(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_mullit_f32: -MAX_FLOAT when S1 is -MAX_FLOAT, -inf or NaN, or S2 is NaN or <= 0 (either zero), else
    S0 * S1."""
    fb, fc = b.view(F32), c.view(F32)
    lit = (b == _NEG_MAX_F32) | (fb == -np.inf) | np.isnan(fb) | np.isnan(fc) | (fc <= 0)
    return np.where(lit, _NEG_MAX_F32, (a.view(F32) * fb).view(U32)).astype(U32)


def _cvt_pk_u8(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """v_cvt_pk_u8_f32: byte S1[1:0] of S2 replaced by f32_to_u8(S0). The guide does not define f32_to_u8; the
    model rounds to nearest even and saturates to [0, 255], NaN giving 0 (a choice, not a measured fact)."""
    x = a.view(F32).astype(F64)
    byte = np.clip(np.nan_to_num(np.rint(x), nan=0.0), 0, 255).astype(U32)
    sh = (b & U32(3)) * U32(8)
    return ((c & ~(U32(0xFF) << sh)) | byte << sh).astype(U32)


def _trig(cos: bool, t: Any, ft: Any) -> Callable[[np.ndarray], np.ndarray]:
    """v_sin_*/v_cos_*: sin or cos of 2 * pi * S0 with S0 reduced exactly first: to r = S0 mod 1, then to the nearest
    quarter turn q and the rest f = 4r - q in [-1/2, 1/2] (both exact in float64), the result +-sin or +-cos of
    f * pi / 2 by q mod 4; so a whole quarter turn gives exactly 0 or +-1. A zero result of sin has the sign of S0,
    of cos is +0 (as the directed round modes' exact path, :mod:`tinyhw.mocks.rdna3.rounding`, gives them);
    infinities and NaN give NaN."""
    def op(a: np.ndarray) -> np.ndarray:
        x = a.view(ft).astype(F64)
        with np.errstate(all="ignore"):
            u = np.fmod(x, 1.0) * 4.0           # exact
            q = np.rint(u)
            ang = (u - q) * (np.pi / 2)
            s, c = np.sin(ang), np.cos(ang)
            k = (q.astype(np.int64) + (1 if cos else 0)) % 4        # cos(y) = sin(y + quarter turn)
            r = np.select([k == 0, k == 1, k == 2], [s, c, -s], -c)
            zero = r == 0
            if zero.any():
                r = np.where(zero, 0.0 if cos else np.copysign(0.0, x), r)
            return r.astype(ft).view(t)
    return op


def _cvt_off_i4(a: np.ndarray) -> np.ndarray:
    """v_cvt_off_f32_i4: S0[3:0] as a signed 4-bit integer divided by 16 (-0.5 .. 0.4375, exact)."""
    n = (a & U32(0xF)).astype(I64)
    n = np.where(n >= 8, n - 16, n)
    return (n.astype(F32) / F32(16)).astype(F32).view(U32)


def _sat_pk_u8_i16(a: np.ndarray) -> np.ndarray:
    """v_sat_pk_u8_i16: the two signed 16-bit halves of S0 saturated to [0, 255], packed into a 16-bit result."""
    lo = np.clip(_s16((a & U32(0xFFFF)).astype(U16)), 0, 255)
    hi = np.clip(_s16((a >> U32(16)).astype(U16)), 0, 255)
    return (lo | hi << 8).astype(U16)


def _two_over_pi_bits(nbits: int = 1201) -> int:
    """floor(2/pi * 2**nbits): the guide's 1201-bit table of 2/pi's fraction bits (pi from Machin's formula in
    integer arithmetic with 64 guard bits)."""
    prec = nbits + 64
    one = 1 << prec

    def atan_inv(x: int) -> int:
        total, term, k, x2 = 0, one // x, 1, x * x
        while term:
            total += term // k if k % 4 == 1 else -(term // k)
            term //= x2
            k += 2
        return total
    pi = 16 * atan_inv(5) - 4 * atan_inv(239)
    return (2 << (nbits + prec)) // pi


_TWO_OVER_PI = _two_over_pi_bits()


def trig_preop_exact(e_field: int, seg: int) -> tuple[int, int]:
    """(chunk, scale): v_trig_preop_f64's exact value chunk * 2**scale for S0's exponent field and segment S1."""
    shift = (seg & 31) * 53
    if e_field > 1077:
        shift += e_field - 1077
    # the 53 bits of 2/pi's fraction that the left shift brings into the whole part: bits shift+1 .. shift+53
    drop = 1201 - 53 - shift
    chunk = (_TWO_OVER_PI >> drop if drop >= 0 else _TWO_OVER_PI << -drop) & ((1 << 53) - 1)
    return chunk, -53 - shift + (128 if e_field >= 1968 else 0)


def _trig_preop_one(e_field: int, seg: int) -> float:
    chunk, scale = trig_preop_exact(e_field, seg)
    return math.ldexp(float(chunk), scale)


def _trig_preop(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """v_trig_preop_f64: segment S1[4:0] (53 bits each) of 2/pi for the argument reduction of S0, the guide's
    pseudocode: shift = 53 * S1[4:0] (+ exponent(S0) - 1077 past 1077), the 53 bits of 2/pi's fraction below the
    shift as an integer, scaled by 2**(-53 - shift) (+128 for exponent(S0) >= 1968)."""
    e = _exp(a, "d").tolist()
    return np.array([_trig_preop_one(ef, int(k)) for ef, k in zip(e, b.tolist(), strict=True)],
                    dtype=F64).view(U64)


def _qsad(masked: bool) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """v_qsad_pk_u16_u8 / v_mqsad_pk_u16_u8: four v_sad_u8 (v_msad_u8) of the 32-bit windows S0[31:0], [39:8],
    [47:16], [55:24] against S1, each plus the matching 16-bit field of S2, truncated to 16 bits and packed."""
    def op(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        fn = _msad_u8 if masked else _sad_u8
        out = np.zeros(len(a), dtype=U64)
        for i in range(4):
            win = ((a >> U64(8 * i)) & U64(0xFFFFFFFF)).astype(U32)
            acc = ((c >> U64(16 * i)) & U64(0xFFFF)).astype(U32)
            out |= (fn(win, b, acc) & U32(0xFFFF)).astype(U64) << U64(16 * i)
        return out
    return op


def _cube(which: str) -> Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]:
    """v_cubeid/cubesc/cubetc/cubema_f32 of the coordinate (S0, S1, S2) = (x, y, z), the guide's pseudocode: the
    major axis is z when |z| >= |x| and |z| >= |y|, else y when |y| >= |x|, else x (a NaN fails every
    comparison)."""
    def op(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        x, y, z = a.view(F32), b.view(F32), c.view(F32)
        zmaj = (np.abs(z) >= np.abs(x)) & (np.abs(z) >= np.abs(y))
        ymaj = ~zmaj & (np.abs(y) >= np.abs(x))
        with np.errstate(all="ignore"):
            if which == "id":
                r = np.where(zmaj, np.where(z < 0, F32(5), F32(4)),
                             np.where(ymaj, np.where(y < 0, F32(3), F32(2)), np.where(x < 0, F32(1), F32(0))))
            elif which == "sc":
                r = np.where(zmaj, np.where(z < 0, -x, x), np.where(ymaj, x, np.where(x < 0, z, -z)))
            elif which == "tc":
                r = np.where(zmaj, -y, np.where(ymaj, np.where(y < 0, -z, z), -y))
            else:
                r = np.where(zmaj, z * F32(2), np.where(ymaj, y * F32(2), x * F32(2)))
        return np.asarray(r, dtype=F32).view(U32)
    return op


def _norm(x: np.ndarray, signed: bool) -> np.ndarray:
    """f16/f32_to_snorm / _to_unorm: the value clamped to [-1, 1] ([0, 1]) times 32767 (65535), rounded to
    nearest even (the guide: 0.5 ULP, "supports rounding"; the product is exact in float64); NaN gives 0."""
    lo, k = (-1.0, 32767.0) if signed else (0.0, 65535.0)
    f = np.nan_to_num(x.astype(F64), nan=0.0)
    r = np.rint(np.clip(f, lo, 1.0) * k).astype(I64)
    return (r & 0xFFFF).astype(U16)


TYPED_EXTRA: dict[str, tuple[str, str, Callable[..., np.ndarray]]] = {
    **{f"v_cube{k}_f32": ("fff", "f", _cube(k)) for k in ("id", "sc", "tc", "ma")},
    "v_cvt_norm_i16_f16": ("h", "s", lambda a: _norm(a.view(F16), True)),
    "v_cvt_norm_u16_f16": ("h", "s", lambda a: _norm(a.view(F16), False)),
    "v_cvt_pk_norm_i16_f16": ("hh", "w", lambda a, b: _pack16(_norm(a.view(F16), True), _norm(b.view(F16), True))),
    "v_cvt_pk_norm_u16_f16": ("hh", "w", lambda a, b: _pack16(_norm(a.view(F16), False),
                                                               _norm(b.view(F16), False))),
    "v_cvt_pk_norm_i16_f32": ("ff", "w", lambda a, b: _pack16(_norm(a.view(F32), True), _norm(b.view(F32), True))),
    "v_cvt_pk_norm_u16_f32": ("ff", "w", lambda a, b: _pack16(_norm(a.view(F32), False),
                                                               _norm(b.view(F32), False))),
    "v_trig_preop_f64": ("dw", "d", _trig_preop),
    "v_qsad_pk_u16_u8": ("qwq", "q", _qsad(False)), "v_mqsad_pk_u16_u8": ("qwq", "q", _qsad(True)),
    "v_div_fixup_f32": ("fff", "f", _div_fixup("f")),
    "v_div_fixup_f64": ("ddd", "d", _div_fixup("d")),
    "v_div_fixup_f16": ("hhh", "h", _div_fixup("h")),
    "v_sad_u8": ("www", "w", _sad_u8), "v_sad_hi_u8": ("www", "w", _sad_hi_u8),
    "v_sad_u16": ("www", "w", _sad_u16), "v_sad_u32": ("www", "w", _sad_u32),
    "v_msad_u8": ("www", "w", _msad_u8),
    "v_perm_b32": ("www", "w", _perm),
    "v_lerp_u8": ("www", "w", _lerp_u8),
    "v_bfm_b32": ("ww", "w", _bfm),
    "v_min3_i16": ("sss", "s", lambda a, b, c: np.minimum(np.minimum(_s16(a), _s16(b)), _s16(c)).astype(U16)),
    "v_max3_i16": ("sss", "s", lambda a, b, c: np.maximum(np.maximum(_s16(a), _s16(b)), _s16(c)).astype(U16)),
    "v_med3_i16": ("sss", "s", lambda a, b, c: _med3i(_s16(a), _s16(b), _s16(c)).astype(U16)),
    "v_min3_u16": ("sss", "s", lambda a, b, c: np.minimum(np.minimum(a, b), c).astype(U16)),
    "v_max3_u16": ("sss", "s", lambda a, b, c: np.maximum(np.maximum(a, b), c).astype(U16)),
    "v_med3_u16": ("sss", "s", lambda a, b, c: _med3i(a, b, c).astype(U16)),
    "v_maxmin_f32": ("fff", "f", _maxmin), "v_minmax_f32": ("fff", "f", _minmax),
    "v_maxmin_f16": ("hhh", "h", _maxmin), "v_minmax_f16": ("hhh", "h", _minmax),
    "v_maxmin_u32": ("www", "w", lambda a, b, c: np.minimum(np.maximum(a, b), c)),
    "v_minmax_u32": ("www", "w", lambda a, b, c: np.maximum(np.minimum(a, b), c)),
    "v_maxmin_i32": ("www", "w", lambda a, b, c: np.minimum(np.maximum(a.view(I32), b.view(I32)),
                                                            c.view(I32)).view(U32)),
    "v_minmax_i32": ("www", "w", lambda a, b, c: np.maximum(np.minimum(a.view(I32), b.view(I32)),
                                                            c.view(I32)).view(U32)),
    "v_cvt_pk_i16_f32": ("ff", "w", lambda a, b: _pack16(_f_to_int16(a.view(F32), True),
                                                          _f_to_int16(b.view(F32), True))),
    "v_cvt_pk_u16_f32": ("ff", "w", lambda a, b: _pack16(_f_to_int16(a.view(F32), False),
                                                          _f_to_int16(b.view(F32), False))),
    "v_cvt_pk_u16_u32": ("ww", "w", lambda a, b: _pack16(np.minimum(a, U32(0xFFFF)), np.minimum(b, U32(0xFFFF)))),
    "v_cvt_pk_i16_i32": ("ww", "w", lambda a, b: _pack16(_sat(a.view(I32), -32768, 32767, I64).astype(U32),
                                                          _sat(b.view(I32), -32768, 32767, I64).astype(U32))),
    "v_mul_dx9_zero_f32": ("ff", "f", _mul_dx9),
    "v_mullit_f32": ("fff", "f", _mullit),
    "v_cvt_pk_u8_f32": ("fww", "w", _cvt_pk_u8),
    "v_fma_dx9_zero_f32": ("fff", "f", _fma_dx9),
    "v_sin_f32": ("f", "f", _trig(False, U32, F32)), "v_cos_f32": ("f", "f", _trig(True, U32, F32)),
    "v_sin_f16": ("h", "h", _trig(False, U16, F16)), "v_cos_f16": ("h", "h", _trig(True, U16, F16)),
    "v_cvt_off_f32_i4": ("w", "f", _cvt_off_i4),
    "v_sat_pk_u8_i16": ("w", "s", _sat_pk_u8_i16),
}


# ---- instructions outside the one-result pattern ------------------------------------------------------------------

def compile_special(inst: Any, name: str, srcs: Any, bad: Callable[[str], Exception]) -> Fn | None:
    """Compile ``name`` when it is one of this module's special forms (see the module text), else None. ``srcs``
    is the VALU compiler's source-getter object (``typed(i, kind)`` applies neg/abs/op_sel)."""
    f = inst.fields
    if name in ("v_nop", "v_pipeflush"):
        return lambda w: None
    if name in ("v_div_scale_f32", "v_div_scale_f64"):
        k = "f" if name.endswith("f32") else "d"
        if f["clamp"] or f["omod"]:
            raise bad("clamp/omod on v_div_scale")
        sd = type(srcs)(inst, bad, sd=True)         # VOP3SD: bits 14:8 are SDST, not ABS/OP_SEL
        a, b, c = (sd.typed(i, k) for i in range(3))
        d, sdst = f["vdst"], f["sdst"]

        def scale(w: Wave) -> None:
            r, vcc = div_scale(k, a(w), b(w), c(w), rounding.mode_of(w.mode, k))
            _put(w, d, k, r)
            if sdst != NULL:
                w.s[sdst] = bits_to_int(vcc & w.mask())
        return scale
    if name in ("v_div_fmas_f32", "v_div_fmas_f64"):
        k = "f" if name.endswith("f32") else "d"
        if f["clamp"] or f["omod"]:
            raise bad("clamp/omod on v_div_fmas")
        a, b, c = (srcs.typed(i, k) for i in range(3))
        d = f["vdst"]

        def fmas(w: Wave) -> None:
            _put(w, d, k, _div_fmas(k, a(w), b(w), c(w), int_to_bits(w.s[VCC]), rounding.mode_of(w.mode, k)))
        return fmas
    if name == "v_cndmask_b16":
        if f["clamp"] or f["omod"]:
            raise bad("clamp/omod on v_cndmask_b16")
        x, y = srcs.typed(0, "h"), srcs.typed(1, "h")
        sel = s_get(f["src2"], None, bad)
        d, hi = f["vdst"], f["opsel"] >> 3 & 1

        def cnd16(w: Wave) -> None:
            r = np.where(int_to_bits(sel(w)), y(w), x(w)).astype(U32)
            v_put(w, d, (w.v[d] & U32(0xFFFF)) | r << U32(16) if hi else (w.v[d] & U32(0xFFFF0000)) | r)
        return cnd16
    if name == "v_swap_b32":
        s0 = f["src0"]
        if s0 < 256:
            raise bad("v_swap_b32 of a non-VGPR source")
        d, s = f["vdst"], s0 - 256

        def swap(w: Wave) -> None:
            m = w.mask()
            old = w.v[d].copy()
            w.v[d] = np.where(m, w.v[s], w.v[d])
            w.v[s] = np.where(m, old, w.v[s])
        return swap
    if name in ("v_movreld_b32", "v_movrels_b32", "v_movrelsd_b32", "v_movrelsd_2_b32"):
        return _movrel(inst, name, bad)
    if name == "v_swaprel_b32":
        return _swaprel(inst, bad)
    if name == "v_mqsad_u32_u8":
        return _mqsad_u32(inst, bad)
    return None


def _swaprel(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """v_swaprel_b32: swap VGPR[D + M0[25:16]] and VGPR[S0 + M0[9:0]] in the lanes EXEC enables."""
    f = inst.fields
    if inst.encoding == "VOP3" or f["src0"] < 256:
        raise bad("v_swaprel_b32 needs its VOP1 form with a VGPR source")
    s0, d = f["src0"] - 256, f["vdst"]

    def run(w: Wave) -> None:
        m0 = w.s[M0]
        a, b = d + (m0 >> 16 & 0x3FF), s0 + (m0 & 0x3FF)
        if max(a, b) >= len(w.v):
            raise IndexError(f"VGPR {max(a, b)} past the wave's {len(w.v)}")
        m = w.mask()
        old = w.v[a].copy()
        w.v[a] = np.where(m, w.v[b], w.v[a])
        w.v[b] = np.where(m, old, w.v[b])
    return run


def _mqsad_u32(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """v_mqsad_u32_u8: four v_msad_u8 of the 32-bit windows S0[31:0], [39:8], [47:16], [55:24] (S0 a 64-bit
    operand) against S1, each plus the matching dword of the 128-bit S2 (four VGPRs), into the four VGPRs of D."""
    f = inst.fields
    if f["clamp"] or f["omod"] or f["neg"] or f["abs"] or f["opsel"]:
        raise bad("modifiers on v_mqsad_u32_u8")
    if f["src2"] < 256:
        raise bad("v_mqsad_u32_u8 with a non-VGPR S2")
    a = v_get64(f["src0"], f.get("literal"), bad)
    b = v_get(f["src1"], f.get("literal"), bad)
    c, d = f["src2"] - 256, f["vdst"]

    def run(w: Wave) -> None:
        x, y = a(w), b(w)
        acc = [w.v[c + i].copy() for i in range(4)]
        for i in range(4):
            win = ((x >> U64(8 * i)) & U64(0xFFFFFFFF)).astype(U32)
            v_put(w, d + i, _msad_u8(win, y, acc[i]))
    return run


def _movrel(inst: Any, name: str, bad: Callable[[str], Exception]) -> Fn:
    """v_movreld_b32 (VGPR[D + M0] = S0), v_movrels_b32 (D = VGPR[S0 + M0]), v_movrelsd_b32 (VGPR[D + M0] =
    VGPR[S0 + M0]) and v_movrelsd_2_b32 (VGPR[D + M0[25:16]] = VGPR[S0 + M0[9:0]]), under EXEC; an index past the
    wave's VGPRs stops the dispatch (a register fault)."""
    f = inst.fields
    if inst.encoding == "VOP3" and (f["clamp"] or f["omod"] or f["neg"] or f["abs"] or f["opsel"]):
        raise bad(f"modifiers on {name}")
    s0, d = f["src0"], f["vdst"]
    rel_src = name != "v_movreld_b32"
    if rel_src and s0 < 256:
        raise bad(f"{name} of a non-VGPR source")
    g = v_get(s0, f.get("literal"), bad)

    def run(w: Wave) -> None:
        m0 = w.s[M0]
        if name == "v_movrelsd_2_b32":
            so, do = m0 & 0x3FF, m0 >> 16 & 0x3FF
        else:
            so = do = m0
        src = w.v[s0 - 256 + so] if rel_src else g(w)
        dst = d + (do if name != "v_movrels_b32" else 0)
        if dst >= len(w.v):
            raise IndexError(f"VGPR {dst} past the wave's {len(w.v)}")
        v_put(w, dst, src)
    return run


def _put(w: Wave, d: int, k: str, r: np.ndarray) -> None:
    if k == "d":
        v_put(w, d, (r & U64(0xFFFFFFFF)).astype(U32))
        v_put(w, d + 1, (r >> U64(32)).astype(U32))
    else:
        v_put(w, d, r.astype(U32))

