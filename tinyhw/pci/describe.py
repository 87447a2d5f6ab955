"""What ``tinyhw pci show`` and ``pci config`` print: config space in lspci's words.

Spec: specs/pci-vfio-remote.md §3 (decoding), §4.4 (lspci's verbose blocks and hex dumps).

Human output follows ``lspci -vvv -nn -D``: the device line, ``Subsystem:``, ``Control:``,
``Status:``, ``Region N:`` lines (sizes from the kernel's ``resource`` file), one
``Capabilities: [xx] ...`` head line per capability (``[xxx vN]`` for extended ones) with the
decoded registers indented below, and ``Kernel driver in use:``. Head lines of Power
Management, MSI, MSI-X, PCI Express, AER, SR-IOV, ACS and Resizable BAR are printed exactly as
lspci 3.9.0 prints them; for other capabilities the name is a prefix of lspci's line.
The JSON document carries the same facts with integer values (ARCHITECTURE.md, JSON).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tinyhw.formats.pcicaps import (
    Acs,
    Aer,
    Msi,
    MsiX,
    PowerManagement,
    ResizableBar,
    SrIov,
    flag_line,
)
from tinyhw.formats.pciconfig import Capability, PciConfig
from tinyhw.formats.pciexpress import PciExpress
from tinyhw.formats.pciids import PciIds
from tinyhw.pci.scan import PciFunction, lspci_line, subsystem_line
from tinyhw.transport.base import BarInfo


def size_text(size: int) -> str:
    """``[size=S]`` text of lspci: divide by 1024 while divisible, up to T (§4.4)."""
    unit = ""
    for u in ("K", "M", "G", "T"):
        if size % 1024 or not size:
            break
        size, unit = size // 1024, u
    return f"{size}{unit}"


def region_line(b: BarInfo, command: int) -> str:
    """One ``lspci -vv`` style "Region N:" line for BAR ``b``, marked ``[disabled]`` when the command register
    ``command`` has its decode bit off."""
    disabled = "" if command & (1 if b.kind == "io" else 2) else " [disabled]"
    if b.kind == "io":
        return f"Region {b.index}: I/O ports at {b.address:04x}{disabled} [size={size_text(b.size)}]"
    width = "64-bit" if b.is_64bit else "32-bit"
    pref = "prefetchable" if b.prefetchable else "non-prefetchable"
    where = f"{b.address:08x}" if b.address else "<unassigned>"
    return f"Region {b.index}: Memory at {where} ({width}, {pref}){disabled} [size={size_text(b.size)}]"


def _pm_lines(pm: PowerManagement) -> list[str]:
    return [f"Status: {pm.state_name} NoSoftRst{'+' if pm.no_soft_reset else '-'} "
            f"PME-Enable{'+' if pm.pme_enable else '-'} PME{'+' if pm.pme_status else '-'}"]


def _express_lines(e: PciExpress) -> list[str]:
    dc, dctl, dsta = e.devcap, e.devctl, e.devsta
    out = [
        f"DevCap:\tMaxPayload {dc.max_payload} bytes, PhantFunc {dc.phantom_functions}, "
        f"Latency L0s {dc.l0s_latency}, L1 {dc.l1_latency}",
        f"\tExtTag{'+' if dc.ext_tag else '-'} RBE{'+' if dc.role_based_errors else '-'} "
        f"FLReset{'+' if dc.flr else '-'}",
        "DevCtl:\t" + flag_line([("CorrErr", dctl.corr_err), ("NonFatalErr", dctl.nonfatal_err),
                                 ("FatalErr", dctl.fatal_err), ("UnsupReq", dctl.unsup_req)]),
        "\t" + flag_line([("RlxdOrd", dctl.relaxed_ordering), ("ExtTag", dctl.ext_tag),
                          ("PhantFunc", dctl.phantom_functions), ("AuxPwr", dctl.aux_power),
                          ("NoSnoop", dctl.no_snoop)]),
        f"\tMaxPayload {dctl.max_payload} bytes, MaxReadReq {dctl.max_read_request} bytes",
        "DevSta:\t" + flag_line([("CorrErr", dsta.corr_err), ("NonFatalErr", dsta.nonfatal_err),
                                 ("FatalErr", dsta.fatal_err), ("UnsupReq", dsta.unsup_req),
                                 ("AuxPwr", dsta.aux_power), ("TransPend", dsta.transactions_pending)]),
    ]
    if e.has_link:
        lc, ls = e.lnkcap, e.lnksta
        out.append(f"LnkCap:\tPort #{lc.port}, Speed {lc.speed}, Width x{lc.max_width}, ASPM {lc.aspm}")
        out.append(f"LnkCtl:\tASPM {('Disabled', 'L0s Enabled', 'L1 Enabled', 'L0s L1 Enabled')[e.lnkctl.aspm]}; "
                   + flag_line([("Disabled", e.lnkctl.link_disable), ("CommClk", e.lnkctl.common_clock)]))
        out.append(f"LnkSta:\tSpeed {ls.speed}{' (downgraded)' if e.speed_downgraded else ''}, "
                   f"Width x{ls.width}{' (downgraded)' if e.width_downgraded else ''}")
        if e.lnkcap2 is not None:
            out.append(f"LnkCap2: Supported Link Speeds: {e.lnkcap2.speeds_label}")
        if e.lnkctl2 is not None:
            out.append(f"LnkCtl2: Target Link Speed: {e.lnkctl2.target}")
    return out


def cap_head(c: Capability) -> tuple[str, bool]:
    """The ``Capabilities:`` line and whether it is exactly lspci 3.9.0's (else lspci's starts with it)."""
    where = f"[{c.offset:03x} v{c.version}]" if c.extended else f"[{c.offset:02x}]"
    d = c.data
    if isinstance(d, PowerManagement):
        return f"Capabilities: {where} Power Management version {d.version}", True
    if isinstance(d, Msi):
        return f"Capabilities: {where} MSI: {d.summary}", True
    if isinstance(d, MsiX):
        return (f"Capabilities: {where} MSI-X: Enable{'+' if d.enabled else '-'} Count={d.table_size} "
                f"Masked{'+' if d.function_mask else '-'}"), True
    if isinstance(d, PciExpress):
        return f"Capabilities: {where} Express (v{d.version}) {d.port_type_name}, MSI {d.interrupt_message:02x}", True
    exact = isinstance(d, Aer | SrIov | Acs | ResizableBar)
    return f"Capabilities: {where} {c.name}", exact


def cap_details(c: Capability) -> list[str]:
    """The detail lines ``lspci -vv`` prints under capability ``c`` (empty for a kind without decoded fields)."""
    d = c.data
    if isinstance(d, PowerManagement):
        return _pm_lines(d)
    if isinstance(d, Msi):
        return [f"Address: {d.address:016x}  Data: {d.data:04x}"]
    if isinstance(d, MsiX):
        return [f"Vector table: BAR={d.table_bir} offset={d.table_offset:08x}",
                f"PBA: BAR={d.pba_bir} offset={d.pba_offset:08x}"]
    if isinstance(d, PciExpress):
        return _express_lines(d)
    if isinstance(d, Aer):
        return ["UESta:\t" + (" ".join(d.uncorrectable_errors) or "none"), "CESta:\t" + d.correctable_line]
    if isinstance(d, SrIov):
        return [f"Initial VFs: {d.initial_vfs}, Total VFs: {d.total_vfs}, Number of VFs: {d.num_vfs}, "
                f"Function Dependency Link: {d.function_dependency_link:02x}",
                f"VF offset: {d.vf_offset}, stride: {d.vf_stride}, Device ID: {d.vf_device_id:04x}"]
    if isinstance(d, Acs):
        return ["ACSCap:\t" + d.capability_line]
    if isinstance(d, ResizableBar):
        return [e.summary for e in d.entries]
    return []


def show_lines(fn: PciFunction, cfg: PciConfig, bars: list[BarInfo], ids: PciIds | None) -> list[str]:
    """The ``pci show`` text: lines of an ``lspci -vvv -nn -D`` block (tab-indented)."""
    out = [lspci_line(fn, ids, verbose=True)]
    sub = subsystem_line(fn, ids)
    if sub:
        out.append("\t" + sub)
    if cfg.header is None:
        out.append("\tConfig space: <access denied>")
        return out
    out.append(f"\tControl: {cfg.header.control_line}")
    out.append(f"\tStatus: {cfg.header.status_line}")
    out += ["\t" + region_line(b, cfg.header.command) for b in bars]
    if cfg.length <= 64 and cfg.header.has_capabilities:
        out.append("\tCapabilities: <access denied>")
    for c in cfg.capabilities + cfg.ext_capabilities:
        out.append("\t" + cap_head(c)[0])
        out += ["\t\t" + line for line in cap_details(c)]
    if fn.driver:
        out.append(f"\tKernel driver in use: {fn.driver}")
    if fn.iommu_group is not None:
        out.append(f"\tIOMMU group: {fn.iommu_group}")
    return out


def jsonable(value: Any) -> Any:
    """Dataclasses to dicts, tuples to lists; ints stay ints (ARCHITECTURE.md JSON rule)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    return value


