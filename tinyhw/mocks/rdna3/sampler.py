"""Sampled image instructions: ``image_sample*``, ``image_gather4*`` and ``image_get_lod`` (RDNA3 ISA reference guide,
"Image Memory Instructions": "Image Opcodes with Sampler", the sampler descriptor (S#) table).

The texels come from :mod:`tinyhw.mocks.rdna3.image` (T# parsing, ``read_texels`` after number-format conversion,
``apply_dst_sel``, ``mip_dims``); this module does what the sampler adds on top.

**The S#** (four SGPRs at SSAMP, :func:`parse_ssharp`): the guide's sampler table, bit positions as the
``SQ_IMG_SAMP_WORD0..3`` register headers give them (the same fields the gfx11 guide lists; Mesa's
``ac_build_sampler_descriptor`` fills the same ones for gfx10/gfx11, LOD_BIAS in [-32, 31] with 8 fraction bits):
word 0 CLAMP_X 2:0, CLAMP_Y 5:3, CLAMP_Z 8:6, MAX_ANISO_RATIO 11:9, DEPTH_COMPARE_FUNC 14:12, FORCE_UNNORMALIZED
15, ANISO_THRESHOLD 18:16, MC_COORD_TRUNC 19, FORCE_DEGAMMA 20, ANISO_BIAS 26:21, TRUNC_COORD 27, DISABLE_CUBE_WRAP
28, FILTER_MODE 30:29; word 1 MIN_LOD 11:0 and MAX_LOD 23:12 (unsigned 4.8 fixed point), PERF_MIP 27:24, PERF_Z
31:28; word 2 LOD_BIAS 13:0 (signed 5.8), LOD_BIAS_SEC 19:14, XY_MAG_FILTER 21:20, XY_MIN_FILTER 23:22, Z_FILTER
25:24, MIP_FILTER 27:26; word 3 BORDER_COLOR_TYPE 31:30 (the BORDER_COLOR_PTR moved on gfx11, Mesa's
``BORDER_COLOR_PTR_GFX11``; the model keeps bits 11:0 but never uses them: the border colour table is refused).
Clamp modes: 0 wrap, 1 mirror, 2 clamp to the last texel, 3 mirror once then clamp to the last texel, 4 clamp half
way to the border, 5 mirror once half way to the border, 6 clamp to the border, 7 mirror once to the border.
Mode 4 (SQ_TEX_CLAMP_HALF_BORDER) is OpenGL's CLAMP wrap mode: Mesa's radeonsi, r600 and freedreno drivers program
it for PIPE_TEX_WRAP_CLAMP (GL_CLAMP) and PAL names it ClampHalfBorder; GL's CLAMP limits the texture coordinate
"to exactly the range [0,1]", so that at the edge "the texture sampling filter straddles the edge of the texture
image, taking 1/2 its sample values from within the texture image, and the other 1/2 from the texture border"
(ARB_texture_border_clamp's overview). The model clamps each axis's texel coordinate (after the ``_o`` offset: a
choice) to [0, size]; a bilinear tap outside the image is the border colour, point sampling at size takes the last
texel (GL's NEAREST rule for s = 1). Mode 5 (MIRROR_ONCE_HALF_BORDER, which the drivers program for GL's
MIRROR_CLAMP_EXT) stays refused: no definition of its texel indexes near the mirror axis was found.
Compare functions: 0 never, 1 less, 2 equal, 3 less-equal, 4 greater, 5 not-equal, 6 greater-equal, 7 always.
XY filters: 0 point, 1 bilinear, 2/3 anisotropic; mip filter: 0 none, 1 point, 2 linear; border colour type: 0
transparent black, 1 opaque black, 2 opaque white, 3 from the border colour table (a register).

**The address VGPRs** (the guide's address table; VADDR, or with NSA the VGPRs VADDR, ADDR1..ADDR4 one dword each),
in this order, each present only where the opcode has it: the texel offsets (``_o``: signed 6-bit X 5:0, Y 13:8,
Z 21:16), the LOD bias (``_b``), the depth-compare reference (``_c``), the user derivatives (``_d``: all of d/dx, then
all of d/dy, one per spatial coordinate), the coordinates (x; y; z, the array slice or the cube face), then the LOD
(``_l``) or the LOD clamp (``_cl``). A16 makes the bias, the coordinates and the LOD/clamp 16-bit (f16), packed two
to a dword from the low half; the derivatives are 16-bit only in the ``_g16`` forms (A16 leaves them 32-bit: the
address sizes llvm-mc-19 gives every form), packed per direction (d/dx values in their own dwords, then d/dy); the
offset and the compare reference stay 32-bit.

**The sampling**: coordinates are normalised (x the width ...) unless the instruction's UNORM or the S#'s
FORCE_UNNORMALIZED is set (then they are texel coordinates of the level sampled). The LOD: ``_l`` gives it,
``_lz`` is level 0, else log2 of the larger of the two derivative vectors' lengths in texels of the base level
(max(|d(uvw)/dx|, |d(uvw)/dy|)), plus the ``_b`` bias; then the S#'s LOD_BIAS is added (not for ``_lz``), the
result clamped to [MIN_LOD, MAX_LOD] (as IEEE maxNum/minNum: a NaN LOD becomes MIN_LOD, a choice), raised to the
``_cl`` clamp and to the T#'s MIN_LOD (an absolute level: a choice). LOD <= 0 uses the magnification filter, above
it the minification filter. Levels are relative to the T#'s BASE_LEVEL and go up to LAST_LEVEL; the mip
filter picks level 0 (none), the nearest level floor(LOD + 1/2) (point), or blends floor(LOD) and the next one by
the fraction (linear). In a level: point sampling takes floor(u) (u = x * width), after rounding u to 1/64 texel
(round to nearest even) unless TRUNC_COORD is set (as RADV describes the hardware's two modes); bilinear sampling
takes the four texels around u - 1/2 with the weights of the fractions. 3D images filter in z as in x and y
(Z_FILTER 1 makes z point-sampled). The array slice is the coordinate rounded to the nearest even integer and
clamped to the slices. The offsets are added in texels of the level sampled. The clamp modes map each texel index
into the image or onto the border colour; the border colour replaces the texel after DST_SEL.

``_c``: each texel's first component (after DST_SEL) becomes 1.0 when ``reference OP texel`` holds, else 0.0,
before filtering (percentage-closer filtering), and the filtered value is returned in all four components. The
operand order is the APIs' (Vulkan and D3D compare the reference with the texel), which PAL and RADV map one to
one onto DEPTH_COMPARE_FUNC. ``image_gather4*``: the four texels of the bilinear footprint at the level chosen as
point mip filtering would, component DMASK (one bit, as llvm-mc-19 requires) of each, returned as (x0, y1),
(x1, y1), (x1, y0), (x0, y0) (y1 = y0 + 1), the order Vulkan's and D3D's gathers define, which compilers emit as
this instruction directly; with ``_c`` each compared. ``image_gather4h`` (the guide: "fetch 1 component per texel
from 4x1 texels", nothing more) takes four horizontally adjacent texels of one row, at the level and with the LOD,
DMASK (one bit), D16, TFE and A16 rules of ``image_gather4``, each texel through the clamp modes as the 2x2 gather's;
which texels is the model's choice (:data:`GATHER4H_X_SHIFT`, :data:`GATHER4H_ROW`): the columns floor(u - 3/2)
+ 0..3, so that two texel centres lie on each side of the sample point as the 2x2 footprint's floor(u - 1/2) + 0..1
do, in the row point sampling takes, returned left to right (VDATA[0..3] = columns +0..+3). It gathers 1D and 1D
array images too (their one row; the 2x2 gather needs two rows and refuses them: also a choice).
``image_get_lod``: component 0 the LOD as it is used (after the S#'s bias and LOD clamps, clamped to the image's
levels), component 1 the computed LOD before any clamp (with the S#'s bias).

Implicit derivatives (``image_sample``, ``_b``, ``_c``, ``_cl``, ``image_gather4`` without ``_l``/``_lz``,
``image_get_lod``): a compute wave has no pixel quads, so the model takes the pixel shader's quad layout (lanes
4k..4k+3 = top-left, top-right, bottom-left, bottom-right, as Mesa's ``ac_build_ddxy`` documents it; D3D's SM 6.6
compute derivatives use the same Z order): d/dx = lane 4k+1 - lane 4k, d/dy = lane 4k+2 - lane 4k, the same for all
four lanes of the quad (coarse derivatives), from the address VGPRs of all four lanes whatever EXEC says.

Results: DMASK picks the components (packed into consecutive VGPRs, gather always returns four), f32, or f16 pairs
with D16 (rounded to nearest even); UINT/SINT images return the integers (point sampling only). TFE: the status
VGPR after the data gets 0, as image.py writes it (the guide's TFE text: TD writes the status; nothing fails
here). LWE is refused.

Choices not checked on hardware (the guide does not pin them): the quads of a compute wave and coarse derivatives; the
filter weights are exact (float64) fractions by default, not the hardware's fixed-point subtexel weights
(:data:`SUBTEXEL_BITS` = 8 models 8-bit weights rounded to nearest); the arithmetic is float64 (hardware computes
addresses in f32 or fixed point); the compare result in all four components; the border colour after DST_SEL; the
S# LOD_BIAS applied to ``_l`` too; unnormalised coordinates addressing the level sampled directly.

**MIN/MAX reduction** (S# FILTER_MODE 1 min, 2 max; 0 blends, 3 is refused): as Vulkan's
``VkSamplerReductionMode`` (VK_EXT_sampler_filter_minmax, D3D's MINIMUM_/MAXIMUM_ filters) defines it, "the
component-wise minimum or maximum ... of the components of the set of texels with non-zero weights" of the
footprint in a level (a texel of weight exactly 0, a sample on a texel centre's row or column, or a point-sampled
axis's second tap, takes no part), and for linear mip filtering Vulkan's "Texel Filtering" applies the same to the
two levels' values ("computing a component-wise minimum or maximum ... of the values with non-zero weights"): the
levels are reduced, not blended. Border texels take part as texels. A NaN texel is dropped unless all are NaN (IEEE
minNum/maxNum: a choice). Point sampling (one texel) is unchanged; gathers return the unfiltered texels and ignore
the mode (a choice: the APIs define the reduction as part of filtering, which a gather does not do); a depth
compare with MIN/MAX is refused (Vulkan forbids compareEnable with a MIN/MAX reduction, so no API defines it).

Cube maps: the T#'s slices are the faces (6 per cube); the address holds face coordinates as the compiler prepares
them from V_CUBESC/TC/MA/ID (sc / |ma| + 1.5, so 1..2 across a face: Mesa's ``ac_prepare_cube_coords``), then
8 x cube + face; the model samples the face as a 2D slice (x - 1, y - 1 normalised). With the S#'s
DISABLE_CUBE_WRAP the clamp modes apply per face. Without it (seamless filtering, Vulkan's "Cube Map Edge
Handling") the clamp modes are ignored: point sampling clamps to the face edge (Vulkan: NEAREST uses CLAMP_TO_EDGE),
and a bilinear, gather4 or gather4h footprint texel beyond one edge of its face is "the adjacent texel from the
appropriate neighboring face": the face plane beyond the edge is folded by 90 degrees onto the neighbouring face
(the face axes of the guide's V_CUBESC/V_CUBETC/V_CUBEMA pseudocode, :data:`_CUBE_FACES`), at the same distance
from the shared edge. A texel beyond both edges (a corner) "should be replaced by the average of the three values
of the adjacent texels in each incident face. However, implementations may replace the cube map corner texel by
other methods" (Vulkan): :data:`CUBE_CORNER` "average" (the default) takes the mean of the footprint's other three
texels, "face" the sampled face's own corner texel; which the hardware does is not known (a choice). Faces must be
square; face coordinates outside 1..2 (which the compiler's V_CUBE* sequence does not produce) are clamped to the
face, a NaN one to its low edge (a choice), so a footprint reaches at most one texel beyond the face.

Refused (``Unimplemented``): anisotropic filters (the hardware's anisotropic footprint, its sample count and
placement, is not published: the guide gives only the S# fields), FILTER_MODE 3 and MIN/MAX with a depth compare,
the MIRROR_ONCE_HALF_BORDER clamp mode (5), the border colour table, unnormalised cube coordinates, MSAA images,
integer images filtered or compared, and LWE.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import image
from tinyhw.mocks.rdna3.state import ShaderFault, Wave

__all__ = ["COMPILERS", "CUBE_CORNER", "GATHER4H_ROW", "GATHER4H_X_SHIFT", "SUBTEXEL_BITS", "Ssharp", "parse_ssharp"]

Fn = Callable[[Wave], Any]
Bad = Callable[[str], Exception]
F64, I64, U32 = np.float64, np.int64, np.uint32

# DIM: name, spatial coordinates, array coordinate (llvm-mc-19's SQ_RSRC_IMG_* values)
_DIMS = {0: ("1D", 1, 0), 1: ("2D", 2, 0), 2: ("3D", 3, 0), 3: ("CUBE", 2, 1), 4: ("1D_ARRAY", 1, 1),
         5: ("2D_ARRAY", 2, 1), 6: ("2D_MSAA", 2, 0), 7: ("2D_MSAA_ARRAY", 2, 1)}
_BORDER = {0: (0.0, 0.0, 0.0, 0.0), 1: (0.0, 0.0, 0.0, 1.0), 2: (1.0, 1.0, 1.0, 1.0)}
#: Fraction bits of the bilinear weights: None = exact (the default); 8 snaps each axis's fraction to 1/256 (round
#: to nearest even), the subtexel precision D3D12 requires (D3D12_SUBTEXEL_FRACTIONAL_BIT_COUNT = 8) and Vulkan
#: drivers report as subTexelPrecisionBits. How the hardware rounds to it is not published: a choice.
SUBTEXEL_BITS: int | None = None
#: ``image_gather4h``'s first column is floor(u - GATHER4H_X_SHIFT) (u = x * width + offset), its four texels that
#: column and the three to its right: 1.5 puts two texel centres on each side of the sample point, as the 2x2
#: gather's floor(u - 0.5) puts one. The guide says only "4x1 texels": a choice not checked on hardware.
GATHER4H_X_SHIFT = 1.5
#: ``image_gather4h``'s row: "point" the row point sampling takes (floor(v), v = y * height, after the 1/64-texel
#: rounding unless TRUNC_COORD), "y0" / "y1" the 2x2 gather footprint's upper (floor(v - 0.5)) / lower row. A choice
#: not checked on hardware.
GATHER4H_ROW = "point"


@dataclass(frozen=True)
class Ssharp:
    """An image sampler descriptor (S#): the fields of the guide's sampler table (see the module text)."""

    clamp: tuple[int, int, int]    # CLAMP_X, CLAMP_Y, CLAMP_Z
    max_aniso_ratio: int
    compare_func: int              # DEPTH_COMPARE_FUNC
    force_unnormalized: bool
    disable_cube_wrap: bool
    trunc_coord: bool
    filter_mode: int               # 0 blend (the filter), 1 min, 2 max
    min_lod: float                 # MIN_LOD, u4.8
    max_lod: float                 # MAX_LOD, u4.8
    lod_bias: float                # LOD_BIAS, s5.8
    mag_filter: int                # XY_MAG_FILTER
    min_filter: int                # XY_MIN_FILTER
    z_filter: int
    mip_filter: int
    border_color_ptr: int
    border_color_type: int


def parse_ssharp(words: Sequence[int]) -> Ssharp:
    """The S# in four dwords (bit positions in the module text)."""
    w0, w1, w2, w3 = (int(x) & 0xFFFFFFFF for x in words[:4])
    bias = w2 & 0x3FFF
    bias -= (bias & 0x2000) << 1
    return Ssharp(clamp=(w0 & 7, w0 >> 3 & 7, w0 >> 6 & 7), max_aniso_ratio=w0 >> 9 & 7,
                  compare_func=w0 >> 12 & 7, force_unnormalized=bool(w0 >> 15 & 1), trunc_coord=bool(w0 >> 27 & 1),
                  disable_cube_wrap=bool(w0 >> 28 & 1),
                  filter_mode=w0 >> 29 & 3, min_lod=(w1 & 0xFFF) / 256, max_lod=(w1 >> 12 & 0xFFF) / 256,
                  lod_bias=bias / 256, mag_filter=w2 >> 20 & 3, min_filter=w2 >> 22 & 3, z_filter=w2 >> 24 & 3,
                  mip_filter=w2 >> 26 & 3, border_color_ptr=w3 & 0xFFF, border_color_type=w3 >> 30 & 3)


def _variant(m: str) -> tuple[str, frozenset[str]]:
    if m == "image_get_lod":
        return "lod", frozenset()
    kind = "gather" if m.startswith("image_gather4") else "sample"
    rest = m.removeprefix("image_gather4" if kind == "gather" else "image_sample")
    return kind, frozenset(t for t in rest.split("_") if t)


def _layout(flags: frozenset[str], nsp: int, narr: int, a16: bool, g16: bool) -> tuple[list[tuple[str, int, int]], int]:
    """The address slots (name, dword, half: -1 for a 32-bit value, 0/1 for the low/high 16 bits) and dwords."""
    slots: list[tuple[str, int, int]] = []
    d = 0

    def add16(names: list[str]) -> None:
        nonlocal d
        for k, n in enumerate(names):
            slots.append((n, d + k // 2, k % 2))
        d += (len(names) + 1) // 2

    def add32(names: list[str]) -> None:
        nonlocal d
        for n in names:
            slots.append((n, d, -1))
            d += 1

    if "o" in flags:
        add32(["offset"])
    if "b" in flags:
        (add16 if a16 else add32)(["bias"])
    if "c" in flags:
        add32(["z"])
    if "d" in flags:
        for direction in ("dx", "dy"):
            (add16 if g16 else add32)([f"{direction}{k}" for k in range(nsp)])
    body = [f"c{k}" for k in range(nsp + narr)] + (["lod"] if "l" in flags else ["clamp"] if "cl" in flags else [])
    (add16 if a16 else add32)(body)
    return slots, d


def _wrap(i: np.ndarray, size: int, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """(texel index in [0, size), on-the-border mask) of the integer texel indexes ``i`` by a CLAMP_* mode."""
    border = np.zeros(i.shape, dtype=bool)
    if mode == 0:
        j = np.mod(i, size)
    elif mode == 1:
        m = np.mod(i, 2 * size)
        j = np.where(m < size, m, 2 * size - 1 - m)
    elif mode == 2:
        j = np.clip(i, 0, size - 1)
    elif mode == 3:
        j = np.clip(np.where(i < 0, -1 - i, i), 0, size - 1)
    elif mode in (4, 6):                    # 4: the taps outside of a coordinate clamped to [0, size] (_level)
        border = (i < 0) | (i >= size)
        j = np.clip(i, 0, size - 1)
    else:                                   # 7: mirror once, then the border
        m = np.where(i < 0, -1 - i, i)
        border = m >= size
        j = np.clip(m, 0, size - 1)
    return j.astype(I64), border


def _compare(func: int, ref: np.ndarray, tex: np.ndarray) -> np.ndarray:
    ops: dict[int, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
        0: lambda a, b: np.zeros(a.shape, dtype=bool), 1: np.less, 2: np.equal, 3: np.less_equal, 4: np.greater,
        5: np.not_equal, 6: np.greater_equal, 7: lambda a, b: np.ones(a.shape, dtype=bool)}
    return ops[func](ref, tex).astype(F64)


# cube face -> ((major axis, sign), (sc axis, sign), (tc axis, sign)), axes x 0, y 1, z 2: the guide's V_CUBEID /
# V_CUBESC / V_CUBETC / V_CUBEMA pseudocode (+X: sc -z, tc -y; -X: sc +z, tc -y; +Y: sc +x, tc +z; -Y: sc +x, tc -z;
# +Z: sc +x, tc -y; -Z: sc -x, tc -y), which is also Vulkan's "Cube Map Face Selection" table
_CUBE_FACES = {0: ((0, 1), (2, -1), (1, -1)), 1: ((0, -1), (2, 1), (1, -1)), 2: ((1, 1), (0, 1), (2, 1)),
               3: ((1, -1), (0, 1), (2, -1)), 4: ((2, 1), (0, 1), (1, -1)), 5: ((2, -1), (0, -1), (1, -1))}
#: The texel of a seamless cube-map footprint that lies beyond its face in both i and j (Vulkan, "Cube Map Corner
#: Texel": it "should be replaced by the average of the three values of the adjacent texels in each incident face.
#: However, implementations may replace the cube map corner texel by other methods"): "average" the mean of the
#: footprint's other three texels (the three texels meeting at the cube's vertex), "face" the corner texel of the
#: sampled face itself (the indexes clamped to the face). Which the hardware does is not known: a choice.
CUBE_CORNER = "average"


def _cube_texel(face: np.ndarray, i: np.ndarray, j: np.ndarray, n: int, bad: Bad
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(face, x, y, corner) of texel (i, j) of ``face`` (n x n texels) for seamless filtering: inside the face
    itself; beyond one edge the texel of the adjacent face at the same distance from the shared edge (Vulkan, "Cube
    Map Edge Texel"); beyond two (corner True) per :data:`CUBE_CORNER` (the caller averages "average" corners)."""
    if CUBE_CORNER not in ("average", "face"):
        raise bad(f"sampler.CUBE_CORNER {CUBE_CORNER!r} (average or face)")
    # a backstop (the caller clamps the coordinates to the face): at most one face beyond
    i, j = np.clip(i, -n, 2 * n - 1), np.clip(j, -n, 2 * n - 1)
    sc, tc = 2 * i + 1 - n, 2 * j + 1 - n          # texel centres on the face [-n, n]^2, at distance n
    out_s, out_t = np.abs(sc) > n, np.abs(tc) > n
    corner = out_s & out_t
    if CUBE_CORNER == "face":
        sc, tc = np.where(corner, np.clip(sc, 1 - n, n - 1), sc), np.where(corner, np.clip(tc, 1 - n, n - 1), tc)
        out_s, out_t = out_s & ~corner, out_t & ~corner
    p = np.zeros((len(face), 3), I64)             # the texel centre in 3D (x, y, z)
    ax_s = np.zeros(len(face), I64)
    ax_t = np.zeros(len(face), I64)
    ax_m = np.zeros(len(face), I64)
    for f, ((ma, ms), (sa, ss), (ta, ts)) in _CUBE_FACES.items():
        m = face == f
        p[m, ma] = ms * n
        p[m, sa] = ss * sc[m]
        p[m, ta] = ts * tc[m]
        ax_m[m], ax_s[m], ax_t[m] = ma, sa, ta
    rows = np.arange(len(face))
    one = out_s ^ out_t                             # fold the part beyond the edge onto the adjacent face
    ax_o = np.where(out_s, ax_s, ax_t)
    v = p[rows, ax_o]
    excess = np.abs(v) - n
    p[rows, ax_o] = np.where(one, np.sign(v) * n, v)
    p[rows, ax_m] = np.where(one, np.sign(p[rows, ax_m]) * (n - excess), p[rows, ax_m])
    nface = np.where(one, 2 * ax_o + (v < 0), face).astype(I64)
    x = np.zeros(len(face), I64)
    y = np.zeros(len(face), I64)
    for f, (_, (sa, ss), (ta, ts)) in _CUBE_FACES.items():
        m = nface == f
        x[m] = (ss * p[m, sa] + n - 1) // 2
        y[m] = (ts * p[m, ta] + n - 1) // 2
    x = np.where(corner & (CUBE_CORNER == "average"), 0, x)    # read something in range; the caller replaces it
    y = np.where(corner & (CUBE_CORNER == "average"), 0, y)
    return nface, x, y, corner if CUBE_CORNER == "average" else np.zeros(len(face), dtype=bool)


def _reduce(mode: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """FILTER_MODE 1 (min) / 2 (max) of two texel values per component; a NaN (also a texel of weight 0) is dropped
    unless both are NaN (IEEE minNum/maxNum: a choice)."""
    return np.fmin(a, b) if mode == 1 else np.fmax(a, b)


def _halves(bits: np.ndarray, half: int) -> np.ndarray:
    return ((bits >> U32(16 * half)) & U32(0xFFFF)).astype(np.uint16).view(np.float16).astype(F64)


def _compile(inst: Any, pc: int, bad: Bad) -> Fn:
    f, m = inst.fields, inst.mnemonic
    kind, flags = _variant(m)
    wide = m == "image_gather4h"
    if f["lwe"]:
        raise bad("LWE (the LOD warning of partially resident textures)")
    dim = _DIMS[f["dim"]]
    cube = dim[0] == "CUBE"
    if dim[0] in ("2D_MSAA", "2D_MSAA_ARRAY"):
        raise bad(f"sampling a {dim[0]} image")
    if kind == "gather" and dim[1] != 2 and not (wide and dim[1] == 1):
        raise bad(f"{m} of a {'3D' if wide else '1D or 3D'} image")
    nsp, narr = dim[1], dim[2]
    a16, g16 = bool(f["a16"]), m.endswith("_g16")
    slots, ndw = _layout(flags, nsp, narr, a16, g16)
    vaddr = [f["vaddr"], f["addr1"], f["addr2"], f["addr3"], f["addr4"]] if f["nsa"] else \
        [f["vaddr"] + k for k in range(ndw)]
    if len(vaddr) < ndw:
        raise bad(f"{ndw} address dwords with NSA (at most 5)")
    rs, ss, vdata, dmask, d16 = f["srsrc"], f["ssamp"], f["vdata"], f["dmask"], bool(f["d16"])
    tfe = bool(f["tfe"])
    tdw = 4 if f["r128"] else 8
    if rs + tdw > 106 or ss + 4 > 106:
        raise bad("a T# or S# outside the SGPRs")
    if kind == "gather" and bin(dmask).count("1") != 1:
        raise bad(f"{m} with DMASK 0x{dmask:x} (one component)")
    comp = dmask.bit_length() - 1
    unorm_inst = bool(f["unorm"])
    nout = 4 if kind == "gather" else bin(dmask).count("1")
    nregs = (nout + 1) // 2 if d16 else nout
    if kind == "lod" and d16:
        raise bad("image_get_lod with D16")

    def addr(w: Wave, lanes: np.ndarray | slice) -> dict[str, np.ndarray]:
        out: dict[str, np.ndarray] = {}
        for name, dw, half in slots:
            bits = w.v[vaddr[dw], lanes]
            if name == "offset":
                out[name] = bits.astype(I64)
            elif half < 0:
                out[name] = bits.astype(U32).view(np.float32).astype(F64)
            else:
                out[name] = _halves(bits.astype(U32), half)
        return out

    def run(w: Wave) -> None:
        try:
            sample(w)
        except image.ImageFault as e:
            u = bad(str(e))
            raise ShaderFault(f"image fault: {e}", pc=pc, mnemonic=u.mnemonic, encoding=u.encoding) from e

    def sample(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        t = image.parse_tsharp([w.s[rs + k] for k in range(tdw)])
        if t.type != f["dim"] + 8:
            raise bad(f"a T# of TYPE {t.type} sampled with DIM {dim[0]} (TYPE {f['dim'] + 8})")
        as_int = t.format.kind in ("uint", "sint")
        s = parse_ssharp([w.s[ss + k] for k in range(4)])
        if s.mag_filter > 1 or s.min_filter > 1 or (s.max_aniso_ratio and kind != "lod"):
            raise bad("anisotropic filtering (S# XY filter 2/3 or MAX_ANISO_RATIO) is not modelled")
        if s.filter_mode == 3:
            raise bad("S# FILTER_MODE 3 (only 0 blend, 1 min, 2 max are defined)")
        if s.filter_mode and kind == "sample" and "c" in flags:
            raise bad("a depth compare with the S# FILTER_MODE min/max reduction (the APIs forbid the pair)")
        if 5 in s.clamp:
            raise bad("the half-border clamp mode MIRROR_ONCE_HALF_BORDER (S# CLAMP_* 5) is not modelled")
        if s.border_color_type == 3 and any(c in (4, 6, 7) for c in s.clamp):
            raise bad("the border colour table (S# BORDER_COLOR_TYPE 3) is not modelled")
        a = addr(w, lanes)
        unorm = unorm_inst or s.force_unnormalized
        if cube and unorm:
            raise bad("unnormalised coordinates on a cube map")
        base, last = t.base_level, t.last_level
        nlev = max(last - base + 1, 1)     # LAST_LEVEL below BASE_LEVEL: the base level alone (a choice)
        w0, h0, d0 = image.mip_dims(t, base)
        size0 = (w0, h0, d0)[:nsp]
        coords = [a[f"c{k}"] - 1.0 if cube else a[f"c{k}"] for k in range(nsp)]     # cube: face coordinates 1..2
        # the LOD
        if "l" in flags:
            lod = a["lod"].copy()
        elif "lz" in flags:
            lod = np.zeros(len(lanes))
        else:
            if "d" in flags:
                dx = [a[f"dx{k}"] for k in range(nsp)]
                dy = [a[f"dy{k}"] for k in range(nsp)]
            else:
                full = addr(w, slice(None))
                quad = (lanes // 4) * 4
                dx = [full[f"c{k}"][quad + 1] - full[f"c{k}"][quad] for k in range(nsp)]
                dy = [full[f"c{k}"][quad + 2] - full[f"c{k}"][quad] for k in range(nsp)]
            scale = [1.0 if unorm else float(n) for n in size0]
            rx = np.sqrt(sum((dx[k] * scale[k]) ** 2 for k in range(nsp)))
            ry = np.sqrt(sum((dy[k] * scale[k]) ** 2 for k in range(nsp)))
            with np.errstate(divide="ignore"):
                lod = np.log2(np.maximum(rx, ry))
            if "b" in flags:
                lod = lod + a["bias"]
        if "lz" not in flags:
            lod = lod + s.lod_bias
        raw = lod.copy()
        lod = np.fmin(np.fmax(lod, s.min_lod), s.max_lod)      # IEEE maxNum/minNum: a NaN LOD becomes MIN_LOD
        if "cl" in flags:
            lod = np.fmax(lod, a["clamp"])
        if t.min_lod:                 # the T#'s MIN_LOD: an absolute level (a choice), here relative to BASE_LEVEL
            lod = np.fmax(lod, t.min_lod / 256 - base)
        if kind == "lod":
            res = np.zeros((len(lanes), 4))
            res[:, 0] = np.clip(lod, 0, nlev - 1)
            res[:, 1] = raw
            _write(w, lanes, res, dmask, vdata, False, 4, False)
            if tfe:
                w.v[vdata + nregs, lanes] = 0
            return
        # levels and their weights
        mipf = 1 if kind == "gather" and s.mip_filter == 2 else s.mip_filter
        with np.errstate(invalid="ignore"):
            if mipf == 0:
                l0, frac = np.zeros(len(lanes), I64), np.zeros(len(lanes))
            elif mipf == 1:
                l0, frac = np.clip(np.floor(lod + 0.5), 0, nlev - 1).astype(I64), np.zeros(len(lanes))
            else:
                fl = np.floor(lod)
                l0 = np.clip(fl, 0, nlev - 1).astype(I64)
                frac = np.where((lod > 0) & (fl < nlev - 1), lod - fl, 0.0)
        linear = np.where(lod > 0, s.min_filter, s.mag_filter) == 1
        if as_int and kind == "sample" and (linear.any() or (mipf == 2 and (frac > 0).any()) or "c" in flags):
            raise bad("filtering or comparing an integer (UINT/SINT) image")
        ref = a.get("z")
        offs = [np.zeros(len(lanes), I64)] * 3
        if "o" in flags:
            o = a["offset"]
            offs = [((o >> (8 * k)) & 0x3F) - (((o >> (8 * k)) & 0x20) << 1) for k in range(3)]
        slice_ = None
        if cube:                  # 8 x cube + face -> slice 6 x cube + face, the cube clamped to the view
            fc = np.nan_to_num(np.rint(a[f"c{nsp}"]), nan=0.0)
            cu = np.clip(np.floor(fc / 8), 0, max(t.slices // 6 - 1, 0))
            slice_ = (cu * 6 + np.clip(fc - 8 * np.floor(fc / 8), 0, 5)).astype(I64)
        elif narr:
            nsl = t.slices
            slice_ = np.clip(np.rint(a[f"c{nsp}"]), 0, nsl - 1).astype(I64)
        border = np.array(_BORDER.get(s.border_color_type, (0.0, 0.0, 0.0, 0.0)))
        ctx = (w, t, s, coords, offs, slice_, unorm, nsp, border, ref, comp, cube and not s.disable_cube_wrap)
        res = np.zeros((len(lanes), 4))
        for lv in np.unique(l0):
            sel = l0 == lv
            part = _level(ctx, sel, int(lv), base, linear, kind)
            nxt = sel & (frac > 0)
            if nxt.any() and kind == "sample":
                hi = _level(ctx, nxt, int(lv) + 1, base, linear, kind)
                fr = frac[nxt][:, None]
                lo = part[nxt[sel]]
                # min/max: the two levels (both of weight > 0 here) reduced as the texels are (Vulkan's rule)
                part[nxt[sel]] = _reduce(s.filter_mode, lo, hi) if s.filter_mode else lo * (1 - fr) + hi * fr
            res[sel] = part
        _write(w, lanes, res, 0xF if kind == "gather" else dmask, vdata, d16, nregs, as_int and ref is None)
        if tfe:                      # the status VGPR after the data: 0, no fetch fails (as image.py)
            w.v[vdata + nregs, lanes] = 0

    def _level(ctx: tuple[Any, ...], sel: np.ndarray, lv: int, base: int, linear: np.ndarray,
               kind: str) -> np.ndarray:
        """The filtered (or gathered) result of the lanes ``sel`` at level ``lv`` (relative to BASE_LEVEL)."""
        w, t, s, coords, offs, slice_, unorm, nsp, border, ref, comp, seamless = ctx
        n = int(sel.sum())
        dims = image.mip_dims(t, base + lv)
        lin = linear[sel]
        # per spatial axis: the two (index, border, weight) taps (the second of weight 0 for point; gather4h: 4 / 1)
        axes: list[tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]] = []
        raws: list[tuple[np.ndarray, ...]] = []        # seamless cube maps: the texel indexes before any clamp mode
        if seamless and dims[0] != dims[1]:
            raise bad(f"a cube map with {dims[0]}x{dims[1]} faces (faces must be square)")
        for k in range(nsp):
            u = coords[k][sel] * (1.0 if unorm else dims[k]) + offs[k][sel]
            half = s.clamp[k] == 4 and not seamless     # CLAMP_HALF_BORDER: GL's CLAMP, u clamped to the image
            if half:
                u = np.clip(u, 0.0, float(dims[k]))
            if seamless:        # the face: coordinates outside 1..2 (NaN: 0) are clamped to it (a choice)
                u = np.clip(np.nan_to_num(u, nan=0.0), 0.0, float(dims[k]))
            zpoint = k == 2 and s.z_filter == 1
            lin_k = lin & (not zpoint) if kind == "sample" else np.ones(n, dtype=bool)
            up = u if s.trunc_coord else np.rint(u * 64) / 64
            ip = np.floor(up).astype(I64)
            if half:                                    # point sampling at the far edge: the last texel (GL)
                ip = np.minimum(ip, dims[k] - 1)
            if wide:                            # gather4h: four columns, one row (GATHER4H_X_SHIFT, GATHER4H_ROW)
                if k == 0:
                    first = np.floor(u - GATHER4H_X_SHIFT).astype(I64)
                    cols = [first + j for j in range(4)]
                else:
                    if GATHER4H_ROW not in ("point", "y0", "y1"):
                        raise bad(f"sampler.GATHER4H_ROW {GATHER4H_ROW!r} (point, y0 or y1)")
                    cols = [ip if GATHER4H_ROW == "point" else
                            np.floor(u - 0.5).astype(I64) + (GATHER4H_ROW == "y1")]
                if seamless:            # the columns cross edges; the (point-sampled) row clamps to the face
                    cols = [c if k == 0 else np.clip(c, 0, dims[k] - 1) for c in cols]
                raws.append(tuple(cols))
                axes.append(tuple((*_wrap(c, dims[k], s.clamp[k]), np.ones(n)) for c in cols))
                continue
            ul = u - 0.5
            il = np.floor(ul).astype(I64)
            fr = ul - il
            if SUBTEXEL_BITS is not None:
                fr = np.rint(fr * (1 << SUBTEXEL_BITS)) / (1 << SUBTEXEL_BITS)
            i0 = np.where(lin_k, il, ip)
            wt = np.where(lin_k, fr, 0.0)
            if seamless:                # point sampling clamps to the face (Vulkan: CLAMP_TO_EDGE for NEAREST)
                i0 = np.where(lin_k, i0, np.clip(i0, 0, dims[k] - 1))
                raws.append((i0, np.where(lin_k, i0 + 1, i0)))
            t0 = _wrap(i0, dims[k], s.clamp[k])
            t1 = _wrap(i0 + 1, dims[k], s.clamp[k])
            axes.append(((t0[0], t0[1], 1 - wt), (t1[0], t1[1], wt)))
        z = slice_[sel] if slice_ is not None else None
        zero = np.zeros(n, I64)

        def texel(choice: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            idx = [axes[k][choice[k]][0] for k in range(nsp)]
            bd = np.zeros(n, dtype=bool)
            wt = np.ones(n)
            for k in range(nsp):
                bd |= axes[k][choice[k]][1]
                wt = wt * axes[k][choice[k]][2]
            x = idx[0]
            y = idx[1] if nsp > 1 else zero
            zz = idx[2] if nsp > 2 else (z if z is not None else zero)
            corner = np.zeros(n, dtype=bool)
            if seamless:                # the texel of the adjacent face; a corner texel is CUBE_CORNER's
                assert z is not None
                face = np.mod(z, 6)
                nf, x, y, corner = _cube_texel(face, raws[0][choice[0]], raws[1][choice[1]], dims[0], bad)
                zz = z - face + nf
                bd = np.zeros(n, dtype=bool)
            lvl = np.full(n, base + lv, I64)
            rgba = image.apply_dst_sel(t, image.read_texels(w.mem, t, x, y, zz, lvl))
            rgba = np.where(bd[:, None], border[None, :], rgba)
            if ref is not None:
                c = _compare(s.compare_func, ref[sel], rgba[:, 0])
                rgba = np.repeat(c[:, None], 4, axis=1)
            return rgba, wt, corner

        def footprint(choices: Sequence[tuple[int, ...]]) -> list[tuple[np.ndarray, np.ndarray]]:
            """The texels (and weights) of ``choices``; a cube corner texel (CUBE_CORNER "average") becomes the
            mean of the footprint's other three."""
            got = [texel(ch) for ch in choices]
            out = [(rgba, wt) for rgba, wt, _ in got]
            for j, (rgba, wt, corner) in enumerate(got):
                if corner.any():
                    mean = sum(got[o][0] for o in range(len(got)) if o != j) / (len(got) - 1)
                    out[j] = (np.where(corner[:, None], mean, rgba), wt)
            return out

        if kind == "gather":
            out = np.zeros((n, 4))
            order = [(j,) + (0,) * (nsp - 1) for j in range(4)] if wide else ((0, 1), (1, 1), (1, 0), (0, 0))
            for j, (rgba, _) in enumerate(footprint(order)):
                out[:, j] = rgba[:, comp] if ref is None else rgba[:, 0]
            return out
        if s.filter_mode:               # MIN/MAX: the texels of weight > 0, reduced per component
            red: np.ndarray | None = None
            for rgba, wt in footprint([tuple(int(c) for c in ch) for ch in np.ndindex(*([2] * nsp))]):
                kept = np.where((wt > 0)[:, None], rgba, np.nan)
                red = kept if red is None else _reduce(s.filter_mode, red, kept)
            assert red is not None
            return red
        out = np.zeros((n, 4))
        for rgba, wt in footprint([tuple(int(c) for c in ch) for ch in np.ndindex(*([2] * nsp))]):
            out += rgba * wt[:, None]
        return out

    return run


def _write(w: Wave, lanes: np.ndarray, res: np.ndarray, dmask: int, vdata: int, d16: bool, nregs: int,
           as_int: bool) -> None:
    cols = [res[:, k] for k in range(4) if dmask >> k & 1]
    if as_int:          # UINT/SINT texels: the integer's bits (D16: its low 16 bits)
        ints = [np.asarray(c, dtype=I64).astype(U32) for c in cols]
        if d16:
            for r in range(nregs):
                lo = ints[2 * r] & U32(0xFFFF)
                hi = ints[2 * r + 1] & U32(0xFFFF) if 2 * r + 1 < len(ints) else U32(0)
                w.v[vdata + r, lanes] = lo | (hi << U32(16))
        else:
            for r, c in enumerate(ints):
                w.v[vdata + r, lanes] = c
    elif d16:
        h = [np.asarray(c, dtype=np.float16).view(np.uint16).astype(U32) for c in cols]
        for r in range(nregs):
            lo = h[2 * r]
            hi = h[2 * r + 1] if 2 * r + 1 < len(h) else U32(0)
            w.v[vdata + r, lanes] = lo | (hi << U32(16))
    else:
        for r, c in enumerate(cols):
            w.v[vdata + r, lanes] = np.asarray(c, dtype=np.float32).view(U32)


SAMPLE_MNEMONICS = tuple(sorted(
    ["image_get_lod", "image_gather4h"]
    + [f"image_sample{s}" for s in (
        "", "_d", "_l", "_b", "_lz", "_c", "_c_d", "_c_l", "_c_b", "_c_lz", "_o", "_d_o", "_l_o", "_b_o", "_lz_o",
        "_c_o", "_c_d_o", "_c_l_o", "_c_b_o", "_c_lz_o", "_d_g16", "_c_d_g16", "_d_o_g16", "_c_d_o_g16", "_cl",
        "_d_cl", "_b_cl", "_c_cl", "_c_d_cl", "_c_b_cl", "_cl_o", "_d_cl_o", "_b_cl_o", "_c_cl_o", "_c_d_cl_o",
        "_c_b_cl_o", "_c_d_cl_g16", "_d_cl_o_g16", "_c_d_cl_o_g16", "_d_cl_g16")]
    + [f"image_gather4{s}" for s in (
        "", "_l", "_b", "_lz", "_c", "_c_lz", "_o", "_lz_o", "_c_lz_o", "_cl", "_b_cl", "_c_cl", "_c_l", "_c_b",
        "_c_b_cl")]))

# mnemonic -> compiler (inst, pc, bad) -> function of the wave, consulted by the dispatcher for MIMG
COMPILERS: dict[str, Callable[[Any, int, Bad], Fn]] = {m: _compile for m in SAMPLE_MNEMONICS}
