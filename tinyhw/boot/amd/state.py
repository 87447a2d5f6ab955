"""What state a GPU is in, read without writing: tinyhw's flags, sOS, SMU, ring, VM faults.

Spec: specs/amd-bringup.md §4.1 (persistent flags in GC SCRATCH_REG5/6/7 and the decision table:
partial boot when REG7 is tinyhw's magic, REG6 == 0 and no VM fault; a boot that was not finished
or another driver's firmware needs a mode-1 reset first), §7.1 (the probes). SCRATCH_REG6 is 1
while a tinyhw boot runs and 0 once it finished cleanly; SCRATCH_REG5 holds the TMR size.
The SMU is judged passively here (C2PMSG_90 non-zero: it answered the last message); the active
probe (GetSmuVersion, §6.1) is a mailbox write and is left to the boot and ``smi``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyhw.boot.amd.gpu import PSP_BL_CMD, PSP_RING_SIZE, SCRATCH5, SCRATCH6, SCRATCH7, SMU_RESP, VM_FAULT, AmGpu
from tinyhw.boot.amd.layout import BOOT_MAGIC


@dataclass(frozen=True)
class BoardState:
    """What the GPU's registers say about earlier boots, read without changing anything: tinyhw's boot flag and busy
    flag, the TMR size it recorded, the VM fault status, whether the PSP secure OS and bootloader and the SMU answer,
    and the KM ring's size."""

    magic: int  # SCRATCH_REG7
    busy: int  # SCRATCH_REG6
    tmr_size: int  # SCRATCH_REG5
    vm_fault: int  # GCVM_L2_PROTECTION_FAULT_STATUS
    sos_alive: bool  # C2PMSG_81 != 0
    bootloader_ready: bool  # C2PMSG_35 bit31
    ring: int  # C2PMSG_71
    smu_answered: bool  # C2PMSG_90 != 0

    @property
    def tinyhw_booted(self) -> bool:
        """True when SCRATCH_REG7 holds tinyhw's boot flag."""
        return self.magic == BOOT_MAGIC

    @property
    def firmware_running(self) -> bool:
        """True when the PSP secure OS or the SMU is running (firmware from an earlier boot)."""
        return self.sos_alive or self.smu_answered

    def decision(self) -> tuple[str, str]:
        """(kind, reason): kind is "partial", "full" or "reset+full" (§4.1 decision table)."""
        if self.tinyhw_booted and self.busy == 0 and self.vm_fault == 0 and self.sos_alive:
            return "partial", "a previous tinyhw boot left its flags intact"
        if self.tinyhw_booted:
            why = (f"a tinyhw boot did not finish (scratch_reg6 = 0x{self.busy:x})" if self.busy
                   else "a vm fault is latched" if self.vm_fault else "the psp secure os is no longer running")
            return ("reset+full" if self.firmware_running else "full"), why
        if self.firmware_running:
            who = "psp secure os" if self.sos_alive else "smu firmware"
            return "reset+full", f"{who} is running but no tinyhw boot finished (another driver or an interrupted boot)"
        return "full", "the gpu is not initialised"

    def to_doc(self) -> dict[str, Any]:
        """The state and the boot it leads to, as a JSON-ready dict (the keys the ``am`` commands print)."""
        kind, why = self.decision()
        return {"tinyhw_booted": self.tinyhw_booted, "scratch_reg7": self.magic, "scratch_reg6": self.busy,
                "scratch_reg5_tmr_size": self.tmr_size, "vm_fault_status": self.vm_fault,
                "sos_alive": self.sos_alive, "bootloader_ready": self.bootloader_ready, "km_ring_size": self.ring,
                "smu_answered": self.smu_answered, "next_boot": kind, "next_boot_reason": why}


#: what the read-only views (status, rings, waves) say on a board no tinyhw boot brought up
NOT_BOOTED = "not booted by tinyhw (run: tinyhw am boot --yes)"
UNFINISHED = "a tinyhw boot did not finish (run: tinyhw am boot --yes)"


def boot_view(gpu: AmGpu) -> dict[str, Any]:
    """Whether a tinyhw boot brought the board up, for the read-only views that work on a cold board too:
    ``{"booted": bool, "boot_note": None or the line to show}``. Two register reads (SCRATCH_REG7 and 6, §4.1):
    an idle GPU that was never booted must not read as a healthy idle one."""
    magic, busy = gpu.rd(SCRATCH7), gpu.rd(SCRATCH6)
    if magic == BOOT_MAGIC and busy == 0:
        return {"booted": True, "boot_note": None}
    return {"booted": False, "boot_note": UNFINISHED if magic == BOOT_MAGIC else NOT_BOOTED}


def read_state(gpu: AmGpu) -> BoardState:
    """Every probe of §7.1 that is a plain register read."""
    return BoardState(
        magic=gpu.rd(SCRATCH7), busy=gpu.rd(SCRATCH6), tmr_size=gpu.rd(SCRATCH5),
        vm_fault=gpu.rd(VM_FAULT), sos_alive=gpu.sos_alive(),
        bootloader_ready=bool(gpu.rd(PSP_BL_CMD) & (1 << 31)), ring=gpu.rd(PSP_RING_SIZE),
        smu_answered=gpu.rd(SMU_RESP) not in (0, 0xFFFFFFFF),
    )
