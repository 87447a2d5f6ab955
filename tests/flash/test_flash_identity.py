"""Board identity before ``flash write`` (specs/navi31-spi-flash.md §g.3) and in ``flash info``.

Foreign images are copies of the emulated board's synthetic image with the VBIOS part number or PCI
device id changed in both VBIOS copies and the option-ROM checksum fixed, so the only thing wrong with
them is the board they are for. A refused write leaves the flash byte-identical (contents and status
registers), writes no journal and no backup. A resumed write compares the image against the identity
its journal recorded before the job, never against the half-written flash.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev, flash_state, journals

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Disconnected
from tinyhw.flash import chip as chip_mod
from tinyhw.flash.identity import probe_identity, read_identity
from tinyhw.formats.vbios import vbios_identity
from tinyhw.mocks.amd import ifwi_image as ifwi

IMAGE = ifwi.build_image(board=NAVI31)
SECTOR = 4096
PART = ifwi.PART_NUMBER.decode()


def edit_vbios(mutate: Callable[[bytearray, int], None], image: bytes = IMAGE) -> bytes:
    """Apply ``mutate(img, vbios_base)`` to both VBIOS copies and fix each option-ROM checksum."""
    img = bytearray(image)
    for base in (ifwi.VBIOS_A, ifwi.VBIOS_B):
        mutate(img, base)
        last = base + ifwi.VBIOS_SIZE - 1
        img[last] = 0
        img[last] = -sum(img[base:base + ifwi.VBIOS_SIZE]) & 0xFF
    return bytes(img)


def part_number(new: bytes) -> Callable[[bytearray, int], None]:
    def mutate(img: bytearray, base: int) -> None:
        at = base + struct.unpack_from("<H", img, base + 0x6E)[0]  # the strings pointer: the first is the part
        assert img[at:at + len(ifwi.PART_NUMBER)] == ifwi.PART_NUMBER
        img[at:at + len(new)] = new
    return mutate


def device_id(new: int) -> Callable[[bytearray, int], None]:
    def mutate(img: bytearray, base: int) -> None:
        pcir = base + struct.unpack_from("<H", img, base + 0x18)[0]
        assert img[pcir:pcir + 4] == b"PCIR"
        struct.pack_into("<H", img, pcir + 6, new)
    return mutate


def version(new: bytes) -> Callable[[bytearray, int], None]:
    def mutate(img: bytearray, base: int) -> None:
        at = img.find(ifwi.VERSION, base, base + 0x1000)
        img[at:at + len(new)] = new
    return mutate


def no_vbios(img: bytearray, base: int) -> None:
    img[base:base + 2] = b"\xff\xff"


FOREIGN_PART = edit_vbios(part_number(b"113-FOREIGN-BOARD0"))
FOREIGN_DEVICE = edit_vbios(device_id(0x73BF))


# -- refusals ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
@pytest.mark.parametrize(("image", "words"), [
    (FOREIGN_PART, ["part number '113-FOREIGN-BOARD0' != '113-TINYHW31-SYNTH'", "part 113-FOREIGN-BOARD0"]),
    (FOREIGN_DEVICE, ["pci ids 1002:73bf != 1002:744c", "pci 1002:73bf"]),
], ids=["part-number", "device-id"])
def test_foreign_image_is_refused_and_the_flash_is_untouched(tmp_path: Path, board: str, image: bytes,
                                                             words: list[str]) -> None:
    assert vbios_identity(image).checksum_ok  # the foreign image is a valid vbios: only the board differs
    assert run("--device", dev(tmp_path, board), "flash", "info").code == 0
    before = flash_state(tmp_path)
    (tmp_path / "foreign.bin").write_bytes(image)
    r = run("--device", dev(tmp_path, board), "--json", "--stats", "flash", "write", "foreign.bin", "--yes")
    assert r.code == 2 and r.no_result, r.err
    (err,) = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert err.startswith("error: refusing the image: it is for another board")
    assert all(w in err for w in words) and f"flash: part {PART}" in err and "--force-board-mismatch" in err
    assert flash_state(tmp_path) == before and journals(tmp_path) == []
    assert not list(tmp_path.glob("navi31-flash-backup-*"))
    assert r.stats["reg_reads"] < 60_000  # the vbios was looked up, not the whole flash read (~550,000)


def test_force_board_mismatch_writes_and_reports_both(tmp_path: Path) -> None:
    (tmp_path / "foreign.bin").write_bytes(FOREIGN_PART)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "foreign.bin", "--no-backup",
            "--force-board-mismatch", "--yes")
    assert r.code == 0, r.err
    assert flash_state(tmp_path)[0] == FOREIGN_PART
    doc = json.loads(r.out)
    assert list(doc) == ["sectors_total", "sectors_changed", "sectors_skipped", "sha256_after", "backup", "resumed",
                         "start_sector", "sector_count", "protection_restored", "board", "region", "layout"]
    board = doc["board"]
    assert list(board) == ["image", "flash", "source", "match", "forced"]
    assert list(board["image"]) == ["offset", "part_number", "vendor_id", "device_id", "subsystem_vendor_id",
                                    "subsystem_id", "version", "build_date", "name", "checksum_ok"]
    assert (board["match"], board["forced"], board["source"]) == (False, True, "flash")
    assert board["image"]["part_number"] == "113-FOREIGN-BOARD0" and board["flash"]["part_number"] == PART
    assert board["flash"]["offset"] == ifwi.VBIOS_A and board["image"]["device_id"] == 0x744C
    assert "warning: writing an image for another board (--force-board-mismatch)" in r.err
    assert "board: another board (forced)" in r.err  # the plan shows both


# -- accepted -----------------------------------------------------------------------------------------------------
def test_same_board_with_a_new_vbios_version_is_written(tmp_path: Path) -> None:
    img = edit_vbios(version(b"ATOMBIOSBK-AMD VER100.100.100.100.000001"))
    assert vbios_identity(img).version.startswith("100.100")
    (tmp_path / "new.bin").write_bytes(img)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "new.bin", "--no-backup", "--yes")
    assert r.code == 0, r.err
    board = json.loads(r.out)["board"]
    assert (board["match"], board["forced"]) == (True, False) and board["image"]["version"].startswith("100.100")
    assert "warning" not in r.err and "board: same board" in r.err
    assert flash_state(tmp_path)[0] == img


def test_image_without_vbios_is_refused_unless_forced(tmp_path: Path) -> None:
    img = edit_vbios(no_vbios)
    (tmp_path / "img.bin").write_bytes(img)
    r = run("--device", dev(tmp_path), "--json", "--stats", "flash", "write", "img.bin", "--no-backup", "--yes")
    assert r.code == 2 and "refusing the image: no atom vbios" in r.err and "--force" in r.err
    assert r.stats["reg_reads"] == 0 and "sectors_changed" not in r.out
    r = run("--device", dev(tmp_path), "--json", "--stats", "flash", "write", "img.bin", "--no-backup", "--yes",
            "--force")
    assert r.code == 0, r.err
    assert "note: no atom vbios" in r.err
    assert "warning: the image holds no atom vbios" in r.err
    board = json.loads(r.out)["board"]
    assert (board["image"], board["flash"], board["match"]) == (None, None, None)
    assert flash_state(tmp_path)[0] == img


@pytest.mark.parametrize("board", ["navi31"])  # the whole-flash scan over the usb bridge costs seconds here
def test_flash_without_vbios_warns_and_goes_on(tmp_path: Path, board: str) -> None:
    (tmp_path / "flash.bin").write_bytes(edit_vbios(no_vbios))  # e.g. a board whose flash was half erased
    (tmp_path / "img.bin").write_bytes(IMAGE)
    r = run("--device", dev(tmp_path, board), "--json", "flash", "write", "img.bin", "--no-backup", "--yes",
            "--start-sector", str(ifwi.VBIOS_A // SECTOR), "--sector-count", "1")
    assert r.code == 0, r.err
    assert "warning: the flash holds no atom vbios" in r.err and "read the whole flash" in r.err
    doc = json.loads(r.out)
    assert doc["board"]["flash"] is None and doc["board"]["image"]["part_number"] == PART
    assert doc["sectors_changed"] == 1


def test_erase_has_no_board_check(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--json", "flash", "erase", "--start-sector", "2", "--sector-count", "1",
            "--no-backup", "--yes")
    assert r.code == 0 and json.loads(r.out)["board"] is None


# -- resume: the journal's identity, not the half-written flash ---------------------------------------------------
def interrupt_at_sector(monkeypatch: pytest.MonkeyPatch, sector: int) -> None:
    """The erase of ``sector`` fails like a pulled cable (this process only)."""
    real = chip_mod.Gd25.erase_sector

    def erase_sector(self: chip_mod.Gd25, index: int) -> None:
        if index == sector:
            raise Disconnected(f"test: cable pulled before erasing sector {index}")
        real(self, index)

    monkeypatch.setattr(chip_mod.Gd25, "erase_sector", erase_sector)


@pytest.mark.slow
def test_resume_compares_with_the_identity_recorded_before_the_job(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "foreign.bin").write_bytes(FOREIGN_PART)
    with monkeypatch.context() as mp:
        interrupt_at_sector(mp, ifwi.VBIOS_B // SECTOR)  # vbios A already foreign, vbios B still the old one
        r = run("--device", dev(tmp_path), "flash", "write", "foreign.bin", "--no-backup",
                "--force-board-mismatch", "--yes")
    assert r.code == 1 and "--resume --yes" in r.err and "--force-board-mismatch" in r.err
    half = flash_state(tmp_path)[0]
    assert vbios_identity(half).part_number == "113-FOREIGN-BOARD0"  # the flash's first vbios is the new one now
    (journal,) = journals(tmp_path)
    doc = json.loads(journal.read_text())
    assert doc["board_checked"] is True and doc["board_identity"]["part_number"] == PART
    # comparing with the half-written flash would call it the same board; the journal says it is not
    r = run("--device", dev(tmp_path), "flash", "write", "foreign.bin", "--resume", "--yes")
    assert r.code == 2 and "another board" in r.err and "flash (as recorded before the interrupted job)" in r.err
    assert flash_state(tmp_path)[0] == half and journals(tmp_path) == [journal]
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "foreign.bin", "--resume",
            "--force-board-mismatch", "--yes")
    assert r.code == 0, r.err
    board = json.loads(r.out)["board"]
    assert (board["source"], board["match"], board["forced"]) == ("journal", False, True)
    assert flash_state(tmp_path)[0] == FOREIGN_PART and journals(tmp_path) == []


def test_resume_of_a_same_board_write_over_a_torn_vbios(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The interrupted job erased vbios A's first sector: the flash looks vbios-less there, the journal knows."""
    img = edit_vbios(version(b"ATOMBIOSBK-AMD VER100.100.100.100.000001"))
    (tmp_path / "img.bin").write_bytes(img)
    vbios_a = ifwi.VBIOS_A // SECTOR
    real_program = chip_mod.Gd25.program_page

    def program_page(self: chip_mod.Gd25, addr: int, data: bytes, sector: int | None = None) -> None:
        if addr // SECTOR == vbios_a:
            raise Disconnected("test: cable pulled after the erase")
        real_program(self, addr, data, sector)

    with monkeypatch.context() as mp:
        mp.setattr(chip_mod.Gd25, "program_page", program_page)
        r = run("--device", dev(tmp_path, "navi31-usb"), "flash", "write", "img.bin", "--no-backup", "--yes",
                "--start-sector", str(vbios_a), "--sector-count", "1")
    assert r.code == 1
    torn = flash_state(tmp_path)[0]
    assert torn[ifwi.VBIOS_A:ifwi.VBIOS_A + SECTOR] == b"\xff" * SECTOR
    r = run("--device", dev(tmp_path, "navi31-usb"), "--json", "flash", "write", "img.bin", "--resume", "--yes")
    assert r.code == 0, r.err
    assert "warning" not in r.err
    board = json.loads(r.out)["board"]
    assert (board["source"], board["match"]) == ("journal", True) and board["flash"]["part_number"] == PART


