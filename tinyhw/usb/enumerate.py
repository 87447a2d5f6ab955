"""PCIe enumeration behind the bridge (asm24-usb-bridge.md §8; pci-vfio-remote.md §3.3, §3.5, §3.9).

Walks the bridges hop by hop (checking each is a type-1 header before writing bus numbers
and windows), resizes BAR0 to its largest Resizable-BAR size, then sizes and places the
GPU's BARs. These config writes are part of opening the device over the bridge.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.errors import CompletionError, DeviceNotFound, TransportError
from tinyhw.transport.base import BarInfo
from tinyhw.usb.bridge import Asm24

#: window bases used by the host (§8): non-prefetchable at 256 MiB, prefetchable at 32 GiB; 2 MiB granule
NP_WINDOW_BASE = 0x1000_0000
PF_WINDOW_BASE = 0x8_0000_0000
GRANULE = 2 << 20
REBAR_CAP_ID = 0x15


@dataclass(frozen=True)
class Hop:
    bus: int
    vendor_id: int
    device_id: int


@dataclass
class Enumeration:
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
            ident = br.config_read(b, 0, 0, 0x00, 4)
            header = br.config_read(b, 0, 0, 0x0E, 1)
        except CompletionError as e:
            raise DeviceNotFound(f"no pci bridge answers at bus {b} behind the usb bridge ({e.message})") from e
        if header & 0x7F != 1:
            raise DeviceNotFound(
                f"expected a pci-to-pci bridge at {b:02x}:00.0 but its header type is 0x{header:02x}",
                hint="the topology behind this bridge is not the expected one; check the gpu",
            )
        hops.append(Hop(b, ident & 0xFFFF, ident >> 16))
        # primary 0, secondary b+1, subordinate gpu_bus, latency 0: written together (§8 step 1.1)
        br.config_write(b, 0, 0, 0x18, 4, ((b + 1) << 8) | (gpu_bus << 16))
        br.config_write(b, 0, 0, 0x20, 2, NP_WINDOW_BASE >> 16)
        br.config_write(b, 0, 0, 0x22, 2, 0xFFFF)
        br.config_write(b, 0, 0, 0x24, 2, 0x0000)
        br.config_write(b, 0, 0, 0x26, 2, 0xFFFF)
        br.config_write(b, 0, 0, 0x28, 4, PF_WINDOW_BASE >> 32)
        br.config_write(b, 0, 0, 0x2C, 4, 0xFFFFFFFF)
        br.config_write(b, 0, 0, 0x04, 1, 0x07)
    return hops


def find_ext_cap(br: Asm24, bus: int, cap_id: int) -> int | None:
    """Offset of an extended capability, walking from 0x100 with loop protection (§3.8)."""
    offset, seen = 0x100, set()
    while 0x100 <= offset < 0x1000 and offset not in seen:
        seen.add(offset)
        header = br.config_read(bus, 0, 0, offset, 4)
        if header in (0, 0xFFFFFFFF):
            return None
        if header & 0xFFFF == cap_id:
            return offset
        offset = (header >> 20) & 0xFFC
    return None


def resize_bar0(br: Asm24, bus: int) -> tuple[int | None, list[int]]:
    """Set the first Resizable-BAR entry to its largest supported size (§8 step 2, §3.9)."""
    cap = find_ext_cap(br, bus, REBAR_CAP_ID)
    if cap is None:
        return None, []
    supported = br.config_read(bus, 0, 0, cap + 4, 4) >> 4
    sizes = [1 << (k + 20) for k in range(28) if supported >> k & 1]
    if not sizes:
        return None, []
    k = supported.bit_length() - 1
    ctrl = br.config_read(bus, 0, 0, cap + 8, 4)
    br.config_write(bus, 0, 0, cap + 8, 4, (ctrl & ~0x3F00) | (k << 8))
    return 1 << (k + 20), sizes


def size_and_place_bars(br: Asm24, bus: int) -> list[BarInfo]:
    """Size every BAR of the GPU function and place memory BARs in the bridge windows (§8 step 3)."""
    cursors = {True: PF_WINDOW_BASE, False: NP_WINDOW_BASE}
    bars: list[BarInfo] = []
    index = 0
    while index < 6:
        reg = 0x10 + 4 * index
        low = br.config_read(bus, 0, 0, reg, 4)
        if low & 1:  # I/O BAR: size it, leave it unassigned (no I/O window behind the bridge)
            br.config_write(bus, 0, 0, reg, 4, 0xFFFFFFFF)
            mask = br.config_read(bus, 0, 0, reg, 4) & 0xFFFFFFFC
            br.config_write(bus, 0, 0, reg, 4, low)
            size = ((~mask) + 1) & 0xFFFF if mask else 0
            if size:
                bars.append(BarInfo(index, 0, size, "io"))
            index += 1
            continue
        is64 = (low >> 1) & 3 == 2
        pref = bool(low & 8)
        br.config_write(bus, 0, 0, reg, 4, 0xFFFFFFFF)
        mask = br.config_read(bus, 0, 0, reg, 4) & 0xFFFFFFF0
        bits = 32
        if is64:
            br.config_write(bus, 0, 0, reg + 4, 4, 0xFFFFFFFF)
            mask |= br.config_read(bus, 0, 0, reg + 4, 4) << 32
            bits = 64
        size = ((~mask) + 1) & ((1 << bits) - 1) if mask else 0
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
    hops = program_bridges(br, gpu_bus)
    try:
        ident = br.config_read(gpu_bus, 0, 0, 0x00, 4)
    except CompletionError as e:
        raise DeviceNotFound(
            f"no pci function answers at {gpu_bus:02x}:00.0 behind the usb bridge ({e.message})",
            hint="check that the gpu is seated and powered",
        ) from e
    if ident & 0xFFFF in (0xFFFF, 0):
        raise DeviceNotFound(f"no gpu at {gpu_bus:02x}:00.0 behind the usb bridge (id 0x{ident:08x})")
    br.config_write(gpu_bus, 0, 0, 0x04, 2, 0x0000)  # decode off while sizing (pci-vfio-remote.md §3.5)
    rebar_size, rebar_sizes = resize_bar0(br, gpu_bus)
    bars = size_and_place_bars(br, gpu_bus)
    br.config_write(gpu_bus, 0, 0, 0x04, 2, 0x0007)
    return Enumeration(gpu_bus, hops, bars, rebar_size, rebar_sizes)
