"""The Navi31 IFWI structure parser on the emulated board's synthetic image and broken variants of it."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.boards.navi31 import NAVI31
from tinyhw.formats.ifwi_layout import ITEMS, fletcher32, parse_ifwi, resolve_item
from tinyhw.mocks.amd import ifwi_image as ifwi
from tinyhw.mocks.amd.ifwi_image import build_image


def test_synthetic_image_structure() -> None:
    lay = parse_ifwi(build_image(board=NAVI31))
    assert lay.problems == [] and lay.notes == [] and lay.magic_ok
    d1, d2 = lay.psp_directories
    assert (d1.offset, d1.cookie, d1.count, d1.size, d1.checksum_ok) == (ifwi.PSP_DIR_1, "$PSP", 4, 0x50, True)
    assert d2.offset == ifwi.PSP_DIR_2 and d2.checksum_ok
    assert [(e.type, e.size, e.location) for e in d1.entries] == [
        (0x00, 0x400, ifwi.ITEM_04), (0x01, 0x20, ifwi.ISH_A), (0x08, 0x20000, ifwi.PAYLOAD_A),
        (0x62, 0x10000, ifwi.VBIOS_A)]
    assert lay.sgn_pointer == ifwi.SGN_TABLE and lay.sgn.count == 7 and lay.sgn.checksum_ok
    a, b = lay.ish
    assert (a.payload_location, a.firmware_id, a.slot_max_size, a.boot_priority) == (
        ifwi.PAYLOAD_A, 0x13C, ifwi.SLOT_SIZE, 1)
    assert b.payload_location == ifwi.PAYLOAD_B
    assert [v.offset for v in lay.vbios] == [ifwi.VBIOS_A, ifwi.VBIOS_B]


def test_every_item_resolves_like_the_spec_table() -> None:
    img = build_image(board=NAVI31)
    items = {it.item: (it.offset, it.size, it.error) for it in parse_ifwi(img).items}
    assert sorted(items) == sorted(ITEMS) == [*range(1, 9), *range(0x80, 0x8A)]
    assert items[0x01] == (0, 0x54, None) and items[0x80] == (0x1000, 4, None)
    assert items[0x89] == (0x1F0000, 0x100, None)
    assert items[0x02] == (0x2000, 0x50, None) and items[0x08] == (ifwi.PAYLOAD_A, ifwi.SLOT_SIZE, None)
    assert items[0x81] == (ifwi.SGN_TABLE, 0x80, None)
    off = ifwi.SGN_BLOBS
    for t, size in enumerate(ifwi.SGN_SIZES, start=1):
        assert items[0x81 + t] == (off, size, None)
        off += size
    assert resolve_item(img, 0x42).error == "unsupported item"


def test_region_names_cover_items_payloads_and_vbios() -> None:
    names = [r.name for r in parse_ifwi(build_image(board=NAVI31)).regions]
    assert "item 0x08 ISH A payload" in names and "ISH B payload" in names
    assert "psp update metadata (near 0x1ef000)" in names
    assert "vbios@0x40000 image 0 (x86)" in names and "vbios@0x120000 atom rom header" in names
    assert len(names) == len(set(names))


def test_broken_landmarks_are_precise_problems() -> None:
    img = bytearray(build_image(board=NAVI31))
    img[0:4] = b"\0\0\0\0"
    img[ifwi.PSP_DIR_2:ifwi.PSP_DIR_2 + 4] = b"XPSP"
    lay = parse_ifwi(bytes(img))
    assert lay.problems == ["0x0: 00000000 (expected the ifwi magic aa55aa55)",
                            "0x3000: $PSP directory 2: 5850535 (expected $PSP)".replace("5850535", b"XPSP".hex())]
    assert len(lay.psp_directories) == 1


def test_sgn_problems() -> None:
    img = bytearray(build_image(board=NAVI31))
    struct.pack_into("<I", img, ifwi.SGN_TABLE + 16 + 16, 1)  # entry 1 now also says type 1; type 2 has none
    lay = parse_ifwi(bytes(img))
    assert "item 0x82 (signature type 1): 2 $SGN entries of signature type 1 (expected exactly one)" in lay.problems
    assert "item 0x83 (signature type 2): 0 $SGN entries of signature type 2 (expected exactly one)" in lay.problems
    assert lay.sgn.checksum_ok is False  # the inferred checksum no longer matches: shown, not a problem
    img = bytearray(build_image(board=NAVI31))
    struct.pack_into("<I", img, ifwi.SGN_POINTER, 0x1FFFF0)
    lay = parse_ifwi(bytes(img))
    assert lay.sgn is None and lay.problems == ["0x1ffff0: $SGN table: ffffffff (expected $SGN)"]
    assert resolve_item(bytes(img), 0x85).error == "no $SGN at the pointer (0x1ffff0)"


def test_items_beyond_the_image_and_huge_counts() -> None:
    img = bytearray(build_image(board=NAVI31))
    struct.pack_into("<I", img, 0x12018, 0x300000)  # slot max size beyond the flash
    lay = parse_ifwi(bytes(img))
    assert lay.problems == [
        "item 0x08 (ISH A payload): item extends beyond IFWI ([0x20000, 0x320000) of 0x200000 bytes)"]
    img = bytearray(build_image(board=NAVI31))
    struct.pack_into("<I", img, ifwi.PSP_DIR_1 + 8, 0xFFFFFF)
    lay = parse_ifwi(bytes(img))
    assert lay.problems[0].startswith("0x2008: $PSP directory 1: 16777215 entries (item extends beyond IFWI")
    assert len(lay.problems) == 1  # the item's own error is not repeated
    assert lay.items[1].error.startswith("item extends beyond IFWI ([0x2000, 0x10002000)")


def test_truncated_and_wrong_sized_images() -> None:
    lay = parse_ifwi(build_image(board=NAVI31)[:0x12010])
    assert "0x12010: the image is 0x12010 bytes (expected 0x200000, the whole flash)" in lay.problems
    assert any(p.startswith("0x12000: ISH at 0x12000 needs 28 bytes") for p in lay.problems)
    assert any(p.startswith("0x13000: ISH at 0x13000") for p in lay.problems)
    assert parse_ifwi(b"").problems[0] == "0x0: empty (expected the ifwi magic aa55aa55)"


def test_first_ish_firmware_id_note_and_no_vbios_problem() -> None:
    img = bytearray(build_image(board=NAVI31))
    struct.pack_into("<I", img, 0x12014, 0x99)
    img[ifwi.VBIOS_A:ifwi.VBIOS_A + 2] = b"\xff\xff"
    img[ifwi.VBIOS_B:ifwi.VBIOS_B + 2] = b"\xff\xff"
    lay = parse_ifwi(bytes(img))
    assert lay.notes == ["0x12014: first ISH firmware id 0x99 (the spec expects 0x13c)"]
    # a flash image without its vbios is not one a board boots (and flash write refuses it): a problem
    assert lay.problems == ["no embedded vbios found (no 55aa option rom at a 512-byte boundary)"]


def test_fletcher32_matches_the_mock_writer() -> None:
    data = bytes(range(256)) * 3
    assert fletcher32(data) == ifwi.fletcher32(data)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=0x400))
def test_random_bytes_never_crash(data: bytes) -> None:
    parse_ifwi(b"\xaa\x55\xaa\x55" + data)


_IMG = build_image(board=NAVI31)
_HOT = [0, 0x1000, 0x2000, 0x2008, 0x3008, ifwi.SGN_TABLE + 8, ifwi.SGN_TABLE + 0x18, 0x12010, 0x12018,
        ifwi.VBIOS_A + 0x18, ifwi.VBIOS_A + 0x48, ifwi.VBIOS_A + 0x1C0, ifwi.VBIOS_A + 2]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(_HOT), st.integers(0, 3), st.integers(0, 255)), min_size=1, max_size=6),
       st.sampled_from([0x200000, 0x150000, 0x13004, 0x2010]))
def test_mutated_images_never_crash(flips: list[tuple[int, int, int]], size: int) -> None:
    img = bytearray(_IMG[:size])
    for off, k, val in flips:
        if off + k < len(img):
            img[off + k] = val
    lay = parse_ifwi(bytes(img))
    assert all(r.offset >= 0 and r.end <= len(img) for r in lay.regions)
