"""The image formats past 63, 96-bit images, stores to the scaled and packed-float formats and the linear mip
chain's sizes (tinyhw/mocks/rdna3/image.py, imgformat.py).

Instructions are assembled by llvm-mc-19 (skipped without it) and run on one wave. The format definitions are
restated here (the RDNA3 guide's "Buffer and Image Data Formats" numbers; a packed name lists its components from
the most significant bits, so X is in the low bits), and every expected value comes from integers, ``struct``,
``fractions.Fraction`` and ``decimal`` (the sRGB curve at 60 digits), never from the core.
"""

from __future__ import annotations

import math
import shutil
import struct
from decimal import Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest
from rdna3isa import f16, f32, go, round_float, wave

from tinyhw.mocks.rdna3 import FlatMemory, ShaderFault

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
M32 = (1 << 32) - 1
EXEC_LO = 126
IDENT = 4 | 5 << 3 | 6 << 6 | 7 << 9
T1D, T2D = 8, 9
BASE = 0x10000

# format -> (texel bytes, [(shift, bits, kind) per component from X]); the bit fields read from the name, most
# significant first (5_6_5: Z 15:11, Y 10:5, X 4:0; 8_24: Y 31:24, X 23:0; X24_8_32: unused 63:40, Y 39:32, X 31:0)
FMTS = {
    64: (1, [(0, 8, "srgb")]),
    65: (2, [(0, 8, "srgb"), (8, 8, "srgb")]),
    66: (4, [(0, 8, "srgb"), (8, 8, "srgb"), (16, 8, "srgb"), (24, 8, "unorm")]),
    68: (2, [(0, 5, "unorm"), (5, 6, "unorm"), (11, 5, "unorm")]),
    69: (2, [(0, 5, "unorm"), (5, 5, "unorm"), (10, 5, "unorm"), (15, 1, "unorm")]),
    70: (2, [(0, 1, "unorm"), (1, 5, "unorm"), (6, 5, "unorm"), (11, 5, "unorm")]),
    71: (2, [(0, 4, "unorm"), (4, 4, "unorm"), (8, 4, "unorm"), (12, 4, "unorm")]),
    72: (1, [(0, 4, "unorm"), (4, 4, "unorm")]),
    76: (4, [(0, 24, "unorm"), (24, 8, "unorm")]),
    77: (4, [(0, 24, "uint"), (24, 8, "uint")]),
    78: (4, [(0, 8, "unorm"), (8, 24, "unorm")]),
    79: (4, [(0, 8, "uint"), (8, 24, "uint")]),
    80: (8, [(0, 32, "uint"), (32, 8, "uint")]),
    81: (8, [(0, 32, "float"), (32, 8, "uint")]),
}


def tsharp(fmt: int, width: int, height: int = 1, *, typ: int = T2D, max_mip: int = 0, last_level: int = 0,
           dst_sel: int = IDENT) -> list[int]:
    """Eight T# dwords (gfx11 SQ_IMG_RSRC_WORD*), linear, no pitch field."""
    return [BASE >> 8 & M32, max_mip << 16 | fmt << 20 | ((width - 1) & 3) << 30,
            (width - 1) >> 2 | (height - 1) << 14, dst_sel | last_level << 16 | typ << 28, 0, 0, 0, 0]


def setup(words: list[int], size: int = 1 << 18):
    mem = FlatMemory(BASE, size)
    w = wave(mem=mem)
    w.s[0:8] = words
    return w, mem


def pitch_of(width: int, bpe: int) -> int:
    """Level 0's pitch in texels: the width aligned to 256 bytes."""
    return math.ceil(width * bpe / 256) * 256 // bpe


def srgb_exact(code: int) -> Decimal:
    """The sRGB code's linear value (D3D / Vulkan: c <= 0.04045: c / 12.92, else ((c + 0.055) / 1.055) ^ 2.4)."""
    with localcontext() as ctx:
        ctx.prec = 60
        c = Decimal(code) / 255
        return c / Decimal("12.92") if c <= Decimal("0.04045") else ((c + Decimal("0.055")) / Decimal("1.055")) ** \
            Decimal("2.4")


def expect(kind: str, raw: int, bits: int) -> Fraction | int | Decimal:
    if kind == "unorm":
        return Fraction(raw, (1 << bits) - 1)
    if kind == "srgb":
        return srgb_exact(raw)
    return raw


