"""The ELF reader and the GSP-RM firmware parser, from ELF files built here (real files: test_firmware_real.py)."""

from __future__ import annotations

import struct

from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.formats.elf import parse_elf
from tinyhw.formats.nvgsp import parse_gsp, radix3_pages


def build_elf(sections: list[tuple[str, bytes]], *, cls: int = 64, big: bool = False, machine: int = 0xF3,
              phdrs: int = 0) -> bytes:
    """An ELF (REL) with the given PROGBITS sections, then .shstrtab, then the section header table."""
    e = ">" if big else "<"
    ehsize, shent, phent = (64, 64, 56) if cls == 64 else (52, 40, 32)
    body = bytearray(b"\0" * (ehsize + phent * phdrs))
    offsets = []
    for _, data in sections:
        offsets.append(len(body))
        body += data
    names = b"\0" + b"".join(n.encode() + b"\0" for n, _ in sections) + b".shstrtab\0"
    str_off = len(body)
    body += names
    while len(body) % 8:
        body += b"\0"
    shoff = len(body)
    w = "Q" if cls == 64 else "I"
    ident = b"\x7fELF" + bytes([1 if cls == 32 else 2, 2 if big else 1, 1]) + b"\0" * 9
    hdr = ident + struct.pack(f"{e}HHI{w}{w}{w}IHHHHHH", 1, machine, 1, 0, ehsize if phdrs else 0, shoff, 0, ehsize,
                              phent, phdrs, shent, len(sections) + 2, len(sections) + 1)
    body[0:len(hdr)] = hdr
    fmt = f"{e}IIIIIIIIII" if cls == 32 else f"{e}IIQQQQIIQQ"
    pos = 1
    shdrs = [struct.pack(fmt, *[0] * 10)]
    for (name, data), off in zip(sections, offsets, strict=True):
        shdrs.append(struct.pack(fmt, pos, 1, 0, 0, off, len(data), 0, 0, 1, 0))
        pos += len(name) + 1
    shdrs.append(struct.pack(fmt, pos, 3, 0, 0, str_off, len(names), 0, 0, 1, 0))
    return bytes(body) + b"".join(shdrs)


GSP = [(".fwimage", b"\x13\x00\x00\x00" * 0x500), (".fwversion", b"535.261.03\0"),
       (".fwsignature_ad10x", b"\x5a" * 0x1000), (".fwsignature_ga10x", b"\xa5" * 0x1000)]


def test_elf_reader_both_classes_and_byte_orders() -> None:
    for cls in (32, 64):
        for big in (False, True):
            elf = parse_elf(build_elf([(".text", b"abcd"), (".data", b"xy")], cls=cls, big=big, machine=0x28))
            assert elf.problems == [], (cls, big)
            assert (elf.elf_class, elf.big_endian, elf.machine_name, elf.file_type_name) == (cls, big, "ARM", "REL")
            assert [s.name for s in elf.sections] == ["", ".text", ".data", ".shstrtab"]
            text = elf.section(".text")
            assert text is not None and text.size == 4 and text.type_name == "PROGBITS"
            assert [r.name for r in elf.regions()][:2] == ["elf header", "section header table"]


def test_gsp_firmware_facts() -> None:
    data = build_elf(GSP)
    fw = parse_gsp(data, "/lib/firmware/nvidia/535.261.03/gsp_ga10x.bin")
    assert fw.problems == [] and fw.notes == []
    assert fw.version == "535.261.03"
    assert fw.image is not None and fw.image.size == 0x1400 and fw.image_elf is None
    assert list(fw.signatures) == ["ad10x", "ga10x"]
    assert fw.radix3 == {"level0": 1, "level1": 1, "level2": 1, "image": 2, "total": 5}
    assert fw.serves == ("ga102", "ga103", "ga104", "ga106", "ga107", "ad102", "ad103", "ad104", "ad106", "ad107")


