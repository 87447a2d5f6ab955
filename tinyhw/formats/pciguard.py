"""Config-space registers a remote client may not write unless the server allows config writes.

Spec: specs/pci-vfio-remote.md §12.2 item 7 (config-space policy of ``tinyhw serve remote``), §3.2-§3.9 for
the registers. A write into any of these changes what the host or the device decodes, beyond what a client's
session should: the BARs and the expansion ROM BAR (where the device answers), the capability pointer at 0x34
and every capability's header with its next pointer (the chains every driver and lspci walk), MSI, MSI-X and
power management (interrupt targets, D-states), PCI Express Link Control and Link Control 2 (the link-disable
and retrain bits, target speed: a disabled link drops the device off the bus), and every Resizable BAR
(and VF Resizable BAR) capability, whose control registers resize the BARs. Pure: works on a :class:`PciConfig`.
"""

from __future__ import annotations

from tinyhw.formats.pcicaps import ResizableBar
from tinyhw.formats.pciconfig import CAP_EXPRESS, EXT_CAP_REBAR, PciConfig

#: Conventional capabilities guarded whole (id: length in bytes): power management, MSI, MSI-X.
GUARDED_CAPS = {0x01: 8, 0x05: 24, 0x11: 12}
EXT_CAP_VF_REBAR = 0x24
REG_CAP_POINTER = 0x34
PCIE_LINK_CONTROL, PCIE_LINK_CONTROL2 = 0x10, 0x30  # offsets in the PCI Express capability (§3.7)

Guard = tuple[int, int, str]  # [start, end) and what it is


def guarded_ranges(cfg: PciConfig) -> list[Guard]:
    """The byte ranges of ``cfg``'s function a client must not write (see the module text), as found by walking
    both capability lists."""
    out: list[Guard] = [(0x10, 0x28, "bar registers"), (0x30, 0x34, "expansion rom bar"),
                        (REG_CAP_POINTER, REG_CAP_POINTER + 1, "capability pointer")]
    for c in cfg.capabilities:
        out.append((c.offset, c.offset + 2, f"capability 0x{c.id:02x} header and next pointer"))
        if c.id in GUARDED_CAPS:
            out.append((c.offset, c.offset + GUARDED_CAPS[c.id], f"capability 0x{c.id:02x}"))
        if c.id == CAP_EXPRESS:
            for reg, name in ((PCIE_LINK_CONTROL, "pcie link control"), (PCIE_LINK_CONTROL2, "pcie link control 2")):
                out.append((c.offset + reg, c.offset + reg + 2, name))
    for c in cfg.ext_capabilities:
        out.append((c.offset, c.offset + 4, f"extended capability 0x{c.id:04x} header and next pointer"))
        if c.id in (EXT_CAP_REBAR, EXT_CAP_VF_REBAR):
            # every entry's capability and control dword; six entries at most, so the whole possible extent
            # when the decoder could not count them
            n = len(c.data.entries) if isinstance(c.data, ResizableBar) and c.data.entries else 6
            out.append((c.offset + 4, c.offset + 4 + 8 * n, "resizable bar control"))
    return out


def refusal(offset: int, size: int, guards: list[Guard]) -> str | None:
    """What a ``size``-byte write at ``offset`` would hit, or None when it touches no guarded byte."""
    for lo, hi, what in guards:
        if offset < hi and offset + size > lo:
            return what
    return None
