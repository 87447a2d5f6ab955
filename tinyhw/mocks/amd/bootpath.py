"""The AM boot path of the emulated Navi31 board: a component the board owns (events, mode-1 reset, state file).

specs/amd-bringup.md §4.5 (MC address = FB base + VRAM offset), §7.2 and §10.4 (mode-1
reset), §10.4 (firmware answers after configurable delays, so the driver's polling is exercised),
ARCHITECTURE.md "Emulated boards" (state that outlives a command lives beside the flash file:
:mod:`tinyhw.mocks.amd.boardstate`).

:class:`AmBootPath` builds and owns the boot-path blocks -- the PSP boot model (:mod:`tinyhw.mocks.amd.pspboot`),
the SMU (:mod:`tinyhw.mocks.amd.smu`), the GPU VM (:mod:`tinyhw.mocks.amd.gpuvm`) and SDMA0
(:mod:`tinyhw.mocks.amd.sdma`) --
on the board's :class:`~tinyhw.mocks.common.services.BoardServices`, with the ASIC's register database; it answers the
blocks' events (sOS alive gates the flash mailbox, SMU firmware loaded, RLC autoload done, mode-1 reset) and
keeps the board state file. :class:`EventQueue` is the virtual-time event queue behind
``BoardServices.schedule``.
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable
from typing import Protocol

from tinyhw.boards.amd import AmdBoardOptions
from tinyhw.boards.spec import BoardSpec
from tinyhw.mocks.amd import boardstate
from tinyhw.mocks.amd.amregs import RegisterFile
from tinyhw.mocks.amd.cp import CUS, SHADER_HZ, CommandProcessor
from tinyhw.mocks.amd.doorbells import DoorbellRouter
from tinyhw.mocks.amd.gpuvm import GpuVm, VmFault
from tinyhw.mocks.amd.perfmon import PerfMon
from tinyhw.mocks.amd.pspboot import PspBoot, PspTiming
from tinyhw.mocks.amd.sdma import SdmaEngine
from tinyhw.mocks.amd.smu import Smu
from tinyhw.mocks.amd.smuio import Smuio
from tinyhw.mocks.amd.thread_trace import ThreadTrace
from tinyhw.mocks.common.faults import BusFault
from tinyhw.mocks.common.services import BoardServices
from tinyhw.regs.asic import Asic


class Clock(Protocol):
    """What the event queue needs of a clock: the current virtual time in seconds."""

    def now(self) -> float:
        """The current virtual time in seconds."""


class FlashMailbox(Protocol):
    """The early PSP flash mailbox (:class:`tinyhw.mocks.amd.psp.PspMailbox`) as the boot path moves it."""

    def set_state(self, state: str) -> None:
        """Move the mailbox to board state ``state`` (``pbl``, ``early``, ``sos``, ``gated``)."""

    def to_state(self) -> dict[str, object]:
        """What of the mailbox outlives a command (saved in the board state file)."""


class EventQueue:
    """Firmware events in virtual time: each runs at the first board access at or after its due time."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._event_time: float | None = None
        self._seq = 0

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` ``delay`` seconds from now, or from the due time of the event running now."""
        self._seq += 1
        base = self._event_time if self._event_time is not None else self.clock.now()
        heapq.heappush(self._events, (base + delay, self._seq, fn))

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at this command's clock time ``t`` (or at once if that has passed): the command processor's
        fence writes at a dispatch's modelled end."""
        base = self._event_time if self._event_time is not None else self.clock.now()
        self.schedule(max(0.0, t - base), fn)

    def due(self) -> bool:
        """An event is due at the clock's present."""
        return bool(self._events) and self._events[0][0] <= self.clock.now()

    def run_due(self) -> None:
        """Run every event that is due, each at its own time (what it schedules counts from then)."""
        while self._events and self._events[0][0] <= self.clock.now():
            self._run(heapq.heappop(self._events))

    def drain(self, end: float) -> float:
        """Run every pending event at its own time; the latest of ``end`` and their due times."""
        while self._events:
            event = heapq.heappop(self._events)
            end = max(end, event[0])
            self._run(event)
        return end

    def clear(self) -> None:
        """Drop every pending event (a mode-1 reset cancels what the firmware had scheduled)."""
        self._events.clear()

    def _run(self, event: tuple[float, int, Callable[[], None]]) -> None:
        due, _, fn = event
        self._event_time = due
        try:
            fn()
        finally:
            self._event_time = None


class AmCpServices:
    """The board's :class:`~tinyhw.mocks.common.services.CpServices`: what the command processor asks of the board,
    adapted from the board's services (this command's clock), its event queue, its GPU VM (VMID0 memory) and its
    register file; register accesses go through the board's handlers (``reg_read``/``reg_write``) when it hands them
    in, else straight to the register file's storage (only registers it holds)."""

    def __init__(self, services: BoardServices, events: EventQueue, gpuvm: GpuVm, regfile: RegisterFile, *,
                 strict: bool, time_base: Callable[[], float], reg_read: Callable[[int], int | None] | None = None,
                 reg_write: Callable[[int, int], bool] | None = None) -> None:
        self._services = services
        self._events = events
        self._gpuvm = gpuvm
        self._regfile = regfile
        self._strict = strict
        self._time_base = time_base
        self._reg_read = reg_read
        self._reg_write = reg_write

    @property
    def regs(self) -> dict[int, int]:
        """The register file's storage by BAR5 byte offset."""
        return self._regfile.values

    @property
    def strict(self) -> bool:
        """True on a strict board: what is not modelled raises."""
        return self._strict

    @property
    def vm(self) -> GpuVm:
        """The board's GC VM (VMID0 memory of the compute queues)."""
        return self._gpuvm

    def now(self) -> float:
        """This command's virtual clock in seconds."""
        return self._services.command_now()

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` when this command's clock reaches ``t`` (the board's event queue)."""
        self._events.at(t, fn)

    def ticks(self, t: float) -> int:
        """The board time in 10 ns ticks at this command's clock time ``t`` (the time lived before it included)."""
        return int((self._time_base() + t) * 1e8)

    def read(self, va: int, length: int) -> bytes:
        """``length`` bytes at VMID0 address ``va`` through the GC VM."""
        return self._gpuvm.read(va, length)

    def write(self, va: int, data: bytes) -> None:
        """Write ``data`` at VMID0 address ``va`` through the GC VM."""
        self._gpuvm.write(va, data)

    def reg_read(self, offset: int) -> int | None:
        """The register at BAR5 byte ``offset`` through the board's handlers; None: no register there."""
        if self._reg_read is not None:
            return self._reg_read(offset)
        return self._regfile.values.get(offset)

    def reg_write(self, offset: int, value: int) -> bool:
        """Write the register at BAR5 byte ``offset`` through the board's handlers; False: no register there."""
        if self._reg_write is not None:
            return self._reg_write(offset, value)
        if offset not in self._regfile.values:
            return False
        self._regfile.values[offset] = value
        return True


