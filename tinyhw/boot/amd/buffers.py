"""How a dispatch's buffers reach VRAM and come back: over the copy engine where there is one, else the BAR.

Paths (``BufferPath.name``): ``sram`` — a board behind the ASM24 bridge (the bridge-SRAM ability): a buffer goes
in through the SRAM in 512 KiB pieces, each one 0xF2 write followed by one SDMA COPY into VRAM and a drain fence
(:meth:`tinyhw.boot.amd.usbcopy.UsbCopier.copy_in_sync`: no sentinel protocol, as the piece is in the SRAM before the
packets are submitted), and comes out with :meth:`~tinyhw.boot.amd.usbcopy.UsbCopier.copy_out`; ``dma`` — a transport
with DMA buffers (``vfio:``, ``mock:navi31``): :class:`tinyhw.boot.amd.dmacopy.DmaCopier`; ``bar`` — BAR writes and
reads (streamed dword by dword through the bridge controller over USB: ~3.6 MB/s in, ~1.8 MB/s out).

Every copy over ``sram`` or ``dma`` is verified through the BAR, as ``bench copy`` verifies (docs/bench-copy.md):
windows of the buffer (the first and last 512 bytes and one at a seeded place in every 256 KiB) are written with
the complement of the data through the BAR before a copy-in and read back through the BAR after it; after a
copy-out, whose staging memory was poisoned first, the same windows are read through the BAR and compared with
what came out. A copy engine that moves nothing, or to the wrong place, fails at the first window with one
:class:`~tinyhw.errors.OperationFailed` line naming the address. The copies are timed on the transport's clock
(modelled on an emulated board), the verification apart.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tinyhw.errors import OperationFailed, Refused
from tinyhw.transport.base import Transport, has, set_bus_master

if TYPE_CHECKING:
    from tinyhw.boot.amd.copyengine import CopyEngine
    from tinyhw.boot.amd.gpu import AmGpu

PATHS = ("auto", "sram", "dma", "bar")
WINDOW, STRIDE, FULL = 512, 256 * 1024, 4096  # buffers up to FULL bytes are checked whole
FLIP = bytes(range(256)).translate(bytes(255 - i for i in range(256)))


def windows(size: int, *, full: int = FULL, window: int = WINDOW, stride: int = STRIDE) -> list[tuple[int, int]]:
    """(offset, length) of what is checked of a ``size``-byte buffer or copy, in order, not overlapping: all of it up
    to ``full`` bytes, else the first and the last ``window`` bytes and one window at a seeded dword in every
    ``stride`` bytes (windows that overlap or touch merge into one longer window). ``bench copy`` checks its copies
    with the same windows."""
    if size <= full:
        return [(0, size)] if size else []
    rng = random.Random(size)
    picks = {0, size - window}
    for start in range(0, size, stride):
        room = min(stride, size - start) - window
        picks.add(start + (rng.randrange(0, room // 4 + 1) * 4 if room > 0 else 0))
    out: list[tuple[int, int]] = []
    for p in sorted(min(p, size - window) for p in picks):
        if out and p <= out[-1][0] + out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], p + window - out[-1][0]))
        else:
            out.append((p, window))
    return out


@dataclass
class BufferPath:
    """Where a dispatch's buffers travel (``name``: sram, dma or bar; ``label`` says how), with the seconds and
    bytes each direction took on the transport's clock and the bytes verified through the BAR."""

    gpu: AmGpu
    name: str
    label: str
    copy_in: Callable[[int, bytes], object] | None = None
    copy_out: Callable[[int, int], Any] | None = None
    poison: Callable[[int], object] | None = None
    close: Callable[[], object] = lambda: None
    stats: dict[str, float] = field(default_factory=lambda: {"bytes_in": 0, "seconds_in": 0.0, "bytes_out": 0,
                                                            "seconds_out": 0.0, "verified_bytes": 0})

    def write(self, offset: int, data: bytes) -> None:
        """Put ``data`` at VRAM byte ``offset`` (verified through the BAR unless the path is the BAR)."""
        g, clock = self.gpu, self.gpu.clock
        if self.copy_in is None:
            t0 = clock.now()
            g.vram_write(offset, data)
            self._count("in", len(data), clock.now() - t0)
            return
        wins = windows(len(data))
        for s, n in wins:  # the complement first: a copy that moves nothing cannot leave the right bytes there
            g.vram_write(offset + s, data[s:s + n].translate(FLIP))
        g.hdp_flush()
        t0 = clock.now()
        self.copy_in(offset, data)
        self._count("in", len(data), clock.now() - t0)
        for s, n in wins:
            self._compare(g.vram_read(offset + s, n), data[s:s + n], offset + s, "copied in, read through the bar")

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes of VRAM at ``offset`` (verified through the BAR unless the path is the BAR)."""
        g, clock = self.gpu, self.gpu.clock
        if self.copy_out is None:
            t0 = clock.now()
            got = g.vram_read(offset, length)
            self._count("out", length, clock.now() - t0)
            return got
        if self.poison is not None:
            self.poison(length)
        t0 = clock.now()
        got = bytes(self.copy_out(offset, length))
        self._count("out", length, clock.now() - t0)
        for s, n in windows(length):
            self._compare(got[s:s + n], g.vram_read(offset + s, n), offset + s, "copied out, read through the bar")
        return got

    def _count(self, way: str, n: int, seconds: float) -> None:
        self.stats[f"bytes_{way}"] += n
        self.stats[f"seconds_{way}"] += seconds

    def _compare(self, got: bytes, want: bytes, at: int, how: str) -> None:
        self.stats["verified_bytes"] += len(want)
        if got == want:
            return
        bad = next(i for i in range(min(len(got), len(want)) + 1) if i >= len(got) or got[i] != want[i])
        raise OperationFailed(f"buffer copy through {self.label} came back wrong at vram 0x{at + bad:x} ({how}): "
                              f"0x{got[bad]:02x}, expected 0x{want[bad]:02x}",
                              hint="the copy engine is broken or hung: reset the gpu (`tinyhw am reset --yes`) and "
                              "boot again")

    def summary(self) -> dict[str, Any]:
        """The path for ``--json``: name, label, and per direction bytes, seconds and MB/s (on the transport's
        clock), the bytes verified through the BAR."""
        s = self.stats

        def way(w: str) -> dict[str, Any]:
            n, t = int(s[f"bytes_{w}"]), s[f"seconds_{w}"]
            return {"bytes": n, "seconds": round(t, 9), "mb_s": round(n / t / 1e6, 3) if t > 0 else None}

        return {"path": self.name, "label": self.label, "in": way("in"), "out": way("out"),
                "verified_bytes": int(s["verified_bytes"])}


def open_buffer_path(transport: Transport, gpu: AmGpu, engine: CopyEngine, path: str = "auto") -> BufferPath:
    """The path a dispatch's buffers take on ``transport`` (the copy engine ``engine`` is up on ``gpu``): ``auto``
    picks ``sram`` behind the USB bridge, ``dma`` with DMA buffers, else ``bar``; asking for one the transport lacks
    is refused (exit 2)."""
    from tinyhw.transport.abilities import BridgeSram, DmaBuffers

    if path not in PATHS:
        raise Refused(f"unknown buffer path {path!r}; known: {', '.join(PATHS)}")
    if path == "auto":
        path = "sram" if has(transport, BridgeSram) else "dma" if has(transport, DmaBuffers) else "bar"
    if path == "bar":
        return BufferPath(gpu, "bar", "bar writes and reads")
    if path == "sram":
        from tinyhw.boot.amd.usbcopy import UsbCopier, require_sram

        require_sram(transport)
        copier = UsbCopier(engine)
        return BufferPath(gpu, "sram", "bridge sram + sdma0", copier.copy_in_sync, copier.copy_out, copier.poison)
    if not has(transport, DmaBuffers):
        raise Refused(f"buffer path dma needs host dma buffers, which the {transport.name} transport cannot map",
                      hint="use --buffer-path auto")
    from tinyhw.boot.amd.dmacopy import DmaCopier

    set_bus_master(transport, True)
    dma = DmaCopier(engine)
    return BufferPath(gpu, "dma", f"pinned dma buffer + sdma0 (iova 0x{dma.iova:x})", dma.copy_in, dma.copy_out,
                      dma.poison, dma.close)
