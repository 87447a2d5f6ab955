"""The emulated Navi31's ``flash=FILE`` option: a missing file in an existing directory becomes a fresh factory
image (a note on stderr; ``Opened.notes`` from Python), a missing directory is a one-line refusal (a typo must not
grow a new tree of files), and anything but a regular file (also behind a symlink) is refused, exit 2."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from clihelp import run

import tinyhw
from tinyhw.errors import Refused

NOTE = "did not exist: it now holds a fresh factory image"


@pytest.mark.parametrize("board", ["mock:navi31", "mock:navi31-usb"])
def test_a_missing_file_is_created_with_a_note(board: str, tmp_path: Path) -> None:
    flash = tmp_path / "board.bin"
    r = run("--device", f"{board},flash={flash}", "probe")
    assert r.code == 0, r.err
    notes = [line for line in r.err.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: the emulated flash file {flash} {NOTE}"], r.err
    assert flash.stat().st_size == 2 << 20
    r = run("--device", f"{board},flash={flash}", "probe")
    assert r.code == 0 and NOTE not in r.err  # the second open finds it


def test_a_library_caller_reads_the_note_instead_of_a_print(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    flash = tmp_path / "board.bin"
    with tinyhw.open(f"mock:navi31,flash={flash}") as dev:
        assert dev.notes() == [f"the emulated flash file {flash} {NOTE}"]
    assert capsys.readouterr() == ("", "")
    with tinyhw.open(f"mock:navi31,flash={flash}") as dev:
        assert dev.notes() == []


@pytest.mark.parametrize("board", ["mock:navi31", "mock:navi31-usb"])
def test_a_missing_directory_is_refused(board: str, tmp_path: Path) -> None:
    flash = tmp_path / "no-such-dir" / "board.bin"
    r = run("--device", f"{board},flash={flash}", "probe")
    assert r.code == 2 and r.out == "", r.err
    assert r.err.splitlines() == [f"error: cannot create the emulated flash file {flash}: the directory "
                                  f"{flash.parent} does not exist; create it first or pick another file with "
                                  "flash=FILE"]
    assert not flash.parent.exists()
    with pytest.raises(Refused, match="does not exist"):
        tinyhw.open(f"{board},flash={flash}")


@pytest.mark.parametrize("kind", ["fifo", "device node", "socket", "directory", "symlink to a fifo",
                                  "symlink to a device node"])
def test_anything_but_a_regular_file_is_refused(kind: str, tmp_path: Path) -> None:
    path = tmp_path / "special"
    held = None
    if kind in ("fifo", "symlink to a fifo"):
        os.mkfifo(tmp_path / "fifo")
        path = tmp_path / "fifo" if kind == "fifo" else path
        if kind == "symlink to a fifo":
            path.symlink_to(tmp_path / "fifo")
    elif kind == "device node":
        path = Path("/dev/zero")
    elif kind == "symlink to a device node":
        path.symlink_to("/dev/zero")
    elif kind == "socket":
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(path))
    else:
        path.mkdir()
    try:
        r = run("--device", f"mock:navi31,flash={path}", "probe")
    finally:
        if held is not None:
            held.close()
    assert r.code == 2 and r.out == "", r.err
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the emulated flash file ") and "not a regular file" in \
        lines[0], r.err


def test_a_dangling_symlink_creates_its_target(tmp_path: Path) -> None:
    link = tmp_path / "link.bin"
    link.symlink_to(tmp_path / "target.bin")
    r = run("--device", f"mock:navi31,flash={link}", "probe")
    assert r.code == 0 and NOTE in r.err, r.err
    assert link.is_symlink() and (tmp_path / "target.bin").stat().st_size == 2 << 20


def test_the_default_file_still_grows_its_cache_directory() -> None:
    """Without flash=, the shared default file in the user's cache is created with its directories, quietly (the
    first use of any emulated board)."""
    from tinyhw.boards.navi31 import default_flash_path

    assert not default_flash_path().parent.exists()
    r = run("--device", "mock:navi31", "probe")
    assert r.code == 0, r.err
    assert default_flash_path().stat().st_size == 2 << 20 and NOTE not in r.err
