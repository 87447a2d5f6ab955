"""Files a user names (issue 10 items 1-3, 7): output paths refused before the device is read, inputs checked
before they are read, backups never overwritten, --resume with another --backup, --abandon, literal paths."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev, flash_state, journals

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Disconnected, EnvironmentProblem
from tinyhw.flash.chip import Gd25
from tinyhw.mocks.amd.ifwi_image import build_image

IMAGE = build_image(board=NAVI31)
SECTOR = 4096


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.chdir(tmp_path)


def _untouched(r) -> None:
    s = r.stats
    assert s["reg_reads"] == 0 and s["usb_transfers"] == 0 and s["round_trips"] == 0, s


def changed(sectors: list[int]) -> bytes:
    img = bytearray(IMAGE)
    for s in sectors:
        img[s * SECTOR + 16:s * SECTOR + 48] = hashlib.sha256(bytes([s & 0xFF, s >> 8])).digest()
    return bytes(img)


@pytest.fixture
def specials(tmp_path: Path):
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(tmp_path / "sock"))
    (tmp_path / "adir").mkdir()
    yield {"fifo": (str(fifo), "a fifo"), "sock": (str(tmp_path / "sock"), "a socket"),
           "dir": (str(tmp_path / "adir"), "a directory"), "dev": ("/dev/full", "a character device node")}
    sock.close()


# -- item 1: output files ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
@pytest.mark.parametrize("which", ["fifo", "sock", "dir", "dev"])
def test_dump_refuses_special_files_before_reading(tmp_path: Path, specials, board: str, which: str) -> None:
    path, words = specials[which]
    before = os.stat(path)
    for extra in ([], ["--force"]):
        r = run("--device", dev(tmp_path, board), "--stats", "flash", "dump", path, *extra)
        assert r.code == 2 and words in r.err, r.err
        _untouched(r)
    after = os.stat(path)
    assert stat.S_IFMT(after.st_mode) == stat.S_IFMT(before.st_mode) and after.st_ino == before.st_ino


@pytest.mark.parametrize("path,words", [("", "an empty path"), ("nodir/d.bin", "directory nodir does not exist"),
                                        ("/proc/tinyhw.bin", "cannot create a file in /proc"),
                                        ("/proc/version", "exists"), ("out/", "names a directory")])
def test_dump_refuses_bad_paths_before_reading(tmp_path: Path, path: str, words: str) -> None:
    r = run("--device", dev(tmp_path), "--stats", "flash", "dump", path)
    assert r.code == 2 and words in r.err and "internal error" not in r.err, r.err
    _untouched(r)
    assert len(r.err.splitlines()) == 2  # the stats line and one error line


def test_dump_overwrites_only_with_force(tmp_path: Path) -> None:
    (tmp_path / "d.bin").write_bytes(b"mine")
    r = run("--device", dev(tmp_path), "--stats", "flash", "dump", "d.bin")
    assert r.code == 2 and "exists" in r.err and "--force" in r.err
    _untouched(r)
    assert (tmp_path / "d.bin").read_bytes() == b"mine"
    r = run("--device", dev(tmp_path), "flash", "dump", "d.bin", "--force")
    assert r.code == 0, r.err
    assert (tmp_path / "d.bin").read_bytes() == IMAGE


def test_dump_writes_through_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "link.bin").symlink_to(tmp_path / "target.bin")
    r = run("--device", dev(tmp_path), "flash", "dump", "link.bin")
    assert r.code == 0, r.err
    assert (tmp_path / "link.bin").is_symlink() and (tmp_path / "target.bin").read_bytes() == IMAGE
    r = run("--device", dev(tmp_path), "flash", "dump", "link.bin")
    assert r.code == 2 and "target of the symlink" in r.err
    r = run("--device", dev(tmp_path), "flash", "dump", "link.bin", "--force")
    assert r.code == 0 and (tmp_path / "link.bin").is_symlink()
    (tmp_path / "devlink").symlink_to("/dev/full")
    r = run("--device", dev(tmp_path), "--stats", "flash", "dump", "devlink", "--force")
    assert r.code == 2 and "character device node" in r.err and (tmp_path / "devlink").is_symlink()
    _untouched(r)


def test_read_output_checked_first(tmp_path: Path, specials) -> None:
    r = run("--device", dev(tmp_path), "--stats", "flash", "read", "0", "16", "-o", specials["fifo"][0])
    assert r.code == 2 and "a fifo" in r.err
    _untouched(r)
    (tmp_path / "part.bin").write_bytes(b"x")
    r = run("--device", dev(tmp_path), "flash", "read", "0", "16", "-o", "part.bin")
    assert r.code == 2 and "exists" in r.err
    r = run("--device", dev(tmp_path), "flash", "read", "0", "16", "-o", "part.bin", "--force")
    assert r.code == 0 and (tmp_path / "part.bin").read_bytes() == IMAGE[:16]


# -- item 7: paths printed literally -------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["[red]x", "[bold]b", ":smile:"])
def test_paths_are_printed_literally(tmp_path: Path, name: str) -> None:
    (tmp_path / name).mkdir()
    out = f"{tmp_path}/{name}/out.bin"
    r = run("--device", dev(tmp_path), "flash", "read", "0", "16", "-o", out)
    assert r.code == 0, r.err
    assert f"into {out}\n" in r.out
    r = run("--device", dev(tmp_path), "flash", "dump", f"{tmp_path}/{name}/d.bin")
    assert f"to {tmp_path}/{name}/d.bin\n" in r.out
    r = run("--device", dev(tmp_path), "flash", "verify", f"{tmp_path}/{name}/d.bin")
    assert r.code == 0 and f"matches {tmp_path}/{name}/d.bin " in r.out
    r = run("firmware", "inspect", f"{tmp_path}/{name}/d.bin")
    assert r.code == 0 and "d.bin (2097152 bytes)" in r.out
    r = run("firmware", "diff", f"{tmp_path}/{name}/d.bin", f"{tmp_path}/{name}/d.bin")
    assert r.code == 0 and f"{tmp_path}/{name}/d.bin and {tmp_path}/{name}/d.bin are identical" in r.out


# -- item 2: input files ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("cmd", [["flash", "write", "{}", "--yes"], ["flash", "verify", "{}"],
                                 ["firmware", "inspect", "{}"], ["firmware", "diff", "{}", "ok.bin"]])
@pytest.mark.parametrize("which", ["fifo", "sock", "dir"])
def test_inputs_must_be_regular_files(tmp_path: Path, specials, cmd: list[str], which: str) -> None:
    (tmp_path / "ok.bin").write_bytes(IMAGE)
    path, words = specials[which]
    device = ["--device", dev(tmp_path)] if cmd[0] == "flash" else []  # firmware commands take no device
    r = run(*device, "--stats", *[c.replace("{}", path) for c in cmd])
    assert r.code == 2 and words in r.err, r.err
    _untouched(r)


@pytest.mark.parametrize("cmd", [["flash", "write", "/dev/zero", "--yes"], ["flash", "verify", "/dev/zero"],
                                 ["firmware", "inspect", "/dev/zero"], ["firmware", "diff", "/dev/zero", "/dev/zero"]])
def test_dev_zero_is_refused_at_once(tmp_path: Path, cmd: list[str]) -> None:
    device = ["--device", dev(tmp_path)] if cmd[0] == "flash" else []  # firmware commands take no device
    r = run(*device, "--stats", *cmd)
    assert r.code == 2 and "refusing to read" in r.err and "character device node" in r.err
    _untouched(r)


def test_inputs_larger_than_the_command_takes(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with open(big, "wb") as f:
        f.truncate(0x200001)
    for cmd in (["flash", "write", "big.bin", "--yes"], ["flash", "verify", "big.bin"]):
        r = run("--device", dev(tmp_path), "--stats", *cmd)
        assert r.code == 2 and "0x200001 bytes is more than the 2 mib this command accepts" in r.err
        _untouched(r)
    with open(big, "wb") as f:
        f.truncate((256 << 20) + 1)  # sparse: nothing is read, the size alone refuses it
    r = run("firmware", "inspect", "big.bin")
    assert r.code == 2 and "more than the 256 mib" in r.err


# -- item 3: backups -----------------------------------------------------------------------------------------------
def test_backup_path_checked_before_anything_is_read(tmp_path: Path, specials,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "img.bin").write_bytes(changed([3]))
    (tmp_path / "old.bin").write_bytes(b"old backup")
    for backup, words in ((specials["fifo"][0], "a fifo"), ("old.bin", "exists"), ("no/b.bin", "does not exist"),
                          ("/proc/b.bin", "cannot create a file in /proc")):
        r = run("--device", dev(tmp_path), "--stats", "flash", "write", "img.bin", "--backup", backup, "--yes")
        assert r.code == 2 and words in r.err, r.err
        _untouched(r)
    assert (tmp_path / "old.bin").read_bytes() == b"old backup" and not journals(tmp_path)
    # the default backup goes to tinyhw's state directory: it must take a new file
    monkeypatch.setenv("XDG_STATE_HOME", "/proc")
    r = run("--device", dev(tmp_path), "--stats", "flash", "write", str(tmp_path / "img.bin"), "--yes")
    assert r.code == 2 and "cannot create the backup directory /proc/tinyhw/backups" in r.err, r.err
    _untouched(r)


def _interrupt_program(monkeypatch: pytest.MonkeyPatch, sector: int) -> None:
    """The device goes away at the first page program of ``sector`` (erased by then, not yet programmed)."""
    real = Gd25.program_page

    def program_page(self, *a, **kw):
        if kw.get("sector") == sector:
            raise Disconnected("the device went away (test)")
        return real(self, *a, **kw)

    monkeypatch.setattr(Gd25, "program_page", program_page)


@pytest.mark.slow
def test_resume_with_another_backup_before_the_backup_is_made(tmp_path: Path, monkeypatch) -> None:
    from tinyhw.flash import writer

    img = changed([3, 9])
    (tmp_path / "img.bin").write_bytes(img)
    with monkeypatch.context() as m:
        def fail(*a, **kw):
            raise Disconnected("the device went away (test)")
        m.setattr(writer.Writer, "_read_twice", fail)
        r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--backup", "b1.bin", "--yes")
    assert r.code == 1 and journals(tmp_path)
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--resume", "--backup", "b2.bin",
            "--yes")
    assert r.code == 0, r.err
    assert "note: backing up to b2.bin instead of b1.bin" in r.err
    assert json.loads(r.out)["backup"] == "b2.bin" and (tmp_path / "b2.bin").read_bytes() == IMAGE
    assert not (tmp_path / "b1.bin").exists() and flash_state(tmp_path)[0] == img


@pytest.mark.slow
def test_resume_with_another_backup_after_the_backup_is_refused(tmp_path: Path, monkeypatch) -> None:
    img = changed([3, 9])
    (tmp_path / "img.bin").write_bytes(img)
    with monkeypatch.context() as m:
        _interrupt_program(m, 9)
        r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--backup", "b1.bin", "--yes")
    assert r.code == 1 and (tmp_path / "b1.bin").read_bytes() == IMAGE
    r = run("--device", dev(tmp_path), "--stats", "flash", "write", "img.bin", "--resume", "--backup", "b2.bin",
            "--yes")
    assert r.code == 2 and "backup is already made at b1.bin" in r.err
    _untouched(r)
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--resume", "--yes")
    assert r.code == 0, r.err
    assert flash_state(tmp_path)[0] == img and not (tmp_path / "b2.bin").exists()


@pytest.mark.slow
def test_a_failed_backup_path_is_not_silently_reused(tmp_path: Path, monkeypatch) -> None:
    from tinyhw.flash import writer

    img = changed([5])
    (tmp_path / "img.bin").write_bytes(img)
    with monkeypatch.context() as m:
        def full(*a, **kw):
            raise EnvironmentProblem("cannot write b1.bin: no space left on device")
        m.setattr(writer, "write_verified", full)
        r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--backup", "b1.bin", "--yes")
    assert r.code == 3 and "no space left" in r.err
    doc = json.loads(journals(tmp_path)[0].read_text())
    assert doc["backup"] == "b1.bin" and "no space left" in doc["backup_failed"]
    r = run("--device", dev(tmp_path), "--stats", "flash", "write", "img.bin", "--resume", "--yes")
    assert r.code == 2 and "backup to b1.bin failed" in r.err and "--backup" in r.err
    _untouched(r)
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--resume", "--backup", "b1.bin", "--yes")
    assert r.code == 0, r.err
    assert (tmp_path / "b1.bin").read_bytes() == IMAGE and flash_state(tmp_path)[0] == img


# -- item 3: --abandon -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_abandon_shows_the_journal_and_the_flash_then_removes_it(tmp_path: Path, monkeypatch) -> None:
    img = changed([3, 16, 40])
    (tmp_path / "img.bin").write_bytes(img)
    with monkeypatch.context() as m:
        _interrupt_program(m, 16)  # sector 3 done, sector 16 (full of data) erased
        r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--backup", "b.bin", "--yes")
    assert r.code == 1
    before = flash_state(tmp_path)[0]
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--abandon")
    assert r.code == 2 and "--yes" in r.err and journals(tmp_path)
    assert "sectors written and verified: 3" in r.err and "backup of the flash before the job: b.bin" in r.err
    assert "stopped during program of sector 16" in r.err
    r = run("--device", dev(tmp_path), "--json", "flash", "write", "img.bin", "--abandon", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["abandoned"] and doc["sectors_done"] == [3] and doc["backup"] == "b.bin"
    fl = doc["flash"]
    assert fl["read"] and 3 in fl["sectors_as_target"] and fl["sectors_other"] == [16]
    assert fl["sectors_as_before"] == [40] and len(fl["sectors_as_target"]) == 510
    assert not journals(tmp_path) and flash_state(tmp_path)[0] == before  # the flash is left as it is
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--abandon", "--yes")
    assert r.code == 2 and "nothing to abandon" in r.err
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--yes", "--backup", "b2.bin")
    assert r.code == 0, r.err  # a fresh write is possible again


@pytest.mark.slow
def test_abandon_without_a_device_still_shows_the_journal(tmp_path: Path, monkeypatch) -> None:
    img = changed([3])
    (tmp_path / "img.bin").write_bytes(img)
    with monkeypatch.context() as m:
        _interrupt_program(m, 3)
        assert run("--device", dev(tmp_path), "flash", "write", "img.bin", "--no-backup", "--yes").code == 1
    r = run("--device", "usb:7", "flash", "write", "img.bin", "--abandon", "--yes")
    assert r.code == 0, r.err
    assert "flash: not read" in r.err and "backup: none was made (--no-backup)" in r.err and not journals(tmp_path)


def test_abandon_and_resume_contradict(tmp_path: Path) -> None:
    (tmp_path / "img.bin").write_bytes(IMAGE)
    r = run("--device", dev(tmp_path), "flash", "write", "img.bin", "--abandon", "--resume", "--yes")
    assert r.code == 2 and "contradict" in r.err


# -- mock reset backups ------------------------------------------------------------------------------------------------
def test_mock_reset_is_repeatable_and_keeps_one_backup_of_your_contents(tmp_path: Path) -> None:
    flash = tmp_path / "board.bin"
    bak = tmp_path / "board.bin.bak"
    device = f"mock:navi31,flash={flash}"
    assert run("--device", device, "mock", "reset", "--yes").code == 0  # creates the file (no backup: nothing kept)
    factory = flash.read_bytes()
    for _ in range(3):  # the factory image again and again: nothing of yours to keep, so no backup, never refused
        r = run("--device", device, "mock", "reset", "--yes")
        assert r.code == 0 and "no backup: it holds the factory image" in r.err and not bak.exists(), r.err
    flash.write_bytes(b"\1" * len(IMAGE))
    r = run("--device", device, "mock", "reset", "--yes")
    assert r.code == 0 and f"your contents kept as {bak}" in r.out and bak.read_bytes() == b"\1" * len(IMAGE), r
    assert flash.read_bytes() == factory
    assert run("--device", device, "mock", "reset", "--yes").code == 0 and bak.read_bytes() == b"\1" * len(IMAGE)
    flash.write_bytes(b"\2" * len(IMAGE))
    r = run("--device", device, "mock", "reset", "--yes")
    assert r.code == 0 and "replacing the earlier backup" in r.err and bak.read_bytes() == b"\2" * len(IMAGE), r
    assert flash.read_bytes() == factory
    assert run("--device", device, "mock", "reset", "--yes", "--force").code == 0  # still accepted
    bak.unlink()
    os.mkfifo(tmp_path / "board.bin.bak")
    r = run("--device", device, "mock", "reset", "--yes", "--force")
    assert r.code == 2 and "a fifo" in r.err and (tmp_path / "board.bin.bak").is_fifo()


def test_empty_device_string_is_a_bad_string(tmp_path: Path) -> None:
    from tinyhw.transport.devstr import given_device

    r = run("--device", "", "mock", "reset", "--yes")
    assert r.code == 2 and "bad device string ''" in r.err
    with pytest.raises(Exception, match="bad device string") as e:
        given_device("")
    assert e.value.exit_code == 2
    assert given_device(None, {}) is None and given_device(None, {"TINYHW_DEVICE": ""}) is None
    assert given_device(None, {"TINYHW_DEVICE": "mock:navi31"}).kind == "mock"


def test_abandon_an_interrupted_erase(tmp_path: Path, monkeypatch) -> None:
    real = Gd25.erase_sector

    def erase_sector(self, s, *a, **kw):
        if s == 18:
            raise Disconnected("the device went away (test)")
        return real(self, s, *a, **kw)

    with monkeypatch.context() as m:
        m.setattr(Gd25, "erase_sector", erase_sector)
        r = run("--device", dev(tmp_path), "flash", "erase", "--start-sector", "16", "--sector-count", "4",
                "--no-backup", "--yes")
    assert r.code == 1 and journals(tmp_path)
    r = run("--device", dev(tmp_path), "--json", "flash", "erase", "--abandon", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["kind"] == "erase" and doc["sectors_done"] == [16, 17] and doc["phase"] == "erase"
    assert set(doc["flash"]["sectors_as_target"]) >= {16, 17} and "sector(s) as erased" in r.err
    assert not journals(tmp_path)
