"""Cross-lane operations: DPP16/DPP8 sources, v_permlane*, ds_swizzle/permute/bpermute and VINTERP.

Written from the RDNA3 ISA reference ("Data Parallel Processing", the DPP16/DPP8 microcode formats and the
instruction pseudocode) and LLVM's AMDGPU modifier syntax (``bound_ctrl``, ``fi``), for facts only.

DPP is a transform of a VALU instruction's first source: the instruction compiles through the same path as its
plain form (:func:`compile_dpp` hands the VALU compiler a getter for SRC0), and the lanes DPP disables (row and
bank masks, an invalid source lane without ``bound_ctrl``) are taken out of EXEC for that one instruction, so
every destination write (VGPR, VCC, an SGPR mask) sees them as inactive lanes. For DPP16 a source lane is invalid
when the control selects a lane outside its row (``row_shl``/``row_shr``) or, without ``fi`` (fetch inactive), a
lane whose EXEC bit is clear; an invalid source reads 0 with ``bound_ctrl:1`` and disables the lane's write
without it. DPP8 has no bounds: an inactive source lane reads 0 unless ``fi`` is set (model's reading of the
guide's FI description).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import fp
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


def _gather(src: np.ndarray, fi: bool, bc: bool, static: int, inrow: np.ndarray | None, wave_bits: bool) -> Any:
    """A function of (wave, the source register's lanes) -> (the lanes' source values, the lanes allowed to
    write): source lane ``src[l]``; a source is invalid when outside its row or (without ``fi``) inactive; an
    invalid source reads 0 (``bc``) or disables the lane (otherwise); ``static`` is the row/bank write mask."""
    allin = inrow is None or bool(inrow.all())

    def run(w: Wave, reg: np.ndarray) -> tuple[np.ndarray, int]:
        e = w.s[EXEC]
        val = reg[src]
        if fi or e == FULL:
            valid = inrow if not allin else None
        else:
            act = w.mask()[src]
            valid = act if allin else (act & inrow)
        if valid is None:
            return val, e & static
        if bc or wave_bits:
            return np.where(valid, val, _ZERO), e & static
        return val, e & static & bits_to_int(valid)
    return run


def compile_dpp(inst: Any, bad: Bad, compile_plain: Callable[[Any, Callable[[Wave], np.ndarray]], Fn]) -> Fn:
    """Compile a VOP1/VOP2/VOPC/VOP3 instruction with a DPP16 or DPP8 source: ``compile_plain(inst, src0)``
    compiles the plain form (mnemonic without ``_dpp``) reading SRC0 through the given getter; this wraps it with
    the lane selection and the write mask (see the module text)."""
    f = inst.fields
    reg = f["src0"] - 256
    if f["dpp"] == 8:
        src = dpp8_lanes(f["dpp8"])
        gather = _gather(src, bool(f["fi"]), True, FULL, None, True)
    else:
        sel = dpp16_lanes(f["dpp_ctrl"])
        if sel is None:
            raise bad(f"DPP control 0x{f['dpp_ctrl']:x} (reserved on gfx11)")
        src, inrow = sel
        rows = (f["row_mask"] >> (_L >> 4)) & 1
        banks = (f["bank_mask"] >> ((_L >> 2) & 3)) & 1
        static = bits_to_int((rows & banks).astype(bool))
        gather = _gather(src, bool(f["fi"]), bool(f["bound_ctrl"]), static, inrow, False)
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

def swizzle_lanes(offset: int) -> np.ndarray | None:
    """The source lane of each lane for a ds_swizzle_b32 offset: quad-permute mode (offset[15] = 1: offset[7:0]
    holds four 2-bit lane selects within each quad) or bitmask mode (offset[15] = 0: lane ((l & and) | or) ^ xor
    with the AND, OR and XOR masks in offset[4:0], [9:5], [14:10]); None for offsets from 0xC000 (the FFT and
    rotate modes of older guides: not modelled)."""
    if offset >= 0xC000:
        return None
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
        if src is None:
            raise bad(f"ds_swizzle_b32 offset 0x{off:x} (FFT/rotate modes)")

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
        idx = np.flatnonzero(act)
        tmp[lane[idx]] = w.v[d0][idx]        # numpy assigns in index order: the highest lane wins
        v_put(w, vd, tmp)
    return permute


# ---- VINTERP --------------------------------------------------------------------------------------------------------

_QUAD = _L & ~3


def compile_vinterp(inst: Any, bad: Bad) -> Fn:
    """v_interp_p10_f32 (D = fma(S0 of the quad's lane 1, S1, S2 of the quad's lane 0)) and v_interp_p2_f32
    (D = fma(S0 of the quad's lane 2, S1, S2)), one rounding; NEG negates a source, CLAMP clamps to [0, 1];
    WAIT_EXP waits for exports (none in compute: no effect). The f16 forms are not modelled."""
    f, m = inst.fields, inst.mnemonic
    if m not in ("v_interp_p10_f32", "v_interp_p2_f32"):
        raise bad("the f16 VINTERP forms are not modelled")
    if f["opsel"]:
        raise bad("op_sel on an f32 VINTERP")
    for i in range(3):
        if f[f"src{i}"] < 256:
            raise bad("VINTERP source that is not a VGPR")
    r0, r1, r2 = (f[f"src{i}"] - 256 for i in range(3))
    p10 = m == "v_interp_p10_f32"
    lane0 = _QUAD + (1 if p10 else 2)
    neg = [U32(0x80000000 if f["neg"] >> i & 1 else 0) for i in range(3)]
    clamp, d = bool(f["clamp"]), f["vdst"]

    def run(w: Wave) -> None:
        a = w.v[r0][lane0] ^ neg[0]
        b = w.v[r1] ^ neg[1]
        c = (w.v[r2][_QUAD] if p10 else w.v[r2]) ^ neg[2]
        if not (w.mode >> 4 & 1):
            a, b, c = fp.flush_bits(a), fp.flush_bits(b), fp.flush_bits(c)
        if w.mode & 3:
            raise bad("MODE round mode other than nearest even on VINTERP")
        r = fp.fma32(a.view(np.float32), b.view(np.float32), c.view(np.float32))
        if clamp:      # [0, 1]; NaN gives 0 under MODE.DX10_CLAMP and stays NaN without it
            c = np.where(r > 1, np.float32(1.0), np.where(r > 0, r, np.float32(0.0))).astype(np.float32)
            r = c if w.mode >> 8 & 1 else np.where(np.isnan(r), r, c)
        u = np.asarray(r, dtype=np.float32).view(U32)
        if not (w.mode >> 5 & 1):
            u = fp.flush_bits(u)
        v_put(w, d, u)
    return run


#: mnemonic -> compiler, for the cross-lane instructions the VALU/DS compilers do not handle
COMPILERS: dict[str, Callable[[Any, Bad], Fn]] = {
    "v_permlane16_b32": _compile_permlane, "v_permlanex16_b32": _compile_permlane,
    "v_permlane64_b32": _compile_permlane64,
    "ds_swizzle_b32": _compile_ds_lane, "ds_permute_b32": _compile_ds_lane, "ds_bpermute_b32": _compile_ds_lane,
}
