"""Fixtures every flash test shares: its own state folder under ``tmp_path`` and ``tmp_path`` as the working folder.

Journals and backups land in ``tmp_path / "state" / "tinyhw"`` (flashhelp reads them there), and a command that
writes a file the user names relative to the working folder writes it under ``tmp_path``.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """State under ``tmp_path / "state"``, working folder ``tmp_path``."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)
