"""The AM boot-path half of the emulated Navi31 board: virtual-time events, MC addressing, mode-1 reset, state file.

specs/amd-bringup.md §4.5 (MC address = FB base + VRAM offset), §7.2 and §10.4 SMU item 4 (mode-1
reset), §10.4 (firmware answers after configurable delays, so the driver's polling is exercised),
ARCHITECTURE.md "Emulated boards" (state that outlives a command lives beside the flash file:
:mod:`tinyhw.mocks.boardstate`). :class:`AmBootPath` is mixed into
:class:`tinyhw.mocks.navi31.Navi31Board`, which owns the attributes used here (``clock``, ``vram``,
``regfile``, ``boot`` (:mod:`tinyhw.mocks.pspboot`), ``smu`` (:mod:`tinyhw.mocks.smu`), ``psp``,
``smuio``, ``options``); the PSP and SMU models call back into it (``schedule``, ``mc_to_phys``,
``vram_read``/``vram_write``, ``on_*``, ``mode1_reset``).
"""

from __future__ import annotations

import contextlib
import heapq
from collections.abc import Callable
from typing import Any

from tinyhw.mocks import boardstate
from tinyhw.mocks import discovery as mock_discovery
from tinyhw.mocks.amregs import RegisterFile
from tinyhw.mocks.cp import CommandProcessor, CpServices
from tinyhw.mocks.gpuvm import GpuVm
from tinyhw.mocks.pspboot import PspBoot
from tinyhw.mocks.sdma import SdmaEngine
from tinyhw.mocks.smu import Smu


