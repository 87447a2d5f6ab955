"""Identify a device: ids and names, class, BARs, PCIe link and Resizable BAR (read-only).

Handed a transport by the front end; reads config space only (never a BAR register).
Config space is decoded lazily, a dword at a time and each dword once, because over the
USB bridge every dword costs two round trips.
"""

from __future__ import annotations

from typing import Any

from tinyhw.formats.pcicaps import speed_name
from tinyhw.formats.pciconfig import parse_config
from tinyhw.formats.pciids import PciIds
from tinyhw.transport.base import Transport

CONFIG_SIZE = 4096


def config_reader(t: Transport):  # a read(offset, n) callable
    def read(offset: int, n: int) -> bytes:
        end = min(offset + n, CONFIG_SIZE)
        if offset >= end:
            return b""
        start = offset & ~3
        data = t.config_bytes(start, (end - start + 3) & ~3)
        return data[offset - start:end - start]

    return read


def probe(t: Transport, ids: PciIds | None = None) -> dict[str, Any]:
    """The probe document. Stable keys: transport, emulated, location, vendor_id, device_id,
    revision, class_code, name, vendor_name, device_name, class_name, subsystem_*, bars
    (index, address, size, kind, prefetchable, is_64bit), link, resizable_bar, bridge, problems."""
    cfg = parse_config(config_reader(t), CONFIG_SIZE)
    ident = t.identity()
    info = t.info()
    v, d = ident.vendor_id, ident.device_id
    doc: dict[str, Any] = {
        "transport": info.transport,
        "emulated": info.emulated,
        "location": ident.location,
        "vendor_id": v,
        "device_id": d,
        "revision": ident.revision,
        "class_code": ident.class_code,
        "subsystem_vendor_id": ident.subsystem_vendor_id,
        "subsystem_id": ident.subsystem_id,
    }
    if ids is not None:
        doc["name"] = ids.device_text(v, d, numeric=False)
        doc["vendor_name"] = ids.vendor(v)
        doc["device_name"] = ids.device(v, d)
        doc["class_name"] = ids.class_text(ident.class_code >> 8, numeric=False)
        sv, sd = ident.subsystem_vendor_id, ident.subsystem_id
        doc["subsystem_name"] = ids.subsystem_text(v, d, sv, sd, numeric=False) if sv not in (0, 0xFFFF) else None
    else:
        doc["name"] = f"Device {v:04x}:{d:04x}"
        doc["vendor_name"] = doc["device_name"] = doc["subsystem_name"] = None
        doc["class_name"] = f"Class {ident.class_code >> 8:04x}"
    doc["bars"] = [b.as_dict() for b in t.bars()]
    pcie = cfg.express
    if pcie is not None and pcie.has_link:
        doc["link"] = {
            "current_speed": speed_name(pcie.lnksta.current_speed),
            "current_width": pcie.lnksta.width,
            "max_speed": speed_name(pcie.lnkcap.max_speed),
            "max_width": pcie.lnkcap.max_width,
        }
    else:
        doc["link"] = None
    rebar = cfg.resizable_bar
    doc["resizable_bar"] = [
        {"bar": e.bar, "current": e.current_size, "supported": list(e.supported_sizes)} for e in rebar.entries
    ] if rebar else None
    doc["bridge"] = dict(info.extra) if info.transport == "usb" else None
    doc["problems"] = list(cfg.problems)
    return doc
