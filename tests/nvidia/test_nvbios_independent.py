"""The emulated VBIOS read by a decoder that is not tinyhw's (issue 20 item 7).

envytools' ``nvbios`` would be the independent tool, but Debian 12 does not package envytools (checked:
``apt-cache policy envytools`` finds no candidate in main, contrib or non-free), so:

* when an ``nvbios`` binary is on PATH anyway, it is run on the emulated ROM and must report neither a
  checksum mismatch nor a parse failure (``TINYHW_REQUIRE_ENVYTOOLS=1`` makes a missing binary a failure);
* always, the ROM is read by the small decoder below, written in this test only from the layouts of
  specs/nv-bringup.md §6 and NVIDIA's BIT documentation as envytools applies them (0xAA55 images walked by
  their PCIR lengths, the x86 image checksum over byte 2's init size, the BIT found by its signature with
  its header bytes summing to 0, BIT version 1, 12-byte header, 6-byte tokens, 'i' v2 of at least 0x19
  bytes, 'B' and 'S' v2, the EFI signature). It shares no code with tinyhw's parser. Weaker than a real
  tool: it encodes this project's reading of the same documents.
"""

from __future__ import annotations

import os
import shutil
import struct
import subprocess

import pytest

from tinyhw.mocks.nvidia.nv_vbios import vbios_image

NVBIOS = shutil.which("nvbios")


def _version(rom: bytes, at: int) -> str:
    return ".".join(f"{rom[at + k]:02x}" for k in (3, 2, 1, 0, 4))


def _decode(rom: bytes) -> dict:
    """What an envytools-like reader makes of ``rom``: raises AssertionError on anything it would reject."""
    parts, pos = [], 0
    while True:
        assert rom[pos:pos + 2] == b"\x55\xaa", f"image at 0x{pos:x} has no 55aa"
        pcir = pos + struct.unpack_from("<H", rom, pos + 0x18)[0]
        assert rom[pcir:pcir + 4] == b"PCIR"
        blocks, code_type, indicator = struct.unpack_from("<HxxBB", rom, pcir + 0x10)
        parts.append((pos, blocks * 512, code_type))
        if code_type == 0x00:
            init = rom[pos + 2] * 512
            assert init and sum(rom[pos:pos + init]) % 256 == 0, "x86 image checksum fails"
        if code_type == 0x03:
            assert struct.unpack_from("<I", rom, pos + 4)[0] == 0x0EF1, "no efi signature"
        pos += blocks * 512
        if indicator & 0x80:
            break
    length = pos
    bit = rom.find(b"\xff\xb8BIT", 0, length)
    assert bit > 0, "no BIT"
    version, hlen, rlen, count = rom[bit + 7], rom[bit + 8], rom[bit + 9], rom[bit + 10]
    assert sum(rom[bit:bit + hlen]) % 256 == 0, "BIT table checksum mismatch"
    assert (version, hlen >= 12, rlen >= 6) == (1, True, True)
    tokens = {}
    for i in range(count):
        t, ver, size, ptr = struct.unpack_from("<BBHH", rom, bit + hlen + rlen * i)
        assert ptr + size <= length, f"BIT table {chr(t)!r} beyond the rom"
        tokens[chr(t)] = (ver, size, ptr)
    out = {"parts": parts, "tokens": tokens}
    ver, size, ptr = tokens["i"]
    assert ver == 2 and size >= 0x19
    out["i"] = _version(rom, ptr)
    ver, size, ptr = tokens["B"]
    out["B"] = _version(rom, ptr)
    ver, size, ptr = tokens["S"]
    assert ver == 2 and size >= 21
    strings = []
    for k in range(7):
        sp, limit = struct.unpack_from("<HB", rom, ptr + 3 * k)
        text = rom[sp:sp + limit].split(b"\0")[0]
        assert text and all(0x20 <= c < 0x7F for c in text), f"string pointer {k} does not lead to a string"
        strings.append(text.decode())
    out["S"] = strings
    return out


def test_an_independent_decoder_reads_the_emulated_rom_as_a_real_one() -> None:
    d = _decode(vbios_image())
    assert [c for _, _, c in d["parts"]] == [0x00, 0x03, 0xE0]
    assert d["i"] == d["B"] == "95.02.18.80.87"
    assert d["S"][1] == "Version 95.02.18.80.87"
    assert set(d["tokens"]) == {"B", "i", "S", "p"}


@pytest.mark.parametrize(("what", "offset", "balance"), [("BIT table checksum mismatch", 0x1B0 + 11, True),
                                                         ("x86 image checksum fails", 0x2000, False)])
def test_the_independent_decoder_rejects_a_sabotaged_rom(what: str, offset: int, balance: bool) -> None:
    from tinyhw.mocks.nvidia.nv_vbios import BASE_SIZE

    bad = bytearray(vbios_image())
    bad[offset] = (bad[offset] + 0x10) & 0xFF
    if balance:  # keep the x86 image checksum right, so that only the BIT is wrong
        bad[BASE_SIZE - 1] = (bad[BASE_SIZE - 1] - 0x10) & 0xFF
    with pytest.raises(AssertionError, match=what):
        _decode(bytes(bad))


@pytest.mark.skipif(NVBIOS is None and os.environ.get("TINYHW_REQUIRE_ENVYTOOLS") != "1",
                    reason="envytools' nvbios is not installed (Debian 12 does not package envytools)")
def test_envytools_nvbios_accepts_the_emulated_rom(tmp_path) -> None:
    assert NVBIOS is not None, "TINYHW_REQUIRE_ENVYTOOLS=1 but nvbios is not on PATH"
    rom = tmp_path / "ad102.rom"
    rom.write_bytes(vbios_image())
    r = subprocess.run([NVBIOS, str(rom)], capture_output=True, text=True, timeout=60, check=False)
    text = r.stdout + r.stderr
    assert "checksum mismatch" not in text and "Failed to parse" not in text, text[-2000:]
    assert "BIOS version 0x95.02.18.80.87" in text
