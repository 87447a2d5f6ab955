"""The PCI names of the boards tinyhw knows, for machines without a pci.ids file.

A fresh machine often has no ``pci.ids`` yet (Debian's ``pci.ids`` package, Fedora's ``hwdata``), and
``probe`` would then print ``Device 1002:744c``. These names are the pci.ids entries of the functions in
tinyhw's board descriptions (their ``pci_name`` and subsystem names, :mod:`tinyhw.boards.spec`), copied as
facts, so output matches what lspci prints once pci.ids is installed. Every other device still falls back to
its ids, and the output hints at installing pci.ids (:data:`tinyhw.formats.pciids.INSTALL_HINT`).
"""

from __future__ import annotations

from tinyhw.boards.registry import specs
from tinyhw.formats.pciids import PciIds, load_pci_ids

#: What ``name_source`` says for a name taken from here.
SOURCE = "tinyhw boards"

#: pci.ids names of the vendors of the boards tinyhw describes.
VENDORS = {0x1002: "Advanced Micro Devices, Inc. [AMD/ATI]", 0x10DE: "NVIDIA Corporation"}


def _board_names() -> PciIds:
    """The pci.ids names the board descriptions carry (``pci_name``, ``subsystem_*_name``)."""
    vendors, devices, subsystems = dict(VENDORS), {}, {}
    for spec in specs():
        fn = spec.function
        if spec.pci_name:
            devices[spec.ids] = spec.pci_name
        if spec.subsystem_vendor_name:
            vendors[fn.subsystem_vendor_id] = spec.subsystem_vendor_name
        if spec.subsystem_name:
            subsystems[(*spec.ids, fn.subsystem_vendor_id, fn.subsystem_id)] = spec.subsystem_name
    return PciIds.from_names(
        SOURCE, vendors=vendors, devices=devices, subsystems=subsystems,
        classes={0x03: "Display controller"},
        subclasses={0x0300: "VGA compatible controller", 0x0302: "3D controller", 0x0380: "Display controller"},
        prog_ifs={0x030000: "VGA controller"},
    )


BOARD_NAMES = _board_names()


def load_names(path: str | None = None, *, cached: bool = False) -> PciIds:
    """The pci.ids database (``path``, else ``$TINYHW_PCI_IDS`` or the default paths; ``cached``: parsed once
    per process by :func:`~tinyhw.formats.pciids.load_pci_ids`, else read again), falling back to
    :data:`BOARD_NAMES` for every name it lacks (all of them when no file is installed)."""
    db = load_pci_ids(path) if cached else PciIds.load(path)
    return db.with_fallback(BOARD_NAMES)
