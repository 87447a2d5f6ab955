"""Vector ALU: VOP1, VOP2, VOPC, VOP3/VOP3SD, VOPD dual issue (specs/amd-compute.md §5.2-§5.4) and the packed
16-bit float operations of VOP3P (:func:`compile_vop3p`).

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

from tinyhw.mocks.rdna3.state import (
    EXEC,
    LANES,
    M32,
    VCC,
    Wave,
    bits_to_int,
    int_to_bits,
    s_get,
    v_get,
    v_get64,
    v_put,
    v_put64,
)

F32, U32, I32, U64, F64 = np.float32, np.uint32, np.int32, np.uint64, np.float64
Fn = Callable[[Wave], Any]
_SIGN, _ABS = U32(0x80000000), U32(0x7FFFFFFF)
_BELOW = (U32(1) << LANES) - U32(1)     # lanes below lane l, for v_mbcnt_lo
_M24 = U32(0xFFFFFF)


def _f(x: np.ndarray) -> np.ndarray:
    return x.view(F32)


def _u(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=F32).view(U32)


def fma32(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    """Fused multiply-add of float32 arrays with one rounding (exact product, round-to-odd sum in float64)."""
    p = a.astype(F64) * b.astype(F64)
    c64 = c.astype(F64)
    s = p + c64
    bb = s - p
    err = (p - (s - bb)) + (c64 - bb)
    fix = (err != 0) & ((s.view(U64) & U64(1)) == 0) & np.isfinite(s)
    if fix.any():
        s = np.where(fix, np.nextafter(s, np.where(err > 0, np.inf, -np.inf)), s)
    return s.astype(F32)


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
    follow IEEE: 1/+-0 = +-inf, sqrt(-x) = NaN, log2(0) = -inf, log2(-x) = NaN, exp2(-inf) = 0.
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


def _fmed3(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
    return np.fmax(np.fmin(a, b), np.fmin(np.fmax(a, b), c))


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
    "v_add_f32": (2, True, lambda a, b: _u(_f(a) + _f(b))),
    "v_sub_f32": (2, True, lambda a, b: _u(_f(a) - _f(b))),
    "v_subrev_f32": (2, True, lambda a, b: _u(_f(b) - _f(a))),
    "v_mul_f32": (2, True, lambda a, b: _u(_f(a) * _f(b))),
    "v_max_f32": (2, True, lambda a, b: _u(np.fmax(_f(a), _f(b)))),
    "v_min_f32": (2, True, lambda a, b: _u(np.fmin(_f(a), _f(b)))),
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
    "v_max3_f32": (3, True, lambda a, b, c: _u(np.fmax(np.fmax(_f(a), _f(b)), _f(c)))),
    "v_min3_f32": (3, True, lambda a, b, c: _u(np.fmin(np.fmin(_f(a), _f(b)), _f(c)))),
    "v_med3_f32": (3, True, lambda a, b, c: _u(_fmed3(_f(a), _f(b), _f(c)))),
    "v_xad_u32": (3, False, lambda a, b, c: (a ^ b) + c),
    "v_alignbit_b32": (3, False, lambda a, b, c: (((a.astype(U64) << U64(32)) | b.astype(U64))
                                                   >> (c & U32(31)).astype(U64)).astype(U32)),
    "v_fma_f32": (3, True, lambda a, b, c: _u(fma32(_f(a), _f(b), _f(c)))),
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

    def __init__(self, inst: Any, bad: Callable[[str], Exception], sd: bool = False) -> None:
        self.f, self.bad, self.enc = inst.fields, bad, inst.encoding
        self.lit = inst.fields.get("literal")
        self.sd = sd            # VOP3SD: bits 14:8 are the carry SDST, not ABS/OP_SEL

    def src(self, i: int, float_op: bool) -> Callable[[Wave], np.ndarray]:
        f = self.f
        g = v_get(f[f"src{i}"], self.lit, self.bad)
        if self.enc != "VOP3":
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


def compile_valu(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a VOP1/VOP2/VOP3/VOPC instruction into a function that runs it on a wave's 32 lanes (under EXEC); ``bad``
    builds the error for an opcode, modifier or operand the model lacks."""
    enc, f, m = inst.encoding, inst.fields, inst.mnemonic
    name = base_name(m)
    srcs = _Srcs(inst, bad)
    vop3 = enc == "VOP3"
    d = f.get("vdst", 0)
    if name.startswith(("v_cmp_", "v_cmpx_")):
        return _compile_cmp(inst, name, srcs, bad)
    if name in ("v_mad_u64_u32", "v_mad_i64_i32"):
        return _compile_mad64(inst, name == "v_mad_i64_i32", bad)
    if name in CARRY or name in CARRY_CI:
        return _compile_carry(inst, name, srcs, bad)
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
    if name == "v_fmac_f32":
        _check_vop3(inst, bad, False)
        a, b = srcs.src(0, True), srcs.src(1, True)
        if vop3 and f["neg"] & 4 or vop3 and f["abs"] & 4:
            raise bad("modifiers on the accumulator of v_fmac_f32")
        return lambda w: v_put(w, d, _u(fma32(_f(a(w)), _f(b(w)), _f(w.v[d]))))
    if name in ("v_fmamk_f32", "v_fmaak_f32"):
        k = np.full(32, srcs.lit or 0, dtype=U32).view(F32)
        a, b = srcs.src(0, True), srcs.src(1, True)
        if name == "v_fmamk_f32":
            return lambda w: v_put(w, d, _u(fma32(_f(a(w)), k, _f(b(w)))))
        return lambda w: v_put(w, d, _u(fma32(_f(a(w)), _f(b(w)), k)))
    if name not in OPS:
        raise bad("VALU opcode not modelled")
    _check_vop3(inst, bad, False)
    arity, isf, op = OPS[name]
    if arity == 1:
        a = srcs.src(0, isf)
        return lambda w: v_put(w, d, op(a(w)))
    if arity == 2:
        a, b = srcs.src(0, isf), srcs.src(1, isf)
        return lambda w: v_put(w, d, op(a(w), b(w)))
    if not vop3:
        raise bad("three-source operation outside VOP3")
    a, b, c = srcs.src(0, isf), srcs.src(1, isf), srcs.src(2, isf)
    return lambda w: v_put(w, d, op(a(w), b(w), c(w)))


