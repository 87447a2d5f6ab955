"""Number conversions of the image formats past the plain UNORM/SNORM/integer/float ones (used by
:mod:`tinyhw.mocks.rdna3.image`): sRGB decode and encode, the shared-exponent 5_9_9_9 float, f32 to the unsigned
11- and 10-bit floats, f32 to the scaled integers. All work on numpy arrays, one value per lane.

- sRGB (the 8-bit ``*_SRGB`` formats): the sRGB curve as Direct3D's "Data Conversion Rules" (SRGB -> FLOAT,
  FLOAT -> SRGB) and Vulkan's "sRGB EOTF" give it, with c = the 8-bit value / 255: linear = c / 12.92 for
  c <= 0.04045, else ((c + 0.055) / 1.055) ^ 2.4; the store's inverse is 12.92 L for L <= 0.0031308, else
  1.055 L ^ (1 / 2.4) - 0.055, then to 8 bits as FLOAT -> UNORM (NaN 0, saturated to [0, 1], scaled by 255 and
  rounded to nearest). Both are evaluated in float64 and then rounded (to f32/f16 on loads, to the integer on
  stores): the test checks that this gives the f32 (f16) nearest the exact value for all 256 codes and the right
  code on both sides of every exact rounding boundary. Hardware may use a table or an approximation (D3D allows
  a tolerance); not checked on hardware.
- 5_9_9_9_FLOAT (R9G9B9E5): X bits 8:0, Y 17:9, Z 26:18 are 9-bit mantissas without a hidden bit, E bits 31:27 the
  shared exponent with bias 15: value = mantissa x 2^(E - 15 - 9) (exact in f32 and f16). The store encodes as
  Vulkan's "Shared Exponent Conversion" (and OpenGL's EXT_texture_shared_exponent) describes: each component
  clamped to [0, 511/512 x 2^16] (NaN 0: a choice), the shared exponent max(-16, floor(log2(max))) + 16, bumped
  by one when the largest mantissa rounds to 512, mantissas floor(c / 2^(E - 24) + 1/2). Not checked on hardware.
- 11- and 10-bit unsigned floats (10_11_11 / 11_11_10 FLOAT): 5-bit exponent with bias 15 and 6 or 5 mantissa
  bits, as f16 without a sign; the store rounds the f32 value as ``rounding`` says ("even": to nearest, ties to
  even, a finite value past the largest rounding to infinity as IEEE; "zero": toward zero, as D3D's "Round-to-zero
  is used during conversion to another float format", a finite value never becoming infinity); negative values
  and -0 become 0 (D3D's float11/10 rules have no sign; a choice for -0 and -infinity), +infinity stays
  infinity, NaN becomes the quiet NaN with every mantissa bit set (a choice: the guide names no NaN encoding).
- USCALED/SSCALED stores: the float value to the integer as D3D says for FLOAT -> integer ("If the target is an
  integer or fixed point format, round-to-nearest-even is used"), NaN 0 and saturated to the component's range
  (D3D's "Integer Conversion" saturates; a choice not checked on hardware).
"""

from __future__ import annotations

import numpy as np

__all__ = ["scaled_encode", "sharedexp_decode", "sharedexp_encode", "srgb_decode", "srgb_encode", "ufloat_encode"]

U64, I64, F64 = np.uint64, np.int64, np.float64


def srgb_decode(v: np.ndarray) -> np.ndarray:
    """8-bit sRGB codes -> the linear values (float64, see the module text)."""
    c = v.astype(F64)
    lin = (c * 100.0) / (255.0 * 1292.0)          # c / 255 / 12.92 in one rounding
    cu = c / 255.0
    curve = ((cu + 0.055) / 1.055) ** 2.4
    return np.where(c <= 10, lin, curve)          # c / 255 <= 0.04045 exactly for the codes 0..10


