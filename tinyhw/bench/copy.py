"""Copy bandwidth through a device's BAR mapping, verified, against the link's theoretical limit.

The aim is numbers a user can trust. A host->device copy writes a pattern into a window of the BAR with
the transport's block write (streamed over the USB bridge, one mapping on ``pci:``/``vfio:``); a
device->host copy reads it with the block read. Every copy is checked: after a host->device copy the
window is read back (not timed) and compared; before a device->host copy the pattern is written (not timed) and
the timed read is compared with it.

A copy path with an engine between host and memory (the bridge SRAM + SDMA, a pinned DMA buffer + SDMA) is also
checked through an independent path (:class:`Independent`: the BAR0 VRAM aperture), so an engine that moves
nothing, skips a direction or lands at the wrong address fails with the first differing offset instead of reading
back what the host just handed it:

* host->device: the destination is first poisoned through the independent path (the complement of the data, so
  every byte differs), the timed copy runs, and the destination is read back through the independent path; then,
  with the path's own staging memory poisoned, read back in full through the path as well.
* device->host: the source is written through the independent path (the whole copy when small; else the path's
  copy-in fills it and the independent path overwrites windows of it with the complement), the path's staging
  memory (the bridge SRAM, the pinned buffer) is poisoned, and the timed copy-out must return all of it.

What the independent path touches: copies up to ``Independent.full`` bytes (64 KiB) whole; larger ones in
windows of ``Independent.window`` bytes: the first and the last, and one at a seeded position in every
``Independent.stride`` (256 KiB, one SDMA chunk of the SRAM protocol) of the copy, at most ``MAX_WINDOWS``. A
no-op engine or a skipped direction fails at the first window, a shift of any dword multiple at the first window
too (random data), a dropped chunk at its window. Rows say what was checked (``verified_by``,
``verified_independent`` bytes). Time comes from the transport's clock: wall time on
hardware ("measured"), the board's virtual clock on an emulated board ("modelled", from the emulator's
per-transfer costs, which are the specs' measured figures). Every row names that clock (``"clock"``): ``wall``,
``device`` (modelled device time only: exact, reproducible) or ``hybrid`` (modelled device time plus this host's
measured CPU time between transfers, tinyhw.mocks.common.vclock), which the bench prefers on an emulated board that
offers it unless the board's ``clock=`` option or ``TINYHW_CLOCK`` fixed the mode.

Who timed a row is its ``"timer"``: ``host``, the transport's own clock on this host (as above), or ``client``, on a
transport that queues accesses and sends them in batches (``remote:``, the Batching ability). There the transport's
clock is the server's last reading plus what was queued since: it does not move while a write waits in the queue,
so a timed write that is only queued would take no time at all (and a wall-clock server's reading would count the
queueing only). Each copy there is therefore timed on this client's wall clock around the whole batch round trip,
the link and the server included (measured, never modelled): what was queued before it (the pattern fill, the
poison) is sent first, untimed, and a write is timed until its batch has been answered. Where the server also
times each batch it runs (the BatchTimes ability: ``batch_time`` in protocol version 2), the row adds the server's
own figure, the link excluded (``server_mbps_median``; ``server_clock``: ``wall``, measured on the server, or
``virtual``, modelled by the emulated board it serves).

The link limit: PCIe from the device's own Link Status (speed x width x encoding, specs/pci-vfio-remote.md
§3.7), and for the USB bridge the USB link speed (specs/asm24-usb-bridge.md §1: 5 Gbps 8b/10b, 10 Gbps
128b/132b, 480 Mbps), the lower of the two.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any

from tinyhw.boot.amd.buffers import windows as sample_windows
from tinyhw.errors import Refused
from tinyhw.formats.pciconfig import parse_config
from tinyhw.progress import NO_PROGRESS, Progress
from tinyhw.transport.base import BarInfo, Transport, has
from tinyhw.transport.batch import Batching, BatchTimes
from tinyhw.transport.clock import Clock, Measuring, WallClock

# Payload MB/s of one PCIe lane per speed code: 2.5 and 5 GT/s use 8b/10b, 8 GT/s and up 128b/130b.
PCIE_LANE_MBPS = {1: 250.0, 2: 500.0, 3: 8000 * 128 / 130 / 8, 4: 16000 * 128 / 130 / 8,
                  5: 32000 * 128 / 130 / 8, 6: 64000 * 242 / 256 / 8}
# USB link speeds as pyusb/libusb name them -> payload MB/s of the line (before protocol overhead).
USB_LINK_MBPS = {"high": 60.0, "high-speed": 60.0, "superspeed": 500.0, "superspeed-plus": 10000 * 128 / 132 / 8,
                 "superspeed-plus-2x2": 20000 * 128 / 132 / 8}
DIRECTIONS = ("h2d", "d2h")
SIZE_SUFFIX = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
MAX_SIZE = 1 << 30  # one copy: the host holds its pattern and its read-back (2x) in memory
PATTERN_BLOCK = 16 << 20  # random.randbytes takes fewer than 2**28 bytes at a time
MAX_WINDOWS = 1024
POISON = 0xA5
FLIP = bytes(range(255, -1, -1))  # bytes.translate table: every byte complemented


@dataclass
class Independent:
    """A way to device memory that does not go through the copy path's engine (the BAR0 VRAM aperture of a GPU whose
    copies the SDMA engine makes): ``read(offset, length)``, ``write(offset, data)`` at the same offsets as the copy
    path, ``flush()`` making those writes visible to the engine (the HDP flush)."""

    label: str
    read: Callable[[int, int], bytes]
    write: Callable[[int, bytes], object]
    flush: Callable[[], object] = lambda: None
    full: int = 64 << 10  # copies up to this size are checked whole
    window: int = 512
    stride: int = 256 << 10

    def windows(self, size: int) -> list[tuple[int, int]]:
        """(offset, length) of what is checked of a ``size``-byte copy, in order, not overlapping (windows that would
        overlap are merged): the first window starts at 0, the last ends at ``size``."""
        if size <= self.full:
            return [(0, size)]
        stride = max(self.stride, -(-size // MAX_WINDOWS // 4096) * 4096)
        return sample_windows(size, full=self.full, window=self.window, stride=stride)


@dataclass
class CopyPath:
    """How bytes move when not through the BAR mapping: ``write(offset, data)`` host->device and
    ``read(offset, length)`` device->host (e.g. the bridge SRAM + SDMA protocols:
    :func:`tinyhw.bench.paths.sram_path`), its ``label``, and optionally ``model(direction, size)``: a modelled MB/s
    to print beside the measured one (None when there is none) and ``model_host(direction)``: which host that model
    figure is for (e.g. "async": a host that overlaps transfers, which the measured host may not be)."""

    label: str
    write: Callable[[int, bytes], object]
    read: Callable[[int, int], bytes | bytearray | memoryview]
    size_limit: int | None = None
    model: Callable[[str, int], float | None] | None = None
    clock: Clock | None = None  # time on this clock instead of the transport's (host-only paths: wall time)
    host_only: bool = False  # no byte crosses the link (host staging): no link limit, never "modelled"
    model_host: Callable[[str], str] | None = None
    check: Independent | None = None  # verify through this path too (see the module docstring)
    poison: Callable[[int], object] | None = None  # overwrite the path's staging memory for a copy of N bytes


@dataclass
class CopyResult:
    """One direction and size: the stable JSON keys of ``bench copy --json``."""

    direction: str
    size: int
    repeat: int
    path: str
    seconds: list[float] = field(default_factory=list)
    verified: int = 0  # bytes compared equal after the copies
    link_limit_mbps: float | None = None
    modelled: bool = False
    skipped: str | None = None
    model_mbps: float | None = None
    host_only: bool = False
    model_host: str | None = None
    clock: str = "wall"  # wall | device | hybrid (tinyhw.mocks.common.vclock)
    timer: str = "host"  # host: the transport's clock here; client: this client's wall clock per batch round trip
    server_seconds: list[float] = field(default_factory=list)  # the server's own time of each repeat (remote:)
    server_clock: str | None = None  # wall (measured on the server) | virtual (modelled there) | None (no figure)
    path_name: str | None = None  # the --path choice (bar, sram, dma, staging), when known
    path_auto: bool = False  # chosen by --path auto
    verified_by: str | None = None  # the independent path the copies were also checked through
    verified_independent: int = 0  # bytes compared (or written, then copied out) through it

    def mbps(self) -> list[float]:
        """The rate of each timed repeat in MB/s (decimal: 10**6 bytes per second); repeats of zero time are left out.
        """
        return [self.size / s / 1e6 for s in self.seconds if s > 0]

    def _server_median(self) -> float | None:
        """The median MB/s on the server's own time of the batches (None without a figure for every repeat)."""
        rates = [self.size / s / 1e6 for s in self.server_seconds if s > 0]
        if self.server_clock is None or not rates or len(self.server_seconds) != len(self.seconds):
            return None
        return round(statistics.median(rates), 3)

    def as_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict: direction, size, repeats, path, the min/median/max rate in MB/s, the link's
        limit and the share of it the median reached, whether the time is measured or modelled (and on which clock), the
        model's figure, and how the copy was verified."""
        rates = self.mbps()
        median = statistics.median(rates) if rates else None
        limit = self.link_limit_mbps
        return {
            "direction": self.direction, "size": self.size, "repeat": self.repeat, "path": self.path,
            "mbps_min": round(min(rates), 3) if rates else None,
            "mbps_median": round(median, 3) if median is not None else None,
            "mbps_max": round(max(rates), 3) if rates else None,
            "verified": self.verified,
            "link_limit_mbps": round(limit, 1) if limit else None,
            "fraction_of_limit": float(f"{median / limit:.4g}") if (median and limit) else None,
            "modelled": self.modelled,
            "skipped": self.skipped,
            "model_mbps": None if self.model_mbps is None else round(self.model_mbps, 1),
            "host_only": self.host_only,
            "model_host": self.model_host,
            "clock": self.clock,
            "timer": self.timer,
            "server_mbps_median": self._server_median(),
            "server_clock": self.server_clock,
            "path_name": self.path_name,
            "path_auto": self.path_auto,
            "verified_by": self.verified_by,
            "verified_independent": self.verified_independent,
        }


