"""Fuzz targets without a fuzz test of their own, each case under a CPU and memory budget (tests/helpers/fuzzbudget.py).

The others run beside their parsers, under the same budget: pcapng traces (test_trace_tools.py), firmware of
each kind (test_firmware_cli.py's inspect of random bytes behind each kind's magic), code objects
(test_formats_amdgpu_code.py), manifests (test_kernels_manifest.py), pickles (test_prof_pickle_bounds.py) and
capture directories' PMC samples (test_prof_cli.py). Here: mmiotrace logs, labgrid resource parameters as YAML
writes them, capture directories (their JSON and SQTT streams), SQTT streams, xz firmware files, the bounded
JSON loader and ``trace show``'s streamed reader. Every outcome is a result or a one-line refusal; examples are
few and small (the whole file takes well under a minute on a loaded 2-core machine), seeds fixed.
"""

from __future__ import annotations

import io
import json
import lzma
import random
import shutil

import pytest
import yaml
from fuzzbudget import MIB, budget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testpaths import DATA

from tinyhw.errors import EnvironmentProblem, Refused, TinyhwError
from tinyhw.fileio import read_xz_input
from tinyhw.formats import boundedjson, sqtt
from tinyhw.formats import mmiotrace as mt
from tinyhw.formats import tracefile as tf

FAST = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _one_line(e: TinyhwError) -> None:
    assert "\n" not in str(e) and len(str(e)) < 600, str(e)


# -- mmiotrace logs ------------------------------------------------------------------------------------------------

LOG = (DATA / "mmiotrace" / "handwritten.txt").read_text().splitlines()
TOKENS = st.sampled_from(["R", "W", "MAP", "UNMAP", "MARK", "PCIDEV", "UNKNOWN", "VERSION", "20070824", "4", "8",
                          "99999999999999999999.1", "1.000000", "0xffffffffffffffffffff", "-1", "0x", "1e9", "",
                          "\x00", "é", "1" * 500, "100.000011"])


@FAST
@given(lines=st.lists(st.one_of(st.sampled_from(LOG), st.lists(TOKENS, max_size=10).map(" ".join)), max_size=40))
def test_fuzz_mmiotrace(lines: list[str]) -> None:
    from tinyhw.trace.mmio import convert

    with budget(cpu_s=1.0, mem=16 * MIB, what="an mmiotrace log"):
        log = mt.parse("\n".join(lines))
        try:
            data = convert(log)[0]
        except Refused as e:
            _one_line(e)
            return
    tf.read_trace(data, strict=True)   # what it wrote reads back


# -- labgrid: a TinyhwRemote resource's parameters, as an exporter's YAML gives them to the client ---------------

YAML_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(),
                                     st.text(max_size=30), st.sampled_from(["ssh", "tcp", "usb:0", "lab1", "ci"])),
                           lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids,
                                                                                      max_size=3), max_leaves=8)
FIELDS = ["host", "port", "key_file", "device", "via", "ssh_user"]


@FAST
@given(params=st.dictionaries(st.sampled_from(FIELDS), YAML_VALUES, max_size=6))
def test_fuzz_labgrid_remote_parameters(params: dict) -> None:
    from tinyhw.connect.place import PlaceResource, remote_spec

    with budget(cpu_s=1.0, mem=16 * MIB, what="a labgrid resource"):
        loaded = yaml.safe_load(yaml.safe_dump(params))   # what the exporter's YAML hands over
        try:
            spec = remote_spec(PlaceResource("e/g/TinyhwRemote/r", loaded or {}, {}, True))
        except EnvironmentProblem as e:
            _one_line(e)
            return
    assert str(spec).startswith("remote:")


# -- capture directories: capture.json and the SQTT streams it names ------------------------------------------------

CAPTURE = DATA / "sqtt" / "gfx1100" / "profile_empty_run_0"
JSON_VALUES = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.text(max_size=8),
                                     st.floats(allow_nan=False)),
                           lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids,
                                                                                      max_size=4), max_leaves=12)


