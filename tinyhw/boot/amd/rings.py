"""Read a ring of the GPU and decode its packets: what is between the read and write pointer, and what came before.

Rings (the ones tinyhw creates):

* ``compute``: MEC1 pipe 0 queue 0 (:mod:`tinyhw.boot.amd.compute`); its registers through GRBM_GFX_CNTL
  (specs/amd-compute.md §1.2), ring at CP_HQD_PQ_BASE << 8 (a GPU virtual address, read through the page tables:
  :mod:`tinyhw.boot.amd.vmread`) of 2^(CP_HQD_PQ_CONTROL.QUEUE_SIZE + 1) dwords, CP_HQD_PQ_RPTR (32 bits) and
  CP_HQD_PQ_WPTR_LO/HI (64 bits), both in dwords (§1.7); PM4 packets, INDIRECT_BUFFER followed (§2.10).
* ``sdma0``: SDMA0 queue 0 (:mod:`tinyhw.boot.amd.copyengine`): ring at the MC address SDMA0_QUEUE0_RB_BASE << 8 of
  2^RB_CNTL.RB_SIZE dwords, RB_RPTR/WPTR (+ _HI) in bytes (specs/amd-bringup.md §4.2 step 10); SDMA packets,
  INDIRECT followed (its buffer at a VMID0 GPU address: VRAM through the system aperture, else the page tables).

Only what is still in the ring can be shown: the history starts at the oldest dword the ring still holds (the
ring's start before the first wrap), so after a wrap its first packet may be cut (said in ``problems``).
Everything is bounded: the ring is read once (at most :data:`MAX_RING` bytes), ``last`` packets before the read
pointer (at most :data:`MAX_LAST`), indirect buffers to depth :data:`MAX_IB_DEPTH` and :data:`MAX_IB_DWORDS`
dwords each.
"""

from __future__ import annotations

import struct
from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd import ringdecode
from tinyhw.boot.amd.gpustatus import QUEUE, select_queue
from tinyhw.boot.amd.vmread import VmReader
from tinyhw.errors import Refused, TinyhwError

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

RINGS = ("compute", "sdma0")
MAX_RING = 4 << 20
MAX_LAST = 256
MAX_PENDING = 4096  # packets shown between the pointers
MAX_IB_DEPTH, MAX_IB_DWORDS = 2, 1 << 16


def _compute_regs(gpu: AmGpu) -> dict[str, Any]:
    names = ("CP_HQD_ACTIVE", "CP_HQD_PQ_BASE", "CP_HQD_PQ_BASE_HI", "CP_HQD_PQ_CONTROL", "CP_HQD_PQ_RPTR",
             "CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI")
    select_queue(gpu, QUEUE)
    try:
        r = {n: gpu.rd(f"gc.{n}") for n in names}
    finally:
        select_queue(gpu, None)
    size = 1 << (gpu.asic.reg("gc.CP_HQD_PQ_CONTROL").decode(r["CP_HQD_PQ_CONTROL"])["QUEUE_SIZE"] + 1)
    wptr = r["CP_HQD_PQ_WPTR_HI"] << 32 | r["CP_HQD_PQ_WPTR_LO"]
    rptr = wptr - ((wptr - r["CP_HQD_PQ_RPTR"]) & 0xFFFFFFFF)  # the 32-bit read pointer against the 64-bit write
    base = ((r["CP_HQD_PQ_BASE_HI"] & 0xFF) << 32 | r["CP_HQD_PQ_BASE"]) << 8
    return {"ring": "compute", "queue": {"me": QUEUE[0], "pipe": QUEUE[1], "queue": QUEUE[2]},
            "active": bool(r["CP_HQD_ACTIVE"] & 1), "base": base, "address_space": "gpu virtual (vmid 0)",
            "size_dwords": size, "rptr": max(rptr, 0), "wptr": wptr, "registers": r}


