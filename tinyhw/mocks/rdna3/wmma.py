"""VOP3P dot products, mixed-precision fused multiply-adds and the wave matrix multiply-accumulate (WMMA) of gfx11.

The RDNA3 ISA reference guide's definitions (read for facts; no code copied):

- ``v_dot2_f32_f16`` / ``v_dot2_f32_bf16``: D.f32 = S2.f32 + a0*b0 + a1*b1, two f16 (bf16) elements per source;
  ``v_dot2_f16_f16`` / ``v_dot2_bf16_bf16`` (VOP3 encodings): the same into a 16-bit result. The guide's
  pseudocode accumulates in order, ``tmp = S2; tmp += S0[15:0] * S1[15:0]; tmp += S0[31:16] * S1[31:16]``; the
  products of 16-bit floats are exact, so the model rounds once per ``+=`` (two roundings, to the result format),
  in that order. This order is :data:`DOT2_ORDER`; the hardware may round less often (not documented).
- ``v_dot4_i32_iu8``, ``v_dot4_u32_u8``, ``v_dot8_i32_iu4``, ``v_dot8_u32_u4``: D = S2 + the sum of the element
  products, exact integers; for the ``iu`` forms NEG_LO[0]/NEG_LO[1] make the S0/S1 elements signed; CLAMP
  saturates to the 32-bit result range instead of wrapping.
- ``v_fma_mix_f32`` / ``v_fma_mixlo_f16`` / ``v_fma_mixhi_f16``: each source is an f32 (OP_SEL_HI bit clear) or the
  f16 half OP_SEL picks (OP_SEL_HI bit set), NEG_HI is abs and NEG_LO negation; one fused multiply-add with one
  rounding to f32, or to f16 into the low (mixlo) or high (mixhi) half of VDST, the other half kept; CLAMP to
  [0, 1].
- WMMA ``v_wmma_{f32,f16,bf16,i32}_16x16x16_*``: D = A * B + C over 16x16 matrices, wave32 register layout (LLVM
  AMDGPUUsage and AMD's "How to accelerate AI applications on RDNA 3 using WMMA"): lane l (0-15) holds row l of
  A and column l of B, K element k in VGPR ``k // per_reg`` (16-bit elements: low half first, two per VGPR; 8-bit:
  byte order, four per VGPR; 4-bit: nibble order, eight per VGPR); lanes 16-31 hold the same (the model reads lanes
  0-15). C and D take 8 VGPRs: VGPR j of lane l holds element (row 2j + l // 16, column l % 16) (also stated by
  Modular's RDNA fragment-layout docs and ROCm FlyDSL's hardware-checked gfx11 WMMA atom); the 16-bit results use
  the low halves, or the high halves with OP_SEL[2], the other half kept (LLVM review D158059 packs two f16
  results into one register set that way). The guide does not give an
  accumulation order or intermediate rounding for WMMA: the model computes each element exactly (Python integers)
  and rounds once, to nearest even, to the result format (:data:`WMMA_ROUNDING`); an infinite or NaN operand
  makes the element the float64 evaluation's infinity or NaN. EXEC must be all ones (the guide's requirement).
  The integer forms: NEG_LO[0]/[1] signed A/B, CLAMP saturates.

MODE denormal flushing is not applied in this module (denormals are kept). MODE.FP_ROUND is: under a directed mode
every rounding named above (each ``+=`` of a dot2, the fma_mix and ``v_pk_fmac_f16`` roundings, WMMA's one rounding)
rounds its exact value in that direction (:mod:`tinyhw.mocks.rdna3.rounding`), with the mode of the result format
(bf16 results: the f16/f64 field, a choice); an exactly zero WMMA element is +0, or -0 toward -infinity (the model's
choice, as its nearest-even +0).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import fp, rounding
from tinyhw.mocks.rdna3.state import EXEC, M32, Wave, v_get, v_get_packed, v_put

__all__ = ["DOT2_ORDER", "WMMA_ROUNDING", "compile_dot2_vop3", "compile_vop2_packed", "compile_vop3p_extra", "dot2acc",
           "round_scaled"]

F16, F32, F64 = np.float16, np.float32, np.float64
U16, U32, U64, I64 = np.uint16, np.uint32, np.uint64, np.int64
Fn = Callable[[Wave], Any]

#: (a description of the model's choice, not a switch) the dot2 float accumulation: S2 first, then the low product,
#: then the high one, one rounding after each add
DOT2_ORDER = "sequential"
#: (a description of the model's choice, not a switch) the WMMA float result: the exact sum of the 16 products and C,
#: rounded once to nearest even
WMMA_ROUNDING = "single"

_FMT = {"f32": (23, 8), "f16": (10, 5), "bf16": (7, 8)}
_KIND = {"f32": "f", "f16": "h", "bf16": "b"}      # rounding.FORMATS' names


def round_scaled(n: int, e_scale: int, fmt: str) -> int:
    """The bits of the exact value ``n * 2**-e_scale`` rounded to nearest even in ``fmt`` (f32, f16, bf16), with
    subnormals and overflow to infinity; an exact zero is +0."""
    mb, eb = _FMT[fmt]
    bias = (1 << (eb - 1)) - 1
    sign = 1 if n < 0 else 0
    a = -n if sign else n
    if a == 0:
        return 0
    e = max(a.bit_length() - 1 - e_scale, 1 - bias)
    shift = e_scale + e - mb
    if shift > 0:
        q = a >> shift
        rem = a - (q << shift)
        half = 1 << (shift - 1)
        if rem > half or (rem == half and q & 1):
            q += 1
    else:
        q = a << -shift
    if q >> (mb + 1):
        q >>= 1
        e += 1
    top = sign << (mb + eb)
    if e > bias:
        return top | ((1 << eb) - 1) << mb
    if q >> mb:
        return top | (e + bias) << mb | (q & ((1 << mb) - 1))
    return top | q


def _bf16_to_f32(h: np.ndarray) -> np.ndarray:
    return (h.astype(U32) << U32(16)).view(F32)


def _round_bf16(x: np.ndarray) -> np.ndarray:
    """float64 -> bf16 bits, correctly rounded: to f32 rounded to odd, then nearest even on the bits."""
    f = x.astype(F32)
    back = f.astype(F64)
    u = f.view(U32).copy()
    inexact = (back != x) & np.isfinite(x) & np.isfinite(back)
    fix = inexact & ((u & U32(1)) == 0)
    # round to odd: move one ulp toward x when the nearest-even f32 has an even last bit and is inexact
    toward = np.where(back < x, U32(1), U32(0)) ^ (u >> U32(31))          # +1 ulp in magnitude when it helps
    u = np.where(fix, np.where(toward == 1, u + U32(1), u - U32(1)), u).astype(U32)
    nan = np.isnan(x)
    r = ((u + U32(0x7FFF) + ((u >> U32(16)) & U32(1))) >> U32(16)).astype(U16)
    return np.where(nan, (u >> U32(16)).astype(U16) | U16(0x40), r).astype(U16)


def _round16(x: np.ndarray, bf: bool) -> np.ndarray:
    """float64 values (exact sums) rounded once to f16 or bf16 bits."""
    return _round_bf16(x) if bf else x.astype(F16).view(U16)


def _half(x: np.ndarray, hi: int) -> np.ndarray:
    return ((x >> U32(16)) if hi else x).astype(U16)


def _to64(h: np.ndarray, bf: bool) -> np.ndarray:
    return (_bf16_to_f32(h) if bf else h.view(F16)).astype(F64)


def _vop3p_fields(f: dict[str, int]) -> tuple[int, int, int, int]:
    """(op_sel, op_sel_hi, neg_lo, neg_hi) of a VOP3P instruction (its bits in the VOP3 field names)."""
    return f["opsel"] & 7, (f["omod"] & 3) | (f["opsel"] >> 3 & 1) << 2, f["neg"], f["abs"]


def _reg_src(f: dict[str, int], i: int, bad: Callable[[str], Exception],
             kind: str) -> Callable[[Wave], np.ndarray]:
    """Packed source ``i`` of a dot product (``kind`` "f16", "bf16" or "int": how an inline float constant reads)."""
    return v_get_packed(f[f"src{i}"], f.get("literal"), bad, kind)


def _clamp01(x: np.ndarray) -> np.ndarray:
    return np.where(x > 1, 1.0, np.where(x > 0, x, 0.0))


def compile_vop3p_extra(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a VOP3P dot product, fma_mix or WMMA instruction (see the module text); anything else is refused."""
    m = inst.mnemonic
    if m.startswith("v_wmma_"):
        return _compile_wmma(inst, bad)
    if m in ("v_fma_mix_f32", "v_fma_mixlo_f16", "v_fma_mixhi_f16"):
        return _compile_mix(inst, bad)
    if m in ("v_dot2_f32_f16", "v_dot2_f32_bf16"):
        return _compile_dot2(inst, m.endswith("bf16"), "f32", bad)
    if m in ("v_dot4_i32_iu8", "v_dot4_u32_u8", "v_dot8_i32_iu4", "v_dot8_u32_u4"):
        return _compile_dot_int(inst, bad)
    raise bad("VOP3P opcode not modelled")


