"""Sampled image instructions of the shader core (tinyhw/mocks/rdna3/sampler.py): image_sample*, image_gather4*,
image_get_lod.

Each instruction is assembled by llvm-mc-19 (skipped without it), decoded, compiled and run on one wave over small
linear textures in memory (T# and S# packed here from the descriptor tables' bit positions). The expected values
come from :func:`ref`, a per-lane model of the guide's sampling rules written here in plain Python with
``fractions.Fraction`` (address modes, nearest/bilinear filtering, mip selection, LOD from derivatives, depth
compare, gather order), never from the core. Texel values and coordinates are dyadic, so every weighted sum is
exact and the f32 results must match bit for bit.
"""

from __future__ import annotations

import math
import re
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import pytest
from rdna3isa import asm, f16, f32, from32, round_float, run, wave

from tinyhw.formats.amdisa import decode_at
from tinyhw.mocks.rdna3 import FlatMemory, ShaderFault, Unimplemented, sampler

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
M32 = (1 << 32) - 1
EXEC_LO = 126
IDENT = 4 | 5 << 3 | 6 << 6 | 7 << 9          # DST_SEL X, Y, Z, W
TYPES = {"1D": 8, "2D": 9, "3D": 10, "CUBE": 11, "1D_ARRAY": 12, "2D_ARRAY": 13}
DIMS = {"1D": (1, 0), "2D": (2, 0), "3D": (3, 0), "1D_ARRAY": (1, 1), "2D_ARRAY": (2, 1)}




# ---- textures: a linear RGBA 32_32_32_32_FLOAT (or 8_8_8_8_UNORM, 32_UINT) image with its mip chain -----------

@dataclass
class Tex:
    """A texture: ``kind`` (1D, 2D, 3D, 1D_ARRAY, 2D_ARRAY), level-0 size, levels, slices, and its texels
    texels[slice][level][(x, y, z)] = (r, g, b, a) as Fractions."""

    kind: str
    w: int
    h: int
    d: int = 1
    levels: int = 1
    slices: int = 1
    fmt: int = 63               # 32_32_32_32_FLOAT; 42 8_8_8_8_UNORM; 20 32_UINT
    base_level: int = 0
    texels: list[list[dict[tuple[int, int, int], tuple[Fraction, ...]]]] = field(default_factory=list)

    def dims(self, lv: int) -> tuple[int, int, int]:
        """The size of level ``lv`` (absolute)."""
        h = 1 if self.kind.startswith("1D") else self.h
        d = self.d if self.kind == "3D" else 1
        return max(1, self.w >> lv), max(1, h >> lv), max(1, d >> lv)


def make_tex(kind: str, w: int, h: int = 1, d: int = 1, levels: int = 1, slices: int = 1, fmt: int = 63,
             seed: int = 1) -> Tex:
    """A texture with pseudo-random dyadic texel values (1/16 steps; 1/255 multiples for UNORM, integers for
    UINT)."""
    t = Tex(kind, w, h, d, levels, slices, fmt)
    rnd = seed
    for _s in range(slices):
        lvls = []
        for lv in range(levels):
            texels = {}
            lw, lh, ld = t.dims(lv)
            for z in range(ld):
                for y in range(lh):
                    for x in range(lw):
                        vals = []
                        for _c in range(4):
                            rnd = (rnd * 1103515245 + 12345) & 0x7FFFFFFF
                            if fmt == 42:
                                vals.append(Fraction(rnd >> 16 & 0xFF, 255))
                            elif fmt == 20:
                                vals.append(Fraction(rnd >> 8 & 0xFFFF))
                            else:
                                vals.append(Fraction((rnd >> 16 & 0xFF) - 64, 16))
                        if fmt == 20:
                            vals[1:] = [Fraction(0), Fraction(0), Fraction(1)]
                        texels[(x, y, z)] = tuple(vals)
            lvls.append(texels)
        t.texels.append(lvls)
    return t