def test_serves_comes_from_the_signature_sections_not_the_file_name() -> None:
    only_ada = build_elf([(".fwimage", b"x" * 8), (".fwversion", b"1\0"), (".fwsignature_ad10x", b"s" * 16)])
    fw = parse_gsp(only_ada, "nvidia/535.261.03/gsp_ga10x.bin")  # the name says ga10x; the file holds ad10x only
    assert fw.serves == ("ad102", "ad103", "ad104", "ad106", "ad107")
    assert not {"ga102", "gb202", "gh100"} & set(fw.serves)
    odd = parse_gsp(build_elf([(".fwimage", b"x"), (".fwversion", b"1\0"), (".fwsignature_zz99x", b"s")]))
    assert odd.serves == () and odd.notes == [".fwsignature_zz99x: a signature family that names no chip "
                                              "tinyhw knows (§3.3)"]


def test_family_chips() -> None:
    from tinyhw.formats.nvgsp import family_chips

    assert family_chips("ga10x") == ("ga102", "ga103", "ga104", "ga106", "ga107")  # ga100 has its own
    assert family_chips("ga100") == ("ga100",) and family_chips("cc_gh100") == ("gh100",)
    assert family_chips("tu11x") == ("tu117", "tu116") and family_chips("gb20x")[0] == "gb202"
    assert family_chips("gb10x") == ("gb100", "gb102") and family_chips("x") == ()


def test_radix3_page_arithmetic() -> None:
    assert radix3_pages(0x2477000) == {"level0": 1, "level1": 1, "level2": 19, "image": 0x2477, "total": 0x2477 + 21}
    assert radix3_pages(512 * 512 * 4096 + 1)["level1"] == 2
    assert radix3_pages(0)["total"] == 0


def test_nested_image_elf_and_version_note() -> None:
    inner = build_elf([(".text", b"\0" * 16)])
    fw = parse_gsp(build_elf([(".fwimage", inner), (".fwversion", b"1.2.3\0"), (".fwsignature_tu10x", b"s" * 16)]),
                   "nvidia/535.261.03/gsp_tu10x.bin")
    assert fw.image_elf is not None and fw.image_elf.machine_name == "RISC-V"
    assert fw.notes == ["the path names version 535.261.03, .fwversion says 1.2.3"]
    assert fw.serves == ("tu102", "tu104", "tu106")  # only .fwsignature_tu10x: no tu116, no ga100


def test_gsp_problems() -> None:
    fw = parse_gsp(build_elf([(".fwimage", b"x" * 8)]))
    assert fw.problems == ["no .fwversion section (expected the firmware version string)",
                           "no .fwsignature_<family> section (expected one per supported chip family)"]
    big = parse_gsp(build_elf([(".fwimage", b"x"), (".fwversion", b"1\0"), (".fwsignature_ga10x", b"s" * 0x1001)]))
    assert len(big.problems) == 1 and "(expected at most 0x1000, the loader's signature buffer)" in big.problems[0]
    assert parse_gsp(build_elf([(".text", b"x")])).problems[0].startswith("0x")


def test_truncated_elf_reports_the_table() -> None:
    data = build_elf(GSP)
    elf = parse_elf(data[:-10])
    assert elf.problems == [f"0x{len(data) - 6 * 64:x}: section header table [0x{len(data) - 6 * 64:x}, "
                            f"0x{len(data):x}) extends beyond the file (0x{len(data) - 10:x} bytes)"]
    assert parse_elf(b"\x7fELF").problems == ["0x4: elf class/data bytes  (expected 01|02 and 01|02)"]
    assert parse_elf(b"MZ\0\0").problems == ["0x0: starts with 4d5a0000 (expected the elf magic 7f454c46)"]
    cut = parse_gsp(data[:0x800])
    assert cut.problems and cut.version is None


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=0x200))
def test_random_bytes_never_crash(data: bytes) -> None:
    parse_gsp(b"\x7fELF\x02\x01\x01" + data)
    parse_elf(b"\x7fELF\x01\x02\x01" + data)


_SEED = build_elf(GSP)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 63), st.integers(0, 255)), max_size=6),
       st.lists(st.tuples(st.integers(len(_SEED) - 6 * 64, len(_SEED) - 1), st.integers(0, 255)), max_size=6))
def test_mutated_headers_never_crash(head: list[tuple[int, int]], table: list[tuple[int, int]]) -> None:
    img = bytearray(_SEED)
    for off, val in head + table:
        img[off] = val
    fw = parse_gsp(bytes(img))
    assert all(r.end <= len(img) for r in fw.regions())
