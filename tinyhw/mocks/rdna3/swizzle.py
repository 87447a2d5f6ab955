"""gfx11 swizzled (tiled) surface layouts: the byte offset of element (x, y, slice, sample) in a thin 2D surface for a
T# SW_MODE, as AMD's addrlib defines the layouts (Mesa ``src/amd/addrlib/src/gfx11/gfx11addrlib.cpp`` and
``gfx11SwizzlePattern.h``); facts only, the code is the model's own.

Swizzle modes (addrlib's ``AddrSwizzleMode`` numbers, which are the T# SW_MODE values; ``Gfx11Lib::SwizzleModeTable``
lists the ones gfx11 has): 0 LINEAR, 2 256B_D, 5 4KB_S, 6 4KB_D, 9 64KB_S, 10 64KB_D, 17 64KB_S_T, 18 64KB_D_T,
21 4KB_S_X, 22 4KB_D_X, 24 64KB_Z_X, 25 64KB_S_X, 26 64KB_D_X, 27 64KB_R_X, 28 256KB_Z_X, 29 256KB_S_X, 30 256KB_D_X,
31 256KB_R_X (the S modes are 3D-only in ``GetSwizzlePatternInfo``). Modelled here, for 2D (also arrays and cube
faces, which addrlib lays out as 2D slices): 256B_D, 4KB_D, 64KB_D (no XOR), 4KB_D_X, 64KB_D_X, 64KB_Z_X and
64KB_R_X (Z and R are one pattern on gfx11: "On GFX11, Z and R modes are the same thing"), 256KB_D_X, 256KB_Z_X and
256KB_R_X (addrlib's "VAR" block, 2^18 bytes on gfx11); the Z and R modes also with 2, 4 and 8 samples (one level);
single-sample surfaces with their mip chain and mip tail (see :func:`surface`). ``image.py`` also lays out 1D (array)
images in 64KB_Z_X/R_X (one row) and 3D images in the thin Z_X/R_X modes (each depth slice a 2D slice), as addrlib's
gfx11 1D and thin-3D mode masks allow. The S modes, the _T (PRT) mode and thick 3D layouts are refused.

The pattern: addrlib's ``ADDR_SW_PATINFO`` row ``{maxItemCount, nibble01Idx, nibble2Idx, nibble3Idx, nibble4Idx}``
picks entries of the tables ``GFX11_SW_PATTERN_NIBBLE01`` (address bits 0..7), ``NIBBLE2`` (8..11), ``NIBBLE3``
(12..15) and ``NIBBLE4`` (16..19); each entry says which bits of x, y (in elements), z (the slice) and s (the sample)
are XORed into that address bit (0: none). The row is ``GetSwizzlePatternInfo``'s: the table by mode and sample count,
the index ``elemLog2`` for the non-XOR modes and ``colorBaseIndex + elemLog2`` for the XOR ones, with
``colorBaseIndex = 5 x pipesLog2 (+ 5 x (2 x pkrsLog2 - 2) when pkrsLog2 >= 2)`` (``HwlInitGlobalParams``). Only
the rows the model needs are transcribed (below, with their table and row), so the XOR modes work for the
GB_ADDR_CONFIG of :data:`GB_ADDR_CONFIG` (Navi31's) and Navi33's (and 4KB_D_X, 64KB_D_X also for one pipe);
another configuration is refused with the row it lacks.

Block dimensions (``Lib::ComputeThinBlockDimension``): n = log2(block bytes) - log2(bytes per element) -
log2(samples); the width gets the odd bit (w = ceil(n/2), h = floor(n/2)) when log2(samples) is even or the block's
log2 size is odd, else the height does. The surface (``ComputeSurfaceInfoMicroTiled``/``MacroTiled``): each level's
pitch = its width aligned to the block width, its height aligned to the block height, its size pitch x height x
bytes x samples; a slice holds the chain, smallest level first, the mip-tail block (levels small enough to share one
block) at its start. Address of an element (``ComputeSurfaceAddrFromCoordMicroTiled``/``MacroTiled``): slice x
slice size + the level's offset + (yb x pitch / block width + xb) x block bytes + (pattern(x', y', slice, sample)
XOR pipeBankXor), xb and yb the block coordinates, (x', y') the coordinates plus a tail level's origin in the tail
block, the pattern evaluated on the full coordinates (its XOR terms reach bits above the block: the pipe
rotation). The model reads pipeBankXor from the T#'s base address: for an XOR mode the base's bits below the block
size are the XOR value and the rest the block-aligned base (Mesa ORs its tile swizzle into the base's bits 8 and
up); for a non-XOR mode the base is added as it is. That reading is a choice not checked on hardware.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

__all__ = ["GB_ADDR_CONFIG", "MODES", "Surface", "SwizzleError", "block_dims", "pattern", "surface"]

U64, I64 = np.uint64, np.int64

#: GB_ADDR_CONFIG the XOR modes are laid out for: NUM_PIPES 2:0 (log2), PIPE_INTERLEAVE_SIZE 5:3 (256 << n bytes),
#: MAX_COMPRESSED_FRAGS 7:6, NUM_PKRS 10:8 (log2), the field layout of ``tinyhw/autogen/gc_11_0_0_regs.py`` (the
#: shader core has no board, and a mocks module may not bind an ASIC's database itself; a test checks the positions
#: against the database). 0x545 is
#: 32 pipes, 32 packers, 256-byte interleave: what a Navi31 (gfx1100, RX 7900 XTX, PCI id 0x744c) reports, as Mesa's
#: ``src/amd/common/amdgpu_devices.c`` records it (the "navi31" entry's register dump: 0x263e GB_ADDR_CONFIG =
#: 0x00000545; its ``ac_surface_test_common.h`` case ``navi31`` is NUM_PKRS 5, NUM_PIPES 5). Set it (or pass
#: ``gb_addr_config``) for another board: the XOR rows are transcribed for this value and for Navi33's 0x343 (8
#: pipes, 8 packers; the same file's "navi33" entry), the D_X ones also for one pipe.
GB_ADDR_CONFIG = 0x545

#: the modelled swizzle modes: SW_MODE -> (name, log2 block bytes, XOR, pattern table)
MODES: dict[int, tuple[str, int, bool, str]] = {
    2: ("256B_D", 8, False, "256_D"),
    6: ("4KB_D", 12, False, "4K_D"),
    10: ("64KB_D", 16, False, "64K_D"),
    22: ("4KB_D_X", 12, True, "4K_D_X"),
    24: ("64KB_Z_X", 16, True, "64K_ZR_X"),
    26: ("64KB_D_X", 16, True, "64K_D_X"),
    27: ("64KB_R_X", 16, True, "64K_ZR_X"),
    28: ("256KB_Z_X", 18, True, "256K_ZR_X"),
    30: ("256KB_D_X", 18, True, "256K_D_X"),
    31: ("256KB_R_X", 18, True, "256K_ZR_X"),
}
_KNOWN = {5: "4KB_S", 9: "64KB_S", 17: "64KB_S_T", 18: "64KB_D_T", 21: "4KB_S_X", 25: "64KB_S_X", 29: "256KB_S_X"}


class SwizzleError(Exception):
    """A layout the model does not have (a mode, a sample count, an untranscribed configuration)."""


# gfx11SwizzlePattern.h GFX11_SW_PATTERN_NIBBLE01[i] (address bits 0..7), the entries the rows below use
_NIBBLE01 = {
    0: "X0 X1 Y0 X2 Y1 Y2 X3 Y3", 1: "0 X0 Y0 X1 Y1 X2 Y2 X3", 2: "0 0 X0 Y0 X1 Y1 X2 Y2",
    3: "0 0 0 X0 Y0 X1 X2 Y1", 4: "0 0 0 0 X0 Y0 X1 Y1",
    5: "S0 X0 Y0 X1 Y1 X2 Y2 X3", 6: "0 S0 X0 Y0 X1 Y1 X2 Y2", 7: "0 0 S0 X0 Y0 X1 Y1 X2",
    8: "0 0 0 S0 X0 Y0 X1 Y1", 9: "0 0 0 0 S0 X0 Y0 X1",
    10: "S0 S1 X0 Y0 X1 Y1 X2 Y2", 11: "0 S0 S1 X0 Y0 X1 Y1 X2", 12: "0 0 S0 S1 X0 Y0 X1 Y1",
    13: "0 0 0 S0 S1 X0 Y0 X1", 14: "0 0 0 0 S0 S1 X0 Y0",
    15: "S0 S1 S2 X0 Y0 X1 Y1 X2", 16: "0 S0 S1 S2 X0 Y0 X1 Y1", 17: "0 0 S0 S1 S2 X0 Y0 X1",
    18: "0 0 0 S0 S1 S2 X0 Y0", 19: "0 0 0 0 S0 S1 S2 X0",
}
# GFX11_SW_PATTERN_NIBBLE2[i] (address bits 8..11)
_NIBBLE2 = {
    0: "0 0 0 0", 1: "Y4 X4 Y5 X5", 2: "Y3 X4 Y4 X5", 3: "Y3 X3 Y4 X4", 4: "Y2 X3 Y3 X4", 5: "Y2 X2 Y3 X3",
    36: "Z2^Y4^X6 Z1^X4^Y6 Z0^X5^Y5 X5", 37: "Z2^Y3^X6 Z1^X4^Y5 Z0^Y4^X5 X5", 38: "Z2^Y3^X5 Z1^X3^Y5 Z0^X4^Y4 X4",
    39: "Y2^Z2^X5 Z1^X3^Y4 Z0^Y3^X4 X4", 40: "Y2^Z2^X4 Z1^X2^Y4 Z0^X3^Y3 X3",
    51: "Z3^Y4^X7 Z2^X4^Y7 Z1^Y5^X6 Z0^X5^Y6", 52: "Y3^Z3^X7 Z2^X4^Y6 Z1^Y4^X6 Z0^X5^Y5",
    53: "Y3^Z3^X6 Z2^X3^Y6 Z1^Y4^X5 Z0^X4^Y5", 54: "Y2^Z3^X6 Z2^X3^Y5 Z1^Y3^X5 Z0^X4^Y4",
    55: "Y2^Z3^X5 X2^Z2^Y5 Z1^Y3^X4 Z0^X3^Y4",
    81: "Y4^Z4^X8 Z3^X4^Y8 Z2^Y5^X7 Z1^X5^Y7", 82: "Y3^Z4^X8 Z3^X4^Y7 Z2^Y4^X7 Z1^X5^Y6",
    83: "Y3^Z4^X7 X3^Z3^Y7 Z2^Y4^X6 Z1^X4^Y6", 84: "Y2^Z4^X7 X3^Z3^Y6 Z2^Y3^X6 Z1^X4^Y5",
    85: "Y2^Z4^X6 X2^Z3^Y6 Z2^Y3^X5 Z1^X3^Y5",
    147: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 X6", 148: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 Y3", 149: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 X3",
    150: "Y4^X7^Y7 Z2^X4^Y4 Z1^Y5^X6 Y2", 151: "Y4^X7^Y7 Z2^X4^Y4 Z1^Y5^X6 X2",
    157: "Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8", 158: "Y4^X9^Y9 Z3^X4^Y4 Z2^Y5^X8 Z1^X5^Y8",
    159: "Y4^X9^Y9 Z2^X4^Y4 Z1^Y5^X8 Z0^X5^Y8", 171: "Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 Y1^X5^Y8",
    184: "Y4^X9^Y9 Z1^X4^Y4 Y1^Y5^X8 Z0^X5^Y8", 185: "Y4^X9^Y9 Z0^X4^Y4 Y1^Y5^X8 X1^X5^Y8",
    207: "Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X2^X5^Y8", 208: "Y4^X9^Y9 Y0^X4^Y4 Y1^Y5^X8 X1^X5^Y8",
    168: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 X2", 178: "Y4^X7^Y7 Z1^X4^Y4 Y1^Y5^X6 X3", 179: "Y4^X7^Y7 Z0^X4^Y4 Y1^Y5^X6 X3",
    201: "Y4^X7^Y7 Y0^X4^Y4 Y1^Y5^X6 X3", 218: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 Y2", 219: "Y4^X7^Y7 Z2^X4^Y4 Z1^Y5^X6 Y1",
    229: "Y4^X7^Y7 Z2^X4^Y4 Z1^Y5^X6 X1", 238: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 Y1", 239: "Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 X1",
    209: "Y4^X9^Y9 X4^Y4^Z4 Z3^Y5^X8 Z2^X5^Y8", 244: "Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 Z2^X5^Y8",
    245: "Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 Y0^X5^Y8",
}
# GFX11_SW_PATTERN_NIBBLE3[i] (address bits 12..15)
_NIBBLE3 = {
    0: "0 0 0 0", 1: "Y6 X6 Y7 X7", 2: "Y5 X6 Y6 X7", 3: "Y5 X5 Y6 X6", 4: "Y4 X5 Y5 X6", 5: "Y4 X4 Y5 X5",
    6: "Z0^X6^Y6 X6 Y7 X7", 7: "Z0^Y5^X6 X6 Y6 X7", 8: "Z0^X5^Y5 X5 Y6 X6", 9: "Z0^Y4^X5 X5 Y5 X6",
    10: "Z0^X4^Y4 X4 Y5 X5",
    59: "Y6 X7^Y8 Y7^X8 X5^Y6", 60: "X6 X7^Y7 Y6^X8 X5^Y6", 61: "Y3 X6^Y7 Y6^X7 X5^Y6",
    62: "X3 Y3^X7 X6^Y6 Z0^X5^Y6", 63: "Y2 Y3^X6 X3^Y6 Z0^X5^Y6",
    86: "Y6^X7 X7 Y7 X6^Y7", 87: "Y6^X7 Y3 X7 X6^Y7", 88: "Y6^X7 X3 Y3 X6^Y7", 89: "Y2^Y6^X7 X3 Y3 Z0^X6^Y7",
    90: "Y2^Y6^X7 X3 Y3 X2^X6^Y7", 135: "Y6^X7 Y3 Y7 X6^Y7", 136: "Y6^X7 X3 Y3 Y2^X6^Y7",
    122: "X6 Y6^X8 X7^Y7 X5^Y6", 123: "Y3 Y6^X7 Y2^X6^Y7 X5^Y6", 124: "X3 Y3^X7 Y2^X6^Y6 Z0^X5^Y6",
    125: "X3 Y3^X7 Y2^X6^Y6 Y1^X5^Y6", 167: "Y3 X6^Y7 Y2^Y6^X7 X5^Y6", 168: "Y3 X2^Y6^X7 Y2^X6^Y7 X5^Y6",
    169: "Y3 X2^Y6^X7 Y2^X6^Y7 Z0^X5^Y6", 170: "Y3 X2^Y6^X7 Y2^X6^Y7 X1^X5^Y6", 198: "Y3 X2^Y6^X7 Y1^X6^Y7 Y2^X5^Y6",
    175: "Y2^Y6^X7 X3 Y3 X6^Y7", 205: "Y2^Y6^X7 X3 Y3 Y1^X6^Y7",
    224: "Y6 X7^Y10 Y7^X10 X8^Y9", 225: "X6 X7^Y9 Y6^X10 X8^Y8", 226: "Y3 X6^Y9 Y6^X9 X7^Y8",
    227: "X3 Y3^X9 X6^Y8 X7^Y7", 228: "Y2 Y3^X8 X3^Y8 X6^Y7", 274: "X6 Y6^X10 Y7^X9 X7^Y9",
    275: "X3 Y3^X9 Y6^X8 X6^Y8", 276: "Y2 Y3^X7 X2^Y8 X3^Y7", 301: "X2 Y2^X8 X3^Y7 Y3^X7",
    308: "Y1 Y2^X7 X2^Y7 Y3^X6", 334: "X2 Y2^X8 Y3^X7 X3^Y7",
    248: "Y6^X7 X7 Y7 X8^Y9", 249: "Y6^X7 Y3 X7 X8^Y8", 250: "Y6^X7 X3 Y3 X7^Y8", 251: "Z1^Y6^X7 Y2 X3 Y3^X8",
    252: "Z1^Y6^X7 X2 Y2 Y3^X7", 288: "Y6^X7 Y3 X7 Y7^X9", 289: "Y6^X7 Y2 X3 Y3^X8", 290: "Z0^Y6^X7 X2 Y2 Y3^X7",
    291: "Z0^Y6^X7 X2 X3 Y3^X8", 320: "Y6^X7 X2 Y2 Y3^X7", 321: "Y1^Y6^X7 X2 X3 Y3^X8",
    322: "Y1^Y6^X7 X3 Y3 X2^Y7^X8", 343: "Y6^X7 X2 X3 Y3^X8", 344: "Y1^Y6^X7 X3 Y2 Y3^X8^Y8",
}
# GFX11_SW_PATTERN_NIBBLE4[i] (address bits 16..19; the 256KB blocks use 16 and 17)
_NIBBLE4 = {
    0: "0 0 0 0", 1: "Y8 X8 0 0", 2: "Y7 X8 0 0", 3: "Y7 X7 0 0", 4: "Y6 X7 0 0", 5: "Y6 X6 0 0",
    28: "Y8^X9 X5^Y6 0 0", 29: "Y7^X9 X5^Y6 0 0", 30: "Y7^X8 X5^Y6 0 0", 31: "Y6^X8 Z0^X5^Y6 0 0",
    32: "Y6^X7 Z0^X5^Y6 0 0", 60: "X8^Y8 X5^Y6 0 0", 61: "X7^Y7 X5^Y6 0 0", 62: "X6^Y6 Z0^X5^Y6 0 0",
    86: "Y6^X8 X5^Y6 0 0", 87: "Y6^X7 X5^Y6 0 0", 88: "X3^Y6 Z0^X5^Y6 0 0", 110: "X6^Y6 X5^Y6 0 0",
    111: "X3^Y6 Z2^X5^Y6 0 0", 112: "Y1^X6^Y6 Y0^X5^Y6 0 0",
    45: "Y8^X9 X6^Y7 0 0", 46: "Y7^X9 X6^Y7 0 0", 47: "Y7^X8 X6^Y7 0 0", 48: "X7^Y7 Z0^X6^Y7 0 0",
    49: "X3^Y7 Z0^X6^Y7 0 0", 70: "X8^Y8 X6^Y7 0 0", 71: "X7^Y7 X6^Y7 0 0", 72: "X3^Y7 Z4^X6^Y7 0 0",
    73: "Y2^X7^Y7 Y1^X6^Y7 0 0", 98: "X3^Y7 X6^Y7 0 0", 99: "Y2^X7^Y7 Z3^X6^Y7 0 0", 100: "Y2^X7^Y8 X1^X6^Y7 0 0",
    117: "Y1^X7^Y7 Y2^X6^Y7 0 0", 118: "X2^Y7^X9 X1^X6^Y7 0 0",
}


def _rows(first: int, *rows: tuple[int, int, int, int, int]) -> dict[int, tuple[int, int, int, int, int]]:
    return {first + e: r for e, r in enumerate(rows)}


# GFX11_SW_<table>_PATINFO[row] -> {maxItemCount, nibble01Idx, nibble2Idx, nibble3Idx, nibble4Idx} (the Z/R tables
# are addrlib's GFX11_SW_64K_ZR_X_<n>xaa_PATINFO and GFX11_SW_256K_ZR_X_<n>xaa_PATINFO); rows 0..4 are
# "1 pipes (1 PKRs)" 1..16 bpe (the non-XOR modes always use them), rows 35..39 "8 pipes (8 PKRs)" (Navi33's
# GB_ADDR_CONFIG 0x343), rows 65..69 "32 pipes (32 PKRs)" (Navi31's 0x545), 1..16 bpe
_PATINFO: dict[str, dict[int, tuple[int, int, int, int, int]]] = {
    "256_D": _rows(0, *((1, e, 0, 0, 0) for e in range(5))),
    "4K_D": _rows(0, *((1, e, e + 1, 0, 0) for e in range(5))),
    "64K_D": _rows(0, *((1, e, e + 1, e + 1, 0) for e in range(5))),
    "4K_D_X": {**_rows(0, *((1, e, e + 1, 0, 0) for e in range(5))),
               **_rows(35, *((3, e, 36 + e, 0, 0) for e in range(5))),
               **_rows(65, *((3, e, 51 + e, 0, 0) for e in range(5)))},
    "64K_D_X": {**_rows(0, *((1, e, e + 1, e + 1, 0) for e in range(5))),
                **_rows(35, *((3, e, 36 + e, 1 + e, 0) for e in range(5))),
                **_rows(65, *((3, e, 81 + e, 6 + e, 0) for e in range(5)))},
    "64K_ZR_X_1xaa": {**_rows(35, (3, 0, 147, 59, 0), (3, 1, 148, 60, 0), (3, 2, 149, 61, 0), (3, 3, 150, 62, 0),
                              (3, 4, 151, 63, 0)),
                      **_rows(65, (3, 0, 157, 86, 0), (3, 1, 157, 87, 0), (3, 2, 157, 88, 0), (3, 3, 158, 89, 0),
                              (3, 4, 159, 90, 0))},
    "64K_ZR_X_2xaa": {**_rows(35, (3, 5, 148, 122, 0), (3, 6, 149, 61, 0), (3, 7, 149, 123, 0), (3, 8, 151, 124, 0),
                              (3, 9, 168, 125, 0)),
                      **_rows(65, (3, 5, 157, 135, 0), (3, 6, 157, 88, 0), (3, 7, 157, 136, 0), (3, 8, 159, 90, 0),
                              (3, 9, 171, 90, 0))},
    "64K_ZR_X_4xaa": {**_rows(35, (3, 10, 149, 61, 0), (3, 11, 149, 167, 0), (3, 12, 149, 168, 0),
                              (3, 13, 178, 169, 0), (3, 14, 179, 170, 0)),
                      **_rows(65, (3, 10, 157, 88, 0), (3, 11, 157, 175, 0), (3, 12, 157, 90, 0), (3, 13, 184, 90, 0),
                              (3, 14, 185, 90, 0))},
    "64K_ZR_X_8xaa": {**_rows(35, (3, 15, 149, 123, 0), (3, 16, 149, 168, 0), (3, 17, 149, 198, 0),
                              (3, 18, 179, 170, 0), (3, 19, 201, 170, 0)),
                      **_rows(65, (3, 15, 157, 136, 0), (3, 16, 157, 90, 0), (3, 17, 207, 205, 0), (3, 18, 185, 90, 0),
                              (3, 19, 208, 90, 0))},
    "256K_D_X": {**_rows(35, *((3, e, 36 + e, 1 + e, 1 + e) for e in range(5))),
                 **_rows(65, *((3, e, 81 + e, 6 + e, 1 + e) for e in range(5)))},
    "256K_ZR_X_1xaa": {**_rows(35, (3, 0, 147, 224, 28), (3, 1, 148, 225, 29), (3, 2, 149, 226, 30),
                               (3, 3, 150, 227, 31), (3, 4, 151, 228, 32)),
                       **_rows(65, (3, 0, 157, 248, 45), (3, 1, 157, 249, 46), (3, 2, 157, 250, 47),
                               (3, 3, 209, 251, 48), (3, 4, 209, 252, 49))},
    "256K_ZR_X_2xaa": {**_rows(35, (3, 5, 148, 274, 60), (3, 6, 149, 226, 30), (3, 7, 218, 275, 61),
                               (3, 8, 151, 228, 32), (3, 9, 219, 276, 62)),
                       **_rows(65, (3, 5, 157, 288, 70), (3, 6, 157, 250, 47), (3, 7, 157, 289, 71),
                               (3, 8, 158, 290, 72), (3, 9, 158, 291, 73))},
    "256K_ZR_X_4xaa": {**_rows(35, (3, 10, 149, 226, 30), (3, 11, 218, 227, 86), (3, 12, 168, 228, 87),
                               (3, 13, 219, 301, 62), (3, 14, 229, 308, 88)),
                       **_rows(65, (3, 10, 157, 250, 47), (3, 11, 157, 289, 71), (3, 12, 157, 320, 98),
                               (3, 13, 159, 321, 99), (3, 14, 159, 322, 100))},
    "256K_ZR_X_8xaa": {**_rows(35, (3, 15, 218, 275, 61), (3, 16, 168, 228, 87), (3, 17, 238, 276, 110),
                               (3, 18, 239, 308, 111), (3, 19, 239, 334, 112)),
                       **_rows(65, (3, 15, 157, 289, 71), (3, 16, 157, 320, 98), (3, 17, 157, 343, 117),
                               (3, 18, 244, 322, 100), (3, 19, 245, 344, 118))},
}

Term = tuple[tuple[str, int], ...]       # one address bit: the XORed coordinate bits, e.g. (("Y", 4), ("X", 9))


def _terms(entry: str) -> tuple[Term, ...]:
    out = []
    for word in entry.split():
        out.append(() if word == "0" else tuple((p[0], int(p[1:])) for p in word.split("^")))
    return tuple(out)


def config_fields(gb_addr_config: int) -> tuple[int, int]:
    """(log2 pipes, log2 packers) of a GB_ADDR_CONFIG value; a pipe interleave other than 256 bytes is refused
    (addrlib: "SW AddrLib doesn't support sw equation/pattern for PI != 256 case")."""
    if gb_addr_config >> 3 & 7:
        raise SwizzleError(f"GB_ADDR_CONFIG 0x{gb_addr_config:x}: a pipe interleave other than 256 bytes")
    return gb_addr_config & 7, gb_addr_config >> 8 & 7


def pattern(sw_mode: int, elem_log2: int, samples_log2: int = 0, gb_addr_config: int | None = None
            ) -> tuple[Term, ...]:
    """The address bits of a block (log2 of its size of them, from bit 0) for a mode, element size and sample count:
    each a tuple of (coordinate, bit) pairs XORed ("X"/"Y" in elements, "Z" the slice, "S" the sample);
    ``gb_addr_config`` None: :data:`GB_ADDR_CONFIG` as it is at the call."""
    return _pattern(sw_mode, elem_log2, samples_log2, GB_ADDR_CONFIG if gb_addr_config is None else gb_addr_config)


@functools.lru_cache(maxsize=128)
def _pattern(sw_mode: int, elem_log2: int, samples_log2: int, gb: int) -> tuple[Term, ...]:
    if sw_mode not in MODES:
        name = _KNOWN.get(sw_mode)
        raise SwizzleError(f"image SW_MODE {sw_mode}" + (f" ({name}) is not modelled" if name else " (not a gfx11 "
                                                          "2D swizzle mode)"))
    name, blk_log2, xor, table = MODES[sw_mode]
    if not 0 <= elem_log2 <= 4:
        raise SwizzleError(f"{1 << elem_log2}-byte elements")
    if samples_log2 and (not table.endswith("ZR_X") or samples_log2 > 3):
        raise SwizzleError(f"{1 << samples_log2} samples in SW_MODE {sw_mode} ({name}): MSAA surfaces need a Z or R "
                           "mode, 2, 4 or 8 samples")
    if table.endswith("ZR_X"):
        table += f"_{1 << samples_log2}xaa"
    pipes, pkrs = config_fields(gb)
    index = elem_log2
    if xor:
        index += 5 * pipes + (5 * (2 * pkrs - 2) if pkrs >= 2 else 0)
    row = _PATINFO[table].get(index)
    if row is None:
        raise SwizzleError(f"SW_MODE {sw_mode} ({name}) for {1 << pipes} pipes, {1 << pkrs} packers (GB_ADDR_CONFIG "
                           f"0x{gb:x}): addrlib's GFX11_SW_{table}_PATINFO row {index} is not transcribed")
    _, n01, n2, n3, n4 = row
    bits = _terms(_NIBBLE01[n01]) + _terms(_NIBBLE2[n2]) + _terms(_NIBBLE3[n3]) + _terms(_NIBBLE4[n4])
    return bits[:blk_log2]


def block_dims(blk_log2: int, elem_log2: int, samples_log2: int = 0) -> tuple[int, int]:
    """(log2 width, log2 height) in elements of a thin block (``Lib::ComputeThinBlockDimension``)."""
    n = blk_log2 - elem_log2 - samples_log2
    width_first = samples_log2 % 2 == 0 or blk_log2 % 2 == 1
    return (n + 1) // 2 if width_first else n // 2, n // 2 if width_first else (n + 1) // 2


_SHIFT = {"X": 0, "Y": 16, "Z": 32, "S": 48}     # coordinates packed into one 64-bit key for the parity


@dataclass(frozen=True)
class Surface:
    """A thin 2D tiled surface (its mip chain in each slice): sizes in elements; ``masks`` one packed-coordinate mask
    per address bit (x bits 0..15, y 16..31, slice 32..47, sample 48..63 of the key); per level its pitch, its
    macro-block offset within a slice and, for the levels in the mip tail, its (x, y) origin inside the tail block;
    ``first_in_tail`` the first level in the tail (the level count when none is)."""

    sw_mode: int
    blk_log2: int
    xor: bool
    w_log2: int
    h_log2: int
    slice_size: int
    masks: tuple[int, ...]
    pitches: tuple[int, ...]
    mip_offsets: tuple[int, ...]
    tail_x: tuple[int, ...]
    tail_y: tuple[int, ...]
    first_in_tail: int

    def offsets(self, x: np.ndarray, y: np.ndarray, z: np.ndarray, s: np.ndarray, base: int,
                level: np.ndarray | None = None) -> np.ndarray:
        """Byte addresses (uint64) of elements (x, y) of mip ``level`` (default 0) of slice ``z`` (from the
        surface's first slice), sample ``s`` (int64 lane arrays, in range) of a surface at ``base``."""
        x, y, z, s = (np.asarray(a, dtype=I64) for a in (x, y, z, s))
        pitch: int | np.ndarray
        mip_off: int | np.ndarray
        if len(self.pitches) == 1 or level is None:
            pitch, mip_off, ex, ey = self.pitches[0], 0, x, y
        else:
            lv = np.asarray(level, dtype=I64)
            pitch = np.asarray(self.pitches, dtype=I64)[lv]
            mip_off = np.asarray(self.mip_offsets, dtype=I64)[lv]
            ex, ey = x + np.asarray(self.tail_x, dtype=I64)[lv], y + np.asarray(self.tail_y, dtype=I64)[lv]
        key = (ex | ey << 16 | z << 32 | s << 48).astype(U64)
        off = np.zeros(key.shape, dtype=I64)
        for i, m in enumerate(self.masks):
            if m:
                off |= (np.bitwise_count(key & U64(m)).astype(I64) & 1) << i
        blk = (y >> self.h_log2) * (pitch >> self.w_log2) + (x >> self.w_log2)
        if self.xor:
            low = base & ((1 << self.blk_log2) - 1)
            base -= low
            off ^= low
        return (base + z * self.slice_size + mip_off + (blk << self.blk_log2) + off).astype(U64)


def _mip_tail(blk_log2: int, elem_log2: int, wl: int, hl: int, z_order: bool) -> tuple[int, int, int]:
    """(max width, max height, max levels) of the mip tail: ``GetMipTailDim`` (a thin block's width halved),
    ``Gfx11Lib::ComputeSurfaceInfoMacroTiled``'s shrink for the Z modes of 1- and 2-byte elements (by the 256-byte
    block's size over the 4-byte one's) and ``GetMaxNumMipsInTail``."""
    tw, th = (1 << wl) >> 1, 1 << hl
    if z_order and elem_log2 <= 1:
        bw, bh = block_dims(8, elem_log2)
        tw //= 1 << (bw - 3)
        th //= 1 << (bh - 3)
    return tw, th, (1 + (1 << (blk_log2 - 9))) if blk_log2 <= 11 else blk_log2 - 4


def _tail_origin(blk_log2: int, elem_log2: int, k: int) -> tuple[int, int]:
    """The element origin of the tail's k-th slot from its end (slot m's byte offset: m x 256 below 7, 16 << m
    from 7; its odd bits from bit 9 the x, its even bits from bit 8 the y, in 256-byte micro-blocks; swapped for an
    odd block size), as ``ComputeSurfaceInfoMacroTiled`` places a tail level."""
    off = (16 << k) if k > 6 else k << 8
    mx = sum((off >> (9 + 2 * b) & 1) << b for b in range(6))
    my = sum((off >> (8 + 2 * b) & 1) << b for b in range(6))
    if blk_log2 & 1:
        mx, my = my, mx
        if elem_log2 & 1:
            mx, my = mx >> 1, my << 1 | mx & 1
    bw, bh = block_dims(8, elem_log2)
    return mx << bw, my << bh


def surface(sw_mode: int, bpe: int, width: int, height: int, samples: int = 1, gb_addr_config: int | None = None,
            levels: int = 1) -> Surface:
    """The layout of a thin 2D surface of ``levels`` mip levels (``bpe`` bytes per element: 1, 2, 4, 8 or 16):
    ``ComputeSurfaceInfoMicroTiled``/``MacroTiled``. Each level's size is addrlib's ``GetMipSize`` (the level-0 size
    shifted right, rounded up), its pitch and height aligned to the block; the levels lie smallest first in a slice,
    the ones that fit the mip tail (at most its level count, none larger than its dimensions; 4KB, 64KB and 256KB
    blocks, not 256B) sharing the first block, each at its slot. ``gb_addr_config`` None: :data:`GB_ADDR_CONFIG` as
    it is at the call."""
    gb = GB_ADDR_CONFIG if gb_addr_config is None else gb_addr_config
    return _surface(sw_mode, bpe, width, height, samples, gb, levels)


@functools.lru_cache(maxsize=256)
def _surface(sw_mode: int, bpe: int, width: int, height: int, samples: int, gb_addr_config: int, levels: int
             ) -> Surface:
    if bpe not in (1, 2, 4, 8, 16):
        raise SwizzleError(f"a tiled surface of {bpe}-byte elements (addrlib has 1, 2, 4, 8, 16)")
    if samples not in (1, 2, 4, 8):
        raise SwizzleError(f"{samples} samples")
    if samples > 1 and levels > 1:
        raise SwizzleError("an MSAA surface with mip levels")
    elem_log2, samples_log2 = bpe.bit_length() - 1, samples.bit_length() - 1
    bits = pattern(sw_mode, elem_log2, samples_log2, gb_addr_config)
    name, blk_log2, xor, _ = MODES[sw_mode]
    wl, hl = block_dims(blk_log2, elem_log2, samples_log2)
    masks = tuple(sum(1 << (_SHIFT[c] + b) for c, b in term) for term in bits)
    dims = [(-(-max(width, 1) // (1 << i)), -(-max(height, 1) // (1 << i))) for i in range(levels)]
    first = levels
    if levels > 1 and blk_log2 > 8:
        tw, th, tn = _mip_tail(blk_log2, elem_log2, wl, hl, name.endswith("Z_X"))
        first = next((i for i, (w, h) in enumerate(dims) if w <= tw and h <= th and levels - i <= tn), levels)
    pitches = [-(-w // (1 << wl)) << wl for w, _ in dims]
    sizes = [pitches[i] * (-(-dims[i][1] // (1 << hl)) << hl) * bpe * samples for i in range(levels)]
    offsets, tx, ty = [0] * levels, [0] * levels, [0] * levels
    at = (1 << blk_log2) if first < levels else 0
    for i in range(first - 1, -1, -1):
        offsets[i] = at
        at += sizes[i]
    if first < levels:
        tn = _mip_tail(blk_log2, elem_log2, wl, hl, name.endswith("Z_X"))[2]
        for i in range(first, levels):
            tx[i], ty[i] = _tail_origin(blk_log2, elem_log2, tn - 1 - (i - first))
    return Surface(sw_mode, blk_log2, xor, wl, hl, at, masks, tuple(pitches), tuple(offsets), tuple(tx), tuple(ty),
                   first)
