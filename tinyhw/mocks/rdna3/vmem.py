"""Vector memory: LDS (DS), global loads/stores/atomics (GLOBAL, SEG=2) and the GL0 invalidate (MUBUF).

specs/amd-compute.md §5.4. Global addresses are GPU virtual addresses handed to the dispatch's memory
object (``read(addr, n) -> bytes``, ``write(addr, data)``; the board's GPUVM translation sits behind it):
the active lanes' addresses are sorted and cut into runs of adjacent elements, so a coalesced access is
one ``read``/``write`` call. A store where two lanes hit the same address leaves the higher lane's data.
Atomics are applied lane by lane in lane order (read, modify, write), returning the old value with GLC.
LDS is the workgroup's byte array (RSRC2.LDS_SIZE granules); as on the hardware, DS accesses are
bounds-checked against it: an out-of-range lane reads 0 and its write is dropped (ISA "Data Share
Operations", inferred for the exact granule).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3.state import M32, Wave

Fn = Callable[[Wave], Any]
U8, U32, U64 = np.uint8, np.uint32, np.uint64

# mnemonic suffix -> (bytes per lane, dwords written, sign-extend)
_LOADS = {"b32": (4, 1, False), "b64": (8, 2, False), "b96": (12, 3, False), "b128": (16, 4, False),
          "u8": (1, 1, False), "i8": (1, 1, True), "u16": (2, 1, False), "i16": (2, 1, True)}
_STORES = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "b8": 1, "b16": 2}
_ATOMIC: dict[str, Callable[[int, int], int]] = {
    "add_u32": lambda o, d: o + d, "sub_u32": lambda o, d: o - d, "and_b32": lambda o, d: o & d,
    "or_b32": lambda o, d: o | d, "xor_b32": lambda o, d: o ^ d, "swap_b32": lambda o, d: d,
    "min_u32": min, "max_u32": max,
    "min_i32": lambda o, d: o if (o ^ 0x80000000) < (d ^ 0x80000000) else d,
    "max_i32": lambda o, d: o if (o ^ 0x80000000) > (d ^ 0x80000000) else d,
}


def _runs(addrs: np.ndarray, size: int) -> tuple[np.ndarray, list[tuple[int, int]]]:
    order = np.argsort(addrs, kind="stable")
    sa = addrs[order]
    brk = (np.nonzero(np.diff(sa) != size)[0] + 1).tolist()
    bounds = list(zip([0, *brk], [*brk, len(sa)], strict=True))
    return order, bounds


def gather(mem: Any, addrs: np.ndarray, size: int) -> np.ndarray:
    """(k, size) bytes read at k addresses through ``mem.read``, one call per run of adjacent elements."""
    out = np.empty((len(addrs), size), dtype=U8)
    order, bounds = _runs(addrs, size)
    for s, e in bounds:
        raw = mem.read(int(addrs[order[s]]), (e - s) * size)
        out[order[s:e]] = np.frombuffer(raw, dtype=U8).reshape(e - s, size)
    return out


def scatter(mem: Any, addrs: np.ndarray, data: np.ndarray) -> None:
    """Write row i of ``data`` (k, size) at ``addrs[i]``; runs in address order, equal addresses in lane order."""
    size = data.shape[1]
    order, bounds = _runs(addrs, size)
    for s, e in bounds:
        mem.write(int(addrs[order[s]]), data[order[s:e]].tobytes())


def _active(w: Wave) -> np.ndarray:
    return np.nonzero(w.mask())[0]


def _lane_bytes(w: Wave, reg: int, lanes: np.ndarray, size: int) -> np.ndarray:
    """(k, size) bytes of the active lanes' data registers ``reg``.. (the low ``size`` bytes)."""
    n = max(size // 4, 1)
    vals = np.ascontiguousarray(w.v[reg:reg + n, lanes].T)
    return np.ascontiguousarray(vals.view(U8).reshape(len(lanes), 4 * n)[:, :size])


def _widen(raw: np.ndarray, size: int, signed: bool) -> np.ndarray:
    """(k, size) bytes -> (k, dwords) uint32, sub-dword loads zero- or sign-extended."""
    if size >= 4:
        return raw.view("<u4")
    v = raw.view("<u2" if size == 2 else "u1").astype(U32)
    if signed:
        bits = 8 * size
        v = (v ^ U32(1 << (bits - 1))) - U32(1 << (bits - 1))
    return v


def compile_global(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a global_load/store/atomic into a function that runs it on the wave's active lanes: address = 64-bit VGPR
    pair (or SGPR pair + 32-bit VGPR offset) + offset, through the wave's memory; flat and scratch segments are not
    modelled."""
    f, m = inst.fields, inst.mnemonic
    if f["seg"] != 2:
        raise bad("flat/scratch addressing (apertures, scratch) is not modelled; only global_*")
    off, saddr, va, vd, data = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]

    if saddr == 0x7C:
        def addr(w: Wave, lanes: np.ndarray) -> np.ndarray:
            lo, hi = w.v[va, lanes].astype(U64), w.v[va + 1, lanes].astype(U64)
            return (lo | hi << U64(32)) + U64(off & ((1 << 64) - 1))
    else:
        if saddr & 1 or saddr > 105:
            raise bad("SADDR must be an aligned SGPR pair")

        def addr(w: Wave, lanes: np.ndarray) -> np.ndarray:
            base = (w.s[saddr] | w.s[saddr + 1] << 32) + off
            return w.v[va, lanes].astype(U64) + U64(base & ((1 << 64) - 1))

    kind, _, suffix = m.removeprefix("global_").partition("_")
    if kind == "load" and suffix in _LOADS:
        size, n, signed = _LOADS[suffix]

        def load(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                vals = _widen(gather(w.mem, addr(w, lanes), size), size, signed)
                w.v[vd:vd + n, lanes] = vals.T
        return load
    if kind == "store" and suffix in _STORES:
        size = _STORES[suffix]

        def store(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                scatter(w.mem, addr(w, lanes), _lane_bytes(w, data, lanes, size))
        return store
    if kind == "atomic" and suffix in _ATOMIC:
        op, ret = _ATOMIC[suffix], bool(f["glc"])

        def atomic(w: Wave) -> None:
            lanes = _active(w)
            if not len(lanes):
                return
            addrs = addr(w, lanes).tolist()
            src = w.v[data, lanes].tolist()
            olds = []
            for a, x in zip(addrs, src, strict=True):
                old = int.from_bytes(w.mem.read(a, 4), "little")
                w.mem.write(a, (op(old, x) & M32).to_bytes(4, "little"))
                olds.append(old)
            if ret:
                w.v[vd, lanes] = np.array(olds, dtype=U32)
        return atomic
    raise bad("global memory opcode not modelled")


def compile_ds(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile an LDS (DS) load, store or ds_add_u32 into a function that runs it on the wave's active lanes;
    out-of-range lanes read 0 and do not write; GDS is not modelled."""
    f, m = inst.fields, inst.mnemonic
    if f["gds"]:
        raise bad("GDS is not modelled")
    off, va, vd, d0 = f["offset1"] << 8 | f["offset0"], f["addr"], f["vdst"], f["data0"]
    kind, _, suffix = m.removeprefix("ds_").partition("_")

    def index(w: Wave, lanes: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(byte indices (k, size), in-range rows): out-of-range lanes read 0 and do not write."""
        a = w.v[va, lanes].astype(np.int64) + off
        ok = (a >= 0) & (a + size <= len(w.lds))
        return np.where(ok, a, 0)[:, None] + np.arange(size), ok

    if kind == "load" and suffix in _LOADS:
        size, n, signed = _LOADS[suffix]

        def load(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                idx, ok = index(w, lanes, size)
                raw = w.lds[idx] if len(w.lds) else np.zeros(idx.shape, dtype=U8)
                raw[~ok] = 0
                w.v[vd:vd + n, lanes] = _widen(raw, size, signed).T
        return load
    if kind == "store" and suffix in _STORES:
        size = _STORES[suffix]

        def store(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                idx, ok = index(w, lanes, size)
                w.lds[idx[ok]] = _lane_bytes(w, d0, lanes, size)[ok]
        return store
    if kind == "add" and suffix == "u32":
        def add(w: Wave) -> None:
            for lane in _active(w).tolist():
                a = int(w.v[va, lane]) + off
                if a < 0 or a + 4 > len(w.lds):
                    continue                        # out of range: no effect
                cell = w.lds[a:a + 4].view("<u4")
                cell[0] = (int(cell[0]) + int(w.v[d0, lane])) & M32
        return add
    raise bad("LDS opcode not modelled")


def compile_mubuf(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Buffer cache invalidations (buffer_gl0_inv, buffer_gl1_inv) are no-ops (no caches are modelled); any other MUBUF
    instruction is not modelled."""
    if inst.mnemonic in ("buffer_gl0_inv", "buffer_gl1_inv"):
        return lambda w: None        # caches are not modelled: every access reaches memory
    raise bad("buffer (MUBUF) memory is not modelled")
