"""Fixtures shared by the emulator tests of every product."""

from __future__ import annotations

import pytest

from tinyhw.mocks.rdna3 import dispatch


@pytest.fixture
def lockstep_runs(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Whether each lockstep run of the shader core during the test was kept (True) or undone (False)."""
    seen: list[bool] = []
    orig = dispatch._Dispatch.lockstep

    def spy(self: dispatch._Dispatch, gids: list) -> bool:
        seen.append(orig(self, gids))
        return seen[-1]
    monkeypatch.setattr(dispatch._Dispatch, "lockstep", spy)
    return seen
