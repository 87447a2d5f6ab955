"""Vector ALU: VOP1, VOP2, VOPC, VOP3/VOP3SD and VOPD dual issue (specs/amd-compute.md §5.2-§5.4).

Every operation works on (32,) uint32 lane arrays; float operations view them as float32 (IEEE, round to
nearest even, denormals kept, as the probes' MODE asks). ``v_fma_f32`` / ``v_fmac_f32`` are fused: the
product is exact in float64 and the sum is rounded to odd there, so the final rounding to float32 is the
single correct rounding a fused multiply-add makes. VOP3 ``neg``/``abs`` are applied to float sources
(sign-bit operations); ``clamp``, ``omod`` and ``op_sel`` are not modelled and stop the dispatch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import fp, rounding, vmath, wmma
from tinyhw.mocks.rdna3.fp import fma32
from tinyhw.mocks.rdna3.state import (
    EXEC,
    LANES,
    M32,
    NULL,
    VCC,
    Wave,
    bits_to_int,
    int_to_bits,
    s_get,
    v_get,
    v_get64,
    v_get_packed,
    v_put,
    v_put64,
)

__all__ = ["CARRY", "CARRY_CI", "OPS", "SHIFT64", "TYPED", "base_name", "compile_valu", "compile_vop3p", "compile_vopd",
           "fma32", "lockstep_ok"]

F32, U32, I32, U64, F64 = np.float32, np.uint32, np.int32, np.uint64, np.float64
Fn = Callable[[Wave], Any]
_SIGN, _ABS = U32(0x80000000), U32(0x7FFFFFFF)
_BELOW = (U32(1) << LANES) - U32(1)     # lanes below lane l, for v_mbcnt_lo
_M24 = U32(0xFFFFFF)


def _f(x: np.ndarray) -> np.ndarray:
    return x.view(F32)


def _u(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F32).view(U32)


def _cvt_u32(x: np.ndarray) -> np.ndarray:
    f = np.nan_to_num(_f(x).astype(F64), nan=0.0)
    return np.clip(np.trunc(f), 0, 4294967295.0).astype(U32)


def _cvt_i32(x: np.ndarray) -> np.ndarray:
    f = np.nan_to_num(_f(x).astype(F64), nan=0.0)
    return np.clip(np.trunc(f), -2147483648.0, 2147483647.0).astype(I32).view(U32)


def _cvt_f32_ubyte(k: int) -> Callable[[np.ndarray], np.ndarray]:
    """v_cvt_f32_ubyteK: byte K of the source as an unsigned integer, converted to f32 (exact: at most 255)."""
    return lambda a: _u(((a >> U32(8 * k)) & U32(0xFF)).astype(F32))


def _round64(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A float32 unary operation computed in float64 and rounded once to float32.

    The RDNA3 ISA documents v_rcp_f32, v_rsq_f32, v_sqrt_f32, v_exp_f32 and v_log_f32 as accurate to 1 ULP
    (v_rcp_iflag_f32 is v_rcp_f32 with integer-division exception flags); the model gives the correctly
    rounded result (error <= 0.5 ULP), one of the values the hardware may return. Infinities, zeros and NaN
    follow IEEE: 1/+-0 = +-inf, sqrt(-x) = NaN, log2(0) = -inf, log2(-x) = NaN, exp2(-inf) = 0. Under a directed
    MODE round mode the exact result is rounded once in that direction instead (:mod:`tinyhw.mocks.rdna3.rounding`).
    """
    def op(a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return _u(fn(_f(a).astype(F64)).astype(F32))
    return op


def _ldexp(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """v_ldexp_f32: S0 * 2**S1 (S1 a signed integer), one rounding (the float64 product is exact)."""
    e = np.clip(b.view(I32), -400, 400)
    with np.errstate(all="ignore"):
        return _u(np.ldexp(_f(a).astype(F64), e).astype(F32))


def _med3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.maximum(np.minimum(a, b), np.minimum(np.maximum(a, b), c))


def _fmed3(a: np.ndarray, b: np.ndarray, c: np.ndarray, ieee: bool = True) -> np.ndarray:
    """v_med3_f*: with a NaN operand, min3; else the max of the two operands that are not the max3 (ISA pseudocode,
    comparisons as floats, so +0 and -0 compare equal)."""
    t = a.dtype.type
    fl = fp._FL[t]
    mx, mn = fp.fmax_bits, fp.fmin_bits
    m3 = mx(mx(a, b, ieee), c, ieee).view(fl)
    r = np.where(m3 == a.view(fl), mx(b, c, ieee), np.where(m3 == b.view(fl), mx(a, c, ieee), mx(a, b, ieee)))
    nan = np.isnan(a.view(fl)) | np.isnan(b.view(fl)) | np.isnan(c.view(fl))
    if nan.any():
        r = np.where(nan, mn(mn(a, b, ieee), c, ieee), r)
    return r.astype(t)


_ieee = fp.ieee_aware


_max = _ieee(lambda a, b, ieee=True: fp.fmax_bits(a, b, ieee))
_min = _ieee(lambda a, b, ieee=True: fp.fmin_bits(a, b, ieee))
_max3 = _ieee(lambda a, b, c, ieee=True: fp.fmax_bits(fp.fmax_bits(a, b, ieee), c, ieee))
_min3 = _ieee(lambda a, b, c, ieee=True: fp.fmin_bits(fp.fmin_bits(a, b, ieee), c, ieee))
_med3f = _ieee(_fmed3)


def _s24(x: np.ndarray) -> np.ndarray:
    """The low 24 bits of each lane as a signed integer (int64)."""
    v = (x & _M24).astype(np.int64)
    return np.where(v >= 1 << 23, v - (1 << 24), v)


# name -> (arity, is_float (modifiers allowed), function of u32 arrays -> u32 array)
OPS: dict[str, tuple[int, bool, Callable[..., np.ndarray]]] = {
    "v_mov_b32": (1, False, lambda a: a),
    "v_not_b32": (1, False, lambda a: ~a),
    "v_cvt_f32_u32": (1, False, lambda a: _u(a.astype(F32))),
    "v_cvt_f32_i32": (1, False, lambda a: _u(a.view(I32).astype(F32))),
    "v_cvt_u32_f32": (1, True, _cvt_u32),
    **{f"v_cvt_f32_ubyte{k}": (1, False, _cvt_f32_ubyte(k)) for k in range(4)},
    "v_cvt_i32_f32": (1, True, _cvt_i32),
    "v_add_f32": (2, True, lambda a, b: (a.view(F32) + b.view(F32)).view(U32)),
    "v_sub_f32": (2, True, lambda a, b: (a.view(F32) - b.view(F32)).view(U32)),
    "v_subrev_f32": (2, True, lambda a, b: (b.view(F32) - a.view(F32)).view(U32)),
    "v_mul_f32": (2, True, lambda a, b: (a.view(F32) * b.view(F32)).view(U32)),
    "v_max_f32": (2, True, _max),
    "v_min_f32": (2, True, _min),
    "v_add_nc_u32": (2, False, lambda a, b: a + b),
    "v_sub_nc_u32": (2, False, lambda a, b: a - b),
    "v_subrev_nc_u32": (2, False, lambda a, b: b - a),
    "v_and_b32": (2, False, lambda a, b: a & b),
    "v_or_b32": (2, False, lambda a, b: a | b),
    "v_xor_b32": (2, False, lambda a, b: a ^ b),
    "v_lshlrev_b32": (2, False, lambda a, b: b << (a & U32(31))),
    "v_lshrrev_b32": (2, False, lambda a, b: b >> (a & U32(31))),
    "v_ashrrev_i32": (2, False, lambda a, b: (b.view(I32) >> (a & U32(31)).astype(I32)).view(U32)),
    "v_mul_u32_u24": (2, False, lambda a, b: (a & _M24) * (b & _M24)),
    "v_mul_lo_u32": (2, False, lambda a, b: a * b),
    "v_mul_hi_u32": (2, False, lambda a, b: ((a.astype(U64) * b.astype(U64)) >> U64(32)).astype(U32)),
    "v_max_u32": (2, False, np.maximum), "v_min_u32": (2, False, np.minimum),
    "v_max_i32": (2, False, lambda a, b: np.maximum(a.view(I32), b.view(I32)).view(U32)),
    "v_min_i32": (2, False, lambda a, b: np.minimum(a.view(I32), b.view(I32)).view(U32)),
    "v_mbcnt_lo_u32_b32": (2, False, lambda a, b: np.bitwise_count(a & _BELOW).astype(U32) + b),
    "v_mbcnt_hi_u32_b32": (2, False, lambda a, b: b),   # wave32: no lane has a lane below it in the high half
    "v_rcp_f32": (1, True, _round64(lambda x: 1.0 / x)),
    "v_rcp_iflag_f32": (1, True, _round64(lambda x: 1.0 / x)),
    "v_rsq_f32": (1, True, _round64(lambda x: 1.0 / np.sqrt(x))),
    "v_sqrt_f32": (1, True, _round64(np.sqrt)),
    "v_exp_f32": (1, True, _round64(np.exp2)),
    "v_log_f32": (1, True, _round64(np.log2)),
    "v_trunc_f32": (1, True, lambda a: _u(np.trunc(_f(a)))),
    "v_floor_f32": (1, True, lambda a: _u(np.floor(_f(a)))),
    "v_ceil_f32": (1, True, lambda a: _u(np.ceil(_f(a)))),
    "v_rndne_f32": (1, True, lambda a: _u(np.rint(_f(a)))),
    "v_ldexp_f32": (2, False, _ldexp),
    "v_mul_hi_i32": (2, False, lambda a, b: ((a.view(I32).astype(np.int64) * b.view(I32).astype(np.int64))
                                            >> 32).astype(U32)),
    "v_mul_i32_i24": (2, False, lambda a, b: (_s24(a) * _s24(b)).astype(U32)),
    "v_mad_u32_u24": (3, False, lambda a, b, c: (a & _M24) * (b & _M24) + c),
    "v_mad_i32_i24": (3, False, lambda a, b, c: (_s24(a) * _s24(b) + c.view(I32)).astype(U32)),
    "v_max3_u32": (3, False, lambda a, b, c: np.maximum(np.maximum(a, b), c)),
    "v_min3_u32": (3, False, lambda a, b, c: np.minimum(np.minimum(a, b), c)),
    "v_med3_u32": (3, False, _med3),
    "v_max3_i32": (3, False, lambda a, b, c: np.maximum(np.maximum(a.view(I32), b.view(I32)), c.view(I32)).view(U32)),
    "v_min3_i32": (3, False, lambda a, b, c: np.minimum(np.minimum(a.view(I32), b.view(I32)), c.view(I32)).view(U32)),
    "v_med3_i32": (3, False, lambda a, b, c: _med3(a.view(I32), b.view(I32), c.view(I32)).view(U32)),
    "v_max3_f32": (3, True, _max3),
    "v_min3_f32": (3, True, _min3),
    "v_med3_f32": (3, True, _med3f),
    "v_xad_u32": (3, False, lambda a, b, c: (a ^ b) + c),
    "v_alignbit_b32": (3, False, lambda a, b, c: (((a.astype(U64) << U64(32)) | b.astype(U64))
                                                   >> (c & U32(31)).astype(U64)).astype(U32)),
    "v_fma_f32": (3, True, lambda a, b, c: fma32(a.view(F32), b.view(F32), c.view(F32)).view(U32)),
    "v_bfe_u32": (3, False, lambda a, b, c: (a >> (b & U32(31))) &
                  np.where((c & U32(31)) == 0, U32(0), (U32(1) << (c & U32(31))) - U32(1)).astype(U32)),
    "v_add3_u32": (3, False, lambda a, b, c: a + b + c),
    "v_lshl_or_b32": (3, False, lambda a, b, c: (a << (b & U32(31))) | c),
    "v_lshl_add_u32": (3, False, lambda a, b, c: (a << (b & U32(31))) + c),
    "v_add_lshl_u32": (3, False, lambda a, b, c: (a + b) << (c & U32(31))),
    "v_and_or_b32": (3, False, lambda a, b, c: (a & b) | c),
    "v_or3_b32": (3, False, lambda a, b, c: a | b | c),
    "v_xor3_b32": (3, False, lambda a, b, c: a ^ b ^ c),
    "v_bfi_b32": (3, False, lambda a, b, c: (a & b) | (~a & c)),
}
# ---- typed operations: f16, f64, 16- and 64-bit integers, and every OPS entry --------------------------------------
# Operand kinds: "w" 32-bit word, "f" f32, "h" f16 and "s" 16-bit integer (the low half of the VGPR, the high half
# with VOP3 OP_SEL), "d" f64 and "q" 64-bit integer (a VGPR pair). Functions take and return raw bit arrays:
# uint32 for w/f, uint16 for h/s, uint64 for d/q. Float kinds (f, h, d) take the neg/abs modifiers, are flushed
# per MODE.FP_DENORM, and a float result takes OMOD and CLAMP.
F16, U16, I16, I64 = np.float16, np.uint16, np.int16, np.int64


def _h(x: np.ndarray) -> np.ndarray:
    return x.view(F16)


def _uh(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F16).view(U16)


def _d(x: np.ndarray) -> np.ndarray:
    return x.view(F64)


def _ud(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F64).view(U64)


def _to_int(x: np.ndarray, lo: float, hi: float, dtype: Any) -> np.ndarray:
    """Float -> integer conversion of the ISA: toward zero, saturated to [lo, hi], NaN gives 0."""
    f = np.nan_to_num(x.astype(F64), nan=0.0, posinf=hi, neginf=lo)
    return np.clip(np.trunc(f), lo, hi).astype(np.int64).astype(dtype)


def _round_to(fn: Callable[[np.ndarray], np.ndarray], view: Callable[[np.ndarray], np.ndarray],
              back: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """A unary float operation computed in float64 and rounded once to the operand's format (see _round64)."""
    def op(a: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return back(fn(view(a).astype(F64)))
    return op


def _fract(view: Callable[[np.ndarray], np.ndarray], back: Callable[[np.ndarray], np.ndarray]
           ) -> Callable[[np.ndarray], np.ndarray]:
    """v_fract_*: S0 + -floor(S0) in the operand's format (one rounding; inf gives NaN), clamped to the largest value
    below 1.0 (the guide's note: "result clamped to 0x3f7fffff", 0x3fefffffffffffff for f64; 0x3bff for f16 by the
    same rule, not stated): a tiny negative S0 whose fraction rounds to 1.0 gives 1 - ulp."""
    def op(a: np.ndarray) -> np.ndarray:
        x = view(a)
        t = x.dtype.type
        with np.errstate(all="ignore"):
            return back(np.minimum(x + -np.floor(x), np.nextafter(t(1), t(0))))
    return op


def _clz(a: np.ndarray) -> np.ndarray:
    """v_clz_i32_u32: leading zeros counted from bit 31; 0xFFFFFFFF when the value is 0."""
    n = np.full(32, 32, dtype=np.int64)
    x = a.astype(np.int64)
    nz = x != 0
    n[nz] = 31 - np.floor(np.log2(x[nz].astype(F64))).astype(np.int64)
    # log2 may round up just below a power of two: correct by checking the top bit position
    bad = nz & ((x >> (31 - n)) == 0)
    n[bad] += 1
    return np.where(nz, n, -1).astype(np.int64).astype(U32)


def _ctz(a: np.ndarray) -> np.ndarray:
    """v_ctz_i32_b32: trailing zeros; 0xFFFFFFFF when the value is 0."""
    x = a.astype(np.int64)
    low = x & -x
    n = np.where(x != 0, np.log2(np.where(x != 0, low, 1).astype(F64)).astype(np.int64), -1)
    return n.astype(np.int64).astype(U32)


def _cls(a: np.ndarray) -> np.ndarray:
    """v_cls_i32: the position (from bit 31, as 0) of the first bit that differs from the sign bit, i.e. the leading
    bits equal to the sign bit including it; -1 (0xFFFFFFFF) for 0 and -1 (ISA pseudocode)."""
    x = a.view(I32)
    return _clz(np.where(x < 0, ~x, x).view(U32))


def _bfrev32(a: np.ndarray) -> np.ndarray:
    """v_bfrev_b32: the bits in reverse order."""
    bits = ((a[:, None] >> np.arange(32, dtype=U32)) & U32(1)).astype(U64)
    return (bits * (U64(1) << np.arange(31, -1, -1, dtype=U64))).sum(axis=1).astype(U32)


def _sat_u32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, 0, M32).astype(U32)


def _sat_i32(x: np.ndarray) -> np.ndarray:
    return np.clip(x, -(1 << 31), (1 << 31) - 1).astype(I32).view(U32)


def _cvt_f16_int(signed: bool) -> Callable[[np.ndarray], np.ndarray]:
    return lambda a: _uh((a.view(I16) if signed else a).astype(F16))


def _ldexp_any(view: Callable[[np.ndarray], np.ndarray], back: Callable[[np.ndarray], np.ndarray]
               ) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    """v_ldexp_*: S0 * 2**S1 with one rounding (computed exactly in float64 where it fits); S1 is a signed integer
    (v_ldexp_f16: the low 16 bits as an i16, the guide's ``S1.i16``)."""
    def op(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        e = np.clip((b.view(I16) if b.dtype == U16 else b.view(I32)).astype(np.int64), -2200, 2200)
        x = view(a)
        with np.errstate(all="ignore"):
            if x.dtype == F64:
                return back(np.array([vmath._f64_ldexp(v, int(k))
                                      for v, k in zip(x.tolist(), e.tolist(), strict=True)]))
            return back(np.ldexp(x.astype(F64), np.clip(e, -400, 400)))
    return op


def _f16_rtz(x: np.ndarray) -> np.ndarray:
    """f32 -> f16 rounded toward zero (overflow gives the largest finite f16, NaN stays NaN)."""
    r = x.astype(F16)
    away = np.abs(r.astype(F32)) > np.abs(x)        # rounded to nearest away from zero (or overflowed to inf)
    return np.where(away, r.view(U16) - U16(1), r.view(U16)).astype(U16)


def _frexp_mant(view: Callable[[np.ndarray], np.ndarray], back: Callable[[np.ndarray], np.ndarray]
                ) -> Callable[[np.ndarray], np.ndarray]:
    """v_frexp_mant_*: the significand in [0.5, 1) with the sign of S0 (denormals normalised); infinity and NaN
    give S0 itself."""
    def op(a: np.ndarray) -> np.ndarray:
        x = view(a)
        m, _e = np.frexp(x)
        return np.where(np.isfinite(x), back(m.astype(x.dtype)), a).astype(a.dtype)
    return op


def _frexp_exp(view: Callable[[np.ndarray], np.ndarray], dtype: Any) -> Callable[[np.ndarray], np.ndarray]:
    """v_frexp_exp_*: the exponent e with S0 = mantissa * 2**e, mantissa in [0.5, 1); 0 for zero, infinity, NaN."""
    def op(a: np.ndarray) -> np.ndarray:
        x = view(a)
        _m, e = np.frexp(x)
        return np.where(np.isfinite(x), e, 0).astype(np.int64).astype(dtype)
    return op


_S16 = {"b16": False, "u16": False, "i16": True}
TYPED: dict[str, tuple[str, str, Callable[..., np.ndarray]]] = {
    # f16 arithmetic: numpy float16 computes in float32 and rounds once more; for +, -, * of f16 operands the
    # float32 result is exact or its double rounding is innocuous (24 >= 2*11 + 2), so the result is correct
    "v_add_f16": ("hh", "h", lambda a, b: _uh(_h(a) + _h(b))),
    "v_sub_f16": ("hh", "h", lambda a, b: _uh(_h(a) - _h(b))),
    "v_subrev_f16": ("hh", "h", lambda a, b: _uh(_h(b) - _h(a))),
    "v_mul_f16": ("hh", "h", lambda a, b: _uh(_h(a) * _h(b))),
    "v_fma_f16": ("hhh", "h", lambda a, b, c: fp.fma16(_h(a), _h(b), _h(c)).view(U16)),
    "v_max_f16": ("hh", "h", _max), "v_min_f16": ("hh", "h", _min),
    "v_max3_f16": ("hhh", "h", _max3), "v_min3_f16": ("hhh", "h", _min3), "v_med3_f16": ("hhh", "h", _med3f),
    "v_cvt_f16_f32": ("f", "h", lambda a: _uh(_f(a).astype(F16))),
    "v_cvt_f32_f16": ("h", "f", lambda a: _u(_h(a).astype(F32))),
    "v_cvt_f16_u16": ("s", "h", _cvt_f16_int(False)), "v_cvt_f16_i16": ("s", "h", _cvt_f16_int(True)),
    "v_cvt_u16_f16": ("h", "s", lambda a: _to_int(_h(a), 0, 65535, U16)),
    "v_cvt_i16_f16": ("h", "s", lambda a: _to_int(_h(a), -32768, 32767, I16).view(U16)),
    "v_cvt_u32_u16": ("s", "w", lambda a: a.astype(U32)),
    "v_cvt_i32_i16": ("s", "w", lambda a: a.view(I16).astype(I32).view(U32)),
    "v_pack_b32_f16": ("hh", "w", lambda a, b: a.astype(U32) | b.astype(U32) << U32(16)),
    "v_cvt_pk_rtz_f16_f32": ("ff", "w", lambda a, b: _f16_rtz(_f(a)).astype(U32) | _f16_rtz(_f(b)).astype(U32)
                             << U32(16)),
    "v_sqrt_f16": ("h", "h", _round_to(np.sqrt, _h, _uh)),
    "v_rcp_f16": ("h", "h", _round_to(lambda x: 1.0 / x, _h, _uh)),
    "v_rsq_f16": ("h", "h", _round_to(lambda x: 1.0 / np.sqrt(x), _h, _uh)),
    "v_exp_f16": ("h", "h", _round_to(np.exp2, _h, _uh)),
    "v_log_f16": ("h", "h", _round_to(np.log2, _h, _uh)),
    "v_trunc_f16": ("h", "h", lambda a: _uh(np.trunc(_h(a)))),
    "v_floor_f16": ("h", "h", lambda a: _uh(np.floor(_h(a)))),
    "v_ceil_f16": ("h", "h", lambda a: _uh(np.ceil(_h(a)))),
    "v_rndne_f16": ("h", "h", lambda a: _uh(np.rint(_h(a)))),
    "v_fract_f16": ("h", "h", _fract(_h, _uh)),
    "v_ldexp_f16": ("hs", "h", _ldexp_any(_h, _uh)),
    # f64
    "v_add_f64": ("dd", "d", lambda a, b: _ud(_d(a) + _d(b))),
    "v_mul_f64": ("dd", "d", lambda a, b: _ud(_d(a) * _d(b))),
    "v_fma_f64": ("ddd", "d", lambda a, b, c: _ud(fp.fma64(_d(a), _d(b), _d(c)))),
    "v_max_f64": ("dd", "d", _max), "v_min_f64": ("dd", "d", _min),
    "v_cvt_f64_f32": ("f", "d", lambda a: _ud(_f(a).astype(F64))),
    "v_cvt_f32_f64": ("d", "f", lambda a: _u(_d(a).astype(F32))),
    "v_cvt_f64_i32": ("w", "d", lambda a: _ud(a.view(I32).astype(F64))),
    "v_cvt_f64_u32": ("w", "d", lambda a: _ud(a.astype(F64))),
    "v_cvt_i32_f64": ("d", "w", lambda a: _to_int(_d(a), -2147483648.0, 2147483647.0, I32).view(U32)),
    "v_cvt_u32_f64": ("d", "w", lambda a: _to_int(_d(a), 0.0, 4294967295.0, U32)),
    "v_sqrt_f64": ("d", "d", lambda a: _ud(np.sqrt(_d(a)))),
    "v_rcp_f64": ("d", "d", lambda a: _ud(1.0 / _d(a))),
    "v_rsq_f64": ("d", "d", lambda a: _ud(1.0 / np.sqrt(_d(a)))),
    "v_trunc_f64": ("d", "d", lambda a: _ud(np.trunc(_d(a)))),
    "v_floor_f64": ("d", "d", lambda a: _ud(np.floor(_d(a)))),
    "v_ceil_f64": ("d", "d", lambda a: _ud(np.ceil(_d(a)))),
    "v_rndne_f64": ("d", "d", lambda a: _ud(np.rint(_d(a)))),
    "v_fract_f64": ("d", "d", _fract(_d, _ud)),
    "v_ldexp_f64": ("dw", "d", _ldexp_any(_d, _ud)),
    # f32 additions
    "v_fract_f32": ("f", "f", _fract(_f, _u)),
    "v_frexp_mant_f32": ("f", "f", _frexp_mant(_f, _u)),
    "v_frexp_exp_i32_f32": ("f", "w", _frexp_exp(_f, U32)),
    "v_frexp_mant_f64": ("d", "d", _frexp_mant(_d, _ud)),
    "v_frexp_exp_i32_f64": ("d", "w", _frexp_exp(_d, U32)),
    "v_frexp_mant_f16": ("h", "h", _frexp_mant(_h, _uh)),
    "v_frexp_exp_i16_f16": ("h", "s", _frexp_exp(_h, U16)),
    "v_cvt_floor_i32_f32": ("f", "w", lambda a: _to_int(np.floor(_f(a)), -2147483648.0, 2147483647.0,
                                                        I32).view(U32)),
    "v_cvt_nearest_i32_f32": ("f", "w", lambda a: _to_int(np.floor(_f(a).astype(F64) + 0.5), -2147483648.0,
                                                          2147483647.0, I32).view(U32)),
    "v_ldexp_f32": ("fw", "f", _ldexp),
    # 32-bit integer additions
    "v_xnor_b32": ("ww", "w", lambda a, b: ~(a ^ b)),
    "v_bfrev_b32": ("w", "w", _bfrev32),
    "v_clz_i32_u32": ("w", "w", _clz),
    "v_ctz_i32_b32": ("w", "w", _ctz),
    "v_cls_i32": ("w", "w", _cls),
    "v_bcnt_u32_b32": ("ww", "w", lambda a, b: np.bitwise_count(a).astype(U32) + b),
    "v_bfe_i32": ("www", "w", lambda a, b, c: np.where(
        (c & U32(31)) == 0, 0, ((a.view(I32).astype(np.int64) << (64 - (b & U32(31)).astype(np.int64)
                                                                  - (c & U32(31)).astype(np.int64)))
                                >> (64 - (c & U32(31)).astype(np.int64)))).astype(np.int64).astype(U32)),
    "v_mul_hi_u32_u24": ("ww", "w", lambda a, b: (((a & _M24).astype(U64) * (b & _M24).astype(U64))
                                                  >> U64(32)).astype(U32)),
    "v_mul_hi_i32_i24": ("ww", "w", lambda a, b: ((_s24(a) * _s24(b)) >> 32).astype(U32)),
    "v_alignbyte_b32": ("www", "w", lambda a, b, c: (((a.astype(U64) << U64(32)) | b.astype(U64))
                                                     >> (U64(8) * (c & U32(3)).astype(U64))).astype(U32)),
    "v_add_nc_i32": ("ww", "w", lambda a, b: a + b),
    "v_sub_nc_i32": ("ww", "w", lambda a, b: a - b),
    # 16-bit integers
    "v_add_nc_u16": ("ss", "s", lambda a, b: a + b), "v_sub_nc_u16": ("ss", "s", lambda a, b: a - b),
    "v_add_nc_i16": ("ss", "s", lambda a, b: a + b), "v_sub_nc_i16": ("ss", "s", lambda a, b: a - b),
    "v_mul_lo_u16": ("ss", "s", lambda a, b: a * b),
    "v_lshlrev_b16": ("ss", "s", lambda a, b: b << (a & U16(15))),
    "v_lshrrev_b16": ("ss", "s", lambda a, b: b >> (a & U16(15))),
    "v_ashrrev_i16": ("ss", "s", lambda a, b: (b.view(I16) >> (a & U16(15)).astype(I16)).view(U16)),
    "v_max_u16": ("ss", "s", np.maximum), "v_min_u16": ("ss", "s", np.minimum),
    "v_max_i16": ("ss", "s", lambda a, b: np.maximum(a.view(I16), b.view(I16)).view(U16)),
    "v_min_i16": ("ss", "s", lambda a, b: np.minimum(a.view(I16), b.view(I16)).view(U16)),
    "v_and_b16": ("ss", "s", lambda a, b: a & b), "v_or_b16": ("ss", "s", lambda a, b: a | b),
    "v_xor_b16": ("ss", "s", lambda a, b: a ^ b), "v_not_b16": ("s", "s", lambda a: ~a),
    "v_mov_b16": ("s", "s", lambda a: a),
    "v_mad_u16": ("sss", "s", lambda a, b, c: a * b + c),
    "v_mad_i16": ("sss", "s", lambda a, b, c: a * b + c),
    "v_mad_u32_u16": ("ssw", "w", lambda a, b, c: a.astype(U32) * b.astype(U32) + c),
    "v_mad_i32_i16": ("ssw", "w", lambda a, b, c: (a.view(I16).astype(I32) * b.view(I16).astype(I32)
                                                   + c.view(I32)).view(U32)),
}
# saturating (CLAMP) forms of the integer adds: the exact result clipped to the destination's range
_SAT: dict[str, Callable[..., np.ndarray]] = {
    "v_add_nc_u32": lambda a, b: _sat_u32(a.astype(I64) + b.astype(I64)),
    "v_sub_nc_u32": lambda a, b: _sat_u32(a.astype(I64) - b.astype(I64)),
    "v_subrev_nc_u32": lambda a, b: _sat_u32(b.astype(I64) - a.astype(I64)),
    "v_add_nc_i32": lambda a, b: _sat_i32(a.view(I32).astype(I64) + b.view(I32).astype(I64)),
    "v_sub_nc_i32": lambda a, b: _sat_i32(a.view(I32).astype(I64) - b.view(I32).astype(I64)),
    "v_add_nc_u16": lambda a, b: np.clip(a.astype(I64) + b.astype(I64), 0, 0xFFFF).astype(U16),
    "v_sub_nc_u16": lambda a, b: np.clip(a.astype(I64) - b.astype(I64), 0, 0xFFFF).astype(U16),
    "v_add_nc_i16": lambda a, b: np.clip(a.view(I16).astype(I64) + b.view(I16).astype(I64), -32768,
                                         32767).astype(I16).view(U16),
    "v_sub_nc_i16": lambda a, b: np.clip(a.view(I16).astype(I64) - b.view(I16).astype(I64), -32768,
                                         32767).astype(I16).view(U16),
}
_FLOAT_RESULT = ("f32", "f16", "f64")


def _kinds_of(name: str) -> tuple[str, str, Callable[..., np.ndarray]] | None:
    """(source kinds, destination kind, function) of a VALU operation, None when it is not modelled."""
    if name in TYPED:
        return TYPED[name]
    if name in vmath.TYPED_EXTRA:
        return vmath.TYPED_EXTRA[name]
    if name not in OPS:
        return None
    arity, isf, fn = OPS[name]
    parts = name.split("_")
    res = parts[2] if parts[1] == "cvt" and len(parts) > 3 else parts[-1]
    return ("f" if isf else "w") * arity, "f" if res in _FLOAT_RESULT else "w", fn


SHIFT64 = {"v_lshlrev_b64": lambda a, b: b << (a & U64(63)), "v_lshrrev_b64": lambda a, b: b >> (a & U64(63)),
           "v_ashrrev_i64": lambda a, b: (b.view(np.int64) >> (a & U64(63)).astype(np.int64)).view(U64)}
# carry ops: (sign of S1, reversed operands)
CARRY = {"v_add_co_u32": (1, False), "v_sub_co_u32": (-1, False), "v_subrev_co_u32": (-1, True)}
CARRY_CI = {"v_add_co_ci_u32": (1, False), "v_sub_co_ci_u32": (-1, False), "v_subrev_co_ci_u32": (-1, True)}

_FCMP: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "lg": lambda a, b: (a < b) | (a > b), "o": lambda a, b: ~(np.isnan(a) | np.isnan(b)),
    "u": lambda a, b: np.isnan(a) | np.isnan(b), "neq": lambda a, b: ~(a == b), "nlt": lambda a, b: ~(a < b),
    "nle": lambda a, b: ~(a <= b), "ngt": lambda a, b: ~(a > b), "nge": lambda a, b: ~(a >= b),
    "nlg": lambda a, b: ~((a < b) | (a > b)), "f": lambda a, b: np.zeros(32, bool), "t": lambda a, b: np.ones(32, bool),
}
_ICMP: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "lt": np.less, "eq": np.equal, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "ne": np.not_equal,
    "f": lambda a, b: np.zeros(32, bool), "t": lambda a, b: np.ones(32, bool),
}


def base_name(m: str) -> str:
    """The mnemonic without its ``_e32``/``_e64`` encoding suffix."""
    return m.removesuffix("_e32").removesuffix("_e64")


class _Srcs:
    """Source getters of one VALU instruction, with VOP3 float modifiers folded in."""

    def __init__(self, inst: Any, bad: Callable[[str], Exception], sd: bool = False,
                 src0: Callable[[Wave], np.ndarray] | None = None) -> None:
        self.f, self.bad, self.enc = inst.fields, bad, inst.encoding
        self.lit = inst.fields.get("literal")
        self.sd = sd            # VOP3SD: bits 14:8 are the carry SDST, not ABS/OP_SEL
        self.src0 = src0        # a DPP source: SRC0's lanes as the DPP control selects them (tinyhw.mocks.rdna3.lanes)

    def _raw(self, i: int) -> Callable[[Wave], np.ndarray]:
        """Source ``i``'s 32-bit lanes before modifiers (SRC0 through the DPP getter when there is one)."""
        if i == 0 and self.src0 is not None:
            return self.src0
        return v_get(self.f[f"src{i}"], self.lit, self.bad)

    def src(self, i: int, float_op: bool) -> Callable[[Wave], np.ndarray]:
        f = self.f
        g = self._raw(i)
        if self.enc != "VOP3" and "neg" not in f:      # DPP16 VOP1/VOP2/VOPC carry SRC0/SRC1 neg and abs
            return g
        neg, ab = f["neg"] >> i & 1, 0 if self.sd else f["abs"] >> i & 1
        if not (neg or ab):
            return g
        if not float_op:
            raise self.bad("neg/abs modifier on an integer operand")
        if ab and neg:
            return lambda w: (g(w) & _ABS) | _SIGN
        if ab:
            return lambda w: g(w) & _ABS
        return lambda w: g(w) ^ _SIGN


    def typed(self, i: int, kind: str) -> Callable[[Wave], np.ndarray]:
        """Source ``i`` as an operand of ``kind`` (see TYPED), with OP_SEL and the float modifiers applied."""
        f, vop3 = self.f, self.enc == "VOP3"
        src = f[f"src{i}"]
        neg = f["neg"] >> i & 1 if vop3 or "neg" in f else 0
        ab = f["abs"] >> i & 1 if (vop3 and not self.sd) or (not vop3 and "abs" in f) else 0
        if (neg or ab) and kind not in "fhd":
            raise self.bad("neg/abs modifier on an integer operand")
        if kind in "wf":
            return self.src(i, kind == "f")
        if kind in "dq":
            if i == 0 and self.src0 is not None:
                raise self.bad("a DPP source of a 64-bit operand")
            if src == 255:
                lit = self.lit or 0
                arr = np.full(32, lit << 32 if kind == "d" else lit, dtype=U64)   # f64: the literal's high dword
                def g(w: Wave) -> np.ndarray:
                    return arr
            else:
                g = v_get64(src, self.lit, self.bad)
            sign = U64(1 << 63)
        else:
            hi = vop3 and not self.sd and f["opsel"] >> i & 1
            if kind == "h" and src in _F16_CONST:
                arr16 = np.full(32, _F16_CONST[src], dtype=U16)
                def g(w):
                    return arr16
            else:
                g32 = self._raw(i)
                g = (lambda w: (g32(w) >> U32(16)).astype(U16)) if hi else (lambda w: g32(w).astype(U16))
            sign = U16(0x8000)
        if not (neg or ab):
            return g
        mag = ~sign
        if ab and neg:
            return lambda w: (g(w) & mag) | sign
        if ab:
            return lambda w: g(w) & mag
        return lambda w: g(w) ^ sign


# 16-bit float operations read the inline float constants as f16 values (ISA "inline constants")
_F16_CONST = {240: 0x3800, 241: 0xB800, 242: 0x3C00, 243: 0xBC00, 244: 0x4000, 245: 0xC000, 246: 0x4400,
              247: 0xC400, 248: 0x3118}
# MODE register bits (hwreg MODE): FP_ROUND 3:0 (f32 1:0, f16/f64 3:2), FP_DENORM 7:4 (f32 5:4, f16/f64 7:6; bit 0
# of each pair keeps input denormals, bit 1 keeps output denormals), DX10_CLAMP 8, IEEE 9
MODE_DX10, MODE_IEEE = 1 << 8, 1 << 9


def _putter(inst: Any, kind: str) -> Callable[[Wave, np.ndarray], None]:
    """Writes a result of ``kind`` to VDST: a 16-bit result replaces one half (OP_SEL[3]: the high one) and keeps
    the other (gfx10+ 16-bit results preserve the rest of the register, inferred from LLVM's codegen), a 64-bit
    one a register pair."""
    d = inst.fields.get("vdst", 0)
    if kind in "wf":
        return lambda w, r: v_put(w, d, r)
    if kind in "dq":
        return lambda w, r: v_put64(w, d, r)
    if inst.encoding == "VOP3" and inst.fields["opsel"] >> 3 & 1:
        return lambda w, r: v_put(w, d, (w.v[d] & U32(0xFFFF)) | (r.astype(U32) << U32(16)))
    return lambda w, r: v_put(w, d, (w.v[d] & U32(0xFFFF0000)) | r.astype(U32))


_FLOAT_OF = {"f": (U32, F32), "h": (U16, F16), "d": (U64, F64)}


def _post(inst: Any, name: str, kind: str, bad: Callable[[str], Exception]
          ) -> Callable[[Wave, np.ndarray], np.ndarray] | None:
    """VOP3 OMOD (x2, x4, /2) then CLAMP ([0, 1]; NaN -> 0 under MODE.DX10_CLAMP) on a float result. OMOD's scaling
    rounds (an overflow, a subnormal result) to nearest even, or in the result kind's directed MODE round mode: the
    model rounds the operation and then the scaling (the guide does not say whether OMOD scales before the
    operation's rounding; a choice not checked on hardware)."""
    f = inst.fields
    if inst.encoding != "VOP3" or not (f["clamp"] or f["omod"]):
        return None
    if kind not in _FLOAT_OF:
        raise bad("clamp/omod on an integer result")
    ut, ft = _FLOAT_OF[kind]
    scale = {0: None, 1: ft(2.0), 2: ft(4.0), 3: ft(0.5)}[f["omod"]]
    clamp = bool(f["clamp"])
    ldexp, lkinds, lt = {"f": ("v_ldexp_f32", "fw", U32), "h": ("v_ldexp_f16", "hs", U16),
                         "d": ("v_ldexp_f64", "dw", U32)}[kind]
    power = lt({0: 0, 1: 1, 2: 2, 3: -1}[f["omod"]] & (0xFFFF if lt is U16 else 0xFFFFFFFF))     # 2**power

    def post(w: Wave, r: np.ndarray) -> np.ndarray:
        x = r.view(ft)
        if scale is not None:
            x = (x * scale).astype(ft)
            rnd = rounding.mode_of(w.mode, kind)
            if rnd:
                n = np.full(r.shape, power, dtype=lt)
                x = rounding.directed(ldexp, lkinds, kind, (r, n), x.view(ut), rnd).view(ft)
        if clamp:
            c = np.where(x > 1, ft(1.0), np.where(x > 0, x, ft(0.0))).astype(ft)     # -0 and NaN -> +0
            if not w.mode & MODE_DX10:
                c = np.where(np.isnan(x), x, c)
            x = c
        return x.view(ut)
    return post


def _mode_bits(kinds: str, ieee: bool) -> tuple[int, int]:
    """(mask, value) of the MODE bits under which an operation on ``kinds`` needs no flushing or special casing:
    round to nearest even, denormals kept, and (for IEEE-aware operations) IEEE mode."""
    mask = want = 0
    if "f" in kinds:
        mask, want = mask | 0x33, want | 0x30
    if "h" in kinds or "d" in kinds:
        mask, want = mask | 0xCC, want | 0xC0
    if ieee:
        mask, want = mask | MODE_IEEE, want | MODE_IEEE
    return mask, want


def _moded(kinds: str, dk: str, fn: Callable[..., np.ndarray], bad: Callable[[str], Exception],
           name: str | None = None) -> Callable[[Wave, tuple[np.ndarray, ...]], np.ndarray]:
    """The operation ``name`` under a MODE other than the plain one: denormal inputs/outputs are flushed per
    FP_DENORM; IEEE mode is passed on; a round mode other than nearest even rounds the result as
    :mod:`tinyhw.mocks.rdna3.rounding` says (operations it does not list stop the dispatch, not modelled)."""
    ieee_aware = getattr(fn, "ieee_aware", False)
    floats = set(kinds + dk) & set("fhd")
    exact = name in rounding.ROUND_FREE
    rounds = name in rounding.DIRECTED and dk in "fhd"

    def slow(w: Wave, args: tuple[np.ndarray, ...]) -> np.ndarray:
        m = w.mode
        rnd = rounding.mode_of(m, dk) if dk in "fhd" else 0
        if not exact and not rounds and any(rounding.mode_of(m, k) for k in floats):
            raise bad(rounding.refusal(name or "this operation", m))
        a = list(args)
        for i, k in enumerate(kinds):
            if k in "fhd" and not (m >> (4 if k == "f" else 6) & 1):
                a[i] = fp.flush_bits(a[i])
        with np.errstate(all="ignore"):      # the nearest result of a lane rounded below may overflow (1/tiny)
            r = fn(*a, ieee=bool(m & MODE_IEEE)) if ieee_aware else fn(*a)
        if rnd and rounds:
            assert name is not None
            try:
                r = rounding.directed(name, kinds, dk, tuple(a), r, rnd)
            except rounding.Undecided as e:
                raise bad(str(e)) from e
        if dk in "fhd" and not (m >> (5 if dk == "f" else 7) & 1):
            r = fp.flush_bits(r)
        return r
    return slow


def _run32(fn: Callable[..., np.ndarray], gs: list[Callable[[Wave], np.ndarray]], d: int, mask: int, want: int,
           slow: Callable[[Wave, tuple[np.ndarray, ...]], np.ndarray] | None) -> Fn:
    """The common float case, flattened: a 32-bit result written straight to VGPR ``d`` under EXEC."""
    if len(gs) == 3:
        a, b, c = gs

        def run3(w: Wave) -> None:
            r = fn(a(w), b(w), c(w)) if w.mode & mask == want else slow(w, (a(w), b(w), c(w)))  # type: ignore[misc]
            e = w.s[EXEC]
            if type(e) is int and e == M32:
                w.v[d] = r
            else:
                np.copyto(w.v[d], r, where=w.mask(), casting="unsafe")
        return run3
    if len(gs) == 2:
        a, b = gs

        def run2(w: Wave) -> None:
            r = fn(a(w), b(w)) if w.mode & mask == want else slow(w, (a(w), b(w)))  # type: ignore[misc]
            e = w.s[EXEC]
            if type(e) is int and e == M32:
                w.v[d] = r
            else:
                np.copyto(w.v[d], r, where=w.mask(), casting="unsafe")
        return run2
    (a,) = gs

    def run1(w: Wave) -> None:
        r = fn(a(w)) if w.mode & mask == want else slow(w, (a(w),))  # type: ignore[misc]
        e = w.s[EXEC]
        if type(e) is int and e == M32:
            w.v[d] = r
        else:
            np.copyto(w.v[d], r, where=w.mask(), casting="unsafe")
    return run1


def _compile_typed(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception],
                   ent: tuple[str, str, Callable[..., np.ndarray]] | None = None,
                   getters: list[Callable[[Wave], np.ndarray]] | None = None) -> Fn:
    """A VALU operation from its kinds: sources, MODE handling, OMOD/CLAMP, the destination write (``ent`` and
    ``getters`` override the table entry and the source getters, for the accumulate and constant forms)."""
    ent = ent or _kinds_of(name)
    if ent is None:
        raise bad("VALU opcode not modelled")
    kinds, dk, fn = ent
    f, vop3 = inst.fields, inst.encoding == "VOP3"
    if len(kinds) == 3 and not vop3 and getters is None:
        raise bad("three-source operation outside VOP3")
    if vop3 and f["opsel"] and not (set(kinds + dk) & set("hs")):
        raise bad("op_sel on an operation without 16-bit operands")
    post = None
    if vop3 and f["clamp"] and name in _SAT and not f["omod"]:
        fn = _SAT[name]
    else:
        post = _post(inst, name, dk, bad)
    gs = getters or [srcs.typed(i, k) for i, k in enumerate(kinds)]
    mask, want = _mode_bits(kinds + dk, getattr(fn, "ieee_aware", False))
    slow = _moded(kinds, dk, fn, bad, name)
    if dk in "wf" and post is None and mask:
        return _run32(fn, gs, f.get("vdst", 0), mask, want, slow)
    put = _putter(inst, dk)
    if len(gs) == 1:
        (a,) = gs
        if not mask and post is None:
            return lambda w: put(w, fn(a(w)))

        def run1(w: Wave) -> None:
            r = fn(a(w)) if w.mode & mask == want else slow(w, (a(w),))
            put(w, r if post is None else post(w, r))
        return run1
    if len(gs) == 2:
        a, b = gs
        if not mask and post is None:
            return lambda w: put(w, fn(a(w), b(w)))

        def run2(w: Wave) -> None:
            r = fn(a(w), b(w)) if w.mode & mask == want else slow(w, (a(w), b(w)))
            put(w, r if post is None else post(w, r))
        return run2
    a, b, c = gs
    if not mask and post is None:
        return lambda w: put(w, fn(a(w), b(w), c(w)))

    def run3(w: Wave) -> None:
        r = fn(a(w), b(w), c(w)) if w.mode & mask == want else slow(w, (a(w), b(w), c(w)))
        put(w, r if post is None else post(w, r))
    return run3


def _check_vop3(inst: Any, bad: Callable[[str], Exception], sd: bool) -> None:
    f = inst.fields
    if inst.encoding != "VOP3":
        return
    if f["clamp"] or f["omod"]:
        raise bad("clamp/omod output modifiers are not modelled")
    if not sd and f["opsel"]:
        raise bad("op_sel is not modelled")


def _mask_getter(src: int, bad: Callable[[str], Exception]) -> Callable[[Wave], np.ndarray]:
    g = s_get(src, None, bad)
    return lambda w: int_to_bits(g(w))


def compile_valu(inst: Any, bad: Callable[[str], Exception], src0: Callable[[Wave], np.ndarray] | None = None
                 ) -> Fn:
    """Compile a VOP1/VOP2/VOP3/VOPC instruction into a function that runs it on a wave's 32 lanes (under EXEC); ``bad``
    builds the error for an opcode, modifier or operand the model lacks. ``src0`` replaces SRC0's getter (a DPP
    source, :func:`tinyhw.mocks.rdna3.lanes.compile_dpp`); operations that read SRC0 otherwise refuse it."""
    enc, f, m = inst.encoding, inst.fields, inst.mnemonic
    name = base_name(m)
    srcs = _Srcs(inst, bad, src0=src0)
    if src0 is not None and (name in ("v_mad_u64_u32", "v_mad_i64_i32", "v_readlane_b32", "v_writelane_b32")
                             or name in SHIFT64):
        raise bad(f"a DPP source on {name}")
    vop3 = enc == "VOP3"
    d = f.get("vdst", 0)
    if name.startswith(("v_cmp_", "v_cmpx_")):
        return _compile_cmp(inst, name, srcs, bad)
    if name in ("v_mad_u64_u32", "v_mad_i64_i32"):
        return _compile_mad64(inst, name == "v_mad_i64_i32", bad)
    if name in CARRY or name in CARRY_CI:
        return _compile_carry(inst, name, srcs, bad)
    if name == "v_readlane_b32":     # SGPR D = S0 (a VGPR) in lane S1[4:0] (an SGPR or constant); EXEC ignored
        if vop3 and (f["clamp"] or f["omod"] or f["neg"] or f["abs"] or f["opsel"]):
            raise bad("modifiers on v_readlane_b32")
        if f["src0"] < 256:
            raise bad("v_readlane_b32 of a non-VGPR source")
        vs, lane = f["src0"] - 256, s_get(f["src1"], srcs.lit, bad)

        def readlane(w: Wave) -> None:
            if d != NULL:
                w.s[d] = int(w.v[vs, lane(w) & 31])
        return readlane
    if name == "v_writelane_b32":    # VGPR D lane S1[4:0] = S0 (an SGPR or constant); EXEC ignored
        if vop3 and (f["clamp"] or f["omod"] or f["neg"] or f["abs"] or f["opsel"]):
            raise bad("modifiers on v_writelane_b32")
        val, lane = s_get(f["src0"], srcs.lit, bad), s_get(f["src1"], srcs.lit, bad)

        def writelane(w: Wave) -> None:
            w.v[d, lane(w) & 31] = val(w) & M32
        return writelane
    if name == "v_readfirstlane_b32":
        _check_vop3(inst, bad, False)
        a = srcs.src(0, False)

        def rfl(w: Wave) -> None:
            e = w.s[EXEC]
            lane = (e & -e).bit_length() - 1 if e else 0
            if d != 124:
                w.s[d] = int(a(w)[lane])
        return rfl
    if name == "v_cndmask_b32":
        _check_vop3(inst, bad, False)
        a, b = srcs.src(0, True), srcs.src(1, True)
        sel = _mask_getter(f["src2"], bad) if vop3 else (lambda w: int_to_bits(w.s[VCC]))
        return lambda w: v_put(w, d, np.where(sel(w), b(w), a(w)))
    if name in SHIFT64:
        _check_vop3(inst, bad, False)
        op64, sh = SHIFT64[name], v_get(f["src0"], srcs.lit, bad)
        b64 = v_get64(f["src1"], srcs.lit, bad)
        return lambda w: v_put64(w, d, op64(sh(w).astype(U64), b64(w)))
    if name in ("v_fmac_f32", "v_fmac_f16", "v_fmamk_f32", "v_fmaak_f32", "v_fmamk_f16", "v_fmaak_f16"):
        return _compile_fmac(inst, name, srcs, bad)
    special = vmath.compile_special(inst, name, srcs, bad)
    if special is not None:
        return special
    if name in ("v_dot2acc_f32_f16", "v_pk_fmac_f16"):
        return wmma.compile_vop2_packed(inst, name, bad)
    if name in ("v_dot2_f16_f16", "v_dot2_bf16_bf16"):
        return wmma.compile_dot2_vop3(inst, bad)
    if name == "v_fmac_dx9_zero_f32":
        d = f["vdst"]
        return _compile_typed(inst, name, srcs, bad, vmath.TYPED_EXTRA["v_fma_dx9_zero_f32"],
                              [srcs.typed(0, "f"), srcs.typed(1, "f"), lambda w: w.v[d]])
    return _compile_typed(inst, name, srcs, bad)


def _compile_fmac(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception]) -> Fn:
    """v_fmac_* (D = S0 * S1 + D), v_fmamk_* (D = S0 * K + S1) and v_fmaak_* (D = S0 * S1 + K), K the literal."""
    f = inst.fields
    half = name.endswith("f16")
    k = "h" if half else "f"
    fn = TYPED["v_fma_f16"][2] if half else OPS["v_fma_f32"][2]
    d = f["vdst"]
    a, b = srcs.typed(0, k), srcs.typed(1, k)
    if name.startswith("v_fmac"):
        if inst.encoding == "VOP3" and (f["neg"] & 4 or f["abs"] & 4):
            raise bad("modifiers on the accumulator of v_fmac")
        if half:
            hi = inst.encoding == "VOP3" and f["opsel"] >> 3 & 1
            c: Callable[[Wave], np.ndarray] = ((lambda w: (w.v[d] >> U32(16)).astype(U16)) if hi
                                               else (lambda w: w.v[d].astype(U16)))
        else:
            def c(w):
                return w.v[d]
        gs = [a, b, c]
    else:
        lit = srcs.lit or 0
        karr = np.full(32, lit & 0xFFFF if half else lit, dtype=U16 if half else U32)
        def kg(w: Wave) -> np.ndarray:
            return karr
        gs = [a, kg, b] if name.startswith("v_fmamk") else [a, b, kg]
    return _compile_typed(inst, name, srcs, bad, (k * 3, k, fn), gs)


