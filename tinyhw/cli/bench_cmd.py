"""``tinyhw bench``: measurements (copy bandwidth) on any transport, emulated boards included."""

from __future__ import annotations

import os
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import Number
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
@click.option("--repeat", type=Number(minimum=1, maximum=1000), default=3, show_default=True, help="Copies per size.")
@click.option("--bar", "bar_index", type=Number(maximum=5), default=None,
              help="BAR to copy through [default: the largest memory BAR].")
@click.option("--offset", default=None,
              help="Byte offset (a multiple of 4) in the BAR, the buffer (staging) or VRAM (sram, dma) [default: 0; "
                   "VRAM 128 MiB for sram and dma].")
@click.option("--memory", type=click.Choice(["pinned", "pageable", "both"]), default="both", show_default=True,
              help="cuda:N only: host memory pinned by the driver, ordinary pageable memory, or both.")
@click.option("--yes", is_flag=True, help="Go ahead without asking (the copies overwrite device memory).")
@click.option("--path", "copy_path", type=click.Choice(["auto", "bar", "sram", "dma", "staging"]), default="auto",
              show_default=True,
              help="auto: the fastest verified path the device supports now (sram on a booted board behind the usb "
                   "bridge, dma on a booted vfio: or mock:navi31, else bar). bar: through the BAR mapping (streamed "
                   "over the usb bridge). sram: usb bridge only, a booted board: the bridge's SRAM and the GPU's "
                   "SDMA engine (copy-in/copy-out protocols). dma: vfio: or mock:navi31, a booted board: a pinned "
                   "host DMA buffer and the GPU's SDMA engine. staging: any vfio: device: only the host memcpy into "
                   "and out of a pinned DMA buffer (no device transfer).")
@click.option("--protocol", type=click.Choice(["tinyhw", "seed"]), default="tinyhw", show_default=True,
              help="--path sram copy-in: tinyhw's pipelined protocol or the published (seed) one.")
