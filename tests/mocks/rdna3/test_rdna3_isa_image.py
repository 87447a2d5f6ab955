"""Image (MIMG) instructions without a sampler on the shader core (tinyhw/mocks/rdna3/image.py).

Instructions are assembled by llvm-mc-19 (skipped without it), decoded, compiled and run on one wave. The T# is
packed here from the documented bit positions, the linear layout's addresses are computed here (pitch aligned to
256 bytes, mips smallest first, slices of the whole chain), and every expected value comes from Python integers,
``struct`` and ``fractions.Fraction``, never from the core.
"""

from __future__ import annotations

import math
import re
import shutil
import struct
import subprocess
from fractions import Fraction

import numpy as np
import pytest
from rdna3isa import asm, f16, f32, go, round_float, run, wave

from tinyhw.formats.amdisa import decode_at
from tinyhw.mocks.rdna3 import FlatMemory, ShaderFault, Unimplemented

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
M32 = (1 << 32) - 1
EXEC_LO = 126
IDENT = 4 | 5 << 3 | 6 << 6 | 7 << 9          # DST_SEL X, Y, Z, W
T1D, T2D, T3D, TCUBE, T1DA, T2DA, T2DMSAA = 8, 9, 10, 11, 12, 13, 14
DIMS = {T1D: "1D", T2D: "2D", T3D: "3D", TCUBE: "CUBE", T1DA: "1D_ARRAY", T2DA: "2D_ARRAY"}
BASE = 0x10000






def tsharp(base: int, fmt: int, width: int, height: int = 1, *, typ: int = T2D, depth: int = 0, dst_sel: int = IDENT,
           base_level: int = 0, last_level: int = 0, max_mip: int = 0, base_array: int = 0, sw_mode: int = 0,
           pitch: int | None = None) -> list[int]:
    """Eight T# dwords from the gfx11 SQ_IMG_RSRC_WORD* bit positions; ``depth`` is word 4's DEPTH (3D: depth - 1,
    arrays: the last slice); for 1D/2D word 4 holds pitch - 1 (``pitch``, default the width aligned to 256 bytes)."""
    w4 = depth | base_array << 16
    if typ in (T1D, T2D):
        w4 = pitch - 1 if pitch else 0            # Mesa leaves it 0 without a custom pitch
    return [base >> 8 & M32,
            (base >> 40) & 0xFF | max_mip << 16 | fmt << 20 | ((width - 1) & 3) << 30,
            (width - 1) >> 2 | (height - 1) << 14,
            dst_sel | base_level << 12 | last_level << 16 | sw_mode << 20 | typ << 28,
            w4, 0, 0, 0]


def fmt_bytes(fmt: int) -> int:
    """Bytes per texel of the gfx11 format number (the BUF_FMT_* list llvm-mc-19 names)."""
    for last, size in ((6, 1), (13, 2), (19, 2), (22, 4), (47, 4), (57, 8), (60, 12), (63, 16)):
        if fmt <= last:
            return 8 if size == 4 and 48 <= fmt <= 50 else size
    return {64: 1, 65: 2, 66: 4, 67: 4, 68: 2, 69: 2, 70: 2, 71: 2, 72: 1, 80: 8, 81: 8}.get(fmt, 4)


