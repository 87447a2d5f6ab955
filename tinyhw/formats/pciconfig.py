"""PCI configuration space: header decoding, capability walks, BAR sizing arithmetic.

Spec: specs/pci-vfio-remote.md §3.1 (images of 64, 256 or 4096 bytes; short reads), §3.2
(common header), §3.3 (type-0 and type-1 layouts, bridge window encoding), §3.4 (COMMAND and
STATUS bits with lspci's labels), §3.5 (BAR encoding and sizing), §3.6 (capability list walk:
loops, ``<chain broken>``), §3.8 (extended capability walk and its guards). The capability
decoders themselves live in :mod:`tinyhw.formats.pcicaps`.

:func:`parse_config` never raises on malformed or truncated input: whatever could be decoded
is returned, and everything that was wrong is listed in ``PciConfig.problems`` as
``"0xOFF: what was found (what was expected)"``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from tinyhw.formats.pcicaps import (
    CAP_NAMES,
    EXT_CAP_NAMES,
    Bar,
    ConfigSource,
    ReadFn,
    ResizableBar,
    Truncated,
    decode_acs,
    decode_aer,
    decode_bars,
    decode_msi,
    decode_msix,
    decode_pm,
    decode_rebar,
    decode_sriov,
    flag_line,
    speed_name,
)
from tinyhw.formats.pciexpress import PciExpress, decode_pcie

__all__ = [
    "Bar", "BridgeWindow", "Capability", "CommonHeader", "ConfigSource", "ExpansionRom", "PciConfig",
    "Truncated", "Type0Header", "Type1Header", "bar_size_from_mask", "parse_config", "speed_name",
    "walk_capabilities", "walk_ext_capabilities",
]

CAP_PCIX, CAP_EXPRESS = 0x07, 0x10

# Header register offsets and bits (§3.2-§3.5), named for code that programs config space.
REG_ID = 0x00  # vendor id (low 16 bits), device id (high 16 bits)
REG_COMMAND = 0x04
REG_HEADER_TYPE = 0x0E  # bits 6:0 layout (0 endpoint, 1 PCI-PCI bridge), bit 7 multi-function
REG_BAR0 = 0x10  # six BARs on a type-0 header, two on a type-1
REG_BUS_NUMBERS = 0x18  # type 1: primary, secondary, subordinate bus, secondary latency timer
REG_MEMORY_BASE, REG_MEMORY_LIMIT = 0x20, 0x22  # type 1: non-prefetchable window, 1 MiB units (bits 15:4)
REG_PREF_BASE, REG_PREF_LIMIT = 0x24, 0x26  # type 1: prefetchable window, same encoding
REG_PREF_BASE_UPPER, REG_PREF_LIMIT_UPPER = 0x28, 0x2C  # type 1: bits 63:32 of the prefetchable window
HEADER_LAYOUT_BRIDGE = 1
COMMAND_IO, COMMAND_MEMORY, COMMAND_BUS_MASTER = 0x1, 0x2, 0x4
EXT_CAP_REBAR = 0x15

# -- common header (§3.2, §3.4) ------------------------------------------------------------------------------

_COMMAND_BITS = ("I/O", "Mem", "BusMaster", "SpecCycle", "MemWINV", "VGASnoop", "ParErr", "Stepping", "SERR",
                 "FastB2B", "DisINTx")
_DEVSEL = ("fast", "medium", "slow", "??")


@dataclass(frozen=True)
class CommonHeader:
    """Offsets 0x00-0x0f, the same for every header type."""

    vendor_id: int
    device_id: int
    command: int
    status: int
    revision: int
    prog_if: int
    subclass: int
    base_class: int
    cache_line_size: int  # in dwords
    latency_timer: int
    header_type: int  # layout, bits 6:0 (0 endpoint, 1 PCI-PCI bridge, 2 CardBus)
    multifunction: bool
    bist: int

    @property
    def class_code(self) -> int:
        """24-bit class code: base << 16 | subclass << 8 | prog-if (as sysfs ``class``)."""
        return self.base_class << 16 | self.subclass << 8 | self.prog_if

    @property
    def has_capabilities(self) -> bool:
        """True when the Status register says a capability list is present (bit 4)."""
        return bool(self.status & 0x10)

    @property
    def control_line(self) -> str:
        """COMMAND as lspci -vv prints it after ``Control:``."""
        return flag_line([(n, bool(self.command >> i & 1)) for i, n in enumerate(_COMMAND_BITS)])

    @property
    def status_line(self) -> str:
        """STATUS as lspci -vv prints it after ``Status:``."""
        s = self.status
        head = flag_line([("Cap", bool(s & 0x10)), ("66MHz", bool(s & 0x20)), ("UDF", bool(s & 0x40)),
                          ("FastB2B", bool(s & 0x80)), ("ParErr", bool(s & 0x100))])
        tail = flag_line([(">TAbort", bool(s & 0x800)), ("<TAbort", bool(s & 0x1000)), ("<MAbort", bool(s & 0x2000)),
                          (">SERR", bool(s & 0x4000)), ("<PERR", bool(s & 0x8000)), ("INTx", bool(s & 0x8))])
        return f"{head} DEVSEL={_DEVSEL[s >> 9 & 3]} {tail}"


def _common(src: ConfigSource) -> CommonHeader:
    ht = src.u8(0x0E)
    return CommonHeader(src.u16(0), src.u16(2), src.u16(4), src.u16(6), src.u8(8), src.u8(9), src.u8(0xA),
                        src.u8(0xB), src.u8(0xC), src.u8(0xD), ht & 0x7F, bool(ht & 0x80), src.u8(0xF))


# -- type-specific headers (§3.3) -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExpansionRom:
    """The expansion ROM base address register: raw value, address (bits 31:11), enable bit."""
    raw: int
    address: int  # bits 31:11
    enabled: bool  # bit 0


def _rom(raw: int) -> ExpansionRom:
    return ExpansionRom(raw, raw & 0xFFFFF800, bool(raw & 1))


@dataclass(frozen=True)
class Type0Header:
    """An endpoint's header (layout 0)."""

    bars: tuple[Bar, ...]
    cardbus_cis: int
    subsystem_vendor_id: int
    subsystem_id: int
    rom: ExpansionRom
    cap_pointer: int
    interrupt_line: int
    interrupt_pin: int  # 0 none, 1-4 INTA-INTD
    min_gnt: int
    max_lat: int


