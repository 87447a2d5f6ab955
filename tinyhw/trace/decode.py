"""Decoding recorded accesses against the register database (like envytools' demmio, for every transport).

A register access is resolved by (BAR, offset) from the trace header's device identity: the ASIC's register
profile names its register BAR, and a reverse index of the register database (offset -> ``block.REGISTER``)
gives the register and its fields. Records are grouped by the mark they fall under: a "start" mark opens a
group, its "done" closes it (groups nest), a "point" mark starts a new group at its level.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import TinyhwError
from tinyhw.formats import tracefile
from tinyhw.formats.tracefile import Record, Trace
from tinyhw.regs import Asic, Register, asic_for_device

NO_MARK = "(outside any mark)"  # before the first mark, or after every mark closed


class Decoder:
    """Register names for the accesses of one trace (None when the device has no register profile)."""

    def __init__(self, header: dict[str, Any]) -> None:
        ident = header.get("identity") or {}
        self.asic: Asic | None = None
        try:
            self.asic = asic_for_device(int(ident.get("vendor_id", 0)), int(ident.get("device_id", 0)))
        except (TinyhwError, TypeError, ValueError):
            self.asic = None
        self._by_offset: dict[int, Register] | None = None

    @property
    def bar(self) -> int | None:
        """The register BAR of the device, or None."""
        return self.asic.bar if self.asic is not None else None

    def _index(self) -> dict[int, Register]:
        if self._by_offset is None:
            self._by_offset = {}
            if self.asic is not None:
                for reg in self.asic.find("*"):
                    if reg.offset is not None:
                        self._by_offset.setdefault(reg.offset, reg)
        return self._by_offset

    def register(self, rec: Record) -> Register | None:
        """The register a 32-bit BAR access (or poll) touches, or None."""
        registers = (tracefile.READ32, tracefile.WRITE32, tracefile.POLL)
        if rec.op not in registers or self.asic is None or rec.bar != self.asic.bar:
            return None
        return self._index().get(rec.fields["offset"])

    def offsets(self, names: Iterable[str]) -> set[int]:
        """The register-BAR offsets of ``block.REGISTER`` names (exit 2 for an unknown one, with the closest)."""
        if self.asic is None:
            return set()
        return {self.asic.offset(n) for n in names}


@dataclass
class Group:
    """The records under one mark (``path``: the enclosing marks' texts, outermost first)."""

    path: list[str]
    records: list[Record] = field(default_factory=list)

    @property
    def label(self) -> str:
        """The marks as one string, ``outer > inner``."""
        return " > ".join(self.path) or NO_MARK


def mark_path(trace: Trace | Iterable[Record]) -> Iterator[tuple[list[str], Record]]:
    """(the open marks, record) for every record that is not a mark, in order (of a trace, or of records as they
    are read)."""
    stack: list[str] = []
    for rec in trace.records if isinstance(trace, Trace) else trace:
        if rec.op == tracefile.MARK:
            phase = rec.fields["phase"]
            if phase == "start":
                stack.append(rec.text)
            elif phase == "done":
                if rec.text in stack:
                    del stack[len(stack) - 1 - stack[::-1].index(rec.text):]
            elif stack:
                stack[-1] = rec.text
            else:
                stack.append(rec.text)
            continue
        yield list(stack), rec


def groups(trace: Trace, records: Iterable[tuple[list[str], Record]] | None = None) -> list[Group]:
    """Consecutive records under the same marks, as groups."""
    out: list[Group] = []
    for path, rec in records if records is not None else mark_path(trace):
        if not out or out[-1].path != path:
            out.append(Group(path))
        out[-1].records.append(rec)
    return out


def mark_of(trace: Trace, index: int) -> str:
    """The marks record ``index`` falls under, as one string."""
    for path, rec in mark_path(trace):
        if rec.index == index:
            return " > ".join(path) or NO_MARK
    return NO_MARK


def fields_changed(reg: Register | None, old: int | None, new: int) -> dict[str, list[int | None]]:
    """Field -> [old, new] for the fields of ``reg`` that differ between ``old`` and ``new`` (all, when no old)."""
    if reg is None:
        return {}
    return {f.name: [f.extract(old) if old is not None else None, f.extract(new)] for f in reg.fields
            if old is None or f.extract(old) != f.extract(new)}


def describe(rec: Record, decoder: Decoder, last: dict[tuple[int | None, int], int] | None = None) -> dict[str, Any]:
    """One record as a JSON-ready dict, with ``register`` and ``fields`` (those that changed since the last
    value seen at that address, tracked in ``last``) where the register database knows the address."""
    doc = rec.as_dict()
    reg = decoder.register(rec)
    if reg is not None:
        doc["register"] = reg.name
        if last is not None:
            key = (rec.bar, rec.fields["offset"])
            old = last.get(key)
            doc["fields"] = fields_changed(reg, old, rec.fields["value"])
            last[key] = rec.fields["value"]
        else:
            doc["fields"] = {k: v[1] for k, v in fields_changed(reg, None, rec.fields["value"]).items()}
    return doc


def brief(rec: Record, decoder: Decoder) -> str:
    """One line for a human: what was accessed, with the value and the register name."""
    f = rec.fields
    reg = decoder.register(rec)
    name = f" {reg.name}" if reg is not None else ""
    if rec.op in (tracefile.READ32, tracefile.WRITE32):
        arrow = "->" if rec.op == tracefile.READ32 else "<-"
        return f"bar{rec.bar}+0x{f['offset']:x}{name} {arrow} 0x{f['value']:08x}"
    if rec.op in (tracefile.CFG_READ, tracefile.CFG_WRITE):
        arrow = "->" if rec.op == tracefile.CFG_READ else "<-"
        return f"config 0x{f['offset']:03x}/{rec.width} {arrow} 0x{f['value']:x}"
    if rec.op in (tracefile.BULK_READ, tracefile.BULK_WRITE):
        return f"{rec.name} bar{rec.bar}+0x{f['offset']:x} 0x{f['length']:x} bytes sha {f['sha'].hex()}"
    if rec.op == tracefile.POLL:
        return (f"poll bar{rec.bar}+0x{f['offset']:x}{name} & 0x{f['mask']:x} == 0x{f['expect']:x} -> "
                f"0x{f['value']:08x}")
    if rec.op == tracefile.USB_CONTROL:
        return (f"usb control {f['direction']} type 0x{f['request_type']:02x} request 0x{f['request']:02x} "
                f"value 0x{f['value']:04x} index 0x{f['w_index']:04x} {f['length']} bytes")
    if rec.op == tracefile.USB_BULK:
        return f"usb bulk {f['direction']} ep 0x{f['endpoint']:02x} {f['length']} bytes"
    if rec.op == tracefile.ERROR:
        return f"error in {f['failed_op']}: {rec.text}"
    if rec.op == tracefile.ABILITY:
        return f"ability {f['call']}({', '.join(map(str, f['args']))})"
    if rec.op == tracefile.SLEEP:
        return f"sleep {f['ns'] / 1e6:g} ms"
    if rec.op == tracefile.DROPPED:
        return f"{f['count']} records lost"
    return rec.name
