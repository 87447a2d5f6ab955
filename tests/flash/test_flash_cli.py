"""``tinyhw flash ...`` end to end on both emulated boards: outputs, JSON keys, every refusal path."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev, flash_state, journals

from tinyhw.boards.navi31 import NAVI31
from tinyhw.mocks.amd.ifwi_image import build_image

IMAGE = build_image(board=NAVI31)
SECTOR = 4096


def changed_image(sectors: list[int], seed: int = 1) -> bytes:
    img = bytearray(IMAGE)
    for s in sectors:
        img[s * SECTOR + 16:s * SECTOR + 48] = hashlib.sha256(bytes([seed, s & 0xFF, s >> 8])).digest()
    return bytes(img)


# -- help ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [[], ["info"], ["read"], ["dump"], ["verify"], ["write"], ["erase"], ["layout"]])
def test_help_has_examples(cmd: list[str]) -> None:
    r = run("flash", *cmd, "--help")
    assert r.code == 0 and "Example" in r.out


# -- read-only commands ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_info(tmp_path: Path, board: str) -> None:
    r = run("--device", dev(tmp_path, board), "--json", "flash", "info")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["jedec_id"] == "c86015" and doc["chip"] == "GD25LQ16E" and doc["size"] == 0x200000
    assert (doc["sr1"], doc["sr2"], doc["sr3"], doc["protected"], doc["sfdp"]) == (0, 0, 0, False, True)
    r = run("--device", dev(tmp_path, board), "flash", "info")
    assert r.code == 0 and "not protected" in r.out and "c86015" in r.out


@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_read(tmp_path: Path, board: str) -> None:
    r = run("--device", dev(tmp_path, board), "flash", "read", "0x2000", "32")
    assert r.code == 0, r.err
    assert r.out.startswith("002000  24 50 53 50") and "$PSP" in r.out
    r = run("--device", dev(tmp_path, board), "--json", "flash", "read", "4k", "0x300", "-o", "part.bin")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["address"] == 4096 and doc["size"] == 0x300 and doc["path"] == "part.bin"
    assert (tmp_path / "part.bin").read_bytes() == IMAGE[4096:4096 + 0x300]
    assert doc["sha256"] == hashlib.sha256(IMAGE[4096:4096 + 0x300]).hexdigest()


@pytest.mark.parametrize("args", [["0x1ffff0", "0x20"], ["0", "0"], ["zz", "1"]])
def test_read_outside_is_refused(tmp_path: Path, args: list[str]) -> None:
    r = run("--device", dev(tmp_path), "flash", "read", *args)
    *notes, last = r.err.splitlines()  # the first open of a fresh flash file says so (note: ...)
    assert r.code == 2 and last.startswith("error:") and r.no_result and all(n.startswith("note: ") for n in notes)


def test_dump_and_verify_direct(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--json", "flash", "dump", "d.bin")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    data = (tmp_path / "d.bin").read_bytes()
    assert data == IMAGE and doc == {"path": "d.bin", "bytes": 0x200000, "sha256": hashlib.sha256(IMAGE).hexdigest(),
                                     "reads": 1, "region": None, "sectors_disagreed": []}
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".d.bin")] == []  # no temporary left
    r = run("--device", dev(tmp_path), "--json", "flash", "verify", "d.bin")
    assert r.code == 0 and json.loads(r.out)["match"] is True
    (tmp_path / "other.bin").write_bytes(changed_image([3, 300]))
    r = run("--device", dev(tmp_path), "--json", "flash", "verify", "other.bin")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["match"] is False
    assert doc["first_mismatch"] == 3 * SECTOR + 16 and doc["mismatched_sectors"] == [3, 300]
    assert r.err.startswith("error: flash differs")


@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_verify_a_sector_range(tmp_path: Path, board: str) -> None:
    (tmp_path / "other.bin").write_bytes(changed_image([3, 300]))
    r = run("--device", dev(tmp_path, board), "--json", "--stats", "flash", "verify", "other.bin",
            "--start-sector", "290", "--sector-count", "20")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["mismatched_sectors"] == [300] and doc["first_mismatch"] == 300 * SECTOR + 16
    assert r.stats["bytes_in"] < 40 * SECTOR  # only the range was read
    r = run("--device", dev(tmp_path, board), "--json", "flash", "verify", "other.bin", "--start-sector", "4",
            "--sector-count", "200")
    assert r.code == 0 and json.loads(r.out)["match"] is True
    r = run("--device", dev(tmp_path, board), "flash", "verify", "other.bin", "--start-sector", "510",
            "--sector-count", "5")
    assert r.code == 2 and "--sector-count 5 is outside 1..2" in r.err


def test_full_dump_over_usb_meets_the_transfer_budget(tmp_path: Path) -> None:
    r = run("--device", f"mock:navi31-usb,flash={tmp_path / 'flash.bin'}", "--stats", "flash", "dump", "u.bin")
    assert r.code == 0, r.err
    assert (tmp_path / "u.bin").read_bytes() == IMAGE and hashlib.sha256(IMAGE).hexdigest() in r.out
    st = r.stats
    chunks = 0x200000 // 256
    assert st["usb_transfers"] / chunks <= 6  # the seed needed about 52
    assert st["tlp_reads"] / chunks <= 2  # IN transfers: one per single read or streamed read
    assert st["usb_transfers"] < 400_000 // 8


# -- write / erase ---------------------------------------------------------------------------------------------------
def test_write_without_yes_is_refused_and_touches_nothing(tmp_path: Path) -> None:
    assert run("--device", dev(tmp_path), "flash", "info").code == 0
    before = flash_state(tmp_path)
    (tmp_path / "new.bin").write_bytes(changed_image([1]))
    r = run("--device", dev(tmp_path), "flash", "write", "new.bin")
    assert r.code == 2 and "needs --yes" in r.err
    assert flash_state(tmp_path) == before and journals(tmp_path) == []
    assert not list(tmp_path.glob("navi31-flash-backup-*"))


@pytest.mark.parametrize(("content", "args", "msg"), [
    (IMAGE[:0x100000], [], "0x100000 bytes"),
    (IMAGE[:0x100000], ["--force"], "0x100000 bytes"),
    (b"\x00" * 4 + IMAGE[4:], [], "ifwi magic"),
    (IMAGE, ["--backup", "b.bin", "--no-backup"], "contradict"),
    (IMAGE, ["--start-sector", "512"], "outside"),
    (IMAGE, ["--start-sector", "500", "--sector-count", "13"], "outside"),
    (IMAGE, ["--resume"], "nothing to resume"),
])
def test_write_refusals(tmp_path: Path, content: bytes, args: list[str], msg: str) -> None:
    assert run("--device", dev(tmp_path), "flash", "info").code == 0
    before = flash_state(tmp_path)
    (tmp_path / "img.bin").write_bytes(content)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", *args, "--yes")
    assert r.code == 2 and msg in r.err and r.no_result, r.err
    assert r.err.count("\n") == 1
    assert flash_state(tmp_path) == before and journals(tmp_path) == []


def test_existing_backup_file_is_never_overwritten(tmp_path: Path) -> None:
    (tmp_path / "b.bin").write_bytes(b"keep")
    (tmp_path / "img.bin").write_bytes(changed_image([2]))
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--backup", "b.bin", "--yes")
    assert r.code == 2 and "exists" in r.err and (tmp_path / "b.bin").read_bytes() == b"keep"


def test_force_writes_an_image_without_magic(tmp_path: Path) -> None:
    img = bytearray(changed_image([5]))
    img[:4] = b"\0\0\0\0"
    (tmp_path / "img.bin").write_bytes(img)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--force", "--no-backup",
            "--sector-count", "8", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["sectors_total"], doc["sectors_changed"], doc["sectors_skipped"]) == (8, 2, 6)
    assert flash_state(tmp_path)[0] == bytes(img[:8 * SECTOR]) + IMAGE[8 * SECTOR:]
    # a partial write without a backup does not read the untouched rest of the flash just for a hash
    assert doc["sha256_after"] is None and doc["backup"] is None


@pytest.mark.slow
def test_write_full_with_default_backup(tmp_path: Path) -> None:
    img = changed_image([0, 17, 255, 511])
    (tmp_path / "img.bin").write_bytes(img)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert f"backup: {doc['backup']} (sha256 " in r.err  # the message says where
    assert (doc["sectors_total"], doc["sectors_changed"], doc["sectors_skipped"]) == (512, 4, 508)
    backup = Path(doc["backup"])
    # tinyhw's state directory, never the current one; named by the chip (jedec id), the board (vbios part
    # number), the time and the content
    assert backup.parent == tmp_path / "state" / "tinyhw" / "backups" and not list(tmp_path.glob("*backup*"))
    assert backup.name.startswith("navi31-c86015-113-TINYHW31-SYNTH-")
    assert backup.name.endswith(hashlib.sha256(IMAGE).hexdigest()[:8] + ".bin") and backup.read_bytes() == IMAGE
    assert flash_state(tmp_path)[0] == img and doc["sha256_after"] == hashlib.sha256(img).hexdigest()
    assert journals(tmp_path) == []
    # writing the same image again changes nothing: every sector costs only its read
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--no-backup", "--yes")
    assert r.code == 0 and json.loads(r.out)["sectors_changed"] == 0


@pytest.mark.slow
def test_partial_write_over_usb(tmp_path: Path) -> None:
    img = changed_image([40, 41, 47])
    (tmp_path / "img.bin").write_bytes(img)
    r = run("--device", dev(tmp_path, "navi31-usb"), "--json", "flash", "write", "img.bin", "--start-sector", "40",
            "--sector-count", "4", "--backup", "b.bin", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["sectors_changed"], doc["sectors_skipped"]) == (2, 2)  # sector 47 is outside the range
    assert (tmp_path / "b.bin").read_bytes() == IMAGE
    expected = IMAGE[:40 * SECTOR] + img[40 * SECTOR:44 * SECTOR] + IMAGE[44 * SECTOR:]
    assert flash_state(tmp_path)[0] == expected and doc["sha256_after"] == hashlib.sha256(expected).hexdigest()


def test_erase_range(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--json", "flash", "erase", "--start-sector", "2", "--sector-count", "3",
            "--no-backup", "--yes")
    assert r.code == 0, r.err
    flash = flash_state(tmp_path)[0]
    assert flash[2 * SECTOR:5 * SECTOR] == b"\xff" * 3 * SECTOR
    assert flash[:2 * SECTOR] == IMAGE[:2 * SECTOR] and flash[5 * SECTOR:] == IMAGE[5 * SECTOR:]
    doc = json.loads(r.out)
    assert doc["sectors_total"] == 3 and doc["sectors_changed"] + doc["sectors_skipped"] == 3


def test_erase_without_yes_is_refused(tmp_path: Path) -> None:
    assert run("--device", dev(tmp_path), "flash", "info").code == 0
    before = flash_state(tmp_path)
    r = run("--device", dev(tmp_path), "flash", "erase", "--sector-count", "1")
    assert r.code == 2 and flash_state(tmp_path) == before


def set_sr(tmp_path: Path, sr1: int, sr2: int) -> None:
    assert run("--device", dev(tmp_path), "flash", "info").code == 0  # creates the flash file
    (tmp_path / "flash.bin.sr").write_bytes(bytes([sr1, sr2, 0]))


def test_protection_refused_then_cleared_and_restored(tmp_path: Path) -> None:
    set_sr(tmp_path, 0x00, 0x40)  # CMP = 1, BP = 0: the whole array (§c.4)
    r = run("--device", dev(tmp_path), "--json", "flash", "info")
    assert json.loads(r.out)["protected"] is True
    before = flash_state(tmp_path)
    (tmp_path / "img.bin").write_bytes(changed_image([6]))
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--sector-count", "8", "--no-backup", "--yes")
    assert r.code == 2 and "write-protected" in r.err and "--clear-protection" in r.err
    assert flash_state(tmp_path) == before
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--sector-count", "8", "--no-backup",
            "--clear-protection", "--yes")
    assert r.code == 0, r.err
    assert json.loads(r.out)["protection_restored"] is True
    flash, sr = flash_state(tmp_path)
    assert sr[:2] == bytes([0x00, 0x40]) and flash[6 * SECTOR:7 * SECTOR] == changed_image([6])[6 * SECTOR:7 * SECTOR]


def test_protection_outside_the_range_needs_no_flag(tmp_path: Path) -> None:
    set_sr(tmp_path, 0x04, 0x00)  # upper 64 KiB protected
    r = run("--device", dev(tmp_path), "flash", "erase", "--start-sector", "0", "--sector-count", "2", "--no-backup",
            "--yes")
    assert r.code == 0, r.err
    r = run("--device", dev(tmp_path), "flash", "erase", "--start-sector", "500", "--sector-count", "1",
            "--no-backup", "--yes")
    assert r.code == 2 and "0x1f0000-0x1fffff" in r.err


def test_gated_board_fails_and_writes_nothing(tmp_path: Path) -> None:
    assert run("--device", dev(tmp_path), "flash", "info").code == 0
    before = flash_state(tmp_path)
    (tmp_path / "img.bin").write_bytes(changed_image([1]))
    r = run("--device", dev(tmp_path, extra="psp=sos"), "flash", "write", "img.bin", "--yes")
    assert r.code == 1 and "gated" in r.err and flash_state(tmp_path) == before


def test_dump_to_a_missing_directory_is_refused_first(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--stats", "flash", "dump", "nodir/d.bin")
    assert r.code == 2 and "directory nodir does not exist" in r.err and r.stats["reg_reads"] == 0


def test_no_chain_uses_paired_reads_for_everything(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--json", "flash", "--no-chain", "info")
    assert r.code == 0 and json.loads(r.out)["read_scheme"] == "paired"
    img = changed_image([9])
    (tmp_path / "img.bin").write_bytes(img)
    r = run("--device", dev(tmp_path), "--json", "flash", "--no-chain", "write", "img.bin", "--start-sector", "8",
            "--sector-count", "2", "--backup", "bk.bin", "--yes")
    assert r.code == 0, r.err
    assert json.loads(r.out)["sectors_changed"] == 1 and flash_state(tmp_path)[0] == img
    assert (tmp_path / "bk.bin").read_bytes() == IMAGE


@pytest.mark.slow
@pytest.mark.parametrize("how", ["power-cycle", "link-power", "am-boot"])
def test_a_gated_refusal_names_what_works_and_that_works(tmp_path: Path, how: str) -> None:
    """After a power cycle (mock power-cycle, link power off/on) or am boot the PSP gates ROM_SW: the refusal names
    the aperture read, flash update and, on the emulated board, mock reset; the aperture read and mock reset work."""
    from amfake import FW_DIR

    d = dev(tmp_path, "navi31-usb")
    assert run("--device", d, "flash", "info").code == 0  # a cold board: the boot loader stalls, rom_sw open
    if how == "power-cycle":
        assert run("--device", d, "mock", "power-cycle").code == 0
    elif how == "link-power":
        assert run("--device", d, "link", "power", "off", "--yes").code == 0
        assert run("--device", d, "link", "power", "on").code == 0
    else:
        assert run("--device", d, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR)).code == 0
    r = run("--device", d, "flash", "dump", "rom.bin")
    lines = [ln for ln in r.err.splitlines() if ln.strip()]
    assert r.code == 1 and len(lines) == 1 and "gated" in r.err, r.err
    assert "--method aperture" in r.err and "flash update" in r.err and "tinyhw mock reset --yes" in r.err, r.err
    assert run("--device", d, "flash", "dump", "rom.bin", "--method", "aperture").code == 0
    assert (tmp_path / "rom.bin").read_bytes() == build_image(board=NAVI31)
    assert run("--device", d, "mock", "reset", "--yes").code == 0
    assert run("--device", d, "flash", "dump", "again.bin").code == 0


def test_the_gated_hint_names_mock_reset_only_on_an_emulated_board() -> None:
    from tinyhw.flash.romsw import gated_hint

    assert "mock reset" in gated_hint(True) and "mock reset" not in gated_hint(False)
    assert "--method aperture" in gated_hint(False) and "flash update" in gated_hint(False)


def test_default_backup_check_probes_the_backup_directory_not_a_board_named_file(tmp_path: Path) -> None:
    """Before the device is opened only the backup directory is checked: the default backup is named after the board
    the flash's VBIOS describes, so no fixed (board-named) file in the directory stands in its way."""
    from tinyhw.flash.files import backup_dir
    from tinyhw.flash.jobfiles import check_backup
    from tinyhw.flash.writer import Job

    for name in ("navi31-flash-backup.bin", "flash-backup.bin"):
        (backup_dir() / name).write_bytes(b"someone's file")
    assert check_backup(Job("write", image=IMAGE), len(IMAGE)) is None
    assert sorted(p.name for p in backup_dir().iterdir()) == ["flash-backup.bin", "navi31-flash-backup.bin"]
