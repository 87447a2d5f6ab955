"""Synthetic NVIDIA VBIOS images for the tests, built from the layouts of specs/nv-bringup.md §6.2-§6.4
(and the NPDE layout of nouveau's npde.c facts). Everything here is invented content in a real layout:
no byte of a vendor VBIOS. Kept independent of the parser (tinyhw.formats.nvbios) and of the emulated
board's own image builder (tinyhw.mocks.nvidia.nv_vbios).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field


@dataclass
class RomPlan:
    base_size: int = 0x10000  # bytes, a multiple of 512
    ext_size: int = 0x8000
    device_id: int = 0x2684
    bit_at: int = 0x1B0
    npde: bool = True
    falcon_image: bool = True  # a last image of code type 0x70
    efi_size: int = 0x800  # an image of code type 0x03 between the base and the EXT image (0: none)
    sig_count: int = 3
    sig_size: int = 384
    stored_size: int = 0x1234
    desc_version: int = 3
    apps: tuple[int, ...] = (0x05, 0x85, 0x45)
    unused_entries: int = 0  # falcon table entries with descriptor pointer 0 after the real ones
    interface: bool = True  # the ucode's application-interface table with a DMEMMAPPER ('DMAP') entry
    bios_version: tuple[int, int] = (0x95021880, 0x87)  # BIOSDATA: version u32, OEM u8 -> 95.02.18.80.87
    extra_tokens: list[tuple[int, int, int, int]] = field(default_factory=lambda: [(0x42, 2, 8, 0x300),
                                                                                   (0x49, 1, 0x10, 0x320)])


def _image_header(img: bytearray, sig: int, pcir: int) -> None:
    struct.pack_into("<H", img, 0, sig)
    struct.pack_into("<H", img, 0x18, pcir)


def _pcir(img: bytearray, at: int, device: int, blocks: int, code_type: int, last: bool) -> None:
    struct.pack_into("<4sHHHHB3sHHBB", img, at, b"PCIR", 0x10DE, device, 0, 0x18, 3, (0x030000).to_bytes(3, "little"),
                     blocks, 1, code_type, 0x80 if last else 0)


def _npde(img: bytearray, at: int, blocks: int, last: bool) -> None:
    struct.pack_into("<4sHHHB", img, at, b"NPDE", 0x0101, 0x0B, blocks, 0x80 if last else 0)


def build_rom(plan: RomPlan | None = None) -> tuple[bytes, dict]:
    """(rom bytes, what the test expects: offsets of the structures)."""
    p = plan or RomPlan()
    n_images = 2 + bool(p.falcon_image) + bool(p.efi_size)
    base = bytearray(p.base_size)
    _image_header(base, 0xAA55, 0x40)
    base[2] = p.base_size // 512  # x86 init size (512-byte blocks); the checksum byte is set last
    _pcir(base, 0x40, p.device_id, p.base_size // 512, 0x00, False)
    if p.npde:
        _npde(base, 0x60, p.base_size // 512, False)  # (0x40 + 0x18 + 15) & ~15 = 0x60
    # BIT header + tokens; the falcon-data token points at a u32 in the base image
    tokens = [*p.extra_tokens, (0x70, 2, 4, 0x340)]
    struct.pack_into("<HIHBBBB", base, p.bit_at, 0xB8FF, 0x00544942, 0x0100, 12, 6, len(tokens), 0)
    base[p.bit_at + 11] = -sum(base[p.bit_at:p.bit_at + 12]) & 0xFF  # the 12 header bytes sum to 0
    for i, (tid, ver, size, ptr) in enumerate(tokens):
        struct.pack_into("<BBHH", base, p.bit_at + 12 + 6 * i, tid, ver, size, ptr)
        if tid == 0x42:
            struct.pack_into("<IB", base, ptr, *p.bios_version)
    ext = bytearray(p.ext_size)
    _image_header(ext, 0xAA55, 0x20)
    _pcir(ext, 0x20, p.device_id, p.ext_size // 512, 0xE0, not p.falcon_image)
    if p.npde:
        _npde(ext, 0x40, p.ext_size // 512, not p.falcon_image)
    # falcon ucode table inside the EXT image; its pointers are relative to expansion_rom_off = EXT start -
    # base image length (= the EFI image's length here)
    ext_start = p.base_size + p.efi_size
    rom_off = ext_start - p.base_size
    table = ext_start + 0x100
    struct.pack_into("<I", base, 0x340, table - rom_off)
    struct.pack_into("<BBBBBB", ext, 0x100, 1, 6, 6, len(p.apps) + p.unused_entries, 3, DESC)
    for k in range(p.unused_entries):
        struct.pack_into("<BBI", ext, 0x106 + 6 * (len(p.apps) + k), 0x50 + k, 7, 0)
    desc_size = 44 + p.sig_count * p.sig_size
    descs = {}
    at = ext_start + 0x200
    for i, app in enumerate(p.apps):
        struct.pack_into("<BBI", ext, 0x106 + 6 * i, app, 7, at - rom_off)
        local = at - ext_start
        vdesc = 1 | (p.desc_version << 8) | (desc_size << 16)
        # PKCDataOffset 0x10, InterfaceOffset 0x190, IMEMLoadSize 0x1000 (DMEM offsets are from IMEMLoadSize)
        struct.pack_into("<9IHBBHH", ext, local, vdesc, p.stored_size, 0x10, 0x190, 0, 0x1000, 0, 0, 0x800,
                         0x0400, 0x11 + i, p.sig_count, 0x7, 0)
        for k in range(p.sig_count):
            s = local + 44 + k * p.sig_size
            ext[s:s + p.sig_size] = bytes([0xA0 + k]) * p.sig_size  # invented signature bytes
        ucode = (p.stored_size + 255) & ~255
        u = local + desc_size
        ext[u:u + ucode] = bytes([0x5A]) * ucode  # invented ucode bytes
        if p.interface:  # §7.2: header (v1, 4, 8, 1 entry), entry (DMEMMAPPER 4 -> 0x1c0), DMAP at 0x1c0
            struct.pack_into("<BBBBII", ext, u + 0x1000 + 0x190, 1, 4, 8, 1, 4, 0x1C0)
            struct.pack_into("<4sHH14I", ext, u + 0x1000 + 0x1C0, b"DMAP", 3, 64, 0x200, 0x30, 0x230, 4,
                             0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        descs[app] = at
        at += (desc_size + ucode + 0xFF) & ~0xFF
    assert at - ext_start <= p.ext_size, "ext image too small for the plan"
    base[p.base_size - 1] = -sum(base[:-1]) & 0xFF  # the x86 image's init bytes sum to 0
    rom = bytes(base)
    if p.efi_size:
        efi = bytearray(p.efi_size)
        _image_header(efi, 0xAA55, 0x1C)
        # EFI_PCI_EXPANSION_ROM_HEADER: init size (blocks), EfiSignature 0x0EF1, subsystem 0xB, machine 0x8664
        struct.pack_into("<HIHHH", efi, 2, p.efi_size // 512, 0x0EF1, 0xB, 0x8664, 0)
        _pcir(efi, 0x1C, p.device_id, p.efi_size // 512, 0x03, False)
        if p.npde:
            _npde(efi, 0x40, p.efi_size // 512, False)
        rom += bytes(efi)
    rom += bytes(ext)
    if p.falcon_image:
        fal = bytearray(0x400)
        _image_header(fal, 0xAA55, 0x20)
        _pcir(fal, 0x20, p.device_id, 2, 0x70, True)
        rom += bytes(fal)
    expect = {"images": n_images, "bit": p.bit_at, "table": table, "descs": descs, "desc_size": desc_size,
              "expansion_rom_off": rom_off, "ucode": (p.stored_size + 255) & ~255}
    return rom, expect


DESC = 44


def fix_x86_checksum(rom: bytearray, base_size: int = 0x10000, at: int = 0) -> None:
    """Re-balance the x86 image's last byte after a test edited its bytes (they must sum to 0 mod 256)."""
    rom[at + base_size - 1] = (rom[at + base_size - 1] - sum(rom[at:at + base_size])) & 0xFF
