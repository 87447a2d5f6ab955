"""The timing definitions of ``prof insts`` / ``prof export`` on the real captures of tests/data/sqtt.

Definitions and sources: docs/prof-timing.md. Each test names the property it guards: the wave state
parts add up to the lifetime exactly, waits are charged to the waiting instruction, an empty kernel
gets no invented row, a gfx12 ``s_barrier_wait`` is a row, the other SIMD's memory ops are reported,
and the export's occupancy counters and stall arguments agree with the waves and the rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from clihelp import run
from testpaths import DATA as TEST_DATA

from tinyhw.formats.sqtt import inst_op_name
from tinyhw.prof import load_capture
from tinyhw.prof.analyze import trace_of, waves_doc, waves_of
from tinyhw.prof.export import export_doc
from tinyhw.prof.insts import insts_doc
from tinyhw.prof.timing import CATEGORIES, STATES, exec_cycles, is_counter_wait

DATA = TEST_DATA / "sqtt"
CAPTURES = sorted(p for p in DATA.glob("gfx*/*") if (p / "capture.json").is_file())


def _traced_docs(path: Path) -> list[dict]:
    cap = load_capture(path)
    out = []
    for i, _ in enumerate(cap.dispatches()):
        for w in waves_doc(cap, str(i), None)["waves"]:
            if w["traced"]:
                out.append(insts_doc(cap, str(i), w["se"], w["index"]))
    return out


def _stream(cap: object, doc: dict) -> object:
    return next(b for b in cap.sqtt if b.se == doc["se"] and (b.kern, b.exec_tag) == (doc["kern"], doc["exec_tag"]))


def _mnemonic(row: dict) -> str:
    return str(row["instruction"] or "").split(" ")[0]


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_state_parts_add_up_to_the_lifetime_exactly(path: Path) -> None:
    docs = _traced_docs(path)
    assert docs or path.parent.name + path.name == "gfx950profile_empty_run_0"   # its one wave ran on CU 4
    for doc in docs:
        assert set(doc["states"]) == set(STATES)
        assert sum(doc["states"].values()) == doc["lifetime"] == doc["end"] - doc["start"]
        tl = doc["timeline"]
        assert tl[0]["start"] == doc["start"] and tl[-1]["end"] == doc["end"]
        assert all(a["end"] == b["start"] and a["state"] != b["state"] for a, b in zip(tl, tl[1:], strict=False))
        assert all(seg["end"] > seg["start"] for seg in tl)
        for state in STATES:
            assert doc["states"][state] == sum(s["end"] - s["start"] for s in tl if s["state"] == state)
        for r in doc["rows"]:
            assert r["duration"] >= r["stall"] >= 0 and r["category"] in CATEGORIES
            if _mnemonic(r) == "s_endpgm":        # lasts to the wave's end; its packet is the WAVEEND (§6.2)
                assert r["time"] + r["duration"] == doc["end"] and r["stall"] == 0
            else:
                assert r["time"] + r["stall"] == r["issue"]
        times = [r["time"] for r in doc["rows"]]
        assert times == sorted(times)


@pytest.mark.parametrize("path", CAPTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_waits_show_on_the_waiting_instruction(path: Path) -> None:
    """The instruction before a counter wait keeps its own execution; the wait carries the stall."""
    waits = 0
    for doc in _traced_docs(path):
        rows = doc["rows"]
        arch = "cdna" if path.parent.name == "gfx950" else "rdna"
        for prev, r in zip(rows, rows[1:], strict=False):
            if not is_counter_wait(_mnemonic(r)):
                continue
            waits += 1
            assert r["state"] == "waiting"
            assert prev["duration"] == exec_cycles(prev["type"], arch) or prev["stall"], (prev, r)
            assert r["time"] == min(prev["time"] + prev["duration"], r["issue"])
    if "empty" not in path.name:
        assert waits > 0


def test_the_spec_wait_figures() -> None:
    """gfx1200 plus (specs/sqtt-pmc.md §6.2): rocprof's wait has time 28182 and stall 1699; the VALU before it 1."""
    doc = _traced_docs(DATA / "gfx1200" / "profile_plus_run_0")[0]
    valu, wait = doc["rows"][3], doc["rows"][4]
    assert (valu["type"], valu["duration"], valu["stall"]) == ("VALU", 1, 0)
    assert (_mnemonic(wait), wait["time"], wait["stall"], wait["duration"]) == ("s_wait_kmcnt", 28182, 1699, 1700)
    assert doc["states"] == {"executing": 14, "waiting": 3133, "stalled": 6, "idle": 1224}


