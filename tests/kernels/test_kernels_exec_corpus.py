"""Corpus kernels nobody hand-picked, through the exact ``kernels exec`` interface on the emulated board.

After ``am boot``, a seeded sample of the shader-core corpus (tests/data/corpus: tinygrad kernels for gfx1100 with
the outputs tinygrad's CPU device computed) runs as
``tinyhw --device mock:navi31 kernels exec CODE_OBJECT --kernel NAME --grid X,Y,Z --block X,Y,Z --buffer FILE|zeros:N
... --out INDEX:FILE ... --timeout S --json``: the driver's compute queue, PM4, doorbell, the command processor and
the shader core, then the buffers written back through ``--out``. Each output must equal the corpus's expected bytes
under the corpus test's precision rules (corpushelp.compare_output). The sample is stratified by kind (every kind,
a 3-D block, a four-buffer kernel); its seed is printed. ``TINYHW_CORPUS_EXEC=all`` runs every fixture instead,
``TINYHW_CORPUS_EXEC_SEED=N`` draws another sample. The same sample also runs through the library's one call
(``tinyhw.open`` + ``tinyhw.kernels.exec_kernel``), and a few of it on ``mock:navi31-usb``.
"""

from __future__ import annotations

import json
import os
import random
from collections import Counter
from pathlib import Path

import corpushelp
import numpy as np
import pytest
from clihelp import run
from kernelshelp import am_boot, need_libllvm
from testpaths import DATA

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
    for kind in corpushelp.KINDS:
        out += rng.sample([e for e in ks if e["kind"] == kind], PER_KIND)
    for want in (lambda e: e["block"][2] > 1, lambda e: len(e["args"]) == 4, lambda e: e["grid"][2] > 1):
        if not any(want(e) for e in out):
            out.append(rng.choice([e for e in ks if want(e)]))
    return out


@pytest.fixture(scope="module")
def corpus() -> tuple[dict, dict[str, np.ndarray]]:
    return corpushelp.load_corpus()


@pytest.fixture
def booted() -> None:
    am_boot()


def _expected(entry: dict, arrays: dict[str, np.ndarray]) -> np.ndarray:
    return arrays[f"k{entry['seed']}_out"]


def _got(entry: dict, data: bytes) -> np.ndarray:
    return np.frombuffer(data, dtype=corpushelp.DT[entry["out"]]).reshape(entry["out_shape"])


def _report(results: dict[int, tuple[str, str]], how: str) -> None:
    counts = Counter(k for k, _ in results.values())
    print(f"\nkernels exec ({how}), sample seed {SEED}: {len(results)} corpus kernels: {counts['exact']} exact, "
          f"{counts['within']} within the documented precision, {counts['FAIL']} failed")
    fails = {s: d for s, (k, d) in results.items() if k == "FAIL"}
    assert not fails, "\n".join(f"seed {s}: {d}" for s, d in sorted(fails.items()))


@pytest.mark.slow
def test_corpus_sample_through_the_kernels_exec_cli(booted: None, corpus, tmp_path: Path) -> None:
    meta, arrays = corpus
    chosen = sample(meta)
    assert {e["kind"] for e in chosen} == set(corpushelp.KINDS) and any(e["block"][2] > 1 for e in chosen)
    results = {}
    for e in chosen:
        argv, out_i, inputs = corpushelp.exec_argv(e, arrays, tmp_path)
        out_file, echo = tmp_path / f"k{e['seed']}.out", tmp_path / f"k{e['seed']}.echo"
        first_in = next((i for i, a in enumerate(e["args"]) if a != "out"), None)  # None: a kernel of no input
        echo_out = [] if first_in is None else ["--out", f"{first_in}:{echo}"]
        r = run("--device", "mock:navi31", "kernels", "exec", *argv, "--out", f"{out_i}:{out_file}", *echo_out,
                "--timeout", "20", "--json")
        if r.code != 0:
            results[e["seed"]] = ("FAIL", f"exit {r.code}: {r.err.strip()}")
            continue
        doc = json.loads(r.out)
        assert doc["kernel"] == e["name"] and doc["grid"] == e["grid"] and doc["block"] == e["block"], doc
        assert len(doc["buffers"]) == len(e["args"]) and doc["time_kind"] == "modelled" and doc["dispatch_s"] > 0
        assert [o["index"] for o in doc["outputs"]] == [out_i] + ([] if first_in is None else [first_in])
        if inputs:
            assert echo.read_bytes() == Path(inputs[0]).read_bytes(), f"seed {e['seed']}: an input buffer changed"
        results[e["seed"]] = corpushelp.compare_output(e, _got(e, out_file.read_bytes()), _expected(e, arrays))
    _report(results, "cli")


