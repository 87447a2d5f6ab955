"""A generic type-0 PCIe endpoint's configuration space, data-driven from a :class:`BoardSpec`.

Implements specs/pci-vfio-remote.md §3 (3.2 common header, 3.3 type-0 layout, 3.4 command and
status bits incl. RW1C, 3.5 BAR flag bits and all-ones sizing incl. the upper dword of a 64-bit
BAR, 3.6 capability list, 3.7 PCI Express capability, 3.8 extended capability walk, 3.9 Resizable
BAR whose size field really resizes the BAR, 3.10 AER, 3.12 ACS) with the capability layout of the
Navi31 example of §3.14 (PM 0x50 -> PCIe v2 0x64 -> MSI 0xA0; AER 0x100 -> ReBAR 0x200 -> ACS 0x240),
or the board's own layout where its description gives one (:class:`tinyhw.boards.spec.ConfigLayout`: its
capability bytes read-only, COMMAND, the BARs and the ReBAR control writable), and specs/asm24-usb-bridge.md §12
(command-register memory-decode gating).

Each dword has a value, a writable mask and a write-1-to-clear mask; BAR registers and the
ReBAR control register have their own logic.
"""

from __future__ import annotations

from tinyhw.boards.spec import BoardSpec, ConfigLayout

CAP_PM = 0x50
CAP_PCIE = 0x64
CAP_MSI = 0xA0
EXT_AER = 0x100
EXT_REBAR = 0x200
EXT_ACS = 0x240

CMD_IO = 1 << 0
CMD_MEMORY = 1 << 1
CMD_BUS_MASTER = 1 << 2
_CMD_WRITABLE = 0x0547  # I/O, Mem, BusMaster, ParErr, SERR, DisINTx
_STATUS_W1C = 0xF900
STATUS_CAP_LIST = 1 << 4

#: BAR addresses an OS/BIOS assigned on the direct attachment (pci-vfio-remote.md §3.14).
DIRECT_ADDRESSES = {0: 0x78_0000_0000, 2: 0x7A_0000_0000, 4: 0xE000, 5: 0xFCC0_0000}

_LANES = [sum(0xFF << (8 * i) for i in range(4) if be >> i & 1) for be in range(16)]


def _rebar_encoding(size: int) -> int:
    return size.bit_length() - 1 - 20


