"""``nv`` and ``mock reset`` on the emulated AD102 from the CLI: the board back to power-on, and bad input refused
with one line and the right exit code before the device is touched."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run
from nvboothelp import firmware_set

from tinyhw.boards.nvidia import Ad102Options, default_state_path
from tinyhw.errors import DeviceLocked
from tinyhw.mocks.nvidia.ad102 import Ad102Transport


def _one_line(err: str) -> bool:
    """stderr is the error's one line (a plan printed before a refusal on the way would be a line more)."""
    return err.startswith("error: ") and err.count("\n") == 1


def _ends_in_one_error_line(err: str) -> bool:
    lines = err.splitlines()
    return bool(lines) and lines[-1].startswith("error: ") and sum(x.startswith("error: ") for x in lines) == 1


def _boot(dev: str, fw: Path, *extra: str) -> object:
    return run("--device", dev, *extra, "nv", "boot", "--yes", "--firmware-dir", str(fw), "--allow-unknown-firmware")


def test_mock_reset_returns_the_ad102_to_power_on(tmp_path: Path) -> None:
    fw = firmware_set(tmp_path)
    state = default_state_path()  # the user's default board (the test's private cache)
    assert _boot("mock:ad102", fw).code == 0
    assert state.is_file() and json.loads(run("--device", "mock:ad102", "--json", "nv", "info").out)["wpr2_up"]
    r = run("--device", "mock:ad102", "mock", "reset")
    assert r.code == 2 and "needs --yes" in r.err and state.is_file()  # refused: nothing deleted
    r = run("--device", "mock:ad102", "--json", "mock", "reset", "--yes")
    assert r.code == 0, r.err
    assert json.loads(r.out) == {"board": "ad102", "path": str(state), "deleted": True} and not state.exists()
    doc = json.loads(run("--device", "mock:ad102", "--json", "nv", "info").out)
    assert (doc["wpr2_up"], doc["gsp_riscv_active"], doc["gsp"]) == (False, False, None)  # not booted
    assert "wpr2 down" in run("--device", "mock:ad102", "nv", "info").out
    assert _boot("mock:ad102", fw).code == 0  # boots again without nv reset
    r = run("--device", "mock:ad102", "mock", "reset", "--yes")
    assert r.code == 0 and "reset to power-on" in r.out
    r = run("--device", "mock:ad102", "--json", "mock", "reset", "--yes")
    assert r.code == 0 and json.loads(r.out)["deleted"] is False  # already at power-on
    r = run("--device", "mock:ad102", "mock", "power-cycle")
    assert r.code == 2 and _one_line(r.err) and "mock:ad102 mock reset --yes" in r.err


def test_mock_reset_of_an_ad102_with_its_own_state_file(tmp_path: Path) -> None:
    fw, state = firmware_set(tmp_path), tmp_path / "board.json"
    dev = f"mock:ad102,strict,state={state}"
    assert _boot(dev, fw).code == 0 and state.is_file()
    assert not default_state_path().exists()
    assert run("--device", dev, "mock", "reset", "--yes").code == 0 and not state.exists()
    assert _boot(dev, fw).code == 0


def test_mock_reset_refuses_a_state_path_that_is_not_a_file_and_a_board_in_use(tmp_path: Path) -> None:
    odd = tmp_path / "dir"
    odd.mkdir()
    r = run("--device", f"mock:ad102,state={odd}", "mock", "reset", "--yes")
    assert r.code == 2 and _one_line(r.err) and "not a regular file" in r.err and odd.is_dir()
    board = Ad102Transport(Ad102Options(state=tmp_path / "s.json"))  # holds the board's device lock
    try:
        r = run("--device", f"mock:ad102,state={tmp_path / 's.json'}", "mock", "reset", "--yes")
        assert r.code == DeviceLocked.exit_code == 3 and _ends_in_one_error_line(r.err) and "is in use" in r.err
    finally:
        board.close()


@pytest.mark.parametrize("args", [("boot", "--yes"), ("reset", "--yes")])
def test_nv_commands_that_write_need_a_device_and_say_which(args: tuple[str, ...]) -> None:
    r = run("nv", *args)
    assert r.code == 2 and _one_line(r.err) and "--device mock:ad102" in r.err