class AmBootPath:
    """The boot-path blocks of the board and the glue between them (events, reset, state file)."""

    def __init__(self, services: BoardServices, regs: Asic, regfile: RegisterFile, events: EventQueue,
                 options: AmdBoardOptions, timing: PspTiming, smu_delay: float, *, mailbox: FlashMailbox,
                 smuio: Smuio, place_discovery: Callable[[], None], spec: BoardSpec,
                 engine_regs: tuple[Callable[[int], int | None], Callable[[int, int], bool]] | None = None) -> None:
        self.services = services
        self.regfile = regfile
        self.events = events
        self.options = options
        self.mailbox = mailbox
        self.smuio = smuio
        self.place_discovery = place_discovery
        self.time_base = 0.0  # virtual time the board had lived before this command
        self.resets: list[str] = []  # mode-1 resets this command, by trigger
        o = options
        timing.sos_delay = o.sos_delay
        firmware = spec.firmware  # an emulated AMD board's PSP and SMU check the files its description names
        assert firmware is not None, f"{spec.name}: an emulated amd board needs its firmware description"
        self.boot = PspBoot(services, regs, timing, on_sos_alive=self.on_sos_alive,
                            on_smu_loaded=self.on_smu_loaded, on_autoload_done=self.on_autoload_done,
                            on_reset=self.mode1_reset, hang=o.psp == "hang", fwcheck=o.fwcheck == "on",
                            client_read=self.mmhub_client_read, firmware=firmware)
        self.smu = Smu(services, regs, on_reset=self.mode1_reset, compute_active=self.compute_active,
                       delay=smu_delay, silent=o.smu == "silent", busy_at=o.smu_busy_at, load=o.load,
                       firmware=firmware)
        # the copy engine (SDMA0 queue 0, VMID0 translation); its system pages are the board's bus
        self.gpuvm = GpuVm(services, regs, huge=o.hugepage)
        self.mmvm = GpuVm(services, regs, hub="mmhub", huge=o.hugepage)  # MMHUB VMID0: the same walk, its registers
        self.sdma = SdmaEngine(services, regs, hang=o.sdma == "hang", strict=o.strict,
                               fault=None if o.sdma in ("normal", "hang") else o.sdma)
        # the SQ thread trace (mocks/amd/thread_trace.py): its per-SE registers, fed by the shader core's packets
        self.thread_trace = ThreadTrace(services, regs, ses=spec.gc_info["gc_num_se"], shader_hz=SHADER_HZ)
        self.perfmon = PerfMon(services, regs)  # the SQ / GRBM performance counters (mocks/amd/perfmon.py)
        # the command processor's compute queues (mocks/amd/cp.py): its services, trace and counters, all given here;
        # engine_regs: the board's register access for WAIT_REG_MEM / register writes from a queue
        reg_read, reg_write = engine_regs or (None, None)
        self.cp = CommandProcessor(AmCpServices(services, events, self.gpuvm, regfile, strict=bool(o.strict),
                                                time_base=lambda: self.time_base, reg_read=reg_read,
                                                reg_write=reg_write), regs, thread_trace=self.thread_trace,
                                   perfmon=self.perfmon, cus=spec.compute_units or CUS)
        self.doorbells = DoorbellRouter(regs, regfile)  # which block a BAR2 doorbell reaches (the NBIO's routes)
        self._load_state()
        if o.psp in ("sos", "gated") and not self.boot.s.sos_alive:
            self.boot.s.sos_alive = 1
            self.boot.s.ctrl = 0x80000000

    # -- the blocks' events -------------------------------------------------------------------------------------
    def compute_active(self) -> bool:
        """True while any compute queue of the command processor is active."""
        return self.cp.any_active()

    def mmhub_client_read(self, mc: int, length: int) -> bytes | None:
        """What an MMHUB client (the PSP) reads at MC address ``mc`` (amd-bringup.md §4.5): VRAM inside the FB, else
        through MMHUB VMID0 (its system aperture and page table; system pages from the board's bus attachment);
        None when the translation faults (the fault is latched in the MMHUB's status as for any client)."""
        phys = self.services.mc_to_vram(mc, length)
        if phys is not None:
            return self.services.vram_read(phys, length)
        try:
            return self.mmvm.read(mc, length)
        except (VmFault, BusFault):
            return None

    def on_sos_alive(self) -> None:
        """sOS running: the early flash mailbox is gated (navi31-spi-flash.md §1 board states)."""
        self.mailbox.set_state("sos")
        self.smuio.gated = True

    def on_smu_loaded(self) -> None:
        """The PSP loaded the SMU firmware: the SMU starts answering, its metrics run from now."""
        self.smu.s.loaded = True
        self.smu.s.last_t = self.services.now()

    def on_autoload_done(self) -> None:
        """RLC autoload completed: CP_STAT reads 0 and bootload_complete is set from now on."""
        self.regfile.autoload_done = True

    def mode1_reset(self, trigger: str) -> None:
        """Mode-1 reset (§7.2, §10.4): firmware, ring, TMR, SMU, GC state and registers back to
        power-on; the bootloader is unavailable for ``reset_delay`` and then ready again. VRAM contents and
        PCI config space are kept (inferred simplifications); the discovery table is rewritten."""
        self.resets.append(trigger)
        self.events.clear()
        self.boot.power_on()
        self.boot.s.bl_reg = 0
        self.smu.power_on()
        self.regfile.power_on()
        self.mailbox.set_state("pbl")
        self.cp.power_on()
        self.thread_trace.power_on()
        self.perfmon.power_on()
        self.smuio.power_on()
        self.smuio.gated = False
        self.place_discovery()

        def ready() -> None:
            self.boot.s.bl_reg = 0x80000000

        self.events.schedule(self.boot.timing.reset_delay, ready)

    def counters(self) -> dict[str, int]:
        """The boot path's counters of this command."""
        return {"regfile_writes": self.regfile.writes, "smu_messages": self.smu.messages,
                "psp_commands": len(self.boot.log), "mode1_resets": len(self.resets),
                "sdma_packets": self.sdma.stats["packets"], "sdma_bytes_copied": self.sdma.stats["bytes_copied"]}

    # -- board state file ----------------------------------------------------------------------------------------
    def _load_state(self) -> None:
        state = boardstate.load(self.options.flash)
        self.booted = state.get("booted")  # the partition the last power cycle booted (None: unknown, or none)
        if not state:
            return
        self.time_base = float(state.get("time", 0.0))
        self.regfile.from_state(state.get("regs", {}))
        self.boot.from_state(state.get("psp", {}))
        self.smu.from_state(state.get("smu", {}))
        self.cp.from_state(state.get("cp", {}))
        for key, value in state.get("smuio", {}).items():  # ROM block / GPIO pad storage written earlier
            if int(key, 16) in self.smuio.regs:
                self.smuio.regs[int(key, 16)] = int(value) & 0xFFFFFFFF
        if self.boot.s.sos_alive:
            self.mailbox.set_state("sos")
            self.smuio.gated = True

    def save_state(self, last_command: Callable[[], dict[str, int]]) -> None:
        """Write the board state file (the board's time, register file, PSP and SMU state, and
        ``last_command()``, the board's counters).

        Firmware events still pending run first, at their own times: between two commands real time
        passes, so an sOS that was coming alive is alive for the next command."""
        end = self.events.drain(self.services.command_now())
        boardstate.save(self.options.flash, {
            "time": self.time_base + end, "regs": self.regfile.to_state(), "psp": self.boot.to_state(),
            "smu": self.smu.to_state(), "cp": self.cp.to_state(), "last_command": last_command(),
            "mailbox": self.mailbox.to_state(), "booted": self.booted,
            "smuio": {f"{k:x}": v for k, v in sorted(self.smuio.regs.items())
                      if v != self.smuio.config.power_on.get(k)},
        })

    def save_quietly(self, last_command: Callable[[], dict[str, int]]) -> None:
        """Write the board state file like :meth:`save_state`, ignoring an OSError (a read-only cache directory must not
        turn a close into an error)."""
        with contextlib.suppress(OSError):  # a read-only cache dir must not turn a close into an error
            self.save_state(last_command)
