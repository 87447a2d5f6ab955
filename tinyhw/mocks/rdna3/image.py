"""Image (MIMG) memory without a sampler: the gfx11 image resource descriptor (T#), texel formats, the linear
layout's addressing, and ``image_load*``, ``image_store*``, ``image_atomic_*``, ``image_get_resinfo`` (RDNA3 ISA
reference guide, "Image Memory Instructions" and "Image Resource").

T# (8 SGPRs, or 4 with R128), field positions as ROCm's ``ROCR-Runtime`` ``src/image/resource_gfx11.h``
(``SQ_IMG_RSRC_WORD0..7`` for gfx11) and Mesa's ``sid.h`` ``S_00A00x_*`` gfx10+ fields:

- word 0: BASE_ADDRESS, address bits 39:8 (the base is 256-byte aligned); word 1: BASE_ADDRESS_HI 7:0 (address
  bits 47:40), MAX_MIP 19:16 (mip levels of the resource - 1; log2(samples) for MSAA), FORMAT 27:20 (the gfx11
  unified format), WIDTH[1:0] 31:30;
- word 2: WIDTH[13:2] 11:0 (width - 1), HEIGHT 27:14 (height - 1);
- word 3: DST_SEL_X/Y/Z/W 2:0, 5:3, 8:6, 11:9 (0 = 0, 1 = 1, 4..7 = X..W), BASE_LEVEL 15:12, LAST_LEVEL 19:16,
  SW_MODE 24:20, BC_SWIZZLE 27:25, TYPE 31:28 (8 1D, 9 2D, 10 3D, 11 CUBE, 12 1D_ARRAY, 13 2D_ARRAY,
  14 2D_MSAA, 15 2D_MSAA_ARRAY: SQ_RSRC_IMG_*, the MIMG DIM values + 8);
- word 4: DEPTH 12:0 (3D: depth - 1; arrays and cube: the last slice of the view; 1D and 2D: pitch - 1 with
  bit 13 as PITCH[13]), BASE_ARRAY 28:16;
- word 5: ARRAY_PITCH 3:0 (3D: bit 0 set is UAV mode, refused: :class:`ImageFault`), MIN_LOD[4:0] 31:27; word 6:
  MIN_LOD[11:5] 6:0 (unsigned 4.8 fixed point).

A T# of all zeros is unbound (the guide's Image Resource text): loads and ``image_get_resinfo`` return zeros,
stores do nothing, atomics change nothing and return 0.

Layout: the linear swizzle mode (SW_MODE 0), and the tiled modes :mod:`~tinyhw.mocks.rdna3.swizzle` models for a 2D,
2D array or cube (faces as slices) T# with its mip chain (MAX_MIP + 1 levels, the mip tail included), a 1D (array)
T# in 64KB_Z_X/R_X and a 3D T# in a Z_X/R_X mode (thin: each depth slice a 2D slice), or one level of a 2D MSAA
(array) T#: its addrlib pattern, block and surface rules, the slice counted from 0 at the surface's first slice
(BASE_ARRAY added). Another mode, a thick (S/D) 3D layout, an MSAA type in the linear layout, a tiled 96-bit texel
(addrlib has no tiled 12-byte element) and a format the model does not know stop the dispatch (:class:`ImageFault`,
reported as ``ShaderFault``). An MSAA T#'s MAX_MIP is log2(samples); its address components are x, y, [slice,]
sample (the fragment id: gfx11 has no FMASK), a sample past the count reads 0 and drops the store (as any
out-of-range coordinate). A tiled T#'s pitch field is not used (the block rule gives the pitch; a choice). The
linear rule is the model's reading of AMD addrlib's ``Gfx11Lib::HwlComputeSurfaceInfoLinear`` (Mesa
``src/amd/addrlib/src/gfx11/gfx11addrlib.cpp``), not checked on hardware: each mip's size is ``GetMipSize``'s, the
level-0 width and height shifted right rounded up (``ShiftCeil``: 129 >> 1 is 65 there), and its pitch that width
aligned to 256 bytes (256 / bytes-per-texel texels); this allocation size can exceed the level's logical size max(1,
size >> level), which is what ``image_get_resinfo`` returns and bounds the coordinates. A 96-bit (32_32_32) texel is
laid out as addrlib's ``ComputeSurfaceInfo`` does for its 3x-expanded formats: three 32-bit elements, so a level's
row is ShiftCeil(3 x width, level) dwords aligned to 64 and texel x sits at 12 x bytes (a 96-bit T# with a PITCH
field above the width is refused: whether it counts texels or dwords is not documented). Level 0's pitch is the T#'s
PITCH for 1D and 2D (8-dword T#) when it exceeds the width (the guide's Image Resource table: word 4 holds
"(pitch-1)[12:0] of mip0 for 1D, 2D, 2D-MSAA resources if pitch > width"; Mesa writes it only for
``uses_custom_pitch`` surfaces and leaves DEPTH 0 otherwise), else the rule's pitch; within a slice the mips lie
smallest first (mip i at the sum of the sizes of mips i+1 .. MAX_MIP), each pitch x height x texel bytes; a slice
(array layer, cube face, 3D depth slice) holds the whole chain and slices follow one another. So texel (x, y) of
slice s of level l is at base + s x slice_size + mip_offset(l) + (y x pitch(l) + x) x bytes.

Coordinates (unsigned integers, 16-bit with A16) are x, y, then the slice (arrays, cube face) or depth (3D) as
the instruction's DIM gives them, then the mip level for the ``_mip`` forms; the level is relative to
BASE_LEVEL. The instruction's DIM must be the T#'s TYPE (another pairing is refused). A coordinate outside the
level (x >= width, y >= height, z >= depth or past the last slice of the view, a level past LAST_LEVEL) reads 0
(every returned component) and drops the store or atomic (an atomic returns 0): a choice not checked on hardware
(the guide's image sections, "Image Opcodes with No Sampler", "VGPR Usage" and "Image Resource", give no
out-of-range rule; the model reads them like its all-zero "unbound" T#, which returns zeros).

Formats: the gfx11 unified format numbers (as llvm-mc-19 names them, ``BUF_FMT_*``; 1..63): 8/16/32-bit one to four
components UNORM, SNORM, USCALED, SSCALED, UINT, SINT, FLOAT (32_32_32 included), and the packed 10_11_11_FLOAT,
11_11_10_FLOAT, 10_10_10_2 and 2_10_10_10 formats; past 63 (the RDNA3 guide's "Buffer and Image Data Formats" table,
Mesa's gfx11 format names): 8_SRGB 64, 8_8_SRGB 65, 8_8_8_8_SRGB 66 (X, Y, Z through the sRGB curve, W linear UNORM:
a choice as Vulkan's R8G8B8A8_SRGB; 8_8_SRGB both, as R8G8_SRGB), 5_9_9_9_FLOAT 67 (R9G9B9E5), 5_6_5 68, 1_5_5_5 69,
5_5_5_1 70, 4_4_4_4 71 and 4_4 72 UNORM, the depth/stencil forms 8_24 76/77 and 24_8 78/79 UNORM/UINT (both fields
of the named kind: a choice) and X24_8_32 UINT 80 / FLOAT 81 (X the 32-bit field, Y the 8-bit one as UINT in both: a
choice; bits 63:40 unused); their conversions are :mod:`~tinyhw.mocks.rdna3.imgformat`'s. Refused with the reason
(:data:`REFUSED_FORMATS`): 1_UNORM, 1_REVERSED_UNORM (sub-byte texels), 32_FLOAT_CLAMP (its clamp is not
documented), the 2x1 subsampled GB_GR/BG_RG forms 82..89 and the block-compressed BC1..BC7 109..122. A packed name
lists components from the most significant bits, so X is in the low bits (10_11_11: X bits 10:0, Y 21:11, Z 31:22,
as Mesa maps R11G11B10_FLOAT; 2_10_10_10: X 9:0 .. W 31:30, as R10G10B10A2; 5_6_5: X 4:0, Y 10:5, Z 15:11 and
1_5_5_5: W bit 15, as radv's table maps Vulkan's R5G6B5/A1R5G5B5_UNORM_PACK16 to them; 5_5_5_1: X bit 0; 8_24: X
23:0, as Mesa maps Z24_UNORM_S8_UINT); the 11- and 10-bit floats have no sign and f16's 5-bit exponent. Loads (see
:func:`read_texels`): UNORM x / (2^n - 1), SNORM max(x / (2^(n-1) - 1), -1), the scaled and integer kinds the
integer, floats widened, sRGB through the curve, 5_9_9_9 each mantissa x 2^(E - 24); a missing Y or Z reads 0 and W
one (1.0, or 1 for the integer kinds); then the T#'s DST_SEL. The result is the f32 (D16: f16) nearest the exact
value, the integer for UINT/SINT (D16: its low 16 bits); D16 of a 32-bit format is refused.

Stores convert the f32 (D16: f16) register values as Direct3D's "Data Conversion Rules" say (the guide gives
none): UNORM and SNORM saturate to [0, 1] / [-1, 1] (NaN to 0), scale by 2^n - 1 / 2^(n-1) - 1 and round to the
nearest integer, ties to even (D3D's FLOAT -> UNORM text says "c = c + 0.5f. The decimal fraction is dropped", ties
up; for an f32 input the only exact UNORM tie is 0.5 -> (2^n - 1) / 2, whose upper neighbour is even, so the two
agree; for SNORM the one f32 tie that differs is +-0.5 into a 2-bit component (2_10_10_10_SNORM's W: 0 here, +-1
with ties away from zero): a choice not checked on hardware); 16_FLOAT rounds as
:data:`FLOAT_STORE_ROUNDING` says: D3D asks round-to-zero for float-to-float conversions, the default rounds to
nearest even as the buffer format stores do (neither checked on hardware); UINT and SINT take the
register's integer saturated to the component's range (saturation rather than truncation is the model's choice);
32-bit components store the register's bits; USCALED/SSCALED round the float to nearest even (NaN 0) and
saturate, the 11/10-bit floats round as :data:`FLOAT_STORE_ROUNDING` says, sRGB encodes through the curve and
5_9_9_9 by the shared-exponent rule (:mod:`~tinyhw.mocks.rdna3.imgformat` gives each rule, its source and its
choices); 5_9_9_9 has no ``_pck`` form (refused). DMASK
picks the components: a load returns popcount(DMASK) of them packed into consecutive VGPRs (D16: two per VGPR,
low half first, the unused high half of an odd count written 0: a choice), a store takes them likewise and writes
the whole texel, a component DMASK leaves out as 0 and a DMASK component the format lacks ignored (the guide's
"VGPR Usage", Stores: "it is only possible to write an entire element ... the texture system fill in the value
zero for any missing components"). For D16 stores the guide adds "The position of the bits in DMASK is
irrelevant, only the number of bits set to 1"; the model still places the halves by DMASK's bits, as for 32-bit
data (a choice: the sentence does not say which components the halves then feed). DST_SEL applies to loads only (a
choice). The ``_pck`` forms move the components' raw bits without conversion or DST_SEL (a choice; zero-extended,
``_sgn`` sign-extended, to 32 bits; stores take the low bits); a component the format lacks reads 0; D16 on them
is refused (llvm-mc-19 does not encode it).

TFE: the status VGPR after the data gets TEXEL_FAIL | LOD_WARNING << 1 | LOD << 16 (the guide's TFE text: "TD writes
to VGPR DST+1 with a status where the bits corresponding to threads that NACKed are set to 1"); the model has no
partially resident textures, so nothing NACKs and it writes 0. (LLVM's review D48826 says instead "if the error
does not occur, the register is not written", which is why compilers zero it first; the model follows the guide,
and the two agree for code that zeroes it.) LWE is refused.

Atomics (``image_atomic_*``): per lane in lane order on a texel of a 32-bit one-component format (DMASK 0x1;
cmpswap 0x3: DATA = the new value, DATA + 1 the compare value) or of 32_32 UINT/SINT (64-bit: DMASK 0x3; cmpswap
0xF), with GLC the old value returned to VDATA.

``image_get_resinfo``: VADDR holds the mip level (relative to BASE_LEVEL); X = the level's width, Y its height, Z
its depth (3D) or the slices of the view (arrays and cube: last - base + 1; else 1), W = LAST_LEVEL -
BASE_LEVEL + 1, integers, DMASK picking; for a level past LAST_LEVEL X, Y, Z are 0 (a choice).
``image_msaa_load`` (DIM 2D_MSAA or 2D_MSAA_ARRAY, exactly one DMASK bit; the guide: "Load up to 4 samples of 1
component from an MSAA resource with a user-specified fragment ID"): the four VGPRs get the DMASK component, after
number conversion and DST_SEL (a choice), of four samples of the texel, which ones as :data:`MSAA_LOAD_SAMPLES`
says; a sample past the count reads 0. D16 packs them two per VGPR, TFE writes its 0 status after them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import imgformat, swizzle, vmem
from tinyhw.mocks.rdna3.state import ShaderFault, Unimplemented, Wave

__all__ = ["COMPILERS", "FORMATS", "MSAA_LOAD_SAMPLES", "REFUSED_FORMATS", "ImageFault", "Tsharp", "apply_dst_sel",
           "component_regs", "encode_component", "join_components", "mip_dims", "one_bits", "parse_tsharp",
           "read_texels", "samples", "split_components", "texel_addresses", "texel_bytes"]

Fn = Callable[[Wave], Any]
Bad = Callable[[str], Exception]
U8, U16, U32, U64, I64, F16, F32, F64 = (np.uint8, np.uint16, np.uint32, np.uint64, np.int64, np.float16,
                                         np.float32, np.float64)

#: T# TYPE values (SQ_RSRC_IMG_*)
IMG_1D, IMG_2D, IMG_3D, IMG_CUBE, IMG_1D_ARRAY, IMG_2D_ARRAY, IMG_2D_MSAA, IMG_2D_MSAA_ARRAY = range(8, 16)
_ARRAYS = (IMG_CUBE, IMG_1D_ARRAY, IMG_2D_ARRAY, IMG_2D_MSAA_ARRAY)
# coordinates (without the mip) per MIMG DIM: 1D, 2D, 3D, CUBE, 1D_ARRAY, 2D_ARRAY, 2D_MSAA, 2D_MSAA_ARRAY
_DIM_COORDS = (1, 2, 3, 3, 2, 3, 3, 4)


class ImageFault(Exception):
    """What the image helpers do not model or cannot address (a tiled SW_MODE, an unknown format, an MSAA type);
    the instruction compilers report it as :class:`~tinyhw.mocks.rdna3.state.ShaderFault`."""


@dataclass(frozen=True)
class Fmt:
    """One texel format: ``comps`` (shift, bits) per component from X, ``kind`` (unorm, snorm, uscaled, sscaled,
    uint, sint, float; ``ufloat`` for the unsigned 11/10-bit floats; ``sharedexp`` for 5_9_9_9, whose fourth entry
    in ``comps`` is the shared exponent, not a component), ``size`` bytes per texel; ``kinds`` per component where
    they differ from ``kind`` (``srgb``: UNORM with the sRGB curve; the depth/stencil forms)."""

    name: str
    comps: tuple[tuple[int, int], ...]
    kind: str
    size: int
    kinds: tuple[str, ...] = ()

    def ckind(self, c: int) -> str:
        """Component ``c``'s number format."""
        return self.kinds[c] if self.kinds else self.kind

    @property
    def n(self) -> int:
        """The components the format has (X .. W; 5_9_9_9: 3)."""
        return 3 if self.kind == "sharedexp" else len(self.comps)


