"""Every command that writes a file the user names (``-o``/``--out``/``FILE``) follows one rule: an existing regular
file is refused (exit 2, one line naming it, the hint says ``--force``) unless ``--force``; a FIFO, device node or
socket is refused always, also behind a symlink; nothing is touched on the device first (the board faults on its
first register access) and the existing file keeps its bytes."""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from clihelp import run

from tinyhw.kernels.manifest import prebuilt_dir

#: a board whose first register access disconnects: exit 2 on it means nothing was touched
UNTOUCHED = "mock:navi31,faults=disconnect@1"
OLD = b"keep me\n"


def _pattern() -> str:
    return str(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")))


#: name -> (argv for output PATH, whether a --force flag exists)
COMMANDS: dict[str, Callable[[str], list[str]]] = {
    "flash dump": lambda p: ["--device", UNTOUCHED, "flash", "dump", p],
    "flash read -o": lambda p: ["--device", UNTOUCHED, "flash", "read", "0", "16", "-o", p],
    "am hang-report -o": lambda p: ["--device", UNTOUCHED, "am", "hang-report", "-o", p],
    "kernels exec --out": lambda p: ["--device", UNTOUCHED, "kernels", "exec", _pattern(), "--grid", "1", "--block",
                                     "32", "--buffer", "zeros:512", "--out", f"0:{p}"],
    "prof export -o": lambda p: ["prof", "export", "no-such-capture.pkl", "-o", p],
    "trace export mmiotrace -o": lambda p: ["trace", "export", "mmiotrace", "no-such.pcapng", "-o", p],
    "trace import mmiotrace -o": lambda p: ["trace", "import", "mmiotrace", "no-such.txt", "-o", p],
    "serve keygen --out": lambda p: ["serve", "keygen", "--out", p],
}


def _one_line(r, argv: list[str]) -> str:
    lines = r.err.splitlines()
    assert r.code == 2, (argv, r.code, r.err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, r.err)
    return lines[0]


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_an_existing_file_needs_force(name: str, tmp_path: Path) -> None:
    target = tmp_path / "existing.bin"
    target.write_bytes(OLD)
    argv = COMMANDS[name](str(target))
    line = _one_line(run(*argv), argv)
    assert "existing.bin" in line and "--force" in line, line
    assert target.read_bytes() == OLD


@pytest.mark.parametrize("name", sorted(COMMANDS))
@pytest.mark.parametrize("kind", ["fifo", "symlink to a fifo", "symlink to a device node", "socket"])
def test_special_files_are_refused_even_with_force(name: str, kind: str, tmp_path: Path) -> None:
    path = tmp_path / "special"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    held = None
    if kind == "fifo":
        path = fifo
    elif kind == "symlink to a fifo":
        path.symlink_to(fifo)
    elif kind == "symlink to a device node":
        path.symlink_to("/dev/null")
    else:
        held = socket.socket(socket.AF_UNIX)
        held.bind(str(path))
    try:
        argv = [*COMMANDS[name](str(path)), "--force"]
        _one_line(run(*argv), argv)
    finally:
        if held is not None:
            held.close()
    assert Path("/dev/null").is_char_device() and fifo.is_fifo()


def test_kernels_exec_replaces_an_existing_out_file_with_force(tmp_path: Path) -> None:
    """--force lets the plan through (the untouched board then fails when the run reaches it: exit 1, not 2)."""
    target = tmp_path / "existing.bin"
    target.write_bytes(OLD)
    r = run(*COMMANDS["kernels exec --out"](str(target)), "--force")
    assert r.code == 1 and "went away at register access 1" in r.err, r.err
    assert target.read_bytes() == OLD  # nothing is written when the run fails


def test_keygen_replaces_a_key_atomically_with_force(tmp_path: Path) -> None:
    key = tmp_path / "remote.key"
    assert run("serve", "keygen", "--out", str(key)).code == 0
    first, inode = key.read_bytes(), key.stat().st_ino
    assert run("serve", "keygen", "--out", str(key)).code == 2 and key.read_bytes() == first
    r = run("serve", "keygen", "--out", str(key), "--force")
    assert r.code == 0, r.err
    assert key.stat().st_ino != inode  # a new file renamed over the old one, never truncated in place
    assert key.read_bytes() != first and len(key.read_bytes()) == 65 and key.stat().st_mode & 0o777 == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["remote.key"]  # no temporary file left