def srgb_encode(x: np.ndarray) -> np.ndarray:
    """Linear float64 values -> 8-bit sRGB codes (uint64): NaN 0, saturated, the sRGB curve, x 255 rounded."""
    lin = np.where(np.isnan(x), 0.0, np.clip(x, 0.0, 1.0))
    s = np.where(lin <= 0.0031308, lin * 12.92, 1.055 * lin ** (1 / 2.4) - 0.055)
    return np.rint(np.clip(s, 0.0, 1.0) * 255.0).astype(U64)


def sharedexp_decode(raw: np.ndarray) -> np.ndarray:
    """(lanes, 4) raw fields (X, Y, Z mantissas, E) of 5_9_9_9_FLOAT -> (lanes, 3) float64 values."""
    e = raw[:, 3].astype(I64)
    return raw[:, :3].astype(F64) * np.exp2((e - 24).astype(F64))[:, None]


def _floor_half(q: np.ndarray) -> np.ndarray:
    """floor(q + 1/2) computed without rounding error for float64 ``q`` >= 0 below 2^52."""
    f = np.floor(q)
    return f + ((q - f) >= 0.5)


def sharedexp_encode(vals: np.ndarray) -> np.ndarray:
    """(lanes, 3) float64 values -> (lanes, 4) raw fields (X, Y, Z mantissas, E) of 5_9_9_9_FLOAT."""
    top = 511.0 / 512.0 * 2.0 ** 16
    c = np.where(np.isnan(vals), 0.0, np.clip(vals, 0.0, top))
    mx = c.max(axis=1)
    _, ex = np.frexp(mx)                                  # mx = m x 2^ex, m in [0.5, 1): floor(log2) = ex - 1
    fl = np.where(mx > 0, ex.astype(I64) - 1, -16)
    e = np.maximum(-16, fl) + 16
    big = _floor_half(mx / np.exp2((e - 24).astype(F64)))
    e = np.where(big >= 512, e + 1, e)
    m = _floor_half(c / np.exp2((e - 24).astype(F64))[:, None])
    return np.concatenate([m, e[:, None].astype(F64)], axis=1).astype(U64)


def ufloat_encode(x: np.ndarray, bits: int, rounding: str) -> np.ndarray:
    """float64 values (from f32 or f16) -> the unsigned ``bits``-bit float (11 or 10: 5-bit exponent, bias 15),
    rounded as ``rounding`` says ("even" or "zero"; see the module text)."""
    mb = bits - 5
    inf, nan = U64(31 << mb), U64((31 << mb) | ((1 << mb) - 1))
    pos = np.where(np.isnan(x) | (x < 0), 0.0, x)
    fin = np.isfinite(pos)
    p = np.where(fin, pos, 0.0)
    _, ex = np.frexp(p)
    q = np.exp2((np.maximum(ex.astype(I64) - 1, -14) - mb).astype(F64))    # the quantum at p's binade
    n = p / q
    k = np.rint(n) if rounding == "even" else np.floor(n)
    r = k * q                                                               # the rounded value (exact)
    _, er = np.frexp(r)
    ub = er.astype(I64) - 1
    normal = r >= 2.0 ** -14
    expo = np.where(normal, ub + 15, 0)
    mant = np.where(normal, r / np.exp2(ub.astype(F64)) - 1.0, r / 2.0 ** (-14)) * (1 << mb)
    out = (expo.astype(U64) << U64(mb)) | mant.astype(U64)
    top = U64((30 << mb) | ((1 << mb) - 1))
    out = np.where(expo >= 31, inf if rounding == "even" else top, out)
    out = np.where(fin, out, inf)
    return np.where(np.isnan(x), nan, out).astype(U64)


def scaled_encode(x: np.ndarray, bits: int, signed: bool) -> np.ndarray:
    """float64 values -> a ``bits``-bit USCALED/SSCALED component's raw bits (uint64): NaN 0, rounded to nearest
    even, saturated."""
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    v = np.clip(np.rint(np.where(np.isnan(x), 0.0, x)), lo, hi).astype(I64)
    return (v & ((1 << bits) - 1)).astype(U64)
