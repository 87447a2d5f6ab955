"""Buffer loads and stores with format conversion: ``buffer_*_format_*`` (the format from the V#, dword 3 bits 18:12)
and ``tbuffer_*_format_*`` (MTBUF: the format from the instruction), RDNA3 ISA "Buffer Data".

The formats are gfx11's unified buffer formats 1..63 (the numbers as llvm-mc-19 names them, ``BUF_FMT_*``): 8, 16
and 32 bits, one to four components, UNORM, SNORM, USCALED, SSCALED, UINT, SINT and FLOAT (16 and 32 bits), and the
packed 10_11_11_FLOAT, 11_11_10_FLOAT, 10_10_10_2 and 2_10_10_10 formats. Their layout and number conversions are
the image model's (:data:`tinyhw.mocks.rdna3.image.FORMATS` and its conversions, one table for both: see
:mod:`tinyhw.mocks.rdna3.image`'s module text). Format 0 (INVALID) and the image-only formats past 63 are refused.

Loads (ConvertFromFormat): the whole element is read through the buffer's range checks (out-of-range dwords read
0); each requested component becomes a 32-bit value: UINT/SINT zero/sign extended, USCALED/SSCALED the f32 of the
integer, UNORM the correctly rounded f32 of x / (2^n - 1), SNORM of x / (2^(n-1) - 1) clamped at -1.0, 16-bit and
the packed 11/10-bit floats widened, 32-bit components as they are. A component the format lacks reads 0 (Y, Z) or
one (W: 1.0 for the float kinds, 1 for UINT/SINT). Then the V#'s DST_SEL_X/Y/Z/W (dword 3, 3 bits each from bit 0:
0 zero, 1 one, 4..7 the X..W component) picks each result, for both encodings. The d16 forms convert to 16 bits
instead (f16 correctly rounded for the normalized and scaled kinds, the low 16 bits of the integer for UINT/SINT;
32-bit formats are refused) and keep the other half of the last register as the pseudocode says. The guide gives no
formula for the normalized conversions: the correctly rounded quotient is the model's reading.

Stores (ConvertToFormat), the image stores' conversions (Direct3D's "Data Conversion Rules", as the image model
documents them): UNORM/SNORM saturate and round to nearest (NaN to 0), USCALED/SSCALED round to nearest even and
saturate, UINT/SINT saturate the register's integer to the component's range, 16_FLOAT rounds to nearest even
(``image.FLOAT_STORE_ROUNDING``), the 11/10-bit floats as the image model stores them, 32-bit components store the
register's bits. Only the components both the instruction and the format have are written: the byte-aligned
formats write just those components' bytes; a packed format (components sharing a dword) is read, the
instruction's components replaced and the element written back, each lane in lane order (a choice: the guide does
not say whether a store of fewer components than the format has keeps or zeroes the others; keeping them is what
the byte-aligned formats do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import image, vmem
from tinyhw.mocks.rdna3.state import Wave

__all__ = ["FORMATS", "compile_format"]

Fn = Callable[[Wave], Any]
U8, U16, U32, U64 = np.uint8, np.uint16, np.uint32, np.uint64

#: gfx11 buffer format number -> the image model's format (the unified formats 1..63)
FORMATS = {k: v for k, v in image.FORMATS.items() if 1 <= k <= 63}
_COUNT = {"x": 1, "xy": 2, "xyz": 3, "xyzw": 4}


def _fmt(num: int, bad: Callable[[str], Exception]) -> image.Fmt:
    if num not in FORMATS:
        raise bad(f"buffer data format {num} (the buffer formats are 1..63; "
                  f"{image.REFUSED_FORMATS.get(num, 'an image-only or unknown format')})")
    return FORMATS[num]


def _aligned(fm: image.Fmt) -> bool:
    """Whether every component fills whole bytes at a byte boundary (so a store can write just its bytes)."""
    return all(s % 8 == 0 and b % 8 == 0 for s, b in fm.comps)


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

    def fmt_of(w: Wave) -> image.Fmt:
        got = fixed if fixed is not None else _fmt(w.s[rsrc + 3] >> 12 & 0x7F, bad)
        if d16 and any(b == 32 for _, b in got.comps):
            raise bad(f"a d16 format access of the 32-bit format {got.name} is not modelled")
        return got

    if kind_s == "load":
        def load(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            fm = fmt_of(w)
            addr, ok = addresses(w, lanes, fm.size)
            raw = image.split_components(vmem.gather_checked(w.mem, addr, ok, fm.size), fm)
            regs = image.component_regs(raw, fm, d16)
            d3 = w.s[rsrc + 3]
            out = []
            for c in range(n):
                sel = d3 >> (3 * c) & 7
                if sel in (2, 3):
                    raise bad(f"DST_SEL value {sel} (reserved)")
                out.append(np.zeros(len(lanes), U32) if sel == 0 else
                           np.full(len(lanes), image.one_bits(fm, d16), U32) if sel == 1 else regs[:, sel - 4])
            if not d16:
                w.v[vdata:vdata + n, lanes] = np.array(out, dtype=U32)
                return
            for c, v in enumerate(out):
                reg, upper = vdata + c // 2, (c % 2 == 1) or hi
                old = w.v[reg, lanes]
                w.v[reg, lanes] = (old & U32(0xFFFF)) | v << U32(16) if upper else (old & U32(0xFFFF0000)) | v
        return load

    def value(w: Wave, lanes: np.ndarray, c: int) -> np.ndarray:
        """Component ``c``'s register value per lane (d16: the 16-bit half)."""
        if not d16:
            return w.v[vdata + c, lanes]
        word = w.v[vdata + c // 2, lanes]
        return (word >> U32(16)) if (c % 2 == 1 or hi) else (word & U32(0xFFFF))

    def store(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        fm = fmt_of(w)
        esize = fm.size
        addr, ok = addresses(w, lanes, esize)
        step = min(esize, 4)
        raws = [image.encode_component(value(w, lanes, c), fm, c, d16) for c in range(min(n, fm.n))]
        if _aligned(fm):
            for c, raw in enumerate(raws):
                shift, bits = fm.comps[c]
                bsz, off = bits // 8, shift // 8
                piece = off // 4 if esize >= 4 else 0
                sel = ok[:, piece]
                if sel.any():
                    data = np.ascontiguousarray(raw[sel].astype("<u8")).view(U8).reshape(-1, 8)[:, :bsz]
                    base = addr[sel, piece] + U64(off - piece * 4 if esize >= 4 else off)
                    vmem.scatter(w.mem, base, np.ascontiguousarray(data))
            return
        for i in range(len(lanes)):                      # packed: read, replace, write back, lane by lane
            if not ok[i].any():
                continue
            one = (addr[i:i + 1], ok[i:i + 1])
            comps = image.split_components(vmem.gather_checked(w.mem, *one, esize), fm)
            for c, raw in enumerate(raws):
                comps[0, c] = raw[i]
            data = image.join_components(comps, fm)
            for j in range(addr.shape[1]):
                if ok[i, j]:
                    vmem.scatter(w.mem, addr[i:i + 1, j], np.ascontiguousarray(data[:, j * step:(j + 1) * step]))
    return store