class AmBootPath:
    """Events, memory and lifetime glue of the AM boot path (a mixin of the Navi31 board)."""

    clock: Any
    vram: Any
    vram_size: int
    regfile: Any
    boot: Any
    smu: Any
    psp: Any
    smuio: Any
    options: Any
    accesses: int
    bar5_writes: int
    reg_writes: int
    resets: list[str]
    time_base: float
    _events: list[tuple[float, int, Callable[[], None]]]
    _event_time: float | None
    _seq: int

    def _init_am_boot(self, model: Any) -> None:
        """Build the boot-path models (called by the board's constructor before its BAR5 dispatch is built)."""
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._event_time: float | None = None
        self._seq = 0
        self.time_base = 0.0  # virtual time the board had lived before this command
        self.bar5_writes = 0  # BAR5 register writes this command (every block)
        self.reg_writes = 0  # the same without the address registers of the indirect windows (MM_INDEX(_HI), RSMU)
        self.resets: list[str] = []  # mode-1 resets this command, by trigger
        self.regfile = RegisterFile(self.vram_size)
        o = self.options
        model.boot.sos_delay = o.sos_delay
        self.boot = PspBoot(self, model.boot, hang=o.psp == "hang", fwcheck=o.fwcheck == "on")
        self.smu = Smu(self, delay=model.smu_delay, silent=o.smu == "silent", busy_at=o.smu_busy_at, load=o.load)
        # the copy engine (SDMA0 queue 0, VMID0 translation) and the bus master's view of the bridge (mocks/sdma.py)
        self.bus = None  # an attachment that reaches "system" bus addresses (the ASM24 bridge) sets this
        self.gpuvm = GpuVm(self)
        self.sdma = SdmaEngine(self, hang=o.sdma == "hang",
                               fault=None if o.sdma in ("normal", "hang") else o.sdma)
        # the command processor's compute queues (mocks/cp.py), handed its services explicitly
        self.cp = CommandProcessor(CpServices(
            now=self.clock.now, at=self._at, read=self.gpuvm.read, write=self.gpuvm.write,
            regs=self.regfile.values, strict=bool(o.strict), ticks=lambda: int(self.now() * 1e8)))
        self._load_state()
        if o.psp in ("sos", "gated") and not self.boot.s.sos_alive:
            self.boot.s.sos_alive = 1
            self.boot.s.ctrl = 0x80000000

    # -- time, memory, events (used by pspboot and smu) ---------------------------------------------------------
    def now(self) -> float:
        """The board's virtual time: what it lived in earlier commands plus this command's clock."""
        return self.time_base + self.clock.now()

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at the first access ``delay`` seconds of virtual time from now (or later)."""
        self._seq += 1
        base = self._event_time if self._event_time is not None else self.clock.now()
        heapq.heappush(self._events, (base + delay, self._seq, fn))

    def tick(self) -> None:
        """Run every event that is due, each at its own time (what it schedules counts from then)."""
        while self._events and self._events[0][0] <= self.clock.now():
            due, _, fn = heapq.heappop(self._events)
            self._event_time = due
            try:
                fn()
            finally:
                self._event_time = None

    def mc_to_phys(self, mc: int, length: int = 1) -> int | None:
        """VRAM offset of MC address ``mc`` (§4.5: MC = FB base + offset), None outside VRAM."""
        phys = mc - self.regfile.fb_base
        return phys if phys >= 0 and phys + length <= self.vram_size else None

    def vram_read(self, phys: int, length: int) -> bytes:
        return self.vram.read(phys, length)

    def vram_write(self, phys: int, data: bytes) -> None:
        self.vram.write(phys, data)

    def _at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at board clock time ``t`` (the command processor's fence writes)."""
        base = self._event_time if self._event_time is not None else self.clock.now()
        self.schedule(max(0.0, t - base), fn)

    def compute_active(self) -> bool:
        return self.cp.any_active()

    def on_sos_alive(self) -> None:
        """sOS running: the early flash mailbox is gated (navi31-spi-flash.md §1 board states)."""
        self.psp.set_state("sos")
        self.smuio.gated = True

    def on_smu_loaded(self) -> None:
        self.smu.s.loaded = True
        self.smu.s.last_t = self.now()

    def on_autoload_done(self) -> None:
        self.regfile.autoload_done = True

    def mode1_reset(self, trigger: str) -> None:
        """Mode-1 reset (§7.2, §10.4 SMU item 4): firmware, ring, TMR, SMU, GC state and registers back to
        power-on; the bootloader is unavailable for ``reset_delay`` and then ready again. VRAM contents and
        PCI config space are kept (inferred simplifications); the discovery table is rewritten."""
        self.resets.append(trigger)
        self._events.clear()
        self.boot.power_on()
        self.boot.s.bl_reg = 0
        self.smu.power_on()
        self.regfile.power_on()
        self.cp.power_on()
        self.cp.s.regs = self.regfile.values
        self.psp.set_state("pbl")
        self.smuio.power_on()
        self.smuio.gated = False
        self._place_discovery()

        def ready() -> None:
            self.boot.s.bl_reg = 0x80000000

        self.schedule(self.boot.timing.reset_delay, ready)

    def _place_discovery(self) -> None:
        """The IP discovery binary at VRAM size - 64 KiB (written by the firmware: not counted as a host write)."""
        written = self.vram.bytes_written
        mock_discovery.place(self.vram.write32, mock_discovery.VRAM_MIB, mock_discovery.discovery_image())
        self.vram.bytes_written = written

    def counters(self) -> dict[str, int]:
        """Emulator-side counters of this command (tests prove "nothing was written" with them)."""
        return {"vram_bytes_written": self.vram.bytes_written, "bar5_writes": self.bar5_writes,
                "reg_writes": self.reg_writes,
                "regfile_writes": self.regfile.writes, "accesses": self.accesses, "smu_messages": self.smu.messages,
                "psp_commands": len(self.boot.log), "mode1_resets": len(self.resets),
                "sdma_packets": self.sdma.stats["packets"], "sdma_bytes_copied": self.sdma.stats["bytes_copied"]}

    # -- board state file ----------------------------------------------------------------------------------------
    def _load_state(self) -> None:
        state = boardstate.load(self.options.flash)
        if not state:
            return
        self.time_base = float(state.get("time", 0.0))
        self.regfile.from_state(state.get("regs", {}))
        self.boot.from_state(state.get("psp", {}))
        self.smu.from_state(state.get("smu", {}))
        for key, value in state.get("smuio", {}).items():  # ROM block / GPIO pad storage written earlier
            if int(key, 16) in self.smuio.regs:
                self.smuio.regs[int(key, 16)] = int(value) & 0xFFFFFFFF
        if self.boot.s.sos_alive:
            self.psp.set_state("sos")
            self.smuio.gated = True

    def save_state(self) -> None:
        """Write the board state file (the board's time, register file, PSP and SMU state).

        Firmware events still pending run first, at their own times: between two commands real time
        passes, so an sOS that was coming alive is alive for the next command."""
        end = self.clock.now()
        while self._events:
            due, _, fn = heapq.heappop(self._events)
            end = max(end, due)
            self._event_time = due
            try:
                fn()
            finally:
                self._event_time = None
        boardstate.save(self.options.flash, {
            "time": self.time_base + end, "regs": self.regfile.to_state(), "psp": self.boot.to_state(),
            "smu": self.smu.to_state(), "last_command": self.counters(),
            "smuio": {f"{k:x}": v for k, v in sorted(self.smuio.regs.items())
                      if v != self.smuio.config.power_on.get(k)},
        })

    def _save_quietly(self) -> None:
        with contextlib.suppress(OSError):  # a read-only cache dir must not turn a close into an error
            self.save_state()
