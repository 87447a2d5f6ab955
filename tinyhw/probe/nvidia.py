"""Identify an NVIDIA GPU without disturbing the driver that may own it (specs/nv-bringup.md §15).

Tier 0 (default, any user): only what the OS already knows: the function's sysfs attributes (ids,
class, revision, driver in use, BARs from ``resource``, NUMA node, link speed/width, power state,
runtime-PM status, IOMMU group), when present the nvidia driver's version and per-GPU information
files (the VBIOS version among them), and whether tinygrad's lock file for the device exists. No
config-space read, no BAR access. The power state and runtime status are read first: on Linux, reading
``current_link_speed``, ``current_link_width`` or ``max_link_width`` resumes a runtime-suspended or D3cold
device and reads its config space, so for a GPU not in D0 and runtime-active they are not read, and the
document says so (``not_read``).

Tier 2 (``registers=True``, root on real hardware): single 32-bit reads through read-only mappings of
single BAR0 pages: PMC_BOOT_0 (0x0) and PMC_BOOT_42 (0xA00) decoded to architecture and chip (§3), then
VRAM size (0x1183A4), the GFW boot-progress byte (0x118234, pre-Blackwell only) and WPR2_ADDR_HI
(0x1FA828, non-zero: GSP running or its region left locked). Refused unless the attributes say D0 and
runtime-active (``unsupported`` runtime PM counts as active). Nothing is ever written; the PROM window
and the falcons are never touched; ``0xFFFFFFFF`` and ``0xBADFxxxx`` values are reported, not decoded.

Tier 1 (config space) and tier 3 (the nvidia ioctl) are not implemented here.
"""

from __future__ import annotations

import os
import re
from typing import Any

from tinyhw.boards.nvidia import (
    NVIDIA_VENDOR,
    REG_BOOT_0,
    REG_BOOT_42,
    REG_GFW_PROGRESS,
    REG_VRAM_MIB,
    REG_WPR2_ADDR_HI,
    decode_boot0,
    describe_chip,
    register_problem,
)
from tinyhw.errors import Refused
from tinyhw.formats.pciids import PciIds
from tinyhw.transport.abilities import RUNTIME_ACTIVE, DeviceAttributes, ReadOnlyPeek, device_awake
from tinyhw.transport.base import Transport, require

#: The power attributes tier 0 reads first: they decide whether the attributes that resume a sleeping device
#: (:data:`tinyhw.transport.abilities.WAKING_ATTRIBUTES`, from Linux 6.12 pci-sysfs.c) may be read at all.
POWER_ATTRIBUTES = ("power_state", "power/runtime_status")
#: The attributes tier 0 reads itself after those (besides what the transport read to learn ids and BARs):
#: kernel-cached, safe in any power state.
TIER0_ATTRIBUTES = ("driver", "numa_node", "max_link_speed", "iommu_group")
#: Read only when the device is in D0 and runtime-active: each read runtime-resumes the device (or its parent
#: bridge) and reads its config space (``pci_config_pm_runtime_get()`` in the kernel's show functions).
AWAKE_ATTRIBUTES = ("current_link_speed", "current_link_width", "max_link_width")


def _int(text: str | None, base: int = 10) -> int | None:
    try:
        return int(text, base) if text is not None else None
    except ValueError:
        return None


def tier0(t: Transport, ids: PciIds | None = None) -> dict[str, Any]:
    """The tier-0 document: attributes only."""
    attrs = require(t, DeviceAttributes, "show sysfs attributes")
    a = {name: attrs.attribute(name) for name in POWER_ATTRIBUTES}
    a.update({name: attrs.attribute(name) for name in TIER0_ATTRIBUTES})
    awake = device_awake(a["power_state"], a["power/runtime_status"])
    skipped = () if awake else AWAKE_ATTRIBUTES
    a.update({name: None if name in skipped else attrs.attribute(name) for name in AWAKE_ATTRIBUTES})
    ident = t.identity()
    info = t.info()
    v, d = ident.vendor_id, ident.device_id
    doc: dict[str, Any] = {
        "transport": info.transport, "emulated": info.emulated, "location": ident.location, "tier": 0,
        "vendor_id": v, "device_id": d, "revision": ident.revision, "class_code": ident.class_code,
        "subsystem_vendor_id": ident.subsystem_vendor_id, "subsystem_id": ident.subsystem_id,
        "name": ids.device_text(v, d, numeric=False) if ids else f"Device {v:04x}:{d:04x}",
        "driver": a["driver"], "numa_node": _int(a["numa_node"]), "iommu_group": _int(a["iommu_group"]),
        "bars": [b.as_dict() for b in t.bars()],
        "link": {"current_speed": a["current_link_speed"], "current_width": _int(a["current_link_width"]),
                 "max_speed": a["max_link_speed"], "max_width": _int(a["max_link_width"])}
        if a["current_link_speed"] or a["max_link_speed"] else None,
        "power_state": a["power_state"], "runtime_status": a["power/runtime_status"],
        "not_read": {"attributes": list(skipped), "reason": (
            f"the gpu is {a['power_state'] or '?'}, runtime {a['power/runtime_status'] or '?'}: reading these "
            "would resume it (linux runs pci_config_pm_runtime_get() and a config read for each)")}
        if skipped else None,
    }
    doc.update(ids.name_origin(v, d, ident.class_code) if ids else {"name_source": None, "name_hint": None})
    doc["tinygrad_lock"] = _tinygrad_lock(ident.location) if info.transport == "pci" else None
    files = attrs.driver_files()
    doc["nvidia_driver"] = {"version": _driver_version(files), "files": files} if files else None
    doc["vbios_version"] = _vbios_version(files)  # tier 0 never reads the prom: only the driver's report
    doc["problems"] = []
    return doc


