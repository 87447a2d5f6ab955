"""A falcon of the emulated AD102 (GSP at BAR0 0x110000, SEC2 at 0x840000): its registers, IMEM/DMEM and DMA.

From specs/nv-bringup.md §8: the engine reset register (bit 0; memory scrubbing runs while it is held and
ends when it is released), HWCFG2 (riscv 10, mem_scrubbing 12), the RISC-V BCR core select (valid reads 1
once written), FALCON_RM, FBIF_CTL / TRANSCFG[0] (a DMA needs allow_phys_no_ctx and target 0 = local FB,
physical), DMACTL, the DMA registers (each DMATRFCMD write copies 256 bytes from FB address
``DMATRFBASE << 8 | BASE1 << 40`` + FBOFFS into IMEM when bit 4 is set, else DMEM, at MOFFS; the queue is
never full and reads idle), the boot-ROM parameters (PARAADDR[0], ENGIDMASK, CURR_UCODE_ID, MOD_SEL),
BOOTVEC, MAILBOX0/1, CPUCTL (startcpu 1 / halted 4 / alias_en 6: while alias_en reads 1 a CPUCTL startcpu write
is ignored and only CPUCTL_ALIAS starts the CPU; the owner sets it, an engine reset clears it) and RISCV_CPUCTL
(active_stat 7; after a resume the owner may hold it at 0 for a number of reads, the core's start-up). Starting
the CPU hands the falcon to ``on_start`` (the board's HS black box or GSP model), which decides whether it halts
and what the mailboxes say. IMEM and DMEM are 64 KiB each (inferred).

The falcon reaches the board only through :class:`~tinyhw.mocks.common.services.NvServices` (its DMA reads FB memory
with ``vram_read``); what its CPU runs is the ``on_start`` callback of its owner.

A DMA whose FBIF setup is missing copies nothing (the HS check that follows then fails, as on hardware the
ucode would not authenticate; inferred).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tinyhw.commands import CommandTable
from tinyhw.mocks.common.services import NvServices

MEM_SIZE = 64 << 10
MAILBOX0, MAILBOX1, OS, RM, HWCFG2, CPUCTL, BOOTVEC, DMACTL = 0x40, 0x44, 0x80, 0x84, 0xF4, 0x100, 0x104, 0x10C
DMATRFBASE, DMATRFMOFFS, DMATRFCMD, DMATRFFBOFFS, DMATRFBASE1, CPUCTL_ALIAS = 0x110, 0x114, 0x118, 0x11C, 0x128, 0x130
TRANSCFG0, FBIF_CTL = 0x600, 0x624
RISCV_CPUCTL, BCR_CTRL = 0x1388, 0x1668
MOD_SEL, UCODE_ID, ENGIDMASK, PARAADDR0 = 0x1180, 0x1198, 0x119C, 0x1210
#: every register offset the model answers
COVERED = {MAILBOX0, MAILBOX1, OS, RM, HWCFG2, CPUCTL, BOOTVEC, DMACTL, DMATRFBASE, DMATRFMOFFS, DMATRFCMD,
           DMATRFFBOFFS, DMATRFBASE1, CPUCTL_ALIAS, TRANSCFG0, FBIF_CTL, RISCV_CPUCTL, BCR_CTRL, MOD_SEL, UCODE_ID,
           ENGIDMASK, PARAADDR0}
WRITES: CommandTable[int] = CommandTable("falcon register write")


class EmulatedFalcon:
    """One falcon; its DMA reads FB memory through ``services``, ``on_start(falcon)`` runs what it loaded."""

    def __init__(self, name: str, services: NvServices, on_start: Callable[[EmulatedFalcon], None]) -> None:
        self.name = name
        self.services = services
        self._on_start = on_start
        self.dma_bytes = 0
        self.starts = 0
        self.resets = 0  # engine resets asserted
        self.ignored_starts = 0  # CPUCTL startcpu writes while CPUCTL was aliased
        self.power_on()

    def power_on(self) -> None:
        """The state after an engine reset (or power-on): memories scrubbed to zero, CPU stopped, falcon core."""
        self.regs: dict[int, int] = {HWCFG2: 1 << 10}
        self.imem = bytearray(MEM_SIZE)
        self.dmem = bytearray(MEM_SIZE)
        self.in_reset = False
        self.riscv = False
        self.running = False  # the RISC-V core runs (GSP-RM)
        self.halted = False
        self.alias_en = False  # CPUCTL is aliased: only CPUCTL_ALIAS starts the CPU
        self.wake_after_reads = 0  # RISCV_CPUCTL reads that still see the core starting up

    def read(self, off: int) -> int:
        """A host read of register ``off`` (offset from the falcon base)."""
        if off == HWCFG2:
            return (1 << 10) | ((1 << 12) if self.in_reset else 0)
        if off == CPUCTL:
            return ((1 << 4) if self.halted else 0) | ((1 << 6) if self.alias_en else 0)
        if off == DMATRFCMD:
            return (self.regs.get(DMATRFCMD, 0) & ~1) | 2  # never full, always idle
        if off == BCR_CTRL:
            return self.regs.get(BCR_CTRL, 0) | 1  # valid
        if off == RISCV_CPUCTL:
            if self.running and self.wake_after_reads:
                self.wake_after_reads -= 1
                return 0
            return (1 << 7) if self.running else ((1 << 4) if self.riscv else 0)
        return self.regs.get(off, 0)

    def write(self, off: int, value: int) -> None:
        """A host write of register ``off``: stored, and the writes with side effects run their handler."""
        self.regs[off] = value
        if off in WRITES:
            WRITES.dispatch(self, off, value)

    def engine_reset(self, asserted: bool) -> None:
        """The absolute engine-reset register's bit 0: asserted clears everything; released ends scrubbing."""
        if asserted:
            self.power_on()
            self.in_reset = True
            self.resets += 1
        else:
            self.in_reset = False

    @WRITES.handles(BCR_CTRL)
    def core_select(self, value: int) -> None:
        """BCR_CTRL: core_select 4 picks the RISC-V core."""
        self.riscv = bool(value & (1 << 4))

    @WRITES.handles(DMATRFCMD)
    def dma(self, value: int) -> None:
        """One 256-byte DMA from FB into IMEM (bit 4) or DMEM."""
        r = self.regs
        ok = r.get(FBIF_CTL, 0) & (1 << 7) and r.get(TRANSCFG0, 0) & 0x7 == 0x4
        if not ok:
            return
        base = (r.get(DMATRFBASE, 0) << 8) | ((r.get(DMATRFBASE1, 0) & 0x1FF) << 40)
        src = base + r.get(DMATRFFBOFFS, 0)
        dst = r.get(DMATRFMOFFS, 0)
        mem = self.imem if value & (1 << 4) else self.dmem
        if dst + 256 <= MEM_SIZE:
            mem[dst:dst + 256] = self.services.vram_read(src, 256)
            self.dma_bytes += 256

    @WRITES.handles(CPUCTL)
    def cpuctl(self, value: int) -> None:
        """CPUCTL: startcpu (bit 1) runs what is loaded, unless CPUCTL is aliased (then the write is ignored)."""
        if value & 2:
            if self.alias_en:
                self.ignored_starts += 1
            else:
                self._start()

    @WRITES.handles(CPUCTL_ALIAS)
    def cpuctl_alias(self, value: int) -> None:
        """CPUCTL_ALIAS: 2 starts the CPU as CPUCTL.startcpu does."""
        if value & 2:
            self._start()

    def _start(self) -> None:
        self.halted = False
        self.starts += 1
        self._on_start(self)

    def state(self) -> dict[str, Any]:
        """What outlives a command (kept in the board-state file): whether GSP-RM runs on the RISC-V core."""
        return {"running": self.running, "riscv": self.riscv}
