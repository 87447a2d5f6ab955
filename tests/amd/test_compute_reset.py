"""``am reset`` tears the compute queue down before the mode-1 reset: a never-ending shader (run through the exact
``kernels exec`` interface) hangs the queue, the command's own drain cannot finish it, the queue outlives the
command (the emulated board keeps it in its state file, as hardware does), the next ``kernels run`` refuses to
drain it forever (a clear timeout naming ``am reset``), ``am reset`` dequeues it with RESET_WAVES and then resets,
and after ``am boot`` the next ``kernels run`` passes. Sabotages: an emulated CP whose dequeue does nothing
(``am reset`` stops with the dequeue timeout), a driver that skips the teardown (the reset's document and the CP's
count show no dequeue)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from amfake import FW_DIR
from clihelp import run
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot.amd import compute
from tinyhw.formats.amdgpu_code import parse_amdgpu_code
from tinyhw.kernels.manifest import prebuilt_dir
from tinyhw.mocks.amd import cp as mock_cp

PATTERN = next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf"))
S_BRANCH_SELF = 0xBFA0FFFF  # s_branch -1: a branch to itself (amd-compute.md §5, SOPP)


@pytest.fixture
def booted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mock_cp, "WATCHDOG", 2000)  # a never-ending wave is declared hung after 2000 instructions
    am_boot()


def spin_object(folder: Path) -> Path:
    """The pattern probe's code object with its first instruction replaced by a branch to itself."""
    data = bytearray(PATTERN.read_bytes())
    text = parse_amdgpu_code(bytes(data)).elf.section(".text")
    entry = compute.load_code_object(bytes(data)).entry
    struct.pack_into("<I", data, text.offset + entry, S_BRANCH_SELF)
    path = folder / "spin.elf"
    path.write_bytes(bytes(data))
    return path


def _hang(tmp_path: Path) -> None:
    out = tmp_path / "o.bin"
    old = tmp_path / "old.bin"
    old.write_bytes(b"kept")
    r = run("--device", "mock:navi31", "kernels", "exec", str(spin_object(tmp_path)), "--grid", "1", "--block", "32",
            "--buffer", "zeros:4096", "--out", f"0:{out}", "--out", f"0:{old}", "--force", "--timeout", "0.2")
    assert r.code == 1, r.err
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "the dispatch did not complete in 0.2 s" in errors[0] and "CP_BUSY" in errors[0], r.err
    assert not out.exists() and old.read_bytes() == b"kept"  # nothing written when the run fails


def test_am_reset_dequeues_a_hung_queue_and_the_next_run_works(booted: None, tmp_path: Path) -> None:
    _hang(tmp_path)
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "256", "--timeout", "1")
    assert r.code == 1 and "the compute queue did not dequeue in 1 s" in r.err and "am reset" in r.err, r.err
    r = run("--device", "mock:navi31", "--json", "am", "reset", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["compute_queue"] == {"me": 1, "pipe": 0, "queue": 0, "checked": True, "was_active": True,
                                    "dequeued": True}, doc
    assert run("--device", "mock:navi31", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR)).code == 0
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "256")
    assert r.code == 0 and "check: pass" in r.out, r.err


def test_am_reset_says_it_dequeued(booted: None, tmp_path: Path) -> None:
    _hang(tmp_path)
    r = run("--device", "mock:navi31", "am", "reset", "--yes")
    assert r.code == 0 and r.out.startswith("compute queue me1 pipe0 queue0 dequeued; mode-1 reset"), r.out
    r = run("--device", "mock:navi31", "--json", "am", "reset", "--yes")  # nothing left to dequeue (not booted)
    assert r.code == 0 and json.loads(r.out)["compute_queue"]["dequeued"] is False


def test_the_reset_dequeues_before_it_resets(booted: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The CP sees RESET_WAVES on the hung queue before the mode-1 reset powers it back on."""
    _hang(tmp_path)
    seen: list[str] = []
    real_dequeue, real_power_on = mock_cp.CommandProcessor.dequeue, mock_cp.CommandProcessor.power_on

    def dequeue(self, q, request=mock_cp.DRAIN_PIPE):  # type: ignore[no-untyped-def]
        seen.append(f"dequeue {request} hung={q.hung}")
        real_dequeue(self, q, request)

    def power_on(self):  # type: ignore[no-untyped-def]
        seen.append("power on")
        real_power_on(self)

    monkeypatch.setattr(mock_cp.CommandProcessor, "dequeue", dequeue)
    monkeypatch.setattr(mock_cp.CommandProcessor, "power_on", power_on)
    assert run("--device", "mock:navi31", "am", "reset", "--yes").code == 0
    assert seen == ["power on", f"dequeue {mock_cp.RESET_WAVES} hung=True", "power on"], seen  # open, dequeue, reset


def test_a_queue_that_does_not_dequeue_stops_am_reset(booted: None, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    _hang(tmp_path)
    monkeypatch.setattr(mock_cp.CommandProcessor, "dequeue", lambda self, q, request=1: None)  # the CP ignores it
    r = run("--device", "mock:navi31", "am", "reset", "--yes")
    assert r.code == 1, r.err
    assert "the compute queue did not dequeue in 1 s (CP_HQD_DEQUEUE_REQUEST RESET_WAVES; " in r.err, r.err
    assert "CP_HQD_ACTIVE.ACTIVE=1" in r.err and "the gpu was not reset" in r.err
    with tinyhw.open("mock:navi31,strict") as o:  # the gpu was not reset: still booted, the queue still hung
        assert o.transport.board.cp.status()[0]["hung"] and not o.transport.board.resets
