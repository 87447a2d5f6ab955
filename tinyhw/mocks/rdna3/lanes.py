"""Cross-lane operations: DPP16/DPP8 sources, v_permlane*, ds_swizzle/permute/bpermute and VINTERP.

Written from the RDNA3 ISA reference ("Data Parallel Processing", the DPP16/DPP8 microcode formats and the
instruction pseudocode) and LLVM's AMDGPU modifier syntax (``bound_ctrl``, ``fi``), for facts only.

DPP is a transform of a VALU instruction's first source: the instruction compiles through the same path as its
plain form (:func:`compile_dpp` hands the VALU compiler a getter for SRC0), and the lanes DPP disables (row and
bank masks, an invalid source lane without ``bound_ctrl``) are taken out of EXEC for that one instruction, so
every destination write (VGPR, VCC, an SGPR mask) sees them as inactive lanes (the guide: "For VOPC, the SGPR/VCC
bit associated with the disabled lane receives zero"). Invalid DPP16 sources follow the guide's "BC and FI
Behavior" table: a source outside the lane's row of 16 (``row_shl``/``row_shr``) reads 0, or disables the write
when neither ``bound_ctrl`` nor ``fi`` is set; an inactive source lane is read with ``fi``, reads 0 with
``bound_ctrl`` alone, and disables the write with neither. (The table calls the out-of-range case with both bits
set "normal" and the FI field's text says bound_ctrl decides it; the model reads 0 there, what the shifted-in
lane carries with ``bound_ctrl`` alone.) DPP8 behaves as DPP16 with ``bound_ctrl`` and every source in range:
an inactive source reads 0 unless ``fi`` (the DPP8FI source form) is set.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from fractions import Fraction
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import fp, rounding
from tinyhw.mocks.rdna3.state import EXEC, FULL, M32, Wave, bits_to_int, s_get, v_put

__all__ = ["COMPILERS", "compile_dpp", "compile_vinterp", "dpp16_lanes", "dpp8_lanes", "swizzle_lanes"]

Fn = Callable[[Wave], Any]
Bad = Callable[[str], Exception]
U32 = np.uint32
_L = np.arange(32)
_ZERO = np.zeros(32, dtype=U32)


def dpp16_lanes(ctrl: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(source lane of each lane, in-row mask) for a DPP16 DPP_CTRL value, None for a control gfx11 reserves
    (the wave shifts and rotates, row broadcasts, and the shifts by 0)."""
    r, base = _L % 16, _L & ~15
    inrow = np.ones(32, dtype=bool)
    n = ctrl & 0xF
    if ctrl <= 0xFF:                                    # quad_perm: lane selects within each quad
        src = (_L & ~3) | (ctrl >> (2 * (_L & 3)) & 3)
        return src, inrow
    if 0x101 <= ctrl <= 0x10F:                          # row_shl: lane l reads lane l + n of its row
        s = r + n
        inrow = s < 16
    elif 0x111 <= ctrl <= 0x11F:                        # row_shr: lane l reads lane l - n of its row
        s = r - n
        inrow = s >= 0
    elif 0x121 <= ctrl <= 0x12F:                        # row_ror: rotate right within the row
        s = (r - n) % 16
    elif ctrl == 0x140:                                 # row_mirror
        s = 15 - r
    elif ctrl == 0x141:                                 # row_half_mirror: mirror within each half row
        s = (r & 8) | (7 - (r & 7))
    elif 0x150 <= ctrl <= 0x15F:                        # row_share: every lane reads lane n of its row
        s = np.full(32, n)
    elif 0x160 <= ctrl <= 0x16F:                        # row_xmask: lane l reads lane l ^ n of its row
        s = r ^ n
    else:
        return None
    return base | (s & 15), inrow


def dpp8_lanes(sel: int) -> np.ndarray:
    """The source lane of each lane for a DPP8 selector (eight 3-bit lane selects, repeated per group of 8)."""
    return (_L & ~7) | (sel >> (3 * (_L & 7)) & 7)


