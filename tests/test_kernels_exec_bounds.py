"""`kernels exec` and buffers too small for the kernel: what is refused before the device (exit 2), and a kernel
that writes past every buffer it was given faulting on the emulated board (exit 1, one line naming the address and
the buffer) instead of the run succeeding silently.

The kernel is the committed pattern probe (gfx1100, 4 floats per work-item: 16 bytes each, 512 bytes per 32-item
workgroup), so its reach is known: grid G writes G x 512 bytes from the start of buffer 0.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from amfake import boot_emulated_board
from clihelp import run

from tinyhw.kernels.manifest import prebuilt_dir

UNTOUCHED = "mock:navi31,faults=disconnect@1"


def _pattern() -> str:
    return str(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")))


def _exec(device: str, grid: int, *args: str):
    return run("--device", device, "kernels", "exec", _pattern(), "--grid", str(grid), "--block", "32", *args)


@pytest.mark.parametrize("args,says", [
    (["--buffer", "zeros:0"], "zeros:N takes 1 .."),
    (["--buffer", "zeros:0k"], "zeros:N takes 1 .."),
    (["--buffer", "zeros:121m"], "what the board's compute region holds"),
    (["--buffer", "zeros:64", "--out", "1:o.bin"], "there are 1 buffers (0 .. 0)"),
    (["--buffer", "zeros:64", "--out", "x:o.bin"], "INDEX:FILE"),
])
def test_bad_sizes_and_indices_are_refused_before_the_device(args: list[str], says: str) -> None:
    r = _exec(UNTOUCHED, 1, *args)
    assert r.code == 2 and says in r.err and len(r.err.splitlines()) == 1, r.err


def test_an_empty_buffer_file_is_refused(tmp_path: Path) -> None:
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    r = _exec(UNTOUCHED, 1, "--buffer", str(empty))
    assert r.code == 2 and "the file is empty" in r.err, r.err


def test_zeros_takes_the_command_lines_units() -> None:
    r = _exec(UNTOUCHED, 1, "--buffer", "zeros:4KiB")
    assert r.code == 1 and "went away at register access 1" in r.err, r.err  # accepted: the run reached the board


def test_a_kernel_writing_past_every_buffer_faults_with_one_line(tmp_path: Path) -> None:
    device = f"mock:navi31,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    exact = tmp_path / "exact.bin"
    r = _exec(device, 8, "--buffer", "zeros:4096", "--out", f"0:{exact}")  # 8 x 512 = 4096 bytes: fits exactly
    assert r.code == 0, r.err
    assert exact.stat().st_size == 4096 and exact.read_bytes() != bytes(4096)
    out = tmp_path / "o.bin"
    r = _exec(device, 16, "--buffer", "zeros:4096", "--out", f"0:{out}")  # 8192 bytes into a 4096-byte buffer
    assert r.code == 1, r.err
    lines = r.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: the kernel wrote at 0x"), r.err
    assert re.search(r"past the end of buffer 0 \(0x[0-9a-f]+ \.\. 0x[0-9a-f]+, 4096 bytes\)", lines[0]), r.err
    addr = int(re.search(r"wrote at (0x[0-9a-f]+)", lines[0]).group(1), 16)
    start, last = (int(x, 16) for x in re.search(r"\((0x[0-9a-f]+) \.\. (0x[0-9a-f]+),", lines[0]).groups())
    assert last - start + 1 == 4096 and addr == last + 1  # the first page past the buffer
    assert not out.exists()  # a failed run writes nothing
    r = run("--device", device, "--json", "am", "status")
    assert json.loads(r.out)["groups"]["vm"][0]["value"] != 0  # the fault is latched, as on hardware
