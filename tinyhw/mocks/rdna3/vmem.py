"""Vector memory: LDS (DS), global and flat loads/stores/atomics (GLOBAL, FLAT) and the cache invalidates (MUBUF).

specs/amd-compute.md §5.4. Global addresses are GPU virtual addresses handed to the dispatch's memory
object (``read(addr, n) -> bytes``, ``write(addr, data)``; the board's GPUVM translation sits behind it):
the active lanes' addresses are sorted and cut into runs of adjacent elements, so a coalesced access is
one ``read``/``write`` call. A store where two lanes hit the same address leaves the higher lane's data.
Atomics (32- and 64-bit) are applied lane by lane in lane order (read, modify, write), returning the old
value with GLC (DS: the _rtn forms). A FLAT address is a global one here; one in the LDS or private aperture
(not a canonical 48-bit address) stops :func:`compile_global`'s function, and :mod:`tinyhw.mocks.rdna3.rare` routes
those lanes to LDS or scratch before it is called.
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


def _atomic_op(name: str) -> tuple[Callable[[int, int, int], int], int, int] | None:
    """(function of (old, data, data2) -> new, bits, data registers) of an atomic suffix such as ``add_u32`` or
    ``cmpswap_b64`` (RDNA3 ISA pseudocode; cmpswap/cmpstore: DATA = the new value, DATA2 = the compare value, the
    gfx11 operand order), None when not modelled."""
    op, _, typ = name.rpartition("_")
    bits = 64 if typ.endswith("64") else 32
    if typ in ("f32", "f64"):
        return _float_atomic(op, typ)
    if typ not in ("u32", "i32", "b32", "u64", "i64", "b64"):
        return None
    m = (1 << bits) - 1

    def sgn(x: int) -> int:
        return x - (1 << bits) if x >> (bits - 1) else x
    table: dict[str, Callable[[int, int, int], int]] = {
        "add": lambda o, d, e: o + d, "sub": lambda o, d, e: o - d, "rsub": lambda o, d, e: d - o,
        "csub": lambda o, d, e: max(o - d, 0),
        "inc": lambda o, d, e: 0 if o >= d else o + 1, "dec": lambda o, d, e: d if o == 0 or o > d else o - 1,
        "and": lambda o, d, e: o & d, "or": lambda o, d, e: o | d, "xor": lambda o, d, e: o ^ d,
        "swap": lambda o, d, e: d, "storexchg": lambda o, d, e: d,
        "mskor": lambda o, d, e: (o & ~d) | e,
        "wrap": lambda o, d, e: o - d if o >= d else o + e,
        "cmpswap": lambda o, d, e: d if o == e else o, "cmpstore": lambda o, d, e: d if o == e else o,
        "min": (lambda o, d, e: o if sgn(o) < sgn(d) else d) if typ[0] == "i" else (lambda o, d, e: min(o, d)),
        "max": (lambda o, d, e: o if sgn(o) > sgn(d) else d) if typ[0] == "i" else (lambda o, d, e: max(o, d)),
    }
    fn = table.get(op)
    if fn is None:
        return None
    two = op in ("cmpswap", "cmpstore", "mskor", "wrap")
    return (lambda o, d, e: fn(o, d, e) & m), bits, 2 if two else 1


def _float_atomic(op: str, typ: str) -> tuple[Callable[[int, int, int], int], int, int] | None:
    """The float atomics of the ISA pseudocode on raw bits: add (one IEEE rounding), min (``src < tmp ? src :
    tmp``), max (``src > tmp ? src : tmp``; so a NaN in memory stays and a NaN source is dropped, as the comparisons
    say), cmpswap/cmpstore (``tmp == cmp ? src : tmp`` as a float compare: -0 equals +0, NaN never matches)."""
    ut, ft = (np.uint32, np.float32) if typ == "f32" else (np.uint64, np.float64)

    def f(x: int) -> Any:
        return ut(x).view(ft)

    def add(o: int, d: int, e: int) -> int:
        with np.errstate(all="ignore"):
            return int((f(o) + f(d)).view(ut))
    table: dict[str, Callable[[int, int, int], int]] = {
        "add": add, "min": lambda o, d, e: d if f(d) < f(o) else o, "max": lambda o, d, e: d if f(d) > f(o) else o,
        "cmpswap": lambda o, d, e: d if f(o) == f(e) else o, "cmpstore": lambda o, d, e: d if f(o) == f(e) else o,
    }
    fn = table.get(op)
    if fn is None:
        return None
    return fn, 64 if typ == "f64" else 32, 2 if op in ("cmpswap", "cmpstore") else 1


# d16 loads: suffix -> (bytes, sign-extend, high half); d16 stores: suffix -> (bytes, from the high half)
_D16_LOADS = {"d16_u8": (1, False, 0), "d16_i8": (1, True, 0), "d16_b16": (2, False, 0),
              "d16_hi_u8": (1, False, 1), "d16_hi_i8": (1, True, 1), "d16_hi_b16": (2, False, 1),
              "u8_d16": (1, False, 0), "i8_d16": (1, True, 0), "u16_d16": (2, False, 0),
              "u8_d16_hi": (1, False, 1), "i8_d16_hi": (1, True, 1), "u16_d16_hi": (2, False, 1)}
_D16_STORES = {"d16_hi_b8": 1, "d16_hi_b16": 2, "b8_d16_hi": 1, "b16_d16_hi": 2}


def _d16_merge(w: Wave, vd: int, lanes: np.ndarray, raw: np.ndarray, size: int, signed: bool, hi: int) -> None:
    """A d16 load's result: the element zero- or sign-extended to 16 bits into the low (or, ``hi``, the high) half
    of VDST, the other half kept."""
    v = _widen(raw, size, signed)[:, 0] & U32(0xFFFF)
    old = w.v[vd, lanes]
    w.v[vd, lanes] = (old & U32(0xFFFF)) | v << U32(16) if hi else (old & U32(0xFFFF0000)) | v


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


def gather_checked(mem: Any, addr: np.ndarray, ok: np.ndarray, size: int) -> np.ndarray:
    """(lanes, size) bytes of an element read in pieces of min(size, 4) bytes at ``addr`` (lanes, pieces), a piece
    whose ``ok`` (the buffer range check) is false reading 0."""
    step = min(size, 4)
    raw = np.zeros((len(addr), addr.shape[1] * step), dtype=U8)
    for j in range(addr.shape[1]):
        sel = ok[:, j]
        if sel.any():
            raw[sel, j * step:(j + 1) * step] = gather(mem, addr[sel, j], step)
    return raw[:, :size]


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
    if f["seg"] not in (0, 2):
        raise bad("scratch (private segment) addressing is not modelled")
    off, saddr, va, vd, data = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]
    flat = f["seg"] == 0
    if flat:
        off = flat_offset(off)
    if flat and saddr != 0x7C:
        raise bad("FLAT with an SADDR")

    if saddr == 0x7C:
        def addr(w: Wave, lanes: np.ndarray) -> np.ndarray:
            lo, hi = w.v[va, lanes].astype(U64), w.v[va + 1, lanes].astype(U64)
            a = (lo | hi << U64(32)) + U64(off & ((1 << 64) - 1))
            if flat and np.count_nonzero(_aperture(a)):
                raise bad("a FLAT address in the LDS or private aperture (only global memory is modelled)")
            return a
    else:
        if saddr & 1 or saddr > 105:
            raise bad("SADDR must be an aligned SGPR pair")

        def addr(w: Wave, lanes: np.ndarray) -> np.ndarray:
            base = (w.s[saddr] | w.s[saddr + 1] << 32) + off
            return w.v[va, lanes].astype(U64) + U64(base & ((1 << 64) - 1))

    kind, _, suffix = m.removeprefix("flat_" if flat else "global_").partition("_")
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
    if kind == "atomic" and _atomic_op(suffix) is not None:
        fn, bits, nd = _atomic_op(suffix)        # type: ignore[misc]
        ret, nb, words = bool(f["glc"]), bits // 8, bits // 32

        def atomic(w: Wave) -> None:
            lanes = _active(w)
            if not len(lanes):
                return
            addrs = addr(w, lanes).tolist()
            d1 = _lane_ints(w, data, lanes, words)
            d2 = _lane_ints(w, data + words, lanes, words) if nd == 2 else [0] * len(d1)
            olds = []
            for a, x, y in zip(addrs, d1, d2, strict=True):        # lane order, one read-modify-write each
                old = int.from_bytes(w.mem.read(a, nb), "little")
                w.mem.write(a, fn(old, x, y).to_bytes(nb, "little"))
                olds.append(old)
            if ret:
                _put_lane_ints(w, vd, lanes, words, olds)
        return atomic
    if kind == "load" and suffix in _D16_LOADS:
        size, signed, hi = _D16_LOADS[suffix]

        def load16(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                _d16_merge(w, vd, lanes, gather(w.mem, addr(w, lanes), size), size, signed, hi)
        return load16
    if kind == "store" and suffix in _D16_STORES:
        size = _D16_STORES[suffix]

        def store16(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                hi16 = np.ascontiguousarray((w.v[data, lanes] >> U32(16)).astype("<u4"))
                scatter(w.mem, addr(w, lanes), hi16.view(U8).reshape(len(lanes), 4)[:, :size].copy())
        return store16
    raise bad("global memory opcode not modelled")


def flat_offset(offset: int) -> int:
    """The byte offset of a FLAT (SEG 0) instruction from its decoded OFFSET field (which the decoder sign-extends
    from 13 bits, as GLOBAL and SCRATCH use it). ISA guide, FLAT microcode table: "Scratch, Global: 13-bit signed
    byte offset. Flat: 12-bit unsigned offset (MSB is ignored)"; LLVM's assembler likewise rejects negative FLAT
    offsets. So bit 12 adds nothing: the offset is OFFSET[11:0]."""
    return offset & 0xFFF


def _aperture(a: np.ndarray) -> np.ndarray:
    """Lanes whose 64-bit flat address is not a canonical 48-bit global address (bits 63:47 all 0 or all 1): the
    LDS and private apertures live there (SH_MEM_BASES)."""
    top = a >> U64(47)
    return (top != U64(0)) & (top != U64((1 << 17) - 1))


def _lane_ints(w: Wave, reg: int, lanes: np.ndarray, words: int) -> list[int]:
    """The active lanes' 32- or 64-bit values of register ``reg`` (a pair for 64) as Python ints."""
    lo = w.v[reg, lanes].tolist()
    if words == 1:
        return lo
    return [x | y << 32 for x, y in zip(lo, w.v[reg + 1, lanes].tolist(), strict=True)]


