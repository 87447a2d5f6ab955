"""PCIe enumeration behind the bridge (asm24-usb-bridge.md §8; pci-vfio-remote.md §3.3, §3.5, §3.9).

Walks the bridges hop by hop (checking each is a type-1 header before writing bus numbers
and windows), resizes BAR0 to its largest Resizable-BAR size, then sizes and places the
GPU's BARs. These config writes are part of opening the device over the bridge. Register
offsets, the extended-capability walk, the Resizable BAR decoding and the BAR sizing arithmetic
are the pure ones of :mod:`tinyhw.formats.pciconfig` (read through the bridge's config reads).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.errors import CompletionError, DeviceNotFound, TransportError
from tinyhw.formats.pcicaps import decode_rebar
from tinyhw.formats.pciconfig import (
    COMMAND_BUS_MASTER,
    COMMAND_IO,
    COMMAND_MEMORY,
    EXT_CAP_REBAR,
    HEADER_LAYOUT_BRIDGE,
    REG_BAR0,
    REG_BUS_NUMBERS,
    REG_COMMAND,
    REG_HEADER_TYPE,
    REG_ID,
    REG_MEMORY_BASE,
    REG_MEMORY_LIMIT,
    REG_PREF_BASE,
    REG_PREF_BASE_UPPER,
    REG_PREF_LIMIT,
    REG_PREF_LIMIT_UPPER,
    ConfigSource,
    bar_size_from_mask,
    iter_ext_capabilities,
)
from tinyhw.transport.base import BarInfo
from tinyhw.usb.bridge import Asm24

#: window bases used by the host (§8): non-prefetchable at 256 MiB, prefetchable at 32 GiB; 2 MiB granule
NP_WINDOW_BASE = 0x1000_0000
PF_WINDOW_BASE = 0x8_0000_0000
GRANULE = 2 << 20
DECODE_ALL = COMMAND_IO | COMMAND_MEMORY | COMMAND_BUS_MASTER


@dataclass(frozen=True)
class Hop:
    """One PCIe bridge between the USB bridge and the GPU: the bus it sits on and its ids."""

    bus: int
    vendor_id: int
    device_id: int


@dataclass
class Enumeration:
    """The PCIe tree behind the USB bridge after enumeration: the GPU's bus, the bridges on the way, the GPU's BARs as
    placed, and BAR0's Resizable BAR size (chosen and possible)."""

    gpu_bus: int
    hops: list[Hop]
    bars: list[BarInfo]
    rebar_size: int | None  # BAR0 size chosen through Resizable BAR, if the capability exists
    rebar_sizes: list[int]


def _align(value: int, alignment: int) -> int:
    return (value + alignment - 1) // alignment * alignment


def program_bridges(br: Asm24, gpu_bus: int) -> list[Hop]:
    """Give each bridge on buses 0..gpu_bus-1 its bus numbers, windows and command bits."""
    hops = []
    for b in range(gpu_bus):
        try:
            ident = br.config_read(b, 0, 0, REG_ID, 4)
            header = br.config_read(b, 0, 0, REG_HEADER_TYPE, 1)
        except CompletionError as e:
            raise DeviceNotFound(f"no pci bridge answers at bus {b} behind the usb bridge ({e.message})") from e
        if header & 0x7F != HEADER_LAYOUT_BRIDGE:
            raise DeviceNotFound(
                f"expected a pci-to-pci bridge at {b:02x}:00.0 but its header type is 0x{header:02x}",
                hint="the topology behind this bridge is not the expected one; check the gpu",
            )
        hops.append(Hop(b, ident & 0xFFFF, ident >> 16))
        # primary 0, secondary b+1, subordinate gpu_bus, latency 0: written together (§8 step 1.1)
        br.config_write(b, 0, 0, REG_BUS_NUMBERS, 4, ((b + 1) << 8) | (gpu_bus << 16))
        br.config_write(b, 0, 0, REG_MEMORY_BASE, 2, NP_WINDOW_BASE >> 16)
        br.config_write(b, 0, 0, REG_MEMORY_LIMIT, 2, 0xFFFF)
        br.config_write(b, 0, 0, REG_PREF_BASE, 2, 0x0000)
        br.config_write(b, 0, 0, REG_PREF_LIMIT, 2, 0xFFFF)
        br.config_write(b, 0, 0, REG_PREF_BASE_UPPER, 4, PF_WINDOW_BASE >> 32)
        br.config_write(b, 0, 0, REG_PREF_LIMIT_UPPER, 4, 0xFFFFFFFF)
        br.config_write(b, 0, 0, REG_COMMAND, 1, DECODE_ALL)
    return hops


