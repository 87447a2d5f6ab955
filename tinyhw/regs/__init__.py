"""Layer 1: register and field lookup by name, from the databases generated from the Linux headers.

Typical use::

    from tinyhw import regs
    navi31 = regs.asic("navi31")
    navi31.reg("smuio.ROM_SW_CNTL").offset            # 0x5A3A0, byte offset in BAR5
    navi31.field("smuio.ROM_SW_CNTL.DATA_SIZE")       # Field(name='DATA_SIZE', shift=0, mask=0xffff)
    regs.Mmio(transport, navi31).update("smuio.ROM_SW_CNTL", DATA_SIZE=4)
    regs.Mmio(transport, navi31).apply(regs.WritePlan.build(navi31, [("mp0.MP0_SMN_C2PMSG_116", 0)]))

``asic(name, bases=...)`` takes segment bases read from the device's IP discovery table;
without them the profile's offline bases (cited, inferred) are used (``profiles.py``).
``tinyhw.regs.discovery.asic_from_device(transport)`` reads that table from a device
(``read_discovery``) and places the profile with it, falling back to the facts with a warning;
``tinyhw.regs.fixed`` holds the few registers valid before discovery (amd-bringup.md §1.2).
Importing this package loads no register table; each table loads on first use of its block.
Imports only the standard library, ``tinyhw.autogen``, ``tinyhw.errors``, ``tinyhw.formats``
(the discovery parser) and ``tinyhw.transport`` (for types).
"""

from __future__ import annotations

from tinyhw.regs.asic import Asic, asic, profile
from tinyhw.regs.discovery import asic_from_device
from tinyhw.regs.mmio import Mmio
from tinyhw.regs.model import Field, Register
from tinyhw.regs.plan import WritePlan, Written
from tinyhw.regs.profiles import PROFILES, AsicProfile, BlockSpec, all_profiles, profile_for_pci, profile_names
from tinyhw.regs.table import RegTable, table

__all__ = [
    "PROFILES",
    "all_profiles",
    "Asic",
    "AsicProfile",
    "BlockSpec",
    "Field",
    "Mmio",
    "RegTable",
    "Register",
    "WritePlan",
    "Written",
    "asic",
    "asic_for_device",
    "asic_from_device",
    "profile",
    "profile_for_pci",
    "profile_names",
    "table",
]


def asic_for_device(vendor_id: int, device_id: int) -> Asic:
    """The register space of PCI function ``vendor_id:device_id`` (1002:744c -> navi31); Refused if unknown."""
    found = profile_for_pci(vendor_id, device_id)
    if found is None:
        from tinyhw.errors import Refused

        raise Refused(
            f"no register profile for device {vendor_id:04x}:{device_id:04x}",
            hint=f"give --asic ({', '.join(all_profiles())})",
        )
    return asic(found.name)
