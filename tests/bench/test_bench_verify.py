"""``bench copy`` checks engine copies through an independent path, and picks its path itself (issue 20 items 1, 11).

The sabotages are the emulated SDMA engine's injectable copy faults (``sdma=nop|skip-in|skip-out|shift1m``,
tinyhw/mocks/amd/sdma.py): each must fail the run (exit 1) naming the first differing offset, on the dma path
(``mock:navi31``) and on the sram path (``mock:navi31-usb``), at a size checked whole (4K) and at one checked in
windows (256K + 1028: not a multiple of the stride or the window).
"""

from __future__ import annotations

import json
import re

import pytest
from clihelp import run

import tinyhw
from tinyhw.bench import bench_copy, choose_path
from tinyhw.bench.copy import MAX_WINDOWS, Independent

BOARDS = [("navi31", "dma"), ("navi31-usb", "sram")]
DST = 128 << 20
SAMPLED = (256 << 10) + 1028


def _boot(device: str) -> None:
    from amfake import FW_DIR

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware not extracted in {FW_DIR}: run bash tests/setup-system.sh", pytrace=False)
    r = run("--device", device, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    assert r.code == 0, r.err


def _failure(r) -> tuple[int, str]:
    """(first differing offset, how it was seen) of a failed run's one error line."""
    assert r.code == 1, (r.code, r.out, r.err)
    (line,) = [x for x in r.err.splitlines() if x.startswith("error: ")]
    m = re.search(r"came back wrong at offset 0x([0-9a-f]+) \(([^)]*\)?)\)", line)
    assert m, line
    return int(m.group(1), 16), m.group(2)


# which (fault, direction, size) each check must catch, and where the first wrong byte is: the destination's
# first byte (poisoned through bar0 / the staging memory poisoned), or the first byte after the first window
# (skip-in: the window was written through bar0, the rest by the copy-in that moved nothing)
CAUGHT = [
    ("nop", "h2d", 4096, 0, "read back through bar0 vram aperture"),
    ("nop", "d2h", 4096, 0, "written through bar0 vram aperture, copied out"),
    ("nop", "h2d", SAMPLED, 0, "read back through bar0 vram aperture"),
    ("nop", "d2h", SAMPLED, 0, "written through bar0 vram aperture, copied out"),
    ("skip-in", "h2d", 4096, 0, "read back through bar0 vram aperture"),
    ("skip-in", "h2d", SAMPLED, 0, "read back through bar0 vram aperture"),
    ("skip-in", "d2h", SAMPLED, 512, "written through bar0 vram aperture, copied out"),
    ("skip-out", "d2h", 4096, 0, "written through bar0 vram aperture, copied out"),
    ("skip-out", "d2h", SAMPLED, 0, "written through bar0 vram aperture, copied out"),
    ("shift1m", "h2d", 4096, 0, "read back through bar0 vram aperture"),
    ("shift1m", "d2h", 4096, 0, "written through bar0 vram aperture, copied out"),
    ("shift1m", "h2d", SAMPLED, 0, "read back through bar0 vram aperture"),
    ("shift1m", "d2h", SAMPLED, 0, "written through bar0 vram aperture, copied out"),
]


@pytest.mark.slow
@pytest.mark.parametrize("board, path", BOARDS)
def test_every_engine_sabotage_fails_with_the_first_differing_offset(board: str, path: str) -> None:
    """A copy engine that does nothing, a skipped direction, an address 1 MiB off: exit 1, offset named. Each
    direction alone (--direction), so neither direction's check leans on the other's."""
    _boot(f"mock:{board}")
    for fault, direction, size, at, how in CAUGHT:
        r = run("--device", f"mock:{board},sdma={fault}", "bench", "copy", "--path", path, "--sizes", str(size),
                "--repeat", "1", "--direction", direction)
        assert _failure(r) == (DST + at, how), (fault, direction, size, r.err)
    # skip-out seen from a copy-in: its own read-back through the path (the staging memory was poisoned)
    r = run("--device", f"mock:{board},sdma=skip-out", "bench", "copy", "--sizes", "4K", "--repeat", "1",
            "--direction", "h2d")
    offset, how = _failure(r)
    assert offset == DST and how.startswith("read back through ") and "bar0" not in how
    assert "0xa5, expected" in r.err  # the poison came back, not the bytes the host had handed the path


@pytest.mark.parametrize("board, path", BOARDS)
def test_a_healthy_engine_passes_and_rows_say_what_was_checked_independently(board: str, path: str) -> None:
    _boot(f"mock:{board}")
    r = run("--device", f"mock:{board}", "--json", "bench", "copy", "--sizes", f"4K,{SAMPLED}", "--repeat", "2")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    windows = Independent("", bytes, print).windows(SAMPLED)
    for x in rows:
        assert x["path_name"] == path and x["path_auto"] is True and x["verified_by"] == "bar0 vram aperture"
        assert x["verified"] == 2 * x["size"]  # every byte compared (through the path's own read-back, too)
        want = x["size"] if x["size"] == 4096 else sum(n for _, n in windows)
        assert x["verified_independent"] == 2 * want


def test_a_skipped_copy_out_of_one_small_copy_is_caught_on_the_sram_path() -> None:
    """The issue's case: `--sizes 4K --repeat 1` passed with copy-out moving nothing (the SRAM still held the
    copied-in chunk). Now the source is written through bar0 and the SRAM poisoned first."""
    _boot("mock:navi31-usb")
    r = run("--device", "mock:navi31-usb,sdma=skip-out", "bench", "copy", "--path", "sram", "--sizes", "4K",
            "--repeat", "1")
    assert _failure(r)[0] == DST  # the h2d row's read-back through the path already sees the poisoned sram
    r = run("--device", "mock:navi31-usb,sdma=skip-out", "bench", "copy", "--path", "sram", "--sizes", "4K",
            "--repeat", "1", "--direction", "d2h")
    assert _failure(r) == (DST, "written through bar0 vram aperture, copied out") and "d2h copy of 4096" in r.err


def test_windows_cover_first_last_and_every_stride_without_overlap() -> None:
    check = Independent("x", bytes, print)
    assert check.windows(4096) == [(0, 4096)] and check.windows(64 << 10) == [(0, 64 << 10)]
    for size in (SAMPLED, 16 << 20, 1 << 30):
        wins = check.windows(size)
        assert wins[0][0] == 0 and sum(wins[-1]) == size  # the first and the last bytes
        assert all(s % 4 == 0 and n % 4 == 0 and 512 <= n <= 1024 and s >= 0 and s + n <= size for s, n in wins)
        assert all(a[0] + a[1] < b[0] for a, b in zip(wins, wins[1:], strict=False))  # apart, touching ones merged
        assert len(wins) <= MAX_WINDOWS + 2
        stride = max(check.stride, -(-size // MAX_WINDOWS // 4096) * 4096)
        assert {s // stride for s, _ in wins} == set(range(-(-size // stride)))  # one in every stride
    assert check.windows(16 << 20) == check.windows(16 << 20)  # deterministic


@pytest.mark.parametrize("board, path", BOARDS)
def test_auto_picks_the_engine_path_after_boot_and_bar_before(board: str, path: str) -> None:
    r = run("--device", f"mock:{board}", "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 0, r.err
    assert {(x["path_name"], x["path_auto"]) for x in json.loads(r.out)["results"]} == {("bar", True)}
    assert "--path auto: bar (no " in r.err and "am boot" not in r.out
    _boot(f"mock:{board}")
    r = run("--device", f"mock:{board}", "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 0, r.err
    assert {(x["path_name"], x["path_auto"]) for x in json.loads(r.out)["results"]} == {(path, True)}
    human = run("--device", f"mock:{board}", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert human.code == 0
    title = human.out.splitlines()[0]
    assert title.startswith("bench copy through ") and f"[--path {path} (auto)]" in title
    # --bar names the bar path; an explicit --path is never second-guessed
    r = run("--device", f"mock:{board}", "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1", "--bar", "0")
    assert r.code == 0 and {x["path_name"] for x in json.loads(r.out)["results"]} == {"bar"}
    r = run("--device", f"mock:{board}", "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1", "--path", "bar")
    assert r.code == 0 and {(x["path_name"], x["path_auto"]) for x in json.loads(r.out)["results"]} == {("bar", False)}


def test_python_gets_the_same_choice_in_one_call() -> None:
    with tinyhw.open("mock:navi31-usb") as dev:
        assert choose_path(dev.transport)[0] == "bar"
    _boot("mock:navi31-usb")
    with tinyhw.open("mock:navi31-usb") as dev:
        assert choose_path(dev.transport)[0] == "sram"
        rows = bench_copy(dev.transport, [4096], repeat=1)
    assert [(r.direction, r.path_name, r.path_auto, r.verified_by) for r in rows] == [
        ("h2d", "sram", True, "bar0 vram aperture"), ("d2h", "sram", True, "bar0 vram aperture")]


def test_shift_fault_lands_1m_off_in_the_emulator() -> None:
    """The fault itself, seen from the emulator's VRAM (not the driver's view)."""
    import os

    from tinyhw.boot.amd.dmacopy import open_dma_copier

    _boot("mock:navi31")
    data = os.urandom(4096)
    with tinyhw.open("mock:navi31,sdma=shift1m") as dev:
        copier = open_dma_copier(dev.transport)
        copier.copy_in(DST, data)
        assert dev.transport.board.vram.read(DST + (1 << 20), 4096) == data
        assert dev.transport.board.vram.read(DST, 4096) != data
        assert copier.copy_out(DST, 4096) == data  # shifted both ways: the engine path alone cannot tell
        assert dev.transport.board.sdma.counters()["faulted_copies"] == 2


def test_a_bad_sdma_option_is_refused() -> None:
    r = run("--device", "mock:navi31,sdma=sideways", "bench", "copy", "--sizes", "4K")
    assert r.code == 2 and "sdma=sideways" in r.err and "shift1m" in r.err


def test_the_sram_path_refuses_the_copy_engines_own_memory() -> None:
    """The sram path writes VRAM like the dma path: the page tables, rings and boot region are refused (exit 2)."""
    _boot("mock:navi31-usb")
    r = run("--device", "mock:navi31-usb", "bench", "copy", "--path", "sram", "--offset", "0x100000", "--sizes", "4K")
    assert r.code == 2 and "overlaps memory the running gpu uses" in r.err and r.out == ""