def _gather(src: np.ndarray, fi: bool, bc: bool, static: int, inrow: np.ndarray | None) -> Any:
    """A function of (wave, the source register's lanes) -> (the lanes' source values, the lanes allowed to write),
    the guide's BC/FI table (DPP16): a source lane outside the lane's row reads 0, and disables the lane's write
    when neither ``bc`` nor ``fi`` is set; an inactive source lane in the row is read with ``fi``, else reads 0
    with ``bc``, else disables the write. ``static`` is the row/bank write mask. DPP8 is ``bc`` with every source
    in range."""
    allin = inrow is None or bool(inrow.all())
    oor_zero = None if allin else ~inrow               # lanes whose source is outside their row

    def run(w: Wave, reg: np.ndarray) -> tuple[np.ndarray, int]:
        e = w.s[EXEC]
        val = reg[src]
        enable = e & static
        if fi or e == FULL:
            bad_src = oor_zero
        else:
            act = w.mask()[src]
            bad_src = ~act if allin else (~act | oor_zero)
        if bad_src is None:
            return val, enable
        if not bc and not fi:              # invalid sources disable the lane's write (its value is not used)
            return val, enable & ~bits_to_int(bad_src) & FULL
        return np.where(bad_src, _ZERO, val), enable
    return run


def compile_dpp(inst: Any, bad: Bad, compile_plain: Callable[[Any, Callable[[Wave], np.ndarray]], Fn]) -> Fn:
    """Compile a VOP1/VOP2/VOPC/VOP3 instruction with a DPP16 or DPP8 source: ``compile_plain(inst, src0)``
    compiles the plain form (mnemonic without ``_dpp``) reading SRC0 through the given getter; this wraps it with
    the lane selection and the write mask (see the module text)."""
    f = inst.fields
    reg = f["src0"] - 256
    if f["dpp"] == 8:
        src = dpp8_lanes(f["dpp8"])
        gather = _gather(src, bool(f["fi"]), True, FULL, None)
    else:
        sel = dpp16_lanes(f["dpp_ctrl"])
        if sel is None:
            raise bad(f"DPP control 0x{f['dpp_ctrl']:x} (reserved on gfx11)")
        src, inrow = sel
        rows = (f["row_mask"] >> (_L >> 4)) & 1
        banks = (f["bank_mask"] >> ((_L >> 2) & 3)) & 1
        static = bits_to_int((rows & banks).astype(bool))
        gather = _gather(src, bool(f["fi"]), bool(f["bound_ctrl"]), static, inrow)
    name = inst.mnemonic.removesuffix("_dpp")
    writes_exec = name.startswith("v_cmpx") or (inst.encoding == "VOP3" and name.startswith("v_cmp")
                                                and f.get("vdst") == EXEC)
    vals: dict[int, np.ndarray] = {}     # the running wave's selected SRC0 lanes (by wave identity)

    def src0(w: Wave) -> np.ndarray:
        return vals[id(w)]

    inner = compile_plain(replace(inst, mnemonic=name), src0)

    def run(w: Wave) -> Any:
        val, enable = gather(w, w.v[reg])
        k = id(w)
        vals[k] = val
        old = w.s[EXEC]
        w.s[EXEC] = enable
        try:
            r = inner(w)
        finally:
            del vals[k]
            if not writes_exec:
                w.s[EXEC] = old
        return r
    return run


# ---- VOP3 / VOP1 lane permutes ------------------------------------------------------------------------------------

