"""The SQ thread trace (SQTT) of a booted Navi3x around one compute dispatch: program, run, stop, copy out.

Layer 3 (boot): handed an :class:`~tinyhw.boot.amd.gpu.AmGpu` and a :class:`~tinyhw.boot.amd.compute.ComputeEngine`.
Spec: specs/sqtt-pmc.md §2.1 (start: SPI_CONFIG_CNTL with the SQG events on; per SE, GRBM_GFX_INDEX selecting it:
BUF0_SIZE / BUF0_BASE, MASK = compute waves of SIMD ``simd_sel`` of WGP 0 in SA 0, TOKEN_MASK with the
instruction tokens excluded outside the itrace SEs, CTRL on; then COMPUTE_THREAD_TRACE_ENABLE), §2.2 (after the
dispatch: EVENT_WRITE THREAD_TRACE_MARKER), §2.3 (stop: COMPUTE_THREAD_TRACE_ENABLE 0, EVENT_WRITE
THREAD_TRACE_FINISH; per SE wait for STATUS.FINISH_PENDING = 0, CTRL mode 0, wait for STATUS.BUSY = 0, read WPTR;
length = (WPTR.OFFSET - (buffer address / 32)) x 32 on gfx11.0, where WPTR is absolute; a length of at least
size - 32 is an overflow). Every register and field by name from the generated gc_11_0_0 database.

tinyhw drives the registers from the host (it owns the GPU), so the per-SE register writes and the status waits
are MMIO accesses rather than the PM4 register packets and WAIT_REG_MEM of a kernel driver; what must happen in
the queue's order (the enable around the dispatch, the marker and finish events) goes into the dispatch's
packets. Layout (tinyhw's own): the per-SE buffers in VRAM 224 MiB .. 256 MiB (inside a 256 MiB BAR0, above the
compute region), mapped with 2 MiB pages at VA base + 192 MiB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from tinyhw.boot.amd import pm4
from tinyhw.boot.amd.copyengine import VA_BASE, fields, map_vram_2m
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.transport.wait import poll

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

KiB, MiB = 1 << 10, 1 << 20
TRACE_VRAM, TRACE_VRAM_SIZE = 224 * MiB, 32 * MiB
TRACE_VA = VA_BASE + 192 * MiB
DEFAULT_BUFFER = 4 * MiB
MIN_BUFFER = 4 * KiB
WTYPE_CS = 1 << 6                         # MASK.WTYPE_INCLUDE: compute waves (§2.1)
NO_ITRACE = 0x127                         # TOKEN_EXCLUDE of VMEMEXEC, ALUEXEC, VALUINST, IMMEDIATE, INST (§2.1)
EXCLUDE_PERF = 1 << 11                    # gfx11: PERF tokens excluded everywhere (§2.1)
REG_INCLUDE = 0x1F                        # SQDEC, SHDEC, GFXUDEC, COMP, CONTEXT (§2.1)
RT_FREQ_4096 = 2                          # CTRL.RT_FREQ: a realtime marker every 4096 clocks (§2.1)
EVENT_CS_PARTIAL_FLUSH, EVENT_THREAD_TRACE_MARKER, EVENT_THREAD_TRACE_FINISH = 7, 53, 55  # §2.2, §2.3
WAIT_S = 1.0


@dataclass(frozen=True)
class TraceSetup:
    """What to trace: the shader engines, the per-SE buffer size, which SEs trace instructions, which SIMD."""

    shader_engines: int = 6
    buffer_bytes: int = DEFAULT_BUFFER
    itrace_se_mask: int = 0b11
    simd_sel: int = 0

    def check(self) -> None:
        """Refuse (exit 2) a setup that does not fit the trace region or the register fields."""
        if not 1 <= self.shader_engines <= 8:
            raise Refused(f"{self.shader_engines} shader engines: tinyhw traces 1 .. 8")
        most = TRACE_VRAM_SIZE // self.shader_engines // MIN_BUFFER * MIN_BUFFER
        if self.buffer_bytes % MIN_BUFFER or not MIN_BUFFER <= self.buffer_bytes <= most:
            raise Refused(f"a trace buffer of {self.buffer_bytes} bytes per shader engine: take a multiple of 4 KiB "
                          f"from 4 KiB to {most // KiB} KiB ({self.shader_engines} buffers share "
                          f"{TRACE_VRAM_SIZE // MiB} MiB)")
        if not 0 <= self.simd_sel <= 3:
            raise Refused(f"simd {self.simd_sel}: a WGP has SIMDs 0 .. 3")
        if not 0 <= self.itrace_se_mask < 1 << self.shader_engines:
            raise Refused(f"itrace se mask 0x{self.itrace_se_mask:x} names shader engines this gpu lacks")

    def va(self, se: int) -> int:
        """The GPU virtual address of SE ``se``'s buffer."""
        return TRACE_VA + se * self.buffer_bytes

    def vram(self, se: int) -> int:
        """The VRAM offset of SE ``se``'s buffer."""
        return TRACE_VRAM + se * self.buffer_bytes