def _formats() -> dict[int, Fmt]:
    """gfx11 unified format number -> :class:`Fmt` (the numbers llvm-mc-19 gives the ``BUF_FMT_*`` names; past 63
    the RDNA3 guide's "Buffer and Image Data Formats" table)."""
    k6 = ("unorm", "snorm", "uscaled", "sscaled", "uint", "sint")
    k7 = (*k6, "float")
    k3 = ("uint", "sint", "float")
    out: dict[int, Fmt] = {}
    for first, bits, n, kinds in ((1, 8, 1, k6), (7, 16, 1, k7), (14, 8, 2, k6), (20, 32, 1, k3), (23, 16, 2, k7),
                                  (42, 8, 4, k6), (48, 32, 2, k3), (51, 16, 4, k7), (58, 32, 3, k3),
                                  (61, 32, 4, k3)):
        for i, kind in enumerate(kinds):
            name = "_".join([str(bits)] * n) + "_" + kind.upper()
            out[first + i] = Fmt(name, tuple((bits * c, bits) for c in range(n)), kind, bits * n // 8)
    out[30] = Fmt("10_11_11_FLOAT", ((0, 11), (11, 11), (22, 10)), "ufloat", 4)
    out[31] = Fmt("11_11_10_FLOAT", ((0, 10), (10, 11), (21, 11)), "ufloat", 4)
    for i, kind in enumerate(("unorm", "snorm", "uint", "sint")):
        out[32 + i] = Fmt(f"10_10_10_2_{kind.upper()}", ((0, 2), (2, 10), (12, 10), (22, 10)), kind, 4)
    for i, kind in enumerate(k6):
        out[36 + i] = Fmt(f"2_10_10_10_{kind.upper()}", ((0, 10), (10, 10), (20, 10), (30, 2)), kind, 4)
    b8 = ((0, 8), (8, 8), (16, 8), (24, 8))
    out[64] = Fmt("8_SRGB", b8[:1], "unorm", 1, ("srgb",))
    out[65] = Fmt("8_8_SRGB", b8[:2], "unorm", 2, ("srgb", "srgb"))
    out[66] = Fmt("8_8_8_8_SRGB", b8, "unorm", 4, ("srgb", "srgb", "srgb", "unorm"))
    out[67] = Fmt("5_9_9_9_FLOAT", ((0, 9), (9, 9), (18, 9), (27, 5)), "sharedexp", 4)
    out[68] = Fmt("5_6_5_UNORM", ((0, 5), (5, 6), (11, 5)), "unorm", 2)
    out[69] = Fmt("1_5_5_5_UNORM", ((0, 5), (5, 5), (10, 5), (15, 1)), "unorm", 2)
    out[70] = Fmt("5_5_5_1_UNORM", ((0, 1), (1, 5), (6, 5), (11, 5)), "unorm", 2)
    out[71] = Fmt("4_4_4_4_UNORM", ((0, 4), (4, 4), (8, 4), (12, 4)), "unorm", 2)
    out[72] = Fmt("4_4_UNORM", ((0, 4), (4, 4)), "unorm", 1)
    for i, kind in enumerate(("unorm", "uint")):
        out[76 + i] = Fmt(f"8_24_{kind.upper()}", ((0, 24), (24, 8)), kind, 4)
        out[78 + i] = Fmt(f"24_8_{kind.upper()}", ((0, 8), (8, 24)), kind, 4)
    out[80] = Fmt("X24_8_32_UINT", ((0, 32), (32, 8)), "uint", 8)
    out[81] = Fmt("X24_8_32_FLOAT", ((0, 32), (32, 8)), "float", 8, ("float", "uint"))
    return out


#: gfx11 unified format number -> texel format
FORMATS = _formats()

#: gfx11 format numbers the model refuses, with the reason (the RDNA3 guide's "Buffer and Image Data Formats")
REFUSED_FORMATS: dict[int, str] = {
    0: "INVALID",
    73: "1_UNORM: one bit per texel, a sub-byte layout",
    74: "1_REVERSED_UNORM: one bit per texel, a sub-byte layout",
    75: "32_FLOAT_CLAMP: the guide does not say what it clamps",
    **{82 + i: f"{n}: a 2x1 subsampled (4:2:2) format" for i, n in enumerate(
        ("GB_GR_UNORM", "GB_GR_SNORM", "GB_GR_UINT", "GB_GR_SRGB", "BG_RG_UNORM", "BG_RG_SNORM", "BG_RG_UINT",
         "BG_RG_SRGB"))},
    **{109 + i: f"{n}: a block-compressed format" for i, n in enumerate(
        ("BC1_UNORM", "BC1_SRGB", "BC2_UNORM", "BC2_SRGB", "BC3_UNORM", "BC3_SRGB", "BC4_UNORM", "BC4_SNORM",
         "BC5_UNORM", "BC5_SNORM", "BC6_UFLOAT", "BC6_SFLOAT", "BC7_UNORM", "BC7_SRGB"))},
}


@dataclass(frozen=True)
class Tsharp:
    """A gfx11 image resource descriptor (see the module text for the bit positions).

    ``width``/``height``/``depth`` are level 0's (depth 1 except for 3D); ``last_array`` is the last slice of the
    view for arrays and cube (0 otherwise); ``pitch`` is level 0's pitch in texels from an 8-dword 1D/2D T#
    (None when the layout rule gives it: a 4-dword T#, or a pitch field not above the width); ``min_lod`` is
    MIN_LOD's raw 4.8 fixed-point value."""

    base: int
    width: int
    height: int
    depth: int
    fmt: int
    dst_sel: tuple[int, int, int, int]
    base_level: int
    last_level: int
    max_mip: int
    sw_mode: int
    type: int
    base_array: int
    last_array: int
    pitch: int | None
    min_lod: int
    words: tuple[int, ...]

    @property
    def format(self) -> Fmt:
        """The texel format (:class:`ImageFault` when the model does not know the number)."""
        f = FORMATS.get(self.fmt)
        if f is None:
            why = REFUSED_FORMATS.get(self.fmt, "not a gfx11 image format the model knows")
            raise ImageFault(f"image format {self.fmt} ({why}; not modelled)")
        return f

    @property
    def slices(self) -> int:
        """The slices of the view: arrays and cube last - base + 1, 3D the depth, others 1."""
        if self.type in _ARRAYS:
            return max(self.last_array - self.base_array + 1, 0)
        return self.depth if self.type == IMG_3D else 1


def parse_tsharp(words: Sequence[int]) -> Tsharp:
    """The T# in 4 (R128) or 8 dwords. A 4-dword T# has no depth, slices, pitch or MIN_LOD (1, none, the layout
    rule's, 0)."""
    if len(words) not in (4, 8):
        raise ValueError("a T# is 4 or 8 dwords")
    w = [int(x) & 0xFFFFFFFF for x in words] + [0] * (8 - len(words))
    typ = w[3] >> 28 & 0xF
    depth_field, pitch = w[4] & 0x1FFF, None
    width = (w[1] >> 30 & 3 | (w[2] & 0xFFF) << 2) + 1
    if len(words) == 8 and typ in (IMG_1D, IMG_2D, IMG_2D_MSAA) and (w[4] & 0x3FFF) + 1 > width:
        pitch = (w[4] & 0x3FFF) + 1     # the guide: "(pitch-1) ... of mip0 for 1D, 2D, 2D-MSAA ... if pitch > width"
    return Tsharp(
        base=(w[0] << 8 | (w[1] & 0xFF) << 40),
        width=width,
        height=(w[2] >> 14 & 0x3FFF) + 1,
        depth=depth_field + 1 if typ == IMG_3D and len(words) == 8 else 1,
        fmt=w[1] >> 20 & 0xFF,
        dst_sel=(w[3] & 7, w[3] >> 3 & 7, w[3] >> 6 & 7, w[3] >> 9 & 7),
        base_level=w[3] >> 12 & 0xF,
        last_level=w[3] >> 16 & 0xF,
        max_mip=w[1] >> 16 & 0xF,
        sw_mode=w[3] >> 20 & 0x1F,
        type=typ,
        base_array=w[4] >> 16 & 0x1FFF if len(words) == 8 else 0,
        last_array=depth_field if typ in _ARRAYS and len(words) == 8 else 0,
        pitch=pitch,
        min_lod=(w[5] >> 27 & 0x1F) | (w[6] & 0x7F) << 5,
        words=tuple(w[:len(words)]),
    )


def mip_dims(t: Tsharp, level: int) -> tuple[int, int, int]:
    """Width, height, depth of mip ``level`` (absolute: 0 is the T#'s size; BASE_LEVEL is not added):
    max(1, x >> level) each, height 1 for 1D and depth 1 but for 3D."""
    h = 1 if t.type in (IMG_1D, IMG_1D_ARRAY) else t.height
    return max(1, t.width >> level), max(1, h >> level), max(1, t.depth >> level)


def texel_bytes(t: Tsharp) -> int:
    """Bytes per texel of the T#'s format."""
    return t.format.size


def samples(t: Tsharp) -> int:
    """Samples per texel: 1 << MAX_MIP for the MSAA types (the T# holds log2(samples) there), else 1."""
    return 1 << t.max_mip if t.type in (IMG_2D_MSAA, IMG_2D_MSAA_ARRAY) else 1


def _tiled(t: Tsharp) -> swizzle.Surface:
    """The swizzled layout of a tiled T# (see :mod:`~tinyhw.mocks.rdna3.swizzle`): 2D, 2D array, cube (faces as
    slices) with MAX_MIP + 1 levels, 2D MSAA (array) of one level; 1D (array) in the modes addrlib allows for 1D
    (``Gfx11Rsrc1dSwModeMask``: 64KB_Z_X, 64KB_R_X), as a 2D surface one texel high; 3D in the Z and R modes, which
    are thin for 3D (``Gfx11Rsrc3dThinSwModeMask``: 64KB/256KB Z_X, R_X), each depth slice a 2D slice holding the
    whole chain (``HwlIsThin``; ``ComputeSurfaceInfoMacroTiled``: "mip0Depth = isThin ? 1 : numSlices")."""
    if t.type < IMG_1D:
        raise ImageFault(f"T# TYPE {t.type} is not an image type")
    if t.type in (IMG_1D, IMG_1D_ARRAY) and t.sw_mode not in (24, 27):
        raise ImageFault(f"a tiled 1D T# in SW_MODE {t.sw_mode} (addrlib's gfx11 1D modes: linear, 64KB_Z_X, "
                         "64KB_R_X)")
    if t.type == IMG_3D and t.sw_mode not in (24, 27, 28, 31):
        raise ImageFault(f"a 3D T# in SW_MODE {t.sw_mode} (a thick 3D layout, or none addrlib has for 3D; only the "
                         "thin Z_X/R_X 3D layouts are modelled)")
    if t.type == IMG_3D and len(t.words) == 8 and t.words[5] & 1:
        raise ImageFault("a 3D T# in UAV mode (ARRAY_PITCH bit 0; not modelled)")
    n = samples(t)
    height = 1 if t.type in (IMG_1D, IMG_1D_ARRAY) else t.height
    try:
        return swizzle.surface(t.sw_mode, texel_bytes(t), t.width, height, n, None, 1 if n > 1 else t.max_mip + 1)
    except swizzle.SwizzleError as e:
        raise ImageFault(str(e)) from None


def _ceil_shift(a: int, n: int) -> int:
    """addrlib's ``ShiftCeil``: a >> n rounded up."""
    return -(-a // (1 << n))


@functools.lru_cache(maxsize=256)
def _layout(t: Tsharp) -> tuple[tuple[int, ...], tuple[int, ...], int]:
    """(row pitch in bytes per level, byte offset of each level within a slice, slice size) of the linear layout
    (addrlib's ``HwlComputeSurfaceInfoLinear``, see the module text)."""
    if t.type in (IMG_2D_MSAA, IMG_2D_MSAA_ARRAY):
        raise ImageFault("an MSAA image in the linear layout (SW_MODE 0; MSAA surfaces are swizzled)")
    if t.type < IMG_1D:
        raise ImageFault(f"T# TYPE {t.type} is not an image type")
    if t.type == IMG_3D and len(t.words) == 8 and t.words[5] & 1:
        raise ImageFault("a 3D T# in UAV mode (ARRAY_PITCH bit 0: BASE_ARRAY and DEPTH are the view's first and last "
                         "layer at the accessed level; not modelled)")
    bpe = texel_bytes(t)
    expand = 3 if bpe == 12 else 1          # 96 bits: addrlib lays out 3 x width 32-bit elements
    ebytes = bpe // expand
    if expand == 3 and t.pitch is not None:
        raise ImageFault("a 96-bit (32_32_32) image with a pitch field above the width (whether it counts texels "
                         "or 32-bit elements is not documented; not modelled)")
    align = 256 // ebytes
    levels = t.max_mip + 1
    h0 = 1 if t.type in (IMG_1D, IMG_1D_ARRAY) else t.height
    rows, sizes = [], []
    for lv in range(levels):
        w, h = _ceil_shift(t.width * expand, lv), _ceil_shift(h0, lv)    # GetMipSize: ShiftCeil per level
        p = -(-w // align) * align
        if lv == 0 and t.pitch is not None:
            p = t.pitch
        rows.append(p * ebytes)
        sizes.append(p * h * ebytes)
    offsets = [sum(sizes[lv + 1:]) for lv in range(levels)]
    return tuple(rows), tuple(offsets), sum(sizes)


def texel_addresses(t: Tsharp, x: np.ndarray, y: np.ndarray, z: np.ndarray, level: np.ndarray,
                    sample: np.ndarray | None = None) -> np.ndarray:
    """Byte addresses (uint64) of texels (x, y) of slice/depth ``z`` of absolute mip ``level`` (int64 lane
    arrays, already in range), sample ``sample`` (MSAA; default 0), in the T#'s layout (linear, or swizzled for a
    tiled SW_MODE); ``z`` counts from the view's BASE_ARRAY for arrays."""
    if t.sw_mode != 0:
        surf = _tiled(t)
        lv = np.asarray(level, dtype=I64)
        if len(lv) and int(lv.max()) >= len(surf.pitches):
            raise ImageFault(f"mip level {int(lv.max())} past the tiled resource's {len(surf.pitches)} level(s)")
        s = np.asarray(z, dtype=I64) + (t.base_array if t.type in _ARRAYS else 0)
        smp = np.zeros_like(s) if sample is None else np.asarray(sample, dtype=I64)
        return surf.offsets(x, y, s, smp, t.base, lv)
    rows, offsets, slice_size = _layout(t)
    lv = np.asarray(level, dtype=I64)
    if len(lv) and int(lv.max()) > t.max_mip:
        raise ImageFault(f"mip level {int(lv.max())} past the resource's MAX_MIP {t.max_mip}")
    row = np.asarray(rows, dtype=I64)[lv]
    off = np.asarray(offsets, dtype=I64)[lv]
    s = np.asarray(z, dtype=I64) + (t.base_array if t.type in _ARRAYS else 0)
    a = t.base + s * slice_size + off + np.asarray(y, dtype=I64) * row + np.asarray(x, dtype=I64) * texel_bytes(t)
    return a.astype(U64)


def _raw(mem: Any, t: Tsharp, x: np.ndarray, y: np.ndarray, z: np.ndarray, level: np.ndarray,
         sample: np.ndarray | None = None) -> np.ndarray:
    """(lanes, components) raw component bits (uint64) of the format's components."""
    fm = t.format
    addr = texel_addresses(t, x, y, z, level, sample)
    raw = vmem.gather(mem, addr, fm.size) if len(addr) else np.zeros((0, fm.size), dtype=U8)
    return _split(raw, fm)


def _split(raw: np.ndarray, fm: Fmt) -> np.ndarray:
    """Texel bytes (lanes, size) -> (lanes, components) raw bits."""
    n = len(fm.comps)
    bits = fm.comps[0][1]
    if all(b == bits for _, b in fm.comps) and bits in (8, 16, 32) and all(s == bits * i
                                                                            for i, (s, _) in enumerate(fm.comps)):
        dt = {8: "u1", 16: "<u2", 32: "<u4"}[bits]
        return np.ascontiguousarray(raw).view(dt).reshape(len(raw), n).astype(U64)
    dt = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[fm.size]
    word = np.ascontiguousarray(raw).view(dt).reshape(len(raw)).astype(U64)
    return np.stack([(word >> U64(s)) & U64((1 << b) - 1) for s, b in fm.comps], axis=1).reshape(len(raw), n)


def _signed(v: np.ndarray, bits: int) -> np.ndarray:
    x = v.astype(I64)
    return np.where(x >> (bits - 1) & 1, x - (1 << bits), x)


def _ufloat_half(v: np.ndarray, bits: int) -> np.ndarray:
    """An unsigned 11- or 10-bit float's bits -> the equal f16's bits (same 5-bit exponent, mantissa widened)."""
    return (v.astype(U64) << U64(15 - bits)).astype(U16)


def _decode(raw: np.ndarray, fm: Fmt) -> np.ndarray:
    """(lanes, raw fields) raw bits -> (lanes, components) float64 values after number-format conversion."""
    if fm.kind == "sharedexp":
        return imgformat.sharedexp_decode(raw)
    out = np.zeros(raw.shape, dtype=F64)
    for c, (_, bits) in enumerate(fm.comps):
        v = raw[:, c]
        kind = fm.ckind(c)
        if kind == "unorm":
            out[:, c] = v.astype(F64) / ((1 << bits) - 1)
        elif kind == "srgb":
            out[:, c] = imgformat.srgb_decode(v)
        elif kind == "snorm":
            out[:, c] = np.maximum(_signed(v, bits).astype(F64) / ((1 << (bits - 1)) - 1), -1.0)
        elif kind in ("uint", "uscaled"):
            out[:, c] = v.astype(F64)
        elif kind in ("sint", "sscaled"):
            out[:, c] = _signed(v, bits).astype(F64)
        elif kind == "ufloat":
            out[:, c] = _ufloat_half(v, bits).view(F16).astype(F64)
        elif bits == 32:
            out[:, c] = v.astype(U32).view(F32).astype(F64)
        else:
            out[:, c] = v.astype(U16).view(F16).astype(F64)
    return out


def read_texels(mem: Any, t: Tsharp, x: np.ndarray, y: np.ndarray, z: np.ndarray, level: np.ndarray,
                sample: np.ndarray | None = None) -> np.ndarray:
    """The texels' R, G, B, A as float64 (lanes, 4) after number-format conversion (UNORM/SNORM to [0, 1]/[-1, 1],
    floats widened, the integer kinds exact), a missing Y/Z 0 and W 1, before DST_SEL. ``x``, ``y``, ``z`` (slice
    from BASE_ARRAY, or 3D depth), ``level`` (absolute), ``sample`` (MSAA, default 0) are int64 lane arrays already
    in range."""
    fm = t.format
    vals = _decode(_raw(mem, t, x, y, z, level, sample), fm)
    out = np.zeros((len(vals), 4), dtype=F64)
    out[:, 3] = 1.0
    out[:, :fm.n] = vals[:, :fm.n]
    return out


def _check_sel(t: Tsharp) -> None:
    for s in t.dst_sel:
        if s in (2, 3):
            raise ImageFault(f"T# DST_SEL value {s} (reserved)")


def apply_dst_sel(t: Tsharp, rgba: np.ndarray) -> np.ndarray:
    """The T#'s DST_SEL swizzle of (lanes, 4) values: 0 -> 0, 1 -> 1.0, 4..7 -> X..W (2 and 3 are reserved:
    :class:`ImageFault`)."""
    _check_sel(t)
    out = np.empty_like(rgba)
    for c, s in enumerate(t.dst_sel):
        out[:, c] = 0.0 if s == 0 else 1.0 if s == 1 else rgba[:, s - 4]
    return out


# ---------------------------------------------------------------------------------------------------
# the instructions


def _fault(bad: Bad) -> Callable[[str], ShaderFault]:
    """A maker of ShaderFault at this instruction (pc, mnemonic and encoding taken from ``bad``'s error)."""
    where = bad("")
    if not isinstance(where, Unimplemented):
        return lambda msg: ShaderFault(msg, pc=0, mnemonic="?", encoding="?")
    return lambda msg: ShaderFault(msg, pc=where.pc, mnemonic=where.mnemonic, encoding=where.encoding)


def _guard(fn: Fn, bad: Bad) -> Fn:
    """``fn`` with an :class:`ImageFault` turned into ShaderFault at the instruction."""
    fault = _fault(bad)

    def run(w: Wave) -> Any:
        try:
            return fn(w)
        except ImageFault as e:
            raise fault(str(e)) from None
    return run


@dataclass(frozen=True)
class _Mimg:
    """Compile-time facts of one MIMG instruction."""

    dim: int
    regs: tuple[int, ...]       # address VGPRs (dwords)
    n: int                      # address components (coordinates + the mip for the _mip forms)
    a16: bool
    rs: int                     # the T#'s first SGPR
    rwords: int                 # 4 (R128) or 8
    vdata: int
    dmask: int


def _prep(inst: Any, bad: Bad, n: int | None = None) -> _Mimg:
    """Check and collect the fields; ``n`` address components (default: DIM's coordinates, + 1 for ``_mip``)."""
    f = inst.fields
    if not f:
        raise bad("MIMG fields not decoded")
    if f["lwe"]:
        raise bad("LWE (LOD warning) is not modelled")
    if n is None:
        n = _DIM_COORDS[f["dim"]] + ("_mip" in inst.mnemonic)
    dw = -(-n // 2) if f["a16"] else n
    if f["nsa"]:
        nsa = (f["vaddr"], f["addr1"], f["addr2"], f["addr3"], f["addr4"])
        if dw > len(nsa):
            raise bad(f"{dw} address VGPRs in NSA form")
        regs = nsa[:dw]
    else:
        regs = tuple(f["vaddr"] + i for i in range(dw))
    rwords = 4 if f["r128"] else 8
    if f["srsrc"] + rwords > 106:
        raise bad("a T# outside the SGPRs")
    return _Mimg(f["dim"], regs, n, bool(f["a16"]), f["srsrc"], rwords, f["vdata"], f["dmask"])


def _coords(w: Wave, lanes: np.ndarray, m: _Mimg) -> list[np.ndarray]:
    """The address components (int64 per active lane), 16-bit halves with A16 (low half first)."""
    out = []
    for k in range(m.n):
        if m.a16:
            v = (w.v[m.regs[k // 2], lanes] >> U32(16 * (k % 2))) & U32(0xFFFF)
        else:
            v = w.v[m.regs[k], lanes]
        out.append(v.astype(I64))
    return out


def _unbound(w: Wave, m: _Mimg) -> bool:
    """Whether the T# is all zeros: the guide's "A resource that is all zeros is treated as 'unbound': it returns all
    zeros and not generate a memory transaction" (its resource-level exception is not modelled)."""
    return not np.any(w.s[m.rs:m.rs + m.rwords])


def _tsharp_of(w: Wave, m: _Mimg) -> Tsharp:
    t = parse_tsharp(w.s[m.rs:m.rs + m.rwords])
    if t.type != IMG_1D + m.dim:
        raise ImageFault(f"DIM {m.dim} with a T# of TYPE {t.type} (the model needs TYPE = DIM + 8)")
    return t


def _place(t: Tsharp, m: _Mimg, c: list[np.ndarray], mip: bool) -> tuple[np.ndarray, ...]:
    """(x, y, z, absolute level, in-range mask, sample) from the address components."""
    zero = np.zeros_like(c[0])
    x, smp = c[0], zero
    if m.dim in (0,):
        y, z = zero, zero
    elif m.dim == 4:                      # 1D_ARRAY: x, slice
        y, z = zero, c[1]
    elif m.dim == 1:
        y, z = c[1], zero
    elif m.dim == 6:                      # 2D_MSAA: x, y, sample (fragment id)
        y, z, smp = c[1], zero, c[2]
    elif m.dim == 7:                      # 2D_MSAA_ARRAY: x, y, slice, sample
        y, z, smp = c[1], c[2], c[3]
    else:                                 # 3D, CUBE, 2D_ARRAY: x, y, depth/face/slice
        y, z = c[1], c[2]
    level = t.base_level + (c[-1] if mip else zero)
    sh = np.minimum(level, 63)
    h0 = 1 if t.type in (IMG_1D, IMG_1D_ARRAY) else t.height
    wl, hl = np.maximum(1, t.width >> sh), np.maximum(1, h0 >> sh)
    zl = np.maximum(1, t.depth >> sh) if t.type == IMG_3D else np.full_like(x, t.slices)
    ok = (level <= t.last_level) & (x < wl) & (y < hl) & (z < zl) & (smp < samples(t))
    return x, y, z, level, ok, smp


def _one_bits(fm: Fmt, d16: bool) -> int:
    if fm.kind in ("uint", "sint"):
        return 1
    return 0x3C00 if d16 else 0x3F800000


def _to_regs(raw: np.ndarray, fm: Fmt, d16: bool) -> np.ndarray:
    """(lanes, components) raw bits -> (lanes, 4) register values (uint32; D16: 16-bit) with the missing
    components filled (Y, Z 0; W one)."""
    k = len(raw)
    out = np.zeros((k, 4), dtype=U32)
    out[:, 3] = _one_bits(fm, d16)
    vals = None
    if d16 and any(b == 32 for _, b in fm.comps):
        raise ImageFault(f"a D16 access of the 32-bit format {fm.name}")
    for c in range(fm.n):
        v, bits, kind = raw[:, c], fm.comps[c][1], fm.ckind(c)
        if kind in ("uint", "sint"):
            r = (_signed(v, bits) if kind == "sint" else v.astype(I64)) & (0xFFFF if d16 else 0xFFFFFFFF)
            out[:, c] = r.astype(U32)
        elif kind == "float" and bits == 32:
            out[:, c] = v.astype(U32)
        elif kind in ("float", "ufloat"):
            half = v.astype(U16) if kind == "float" else _ufloat_half(v, bits)
            out[:, c] = half if d16 else half.view(F16).astype(F32).view(U32)
        else:
            if vals is None:
                vals = _decode(raw, fm)
            out[:, c] = vals[:, c].astype(F16).view(U16) if d16 else vals[:, c].astype(F32).view(U32)
    return out


def _sel_regs(t: Tsharp, regs: np.ndarray, one: int) -> np.ndarray:
    _check_sel(t)
    out = np.empty_like(regs)
    for c, s in enumerate(t.dst_sel):
        out[:, c] = 0 if s == 0 else one if s == 1 else regs[:, s - 4]
    return out


def _write_out(w: Wave, lanes: np.ndarray, vdata: int, comps: list[np.ndarray], d16: bool,
               tfe: bool = False) -> None:
    """Write the returned components (uint32 per lane; D16 two 16-bit values per VGPR, an unused high half 0);
    with TFE the status VGPR after them gets 0 (no access fails: TEXEL_FAIL, LOD_WARNING and LOD all 0)."""
    if d16:
        regs = [comps[i] | (comps[i + 1] << U32(16) if i + 1 < len(comps) else U32(0))
                for i in range(0, len(comps), 2)]
    else:
        regs = comps
    for i, r in enumerate(regs):
        w.v[vdata + i, lanes] = r
    if tfe:
        w.v[vdata + len(regs), lanes] = 0


def _sel_bits(dmask: int) -> list[int]:
    return [c for c in range(4) if dmask >> c & 1]


def _load(inst: Any, pc: int, bad: Bad) -> Fn:
    f, mn = inst.fields, inst.mnemonic
    m = _prep(inst, bad)
    pck, sgn, mip, d16, tfe = "_pck" in mn, mn.endswith("_sgn"), "_mip" in mn, bool(f["d16"]), bool(f["tfe"])
    picks = _sel_bits(m.dmask)
    if not picks:
        raise bad("DMASK 0")
    if pck and d16:
        raise bad("D16 on a _pck load")

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        if _unbound(w, m):
            _write_out(w, lanes, m.vdata, [np.zeros(len(lanes), U32)] * len(picks), d16, tfe)
            return
        t = _tsharp_of(w, m)
        fm = t.format
        x, y, z, level, ok, smp = _place(t, m, _coords(w, lanes, m), mip)
        raw = np.zeros((len(lanes), len(fm.comps)), dtype=U64)
        if ok.any():
            raw[ok] = _raw(w.mem, t, x[ok], y[ok], z[ok], level[ok], smp[ok])
        if pck:
            if fm.kind == "sharedexp":
                raise ImageFault("a _pck access of 5_9_9_9_FLOAT (its exponent is no component; not modelled)")
            regs = np.zeros((len(lanes), 4), dtype=U32)
            for c, (_, bits) in enumerate(fm.comps):
                v = _signed(raw[:, c], bits) if sgn else raw[:, c].astype(I64)
                regs[:, c] = (v & (0xFFFF if d16 else 0xFFFFFFFF)).astype(U32)
        else:
            regs = _sel_regs(t, _to_regs(raw, fm, d16), _one_bits(fm, d16))
        regs[~ok] = 0
        _write_out(w, lanes, m.vdata, [regs[:, c] for c in picks], d16, tfe)
    return _guard(run, bad)


#: how an image store rounds an f32 to 16_FLOAT and to the 11/10-bit floats: "even" (nearest, ties to even) or
#: "zero" (toward zero, D3D's rule for float-to-float conversions: a finite value never becomes infinity)
FLOAT_STORE_ROUNDING = "even"


def _to_half(v: np.ndarray) -> np.ndarray:
    """f32 register bits -> f16 bits (uint16), rounded as :data:`FLOAT_STORE_ROUNDING` says."""
    x = v.view(F32)
    h = x.astype(F16).view(U16)
    if FLOAT_STORE_ROUNDING == "even":
        return h
    if FLOAT_STORE_ROUNDING != "zero":
        raise ImageFault(f"FLOAT_STORE_ROUNDING {FLOAT_STORE_ROUNDING!r} (\"even\" or \"zero\")")
    up = np.isfinite(x) & (np.abs(h.view(F16).astype(F64)) > np.abs(x.astype(F64)))
    return np.where(up, h - U16(1), h).astype(U16)        # one step toward zero (sign and magnitude)


def _reg_float(v: np.ndarray, d16: bool) -> np.ndarray:
    """Register values (uint32 f32 bits; D16 f16 bits) -> float64."""
    return (v.astype(U16).view(F16) if d16 else v.astype(U32).view(F32)).astype(F64)


def _rounding() -> str:
    if FLOAT_STORE_ROUNDING not in ("even", "zero"):
        raise ImageFault(f"FLOAT_STORE_ROUNDING {FLOAT_STORE_ROUNDING!r} (\"even\" or \"zero\")")
    return FLOAT_STORE_ROUNDING


def _encode(v: np.ndarray, fm: Fmt, c: int, d16: bool) -> np.ndarray:
    """Register values (uint32; D16 the 16-bit half) -> component ``c``'s raw bits (uint64), the module text's
    store conversions."""
    bits, kind = fm.comps[c][1], fm.ckind(c)
    mask = (1 << bits) - 1
    if d16 and any(b == 32 for _, b in fm.comps):
        raise ImageFault(f"a D16 access of the 32-bit format {fm.name}")
    if bits == 32:
        return v.astype(U64)
    if kind == "float":
        return (v if d16 else _to_half(v)).astype(U64) & U64(0xFFFF)
    if kind == "uint":
        return np.minimum(v.astype(U64), U64(mask))
    if kind == "sint":
        s = _signed(v, 16) if d16 else v.view(np.int32).astype(I64)
        return (np.clip(s, -(1 << (bits - 1)), (1 << (bits - 1)) - 1) & mask).astype(U64)
    x = _reg_float(v, d16)
    if kind == "srgb":
        return imgformat.srgb_encode(x)
    if kind == "ufloat":
        return imgformat.ufloat_encode(x, bits, _rounding())
    if kind in ("uscaled", "sscaled"):
        return imgformat.scaled_encode(x, bits, kind == "sscaled")
    if kind in ("unorm", "snorm"):
        x = np.where(np.isnan(x), 0.0, x)
        if kind == "unorm":
            return np.rint(np.clip(x, 0.0, 1.0) * mask).astype(U64)
        q = np.rint(np.clip(x, -1.0, 1.0) * ((1 << (bits - 1)) - 1)).astype(I64)
        return (q & mask).astype(U64)
    raise ImageFault(f"a store conversion to {fm.name} (no conversion rule is modelled)")


def _join(raw: np.ndarray, fm: Fmt) -> np.ndarray:
    """(lanes, components) raw bits -> texel bytes (lanes, size)."""
    bits = fm.comps[0][1]
    if all(b == bits for _, b in fm.comps) and bits in (8, 16, 32) and all(s == bits * i
                                                                            for i, (s, _) in enumerate(fm.comps)):
        dt = {8: "u1", 16: "<u2", 32: "<u4"}[bits]
        return np.ascontiguousarray(raw.astype(dt)).view(U8).reshape(len(raw), fm.size)
    word = np.zeros(len(raw), dtype=U64)
    for c, (s, b) in enumerate(fm.comps):
        word |= (raw[:, c] & U64((1 << b) - 1)) << U64(s)
    dt = {1: "u1", 2: "<u2", 4: "<u4", 8: "<u8"}[fm.size]
    return np.ascontiguousarray(word.astype(dt)).view(U8).reshape(len(raw), fm.size)


def _store(inst: Any, pc: int, bad: Bad) -> Fn:
    f, mn = inst.fields, inst.mnemonic
    m = _prep(inst, bad)
    pck, mip, d16 = "_pck" in mn, "_mip" in mn, bool(f["d16"])
    if f["tfe"] or (pck and d16):
        raise bad("TFE on a store, D16 on a _pck store")
    picks = _sel_bits(m.dmask)
    if not picks:
        raise bad("DMASK 0")

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        if _unbound(w, m):
            return
        t = _tsharp_of(w, m)
        fm = t.format
        x, y, z, level, ok, smp = _place(t, m, _coords(w, lanes, m), mip)
        if not ok.any():
            return
        sel = lanes[ok]
        addr = texel_addresses(t, x[ok], y[ok], z[ok], level[ok], smp[ok])
        n = fm.n
        if fm.kind == "sharedexp" and pck:
            raise ImageFault("a _pck access of 5_9_9_9_FLOAT (its exponent is no component; not modelled)")
        raw = np.zeros((len(sel), len(fm.comps)), U64)  # the whole texel is written: a component left out is 0
        vals = np.zeros((len(sel), n), F64)
        for i, c in enumerate(picks):
            if c >= n:
                continue
            v = w.v[m.vdata + (i // 2 if d16 else i), sel]
            if d16:
                v = (v >> U32(16 * (i % 2))) & U32(0xFFFF)
            if fm.kind == "sharedexp":
                vals[:, c] = _reg_float(v, d16)
                continue
            raw[:, c] = (v.astype(U64) & U64((1 << fm.comps[c][1]) - 1)) if pck else _encode(v, fm, c, d16)
        if fm.kind == "sharedexp":
            raw = imgformat.sharedexp_encode(vals)
        vmem.scatter(w.mem, addr, _join(raw, fm))
    return _guard(run, bad)


_ATOMIC = {"swap": "swap_b", "cmpswap": "cmpswap_b", "add": "add_u", "sub": "sub_u", "smin": "min_i",
           "umin": "min_u", "smax": "max_i", "umax": "max_u", "and": "and_b", "or": "or_b", "xor": "xor_b",
           "inc": "inc_u", "dec": "dec_u"}


def _atomic(inst: Any, pc: int, bad: Bad) -> Fn:
    f, op = inst.fields, inst.mnemonic.removeprefix("image_atomic_")
    m = _prep(inst, bad)
    if f["tfe"] or f["d16"]:
        raise bad("TFE or D16 on an image atomic")
    n = bin(m.dmask).count("1")
    two = op == "cmpswap"
    words = n // 2 if two else n
    if words not in (1, 2) or m.dmask != (1 << n) - 1:
        raise bad(f"image atomic DMASK 0x{m.dmask:x} (0x1/0x3 for 32/64 bits, cmpswap 0x3/0xF)")
    bits = 32 * words
    at = vmem._atomic_op(f"{_ATOMIC[op]}{bits}")
    if at is None:
        raise bad("image atomic not modelled")
    fn = at[0]
    ret = bool(f["glc"])

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        if _unbound(w, m):
            if ret:
                vmem._put_lane_ints(w, m.vdata, lanes, words, [0] * len(lanes))
            return
        t = _tsharp_of(w, m)
        fm = t.format
        if (fm.size * 8 != bits or fm.kind not in ("uint", "sint", "float") or (bits == 64 and fm.kind == "float")
                or any(b != 32 for _, b in fm.comps)):
            raise ImageFault(f"a {bits}-bit image atomic on format {fm.name}")
        x, y, z, level, ok, smp = _place(t, m, _coords(w, lanes, m), False)
        addr = np.zeros(len(lanes), dtype=U64)
        if ok.any():
            addr[ok] = texel_addresses(t, x[ok], y[ok], z[ok], level[ok], smp[ok])
        d1 = vmem._lane_ints(w, m.vdata, lanes, words)
        d2 = vmem._lane_ints(w, m.vdata + words, lanes, words) if two else [0] * len(d1)
        olds = []
        nb = bits // 8
        for a, good, xv, yv in zip(addr.tolist(), ok.tolist(), d1, d2, strict=True):
            if not good:
                olds.append(0)
                continue
            old = int.from_bytes(w.mem.read(a, nb), "little")
            w.mem.write(a, fn(old, xv, yv).to_bytes(nb, "little"))
            olds.append(old)
        if ret:
            vmem._put_lane_ints(w, m.vdata, lanes, words, olds)
    return _guard(run, bad)


def _resinfo(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    m = _prep(inst, bad, 1)
    if f["tfe"] or f["d16"]:
        raise bad("TFE or D16 on image_get_resinfo")
    picks = _sel_bits(m.dmask)
    if not picks:
        raise bad("DMASK 0")

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        if _unbound(w, m):
            _write_out(w, lanes, m.vdata, [np.zeros(len(lanes), U32)] * len(picks), False)
            return
        t = _tsharp_of(w, m)
        if t.type in (IMG_2D_MSAA, IMG_2D_MSAA_ARRAY):
            raise ImageFault("image_get_resinfo of an MSAA image (not modelled)")
        level = t.base_level + _coords(w, lanes, m)[0]
        sh = np.minimum(level, 63)
        h0 = 1 if t.type in (IMG_1D, IMG_1D_ARRAY) else t.height
        zz = np.maximum(1, t.depth >> sh) if t.type == IMG_3D else np.full_like(level, t.slices)
        vals = np.stack([np.maximum(1, t.width >> sh), np.maximum(1, h0 >> sh), zz,
                         np.full_like(level, t.last_level - t.base_level + 1)], axis=1)
        vals[level > t.last_level, :3] = 0
        regs = vals.astype(U32)
        _write_out(w, lanes, m.vdata, [regs[:, c] for c in picks], False)
    return _guard(run, bad)


#: which samples ``image_msaa_load`` returns in its four VGPRs: "fragid" (VGPR i: sample fragid + i) or "aligned"
#: (VGPR i: sample (fragid & ~3) + i); the guide says only "Load up to 4 samples of 1 component ... with a
#: user-specified fragment ID", so both are readings not checked on hardware
MSAA_LOAD_SAMPLES = "fragid"


def _msaa(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    m = _prep(inst, bad)
    d16, tfe = bool(f["d16"]), bool(f["tfe"])
    if m.dim not in (6, 7):
        raise bad(f"image_msaa_load with DIM {m.dim} (2D_MSAA or 2D_MSAA_ARRAY only)")
    if bin(m.dmask).count("1") != 1:
        raise bad(f"image_msaa_load DMASK 0x{m.dmask:x} (one component: exactly one bit)")
    comp = m.dmask.bit_length() - 1

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        if _unbound(w, m):
            _write_out(w, lanes, m.vdata, [np.zeros(len(lanes), U32)] * 4, d16, tfe)
            return
        t = _tsharp_of(w, m)
        fm = t.format
        c = _coords(w, lanes, m)
        if MSAA_LOAD_SAMPLES not in ("fragid", "aligned"):
            raise ImageFault(f"MSAA_LOAD_SAMPLES {MSAA_LOAD_SAMPLES!r} (\"fragid\" or \"aligned\")")
        first = c[-1] & ~3 if MSAA_LOAD_SAMPLES == "aligned" else c[-1]
        out = []
        for i in range(4):
            c[-1] = first + i
            x, y, z, level, ok, smp = _place(t, m, c, False)
            raw = np.zeros((len(lanes), len(fm.comps)), dtype=U64)
            if ok.any():
                raw[ok] = _raw(w.mem, t, x[ok], y[ok], z[ok], level[ok], smp[ok])
            regs = _sel_regs(t, _to_regs(raw, fm, d16), _one_bits(fm, d16))
            regs[~ok] = 0
            out.append(regs[:, comp])
        _write_out(w, lanes, m.vdata, out, d16, tfe)
    return _guard(run, bad)


#: MIMG mnemonic -> compiler ``(inst, pc, bad) -> function of the wave`` (consulted by ``dispatch._compile``)
COMPILERS: dict[str, Callable[[Any, int, Bad], Fn]] = {
    **{m: _load for m in ("image_load", "image_load_mip", "image_load_pck", "image_load_pck_sgn",
                          "image_load_mip_pck", "image_load_mip_pck_sgn")},
    **{m: _store for m in ("image_store", "image_store_mip", "image_store_pck", "image_store_mip_pck")},
    **{f"image_atomic_{k}": _atomic for k in _ATOMIC},
    "image_get_resinfo": _resinfo,
    "image_msaa_load": _msaa,
}

#: the format conversions the buffer format instructions share (:mod:`tinyhw.mocks.rdna3.bufformat`): element bytes
#: -> raw components, raw components -> register values (loads), a register value -> one raw component (stores), raw
#: components -> element bytes, and the "one" a missing W (or DST_SEL 1) reads
split_components, component_regs, encode_component, join_components, one_bits = (_split, _to_regs, _encode, _join,
                                                                                 _one_bits)
