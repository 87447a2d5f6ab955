"""Navi31 (RX 7900 series) board facts.

Sources: specs/navi31-spi-flash.md §0 and §a (ids, BAR5 size, flash geometry, JEDEC id),
specs/pci-vfio-remote.md §3.14 (BAR layout of a real Navi31: BAR0/BAR2 64-bit
prefetchable, BAR4 I/O, BAR5 32-bit registers; ReBAR sizes), specs/asm24-usb-bridge.md §8
(topology behind the ASM24 bridge: bridges on buses 0-3, the GPU at bus 4).

These are facts only: both the drivers and the emulators may read them; no behaviour lives here.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class BarSpec:
    index: int
    role: str  # "vram", "doorbell", "io", "mmio"
    kind: str  # "memory" or "io"
    size: int  # power-on size (BAR0 is resizable)
    is_64bit: bool
    prefetchable: bool


@dataclass(frozen=True)
class PciFunctionSpec:
    vendor_id: int
    device_id: int
    revision: int
    class_code: int
    subsystem_vendor_id: int
    subsystem_id: int


@dataclass(frozen=True)
class BoardSpec:
    name: str
    function: PciFunctionSpec
    bars: tuple[BarSpec, ...]
    rebar_sizes: tuple[int, ...]  # sizes BAR0 may take, in bytes
    link_max_speed: int  # PCIe speed code (4 = 16 GT/s)
    link_max_width: int
    flash_size: int
    flash_jedec: bytes
    flash_sector: int
    flash_page: int


NAVI31 = BoardSpec(
    name="navi31",
    function=PciFunctionSpec(
        vendor_id=0x1002,
        device_id=0x744C,
        revision=0xC8,
        class_code=0x030000,
        # A real board's subsystem: Sapphire NITRO+ RX 7900 XTX Vapor-X (pci.ids "1da2 e471";
        # also the example of pci-vfio-remote.md §3.14).
        subsystem_vendor_id=0x1DA2,
        subsystem_id=0xE471,
    ),
    bars=(
        BarSpec(0, "vram", "memory", 256 * MiB, True, True),
        BarSpec(2, "doorbell", "memory", 2 * MiB, True, True),
        BarSpec(4, "io", "io", 256, False, False),
        BarSpec(5, "mmio", "memory", 1 * MiB, False, False),
    ),
    # ReBAR capability as on the Navi31 of pci-vfio-remote.md §3.14: 256 MiB ... 32 GiB.
    rebar_sizes=tuple(256 * MiB << k for k in range(8)),
    link_max_speed=4,
    link_max_width=16,
    flash_size=2 * MiB,
    flash_jedec=bytes([0xC8, 0x60, 0x15]),
    flash_sector=4096,
    flash_page=256,
)

#: BAR index of the register aperture on Navi31.
MMIO_BAR = 5

#: Where the GPU sits behind the ASM24 bridge (asm24-usb-bridge.md §8).
USB_GPU_BUS = 4