def _dot2_sum(c: np.ndarray, a: list[np.ndarray], b: list[np.ndarray], out: str, bf_out: bool, mode: int = 0
              ) -> np.ndarray:
    """tmp = c; tmp += a0*b0; tmp += a1*b1, float64 exact products, rounded after each add to the result format
    (f32, or f16/bf16; in the directed round ``mode`` when it is not 0): returns float64 values already on the
    result format's grid."""
    tmp = c
    for x, y in zip(a, b, strict=True):
        s = fp._round_odd_sum(x * y, tmp)
        if out == "f32":
            r = s.astype(F32)
            if mode:
                r = rounding.fma_lanes(x, y, tmp, r.view(U32), "f", mode).view(F32)
            tmp = r.astype(F64)
        else:
            h = _round16(s, bf_out)
            if mode:
                h = rounding.fma_lanes(x, y, tmp, h, "b" if bf_out else "h", mode)
            tmp = _to64(h, bf_out)
    return tmp


def _compile_dot2(inst: Any, bf: bool, out: str, bad: Callable[[str], Exception]) -> Fn:
    """v_dot2_f32_f16 / v_dot2_f32_bf16 (VOP3P): element 0 of each source from the half OP_SEL picks, element 1
    from the half OP_SEL_HI picks, NEG_LO/NEG_HI negate them; S2 an f32 (NEG_LO[2] negates, NEG_HI[2] takes abs);
    CLAMP to [0, 1]."""
    f = inst.fields
    sel, sel_hi, neg_lo, neg_hi = _vop3p_fields(f)
    kind = "bf16" if bf else "f16"
    a, b = _reg_src(f, 0, bad, kind), _reg_src(f, 1, bad, kind)
    c = v_get(f["src2"], f.get("literal"), bad)
    d, clamp = f["vdst"], bool(f["clamp"])

    def elems(x: np.ndarray, i: int) -> list[np.ndarray]:
        out = []
        for s, n in ((sel, neg_lo), (sel_hi, neg_hi)):
            h = _half(x, s >> i & 1)
            if n >> i & 1:
                h = h ^ U16(0x8000)
            out.append(_to64(h, bf))
        return out

    def run(w: Wave) -> None:
        cv = c(w)
        if neg_hi >> 2 & 1:
            cv = cv & U32(0x7FFFFFFF)
        if neg_lo >> 2 & 1:
            cv = cv ^ U32(0x80000000)
        r = _dot2_sum(cv.view(F32).astype(F64), elems(a(w), 0), elems(b(w), 1), "f32", False,
                      rounding.mode_of(w.mode, "f"))
        if clamp:
            r = _clamp01(r)
        v_put(w, d, r.astype(F32).view(U32))
    return run


