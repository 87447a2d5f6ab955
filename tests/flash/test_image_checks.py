"""Images checked before they are written or shown (issue 10 items 4-6): the IFWI structure a flash write needs,
firmware inspect's exit code, and counts bounded by the parsers and by what the CLI prints."""

from __future__ import annotations

import json
import os
import struct
import time
import zlib
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev, flash_state

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Refused
from tinyhw.formats.amdfw import MAX_DESCRIPTORS, parse_amdgpu
from tinyhw.formats.ifwi import MAGIC, require_flashable
from tinyhw.formats.ifwi_layout import MAX_ENTRIES, parse_ifwi, resolve_item
from tinyhw.mocks.amd import ifwi_image as ifwi

IMAGE = ifwi.build_image(board=NAVI31)


def magic_only() -> bytes:
    return MAGIC + bytes(os.urandom(0x200000 - 4))


# -- item 4 --------------------------------------------------------------------------------------------------------
def test_magic_plus_random_bytes_is_refused_naming_what_is_missing() -> None:
    with pytest.raises(Refused) as e:
        require_flashable(magic_only())
    msg = str(e.value)
    assert "no parsable $PSP directory at 0x2000 or 0x3000" in msg and "no atom vbios" in msg and "--force" in msg
    notes = require_flashable(magic_only(), force=True).notes
    assert any("no parsable $PSP directory" in n for n in notes) and any("no atom vbios" in n for n in notes)
    assert require_flashable(IMAGE).notes == ()


def test_unparsable_psp_directory_or_missing_vbios_each_named() -> None:
    img = bytearray(IMAGE)
    for off in (0x2000, 0x3000):
        struct.pack_into("<I", img, off + 8, 0xFFFFFF)  # the cookie is there, the entry count is not possible
    with pytest.raises(Refused, match=r"no parsable \$PSP directory .*16777215 entries") as e:
        require_flashable(bytes(img))
    assert "vbios" not in str(e.value)
    img = bytearray(IMAGE)
    for off in (ifwi.VBIOS_A, ifwi.VBIOS_B):
        img[off + 0x30:off + 0x3A] = b"x" * 10  # no ati magic: an option rom, not an atom vbios
    with pytest.raises(Refused, match="no atom vbios .option roms at 0x40000, 0x120000 have no ati magic") as e:
        require_flashable(bytes(img))
    assert "$PSP" not in str(e.value)


def test_flash_write_refuses_magic_only_before_touching_the_board(tmp_path: Path) -> None:
    (tmp_path / "bad.bin").write_bytes(magic_only())
    r = run("--device", dev(tmp_path), "--stats", "flash", "write", "bad.bin", "--no-backup", "--yes")
    assert r.code == 2 and "no parsable $PSP directory" in r.err and "no atom vbios" in r.err
    assert r.stats["reg_reads"] == 0
    r = run("--device", dev(tmp_path), "flash", "write", "bad.bin", "--no-backup", "--yes", "--force",
            "--start-sector", "500", "--sector-count", "2")
    assert r.code == 0, r.err
    assert "note: no parsable $PSP directory" in r.err
    assert flash_state(tmp_path)[0][500 * 4096:502 * 4096] == (tmp_path / "bad.bin").read_bytes()[500 * 4096:502 * 4096]


# -- item 5 --------------------------------------------------------------------------------------------------------
def test_inspect_exit_codes(tmp_path: Path) -> None:
    (tmp_path / "good.bin").write_bytes(IMAGE)
    (tmp_path / "magic.bin").write_bytes(magic_only())
    vb = IMAGE[ifwi.VBIOS_A:ifwi.VBIOS_A + ifwi.VBIOS_SIZE]
    (tmp_path / "vbios-cut.bin").write_bytes(vb[:0x2000])
    (tmp_path / "vbios.bin").write_bytes(vb)
    assert run("firmware", "inspect", "good.bin").code == 0
    assert run("firmware", "inspect", "vbios.bin").code == 0
    for name in ("magic.bin", "vbios-cut.bin"):
        r = run("--json", "firmware", "inspect", name)
        assert r.code == 1 and json.loads(r.out)["problems"], name
        r = run("firmware", "inspect", name)
        assert r.code == 1 and "problems (" in r.out


