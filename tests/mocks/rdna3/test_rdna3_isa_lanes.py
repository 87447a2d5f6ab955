"""Table tests of the shader core's cross-lane instructions: DPP16/DPP8 sources, v_permlane*, ds_swizzle/permute/
bpermute and VINTERP.

Programs are assembled by llvm-mc-19 (gfx1100), decoded and compiled by the core and run on one wave. Every
expected value is computed here from the RDNA3 ISA reference's definitions over plain Python lane lists (lane
loops, ``struct`` for IEEE values), never by the core.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess

import pytest
from rdna3isa import exact, f16, f32, from16, from32, round_float, run, wave

from tinyhw.formats.rdna3_ops import OPS

LLVM_MC = shutil.which("llvm-mc-19")
needs_llvm = pytest.mark.skipif(LLVM_MC is None, reason="llvm-mc-19 is not installed")
EXEC, VCC = 126, 106
FULL = 0xFFFFFFFF


def assemble(lines: list[str]) -> list[list[int]]:
    """The instruction words llvm-mc-19 encodes for each line (one instruction per line)."""
    assert LLVM_MC is not None
    r = subprocess.run([LLVM_MC, "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"], input="\n".join(lines) + "\n",
                       capture_output=True, text=True, check=True)
    assert not r.stderr.strip(), r.stderr
    out = []
    for m in re.finditer(r"encoding: \[([^\]]*)\]", r.stdout):
        raw = bytes(int(b, 16) for b in m.group(1).split(","))
        out.append(list(struct.unpack(f"<{len(raw) // 4}I", raw)))
    assert len(out) == len(lines)
    return out


def _set(w, n: int, vals: list[int]) -> None:
    w.v[n, :len(vals)] = vals


def _get(w, n: int) -> list[int]:
    return [int(x) for x in w.v[n]]


def _on(mask: int, lane: int) -> bool:
    return bool(mask >> lane & 1)


# ---- the DPP16 reference: where each lane reads, from the control's definition ------------------------------------

def ref_source(ctrl: str, n: int, lane: int) -> int | None:
    """The lane that ``lane`` reads for the DPP16 control (``None`` when it falls outside the lane's row of 16)."""
    row, r = lane // 16 * 16, lane % 16
    if ctrl == "quad_perm":
        return lane // 4 * 4 + (n >> (2 * (lane % 4)) & 3)
    if ctrl == "row_shl":
        return row + r + n if r + n <= 15 else None
    if ctrl == "row_shr":
        return row + r - n if r - n >= 0 else None
    if ctrl == "row_ror":
        return row + (r + 16 - n) % 16
    if ctrl == "row_mirror":
        return row + 15 - r
    if ctrl == "row_half_mirror":
        return row + (r // 8) * 8 + 7 - r % 8
    if ctrl == "row_share":
        return row + n
    if ctrl == "row_xmask":
        return row + (r ^ n)
    raise AssertionError(ctrl)


def ref_dpp16(ctrl: str, n: int, src: list[int], old: list[int], exec_: int, row_mask: int, bank_mask: int,
              bc: int, fi: int) -> list[int]:
    """v_mov_b32_dpp per lane, the guide's BC/FI table: inactive or masked lanes keep the old value; a source outside
    the row gives 0 (the lane is left alone when neither bound_ctrl nor fi is set); an inactive source is read with
    fi, gives 0 with bound_ctrl alone, and leaves the lane alone with neither."""
    out = []
    for lane in range(32):
        if not _on(exec_, lane) or not _on(row_mask, lane // 16) or not _on(bank_mask, lane % 16 // 4):
            out.append(old[lane])
            continue
        s = ref_source(ctrl, n, lane)
        if s is None:
            out.append(0 if bc or fi else old[lane])
        elif fi or _on(exec_, s):
            out.append(src[s])
        else:
            out.append(0 if bc else old[lane])
    return out


def _ctrl_text(ctrl: str, n: int) -> str:
    if ctrl == "quad_perm":
        return "quad_perm:[" + ",".join(str(n >> (2 * i) & 3) for i in range(4)) + "]"
    if ctrl in ("row_mirror", "row_half_mirror"):
        return ctrl
    return f"{ctrl}:{n}"


CONTROLS = ([("quad_perm", q) for q in (0xE4, 0x1B, 0x00, 0xFF, 0x4E, 0xB1, 0x39, 0x93)]
            + [(c, n) for c in ("row_shl", "row_shr", "row_ror") for n in range(1, 16)]
            + [("row_mirror", 0), ("row_half_mirror", 0)]
            + [(c, n) for c in ("row_share", "row_xmask") for n in range(16)])
SRC = [0x1000 + 17 * i for i in range(32)]
OLD = [0xAAAA0000 + i for i in range(32)]


@needs_llvm
@pytest.mark.parametrize("exec_", [FULL, 0x7FFE_EF6D])
def test_dpp16_mov_every_control_bound_ctrl_fi_and_masks(exec_: int) -> None:
    cases = [(c, n, bc, fi, rm, bm) for c, n in CONTROLS for bc in (0, 1) for fi in (0, 1)
             for rm, bm in ((0xF, 0xF), (0x5, 0xA))]
    words = assemble([f"v_mov_b32_dpp v3, v1 {_ctrl_text(c, n)} row_mask:0x{rm:x} bank_mask:0x{bm:x}"
                      + (" bound_ctrl:1" if bc else "") + (" fi:1" if fi else "") for c, n, bc, fi, rm, bm in cases])
    for (c, n, bc, fi, rm, bm), wd in zip(cases, words, strict=True):
        w = wave()
        w.s[EXEC] = exec_
        _set(w, 1, SRC)
        _set(w, 3, OLD)
        run(wd, w)
        assert _get(w, 3) == ref_dpp16(c, n, SRC, OLD, exec_, rm, bm, bc, fi), (c, n, bc, fi, rm, bm)
        assert w.s[EXEC] == exec_


def ref_dpp8(sel: list[int], src: list[int], old: list[int], exec_: int, fi: int) -> list[int]:
    """v_mov_b32 with DPP8: lane l reads lane 8 * (l // 8) + sel[l % 8]; an inactive source reads 0 without fi."""
    out = []
    for lane in range(32):
        s = lane // 8 * 8 + sel[lane % 8]
        out.append(old[lane] if not _on(exec_, lane) else src[s] if fi or _on(exec_, s) else 0)
    return out


@needs_llvm
def test_dpp8_mov_selects_and_fetch_inactive() -> None:
    sels = [[0, 1, 2, 3, 4, 5, 6, 7], [7, 6, 5, 4, 3, 2, 1, 0], [1, 0, 3, 2, 5, 4, 7, 6], [3, 3, 3, 3, 0, 0, 0, 0],
            [2, 7, 1, 6, 0, 5, 4, 3]]
    cases = [(s, fi, e) for s in sels for fi in (0, 1) for e in (FULL, 0xF0F0_5A5A)]
    words = assemble([f"v_mov_b32_dpp v3, v1 dpp8:[{','.join(map(str, s))}]" + (" fi:1" if fi else "")
                      for s, fi, _e in cases])
    for (s, fi, e), wd in zip(cases, words, strict=True):
        w = wave()
        w.s[EXEC] = e
        _set(w, 1, SRC)
        _set(w, 3, OLD)
        run(wd, w)
        assert _get(w, 3) == ref_dpp8(s, SRC, OLD, e, fi), (s, fi, hex(e))


# ---- DPP on arithmetic: VOP2 / VOP3 / VOPC / carry and 16-bit forms ------------------------------------------------

def _fvals() -> tuple[list[int], list[int], list[int]]:
    a = [f32((i - 11) * 1.25) for i in range(32)]
    b = [f32(3.5 - i * 0.75) for i in range(32)]
    c = [f32(i * 0.125 - 2) for i in range(32)]
    return a, b, c


def _fneg(u: int) -> int:
    return u ^ 0x80000000


def _fabs(u: int) -> int:
    return u & 0x7FFFFFFF


@needs_llvm
def test_dpp_on_vop2_vop3_and_modifiers() -> None:
    a, b, c = _fvals()
    lines = ["v_add_f32_dpp v4, -v1, |v2| row_shr:1 row_mask:0xf bank_mask:0xf",
             "v_sub_f32_dpp v4, v1, v2 row_ror:3 row_mask:0xf bank_mask:0xf bound_ctrl:1",
             "v_fma_f32_e64_dpp v4, -v1, v2, |v3| row_xmask:3 row_mask:0xf bank_mask:0xf",
             "v_add_f32_e64_dpp v4, v1, v2 mul:2 dpp8:[7,6,5,4,3,2,1,0]",
             "v_add_nc_u32_e64_dpp v4, v1, v2 row_share:2 row_mask:0xf bank_mask:0xf",
             "v_max_f32_dpp v4, v1, v2 row_half_mirror row_mask:0x1 bank_mask:0xf"]
    words = assemble(lines)
    pre = [0x5EED0000 + i for i in range(32)]

    def fresh():
        w = wave()
        _set(w, 1, a)
        _set(w, 2, b)
        _set(w, 3, c)
        _set(w, 4, pre)
        return w

    def addf(x: int, y: int) -> int:
        return f32(from32(x) + from32(y))

    # row_shr:1 without bound_ctrl: lanes 0 and 16 have no source and keep their value
    w = fresh()
    run(words[0], w)
    want = [pre[i] if i % 16 == 0 else addf(_fneg(a[i - 1]), _fabs(b[i])) for i in range(32)]
    assert _get(w, 4) == want
    w = fresh()
    run(words[1], w)
    assert _get(w, 4) == [f32(from32(a[i // 16 * 16 + (i % 16 + 13) % 16]) - from32(b[i])) for i in range(32)]
    w = fresh()
    run(words[2], w)
    want = [round_float(exact(_fneg(a[i // 16 * 16 + (i % 16 ^ 3)]), "f32") * exact(b[i], "f32")
                        + exact(_fabs(c[i]), "f32"), "f32") for i in range(32)]
    assert _get(w, 4) == want
    w = fresh()
    run(words[3], w)
    assert _get(w, 4) == [f32(2 * (from32(a[i // 8 * 8 + 7 - i % 8]) + from32(b[i]))) for i in range(32)]
    w = fresh()
    run(words[4], w)
    assert _get(w, 4) == [(a[i // 16 * 16 + 2] + b[i]) & FULL for i in range(32)]
    w = fresh()
    run(words[5], w)                       # row_mask 0x1: only the first row of 16 lanes is written
    want = [f32(max(from32(a[(i & 8) | (7 - i % 8)]), from32(b[i]))) if i < 16 else pre[i] for i in range(32)]
    assert _get(w, 4) == want


@needs_llvm
def test_dpp_on_compares_carry_and_f16() -> None:
    lines = ["v_cmp_lt_u32_dpp vcc_lo, v1, v2 row_shl:1 row_mask:0xf bank_mask:0xf",
             "v_cmp_lt_u32_e64_dpp s5, v1, v2 row_shl:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
             "v_cmpx_lt_u32_dpp v1, v2 quad_perm:[1,0,3,2] row_mask:0xf bank_mask:0xf",
             "v_add_co_ci_u32_dpp v3, vcc_lo, v1, v2, vcc_lo row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1",
             "v_add_f16_dpp v3, -v1, |v2| row_mirror row_mask:0xf bank_mask:0xf"]
    words = assemble(lines)
    x = [(i * 7) % 13 for i in range(32)]
    y = [6] * 32
    w = wave()
    _set(w, 1, x)
    _set(w, 2, y)
    run(words[0], w)          # lanes 15 and 31 read outside their row: disabled, their VCC bit 0
    want = sum(1 << i for i in range(32) if i % 16 != 15 and x[i + 1] < y[i])
    assert w.s[VCC] == want
    run(words[1], w)          # bound_ctrl: they compare 0 < 6
    assert w.s[5] == want | 1 << 15 | 1 << 31
    w.s[EXEC] = 0x0000FFFF
    run(words[2], w)
    assert w.s[EXEC] == sum(1 << i for i in range(16) if x[i ^ 1] < y[i])
    w = wave()
    big = [0xFFFFFFE8 + i % 20 for i in range(32)]
    _set(w, 1, big)
    _set(w, 2, list(range(32)))
    _set(w, 3, OLD)
    w.s[VCC] = 0x5555_5555
    run(words[3], w)
    s0 = [0 if i % 16 == 0 else big[i - 1] for i in range(32)]
    tot = [s0[i] + i + (0x5555_5555 >> i & 1) for i in range(32)]
    assert _get(w, 3) == [t & FULL for t in tot]
    assert w.s[VCC] == sum(1 << i for i in range(32) if tot[i] > FULL)
    w = wave()
    h1 = [f16(i * 0.5 - 3) | 0xBEEF0000 for i in range(32)]
    h2 = [f16(1.0 - i * 0.25) for i in range(32)]
    _set(w, 1, h1)
    _set(w, 2, h2)
    _set(w, 3, OLD)
    run(words[4], w)
    want = [(OLD[i] & 0xFFFF0000) | f16(-from16(h1[i // 16 * 16 + 15 - i % 16]) + abs(from16(h2[i])))
            for i in range(32)]
    assert _get(w, 3) == want


def test_every_dpp_form_compiles_where_its_plain_form_does() -> None:
    """Every DPP16/DPP8 entry of the gfx1100 table compiles whenever the same opcode without DPP does (one compile
    path)."""
    from tinyhw.formats.amdisa import decode_at
    from tinyhw.mocks.rdna3 import Unimplemented
    from tinyhw.mocks.rdna3.dispatch import _compile

    def ok(words: list[int]) -> bool:
        raw = struct.pack(f"<{len(words)}I", *words)
        try:
            _compile(decode_at(raw + bytes(16), 0, "gfx11"), raw, 0, True, {})
        except Unimplemented:
            return False
        return True

    dpp16 = 0xFF << 24 | 0xE4 << 8 | 1          # v1, quad_perm:[0,1,2,3], row/bank masks 0xf
    gaps, n = [], 0
    for (enc, op), (m, _tpl) in sorted(OPS.items()):
        base, _, form = enc.partition("_")
        if not form or m in ("v_nop", "v_pipeflush"):
            continue
        for src, dw in ((257, None), (250, dpp16), (233, 0xFAC688 << 8 | 1)):
            w = {"VOP1": [0x7E000000 | 3 << 17 | op << 9 | src], "VOP2": [op << 25 | 3 << 17 | 2 << 9 | src],
                 "VOPC": [0x7C000000 | op << 17 | 2 << 9 | src],
                 "VOP3": [0xD4000000 | op << 16 | 3, src | 258 << 9 | 259 << 18]}[base]
            if dw is None:
                plain = ok(w)
                continue
            if plain and f"_DPP{16 if src == 250 else 8}" in enc:
                n += 1
                if not ok(w + [dw]):
                    gaps.append((enc, m))
    assert n >= 958          # every DPP entry whose plain form compiles (more as the plain forms grow)
    assert gaps == []


# ---- v_permlane16 / v_permlanex16 / v_permlane64 -------------------------------------------------------------------

def ref_permlane(cross: bool, sel: int, src: list[int], old: list[int], exec_: int, fi: int, bc: int) -> list[int]:
    """Lane l reads the lane nibble l % 16 of the 64-bit select names, in its own row (or the other one for x16)."""
    out = []
    for lane in range(32):
        row = lane // 16 if not cross else 1 - lane // 16
        s = 16 * row + (sel >> (4 * (lane % 16)) & 0xF)
        if not _on(exec_, lane):
            out.append(old[lane])
        elif fi or _on(exec_, s):
            out.append(src[s])
        else:
            out.append(0 if bc else old[lane])
    return out


@needs_llvm
@pytest.mark.parametrize("exec_", [FULL, 0x3C3C_F00F])
def test_permlane16_and_x16(exec_: int) -> None:
    sel = 0x0123456789ABCDEF_FEDCBA9876543210 & (1 << 64) - 1
    sels = [0x76543210_FEDCBA98, 0x0F1E2D3C_4B5A6978, sel]
    cases = [(m, s, fi, bc) for m in ("v_permlane16_b32", "v_permlanex16_b32") for s in sels
             for fi in (0, 1) for bc in (0, 1)]
    words = assemble([f"{m} v3, v1, s4, s5" + (f" op_sel:[{fi},{bc}]" if fi or bc else "") for m, _s, fi, bc in cases])
    for (m, s, fi, bc), wd in zip(cases, words, strict=True):
        w = wave()
        w.s[EXEC] = exec_
        w.s[4], w.s[5] = s & FULL, s >> 32
        _set(w, 1, SRC)
        _set(w, 3, OLD)
        run(wd, w)
        assert _get(w, 3) == ref_permlane(m == "v_permlanex16_b32", s, SRC, OLD, exec_, fi, bc), (m, hex(s), fi, bc)
        assert w.s[EXEC] == exec_


@needs_llvm
def test_permlane64_is_a_no_op_in_wave32() -> None:
    w = wave()
    _set(w, 1, SRC)
    _set(w, 3, OLD)
    run(assemble(["v_permlane64_b32 v3, v1"])[0], w)
    assert _get(w, 3) == OLD


# ---- ds_swizzle_b32 / ds_permute_b32 / ds_bpermute_b32 -------------------------------------------------------------

def ref_swizzle(offset: int, src: list[int], old: list[int], exec_: int) -> list[int]:
    """ds_swizzle_b32 (the guide's pseudocode): FFT, rotate, quad or bitmask mode; an inactive source lane gives 0."""
    out = []
    for lane in range(32):
        if offset >= 0xE000:            # FFT: bit-reversed lane, shifted by the mask's population, masked bits kept
            mask = offset & 0x1F
            s = (int(f"{lane:05b}"[::-1], 2) >> bin(mask).count("1")) | (lane & mask)
        elif offset >= 0xC000:          # rotate left (right with bit 10) by offset[9:5], masked bits kept
            mask, rot = offset & 0x1F, (offset >> 5 & 0x1F) * (-1 if offset & 0x400 else 1)
            s = ((lane & mask) | ((lane + rot) % 32 & ~mask)) & 0x1F
        elif offset & 0x8000:
            s = lane // 4 * 4 + (offset >> (2 * (lane % 4)) & 3)
        else:
            s = ((lane & offset & 0x1F) | (offset >> 5 & 0x1F)) ^ (offset >> 10 & 0x1F)
        out.append(old[lane] if not _on(exec_, lane) else src[s] if _on(exec_, s) else 0)
    return out


SWIZZLES = ["swizzle(QUAD_PERM,1,0,3,2)", "swizzle(QUAD_PERM,3,3,0,1)", 'swizzle(BITMASK_PERM,"01pip")',
            "swizzle(BROADCAST,8,3)", "swizzle(BROADCAST,32,17)", "swizzle(SWAP,4)", "swizzle(REVERSE,16)",
            "swizzle(REVERSE,2)", "0x7fff", "0x1f", "0x3e0",
            "0xe000", "0xe010", "0xe01f", "0xe005", "0xc020", "0xc420", "0xc021", "0xc421", "0xc0e6", "0xc5e3"]


@needs_llvm
@pytest.mark.parametrize("exec_", [FULL, 0xDEAD_BEEF])
def test_ds_swizzle_modes(exec_: int) -> None:
    words = assemble([f"ds_swizzle_b32 v3, v1 offset:{s}" for s in SWIZZLES])
    for s, wd in zip(SWIZZLES, words, strict=True):
        offset = wd[0] & 0xFFFF
        w = wave()
        w.s[EXEC] = exec_
        _set(w, 1, SRC)
        _set(w, 3, OLD)
        run(wd, w)
        assert _get(w, 3) == ref_swizzle(offset, SRC, OLD, exec_), s


@needs_llvm
@pytest.mark.parametrize("exec_", [FULL, 0x0FF0_F731])
def test_ds_permute_and_bpermute(exec_: int) -> None:
    addr = [((i * 13 + 5) % 32) * 4 + (i % 4 == 3) * 128 for i in range(32)]     # bit 7 wraps: lanes mod 32
    words = assemble(["ds_permute_b32 v3, v2, v1 offset:8", "ds_bpermute_b32 v3, v2, v1 offset:8"])
    w = wave()
    w.s[EXEC] = exec_
    _set(w, 1, SRC)
    _set(w, 2, addr)
    _set(w, 3, OLD)
    run(words[0], w)
    tmp = [0] * 32
    for lane in range(32):                    # lane order: the highest writer wins
        if _on(exec_, lane):
            tmp[(addr[lane] + 8) // 4 % 32] = SRC[lane]
    assert _get(w, 3) == [tmp[i] if _on(exec_, i) else OLD[i] for i in range(32)]
    _set(w, 3, OLD)
    run(words[1], w)
    want = []
    for lane in range(32):
        s = (addr[lane] + 8) // 4 % 32
        want.append(OLD[lane] if not _on(exec_, lane) else SRC[s] if _on(exec_, s) else 0)
    assert _get(w, 3) == want


# ---- VINTERP ---------------------------------------------------------------------------------------------------------

@needs_llvm
def test_vinterp_p10_and_p2_f32() -> None:
    p = [f32((i % 4 + 1) * 1.5 - i * 0.0625) for i in range(32)]    # quad lane 0 P0, lane 1 P10, lane 2 P20
    ij = [f32(0.25 + i / 64) for i in range(32)]
    acc = [f32(i * 0.375 - 4) for i in range(32)]
    words = assemble(["v_interp_p10_f32 v4, v1, v2, v1 wait_exp:1", "v_interp_p2_f32 v4, -v1, v2, v3 clamp"])
    w = wave()
    _set(w, 1, p)
    _set(w, 2, ij)
    _set(w, 3, acc)
    run(words[0], w)
    q = [i // 4 * 4 for i in range(32)]
    assert _get(w, 4) == [round_float(exact(p[q[i] + 1], "f32") * exact(ij[i], "f32") + exact(p[q[i]], "f32"), "f32")
                          for i in range(32)]
    run(words[1], w)
    want = []
    for i in range(32):
        x = -exact(p[q[i] + 2], "f32") * exact(ij[i], "f32") + exact(acc[i], "f32")
        r = from32(round_float(x, "f32"))
        want.append(f32(min(max(r, 0.0), 1.0)))
    assert _get(w, 4) == want


def _rtz(x, fmt: str) -> int:
    """``x`` rounded toward zero: the nearest-even result, one step toward zero when it lies beyond ``x``."""
    r = round_float(x, fmt)
    inf = {"f16": 0x7C00, "f32": 0x7F800000}[fmt]
    if (r & (inf | inf - 1)) == inf or abs(exact(r, fmt)) > abs(x):
        r -= 1
    return r


@needs_llvm
@pytest.mark.parametrize("rtz", ["", "_rtz"])
def test_vinterp_f16_forms_op_sel_and_rounding(rtz: str) -> None:
    import random

    rng = random.Random(7)
    p = [f16(rng.uniform(-8, 8)) | f16(rng.uniform(-8, 8)) << 16 for _ in range(32)]     # packed f16 P0/P10/P20
    ij = [f32(rng.uniform(-2, 2)) for _ in range(32)]
    acc = [f32(rng.uniform(-64, 64)) for _ in range(32)]
    words = assemble([f"v_interp_p10{rtz}_f16_f32 v4, v1, v2, v1 op_sel:[1,0,0,0]",
                      f"v_interp_p2{rtz}_f16_f32 v5, -v1, v2, v3 op_sel:[0,0,0,1]"])
    w = wave()
    _set(w, 1, p)
    _set(w, 2, ij)
    _set(w, 3, acc)
    _set(w, 5, OLD)
    run(words[0], w)
    q = [i // 4 * 4 for i in range(32)]
    rnd = _rtz if rtz else round_float
    want = [rnd(exact(p[q[i] + 1] >> 16, "f16") * exact(ij[i], "f32") + exact(p[q[i]] & 0xFFFF, "f16"), "f32")
            for i in range(32)]
    assert _get(w, 4) == want
    run(words[1], w)
    want = []
    for i in range(32):
        x = -exact(p[q[i] + 2] & 0xFFFF, "f16") * exact(ij[i], "f32") + exact(acc[i], "f32")
        h = _rtz(x, "f16") if rtz else round_float(exact(round_float(x, "f32"), "f32"), "f16")
        want.append((OLD[i] & 0xFFFF) | h << 16)
    assert _get(w, 5) == want


GUIDE_SWIZZLES = {  # the guide's examples: lane l of input {1, 2, ..., 0x20} receives this value (hex)
    0xE000: "1,11,9,19,5,15,d,1d,3,13,b,1b,7,17,f,1f,2,12,a,1a,6,16,e,1e,4,14,c,1c,8,18,10,20",
    0xE010: "1,9,5,d,3,b,7,f,2,a,6,e,4,c,8,10,11,19,15,1d,13,1b,17,1f,12,1a,16,1e,14,1c,18,20",
    0xE01F: ",".join(f"{i:x}" for i in range(1, 33)),
    0xC020: ",".join(f"{i % 32 + 1:x}" for i in range(1, 33)),         # rotate left by 1
    0xC420: ",".join(f"{(i - 2) % 32 + 1:x}" for i in range(1, 33)),   # rotate right by 1
}


@needs_llvm
def test_ds_swizzle_fft_and_rotate_match_the_guide_examples() -> None:
    words = assemble([f"ds_swizzle_b32 v3, v1 offset:0x{o:x}" for o in GUIDE_SWIZZLES])
    for (o, text), wd in zip(GUIDE_SWIZZLES.items(), words, strict=True):
        w = wave()
        _set(w, 1, list(range(1, 33)))
        run(wd, w)
        assert _get(w, 3) == [int(x, 16) for x in text.split(",")], hex(o)


@needs_llvm
def test_ds_permute_and_bpermute_guide_examples() -> None:
    """The guide's four-lane examples: SRC0 {A, B, C, D}, ADDR {0, 0, 12, 4}, EXEC 0xF and 0xA."""
    a, b, c, d, old = 0xA, 0xB, 0xC, 0xD, 0x77
    words = assemble(["ds_permute_b32 v3, v2, v1", "ds_bpermute_b32 v3, v2, v1"])
    want = {(0, 0xF): [b, d, 0, c], (0, 0xA): [old, d, old, 0], (1, 0xF): [a, a, d, b], (1, 0xA): [old, 0, old, b]}
    for (k, e), lanes in want.items():
        w = wave()
        w.s[EXEC] = e
        _set(w, 1, [a, b, c, d])
        _set(w, 2, [0, 0, 12, 4])
        _set(w, 3, [old] * 4)
        run(words[k], w)
        assert _get(w, 3)[:4] == lanes, (k, e)


# ---- end to end: a kernel clang-19 compiles from OpenCL C, checked against the same arithmetic on the host --------

LANE_KERNEL = """
__kernel void lanes(__global const int *in, __global int *out) {
  int i = __builtin_amdgcn_workgroup_id_x() * 32 + __builtin_amdgcn_workitem_id_x();
  int x = in[i];
  int a = __builtin_amdgcn_update_dpp(0, x, 0x111, 0xf, 0xf, false);       /* row_shr:1, old 0 */
  int b = __builtin_amdgcn_mov_dpp8(x, 0x053977);                           /* dpp8:[7,6,5,4,3,2,1,0] */
  int c = __builtin_amdgcn_ds_swizzle(x, 0x041F);                           /* bitmask mode: lane ^ 1 */
  int d = __builtin_amdgcn_ds_bpermute(((i * 7) & 31) * 4, x);
  int e = __builtin_amdgcn_permlanex16(0, x, 0x76543210, 0xfedcba98, false, false);
  int f = __builtin_amdgcn_update_dpp(-1, x, 0x140, 0xf, 0xf, true);        /* row_mirror */
  int g = __builtin_amdgcn_ds_swizzle(x, 0x801B);                           /* quad mode [3,2,1,0] */
  out[i] = a + 3 * b + 5 * c + 7 * d + 11 * e + 13 * f + 17 * g;
}
"""


def lane_kernel_reference(x: list[int]) -> list[int]:
    """What LANE_KERNEL computes per work-item for one full wave32 of inputs ``x`` (int32 arithmetic)."""
    out = []
    for lane in range(32):
        row, r = lane // 16 * 16, lane % 16
        a = x[lane - 1] if r else 0
        b = x[lane // 8 * 8 + 7 - lane % 8]
        c = x[lane ^ 1]
        d = x[(lane * 7) & 31]
        sel = 0xFEDCBA98_76543210 >> (4 * r) & 0xF
        e = x[(16 - row) + sel]
        f = x[row + 15 - r]
        g = x[lane // 4 * 4 + 3 - lane % 4]
        v = (a + 3 * b + 5 * c + 7 * d + 11 * e + 13 * f + 17 * g) & FULL
        out.append(v - (1 << 32) if v >> 31 else v)
    return out


@pytest.mark.skipif(not shutil.which("clang-19"), reason="clang-19 is not installed")
def test_clang_compiled_lane_builtins_run_as_on_the_host(tmp_path) -> None:
    from tinyhw.mocks.rdna3 import FlatMemory, dispatch_regs, load_kernel, run_dispatch

    src = tmp_path / "k.cl"
    src.write_text(LANE_KERNEL)
    subprocess.run(["clang-19", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-x", "cl", "-cl-std=CL2.0", "-O2",
                    "-nogpulib", "-c", str(src), "-o", str(tmp_path / "k.o")], check=True)
    groups = 4
    x = [((i * 2654435761) >> 7) % 100000 - 50000 for i in range(32 * groups)]
    mem = FlatMemory(0x7F00_0000_0000, 1 << 22)
    k = load_kernel((tmp_path / "k.o").read_bytes(), mem)     # the relocatable object: the kernel needs no relocation
    ina = mem.alloc(struct.pack(f"<{len(x)}i", *x))
    outa = mem.alloc(bytes(4 * len(x)))
    kernarg = mem.alloc(struct.pack("<QQ", ina, outa), align=64)
    res = run_dispatch(dispatch_regs(k.kd, k.entry, kernarg, (groups, 1, 1), (32, 1, 1)), mem)
    got = list(struct.unpack(f"<{len(x)}i", mem.read(outa, 4 * len(x))))
    want = [v for g in range(groups) for v in lane_kernel_reference(x[32 * g:32 * g + 32])]
    assert got == want
    names = set(res.per_mnemonic)
    assert {"v_mov_b32_dpp", "ds_swizzle_b32", "ds_bpermute_b32", "v_permlanex16_b32"} <= names, names
