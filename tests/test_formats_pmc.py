"""PMC sample buffers: record layout, sums, derived metrics, bad schedules refused."""

from __future__ import annotations

import struct

import pytest

from tinyhw.errors import Refused
from tinyhw.formats.pmc import decode_pmc, derived_metrics


def _sample(name: str, block: str, off: int, **dims: int) -> dict:
    shape = {"xcc": 1, "inst": 1, "se": 1, "sa": 1, "wgp": 1, **dims}
    n = 1
    for v in shape.values():
        n *= v
    return {"name": name, "block": block, "off": off, "size": 8 * n, **shape}


def test_records_sums_and_indices() -> None:
    sq = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]              # 2 SE x 2 SA x 3 WGP
    blob = struct.pack("<12Q", *sq) + struct.pack("<Q", 1000) + struct.pack("<4Q", 5, 0, 3, 2) \
        + struct.pack("<4Q", 1, 1, 0, 0) + struct.pack("<12Q", *[2] * 12)
    sched = [_sample("SQ_INSTS_VALU", "SQ", 0, se=2, sa=2, wgp=3), _sample("GRBM_GUI_ACTIVE", "GRBM", 96),
             _sample("GL2C_HIT", "GL2C", 104, inst=4), _sample("GL2C_MISS", "GL2C", 136, inst=4),
             _sample("SQ_INSTS_SALU", "SQ", 168, se=2, sa=2, wgp=3)]
    c = decode_pmc(blob, sched)
    assert [(x.name, x.sum, x.max, x.records) for x in c] == [
        ("SQ_INSTS_VALU", 78, 12, 12), ("GRBM_GUI_ACTIVE", 1000, 1000, 1), ("GL2C_HIT", 10, 5, 4),
        ("GL2C_MISS", 2, 1, 4), ("SQ_INSTS_SALU", 24, 2, 12)]
    assert c[0].index_of(0) == {"xcc": 0, "inst": 0, "se": 0, "sa": 0, "wgp": 0}
    assert c[0].index_of(11) == {"xcc": 0, "inst": 0, "se": 1, "sa": 1, "wgp": 2}
    assert c[0].index_of(4) == {"xcc": 0, "inst": 0, "se": 0, "sa": 1, "wgp": 1}
    d = derived_metrics(c)
    assert d["valu_util_pct"] == pytest.approx(100 * (78 / 12) / (1000 * 4), abs=1e-3)
    assert d["salu_util_pct"] == pytest.approx(100 * 2 / 4000, abs=1e-3)
    assert d["l2_hit_pct"] == pytest.approx(100 * 10 / 12, abs=1e-3)


def test_derived_metrics_need_their_counters() -> None:
    c = decode_pmc(struct.pack("<Q", 7), [_sample("SQ_INSTS_VALU", "SQ", 0)])
    assert derived_metrics(c) == {}


@pytest.mark.parametrize("bad", [
    {"name": "X", "block": "SQ", "off": 8, "size": 8},          # past the end
    {"name": "X", "block": "SQ", "off": 0, "size": 12},         # not whole records
    {"name": "X", "block": "SQ", "off": -8, "size": 8},
    {"block": "SQ", "off": 0, "size": 8},                       # no name
])
def test_bad_schedules_are_refused(bad: dict) -> None:
    with pytest.raises(Refused):
        decode_pmc(bytes(8), [bad])
