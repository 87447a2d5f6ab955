"""``tinyhw trace show / diff / import mmiotrace / export mmiotrace`` and the trace file reader's robustness.

The fixture tests/data/mmiotrace/handwritten.txt is hand-written from the kernel's documented format (its README
lists the malformed lines on purpose); a recording made by tinyhw's emulator is exported to the kernel's layout and
imported back. The reader is fuzzed with truncated and corrupted files: every outcome is a parsed trace or a
TraceError, nothing else. An independent pcapng reader (scapy) opens the files tinyhw writes.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from clihelp import run
from fuzzbudget import MIB, budget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testpaths import DATA as TEST_DATA

import tinyhw
from tinyhw.formats import mmiotrace as mt
from tinyhw.formats import tracefile as tf
from tinyhw.trace import diff, load
from tinyhw.trace.show import Filter, show

DATA = TEST_DATA / "mmiotrace"
SCRATCH = 0x30118  # gc.SCRATCH_REG6 on navi31
ROM_SW_CNTL = 0x5A3A0  # smuio.ROM_SW_CNTL on navi31


def _session(tmp: Path, name: str, values: list[int], mark: str = "step") -> Path:
    """A small recorded session on the emulated board: marks around writes and reads of known registers."""
    from tinyhw import progress

    path = tmp / f"{name}.pcapng"
    with tinyhw.open(f"mock:navi31,flash={tmp / name}.bin", record=path) as dev:
        bar = dev.transport.bar(5)
        progress.step(mark, "start")
        for v in values:
            bar.write32(SCRATCH, v)
            bar.read32(SCRATCH)
        bar.read32(ROM_SW_CNTL)
        progress.step(mark, "done")
        dev.transport.config_read(0, 4)
    return path


def test_show_decodes_registers_and_fields_grouped_by_mark(tmp_path: Path) -> None:
    path = _session(tmp_path, "s", [1, 3])
    doc = show(load(path))
    step = next(g for g in doc["groups"] if g["mark"] == "step")
    writes = [r for r in step["records"] if r["op"] == "write32"]
    assert [w["register"] for w in writes] == ["gc.SCRATCH_REG6", "gc.SCRATCH_REG6"]
    assert writes[1]["fields"] == {"SCRATCH_REG6": [1, 3]}  # the field that changed, old and new
    only = show(load(path), Filter(block="smuio"))
    assert [r["register"] for g in only["groups"] for r in g["records"]] == ["smuio.ROM_SW_CNTL"]
    w = show(load(path), Filter(register="SCRATCH_REG6", writes=True))
    assert [r["op"] for g in w["groups"] for r in g["records"]] == ["write32", "write32"]


def test_show_cli_json_and_text(tmp_path: Path) -> None:
    path = _session(tmp_path, "s", [5])
    r = run("--json", "trace", "show", str(path), "--register", "gc.SCRATCH_REG6")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["shown"] == 2 and doc["groups"][0]["mark"] == "step"
    text = run("trace", "show", str(path), "--block", "gc")
    assert "== step" in text.out and "gc.SCRATCH_REG6 <- 0x00000005" in text.out
    bad = run("trace", "show", str(path), "--register", "gc.NO_SUCH_REG")
    assert bad.code == 2 and "no navi31 register" in bad.err
    assert run("--device", "mock:navi31", "trace", "show", str(path)).code == 2  # --device it cannot honour


def test_diff_of_equal_sessions_is_empty_and_a_changed_write_is_one_row(tmp_path: Path) -> None:
    a = _session(tmp_path, "a", [1, 2])
    b = _session(tmp_path, "b", [1, 2])
    c = _session(tmp_path, "c", [1, 7])
    same = diff.diff(load(a), load(b))
    assert same["differences"] == 0 and same["aligned_marks"] >= 1
    rows = diff.diff(load(a), load(c))["rows"]
    assert rows == [{"mark": "step", "kind": "written", "what": "gc.SCRATCH_REG6", "a": "0x1, 0x2",
                     "b": "0x1, 0x7"}]
    d = _session(tmp_path, "d", [1, 2], mark="other")
    kinds = {r["kind"] for r in diff.diff(load(a), load(d))["rows"]}
    assert kinds == {"mark only in a", "mark only in b"}
    r = run("--json", "trace", "diff", str(a), str(c))
    assert r.code == 1 and json.loads(r.out)["differences"] == 1
    assert "gc.SCRATCH_REG6" in run("trace", "diff", str(a), str(c)).out


def test_every_compare_command_exits_1_on_a_difference_and_0_when_alike(tmp_path: Path) -> None:
    """One rule for diff, verify and compare commands: alike exit 0, different exit 1 (the document still written),
    and each says so in its --help."""
    a = _session(tmp_path, "a", [1, 2])
    b = _session(tmp_path, "b", [1, 2])
    c = _session(tmp_path, "c", [1, 7])
    assert run("trace", "diff", str(a), str(b)).code == 0
    r = run("trace", "diff", str(a), str(c))
    assert r.code == 1 and "1 differences" in r.out, r.err
    assert json.loads(run("--json", "trace", "diff", str(a), str(c)).out)["differences"] == 1
    flash = tmp_path / "a.bin"  # the emulated board's flash file (an ifwi image) the session above made
    other = tmp_path / "other.bin"
    image = bytearray(flash.read_bytes())
    image[5] ^= 0xFF  # in the first sector
    other.write_bytes(bytes(image))
    assert run("firmware", "diff", str(flash), str(flash)).code == 0
    assert run("firmware", "diff", str(flash), str(other)).code == 1
    assert run("--device", f"mock:navi31,flash={flash}", "flash", "verify", str(flash), "--sector-count", "1").code == 0
    assert run("--device", f"mock:navi31,flash={flash}", "flash", "verify", str(other), "--sector-count", "1").code == 1
    for cmd in (["trace", "diff"], ["firmware", "diff"], ["flash", "verify"]):
        text = " ".join(run(*cmd, "--help").out.split())
        assert "1 when they differ" in text or "1 otherwise" in text, cmd


def test_the_handwritten_mmiotrace_log_parses_with_its_malformed_lines_reported() -> None:
    log = mt.parse((DATA / "handwritten.txt").read_text())
    assert log.version == mt.VERSION
    assert [n for n, _ in log.problems] == [16, 17, 18, 19, 20, 21, 23]
    assert "width 3" in dict(log.problems)[17] and "longer than 4096" in dict(log.problems)[23]
    gpu = next(d for d in log.devices if d.vendor_id == 0x1002)
    assert (gpu.device_id, gpu.location, gpu.driver) == (0x744C, "03:00.0", "amdgpu")
    assert (5, 0xFCB00000, 0x100000) in gpu.resources and 4 in gpu.io
    assert log.maps[1] == (0xFCB00000, 0x100000)


def test_import_keeps_the_gpus_bar_accesses_and_reports_line_numbers(tmp_path: Path) -> None:
    out = tmp_path / "k.pcapng"
    r = run("trace", "import", "mmiotrace", str(DATA / "handwritten.txt"), "-o", str(out))
    assert r.code == 0, r.err
    assert "handwritten.txt:17: width 3" in r.err and "handwritten.txt:23:" in r.err
    trace = load(out)
    got = [(x.name, x.bar, x.width, x.fields.get("offset"), x.fields.get("value")) for x in trace.records
           if x.op in (tf.READ32, tf.WRITE32)]
    assert got == [("read32", 5, 4, 0x5A3A0, 0), ("write32", 5, 4, 0x5A3A0, 0x10003), ("read32", 5, 4, 0x5A3A4,
                    0x4000800), ("write32", 5, 1, 0x5A3A8, 0x9F), ("read32", 5, 2, 0x5A3AC, 0xC2),
                   ("write32", 5, 4, 0x58000, 0x55667788), ("write32", 5, 4, 0x58004, 0x11223344),
                   ("read32", 0, 4, 0x100, 0xCAFE)]  # the HPET read outside the gpu's bars is left out
    assert trace.dropped == 3 and any(x.op == tf.ERROR and "0f,11,02" in x.text for x in trace.records)
    assert [m.text for m in trace.marks()] == ["amdgpu: probe", "amdgpu: done"]  # the over-long mark was refused
    assert trace.header["identity"]["device_id"] == 0x744C and trace.header["source"]["malformed_lines"] == 7
    doc = show(trace, Filter(block="smuio"))
    assert {r["register"] for g in doc["groups"] for r in g["records"]} >= {"smuio.ROM_SW_CNTL"}
    again = run("trace", "import", "mmiotrace", str(DATA / "handwritten.txt"), "-o", str(out))
    assert again.code == 2 and "exists" in again.err


def test_a_log_without_a_gpu_or_regions_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_text("VERSION 20070824\nR 4 1.000000 1 0x10 0x0 0x0 0\n")
    r = run("trace", "import", "mmiotrace", str(empty), "-o", str(tmp_path / "e.pcapng"))
    assert r.code == 2 and "neither PCIDEV nor MAP" in r.err
    assert not (tmp_path / "e.pcapng").exists()


def test_an_emulator_recording_exported_to_mmiotrace_imports_to_the_same_accesses(tmp_path: Path) -> None:
    path = _session(tmp_path, "s", [1, 2, 3])
    log = tmp_path / "s.txt"
    assert run("trace", "export", "mmiotrace", str(path), "-o", str(log)).code == 0
    text = log.read_text()
    assert text.startswith("VERSION 20070824\nPCIDEV 0000 1002744c ")
    parsed = mt.parse(text)
    assert parsed.problems == []
    back = tmp_path / "back.pcapng"
    assert run("trace", "import", "mmiotrace", str(log), "-o", str(back)).code == 0

    def accesses(p: Path) -> list[tuple]:
        return [(x.name, x.bar, x.fields["offset"], x.fields["value"]) for x in load(p).records
                if x.op in (tf.READ32, tf.WRITE32)]

    assert accesses(back) == accesses(path) and len(accesses(path)) == 7
    assert diff.diff(load(path), load(back))["rows"] == [
        {"mark": "(outside any mark)", "kind": "mark only in a", "what": "-", "a": "1 records",
         "b": "-"}]  # the config read after the step: config space is not in mmiotrace


def test_scapy_reads_the_recording_as_pcapng(tmp_path: Path) -> None:
    from scapy.utils import RawPcapNgReader

    path = _session(tmp_path, "s", [1, 2])
    trace = load(path)
    with RawPcapNgReader(str(path)) as reader:
        packets = list(reader)
        assert reader.interfaces[0][0] == tf.LINKTYPE
    assert len(packets) == len(trace.records)
    for (data, _meta), rec in zip(packets, trace.records, strict=True):
        assert tf.decode_record(data, rec.wall_ns).fields == rec.fields


# -- the reader under damage ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    tmp = tmp_path_factory.mktemp("small")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TINYHW_LOCK_DIR", str(tmp / "locks"))
        return _session(tmp, "small", [1, 2, 3]).read_bytes()


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(min_value=0, max_value=10_000), flips=st.lists(
    st.tuples(st.integers(min_value=0, max_value=10_000), st.integers(min_value=1, max_value=255)), max_size=4))
def test_a_truncated_or_corrupted_file_reads_or_fails_with_a_clear_error(small: bytes, cut: int,
                                                                        flips: list[tuple[int, int]]) -> None:
    data = bytearray(small[:cut % (len(small) + 1)])
    for at, x in flips:
        if data:
            data[at % len(data)] ^= x
    try:
        with budget(cpu_s=1.0, mem=16 * MIB, what="reading a damaged trace"):
            trace = tf.read_trace(bytes(data))
    except tf.TraceError as e:
        assert e.message.startswith("trace file: ") and e.exit_code == 2
        return
    assert len(trace.records) <= 40


def test_named_damage_gives_named_errors(small: bytes) -> None:
    first_epb = small.index(struct.pack("<I", tf.EPB))
    bad_len = bytearray(small)
    struct.pack_into("<I", bad_len, first_epb + 4, 13)
    with pytest.raises(tf.TraceError, match=f"block at byte {first_epb} has an impossible length 13"):
        tf.read_trace(bytes(bad_len))
    bad_op = bytearray(small)
    bad_op[first_epb + 28] = 99
    with pytest.raises(tf.TraceError, match="unknown op code 99"):
        tf.read_trace(bytes(bad_op))
    bad_trailer = bytearray(small)
    total = struct.unpack_from("<I", small, first_epb + 4)[0]
    struct.pack_into("<I", bad_trailer, first_epb + total - 4, total + 4)
    with pytest.raises(tf.TraceError, match="corrupt"):
        tf.read_trace(bytes(bad_trailer))
    with pytest.raises(tf.TraceError, match="not a pcapng file"):
        tf.read_trace(b"VERSION 20070824\n")
    newer = small.replace(b"tinyhw-trace 1 ", b"tinyhw-trace 9 ", 1)
    with pytest.raises(tf.TraceError, match="version 9 is not supported"):
        tf.read_trace(newer)


def test_a_trace_that_is_not_a_regular_file_or_too_big_is_refused(tmp_path: Path) -> None:
    r = run("trace", "show", "/dev/zero")
    assert r.code == 2 and "/dev/zero" in r.err


def test_a_directory_for_a_trace_file_is_one_error_line(tmp_path: Path) -> None:
    """A directory given as the recording, the log or the output is refused in the same one-line form as a FIFO
    (not click's usage text), exit 2."""
    from clihelp import run as cli_run

    some = tmp_path / "some.pcapng"
    some.write_bytes(b"")
    for args in (["trace", "show", str(tmp_path)], ["trace", "diff", str(tmp_path), str(tmp_path)],
                 ["trace", "import", "mmiotrace", str(tmp_path), "-o", str(tmp_path / "x.pcapng")],
                 ["trace", "export", "mmiotrace", str(some), "-o", str(tmp_path)],
                 ["--device", f"mock:navi31,flash={tmp_path / 'f.bin'}", "trace", "replay", str(tmp_path)]):
        r = cli_run(*args)
        lines = r.err.strip().splitlines()
        assert r.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (args, r.err)


def test_a_record_after_the_marks_closed_is_not_labelled_before_the_first_mark(tmp_path: Path) -> None:
    """The config read after the step's ``done`` comes after the first mark: its group is "outside any mark"."""
    doc = show(load(_session(tmp_path, "s", [1])))
    labels = [g["mark"] for g in doc["groups"]]
    assert labels[0] == "step" and len(labels) == 2, labels
    assert "before the first mark" not in labels[-1] and labels[-1] == "(outside any mark)", labels


def test_a_usb_control_records_windex_does_not_replace_its_record_index(tmp_path: Path) -> None:
    """A vendor request's wIndex is a field of its own (``w_index``): the record's ``index`` (its position in the
    file, which ``trace show`` prints and --json carries) stays the position for every record."""
    path = tmp_path / "u.pcapng"
    assert run("--device", f"mock:navi31-usb,flash={tmp_path / 'f.bin'}", "--record", str(path),
               "probe").code == 0
    doc = show(load(path), Filter(usb=True))
    records = [r for g in doc["groups"] for r in g["records"]]
    assert any(r["op"] == "usb_control" for r in records)
    assert [r["index"] for r in records] == [r["seq"] for r in records] == list(range(len(records)))
    assert all("w_index" in r for r in records if r["op"] == "usb_control")


def test_a_timestamp_beyond_64_bit_nanoseconds_is_a_malformed_line(tmp_path: Path) -> None:
    """A 20-digit timestamp cannot be kept in the trace file's 64-bit nanoseconds: the line is reported, the rest
    imports (it ended in ``internal error: argument out of range``)."""
    head = (DATA / "handwritten.txt").read_text().splitlines()[:5]
    log = tmp_path / "big.txt"
    log.write_text("\n".join([*head, "R 4 99999999999999999999.000011 1 0xfcb5a3a0 0x0 0x0 0",
                              "MARK 18446744073.709551 late", "W 4 18446744072.000000 1 0xfcb5a3a0 0x1 0x0 0"]) + "\n")
    out = tmp_path / "o.pcapng"
    r = run("trace", "import", "mmiotrace", str(log), "-o", str(out))
    assert r.code == 0, r.err
    assert "big.txt:6: timestamp 99999999999999999999.000011 lies beyond" in r.err and "big.txt:7:" in r.err
    assert "internal error" not in r.err
    (w,) = [x for x in load(out).records if x.op == tf.WRITE32]
    assert w.fields.get("value") == 1