@dataclass(frozen=True)
class BridgeWindow:
    """A bridge forwarding window; empty (disabled) when base > limit."""

    kind: str  # "io", "memory" or "prefetchable"
    base: int
    limit: int  # inclusive
    wide: bool  # 32-bit I/O or 64-bit prefetchable decoding

    @property
    def enabled(self) -> bool:
        """True when the window is open (base <= limit)."""
        return self.base <= self.limit

    @property
    def size(self) -> int:
        """Bytes the window spans, 0 when it is closed."""
        return self.limit - self.base + 1 if self.enabled else 0


@dataclass(frozen=True)
class Type1Header:
    """A PCI-to-PCI bridge's header (layout 1)."""

    bars: tuple[Bar, ...]
    primary_bus: int
    secondary_bus: int
    subordinate_bus: int
    secondary_latency: int
    io_window: BridgeWindow
    memory_window: BridgeWindow
    prefetchable_window: BridgeWindow
    secondary_status: int
    cap_pointer: int
    rom: ExpansionRom
    interrupt_line: int
    interrupt_pin: int
    bridge_control: int

    @property
    def secondary_bus_reset(self) -> bool:
        """True when Bridge Control asserts Secondary Bus Reset (bit 6)."""
        return bool(self.bridge_control & 0x40)

    @property
    def vga_enable(self) -> bool:
        """True when Bridge Control forwards VGA accesses (bit 3)."""
        return bool(self.bridge_control & 0x08)


