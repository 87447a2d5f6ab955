"""The ``tinyhw`` command line (click + rich; the only layer that imports them).

Global options: ``tinyhw [--device STR] [--json] [--stats] [--record FILE] [-v|-q] COMMAND ...``; every command
also takes them after its name (``tinyhw flash dump out.bin --device mock:navi31``), one rule for all.
Exit codes: 0 ok, 1 failed while running, 2 refused before touching anything,
3 device not found / locked / environment problem, 130 interrupted.
"""

from __future__ import annotations

import sys
import weakref
from typing import Any, NoReturn

import click

from tinyhw import __version__
from tinyhw.boards import registry
from tinyhw.cli.app import EMITTED, INVOCATION, App
from tinyhw.errors import TinyhwError


def epilog() -> str:
    """The help's closing text: every device kind and emulated board of the board registry, and examples."""
    from tinyhw.boards.registry import REGISTRY

    width = 26  # a longer form has its description on the next line
    rows = [f"  {e.usage:<{width}}{e.description}" if len(e.usage) < width else f"  {e.usage}\n  {'':<{width}}"
            f"{e.description}" for e in REGISTRY]
    return "\n".join(["\b", "Devices (--device, or TINYHW_DEVICE; options after commas, e.g. mock:navi31,strict):",
                      *rows, "", "\b", "Examples:", "  tinyhw list", "  tinyhw --device mock:navi31-usb probe",
                      "  tinyhw --device mock:navi31 --json --stats probe", ""])


# Subcommands load lazily (click's lazy-group pattern): ``tinyhw --help`` imports no feature package. Each
# entry: name -> ("module:attribute", short help shown by --help). tests/cli/test_cli_lazy.py checks every entry
# imports and is the command the entry names.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("tinyhw.cli.list_cmd:list_cmd", "List GPUs in sysfs, ASM24 USB bridges and the emulated boards."),
    "probe": ("tinyhw.cli.probe_cmd:probe", "Identify the device: ids, names, BARs, PCIe link, Resizable BAR."),
    "mock": ("tinyhw.cli.mock_cmd:mock", "Emulated boards: reset the flash file, power-cycle, serve as a USB gadget."),
    "firmware": ("tinyhw.cli.firmware_cmd:firmware", "Inspect and compare firmware images (IFWI, VBIOS, amdgpu, GSP)."),
    "flash": ("tinyhw.cli.flash_cmd:flash",
              "Navi31 SPI flash: read, back up, verify, rewrite; update through the PSP."),
    "link": ("tinyhw.cli.link_cmd:link", "The PCIe link behind the ASM24 USB bridge: power on/off, LTSSM state."),
    "pci": ("tinyhw.cli.pci_cmd:pci", "Native PCIe: list, decode config space, peek/poke BARs, bind vfio."),
    "reg": ("tinyhw.cli.reg_cmd:reg", "Registers by name: find, read, write, decode; IP discovery."),
    "bench": ("tinyhw.cli.bench_cmd:bench", "Measure copy bandwidth host<->device against the link limit."),
    "prof": ("tinyhw.cli.prof_cmd:prof",
             "AMD SQ thread traces and counters: capture on a board, decode (tinygrad's too)."),
    "kernels": ("tinyhw.cli.kernels_cmd:kernels", "Probe kernels: list, build, run (cpu, cuda:N, AMD), exec (AMD)."),
    "serve": ("tinyhw.cli.serve_cmd:serve", "Serve a device to remote: clients, or to flashrom (serprog)."),
    "am": ("tinyhw.cli.am_cmd:am",
           "AMD GPUs without amdgpu: identify, boot, reset; status, rings, waves, hang-report."),
    "nv": ("tinyhw.cli.nv_cmd:nv", "NVIDIA bring-up without a driver: boot GSP-RM (FWSEC, booter), info, reset."),
    "smi": ("tinyhw.cli.smi_cmd:smi", "SMU metrics of a tinyhw-booted AMD GPU: clocks, power, temperatures, fan."),
    "trace": ("tinyhw.cli.trace_cmd:trace",
              "Recorded sessions (--record): show, replay, diff, import/export mmiotrace."),
}