def _sdma_regs(gpu: AmGpu) -> dict[str, Any]:
    names = ("SDMA0_QUEUE0_RB_CNTL", "SDMA0_QUEUE0_RB_BASE", "SDMA0_QUEUE0_RB_BASE_HI", "SDMA0_QUEUE0_RB_RPTR",
             "SDMA0_QUEUE0_RB_RPTR_HI", "SDMA0_QUEUE0_RB_WPTR", "SDMA0_QUEUE0_RB_WPTR_HI")
    r = {n: gpu.rd(f"gc.{n}") for n in names}
    cntl = gpu.asic.reg("gc.SDMA0_QUEUE0_RB_CNTL").decode(r["SDMA0_QUEUE0_RB_CNTL"])
    rptr = (r["SDMA0_QUEUE0_RB_RPTR_HI"] << 32 | r["SDMA0_QUEUE0_RB_RPTR"]) // 4
    wptr = (r["SDMA0_QUEUE0_RB_WPTR_HI"] << 32 | r["SDMA0_QUEUE0_RB_WPTR"]) // 4
    base = (r["SDMA0_QUEUE0_RB_BASE_HI"] << 32 | r["SDMA0_QUEUE0_RB_BASE"]) << 8
    return {"ring": "sdma0", "active": bool(cntl["RB_ENABLE"]), "base": base, "address_space": "mc (vram)",
            "size_dwords": 1 << cntl["RB_SIZE"], "rptr": rptr, "wptr": wptr, "registers": r}


def _packets(words: list[int], start: int, end: int, kind: str, sh: dict[int, str], limit: int
             ) -> tuple[list[dict[str, Any]], str | None]:
    """Decode ring dwords ``start .. end`` (absolute positions, ring index modulo len(words))."""
    size = len(words)
    out: list[dict[str, Any]] = []
    pos = start
    while pos < end and len(out) < limit:
        head = [words[(pos + i) % size] for i in range(min(4, end - pos))]
        n = ringdecode.pm4_length(head[0]) if kind == "pm4" else ringdecode.sdma_length(head)
        if n is None:
            return out, (f"packet header 0x{head[0]:08x} at dword 0x{pos:x} has no known layout; "
                         "decoding stops there")
        body = [words[(pos + i) % size] for i in range(min(n, end - pos))]
        doc = ringdecode.decode_pm4(body, sh) if kind == "pm4" else ringdecode.decode_sdma(body)
        if n > end - pos:
            doc["problem"] = f"needs {n} dwords, only {end - pos} are there"
        doc["at"] = pos
        out.append(doc)
        pos += n
    return out, None


def read_ring(gpu: AmGpu, ring: str = "compute", *, last: int = 16, follow_ibs: bool = True) -> dict[str, Any]:
    """The ring's pointers, its pending packets (read .. write pointer) and the ``last`` packets before the read
    pointer, decoded; indirect buffers (PM4 INDIRECT_BUFFER, SDMA INDIRECT) are read and decoded inside their
    packet. ``booted``/``boot_note``: whether a tinyhw boot brought the board up (a cold board's ring is empty)."""
    from tinyhw.boot.amd.state import boot_view

    if ring not in RINGS:
        raise Refused(f"unknown ring {ring!r}", hint=f"name one of {', '.join(RINGS)}")
    if not 0 <= last <= MAX_LAST:
        raise Refused(f"--last {last}: show 0 .. {MAX_LAST} packets before the read pointer")
    doc = {**boot_view(gpu), **(_compute_regs(gpu) if ring == "compute" else _sdma_regs(gpu))}
    doc["problems"] = []
    doc["pending_dwords"] = doc["wptr"] - doc["rptr"]
    doc["pending"], doc["history"] = [], []
    size = doc["size_dwords"]
    if not doc["base"] or 4 * size > MAX_RING:
        doc["problems"].append("the ring is not set up (no base address)" if not doc["base"]
                               else f"the ring's size ({4 * size} bytes) is past the {MAX_RING}-byte limit")
        return doc
    if doc["pending_dwords"] < 0 or doc["pending_dwords"] > size:
        doc["problems"].append(f"the write pointer 0x{doc['wptr']:x} is not within a ring of the read pointer "
                               f"0x{doc['rptr']:x}: the pointers are inconsistent")
        return doc
    vm = VmReader(gpu) if ring == "compute" else None
    try:
        raw = vm.read(doc["base"], 4 * size) if vm is not None else \
            gpu.vram_read(doc["base"] - gpu.fb_base, 4 * size)
    except TinyhwError as e:
        doc["problems"].append(f"the ring at 0x{doc['base']:x} cannot be read: {e}")
        return doc
    words = list(struct.unpack(f"<{size}I", raw))
    kind = "pm4" if ring == "compute" else "sdma"
    sh = _sh_names(gpu) if kind == "pm4" else {}
    pending, stop = _packets(words, doc["rptr"], doc["wptr"], kind, sh, MAX_PENDING)
    if stop:
        doc["problems"].append(stop)
    oldest = max(0, doc["wptr"] - size)
    history, stop = _packets(words, oldest, doc["rptr"], kind, sh, 1 << 30)
    if stop:
        doc["problems"].append(stop)
    if oldest and history:
        doc["problems"].append(f"the ring wrapped: the history starts at dword 0x{oldest:x} and its first packet "
                               "may be cut")
    doc["pending"], doc["history"] = pending, history[len(history) - last:] if last else []
    if follow_ibs:
        reader = vm if vm is not None else _SdmaReader(gpu)
        for p in doc["pending"] + doc["history"]:
            _follow(reader, p, kind, sh, 1)
    return doc


