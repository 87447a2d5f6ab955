"""The synthetic VBIOS the emulated AD102 serves through its PROM window (BAR0 0x300000, 1 MiB).

Built from the layouts of specs/nv-bringup.md §6.2-§6.4 (and the NPDE layout recorded in
tinyhw.formats.nvbios's docstring): a base image (code type 0x00) holding the BIT table at 0x1B0, an EFI
image (0x03), and an EXT image (0xE0) holding the falcon ucode table with three V3 descriptors
(FIRMWARE_SEC_LIC, FWSEC_PROD, FWSEC_DBG), each followed by its signatures and its ucode.

INVENTED CONTENT: every byte that is not a structure field of the spec's layouts is made up here: the
ucode and signature bytes (a SHA-256 stream seeded with their names), the version string, the BIOSDATA
token contents, the EFI image body and the descriptor field values (load sizes, ucode ids). No byte comes
from a vendor VBIOS. The layout is the real one, so the real parsers and tools read it as they would a
dump of a real board.

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
BIOSDATA_AT = 0x420
TABLE_IN_EXT = 0x100
DESC_IN_EXT = 0x200
SIG_COUNT = 3
SIG_SIZE = 384
STORED_SIZE = 0x2340
APPS = ((0x05, 0x11), (0x85, 0x12), (0x45, 0x13))  # (application id, invented ucode id)
VERSION = b"95.02.3c.00.01 (tinyhw invented)"
DEVICE_ID = 0x2684


def _stream(seed: str, n: int) -> bytes:
    """Invented filler bytes, deterministic."""
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


@cache
def vbios_image() -> bytes:
    """The whole synthetic ROM (base + EFI + EXT images), about 124 KiB."""
    base = _rom_image(BASE_SIZE, 0x1C, 0x00, False)
    tokens = [(0x42, 2, 0x20, BIOSDATA_AT), (0x53, 1, len(VERSION), BIOSDATA_AT + 0x20),
              (0x70, 2, 4, FALCON_PTR_AT)]
    struct.pack_into("<HIHBBBB", base, BIT_OFFSET, 0xB8FF, 0x00544942, 0x0100, 12, 6, len(tokens), 0)
    for i, tok in enumerate(tokens):
        struct.pack_into("<BBHH", base, BIT_OFFSET + 12 + 6 * i, *tok)
    base[BIOSDATA_AT:BIOSDATA_AT + 0x20] = _stream("biosdata", 0x20)
    base[BIOSDATA_AT + 0x20:BIOSDATA_AT + 0x20 + len(VERSION)] = VERSION
    base[0x1000:0x3000] = _stream("base image body", 0x2000)
    efi = _rom_image(EFI_SIZE, 0x1C, 0x03, False)
    efi[0x100:EFI_SIZE] = _stream("efi image body", EFI_SIZE - 0x100)
    ext = _rom_image(EXT_SIZE, 0x1C, 0xE0, True)
    ext_start = BASE_SIZE + EFI_SIZE
    rom_off = ext_start - BASE_SIZE  # expansion_rom_off (§6.2): EXT start - last base image length
    struct.pack_into("<I", base, FALCON_PTR_AT, ext_start + TABLE_IN_EXT - rom_off)
    struct.pack_into("<BBBBBB", ext, TABLE_IN_EXT, 1, 6, 6, len(APPS), 3, 44)
    desc_size = 44 + SIG_COUNT * SIG_SIZE
    ucode_size = (STORED_SIZE + 255) & ~255
    at = DESC_IN_EXT
    for i, (app, ucode_id) in enumerate(APPS):
        struct.pack_into("<BBI", ext, TABLE_IN_EXT + 6 + 6 * i, app, 0x07, ext_start + at - rom_off)
        vdesc = 0x1 | (3 << 8) | (desc_size << 16)
        struct.pack_into("<9IHBBHH", ext, at, vdesc, STORED_SIZE, 0x40, 0x80, 0, 0x2000, 0, 0, 0x340,
                         0x0400, ucode_id, SIG_COUNT, 0x0007, 0)
        ext[at + 44:at + desc_size] = _stream(f"signatures {app:#x}", SIG_COUNT * SIG_SIZE)
        ext[at + desc_size:at + desc_size + STORED_SIZE] = _stream(f"ucode {app:#x}", STORED_SIZE)
        at = (at + desc_size + ucode_size + 0xFF) & ~0xFF
    assert at <= EXT_SIZE
    return bytes(base) + bytes(efi) + bytes(ext)
