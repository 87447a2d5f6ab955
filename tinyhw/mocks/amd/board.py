"""The emulated AMD RDNA3 board (Navi31, Navi33, ...), built from its description: one PCIe function and its BARs.

Every board fact (PCI identity and BARs, VRAM, register profile, IP discovery and GC info, flash chip and image,
firmware facts, the state file's path) comes from the board's :class:`~tinyhw.boards.spec.BoardSpec`
(tinyhw.boards.navi31, tinyhw.boards.navi33); nothing here names a board.

Puts together specs/pci-vfio-remote.md §3 (config space, via :mod:`tinyhw.mocks.common.pcifunc`) and
specs/navi31-spi-flash.md §h (BAR5: register file, SMUIO ROM controller + ROM_SW engine + GPIO
pads in :mod:`tinyhw.mocks.amd.smuio`, GD25LQ16E in :mod:`tinyhw.mocks.amd.gd25`, PSP mailbox in
:mod:`tinyhw.mocks.amd.psp`, ROM aperture; §1 board states). Two attachments use it: the direct
transport ``mock:navi31`` and the ASM24 USB bridge emulator ``mock:navi31-usb``.

Boot path (specs/amd-bringup.md §10.4, see tinyhw/mocks/README.md "Emulated Navi31 boot"): VRAM
behind BAR0 (sparse, 24 GiB; BAR0 256 MiB until resized), the AM register file of
:mod:`tinyhw.mocks.amd.amregs`, the PSP bootloader / sOS / KM ring of :mod:`tinyhw.mocks.amd.pspboot`, the
SMU of :mod:`tinyhw.mocks.amd.smu`, mode-1 reset, and the board state file of
:mod:`tinyhw.mocks.amd.boardstate` (what outlives a command besides the flash).

Contract with the attachments: the board never advances its clock; the attachment does, by its
modelled latency, and the board measures flash/ROM_SW/PSP durations on it. Firmware events (a
bootloader ack, sOS coming alive, a ring command's fence) are scheduled in virtual time and run on
the first access at or after their time.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tinyhw.boards.amd import AmdBoardOptions
from tinyhw.boards.spec import BoardSpec
from tinyhw.errors import Refused, StrictEmulationError
from tinyhw.mocks.amd import boardstate
from tinyhw.mocks.amd import discovery as mock_discovery
from tinyhw.mocks.amd.amregs import RegisterFile
from tinyhw.mocks.amd.bootpath import AmBootPath, EventQueue
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.flashstore import FlashStore, write_atomic
from tinyhw.mocks.amd.gd25 import GD25LQ16E, TIMINGS, Gd25Config
from tinyhw.mocks.amd.gpuvm import VmFault, invalidate_requests
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.mocks.amd.psp import ORDERS, PspConfig, PspMailbox
from tinyhw.mocks.amd.pspboot import PspTiming
from tinyhw.mocks.amd.pspupdate import FlashUpdate, UpdateFaults
from tinyhw.mocks.amd.smuio import Smuio, SmuioConfig
from tinyhw.mocks.common.pcifunc import PciFunction
from tinyhw.mocks.common.services import Translation
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.regs.asic import Asic
from tinyhw.transport.lock import DeviceLock

_LANES = [sum(0xFF << (8 * i) for i in range(4) if be >> i & 1) for be in range(16)]
_PAGE = 4096


@dataclass
class Navi31Model:
    """Modelling choices beyond :class:`~tinyhw.boards.amd.AmdBoardOptions` (the spec's (inferred) items), for tests.

    ``gd25.timing``, ``gd25.stuck_busy``/``bitflips``, ``smuio.instant``/``stray``/``aperture``/
    ``gated`` are overwritten from the options when the board is built.
    """

    gd25: Gd25Config = field(default_factory=Gd25Config)
    smuio: SmuioConfig = field(default_factory=SmuioConfig)
    psp: PspConfig = field(default_factory=PspConfig)
    boot: PspTiming = field(default_factory=PspTiming)
    smu_delay: float = 100e-6
    acs: bool = True


class _Sparse:
    """Sparse little-endian storage (VRAM, doorbells): 4 KiB pages created on first write; counts writes."""

    def __init__(self) -> None:
        self.pages: dict[int, bytearray] = {}
        self.bytes_written = 0

    def read32(self, offset: int) -> int:
        page = self.pages.get(offset >> 12)
        if page is None:
            return 0
        o = offset & (_PAGE - 1)
        return int.from_bytes(page[o:o + 4], "little")

    def write32(self, offset: int, value: int) -> None:
        page = self.pages.get(offset >> 12)
        if page is None:
            page = self.pages[offset >> 12] = bytearray(_PAGE)
        o = offset & (_PAGE - 1)
        page[o:o + 4] = value.to_bytes(4, "little")
        self.bytes_written += 4

    def read(self, offset: int, length: int) -> bytes:
        out = bytearray()
        while length > 0:
            o = offset & (_PAGE - 1)
            n = min(length, _PAGE - o)
            page = self.pages.get(offset >> 12)
            out += page[o:o + n] if page is not None else bytes(n)
            offset += n
            length -= n
        return bytes(out)

    def write(self, offset: int, data: bytes | bytearray | memoryview) -> None:
        data = memoryview(data)
        self.bytes_written += len(data)
        while data:
            o = offset & (_PAGE - 1)
            n = min(len(data), _PAGE - o)
            page = self.pages.get(offset >> 12)
            if page is None:
                page = self.pages[offset >> 12] = bytearray(_PAGE)
            page[o:o + n] = data[:n]
            offset += n
            data = data[n:]


class AmdBoard:
    """The PCIe function of the board ``spec`` describes with VRAM (BAR0), doorbells (BAR2), I/O (BAR4) and
    registers (BAR5).

    It implements :class:`~tinyhw.mocks.common.services.BoardServices` for its emulated blocks and owns the AM boot
    path (:class:`~tinyhw.mocks.amd.bootpath.AmBootPath`: PSP boot, SMU, GPU VM, SDMA0) as a component.
    """

    def __init__(self, options: AmdBoardOptions, clock: VirtualClock | None = None, *, attach: str = "direct",
                 model: Navi31Model | None = None, lock: bool = True, spec: BoardSpec) -> None:
        self.options = options
        self.spec: BoardSpec = spec
        if options.flash is None:  # the board's own file in the user cache (its description names it)
            options.flash = flash_path(options, spec=spec)
        # The device lock (ARCHITECTURE.md "Device lock"): taken here, where every emulated board is built, so
        # no caller (the CLI, tinyhw.open, a script, the gadget) can reach a board another process holds.
        self._lock: DeviceLock | None = None
        if lock:
            self._lock = DeviceLock(key=str(Path(options.flash).resolve()), backend="mock").acquire()
        try:
            self._build(options, clock, attach, model)
        except BaseException:
            self._release_lock()
            raise

    def _build(self, options: AmdBoardOptions, clock: VirtualClock | None, attach: str,
               model: Navi31Model | None) -> None:
        # the mode option (clock=device|hybrid) is the usb-attached board's: mock:navi31 offers device time only
        self.clock = clock or VirtualClock(mode=options.clock if attach == "usb" else None)
        spec = self.spec
        # the ASIC's register database, the board description's register profile, handed to every block
        assert spec.profile is not None, f"{spec.name}: an emulated amd board needs a register profile"
        self.regs = Asic(spec.profile)
        self.attach = attach
        self.accesses = 0
        self.uncovered: list[str] = []
        self._uncovered_seen: set[str] = set()
        self._strict = options.strict
        assert options.flash is not None
        saved = boardstate.load(options.flash)
        saved_mailbox = saved.get("mailbox", {})
        _check_named_psp(options, saved, spec)
        if options.psp is None:  # the state the last power cycle booted into (tinyhw mock power-cycle), else pbl
            state = saved_mailbox.get("state")
            options.psp = state if state in ("pbl", "early") else "pbl"
        self.lost = False  # the board lost power (a psp-disconnect fault): every later access fails
        self.model = model = model or Navi31Model()
        model.gd25.timing = options.timing
        model.gd25.stuck_busy = options.faults.has("stuck-busy")
        model.gd25.bitflips = tuple(options.faults.at("bitflip"))
        model.smuio.instant = options.timing == "instant"
        model.smuio.stray = options.stray == "on"
        model.smuio.aperture = options.aperture
        model.smuio.gated = options.psp not in ("pbl", "hang")
        self.pci = PciFunction(spec, attach=attach, acs=model.acs)
        flash = Path(options.flash)
        default = flash == spec.state_path()  # the shared file in the user's cache: created quietly on first use
        self.store = FlashStore(flash, lambda: build_image(board=spec), spec.flash_size, make_parents=default)
        #: what opening the board did that its user should hear of (tinyhw.connect.Opened.notes; the CLI prints them)
        self.notes: list[str] = []
        if self.store.created and not default:
            self.notes.append(f"the emulated flash file {flash} did not exist: it now holds a fresh factory image")
        self.chip = GD25LQ16E(self.store, self.clock, model.gd25)
        self.flash_regs = flash_registers(self.regs)  # the flash side's offsets, from the same database
        self.smuio = Smuio(self.flash_regs, self.chip, self.clock, model.smuio)
        f = options.faults
        if options.psp_order != "default":  # a test's own script (Navi31Model) stays unless an order is named
            model.psp.script = ORDERS[options.psp_order]
        model.psp.disconnect_at = min(f.at("psp-disconnect"), default=None)
        model.psp.timeout_at = min(f.at("psp-timeout"), default=None)
        model.psp.cut_commit = f.has("psp-cut-commit")
        self.update = FlashUpdate(lambda: self.store.data, self.store.write, TIMINGS[options.timing],
                                  UpdateFaults(badsig=f.has("psp-badsig"), spi_at=min(f.at("psp-spi"), default=None)))
        self.psp = PspMailbox(self.flash_regs, self.clock, "pbl" if options.psp == "hang" else options.psp, model.psp,
                              update=self.update, on_lost=self._lose_power)
        self.psp.from_state(saved_mailbox)
        self.vram = _Sparse()
        self.doorbells = _Sparse()
        # VRAM of the full size (BAR0 shows its low part), RCC_CONFIG_MEMSIZE, the MM_INDEX/MM_DATA window and
        # the IP discovery binary at VRAM size - 64 KiB (tinyhw.mocks.amd.discovery)
        self.vram_size = spec.vram_size
        self.window = mock_discovery.VramWindow(spec.vram_size >> 20, self._vram_read, self._vram_write,
                                                self._window_reg_read, self._window_reg_write)
        self._place_discovery()
        self._plain = {0: self.vram, 2: self.doorbells}
        self._other: dict[int, int] = {}  # non-strict storage of uncovered BAR5 dwords (navi31-spi-flash.md §h.1)
        self._closed = False
        self.bar5_writes = 0  # BAR5 register writes this command (every block)
        self.reg_writes = 0  # the same without the address registers of the indirect windows (MM_INDEX(_HI), RSMU)
        self.bus: object | None = None  # an attachment that reaches "system" bus addresses (the ASM24 bridge)
        self.events = EventQueue(self.clock)
        self.regfile = RegisterFile(self.regs, self.vram_size)
        # the address registers of the indirect windows: their writes are not counted in reg_writes
        self._index_regs = frozenset((mock_discovery.OFF_MM_INDEX, mock_discovery.OFF_MM_INDEX_HI,
                                      self.regfile.rsmu_index_reg))
        # the AM boot path (amd-bringup.md §10.4): tinyhw.mocks.amd.bootpath
        self.am = am = AmBootPath(self, self.regs, self.regfile, self.events, options, model.boot, model.smu_delay,
                                  spec=spec, mailbox=self.psp, smuio=self.smuio, place_discovery=self._place_discovery,
                                  engine_regs=(self._engine_reg_read, self._engine_reg_write))
        self.boot, self.smu, self.gpuvm, self.sdma, self.cp = am.boot, am.smu, am.gpuvm, am.sdma, am.cp
        self._rebuild()

    # -- BAR5 dispatch ----------------------------------------------------------------------------------------
    def _rebuild(self) -> None:
        reads, writes = self.smuio.handlers()
        pr, pw = self.psp.handlers()
        reads.update(pr)
        writes.update(pw)
        self._win_rd, win_wr = self.window.handlers()
        reads.update(self._win_rd)
        writes.update(win_wr)
        br, bw = self.boot.handlers()
        sr, sw = self.smu.handlers()
        taken = set(reads) | set(writes) | set(br) | set(sr)
        fr, fw = self.regfile.handlers(taken)
        for more_r, more_w in ((fr, fw), (br, bw), (sr, sw)):
            reads.update(more_r)
            writes.update(more_w)
        cr, cw = self.cp.handlers(set(self.regfile.known))  # GRBM_GFX_CNTL and the banked HQD registers
        reads.update(cr)
        writes.update(cw)
        qr, qw = self.cp.sq.handlers()  # SQ_IND_INDEX/DATA, SQ_CMD: the resident waves (mocks/amd/sqind.py)
        reads.update(qr)
        writes.update(qw)
        reads.update(self.sdma.handlers())  # SDMA0_STATUS_REG's idle bits
        for block in (self.am.thread_trace, self.am.perfmon):  # the SQ thread trace and performance counters
            block_reads, block_writes = block.handlers()
            reads.update(block_reads)
            writes.update(block_writes)
        self._rd5 = reads
        self._wr5 = writes
        for req in invalidate_requests(self.regs):  # a TLB invalidation drops both hubs' cached translations
            if req in writes:
                writes[req] = lambda v, h=writes[req]: (h(v), self.gpuvm.invalidate(v), self.am.mmvm.invalidate(v))[0]

    def _engine_reg_read(self, offset: int) -> int | None:
        """A register read by an engine (the CP's WAIT_REG_MEM) through the BAR5 handlers, not a host access; None
        where no register is modelled."""
        h = self._rd5.get(offset)
        return None if h is None else h()

    def _engine_reg_write(self, offset: int, value: int) -> bool:
        """A register write by an engine through the BAR5 handlers, not a host access; False where none is
        modelled."""
        h = self._wr5.get(offset)
        if h is not None:
            h(value)
        return h is not None

    def _cp_poll(self) -> None:
        """A compute queue parked on WAIT_REG_MEM looks again (the hardware polls all the time; the model at every
        host access)."""
        if self.cp.waiting:
            self.cp.retry()

    def set_psp_state(self, state: str) -> None:
        """Move the board to ``pbl`` (ROM_SW available), ``early``, ``sos`` or ``gated`` (ROM_SW gated)."""
        if state not in ("pbl", "early", "sos", "gated"):
            raise ValueError(f"unknown psp state {state!r}")
        self.psp.set_state(state)
        self.smuio.gated = state != "pbl"

    def set_aperture(self, mode: str) -> None:
        """Switch the ROM aperture between ``normal``, ``mirrored`` and ``unavailable`` (navi31-spi-flash.md §h.1,
        §h.4)."""
        if mode not in ("normal", "mirrored", "unavailable"):
            raise ValueError(f"unknown aperture mode {mode!r}")
        self.smuio.aperture = mode
        self._rebuild()

    def power_cycle(self, psp: str | None = None) -> None:
        """A simulated power cycle: flash volatile state, SMUIO registers and the mailbox reset."""
        self.chip.finish()
        self.chip.power_up()
        self.smuio.power_on()
        self.psp.power_on()
        if psp is not None:
            self.set_psp_state(psp)

    # -- VRAM (BAR0 and the indirect window) ----------------------------------------------------------------------
    def _vram_read(self, addr: int) -> int:
        if 0 <= addr < self.vram_size:
            return self.vram.read32(addr & ~3)
        return self._uncovered(0, addr, None)

    def _vram_write(self, addr: int, value: int) -> None:
        if 0 <= addr < self.vram_size:
            self.vram.write32(addr & ~3, value)
        else:
            self._uncovered(0, addr, value)

    def _window_reg_read(self, offset: int) -> int:
        h = None if offset in self._win_rd else self._rd5.get(offset)
        return h() if h is not None else self._uncovered(self.spec.mmio_bar, offset, None)

    def _window_reg_write(self, offset: int, value: int) -> None:
        h = None if offset in self._win_rd else self._wr5.get(offset)
        if h is not None:
            h(value)
        else:
            self._uncovered(self.spec.mmio_bar, offset, value)

    # -- config space -------------------------------------------------------------------------------------------
    def cfg_read32(self, reg: int) -> int:
        """The config-space dword at byte ``reg`` (the PCIe side's ``Endpoint`` interface)."""
        return self.pci.read32(reg)

    def cfg_write32(self, reg: int, value: int, byte_enable: int = 0xF) -> None:
        """Write the enabled byte lanes of ``value`` to config-space dword ``reg`` (BARs, COMMAND, capabilities)."""
        self.pci.write32(reg, value, byte_enable)

    def decode(self, addr: int) -> tuple[int, int] | None:
        """(bar, offset) that bus address ``addr`` hits with memory decode on, or None."""
        return self.pci.decode(addr)

    def resources(self) -> list[tuple[int, int, int, int]]:
        """(index, address, size, flags) of every BAR as config space places it now."""
        return self.pci.resources()

    # -- memory ---------------------------------------------------------------------------------------------------
    def mem_read32(self, bar: int, offset: int) -> int:
        """One dword read of ``bar`` at ``offset`` (dword aligned); all ones while memory decode is off."""
        self.accesses += 1
        if self.events.due():
            self.events.run_due()
        if not self.pci.command & 2:
            return 0xFFFFFFFF
        self._cp_poll()
        if bar == self.spec.mmio_bar:
            h = self._rd5.get(offset)
            if h is not None:
                return h()
            return self._uncovered(bar, offset, None)
        mem = self._plain.get(bar)
        if mem is not None and offset < self.pci.bar_size[bar] and (bar != 0 or offset < self.vram_size):
            return mem.read32(offset)
        return self._uncovered(bar, offset, None)

    def mem_write32(self, bar: int, offset: int, value: int, byte_enable: int = 0xF) -> None:
        """One dword write; only the enabled byte lanes change (merged with the stored value)."""
        self.accesses += 1
        if self.events.due():
            self.events.run_due()
        if not self.pci.command & 2:
            return
        if bar == self.spec.mmio_bar:
            self.bar5_writes += 1
            if offset not in self._index_regs:
                self.reg_writes += 1
        if byte_enable != 0xF:
            lanes = _LANES[byte_enable & 0xF]
            value = (self._peek(bar, offset) & ~lanes) | (value & lanes)
        if bar == self.spec.mmio_bar:
            h = self._wr5.get(offset)
            if h is not None:
                h(value)
                self._cp_poll()
                return
            self._uncovered(bar, offset, value)
            return
        mem = self._plain.get(bar)
        if mem is not None and offset < self.pci.bar_size[bar] and (bar != 0 or offset < self.vram_size):
            mem.write32(offset, value)
            if bar == 2:
                block = self.am.doorbells.block(offset)  # the NBIO's doorbell route (mocks/amd/doorbells.py)
                if block == "cp":
                    self.cp.on_doorbell(offset, value, self.doorbells.read32)
                elif block == "sdma":
                    self.sdma.on_doorbell(offset, self.doorbells.read32)
            self._cp_poll()
            return
        self._uncovered(bar, offset, value)

    # -- the GPU as a bus master (the copy engine's system pages) ----------------------------------------------
    def attach_bus(self, bus: object) -> None:
        """The attachment that answers the GPU's bus-master reads/writes (``dma_read``/``dma_write``)."""
        self.bus = bus

    def bus_read(self, addr: int, length: int) -> bytes | None:
        """A bus-master read of ``length`` bytes at bus address ``addr`` from the attachment (the bridge's SRAM, the
        host's IOMMU); None when nothing is attached."""
        return None if self.bus is None else self.bus.dma_read(addr, length)  # type: ignore[attr-defined]

    def bus_write(self, addr: int, data: bytes, at: float | None = None) -> bool:
        """A posted write into the attachment; an engine's writes carry its time ``at`` to an attachment that can
        hold them until then (``timed_writes``: the USB bridge)."""
        if self.bus is None:
            return False
        if at is not None and getattr(self.bus, "timed_writes", False):
            return bool(self.bus.dma_write(addr, data, at=at))  # type: ignore[attr-defined]
        return bool(self.bus.dma_write(addr, data))  # type: ignore[attr-defined]

    # -- BoardServices: time and scheduling, register file, MC addresses, VRAM ------------------------------
    def now(self) -> float:
        """The board's virtual time: what it lived in earlier commands plus this command's clock."""
        return self.am.time_base + self.clock.now()

    def command_now(self) -> float:
        """This command's virtual time in seconds (the attachment's clock, from 0 at open)."""
        return self.clock.now()

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` as a firmware event ``delay`` virtual seconds from now (on the first board access at or after that
        time)."""
        self.events.schedule(delay, fn)

    def reg_read(self, offset: int) -> int:
        """The register file's stored value at BAR5 ``offset`` (no passive behaviour, no counting): what a block sees of
        another block's register."""
        return self.regfile.values.get(offset, 0)

    def reg_write(self, offset: int, value: int) -> None:
        """Store ``value`` at BAR5 ``offset`` in the register file without counting it as a host write (a block updating
        a register it owns, e.g. a read pointer)."""
        self.regfile.values[offset] = value

    def mc_to_vram(self, mc: int, length: int = 1) -> int | None:
        """VRAM offset of MC address ``mc`` (amd-bringup.md §4.5: MC = FB base + offset), None outside VRAM."""
        phys = mc - self.regfile.fb_base
        return phys if phys >= 0 and phys + length <= self.vram_size else None

    def vram_read(self, phys: int, length: int) -> bytes:
        """``length`` bytes of VRAM at byte offset ``phys`` (never-written pages read zero)."""
        return self.vram.read(phys, length)

    def vram_write(self, phys: int, data: bytes) -> None:
        """Write ``data`` into VRAM at byte offset ``phys`` (counted in ``vram_bytes_written``)."""
        self.vram.write(phys, data)

    def vram_poke(self, phys: int, data: bytes) -> None:
        """Write ``data`` into VRAM at byte offset ``phys`` without counting it (the shader core's journalled writes of
        a lockstep run, and their undo: see :meth:`tinyhw.mocks.amd.gpuvm.GpuVm.poke`)."""
        written = self.vram.bytes_written
        self.vram.write(phys, data)
        self.vram.bytes_written = written

    def vram_count(self, n: int) -> None:
        """Count ``n`` bytes in ``vram_bytes_written`` (what the uncounted writes of a kept lockstep run owe)."""
        self.vram.bytes_written += n

    # -- the boot path's state, as tests and the counters see it --------------------------------------------
    @property
    def resets(self) -> list[str]:
        """Mode-1 resets this command, by trigger."""
        return self.am.resets

    @property
    def time_base(self) -> float:
        """Virtual seconds the board lived in earlier commands (from the board state file)."""
        return self.am.time_base

    def compute_active(self) -> bool:
        """True while a compute queue of this command is active (the SMU's metrics then count 100 % GFX load)."""
        return self.am.compute_active()

    def mode1_reset(self, trigger: str) -> None:
        """A mode-1 reset by ``trigger`` (``smu``, ``smu-debug``, ``psp``): firmware, rings, registers and the SMUIO ROM
        block return to power-on values; VRAM and config space are kept."""
        self.am.mode1_reset(trigger)

    def save_state(self) -> None:
        """Write the board state file (tinyhw.mocks.amd.bootpath)."""
        self.am.save_state(self.counters)

    def counters(self) -> dict[str, int]:
        """Emulator-side counters of this command (tests prove "nothing was written" with them)."""
        am = self.am.counters()
        return {"vram_bytes_written": self.vram.bytes_written, "bar5_writes": self.bar5_writes,
                "reg_writes": self.reg_writes, "regfile_writes": am["regfile_writes"], "accesses": self.accesses,
                "psp_mailbox_writes": self.psp.register_writes, "psp_transfer_commands": self.psp.transfer_commands,
                "psp_data_transfers": self.psp.data_transfers, "psp_sector_writes": self.update.sector_writes,
                **{k: am[k] for k in ("smu_messages", "psp_commands", "mode1_resets", "sdma_packets",
                                      "sdma_bytes_copied")}}

    def _place_discovery(self) -> None:
        """The IP discovery binary at VRAM size - 64 KiB (written by the firmware: not counted as a host write)."""
        written = self.vram.bytes_written
        assert self.spec.profile is not None
        image = mock_discovery.discovery_image(self.spec.profile, mock_discovery.gc_info_table(dict(self.spec.gc_info)))
        mock_discovery.place(self.vram.write32, self.spec.vram_size >> 20, image)
        self.vram.bytes_written = written

    # -- translation through the GPU VM (BoardServices) ------------------------------------------------------
    def _vmid0(self, vmid: int) -> None:
        if vmid != 0:
            raise VmFault(f"vmid {vmid} is not modelled (only vmid0)")

    def translate(self, vmid: int, va: int, write: bool = False) -> Translation:
        """Where GPU address ``va`` of ``vmid`` lands (VMID0 only; others fault)."""
        self._vmid0(vmid)
        return Translation(*self.gpuvm.translate(va))

    def gpu_read(self, vmid: int, va: int, length: int) -> bytes:
        """``length`` bytes at GPU virtual address ``va`` of ``vmid`` through the GPU VM (only VMID0; others raise
        :class:`VmFault`)."""
        self._vmid0(vmid)
        return self.gpuvm.read(va, length)

    def gpu_write(self, vmid: int, va: int, data: bytes, at: float | None = None) -> None:
        """Write ``data`` at GPU virtual address ``va`` of ``vmid`` through the GPU VM, bus writes carrying time ``at``
        (only VMID0; others raise :class:`VmFault`)."""
        self._vmid0(vmid)
        self.gpuvm.write(va, data, at)

    def bus_activity(self) -> None:
        """The attachment moved data (a USB transfer ended): an engine parked on a POLL looks again."""
        if self.sdma.waiting:
            self.sdma.kick()
        self._cp_poll()

    def mem_write_block(self, bar: int, offset: int, data: bytes) -> bool:
        """A burst of dword writes to VRAM (streamed or bulk); False when it is not plain VRAM (caller loops)."""
        if bar != 0 or not self.pci.command & 2 or offset & 3 or len(data) & 3:
            return False
        if offset + len(data) > min(self.pci.bar_size[0], self.vram_size):
            return False
        self.accesses += len(data) // 4
        if self.events.due():
            self.events.run_due()
        self.vram.write(offset, data)
        self._cp_poll()
        return True

    def mem_read_block(self, bar: int, offset: int, length: int) -> bytes | None:
        """A burst of dword reads of VRAM; None when it is not plain VRAM (caller loops)."""
        if bar != 0 or not self.pci.command & 2 or offset & 3 or length & 3:
            return None
        if offset + length > min(self.pci.bar_size[0], self.vram_size):
            return None
        self.accesses += length // 4
        if self.events.due():
            self.events.run_due()
        self._cp_poll()
        return self.vram.read(offset, length)

    def _peek(self, bar: int, offset: int) -> int:
        if bar in self._plain:
            return self._plain[bar].read32(offset)
        if bar == self.spec.mmio_bar:
            if offset in self._win_rd:
                return self._win_rd[offset]()
            if offset in self._other:
                return self._other[offset]
            try:
                return self.psp.peek(offset)
            except KeyError:
                pass
            if offset in self._rd5 and offset not in self.smuio.handlers()[0]:
                return self._rd5[offset]()
            return self.smuio.peek(offset)
        return 0

    def _uncovered(self, bar: int, offset: int, value: int | None) -> int:
        what = "write to" if value is not None else "read of"
        inside = bar == self.spec.mmio_bar and 0 <= offset < self.pci.bar_size[self.spec.mmio_bar]
        where = f"bar{bar} offset 0x{offset:x}"
        if self._strict:
            raise StrictEmulationError(
                f"{what} {where} is not covered by the {self.spec.name} emulator",
                hint="run without strict to list such accesses instead")
        note = f"{what} {where}" + ("" if inside or bar != self.spec.mmio_bar else " (outside the bar)")
        if note not in self._uncovered_seen:
            self._uncovered_seen.add(note)
            self.uncovered.append(note)
        if value is not None:
            if inside:
                self._other[offset] = value
            return 0
        return self._other.get(offset, 0) if inside else 0

    # -- lifetime -----------------------------------------------------------------------------------------------
    def _lose_power(self) -> None:
        """The board loses power (a psp-disconnect fault): the flash keeps what was written, the link goes away."""
        if not self.lost:
            self.lost = True
            self.disconnect()

    def power_lost(self) -> None:
        """The PCIe rails dropped (the bridge's 0xF3(0), ``tinyhw link power off``): everything but the flash is lost.

        The one power-on path of ``tinyhw mock power-cycle`` (:func:`power_on_boot`) runs on this board's flash: a
        program or erase that was running stays torn, the PSP boots from the flash as it finds it, and the board is
        built again from the cold state that leaves, as the next command would find it: SMU and PSP sOS not running,
        GC/CP/SDMA/GPU VM registers at their power-on values (tinyhw's boot flags in SCRATCH_REG5/6/7 with them), no
        compute queue, PCI config space at power-on (BARs unassigned), VRAM cleared (reads zeros; the IP discovery
        table is placed again). The board's time and its per-command counters start again from the power-on. The
        attachment (the bridge) and the device lock stay."""
        if self._closed:
            return
        uncovered, seen, bus = self.uncovered, self._uncovered_seen, self.bus
        self.chip.freeze()
        try:
            power_on_boot(self.store, self.options.timing)
        finally:
            self.store.close()
        self.options.psp = None  # the state the power-on boot left in the board state file
        self._build(self.options, self.clock, self.attach, self.model)
        self.am.time_base = -self.clock.now()  # the board's time counts from this power-on
        self.uncovered, self._uncovered_seen, self.bus = uncovered, seen, bus

    def disconnect(self) -> None:
        """Power lost mid-operation (a disconnect fault): a running program/erase stays torn."""
        self.chip.freeze()
        self.am.save_quietly(self.counters)

    def close(self) -> None:
        """Finish a running flash operation, flush the flash file; safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self.am.save_quietly(self.counters)  # the board state file (tinyhw.mocks.amd.bootpath)
        try:
            self.chip.finish()
        finally:
            try:
                self.store.close()
            finally:
                self._release_lock()

    def _release_lock(self) -> None:
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.release()


def power_on_boot(store: FlashStore, timing: str = "typical") -> tuple[str | None, str]:
    """What a power-on leaves of the emulated board whose flash is ``store``: the flash is kept, the board state
    file is cleared (every volatile block cold), and the PSP boots from the flash as it finds it
    (tinyhw.mocks.amd.pspupdate: the update cookie, the ISH descriptors, the first-boot sync, which may write the
    flash).
    Returns (partition booted: "A", "B" or None when the boot loader stalls, why in words). The one power-on path:
    ``tinyhw mock power-cycle`` (:func:`power_cycle_flash`) and a board whose PCIe power is switched off
    (:meth:`AmdBoard.power_lost`) both take it."""
    chosen, why = FlashUpdate(lambda: store.data, store.write, TIMINGS[timing]).boot()
    boardstate.clear(store.path)
    boardstate.save(store.path, {"mailbox": {"state": "early" if chosen else "pbl", "step": 0, "hung": False},
                                 "booted": chosen})
    return chosen, why


def power_cycle_flash(path: Path | str, timing: str = "typical", *, spec: BoardSpec) -> tuple[str | None, str]:
    """A hard power cycle of the emulated board ``spec`` whose flash file is ``path`` (:func:`power_on_boot` on it).
    The next command finds the PSP in the early state when a partition booted (ROM_SW gated), else in the stalled
    boot loader (ROM_SW available). The caller holds the device lock (``tinyhw mock power-cycle`` does)."""
    store = FlashStore(Path(path), lambda: build_image(board=spec), spec.flash_size)
    try:
        return power_on_boot(store, timing)
    finally:
        store.close()


def flash_backup_needed(current: bytes, backup: bytes | None, *, spec: BoardSpec) -> bool:
    """Whether ``mock reset`` must keep ``current`` (the flash file's contents) before restoring the factory image.

    Not when it is the factory image (nothing of the user's would be lost) or what ``backup`` (the one
    backup kept beside the file, None: none) already holds; otherwise the backup is replaced with it.
    """
    return current != build_image(board=spec) and current != backup


def _check_named_psp(options: AmdBoardOptions, saved: dict[str, object], spec: BoardSpec) -> None:
    """Refuse (exit 2) a ``psp=`` the user named that the saved board state contradicts, rather than ignore it.

    ``psp=sos``/``gated`` always hold (they start the secure OS); ``pbl``, ``early`` and ``hang`` mean the secure
    OS is not running, which a board whose saved state has it running (an earlier ``psp=sos``, ``am boot``) can
    only reach through a power cycle or a reset of the emulated board."""
    named = options.psp
    psp = saved.get("psp")
    if named not in ("pbl", "early", "hang") or not isinstance(psp, dict) or not psp.get("sos_alive"):
        return
    flash = Path(options.flash)
    raise Refused(f"psp={named} contradicts the saved state of the emulated board {flash} (its secure os is "
                  "running since an earlier command: psp=sos, am boot)",
                  hint=f"leave psp= out to go on from the saved state, or power the board off first: tinyhw "
                       f"--device mock:{spec.name},flash={flash} mock power-cycle (the psp boots to early), or mock "
                       "reset --yes (the factory image, pbl)")


def reset_flash(path: Path | str, *, spec: BoardSpec) -> str:
    """Write the pristine synthetic image of board ``spec`` to ``path``, clear its status sidecar and board state;
    returns its sha256.

    The caller holds the device lock (``tinyhw mock reset`` does).
    """
    path = Path(path)
    image = build_image(board=spec)
    write_atomic(path, image)
    write_atomic(path.with_name(path.name + ".sr"), bytes(3))
    boardstate.clear(path)  # a cold board: no firmware running, registers at power-on values
    return hashlib.sha256(image).hexdigest()


def flash_path(options: AmdBoardOptions, *, spec: BoardSpec) -> Path:
    """The flash file of an emulated AMD board: its ``flash=`` option, else the board's default file in the user's
    cache (:meth:`~tinyhw.boards.spec.BoardSpec.state_path`)."""
    return Path(options.flash) if options.flash is not None else spec.state_path()


#: The name the board had while it was only Navi31.
Navi31Board = AmdBoard
