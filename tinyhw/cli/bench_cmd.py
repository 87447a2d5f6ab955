"""``tinyhw bench``: measurements (copy bandwidth) on any transport, emulated boards included."""

from __future__ import annotations

from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.progressbar import ProgressBar

EMULATED_SIZES = "4K,64K,1M"
HARDWARE_SIZES = "4K,64K,1M,16M,256M"


@click.group()
def bench() -> None:
    """Measure the device: copy bandwidth host<->device against the link's limit."""


@bench.command("copy")
@click.option("--direction", type=click.Choice(["h2d", "d2h", "both"]), default="both", show_default=True,
              help="h2d: host to device; d2h: device to host.")
@click.option("--sizes", metavar="LIST", default=None,
              help=f"Copy sizes, K/M/G binary [default: {HARDWARE_SIZES}; {EMULATED_SIZES} on emulated boards].")
@click.option("--repeat", type=click.IntRange(1, 1000), default=3, show_default=True, help="Copies per size.")
@click.option("--bar", "bar_index", type=click.IntRange(0, 5), default=None,
              help="BAR to copy through [default: the largest memory BAR].")
@click.option("--offset", default="0", show_default=True, help="Byte offset in the BAR (a multiple of 4).")
@click.option("--yes", is_flag=True, help="Go ahead without asking (the copies overwrite device memory).")
@click.pass_obj
def copy_cmd(app: App, direction: str, sizes: str | None, repeat: int, bar_index: int | None, offset: str,
             yes: bool) -> None:
    """Copy bandwidth host->device and device->host through the device's BAR, every copy verified.

    Each size is copied --repeat times per direction; min/median/max MB/s, the bytes verified (read
    back and compared), and the fraction of the link's theoretical limit (PCIe speed x width from
    config space; the USB link speed of a bridge). On an emulated board the time is the board's
    modelled time (labelled so), from the emulator's per-transfer costs.

    Touches: overwrites SIZE bytes of device memory at --offset in the BAR (on a real board this is
    VRAM: confirm with --yes; emulated boards need no confirmation).

    \b
    Examples:
      tinyhw --device mock:navi31-usb bench copy --sizes 4K,64K
      tinyhw --device pci:0000:03:00.0 --json bench copy --direction h2d --repeat 5 --yes
    """
    from tinyhw.bench import copy_bench, parse_sizes, pick_bar
    from tinyhw.cli.flash_cmd import parse_number

    transport = app.open_transport(writes=True)
    size_list = parse_sizes(sizes or (EMULATED_SIZES if transport.emulated else HARDWARE_SIZES))
    start = parse_number(offset)
    if not transport.emulated:
        info = pick_bar(transport, bar_index)
        app.confirm(yes, f"bench copy overwrites up to {max(size_list):#x} bytes of bar{info.index} at offset "
                         f"{start:#x} on {transport.identity().location}")
    dirs = ("h2d", "d2h") if direction == "both" else (direction,)
    results = copy_bench(transport, size_list, dirs, repeat, bar_index, start, ProgressBar(app), app.log)
    doc = {"results": [r.as_dict() for r in results]}
    app.emit(doc, lambda: _human(app, doc["results"]))


def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _human(app: App, rows: list[dict[str, Any]]) -> None:
    from rich.table import Table

    def num(v: float | None, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v)

    table = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("direction", "size", "MB/s min", "median", "max", "verified", "of limit", "time"):
        table.add_column(col, justify="left" if col in ("direction", "time") else "right")
    for r in rows:
        frac = r["fraction_of_limit"]
        table.add_row(r["direction"], _size(r["size"]), num(r["mbps_min"]), num(r["mbps_median"]), num(r["mbps_max"]),
                      _size(r["verified"]) if r["verified"] else "-", "-" if frac is None else f"{frac:.1%}",
                      r["skipped"] or ("modelled" if r["modelled"] else "measured"))
    app.out.print(table)
    limit = next((r["link_limit_mbps"] for r in rows if r["link_limit_mbps"]), None)
    app.out.print(f"link limit: {num(limit, '{:.0f}')} MB/s; path: {rows[0]['path'] if rows else '-'}")
    _chart(app, rows)


def _chart(app: App, rows: list[dict[str, Any]], width: int = 40) -> None:
    """Median bandwidth versus size, one bar per row (log-free: bars scale to the fastest result)."""
    done = [r for r in rows if r["mbps_median"]]
    if not done:
        return
    top = max(r["mbps_median"] for r in done)
    app.out.print("median MB/s by size:")
    for r in done:
        n = max(1, round(width * r["mbps_median"] / top))
        app.out.print(f"  {r['direction']} {_size(r['size']):>5} {'#' * n} {r['mbps_median']:.1f}", markup=False)
