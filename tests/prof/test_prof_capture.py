"""`tinyhw --device mock:navi31 prof capture PROBE -o DIR` end to end: the driver programs the SQ thread trace
(tinyhw/boot/amd/sqtt.py), runs the probe (tinyhw/boot/amd/compute.py), stops the trace and writes the capture directory
(tinyhw/kernels/capture.py); the emulated shader core emits the gfx11 packets (tinyhw/mocks/rdna3/sqtt.py) into
the per-SE buffers (tinyhw/mocks/amd/thread_trace.py). The capture goes through `prof summary/waves/insts/export`;
tinygrad's decoder (an independent implementation) decodes it to the same packets, times and fields as tinyhw's,
and its instruction mapper walks the same PCs. Refusals exit 2 before anything is written.

Sabotages shown red: the emitter carrying TS_DELTA_SHORT's field without the -4 (the wave lifetimes drift: the
every-command test fails, and the emitter property test); the instruction packets at the cycle after their cost
instead of their issue cycle (the cost-model check fails); the driver's trace length without the gfx11.0
absolute-WPTR correction (every capture test fails); the driver not waiting for STATUS.BUSY before reading WPTR
(short traces: two tests fail); the driver reading SQ_PERFCOUNTER<2k>_LO for the k-th counter (the counters
test fails).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run
from kernelshelp import boot_mock_navi31, json_doc, tinygrad_sqtt

from tinyhw.formats.amdisa import decode_at, text_section
from tinyhw.formats.sqtt import decode
from tinyhw.mocks.rdna3 import default_cost
from tinyhw.prof import load_capture


@pytest.fixture
def booted() -> None:
    boot_mock_navi31()


_doc = json_doc


def _capture(tmp_path: Path, probe: str, *extra: str, device: str = "mock:navi31") -> tuple[Path, dict]:
    out = tmp_path / f"cap_{probe}"
    doc = _doc("--device", device, "prof", "capture", probe, "-o", str(out), *extra)
    return out, doc


def test_capture_goes_through_every_prof_command(booted: None, tmp_path: Path) -> None:
    out, doc = _capture(tmp_path, "pattern")
    assert doc["check"]["ok"] and doc["cycles"] == "modelled" and doc["n"] == 4096
    assert sorted(p.name for p in out.iterdir()) == sorted(doc["files"])
    assert [s["itrace"] for s in doc["shader_engines"]] == [True, True, False, False, False, False]
    summary = _doc("prof", "summary", str(out))
    assert summary["device"]["target"] == "gfx1100" and summary["device"]["shader_engines"] == 6
    (k,) = summary["kernels"]
    assert k["name"] == "E_8192_32_4"
    # 32 workgroups of one wave each, spread over the 6 SEs, every one started and ended
    assert sum(s["waves"] for s in k["sqtt"]) == 32 and all(s["waves"] == s["wave_ends"] for s in k["sqtt"])
    for s in k["sqtt"]:
        assert s["by_type"]["LAYOUT_HEADER"] == 1
        assert ("VALUINST" in s["by_type"]) == s["itrace"]
    waves = _doc("prof", "waves", str(out), "--se", "0")
    assert waves["waves"][0]["cu"] == 0 and waves["waves"][0]["simd"] == 0
    insts = _doc("prof", "insts", str(out), "--se", "0", "--wave", "0")
    assert not insts["notes"], insts["notes"]
    rows = insts["rows"]
    assert rows[0]["offset"] == 0 and rows[-1]["instruction"] == "s_endpgm"
    assert all(r["pc"] for r in rows) and rows[0]["time"] == insts["start"]
    # a straight-line kernel: every wave on every SE lives the cost of its instructions, traced or not
    found = text_section(load_capture(out).programs[0].lib)
    assert found is not None
    lifetime = sum(default_cost(decode_at(found[1], r["offset"], "gfx11")) for r in rows)
    assert {w["cycles"] for w in _doc("prof", "waves", str(out))["waves"]} == {lifetime}
    r = run("prof", "export", str(out), "-o", str(tmp_path / "trace.json"))
    assert r.code == 0, r.err
    events = json.loads((tmp_path / "trace.json").read_text())["traceEvents"]
    assert any(e.get("name") == "s_endpgm" or "s_endpgm" in str(e.get("args", "")) for e in events)


def test_capture_over_the_usb_bridge(booted: None, tmp_path: Path) -> None:
    out, doc = _capture(tmp_path, "pattern", "--n", "512", device="mock:navi31-usb")
    assert doc["check"]["ok"]
    cap = load_capture(out)
    assert sum(len(decode(s.blob).indices("WAVESTART")) for s in cap.sqtt) == 4


def test_instruction_times_are_the_core_cost_model(booted: None, tmp_path: Path) -> None:
    """The traced wave's instruction packets sit at the issue cycles of the core's cost model: each row's issue
    cycle (the packet's time; ``time`` is the modelled first attempt) plus the cost of its instruction (and of the
    packet-less hints after it) is the next row's issue cycle; the last row, s_endpgm, is the WAVEEND packet, at the
    end of s_endpgm's own cycles."""
    out, _ = _capture(tmp_path, "fma")
    cap = load_capture(out)
    found = text_section(cap.programs[0].lib)
    assert found is not None
    code = found[1]
    for se in (0, 1):
        rows = _doc("prof", "insts", str(out), "--se", str(se), "--wave", "0")["rows"]
        assert len(rows) > 20
        for a, b in zip(rows, rows[1:], strict=False):
            inst = decode_at(code, a["offset"], "gfx11")
            cost, off = default_cost(inst), a["offset"] + inst.size
            while not inst.is_branch and off < b["offset"]:  # hints between the two rows (no packet of their own)
                hint = decode_at(code, off, "gfx11")
                cost, off = cost + default_cost(hint), off + hint.size
            if b["instruction"] == "s_endpgm":  # its row is the WAVEEND packet: when the wave ended, after it issued
                cost += default_cost(decode_at(code, b["offset"], "gfx11"))
            assert b["issue"] - a["issue"] == cost, (a, b)


