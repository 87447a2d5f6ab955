"""The waves resident on the GPU, read through the SQ indirect registers; halt and resume them.

Spec: specs/amd-compute.md §8 (select SE/SA/SIMD through GRBM_GFX_INDEX, then SQ_IND_INDEX = WAVE_ID |
WORKITEM_ID | AUTO_INCR | INDEX and read SQ_IND_DATA; the wave registers, SGPRs at 0x200 + n and VGPRs at
0x400 + n per lane; SQ_WAVE_STATUS.VALID says a slot holds a wave), through :mod:`tinyhw.formats.sqwave`
(indices, HW_ID1, the SQ_CMD halt word; which of them are inferred is said there). The instruction at the PC
is read through the page tables (:mod:`tinyhw.boot.amd.vmread`) and decoded by the shared gfx11 table
(:mod:`tinyhw.formats.amdisa`).

The scan reads SQ_WAVE_STATUS of every slot (SE x SA x WGP x SIMD x wave slots, from the GC info of the
discovery table when it has one; :data:`DEFAULT_SHAPE` otherwise) and reads the rest only of valid ones.
GRBM_GFX_INDEX is put back to broadcast afterwards. :func:`halted` halts every wave (SQ_CMD broadcast) and
resumes them when the block ends, also on an error or Ctrl-C.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd.copyengine import fields
from tinyhw.boot.amd.vmread import VmReader
from tinyhw.errors import Refused, TinyhwError
from tinyhw.formats import amdisa, sqwave

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

#: (shader engines, arrays per engine, WGPs per array, SIMDs per WGP, wave slots per SIMD): Navi31
DEFAULT_SHAPE = (6, 2, 4, 4, 16)
MAX_VGPRS = 256
BROADCAST = ("SE_BROADCAST_WRITES", "SA_BROADCAST_WRITES", "INSTANCE_BROADCAST_WRITES")


def shape(gpu: AmGpu) -> tuple[int, int, int, int, int]:
    """The slot grid to scan: from the discovery table's GC info when it is there, else :data:`DEFAULT_SHAPE`
    (4 SIMDs per WGP; at most 32 wave slots per SIMD, what SQ_IND_INDEX.WAVE_ID can name)."""
    from tinyhw.boot.amd.identify import gc_info

    try:
        derived = (gc_info(gpu) or {}).get("derived")
    except TinyhwError:
        derived = None
    if not derived or not derived["shader_engines"] or not derived["shader_arrays"]:
        return DEFAULT_SHAPE
    se = derived["shader_engines"]
    sa = max(1, derived["shader_arrays"] // se)
    wgps = max(1, derived["cus_per_array"] // 2)
    slots = derived["max_waves_per_simd"] or DEFAULT_SHAPE[4]
    return min(se, 8), min(sa, 4), min(wgps, 16), 4, min(slots, 32)


def select(gpu: AmGpu, se: int | None = None, sa: int = 0, inst: int = 0) -> None:
    """GRBM_GFX_INDEX: one SE/SA/instance, or broadcast to all (``se`` None)."""
    if se is None:
        gpu.wr("gc.GRBM_GFX_INDEX", fields(gpu, "gc.GRBM_GFX_INDEX", **{b: 1 for b in BROADCAST}))
    else:
        gpu.wr("gc.GRBM_GFX_INDEX", fields(gpu, "gc.GRBM_GFX_INDEX", SE_INDEX=se, SA_INDEX=sa, INSTANCE_INDEX=inst))


def read_ind(gpu: AmGpu, wave: int, index: int, count: int = 1, lane: int = 0) -> list[int]:
    """``count`` SQ_IND_DATA reads from ``index`` (AUTO_INCR when more than one) of the selected SIMD's wave."""
    gpu.wr("gc.SQ_IND_INDEX", fields(gpu, "gc.SQ_IND_INDEX", WAVE_ID=wave, WORKITEM_ID=lane,
                                     AUTO_INCR=int(count > 1), INDEX=index))
    return [gpu.rd("gc.SQ_IND_DATA") for _ in range(count)]


