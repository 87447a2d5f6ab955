"""AMDGPU code objects through tinyhw's own ELF reader: the committed gfx1100/gfx1200 probe binaries (LLVM's
output, written by nobody here) and synthetic damage to them."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from fuzzbudget import MIB, budget
from hypothesis import given, settings
from hypothesis import strategies as st
from testpaths import ROOT

from tinyhw.formats.amdgpu_code import EM_AMDGPU, MACH, parse_amdgpu_code, parse_kernel_descriptor
from tinyhw.formats.elf import parse_elf, symbols

PREBUILT = ROOT / "tinyhw" / "kernels" / "prebuilt"
ELVES = sorted(PREBUILT.glob("gfx*/*.elf"))


def elf_of(target: str, probe: str) -> Path:
    (path,) = PREBUILT.glob(f"{target}/{probe}.*.elf")
    return path


def test_there_are_committed_amd_binaries() -> None:
    assert {p.parent.name for p in ELVES} == {"gfx1100", "gfx1200"}
    assert len(ELVES) >= 6


@pytest.mark.parametrize("path", ELVES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_committed_binary_decodes(path: Path) -> None:
    data = path.read_bytes()
    obj = parse_amdgpu_code(data)
    assert obj.problems == []
    assert obj.elf.machine == EM_AMDGPU and obj.elf.machine_name == "AMDGPU"
    assert obj.elf.file_type_name == "REL"
    assert obj.arch == path.parent.name and obj.mach == MACH[path.parent.name]
    kernel = path.name.split(".")[1]
    kd = obj.kernels[kernel]
    assert kd.wave32 and kd.kernarg_ptr
    assert kd.lds_bytes == 0 and kd.scratch_bytes == 0
    assert kd.kernarg_size in (8, 16)  # one or two buffer pointers
    assert 0 < kd.vgprs <= 256
    assert obj.text_size > 0


def test_symbols_name_the_descriptor_and_the_code() -> None:
    data = elf_of("gfx1100", "pattern").read_bytes()
    elf = parse_elf(data)
    names = {s.name: s for s in symbols(data, elf)}
    assert "E_8192_32_4.kd" in names and names["E_8192_32_4.kd"].size == 64
    assert "E_8192_32_4" in names and elf.sections[names["E_8192_32_4"].shndx].name == ".text"


def test_kernel_descriptor_fields_from_bytes() -> None:
    raw = bytearray(64)
    struct.pack_into("<III", raw, 0, 1024, 16, 24)
    struct.pack_into("<q", raw, 16, -256)
    struct.pack_into("<III", raw, 44, 0, 0x3, 0x1 | 5 << 1)
    struct.pack_into("<H", raw, 56, 1 << 10 | 1 << 3)
    kd = parse_kernel_descriptor(bytes(raw))
    assert (kd.lds_bytes, kd.scratch_bytes, kd.kernarg_size, kd.entry_offset) == (1024, 16, 24, -256)
    assert kd.wave32 and kd.kernarg_ptr and kd.scratch_enabled and kd.user_sgprs == 5
    assert kd.vgprs == 32  # (3 + 1) granules of 8 in wave32
    struct.pack_into("<H", raw, 56, 0)
    assert parse_kernel_descriptor(bytes(raw)).vgprs == 16  # wave64 granule of 4
    with pytest.raises(ValueError, match="64 bytes"):
        parse_kernel_descriptor(bytes(63))


def test_wrong_machine_and_unknown_generation_are_problems() -> None:
    data = bytearray(elf_of("gfx1200", "bandwidth").read_bytes())
    odd = bytearray(data)
    struct.pack_into("<I", odd, 48, 0x7F)  # e_flags: a generation tinyhw does not know
    obj = parse_amdgpu_code(bytes(odd))
    assert obj.arch is None and any("unknown gfx generation 0x7f" in p for p in obj.problems)
    struct.pack_into("<H", data, 18, 0x3E)  # e_machine: x86-64
    obj = parse_amdgpu_code(bytes(data))
    assert any("machine 0x3e (expected 0xe0" in p for p in obj.problems) and not obj.kernels


def test_not_an_elf() -> None:
    obj = parse_amdgpu_code(b"MZ" + bytes(100))
    assert obj.problems and "elf magic" in obj.problems[0]


@settings(max_examples=60, deadline=None)
@given(st.floats(0, 1, exclude_max=True), st.integers(0, 255))
def test_damaged_binary_never_raises(where: float, value: int) -> None:
    data = bytearray(elf_of("gfx1100", "bandwidth").read_bytes())
    pos = int(where * len(data))
    data[pos] = value
    with budget(cpu_s=1.0, mem=32 * MIB, what="parsing a damaged code object"):
        parse_amdgpu_code(bytes(data))
        parse_amdgpu_code(bytes(data[:pos]))
