"""Config space of the emulated AD102 (``mock:ad102``): a type-0 header and the capability lists of an Ada
board.

Layout (specs/pci-vfio-remote.md §3.2-§3.9 for the structures): capabilities PM 0x60 -> MSI 0x68 -> PCI
Express v2 (legacy endpoint) 0x78 -> vendor-specific 0xB4; extended capabilities Virtual Channel 0x100 ->
LTR 0x250 -> L1 PM Substates 0x258 -> Power Budgeting 0x128 -> AER 0x420 -> vendor-specific 0x600 ->
Secondary PCIe 0x900 -> Resizable BAR 0xBB0 -> Physical Layer 16 GT/s 0xC1C -> Lane Margining 0xD00 ->
Data Link Feature 0xE00. The offsets and order are those published ``lspci -vvv`` listings of RTX 40-series
boards show (inferred: not in the spec); register values inside the capabilities are invented but
well-formed (Gen4 x16 link, BAR1 resizable 64 MiB .. 32 GiB).

Only the command register (memory/bus-master/... bits), the BAR registers' sizing and the Resizable BAR control
(BAR1's size, as on AD102 boards) behave; everything else reads back as built and ignores writes. The board's
sysfs-style attributes are derived from here.
"""

from __future__ import annotations

import struct

from tinyhw.boards.nvidia import AD102_BARS, AD102_IDS

#: BAR addresses a BIOS would have assigned (invented).
ADDRESSES = {0: 0xFB00_0000, 1: 0x60_0000_0000, 3: 0x60_1000_0000, 5: 0xF000}
LINK_SPEED, LINK_WIDTH = 4, 16  # 16 GT/s x16
REBAR_SIZES = tuple(64 << 20 << k for k in range(10))  # 64 MiB .. 32 GiB
_CMD_WRITABLE = 0x0547
REBAR_CAP = 0xBB0
REBAR_CTRL = REBAR_CAP + 8  # the control dword of the one entry (BAR1)


def _caps(cfg: bytearray) -> None:
    def put(off: int, fmt: str, *values: int) -> None:
        struct.pack_into("<" + fmt, cfg, off, *values)

    put(0x34, "B", 0x60)
    put(0x60, "BBHH", 0x01, 0x68, 0x0603, 0x0008)  # PM v3, D0, no soft reset
    put(0x68, "BBH", 0x05, 0x78, 0x0081)  # MSI, 64-bit, enabled, 1 vector
    # PCI Express v2, legacy endpoint (port type 1); devcap, devctl, linkcap, linkctl/status, devcap2..linkctl2
    put(0x78, "BBH", 0x10, 0xB4, 0x0012)
    put(0x78 + 0x04, "I", 0x10008FE1)
    put(0x78 + 0x08, "HH", 0x2930, 0x0000)
    put(0x78 + 0x0C, "I", LINK_SPEED | (LINK_WIDTH << 4) | (3 << 10) | (0x11 << 15))
    put(0x78 + 0x10, "HH", 0x0040, LINK_SPEED | (LINK_WIDTH << 4) | 0x1000)
    put(0x78 + 0x24, "I", 0x00700813)
    put(0x78 + 0x2C, "I", ((1 << LINK_SPEED) - 1) << 1)
    put(0x78 + 0x30, "HH", LINK_SPEED, 0x001E)
    put(0xB4, "BBB", 0x09, 0x00, 0x14)  # vendor specific, length 0x14
    cfg[0xB7:0xB4 + 0x14] = bytes(range(1, 0x12))  # invented vendor bytes

    chain = [(0x100, 0x0002, 1), (0x250, 0x0018, 1), (0x258, 0x001E, 1), (0x128, 0x0004, 1), (0x420, 0x0001, 2),
             (0x600, 0x000B, 1), (0x900, 0x0019, 1), (0xBB0, 0x0015, 1), (0xC1C, 0x0026, 1), (0xD00, 0x0027, 1),
             (0xE00, 0x0025, 1)]
    for i, (off, cap_id, ver) in enumerate(chain):
        nxt = chain[i + 1][0] if i + 1 < len(chain) else 0
        put(off, "I", cap_id | (ver << 16) | (nxt << 20))
    put(0x600 + 4, "I", 0x0001 | (1 << 16) | (0x024 << 20))  # vendor-specific header: id 1 rev 1 len 0x24
    put(0x420 + 0x0C, "I", 0x00462030)  # AER uncorrectable severity (defaults)
    put(0x420 + 0x18, "I", 0x000000A0)
    supported = sum(1 << ((s.bit_length() - 21) + 4) for s in REBAR_SIZES)
    put(0xBB0 + 4, "I", supported)
    put(0xBB0 + 8, "I", 1 | (1 << 5) | ((AD102_BARS[1][1].bit_length() - 21) << 8))  # BAR1, one BAR, 256 MiB


