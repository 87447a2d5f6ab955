"""The private segment (scratch): scratch_load/store on gfx11's architected flat scratch.

specs/amd-compute.md §2.4 (COMPUTE_TMPRING_SIZE), §3.2-§3.4 (PRIVATE_SEGMENT_FIXED_SIZE, RSRC2.SCRATCH_EN), §4.1
(the private segment wavefront offset SGPR) and §5.2 (the SCRATCH segment of the FLAT encoding). gfx11 has
*architected flat scratch* (LLVM AMDGPUUsage, processor table: gfx1100 "Architected flat scratch"): the wave's
FLAT_SCRATCH base is set by the hardware at wave launch from the dispatch's scratch base
(COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI, the address shifted right by 8, as tinygrad's driver writes it) plus the wave's
slot times the per-wave size (COMPUTE_TMPRING_SIZE.WAVESIZE, 256-byte units on gfx11, inferred from the size
tinygrad's driver programs); a kernel never sets it (no flat-scratch-init prologue: LLVM19's gfx1100 code has none).

A scratch instruction's per-lane *private* address is ``(SVE ? VGPR[ADDR] : 0) + (SADDR != off ? SGPR[SADDR] : 0) +
OFFSET`` (32 bits; OFFSET the signed 13-bit field). The hardware interleaves private memory by dword across the
lanes of a wave (AMDGPUUsage "Memory Spaces", Private: "accessed in an interleaved manner ... by the scratch
instructions ... If each lane of a wavefront accesses the same private address, the interleaving results in
adjacent dwords being accessed"): byte ``p`` of lane ``l`` lives at ``FLAT_SCRATCH + (p // 4) * 4 * 32 + 4 * l +
p % 4`` (wave32), the *swizzled* layout; a multi-dword access is one such dword per 4 bytes. A lane whose private
bytes fall outside the wave's allocation (``WAVESIZE * 256 / 32`` bytes per lane) stops the dispatch with a
:class:`~tinyhw.mocks.rdna3.state.ShaderFault` (the allocation is too small for the kernel).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3.state import M32, ShaderFault, Wave

Fn = Callable[[Wave], Any]
U8, U32, U64 = np.uint8, np.uint32, np.uint64
LANES = 32
#: bytes per COMPUTE_TMPRING_SIZE.WAVESIZE unit on gfx11 (tinygrad's driver: 256-byte alignment off gfx9; inferred)
WAVESIZE_GRANULE = 256

_LOADS = {"b32": (4, False), "b64": (8, False), "b96": (12, False), "b128": (16, False),
          "u8": (1, False), "i8": (1, True), "u16": (2, False), "i16": (2, True)}
_STORES = {"b32": 4, "b64": 8, "b96": 12, "b128": 16, "b8": 1, "b16": 2}
# D16 forms: (bytes, sign-extend, bit position of the register half): a load writes that 16-bit half and keeps the
# other one (u8/i8 zero- or sign-extended to 16 bits), a store_d16_hi stores from bit 16 up (ISA "D16" loads/stores)
_D16_LOADS = {"d16_u8": (1, False, 0), "d16_i8": (1, True, 0), "d16_b16": (2, False, 0),
              "d16_hi_u8": (1, False, 16), "d16_hi_i8": (1, True, 16), "d16_hi_b16": (2, False, 16)}
_D16_STORES = {"d16_hi_b8": 1, "d16_hi_b16": 2}


def lane_bytes(wave_bytes: int) -> int:
    """Private bytes each lane of a wave32 has in a per-wave allocation of ``wave_bytes`` (dword interleave)."""
    return wave_bytes // (4 * LANES) * 4


def swizzle(base: int, private: np.ndarray, lanes: np.ndarray, size: int) -> np.ndarray:
    """(k, size) GPU VAs of ``size`` bytes at each lane's private address (the dword interleave of wave32)."""
    p = private.astype(np.int64)[:, None] + np.arange(size, dtype=np.int64)
    return (base + (p >> 2) * (4 * LANES) + 4 * lanes.astype(np.int64)[:, None] + (p & 3)).astype(U64)