def test_corpus_sample_through_kernels_exec_on_the_usb_board(booted: None, corpus, tmp_path: Path) -> None:
    """The same board behind the emulated USB bridge (the real USB driver code): a few kernels of the sample."""
    meta, arrays = corpus
    results = {}
    for e in [x for x in sample(meta) if x["kind"] in ("grid3d", "reduce", "gather")][:4]:
        argv, out_i, _ = corpushelp.exec_argv(e, arrays, tmp_path)
        out_file = tmp_path / f"k{e['seed']}.out"
        r = run("--device", "mock:navi31-usb", "kernels", "exec", *argv, "--out", f"{out_i}:{out_file}")
        results[e["seed"]] = (corpushelp.compare_output(e, _got(e, out_file.read_bytes()), _expected(e, arrays))
                              if r.code == 0 else ("FAIL", f"exit {r.code}: {r.err.strip()}"))
    _report(results, "cli, mock:navi31-usb")


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
            results[e["seed"]] = corpushelp.compare_output(e, _got(e, out), _expected(e, arrays))
    _report(results, "library")


def test_a_wrong_output_is_caught(booted: None, corpus, tmp_path: Path) -> None:
    """The comparison is not vacuous: a fixture run with its input buffers swapped gives other bytes."""
    meta, arrays = corpus
    e = next(x for x in meta["kernels"] if x["kind"] == "ew_i32" and len(x["args"]) >= 3
             and x["args"].index("out") == 0)
    argv, out_i, inputs = corpushelp.exec_argv(e, arrays, tmp_path)
    a, b = argv.index(inputs[0]), argv.index(inputs[1])
    argv[a], argv[b] = argv[b], argv[a]
    r = run("--device", "mock:navi31", "kernels", "exec", *argv, "--out", f"{out_i}:{tmp_path / 'o.bin'}")
    assert r.code == 0, r.err
    got = _got(e, (tmp_path / "o.bin").read_bytes())
    assert corpushelp.compare_output(e, got, _expected(e, arrays))[0] == "FAIL"


# -- the interface's refusals and its files -------------------------------------------------------------------
def _fixture(corpus, tmp_path: Path, kind: str = "ew_f32") -> tuple[dict, list[str], int]:
    meta, arrays = corpus
    e = next(x for x in meta["kernels"] if x["kind"] == kind and len(x["args"]) == 3)
    argv, out_i, _ = corpushelp.exec_argv(e, arrays, tmp_path)
    return e, argv, out_i


def _swap(argv: list[str], option: str, value: str, nth: int = 0) -> list[str]:
    at = [i for i, a in enumerate(argv) if a == option][nth]
    return argv[:at + 1] + [value] + argv[at + 2:]


#: a board whose first register access disconnects: a refusal that gives exit 2 on it touched nothing
UNTOUCHED = "mock:navi31,faults=disconnect@1"


