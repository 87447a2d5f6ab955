"""Identify a device: ids and names, class, BARs, PCIe link and Resizable BAR (read-only).

NVIDIA GPUs get the tiered probe of :mod:`tinyhw.probe.nvidia` (specs/nv-bringup.md §15) through
:func:`probe_device`.

Handed a transport by the front end; reads config space only (never a BAR register).
Config space is decoded lazily, a dword at a time and each dword once, because over the
USB bridge every dword costs two round trips.
"""

from __future__ import annotations

from typing import Any

from tinyhw.formats.pcicaps import speed_name
from tinyhw.formats.pciconfig import parse_config
from tinyhw.formats.pciids import PciIds
from tinyhw.transport.base import Transport, has

CONFIG_SIZE = 4096


def config_reader(t: Transport):  # a read(offset, n) callable
    """A ``read(offset, n)`` over the device's config space (dword-aligned reads, clipped to 4 KiB)."""
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
    revision, class_code, name, vendor_name, device_name, class_name, subsystem_*, name_source, name_hint,
    bars (index, address, size, kind, prefetchable, is_64bit), link, resizable_bar, bridge, problems."""
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
        has_sub = sv not in (0, 0xFFFF)
        doc["subsystem_name"] = ids.subsystem_text(v, d, sv, sd, numeric=False) if has_sub else None
        doc.update(ids.name_origin(v, d, ident.class_code, (sv, sd) if has_sub else None))
    else:
        doc["name"] = f"Device {v:04x}:{d:04x}"
        doc["vendor_name"] = doc["device_name"] = doc["subsystem_name"] = None
        doc["class_name"] = f"Class {ident.class_code >> 8:04x}"
        doc["name_source"] = doc["name_hint"] = None
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


def probe_device(t: Transport, ids: PciIds | None = None, *, registers: bool = False) -> dict[str, Any]:
    """What ``tinyhw probe`` shows: an NVIDIA GPU reached with sysfs-style attributes gets the tiered probe of
    :mod:`tinyhw.probe.nvidia` (tier 0: no device access; ``registers``: tier 2); anything else the config-space
    probe above (``registers`` is then refused)."""
    from tinyhw.boards.nvidia import NVIDIA_VENDOR
    from tinyhw.errors import Refused
    from tinyhw.probe.nvidia import probe_nvidia
    from tinyhw.transport.abilities import DeviceAttributes

    # only a transport with sysfs-style attributes can be an NVIDIA board probed in tiers: others are not asked
    # for their identity here (over the usb bridge that would cost three more config reads)
    if has(t, DeviceAttributes) and t.identity().vendor_id == NVIDIA_VENDOR:
        return probe_nvidia(t, ids, registers=registers)
    if registers:
        ident = t.identity()
        raise Refused(f"--registers is for nvidia gpus over pci: or mock:ad102; {ident.location} is "
                      f"{ident.vendor_id:04x}:{ident.device_id:04x}")
    return probe(t, ids)
