"""Test-wide settings: strict emulation everywhere, private cache and lock directories."""

from __future__ import annotations

import os

import pytest
from cachedirs import pin_for_session
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
# From here on, opening or listing a path outside the repository and outside what it installs fails the
# test (tests/repoguard.py); the caches pinned just above are allowed.
guard_reads()


@pytest.fixture(autouse=True)
def _isolated_state(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own cache dir (emulated flash file), state dir (flash journals) and lock dir; strict on."""
    base = tmp_path_factory.mktemp("state")
    monkeypatch.setenv("XDG_CACHE_HOME", str(base / "cache"))
    monkeypatch.setenv("XDG_STATE_HOME", str(base / "state"))
    monkeypatch.setenv("TINYHW_LOCK_DIR", str(base / "locks"))
    monkeypatch.setenv("TINYHW_STRICT", "1")
    monkeypatch.setenv("TINYHW_TEST_HOOKS", "1")
    monkeypatch.setenv("TINYHW_CLOCK", "device")
    monkeypatch.delenv("TINYHW_DEVICE", raising=False)
