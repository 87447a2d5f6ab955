"""ATOM VBIOS parsing and board identity, from the emulated board's synthetic VBIOS and variants of it."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.boards.navi31 import NAVI31
from tinyhw.formats.vbios import (
    find_vbios,
    identity_differences,
    is_vbios,
    parse_vbios,
    vbios_identities,
    vbios_identity,
)
from tinyhw.mocks.amd import ifwi_image
from tinyhw.mocks.amd.ifwi_image import build_image, build_vbios

STRINGS, PCIR, ATOM = 0x110, 0x1C0, 0x240  # where build_vbios puts them


def fix_checksum(img: bytearray) -> bytearray:
    img[-1] = 0
    img[-1] = (-sum(img)) & 0xFF
    return img


def test_synthetic_vbios_fields() -> None:
    vb = parse_vbios(build_vbios(board=NAVI31))
    assert vb.problems == [] and vb.notes == [] and vb.ati_magic
    assert vb.part_number == ifwi_image.PART_NUMBER.decode()
    assert vb.version == "099.099.099.099.999999"  # 18 characters after the anchor, <= 32
    assert vb.name == "TINYHW SYNTHETIC NAVI31 VBIOS"  # trailing spaces trimmed
    assert vb.build_date == "2026/01/02 03:04"
    assert vb.asic_info == "NAVI31 PCI_EXP GDDR6"
    assert vb.checksum_ok is True
    (im,) = vb.images
    assert (im.offset, im.length) == (0, ifwi_image.VBIOS_SIZE)
    p = im.pcir
    assert (p.offset, p.vendor_id, p.device_id, p.class_code, p.image_length, p.code_type, p.last) == \
        (PCIR, 0x1002, 0x744C, 0x030000, 0x10000, 0, True)
    a = vb.atom
    assert (a.offset, a.signature, a.format_revision, a.content_revision) == (ATOM, "ATOM", 2, 2)
    assert a.structure_size == 0x28
    assert (a.master_command_table, a.master_data_table, a.psp_dir_table_offset) == (0x400, 0x600, 0x2000)
    assert a.pci_info_offset == PCIR


def test_identity_found_in_the_emulated_boards_ifwi() -> None:
    img = build_image(board=NAVI31)
    ids = vbios_identities(img)
    assert [i.offset for i in ids] == [ifwi_image.VBIOS_A, ifwi_image.VBIOS_B]
    ident = vbios_identity(img)
    assert ident is not None and ident.offset == 0x40000
    assert ident.key() == ("113-TINYHW31-SYNTH", 0x1002, 0x744C)
    assert ident.version == "099.099.099.099.999999" and ident.checksum_ok
    assert "part 113-TINYHW31-SYNTH, pci 1002:744c, version 099.099.099.099.999999" in ident.describe()
    assert identity_differences(ident, ids[1]) == []
    assert type(ident).from_doc(ident.to_doc()) == ident  # a flash journal can record it and compare later
    assert vbios_identity(b"\xff" * 0x200000) is None


def test_identity_differences_name_part_number_and_ids() -> None:
    img = bytearray(build_image(board=NAVI31))
    base = ifwi_image.VBIOS_A
    img[base + STRINGS:base + STRINGS + 3] = b"999"
    struct.pack_into("<H", img, base + PCIR + 6, 0x7480)
    other = vbios_identity(bytes(img))
    diffs = identity_differences(vbios_identity(build_image(board=NAVI31)), other)
    assert diffs == ["part number '113-TINYHW31-SYNTH' != '999-TINYHW31-SYNTH'", "pci ids 1002:744c != 1002:7480"]


def test_version_change_is_not_an_identity_difference() -> None:
    img = bytearray(build_vbios(board=NAVI31))
    at = img.find(b"VER099")
    img[at + 3:at + 6] = b"100"
    a, b = parse_vbios(build_vbios(board=NAVI31)).identity(), parse_vbios(bytes(img)).identity()
    assert a.version != b.version and identity_differences(a, b) == []
    assert b.checksum_ok is False  # the byte changed without fixing the checksum: BAD, and still parsed


def test_part_number_fallbacks() -> None:
    img = bytearray(build_vbios(board=NAVI31))
    img[0x2F] = 0  # no strings: the part number comes from 0x80
    assert parse_vbios(bytes(img)).part_number == "113-TINYHW31-SYNTH"
    assert parse_vbios(bytes(img)).name == ""  # the name needs the string count
    img[0x80:0x94] = b"\0" * 0x14  # empty at 0x80: search "ATOMBIOS" in 3..1024 and take what follows
    img[0xA8:0xBA] = b"ATOMBIOS\0PN-123 \x01"  # the first "ATOMBIOS" wins (the version's comes later)
    assert parse_vbios(bytes(img)).part_number == "PN-123 "
    img[0xA8:0xB0] = b"XXXXXXXX"
    assert parse_vbios(bytes(img)).part_number == "BK-AMD VER099.099.099.099.999999"
    at = img.find(b"ATOMBIOSBK")
    img[at:at + 8] = b"XXXXXXXX"
    assert parse_vbios(bytes(img)).part_number == ""
    long = bytearray(build_vbios(board=NAVI31))
    long[STRINGS:STRINGS + 60] = b"A" * 60  # at most 43 characters, only 0x20..0x7a
    assert len(parse_vbios(bytes(long)).part_number) == 43


def test_version_fallback_range_and_missing_anchor() -> None:
    img = bytearray(build_vbios(board=NAVI31))
    struct.pack_into("<H", img, 0x6E, 0x300)  # strings pointer after the atom header: search 3..1024 instead
    assert parse_vbios(bytes(img)).version == "099.099.099.099.999999"
    at = img.find(b"ATOMBIOSBK-AMD")
    img[at:at + 4] = b"XXXX"
    assert parse_vbios(bytes(img)).version == ""


def test_date_and_name_quirks() -> None:
    img = bytearray(build_vbios(board=NAVI31))
    img[0x50:0x5E] = b"not a date!!!!"
    at = STRINGS + len(ifwi_image.PART_NUMBER) + 1
    img[at:at + 2] = b"XY"
    vb = parse_vbios(bytes(img))
    assert vb.build_date is None
    assert vb.notes == [f"0x{at:x}: 5859 after the strings (expected cr lf)"]


def test_atom_header_and_pcir_problems() -> None:
    img = bytearray(build_vbios(board=NAVI31))
    img[ATOM + 4:ATOM + 8] = b"NOPE"
    vb = parse_vbios(bytes(img))
    assert vb.atom is None and vb.problems == [f"0x{ATOM + 4:x}: atom rom header signature b'NOPE' (expected b'ATOM')"]
    mota = bytearray(build_vbios(board=NAVI31))
    mota[ATOM + 4:ATOM + 8] = b"MOTA"
    assert parse_vbios(bytes(mota)).atom.signature == "MOTA"
    img = bytearray(build_vbios(board=NAVI31))
    img[PCIR:PCIR + 4] = b"PCIX"
    vb = parse_vbios(bytes(img))
    assert vb.images[0].pcir is None and vb.problems == [f"0x{PCIR:x}: 50434958 at the pcir pointer (expected 'PCIR')"]
    short = bytearray(build_vbios(board=NAVI31))
    struct.pack_into("<H", short, PCIR + 0xA, 0x10)
    assert "pcir structure length 0x10 (expected at least 0x18)" in parse_vbios(bytes(short)).problems[0]


def test_image_chain_with_an_efi_image() -> None:
    legacy = bytearray(build_vbios(board=NAVI31))
    legacy[PCIR + 0x15] = 0  # not the last image
    fix_checksum(legacy)
    efi = bytearray(0x800)
    efi[0:3] = bytes([0x55, 0xAA, 4])
    struct.pack_into("<H", efi, 0x18, 0x40)
    efi[0x40:0x58] = b"PCIR" + struct.pack("<HHHHB3sHHBBH", 0x1002, 0x744C, 0, 0x18, 0, b"\0\0\x03", 4, 0, 3, 0x80, 0)
    fix_checksum(efi)
    vb = parse_vbios(bytes(legacy + efi))
    assert [(im.offset, im.pcir.code_type, im.checksum_ok) for im in vb.images] == [(0, 0, True), (0x10000, 3, True)]
    assert vb.problems == []
    assert [r.name for r in vb.regions()][:3] == ["vbios image 0 (x86)", "vbios image 0 pcir", "vbios image 1 (efi)"]
    # the chain's second image is not found again as a VBIOS of its own
    assert len(find_vbios(bytes(legacy + efi))) == 1
    broken = parse_vbios(bytes(legacy) + b"\0" * 0x800)
    assert broken.problems == ["0x10000: 0000 (expected the option-rom signature 55aa)"]


def test_truncated_vbios_reports_what_it_read() -> None:
    vb = parse_vbios(build_vbios(board=NAVI31)[:0x1000])
    assert vb.part_number == "113-TINYHW31-SYNTH" and vb.images[0].checksum_ok is None
    assert vb.problems == ["0x2: image length 0x10000 runs past the end of the data (0x1000)"]
    assert parse_vbios(b"\x55\xaa").problems[0].startswith("0x2: rom length byte needs 1 bytes")
    assert not is_vbios(b"\x55\xaa") and parse_vbios(b"").problems == [
        "0x0: end of data (expected the option-rom signature 55aa)"]


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=0x400))
def test_random_bytes_never_crash(data: bytes) -> None:
    parse_vbios(b"\x55\xaa" + data)
    find_vbios(data)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x3FF), st.integers(0, 255)), min_size=1, max_size=10),
       st.integers(0x20, 0x10000))
def test_mutated_vbios_never_crashes(flips: list[tuple[int, int]], cut: int) -> None:
    img = bytearray(build_vbios(board=NAVI31)[:cut])
    for off, val in flips:
        if off < len(img):
            img[off] = val
    vb = parse_vbios(bytes(img))
    assert len(vb.part_number) <= 43 and len(vb.version) <= 32 and len(vb.name) <= 63
    vbios_identity(bytes(img))
