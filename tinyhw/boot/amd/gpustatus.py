"""The GPU's busy and stall bits, decoded by field name: what a hang report starts with.

Spec: specs/amd-compute.md §8 (GRBM_STATUS: idle compute = CP_BUSY 0 and SPI_BUSY 0; CP_STAT; CP_CPC_STATUS /
CP_CPC_BUSY_STAT give the MEC's busy bits; per queue CP_HQD_ACTIVE, CP_HQD_PQ_RPTR vs WPTR, CP_HQD_HQ_STATUS0,
CP_HQD_ERROR selected through GRBM_GFX_CNTL), §1.2 (GRBM_GFX_CNTL), specs/amd-bringup.md §3.3 (CP_STAT 0 = idle).
Every register and field name comes from the generated database.

A field is *flagged* (shown highlighted) when it says the block is working or waiting: a non-zero field whose
name holds BUSY, PENDING, STALL, ACTIVE, WAIT, DECODING, HALT, ERROR or FAULT, or a zero field named ..._IDLE (a
block that is not idle); in a control register (CP_MEC_RS64_CNTL, SDMA0_QUEUE0_RB_CNTL) only a set HALT or RESET.
The registers are only read, except GRBM_GFX_CNTL, which selects the compute queue's bank and is put back to 0
afterwards (the same write every compute command makes).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from tinyhw.errors import TinyhwError

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.transport.base import Transport

#: (group, registers) in the order a status view shows them
GROUPS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("grbm", ("GRBM_STATUS", "GRBM_STATUS2", "GRBM_STATUS3", "GRBM_STATUS_SE0", "GRBM_STATUS_SE1",
              "GRBM_STATUS_SE2", "GRBM_STATUS_SE3")),
    ("cp", ("CP_STAT", "CP_CPF_STATUS", "CP_CPF_BUSY_STAT")),
    ("mec", ("CP_CPC_STATUS", "CP_CPC_BUSY_STAT", "CP_CPC_BUSY_STAT2", "CP_CPC_STALLED_STAT1", "CP_MEC_RS64_CNTL")),
    ("sdma0", ("SDMA0_STATUS_REG", "SDMA0_QUEUE0_RB_CNTL")),
    ("vm", ("GCVM_L2_PROTECTION_FAULT_STATUS",)),
)
#: the compute queue tinyhw creates (tinyhw.boot.amd.compute: MEC1 pipe 0 queue 0) and its registers
QUEUE = (1, 0, 0)
QUEUE_REGS = ("CP_HQD_ACTIVE", "CP_HQD_PQ_RPTR", "CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI", "CP_HQD_HQ_STATUS0",
              "CP_HQD_ERROR", "CP_HQD_DEQUEUE_REQUEST")
_WORKING = re.compile(r"BUSY|PENDING|STALL|ACTIVE|WAIT|DECODING|HALT|ERROR|FAULT")


def open_gpu(transport: Transport, warn: Any = None) -> AmGpu:
    """The :class:`~tinyhw.boot.amd.gpu.AmGpu` of an AMD GPU for the views; refused (exit 2) from the device's
    identity, before any register access, when it is not one."""
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.errors import Refused

    ident = transport.identity()
    if ident.vendor_id != 0x1002 or ident.class_code >> 16 != 0x03:
        raise Refused(f"{ident.location or transport.name} ({ident.vendor_id:04x}:{ident.device_id:04x}) is not an "
                      "amd gpu; the am views read amd gpus only")
    return AmGpu(transport, warn=warn)


def flagged(field: str, value: int, register: str = "") -> bool:
    """True when ``field`` = ``value`` says the block is working, waiting or not idle (module docstring); in a
    control register (``..._CNTL``) only a set HALT or RESET field is flagged."""
    if register.endswith("_CNTL"):
        return value != 0 and ("HALT" in field or "RESET" in field)
    if field.endswith("_IDLE") or field == "IDLE":
        return value == 0
    return value != 0 and bool(_WORKING.search(field))


def decode(gpu: AmGpu, name: str, value: int) -> dict[str, Any]:
    """One register's document: value, every field, and the flagged ones."""
    reg = gpu.asic.reg(f"gc.{name}")
    fields = reg.decode(value)
    return {"name": name, "value": value, "fields": fields,
            "flagged": [f for f, v in fields.items() if flagged(f, v, name)]}


def select_queue(gpu: AmGpu, key: tuple[int, int, int] | None) -> None:
    """GRBM_GFX_CNTL: the (me, pipe, queue) bank, or 0 (``None``)."""
    from tinyhw.boot.amd.copyengine import fields

    if key is None:
        gpu.wr("gc.GRBM_GFX_CNTL", 0)
        return
    me, pipe, queue = key
    gpu.wr("gc.GRBM_GFX_CNTL", fields(gpu, "gc.GRBM_GFX_CNTL", MEID=me, PIPEID=pipe, QUEUEID=queue))


def read_status(gpu: AmGpu) -> dict[str, Any]:
    """Every status register of :data:`GROUPS` and the compute queue's, decoded, with a one-line verdict; ``booted``
    and ``boot_note`` say whether a tinyhw boot brought the board up (:func:`tinyhw.boot.amd.state.boot_view`)."""
    from tinyhw.boot.amd.state import boot_view

    doc: dict[str, Any] = {**boot_view(gpu), "groups": {}, "problems": []}
    for group, names in GROUPS:
        doc["groups"][group] = [decode(gpu, n, gpu.rd(f"gc.{n}")) for n in names]
    select_queue(gpu, QUEUE)
    try:
        queue = [decode(gpu, n, gpu.rd(f"gc.{n}")) for n in QUEUE_REGS]
    except TinyhwError as e:
        doc["problems"].append(f"compute queue registers: {e}")
        queue = []
    finally:
        select_queue(gpu, None)
    if queue:
        by = {r["name"]: r["value"] for r in queue}
        wptr = by["CP_HQD_PQ_WPTR_HI"] << 32 | by["CP_HQD_PQ_WPTR_LO"]
        doc["queue"] = {"me": QUEUE[0], "pipe": QUEUE[1], "queue": QUEUE[2], "registers": queue,
                        "active": bool(by["CP_HQD_ACTIVE"] & 1), "rptr": by["CP_HQD_PQ_RPTR"], "wptr": wptr,
                        "pending_dwords": (wptr - by["CP_HQD_PQ_RPTR"]) & 0xFFFFFFFF}
    doc["verdict"] = verdict(doc)
    return doc


def verdict(doc: dict[str, Any]) -> str:
    """One line: idle, or which blocks are busy (GRBM_STATUS / GRBM_STATUS2 flags) and the queue's backlog; on a
    board no tinyhw boot brought up it says so (an idle cold board is not an idle working one)."""
    grbm = {r["name"]: r for r in doc["groups"]["grbm"]}
    busy = grbm["GRBM_STATUS"]["flagged"] + grbm["GRBM_STATUS2"]["flagged"]
    parts = ["busy: " + " ".join(busy) if busy else "gfx idle"]
    q = doc.get("queue")
    if q and q["pending_dwords"]:
        parts.append(f"compute queue has {q['pending_dwords']} dwords not consumed")
    vm = doc["groups"]["vm"][0]
    if vm["value"]:
        parts.append(f"gpu vm fault latched (GCVM_L2_PROTECTION_FAULT_STATUS 0x{vm['value']:08x})")
    if doc.get("booted") is False:
        parts.append(doc["boot_note"])
    return "; ".join(parts)
