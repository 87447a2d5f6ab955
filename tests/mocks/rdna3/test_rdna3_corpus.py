"""The shader-core corpus (issue 23 item 7): random tinygrad kernels for gfx1100 on the emulated RDNA3 core.

tests/data/corpus holds the fixtures ``make_corpus.py`` wrote: each kernel's code object, launch shape,
argument order, inputs, and the output tinygrad's CPU device computed. Every fixture runs here on the
shader core and must give the same bytes, except where the float result may differ by the documented
precision of an instruction (TOLERANCE_ULP). A kernel stopped by an instruction the core does not model
passes only if (seed, mnemonic) is in known_gaps.json; a new gap, a wrong result, or a stale gap fails.
A small sample is recompiled with tinygrad and its code object must equal the committed one.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import corpushelp
import numpy as np
import pytest
from kernelshelp import need_clang, need_libllvm

from tinyhw.formats.amdisa import decode_at
from tinyhw.mocks.rdna3 import Unimplemented

TOLERANCE_ULP = corpushelp.TOLERANCE_ULP  # the documented precision rules (shared with kernels exec)
GAPS_FILE = corpushelp.CORPUS / "known_gaps.json"
SAMPLE_SEEDS = (1, 4, 17)   # int32 elementwise, sqrt, reduce through LDS with s_barrier: recompiled in CI
_MNEMONIC = re.compile(r"\((\w+?)(?:_e32|_e64)?,")


@pytest.fixture(scope="module")
def corpus() -> tuple[dict, dict[str, np.ndarray]]:
    return corpushelp.load_corpus()


def _gaps() -> dict[str, str]:
    return {str(k): v for k, v in json.loads(GAPS_FILE.read_text())["gaps"].items()}


def check_fixture(entry: dict, arrays: dict[str, np.ndarray], gaps: dict[str, str]) -> tuple[str, str]:
    """('exact' | 'within' | 'gap' | 'FAIL', detail) for one fixture on the shader core."""
    seed = str(entry["seed"])
    try:
        got, _ = corpushelp.run_on_core(entry, arrays)
    except Unimplemented as e:
        m = _MNEMONIC.search(str(e))
        mnem = m.group(1) if m else str(e)
        if gaps.get(seed) == mnem:
            return "gap", mnem
        return "FAIL", f"unimplemented {mnem} (not in known_gaps.json): {e}"
    if seed in gaps:
        return "FAIL", f"listed as a gap ({gaps[seed]}) but it ran: remove it from known_gaps.json"
    return corpushelp.compare_output(entry, got, arrays[f"k{seed}_out"])


def seen_mnemonics(code: bytes) -> set[str]:
    """Mnemonics in a code object's .text (tinyhw's decoder, checked against llvm-objdump elsewhere)."""
    from tinyhw.formats.amdgpu_code import parse_amdgpu_code

    obj = parse_amdgpu_code(code)
    text = obj.elf.section(".text")
    body = code[text.offset:text.offset + text.size]
    out, off = set(), 0
    while off < len(body):
        inst = decode_at(body, off, "gfx11")
        out.add(inst.mnemonic.removesuffix("_e32").removesuffix("_e64"))
        if inst.mnemonic == "s_endpgm":
            break
        off += inst.size
    return out


def test_corpus_size_and_kinds(corpus) -> None:
    meta, arrays = corpus
    ks = meta["kernels"]
    assert len(ks) >= 200
    assert len({e["seed"] for e in ks}) == len(ks)
    assert len({arrays[f"k{e['seed']}_code"].tobytes() for e in ks}) >= 200      # distinct code objects
    assert set(corpushelp.KINDS) <= {e["kind"] for e in ks}
    assert any(e["block"][1] > 1 or e["grid"][2] > 1 for e in ks)                # 2D/3D launches
    barrier = [e for e in ks if {"s_barrier", "ds_store_b32"} <= seen_mnemonics(arrays[f"k{e['seed']}_code"].tobytes())]
    assert len(barrier) >= 10 and all(e["block"][0] > 32 for e in barrier)      # multi-wave LDS exchanges
    size = sum(p.stat().st_size for p in corpushelp.CORPUS.iterdir())
    assert size < 3 << 20


def test_every_fixture_on_the_shader_core(corpus) -> None:
    meta, arrays = corpus
    gaps = _gaps()
    results = {e["seed"]: check_fixture(e, arrays, gaps) for e in meta["kernels"]}
    counts = Counter(r[0] for r in results.values())
    seen: set[str] = set()
    for e in meta["kernels"]:
        seen |= seen_mnemonics(arrays[f"k{e['seed']}_code"].tobytes())
    gap_mn = Counter(r[1] for r in results.values() if r[0] == "gap")
    print(f"\ncorpus: {len(results)} kernels: {counts['exact']} exact, {counts['within']} within the documented "
          f"precision, {counts['gap']} stopped at a known gap, {counts['FAIL']} failed")
    print(f"coverage: {len(seen - set(gap_mn))} implemented / {len(seen)} mnemonics seen; gaps: {dict(gap_mn)}")
    fails = {s: d for s, (k, d) in results.items() if k == "FAIL"}
    assert not fails, "\n".join(f"seed {s}: {d}" for s, d in sorted(fails.items()))
    assert set(gaps) <= {str(e["seed"]) for e in meta["kernels"]}, "known_gaps.json names a seed not in the corpus"


def test_every_fixture_is_what_the_generator_makes(corpus) -> None:
    """Without compiling: make_spec(seed) still gives each committed kernel (the corpus and script agree)."""
    meta, arrays = corpus
    for e in meta["kernels"]:
        spec = corpushelp.make_spec(e["seed"])
        assert {k: spec[k] for k in ("kind", "inputs", "expr", "out")} == \
            {k: e[k] for k in ("kind", "inputs", "expr", "out")}, f"seed {e['seed']}"
        for i, x in enumerate(corpushelp.make_inputs(spec)):
            assert x.tobytes() == arrays[f"k{e['seed']}_in{i}"].tobytes(), f"seed {e['seed']} input {i}"


@pytest.mark.parametrize("seed", SAMPLE_SEEDS)
def test_sample_recompiles_to_the_committed_bytes(corpus, seed: int) -> None:
    need_libllvm()
    meta, arrays = corpus
    from tinyhw.kernels import seam

    llvm = seam.find_libllvm()
    if llvm is None or llvm[1] != meta["libllvm"]:
        pytest.skip(f"the corpus was compiled with libLLVM {meta['libllvm']}, this machine has {llvm}: "
                    "the generated code depends on the LLVM version")
    entry = next(e for e in meta["kernels"] if e["seed"] == seed)
    spec = corpushelp.make_spec(seed)
    spec["opts"] = entry["opts"]        # the generator may have dropped options tinygrad refused
    assert {k: spec[k] for k in ("kind", "inputs", "expr", "out")} == \
        {k: entry[k] for k in ("kind", "inputs", "expr", "out")}, "make_spec no longer gives the committed kernel"
    comp = corpushelp.compile_gfx1100(spec)
    assert comp["code"] == arrays[f"k{seed}_code"].tobytes()
    assert (comp["grid"], comp["block"], comp["args"]) == (entry["grid"], entry["block"], entry["args"])
    need_clang()
    data = [arrays[f"k{seed}_in{i}"] for i in range(len(entry["inputs"]))]
    assert corpushelp.run_cpu(spec, data).tobytes() == arrays[f"k{seed}_out"].tobytes()


def test_a_wrong_result_and_an_unlisted_gap_fail(corpus, monkeypatch) -> None:
    meta, arrays = corpus
    entry = next(e for e in meta["kernels"] if e["kind"] == "ew_i32")
    key = f"k{entry['seed']}_out"
    wrong = dict(arrays)
    wrong[key] = arrays[key].copy()
    wrong[key].reshape(-1)[0] ^= 1
    assert check_fixture(entry, wrong, {})[0] == "FAIL"
    assert check_fixture(entry, arrays, {str(entry["seed"]): "v_add_nc_u32"})[0] == "FAIL"   # stale gap

    from tinyhw.mocks.rdna3 import dispatch, valu
    monkeypatch.delitem(valu.OPS, "v_exp_f32")
    monkeypatch.setattr(dispatch, "_COMPILED", {})     # compiled code is kept across dispatches: start afresh
    unary = next(e for e in meta["kernels"] if e.get("approx") == "exp2")
    kind, detail = check_fixture(unary, arrays, {})
    assert kind == "FAIL" and "v_exp_f32" in detail
    assert check_fixture(unary, arrays, {str(unary["seed"]): "v_exp_f32"})[0] == "gap"
