"""The synthetic VBIOS the emulated AD102 serves through its PROM window (BAR0 0x300000, 1 MiB).

Built from the layouts of specs/nv-bringup.md §6.2-§6.4 and §7.2 (and the NPDE, BIT, BIOSDATA, string
pointer, 'i' token, x86 and EFI header layouts recorded in tinyhw.formats.nvbios's docstring, from NVIDIA's
BIT documentation, envytools' nvbios and the UEFI specification): a base image (code type 0x00: init size
in byte 2, its bytes summing to 0) holding the BIT table at 0x1B0 (its header checksummed) with the
BIOSDATA ('B', v2), string pointer ('S', v2: pointers to the strings, not the strings), info ('i', v2) and
falcon-data (0x70) tokens; an EFI image (0x03, EfiSignature 0x0EF1); and an EXT image (0xE0) holding the
falcon ucode table: three V3 descriptors (FIRMWARE_SEC_LIC, FWSEC_PROD, FWSEC_DBG) each followed by its
signatures and its ucode, then two unused entries (descriptor pointer 0) as real ROMs have. Each ucode's
DMEM part holds an application-interface table whose DMEMMAPPER entry (id 4) leads to a 'DMAP' structure
with a command-in buffer, so the FWSEC-FRTS patch (§7.2) can be made on it.

INVENTED CONTENT: every byte that is not a structure field of these layouts is made up here: the
ucode and signature bytes (a SHA-256 stream seeded with their names), the BIOS version 95.02.18.80.87
(the form real AD102 boards print), the strings, the date, the EFI image body and the descriptor and
DMEM-mapper field values (load sizes, ucode ids, buffer offsets). No byte comes from a vendor VBIOS. The
layout is the real one, so the real parsers and tools read it as they would a dump of a real board.

Written from the spec, independently of the parser it exercises.
"""

from __future__ import annotations

import hashlib
import struct
from functools import cache

BASE_SIZE = 0xE000
EFI_SIZE = 0x1000
EXT_SIZE = 0x10000
BIT_OFFSET = 0x1B0
FALCON_PTR_AT = 0x400  # the u32 the BIT falcon-data token points at (inside the base image)
BIOSDATA_AT = 0x420  # 'B' v2 (0x21 bytes), then 'i' v2 (0x19 bytes), then 'S' v2 (0x15 bytes), then strings
INFO_AT = 0x448
STRINGS_AT = 0x468
STRING_AREA = 0x480
TABLE_IN_EXT = 0x100
DESC_IN_EXT = 0x200
SIG_COUNT = 3
SIG_SIZE = 384
STORED_SIZE = 0x2340
IMEM_LOAD = 0x2000  # IMEMLoadSize: the DMEM part of each ucode image starts here (§7.2 offsets are from it)
PKC_OFFSET = 0x10  # PKCDataOffset: 384 bytes, up to 0x190
INTERFACE_OFFSET = 0x190  # InterfaceOffset: the application-interface table
DMAP_OFFSET = 0x1C0  # the DMEMMAPPER entry's dmemOffset: the 64-byte 'DMAP' structure
CMD_IN, CMD_IN_SIZE, CMD_OUT, CMD_OUT_SIZE = 0x200, 0x100, 0x300, 0x40
APPS = ((0x05, 0x11), (0x85, 0x12), (0x45, 0x13))  # (application id, invented ucode id)
UNUSED_ENTRIES = ((0x01, 0x00), (0x07, 0x00))  # (application id, target): descriptor pointer 0
BIOS_VERSION = 0x95021880  # BIOSDATA version u32; with the OEM byte it prints 95.02.18.80.87
BIOS_OEM = 0x87
VERSION_TEXT = "95.02.18.80.87"
STRINGS = (b"NVIDIA AD102 emulated VGA BIOS (tinyhw, invented)", b"Version " + VERSION_TEXT.encode(),
           b"Copyright (C) tinyhw contributors (invented)", b"tinyhw", b"tinyhw", b"emulated AD102 board", b"A1")
DEVICE_ID = 0x2684


def invented_stream(seed: str, n: int) -> bytes:
    """Invented filler bytes, deterministic: a SHA-256 chain seeded with ``seed`` (the emulated NVIDIA board's
    ucode, signature and firmware contents)."""
    out = bytearray()
    block = seed.encode()
    while len(out) < n:
        block = hashlib.sha256(block).digest()
        out += block
    return bytes(out[:n])


