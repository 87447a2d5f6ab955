"""PCI Express capability decoder (ID 0x10): device, link and slot registers.

Spec: specs/pci-vfio-remote.md §3.7 (register layout, speed codes), §4.4 (lspci's labels).
Split from :mod:`tinyhw.formats.pcicaps`, whose bounded reader it uses.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tinyhw.formats.pcicaps import ConfigSource, Truncated, _bit, _field, speed_name

# -- PCI Express (0x10), §3.7 ------------------------------------------------------------------------------------

PORT_TYPES = {0: "Endpoint", 1: "Legacy Endpoint", 4: "Root Port", 5: "Upstream Port", 6: "Downstream Port",
              7: "PCI-Express to PCI/PCI-X Bridge", 8: "PCI/PCI-X to PCI-Express Bridge",
              9: "Root Complex Integrated Endpoint", 10: "Root Complex Event Collector"}
L0S_LATENCY = ("<64ns", "<128ns", "<256ns", "<512ns", "<1us", "<2us", "<4us", "unlimited")
L1_LATENCY = ("<1us", "<2us", "<4us", "<8us", "<16us", "<32us", "<64us", "unlimited")
ASPM_SUPPORT = ("not supported", "L0s", "L1", "L0s L1")


@dataclass(frozen=True)
class DevCap:
    """PCIe Device Capabilities, decoded."""
    raw: int
    max_payload: int  # bytes
    phantom_functions: int
    ext_tag: bool
    l0s_latency: str
    l1_latency: str
    role_based_errors: bool
    slot_power_limit_w: float
    flr: bool  # function-level reset capable


@dataclass(frozen=True)
class DevCtl:
    """PCIe Device Control, decoded."""
    raw: int
    corr_err: bool
    nonfatal_err: bool
    fatal_err: bool
    unsup_req: bool
    relaxed_ordering: bool
    max_payload: int  # bytes
    ext_tag: bool
    phantom_functions: bool
    aux_power: bool
    no_snoop: bool
    max_read_request: int  # bytes
    initiate_flr: bool  # bridge configuration retry enable on bridges


@dataclass(frozen=True)
class DevSta:
    """PCIe Device Status, decoded."""
    raw: int
    corr_err: bool
    nonfatal_err: bool
    fatal_err: bool
    unsup_req: bool
    aux_power: bool
    transactions_pending: bool


@dataclass(frozen=True)
class LinkCap:
    """PCIe Link Capabilities, decoded."""
    raw: int
    max_speed: int  # speed code
    max_width: int  # lanes
    aspm_support: int
    l0s_exit: str
    l1_exit: str
    dll_active_reporting: bool
    port: int

    @property
    def speed(self) -> str:
        """The maximum link speed as text (``16GT/s``, ...)."""
        return speed_name(self.max_speed)

    @property
    def aspm(self) -> str:
        """The supported ASPM states as lspci names them."""
        return ASPM_SUPPORT[self.aspm_support]


@dataclass(frozen=True)
class LinkCtl:
    """PCIe Link Control, decoded."""
    raw: int
    aspm: int
    rcb_128: bool
    link_disable: bool
    retrain: bool
    common_clock: bool


@dataclass(frozen=True)
class LinkSta:
    """PCIe Link Status, decoded."""
    raw: int
    current_speed: int  # speed code
    width: int  # negotiated lanes
    training: bool
    slot_clock: bool
    dll_active: bool

    @property
    def speed(self) -> str:
        """The current link speed as text."""
        return speed_name(self.current_speed)


@dataclass(frozen=True)
class LinkCap2:
    """PCIe Link Capabilities 2: the supported link speeds vector."""
    raw: int
    speeds_vector: int  # bits 7:1 of the register, shifted down: bit 0 = 2.5 GT/s

    @property
    def speeds(self) -> list[int]:
        """Supported speed codes (1 = 2.5 GT/s ...)."""
        return [k + 1 for k in range(7) if _bit(self.speeds_vector, k)]

    @property
    def speeds_label(self) -> str:
        """``2.5-16GT/s`` (lowest-highest), a single speed, or ``RsvdP`` when the vector is empty."""
        codes = self.speeds
        if not codes:
            return "RsvdP"
        lo, hi = speed_name(codes[0]), speed_name(codes[-1])
        return hi if lo == hi else f"{lo.removesuffix('GT/s')}-{hi}"


@dataclass(frozen=True)
class LinkCtl2:
    """PCIe Link Control 2, decoded."""
    raw: int
    target_speed: int
    enter_compliance: bool
    speed_disable: bool

    @property
    def target(self) -> str:
        """The target link speed as text."""
        return speed_name(self.target_speed)


@dataclass(frozen=True)
class PciExpress:
    """PCI Express capability; ``*2`` registers only for version >= 2 when readable."""

    version: int
    port_type: int
    slot_implemented: bool
    interrupt_message: int
    devcap: DevCap
    devctl: DevCtl
    devsta: DevSta
    lnkcap: LinkCap
    lnkctl: LinkCtl
    lnksta: LinkSta
    slot: tuple[int, int, int] | None = None  # raw slot cap, control, status
    root: tuple[int, int, int] | None = None  # raw root control, capabilities, status
    devcap2: int | None = None
    devctl2: int | None = None
    lnkcap2: LinkCap2 | None = None
    lnkctl2: LinkCtl2 | None = None
    lnksta2: int | None = None

    @property
    def port_type_name(self) -> str:
        """The device/port type's name (``Endpoint``, ``Root Port``, ...)."""
        return PORT_TYPES.get(self.port_type, f"Unknown type {self.port_type}")

    @property
    def has_link(self) -> bool:
        """False for root-complex integrated endpoints and event collectors (no link registers)."""
        return self.port_type not in (9, 10)

    @property
    def speed_downgraded(self) -> bool:
        """True when the link trained below its maximum speed."""
        return 0 < self.lnksta.current_speed < self.lnkcap.max_speed

    @property
    def width_downgraded(self) -> bool:
        """True when the link trained narrower than its maximum width."""
        return 0 < self.lnksta.width < self.lnkcap.max_width


