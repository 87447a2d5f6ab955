"""Strict emulation: an access the model does not cover is an error; without strict it is listed at the end."""

from __future__ import annotations

import pytest
from clihelp import run

UNMODELLED = "smuio.SMUIO_MP_RESET_INTR"  # a real register of the database that the Navi31 model does not cover


@pytest.mark.parametrize("board", ["mock:navi31", "mock:navi31-usb"])
def test_strict_mode_refuses_unmodelled_registers(board: str) -> None:
    r = run("--device", board, "reg", "read", UNMODELLED)
    assert r.code == 1
    assert r.err == "error: read of bar5 offset 0x5a304 is not covered by the navi31 emulator; " \
                    "run without strict to list such accesses instead\n"


@pytest.mark.parametrize("board", ["mock:navi31", "mock:navi31-usb"])
def test_non_strict_mode_lists_unmodelled_accesses(board: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHW_STRICT", "0")
    r = run("--device", board, "reg", "read", UNMODELLED)
    assert r.code == 0, r.err
    assert "the emulated board does not model 1 access(es)" in r.err
    assert "0x" in r.err.split("does not model", 1)[1]
