"""``tinyhw prof`` end to end on the real captures of tests/data/sqtt: summary, packets, waves, insts, export."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest
from clihelp import run
from fuzzbudget import MIB, budget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testpaths import DATA as TEST_DATA

DATA = TEST_DATA / "sqtt"
PLUS12 = str(DATA / "gfx1200" / "profile_plus_run_0")


GEMM11 = str(DATA / "gfx1100" / "profile_gemm_run_0")


def test_summary_json_keys() -> None:
    r = run("--json", "prof", "summary", str(DATA / "pickles" / "gfx1100" / "profile_sync_run_0.pkl"))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["device"]["target"] == "gfx1100"
    assert [k["name"] for k in doc["kernels"]] == ["custom_lds_sync", "E_32_4"]
    for k in doc["kernels"]:
        assert len(k["sqtt"]) == 6
        for s in k["sqtt"]:
            assert {"se", "itrace", "packets", "waves", "first_time", "last_time", "by_type"} <= set(s)
        assert set(k["pmc"]["GRBM_GUI_ACTIVE"]) >= {"sum", "max", "records"}


def test_summary_human() -> None:
    r = run("prof", "summary", GEMM11)
    assert r.code == 0, r.err
    assert "gfx1100" in r.out and "r_32_32_16_2" in r.out and "GL2C_HIT" in r.out and "L2 hit rate" in r.out


def test_packets_hide_timing_unless_all() -> None:
    r = run("--json", "prof", "packets", PLUS12, "--se", "1")
    doc = json.loads(r.out)
    types = {row["type"] for s in doc["streams"] for row in s["rows"]}
    assert "NOP" not in types and "TS_DELTA_SHORT" not in types and "WAVESTART_RDNA4" in types
    r = run("--json", "prof", "packets", PLUS12, "--se", "1", "--all")
    doc = json.loads(r.out)
    assert doc["streams"][0]["shown"] == 1004
    assert any(row["type"] == "NOP" for row in doc["streams"][0]["rows"])
    r = run("prof", "packets", PLUS12, "--kernel", "E_3", "--se", "1", "-n", "3")
    assert r.code == 0 and len(r.out.splitlines()) == 4
    assert run("prof", "packets", PLUS12, "--kernel", "nope").code == 2
    assert run("prof", "packets", PLUS12, "--se", "9").code == 2


def test_waves_and_insts_match_spec_figures() -> None:
    """specs/sqtt-pmc.md §6.2: gfx1200 plus, SE 1, wave 0."""
    doc = json.loads(run("--json", "prof", "waves", PLUS12, "--se", "1").out)
    assert [(w["start"], w["end"], w["traced"]) for w in doc["waves"]] == [(26970, 31347, True)]
    r = run("--json", "prof", "insts", PLUS12, "--se", "1", "--wave", "0")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    # issue = the packet time; time = first attempt: rocprof-trace-decoder's 14 instruction times (§6.2)
    assert [row["issue"] for row in doc["rows"]] == [28178, 28179, 28180, 28181, 29881, 29882, 29883, 29884, 30965,
                                                     30966, 30983, 30991, 30992, 31347]
    assert [row["time"] for row in doc["rows"]] == [28178, 28179, 28180, 28181, 28182, 29882, 29883, 29884, 29885,
                                                    30966, 30983, 30985, 30992, 30993]
    assert doc["rows"][4]["stall"] == 1699                       # the wait's stall, on the wait (§6.2)
    assert doc["rows"][0]["pc"] == "0x200001009600" and doc["rows"][-1]["instruction"] == "s_endpgm"
    assert [row["type"] for row in doc["rows"]][:4] == ["IMMEDIATE", "SMEM", "SMEM", "VALU"]
    assert doc["rows"][3]["duration"] == 1 and doc["notes"] == []
    r = run("prof", "insts", PLUS12, "--se", "1", "--wave", "0")
    assert "Stall" in r.out and "Offset" in r.out and "s_endpgm" in r.out and "= lifetime 4377" in r.out
    r = run("prof", "insts", PLUS12, "--se", "1", "--wave", "0", "--by-pc")
    assert r.code == 0 and "Hits" in r.out and "s_wait_loadcnt" in r.out
    assert run("prof", "insts", PLUS12, "--se", "1", "--wave", "5").code == 2


def test_every_traced_rdna_wave_maps_to_s_endpgm() -> None:
    """The instruction-length decoder walks every traced wave of the RDNA captures to its s_endpgm."""
    from tinyhw.prof import load_capture
    from tinyhw.prof.analyze import waves_doc
    from tinyhw.prof.insts import insts_doc

    checked = 0
    for d in sorted(DATA.glob("gfx1*/*")):
        cap = load_capture(d)
        for i, _ in enumerate(cap.dispatches()):
            for w in waves_doc(cap, str(i), None)["waves"]:
                if w["traced"]:
                    doc = insts_doc(cap, str(i), w["se"], w["index"])
                    assert doc["notes"] == [] and doc["rows"][-1]["instruction"] == "s_endpgm", (d, w)
                    assert all(r["pc"] for r in doc["rows"])
                    checked += 1
    assert checked == 34


def test_cdna_insts_walk_issue_packets_to_s_endpgm() -> None:
    """gfx950 gemm: each CU-0 wave issues the 58 instructions from the entry to s_endpgm (inferred mapping)."""
    gemm9 = str(DATA / "gfx950" / "profile_gemm_run_0")
    waves = [w for w in json.loads(run("--json", "prof", "waves", gemm9).out)["waves"] if w["traced"]]
    assert [(w["se"], w["simd"]) for w in waves] == [(0, 0), (0, 2), (0, 1), (0, 3)]
    for w in waves:
        doc = json.loads(run("--json", "prof", "insts", gemm9, "--se", "0", "--wave", str(w["index"])).out)
        rows = doc["rows"]
        assert doc["notes"] == [] and len(rows) == 58 and rows[-1]["instruction"] == "s_endpgm"
        assert rows[0]["pc"] == "0x200002007600" and all(r["pc"] for r in rows)
        kinds = {(r["instruction"].split()[0], r["type"]) for r in rows}
        assert ("s_waitcnt", "ISSUE") in kinds and ("s_cbranch_execz", "NEXT") in kinds and ("SMEM", "SMEM_RD") in kinds
    doc = json.loads(run("--json", "prof", "insts", gemm9, "--se", "0", "--wave", "1").out)
    assert doc["rows"] == [] and "CU 0" in doc["notes"][0]
    doc = json.loads(run("--json", "prof", "insts", GEMM11, "--se", "3", "--wave", "0").out)
    assert doc["rows"] == [] and "off" in doc["notes"][0]


def test_export_writes_trace_events(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    r = run("prof", "export", PLUS12, "-o", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    ev = doc["traceEvents"]
    tracks = [e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"]
    assert tracks == ["SE1/CU0/SIMD0/W0"]
    slices = [e for e in ev if e["ph"] == "X"]
    assert slices[0]["cat"] == "wave" and slices[0]["ts"] == 26970 and slices[0]["dur"] == 31347 - 26970
    assert len(slices) == 1 + 14
    assert os.listdir(tmp_path) == ["trace.json"]          # no temporary file left behind


def test_export_output_safety(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    out.write_text("keep")
    r = run("prof", "export", PLUS12, "-o", str(out))
    assert r.code == 2 and "--force" in r.err and out.read_text() == "keep"
    assert run("prof", "export", PLUS12, "-o", str(out), "--force").code == 0
    assert json.loads(out.read_text())["traceEvents"]
    assert run("prof", "export", PLUS12, "-o", str(tmp_path)).code == 2            # a directory
    assert run("prof", "export", PLUS12, "-o", "/dev/null", "--force").code == 2   # a device node
    assert run("prof", "export", PLUS12, "-o", "").code == 2                        # empty path
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert run("prof", "export", PLUS12, "-o", str(fifo), "--force").code == 2
    assert run("prof", "export", PLUS12, "-o", str(tmp_path / "no" / "such" / "t.json")).code == 2
    assert sorted(os.listdir(tmp_path)) == ["fifo", "trace.json"]


@pytest.mark.parametrize("cmd", ["summary", "packets", "waves", "insts", "export"])
def test_help_has_examples(cmd: str) -> None:
    r = run("prof", cmd, "--help")
    assert r.code == 0 and "Examples:" in r.out and "tinyhw prof" in r.out


def test_json_errors_keep_stdout_empty(tmp_path: Path) -> None:
    r = run("--json", "prof", "summary", str(tmp_path / "nothing.pkl"))
    assert r.code == 2 and r.no_result and r.err.startswith("error: ")


FAKE_OBJDUMP = """#!/bin/sh
# stands in for an llvm-objdump that knows the target: canned output for gfx1201's E_3
for a in "$@"; do case "$a" in --mcpu=gfx1201) ok=1;; esac; done
[ -n "$ok" ] || { echo "'x' is not a recognized processor for this target" >&2; exit 1; }
cat <<EOT
Disassembly of section .text:

