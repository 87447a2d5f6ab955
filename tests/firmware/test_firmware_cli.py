"""`tinyhw firmware inspect|diff` end to end on synthetic images (real files: test_firmware_real.py)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest
from clihelp import run
from fuzzbudget import MIB, budget
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.formats.test_formats_nvgsp import GSP, build_elf
from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Refused
from tinyhw.firmware import count_differences, detect, diff_bytes, inspect_bytes
from tinyhw.mocks.amd import ifwi_image as ifwi
from tinyhw.mocks.amd.ifwi_image import build_image, build_vbios


def amdgpu_psp() -> bytes:
    payload = b"\x11" * 0x100 + b"\x22" * 0x100
    fields = struct.pack("<9I", 2, 2, 0x31, 0, 0x100, 1, 0x32, 0x100, 0x100)
    common = struct.pack("<IIHHHHIIII", 0x300, 36, 2, 0, 13, 0, 0x31, 0x200, 0x100, zlib.crc32(payload))
    return (common + fields).ljust(0x100, b"\0") + payload


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"ifwi": build_image(board=NAVI31), "vbios": build_vbios(board=NAVI31), "psp": amdgpu_psp(),
           "gsp": build_elf(GSP), "elf": build_elf([(".text", b"code")]), "text": b"hello, world\n" * 4, "empty": b""}
    paths = {}
    for k, v in out.items():
        paths[k] = tmp_path / ("psp_13_0_0_sos.bin" if k == "psp" else f"{k}.bin")
        paths[k].write_bytes(v)
    return paths


def test_detect_types() -> None:
    assert detect(build_image(board=NAVI31)) == "ifwi" and detect(build_vbios(board=NAVI31)) == "vbios"
    assert detect(amdgpu_psp()) == "amdgpu" and detect(build_elf(GSP)) == "nvidia-gsp"
    assert detect(build_elf([(".text", b"x")])) == "elf" and detect(b"\0" * 64) is None


def test_inspect_ifwi_json(files) -> None:
    r = run("--json", "firmware", "inspect", str(files["ifwi"]))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["type"], doc["size"], doc["magic_ok"], doc["problems"]) == ("ifwi", 0x200000, True, [])
    assert [d["offset"] for d in doc["psp_directories"]] == [0x2000, 0x3000]
    assert doc["sgn_table"]["offset"] == ifwi.SGN_TABLE and doc["sgn_pointer"] == ifwi.SGN_TABLE
    assert [i["item"] for i in doc["items"]] == [*range(1, 9), *range(0x80, 0x8A)]
    assert all(i["error"] is None for i in doc["items"])
    ident = doc["vbios"][0]["identity"]
    assert (ident["part_number"], ident["vendor_id"], ident["device_id"]) == ("113-TINYHW31-SYNTH", 0x1002, 0x744C)
    assert doc["vbios"][0]["checksum_ok"] is True and len(doc["sha256"]) == 64


def test_inspect_human_trees(files) -> None:
    r = run("firmware", "inspect", str(files["ifwi"]))
    assert r.code == 0, r.err
    assert "navi31 ifwi ifwi.bin (2097152 bytes): magic OK" in r.out
    assert "$PSP directory @0x2000 +0x50: 4 entries" in r.out and "rule inferred: OK" in r.out
    assert "0x08 ISH A payload @0x20000 +0x40000" in r.out
    assert "atom vbios @0x40000 +0x10000: part 113-TINYHW31-SYNTH" in r.out and "checksum OK" in r.out
    r = run("firmware", "inspect", str(files["psp"]))
    assert "family psp, psp_firmware_header_v2_0" in r.out and "crc32 0x" in r.out and "matches payload" in r.out
    assert "SOS type 0x1 version 0x32 @0x200 +0x100" in r.out
    r = run("firmware", "inspect", str(files["gsp"]))
    assert "version 535.261.03" in r.out and "ga10x @0x" in r.out and "radix-3" in r.out


def test_inspect_amdgpu_json_keys(files) -> None:
    doc = json.loads(run("--json", "firmware", "inspect", str(files["psp"])).out)
    assert doc["common_header"]["ucode_array_offset_bytes"] == 0x100 and doc["common_header"]["crc32"] > 0
    assert doc["header"] == {"struct": "psp_firmware_header_v2_0", "psp_fw_bin_count": 2}
    assert doc["components"] == [{"name": "SYS_DRV", "fw_type": 2, "fw_version": 0x31, "offset": 0x100, "size": 0x100},
                                 {"name": "SOS", "fw_type": 1, "fw_version": 0x32, "offset": 0x200, "size": 0x100}]
    assert doc["crc32"]["status"] == "matches payload"
    assert doc["ip_version"] == {"header": [13, 0], "file_name": [13, 0, 0]}


def test_inspect_vbios_and_elf(files) -> None:
    doc = json.loads(run("--json", "firmware", "inspect", str(files["vbios"])).out)
    assert doc["type"] == "vbios" and doc["version"] == "099.099.099.099.999999"
    assert doc["images"][0]["pcir"]["device_id"] == 0x744C and doc["atom_rom_header"]["signature"] == "ATOM"
    doc = json.loads(run("--json", "firmware", "inspect", str(files["elf"])).out)
    assert doc["type"] == "elf" and [s["name"] for s in doc["sections"]][1] == ".text"


def test_truncated_file_shows_what_was_read(tmp_path: Path) -> None:
    p = tmp_path / "cut.bin"
    p.write_bytes(build_image(board=NAVI31)[:0x30000])
    r = run("--json", "firmware", "inspect", str(p))
    assert r.code == 1 and r.err == ""  # problems listed: exit 1, the document still on stdout
    doc = json.loads(r.out)
    assert doc["magic_ok"]
    assert "0x30000: the image is 0x30000 bytes (expected 0x200000, the whole flash)" in doc["problems"]
    assert any(p.startswith("item 0x08 (ISH A payload): item extends beyond IFWI") for p in doc["problems"])


@pytest.mark.parametrize("which,msg", [("text", "unknown firmware type (starts with 68656c6c6f2c2077)"),
                                       ("empty", "unknown firmware type (starts with nothing: empty file)")])
def test_unknown_files_exit_2(files, which: str, msg: str) -> None:
    r = run("--json", "firmware", "inspect", str(files[which]))
    assert r.code == 2 and r.no_result
    assert r.err.count("\n") == 1 and msg in r.err and r.err.startswith("error: ")


def test_unreadable_files_exit_2(tmp_path: Path) -> None:
    r = run("firmware", "inspect", str(tmp_path / "missing.bin"))
    assert r.code == 2 and "cannot read" in r.err and "no such file" in r.err
    r = run("firmware", "inspect", str(tmp_path))
    assert r.code == 2 and "it is a directory" in r.err
    r = run("firmware", "diff", str(tmp_path / "missing.bin"), str(tmp_path / "missing.bin"))
    assert r.code == 2


def test_diff_equal_and_different(files, tmp_path: Path) -> None:
    r = run("firmware", "diff", str(files["ifwi"]), str(files["ifwi"]))
    assert r.code == 0 and "are identical" in r.out
    img = bytearray(build_image(board=NAVI31))
    img[ifwi.VBIOS_A + 0x90] ^= 1
    img[ifwi.SGN_BLOBS] ^= 0xFF
    img[0x1FFF00] = 0
    other = tmp_path / "other.bin"
    other.write_bytes(bytes(img))
    r = run("--json", "firmware", "diff", str(files["ifwi"]), str(other))
    assert r.code == 1, r.err
    doc = json.loads(r.out)
    assert doc["equal"] is False and doc["differing_bytes"] == 3 and doc["first_difference"] == ifwi.SGN_BLOBS
    differs = {x["name"]: x for x in doc["regions"] if x["status"] != "same"}
    assert set(differs) == {"item 0x08 ISH A payload", "item 0x82 signature type 1",
                            "$PSP directory 1 entry 3 (type 0x62)", "vbios@0x40000 image 0 (x86)"}
    assert differs["vbios@0x40000 image 0 (x86)"]["differing_bytes"] == 1
    assert differs["vbios@0x40000 image 0 (x86)"]["first_difference"] == 0x90
    assert doc["outside_regions"] == {"differing_bytes": 1}
    assert {"name": "vbios[0].checksum_ok", "a": True, "b": False} in doc["fields"]
    r = run("firmware", "diff", str(files["ifwi"]), str(other))
    assert r.code == 1 and "3 bytes differ, first at 0x5000" in r.out and "item 0x82 signature type 1" in r.out
    assert "1 differing bytes lie outside every region" in r.out


def test_diff_amdgpu_components_and_types(files, tmp_path: Path) -> None:
    data = bytearray(amdgpu_psp())
    data[0x250] ^= 0x10
    p = tmp_path / "psp_13_0_0_sos.new.bin"
    p.write_bytes(bytes(data))
    doc = json.loads(run("--json", "firmware", "diff", str(files["psp"]), str(p)).out)
    rows = {x["name"]: x["status"] for x in doc["regions"]}
    assert rows["component SOS"] == "differs" and rows["component SYS_DRV"] == "same"
    assert rows["ucode"] == "differs" and rows["common header"] == "same"
    r = run("--json", "firmware", "diff", str(files["psp"]), str(files["ifwi"]))
    doc = json.loads(r.out)
    assert r.code == 1 and doc["same_type"] is False and doc["regions"] == [] and doc["outside_regions"] is None


def test_count_differences_and_size_changes() -> None:
    assert count_differences(b"abcd", b"abcd") == (0, None)
    assert count_differences(b"abcd", b"abXd") == (1, 2)
    assert count_differences(b"abcd", b"ab") == (2, 2)
    assert count_differences(b"\0" * 10, b"\0" * 9 + b"\1") == (1, 9)
    a = build_image(board=NAVI31)
    res = diff_bytes(a, "a", a[:0x100000], "b")
    assert res.doc["differing_bytes"] == 0x100000 and not res.equal
    moved = {r["name"]: r["status"] for r in res.doc["regions"]}
    assert moved["item 0x01 ifwi header"] == "same" and moved["ISH B payload"] == "only in a"


def test_help_has_examples() -> None:
    for args in (["firmware", "--help"], ["firmware", "inspect", "--help"], ["firmware", "diff", "--help"]):
        r = run(*args)
        assert r.code == 0 and "Examples:" in r.out and "tinyhw" in r.out
    assert "firmware" in run("--help").out


def test_inspect_bytes_api() -> None:
    res = inspect_bytes(build_vbios(board=NAVI31), "rom.bin")
    assert res.kind == "vbios" and res.doc["identity"]["part_number"] == "113-TINYHW31-SYNTH"
    assert res.tree.lines()[0].startswith("vbios rom.bin")


@settings(max_examples=200, deadline=None)
@given(st.sampled_from([b"", b"\xaa\x55\xaa\x55", b"\x55\xaa", b"\x7fELF\x02\x01\x01", amdgpu_psp()[:32]]),
       st.binary(max_size=0x300))
def test_inspect_random_input_is_a_document_or_a_refusal(prefix: bytes, rest: bytes) -> None:
    """Whatever the bytes, inspect either refuses (exit 2) or returns a JSON-able document and a tree."""
    try:
        with budget(cpu_s=1.0, mem=32 * MIB, what="inspecting random firmware bytes"):
            res = inspect_bytes(prefix + rest, "fuzz.bin")
    except Refused:
        return
    json.dumps(res.doc)
    assert res.tree.lines() and isinstance(res.doc["problems"], list)


def test_an_ifwi_is_labelled_by_the_board_its_vbios_names(tmp_path: Path) -> None:
    """The tree's title names the board whose description has the embedded VBIOS's PCI ids (``navi33 ifwi`` for a
    Navi33 image), ``amd ifwi`` when no board tinyhw describes has them."""
    from tinyhw.boards.navi33 import NAVI33

    (tmp_path / "n33.bin").write_bytes(build_image(board=NAVI33))
    r = run("firmware", "inspect", str(tmp_path / "n33.bin"))
    assert r.code == 0 and "navi33 ifwi n33.bin (" in r.out and "navi31" not in r.out, r.out
    img = bytearray(build_image(board=NAVI31))
    at = img.find(b"PCIR")
    img[at + 6:at + 8] = (0x73FF).to_bytes(2, "little")  # a device id no description has
    (tmp_path / "other.bin").write_bytes(bytes(img))
    r = run("firmware", "inspect", str(tmp_path / "other.bin"))
    assert r.code == 0 and "amd ifwi other.bin (" in r.out, r.out
