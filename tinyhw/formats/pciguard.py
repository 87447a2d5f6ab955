"""Which config-space writes a remote client may make when the server does not allow config writes.

Spec: specs/pci-vfio-remote.md §12.2 item 7 (config-space policy of ``tinyhw serve remote``), §3.2-§3.9 for
the registers. Without ``--allow-config-writes`` every config write is refused unless :data:`SAFE_WRITES` (the one
table, documented in docs/remote.md) lets it through: a write must lie inside one listed register and may change
only the bits listed for it; every other bit must be written back with the value it holds. Everything else (the
BARs, the capability chains, Device Control with its FLR bit, Device Control 2, the AER masks, ACS control, link
control, power management, MSI/MSI-X, Resizable BAR, and COMMAND's memory and I/O decode) changes what the host or
the device decodes, resets the function, or hides its errors, beyond what a client's session should.

:func:`register_name` names what a refused write hit, for the error message (walking both capability lists).
Pure: works on offsets, values and a :class:`PciConfig`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

from tinyhw.formats.pciconfig import CAP_EXPRESS, EXT_CAP_REBAR, REG_COMMAND, PciConfig


class SafeWrite(NamedTuple):
    """One register a client may write: where, how wide, which bits it may change, and why they are safe."""
    offset: int
    size: int
    mask: int
    name: str
    why: str


#: The safe set. COMMAND bit 2 (bus master) is what every DMA user toggles (``set_bus_master``: the boot, the dma
#: copier); bit 10 (INTx disable) only masks the legacy interrupt. Memory and I/O decode (bits 1, 0) stay as they are.
SAFE_WRITES: tuple[SafeWrite, ...] = (
    SafeWrite(REG_COMMAND, 2, 0x0404, "command", "bus master (bit 2) and intx disable (bit 10) only"),
)

EXT_CAP_AER, EXT_CAP_ACS, EXT_CAP_VF_REBAR = 0x0001, 0x000D, 0x0024
#: registers of the PCI Express capability named in refusals (offset in the capability, size, name)
EXPRESS_REGISTERS = ((0x08, 2, "pcie device control"), (0x0A, 2, "pcie device status"),
                     (0x10, 2, "pcie link control"), (0x28, 2, "pcie device control 2"),
                     (0x30, 2, "pcie link control 2"))
#: the header registers named in refusals
HEADER_REGISTERS = ((0x04, 2, "command"), (0x06, 2, "status"), (0x10, 0x18, "bar registers"),
                    (0x30, 4, "expansion rom bar"), (0x34, 1, "capability pointer"), (0x3C, 2, "interrupt line/pin"))
EXT_NAMES = {EXT_CAP_AER: "aer", EXT_CAP_ACS: "acs control", EXT_CAP_REBAR: "resizable bar control",
             EXT_CAP_VF_REBAR: "resizable bar control"}


def write_refusal(offset: int, size: int, value: int, read: Callable[[int, int], int]) -> str | None:
    """Why a ``size``-byte write of ``value`` at ``offset`` is refused, or None when :data:`SAFE_WRITES` allows it
    (inside one listed register, changing only its listed bits). ``read(offset, size)`` gives the value those bytes
    hold now; it is called only for a write inside a listed register."""
    for row in SAFE_WRITES:
        if row.offset <= offset and offset + size <= row.offset + row.size:
            shift = 8 * (offset - row.offset)
            mask = (row.mask >> shift) & ((1 << (8 * size)) - 1)
            changed = (value ^ read(offset, size)) & ((1 << (8 * size)) - 1)
            if changed & ~mask:
                return f"changes bits 0x{changed & ~mask:x} of {row.name}; a client may change only {row.why}"
            return None
    return "not in the safe set"


def register_name(offset: int, size: int, cfg: PciConfig | None) -> str:
    """What a write at ``offset`` hits, as named in refusals: a header register, a capability header and next
    pointer, a PCI Express register, a named extended capability, else the capability holding it, else the offset."""
    def hits(lo: int, n: int) -> bool:
        return offset < lo + n and offset + size > lo

    for lo, n, name in HEADER_REGISTERS:
        if hits(lo, n):
            return name
    caps = [] if cfg is None else cfg.capabilities
    for c in caps:
        if hits(c.offset, 2):
            return f"capability 0x{c.id:02x} header and next pointer"
        if c.id == CAP_EXPRESS:
            for reg, n, name in EXPRESS_REGISTERS:
                if hits(c.offset + reg, n):
                    return name
    ext = [] if cfg is None else cfg.ext_capabilities
    for c in ext:
        if hits(c.offset, 4):
            return f"extended capability 0x{c.id:04x} header and next pointer"
    for c in sorted([*caps, *ext], key=lambda c: -c.offset):
        if offset >= c.offset:
            return EXT_NAMES.get(c.id, f"extended capability 0x{c.id:04x}") if c.extended \
                else f"capability 0x{c.id:02x}"
    return f"register 0x{offset:x}"
