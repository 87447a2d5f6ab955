"""Front-end conventions: help, device strings, exit codes, errors on one line."""

from __future__ import annotations

import json

import pytest
from clihelp import run


def test_help_lists_commands_and_examples() -> None:
    r = run("--help")
    assert r.code == 0
    for cmd in ("list", "probe", "mock"):
        assert cmd in r.out
    assert "mock:navi31-usb" in r.out


@pytest.mark.parametrize("cmd", [["list"], ["probe"], ["mock", "reset"]])
def test_every_command_help_has_an_example(cmd: list[str]) -> None:
    r = run(*cmd, "--help")
    assert r.code == 0 and "Example" in r.out


def test_malformed_device_string() -> None:
    r = run("--device", "pcie:3", "probe")
    assert r.code == 2
    assert r.err.count("\n") == 1 and r.err.startswith("error: bad device string")
    assert "accepted forms" in r.err and r.no_result


def test_remote_without_a_server_is_exit_3(tmp_path) -> None:
    import socket

    key = tmp_path / "remote.key"  # the key is checked before connecting: give a valid one
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)
    with socket.socket() as s:  # a loopback port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = run("--device", f"remote:127.0.0.1:{port},key={key}", "--json", "probe")
    assert r.code == 3
    assert "cannot connect to remote" in r.err and "Traceback" not in r.err and r.no_result


@pytest.mark.parametrize("dev", ["pci:0000:ee:1f.7", "vfio:0000:ee:1f.7"])
def test_absent_native_device_is_exit_3(dev: str) -> None:
    r = run("--device", dev, "--json", "probe")
    assert r.code == 3
    assert "no pci function 0000:ee:1f.7" in r.err and r.err.count("\n") == 1 and r.no_result


def test_unknown_mock_option_is_refused() -> None:
    r = run("--device", "mock:navi31,colour=blue", "probe")
    assert r.code == 2 and "unknown option" in r.err


def test_no_device_found_names_the_emulated_board(monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.connect import discover

    monkeypatch.setattr(discover, "list_pci", lambda: [])
    monkeypatch.setattr(discover, "list_usb", lambda warn=True: [])
    r = run("probe")
    assert r.code == 3 and "--device mock:navi31" in r.err


def test_list_marks_emulated_boards() -> None:
    r = run("--json", "list")
    assert r.code == 0
    rows = json.loads(r.out)
    mocks = {row["device"]: row for row in rows if row["emulated"]}
    assert set(mocks) == {"mock:navi31", "mock:navi31-usb", "mock:navi33", "mock:navi33-usb", "mock:ad102"}
    assert all(not row["emulated"] for row in rows if row["device"] not in mocks)
    human = run("list")
    assert human.code == 0 and "mock:navi31-usb" in human.out and "emulated" in human.out


def test_stats_on_a_command_without_device() -> None:
    r = run("--stats", "list")
    assert r.code == 0
    assert set(r.stats) >= {"usb_transfers", "round_trips", "elapsed_s"}


def test_help_imports_nothing_heavy() -> None:
    """`tinyhw --help` must start fast: pyusb, rich, numpy and the emulators load only when a command needs them."""
    import subprocess
    import sys

    heavy = "('usb', 'rich', 'numpy', 'tinyhw.mocks', 'tinyhw.usb.bridge')"
    code = ("import sys\nfrom tinyhw.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {heavy} if m in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"


def test_top_level_help_names_each_groups_newer_commands() -> None:
    """``tinyhw --help`` lists a group on one line; that line names the group's commands a user looks for."""
    lines: dict[str, str] = {}
    current = ""
    for line in run("--help").out.split("Commands:")[1].split("Devices")[0].splitlines():
        if not line.strip():
            continue
        if line.startswith("  ") and not line.startswith("   "):
            current = line.split()[0]
            lines[current] = line
        elif current:
            lines[current] += " " + line.strip()
    wanted = {"am": ["status", "rings", "waves", "hang-report"], "flash": ["update"], "mock": ["power-cycle"],
              "trace": ["replay", "diff", "export"], "prof": ["capture"], "kernels": ["exec"]}
    for group, subs in wanted.items():
        for sub in subs:
            assert sub in lines[group], (group, sub, lines[group])


@pytest.mark.parametrize("cmd", [["trace", "import"], ["trace", "export"], ["kernels"], ["flash", "update"],
                                 ["mock", "power-cycle"], ["kernels", "exec"], ["prof", "capture"],
                                 ["am", "hang-report"]])
def test_new_commands_help_has_an_example(cmd: list[str]) -> None:
    r = run(*cmd, "--help")
    assert r.code == 0 and "Example" in r.out


def test_top_level_help_names_every_emulated_board() -> None:
    """The description above the options names every board of the registry, not only the first two."""
    from tinyhw.boards.registry import boards

    out = run("--help").out.split("Options:")[0]
    for entry in boards():
        assert f"mock:{entry.target}" in out, entry.target
