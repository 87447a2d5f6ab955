"""``tinyhw flash psp-status`` end to end on both emulated boards (specs/navi31-spi-flash.md §e.1-§e.4, §h.5).

The PSP model's command log is the witness of what was sent: each board built during a test is
captured (its mailbox configured by the test first, for the P2/P5 modes the device string has no
option for), so a test can check the order of the commands, that nothing was sent when the mailbox
was not ready, and that no transfer command ever goes out.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from clihelp import run
from flashhelp import dev

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import OperationFailed
from tinyhw.flash import psp
from tinyhw.mocks.amd import board as board_mod
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.psp import PspMailbox
from tinyhw.regs import asic

R = flash_registers(asic("navi31"))  # the emulated Navi31's flash-side offsets

BOARDS = ["navi31", "navi31-usb"]
PROBE = [0x01, 0x06, 0x0B, 0x07]
TRANSFER_COMMANDS = {0x08, 0x09, 0x0A, 0x02, 0x03, 0x04}


@pytest.fixture
def models(monkeypatch: pytest.MonkeyPatch) -> tuple[list[PspMailbox], dict[str, Any]]:
    """Every PSP model built during the test, and config overrides applied to each before it powers on."""
    made: list[PspMailbox] = []
    overrides: dict[str, Any] = {}
    real = board_mod.PspMailbox

    def build(layout: Any, clock: Any, state: str, config: Any, **more: Any) -> PspMailbox:
        for k, v in overrides.items():
            setattr(config, k, v)
        m = real(layout, clock, state, config, **more)
        made.append(m)
        return m

    monkeypatch.setattr(board_mod, "PspMailbox", build)
    return made, overrides


def probe_json(tmp_path: Path, board: str, extra: str = "") -> tuple[Any, dict]:
    r = run("--device", dev(tmp_path, board, extra), "--json", "--stats", "flash", "psp-status")
    assert r.code == 0, r.err
    return r, json.loads(r.out)


def test_help_has_an_example() -> None:
    r = run("flash", "psp-status", "--help")
    assert r.code == 0 and "Example" in r.out and "GET_TRANSFER_TYPE" in r.out


# -- the four board states ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("board", BOARDS)
def test_early_boot_probe_decodes_the_transfer_type(tmp_path: Path, board: str, models: tuple) -> None:
    r, doc = probe_json(tmp_path, board, "psp=early")
    assert [c["command"] for c in doc["commands"]] == PROBE
    assert [c["name"] for c in doc["commands"]] == ["GET_BOOT_PARTITION", "GET_FB_STATE", "SPI_GET_MODEL_ID",
                                                    "GET_TRANSFER_TYPE"]
    assert all(c["status"] == 0 and c["status_name"] == "success" for c in doc["commands"])
    boot, fb, model, tt = doc["commands"]
    assert model["response"] == 0x001560C8 and model["decoded"] is None  # raw only: the format is unknown
    assert boot["decoded"] is None and fb["decoded"] is None
    assert tt["response"] == 0x101
    assert tt["decoded"] == {"item": 0x01, "item_name": "ifwi header", "phase": 1, "phase_meaning": None}
    assert tt["command_register"] == R.PSP_READY | 0x07 << 16
    assert doc["gated"] is False and doc["warnings"] == [] and doc["ready_before"] is True
    assert list(doc) == ["location", "command_register_before", "ready_before", "commands", "gated", "warnings"]
    assert all(list(c) == ["command", "name", "status", "status_name", "response", "command_register", "decoded"]
               for c in doc["commands"])
    assert "warning" not in r.err
    (m,) = models[0]
    assert [c for c, *_ in m.log] == PROBE and m.payloads == [] and m.aborted == []
    assert [resp for *_, resp in m.log] == [c["response"] for c in doc["commands"]]


@pytest.mark.parametrize("board", BOARDS)
@pytest.mark.parametrize("state", ["sos", "gated"])
def test_gated_mailbox_warns_and_still_shows_raw_values(tmp_path: Path, board: str, state: str, models: tuple) -> None:
    r, doc = probe_json(tmp_path, board, f"psp={state}")
    assert doc["gated"] is True and len(doc["warnings"]) == 1
    assert [(c["status"], c["status_name"]) for c in doc["commands"]] == [(0x0A, "partition update error")] * 4
    assert all(c["decoded"] is None for c in doc["commands"])  # a failed GET_TRANSFER_TYPE is not decoded
    assert "warning: the psp early-boot mailbox is gated" in r.err and "driver" in r.err and "sos" in r.err
    assert [c for c, *_ in models[0][0].log] == PROBE
    r = run("--device", dev(tmp_path, board, f"psp={state}"), "flash", "psp-status")
    assert r.code == 0 and "gated" in r.out and "partition update error" in r.out and "0x000a" in r.out
    assert "warning:" in r.err


@pytest.mark.parametrize("board", BOARDS)
def test_stalled_boot_loader_reports_the_status_by_name(tmp_path: Path, board: str) -> None:
    r, doc = probe_json(tmp_path, board, "psp=pbl")
    tt = doc["commands"][3]
    assert (tt["status"], tt["status_name"], tt["decoded"]) == (0x10, "state machine not initialised", None)
    assert doc["gated"] is False and "warning" not in r.err
    r = run("--device", dev(tmp_path, board), "flash", "psp-status")  # pbl is the default state
    assert r.code == 0 and "state machine not initialised" in r.out and "0x001560c8" in r.out


def test_handshake_cost_and_poll_interval_on_the_board_clock(tmp_path: Path) -> None:
    """§e.1: per command one ready check, COMMAND and DOORBELL writes (no COMMAND_DATA: no argument), polls
    1 ms apart on the virtual clock (the model answers after 100 us), then COMMAND_DATA."""
    r, doc = probe_json(tmp_path, "navi31", "psp=early")
    st = r.stats
    assert st["reg_writes"] == 4 * 2
    assert st["reg_reads"] == 1 + 4 * (1 + 2 + 1)
    assert 4e-3 <= st["modelled_s"] < 5e-3


# -- P5 values, unknown codes, phase 2 -----------------------------------------------------------------------------
def test_non_zero_statuses_never_fail_and_unknown_codes_say_so(tmp_path: Path, models: tuple) -> None:
    made, overrides = models
    overrides["probe"] = {0x01: (0x00, 0x12345678), 0x06: (0x05, 0x77), 0x0B: (0x42, 0xDEAD)}
    overrides["script"] = (0x289,)
    _, doc = probe_json(tmp_path, "navi31", "psp=early")
    boot, fb, model, tt = doc["commands"]
    assert (boot["status"], boot["response"]) == (0, 0x12345678)
    assert (fb["status"], fb["status_name"], fb["response"]) == (0x05, "address not set", 0x77)
    assert (model["status"], model["status_name"]) == (0x42, "unknown error")
    assert tt["decoded"] == {"item": 0x89, "item_name": "(meaning unknown)", "phase": 2,
                             "phase_meaning": "stream complete; a hard power cycle is required"}
    r = run("--device", dev(tmp_path, "navi31", "psp=early"), "flash", "psp-status")
    assert r.code == 0 and "phase 2 (stream complete" in r.out and "unknown error" in r.out


def test_an_item_outside_the_table_is_shown_raw(tmp_path: Path, models: tuple) -> None:
    models[1]["script"] = ()  # the model then answers 0x300: phase 3, item 0
    _, doc = probe_json(tmp_path, "navi31-usb", "psp=early")
    assert doc["commands"][3]["decoded"] == {"item": 0, "item_name": None, "phase": 3, "phase_meaning": None}


# -- P2: not ready, hang; faults ---------------------------------------------------------------------------------
@pytest.mark.parametrize("board", BOARDS)
def test_not_ready_mailbox_sends_nothing(tmp_path: Path, board: str, models: tuple) -> None:
    made, overrides = models
    overrides["mailbox"] = "not-ready"
    r = run("--device", dev(tmp_path, board), "--json", "--stats", "flash", "psp-status")
    assert r.code == 1 and r.no_result
    assert "psp mailbox is not ready" in r.err and "GET_BOOT_PARTITION was not sent" in r.err
    (m,) = made
    assert m.log == [] and m.doorbell == 0 and m.command == 0
    assert r.stats["reg_writes"] == 0


def test_hung_mailbox_times_out_after_the_spec_timeout(tmp_path: Path, models: tuple) -> None:
    made, overrides = models
    overrides["mailbox"] = "hang"
    r = run("--device", dev(tmp_path), "--stats", "flash", "psp-status")
    assert r.code == 1
    assert "timed out after 10 s waiting for the psp to answer GET_BOOT_PARTITION (0x01)" in r.err
    assert [c for c, *_ in made[0].log] == [0x01]  # nothing after the command that hung
    assert 10.0 <= r.stats["modelled_s"] < 10.1


@pytest.mark.parametrize("n", [2, 3, 5])
def test_disconnect_during_the_probe(tmp_path: Path, n: int, models: tuple) -> None:
    # accesses: 1 COMMAND before; then per command: 2 ready check, 3 COMMAND write, 4 DOORBELL, 5.. polls
    r = run("--device", dev(tmp_path, extra=f"psp=early,faults=disconnect@{n}"), "flash", "psp-status")
    assert r.code == 1 and "went away" in r.err and "Traceback" not in r.err
    assert len(models[0][0].log) == (0 if n < 4 else 1)


# -- library: decoding and the refusal to send -------------------------------------------------------------------
def test_status_names_follow_the_spec_table() -> None:
    assert [psp.status_name(c) for c in (0x00, 0x0A, 0x0C, 0x12)] == [
        "success", "partition update error", "write to spi error", "initialisation error"]
    assert len(psp.STATUS_NAMES) == 0x13 and psp.status_name(0x13) == "unknown error"
    assert psp.decode_transfer_type(0x0203)["phase_meaning"] is not None
    assert psp.decode_transfer_type(0x0108) == {"item": 8, "item_name": "ISH A payload", "phase": 1,
                                                "phase_meaning": None}


def test_mailbox_refuses_without_ready_and_uses_the_register_database(tmp_path: Path) -> None:
    from tinyhw.boards.navi31 import Navi31Options
    from tinyhw.mocks.amd.direct import DirectTransport
    from tinyhw.regs import asic

    t = DirectTransport(Navi31Options.from_options({"flash": str(tmp_path / "f.bin"), "timing": "instant",
                                                  "strict": True}), spec=NAVI31)
    try:
        mb = psp.Mailbox(t, asic("navi31"))
        assert (mb.command_offset, mb.data_offset, mb.doorbell_offset) == (R.PSP_COMMAND, R.PSP_COMMAND_DATA,
                                                                           R.PSP_DOORBELL)
        t.board.psp.command = 0  # busy: bit 31 clear
        with pytest.raises(OperationFailed, match="not ready"):
            mb.send(psp.GET_FB_STATE)
        assert mb.sent == [] and t.board.psp.log == []
        t.board.psp.command = R.PSP_READY
        reply = mb.send(psp.GET_FB_STATE, argument=0x1234)  # an argument goes to COMMAND_DATA first
        assert t.board.psp.log == [(0x06, 0x1234, 0, 0)] and reply.status == 0 and mb.sent == [0x06]
    finally:
        t.close()
