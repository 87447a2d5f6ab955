"""Helpers for single-instruction tests of the emulated RDNA3 shader core.

Instructions are encoded from the field layouts of specs/amd-compute.md §5.2 with opcode numbers taken from the
generated table (itself compared with llvm-mc-19), decoded by tinyhw's decoder, compiled by the core and run on
one wave. Expected values in the tests are computed independently: Python integers, ``struct`` and
``fractions.Fraction`` with the correct-rounding reference :func:`round_float` below, never the core.
"""

from __future__ import annotations

import struct
from fractions import Fraction

import numpy as np
from rdna3asm import asm  # re-exported: the tests take asm and go from here

from tinyhw.formats.amdisa import decode_at
from tinyhw.formats.rdna3_ops import OPS
from tinyhw.mocks.rdna3.dispatch import _compile
from tinyhw.mocks.rdna3.state import MODE_DEFAULT, Wave

OPC = {m: key for key, (m, _t) in OPS.items()}
PC = 0x1000


def v(n: int) -> int:
    """The 9-bit source operand value naming VGPR ``n``."""
    return 256 + n


def vop1(m: str, vdst: int, src0: int, lit: int | None = None) -> list[int]:
    """A VOP1 word (+ literal)."""
    enc, op = OPC[m]
    assert enc == "VOP1"
    return [0x7E000000 | vdst << 17 | op << 9 | src0] + ([lit] if lit is not None else [])


def vop2(m: str, vdst: int, src0: int, vsrc1: int, lit: int | None = None) -> list[int]:
    """A VOP2 word (+ literal); ``vsrc1`` is a VGPR number."""
    enc, op = OPC[m]
    assert enc == "VOP2"
    return [op << 25 | vdst << 17 | vsrc1 << 9 | src0] + ([lit] if lit is not None else [])


def vopc(m: str, src0: int, vsrc1: int) -> list[int]:
    """A VOPC word."""
    enc, op = OPC[m]
    assert enc == "VOPC"
    return [0x7C000000 | op << 17 | vsrc1 << 9 | src0]


def vop3(m: str, vdst: int, src0: int, src1: int = 128, src2: int = 128, *, abs_: int = 0, neg: int = 0,
         opsel: int = 0, clamp: int = 0, omod: int = 0, lit: int | None = None) -> list[int]:
    """A VOP3 (or VOP3SD, with ``abs_`` as the SDST field) instruction; unused sources default to the constant 0."""
    enc, op = OPC[m]
    assert enc == "VOP3", (m, enc)
    w0 = 0xD4000000 | op << 16 | clamp << 15 | opsel << 11 | abs_ << 8 | vdst
    w1 = neg << 29 | omod << 27 | src2 << 18 | src1 << 9 | src0
    return [w0, w1] + ([lit] if lit is not None else [])


def sop1(m: str, sdst: int, ssrc0: int, lit: int | None = None) -> list[int]:
    """A SOP1 word."""
    enc, op = OPC[m]
    assert enc == "SOP1"
    return [0xBE800000 | sdst << 16 | op << 8 | ssrc0] + ([lit] if lit is not None else [])


def sop2(m: str, sdst: int, ssrc0: int, ssrc1: int, lit: int | None = None) -> list[int]:
    """A SOP2 word."""
    enc, op = OPC[m]
    assert enc == "SOP2"
    return [0x80000000 | op << 23 | sdst << 16 | ssrc1 << 8 | ssrc0] + ([lit] if lit is not None else [])


def sopc(m: str, ssrc0: int, ssrc1: int) -> list[int]:
    """A SOPC word."""
    enc, op = OPC[m]
    assert enc == "SOPC"
    return [0xBF000000 | op << 16 | ssrc1 << 8 | ssrc0]


def sopk(m: str, sdst: int, simm16: int, lit: int | None = None) -> list[int]:
    """A SOPK word."""
    enc, op = OPC[m]
    assert enc == "SOPK"
    return [0xB0000000 | op << 23 | sdst << 16 | simm16 & 0xFFFF] + ([lit] if lit is not None else [])


