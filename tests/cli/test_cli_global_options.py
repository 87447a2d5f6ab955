"""One rule for the global options (--device, --json, --stats, --record, -v, -q): every command takes them before
its name or after it, with the same meaning; given on both sides they must agree. The top-level --help says so."""

from __future__ import annotations

import json

import click
import pytest
from clihelp import run

from tinyhw.cli import COMMANDS, _global_after, cli, load_command

GLOBAL_OPTS = [o for p in cli.params if isinstance(p, click.Option) for o in p.opts]


def _leaves(path: list[str], command: click.Command) -> list[tuple[list[str], click.Command]]:
    """Every command under ``command`` (itself included), with the words that name it."""
    found = [(path, command)]
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            found += _leaves([*path, name], sub)
    return found


ALL = [pc for name in sorted(COMMANDS) for pc in _leaves([name], load_command(name))]


@pytest.mark.parametrize("path,command", ALL, ids=[" ".join(p) for p, _ in ALL])
def test_every_command_takes_every_global_option_after_its_name(path: list[str], command: click.Command) -> None:
    """No command has an option of its own under a global option's name (with another meaning); each parses them
    all: an unknown option after them is the first thing the command line is refused for."""
    for opt in GLOBAL_OPTS:
        owners = [p for p in command.params if opt in getattr(p, "opts", ())]
        assert len(owners) == 1 and owners[0].callback is _global_after, (path, opt)
    if command.context_settings.get("ignore_unknown_options"):  # flash's disabled commands: refused whatever follows
        return
    r = run(*path, "--json", "-q", "--stats", "-v", "--device", "mock:navi31", "--record", "/nonexistent/x.pcapng",
            "--no-such-option")
    assert r.code == 2 and "no such option '--no-such-option'" in r.err, (path, r.err)


def test_global_options_after_the_command_act_as_before_it() -> None:
    before = run("--json", "--device", "mock:navi31", "reg", "find", "smuio.ROM_CNTL")
    after = run("reg", "find", "smuio.ROM_CNTL", "--json", "--device", "mock:navi31")
    assert before.code == after.code == 0 and json.loads(after.out) == json.loads(before.out)
    r = run("probe", "-d", "mock:navi31", "--stats", "-q")
    assert r.code == 0 and r.stats["round_trips"] > 0


def test_the_help_states_the_rule() -> None:
    text = " ".join(run("--help").out.split())
    assert "give them before the command or after it" in text and "must agree" in text
