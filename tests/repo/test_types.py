"""mypy, with the [tool.mypy] section of pyproject.toml, finds no type error in the packages it names.

The section lists the packages (at least transport, boards, formats, regs, the engines and the tools); what they
import is followed silently, so the run takes seconds. The cache lives in a temporary folder: a stale cache of
another checkout never hides an error, and the run writes nothing into the repository.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from testpaths import ROOT

CHECKED = ("tinyhw/transport", "tinyhw/boards", "tinyhw/formats", "tinyhw/regs", "tinyhw/boot", "tinyhw/flash",
           "tinyhw/firmware", "tinyhw/probe", "tinyhw/bench", "tinyhw/kernels", "tinyhw/prof", "tinyhw/trace",
           "tinyhw/connect")


def _config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]


def test_mypy_checks_at_least_the_seams() -> None:
    files = _config()["files"]
    assert set(CHECKED) <= set(files), f"[tool.mypy] files must include {CHECKED}"


def test_mypy_is_clean(tmp_path: Path) -> None:
    pytest.importorskip("mypy", reason="mypy is not installed: pip install -e '.[test]'")
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"),
                        "--cache-dir", str(tmp_path / "mypy-cache"), "--no-error-summary", "--show-error-codes"],
                       cwd=ROOT, capture_output=True, text=True, check=False, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