def _compile_permlane(inst: Any, bad: Bad) -> Fn:
    """v_permlane16_b32 / v_permlanex16_b32: lane l reads the lane its 4-bit select (nibble l % 16 of {S2, S1})
    names in its own row (permlane16) or the other row (permlanex16); OP_SEL[0] is FI (read inactive lanes),
    OP_SEL[1] BOUND_CTRL (an inactive source reads 0 instead of leaving the lane unwritten)."""
    f = inst.fields
    if f["src0"] < 256:
        raise bad("v_permlane of a non-VGPR source")
    if f["clamp"] or f["omod"] or f["neg"] or f["abs"] or f["opsel"] & ~3:
        raise bad("modifiers on v_permlane")
    reg, d = f["src0"] - 256, f["vdst"]
    lo, hi = s_get(f["src1"], f.get("literal"), bad), s_get(f["src2"], f.get("literal"), bad)
    fi, bc = bool(f["opsel"] & 1), bool(f["opsel"] & 2)
    cross = inst.mnemonic.startswith("v_permlanex16")
    rowbase = (_L & ~15) ^ (16 if cross else 0)

    def run(w: Wave) -> None:
        sel = (lo(w) & M32) | (hi(w) & M32) << 32
        nib = np.array([sel >> (4 * i) & 0xF for i in range(16)], dtype=np.int64)
        src = rowbase | nib[_L & 15]
        val = w.v[reg][src]
        e = w.s[EXEC]
        if fi or e == FULL:
            v_put(w, d, val)
            return
        valid = w.mask()[src]
        if bc:
            v_put(w, d, np.where(valid, val, _ZERO))
            return
        old = w.s[EXEC]
        w.s[EXEC] = e & bits_to_int(valid)
        try:
            v_put(w, d, val)
        finally:
            w.s[EXEC] = old
    return run


def _compile_permlane64(inst: Any, bad: Bad) -> Fn:
    """v_permlane64_b32 swaps the halves of a wave64; the guide says it does nothing in wave32."""
    return lambda w: None


# ---- DS lane permutes -----------------------------------------------------------------------------------------------

def _rev5(x: np.ndarray) -> np.ndarray:
    """The 5-bit reversal of each value."""
    return sum(((x >> b) & 1) << (4 - b) for b in range(5))


def swizzle_lanes(offset: int) -> np.ndarray:
    """The source lane of each lane for a ds_swizzle_b32 offset (the guide's pseudocode, within each group of 32):
    FFT mode (offset >= 0xE000: the 5-bit reversal of the lane shifted right by the number of bits set in the mask
    offset[4:0], OR the lane's masked bits), rotate mode (from 0xC000: by offset[9:5] lanes, to the left unless
    offset[10], the lane bits the mask offset[4:0] selects kept), quad mode (offset[15]: offset[7:0] holds four
    2-bit lane selects within each quad) or bitmask mode (lane ((l & and) | or) ^ xor, the AND, OR and XOR masks
    in offset[4:0], [9:5], [14:10])."""
    if offset >= 0xE000:
        mask = offset & 0x1F
        return (_rev5(_L) >> bin(mask).count("1")) | (_L & mask)
    if offset >= 0xC000:
        mask, rot = offset & 0x1F, offset >> 5 & 0x1F
        if offset >> 10 & 1:
            rot = -rot
        return ((_L & mask) | ((_L + rot) & ~mask)) & 0x1F
    if offset >> 15:
        return (_L & ~3) | (offset >> (2 * (_L & 3)) & 3)
    a, o, x = offset & 0x1F, offset >> 5 & 0x1F, offset >> 10 & 0x1F
    return ((_L & a) | o) ^ x


def _compile_ds_lane(inst: Any, bad: Bad) -> Fn:
    """ds_swizzle_b32, ds_permute_b32 (lane (ADDR + OFFSET) / 4 receives the lane's DATA0; the highest lane wins)
    and ds_bpermute_b32 (the lane reads DATA0 of lane (ADDR + OFFSET) / 4): modulo 32 lanes in wave32; a source
    lane that is inactive gives 0; only active lanes are written. No LDS memory is touched."""
    f, m = inst.fields, inst.mnemonic
    if f["gds"]:
        raise bad("GDS is not modelled")
    off, va, vd, d0 = f["offset1"] << 8 | f["offset0"], f["addr"], f["vdst"], f["data0"]
    if m == "ds_swizzle_b32":
        src = swizzle_lanes(off)

        def swizzle(w: Wave) -> None:
            act = w.mask()
            v_put(w, vd, np.where(act[src], w.v[va][src], _ZERO))
        return swizzle
    if m == "ds_bpermute_b32":
        def bpermute(w: Wave) -> None:
            lane = ((w.v[va].astype(np.int64) + off) >> 2) & 31
            v_put(w, vd, np.where(w.mask()[lane], w.v[d0][lane], _ZERO))
        return bpermute

    def permute(w: Wave) -> None:
        act = w.mask()
        lane = ((w.v[va].astype(np.int64) + off) >> 2) & 31
        tmp = np.zeros(32, dtype=U32)
        order = np.flatnonzero(act)[::-1]    # active lanes, highest first: the highest writer of a lane wins
        dst, first = np.unique(lane[order], return_index=True)
        tmp[dst] = w.v[d0][order[first]]
        v_put(w, vd, tmp)
    return permute


