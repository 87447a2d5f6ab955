"""The second-compiler corpus: OpenCL C kernels from clang-19 for gfx1100 on the emulated RDNA3 core.

tests/data/clcorpus holds what ``make_clcorpus.py`` wrote: each kernel's code object (clang-19 OpenCL C, ld.lld-19),
inputs, and the output the same source computed when compiled by clang-19 for this machine with a small shim
(tests/helpers/clcorpushelp.py). Every fixture runs on the shader core and must give the same bytes, or be within the
ISA's 1 ULP for a transcendental builtin (plus the host libm's own error for exp2/log2). A kernel stopped by an
instruction the core does not implement passes only if it is in known_gaps.json with that mnemonic; a listed kernel that
runs fails ("remove it from known_gaps.json"), so does one that stops at another instruction.
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
from collections import Counter
from pathlib import Path

import clcorpushelp
import numpy as np
import pytest

from tinyhw.mocks.rdna3 import Unimplemented

GAPS_FILE = clcorpushelp.CORPUS / "known_gaps.json"
_MNEMONIC = re.compile(r"\((\w+?)(?:_e32|_e64)?,")
FEATURES = ("i32_", "i64_", "u64_", "f32_", "f16_", "bf16_", "f64_", "atomic_", "scratch_", "lds_", "wave_", "wmma_")


@pytest.fixture(scope="module")
def corpus() -> tuple[dict, dict[str, np.ndarray]]:
    return clcorpushelp.load_corpus()


def _gaps() -> dict[str, str]:
    return dict(json.loads(GAPS_FILE.read_text())["gaps"])


def check(entry: dict, arrays: dict[str, np.ndarray], gaps: dict[str, str]) -> tuple[str, str]:
    """('exact' | 'within' | 'gap' | 'FAIL', detail) for one fixture on the shader core."""
    name = entry["name"]
    try:
        got, _ = clcorpushelp.run_on_core(entry, arrays)
    except Unimplemented as e:
        m = _MNEMONIC.search(str(e))
        mnem = m.group(1) if m else str(e)
        if gaps.get(name) == mnem:
            return "gap", mnem
        return "FAIL", f"unimplemented {mnem} (known_gaps.json says {gaps.get(name)!r}): {e}"
    if name in gaps:
        return "FAIL", f"listed as a gap ({gaps[name]}) but it ran: remove it from known_gaps.json"
    return clcorpushelp.compare(entry, got, arrays[f"{name}_out"])


def test_the_fixtures_are_the_generators_kernels(corpus) -> None:
    """Without compiling: every kernel of clcorpushelp.KERNELS is committed with its source, launch and inputs."""
    meta, arrays = corpus
    by_name = {e["name"]: e for e in meta["kernels"]}
    assert [k["name"] for k in clcorpushelp.KERNELS] == list(by_name)
    for k in clcorpushelp.KERNELS:
        e = by_name[k["name"]]
        assert e["source_sha256"] == hashlib.sha256(clcorpushelp.source(k).encode()).hexdigest(), k["name"]
        assert {x: v for x, v in k.items() if x != "src"} == {x: v for x, v in e.items() if x != "source_sha256"}
        for i, spec in enumerate(k["ins"]):
            assert clcorpushelp.make_input(k["name"], i, spec).tobytes() == arrays[f"{k['name']}_in{i}"].tobytes()
    assert len(by_name) >= 25 and all(any(n.startswith(f) for n in by_name) for f in FEATURES)
    assert meta["compiler"].startswith("Debian clang version 19")
    assert sum(p.stat().st_size for p in clcorpushelp.CORPUS.iterdir()) < 512 << 10


def test_every_kernel_on_the_shader_core(corpus) -> None:
    meta, arrays = corpus
    gaps = _gaps()
    results = {e["name"]: check(e, arrays, gaps) for e in meta["kernels"]}
    counts = Counter(r[0] for r in results.values())
    print(f"\nclcorpus: {len(results)} kernels: {counts['exact']} exact, {counts['within']} within the ISA's ULP, "
          f"{counts['gap']} stopped at a known gap, {counts['FAIL']} failed; gaps: "
          f"{ {n: d for n, (r, d) in results.items() if r == 'gap'} }")
    fails = {n: d for n, (r, d) in results.items() if r == "FAIL"}
    assert not fails, "\n".join(f"{n}: {d}" for n, d in sorted(fails.items()))
    assert set(gaps) <= set(results), "known_gaps.json names a kernel not in the corpus"


def test_a_wrong_result_a_stale_gap_and_an_unlisted_gap_fail(corpus, monkeypatch) -> None:
    meta, arrays = corpus
    entry = next(e for e in meta["kernels"] if e["name"] == "scratch_i32")
    wrong = dict(arrays)
    wrong["scratch_i32_out"] = arrays["scratch_i32_out"].copy()
    wrong["scratch_i32_out"][5] ^= 1
    assert check(entry, wrong, {})[0] == "FAIL"
    kind, detail = check(entry, arrays, {"scratch_i32": "scratch_load_b32"})
    assert kind == "FAIL" and "remove it from known_gaps.json" in detail

    from tinyhw.mocks.rdna3 import dispatch, scratch
    monkeypatch.setattr(scratch, "_LOADS", {})        # scratch loads no longer implemented
    monkeypatch.setattr(dispatch, "_COMPILED", {})    # compiled code is kept across dispatches: start afresh
    kind, detail = check(entry, arrays, {})
    assert kind == "FAIL" and "scratch_load_b32" in detail
    assert check(entry, arrays, {"scratch_i32": "scratch_load_b32"})[0] == "gap"


@pytest.mark.parametrize("name", ["scratch_i32", "wave_dpp", "f16_arith"])
def test_a_sample_recompiles_to_the_committed_bytes(corpus, name: str) -> None:
    """With clang-19: the generator still makes the committed code object and answer (it is honest)."""
    if not clcorpushelp.have_compiler():
        pytest.skip("clang-19 and ld.lld-19 are not installed (tests/setup-system.sh installs them)")
    meta, arrays = corpus
    k = next(k for k in clcorpushelp.KERNELS if k["name"] == name)
    with tempfile.TemporaryDirectory(prefix="clcorpus-") as d:
        assert clcorpushelp.compile_gfx1100(k, Path(d)) == arrays[f"{name}_code"].tobytes()
        inputs = [arrays[f"{name}_in{i}"] for i in range(len(k["ins"]))]
        assert clcorpushelp.run_host(k, inputs, Path(d)).tobytes() == arrays[f"{name}_out"].tobytes()


def test_linked_code_objects_give_their_kernel_descriptor(corpus) -> None:
    """ld.lld-19 links each kernel into a shared object (ET_DYN): its descriptor symbol holds a virtual address, not a
    section offset, and the parser still finds the 64 bytes."""
    from tinyhw.formats.amdgpu_code import parse_amdgpu_code

    meta, arrays = corpus
    for e in meta["kernels"]:
        obj = parse_amdgpu_code(arrays[f"{e['name']}_code"].tobytes())
        assert obj.elf.file_type == 3 and not obj.problems and list(obj.kernels) == ["k"], e["name"]
        kd = obj.kernels["k"]
        assert kd.wave32 and kd.kernarg_size >= 8 * (1 + len(e["ins"]))
        assert (kd.scratch_bytes >= 768) == e["name"].startswith("scratch_"), e["name"]
