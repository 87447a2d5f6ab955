"""Swizzled (tiled) image layouts and ``image_msaa_load`` (tinyhw/mocks/rdna3/swizzle.py, image.py).

The address equations are restated here from AMD addrlib's gfx11 tables (Mesa ``gfx11SwizzlePattern.h``: the
``GFX11_SW_*_PATINFO`` row for 32 pipes / 32 packers or for 1 pipe, and the ``GFX11_SW_PATTERN_NIBBLE01/2/3``
entries it names, written out below per case), with the block and surface rules of ``gfx11addrlib.cpp`` computed here
in plain integers; images are laid out in memory from them and the instructions (assembled by llvm-mc-19) must read
and write the same bytes. Invariants that catch a transcription slip independently: every (x, y, sample) of a block
maps to a distinct element-aligned offset inside the block, element 0 to offset 0.
"""

from __future__ import annotations

import shutil
import struct

import numpy as np
import pytest
from rdna3isa import asm, f32, go, run, wave

from tinyhw.mocks.rdna3 import FlatMemory, ShaderFault, image, swizzle

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
M32 = (1 << 32) - 1
EXEC_LO = 126
IDENT = 4 | 5 << 3 | 6 << 6 | 7 << 9
T1DA, T2D, T3D, TCUBE, T2DA, TMSAA, TMSAAA = 12, 9, 10, 11, 13, 14, 15
BASE = 0x100000           # 1 MiB: aligned to every block size

# (SW_MODE, bytes per element, samples) -> (block bytes log2, block width, block height, address bits from bit 0):
# GFX11_SW_<table>_PATINFO row -> NIBBLE01 / NIBBLE2 / NIBBLE3 entries, as addrlib's gfx11SwizzlePattern.h lists them
CASES = {
    # 256_D row 2 (4 bpe): NIBBLE01[2]
    (2, 4, 1): (8, 8, 8, "0 0 X0 Y0 X1 Y1 X2 Y2"),
    # 4K_D row 1 (2 bpe): NIBBLE01[1], NIBBLE2[2]
    (6, 2, 1): (12, 64, 32, "0 X0 Y0 X1 Y1 X2 Y2 X3  Y3 X4 Y4 X5"),
    # 64K_D row 4 (16 bpe): NIBBLE01[4], NIBBLE2[5], NIBBLE3[5]
    (10, 16, 1): (16, 64, 64, "0 0 0 0 X0 Y0 X1 Y1  Y2 X2 Y3 X3  Y4 X4 Y5 X5"),
    # 4K_D_X row 67 (32 pipes 32 PKRs, 4 bpe) {3, 2, 53, 0, 0}: NIBBLE01[2], NIBBLE2[53]
    (22, 4, 1): (12, 32, 32, "0 0 X0 Y0 X1 Y1 X2 Y2  Y3^Z3^X6 Z2^X3^Y6 Z1^Y4^X5 Z0^X4^Y5"),
    # 64K_D_X row 68 (8 bpe) {3, 3, 84, 9, 0}: NIBBLE01[3], NIBBLE2[84], NIBBLE3[9]
    (26, 8, 1): (16, 128, 64, "0 0 0 X0 Y0 X1 X2 Y1  Y2^Z4^X7 X3^Z3^Y6 Z2^Y3^X6 Z1^X4^Y5  Z0^Y4^X5 X5 Y5 X6"),
    # 64K_ZR_X_1xaa row 67 (4 bpe) {3, 2, 157, 88, 0}: NIBBLE01[2], NIBBLE2[157], NIBBLE3[88]
    (24, 4, 1): (16, 128, 128, "0 0 X0 Y0 X1 Y1 X2 Y2  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8  Y6^X7 X3 Y3 X6^Y7"),
    # 64K_ZR_X_2xaa row 66 (2 bpe) {3, 6, 157, 88, 0}: NIBBLE01[6], NIBBLE2[157], NIBBLE3[88]
    (24, 2, 2): (16, 128, 128, "0 S0 X0 Y0 X1 Y1 X2 Y2  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8  Y6^X7 X3 Y3 X6^Y7"),
    # 64K_ZR_X_4xaa row 67 (4 bpe) {3, 12, 157, 90, 0}: NIBBLE01[12], NIBBLE2[157], NIBBLE3[90]
    (27, 4, 4): (16, 64, 64, "0 0 S0 S1 X0 Y0 X1 Y1  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8  Y2^Y6^X7 X3 Y3 X2^X6^Y7"),
    # 64K_ZR_X_8xaa row 67 (4 bpe) {3, 17, 207, 205, 0}: NIBBLE01[17], NIBBLE2[207], NIBBLE3[205]
    (24, 4, 8): (16, 32, 64, "0 0 S0 S1 S2 X0 Y0 X1  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X2^X5^Y8  Y2^Y6^X7 X3 Y3 Y1^X6^Y7"),
    # 64K_ZR_X_8xaa row 66 (2 bpe) {3, 16, 157, 90, 0}: NIBBLE01[16], NIBBLE2[157], NIBBLE3[90]
    (24, 2, 8): (16, 64, 64, "0 S0 S1 S2 X0 Y0 X1 Y1  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8  Y2^Y6^X7 X3 Y3 X2^X6^Y7"),
    # 64K_ZR_X_8xaa row 68 (8 bpe) {3, 18, 185, 90, 0}: NIBBLE01[18], NIBBLE2[185], NIBBLE3[90]
    (24, 8, 8): (16, 32, 32, "0 0 0 S0 S1 S2 X0 Y0  Y4^X9^Y9 Z0^X4^Y4 Y1^Y5^X8 X1^X5^Y8  Y2^Y6^X7 X3 Y3 X2^X6^Y7"),
    # 256K_D_X row 67 (4 bpe) {3, 2, 83, 8, 3}: NIBBLE01[2], NIBBLE2[83], NIBBLE3[8], NIBBLE4[3]
    (30, 4, 1): (18, 256, 256, "0 0 X0 Y0 X1 Y1 X2 Y2  Y3^Z4^X7 X3^Z3^Y7 Z2^Y4^X6 Z1^X4^Y6  Z0^X5^Y5 X5 Y6 X6  Y7 X7"),
    # 256K_ZR_X_1xaa row 68 (8 bpe) {3, 3, 209, 251, 48}: NIBBLE01[3], NIBBLE2[209], NIBBLE3[251], NIBBLE4[48]
    (28, 8, 1): (18, 256, 128, "0 0 0 X0 Y0 X1 X2 Y1  Y4^X9^Y9 X4^Y4^Z4 Z3^Y5^X8 Z2^X5^Y8  Z1^Y6^X7 Y2 X3 Y3^X8  "
                               "X7^Y7 Z0^X6^Y7"),
    # 256K_ZR_X_4xaa row 67 (4 bpe) {3, 12, 157, 320, 98}: NIBBLE01[12], NIBBLE2[157], NIBBLE3[320], NIBBLE4[98]
    (31, 4, 4): (18, 128, 128, "0 0 S0 S1 X0 Y0 X1 Y1  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8  Y6^X7 X2 Y2 Y3^X7  "
                               "X3^Y7 X6^Y7"),
    # 256K_ZR_X_8xaa row 69 (16 bpe) {3, 19, 245, 344, 118}: NIBBLE01[19], NIBBLE2[245], NIBBLE3[344], NIBBLE4[118]
    (28, 16, 8): (18, 32, 64, "0 0 0 0 S0 S1 S2 X0  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 Y0^X5^Y8  Y1^Y6^X7 X3 Y2 Y3^X8^Y8  "
                              "X2^Y7^X9 X1^X6^Y7"),
}
CASES[(27, 4, 1)] = CASES[(24, 4, 1)]        # Z and R share GFX11_SW_64K_ZR_X_*_PATINFO ("the same thing" on gfx11)
FMT = {1: 1, 2: 11, 4: 20, 8: 48, 16: 61}          # a UINT format of each size: 8, 16, 32, 32_32, 32_32_32_32