_CMP_KIND = {"f16": ("h", F16), "f32": ("f", F32), "f64": ("d", F64), "i16": ("s", I16), "u16": ("s", U16),
             "i32": ("w", I32), "u32": ("w", U32), "i64": ("q", np.int64), "u64": ("q", U64)}


def _compile_cmp(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception]) -> Fn:
    """v_cmp_* / v_cmpx_* of every type (16-, 32-, 64-bit floats and integers) and their VOP3 forms: VOPC writes
    VCC_LO, VOP3 the SGPR named by VDST, v_cmpx EXEC (gfx11); inactive lanes get 0."""
    parts = name.split("_")     # v_cmp_lt_f32 / v_cmpx_eq_u32
    if len(parts) == 4 and parts[2] == "class":
        return _compile_class(inst, name, srcs, bad)
    if len(parts) != 4 or parts[3] not in _CMP_KIND:
        raise bad("compare type not modelled")
    kind, cond, typ = parts[1], parts[2], parts[3]
    table = _FCMP if typ[0] == "f" else _ICMP
    if cond not in table:
        raise bad("compare condition not modelled")
    cmp = table[cond]
    f = inst.fields
    if inst.encoding == "VOP3" and (f["clamp"] or f["omod"] or (f["opsel"] and typ[1:] != "16")):
        raise bad("clamp/omod/op_sel on a compare")
    k, view = _CMP_KIND[typ]
    a, b = srcs.typed(0, k), srcs.typed(1, k)
    dst = EXEC if kind == "cmpx" else (f["vdst"] if inst.encoding == "VOP3" else VCC)
    flush_bit = {"f": 4, "h": 6, "d": 6}.get(k)

    def run(w: Wave) -> None:
        x, y = a(w), b(w)
        if flush_bit is not None and not (w.mode >> flush_bit & 1):
            x, y = fp.flush_bits(x), fp.flush_bits(y)
        r = cmp(x.view(view), y.view(view)) & w.mask()
        if dst != NULL:
            w.s[dst] = bits_to_int(r)
    return run


