"""The committed probe binaries: manifests agree with the files, AMD ELFs pass tinyhw's own ELF checks, PTX
names what the manifest says, and a fresh build with tinygrad 0.14.0 reproduces every byte."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from kernelshelp import need_libllvm
from testpaths import ROOT

from tinyhw.kernels.manifest import FORMAT, GPU_TARGETS, check_amd_binary, load_manifest, prebuilt_dir
from tinyhw.kernels.probes import PROBES


def kernels_of(target: str):
    man = load_manifest(prebuilt_dir() / target)
    for p in man["probes"]:
        for k in p["kernels"]:
            yield man, p, k


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_manifest_matches_files(target: str) -> None:
    folder = prebuilt_dir() / target
    man = load_manifest(folder)
    assert man["format"] == FORMAT and man["target"] == target and man["tinygrad"] == "0.14.0"
    assert [p["name"] for p in man["probes"]] == [n for n, p in PROBES.items() if target in p.targets]
    listed = {"manifest.json"}
    for _, p, k in kernels_of(target):
        data = (folder / k["file"]).read_bytes()
        listed.add(k["file"])
        assert hashlib.sha256(data).hexdigest() == k["binary_sha256"] and len(data) == k["binary_bytes"]
        assert len(data) < 32 * 1024
        bufs = {b["name"]: b for b in p["buffers"]}
        assert [a["buffer"] for a in k["args"]] and all(a["buffer"] in bufs for a in k["args"])
        # every element is covered: groups x threads x the elements one thread handles (tinygrad's upcast)
        threads = k["grid"][0] * k["grid"][1] * k["grid"][2] * k["block"][0] * k["block"][1] * k["block"][2]
        assert p["n"] == PROBES[p["name"]].gpu_n and p["n"] % threads == 0 and p["n"] // threads in (1, 4, 16)
    assert {f.name for f in folder.iterdir()} == listed


@pytest.mark.parametrize("target", ["gfx1100", "gfx1200"])
def test_amd_binaries_pass_tinyhw_elf_checks(target: str) -> None:
    for _, _, k in kernels_of(target):
        doc, problems = check_amd_binary((prebuilt_dir() / target / k["file"]).read_bytes(), target, k["name"],
                                         len(k["args"]))
        assert problems == []
        assert doc == k["amdgpu"]
        assert doc["kernarg_size"] == 8 * len(k["args"]) and doc["wave32"] and doc["lds_bytes"] == 0


def test_amd_check_reports_a_mismatch() -> None:
    _, _, k = next(kernels_of("gfx1100"))
    data = (prebuilt_dir() / "gfx1100" / k["file"]).read_bytes()
    _, problems = check_amd_binary(data, "gfx1200", k["name"], len(k["args"]) + 1)
    assert any("generation is gfx1100, expected gfx1200" in p for p in problems)
    assert any("kernarg size" in p for p in problems)
    assert check_amd_binary(data, "gfx1100", "nope", 1)[1] == ["no kernel descriptor nope.kd"]


def test_ptx_names_the_entries_and_parameters() -> None:
    for _, _, k in kernels_of("sm_90"):
        ptx = (prebuilt_dir() / "sm_90" / k["file"]).read_text()
        assert ".target sm_90" in ptx and re.search(r"\.version \d+\.\d+", ptx)
        entry = re.search(r"\.visible \.entry (\w+)\s*\(([^)]*)\)", ptx)
        assert entry and entry.group(1) == k["name"]
        assert entry.group(2).count(".param .u64") == len(k["args"])


def test_regenerated_binaries_equal_the_committed_ones(tmp_path: Path) -> None:
    """Same pin, fresh compile cache: every target's binaries and manifest come out byte for byte."""
    need_libllvm()
    from tinyhw.kernels.seam import find_libllvm

    major = load_manifest(prebuilt_dir() / "gfx1100")["libllvm"]
    assert load_manifest(prebuilt_dir() / "gfx1200")["libllvm"] == major
    lib = find_libllvm(major)
    if lib is None:
        pytest.fail(f"the committed gfx binaries were built with libLLVM {major}, which is not installed "
                    f"(apt-get install libllvm{major})")
    script = (
        "import sys\nfrom pathlib import Path\nfrom tinyhw.kernels.manifest import GPU_TARGETS, build_target, "
        "write_build\nfor t in GPU_TARGETS:\n    man, files, _ = build_target(t)\n"
        "    write_build(Path(sys.argv[1]) / t, man, files)\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "TINYHW_LIBLLVM": lib[0]}
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "out")], check=True, env=env, cwd=ROOT,
                   timeout=300)
    for target in GPU_TARGETS:
        fresh, committed = tmp_path / "out" / target, prebuilt_dir() / target
        names = sorted(f.name for f in committed.iterdir())
        assert sorted(f.name for f in fresh.iterdir()) == names, f"{target}: different files"
        for name in names:
            assert (fresh / name).read_bytes() == (committed / name).read_bytes(), (
                f"{target}/{name} differs from a fresh build: regenerate with "
                f"tinyhw kernels build --target {target} -o tinyhw/kernels/prebuilt/{target}")
    assert json.loads((tmp_path / "out" / "sm_90" / "manifest.json").read_text())["tinygrad"] == "0.14.0"
