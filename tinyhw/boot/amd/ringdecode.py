"""Decode ring contents as packets: PM4 type-3 (compute queues) and SDMA 6 (the copy engine).

PM4: specs/amd-compute.md §2.1 (header: type 31:30, COUNT 29:16 = payload dwords - 1, opcode 15:8; the
one-dword filler 0xFFFF1000), §2.3-§2.10 (the fields of NOP, SET_SH_REG, DISPATCH_DIRECT, ACQUIRE_MEM,
RELEASE_MEM, WRITE_DATA, WAIT_REG_MEM, INDIRECT_BUFFER); opcode names from the generated ``nvd.h``
(:mod:`tinyhw.autogen.nvd`). SDMA: the packet layouts of the generated ``sdma_v6_0_0_pkt_open.h``
(:mod:`tinyhw.autogen.sdma_v6_0_0_pkt_open`: every field by name, the length from the last dword the layout
names; INDIRECT names the indirect buffer's address and size) and specs/asm24-usb-bridge.md §9.1 (a zero dword
is a one-dword no-op). A packet whose length cannot be known (an SDMA opcode without a layout) ends the decoding,
saying so.

Pure functions of dwords; reading the ring is :mod:`tinyhw.boot.amd.rings`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import cache
from typing import Any

from tinyhw.autogen.nvd import CONSTANTS as NVD
from tinyhw.autogen.sdma_v6_0_0_pkt_open import CONSTANTS as SDMA

FILLER = 0xFFFF1000
SH_START = NVD["PACKET3_SET_SH_REG_START"]
#: opcode -> name (PACKET3_* constants below 0x100 that are opcodes, not window bounds or field bits)
PM4_NAMES = {v: k[len("PACKET3_"):] for k, v in reversed(list(NVD.items()))
             if k.startswith("PACKET3_") and isinstance(v, int) and v < 0x100 and k.count("_") >= 1
             and not k.endswith(("_START", "_END")) and k[len("PACKET3_"):].isupper()}


def _ib(body: list[int]) -> dict[str, int]:
    return {"ib_va": (body[1] & 0xFFFF) << 32 | (body[0] & ~3), "ib_dwords": body[2] & 0xFFFFF,
            "valid": body[2] >> 23 & 1, "vmid": body[2] >> 24 & 0xF}


#: opcode name -> payload (after the header) -> fields (§2.3-§2.10)
PM4_FIELDS: dict[str, Callable[[list[int]], dict[str, int]]] = {
    "DISPATCH_DIRECT": lambda b: {"dim_x": b[0], "dim_y": b[1], "dim_z": b[2], "initiator": b[3]},
    "ACQUIRE_MEM": lambda b: {"coher_cntl": b[0], "size": b[2] << 32 | b[1], "base": b[4] << 32 | b[3],
                              "poll_interval": b[5], "gcr_cntl": b[6]},
    "RELEASE_MEM": lambda b: {"event_type": b[0] & 0x3F, "event_index": b[0] >> 8 & 0xF,
                              "data_sel": b[1] >> 29 & 7, "int_sel": b[1] >> 24 & 7, "addr": b[3] << 32 | b[2],
                              "data": b[5] << 32 | b[4]},
    "WRITE_DATA": lambda b: {"dst_sel": b[0] >> 8 & 0xF, "wr_one_addr": b[0] >> 16 & 1,
                             "addr": b[2] << 32 | b[1], "ndata": len(b) - 3},
    "WAIT_REG_MEM": lambda b: {"function": b[0] & 7, "mem_space": b[0] >> 4 & 3, "operation": b[0] >> 6 & 3,
                               "addr": b[2] << 32 | b[1], "reference": b[3], "mask": b[4], "poll_interval": b[5]},
    "INDIRECT_BUFFER": _ib,
}


def pm4_length(header: int) -> int:
    """Dwords of the packet starting with ``header`` (type 2 and the filler: 1)."""
    if header == FILLER or header >> 30 == 2:
        return 1
    return ((header >> 16) & 0x3FFF) + 2


def decode_pm4(dwords: list[int], sh_names: dict[int, str] | None = None) -> dict[str, Any]:
    """One packet (its dwords, header first): type, opcode name, fields; SET_SH_REG names its registers."""
    header = dwords[0]
    kind = header >> 30
    doc: dict[str, Any] = {"dwords": len(dwords), "header": header, "type": kind}
    if header == FILLER or kind == 2:
        doc["name"] = "NOP"
        return doc
    if kind != 3:
        doc["name"] = f"TYPE{kind}"
        if kind == 0:
            doc["fields"] = {"register_dword": header & 0xFFFF}
        return doc
    op = header >> 8 & 0xFF
    name = PM4_NAMES.get(op, f"OPCODE_0x{op:02x}")
    doc.update(name=name, opcode=op)
    body = dwords[1:]
    if name == "SET_SH_REG" and body:
        first = SH_START + body[0]
        names = sh_names or {}
        doc["fields"] = {"registers": {names.get(4 * (first + i), f"0x{4 * (first + i):x}"): v
                                       for i, v in enumerate(body[1:])}}
    elif name in PM4_FIELDS:
        try:
            doc["fields"] = PM4_FIELDS[name](body)
        except IndexError:
            doc["problem"] = f"{name} with {len(body)} payload dwords is too short"
    return doc


# -- SDMA ---------------------------------------------------------------------------------------------------------
_OPS = {v: k[len("SDMA_OP_"):] for k, v in SDMA.items() if k.startswith("SDMA_OP_")}
#: (op name, sub-op name or None) -> packet layout name of the generated header
SDMA_LAYOUTS = {("COPY", "COPY_LINEAR"): "COPY_LINEAR", ("WRITE", "WRITE_LINEAR"): "WRITE_UNTILED",
                ("FENCE", None): "FENCE", ("POLL_REGMEM", None): "POLL_REGMEM", ("TRAP", None): "TRAP",
                ("TIMESTAMP", "TIMESTAMP_SET"): "TIMESTAMP_SET", ("TIMESTAMP", "TIMESTAMP_GET"): "TIMESTAMP_GET",
                ("TIMESTAMP", "TIMESTAMP_GET_GLOBAL"): "TIMESTAMP_GET_GLOBAL", ("INDIRECT", None): "INDIRECT"}
#: every packet layout the generated header describes
ALL_LAYOUTS = frozenset(k[len("SDMA_PKT_"):-len("_HEADER_op_offset")] for k in SDMA if k.endswith("_HEADER_op_offset"))
_FIELD = re.compile(r"^([A-Z0-9_]+?)_([a-z][a-z0-9_]*)_offset$")


@cache
def sdma_layout(layout: str) -> tuple[int, tuple[tuple[str, int, int, int], ...]]:
    """(dwords, ((field, dword offset, mask, shift), ...)) of a packet layout of the generated header."""
    prefix = f"SDMA_PKT_{layout}_"
    longer = {k for k in ALL_LAYOUTS if k != layout and k.startswith(layout + "_")}
    out = []
    for key, off in SDMA.items():
        if not key.startswith(prefix) or not key.endswith("_offset"):
            continue
        rest = key[len(prefix):]
        if any(rest.startswith(lo[len(layout) + 1:] + "_") for lo in longer):
            continue
        m = _FIELD.match(rest)
        if m is None:
            continue
        base = key[:-len("_offset")]
        out.append((m.group(2), off, SDMA[base + "_mask"], SDMA[base + "_shift"]))
    return max(o for _, o, _, _ in out) + 1, tuple(out)


def sdma_length(dwords: list[int]) -> int | None:
    """Dwords of the SDMA packet starting at ``dwords[0]``, None when no layout says."""
    header = dwords[0]
    if header == 0:
        return 1
    op, sub = header & 0xFF, header >> 8 & 0xFF
    layout = _sdma_layout_name(op, sub)
    if layout is None:
        return None
    n, fields = sdma_layout(layout)
    if layout == "WRITE_UNTILED" and len(dwords) > 3:
        count = next(((dwords[o] >> s) & m for f, o, m, s in fields if f == "count"), 0)
        return 4 + count + 1
    return n


def _sdma_layout_name(op: int, sub: int) -> str | None:
    name = _OPS.get(op)
    if name is None:
        return None
    for (o, s), layout in SDMA_LAYOUTS.items():
        if o == name and (s is None or SDMA.get(f"SDMA_SUBOP_{s}") == sub):
            return layout
    return None


def decode_sdma(dwords: list[int]) -> dict[str, Any]:
    """One SDMA packet: op and sub-op names, and every field its layout names."""
    header = dwords[0]
    doc: dict[str, Any] = {"dwords": len(dwords), "header": header}
    if header == 0:
        doc["name"] = "NOP"
        return doc
    op, sub = header & 0xFF, header >> 8 & 0xFF
    layout = _sdma_layout_name(op, sub)
    doc["name"] = layout or _OPS.get(op, f"OP_0x{op:02x}")
    doc["opcode"], doc["sub_op"] = op, sub
    if layout is not None:
        _, fields = sdma_layout(layout)
        doc["fields"] = {f: (dwords[o] >> s) & m for f, o, m, s in fields
                         if o < len(dwords) and f not in ("op", "sub_op")}
    return doc


def sdma_ib(packet: dict[str, Any]) -> tuple[int, int, int] | None:
    """(GPU address, dwords, vmid) of the indirect buffer a decoded SDMA INDIRECT packet names, None for any other
    packet (or an INDIRECT cut short). The header's ``ib_size`` counts dwords (inferred: amdgpu's SDMA 6 ring code
    writes the IB's length in dwords there)."""
    f = packet.get("fields", {})
    if packet.get("name") != "INDIRECT" or not {"ib_base_31_0", "ib_base_63_32", "ib_size"} <= f.keys():
        return None
    return f["ib_base_63_32"] << 32 | f["ib_base_31_0"], f["ib_size"], f.get("vmid", 0)
