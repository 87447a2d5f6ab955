"""The tensor-core and half-precision corpus: tinygrad kernels with WMMA and f16 arithmetic on the emulated RDNA3 core.

tests/data/tccorpus holds what ``make_tccorpus.py`` wrote: each kernel's gfx1100 code object (tinygrad 0.14.0 with
its tensor cores switched on by ``OptOps.TC``, or f16 arithmetic without them), inputs, and the output tinygrad's CPU
device computed for the same kernel. Every fixture runs on the shader core and must give the same bytes, except the
kernels on random data whose sums the WMMA (or the f16 products) may round in another order: those must lie inside
the summation bound computed from their inputs (tests/helpers/tccorpushelp.py says why and how). The code objects are
checked to contain what they are here for: ``v_wmma_*`` in the tensor-core kernels (and executed exactly
M*N*K/4096 times), f16 VALU instructions in the half-precision ones.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
import tccorpushelp
from kernelshelp import need_clang, need_libllvm

from tinyhw.formats.amdisa import decode_at

WMMA_KINDS = {"v_wmma_f32_16x16x16_f16", "v_wmma_f16_16x16x16_f16", "v_wmma_f32_16x16x16_bf16",
              "v_wmma_i32_16x16x16_iu8"}
SAMPLE = ("tc_h_h_16", "h_add_mul")       # recompiled (and re-answered on the CPU) where the libLLVM major matches


@pytest.fixture(scope="module")
def corpus() -> tuple[dict, dict[str, np.ndarray]]:
    return tccorpushelp.load_corpus()


def mnemonics(code: bytes) -> list[str]:
    """The instructions of a code object's .text in order (tinyhw's decoder), without the _e32/_e64 suffix."""
    from tinyhw.formats.amdgpu_code import parse_amdgpu_code

    text = parse_amdgpu_code(code).elf.section(".text")
    body = code[text.offset:text.offset + text.size]
    out, off = [], 0
    while off < len(body):
        inst = decode_at(body, off, "gfx11")
        out.append(inst.mnemonic.removesuffix("_e32").removesuffix("_e64"))
        if inst.mnemonic == "s_endpgm":
            break
        off += inst.size
    return out


def check(entry: dict, arrays: dict[str, np.ndarray]) -> tuple[str, str]:
    """('exact' | 'within' | 'FAIL', detail) for one fixture on the shader core."""
    got, res = tccorpushelp.run_on_core(entry, arrays)
    if entry["name"].startswith("tc_"):
        (a_shape, b_shape) = (entry["ins"][0][1], entry["ins"][1][1])
        want = a_shape[0] * a_shape[1] * b_shape[1] // 4096
        ran = sum(n for m, n in res.per_mnemonic.items() if m.startswith("v_wmma_"))
        if ran != want:
            return "FAIL", f"{ran} WMMA instructions executed, {want} expected (M*N*K/16**3)"
    return tccorpushelp.compare(entry, got, arrays[f"{entry['name']}_out"], arrays)


def test_the_fixtures_are_the_generators_kernels(corpus) -> None:
    """Without compiling: every kernel of tccorpushelp.KERNELS is committed with its spec and inputs."""
    meta, arrays = corpus
    by_name = {e["name"]: e for e in meta["kernels"]}
    assert [k["name"] for k in tccorpushelp.KERNELS] == list(by_name)
    for k in tccorpushelp.KERNELS:
        e = by_name[k["name"]]
        assert {x: e[x] for x in k} == k, k["name"]
        for i, spec in enumerate(k["ins"]):
            assert tccorpushelp.make_input(k["name"], i, spec).tobytes() == \
                arrays[f"{k['name']}_in{i}"].tobytes(), (k["name"], i)
    assert meta["tinygrad"] == "0.14.0"
    assert len(by_name) >= 15 and sum(n.startswith("tc_") for n in by_name) >= 8
    assert sum(p.stat().st_size for p in tccorpushelp.CORPUS.iterdir()) < 256 << 10


def test_the_code_objects_use_wmma_and_f16_instructions(corpus) -> None:
    """The tensor-core kernels really contain v_wmma_* (all four kinds tinygrad has for RDNA3 appear), the
    half-precision ones f16 VALU instructions and no WMMA; each kernel's listed instructions are there."""
    meta, arrays = corpus
    kinds: set[str] = set()
    for e in meta["kernels"]:
        seen = mnemonics(arrays[f"{e['name']}_code"].tobytes())
        assert set(e["mnemonics"]) <= set(seen), (e["name"], sorted(set(e["mnemonics"]) - set(seen)))
        wmma = {m for m in seen if m.startswith("v_wmma_")}
        kinds |= wmma
        if e["name"].startswith("tc_"):
            assert wmma, e["name"]
        else:
            assert not wmma, e["name"]
            assert any(m.startswith(("v_", "v_dual_")) and "f16" in m for m in seen), e["name"]
    assert kinds == WMMA_KINDS


def test_every_kernel_on_the_shader_core(corpus) -> None:
    meta, arrays = corpus
    results = {e["name"]: check(e, arrays) for e in meta["kernels"]}
    counts = Counter(r for r, _ in results.values())
    within = "; ".join(f"{n}: {d}" for n, (r, d) in results.items() if r == "within")
    print(f"\ntccorpus: {len(results)} kernels: {counts['exact']} exact, {counts['within']} within the summation "
          f"bound, {counts['FAIL']} failed; {within}")
    fails = {n: d for n, (r, d) in results.items() if r == "FAIL"}
    assert not fails, "\n".join(f"{n}: {d}" for n, d in sorted(fails.items()))
    for e in meta["kernels"]:      # "within" only where the order of a sum may differ
        assert results[e["name"]][0] == "exact" or e["tol"] == "sum", e["name"]


