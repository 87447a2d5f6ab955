"""`kernels exec` and buffers too small for the kernel: what is refused before the device (exit 2), and a kernel
that writes past every buffer it was given faulting on the emulated board (exit 1, one line naming the address and
the buffer) instead of the run succeeding silently.

The kernels are committed probes (gfx1100, 4 dwords per work-item: 16 bytes each, 512 bytes per 32-item workgroup),
so their reach is known: grid G of the pattern probe writes G x 512 bytes from the start of buffer 0; the bandwidth
probe reads as much from buffer 1 and writes it to buffer 0.
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


def _exec(device: str, grid: int, *args: str, kernel: str = "pattern"):
    elf = str(next((prebuilt_dir() / "gfx1100").glob(f"{kernel}.*.elf")))
    return run("--device", device, "kernels", "exec", elf, "--grid", str(grid), "--block", "32", *args)


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


def test_a_kernel_writing_into_the_next_buffer_or_within_the_last_page_faults(tmp_path: Path) -> None:
    """Every buffer ends at its last page's end and has an unmapped page after it: running past buffer 0 into the
    guard before buffer 1 faults naming both, and so does an overrun of 1 KiB by a 1 KiB buffer (which before
    stayed inside its own page and passed silently)."""
    device = f"mock:navi31,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    # the streaming copy: out (buffer 0) = in (buffer 1) ^ 0x5a5a5a5a, 512 bytes of each per workgroup
    r = _exec(device, 16, "--buffer", "zeros:4096", "--buffer", "zeros:8192", kernel="bandwidth")
    assert r.code == 1 and len(r.err.splitlines()) == 1, r.err
    assert re.search(r"past the end of buffer 0 \(0x[0-9a-f]+ \.\. 0x[0-9a-f]+, 4096 bytes\), in the guard page "
                     r"before buffer 1 \(from 0x[0-9a-f]+\): nothing is mapped there", r.err), r.err
    addr = int(re.search(r"wrote at (0x[0-9a-f]+)", r.err).group(1), 16)
    last, nxt = (int(x, 16) for x in re.search(r"\.\. (0x[0-9a-f]+), 4096 bytes.*from (0x[0-9a-f]+)", r.err).groups())
    assert addr == last + 1 and nxt == addr + 4096  # the guard is the one page between them
    run("--device", device, "am", "reset", "--yes")
    boot_emulated_board(device)
    fits = tmp_path / "fits.bin"
    r = _exec(device, 2, "--buffer", "zeros:1024", "--out", f"0:{fits}")  # 2 x 512 bytes: exactly the buffer
    assert r.code == 0, r.err
    assert fits.read_bytes() != bytes(1024)
    r = _exec(device, 4, "--buffer", "zeros:1024")  # 2048 bytes into a 1024-byte buffer
    assert r.code == 1 and "past the end of buffer 0" in r.err and "the last of the 1 buffer(s)" in r.err, r.err


def test_buffer_layout_ends_each_buffer_at_a_page_end_with_a_guard_after_it() -> None:
    from tinyhw.boot.amd.compute import BUFFER_ALIGN, BUFFERS, PAGE, REGION_SIZE, buffer_layout
    from tinyhw.errors import Refused

    sizes = [4096, 100, 0, 5000, 256, 1 << 20, 3]
    layout = buffer_layout(sizes)
    prev_end = None
    for n, (off, lo, hi) in zip(sizes, layout, strict=True):
        size = max(4, -(-n // 4) * 4)
        assert off % BUFFER_ALIGN == 0 and lo % PAGE == 0 and hi % PAGE == 0
        assert lo <= off and off + size <= hi and hi - (off + size) < BUFFER_ALIGN  # at the end, within the slack
        assert hi - lo == -(-size // PAGE) * PAGE  # no more pages than it needs
        assert lo == (BUFFERS if prev_end is None else prev_end + PAGE)  # one unmapped page between neighbours
        prev_end = hi
    assert buffer_layout([REGION_SIZE - BUFFERS])[0][2] == REGION_SIZE
    from tinyhw.kernels.execute import MAX_BUFFERS, MAX_TOTAL  # what `kernels exec` lets through always fits
    each = MAX_TOTAL // MAX_BUFFERS - 1  # the most pages and slack each: one byte short of a page multiple
    assert buffer_layout([each] * MAX_BUFFERS)[-1][2] <= REGION_SIZE
    with pytest.raises(Refused, match="buffer 1 .* does not fit"):
        buffer_layout([REGION_SIZE - BUFFERS - PAGE, 1])


def test_an_overrun_is_caught_where_faulting_accesses_go_to_the_default_page(tmp_path: Path) -> None:
    """With GCVM_L2_PROTECTION_FAULT_CNTL's *_ENABLE_DEFAULT bits on (a hub left so by its last driver), faulting
    stores go to the dummy page and the dispatch finishes, fence and all: the fault is still found (the status is
    read once more after the fence) and named, from Python and from the command line."""
    import tinyhw
    from tinyhw.boot.amd import compute
    from tinyhw.boot.amd.copyengine import fields
    from tinyhw.errors import OperationFailed

    device = f"mock:navi31,flash={tmp_path / 'flash.bin'}"
    boot_emulated_board(device)
    cntl = "gc.GCVM_L2_PROTECTION_FAULT_CNTL"
    with tinyhw.open(device) as o:
        eng = compute.open_compute(o.transport)
        g = eng.gpu
        g.wr(cntl, fields(g, cntl, RANGE_PROTECTION_FAULT_ENABLE_DEFAULT=1, PDE0_PROTECTION_FAULT_ENABLE_DEFAULT=1,
                          VALID_PROTECTION_FAULT_ENABLE_DEFAULT=1))
        try:
            kernel = compute.load_code_object(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")).read_bytes())
            with pytest.raises(OperationFailed, match=r"wrote at 0x[0-9a-f]+000 \(gpu vm fault on that page\), past "
                                                      r"the end of buffer 0 .*, 4096 bytes\), the last of the 1"):
                eng.run(kernel, (16,), (32,), [bytes(4096)])
            assert eng.fence() == eng.seq  # the dispatch completed: only the check after the fence saw the fault
        finally:
            eng.close()
    run("--device", device, "am", "reset", "--yes")
    boot_emulated_board(device)
    with tinyhw.open(device) as o:
        g = compute.check_booted(o.transport)
        g.wr(cntl, fields(g, cntl, VALID_PROTECTION_FAULT_ENABLE_DEFAULT=1, PDE0_PROTECTION_FAULT_ENABLE_DEFAULT=1))
    r = _exec(device, 16, "--buffer", "zeros:4096", "--buffer", "zeros:8192", kernel="bandwidth")
    assert r.code == 1 and "past the end of buffer 0" in r.err and "in the guard page before buffer 1" in r.err, r.err
