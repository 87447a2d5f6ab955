"""The falcon heavy-secure (HS) execution procedure on the GSP and SEC2 falcons.

Spec: specs/nv-bringup.md §8 (registers and fields, the nine steps: reset and scrub wait, core select, context
requirement off, FBIF physical FB target, 256-byte DMA of code into IMEM and data into DMEM, boot-ROM
parameters, boot vector and mailboxes, start through CPUCTL_ALIAS or CPUCTL, halt wait).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.boards.nvidia import (
    BCR_BRFETCH,
    BCR_CORE_RISCV,
    BCR_VALID,
    CPUCTL_ALIAS_EN,
    CPUCTL_HALTED,
    CPUCTL_STARTCPU,
    DMATRF_FULL,
    DMATRF_IDLE,
    DMATRF_IMEM,
    DMATRF_SIZE_256,
    FALCON2_BROM_ENGIDMASK,
    FALCON2_BROM_PARAADDR0,
    FALCON2_BROM_UCODE_ID,
    FALCON2_MOD_SEL,
    FALCON_BOOTVEC,
    FALCON_CPUCTL,
    FALCON_CPUCTL_ALIAS,
    FALCON_DMACTL,
    FALCON_DMATRFBASE,
    FALCON_DMATRFBASE1,
    FALCON_DMATRFCMD,
    FALCON_DMATRFFBOFFS,
    FALCON_DMATRFMOFFS,
    FALCON_ENGINE,
    FALCON_HWCFG2,
    FALCON_MAILBOX0,
    FALCON_MAILBOX1,
    FALCON_RM,
    FBIF_ALLOW_PHYS_NO_CTX,
    FBIF_CTL,
    FBIF_TRANSCFG0,
    HWCFG2_MEM_SCRUBBING,
    HWCFG2_RISCV,
    MOD_SEL_RSA3K,
    RISCV_BCR_CTRL,
)
from tinyhw.boot.nv.gpu import NvGpu
from tinyhw.transport.wait import poll

RESET_HOLD = 0.1  # §8 step 1: 100 ms in reset
TIMEOUT = 2.0  # seconds for scrubbing, DMA and halt waits (inferred: tinygrad's waits are of this order)
CHUNK = 256
DMA_SEC = 1 << 2  # DMATRFCMD sec 3:2 = 1 for the code of an HS ucode


@dataclass(frozen=True)
class HsUcode:
    """Where an HS ucode lies in VRAM and how it is loaded (§7.3 for FWSEC, §9.3 for the booter)."""

    fb_address: int  # FB-physical address of the image
    code_offset: int
    data_offset: int
    imem_phys: int
    imem_virt: int
    imem_size: int
    dmem_phys: int
    dmem_size: int
    pkc_offset: int
    engine_mask: int
    ucode_id: int
    dmem_virt: int = 0


class Falcon:
    """One falcon (GSP at 0x110000, SEC2 at 0x840000) of ``gpu`` (an NvGpu)."""

    def __init__(self, gpu: NvGpu, base: int, name: str) -> None:
        self.gpu = gpu
        self.base = base
        self.name = name

    def rd(self, off: int) -> int:
        """Read a falcon register (offset from the falcon's base)."""
        return self.gpu.rd(self.base + off)

    def wr(self, off: int, value: int) -> None:
        """Write a falcon register (offset from the falcon's base)."""
        self.gpu.wr(self.base + off, value)

    def _wait(self, off: int, done: Callable[[int], bool], what: str, timeout: float = TIMEOUT) -> int:
        return poll(self.gpu.clock, lambda: self.rd(off), done, timeout=timeout, interval=0.001,
                    what=f"{self.name} falcon {what}")

    def reset(self, *, riscv: bool = False) -> None:
        """§8 step 1: engine reset, scrub wait, core select (RISC-V when ``riscv``, else falcon with BOOT_0 in
        FALCON_RM)."""
        engine = FALCON_ENGINE[self.base]
        self.gpu.wr(engine, 1)
        self.gpu.clock.sleep(RESET_HOLD)
        self.gpu.wr(engine, 0)
        self._wait(FALCON_HWCFG2, lambda v: not v & HWCFG2_MEM_SCRUBBING, "memory scrubbing")
        if riscv:
            self.wr(RISCV_BCR_CTRL, BCR_CORE_RISCV | BCR_BRFETCH)
        elif self.rd(FALCON_HWCFG2) & HWCFG2_RISCV:
            self.wr(RISCV_BCR_CTRL, 0)
            self._wait(RISCV_BCR_CTRL, lambda v: bool(v & BCR_VALID), "core select")
            self.wr(FALCON_RM, self.gpu.boot0)

    def set_mailboxes(self, value: int) -> None:
        """MAILBOX0/1 <- low/high half of a 64-bit value."""
        self.wr(FALCON_MAILBOX0, value & 0xFFFFFFFF)
        self.wr(FALCON_MAILBOX1, value >> 32)

    def _dma(self, base: int, size: int, moffs: int, fboffs: int, cmd: int) -> None:
        self.wr(FALCON_DMATRFBASE, (base >> 8) & 0xFFFFFFFF)
        self.wr(FALCON_DMATRFBASE1, (base >> 40) & 0x1FF)
        for n in range(0, size, CHUNK):
            self._wait(FALCON_DMATRFCMD, lambda v: not v & DMATRF_FULL, "dma queue")
            self.wr(FALCON_DMATRFMOFFS, moffs + n)
            self.wr(FALCON_DMATRFFBOFFS, fboffs + n)
            self.wr(FALCON_DMATRFCMD, cmd)
        self._wait(FALCON_DMATRFCMD, lambda v: bool(v & DMATRF_IDLE), "dma idle")

    def disable_ctx_req(self) -> None:
        """§8 step 2: the DMA context requirement off (FBIF_CTL.allow_phys_no_ctx, DMACTL 0)."""
        self.wr(FBIF_CTL, self.rd(FBIF_CTL) | FBIF_ALLOW_PHYS_NO_CTX)
        self.wr(FALCON_DMACTL, 0)

    def start(self) -> None:
        """§8 step 8: start the CPU through CPUCTL_ALIAS when CPUCTL.alias_en says CPUCTL is aliased, else through
        CPUCTL.startcpu."""
        if self.rd(FALCON_CPUCTL) & CPUCTL_ALIAS_EN:
            self.wr(FALCON_CPUCTL_ALIAS, CPUCTL_STARTCPU)
        else:
            self.wr(FALCON_CPUCTL, CPUCTL_STARTCPU)

    def wait_halted(self, timeout: float = TIMEOUT) -> None:
        """§8 step 9: poll CPUCTL.halted."""
        self._wait(FALCON_CPUCTL, lambda v: bool(v & CPUCTL_HALTED), "halt", timeout)

    def run_hs(self, u: HsUcode, mailbox: int | None = None, *, halt_timeout: float = TIMEOUT) -> tuple[int, int]:
        """§8 steps 2-9 (the falcon is reset already): load ``u`` and run it until it halts; returns MAILBOX0/1."""
        self.disable_ctx_req()
        self.wr(FBIF_TRANSCFG0, 1 << 2)  # target 0 (local FB), mem_type 1 (physical)
        self._dma(u.fb_address + u.code_offset - u.imem_virt, u.imem_size, u.imem_phys, u.imem_virt,
                  DMATRF_IMEM | DMA_SEC | DMATRF_SIZE_256)
        self._dma(u.fb_address + u.data_offset - u.dmem_virt, u.dmem_size, u.dmem_phys, u.dmem_virt,
                  DMATRF_SIZE_256)
        self.wr(FALCON2_BROM_PARAADDR0, u.pkc_offset)
        self.wr(FALCON2_BROM_ENGIDMASK, u.engine_mask)
        self.wr(FALCON2_BROM_UCODE_ID, u.ucode_id)
        self.wr(FALCON2_MOD_SEL, MOD_SEL_RSA3K)
        self.wr(FALCON_BOOTVEC, u.imem_virt)
        if mailbox is not None:
            self.set_mailboxes(mailbox)
        self.start()
        self.wait_halted(halt_timeout)
        return self.rd(FALCON_MAILBOX0), self.rd(FALCON_MAILBOX1)