@pytest.mark.slow
@FAST
@given(data=st.data(), seed=st.integers(0, 2 ** 32))
def test_fuzz_capture_directory(tmp_path_factory: pytest.TempPathFactory, data: st.DataObject, seed: int) -> None:
    from tinyhw.prof import load_capture
    from tinyhw.prof.analyze import summary_doc

    d = tmp_path_factory.mktemp("cap")
    shutil.copytree(CAPTURE, d, dirs_exist_ok=True)
    for f in d.iterdir():
        f.chmod(0o644)
    meta = json.loads((d / "capture.json").read_text())
    key = data.draw(st.sampled_from(["devices", "programs", "sqtt", "pmc"]))
    if meta[key]:
        entry = meta[key][data.draw(st.integers(0, len(meta[key]) - 1))]
        entry[data.draw(st.sampled_from([*entry, "extra"]))] = data.draw(JSON_VALUES)
    (d / "capture.json").write_text(json.dumps(meta))
    rng = random.Random(seed)
    blob = d / "sqtt_kern0_exec1_se0.bin"
    raw = bytearray(blob.read_bytes())
    for _ in range(rng.randint(0, 8)):   # flips, and now and then a LAYOUT_HEADER of another layout
        at = rng.randrange(len(raw) - 8)
        raw[at:at + 8] = (0x11 | (rng.choice([3, 4, 9]) << 7)).to_bytes(8, "little") if rng.random() < 0.3 else \
            rng.randbytes(8)
    blob.write_bytes(bytes(raw[:rng.randint(0, len(raw))]))
    with budget(cpu_s=3.0, mem=96 * MIB, what="a fuzzed capture directory"):
        try:
            doc = summary_doc(load_capture(d))
        except Refused as e:
            _one_line(e)
            return
    json.dumps(doc)


# -- SQTT streams ------------------------------------------------------------------------------------------------

@FAST
@given(seed=st.integers(0, 2 ** 32), size=st.integers(0, 1 << 14), headers=st.integers(0, 64))
def test_fuzz_sqtt_stream(seed: int, size: int, headers: int) -> None:
    rng = random.Random(seed)
    raw = bytearray(rng.randbytes(size))
    for _ in range(headers if size > 8 else 0):
        at = rng.randrange(size - 8)
        raw[at:at + 8] = (0x11 | (rng.choice([3, 4, 5]) << 7)).to_bytes(8, "little")
    with budget(cpu_s=1.0, mem=8 * MIB + 200 * size, what="an sqtt stream"):
        t = sqtt.decode(bytes(raw))
    assert len(t) <= 2 * size and t.stop <= t.nibbles + 18 and t.describe_stop()


# -- xz firmware files ---------------------------------------------------------------------------------------------

XZ = lzma.compress(b"firmware " * 100)


@FAST
@given(parts=st.lists(st.sampled_from([XZ, lzma.compress(b""), bytes(4), b"\xfd7zXZ\x00", b"junk"]), max_size=80),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), max_size=3))
def test_fuzz_xz_firmware(tmp_path_factory: pytest.TempPathFactory, parts: list[bytes],
                          flips: list[tuple[int, int]]) -> None:
    data = bytearray(b"".join(parts))
    for at, x in flips:
        if data:
            data[at % len(data)] ^= x
    f = tmp_path_factory.mktemp("xz") / "psp_13_0_0_sos.bin.xz"
    f.write_bytes(bytes(data))
    with budget(cpu_s=1.0, mem=24 * MIB, what="an xz firmware file"):   # the decoder's 8 MiB dictionary
        try:
            out = read_xz_input(f, 1 << 20, "firmware file")
        except Refused as e:
            _one_line(e)
            return
    assert len(out) <= 1 << 20


# -- the bounded JSON loader ---------------------------------------------------------------------------------------

@FAST
@given(text=st.one_of(JSON_VALUES.map(json.dumps), st.text(alphabet='[]{}",:\\ 0a', max_size=400)))
def test_fuzz_bounded_json(text: str) -> None:
    with budget(cpu_s=1.0, mem=8 * MIB, what="a json text"):
        try:
            out = boundedjson.loads(text, "f")
        except Refused as e:
            _one_line(e)
            return
    assert out == json.loads(text)


# -- trace show, streamed ----------------------------------------------------------------------------------------

@FAST
@given(cut=st.integers(0, 1 << 16), flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)),
                                                    max_size=3))
def test_fuzz_streamed_trace_show(cut: int, flips: list[tuple[int, int]]) -> None:
    from tinyhw.trace.show import Filter, Streamed, show, write_json

    data = bytearray(_seed_trace()[:cut])
    for at, x in flips:
        if data:
            data[at % len(data)] ^= x
    out = io.StringIO()
    with budget(cpu_s=2.0, mem=32 * MIB, what="trace show of a damaged file"):
        try:
            write_json(Streamed(bytes(data), Filter(usb=True)), out.write)
        except Refused as e:
            _one_line(e)
            return
    assert json.loads(out.getvalue()) == json.loads(json.dumps(show(tf.read_trace(bytes(data)), Filter(usb=True))))


_SEED: list[bytes] = []


def _seed_trace() -> bytes:
    if not _SEED:
        from tinyhw.trace.mmio import convert

        _SEED.append(convert(mt.parse("\n".join(LOG)))[0])
    return _SEED[0]
