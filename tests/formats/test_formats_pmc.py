"""PMC sample buffers: record layout, sums, derived metrics, bad schedules refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

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


# -- malformed schedules (issue 21 item 9): every one is a one-line Refused naming the entry and field --------------

JSON_JUNK = [float("inf"), float("-inf"), float("nan"), 8.0, 1.5, True, False, None, "8", [8], {"a": 8}, 1 << 70,
             -(1 << 70), -1, 0]


@pytest.mark.parametrize("field", ["off", "size", "xcc", "inst", "se", "sa", "wgp"])
@pytest.mark.parametrize("value", JSON_JUNK, ids=repr)
def test_junk_numbers_are_refused_naming_the_field(field: str, value: object) -> None:
    entry = {"name": "SQ_WAVES", "block": "SQ", "off": 0, "size": 8, field: value}
    if field in ("off", "size") and type(value) is int and value == 0:
        assert decode_pmc(bytes(8), [entry])   # 0 is a valid offset and an empty region
        return
    if field not in ("off", "size") and value is None:
        assert decode_pmc(bytes(8), [entry])[0].shape == (1, 1, 1, 1, 1)   # null as absent: one instance
        return
    if field == "size" and value is None:
        entry.pop("size")
    with pytest.raises(Refused, match=f"field '{field}'") as e:
        decode_pmc(bytes(8), [entry])
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("entry", [[], "x", 5, None, {"name": 5, "block": "SQ", "off": 0, "size": 8},
                                   {"name": "X", "block": ["SQ"], "off": 0, "size": 8}, {"name": "", "block": "SQ"}])
def test_entries_that_are_not_counter_objects_are_refused(entry: object) -> None:
    with pytest.raises(Refused, match="pmc "):
        decode_pmc(bytes(8), [entry])  # type: ignore[list-item]


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(max_size=4), inner, max_size=3),
                     max_leaves=6)
_entry = st.fixed_dictionaries({}, optional={k: _json | st.integers(-16, 64) for k in
                                             ("name", "block", "off", "size", "xcc", "inst", "se", "sa", "wgp")})


@settings(max_examples=400, deadline=None, database=None)
@given(st.lists(_entry | _json, max_size=4), st.binary(max_size=64))
def test_fuzz_schedules_decode_or_refuse(samples: list, blob: bytes) -> None:
    try:
        out = decode_pmc(blob, samples)
    except Refused as e:
        assert "\n" not in str(e) and len(str(e)) < 300
        return
    for counter in out:
        assert counter.records * 8 <= len(blob) and counter.sum >= 0
    derived_metrics(out)