class Ad102Config:
    """``read32``/``write32`` of dword registers 0..0xffc."""

    def __init__(self) -> None:
        cfg = bytearray(4096)
        ids = AD102_IDS
        struct.pack_into("<HHHH", cfg, 0, ids["vendor_id"], ids["device_id"], 0x0007, 0x0010)
        struct.pack_into("<I", cfg, 0x08, ids["revision"] | (ids["class_code"] << 8))
        cfg[0x0E] = 0x80  # multi-function (HDMI audio at function 1)
        struct.pack_into("<HH", cfg, 0x2C, ids["subsystem_vendor_id"], ids["subsystem_id"])
        struct.pack_into("<BB", cfg, 0x3C, 0xFF, 0x01)
        _caps(cfg)
        self._cfg = cfg
        self.bar_addr = dict(ADDRESSES)
        self.bar_size = {b[0]: b[1] for b in AD102_BARS}
        self._flags = {b[0]: (0x1 if b[4] == "io" else (0x4 if b[2] else 0) | (0x8 if b[3] else 0)) for b in AD102_BARS}
        self._slots: dict[int, tuple[int, int]] = {}
        for idx, _size, is64, _pf, _kind in AD102_BARS:
            self._slots[0x10 + 4 * idx] = (idx, 0)
            if is64:
                self._slots[0x14 + 4 * idx] = (idx, 1)

    @property
    def command(self) -> int:
        """The COMMAND register (config offset 0x04, 16 bits): bit 1 memory decode, bit 2 bus master."""
        return int.from_bytes(self._cfg[4:6], "little")

    def read32(self, reg: int) -> int:
        """The config dword at byte ``reg``; BAR registers read their current address with the BAR's type bits (the high
        half of a 64-bit BAR reads address >> 32)."""
        slot = self._slots.get(reg)
        if slot is not None:
            idx, half = slot
            addr = self.bar_addr[idx]
            return ((addr & 0xFFFFFFFF) | self._flags[idx]) if half == 0 else addr >> 32
        return int.from_bytes(self._cfg[reg:reg + 4], "little")

    def write32(self, reg: int, value: int, byte_enable: int = 0xF) -> None:
        """Write the enabled byte lanes of ``value`` at ``reg``: COMMAND keeps only its writable bits, a BAR register
        takes an address aligned to the BAR's size (all ones reads back the size mask, the sizing probe); every other
        register is read-only."""
        lanes = sum(0xFF << (8 * i) for i in range(4) if byte_enable >> i & 1)
        if reg == 0x04:
            old = self.read32(reg)
            wm = _CMD_WRITABLE & lanes
            self._cfg[4:8] = (((old & ~wm) | (value & wm)) & 0xFFFF | (old & 0xFFFF0000)).to_bytes(4, "little")
        elif reg == REBAR_CTRL:
            # Resizable BAR control (specs/pci-vfio-remote.md §3.9): bits 13:8 take a size the capability lists;
            # BAR1 then decodes that size, its address aligned to it (low bits read back zero)
            enc = ((value & lanes) >> 8) & 0x3F if lanes & 0xFF00 else None
            if enc is not None and (1 << (enc + 20)) in REBAR_SIZES:
                ctrl = int.from_bytes(self._cfg[reg:reg + 4], "little")
                self._cfg[reg:reg + 4] = ((ctrl & ~0x3F00) | (enc << 8)).to_bytes(4, "little")
                self.bar_size[1] = 1 << (enc + 20)
                self.bar_addr[1] &= ~(self.bar_size[1] - 1)
        elif reg in self._slots:
            idx, half = self._slots[reg]
            merged = (self.read32(reg) & ~lanes) | (value & lanes)
            size = self.bar_size[idx]
            if half == 0:
                mask = ~(size - 1) & (0xFFFFFFFC if self._flags[idx] & 1 else 0xFFFFFFF0)
                self.bar_addr[idx] = (self.bar_addr[idx] & ~0xFFFFFFFF) | (merged & mask)
            else:
                self.bar_addr[idx] = (self.bar_addr[idx] & 0xFFFFFFFF) | ((merged & ~((size - 1) >> 32)) << 32)

    def resources(self) -> list[tuple[int, int, int, int]]:
        """(index, address, size, flags) of every BAR, flags as sysfs' ``resource`` low bits: 1 I/O, 4 64-bit, 8
        prefetchable."""
        return [(i, self.bar_addr[i], self.bar_size[i], self._flags[i]) for i, *_ in AD102_BARS]
