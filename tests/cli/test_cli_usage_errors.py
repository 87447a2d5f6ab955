"""Every bad command line is one ``error: ...`` line on stderr and exit 2: a value outside an option's or
argument's choices, an unknown option, an unknown subcommand, for every command of the click tree."""

from __future__ import annotations

import click
import pytest
from clihelp import run

from tinyhw.cli import cli

BAD = "not-a-choice-xyz"


def _walk(group: click.Group, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """(argv path, command) for every command and group under ``group`` (lazily imported ones included)."""
    ctx = click.Context(group)
    found = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        assert cmd is not None, name
        found.append(((*path, name), cmd))
        if isinstance(cmd, click.Group):
            found += _walk(cmd, (*path, name))
    return found


COMMANDS = _walk(cli)


def _choice_cases() -> list[tuple[str, list[str]]]:
    """One command line per Choice parameter, with an invalid value for it (earlier arguments given dummies)."""
    cases = []
    for path, cmd in COMMANDS:
        before: list[str] = []
        for p in cmd.params:
            if isinstance(p, click.Argument):
                if isinstance(p.type, click.Choice):
                    cases.append((" ".join(path) + f" {p.name}", [*path, *before, BAD]))
                before.append("x")
            elif isinstance(p.type, click.Choice) and not p.is_flag:
                cases.append((" ".join(path) + f" {p.opts[0]}", [*path, p.opts[0], BAD]))
    return cases


CHOICES = _choice_cases()


def _typed_cases() -> list[tuple[str, list[str]]]:
    """One command line per option that takes a typed value (a number, a range, a choice, an existing path), with a
    value it cannot take."""
    cases = []
    for path, cmd in COMMANDS:
        for p in cmd.params:
            if isinstance(p, click.Option) and not p.is_flag and not p.count and p.type not in (
                    click.STRING, click.UNPROCESSED) and not (isinstance(p.type, click.Path) and not p.type.exists):
                cases.append((" ".join(path) + f" {p.opts[0]}", [*path, p.opts[0], BAD]))
    return cases


TYPED = _typed_cases()


def _one_line(r, argv: list[str]) -> None:
    lines = r.err.splitlines()
    assert r.code == 2, (argv, r.code, r.err)
    assert len(lines) == 1 and lines[0].startswith("error: "), (argv, r.err)
    assert r.out == "", (argv, r.out)


def test_the_sweep_finds_the_choice_options() -> None:
    names = {name for name, _ in CHOICES}
    assert {"am rings --ring", "link power action", "bench copy --direction", "kernels build --target"} <= names
    assert len(CHOICES) >= 8


@pytest.mark.parametrize("argv", [argv for _, argv in CHOICES], ids=[name for name, _ in CHOICES])
def test_a_value_outside_the_choices_is_one_line(argv: list[str]) -> None:
    r = run(*argv)
    _one_line(r, argv)
    assert BAD in r.err and "--help" in r.err


@pytest.mark.parametrize("argv", [argv for _, argv in TYPED], ids=[name for name, _ in TYPED])
def test_a_value_an_option_cannot_take_is_one_line(argv: list[str]) -> None:
    _one_line(run(*argv), argv)


def test_am_rings_bad_ring_names_the_choices_and_the_help() -> None:
    r = run("--device", "mock:navi31", "am", "rings", "--ring", "nope")
    assert r.err == ("error: invalid value for '--ring': 'nope' is not one of 'compute', 'sdma0'; "
                     "see tinyhw am rings --help\n"), r.err
    assert r.code == 2


@pytest.mark.parametrize("path", [p for p, c in COMMANDS], ids=[" ".join(p) for p, c in COMMANDS])
def test_an_unknown_option_is_one_line(path: tuple[str, ...]) -> None:
    argv = [*path, "--no-such-option-xyz"]
    _one_line(run(*argv), argv)


@pytest.mark.parametrize("path", [()] + [p for p, c in COMMANDS if isinstance(c, click.Group)],
                         ids=["tinyhw"] + [" ".join(p) for p, c in COMMANDS if isinstance(c, click.Group)])
def test_an_unknown_subcommand_is_one_line(path: tuple[str, ...]) -> None:
    argv = [*path, "no-such-command-xyz"]
    r = run(*argv)
    _one_line(r, argv)
    assert "no such command 'no-such-command-xyz'" in r.err


def test_a_missing_argument_is_one_line_and_json_gets_the_document() -> None:
    _one_line(run("flash", "read"), ["flash", "read"])
    r = run("--json", "flash", "read")
    assert r.code == 2 and r.no_result and len(r.err.splitlines()) == 1


def test_a_group_without_its_subcommand_still_shows_its_help() -> None:
    r = run("am")
    assert r.code == 2 and "Commands:" in r.out + r.err