def parse_sizes(text: str) -> list[int]:
    """``4K,64K,1M,16M`` -> byte counts (K/M/G are binary; each a positive multiple of 4)."""
    sizes = []
    for part in text.split(","):
        t = part.strip().lower().removesuffix("ib").removesuffix("b")
        suffix = t[-1:] if t[-1:] in ("k", "m", "g") else ""
        digits = t[: len(t) - len(suffix)]
        if not digits.isdigit() or int(digits) <= 0:
            raise Refused(f"size {part.strip()!r} is not a positive size", hint="write e.g. 4K,64K,1M,16M,256M")
        n = int(digits) * SIZE_SUFFIX[suffix]
        if n > MAX_SIZE:
            raise Refused(f"size {part.strip()!r} is larger than the {MAX_SIZE >> 30} GiB a copy may be "
                          "(the host holds the pattern and its read-back)")
        if n % 4:
            raise Refused(f"size {part.strip()!r} is not a multiple of 4 bytes (bar copies move dwords)")
        sizes.append(n)
    return sizes


def pick_bar(transport: Transport, index: int | None = None) -> BarInfo:
    """The BAR the copies go through: ``index``, else the largest memory BAR (VRAM on a GPU, the shared
    memory of ivshmem), prefetchable first."""
    bars = [b for b in transport.bars() if b.kind == "memory" and b.size > 0]
    if index is not None:
        for b in bars:
            if b.index == index:
                return b
        raise Refused(f"bar{index} is not a memory bar of this device (memory bars: {[b.index for b in bars]})")
    if not bars:
        raise Refused("the device has no memory bar to copy through")
    return max(bars, key=lambda b: (b.size, b.prefetchable))