#: the global options' parameter names and the :class:`App` attribute each sets
GLOBAL_ATTRS = {"device": "device", "json_out": "json", "stats": "want_stats", "record": "record",
                "force_record": "force_record", "verbose": "verbose", "quiet": "quiet"}


def _global_after(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """A global option given after a command's name: set on the invocation's App as if given before it; a value
    given on both sides must be the same (refused, exit 2, otherwise)."""
    if value is None or value is False or value == 0:
        return
    from tinyhw.errors import Refused

    app = ctx.find_object(App)
    if app is None:  # a command run outside the tinyhw group (a test invoking it alone): nothing to set
        return
    attr = GLOBAL_ATTRS[param.name or ""]
    before = getattr(app, attr)
    if attr == "verbose":
        app.verbose = before + value
    elif isinstance(value, bool):
        setattr(app, attr, True)
    elif before is not None and before != value:
        flag = param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0]
        raise Refused(f"{flag} {before} before the command and {flag} {value} after it disagree",
                      hint="give it once")
    else:
        setattr(app, attr, value)


#: the commands :func:`add_global_options` has given the global options already
_WITH_GLOBALS: weakref.WeakSet[click.Command] = weakref.WeakSet()


def add_global_options(command: click.Command) -> click.Command:
    """Give ``command`` and every command under it the global options too (hidden in their --help, which the
    top-level help documents): one rule, every command accepts them before or after its name."""
    if command not in _WITH_GLOBALS:
        have = {o for p in command.params for o in getattr(p, "opts", ())}
        for p in cli.params:
            if isinstance(p, click.Option) and not have & set(p.opts):
                kw: dict[str, Any] = {"count": True} if p.count else {"is_flag": True} if p.is_flag else {
                    "metavar": p.metavar, "type": p.type}
                command.params.append(click.Option([p.name or "", *p.opts], hidden=True, expose_value=False,
                                                   callback=_global_after, **kw))
        _WITH_GLOBALS.add(command)
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            add_global_options(sub)
    return command