0000000000001600 <E_3>:
	s_clause 0x1                                               // 000000001600: BF850001
	s_load_b64 s[2:3], s[0:1], 0x10                            // 000000001604: F4004100 F8000000
	.long 0xdeadbeef                                           // 000000001654: DEADBEEF
EOT
"""


def test_llvm_objdump_text_is_used_when_it_knows_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = tmp_path / "llvm-objdump"
    fake.write_text(FAKE_OBJDUMP)
    fake.chmod(0o755)
    monkeypatch.setenv("TINYHW_LLVM_OBJDUMP", str(fake))
    doc = json.loads(run("--json", "prof", "insts", PLUS12, "--se", "1", "--wave", "0").out)
    assert [r["instruction"] for r in doc["rows"][:2]] == ["s_clause 0x1", "s_load_b64 s[2:3], s[0:1], 0x10"]
    assert doc["rows"][2]["instruction"] == "SMEM op 0x1"          # not in the listing: own decoder
    assert doc["rows"][-1]["instruction"] == "s_endpgm"            # ".long" lines are never used as text
    assert "llvm-objdump --mcpu=gfx1201" in doc["disassembler"]
    doc = json.loads(run("--json", "prof", "insts", GEMM11, "--se", "0", "--wave", "0").out)
    assert "cannot disassemble gfx1100" in doc["disassembler"]
    assert doc["rows"][-1]["instruction"] == "s_endpgm"


def test_truncated_capture_reports_where_decoding_stopped(tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "cap"
    shutil.copytree(PLUS12, d)
    for f in d.iterdir():
        f.chmod(0o644)
    blob = (d / "sqtt_kern0_exec1_se1.bin").read_bytes()
    (d / "sqtt_kern0_exec1_se1.bin").write_bytes(blob[:1001])       # cut inside the stream, not at padding
    (d / "sqtt_kern0_exec1_se2.bin").write_bytes(bytes(range(256)) * 3)   # corrupted: noise after no header
    r = run("--json", "prof", "summary", str(d))
    assert r.code == 0, r.err
    ses = {s["se"]: s for s in json.loads(r.out)["kernels"][0]["sqtt"]}
    assert ses[1]["stop"]["of"] == 2002 and ses[1]["stop"]["nibble"] <= 2002 and ses[1]["packets"] < 1004
    assert ses[2]["packets"] > 0
    r = run("prof", "packets", str(d), "--se", "1")
    assert r.code == 0 and ("stopped at nibble" in r.out or "truncated" in r.out)
    assert run("prof", "waves", str(d)).code == 0
    assert run("prof", "export", str(d), "-o", str(tmp_path / "t.json")).code == 0


def test_profile_of_two_gpus_shows_the_first(tmp_path: Path) -> None:
    import shutil

    d = tmp_path / "cap"
    shutil.copytree(PLUS12, d)
    meta = json.loads((d / "capture.json").read_text())
    for key in ("sqtt", "pmc", "programs"):
        meta[key] += [{**e, "device": "AMD:1", **({"name": "other"} if key == "programs" else {})} for e in meta[key]]
    (d / "capture.json").chmod(0o644)
    (d / "capture.json").write_text(json.dumps(meta))
    doc = json.loads(run("--json", "prof", "summary", str(d)).out)
    assert doc["other_devices"] == ["AMD:1"]
    assert [k["name"] for k in doc["kernels"]] == ["E_3"] and len(doc["kernels"][0]["sqtt"]) == 4
    assert "only the first device" in run("prof", "summary", str(d)).out


def _capture_copy(tmp_path: Path, edit) -> Path:
    import shutil
    d = tmp_path / "cap"
    shutil.copytree(DATA / "gfx1100" / "profile_empty_run_0", d)
    meta = json.loads((d / "capture.json").read_text())
    edit(meta)
    (d / "capture.json").write_text(json.dumps(meta))   # allow_nan: Infinity / NaN as JSON writes them
    return d


def _set_at(path: tuple, value: object) -> Callable[[dict], None]:
    """An edit of capture.json that sets the field at ``path`` (keys and indices) to ``value``."""
    def edit(meta: dict) -> None:
        node = meta
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
    return edit


@pytest.mark.parametrize(("path", "value", "field"), [
    (("pmc", 0, "samples", 0, "size"), float("inf"), "'size' is a number inf"),
    (("pmc", 0, "samples", 0, "off"), float("nan"), "'off' is a number nan"),
    (("pmc", 0, "samples", 0, "se"), -1, "'se' = -1"),
    (("pmc", 0, "samples", 0), [1], "pmc[0]: samples[0] is a list, not a counter sample"),
    (("pmc", 0, "kern"), float("inf"), "pmc[0]: field 'kern' is a number inf"),
    (("sqtt", 0, "se"), 1e308, "sqtt[0]: field 'se' is a number"),
    (("sqtt", 0, "kern"), 1 << 80, "sqtt[0]: field 'kern' = a 81-bit integer"),
    (("sqtt", 0, "file"), {"a": [1] * 1000}, "names a file by a dict"),
    (("devices", 1, "props", "gfx_target_version"), "gfx1100", "'gfx_target_version' is a str"),
    (("programs", 0, "tag"), None, "programs[0]: field 'tag' is missing"),
])
def test_malformed_capture_json_is_refused_naming_the_field(tmp_path: Path, path: tuple, value, field: str) -> None:
    r = run("--json", "prof", "summary", str(_capture_copy(tmp_path, _set_at(path, value))))
    assert r.code == 2 and field in r.err and len(r.err.strip().splitlines()) == 1, r.err


def test_deep_capture_json_is_refused(tmp_path: Path) -> None:
    d = tmp_path / "deep"
    d.mkdir()
    (d / "capture.json").write_text('{"pmc": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = run("prof", "summary", str(d))
    assert r.code == 2 and "nests json deeper than 64 levels" in r.err and len(r.err.strip().splitlines()) == 1


_junk = st.sampled_from([float("inf"), float("-inf"), float("nan"), 1.5, True, None, "8", [], {}, 1 << 70, -1, 0, 8])


@pytest.mark.slow
@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(edits=st.lists(st.tuples(st.sampled_from(["off", "size", "name", "block", "xcc", "se", "sa", "wgp", "inst"]),
                                st.integers(0, 7), _junk), min_size=1, max_size=3))
def test_fuzz_pmc_samples_through_the_cli(tmp_path_factory: pytest.TempPathFactory, edits: list) -> None:
    def edit(meta: dict) -> None:
        samples = meta["pmc"][0]["samples"]
        for key, i, value in edits:
            samples[i % len(samples)][key] = value
    with budget(cpu_s=5.0, mem=128 * MIB, what="prof summary of fuzzed pmc samples"):
        r = run("--json", "prof", "summary", str(_capture_copy(tmp_path_factory.mktemp("f"), edit)))
    assert r.code in (0, 2), r.err
    assert r.code == 0 or len(r.err.strip().splitlines()) == 1


def test_an_empty_or_missing_file_is_named_so(tmp_path) -> None:
    """An empty file is "empty", not an unpickler's bare ``EOFError:``; a missing one says "no such file"."""
    empty = tmp_path / "profile.pkl"
    empty.write_bytes(b"")
    r = run("prof", "summary", str(empty))
    assert r.code == 2 and "is empty" in r.err and "EOFError" not in r.err, r.err
    r = run("prof", "summary", str(tmp_path / "missing.pkl"))
    assert r.code == 2 and "no such file" in r.err, r.err


