"""Corpus kernels nobody hand-picked, through the exact ``kernels exec`` interface on the emulated board.

After ``am boot``, a seeded sample of the shader-core corpus (tests/data/corpus: tinygrad kernels for gfx1100 with
the outputs tinygrad's CPU device computed) runs as
``tinyhw --device mock:navi31 kernels exec CODE_OBJECT --kernel NAME --grid X,Y,Z --block X,Y,Z --buffer FILE|zeros:N
... --out INDEX:FILE ... --timeout S --json``: the driver's compute queue, PM4, doorbell, the command processor and
the shader core, then the buffers written back through ``--out``. Each output must equal the corpus's expected bytes
under the corpus test's precision rules (corpushelp.compare_output). The sample is stratified by kind (every kind,
a 3-D block, a four-buffer kernel); its seed is printed. ``TINYHW_CORPUS_EXEC=all`` runs every fixture instead,
``TINYHW_CORPUS_EXEC_SEED=N`` draws another sample. The same sample also runs through the library's one call
(``tinyhw.open`` + ``tinyhw.kernels.exec_kernel``).
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

import corpushelp as C
import numpy as np
import pytest
from amfake import FW_DIR
from clihelp import run

import tinyhw
from tinyhw.kernels import exec_kernel

PER_KIND = 3
SEED = int(os.environ.get("TINYHW_CORPUS_EXEC_SEED", "23"))


def sample(meta: dict) -> list[dict]:
    """The seeded sample: PER_KIND fixtures of every kind, plus a 3-D block and a four-buffer kernel if the draw
    missed them (the whole corpus with ``TINYHW_CORPUS_EXEC=all``)."""
    ks = meta["kernels"]
    if os.environ.get("TINYHW_CORPUS_EXEC") == "all":
        return list(ks)
    rng = random.Random(SEED)
    out: list[dict] = []
    for kind in C.KINDS:
        out += rng.sample([e for e in ks if e["kind"] == kind], PER_KIND)
    for want in (lambda e: e["block"][2] > 1, lambda e: len(e["args"]) == 4, lambda e: e["grid"][2] > 1):
        if not any(want(e) for e in out):
            out.append(rng.choice([e for e in ks if want(e)]))
    return out


@pytest.fixture(scope="module")
def corpus() -> tuple[dict, dict[str, np.ndarray]]:
    return C.load_corpus()


@pytest.fixture
def booted() -> None:
    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    r = run("--device", "mock:navi31", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    assert r.code == 0, r.err


def _expected(entry: dict, arrays: dict[str, np.ndarray]) -> np.ndarray:
    return arrays[f"k{entry['seed']}_out"]


def _got(entry: dict, data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=C.DT[entry["out"]]).reshape(entry["out_shape"])


def _report(results: dict[int, tuple[str, str]], how: str) -> None:
    counts = Counter(k for k, _ in results.values())
    print(f"\nkernels exec ({how}), sample seed {SEED}: {len(results)} corpus kernels: {counts['exact']} exact, "
          f"{counts['within']} within the documented precision, {counts['FAIL']} failed")
    fails = {s: d for s, (k, d) in results.items() if k == "FAIL"}
    assert not fails, "\n".join(f"seed {s}: {d}" for s, d in sorted(fails.items()))


def test_corpus_sample_through_the_kernels_exec_cli(booted: None, corpus, tmp_path: Path) -> None:
    meta, arrays = corpus
    chosen = sample(meta)
    assert {e["kind"] for e in chosen} == set(C.KINDS) and any(e["block"][2] > 1 for e in chosen)
    results = {}
    for e in chosen:
        argv, out_i, inputs = C.exec_argv(e, arrays, tmp_path)
        out_file, echo = tmp_path / f"k{e['seed']}.out", tmp_path / f"k{e['seed']}.echo"
        first_in = next(i for i, a in enumerate(e["args"]) if a != "out")
        r = run("--device", "mock:navi31", "kernels", "exec", *argv, "--out", f"{out_i}:{out_file}",
                "--out", f"{first_in}:{echo}", "--timeout", "20", "--json")
        if r.code != 0:
            results[e["seed"]] = ("FAIL", f"exit {r.code}: {r.err.strip()}")
            continue
        doc = json.loads(r.out)
        assert doc["kernel"] == e["name"] and doc["grid"] == e["grid"] and doc["block"] == e["block"], doc
        assert len(doc["buffers"]) == len(e["args"]) and doc["time_kind"] == "modelled" and doc["dispatch_s"] > 0
        assert [o["index"] for o in doc["outputs"]] == [out_i, first_in]
        assert echo.read_bytes() == Path(inputs[0]).read_bytes(), f"seed {e['seed']}: an input buffer changed"
        results[e["seed"]] = C.compare_output(e, _got(e, out_file.read_bytes()), _expected(e, arrays))
    _report(results, "cli")


def test_corpus_sample_through_the_library(booted: None, corpus, tmp_path: Path) -> None:
    meta, arrays = corpus
    results = {}
    with tinyhw.open("mock:navi31,strict") as o:
        for e in sample(meta)[::4]:  # a quarter: the cli test runs all of them
            key = f"k{e['seed']}"
            code = tmp_path / f"{key}.elf"
            code.write_bytes(arrays[f"{key}_code"].tobytes())
            bufs: list = [f"zeros:{int(np.prod(e['out_shape'])) * 4}" if a == "out" else arrays[f"{key}_{a}"].tobytes()
                          for a in e["args"]]
            res = exec_kernel(o.transport, code, kernel=e["name"], grid=tuple(e["grid"]), block=tuple(e["block"]),
                              buffers=bufs)
            out = res.buffers[e["args"].index("out")]
            assert res.doc["kernel"] == e["name"] and len(res.buffers) == len(e["args"])
            results[e["seed"]] = C.compare_output(e, _got(e, out), _expected(e, arrays))
    _report(results, "library")


def test_a_wrong_output_is_caught(booted: None, corpus, tmp_path: Path) -> None:
    """The comparison is not vacuous: a fixture run with its input buffers swapped gives other bytes."""
    meta, arrays = corpus
    e = next(x for x in meta["kernels"] if x["kind"] == "ew_i32" and len(x["args"]) >= 3
             and x["args"].index("out") == 0)
    argv, out_i, inputs = C.exec_argv(e, arrays, tmp_path)
    a, b = argv.index(inputs[0]), argv.index(inputs[1])
    argv[a], argv[b] = argv[b], argv[a]
    r = run("--device", "mock:navi31", "kernels", "exec", *argv, "--out", f"{out_i}:{tmp_path / 'o.bin'}")
    assert r.code == 0, r.err
    got = _got(e, (tmp_path / "o.bin").read_bytes())
    assert C.compare_output(e, got, _expected(e, arrays))[0] == "FAIL"
