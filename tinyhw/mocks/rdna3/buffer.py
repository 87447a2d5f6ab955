"""Buffer (MUBUF) loads, stores and atomics through a buffer resource descriptor (V#), RDNA3 ISA "Buffer
Instructions".

The V# is four SGPRs (SRSRC): dword 0 BASE_ADDRESS[31:0]; dword 1 BASE_ADDRESS[47:32] (bits 15:0), STRIDE (29:16),
SWIZZLE_ENABLE (bit 30); dword 2 NUM_RECORDS; dword 3 DST_SEL/FORMAT (11:0, 18:12), INDEX_STRIDE (22:21),
ADD_TID_ENABLE (23), OOB_SELECT (29:28), TYPE (31:30) (field positions as Linux amdgpu's SQ_BUF_RSRC_WORD*
registers for gfx11). Per lane: index = VGPR[VADDR] with IDXEN (plus the lane id with ADD_TID_ENABLE), offset =
VGPR[VADDR + IDXEN] with OFFEN, plus the instruction OFFSET; the address is BASE + SOFFSET + offset + STRIDE *
index. Range checking by OOB_SELECT: 0 (structured with offset) index >= NUM_RECORDS or offset >= STRIDE; 1
(structured) index >= NUM_RECORDS; 2 none; 3 (raw) each dword of the access past NUM_RECORDS bytes (offset + 4k +
4 > NUM_RECORDS; a sub-dword access as a whole). Which offset the raw check uses is the model's choice where the
guide is not explicit: the VGPR offset plus the instruction offset, without SOFFSET. Out-of-range loads return 0,
stores and atomics are dropped (an atomic returns 0). The format conversions (``*_format_*``, and MTBUF's
``tbuffer_*``) are :mod:`tinyhw.mocks.rdna3.bufformat`'s; swizzled buffers, the LDS-direct forms and TFE are
refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import vmem
from tinyhw.mocks.rdna3.state import LANES, NULL, Wave, inline_const

__all__ = ["compile_buffer"]

Fn = Callable[[Wave], Any]
U8, U32, U64, I64 = np.uint8, np.uint32, np.uint64, np.int64


def _soffset(src: int, bad: Callable[[str], Exception]) -> Callable[[Wave], int]:
    if src == NULL:
        return lambda w: 0
    if src <= 127:
        return lambda w: w.s[src]
    c = inline_const(src)
    if c is None:
        raise bad(f"buffer SOFFSET operand {src}")
    return lambda w: c


def compile_buffer(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a buffer load/store/atomic (see the module text) into a function of the wave."""
    f, m = inst.fields, inst.mnemonic
    if not f:
        raise bad("buffer (MUBUF) fields not decoded")
    if m.startswith("buffer_load_lds") or f["lds"] or f["tfe"]:
        raise bad("LDS-direct buffer loads and TFE are not modelled")
    if f["srsrc"] > 104:
        raise bad("a V# outside the SGPRs")
    rs, inst_off, vaddr, vdata = f["srsrc"], f["offset"], f["vaddr"], f["vdata"]
    idxen, offen = f["idxen"], f["offen"]
    soff = _soffset(f["soffset"], bad)
    kind, _, suffix = m.removeprefix("buffer_").partition("_")

    def addresses(w: Wave, lanes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(byte addresses (k, dwords-or-1), in-range mask of the same shape) of the active lanes."""
        d0, d1, d2, d3 = w.s[rs], w.s[rs + 1], w.s[rs + 2], w.s[rs + 3]
        if d1 >> 30 & 1:
            raise bad("a swizzled buffer (V# SWIZZLE_ENABLE) is not modelled")
        base = d0 | (d1 & 0xFFFF) << 32
        stride, nrec, oob = d1 >> 16 & 0x3FFF, d2, d3 >> 28 & 3
        index = w.v[vaddr, lanes].astype(I64) if idxen else np.zeros(len(lanes), I64)
        if d3 >> 23 & 1:
            index = index + LANES[lanes].astype(I64)
        off = (w.v[vaddr + idxen, lanes].astype(I64) if offen else np.zeros(len(lanes), I64)) + inst_off
        pieces = max(size // 4, 1)
        step = 4 if size >= 4 else size
        offs = off[:, None] + step * np.arange(pieces)
        if oob == 0:
            ok = np.broadcast_to(((index < nrec) & (off < stride))[:, None], offs.shape)
        elif oob == 1:
            ok = np.broadcast_to((index < nrec)[:, None], offs.shape)
        elif oob == 2:
            ok = np.ones(offs.shape, dtype=bool)
        else:
            ok = offs + step <= nrec
        addr = (base + soff(w) + stride * index)[:, None] + offs
        return addr.astype(U64), np.asarray(ok)

    if "_format_" in m:       # buffer_*_format_* and tbuffer_*: tinyhw/mocks/rdna3/bufformat.py
        from tinyhw.mocks.rdna3 import bufformat

        return bufformat.compile_format(inst, bad, addresses, rs)
    if kind == "load" and suffix in vmem._LOADS:
        size, n, signed = vmem._LOADS[suffix]

        def load(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            addr, ok = addresses(w, lanes, size)
            raw = vmem.gather_checked(w.mem, addr, ok, size)
            w.v[vdata:vdata + n, lanes] = vmem._widen(raw, size, signed).T
        return load
    if kind == "load" and suffix in vmem._D16_LOADS:
        size, signed, hi = vmem._D16_LOADS[suffix]

        def load16(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            addr, ok = addresses(w, lanes, size)
            raw = np.zeros((len(lanes), size), dtype=U8)
            if ok[:, 0].any():
                raw[ok[:, 0]] = vmem.gather(w.mem, addr[ok[:, 0], 0], size)
            vmem._d16_merge(w, vdata, lanes, raw, size, signed, hi)
        return load16
    if kind == "store" and (suffix in vmem._STORES or suffix in vmem._D16_STORES):
        hi_store = suffix in vmem._D16_STORES
        size = vmem._D16_STORES[suffix] if hi_store else vmem._STORES[suffix]

        def store(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            addr, ok = addresses(w, lanes, size)
            if hi_store:
                data = np.ascontiguousarray((w.v[vdata, lanes] >> U32(16)).astype("<u4")).view(U8)
                data = data.reshape(len(lanes), 4)[:, :size]
            else:
                data = vmem._lane_bytes(w, vdata, lanes, size)
            step = min(size, 4)
            for j in range(addr.shape[1]):
                sel = ok[:, j]
                if sel.any():
                    vmem.scatter(w.mem, addr[sel, j], np.ascontiguousarray(data[sel, j * step:(j + 1) * step]))
        return store
    at = vmem._atomic_op(suffix) if kind == "atomic" else None
    if at is not None:
        fn, bits, nd = at
        nb, words, ret = bits // 8, bits // 32, bool(f["glc"])

        def atomic(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            addr, ok = addresses(w, lanes, nb)
            d1 = vmem._lane_ints(w, vdata, lanes, words)
            d2 = vmem._lane_ints(w, vdata + words, lanes, words) if nd == 2 else [0] * len(d1)
            olds = []
            for a, good, x, y in zip(addr[:, 0].tolist(), ok.all(axis=1).tolist(), d1, d2, strict=True):
                if not good:
                    olds.append(0)
                    continue
                old = int.from_bytes(w.mem.read(a, nb), "little")
                w.mem.write(a, fn(old, x, y).to_bytes(nb, "little"))
                olds.append(old)
            if ret:
                vmem._put_lane_ints(w, vdata, lanes, words, olds)
        return atomic
    raise bad("buffer (MUBUF) opcode not modelled")


