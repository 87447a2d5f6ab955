"""The ``tinyhw`` command line (click + rich; the only layer that imports them).

Global options: ``tinyhw [--device STR] [--json] [--stats] [-v|-q] COMMAND ...``.
Exit codes: 0 ok, 1 failed while running, 2 refused before touching anything,
3 device not found / locked / environment problem, 130 interrupted.
"""

from __future__ import annotations

import sys

import click

from tinyhw import __version__
from tinyhw.cli.app import App
from tinyhw.errors import TinyhwError

EPILOG = """\b
Devices (--device, or TINYHW_DEVICE):
  pci:0000:03:00.0   vfio:0000:03:00.0   usb  usb:N  usb:BUS-ADDR
  remote:HOST:PORT   mock:navi31   mock:navi31-usb   (options after commas)

\b
Examples:
  tinyhw list
  tinyhw --device mock:navi31-usb probe
  tinyhw --device mock:navi31 --json --stats probe
"""


@click.group(epilog=EPILOG, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--device", "-d", metavar="STR",
              help="Device string (default: $TINYHW_DEVICE, else the single device present).")
@click.option("--json", "json_out", is_flag=True, help="One JSON document on stdout instead of text.")
@click.option("--stats", is_flag=True, help="Write transport counters as one JSON line to stderr at the end.")
@click.option("-v", "--verbose", count=True, help="Show tracebacks on errors.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or status lines on stderr.")
@click.version_option(__version__, prog_name="tinyhw")
@click.pass_context
def cli(ctx: click.Context, device: str | None, json_out: bool, stats: bool, verbose: int, quiet: bool) -> None:
    """Bring up and rescue GPUs from user space: identify boards, recover SPI flash, read registers.

    Every command also runs against an emulated board (mock:navi31, mock:navi31-usb).
    """
    app = App(device, json_out, stats, verbose, quiet)
    ctx.obj = app
    ctx.call_on_close(app.finish)


def _register() -> None:
    from tinyhw.cli.cmd_list import list_cmd
    from tinyhw.cli.cmd_mock import mock
    from tinyhw.cli.cmd_probe import probe
    from tinyhw.cli.firmware_cmd import firmware
    from tinyhw.cli.flash_cmd import flash
    from tinyhw.cli.pci_cmd import pci

    cli.add_command(list_cmd)
    cli.add_command(probe)
    cli.add_command(mock)
    cli.add_command(firmware)
    cli.add_command(flash)
    cli.add_command(pci)
    from tinyhw.cli.am_cmd import am
    from tinyhw.cli.smi_cmd import smi

    cli.add_command(am)
    cli.add_command(smi)
    try:
        from tinyhw.cli.reg_cmd import reg
    except ImportError:  # pragma: no cover - while the register database is being added
        return
    cli.add_command(reg)


_register()


def main(argv: list[str] | None = None) -> None:
    """Entry point: run click, turn tinyhw errors into one line and an exit code."""
    verbose = any(a in ("-v", "--verbose", "-vv") for a in (argv if argv is not None else sys.argv[1:]))
    try:
        cli.main(args=argv, prog_name="tinyhw", standalone_mode=False)
    except TinyhwError as e:
        if verbose:
            import traceback

            traceback.print_exc()
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except click.exceptions.Abort:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except click.exceptions.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(1)
    except Exception as e:  # noqa: BLE001 - a bug must still end in one line, the traceback only with -v
        if verbose:
            raise
        print(f"error: internal error: {type(e).__name__}: {e} (re-run with -v for the traceback)", file=sys.stderr)
        sys.exit(1)
    sys.exit(0)
