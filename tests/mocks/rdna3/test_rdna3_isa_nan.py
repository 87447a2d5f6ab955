"""The NaN an invalid operation produces, pinned bit for bit.

The RDNA3 ISA reference guide writes one literal default NaN: V_DIV_FIXUP_F32's pseudocode gives
``32'F(0xffc00000)`` for 0/0 and inf/inf (V_DIV_FIXUP_F16 and _F64 likewise, 0xfe00 and 0xfff8000000000000). The core
gives that same value (the negative quiet NaN with an empty payload) for every invalid operation whose inputs are not
NaN: 0 * inf, inf - inf, sqrt and log of a negative number, fract of an infinity, and the fused and packed forms. Its
float arithmetic runs on the host's IEEE unit, whose default NaN on x86-64 (SSE's "QNaN floating-point indefinite")
is that value too; :func:`test_the_host_makes_the_guides_default_nan` says so plainly on a host where it is not, rather
than letting every NaN result differ in its sign bit. A NaN input is returned quieted (its payload kept).

Instructions are assembled by llvm-mc-19 and run on one wave (``rdna3isa.go``); the expected bits are written here.
"""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from rdna3isa import go, wave

pytestmark = pytest.mark.skipif(not shutil.which("llvm-mc-19"), reason="llvm-mc-19 is not installed")

NAN32, NAN16, NAN64 = 0xFFC00000, 0xFE00, 0xFFF8000000000000      # the guide's V_DIV_FIXUP literal, per width
INF32, NINF32, M1_32 = 0x7F800000, 0xFF800000, 0xBF800000
INF16, NINF16, M1_16 = 0x7C00, 0xFC00, 0xBC00


def test_the_host_makes_the_guides_default_nan() -> None:
    """The core's float results come from the host's IEEE arithmetic: its default NaN must be the guide's."""
    with np.errstate(invalid="ignore"):
        got = tuple(int((np.zeros(4, t) * np.full(4, np.inf, t)).view(u)[0])
                    for t, u in ((np.float32, np.uint32), (np.float64, np.uint64), (np.float16, np.uint16)))
    assert got == (NAN32, NAN64, NAN16), (
        f"this host's default NaN is {got[0]:#x}/{got[1]:#x}/{got[2]:#x}, not the RDNA3 guide's 0xffc00000: the "
        "shader core's NaN results would differ from hardware in their sign bit here")


CASES_32 = [  # (instruction, v1, v2): each an invalid operation on non-NaN inputs
    ("v_mul_f32_e32 v3, v1, v2", 0, INF32), ("v_add_f32_e32 v3, v1, v2", INF32, NINF32),
    ("v_sub_f32_e32 v3, v1, v2", INF32, INF32), ("v_subrev_f32_e32 v3, v1, v2", NINF32, NINF32),
    ("v_fma_f32 v3, v1, v2, 1.0", 0, INF32), ("v_fma_f32 v3, v1, 1.0, v2", INF32, NINF32),
    ("v_fmac_f32_e32 v3, v1, v2", 0, INF32), ("v_sqrt_f32_e32 v3, v1", M1_32, 0),
    ("v_rsq_f32_e32 v3, v1", M1_32, 0), ("v_log_f32_e32 v3, v1", M1_32, 0), ("v_fract_f32_e32 v3, v1", INF32, 0),
    ("v_sin_f32_e32 v3, v1", INF32, 0), ("v_cos_f32_e32 v3, v1", NINF32, 0),
    ("v_dual_mul_f32 v3, v1, v2 :: v_dual_mov_b32 v4, 0", 0, INF32),
]
CASES_16 = [
    ("v_mul_f16_e32 v3, v1, v2", 0, INF16), ("v_add_f16_e32 v3, v1, v2", INF16, NINF16),
    ("v_fma_f16 v3, v1, v2, 1.0", 0, INF16), ("v_sqrt_f16_e32 v3, v1", M1_16, 0),
]


@pytest.mark.parametrize(("text", "a", "b"), CASES_32, ids=[c[0].split()[0] for c in CASES_32])
def test_invalid_f32_operations_give_the_default_nan(text: str, a: int, b: int) -> None:
    w = wave()
    w.v[1, 0], w.v[2, 0], w.v[3, 0] = a, b, 0
    go(w, text)
    assert int(w.v[3, 0]) == NAN32, hex(int(w.v[3, 0]))


@pytest.mark.parametrize(("text", "a", "b"), CASES_16, ids=[c[0].split()[0] for c in CASES_16])
def test_invalid_f16_operations_give_the_default_nan_and_keep_the_high_half(text: str, a: int, b: int) -> None:
    w = wave()
    w.v[1, 0], w.v[2, 0], w.v[3, 0] = a, b, 0x12340000
    go(w, text)
    assert int(w.v[3, 0]) == 0x12340000 | NAN16, hex(int(w.v[3, 0]))


def test_packed_f16_lanes_each_give_the_default_nan() -> None:
    w = wave()
    w.v[1, 0], w.v[2, 0] = INF16 << 16, INF16           # (lo 0 * inf, hi inf * 0)
    go(w, "v_pk_mul_f16 v3, v1, v2")
    assert int(w.v[3, 0]) == NAN16 << 16 | NAN16


@pytest.mark.parametrize("text", ["v_mul_f64 v[4:5], v[0:1], v[2:3]", "v_add_f64 v[4:5], v[0:1], v[2:3]",
                                  "v_fma_f64 v[4:5], v[0:1], v[2:3], 1.0", "v_sqrt_f64_e32 v[4:5], v[0:1]"])
def test_invalid_f64_operations_give_the_default_nan(text: str) -> None:
    w = wave()
    inf, ninf = 0x7FF0000000000000, 0xFFF0000000000000
    a, b = {"v_mul": (0, inf), "v_add": (inf, ninf), "v_fma": (inf, 0), "v_sqr": (0xBFF0000000000000, 0)}[text[:5]]
    w.v[0, 0], w.v[1, 0], w.v[2, 0], w.v[3, 0] = a & 0xFFFFFFFF, a >> 32, b & 0xFFFFFFFF, b >> 32
    go(w, text)
    assert int(w.v[5, 0]) << 32 | int(w.v[4, 0]) == NAN64


def test_a_nan_input_comes_back_quieted_with_its_payload() -> None:
    w = wave()
    w.v[1, :3] = [0x7F800001, 0xFFA00005, 0x7FC00007]    # signalling, negative signalling, quiet
    w.v[2, :3] = 0x3F800000
    go(w, "v_mul_f32_e32 v3, v1, v2")
    assert [int(x) for x in w.v[3, :3]] == [0x7FC00001, 0xFFE00005, 0x7FC00007]
