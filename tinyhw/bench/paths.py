"""Which way ``bench copy`` moves bytes, chosen and opened in one place (``--path auto`` included).

Paths (the ``--path`` choices):

* ``bar`` — the transport's BAR mapping (streamed over the USB bridge, one mapping on ``pci:``/``vfio:``);
  :func:`tinyhw.bench.copy.copy_bench` with no ``via``. Works on every device.
* ``sram`` — the USB bridge's 512 KiB SRAM and the GPU's SDMA0 (:mod:`tinyhw.boot.amd.usbcopy`), a booted navi3x
  behind the bridge; VRAM at 128 MiB by default.
* ``dma`` — a pinned host DMA buffer and SDMA0 (:mod:`tinyhw.boot.amd.dmacopy`), a booted navi3x on a transport with
  DMA buffers (``vfio:``, ``mock:navi31``); VRAM at 128 MiB by default.
* ``staging`` — the host memcpy into and out of a pinned DMA buffer alone (:mod:`tinyhw.bench.staging`).
* ``auto`` (the default) — the fastest verified path the device supports in its current state: ``sram`` on a
  booted board behind the bridge, ``dma`` on a booted board with DMA buffers, else ``bar``. Deciding reads the
  function's identity and, for an AMD GPU, the boot-state registers (read-only); nothing is written.

The engine paths (``sram``, ``dma``) are verified through the BAR0 VRAM aperture as well
(:class:`tinyhw.bench.copy.Independent`), and their staging memory is poisoned before each copy-out.

A Python user gets the CLI's choice in one call: :func:`bench_copy`. The CLI uses :func:`plan_copy` (read-only:
the choice and every refusal, before it asks for confirmation) and :func:`run_plan`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinyhw.bench.copy import DIRECTIONS, CopyPath, CopyResult, Independent, check_fits, copy_bench, pick_bar
from tinyhw.errors import Refused
from tinyhw.progress import NO_PROGRESS, Progress
from tinyhw.transport.abilities import BridgeSram, DmaBuffers
from tinyhw.transport.base import Transport, has

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

PATHS = ("auto", "bar", "sram", "dma", "staging")
PROTOCOLS = ("tinyhw", "seed")
#: VRAM offset of the engine paths' copies: above the copy engine's own layout (page tables, rings: < 83 MiB)
VRAM_OFFSET = 128 << 20


@dataclass
class CopyPlan:
    """What a run will do, decided before anything is written: the path, where, and why it was chosen."""

    path: str  # bar, sram, dma, staging
    offset: int
    auto: bool  # chosen by "auto"
    why: str  # one line: why this path (for auto) or what it is
    overwrites: str  # what the copies overwrite, for a confirmation prompt
    bar: int | None = None
    gpu: AmGpu | None = None  # the AmGpu of the engine paths (booted, checked)


def choose_path(transport: Transport) -> tuple[str, str, Any]:
    """(path, why, gpu) that ``auto`` picks for this device now; ``gpu`` is the checked AmGpu of an engine path."""
    from tinyhw.boot.amd.dmacopy import booted_gpu

    engine = "sram" if has(transport, BridgeSram) else "dma" if has(transport, DmaBuffers) else None
    if engine is None:
        return "bar", f"the {transport.name} transport has no copy engine path (no usb bridge, no dma buffers)", None
    try:
        gpu = booted_gpu(transport, "an engine path uses")
    except Refused as e:
        return "bar", f"no {engine} path: {e.message}", None
    what = "the usb bridge's sram" if engine == "sram" else "pinned dma buffers"
    return engine, f"a booted gpu behind {what}: its sdma0 is the fastest verified path", gpu


def plan_copy(transport: Transport, sizes: list[int], path: str = "auto", *, offset: int | None = None,
              bar: int | None = None) -> CopyPlan:
    """Choose and check the path for copies of ``sizes`` (read-only; every refusal, exit 2, comes from here)."""
    if path not in PATHS:
        raise Refused(f"unknown copy path {path!r}; known: {', '.join(PATHS)}")
    if offset is not None and (offset < 0 or offset % 4):
        raise Refused(f"offset 0x{offset:x} must be a non-negative multiple of 4")
    auto = path == "auto"
    gpu = None
    if auto and bar is not None:
        path, why = "bar", "--bar names a bar"  # a bar asked for: the bar path, whatever else the device has
    elif auto:
        path, why, gpu = choose_path(transport)
    else:
        why = f"--path {path}"
    if bar is not None and path != "bar":
        into = "through a host dma buffer" if path in ("dma", "staging") else "into VRAM through the bridge sram"
        raise Refused(f"--bar applies to --path bar; --path {path} copies {into}")
    if path == "bar":
        info = pick_bar(transport, bar)
        start = offset or 0
        where = f"bar{info.index} ({info.size:#x} bytes)"
        check_fits(sizes, start, info.size, where)
        return CopyPlan("bar", start, auto, why, f"up to {max(sizes):#x} bytes of bar{info.index} at offset "
                        f"{start:#x}", bar=info.index)
    if path == "staging":
        from tinyhw.bench.staging import LABEL, MAX_BUFFER

        if not has(transport, DmaBuffers):
            raise Refused(f"--path staging needs host dma buffers, which the {transport.name} transport cannot map",
                          hint="bind the device to vfio-pci (tinyhw --device pci:ADDR pci bind --yes), use vfio:ADDR")
        start = offset or 0
        check_fits(sizes, start, MAX_BUFFER, LABEL)
        return CopyPlan("staging", start, auto, why, "nothing on the device (host memory only)")
    return _plan_engine(transport, sizes, path, offset, auto, why, gpu)


def _plan_engine(transport: Transport, sizes: list[int], path: str, offset: int | None, auto: bool, why: str,
                 gpu: AmGpu | None) -> CopyPlan:
    from tinyhw.boot.amd.dmacopy import booted_gpu, check_copy_engine, check_range

    if gpu is None:
        if path == "sram":
            from tinyhw.boot.amd.usbcopy import require_sram

            require_sram(transport)
            gpu = booted_gpu(transport, "sram copies use")
        else:
            gpu = check_copy_engine(transport)
    start = offset or VRAM_OFFSET
    check_range(gpu, start, max(sizes), "bench copy")
    how = "the bridge sram" if path == "sram" else "sdma0 and a pinned dma buffer"
    return CopyPlan(path, start, auto, why, f"up to {max(sizes):#x} bytes of VRAM at offset {start:#x} through "
                    f"{how} (checked through bar0 too)", gpu=gpu)


@contextlib.contextmanager
def open_path(transport: Transport, plan: CopyPlan, sizes: list[int],
              protocol: str = "tinyhw") -> Iterator[CopyPath | None]:
    """The plan's :class:`CopyPath` (None: the BAR mapping), with the copy engine brought up; closed at the end."""
    if protocol not in PROTOCOLS:
        raise Refused(f"unknown copy-in protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    if plan.path == "bar":
        yield None
        return
    if plan.path == "staging":
        from tinyhw.bench.staging import Staging, staging_size

        holder = Staging(transport, staging_size(sizes, plan.offset))
        try:
            yield holder.path()
        finally:
            holder.close()
        return
    assert plan.gpu is not None  # an engine path's plan holds the checked gpu
    check = _independent(plan.gpu, plan.offset + max(sizes))
    if plan.path == "sram":
        yield sram_path(transport, gpu=plan.gpu, protocol=protocol, check=check)
        return
    from tinyhw.boot.amd.dmacopy import open_dma_copier

    copier = open_dma_copier(transport, gpu=plan.gpu)
    try:
        yield CopyPath(f"pinned dma buffer + sdma0 (iova 0x{copier.iova:x})", copier.copy_in, copier.copy_out,
                       check=check, poison=copier.poison)
    finally:
        copier.close()


def _independent(gpu: AmGpu, end: int) -> Independent:
    """The BAR0 VRAM aperture of ``gpu`` (MM_INDEX/MM_DATA past BAR0, a few dwords per window there)."""
    inside = end <= gpu.bar0_size
    return Independent("bar0 vram aperture" if inside else "vram aperture (bar0, mm_index/mm_data)",
                       gpu.vram_read, gpu.vram_write, gpu.hdp_flush, window=512 if inside else 16)


def sram_path(transport: Transport, *, gpu: AmGpu | None = None, protocol: str = "tinyhw",
              check: Independent | None = None) -> CopyPath:
    """The bridge SRAM + SDMA copy path (:mod:`tinyhw.boot.amd.usbcopy`) as a :class:`CopyPath`, in one call: refused
    (exit 2) on a transport without the bridge-SRAM ability or a board no tinyhw boot brought up (``gpu``: the
    checked AmGpu when the caller has one), then the copy engine is brought up (page tables, hubs, SDMA ring). Its
    model column is of the host this run's copy-in really is (``sram_queue_kind``). ``check`` verifies copies
    independently (default: the BAR0 VRAM aperture over the whole VRAM)."""
    from tinyhw.boot.amd import usbcopy_model
    from tinyhw.boot.amd.copyengine import bring_up
    from tinyhw.boot.amd.dmacopy import booted_gpu
    from tinyhw.boot.amd.usbcopy import UsbCopier, require_sram

    if protocol not in PROTOCOLS:
        raise Refused(f"unknown copy-in protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
    sram = require_sram(transport)
    if gpu is None:
        gpu = booted_gpu(transport, "sram copies use")
    if check is None:
        check = _independent(gpu, gpu.vram_size)
    copier = UsbCopier(bring_up(gpu))
    # the model of the host this run's copy-in really is: queued bulk transfers (libusb-async or the emulated
    # backend's queue) or the one-thread fallback; copy-out is synchronous either way
    h2d_host = "worker" if sram.sram_queue_kind() == "worker" else "async"

    def host(direction: str) -> str:
        return h2d_host if direction == "h2d" else "sync"

    def model(direction: str, size: int) -> float:
        doc = usbcopy_model.copy_in(size, protocol, host=h2d_host, host_costs=False) if direction == "h2d" else \
            usbcopy_model.copy_out(size)
        return doc["mb_s"]

    return CopyPath(f"bridge sram + sdma ({protocol} copy-in)", lambda off, data: copier.copy_in(off, data, protocol),
                    copier.copy_out, size_limit=None, model=model, model_host=host, check=check,
                    poison=copier.poison)


def run_plan(transport: Transport, plan: CopyPlan, sizes: list[int], directions: tuple[str, ...] = DIRECTIONS,
             repeat: int = 3, *, protocol: str = "tinyhw", progress: Progress = NO_PROGRESS,
             log: Callable[[str], None] = lambda _m: None) -> list[CopyResult]:
    """Run the copies of a :func:`plan_copy` plan (this writes the device)."""
    if plan.auto:
        log(f"--path auto: {plan.path} ({plan.why})")
    with open_path(transport, plan, sizes, protocol) as via:
        results = copy_bench(transport, sizes, directions, repeat, plan.bar, plan.offset, progress, log, via=via)
    for r in results:
        r.path_name, r.path_auto = plan.path, plan.auto
    return results


def bench_copy(transport: Transport, sizes: list[int], directions: tuple[str, ...] = DIRECTIONS, repeat: int = 3, *,
               path: str = "auto", protocol: str = "tinyhw", offset: int | None = None, bar: int | None = None,
               progress: Progress = NO_PROGRESS, log: Callable[[str], None] = lambda _m: None) -> list[CopyResult]:
    """``bench copy`` in one call: :func:`plan_copy` (``path="auto"``: the fastest verified path) and :func:`run_plan`.
    Each row names its path (``path_name``, ``path_auto``)."""
    plan = plan_copy(transport, sizes, path, offset=offset, bar=bar)
    return run_plan(transport, plan, sizes, directions, repeat, protocol=protocol, progress=progress, log=log)
