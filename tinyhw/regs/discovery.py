"""Segment bases from the device: read its IP discovery table and place registers with it.

``read_discovery(transport)`` follows specs/amd-bringup.md §2.1: VRAM size from
RCC_CONFIG_MEMSIZE (MiB, §1.2), then 10 KiB at VRAM size - 64 KiB, straight through BAR0 when
BAR0 covers all of VRAM (one block read: a streamed transfer over the USB bridge), else dword
by dword through the MM_INDEX_HI / MM_INDEX / MM_DATA window (MM_INDEX_HI written only when
it changes). ``asic_from_device(transport)`` picks the profile from the PCI id and places its
blocks with the discovered bases; when the table cannot be read or fails its checks it falls
back to the profile's fact table and says so in one warning line.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tinyhw.errors import OperationFailed, Refused
from tinyhw.formats.ipdiscovery import READ_SIZE, TMR_OFFSET, Discovery, parse
from tinyhw.regs.asic import Asic, asic
from tinyhw.regs.fixed import CONFIG_MEMSIZE, MM_DATA, MM_INDEX, MM_INDEX_HI, fixed
from tinyhw.regs.profiles import AsicProfile, all_profiles, profile_for_pci

if TYPE_CHECKING:
    from tinyhw.transport.base import Transport

#: the VRAM BAR (amd-bringup.md §1.1) and the register BAR of every profile
VRAM_BAR = 0


class DiscoveryUnreadable(OperationFailed):
    """The discovery table could not be fetched (no VRAM BAR, VRAM size register reads 0 or all ones...)."""


@dataclass
class DeviceDiscovery(Discovery):
    """A parsed discovery table plus how it was fetched from the device."""

    vram_mib: int = 0
    address: int = 0  # VRAM byte address the table was read from
    path: str = ""  # "bar0" or "indirect"

    def as_dict(self) -> dict[str, Any]:
        """The discovery document (``tinyhw reg discovery --json``): stable keys, numbers as integers."""
        return {
            "vram_mib": self.vram_mib,
            "address": self.address,
            "path": self.path,
            "binary_version": f"{self.version[0]}.{self.version[1]}",
            "ip_table_version": self.ip_version,
            "bases_64bit": self.bases_64bit,
            "gfx_target": self.gfx_target,
            "ips": [{"die": ip.die, "block": ip.block or "", "hw_id": ip.hw_id, "instance": ip.instance,
                     "version": ip.version_text, "bases": list(ip.bases)} for ip in self.ips],
            "harvest": [{"block": h.block or "", "hw_id": h.hw_id, "instance": h.instance} for h in self.harvest],
            "problems": [{"offset": p.offset, "message": p.message} for p in self.problems],
        }


def device_profile(transport: Transport, name: str | None = None) -> AsicProfile:
    """The profile called ``name``, else the one of the device's PCI id; Refused when unknown."""
    from tinyhw.regs.asic import profile

    if name:
        return profile(name)
    ident = transport.identity()
    found = profile_for_pci(ident.vendor_id, ident.device_id)
    if found is None:
        raise Refused(f"no register profile for device {ident.vendor_id:04x}:{ident.device_id:04x}",
                      hint=f"give --asic ({', '.join(all_profiles())})")
    return found


def read_discovery(transport: Transport, profile: AsicProfile | str | None = None) -> DeviceDiscovery:
    """Fetch and parse the device's IP discovery binary (check ``.problems``); DiscoveryUnreadable if it cannot."""
    prof = profile if isinstance(profile, AsicProfile) else device_profile(transport, profile)
    infos = {b.index: b for b in transport.bars()}
    vram_bar = infos.get(VRAM_BAR)
    if vram_bar is None or vram_bar.kind != "memory" or not vram_bar.size:
        raise DiscoveryUnreadable("the device shows no vram bar (bar0)")
    regs = transport.bar(prof.bar)
    memsize = fixed(CONFIG_MEMSIZE, prof.name)
    vram_mib = regs.read32(memsize.offset or 0)
    if vram_mib in (0, 0xFFFFFFFF) or (vram_mib << 20) < TMR_OFFSET:
        raise DiscoveryUnreadable(f"{memsize.reg_name} reads 0x{vram_mib:x}, not a vram size in MiB")
    vram = vram_mib << 20
    at = vram - TMR_OFFSET
    if vram_bar.size >= vram:
        data, path = transport.bar(VRAM_BAR).read(at, READ_SIZE), "bar0"
    else:
        data, path = _read_indirect(transport, prof, at, READ_SIZE), "indirect"
    parsed = parse(data)
    return DeviceDiscovery(**vars(parsed), vram_mib=vram_mib, address=at, path=path)


def _read_indirect(transport: Transport, prof: AsicProfile, at: int, length: int) -> bytes:
    """§1.2: per dword, MM_INDEX_HI = addr >> 31, MM_INDEX = low 31 bits | MM_APER, read MM_DATA."""
    bar = transport.bar(prof.bar)
    index, data, hi_reg = (fixed(n, prof.name) for n in (MM_INDEX, MM_DATA, MM_INDEX_HI))
    aper = index.field("MM_APER").mask
    low = index.field("MM_OFFSET").mask
    out = bytearray()
    hi = None
    for addr in range(at, at + length, 4):
        if addr >> 31 != hi:
            hi = addr >> 31
            bar.write32(hi_reg.offset or 0, hi)
        bar.write32(index.offset or 0, (addr & low) | aper)
        out += bar.read32(data.offset or 0).to_bytes(4, "little")
    return bytes(out)


def discovered_bases(prof: AsicProfile, disc: Discovery) -> dict[str, tuple[int, ...]]:
    """Block -> bases (instance 0) for every block of ``prof`` whose IP the table lists."""
    table = disc.bases_of()
    out = {}
    for block, spec in prof.blocks.items():
        found = table.get((spec.bases_ip or spec.ip).lower(), {}).get(0)
        if found is not None:
            out[block] = found
    return out


def asic_from_device(transport: Transport, name: str | None = None,
                     warn: Callable[[str], None] | None = None) -> Asic:
    """The device's register space: its profile (from ``name`` or the PCI id) with discovered bases.

    The result has ``source`` ("discovery" or "facts") and ``discovery`` (the table, or None).
    Falls back to the fact table, calling ``warn`` with one line, when the table is unreadable
    or fails its checks. Errors of the transport itself (disconnect, timeout) are raised.
    """
    prof = device_profile(transport, name)
    try:
        disc = read_discovery(transport, prof)
    except DiscoveryUnreadable as e:
        return _facts(prof, f"ip discovery unreadable ({e.message})", warn)
    if not disc.ok:
        more = f" and {len(disc.problems) - 1} more" if len(disc.problems) > 1 else ""
        return _facts(prof, f"ip discovery table fails its checks ({disc.problems[0]}{more})", warn)
    bases = discovered_bases(prof, disc)
    if not bases:
        return _facts(prof, "ip discovery table lists none of the profile's blocks", warn)
    placed = asic(prof.name, bases=bases)
    placed.source = "discovery"
    placed.discovery = disc
    return placed


def _facts(prof: AsicProfile, why: str, warn: Callable[[str], None] | None) -> Asic:
    if warn is not None:
        warn(f"warning: {why}; register offsets come from the {prof.name} fact table")
    return asic(prof.name)
