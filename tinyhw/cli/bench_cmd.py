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
@click.option("--offset", default="0", show_default=True, help="Byte offset in the BAR (a multiple of 4).")
@click.option("--memory", type=click.Choice(["pinned", "pageable", "both"]), default="both", show_default=True,
              help="cuda:N only: host memory pinned by the driver, ordinary pageable memory, or both.")
@click.option("--yes", is_flag=True, help="Go ahead without asking (the copies overwrite device memory).")
@click.option("--path", "copy_path", type=click.Choice(["bar", "sram", "dma", "staging"]), default="bar",
              show_default=True,
              help="bar: through the BAR mapping (streamed over the usb bridge). sram: usb bridge only, a booted "
                   "board: the bridge's SRAM and the GPU's SDMA engine (copy-in/copy-out protocols). dma: vfio: or "
                   "mock:navi31, a booted board: a pinned host DMA buffer and the GPU's SDMA engine. staging: any "
                   "vfio: device: only the host memcpy into and out of a pinned DMA buffer (no device transfer).")
@click.option("--protocol", type=click.Choice(["tinyhw", "seed"]), default="tinyhw", show_default=True,
              help="--path sram copy-in: tinyhw's pipelined protocol or the published (seed) one.")
@click.pass_obj
def copy_cmd(app: App, direction: str, sizes: str | None, repeat: int, bar_index: int | None, offset: str,
             memory: str, copy_path: str, protocol: str, yes: bool) -> None:
    """Copy bandwidth host->device and device->host through the device's BAR (or, on cuda:N, the CUDA
    driver's async copies), every copy verified.

    Each size is copied --repeat times per direction; min/median/max MB/s, the bytes verified (read
    back and compared), and the fraction of the link's theoretical limit (PCIe speed x width from
    config space; the USB link speed of a bridge). On an emulated board the time is the board's
    modelled time (labelled so), from the emulator's per-transfer costs; on mock:navi31-usb by default the
    hybrid clock: those modelled device costs plus this host's measured CPU time between transfers (each
    row's "clock": hybrid; the device option clock=device, or TINYHW_CLOCK=device, gives the exact,
    reproducible device-time figures instead).

    cuda:N (the cuda extra: pip install 'tinyhw[cuda]'): cuMemcpyHtoDAsync/cuMemcpyDtoHAsync from pinned
    and pageable host memory, timed with CUDA events, each copy verified by hash; the limit is the GPU's
    current PCIe link from sysfs. It copies into buffers it allocates (no --yes, --bar or --offset).

    Touches: overwrites SIZE bytes of device memory at --offset in the BAR (on a real board this is
    VRAM: confirm with --yes; emulated boards need no confirmation).

    \b
    Examples:
      tinyhw --device mock:navi31-usb bench copy --sizes 4K,64K
      tinyhw --device pci:0000:03:00.0 --json bench copy --direction h2d --repeat 5 --yes
      tinyhw --device cuda:0 bench copy --sizes 1M,256M --memory pinned
      tinyhw --device mock:navi31-usb am boot --yes && tinyhw --device mock:navi31-usb bench copy --path sram
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
    from tinyhw.bench import copy_bench, parse_sizes, pick_bar
    from tinyhw.cli.numbers import parse_number

    dirs = ("h2d", "d2h") if direction == "both" else (direction,)
    if _is_cuda(app):
        _cuda_copy(app, dirs, sizes, repeat, bar_index, offset, memory)
        return
    if memory != "both":
        from tinyhw.errors import Refused

        raise Refused("--memory applies to cuda:N devices only (bar copies have no host memory kind)")
    transport = app.open_transport(writes=True)
    size_list = parse_sizes(sizes or (EMULATED_SIZES if transport.emulated else HARDWARE_SIZES))
    start = parse_number(offset, "--offset", units=True)
    via = None
    if copy_path in ("dma", "staging"):
        if bar_index is not None:
            from tinyhw.errors import Refused

            raise Refused(f"--bar applies to --path bar; --path {copy_path} copies through a host dma buffer")
        _dma_bench(app, transport, copy_path, size_list, dirs, repeat, start, yes)
        return
    if copy_path == "sram":
        if bar_index is not None:
            from tinyhw.errors import Refused

            raise Refused("--bar applies to --path bar; --path sram copies into VRAM through the bridge's sram")
        start = start or SRAM_DEFAULT_OFFSET
        if not transport.emulated:
            app.confirm(yes, f"bench copy overwrites up to {max(size_list):#x} bytes of VRAM at offset {start:#x} "
                             f"through the bridge sram on {transport.identity().location}")
        via = _sram_path(transport, protocol)
    elif not transport.emulated:
        info = pick_bar(transport, bar_index)
        app.confirm(yes, f"bench copy overwrites up to {max(size_list):#x} bytes of bar{info.index} at offset "
                         f"{start:#x} on {transport.identity().location}")
    results = copy_bench(transport, size_list, dirs, repeat, bar_index, start, ProgressBar(app), app.log, via=via)
    doc = {"results": [r.as_dict() for r in results]}
    app.emit(doc, lambda: _human(app, doc["results"]))


# VRAM offset of --path sram copies: above the copy engine's own layout (page tables, rings: < 83 MiB)
SRAM_DEFAULT_OFFSET = 128 << 20


def _sram_path(transport: Any, protocol: str) -> Any:
    """The bridge SRAM + SDMA copy path (tinyhw.boot.usbcopy) as the bench's CopyPath; the copy engine is brought
    up here (page tables, hubs, SDMA ring) on a board `am boot` booted."""
    from tinyhw.bench import CopyPath
    from tinyhw.boot import usbcopy_model
    from tinyhw.boot.gpu import AmGpu
    from tinyhw.boot.state import read_state
    from tinyhw.boot.usbcopy import open_copier
    from tinyhw.errors import Refused
    from tinyhw.usb.queued import queue_kind

    if getattr(transport, "bridge", None) is None:
        raise Refused("--path sram needs the usb bridge (usb or mock:navi31-usb); use --path bar here")
    state = read_state(AmGpu(transport))
    if not (state.tinyhw_booted and state.busy == 0 and state.sos_alive):
        raise Refused("--path sram needs a board tinyhw booted (the sdma engine runs firmware the psp loads)",
                      hint="run tinyhw am boot --yes first (tinyhw am info shows the state)")
    copier = open_copier(transport)
    # the model of the host this run's copy-in really is: queued bulk transfers (libusb-async or the emulated
    # backend's queue) or the one-thread fallback; copy-out is synchronous either way
    h2d_host = "worker" if queue_kind(transport.bridge.dev) == "worker" else "async"

    def host(direction: str) -> str:
        return h2d_host if direction == "h2d" else "sync"

    def model(direction: str, size: int) -> float:
        # device costs only: the model's two fitted host costs (stage_rate, submit_s) stay out of every figure
        doc = usbcopy_model.copy_in(size, protocol, host=h2d_host, host_costs=False) if direction == "h2d" else \
            usbcopy_model.copy_out(size)
        return doc["mb_s"]

    return CopyPath(f"bridge sram + sdma ({protocol} copy-in)", lambda off, data: copier.copy_in(off, data, protocol),
                    copier.copy_out, size_limit=None, model=model, model_host=host)


def _dma_bench(app: App, transport: Any, copy_path: str, size_list: list[int], dirs: tuple[str, ...], repeat: int,
               start: int, yes: bool) -> None:
    """--path dma (tinyhw.boot.dmacopy: pinned buffer + SDMA0, VRAM at --offset, 128 MiB by default) or --path
    staging (tinyhw.bench.staging: the host memcpy alone, buffer offsets); the buffers are freed at the end."""
    from tinyhw.bench import CopyPath, Staging, copy_bench, staging_size

    if copy_path == "staging":
        holder: Any = Staging(transport, staging_size(size_list, start))
        via = holder.path()
    else:
        from tinyhw.boot.dmacopy import check_copy_engine, check_range, open_dma_copier

        start = start or SRAM_DEFAULT_OFFSET
        gpu = check_copy_engine(transport)  # refusals (exit 2) before the prompt and before any write
        check_range(gpu, start, max(size_list), "bench copy")
        if not transport.emulated:
            app.confirm(yes, f"bench copy overwrites up to {max(size_list):#x} bytes of VRAM at offset {start:#x} "
                             f"through sdma0 and a pinned dma buffer on {transport.identity().location}")
        holder = open_dma_copier(transport, gpu=gpu)
        via = CopyPath(f"pinned dma buffer + sdma0 (iova 0x{holder.iova:x})", holder.copy_in, holder.copy_out)
    try:
        results = copy_bench(transport, size_list, dirs, repeat, None, start, ProgressBar(app), app.log, via=via)
    finally:
        holder.close()
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

    table = Table(box=None, pad_edge=False, header_style="bold")
    cols = ("direction", "memory") if gpu else ("direction",)
    for col in ("dir", "memory") if gpu else cols:
        table.add_column(col)
    pipelined = any(r.get("model_mbps") is not None for r in rows)
    extra = ("model",) if pipelined else ()
    for col in ("size", "MB/s min", "median", "max", "verified", "of limit", *extra, "time"):
        table.add_column(col, justify="left" if col == "time" else "right")
    for r in rows:
        frac = r["fraction_of_limit"]
        model = (num(r.get("model_mbps")),) if pipelined else ()
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
    hosts = sorted({f"{r['direction']} {r['model_host']}" for r in rows if r.get("model_host")})
    if hosts:
        app.out.print(f"model column: the timing model of this run's host, device costs only ({', '.join(hosts)}; "
                      "async: queued bulk transfers, worker: one bulk thread, sync: each transfer waited for)",
                      markup=False)
    _chart(app, rows)


def _timing(r: dict[str, Any]) -> str:
    """How a row was timed: measured (wall), modelled (device clock), hybrid clock, host only."""
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