def _put_lane_ints(w: Wave, reg: int, lanes: np.ndarray, words: int, vals: list[int]) -> None:
    w.v[reg, lanes] = np.array([x & M32 for x in vals], dtype=U32)
    if words == 2:
        w.v[reg + 1, lanes] = np.array([x >> 32 for x in vals], dtype=U32)


def compile_ds(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile an LDS (DS) load, store (also the 2addr forms) or atomic (with or without return, 32 and 64 bits)
    into a function that runs it on the wave's active lanes; out-of-range lanes read 0 and do not write; GDS is
    not modelled."""
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

    def fetch(w: Wave, lanes: np.ndarray, size: int) -> np.ndarray:
        """The (k, size) bytes each lane reads; an out-of-range lane reads 0."""
        idx, ok = index(w, lanes, size)
        raw = w.lds[idx] if len(w.lds) else np.zeros(idx.shape, dtype=U8)
        raw[~ok] = 0
        return raw

    if kind == "load" and suffix in _LOADS:
        size, n, signed = _LOADS[suffix]

        def load(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                w.v[vd:vd + n, lanes] = _widen(fetch(w, lanes, size), size, signed).T
        return load
    if kind == "store" and suffix in _STORES:
        size = _STORES[suffix]

        def store(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                idx, ok = index(w, lanes, size)
                w.lds[idx[ok]] = _lane_bytes(w, d0, lanes, size)[ok]
        return store
    if kind in ("load", "store") and suffix.startswith("2addr_"):
        return _ds_2addr(inst, kind == "load", suffix)
    if m == "ds_nop":
        return lambda w: None
    if kind == "storexchg" and suffix.startswith("2addr_"):
        return _ds_xchg2(inst, suffix)
    if kind == "load" and suffix in _D16_LOADS:
        size16, signed16, hi16 = _D16_LOADS[suffix]

        def load16(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                _d16_merge(w, vd, lanes, fetch(w, lanes, size16), size16, signed16, hi16)
        return load16
    if kind == "store" and suffix in _D16_STORES:
        size16 = _D16_STORES[suffix]

        def store16(w: Wave) -> None:
            lanes = _active(w)
            if len(lanes):
                idx, ok = index(w, lanes, size16)
                hi = np.ascontiguousarray((w.v[d0, lanes] >> U32(16)).astype("<u4"))
                w.lds[idx[ok]] = hi.view(U8).reshape(len(lanes), 4)[:, :size16][ok]
        return store16
    rtn = suffix.startswith("rtn_")
    at = _atomic_op(f"{kind}_{suffix.removeprefix('rtn_')}")
    if at is not None:
        fn, bits, nd = at
        nb, words, d1 = bits // 8, bits // 32, f["data1"]

        def atomic(w: Wave) -> None:
            lanes = _active(w)
            if not len(lanes):
                return
            x1 = _lane_ints(w, d0, lanes, words)
            x2 = _lane_ints(w, d1, lanes, words) if nd == 2 else [0] * len(x1)
            olds = []
            for lane, x, y in zip(lanes.tolist(), x1, x2, strict=True):      # lane order
                a = int(w.v[va, lane]) + off
                if a < 0 or a + nb > len(w.lds):
                    olds.append(0)                  # out of range: no effect, returns 0
                    continue
                old = int.from_bytes(w.lds[a:a + nb].tobytes(), "little")
                w.lds[a:a + nb] = np.frombuffer(fn(old, x, y).to_bytes(nb, "little"), dtype=U8)
                olds.append(old)
            if rtn:
                _put_lane_ints(w, vd, lanes, words, olds)
        return atomic
    raise bad("LDS opcode not modelled")


def _ds_xchg2(inst: Any, suffix: str) -> Fn:
    """ds_storexchg_2addr(_stride64)_rtn_b32/b64: per lane, in lane order, the two elements at ADDR + OFFSET0 *
    size and ADDR + OFFSET1 * size (size times 64 for stride64) are returned in VDST (the first, then the second)
    and replaced by DATA0 and DATA1; out-of-range elements return 0 and are not written."""
    f = inst.fields
    size = 8 if suffix.endswith("b64") else 4
    unit = size * (64 if "stride64" in suffix else 1)
    offs = (f["offset0"] * unit, f["offset1"] * unit)
    va, vd, d0, d1, words = f["addr"], f["vdst"], f["data0"], f["data1"], size // 4

    def run(w: Wave) -> None:
        for lane in _active(w).tolist():
            base = int(w.v[va, lane])
            for k, (o, src) in enumerate(zip(offs, (d0, d1), strict=True)):
                a = base + o
                ok = a >= 0 and a + size <= len(w.lds)
                raw = w.lds[a:a + size].tobytes() if ok else bytes(size)
                if ok:
                    w.lds[a:a + size] = np.array([w.v[src + j, lane] for j in range(words)], dtype="<u4").view(U8)
                for j in range(words):
                    w.v[vd + k * words + j, lane] = int.from_bytes(raw[4 * j:4 * j + 4], "little")
    return run


def _ds_2addr(inst: Any, load: bool, suffix: str) -> Fn:
    """ds_load_2addr / ds_store_2addr (and the _stride64 forms), b32 or b64: two elements at ADDR + OFFSET0 * size
    and ADDR + OFFSET1 * size (size times 64 for stride64); out-of-range elements read 0 and are not written."""
    f = inst.fields
    size = 8 if suffix.endswith("b64") else 4
    unit = size * (64 if "stride64" in suffix else 1)
    offs = (f["offset0"] * unit, f["offset1"] * unit)
    va, vd, d0, d1, words = f["addr"], f["vdst"], f["data0"], f["data1"], size // 4

    def run(w: Wave) -> None:
        for lane in _active(w).tolist():
            base = int(w.v[va, lane])
            for k, o in enumerate(offs):
                a = base + o
                ok = a >= 0 and a + size <= len(w.lds)
                if load:
                    raw = w.lds[a:a + size].tobytes() if ok else bytes(size)
                    for j in range(words):
                        w.v[vd + k * words + j, lane] = int.from_bytes(raw[4 * j:4 * j + 4], "little")
                elif ok:
                    src = d0 if k == 0 else d1
                    w.lds[a:a + size] = np.array([w.v[src + j, lane] for j in range(words)], dtype="<u4").view(U8)
    return run


def compile_mubuf(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Buffer cache invalidations (buffer_gl0_inv, buffer_gl1_inv) are no-ops (no caches are modelled); loads,
    stores and atomics through a V# are :func:`tinyhw.mocks.rdna3.buffer.compile_buffer`'s."""
    if inst.mnemonic in ("buffer_gl0_inv", "buffer_gl1_inv"):
        return lambda w: None        # caches are not modelled: every access reaches memory
    from tinyhw.mocks.rdna3 import buffer

    return buffer.compile_buffer(inst, bad)


#: what a lockstep function returns to have the step run wave by wave instead
PER_WAVE = -100
_WIDE_SIZES = {"b32": 4, "b64": 8, "b96": 12, "b128": 16}


def wide_global(inst: Any) -> Callable[[Any], Any] | None:
    """A global_load/store_b32..b128 for several waves in lockstep (the dispatcher's wide path), or None: one gather
    or scatter over every active lane of every wave, in wave order, through ``ww.mem``; each wave's span is logged in
    ``ww.log``. A store whose lanes overlap without being equal runs wave by wave (PER_WAVE), so later waves win as
    one after another."""
    f, m = inst.fields, inst.mnemonic
    if f["seg"] != 2 or not m.startswith(("global_load_b", "global_store_b", "global_atomic_")):
        return None
    kind, _, suffix = m.removeprefix("global_").partition("_")
    off, saddr, va, vd, data = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]
    if saddr != 0x7C and (saddr & 1 or saddr > 105):
        return None
    if kind == "atomic":
        return _wide_atomic(inst, suffix)
    if suffix not in _WIDE_SIZES:
        return None
    size = _WIDE_SIZES[suffix]
    n = size // 4
    store = kind == "store"

    def run(ww: Any) -> Any:
        v = ww.v
        got = _wide_addrs(ww, saddr, va, off)
        if got is None:
            return PER_WAVE
        a, m2, addrs = got
        if not len(addrs):
            return None
        if store:
            sa = np.sort(addrs)
            gap = np.diff(sa)
            if np.count_nonzero((gap != 0) & (gap < size)):
                return PER_WAVE
            vals = np.ascontiguousarray(v[data:data + n][:, m2].T)
            scatter(ww.mem, addrs, np.ascontiguousarray(vals.view(U8).reshape(len(addrs), 4 * n)[:, :size]))
        else:
            vals = gather(ww.mem, addrs, size).view("<u4")
            v[vd:vd + n][:, m2] = vals.T
        big = np.uint64((1 << 64) - 1)
        ww.log.append((None, np.where(m2, a, big).min(axis=1), np.where(m2, a + U64(size), U64(0)).max(axis=1),
                       store))
        return None
    return run


