"""The board registry (tinyhw.boards.registry): one table of device kinds and emulated boards that device-string
parsing, tinyhw.open, discovery, the CLI's help and ``mock gadget`` read; each board's own options class."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest
from clihelp import run

import tinyhw
from tinyhw import connect
from tinyhw.boards import registry
from tinyhw.boards.navi31 import Navi31Options, Navi31UsbOptions
from tinyhw.boards.nvidia import Ad102Options
from tinyhw.boards.options import DeviceOptions, choice, option
from tinyhw.errors import BadDeviceString
from tinyhw.transport.devstr import DeviceSpec, parse_device


def test_an_unknown_mock_target_is_refused_and_never_reaches_an_opener(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[str] = []
    for name, opener in list(connect.OPENERS.items()):
        monkeypatch.setitem(connect.OPENERS, name, lambda *a, _n=name, _o=opener: called.append(_n) or _o(*a))
    r = run("--device", "mock:navi99", "probe")
    assert r.code == 2 and "unknown emulated board 'navi99'" in r.err and "navi31-usb" in r.err and r.no_result
    with pytest.raises(BadDeviceString, match="no device mock:navi99 in the board registry") as e:
        tinyhw.open(DeviceSpec("mock", "navi99"))  # a spec built by hand, past the parser
    assert e.value.exit_code == 2
    assert called == []


def test_an_option_a_board_does_not_take_is_refused_naming_its_options() -> None:
    r = run("--device", "mock:ad102,sosdelay=1", "probe")
    assert r.code == 2 and r.no_result
    assert "mock:ad102 does not take option(s) sosdelay" in r.err and "allowed: strict, gsp, power" in r.err
    r = run("--device", "mock:navi31,speed=hs", "probe")  # the bridge's option, not the board's
    assert r.code == 2 and "mock:navi31 does not take option(s) speed" in r.err
    assert run("--device", "mock:navi31-usb,speed=hs", "--json", "probe").code == 0


def test_every_entry_is_bound_and_reachable() -> None:
    assert set(registry.OPENERS) == set(connect.OPENERS)
    for e in registry.REGISTRY:
        assert e.opener in registry.OPENERS, e.name
        assert issubclass(e.options, DeviceOptions) and e.description
        if e.emulated:
            assert parse_device(e.name).target == e.target
            assert callable(connect._emulator(e)) and e.board  # a transport class, or a function choosing one
    assert registry.kinds() == ["pci", "vfio", "usb", "remote", "labgrid", "mock", "cuda"]
    assert [e.name for e in registry.boards()] == ["mock:navi31", "mock:navi31-usb", "mock:navi33", "mock:navi33-usb",
                                                   "mock:ad102"]


def test_discovery_lists_the_registry_boards() -> None:
    from tinyhw.connect.discover import list_mocks

    assert [(m.device, m.description) for m in list_mocks()] == [(e.name, e.description) for e in registry.boards()]


def test_the_help_and_the_gadget_board_choices_are_the_table() -> None:
    from tinyhw.cli.gadget_cmd import gadget

    out = run("--help").out
    for e in registry.REGISTRY:
        assert e.usage in out and e.description in out, e.name
    board = next(p for p in gadget.params if p.name == "board")
    assert list(board.type.choices) == registry.bridged_boards() == ["navi31", "navi33"]


def test_a_new_registry_entry_shows_in_the_help_the_gadget_and_list() -> None:
    """A board added to the table (here a second name for the Navi31 behind the bridge) appears everywhere."""
    code = (
        "import dataclasses, sys\n"
        "from tinyhw.boards import registry as r\n"
        "usb = r.find('mock', 'navi31-usb')\n"
        "r.REGISTRY += (dataclasses.replace(usb, name='mock:fakegpu-usb', board='fakegpu',\n"
        "                                   description='a fake board for the registry test'),)\n"
        "from tinyhw.cli import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "except SystemExit:\n"
        "    pass\n")

    def cli(*args: str) -> str:
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True).stdout

    assert "mock:fakegpu-usb" in cli("--help") and "a fake board for the registry test" in cli("--help")
    assert "fakegpu" in cli("mock", "gadget", "--help")
    assert "mock:fakegpu-usb" in cli("--json", "list")


def test_a_board_is_one_registry_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """A directly attached board with its own options class opens through tinyhw.open from its entry alone."""

    @dataclasses.dataclass
    class QuietOptions(Navi31Options):
        smu: str = option(choice("silent"), "silent", "this board's SMU never answers")

    entry = registry.Entry("mock:quiet", "direct", QuietOptions, "a quiet navi31",
                           emulator="tinyhw.mocks.amd.direct:DirectTransport", board="navi31",
                           spec_at="tinyhw.boards.navi31:NAVI31")
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, entry))
    with tinyhw.open("mock:quiet") as dev:
        assert dev.transport.options.smu == "silent" and dev.transport.identity().vendor_id == 0x1002
    with pytest.raises(BadDeviceString, match="option smu=normal is not one of silent"):
        tinyhw.open("mock:quiet,smu=normal")


def test_each_board_has_its_own_options() -> None:
    navi, usb, ada = (set(c.declared()) for c in (Navi31Options, Navi31UsbOptions, Ad102Options))
    assert ada == {"strict", "gsp", "power", "driver", "faults", "gsp-fault", "dma", "state"}
    assert usb - navi == {"speed", "link", "flaky", "flaky-seed"} and "gsp" not in navi
    o = Navi31Options.from_options({"smu": "busy@3", "sosdelay": "1.5", "load": "busy", "flash": "~/f.bin"},
                                   environ={})
    assert (o.smu_busy_at, o.sos_delay, o.load, o.flash) == (3, 1.5, 100, Path("~/f.bin").expanduser())
    assert Navi31Options.from_options({}, environ={}) == Navi31Options()
    assert Navi31Options.from_options({}, environ={"TINYHW_STRICT": "1"}).strict is True
    assert Navi31UsbOptions.from_options({}, environ={"TINYHW_CLOCK": "hybrid"}).clock == "hybrid"
    assert Navi31Options.from_options({}, environ={"TINYHW_CLOCK": "hybrid"}).clock is None  # direct: no env
    for bad, message in ({"sosdelay": "61"}, "not a number of seconds 0..60"), ({"load": "101"}, "percentage"), \
            ({"smu": "busy@x"}, "normal, silent, busy@N"), ({"flash": True}, "needs a value: flash=FILE"), \
            ({"faults": "boom@1"}, "unknown fault"), ({"strict": "maybe"}, "on or off"):
        with pytest.raises(BadDeviceString, match=message) as e:
            Navi31UsbOptions.from_options(bad, environ={})
        assert e.value.exit_code == 2


def test_pci_and_remote_options_come_from_the_table() -> None:
    r = run("--device", "usb,fast", "probe")
    assert r.code == 2 and "the usb transport does not take option(s) fast" in r.err and "allowed: none" in r.err
    r = run("--device", "remote:127.0.0.1:1,colour=red", "probe")
    assert r.code == 2 and "the remote transport does not take option(s) colour (unknown option; allowed: key)" \
        in r.err


def test_mock_gadget_serves_the_board_connect_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``mock gadget`` gets its board and bridge from tinyhw.connect (the gadget framework faked here)."""
    import contextlib
    import json
    import types

    import tinyhw.mocks.bridge.gadget_configfs as gcfs
    from tinyhw.errors import DeviceLocked

    served: list[object] = []

    @contextlib.contextmanager
    def serve(bridge, udc, setup):
        served.append(bridge)
        with pytest.raises(DeviceLocked):  # the board the gadget serves holds the device lock
            tinyhw.open(f"mock:navi31,flash={tmp_path / 'g.bin'}")
        yield types.SimpleNamespace(running=False, event_counts={}, out_landing={}, errors=[], teardown_errors=[])

    monkeypatch.setattr(gcfs, "check_environment", lambda udc: "dummy_udc.0")
    monkeypatch.setattr(gcfs, "serve_gadget", serve)
    r = run("--json", "mock", "gadget", "--board", "navi31", "--flash", str(tmp_path / "g.bin"))
    assert r.code == 0, r.err
    (bridge,) = served
    assert bridge.speed == "hs" and bridge.board.options.flash == tmp_path / "g.bin" and bridge.options.strict
    assert json.loads(r.out)["udc"] == "dummy_udc.0"
    tinyhw.open(f"mock:navi31,flash={tmp_path / 'g.bin'}").close()  # released when it stopped
    r = run("mock", "gadget", "--board", "navi99")
    assert r.code == 2 and "navi99" in r.err


