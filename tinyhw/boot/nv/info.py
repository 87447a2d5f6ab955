"""``nv info``: what tinyhw reads itself from an NVIDIA GPU no driver owns, beside what its GSP reported.

Read-only (specs/nv-bringup.md §3, §4, §6, §8): the binding and power attributes (a GPU a driver owns is
refused, as for a boot: ``tinyhw probe`` identifies those), PMC_BOOT_42, the VRAM size register, WPR2_ADDR_LO/HI,
the GSP's RISC-V CPUCTL (active_stat), and the VBIOS version from the PROM window. What GSP-RM reported
(its static info: GPU name, memory size, version) comes from the record ``nv boot`` kept
(:mod:`tinyhw.boot.nv.record`), shown only while WPR2 still reads what that boot left.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinyhw.boards.nvidia import (
    FALCON_GSP,
    PROM_SIZE,
    PROM_WINDOW,
    REG_BOOT_42,
    REG_VRAM_MIB,
    RISCV_CPUCTL,
    RISCV_CPUCTL_ACTIVE,
    describe_chip,
)
from tinyhw.boot.nv import record
from tinyhw.boot.nv.fwfiles import gsp_candidates
from tinyhw.boot.nv.gpu import NvGpu, check_binding
from tinyhw.errors import Refused
from tinyhw.formats.nvbios import parse_nv_vbios
from tinyhw.transport.base import Transport


def info(t: Transport, firmware_dir: Path | None = None) -> dict[str, Any]:
    """The ``nv info`` document (reads only)."""
    try:
        b = check_binding(t, action="read the registers of")
    except Refused as e:
        raise Refused(e.message, hint="tinyhw probe identifies a gpu a driver owns without disturbing it") from None
    gpu = NvGpu(t)
    ident = t.identity()
    chip = describe_chip(gpu.rd(REG_BOOT_42), ident.device_id)
    lo, hi = gpu.wpr2()
    v = parse_nv_vbios(gpu.bar0.read(PROM_WINDOW, PROM_SIZE))
    riscv = gpu.rd(FALCON_GSP + RISCV_CPUCTL)
    rec = record.load(ident.location)
    gsp = rec.get("gsp") if rec and hi and rec.get("wpr2") == [lo, hi] else None
    doc: dict[str, Any] = {
        "device": ident.location, "vendor_id": ident.vendor_id, "device_id": ident.device_id,
        "driver": b["driver"], "chip": chip, "vram_mib": gpu.rd(REG_VRAM_MIB),
        "vbios_version": v.bios_version, "wpr2_addr_lo": lo, "wpr2_addr_hi": hi, "wpr2_up": bool(hi),
        "gsp_riscv_active": bool(riscv & RISCV_CPUCTL_ACTIVE),
        "gsp": gsp,
        "gsp_firmware_version": rec.get("firmware_version") if gsp and rec else None,
    }
    if firmware_dir is not None:
        doc["firmware"] = {"directory": str(firmware_dir), "gsp_rm_versions": sorted(gsp_candidates(firmware_dir))}
    return doc