@pytest.mark.slow
def test_resume_of_a_journal_without_a_record_warns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "img.bin").write_bytes(FOREIGN_PART)
    with monkeypatch.context() as mp:
        interrupt_at_sector(mp, ifwi.VBIOS_A // SECTOR)
        r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--no-backup", "--force-board-mismatch",
                "--yes")
    assert r.code == 1
    (journal,) = journals(tmp_path)
    doc = json.loads(journal.read_text())
    del doc["board_identity"], doc["board_checked"]  # a journal written before identities were recorded
    journal.write_text(json.dumps(doc))
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--resume", "--yes")
    assert r.code == 0, r.err
    assert "warning: the interrupted job's journal recorded no board identity" in r.err
    assert json.loads(r.out)["board"]["source"] == "unrecorded"


# -- flash info, and the lookup itself ----------------------------------------------------------------------------
@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_info_shows_the_board_identity(tmp_path: Path, board: str) -> None:
    r = run("--device", dev(tmp_path, board), "--json", "flash", "info")
    assert r.code == 0, r.err
    ident = json.loads(r.out)["board_identity"]
    assert (ident["offset"], ident["part_number"], ident["vendor_id"], ident["device_id"]) == (
        ifwi.VBIOS_A, PART, 0x1002, 0x744C)
    assert ident["version"] == "099.099.099.099.999999" and ident["checksum_ok"] is True
    r = run("--device", dev(tmp_path, board), "flash", "info")
    assert f"vbios at 0x40000: part {PART}, pci 1002:744c, version 099.099.099.099.999999" in r.out