def _compile_cmp(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception]) -> Fn:
    parts = name.split("_")     # v_cmp_lt_f32 / v_cmpx_eq_u32
    if name in ("v_cmp_class_f32", "v_cmpx_class_f32"):
        return _compile_class(inst, name, srcs, bad)
    if len(parts) != 4 or parts[3] not in ("f32", "u32", "i32"):
        raise bad("compare type not modelled")
    kind, cond, typ = parts[1], parts[2], parts[3]
    table = _FCMP if typ == "f32" else _ICMP
    if cond not in table:
        raise bad("compare condition not modelled")
    cmp = table[cond]
    _check_vop3(inst, bad, False)
    a, b = srcs.src(0, typ == "f32"), srcs.src(1, typ == "f32")
    view = {"f32": F32, "u32": U32, "i32": I32}[typ]
    # VOPC writes VCC_LO, its VOP3 form the SGPR named by VDST; v_cmpx writes EXEC (gfx11)
    dst = EXEC if kind == "cmpx" else (inst.fields["vdst"] if inst.encoding == "VOP3" else VCC)

    def run(w: Wave) -> None:
        r = cmp(a(w).view(view), b(w).view(view)) & w.mask()
        if dst != 124:
            w.s[dst] = bits_to_int(r)
    return run


def _fclass(x: np.ndarray) -> np.ndarray:
    """The v_cmp_class_f32 class bit of each float32 lane: 0 signalling NaN, 1 quiet NaN, 2 -inf, 3 -normal,
    4 -denormal, 5 -0, 6 +0, 7 +denormal, 8 +normal, 9 +inf (RDNA3 ISA, VOPC class compares)."""
    u = x.view(U32)
    neg = (u >> U32(31)) == 1
    exp, man = (u >> U32(23)) & U32(0xFF), u & U32(0x7FFFFF)
    cls = np.where(exp == 0, np.where(man == 0, 6, 7), np.where(exp == 0xFF, np.where(man == 0, 9, -1), 8))
    cls = np.where(neg & (cls >= 6), 11 - cls, cls)    # -0 5, -denormal 4, -normal 3, -inf 2
    nan = (exp == 0xFF) & (man != 0)
    return np.where(nan, np.where(man & U32(0x400000), 1, 0), cls).astype(U32)


