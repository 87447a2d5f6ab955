"""PCI capability decoders and the bounded config-space reader they share.

Spec: specs/pci-vfio-remote.md §3.1 (little-endian, short reads at the end), §3.5 (BAR
encoding, used by SR-IOV VF BARs too), §3.6 (MSI, MSI-X; capability ids), §3.7 (PCI
Express capability), §3.8 (extended capability ids), §3.9 (Resizable BAR), §3.10 (AER),
§3.11 (SR-IOV), §3.12 (ACS), §4.4 (lspci's labels for speeds, sizes and flags).
Power Management register layout (PMC at +2, PMCSR at +4) is the PCI PM spec's, not in §3.

Decoders read through :class:`ConfigSource` and raise :class:`Truncated` when a register
lies beyond what could be read; :mod:`tinyhw.formats.pciconfig` turns that into a problem
line, so a malformed or short image never crashes the parser.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

ReadFn = Callable[[int, int], bytes]
CONFIG_MAX = 4096

# -- the reader ---------------------------------------------------------------------------------------


class Truncated(Exception):
    """A register at ``offset`` (``width`` bytes) lies beyond the readable part of config space."""

    def __init__(self, offset: int, width: int, limit: int) -> None:
        super().__init__(f"0x{offset:03x}: {width}-byte register beyond the readable 0x{limit:x} bytes")
        self.offset = offset
        self.width = width
        self.limit = limit


class ConfigSource:
    """Little-endian access to a config-space image, from bytes or a ``read(offset, n)`` callable.

    A callable is read lazily one aligned dword at a time and cached, so parsing over a slow
    transport (the USB bridge) touches only the header and the capabilities actually walked.
    A short read from the callable marks the end of what is readable (non-root sysfs reads
    stop at 64 bytes, §2.7). ``length`` caps the readable size (default: the data, or 4096).
    """

    def __init__(self, data: bytes | bytearray | memoryview | ReadFn, length: int | None = None) -> None:
        self._read: ReadFn | None = None
        self._cache: dict[int, bytes] = {}
        if callable(data):
            self._read = data
            self._buf = b""
            limit = CONFIG_MAX if length is None else max(0, min(length, CONFIG_MAX))
        else:
            self._buf = bytes(data[:CONFIG_MAX])
            limit = len(self._buf) if length is None else max(0, min(length, len(self._buf)))
        self._cap = limit
        self._end = [limit]  # shared with limited() views; shrinks when the callable reads short

    @property
    def length(self) -> int:
        """Bytes known to be readable (a short read from the callable lowers it)."""
        return min(self._cap, self._end[0])

    def limited(self, length: int) -> ConfigSource:
        """A view of the same data, cache and end, readable only below ``length`` (conventional caps: 256)."""
        view = ConfigSource(b"")
        view._read, view._cache, view._buf, view._end = self._read, self._cache, self._buf, self._end
        view._cap = min(self._cap, length)
        return view

    def _dword(self, aligned: int) -> bytes | None:
        if aligned + 4 > self.length:
            return None
        if self._read is None:
            return self._buf[aligned : aligned + 4]
        got = self._cache.get(aligned)
        if got is None:
            got = bytes(self._read(aligned, 4))[:4]
            if len(got) < 4:  # the device (or the file) ends here
                self._end[0] = min(self._end[0], aligned)
                return None
            self._cache[aligned] = got
        return got

    def has(self, offset: int, n: int) -> bool:
        """True if ``n`` bytes at ``offset`` can be read."""
        try:
            self.read(offset, n)
        except Truncated:
            return False
        return True

    def read(self, offset: int, n: int) -> bytes:
        """``n`` bytes at ``offset``; :class:`Truncated` if any of them is unreadable."""
        if offset < 0 or n < 0 or offset + n > self.length:
            raise Truncated(offset, n, self.length)
        out = bytearray()
        first = offset & ~3
        for aligned in range(first, offset + n, 4):
            dword = self._dword(aligned)
            if dword is None:
                raise Truncated(offset, n, self.length)
            out += dword
        start = offset - first
        return bytes(out[start : start + n])

    def u8(self, offset: int) -> int:
        """The config-space byte at ``offset``."""
        return self.read(offset, 1)[0]

    def u16(self, offset: int) -> int:
        """The little-endian 16-bit config-space value at ``offset``."""
        return int.from_bytes(self.read(offset, 2), "little")

    def u32(self, offset: int) -> int:
        """The little-endian 32-bit config-space value at ``offset``."""
        return int.from_bytes(self.read(offset, 4), "little")


def _bit(value: int, n: int) -> bool:
    return bool((value >> n) & 1)


def _field(value: int, lo: int, width: int) -> int:
    return (value >> lo) & ((1 << width) - 1)


def flag_line(pairs: list[tuple[str, bool]]) -> str:
    """lspci's ``Name+ Other-`` notation for a list of flags."""
    return " ".join(f"{name}{'+' if on else '-'}" for name, on in pairs)


