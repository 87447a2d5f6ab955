"""Buffer loads and stores with format conversion: ``buffer_*_format_*`` (the format from the V#, dword 3 bits 18:12)
and ``tbuffer_*_format_*`` (MTBUF: the format from the instruction), RDNA3 ISA "Buffer Data".

The formats modelled are gfx11's unified buffer formats whose components all have one size (the numbers as
llvm-mc-19 names them, ``BUF_FMT_*``): 8, 16 and 32 bits, one to four components, UNORM, SNORM, USCALED, SSCALED,
UINT, SINT and FLOAT (16 and 32 bits). The packed formats (10_11_11, 2_10_10_10 ...) and format 0 are refused.

Loads (ConvertFromFormat): the whole element is read through the buffer's range checks (out-of-range dwords read
0); each requested component becomes a 32-bit value: UINT/SINT zero/sign extended, USCALED/SSCALED the f32 of the
integer, UNORM the correctly rounded f32 of x / (2^n - 1), SNORM of x / (2^(n-1) - 1) clamped at -1.0, f16 widened,
32-bit components as they are. A component the format lacks reads 0 (Y, Z) or one (W: 1.0 for the float kinds, 1
for UINT/SINT). Then the V#'s DST_SEL_X/Y/Z/W (dword 3, 3 bits each from bit 0: 0 zero, 1 one, 4..7 the X..W
component) picks each result, for both encodings. The d16 forms convert to 16 bits instead (f16 correctly rounded
for the float kinds, the low 16 bits of the integer for UINT/SINT; 32-bit formats are refused) and keep the other
half of the last register as the pseudocode says. The guide gives no formula for the normalized conversions: the
correctly rounded quotient is the model's reading.

Stores (ConvertToFormat): only where no rounding or saturation rule is needed: 32-bit components (the register's
bits), 16_FLOAT (f32 rounded to nearest even to f16; the d16 forms store the register half), and the d16 stores of
16_UINT/16_SINT (the register half). Other store conversions stop the dispatch as not modelled. Only the
components both the instruction and the format have are written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3.state import Wave

__all__ = ["FORMATS", "compile_format"]

Fn = Callable[[Wave], Any]
U8, U16, U32, U64, I64, F16, F32, F64 = (np.uint8, np.uint16, np.uint32, np.uint64, np.int64, np.float16,
                                         np.float32, np.float64)
_KINDS6 = ("unorm", "snorm", "uscaled", "sscaled", "uint", "sint")
_KINDS7 = (*_KINDS6, "float")


def _formats() -> dict[int, tuple[int, int, str]]:
    """gfx11 unified buffer format number -> (component bits, components, kind), the one-size formats only."""
    out: dict[int, tuple[int, int, str]] = {}
    for first, bits, comps, kinds in ((1, 8, 1, _KINDS6), (7, 16, 1, _KINDS7), (14, 8, 2, _KINDS6),
                                      (20, 32, 1, ("uint", "sint", "float")), (23, 16, 2, _KINDS7),
                                      (42, 8, 4, _KINDS6), (48, 32, 2, ("uint", "sint", "float")),
                                      (51, 16, 4, _KINDS7), (58, 32, 3, ("uint", "sint", "float")),
                                      (61, 32, 4, ("uint", "sint", "float"))):
        for i, kind in enumerate(kinds):
            out[first + i] = (bits, comps, kind)
    return out


#: gfx11 buffer format number -> (component bits, components, kind)
FORMATS = _formats()
_ONE32 = {"uint": 1, "sint": 1}
_COUNT = {"x": 1, "xy": 2, "xyz": 3, "xyzw": 4}


def _fmt(num: int, bad: Callable[[str], Exception]) -> tuple[int, int, str]:
    if num not in FORMATS:
        raise bad(f"buffer data format {num} (only the 8/16/32-bit one-size formats are modelled)")
    return FORMATS[num]


def _from_format(raw: np.ndarray, bits: int, kind: str, d16: bool) -> np.ndarray:
    """Component values (uint, k) -> 32-bit results (or 16-bit for d16) as uint32 bits."""
    x = raw.astype(I64)
    if kind in ("snorm", "sscaled", "sint") and bits < 32:
        x = np.where(x >> (bits - 1) & 1, x - (1 << bits), x)
    if kind in ("uint", "sint"):
        return (x & (0xFFFF if d16 else 0xFFFFFFFF)).astype(U32)
    ft, ut = (F16, U16) if d16 else (F32, U32)
    if kind == "float":
        if bits == 32:
            return raw.astype(U32)
        return raw.astype(U16).view(F16).astype(ft).view(ut).astype(U32)
    if kind == "unorm":
        v = x.astype(F64) / ((1 << bits) - 1)
    elif kind == "snorm":
        v = np.maximum(x.astype(F64) / ((1 << (bits - 1)) - 1), -1.0)
    else:
        v = x.astype(F64)
    return v.astype(ft).view(ut).astype(U32)


def _one(kind: str, d16: bool) -> int:
    if kind in _ONE32:
        return 1
    return 0x3C00 if d16 else 0x3F800000


def compile_format(inst: Any, bad: Callable[[str], Exception],
                   addresses: Callable[[Wave, np.ndarray, int], tuple[np.ndarray, np.ndarray]],
                   rsrc: int) -> Fn:
    """Compile a buffer/tbuffer load or store with format conversion (see the module text); ``addresses`` is the
    buffer compiler's per-lane address and range check, ``rsrc`` the V#'s first SGPR."""
    f, m = inst.fields, inst.mnemonic
    typed = m.startswith("tbuffer_")
    kind_s, _, rest = m.removeprefix("tbuffer_" if typed else "buffer_").partition("_")
    d16, hi = rest.startswith("d16_"), rest.startswith("d16_hi_")
    n = _COUNT[rest.rsplit("_", 1)[1]]
    vdata = f["vdata"]
    fixed = _fmt(f["format"], bad) if typed else None
    if fixed is not None and d16 and fixed[0] == 32:
        raise bad("a d16 format access of a 32-bit format is not modelled")

    def fmt_of(w: Wave) -> tuple[int, int, str]:
        if fixed is not None:
            return fixed
        got = _fmt(w.s[rsrc + 3] >> 12 & 0x7F, bad)
        if d16 and got[0] == 32:
            raise bad("a d16 format access of a 32-bit format is not modelled")
        return got

    if kind_s == "load":
        def load(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            bits, comps, kind = fmt_of(w)
            bsz = bits // 8
            esize = bsz * comps
            addr, ok = addresses(w, lanes, esize)
            step = min(esize, 4)
            raw = np.zeros((len(lanes), addr.shape[1] * step), dtype=U8)
            from tinyhw.mocks.rdna3 import vmem
            for j in range(addr.shape[1]):
                sel = ok[:, j]
                if sel.any():
                    raw[sel, j * step:(j + 1) * step] = vmem.gather(w.mem, addr[sel, j], step)
            vals = np.zeros((4, len(lanes)), dtype=U32)
            vals[3] = _one(kind, d16)
            utype = {1: "u1", 2: "<u2", 4: "<u4"}[bsz]
            comp = np.ascontiguousarray(raw).view(utype).astype(U64)
            for c in range(min(comps, 4)):
                vals[c] = _from_format(comp[:, c], bits, kind, d16)
            d3 = w.s[rsrc + 3]
            out = []
            for c in range(n):
                sel = d3 >> (3 * c) & 7
                if sel in (2, 3):
                    raise bad(f"DST_SEL value {sel} (reserved)")
                out.append(np.zeros(len(lanes), U32) if sel == 0 else
                           np.full(len(lanes), _one(kind, d16), U32) if sel == 1 else vals[sel - 4])
            if not d16:
                w.v[vdata:vdata + n, lanes] = np.array(out, dtype=U32)
                return
            for c, v in enumerate(out):
                reg, upper = vdata + c // 2, (c % 2 == 1) or hi
                old = w.v[reg, lanes]
                w.v[reg, lanes] = (old & U32(0xFFFF)) | v << U32(16) if upper else (old & U32(0xFFFF0000)) | v
        return load

    def store(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        bits, comps, kind = fmt_of(w)
        if not (bits == 32 or (bits == 16 and (kind == "float" or (d16 and kind in ("uint", "sint"))))):
            raise bad(f"a store conversion to {bits}-bit {kind} (no rounding/saturation rule is modelled)")
        bsz = bits // 8
        esize = bsz * comps
        addr, ok = addresses(w, lanes, esize)
        from tinyhw.mocks.rdna3 import vmem
        for c in range(min(n, comps)):
            if d16:
                word = w.v[vdata + c // 2, lanes]
                v = (word >> U32(16)) if (c % 2 == 1 or hi) else (word & U32(0xFFFF))
            else:
                v = w.v[vdata + c, lanes]
                if bits == 16:
                    v = v.view(F32).astype(F16).view(U16).astype(U32)
            piece = (c * bsz) // 4 if esize >= 4 else 0
            sel = ok[:, piece]
            if sel.any():
                data = np.ascontiguousarray(v[sel].astype("<u4")).view(U8).reshape(-1, 4)[:, :bsz]
                base = addr[sel, piece] + U64(c * bsz - piece * 4 if esize >= 4 else c * bsz)
                vmem.scatter(w.mem, base, np.ascontiguousarray(data))
    return store
