"""The WPR meta (``GspFwWprMeta``) and the WPR2/FRTS layout the CPU computes on Ampere and Ada.

Spec: specs/nv-bringup.md §10 (the 256-byte structure: magic, revision, then u64 fields in the order listed,
pmuReservedSize u32 @244, verified u64 @248) and §10.1 (the layout from the top of VRAM downwards). NVIDIA's
535.113.01 and 570.144 headers agree on the 24 u64 from @16 that :func:`pack` writes; only the tail differs
(570's pmuReservedSize @244 is padding on 535), and tinyhw leaves it zero (docs/nv-gsp-layouts.md). The
sizes come from the chip's :class:`~tinyhw.boot.nv.gpu.ChipParams`, so another family only changes those.
§7.1: the FRTS offset FWSEC carves must equal ``frtsOffset`` (VRAM - 2 MiB on both families).
"""

from __future__ import annotations

import struct
from dataclasses import asdict, dataclass

from tinyhw.boot.nv.gpu import ChipParams

WPR_META_MAGIC = 0xDC3AAE21371A60B3
WPR_META_REVISION = 1
WPR_META_SIZE = 256
SIGNATURE_SIZE = 0x1000
MIB = 1 << 20
#: §10: the u64 fields after magic and revision, in order (offset 16 on).
FIELDS = ("sysmemAddrOfRadix3Elf", "sizeOfRadix3Elf", "sysmemAddrOfBootloader", "sizeOfBootloader",
          "bootloaderCodeOffset", "bootloaderDataOffset", "bootloaderManifestOffset", "sysmemAddrOfSignature",
          "sizeOfSignature", "gspFwRsvdStart", "nonWprHeapOffset", "nonWprHeapSize", "gspFwWprStart",
          "gspFwHeapOffset", "gspFwHeapSize", "gspFwOffset", "bootBinOffset", "frtsOffset", "frtsSize",
          "gspFwWprEnd", "fbSize", "vgaWorkspaceOffset", "vgaWorkspaceSize", "bootCount")


def _down(value: int, align: int) -> int:
    return value // align * align


@dataclass(frozen=True)
class WprLayout:
    """The FB offsets of §10.1, from the top of VRAM down."""

    fb_size: int
    vga_workspace_offset: int
    vga_workspace_size: int
    frts_offset: int
    frts_size: int
    boot_bin_offset: int
    gsp_fw_offset: int
    heap_offset: int
    heap_size: int
    wpr_start: int
    wpr_end: int
    non_wpr_heap_offset: int
    non_wpr_heap_size: int

    def to_doc(self) -> dict[str, int]:
        """The layout as a JSON-ready dict of integers."""
        return asdict(self)


def compute(vram_size: int, bootloader_size: int, radix3_size: int, chip: ChipParams) -> WprLayout:
    """§10.1 for a GPU of ``vram_size`` bytes, a bootloader image of ``bootloader_size`` and a GSP-RM image of
    ``radix3_size`` bytes."""
    if vram_size < 512 * MIB:
        raise ValueError(f"vram of 0x{vram_size:x} bytes is too small for the wpr layout")
    vga = vram_size - chip.vga_workspace_size
    frts = vga - chip.frts_size
    boot_bin = frts - bootloader_size
    gsp_fw = _down(boot_bin - radix3_size, 64 << 10)
    heap = _down(gsp_fw - chip.heap_size, MIB)
    wpr_start = _down(heap - 0x1000, MIB)
    non_wpr = _down(wpr_start - chip.non_wpr_heap_size, MIB)
    return WprLayout(vram_size, vga, chip.vga_workspace_size, frts, chip.frts_size, boot_bin, gsp_fw, heap,
                     chip.heap_size, wpr_start, vga, non_wpr, chip.non_wpr_heap_size)


@dataclass(frozen=True)
class WprSources:
    """The system-memory addresses and sizes the WPR meta points at (§10 "common values")."""

    radix3_address: int
    radix3_size: int
    bootloader_address: int
    bootloader_size: int
    bootloader_code_offset: int
    bootloader_data_offset: int
    bootloader_manifest_offset: int
    signature_address: int


def pack(layout: WprLayout, src: WprSources) -> bytes:
    """The 256-byte GspFwWprMeta for ``layout`` and ``src``."""
    values = {
        "sysmemAddrOfRadix3Elf": src.radix3_address, "sizeOfRadix3Elf": src.radix3_size,
        "sysmemAddrOfBootloader": src.bootloader_address, "sizeOfBootloader": src.bootloader_size,
        "bootloaderCodeOffset": src.bootloader_code_offset, "bootloaderDataOffset": src.bootloader_data_offset,
        "bootloaderManifestOffset": src.bootloader_manifest_offset, "sysmemAddrOfSignature": src.signature_address,
        "sizeOfSignature": SIGNATURE_SIZE, "gspFwRsvdStart": layout.non_wpr_heap_offset,
        "nonWprHeapOffset": layout.non_wpr_heap_offset, "nonWprHeapSize": layout.non_wpr_heap_size,
        "gspFwWprStart": layout.wpr_start, "gspFwHeapOffset": layout.heap_offset,
        "gspFwHeapSize": layout.heap_size, "gspFwOffset": layout.gsp_fw_offset,
        "bootBinOffset": layout.boot_bin_offset, "frtsOffset": layout.frts_offset, "frtsSize": layout.frts_size,
        "gspFwWprEnd": layout.wpr_end, "fbSize": layout.fb_size,
        "vgaWorkspaceOffset": layout.vga_workspace_offset, "vgaWorkspaceSize": layout.vga_workspace_size,
        "bootCount": 0,
    }
    out = bytearray(WPR_META_SIZE)
    struct.pack_into("<QQ", out, 0, WPR_META_MAGIC, WPR_META_REVISION)
    struct.pack_into(f"<{len(FIELDS)}Q", out, 16, *(values[f] for f in FIELDS))
    return bytes(out)