def test_tinygrad_decoder_agrees_with_tinyhw(booted: None, tmp_path: Path) -> None:
    tg = tinygrad_sqtt()

    for probe in ("fma", "atomic"):
        out, _ = _capture(tmp_path, probe)
        cap = load_capture(out)
        lib = cap.programs[0].lib
        for s in cap.sqtt:
            theirs = list(tg.decode(s.blob))
            ours = decode(s.blob)
            assert len(theirs) == len(ours) > 10
            for i, p in enumerate(theirs):
                assert type(p).__name__ == ours.name(i)
                assert p._time == int(ours.time[i])
                mine = ours.fields(i)
                assert all(getattr(p, k) == v if not hasattr(getattr(p, k), "value") else getattr(p, k).value == v
                           for k, v in mine.items()), (i, p, mine)
            if not s.itrace:
                continue
            mapped = [info.pc for p, info in tg.map_insts(s.blob, lib, "gfx1100") if info is not None]
            rows = _doc("prof", "insts", str(out), "--se", str(s.se), "--wave", "0")["rows"]
            assert len(mapped) >= len(rows) > 0
            assert mapped[:len(rows)] == [r["offset"] for r in rows]


@pytest.mark.parametrize("args,says", [
    (["--device", "mock:navi31", "prof", "capture", "nosuch", "-o", "{tmp}/a"], "probe"),
    (["--device", "mock:ad102", "prof", "capture", "pattern", "-o", "{tmp}/a"], "amd"),
    (["--device", "cpu", "prof", "capture", "pattern", "-o", "{tmp}/a"], "amd board"),
    (["prof", "capture", "pattern", "-o", "{tmp}/a"], "needs a device"),
    (["--device", "mock:navi31", "prof", "capture", "pattern", "-o", "{tmp}/full"], "not empty"),
    (["--device", "mock:navi31", "prof", "capture", "pattern", "-o", "{tmp}/file"], "it is a regular file"),
    (["--device", "mock:navi31", "prof", "capture", "pattern", "-o", "{tmp}/a", "--simd", "4"], "simd"),
    (["--device", "mock:navi31", "prof", "capture", "pattern", "-o", "{tmp}/a", "--buffer-kib", "6"], "buffer"),
])
def test_refusals_exit_2_and_write_nothing(booted: None, tmp_path: Path, args: list[str], says: str) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("keep")
    (tmp_path / "file").write_text("keep")
    r = run(*[a.replace("{tmp}", str(tmp_path)) for a in args])
    assert r.code == 2, (r.out, r.err)
    assert says in r.err.lower(), r.err
    assert not (tmp_path / "a").exists()
    assert (tmp_path / "file").read_text() == "keep" and [p.name for p in (tmp_path / "full").iterdir()] == ["x"]