def compile_scratch(inst: Any, bad: Callable[[str], Exception], pc: int = 0) -> Fn:
    """Compile a scratch_load/scratch_store, the D16 forms too (SCRATCH segment of the FLAT encoding), into a function
    that runs it on the wave's active lanes through the wave's private segment (the module docstring gives the
    address rule)."""
    f, m = inst.fields, inst.mnemonic
    off = f["offset"]           # signed 13 bits (the decoder sign-extends it)
    saddr, va, vd, data, sve = f["saddr"], f["addr"], f["vdst"], f["data"], f["sve"]
    if saddr > 107 and saddr not in (0x7C, 125):     # an SGPR, VCC, M0 or off (NULL)
        raise bad(f"SADDR {saddr} as a scratch offset")

    def private(w: Wave, lanes: np.ndarray) -> np.ndarray:
        p = np.full(len(lanes), off, dtype=np.int64)
        if sve:
            p += w.v[va, lanes].astype(np.int64)
        if saddr != 0x7C:
            p += w.s[saddr]
        return p & M32

    def where(w: Wave, lanes: np.ndarray, size: int) -> np.ndarray:
        if not w.scratch_size:
            raise ShaderFault("a scratch access in a wave without a private segment (RSRC2.SCRATCH_EN is 0)", pc=pc,
                              mnemonic=m, encoding="-")
        p = private(w, lanes)
        limit = lane_bytes(w.scratch_size)
        over = p + size > limit
        if over.any():
            i = int(np.flatnonzero(over)[0])
            raise ShaderFault(f"lane {int(lanes[i])} accesses private bytes {int(p[i])}..{int(p[i]) + size - 1}, "
                              f"beyond the {limit} bytes per lane of COMPUTE_TMPRING_SIZE.WAVESIZE "
                              f"({w.scratch_size} bytes per wave)", pc=pc, mnemonic=m, encoding="-")
        return swizzle(w.scratch, p, lanes, size)

    kind, _, suffix = m.removeprefix("scratch_").partition("_")
    if kind == "load" and suffix in _LOADS:
        size, signed = _LOADS[suffix]
        n = max(size // 4, 1)

        def load(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            addrs = where(w, lanes, size)
            raw = np.frombuffer(_gather(w.mem, addrs.reshape(-1)), dtype=U8).reshape(len(lanes), size)
            if size >= 4:
                vals = np.ascontiguousarray(raw).view("<u4")
            else:
                vals = raw.view("<u2" if size == 2 else "u1").astype(U32)
                if signed:
                    b = 8 * size
                    vals = (vals ^ U32(1 << (b - 1))) - U32(1 << (b - 1))
            w.v[vd:vd + n, lanes] = vals.T
        return load
    if kind == "store" and suffix in _STORES:
        size = _STORES[suffix]
        n = max(size // 4, 1)

        def store(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            addrs = where(w, lanes, size)
            vals = np.ascontiguousarray(w.v[data:data + n, lanes].T)
            raw = vals.view(U8).reshape(len(lanes), 4 * n)[:, :size]
            _scatter(w.mem, addrs.reshape(-1), np.ascontiguousarray(raw).reshape(-1))
        return store
    if kind == "load" and suffix in _D16_LOADS:
        size, signed, shift = _D16_LOADS[suffix]
        keep = U32(0xFFFF << (16 - shift))

        def load_d16(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            raw = np.frombuffer(_gather(w.mem, where(w, lanes, size).reshape(-1)), dtype=U8).reshape(len(lanes), size)
            val = raw.view("<u2" if size == 2 else "u1").reshape(len(lanes)).astype(U32)
            if signed:
                val = ((val ^ U32(0x80)) - U32(0x80)) & U32(0xFFFF)
            w.v[vd, lanes] = (w.v[vd, lanes] & keep) | (val << U32(shift))
        return load_d16
    if kind == "store" and suffix in _D16_STORES:
        size = _D16_STORES[suffix]

        def store_d16(w: Wave) -> None:
            lanes = np.nonzero(w.mask())[0]
            if not len(lanes):
                return
            raw = np.ascontiguousarray(w.v[data, lanes]).view(U8).reshape(len(lanes), 4)[:, 2:2 + size]
            _scatter(w.mem, where(w, lanes, size).reshape(-1), np.ascontiguousarray(raw).reshape(-1))
        return store_d16
    raise bad("scratch opcode not modelled")


def _runs(addrs: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int]]]:
    order = np.argsort(addrs, kind="stable")
    sa = addrs[order]
    brk = (np.nonzero(np.diff(sa) != 1)[0] + 1).tolist()
    return order, list(zip([0, *brk], [*brk, len(sa)], strict=True))


def _gather(mem: Any, addrs: np.ndarray) -> bytes:
    """The bytes at ``addrs`` (one per address), read through ``mem.read`` one run of adjacent bytes at a time."""
    out = np.empty(len(addrs), dtype=U8)
    order, bounds = _runs(addrs)
    for s, e in bounds:
        out[order[s:e]] = np.frombuffer(mem.read(int(addrs[order[s]]), e - s), dtype=U8)
    return out.tobytes()


def _scatter(mem: Any, addrs: np.ndarray, data: np.ndarray) -> None:
    """Write ``data[i]`` at ``addrs[i]`` (distinct addresses: every lane has its own), one write per run."""
    order, bounds = _runs(addrs)
    for s, e in bounds:
        mem.write(int(addrs[order[s]]), data[order[s:e]].tobytes())