def test_mock_commands_default_to_the_tables_first_board(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``mock reset`` and ``mock power-cycle`` without --device, and ``mock gadget`` without --board, take the
    registry's first emulated board (``mock:navi31`` today); with another board first they take that one."""
    from tinyhw.cli.gadget_cmd import _default_board, gadget

    assert registry.default_board().name == "mock:navi31"
    assert next(p for p in gadget.params if p.name == "board").default == "navi31" == _default_board()
    monkeypatch.delenv("TINYHW_DEVICE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    first = [e for e in registry.REGISTRY if e.board == "navi33"]
    monkeypatch.setattr(registry, "REGISTRY", (*first, *(e for e in registry.REGISTRY if e not in first)))
    assert registry.default_board().name == "mock:navi33"
    r = run("--json", "mock", "reset", "--yes")
    assert r.code == 0, r.err
    assert json.loads(r.out)["path"] == str(tmp_path / "tinyhw" / "navi33-flash.bin")
    assert _default_board() == "navi33"  # what --board defaults to when the cli is imported with this table
    r = run("am", "status")  # a command that needs a device names the first board in its hint
    assert r.code == 2 and "e.g. --device mock:navi33" in r.err, r.err


def test_refusals_list_the_amd_boards_of_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """kernels and prof refusals name the emulated AMD boards the registry has, a board added to it included."""
    navi33 = registry.find("mock", "navi33")
    assert navi33 is not None
    extra = dataclasses.replace(navi33, name="mock:navi34")
    monkeypatch.setattr(registry, "REGISTRY", (*registry.REGISTRY, extra))
    r = run("kernels", "exec", "k.elf", "--grid", "1", "--block", "1")
    assert r.code == 2 and "mock:navi31 or mock:navi33 or mock:navi34, usb, pci:, vfio:" in r.err, r.err
    r = run("--device", "mock:ad102", "kernels", "run", "pattern")
    assert r.code == 2 and "mock:navi31 or mock:navi33 or mock:navi34, usb" in r.err, r.err
    r = run("--device", "mock:ad102", "prof", "capture", "pattern", "-o", "cap")
    assert r.code == 2 and "(mock:navi31, mock:navi33, mock:navi34, their -usb forms" in r.err, r.err
    from tinyhw.errors import Refused
    from tinyhw.peers.tinygrad_amd import EmulatedGpu

    with pytest.raises(Refused, match=r"emulated amd board \(mock:navi31, mock:navi33, mock:navi34, their -usb"):
        EmulatedGpu("mock:ad102").open()


def test_the_bridge_takes_only_the_options_of_a_board_behind_it() -> None:
    """A board behind the emulated bridge is opened with the bridge's options and the board's together; a registry
    row that hands the bridge any other options class is refused before a board is built."""
    usb = registry.find("mock", "navi31-usb")
    assert usb is not None
    options = Navi31UsbOptions()
    assert connect.bridge_options(usb, options) is options
    with pytest.raises(BadDeviceString, match=r"mock:navi31-usb: its options \(AmdBoardOptions\) are not a board's"):
        connect.bridge_options(usb, Navi31Options())
