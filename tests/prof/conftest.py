"""Fixtures every prof test shares: instruction text from tinyhw's own decoder."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _own_decoder_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Instruction text from tinyhw's decoder, whatever llvm-objdump the machine has (a test may set its own)."""
    monkeypatch.setenv("TINYHW_LLVM_OBJDUMP", "none")
