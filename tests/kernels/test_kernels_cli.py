"""``tinyhw kernels`` without a compiler: list, help, laziness, and the exit-3 answers when tinygrad is
missing or the wrong version (run in a child process so this process's tinygrad state does not matter)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from clihelp import run
from testpaths import ROOT

CHILD = """
import json, sys
from importlib import metadata
fake = sys.argv[1]
real = metadata.version
def version(name):
    if name == "tinygrad":
        if fake == "missing":
            raise metadata.PackageNotFoundError(name)
        return fake
    return real(name)
metadata.version = version
from tinyhw.cli import main
try:
    main(sys.argv[2:])
finally:
    print(json.dumps(sorted(m for m in sys.modules if m.split(".")[0] == "tinygrad")), file=sys.stderr)
"""


def child(fake: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "TINYHW_DEVICE"}
    return subprocess.run([sys.executable, "-c", CHILD, fake, *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=120, check=False)


def test_list_shows_every_probe_and_the_committed_targets() -> None:
    r = run("--json", "kernels", "list")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [p["name"] for p in doc["probes"]] == ["pattern", "bandwidth", "fma", "atomic"]
    assert doc["prebuilt_targets"] == ["sm_90", "gfx1100", "gfx1200"]
    r = run("kernels", "list")
    assert r.code == 0 and r.out.count("out[i]") >= 3  # brackets survive rich markup


def test_list_and_cuda_runs_never_import_tinygrad() -> None:
    res = child("0.14.0", "kernels", "list")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stderr.strip().splitlines()[-1]) == []
    res = child("0.14.0", "kernels", "run", "fma", "--device", "cuda:0")  # no cuda-bindings or no driver here
    assert res.returncode == 3
    assert json.loads(res.stderr.strip().splitlines()[-1]) == []


def test_missing_tinygrad_is_exit_3_with_the_install_hint() -> None:
    res = child("missing", "kernels", "run", "bandwidth", "--device", "cpu")
    assert res.returncode == 3
    assert res.stderr.startswith("error: tinygrad is not installed")
    assert "pip install -e '.[compile]'" in res.stderr and "checkout" in res.stderr
    res = child("missing", "kernels", "build", "--target", "sm_90")
    assert res.returncode == 3 and "tinygrad is not installed" in res.stderr


def test_other_tinygrad_version_is_refused() -> None:
    res = child("0.13.0", "kernels", "build", "--target", "sm_90", "-o", "/nonexistent/never-written")
    assert res.returncode == 3
    assert "tinygrad 0.13.0 is installed; tinyhw's compile seam is written for 0.14.0" in res.stderr
    assert json.loads(res.stderr.strip().splitlines()[-1]) == []  # refused before importing it


def test_help_has_examples() -> None:
    for cmd in (["kernels"], ["kernels", "list"], ["kernels", "build"], ["kernels", "run"]):
        r = run(*cmd, "--help")
        assert r.code == 0 and "Examples:" in r.out and "tinyhw kernels" in r.out


def test_bad_usage_is_exit_2() -> None:
    assert run("kernels", "build", "--target", "gfx950").code == 2
    r = run("kernels", "run", "nope", "--device", "cpu")
    assert r.code == 2 and "unknown probe kernel 'nope'" in r.err


def test_build_output_never_replaces_a_fifo_and_writes_nothing_then(tmp_path) -> None:
    """kernels build writes through tinyhw.fileio: every name is checked before any file is written."""
    import os

    import pytest as _pytest

    from tinyhw.errors import Refused
    from tinyhw.kernels.manifest import write_build

    os.mkfifo(tmp_path / "manifest.json")
    with _pytest.raises(Refused, match="fifo"):
        write_build(tmp_path, {"format": 1}, {"a.elf": b"\x7fELF"})
    assert not (tmp_path / "a.elf").exists()
    (tmp_path / "manifest.json").unlink()
    (tmp_path / "a.elf").write_bytes(b"old")  # not a build folder: an existing file needs force
    with _pytest.raises(Refused, match=r"a\.elf exists; refusing to overwrite it") as refused:
        write_build(tmp_path, {"format": 1}, {"a.elf": b"new"})
    assert "--force" in (refused.value.hint or "") and (tmp_path / "a.elf").read_bytes() == b"old"
    assert not (tmp_path / "manifest.json").exists()
    written = write_build(tmp_path, {"format": 1}, {"a.elf": b"new"}, force=True)
    assert (tmp_path / "a.elf").read_bytes() == b"new" and len(written) == 2
    written = write_build(tmp_path, {"format": 1}, {"a.elf": b"newer"})  # an earlier build's files are replaced
    assert (tmp_path / "a.elf").read_bytes() == b"newer" and len(written) == 2
    with _pytest.raises(Refused, match="it is not a directory"):  # the folder named is a file
        write_build(tmp_path / "a.elf", {"format": 1}, {"b.elf": b"x"})
    fresh = tmp_path / "new" / "dir"
    assert len(write_build(fresh, {"format": 1}, {"b.elf": b"x"})) == 2 and (fresh / "b.elf").read_bytes() == b"x"
