"""``am info``: everything about an AMD GPU that plain reads can tell (specs/amd-bringup.md §11 (a), (b)).

VRAM size (RCC_CONFIG_MEMSIZE, §1.2), the VF bit (RCC_IOV_FUNC_IDENTIFIER bit0), the IP discovery
table with versions, instances and segment bases (§2.3-§2.6), harvested instances (§2.7), the GC
info table decoded with the discovery.h layouts generated into :mod:`tinyhw.autogen.amd_discovery`
(§2.8: CUs per SA = 2 x (wgp0 + wgp1) on v1, ``num_cu_per_sh`` on v2), the gfx target (§2.9),
tinyhw's boot flags and the sOS / SMU probes (§7.1, :mod:`tinyhw.boot.amd.state`), and which firmware
files the board needs with their versions (§5.6, :func:`tinyhw.boot.amd.firmware.survey`).
Nothing is written to the device, except with the opt-in SMU probe (one GetSmuVersion message).
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from tinyhw.boot.amd import ids
from tinyhw.boot.amd.firmware import needed_files, survey
from tinyhw.boot.amd.gpu import AmGpu
from tinyhw.boot.amd.state import read_state
from tinyhw.errors import Refused
from tinyhw.formats.ipdiscovery import GC


def gc_info(gpu: AmGpu) -> dict[str, Any] | None:
    """The GC info table (§2.8) read from VRAM and decoded, with derived counts; None when absent."""
    disc = gpu.discovery
    if disc is None or len(disc.tables) <= GC or not disc.tables[GC].offset:
        return None
    t = disc.tables[GC]
    start = disc.address + t.offset
    head_size, head = ids.GC_INFO_HEADER
    raw = gpu.vram_read(start, -(-head_size // 4) * 4)
    table_id, major, minor, size = (struct.unpack_from("<" + _code(head[k][1]), raw, head[k][0])[0]
                                    for k in ("table_id", "version_major", "version_minor", "size"))
    layout = ids.gc_info_struct(major, minor)
    doc: dict[str, Any] = {"table_id": table_id, "version": f"{major}.{minor}", "size": size}
    if layout is None:
        doc["problem"] = f"gc_info v{major}.{minor} is not in discovery.h"
        return doc
    n, fields = layout
    raw = gpu.vram_read(start, -(-n // 4) * 4)
    vals = {k.removeprefix("gc_"): struct.unpack_from("<" + _code(ct), raw, off)[0]
            for k, (off, ct, count) in fields.items() if count == 1 and k.startswith("gc_")}
    doc["fields"] = vals
    se = vals.get("num_se", 0)
    if major == 1:
        sa_per_se = vals.get("num_sa_per_se", 0)
        cu_per_sa = 2 * (vals.get("num_wgp0_per_sa", 0) + vals.get("num_wgp1_per_sa", 0))
    else:
        sa_per_se = vals.get("num_sh_per_se", 0)
        cu_per_sa = vals.get("num_cu_per_sh", 0)
    xcc = max(1, disc.xcc_count)
    arrays = sa_per_se * se * xcc
    doc["derived"] = {"shader_engines": se * xcc, "shader_arrays": arrays, "cus_per_array": cu_per_sa,
                      "compute_units": cu_per_sa * arrays, "simds": 2 * cu_per_sa * arrays,
                      "wave_size": vals.get("wave_size", 0), "max_waves_per_simd": vals.get("max_waves_per_simd", 0),
                      "lds_kib": vals.get("lds_size", 0), "xccs": xcc}
    return doc


def _code(ctype: str) -> str:
    return {"uint32_t": "I", "uint16_t": "H", "uint8_t": "B"}[ctype]


def probe_smu(gpu: AmGpu) -> dict[str, Any]:
    """The active SMU probe (§6.1): GetSmuVersion through the mailbox (a message, no state change)."""
    from tinyhw.boot.amd.smu import Smu, SmuError

    smu = Smu(gpu)
    if not smu.alive():
        return {"alive": False}
    try:
        return {"alive": True, "version": smu.version()}
    except SmuError as e:
        return {"alive": True, "version": None, "answer": e.code}


def info(gpu: AmGpu, firmware_dir: Path, *, smu_probe: bool = False) -> dict[str, Any]:
    """The ``am info`` document; ``smu_probe`` adds the active SMU probe (one mailbox message)."""
    t = gpu.transport
    ident = t.identity()
    disc = gpu.discovery
    doc: dict[str, Any] = {
        "device": ident.location, "vendor_id": ident.vendor_id, "device_id": ident.device_id,
        "asic": gpu.asic.name, "register_bases": gpu.asic.source,
        "vram_mib": gpu.vram_mib, "vram_bytes": gpu.vram_size, "bar0_bytes": gpu.bar0_size,
        "large_bar": gpu.bar0_size >= gpu.vram_size, "vf": gpu.is_vf(),
    }
    if disc is None:
        doc["discovery"] = None
        doc["problem"] = "ip discovery table unreadable; register offsets come from the fact table"
        doc["state"] = read_state(gpu).to_doc()
        return doc
    doc["discovery"] = {
        "address": disc.address, "path": disc.path, "version": f"{disc.version[0]}.{disc.version[1]}",
        "ip_table_version": disc.ip_version,
        "ips": [{"block": ip.block or f"hw_id {ip.hw_id}", "hw_id": ip.hw_id, "die": ip.die, "instance": ip.instance,
                 "version": ip.version_text, "bases": list(ip.bases)} for ip in disc.ips],
        "harvest": [{"block": h.block or f"hw_id {h.hw_id}", "hw_id": h.hw_id, "instance": h.instance}
                    for h in disc.harvest],
    }
    doc["gfx_target"] = disc.gfx_target
    doc["gc_info"] = gc_info(gpu)
    doc["state"] = read_state(gpu).to_doc()
    if smu_probe:
        doc["smu"] = probe_smu(gpu)
    versions = disc.versions()
    try:
        needed_files(versions)
        doc["firmware"] = {"directory": str(firmware_dir), "files": survey(firmware_dir, versions)}
    except Refused as e:
        doc["firmware"] = {"directory": str(firmware_dir), "problem": e.message}
    return doc
