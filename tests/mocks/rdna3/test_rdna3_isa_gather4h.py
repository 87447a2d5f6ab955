"""``image_gather4h`` on the shader core (tinyhw/mocks/rdna3/sampler.py): four horizontally adjacent texels of one row.

The guide says only "fetch 1 component per texel from 4x1 texels"; the model's footprint is its documented choice
(``sampler.GATHER4H_X_SHIFT``, ``sampler.GATHER4H_ROW``): the columns floor(u - 3/2) + 0..3 (u = x * width), the
row point sampling takes (floor(v) after the 1/64-texel rounding unless TRUNC_COORD; or the 2x2 footprint's upper /
lower row), each index through the S#'s clamp mode, returned left to right, at the level point mip selection picks
from the implicit LOD (as ``image_gather4``). :func:`ref4h` restates that rule here in plain Python over the
texel dictionary of :func:`make_tex`; the instructions are assembled by llvm-mc-19 (skipped without it).
"""

from __future__ import annotations

import math
import shutil
from fractions import Fraction

import pytest
from rdna3isa import asm, f16, round_float, run

from tests.mocks.rdna3.test_rdna3_isa_sample import (
    BORDERS,
    COORDS,
    QBASE,
    QSTEPS,
    Samp,
    Tex,
    _as_array,
    _implicit,
    _quads,
    bits,
    got,
    make_tex,
    put,
    ref_cube_level,
    ref_lod,
    rne,
    setup,
    wrap,
)
from tinyhw.mocks.rdna3 import Unimplemented, sampler

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
YS = [Fraction(k * 9 % 80 - 10, 32) for k in range(32)]       # in [-0.31, 2.16]: every row case, edges too


def ref4h(t: Tex, s: Samp, coords: list[Fraction], comp: int, *, lv: int = 0, layer: int = 0,
          row: str = "point", shift: Fraction = Fraction(3, 2)) -> tuple[Fraction, ...]:
    """The four texels' component ``comp``, left to right: columns floor(u - shift) + 0..3, the row by ``row``."""
    w, h, _d = t.dims(t.base_level + lv)
    u = coords[0] * w
    if s.clamp[0] == 4:                             # CLAMP_HALF_BORDER (GL's CLAMP): u clamped to [0, w]
        u = min(max(u, Fraction(0)), Fraction(w))
    first = math.floor(u - shift)
    y = 0
    if t.kind.startswith("2D"):
        v = coords[1] * h
        if s.clamp[1] == 4:
            v = min(max(v, Fraction(0)), Fraction(h))
        if row == "point":
            y = math.floor(v if s.trunc else Fraction(rne(v * 64), 64))
            y = min(y, h - 1) if s.clamp[1] == 4 else y
        else:
            y = math.floor(v - Fraction(1, 2)) + (row == "y1")
    out = []
    for x in range(first, first + 4):
        wx, wy = wrap(x, w, s.clamp[0]), wrap(y, h, s.clamp[1])
        if wx is None or wy is None:
            out.append(Fraction(BORDERS[s.border][comp]))
        else:
            out.append(t.texels[layer][t.base_level + lv][(wx, wy, 0)][comp])
    return tuple(out)


GATHER = "image_gather4h v[0:3], v[4:5], s[0:7], s[8:11] dmask:{:#x} dim:SQ_RSRC_IMG_2D"


@pytest.mark.parametrize("comp", range(4))
def test_dmask_selects_each_component_of_the_4x1_footprint(comp: int) -> None:
    t = make_tex("2D", 5, 4, fmt=42, seed=19)
    s = Samp(clamp=(0, 1, 0))
    w, _ = setup(t, s)
    put(w, 4, [float(x) for x in COORDS])
    put(w, 5, [float(y) for y in YS])
    run(asm(GATHER.format(1 << comp)), w)
    assert got(w, 0, 4, 32) == [bits(ref4h(t, s, [COORDS[k], YS[k]], comp)) for k in range(32)]


@pytest.mark.parametrize(("clamp", "border"), [((0, 0, 0), 0), ((1, 1, 0), 0), ((2, 2, 0), 0), ((3, 3, 0), 0),
                                               ((6, 6, 0), 1), ((6, 2, 0), 2), ((7, 7, 0), 2), ((1, 2, 0), 0),
                                               ((4, 4, 0), 2), ((4, 0, 0), 1)])
def test_each_address_mode_at_the_edges(clamp: tuple[int, int, int], border: int) -> None:
    """Coordinates from -1.25 to 3.66 widths on a 3-texel-wide image: the footprint leaves the image on both sides
    (and by more than one image width), each texel through the mode on its own."""
    t = make_tex("2D", 3, 4, seed=5)
    s = Samp(clamp=clamp, border=border)
    w, _ = setup(t, s)
    put(w, 4, [float(x) for x in COORDS])
    put(w, 5, [float(y) for y in YS])
    run(asm(GATHER.format(2)), w)
    assert got(w, 0, 4, 32) == [bits(ref4h(t, s, [COORDS[k], YS[k]], 1)) for k in range(32)]