def link_limit(transport: Transport) -> tuple[float | None, str]:
    """(MB/s, how it was found) of the narrowest link between the host and the device's memory."""
    parts: list[tuple[float, str]] = []
    try:
        cfg = parse_config(transport.config_bytes, 0x100)
        pcie = cfg.express
        if pcie is not None and pcie.has_link and pcie.lnksta.current_speed in PCIE_LANE_MBPS and pcie.lnksta.width:
            lane = PCIE_LANE_MBPS[pcie.lnksta.current_speed]
            parts.append((lane * pcie.lnksta.width, f"pcie {_speed(pcie.lnksta.current_speed)} x{pcie.lnksta.width}"))
    except Exception:
        pass
    extra = transport.info().extra
    usb = extra.get("usb_link") or extra.get("usb_speed")
    if usb in USB_LINK_MBPS:
        parts.append((USB_LINK_MBPS[usb], f"usb {usb}"))
    if not parts:
        return None, "unknown"
    return min(parts)


def _speed(code: int) -> str:
    return {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s", 6: "64GT/s"}[code]


def _pattern(size: int, seed: int) -> bytes:
    """Deterministic, non-repeating bytes (a repeated block would hide a copy to the wrong offset); one random
    stream, drawn in blocks (``randbytes`` overflows at 256 MiB)."""
    rng = random.Random(seed)
    if size <= PATTERN_BLOCK:
        return rng.randbytes(size)
    return b"".join(rng.randbytes(min(PATTERN_BLOCK, size - o)) for o in range(0, size, PATTERN_BLOCK))


def check_fits(sizes: list[int], offset: int, room: int | None, where: str) -> None:
    """Refuse (exit 2) a run of which no size fits ``room`` bytes at ``offset``; sizes that do not fit while others
    do are reported skipped."""
    if room is None or not sizes or any(offset + n <= room for n in sizes):
        return
    if offset >= room:
        raise Refused(f"nothing to copy: offset {offset:#x} is past the end of {where}",
                      hint=f"use an --offset below {room:#x}")
    raise Refused(f"nothing to copy: no size fits in {where} at offset {offset:#x} (at most {room - offset:#x} "
                  f"bytes fit there; the smallest size is {min(sizes):#x})",
                  hint=f"use sizes up to {(room - offset) & ~3:#x} bytes or a smaller --offset")


def _first_difference(got: bytes | bytearray | memoryview, want: bytes | bytearray) -> int:
    """Index of the first differing byte (a length difference counts at the shorter end)."""
    lo, hi = 0, min(len(got), len(want))
    if got[:hi] == want[:hi]:
        return hi
    while hi - lo > 4096:  # bisect on slices (fast compares), then scan
        mid = (lo + hi) // 2
        if got[lo:mid] == want[lo:mid]:
            lo = mid
        else:
            hi = mid
    return next(k for k in range(lo, hi) if got[k] != want[k])


def copy_bench(transport: Transport, sizes: list[int], directions: tuple[str, ...] = DIRECTIONS, repeat: int = 3,
               bar: int | None = None, offset: int = 0, progress: Progress = NO_PROGRESS,
               log: Callable[[str], None] = lambda _m: None, via: CopyPath | None = None) -> list[CopyResult]:
    """Run the copies; each size and direction ``repeat`` times, every one verified.

    ``via`` replaces the BAR mapping with another copy path (its offsets are device memory offsets).
    Raises :class:`~tinyhw.errors.OperationFailed` (through the transport) on a device error and
    ``Refused`` for bad arguments; a copy whose data comes back wrong raises ``OperationFailed`` naming
    the first differing offset.
    """
    if repeat < 1:
        raise Refused("--repeat must be at least 1")
    if offset < 0 or offset % 4:
        raise Refused(f"offset 0x{offset:x} must be a non-negative multiple of 4")
    host_only = via is not None and via.host_only
    limit, how = (None, "no device transfer") if host_only else link_limit(transport)
    clock = via.clock if via is not None and via.clock is not None else transport.clock
    timing = Timing(clock)
    if has(transport, Batching) and not host_only:  # queued accesses: time each batch's round trip here
        timing = Timing(WallClock() if via is None or via.clock is None else clock, "client",
                        lambda: transport.submit([]).get(),
                        transport.batch_time if has(transport, BatchTimes) else None)
    with measuring(timing.clock) as clock_mode:
        return _copies(transport, sizes, directions, repeat, bar, offset, progress, log, via, host_only, limit,
                       how, timing, clock_mode)


@dataclass(frozen=True)
class Timing:
    """How the copies are timed: on ``clock``, by ``timer`` (the row's ``"timer"``: ``host`` or ``client``), and
    ``sync``: what sends every queued access and waits for its answer (a transport that batches accesses; None:
    accesses complete when they return)."""

    clock: Clock
    timer: str = "host"
    sync: Callable[[], object] | None = None
    far: Callable[[], tuple[float, int, bool] | None] | None = None  # the far end's batch times (BatchTimes)

    @property
    def modelled(self) -> bool:
        """True when the clock is an emulator's virtual one (the time is modelled, not measured)."""
        return bool(getattr(self.clock, "virtual", False))

    def settle(self) -> None:
        """Send what is queued and wait for its answer (nothing where accesses are not queued)."""
        if self.sync is not None:
            self.sync()

    def far_now(self) -> tuple[float, int, bool] | None:
        """The far end's summed batch time now (see :class:`~tinyhw.transport.batch.BatchTimes`), or None."""
        return self.far() if self.far is not None else None

    def describe(self, clock_mode: str) -> str:
        """The log's words for the time the rows show."""
        if self.timer == "client":
            return "measured wall time on this client of each copy's whole batch round trip (link and server included)"
        return f"modelled time (emulated board, {clock_mode} clock)" if self.modelled else "measured wall time"


def measuring(clock: Clock) -> Any:
    """The clock's mode for a measurement: ``wall`` on a real clock; on a virtual one with modes
    (:class:`tinyhw.transport.clock.Measuring`) the hybrid mode where the board offers it and nobody fixed the mode."""
    if getattr(clock, "virtual", False) and has(clock, Measuring):
        return clock.measuring("hybrid")
    return nullcontext("wall")


def _copies(transport: Transport, sizes: list[int], directions: tuple[str, ...], repeat: int, bar: int | None,
            offset: int, progress: Progress, log: Callable[[str], None], via: CopyPath | None, host_only: bool,
            limit: float | None, how: str, timing: Timing, clock_mode: str) -> list[CopyResult]:

    write: Callable[[int, bytes], object]
    read: Callable[[int, int], bytes | bytearray | memoryview]
    room: int | None
    if via is None:
        info = pick_bar(transport, bar)
        region = transport.bar(info.index)
        write, read, room = region.write, region.read, info.size
        path = f"bar{info.index} {'streamed' if transport.name == 'usb' else 'mapped'}"
        where = f"bar{info.index} ({info.size:#x} bytes)"
    else:
        write, read, room, path = via.write, via.read, via.size_limit, via.label
        where = via.label
    log(f"copying through {where} at offset {offset:#x}; link limit "
        f"{'unknown' if limit is None else f'{limit:.0f} MB/s'} ({how}); "
        f"{timing.describe(clock_mode)}"
        f"{' of host memory copies only' if host_only else ''}")
    check_fits(sizes, offset, room, where)
    results: list[CopyResult] = []
    total = sum(sizes) * repeat * len(directions)
    check = via.check if via is not None else None
    with progress.task("copy", total) as advance:
        for size in sizes:
            for direction in directions:
                r = CopyResult(direction, size, repeat, path, link_limit_mbps=limit, modelled=timing.modelled,
                               host_only=host_only, path_name="bar" if via is None else None,
                               verified_by=check.label if check is not None else None,
                               clock=clock_mode, timer=timing.timer)
                if via is not None and via.model is not None:
                    r.model_mbps = via.model(direction, size)
                    r.model_host = via.model_host(direction) if via.model_host is not None else None
                results.append(r)
                if room is not None and offset + size > room:
                    r.skipped = f"does not fit in {where} at offset {offset:#x}"
                    advance(size * repeat)
                    continue
                for i in range(repeat):
                    data = _pattern(size, (size << 8) | (i << 1) | (direction == "d2h"))
                    copy = _Copy(direction, size, offset, path, write, read, via)
                    r.seconds.append(copy.run(data, timing))
                    if copy.server_seconds is not None:
                        r.server_seconds.append(copy.server_seconds)
                        r.server_clock = copy.server_clock
                    r.verified += size
                    r.verified_independent += copy.independent
                    advance(size)
    return results


class _Copy:
    """One timed copy and its checks (the module docstring says which)."""

    def __init__(self, direction: str, size: int, offset: int, path: str, write: Callable[[int, bytes], object],
                 read: Callable[[int, int], bytes | bytearray | memoryview], via: CopyPath | None) -> None:
        self.direction, self.size, self.offset, self.path = direction, size, offset, path
        self.write, self.read = write, read
        self.check = via.check if via is not None else None
        self.poison = via.poison if via is not None else None
        self.independent = 0
        self.server_seconds: float | None = None  # the far end's own time of the timed region, where it reports one
        self.server_clock: str | None = None

    def _timed(self, timing: Timing, work: Callable[[], object]) -> tuple[float, Any]:
        """Run ``work`` timed: what was queued before is sent first (not this copy's time), and the timer stops once
        everything ``work`` queued has been answered. Returns (seconds, what ``work`` returned); notes the far end's
        own time of the region when it reports one for all of it."""
        clock = timing.clock
        timing.settle()
        far0 = timing.far_now()
        t0 = clock.now()
        out = work()
        timing.settle()
        seconds = clock.now() - t0
        far1 = timing.far_now()
        if far0 is not None and far1 is not None and far1[1] == far0[1]:
            self.server_seconds = far1[0] - far0[0]
            self.server_clock = "virtual" if far1[2] else "wall"
        return seconds, out

    def run(self, data: bytes, timing: Timing) -> float:
        """The copy's time on ``timing``'s clock; raises OperationFailed at the first wrong byte."""
        if self.direction == "h2d":
            return self._h2d(data, timing)
        return self._d2h(data, timing)

    def _h2d(self, data: bytes, timing: Timing) -> float:
        check, off = self.check, self.offset
        wins = check.windows(self.size) if check is not None else []
        if check is not None:
            for s, n in wins:
                check.write(off + s, data[s:s + n].translate(FLIP))
            check.flush()
        seconds, _ = self._timed(timing, lambda: self.write(off, data))
        if check is not None:
            for s, n in wins:
                self._compare(check.read(off + s, n), data[s:s + n], s, f"read back through {check.label}")
                self.independent += n
        if self.poison is not None:
            self.poison(self.size)
        self._compare(self.read(off, self.size), data, 0, f"read back through {self.path}")
        return seconds

    def _d2h(self, data: bytes, timing: Timing) -> float:
        check, off = self.check, self.offset
        want: bytes | bytearray = data
        if check is not None:
            wins = check.windows(self.size)
            if wins != [(0, self.size)]:
                self.write(off, data)  # the bulk through the path, windows of it from the other side
                want = bytearray(data)
                for s, n in wins:
                    want[s:s + n] = data[s:s + n].translate(FLIP)
            for s, n in wins:
                check.write(off + s, bytes(want[s:s + n]))
                self.independent += n
            check.flush()
        else:
            self.write(off, data)
        if self.poison is not None:
            self.poison(self.size)
        seconds, back = self._timed(timing, lambda: self.read(off, self.size))
        how = f"written through {check.label}, copied out" if check is not None else "copied out"
        self._compare(back, bytes(want), 0, how)
        return seconds

    def _compare(self, got: bytes | bytearray | memoryview, want: bytes | bytearray, base: int, how: str) -> None:
        from tinyhw.errors import OperationFailed

        if got == want:
            return
        bad = _first_difference(got, want)
        shown = f"0x{got[bad]:02x}" if bad < len(got) else "nothing"
        raise OperationFailed(f"{self.direction} copy of {self.size} bytes through {self.path} came back wrong at "
                              f"offset 0x{self.offset + base + bad:x} ({how}): {shown}, expected "
                              f"0x{want[bad]:02x}")
