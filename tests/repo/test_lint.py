"""ruff, with the rule set in pyproject.toml, finds nothing in the package, the tests and the benches.

The verdict must not depend on what else lies in the checkout (``pip install .`` leaves ``build/``), and the
lint and test tools are pinned exactly so a new release cannot fail a fresh install.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from testpaths import ROOT


def _ruff() -> str:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(ruff).exists(), "ruff is not installed: pip install -e '.[test]' (from the checkout)"
    return ruff


def _check(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_ruff(), "check", "--no-cache", "--output-format", "concise", "tinyhw", "tests", "bench"],
                          cwd=root, capture_output=True, text=True, check=False)


def test_ruff_is_clean() -> None:
    r = _check(ROOT)
    assert r.returncode == 0, r.stdout + r.stderr


def test_ruff_ignores_what_else_lies_in_the_checkout(tmp_path: Path) -> None:
    """A copy of the tree beside a build/ (as `pip install .` leaves it) and folders named like local helper
    modules lints exactly as clean as the checkout itself."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("tinyhw", "tests", "bench"):
        shutil.copytree(ROOT / name, tmp_path / name, ignore=ignore)
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    for extra in ("build/lib/tinyhw", "build/tinyhw", "qemu", "cachedirs", "flashhelp"):
        (tmp_path / extra).mkdir(parents=True)
        (tmp_path / extra / "__init__.py").write_text("")
    r = _check(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr


def test_lint_and_test_tools_are_pinned_exactly() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for req in extras["test"]:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+==[0-9][0-9A-Za-z.]*", req), f"test extra {req!r} is not an exact pin"
    assert {r.split("==")[0] for r in extras["test"]} >= {"ruff", "pytest", "hypothesis", "scapy", "labgrid"}
