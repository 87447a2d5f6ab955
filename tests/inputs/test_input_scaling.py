"""Inputs whose cost grew faster than their size stay linear, or are refused, with memory bounded by the input.

Each case compares a work counter or an object count at two input sizes (never a wall time) and runs the CLI on
the larger input in a child process (tests/helpers/boundedrun.py: RLIMIT_AS and RLIMIT_CPU, so a regression fails here
instead of exhausting the machine) whose peak resident memory beyond its imports must stay within a generous
multiple of the input. Before the fixes: an SQTT stream of alternating LAYOUT_HEADERs took 2.3 s at 16 KiB and
24 s at 64 KiB (every table switch walked the rest of the stream again: the work counter grew 16-fold for 4 times
the input), a firmware file of concatenated empty xz streams 7.6 s per MiB and growing with its square, a 4 MiB
pickle of EMPTY_SET opcodes 1.5 GB before its refusal, a capture.json of empty objects 25 times its size, and
``trace show`` of a pcapng 26 (``--json`` 66) times its size. Sabotages shown red: the SQTT walk without its
per-table window cache (work 600-fold), the pickle without its object budget (MemoryError in the child), the xz
reader without its stream cap (the empty streams decode), ``trace show --json`` holding every record (the RSS
bound).
"""

from __future__ import annotations

import json
import lzma
import pickle
import random
import shutil
from pathlib import Path

import pytest
from boundedrun import run_bounded
from testpaths import DATA

from tinyhw.errors import Refused
from tinyhw.fileio import MAX_XZ_STREAMS, XZ_WORK, read_xz_input
from tinyhw.formats import boundedjson, sqtt, tgpickle, tracefile
from tinyhw.formats.tgpickle import SafeUnpickler

MIB = 1 << 20


def _grew_mib(r) -> float:
    print(f"child: {r.grew_kib / 1024:.0f} MiB beyond its imports, {r.cpu_s:.1f} s cpu")
    return r.grew_kib / 1024


# -- SQTT: one pass over the stream, whatever its LAYOUT_HEADERs do ----------------------------------------------

def _header(layout: int) -> bytes:
    return (0x11 | (layout << 7)).to_bytes(8, "little")   # LAYOUT_HEADER: enc 0x11 in bits 6:0, layout in 12:7