def _compile_class(inst: Any, name: str, srcs: _Srcs, bad: Callable[[str], Exception]) -> Fn:
    _check_vop3(inst, bad, False)
    a, b = srcs.src(0, True), srcs.src(1, False)
    dst = EXEC if name.startswith("v_cmpx") else (inst.fields["vdst"] if inst.encoding == "VOP3" else VCC)

    def run(w: Wave) -> None:
        r = ((b(w) >> _fclass(a(w))) & U32(1)).astype(bool) & w.mask()
        if dst != 124:
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
    srcs = _Srcs(inst, bad, sd=True)
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
    if m == "v_dual_fmac_f32":
        return lambda w: _u(fma32(_f(a(w)), _f(b(w)), _f(w.v[d])))
    if m == "v_dual_fmaak_f32":
        k = np.full(32, lit or 0, dtype=U32).view(F32)
        return lambda w: _u(fma32(_f(a(w)), _f(b(w)), k))
    if m == "v_dual_fmamk_f32":
        k = np.full(32, lit or 0, dtype=U32).view(F32)
        return lambda w: _u(fma32(_f(a(w)), k, _f(b(w))))
    if m == "v_dual_cndmask_b32":
        return lambda w: np.where(int_to_bits(w.s[VCC]), b(w), a(w))
    if m in _DUAL2:
        op = OPS[_DUAL2[m]][2]
        return lambda w: op(a(w), b(w))
    raise bad(f"VOPD half {m} not modelled")


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


# VOP3P packed 16-bit float operations: name -> (arity, function of float64 halves -> float64); the result of each
# half is rounded once to float16 (the product and sum are exact or rounded to nearest in float64 first, inferred:
# a double rounding can differ from the fused result only at extreme exponent gaps).
PACKED_F16: dict[str, tuple[int, Callable[..., np.ndarray]]] = {
    "v_pk_fma_f16": (3, lambda a, b, c: a * b + c),
    "v_pk_add_f16": (2, lambda a, b: a + b),
    "v_pk_mul_f16": (2, lambda a, b: a * b),
}
_F16 = np.float16


def compile_vop3p(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a VOP3P packed-f16 instruction (:data:`PACKED_F16`): each source's low or high half (OP_SEL for the
    result's low half, OP_SEL_HI for its high half), NEG_LO / NEG_HI flip the sign of the half they apply to, and
    the two results are packed low | high << 16. Field positions (RDNA3 ISA, VOP3P): NEG_HI 10:8, OP_SEL 13:11,
    OP_SEL_HI[2] 14, CLAMP 15 in the first dword; OP_SEL_HI[1:0] 28:27, NEG_LO 31:29 in the second (the decoder's
    ``abs``, ``opsel``, ``omod`` and ``neg`` fields hold those bits). CLAMP and inline float constants (which are
    16-bit for these operations) are not modelled and stop the dispatch."""
    f, name = inst.fields, base_name(inst.mnemonic)
    if name not in PACKED_F16:
        raise bad("VOP3P opcode not modelled")
    if f["clamp"]:
        raise bad("clamp on a packed operation is not modelled")
    arity, op = PACKED_F16[name]
    sel_lo, sel_hi = f["opsel"] & 7, f["omod"] | (f["opsel"] >> 3 & 1) << 2
    neg_lo, neg_hi = f["neg"], f["abs"]
    lit = f.get("literal")
    getters = []
    for i in range(arity):
        src = f[f"src{i}"]
        if 128 <= src <= 254:
            raise bad("an inline constant on a packed f16 operation is not modelled")
        getters.append(v_get(src, lit, bad))
    d = f["vdst"]

    def half(x: np.ndarray, hi: int, neg: int) -> np.ndarray:
        h = ((x >> U32(16)) if hi else x) & U32(0xFFFF)
        v = h.astype(np.uint16).view(_F16).astype(F64)
        return -v if neg else v

    def run(w: Wave) -> None:
        xs = [g(w) for g in getters]
        lo = op(*(half(x, sel_lo >> i & 1, neg_lo >> i & 1) for i, x in enumerate(xs)))
        hi = op(*(half(x, sel_hi >> i & 1, neg_hi >> i & 1) for i, x in enumerate(xs)))
        lo16 = lo.astype(_F16).view(np.uint16).astype(U32)
        hi16 = hi.astype(_F16).view(np.uint16).astype(U32)
        v_put(w, d, lo16 | hi16 << U32(16))
    return run
