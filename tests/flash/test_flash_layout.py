"""The IFWI as a flash layout: ``flash layout``, ``flash dump/write --region``, the layout check before a write."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import pytest
from clihelp import run
from flashhelp import dev, journals

import tinyhw.mocks.amd.board as navi31_mod
from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Disconnected, Refused
from tinyhw.flash import chip as chip_mod
from tinyhw.formats.ifwi_regions import LazyImage, flash_regions, layout_difference
from tinyhw.mocks.amd import ifwi_image as m
from tinyhw.mocks.amd.gd25 import GD25LQ16E
from tinyhw.mocks.amd.ifwi_image import build_image

IMAGE = build_image(board=NAVI31)
SECTOR = 4096
NAMES = ["ifwi-header", "sgn-pointer", "psp-dir-1", "psp-dir-2", "sgn-table", *(f"sgn-type-{t}" for t in range(1, 8)),
         "item-04", "item-05", "ish-a", "ish-b", "ish-a-payload", "vbios-a", "ish-b-payload", "vbios-b", "metadata",
         "item-89"]


@pytest.fixture
def chips(monkeypatch: pytest.MonkeyPatch) -> list[GD25LQ16E]:
    """Every emulated flash chip built during the test (their ``events`` list each program and erase)."""
    made: list[GD25LQ16E] = []

    def build(*args: Any, **kw: Any) -> GD25LQ16E:
        made.append(GD25LQ16E(*args, **kw))
        return made[-1]

    monkeypatch.setattr(navi31_mod, "GD25LQ16E", build)
    return made


def flash_writes(chips: list[GD25LQ16E]) -> list[tuple[str, int, int]]:
    """The programs and erases (kind, address, length) the emulated chips saw."""
    return [e for c in chips for e in c.events if e[0] != "wrsr" and not e[0].endswith("-rejected")]


def edited(*changes: tuple[int, bytes]) -> bytes:
    img = bytearray(IMAGE)
    for off, data in changes:
        img[off:off + len(data)] = data
    return bytes(img)


def moved_ish_b() -> bytes:
    """The image with ISH B's slot 64 KiB smaller: the same bytes, another layout."""
    img = bytearray(IMAGE)
    struct.pack_into("<I", img, m.ISH_B + 0x18, m.SLOT_SIZE - 0x10000)
    return bytes(img)


# -- the layout ------------------------------------------------------------------------------------------------------
def test_layout_of_the_image_names_its_regions() -> None:
    lay = flash_regions(IMAGE)
    assert lay.names() == NAMES and lay.problems == []
    r = {x.name: x for x in lay.regions}
    assert (r["psp-dir-1"].start, r["psp-dir-1"].end) == (0x2000, 0x2050)  # (4 entries + 1) x 16
    assert (r["ish-a-payload"].start, r["ish-a-payload"].end) == (m.PAYLOAD_A, m.PAYLOAD_A + m.SLOT_SIZE)
    assert (r["vbios-b"].start, r["vbios-b"].size) == (m.VBIOS_B, m.VBIOS_SIZE)
    assert (r["metadata"].start, r["metadata"].end) == (0x1EF000, 0x1F0000)
    reads: list[tuple[int, int]] = []

    def read(a: int, n: int) -> bytes:
        reads.append((a, n))
        return IMAGE[a:a + n]

    assert flash_regions(LazyImage(read, len(IMAGE))).regions == lay.regions  # the same through a reader
    assert sum(n for _, n in reads) <= 0x2000  # only the tables are read
    assert layout_difference(lay, lay) == (None, [])
    diff, lacking = layout_difference(flash_regions(moved_ish_b()), lay)
    assert diff == "region ish-b-payload: image 0x100000-0x12ffff, flash 0x100000-0x13ffff" and lacking == []
    blank = flash_regions(b"\xff" * len(IMAGE))  # an erased flash: only the fixed items are there
    fixed = ["ifwi-header", "sgn-pointer", "item-04", "item-05", "ish-a", "ish-b", "metadata", "item-89"]
    assert layout_difference(lay, blank) == (None, [n for n in NAMES if n not in fixed])


@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_flash_layout_of_the_chip_equals_the_images(tmp_path: Path, board: str) -> None:
    (tmp_path / "img.bin").write_bytes(IMAGE)
    a = run("--json", "flash", "layout", "img.bin")
    b = run("--device", dev(tmp_path, board), "--json", "--stats", "flash", "layout")
    assert a.code == 0 and b.code == 0, (a.err, b.err)
    da, db = json.loads(a.out), json.loads(b.out)
    assert da["regions"] == db["regions"] and da["source"] == "img.bin" and db["source"].startswith("the flash on")
    assert [x["name"] for x in da["regions"]] == NAMES
    assert set(da["regions"][0]) == {"name", "start", "end", "size", "what"}
    assert b.stats["bytes_in"] < 0x4000  # the tables, not the flash
    r = run("flash", "layout", "img.bin")
    assert r.code == 0 and "0x040000-0x04ffff  vbios-a" in r.out and "22 regions" in r.out


def test_dump_region(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path, "navi31-usb"), "--json", "flash", "dump", "vb.bin", "--region", "vbios-a")
    assert r.code == 0, r.err
    assert (tmp_path / "vb.bin").read_bytes() == IMAGE[m.VBIOS_A:m.VBIOS_A + m.VBIOS_SIZE]
    assert json.loads(r.out)["region"] == {"name": "vbios-a", "start": m.VBIOS_A, "end": m.VBIOS_A + m.VBIOS_SIZE,
                                           "size": m.VBIOS_SIZE,
                                           "what": "ATOM VBIOS option ROM in the ISH A payload (length byte x 512)"}