def _type0(src: ConfigSource, problems: list[str]) -> Type0Header:
    bars = tuple(decode_bars(src, 0x10, 6, problems))
    return Type0Header(bars, src.u32(0x28), src.u16(0x2C), src.u16(0x2E), _rom(src.u32(0x30)), src.u8(0x34),
                       src.u8(0x3C), src.u8(0x3D), src.u8(0x3E), src.u8(0x3F))


def _type1(src: ConfigSource, problems: list[str]) -> Type1Header:
    bars = tuple(decode_bars(src, 0x10, 2, problems))
    io_b, io_l = src.u8(0x1C), src.u8(0x1D)
    io_wide = (io_b & 0xF) == 1
    if (io_b & 0xF) != (io_l & 0xF) or (io_b & 0xF) > 1:
        problems.append(f"0x01c: i/o window types {io_b & 0xF:x}/{io_l & 0xF:x} (expected 0/0 or 1/1)")
    io_base, io_limit = (io_b & 0xF0) << 8, (io_l & 0xF0) << 8 | 0xFFF
    if io_wide:
        io_base |= src.u16(0x30) << 16
        io_limit |= src.u16(0x32) << 16
    m_b, m_l = src.u16(0x20), src.u16(0x22)
    if (m_b | m_l) & 0xF:
        problems.append(f"0x020: memory window types {m_b & 0xF:x}/{m_l & 0xF:x} (expected 0/0)")
    p_b, p_l = src.u16(0x24), src.u16(0x26)
    p_wide = (p_b & 0xF) == 1
    if (p_b & 0xF) != (p_l & 0xF) or (p_b & 0xF) > 1:
        problems.append(f"0x024: prefetchable window types {p_b & 0xF:x}/{p_l & 0xF:x} (expected 0/0 or 1/1)")
    p_base, p_limit = (p_b & 0xFFF0) << 16, (p_l & 0xFFF0) << 16 | 0xFFFFF
    if p_wide:
        p_base |= src.u32(0x28) << 32
        p_limit |= src.u32(0x2C) << 32
    return Type1Header(
        bars, src.u8(0x18), src.u8(0x19), src.u8(0x1A), src.u8(0x1B),
        BridgeWindow("io", io_base, io_limit, io_wide),
        BridgeWindow("memory", (m_b & 0xFFF0) << 16, (m_l & 0xFFF0) << 16 | 0xFFFFF, False),
        BridgeWindow("prefetchable", p_base, p_limit, p_wide),
        src.u16(0x1E), src.u8(0x34), _rom(src.u32(0x38)), src.u8(0x3C), src.u8(0x3D), src.u16(0x3E),
    )


# -- capabilities (§3.6, §3.8) ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Capability:
    """One entry of the conventional (``extended=False``) or extended capability list."""

    offset: int
    id: int
    next: int  # next pointer as found (low bits masked)
    extended: bool
    version: int = 0  # extended capabilities only
    flags: int = 0  # conventional: the 16-bit word at +2
    data: Any = None  # decoded dataclass, or None where no decoder exists or it failed

    @property
    def name(self) -> str:
        """The capability's name as lspci prints it, or its id in hex."""
        names = EXT_CAP_NAMES if self.extended else CAP_NAMES
        return names.get(self.id, f"Capability ID 0x{self.id:02x}")


_Decoder = Callable[[ConfigSource, int, list[str]], Any]
_CAP_DECODERS: dict[int, _Decoder] = {0x01: decode_pm, 0x05: decode_msi, 0x10: decode_pcie, 0x11: decode_msix}


def _decode(decoder: _Decoder | None, src: ConfigSource, off: int, problems: list[str], what: str) -> Any:
    if decoder is None:
        return None
    try:
        return decoder(src, off, problems)
    except Truncated as e:
        problems.append(f"0x{off:03x}: {what} capability cut short ({e})")
        return None


