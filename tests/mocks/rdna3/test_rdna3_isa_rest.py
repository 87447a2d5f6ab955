"""Table tests of the last scalar, LDS, global and VOP3 instructions of the shader core (tinyhw/mocks/rdna3/extra.py,
v_mullit_f32 and v_cvt_pk_u8_f32 in vmath.py).

Instructions are assembled by llvm-mc-19 (skipped without it), decoded, compiled and run on one wave. Expected
values come from the ISA reference guide's pseudocode computed here with Python integers and ``struct``, never
from the core.
"""

from __future__ import annotations

import math
import shutil
import struct

import pytest
from rdna3isa import f32, from32, go, wave

from tinyhw.mocks.rdna3 import ShaderFault, Unimplemented

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")
M32, M64 = (1 << 32) - 1, (1 << 64) - 1
EXEC_LO, EXEC_HI, M0 = 126, 127, 125






SAVEEXEC64 = {  # the guide's EXEC = op(S0, EXEC) on 64 bits
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
    "nand": lambda s, e: ~(s & e), "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e),
    "and_not0": lambda s, e: ~s & e, "or_not0": lambda s, e: ~s | e,
    "and_not1": lambda s, e: s & ~e, "or_not1": lambda s, e: s | ~e,
}


@pytest.mark.parametrize("op", sorted(SAVEEXEC64))
def test_saveexec_b64_on_the_64_bit_exec(op: str) -> None:
    for s0, ex in ((0x0000FFFF_F0F0F0F0, 0x00000001_FFFF0000), (0, 0), (M64, 0x12345678_9ABCDEF0)):
        w = wave()
        w.s[4], w.s[5] = s0 & M32, s0 >> 32
        w.s[EXEC_LO], w.s[EXEC_HI] = ex & M32, ex >> 32
        go(w, f"s_{op}_saveexec_b64 s[8:9], s[4:5]")
        new = SAVEEXEC64[op](s0, ex) & M64
        assert (int(w.s[EXEC_LO]), int(w.s[EXEC_HI])) == (new & M32, new >> 32), (op, hex(s0), hex(ex))
        assert (int(w.s[8]), int(w.s[9])) == (ex & M32, ex >> 32)
        assert w.scc == int(new != 0)


@pytest.mark.parametrize("op", ["and_not0", "and_not1"])
def test_wrexec_b64_writes_the_new_exec(op: str) -> None:
    s0, ex = 0x00000003_0F0F00FF, 0x00000001_FFFFFFF0
    w = wave()
    w.s[4], w.s[5] = s0 & M32, s0 >> 32
    w.s[EXEC_LO], w.s[EXEC_HI] = ex & M32, ex >> 32
    go(w, f"s_{op}_wrexec_b64 s[8:9], s[4:5]")
    new = (~s0 & ex) if op == "and_not0" else (s0 & ~ex & M64)
    assert (int(w.s[EXEC_LO]), int(w.s[EXEC_HI])) == (new & M32, new >> 32)
    assert (int(w.s[8]), int(w.s[9])) == (new & M32, new >> 32)
    assert w.scc == int(new != 0)


def test_movrelsd_2_uses_two_m0_fields() -> None:
    w = wave()
    w.s[:40] = list(range(1000, 1040))
    w.s[M0] = (20 << 16) | 10 | 0xFC00_FC00      # bits outside 25:16 and 9:0 are ignored
    go(w, "s_movrelsd_2_b32 s5, s7")
    assert int(w.s[25]) == 1017                 # SGPR[5 + 20] = SGPR[7 + 10]
    assert int(w.s[5]) == 1005


def test_trap_stops_the_dispatch_and_halt_kill_endpgm_saved() -> None:
    from tinyhw.mocks.rdna3.salu import END

    w = wave()
    with pytest.raises(ShaderFault, match="s_trap 2"):
        go(w, "s_trap 2")
    assert go(w, "s_endpgm_saved") == END
    assert go(w, "s_sethalt 0") is None
    assert go(w, "s_setkill 0") is None
    with pytest.raises(ShaderFault, match="halted"):     # tinyhw/mocks/rdna3/rare.py: a halted wave stops it
        go(w, "s_sethalt 1")
    assert go(w, "s_setkill 1") == END                  # a killed wave ends