def layout(width: int, height: int, bpe: int, levels: int) -> tuple[list[int], list[int], int]:
    """(pitch per level in texels, byte offset per level, slice bytes): addrlib's linear rule, each level's width
    and height the level-0 size shifted right rounded up (``GetMipSize``'s ShiftCeil), the pitch aligned to 256
    bytes, mips smallest first."""
    pitches = [math.ceil(-(-width // (1 << lv)) * bpe / 256) * 256 // bpe for lv in range(levels)]
    sizes = [pitches[lv] * -(-height // (1 << lv)) * bpe for lv in range(levels)]
    return pitches, [sum(sizes[lv + 1:]) for lv in range(levels)], sum(sizes)


def setup(words: list[int], size: int = 1 << 16) -> tuple[object, FlatMemory]:
    """A wave with the T# in s[0:7] and a zeroed memory at BASE."""
    mem = FlatMemory(BASE, size)
    w = wave(mem=mem)
    w.s[0:8] = words
    return w, mem


def unorm(x: int, bits: int) -> int:
    return round_float(Fraction(x, (1 << bits) - 1), "f32")


def snorm(x: int, bits: int) -> int:
    s = x - (1 << bits) if x >> (bits - 1) else x
    return round_float(max(Fraction(s, (1 << (bits - 1)) - 1), Fraction(-1)), "f32")


# ---------------------------------------------------------------------------------------------------


def test_mimg_fields_decode_as_llvm_mc_encodes_them() -> None:
    cases = [
        ("image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D", 8,
         {"dim": 1, "dmask": 15, "vaddr": 4, "vdata": 0, "srsrc": 0, "nsa": 0}),
        ("image_load v[0:3], [v4, v6, v9], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_3D", 12,
         {"dim": 2, "nsa": 1, "vaddr": 4, "addr1": 6, "addr2": 9, "srsrc": 8}),
        ("image_load v[10:14], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D tfe", 8, {"tfe": 1, "vdata": 10}),
        ("image_load v[0:1], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D a16 d16", 8, {"a16": 1, "d16": 1}),
        ("image_atomic_add v1, v[4:5], s[96:103] dmask:0x1 dim:SQ_RSRC_IMG_2D glc", 8,
         {"glc": 1, "dmask": 1, "vdata": 1, "srsrc": 96}),
        ("image_load v[0:1], v[4:5], s[8:15] dmask:0x3 dim:SQ_RSRC_IMG_2D unorm slc dlc", 8,
         {"unorm": 1, "slc": 1, "dlc": 1, "glc": 0}),
        ("image_load_mip v[0:3], [v4, v6, v9, v11], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_3D", 12,
         {"addr3": 11, "dim": 2}),
        ("image_sample v[0:3], v[4:5], s[0:7], s[12:15] dmask:0xf dim:SQ_RSRC_IMG_2D", 8, {"ssamp": 12}),
        ("image_bvh_intersect_ray v[4:7], v[9:19], s[4:7]", 8, {"r128": 1, "srsrc": 4}),
    ]
    for text, size, want in cases:
        words = asm(text)
        inst = decode_at(struct.pack(f"<{len(words)}I", *words) + bytes(16), 0, "gfx11")
        assert inst.size == size == 4 * len(words), text
        assert {k: inst.fields[k] for k in want} == want, text


def test_parse_tsharp_reads_every_documented_field() -> None:
    from tinyhw.mocks.rdna3.image import parse_tsharp

    words = tsharp(0x12_3456_7800, 42, 1000, 300, typ=T2DA, depth=6, dst_sel=7 | 6 << 3 | 1 << 6 | 0 << 9,
                   base_level=2, last_level=5, max_mip=7, base_array=3, sw_mode=0)
    words[5] = 0x15 << 27
    words[6] = 0x5A
    t = parse_tsharp(words)
    assert (t.base, t.width, t.height, t.fmt, t.type) == (0x12_3456_7800, 1000, 300, 42, T2DA)
    assert (t.dst_sel, t.base_level, t.last_level, t.max_mip) == ((7, 6, 1, 0), 2, 5, 7)
    assert (t.base_array, t.last_array, t.pitch, t.min_lod, t.slices) == (3, 6, None, 0x5A << 5 | 0x15, 4)
    t3 = parse_tsharp(tsharp(0x100, 22, 8, 8, typ=T3D, depth=4, sw_mode=9))
    assert (t3.depth, t3.sw_mode, t3.slices) == (5, 9, 5)
    t2 = parse_tsharp(tsharp(0x100, 22, 8, 8, typ=T2D, pitch=128))
    assert (t2.pitch, t2.depth) == (128, 1)
    t4 = parse_tsharp(tsharp(0x100, 22, 8, 8, typ=T2D, pitch=128)[:4])
    assert (t4.pitch, t4.words) == (None, tuple(tsharp(0x100, 22, 8, 8, typ=T2D)[:4]))


def test_read_texels_and_dst_sel_interface() -> None:
    from tinyhw.mocks.rdna3.image import apply_dst_sel, mip_dims, parse_tsharp, read_texels

    w, mem = setup(tsharp(BASE, 23, 5, 3, max_mip=1))     # 16_16_UNORM
    pitches, offs, _ = layout(5, 3, 4, 2)
    mem.write(BASE + offs[0] + (2 * pitches[0] + 4) * 4, struct.pack("<2H", 65535, 21845))
    mem.write(BASE + offs[1] + 1 * 4, struct.pack("<2H", 1, 0))
    t = parse_tsharp(w.s[0:8])
    assert mip_dims(t, 0) == (5, 3, 1) and mip_dims(t, 1) == (2, 1, 1) and mip_dims(t, 3) == (1, 1, 1)
    got = read_texels(mem, t, np.array([4, 1]), np.array([2, 0]), np.array([0, 0]), np.array([0, 1]))  # (1, 0) of mip 1
    assert got.tolist() == [[1.0, 21845 / 65535, 0.0, 1.0], [1 / 65535, 0.0, 0.0, 1.0]]
    t = parse_tsharp(tsharp(BASE, 23, 5, 3, dst_sel=1 | 5 << 3 | 0 << 6 | 4 << 9))
    assert apply_dst_sel(t, np.array([[0.25, 0.5, 0.75, 1.0]])).tolist() == [[1.0, 0.5, 0.0, 0.25]]


def _img(fmt: int, bpe: int, width: int, height: int, texels: dict[tuple[int, int], bytes], **kw):
    pitch = layout(width, height, bpe, 1)[0][0]
    w, mem = setup(tsharp(BASE, fmt, width, height, **kw))
    for (x, y), b in texels.items():
        mem.write(BASE + (y * pitch + x) * bpe, b)
    return w, mem


@pytest.mark.parametrize("field", [0, 99, 255, 191])
def test_the_2d_pitch_field_counts_only_above_the_width(field: int) -> None:
    """The guide's Image Resource table: word 4 is "(pitch-1)[12:0] of mip0 for 1D, 2D, 2D-MSAA resources if pitch
    > width" (Mesa leaves it 0 without a custom pitch). 100 texels of 4 bytes: a field of 0 or 99 gives the
    256-byte aligned pitch 128; 255 a pitch of 256, 191 of 192."""
    words = tsharp(BASE, 20, 100, 3)                # 32_UINT
    words[4] = field
    pitch = field + 1 if field + 1 > 100 else 128
    w, mem = setup(words)
    mem.write(BASE + (2 * pitch + 7) * 4, struct.pack("<I", 0xC0FFEE))
    w.s[EXEC_LO] = 1
    w.v[4, 0], w.v[5, 0] = 7, 2
    go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert int(w.v[0, 0]) == 0xC0FFEE


def test_an_all_zero_t_sharp_is_unbound() -> None:
    """The guide: "A resource that is all zeros is treated as 'unbound': it returns all zeros and not generate a
    memory transaction"."""
    w, mem = setup([0] * 8)
    mem.write(BASE, struct.pack("<4I", 1, 2, 3, 4))
    w.s[EXEC_LO] = 0b11
    w.v[4:6, :2] = 0
    w.v[0:4, :2] = 0xDEAD
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert not w.v[0:4, :2].any()
    w.v[0:4, :2] = 7
    go(w, "image_store v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    go(w, "image_atomic_add v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D glc")
    assert mem.read(BASE, 16) == struct.pack("<4I", 1, 2, 3, 4) and not w.v[0, :2].any()
    w.v[0:4, :2] = 7
    go(w, "image_get_resinfo v[0:3], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert not w.v[0:4, :2].any()


def test_a_3d_t_sharp_in_uav_mode_is_refused() -> None:
    """ARRAY_PITCH bit 0 of a 3D T#: "1: UAV (base_array and depth are first and last layer in view, and w.r.t. mip
    level specified)" (the guide's Image Resource table); the model addresses SRV mode only."""
    words = tsharp(BASE, 20, 4, 4, typ=T3D, depth=3)
    words[5] = 1
    w, _ = setup(words)
    w.s[EXEC_LO] = 1
    w.v[4:7, 0] = 0
    with pytest.raises(ShaderFault, match="UAV"):
        go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_3D")
    words[5] = 0
    w.s[0:8] = words
    go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_3D")


def test_image_load_2d_rgba8_unorm_dmask_and_out_of_range() -> None:
    px = {(0, 0): bytes([0, 1, 127, 255]), (4, 2): bytes([128, 200, 3, 4]), (1, 1): bytes([9, 8, 7, 6])}
    w, _ = _img(42, 4, 5, 3, px)
    w.s[EXEC_LO] = 0b1111
    w.v[4, :4] = [0, 4, 5, 1]           # x (lane 2 is past the width: reads 0)
    w.v[5, :4] = [0, 2, 0, 3]           # y (lane 3 is past the height)
    w.v[0:4, :4] = 0xDEAD
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    for lane, key in ((0, (0, 0)), (1, (4, 2))):
        assert [int(w.v[r, lane]) for r in range(4)] == [unorm(b, 8) for b in px[key]], lane
    assert [int(w.v[r, 2]) for r in range(4)] == [0] * 4 and [int(w.v[r, 3]) for r in range(4)] == [0] * 4
    w.v[0:4, :4] = 0xDEAD
    go(w, "image_load v[0:1], v[4:5], s[0:7] dmask:0xa dim:SQ_RSRC_IMG_2D")   # Y and W, packed
    assert [int(w.v[r, 1]) for r in range(4)] == [unorm(200, 8), unorm(4, 8), 0xDEAD, 0xDEAD]


FORMAT_CASES = [  # (format number, texel bytes, expected component bits from the texel bytes)
    (2, bytes([0x80]), lambda b: [f32(-1.0), 0, 0, f32(1.0)]),                        # 8_SNORM: -128 -> -1
    (2, bytes([0x81]), lambda b: [snorm(0x81, 8), 0, 0, f32(1.0)]),
    (7, struct.pack("<H", 40000), lambda b: [unorm(40000, 16), 0, 0, f32(1.0)]),      # 16_UNORM
    (10, struct.pack("<H", 0x8001), lambda b: [snorm(0x8001, 16), 0, 0, f32(1.0)]),   # 16_SSCALED -> -32767.0
    (11, struct.pack("<H", 65535), lambda b: [65535, 0, 0, 1]),                        # 16_UINT
    (13, struct.pack("<e", -2.5), lambda b: [f32(-2.5), 0, 0, f32(1.0)]),             # 16_FLOAT
    (20, struct.pack("<I", 0xFFFFFFFE), lambda b: [0xFFFFFFFE, 0, 0, 1]),              # 32_UINT
    (22, struct.pack("<I", 0x7FC00001), lambda b: [0x7FC00001, 0, 0, f32(1.0)]),      # 32_FLOAT: the bits
    (19, bytes([0xFF, 0x80]), lambda b: [M32, (0x80 - 256) & M32, 0, 1]),             # 8_8_SINT
    (28, struct.pack("<2h", -3, 32767), lambda b: [(-3) & M32, 32767, 0, 1]),        # 16_16_SINT
    (50, struct.pack("<2f", 1.5, -0.0), lambda b: [f32(1.5), 0x80000000, 0, f32(1.0)]),
    (63, struct.pack("<4f", 1, 2, 3, 4), lambda b: [f32(1), f32(2), f32(3), f32(4)]),
]


@pytest.mark.parametrize("fmt,raw,want", FORMAT_CASES, ids=[str(i) for i in range(len(FORMAT_CASES))])
def test_image_load_number_formats(fmt: int, raw: bytes, want) -> None:
    if fmt == 10:       # 16_SSCALED: the signed integer as a float
        want = lambda b: [f32(-32767.0), 0, 0, f32(1.0)]   # noqa: E731
    w, _ = _img(fmt, len(raw), 4, 4, {(3, 2): raw})
    w.s[EXEC_LO] = 1
    w.v[4, 0], w.v[5, 0] = 3, 2
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[r, 0]) for r in range(4)] == want(raw)


def _ufloat(v: int, mbits: int) -> int:
    """f32 bits of an unsigned float with a 5-bit exponent and ``mbits`` mantissa bits (exact)."""
    e, m = v >> mbits, v & ((1 << mbits) - 1)
    if e == 31:
        return 0x7F800000 if m == 0 else 0x7FC00000 | m << (23 - mbits)
    frac = Fraction(m, 1 << mbits)
    x = frac * Fraction(2) ** -14 if e == 0 else (1 + frac) * Fraction(2) ** (e - 15)
    return round_float(x, "f32")


def test_image_load_packed_formats() -> None:
    word = 0b1011010111_01111000001_00000000011 | 0
    r, g, b = word & 0x7FF, word >> 11 & 0x7FF, word >> 22
    w, _ = _img(30, 4, 2, 2, {(1, 1): struct.pack("<I", word)})       # 10_11_11_FLOAT: X in the low 11 bits
    w.s[EXEC_LO] = 1
    w.v[4, 0], w.v[5, 0] = 1, 1
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [_ufloat(r, 6), _ufloat(g, 6), _ufloat(b, 5), f32(1.0)]
    word = 3 << 30 | 1023 << 20 | 512 << 10 | 1
    w, _ = _img(36, 4, 2, 2, {(1, 1): struct.pack("<I", word)})       # 2_10_10_10_UNORM: W the top 2 bits
    w.s[EXEC_LO] = 1
    w.v[4, 0], w.v[5, 0] = 1, 1
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [unorm(1, 10), unorm(512, 10), f32(1.0), f32(1.0)]
    w.s[1] = (w.s[1] & ~(0xFF << 20)) | 37 << 20                      # 2_10_10_10_SNORM: 512 is -512
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [snorm(1, 10), f32(-1.0), snorm(1023, 10), snorm(3, 2)]


def test_dst_sel_and_missing_components() -> None:
    sel = 7 | 4 << 3 | 0 << 6 | 1 << 9                                  # W, X, 0, 1
    w, _ = _img(29, 4, 2, 2, {(0, 1): struct.pack("<2e", 0.5, 3.0)}, dst_sel=sel)      # 16_16_FLOAT
    w.s[EXEC_LO] = 1
    w.v[4, 0], w.v[5, 0] = 0, 1
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [f32(1.0), f32(0.5), 0, f32(1.0)]
    w.s[1] = (w.s[1] & ~(0xFF << 20)) | 27 << 20                       # 16_16_UINT: the one is the integer 1
    go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [1, 0x3800, 0, 1]
    w.s[3] = (w.s[3] & ~0xFFF) | 2                                      # a reserved DST_SEL value
    with pytest.raises(ShaderFault, match="DST_SEL"):
        go(w, "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")


def test_mips_slices_and_3d_addresses() -> None:
    width, height, levels, slices = 70, 9, 4, 3
    pitches, offs, ssize = layout(width, height, 4, levels)
    w, mem = setup(tsharp(BASE, 20, width, height, typ=T2DA, depth=slices - 1, max_mip=levels - 1,
                          last_level=levels - 1), 1 << 18)
    cells = [(0, 0, 0, 0), (69, 8, 2, 0), (34, 3, 1, 1), (16, 1, 2, 2), (7, 0, 0, 3), (3, 0, 1, 3)]
    for i, (x, y, s, lv) in enumerate(cells):
        mem.write(BASE + s * ssize + offs[lv] + (y * pitches[lv] + x) * 4, struct.pack("<I", 1000 + i))
    oob = [(0, 0, 3, 0), (35, 0, 0, 1), (0, 0, 0, 4)]              # slice past the view, x past mip 1, level 4
    pts = cells + oob
    w.s[EXEC_LO] = (1 << len(pts)) - 1
    for lane, (x, y, s, lv) in enumerate(pts):
        w.v[4:8, lane] = [x, y, s, lv]
    go(w, "image_load_mip v0, v[4:7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_ARRAY")
    assert [int(w.v[0, i]) for i in range(len(pts))] == [1000 + i for i in range(len(cells))] + [0] * len(oob)
    # BASE_ARRAY 1 and BASE_LEVEL 1: slice and level count from them
    w.s[4] = 2 | 1 << 16
    w.s[3] |= 1 << 12
    w.s[EXEC_LO] = 1
    w.v[4:8, 0] = [16, 1, 1, 1]
    go(w, "image_load_mip v0, v[4:7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_ARRAY")
    assert int(w.v[0, 0]) == 1003
    # 3D: each depth slice holds the chain; mip 1 of an 8-deep volume has 4 slices
    w, mem = setup(tsharp(BASE, 20, 6, 5, typ=T3D, depth=7, max_mip=1, last_level=1), 1 << 18)
    pitches, offs, ssize = layout(6, 5, 4, 2)
    mem.write(BASE + 3 * ssize + offs[1] + (1 * pitches[1] + 2) * 4, struct.pack("<I", 77))
    mem.write(BASE + 7 * ssize + offs[0] + (4 * pitches[0] + 5) * 4, struct.pack("<I", 78))
    w.s[EXEC_LO] = 0b111
    w.v[4:8, 0] = [2, 1, 3, 1]
    w.v[4:8, 1] = [5, 4, 7, 0]
    w.v[4:8, 2] = [0, 0, 4, 1]                                      # depth 4 is past mip 1's four slices
    go(w, "image_load_mip v0, [v4, v5, v6, v7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_3D")
    assert [int(w.v[0, i]) for i in range(3)] == [77, 78, 0]


def test_1d_cube_and_pitch_from_the_t_sharp() -> None:
    w, mem = setup(tsharp(BASE, 20, 300, typ=T1DA, depth=1), 1 << 18)
    _, _, ssize = layout(300, 1, 4, 1)
    mem.write(BASE + ssize + 299 * 4, struct.pack("<I", 5))
    w.s[EXEC_LO] = 0b11
    w.v[4, :2], w.v[5, :2] = [299, 300], [1, 1]
    go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D_ARRAY")
    assert [int(w.v[0, 0]), int(w.v[0, 1])] == [5, 0]
    w, mem = setup(tsharp(BASE, 20, 4, 4, typ=TCUBE, depth=5), 1 << 18)      # cube: face = slice
    _, _, ssize = layout(4, 4, 4, 1)
    mem.write(BASE + 5 * ssize + (3 * 64 + 1) * 4, struct.pack("<I", 6))
    w.s[EXEC_LO] = 1
    w.v[4:7, 0] = [1, 3, 5]
    go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_CUBE")
    assert int(w.v[0, 0]) == 6
    w, mem = setup(tsharp(BASE, 20, 4, 4, pitch=100))                 # 2D: level 0's pitch is word 4's
    mem.write(BASE + (2 * 100 + 3) * 4, struct.pack("<I", 9))
    w.v[4:6, 0] = [3, 2]
    go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert int(w.v[0, 0]) == 9


def test_a16_nsa_d16_and_tfe() -> None:
    w, _ = _img(51, 8, 4, 4, {(3, 2): struct.pack("<4H", 0, 65535, 32768, 1)})    # 16_16_16_16_UNORM
    w.s[EXEC_LO] = 1
    w.v[4, 0] = 3 | 2 << 16                                              # A16: x, y in one VGPR
    go(w, "image_load v[0:3], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D a16")
    assert [int(w.v[i, 0]) for i in range(4)] == [0, f32(1.0), unorm(32768, 16), unorm(1, 16)]
    w.v[0:2, 0] = 0xDEADBEEF
    go(w, "image_load v[0:1], v4, s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D a16 d16")    # three halves: hi of v1 is 0
    h = [0, f16(1.0), f16(32768 / 65535)]
    assert [int(w.v[0, 0]), int(w.v[1, 0])] == [h[0] | h[1] << 16, h[2]]
    w.v[9, 0], w.v[7, 0] = 3, 2
    w.v[0:5, 0] = 0xDEAD
    go(w, "image_load v[0:4], [v9, v7], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D tfe")   # NSA; TFE: no NACK, status 0
    assert [int(w.v[i, 0]) for i in range(5)] == [0, f32(1.0), unorm(32768, 16), unorm(1, 16), 0]
    w.v[0:3, 0] = 0xDEAD
    go(w, "image_load v[0:2], [v9, v7], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D tfe d16")   # status after 2 VGPRs
    assert [int(w.v[i, 0]) for i in range(3)] == [f16(1.0) << 16, f16(32768 / 65535), 0]
    w.s[1] = (w.s[1] & ~(0xFF << 20)) | 55 << 20                        # 16x4 SINT, d16: the integers' halves
    go(w, "image_load v0, [v9, v7], s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D d16")
    assert int(w.v[0, 0]) == 0xFFFF << 16
    w.s[1] = (w.s[1] & ~(0xFF << 20)) | 22 << 20                        # d16 of a 32-bit format: refused
    with pytest.raises(ShaderFault, match="D16"):
        go(w, "image_load v0, [v9, v7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D d16")


def test_pck_loads_move_raw_bits() -> None:
    w, _ = _img(42, 4, 2, 2, {(1, 0): bytes([0x80, 0x7F, 0xFF, 0x01])}, dst_sel=1 | 1 << 3 | 1 << 6 | 1 << 9)
    w.s[EXEC_LO] = 1
    w.v[4:6, 0] = [1, 0]
    go(w, "image_load_pck v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [0x80, 0x7F, 0xFF, 0x01]       # no conversion, no DST_SEL
    go(w, "image_load_pck_sgn v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[i, 0]) for i in range(4)] == [0xFFFFFF80, 0x7F, M32, 0x01]
    w.v[6, 0] = 0
    go(w, "image_load_mip_pck v0, v[4:6], s[0:7] dmask:0x2 dim:SQ_RSRC_IMG_2D")
    assert int(w.v[0, 0]) == 0x7F
    go(w, "image_load_mip_pck_sgn v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert int(w.v[0, 0]) == 0xFFFFFF80


def _rne(x: Fraction) -> int:
    """Round to nearest, ties to even."""
    f = math.floor(x)
    d = x - f
    return f + 1 if d > Fraction(1, 2) or (d == Fraction(1, 2) and f % 2) else f


def _to_unorm(x: float, bits: int) -> int:
    if math.isnan(x):
        return 0
    return _rne(min(max(Fraction(x), Fraction(0)), Fraction(1)) * ((1 << bits) - 1))


def _to_snorm(x: float, bits: int) -> int:
    if math.isnan(x):
        return 0
    return _rne(min(max(Fraction(x), Fraction(-1)), Fraction(1)) * ((1 << (bits - 1)) - 1)) & ((1 << bits) - 1)


def test_image_store_conversions_dmask_and_out_of_range() -> None:
    vals = [0.5, 1.5, -0.25, float("nan"), 2.5 / 255, 0.7, 3.5 / 255, 1.0]
    w, mem = setup(tsharp(BASE, 42, 4, 2))                          # 8_8_8_8_UNORM
    w.s[EXEC_LO] = 0b111
    w.v[4, :3], w.v[5, :3] = [0, 3, 4], [0, 1, 0]                 # lane 2: x past the width, dropped
    for c in range(4):
        w.v[c, :3] = [f32(vals[c]), f32(vals[4 + c]), f32(9.0)]
    go(w, "image_store v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    pitch = layout(4, 2, 4, 1)[0][0]
    assert mem.read(BASE, 4) == bytes(_to_unorm(struct.unpack("<f", struct.pack("<f", v))[0], 8) for v in vals[:4])
    want1 = bytes(_to_unorm(struct.unpack("<f", struct.pack("<f", v))[0], 8) for v in vals[4:])
    assert mem.read(BASE + (pitch + 3) * 4, 4) == want1
    assert mem.read(BASE + 4 * 4, 4) == bytes(4) and mem.read(BASE + pitch * 16, 4 * 4) == bytes(16)
    w.s[EXEC_LO] = 1
    w.v[0:2, 0] = [f32(1.0), f32(0.0)]
    w.v[0:2, 0] = [f32(1.0), f32(0.5)]
    go(w, "image_store v[0:1], v[4:5], s[0:7] dmask:0x9 dim:SQ_RSRC_IMG_2D")     # X and W only: Y, Z written 0
    assert mem.read(BASE, 4) == bytes([255, 0, 0, _to_unorm(0.5, 8)])


def test_image_store_writes_the_whole_element_as_the_guides_example_says() -> None:
    """RDNA3 guide, "VGPR Usage", Stores: "if the DMASK=1001, the shader sends Red from VGPR_N and Alpha from
    VGPR_N+1 ... If the image object is RGB, the texel is overwritten with Red from the VGPR_N, Green and Blue set
    to zero, and Alpha from the shader ignored" (here an RG object: 16_16_UINT)."""
    w, mem = setup(tsharp(BASE, 27, 2, 1))                           # 16_16_UINT
    mem.write(BASE, struct.pack("<2H", 0xAAAA, 0xBBBB))
    w.s[EXEC_LO] = 1
    w.v[4:6, 0] = [0, 0]
    w.v[0:2, 0] = [0x1234, 0x5678]
    go(w, "image_store v[0:1], v[4:5], s[0:7] dmask:0x9 dim:SQ_RSRC_IMG_2D")
    assert struct.unpack("<2H", mem.read(BASE, 4)) == (0x1234, 0)


STORE_CASES = [  # (format, register values, expected texel bytes)
    (2, [f32(-0.5)], bytes([_to_snorm(-0.5, 8)])),                              # 8_SNORM: -63.5 -> -64
    (2, [f32(-3.0)], bytes([0x81])),                                            # saturated to -1 -> -127
    (8, [f32(-1.0 / 65534)], struct.pack("<H", _to_snorm(-1.0 / 65534, 16))),  # 16_SNORM
    (7, [f32(0.5)], struct.pack("<H", 32768)),                                  # 65535 / 2 = 32767.5 -> even
    (5, [300], bytes([255])),                                                   # 8_UINT saturates
    (6, [(-200) & M32], bytes([0x80])),                                        # 8_SINT saturates to -128
    (12, [(-5) & M32, 7], struct.pack("<h", -5)),                               # 16_SINT
    (13, [f32(1.0 + 2.0 ** -11)], struct.pack("<e", 1.0)),                      # 16_FLOAT: nearest even
    (22, [0x7F800001], struct.pack("<I", 0x7F800001)),                          # 32 bits: the register
    (40, [5, 1023, 0, 7], struct.pack("<I", 5 | 1023 << 10 | 3 << 30)),         # 2_10_10_10_UINT
    (36, [f32(1.0), f32(0.5), f32(0.25), f32(1 / 3)],
     struct.pack("<I", 1023 | _to_unorm(0.5, 10) << 10 | _to_unorm(0.25, 10) << 20 | _to_unorm(1 / 3, 2) << 30)),
]


@pytest.mark.parametrize("fmt,regs,want", STORE_CASES, ids=[str(i) for i in range(len(STORE_CASES))])
def test_image_store_number_formats(fmt: int, regs: list[int], want: bytes) -> None:
    w, mem = setup(tsharp(BASE, fmt, 2, 2))
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [1, 1]
    for i, r in enumerate(regs):
        w.v[i, 0] = r
    n = len(regs)
    data = "v0" if n == 1 else f"v[0:{n - 1}]"
    go(w, f"image_store {data}, v[8:9], s[0:7] dmask:0x{(1 << n) - 1:x} dim:SQ_RSRC_IMG_2D")
    pitch = layout(2, 2, len(want), 1)[0][0]
    assert mem.read(BASE + (pitch + 1) * len(want), len(want)) == want


@pytest.mark.parametrize("mode,want", [("even", (0x3C01, 0xBC02, 0x7C00, 0x3C00)),
                                       ("zero", (0x3C00, 0xBC01, 0x7BFF, 0x3C00))])
def test_16_float_store_rounding_is_configurable(mode: str, want: tuple, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.mocks.rdna3 import image

    monkeypatch.setattr(image, "FLOAT_STORE_ROUNDING", mode)
    w, mem = setup(tsharp(BASE, 57, 2, 1))                           # 16_16_16_16_FLOAT
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [0, 0]
    w.v[0:4, 0] = [f32(1 + 2.0 ** -11 + 2.0 ** -20), f32(-(1 + 3 * 2.0 ** -11)), f32(70000.0), f32(1.0)]
    go(w, "image_store v[0:3], v[8:9], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    assert struct.unpack("<4H", mem.read(BASE, 8)) == want


def test_store_mip_pck_d16_and_refusals() -> None:
    w, mem = setup(tsharp(BASE, 51, 8, 4, max_mip=2, last_level=2), 1 << 17)     # 16_16_16_16_UNORM
    pitches, offs, _ = layout(8, 4, 8, 3)
    w.s[EXEC_LO] = 1
    w.v[8:11, 0] = [1, 1, 1]
    w.v[0:2, 0] = [f16(0.5) | f16(2.0) << 16, f16(float("nan"))]
    go(w, "image_store_mip v[0:1], v[8:10], s[0:7] dmask:0xb dim:SQ_RSRC_IMG_2D d16")    # X, Y, W from halves
    at = BASE + offs[1] + (pitches[1] + 1) * 8
    assert struct.unpack("<4H", mem.read(at, 8)) == (32768, 65535, 0, 0)
    w.v[0:2, 0] = [0x12345, 0xFFFF_8001]
    go(w, "image_store_mip_pck v[0:1], v[8:10], s[0:7] dmask:0x6 dim:SQ_RSRC_IMG_2D")    # Y, Z raw low bits
    assert struct.unpack("<4H", mem.read(at, 8)) == (0, 0x2345, 0x8001, 0)          # X, W left out: 0
    go(w, "image_store_pck v[0:1], v[8:9], s[0:7] dmask:0x9 dim:SQ_RSRC_IMG_2D")         # X, W of level 0
    assert struct.unpack("<4H", mem.read(BASE + offs[0] + (pitches[0] + 1) * 8, 8)) == (0x2345, 0, 0, 0x8001)
    w.s[1] = (w.s[1] & ~(0xFF << 20)) | 67 << 20                        # 5_9_9_9_FLOAT: no raw _pck form
    with pytest.raises(ShaderFault, match="5_9_9_9_FLOAT"):
        go(w, "image_store_pck v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")


ATOMICS = {  # op -> (old, data, cmp) -> new (32-bit), the guide's pseudocode
    "swap": lambda o, d, c: d, "cmpswap": lambda o, d, c: d if o == c else o,
    "add": lambda o, d, c: (o + d) & M32, "sub": lambda o, d, c: (o - d) & M32,
    "smin": lambda o, d, c: min(o, d, key=lambda v: v - (v >> 31 << 32)),
    "umin": lambda o, d, c: min(o, d),
    "smax": lambda o, d, c: max(o, d, key=lambda v: v - (v >> 31 << 32)),
    "umax": lambda o, d, c: max(o, d), "and": lambda o, d, c: o & d, "or": lambda o, d, c: o | d,
    "xor": lambda o, d, c: o ^ d, "inc": lambda o, d, c: 0 if o >= d else o + 1,
    "dec": lambda o, d, c: d if o == 0 or o > d else o - 1,
}


@pytest.mark.parametrize("op", sorted(ATOMICS))
def test_image_atomics_lane_order_and_return(op: str) -> None:
    w, mem = setup(tsharp(BASE, 20, 4, 2))                           # 32_UINT
    pitch = layout(4, 2, 4, 1)[0][0]
    cells = {(0, 0): 5, (3, 1): 0xFFFFFFF0}
    for (x, y), v in cells.items():
        mem.write(BASE + (y * pitch + x) * 4, struct.pack("<I", v))
    lanes = [((0, 0), 7, 5), ((3, 1), 3, 0), ((0, 0), 0x80000000, 7), ((4, 0), 1, 1)]   # lane 3 out of range
    w.s[EXEC_LO] = 0b1111
    for i, ((x, y), d, c) in enumerate(lanes):
        w.v[4:6, i] = [x, y]
        w.v[0:2, i] = [d, c]
    data = "v[0:1]" if op == "cmpswap" else "v0"
    go(w, f"image_atomic_{op} {data}, v[4:5], s[0:7] dmask:0x{3 if op == 'cmpswap' else 1:x} "
          f"dim:SQ_RSRC_IMG_2D glc")
    state = dict(cells)
    olds = []
    for xy, d, c in lanes:
        if xy not in state:
            olds.append(0)
            continue
        olds.append(state[xy])
        state[xy] = ATOMICS[op](state[xy], d, c)
    assert [int(w.v[0, i]) for i in range(4)] == olds
    for (x, y), v in state.items():
        assert struct.unpack("<I", mem.read(BASE + (y * pitch + x) * 4, 4))[0] == v, (op, x, y)


def test_image_atomic_64_bit_and_no_return() -> None:
    w, mem = setup(tsharp(BASE, 48, 2, 1, typ=T1D))                  # 32_32_UINT
    mem.write(BASE + 8, struct.pack("<Q", 0xFFFF_FFFF_FFFF_FFFE))
    w.s[EXEC_LO] = 1
    w.v[4, 0] = 1
    w.v[0:2, 0] = [3, 0]
    go(w, "image_atomic_add v[0:1], v4, s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_1D glc")
    assert struct.unpack("<Q", mem.read(BASE + 8, 8))[0] == 1 and (int(w.v[0, 0]), int(w.v[1, 0])) == (M32 - 1, M32)
    w.v[0:4, 0] = [9, 9, 1, 0]
    go(w, "image_atomic_cmpswap v[0:3], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D")
    assert struct.unpack("<Q", mem.read(BASE + 8, 8))[0] == 9 << 32 | 9 and int(w.v[0, 0]) == 9   # no GLC: kept
    w.s[1] = (w.s[1] & ~(0xFF << 20)) | 20 << 20                        # a 64-bit atomic on 32_UINT: refused
    with pytest.raises(ShaderFault, match="64-bit image atomic"):
        go(w, "image_atomic_add v[0:1], v4, s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_1D glc")


def test_image_get_resinfo() -> None:
    w, _ = setup(tsharp(BASE, 42, 70, 9, typ=T2DA, depth=4, base_array=1, base_level=1, last_level=3, max_mip=5))
    w.s[EXEC_LO] = 0b111
    w.v[4, :3] = [0, 2, 3]                                              # levels 1, 3 and one past LAST_LEVEL
    go(w, "image_get_resinfo v[0:3], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D_ARRAY")
    assert [[int(w.v[r, i]) for r in range(4)] for i in range(3)] == [[35, 4, 4, 3], [8, 1, 4, 3], [0, 0, 0, 3]]
    w, _ = setup(tsharp(BASE, 42, 16, 8, typ=T3D, depth=5, last_level=2, max_mip=2))
    w.s[EXEC_LO] = 1
    w.v[4, 0] = 2
    go(w, "image_get_resinfo v[0:2], v4, s[0:7] dmask:0xd dim:SQ_RSRC_IMG_3D")     # X, Z, W
    assert [int(w.v[r, 0]) for r in range(3)] == [4, 1, 3]


def test_refusals() -> None:
    w, _ = setup(tsharp(BASE, 20, 4, 4, sw_mode=9))
    w.s[EXEC_LO] = 1
    with pytest.raises(ShaderFault, match="SW_MODE 9"):
        go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    for fmt, why in ((75, "32_FLOAT_CLAMP"), (73, "1_UNORM: one bit"), (84, "GB_GR_UINT: a 2x1 subsampled"),
                     (122, "BC7_SRGB: a block-compressed"), (90, "not a gfx11 image format")):
        w.s[0:8] = tsharp(BASE, fmt, 4, 4)
        with pytest.raises(ShaderFault, match=f"image format {fmt} \\({why}"):
            go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 20, 4, 4, typ=T2DA)
    with pytest.raises(ShaderFault, match="DIM 1 with a T# of TYPE 13"):
        go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 60, 4, 4, sw_mode=24)                      # 96-bit texels tile in no addrlib mode
    with pytest.raises(ShaderFault, match="12-byte elements"):
        go(w, "image_load v[0:2], v[4:5], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 60, 4, 4, pitch=100)                        # 96-bit with a pitch field: refused
    with pytest.raises(ShaderFault, match="96-bit"):
        go(w, "image_load v[0:2], v[4:5], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 113, 4, 4)
    words = list(asm("image_msaa_load v[0:3], v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA"))  # a copy: asm caches
    words[0] |= 0x2 << 8                # DMASK 0x3 (MIMG word 0 bits 11:8; llvm-mc-19 will not encode it)
    assert decode_at(struct.pack("<2I", *words), 0, "gfx11").fields["dmask"] == 3
    with pytest.raises(Unimplemented, match="one component"):
        run(words, w)
    words = list(asm("image_msaa_load v[0:3], v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA"))  # a copy: asm caches
    words[0] = words[0] & ~(7 << 2) | 1 << 2          # DIM 2D (word 0 bits 4:2; llvm-mc-19 wants an MSAA DIM)
    assert decode_at(struct.pack("<2I", *words), 0, "gfx11").fields["dim"] == 1
    with pytest.raises(Unimplemented, match="DIM 1"):
        run(words, w)
    with pytest.raises(Unimplemented, match="LWE"):
        go(w, "image_load v[0:4], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D tfe lwe")
    with pytest.raises(ShaderFault, match="BC3_UNORM"):  # image_sample: sampler.py, texels through image.py
        go(w, "image_sample v[0:3], v[4:5], s[0:7], s[12:15] dmask:0xf dim:SQ_RSRC_IMG_2D")


TEXTS = [
    "image_load v[0:3], v[4:5], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D",
    "image_load v[0:2], [v4, v5], s[8:15] dmask:0xf dim:SQ_RSRC_IMG_2D_ARRAY a16 tfe d16",
    "image_load v0, [v4, v6, v9, v11], s[0:7] dmask:0x4 dim:SQ_RSRC_IMG_2D_MSAA_ARRAY unorm glc slc dlc",
    "image_load_mip v[0:1], v[4:7], s[0:7] dmask:0x9 dim:SQ_RSRC_IMG_CUBE",
    "image_load_pck_sgn v[0:3], v[4:6], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_3D",
    "image_load_mip_pck v1, v[4:5], s[0:7] dmask:0x2 dim:SQ_RSRC_IMG_1D_ARRAY a16",
    "image_store v[1:2], v[4:5], s[96:103] dmask:0x3 dim:SQ_RSRC_IMG_2D",
    "image_store_mip v[1:2], v[4:5], s[4:11] dmask:0xf dim:SQ_RSRC_IMG_1D d16",
    "image_store_pck v1, v4, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D glc",
    "image_store_mip_pck v[10:12], [v4, v2, v1, v0], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_3D",
    "image_atomic_cmpswap v[1:2], v[4:5], s[96:103] dmask:0x3 dim:SQ_RSRC_IMG_2D glc",
    "image_atomic_add v[0:1], v4, s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_1D",
    "image_atomic_dec v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_ARRAY slc",
    "image_get_resinfo v[0:3], v4, s[0:7] dmask:0xf dim:SQ_RSRC_IMG_1D",
    "image_msaa_load v[0:3], v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA",
]


def test_decoder_text_equals_llvm_mc() -> None:
    out = subprocess.run(["llvm-mc-19", "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"], input="\n".join(TEXTS),
                         capture_output=True, text=True, check=True).stdout
    lines = [ln for ln in out.splitlines() if "encoding:" in ln]
    assert len(lines) == len(TEXTS)
    for ln in lines:
        text, enc = ln.split(";")
        raw = bytes(int(x, 16) for x in re.search(r"\[([^\]]*)\]", enc).group(1).split(","))
        assert decode_at(raw + bytes(16), 0, "gfx11").text == text.strip()


# ---- end to end: a kernel clang-19 compiles from LLVM IR (the image intrinsics), checked on the host -------------

IMAGE_KERNEL = """
target triple = "amdgcn-amd-amdhsa"

declare i32 @llvm.amdgcn.workitem.id.x()
declare i32 @llvm.amdgcn.workgroup.id.x()
declare <4 x float> @llvm.amdgcn.image.load.2d.v4f32.i32(i32, i32, i32, <8 x i32>, i32, i32)
declare void @llvm.amdgcn.image.store.2d.v4f32.i32(<4 x float>, i32, i32, i32, <8 x i32>, i32, i32)
declare i32 @llvm.amdgcn.image.atomic.add.1d.i32.i32(i32, i32, <8 x i32>, i32, i32)

define amdgpu_kernel void @k(<8 x i32> %src, <8 x i32> %dst, <8 x i32> %cnt) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %y = call i32 @llvm.amdgcn.workgroup.id.x()
  %v = call <4 x float> @llvm.amdgcn.image.load.2d.v4f32.i32(i32 15, i32 %x, i32 %y, <8 x i32> %src, i32 0, i32 0)
  %w = fmul <4 x float> %v, <float 2.0, float 2.0, float 2.0, float 2.0>
  call void @llvm.amdgcn.image.store.2d.v4f32.i32(<4 x float> %w, i32 15, i32 %x, i32 %y, <8 x i32> %dst, i32 0, i32 0)
  %b = and i32 %x, 3
  %o = call i32 @llvm.amdgcn.image.atomic.add.1d.i32.i32(i32 1, i32 %b, <8 x i32> %cnt, i32 0, i32 0)
  ret void
}
"""


def _image_kernel_run(obj: bytes, width: int, groups: int, pixels: bytes) -> tuple[list, tuple, dict]:
    """Run the compiled IMAGE_KERNEL on ``groups`` rows of ``width`` 8_8_8_8_UNORM texels: (the 16x4_FLOAT
    output texels row by row, the four 32_UINT counters, the dispatch result as a dict)."""
    from tinyhw.mocks.rdna3 import dispatch_regs, load_kernel, run_dispatch

    mem = FlatMemory(0x7F00_0000_0000, 1 << 20)
    k = load_kernel(obj, mem)
    pin = layout(width, groups, 4, 1)[0][0]
    rows = [pixels[4 * width * y:4 * width * (y + 1)].ljust(4 * pin, b"\0") for y in range(groups)]
    srca = mem.alloc(b"".join(rows))
    pout = layout(width, groups, 8, 1)[0][0]
    dsta = mem.alloc(bytes(pout * 8 * groups))
    cnta = mem.alloc(struct.pack("<64I", *([100] * 64)))
    words = (tsharp(srca, 42, width, groups) + tsharp(dsta, 57, width, groups)       # 8_8_8_8_UNORM, 16x4_FLOAT
             + tsharp(cnta, 20, 4, typ=T1D))                                           # 32_UINT, 1D
    kernarg = mem.alloc(struct.pack("<24I", *words), align=64)
    res = run_dispatch(dispatch_regs(k.kd, k.entry, kernarg, (groups, 1, 1), (width, 1, 1)), mem)
    out = [list(struct.unpack("<4e", mem.read(dsta + (y * pout + x) * 8, 8))) for y in range(groups)
           for x in range(width)]
    return out, struct.unpack("<4I", mem.read(cnta, 16)), res.to_doc()


@pytest.mark.skipif(not shutil.which("clang-19"), reason="clang-19 is not installed")
def test_clang_compiled_image_kernel_runs_as_on_the_host(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.mocks.rdna3 import dispatch

    src = tmp_path / "k.ll"
    src.write_text(IMAGE_KERNEL)
    subprocess.run(["clang-19", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-O2", "-nogpulib", "-c", str(src),
                    "-o", str(tmp_path / "k.o")], check=True)
    width, groups = 32, 4
    pixels = bytes((i * 37 + 11) & 0xFF for i in range(width * groups * 4))
    out, counts, doc = _image_kernel_run((tmp_path / "k.o").read_bytes(), width, groups, pixels)
    for i, got in enumerate(out):
        doubled = [2 * struct.unpack("<f", struct.pack("<I", unorm(b, 8)))[0] for b in pixels[4 * i:4 * i + 4]]
        assert got == [struct.unpack("<e", struct.pack("<e", d))[0] for d in doubled], i   # f16, nearest even
    assert counts == (100 + 8 * groups,) * 4
    assert {"image_load", "image_store", "image_atomic_add"} <= set(doc["per_mnemonic"])
    vector = sum(n for m, n in doc["per_mnemonic"].items() if m.startswith(("v_", "image_")))
    assert doc["active_lane_instructions"] == width * vector       # image instructions count as vector ones
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)                    # one workgroup at a time: the same
    assert _image_kernel_run((tmp_path / "k.o").read_bytes(), width, groups, pixels) == (out, counts, doc)