@click.pass_obj
def copy_cmd(app: App, direction: str, sizes: str | None, repeat: int, bar_index: int | None, offset: str | None,
             memory: str, copy_path: str, protocol: str, yes: bool) -> None:
    """Copy bandwidth host->device and device->host through the fastest verified path the device supports (or
    the one --path names; on cuda:N, the CUDA driver's async copies), every copy verified.

    Each size is copied --repeat times per direction; min/median/max MB/s, the bytes verified (read
    back and compared), and the fraction of the link's theoretical limit (PCIe speed x width from
    config space; the USB link speed of a bridge). On an emulated board the time is the board's
    modelled time (labelled so), from the emulator's per-transfer costs; on mock:navi31-usb by default the
    hybrid clock: those modelled device costs plus this host's measured CPU time between transfers (each
    row's "clock": hybrid; the device option clock=device, or TINYHW_CLOCK=device, gives the exact,
    reproducible device-time figures instead).
    Over remote: each copy is timed on this client's wall clock for its whole batch round trip, link and server
    included (measured; "time": client, `"timer": "client"`), and the server's own time of the same batches, the
    link excluded, is shown beside it where the server reports it (`server_mbps_median`, `server_clock`: wall,
    measured there, or virtual, modelled by the emulated board it serves).
    The table title and every --json row name the path (`path`, `path_name`, `path_auto`).

    Verification: the sram and dma paths (SDMA between host and VRAM) are checked through the BAR0 VRAM
    aperture too: before a copy-in the destination is poisoned through BAR0 and read back through it after;
    a copy-out's source is written through BAR0 and the path's staging memory (bridge SRAM, pinned buffer)
    poisoned before it. Copies up to 64 KiB are checked whole that way, larger ones in 512-byte windows
    (first, last, one per 256 KiB), the rest through the path's own read-back (rows: `verified_by`,
    `verified_independent`). A wrong byte fails the command (exit 1) naming its offset.

    cuda:N (the cuda extra: pip install -e '.[cuda]' from the checkout): cuMemcpyHtoDAsync/cuMemcpyDtoHAsync from pinned
    and pageable host memory, timed with CUDA events, each copy verified by hash; the limit is the GPU's
    current PCIe link from sysfs. It copies into buffers it allocates (no --yes, --bar, --offset or --path).

    Touches: overwrites SIZE bytes of device memory at --offset (on a real board this is VRAM: confirm
    with --yes; emulated boards need no confirmation).

    \b
    Examples:
      tinyhw --device mock:navi31-usb bench copy --sizes 4K,64K
      tinyhw --device pci:0000:03:00.0 --json bench copy --direction h2d --repeat 5 --yes
      tinyhw --device cuda:0 bench copy --sizes 1M,256M --memory pinned
      tinyhw --device mock:navi31-usb am boot --yes && tinyhw --device mock:navi31-usb bench copy
      tinyhw --device vfio:0000:03:00.0 bench copy --path dma --sizes 1M,64M --yes

    --path dma (vfio:ADDR or mock:navi31, after `am boot`): host memory -> VRAM and back through a pinned
    DMA buffer the GPU reaches at its IOVA (VFIO type1), SDMA0 pulling/pushing it, fence-polled, at VRAM
    offset 128 MiB by default; the time includes the host memcpy into/out of the buffer. --path staging
    (any vfio: device): that host memcpy alone, wall-clock timed, marked host_only, no link limit.

    --path sram (usb bridge, after `am boot`): host->VRAM through the bridge's 512 KiB SRAM and SDMA
    copy-in, VRAM->host through SDMA and the SRAM copy-out (specs/asm24-usb-bridge.md §9), at VRAM
    offset 128 MiB by default. The measured (or, emulated, modelled) MB/s is tinyhw's own host: copy-in
    keeps up to 4 bulk transfers queued (libusb's asynchronous transfers; one worker thread with one
    transfer in flight where they are unavailable or TINYHW_USB_QUEUE=worker) while arms and fence
    reads go on; copy-out waits for each transfer in turn. Each row also shows the timing model's MB/s
    for that same host, device costs only (`model_mbps`: no host cpu time, no fitted parameter) and names
    it (`model_host`: "async", "worker" or "sync").
    """
    from tinyhw.bench import parse_sizes, plan_copy, run_plan
    from tinyhw.cli.numbers import parse_number
    from tinyhw.errors import Refused

    dirs = ("h2d", "d2h") if direction == "both" else (direction,)
    if _is_cuda(app):
        if copy_path != "auto":
            raise Refused(f"--path {copy_path} applies to bar, sram, dma and staging copies; cuda:N copies through "
                          "the cuda driver")
        _cuda_copy(app, dirs, sizes, repeat, bar_index, offset or "0", memory)
        return
    if memory != "both":
        raise Refused("--memory applies to cuda:N devices only (bar copies have no host memory kind)")
    transport = app.open_transport(writes=True)
    size_list = parse_sizes(sizes or (EMULATED_SIZES if transport.emulated else HARDWARE_SIZES))
    start = None if offset is None else parse_number(offset, "--offset", units=True)
    plan = plan_copy(transport, size_list, copy_path, offset=start, bar=bar_index)  # refusals before the prompt
    if not transport.emulated and plan.path != "staging":
        app.confirm(yes, f"bench copy overwrites {plan.overwrites} on {transport.identity().location}")
    results = run_plan(transport, plan, size_list, dirs, repeat, protocol=protocol, progress=ProgressBar(app),
                       log=app.log)
    doc = {"results": [r.as_dict() for r in results]}
    app.emit(doc, lambda: _human(app, doc["results"]))


def _is_cuda(app: App) -> bool:
    from tinyhw.transport.devstr import parse_device

    text = app.device if app.device is not None else (os.environ.get("TINYHW_DEVICE") or None)
    return text is not None and parse_device(text).kind == "cuda"


def _cuda_copy(app: App, dirs: tuple[str, ...], sizes: str | None, repeat: int, bar_index: int | None,
               offset: str, memory: str) -> None:
    """``bench copy`` on cuda:N: refusals first, then the GPU is opened (here, not by the feature)."""
    from tinyhw.bench import cuda_copy_bench, parse_sizes
    from tinyhw.connect import open_cuda
    from tinyhw.errors import Refused

    if bar_index is not None or offset.strip() not in ("0", "0x0"):
        raise Refused("--bar and --offset apply to bar copies; cuda:N copies into buffers the bench allocates")
    size_list = parse_sizes(sizes or HARDWARE_SIZES)
    memories = ("pinned", "pageable") if memory == "both" else (memory,)
    device = app.device if app.device is not None else os.environ["TINYHW_DEVICE"]
    with open_cuda(device) as gpu:
        results, summary = cuda_copy_bench(gpu, size_list, dirs, repeat, memories, ProgressBar(app), app.log)
    doc = {**summary, "results": [r.as_dict() for r in results]}
    app.emit(doc, lambda: _human(app, doc["results"], doc))


def _size(n: int) -> str:
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