def wide_ds(inst: Any) -> Callable[[Any], Any] | None:
    """A ds_load_b32..b128/u8/i8/u16/i16 or ds_store_b32..b128/b8/b16 for several waves in lockstep (the dispatcher's
    wide path), or None: one gather or scatter over every active lane of every wave into its workgroup's row of
    ``ww.lds`` (LDS (workgroups, bytes), each wave's workgroup, its index there, and the dispatcher's check of which
    wave touched which bytes, or None without several waves a workgroup), as :func:`compile_ds` for one wave:
    out-of-range lanes read 0 and do not write. PER_WAVE when the dispatch has no LDS."""
    f, m = inst.fields, inst.mnemonic
    kind, _, suffix = m.removeprefix("ds_").partition("_")
    if f["gds"] or not ((kind == "load" and suffix in _LOADS) or (kind == "store" and suffix in _STORES)):
        return None
    store = kind == "store"
    size, n, signed = (_STORES[suffix], max(_STORES[suffix] // 4, 1), False) if store else _LOADS[suffix]
    off, va, vd, d0 = f["offset1"] << 8 | f["offset0"], f["addr"], f["vdst"], f["data0"]
    span = np.arange(size)

    def run(ww: Any) -> Any:
        if ww.lds is None:
            return PER_WAVE
        arr, grp, widx, check = ww.lds
        nb = arr.shape[1]
        m2 = np.broadcast_to(ww.mask(), (len(ww.waves), 32))
        a = ww.v[va].astype(np.int64) + off
        ok = m2 & (a >= 0) & (a + size <= nb)
        wv, ln = np.nonzero(ok if store else m2)        # lanes in wave order, then lane order
        if not len(wv):
            return None
        g = grp[wv]
        okl = ok[wv, ln]
        idx = np.where(okl, a[wv, ln], 0)[:, None] + span
        if check is not None:
            check(g[okl, None] * nb + idx[okl], widx[wv[okl]], store)
        if store:
            vals = np.ascontiguousarray(np.stack([ww.v[d0 + j][wv, ln] for j in range(n)], axis=1).astype("<u4"))
            arr[g[:, None], idx] = vals.view(U8).reshape(len(wv), 4 * n)[:, :size]
        else:
            raw = arr[g[:, None], idx]
            raw[~okl] = 0
            vals = _widen(np.ascontiguousarray(raw), size, signed)
            for j in range(n):
                ww.v[vd + j][wv, ln] = vals[:, j]
        return None
    return run


def _wide_addrs(ww: Any, saddr: int, va: int, off: int) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(addresses (waves, 32), active lanes (waves, 32), the active lanes' addresses in wave order) of a global access
    for waves in lockstep; None (run wave by wave) when the SADDR pair differs between waves or an address is huge."""
    v = ww.v
    m2 = np.broadcast_to(ww.mask(), v.shape[1:])
    if saddr == 0x7C:
        a = (v[va].astype(U64) | v[va + 1].astype(U64) << U64(32)) + U64(off & ((1 << 64) - 1))
    else:
        lo, hi = ww.s[saddr], ww.s[saddr + 1]
        if type(lo) is not int or type(hi) is not int:
            return None
        a = v[va].astype(U64) + U64(((lo | hi << 32) + off) & ((1 << 64) - 1))
    addrs = a[m2]
    if len(addrs) and int(addrs.max()) >= 1 << 62:
        return None
    return a, m2, addrs


def _wide_atomic(inst: Any, suffix: str) -> Callable[[Any], Any] | None:
    """A global atomic for waves in lockstep: lane by lane in lane order, wave after wave (as one wave after another
    would), through ``ww.mem``; the old values returned with GLC."""
    op = _atomic_op(suffix)
    if op is None:
        return None
    fn, bits, nd = op
    f = inst.fields
    off, saddr, va, vd, data = f["offset"], f["saddr"], f["addr"], f["vdst"], f["data"]
    ret, nb, words = bool(f["glc"]), bits // 8, bits // 32

    def ints(v: np.ndarray, reg: int, m2: np.ndarray) -> list[int]:
        lo = v[reg][m2].tolist()
        if words == 1:
            return lo
        return [x | y << 32 for x, y in zip(lo, v[reg + 1][m2].tolist(), strict=True)]

    def run(ww: Any) -> Any:
        v = ww.v
        got = _wide_addrs(ww, saddr, va, off)
        if got is None:
            return PER_WAVE
        a, m2, addrs = got
        if not len(addrs):
            return None
        d1 = ints(v, data, m2)
        d2 = ints(v, data + words, m2) if nd == 2 else [0] * len(d1)
        mem, olds = ww.mem, []
        for at, x, y in zip(addrs.tolist(), d1, d2, strict=True):
            old = int.from_bytes(mem.read(at, nb), "little")
            mem.write(at, fn(old, x, y).to_bytes(nb, "little"))
            olds.append(old)
        if ret:
            v[vd][m2] = np.array([x & M32 for x in olds], dtype=U32)
            if words == 2:
                v[vd + 1][m2] = np.array([x >> 32 for x in olds], dtype=U32)
        big = np.uint64((1 << 64) - 1)
        lo, hi = np.where(m2, a, big).min(axis=1), np.where(m2, a + U64(nb), U64(0)).max(axis=1)
        ww.log.append((None, lo, hi, False))
        ww.log.append((None, lo, hi, True))
        return None
    return run