U64_MAX = (1 << 64) - 1


def test_64_bit_ids_handles_and_properties_load(tmp_path: Path) -> None:
    """What tinygrad really writes: KFD properties such as unique_id are 64-bit, ids and addresses too."""
    def edit(meta: dict) -> None:
        for dev in meta["devices"]:
            if dev["props"]:
                dev["props"].update(unique_id=U64_MAX, local_mem_size=U64_MAX, signed=-(1 << 63))
        for key in ("programs", "sqtt", "pmc"):
            for e in meta[key]:
                e["tag" if key == "programs" else "kern"] = U64_MAX
                if key == "programs":
                    e["base"] = U64_MAX
                else:
                    e["exec_tag"] = U64_MAX
    r = run("--json", "prof", "summary", str(_capture_copy(tmp_path, edit)))
    assert r.code == 0, r.err
    (k,) = json.loads(r.out)["kernels"]
    assert k["kern"] == U64_MAX and k["exec_tag"] == U64_MAX and k["name"] == "E"


def test_64_bit_ids_in_a_tinygrad_pickle_load(tmp_path: Path) -> None:
    """The same through the pickle: tinygrad's own event classes with ids at 2**64-1."""
    import pickle

    from tinygrad.device import ProfileDeviceEvent, ProfileProgramEvent
    from tinygrad.runtime.ops_amd import ProfileSQTTEvent

    d = DATA / "gfx1200" / "profile_plus_run_0"
    meta = json.loads((d / "capture.json").read_text())
    props = next(dev["props"] for dev in meta["devices"] if dev["device"] == "AMD")
    s = meta["sqtt"][0]
    events = [ProfileDeviceEvent("AMD", props={**props, "unique_id": 14926949083218300728, "gpu_id": U64_MAX}),
              ProfileProgramEvent("AMD", "E_3", (d / meta["programs"][0]["file"]).read_bytes(), U64_MAX, U64_MAX),
              ProfileSQTTEvent("AMD", U64_MAX, s["se"], (d / s["file"]).read_bytes(), s["itrace"], U64_MAX)]
    f = tmp_path / "profile.pkl"
    f.write_bytes(pickle.dumps(events))
    r = run("--json", "prof", "summary", str(f))
    assert r.code == 0, r.err
    (k,) = json.loads(r.out)["kernels"]
    assert k["kern"] == U64_MAX and k["name"] == "E_3"
    assert json.loads(r.out)["device"]["target"] == "gfx1201"