@pytest.mark.parametrize("cmd", [["dump", "x.bin"], ["write", "img.bin", "--yes", "--no-backup"]])
@pytest.mark.parametrize("name", ["vbios", "ISH-Z", "../x"])
def test_bad_region_names_are_refused_with_the_list(tmp_path: Path, chips: list[GD25LQ16E], cmd: list[str],
                                                    name: str) -> None:
    (tmp_path / "img.bin").write_bytes(IMAGE)
    r = run("--device", dev(tmp_path), "flash", *cmd, "--region", name)
    assert r.code == 2 and f"no region {name!r}" in r.err and "regions: ifwi-header, sgn-pointer" in r.err, r.err
    assert "vbios-a" in r.err and not (tmp_path / "x.bin").exists()
    assert flash_writes(chips) == []
    with pytest.raises(Refused, match="regions: ifwi-header"):
        flash_regions(IMAGE).find(name)


# -- a region write ----------------------------------------------------------------------------------------------
def test_region_write_changes_only_bytes_inside_the_region(tmp_path: Path, chips: list[GD25LQ16E]) -> None:
    """ISH A (0x20 bytes at 0x12000) written from an image that differs inside it, beside it in its sector and
    far away: only the bytes inside the region change on the flash; only its sector is erased and programmed."""
    inside, beside, far = (0x12000, b"\x11\x22\x33\x44"), (0x12100, b"beside"), (0x30000, b"far")
    (tmp_path / "img.bin").write_bytes(edited(inside, beside, far))
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--region", "ish-a", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["region"] == {"name": "ish-a", "start": 0x12000, "end": 0x12020}
    assert (doc["start_sector"], doc["sector_count"], doc["sectors_changed"]) == (0x12, 1, 1)
    assert doc["layout"] == {"match": True, "difference": None, "flash_lacks": [], "forced": False}
    after = (tmp_path / "flash.bin").read_bytes()
    changed = [i for i in range(len(IMAGE)) if after[i] != IMAGE[i]]
    assert changed == [0x12000 + i for i in range(4) if inside[1][i] != IMAGE[0x12000 + i]] and changed
    writes = flash_writes(chips)
    assert writes and all(a >= 0x12000 and a + n <= 0x13000 for _, a, n in writes)
    assert doc["backup"] and Path(doc["backup"]).read_bytes() == IMAGE and journals(tmp_path) == []


def test_region_write_resumes_with_the_recorded_bytes_around_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """A region write interrupted right after erasing its sector: the resume restores the bytes beside the region
    from the journal (the flash lost them), not from the torn sector."""
    (tmp_path / "img.bin").write_bytes(edited((0x12000, b"\x11\x22"), (0x12100, b"beside")))
    real = chip_mod.Gd25.program_page

    def program_page(self: chip_mod.Gd25, addr: int, data: bytes, sector: int | None = None) -> None:
        raise Disconnected("test: cable pulled before programming")

    monkeypatch.setattr(chip_mod.Gd25, "program_page", program_page)
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--region", "ish-a", "--yes", "--no-backup")
    assert r.code == 1 and "--region ish-a --resume --yes" in r.err, r.err
    assert (tmp_path / "flash.bin").read_bytes()[0x12000:0x13000] == b"\xff" * SECTOR  # erased, nothing back yet
    (j,) = journals(tmp_path)
    assert json.loads(j.read_text())["region"]["edges"] == {"18": IMAGE[0x12000:0x13000].hex()}
    monkeypatch.setattr(chip_mod.Gd25, "program_page", real)
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--region", "ish-a", "--resume", "--yes")
    assert r.code == 0, r.err
    assert (tmp_path / "flash.bin").read_bytes() == edited((0x12000, b"\x11\x22")) and journals(tmp_path) == []


# -- the layout check ---------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_write_refuses_another_layout_and_force_writes_it(tmp_path: Path, chips: list[GD25LQ16E]) -> None:
    (tmp_path / "img.bin").write_bytes(moved_ish_b())
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--yes", "--no-backup")
    assert r.code == 2 and "region layout differs" in r.err and "region ish-b-payload: image 0x100000-0x12ffff, " \
        "flash 0x100000-0x13ffff" in r.err and "--force" in r.err, r.err
    assert (tmp_path / "flash.bin").read_bytes() == IMAGE and journals(tmp_path) == []
    assert flash_writes(chips) == []
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--yes", "--no-backup", "--force")
    assert r.code == 0, r.err
    assert "warning: writing an image with another region layout" in r.err
    assert json.loads(r.out)["layout"]["forced"] is True
    assert (tmp_path / "flash.bin").read_bytes() == moved_ish_b()


def test_a_flash_lacking_regions_is_restored_without_force(tmp_path: Path) -> None:
    """A flash whose VBIOS A was erased lacks a region the image has: no conflict, the write restores it."""
    (tmp_path / "flash.bin").write_bytes(edited((m.VBIOS_A, b"\xff" * 0x40)))
    (tmp_path / "img.bin").write_bytes(IMAGE)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--yes", "--no-backup")
    assert r.code == 0, r.err
    assert "the flash lacks region(s) vbios-a" in r.err
    assert json.loads(r.out)["layout"]["flash_lacks"] == ["vbios-a"]
    assert (tmp_path / "flash.bin").read_bytes() == IMAGE