def place(mem: FlatMemory, t: Tex) -> list[int]:
    """Write ``t`` in the linear layout (each level's pitch aligned to 256 bytes, the smallest level first in a
    slice, slices one after another) and return its 8-dword T#."""
    bpe = {63: 16, 42: 4, 20: 4}[t.fmt]
    align = 256 // bpe
    pitches, sizes = [], []
    for lv in range(t.levels):
        lw, lh, ld = t.dims(lv)
        pitches.append(-(-lw // align) * align)
        sizes.append(pitches[-1] * lh * bpe * (ld if t.kind == "3D" else 1))
    # 3D: a slice of the layout is one depth slice holding every level (levels 0-depth only in these tests)
    offsets = [sum(sizes[lv + 1:]) for lv in range(t.levels)]
    slice_size = sum(sizes)
    if t.kind == "3D":
        slice_size = sum(pitches[lv] * t.dims(lv)[1] * bpe for lv in range(t.levels))
        offsets = [sum(pitches[k] * t.dims(k)[1] * bpe for k in range(lv + 1, t.levels)) for lv in range(t.levels)]
    nsl = t.slices if t.kind.endswith("ARRAY") or t.kind == "CUBE" else t.d
    base = mem.alloc(slice_size * nsl + 256)
    for s in range(t.slices):
        for lv in range(t.levels):
            for (x, y, z), vals in t.texels[s][lv].items():
                sl = s if t.kind.endswith("ARRAY") or t.kind == "CUBE" else z
                a = base + sl * slice_size + offsets[lv] + (y * pitches[lv] + x) * bpe
                if t.fmt == 63:
                    mem.write(a, struct.pack("<4f", *(float(v) for v in vals)))
                elif t.fmt == 42:
                    mem.write(a, bytes(int(v * 255) for v in vals))
                else:
                    mem.write(a, struct.pack("<I", int(vals[0])))
    w4 = {"1D": pitches[0] - 1, "2D": pitches[0] - 1, "3D": t.d - 1}.get(t.kind, t.slices - 1)
    return [base >> 8 & M32, (base >> 40 & 0xFF) | (t.levels - 1) << 16 | t.fmt << 20 | ((t.w - 1) & 3) << 30,
            (t.w - 1) >> 2 | (t.h - 1) << 14, IDENT | t.base_level << 12 | (t.levels - 1) << 16 | TYPES[t.kind] << 28,
            w4, 0, 0, 0]


@dataclass
class Samp:
    """An S# (the fields the tests use)."""

    clamp: tuple[int, int, int] = (0, 0, 0)
    compare: int = 0
    unnorm: int = 0
    trunc: int = 1
    min_lod: Fraction = Fraction(0)
    max_lod: Fraction = Fraction(15)
    bias: Fraction = Fraction(0)
    mag: int = 0
    minf: int = 0
    zf: int = 0
    mip: int = 0
    border: int = 0
    aniso: int = 0
    mode: int = 0

    def words(self) -> list[int]:
        """The four S# dwords."""
        w0 = (self.clamp[0] | self.clamp[1] << 3 | self.clamp[2] << 6 | self.aniso << 9 | self.compare << 12
              | self.unnorm << 15 | self.trunc << 27 | self.mode << 29)
        w1 = int(self.min_lod * 256) | int(self.max_lod * 256) << 12
        w2 = (int(self.bias * 256) & 0x3FFF) | self.mag << 20 | self.minf << 22 | self.zf << 24 | self.mip << 26
        return [w0, w1, w2, self.border << 30]


# ---- the reference model ---------------------------------------------------------------------------------------

BORDERS = {0: (0, 0, 0, 0), 1: (0, 0, 0, 1), 2: (1, 1, 1, 1)}
CMP = {0: lambda r, t: False, 1: lambda r, t: r < t, 2: lambda r, t: r == t, 3: lambda r, t: r <= t,
       4: lambda r, t: r > t, 5: lambda r, t: r != t, 6: lambda r, t: r >= t, 7: lambda r, t: True}


def wrap(i: int, n: int, mode: int) -> int | None:
    """Texel index ``i`` under clamp mode ``mode`` for a size ``n``; None on the border."""
    if mode == 0:
        return i % n
    if mode == 1:
        m = i % (2 * n)
        return m if m < n else 2 * n - 1 - m
    if mode == 2:
        return min(max(i, 0), n - 1)
    if mode == 3:
        return min(-1 - i if i < 0 else i, n - 1)
    if mode in (4, 6):                                  # 4: after the coordinate clamp of ref_level
        return i if 0 <= i < n else None
    j = -1 - i if i < 0 else i                          # 7
    return j if j < n else None


def rne(x: Fraction) -> int:
    """x rounded to the nearest integer, ties to even."""
    f = math.floor(x)
    r = x - f
    return f + (1 if r > Fraction(1, 2) or (r == Fraction(1, 2) and f % 2) else 0)


def ref_level(t: Tex, s: Samp, lv: int, c: list[Fraction], layer: int, offs: tuple[int, int, int], linear: bool,
              unnorm: bool, zref: Fraction | None, gather: int | None = None, sub: int | None = None
              ) -> tuple[Fraction, ...]:
    """The filtered texel (or the gathered four) at relative level ``lv``."""
    dims = t.dims(t.base_level + lv)
    taps = []
    for k, ck in enumerate(c):
        u = (ck if unnorm else ck * dims[k]) + offs[k]
        half = s.clamp[k] == 4              # CLAMP_HALF_BORDER = GL's CLAMP: the coordinate clamped to [0, 1], so a
        if half:                            # linear footprint straddles the edge, half texel, half border
            u = min(max(u, Fraction(0)), Fraction(dims[k]))
        lin = linear and not (k == 2 and s.zf == 1)
        if gather is not None or lin:
            i0 = math.floor(u - Fraction(1, 2))
            a = u - Fraction(1, 2) - i0
            if sub is not None:                 # the weight snapped to 2^-sub, ties to even
                a = Fraction(rne(a * (1 << sub)), 1 << sub)
            taps.append([(i0, 1 - a), (i0 + 1, a)])
        else:
            if not s.trunc:
                u = Fraction(rne(u * 64), 64)
            taps.append([(min(math.floor(u), dims[k] - 1) if half else math.floor(u), Fraction(1))])

    def texel(idx: list[int]) -> tuple[Fraction, ...]:
        w = [wrap(i, dims[k], s.clamp[k]) for k, i in enumerate(idx)]
        if None in w:
            v = tuple(Fraction(b) for b in BORDERS[s.border])
        else:
            x, y, z = (w + [0, 0])[:3]
            v = t.texels[layer][t.base_level + lv][(x, y, z)]
        if zref is not None:
            v = (Fraction(int(CMP[s.compare](zref, v[0]))),) * 4
        return v

    if gather is not None:
        (x0, _), (x1, _) = taps[0]
        (y0, _), (y1, _) = taps[1]
        return tuple(texel([x, y])[gather if zref is None else 0] for x, y in ((x0, y1), (x1, y1), (x1, y0), (x0, y0)))
    if s.mode:      # MIN/MAX reduction: per component over the footprint's texels of non-zero weight (Vulkan)
        vals = [texel([i for i, _ in combo]) for combo in _product(taps) if math.prod(w for _, w in combo) != 0]
        pick = min if s.mode == 1 else max
        return tuple(pick(v[k] for v in vals) for k in range(4))
    out = [Fraction(0)] * 4
    for combo in _product(taps):
        wgt = Fraction(1)
        for _, wk in combo:
            wgt *= wk
        v = texel([i for i, _ in combo])
        out = [o + wgt * vk for o, vk in zip(out, v, strict=True)]
    return tuple(out)


def _product(taps: list[list[tuple[int, Fraction]]]) -> list[list[tuple[int, Fraction]]]:
    out: list[list[tuple[int, Fraction]]] = [[]]
    for axis in taps:
        out = [p + [tap] for p in out for tap in axis]
    return out


def ref_lod(t: Tex, s: Samp, flags: set[str], lod: float | None, dx: list[float], dy: list[float], bias: float,
            clamp: float | None, unnorm: bool, t_min_lod: Fraction = Fraction(0)) -> tuple[float, float]:
    """(LOD used, LOD before the clamps) by the guide's rules (see sampler.py's module text for the model)."""
    if "l" in flags:
        x = lod
    elif "lz" in flags:
        x = 0.0
    else:
        size = t.dims(t.base_level)
        sc = [1.0 if unnorm else float(size[k]) for k in range(len(dx))]
        rx = math.sqrt(sum((dx[k] * sc[k]) ** 2 for k in range(len(dx))))
        ry = math.sqrt(sum((dy[k] * sc[k]) ** 2 for k in range(len(dy))))
        rho = max(rx, ry)
        x = math.log2(rho) if rho > 0 else -math.inf
        if "b" in flags:
            x += bias
    assert x is not None
    if "lz" not in flags:
        x += float(s.bias)
    raw = x
    x = min(max(x, float(s.min_lod)), float(s.max_lod))
    if clamp is not None:
        x = max(x, clamp)
    if t_min_lod:                                       # the T#'s MIN_LOD, an absolute level
        x = max(x, float(t_min_lod) - t.base_level)
    return x, raw


def ref(t: Tex, s: Samp, flags: set[str], coords: list[float], *, lod: float | None = None,
        dx: list[float] | None = None, dy: list[float] | None = None, bias: float = 0.0, clamp: float | None = None,
        offs: tuple[int, int, int] = (0, 0, 0), zref: float | None = None, unorm: bool = False,
        gather: int | None = None, sub: int | None = None, t_min_lod: Fraction = Fraction(0)) -> tuple[Fraction, ...]:
    """The expected result of one lane (``sub``: the bilinear weights' fraction bits, None for exact)."""
    nsp, narr = DIMS[t.kind]
    unnorm = unorm or bool(s.unnorm)
    x, _raw = ref_lod(t, s, flags, lod, dx or [], dy or [], bias, clamp, unnorm, t_min_lod)
    nlev = t.levels - t.base_level
    mip = 1 if gather is not None and s.mip == 2 else s.mip
    if mip == 0:
        l0, frac = 0, 0.0
    elif mip == 1:
        l0, frac = min(max(math.floor(x + 0.5), 0), nlev - 1), 0.0
    else:
        f = math.floor(x) if x > -math.inf else -1
        l0 = min(max(f, 0), nlev - 1)
        frac = x - f if (x > 0 and f < nlev - 1) else 0.0
    linear = (s.minf if x > 0 else s.mag) == 1
    layer = min(max(round(coords[nsp]), 0), t.slices - 1) if narr else 0
    c = [Fraction(v) for v in coords[:nsp]]
    zr = Fraction(zref) if zref is not None else None
    a = ref_level(t, s, l0, c, layer, offs, linear, unnorm, zr, gather, sub)
    if frac:
        b = ref_level(t, s, l0 + 1, c, layer, offs, linear, unnorm, zr, gather, sub)
        fr = Fraction(frac)
        if s.mode and gather is None:         # MIN/MAX: the two levels (both of non-zero weight) reduced too
            a = tuple((min if s.mode == 1 else max)(p, q) for p, q in zip(a, b, strict=True))
        else:
            a = tuple(p * (1 - fr) + q * fr for p, q in zip(a, b, strict=True))
    return a


# ---- running ---------------------------------------------------------------------------------------------------

def setup(t: Tex, s: Samp, lanes: int = 32) -> tuple[Any, FlatMemory]:
    """A wave with ``t``'s T# in s[0:7] and ``s``'s S# in s[8:11]."""
    mem = FlatMemory(0x10000, 1 << 20)
    w = wave(mem=mem)
    for k, x in enumerate(place(mem, t)):
        w.s[k] = x
    for k, x in enumerate(s.words()):
        w.s[8 + k] = x
    w.s[EXEC_LO] = (1 << lanes) - 1
    return w, mem


def put(w: Any, reg: int, vals: list[float]) -> None:
    """f32 values into VGPR ``reg`` of lanes 0..len-1."""
    for lane, x in enumerate(vals):
        w.v[reg, lane] = f32(x)


def got(w: Any, reg: int, n: int, lanes: int) -> list[list[int]]:
    """The bits of VGPRs reg..reg+n-1 per lane."""
    return [[int(w.v[reg + k, lane]) for k in range(n)] for lane in range(lanes)]


def bits(vals: tuple[Fraction, ...]) -> list[int]:
    """f32 bits of exact values."""
    return [round_float(v, "f32") for v in vals]


COORDS = [Fraction(k * 37 % 157 - 40, 32) for k in range(32)]        # in [-1.25, 3.66]: wrap/mirror/border/clamp


def test_the_decoder_gives_mimg_fields_and_nsa_addresses() -> None:
    raw = asm("image_sample_c_d_o v[10:13], [v4, v6, v9, v20, v11], s[4:11], s[100:103] dmask:0xb "
              "dim:SQ_RSRC_IMG_1D unorm tfe")
    i = decode_at(struct.pack(f"<{len(raw)}I", *raw), 0, "gfx11")
    f = i.fields
    assert (i.mnemonic, i.size) == ("image_sample_c_d_o", 12)
    assert (f["vaddr"], f["addr1"], f["addr2"], f["addr3"], f["addr4"]) == (4, 6, 9, 20, 11)
    assert (f["vdata"], f["srsrc"], f["ssamp"], f["dmask"], f["dim"], f["unorm"], f["d16"], f["tfe"], f["nsa"]) == \
        (10, 4, 100, 0xB, 0, 1, 0, 1, 1)


@pytest.mark.parametrize(("mode", "border"), [(m, b) for b in (0, 1, 2) for m in (0, 1, 2, 3, 4, 6, 7)
                                              if not b or m in (4, 6, 7)])   # the colour matters in the border modes
def test_nearest_2d_each_address_mode(mode: int, border: int) -> None:
    t = make_tex("2D", 5, 3)
    s = Samp(clamp=(mode, mode, 0), border=border)
    w, _ = setup(t, s)
    xs = COORDS
    ys = [Fraction(k * 11 % 64 - 20, 16) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    for lane in range(32):
        want = bits(ref(t, s, {"lz"}, [xs[lane], ys[lane]]))
        assert got(w, 0, 4, 32)[lane] == want, (lane, xs[lane], ys[lane])


@pytest.mark.parametrize("mode", [0, 1, 2, 3, 4, 6, 7])
def test_bilinear_2d_each_address_mode(mode: int) -> None:
    t = make_tex("2D", 4, 6, seed=3)
    s = Samp(clamp=(mode, mode, 0), mag=1, minf=1, border=2)
    w, _ = setup(t, s)
    xs = COORDS
    ys = [Fraction(k * 13 % 96 - 30, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"lz"}, [xs[k], ys[k]], )) for k in range(32)]


def test_point_sampling_rounds_to_1_64_texel_without_trunc_coord() -> None:
    t = make_tex("1D", 8)
    s = Samp(clamp=(2, 2, 2), trunc=0)
    w, _ = setup(t, s)
    xs = [Fraction(3, 8) - Fraction(1, 1024), Fraction(3, 8) - Fraction(1, 128), Fraction(5, 8) - Fraction(1, 2048)]
    put(w, 4, [float(x) for x in xs])
    w.s[EXEC_LO] = 0b111
    run(asm("image_sample_lz v[0:3], v4, s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_1D"), w)
    # x*8 = 2.992 rounds to 3.0 at 1/64 texel: texel 3; 2.9375 stays texel 2
    assert got(w, 0, 1, 3) == [[f32(float(t.texels[0][0][(i, 0, 0)][0]))] for i in (3, 2, 5)]
    assert [bits(ref(t, s, {"lz"}, [x]))[:1] for x in xs] == got(w, 0, 1, 3)


def check_sample_l_2d(t: Any, s: Any, lods: list[float]) -> None:
    """``image_sample_l`` of the 2D texture ``t`` with sampler ``s`` at 32 coordinates and the given LODs equals the
    reference model's texels."""
    w, _ = setup(t, s)
    xs, ys = COORDS, [Fraction(k * 7 % 40, 16) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, lods)
    run(asm("image_sample_l v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"l"}, [xs[k], ys[k]], lod=lods[k])) for k in range(32)]


@pytest.mark.parametrize("mip", [0, 1, 2])
@pytest.mark.parametrize("filters", [(0, 0), (1, 1), (0, 1)])
def test_explicit_lod_selects_and_blends_mips(mip: int, filters: tuple[int, int]) -> None:
    t = make_tex("2D", 8, 8, levels=4, seed=5)
    s = Samp(clamp=(1, 1, 0), mag=filters[0], minf=filters[1], mip=mip, bias=Fraction(1, 4), max_lod=Fraction(5, 2))
    check_sample_l_2d(t, s, [-2, -0.25, 0, 0.25, 0.5, 0.75, 1, 1.25, 1.5, 1.75, 2, 2.5, 2.75, 3, 4, 9] * 2)


def test_base_level_and_min_lod_clamp() -> None:
    t = make_tex("2D", 8, 8, levels=4, seed=9)
    t.base_level = 1
    s = Samp(mag=1, minf=1, mip=2, min_lod=Fraction(1, 2))
    w, _ = setup(t, s)
    lods = [-1.0, 0.25, 0.75, 1.5, 2.0, 3.0, 0.0, 1.0]
    xs, ys = COORDS[:8], [Fraction(k, 8) for k in range(8)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, lods)
    w.s[EXEC_LO] = 0xFF
    run(asm("image_sample_l v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 8) == [bits(ref(t, s, {"l"}, [xs[k], ys[k]], lod=lods[k])) for k in range(8)]


def _quads(base: list[tuple[float, float]], steps: list[tuple[float, float, float, float]]
           ) -> tuple[list[float], list[float]]:
    """Coordinates of 8 quads: quad q's lanes at base + (0, dx, dy, anything) of its steps (lane 3 off the
    parallelogram, so that only lanes 0, 1, 2 may give the derivatives)."""
    xs, ys = [], []
    for (bx, by), (dxx, dxy, dyx, dyy) in zip(base, steps, strict=True):
        for ox, oy in ((0, 0), (dxx, dxy), (dyx, dyy), (dxx + dyx + 5 / 4, dxy + dyy - 3 / 8)):
            xs.append(bx + ox)
            ys.append(by + oy)
    return xs, ys


# per quad: d/dx = (dxx, dxy), d/dy = (dyx, dyy) in normalised units of a 16x16 texture
QSTEPS = [(1 / 16, 0, 0, 1 / 16), (2 / 16, 0, 0, 1 / 16), (0, 4 / 16, 1 / 16, 0), (1 / 32, 0, 0, 1 / 64),
          (8 / 16, 0, 0, 0), (0, 0, 0, 0), (3 / 16, 0, 0, 4 / 16), (1 / 16, 1 / 16, 0, 2 / 16)]
QBASE = [(k / 8 + 1 / 64, (k * 3 % 8) / 8 + 1 / 128) for k in range(8)]


def _implicit(k: int) -> tuple[list[float], list[float]]:
    q = QSTEPS[k // 4]
    return [q[0], q[1]], [q[2], q[3]]


@pytest.mark.parametrize("op", ["image_sample", "image_sample_b", "image_sample_cl", "image_sample_b_cl"])
def test_implicit_derivatives_from_lane_quads(op: str) -> None:
    t = make_tex("2D", 16, 16, levels=5, seed=11)
    s = Samp(mag=0, minf=1, mip=2, max_lod=Fraction(13, 4))
    w, _ = setup(t, s)
    xs, ys = _quads(QBASE, QSTEPS)
    flags = set(op.removeprefix("image_sample").split("_")) - {""}
    regs, r = [], 4
    biases = [0.25 * (k % 5) - 0.5 for k in range(32)]
    clamps = [0.5 * (k % 4) for k in range(32)]
    if "b" in flags:
        put(w, r, biases)
        regs.append(r)
        r += 1
    put(w, r, xs)
    put(w, r + 1, ys)
    r += 2
    if "cl" in flags:
        put(w, r, clamps)
        r += 1
    run(asm(f"{op} v[0:3], v[4:{r - 1}], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    for k in range(32):
        dx, dy = _implicit(k)
        want = bits(ref(t, s, flags, [Fraction(xs[k]), Fraction(ys[k])], dx=dx, dy=dy, bias=biases[k],
                        clamp=clamps[k] if "cl" in flags else None))
        assert got(w, 0, 4, 32)[k] == want, k


def test_user_derivatives_and_16_bit_derivatives() -> None:
    t = make_tex("2D", 16, 16, levels=5, seed=13)
    s = Samp(mag=1, minf=1, mip=1)
    w, _ = setup(t, s)
    xs, ys = [float(c) / 4 for c in COORDS], [k / 32 for k in range(32)]
    dxs = [(k % 5) / 16 for k in range(32)]
    dys = [(k % 3) / 8 for k in range(32)]
    put(w, 4, dxs)
    put(w, 5, [0.0] * 32)
    put(w, 6, [0.0] * 32)
    put(w, 7, dys)
    put(w, 8, xs)
    put(w, 9, ys)
    run(asm("image_sample_d v[0:3], v[4:9], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    want = [bits(ref(t, s, {"d"}, [Fraction(xs[k]), Fraction(ys[k])], dx=[dxs[k], 0.0], dy=[0.0, dys[k]]))
            for k in range(32)]
    assert got(w, 0, 4, 32) == want
    for k in range(32):                       # g16: (d/dx x, d/dx y) in one dword, (d/dy x, d/dy y) in the next
        w.v[4, k] = f16(dxs[k])
        w.v[5, k] = f16(dys[k]) << 16
    put(w, 6, xs)
    put(w, 7, ys)
    w.v[0:4] = 0
    run(asm("image_sample_d_g16 v[0:3], v[4:7], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == want


@pytest.mark.parametrize("func", range(8))
def test_depth_compare_each_function_point_and_pcf(func: int) -> None:
    t = make_tex("2D", 4, 4, seed=17)
    for linear in (0, 1):
        s = Samp(clamp=(2, 2, 0), compare=func, mag=linear, minf=linear)
        w, _ = setup(t, s)
        xs, ys = COORDS, [Fraction(k * 5 % 32, 16) for k in range(32)]
        zs = [float(t.texels[0][0][(k % 4, k // 8 % 4, 0)][0]) + (k % 3 - 1) / 16 for k in range(32)]
        put(w, 4, zs)
        put(w, 5, [float(x) for x in xs])
        put(w, 6, [float(y) for y in ys])
        run(asm("image_sample_c_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
        assert got(w, 0, 4, 32) == [bits(ref(t, s, {"c", "lz"}, [xs[k], ys[k]], zref=zs[k])) for k in range(32)]


@pytest.mark.parametrize("comp", range(4))
def test_gather4_returns_the_bilinear_footprint_in_the_guides_order(comp: int) -> None:
    t = make_tex("2D", 5, 4, fmt=42, seed=19)
    s = Samp(clamp=(0, 1, 0))
    w, _ = setup(t, s)
    xs, ys = COORDS, [Fraction(k * 9 % 80 - 10, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    run(asm(f"image_gather4_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:{1 << comp:#x} dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"lz"}, [xs[k], ys[k]], gather=comp)) for k in range(32)]


def test_gather4_c_and_gather4_l_picks_the_nearest_level() -> None:
    t = make_tex("2D", 8, 8, levels=3, seed=23)
    s = Samp(compare=3, mip=2)
    w, _ = setup(t, s)
    xs, ys = COORDS, [Fraction(k, 32) for k in range(32)]
    zs = [float(t.texels[0][0][(k % 8, k // 4 % 8, 0)][0]) for k in range(32)]
    lods = [(k % 7) * 0.375 for k in range(32)]
    put(w, 4, zs)
    put(w, 5, [float(x) for x in xs])
    put(w, 6, [float(y) for y in ys])
    put(w, 7, lods)
    run(asm("image_gather4_c_l v[0:3], v[4:7], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"c", "l"}, [xs[k], ys[k]], lod=lods[k], zref=zs[k], gather=0))
                                for k in range(32)]


def test_get_lod_returns_the_clamped_and_the_computed_lod() -> None:
    t = make_tex("2D", 16, 16, levels=3, seed=29)
    s = Samp(min_lod=Fraction(1, 4), max_lod=Fraction(7, 4), bias=Fraction(-1, 2))
    w, _ = setup(t, s)
    xs, ys = _quads(QBASE, QSTEPS)
    put(w, 4, xs)
    put(w, 5, ys)
    run(asm("image_get_lod v[0:1], v[4:5], s[0:7], s[8:11] dmask:0x3 dim:SQ_RSRC_IMG_2D"), w)
    for k in range(32):
        dx, dy = _implicit(k)
        used, raw = ref_lod(t, s, set(), None, dx, dy, 0.0, None, False)
        used = min(max(used, 0.0), 2.0)
        assert got(w, 0, 2, 32)[k] == [f32(used), f32(raw)], k


def test_texel_offsets_and_1d_3d_and_arrays() -> None:
    t = make_tex("2D", 6, 5, seed=31)
    s = Samp(clamp=(0, 2, 0), mag=1)
    w, _ = setup(t, s)
    offs = [((k % 7) - 3, (k % 5) - 2, 0) for k in range(32)]
    for k in range(32):
        w.v[4, k] = (offs[k][0] & 0x3F) | (offs[k][1] & 0x3F) << 8
    xs, ys = COORDS, [Fraction(k, 32) for k in range(32)]
    put(w, 5, [float(x) for x in xs])
    put(w, 6, [float(y) for y in ys])
    run(asm("image_sample_lz_o v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"lz"}, [xs[k], ys[k]], offs=offs[k])) for k in range(32)]
    cases = [("1D", "v4", 1, {}), ("3D", "v[4:6]", 3, {"d": 4, "h": 3}), ("1D_ARRAY", "v[4:5]", 2, {"slices": 3}),
             ("2D_ARRAY", "v[4:6]", 3, {"h": 3, "slices": 4})]
    for kind, regs, n, kw in cases:
        t = make_tex(kind, 4, h=kw.get("h", 1), d=kw.get("d", 1), slices=kw.get("slices", 1), seed=37)
        s = Samp(clamp=(1, 0, 6), mag=1, minf=1, border=1)
        w, _ = setup(t, s)
        cs = [[Fraction((k * (7 + 3 * j)) % 50 - 8, 16) for k in range(32)] for j in range(n)]
        for j in range(n):
            put(w, 4 + j, [float(c) for c in cs[j]])
        run(asm(f"image_sample_lz v[0:3], {regs}, s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_{kind}"), w)
        want = [bits(ref(t, s, {"lz"}, [float(cs[j][k]) if j == n - 1 and kind.endswith("ARRAY") else cs[j][k]
                                        for j in range(n)])) for k in range(32)]
        assert got(w, 0, 4, 32) == want, kind


def test_a16_d16_tfe_dmask_nsa_unorm_and_integer_texels() -> None:
    t = make_tex("2D", 8, 4, levels=2, seed=41)
    s = Samp(mag=1, minf=1, mip=1)
    w, _ = setup(t, s)
    xs, ys = [Fraction(k * 3 % 20, 16) for k in range(32)], [Fraction(k % 9, 8) for k in range(32)]
    lods = [float(k % 3) * 0.5 for k in range(32)]
    for k in range(32):                             # A16: (x, y) in v4, (lod, -) in v5
        w.v[4, k] = f16(float(xs[k])) | f16(float(ys[k])) << 16
        w.v[5, k] = f16(lods[k])
    run(asm("image_sample_l v[0:1], v[4:5], s[0:7], s[8:11] dmask:0xd dim:SQ_RSRC_IMG_2D a16 d16"), w)
    for k in range(32):
        r = ref(t, s, {"l"}, [xs[k], ys[k]], lod=lods[k])
        h = [round_float(r[c], "f16") for c in (0, 2, 3)]
        assert got(w, 0, 2, 32)[k] == [h[0] | h[1] << 16, h[2]], k
    put(w, 9, [float(x) * 8 for x in xs])            # NSA + UNORM (texel coordinates) + TFE
    put(w, 12, [float(y) * 4 for y in ys])
    w.v[1] = 0x5678
    w.v[2] = 0x1234
    run(asm("image_sample_lz v[0:1], [v9, v12], s[0:7], s[8:11] dmask:0x2 dim:SQ_RSRC_IMG_2D unorm tfe"), w)
    want = [bits(ref(t, s, {"lz"}, [xs[k] * 8, ys[k] * 4], unorm=True))[1] for k in range(32)]
    assert [int(w.v[0, k]) for k in range(32)] == want
    assert [int(w.v[1, k]) for k in range(32)] == [0] * 32            # TFE status: 0, no fetch fails (the guide)
    assert int(w.v[2, 0]) == 0x1234
    ti = make_tex("2D", 4, 4, fmt=20, seed=43)     # 32_UINT, point sampled: the integer itself
    w, _ = setup(ti, Samp())
    put(w, 4, [float(x) / 4 for x in xs])
    put(w, 5, [float(y) / 2 for y in ys])
    run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    for k in range(32):
        want_i = [int(v) for v in ref(ti, Samp(), {"lz"}, [xs[k] / 4, ys[k] / 2])]
        assert got(w, 0, 4, 32)[k] == want_i, k


def test_exec_masks_lanes() -> None:
    t = make_tex("2D", 4, 4)
    w, _ = setup(t, Samp())
    put(w, 4, [0.5] * 32)
    put(w, 5, [0.5] * 32)
    w.v[0] = 7
    w.s[EXEC_LO] = 0x5555_5555
    run(asm("image_sample_lz v0, v[4:5], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_2D"), w)
    want = f32(float(t.texels[0][0][(2, 2, 0)][0]))
    assert [int(w.v[0, k]) for k in range(32)] == [want if k % 2 == 0 else 7 for k in range(32)]


@pytest.mark.parametrize(("samp", "text", "exc", "msg"), [
    (Samp(mag=2), "image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D", Unimplemented,
     "anisotropic"),
    (Samp(clamp=(5, 0, 0)), "image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D",
     Unimplemented, "MIRROR_ONCE_HALF_BORDER"),
    (Samp(clamp=(4, 0, 0), border=3), "image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf "
     "dim:SQ_RSRC_IMG_2D", Unimplemented, "border colour table"),
    (Samp(clamp=(6, 0, 0), border=3), "image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf "
     "dim:SQ_RSRC_IMG_2D", Unimplemented, "border colour table"),
    (Samp(mode=3), "image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D", Unimplemented,
     "FILTER_MODE 3"),
    (Samp(mode=1), "image_sample_c_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D", Unimplemented,
     "depth compare with the S# FILTER_MODE"),
    (Samp(), "image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE", Unimplemented,
     "DIM CUBE"),
    (Samp(), "image_sample_lz v[0:3], v4, s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_1D", Unimplemented, "TYPE"),
    (Samp(), "image_sample_lz v[0:4], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D tfe lwe", Unimplemented,
     "LWE"),
    (Samp(mag=1), "image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D", Unimplemented,
     "integer"),
])
def test_what_the_model_does_not_implement_stops(samp: Samp, text: str, exc: type, msg: str) -> None:
    t = make_tex("2D", 4, 4, fmt=20 if msg == "integer" else 63)
    w, _ = setup(t, samp)
    put(w, 4, [0.5] * 32)
    put(w, 5, [0.5] * 32)
    with pytest.raises(exc, match=msg):
        run(asm(text), w)


def test_a_tiled_t_sharp_is_a_shader_fault() -> None:
    t = make_tex("2D", 4, 4)
    w, _ = setup(t, Samp())
    w.s[3] |= 9 << 20                                # SW_MODE 9
    put(w, 4, [0.5] * 32)
    put(w, 5, [0.5] * 32)
    with pytest.raises(ShaderFault, match="SW_MODE"):
        run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert from32(f32(1.0)) == 1.0


def asm_program(lines: list[str]) -> bytes:
    """The bytes llvm-mc-19 encodes the program ``lines`` to (gfx1100)."""
    return b"".join(struct.pack(f"<{len(ws)}I", *ws) for ws in (asm(x) for x in lines))


KERNEL = [
    "s_lshl_b32 s15, s14, 6",                       # workgroup id (s14, after 14 user SGPRs) x 64
    "v_add_nc_u32 v2, s15, v0",                     # global id
    "v_cvt_f32_u32 v3, v2",
    "v_mul_f32 v4, 0x3d800000, v3",                 # x = id / 16
    "v_mul_u32_u24 v1, v0, v0",
    "v_and_b32 v1, 0xff, v1",
    "v_cvt_f32_u32 v1, v1",
    "v_mul_f32 v5, 0x3c800000, v1",                 # y = (lane id^2 mod 256) / 64
    "image_sample v[6:9], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D",
    "s_waitcnt vmcnt(0)",
    "v_lshlrev_b32 v10, 4, v2",
    "global_store_b128 v10, v[6:9], s[12:13]",
    "s_endpgm",
]


@pytest.mark.parametrize("lockstep", [True, False])
def test_a_kernel_samples_with_implicit_derivatives_through_run_dispatch(lockstep: bool,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.mocks.rdna3 import DispatchRegs, dispatch, run_dispatch

    if not lockstep:
        monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)
    t = make_tex("2D", 16, 16, levels=5, seed=47)
    s = Samp(clamp=(0, 1, 0), mag=1, minf=1, mip=1)
    mem = FlatMemory(0x10_0000_0000, 1 << 20)
    tsharp = place(mem, t)
    out = mem.alloc(4 * 64 * 16)
    code = mem.alloc(asm_program(KERNEL) + struct.pack("<4I", *[0xBF9F0000] * 4), align=256)
    user = (*tsharp, *s.words(), out & M32, out >> 32)
    regs = DispatchRegs(pgm_lo=code >> 8 & M32, pgm_hi=code >> 40 & 0xFF, rsrc1=1, rsrc2=len(user) << 1 | 1 << 7,
                        user_data=user, num_thread=(64, 1, 1), dim=(4, 1, 1))
    res = run_dispatch(regs, mem)
    assert res.per_mnemonic["image_sample"] == 8
    data = struct.unpack(f"<{4 * 256}I", mem.read(out, 4 * 64 * 16))
    for gid in range(256):
        lane = gid % 64
        q = lane // 4 * 4
        y = [Fraction((ln * ln) % 256, 64) for ln in range(64)]
        x = Fraction(gid, 16)
        dx = [1 / 16, float(y[q + 1] - y[q])]
        dy = [2 / 16, float(y[q + 2] - y[q])]
        want = bits(ref(t, s, set(), [x, y[lane]], dx=dx, dy=dy))
        assert list(data[4 * gid:4 * gid + 4]) == want, gid


def test_subtexel_bits_snap_the_bilinear_weights(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.mocks.rdna3 import sampler

    t = make_tex("2D", 8, 8, seed=53)
    s = Samp(clamp=(0, 0, 0), mag=1, minf=1)
    xs = [Fraction(k * 173 % 4096, 4096) for k in range(32)]
    ys = [Fraction(k * 311 % 4096, 4096) for k in range(32)]
    results = {}
    for sub in (None, 8):
        monkeypatch.setattr(sampler, "SUBTEXEL_BITS", sub)
        w, _ = setup(t, s)
        put(w, 4, [float(x) for x in xs])
        put(w, 5, [float(y) for y in ys])
        run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
        results[sub] = got(w, 0, 4, 32)
        assert results[sub] == [bits(ref(t, s, {"lz"}, [xs[k], ys[k]], sub=sub)) for k in range(32)]
    assert results[None] != results[8]


def test_gather4_with_implicit_lod_bias_clamp_offsets_and_d16() -> None:
    t = make_tex("2D", 16, 16, levels=4, seed=59)
    s = Samp(clamp=(1, 0, 0), mip=2)
    w, _ = setup(t, s)
    xs, ys = _quads(QBASE, QSTEPS)
    biases = [0.25 * (k % 7) - 0.75 for k in range(32)]
    clamps = [0.5 * (k % 3) for k in range(32)]
    offs = [((k % 5) - 2, (k % 3) - 1, 0) for k in range(32)]
    for k in range(32):
        w.v[4, k] = (offs[k][0] & 0x3F) | (offs[k][1] & 0x3F) << 8
    put(w, 5, biases)
    put(w, 6, xs)
    put(w, 7, ys)
    put(w, 8, clamps)
    run(asm("image_gather4_b_cl v[0:3], v[5:8], s[0:7], s[8:11] dmask:0x4 dim:SQ_RSRC_IMG_2D"), w)
    wants = []
    for k in range(32):
        dx, dy = _implicit(k)
        wants.append(ref(t, s, {"b", "cl"}, [Fraction(xs[k]), Fraction(ys[k])], dx=dx, dy=dy, bias=biases[k],
                         clamp=clamps[k], gather=2))
    assert got(w, 0, 4, 32) == [bits(x) for x in wants]
    run(asm("image_gather4_o v[0:3], [v4, v6, v7], s[0:7], s[8:11] dmask:0x2 dim:SQ_RSRC_IMG_2D"), w)
    for k in range(32):
        dx, dy = _implicit(k)
        want = ref(t, s, set(), [Fraction(xs[k]), Fraction(ys[k])], dx=dx, dy=dy, offs=offs[k], gather=1)
        assert got(w, 0, 4, 32)[k] == bits(want), k
    run(asm("image_gather4_b_cl v[10:11], v[5:8], s[0:7], s[8:11] dmask:0x4 dim:SQ_RSRC_IMG_2D d16"), w)
    for k in range(32):
        h = [round_float(v, "f16") for v in wants[k]]
        assert got(w, 10, 2, 32)[k] == [h[0] | h[1] << 16, h[2] | h[3] << 16], k


def test_force_unnormalized_3d_point_z_filter_and_t_sharp_min_lod() -> None:
    t = make_tex("3D", 4, 4, d=4, seed=61)
    s = Samp(clamp=(2, 2, 2), mag=1, minf=1, zf=1, unnorm=1)
    w, _ = setup(t, s)
    cs = [[Fraction((k * (5 + 2 * j)) % 40 - 4, 8) for k in range(32)] for j in range(3)]
    for j in range(3):
        put(w, 4 + j, [float(c) for c in cs[j]])
    run(asm("image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_3D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"lz"}, [cs[0][k], cs[1][k], cs[2][k]])) for k in range(32)]
    t = make_tex("2D", 8, 8, levels=4, seed=67)
    s = Samp(mag=1, minf=1, mip=2)
    w, _ = setup(t, s)
    w.s[5] |= (0x140 & 0x1F) << 27                 # T# MIN_LOD = 1.25 (u4.8: 0x140), bits 4:0 in word 5 31:27
    w.s[6] |= 0x140 >> 5                           # and bits 11:5 in word 6 6:0
    lods = [(k % 12) * 0.25 for k in range(32)]
    xs, ys = COORDS, [Fraction(k, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, lods)
    run(asm("image_sample_l v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"l"}, [xs[k], ys[k]], lod=lods[k], t_min_lod=Fraction(5, 4)))
                                for k in range(32)]


def test_a_nan_lod_takes_min_lod_and_nan_coordinates_do_not_stop_the_wave() -> None:
    t = make_tex("2D", 8, 8, levels=4, seed=71)
    s = Samp(mag=1, minf=1, mip=1, min_lod=Fraction(3, 2), border=2, clamp=(6, 6, 0))
    w, _ = setup(t, s)
    xs, ys = COORDS, [Fraction(k, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, [math.nan] * 32)
    run(asm("image_sample_l v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"l"}, [xs[k], ys[k]], lod=1.5)) for k in range(32)]
    put(w, 4, [math.nan, math.inf, -math.inf] * 10 + [0.5, 0.5])
    run(asm("image_sample_l v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)


def test_gather4_of_a_2d_array_slice() -> None:
    t = make_tex("2D_ARRAY", 4, 3, slices=3, fmt=42, seed=73)
    s = Samp(clamp=(0, 2, 0))
    w, _ = setup(t, s)
    xs, ys = COORDS, [Fraction(k * 9 % 80 - 10, 32) for k in range(32)]
    layers = [float(k % 5) - 0.5 for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, layers)
    run(asm("image_gather4_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0x8 dim:SQ_RSRC_IMG_2D_ARRAY"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"lz"}, [xs[k], ys[k], layers[k]], gather=3)) for k in range(32)]


@pytest.mark.skipif(not shutil.which("llvm-objdump-19"), reason="llvm-objdump-19 is not installed")
def test_address_dwords_of_every_form_dim_and_a16_are_llvms(tmp_path: Any) -> None:
    """The address layout (offset, bias, compare, derivatives, coordinates, LOD/clamp; A16, G16 packing) takes as
    many VGPRs as llvm-objdump-19 shows for each sampled form, DIM and A16."""
    from tinyhw.formats.rdna3_ops import OPS
    from tinyhw.mocks.rdna3 import sampler

    dims = {0: (1, 0), 1: (2, 0), 2: (3, 0), 3: (2, 1), 4: (1, 1), 5: (2, 1)}
    lines, want = [], []
    for (enc, op), (m, _t) in sorted(OPS.items()):
        if enc != "MIMG" or m not in sampler.COMPILERS:
            continue
        kind, flags = sampler._variant(m)
        for dim, (nsp, narr) in dims.items():
            for a16 in (0, 1):
                w0 = 0xF0000000 | op << 18 | (1 if kind == "gather" else 0xF) << 8 | dim << 2 | a16 << 16
                lines.append(f".long 0x{w0:08x}, 0x{4 | 2 << 26:08x}")
                want.append((m, dim, a16, sampler._layout(flags, nsp, narr, bool(a16), m.endswith("_g16"))[1]))
    obj = tmp_path / "mimg.o"
    subprocess.run(["llvm-mc-19", "-triple=amdgcn", "-mcpu=gfx1100", "-filetype=obj", "-o", str(obj)],
                   input="\n".join(lines), text=True, check=True)
    dis = subprocess.run(["llvm-objdump-19", "-d", "--mcpu=gfx1100", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    texts = [ln for ln in dis.splitlines() if "image_" in ln]
    assert len(texts) == len(want) > 600
    for (m, dim, a16, ndw), text in zip(want, texts, strict=True):
        r = re.search(r"image_\S+\s+v(?:\[\d+:\d+\]|\d+), (?:v\[(\d+):(\d+)\]|v\d+)", text)
        assert r, text
        n = int(r.group(2)) - int(r.group(1)) + 1 if r.group(1) else 1
        assert n == ndw, (m, dim, a16, text)


def test_a16_keeps_the_compare_reference_32_bit_and_packs_the_bias() -> None:
    t = make_tex("2D", 8, 8, levels=3, seed=79)
    s = Samp(compare=3, mag=1, minf=1, mip=1)
    w, _ = setup(t, s)
    xs, ys = [Fraction(k * 5 % 32, 32) for k in range(32)], [Fraction(k % 16, 16) for k in range(32)]
    zs = [float(t.texels[0][0][(k % 8, k // 4 % 8, 0)][0]) + 1 / 1024 for k in range(32)]
    put(w, 4, zs)
    for k in range(32):
        w.v[5, k] = f16(float(xs[k])) | f16(float(ys[k])) << 16
    run(asm("image_sample_c_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D a16"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, s, {"c", "lz"}, [xs[k], ys[k]], zref=zs[k])) for k in range(32)]
    xq, yq = _quads(QBASE, QSTEPS)
    biases = [0.5 * (k % 4) - 0.5 for k in range(32)]
    for k in range(32):                         # (bias, -) then (x, y): the quads' coordinates are f16-exact
        w.v[4, k] = f16(biases[k])
        w.v[5, k] = f16(xq[k]) | f16(yq[k]) << 16
    s2 = Samp(mag=1, minf=1, mip=2)
    t2 = make_tex("2D", 16, 16, levels=5, seed=83)
    w2, _ = setup(t2, s2)
    w2.v[4], w2.v[5] = w.v[4], w.v[5]
    run(asm("image_sample_b v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D a16"), w2)
    for k in range(32):
        dx, dy = _implicit(k)
        want = ref(t2, s2, {"b"}, [Fraction(xq[k]), Fraction(yq[k])], dx=dx, dy=dy, bias=biases[k])
        assert got(w2, 0, 4, 32)[k] == bits(want), k


@pytest.mark.skipif(not shutil.which("llvm-objdump-19"), reason="llvm-objdump-19 is not installed")
def test_decoder_text_of_sampled_forms_equals_llvm_objdump(tmp_path: Any) -> None:
    """Random operands (VDATA, VADDR or an NSA list, T#, S#, DMASK, DIM, A16, D16, TFE, UNORM) of every sampled
    form: the decoder's text is llvm-objdump-19's."""
    import random

    from tinyhw.formats.rdna3_ops import OPS
    from tinyhw.mocks.rdna3 import sampler

    rnd = random.Random(5)
    words = []
    for (enc, op), (m, _t) in sorted(OPS.items()):
        if enc != "MIMG" or m not in sampler.COMPILERS:
            continue
        kind, flags = sampler._variant(m)
        for _ in range(6):
            dim = rnd.choice([0, 1, 2, 4, 5] if kind != "gather" and m != "image_gather4h" else [1, 5])
            a16, d16, tfe, unorm = (rnd.randrange(2) for _ in range(4))
            d16 &= kind == "sample"               # no D16 get_lod; llvm-objdump-19 sizes D16 gathers oddly
            dmask = 1 << rnd.randrange(4) if kind == "gather" or m == "image_gather4h" else rnd.randrange(1, 16)
            nsp, narr = DIMS[{0: "1D", 1: "2D", 2: "3D", 4: "1D_ARRAY", 5: "2D_ARRAY"}[dim]]
            ndw = sampler._layout(flags, nsp, narr, bool(a16), m.endswith("_g16"))[1]
            nsa = int(1 < ndw <= 5 and rnd.randrange(2) == 1)
            w0 = 0xF0000000 | op << 18 | dmask << 8 | dim << 2 | nsa | unorm << 7 | a16 << 16 | d16 << 17
            w1 = rnd.randrange(200) | rnd.randrange(200) << 8 | rnd.randrange(20) << 16 | tfe << 21 | \
                rnd.randrange(24) << 26
            ws = [w0, w1] + ([int.from_bytes(bytes(rnd.randrange(256) for _ in range(4)), "little")] if nsa else [])
            if nsa and ndw < 5:                 # unused NSA address bytes are zero in LLVM's encodings
                ws[2] &= (1 << (8 * (ndw - 1))) - 1
            words.append(ws)
    src = "\n".join(".long " + ", ".join(f"0x{x:08x}" for x in ws) for ws in words)
    obj = tmp_path / "s.o"
    subprocess.run(["llvm-mc-19", "-triple=amdgcn", "-mcpu=gfx1100", "-filetype=obj", "-o", str(obj)], input=src,
                   text=True, check=True)
    dis = subprocess.run(["llvm-objdump-19", "-d", "--mcpu=gfx1100", str(obj)], capture_output=True, text=True,
                         check=True).stdout
    texts = [" ".join(ln.split("//")[0].split()) for ln in dis.splitlines() if "image_" in ln]
    assert len(texts) == len(words) > 300
    bad = []
    for ws, want in zip(words, texts, strict=True):
        raw = struct.pack(f"<{len(ws)}I", *ws)
        if decode_at(raw + bytes(16), 0, "gfx11").text != want:
            bad.append((decode_at(raw + bytes(16), 0, "gfx11").text, want))
    assert bad == []


SAMPLE_KERNEL = """
target triple = "amdgcn-amd-amdhsa"

declare i32 @llvm.amdgcn.workitem.id.x()
declare <4 x float> @llvm.amdgcn.image.sample.l.2d.v4f32.f32(i32, float, float, float, <8 x i32>, <4 x i32>, i1,
                                                              i32, i32)
declare <4 x float> @llvm.amdgcn.image.gather4.lz.2d.v4f32.f32(i32, float, float, <8 x i32>, <4 x i32>, i1, i32, i32)

define amdgpu_kernel void @k(<8 x i32> %t, <4 x i32> %s, ptr addrspace(1) %out) {
  %x = call i32 @llvm.amdgcn.workitem.id.x()
  %xf = uitofp i32 %x to float
  %u = fmul float %xf, 0.03125
  %v = fmul float %xf, 0.0859375
  %l = fmul float %xf, 0.125
  %a = call <4 x float> @llvm.amdgcn.image.sample.l.2d.v4f32.f32(i32 15, float %u, float %v, float %l, <8 x i32> %t,
                                                                 <4 x i32> %s, i1 false, i32 0, i32 0)
  %g = call <4 x float> @llvm.amdgcn.image.gather4.lz.2d.v4f32.f32(i32 2, float %v, float %u, <8 x i32> %t,
                                                                  <4 x i32> %s, i1 false, i32 0, i32 0)
  %i = shl i32 %x, 1
  %pa = getelementptr <4 x float>, ptr addrspace(1) %out, i32 %i
  store <4 x float> %a, ptr addrspace(1) %pa
  %j = or i32 %i, 1
  %pg = getelementptr <4 x float>, ptr addrspace(1) %out, i32 %j
  store <4 x float> %g, ptr addrspace(1) %pg
  ret void
}
"""


@pytest.mark.skipif(not shutil.which("clang-19"), reason="clang-19 is not installed")
def test_clang_compiled_sample_and_gather_kernel(tmp_path: Any) -> None:
    """clang-19 compiles the image sample/gather intrinsics; the code object runs on the core and every lane
    matches the model written here."""
    from tinyhw.mocks.rdna3 import dispatch_regs, load_kernel, run_dispatch

    src = tmp_path / "k.ll"
    src.write_text(SAMPLE_KERNEL)
    subprocess.run(["clang-19", "-target", "amdgcn-amd-amdhsa", "-mcpu=gfx1100", "-O2", "-nogpulib", "-c", str(src),
                    "-o", str(tmp_path / "k.o")], check=True)
    t = make_tex("2D", 8, 8, levels=4, seed=89)
    s = Samp(clamp=(0, 1, 0), mag=1, minf=1, mip=2)
    mem = FlatMemory(0x7F00_0000_0000, 1 << 20)
    k = load_kernel((tmp_path / "k.o").read_bytes(), mem)
    tsharp = place(mem, t)
    out = mem.alloc(64 * 32)
    kernarg = mem.alloc(struct.pack("<12IQ", *tsharp, *s.words(), out), align=64)
    res = run_dispatch(dispatch_regs(k.kd, k.entry, kernarg, (1, 1, 1), (64, 1, 1)), mem)
    assert {"image_sample_l", "image_gather4_lz"} <= set(res.per_mnemonic)
    data = struct.unpack("<512I", mem.read(out, 64 * 32))
    for x in range(64):
        u, v, lod = Fraction(x, 32), Fraction(x * 11, 128), x / 8
        assert list(data[8 * x:8 * x + 4]) == bits(ref(t, s, {"l"}, [u, v], lod=lod)), x
        assert list(data[8 * x + 4:8 * x + 8]) == bits(ref(t, s, {"lz"}, [v, u], gather=1)), x


def _as_array(t: Tex) -> Tex:
    """The cube map ``t`` as the 2D array of its faces (slice = 6 x cube + face), for the reference model."""
    return Tex("2D_ARRAY", t.w, t.h, 1, t.levels, t.slices, t.fmt, t.base_level, t.texels)


@pytest.mark.parametrize("wrap", [0, 1])
def test_cube_maps_sample_their_faces(wrap: int) -> None:
    """Face coordinates as Mesa prepares them (sc / |ma| + 1.5, so 1..2 across a face), the face (+ 8 x cube) in
    the third address; DISABLE_CUBE_WRAP applies the S# clamp modes per face, else a footprint across an edge
    (seamless filtering: its own tests below)."""
    t = make_tex("CUBE", 4, 4, slices=12, seed=97)          # two cubes
    s = Samp(clamp=(1, 2, 0), mag=1, minf=1)
    w, _ = setup(t, s)
    w.s[8] |= wrap << 28                                 # DISABLE_CUBE_WRAP
    if wrap:
        xs = [Fraction(1) + Fraction(k * 7 % 48 - 8, 32) for k in range(32)]
        ys = [Fraction(1) + Fraction(k * 5 % 40 - 4, 32) for k in range(32)]
    else:                                                # footprints inside their face: u, v in [1/8, 7/8]
        xs = [Fraction(1) + Fraction(4 + k * 7 % 25, 32) for k in range(32)]
        ys = [Fraction(1) + Fraction(4 + k * 5 % 25, 32) for k in range(32)]
    faces = [float((k % 6) + 8 * (k // 16)) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, faces)
    run(asm("image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE"), w)
    arr = _as_array(t)
    want = [bits(ref(arr, s, {"lz"}, [xs[k] - 1, ys[k] - 1, (k % 6) + 6 * (k // 16)])) for k in range(32)]
    assert got(w, 0, 4, 32) == want


# ---- MIN/MAX reduction (S# FILTER_MODE 1 / 2) -------------------------------------------------------------------
# Vulkan (VkSamplerReductionMode, "Texel Filtering"): MIN/MAX take "the component-wise minimum or maximum ... of
# the components of the set of texels with non-zero weights" within a level, and for linear mip filtering the same
# of the two levels' values with non-zero weights. ref_level/ref above restate it; a texel centre hit exactly
# gives its neighbours weight 0, so they drop out.

@pytest.mark.parametrize("mode", [1, 2])
@pytest.mark.parametrize("clamp", [0, 1, 2, 6])
def test_min_max_reduction_over_the_bilinear_footprint(mode: int, clamp: int) -> None:
    t = make_tex("2D", 4, 4, seed=101)
    s = Samp(clamp=(clamp, clamp, 0), mag=1, minf=1, mode=mode, border=2)
    w, _ = setup(t, s)
    xs = [Fraction(2 * (k % 7) - 3, 8) if k % 3 == 0 else COORDS[k] for k in range(32)]   # centres: weight 0
    ys = [Fraction(2 * (k % 5) + 1, 8) if k % 4 == 1 else Fraction(k * 13 % 96 - 30, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    want = [bits(ref(t, s, {"lz"}, [xs[k], ys[k]])) for k in range(32)]
    assert got(w, 0, 4, 32) == want
    blend = Samp(clamp=(clamp, clamp, 0), mag=1, minf=1, border=2)
    assert want != [bits(ref(t, blend, {"lz"}, [xs[k], ys[k]])) for k in range(32)]


@pytest.mark.parametrize("mode", [1, 2])
def test_min_max_reduction_across_mip_levels_and_in_3d(mode: int) -> None:
    t = make_tex("2D", 8, 8, levels=4, seed=103)
    s = Samp(clamp=(1, 1, 0), mag=1, minf=1, mip=2, mode=mode)
    check_sample_l_2d(t, s, [-1, 0, 0.25, 0.5, 1, 1.75, 2.5, 3] * 4)
    t3 = make_tex("3D", 4, 4, 4, seed=107)
    s3 = Samp(clamp=(2, 2, 2), mag=1, minf=1, mode=mode)
    w, _ = setup(t3, s3)
    xs, ys = COORDS, [Fraction(k * 7 % 40, 16) for k in range(32)]
    zs = [Fraction(k * 5 % 32, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, [float(z) for z in zs])
    run(asm("image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_3D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t3, s3, {"lz"}, [xs[k], ys[k], zs[k]])) for k in range(32)]


def test_min_max_reduction_leaves_gather_and_point_sampling_alone() -> None:
    t = make_tex("2D", 5, 4, fmt=42, seed=109)
    s = Samp(clamp=(0, 1, 0), mode=2)
    w, _ = setup(t, s)
    xs, ys = COORDS, [Fraction(k * 9 % 80 - 10, 32) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    run(asm("image_gather4_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0x2 dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, Samp(clamp=(0, 1, 0)), {"lz"}, [xs[k], ys[k]], gather=1))
                                for k in range(32)]
    run(asm("image_sample_lz v[0:3], v[4:5], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_2D"), w)
    assert got(w, 0, 4, 32) == [bits(ref(t, Samp(clamp=(0, 1, 0)), {"lz"}, [xs[k], ys[k]])) for k in range(32)]


# ---- seamless cube maps (S# DISABLE_CUBE_WRAP 0) ------------------------------------------------------------------
# Vulkan, "Cube Map Edge Handling": a texel beyond its face in only i or only j is "the adjacent texel from the
# appropriate neighboring face"; beyond both (a corner) it "should be replaced by the average of the three values of
# the adjacent texels in each incident face" (sampler.CUBE_CORNER "average"; "face" takes the face's own corner
# texel); NEAREST filtering clamps to the face edge. The faces' axes restate the guide's V_CUBESC/V_CUBETC/V_CUBEMA
# pseudocode (face: major axis vector, sc vector, tc vector). The model here places every texel centre of the cube
# in 3D and finds a texel beyond an edge by turning the face plane's part beyond the edge by 90 degrees about that
# edge onto the neighbouring face, then looking the point up among the centres.

CUBE_AXES = {0: ((1, 0, 0), (0, 0, -1), (0, -1, 0)), 1: ((-1, 0, 0), (0, 0, 1), (0, -1, 0)),
             2: ((0, 1, 0), (1, 0, 0), (0, 0, 1)), 3: ((0, -1, 0), (1, 0, 0), (0, 0, -1)),
             4: ((0, 0, 1), (1, 0, 0), (0, -1, 0)), 5: ((0, 0, -1), (-1, 0, 0), (0, -1, 0))}


def _centre(face: int, a: int, b: int, n: int) -> tuple[int, ...]:
    """The 3D point n * ma + a * sc + b * tc (face plane coordinates a, b in units of half a texel)."""
    ma, sc, tc = CUBE_AXES[face]
    return tuple(n * ma[k] + a * sc[k] + b * tc[k] for k in range(3))


def cube_texel(face: int, i: int, j: int, n: int) -> tuple[int, int, int] | None:
    """(face, x, y) of texel (i, j) of ``face`` seen from that face; None for a corner (beyond both edges)."""
    lookup = {_centre(f, 2 * x + 1 - n, 2 * y + 1 - n, n): (f, x, y)
              for f in range(6) for x in range(n) for y in range(n)}
    a, b = 2 * i + 1 - n, 2 * j + 1 - n
    if abs(a) > n and abs(b) > n:
        return None
    if abs(a) <= n and abs(b) <= n:
        return face, i, j
    ma = CUBE_AXES[face][0]
    on_edge = _centre(face, max(-n, min(n, a)), max(-n, min(n, b)), n)   # the point on the shared edge
    beyond = max(abs(a), abs(b)) - n                                       # how far past it, turned down -ma
    return lookup[tuple(on_edge[k] - beyond * ma[k] for k in range(3))]


def test_cube_neighbours_are_the_known_edges() -> None:
    n = 4
    assert cube_texel(0, 4, 1, n) == (5, 0, 1)          # +X's right edge (-z side) meets -Z's left edge
    assert cube_texel(0, -1, 2, n) == (4, 3, 2)         # +X's left edge meets +Z's right edge
    assert cube_texel(0, 1, -1, n) == (2, 3, 2)         # +X's top edge (+y) meets +Y's right column, reversed
    assert cube_texel(4, 1, 4, n) == (3, 1, 0)          # +Z's bottom edge meets -Y's top row
    assert cube_texel(2, 0, -2, n) == (5, 3, 1)         # two texels beyond +Y's top (-z): -Z, one row in
    for f in range(6):                                  # crossing an edge and back again is the identity
        for i in range(n):
            g, x, y = cube_texel(f, i, -1, n) or (0, 0, 0)
            back = [cube_texel(g, x + dx, y + dy, n) for dx, dy in ((1, 0), (-1, 0), (0, 1), (0, -1))]
            assert (f, i, 0) in back


def ref_cube_level(t: Tex, s: Samp, lv: int, cube: int, face: int, u: Fraction, v: Fraction, linear: bool,
                   gather: int | None = None, wide: bool = False) -> tuple[Fraction, ...]:
    """Seamless filtering (or gather) at level ``lv`` of face ``face`` of cube ``cube`` (face coordinates u, v in
    [0, 1])."""
    n = t.dims(lv)[0]
    corner = sampler.CUBE_CORNER
    u, v = min(max(u, Fraction(0)), Fraction(1)), min(max(v, Fraction(0)), Fraction(1))   # the face (a choice)

    def tex(i: int, j: int) -> tuple[Fraction, ...] | None:
        i, j = min(max(i, -n), 2 * n - 1), min(max(j, -n), 2 * n - 1)     # at most a face beyond (the choice)
        if corner == "face" and cube_texel(face, i, j, n) is None:
            i, j = min(max(i, 0), n - 1), min(max(j, 0), n - 1)
        hit = cube_texel(face, i, j, n)
        return None if hit is None else t.texels[6 * cube + hit[0]][lv][(hit[1], hit[2], 0)]

    if wide:                                           # gather4h: columns floor(u - 3/2) + 0..3, the point row
        row = min(max(math.floor(v * n), 0), n - 1)
        vals = [tex(math.floor(u * n - Fraction(3, 2)) + c, row) for c in range(4)]
        return tuple(x[gather or 0] for x in vals if x is not None)
    if not linear:                                     # NEAREST: clamped to the face
        return tex(min(max(math.floor(u * n), 0), n - 1), min(max(math.floor(v * n), 0), n - 1)) or ()
    i0, j0 = math.floor(u * n - Fraction(1, 2)), math.floor(v * n - Fraction(1, 2))
    a, b = u * n - Fraction(1, 2) - i0, v * n - Fraction(1, 2) - j0
    found = {(di, dj): tex(i0 + di, j0 + dj) for di in (0, 1) for dj in (0, 1)}
    quad: dict[tuple[int, int], tuple[Fraction, ...]] = {}
    for key, val in found.items():                     # the corner: the mean of the other three
        others = [x for k, x in found.items() if k != key and x is not None]
        quad[key] = val if val is not None else tuple(sum(x[c] for x in others) / 3 for c in range(4))
    if gather is not None:
        return tuple(quad[k][gather] for k in ((0, 1), (1, 1), (1, 0), (0, 0)))
    wts = {(0, 0): (1 - a) * (1 - b), (1, 0): a * (1 - b), (0, 1): (1 - a) * b, (1, 1): a * b}
    if s.mode:                                         # MIN/MAX over the texels of non-zero weight
        pick = min if s.mode == 1 else max
        return tuple(pick(quad[k][c] for k in wts if wts[k]) for c in range(4))
    return tuple(sum(wts[k] * quad[k][c] for k in wts) for c in range(4))


CUBE_U = [Fraction(k * 11 % 33, 32) for k in range(32)]              # 0 .. 1 across the face, both edges
CUBE_V = [Fraction(k * 7 % 33, 32) for k in range(32)]
CUBE_FACE = [(k % 6, k // 16) for k in range(32)]                     # (face, cube)


def _cube_wave(t: Tex, s: Samp) -> Any:
    w, _ = setup(t, s)
    put(w, 4, [float(1 + u) for u in CUBE_U])
    put(w, 5, [float(1 + v) for v in CUBE_V])
    put(w, 6, [float(f + 8 * c) for f, c in CUBE_FACE])
    return w


@pytest.mark.parametrize("corner", ["average", "face"])
@pytest.mark.parametrize("linear", [0, 1])
def test_seamless_cube_filtering_takes_the_adjacent_faces(corner: str, linear: int,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sampler, "CUBE_CORNER", corner)
    t = make_tex("CUBE", 4, 4, slices=12, seed=113)
    s = Samp(clamp=(6, 1, 0), mag=linear, minf=linear, border=2)   # clamp modes do not apply across edges
    w = _cube_wave(t, s)
    run(asm("image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE"), w)
    want = [bits(ref_cube_level(t, s, 0, c, f, CUBE_U[k], CUBE_V[k], bool(linear))) for k, (f, c) in
            enumerate(CUBE_FACE)]
    assert got(w, 0, 4, 32) == want


def test_seamless_cube_trilinear_min_max_and_gathers(monkeypatch: pytest.MonkeyPatch) -> None:
    t = make_tex("CUBE", 4, 4, levels=3, slices=12, seed=127)
    s = Samp(mag=1, minf=1, mip=2)
    w = _cube_wave(t, s)
    lods = [(k % 9) / 4 for k in range(32)]
    put(w, 7, lods)
    run(asm("image_sample_l v[0:3], v[4:7], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE"), w)
    for k, (f, c) in enumerate(CUBE_FACE):
        lv, fr = min(math.floor(lods[k]), 2), Fraction(lods[k]) - min(math.floor(lods[k]), 2)
        a = ref_cube_level(t, s, lv, c, f, CUBE_U[k], CUBE_V[k], True)
        if fr:
            b = ref_cube_level(t, s, lv + 1, c, f, CUBE_U[k], CUBE_V[k], True)
            a = tuple(p * (1 - fr) + q * fr for p, q in zip(a, b, strict=True))
        assert got(w, 0, 4, 32)[k] == bits(a), k
    s = Samp(mag=1, minf=1, mode=2)                    # MAX over a footprint across an edge (corner included)
    w = _cube_wave(t, s)
    run(asm("image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE"), w)
    assert got(w, 0, 4, 32) == [bits(ref_cube_level(t, s, 0, c, f, CUBE_U[k], CUBE_V[k], True))
                                for k, (f, c) in enumerate(CUBE_FACE)]
    w = _cube_wave(t, Samp())
    for comp in range(4):
        run(asm(f"image_gather4_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:{1 << comp:#x} dim:SQ_RSRC_IMG_CUBE"), w)
        assert got(w, 0, 4, 32) == [bits(ref_cube_level(t, Samp(), 0, c, f, CUBE_U[k], CUBE_V[k], True, comp))
                                    for k, (f, c) in enumerate(CUBE_FACE)]
    run(asm("image_gather4h v[0:3], v[4:6], s[0:7], s[8:11] dmask:0x4 dim:SQ_RSRC_IMG_CUBE"), w)
    assert got(w, 0, 4, 32) == [bits(ref_cube_level(t, Samp(), 0, c, f, CUBE_U[k], CUBE_V[k], True, 2, wide=True))
                                for k, (f, c) in enumerate(CUBE_FACE)]


def test_seamless_cube_depth_compare_and_wild_coordinates() -> None:
    """The compare happens per texel before the corner mean (the footprint's texels are compared texels); NaN and
    far-out face coordinates do not stop the wave."""
    t = make_tex("CUBE", 4, 4, slices=12, seed=131)
    s = Samp(mag=1, minf=1, compare=3)
    w, _ = setup(t, s)
    zs = [float(t.texels[k % 12][0][(k % 4, k // 4 % 4, 0)][0]) for k in range(32)]
    put(w, 4, zs)
    put(w, 5, [float(1 + u) for u in CUBE_U])
    put(w, 6, [float(1 + v) for v in CUBE_V])
    put(w, 7, [float(f + 8 * c) for f, c in CUBE_FACE])
    run(asm("image_sample_c_lz v[0:3], v[4:7], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE"), w)
    for k, (f, c) in enumerate(CUBE_FACE):
        z = Fraction(zs[k])
        cmp = Tex("CUBE", 4, 4, 1, 1, 12, 63, 0, [[{xy: (Fraction(int(z <= v[0])),) * 4 for xy, v in
                                                      t.texels[sl][0].items()}] for sl in range(12)])
        assert got(w, 0, 4, 32)[k] == bits(ref_cube_level(cmp, Samp(mag=1, minf=1), 0, c, f, CUBE_U[k], CUBE_V[k],
                                                          True)), k
    w, _ = setup(t, Samp(mag=1, minf=1))
    xs = [math.nan, math.inf, -math.inf, 7.5, -3.0, 1.5, 2.0, 1.0, 5.0, -1.75, 1.5, 3.25] + [1.5] * 20
    ys = [1.5, math.nan, 9.0, -5.0, 1.25, math.inf, 2.0, 1.0, 1.5, 1.5, -2.5, 4.0] + [1.5] * 20
    put(w, 4, xs)
    put(w, 5, ys)
    put(w, 6, [float(k % 6) for k in range(32)])
    run(asm("image_sample_lz v[0:3], v[4:6], s[0:7], s[8:11] dmask:0xf dim:SQ_RSRC_IMG_CUBE"), w)
    for k in range(32):
        if math.isfinite(xs[k]) and math.isfinite(ys[k]):
            want = ref_cube_level(t, Samp(), 0, 0, k % 6, Fraction(xs[k]) - 1, Fraction(ys[k]) - 1, True)
            assert got(w, 0, 4, 32)[k] == bits(want), k