def compile_dot2_vop3(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """v_dot2_f16_f16 / v_dot2_bf16_bf16 (VOP3 encoding): S0 and S1 packed pairs, S2 the 16-bit half OP_SEL[2]
    picks, the result into the half OP_SEL[3] picks (the other half kept); NEG on S2 only."""
    f = inst.fields
    bf = "bf16" in inst.mnemonic
    if f["clamp"] or f["omod"] or f["abs"] or f["neg"] & 3 or f["opsel"] & 3:
        raise bad("modifiers on the packed sources of v_dot2 (VOP3)")
    kind = "bf16" if bf else "f16"
    a, b = _reg_src(f, 0, bad, kind), _reg_src(f, 1, bad, kind)
    c = v_get(f["src2"], f.get("literal"), bad)
    d, c_hi, d_hi, neg_c = f["vdst"], f["opsel"] >> 2 & 1, f["opsel"] >> 3 & 1, f["neg"] >> 2 & 1

    def run(w: Wave) -> None:
        x, y = a(w), b(w)
        ch = _half(c(w), c_hi)
        if neg_c:
            ch = ch ^ U16(0x8000)
        r = _dot2_sum(_to64(ch, bf), [_to64(_half(x, 0), bf), _to64(_half(x, 1), bf)],
                      [_to64(_half(y, 0), bf), _to64(_half(y, 1), bf)], "16", bf, rounding.mode_of(w.mode, "h"))
        h = _round16(r, bf).astype(U32)
        old = w.v[d]
        v_put(w, d, (old & U32(0xFFFF)) | h << U32(16) if d_hi else (old & U32(0xFFFF0000)) | h)
    return run


def _compile_dot_int(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """v_dot4_*_8 / v_dot8_*_4: exact integer dot product plus S2; signedness from NEG_LO for the iu forms."""
    f, m = inst.fields, inst.mnemonic
    sel, sel_hi, neg_lo, neg_hi = _vop3p_fields(f)
    if sel or neg_hi:
        raise bad("op_sel/neg_hi on an integer dot product")
    bits = 8 if "dot4" in m else 4
    mixed = "_iu" in m
    if neg_lo and not mixed:
        raise bad("neg_lo on an unsigned dot product")
    sa, sb = bool(neg_lo & 1), bool(neg_lo >> 1 & 1)
    signed_out = m.startswith(("v_dot4_i32", "v_dot8_i32"))
    a, b = _reg_src(f, 0, bad, "int"), _reg_src(f, 1, bad, "int")
    c = v_get(f["src2"], f.get("literal"), bad)
    d, clamp = f["vdst"], bool(f["clamp"])
    n, mask = 32 // bits, (1 << bits) - 1
    del sel_hi

    def elems(x: np.ndarray, signed: bool) -> list[np.ndarray]:
        out = []
        for k in range(n):
            e = ((x >> U32(bits * k)) & U32(mask)).astype(I64)
            out.append(np.where(e >> (bits - 1) & 1, e - (1 << bits), e) if signed else e)
        return out

    def run(w: Wave) -> None:
        cv = c(w)
        acc = cv.view(np.int32).astype(I64) if signed_out else cv.astype(I64)
        for x, y in zip(elems(a(w), sa), elems(b(w), sb), strict=True):
            acc = acc + x * y
        if clamp:
            acc = np.clip(acc, -(1 << 31), (1 << 31) - 1) if signed_out else np.clip(acc, 0, M32)
        v_put(w, d, (acc & M32).astype(U32))
    return run


def _compile_mix(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """v_fma_mix_f32 / v_fma_mixlo_f16 / v_fma_mixhi_f16 (see the module text)."""
    f, m = inst.fields, inst.mnemonic
    sel, sel_hi, neg_lo, neg_hi = _vop3p_fields(f)
    getters = []
    for i in range(3):
        s = f[f"src{i}"]
        if sel_hi >> i & 1 and 240 <= s <= 248:
            raise bad("an f16 inline constant operand of v_fma_mix")
        getters.append(v_get(s, f.get("literal"), bad))
    d, clamp = f["vdst"], bool(f["clamp"])

    def operand(w: Wave, i: int) -> np.ndarray:
        x = getters[i](w)
        if sel_hi >> i & 1:
            v = _half(x, sel >> i & 1).view(F16).astype(F64)
        else:
            v = x.view(F32).astype(F64)
        if neg_hi >> i & 1:
            v = np.abs(v)
        if neg_lo >> i & 1:
            v = -v
        return v

    def run(w: Wave) -> None:
        a, b, c = operand(w, 0), operand(w, 1), operand(w, 2)
        with np.errstate(all="ignore"):
            if m == "v_fma_mix_f32":
                r32 = fp.fma32(a.astype(F32), b.astype(F32), c.astype(F32))
                rnd = rounding.mode_of(w.mode, "f")
                if rnd:
                    r32 = rounding.fma_lanes(a, b, c, r32.view(U32), "f", rnd).view(F32)
                r = r32.astype(F64)
                if clamp:
                    r = _clamp01(r)
                v_put(w, d, r.astype(F32).view(U32))
                return
            s = fp._round_odd_sum(a * b, c)        # the f32 x f32 product is exact in float64
            h = s.astype(F16)
            rnd = rounding.mode_of(w.mode, "h")
            if rnd:
                h = rounding.fma_lanes(a, b, c, h.view(U16), "h", rnd).view(F16)
            if clamp:
                h = _clamp01(h.astype(F64)).astype(F16)
            hb = h.view(U16).astype(U32)
            old = w.v[d]
            v_put(w, d, (old & U32(0xFFFF)) | hb << U32(16) if m == "v_fma_mixhi_f16"
                  else (old & U32(0xFFFF0000)) | hb)
    return run


def dot2acc(x: np.ndarray, y: np.ndarray, acc: np.ndarray, mode: int = 0) -> np.ndarray:
    """v_dot2acc_f32_f16 (VOP2 and the VOPD half): acc.f32 + x.lo*y.lo + x.hi*y.hi in the dot2 order (each add
    rounded in the f32 round ``mode``)."""
    r = _dot2_sum(acc.view(F32).astype(F64), [_to64(_half(x, 0), False), _to64(_half(x, 1), False)],
                  [_to64(_half(y, 0), False), _to64(_half(y, 1), False)], "f32", False, mode)
    return r.astype(F32).view(U32)


def compile_vop2_packed(inst: Any, name: str, bad: Callable[[str], Exception]) -> Fn:
    """The VOP2 forms: v_dot2acc_f32_f16 (D.f32 += S0 . S1 over two f16 pairs, the dot2 order) and v_pk_fmac_f16
    (each half of D = fma(S0, S1, D), one rounding per half)."""
    f = inst.fields
    if inst.encoding == "VOP3":
        raise bad(f"the VOP3 form of {name}")
    a, b = v_get_packed(f["src0"], f.get("literal"), bad, "f16"), v_get(f["src1"], None, bad)
    d = f["vdst"]
    if name == "v_dot2acc_f32_f16":
        return lambda w: v_put(w, d, dot2acc(a(w), b(w), w.v[d], rounding.mode_of(w.mode, "f")))
    if name == "v_pk_fmac_f16":
        def fma(x: np.ndarray, y: np.ndarray, z: np.ndarray, rnd: int) -> np.ndarray:
            r = fp.fma16(x.view(F16), y.view(F16), z.view(F16)).view(U16)
            if rnd:
                r = rounding.fma_lanes(x.view(F16), y.view(F16), z.view(F16), r, "h", rnd)
            return r

        def pk(w: Wave) -> None:
            x, y, z = a(w), b(w), w.v[d]
            rnd = rounding.mode_of(w.mode, "h")
            lo = fma(_half(x, 0), _half(y, 0), _half(z, 0), rnd)
            hi = fma(_half(x, 1), _half(y, 1), _half(z, 1), rnd)
            v_put(w, d, lo.astype(U32) | hi.astype(U32) << U32(16))
        return pk
    raise bad(f"{name} not modelled")


# ---- WMMA -----------------------------------------------------------------------------------------------------------

_WMMA = {  # mnemonic -> (input kind, output kind)
    "v_wmma_f32_16x16x16_f16": ("f16", "f32"), "v_wmma_f32_16x16x16_bf16": ("bf16", "f32"),
    "v_wmma_f16_16x16x16_f16": ("f16", "f16"), "v_wmma_bf16_16x16x16_bf16": ("bf16", "bf16"),
    "v_wmma_i32_16x16x16_iu8": ("iu8", "i32"), "v_wmma_i32_16x16x16_iu4": ("iu4", "i32"),
}


def _matrix_in(v: np.ndarray, base: int, kind: str, signed: bool) -> np.ndarray:
    """The 16x16 operand held by lanes 0-15 at VGPR ``base``: row (A) or column (B) l of lane l, as an object
    array of exact integers (16-bit floats: units of their smallest subnormal; integers: values) for the
    float kinds, or a float64 array for the non-finite check."""
    if kind in ("f16", "bf16"):
        regs = v[base:base + 8, :16]                                         # (8, 16)
        h = np.stack([regs & U32(0xFFFF), regs >> U32(16)], axis=1).reshape(16, 16).T.astype(U16)   # [lane, k]
        return h
    bits = 8 if kind == "iu8" else 4
    per = 32 // bits
    regs = v[base:base + 16 // per, :16]
    els = [((regs[k // per] >> U32(bits * (k % per))) & U32((1 << bits) - 1)).astype(I64) for k in range(16)]
    m = np.stack(els, axis=1)                                                   # [lane, k]
    if signed:
        m = np.where(m >> (bits - 1) & 1, m - (1 << bits), m)
    return m


def _half_ints(h: np.ndarray, bf: bool) -> tuple[np.ndarray, int]:
    """16-bit float bits -> (object array of exact integers, scale exponent E: value = n * 2**-E)."""
    mb, eb = (7, 8) if bf else (10, 5)
    bias = (1 << (eb - 1)) - 1
    e_min_scale = bias - 1 + mb                     # the smallest subnormal is 2**-(bias - 1 + mb)
    u = h.astype(np.int64)
    sign = u >> (mb + eb) & 1
    exp = u >> mb & ((1 << eb) - 1)
    man = u & ((1 << mb) - 1)
    mag = np.where(exp == 0, man, man | (1 << mb)).astype(object)
    sh = np.where(exp == 0, 0, exp - 1)
    out = np.empty(h.shape, dtype=object)
    for idx in np.ndindex(h.shape):
        n = int(mag[idx]) << int(sh[idx])
        out[idx] = -n if sign[idx] else n
    return out, e_min_scale


def _compile_wmma(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """v_wmma_*_16x16x16_*: D = A * B + C in gfx11 wave32's register layout (see the module text)."""
    f, m = inst.fields, inst.mnemonic
    if m not in _WMMA:
        raise bad("WMMA opcode not modelled")
    kin, kout = _WMMA[m]
    sel, sel_hi, neg_lo, neg_hi = _vop3p_fields(f)
    for i in range(3):
        if f[f"src{i}"] < 256:
            raise bad("a WMMA operand that is not a VGPR range")
    a0, b0, c0, d0 = f["src0"] - 256, f["src1"] - 256, f["src2"] - 256, f["vdst"]
    is_int = kout == "i32"
    if is_int:
        if neg_hi or neg_lo & 4 or sel:
            raise bad("neg_hi/op_sel on an integer WMMA")
    elif f["clamp"] or neg_lo & 4 or neg_hi & 4 or sel & 3:
        raise bad("clamp, C modifiers or A/B op_sel on a float WMMA")
    half_out = kout in ("f16", "bf16")
    hi = sel >> 2 & 1
    clamp = bool(f["clamp"])
    del sel_hi

    def run(w: Wave) -> None:
        if w.s[EXEC] != M32:
            raise bad("WMMA with EXEC not all ones (the ISA requires every lane)")
        v = w.v
        if is_int:
            av = _matrix_in(v, a0, kin, bool(neg_lo & 1))
            bv = _matrix_in(v, b0, kin, bool(neg_lo & 2))
            cm = _c_layout(v[c0:c0 + 8].view(np.int32).astype(I64))
            r = av @ bv.T + cm                                           # exact in int64 (|sum| < 2**47)
            r = np.clip(r, -(1 << 31), (1 << 31) - 1) if clamp else r
            _d_store(w, d0, (r & M32).astype(U32), None)
            return
        bf = kin == "bf16"
        ah, bh = _matrix_in(v, a0, kin, False), _matrix_in(v, b0, kin, False)
        ah = _neg_halves(ah, neg_lo & 1, neg_hi & 1)
        bh = _neg_halves(bh, neg_lo >> 1 & 1, neg_hi >> 1 & 1)
        if half_out:
            craw = _c_layout(((v[c0:c0 + 8] >> U32(16)) if hi else v[c0:c0 + 8]).astype(U16))
            cf = _to64(craw, kout == "bf16")
        else:
            cf = _c_layout(v[c0:c0 + 8]).view(F32).astype(F64)
        af, bfv = _to64(ah, bf), _to64(bh, bf)
        with np.errstate(all="ignore"):
            approx = af @ bfv.T + cf                                        # float64: for the non-finite cases
        ai, e_ab = _half_ints(ah, bf)
        bi, _ = _half_ints(bh, bf)
        prod = ai.dot(bi.T)                                                  # exact, scale 2**-(2 * e_ab)
        out_fmt = kout
        rnd = rounding.mode_of(w.mode, "f" if kout == "f32" else "h")
        res = np.empty((16, 16), dtype=np.int64)
        finite = np.isfinite(af).all(axis=1)[:, None] & np.isfinite(bfv).all(axis=1)[None, :] & np.isfinite(cf)
        for i in range(16):
            for j in range(16):
                if not finite[i, j]:
                    res[i, j] = _nonfinite_bits(approx[i, j], out_fmt)
                    continue
                cfr = Fraction(float(cf[i, j]))
                scale = max(2 * e_ab, 149 if out_fmt == "f32" else 2 * e_ab)
                ce = cfr * (1 << scale)
                assert ce.denominator == 1
                n = int(prod[i, j]) * (1 << (scale - 2 * e_ab)) + int(ce)
                if n == 0:
                    res[i, j] = int(rnd == rounding.DOWN) << (15 if half_out else 31)
                elif rnd:
                    res[i, j] = rounding.round_bits(Fraction(n, 1 << scale), _KIND[out_fmt], rnd)
                else:
                    res[i, j] = round_scaled(n, scale, out_fmt)
        if half_out:
            _d_store(w, d0, res.astype(np.uint32), hi)
        else:
            _d_store(w, d0, res.astype(np.uint32), None)
    return run


def _neg_halves(h: np.ndarray, neg_lo: int, neg_hi: int) -> np.ndarray:
    """NEG_LO / NEG_HI on a 16-bit float matrix operand: negate the elements held in the low (even k) / high (odd
    k) halves of its VGPRs."""
    h = h.copy()
    if neg_lo:
        h[:, 0::2] ^= U16(0x8000)
    if neg_hi:
        h[:, 1::2] ^= U16(0x8000)
    return h


def _c_layout(regs: np.ndarray) -> np.ndarray:
    """8 VGPRs x 32 lanes -> the 16x16 matrix: VGPR j of lane l is element (2j + l // 16, l % 16)."""
    out = np.empty((16, 16), dtype=regs.dtype)
    out[0::2, :] = regs[:, :16]
    out[1::2, :] = regs[:, 16:]
    return out


def _d_store(w: Wave, d0: int, mat: np.ndarray, hi: int | None) -> None:
    """Write the 16x16 result (uint32 bits, or 16-bit bits into one half) in the C/D layout."""
    for j in range(8):
        row = np.concatenate([mat[2 * j], mat[2 * j + 1]]).astype(U32)
        if hi is None:
            w.v[d0 + j] = row
        elif hi:
            w.v[d0 + j] = (w.v[d0 + j] & U32(0xFFFF)) | (row & U32(0xFFFF)) << U32(16)
        else:
            w.v[d0 + j] = (w.v[d0 + j] & U32(0xFFFF0000)) | (row & U32(0xFFFF))


def _nonfinite_bits(x: float, fmt: str) -> int:
    """The bits of an infinite or NaN float64 in ``fmt`` (NaN: the default quiet NaN)."""
    mb, eb = _FMT[fmt]
    if np.isnan(x):
        return ((1 << eb) - 1) << mb | 1 << (mb - 1)
    return (1 if x < 0 else 0) << (mb + eb) | ((1 << eb) - 1) << mb      # an operand was infinite or NaN