def test_nv_info_with_no_device_found_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "sys" / "bus" / "pci" / "devices").mkdir(parents=True)
    monkeypatch.setenv("TINYHW_SYSFS", str(tmp_path / "sys"))
    r = run("nv", "info")
    if "usb" in r.err and "not searched" not in r.err and r.code != 3:
        pytest.skip("a real usb bridge is present")
    assert r.code == 3 and "no gpu or usb bridge found" in r.err and "--device mock:ad102" in r.err


@pytest.mark.parametrize("dev", ["mock:navi31", "mock:navi31-usb"])
@pytest.mark.parametrize("args", [("info",), ("boot", "--yes"), ("reset", "--yes")])
def test_nv_refuses_an_amd_board(dev: str, args: tuple[str, ...]) -> None:
    r = run("--device", dev, "nv", *args)
    assert r.code == 2 and _one_line(r.err) and "is not an nvidia gpu (vendor 0x1002)" in r.err
    r = run("--device", dev, "--json", "nv", *args)
    assert r.code == 2 and json.loads(r.out)["error"]["exit_code"] == 2


@pytest.mark.parametrize(("make", "message"), [
    (lambda p: p / "missing", "does not exist"),
    (lambda p: (p / "afile").write_bytes(b"x") and p / "afile", "is not a directory"),
    (lambda p: "", "--firmware-dir is empty"),
])
@pytest.mark.parametrize("command", [("boot", "--yes"), ("info",)])
def test_a_bad_firmware_dir_is_refused_before_the_board_is_opened(tmp_path: Path, make, message: str,
                                                                   command: tuple[str, ...]) -> None:
    state = tmp_path / "board.json"
    given = make(tmp_path)
    dev = f"mock:ad102,strict,state={state},faults=disconnect@1"  # any BAR access would fail the command
    r = run("--device", dev, "nv", *command, "--firmware-dir", str(given))
    assert r.code == 2 and _one_line(r.err) and message in r.err, r.err
    r = run("--device", dev, "--json", "nv", *command, "--firmware-dir", str(given))
    doc = json.loads(r.out)["error"]
    assert r.code == 2 and doc["exit_code"] == 2 and message in doc["message"]
    assert not state.exists()


def test_a_bad_firmware_variable_is_refused_and_the_default_directory_is_named(tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch
                                                                                ) -> None:
    monkeypatch.setenv("TINYHW_NVIDIA_FIRMWARE", str(tmp_path / "nope"))
    r = run("--device", "mock:ad102", "nv", "boot", "--yes")
    assert r.code == 2 and _one_line(r.err) and "$TINYHW_NVIDIA_FIRMWARE" in r.err and "does not exist" in r.err
    from tinyhw.boot.nv import fwfiles

    monkeypatch.delenv("TINYHW_NVIDIA_FIRMWARE")
    monkeypatch.setattr(fwfiles, "DEFAULT_DIR", tmp_path / "lib-firmware-nvidia")
    monkeypatch.setenv("TINYHW_FIRMWARE_DIR", str(tmp_path / "no-cache"))  # and nothing in tinyhw's cache
    r = run("--device", "mock:ad102", "nv", "boot", "--yes")
    assert r.code == 2 and _one_line(r.err) and "lib-firmware-nvidia does not exist" in r.err
    r = run("--device", "mock:ad102", "--json", "nv", "info")  # info does not need the default directory
    assert r.code == 0 and json.loads(r.out)["firmware"]["gsp_rm_versions"] == []


def test_every_nv_help_has_examples_and_the_emulated_ones_run(tmp_path: Path) -> None:
    fw = firmware_set(tmp_path)
    ran = 0
    for cmd in (["nv"], ["nv", "boot"], ["nv", "info"], ["nv", "reset"], ["mock", "reset"]):
        r = run(*cmd, "--help")
        assert r.code == 0 and "Example" in r.out
        for line in r.out.splitlines():
            words = line.split()
            if words[:2] != ["tinyhw", "--device"] or not words[2].startswith("mock:ad102"):
                continue
            args = [str(fw) if w == "/tmp/nvfw" else w for w in words[1:]]
            r = run(*args)
            assert r.code == 0, (line, r.err)
            ran += 1
    assert ran >= 5
