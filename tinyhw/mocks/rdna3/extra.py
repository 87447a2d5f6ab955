"""The rest of the scalar and memory instructions of the shader core, by mnemonic (RDNA3 ISA reference guide).

:data:`COMPILERS` maps a mnemonic to a compiler ``(inst, pc, bad) -> function of the wave`` that the dispatcher
consults before its per-encoding handlers:

- the wave64 forms of the EXEC updates, ``s_*_saveexec_b64`` and ``s_and_not{0,1}_wrexec_b64``: the guide's
  pseudocode on the 64-bit EXEC (EXEC_LO, EXEC_HI; a wave32 runs the lanes of EXEC_LO), D = the old EXEC (the new
  one for wrexec), SCC = the new 64-bit EXEC != 0;
- ``s_movrelsd_2_b32``: SGPR[SDST + M0[25:16]] = SGPR[SSRC0 + M0[9:0]];
- ``s_trap``: the wave enters the trap handler; the model has none, so the dispatch stops with :class:`ShaderFault`
  naming the trap id (what the driver's handler reports for ``llvm.trap``); ``s_endpgm_saved`` ends the wave as
  ``s_endpgm``;
- ``ds_append``/``ds_consume`` on LDS: one atomic add (subtract) of popcount(EXEC) at M0 + OFFSET for the whole
  wave, the old value returned to every active lane; nothing happens when EXEC is 0 (the GDS forms are refused:
  GDS is not modelled);
- ``ds_load_addtid_b32``/``ds_store_addtid_b32``: address = OFFSET + M0[15:0] + 4 x lane id (out of range: reads
  0, writes dropped, as the other LDS accesses of the model);
- ``global_load_addtid_b32``/``global_store_addtid_b32``: address = SGPR pair SADDR (0 for ``off``) + the signed
  offset + 4 x lane id, no VGPR address;
- the rarer forms (:mod:`tinyhw.mocks.rdna3.rare`: LDSDIR, buffer loads to LDS, the halts, messages with return,
  hardware registers, FLAT into the apertures ...) join the table from there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.mocks.rdna3 import rare, salu, vmem
from tinyhw.mocks.rdna3.state import EXEC, M0, M32, M64, NULL, ShaderFault, Wave, s_get64, s_put

__all__ = ["COMPILERS"]

Fn = Callable[[Wave], Any]
Bad = Callable[[str], Exception]
U8, U32, U64 = np.uint8, np.uint32, np.uint64
EXEC_HI = EXEC + 1

# S0, EXEC -> the new EXEC (64-bit), the guide's S_*_SAVEEXEC_B64 operations
_SAVEEXEC64: dict[str, Callable[[int, int], int]] = {
    "and": lambda s, e: s & e, "or": lambda s, e: s | e, "xor": lambda s, e: s ^ e,
    "nand": lambda s, e: ~(s & e), "nor": lambda s, e: ~(s | e), "xnor": lambda s, e: ~(s ^ e),
    "and_not0": lambda s, e: ~s & e, "or_not0": lambda s, e: ~s | e,
    "and_not1": lambda s, e: s & ~e, "or_not1": lambda s, e: s | ~e,
}


def _exec64(w: Wave) -> int:
    return w.s[EXEC] | w.s[EXEC_HI] << 32


def _set_exec64(w: Wave, x: int) -> None:
    w.s[EXEC], w.s[EXEC_HI] = x & M32, x >> 32 & M32


def _saveexec64(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    d, op = f["sdst"], _SAVEEXEC64[inst.mnemonic.removeprefix("s_").removesuffix("_saveexec_b64")]
    a = s_get64(f["ssrc0"], f.get("literal"), bad)

    def run(w: Wave) -> None:        # saveexec = EXEC; EXEC = op(S0, EXEC); D = saveexec; SCC = EXEC != 0
        x, e = a(w), _exec64(w)
        new = op(x, e) & M64
        _set_exec64(w, new)
        s_put(w, d, e)
        s_put(w, d + 1, e >> 32)
        w.scc = int(new != 0)
    return run


def _wrexec64(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    d, not0 = f["sdst"], "not0" in inst.mnemonic
    a = s_get64(f["ssrc0"], f.get("literal"), bad)

    def run(w: Wave) -> None:        # EXEC = ~S0 & EXEC (not0) or S0 & ~EXEC (not1); D = EXEC; SCC = EXEC != 0
        x, e = a(w), _exec64(w)
        new = (~x & e if not0 else x & ~e) & M64
        _set_exec64(w, new)
        s_put(w, d, new)
        s_put(w, d + 1, new >> 32)
        w.scc = int(new != 0)
    return run


def _movrelsd2(inst: Any, pc: int, bad: Bad) -> Fn:
    d, src = inst.fields["sdst"], inst.fields["ssrc0"]
    if src > 105 or d > 105:
        raise bad("s_movrelsd_2_b32 outside the SGPRs")

    def run(w: Wave) -> None:
        m0 = w.s[M0]
        s_put(w, d + (m0 >> 16 & 0x3FF), w.s[src + (m0 & 0x3FF)])
    return run


def _trap(inst: Any, pc: int, bad: Bad) -> Fn:
    tid = inst.fields["simm16"] & 0xFF
    words = f"{inst.simm16 & 0xFFFF:04x}"

    def run(w: Wave) -> None:
        raise ShaderFault(f"s_trap {tid}: the wave trapped (no trap handler is modelled; llvm.trap is s_trap 2)",
                          pc=pc, mnemonic=inst.name, encoding=words)
    return run


def _no_gds(inst: Any, bad: Bad) -> Any:
    if inst.fields["gds"]:
        raise bad("GDS is not modelled")
    return inst.fields


def _append(inst: Any, pc: int, bad: Bad) -> Fn:
    f = _no_gds(inst, bad)
    off, vd, sign = f["offset1"] << 8 | f["offset0"], f["vdst"], (1 if inst.mnemonic == "ds_append" else -1)

    def run(w: Wave) -> None:
        e = w.s[EXEC]
        if not e:
            return
        a = (w.s[M0] + off) & M32
        old = 0
        if a + 4 <= len(w.lds):
            old = int.from_bytes(w.lds[a:a + 4].tobytes(), "little")
            new = (old + sign * e.bit_count()) & M32
            w.lds[a:a + 4] = np.frombuffer(new.to_bytes(4, "little"), dtype=U8)
        w.v[vd, w.mask()] = U32(old)
    return run


def _ds_addtid(inst: Any, pc: int, bad: Bad) -> Fn:
    f = _no_gds(inst, bad)
    off, vd, d0, load = f["offset1"] << 8 | f["offset0"], f["vdst"], f["data0"], "load" in inst.mnemonic

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        a = (off + (w.s[M0] & 0xFFFF)) + 4 * lanes.astype(np.int64)
        ok = a + 4 <= len(w.lds)
        idx = np.where(ok, a, 0)[:, None] + np.arange(4)
        if load:
            raw = w.lds[idx] if len(w.lds) else np.zeros(idx.shape, dtype=U8)
            raw[~ok] = 0
            w.v[vd, lanes] = np.ascontiguousarray(raw).view("<u4")[:, 0]
        else:
            data = np.ascontiguousarray(w.v[d0, lanes].astype("<u4")).view(U8).reshape(len(lanes), 4)
            w.lds[idx[ok]] = data[ok]
    return run


def _global_addtid(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    off, saddr, vd, data, load = f["offset"], f["saddr"], f["vdst"], f["data"], "load" in inst.mnemonic
    if saddr != NULL and (saddr & 1 or saddr > 105):
        raise bad("SADDR must be an aligned SGPR pair or off")

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        base = 0 if saddr == NULL else w.s[saddr] | w.s[saddr + 1] << 32
        addrs = U64((base + off) & M64) + U64(4) * lanes.astype(U64)
        if load:
            w.v[vd, lanes] = vmem.gather(w.mem, addrs, 4).view("<u4")[:, 0]
        else:
            vmem.scatter(w.mem, addrs, np.ascontiguousarray(w.v[data, lanes].astype("<u4")).view(U8)
                         .reshape(len(lanes), 4))
    return run


COMPILERS: dict[str, Callable[[Any, int, Bad], Fn]] = {
    **{f"s_{k}_saveexec_b64": _saveexec64 for k in _SAVEEXEC64},
    "s_and_not0_wrexec_b64": _wrexec64, "s_and_not1_wrexec_b64": _wrexec64,
    "s_movrelsd_2_b32": _movrelsd2,
    "s_trap": _trap,
    "s_endpgm_saved": lambda i, pc, bad: (lambda w: salu.END),
    "ds_append": _append, "ds_consume": _append,
    "ds_load_addtid_b32": _ds_addtid, "ds_store_addtid_b32": _ds_addtid,
    "global_load_addtid_b32": _global_addtid, "global_store_addtid_b32": _global_addtid,
    **rare.COMPILERS,
}