@pytest.mark.parametrize("arch", ["gfx1100", "gfx1200"])
def test_empty_kernel_has_no_invented_row(arch: str) -> None:
    """The empty kernel is one s_endpgm: its WAVEEND is the only row; a wave off the traced CU has none."""
    docs = _traced_docs(DATA / arch / "profile_empty_run_0")
    assert docs
    cap9 = load_capture(DATA / "gfx950" / "profile_empty_run_0")
    (w9,) = waves_doc(cap9, None, None)["waves"]
    doc9 = insts_doc(cap9, None, w9["se"], w9["index"])
    assert doc9["rows"] == [] and doc9["per_pc"] == [] and "tracing was off" in doc9["notes"][0]
    assert doc9["states"]["idle"] == doc9["lifetime"] == 1072
    for doc in docs:
        assert [_mnemonic(r) for r in doc["rows"]] == ["s_endpgm"]
        assert doc["rows"][0]["stall"] == 0 and doc["rows"][0]["time"] + doc["rows"][0]["duration"] <= doc["end"]
        assert doc["per_pc"][0]["hits"] == 1
    # and across every capture: rows = instruction packets + the packet-less s_barrier_wait rows
    for path in CAPTURES:
        if path.parent.name == "gfx950":
            continue
        cap = load_capture(path)
        for doc in _traced_docs(path):
            s = _stream(cap, doc)
            w = waves_of(s)[doc["wave_index"]]
            t = trace_of(s)
            packets = 0
            for i in range(w.start_index + 1, w.end_index + 1):
                name, f = t.name(i), t.fields(i)
                if name in ("VALUINST", "IMMEDIATE") and f["wave"] == w.slot:
                    packets += 1
                elif name in ("INST", "INST_RDNA4") and f["wave"] == w.slot:
                    packets += not inst_op_name(t.arch, f["op"]).startswith("OTHER_")
                elif name == "IMMEDIATE_MASK":
                    packets += (f["mask"] >> w.slot) & 1
            packets += 1                                         # the WAVEEND's s_endpgm
            barrier_waits = sum(r["instruction"] == "s_barrier_wait" for r in doc["rows"])
            assert len(doc["rows"]) == packets + barrier_waits, (path, doc["se"], doc["wave_index"])


def test_gfx12_s_barrier_wait_is_a_row() -> None:
    docs = _traced_docs(DATA / "gfx1200" / "profile_sync_run_0")
    synced = [d for d in docs if d["kernel"] == "custom_lds_sync"]
    assert len(synced) == 2
    for doc in synced:
        rows = doc["rows"]
        k = next(i for i, r in enumerate(rows) if r["type"] == "BARRIER_WAIT")
        bw, before, after = rows[k], rows[k - 1], rows[k + 1]
        assert bw["instruction"] == "s_barrier_wait" and bw["category"] == "immediate"
        assert before["type"] == "BARRIER_SIGNAL" and int(bw["pc"], 16) == int(before["pc"], 16) + 4
        assert bw["time"] == before["time"] + before["duration"]       # attempted right after the signal
        assert bw["time"] + bw["duration"] == after["time"] == after["issue"]   # held until the barrier released
        assert bw["stall"] == bw["duration"] - 1 > 0 and bw["state"] == "stalled"
    # the two waves are released together (within a cycle): the barrier, not the packets, ends the stall
    ends = [d["rows"][next(i for i, r in enumerate(d["rows"]) if r["type"] == "BARRIER_WAIT") + 1]["issue"]
            for d in synced]
    assert max(ends) - min(ends) <= 2


@pytest.mark.parametrize("path", [DATA / "gfx1100" / "profile_gemm_run_0", DATA / "gfx1200" / "profile_gemm_run_0",
                                  DATA / "gfx1100" / "profile_sync_run_0"], ids=lambda p: p.parent.name + "/" + p.name)
