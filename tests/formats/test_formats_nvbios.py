"""NVIDIA VBIOS parsing (specs/nv-bringup.md §6) from synthetic ROMs built by tests/helpers/nvromhelp.py, and the
chip decode table (§3), plus fuzzing: the parser never raises and never reports a region outside the data."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from nvromhelp import RomPlan, build_rom, fix_x86_checksum

from tinyhw.boards.nvidia import decode_boot0, decode_boot42, describe_chip, register_problem, tinygrad_pci_id
from tinyhw.formats.nvbios import looks_like_nv_vbios, parse_nv_vbios


def test_chain_bit_falcon_table_and_fwsec() -> None:
    rom, e = build_rom()
    v = parse_nv_vbios(rom)
    assert v.problems == [] and v.notes == []
    assert [(i.code_type, i.last) for i in v.images] == [(0x00, False), (0x03, False), (0xE0, False), (0x70, True)]
    assert [i.npde_offset is not None for i in v.images] == [True, True, True, False]
    assert v.images[0].vendor_id == 0x10DE and v.images[0].device_id == 0x2684
    assert v.expansion_rom_off == e["expansion_rom_off"] == 0x800
    assert v.bit is not None and v.bit.offset == 0x1B0 and [t.id for t in v.bit.tokens] == [0x42, 0x49, 0x70]
    t = v.falcon_table
    assert t is not None and t.offset == e["table"] and [x.application for x in t.entries] == [
        "FIRMWARE_SEC_LIC", "FWSEC_PROD", "FWSEC_DBG"]
    prod = v.fwsec()
    assert prod is not None and prod.offset == e["descs"][0x85] and prod.version == 3 and prod.size == e["desc_size"]
    assert prod.fields["signature_count"] == 3 and prod.fields["stored_size"] == 0x1234
    assert prod.signatures == tuple((prod.offset + 44 + k * 384, 384) for k in range(3))
    assert rom[prod.signatures[1][0]:prod.signatures[1][0] + 384] == b"\xa1" * 384
    assert prod.ucode == (prod.offset + e["desc_size"], 0x1300)
    assert looks_like_nv_vbios(rom)
    names = [r.name for r in v.regions()]
    assert "falcon[1] FWSEC_PROD ucode" in names and "bit" in names and "image[2] ext" in names


def test_without_npde_the_pcir_lengths_walk_the_chain() -> None:
    rom, e = build_rom(RomPlan(npde=False, efi_size=0, falcon_image=False))
    v = parse_nv_vbios(rom)
    assert v.problems == [] and len(v.images) == 2 and v.images[1].last and v.expansion_rom_off == 0
    assert v.fwsec() is not None and v.fwsec().offset == e["descs"][0x85]


def test_npde_length_wins_over_the_pcir_and_is_noted() -> None:
    rom, e = build_rom()
    bad = bytearray(rom)
    bad[0x40 + 0x10:0x40 + 0x12] = (0x20).to_bytes(2, "little")  # the base PCIR now claims 16 KiB
    fix_x86_checksum(bad)
    v = parse_nv_vbios(bytes(bad))
    assert v.problems == [] and v.images[1].offset == 0x10000 and v.fwsec().offset == e["descs"][0x85]
    assert any("NPDE image length 0x10000 differs from the PCIR's 0x4000" in n for n in v.notes)


def test_bit_elsewhere_is_found_and_noted() -> None:
    rom, _ = build_rom(RomPlan(bit_at=0x400))
    v = parse_nv_vbios(rom)
    assert v.bit is not None and v.bit.offset == 0x400 and any("0x1b0" in n for n in v.notes)


def test_descriptor_other_than_v3_is_listed_not_decoded() -> None:
    v = parse_nv_vbios(build_rom(RomPlan(desc_version=2))[0])
    assert all(d.version == 2 and not d.fields and d.ucode is None for d in v.descriptors)
    assert any("version 2 is not decoded" in n for n in v.notes)


def test_broken_inputs_are_problems_not_exceptions() -> None:
    rom, e = build_rom()
    bad = bytearray(rom)
    bad[0x10000:0x10002] = b"\x00\x00"  # the second image's signature
    v = parse_nv_vbios(bytes(bad))
    assert len(v.images) == 1 and any("rom image signature 0x0000" in p for p in v.problems)
    assert any("no ext" in p for p in v.problems)  # the falcon table cannot be resolved without the ext image
    assert parse_nv_vbios(rom[:0x9000]).problems  # truncated inside the base image
    assert parse_nv_vbios(b"").problems and not looks_like_nv_vbios(b"")


def test_a_prom_dump_with_a_leading_header_finds_the_chain() -> None:
    rom, _ = build_rom()
    v = parse_nv_vbios(b"NVGI" + bytes(0x3FC) + rom)
    assert v.chain_start == 0x400 and v.problems == [] and v.fwsec().offset == 0x400 + build_rom()[1]["descs"][0x85]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x1A000 - 1), st.integers(0, 255)), min_size=1, max_size=12))
def test_fuzz_mutated_rom(edits: list[tuple[int, int]]) -> None:
    rom, _ = build_rom()
    data = bytearray(rom)
    for off, val in edits:
        data[off % len(data)] = val
    v = parse_nv_vbios(bytes(data))
    for r in v.regions():
        assert r.offset >= 0 and r.size >= 0
    assert len(v.images) <= 16


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=0x600))
def test_fuzz_random_bytes(data: bytes) -> None:
    prefix = b"\x55\xaa" + bytes(0x16) + struct.pack("<H", 0x20) + bytes(6) + b"PCIR"
    for blob in (data, prefix + data, b"\xff\xb8BIT\x00" + data):
        parse_nv_vbios(blob)


# -- chip decode (§3), table-driven ------------------------------------------------------------------------

@pytest.mark.parametrize(("arch", "impl", "chipset", "name", "fw_dir", "tinygrad"), [
    (0x17, 2, 0x172, "GA102", "ga102", True),
    (0x19, 2, 0x192, "AD102", "ad102", True),
    (0x18, 0, 0x180, "GH100", None, False),
    (0x1B, 2, 0x1B2, "GB202", "gb202", True),
    (0x16, 4, 0x164, "TU104", None, False),
    (0x19, 7, 0x197, "AD107", "ad102", True),
    (0x1A, 0, 0x1A0, "GB100", None, False),
    (0x19, 9, 0x199, None, "ad102", True),
])
def test_boot42_decode(arch: int, impl: int, chipset: int, name: str | None, fw_dir: str | None,
                       tinygrad: bool) -> None:
    value = (arch << 24) | (impl << 20) | (0xA << 16) | (1 << 12) | (3 << 8)
    b = decode_boot42(value)
    assert (b.architecture, b.implementation, b.chipset) == (arch, impl, chipset)
    assert (b.major_revision, b.minor_revision, b.minor_extended_revision) == (0xA, 1, 3)
    doc = describe_chip(value)
    assert (doc["chipset"], doc["name"], doc["firmware_dir"], doc["tinygrad_pci_path"]) == (chipset, name, fw_dir,
                                                                                           tinygrad)
    assert doc["mmu_version"] == (3 if arch >= 0x1A else 2)


@pytest.mark.parametrize(("value", "arch", "impl", "chipset"), [
    (0x192000A1, 0x19, 2, 0x192), (0x172000A1, 0x17, 2, 0x172), (0x180000A1, 0x18, 0, 0x180),
    (0x1B2000A1, 0x1B, 2, 0x1B2), (0x00200100, 0x20, 2, 0x202),  # architecture_1 (bit 8) is the MSB
])
def test_boot0_decode(value: int, arch: int, impl: int, chipset: int) -> None:
    b = decode_boot0(value)
    assert (b.architecture, b.implementation, b.chipset) == (arch, impl, chipset)
    assert (b.major_revision, b.minor_revision) == ((value >> 4) & 0xF, value & 0xF)


def test_register_problems_and_id_filter() -> None:
    assert register_problem(0xFFFFFFFF) and register_problem(0xBADF1100) and register_problem(0x19200000) is None
    assert tinygrad_pci_id(0x2684) and tinygrad_pci_id(0x2B85) and not tinygrad_pci_id(0x2330)
    assert describe_chip(0x18000000, device_id=0x2330)["tinygrad_pci_path"] is False
    assert describe_chip(0x19200000, device_id=0x2330)["tinygrad_pci_path"] is False  # id outside the filter


# -- issue 20 item 7: fidelity against real dumps and independent tools ------------------------------------

NVGI_HEADER = 0x9400  # nvflash dumps: an NVGI (IFR) header, then the rom chain at 0x9400


def _nvflash_dump(rom: bytes) -> bytes:
    """An nvflash-style dump synthesised from ``rom``: 'NVGI' and invented header bytes up to 0x9400."""
    head = bytearray(NVGI_HEADER)
    head[:4] = b"NVGI"
    head[4:0x40] = bytes(range(4, 0x40))  # invented header content (no 55aa on any 512-byte boundary)
    return bytes(head) + rom


def test_an_nvflash_dump_is_recognised_and_its_chain_offset_reported(tmp_path) -> None:
    import json

    from clihelp import run

    from tinyhw.mocks.nvidia.nv_vbios import vbios_image

    dump = _nvflash_dump(vbios_image())
    assert looks_like_nv_vbios(dump)
    v = parse_nv_vbios(dump)
    assert v.chain_start == NVGI_HEADER and v.problems == [] and v.bios_version == "95.02.18.80.87"
    assert any("NVGI" in n and "0x9400" in n for n in v.notes)
    assert v.fwsec().offset == NVGI_HEADER + parse_nv_vbios(vbios_image()).fwsec().offset
    path = tmp_path / "nvflash.rom"
    path.write_bytes(dump)
    r = run("--json", "firmware", "inspect", str(path))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["type"] == "nvidia-vbios" and doc["chain_start"] == 0x9400 and doc["problems"] == []
    assert "chain at 0x9400" in run("firmware", "inspect", str(path)).out
    assert not looks_like_nv_vbios(b"NVGI" + bytes(0x20000))  # no chain at all: still unknown


def test_the_bit_header_checksum_is_checked() -> None:
    from tinyhw.formats.nvbios import bit_checksum
    from tinyhw.mocks.nvidia.nv_vbios import BIT_OFFSET, vbios_image

    for rom, at in ((vbios_image(), BIT_OFFSET), (build_rom()[0], 0x1B0)):
        assert bit_checksum(rom, at, 12) == 0  # the emulator and the test builder both checksum the header
        bad = bytearray(rom)
        bad[at + 11] = (bad[at + 11] + 1) & 0xFF
        v = parse_nv_vbios(bytes(bad))
        assert any("BIT header checksum" in p and "sum to 0x01" in p for p in v.problems), v.problems


def test_falcon_entries_without_a_descriptor_are_skipped() -> None:
    rom, e = build_rom(RomPlan(unused_entries=8))  # a real RTX 4090 rom has 8 such entries
    v = parse_nv_vbios(rom)
    assert v.problems == [] and len(v.falcon_table.entries) == 11 and len(v.descriptors) == 3
    assert [d.application for d in v.descriptors] == ["FIRMWARE_SEC_LIC", "FWSEC_PROD", "FWSEC_DBG"]
    assert any("8 falcon table entries with descriptor pointer 0" in n for n in v.notes)
    assert all(r.offset >= e["table"] for r in v.regions() if r.name.startswith("falcon["))


def test_bios_version_strings_and_image_headers_of_the_emulated_rom() -> None:
    from tinyhw.mocks.nvidia.nv_vbios import STRINGS, vbios_image

    v = parse_nv_vbios(vbios_image())
    assert v.bios_version == "95.02.18.80.87" and v.notes == [
        "0xf100: 2 falcon table entries with descriptor pointer 0 (unused slots, no descriptor): 3, 4"]
    assert list(v.strings.values()) == [s.decode() for s in STRINGS]
    base, efi = v.images[0], v.images[1]
    assert (base.init_size, base.checksum) == (base.size, 0)
    assert efi.efi["efi_signature"] == 0x0EF1 and efi.init_size == efi.size
    assert parse_nv_vbios(build_rom()[0]).bios_version == "95.02.18.80.87"  # from 'B' alone


@pytest.mark.parametrize(("offset", "value", "words"), [
    (2, 0x00, "x86 image init size 0x0"),      # the init size byte
    (0x1000, 0x42, "x86 image checksum"),      # a byte inside the init size
    (0xE004, 0xF2, "efi image signature 0xef2"),
])
def test_image_header_sabotage_is_a_problem(offset: int, value: int, words: str) -> None:
    from tinyhw.mocks.nvidia.nv_vbios import vbios_image

    bad = bytearray(vbios_image())
    bad[offset] = value if value != bad[offset] else value ^ 1
    assert any(words in p for p in parse_nv_vbios(bytes(bad)).problems)


def frts_command_bytes(frts_offset: int) -> bytes:
    """The FRTS command byte by byte, from the offsets of NVIDIA's header (open-gpu-kernel-modules
    src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_frts_tu102.c): FWSECLIC_READ_VBIOS_DESC = version u32 @0,
    size u32 @4, gfwImageOffset NvU64 @8, gfwImageSize u32 @16, flags u32 @20 (24 bytes); then
    FWSECLIC_FRTS_REGION_DESC @24 = version, size, frtsRegionOffset4K, frtsRegionSize, frtsRegionMediaType."""
    b = bytearray(44)
    for at, width, value in ((0, 4, 1), (4, 4, 24), (8, 8, 0), (16, 4, 0), (20, 4, 2),
                             (24, 4, 1), (28, 4, 20), (32, 4, frts_offset >> 12), (36, 4, 0x100), (40, 4, 2)):
        b[at:at + width] = value.to_bytes(width, "little")
    return bytes(b)


def test_frts_command_has_flags_at_byte_20() -> None:
    from tinyhw.formats.nvbios import frts_command

    cmd = frts_command(0x5FFE00000)
    assert cmd == frts_command_bytes(0x5FFE00000)
    assert cmd[16:20] == bytes(4) and cmd[20:24] == (2).to_bytes(4, "little")  # gfwImageSize 0, flags 2


def test_fwsec_frts_patch_on_the_emulated_rom() -> None:
    from tinyhw.formats.nvbios import fwsec_frts_image
    from tinyhw.mocks.nvidia.nv_vbios import CMD_IN, IMEM_LOAD, PKC_OFFSET, vbios_image

    rom = vbios_image()
    v = parse_nv_vbios(rom)
    prod = v.fwsec()
    m = prod.interface["dmem_mapper"]
    assert [e["id"] for e in prod.interface["entries"]] == [3, 4] and m["cmd_in_buffer_offset"] == CMD_IN
    vram = 24 << 30
    img = fwsec_frts_image(rom, v, vram - (2 << 20))
    assert len(img) == prod.ucode[1]
    assert img[IMEM_LOAD + CMD_IN:IMEM_LOAD + CMD_IN + 44] == frts_command_bytes(vram - (2 << 20))  # §7.1
    assert struct.unpack_from("<I", img, m["offset"] - prod.ucode[0] + 44)[0] == 0x15  # init_cmd
    last_sig = prod.signatures[-1]
    assert img[IMEM_LOAD + PKC_OFFSET:IMEM_LOAD + PKC_OFFSET + 384] == rom[last_sig[0]:last_sig[0] + 384]
    untouched = rom[prod.ucode[0]:prod.ucode[0] + IMEM_LOAD]
    assert img[:IMEM_LOAD] == untouched  # the code part is never changed
    bad = bytearray(rom)
    bad[m["offset"]:m["offset"] + 4] = b"XXXX"
    vb = parse_nv_vbios(bytes(bad))
    assert any("DMEMMAPPER is not a 64-byte 'DMAP'" in p for p in vb.problems)
    with pytest.raises(ValueError, match="DMAP"):
        fwsec_frts_image(bytes(bad), vb, vram - (2 << 20))
