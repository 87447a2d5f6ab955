"""Test-wide settings: strict emulation everywhere, private cache, state, config and lock directories.

Nothing a test does lands in the user's own tinyhw folders (``~/.cache/tinyhw``, ``~/.local/state/tinyhw``,
``~/.config/tinyhw``): the whole session, subprocesses and module-scoped fixtures included, runs with
``XDG_CACHE_HOME``, ``XDG_STATE_HOME``, ``XDG_CONFIG_HOME`` and ``TINYHW_LOCK_DIR`` in a temporary folder, each
test with its own ones below that; only the documented caches (the fetched firmware, the guest builds) are
used where the user keeps them. At the end the session fails if any other file in those folders changed.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
import repoguard
from cachedirs import changes, pin_for_session, snapshot, user_dirs
from repoguard import install as guard_reads
from repoguard import reads_stay_in_repo  # noqa: F401  (autouse fixture: no reads outside the repository)

os.environ["TINYHW_STRICT"] = "1"
# The test hooks ($TINYHW_SYSFS, $TINYHW_PROCFS: fake trees) are ignored by a privileged process unless this
# test-only switch is set; CI runs the suite as root.
os.environ["TINYHW_TEST_HOOKS"] = "1"
# Virtual clocks in device mode: exact, reproducible figures (a test of the hybrid clock asks for it itself).
os.environ["TINYHW_CLOCK"] = "device"
# Every test gets a private XDG_CACHE_HOME (below); what setup-system.sh fetched into the user's cache
# (firmware) and the guest builds are found through paths resolved once, here, before that.
pin_for_session()
# The user's own tinyhw folders, as they are now (the documented caches aside), and a session-wide private
# home for everything that runs outside a test's own fixture (module fixtures, subprocesses, late threads).
USER_DIRS = user_dirs()
KEPT = [Path(os.environ["TINYHW_FIRMWARE_DIR"]), Path(os.environ["TINYHW_GUEST_CACHE"])]
BEFORE = snapshot(USER_DIRS, KEPT)
SESSION = Path(tempfile.mkdtemp(prefix="tinyhw-tests-"))
for _var, _sub in (("XDG_CACHE_HOME", "cache"), ("XDG_STATE_HOME", "state"), ("XDG_CONFIG_HOME", "config"),
                   ("TINYHW_LOCK_DIR", "locks")):
    os.environ[_var] = str(SESSION / _sub)
# From here on, opening or listing a path outside the repository and outside what it installs fails the
# test (tests/helpers/repoguard.py); the caches pinned just above are allowed.
guard_reads()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the session when a file in the user's tinyhw folders changed (the documented caches aside)."""
    policy, repoguard._policy = repoguard._policy, None  # the check itself reads the user's folders
    try:
        found = changes(BEFORE, snapshot(USER_DIRS, KEPT))
    finally:
        repoguard._policy = policy
    shutil.rmtree(SESSION, ignore_errors=True)
    if found:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        text = ("the tests changed the user's tinyhw folders (only the firmware and guest caches may be used):\n  "
                + "\n  ".join(found[:20]))
        if reporter is not None:
            reporter.write_line(text, red=True)
        else:
            print(text)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own cache dir (emulated flash file), state dir (flash journals) and lock dir; strict on."""
    base = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(base / "config"))
    monkeypatch.setenv("TINYHW_LOCK_DIR", str(base / "locks"))
    monkeypatch.setenv("TINYHW_STRICT", "1")
    monkeypatch.setenv("TINYHW_TEST_HOOKS", "1")
    monkeypatch.setenv("TINYHW_CLOCK", "device")
    monkeypatch.delenv("TINYHW_DEVICE", raising=False)


#: the tier of every test in a folder below tests/ (markers registered in pyproject.toml; docs/testing.md)
TIER_OF_FOLDER = {"guest": "guest", "usbguest": "guest", "farm": "farm", "peer": "peer"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with its folder's tier, so ``-m "not guest and not farm and not slow and not peer"`` is the
    fast tier."""
    tests = Path(__file__).resolve().parent
    for item in items:
        try:
            folder = item.path.resolve().relative_to(tests).parts[0]
        except ValueError:
            continue
        tier = TIER_OF_FOLDER.get(folder)
        if tier is not None:
            item.add_marker(tier)