def _rom_image(size: int, pcir_at: int, code_type: int, last: bool) -> bytearray:
    img = bytearray(size)
    struct.pack_into("<H", img, 0x00, 0xAA55)
    struct.pack_into("<H", img, 0x18, pcir_at)
    # PCIR: signature, vendor, device, device list, length 0x18, revision 3, class 030000, image length
    # (512-byte blocks), code revision, code type, indicator (bit 7: last image)
    struct.pack_into("<4sHHHHB3sHHBB", img, pcir_at, b"PCIR", 0x10DE, DEVICE_ID, 0, 0x18, 3,
                     b"\x00\x00\x03", size // 512, 1, code_type, 0x80 if last else 0)
    npde = (pcir_at + 0x18 + 0x0F) & ~0x0F
    struct.pack_into("<4sHHHB", img, npde, b"NPDE", 0x0101, 0x0B, size // 512, 0x80 if last else 0)
    return img


def _ucode(app: int) -> bytes:
    """The invented ucode image of one application with its DMEM part's §7.2 structures in place."""
    img = bytearray(invented_stream(f"ucode {app:#x}", STORED_SIZE))
    dmem = IMEM_LOAD
    img[dmem + PKC_OFFSET:dmem + PKC_OFFSET + 384] = bytes(384)  # the patch copies the signature here
    # application-interface header (version 1, header 4 bytes, entries 8 bytes, 2 entries), then entries
    struct.pack_into("<BBBBIIII", img, dmem + INTERFACE_OFFSET, 1, 4, 8, 2, 0x3, 0x0, 0x4, DMAP_OFFSET)
    struct.pack_into("<4sHH14I", img, dmem + DMAP_OFFSET, b"DMAP", 3, 64, CMD_IN, CMD_IN_SIZE, CMD_OUT,
                     CMD_OUT_SIZE, 0, 0, 0, 0x65A0B1C2, 0, 0, 0, 0xFFFF, 0, 0)
    img[dmem + CMD_IN:dmem + CMD_OUT + CMD_OUT_SIZE] = bytes(CMD_IN_SIZE + CMD_OUT_SIZE)
    return bytes(img)


def _base_image() -> bytearray:
    base = _rom_image(BASE_SIZE, 0x1C, 0x00, False)
    base[2] = BASE_SIZE // 512  # x86 init size in 512-byte blocks (the whole image)
    tokens = [(0x42, 2, 0x21, BIOSDATA_AT), (0x69, 2, 0x19, INFO_AT), (0x53, 2, 0x15, STRINGS_AT),
              (0x70, 2, 4, FALCON_PTR_AT)]
    struct.pack_into("<HIHBBBB", base, BIT_OFFSET, 0xB8FF, 0x00544942, 0x0100, 12, 6, len(tokens), 0)
    base[BIT_OFFSET + 11] = -sum(base[BIT_OFFSET:BIT_OFFSET + 12]) & 0xFF  # header bytes sum to 0 mod 256
    for i, tok in enumerate(tokens):
        struct.pack_into("<BBHH", base, BIT_OFFSET + 12 + 6 * i, *tok)
    struct.pack_into("<IB", base, BIOSDATA_AT, BIOS_VERSION, BIOS_OEM)  # the rest of BIOSDATA v2 stays 0
    struct.pack_into("<IBH6sH8sH", base, INFO_AT, BIOS_VERSION, BIOS_OEM, 0, bytes(6), 0, b"08/22/26", 0)
    at = STRING_AREA
    for i, text in enumerate(STRINGS):
        struct.pack_into("<HB", base, STRINGS_AT + 3 * i, at, len(text) + 1)
        base[at:at + len(text)] = text
        at += len(text) + 1
    base[0x1000:0x3000] = invented_stream("base image body", 0x2000)
    return base


@cache
def vbios_image() -> bytes:
    """The whole synthetic ROM (base + EFI + EXT images), about 124 KiB."""
    base = _base_image()
    efi = _rom_image(EFI_SIZE, 0x1C, 0x03, False)
    # EFI_PCI_EXPANSION_ROM_HEADER: init size (blocks), EfiSignature, subsystem (boot service driver), machine
    # type x64, no compression, EFI image at 0x100 (the body is invented, not a PE image)
    struct.pack_into("<HIHHH", efi, 2, EFI_SIZE // 512, 0x0EF1, 0x0B, 0x8664, 0)
    struct.pack_into("<H", efi, 0x16, 0x100)
    efi[0x100:EFI_SIZE] = invented_stream("efi image body", EFI_SIZE - 0x100)
    ext = _rom_image(EXT_SIZE, 0x1C, 0xE0, True)
    ext_start = BASE_SIZE + EFI_SIZE
    rom_off = ext_start - BASE_SIZE  # expansion_rom_off (§6.2): EXT start - last base image length
    struct.pack_into("<I", base, FALCON_PTR_AT, ext_start + TABLE_IN_EXT - rom_off)
    entries = len(APPS) + len(UNUSED_ENTRIES)
    struct.pack_into("<BBBBBB", ext, TABLE_IN_EXT, 1, 6, 6, entries, 3, 44)
    desc_size = 44 + SIG_COUNT * SIG_SIZE
    ucode_size = (STORED_SIZE + 255) & ~255
    at = DESC_IN_EXT
    for i, (app, ucode_id) in enumerate(APPS):
        struct.pack_into("<BBI", ext, TABLE_IN_EXT + 6 + 6 * i, app, 0x07, ext_start + at - rom_off)
        vdesc = 0x1 | (3 << 8) | (desc_size << 16)
        struct.pack_into("<9IHBBHH", ext, at, vdesc, STORED_SIZE, PKC_OFFSET, INTERFACE_OFFSET, 0, IMEM_LOAD, 0,
                         0, STORED_SIZE - IMEM_LOAD, 0x0400, ucode_id, SIG_COUNT, 0x0007, 0)
        ext[at + 44:at + desc_size] = invented_stream(f"signatures {app:#x}", SIG_COUNT * SIG_SIZE)
        ext[at + desc_size:at + desc_size + STORED_SIZE] = _ucode(app)
        at = (at + desc_size + ucode_size + 0xFF) & ~0xFF
    for k, (app, target) in enumerate(UNUSED_ENTRIES):
        struct.pack_into("<BBI", ext, TABLE_IN_EXT + 6 + 6 * (len(APPS) + k), app, target, 0)
    assert at <= EXT_SIZE
    base[BASE_SIZE - 1] = -sum(base[:BASE_SIZE - 1]) & 0xFF  # the x86 image's init bytes sum to 0 mod 256
    return bytes(base) + bytes(efi) + bytes(ext)