_CLASS_FMT = {"f16": (U16, 10, 0x1F), "f32": (U32, 23, 0xFF), "f64": (U64, 52, 0x7FF)}


def _fclass(x: np.ndarray) -> np.ndarray:
    """The v_cmp_class_* class bit of each lane (float16/32/64 array): 0 signalling NaN, 1 quiet NaN, 2 -inf,
    3 -normal, 4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf (RDNA3 ISA, VOPC class compares)."""
    t = {np.dtype(F16): U16, np.dtype(F32): U32, np.dtype(F64): U64}[x.dtype]
    _, mbits, emax = next(v for v in _CLASS_FMT.values() if v[0] is t)
    u = x.view(t)
    neg = (u >> t(mbits + {U16: 5, U32: 8, U64: 11}[t])) == 1
    exp, man = (u >> t(mbits)) & t(emax), u & t((1 << mbits) - 1)
    cls = np.where(exp == 0, np.where(man == 0, 6, 7), np.where(exp == emax, np.where(man == 0, 9, -1), 8))
    cls = np.where(neg & (cls >= 6), 11 - cls, cls)    # -0 5, -denormal 4, -normal 3, -inf 2
    nan = (exp == emax) & (man != 0)
    return np.where(nan, np.where(man & t(1 << (mbits - 1)), 1, 0), cls).astype(U32)