@dataclass(frozen=True)
class SeTrace:
    """One shader engine's trace: its bytes, whether it traced instructions, and whether its buffer overflowed."""

    se: int
    itrace: bool
    data: bytes
    overflow: bool


class ThreadTrace:
    """The SQ thread trace of a booted gc 11 GPU (see the module docstring); start, dispatch packets, stop."""

    def __init__(self, gpu: AmGpu, setup: TraceSetup | None = None) -> None:
        self.gpu = gpu
        self.setup = setup or TraceSetup()
        self.setup.check()
        self.started = False

    def _select(self, se: int | None) -> None:
        g = self.gpu
        if se is None:
            g.wr("gc.GRBM_GFX_INDEX", fields(g, "gc.GRBM_GFX_INDEX", SE_BROADCAST_WRITES=1, SA_BROADCAST_WRITES=1,
                                            INSTANCE_BROADCAST_WRITES=1))
        else:
            g.wr("gc.GRBM_GFX_INDEX", fields(g, "gc.GRBM_GFX_INDEX", SE_INDEX=se, SA_INDEX=0,
                                            INSTANCE_BROADCAST_WRITES=1))

    def _spi(self, on: bool) -> None:
        g = self.gpu
        g.wr("gc.SPI_CONFIG_CNTL", fields(g, "gc.SPI_CONFIG_CNTL", GPR_WRITE_PRIORITY=0x2C688, EXP_PRIORITY_ORDER=3,
                                         PS_PKR_PRIORITY_CNTL=3, ENABLE_SQG_TOP_EVENTS=int(on),
                                         ENABLE_SQG_BOP_EVENTS=int(on)))

    def start(self) -> None:
        """Map the buffers, program every SE (§2.1) and turn its trace on. The buffers are not cleared: only the
        bytes up to each SE's write pointer are read back (clearing 6 x 4 MiB would cost seconds over USB)."""
        g, st = self.gpu, self.setup
        map_vram_2m(g, TRACE_VA - VA_BASE, TRACE_VRAM, TRACE_VRAM_SIZE)
        self._spi(True)
        try:
            for se in range(st.shader_engines):
                self._select(se)
                va = st.va(se)
                g.wr("gc.SQ_THREAD_TRACE_BUF0_SIZE", fields(g, "gc.SQ_THREAD_TRACE_BUF0_SIZE",
                                                            SIZE=st.buffer_bytes >> 12, BASE_HI=va >> 44))
                g.wr("gc.SQ_THREAD_TRACE_BUF0_BASE", (va >> 12) & 0xFFFFFFFF)
                g.wr("gc.SQ_THREAD_TRACE_MASK", fields(g, "gc.SQ_THREAD_TRACE_MASK", WTYPE_INCLUDE=WTYPE_CS,
                                                       SIMD_SEL=st.simd_sel, WGP_SEL=0, SA_SEL=0))
                exclude = EXCLUDE_PERF | (0 if st.itrace_se_mask >> se & 1 else NO_ITRACE)
                g.wr("gc.SQ_THREAD_TRACE_TOKEN_MASK", fields(g, "gc.SQ_THREAD_TRACE_TOKEN_MASK",
                                                             REG_INCLUDE=REG_INCLUDE, TOKEN_EXCLUDE=exclude,
                                                             BOP_EVENTS_TOKEN_INCLUDE=1))
                g.wr("gc.SQ_THREAD_TRACE_CTRL", self._ctrl(1))
        finally:
            self._select(None)
        self.started = True

    def _ctrl(self, mode: int) -> int:
        return fields(self.gpu, "gc.SQ_THREAD_TRACE_CTRL", MODE=mode, DRAW_EVENT_EN=1, SPI_STALL_EN=1, SQ_STALL_EN=1,
                      REG_AT_HWM=2, HIWATER=1, UTIL_TIMER=1, RT_FREQ=RT_FREQ_4096)

    def _enable(self, on: bool) -> list[int]:
        return pm4.set_sh_reg(self.gpu.offset("gc.COMPUTE_THREAD_TRACE_ENABLE"),
                              [fields(self.gpu, "gc.COMPUTE_THREAD_TRACE_ENABLE", THREAD_TRACE_ENABLE=int(on))])

    def before_dispatch(self) -> list[int]:
        """Packets before DISPATCH_DIRECT: COMPUTE_THREAD_TRACE_ENABLE = 1."""
        return self._enable(True)

    def after_dispatch(self) -> list[int]:
        """Packets after DISPATCH_DIRECT (before the fence): the marker, the enable off, THREAD_TRACE_FINISH."""
        return (pm4.event_write(EVENT_THREAD_TRACE_MARKER) + self._enable(False)
                + pm4.event_write(EVENT_THREAD_TRACE_FINISH) + pm4.event_write(EVENT_CS_PARTIAL_FLUSH, index=4))

    def stop(self) -> list[SeTrace]:
        """After the dispatch's fence: per SE wait for the finish, turn the trace off, wait until idle, read the
        write pointer and copy the trace out (§2.3)."""
        g, st = self.gpu, self.setup
        out = []
        try:
            for se in range(st.shader_engines):
                self._select(se)
                self._wait(se, "FINISH_PENDING", "the trace finish")
                g.wr("gc.SQ_THREAD_TRACE_CTRL", self._ctrl(0))
                self._wait(se, "BUSY", "the trace to go idle")
                wptr = g.rd("gc.SQ_THREAD_TRACE_WPTR")
                offset = g.asic.reg("gc.SQ_THREAD_TRACE_WPTR").decode(wptr)["OFFSET"]
                length = trace_length(offset, st.va(se))
                if not 0 <= length <= st.buffer_bytes:
                    raise DeviceTimeout(f"shader engine {se}'s trace write pointer 0x{wptr:08x} is outside its "
                                        f"buffer at 0x{st.va(se):x}", hint="reset the gpu and boot again")
                data = g.vram_read(st.vram(se), length) if length else b""
                out.append(SeTrace(se, bool(st.itrace_se_mask >> se & 1), data, length >= st.buffer_bytes - 32))
        finally:
            self._select(None)
            self._spi(False)
            self.started = False
        return out

    def _wait(self, se: int, field: str, what: str) -> None:
        g = self.gpu
        reg = g.asic.reg("gc.SQ_THREAD_TRACE_STATUS")
        try:
            poll(g.clock, lambda: g.rd("gc.SQ_THREAD_TRACE_STATUS"), lambda v: not reg.decode(v)[field],
                 timeout=WAIT_S, interval=1e-6, what=f"shader engine {se}: {what}")
        except DeviceTimeout as e:
            raise DeviceTimeout(f"shader engine {se}: {what} did not happen in {WAIT_S:g} s "
                                f"(SQ_THREAD_TRACE_STATUS 0x{g.rd('gc.SQ_THREAD_TRACE_STATUS'):08x})",
                                hint="reset the gpu (`tinyhw am reset --yes`) and boot again") from e


def trace_length(wptr_offset: int, buffer_va: int) -> int:
    """Bytes in a gfx11.0 trace buffer: WPTR.OFFSET is absolute, in 32-byte units (§2.3)."""
    return ((wptr_offset - (buffer_va // 32)) & 0x1FFFFFFF) * 32