@pytest.mark.parametrize("op", ["ds_append", "ds_consume"])
def test_ds_append_consume_one_add_per_wave(op: str) -> None:
    w = wave()
    w.lds[16:20] = list(struct.pack("<I", 5))
    w.s[M0] = 12
    w.s[EXEC_LO] = 0b1011_0000_0000_0000_0000_0000_0110_0001     # 6 lanes
    w.v[3] = 0xDEAD
    go(w, f"{op} v3 offset:4")
    want = (5 + 6) if op == "ds_append" else (5 - 6) & M32
    assert struct.unpack("<I", bytes(w.lds[16:20]))[0] == want
    lanes = [i for i in range(32) if w.s[EXEC_LO] >> i & 1]
    assert all(int(w.v[3, i]) == (5 if i in lanes else 0xDEAD) for i in range(32))
    w.s[EXEC_LO] = 0
    go(w, f"{op} v3 offset:4")
    assert struct.unpack("<I", bytes(w.lds[16:20]))[0] == want      # no valid lane: nothing happens
    with pytest.raises(Unimplemented, match="GDS"):
        go(w, f"{op} v3 gds")


def test_ds_addtid_loads_and_stores_by_lane_id() -> None:
    w = wave()
    w.s[M0] = 0x1_0010                         # M0[15:0] = 16
    w.s[EXEC_LO] = 0xFFFF_FFFF
    w.v[2] = [0xA0000000 + i for i in range(32)]
    go(w, "ds_store_addtid_b32 v2 offset:8")
    assert [struct.unpack_from("<I", bytes(w.lds), 24 + 4 * i)[0] for i in range(32)] == \
        [0xA0000000 + i for i in range(32)]
    w.lds[200:256] = list(range(1, 57))
    w.s[M0] = 200
    w.s[EXEC_LO] = 0x8000_0005
    w.v[7] = 0x77
    go(w, "ds_load_addtid_b32 v7 offset:4")
    want = {i: struct.unpack_from("<I", bytes(w.lds), 204 + 4 * i)[0] if 204 + 4 * i + 4 <= 256 else 0
            for i in (0, 2, 31)}
    assert {i: int(w.v[7, i]) for i in (0, 2, 31)} == want and int(w.v[7, 1]) == 0x77
    assert want[31] == 0 and want[2] == 0x10_0F_0E_0D      # lane 31 is past the LDS: reads 0


def test_global_addtid_loads_and_stores() -> None:
    from tinyhw.mocks.rdna3 import FlatMemory

    mem = FlatMemory(0x10000, 0x1000)
    mem.alloc(16)
    buf = mem.alloc(bytes(range(256)))
    w = wave(mem=mem)
    w.s[10], w.s[11] = buf & M32, buf >> 32
    w.s[EXEC_LO] = 0x0000_000B
    go(w, "global_load_addtid_b32 v4, s[10:11] offset:8")
    for i in (0, 1, 3):
        assert int(w.v[4, i]) == struct.unpack_from("<I", bytes(range(256)), 8 + 4 * i)[0]
    w.v[5] = [0xC0DE0000 + i for i in range(32)]
    go(w, "global_store_addtid_b32 v5, s[10:11] offset:-4")
    got = mem.read(buf - 4, 16)
    assert struct.unpack("<4I", got) == (0xC0DE0000, 0xC0DE0001, struct.unpack_from("<I", bytes(range(256)), 4)[0],
                                         0xC0DE0003)


NEG_MAX = 0xFF7FFFFF


def test_mullit_lighting_rules() -> None:
    inf, nan = 0x7F800000, 0x7FC00000
    cases = [  # (S0, S1, S2)
        (f32(2.0), f32(3.0), f32(1.0)), (f32(2.0), f32(3.0), f32(0.0)), (f32(2.0), f32(3.0), 0x80000000),
        (f32(2.0), f32(3.0), f32(-1.0)), (f32(2.0), NEG_MAX, f32(1.0)), (f32(2.0), inf | 1 << 31, f32(1.0)),
        (f32(2.0), nan, f32(1.0)), (f32(2.0), f32(3.0), nan), (f32(1.5), f32(-0.25), f32(1e-30)),
        (0, inf, f32(1.0)), (f32(1e30), f32(1e30), f32(5.0)),
    ]
    w = wave()
    for k, col in ((1, 0), (2, 1), (3, 2)):
        w.v[k, :len(cases)] = [c[col] for c in cases]
    go(w, "v_mullit_f32 v4, v1, v2, v3")
    for i, (a, b, c) in enumerate(cases):
        fb, fc = from32(b), from32(c)
        lit = b == NEG_MAX or fb == float("-inf") or math.isnan(fb) or math.isnan(fc) or fc <= 0
        want = NEG_MAX if lit else f32(from32(a) * fb)
        if not lit and math.isnan(from32(want)):
            assert int(w.v[4, i]) & 0x7F800000 == 0x7F800000, i      # 0 * inf: a NaN
        else:
            assert int(w.v[4, i]) == want, (i, hex(int(w.v[4, i])), hex(want))