# -- BARs (§3.5) -------------------------------------------------------------------------------------------

_MEM_TYPE_LABEL = ("32-bit", "low-1M", "64-bit", "type 3")


@dataclass(frozen=True)
class Bar:
    """One BAR register (pair) decoded from config space; 64-bit BARs consume two slots."""

    index: int
    offset: int  # config-space offset of the (low) register
    raw: int  # low dword as read
    raw_high: int | None  # upper dword of a 64-bit BAR
    kind: str  # "memory" or "io"
    is_64bit: bool
    prefetchable: bool
    low_1m: bool  # memory type 01: legacy below-1 MiB BAR
    mem_type: int  # bits 2:1 of a memory BAR (0 for I/O)
    address: int

    @property
    def type_label(self) -> str:
        """``32-bit``/``64-bit``/``low-1M``/``type 3`` as lspci prints it (memory BARs)."""
        return _MEM_TYPE_LABEL[self.mem_type]


def decode_bars(src: ConfigSource, base: int, count: int, problems: list[str]) -> list[Bar]:
    """Decode ``count`` BAR slots starting at ``base``; the upper half of a 64-bit BAR is no BAR."""
    bars: list[Bar] = []
    i = 0
    while i < count:
        off = base + 4 * i
        try:
            raw = src.u32(off)
        except Truncated as e:
            problems.append(f"0x{off:03x}: bar{i} not readable (config space ends at 0x{e.limit:x})")
            break
        if raw & 1:
            bars.append(Bar(i, off, raw, None, "io", False, False, False, 0, raw & 0xFFFFFFFC))
            i += 1
            continue
        mem_type = (raw >> 1) & 3
        address = raw & 0xFFFFFFF0
        high: int | None = None
        if mem_type == 2:
            if i + 1 >= count:
                problems.append(f"0x{off:03x}: bar{i} is 64-bit but has no upper slot (expected a 32-bit bar)")
            else:
                try:
                    high = src.u32(off + 4)
                except Truncated as e:
                    problems.append(f"0x{off + 4:03x}: upper half of bar{i} beyond 0x{e.limit:x}")
                if high is not None:
                    address |= high << 32
        bars.append(Bar(i, off, raw, high, "memory", mem_type == 2, bool(raw & 8), mem_type == 1, mem_type, address))
        i += 2 if mem_type == 2 else 1
    return bars


# -- names --------------------------------------------------------------------------------------------

CAP_NAMES: dict[int, str] = {
    0x01: "Power Management", 0x02: "AGP", 0x03: "Vital Product Data", 0x04: "Slot ID", 0x05: "MSI",
    0x06: "CompactPCI hot-swap", 0x07: "PCI-X", 0x08: "HyperTransport", 0x09: "Vendor Specific Information",
    0x0A: "Debug port", 0x0B: "CompactPCI central resource control", 0x0C: "PCI Hot-plug",
    0x0D: "Subsystem", 0x0E: "AGP3", 0x0F: "Secure device", 0x10: "Express", 0x11: "MSI-X",
    0x12: "SATA HBA", 0x13: "PCI Advanced Features", 0x14: "Enhanced Allocation",
}

EXT_CAP_NAMES: dict[int, str] = {
    0x01: "Advanced Error Reporting", 0x02: "Virtual Channel", 0x03: "Device Serial Number",
    0x04: "Power Budgeting", 0x05: "Root Complex Link", 0x06: "Root Complex Internal Link",
    0x07: "Root Complex Event Collector", 0x08: "Multi-Function Virtual Channel", 0x09: "Virtual Channel",
    0x0A: "Root Complex Register Block", 0x0B: "Vendor Specific Information",
    0x0C: "Configuration Access Correlation", 0x0D: "Access Control Services",
    0x0E: "Alternative Routing-ID Interpretation (ARI)", 0x0F: "Address Translation Service (ATS)",
    0x10: "Single Root I/O Virtualization (SR-IOV)", 0x11: "Multi-Root I/O Virtualization (MR-IOV)",
    0x12: "Multicast", 0x13: "Page Request Interface (PRI)", 0x14: "Reserved for AMD",
    0x15: "Physical Resizable BAR", 0x16: "Dynamic Power Allocation", 0x17: "TPH Requester",
    0x18: "Latency Tolerance Reporting", 0x19: "Secondary PCI Express", 0x1A: "Protocol Multiplexing",
    0x1B: "Process Address Space ID (PASID)", 0x1D: "Downstream Port Containment",
    0x1E: "L1 PM Substates", 0x1F: "Precision Time Measurement", 0x23: "Designated Vendor-Specific",
    0x24: "Virtual Resizable BAR", 0x25: "Data Link Feature", 0x26: "Physical Layer 16.0 GT/s",
    0x29: "Native PCIe Enclosure Management", 0x2A: "Physical Layer 32.0 GT/s",
    0x2E: "Data Object Exchange", 0x31: "Physical Layer 64.0 GT/s",
}

