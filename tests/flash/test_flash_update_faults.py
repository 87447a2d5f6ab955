"""The ``flash update`` fault sweep: every cut leaves a board that boots its old partition or its new one.

Cut points (faults of the emulated board, tinyhw.boards.options.FaultPlan): a power loss or a PSP that never
answers at DATA_TRANSFERs across the whole stream (first dword, item boundaries, inside the payload, the last
dword), a signature failure (0x0D), a failing sector write at every step of the PSP's commit (0x0C), a power
loss right after the commit, and a register access that times out on the host side. For each: tinyhw's error
says which partition the next boot selects (old, or unknown when the last answer was lost) and how to finish;
after ``mock power-cycle`` the emulated PSP boots A (old) or B (new), never nothing, and what tinyhw said holds;
then the way tinyhw names (rerun flash update) finishes the job.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from updatehelp import NEW, OLD, board_files, device

import tinyhw
from tinyhw.boards.navi31 import NAVI31
from tinyhw.flash.update import UpdateFailed, Updater, compare_after_update
from tinyhw.formats.ifwi_layout import resolve_item
from tinyhw.mocks.amd.board import power_cycle_flash
from tinyhw.mocks.amd.psp import ORDERS


def _dwords(order: str = "default") -> list[int]:
    """The DATA_TRANSFER number of the first dword of each item, and the total."""
    out, n = [], 0
    for v in ORDERS[order]:
        it = resolve_item(NEW, v & 0xFF)
        assert it.size is not None
        out.append(n + 1)
        n += it.size // 4
    return [*out, n]


STARTS = _dwords()
TOTAL = STARTS[-1]
PAYLOAD_START = STARTS[[v & 0xFF for v in ORDERS["default"]].index(0x08)]
#: sector writes of one commit of NEW (tinyhw.mocks.amd.pspupdate: ISH B blanked, payload, 17 items, ISH B, metadata)
COMMIT_WRITES = 20

CUTS = (
    [f"psp-disconnect@{k}" for k in (1, 2, STARTS[1], STARTS[1] + 1, STARTS[5], PAYLOAD_START, PAYLOAD_START + 500,
                                     TOTAL - 1, TOTAL)]
    + [f"psp-timeout@{k}" for k in (1, PAYLOAD_START + 7, TOTAL)]
    + ["psp-badsig"]
    + [f"psp-spi@{n}" for n in (1, 2, 3, 10, COMMIT_WRITES - 1, COMMIT_WRITES)]
    + ["psp-cut-commit"]
)


def _update(flash: Path, faults: str, board: str = "navi31") -> UpdateFailed | None:
    with tinyhw.open(device(flash, board, f"faults={faults}" if faults else "")) as o:
        try:
            Updater(o.transport, NEW, confirm=lambda plan: None).run()
        except UpdateFailed as e:
            return e
    return None


def _check(tmp_path: Path, faults: str, board: str = "navi31") -> tuple[str | None, str]:
    flash = board_files(tmp_path)
    assert power_cycle_flash(flash, spec=NAVI31)[0] == "A"  # a healthy board booted from A, PSP early
    err = _update(flash, faults, board)
    assert err is not None, f"{faults}: the update did not fail"
    assert err.outcome in ("old", "unknown") and err.exit_code == 1
    assert ("power-cycle" in err.hint or "power cycle" in err.hint) and "flash update" in err.hint
    booted, why = power_cycle_flash(flash, spec=NAVI31)
    assert booted in ("A", "B"), f"{faults}: nothing boots ({why})"
    data = flash.read_bytes()
    after = compare_after_update(data, NEW)
    if err.outcome == "old":
        assert "the next boot selects the old partition" in str(err)
        assert booted == "A", f"{faults}: tinyhw said the old partition, the board booted {booted} ({why})"
        assert data[0x20000:0x21000] == OLD[0x20000:0x21000]  # the old payload in A
    else:
        assert "verify" in err.hint and "--after-update" in err.hint
        assert after.match == (booted == "B")
    return booted, err.outcome


@pytest.mark.parametrize("faults", CUTS)
def test_every_cut_leaves_a_bootable_board(tmp_path: Path, faults: str) -> None:
    booted, outcome = _check(tmp_path, faults)
    # how to finish: on the old partition, flash update again; then the new one boots and verifies
    flash = tmp_path / "flash.bin"
    if booted == "A":
        assert _update(flash, "") is None
        assert power_cycle_flash(flash, spec=NAVI31)[0] == "B"
    assert compare_after_update(flash.read_bytes(), NEW).match


def test_the_sweep_is_at_least_twenty_cuts_and_reaches_both_outcomes(tmp_path: Path) -> None:
    assert len(CUTS) >= 20
    assert _check(tmp_path / "a", "psp-cut-commit") == ("B", "unknown")
    assert _check(tmp_path / "b", f"psp-spi@{COMMIT_WRITES}")[0] == "A"  # the cookie's own write fails: old


def test_commit_write_count_is_what_the_sweep_assumes(tmp_path: Path) -> None:
    flash = board_files(tmp_path)
    power_cycle_flash(flash, spec=NAVI31)
    assert _update(flash, f"psp-spi@{COMMIT_WRITES + 1}") is None  # one past the last write: no fault


def test_host_side_timeout_during_the_stream(tmp_path: Path) -> None:
    flash = board_files(tmp_path)
    power_cycle_flash(flash, spec=NAVI31)
    with tinyhw.open(device(flash)) as o:
        Updater(o.transport, NEW, confirm=lambda plan: None).run()
        n = o.transport.accesses
    assert _check(tmp_path / "t", f"timeout@{n // 2}")[0] == "A"


@pytest.mark.parametrize("faults", [f"psp-disconnect@{STARTS[3] + 1}", "psp-spi@2", "psp-cut-commit"])
def test_cuts_on_the_usb_board(tmp_path: Path, faults: str) -> None:
    _check(tmp_path, faults, "navi31-usb")