def load_command(name: str) -> click.Command:
    """Import the module that defines subcommand ``name`` and return the command (with the global options after
    it too, :func:`add_global_options`)."""
    import importlib

    module, attr = COMMANDS[name][0].split(":")
    command: click.Command = getattr(importlib.import_module(module), attr)
    command.short_help = COMMANDS[name][1]  # one source for the line --help shows without importing
    return add_global_options(command)


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when one of them runs (or a test asks for it)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        """Every subcommand's name, the lazily imported ones included, sorted."""
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        """The subcommand ``cmd_name``, importing its module only now; None when there is none."""
        if cmd_name in COMMANDS:
            return load_command(cmd_name)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The "Commands" section of ``--help`` from the table of one-line summaries, importing nothing."""
        rows = [(name, COMMANDS[name][1]) for name in sorted(COMMANDS)]
        with formatter.section("Commands"):
            formatter.write_dl(rows)


@click.group(cls=LazyGroup, epilog=epilog(),
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--device", "-d", metavar="STR",
              help="Device string (default: $TINYHW_DEVICE, else the single device present).")
@click.option("--json", "json_out", is_flag=True, help="One JSON document on stdout instead of text.")
@click.option("--stats", is_flag=True, help="Write transport counters as one JSON line to stderr at the end.")
@click.option("--record", metavar="FILE", type=click.Path(),
              help="Append every device operation of the command to a new trace file (see tinyhw trace); a "
                   "command refused after the device opened removes it again.")
@click.option("--force-record", is_flag=True, help="Let --record FILE replace an existing file.")
@click.option("-v", "--verbose", count=True, help="Show tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or status lines on stderr.")
@click.version_option(__version__, prog_name="tinyhw")
@click.pass_context
def cli(ctx: click.Context, device: str | None, json_out: bool, stats: bool, record: str | None,
        force_record: bool, verbose: int, quiet: bool) -> None:
    """Bring up and rescue GPUs from user space: identify boards, recover and update SPI flash, read
    registers, boot AMD GPUs, run and profile kernels, record and replay sessions.

    Every command also runs against an emulated board ({boards}).

    The options below are global: give them before the command or after it (tinyhw --device
    mock:navi31 probe, or tinyhw probe --device mock:navi31); given on both sides they must agree.
    Exit codes: 0 done (diff and verify: alike), 1 failed or differs, 2 refused before touching
    anything, 3 device missing or locked or another environment problem, 130 interrupted.
    """
    app = App(device, json_out, stats, verbose, quiet, record, force_record)
    ctx.obj = app
    ctx.call_on_close(app.finish)


# the emulated boards the description names come from the board registry (a new board shows without an edit here)
cli.help = (cli.help or "").replace("{boards}", ", ".join(e.name for e in registry.boards()))


def _fail(message: str, exit_code: int, hint: str | None, json_mode: bool,
          context: dict[str, str] | None = None) -> NoReturn:
    """One line on stderr; with --json also ``{"error": {"message", "exit_code", "hint", ...}}`` on stdout (plus
    the error's context, e.g. ``step``), unless the command already wrote its document (which then carries the
    result, e.g. a verify mismatch)."""
    print(f"error: {message}" + (f"; {hint}" if hint else ""), file=sys.stderr)
    if json_mode and not EMITTED["json"]:
        import json

        doc = {"error": {"message": message, "exit_code": exit_code, "hint": hint, **(context or {})}}
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    sys.exit(exit_code)


def _global_flags(args: list[str]) -> tuple[bool, bool]:
    """(--json, -v) among the global options, before the subcommand's own arguments."""
    json_mode = verbose = False
    for a in args:
        if a == "--":
            break
        json_mode = json_mode or a == "--json"
        verbose = verbose or a in ("-v", "--verbose") or (a.startswith("-v") and set(a[1:]) == {"v"})
    return json_mode, verbose


def usage_message(e: click.ClickException) -> str:
    """click's message for a bad command line (an unknown option or subcommand, a value not among an option's
    choices, a missing argument) as one lowercase line: ``invalid value for '--ring': 'nope' is not one of ...``."""
    text = " ".join(e.format_message().split()).replace(". Did you mean ", " (did you mean ")
    if "(did you mean " in text:
        text = text.rstrip(".") + ")"
    return text[:1].lower() + text[1:].rstrip(".")


def usage_hint(e: click.ClickException) -> str:
    """Where to read the command's usage: ``see tinyhw am rings --help`` (the command the error came from)."""
    ctx = getattr(e, "ctx", None)
    return f"see {ctx.command_path} --help" if ctx is not None else "see --help"


def main(argv: list[str] | None = None) -> None:
    """Entry point: run click, turn tinyhw errors into one line (and a JSON document with --json) and an exit code."""
    args = list(argv if argv is not None else sys.argv[1:])
    EMITTED["json"] = False
    INVOCATION["argv"] = args
    json_mode, verbose = _global_flags(args)
    try:
        cli.main(args=args, prog_name="tinyhw", standalone_mode=False)
    except TinyhwError as e:
        if verbose:
            import traceback

            traceback.print_exc()
        _fail(e.message, e.exit_code, e.hint, json_mode, e.context)
    except (click.exceptions.Abort, KeyboardInterrupt):
        _fail("interrupted", 130, None, json_mode)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except click.ClickException as e:
        no_args = type(e).__name__ == "NoArgsIsHelpError"  # a group run without its subcommand
        if no_args and not json_mode:
            e.show()  # the group's help is the answer to a bare `tinyhw am`
            sys.exit(e.exit_code)
        message = "a subcommand is missing" if no_args else usage_message(e)
        _fail(message, e.exit_code, usage_hint(e), json_mode)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as e:  # a bug must still end in one line, the traceback only with -v
        if verbose:
            raise
        _fail(f"internal error: {type(e).__name__}: {e}", 1, "re-run with -v for the traceback", json_mode)
    sys.exit(0)
