"""The PCI names of the boards tinyhw knows, for machines without a pci.ids file.

A fresh machine often has no ``pci.ids`` yet (Debian's ``pci.ids`` package, Fedora's ``hwdata``), and
``probe`` would then print ``Device 1002:744c``. These names are the pci.ids entries of the functions in
tinyhw's board descriptions (:data:`tinyhw.boards.navi31.NAVI31`, :data:`tinyhw.boards.nvidia.AD102_IDS`),
copied as facts, so output matches what lspci prints once pci.ids is installed. Every other device still
falls back to its ids, and the output hints at installing pci.ids (:data:`tinyhw.formats.pciids.INSTALL_HINT`).
"""

from __future__ import annotations

from tinyhw.boards.navi31 import NAVI31
from tinyhw.boards.nvidia import AD102_IDS
from tinyhw.formats.pciids import PciIds, load_pci_ids

#: What ``name_source`` says for a name taken from here.
SOURCE = "tinyhw boards"

_AMD, _NVIDIA = NAVI31.function.vendor_id, AD102_IDS["vendor_id"]
_NAVI31 = NAVI31.function

BOARD_NAMES = PciIds.from_names(
    SOURCE,
    vendors={_AMD: "Advanced Micro Devices, Inc. [AMD/ATI]", _NVIDIA: "NVIDIA Corporation",
             _NAVI31.subsystem_vendor_id: "Sapphire Technology Limited"},
    devices={(_AMD, _NAVI31.device_id): "Navi 31 [Radeon RX 7900 XT/7900 XTX]",
             (_NVIDIA, AD102_IDS["device_id"]): "AD102 [GeForce RTX 4090]"},
    subsystems={(_AMD, _NAVI31.device_id, _NAVI31.subsystem_vendor_id, _NAVI31.subsystem_id):
                "NITRO+ RX 7900 XTX Vapor-X"},
    classes={0x03: "Display controller"},
    subclasses={0x0300: "VGA compatible controller", 0x0302: "3D controller", 0x0380: "Display controller"},
    prog_ifs={0x030000: "VGA controller"},
)


def load_names(path: str | None = None, *, cached: bool = False) -> PciIds:
    """The pci.ids database (``path``, else ``$TINYHW_PCI_IDS`` or the default paths; ``cached``: parsed once
    per process by :func:`~tinyhw.formats.pciids.load_pci_ids`, else read again), falling back to
    :data:`BOARD_NAMES` for every name it lacks (all of them when no file is installed)."""
    db = load_pci_ids(path) if cached else PciIds.load(path)
    return db.with_fallback(BOARD_NAMES)
