"""The emulated Navi31's SQ thread trace (SQTT): per-SE trace registers, buffers in GPU memory, finish and stop.

Facts: specs/sqtt-pmc.md §2.1 (the per-SE registers a driver programs with GRBM_GFX_INDEX selecting the SE:
SQ_THREAD_TRACE_BUF0_BASE/_SIZE (base in 4 KiB units, BASE_HI = address >> 44; SIZE in 4 KiB units), MASK
(SIMD_SEL, WGP_SEL, SA_SEL, WTYPE_INCLUDE), TOKEN_MASK (TOKEN_EXCLUDE), CTRL.MODE 1 = on), §2.3 (THREAD_TRACE_FINISH,
STATUS.FINISH_PENDING / FINISH_DONE / BUSY, WPTR in 32-byte units and absolute on gfx11.0: (address / 32) +
bytes written / 32; a buffer that fills stops at size - 32 bytes, which a host reads as an overflow),, and
specs/amd-compute.md §8 (field positions; here every offset and field comes from the register database).

Model (inferred where the spec is silent):

* Writes follow GRBM_GFX_INDEX as the register file holds it: SE_BROADCAST_WRITES writes every SE, else SE_INDEX;
  reads answer the SE of SE_INDEX.
* CTRL.MODE 0 -> 1 starts the SE's stream with a LAYOUT_HEADER at cycle 0 (time zero is that moment, board
  clock); packets come from :mod:`tinyhw.mocks.rdna3.sqtt` while a dispatch runs with COMPUTE_THREAD_TRACE_ENABLE
  set. After each dispatch the whole 32-byte chunks go to the buffer, through GPUVM (VMID0).
* THREAD_TRACE_FINISH (EVENT_WRITE event 55) sets FINISH_PENDING on every tracing SE for :data:`FINISH_S`; then
  the whole chunks it holds are written and FINISH_DONE counts up. CTRL.MODE 1 -> 0 reads BUSY for
  :data:`STOP_S`; then the rest (zero-padded to 32 bytes) is written and WPTR moves: a host that reads WPTR
  before BUSY clears gets a short trace.
* Buffer full: nothing is written beyond size - 32 bytes; the packets that did not fit are counted in
  SQ_THREAD_TRACE_DROPPED_CNTR (in 32-byte chunks), and WPTR stays at the last 32-byte chunk. A write GPUVM refuses sets
  STATUS.WRITE_ERROR and stops that SE's writes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tinyhw.mocks.amd.gpuvm import VmFault
from tinyhw.mocks.common.services import BoardServices
from tinyhw.mocks.rdna3.sqtt import DispatchTrace, Masks, SeStream
from tinyhw.regs.asic import Asic

__all__ = ["FINISH_S", "STOP_S", "ThreadTrace"]

FINISH_S = 2e-6   # THREAD_TRACE_FINISH until FINISH_PENDING clears (inferred)
STOP_S = 20e-6    # CTRL.MODE 0 until BUSY clears and the last bytes have landed (inferred)
EVENT_THREAD_TRACE_FINISH = 55  # specs/sqtt-pmc.md §2.3
CHUNK = 32
_REGS = ("BUF0_BASE", "BUF0_SIZE", "CTRL", "MASK", "TOKEN_MASK", "WPTR", "STATUS", "DROPPED_CNTR")


@dataclass
class _Se:
    """One SE's trace registers and stream."""

    values: dict[str, int] = field(default_factory=dict)
    stream: SeStream | None = None
    t0: float = 0.0             # board clock (command seconds) when the stream started
    written: int = 0            # bytes in the buffer
    full: bool = False
    write_error: bool = False
    pending: int = 0
    done: int = 0
    busy: bool = False
    dropped: int = 0