_SPEEDS = {1: "2.5GT/s", 2: "5GT/s", 3: "8GT/s", 4: "16GT/s", 5: "32GT/s", 6: "64GT/s"}


def speed_name(code: int) -> str:
    """PCIe speed code (§3.7: 1 = 2.5 GT/s ... 6 = 64 GT/s) as lspci prints it; ``unknown`` otherwise."""
    return _SPEEDS.get(code, "unknown")


def size_label(size: int) -> str:
    """A Resizable BAR size as lspci prints it: ``1MB``...``512MB``, ``1GB``, ``1TB``, ``PB``, ``EB``."""
    for unit in ("MB", "GB", "TB", "PB"):
        if size < (1 << 30) or size % (1 << 30):
            return f"{size >> 20}{unit}"
        size >>= 10
    return f"{size >> 20}EB"


# -- Power Management (0x01) --------------------------------------------------------------------------------


@dataclass(frozen=True)
class PowerManagement:
    """PM capability: supported states and the current one (PMC at +2, PMCSR at +4)."""

    version: int
    pme_clock: bool
    dsi: bool
    aux_current: int  # 3-bit encoding
    d1: bool
    d2: bool
    pme_support: int  # bit i: PME# from D0, D1, D2, D3hot, D3cold
    power_state: int  # 0..3 = D0..D3hot
    no_soft_reset: bool
    pme_enable: bool
    pme_status: bool

    @property
    def state_name(self) -> str:
        """The current power state's name (``D0`` .. ``D3hot``)."""
        return ("D0", "D1", "D2", "D3hot")[self.power_state]


def decode_pm(src: ConfigSource, off: int, problems: list[str]) -> PowerManagement:
    """Decode the power-management capability at ``off``."""
    pmc, csr = src.u16(off + 2), src.u16(off + 4)
    return PowerManagement(
        version=pmc & 7, pme_clock=_bit(pmc, 3), dsi=_bit(pmc, 5), aux_current=_field(pmc, 6, 3),
        d1=_bit(pmc, 9), d2=_bit(pmc, 10), pme_support=_field(pmc, 11, 5), power_state=csr & 3,
        no_soft_reset=_bit(csr, 3), pme_enable=_bit(csr, 8), pme_status=_bit(csr, 15),
    )


# -- MSI (0x05) and MSI-X (0x11), §3.6 ------------------------------------------------------------------------


@dataclass(frozen=True)
class Msi:
    """MSI capability: vector counts are numbers of vectors (1 << log2 field)."""

    enabled: bool
    vectors_capable: int
    vectors_enabled: int
    is_64bit: bool
    per_vector_masking: bool
    address: int
    data: int
    mask: int | None
    pending: int | None

    @property
    def summary(self) -> str:
        """``Enable+ Count=1/1 Maskable- 64bit+`` as lspci prints it."""
        return (f"Enable{'+' if self.enabled else '-'} Count={self.vectors_enabled}/{self.vectors_capable} "
                f"Maskable{'+' if self.per_vector_masking else '-'} 64bit{'+' if self.is_64bit else '-'}")


def decode_msi(src: ConfigSource, off: int, problems: list[str]) -> Msi:
    """Decode the MSI capability at ``off`` (32- or 64-bit address, with or without masking)."""
    ctl = src.u16(off + 2)
    is64, masking = _bit(ctl, 7), _bit(ctl, 8)
    address = src.u32(off + 4)
    data_off = off + 8
    if is64:
        address |= src.u32(off + 8) << 32
        data_off = off + 0xC
    data = src.u16(data_off)
    mask = pending = None
    if masking:
        mask, pending = src.u32(data_off + 4), src.u32(data_off + 8)
    return Msi(
        enabled=_bit(ctl, 0), vectors_capable=1 << _field(ctl, 1, 3), vectors_enabled=1 << _field(ctl, 4, 3),
        is_64bit=is64, per_vector_masking=masking, address=address, data=data, mask=mask, pending=pending,
    )


