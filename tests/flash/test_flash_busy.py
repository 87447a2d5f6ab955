"""A flash chip found busy: the driver waits for WIP to clear before it trusts a read or sends a write command
(specs/navi31-spi-flash.md §c.3 WIP/WEL, §c.5 "while WIP=1 only RDSR and suspend are accepted", §c.6, §d.4).

A GD25 busy with a program or erase ignores every command but RDSR (and reads return FF): a read taken
then looks erased, and a WREN/PP/SE sent then is dropped while WEL, still set by the running operation,
makes the write-enable check pass. These tests leave an operation running on the emulated chip, as a run
that lost its host mid-erase leaves it on a board that kept its power (the usb gadget tier's unbind), and
check that nothing is read or programmed until it has finished.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.flash import FlashDevice
from tinyhw.flash.writer import Job, Writer
from tinyhw.mocks.amd.direct import DirectTransport
from tinyhw.mocks.amd.ifwi_image import build_image

IMAGE = build_image(board=NAVI31)
SECTOR = 482  # erased in the synthetic image, as in the usb tier's resume test
PATTERN = bytes((SECTOR + i) & 0xFF for i in range(0x1000))


@pytest.fixture
def board(tmp_path: Path):
    t = DirectTransport(Navi31Options.from_options({"flash": str(tmp_path / "flash.bin"), "timing": "typical"}),
                        spec=NAVI31)
    yield t
    t.close()


def start_on_chip(t: DirectTransport, command: bytes) -> None:
    """Start a program/erase on the emulated chip itself (WREN + the command), as another run would have."""
    chip = t.board.chip
    chip.transaction(b"\x06", 0)
    chip.transaction(command, 0)
    assert chip.busy


def se(sector: int) -> bytes:
    return bytes([0x20]) + (sector * 0x1000).to_bytes(3, "big")


def test_write_enable_waits_for_an_operation_still_running(board: DirectTransport) -> None:
    """WEL is still set by the running erase, so WEL alone would pass the check and the PP be dropped."""
    addr = SECTOR * 0x1000 + 0xB00
    with FlashDevice(board) as dev:
        start_on_chip(board, se(SECTOR + 1))  # an erase the driver does not know of (45 ms typical)
        dev.chip.program_page(addr, PATTERN[0xB00:0xC00], sector=SECTOR)
        assert not board.board.chip.busy
        assert dev.chip.read(addr, 256) == PATTERN[0xB00:0xC00]
    assert ("pp", addr, 256) in board.board.chip.events


def test_an_erase_left_running_is_finished_before_the_flash_is_read(board: DirectTransport) -> None:
    """Open while a sector holding data is being erased: identify waits, so the first read sees the result."""
    with FlashDevice(board) as dev:
        dev.chip.program_page(SECTOR * 0x1000, PATTERN[:256], sector=SECTOR)
    start_on_chip(board, se(SECTOR))
    with FlashDevice(board) as dev:
        assert not board.board.chip.busy
        assert dev.chip.read(SECTOR * 0x1000, 0x1000) == b"\xff" * 0x1000


def test_a_write_after_a_run_left_an_erase_running_ends_with_the_image(board: DirectTransport, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The resume case: sector 482 was programmed with other data, its erase is still running when the next
    run opens the board; the write must end with the image, and nothing is programmed before the erase ends."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with FlashDevice(board) as dev:
        for off in range(0, 0x1000, 256):
            dev.chip.program_page(SECTOR * 0x1000 + off, bytes([0x5A]) * 256, sector=SECTOR)
    start_on_chip(board, se(SECTOR))
    image = bytearray(IMAGE)
    image[SECTOR * 0x1000:(SECTOR + 1) * 0x1000] = PATTERN
    job = Job(kind="write", image=bytes(image), start_sector=SECTOR, sector_count=1, no_backup=True,
              device="test")
    with FlashDevice(board) as dev:
        result = Writer(dev, job, confirm=lambda plan: None).run()
        assert dev.chip.read(SECTOR * 0x1000, 0x1000) == PATTERN
    assert result.sectors_changed == 1
    assert (tmp_path / "flash.bin").read_bytes() == bytes(image)
