"""Performance-counter (PMC) sample buffers of tinygrad profiles (specs/sqtt-pmc.md §9.2, §9.5).

A capture's PMC blob holds, for each counter of the schedule, ``xcc × inst × se × sa × wgp``
little-endian u64 records starting at the counter's byte offset (``off``, ``size`` in the schedule);
records are in xcc/inst/se/sa/wgp order. Derived metrics: VALU/SALU utilisation =
100 × (sum / records) / (max(GRBM_GUI_ACTIVE) × 4) % and the L2 hit rate (GL2C on gfx10+, TCC on gfx9)
= 100 × hit / (hit + miss) %.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyhw.errors import Refused
from tinyhw.formats.fields import MISSING, int_field, kind

__all__ = ["Counter", "decode_pmc", "derived_metrics"]

_INDEX = ("xcc", "inst", "se", "sa", "wgp")


@dataclass(frozen=True)
class Counter:
    """One performance counter of a PMC capture: name, block, its (xcc, inst, se, sa, wgp) shape and records."""
    name: str
    block: str
    shape: tuple[int, int, int, int, int]   # xcc, inst, se, sa, wgp
    values: np.ndarray                       # uint64 records
    off: int

    @property
    def records(self) -> int:
        """How many records the counter has."""
        return len(self.values)

    @property
    def sum(self) -> int:
        """The sum over all records (0 when there are none)."""
        return int(self.values.sum(dtype=np.uint64)) if len(self.values) else 0

    @property
    def max(self) -> int:
        """The largest record (0 when there are none)."""
        return int(self.values.max()) if len(self.values) else 0

    def index_of(self, i: int) -> dict[str, int]:
        """The (xcc, inst, se, sa, wgp) of record ``i``."""
        out = {}
        for name, dim in zip(reversed(_INDEX), reversed(self.shape), strict=True):
            out[name] = i % max(dim, 1)
            i //= max(dim, 1)
        return {k: out[k] for k in _INDEX}


MAX_DIM = 1 << 16   # instances per index (xcc, inst, se, sa, wgp); real schedules have <= 32


def _field(s: dict, key: str, where: str, lo: int, hi: int, default: int | None = None) -> int:
    return int_field(s, key, where, lo=lo, hi=hi, default=MISSING if default is None else default)


def _name(s: dict, key: str, where: str) -> str:
    v = s.get(key)
    if not isinstance(v, str) or not v or len(v) > 128:
        raise Refused(f"{where}: field {key!r} is " + ("missing" if v is None else f"not a short string ({kind(v)})"))
    return v


def decode_pmc(blob: bytes, samples: list[dict]) -> list[Counter]:
    """Read every scheduled counter's records out of ``blob``; a malformed entry or a region outside the blob
    is refused (exit 2) naming the entry and the field."""
    out = []
    for i, s in enumerate(samples):
        where = f"pmc schedule entry {i}"
        if not isinstance(s, dict):
            raise Refused(f"{where} is a {kind(s)}, not an object")
        name = _name(s, "name", where)
        where = f"pmc counter {name} (schedule entry {i})"
        block = _name(s, "block", where)
        off = _field(s, "off", where, 0, len(blob))
        size = _field(s, "size", where, 0, len(blob))
        xcc, inst, se, sa, wgp = (_field(s, k, where, 1, MAX_DIM, 1) for k in _INDEX)
        shape = (xcc, inst, se, sa, wgp)
        if size % 8 or off + size > len(blob):
            raise Refused(f"{where}: records at 0x{off:x}+0x{size:x} lie outside the "
                          f"0x{len(blob):x}-byte sample buffer")
        values = np.frombuffer(blob, dtype="<u8", count=size // 8, offset=off)
        out.append(Counter(name, block, shape, values, off))
    return out


def derived_metrics(counters: list[Counter]) -> dict[str, float]:
    """VALU/SALU utilisation and L2 hit rate, each only when its counters were captured."""
    by = {c.name: c for c in counters}
    out: dict[str, float] = {}
    gui = by.get("GRBM_GUI_ACTIVE")
    if gui is not None and gui.max:
        for key, name in (("valu_util_pct", "SQ_INSTS_VALU"), ("salu_util_pct", "SQ_INSTS_SALU")):
            c = by.get(name)
            if c is not None and c.records:
                out[key] = round(100.0 * (c.sum / c.records) / (gui.max * 4), 3)
    for pre in ("GL2C", "TCC"):
        hit, miss = by.get(f"{pre}_HIT"), by.get(f"{pre}_MISS")
        if hit is not None and miss is not None and hit.sum + miss.sum:
            out["l2_hit_pct"] = round(100.0 * hit.sum / (hit.sum + miss.sum), 3)
    return out