@dataclass(frozen=True)
class MsiX:
    """MSI-X capability: table size is the vector count (field + 1)."""

    enabled: bool
    function_mask: bool
    table_size: int
    table_bir: int
    table_offset: int
    pba_bir: int
    pba_offset: int


def decode_msix(src: ConfigSource, off: int, problems: list[str]) -> MsiX:
    """Decode the MSI-X capability at ``off``: table size, table and PBA location."""
    ctl, table, pba = src.u16(off + 2), src.u32(off + 4), src.u32(off + 8)
    return MsiX(
        enabled=_bit(ctl, 15), function_mask=_bit(ctl, 14), table_size=(ctl & 0x7FF) + 1,
        table_bir=table & 7, table_offset=table & ~7 & 0xFFFFFFFF, pba_bir=pba & 7, pba_offset=pba & ~7 & 0xFFFFFFFF,
    )


# -- Resizable BAR (0x15 physical, 0x24 virtual), §3.9 ----------------------------------------------------------


@dataclass(frozen=True)
class RebarEntry:
    """One Resizable BAR entry: which BAR, the sizes it supports and its current size, in bytes."""

    bar: int
    supported_sizes: tuple[int, ...]
    current_size: int
    raw_cap: int
    raw_ctrl: int

    @property
    def summary(self) -> str:
        """``BAR 0: current size: 256MB, supported: 256MB 512MB ...`` as lspci -vv prints it."""
        sizes = " ".join(size_label(s) for s in self.supported_sizes)
        return f"BAR {self.bar}: current size: {size_label(self.current_size)}, supported: {sizes}"


@dataclass(frozen=True)
class ResizableBar:
    """The (virtual) Resizable BAR extended capability: one entry per resizable BAR."""
    virtual: bool
    entries: tuple[RebarEntry, ...]


def decode_rebar(src: ConfigSource, off: int, problems: list[str], virtual: bool = False) -> ResizableBar:
    """Decode the Resizable BAR capability at ``off`` (problems noted for a bad BAR count)."""
    ctrl0 = src.u32(off + 8)
    nbars = _field(ctrl0, 5, 3)
    if not 1 <= nbars <= 6:
        problems.append(f"0x{off + 8:03x}: resizable bar count {nbars} (expected 1..6); decoding entry 0 only")
        nbars = 1
    entries = []
    for i in range(nbars):
        try:
            cap, ctrl = src.u32(off + 4 + 8 * i), src.u32(off + 8 + 8 * i)
        except Truncated as e:
            problems.append(f"0x{off + 4 + 8 * i:03x}: resizable bar entry {i} beyond 0x{e.limit:x}")
            break
        sizes = [1 << (k + 20) for k in range(28) if _bit(cap, k + 4)]
        sizes += [1 << (28 + j + 20) for j in range(16) if _bit(ctrl, 16 + j)]
        entries.append(RebarEntry(ctrl & 7, tuple(sizes), 1 << (_field(ctrl, 8, 6) + 20), cap, ctrl))
    return ResizableBar(virtual, tuple(entries))


# -- AER (0x01), §3.10 ----------------------------------------------------------------------------------------

UNCORRECTABLE_BITS = ((4, "DLP"), (5, "SDES"), (12, "TLP"), (13, "FCP"), (14, "CmpltTO"), (15, "CmpltAbrt"),
                      (16, "UnxCmplt"), (17, "RxOF"), (18, "MalfTLP"), (19, "ECRC"), (20, "UnsupReq"),
                      (21, "ACSViol"))
CORRECTABLE_BITS = ((0, "RxErr"), (6, "BadTLP"), (7, "BadDLLP"), (8, "Rollover"), (12, "Timeout"),
                    (13, "AdvNonFatalErr"), (14, "CorrIntErr"), (15, "HeaderOF"))


