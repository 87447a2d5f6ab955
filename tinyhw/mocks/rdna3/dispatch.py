"""The dispatcher: workgroups -> wave32 waves with the documented initial state, run to completion.

specs/amd-compute.md §4 (initial wave state) and §2.4-§2.5 (the COMPUTE_* registers a DISPATCH_DIRECT
samples). :func:`run_dispatch` takes the register values a command processor holds at DISPATCH_DIRECT
(:class:`DispatchRegs`), a memory object on GPU virtual addresses, and runs every workgroup: its
waves share one LDS array and are stepped cooperatively, each until it reaches ``s_barrier`` or
``s_endpgm``; when every live wave of the workgroup waits at the barrier they are released together.
Workgroups run one after another in X, then Y, then Z order. Instructions are fetched through the
memory object at the wave's PC and decoded once per code address (:class:`CodeCache`).

Lockstep: where nothing can tell the difference, the waves of up to ``LOCKSTEP_WAVES`` waves' worth of workgroups
run together, one instruction for all of them at a time. Their VGPRs are one (VGPRs, waves, 32) array (each
wave's ``v`` a view of its row), so a VALU instruction that :func:`~tinyhw.mocks.rdna3.valu.lockstep_ok` accepts
runs once over every lane; any other instruction (SALU, memory, lane-indexing VALU) runs wave by wave in wave
order. Each workgroup keeps its own LDS (a row of one array; plain DS loads and stores run once for every wave);
all its waves reach ``s_barrier`` at one step. Where a branch sends the waves to two PCs, those at the lower one step
on alone until they reach the other (a sub-run); where the waves part otherwise they go on one at a time, each wave
until it waits at the barrier or ends, and are stepped together again when every wave waits at one barrier (else
the workgroups end one after another). The
run is kept only when it is what running the workgroups one after another gives: every wave's memory accesses are
logged (and writes journalled), and when a wave's access may touch bytes a later wave touched at an earlier step
with one of them a write, when two waves of a workgroup touch one LDS byte in one barrier interval with one of them
a write (:class:`_WatchedLds`), or on an error or the instruction limit, the memory is restored and the workgroups
run again one at a time. It needs a memory with ``peek``/``poke`` (:class:`FlatMemory`) and no SQ trace; the
counters are the same either way. A memory whose accesses have effects beyond their bytes (the emulated board's
GPUVM, ``tinyhw.mocks.amd.cp``) also has ``lockstep_begin()`` and ``lockstep_end(kept)``, called around each run: it
keeps
the run's accesses free of effects and settles them when the run is kept.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any, Protocol

import numpy as np

from tinyhw.errors import OperationFailed
from tinyhw.formats.amdisa import Inst, decode_at
from tinyhw.mocks.rdna3 import extra, image, lanes, rare, salu, sampler, scratch, valu, vmem
from tinyhw.mocks.rdna3.sqtt import DispatchTrace
from tinyhw.mocks.rdna3.state import (
    EXEC,
    FULL,
    NULL,
    SH_MEM_BASES_DEFAULT,
    ShaderError,
    ShaderFault,
    Unimplemented,
    WatchdogExpired,
    Wave,
    int_to_bits,
    mode_from_rsrc1,
)

__all__ = ["CodeCache", "DispatchJob", "DispatchRegs", "DispatchResult", "FlatMemory", "Memory", "MemoryFault",
           "run_dispatch"]

CS_W32_EN = 1 << 15
LDS_GRANULE = 512          # bytes per RSRC2.LDS_SIZE unit on gfx11 (128 dwords; spec §3.4, inferred)
LDS_MAX = 64 * 1024
_VECTOR = frozenset({"VOP1", "VOP2", "VOPC", "VOP3", "VOP3P", "VOPD", "DS", "FLAT", "MUBUF", "MTBUF", "VINTERP",
                     "MIMG"})
DEFAULT_WATCHDOG = 50_000_000
LOCKSTEP_WAVES = 256       # the most waves one lockstep run steps together


class Memory(Protocol):
    """What the shader core needs from memory: GPU-virtual-address reads and writes (GPUVM sits behind it)."""

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes at GPU virtual address ``addr``; raises a memory fault when it is not mapped."""

    def write(self, addr: int, data: bytes) -> None:
        """Write ``data`` at GPU virtual address ``addr``; raises a memory fault when it is not mapped."""


class MemoryFault(OperationFailed):
    """An access outside mapped memory (raised by a memory object; FlatMemory's own)."""

    def __init__(self, addr: int, n: int, write: bool) -> None:
        super().__init__(f"GPU memory {'write' if write else 'read'} of {n} bytes at 0x{addr:x} is not mapped")
        self.addr, self.n, self.write = addr, n, write


