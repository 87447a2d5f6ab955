"""``tinyhw reg`` commands against an in-memory fake transport (through a minimal app object),
and the offline commands and exit codes through the real CLI."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any

import click
import pytest
from click.testing import CliRunner
from clihelp import run as run_cli

from tinyhw.cli.reg_cmd import reg
from tinyhw.errors import Refused
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport


class MemBar(BarRegion):
    """BAR5 as a dict of dwords; logs every access."""

    def __init__(self, info: BarInfo, log: list[tuple]) -> None:
        super().__init__(info)
        self.mem: dict[int, int] = {}
        self.log = log

    def read32(self, offset: int) -> int:
        self.check(offset, 4)
        self.log.append(("r", offset))
        return self.mem.get(offset, 0)

    def write32(self, offset: int, value: int) -> None:
        self.check(offset, 4)
        self.log.append(("w", offset, value))
        self.mem[offset] = value


class FakeTransport(Transport):
    name = "fake"

    def __init__(self, device_id: int = 0x744C) -> None:
        super().__init__()
        self.device_id = device_id
        self.log: list[tuple] = []

    def bars(self) -> list[BarInfo]:
        return [BarInfo(5, 0xF0000000, 1 << 20, "memory")]

    def _make_region(self, info: BarInfo) -> BarRegion:
        return MemBar(info, self.log)

    def identity(self) -> Identity:
        return Identity(0x1002, self.device_id, 0xC8, 0x030000, 0x1002, 0x0E3B, "fake")

    @property
    def mem(self) -> dict[int, int]:
        return self.bar(5).mem  # type: ignore[attr-defined]


class FakeApp:
    """The contract of tinyhw.cli.app.App that reg_cmd uses."""

    def __init__(self, transport: FakeTransport | None = None, device: str | None = "fake", json_out: bool = False):
        self.transport = transport or FakeTransport()
        self.device = device
        self.json = json_out
        self.opened = 0

    def open_transport(self, *, writes: bool = False) -> Transport:
        self.opened += 1
        return self.transport

    def emit(self, doc: Any, human: Callable[[], None]) -> None:
        if self.json:
            sys.stdout.write(json.dumps(doc) + "\n")
        else:
            human()

    def confirm(self, yes: bool, plan: str) -> None:
        click.echo(plan, err=True)
        if not yes:
            raise Refused("this command changes state and needs --yes")

    @property
    def out(self) -> Any:
        from rich.console import Console

        return Console(highlight=False, soft_wrap=True, width=120)


def invoke(app: FakeApp, *args: str) -> Any:
    return CliRunner().invoke(reg, list(args), obj=app)


def _only_int_numbers(doc: Any) -> None:
    if isinstance(doc, dict):
        for v in doc.values():
            _only_int_numbers(v)
    elif isinstance(doc, list):
        for v in doc:
            _only_int_numbers(v)
    else:
        assert isinstance(doc, (int, str)) and not isinstance(doc, bool), doc


ROM_SW_CNTL_FIELDS = [
    {"name": "DATA_SIZE", "shift": 0, "mask": 0xFFFF},
    {"name": "COMMAND_SIZE", "shift": 16, "mask": 0x70000},
    {"name": "ROM_SW_RETURN_DATA_ENABLE", "shift": 19, "mask": 0x80000},
]


def test_find_offline_json() -> None:
    app = FakeApp(device=None, json_out=True)
    r = invoke(app, "find", "smuio.ROM_SW*", "--asic", "navi31")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    _only_int_numbers(doc)
    assert doc[0] == {"name": "smuio.ROM_SW_CNTL", "offset": 0x5A3A0, "fields": ROM_SW_CNTL_FIELDS}
    assert [d["offset"] for d in doc[3:5]] == [0x5A3B0, 0x5A3B4] and len(doc) == 67
    assert app.opened == 0


def test_find_human_and_asic_from_the_device() -> None:
    app = FakeApp(FakeTransport(device_id=0x7550))
    r = invoke(app, "find", "smuio.ROM_CNTL.SCK*")
    assert r.exit_code == 0, r.output
    assert r.stdout.splitlines() == [
        "smuio.ROM_CNTL  0x5a380  (segment 0 + 0xe0)",
        "    27:23  SCK_PRESCALE_REFCLK",  # gfx1200 (device 1002:7550): smuio 14.0.2
        "       28  SCK_PRESCALE_REFCLK_OVERRIDE",
    ]
    assert app.opened == 1 and app.transport.log == []  # identity only, no register access


def test_no_asic_and_no_device_is_refused() -> None:
    for args in (["find", "smuio.*"], ["decode", "smuio.ROM_CNTL", "0"]):
        r = invoke(FakeApp(device=None), *args)
        assert isinstance(r.exception, Refused) and "give --asic" in str(r.exception)


def test_read_shows_value_and_decoded_fields() -> None:
    app = FakeApp(json_out=True)
    app.transport.mem[0x5A3A0] = 0x000B0100
    app.transport.mem[0x582CC] = 0x80000000
    r = invoke(app, "read", "smuio.rom_sw_cntl", "mp0.MP0_SMN_C2PMSG_115")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    _only_int_numbers(doc)
    assert doc[0]["name"] == "smuio.ROM_SW_CNTL" and doc[0]["offset"] == 0x5A3A0 and doc[0]["value"] == 0xB0100
    assert [(f["name"], f["value"]) for f in doc[0]["fields"]] == [
        ("DATA_SIZE", 0x100),
        ("COMMAND_SIZE", 3),
        ("ROM_SW_RETURN_DATA_ENABLE", 1),
    ]
    assert doc[1]["value"] == 0x80000000 and doc[1]["offset"] == 0x582CC
    assert app.transport.log == [("r", 0x5A3A0), ("r", 0x582CC)]

    app.json = False
    r = invoke(app, "read", "smuio.ROM_SW_CNTL.COMMAND_SIZE")
    lines = r.stdout.splitlines()
    assert lines[0] == "smuio.ROM_SW_CNTL @ 0x5a3a0 = 0x000b0100"
    assert lines[2].split() == ["18:16", "COMMAND_SIZE", "3"] and len(lines) == 3


def test_read_checks_every_name_before_touching_the_device() -> None:
    app = FakeApp()
    r = invoke(app, "read", "smuio.ROM_SW_CNTL", "smuio.ROM_SW_CNTX")
    assert isinstance(r.exception, Refused) and "closest: smuio.ROM_SW_CNTL" in str(r.exception)
    assert app.transport.log == []
    r = invoke(app, "read", "gc.SDMA0_QUEUE0_RB_CNTL")  # GC segment 0 is inside the 1 MiB BAR; fine
    assert r.exit_code == 0
    r = invoke(app, "read", "mp0.MP0_SMN_C2PMSG_115", "--asic", "navi31")
    assert r.exit_code == 0


def test_write_register_and_field_read_modify_write() -> None:
    app = FakeApp(json_out=True)
    app.transport.mem[0x5A380] = 0x02000802
    r = invoke(app, "write", "smuio.ROM_CNTL.SCK_PRESCALE_REFCLK=8", "smuio.rom_cntl.CLOCK_GATING_EN=1", "--yes")
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout) == [{"name": "smuio.ROM_CNTL", "offset": 0x5A380, "old": 0x02000802, "new": 0x08000803}]
    assert app.transport.log == [("r", 0x5A380), ("w", 0x5A380, 0x08000803)]
    assert "SCK_PRESCALE_REFCLK (bits 27:24, bar5 0x5a380) := 0x8 (read-modify-write)" in r.stderr

    app = FakeApp()
    app.transport.mem[0x582D0] = 0x1234
    r = invoke(app, "write", "mp0.MP0_SMN_C2PMSG_116=0xdead_beef", "--yes")
    assert r.exit_code == 0, r.output
    assert r.stdout.strip() == "mp0.MP0_SMN_C2PMSG_116 @ 0x582d0: 0x00001234 -> 0xdeadbeef"
    assert app.transport.mem[0x582D0] == 0xDEADBEEF


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["smuio.ROM_CNTL=1"], "needs --yes"),
        (["smuio.ROM_SW_CNTL.COMMAND_SIZE=8", "--yes"], "does not fit field COMMAND_SIZE"),
        (["smuio.ROM_CNTL=0x100000000", "--yes"], "does not fit the 32-bit register"),
        (["smuio.ROM_CNTL", "--yes"], "bad assignment"),
        (["smuio.ROM_CNTL=twelve", "--yes"], "'twelve' is not a number"),
        (["smuio.ROM_CNTX=1", "--yes"], "closest: smuio.ROM_CNTL"),
    ],
)
def test_write_refusals_touch_nothing(args: list[str], message: str) -> None:
    app = FakeApp()
    r = invoke(app, "write", *args)
    assert isinstance(r.exception, Refused) and message in str(r.exception), r.output
    assert r.exception.exit_code == 2 and app.transport.log == []


def test_write_needs_a_device() -> None:
    r = invoke(FakeApp(device=None), "write", "smuio.ROM_CNTL=1", "--yes")
    assert isinstance(r.exception, Refused) and "needs --device" in str(r.exception)


def test_decode_offline() -> None:
    app = FakeApp(device=None, json_out=True)
    r = invoke(app, "decode", "smuio.ROM_SW_CNTL", "0x80003", "--asic", "navi31")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert doc["name"] == "smuio.ROM_SW_CNTL" and doc["offset"] == 0x5A3A0 and doc["value"] == 0x80003
    assert [f["value"] for f in doc["fields"]] == [3, 0, 1]
    app.json = False
    r = invoke(app, "decode", "smuio.ROM_CNTL.SCK_PRESCALE_REFCLK", "0x18000001", "--asic", "navi31")
    assert r.stdout.splitlines()[2].split() == ["27:24", "SCK_PRESCALE_REFCLK", "8"]
    r = invoke(app, "decode", "smuio.ROM_CNTL", "0x1_0000_0000", "--asic", "navi31")
    assert isinstance(r.exception, Refused)
    assert app.opened == 0


@pytest.mark.parametrize("command", ["find", "read", "write", "decode"])
def test_help_says_what_it_does_touches_and_shows_an_example(command: str) -> None:
    r = CliRunner().invoke(reg, [command, "--help"])
    assert r.exit_code == 0
    text = r.output
    assert "Examples:" in text and "tinyhw " in text
    assert any(w in text for w in ("offline", "Touches", "touched", "Reads", "Changes device state"))


# -- through the real CLI entry point (exit codes, --json, one line on stderr) -----------------------


def test_real_cli_offline_find_and_decode() -> None:
    res = run_cli("--json", "reg", "find", "smuio.ROM*", "--asic", "navi31")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert {d["name"]: d["offset"] for d in doc}["smuio.ROM_DATA"] == 0x5A394
    res = run_cli("reg", "decode", "smuio.ROM_SW_CNTL", "0x80003", "--asic", "navi31")
    assert res.code == 0 and "ROM_SW_RETURN_DATA_ENABLE" in res.out


def test_real_cli_unknown_name_exits_2_with_closest_matches() -> None:
    res = run_cli("--json", "reg", "decode", "smuio.ROM_SW_CNTX", "1", "--asic", "navi31")
    assert res.code == 2 and res.no_result
    assert res.err.strip().startswith("error: navi31 has no register smuio.ROM_SW_CNTX; closest: smuio.ROM_SW_CNTL")


def test_real_cli_write_without_yes_is_refused() -> None:
    res = run_cli("--device", "mock:navi31", "reg", "write", "smuio.ROM_CNTL.SCK_PRESCALE_REFCLK=8")
    assert res.code == 2, res.err
    assert "needs --yes" in res.err and "read-modify-write" in res.err


def test_mmio_update_and_registers_outside_the_bar() -> None:
    from tinyhw import regs

    t = FakeTransport()
    mmio = regs.Mmio(t, regs.asic("navi31"))
    t.mem[0x5A3A0] = 0xFFFF0000
    assert mmio.update("smuio.ROM_SW_CNTL", DATA_SIZE=4, COMMAND_SIZE=3) == (0xFFFF0000, 0xFFFB0004)
    assert mmio.read("smuio.ROM_SW_CNTL.COMMAND_SIZE") == 3
    assert mmio.write("smuio.ROM_SW_CNTL.DATA_SIZE", 0x100) == (0xFFFB0004, 0xFFFB0100)
    assert mmio.write("smuio.ROM_SW_STATUS", 1) == (None, 1)
    assert t.log[-1] == ("w", 0x5A3A4, 1)
    far = regs.Mmio(t, regs.asic("navi31", bases={"hdp": (0x40000,)}))
    with pytest.raises(Refused, match="outside bar5"):
        far.read("hdp.HDP_MEM_POWER_CTRL")
    with pytest.raises(Refused, match="takes a register name"):
        mmio.update("smuio.ROM_SW_CNTL.DATA_SIZE", DATA_SIZE=1)