@dataclass(frozen=True)
class Aer:
    """Advanced Error Reporting registers; root registers only for root ports and event collectors."""

    uncorrectable_status: int
    uncorrectable_mask: int
    uncorrectable_severity: int
    correctable_status: int
    correctable_mask: int
    cap_control: int
    header_log: tuple[int, int, int, int]
    root_command: int | None = None
    root_status: int | None = None
    error_source: int | None = None

    @property
    def first_error_pointer(self) -> int:
        """The First Error Pointer (AER capabilities and control, bits 4:0)."""
        return self.cap_control & 0x1F

    @property
    def uncorrectable_errors(self) -> list[str]:
        """lspci labels of the uncorrectable errors whose status bits are set."""
        return [n for b, n in UNCORRECTABLE_BITS if _bit(self.uncorrectable_status, b)]

    @property
    def correctable_errors(self) -> list[str]:
        """Names of the correctable errors whose status bits are set."""
        return [n for b, n in CORRECTABLE_BITS if _bit(self.correctable_status, b)]

    @property
    def correctable_line(self) -> str:
        """``RxErr- BadTLP- ... AdvNonFatalErr+``: the six flags lspci 3.9.0 prints after ``CESta:``."""
        return flag_line([(n, _bit(self.correctable_status, b)) for b, n in CORRECTABLE_BITS[:6]])


def decode_aer(src: ConfigSource, off: int, problems: list[str], root: bool = False) -> Aer:
    """Decode the Advanced Error Reporting capability at ``off`` (root-port registers when ``root``)."""
    r = [src.u32(off + 4 * i) for i in range(1, 11)]
    aer = Aer(r[0], r[1], r[2], r[3], r[4], r[5], (r[6], r[7], r[8], r[9]))
    if root:
        aer = replace(aer, root_command=src.u32(off + 0x2C), root_status=src.u32(off + 0x30),
                      error_source=src.u32(off + 0x34))
    return aer


# -- SR-IOV (0x10), §3.11 -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SrIov:
    """SR-IOV capability: VF counts, routing (offset/stride), VF device id and VF BARs."""

    capabilities: int
    control: int
    status: int
    initial_vfs: int
    total_vfs: int
    num_vfs: int
    function_dependency_link: int
    vf_offset: int
    vf_stride: int
    vf_device_id: int
    supported_page_sizes: int
    system_page_size: int
    vf_bars: tuple[Bar, ...]

    @property
    def vf_enabled(self) -> bool:
        """True when VF Enable is set in SR-IOV Control."""
        return _bit(self.control, 0)

    @property
    def vf_memory_enabled(self) -> bool:
        """True when VF Memory Space Enable is set in SR-IOV Control."""
        return _bit(self.control, 3)

    @property
    def ari_hierarchy(self) -> bool:
        """True when ARI Capable Hierarchy is set in SR-IOV Control."""
        return _bit(self.control, 4)

    def vf_routing_id(self, pf_rid: int, n: int) -> int:
        """Routing id of VF ``n`` (1-based): PF RID + offset + (n - 1) * stride (16 bits)."""
        return (pf_rid + self.vf_offset + (n - 1) * self.vf_stride) & 0xFFFF


def decode_sriov(src: ConfigSource, off: int, problems: list[str]) -> SrIov:
    """Decode the SR-IOV capability at ``off``: counts, offset/stride, device id and VF BARs."""
    head = (src.u32(off + 4), src.u16(off + 8), src.u16(off + 0xA), src.u16(off + 0xC), src.u16(off + 0xE),
            src.u16(off + 0x10), src.u8(off + 0x12), src.u16(off + 0x14), src.u16(off + 0x16), src.u16(off + 0x1A),
            src.u32(off + 0x1C), src.u32(off + 0x20))
    vf_bars = tuple(decode_bars(src, off + 0x24, 6, problems))
    return SrIov(*head, vf_bars)


# -- ACS (0x0d), §3.12 --------------------------------------------------------------------------------------------

ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")


@dataclass(frozen=True)
class Acs:
    """Access Control Services: capability and control share bit positions."""

    capability: int
    control: int

    @property
    def egress_vector_size(self) -> int:
        """The ACS egress control vector size (capability bits 15:8)."""
        return self.capability >> 8

    def supported(self, name: str) -> bool:
        """True when the ACS feature ``name`` (one of ``ACS_BITS``) is supported."""
        return _bit(self.capability, ACS_BITS.index(name))

    def enabled(self, name: str) -> bool:
        """True when the ACS feature ``name`` (one of ``ACS_BITS``) is enabled."""
        return _bit(self.control, ACS_BITS.index(name))

    @property
    def capability_line(self) -> str:
        """``SrcValid+ TransBlk+ ...`` (lspci's ``ACSCap:``)."""
        return flag_line([(n, _bit(self.capability, i)) for i, n in enumerate(ACS_BITS)])


def decode_acs(src: ConfigSource, off: int, problems: list[str]) -> Acs:
    """Decode the Access Control Services capability at ``off``."""
    return Acs(src.u16(off + 4), src.u16(off + 6))
