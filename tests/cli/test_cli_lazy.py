"""The CLI's lazy subcommands, tinyhw.open from Python, and --json error documents (issue 10 items 8, 10, 13)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from clihelp import run
from testpaths import ROOT

import tinyhw
from tinyhw.boards.navi31 import NAVI31
from tinyhw.cli import COMMANDS, cli, load_command
from tinyhw.errors import DeviceLocked


def test_help_imports_no_feature_package() -> None:
    code = ("import sys\nfrom tinyhw.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('tinyhw'))))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = r.stdout.strip().splitlines()[-1].split()
    heavy = [m for m in loaded if m.split(".")[1:2] and m.split(".")[1] in (
        "flash", "firmware", "probe", "formats", "mocks", "usb", "pci", "regs", "autogen", "connect", "boot",
        "prof", "kernels", "bench", "remote")]
    assert heavy == [], heavy
    assert "tinyhw.cli.flash_cmd" not in loaded
    for name in COMMANDS:  # every command is listed with its short help, without being imported
        assert name in r.stdout


#: what ``tinyhw --help`` must not import: the emulators, numpy, rich, the shader core, the options classes of the
#: board registry (dataclass-heavy; the help lists the registry's names and descriptions only), json
HELP_HEAVY = ("numpy", "rich", "tinyhw.mocks", "tinyhw.boards.options", "tinyhw.boards.navi31", "tinyhw.boards.nvidia",
              "tinyhw.boards.kinds", "json", "tinyhw.formats", "usb")


def _modules_after(args: list[str], env: dict[str, str] | None = None) -> set[str]:
    """The modules loaded after ``tinyhw ARGS`` ran in a fresh interpreter."""
    code = ("import sys\nfrom tinyhw.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(sys.modules)), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True, env=env)
    return set(r.stderr.strip().splitlines()[-1].split())


def test_help_imports_nothing_heavy() -> None:
    loaded = _modules_after(["--help"])
    heavy = sorted(m for m in loaded if any(m == h or m.startswith(h + ".") for h in HELP_HEAVY))
    assert heavy == [], heavy


def test_probe_on_an_emulated_board_imports_only_that_boards_blocks(tmp_path) -> None:
    """probe on mock:navi31-usb builds the navi31 board behind the bridge: none of the shader core (and numpy), the
    instruction decoder or the other boards' emulators is imported."""
    import os

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"), TINYHW_LOCK_DIR=str(tmp_path / "locks"))
    loaded = _modules_after(["--device", "mock:navi31-usb", "probe"], env)
    assert "tinyhw.mocks.amd.bootpath" in loaded  # the board was built
    unused = sorted(m for m in loaded if m.split(".")[0] == "numpy" or m in (
        "tinyhw.mocks.rdna3.dispatch", "tinyhw.mocks.rdna3.state", "tinyhw.formats.amdisa", "tinyhw.formats.rdna3_ops",
        "tinyhw.mocks.nvidia.ad102", "tinyhw.mocks.nvidia.nv_gsp", "tinyhw.mocks.nvidia.nv_falcon"))
    assert unused == [], unused


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_lazy_entry_loads_the_named_command(name: str) -> None:
    command = load_command(name)
    assert command.name == name or (name == "list" and command.name == "list")
    assert cli.get_command(None, name) is command  # type: ignore[arg-type]
    assert command.short_help == COMMANDS[name][1]
    assert run(name, "--help").code == 0


def test_json_error_document_on_stdout_and_one_line_on_stderr() -> None:
    r = run("--json", "--device", "nope:", "probe")
    assert r.code == 2
    doc = json.loads(r.out)
    assert doc["error"]["exit_code"] == 2
    assert "unknown transport" in doc["error"]["message"]
    assert doc["error"]["hint"]
    assert r.err.count("\n") == 1 and r.err.startswith("error: ")


def test_json_error_for_usage_errors() -> None:
    r = run("--json", "flash")
    assert r.code == 2 and json.loads(r.out)["error"]["message"] == "a subcommand is missing"
    r = run("--json", "no-such-command")
    assert r.code == 2 and "no-such-command" in json.loads(r.out)["error"]["message"]


def test_without_json_errors_leave_stdout_empty() -> None:
    r = run("--device", "nope:", "probe")
    assert r.code == 2 and r.out == ""


def test_tinyhw_open_from_python_reads_ids_and_releases() -> None:
    with tinyhw.open("mock:navi31") as dev:
        ident = dev.transport.identity()
        assert (ident.vendor_id, ident.device_id) == (0x1002, 0x744C)
        assert dev.stats()["reg_reads"] >= 0
    with tinyhw.open("mock:navi31"):  # released on exit: a second open works
        pass


def test_tinyhw_open_takes_the_device_lock_shared_with_the_cli() -> None:
    with tinyhw.open("mock:navi31-usb") as dev:
        assert dev.transport.identity().vendor_id == 0x1002
        with pytest.raises(DeviceLocked):  # the same board, directly attached: same flash file, same lock
            tinyhw.open("mock:navi31")
        r = run("--device", "mock:navi31", "probe")
        assert r.code == 3 and "in use" in r.err


def test_a_board_built_by_a_script_takes_the_lock(tmp_path) -> None:
    from tinyhw.boards.navi31 import Navi31Options
    from tinyhw.mocks.amd.board import Navi31Board

    opts = Navi31Options.from_options({"flash": str(tmp_path / "f.bin")})
    board = Navi31Board(opts, spec=NAVI31)
    try:
        with pytest.raises(DeviceLocked):
            tinyhw.open(f"mock:navi31,flash={tmp_path / 'f.bin'}")
    finally:
        board.close()
    tinyhw.open(f"mock:navi31,flash={tmp_path / 'f.bin'}").close()


def test_flash_dump_and_register_read_from_python() -> None:
    """The README's 'Using tinyhw from Python' example, as written there."""
    from tinyhw.flash import FlashDevice, ops

    with tinyhw.open("mock:navi31") as dev, FlashDevice(dev.transport) as flash:
        data = ops.read(flash, 0, 4096)
    assert len(data) == 4096


def test_list_devices_names_the_emulated_boards() -> None:
    names = [d.device for d in tinyhw.list_devices()]
    assert "mock:navi31" in names and "mock:navi31-usb" in names


@pytest.mark.slow
def test_readme_python_example_runs_as_written() -> None:

    text = (ROOT / "README.md").read_text()
    section = text.split("## Using tinyhw from Python", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    assert code.count("\n") <= 10  # "a flash dump and a register read in under ten lines"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    size, value, transfers = r.stdout.split()
    assert int(size) == 2 * 1024 * 1024 and value.startswith("0x") and int(transfers) > 0