def test_the_row_is_point_sampled_with_the_1_64_rounding_unless_trunc_coord() -> None:
    t = make_tex("2D", 8, 4, seed=7)
    ys = [Fraction(k % 4 + 1, 4) - Fraction(1, 1024) for k in range(32)]        # 1/256 texel below a row
    xs = [Fraction(k, 32) for k in range(32)]
    for trunc in (0, 1):
        s = Samp(trunc=trunc)
        w, _ = setup(t, s)
        put(w, 4, [float(x) for x in xs])
        put(w, 5, [float(y) for y in ys])
        run(asm(GATHER.format(1)), w)
        assert got(w, 0, 4, 32) == [bits(ref4h(t, s, [xs[k], ys[k]], 0)) for k in range(32)], trunc
    assert ref4h(t, Samp(trunc=0), [xs[4], ys[4]], 0) != ref4h(t, Samp(trunc=1), [xs[4], ys[4]], 0)


@pytest.mark.parametrize("row", ["y0", "y1"])
def test_the_row_and_the_shift_are_the_named_constants(monkeypatch: pytest.MonkeyPatch, row: str) -> None:
    t = make_tex("2D", 6, 5, seed=9)
    s = Samp(clamp=(0, 0, 0))
    monkeypatch.setattr(sampler, "GATHER4H_ROW", row)
    monkeypatch.setattr(sampler, "GATHER4H_X_SHIFT", 0.5)
    w, _ = setup(t, s)
    put(w, 4, [float(x) for x in COORDS])
    put(w, 5, [float(y) for y in YS])
    run(asm(GATHER.format(8)), w)
    assert got(w, 0, 4, 32) == [bits(ref4h(t, s, [COORDS[k], YS[k]], 3, row=row, shift=Fraction(1, 2)))
                                for k in range(32)]


def test_a_2d_array_slice_and_1d_images() -> None:
    t = make_tex("2D_ARRAY", 4, 3, slices=3, fmt=42, seed=73)
    s = Samp(clamp=(0, 2, 0))
    w, _ = setup(t, s)
    layers = [float(k % 5) - 0.5 for k in range(32)]       # ties round to even, then clamp to the slices
    put(w, 4, [float(x) for x in COORDS])
    put(w, 5, [float(y) for y in YS])
    put(w, 6, layers)
    run(asm("image_gather4h v[0:3], v[4:6], s[0:7], s[8:11] dmask:0x4 dim:SQ_RSRC_IMG_2D_ARRAY"), w)
    assert got(w, 0, 4, 32) == [bits(ref4h(t, s, [COORDS[k], YS[k]], 2, layer=min(max(rne(Fraction(layers[k])), 0), 2)))
                                for k in range(32)]
    t1 = make_tex("1D", 6, seed=3)
    s1 = Samp(clamp=(1, 0, 0))
    w, _ = setup(t1, s1)
    put(w, 4, [float(x) for x in COORDS])
    run(asm("image_gather4h v[0:3], v4, s[0:7], s[8:11] dmask:0x2 dim:SQ_RSRC_IMG_1D"), w)
    assert got(w, 0, 4, 32) == [bits(ref4h(t1, s1, [COORDS[k]], 1)) for k in range(32)]
    ta = make_tex("1D_ARRAY", 5, slices=2, seed=4)
    sa = Samp(clamp=(6, 0, 0), border=2)
    w, _ = setup(ta, sa)
    put(w, 4, [float(x) for x in COORDS])
    put(w, 5, [float(k % 2) for k in range(32)])
    run(asm("image_gather4h v[0:3], v[4:5], s[0:7], s[8:11] dmask:0x8 dim:SQ_RSRC_IMG_1D_ARRAY"), w)
    assert got(w, 0, 4, 32) == [bits(ref4h(ta, sa, [COORDS[k]], 3, layer=k % 2)) for k in range(32)]


def test_the_level_is_the_point_mip_of_the_implicit_lod() -> None:
    t = make_tex("2D", 16, 16, levels=5, seed=11)
    s = Samp(mip=2, max_lod=Fraction(13, 4))          # linear mip filter: a gather takes the nearest level
    w, _ = setup(t, s)
    xs, ys = _quads(QBASE, QSTEPS)
    put(w, 4, xs)
    put(w, 5, ys)
    run(asm(GATHER.format(1)), w)
    levels = set()
    for k in range(32):
        dx, dy = _implicit(k)
        lod, _raw = ref_lod(t, s, set(), None, dx, dy, 0.0, None, False)
        lv = min(max(math.floor(lod + 0.5), 0), 4)
        levels.add(lv)
        assert got(w, 0, 4, 32)[k] == bits(ref4h(t, s, [Fraction(xs[k]), Fraction(ys[k])], 0, lv=lv)), k
    assert len(levels) >= 3