class FlatMemory:
    """One flat window of memory at ``base`` (a GPU VA) of ``size`` bytes, for tests and benches."""

    def __init__(self, base: int, size: int) -> None:
        self.base, self.buf = base, bytearray(size)
        self.reads = self.writes = 0
        self._next = base

    def _off(self, addr: int, n: int, write: bool) -> int:
        off = addr - self.base
        if off < 0 or off + n > len(self.buf):
            raise MemoryFault(addr, n, write)
        return off

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes at ``addr`` (counted in ``reads``); :class:`MemoryFault` outside the window."""
        off = self._off(addr, n, False)
        self.reads += 1
        return bytes(self.buf[off:off + n])

    def write(self, addr: int, data: bytes) -> None:
        """Write ``data`` at ``addr`` (counted in ``writes``); :class:`MemoryFault` outside the window."""
        off = self._off(addr, len(data), True)
        self.writes += 1
        self.buf[off:off + len(data)] = data

    def peek(self, addr: int, n: int) -> bytes:
        """``n`` bytes at ``addr`` without counting a read (the dispatcher's undo journal of a lockstep run)."""
        off = self._off(addr, n, False)
        return bytes(self.buf[off:off + n])

    def poke(self, addr: int, data: bytes) -> None:
        """Write ``data`` at ``addr`` without counting a write (the undo of a lockstep run)."""
        off = self._off(addr, len(data), True)
        self.buf[off:off + len(data)] = data

    def alloc(self, data: bytes | int, align: int = 256) -> int:
        """Place ``data`` (or that many zero bytes) at the next aligned address; return its VA."""
        raw = bytes(data) if not isinstance(data, int) else bytes(data)
        addr = (self._next + align - 1) // align * align
        self._off(addr, len(raw), True)
        self.buf[addr - self.base:addr - self.base + len(raw)] = raw
        self._next = addr + len(raw)
        return addr


@dataclass(frozen=True)
class DispatchRegs:
    """COMPUTE_* register values at DISPATCH_DIRECT (names and fields as in specs/amd-compute.md §2.4-§2.5)."""

    pgm_lo: int                      # COMPUTE_PGM_LO: entry VA bits 39:8
    pgm_hi: int                      # COMPUTE_PGM_HI: entry VA bits 47:40 (DATA, bits 7:0)
    rsrc1: int                       # COMPUTE_PGM_RSRC1
    rsrc2: int                       # COMPUTE_PGM_RSRC2
    rsrc3: int = 0                   # COMPUTE_PGM_RSRC3
    user_data: tuple[int, ...] = ()  # COMPUTE_USER_DATA_0..15
    num_thread: tuple[int, int, int] = (1, 1, 1)   # COMPUTE_NUM_THREAD_X/Y/Z (NUM_THREAD_FULL, bits 15:0)
    dim: tuple[int, int, int] = (1, 1, 1)          # DISPATCH_DIRECT DIM_X/Y/Z (workgroups)
    start: tuple[int, int, int] = (0, 0, 0)        # COMPUTE_START_X/Y/Z
    initiator: int = 0x8005                        # COMPUTE_DISPATCH_INITIATOR (CS_W32_EN bit 15)
    tmpring_size: int = 0                          # COMPUTE_TMPRING_SIZE: WAVES 11:0, WAVESIZE 26:12
    scratch_base_lo: int = 0                       # COMPUTE_DISPATCH_SCRATCH_BASE_LO: scratch VA bits 39:8
    scratch_base_hi: int = 0                       # COMPUTE_DISPATCH_SCRATCH_BASE_HI: scratch VA bits 47:40
    sh_mem_bases: int = SH_MEM_BASES_DEFAULT       # SH_MEM_BASES of the VMID: private base 15:0, shared base 31:16
    doorbell: int | None = None                    # the queue's doorbell id (s_sendmsg_rtn GET_DOORBELL; None: none)
    dispatch_id: int = 0                           # the dispatch id s_sendmsg_rtn GET_DDID returns

    @property
    def entry(self) -> int:
        """The kernel's code address: COMPUTE_PGM_HI/LO as a 48-bit GPU VA (256-byte units)."""
        return ((self.pgm_hi & 0xFF) << 40 | (self.pgm_lo & 0xFFFFFFFF) << 8) & ((1 << 48) - 1)

    @property
    def user_sgprs(self) -> int:
        """COMPUTE_PGM_RSRC2.USER_SGPR: how many user-data SGPRs each wave starts with."""
        return self.rsrc2 >> 1 & 0x1F

    @property
    def vgprs(self) -> int:
        """VGPRs per wave from COMPUTE_PGM_RSRC1.VGPRS (wave32 granule of 8)."""
        return ((self.rsrc1 & 0x3F) + 1) * 8          # wave32 granule 8 (§3.3)

    @property
    def scratch_base(self) -> int:
        """The dispatch's private-segment base: COMPUTE_DISPATCH_SCRATCH_BASE_HI/LO as a GPU VA (256-byte units)."""
        return ((self.scratch_base_hi & 0xFF) << 40 | (self.scratch_base_lo & 0xFFFFFFFF) << 8) & ((1 << 48) - 1)

    @property
    def scratch_waves(self) -> int:
        """COMPUTE_TMPRING_SIZE.WAVES: how many waves' private segments the scratch ring holds."""
        return self.tmpring_size & 0xFFF

    @property
    def scratch_wave_bytes(self) -> int:
        """Bytes of private memory per wave: COMPUTE_TMPRING_SIZE.WAVESIZE in 256-byte units (gfx11)."""
        return (self.tmpring_size >> 12 & 0x7FFF) * scratch.WAVESIZE_GRANULE

    @property
    def lds_bytes(self) -> int:
        """LDS bytes per workgroup from COMPUTE_PGM_RSRC2.LDS_SIZE (512-byte units, inferred)."""
        return (self.rsrc2 >> 15 & 0x1FF) * LDS_GRANULE


@dataclass
class DispatchResult:
    """Exact emulator counters of one dispatch; ``cycles`` is modelled (issue cycles of the cost table)."""

    workgroups: int = 0
    waves: int = 0
    wave_instructions: int = 0
    lane_instructions: int = 0          # 32 per wave instruction (wave32), the issue's figure of merit
    active_lane_instructions: int = 0   # vector instructions x lanes with their EXEC bit set
    cycles: int = 0                     # modelled: sum of the cost of every wave instruction
    per_mnemonic: dict[str, int] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)   # strict=False: unimplemented, executed as no-ops
    # workgroups whose waves ran in a kept lockstep run (a fact of the emulation, not of the emulated machine: 0 with
    # lockstep off, so not in to_doc, whose counters are the same either way)
    lockstep_workgroups: int = 0

    def to_doc(self) -> dict[str, Any]:
        """The dispatch's counts as a JSON document: workgroups, waves, wave, lane and active-lane instructions,
        modelled cycles, instructions per mnemonic and skipped instructions."""
        return {"workgroups": self.workgroups, "waves": self.waves, "wave_instructions": self.wave_instructions,
                "lane_instructions": self.lane_instructions,
                "active_lane_instructions": self.active_lane_instructions, "cycles_modelled": self.cycles,
                "per_mnemonic": dict(sorted(self.per_mnemonic.items())), "skipped": dict(self.skipped)}


def default_cost(inst: Inst) -> int:
    """Issue cycles per wave instruction (modelled, not measured): ``s_nop N`` N+1, hints 0, else 1."""
    if inst.mnemonic == "s_nop":
        return (inst.fields.get("simm16", 0) & 0xF) + 1
    if inst.mnemonic in ("s_delay_alu", "s_clause", "s_set_inst_prefetch_distance"):
        return 0
    return 1


# Decoded and compiled instructions shared by every dispatch: (code address, first dword) -> (the instruction's
# bytes, size, compiled function, Inst, lockstep function or None). A dispatch reuses an entry only when the bytes
# at the address are still the same (compared on every dispatch's first visit to the address), so code objects
# loaded again at the same address are decoded and specialised once; an instruction compiled as a skipped no-op
# (strict=False) is not kept.
_COMPILED: dict[tuple[int, bytes], tuple[bytes, int, Callable[[Wave], Any], Inst, Any]] = {}
_COMPILED_MAX = 1 << 16


class CodeCache:
    """Decoded, compiled instructions by code address; reusable across dispatches of unchanged code."""

    def __init__(self) -> None:
        # pc -> [function, size, mnemonic, is_vector, executions, cost, Inst, lockstep function or None]
        self.entries: dict[int, list[Any]] = {}


def _fetch(mem: Memory, pc: int) -> Inst:
    n = 4
    while True:
        raw = mem.read(pc, n)
        inst = decode_at(raw + bytes(12), 0, "gfx11")
        if inst.size <= n:
            return decode_at(raw, 0, "gfx11") if inst.size == n else inst
        n = inst.size


Bad = Callable[[str], Exception]
# encoding -> compiler of one instruction into a function of the wave (the handler table)
_HANDLERS: dict[str, Callable[[Inst, int, Bad], Callable[[Wave], Any]]] = {
    "SOP2": lambda i, pc, bad: salu.compile_sop2(i, bad),
    "SOP1": lambda i, pc, bad: salu.compile_sop1(i, bad, pc),
    "SOPC": lambda i, pc, bad: salu.compile_sopc(i, bad),
    "SOPK": lambda i, pc, bad: salu.compile_sopk(i, bad, pc),
    "SOPP": salu.compile_sopp,
    "SMEM": lambda i, pc, bad: salu.compile_smem(i, bad),
    **{e: (lambda i, pc, bad: valu.compile_valu(i, bad)) for e in ("VOP1", "VOP2", "VOPC", "VOP3")},
    "VOPD": lambda i, pc, bad: valu.compile_vopd(i, bad),
    "VOP3P": lambda i, pc, bad: valu.compile_vop3p(i, bad),
    "DS": lambda i, pc, bad: vmem.compile_ds(i, bad),
    "FLAT": lambda i, pc, bad: (scratch.compile_scratch(i, bad, pc) if i.fields["seg"] == 1
                                else vmem.compile_global(i, bad)),
    "MUBUF": lambda i, pc, bad: vmem.compile_mubuf(i, bad),
    "MTBUF": lambda i, pc, bad: vmem.compile_mubuf(i, bad),
    "VINTERP": lambda i, pc, bad: lanes.compile_vinterp(i, bad),
}


