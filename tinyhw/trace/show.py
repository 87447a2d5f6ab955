"""``tinyhw trace show``: a recording's accesses decoded by register, grouped by mark, optionally filtered."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats import tracefile
from tinyhw.formats.tracefile import Trace
from tinyhw.regs import names
from tinyhw.trace.decode import NO_MARK, Decoder, describe, groups, mark_path

WIRE = (tracefile.USB_CONTROL, tracefile.USB_BULK)


@dataclass(frozen=True)
class Filter:
    """Which records ``show`` keeps: a register block, a register name (globs allowed), writes only, and whether
    the bridge's USB transfers (the wire under the register accesses) are included."""

    block: str | None = None
    register: str | None = None
    writes: bool = False
    usb: bool = False


def _matcher(decoder: Decoder, flt: Filter) -> Any:
    if (flt.block or flt.register) and decoder.asic is None:
        raise Refused("--block and --register need a device with a register profile; this recording has none")
    block = None
    if flt.block and decoder.asic is not None:
        decoder.asic.block(flt.block)  # an unknown block is refused with the closest names
        block = flt.block.lower()
    reg_re = None
    if flt.register:
        pattern = flt.register.strip()
        reg_re = names.glob_matcher(pattern if "." in pattern else f"*.{pattern}")
        if decoder.asic is not None:
            decoder.asic.find(pattern)  # a name or glob no register matches is refused, with the closest names

    def keep(rec: tracefile.Record) -> bool:
        if rec.op in WIRE and not flt.usb:
            return False
        if flt.writes and not (rec.op in tracefile.WRITES or (rec.op in WIRE and rec.fields.get("direction") == "out")):
            return False
        if block is None and reg_re is None:
            return True
        reg = decoder.register(rec)
        if reg is None:
            return False
        return (block is None or reg.block == block) and (reg_re is None or bool(reg_re.match(reg.name)))

    return keep


def show(trace: Trace, flt: Filter = Filter()) -> dict[str, Any]:
    """The document ``trace show`` prints: header, groups of decoded records (fields that changed since the last
    access to the same register), and whether the file was cut short or lost records."""
    decoder = Decoder(trace.header)
    keep = _matcher(decoder, flt)
    last: dict[tuple[int | None, int], int] = {}
    kept = []
    for path, rec in mark_path(trace):
        doc = describe(rec, decoder, last) if rec.op in (tracefile.READ32, tracefile.WRITE32, tracefile.POLL) else None
        if keep(rec):
            kept.append((path, rec, doc if doc is not None else describe(rec, decoder)))
    out_groups = []
    for g in groups(trace, [(p, r) for p, r, _ in kept]):
        docs = {id(r): d for _, r, d in kept}
        out_groups.append({"mark": g.label, "records": [docs[id(r)] for r in g.records]})
    return {"header": trace.header, "records": len(trace.records), "shown": len(kept),
            "truncated": trace.truncated, "dropped": trace.dropped, "groups": out_groups}


class Streamed:
    """``trace show`` of a file of any size, record by record: the first pass over the file counts what will be
    shown (and refuses a damaged file before anything is printed), :meth:`kept` then yields the shown records one
    at a time. Memory is the file's bytes plus one record, not every record decoded at once."""

    def __init__(self, data: bytes, flt: Filter = Filter()) -> None:
        self.reader = tracefile.Reader(data)
        self.header = self.reader.header
        self.decoder = Decoder(self.header)
        self._keep = _matcher(self.decoder, flt)
        self.shown = sum(1 for _, rec in mark_path(self.reader.records()) if self._keep(rec))
        self.records, self.truncated, self.dropped = self.reader.count, self.reader.truncated, self.reader.dropped

    def head(self) -> dict[str, Any]:
        """The document's fields other than ``groups``, as :func:`show` gives them."""
        return {"header": self.header, "records": self.records, "shown": self.shown, "truncated": self.truncated,
                "dropped": self.dropped}

    def kept(self) -> Iterator[tuple[list[str], tracefile.Record, dict[str, Any]]]:
        """(open marks, record, its document as :func:`show` gives it) of each shown record, in order."""
        last: dict[tuple[int | None, int], int] = {}
        for path, rec in mark_path(self.reader.records()):
            doc = describe(rec, self.decoder, last) if rec.op in (tracefile.READ32, tracefile.WRITE32,
                                                                  tracefile.POLL) else None
            if self._keep(rec):
                yield path, rec, doc if doc is not None else describe(rec, self.decoder)


def _indented(value: Any, prefix: str) -> str:
    return json.dumps(value, indent=2).replace("\n", "\n" + prefix)


def write_json(streamed: Streamed, write: Callable[[str], Any]) -> None:
    """Write :meth:`Streamed.head` and the groups of shown records as the JSON document ``json.dumps(show(...),
    indent=2)`` would be, record by record."""
    write("{\n" + "".join(f'  {json.dumps(k)}: {_indented(v, "  ")},\n' for k, v in streamed.head().items()))
    write('  "groups": [')
    path: list[str] | None = None
    for p, _rec, doc in streamed.kept():
        if p != path:
            write(("\n      ]\n    }," if path is not None else "") + "\n    {\n      \"mark\": "
                  + json.dumps(" > ".join(p) or NO_MARK) + ',\n      "records": [\n        ')
            path = p
        else:
            write(",\n        ")
        write(_indented(doc, "        "))
    write("\n      ]\n    }\n  ]\n}\n" if path is not None else "]\n}\n")
