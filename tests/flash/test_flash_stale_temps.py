"""A SIGKILLed ``flash write`` leaves the temporary file of the journal it was saving (``.flash-write-*.tmp``) in
the state directory; the next flash command removes it once its process is gone, and leaves a live writer's alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from clihelp import run
from flashhelp import dev as mockdev

from tinyhw.fileio import remove_stale_temps

KILLED_WRITER = """
import sys, time
from tinyhw.fileio import atomic_write
from tinyhw.flash.journal import journal_path, write_key

def chunks():
    yield b"{"
    print("writing", flush=True)
    time.sleep(60)  # killed here: the temporary file is on disk, the journal not yet renamed into place
    yield b"}"

path = journal_path(write_key("ab" * 32))
path.parent.mkdir(parents=True, exist_ok=True)
atomic_write(path, chunks())
"""


def _temps(state: Path) -> list[Path]:
    return sorted(state.glob(".flash-write-*.tmp"))


def test_the_next_run_removes_what_a_killed_flash_write_left(tmp_path: Path) -> None:
    state = Path(os.environ["XDG_STATE_HOME"]) / "tinyhw"
    p = subprocess.Popen([sys.executable, "-c", KILLED_WRITER], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline() == "writing\n"
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    finally:
        p.kill()
    left = _temps(state)
    assert len(left) == 1 and f".{p.pid}." in left[0].name
    live = state / f".flash-write-{'cd' * 32}.json.{os.getpid()}.abcd1234.tmp"  # a writer still at work: this one
    live.write_bytes(b"{")
    other = state / ".unrelated.12345678.abcd1234.tmp"
    other.write_bytes(b"")
    r = run("--device", mockdev(tmp_path), "flash", "erase", "--resume", "--yes")
    assert r.code == 2 and "no interrupted erase" in r.err, (r.code, r.err)  # nothing to resume; swept first
    assert _temps(state) == [live] and other.exists()


def test_links_and_other_kinds_are_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "precious"
    target.write_bytes(b"x")
    (tmp_path / ".flash-write-x.json.999999999.abcd1234.tmp").symlink_to(target)
    (tmp_path / ".flash-write-y.json.999999998.abcd1234.tmp").mkdir()
    gone = tmp_path / ".flash-write-z.json.999999997.abcd1234.tmp"
    gone.write_bytes(b"{")
    assert remove_stale_temps(tmp_path, "flash-") == [gone]
    assert target.read_bytes() == b"x" and (tmp_path / ".flash-write-y.json.999999998.abcd1234.tmp").is_dir()