@pytest.mark.parametrize("change,says", [
    (lambda a, t: _swap(a, "--kernel", "nope"), "kernel 'nope' is not in the code object"),
    (lambda a, t: a[:-2], "takes 3 buffer argument(s) (its metadata), 2 --buffer given"),
    (lambda a, t: a + ["--buffer", "zeros:4"], "takes 3 buffer argument(s) (its metadata), 4 --buffer given"),
    (lambda a, t: _swap(a, "--buffer", str(t / "missing.bin"), 1), "missing.bin"),
    (lambda a, t: _swap(a, "--buffer", str(t), 1), "buffer 1 file"),
    (lambda a, t: _swap(a, "--buffer", "zeros:0"), "zeros:N takes 1 .."),
    (lambda a, t: _swap(a, "--buffer", "zeros:lots"), "zeros:N takes a byte count"),
    (lambda a, t: _swap(a, "--grid", "1,2,3,4"), "one to three whole numbers"),
    (lambda a, t: _swap(a, "--block", "x"), "one to three whole numbers"),
    (lambda a, t: a + ["--timeout", "0"], "--timeout 0"),
    (lambda a, t: a + ["--out", "3:o.bin"], "there are 3 buffers"),
    (lambda a, t: a + ["--out", "-1:o.bin"], "INDEX:FILE"),
    (lambda a, t: a + ["--out", "0:/dev/null"], "it is a character device"),
    (lambda a, t: a + ["--out", f"0:{t / 'o.bin'}", "--out", f"1:{t / '.' / 'o.bin'}"], "is named twice"),
    (lambda a, t: a + ["--out", f"0:{t / 'no-dir' / 'o.bin'}"], "does not exist"),
])
def test_refusals_come_before_the_device_is_touched(corpus, tmp_path: Path, change, says: str) -> None:
    _e, argv, _ = _fixture(corpus, tmp_path)
    r = run("--device", UNTOUCHED, "kernels", "exec", *change(argv, tmp_path))
    assert r.code == 2 and says in r.err, r.err


def test_a_foreign_code_object_and_a_non_elf_are_refused_before_the_device(corpus, tmp_path: Path) -> None:
    from tinyhw.kernels.manifest import prebuilt_dir

    _e, argv, _ = _fixture(corpus, tmp_path)
    other = next((prebuilt_dir() / "gfx1200").glob("pattern.*.elf"))
    r = run("--device", UNTOUCHED, "kernels", "exec", str(other), "--grid", "1", "--block", "32",
            "--buffer", "zeros:512")
    assert r.code == 2 and "built for gfx1200" in r.err, r.err
    junk = tmp_path / "junk.elf"
    junk.write_bytes(b"\x7fELF" + bytes(60))
    r = run("--device", UNTOUCHED, "kernels", "exec", str(junk), *argv[1:])
    assert r.code == 2 and r.err.startswith("error:"), r.err
    r = run("--device", UNTOUCHED, "kernels", "exec", str(tmp_path / "none.elf"), *argv[1:])
    assert r.code == 2 and "none.elf" in r.err, r.err


def test_out_never_replaces_a_fifo_or_a_symlink_and_writes_a_symlinks_target(booted: None, corpus,
                                                                               tmp_path: Path) -> None:
    e, argv, out_i = _fixture(corpus, tmp_path)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run("--device", UNTOUCHED, "kernels", "exec", *argv, "--out", f"{out_i}:{fifo}")
    assert r.code == 2 and "it is a fifo" in r.err.lower(), r.err
    link = tmp_path / "link.bin"
    link.symlink_to(fifo)
    r = run("--device", UNTOUCHED, "kernels", "exec", *argv, "--out", f"{out_i}:{link}")
    assert r.code == 2 and "symlink" in r.err, r.err
    target = tmp_path / "target.bin"
    target.write_bytes(b"old")
    link.unlink()
    link.symlink_to(target)
    r = run("--device", UNTOUCHED, "kernels", "exec", *argv, "--out", f"{out_i}:{link}")
    assert r.code == 2 and "exists" in r.err and "--force" in r.err, r.err  # the target exists: --force replaces it
    r = run("--device", "mock:navi31", "kernels", "exec", *argv, "--out", f"{out_i}:{link}", "--force")
    assert r.code == 0, r.err
    assert link.is_symlink() and os.readlink(link) == str(target)  # the link itself stays
    _meta, arrays = corpus
    assert corpushelp.compare_output(e, _got(e, target.read_bytes()), _expected(e, arrays))[0] != "FAIL"
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")]  # no temporary file left


