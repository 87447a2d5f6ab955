"""A kernels build manifest from the user (`kernels run --device cuda:N --build-dir DIR`) is checked field by
field before anything in it is used: crafted inputs are refused with exit 2 naming the field, and a bounded
fuzz run (arbitrary JSON, and one or two mutations of a real manifest) never gets past the checks with
anything but a one-line tinyhw error (issue 21 item 9: `[]` or a probe without `name` crashed).

The crafted inputs are written by the tests; the committed sm_90 PTX is copied into each build folder.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from clihelp import run
from fuzzbudget import MIB, budget
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tinyhw.errors import Refused, TinyhwError
from tinyhw.kernels.manifest import load_manifest, prebuilt_dir
from tinyhw.kernels.run import plan_cuda, run_cuda

SM90 = prebuilt_dir() / "sm_90"
SMALL_N = 1024  # the committed PTX computes its own index bounds from the grid: a small n only changes sizes


def small_manifest() -> dict:
    """The committed sm_90 manifest with every probe shrunk to SMALL_N elements (cheap host checks)."""
    man = json.loads((SM90 / "manifest.json").read_text())
    for p in man["probes"]:
        p["n"] = SMALL_N
        for b in p["buffers"]:
            b["count"] = SMALL_N
        for k in p["kernels"]:
            for a in k["args"]:
                a["count"] = SMALL_N
    return man


BASE = small_manifest()


def write(folder: Path, doc: Any) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for f in SM90.iterdir():
        if f.name != "manifest.json" and not (folder / f.name).exists():
            shutil.copyfile(f, folder / f.name)
    data = doc if isinstance(doc, bytes) else json.dumps(doc, allow_nan=True).encode()
    (folder / "manifest.json").write_bytes(data)
    return folder


class FakeGpu:
    """Just enough of tinyhw.cuda.CudaDevice for run_cuda: memory as bytearrays, kernels that do nothing."""

    label, driver_version = "cuda:0", 12080

    def __init__(self) -> None:
        self.mem: dict[int, bytearray] = {}

    def peak(self) -> Any:
        return SimpleNamespace(name="fake", cc=(9, 0), gbps=1.0, tflops=1.0)

    def alloc(self, nbytes: int) -> int:
        assert nbytes <= 64 << 20, "the checks let a buffer through that the test did not expect"
        self.mem[len(self.mem) + 1] = bytearray(nbytes)
        return len(self.mem)

    def upload(self, ptr: int, data: bytes) -> None:
        self.mem[ptr][:len(data)] = data

    def load_ptx(self, ptx: bytes, name: str) -> tuple[bytes, str]:
        return ptx, name

    def launch(self, func: Any, grid: tuple, block: tuple, args: list[int]) -> None:
        pass

    def synchronize(self) -> None:
        pass

    def download(self, ptr: int, nbytes: int) -> bytes:
        return bytes(self.mem[ptr][:nbytes])

    def timed(self, fn: Any, repeats: int) -> list[float]:
        fn()
        return [1e-3] * repeats


def attempt(folder: Path, probe: str = "pattern") -> dict:
    plan = plan_cuda(probe, 1, None, folder)
    return run_cuda(plan, FakeGpu())


def test_the_small_base_manifest_runs(tmp_path: Path) -> None:
    doc = attempt(write(tmp_path, BASE))
    assert doc["probe"] == "pattern" and doc["n"] == SMALL_N and doc["check"]["ok"] is False  # kernels do nothing


def mutated(**changes: Any) -> dict:
    doc = copy.deepcopy(BASE)
    for path, value in changes.items():
        node = doc
        keys = [int(k) if k.isdigit() else k for k in path.split("__")]
        for k in keys[:-1]:
            node = node[k]
        if value is DELETE:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return doc


DELETE = object()
CRAFTED = [
    ([], "the manifest must be an object, not an array"),
    ({}, "is not a tinyhw-kernels/1 manifest"),
    ("tinyhw", "the manifest must be an object, not a string"),
    (mutated(probes=[{}]), "probes[0].name is missing"),
    (mutated(probes__0=[]), "probes[0] must be an object, not an array"),
    (mutated(probes__0__name=DELETE), "probes[0].name is missing"),
    (mutated(probes__0__name=7), "probes[0].name must be a string, not an integer"),
    (mutated(probes__0__n=True), "probes[0].n must be an integer, not a boolean"),
    (mutated(probes__0__n=1.5), "probes[0].n must be an integer, not a number"),
    (mutated(probes__0__n=2**40), "probes[0].n is 1099511627776, outside 1..1073741824"),
    (mutated(probes__0__n=-1), "probes[0].n is -1, outside"),
    (mutated(probes__0__kernels__0__grid=[1, 1]), "probes[0].kernels[0].grid has 2 entries, expected 3..3"),
    (mutated(probes__0__kernels__0__grid=[0, 1, 1]), "probes[0].kernels[0].grid[0] is 0, outside"),
    (mutated(probes__0__kernels__0__block=[2048, 1, 1]), "probes[0].kernels[0].block[0] is 2048, outside 1..1024"),
    (mutated(probes__0__kernels__0__file="../../../etc/passwd"), "probes[0].kernels[0].file '../../../etc/passwd'"),
    (mutated(probes__0__kernels__0__file="manifest.json"), "is not a file of its own"),
    (mutated(probes__0__kernels__0__args__0__buffer="nope"), "args[0].buffer 'nope' names no buffer"),
    (mutated(probes__0__kernels__0__args__0__index=3), "args[0].index is 3, outside 0..0"),
    (mutated(probes__0__buffers__0__dtype="f64"), "buffers[0].dtype is 'f64', not one of u32, f32"),
    (mutated(probes__0__buffers__0__role=None), "buffers[0].role must be a string, not null"),
    (mutated(probes__0__kernels__0__binary_sha256="00"), "binary_sha256 '00' is not a valid name here"),
    (mutated(probes__0__work_per_run=float("inf")), "is not valid json: Infinity is not a JSON number"),
    (mutated(target="gfx950"), "target is 'gfx950', not one of"),
    (mutated(probes=[BASE["probes"][0], BASE["probes"][0]]), "probes[1].name 'pattern' is listed twice"),
    (mutated(probes__0__kernels=[]), "probes[0].kernels has 0 entries, expected 1..16"),
    (b"[" * 5000 + b"]" * 5000, "nests deeper than 16 levels"),
    (b"\xff\xfe{", "is not valid json"),
    (mutated(probes__0__buffers__0__count=SMALL_N + 1), "probe pattern's buffers do not match the probe"),
]


@pytest.mark.parametrize("doc,message", CRAFTED, ids=[m[:40] for _, m in CRAFTED])
def test_crafted_manifest_is_refused_naming_the_field(tmp_path: Path, doc: Any, message: str) -> None:
    folder = write(tmp_path, doc)
    with pytest.raises(Refused) as e:
        attempt(folder)
    assert message in str(e.value)
    r = run("kernels", "run", "pattern", "--device", "cuda:0", "--build-dir", str(folder))
    assert r.code == 2 and r.err.startswith("error: ") and len(r.err.strip().splitlines()) == 1


def test_manifest_reads_are_bounded(tmp_path: Path) -> None:
    folder = write(tmp_path / "big", b" " * (2 << 20))
    with pytest.raises(Refused, match="more than the 1 mib"):
        load_manifest(folder)
    fifo = tmp_path / "fifo"
    fifo.mkdir()
    os.mkfifo(fifo / "manifest.json")
    with pytest.raises(Refused, match="it is a fifo"):
        load_manifest(fifo)


def test_a_changed_binary_is_refused_before_it_is_loaded(tmp_path: Path) -> None:
    folder = write(tmp_path, BASE)
    k = BASE["probes"][0]["kernels"][0]
    (folder / k["file"]).write_bytes((SM90 / k["file"]).read_bytes() + b"\n// changed")
    with pytest.raises(Refused, match="does not match .*size or sha256"):
        attempt(folder)
    (folder / k["file"]).unlink()
    os.symlink("/dev/zero", folder / k["file"])
    with pytest.raises(Refused, match="it is a character device"):
        attempt(folder)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.floats(allow_nan=True) | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            out += _paths(v, (*prefix, i))
    return out


PATHS = [p for p in _paths(BASE) if p]


def mutate(doc: dict, data: st.DataObject) -> dict:
    path = data.draw(st.sampled_from(PATHS))
    node = doc
    try:
        for k in path[:-1]:
            node = node[k]
        if data.draw(st.booleans()) and isinstance(node, dict):
            del node[path[-1]]
        else:
            node[path[-1]] = data.draw(JSON)
    except (KeyError, IndexError, TypeError):
        pass  # an earlier mutation removed or replaced this path
    return doc


def _only_tinyhw_errors(folder: Path, probe: str) -> None:
    try:
        with budget(cpu_s=2.0, mem=64 * MIB, what="checking a fuzzed manifest"):
            attempt(folder, probe)
    except TinyhwError as e:
        assert e.exit_code in (2, 3) and "\n" not in str(e)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=JSON, probe=st.sampled_from(["pattern", "fma", "bandwidth"]))
def test_fuzz_arbitrary_json(tmp_path: Path, doc: Any, probe: str) -> None:
    _only_tinyhw_errors(write(tmp_path, doc), probe)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), probe=st.sampled_from(["pattern", "fma"]), times=st.integers(1, 2))
def test_fuzz_mutated_manifest(tmp_path: Path, data: st.DataObject, probe: str, times: int) -> None:
    doc = copy.deepcopy(BASE)
    for _ in range(times):
        doc = mutate(doc, data)
    _only_tinyhw_errors(write(tmp_path, doc), probe)
