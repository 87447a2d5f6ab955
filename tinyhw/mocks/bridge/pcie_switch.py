"""The emulated PCIe hierarchy behind the ASM24 bridge: type-1 bridges, routing, the GPU endpoint.

Implements specs/asm24-usb-bridge.md §8 (topology: bridges on buses 0..gpu_bus-1, the GPU at
``gpu_bus`` device 0 function 0), §12 (type-1 headers with bus-number, window and
command registers; UR until bus numbers are set; memory routing through the windows; UR for
absent functions), with register layouts from specs/pci-vfio-remote.md §3.3, §3.4, §3.7.

Routing rules (standard PCIe, as the spec expects them):

- A type 0 config request is consumed by the device on the first link (bus 0) whatever the bus
  and device fields say (type 0 requests carry no routing); the bus-0 port answers on **every
  device number** (spec §8: a scan lists it 32 times), function 0 only; other functions: UR.
- A type 1 request is forwarded hop by hop: a bridge whose secondary bus equals the target bus
  converts it to type 0 and delivers it to device 0 there (a PCIe link has one device; other
  device numbers and functions other than 0 get UR); a target inside (secondary, subordinate]
  goes on down; anything else (including every request before the bus numbers are written) is UR.
- A memory request passes a bridge only when its Memory Space Enable bit is set and the address
  lies in its memory window or its (64-bit) prefetchable window; the endpoint then claims it
  through ``decode`` (its own BARs and command register) or it is UR.
- Bus-master writes travelling upstream (GPU to the bridge SRAM) need Bus Master Enable on every
  bridge (standard bridge behaviour; spec §8 step 1.4).

The endpoint is any object with ``cfg_read32``, ``cfg_write32``, ``decode``, ``mem_read32`` and
``mem_write32`` (for example ``tinyhw.mocks.amd.board.Navi31Board``); an optional ``reset()`` is
called on PERST# or a secondary bus reset.
"""

from __future__ import annotations

from typing import Protocol

from tinyhw.transport.abilities import Resettable
from tinyhw.transport.base import has

#: Completion status codes (spec §5.5).
CPL_SC = 0b000
CPL_UR = 0b001
CPL_CRS = 0b010
CPL_CA = 0b100

#: Ports on buses 0-1 belong to the ASM2464 itself (PERST# leaves them alone); buses >= 2 are on the card.
ASMEDIA_VENDOR = 0x1B21
#: Device id used for the ASMedia ports (inferred; the spec gives none for them).
ASMEDIA_PORT_DEVICE = 0x2464
#: The GPU's internal switch (spec §8: 1002:1478 upstream, 1002:1479 downstream).
AMD_SWITCH_UP = (0x1002, 0x1478)
AMD_SWITCH_DOWN = (0x1002, 0x1479)

PCIE_CAP = 0x80  # where every emulated bridge keeps its PCI Express capability (NVPR uses 0x80)
_CMD_WRITABLE = 0x0547  # I/O, memory, bus master, parity, SERR, INTx disable
_BCTL_WRITABLE = 0x0FFF
_SECONDARY_BUS_RESET = 0x0040


class Endpoint(Protocol):
    """What the hierarchy needs from the device at the bottom (the GPU function)."""

    def cfg_read32(self, reg: int) -> int:
        """The config-space dword at byte ``reg``."""
    def cfg_write32(self, reg: int, value: int, byte_enable: int = 0xF) -> None:
        """Write the enabled byte lanes (``byte_enable`` bits 0-3) of ``value`` to config-space dword ``reg``."""
    def decode(self, addr: int) -> tuple[int, int] | None:
        """(bar, offset) that bus address ``addr`` hits, or None when no BAR decodes it."""
    def mem_read32(self, bar: int, offset: int) -> int:
        """One dword read of ``bar`` at byte ``offset`` (dword aligned)."""
    def mem_write32(self, bar: int, offset: int, value: int, byte_enable: int = 0xF) -> None:
        """One dword write of ``bar`` at byte ``offset``; only the enabled byte lanes change."""


