"""``tinyhw mock gadget``: help and the refusals when the gadget framework is missing (exit 3).
Serving for real needs configfs, FunctionFS and a UDC: that runs in the QEMU tier (tests/usbguest)."""

from __future__ import annotations

from pathlib import Path

import pytest
from clihelp import run

import tinyhw.mocks.bridge.gadget_configfs as gcfs


def test_help_says_what_and_shows_an_example() -> None:
    r = run("mock", "gadget", "--help")
    assert r.code == 0
    assert "configfs" in r.out and "Example:" in r.out and "tinyhw mock gadget --board navi31" in r.out


@pytest.mark.parametrize(("configfs", "ffs", "udcs", "message"), [
    (False, True, ["dummy_udc.0"], "configfs is not available"),
    (True, False, ["dummy_udc.0"], "functionfs is not available"),
    (True, True, [], "no usb device controller"),
])
def test_refuses_without_the_gadget_framework(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, configfs: bool,
                                              ffs: bool, udcs: list[str], message: str) -> None:
    (tmp_path / "udc").mkdir()
    for u in udcs:
        (tmp_path / "udc" / u).mkdir()
    if configfs:
        (tmp_path / "config" / "usb_gadget").mkdir(parents=True)
    (tmp_path / "fs").write_text("nodev\tconfigfs\n" * configfs + "nodev\tfunctionfs\n" * ffs)
    monkeypatch.setattr(gcfs, "CONFIGFS", tmp_path / "config")
    monkeypatch.setattr(gcfs, "UDC_CLASS", tmp_path / "udc")
    monkeypatch.setattr(gcfs, "PROC_FILESYSTEMS", tmp_path / "fs")
    monkeypatch.setattr(gcfs, "FFS_MODULE", tmp_path / "no-module")
    r = run("mock", "gadget", "--board", "navi31")
    assert r.code == 3, r.err
    assert r.err.startswith("error: ") and message in r.err and len(r.err.strip().splitlines()) == 1
    assert r.no_result


def test_unknown_udc_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "udc" / "dummy_udc.0").mkdir(parents=True)
    (tmp_path / "config" / "usb_gadget").mkdir(parents=True)
    (tmp_path / "fs").write_text("nodev\tconfigfs\nnodev\tfunctionfs\n")
    monkeypatch.setattr(gcfs, "CONFIGFS", tmp_path / "config")
    monkeypatch.setattr(gcfs, "UDC_CLASS", tmp_path / "udc")
    monkeypatch.setattr(gcfs, "PROC_FILESYSTEMS", tmp_path / "fs")
    r = run("mock", "gadget", "--udc", "musb-hdrc.0")
    assert r.code == 3 and "musb-hdrc.0" in r.err and "dummy_udc.0" in r.err


class _Served:
    """Stands in for the running FunctionFS gadget: it has already stopped (the command reports at once)."""

    running = False
    event_counts: dict[str, int] = {}
    out_landing: dict[str, int] = {}
    errors: list[str] = []
    teardown_errors: list[str] = []


@pytest.mark.parametrize("strict", [False, True])
def test_strict_reaches_the_served_board_and_the_report_has_the_board(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                      strict: bool) -> None:
    """``--strict`` serves a strict board and bridge (an unmodelled access is an error, as with ``mock:...,strict``);
    the --json report carries the board's counters and PSP command log next to the bridge's."""
    import contextlib
    import json

    seen: dict[str, bool] = {}

    @contextlib.contextmanager
    def serve(bridge, udc, setup=None):
        seen["bridge"] = bridge.options.strict
        seen["board"] = bridge.board.options.strict
        yield _Served()

    monkeypatch.delenv("TINYHW_STRICT")  # the tests' default: the flag alone must decide here
    monkeypatch.setattr(gcfs, "check_environment", lambda udc=None: "dummy_udc.0")
    monkeypatch.setattr(gcfs, "serve_gadget", serve)
    args = ["--json", "mock", "gadget", "--board", "navi31", "--flash", str(tmp_path / "flash.bin")]
    r = run(*args, *(["--strict"] if strict else []))
    assert r.code == 0, r.err
    assert seen == {"bridge": strict, "board": strict}
    board = json.loads(r.out)["board"]
    assert board["counters"]["psp_commands"] == 0 and board["psp"] == [] and board["uncovered"] == []