def _config(br: Asm24, bus: int) -> ConfigSource:
    """The function's config space as the pure parsers read it: dword reads through the bridge, on demand."""
    return ConfigSource(lambda offset, n: br.config_read(bus, 0, 0, offset & ~3, 4).to_bytes(4, "little"))


def resize_bar0(br: Asm24, bus: int) -> tuple[int | None, list[int]]:
    """Set the first Resizable-BAR entry to its largest supported size (§8 step 2, §3.9)."""
    src = _config(br, bus)
    cap = next((c for c in iter_ext_capabilities(src, [], decode=False) if c.id == EXT_CAP_REBAR), None)
    if cap is None:
        return None, []
    rebar = decode_rebar(src.limited(cap.offset + 16), cap.offset, [])  # entry 0 only: BAR0
    entry = rebar.entries[0] if rebar.entries else None
    if entry is None or not entry.supported_sizes:
        return None, []
    largest = max(entry.supported_sizes)
    code = largest.bit_length() - 1 - 20  # the control register's size field: 2^(code+20) bytes
    br.config_write(bus, 0, 0, cap.offset + 8, 4, (entry.raw_ctrl & ~0x3F00) | (code << 8))
    return largest, list(entry.supported_sizes)


def size_and_place_bars(br: Asm24, bus: int) -> list[BarInfo]:
    """Size every BAR of the GPU function and place memory BARs in the bridge windows (§8 step 3)."""
    cursors = {True: PF_WINDOW_BASE, False: NP_WINDOW_BASE}
    bars: list[BarInfo] = []
    index = 0
    while index < 6:
        reg = REG_BAR0 + 4 * index
        low = br.config_read(bus, 0, 0, reg, 4)
        if low & 1:  # I/O BAR: size it, leave it unassigned (no I/O window behind the bridge)
            br.config_write(bus, 0, 0, reg, 4, 0xFFFFFFFF)
            size = bar_size_from_mask(br.config_read(bus, 0, 0, reg, 4), None, True) & 0xFFFF
            br.config_write(bus, 0, 0, reg, 4, low)
            if size:
                bars.append(BarInfo(index, 0, size, "io"))
            index += 1
            continue
        is64 = (low >> 1) & 3 == 2
        pref = bool(low & 8)
        br.config_write(bus, 0, 0, reg, 4, 0xFFFFFFFF)
        low_back = br.config_read(bus, 0, 0, reg, 4)
        high_back = None
        bits = 32
        if is64:
            br.config_write(bus, 0, 0, reg + 4, 4, 0xFFFFFFFF)
            high_back = br.config_read(bus, 0, 0, reg + 4, 4)
            bits = 64
        size = bar_size_from_mask(low_back, high_back, False)
        if size:
            addr = _align(cursors[pref], max(size, GRANULE))
            if bits == 32 and addr + size > 1 << 32:
                raise TransportError(f"bar{index} of 0x{size:x} bytes does not fit below 4 GiB")
            br.config_write(bus, 0, 0, reg, 4, addr & 0xFFFFFFFF)
            if is64:
                br.config_write(bus, 0, 0, reg + 4, 4, addr >> 32)
            cursors[pref] = addr + _align(size, GRANULE)
            bars.append(BarInfo(index, addr, size, "memory", pref, is64))
        index += 2 if is64 else 1
    return bars


def enumerate_gpu(br: Asm24, gpu_bus: int) -> Enumeration:
    """Enumerate the PCIe tree behind the bridge (bus numbers, windows, Resizable BAR, BAR sizing and placement) for the
    GPU at ``gpu_bus``:00.0; raises DeviceNotFound when nothing answers there."""
    hops = program_bridges(br, gpu_bus)
    try:
        ident = br.config_read(gpu_bus, 0, 0, REG_ID, 4)
    except CompletionError as e:
        raise DeviceNotFound(
            f"no pci function answers at {gpu_bus:02x}:00.0 behind the usb bridge ({e.message})",
            hint="check that the gpu is seated and powered",
        ) from e
    if ident & 0xFFFF in (0xFFFF, 0):
        raise DeviceNotFound(f"no gpu at {gpu_bus:02x}:00.0 behind the usb bridge (id 0x{ident:08x})")
    br.config_write(gpu_bus, 0, 0, REG_COMMAND, 2, 0x0000)  # decode off while sizing (pci-vfio-remote.md §3.5)
    rebar_size, rebar_sizes = resize_bar0(br, gpu_bus)
    bars = size_and_place_bars(br, gpu_bus)
    br.config_write(gpu_bus, 0, 0, REG_COMMAND, 2, DECODE_ALL)
    return Enumeration(gpu_bus, hops, bars, rebar_size, rebar_sizes)