class Type1Bridge:
    """One PCI-PCI bridge (a switch port) with a 4 KiB config space and the routing registers."""

    def __init__(self, bus: int, vendor_id: int, device_id: int, port_type: int) -> None:
        self.bus = bus
        self.ids = (vendor_id, device_id)
        self.port_type = port_type
        self.cfg = bytearray(4096)
        self.writable = bytearray(4096)  # per-byte writable bit masks
        self.reset()

    # -- config space ------------------------------------------------------------------
    def reset(self) -> None:
        """Power-on / reset values: bus numbers 0, windows closed by MSE 0, command 0."""
        c, w = self.cfg, self.writable
        c[:] = bytes(4096)
        w[:] = bytes(4096)
        _put(c, 0x00, 4, self.ids[0] | self.ids[1] << 16)
        _put(c, 0x06, 2, 0x0010)  # status: capability list
        _put(c, 0x08, 4, 0x06040000)  # class: PCI-PCI bridge, revision 0
        c[0x0E] = 0x01  # header type 1
        c[0x34] = PCIE_CAP
        _put(c, 0x24, 2, 0x0001)  # prefetchable window is 64-bit capable
        _put(c, 0x26, 2, 0x0001)
        _put(w, 0x04, 2, _CMD_WRITABLE)
        _put(w, 0x0C, 2, 0xFFFF)  # cache line, latency timer
        _put(w, 0x18, 4, 0xFFFFFFFF)  # primary, secondary, subordinate, secondary latency
        _put(w, 0x1C, 2, 0xF0F0)  # I/O base/limit
        _put(w, 0x20, 4, 0xFFF0FFF0)  # memory base/limit
        _put(w, 0x24, 4, 0xFFF0FFF0)  # prefetchable base/limit
        _put(w, 0x28, 4, 0xFFFFFFFF)
        _put(w, 0x2C, 4, 0xFFFFFFFF)
        _put(w, 0x30, 4, 0xFFFFFFFF)
        w[0x3C] = 0xFF
        _put(w, 0x3E, 2, _BCTL_WRITABLE)
        # PCI Express capability: v2, this port's type; Gen4 x4 capable, trained Gen3 x4 (spec §1).
        p = PCIE_CAP
        _put(c, p + 0x00, 2, 0x10)
        _put(c, p + 0x02, 2, 0x0002 | self.port_type << 4)
        _put(c, p + 0x0C, 4, 0x04 | 4 << 4)
        _put(c, p + 0x12, 2, 0x2000 | 0x03 | 4 << 4)  # DLL active, speed 3, width 4
        _put(c, p + 0x2C, 4, 0b11110)  # 2.5-16 GT/s supported
        _put(c, p + 0x30, 2, 0x0004)  # target speed Gen4
        _put(w, p + 0x08, 2, 0x7FFF)  # device control
        _put(w, p + 0x10, 2, 0x0FFB)  # link control (retrain self-clears, see write)
        _put(w, p + 0x30, 2, 0x000F)  # link control 2: target speed
        self._update_routes()

    def read32(self, reg: int) -> int:
        """The bridge's config-space dword at byte ``reg``."""
        return int.from_bytes(self.cfg[reg : reg + 4], "little")

    def write32(self, reg: int, value: int, byte_enable: int) -> bool:
        """Write the enabled lanes through the writable masks. Returns True on a secondary bus reset."""
        for i in range(4):
            if byte_enable >> i & 1:
                m = self.writable[reg + i]
                self.cfg[reg + i] = (self.cfg[reg + i] & ~m) | ((value >> (8 * i)) & m)
        self.cfg[PCIE_CAP + 0x10] &= ~0x20  # retrain link completes at once
        self._update_routes()
        return bool(self._u16(0x3E) & _SECONDARY_BUS_RESET) and reg == 0x3C and bool(byte_enable & 0b1100)

    def _update_routes(self) -> None:
        """Recompute the address ranges passed downstream (only config writes and resets change them)."""
        if not self.command & 0x2:
            self.routes: tuple[tuple[int, int], ...] = ()
            return
        self.routes = tuple(w for w in (self.memory_window(), self.prefetch_window()) if w[0] <= w[1])

    # -- routing -------------------------------------------------------------------------
    def _u16(self, off: int) -> int:
        return self.cfg[off] | self.cfg[off + 1] << 8

    @property
    def command(self) -> int:
        """The COMMAND register (bit 1 memory decode, bit 2 bus master)."""
        return self._u16(0x04)

    @property
    def secondary(self) -> int:
        """The secondary bus number (config byte 0x19)."""
        return self.cfg[0x19]

    @property
    def subordinate(self) -> int:
        """The subordinate bus number (config byte 0x1A): the highest bus behind the bridge."""
        return self.cfg[0x1A]

    def routes_bus(self, bus: int) -> bool:
        """True when a type-1 request for ``bus`` goes below this bridge."""
        return 0 < self.secondary <= bus <= self.subordinate

    def memory_window(self) -> tuple[int, int]:
        """(base, limit) bus addresses of the non-prefetchable memory window (1 MiB granularity, limit inclusive)."""
        base = (self._u16(0x20) & 0xFFF0) << 16
        return base, ((self._u16(0x22) & 0xFFF0) << 16) | 0xFFFFF

    def prefetch_window(self) -> tuple[int, int]:
        """(base, limit) bus addresses of the 64-bit prefetchable memory window (1 MiB granularity, limit inclusive)."""
        base = (self._u16(0x24) & 0xFFF0) << 16 | int.from_bytes(self.cfg[0x28:0x2C], "little") << 32
        limit = (self._u16(0x26) & 0xFFF0) << 16 | 0xFFFFF | int.from_bytes(self.cfg[0x2C:0x30], "little") << 32
        return base, limit

    def forwards_memory(self, addr: int) -> bool:
        """True when a downstream memory request for ``addr`` passes this bridge (MSE set, inside a window)."""
        return any(lo <= addr <= hi for lo, hi in self.routes)