# ---- VINTERP --------------------------------------------------------------------------------------------------------

_QUAD = _L & ~3
_FMT = {16: (10, 5), 32: (23, 8)}


def _rtz_bits(x: Fraction, bits: int) -> int:
    """The exact nonzero rational ``x`` rounded toward zero to an f16/f32 bit pattern (past the range: the largest
    finite value of that sign)."""
    mbits, ebits = _FMT[bits]
    bias = (1 << (ebits - 1)) - 1
    sign = int(x < 0)
    a = -x if sign else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, 1 - bias)
    n = int(a / Fraction(2) ** (e - mbits))      # truncated significand
    if e > bias:
        return sign << (bits - 1) | ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1)
    if n >> mbits:
        return sign << (bits - 1) | (e + bias) << mbits | (n & ((1 << mbits) - 1))
    return sign << (bits - 1) | n


def _exact(u: int, bits: int) -> Fraction:
    """The exact value of finite f16/f32 bits."""
    mbits, ebits = _FMT[bits]
    bias = (1 << (ebits - 1)) - 1
    e, m = u >> mbits & ((1 << ebits) - 1), u & ((1 << mbits) - 1)
    v = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0 else (1 + Fraction(m, 1 << mbits)) * \
        Fraction(2) ** (e - bias)
    return -v if u >> (bits - 1) & 1 else v


def _fma_rtz(a: np.ndarray, b: np.ndarray, c: np.ndarray, rne: np.ndarray, out: int) -> np.ndarray:
    """a * b + c (f32 bit arrays) rounded once toward zero to f32 (``out`` 32) or f16 (16) bits; lanes with a
    non-finite operand or an exactly zero result take ``rne`` (the round-to-nearest result, the same there)."""
    r = rne.astype(np.uint32).tolist()
    for i, (x, y, z) in enumerate(zip(a.tolist(), b.tolist(), c.tolist(), strict=True)):
        if any((v >> 23 & 0xFF) == 0xFF for v in (x, y, z)):
            continue
        t = _exact(x, 32) * _exact(y, 32) + _exact(z, 32)
        if t:
            r[i] = _rtz_bits(t, out)
    return np.array(r, dtype=U32)


