"""Unit tests of the RDNA3 vector/scalar operations added for the corpus (issue 23 item 7), from the ISA's
semantics: correctly rounded transcendental and square-root results (the ISA allows 1 ULP), IEEE special
values, the class compare's bit order, 24-bit multiplies, 3-operand min/max/median, bit-field extracts."""

from __future__ import annotations

import numpy as np

from tinyhw.mocks.rdna3 import salu, valu

U32, F32 = np.uint32, np.float32


def _fa(*xs: float) -> np.ndarray:
    return np.array(list(xs) + [1.0] * (32 - len(xs)), dtype=F32).view(U32)


def _op(name: str):
    return valu.OPS[name][2]


def test_transcendentals_correctly_rounded_and_ieee_specials() -> None:
    r = _op("v_rcp_f32")(_fa(3.0, 0.0, -0.0, np.inf)).view(F32)
    assert r[0] == F32(1 / 3) and r[1] == np.inf and r[2] == -np.inf and r[3] == 0.0
    s = _op("v_sqrt_f32")(_fa(2.0, -1.0, 0.0)).view(F32)
    assert s[0] == F32(np.sqrt(2.0)) and np.isnan(s[1]) and s[2] == 0.0
    e = _op("v_exp_f32")(_fa(10.0, -np.inf, 0.5, 200.0)).view(F32)
    assert e[0] == 1024.0 and e[1] == 0.0 and e[2] == F32(np.sqrt(2.0)) and e[3] == np.inf
    lg = _op("v_log_f32")(_fa(8.0, 0.0, -1.0, 3.0)).view(F32)
    assert lg[0] == 3.0 and lg[1] == -np.inf and np.isnan(lg[2]) and lg[3] == F32(np.log2(3.0))
    q = _op("v_rsq_f32")(_fa(4.0)).view(F32)
    assert q[0] == 0.5
    assert _op("v_ldexp_f32")(_fa(1.5), np.full(32, 3, U32)).view(F32)[0] == 12.0


def test_class_bits_in_isa_order() -> None:
    x = np.array([np.nan, -np.inf, -1.0, -1e-40, -0.0, 0.0, 1e-40, 1.0, np.inf] + [1.0] * 23, dtype=F32)
    assert list(valu._fclass(x)[:9]) == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    snan = np.array([0x7F800001] * 32, dtype=U32).view(F32)
    assert valu._fclass(snan)[0] == 0


def test_integer_three_operand_and_24_bit() -> None:
    a, b, c = (np.full(32, v, U32) for v in (0xFFFFFF + 2, 3, 0xFFFFFFFF))
    assert _op("v_mad_u32_u24")(a, b, c)[0] == (1 * 3 + 0xFFFFFFFF) & 0xFFFFFFFF
    neg = np.full(32, 0xFFFFFF, U32)                  # -1 in 24 bits
    assert _op("v_mul_i32_i24")(neg, b)[0] == U32(0xFFFFFFFD)
    assert _op("v_mul_hi_i32")(np.full(32, 0xFFFFFFFF, U32), b)[0] == U32(0xFFFFFFFF)   # -1*3 = -3: high -1
    m = np.array([5] * 32, U32), np.array([1] * 32, U32), np.array([9] * 32, U32)
    assert _op("v_med3_u32")(*m)[0] == 5 and _op("v_max3_i32")(*m)[0] == 9 and _op("v_min3_u32")(*m)[0] == 1
    assert _op("v_xad_u32")(np.full(32, 6, U32), np.full(32, 3, U32), np.full(32, 1, U32))[0] == 6
    al = _op("v_alignbit_b32")(np.full(32, 0x12345678, U32), np.full(32, 0x9ABCDEF0, U32), np.full(32, 8, U32))
    assert al[0] == 0x789ABCDE


def test_scalar_mul_hi_and_bfe() -> None:
    class W:
        scc = 0
    w = W()
    assert salu.SOP2["s_mul_hi_u32"](w, 0xFFFFFFFF, 0xFFFFFFFF) & 0xFFFFFFFF == 0xFFFFFFFE
    assert salu.SOP2["s_mul_hi_i32"](w, 0xFFFFFFFF, 3) & 0xFFFFFFFF == 0xFFFFFFFF
    assert salu.SOP2["s_bfe_u32"](w, 0xABCD, 4 | (8 << 16)) == 0xBC and w.scc == 1
    assert salu.SOP2["s_bfe_i32"](w, 0xF0, 4 | (4 << 16)) & 0xFFFFFFFF == 0xFFFFFFFF


def test_mad_u64_u32_and_i64_i32_with_carry() -> None:
    from tinyhw.formats.amdisa import decode_at
    from tinyhw.mocks.rdna3.state import Wave

    # v_mad_u64_u32 v[2:3], s4, v0, v1, v[4:5]: VOP3SD op 766, sdst s4 (bits 14:8), src0 v0, src1 v1, src2 v[4:5]
    for op, name in ((766, "v_mad_u64_u32"), (767, "v_mad_i64_i32")):
        w0 = (0b110101 << 26) | (op << 16) | (4 << 8) | 2
        w1 = 256 | (257 << 9) | (260 << 18)
        inst = decode_at(w0.to_bytes(4, "little") + w1.to_bytes(4, "little"), 0, "gfx11")
        assert inst.mnemonic == name
        fn = valu.compile_valu(inst, AssertionError)
        w = Wave(16, np.zeros(0, U32), None, (0, 0, 0), 0)
        w.s[126] = 0xFFFFFFFF                                           # EXEC_LO: every lane
        w.v[0, :2], w.v[1, :2] = 0xFFFFFFFF, 0xFFFFFFFF
        w.v[4, :2], w.v[5, :2] = (2, 0xFFFFFFFF), (0, 0xFFFFFFFF)     # lane 0: +2, lane 1: 2^64 - 1 (i.e. -1)
        fn(w)
        r = w.v[2].astype(np.uint64) | (w.v[3].astype(np.uint64) << np.uint64(32))
        if name == "v_mad_u64_u32":
            assert int(r[0]) == 0xFFFFFFFE00000001 + 2 and int(r[1]) == 0xFFFFFFFE00000000  # (2^32-1)^2 - 1 wraps
            assert w.s[4] & 3 == 0b10
        else:
            assert int(r[0]) == 3 and int(r[1]) == 0 and w.s[4] & 3 == 0     # (-1)(-1) + 2, (-1)(-1) - 1