@pytest.mark.parametrize(("path", "value", "says"), [
    (("devices", 1, "props", "unique_id"), 1 << 64, "'unique_id' = a 65-bit integer"),
    (("sqtt", 0, "exec_tag"), -1, "'exec_tag' = -1"),
    (("sqtt", 0, "se"), 1 << 11, "'se' = 2048"),
    (("pmc", 0, "samples", 0, "off"), U64_MAX, "'off' = 18446744073709551615"),
])
def test_sizes_counts_and_beyond_64_bits_stay_refused(tmp_path: Path, path: tuple, value, says: str) -> None:
    r = run("--json", "prof", "summary", str(_capture_copy(tmp_path, _set_at(path, value))))
    assert r.code == 2 and says in r.err and len(r.err.strip().splitlines()) == 1, r.err


def _fake_objdump(d: Path, name: str, knows: bool, tag: str) -> None:
    """A stand-in llvm-objdump that knows gfx1201 (printing ``tag`` as the first instruction) or no gfx12 at all."""
    knowing = FAKE_OBJDUMP.replace("s_clause 0x1", tag).replace("#!/bin/sh\n", "#!/bin/sh\nPATH=/usr/bin:/bin\n")
    script = knowing if knows else \
        "#!/bin/sh\necho \"'gfx1201' is not a recognized processor for this target (ignoring processor)\" >&2\n"
    (d / name).write_text(script)
    (d / name).chmod(0o755)


