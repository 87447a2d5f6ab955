"""``tinyhw trace diff A B``: two sessions aligned by their marks, and how they differ under each.

The groups of records under each mark (:func:`tinyhw.trace.decode.groups`) are aligned by their labels (a longest
common subsequence, so a step one session has and the other lacks shows as such). Under two aligned groups the
differences reported are: registers (or config/BAR addresses) only one session touched, values written that
differ (the sequence of values written to one register), and the order of accesses where both touched the same
things in another order. Register names come from each trace's own header.
"""

from __future__ import annotations

import difflib
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any

from tinyhw.formats import tracefile
from tinyhw.formats.tracefile import Record, Trace
from tinyhw.trace.decode import Decoder, Group, groups

ACCESSES = (tracefile.CFG_READ, tracefile.CFG_WRITE, tracefile.READ32, tracefile.WRITE32, tracefile.BULK_READ,
            tracefile.BULK_WRITE, tracefile.POLL)
#: Values shown per cell before "..."
SHOWN = 4


@dataclass
class Row:
    """One difference: under ``mark``, of ``kind`` ("only in a", "only in b", "written", "order", "mark only in
    a", "mark only in b"), at ``what`` (a register or address), with what each session had."""

    mark: str
    kind: str
    what: str
    a: str
    b: str

    def as_dict(self) -> dict[str, str]:
        """JSON-ready form."""
        return {"mark": self.mark, "kind": self.kind, "what": self.what, "a": self.a, "b": self.b}


def _where(rec: Record, decoder: Decoder) -> str:
    reg = decoder.register(rec)
    if reg is not None:
        return reg.name
    if rec.op in (tracefile.CFG_READ, tracefile.CFG_WRITE):
        return f"config+0x{rec.fields['offset']:03x}"
    return f"bar{rec.bar}+0x{rec.fields['offset']:x}"


def _values(values: list[int]) -> str:
    shown = ", ".join(f"0x{v:x}" for v in values[:SHOWN])
    return shown + (f", ... ({len(values)} writes)" if len(values) > SHOWN else "")


def _compare(label: str, ga: Group, gb: Group, da: Decoder, db: Decoder) -> list[Row]:
    acc_a = [(r.name, _where(r, da), r) for r in ga.records if r.op in ACCESSES]
    acc_b = [(r.name, _where(r, db), r) for r in gb.records if r.op in ACCESSES]
    rows: list[Row] = []
    touched_a, touched_b = Counter(w for _, w, _ in acc_a), Counter(w for _, w, _ in acc_b)
    for w in sorted(set(touched_a) - set(touched_b)):
        rows.append(Row(label, "only in a", w, f"{touched_a[w]} accesses", "-"))
    for w in sorted(set(touched_b) - set(touched_a)):
        rows.append(Row(label, "only in b", w, "-", f"{touched_b[w]} accesses"))
    writes_a: dict[str, list[int]] = defaultdict(list)
    writes_b: dict[str, list[int]] = defaultdict(list)
    for writes, acc in ((writes_a, acc_a), (writes_b, acc_b)):
        for _name, w, r in acc:
            if r.op in (tracefile.WRITE32, tracefile.CFG_WRITE):
                writes[w].append(r.fields["value"])
            elif r.op == tracefile.BULK_WRITE:
                writes[w].append(int.from_bytes(r.fields["sha"][:4], "big"))
    for w in sorted(set(writes_a) & set(writes_b)):
        if writes_a[w] != writes_b[w]:
            rows.append(Row(label, "written", w, _values(writes_a[w]), _values(writes_b[w])))
    keys_a = [(n, w) for n, w, _ in acc_a]
    keys_b = [(n, w) for n, w, _ in acc_b]
    if Counter(keys_a) == Counter(keys_b) and keys_a != keys_b:
        i = next(i for i, (x, y) in enumerate(zip(keys_a, keys_b, strict=True)) if x != y)
        rows.append(Row(label, "order", keys_a[i][1], f"access {i}: {keys_a[i][0]} {keys_a[i][1]}",
                        f"access {i}: {keys_b[i][0]} {keys_b[i][1]}"))
    return rows


def diff(a: Trace, b: Trace) -> dict[str, Any]:
    """The document ``trace diff`` prints: ``rows`` (differences in mark order) and ``aligned`` (marks both have)."""
    da, db = Decoder(a.header), Decoder(b.header)
    ga, gb = _merged(groups(a)), _merged(groups(b))
    la, lb = [g.label for g in ga], [g.label for g in gb]
    rows: list[Row] = []
    aligned = 0
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=la, b=lb, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2), strict=True):
                aligned += 1
                rows += _compare(la[i], ga[i], gb[j], da, db)
            continue
        for i in range(i1, i2):
            rows.append(Row(la[i], "mark only in a", "-", f"{len(ga[i].records)} records", "-"))
        for j in range(j1, j2):
            rows.append(Row(lb[j], "mark only in b", "-", "-", f"{len(gb[j].records)} records"))
    return {"a": {"command": a.header.get("command"), "records": len(a.records)},
            "b": {"command": b.header.get("command"), "records": len(b.records)},
            "aligned_marks": aligned, "differences": len(rows), "rows": [r.as_dict() for r in rows]}


def _merged(gs: list[Group]) -> list[Group]:
    """Groups with the same label in a row (split by records of no interest) as one."""
    out: list[Group] = []
    for g in gs:
        if out and out[-1].label == g.label:
            out[-1].records += g.records
        else:
            out.append(Group(list(g.path), list(g.records)))
    return out