def _compile_class(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception]) -> Fn:
    typ = name.rsplit("_", 1)[1]
    if typ not in _CLASS_FMT:
        raise bad("class compare type not modelled")
    f = inst.fields
    if inst.encoding == "VOP3" and (f["clamp"] or f["omod"] or (f["opsel"] and typ != "f16")):
        raise bad("clamp/omod/op_sel on a compare")
    k, view = _CMP_KIND[typ]
    a, b = srcs.typed(0, k), srcs.src(1, False)
    dst = EXEC if name.startswith("v_cmpx") else (f["vdst"] if inst.encoding == "VOP3" else VCC)

    def run(w: Wave) -> None:
        r = ((b(w) >> _fclass(a(w).view(view))) & U32(1)).astype(bool) & w.mask()
        if dst != NULL:
            w.s[dst] = bits_to_int(r)
    return run


def _compile_carry(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception]) -> Fn:
    f, vop3 = inst.fields, inst.encoding == "VOP3"
    ci = name in CARRY_CI
    sign, rev = (CARRY_CI if ci else CARRY)[name]
    d = f["vdst"]
    if vop3 and (f["clamp"] or f["omod"] or f["neg"]):
        raise bad("modifiers on a carry operation")
    sdst = f["sdst"] if vop3 else VCC
    srcs = _Srcs(inst, bad, sd=True, src0=srcs.src0)
    a, b = srcs.src(0, False), srcs.src(1, False)
    cin = (_mask_getter(f["src2"], bad) if vop3 else (lambda w: int_to_bits(w.s[VCC]))) if ci else None

    def run(w: Wave) -> None:
        x, y = a(w).astype(np.int64), b(w).astype(np.int64)
        if rev:
            x, y = y, x
        r = x + y if sign > 0 else x - y
        if cin is not None:
            c = cin(w).astype(np.int64)
            r = r + c if sign > 0 else r - c
        carry = (r > M32) if sign > 0 else (r < 0)
        v_put(w, d, (r & M32).astype(U32))
        if sdst != 124:
            w.s[sdst] = bits_to_int(carry & w.mask())
    return run