def test_the_summation_bound_holds_the_cpu_answer_and_is_not_loose(corpus) -> None:
    """The bound is computed from the inputs: the CPU's answer lies inside it, and it is narrow (a few hundred f32
    ulps of the largest term sum), so a result from the wrong rows or columns falls outside."""
    meta, arrays = corpus
    for e in (e for e in meta["kernels"] if e["tol"] == "sum"):
        lo, hi = tccorpushelp.sum_interval(e, arrays)
        exp = arrays[f"{e['name']}_out"].astype(np.float64)
        assert ((lo <= exp) & (exp <= hi)).all(), e["name"]
        shuffled = np.roll(exp.reshape(-1), 1).reshape(exp.shape)
        assert not ((lo <= shuffled) & (shuffled <= hi)).all(), e["name"]


def test_a_wrong_result_fails(corpus) -> None:
    meta, arrays = corpus
    for name in ("tc_h_h_16", "tc_h_f_normal_32", "h_cast_f32_to_f16"):
        entry = next(e for e in meta["kernels"] if e["name"] == name)
        wrong = dict(arrays)
        out = arrays[f"{name}_out"].copy()
        out.reshape(-1)[3] = -out.reshape(-1)[3] * 2 + 1
        wrong[f"{name}_out"] = out
        assert check(entry, wrong)[0] == "FAIL", name


def test_a_broken_wmma_layout_fails(corpus, monkeypatch) -> None:
    """Sabotage: the C/D layout of another chip generation (VGPR j holds row j in lanes 0-15 and row j + 8 in lanes
    16-31, instead of rows 2j and 2j + 1) makes every tensor-core kernel fail."""
    from tinyhw.mocks.rdna3 import dispatch, wmma

    meta, arrays = corpus
    perm = [r for j in range(8) for r in (j, j + 8)]
    c_layout, d_store = wmma._c_layout, wmma._d_store
    monkeypatch.setattr(wmma, "_c_layout", lambda regs: c_layout(regs)[np.argsort(perm)])
    monkeypatch.setattr(wmma, "_d_store", lambda w, d0, mat, hi: d_store(w, d0, mat[perm], hi))
    monkeypatch.setattr(dispatch, "_COMPILED", {})     # compiled code is kept across dispatches: start afresh
    for e in (e for e in meta["kernels"] if e["name"].startswith("tc_")):
        assert check(e, arrays)[0] == "FAIL", e["name"]


def test_f16_rounding_toward_zero_fails(corpus, monkeypatch) -> None:
    """Sabotage: v_cvt_f16_f32 and v_mul_f16 rounding toward zero instead of to nearest even are caught by the
    half-precision kernels on random data."""
    from tinyhw.mocks.rdna3 import dispatch, valu

    def rtz(x: np.ndarray) -> np.ndarray:
        r = x.astype(np.float16)
        away = np.abs(r.astype(np.float32)) > np.abs(x)
        return np.where(away, r.view(np.uint16) - np.uint16(1), r.view(np.uint16)).astype(np.uint16)

    f32 = lambda a: a.view(np.float32)  # noqa: E731
    h = lambda a: a.astype(np.uint16).view(np.float16).astype(np.float32)  # noqa: E731
    monkeypatch.setitem(valu.TYPED, "v_cvt_f16_f32", ("f", "h", lambda a: rtz(f32(a))))
    monkeypatch.setitem(valu.TYPED, "v_mul_f16", ("hh", "h", lambda a, b: rtz(h(a) * h(b))))
    monkeypatch.setattr(dispatch, "_COMPILED", {})
    meta, arrays = corpus
    for name in ("h_cast_f32_to_f16", "h_where_cmp", "h_mixed_casts"):
        entry = next(e for e in meta["kernels"] if e["name"] == name)
        assert check(entry, arrays)[0] == "FAIL", name


@pytest.mark.parametrize("name", SAMPLE)
def test_a_sample_recompiles_to_the_committed_bytes(corpus, name: str) -> None:
    """With tinygrad's compile extra and the libLLVM major the corpus records: the generator still makes the committed
    code object, and the CPU device the committed answer."""
    need_libllvm()
    meta, arrays = corpus
    from tinyhw.kernels import seam

    llvm = seam.find_libllvm()
    if llvm is None or llvm[1] != meta["libllvm"]:
        pytest.skip(f"the corpus was compiled with libLLVM {meta['libllvm']}, this machine has {llvm}")
    k = next(k for k in tccorpushelp.KERNELS if k["name"] == name)
    entry = next(e for e in meta["kernels"] if e["name"] == name)
    comp = tccorpushelp.compile_gfx1100(k)
    assert comp["code"] == arrays[f"{name}_code"].tobytes()
    assert (comp["grid"], comp["block"], comp["args"]) == (entry["grid"], entry["block"], entry["args"])
    need_clang()
    data = [arrays[f"{name}_in{i}"] for i in range(len(k["ins"]))]
    assert tccorpushelp.run_cpu(k, data).tobytes() == arrays[f"{name}_out"].tobytes()