def walk_capabilities(src: ConfigSource, pointer: int, problems: list[str]) -> list[Capability]:
    """Follow the conventional list from ``pointer``; stops (with a problem) on loops, id 0xff, bad pointers."""
    src = src.limited(0x100)
    caps: list[Capability] = []
    seen: set[int] = set()
    where = pointer & 0xFC
    while where:
        if where < 0x40:
            problems.append(f"0x{where:03x}: capability pointer into the header (expected 0x40..0xfc)")
            break
        if where in seen:
            problems.append(f"0x{where:03x}: capability chain looped")
            break
        seen.add(where)
        try:
            head = src.u32(where)
        except Truncated:
            problems.append(f"0x{where:03x}: capability not readable (config space ends at 0x{src.length:x})")
            break
        cap_id, nxt = head & 0xFF, (head >> 8) & 0xFC
        if cap_id == 0xFF:
            problems.append(f"0x{where:03x}: capability chain broken (id 0xff)")
            break
        data = _decode(_CAP_DECODERS.get(cap_id), src, where, problems, CAP_NAMES.get(cap_id, "unknown"))
        caps.append(Capability(where, cap_id, nxt, False, 0, head >> 16, data))
        where = nxt
    return caps


def _ext_decoder(cap_id: int, root: bool) -> _Decoder | None:
    if cap_id == 0x01:
        return lambda s, o, p: decode_aer(s, o, p, root=root)
    if cap_id in (0x15, 0x24):
        return lambda s, o, p: decode_rebar(s, o, p, virtual=cap_id == 0x24)
    return {0x0D: decode_acs, 0x10: decode_sriov}.get(cap_id)


def walk_ext_capabilities(src: ConfigSource, problems: list[str], root: bool = False,
                          decode: bool = True) -> list[Capability]:
    """Follow the extended list from 0x100; guards against loops, offsets < 0x100 and empty headers."""
    return list(iter_ext_capabilities(src, problems, root, decode))


def iter_ext_capabilities(src: ConfigSource, problems: list[str], root: bool = False,
                          decode: bool = True) -> Iterator[Capability]:
    """:func:`walk_ext_capabilities` one capability at a time: a caller looking for one capability over a
    slow transport stops reading where it finds it. ``decode=False`` reads only the capability headers
    (``data`` stays None)."""
    seen: set[int] = set()
    where = 0x100
    while where:
        if where in seen:
            problems.append(f"0x{where:03x}: extended capability chain looped")
            break
        seen.add(where)
        try:
            head = src.u32(where)
        except Truncated:
            problems.append(f"0x{where:03x}: extended capability not readable (config space ends at 0x{src.length:x})")
            break
        if head in (0, 0xFFFFFFFF):
            if where != 0x100:
                problems.append(f"0x{where:03x}: extended capability header 0x{head:08x} (expected a capability)")
            break
        cap_id, version, nxt = head & 0xFFFF, (head >> 16) & 0xF, (head >> 20) & 0xFFC
        name = EXT_CAP_NAMES.get(cap_id, "unknown")
        decoder = _ext_decoder(cap_id, root) if decode else None
        yield Capability(where, cap_id, nxt, True, version, 0, _decode(decoder, src, where, problems, name))
        if nxt and nxt < 0x100:
            problems.append(f"0x{where:03x}: extended capability next pointer 0x{nxt:03x} (expected >= 0x100)")
            break
        where = nxt


# -- the whole image -----------------------------------------------------------------------------------------------