def _compile_mad64(inst: Any, signed: bool, bad: Callable[[str], Exception]) -> Fn:
    """v_mad_u64_u32 / v_mad_i64_i32 (VOP3SD): D.u64 = S0 * S1 + S2.u64 (32x32 -> 64 product), SDST the carry out
    of the unsigned 64-bit add (for the signed form: the result's overflow of the signed sum)."""
    f = inst.fields
    if f["clamp"] or f["omod"] or f["neg"]:
        raise bad("modifiers on a 64-bit multiply-add")
    d, sdst = f["vdst"], f["sdst"]
    a, b = v_get(f["src0"], f.get("literal"), bad), v_get(f["src1"], f.get("literal"), bad)
    c = v_get64(f["src2"], f.get("literal"), bad)

    def run(w: Wave) -> None:
        x, y, z = a(w), b(w), c(w)
        if signed:      # the 32x32 product is exact in int64; the sum wraps, overflow from the signs
            p = x.view(I32).astype(np.int64) * y.view(I32).astype(np.int64)
            zs = z.view(np.int64)
            with np.errstate(over="ignore"):
                r = p + zs
            carry = ((p ^ r) & (zs ^ r)) < 0
            r = r.view(U64)
        else:           # the product fits in uint64; the add's carry out is a wrap-around
            p = x.astype(U64) * y.astype(U64)
            r = p + z
            carry = r < p
        v_put64(w, d, r)
        if sdst != 124:
            w.s[sdst] = bits_to_int(carry & w.mask())
    return run