# -- item 6 --------------------------------------------------------------------------------------------------------
def test_sgn_count_past_the_bound_is_malformed_and_not_scanned() -> None:
    img = bytearray(IMAGE)
    struct.pack_into("<I", img, ifwi.SGN_TABLE + 8, 0xFFFFFFFF)
    t = time.perf_counter()
    lay = parse_ifwi(bytes(img))
    print(f"parse_ifwi with a 2**32-entry $SGN count: {time.perf_counter() - t:.3f} s wall")  # a scan would hang
    assert any(p.startswith(f"0x{ifwi.SGN_TABLE + 8:x}: $SGN table: 4294967295 entries") for p in lay.problems)
    it = resolve_item(bytes(img), 0x82)
    assert it.error is not None and "4294967295 entries" in it.error
    struct.pack_into("<I", img, ifwi.SGN_TABLE + 8, MAX_ENTRIES + 1)  # fits in the image, but no sane table is that big
    lay = parse_ifwi(bytes(img))
    assert any(f"{MAX_ENTRIES + 1} entries (malformed: more than {MAX_ENTRIES})" in p for p in lay.problems)
    assert resolve_item(bytes(img), 0x83).error.endswith(f"(malformed: more than {MAX_ENTRIES})")


def _psp_v2(count: int, room: int) -> bytes:
    payload = b"\x11" * 0x100
    fields = struct.pack("<I", count) + struct.pack("<4I", 1, 0x32, 0, 0x100) * room
    size = 0x100 + len(payload)
    head = struct.pack("<IIHHHHIIII", size, 36, 2, 0, 13, 0, 0x31, len(payload), 0x100, zlib.crc32(payload))
    return (head + fields).ljust(0x100, b"\0") + payload


def test_amdgpu_descriptor_counts_past_the_bound_are_malformed(tmp_path: Path) -> None:
    fw = parse_amdgpu(_psp_v2(2, 2), "psp_13_0_0_sos.bin")
    assert len(fw.components) == 2 and fw.problems == []
    big = bytearray(0x20 + 36) + bytes(0xFFFF * 16 + 0x200)  # room for 0xffff descriptors: still not believed
    head = struct.pack("<IIHHHHIIII", len(big), 36, 2, 0, 13, 0, 0x31, 0x100, 0x100, 0)
    big[:32] = head
    struct.pack_into("<I", big, 32, 0xFFFF)
    for i in range(0xFFFF):
        struct.pack_into("<4I", big, 36 + 16 * i, 1 + i % 11, i, 0, 16)
    fw = parse_amdgpu(bytes(big), "psp_13_0_0_sos.bin")
    assert fw.components == [] and f"psp_fw_bin_count 65535 is more than {MAX_DESCRIPTORS}" in fw.problems[0]
    (tmp_path / "psp_13_0_0_sos.bin").write_bytes(bytes(big))
    t = time.perf_counter()
    r = run("firmware", "inspect", "psp_13_0_0_sos.bin")
    assert r.code == 1 and len(r.out) < 20_000
    print(f"firmware inspect of 65535 descriptors: {time.perf_counter() - t:.3f} s wall")
    ta = bytearray(big)
    ta[:32] = struct.pack("<IIHHHHIIII", len(big), 36, 2, 0, 13, 0, 0x31, 0x100, 0x100, 0)
    fw = parse_amdgpu(bytes(ta), "psp_13_0_0_ta.bin")
    assert fw.components == [] and "ta_fw_bin_count 65535" in fw.problems[0]


def test_smc_pptable_count_past_the_bound_is_malformed() -> None:
    n = 0xFFFF
    body = struct.pack("<3I", 0x20000, n, 0x100) + bytes(0x100 - 44)
    entries = b"".join(struct.pack("<3I", i, 0x100, 4) for i in range(n))
    data = bytearray(struct.pack("<IIHHHHIIII", 0x100 + len(entries), 44, 2, 1, 13, 0, 1, 4, 0x100, 0) + body + entries)
    fw = parse_amdgpu(bytes(data), "smu_13_0_0.bin")
    assert fw.header["pptables"] == [] and f"pptable_count 65535 is more than {MAX_DESCRIPTORS}" in fw.problems[0]


def test_the_cli_caps_what_it_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tinyhw.cli import firmware_cmd
    from tinyhw.firmware.tree import Node

    root = Node("root")
    for i in range(firmware_cmd.MAX_SHOWN + 50):
        root.add(f"child {i}")

    class FakeApp:
        class out:
            is_terminal = False

    import contextlib
    import io
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        firmware_cmd._print_tree(FakeApp(), root)
    text = buf.getvalue()
    assert f"child {firmware_cmd.MAX_SHOWN - 1}" in text and f"child {firmware_cmd.MAX_SHOWN}\n" not in text
    assert "... and 50 more (--json lists them all)" in text
