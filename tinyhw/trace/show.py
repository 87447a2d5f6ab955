"""``tinyhw trace show``: a recording's accesses decoded by register, grouped by mark, optionally filtered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats import tracefile
from tinyhw.formats.tracefile import Trace
from tinyhw.regs import names
from tinyhw.trace.decode import Decoder, describe, groups, mark_path

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
