"""Faults on the emulated boards: interrupted writes finish with --resume, read errors are caught,
a stuck chip ends in a timeout naming the sector, the journal says where each interruption happened.

A traced run of the same write (in-process, same options, deterministic virtual clock) tells at which
register access each phase starts; ``disconnect@N`` then cuts the same write at chosen accesses.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from clihelp import run

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.errors import Interrupted, OperationFailed, Refused
from tinyhw.flash import FlashDevice, Job, Journal, Writer
from tinyhw.flash import journal as journal_mod
from tinyhw.mocks.amd.direct import DirectTransport
from tinyhw.mocks.amd.ifwi_image import build_image

IMAGE = build_image(board=NAVI31)
SECTOR = 4096
START, COUNT = 16, 8
CHANGED = [16, 19, 22]  # 16 is full of data (a torn erase shows), 22 is erased (its erase is skipped)


def make_image() -> bytes:
    img = bytearray(IMAGE)
    for s in CHANGED:
        # 0x40 into the sector: the image keeps its region layout (ISH B heads sector 19)
        img[s * SECTOR + 0x40:s * SECTOR + 0x340] = hashlib.sha256(bytes([s])).digest() * 24
    return bytes(img)


NEW = make_image()
EXPECTED = IMAGE[:START * SECTOR] + NEW[START * SECTOR:(START + COUNT) * SECTOR] + IMAGE[(START + COUNT) * SECTOR:]


def base_flash(path: Path, sr: bytes = b"\x00\x40\x00") -> None:
    """A fresh flash file holding the synthetic image, protected entirely (CMP = 1) unless ``sr`` says otherwise."""
    path.write_bytes(IMAGE)
    path.with_name(path.name + ".sr").write_bytes(sr)


def trace(tmp_path: Path) -> list[tuple[int, str, int | None, str | None, float]]:
    """Run the write in-process; return (access number, journal phase, sector, chip op, op progress) per access."""
    flash = tmp_path / "trace.bin"
    base_flash(flash)
    t = DirectTransport(Navi31Options.from_options({"flash": str(flash), "timing": "typical", "strict": True}),
                        spec=NAVI31)
    rows: list[tuple[int, str, int | None, str | None, float]] = []
    state = {"phase": "preflight", "sector": None}
    real_save = Journal.save

    def save(self: Journal, **changes: object) -> None:
        real_save(self, **changes)
        state["phase"], state["sector"] = self.phase, self.sector

    board, chip = t.board, t.board.chip
    rd, wr = board.mem_read32, board.mem_write32

    def note() -> None:
        op = chip._op
        frac = 0.0 if op is None or not op.new else op.applied / len(op.new)
        rows.append((t.accesses, str(state["phase"]), state["sector"], op.kind if op else None, frac))

    def mem_read32(bar: int, off: int) -> int:
        v = rd(bar, off)
        note()
        return v

    def mem_write32(bar: int, off: int, value: int, be: int = 0xF) -> None:
        wr(bar, off, value, be)
        note()

    board.mem_read32, board.mem_write32 = mem_read32, mem_write32
    Journal.save = save  # type: ignore[method-assign]
    try:
        with FlashDevice(t) as dev:
            Writer(dev, Job("write", image=NEW, start_sector=START, sector_count=COUNT, backup=tmp_path / "tb.bin",
                            clear_protection=True), confirm=lambda plan: None).run()
    finally:
        Journal.save = real_save  # type: ignore[method-assign]
        t.close()
    assert flash.read_bytes() == EXPECTED
    return rows


def cli_write(tmp_path: Path, flash: Path, *extra: str, faults: str = "") -> object:
    device = f"mock:navi31,flash={flash},timing=typical" + (f",faults={faults}" if faults else "")
    return run("--device", device, "flash", "write", str(tmp_path / "new.bin"), "--start-sector", str(START),
               "--sector-count", str(COUNT), "--clear-protection", "--yes", *extra)


def pick_points(rows: list[tuple[int, str, int | None, str | None, float]]) -> dict[str, int]:
    """One access per phase (the middle of it), a torn erase and a torn program, plus an even sweep."""
    points: dict[str, int] = {}
    by_phase: dict[str, list[int]] = {}
    for n, phase, _, _, _ in rows:
        by_phase.setdefault(phase, []).append(n)
    for phase in ("backup", "unprotect", "erase", "program", "verify", "restore-protection", "final-verify"):
        ns = by_phase[phase]
        points[phase] = ns[len(ns) // 2]
    points["torn-erase"] = next(n for n, _, _, op, f in rows if op == "se" and 0.3 < f < 0.9)
    points["torn-program"] = next(n for n, _, _, op, f in rows if op == "pp" and f < 1)
    last = rows[-1][0]
    first_erase = by_phase["erase"][0]
    for i in range(4):  # spread over the changes, where it matters most
        points[f"sweep{i}"] = first_erase + (last - first_erase) * (2 * i + 1) // 8
    return points


@pytest.mark.slow
def test_disconnect_anywhere_then_resume_gives_the_image(tmp_path: Path) -> None:
    (tmp_path / "new.bin").write_bytes(NEW)
    rows = trace(tmp_path)
    phase_at = {n: (phase, sector) for n, phase, sector, _, _ in rows}
    points = pick_points(rows)
    for name, n in points.items():
        flash = tmp_path / f"{name}.bin"
        base_flash(flash)
        r = cli_write(tmp_path, flash, "--backup", f"{name}-backup.bin", faults=f"disconnect@{n}")
        assert r.code == 1, (name, n, r.err)
        last = r.err.splitlines()[-1]
        assert last.startswith("error: flash write stopped during") and "went away" in last, (name, last)
        assert "faults" not in last and last.endswith("new.bin --resume --yes"), last
        journals = list((tmp_path / "state" / "tinyhw").glob("flash-write-*.json"))
        assert len(journals) == 1, name
        doc = json.loads(journals[0].read_text())
        phase, sector = phase_at[n]
        assert (doc["phase"], doc["sector"]) == (phase, sector), name
        assert doc["start_sector"] == START and doc["sector_count"] == COUNT and "went away" in doc["interrupted"]
        assert doc["protection"]["sr1"] == 0 and doc["protection"]["sr2"] == 0x40  # the original bits
        assert doc["image_sha256"] == hashlib.sha256(NEW).hexdigest()
        assert set(doc["sectors_done"]) <= set(CHANGED)
        data = flash.read_bytes()
        if name == "torn-erase":  # a torn sector: partly erased, partly old data
            torn = data[sector * SECTOR:(sector + 1) * SECTOR]
            assert b"\xff" * 64 in torn and torn != b"\xff" * SECTOR and torn != IMAGE[sector * SECTOR:][:SECTOR]
        backup = tmp_path / f"{name}-backup.bin"
        kept = backup.read_bytes() if backup.exists() else None
        if phase != "backup":
            assert kept == IMAGE and doc["backup_sha256"] == hashlib.sha256(IMAGE).hexdigest()
        # a fresh start of the same image is refused while the journal exists
        r = cli_write(tmp_path, flash)
        assert r.code == 2 and "--resume" in r.err
        r = cli_write(tmp_path, flash, "--resume")
        assert r.code == 0, (name, r.err)
        assert flash.read_bytes() == EXPECTED, name
        assert flash.with_name(flash.name + ".sr").read_bytes()[:2] == b"\x00\x40", name  # protection restored
        assert not list((tmp_path / "state" / "tinyhw").glob("flash-write-*.json"))
        if kept is not None:
            assert backup.read_bytes() == kept  # a resumed run never overwrites the backup
        else:
            assert backup.read_bytes() == IMAGE  # interrupted in the backup phase: backed up on resume


def usb_phase_starts(tmp_path: Path, flash: Path, device: str) -> dict[str, int]:
    """Transfers the driver has submitted when each journal phase starts, from an in-process traced write."""
    from tinyhw.connect import open_device
    from tinyhw.transport.devstr import parse_device

    starts: dict[str, int] = {}
    real_save = Journal.save
    opened = open_device(parse_device(device))
    t = opened.transport

    def save(self: Journal, **changes: object) -> None:
        real_save(self, **changes)
        starts.setdefault(self.phase, t.counters.usb_transfers)

    Journal.save = save  # type: ignore[method-assign]
    try:
        with FlashDevice(t) as dev:
            Writer(dev, Job("write", image=NEW, start_sector=16, sector_count=1, no_backup=True),
                   confirm=lambda plan: None).run()
    finally:
        Journal.save = real_save  # type: ignore[method-assign]
        opened.close()
    return starts


@pytest.mark.parametrize("where", ["erase", "program"])
def test_disconnect_over_usb_then_resume(tmp_path: Path, where: str) -> None:
    flash = tmp_path / "u.bin"
    base_flash(flash, b"\x00\x00\x00")
    (tmp_path / "new.bin").write_bytes(NEW)
    device = f"mock:navi31-usb,flash={flash},timing=typical"
    starts = usb_phase_starts(tmp_path, flash, device)
    base_flash(flash, b"\x00\x00\x00")
    n = starts[where] + 25  # inside the erase (WREN, WEL check, SE, polls) or the first page programs
    args = ["flash", "write", str(tmp_path / "new.bin"), "--start-sector", "16", "--sector-count", "1", "--no-backup"]
    r = run("--device", f"{device},faults=disconnect@{n}", *args, "--yes")
    assert r.code == 1 and "--resume" in r.err, r.err
    doc = json.loads(next((tmp_path / "state" / "tinyhw").glob("flash-write-*.json")).read_text())
    assert (doc["phase"], doc["sector"]) == (where, 16)
    r = run("--device", device, *args, "--resume", "--yes")
    assert r.code == 0, r.err
    assert flash.read_bytes() == IMAGE[:16 * SECTOR] + NEW[16 * SECTOR:17 * SECTOR] + IMAGE[17 * SECTOR:]


@pytest.mark.parametrize("where,words", [("compare", "compare read of sectors 16..16"),
                                         ("erase", "erase of sector 16"), ("program", "program of sector 16"),
                                         ("verify", "verify of sector 16")])
def test_a_no_backup_write_cut_by_a_disconnect_names_the_phase_it_was_in(tmp_path: Path, where: str,
                                                                          words: str) -> None:
    """A --no-backup write has no backup phase: cut while it reads the range to compare (before the first erase)
    or inside a sector, the error names that phase, never "backup"."""
    flash = tmp_path / "u.bin"
    base_flash(flash, b"\x00\x00\x00")
    (tmp_path / "new.bin").write_bytes(NEW)
    device = f"mock:navi31-usb,flash={flash},timing=typical"
    starts = usb_phase_starts(tmp_path, flash, device)
    base_flash(flash, b"\x00\x00\x00")
    first, erase = min(starts.values()), starts["erase"]
    n = (first + erase) // 2 if where == "compare" else starts[where] + 3
    args = ["flash", "write", str(tmp_path / "new.bin"), "--start-sector", "16", "--sector-count", "1", "--no-backup"]
    r = run("--device", f"{device},faults=disconnect@{n}", *args, "--yes")
    assert r.code == 1, r.err
    last = r.err.splitlines()[-1]
    assert last.startswith(f"error: flash write stopped during {words}: ") and "during backup" not in last, last
    doc = json.loads(next((tmp_path / "state" / "tinyhw").glob("flash-write-*.json")).read_text())
    assert doc["phase"] == where
    assert run("--device", device, *args, "--resume", "--yes").code == 0
    assert flash.read_bytes() == IMAGE[:16 * SECTOR] + NEW[16 * SECTOR:17 * SECTOR] + IMAGE[17 * SECTOR:]


@pytest.mark.slow
def test_timeout_fault_is_reported_and_resumable(tmp_path: Path) -> None:
    (tmp_path / "new.bin").write_bytes(NEW)
    flash = tmp_path / "t.bin"
    base_flash(flash)
    rows = trace(tmp_path)
    n = next(n for n, phase, *_ in rows if phase == "program")
    r = cli_write(tmp_path, flash, "--backup", "other.bin", faults=f"timeout@{n + 5}")  # as traced
    assert r.code == 1 and "timed out" in r.err and "--resume" in r.err
    assert cli_write(tmp_path, flash, "--resume").code == 0
    assert flash.read_bytes() == EXPECTED


def test_stuck_busy_names_the_sector_and_journals_it(tmp_path: Path) -> None:
    flash = tmp_path / "s.bin"
    base_flash(flash, b"\x00\x00\x00")
    (tmp_path / "new.bin").write_bytes(NEW)
    r = cli_write(tmp_path, flash, "--no-backup", faults="stuck-busy")
    assert r.code == 1
    assert "timed out" in r.err and "erase of sector 16 (0x010000)" in r.err
    doc = json.loads(next((tmp_path / "state" / "tinyhw").glob("flash-write-*.json")).read_text())
    assert (doc["phase"], doc["sector"]) == ("erase", 16)


def test_bitflip_is_caught_by_verify(tmp_path: Path) -> None:
    flash = tmp_path / "b.bin"
    base_flash(flash, b"\x00\x00\x00")
    (tmp_path / "same.bin").write_bytes(IMAGE)
    r = run("--device", f"mock:navi31,flash={flash},faults=bitflip@0x12345", "--json", "flash", "verify", "same.bin")
    doc = json.loads(r.out)
    assert r.code == 1 and doc["first_mismatch"] == 0x12345 and doc["mismatched_sectors"] == [0x12]
    assert doc["flash_byte"] ^ doc["image_byte"] == 1
    assert run("--device", f"mock:navi31,flash={flash}", "flash", "verify", "same.bin").code == 0


def test_bitflip_never_reaches_the_backup(tmp_path: Path) -> None:
    flash = tmp_path / "b.bin"
    base_flash(flash, b"\x00\x00\x00")
    (tmp_path / "new.bin").write_bytes(NEW)
    r = run("--device", f"mock:navi31,flash={flash},timing=instant,faults=bitflip@0x1abcd", "flash", "write",
            "new.bin", "--backup", "bk.bin", "--yes")
    assert r.code == 0, r.err
    assert "corrected" in r.err and (tmp_path / "bk.bin").read_bytes() == IMAGE and flash.read_bytes() == NEW


def test_a_bad_program_is_caught_by_the_sector_verify(tmp_path: Path) -> None:
    flash = tmp_path / "p.bin"
    base_flash(flash, b"\x00\x00\x00")
    t = DirectTransport(Navi31Options.from_options({"flash": str(flash), "timing": "instant"}), spec=NAVI31)
    pp = t.board.chip.handler(0x02)

    def weak_pp(out: bytes, n_in: int, total: int) -> bytes:
        return pp(out[:10] + b"\xff" + out[11:], n_in, total)  # one byte of each page does not program

    t.board.chip.overrides[0x02] = weak_pp
    assert NEW[0x10006] != 0xFF
    try:
        with FlashDevice(t) as dev, pytest.raises(OperationFailed, match=r"verify failed at 0x010006 in sector 16"):
            Writer(dev, Job("write", image=NEW, start_sector=16, sector_count=1, no_backup=True),
                   confirm=lambda plan: None).run()
    finally:
        t.close()
    j = Journal.load(journal_mod.write_key(hashlib.sha256(NEW).hexdigest()))
    assert j is not None and (j.phase, j.sector, j.sectors_done) == ("verify", 16, [])


def test_ctrl_c_is_journalled(tmp_path: Path) -> None:
    flash = tmp_path / "c.bin"
    base_flash(flash, b"\x00\x00\x00")
    t = DirectTransport(Navi31Options.from_options({"flash": str(flash), "timing": "instant"}), spec=NAVI31)
    chip = t.board.chip
    real = chip.handler(0x20)

    def interrupt(out: bytes, n_in: int, total: int) -> bytes:
        real(out, n_in, total)
        raise KeyboardInterrupt

    chip.overrides[0x20] = interrupt

    try:
        with FlashDevice(t) as dev, pytest.raises(Interrupted, match="erase of sector 16") as ei:
            Writer(dev, Job("write", image=NEW, start_sector=16, sector_count=2, no_backup=True),
                   confirm=lambda plan: None,
                   resume_hint=lambda job: f"tinyhw flash {job.kind} new.bin --resume --yes").run()
        assert ei.value.exit_code == 130 and "finish with: tinyhw flash write new.bin --resume --yes" in str(ei.value)
    finally:
        t.close()
    j = Journal.load(journal_mod.write_key(hashlib.sha256(NEW).hexdigest()))
    assert j is not None and j.interrupted == "interrupted by ctrl-c" and (j.phase, j.sector) == ("erase", 16)
    shutil.rmtree(tmp_path / "state")


def test_interrupted_erase_resumes_without_naming_the_range(tmp_path: Path) -> None:
    flash = tmp_path / "e.bin"
    base_flash(flash, b"\x00\x00\x00")
    device = f"mock:navi31,flash={flash},timing=typical"
    args = ["flash", "erase", "--start-sector", "16", "--sector-count", "2", "--no-backup", "--yes"]
    # open + preflight + range read take about 2,500 register accesses; the erase of sector 16 follows
    r = run("--device", f"{device},faults=disconnect@2700", *args)
    assert r.code == 1 and "flash erase --start-sector 16 --sector-count 2 --resume --yes" in r.err
    doc = json.loads(next((tmp_path / "state" / "tinyhw").glob("flash-erase-16-2.json")).read_text())
    assert doc["kind"] == "erase" and doc["sector"] == 16 and doc["image_sha256"] is None
    r = run("--device", device, "flash", "erase", "--resume", "--yes")
    assert r.code == 0, r.err
    data = flash.read_bytes()
    assert data[16 * SECTOR:18 * SECTOR] == b"\xff" * 2 * SECTOR and data[18 * SECTOR:] == IMAGE[18 * SECTOR:]
    assert data[:16 * SECTOR] == IMAGE[:16 * SECTOR]


def test_jobs_carry_no_cli_strings(tmp_path: Path) -> None:
    """A Job is library data (no command line in it); the library's own hint names the library call."""
    import dataclasses

    assert "resume_command" not in {f.name for f in dataclasses.fields(Job)}
    flash = tmp_path / "d.bin"
    base_flash(flash, b"\x00\x00\x00")
    t = DirectTransport(Navi31Options.from_options({"flash": str(flash), "timing": "instant"}), spec=NAVI31)
    try:
        with FlashDevice(t) as dev, pytest.raises(Refused, match="nothing to resume") as ei:
            Writer(dev, Job("erase", start_sector=3, sector_count=1, resume=True), confirm=lambda plan: None).run()
        assert "tinyhw" not in str(ei.value)
        j = journal_mod.Journal(kind="erase", key=journal_mod.erase_key(3, 1), device="x", start_sector=3,
                                sector_count=1)
        j.save()
        with FlashDevice(t) as dev, pytest.raises(Refused, match="an interrupted erase") as ei:
            Writer(dev, Job("erase", start_sector=3, sector_count=1), confirm=lambda plan: None).run()
        assert "finish it with: the same erase job with resume=True" in str(ei.value)
    finally:
        t.close()