def test_other_simd_vmem_records_are_reported(path: Path, tmp_path: Path) -> None:
    cap = load_capture(path)
    docs = _traced_docs(path)
    for doc in docs:
        t = trace_of(_stream(cap, doc))
        idx = t.indices("INST", "INST_RDNA4")
        ops = [inst_op_name(t.arch, int(op)) for op in t.field_array("op", idx)]
        expect = [(int(t.time[i]), op) for i, op in zip(idx.tolist(), ops, strict=True) if op.startswith("OTHER_")]
        assert [(o["time"], o["type"]) for o in doc["other_simd"]] == expect
        assert any(op.startswith("OTHER_VMEM") for _, op in expect)
        assert {o["category"] for o in doc["other_simd"]} <= {"VMEM", "LDS"}
    out = tmp_path / "t.json"
    assert run("prof", "export", str(path), "-o", str(out)).code == 0
    instants = [e for e in json.loads(out.read_text())["traceEvents"] if e["ph"] == "i"]
    assert sum(e["name"].startswith("OTHER_VMEM") for e in instants) >= 1
    assert len(instants) == sum(len(d["other_simd"]) for d in {(d["kern"], d["se"]): d for d in docs}.values())


@pytest.mark.parametrize("path", [DATA / "gfx1100" / "profile_sync_run_0", DATA / "gfx950" / "profile_gemm_run_0"],
                         ids=lambda p: p.parent.name + "/" + p.name)
def test_export_occupancy_counters_follow_the_waves(path: Path) -> None:
    cap = load_capture(path)
    doc = export_doc(cap)
    counters = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert counters and doc["otherData"]["counter_events"] == len(counters)
    waves = waves_doc(cap, None, None)["waves"]
    per_cu: dict[str, list[dict]] = {}
    for e in counters:
        per_cu.setdefault(e["name"], []).append(e)
    for name, evs in per_cu.items():
        se, cu = (int(x[2:]) for x in name.split()[1].split("/"))
        mine = [w for w in waves if w["se"] == se and w["cu"] == cu]
        for e in evs:
            for key, n in e["args"].items():
                simd = int(key[4:])
                resident = sum(w["start"] <= e["ts"] < w["end"] for w in mine if w["simd"] == simd)
                assert n == resident, (name, e["ts"], key)
        assert all(v == 0 for v in evs[-1]["args"].values())
        assert [e["ts"] for e in evs] == sorted({w["start"] for w in mine} | {w["end"] for w in mine})
    peak = max(max(e["args"].values()) for e in counters)
    assert 1 <= peak <= int(cap.props.get("max_waves_per_simd") or 16)


def test_export_slices_carry_the_stall() -> None:
    path = DATA / "gfx1200" / "profile_plus_run_0"
    cap = load_capture(path)
    rows = insts_doc(cap, None, 1, 0)["rows"]
    slices = [e for e in export_doc(cap)["traceEvents"] if e["ph"] == "X" and e["cat"] != "wave"]
    assert [(e["ts"], e["args"]["stall"], e["args"]["duration"]) for e in slices] == \
        [(r["time"], r["stall"], r["duration"]) for r in rows]
    ends = np.array([e["ts"] + e["dur"] for e in slices])
    starts = np.array([e["ts"] for e in slices])
    assert (ends[:-1] <= starts[1:]).all()                    # nested slices never overlap on the wave's track
    assert max(e["args"]["stall"] for e in slices) == 1699


def test_json_keys_are_stable() -> None:
    r = run("--json", "prof", "insts", str(DATA / "gfx1200" / "profile_plus_run_0"), "--se", "1", "--wave", "0")
    doc = json.loads(r.out)
    assert {"rows", "states", "timeline", "lifetime", "per_pc", "other_simd"} <= set(doc)
    assert all(set(row) == {"time", "issue", "stall", "duration", "category", "state", "pc", "offset",
                            "instruction", "type"} for row in doc["rows"])
    assert set(doc["per_pc"][0]) == {"pc", "offset", "instruction", "category", "hits", "total_duration",
                                     "mean_duration", "total_stall"}