def test_cvt_pk_u8_packs_into_the_selected_byte() -> None:
    vals = [0.0, 1.0, 2.5, 3.5, 254.6, 255.4, 300.0, -3.0, float("nan"), float("inf"), 127.5, 0.49]
    w = wave()
    n = len(vals)
    w.v[1, :n] = [f32(x) for x in vals]
    w.v[2, :n] = [i % 4 + 4 * (i % 3) for i in range(n)]        # only S1[1:0] counts
    w.v[3, :n] = [0x11223344] * n
    go(w, "v_cvt_pk_u8_f32 v4, v1, v2, v3")
    for i, x in enumerate(vals):
        b = 0 if math.isnan(x) else max(0, min(255, round(x) if abs(x) != float("inf") else (255 if x > 0 else 0)))
        sh = 8 * (i % 4)
        assert int(w.v[4, i]) == (0x11223344 & ~(0xFF << sh) & M32) | b << sh, (i, x, hex(int(w.v[4, i])))


# ---- buffer format conversions: the expected values from the format's definition, struct and Python integers --------

IDENT = 4 | 5 << 3 | 6 << 6 | 7 << 9          # DST_SEL X, Y, Z, W


def _buf_wave(data: bytes, fmt: int, stride: int, dst_sel: int = IDENT):
    """A wave with a buffer of ``data`` and a structured V# (format ``fmt``) in s[8:11]."""
    from tinyhw.mocks.rdna3 import FlatMemory

    mem = FlatMemory(0x10000, 0x1000)
    buf = mem.alloc(data)
    w = wave(mem=mem)
    w.s[8], w.s[9] = buf & M32, (buf >> 32) & 0xFFFF | stride << 16
    w.s[10], w.s[11] = 1000, dst_sel | fmt << 12 | 1 << 28
    return w, mem, buf


def _round32(num: int, den: int) -> int:
    """The f32 bits of num / den rounded to nearest even (Fraction-exact)."""
    from fractions import Fraction

    from rdna3isa import round_float

    return round_float(Fraction(num, den), "f32")


def test_buffer_load_format_unorm_snorm_uint_sint_from_the_v_sharp() -> None:
    data = bytes([0, 1, 127, 128, 255, 200, 3, 4]) * 2
    w, _mem, _buf = _buf_wave(data, 42, 4)        # BUF_FMT_8_8_8_8_UNORM, 4-byte records
    w.s[EXEC_LO] = 0b11
    w.v[1, :2] = [0, 1]
    go(w, "buffer_load_format_xyzw v[4:7], v1, s[8:11], 0 idxen")
    for lane in range(2):
        for c in range(4):
            assert int(w.v[4 + c, lane]) == _round32(data[4 * lane + c], 255), (lane, c)
    w.s[11] = IDENT | 43 << 12 | 1 << 28            # 8_8_8_8_SNORM: -128 clamps to -1.0
    go(w, "buffer_load_format_xyzw v[4:7], v1, s[8:11], 0 idxen")
    for lane in range(2):
        for c in range(4):
            x = data[4 * lane + c] - (256 if data[4 * lane + c] > 127 else 0)
            want = f32(-1.0) if x == -128 else (_round32(x, 127) if x >= 0 else _round32(-x, 127) | 1 << 31)
            assert int(w.v[4 + c, lane]) == want, (lane, c, x)
    w.s[11] = IDENT | 47 << 12 | 1 << 28            # 8_8_8_8_SINT
    go(w, "buffer_load_format_xy v[4:5], v1, s[8:11], 0 idxen")
    got = [int(w.v[4, 0]), int(w.v[5, 0]), int(w.v[4, 1]), int(w.v[5, 1])]
    assert got == [0, 1, (255 - 256) & M32, (200 - 256) & M32]