def _compile(inst: Inst, raw: bytes, pc: int, strict: bool, skipped: dict[str, int]) -> Callable[[Wave], Any]:
    words = " ".join(f"{w:08x}" for w in struct.unpack(f"<{len(raw) // 4}I", raw))

    def bad(msg: str) -> Exception:
        return Unimplemented(f"not modelled: {msg}", pc=pc, mnemonic=inst.name, encoding=words)

    try:
        if not inst.mnemonic:
            raise bad("an opcode LLVM's gfx11 table does not name")
        if "dpp" in inst.fields:     # a DPP16/DPP8 source: the plain form's compile path, SRC0 lane-selected
            return lanes.compile_dpp(inst, bad, lambda i, src0: valu.compile_valu(i, bad, src0))
        lane_op = lanes.COMPILERS.get(inst.mnemonic)
        if lane_op is not None:
            return lane_op(inst, bad)
        more = extra.COMPILERS.get(inst.mnemonic)
        if more is None and inst.encoding == "MIMG":     # image memory without a sampler: image.py
            more = image.COMPILERS.get(inst.mnemonic)
        if more is None and inst.encoding == "MIMG":     # sampled images (image_sample*, gather4*, get_lod)
            more = sampler.COMPILERS.get(inst.mnemonic)
        if more is not None:
            return more(inst, pc, bad)
        handler = _HANDLERS.get(inst.encoding)
        if handler is None:
            raise bad(f"the {inst.encoding} encoding")
        return handler(inst, pc, bad)
    except Unimplemented:
        if strict:
            raise
        name = inst.name

        def skip(w: Wave) -> None:
            skipped[name] = skipped.get(name, 0) + 1
        skip.cacheable = False      # type: ignore[attr-defined]
        return skip


