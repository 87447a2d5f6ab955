"""``firmware diff A B``: which named items or regions differ, and by how many bytes.

Both files are inspected; every region name of either side is compared (present on one side only,
same, or differing: bytes that differ over the common length plus the size difference, and the
first differing offset inside the region). Bytes outside every region of A are counted too, and the
decoded header fields that differ are listed. Counting uses big-integer XOR, so two 38 MB images
compare in well under a second.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyhw.firmware.inspect import Inspection, inspect_bytes
from tinyhw.formats.fwregion import Region

_SKIP_FIELDS = {"file", "sha256", "regions", "notes", "problems", "size"}
_MAX_FIELDS = 200


@dataclass
class DiffResult:
    """The outcome of ``firmware diff``: its JSON document."""
    doc: dict[str, Any]

    @property
    def equal(self) -> bool:
        """True when the two files are byte for byte equal."""
        return bool(self.doc["equal"])


def count_differences(a: bytes | memoryview, b: bytes | memoryview) -> tuple[int, int | None]:
    """(bytes that differ, first differing index): positions over the common length, plus the size gap."""
    n = min(len(a), len(b))
    ma, mb = memoryview(a)[:n], memoryview(b)[:n]
    diff, first = 0, None
    if ma != mb:
        x = (int.from_bytes(ma, "little") ^ int.from_bytes(mb, "little")).to_bytes(n, "little")
        diff = n - x.count(0)
        first = _first_nonzero(x)
    if len(a) != len(b):
        diff += abs(len(a) - len(b))
        first = n if first is None else first
    return diff, first


def _first_nonzero(x: bytes) -> int:
    """Index of the first non-zero byte (x is little-endian, so its low bytes come first)."""
    return len(x) - len(x.lstrip(b"\0"))


def _flatten(doc: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(doc, dict):
        for k, v in doc.items():
            if not prefix and k in _SKIP_FIELDS:
                continue
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = doc


def _outside(a: bytes, b: bytes, regions: list[Region]) -> int:
    """Differing bytes of equal-sized files outside every region (the gaps between merged regions)."""
    spans = sorted((r.offset, r.end) for r in regions)
    gaps, pos = [], 0
    for s, e in spans:
        if s > pos:
            gaps.append((pos, s))
        pos = max(pos, e)
    if pos < len(a):
        gaps.append((pos, len(a)))
    return sum(count_differences(memoryview(a)[s:e], memoryview(b)[s:e])[0] for s, e in gaps)


def diff_bytes(a: bytes, a_name: str, b: bytes, b_name: str) -> DiffResult:
    """Compare two firmware files: their types, the bytes that differ, and the regions they fall in."""
    ia, ib = inspect_bytes(a, a_name), inspect_bytes(b, b_name)
    total, first = count_differences(a, b)
    doc: dict[str, Any] = {
        "a": _side(ia), "b": _side(ib), "equal": a == b, "same_type": ia.kind == ib.kind,
        "differing_bytes": total, "first_difference": first,
        "regions": _regions(a, ia, b, ib) if ia.kind == ib.kind else [],
        "outside_regions": {"differing_bytes": _outside(a, b, ia.regions)} if len(a) == len(b) else None,
        "fields": _fields(ia, ib) if ia.kind == ib.kind else [],
    }
    return DiffResult(doc)


def _side(i: Inspection) -> dict[str, Any]:
    return {"file": i.name, "type": i.kind, "size": i.doc["size"], "sha256": i.doc["sha256"]}


def _regions(a: bytes, ia: Inspection, b: bytes, ib: Inspection) -> list[dict[str, Any]]:
    ra = {r.name: r for r in ia.regions}
    rb = {r.name: r for r in ib.regions}
    names = list(ra) + [n for n in rb if n not in ra]
    out = []
    for n in names:
        x, y = ra.get(n), rb.get(n)
        row: dict[str, Any] = {"name": n, "a": x.to_doc() if x else None, "b": y.to_doc() if y else None}
        if x is None or y is None:
            row.update(status="only in b" if x is None else "only in a", differing_bytes=None, first_difference=None)
        else:
            d, f = count_differences(memoryview(a)[x.offset:x.end], memoryview(b)[y.offset:y.end])
            row.update(status="same" if d == 0 and x.offset == y.offset else "differs" if d else "moved",
                       differing_bytes=d, first_difference=f)
        out.append(row)
    return out


def _fields(ia: Inspection, ib: Inspection) -> list[dict[str, Any]]:
    fa: dict[str, Any] = {}
    fb: dict[str, Any] = {}
    _flatten(ia.doc, "", fa)
    _flatten(ib.doc, "", fb)
    out = []
    for k in list(fa) + [k for k in fb if k not in fa]:
        if fa.get(k, "<absent>") != fb.get(k, "<absent>"):
            out.append({"name": k, "a": fa.get(k), "b": fb.get(k)})
            if len(out) >= _MAX_FIELDS:
                break
    return out