def test_the_untouched_board_does_fail_when_touched(booted: None, corpus, tmp_path: Path) -> None:
    """The premise of the refusal tests: a command that reaches the board fails on it (exit 1, not 2)."""
    _e, argv, _ = _fixture(corpus, tmp_path)
    r = run("--device", UNTOUCHED, "kernels", "exec", *argv)
    assert r.code == 1 and "went away at register access 1" in r.err, r.err


def test_an_odd_sized_buffer_comes_back_whole(booted: None, corpus, tmp_path: Path) -> None:
    """A buffer of a size that is no multiple of 4 is uploaded padded and written back with exactly its bytes."""
    e, argv, out_i = _fixture(corpus, tmp_path)
    _meta, arrays = corpus
    at = argv.index("--buffer", argv.index("--buffer") + 1) + 1 if out_i == 0 else argv.index("--buffer") + 1
    odd = tmp_path / "odd.bin"
    odd.write_bytes(Path(argv[at]).read_bytes() + b"\x01\x02\x03")
    argv[at] = str(odd)
    index = sum(1 for a in argv[:at] if a == "--buffer") - 1
    r = run("--device", "mock:navi31", "kernels", "exec", *argv, "--out", f"{index}:{tmp_path / 'back.bin'}",
            "--out", f"{out_i}:{tmp_path / 'o.bin'}")
    assert r.code == 0, r.err
    assert (tmp_path / "back.bin").read_bytes() == odd.read_bytes()
    assert corpushelp.compare_output(e, _got(e, (tmp_path / "o.bin").read_bytes()), _expected(e, arrays))[0] != "FAIL"


def test_hidden_arguments_are_filled_as_the_spec_says() -> None:
    """§3.5: block counts, group sizes and grid dimensions where the metadata lists them; remainders and global
    offsets zero (HIP launches are whole workgroups); explicit pointers at their offsets."""
    import struct

    from tinyhw.boot.amd import compute
    from tinyhw.formats.amdgpu_code import KernelDescriptor
    from tinyhw.formats.amdgpu_meta import KernelArg, KernelMeta

    args = (KernelArg(0, 8, "global_buffer"), KernelArg(8, 8, "global_buffer"), KernelArg(16, 4, "by_value"),
            *(KernelArg(24 + 4 * i, 4, f"hidden_block_count_{a}") for i, a in enumerate("xyz")),
            *(KernelArg(36 + 2 * i, 2, f"hidden_group_size_{a}") for i, a in enumerate("xyz")),
            *(KernelArg(42 + 2 * i, 2, f"hidden_remainder_{a}") for i, a in enumerate("xyz")),
            *(KernelArg(64 + 8 * i, 8, f"hidden_global_offset_{a}") for i, a in enumerate("xyz")),
            KernelArg(88, 2, "hidden_grid_dims"))
    k = compute.Kernel("k", KernelDescriptor(0, 0, 280, 0, 0, 0, 0, 0x408), b"", 0, KernelMeta("k", 280, args))
    seg = compute.ComputeEngine.kernarg(None, k, [0x1000, 0x2000], (5, 3, 2), (7, 2, 1))  # type: ignore[arg-type]
    assert len(seg) >= 280
    assert struct.unpack_from("<QQI", seg, 0) == (0x1000, 0x2000, 0)
    assert struct.unpack_from("<III", seg, 24) == (5, 3, 2)
    assert struct.unpack_from("<HHH", seg, 36) == (7, 2, 1)
    assert struct.unpack_from("<HHH", seg, 42) == (0, 0, 0)
    assert struct.unpack_from("<QQQ", seg, 64) == (0, 0, 0)
    assert struct.unpack_from("<H", seg, 88) == (3,)


