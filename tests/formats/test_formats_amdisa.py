"""AMDGPU instruction-length decoding on hand-made words and on the code objects of tests/data/sqtt."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from testpaths import DATA as TEST_DATA

from tinyhw.formats.amdisa import decode_at, decode_text, isa_family, text_section

DATA = TEST_DATA / "sqtt"


def _w(*words: int) -> bytes:
    return struct.pack(f"<{len(words)}I", *words)


@pytest.mark.parametrize(("fam", "words", "size", "text"), [
    ("gfx11", (0xBFB00000,), 4, "s_endpgm"),
    ("gfx11", (0xBF850001,), 4, "s_clause 0x1"),
    ("gfx11", (0xBF89FC07,), 4, "s_waitcnt lgkmcnt(0)"),
    ("gfx11", (0xF4080100, 0xF8000000), 8, "s_load_b128 s[4:7], s[0:1], null"),
    ("gfx11", (0xDC520000, 0x01060000), 8, "global_load_b32 v1, v0, s[6:7]"),
    ("gfx11", (0x7E0002FF, 0x3F800000), 8, "v_mov_b32_e32 v0, 0x3f800000"),   # a literal, not the inline 1.0
    ("gfx11", (0x30000082,), 4, "v_lshlrev_b32_e32 v0, 2, v0"),
    ("gfx11", (0xB980F801, 0x5678), 8, "s_setreg_imm32_b32"),                 # SOPK with a literal
    ("gfx12", (0xBFC70000,), 4, "s_wait_kmcnt"),
    ("gfx12", (0xEE050006, 0x00000001, 0), 12, "VGLOBAL op 0x14"),
    ("gfx12", (0xBFB60003,), 4, "s_sendmsg"),
    ("gfx9", (0xBF810000,), 4, "s_endpgm"),
    ("gfx9", (0xBF820003,), 4, "s_branch"),
    ("gfx9", (0x7E0002F9, 0), 8, "VOP1 op 0x1"),                     # SDWA adds a dword
])
def test_known_words(fam: str, words: tuple[int, ...], size: int, text: str) -> None:
    inst = decode_at(_w(*words, 0, 0), 0, fam)
    assert (inst.size, inst.text) == (size, text)


def test_branch_target() -> None:
    inst = decode_at(_w(0xBFA0FFFE), 0, "gfx11")             # s_branch -2
    assert inst.is_branch and inst.simm16 == -2 and inst.target() == 4 - 8


def test_outside_text_and_garbage_do_not_raise() -> None:
    assert decode_at(b"\x00\x00", 0, "gfx11").text == "(outside .text)"
    assert sum(i.size for i in decode_text(bytes(range(256)) * 4, "gfx12")) <= 1024 + 8


def test_family() -> None:
    assert [isa_family(t) for t in ("gfx1100", "gfx1201", "gfx950", "gfx90a")] == ["gfx11", "gfx12", "gfx9", "gfx9"]


@pytest.mark.parametrize("elf", sorted(DATA.glob("*/*/*.elf")), ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_capture_code_objects_decode_exactly(elf: Path) -> None:
    found = text_section(elf.read_bytes())
    assert found is not None
    _addr, text = found
    insts = decode_text(text, isa_family(elf.parent.parent.name))
    assert sum(i.size for i in insts) == len(text)
    assert not any(i.encoding == "unknown" for i in insts)
    body = [i for i in insts if i.text not in ("s_code_end", "s_nop")]
    assert body[-1].text == "s_endpgm"


def test_text_section_rejects_non_elf() -> None:
    assert text_section(b"") is None and text_section(b"\x7fELF\x01" + bytes(64)) is None