@dataclass
class PciConfig:
    """A decoded config-space image; ``problems`` lists everything malformed or missing."""

    length: int  # readable bytes
    header: CommonHeader | None = None
    type0: Type0Header | None = None
    type1: Type1Header | None = None
    capabilities: list[Capability] = field(default_factory=list)
    ext_capabilities: list[Capability] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def bars(self) -> tuple[Bar, ...]:
        """The BARs of the type 0 or type 1 header (empty when neither decoded)."""
        hdr = self.type0 or self.type1
        return hdr.bars if hdr else ()

    def cap(self, cap_id: int) -> Capability | None:
        """The first conventional capability with ``cap_id``."""
        return next((c for c in self.capabilities if c.id == cap_id), None)

    def ext_cap(self, cap_id: int) -> Capability | None:
        """The first extended capability with ``cap_id``."""
        return next((c for c in self.ext_capabilities if c.id == cap_id), None)

    @property
    def express(self) -> PciExpress | None:
        """The decoded PCI Express capability, or None."""
        cap = self.cap(CAP_EXPRESS)
        return cap.data if cap and isinstance(cap.data, PciExpress) else None

    @property
    def resizable_bar(self) -> ResizableBar | None:
        """The decoded Resizable BAR extended capability, or None."""
        cap = self.ext_cap(0x15)
        return cap.data if cap and isinstance(cap.data, ResizableBar) else None


def parse_config(data: bytes | bytearray | memoryview | ReadFn, length: int | None = None) -> PciConfig:
    """Decode a config-space image (bytes, or a ``read(offset, n)`` callable read lazily).

    Extended capabilities are walked only when the image reaches past 0x100 and the function
    has a PCI Express or PCI-X capability, as lspci does (§3.8). Malformed or short input only
    adds problems; an exception raised by the ``read`` callable itself (a transport error) is
    not swallowed.
    """
    src = ConfigSource(data, length)
    cfg = PciConfig(length=src.length)
    problems = cfg.problems
    try:
        cfg.header = hdr = _common(src)
    except Truncated:
        problems.append(f"0x000: common header needs 0x10 bytes, only 0x{src.length:x} readable")
        cfg.length = src.length
        return cfg
    if hdr.vendor_id == 0xFFFF:
        problems.append("0x000: vendor id 0xffff (no function answers; device gone or link down)")
        return cfg
    pointer = None
    try:
        if hdr.header_type == 0:
            cfg.type0 = _type0(src, problems)
            pointer = cfg.type0.cap_pointer
        elif hdr.header_type == 1:
            cfg.type1 = _type1(src, problems)
            pointer = cfg.type1.cap_pointer
        elif hdr.header_type == 2:
            pointer = src.u8(0x14)
        else:
            problems.append(f"0x00e: header layout {hdr.header_type} (expected 0, 1 or 2)")
    except Truncated as e:
        problems.append(f"0x010: type-{hdr.header_type} header cut short ({e})")
    if pointer is not None and hdr.has_capabilities:
        cfg.capabilities = walk_capabilities(src, pointer, problems)
    if src.length > 0x100 and (cfg.cap(CAP_EXPRESS) is not None or cfg.cap(CAP_PCIX) is not None):
        express = cfg.express
        root = express is not None and express.port_type in (4, 10)
        cfg.ext_capabilities = walk_ext_capabilities(src, problems, root=root)
    cfg.length = src.length
    return cfg


# -- BAR sizing (§3.5) ------------------------------------------------------------------------------------------------


def bar_size_from_mask(low_readback: int, high_readback: int | None, is_io: bool) -> int:
    """Size in bytes of a BAR from what it read back after all ones were written to it.

    ``high_readback`` is the upper register of a 64-bit memory BAR (None otherwise). The flag
    bits are masked off and the size is the lowest set address bit, which equals the two's
    complement of the mask for a well-formed BAR and also copes with 16-bit I/O BARs whose
    upper half reads back 0. A readback of 0 means the BAR is not implemented (size 0).
    """
    if is_io:
        if high_readback is not None:
            raise ValueError("an i/o bar has no upper half")
        mask = low_readback & 0xFFFFFFFC
    else:
        mask = low_readback & 0xFFFFFFF0
        if high_readback is not None:
            mask |= (high_readback & 0xFFFFFFFF) << 32
    return mask & -mask