@pytest.mark.parametrize(("tools", "used"), [
    # the distribution's plain llvm-objdump is LLVM 14; setup installed llvm-objdump-19
    ({"llvm-objdump": False, "llvm-objdump-14": False, "llvm-objdump-19": True}, "llvm-objdump-19"),
    # the highest version that knows the target, not merely the highest
    ({"llvm-objdump-19": True, "llvm-objdump-21": False, "llvm-objdump-9": True}, "llvm-objdump-19"),
    ({"llvm-objdump-18": True, "llvm-objdump-20": True}, "llvm-objdump-20"),
    ({"llvm-objdump": True, "llvm-objdump-14": False}, "llvm-objdump"),
])
def test_the_newest_llvm_objdump_that_knows_the_target_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               tools: dict, used: str) -> None:
    for name, knows in tools.items():
        _fake_objdump(tmp_path, name, knows, f"s_nop {name.removeprefix('llvm-objdump').lstrip('-') or 0}")
    (tmp_path / "llvm-objdump-99").write_text("not executable")
    monkeypatch.delenv("TINYHW_LLVM_OBJDUMP")
    monkeypatch.setenv("PATH", str(tmp_path))   # only the fakes: whatever LLVM this machine has is not seen
    doc = json.loads(run("--json", "prof", "insts", PLUS12, "--se", "1", "--wave", "0").out)
    assert doc["disassembler"] == f"instruction text from {used} --mcpu=gfx1201", doc["disassembler"]
    assert doc["rows"][0]["instruction"] == f"s_nop {used.removeprefix('llvm-objdump').lstrip('-') or 0}"


def test_no_llvm_objdump_that_knows_the_target_names_each_tried(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) \
        -> None:
    _fake_objdump(tmp_path, "llvm-objdump", False, "")
    _fake_objdump(tmp_path, "llvm-objdump-14", False, "")
    monkeypatch.delenv("TINYHW_LLVM_OBJDUMP")
    monkeypatch.setenv("PATH", str(tmp_path))
    doc = json.loads(run("--json", "prof", "insts", PLUS12, "--se", "1", "--wave", "0").out)
    assert doc["disassembler"].endswith("(llvm-objdump-14 cannot disassemble gfx1201 (exit 0); "
                                        "llvm-objdump cannot disassemble gfx1201 (exit 0))"), doc["disassembler"]
    assert doc["rows"][-1]["instruction"] == "s_endpgm"      # tinyhw's own decoder