class PciFunction:
    """Config space of one function: ``read32``/``write32`` of dword-aligned registers 0..0xffc."""

    def __init__(self, spec: BoardSpec, *, attach: str = "direct", acs: bool = True) -> None:
        if attach not in ("direct", "usb"):
            raise ValueError(f"attach must be 'direct' or 'usb', not {attach!r}")
        self.spec = spec
        self.attach = attach
        self._val = bytearray(4096)
        self._wm = bytearray(4096)
        self._w1c = bytearray(4096)
        self._selfclear: dict[int, int] = {}
        self.bar_size: dict[int, int] = {}
        self.bar_addr: dict[int, int] = {}
        self.bar_flags: dict[int, int] = {}
        self._slots: dict[int, tuple[int, int]] = {}  # config offset -> (bar index, 0 low / 1 high dword)
        for b in spec.bars:
            if b.kind == "io":
                flags = 0x1
            else:
                flags = (0x4 if b.is_64bit else 0) | (0x8 if b.prefetchable else 0)
            self.bar_size[b.index] = b.size
            self.bar_flags[b.index] = flags
            self.bar_addr[b.index] = DIRECT_ADDRESSES.get(b.index, 0) if attach == "direct" else 0
            self._slots[0x10 + 4 * b.index] = (b.index, 0)
            if b.is_64bit:
                self._slots[0x14 + 4 * b.index] = (b.index, 1)
        self._memory_bars = tuple(b.index for b in spec.bars if b.kind == "memory")
        self._build_header()
        layout = spec.function.layout
        if layout is None:
            self._build_caps()
            self._build_ext(acs)
        else:
            self._build_layout(layout)
        self.command = self._get(0x04, 2)

    # -- raw storage ------------------------------------------------------------------------------------------
    def _set(self, off: int, size: int, value: int, wmask: int = 0, w1c: int = 0) -> None:
        self._val[off:off + size] = value.to_bytes(size, "little")
        self._wm[off:off + size] = wmask.to_bytes(size, "little")
        self._w1c[off:off + size] = w1c.to_bytes(size, "little")

    def _get(self, off: int, size: int) -> int:
        return int.from_bytes(self._val[off:off + size], "little")

    # -- layout ---------------------------------------------------------------------------------------------
    def _build_header(self) -> None:
        f = self.spec.function
        self._set(0x00, 2, f.vendor_id)
        self._set(0x02, 2, f.device_id)
        direct = self.attach == "direct"
        self._set(0x04, 2, (CMD_MEMORY | CMD_BUS_MASTER) if direct else 0, _CMD_WRITABLE)
        self._set(0x06, 2, STATUS_CAP_LIST, 0, _STATUS_W1C)
        self._set(0x08, 1, f.revision)
        self._set(0x09, 3, f.class_code)
        self._set(0x0C, 1, 0x10 if direct else 0, 0xFF)  # cache line size
        self._set(0x0E, 1, 0x80)  # type 0, multi-function (the HDMI audio function sits at fn 1)
        self._set(0x2C, 2, f.subsystem_vendor_id)
        self._set(0x2E, 2, f.subsystem_id)
        self._set(0x34, 1, CAP_PM)
        self._set(0x3C, 1, 0xFF, 0xFF)  # interrupt line: unassigned
        self._set(0x3D, 1, 0x01)  # INTA

    def _build_caps(self) -> None:
        # Power management (values invented but well-formed): v3, D1/D2, PME from D0..D3hot
        self._set(CAP_PM, 2, 0x01 | (CAP_PCIE << 8))
        self._set(CAP_PM + 2, 2, 0x7E03)
        self._set(CAP_PM + 4, 2, 0x0008, 0x0103, 0x8000)
        # PCI Express v2 endpoint (§3.7)
        p = CAP_PCIE
        speed, width = self.spec.link_max_speed, self.spec.link_max_width
        self._set(p, 2, 0x10 | (CAP_MSI << 8))
        self._set(p + 0x02, 2, 0x0002)  # version 2, port type 0 (endpoint)
        self._set(p + 0x04, 4, 0x10008022)  # MPS 512, ExtTag, RBE, FLR capable
        self._set(p + 0x08, 2, 0x2930, 0xFFFF)  # MPS 256, RlxdOrd, ExtTag, NoSnoop, MRRS 512
        self._selfclear[p + 0x08] = 0x8000  # initiate FLR reads 0
        self._set(p + 0x0A, 2, 0, 0, 0x000F)
        self._set(p + 0x0C, 4, speed | (width << 4) | 0x800 | (6 << 15))  # ASPM L1, L1 exit <32us, port 0
        self._set(p + 0x10, 2, 0x0040, 0x0FCB)  # common clock
        if self.attach == "direct":
            sta_speed, sta_width = speed, width
        else:  # the ASM24 bridge trains Gen3 x4 (asm24-usb-bridge.md §1)
            sta_speed, sta_width = 3, 4
        self._set(p + 0x12, 2, sta_speed | (sta_width << 4) | 0x1000)
        self._set(p + 0x28, 2, 0, 0xFFFF)
        self._set(p + 0x2C, 4, ((1 << speed) - 1) << 1)  # supported speeds vector 2.5 .. max
        self._set(p + 0x30, 2, speed, 0x1FFF)  # target link speed
        self._set(p + 0x32, 2, 0x001E)  # equalisation complete, phases 1-3 (invented)
        # MSI, 64-bit address
        self._set(CAP_MSI, 2, 0x05)
        self._set(CAP_MSI + 2, 2, 0x0080, 0x0071)
        self._set(CAP_MSI + 4, 4, 0, 0xFFFFFFFC)
        self._set(CAP_MSI + 8, 4, 0, 0xFFFFFFFF)
        self._set(CAP_MSI + 12, 2, 0, 0xFFFF)

    def _build_ext(self, acs: bool) -> None:
        a = EXT_AER
        self._set(a, 4, 0x0001 | (2 << 16) | (EXT_REBAR << 20))
        self._set(a + 0x04, 4, 0, 0, 0x03FFF030)
        self._set(a + 0x08, 4, 0, 0x03FFF030)
        self._set(a + 0x0C, 4, 0x00462030, 0x03FFF030)
        self._set(a + 0x10, 4, 0, 0, 0x0000F1C1)
        self._set(a + 0x14, 4, 0x2000, 0x0000F1C1)
        self._set(a + 0x18, 4, 0x000000A0, 0x00000140)
        self._set(EXT_REBAR, 4, 0x0015 | (1 << 16) | ((EXT_ACS if acs else 0) << 20))
        self._build_rebar(EXT_REBAR, 0)
        if acs:
            self._set(EXT_ACS, 4, 0x000D | (1 << 16))
            self._set(EXT_ACS + 4, 2, 0x001F)
            self._set(EXT_ACS + 6, 2, 0, 0x001F)

    def _build_rebar(self, r: int, bar: int) -> None:
        """The Resizable BAR capability's body at ``r`` (§3.9): one entry, for ``bar``, listing the board's sizes."""
        supported = 0
        for size in self.spec.rebar_sizes:
            k = _rebar_encoding(size)
            if 0 <= k <= 27:
                supported |= 1 << (k + 4)
        self._rebar_supported = supported
        self._rebar_ctrl = r + 8
        self._set(r + 4, 4, supported)
        self._set(r + 8, 4, bar | (1 << 5) | (_rebar_encoding(self.bar_size[bar]) << 8), 0x3F00)

    def _build_layout(self, layout: ConfigLayout) -> None:
        """The board's own layout: its bytes as given and read-only, its power-on COMMAND, its BIOS-assigned BAR
        addresses; only COMMAND, the BARs and the ReBAR control take writes."""
        self._wm[:] = bytes(4096)
        self._w1c[:] = bytes(4096)
        self._set(0x0C, 1, 0)
        self._set(0x04, 2, layout.command, _CMD_WRITABLE)
        for off, data in layout.raw:
            self._val[off:off + len(data)] = data
        for idx, addr in layout.addresses:
            self.bar_addr[idx] = addr
        self._build_rebar(layout.rebar, layout.rebar_bar)

    # -- access ------------------------------------------------------------------------------------------------
    def read32(self, reg: int) -> int:
        """The config-space dword at byte ``reg``; BAR registers read the current address with the BAR's type bits (the
        high half of a 64-bit BAR reads address >> 32)."""
        slot = self._slots.get(reg)
        if slot is not None:
            idx, half = slot
            addr = self.bar_addr[idx]
            return (addr & 0xFFFFFFFF) | self.bar_flags[idx] if half == 0 else addr >> 32
        return int.from_bytes(self._val[reg:reg + 4], "little")

    def write32(self, reg: int, value: int, byte_enable: int = 0xF) -> None:
        """Write the enabled byte lanes of ``value`` at ``reg`` as the hardware does: only writable bits change,
        write-one-to-clear bits clear, self-clearing bits read back 0, a BAR takes an address aligned to its size and
        the Resizable BAR control resizes BAR0."""
        lanes = _LANES[byte_enable & 0xF]
        slot = self._slots.get(reg)
        if slot is not None:
            merged = (self.read32(reg) & ~lanes) | (value & lanes)
            self._bar_write(*slot, merged)
            return
        old = self._get(reg, 4)
        wm = int.from_bytes(self._wm[reg:reg + 4], "little") & lanes
        w1c = int.from_bytes(self._w1c[reg:reg + 4], "little") & lanes
        new = ((old & ~wm) | (value & wm)) & ~(value & w1c)
        new &= ~self._selfclear.get(reg, 0)
        if reg == self._rebar_ctrl:
            new = self._resize(old, new)
        self._val[reg:reg + 4] = new.to_bytes(4, "little")
        if reg == 0x04:
            self.command = new & 0xFFFF

    def _bar_write(self, idx: int, half: int, merged: int) -> None:
        size = self.bar_size[idx]
        addr = self.bar_addr[idx]
        if half == 0:
            low_mask = ~(size - 1) & (0xFFFFFFFC if self.bar_flags[idx] & 1 else 0xFFFFFFF0)
            self.bar_addr[idx] = (addr & ~0xFFFFFFFF) | (merged & low_mask)
        else:
            high_mask = ~((size - 1) >> 32) & 0xFFFFFFFF
            self.bar_addr[idx] = (addr & 0xFFFFFFFF) | ((merged & high_mask) << 32)

    def _resize(self, old: int, new: int) -> int:
        """§3.9: a supported size encoding resizes the BAR; an unsupported one is not taken (inferred)."""
        enc = (new >> 8) & 0x3F
        if enc > 27 or not self._rebar_supported >> (enc + 4) & 1:
            return (new & ~0x3F00) | (old & 0x3F00)
        idx = new & 0x7
        size = 1 << (enc + 20)
        self.bar_size[idx] = size
        self.bar_addr[idx] &= ~(size - 1)
        return new

    # -- what the function decodes -------------------------------------------------------------------------
    @property
    def memory_enabled(self) -> bool:
        """True while COMMAND bit 1 (memory space decode) is set."""
        return bool(self.command & CMD_MEMORY)

    def decode(self, addr: int) -> tuple[int, int] | None:
        """Bus address -> (BAR index, offset), or None when memory decode is off or no BAR covers it."""
        if not self.command & CMD_MEMORY:
            return None
        for idx in self._memory_bars:
            base = self.bar_addr[idx]
            if base and base <= addr < base + self.bar_size[idx]:
                return idx, addr - base
        return None

    def resources(self) -> list[tuple[int, int, int, int]]:
        """(BAR index, address, size, low-dword flag bits) of every implemented BAR."""
        return [(b.index, self.bar_addr[b.index], self.bar_size[b.index], self.bar_flags[b.index])
                for b in self.spec.bars]
