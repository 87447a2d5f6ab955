"""ruff, with the rule set in pyproject.toml, finds nothing in the package, the tests and the benches."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    assert Path(ruff).exists(), "ruff is not installed: pip install -e '.[test]'"
    r = subprocess.run([ruff, "check", "--output-format", "concise", "tinyhw", "tests", "bench"],
                       cwd=ROOT, capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
