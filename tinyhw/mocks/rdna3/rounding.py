"""MODE round modes other than nearest even, for the VALU operations whose result they change.

MODE.FP_ROUND (hwreg MODE bits 3:0, set from RSRC1.FLOAT_MODE, ``s_round_mode`` and ``s_setreg``) holds two 2-bit
modes: bits 1:0 for f32 results, bits 3:2 for f16 and f64 results; the values are LLVM SIDefines.h's
FP_ROUND_ROUND_TO_NEAREST (0), _TO_INF (1, toward +infinity), _TO_NEGINF (2) and _TO_ZERO (3). A conversion uses
the mode of its destination format.

Under a directed mode the core computes each lane's exact result (``fractions.Fraction``: sums, products and fused
multiply-adds of the operands, or the converted value) and rounds it once in that direction
(:func:`round_bits`), subnormals and overflow included (toward zero, or away from the overflowing side's infinity,
the largest finite value). Lanes with an infinite or NaN operand keep the nearest-even path's result (rounding
cannot change it), and an exact zero result keeps its IEEE sign: a product's is the XOR of the signs; a sum of two
addends of unlike sign (or a non-zero sum that cancels) is +0, except -0 when rounding toward -infinity.

:data:`ROUND_FREE` lists the operations whose result no round mode changes (exact by definition: min/max, moves,
rounding to integral values, exact widening converts, float-to-int converts, which truncate or round as their names
say; compares never reach this module); :data:`DIRECTED` the ones this module rounds. Any other
float operation under a directed mode stops the dispatch as not modelled.
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction

import numpy as np

__all__ = ["DIRECTED", "ROUND_FREE", "directed", "mode_of", "round_bits"]

RNE, UP, DOWN, ZERO = 0, 1, 2, 3
#: (mantissa bits, exponent bits) of each float kind the VALU tables use
FORMATS = {"f": (23, 8), "h": (10, 5), "d": (52, 11)}


def round_bits(x: Fraction, kind: str, mode: int) -> int:
    """The bits of the non-zero rational ``x`` rounded to ``kind`` ("f", "h", "d") in ``mode`` (RNE, UP, DOWN, ZERO)."""
    mbits, ebits = FORMATS[kind]
    bias = (1 << (ebits - 1)) - 1
    sign = 1 if x < 0 else 0
    a = -x if sign else x
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, 1 - bias)                                 # subnormals share the smallest exponent's quantum
    q = a / Fraction(2) ** (e - mbits)
    n = q.numerator // q.denominator
    rem = q - n
    away = (mode == UP and not sign) or (mode == DOWN and sign)
    if rem and (away or (mode == RNE and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n & 1)))):
        n += 1
    if n >> (mbits + 1):                                 # carried into the next binade
        n >>= 1
        e += 1
    top = sign << (mbits + ebits)
    if e > bias:                                         # overflow: infinity, or the largest finite value
        to_inf = mode == RNE or away
        return top | (((1 << ebits) - 1) << mbits if to_inf else ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1))
    if n >> mbits:
        return top | (e + bias) << mbits | (n & ((1 << mbits) - 1))
    return top | n                                       # subnormal (or a zero after rounding down)


def _value(bits: int, kind: str) -> Fraction | None:
    """The exact value of float bits, None for an infinity or NaN."""
    mbits, ebits = FORMATS[kind]
    bias = (1 << (ebits - 1)) - 1
    e = bits >> mbits & ((1 << ebits) - 1)
    if e == (1 << ebits) - 1:
        return None
    m = bits & ((1 << mbits) - 1)
    v = Fraction(m, 1 << mbits) * Fraction(2) ** (1 - bias) if e == 0 else \
        (1 + Fraction(m, 1 << mbits)) * Fraction(2) ** (e - bias)
    return -v if bits >> (mbits + ebits) & 1 else v


# name -> (how the exact result is formed from the operands, which operands are addends for the zero-sign rule)
_Op = tuple[Callable[..., Fraction], str]
_SUM: _Op = (lambda a, b: a + b, "sum")
DIRECTED: dict[str, _Op] = {
    **{f"v_add_{t}": _SUM for t in ("f16", "f32", "f64")},
    **{f"v_sub_{t}": (lambda a, b: a - b, "sub") for t in ("f16", "f32", "f64")},
    **{f"v_subrev_{t}": (lambda a, b: b - a, "subrev") for t in ("f16", "f32", "f64")},
    **{f"v_mul_{t}": (lambda a, b: a * b, "mul") for t in ("f16", "f32", "f64")},
    **{f"v_{op}_{t}": (lambda a, b, c: a * b + c, "fma") for op in ("fma", "fmac", "fmamk", "fmaak")
       for t in ("f16", "f32", "f64")},
    **{n: (lambda a: a, "cvt") for n in ("v_cvt_f16_f32", "v_cvt_f32_f64", "v_cvt_f32_i32", "v_cvt_f32_u32",
                                        "v_cvt_f16_i16", "v_cvt_f16_u16")},
}
#: the integer source types of the conversions (their kinds say only the width)
_INT_SRC = {"v_cvt_f32_i32": (32, True), "v_cvt_f32_u32": (32, False), "v_cvt_f16_i16": (16, True),
            "v_cvt_f16_u16": (16, False)}

ROUND_FREE = frozenset({
    *(f"v_{op}_{t}" for op in ("max", "min", "max3", "min3", "med3", "maxmin", "minmax", "floor", "ceil", "trunc",
                               "rndne", "fract", "frexp_mant") for t in ("f16", "f32", "f64")),
    "v_cvt_f32_f16", "v_cvt_f64_f32", "v_cvt_f64_i32", "v_cvt_f64_u32", "v_cvt_i32_f32", "v_cvt_u32_f32",
    "v_cvt_i32_f64", "v_cvt_u32_f64", "v_cvt_i16_f16", "v_cvt_u16_f16", "v_cvt_floor_i32_f32",
    "v_cvt_nearest_i32_f32", "v_cvt_f32_ubyte0", "v_cvt_f32_ubyte1", "v_cvt_f32_ubyte2", "v_cvt_f32_ubyte3",
    "v_cvt_off_f32_i4", "v_frexp_exp_i32_f32", "v_frexp_exp_i32_f64", "v_frexp_exp_i16_f16", "v_cvt_pk_rtz_f16_f32",
    "v_mov_b16", "v_cndmask_b16",
})


def _sign(bits: int, kind: str) -> int:
    mbits, ebits = FORMATS[kind]
    return bits >> (mbits + ebits) & 1


def _zero_sign(how: str, signs: list[int], mode: int) -> int | None:
    """The sign of an exact zero sum (None: keep the nearest-even result's, as for products and conversions)."""
    if how == "sub":
        signs = [signs[0], signs[1] ^ 1]
    elif how == "subrev":
        signs = [signs[1], signs[0] ^ 1]
    elif how == "fma":
        signs = [signs[0] ^ signs[1], signs[2]]
    elif how != "sum":
        return None
    if signs[0] == signs[1]:                 # only when both addends are zeros of one sign: that sign
        return None
    return 1 if mode == DOWN else 0


def directed(name: str, kinds: str, dk: str, args: tuple[np.ndarray, ...], nearest: np.ndarray, mode: int
             ) -> np.ndarray:
    """``name``'s result under round ``mode`` (UP, DOWN or ZERO) from its operand bits ``args`` (kinds ``kinds``) and
    its nearest-even result ``nearest`` (destination kind ``dk``): each lane with finite operands rounded from its
    exact value, the rest as ``nearest``."""
    make, how = DIRECTED[name]
    out = np.array(nearest, copy=True)
    flat = out.reshape(-1)
    ops = [np.broadcast_to(np.asarray(a), out.shape).reshape(-1) for a in args]
    isint = _INT_SRC.get(name)
    for lane in range(flat.size):
        raw = [int(o[lane]) for o in ops]
        if isint:
            width, signed = isint
            x = raw[0] & ((1 << width) - 1)
            vals: list[Fraction | None] = [Fraction(x - (1 << width) if signed and x >> (width - 1) else x)]
        else:
            vals = [_value(r, k) for r, k in zip(raw, kinds, strict=True)]
        if any(v is None for v in vals):
            continue
        exact = make(*vals)
        if exact == 0:                       # the nearest-even result's zero, unless the sign rule says otherwise
            s = None if isint else _zero_sign(how, [_sign(r, k) for r, k in zip(raw, kinds, strict=True)], mode)
            if s is not None:
                mbits, ebits = FORMATS[dk]
                flat[lane] = s << (mbits + ebits)
            continue
        flat[lane] = round_bits(exact, dk, mode)
    return out


def mode_of(mode_reg: int, dk: str) -> int:
    """The FP_ROUND mode that applies to a result of kind ``dk`` (f32: bits 1:0; f16/f64: bits 3:2)."""
    return mode_reg & 3 if dk == "f" else mode_reg >> 2 & 3