def read_wave(gpu: AmGpu, slot: sqwave.Slot, status: int, *, sgprs: int = sqwave.SGPRS, vgprs: int = 0,
              vm: VmReader | None = None) -> dict[str, Any]:
    """Everything about one valid wave (its SIMD selected): registers, SGPRs, ``vgprs`` VGPRs of every lane,
    the instruction at its PC."""
    regs = {name: read_ind(gpu, slot.wave, index)[0] for name, index in sqwave.INDEX.items() if name != "STATUS"}
    regs["STATUS"] = status
    pc = regs["PC_HI"] << 32 | regs["PC_LO"]
    doc: dict[str, Any] = {
        "slot": slot.to_doc(), "status": status, "status_flags": sqwave.status_flags(status), "pc": pc,
        "exec": regs["EXEC_HI"] << 32 | regs["EXEC_LO"], "hw_id1": sqwave.hw_id1(regs["HW_ID1"]),
        "registers": regs, "sgprs": read_ind(gpu, slot.wave, sqwave.SGPR_OFFSET, sgprs) if sgprs else []}
    if vgprs:
        doc["vgprs"] = [read_ind(gpu, slot.wave, sqwave.VGPR_OFFSET, vgprs, lane) for lane in range(32)]
    doc["instruction"] = instruction_at(vm, pc)
    return doc


def instruction_at(vm: VmReader | None, pc: int) -> dict[str, Any]:
    """The gfx11 instruction at ``pc`` (read through the page tables), or why it could not be read."""
    if vm is None:
        return {"problem": "code memory not readable"}
    try:
        raw = vm.read(pc & ~3, 16)
    except TinyhwError as e:
        return {"problem": str(e)}
    inst = amdisa.decode_at(raw, 0, "gfx11")
    return {"text": inst.text, "size": inst.size, "encoding": inst.encoding,
            "dwords": [int.from_bytes(raw[i:i + 4], "little") for i in range(0, inst.size, 4)]}


def scan(gpu: AmGpu, *, sgprs: int = sqwave.SGPRS, vgprs: int = 0) -> dict[str, Any]:
    """Every resident wave: {"waves": [...], "slots_scanned", "shape", "booted", "boot_note"} (the last two: whether a
    tinyhw boot brought the board up, :func:`tinyhw.boot.amd.state.boot_view`)."""
    from tinyhw.boot.amd.state import boot_view

    if not 0 <= sgprs <= sqwave.SGPRS:
        raise Refused(f"--sgprs {sgprs}: read 0 .. {sqwave.SGPRS} sgprs")
    if not 0 <= vgprs <= MAX_VGPRS:
        raise Refused(f"--vgprs {vgprs}: read 0 .. {MAX_VGPRS} vgprs per lane")
    ses, sas, wgps, simds, slots = shape(gpu)
    try:
        vm: VmReader | None = VmReader(gpu)
    except TinyhwError:
        vm = None
    waves, scanned = [], 0
    try:
        for se in range(ses):
            for sa in range(sas):
                for wgp in range(wgps):
                    for simd in range(simds):
                        select(gpu, se, sa, sqwave.instance(wgp, simd))
                        for w in range(slots):
                            scanned += 1
                            status = read_ind(gpu, w, sqwave.INDEX["STATUS"])[0]
                            if status & sqwave.VALID and status != 0xFFFFFFFF:
                                waves.append(read_wave(gpu, sqwave.Slot(se, sa, wgp, simd, w), status,
                                                       sgprs=sgprs, vgprs=vgprs, vm=vm))
    finally:
        select(gpu)
    return {**boot_view(gpu), "waves": waves, "slots_scanned": scanned, "shape": {"shader_engines": ses, "arrays": sas,
                                                                "wgps": wgps, "simds": simds, "slots": slots}}


def halt(gpu: AmGpu, on: bool) -> None:
    """SQ_CMD SETHALT broadcast: halt (``on``) or resume every wave."""
    gpu.wr("gc.SQ_CMD", fields(gpu, "gc.SQ_CMD", CMD=sqwave.CMD_SETHALT, MODE=sqwave.MODE_BROADCAST,
                               DATA=int(on)))


@contextlib.contextmanager
def halted(gpu: AmGpu) -> Iterator[None]:
    """Halt every wave for the block; resume them when it ends, however it ends (error, Ctrl-C)."""
    halt(gpu, True)
    try:
        yield
    finally:
        halt(gpu, False)