def reg_bits(kind: str, v: Fraction | int | Decimal, d16: bool = False) -> int:
    """The register bits of a loaded component: the integer for UINT, the float nearest the exact value, 32-bit
    FLOAT's bits."""
    if kind == "uint":
        return int(v) & (0xFFFF if d16 else M32)
    if kind == "float":
        return int(v)
    return round_float(Fraction(v), "f16" if d16 else "f32")


def load_one(w, fmt: int, x: int, y: int, dmask: int = 0xF, d16: bool = False) -> list[int]:
    w.s[EXEC_LO] = 1
    w.v[8, 0], w.v[9, 0] = x, y
    n = bin(dmask).count("1")
    regs = -(-n // 2) if d16 else n
    dst = "v0" if regs == 1 else f"v[0:{regs - 1}]"
    go(w, f"image_load {dst}, v[8:9], s[0:7] dmask:0x{dmask:x} dim:SQ_RSRC_IMG_2D" + (" d16" if d16 else ""))
    return [int(w.v[i, 0]) for i in range(regs)]


# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", sorted(FMTS))
def test_load_component_layout_and_conversion(fmt: int) -> None:
    """A texel of distinct field values at (3, 2): each component from its bit field, converted as its kind says;
    a missing Y/Z reads 0 and a missing W one."""
    bpe, comps = FMTS[fmt]
    w, mem = setup(tsharp(fmt, 6, 4))
    word, fields = 0, []
    for i, (sh, bits, _) in enumerate(comps):
        val = ((0x5A5A5A5A5A >> i) ^ (0x3C3C3C3 << i)) & ((1 << bits) - 1)
        if fmt == 81 and i == 0:
            val = f32(-6.5)
        fields.append(val)
        word |= val << sh
    mem.write(BASE + (2 * pitch_of(6, bpe) + 3) * bpe, word.to_bytes(bpe, "little"))
    got = load_one(w, fmt, 3, 2)
    one = 1 if comps[0][2] == "uint" else f32(1.0)
    want = [reg_bits(k, expect(k, f, b)) for (_, b, k), f in zip(comps, fields, strict=True)]
    want += [0, 0, one][len(comps) - 1:] if len(comps) < 4 else []
    assert got == want[:4], [hex(g) for g in got]


def test_srgb_decode_is_the_nearest_f32_and_f16_for_all_256_codes() -> None:
    """8_SRGB of width 256: texel x holds code x; every code loads as the f32 (D16: f16) nearest the exact curve."""
    w, mem = setup(tsharp(64, 256, 1))
    mem.write(BASE, bytes(range(256)))
    for d16 in (False, True):
        got = []
        for k in range(8):
            w.s[EXEC_LO] = M32
            w.v[8, :32] = np.arange(32 * k, 32 * k + 32)
            w.v[9, :32] = 0
            go(w, "image_load v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D" + (" d16" if d16 else ""))
            got += [int(r) & (0xFFFF if d16 else M32) for r in w.v[0, :32]]
        want = [round_float(Fraction(srgb_exact(c)), "f16" if d16 else "f32") for c in range(256)]
        assert got == want, [c for c in range(256) if got[c] != want[c]]


def _f32_below(x: Decimal) -> float:
    """The largest f32 below the (irrational, 60-digit) value ``x`` > 0."""
    b = f32(float(x))
    if Fraction(struct.unpack("<f", struct.pack("<I", b))[0]) >= Fraction(x):
        b -= 1
    return struct.unpack("<f", struct.pack("<I", b))[0]


def test_srgb_encode_rounds_to_the_right_code_on_both_sides_of_every_boundary() -> None:
    """FLOAT -> SRGB (D3D): L <= 0.0031308: 12.92 L, else 1.055 L^(1/2.4) - 0.055, then x 255 rounded to nearest.
    Code k's upper boundary is the L whose encoding is exactly k + 1/2 (inverting the curve); the f32 just below
    it must store k, the next f32 k + 1."""
    vals, want = [], []
    with localcontext() as ctx:
        ctx.prec = 60
        for k in range(255):
            s = (Decimal(k) + Decimal("0.5")) / 255
            t = s / Decimal("12.92") if s <= Decimal("0.04045") else ((s + Decimal("0.055")) / Decimal("1.055")) \
                ** Decimal("2.4")
            lo = _f32_below(t)
            hi = struct.unpack("<f", struct.pack("<I", f32(lo) + 1))[0]
            vals += [lo, hi]
            want += [k, k + 1]
    vals += [float("nan"), -1.0, 2.0, 1.0, 0.0]
    want += [0, 0, 255, 255, 0]
    w, mem = setup(tsharp(64, 1024, 1))
    for start in range(0, len(vals), 32):
        chunk = vals[start:start + 32]
        w.s[EXEC_LO] = (1 << len(chunk)) - 1
        w.v[8, :len(chunk)] = np.arange(start, start + len(chunk))
        w.v[9, :len(chunk)] = 0
        w.v[0, :len(chunk)] = [f32(v) for v in chunk]
        go(w, "image_store v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    got = list(mem.read(BASE, len(vals)))
    assert got == want, [(i, vals[i], got[i], want[i]) for i in range(len(vals)) if got[i] != want[i]][:5]


def test_srgb_store_leaves_alpha_linear() -> None:
    w, mem = setup(tsharp(66, 4, 1))
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [1, 0]
    w.v[0:4, 0] = [f32(0.5), f32(0.0), f32(1.0), f32(0.5)]
    go(w, "image_store v[0:3], v[8:9], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    # 0.5 linear: 1.055 * 0.5^(1/2.4) - 0.055 = 0.7353..., x 255 = 187.5... -> 188; alpha 0.5 x 255 = 127.5 -> 128
    assert list(mem.read(BASE + 4, 4)) == [188, 0, 255, 128]


# --- 5_9_9_9 shared exponent ---------------------------------------------------------------------------------


def rgb9e5_value(m: int, e: int) -> Fraction:
    return Fraction(m) * Fraction(2) ** (e - 15 - 9)


def rgb9e5_encode(rgb: list[float]) -> int:
    """Vulkan's "Shared Exponent Conversion" (N = 9, B = 15, Emax = 31), exact with Fractions; NaN as 0."""
    top = Fraction(511, 512) * 2 ** 16
    c = [Fraction(0) if math.isnan(v) else min(max(Fraction(v), Fraction(0)), top) for v in rgb]
    mx = max(c)
    fl = -16
    if mx > 0:
        fl = math.floor(math.log2(mx))
        while Fraction(2) ** fl > mx:
            fl -= 1
        while Fraction(2) ** (fl + 1) <= mx:
            fl += 1
    e = max(-16, fl) + 1 + 15
    if math.floor(mx / Fraction(2) ** (e - 24) + Fraction(1, 2)) == 512:
        e += 1
    ms = [math.floor(v / Fraction(2) ** (e - 24) + Fraction(1, 2)) for v in c]
    return ms[0] | ms[1] << 9 | ms[2] << 18 | e << 27


def test_5_9_9_9_load_decodes_mantissas_with_the_shared_exponent() -> None:
    w, mem = setup(tsharp(67, 4, 2))
    cases = [(511, 0, 1, 31), (1, 300, 256, 0), (0, 0, 0, 15), (100, 200, 300, 20)]
    for i, (r, g, b, e) in enumerate(cases):
        mem.write(BASE + i * 4, struct.pack("<I", r | g << 9 | b << 18 | e << 27))
    for i, (r, g, b, e) in enumerate(cases):
        got = load_one(w, 67, i, 0)
        assert got == [round_float(rgb9e5_value(m, e), "f32") for m in (r, g, b)] + [f32(1.0)]
        got = load_one(w, 67, i, 0, d16=True)
        hs = [round_float(rgb9e5_value(m, e), "f16") for m in (r, g, b)]
        assert got == [hs[0] | hs[1] << 16, hs[2] | f16(1.0) << 16]


STORE_9E5 = [[1.0, 0.5, 0.25], [65408.0, 1e9, -3.0], [0.0, 0.0, 0.0], [1.0 - 2 ** -11, 3e-7, 2 ** -24],
             [511.75, 1.0, 0.0], [float("nan"), 2.0, 0.001], [123.456, 0.0009765625, 7.0], [2 ** -30, 2 ** -25, 0.0],
             [1023.9, 1.0, 1.0]]


def test_5_9_9_9_store_follows_the_shared_exponent_rule_and_round_trips() -> None:
    w, mem = setup(tsharp(67, 16, 1))
    w.s[EXEC_LO] = (1 << len(STORE_9E5)) - 1
    n = len(STORE_9E5)
    w.v[8, :n] = np.arange(n)
    w.v[9, :n] = 0
    for c in range(3):
        w.v[c, :n] = [f32(v[c]) for v in STORE_9E5]
    go(w, "image_store v[0:2], v[8:9], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D")
    words = list(struct.unpack(f"<{n}I", mem.read(BASE, 4 * n)))
    want = [rgb9e5_encode([struct.unpack("<f", struct.pack("<I", f32(x)))[0] for x in v]) for v in STORE_9E5]
    assert [hex(x) for x in words] == [hex(x) for x in want]
    w.v[0:4, :n] = 0
    go(w, "image_load v[0:2], v[8:9], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D")
    for lane, word in enumerate(want):
        e = word >> 27
        assert [int(w.v[c, lane]) for c in range(3)] == [round_float(rgb9e5_value(word >> (9 * c) & 511, e), "f32")
                                                          for c in range(3)]


# --- 10_11_11 / 11_11_10 FLOAT stores ---------------------------------------------------------------------------


def ufloat_value(v: int, mb: int) -> Fraction | None:
    e, m = v >> mb, v & ((1 << mb) - 1)
    if e == 31:
        return None
    return Fraction(m, 1 << mb) * Fraction(2) ** -14 if e == 0 else (1 + Fraction(m, 1 << mb)) * Fraction(2) ** (e - 15)


def ufloat_encode(x: float, bits: int, mode: str) -> int:
    """The unsigned float nearest ``x`` (ties to the even encoding; past the largest finite by half a step or more:
    infinity) for "even", the largest not above ``x`` for "zero"; negative 0, NaN the all-ones mantissa."""
    mb = bits - 5
    if math.isnan(x):
        return (31 << mb) | ((1 << mb) - 1)
    if math.isinf(x):
        return 31 << mb if x > 0 else 0
    a = max(Fraction(x), Fraction(0))
    finite = [(ufloat_value(v, mb), v) for v in range(31 << mb)]
    if mode == "zero":
        return max(v for val, v in finite if val <= a)
    top, step = finite[-1][0], Fraction(2) ** (15 - mb)
    if a >= top + step / 2:
        return 31 << mb
    best = min(finite, key=lambda t: (abs(t[0] - a), t[1] & 1))
    return best[1]


UF_VALUES = [1.0, 0.1, 1 + 2 ** -7, 1 + 3 * 2 ** -7, 65000.0, 64512.0, 64600.0, 70000.0, 2 ** -15, 2 ** -21,
             3 * 2 ** -22, -5.0, float("nan"), float("inf"), float("-inf"), 6e-5, 2 ** -14 - 2 ** -24, 12345.678]


@pytest.mark.parametrize("mode", ["even", "zero"])
@pytest.mark.parametrize("fmt,fields", [(30, [(0, 11), (11, 11), (22, 10)]), (31, [(0, 10), (10, 11), (21, 11)])])
def test_packed_float_store_rounding(fmt: int, fields: list, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.mocks.rdna3 import image

    monkeypatch.setattr(image, "FLOAT_STORE_ROUNDING", mode)
    n = len(UF_VALUES)
    w, mem = setup(tsharp(fmt, 32, 1))
    w.s[EXEC_LO] = (1 << n) - 1
    w.v[8, :n] = np.arange(n)
    w.v[9, :n] = 0
    for c in range(3):                      # component c takes the values rotated by c
        w.v[c, :n] = [f32(UF_VALUES[(i + c) % n]) for i in range(n)]
    go(w, "image_store v[0:2], v[8:9], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D")
    words = struct.unpack(f"<{n}I", mem.read(BASE, 4 * n))
    for i, word in enumerate(words):
        for c, (sh, bits) in enumerate(fields):
            x = struct.unpack("<f", struct.pack("<I", f32(UF_VALUES[(i + c) % n])))[0]
            assert word >> sh & ((1 << bits) - 1) == ufloat_encode(x, bits, mode), (i, c, x)


# --- scaled stores ------------------------------------------------------------------------------------------------


def rne_sat(x: float, lo: int, hi: int) -> int:
    if math.isnan(x):
        return 0
    a = Fraction(x)
    n = math.floor(a)
    if a - n > Fraction(1, 2) or (a - n == Fraction(1, 2) and n & 1):
        n += 1
    return min(max(n, lo), hi)


@pytest.mark.parametrize("fmt,bits,signed,size", [(3, 8, False, 1), (4, 8, True, 1), (9, 16, False, 2),
                                                  (10, 16, True, 2)])
def test_scaled_store_rounds_to_nearest_even_and_saturates(fmt: int, bits: int, signed: bool, size: int) -> None:
    vals = [2.5, 3.5, -2.5, 1e9, -1e9, float("nan"), 254.49, 127.5, -128.5, 0.5, 65535.5, -0.0]
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    n = len(vals)
    w, mem = setup(tsharp(fmt, 16, 1))
    w.s[EXEC_LO] = (1 << n) - 1
    w.v[8, :n] = np.arange(n)
    w.v[9, :n] = 0
    w.v[0, :n] = [f32(v) for v in vals]
    go(w, "image_store v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    got = [int.from_bytes(mem.read(BASE + i * size, size), "little", signed=signed) for i in range(n)]
    assert got == [rne_sat(v, lo, hi) for v in vals]
    go(w, "image_load v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")          # back: the integer as a float
    assert [int(r) for r in w.v[0, :n]] == [f32(float(g)) for g in got]


def test_packed_scaled_store_2_10_10_10_sscaled() -> None:
    w, mem = setup(tsharp(39, 4, 1))
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [0, 0]
    w.v[0:4, 0] = [f32(-600.0), f32(511.5), f32(-1.5), f32(1.5)]
    go(w, "image_store v[0:3], v[8:9], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    want = (-512 & 1023) | 511 << 10 | (-2 & 1023) << 20 | 1 << 30          # saturated, RNE: 511.5 -> 511
    assert struct.unpack("<I", mem.read(BASE, 4))[0] == want


# --- round trips of the new formats ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fmt", [f for f in sorted(FMTS) if f not in (64, 65, 66)])
def test_store_then_load_round_trips(fmt: int) -> None:
    """Values exactly representable in each component store to the field value and load back unchanged."""
    bpe, comps = FMTS[fmt]
    w, mem = setup(tsharp(fmt, 4, 2))
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [2, 1]
    fields, regs = [], []
    for i, (_, bits, kind) in enumerate(comps):
        f = (i * 5 + 3) % (1 << bits) if bits < 32 else 0xC0DE1234
        fields.append(f)
        regs.append(f if kind == "uint" else f32(-2.25) if kind == "float" else
                    f32(float(Fraction(f, (1 << bits) - 1))))
    for i, r in enumerate(regs):
        w.v[i, 0] = r
    n = len(comps)
    go(w, f"image_store v[0:{n - 1}], v[8:9], s[0:7] dmask:0x{(1 << n) - 1:x} dim:SQ_RSRC_IMG_2D")
    word = int.from_bytes(mem.read(BASE + (pitch_of(4, bpe) + 2) * bpe, bpe), "little")
    for (sh, bits, kind), f in zip(comps, fields, strict=True):
        if kind != "float":
            assert word >> sh & ((1 << bits) - 1) == f, (sh, bits)
    got = load_one(w, fmt, 2, 1, dmask=(1 << n) - 1)
    assert got == [regs[i] if comps[i][2] != "unorm" else reg_bits("unorm", Fraction(fields[i], (1 << b) - 1))
                   for i, (_, b, _) in enumerate(comps)]


def test_the_sampler_reads_the_new_formats_through_read_texels() -> None:
    from tinyhw.mocks.rdna3.image import parse_tsharp, read_texels

    w, mem = setup(tsharp(66, 4, 1))
    mem.write(BASE + 4, bytes([200, 5, 0, 51]))
    got = read_texels(mem, parse_tsharp(w.s[0:8]), np.array([1]), np.array([0]), np.array([0]), np.array([0]))
    assert [round_float(Fraction(v), "f32") for v in got[0]] == [
        round_float(Fraction(srgb_exact(200)), "f32"), round_float(Fraction(srgb_exact(5)), "f32"), 0,
        round_float(Fraction(51, 255), "f32")]
    w, mem = setup(tsharp(67, 4, 1))
    mem.write(BASE, struct.pack("<I", 3 | 256 << 9 | 511 << 18 | 16 << 27))
    got = read_texels(mem, parse_tsharp(w.s[0:8]), np.array([0]), np.array([0]), np.array([0]), np.array([0]))
    assert [Fraction(v) for v in got[0]] == [rgb9e5_value(3, 16), rgb9e5_value(256, 16), rgb9e5_value(511, 16), 1]


# --- 96-bit images and the linear mip chain ----------------------------------------------------------------------


def mip_layout(width: int, height: int, ebytes: int, levels: int, expand: int = 1) -> tuple[list[int], list[int]]:
    """addrlib's linear chain (``HwlComputeSurfaceInfoLinear``): level l is GetMipSize's ShiftCeil(width x expand,
    l) elements wide (96-bit texels: 3 x width 32-bit elements) and ShiftCeil(height, l) rows; its pitch is that
    width aligned to 256 bytes; levels lie smallest first. Returns (row bytes, level offset) per level."""
    rows, sizes = [], []
    for lv in range(levels):
        wl = -(-(width * expand) // (1 << lv))
        hl = -(-height // (1 << lv))
        p = math.ceil(wl * ebytes / 256) * 256 // ebytes
        rows.append(p * ebytes)
        sizes.append(p * hl * ebytes)
    return rows, [sum(sizes[lv + 1:]) for lv in range(levels)]


def test_a_non_power_of_two_mip_chain_sizes_levels_rounding_up() -> None:
    """32_UINT, 129 x 5, 4 levels: level 1 is 65 x 3 in memory (ShiftCeil; pitch 128, not 64) though its logical
    size, what image_get_resinfo returns and the coordinate range, is 64 x 2 (max(1, size >> level))."""
    rows, offs = mip_layout(129, 5, 4, 4)
    assert rows[1] == 128 * 4
    w, mem = setup(tsharp(20, 129, 5, max_mip=3, last_level=3))
    cells = [(0, 128, 4), (1, 63, 1), (2, 31, 0), (3, 15, 0), (1, 0, 1)]
    for i, (lv, x, y) in enumerate(cells):
        mem.write(BASE + offs[lv] + y * rows[lv] + x * 4, struct.pack("<I", 0x100 + i))
    w.s[EXEC_LO] = (1 << len(cells)) - 1
    for i, (lv, x, y) in enumerate(cells):
        w.v[8:11, i] = [x, y, lv]
    go(w, "image_load_mip v0, v[8:10], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert [int(r) for r in w.v[0, :len(cells)]] == [0x100 + i for i in range(len(cells))]
    w.s[EXEC_LO] = 0b11
    w.v[8:11, 0] = [64, 0, 1]                                   # past level 1's logical width: 0
    w.v[8:11, 1] = [0, 2, 1]                                    # past its logical height
    mem.write(BASE + offs[1] + 64 * 4, struct.pack("<I", 7))
    mem.write(BASE + offs[1] + 2 * rows[1], struct.pack("<I", 7))
    go(w, "image_load_mip v0, v[8:10], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert [int(r) for r in w.v[0, :2]] == [0, 0]
    w.v[4, :2] = [1, 2]
    go(w, "image_get_resinfo v[0:1], v4, s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D")
    assert [[int(w.v[r, i]) for r in range(2)] for i in range(2)] == [[64, 2], [32, 1]]
    w.s[EXEC_LO] = 1
    w.v[8:11, 0] = [63, 1, 1]
    w.v[0, 0] = 0xABCD
    go(w, "image_store_mip v0, v[8:10], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert struct.unpack("<I", mem.read(BASE + offs[1] + rows[1] + 63 * 4, 4))[0] == 0xABCD


@pytest.mark.parametrize("fmt", [58, 59, 60])
def test_96_bit_images_are_three_32_bit_elements_per_texel(fmt: int) -> None:
    """32_32_32 (UINT, SINT, FLOAT), 1D and 2D, with mips: texel x of row y of level l at offset(l) + y x row(l) +
    12 x; each level's row ShiftCeil(3 x width, l) dwords aligned to 64."""
    rows, offs = mip_layout(23, 5, 4, 3, expand=3)
    assert rows[0] == 128 * 4 and rows[1] == 64 * 4         # 69 dwords -> 128; ShiftCeil(69, 1) = 35 -> 64
    w, mem = setup(tsharp(fmt, 23, 5, max_mip=2, last_level=2))
    vals = {(0, 22, 4): (1, 2, 3), (1, 10, 1): (f32(-1.5), 5, 6), (2, 4, 0): (7, 8, f32(2.0))}
    for (lv, x, y), v in vals.items():
        mem.write(BASE + offs[lv] + y * rows[lv] + 12 * x, struct.pack("<3I", *v))
    w.s[EXEC_LO] = 0b111
    for i, (lv, x, y) in enumerate(vals):
        w.v[8:11, i] = [x, y, lv]
    go(w, "image_load_mip v[0:3], v[8:10], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D")
    one = f32(1.0) if fmt == 60 else 1
    assert [[int(w.v[r, i]) for r in range(4)] for i in range(3)] == [[*v, one] for v in vals.values()]
    w.s[EXEC_LO] = 1
    w.v[8:11, 0] = [3, 1, 1]
    w.v[0:3, 0] = [0x11, 0x22, 0x33]
    go(w, "image_store_mip v[0:1], v[8:10], s[0:7] dmask:0x5 dim:SQ_RSRC_IMG_2D")     # X, Z: Y written 0
    assert struct.unpack("<3I", mem.read(BASE + offs[1] + rows[1] + 36, 12)) == (0x11, 0, 0x22)
    w1, mem1 = setup(tsharp(fmt, 30, 1, typ=T1D))
    mem1.write(BASE + 12 * 29, struct.pack("<3I", 9, 8, 7))
    w1.s[EXEC_LO] = 1
    w1.v[8, 0] = 29
    go(w1, "image_load v[0:2], v8, s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_1D")
    assert [int(w1.v[r, 0]) for r in range(3)] == [9, 8, 7]


def test_d16_and_pck_refusals_of_the_new_formats() -> None:
    w, _ = setup(tsharp(81, 4, 1))
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [0, 0]
    with pytest.raises(ShaderFault, match="D16 access of the 32-bit format X24_8_32_FLOAT"):
        go(w, "image_load v0, v[8:9], s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D d16")
    w.s[0:8] = tsharp(67, 4, 1)
    with pytest.raises(ShaderFault, match="_pck access of 5_9_9_9_FLOAT"):
        go(w, "image_load_pck v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(77, 4, 1)                                  # 8_24_UINT: two fields in a dword, no atomics
    with pytest.raises(ShaderFault, match="32-bit image atomic on format 8_24_UINT"):
        go(w, "image_atomic_add v0, v[8:9], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")


def test_d16_stores_convert_the_f16_halves() -> None:
    """D16 stores take f16 halves (low half first) and convert them by the same rules."""
    w, mem = setup(tsharp(30, 4, 1))                             # 10_11_11_FLOAT
    w.s[EXEC_LO] = 1
    w.v[8:10, 0] = [1, 0]
    w.v[0:2, 0] = [f16(1.0) | f16(0.1) << 16, f16(65504.0)]
    go(w, "image_store v[0:1], v[8:9], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D d16")
    h = [struct.unpack("<e", struct.pack("<H", f16(v)))[0] for v in (1.0, 0.1, 65504.0)]
    want = (ufloat_encode(h[0], 11, "even") | ufloat_encode(h[1], 11, "even") << 11
            | ufloat_encode(h[2], 10, "even") << 22)
    assert struct.unpack("<I", mem.read(BASE + 4, 4))[0] == want
    w.s[0:8] = tsharp(66, 4, 1)                                  # 8_8_8_8_SRGB
    w.v[0:2, 0] = [f16(0.5) | f16(0.0) << 16, f16(1.0) | f16(0.5) << 16]
    go(w, "image_store v[0:1], v[8:9], s[0:7] dmask:0xf dim:SQ_RSRC_IMG_2D d16")
    assert list(mem.read(BASE + 4, 4)) == [188, 0, 255, 128]
    w.s[0:8] = tsharp(67, 4, 1)                                  # 5_9_9_9_FLOAT
    w.v[0:2, 0] = [f16(1.0) | f16(0.5) << 16, f16(0.25)]
    go(w, "image_store v[0:1], v[8:9], s[0:7] dmask:0x7 dim:SQ_RSRC_IMG_2D d16")
    assert struct.unpack("<I", mem.read(BASE + 4, 4))[0] == rgb9e5_encode([1.0, 0.5, 0.25])
