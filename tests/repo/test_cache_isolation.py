"""The test session writes nothing into the user's tinyhw folders: module-scoped fixtures and subprocesses run
with a session-private XDG cache/state/config, and the session fails if a file there changed anyway."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from testpaths import TESTS

EARLY_WRITERS = '''
import os
import subprocess
import sys

import pytest

SAVE = "from tinyhw.boot.nv import record; record.save('mock:ad102', {'x': 1})"


@pytest.fixture(scope="module")
def early():
    # runs before the per-test fixture gives the test its private folders
    exec(SAVE)
    subprocess.run([sys.executable, "-c", SAVE], check=True)


def test_uses_the_early_fixture(early):
    assert True
'''

STRAY = '''
import os
from pathlib import Path


def test_writes_into_the_users_cache():
    p = Path(os.environ["STRAY_TARGET"])
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("x")
'''


def _suite(tmp_path: Path, body: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run ``body`` as a test file under a copy of tests/conftest.py, HOME an empty folder, no XDG variables."""
    suite, home = tmp_path / "suite", tmp_path / "home"
    suite.mkdir()
    home.mkdir()
    (suite / "conftest.py").write_text((TESTS / "conftest.py").read_text())
    (suite / "test_body.py").write_text(textwrap.dedent(body))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "TINYHW_", "PYTEST_"))}
    env.update(HOME=str(home), PYTHONPATH=os.pathsep.join([str(TESTS / "helpers"), str(TESTS.parent)]),
               TINYHW_FIRMWARE_DIR=str(tmp_path / "fw"), TINYHW_GUEST_CACHE=str(tmp_path / "guest"),
               STRAY_TARGET=str(home / ".cache" / "tinyhw" / "stray.bin"))
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rA", str(suite)],
                       cwd=suite, env=env, capture_output=True, text=True, check=False, timeout=300)
    return r, home


def test_module_fixtures_and_subprocesses_write_no_user_folder(tmp_path: Path) -> None:
    r, home = _suite(tmp_path, EARLY_WRITERS)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []


def test_a_write_into_the_users_cache_fails_the_session(tmp_path: Path) -> None:
    r, _ = _suite(tmp_path, STRAY)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "the tests changed the user's tinyhw folders" in r.stdout and "new " in r.stdout, r.stdout
    assert "stray.bin" in r.stdout
