"""The one number parser of the command line (tinyhw/cli/numbers.py) and that every command uses it."""

from __future__ import annotations

import pytest
from clihelp import run

from tinyhw.cli.numbers import parse_number
from tinyhw.errors import Refused


@pytest.mark.parametrize(("text", "kw", "value"), [
    ("0", {}, 0), ("31", {}, 31), ("0x1f", {}, 31), ("0X1F", {}, 31), ("0b11111", {}, 31), ("0o37", {}, 31),
    ("010", {}, 10), ("0x1_0000", {}, 0x10000), (" 7 ", {}, 7), ("+7", {}, 7),
    ("4k", {"units": True}, 4096), ("64KiB", {"units": True}, 0x10000), ("2M", {"units": True}, 2 << 20),
    ("8GB", {"units": True}, 8 << 30), ("0x1b", {"units": True}, 0x1B),
    ("0xffffffff", {"maximum": 0xFFFFFFFF}, 2**32 - 1),
    ("0x40", {"align": 4, "maximum": 0x40}, 0x40),
])
def test_accepts(text: str, kw: dict, value: int) -> None:
    assert parse_number(text, "x", **kw) == value


@pytest.mark.parametrize(("text", "kw", "message"), [
    ("abc", {}, "offset 'abc' is not a number"),
    ("", {}, "offset '' is not a number"),
    ("0x-1", {}, "offset '0x-1' is not a number"),
    ("--1", {}, "offset '--1' is not a number"),
    ("1 2", {}, "offset '1 2' is not a number"),
    ("4k", {}, "offset '4k' is not a number"),  # units only where a command takes a size
    ("\u0661", {}, "is not a number"),  # int() would take an Arabic-Indic one
    ("-1", {}, "offset -1 is negative"),
    ("-0x10", {"maximum": 5}, "offset -0x10 is negative"),
    ("6", {"maximum": 5}, "offset 0x6 is outside 0x0-0x5"),
    ("0x1001", {"maximum": 0xFFF, "align": 4}, "offset 0x1001 is outside 0x0-0xfff"),  # range before alignment
    ("0x11", {"maximum": 0xFFF, "align": 4}, "offset 0x11 is not a multiple of 4"),
    ("0", {"minimum": 1}, "offset 0x0 is below 0x1"),
])
def test_refuses_with_one_clear_line(text: str, kw: dict, message: str) -> None:
    with pytest.raises(Refused) as e:
        parse_number(text, "offset", **kw)
    assert message in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_code == 2


def test_no_command_has_its_own_number_parser() -> None:
    """Every command parses numbers with tinyhw.cli.numbers (no int(text, 0) copies in the front end)."""
    import re
    from pathlib import Path

    import tinyhw.cli

    root = Path(tinyhw.cli.__file__).parent
    offenders = [f"{p.name}:{i}" for p in sorted(root.glob("*.py")) if p.name != "numbers.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1)
                 if re.search(r"\bint\([^)]*, 0\)|def (_int|parse_number)\b|type=int\b|IntRange", line)]
    assert offenders == []


@pytest.mark.parametrize(("argv", "message"), [
    (["--device", "mock:navi31", "flash", "read", "--", "-1", "4"], "address -1 is negative"),
    (["--device", "mock:navi31", "flash", "read", "0x-1", "4"], "address '0x-1' is not a number"),
    (["--device", "mock:navi31", "flash", "read", "0", "17m"], "size 0x1100000 is outside 0x1-0x1000000"),
    (["reg", "decode", "smuio.ROM_CNTL", "0x1_0000_0000", "--asic", "navi31"],
     "value 0x100000000 is outside 0x0-0xffffffff"),
    (["reg", "decode", "--asic", "navi31", "--", "smuio.ROM_CNTL", "-1"], "value -1 is negative"),
    (["--device", "pci:0000:00:00.0", "pci", "read", "--", "6", "0"], "bar 0x6 is outside 0x0-0x5"),
    (["--device", "pci:0000:00:00.0", "pci", "read", "--", "5", "-1"], "offset -1 is negative"),
    (["--device", "mock:navi31", "flash", "verify", "x.bin", "--sector-count", "0"], "--sector-count 0x0 is below 0x1"),
    (["--device", "mock:navi31", "flash", "--prescale", "16", "info"], "--prescale 0x10 is outside 0x0-0xf"),
    (["--device", "mock:navi31", "flash", "erase", "--start-sector", "-3", "--yes"], "--start-sector -3 is negative"),
])
def test_commands_use_it(argv: list[str], message: str) -> None:
    r = run(*argv)
    assert r.code == 2, r.err
    assert message in r.err and r.err.count("\n") == 1