def show_doc(fn: PciFunction, cfg: PciConfig, bars: list[BarInfo], ids: PciIds | None,
             transport: str) -> dict[str, Any]:
    """The ``pci show --json`` document."""
    ids = ids if ids is not None else PciIds()
    h = cfg.header
    caps = [{"offset": c.offset, "id": c.id, "name": c.name, "extended": c.extended, "version": c.version,
             "line": cap_head(c)[0].split(" ", 2)[2], "decoded": jsonable(c.data)}
            for c in cfg.capabilities + cfg.ext_capabilities]
    return {
        "address": fn.address, "transport": transport, "line": lspci_line(fn, ids),
        "vendor_id": fn.vendor_id, "device_id": fn.device_id, "revision": fn.revision, "class_code": fn.class_code,
        "subsystem_vendor_id": fn.subsystem_vendor_id, "subsystem_id": fn.subsystem_id,
        "driver": fn.driver, "iommu_group": fn.iommu_group, "config_length": cfg.length,
        "command": h.command if h else None, "status": h.status if h else None,
        "control_flags": h.control_line if h else None, "status_flags": h.status_line if h else None,
        "header_type": h.header_type if h else None, "multifunction": h.multifunction if h else None,
        "bars": [b.as_dict() for b in bars], "capabilities": caps, "problems": list(cfg.problems),
        **ids.name_origin(fn.vendor_id, fn.device_id, fn.class_code, _subsystem(fn)),
    }


def _subsystem(fn: PciFunction) -> tuple[int, int] | None:
    sv, sd = fn.subsystem_vendor_id, fn.subsystem_id
    return (sv, sd) if sv not in (0, 0xFFFF) else None


def hex_dump(fn: PciFunction, data: bytes, ids: PciIds | None) -> list[str]:
    """``lspci -D -xxx`` (256 bytes) or ``-xxxx`` (4096) for one function: device line, rows, a blank line."""
    out = [lspci_line(fn, ids, numeric_names=False)]
    for row in range(0, len(data) - len(data) % 16, 16):
        out.append(f"{row:02x}: " + " ".join(f"{b:02x}" for b in data[row:row + 16]))
    out.append("")
    return out
