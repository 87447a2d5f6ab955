"""Where the tests find the repository, the tests folder and the vendored data, whatever folder a test is in."""

from __future__ import annotations

from pathlib import Path

#: the repository root (tests/helpers/testpaths.py is two folders below it)
ROOT = Path(__file__).resolve().parents[2]
#: tests/
TESTS = ROOT / "tests"
#: tests/data: vendored inputs (their licence and provenance beside them)
DATA = TESTS / "data"
#: tests/helpers: the shared helper modules, on sys.path through pyproject's pytest pythonpath
HELPERS = TESTS / "helpers"