def _tinygrad_lock(address: str) -> str | None:
    """§15 tier 0: tinygrad's userspace driver leaves ``<tempdir>/nv_<bdf>.lock`` (``am_`` for AMD); its
    existence hints that tinygrad uses or used the device. Only checked for existence, never opened or locked."""
    tmp = os.environ.get("TMPDIR") or "/tmp"
    for prefix in ("nv", "am"):
        path = os.path.join(tmp, f"{prefix}_{address}.lock")
        if os.path.exists(path):
            return path
    return None


def _driver_version(files: dict[str, str]) -> str | None:
    """``/sys/module/nvidia/version`` is the version itself; in ``/proc/driver/nvidia/version`` it is the first
    dotted number of the ``NVRM version:`` line (the exact line format is inferred)."""
    if files.get("module_version"):
        return files["module_version"].split()[0]
    for line in files.get("driver_version", "").splitlines():
        if line.startswith("NVRM version:"):
            m = re.search(r"\b\d+\.\d+(?:\.\d+)?\b", line)
            return m.group(0) if m else None
    return None


def _vbios_version(files: dict[str, str]) -> str | None:
    """The ``Video BIOS:`` line of ``/proc/driver/nvidia/gpus/<BDF>/information`` (e.g. ``95.02.18.80.87``)."""
    for line in files.get("gpu_information", "").splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "Video BIOS" and value.strip():
            return value.strip()
    return None


def check_tier2(doc: dict[str, Any]) -> None:
    """Refuse (exit 2) the register reads unless the device is an NVIDIA GPU in D0 and runtime-active."""
    if doc["vendor_id"] != NVIDIA_VENDOR:
        raise Refused(f"--registers reads nvidia gpu registers; {doc['location']} is vendor {doc['vendor_id']:04x}")
    if doc["power_state"] != "D0":
        raise Refused(f"{doc['location']} is in power state {doc['power_state'] or 'unknown'}, not D0: its "
                      "registers are not read",
                      hint="read them while the gpu is in use (e.g. run nvidia-smi), or drop --registers")
    if doc["runtime_status"] is not None and doc["runtime_status"] not in RUNTIME_ACTIVE:
        raise Refused(f"{doc['location']} is runtime-{doc['runtime_status']}: reading registers would wake it or "
                      "read all ones", hint="drop --registers, or read while the gpu is active")


def tier2(t: Transport, doc: dict[str, Any]) -> dict[str, Any]:
    """Add the register section to a tier-0 document (after :func:`check_tier2`)."""
    check_tier2(doc)
    peek = require(t, ReadOnlyPeek, "read single registers read-only")
    regs: dict[str, int] = {}
    problems: list[str] = doc["problems"]

    def read(offset: int, name: str) -> int | None:
        value = peek.peek32(0, offset)
        regs[name] = value
        why = register_problem(value)
        if why:
            problems.append(f"{name} (bar0 0x{offset:x}) {why}")
            return None
        return value

    doc["tier"] = 2
    doc["registers"] = regs
    doc["chip"] = doc["vram_bytes"] = doc["gfw_boot_completed"] = doc["gsp_running"] = None
    boot0 = read(REG_BOOT_0, "pmc_boot_0")
    boot42 = read(REG_BOOT_42, "pmc_boot_42")
    if boot0 is None or boot42 is None:
        return doc
    chip = describe_chip(boot42, doc["device_id"])
    b0 = decode_boot0(boot0)
    chip["boot0_chipset"] = b0.chipset
    if b0.chipset != chip["chipset"]:
        problems.append(f"pmc_boot_0 says chipset 0x{b0.chipset:x}, pmc_boot_42 0x{chip['chipset']:x}")
    doc["chip"] = chip
    vram = read(REG_VRAM_MIB, "vram_mib")
    doc["vram_bytes"] = vram << 20 if vram is not None else None
    if chip["architecture"] < 0x1A:
        gfw = read(REG_GFW_PROGRESS, "gfw_boot_progress")
        doc["gfw_boot_completed"] = (gfw & 0xFF) == 0xFF if gfw is not None else None
    wpr2 = read(REG_WPR2_ADDR_HI, "wpr2_addr_hi")
    doc["gsp_running"] = bool(wpr2 & 0xFFFFFFF0) if wpr2 is not None else None
    return doc


def probe_nvidia(t: Transport, ids: PciIds | None = None, *, registers: bool = False) -> dict[str, Any]:
    """Probe an NVIDIA GPU: tier 0 (sysfs only), plus tier 2 (read-only BAR0 registers) with ``registers``."""
    doc = tier0(t, ids)
    return tier2(t, doc) if registers else doc
