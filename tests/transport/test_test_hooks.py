"""The test hooks $TINYHW_SYSFS and $TINYHW_PROCFS (pci/sysfs.py) never reach a privileged run: as root (or
set-uid) they are ignored unless the test-only switch $TINYHW_TEST_HOOKS=1 is set (tests/conftest.py sets it)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tinyhw.pci import sysfs


@pytest.fixture
def hooks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TINYHW_SYSFS", str(tmp_path / "sys"))
    monkeypatch.setenv("TINYHW_PROCFS", str(tmp_path / "proc"))
    return tmp_path


def test_root_ignores_the_hooks_without_the_switch(hooks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What `sudo -E tinyhw ...` with the hooks in the environment gets: the real /sys and /proc."""
    monkeypatch.delenv("TINYHW_TEST_HOOKS")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert sysfs.sysfs_root() == "/sys" and sysfs.procfs_root() == "/proc"
    monkeypatch.setenv("TINYHW_TEST_HOOKS", "yes")  # only "1" switches them on
    assert sysfs.sysfs_root() == "/sys"


def test_a_setuid_run_ignores_the_hooks_too(hooks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TINYHW_TEST_HOOKS")
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    assert sysfs.sysfs_root() == "/sys" and sysfs.procfs_root() == "/proc"


def test_the_switch_or_an_unprivileged_user_honours_them(hooks: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(os, "getuid", lambda: 0)
    assert sysfs.sysfs_root() == str(hooks / "sys") and sysfs.procfs_root() == str(hooks / "proc")  # switch set
    monkeypatch.delenv("TINYHW_TEST_HOOKS")
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(os, "getuid", lambda: 1000)
    assert sysfs.sysfs_root() == str(hooks / "sys") and sysfs.procfs_root() == str(hooks / "proc")