def test_a16_d16_and_tfe_as_the_2x2_gather() -> None:
    t = make_tex("2D", 7, 5, fmt=42, seed=29)
    s = Samp(clamp=(0, 1, 0))
    w, _ = setup(t, s)
    xs, ys = [Fraction(k * 5 % 40 - 4, 32) for k in range(32)], [Fraction(k * 3 % 40 - 4, 32) for k in range(32)]
    for k in range(32):
        w.v[4, k] = f16(float(xs[k])) | f16(float(ys[k])) << 16
    w.v[2] = 0x1234
    run(asm("image_gather4h v[0:1], v4, s[0:7], s[8:11] dmask:0x2 dim:SQ_RSRC_IMG_2D a16 d16"), w)
    for k in range(32):
        h = [round_float(c, "f16") for c in ref4h(t, s, [xs[k], ys[k]], 1)]
        assert got(w, 0, 2, 32)[k] == [h[0] | h[1] << 16, h[2] | h[3] << 16], k
    assert int(w.v[2, 0]) == 0x1234
    w.v[4] = 0xFFFF
    w.v[5] = 0x5678
    put(w, 8, [float(x) for x in xs])                           # TFE: the status VGPR after the four gets 0
    put(w, 9, [float(y) for y in ys])
    run(asm("image_gather4h v[0:4], v[8:9], s[0:7], s[8:11] dmask:0x4 dim:SQ_RSRC_IMG_2D tfe"), w)
    assert got(w, 0, 6, 32) == [[*bits(ref4h(t, s, [xs[k], ys[k]], 2)), 0, 0x5678] for k in range(32)]


def test_several_dmask_bits_and_a_3d_image_are_refused() -> None:
    t = make_tex("2D", 4, 4)
    w, _ = setup(t, Samp())
    put(w, 4, [0.5] * 32)
    put(w, 5, [0.5] * 32)
    words = asm(GATHER.format(1))
    for dmask in (0x3, 0xF, 0xA):          # llvm-mc-19 refuses to assemble these: the word is patched
        with pytest.raises(Unimplemented, match=f"image_gather4h with DMASK {dmask:#x}"):
            run([words[0] & ~(0xF << 8) | dmask << 8, *words[1:]], w)
    with pytest.raises(Unimplemented, match="image_gather4h of a 3D image"):
        run(asm("image_gather4h v[0:3], v[4:6], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_3D"), w)


@pytest.mark.parametrize("wrap", [0, 1])
def test_cube_faces_and_the_seamless_edge(wrap: int) -> None:
    """A cube face is gathered as a 2D slice (face coordinates 1..2); with DISABLE_CUBE_WRAP the S# clamp modes apply
    per face; without it (seamless filtering) a column beyond the edge is the adjacent face's (as
    ``test_rdna3_isa_sample.ref_cube_level`` restates Vulkan's cube-map edge rule)."""
    t = make_tex("CUBE", 8, 8, slices=6, seed=97)
    s = Samp(clamp=(1, 2, 0))
    w, _ = setup(t, s)
    w.s[8] |= wrap << 28                                     # DISABLE_CUBE_WRAP
    lo = -8 if wrap else 12                                  # 12/64 .. 43/64 of a face: 4 columns inside it
    xs = [Fraction(1) + Fraction(lo + k * 7 % 32, 64) for k in range(32)]
    ys = [Fraction(1) + Fraction(k * 5 % 64, 64) for k in range(32)]
    put(w, 4, [float(x) for x in xs])
    put(w, 5, [float(y) for y in ys])
    put(w, 6, [float(k % 6) for k in range(32)])
    text = "image_gather4h v[0:3], v[4:6], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_CUBE"
    run(asm(text), w)
    arr = _as_array(t)
    assert got(w, 0, 4, 32) == [bits(ref4h(arr, s, [xs[k] - 1, ys[k] - 1], 0, layer=k % 6)) for k in range(32)]
    if not wrap:                                             # seamless: the columns beyond the edge come from
        put(w, 4, [1.0 + 10 / 64] * 32)                      # the adjacent face (u = 1.25 texels: column -1)
        run(asm(text), w)
        assert got(w, 0, 4, 32) == [bits(ref_cube_level(t, s, 0, 0, k % 6, Fraction(10, 64), ys[k] - 1, True, 0,
                                                         wide=True)) for k in range(32)]
