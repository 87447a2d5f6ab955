"""The rare forms of the shader core, by mnemonic (RDNA3 ISA reference guide; :data:`COMPILERS` joins
:data:`tinyhw.mocks.rdna3.extra.COMPILERS`).

- ``ds_condxchg32_rtn_b64``: the guide's pseudocode (ADDR0 = (ADDR + offset) & 0xFFF8, ADDR1 = ADDR0 + 4; each half
  of DATA is written, without its top bit, iff that bit is set; the old dwords are returned), lane by lane.
- ``ds_bvh_stack_rtn_b32``: the guide's push/pop pseudocode on a per-lane stack; ADDR = {stack_base[15:2] (bits
  31:18), stack size (17:16), stack_index (15:0, a byte index)}, the stack size from OFFSET1[5:4] (8, 16, 32 or 64
  dwords, as the instruction text says); the guide does not define INVALID_NODE nor how the index wraps: the model
  takes 0xFFFFFFFF and wraps the index modulo the stack size (the "short stack ... wraps around" of section 12.5.3),
  and reads and writes at stack_base + stack_index as the pseudocode does; choices not checked on hardware. The
  sources conflict: the guide's own DS field table puts the stack size in ADDR ("stack_addr[17:16] =
  stack_size[1:0]"), and AMD's GPURT emulation of the instruction (``BVHStackDXR.hlsl`` ``ds_store_stack``)
  pushes W, Z, Y and returns X, counts entries (not bytes) 128 bytes apart, and decrements before the pop's read;
  the model keeps the instruction pseudocode's reading (OFFSET1[5:4], X/Y/Z pushed, W returned).
- LDSDIR ``lds_direct_load`` (M0[15:0] the byte address, M0[18:16] the type: u8, u16, b32, -, i8, i16) and
  ``lds_param_load`` (M0 = {new_prim_mask[15:1] (30:16), lds_param_offset (15:0)}: lane j < 3 of quad q gets the
  dword param_offset + 4 x (ATTR x prims x 12 + prim(q) x 12 + 4 j + ATTR_CHAN), prim(q) the count of
  new-primitive bits 1..q, prims = 1 + those of the wave's quads 1..7; lane 3 gets 0): both write every lane of a
  quad with an active lane (EXEC per quad) and are skipped when EXEC is 0; WAIT_VDST waits for nothing (the VALU
  completes at issue). A compute wave reads its workgroup's LDS exactly as the formula says.
- ``buffer_load_lds_{u8,i8,u16,i16,b32,format_x}``: the plain load's V# address and range checks
  (:mod:`tinyhw.mocks.rdna3.buffer`, :mod:`tinyhw.mocks.rdna3.bufformat`), the dword it would return (sub-dword
  loads zero- or sign-extended, out of range 0) written to LDS at M0[15:0] + OFFSET + 4 x lane instead of a VGPR
  (the LDS address rule AMD's CDNA3 guide gives for its buffer loads to LDS; the RDNA3 guide gives none, so this
  and the extension are the model's choice); an LDS address out of range drops the write.
- ``s_rfe_b64``: PRIV = 0 (a wave of the model never is in a trap handler) and PC = S0.
- ``s_sendmsg_rtn_b32/b64`` (the message in SSRC0): GET_DOORBELL (0x80) the dispatch's doorbell id
  (:attr:`DispatchRegs.doorbell`; 0x0bad without a queue, as the guide says), GET_DDID (0x81) its dispatch id,
  GET_TMA (0x82) and GET_TBA (0x85) 0 (no trap handler is installed), GET_REALTIME (0x83) the REFCLK count: the
  model has no clock, so each read returns the wave's count of clock reads (starting at 1), monotonic and
  deterministic; a 64-bit value to the _b32 form gives its low half, a 32-bit value to _b64 zero-extends. SAVE_WAVE
  (0x84, trap handler only: MSG_ILLEGAL_RTN for a user wave), 0xFF and any other id stop the dispatch
  (:class:`ShaderFault`).
- ``s_sethalt 1`` (either HALT or FATAL_HALT) and ``s_sendmsghalt``: the wave halts and only the host can resume it;
  a lone dispatch never completes, so the model stops it (:class:`ShaderFault`). ``s_setkill 1``: the wave is
  killed: it ends there (as ``s_endpgm``; the other waves go on, a barrier waits only for the living ones).
- ``s_subvector_loop_begin/end``: the RDNA2 guide's pseudocode (the RDNA3 guide lists the opcodes without text):
  begin: EXEC == 0 jumps to the label; else EXEC_LO == 0 gives D = EXEC_LO; else D = EXEC_HI, EXEC_HI = 0. End:
  EXEC_HI != 0 gives EXEC_LO = D; else D == 0 does nothing; else EXEC_HI = D, D = EXEC_LO, EXEC_LO = 0 and a jump
  to the label (PC + 4 + 4 x SIMM16). A wave32 runs it on its EXEC_LO/EXEC_HI SGPRs as written.
- ``s_getreg_b32``/``s_setreg_b32``/``s_setreg_imm32_b32`` of every hardware register a compute wave has (see
  :func:`hwreg_value`); MODE stays :mod:`tinyhw.mocks.rdna3.salu`'s.
- FLAT ``flat_*`` into the apertures of SH_MEM_BASES (``Addr[63:32] == {base, 16 zero bits}``, a base of 0
  disabling the aperture): the LDS aperture reaches the workgroup's LDS at the address's low 32 bits (the DS form
  of the instruction: ``Vaddr + Ioff - sharedApertureBase``), the private aperture the wave's scratch with the
  swizzle of the SCRATCH instructions (``FLAT_SCRATCH + swizzle(Voff + Ioff - privApertureBase, TID)``, the
  guide's FLAT addressing table), global addresses stay global; an address in neither and not canonical (the
  "hole") faults. The aperture test reads the VGPR address without the instruction offset (the RDNA4 guide's
  "Flat Addressing": "The aperture test uses only the base address, not the IOFFSET"; the RDNA3 text the model
  could read says nothing against it), the access then adds the offset in its space. Atomics into the private
  aperture are applied lane by lane to the lane's swizzled bytes;
  ``flat_atomic_csub_u32`` into LDS (no DS form) is refused.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.formats.rdna3_ops import OPS
from tinyhw.mocks.rdna3 import salu, scratch, vmem
from tinyhw.mocks.rdna3.state import (
    EXEC,
    M0,
    M32,
    M64,
    NULL,
    SH_MEM_BASES_DEFAULT,
    ShaderFault,
    Unimplemented,
    Wave,
    s_get64,
    s_put,
)

__all__ = ["COMPILERS", "HwInfo", "hwreg_value"]

Fn = Callable[[Wave], Any]
Bad = Callable[[str], Exception]
U8, U32, U64, I64 = np.uint8, np.uint32, np.uint64, np.int64
EXEC_HI, VCC = EXEC + 1, 106
INVALID_NODE = 0xFFFFFFFF           # the BVH stack's invalid node pointer (not defined by the guide; the model's)
_NAMES = frozenset(m for m, _t in OPS.values())


@dataclasses.dataclass(frozen=True)
class HwInfo:
    """What a wave of a dispatch reads from the hardware beyond its own registers: SH_MEM_BASES, the doorbell and
    dispatch ids, the VGPRs per wave (RSRC1), the waves per workgroup and the IDs HW_ID2 reports (ME 1: compute;
    queue, pipe and VMID 0: the model runs one queue)."""

    sh_mem_bases: int = SH_MEM_BASES_DEFAULT
    doorbell: int | None = None
    dispatch_id: int = 0
    waves_per_group: int = 1

    @classmethod
    def of(cls, regs: Any, waves_per_group: int) -> HwInfo:
        """The information of dispatch ``regs`` (a :class:`~tinyhw.mocks.rdna3.dispatch.DispatchRegs`)."""
        return cls(regs.sh_mem_bases & M32, regs.doorbell, regs.dispatch_id & M32, waves_per_group)


_DEFAULT_HW = HwInfo()


def _hw(w: Wave) -> HwInfo:
    return _DEFAULT_HW if w.hw is None else w.hw


def _fault(msg: str, inst: Any, pc: int) -> ShaderFault:
    return ShaderFault(msg, pc=pc, mnemonic=inst.name, encoding="-")


def _lds_read(w: Wave, a: int, n: int = 4) -> int:
    """``n`` bytes of LDS at byte ``a`` as an int; 0 out of range."""
    if a < 0 or a + n > len(w.lds):
        return 0
    return int.from_bytes(w.lds[a:a + n].tobytes(), "little")


def _lds_write(w: Wave, a: int, x: int, n: int = 4) -> None:
    """Write ``n`` bytes of ``x`` at LDS byte ``a``; dropped out of range."""
    if a >= 0 and a + n <= len(w.lds):
        w.lds[a:a + n] = np.frombuffer((x & ((1 << 8 * n) - 1)).to_bytes(n, "little"), dtype=U8)


# ---- DS ------------------------------------------------------------------------------------------------------------

def _condxchg(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    if f["gds"]:
        raise bad("GDS is not modelled")
    off, va, vd, d0 = f["offset1"] << 8 | f["offset0"], f["addr"], f["vdst"], f["data0"]

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0].tolist()
        rets = []
        for lane in lanes:                  # lane by lane, in lane order
            a0 = (int(w.v[va, lane]) + off) & 0xFFF8
            data = int(w.v[d0, lane]) | int(w.v[d0 + 1, lane]) << 32
            r0 = _lds_read(w, a0)
            if data >> 31 & 1:
                _lds_write(w, a0, data & 0x7FFFFFFF)
            r1 = _lds_read(w, a0 + 4)
            if data >> 63 & 1:
                _lds_write(w, a0 + 4, data >> 32 & 0x7FFFFFFF)
            rets.append((r0, r1))
        for lane, (r0, r1) in zip(lanes, rets, strict=True):
            w.v[vd, lane], w.v[vd + 1, lane] = r0, r1
    return run


def _bvh_stack(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    if f["gds"]:
        raise bad("GDS is not modelled")
    va, vd, last_r, d1 = f["addr"], f["vdst"], f["data0"], f["data1"]
    span = 4 * (8 << (f["offset1"] >> 4 & 3))      # stack bytes: 8, 16, 32 or 64 dwords

    def run(w: Wave) -> None:
        for lane in np.nonzero(w.mask())[0].tolist():
            sa = int(w.v[va, lane])
            base, idx = (sa >> 18) << 2, (sa & 0xFFFF) % span
            last = int(w.v[last_r, lane])
            data = [int(w.v[d1 + i, lane]) for i in range(4)]

            def valid(d: int, last: int = last) -> bool:
                return d != INVALID_NODE and not (last != INVALID_NODE and d == last)
            for d in data[:3]:              # push the valid ones; a match of the last node ends the pushes
                if valid(d):
                    _lds_write(w, base + idx, d)
                    idx = (idx + 4) % span
                elif d == last:
                    break
            if valid(data[3]):
                ret = data[3]
            else:                           # pop
                ret = _lds_read(w, base + idx)
                _lds_write(w, base + idx, INVALID_NODE)
                idx = (idx - 4) % span
            w.v[va, lane] = (sa & ~0xFFFF & M32) | idx
            w.v[vd, lane] = ret
    return run


# ---- LDSDIR --------------------------------------------------------------------------------------------------------

def _quads(w: Wave) -> np.ndarray:
    """The lanes of every quad with an active lane (LDSDIR writes whole quads)."""
    m = w.mask().reshape(8, 4).any(axis=1)
    return np.nonzero(np.repeat(m, 4))[0]


_DIRECT_TYPES = {0: (1, False), 1: (2, False), 2: (4, False), 4: (1, True), 5: (2, True)}


def _lds_direct(inst: Any, pc: int, bad: Bad) -> Fn:
    vd = inst.fields["vdst"]

    def run(w: Wave) -> None:
        lanes = _quads(w)
        if not len(lanes):
            return
        m0 = w.s[M0]
        kind = _DIRECT_TYPES.get(m0 >> 16 & 7)
        if kind is None:
            raise _fault(f"lds_direct_load data type {m0 >> 16 & 7} (M0[18:16]) is reserved", inst, pc)
        n, signed = kind
        x = _lds_read(w, m0 & 0xFFFF, n)
        if signed and x >> (8 * n - 1):
            x -= 1 << 8 * n
        w.v[vd, lanes] = x & M32
    return run


def _lds_param(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    vd, attr, chan = f["vdst"], f["attr"], f["attrchan"]

    def run(w: Wave) -> None:
        lanes = _quads(w)
        if not len(lanes):
            return
        m0 = w.s[M0]
        offset, newprim = m0 & 0xFFFF, (m0 >> 16 & 0x7FFF) << 1 | 1      # bit 0: the implied first primitive
        prim_of = [(newprim & ((2 << q) - 1)).bit_count() - 1 for q in range(8)]
        prims = prim_of[7] + 1
        for lane in lanes.tolist():
            q, j = divmod(lane, 4)
            dword = attr * prims * 12 + prim_of[q] * 12 + 4 * j + chan
            w.v[vd, lane] = _lds_read(w, offset + 4 * dword) if j < 3 else 0
    return run


# ---- buffer loads to LDS -------------------------------------------------------------------------------------------

def _buffer_lds(inst: Any, pc: int, bad: Bad) -> Fn:
    f = inst.fields
    if f["tfe"]:
        raise bad("TFE is not modelled")
    plain_name = inst.mnemonic.replace("buffer_load_lds_", "buffer_load_")
    plain = vmem.compile_mubuf(dataclasses.replace(inst, mnemonic=plain_name, fields={**f, "vdata": 0, "lds": 0}),
                               bad)
    off = f["offset"]

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        keep = w.v[0, lanes].copy()         # the plain load returns into VGPR0, put back afterwards
        try:
            plain(w)
            vals = w.v[0, lanes].copy()
        finally:
            w.v[0, lanes] = keep
        base = (w.s[M0] & 0xFFFF) + off
        for lane, x in zip(lanes.tolist(), vals.tolist(), strict=True):
            _lds_write(w, base + 4 * lane, x)
    return run


# ---- scalar control ------------------------------------------------------------------------------------------------

def _rfe(inst: Any, pc: int, bad: Bad) -> Fn:
    a = s_get64(inst.fields["ssrc0"], inst.fields.get("literal"), bad)
    return lambda w: a(w) & ((1 << 48) - 1)      # PRIV = 0 (never set in the model); PC = S0


MSG_RTN_GET_DOORBELL, MSG_RTN_GET_DDID, MSG_RTN_GET_TMA, MSG_RTN_GET_REALTIME = 0x80, 0x81, 0x82, 0x83
MSG_RTN_SAVE_WAVE, MSG_RTN_GET_TBA, MSG_ILLEGAL_RTN = 0x84, 0x85, 0xFF


def realtime(w: Wave) -> int:
    """The REFCLK count a read of REALTIME returns (see the module text): the wave's clock reads so far, this one
    included."""
    w.ticks += 1
    return w.ticks


def _sendmsg_rtn(inst: Any, pc: int, bad: Bad) -> Fn:
    d, msg, wide = inst.fields["sdst"], inst.fields["ssrc0"] & 0xFF, inst.mnemonic.endswith("b64")
    if wide and d & 1 and d != NULL:
        raise bad("s_sendmsg_rtn_b64 into an odd SGPR")
    getters: dict[int, Callable[[Wave], int]] = {
        MSG_RTN_GET_DOORBELL: lambda w: 0x0BAD if _hw(w).doorbell is None else _hw(w).doorbell or 0,
        MSG_RTN_GET_DDID: lambda w: _hw(w).dispatch_id,
        MSG_RTN_GET_TMA: lambda w: 0, MSG_RTN_GET_TBA: lambda w: 0,
        MSG_RTN_GET_REALTIME: realtime,
    }
    get = getters.get(msg)
    if get is None:
        why = ("MSG_RTN_SAVE_WAVE is the trap handler's (MSG_ILLEGAL_RTN for a user wave)" if msg == MSG_RTN_SAVE_WAVE
               else "MSG_ILLEGAL_RTN" if msg == MSG_ILLEGAL_RTN else "not a message the guide lists")

        def illegal(w: Wave) -> None:
            raise _fault(f"s_sendmsg_rtn message 0x{msg:x}: {why}", inst, pc)
        return illegal

    def run(w: Wave) -> None:
        x = get(w) & M64
        s_put(w, d, x)
        if wide:
            s_put(w, d + 1, x >> 32)
    return run


def _halt(inst: Any, pc: int, bad: Bad) -> Fn:
    def run(w: Wave) -> None:
        raise _fault(f"{inst.mnemonic}: the wave halted (only the host resumes a halted wave, and the model has "
                     "none: the dispatch would never complete)", inst, pc)
    return run


def _sethalt(inst: Any, pc: int, bad: Bad) -> Fn:
    if inst.fields["simm16"] & 1:      # HALT or, with SIMM16[2], FATAL_HALT set
        return _halt(inst, pc, bad)
    return lambda w: None              # clearing a bit that is never set


def _setkill(inst: Any, pc: int, bad: Bad) -> Fn:
    if inst.fields["simm16"] & 1:
        return lambda w: salu.END       # the wave is killed: it ends here
    return lambda w: None


def _subvector(inst: Any, pc: int, bad: Bad) -> Fn:
    d, k = inst.fields["sdst"], inst.fields["simm16"]
    target = pc + 4 + 4 * (k - 0x10000 if k & 0x8000 else k)
    if d == NULL or d > 105:
        raise bad("s_subvector_loop with a destination outside the SGPRs")

    def begin(w: Wave) -> int | None:
        lo, hi = w.s[EXEC], w.s[EXEC_HI]
        if not lo and not hi:
            return target               # no pass: skip the loop
        if not lo:
            w.s[d] = lo                 # the high pass only
        else:
            w.s[d], w.s[EXEC_HI] = hi, 0   # the low pass first
        return None

    def end(w: Wave) -> int | None:
        if w.s[EXEC_HI]:
            w.s[EXEC] = w.s[d]
            return None
        if not w.s[d]:
            return None                 # the low pass is done and there is no high pass
        w.s[EXEC_HI], w.s[d], w.s[EXEC] = w.s[d], w.s[EXEC], 0
        return target
    return begin if inst.mnemonic.endswith("begin") else end


# ---- hardware registers --------------------------------------------------------------------------------------------

HW_REG_MODE, HW_REG_STATUS, HW_REG_TRAPSTS, HW_REG_GPR_ALLOC, HW_REG_LDS_ALLOC, HW_REG_IB_STS = 1, 2, 3, 5, 6, 7
HW_REG_FLUSH_IB, HW_REG_SH_MEM_BASES, HW_REG_FLAT_SCR_LO, HW_REG_FLAT_SCR_HI = 14, 15, 20, 21
HW_REG_HW_ID1, HW_REG_HW_ID2, HW_REG_SHADER_CYCLES = 23, 24, 29
#: ids llvm-mc-19 names for gfx1100 that the model does not have (performance snapshots of the SQ)
_NOT_MODELLED = {18: "PERF_SNAPSHOT_PC_LO", 19: "PERF_SNAPSHOT_PC_HI", 27: "PERF_SNAPSHOT_DATA"}
#: bytes per LDS_ALLOC.LDS_SIZE unit: 64 dwords, as Linux's gfx10/gfx11 trap handler reads the field
#: (``cwsr_trap_handler_gfx10.asm``: ``SQ_WAVE_LDS_ALLOC_GRANULARITY = 8``, the size in bytes is LDS_SIZE << 8);
#: not RSRC2.LDS_SIZE's 128-dword granule
LDS_GRANULE = 256
#: VGPRs per GPR_ALLOC.VGPR_SIZE unit (the same handler: "Number of VGPRs = (vgpr_size + 1) * 4"), not RSRC1's
#: wave32 granule of 8
VGPR_GRANULE = 4


def hwreg_value(w: Wave, hid: int) -> int:
    """The 32-bit value ``s_getreg_b32`` reads from hardware register ``hid`` of wave ``w`` (guide section 3.4;
    field positions of STATUS, HW_ID1/2 from the guide, of GPR_ALLOC/LDS_ALLOC from Linux's gfx11 trap handler):

    - STATUS: SCC (0), EXECZ (9), VCCZ (10), IN_WG (11: more than one wave in the workgroup), VALID (16),
      SCRATCH_EN (29); PRIV, TRAP_EN, HALT and the priorities are 0 (no trap handler, no host);
    - TRAPSTS: the wave's own (it starts at 0; the model does not record exceptions in it);
    - GPR_ALLOC: VGPR_SIZE (19:12) = VGPRs / 4 - 1 (:data:`VGPR_GRANULE`), SGPR_SIZE 0 (gfx11: fixed SGPRs);
    - LDS_ALLOC: LDS_SIZE (20:12) = the workgroup's LDS / 256 bytes (:data:`LDS_GRANULE`), LDS_BASE 0;
    - IB_STS: 0 (memory completes at issue: nothing is outstanding);
    - FLUSH_IB: 0 (write-only); SH_MEM_BASES: the dispatch's; FLAT_SCRATCH_LO/HI: the wave's scratch base (0
      without scratch);
    - HW_ID1: WAVE_ID (4:0) = the wave's index in its workgroup (mod 32), SIMD (9:8), WGP (13:10), SA (16) and SE
      (20:18) 0, DP_RATE (31:29) 1 (a value no source read here defines: a choice); HW_ID2 (QUEUE 3:0, PIPE 5:4,
      ME 9:8, STATE 14:12, WG 20:16, VM 27:24, as umr decodes gfx10+): ME_ID 1 (MEC1, compute), the others 0 (the
      guide calls both "not predictable values": the model's choice);
    - SHADER_CYCLES: the 20-bit count of the wave's clock reads (no clock is modelled: monotonic and deterministic).
    """
    if hid == HW_REG_MODE:
        return w.mode
    if hid == HW_REG_STATUS:
        return (w.scc | int(not w.s[EXEC]) << 9 | int(not w.s[VCC]) << 10
                | int(_hw(w).waves_per_group > 1) << 11 | 1 << 16 | int(w.scratch_size > 0) << 29)
    if hid == HW_REG_TRAPSTS:
        return w.trapsts
    if hid == HW_REG_GPR_ALLOC:
        return (-(-len(w.v) // VGPR_GRANULE) - 1 & 0xFF) << 12
    if hid == HW_REG_LDS_ALLOC:
        return (len(w.lds) // LDS_GRANULE & 0x1FF) << 12
    if hid in (HW_REG_IB_STS, HW_REG_FLUSH_IB):
        return 0
    if hid == HW_REG_SH_MEM_BASES:
        return _hw(w).sh_mem_bases
    if hid == HW_REG_FLAT_SCR_LO:
        return w.scratch & M32
    if hid == HW_REG_FLAT_SCR_HI:
        return w.scratch >> 32 & M32
    if hid == HW_REG_HW_ID1:
        return (w.index & 0x1F) | 1 << 29
    if hid == HW_REG_HW_ID2:
        return 1 << 8
    if hid == HW_REG_SHADER_CYCLES:
        return realtime(w) & 0xFFFFF
    raise AssertionError(hid)


_READABLE = frozenset({HW_REG_MODE, HW_REG_STATUS, HW_REG_TRAPSTS, HW_REG_GPR_ALLOC, HW_REG_LDS_ALLOC, HW_REG_IB_STS,
                       HW_REG_FLUSH_IB, HW_REG_SH_MEM_BASES, HW_REG_FLAT_SCR_LO, HW_REG_FLAT_SCR_HI, HW_REG_HW_ID1,
                       HW_REG_HW_ID2, HW_REG_SHADER_CYCLES})


def _hwreg(inst: Any, pc: int, bad: Bad) -> Fn:
    """s_getreg/s_setreg of a hardware register other than MODE (MODE: salu's). Writes: TRAPSTS takes the written
    bits (the guide: written by the user shader); the read-only registers ignore them (writeableBitMask is 0 for a
    user wave: STATUS, FLAT_SCRATCH and the IDs are writable only in a trap handler), as does FLUSH_IB (no
    instruction buffer is modelled)."""
    f, m = inst.fields, inst.mnemonic
    simm = f["simm16"]
    hid, off, size = simm & 0x3F, simm >> 6 & 0x1F, (simm >> 11 & 0x1F) + 1
    if hid == HW_REG_MODE:
        return salu.compile_sopk(inst, bad, pc)
    if hid in _NOT_MODELLED:
        raise bad(f"hardware register {hid} ({_NOT_MODELLED[hid]}) is not modelled")
    if hid not in _READABLE:
        raise bad(f"hardware register {hid} (no gfx11 register has that id)")
    mask = ((1 << size) - 1) << off & M32
    d = f["sdst"]
    if m == "s_getreg_b32":
        return lambda w: s_put(w, d, (hwreg_value(w, hid) & mask) >> off)
    if hid != HW_REG_TRAPSTS:
        return lambda w: None
    if m == "s_setreg_imm32_b32":
        if f.get("literal") is None:
            raise bad("s_setreg_imm32_b32 without its literal")
        lit = f["literal"]

        def setimm(w: Wave) -> None:
            w.trapsts = (w.trapsts & ~mask) | (lit << off & mask)
        return setimm

    def setreg(w: Wave) -> None:        # the SDST field names the source SGPR
        w.trapsts = (w.trapsts & ~mask) | ((0 if d == NULL else w.s[d]) << off & mask)
    return setreg


# ---- FLAT into the apertures ---------------------------------------------------------------------------------------

def _ds_name(flat: str, ret: bool) -> tuple[str, int] | None:
    """(the DS mnemonic doing what FLAT mnemonic ``flat`` does on LDS, the DATA1 offset in VGPRs) or None."""
    rest = flat.removeprefix("flat_")
    kind, _, suffix = rest.partition("_")
    d16 = {"load_d16_u8": "load_u8_d16", "load_d16_hi_u8": "load_u8_d16_hi", "load_d16_i8": "load_i8_d16",
           "load_d16_hi_i8": "load_i8_d16_hi", "load_d16_b16": "load_u16_d16", "load_d16_hi_b16": "load_u16_d16_hi",
           "store_d16_hi_b8": "store_b8_d16_hi", "store_d16_hi_b16": "store_b16_d16_hi"}
    if rest in d16:
        return "ds_" + d16[rest], 0
    if kind in ("load", "store"):
        return f"ds_{rest}", 0
    op, _, typ = suffix.rpartition("_")
    words = 2 if typ.endswith("64") else 1
    if op == "swap":
        return f"ds_storexchg_rtn_{typ}", 0
    if op == "cmpswap":
        return f"ds_cmpstore{'_rtn' if ret else ''}_{typ}", words
    return f"ds_{op}{'_rtn' if ret else ''}_{typ}", 0


def _flat(inst: Any, pc: int, bad: Bad) -> Fn:
    """A FLAT (SEG 0) instruction with the apertures (see the module text): the global path for canonical
    addresses, the DS form for the LDS aperture, the SCRATCH form for the private one, each on its own lanes."""
    if inst.fields["seg"] == 0:       # FLAT: OFFSET is 12 bits unsigned, the field's MSB ignored (vmem.flat_offset)
        inst = dataclasses.replace(inst, fields={**inst.fields, "offset": vmem.flat_offset(inst.fields["offset"])})
    f, m = inst.fields, inst.mnemonic
    plain = vmem.compile_global(inst, bad)
    if f["seg"] != 0:
        return plain
    off, va, vd = f["offset"], f["addr"], f["vdst"]
    atomic = m.startswith("flat_atomic_")
    ret = bool(f.get("glc")) if atomic else True
    named = _ds_name(m, ret)
    lds_fn: Fn | None = None
    why = f"{m} has no DS form on LDS"
    if named is not None and named[0] in _NAMES:
        ds, extra_words = named
        fields = {"offset0": off & 0xFF, "offset1": off >> 8 & 0xFF, "gds": 0, "vdst": vd, "data0": f["data"],
                  "data1": f["data"] + extra_words, "addr": va}
        try:
            lds_fn = vmem.compile_ds(dataclasses.replace(inst, encoding="DS", mnemonic=ds, fields=fields), bad)
        except Unimplemented as e:
            why = str(e)
    keep_vdst = atomic and not ret and named is not None and "_rtn_" in named[0]   # swap without GLC
    words = 2 if m.endswith("64") else 1
    priv_fn: Fn | None = None
    if not atomic:
        sf = {**f, "seg": 1, "sve": 1, "saddr": 0x7C}
        priv_fn = scratch.compile_scratch(dataclasses.replace(inst, mnemonic=m.replace("flat_", "scratch_", 1),
                                                              fields=sf), bad, pc)
    elif vmem._atomic_op(m.removeprefix("flat_atomic_")) is not None:
        priv_fn = _private_atomic(inst, pc, ret)

    def run(w: Wave) -> None:
        e = w.s[EXEC]
        lanes = np.nonzero(w.mask())[0]
        if not len(lanes):
            return
        a = w.v[va, lanes].astype(U64) | w.v[va + 1, lanes].astype(U64) << U64(32)     # the test omits IOFFSET
        hi = (a >> U64(32)).astype(U64)
        smb = _hw(w).sh_mem_bases
        shared, private = smb >> 16 & 0xFFFF, smb & 0xFFFF
        in_lds = (hi == U64(shared << 16)) if shared else np.zeros(len(lanes), bool)
        in_priv = (hi == U64(private << 16)) if private else np.zeros(len(lanes), bool)
        top = a >> U64(47)
        hole = ~in_lds & ~in_priv & (top != U64(0)) & (top != U64((1 << 17) - 1))
        if hole.any():
            i = int(np.flatnonzero(hole)[0])
            raise _fault(f"lane {int(lanes[i])}: FLAT address 0x{int(a[i]):x} is in no aperture and not canonical "
                         "(MEMVIOL)", inst, pc)
        if not in_lds.any() and not in_priv.any():
            plain(w)
            return
        parts = [(~in_lds & ~in_priv, plain, ""), (in_lds, lds_fn, why),
                 (in_priv, priv_fn, f"{m} on the private aperture (scratch)")]
        try:
            for sel, fn, no in parts:
                if not sel.any():
                    continue
                if fn is None:
                    raise Unimplemented(f"not modelled: {no}", pc=pc, mnemonic=inst.name, encoding="-")
                w.s[EXEC] = int(np.bitwise_or.reduce(U64(1) << lanes[sel].astype(U64)))
                if fn is lds_fn and keep_vdst:
                    sub = lanes[sel]
                    saved = w.v[vd:vd + words, sub].copy()
                    fn(w)
                    w.v[vd:vd + words, sub] = saved
                else:
                    fn(w)
        finally:
            w.s[EXEC] = e
    return run


def _private_atomic(inst: Any, pc: int, ret: bool) -> Fn:
    """A FLAT atomic on the private aperture: lane by lane in lane order, the read-modify-write of the lane's own
    private bytes (the SCRATCH swizzle: a 64-bit value's dwords lie 128 bytes apart) with the global atomic's
    operation; the old value returned with GLC. Private bytes past the wave's allocation fault as scratch does."""
    f = inst.fields
    op = vmem._atomic_op(inst.mnemonic.removeprefix("flat_atomic_"))
    if op is None:
        raise Unimplemented(f"not modelled: {inst.mnemonic} on the private aperture", pc=pc, mnemonic=inst.name,
                            encoding="-")
    fn, bits, nd = op
    off, va, vd, data, nb, words = f["offset"], f["addr"], f["vdst"], f["data"], bits // 8, bits // 32

    def run(w: Wave) -> None:
        lanes = np.nonzero(w.mask())[0]
        if not w.scratch_size:
            raise _fault("a private-aperture access in a wave without a private segment", inst, pc)
        p = (w.v[va, lanes].astype(I64) + off) & M32
        limit = scratch.lane_bytes(w.scratch_size)
        if (p + nb > limit).any():
            raise _fault(f"private bytes beyond the {limit} bytes per lane of the wave's allocation", inst, pc)
        addrs = scratch.swizzle(w.scratch, p, lanes, nb)
        d1 = vmem._lane_ints(w, data, lanes, words)
        d2 = vmem._lane_ints(w, data + words, lanes, words) if nd == 2 else [0] * len(d1)
        olds = []
        for row, x, y in zip(addrs, d1, d2, strict=True):
            old = int.from_bytes(scratch._gather(w.mem, row), "little")
            new = fn(old, x, y)
            scratch._scatter(w.mem, row, np.frombuffer(new.to_bytes(nb, "little"), dtype=U8))
            olds.append(old)
        if ret:
            vmem._put_lane_ints(w, vd, lanes, words, olds)
    return run


COMPILERS: dict[str, Callable[[Any, int, Bad], Fn]] = {
    "ds_condxchg32_rtn_b64": _condxchg, "ds_bvh_stack_rtn_b32": _bvh_stack,
    "lds_direct_load": _lds_direct, "lds_param_load": _lds_param,
    **{f"buffer_load_lds_{k}": _buffer_lds for k in ("u8", "i8", "u16", "i16", "b32", "format_x")},
    "s_rfe_b64": _rfe, "s_sendmsg_rtn_b32": _sendmsg_rtn, "s_sendmsg_rtn_b64": _sendmsg_rtn,
    "s_sendmsghalt": _halt, "s_sethalt": _sethalt, "s_setkill": _setkill,
    "s_subvector_loop_begin": _subvector, "s_subvector_loop_end": _subvector,
    "s_getreg_b32": _hwreg, "s_setreg_b32": _hwreg, "s_setreg_imm32_b32": _hwreg,
    **{m: _flat for m in sorted(_NAMES) if m.startswith("flat_")},
}