# ---- VOPD ---------------------------------------------------------------------------------------------------------

_DUAL2 = {"v_dual_mul_f32": "v_mul_f32", "v_dual_add_f32": "v_add_f32", "v_dual_sub_f32": "v_sub_f32",
          "v_dual_subrev_f32": "v_subrev_f32", "v_dual_max_f32": "v_max_f32", "v_dual_min_f32": "v_min_f32",
          "v_dual_add_nc_u32": "v_add_nc_u32", "v_dual_lshlrev_b32": "v_lshlrev_b32", "v_dual_and_b32": "v_and_b32"}


def _dual_half(m: str, d: int, src0: int, vsrc1: int, lit: int | None,
               bad: Callable[[str], Exception]) -> Callable[[Wave], np.ndarray]:
    """A function computing one VOPD half's result (written later, after both halves have read)."""
    a = v_get(src0, lit, bad)
    if m == "v_dual_mov_b32":
        return a
    b = v_get(vsrc1, lit, bad)
    if m == "v_dual_cndmask_b32":
        return lambda w: np.where(int_to_bits(w.s[VCC]), b(w), a(w))
    if m == "v_dual_dot2acc_f32_f16":
        return lambda w: wmma.dot2acc(a(w), b(w), w.v[d], rounding.mode_of(w.mode, "f"))
    k = np.full(32, lit or 0, dtype=U32)
    fma = OPS["v_fma_f32"][2]
    three = {"v_dual_fmac_f32": (lambda w: w.v[d], 2), "v_dual_fmaak_f32": (lambda w: k, 2),
             "v_dual_fmamk_f32": (lambda w: k, 1)}
    if m in three:
        g, pos = three[m]
        gs = [a, b]
        gs.insert(pos, g)
        fn: Callable[..., np.ndarray] = fma
        kinds, op = "fff", "v_fma_f32"
    elif m == "v_dual_mul_dx9_zero_f32":
        gs, op, kinds = [a, b], "v_mul_dx9_zero_f32", "ff"
        fn = vmath.TYPED_EXTRA[op][2]
    elif m in _DUAL2:
        gs = [a, b]
        op = _DUAL2[m]
        _arity, isf, fn = OPS[op]
        if not isf:
            return lambda w: fn(a(w), b(w))
        kinds = "ff"
    else:
        raise bad(f"VOPD half {m} not modelled")
    mask, want = _mode_bits(kinds, getattr(fn, "ieee_aware", False))
    slow = _moded(kinds, "f", fn, bad, op)
    if len(gs) == 2:
        x, y = gs
        return lambda w: fn(x(w), y(w)) if w.mode & mask == want else slow(w, (x(w), y(w)))
    x, y, z = gs
    return lambda w: fn(x(w), y(w), z(w)) if w.mode & mask == want else slow(w, (x(w), y(w), z(w)))