def test_info_without_vbios(tmp_path: Path) -> None:
    (tmp_path / "flash.bin").write_bytes(edit_vbios(no_vbios))
    r = run("--device", dev(tmp_path), "--json", "flash", "info")
    assert r.code == 0 and json.loads(r.out)["board_identity"] is None
    assert "vbios: none at a 128 KiB boundary" in run("--device", dev(tmp_path), "flash", "info").out


def test_lookup_reads_little_and_scans_only_when_nothing_is_found() -> None:
    reads: list[tuple[int, int]] = []

    def reader(data: bytes) -> Callable[[int, int], bytes]:
        def read(addr: int, n: int) -> bytes:
            reads.append((addr, n))
            return data[addr:addr + n]
        return read

    found, scanned = read_identity(reader(IMAGE), len(IMAGE), [ifwi.VBIOS_A])
    assert not scanned and found.offset == ifwi.VBIOS_A and found.part_number == PART
    assert sum(n for _, n in reads) == 3 * 0x200 + ifwi.VBIOS_SIZE  # headers at 0, 0x20000, 0x40000, then the rom
    only_b = bytearray(IMAGE)
    only_b[ifwi.VBIOS_A:ifwi.VBIOS_A + 2] = b"\0\0"
    assert probe_identity(reader(bytes(only_b)), len(IMAGE)).offset == ifwi.VBIOS_B
    reads.clear()
    found, scanned = read_identity(reader(edit_vbios(no_vbios)), len(IMAGE))
    assert found is None and scanned and (0, len(IMAGE)) in reads
    # a vbios off the 128 KiB grid is found by the scan, at its offset
    moved = bytearray(b"\xff" * len(IMAGE))
    moved[0x30200:0x30200 + ifwi.VBIOS_SIZE] = IMAGE[ifwi.VBIOS_A:ifwi.VBIOS_A + ifwi.VBIOS_SIZE]
    found, scanned = read_identity(reader(bytes(moved)), len(IMAGE))
    assert scanned and found.offset == 0x30200 and found.part_number == PART