# -- a kernel with several outputs (tests/data/kernels-exec, made by make_multi_output.py) -----------------------
MULTI = DATA / "kernels-exec"


def test_a_kernel_with_three_outputs_writes_each_back(booted: None, tmp_path: Path) -> None:
    """a = x + 1, b = x * 2 (float32), c = int32(x): three output buffers, each written back by its own --out."""
    meta = json.loads((MULTI / "multi_output.json").read_text())
    n = meta["n"]
    x = (np.random.default_rng(23).standard_normal(n) * 100).astype(np.float32)
    (tmp_path / "x.bin").write_bytes(x.tobytes())
    bufs = {"a": f"zeros:{4 * n}", "b": f"zeros:{4 * n}", "c": f"zeros:{4 * n}", "x": str(tmp_path / "x.bin")}
    argv = [str(MULTI / "multi_output.elf"), "--kernel", meta["name"], "--grid", ",".join(map(str, meta["grid"])),
            "--block", ",".join(map(str, meta["block"]))]
    for name in meta["args"]:
        argv += ["--buffer", bufs[name]]
    outs = [a for i, name in enumerate(meta["args"]) if name != "x" for a in ("--out", f"{i}:{tmp_path / name}")]
    r = run("--device", "mock:navi31", "--json", "kernels", "exec", *argv, *outs)
    assert r.code == 0, r.err
    assert len(json.loads(r.out)["outputs"]) == 3
    got = {name: (tmp_path / name).read_bytes() for name in "abc"}
    assert got["a"] == (x + np.float32(1)).tobytes()
    assert got["b"] == (x * np.float32(2)).tobytes()
    assert got["c"] == x.astype(np.int32).tobytes()


def test_the_multi_output_fixture_recompiles_to_the_committed_bytes() -> None:
    need_libllvm()
    import importlib.util

    from tinyhw.kernels import seam

    meta = json.loads((MULTI / "multi_output.json").read_text())
    llvm = seam.find_libllvm()
    if llvm is None or llvm[1] != meta["libllvm"]:
        pytest.skip(f"the fixture was compiled with libLLVM {meta['libllvm']}, this machine has {llvm}")
    spec = importlib.util.spec_from_file_location("make_multi_output", MULTI / "make_multi_output.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    k = mod.compile_multi_output()
    assert k.pop("code") == (MULTI / "multi_output.elf").read_bytes()
    assert {key: k[key] for key in ("name", "grid", "block", "args", "n")} == \
        {key: meta[key] for key in ("name", "grid", "block", "args", "n")}


def test_zeros_takes_the_command_lines_size_units_and_refusals_are_one_line(tmp_path: Path) -> None:
    """``zeros:2k`` is 2048 bytes (sizes take k/m/g everywhere on the command line); a directory as the code object is
    tinyhw's one-line refusal; a zero time-out is not described as inside the allowed range."""
    from tinyhw.kernels.execute import plan_exec
    from tinyhw.kernels.manifest import prebuilt_dir

    elf = next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf"))
    plan = plan_exec(elf, kernel=None, grid="4", block="32", buffers=["zeros:2k"], outs=[])
    assert [len(b) for b in plan.buffers] == [2048]
    assert len(plan_exec(elf, kernel=None, grid="4", block="32", buffers=["zeros:0x800"], outs=[]).buffers[0]) == 2048
    r = run("--device", UNTOUCHED, "kernels", "exec", str(tmp_path), "--grid", "1", "--block", "32",
            "--buffer", "zeros:512")
    lines = r.err.strip().splitlines()
    assert r.code == 2 and len(lines) == 1 and "it is a directory" in lines[0], r.err
    r = run("--device", UNTOUCHED, "kernels", "exec", str(elf), "--grid", "1", "--block", "32", "--buffer",
            "zeros:512", "--timeout", "0")
    assert r.code == 2 and "more than 0" in r.err, r.err