class ThreadTrace:
    """SQ_THREAD_TRACE_* of every SE of the board (see the module docstring)."""

    def __init__(self, services: BoardServices, regs: Asic, *, ses: int, shader_hz: float) -> None:
        self.s = services
        self.regs = regs
        self.ses = ses
        self.hz = shader_hz
        self.off = {n: regs.offset(f"gc.SQ_THREAD_TRACE_{n}") for n in _REGS}
        self.gfx_index = regs.offset("gc.GRBM_GFX_INDEX")

        def fld(path: str) -> tuple[int, int]:
            f = regs.field(f"gc.{path}")
            return f.mask, f.shift
        self.f = {p: fld(p) for p in (
            "GRBM_GFX_INDEX.SE_INDEX", "GRBM_GFX_INDEX.SE_BROADCAST_WRITES", "SQ_THREAD_TRACE_BUF0_SIZE.BASE_HI",
            "SQ_THREAD_TRACE_BUF0_SIZE.SIZE", "SQ_THREAD_TRACE_CTRL.MODE", "SQ_THREAD_TRACE_MASK.SIMD_SEL",
            "SQ_THREAD_TRACE_MASK.WGP_SEL", "SQ_THREAD_TRACE_MASK.SA_SEL", "SQ_THREAD_TRACE_MASK.WTYPE_INCLUDE",
            "SQ_THREAD_TRACE_TOKEN_MASK.TOKEN_EXCLUDE", "SQ_THREAD_TRACE_WPTR.OFFSET",
            "SQ_THREAD_TRACE_STATUS.FINISH_PENDING", "SQ_THREAD_TRACE_STATUS.FINISH_DONE",
            "SQ_THREAD_TRACE_STATUS.WRITE_ERROR", "SQ_THREAD_TRACE_STATUS.BUSY")}
        self.power_on()

    def power_on(self) -> None:
        """Power-on / mode-1-reset: every SE idle, no stream."""
        self.se = [_Se() for _ in range(self.ses)]
        self.stats = {"dispatches_traced": 0, "bytes_written": 0, "finish_events": 0}

    def _get(self, value: int, path: str) -> int:
        mask, shift = self.f[path]
        return (value & mask) >> shift

    def _put(self, path: str, v: int) -> int:
        mask, shift = self.f[path]
        return (v << shift) & mask

    # -- registers --------------------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """BAR5 handlers of the per-SE SQ_THREAD_TRACE_* registers."""
        reads = {o: (lambda n=n: self.read(n)) for n, o in self.off.items()}
        writes = {o: (lambda v, n=n: self.write(n, v)) for n, o in self.off.items()}
        return reads, writes

    def _selected(self) -> list[_Se]:
        idx = self.s.reg_read(self.gfx_index)
        if self._get(idx, "GRBM_GFX_INDEX.SE_BROADCAST_WRITES"):
            return self.se
        n = self._get(idx, "GRBM_GFX_INDEX.SE_INDEX")
        return [self.se[n]] if n < self.ses else []

    def read(self, name: str) -> int:
        """The selected SE's register ``name`` (WPTR and STATUS computed)."""
        n = self._get(self.s.reg_read(self.gfx_index), "GRBM_GFX_INDEX.SE_INDEX")
        if n >= self.ses:
            return 0
        se = self.se[n]
        if name == "WPTR":
            return self._put("SQ_THREAD_TRACE_WPTR.OFFSET", ((self._base(se) >> 5) + se.written // CHUNK) & 0x1FFFFFFF)
        if name == "STATUS":
            return (self._put("SQ_THREAD_TRACE_STATUS.FINISH_PENDING", se.pending)
                    | self._put("SQ_THREAD_TRACE_STATUS.FINISH_DONE", se.done & 0xFFF)
                    | self._put("SQ_THREAD_TRACE_STATUS.WRITE_ERROR", int(se.write_error))
                    | self._put("SQ_THREAD_TRACE_STATUS.BUSY", int(se.busy)))
        if name == "DROPPED_CNTR":
            return se.dropped & 0xFFFFFFFF
        return se.values.get(name, 0)

    def write(self, name: str, value: int) -> None:
        """A host write of ``name``, to the SEs GRBM_GFX_INDEX selects."""
        value &= 0xFFFFFFFF
        for se in self._selected():
            if name in ("WPTR", "STATUS", "DROPPED_CNTR"):
                continue  # read-only here
            was = self._get(se.values.get("CTRL", 0), "SQ_THREAD_TRACE_CTRL.MODE")
            se.values[name] = value
            if name == "CTRL":
                mode = self._get(value, "SQ_THREAD_TRACE_CTRL.MODE")
                if mode == 1 and was != 1:
                    self._start(se)
                elif mode != 1 and was == 1:
                    self._stop(se)

    def _base(self, se: _Se) -> int:
        size = se.values.get("BUF0_SIZE", 0)
        return (self._get(size, "SQ_THREAD_TRACE_BUF0_SIZE.BASE_HI") << 32 | se.values.get("BUF0_BASE", 0)) << 12

    def _size(self, se: _Se) -> int:
        return self._get(se.values.get("BUF0_SIZE", 0), "SQ_THREAD_TRACE_BUF0_SIZE.SIZE") << 12

    def _start(self, se: _Se) -> None:
        se.stream = SeStream()
        se.stream.header()
        se.t0 = self.s.command_now()
        se.written, se.full, se.write_error, se.dropped, se.busy = 0, False, False, 0, False

    def _stop(self, se: _Se) -> None:
        stream, se.stream = se.stream, None
        se.busy = True

        def idle() -> None:  # the rest of the stream lands, then the SE goes idle
            self._flush(se, final=True, stream=stream)
            se.busy = False
        self.s.schedule(STOP_S, idle)

    def _flush(self, se: _Se, final: bool, stream: SeStream | None = None) -> None:
        stream = stream or se.stream
        if stream is None:
            return
        data = stream.take(final)
        if not data:
            return
        room = max(0, self._size(se) - CHUNK - se.written) if not (se.full or se.write_error) else 0
        if len(data) > room:
            se.full = True
            se.dropped += (len(data) - room) // CHUNK
            data = data[:room]
        if not data:
            return
        try:
            self.s.gpu_write(0, self._base(se) + se.written, data)
        except VmFault:
            se.write_error = True
            return
        se.written += len(data)
        self.stats["bytes_written"] += len(data)

    # -- the command processor's side -------------------------------------------------------------------------
    def masks(self, se: _Se) -> Masks:
        """The SE's MASK / TOKEN_MASK fields."""
        m, t = se.values.get("MASK", 0), se.values.get("TOKEN_MASK", 0)
        g = self._get
        return Masks(g(m, "SQ_THREAD_TRACE_MASK.SIMD_SEL"), g(m, "SQ_THREAD_TRACE_MASK.WGP_SEL"),
                     g(m, "SQ_THREAD_TRACE_MASK.SA_SEL"), g(m, "SQ_THREAD_TRACE_MASK.WTYPE_INCLUDE"),
                     g(t, "SQ_THREAD_TRACE_TOKEN_MASK.TOKEN_EXCLUDE"))

    def for_dispatch(self, now: float) -> DispatchTrace | None:
        """The trace a dispatch launched at board time ``now`` (command seconds) writes; None when no SE traces."""
        if not any(se.stream is not None for se in self.se):
            return None
        self.stats["dispatches_traced"] += 1
        starts = [int(max(0.0, now - se.t0) * self.hz) for se in self.se]
        return DispatchTrace([se.stream for se in self.se], [self.masks(se) for se in self.se], starts)

    def after_dispatch(self) -> None:
        """The dispatch ended: its whole 32-byte chunks go to the buffers."""
        for se in self.se:
            self._flush(se, final=False)

    def on_event(self, event_type: int) -> None:
        """An EVENT_WRITE the CP executed: THREAD_TRACE_FINISH makes every tracing SE write out what it holds."""
        if event_type != EVENT_THREAD_TRACE_FINISH:
            return
        self.stats["finish_events"] += 1
        for se in self.se:
            if se.stream is None:
                continue
            se.pending = 1

            def done(se: _Se = se) -> None:  # what the SE holds lands, then the finish is done
                self._flush(se, final=False)
                se.pending = 0
                se.done += 1
            self.s.schedule(FINISH_S, done)