def _put(buf: bytearray, off: int, size: int, value: int) -> None:
    buf[off : off + size] = value.to_bytes(size, "little")


def _bridge_ids(bus: int, gpu_bus: int) -> tuple[int, int, int]:
    """(vendor, device, port type) of the bridge on ``bus``: ASMedia ports on 0-1, the GPU's switch after."""
    if bus >= 2 and gpu_bus == 4:
        vid, did = AMD_SWITCH_UP if bus == 2 else AMD_SWITCH_DOWN
        return vid, did, 5 if bus == 2 else 6
    return ASMEDIA_VENDOR, ASMEDIA_PORT_DEVICE, 5 if bus % 2 == 0 else 6


class PcieHierarchy:
    """Bridges on buses 0..gpu_bus-1 and the endpoint on ``gpu_bus``; routes config and memory TLPs."""

    def __init__(self, endpoint: Endpoint, gpu_bus: int = 4) -> None:
        self.endpoint = endpoint
        self.gpu_bus = gpu_bus
        self.bridges = [Type1Bridge(b, *_bridge_ids(b, gpu_bus)) for b in range(gpu_bus)]
        self._path: tuple[tuple[int, int], ...] = ()
        self._update_path()

    # -- resets ------------------------------------------------------------------------------
    def perst(self) -> None:
        """PERST# pulse: everything on the card (buses >= 2) and the endpoint return to power-on state."""
        self._reset_below(1)

    def _reset_below(self, bus: int) -> None:
        for br in self.bridges:
            if br.bus > bus:
                br.reset()
        self._update_path()
        if has(self.endpoint, Resettable):  # an endpoint with a reset of its own
            self.endpoint.reset()

    # -- configuration requests ------------------------------------------------------------------
    def _device(self, bus: int, dev: int, fn: int, on_bus0: bool) -> Type1Bridge | Endpoint | None:
        if fn != 0 or (dev != 0 and not on_bus0):
            return None
        return self.bridges[bus] if bus < self.gpu_bus else self.endpoint

    def _target(self, type1: bool, bus: int, dev: int, fn: int) -> Type1Bridge | Endpoint | None:
        if not type1:
            return self._device(0, dev, fn, on_bus0=True)
        hop = 0
        while hop < self.gpu_bus:
            br = self.bridges[hop]
            if not br.routes_bus(bus):
                return None
            if br.secondary == bus:
                # Bus numbers index the hierarchy; a bridge programmed with a secondary bus that
                # does not match the real topology delivers to whatever sits one link down.
                return self._device(hop + 1, dev, fn, on_bus0=False)
            hop += 1
        return None

    def config(self, type1: bool, bus: int, dev: int, fn: int, reg: int, *, write: bool = False, value: int = 0,
               byte_enable: int = 0xF) -> tuple[int, int]:
        """One config request. Returns (completion status, data dword; 0 for writes and URs)."""
        target = self._target(type1, bus, dev, fn)
        if target is None:
            return CPL_UR, 0
        reg &= 0xFFC
        if isinstance(target, Type1Bridge):
            if write:
                if target.write32(reg, value, byte_enable):
                    self._reset_below(target.bus)
                self._update_path()
                return CPL_SC, 0
            return CPL_SC, target.read32(reg)
        if write:
            target.cfg_write32(reg, value, byte_enable)
            return CPL_SC, 0
        return CPL_SC, target.cfg_read32(reg) & 0xFFFFFFFF

    # -- memory requests --------------------------------------------------------------------------
    def _update_path(self) -> None:
        """Address ranges that pass every bridge: the intersection of their windows (after any change)."""
        ranges: list[tuple[int, int]] = [(0, (1 << 64) - 1)]
        for br in self.bridges:
            ranges = [(max(a, c), min(b, d)) for a, b in ranges for c, d in br.routes if max(a, c) <= min(b, d)]
        self._path = tuple(ranges)

    def _claim(self, addr: int) -> tuple[int, int] | None:
        for lo, hi in self._path:
            if lo <= addr <= hi:
                return self.endpoint.decode(addr)
        return None

    def mem_read(self, addr: int) -> tuple[int, int]:
        """A one-dword memory read at dword-aligned ``addr``. Returns (status, data)."""
        hit = self._claim(addr)
        if hit is None:
            return CPL_UR, 0
        return CPL_SC, self.endpoint.mem_read32(*hit) & 0xFFFFFFFF

    def mem_write(self, addr: int, value: int, byte_enable: int = 0xF) -> bool:
        """A posted one-dword memory write; returns False when nothing claimed it (silently dropped)."""
        hit = self._claim(addr)
        if hit is None:
            return False
        self.endpoint.mem_write32(hit[0], hit[1], value, byte_enable)
        return True

    def mem_write_burst(self, addr: int, data: bytes) -> bool:
        """Posted dword writes at ascending ``addr`` in one go, when one BAR claims the whole range and the
        endpoint takes bursts (``mem_write_block``); False: the caller writes dword by dword."""
        block = getattr(self.endpoint, "mem_write_block", None)
        if block is None or not data:
            return False
        last = addr + len(data) - 4
        first, end = self._claim(addr), self._claim(last)
        if first is None or end is None or first[0] != end[0] or end[1] - first[1] != len(data) - 4:
            return False
        return bool(block(first[0], first[1], data))

    def upstream_enabled(self) -> bool:
        """True when bus-master requests from the endpoint can reach the bridge (BME on every bridge)."""
        return all(br.command & 0x4 for br in self.bridges)