def _alternating(size: int) -> bytes:
    return (_header(3) + _header(4)) * (size // 16)


def _work(data: bytes) -> dict[str, int]:
    before = dict(sqtt.WORK)
    trace = sqtt.decode(data)
    out = {k: sqtt.WORK[k] - before[k] for k in before}
    out["decoded"] = len(trace)
    return out


@pytest.mark.parametrize("make", [_alternating, lambda n: random.Random(n).randbytes(n)], ids=["headers", "random"])
def test_sqtt_decoding_work_is_linear(make) -> None:
    small, big = _work(make(16 << 10)), _work(make(64 << 10))
    assert big["decoded"] >= 3.5 * small["decoded"]
    for k in ("window_nibbles", "packets"):
        assert big[k] <= 4.5 * max(small[k], 1), (k, small, big)
    # every (table, window) pair is computed once at most: three tables' worth of the stream, never per switch
    assert big["window_nibbles"] <= 3 * 2 * (64 << 10) + 3 * sqtt._CHUNK


def test_alternating_headers_decode_to_every_header() -> None:
    t = sqtt.decode(_alternating(4096) + bytes(32))
    assert t.counts() == {"LAYOUT_HEADER": 512, "NOP": 49} and t.layout == 3 and t.stop_reason == "end"


def _capture_with_sqtt(tmp_path: Path, blob: bytes) -> Path:
    d = tmp_path / "cap"
    shutil.copytree(DATA / "sqtt" / "gfx1100" / "profile_empty_run_0", d)
    for f in d.iterdir():
        f.chmod(0o644)
    (d / "sqtt_kern0_exec1_se0.bin").write_bytes(blob)
    return d


def test_a_large_random_sqtt_stream_is_decoded_in_bounded_memory(tmp_path: Path) -> None:
    size = 4 * MIB
    d = _capture_with_sqtt(tmp_path, random.Random(12).randbytes(size))
    r = run_bounded(["--json", "prof", "summary", str(d)], tmp_path, mem=1 << 30, cpu=60, wall=180)
    assert r.code == 0, r
    assert _grew_mib(r) < 48 * size / MIB, r     # measured about 17 times the stream


# -- a firmware file of concatenated xz streams ------------------------------------------------------------------

EMPTY_XZ = lzma.compress(b"")


def _fed(path: Path, max_size: int = 64 * MIB) -> tuple[int, str]:
    before = XZ_WORK["fed_bytes"]
    try:
        out = f"{len(read_xz_input(path, max_size))} bytes"
    except Refused as e:
        out = e.message
    return XZ_WORK["fed_bytes"] - before, out


def test_concatenated_empty_xz_streams_are_refused_after_bounded_work(tmp_path: Path) -> None:
    fed = {}
    for mib in (1, 4):
        p = tmp_path / f"e{mib}.xz"
        p.write_bytes(EMPTY_XZ * (mib * MIB // len(EMPTY_XZ)))
        fed[mib], says = _fed(p)
        assert f"more than {MAX_XZ_STREAMS} concatenated xz streams" in says
    assert fed[4] == fed[1] <= (MAX_XZ_STREAMS + 1) * 4096, fed


def test_concatenated_xz_streams_are_read_with_work_linear_in_the_file(tmp_path: Path) -> None:
    fed = {}
    for n in (16 << 10, 64 << 10):
        part = random.Random(n).randbytes(n)
        p = tmp_path / f"s{n}.xz"
        p.write_bytes(b"".join(lzma.compress(part) + bytes(4) for _ in range(MAX_XZ_STREAMS)))
        fed[n], says = _fed(p)
        assert says == f"{n * MAX_XZ_STREAMS} bytes"
        assert fed[n] <= 2 * p.stat().st_size + MAX_XZ_STREAMS * 4096
    assert fed[64 << 10] <= 4.5 * fed[16 << 10]


def test_a_firmware_dir_of_empty_xz_streams_is_refused_in_bounded_time_and_memory(tmp_path: Path) -> None:
    fw = tmp_path / "fw"
    fw.mkdir()
    (fw / "psp_13_0_0_sos.bin.xz").write_bytes(EMPTY_XZ * (4 * MIB // len(EMPTY_XZ)))
    r = run_bounded(["--device", f"mock:navi31,flash={tmp_path / 'f.bin'},timing=instant", "am", "boot", "--yes",
                     "--firmware-dir", str(fw)], tmp_path, mem=1 << 30, cpu=30, wall=120)
    assert r.code == 2 and "concatenated xz streams" in r.err, r
    assert r.cpu_s < 20, r


# -- the profile pickle: objects built bounded by its size --------------------------------------------------------

def _sets(size: int) -> bytes:
    return pickle.PROTO + b"\x04" + pickle.EMPTY_SET * (size - 3) + pickle.STOP


def _built_before_refusal(blob: bytes) -> int:
    u = SafeUnpickler(__import__("io").BytesIO(blob), size=len(blob))
    with pytest.raises(Refused, match="builds more objects than a"):
        u.load()
    return u.ops


def test_objects_a_pickle_builds_are_bounded_by_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tgpickle, "BUILT_BASE", 0)   # the budget per byte alone: small inputs show it
    small, big = _built_before_refusal(_sets(MIB // 4)), _built_before_refusal(_sets(MIB))
    for size, ops in ((MIB // 4, small), (MIB, big)):
        assert ops <= tgpickle.BUILT_PER_BYTE * size // 224 + 2
    assert 3.5 * small <= big <= 4 * small + 2


def test_a_pickle_of_empty_sets_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    f = tmp_path / "sets.pkl"
    f.write_bytes(_sets(4 * MIB))
    r = run_bounded(["--json", "prof", "summary", str(f)], tmp_path, mem=1 << 30, cpu=30, wall=120)
    assert r.code == 2 and "builds more objects than a" in r.err and r.err.count("\n") == 1, r
    assert _grew_mib(r) < 160 * 4, r     # the budget is 96 bytes of objects per byte (1.5 GB before)


# -- capture.json: values bounded, not only bytes -----------------------------------------------------------------

def test_capture_json_values_are_counted_before_parsing(tmp_path: Path) -> None:
    for n in (1000, 4000):   # values: the object, the list, n + 1 objects in it, n commas
        assert boundedjson.shape(b'{"sqtt": [' + b"{}," * n + b"{}]}") == (3, 2 * n + 4)
    d = _capture_with_sqtt(tmp_path, bytes(64))
    meta = d / "capture.json"
    meta.write_bytes(b'{"sqtt": [' + b"{}, " * (6 * MIB) + b"{}]}")
    r = run_bounded(["--json", "prof", "summary", str(d)], tmp_path, mem=1 << 30, cpu=30, wall=120)
    assert r.code == 2 and "holds more than 2097152 json values" in r.err, r
    assert _grew_mib(r) < 4 * meta.stat().st_size / MIB + 48, r   # the file, numpy; its dicts were 20 times it


# -- trace show streams: records out as they are read -------------------------------------------------------------

def _big_trace(path: Path, size: int) -> Path:
    """A real recording's records repeated to about ``size`` bytes (the header and interface blocks once)."""
    data = _recorded(path.parent)
    blocks = list(tracefile.iter_blocks(data))
    start = blocks[2][0]
    body = data[start:]
    path.write_bytes(data[:start] + body * max(1, (size - start) // len(body)))
    return path


def _recorded(tmp: Path) -> bytes:
    from clihelp import run

    rec = tmp / "seed.pcapng"
    if not rec.exists():
        r = run("--device", f"mock:navi31,flash={tmp / 'seed.bin'},timing=instant", "--record", str(rec), "flash",
                "info")
        assert r.code == 0, r.err
    return rec.read_bytes()


@pytest.mark.parametrize("json_mode", [False, True], ids=["human", "json"])
def test_trace_show_streams_records(tmp_path: Path, json_mode: bool) -> None:
    grew = {}
    for mib in (1, 4):
        f = _big_trace(tmp_path / f"t{mib}.pcapng", mib * MIB)
        r = run_bounded([*(["--json"] if json_mode else []), "trace", "show", str(f)], tmp_path, mem=1 << 30,
                        cpu=120, wall=300)
        assert r.code == 0, r
        grew[mib] = _grew_mib(r)
    # the file's bytes and one record at a time: 3 extra MiB of file cost about 3 MiB more (26-66 times before)
    assert grew[4] - grew[1] < 3 * 3 + 8, grew


def test_streamed_json_is_the_document_show_builds(tmp_path: Path) -> None:
    import io

    from tinyhw.trace import load, load_bytes
    from tinyhw.trace.show import Filter, Streamed, show, write_json

    f = _big_trace(tmp_path / "t.pcapng", 1)
    cut = tmp_path / "cut.pcapng"
    cut.write_bytes(f.read_bytes()[:-7])
    for path in (f, cut):
        for flt in (Filter(), Filter(usb=True), Filter(writes=True), Filter(block="smuio"),
                    Filter(register="ROM_SW_CNTL")):
            out = io.StringIO()
            write_json(Streamed(load_bytes(path), flt), out.write)
            assert out.getvalue() == json.dumps(show(load(path), flt), indent=2) + "\n"


def test_an_xz_header_claiming_a_huge_dictionary_is_refused(tmp_path: Path) -> None:
    """A 100-byte file whose LZMA2 filter names a 1.5 GiB dictionary: refused before the decoder allocates it."""
    import zlib

    raw = bytearray(lzma.compress(b"x", filters=[{"id": lzma.FILTER_LZMA2, "dict_size": 4096}]))
    size = (raw[12] + 1) * 4   # the block header after the 12-byte stream header: its LZMA2 dictionary property
    at = raw.index(b"\x21\x01", 12, 12 + size) + 2
    raw[at] = 40               # 1.5 GiB, the largest xz can name (encoding one would need gigabytes)
    raw[12 + size - 4:12 + size] = zlib.crc32(raw[12:12 + size - 4]).to_bytes(4, "little")
    p = tmp_path / "big-dict.xz"
    p.write_bytes(bytes(raw))
    with pytest.raises(Refused, match="needs more than 256 mib of memory"):
        read_xz_input(p, MIB)