def compile_vopd(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a VOPD dual-issue instruction: both halves read their sources first, then write their destinations."""
    f, lit = inst.fields, inst.fields.get("literal")
    mx, my = inst.mnemonic.split("::")
    dx, dy = f["vdstx"], f["vdsty"]
    x = _dual_half(mx, dx, f["src0x"], f["vsrc1x"], lit, bad)
    y = _dual_half(my, dy, f["src0y"], f["vsrc1y"], lit, bad)

    def run(w: Wave) -> None:
        rx, ry = x(w), y(w)
        v_put(w, dx, rx)
        v_put(w, dy, ry)
    return run


# ---- VOP3P packed 16-bit math ---------------------------------------------------------------------------------------

_PK = {"v_pk_add_f16": "v_add_f16", "v_pk_mul_f16": "v_mul_f16", "v_pk_fma_f16": "v_fma_f16",
       "v_pk_min_f16": "v_min_f16", "v_pk_max_f16": "v_max_f16", "v_pk_add_u16": "v_add_nc_u16",
       "v_pk_sub_u16": "v_sub_nc_u16", "v_pk_add_i16": "v_add_nc_i16", "v_pk_sub_i16": "v_sub_nc_i16",
       "v_pk_mul_lo_u16": "v_mul_lo_u16", "v_pk_lshlrev_b16": "v_lshlrev_b16", "v_pk_lshrrev_b16": "v_lshrrev_b16",
       "v_pk_ashrrev_i16": "v_ashrrev_i16", "v_pk_max_i16": "v_max_i16", "v_pk_min_i16": "v_min_i16",
       "v_pk_max_u16": "v_max_u16", "v_pk_min_u16": "v_min_u16", "v_pk_mad_u16": "v_mad_u16",
       "v_pk_mad_i16": "v_mad_i16"}


def compile_vop3p(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a packed 16-bit VOP3P operation: each half of the result is the 16-bit operation on the source halves
    OP_SEL (low result) and OP_SEL_HI (high result) pick, NEG_LO / NEG_HI negating float sources of that half;
    CLAMP clamps float halves to [0, 1] and saturates the integer adds. Constants and the literal are read as
    :func:`~tinyhw.mocks.rdna3.state.v_get_packed` says."""
    f, m = inst.fields, inst.mnemonic
    if m not in _PK:
        return wmma.compile_vop3p_extra(inst, bad)
    base = _PK[m]
    kinds, _dk, fn = TYPED[base]
    n = len(kinds)
    isf = kinds[0] == "h"
    # VOP3P fields in the VOP3 layout: NEG_HI = "abs" (bits 10:8), OP_SEL = bits 13:11, OP_SEL_HI[2] = bit 14,
    # OP_SEL_HI[1:0] = "omod" (bits 60:59), NEG_LO = "neg"
    sel_lo, sel_hi = f["opsel"] & 7, (f["omod"] & 3) | (f["opsel"] >> 3 & 1) << 2
    neg_lo, neg_hi = f["neg"], f["abs"]
    if (neg_lo or neg_hi) and not isf:
        raise bad("neg on an integer packed operation")
    if f["clamp"] and not isf and base not in _SAT:
        raise bad("clamp on this packed integer operation")
    if f["clamp"] and not isf:
        fn = _SAT[base]
    srcs = [v_get_packed(f[f"src{i}"], f.get("literal"), bad, "f16" if isf else "int") for i in range(n)]
    d = f["vdst"]

    def half(w: Wave, vals: list[np.ndarray], sel: int, neg: int) -> list[np.ndarray]:
        out = []
        for i, x in enumerate(vals):
            h = (x >> U32(16) if sel >> i & 1 else x).astype(U16)
            if neg >> i & 1:
                h = h ^ U16(0x8000)
            out.append(h)
        return out

    mask, want = _mode_bits("h", getattr(fn, "ieee_aware", False))
    slow = _moded("h" * n, "h" if isf else "s", fn, bad, base)
    clamp = bool(f["clamp"]) and isf

    def one(w: Wave, args: list[np.ndarray]) -> np.ndarray:
        r = fn(*args) if not isf or w.mode & mask == want else slow(w, tuple(args))
        if clamp:
            x = r.view(F16)
            c = np.where(x > 1, F16(1.0), np.where(x > 0, x, F16(0.0))).astype(F16)
            if not w.mode & MODE_DX10:
                c = np.where(np.isnan(x), x, c)
            r = c.view(U16)
        return r

    def run(w: Wave) -> None:
        vals = [g(w) for g in srcs]
        lo = one(w, half(w, vals, sel_lo, neg_lo))
        hi = one(w, half(w, vals, sel_hi, neg_hi))
        v_put(w, d, lo.astype(U32) | hi.astype(U32) << U32(16))
    return run


# ---- lockstep ------------------------------------------------------------------------------------------------------
# VALU operations that may run once for several waves in lockstep (the dispatcher's wide path): their compiled
# function works unchanged on (waves, 32) lane arrays, reads scalars only through the wave's ``s``/``mask()``/``mode``
# (a scalar that differs between waves arrives as a (waves, 1) column) and writes SGPRs only with bits_to_int's
# per-wave masks. Anything that indexes lanes (readlane, permutes, DPP, WMMA) or walks lanes in Python (f64 fma) is
# left out: it runs wave by wave. The list is written out so that an operation added to OPS/TYPED runs wave by wave
# until it is checked on (waves, 32) arrays and added here; v_cmp_*/v_cmpx_* (every type) are accepted by prefix.
_LOCKSTEP_OK = frozenset({
    "v_add3_u32", "v_add_co_ci_u32", "v_add_co_u32", "v_add_f16", "v_add_f32", "v_add_f64", "v_add_lshl_u32",
    "v_add_nc_i16", "v_add_nc_i32", "v_add_nc_u16", "v_add_nc_u32", "v_alignbit_b32", "v_alignbyte_b32",
    "v_and_b16", "v_and_b32", "v_and_or_b32", "v_ashrrev_i16", "v_ashrrev_i32", "v_ashrrev_i64",
    "v_bcnt_u32_b32", "v_bfe_i32", "v_bfe_u32", "v_bfi_b32", "v_ceil_f16", "v_ceil_f32", "v_ceil_f64",
    "v_cndmask_b32", "v_cvt_f16_f32", "v_cvt_f16_i16", "v_cvt_f16_u16", "v_cvt_f32_f16", "v_cvt_f32_f64",
    "v_cvt_f32_i32", "v_cvt_f32_u32", "v_cvt_f32_ubyte0", "v_cvt_f32_ubyte1", "v_cvt_f32_ubyte2",
    "v_cvt_f32_ubyte3", "v_cvt_f64_f32", "v_cvt_f64_i32", "v_cvt_f64_u32", "v_cvt_floor_i32_f32",
    "v_cvt_i16_f16", "v_cvt_i32_f32", "v_cvt_i32_f64", "v_cvt_i32_i16", "v_cvt_nearest_i32_f32",
    "v_cvt_pk_rtz_f16_f32", "v_cvt_u16_f16", "v_cvt_u32_f32", "v_cvt_u32_f64", "v_cvt_u32_u16",
    "v_dual_add_f32", "v_dual_add_nc_u32", "v_dual_and_b32", "v_dual_cndmask_b32", "v_dual_fmaak_f32",
    "v_dual_fmac_f32", "v_dual_fmamk_f32", "v_dual_lshlrev_b32", "v_dual_max_f32", "v_dual_min_f32",
    "v_dual_mov_b32", "v_dual_mul_f32", "v_dual_sub_f32", "v_dual_subrev_f32", "v_exp_f16", "v_exp_f32",
    "v_floor_f16", "v_floor_f32", "v_floor_f64", "v_fma_f16", "v_fma_f32", "v_fmaak_f16", "v_fmaak_f32",
    "v_fmac_f16", "v_fmac_f32", "v_fmamk_f16", "v_fmamk_f32", "v_fract_f16", "v_fract_f32", "v_fract_f64",
    "v_frexp_exp_i16_f16", "v_frexp_exp_i32_f32", "v_frexp_exp_i32_f64", "v_frexp_mant_f16", "v_frexp_mant_f32",
    "v_frexp_mant_f64", "v_ldexp_f16", "v_ldexp_f32", "v_log_f16", "v_log_f32", "v_lshl_add_u32",
    "v_lshl_or_b32", "v_lshlrev_b16", "v_lshlrev_b32", "v_lshlrev_b64", "v_lshrrev_b16", "v_lshrrev_b32",
    "v_lshrrev_b64", "v_mad_i16", "v_mad_i32_i16", "v_mad_i32_i24", "v_mad_i64_i32", "v_mad_u16",
    "v_mad_u32_u16", "v_mad_u32_u24", "v_mad_u64_u32", "v_max3_f16", "v_max3_f32", "v_max3_i32", "v_max3_u32",
    "v_max_f16", "v_max_f32", "v_max_f64", "v_max_i16", "v_max_i32", "v_max_u16", "v_max_u32",
    "v_mbcnt_hi_u32_b32", "v_mbcnt_lo_u32_b32", "v_med3_f16", "v_med3_f32", "v_med3_i32", "v_med3_u32",
    "v_min3_f16", "v_min3_f32", "v_min3_i32", "v_min3_u32", "v_min_f16", "v_min_f32", "v_min_f64", "v_min_i16",
    "v_min_i32", "v_min_u16", "v_min_u32", "v_mov_b16", "v_mov_b32", "v_mul_f16", "v_mul_f32", "v_mul_f64",
    "v_mul_hi_i32", "v_mul_hi_i32_i24", "v_mul_hi_u32", "v_mul_hi_u32_u24", "v_mul_i32_i24", "v_mul_lo_u16",
    "v_mul_lo_u32", "v_mul_u32_u24", "v_not_b16", "v_not_b32", "v_or3_b32", "v_or_b16", "v_or_b32",
    "v_pack_b32_f16", "v_pk_add_f16", "v_pk_add_i16", "v_pk_add_u16", "v_pk_ashrrev_i16", "v_pk_fma_f16",
    "v_pk_lshlrev_b16", "v_pk_lshrrev_b16", "v_pk_mad_i16", "v_pk_mad_u16", "v_pk_max_f16", "v_pk_max_i16",
    "v_pk_max_u16", "v_pk_min_f16", "v_pk_min_i16", "v_pk_min_u16", "v_pk_mul_f16", "v_pk_mul_lo_u16",
    "v_pk_sub_i16", "v_pk_sub_u16", "v_rcp_f16", "v_rcp_f32", "v_rcp_f64", "v_rcp_iflag_f32", "v_rndne_f16",
    "v_rndne_f32", "v_rndne_f64", "v_rsq_f16", "v_rsq_f32", "v_rsq_f64", "v_sqrt_f16", "v_sqrt_f32",
    "v_sqrt_f64", "v_sub_co_ci_u32", "v_sub_co_u32", "v_sub_f16", "v_sub_f32", "v_sub_nc_i16", "v_sub_nc_i32",
    "v_sub_nc_u16", "v_sub_nc_u32", "v_subrev_co_ci_u32", "v_subrev_co_u32", "v_subrev_f16", "v_subrev_f32",
    "v_subrev_nc_u32", "v_trunc_f16", "v_trunc_f32", "v_trunc_f64", "v_xad_u32", "v_xnor_b32", "v_xor3_b32",
    "v_xor_b16", "v_xor_b32"
})


def lockstep_ok(inst: Any) -> bool:
    """True when the compiled function of VALU instruction ``inst`` may run for several waves at once on their
    (waves, 32) VGPR rows (see the note above); False: it runs wave by wave."""
    if inst.encoding not in ("VOP1", "VOP2", "VOP3", "VOPC", "VOPD", "VOP3P") or "dpp" in inst.fields:
        return False
    names = inst.mnemonic.split("::") if inst.encoding == "VOPD" else [base_name(inst.mnemonic)]
    return all(n in _LOCKSTEP_OK or n.startswith(("v_cmp_", "v_cmpx_")) for n in names)