def test_refused_when_not_booted(tmp_path: Path) -> None:
    r = run("--device", "mock:navi31", "prof", "capture", "pattern", "-o", str(tmp_path / "a"))
    assert r.code == 2 and "is not a gpu tinyhw booted" in r.err
    assert not (tmp_path / "a").exists()


def test_an_empty_directory_is_filled(booted: None, tmp_path: Path) -> None:
    (tmp_path / "cap_pattern").mkdir()
    out, doc = _capture(tmp_path, "pattern", "--n", "128")
    assert (out / "capture.json").is_file() and doc["check"]["ok"]


def test_a_full_buffer_is_reported_and_the_capture_still_decodes(booted: None, tmp_path: Path) -> None:
    """3072 workgroups fill a 4 KiB buffer: the SE's trace is size - 32 bytes long, flagged as an overflow in the
    document and capture.json, and the truncated stream still goes through `prof summary`."""
    out, doc = _capture(tmp_path, "pattern", "--n", "393216", "--buffer-kib", "4")
    assert doc["check"]["ok"]
    se0 = doc["shader_engines"][0]
    assert se0["overflow"] and se0["bytes"] == 4096 - 32
    meta = json.loads((out / "capture.json").read_text())
    assert meta["sqtt"][0]["overflow"] and meta["tinyhw"]["buffer_bytes"] == 4096
    summary = _doc("prof", "summary", str(out))
    assert summary["kernels"][0]["sqtt"][0]["waves"] > 100


def test_counters_of_the_same_dispatch_agree_with_its_trace(booted: None, tmp_path: Path) -> None:
    """--counters default: SQ_WAVES is the trace's wave count, SQ_WAVE_CYCLES the sum of its wave lifetimes,
    SQ_INSTS_VALU the traced wave's VALU rows times the waves (a straight-line kernel), GRBM_GUI_ACTIVE the longest
    SE's span from first wave start to last wave end; `prof summary` reads them (48 SQ records: 6 SE x 2 SA x 4)."""
    out, doc = _capture(tmp_path, "fma", "--counters", "default")
    assert doc["counters"] == ["SQ_WAVES", "SQ_INSTS_VALU", "SQ_INSTS_SALU", "SQ_WAVE_CYCLES", "GRBM_GUI_ACTIVE"]
    k = _doc("prof", "summary", str(out))["kernels"][0]
    pmc = k["pmc"]
    waves = _doc("prof", "waves", str(out))["waves"]
    rows = _doc("prof", "insts", str(out), "--se", "0", "--wave", "0")["rows"]
    assert pmc["SQ_WAVES"]["sum"] == len(waves) == 32 and pmc["SQ_WAVES"]["records"] == 48
    assert pmc["SQ_WAVE_CYCLES"]["sum"] == sum(w["cycles"] for w in waves)
    valu = sum(r["instruction"].startswith("v_") for r in rows)
    assert valu > 100 and pmc["SQ_INSTS_VALU"]["sum"] == 32 * valu
    salu = sum(r["instruction"].startswith("s_") and r["type"] == "SALU" for r in rows)
    assert pmc["SQ_INSTS_SALU"]["sum"] == 32 * salu
    spans = {}
    for w in waves:
        lo, hi = spans.get(w["se"], (w["start"], w["end"]))
        spans[w["se"]] = (min(lo, w["start"]), max(hi, w["end"]))
    assert pmc["GRBM_GUI_ACTIVE"] == {"block": "GRBM", "sum": max(b - a for a, b in spans.values()),
                                      "max": max(b - a for a, b in spans.values()), "records": 1}


@pytest.mark.parametrize("counters,says", [("SQ_NOPE", "unknown counter"), (",", "names no counter"),
                                           ("SQ_WAVES,SQ_WAVES", "twice")])
def test_bad_counters_are_refused(tmp_path: Path, counters: str, says: str) -> None:
    r = run("--device", "mock:navi31", "prof", "capture", "pattern", "-o", str(tmp_path / "a"), "--counters", counters)
    assert r.code == 2 and says in r.err, r.err
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("device", ["mock:ad102", "cpu"])
def test_a_device_that_is_no_amd_board_is_not_told_to_drop_the_device(tmp_path: Path, device: str) -> None:
    """prof capture needs a device: refusing a non-AMD one must point at an AMD board, not at dropping --device
    (which only gives the next refusal, "needs a device")."""
    r = run("--device", device, "prof", "capture", "pattern", "-o", str(tmp_path / "a"))
    assert r.code == 2 and "drop the global --device" not in r.err and "--device mock:navi31" in r.err, r.err
