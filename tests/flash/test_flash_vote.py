"""Majority-vote reads (``flash dump --reads N``) and the emulated bridge's flaky link (``flaky=RATE``)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev

import tinyhw
from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import OperationFailed, Refused
from tinyhw.flash import FlashDevice, ops, vote
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.progress import Progress

IMAGE = build_image(board=NAVI31)
SECTOR = 4096


def flaky(tmp_path: Path, rate: float, seed: int = 7) -> str:
    return dev(tmp_path, "navi31-usb", f"flaky={rate},flaky-seed={seed}")


# -- the vote itself ------------------------------------------------------------------------------------------------
def test_majority_takes_the_value_most_reads_agree_on() -> None:
    good = bytes(range(64))
    bad1, bad2 = bytearray(good), bytearray(good)
    bad1[3], bad2[40] = 0xEE, 0x00
    assert vote.majority([bytes(bad1), good, bytes(bad2)]) == (good, None)
    assert vote.majority([good, bytes(bad1), bytes(bad1), good, good]) == (good, None)  # 3 of 5
    three = bytearray(good)
    three[3] = 0x77  # byte 3: 0xee, 0x03, 0x77, no value has two votes
    assert vote.majority([bytes(bad1), good, bytes(three)])[1] == 3
    assert vote.majority([bytes(bad1), bytes(bad1), good, good])[1] == 3  # 2 of 4 is no majority


@pytest.mark.parametrize("reads", [0, 2, 16])
def test_read_counts_that_cannot_vote_are_refused(tmp_path: Path, reads: int) -> None:
    with pytest.raises(Refused):
        vote.check_reads(reads)
    r = run("--device", dev(tmp_path), "flash", "dump", "d.bin", "--reads", str(reads))
    assert r.code == 2 and not (tmp_path / "d.bin").exists() and not (tmp_path / "flash.bin").exists(), r.err
    if reads == 2:
        assert "cannot outvote" in r.err


def test_flaky_option_is_checked(tmp_path: Path) -> None:
    for bad in ("flaky=2", "flaky=x", "flaky-seed=-1"):
        r = run("--device", dev(tmp_path, "navi31-usb", bad), "flash", "info")
        assert r.code == 2 and bad.split("=")[0] in r.err, (bad, r.err)
    r = run("--device", dev(tmp_path, "navi31", "flaky=0.1"), "flash", "info")  # a link the direct board lacks
    assert r.code == 2


# -- a bit flipped on the chip side (direct board): the vote outvotes it ----------------------------------------------
def test_a_flipped_read_is_outvoted_and_reported(tmp_path: Path) -> None:
    device = dev(tmp_path, "navi31", "faults=bitflip@0x41234")  # inside vbios-a, past what the layout reads
    lo, hi = 0x40000, 0x50000
    r = run("--device", device, "--json", "flash", "dump", "one.bin", "--region", "vbios-a")
    assert r.code == 0 and (tmp_path / "one.bin").read_bytes() != IMAGE[lo:hi]  # a plain read is wrong
    r = run("--device", device, "--json", "flash", "dump", "three.bin", "--reads", "3", "--region", "vbios-a")
    assert r.code == 0, r.err
    assert (tmp_path / "three.bin").read_bytes() == IMAGE[lo:hi]
    doc = json.loads(r.out)
    assert doc["reads"] == 3 and doc["region"]["name"] == "vbios-a"
    assert doc["sectors_disagreed"] == [{"sector": 0x41, "address": 0x41000, "matched": 2, "reads": 3,
                                         "bytes_disagreed": 1, "text": "2/3 reads matched"}]


# -- the flaky usb link ----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_three_read_dump_of_a_flaky_link_is_exact_where_one_read_is_not(tmp_path: Path) -> None:
    """mock:navi31-usb with one read in a hundred corrupted on the link: a plain read of the 256 KiB ISH A
    payload is wrong in several places; a 3-read dump of the whole flash is exact."""
    r = run("--device", flaky(tmp_path, 0.01), "flash", "dump", "one.bin", "--region", "ish-a-payload")
    assert r.code == 0, r.err
    one = (tmp_path / "one.bin").read_bytes()
    assert len(one) == 0x40000 and sum(a != b for a, b in zip(one, IMAGE[0x20000:0x60000], strict=True)) >= 3
    r = run("--device", flaky(tmp_path, 0.01), "flash", "dump", "three.bin", "--reads", "3")
    assert r.code == 0, r.err
    assert (tmp_path / "three.bin").read_bytes() == IMAGE
    assert hashlib.sha256(IMAGE).hexdigest() in r.out
    assert "3 reads per sector:" in r.out and "sector(s) disagreed" in r.out and "2/3 reads matched" in r.out


def test_verify_with_votes_ignores_the_links_errors(tmp_path: Path) -> None:
    with tinyhw.open(flaky(tmp_path, 0.05, seed=3)) as d, FlashDevice(d.transport) as flash:
        plain = ops.verify(flash, IMAGE, start_sector=32, sector_count=16)
        voted = ops.verify(flash, IMAGE, start_sector=32, sector_count=16, reads=3)
    assert not plain.match and voted.match
    (tmp_path / "img.bin").write_bytes(IMAGE)
    r = run("--device", flaky(tmp_path, 0.05, seed=3), "--json", "flash", "verify", "img.bin", "--reads", "3",
            "--start-sector", "32", "--sector-count", "16")
    assert r.code == 0 and json.loads(r.out)["match"] is True, r.err


def test_no_majority_fails_and_writes_nothing(tmp_path: Path) -> None:
    """Every read corrupted: some byte gets three different values; exit 1, no file, an old file untouched."""
    r = run("--device", flaky(tmp_path, 1.0), "flash", "dump", "d.bin", "--reads", "3")
    assert r.code == 1 and "no majority at 0x" in r.err and "the 3 reads returned" in r.err, r.err
    assert not (tmp_path / "d.bin").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".d.bin")] == []  # no temporary left
    (tmp_path / "old.bin").write_bytes(b"old")
    r = run("--device", flaky(tmp_path, 1.0), "--json", "flash", "dump", "old.bin", "--reads", "3", "--force")
    assert r.code == 1 and json.loads(r.out)["error"]["exit_code"] == 1
    assert (tmp_path / "old.bin").read_bytes() == b"old"


def test_library_vote_reports_progress_per_read(tmp_path: Path) -> None:
    class Seen(Progress):
        def __init__(self) -> None:
            self.tasks: list[tuple[str, int]] = []
            self.done = 0

        def start(self, label: str, total: int) -> None:
            self.tasks.append((label, total))

        def advance(self, n: int) -> None:
            self.done += n

    seen = Seen()
    with tinyhw.open(flaky(tmp_path, 0.05)) as d, FlashDevice(d.transport) as flash:
        got = vote.read(flash, 0x20000, 4 * SECTOR, 5, seen, label="dump")
    assert got.data == IMAGE[0x20000:0x24000] and got.reads == 5
    assert seen.tasks == [("dump (5 reads)", 5 * 4 * SECTOR)] and seen.done == 5 * 4 * SECTOR
    with tinyhw.open(flaky(tmp_path, 1.0)) as d, FlashDevice(d.transport) as flash, \
            pytest.raises(OperationFailed, match="no majority"):
        vote.read(flash, 0, 64 * SECTOR, 3)


@pytest.mark.slow
def test_write_with_votes_over_a_flaky_link(tmp_path: Path) -> None:
    """flash write on a flaky link: the plain job stops at its backup (two reads and a third disagree); resumed with
    --reads 3, backup, sector read-backs and the final verify are voted and the job finishes exactly."""
    img = bytearray(IMAGE)
    img[0x30010:0x30030] = hashlib.sha256(b"new").digest()
    (tmp_path / "img.bin").write_bytes(bytes(img))
    device = flaky(tmp_path, 0.02, seed=5)
    r = run("--device", device, "flash", "write", "img.bin", "--start-sector", "0x30", "--sector-count", "8",
            "--backup", "b.bin", "--yes")
    assert r.code == 1 and "flash reads are unreliable" in r.err and not (tmp_path / "b.bin").exists(), r.err
    r = run("--device", device, "--json", "flash", "write", "img.bin", "--reads", "3", "--resume", "--yes")
    assert r.code == 0, r.err
    assert (tmp_path / "flash.bin").read_bytes() == bytes(img) and (tmp_path / "b.bin").read_bytes() == IMAGE
    assert json.loads(r.out)["sectors_changed"] == 1
    r = run("--device", device, "flash", "write", "img.bin", "--reads", "2", "--yes", "--no-backup")
    assert r.code == 2 and "cannot outvote" in r.err