def compile_vinterp(inst: Any, bad: Bad) -> Fn:
    """VINTERP: a fused multiply-add whose S0 (and for the P10 forms S2) is read from a fixed lane of the lane's quad
    (the guide's fixed DPP8 selects): v_interp_p10_f32 D = S0[quad lane 1] * S1 + S2[quad lane 0];
    v_interp_p2_f32 D = S0[quad lane 2] * S1 + S2; the _f16_f32 forms read S0 (and S2 of P10) as f16 (OP_SEL
    picks the half), P10 writes f32 and P2 an f16 (``16'F`` of the f32 result, OP_SEL[3] the half written, the
    other half kept); the _rtz forms round toward zero (once: truncating to f32 then to f16 is truncating to
    f16). NEG negates a source, CLAMP clamps to [0, 1]; WAIT_EXP waits for exports (none in compute). Denormals
    follow MODE.FP_DENORM. A directed MODE round mode rounds the fused multiply-add in the f32 field's direction
    and P2's conversion to f16 in the f16 field's (the two roundings the pseudocode writes); the _rtz forms round
    toward zero in every mode."""
    f, m = inst.fields, inst.mnemonic
    for i in range(3):
        if f[f"src{i}"] < 256:
            raise bad("VINTERP source that is not a VGPR")
    r0, r1, r2 = (f[f"src{i}"] - 256 for i in range(3))
    p10 = m.startswith("v_interp_p10")
    half = "f16" in m
    rtz = "rtz" in m
    sel = f["opsel"]
    if not half and sel:
        raise bad("op_sel on an f32 VINTERP")
    lane0 = _QUAD + (1 if p10 else 2)
    h0, h2, hd = sel & 1, bool(sel >> 2 & 1) and p10, sel >> 3 & 1
    neg = [U32(0x80000000 if f["neg"] >> i & 1 else 0) for i in range(3)]
    clamp, d = bool(f["clamp"]), f["vdst"]
    out16 = half and not p10

    def f16_to_f32(x: np.ndarray, hi: int, flush: bool) -> np.ndarray:
        h = (x >> U32(16) if hi else x).astype(np.uint16)
        if flush:
            h = fp.flush_bits(h)
        return h.view(np.float16).astype(np.float32).view(U32)

    def run(w: Wave) -> None:
        mode = w.mode
        rnd32, rnd16 = rounding.mode_of(mode, "f"), rounding.mode_of(mode, "h")
        fl32, fl16 = not (mode >> 4 & 1), not (mode >> 6 & 1)
        a = w.v[r0][lane0]
        c = w.v[r2][_QUAD] if p10 else w.v[r2]
        if half:
            a = f16_to_f32(a, h0, fl16)
            if p10:
                c = f16_to_f32(c, h2, fl16)
        b = w.v[r1]
        a, b, c = a ^ neg[0], b ^ neg[1], c ^ neg[2]
        if fl32:
            b = fp.flush_bits(b)
            if not half:
                a, c = fp.flush_bits(a), fp.flush_bits(c)
            elif not p10:
                c = fp.flush_bits(c)
        r = np.asarray(fp.fma32(a.view(np.float32), b.view(np.float32), c.view(np.float32)), dtype=np.float32)
        if rnd32 and not rtz:
            r = rounding.fma_lanes(a.view(np.float32), b.view(np.float32), c.view(np.float32), r.view(U32), "f",
                                   rnd32).view(np.float32)
        if out16:
            u = r.astype(np.float16).view(np.uint16).astype(U32)
            if rtz:
                u = _fma_rtz(a, b, c, u, 16)
            elif rnd16:
                u = rounding.directed("v_cvt_f16_f32", "f", "h", (r.view(U32),), u.astype(np.uint16),
                                      rnd16).astype(U32)
            x = u.astype(np.uint16).view(np.float16)
            ft, ut = np.float16, np.uint16
        else:
            u = r.view(U32)
            if rtz:
                u = _fma_rtz(a, b, c, u, 32)
            x = u.view(np.float32)
            ft, ut = np.float32, U32
        if clamp:      # [0, 1]; NaN gives 0 under MODE.DX10_CLAMP and stays NaN without it
            cl = np.where(x > 1, ft(1.0), np.where(x > 0, x, ft(0.0))).astype(ft)
            x = cl if mode >> 8 & 1 else np.where(np.isnan(x), x, cl)
        u = np.asarray(x, dtype=ft).view(ut)
        if not (mode >> (7 if out16 else 5) & 1):
            u = fp.flush_bits(u)
        if out16:
            keep = w.v[d] & U32(0x0000FFFF if hd else 0xFFFF0000)
            u = keep | (u.astype(U32) << U32(16 if hd else 0))
        v_put(w, d, u.astype(U32))
    return run


#: mnemonic -> compiler, for the cross-lane instructions the VALU/DS compilers do not handle
COMPILERS: dict[str, Callable[[Any, Bad], Fn]] = {
    "v_permlane16_b32": _compile_permlane, "v_permlanex16_b32": _compile_permlane,
    "v_permlane64_b32": _compile_permlane64,
    "ds_swizzle_b32": _compile_ds_lane, "ds_permute_b32": _compile_ds_lane, "ds_bpermute_b32": _compile_ds_lane,
}