def eq_offset(bits: str, x: int, y: int, z: int, s: int) -> int:
    """The in-block offset: address bit i is the XOR of the coordinate bits the i-th entry names."""
    coord = {"X": x, "Y": y, "Z": z, "S": s}
    off = 0
    for i, entry in enumerate(bits.split()):
        if entry != "0":
            off |= (sum(coord[t[0]] >> int(t[1:]) & 1 for t in entry.split("^")) & 1) << i
    return off


def addr(case: tuple[int, int, int], width: int, height: int, x: int, y: int, z: int = 0, s: int = 0,
         base: int = BASE, cases: dict | None = None) -> int:
    """addrlib's ComputeSurfaceAddrFromCoord{Micro,Macro}Tiled for one level: slice x slice size + block index x
    block bytes + (pattern offset ^ pipeBankXor); pitch and height aligned to the block; the XOR modes take the
    base's bits below the block size as pipeBankXor (the model's reading)."""
    blk, bw, bh, bits = (CASES if cases is None else cases)[case]
    mode, bpe, n = case
    pitch, hh = -(-width // bw) * bw, -(-height // bh) * bh
    slice_size = pitch * hh * bpe * n
    off = eq_offset(bits, x, y, z, s)
    low = base % (1 << blk) if mode >= 20 else 0
    return base - low + z * slice_size + ((y // bh) * (pitch // bw) + x // bw) * (1 << blk) + (off ^ low)


def tsharp(base: int, fmt: int, width: int, height: int, sw_mode: int, *, typ: int = T2D, last: int = 0,
           base_array: int = 0, max_mip: int = 0, last_level: int = 0, dst_sel: int = IDENT) -> list[int]:
    """Eight T# dwords (gfx11 SQ_IMG_RSRC_WORD* positions); ``last`` is word 4's DEPTH (the last slice for arrays)."""
    return [base >> 8 & M32, (base >> 40) & 0xFF | max_mip << 16 | fmt << 20 | ((width - 1) & 3) << 30,
            (width - 1) >> 2 | (height - 1) << 14, dst_sel | last_level << 16 | sw_mode << 20 | typ << 28,
            last | base_array << 16, 0, 0, 0]


def setup(words: list[int], size: int = 1 << 22) -> tuple[object, FlatMemory]:
    mem = FlatMemory(BASE, size)
    w = wave(mem=mem)
    w.s[0:8] = words
    return w, mem


# ---- the layout module against the restated equations and the invariants ------------------------------------------


@pytest.mark.parametrize("case", list(CASES), ids=[f"sw{c[0]}-{c[1]}B-{c[2]}s" for c in CASES])
def test_surface_offsets_equal_the_restated_equation(case: tuple[int, int, int]) -> None:
    mode, bpe, n = case
    width, height = 300, 150                     # several blocks across, partial blocks at the edges
    surf = swizzle.surface(mode, bpe, width, height, n)
    rng = np.random.default_rng(sum(case))
    k = 400
    x, y = rng.integers(0, width, k), rng.integers(0, height, k)
    z, s = rng.integers(0, 20, k), rng.integers(0, n, k)
    for base in (BASE, BASE + 0x2500):           # a pipeBankXor in the base for the XOR modes
        got = surf.offsets(x, y, z, s, base).tolist()
        want = [addr(case, width, height, *map(int, v), base=base) for v in zip(x, y, z, s, strict=True)]
        assert got == want


def _all_modelled():
    for mode, (_, _, _, table) in swizzle.MODES.items():
        for e in range(5):
            for sl in (0, 1, 2, 3) if table.endswith("ZR_X") else (0,):
                yield mode, e, sl


@pytest.mark.parametrize("gb", [swizzle.GB_ADDR_CONFIG, 0x343, 0x0])
def test_every_block_is_a_bijection_onto_element_offsets(gb: int) -> None:
    """Within a block every (x, y, sample) lands on a distinct element-aligned offset inside the block, and
    element 0 at offset 0 (for 1 pipe only the transcribed rows: the non-XOR modes and the D_X ones)."""
    done = 0
    for mode, e, sl in _all_modelled():
        try:
            bits = swizzle.pattern(mode, e, sl, gb)
        except swizzle.SwizzleError:
            assert gb == 0 and mode in (24, 27, 28, 30, 31)
            continue
        blk = swizzle.MODES[mode][1]
        wl, hl = swizzle.block_dims(blk, e, sl)
        assert wl + hl + e + sl == blk == len(bits)
        xs, ys, ss = (a.ravel() for a in np.meshgrid(np.arange(1 << wl), np.arange(1 << hl), np.arange(1 << sl)))
        surf = swizzle.surface(mode, 1 << e, 1 << wl, 1 << hl, 1 << sl, gb)
        off = surf.offsets(xs, ys, np.zeros_like(xs), ss, 0).astype(np.int64)
        assert sorted(off.tolist()) == list(range(0, 1 << blk, 1 << e)), (mode, e, sl)
        assert int(surf.offsets([0], [0], [0], [0], 0)[0]) == 0
        done += 1
    assert done == (110 if gb else 25)


# Navi33's GB_ADDR_CONFIG 0x343 (8 pipes, 8 packers: Mesa amdgpu_devices.c "navi33"): PATINFO rows 35..39
CASES_343 = {
    # 64K_ZR_X_1xaa row 37 (4 bpe) {3, 2, 149, 61, 0}: NIBBLE01[2], NIBBLE2[149], NIBBLE3[61]
    (24, 4, 1): (16, 128, 128, "0 0 X0 Y0 X1 Y1 X2 Y2  Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 X3  Y3 X6^Y7 Y6^X7 X5^Y6"),
    # 256K_D_X row 38 (8 bpe) {3, 3, 39, 4, 4}: NIBBLE01[3], NIBBLE2[39], NIBBLE3[4], NIBBLE4[4]
    (30, 8, 1): (18, 256, 128, "0 0 0 X0 Y0 X1 X2 Y1  Y2^Z2^X5 Z1^X3^Y4 Z0^Y3^X4 X4  Y4 X5 Y5 X6  Y6 X7"),
    # 64K_ZR_X_8xaa row 36 (2 bpe) {3, 16, 149, 168, 0}: NIBBLE01[16], NIBBLE2[149], NIBBLE3[168]
    (27, 2, 8): (16, 64, 64, "0 S0 S1 S2 X0 Y0 X1 Y1  Y4^X7^Y7 Z1^X4^Y4 Z0^Y5^X6 X3  Y3 X2^Y6^X7 Y2^X6^Y7 X5^Y6"),
}


@pytest.mark.parametrize("case", list(CASES_343), ids=[f"sw{c[0]}-{c[1]}B-{c[2]}s" for c in CASES_343])
def test_navi33_offsets_equal_the_restated_equation(case: tuple[int, int, int]) -> None:
    mode, bpe, n = case
    surf = swizzle.surface(mode, bpe, 300, 150, n, 0x343)
    rng = np.random.default_rng(7 + sum(case))
    x, y, z, s = rng.integers(0, 300, 300), rng.integers(0, 150, 300), rng.integers(0, 9, 300), rng.integers(0, n, 300)
    got = surf.offsets(x, y, z, s, BASE + 0x700).tolist()
    assert got == [addr(case, 300, 150, *map(int, v), base=BASE + 0x700, cases=CASES_343)
                   for v in zip(x, y, z, s, strict=True)]


def test_the_gb_addr_config_constant_selects_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """image_load on a 64KB_Z_X T# reads Navi33's layout once swizzle.GB_ADDR_CONFIG says 0x343."""
    case = (24, 4, 1)
    monkeypatch.setattr(swizzle, "GB_ADDR_CONFIG", 0x343)
    w, mem = setup(tsharp(BASE, 20, 200, 100, 24))
    pts = [(0, 0), (199, 99), (130, 7), (64, 64)]
    for i, (x, y) in enumerate(pts):
        mem.write(addr(case, 200, 100, x, y, cases=CASES_343), struct.pack("<I", 0x7000 + i))
    w.s[EXEC_LO] = 0b1111
    for lane, (x, y) in enumerate(pts):
        w.v[4:6, lane] = [x, y]
    go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[0, i]) for i in range(4)] == [0x7000 + i for i in range(4)]


def test_the_block_dimensions_follow_addrlibs_rule() -> None:
    """ComputeThinBlockDimension: the odd bit goes to the width unless log2(samples) is odd and the block's log2
    size even."""
    assert swizzle.block_dims(8, 0) == (4, 4) and swizzle.block_dims(8, 3) == (3, 2)      # 256B: 16x16, 8x4
    assert swizzle.block_dims(16, 1) == (8, 7) and swizzle.block_dims(16, 2, 1) == (6, 7)  # 256x128; 2xaa 64x128
    assert swizzle.block_dims(12, 0) == (6, 6) and swizzle.block_dims(16, 4, 3) == (4, 5)


def test_one_pipe_makes_the_d_x_modes_the_plain_d_ones() -> None:
    """GFX11_SW_64K_D_X_PATINFO row 0..4 ("1 pipes (1 PKRs)") name the same nibbles as GFX11_SW_64K_D_PATINFO's."""
    for e in range(5):
        assert swizzle.pattern(26, e, 0, 0x0) == swizzle.pattern(10, e, 0, 0x0) == swizzle.pattern(10, e)
        assert swizzle.pattern(22, e, 0, 0x0) == swizzle.pattern(6, e)
    assert swizzle.pattern(26, 2) != swizzle.pattern(10, 2)


def test_layout_refusals() -> None:
    with pytest.raises(swizzle.SwizzleError, match="row 52 is not transcribed"):    # 16 pipes 16 PKRs: base 50
        swizzle.pattern(24, 2, 0, 0x444)
    with pytest.raises(swizzle.SwizzleError, match="256KB_S_X"):
        swizzle.pattern(29, 2)
    with pytest.raises(swizzle.SwizzleError, match="64KB_D_T"):
        swizzle.pattern(18, 2)
    with pytest.raises(swizzle.SwizzleError, match="MSAA surfaces need a Z or R"):
        swizzle.pattern(26, 2, 1)
    with pytest.raises(swizzle.SwizzleError, match="pipe interleave"):
        swizzle.pattern(26, 2, 0, 0x545 | 1 << 3)
    with pytest.raises(swizzle.SwizzleError, match="12-byte"):
        swizzle.surface(24, 12, 4, 4)


# ---- the instructions on tiled T#s ----------------------------------------------------------------------------------


def _fill(mem: FlatMemory, case: tuple[int, int, int], width: int, height: int, slices: int = 1,
          base: int = BASE) -> np.ndarray:
    """Write a NumPy image of distinct texels (slice, y, x, sample) at the equation's addresses; returns it."""
    mode, bpe, n = case
    img = np.arange(slices * height * width * n, dtype=np.uint64).reshape(slices, height, width, n) * 2654435761
    img &= (1 << min(8 * bpe, 64)) - 1
    for z in range(slices):
        for y in range(height):
            for x in range(width):
                for s in range(n):
                    v = int(img[z, y, x, s])
                    mem.write(addr(case, width, height, x, y, z, s, base), v.to_bytes(min(bpe, 8), "little")
                              + bytes(max(bpe - 8, 0)))
    return img


@pytest.mark.parametrize("case", [(2, 4, 1), (6, 2, 1), (22, 4, 1), (26, 8, 1), (24, 4, 1), (30, 4, 1), (28, 8, 1)],
                         ids=["256B_D", "4KB_D", "4KB_D_X", "64KB_D_X", "64KB_Z_X", "256KB_D_X", "256KB_Z_X"])
def test_image_load_reads_the_swizzled_texels(case: tuple[int, int, int]) -> None:
    mode, bpe, _ = case
    width, height = 150, 70
    base = BASE + 0x300 if mode >= 20 else BASE       # a pipeBankXor for the XOR modes
    w, mem = setup(tsharp(base, FMT[bpe], width, height, mode))
    img = _fill(mem, case, width, height, base=base)
    xs = [0, 1, 7, 8, 31, 33, 64, 100, 129, 149, 5, 140, 77, 90, 3, 150]
    ys = [0, 0, 1, 9, 31, 2, 40, 69, 64, 69, 66, 1, 33, 50, 68, 0]      # the last lane is past the width
    w.s[EXEC_LO] = (1 << 16) - 1
    w.v[4, :16], w.v[5, :16] = xs, ys
    go(w, f"image_load {'v[0:1]' if bpe == 8 else 'v0'}, v[4:5], s[0:7] dmask:0x{3 if bpe == 8 else 1:x} "
          "dim:SQ_RSRC_IMG_2D")
    for lane, (x, y) in enumerate(zip(xs, ys, strict=True)):
        want = int(img[0, y, x, 0]) if x < width else 0
        got = int(w.v[0, lane]) | (int(w.v[1, lane]) << 32 if bpe == 8 else 0)
        assert got == want, (lane, x, y)


def test_image_store_and_atomic_write_the_swizzled_bytes_of_an_array() -> None:
    """64KB_D_X 2D array (its pattern XORs slice bits Z0..Z4 into the offset): a store at slice 3 of a view starting
    at slice 2 (so slice 5 of the surface) and an atomic add, checked in memory at the equation's addresses."""
    case = (26, 8, 1)
    width, height = 40, 20
    w, mem = setup(tsharp(BASE, 49, width, height, 26, typ=T2DA, last=7, base_array=2))   # 32_32_SINT
    w.s[EXEC_LO] = 0b111
    w.v[4, :3], w.v[5, :3], w.v[6, :3] = [3, 39, 17], [5, 19, 11], [3, 3, 0]
    w.v[0, :3], w.v[1, :3] = [0x11111111, 0x22222222, 0x33333333], [1, 2, 3]
    go(w, "image_store v[0:1], v[4:6], s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D_ARRAY")
    for x, y, z, lo, hi in ((3, 5, 5, 0x11111111, 1), (39, 19, 5, 0x22222222, 2), (17, 11, 2, 0x33333333, 3)):
        assert mem.read(addr(case, width, height, x, y, z), 8) == struct.pack("<2I", lo, hi), (x, y, z)
    w.v[0, :3], w.v[1, :3] = [5, 5, 5], [0, 0, 0]
    go(w, "image_atomic_add v[0:1], v[4:6], s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D_ARRAY glc")
    assert [int(w.v[0, i]) for i in range(3)] == [0x11111111, 0x22222222, 0x33333333]
    assert mem.read(addr(case, width, height, 39, 19, 5), 8) == struct.pack("<2I", 0x22222227, 2)


def test_cube_faces_are_slices_of_the_tiled_layout() -> None:
    case = (24, 4, 1)
    w, mem = setup(tsharp(BASE, 20, 16, 16, 24, typ=TCUBE, last=5))
    img = _fill(mem, case, 16, 16, slices=6)
    w.s[EXEC_LO] = 0b1111
    w.v[4, :4], w.v[5, :4], w.v[6, :4] = [0, 15, 3, 9], [0, 15, 12, 1], [0, 5, 2, 4]
    go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_CUBE")
    assert [int(w.v[0, i]) for i in range(4)] == [int(img[0, 0, 0, 0]), int(img[5, 15, 15, 0]),
                                                  int(img[2, 12, 3, 0]), int(img[4, 1, 9, 0])]


def test_resinfo_and_the_sampler_on_a_tiled_image() -> None:
    """A 32_FLOAT 64KB_R_X texture: image_get_resinfo gives its size and image_sample_lz (point, unnormalised
    coordinates at texel centres, an all-zero S#) returns the swizzled texel."""
    case = (27, 4, 1)
    width, height = 130, 5
    w, mem = setup(tsharp(BASE, 22, width, height, 27))
    vals = {(x, y): float(x * 8 + y) for x in (0, 7, 128, 129) for y in (0, 4)}
    for (x, y), v in vals.items():
        mem.write(addr(case, width, height, x, y), struct.pack("<f", v))
    w.s[EXEC_LO] = 0xFF
    w.v[4, :8] = 0
    go(w, "image_get_resinfo v[0:1], v4, s[0:7] dmask:0x3 dim:SQ_RSRC_IMG_2D")
    assert (int(w.v[0, 0]), int(w.v[1, 0])) == (width, height)
    w.s[8:12] = [0, 0, 0, 0]
    keys = list(vals)
    for lane, (x, y) in enumerate(keys):
        w.v[4, lane], w.v[5, lane] = f32(x + 0.5), f32(y + 0.5)
    go(w, "image_sample_lz v0, v[4:5], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_2D unorm")
    assert [int(w.v[0, lane]) for lane in range(8)] == [f32(vals[k]) for k in keys]


@pytest.mark.parametrize("case", [(24, 2, 2), (27, 4, 4), (24, 4, 8)], ids=["2xaa", "4xaa", "8xaa"])
def test_image_load_and_store_of_msaa_samples(case: tuple[int, int, int]) -> None:
    """2D_MSAA: the third address VGPR is the sample (gfx11 has no FMASK: the fragment id is the sample index);
    MAX_MIP holds log2(samples); a sample past the count reads 0 and drops the store."""
    mode, bpe, n = case
    width, height = 70, 40
    w, mem = setup(tsharp(BASE, FMT[bpe], width, height, mode, typ=TMSAA, max_mip=n.bit_length() - 1))
    img = _fill(mem, case, width, height)
    pts = [(0, 0, 0), (1, 0, n - 1), (69, 39, n // 2), (33, 17, 1), (64, 32, 0), (5, 38, n - 1), (7, 7, n)]
    w.s[EXEC_LO] = (1 << len(pts)) - 1
    for lane, (x, y, s) in enumerate(pts):
        w.v[4:7, lane] = [x, y, s]
    go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA")
    for lane, (x, y, s) in enumerate(pts):
        assert int(w.v[0, lane]) == (int(img[0, y, x, s]) if s < n else 0), (x, y, s)
    w.v[0, :len(pts)] = 0xBEEF
    go(w, "image_store v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA")
    for x, y, s in pts[:-1]:
        assert int.from_bytes(mem.read(addr(case, width, height, x, y, 0, s), bpe), "little") == 0xBEEF


def test_image_msaa_load_returns_four_samples_of_one_component() -> None:
    """8 samples of 16_16_16_16_UINT (64KB_Z_X, 2D_MSAA_ARRAY): DMASK picks the component, VGPR i holds sample
    fragid + i (image.MSAA_LOAD_SAMPLES = "fragid"), samples past the count read 0; the slice is the third VGPR."""
    case = (24, 8, 8)
    width, height = 40, 36
    w, mem = setup(tsharp(BASE, 55, width, height, 24, typ=TMSAAA, last=2, max_mip=3))     # 16_16_16_16_UINT
    img = _fill(mem, case, width, height, slices=3)

    def comp(x: int, y: int, z: int, s: int, c: int) -> int:
        return int(img[z, y, x, s]) >> (16 * c) & 0xFFFF if s < 8 else 0

    pts = [(0, 0, 0, 0), (39, 35, 2, 4), (17, 3, 1, 6), (33, 33, 0, 1)]
    w.s[EXEC_LO] = 0b1111
    for lane, p in enumerate(pts):
        w.v[4:8, lane] = list(p)
    for c in range(4):
        w.v[0:4, :4] = 0xDEAD
        go(w, f"image_msaa_load v[0:3], v[4:7], s[0:7] dmask:0x{1 << c:x} dim:SQ_RSRC_IMG_2D_MSAA_ARRAY")
        for lane, (x, y, z, s) in enumerate(pts):
            assert [int(w.v[r, lane]) for r in range(4)] == [comp(x, y, z, s + i, c) for i in range(4)], (c, lane)


def test_image_msaa_load_aligned_reading_d16_and_tfe(monkeypatch: pytest.MonkeyPatch) -> None:
    case = (24, 4, 8)
    width, height = 20, 20
    w, mem = setup(tsharp(BASE, 20, width, height, 24, typ=TMSAA, max_mip=3))
    img = _fill(mem, case, width, height)
    w.s[EXEC_LO] = 0b11
    w.v[4:7, 0], w.v[4:7, 1] = [3, 4, 6], [19, 0, 1]
    monkeypatch.setattr(image, "MSAA_LOAD_SAMPLES", "aligned")        # VGPR i: sample (fragid & ~3) + i
    w.v[10:15, :2] = 0xDEAD
    go(w, "image_msaa_load v[10:14], v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA tfe")
    assert [int(w.v[10 + r, 0]) for r in range(5)] == [int(img[0, 4, 3, s]) for s in (4, 5, 6, 7)] + [0]
    assert [int(w.v[10 + r, 1]) for r in range(5)] == [int(img[0, 0, 19, s]) for s in (0, 1, 2, 3)] + [0]
    w.s[0:8] = tsharp(BASE, 11, width, height, 24, typ=TMSAA, max_mip=3)    # 16_UINT, D16: two per VGPR
    img16 = _fill(mem, (24, 2, 8), width, height)
    monkeypatch.setattr(image, "MSAA_LOAD_SAMPLES", "fragid")
    go(w, "image_msaa_load v[0:1], v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA d16")
    s16 = [int(img16[0, 4, 3, s]) if s < 8 else 0 for s in (6, 7, 8, 9)]
    assert [int(w.v[0, 0]), int(w.v[1, 0])] == [s16[0] | s16[1] << 16, s16[2] | s16[3] << 16]


def test_tiled_refusals() -> None:
    words = tsharp(BASE, 20, 16, 16, 24, max_mip=2)
    words[3] |= 3 << 16                 # LAST_LEVEL 3 past MAX_MIP 2
    w, _ = setup(words)
    w.s[EXEC_LO] = 1
    w.v[4:7, 0] = [0, 0, 3]
    with pytest.raises(ShaderFault, match="mip level 3 past the tiled resource's 3 level"):
        go(w, "image_load_mip v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 20, 16, 16, 29)
    with pytest.raises(ShaderFault, match="256KB_S_X"):
        go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 20, 16, 1, 26, typ=8)
    with pytest.raises(ShaderFault, match="tiled 1D T# in SW_MODE 26"):
        go(w, "image_load v0, v4, s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D")
    w.s[0:8] = tsharp(BASE, 20, 16, 16, 26, typ=T3D, last=3)
    with pytest.raises(ShaderFault, match="thick"):
        go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_3D")
    w.s[0:8] = tsharp(BASE, 20, 16, 16, 0, typ=TMSAA, max_mip=2)
    with pytest.raises(ShaderFault, match="linear"):
        go(w, "image_load v0, v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA")
    w.s[0:8] = tsharp(BASE, 20, 16, 16, 26, typ=TMSAA, max_mip=2)
    with pytest.raises(ShaderFault, match="MSAA surfaces need a Z or R"):
        go(w, "image_msaa_load v[0:3], v[4:6], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_MSAA")


def test_the_linear_path_is_unchanged_by_a_tiled_neighbour() -> None:
    """SW_MODE 0 keeps the linear addresses (pitch aligned to 256 bytes) after tiled T#s went through the caches."""
    w, mem = setup(tsharp(BASE, 20, 100, 3, 24))
    w.s[EXEC_LO] = 1
    w.v[4, 0], w.v[5, 0] = 7, 2
    go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    w.s[0:8] = tsharp(BASE, 20, 100, 3, 0)
    mem.write(BASE + (2 * 128 + 7) * 4, struct.pack("<I", 0xC0FFEE))
    run(asm("image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D"), w)
    assert int(w.v[0, 0]) == 0xC0FFEE


# ---- mip chains and the mip tail -------------------------------------------------------------------------------------


def mip_layout(case: tuple[int, int, int], width: int, height: int, levels: int
               ) -> tuple[int, list[int], list[int], list[tuple[int, int]], int]:
    """addrlib's ComputeSurfaceInfoMacroTiled (MicroTiled for 256B) restated: (slice size, pitch per level, offset
    per level, tail origin per level, first level in the tail). Level sizes are ShiftCeil(size, level); the tail is
    half a block wide and a block high (GetMipTailDim), shrunk for Z modes of 1/2-byte elements, holds at most
    GetMaxNumMipsInTail levels (4KB: 8, 64KB: 12, 256KB: 14); tail slot m of the 2^blk bytes lies at byte m << 8
    (m < 7) or 16 << m, whose odd bits from bit 9 give the x and even bits from bit 8 the y in 256-byte
    micro-blocks."""
    mode, bpe, _ = case
    blk, bw, bh, _ = CASES[case]
    micro = {1: (16, 16), 2: (16, 8), 4: (8, 8), 8: (8, 4), 16: (4, 4)}[bpe]          # Block256_2d
    dims = [(-(-width // 2 ** i), -(-height // 2 ** i)) for i in range(levels)]
    tw, th, tn = bw // 2, bh, {12: 8, 16: 12, 18: 14}.get(blk, 0)
    if mode in (24, 28) and bpe <= 2:
        tw, th = tw // (micro[0] // 8), th // (micro[1] // 8)
    first = levels
    for i, (w, h) in enumerate(dims):
        if blk > 8 and levels > 1 and w <= tw and h <= th and levels - i <= tn:
            first = i
            break
    pitches = [-(-w // bw) * bw for w, _ in dims]
    sizes = [pitches[i] * -(-dims[i][1] // bh) * bh * bpe for i in range(levels)]
    offs, origin = [0] * levels, [(0, 0)] * levels
    at = 2 ** blk if first < levels else 0
    for i in reversed(range(first)):
        offs[i], at = at, at + sizes[i]
    for i in range(first, levels):
        m = tn - 1 - (i - first)
        o = 16 << m if m > 6 else m << 8
        mx = sum((o >> (9 + 2 * b) & 1) << b for b in range(6))
        my = sum((o >> (8 + 2 * b) & 1) << b for b in range(6))
        origin[i] = (mx * micro[0], my * micro[1])
    return at, pitches, offs, origin, first


def mip_addr(case: tuple[int, int, int], width: int, height: int, levels: int, x: int, y: int, level: int,
             z: int = 0, base: int = BASE) -> int:
    blk, bw, bh, bits = CASES[case]
    slice_size, pitches, offs, origin, _ = mip_layout(case, width, height, levels)
    off = eq_offset(bits, x + origin[level][0], y + origin[level][1], z, 0)
    low = base % (1 << blk) if case[0] >= 20 else 0
    return base - low + z * slice_size + offs[level] + ((y // bh) * (pitches[level] // bw) + x // bw) * 2 ** blk \
        + (off ^ low)


def test_a_mip_chain_worked_by_hand() -> None:
    """64KB_Z_X, 4-byte texels, 256x256, 9 levels: blocks of 128x128; the tail (64x128, at most 12 levels) takes
    levels 2..8 in the first block, level 1 follows it (64 KiB), level 0 follows that (at 128 KiB); slice 384 KiB.
    Tail slots 11..5: bytes 32 KiB (x 64), 16 KiB (y 64), 8 KiB (x 32), 4 KiB (y 32), 2 KiB (x 16), 0x600 (x 8, y
    16), 0x500 (y 24)."""
    surf = swizzle.surface(24, 4, 256, 256, 1, None, 9)
    assert (surf.first_in_tail, surf.slice_size) == (2, 384 << 10)
    assert surf.mip_offsets == (128 << 10, 64 << 10, 0, 0, 0, 0, 0, 0, 0)
    assert list(zip(surf.tail_x, surf.tail_y, strict=True))[2:] == [(64, 0), (0, 64), (32, 0), (0, 32), (16, 0),
                                                                   (8, 16), (0, 24)]
    assert mip_layout((24, 4, 1), 256, 256, 9)[::2] == (384 << 10, list(surf.mip_offsets), 2)


MIP_CASES = [((24, 4, 1), 300, 150, 9), ((24, 1, 1), 200, 64, 8), ((27, 4, 1), 64, 64, 7), ((26, 8, 1), 1000, 3, 10),
             ((22, 4, 1), 100, 80, 7), ((6, 2, 1), 70, 90, 7), ((2, 4, 1), 37, 21, 6), ((10, 16, 1), 130, 64, 8),
             ((30, 4, 1), 600, 300, 10), ((28, 8, 1), 260, 40, 9)]
CASES[(24, 1, 1)] = (16, 256, 256, "X0 X1 Y0 X2 Y1 Y2 X3 Y3  Y4^X9^Y9 Z1^X4^Y4 Z0^Y5^X8 X5^Y8  Y6^X7 X7 Y7 X6^Y7")
# ^ 64K_ZR_X_1xaa row 65 (1 bpe) {3, 0, 157, 86, 0}: NIBBLE01[0], NIBBLE2[157], NIBBLE3[86]


@pytest.mark.parametrize("case,width,height,levels", MIP_CASES, ids=[f"sw{c[0][0]}-{c[0][1]}B" for c in MIP_CASES])
def test_mip_chains_equal_the_restated_layout_and_never_overlap(case, width: int, height: int, levels: int) -> None:
    """Every texel of every level of two slices: the model's address is the restated one, and no two texels share
    an address (the tail slots and the levels around it do not overlap), all inside the slices."""
    mode, bpe, _ = case
    surf = swizzle.surface(mode, bpe, width, height, 1, None, levels)
    pts = [(lv, x, y, z) for z in (0, 1) for lv in range(levels)
           for y in range(max(1, height >> lv)) for x in range(max(1, width >> lv))]
    lv, x, y, z = (np.array(a) for a in zip(*pts, strict=True))
    got = surf.offsets(x, y, z, np.zeros_like(x), BASE, lv).astype(np.int64)
    assert len(set(got.tolist())) == len(pts)
    assert int(got.min()) >= BASE and int(got.max()) < BASE + 2 * surf.slice_size
    assert surf.slice_size == mip_layout(case, width, height, levels)[0]
    for k in range(0, len(pts), max(1, len(pts) // 300)):
        assert int(got[k]) == mip_addr(case, width, height, levels, int(x[k]), int(y[k]), int(lv[k]), int(z[k])), \
            pts[k]


def test_image_load_mip_and_store_mip_on_a_tiled_chain() -> None:
    """image_load_mip and image_store_mip on a 64KB_Z_X 32_UINT 2D array of 9 levels (levels 2..8 in the tail),
    BASE_LEVEL 1 (the mip operand counts from it)."""
    case, width, height, levels = (24, 4, 1), 300, 150, 9
    words = tsharp(BASE, 20, width, height, 24, typ=T2DA, last=1, max_mip=levels - 1, last_level=levels - 1)
    words[3] |= 1 << 12                 # BASE_LEVEL 1
    w, mem = setup(words)
    pts = [(0, 0, 0, 0), (149, 74, 1, 0), (37, 18, 1, 1), (74, 37, 0, 1), (2, 1, 0, 6), (0, 0, 1, 7), (4, 0, 0, 5)]
    for i, (x, y, z, m) in enumerate(pts):
        mem.write(mip_addr(case, width, height, levels, x, y, m + 1, z), struct.pack("<I", 0x1000 + i))
    w.s[EXEC_LO] = (1 << len(pts)) - 1
    for lane, (x, y, z, m) in enumerate(pts):
        w.v[4:8, lane] = [x, y, z, m]
    go(w, "image_load_mip v0, v[4:7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_ARRAY")
    want = [0x1000 + i if (x < max(1, width >> (m + 1)) and y < max(1, height >> (m + 1))) else 0
            for i, (x, y, _z, m) in enumerate(pts)]
    assert [int(w.v[0, i]) for i in range(len(pts))] == want
    w.v[0, :len(pts)] = [0xAB00 + i for i in range(len(pts))]
    go(w, "image_store_mip v0, v[4:7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_2D_ARRAY")
    for i, (x, y, z, m) in enumerate(pts):
        if want[i]:
            assert mem.read(mip_addr(case, width, height, levels, x, y, m + 1, z), 4) == struct.pack("<I", 0xAB00 + i)


def test_1d_array_and_3d_in_the_thin_z_and_r_modes() -> None:
    """addrlib lets 1D use 64KB_Z_X/R_X (Gfx11Rsrc1dSwModeMask: a 2D surface one texel high) and makes the Z/R modes
    thin for 3D (Gfx11Rsrc3dThinSwModeMask, HwlIsThin: each depth slice a 2D slice holding the whole chain)."""
    case = (27, 4, 1)
    w, mem = setup(tsharp(BASE, 20, 300, 1, 27, typ=T1DA, last=2))
    pts = [(0, 0), (299, 2), (130, 1), (64, 2)]
    for i, (x, sl) in enumerate(pts):
        mem.write(addr(case, 300, 1, x, 0, sl), struct.pack("<I", 0x5000 + i))
    w.s[EXEC_LO] = 0b1111
    for lane, (x, sl) in enumerate(pts):
        w.v[4:6, lane] = [x, sl]
    go(w, "image_load v0, v[4:5], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_1D_ARRAY")
    assert [int(w.v[0, i]) for i in range(4)] == [0x5000 + i for i in range(4)]
    case, (width, height, depth, levels) = (24, 4, 1), (40, 30, 5, 3)
    w, mem = setup(tsharp(BASE, 20, width, height, 24, typ=T3D, last=depth - 1, max_mip=levels - 1,
                          last_level=levels - 1))
    pts3 = [(0, 0, 0, 0), (39, 29, 4, 0), (19, 14, 1, 1), (3, 2, 0, 2), (9, 6, 2, 2)]   # level 2: 10x7x1
    for i, (x, y, z, m) in enumerate(pts3):
        mem.write(mip_addr(case, width, height, levels, x, y, m, z), struct.pack("<I", 0x6000 + i))
    w.s[EXEC_LO] = 0b11111
    for lane, p in enumerate(pts3):
        w.v[4:8, lane] = list(p)
    go(w, "image_load_mip v0, v[4:7], s[0:7] dmask:0x1 dim:SQ_RSRC_IMG_3D")
    assert [int(w.v[0, i]) for i in range(5)] == [0x6000, 0x6001, 0x6002, 0x6003, 0]     # depth 2 past level 2's 1


def test_the_sampler_picks_the_level_from_the_tiled_chain() -> None:
    """image_sample_l (point, normalised coordinates at the level's texel centres, point mip filter, MAX_LOD 15) on a
    64KB_Z_X 32_FLOAT texture of 7 levels: LOD 0, 1 and 3 read the texel of that level at the restated address
    (level 3 lies in the mip tail)."""
    case, width, height, levels = (24, 4, 1), 64, 64, 7
    w, mem = setup(tsharp(BASE, 22, width, height, 24, max_mip=levels - 1, last_level=levels - 1))
    w.s[8:12] = [0, 15 << 8 << 12, 1 << 26, 0]   # S# MAX_LOD (word 1 23:12) 15.0, MIP_FILTER (word 2 27:26) point
    pts = [(5, 9, 0), (63, 0, 0), (3, 30, 1), (7, 7, 3), (0, 5, 3)]
    for i, (x, y, lv) in enumerate(pts):
        mem.write(mip_addr(case, width, height, levels, x, y, lv), struct.pack("<f", 1.5 + i))
    w.s[EXEC_LO] = (1 << len(pts)) - 1
    for lane, (x, y, lv) in enumerate(pts):
        n = width >> lv
        w.v[4, lane], w.v[5, lane], w.v[6, lane] = f32((x + 0.5) / n), f32((y + 0.5) / n), f32(float(lv))
    go(w, "image_sample_l v0, v[4:6], s[0:7], s[8:11] dmask:0x1 dim:SQ_RSRC_IMG_2D")
    assert [int(w.v[0, i]) for i in range(len(pts))] == [f32(1.5 + i) for i in range(len(pts))]


def test_gb_addr_config_field_positions_are_the_register_databases() -> None:
    """swizzle.config_fields decodes GB_ADDR_CONFIG by hand (a mocks module binds no ASIC); the gc 11 register
    database must agree on NUM_PIPES, NUM_PKRS and PIPE_INTERLEAVE_SIZE for every value of those fields."""
    from tinyhw.regs import asic

    reg = asic("navi31").reg("gc.GB_ADDR_CONFIG")
    for value in (0x545, 0x343, 0, 0x7C7, 0xFFFFFFFF & ~0x38, 0x700, 0x7):
        f = reg.decode(value)
        assert f["PIPE_INTERLEAVE_SIZE"] == 0
        assert swizzle.config_fields(value) == (f["NUM_PIPES"], f["NUM_PKRS"]), hex(value)
    with pytest.raises(swizzle.SwizzleError, match="pipe interleave"):
        swizzle.config_fields(0x545 | 1 << 3)
    assert reg.decode(0x545 | 1 << 3)["PIPE_INTERLEAVE_SIZE"] == 1