def test_buffer_load_format_defaults_dst_sel_and_float16() -> None:
    halves = [1.5, -2.25, 65504.0, 2.0 ** -24]
    data = struct.pack("<4e", *halves)
    w, _mem, _buf = _buf_wave(data, 29, 8)        # BUF_FMT_16_16_FLOAT: two components, W defaults to 1.0
    w.s[EXEC_LO] = 1
    w.v[1] = 0
    go(w, "buffer_load_format_xyzw v[4:7], v1, s[8:11], 0 idxen")
    assert [int(w.v[r, 0]) for r in range(4, 8)] == [f32(1.5), f32(-2.25), 0, f32(1.0)]
    w.s[11] = (7 | 4 << 3 | 0 << 6 | 1 << 9) | 29 << 12 | 1 << 28      # DST_SEL W, X, 0, 1
    go(w, "buffer_load_format_xyzw v[4:7], v1, s[8:11], 0 idxen")
    assert [int(w.v[r, 0]) for r in range(4, 8)] == [f32(1.0), f32(1.5), 0, f32(1.0)]
    w.s[11] = IDENT | 11 << 12 | 1 << 28            # 16_UINT: the one of W is the integer 1
    go(w, "buffer_load_format_xyzw v[4:7], v1, s[8:11], 0 idxen offset:2")
    assert [int(w.v[r, 0]) for r in range(4, 8)] == [struct.unpack_from("<H", data, 2)[0], 0, 0, 1]


def test_tbuffer_format_from_the_instruction_and_d16_forms() -> None:
    data = struct.pack("<4H", 0, 65535, 32768, 12345)
    w, _mem, _buf = _buf_wave(data, 22, 8)        # the V# says 32_FLOAT: MTBUF's own format wins
    w.s[EXEC_LO] = 1
    w.v[1] = 0
    go(w, "tbuffer_load_format_xy v[4:5], v1, s[8:11], 0 format:[BUF_FMT_16_16_UNORM] idxen offset:4")
    assert [int(w.v[4, 0]), int(w.v[5, 0])] == [_round32(32768, 65535), _round32(12345, 65535)]
    w.v[6] = 0xAAAA5555
    go(w, "tbuffer_load_d16_format_x v6, v1, s[8:11], 0 format:[BUF_FMT_16_16_UNORM] idxen offset:2")
    want16 = struct.unpack("<H", struct.pack("<e", 1.0))[0]
    assert int(w.v[6, 0]) == 0xAAAA0000 | want16
    w.v[6] = 0x5555AAAA
    go(w, "tbuffer_load_d16_format_xyz v[6:7], v1, s[8:11], 0 format:[BUF_FMT_16_16_16_16_SINT] idxen")
    assert int(w.v[6, 0]) == 0xFFFF << 16 | 0 and int(w.v[7, 0]) & 0xFFFF == 32768


def test_buffer_store_format_32_and_16_float_and_refused_conversions() -> None:
    w, mem, buf = _buf_wave(bytes(32), 50, 8)     # BUF_FMT_32_32_FLOAT: only X and Y exist
    w.s[EXEC_LO] = 0b11
    w.v[1, :2] = [0, 1]
    w.v[4, :2] = [11, 21]
    w.v[5, :2] = [12, 22]
    w.v[6, :2] = [13, 23]
    go(w, "buffer_store_format_xyz v[4:6], v1, s[8:11], 0 idxen")
    assert struct.unpack("<6I", mem.read(buf, 24)) == (11, 12, 21, 22, 0, 0)
    w.s[11] = IDENT | 13 << 12 | 1 << 28            # 16_FLOAT: rounded to nearest even
    w.v[4, :2] = [f32(1.0 + 2.0 ** -11), f32(1.0 + 3 * 2.0 ** -11)]
    go(w, "buffer_store_format_x v4, v1, s[8:11], 0 idxen offset:16")
    assert struct.unpack("<2e", mem.read(buf + 16, 2) + mem.read(buf + 24, 2)) == (1.0, 1.0 + 2 * 2.0 ** -10)
    w.s[11] = IDENT | 0 << 12 | 1 << 28             # format 0 (INVALID) and an image-only format: refused
    with pytest.raises(Unimplemented, match="buffer data format 0"):
        go(w, "buffer_store_format_x v4, v1, s[8:11], 0 idxen")
    w.s[11] = IDENT | 66 << 12 | 1 << 28
    with pytest.raises(Unimplemented, match="buffer data format 66"):
        go(w, "buffer_load_format_x v4, v1, s[8:11], 0 idxen")


def _store_lanes(fmt: int, stride: int, text: str, regs: dict[int, list[int]], before: bytes = b"") -> bytes:
    """Run a format store with lane i writing record i (``regs``: VGPR -> per-lane values); the buffer's bytes."""
    lanes = len(next(iter(regs.values())))
    w, mem, buf = _buf_wave(before or bytes(stride * lanes), fmt, stride)
    w.s[EXEC_LO] = (1 << lanes) - 1
    w.v[1, :lanes] = list(range(lanes))
    for r, vals in regs.items():
        w.v[r, :lanes] = vals
    go(w, text)
    return mem.read(buf, stride * lanes)