class _Dispatch:
    def __init__(self, regs: DispatchRegs, mem: Memory, strict: bool, cache: CodeCache,
                 cost: Callable[[Inst], int], watchdog: int, on_wave_end: Callable[[Wave], None] | None,
                 trace: DispatchTrace | None = None) -> None:
        self.regs, self.mem, self.strict, self.cache, self.cost = regs, mem, strict, cache, cost
        self.on_wave_end = on_wave_end
        self.trace = trace
        self.budget = watchdog
        self.res = DispatchResult()
        self.active = 0
        self.waves: list[Wave] = []  # the running workgroup's waves (what stays resident when the budget runs out)
        self.init: tuple[Any, ...] | None = None   # the initial wave state every workgroup shares (make_waves)
        self.wide = [0, 0]      # lockstep runs kept, lockstep runs undone (run again one workgroup at a time)
        self.run_k = 0          # the waves of the lockstep run in progress
        self.run_lds: tuple[np.ndarray, Any] | None = None    # its LDS and the check of its accesses (_Wide.lds)
        self.run_span = [0, 0]  # the LDS bytes its waves touched since the last barrier (a range, in a workgroup's LDS)
        nt = regs.num_thread[0] * regs.num_thread[1] * regs.num_thread[2]
        self.per_group = (nt + 31) // 32        # waves per workgroup
        self.hw = rare.HwInfo.of(regs, self.per_group)     # what s_getreg/s_sendmsg_rtn/apertures read

    def compile_at(self, pc: int) -> list[Any]:
        first = self.mem.read(pc, 4)
        hit = _COMPILED.get((pc, first))
        if hit is not None and (hit[1] == 4 or self.mem.read(pc, hit[1]) == hit[0]):
            raw, size, fn, inst, wide = hit
        else:
            inst = _fetch(self.mem, pc)
            raw = self.mem.read(pc, inst.size)
            fn = _compile(inst, raw, pc, self.strict, self.res.skipped)
            wide = None
            if getattr(fn, "cacheable", True):
                wide = _wide_of(inst, fn)
                if len(_COMPILED) >= _COMPILED_MAX:
                    _COMPILED.clear()
                _COMPILED[(pc, raw[:4])] = (raw, inst.size, fn, inst, wide)
        ent = [fn, inst.size, inst.name, inst.encoding in _VECTOR, 0, self.cost(inst), inst, wide]
        self.cache.entries[pc] = ent
        return ent

    def run_wave(self, w: Wave) -> None:
        entries, pc, n = self.cache.entries, w.pc, 0
        active = 0
        trace = self.trace
        try:
            while True:
                ent = entries.get(pc)
                if ent is None:
                    ent = self.compile_at(pc)
                ent[4] += 1
                n += 1
                if ent[3]:
                    active += w.s[EXEC].bit_count()
                r = ent[0](w)
                if trace is not None:
                    trace.issue(w, ent[6], ent[5], r is not None and r >= 0)
                if r is None:
                    pc += ent[1]
                elif r >= 0:
                    pc = r
                elif r == salu.END:
                    w.done = True
                    if trace is not None:
                        trace.wave_end(w)
                    if self.on_wave_end is not None:
                        self.on_wave_end(w)
                    break
                else:
                    w.at_barrier = True
                    pc += ent[1]
                    break
                if n > self.budget:
                    raise WatchdogExpired(f"the dispatch ran past its limit of {self.res.wave_instructions + n} "
                                          "wave instructions (a shader that never ends?)", pc=pc,
                                          mnemonic=ent[2], encoding="-")
        except ShaderError:
            raise
        except (IndexError, ValueError) as e:
            ent = entries.get(pc)
            raise ShaderFault(f"register access outside the wave's allocation ({e})", pc=pc,
                              mnemonic=ent[2] if ent else "?", encoding="-") from e
        except Exception as e:
            ent = entries.get(pc)
            e.add_note(f"in the emulated shader at pc 0x{pc:x} ({ent[2] if ent else '?'})")
            raise
        finally:
            w.pc = pc
            self.budget -= n
            self.res.wave_instructions += n
            self.active += active

    def workgroup(self, gid: tuple[int, int, int]) -> None:
        self.run_group(self.make_waves(gid))

    def run_group(self, waves: list[Wave], owners: np.ndarray | None = None) -> None:
        """Run the waves of one workgroup from where they are to their end: each in turn until it waits at the
        barrier or ends, and when every live wave waits, release them (and clear ``owners``, the LDS byte owners of
        a lockstep run, see :class:`_WatchedLds`)."""
        while True:
            live = [w for w in waves if not w.done]
            if not live:
                break
            for w in live:
                if not w.at_barrier:
                    self.run_wave(w)
            live = [w for w in waves if not w.done]
            if live and all(w.at_barrier for w in live):
                for w in live:
                    w.at_barrier = False
                if owners is not None:
                    owners.fill(-1)

    def make_waves(self, gid: tuple[int, int, int], v: np.ndarray | None = None, first: int = 0) -> list[Wave]:
        """The waves of workgroup ``gid`` in their initial state; with ``v`` (a zeroed (VGPRs, waves, 32) array) their
        VGPRs are its rows from ``first`` on."""
        r = self.regs
        lds = np.zeros(max(r.lds_bytes, 0), dtype=np.uint8)
        init = self.init
        if init is None:        # what every workgroup of the dispatch starts with but for its ids
            nx, ny, nz = r.num_thread
            nthreads = nx * ny * nz
            tidig = r.rsrc2 >> 11 & 3
            # the packed work-item ids of VGPR0, one row of 32 lanes per wave (zero past the last work-item)
            ids = np.arange(self.per_group * 32)
            tx, ty, tz = ids % nx, (ids // nx) % ny, ids // (nx * ny)
            packed = (tx | (ty << 10 if tidig >= 1 else 0) | (tz << 20 if tidig >= 2 else 0)).astype(np.uint32)
            packed[nthreads:] = 0
            # the user SGPRs, then the workgroup id SGPRs RSRC2 enables (filled per workgroup); EXEC per wave
            us = r.user_sgprs
            ud = list(r.user_data) + [0] * 16
            sgprs = [x & 0xFFFFFFFF for x in ud[:us]] + [0] * (128 - us)
            gids = [(us + n, axis) for n, axis in enumerate(a for a in range(3) if r.rsrc2 >> (7 + a) & 1)]
            execs = [FULL if nthreads - 32 * wi >= 32 else (1 << (nthreads - 32 * wi)) - 1
                     for wi in range(self.per_group)]
            init = self.init = (packed.reshape(-1, 32), sgprs, gids, execs, mode_from_rsrc1(r.rsrc1), r.entry,
                                r.vgprs)
        rows, sgprs, gids, execs, mode, entry, vgprs = init
        scratch_at = r.user_sgprs + len(gids)
        if v is not None:
            v[0, first:first + len(execs)] = rows
        waves = []
        mem = self.mem
        for wi, ex in enumerate(execs):
            if v is None:
                w = Wave(vgprs, lds, mem, gid, wi)
                w.v[0] = rows[wi]
            else:
                w = Wave(vgprs, lds, mem, gid, wi, v[:, first + wi])
            s = w.s = sgprs.copy()
            s[EXEC] = ex
            for at, axis in gids:
                s[at] = gid[axis] & 0xFFFFFFFF
            if r.rsrc2 & 1:     # SCRATCH_EN: the wave's slot in the scratch ring (waves of a workgroup: slots 0..)
                offset = wi * r.scratch_wave_bytes
                s[scratch_at] = offset    # the private segment wavefront offset SGPR (§4.1), after the ids
                w.scratch, w.scratch_size = r.scratch_base + offset, r.scratch_wave_bytes
            w.mode = mode
            w.pc = entry
            w.hw = self.hw
            waves.append(w)
        self.res.waves += len(waves)
        self.waves = waves
        if self.trace is not None:
            for w in waves:
                self.trace.wave_start(w, self.res.workgroups)
        return waves

    def run_groups(self, gids: list[tuple[int, int, int]]) -> None:
        """Run workgroups ``gids``: all their waves in lockstep when there are several (see the module text), else,
        or when the lockstep run is undone, one workgroup after another."""
        if len(gids) > 1:
            if self.lockstep(gids):
                self.wide[0] += 1
                self.res.workgroups += len(gids)
                self.res.lockstep_workgroups += len(gids)
                return
            self.wide[1] += 1
        for gid in gids:
            self.workgroup(gid)
            self.res.workgroups += 1

    def lockstep(self, gids: list[tuple[int, int, int]]) -> bool:
        """Run the waves of workgroups ``gids`` together; False (every effect undone) when that could differ from
        running them one after another."""
        res, mem, entries = self.res, self.mem, self.cache.entries
        saved = (res.waves, dict(res.skipped), getattr(mem, "reads", None), getattr(mem, "writes", None),
                 res.wave_instructions, self.budget, self.active)
        before: dict[int, int] | None = None        # the executions by PC before a run that parted
        per = self.per_group
        k = per * len(gids)
        v = np.zeros((self.regs.vgprs, k, 32), dtype=np.uint32)
        waves = [w for i, gid in enumerate(gids) for w in self.make_waves(gid, v, i * per)]
        log: list[tuple[int, int, int, bool]] = []
        undo: list[tuple[int, bytes]] = []
        for i, w in enumerate(waves):
            w.mem = _Logged(mem, i, log, undo)
        owners = None
        self.run_lds = None
        if self.regs.lds_bytes:     # one array for the run's LDS, a row a workgroup (the wide DS accesses)
            lds = np.zeros((len(gids), self.regs.lds_bytes), dtype=np.uint8)
            for i, w in enumerate(waves):
                w.lds = lds[i // per]
            self.run_lds = (lds, None)
        if per > 1 and self.regs.lds_bytes:     # the waves of a workgroup share its LDS: watch who touches what
            owners = np.full((2, len(gids), self.regs.lds_bytes), -1, dtype=np.int16)
            self.run_span = [self.regs.lds_bytes, 0]
            for i, w in enumerate(waves):
                w.lds = _WatchedLds(w.lds, owners[0, i // per], owners[1, i // per], i % per, self.run_span)
            self.run_lds = (lds, _LdsOwners(owners, self.run_span).check)
        begin = getattr(mem, "lockstep_begin", None)    # a memory whose accesses have effects beyond their bytes
        if begin is not None:                           # (the board's GPUVM) keeps them apart during the run
            begin()
        on_wave_end = self.on_wave_end
        marks: list[int] = []
        pc = waves[0].pc
        self.run_k = k
        try:
            while True:
                n, active, counts, pc = self._lockstep(waves, v, log, marks, owners, pc, self.budget)
                if pc >= 0 and before is None:      # ended together without parting: counted once kept
                    break
                if before is None:
                    before = {at: e[4] for at, e in entries.items()}
                    self.on_wave_end = None     # told after the run is kept, as for the others
                self._count(n, active, counts)
                if pc >= 0:
                    for w in waves:
                        w.pc, w.done = pc, True
                    break
                pc = self._apart(waves, log, marks, owners)
                if pc < 0:
                    break
            kept = not _reordered(log, marks, k)
        except Exception:       # anything at all: undone, and run one workgroup after another instead
            kept = False
        self.on_wave_end, self.run_lds = on_wave_end, None
        if not kept:
            for addr, old in reversed(undo):
                mem.poke(addr, old)
            if begin is not None:
                mem.lockstep_end(False)
            res.waves, res.skipped = saved[0], saved[1]
            if saved[2] is not None:
                mem.reads, mem.writes = saved[2], saved[3]  # type: ignore[attr-defined]
            res.wave_instructions, self.budget, self.active = saved[4:]
            if before is not None:
                for at, e in entries.items():
                    e[4] = before.get(at, 0)
            return False
        if begin is not None:
            mem.lockstep_end(True)
        if before is None:
            self._count(n, active, counts)
            for w in waves:
                w.pc, w.done = pc, True
        for w in waves:
            w.mem = mem
            if owners is not None:
                w.lds = w.lds.lds
        if self.on_wave_end is not None:
            for w in waves:
                self.on_wave_end(w)
        self.waves = waves[k - k // len(gids):]
        return True

    def _count(self, n: int, active: int, counts: dict[int, int]) -> None:
        """Count the ``n`` wave instructions (``active`` lanes; ``counts``: wave instructions by PC) of a lockstep run
        in the counters."""
        self.budget -= n
        self.res.wave_instructions += n
        self.active += active
        entries = self.cache.entries
        for at, c in counts.items():
            entries[at][4] += c

    def _apart(self, waves: list[Wave], log: list[Any], marks: list[int], owners: np.ndarray | None) -> int:
        """Where the waves of a lockstep run parted: each workgroup's waves in turn, each wave until it waits at the
        barrier or ends, as one at a time. When then every wave waits at one barrier, they are released and the PC
        after it returned (the run goes on in lockstep from there); else the workgroups run to their end one after
        another (-1). Each of the two phases starts a segment of ``log`` (``marks``): one workgroup's accesses come
        before the next one's, in the one-at-a-time order, and are checked against the later waves' at earlier
        steps."""
        per = self.per_group
        marks.append(len(log))      # (the parting step is a jump, with no accesses of its own: kept apart anyway)
        for w in waves:
            if not w.done and not w.at_barrier:
                self.run_wave(w)
        pc = waves[0].pc
        if all(w.at_barrier and w.pc == pc for w in waves):
            for w in waves:
                w.at_barrier = False
            if owners is not None:
                _clear(owners, self.run_span)
            return pc
        marks.append(len(log))
        for g in range(len(waves) // per):
            self.run_group(waves[g * per:(g + 1) * per], None if owners is None else owners[:, g])
        return -1

    def _sub(self, waves: list[Wave], v: np.ndarray, log: list[Any], marks: list[int], owners: np.ndarray | None,
             to: list[int], budget: int, at: list[int] | None) -> tuple[int, int, dict[int, int], int]:
        """The sub-run of :meth:`_lockstep` where ``waves`` parted to the two PCs ``to``: the waves at the lower one
        step alone (their VGPRs copied out of ``v`` and back) until they reach the higher one."""
        idx = [i for i, w in enumerate(waves) if w.pc == to[0]]
        sub = [waves[i] for i in idx]
        vs = v[:, idx]
        for j, w in enumerate(sub):
            w.v = vs[:, j]
        try:
            return self._lockstep(sub, vs, log, marks, owners, to[0], budget, to[1],
                                  idx if at is None else [at[i] for i in idx])
        finally:
            v[:, idx] = vs
            for i in idx:
                waves[i].v = v[:, i]

    def _lockstep(self, waves: list[Wave], v: np.ndarray, log: list[Any], marks: list[int],
                  owners: np.ndarray | None, pc: int, budget: int, stop: int = -1, at: list[int] | None = None
                  ) -> tuple[int, int, dict[int, int], int]:
        """Step every wave of ``waves`` (all at ``pc``) together until they end or part: (wave instructions, active
        lanes, wave instructions by PC, the PC of s_endpgm, or -1 when an instruction run wave by wave or a branch
        sent the waves to different PCs: each wave then holds its own PC, ``done`` or ``at_barrier``). Each step
        starts a segment of ``log`` (its position appended to ``marks``). Raises _Diverged past ``budget`` wave
        instructions or where the waves cannot go on. ``owners`` (the LDS byte owners of :class:`_WatchedLds`, None
        when no workgroup has several waves and LDS) is cleared at each barrier.

        Where a branch sends the waves to two PCs, the waves at the lower one run on alone (a sub-run: ``stop`` the
        higher PC, ``at`` their places among the run's waves) while the others wait; when they reach ``stop``
        together, all go on together (a sub-run returns ``stop``). A sub-run that meets a barrier or s_endpgm, or
        jumps past ``stop``, parts the run (-1). The waiting waves have no accesses in the sub-run's steps, so the
        checks of the run hold as they are."""
        entries = self.cache.entries
        wide = _Wide(waves, v, _Logged(self.mem, -1, None, waves[0].mem.undo),
                     log if at is None else _SubLog(log, at, self.run_k))
        if self.run_lds is not None:
            places = np.array([w.mem.wave for w in waves])
            wide.lds = (self.run_lds[0], places // self.per_group, places % self.per_group, self.run_lds[1])
        k = len(waves)
        n = active = 0
        counts: dict[int, int] = {}
        known = wide.s.known
        while True:
            if stop >= 0 and pc >= stop:
                if pc == stop:
                    return n, active, counts, stop
                for w in waves:
                    w.pc = pc
                return n, active, counts, -1
            ent = entries.get(pc)
            if ent is None:
                ent = self.compile_at(pc)
            n += k
            if n > budget:
                raise _Diverged
            counts[pc] = counts.get(pc, 0) + k
            if ent[3]:
                e = wide.s[EXEC]
                active += e.bit_count() * k if type(e) is int else sum(x.bit_count() for x in e.ravel().tolist())
            marks.append(len(log))
            wf = ent[7]
            try:
                r = vmem.PER_WAVE if wf is None else wf(wide)
            except (_Diverged, ValueError):     # a branch whose condition differs between the waves (it only reads)
                if ent[6].encoding != "SOPP" or ent[6].mnemonic not in salu._BRANCH:
                    raise
                r = vmem.PER_WAVE
            if r == vmem.PER_WAVE:
                fn = ent[0]
                rs = [fn(w) for w in waves]
                known.clear()           # any SGPR, SCC or MODE may have changed
                r = rs[0]
                if rs.count(r) != k:
                    _part(waves, rs, pc, ent[1])
                    to = sorted({w.pc for w in waves if not w.done and not w.at_barrier})
                    if len(to) != 2 or any(w.done or w.at_barrier for w in waves):
                        return n, active, counts, -1
                    sub = self._sub(waves, v, log, marks, owners, to, budget - n, at)
                    n, active = n + sub[0], active + sub[1]
                    for pa, c in sub[2].items():
                        counts[pa] = counts.get(pa, 0) + c
                    if sub[3] < 0:
                        return n, active, counts, -1
                    pc = to[1]
                    known.clear()
                    continue
            if r is None:
                pc += ent[1]
            elif r >= 0:
                pc = r
            elif r == salu.END:
                if stop >= 0:       # a sub-run: the waiting waves have not ended
                    _part(waves, [r] * k, pc, ent[1])
                    return n, active, counts, -1
                return n, active, counts, pc
            elif stop >= 0:         # a barrier in a sub-run: the waiting waves are not there
                _part(waves, [r] * k, pc, ent[1])
                return n, active, counts, -1
            else:               # s_barrier: every wave of each workgroup is here at once, so all are released
                pc += ent[1]
                if owners is not None:      # a new barrier interval: one at a time, every wave's part of it
                    _clear(owners, self.run_span)   # follows every wave's part of the last one, as here


class _SubLog:
    """The memory log as the wide functions of a sub-run see it: a step's spans of its waves (one per wave) are
    widened to every wave of the run (the others with none)."""

    __slots__ = ("log", "at", "k")

    def __init__(self, log: list[Any], at: list[int], k: int) -> None:
        self.log, self.at, self.k = log, np.array(at), k

    def append(self, e: Any) -> None:
        """Log ``e``; (None, starts, ends, write) of the sub-run's waves spread over the run's."""
        if e[0] is None:
            lo, hi = np.full(self.k, _NONE), np.full(self.k, _ALL)
            lo[self.at], hi[self.at] = e[1], e[2]
            e = (None, lo, hi, e[3])
        self.log.append(e)


def _part(waves: list[Wave], rs: list[Any], pc: int, size: int) -> None:
    """Where the waves of a lockstep run part: each wave's next PC from what its instruction at ``pc`` returned."""
    for w, r in zip(waves, rs, strict=True):
        if r is None:
            w.pc = pc + size
        elif r >= 0:
            w.pc = r
        elif r == salu.END:
            w.pc, w.done = pc, True
        else:
            w.pc, w.at_barrier = pc + size, True


def _clear(owners: np.ndarray, span: list[int]) -> None:
    """A new barrier interval: forget which waves touched the LDS bytes of ``span`` (every byte touched since the
    last barrier, as a range in each workgroup's LDS), and start the next range."""
    lo, hi = span
    if lo < hi:
        owners[:, :, lo:hi] = -1
    span[0], span[1] = owners.shape[2], 0


class _Diverged(Exception):
    """The waves of a lockstep run parted (another PC, the instruction limit): the run is undone."""


class _Logged:
    """The memory one wave of a lockstep run reaches: every access logged as (wave, start, end, write) and every
    write's old bytes kept, so the run can be checked and undone."""

    __slots__ = ("mem", "wave", "log", "undo")

    def __init__(self, mem: Any, wave: int, log: list[Any] | None, undo: list[tuple[int, bytes]]) -> None:
        self.mem, self.wave, self.log, self.undo = mem, wave, log, undo

    def read(self, addr: int, n: int) -> bytes:
        """Read through to the memory, logged (without a log: the lockstep function logs its spans itself)."""
        data = self.mem.read(addr, n)
        if self.log is not None:
            self.log.append((self.wave, addr, addr + n, False))
        return data

    def write(self, addr: int, data: bytes) -> None:
        """Write through to the memory, logged, the old bytes kept."""
        self.undo.append((addr, self.mem.peek(addr, len(data))))
        self.mem.write(addr, data)
        if self.log is not None:
            self.log.append((self.wave, addr, addr + len(data), True))


class _WatchedLds:
    """The LDS one wave of a multi-wave workgroup reaches in a lockstep run: its workgroup's array, each byte it reads
    or writes checked against who else touched that byte since the last barrier.

    One at a time, the waves of a workgroup run one after another from barrier to barrier; in lockstep they
    interleave step by step. The two give the same LDS bytes and loads unless two different waves touch one byte in
    one barrier interval and one of them writes (an atomic is a read and a write): that raises :class:`_Diverged` and
    the run is undone. ``writer``/``reader`` hold, per byte of the workgroup, the wave that wrote/read it in this
    interval (-1 none, -2 several readers). A slice read is a read-only view, so a write through it fails (and undoes
    the run) instead of escaping the check."""

    __slots__ = ("lds", "writer", "reader", "wave", "span")

    def __init__(self, lds: np.ndarray, writer: np.ndarray, reader: np.ndarray, wave: int, span: list[int]) -> None:
        self.lds, self.writer, self.reader, self.wave, self.span = lds, writer, reader, wave, span

    def __len__(self) -> int:
        return len(self.lds)

    def _bytes(self, key: Any) -> Any:
        span = self.span
        if isinstance(key, slice) and key.step is None:
            lo, hi = key.start or 0, len(self.lds) if key.stop is None else key.stop
            span[0], span[1] = min(span[0], lo), max(span[1], hi)
            return key
        if isinstance(key, np.ndarray) and key.dtype.kind in "iu":
            at = key.ravel()
            if len(at):
                span[0], span[1] = min(span[0], int(at.min())), max(span[1], int(at.max()) + 1)
            return at
        raise _Diverged             # an LDS access of another shape: not checked, so not run in lockstep

    def __getitem__(self, key: Any) -> np.ndarray:
        at, i = self._bytes(key), self.wave
        wr = self.writer[at]
        if ((wr >= 0) & (wr != i)).any():
            raise _Diverged
        rd = self.reader[at]
        self.reader[at] = np.where((rd == -1) | (rd == i), i, -2)
        x = self.lds[key]
        if isinstance(key, slice):
            x = x.view()
            x.flags.writeable = False
        return x

    def __setitem__(self, key: Any, data: Any) -> None:
        at, i = self._bytes(key), self.wave
        wr, rd = self.writer[at], self.reader[at]
        if (((wr >= 0) & (wr != i)) | ((rd != -1) & (rd != i))).any():
            raise _Diverged
        self.writer[at] = i
        self.lds[key] = data


class _LdsOwners:
    """:class:`_WatchedLds`'s check for the wide DS accesses of one lockstep step (every wave's lanes at once)."""

    __slots__ = ("writer", "reader", "span", "nb")

    def __init__(self, owners: np.ndarray, span: list[int]) -> None:
        self.writer, self.reader = owners[0].reshape(-1), owners[1].reshape(-1)
        self.span, self.nb = span, owners.shape[2]

    def check(self, keys: np.ndarray, waves: np.ndarray, write: bool) -> None:
        """Bytes ``keys`` (workgroup x LDS size + byte, a row per lane) read or written by the waves ``waves`` (their
        index in the workgroup, one per row): :class:`_Diverged` when another wave wrote one of them in this barrier
        interval, or, for a write, another wave read or writes one."""
        keys = keys.reshape(-1)
        if not len(keys):
            return
        at, span = keys % self.nb, self.span
        span[0], span[1] = min(span[0], int(at.min())), max(span[1], int(at.max()) + 1)
        wids = np.repeat(waves.astype(np.int16), len(keys) // max(len(waves), 1))
        cw = self.writer[keys]
        if ((cw >= 0) & (cw != wids)).any():
            raise _Diverged
        order = np.lexsort((wids, keys))
        ks, ws = keys[order], wids[order]
        first = np.flatnonzero(np.r_[True, ks[1:] != ks[:-1]])
        uk = ks[first]
        lo, hi = np.minimum.reduceat(ws, first), np.maximum.reduceat(ws, first)
        cr = self.reader[uk]
        if write:
            if ((lo != hi) | ((cr != -1) & (cr != lo))).any():
                raise _Diverged
            self.writer[uk] = lo
        else:
            new = np.where(lo == hi, lo, np.int16(-2))
            self.reader[uk] = np.where((cr == -1) | (cr == new), new, np.int16(-2))


class _Scalars:
    """The SGPRs of waves in lockstep as one list: a register the waves agree on reads as an int, one they do not as a
    (waves, 1) uint64 column; a write of an int goes to every wave, of a column to each wave its own value."""

    __slots__ = ("lists", "known")

    def __init__(self, lists: list[list[int]]) -> None:
        self.lists = lists
        self.known: dict[Any, int] = {}     # registers (and "scc", "mode") known to agree, until a wave-by-wave step

    def __getitem__(self, r: int) -> Any:
        if type(r) is not int:
            raise _Diverged
        x = self.known.get(r)
        if x is not None:
            return x
        lists = self.lists
        x = lists[0][r]
        vals = list(map(itemgetter(r), lists))
        if vals.count(x) == len(vals):
            self.known[r] = x
            return x
        return np.array(vals, dtype=np.uint64).reshape(-1, 1)

    def __setitem__(self, r: int, x: Any) -> None:
        if type(r) is not int:
            raise _Diverged
        if isinstance(x, (int, np.integer)):
            x = int(x)
            for s in self.lists:
                s[r] = x
            self.known[r] = x
            return
        self.known.pop(r, None)
        vals = np.asarray(x).ravel().tolist()
        if len(vals) != len(self.lists):
            raise _Diverged
        for s, y in zip(self.lists, vals, strict=True):
            s[r] = int(y)


class _Wide:
    """Several waves seen as one by a VALU function that runs in lockstep: ``v[n]`` is VGPR n of every wave as a
    (waves, 32) array, ``s`` their SGPRs (:class:`_Scalars`), ``mask()`` EXEC as (32,) or (waves, 32) lanes."""

    __slots__ = ("waves", "s", "v", "mem", "log", "lds")

    def __init__(self, waves: list[Wave], v: np.ndarray, mem: _Logged, log: list[Any]) -> None:
        self.waves, self.s, self.v = waves, _Scalars([w.s for w in waves]), v
        self.mem, self.log = mem, log      # journalled memory; the log takes (None, starts, ends, write) per step
        # the run's LDS (workgroups, bytes), each wave's workgroup and index there, the check of several-wave
        # workgroups' accesses (_LdsOwners.check) or None; None without LDS (vmem.wide_ds)
        self.lds: tuple[np.ndarray, np.ndarray, np.ndarray, Any] | None = None

    def _same(self, name: str) -> int:
        known = self.s.known
        x = known.get(name)
        if x is None:
            vals = [getattr(w, name) for w in self.waves]
            if vals.count(vals[0]) != len(vals):
                raise _Diverged
            x = known[name] = vals[0]
        return x

    @property
    def scc(self) -> int:
        """SCC, when every wave has the same."""
        return self._same("scc")

    @property
    def mode(self) -> int:
        """The MODE register, when every wave has the same."""
        return self._same("mode")

    def mask(self) -> np.ndarray:
        """EXEC_LO as lanes: (32,) when the waves agree, else (waves, 32)."""
        e = self.s[EXEC]
        if type(e) is int:
            return self.waves[0].mask()
        return int_to_bits(e)


_NONE, _ALL = np.uint64((1 << 64) - 1), np.uint64(0)


def _spans(seg: list[Any], k: int) -> tuple[np.ndarray, ...]:
    """Per wave: the lowest start and highest end of its reads, then of its writes, in one step's accesses (events
    (wave, start, end, write) of one wave, or (None, starts, ends, write) of every wave)."""
    rlo, rhi = np.full(k, _NONE), np.full(k, _ALL)
    wlo, whi = rlo.copy(), rhi.copy()
    one = [e for e in seg if e[0] is not None]
    if one:
        wv, lo, hi, wr = (np.array(c) for c in zip(*one, strict=True))
        lo, hi = lo.astype(np.uint64), hi.astype(np.uint64)
        for sel, a, b in ((wr, wlo, whi), (~wr, rlo, rhi)):
            np.minimum.at(a, wv[sel], lo[sel])
            np.maximum.at(b, wv[sel], hi[sel])
    for wv, lo, hi, wr in seg:
        if wv is None:
            a, b = (wlo, whi) if wr else (rlo, rhi)
            np.minimum(a, lo, out=a)
            np.maximum(b, hi, out=b)
    return rlo, rhi, wlo, whi


def _later(lo: np.ndarray, hi: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each wave j, the span covering what waves j+1.. touched (empty for the last)."""
    slo = np.minimum.accumulate(lo[::-1])[::-1]
    shi = np.maximum.accumulate(hi[::-1])[::-1]
    return np.append(slo[1:], _NONE), np.append(shi[1:], _ALL)


def _reordered(log: list[tuple[int, int, int, bool]], marks: list[int], k: int) -> bool:
    """True when, in a lockstep run's memory log, a wave's access may conflict (same bytes, one a write) with one a
    later wave made at an earlier step: run one after another, the earlier wave would have gone first. Within a
    step the waves run in order, so only steps against earlier steps are compared (spans, conservatively)."""
    if not log:
        return False
    bounds = [*marks, len(log)]
    done: list[tuple[np.ndarray, ...]] = []
    for a, b in zip(bounds, bounds[1:], strict=False):
        if a == b:
            continue
        rlo, rhi, wlo, whi = _spans(log[a:b], k)
        for prlo, prhi, pwlo, pwhi in done:
            lrlo, lrhi = _later(prlo, prhi)
            lwlo, lwhi = _later(pwlo, pwhi)
            if (((wlo < lrhi) & (lrlo < whi)) | ((wlo < lwhi) & (lwlo < whi))
                    | ((rlo < lwhi) & (lwlo < rhi))).any():
                return True
        done.append((rlo, rhi, wlo, whi))
    return False


def _wide_sload(inst: Inst) -> Callable[[Any], Any] | None:
    """s_load_b32..b512 for several waves in lockstep: one read when their address SGPRs agree (else PER_WAVE)."""
    m, f = inst.mnemonic, inst.fields
    if m not in salu._SLOAD:
        return None
    n, d, base, off, so = salu._SLOAD[m], f["sdata"], f["sbase"], f["offset"], f["soffset"]
    fmt = f"<{n}I"

    def run(ww: _Wide) -> Any:
        s = ww.s
        lo, hi, x = s[base], s[base + 1], (0 if so == NULL else s[so])
        if type(lo) is not int or type(hi) is not int or type(x) is not int:
            return vmem.PER_WAVE
        addr = salu.smem_address(lo | hi << 32, off, x)
        vals = struct.unpack(fmt, ww.mem.read(addr, 4 * n))
        for i, y in enumerate(vals):
            s[d + i] = y
        k = len(ww.waves)
        ww.log.append((None, np.full(k, addr, dtype=np.uint64), np.full(k, addr + 4 * n, dtype=np.uint64), False))
        return None
    return run


def _wide_of(inst: Inst, fn: Callable[[Wave], Any]) -> Callable[[Any], Any] | None:
    """The function that runs ``inst`` for several waves in lockstep, None when it runs wave by wave."""
    if valu.lockstep_ok(inst) or salu.lockstep_ok(inst):
        return fn
    if inst.encoding == "SMEM":
        return _wide_sload(inst)
    if inst.encoding == "FLAT":
        return vmem.wide_global(inst)
    if inst.encoding == "DS":
        return vmem.wide_ds(inst)
    if inst.encoding == "VOP1" and valu.base_name(inst.mnemonic) == "v_readfirstlane_b32":
        return _wide_readfirstlane(inst)
    return None


def _wide_readfirstlane(inst: Inst) -> Callable[[Any], Any] | None:
    """v_readfirstlane_b32 of a VGPR for several waves in lockstep: each wave's lowest active lane (lane 0 when none)
    into the SGPR, a column when the waves differ."""
    src, d = inst.fields["src0"], inst.fields["vdst"]
    if src < 256:
        return None
    vs = src - 256

    def run(ww: _Wide) -> Any:
        e = ww.s[EXEC]
        col = ww.v[vs]
        if type(e) is int:
            vals = col[:, (e & -e).bit_length() - 1 if e else 0]
        else:
            ev = e.ravel()
            low = ev & (~ev + np.uint64(1))
            lanes = np.where(ev == 0, 0, np.log2(np.maximum(low, np.uint64(1)).astype(np.float64))).astype(np.intp)
            vals = col[np.arange(len(ev)), lanes]
        if d != NULL:
            ww.s[d] = vals.astype(np.uint64).reshape(-1, 1)
        return None
    return run


def _check(regs: DispatchRegs) -> None:
    def refuse(msg: str) -> Unimplemented:
        return Unimplemented(msg, pc=regs.entry, mnemonic="(dispatch)", encoding="-")
    if not regs.initiator & CS_W32_EN:
        raise refuse("wave64 dispatch (CS_W32_EN = 0) is not modelled")
    nt = regs.num_thread[0] * regs.num_thread[1] * regs.num_thread[2]
    if regs.rsrc2 & 1:  # SCRATCH_EN: the kernel enables the private segment (a ring size alone uses nothing)
        _check_scratch(regs, (nt + 31) // 32)
    if regs.rsrc2 >> 10 & 1:
        raise refuse("the workgroup-info SGPR (TG_SIZE_EN) is not modelled")
    if regs.user_sgprs > 16 or len(regs.user_data) > 16:
        raise refuse("more than 16 user SGPRs")
    if not 1 <= nt <= 1024 or min(regs.num_thread) < 1 or max(regs.num_thread) > 1024:
        raise refuse(f"workgroup of {regs.num_thread} work-items (1..1024)")
    if min(regs.dim) < 0 or regs.lds_bytes > LDS_MAX:
        raise refuse("negative grid or LDS beyond 64 KiB")


def _check_scratch(regs: DispatchRegs, waves: int) -> None:
    """What a dispatch with RSRC2.SCRATCH_EN needs from the queue: a scratch base and a ring with room for every
    wave of a workgroup (the waves of a workgroup are resident together; fewer slots would never launch it)."""
    def fault(msg: str) -> ShaderFault:
        return ShaderFault(msg, pc=regs.entry, mnemonic="(dispatch)", encoding="-")
    if not regs.scratch_base:
        raise fault("the kernel enables scratch (rsrc2.scratch_en) but compute_dispatch_scratch_base is 0")
    if not regs.scratch_wave_bytes:
        raise fault("the kernel enables scratch (rsrc2.scratch_en) but compute_tmpring_size.wavesize is 0")
    if regs.scratch_waves < waves:
        raise fault(f"compute_tmpring_size.waves is {regs.scratch_waves}, a workgroup has {waves} waves: "
                    "its waves could never all get scratch")


def run_dispatch(regs: DispatchRegs, memory: Memory, *, strict: bool = True, cache: CodeCache | None = None,
                 cost: Callable[[Inst], int] = default_cost, watchdog: int = DEFAULT_WATCHDOG,
                 on_wave_end: Callable[[Wave], None] | None = None,
                 trace: DispatchTrace | None = None, wall_limit: float | None = None) -> DispatchResult:
    """Run one DISPATCH_DIRECT to completion on the emulated RDNA3 (gfx1100) wave32 shader core.

    ``memory`` serves the code fetch, SMEM, and global accesses (GPU virtual addresses). ``strict``
    (default) stops at the first instruction the model does not implement (:class:`Unimplemented` with
    its mnemonic, encoding and PC); with ``strict=False`` such instructions are executed as no-ops and
    counted in ``DispatchResult.skipped`` (the result is then not exact). ``watchdog`` bounds the wave
    instructions of the whole dispatch (:class:`WatchdogExpired`, whose ``dispatch`` keeps the running
    workgroup's waves for :mod:`tinyhw.mocks.amd.sqind`). ``cache`` may be kept by the caller
    for repeated dispatches of the same, unchanged code. ``on_wave_end(wave)`` is called with each wave's
    final state (SGPRs ``wave.s``, VGPRs ``wave.v``, ``wave.wg``, ``wave.index``) when it executes ``s_endpgm`` (for
    workgroups run in lockstep, see the module text: after the last of their waves ended, in wave order).
    ``trace`` (a :class:`~tinyhw.mocks.rdna3.sqtt.DispatchTrace`) is told of every wave start, instruction issue
    and wave end while the SQ thread trace is on. ``wall_limit`` bounds the dispatch's wall time in seconds, looked
    at after every workgroup (a grid of many short workgroups never reaches the instruction watchdog, yet
    emulating it could take hours): past it, :class:`WatchdogExpired` as for the instruction limit.
    :class:`DispatchJob` runs the same dispatch in slices.
    """
    res = DispatchJob(regs, memory, strict=strict, cache=cache, cost=cost, watchdog=watchdog,
                      on_wave_end=on_wave_end, trace=trace, wall_limit=wall_limit).step()
    assert res is not None
    return res


class DispatchJob:
    """One dispatch in progress, run in slices of whole workgroups (what a command processor that lets the host go
    on while its GPU computes needs): :meth:`step` runs workgroups, in the order of :func:`run_dispatch`, until the
    grid is done or a slice of wall time has passed; the next call goes on where it stopped. The arguments are
    :func:`run_dispatch`'s (refusals of :func:`run_dispatch` are raised here); ``wall_limit`` counts the wall time
    of every slice together."""

    def __init__(self, regs: DispatchRegs, memory: Memory, *, strict: bool = True, cache: CodeCache | None = None,
                 cost: Callable[[Inst], int] = default_cost, watchdog: int = DEFAULT_WATCHDOG,
                 on_wave_end: Callable[[Wave], None] | None = None,
                 trace: DispatchTrace | None = None, wall_limit: float | None = None) -> None:
        _check(regs)
        self.regs = regs
        self.d = _Dispatch(regs, memory, strict, cache or CodeCache(), cost, watchdog, on_wave_end, trace)
        self.wall_limit = wall_limit
        #: wall seconds spent emulating it so far, every slice together
        self.wall = 0.0
        nt = regs.num_thread[0] * regs.num_thread[1] * regs.num_thread[2]
        per = (nt + 31) // 32
        # workgroups run in lockstep when nothing observes the order of their instructions (no trace) and the memory
        # can undo a run (peek/poke); each keeps its own LDS, which its waves' accesses check (_WatchedLds); not with
        # scratch (RSRC2.SCRATCH_EN: private memory outside ``memory`` would not be undone)
        wide = trace is None and hasattr(memory, "peek") and not regs.rsrc2 & 1
        self._groups = self._ids(max(1, LOCKSTEP_WAVES // per) if wide else 1)

    def _ids(self, n: int) -> Any:
        r = self.regs
        batch: list[tuple[int, int, int]] = []
        for z in range(r.dim[2]):
            for y in range(r.dim[1]):
                for x in range(r.dim[0]):
                    batch.append((r.start[0] + x, r.start[1] + y, r.start[2] + z))
                    if len(batch) == n:
                        yield batch
                        batch = []
        if batch:
            yield batch

    def step(self, slice_s: float | None = None) -> DispatchResult | None:
        """Run workgroups until the dispatch ends (its :class:`DispatchResult`) or, after a workgroup, ``slice_s``
        wall seconds have passed in this call (None: the dispatch goes on at the next call; ``slice_s`` None runs it
        to the end). Raises what :func:`run_dispatch` raises; the job is then over."""
        d, regs = self.d, self.regs
        t0 = time.monotonic()
        with np.errstate(all="ignore"):
            try:
                for gids in self._groups:
                    d.run_groups(gids)
                    spent = time.monotonic() - t0
                    if self.wall_limit is not None and self.wall + spent > self.wall_limit:
                        raise WatchdogExpired(
                            f"the dispatch ran past its wall-time limit of {self.wall_limit:g} s after "
                            f"{d.res.workgroups} of {regs.dim[0] * regs.dim[1] * regs.dim[2]} workgroups "
                            "(the emulator's limit; a grid this large takes too long to emulate)",
                            pc=regs.entry, mnemonic="(dispatch)", encoding="-")
                    if slice_s is not None and spent >= slice_s:
                        self.wall += spent
                        return None
            except WatchdogExpired as e:
                e.dispatch = d  # the waves stay resident (tinyhw.mocks.amd.sqind)
                raise
        self.wall += time.monotonic() - t0
        res = d.res
        res.lane_instructions = 32 * res.wave_instructions
        res.active_lane_instructions = d.active
        for ent in d.cache.entries.values():
            if ent[4]:
                res.per_mnemonic[ent[2]] = res.per_mnemonic.get(ent[2], 0) + ent[4]
                res.cycles += ent[4] * ent[5]
                ent[4] = 0
        return res