def decode_pcie(src: ConfigSource, off: int, problems: list[str]) -> PciExpress:
    """Decode the PCI Express capability at ``off`` (device and link registers, their version-2 forms)."""
    flags, dc, dctl, dsta = src.u16(off + 2), src.u32(off + 4), src.u16(off + 8), src.u16(off + 0xA)
    lc, lctl, lsta = src.u32(off + 0xC), src.u16(off + 0x10), src.u16(off + 0x12)
    version, port_type = flags & 0xF, _field(flags, 4, 4)
    devcap = DevCap(dc, 128 << (dc & 7), _field(dc, 3, 2), _bit(dc, 5), L0S_LATENCY[_field(dc, 6, 3)],
                    L1_LATENCY[_field(dc, 9, 3)], _bit(dc, 15), _field(dc, 18, 8) * (1.0, 0.1, 0.01, 0.001)[
                        _field(dc, 26, 2)], _bit(dc, 28))
    devctl = DevCtl(dctl, _bit(dctl, 0), _bit(dctl, 1), _bit(dctl, 2), _bit(dctl, 3), _bit(dctl, 4),
                    128 << _field(dctl, 5, 3), _bit(dctl, 8), _bit(dctl, 9), _bit(dctl, 10), _bit(dctl, 11),
                    128 << _field(dctl, 12, 3), _bit(dctl, 15))
    devsta = DevSta(dsta, *(_bit(dsta, b) for b in range(6)))
    lnkcap = LinkCap(lc, lc & 0xF, _field(lc, 4, 6), _field(lc, 10, 2), L0S_LATENCY[_field(lc, 12, 3)],
                     L1_LATENCY[_field(lc, 15, 3)], _bit(lc, 20), lc >> 24)
    lnkctl = LinkCtl(lctl, lctl & 3, _bit(lctl, 3), _bit(lctl, 4), _bit(lctl, 5), _bit(lctl, 6))
    lnksta = LinkSta(lsta, lsta & 0xF, _field(lsta, 4, 6), _bit(lsta, 11), _bit(lsta, 12), _bit(lsta, 13))
    cap = PciExpress(version, port_type, _bit(flags, 8), _field(flags, 9, 5), devcap, devctl, devsta,
                     lnkcap, lnkctl, lnksta)
    extra: dict[str, Any] = {}
    try:
        if cap.slot_implemented:
            extra["slot"] = (src.u32(off + 0x14), src.u16(off + 0x18), src.u16(off + 0x1A))
        if port_type in (4, 10):
            extra["root"] = (src.u16(off + 0x1C), src.u16(off + 0x1E), src.u32(off + 0x20))
        if version >= 2:
            extra["devcap2"], extra["devctl2"] = src.u32(off + 0x24), src.u16(off + 0x28)
            lc2, lctl2 = src.u32(off + 0x2C), src.u16(off + 0x30)
            extra["lnkcap2"] = LinkCap2(lc2, _field(lc2, 1, 7))
            extra["lnkctl2"] = LinkCtl2(lctl2, lctl2 & 0xF, _bit(lctl2, 4), _bit(lctl2, 5))
            extra["lnksta2"] = src.u16(off + 0x32)
    except Truncated as e:
        problems.append(f"0x{off:03x}: express capability v{version} cut short ({e})")
    return replace(cap, **extra)
