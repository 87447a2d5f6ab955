"""The compile seam: importing tinygrad through tinyhw and compiling opens no PCI device, loads none of
tinygrad's drivers and writes nothing outside tinyhw's cache; the probes run on tinygrad's CPU device."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from clihelp import run
from kernelshelp import need_clang, need_libllvm, need_tinygrad
from testpaths import ROOT

AUDIT = textwrap.dedent('''
    import json, os, sys
    events = []
    def hook(ev, args):
        if ev == "open" and isinstance(args[0], (str, bytes)):
            path, mode, flags = args
            w = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT))
            events.append(["write" if w else "read", os.fsdecode(path)])
        elif ev == "sqlite3.connect":
            events.append(["write", str(args[0])])
        elif ev in ("os.mkdir", "os.rename", "os.remove", "os.rmdir", "shutil.rmtree", "os.chmod", "os.symlink"):
            events.append(["write", os.fsdecode(args[0])])
        elif ev in ("subprocess.Popen", "os.posix_spawn", "os.exec"):
            events.append(["spawn", os.fsdecode(args[0])])
        elif ev in ("socket.connect", "socket.bind", "mmap.__new__"):
            events.append([ev, repr(args)[:120]])
    out = sys.argv[1]
    sys.addaudithook(hook)
    from tinyhw.kernels import seam
    from tinyhw.kernels.probes import PROBES
    for t in sys.argv[2:]:
        for p in PROBES.values():
            if t in p.targets:
                seam.compile_probe(p, t)
    tg = seam.load()
    doc = {"events": list(events), "drivers": seam.loaded_driver_modules(), "dev": os.environ.get("DEV"),
           "parallel": os.environ.get("PARALLEL"), "cachedb": os.environ.get("CACHEDB"), "default": tg.Device.DEFAULT,
           "modules": sorted(m for m in sys.modules if m.startswith("tinygrad.runtime"))}
    with open(out, "w") as f:
        json.dump(doc, f)
''')


def test_import_and_compile_touch_nothing_but_the_cache(tmp_path: Path) -> None:
    need_clang()
    need_libllvm()
    home, cache = tmp_path / "home", tmp_path / "cache"
    env = {**os.environ, "HOME": str(home), "XDG_CACHE_HOME": str(cache), "DEV": "AMD", "PARALLEL": "8"}
    out = tmp_path / "audit.json"
    subprocess.run([sys.executable, "-c", AUDIT, str(out), "sm_90", "gfx1100", "cpu"], check=True, env=env,
                   cwd=ROOT, timeout=300)
    doc = json.loads(out.read_text())
    assert doc["drivers"] == [] and doc["default"] == "NULL"
    assert (doc["dev"], doc["parallel"]) == ("NULL", "0")  # the user's DEV=AMD never reaches tinygrad
    assert doc["cachedb"].startswith(str(cache / "tinyhw") + os.sep)
    assert not any(m.endswith(("ops_amd", "ops_nv", "ops_cuda", "ops_cpu", "system", "usb")) for m in doc["modules"])
    writes = [p for kind, p in doc["events"] if kind == "write"]
    assert writes, "the audit hook saw no write at all: the compile cache should have been opened"
    outside = [p for p in writes if not (p == str(cache) or p.startswith(str(cache / "tinyhw")))]
    assert outside == [], f"writes outside tinyhw's cache: {outside}"
    device_paths = [p for kind, p in doc["events"] if kind == "read" and
                    p.startswith(("/sys/bus/pci", "/sys/devices/pci", "/dev/vfio", "/dev/kfd", "/dev/dri",
                                  "/dev/nvidia", "/dev/bus/usb"))]
    assert device_paths == []
    assert {p for kind, p in doc["events"] if kind == "spawn"} <= {"clang"}  # the cpu target's compiler only
    assert [e for e in doc["events"] if e[0].startswith(("socket", "mmap"))] == []
    assert not home.exists()  # nothing under ~ (no ~/.cache/tinygrad)


def test_tinygrad_imported_first_is_refused(tmp_path: Path) -> None:
    need_tinygrad()
    code = ("import os; os.environ['DEV'] = 'CPU'; import tinygrad\n"
            "from tinyhw.kernels import seam\n"
            "try:\n    seam.load()\nexcept Exception as e:\n    print(type(e).__name__, e)\n")
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=60,
                         check=True)
    assert "EnvironmentProblem tinygrad was imported before tinyhw could pin it to the NULL device" in res.stdout


@pytest.mark.parametrize("name,n", [("pattern", 4096), ("bandwidth", 50_000), ("fma", 8192)])  # atomic: its own file
def test_probe_runs_on_the_cpu_and_passes(name: str, n: int) -> None:
    need_clang()
    r = run("--json", "kernels", "run", name, "--device", "cpu", "--n", str(n), "--repeats", "3")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["check"]["ok"] is True and doc["n"] == n and doc["device"] == "cpu"
    assert len(doc["seconds"]) == 3 and doc["best_s"] > 0
    if name == "pattern":
        assert doc["metric"] is None and doc["figure"] is None
    else:
        assert doc["figure"] > 0 and doc["peak"] is None and "numpy" in doc["peak_note"]


def test_run_human_output() -> None:
    need_clang()
    r = run("kernels", "run", "bandwidth", "--n", "8192", "-r", "2")
    assert r.code == 0, r.err
    assert "check: pass" in r.out and "GB/s" in r.out and "tinygrad 0.14.0" in r.out


def test_build_cpu_writes_binaries_and_manifest(tmp_path: Path) -> None:
    need_clang()
    r = run("--json", "kernels", "build", "--target", "cpu", "-o", str(tmp_path / "cpu"), "--probe", "pattern",
            "--show-isa")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    man = json.loads((tmp_path / "cpu" / "manifest.json").read_text())
    assert man == doc["manifest"] and man["target"] == "cpu" and [p["name"] for p in man["probes"]] == ["pattern"]
    k = man["probes"][0]["kernels"][0]
    assert (tmp_path / "cpu" / k["file"]).read_bytes()[:4] == b"\x7fELF"
    assert "void" in doc["isa"][k["file"]]  # the C source for cpu


def test_build_gfx_shows_rdna_isa(tmp_path: Path) -> None:
    need_libllvm()
    r = run("kernels", "build", "--target", "gfx1200", "-o", str(tmp_path), "--probe", "bandwidth", "--show-isa")
    assert r.code == 0, r.err
    assert "kernarg 16 B, lds 0 B, wave32" in r.out
    assert "global_load_b128" in r.out and "v_xor_b32" in r.out and "s_wait_loadcnt" in r.out  # RDNA4 spelling
    assert r.out.rstrip().splitlines()[-1].startswith("wrote 2 files")


def test_build_sm90_shows_ptx(tmp_path: Path) -> None:
    need_tinygrad()
    r = run("kernels", "build", "-t", "sm_90", "-o", str(tmp_path), "--probe", "pattern", "--show-isa")
    assert r.code == 0, r.err
    assert ".target sm_90" in r.out and "st.global" in r.out


def test_atomic_probe_on_gfx_uses_a_returning_global_atomic(tmp_path: Path) -> None:
    need_libllvm()
    r = run("kernels", "build", "--target", "gfx1100", "-o", str(tmp_path), "--probe", "atomic", "--show-isa")
    assert r.code == 0, r.err
    assert "global_atomic_add_u32" in r.out and "grid (4096, 1, 1) block (256, 1, 1)" in r.out


def test_atomic_probe_is_refused_for_sm90(tmp_path: Path) -> None:
    need_tinygrad()
    r = run("kernels", "build", "--target", "sm_90", "-o", str(tmp_path), "--probe", "atomic")
    assert r.code == 2 and "ptx renderer has no atomic operation" in r.err
    assert not tmp_path.joinpath("manifest.json").exists()