def sopp(m: str, simm16: int = 0) -> list[int]:
    """A SOPP word."""
    enc, op = OPC[m]
    assert enc == "SOPP"
    return [0xBF800000 | op << 16 | simm16 & 0xFFFF]


def wave(mode: int = MODE_DEFAULT, mem: object = None) -> Wave:
    """A fresh wave: 64 VGPRs, every lane active, the given MODE."""
    w = Wave(64, np.zeros(256, np.uint8), mem, (0, 0, 0), 0)
    w.s[126] = 0xFFFFFFFF
    w.mode = mode
    return w


def run(words: list[int], w: Wave) -> object:
    """Decode, compile and execute one instruction on ``w``; returns what the compiled function returned."""
    raw = struct.pack(f"<{len(words)}I", *words)
    inst = decode_at(raw + bytes(16), 0, "gfx11")
    assert inst.size == len(raw), (inst.text, inst.size)
    fn = _compile(inst, raw, PC, True, {})
    with np.errstate(all="ignore"):         # as run_dispatch runs every instruction
        return fn(w)


def f32(x: float) -> int:
    """The bits of ``x`` rounded to f32 (host round-to-nearest-even through struct; infinity past the range)."""
    try:
        return struct.unpack("<I", struct.pack("<f", x))[0]
    except OverflowError:
        return 0x7F800000 | (0x80000000 if x < 0 else 0)


def from32(u: int) -> float:
    """The value of f32 bits."""
    return struct.unpack("<f", struct.pack("<I", u & 0xFFFFFFFF))[0]


def f16(x: float) -> int:
    """The bits of ``x`` rounded to f16 (struct 'e': correctly rounded from a double; infinity past the range)."""
    try:
        return struct.unpack("<H", struct.pack("<e", x))[0]
    except OverflowError:
        return 0x7C00 | (0x8000 if x < 0 else 0)


def from16(u: int) -> float:
    """The value of f16 bits."""
    return struct.unpack("<e", struct.pack("<H", u & 0xFFFF))[0]


def f64(x: float) -> int:
    """The bits of a double."""
    return struct.unpack("<Q", struct.pack("<d", x))[0]


def from64(u: int) -> float:
    """The value of f64 bits."""
    return struct.unpack("<d", struct.pack("<Q", u))[0]


FORMATS = {"f16": (10, 5), "f32": (23, 8), "f64": (52, 11)}


def round_float(x: Fraction, fmt: str) -> int:
    """The bits of the exact rational ``x`` rounded to nearest even in ``fmt`` (f16/f32/f64), with subnormals and
    overflow to infinity; a zero result gets the sign of ``x`` (+0 for exactly 0)."""
    mbits, ebits = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    sign = 1 if x < 0 else 0
    a = -x if sign else x
    if a == 0:
        return 0
    e = a.numerator.bit_length() - a.denominator.bit_length()
    while Fraction(2) ** e > a:
        e -= 1
    while Fraction(2) ** (e + 1) <= a:
        e += 1
    e = max(e, 1 - bias)                        # subnormals share the minimum exponent's quantum
    q = a / Fraction(2) ** (e - mbits)          # the significand in units of the last place
    n = q.numerator // q.denominator
    rem = q - n
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1):
        n += 1
    if n >> (mbits + 1):                        # carried into the next binade
        n >>= 1
        e += 1
    if e > bias:
        return sign << (mbits + ebits) | ((1 << ebits) - 1) << mbits          # overflow: infinity
    if n >> mbits:                              # normal
        return sign << (mbits + ebits) | (e + bias) << mbits | (n & ((1 << mbits) - 1))
    return sign << (mbits + ebits) | n          # subnormal (or zero after rounding)


def exact(bits: int, fmt: str) -> Fraction:
    """The exact value of finite float bits of ``fmt``."""
    mbits, ebits = FORMATS[fmt]
    bias = (1 << (ebits - 1)) - 1
    sign = bits >> (mbits + ebits) & 1
    e = bits >> mbits & ((1 << ebits) - 1)
    m = bits & ((1 << mbits) - 1)
    val = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0 else \
        (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias)
    return -val if sign else val


def go(w: Wave, text: str) -> object:
    """Assemble ``text`` with llvm-mc-19 and run it on ``w``."""
    return run(asm(text), w)