def _rne(x: float) -> int:
    """Round half to even, as the D3D rules ask for float -> integer store conversions."""
    f = math.floor(x)
    return f + 1 if x - f > 0.5 or (x - f == 0.5 and f % 2) else f


def test_buffer_store_format_conversions_saturate_and_round() -> None:
    """Stores to the normalized, scaled and integer formats (D3D's data conversion rules, as image stores use them):
    expected bytes from the rules written here with Python integers."""
    xs = [0.5, 1.5, -1.0, float("nan"), 0.25, 63.75 / 255]
    got = _store_lanes(1, 1, "buffer_store_format_x v4, v1, s[8:11], 0 idxen", {4: [f32(x) for x in xs]})   # 8_UNORM
    want = [0 if math.isnan(x) else _rne(min(max(x, 0.0), 1.0) * 255) for x in xs]
    assert list(got) == want == [128, 255, 0, 0, 64, 64]
    snorm = [1.0, -1.0, -2.0, 0.5]
    got = _store_lanes(43, 4, "buffer_store_format_xyzw v[4:7], v1, s[8:11], 0 idxen",     # 8_8_8_8_SNORM, one lane
                       {4 + c: [f32(x)] for c, x in enumerate(snorm)})
    assert list(got) == [_rne(min(max(x, -1.0), 1.0) * 127) & 0xFF for x in snorm] == [127, 0x81, 0x81, 64]
    ints = [0x12345, (-70000) & M32, 5, (-5) & M32]
    got = _store_lanes(12, 2, "buffer_store_format_x v4, v1, s[8:11], 0 idxen", {4: ints})  # 16_SINT saturates
    assert struct.unpack("<4h", got) == (32767, -32768, 5, -5)
    got = _store_lanes(11, 2, "buffer_store_format_x v4, v1, s[8:11], 0 idxen", {4: [70000, 7, 65535, 0]})
    assert struct.unpack("<4H", got) == (65535, 7, 65535, 0)                                 # 16_UINT
    scaled = [2.5, 3.5, 300.0, -1.0]
    got = _store_lanes(3, 1, "buffer_store_format_x v4, v1, s[8:11], 0 idxen", {4: [f32(x) for x in scaled]})
    assert list(got) == [min(max(_rne(x), 0), 255) for x in scaled] == [2, 4, 255, 0]       # 8_USCALED


def test_buffer_format_packed_formats_load_and_store() -> None:
    """2_10_10_10 (X bits 9:0 .. W 31:30) and 10_11_11_FLOAT (X 10:0, Y 21:11: 11-bit floats, Z 31:22: 10-bit, the
    f16 exponent, no sign): a store of fewer components keeps the others (read, replace, write back)."""
    got = _store_lanes(36, 4, "buffer_store_format_xy v[4:5], v1, s[8:11], 0 idxen",        # 2_10_10_10_UNORM
                       {4: [f32(0.0), f32(0.5)], 5: [f32(1.0), f32(1 / 3)]}, before=b"\xff" * 8)
    word = struct.unpack("<2I", got)
    assert word == (0xFFF00000 | 1023 << 10 | 0, 0xFFF00000 | _rne(1023 / 3) << 10 | _rne(511.5))
    one11, two11, half10 = 15 << 6, 16 << 6, 14 << 5           # 1.0, 2.0 as 11-bit floats; 0.5 as a 10-bit float
    packed = one11 | two11 << 11 | half10 << 22
    w, _mem, _buf = _buf_wave(struct.pack("<I", packed), 30, 4)                              # 10_11_11_FLOAT
    w.s[EXEC_LO] = 1
    w.v[1] = 0
    go(w, "buffer_load_format_xyzw v[4:7], v1, s[8:11], 0 idxen")
    assert [int(w.v[r, 0]) for r in range(4, 8)] == [f32(1.0), f32(2.0), f32(0.5), f32(1.0)]
    got = _store_lanes(30, 4, "tbuffer_store_format_xyz v[4:6], v1, s[8:11], 0 format:[BUF_FMT_10_11_11_FLOAT] idxen",
                       {4: [f32(1.0)], 5: [f32(2.0)], 6: [f32(0.5)]})
    assert struct.unpack("<I", got)[0] == packed