def _human(app: App, rows: list[dict[str, Any]], gpu: dict[str, Any] | None = None) -> None:
    from rich.table import Table

    def num(v: float | None, fmt: str = "{:.1f}") -> str:
        return "-" if v is None else fmt.format(v)

    title = None
    if rows and not gpu:
        first = rows[0]
        how = f"--path {first['path_name']}{' (auto)' if first.get('path_auto') else ''}" if first.get("path_name") \
            else None
        title = f"bench copy through {first['path']}" + (f" [{how}]" if how else "")
    table = Table(box=None, pad_edge=False, header_style="bold", title=title, title_justify="left")
    cols = ("direction", "memory") if gpu else ("direction",)
    for col in ("dir", "memory") if gpu else cols:
        table.add_column(col)
    pipelined = any(r.get("model_mbps") is not None for r in rows)
    served = any(r.get("server_mbps_median") is not None for r in rows)
    extra = ("model",) if pipelined else ()
    extra += ("server",) if served else ()
    for col in ("size", "MB/s min", "median", "max", "verified", "of limit", *extra, "time"):
        table.add_column(col, justify="left" if col == "time" else "right")
    for r in rows:
        frac = r["fraction_of_limit"]
        model = (num(r.get("model_mbps")),) if pipelined else ()
        model += (num(r.get("server_mbps_median")),) if served else ()
        table.add_row(*(r[c] for c in cols), _size(r["size"]), num(r["mbps_min"]), num(r["mbps_median"]),
                      num(r["mbps_max"]), _size(r["verified"]) if r["verified"] else "-",
                      "-" if frac is None else f"{frac:.1%}", *model,
                      r["skipped"] or _timing(r))
    if gpu:
        app.out.print(f"{gpu['device']}: {gpu['gpu']}, cuda driver {gpu['driver_version']}", markup=False)
    app.out.print(table)
    limit = next((r["link_limit_mbps"] for r in rows if r["link_limit_mbps"]), None)
    if gpu:
        app.out.print(f"link limit: {num(limit, '{:.0f}')} MB/s ({gpu['link_source']})", markup=False)
    else:
        app.out.print(f"link limit: {num(limit, '{:.0f}')} MB/s; path: {rows[0]['path'] if rows else '-'}",
                      markup=False)
    if any(r.get("clock") == "hybrid" for r in rows):
        app.out.print("time: hybrid clock = the emulator's modelled device time plus this host's measured cpu time "
                      "between transfers (clock=device for the exact device-time figures)", markup=False)
    if any(r.get("timer") == "client" for r in rows):
        app.out.print("time: client = this client's measured wall time of each copy's whole batch round trip "
                      "to the remote server (the link and the server included)", markup=False)
    if served:
        kinds = {r.get("server_clock") for r in rows if r.get("server_mbps_median") is not None}
        how = " and ".join(sorted(("modelled by the emulated board it serves" if k == "virtual"
                                   else "measured on its wall clock") for k in kinds))
        app.out.print(f"server column: median MB/s on the server's own time of each copy's batches, the link "
                      f"excluded ({how})", markup=False)
    hosts = sorted({f"{r['direction']} {r['model_host']}" for r in rows if r.get("model_host")})
    if hosts:
        app.out.print(f"model column: the timing model of this run's host, device costs only ({', '.join(hosts)}; "
                      "async: queued bulk transfers, worker: one bulk thread, sync: each transfer waited for)",
                      markup=False)
    _chart(app, rows)


def _timing(r: dict[str, Any]) -> str:
    """How a row was timed: measured (wall), modelled (device clock), hybrid clock, host only, client wall (remote)."""
    if r.get("timer") == "client":
        return "client"
    if r["modelled"]:
        return "hybrid clock" if r.get("clock") == "hybrid" else "modelled"
    return "host only" if r.get("host_only") else "measured"


def _chart(app: App, rows: list[dict[str, Any]], width: int = 40) -> None:
    """Median bandwidth versus size, one bar per row (log-free: bars scale to the fastest result)."""
    done = [r for r in rows if r["mbps_median"]]
    if not done:
        return
    top = max(r["mbps_median"] for r in done)
    app.out.print("median MB/s by size:")
    for r in done:
        n = max(1, round(width * r["mbps_median"] / top))
        what = f"{r['direction']} {r['memory']:8}" if "memory" in r else r["direction"]
        app.out.print(f"  {what} {_size(r['size']):>5} {'#' * n} {r['mbps_median']:.1f}", markup=False)
