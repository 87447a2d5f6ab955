"""``tinyhw smi``: SMU metrics of a board a tinyhw boot brought up (front end of :mod:`tinyhw.boot.amd.smi`).

specs/amd-bringup.md §6.4-§6.5: attaches without re-pointing the SMU (the driver-table address is
recomputed from tinyhw's boot layout), refuses a board no tinyhw boot touched, refreshes live in a
rich table on a terminal (``--interval``, wall seconds), or once (``--once``, ``--json``, and off a terminal
unless ``--watch`` or ``--count`` asks for more).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import Number
from tinyhw.errors import Refused


def _table(doc: dict[str, Any], title: str) -> Any:
    from rich.table import Table

    t = Table(title=title, show_header=False)
    t.add_column("what")
    t.add_column("value")
    c = doc["clocks_mhz"]
    ds = doc["deep_sleep_view"]
    t.add_row("clocks", f"gfx {c['gfx']} MHz ({ds['gfx']})  soc {c['soc']} MHz  mem {c['mem']} MHz ({ds['mem']})  "
                        f"fclk {c['fclk']} MHz")
    a = doc["activity_percent"]
    t.add_row("activity", f"gfx {a['gfx']} %  mem {a['mem']} %")
    p = doc["power_w"]
    t.add_row("power", f"{p['socket']} W of {p['limit']} W")
    t.add_row("temperature", "  ".join(f"{k} {v} C" for k, v in doc["temperatures_c"].items()) or "-")
    f = doc["fan"]
    t.add_row("fan", f"{f['pwm_percent']} %  {f['rpm']} rpm")
    t.add_row("voltage", "  ".join(f"{k} {v} mV" for k, v in doc["voltages_mv"].items() if v) or "-")
    th = {k: v for k, v in doc["throttling_percent"].items() if v}
    t.add_row("throttling", "  ".join(f"{k} {v} %" for k, v in th.items()) or "none")
    return t


@click.command("smi")
@click.option("--once", is_flag=True, help="One refresh, then exit (implied by --json).")
@click.option("--watch", is_flag=True, help="Refresh until Ctrl-C even off a terminal (a table per refresh).")
@click.option("--interval", type=float, default=1.0, show_default=True, metavar="S",
              help="Wall-clock seconds between refreshes (on an emulated board too).")
@click.option("--count", type=Number(), default=0, metavar="N", help="Stop after N refreshes (0: until Ctrl-C).")
@click.pass_obj
def smi(app: App, once: bool, watch: bool, interval: float, count: int) -> None:
    """Show the SMU metrics of a tinyhw-booted AMD GPU: clocks, activity, power, temperatures, fan, throttling.

    Touches only the SMU mailbox (TransferTableSmu2Dram) and reads the table from VRAM; never
    changes the SMU's table address. Refuses a board no tinyhw boot has touched.

    On a terminal the table refreshes in place until Ctrl-C; off a terminal (a pipe, a file) one
    refresh is printed unless --watch or --count N asks for more. --interval is wall time.

    \b
    Examples:
      tinyhw --device mock:navi31 smi --once
      tinyhw --device mock:navi31-usb --json smi
      tinyhw --device usb smi --interval 0.5
      tinyhw --device usb smi --watch --interval 5 >> metrics.log
    """
    from tinyhw.boot.amd import AmGpu, Smi

    if not 0 < interval <= 86400:
        raise Refused(f"--interval {interval} must be more than 0 and at most 86400 seconds")
    if once and (watch or count):
        raise Refused("--once is one refresh: drop --watch and --count")
    if app.json and (watch or count > 1):
        raise Refused("--json writes one document: drop --watch and --count")
    transport = app.open_transport(writes=False)
    gpu = AmGpu(transport, warn=lambda line: click.echo(line, err=True))
    session = Smi(gpu)
    where = transport.identity().location
    if once or app.json or (not watch and not count and not sys.stdout.isatty()):
        count = 1  # off a terminal, unasked, one refresh: a pipe or a log would fill as fast as the board answers
    live = sys.stdout.isatty() and not app.json and count != 1
    shown = 0
    display: Any = None
    try:
        while True:
            c0 = transport.counters.copy()
            doc = session.refresh()
            delta = transport.counters - c0
            doc = {"device": where, "time_s": round(gpu.clock.now(), 6), **doc,
                   "refresh": {"usb_transfers": delta.usb_transfers, "reg_reads": delta.reg_reads,
                               "reg_writes": delta.reg_writes, "bytes_in": delta.bytes_in}}
            shown += 1
            title = f"{where}  smu metrics  (refresh {shown})"
            if app.json:
                app.emit(doc, lambda: None)
            elif live:
                if display is None:
                    from rich.live import Live

                    display = Live(_table(doc, title), console=app.out, auto_refresh=False)
                    display.start()
                display.update(_table(doc, title), refresh=True)
            else:
                app.out.print(_table(doc, title))
            if count and shown >= count:
                break
            gpu.clock.sleep(interval)  # on hardware the wall wait; on an emulated board its clock moves on ...
            if gpu.clock.virtual:
                time.sleep(interval)  # ... and the wall waits too: --interval is wall time everywhere
    finally:
        if display is not None:
            display.stop()
