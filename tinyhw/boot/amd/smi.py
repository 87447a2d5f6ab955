"""``smi``: watch the SMU metrics of a board a tinyhw boot brought up, without disturbing it.

Spec: specs/amd-bringup.md §6.4 (TransferTableSmu2Dram with TABLE_SMU_METRICS; the SMU writes the
table to the driver-table address it was given at boot; read it from VRAM), §6.5 (attach to a
board another process booted: require the boot flag in SCRATCH_REG7, recompute the allocations,
write nothing but the mailbox; never re-point the SMU). The driver-table address is recomputed
from tinyhw's fixed boot layout (:mod:`tinyhw.boot.amd.layout`); a board without tinyhw's flag is
refused (exit 2) with the reason.
"""

from __future__ import annotations

from typing import Any

from tinyhw.boot.amd import ids, layout
from tinyhw.boot.amd.gpu import SCRATCH7, AmGpu
from tinyhw.boot.amd.metrics import decode
from tinyhw.boot.amd.smu import Smu
from tinyhw.errors import Refused


class Smi:
    """An attachment to a booted board; ``refresh()`` asks the SMU for its metrics and decodes them."""

    def __init__(self, gpu: AmGpu) -> None:
        self.gpu = gpu
        gpu.check_supported()
        magic = gpu.rd(SCRATCH7)
        if magic != layout.BOOT_MAGIC:
            why = "scratch_reg7 is 0" if magic == 0 else f"scratch_reg7 is 0x{magic:08x}, not tinyhw's boot flag"
            raise Refused(f"no tinyhw boot has touched this gpu ({why}); its smu driver table is unknown",
                          hint="boot it first with: tinyhw am boot --yes")
        if not gpu.sos_alive():
            raise Refused("the tinyhw boot flag is set but the psp secure os is not running (the gpu was reset)",
                          hint="boot it again with: tinyhw am boot --yes")
        self.smu = Smu(gpu)
        self.table = layout.SMU_TABLE
        self.table_mc = gpu.mc(self.table)
        self._size = -(-ids.METRICS_SIZE // 4) * 4

    def refresh(self) -> dict[str, Any]:
        """Ask the SMU to copy its metrics table to VRAM, read it and decode it (temperatures, clocks, power...)."""
        self.smu.transfer_metrics()
        data = self.gpu.vram_read(self.table, self._size)
        return decode(data)
