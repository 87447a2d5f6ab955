"""The synthetic flash image (tinyhw.mocks.amd.ifwi_image) against specs/navi31-spi-flash.md §g."""

from __future__ import annotations

import hashlib
import struct

from tinyhw.boards.navi31 import NAVI31
from tinyhw.mocks.amd import ifwi_image
from tinyhw.mocks.amd.ifwi_image import build_image, build_vbios, fletcher32

#: Guards determinism: any change to the synthetic image must be deliberate (update this constant).
IMAGE_SHA256 = "610db667ffe572b84ed7c2cdea143db302a5712cca064b6142344cb8e64ca874"

IMAGE = build_image(board=NAVI31)


def u32(off: int) -> int:
    return struct.unpack_from("<I", IMAGE, off)[0]


def test_size_and_determinism() -> None:
    assert len(IMAGE) == 0x200000
    assert hashlib.sha256(IMAGE).hexdigest() == IMAGE_SHA256
    build_image.cache_clear()
    assert build_image(board=NAVI31) == IMAGE


def test_ifwi_landmarks() -> None:
    assert IMAGE[0:4] == bytes([0xAA, 0x55, 0xAA, 0x55])
    assert IMAGE[0x2000:0x2004] == b"$PSP" and IMAGE[0x3000:0x3004] == b"$PSP"
    assert IMAGE[:0x100000] != IMAGE[0x100000:]  # not a mirrored image


def test_psp_directories_are_consistent() -> None:
    for base in (0x2000, 0x3000):
        count = u32(base + 8)
        assert 1 <= count < 64
        size = (count + 1) * 16
        assert u32(base + 4) == fletcher32(IMAGE[base + 8:base + size])
        for i in range(count):
            _, length, location, _ = struct.unpack_from("<4I", IMAGE, base + 16 + 16 * i)
            assert location + length <= len(IMAGE)


def test_sgn_table_has_exactly_one_entry_per_type() -> None:
    t = u32(0x1000)
    assert IMAGE[t:t + 4] == b"$SGN"
    entries = [struct.unpack_from("<4I", IMAGE, t + 0x10 + 16 * i) for i in range(u32(t + 8))]
    assert sorted(e[0] for e in entries) == list(range(1, 8))
    for _, _, size, off in entries:
        assert size > 0 and off + size <= len(IMAGE)
        assert IMAGE[off:off + size] != b"\xff" * size


def test_ish_descriptors_point_at_payloads() -> None:
    for ish in (0x12000, 0x13000):
        payload, fw_id, slot = u32(ish + 0x10), u32(ish + 0x14), u32(ish + 0x18)
        assert fw_id == 0x13C
        assert payload + slot <= len(IMAGE)
        assert sum(struct.unpack_from("<8I", IMAGE, ish)) & 0xFFFFFFFF == 0
    a, b, slot = u32(0x12010), u32(0x13010), u32(0x12018)
    assert IMAGE[a:a + slot] == IMAGE[b:b + slot]
    assert IMAGE[0x1F0000:0x1F0100] != b"\xff" * 0x100  # item 0x89
    assert IMAGE[0x1EF000:0x1EF004] == b"$MET"


def find_vbios(image: bytes) -> list[int]:
    """§g.3 scan: 512-byte aligned 55 AA with the ATI magic at +0x30."""
    return [off for off in range(0, len(image), 512)
            if image[off:off + 2] == b"\x55\xaa" and image[off + 0x30:off + 0x3A] == b" 761295520"]


def test_vbios_found_at_128k_aligned_offsets() -> None:
    offsets = find_vbios(IMAGE)
    assert offsets == [ifwi_image.VBIOS_A, ifwi_image.VBIOS_B]
    assert all(off % 0x20000 == 0 for off in offsets)


def test_vbios_headers() -> None:
    rom = build_vbios(board=NAVI31)
    size = rom[2] * 512
    assert size == len(rom) and sum(rom[:size]) % 256 == 0
    pcir = struct.unpack_from("<H", rom, 0x18)[0]
    assert rom[pcir:pcir + 4] == b"PCIR"
    vendor, device = struct.unpack_from("<HH", rom, pcir + 4)
    assert (vendor, device) == (0x1002, 0x744C)
    assert struct.unpack_from("<H", rom, pcir + 0x0A)[0] >= 0x18
    assert rom[pcir + 0x0D:pcir + 0x10] == bytes([0, 0, 3])  # class 030000
    assert struct.unpack_from("<H", rom, pcir + 0x10)[0] == rom[2]
    assert rom[pcir + 0x15] & 0x80
    atom = struct.unpack_from("<H", rom, 0x48)[0]
    assert rom[atom + 4:atom + 8] == b"ATOM"
    strings = struct.unpack_from("<H", rom, 0x6E)[0]
    assert rom[0x2F] == 1
    part = rom[strings:rom.index(b"\0", strings)]
    assert part == ifwi_image.PART_NUMBER and all(0x20 <= c <= 0x7A for c in part)
    anchor = rom.index(b"ATOMBIOSBK-AMD", strings, atom)
    assert rom[anchor + 18:anchor + 18 + 4] == b"099."
    assert rom[0x50:0x50 + 14] == b"01/02/26 03:04"


def test_erased_and_random_regions_exist() -> None:
    pages = [IMAGE[p:p + 256] for p in range(0, len(IMAGE), 256)]
    erased = sum(p == b"\xff" * 256 for p in pages)
    assert 0.3 < erased / len(pages) < 0.9
    assert IMAGE[0x20000:0x20100] != b"\xff" * 256  # payload firmware
    assert IMAGE[0x180000:0x180100] != b"\xff" * 256  # the upper half has data too
