"""Shared helpers of the ``flash update`` tests: small IFWI images, a board with one on its flash, the PSP models.

The images are the emulated board's synthetic image with a 4 KiB payload slot (so a whole IFWI streams in a
fraction of a second) and a "new" one whose payloads differ, re-signed with the emulator's invented signature
(what a vendor's signing does to a changed payload).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tinyhw.boards.navi31 import NAVI31
from tinyhw.mocks.amd import board as board_mod
from tinyhw.mocks.amd import boardstate, ifwi_image
from tinyhw.mocks.amd.psp import PspMailbox

SLOT = 0x1000
OLD = ifwi_image.with_slot_size(ifwi_image.build_image(board=NAVI31), SLOT)


def _new() -> bytes:
    img = bytearray(OLD)
    for base in (ifwi_image.PAYLOAD_A, ifwi_image.PAYLOAD_B):
        img[base + 0x100:base + 0x200] = ifwi_image.prng("a newer firmware", 0x100)
    return ifwi_image.sign(bytes(img))


NEW = _new()


def board_files(tmp_path: Path, image: bytes = OLD) -> Path:
    """A flash file holding ``image`` (the board's current firmware), in ``tmp_path``."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    flash = tmp_path / "flash.bin"
    flash.write_bytes(image)
    return flash


def device(flash: Path, board: str = "navi31", extra: str = "") -> str:
    """The device string of the emulated board on ``flash`` (strict, instant flash timing)."""
    return f"mock:{board},flash={flash},strict,timing=instant" + (f",{extra}" if extra else "")


def last_command(flash: Path) -> dict[str, int]:
    """The emulator's counters of the last command on ``flash`` (the board state file)."""
    return boardstate.load(flash).get("last_command", {})


@pytest.fixture
def mailboxes(monkeypatch: pytest.MonkeyPatch) -> list[PspMailbox]:
    """Every PSP mailbox model built during the test (its command log is the witness of what was sent)."""
    made: list[PspMailbox] = []
    real = board_mod.PspMailbox

    def build(*args: Any, **kw: Any) -> PspMailbox:
        m = real(*args, **kw)
        made.append(m)
        return m

    monkeypatch.setattr(board_mod, "PspMailbox", build)
    return made