class _SdmaReader:
    """Reads at the GPU addresses SDMA0's queue uses (VMID0): an address in the frame buffer's MC range is VRAM
    (the system aperture covers VRAM, :func:`tinyhw.boot.amd.copyengine.program_hub`), any other goes through VMID0's
    page tables."""

    def __init__(self, gpu: AmGpu) -> None:
        self.gpu = gpu
        self.vm: VmReader | None = None

    def read(self, addr: int, length: int) -> bytes:
        off = addr - self.gpu.fb_base
        if off >= 0 and off + length <= self.gpu.vram_size:
            return self.gpu.vram_read(off, length)
        self.vm = self.vm or VmReader(self.gpu)
        return self.vm.read(addr, length)


def _ib_of(packet: dict[str, Any], kind: str) -> tuple[int, int] | None:
    """(address, dwords) of the indirect buffer a decoded packet names (PM4 INDIRECT_BUFFER, SDMA INDIRECT)."""
    if kind == "pm4":
        if packet.get("name") != "INDIRECT_BUFFER" or "fields" not in packet:
            return None
        return packet["fields"]["ib_va"], packet["fields"]["ib_dwords"]
    ib = ringdecode.sdma_ib(packet)
    return None if ib is None else ib[:2]


def _follow(reader: VmReader | _SdmaReader, packet: dict[str, Any], kind: str, sh: dict[int, str],
            depth: int) -> None:
    ib = _ib_of(packet, kind)
    if ib is None:
        return
    addr, dwords = ib
    if depth > MAX_IB_DEPTH:
        packet["ib_problem"] = f"not followed: deeper than {MAX_IB_DEPTH} levels"
        return
    n = min(dwords, MAX_IB_DWORDS)
    try:
        words = list(struct.unpack(f"<{n}I", reader.read(addr, 4 * n))) if n else []
    except TinyhwError as e:
        packet["ib_problem"] = f"the indirect buffer at 0x{addr:x} cannot be read: {e}"
        return
    body, stop = _packets(words + [0] * 3, 0, n, kind, sh, MAX_PENDING)
    packet["ib"] = body
    problems = [stop] if stop else []
    if dwords > n:
        problems.append(f"only the first {n} of {dwords} dwords shown")
    if problems:
        packet["ib_problem"] = "; ".join(problems)
    for p in body:
        _follow(reader, p, kind, sh, depth + 1)


def _sh_names(gpu: AmGpu) -> dict[int, str]:
    """Byte offset -> name of the registers SET_SH_REG reaches (gc COMPUTE_* and the SH window)."""
    out: dict[int, str] = {}
    for reg in gpu.asic.find("gc.COMPUTE_*"):
        if reg.offset is not None:
            out.setdefault(reg.offset, reg.name)
    return out
