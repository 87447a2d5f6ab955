"""The files of a ``flash write``/``erase`` job: its journal, its backup path, and abandoning a journal.

On top of specs/navi31-spi-flash.md §d (backup first) and :mod:`tinyhw.flash.journal`:

* :func:`check_backup` runs before the device is opened: the backup path the job will write must
  pass :func:`tinyhw.fileio.check_output_path` (a backup is never overwritten), or for the default
  name tinyhw's backup directory (:func:`tinyhw.flash.files.backup_dir`) must take a new file.
* On ``--resume`` the journal's recorded backup path rules: a different ``--backup`` is used instead
  while the backup is not yet made (and :func:`backup_note` says so); once the backup exists a
  different ``--backup`` is refused naming the recorded one; a recorded path whose backup write
  failed is never silently reused (``--backup`` must name it, or another, again).
* :func:`journal_state` describes an interrupted job for ``--abandon``: what the journal recorded
  and which sectors of the flash already hold the target, the old contents, or neither.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinyhw.errors import Refused
from tinyhw.fileio import check_output_path, check_writable_dir
from tinyhw.flash.files import backup_dir, sha256
from tinyhw.flash.journal import Journal, erase_key, find_journals, write_key
from tinyhw.flash.ops import check_sector_range

if TYPE_CHECKING:
    from tinyhw.flash.writer import Job


def find_job_journal(job: Job, total: int) -> tuple[str, Journal | None]:
    """The journal key of ``job`` and its journal, if one is recorded (write: by image; erase: by range)."""
    if job.kind == "write":
        assert job.image is not None
        key = write_key(sha256(job.image), job.region)
    elif (job.resume or job.abandon) and job.start_sector is None and job.sector_count is None:
        found = find_journals("erase")
        if len(found) > 1:
            ranges = ", ".join(f"--start-sector {j.start_sector} --sector-count {j.sector_count}" for j in found)
            raise Refused("several interrupted erases are recorded", hint=f"name one: {ranges}")
        key = found[0].key if found else erase_key(*check_sector_range(total, None, None))
    else:
        key = erase_key(*check_sector_range(total, job.start_sector, job.sector_count))
    return key, Journal.load(key)


def sector_target(image: bytes | None, sector: int, sector_size: int, region: dict[str, Any] | None = None) -> bytes:
    """What sector ``sector`` must hold after a job: erased for an erase (no ``image``), the image's bytes for a
    write; for a region write the image's bytes inside the region and, in a sector the region only partly
    covers, the sector's pre-job bytes (recorded in the journal's ``region``) outside it."""
    if image is None:
        return b"\xff" * sector_size
    lo = sector * sector_size
    want = image[lo:lo + sector_size]
    if region is None or (region["start"] <= lo and lo + sector_size <= region["end"]):
        return want
    out = bytearray.fromhex(region["edges"][str(sector)])
    a, b = max(region["start"], lo) - lo, min(region["end"], lo + sector_size) - lo
    out[a:b] = want[a:b]
    return bytes(out)


def job_target(journal: Journal, image: bytes | None, sector_size: int) -> bytes:
    """The bytes the journal's whole sector range must hold after the job (:func:`sector_target` per sector)."""
    return b"".join(sector_target(image, s, sector_size, journal.region)
                    for s in range(journal.start_sector, journal.start_sector + journal.sector_count))


def _same(a: str | Path | None, b: str | Path | None) -> bool:
    return a is not None and b is not None and Path(a).absolute() == Path(b).absolute()


def check_backup(job: Job, total: int) -> Path | None:
    """Refuse (exit 2), before the device is opened, a backup the job could not write; return the backup path
    the job will use (None: the default name in the backup directory, or no backup)."""
    if job.no_backup or job.abandon:
        return None
    _, journal = find_job_journal(job, total)
    if journal is not None and job.resume:
        if not journal.backup_wanted:
            if job.backup is not None:
                raise Refused("the interrupted job was started without a backup; --backup cannot be added now",
                              hint="resume without --backup")
            return None
        recorded = journal.backup
        if journal.backup_sha256 is not None:  # the backup is made: it is the one the job keeps
            if job.backup is not None and not _same(job.backup, recorded):
                raise Refused(f"the interrupted job's backup is already made at {recorded}; --backup {job.backup} "
                              "differs", hint=f"resume without --backup (or with --backup {recorded})")
            return Path(recorded) if recorded else None
        if job.backup is None and journal.backup_failed:
            raise Refused(f"the interrupted job's backup to {recorded or backup_dir()} failed "
                          f"({journal.backup_failed})", hint="name the backup file again with --backup "
                          "(the same path to retry it, or another)")
        if job.backup is None and recorded is not None:
            if not Path(recorded).is_file():  # a file there may be this job's backup, renamed into place
                check_output_path(recorded, what="backup", force_hint=None)
            return Path(recorded)
        if job.backup is not None and _same(job.backup, recorded) and Path(job.backup).is_file():
            return job.backup
    if job.backup is not None:
        check_output_path(job.backup, what="backup", force_hint=None)
        return job.backup
    check_writable_dir(backup_dir(), what="backup")  # named after the flash's board once it is read
    return None


def backup_note(job: Job, journal: Journal) -> str | None:
    """The note a resumed job shows when it backs up to a new path instead of the recorded one."""
    if job.backup is None or journal.backup_sha256 is not None or _same(job.backup, journal.backup):
        return None
    return (f"backing up to {job.backup} instead of {journal.backup or f'a new file in {backup_dir()}'} "
            "(recorded by the interrupted job)")


def _backup_bytes(journal: Journal) -> bytes | None:
    if not journal.backup or not journal.backup_sha256:
        return None
    try:
        data = Path(journal.backup).read_bytes()
    except OSError:
        return None
    return data if sha256(data) == journal.backup_sha256 else None


def journal_state(journal: Journal, target: bytes, sector_size: int, current: bytes | None,
                  flash_error: str | None = None) -> dict[str, Any]:
    """What ``--abandon`` shows: the journal's record and, when the flash range could be read (``current``),
    which sectors hold the target (``target``: the job's bytes for its range), the old contents (from
    the backup) or neither (torn or half-written)."""
    start, count = journal.start_sector, journal.sector_count
    doc: dict[str, Any] = {
        "kind": journal.kind, "journal": str(journal.path), "device": journal.device,
        "image_path": journal.image_path, "image_sha256": journal.image_sha256,
        "start_sector": start, "sector_count": count, "phase": journal.phase, "sector": journal.sector,
        "sectors_done": sorted(journal.sectors_done), "interrupted": journal.interrupted,
        "backup": journal.backup if journal.backup_sha256 else None, "backup_sha256": journal.backup_sha256,
        "backup_wanted": journal.backup_wanted, "protection": journal.protection,
        "flash": None,
    }
    if current is None:
        doc["flash"] = {"read": False, "error": flash_error}
        return doc
    before = _backup_bytes(journal)
    as_target, as_before, other = [], [], []
    for i in range(count):
        s = start + i
        got = current[i * sector_size:(i + 1) * sector_size]
        if got == target[i * sector_size:(i + 1) * sector_size]:
            as_target.append(s)
        elif before is not None and got == before[s * sector_size:(s + 1) * sector_size]:
            as_before.append(s)
        else:
            other.append(s)
    doc["flash"] = {"read": True, "error": None, "sectors_as_target": as_target, "sectors_as_before": as_before,
                    "sectors_other": other, "backup_readable": before is not None}
    return doc


def _ranges(sectors: list[int]) -> str:
    if not sectors:
        return "none"
    out, lo, prev = [], sectors[0], sectors[0]
    for s in [*sectors[1:], None]:
        if s is not None and s == prev + 1:
            prev = s
            continue
        out.append(str(lo) if lo == prev else f"{lo}..{prev}")
        if s is not None:
            lo = prev = s
    return ", ".join(out[:12]) + (f" (+{len(out) - 12} more ranges)" if len(out) > 12 else "")


def describe_state(doc: dict[str, Any]) -> list[str]:
    """The lines ``--abandon`` shows before it removes the journal."""
    s, c = doc["start_sector"], doc["sector_count"]
    lines = [f"interrupted flash {doc['kind']} of sectors {s}..{s + c - 1} recorded in {doc['journal']}"]
    if doc["image_path"]:
        lines.append(f"  image {doc['image_path']} (sha256 {doc['image_sha256']})")
    where = doc["phase"] + (f" of sector {doc['sector']}" if doc["sector"] is not None else "")
    lines.append(f"  stopped during {where}" + (f": {doc['interrupted']}" if doc["interrupted"] else ""))
    lines.append(f"  sectors written and verified: {_ranges(doc['sectors_done'])}")
    if doc["backup"]:
        lines.append(f"  backup of the flash before the job: {doc['backup']} (sha256 {doc['backup_sha256']})")
    else:
        lines.append("  backup: none was made" + ("" if doc["backup_wanted"] else " (--no-backup)"))
    prot = doc["protection"] or {}
    if prot.get("cleared"):
        lines.append(f"  block protection was cleared by the job and is not restored (it was sr1 "
                     f"0x{prot['sr1']:02x}, sr2 0x{prot['sr2']:02x})")
    fl = doc["flash"]
    if not fl["read"]:
        lines.append(f"  flash: not read ({fl['error']})")
    else:
        target = "the image" if doc["kind"] == "write" else "erased"
        lines.append(f"  flash now: {len(fl['sectors_as_target'])} sector(s) as {target}, "
                     f"{len(fl['sectors_as_before'])} as before the job, {len(fl['sectors_other'])} neither"
                     + ("" if fl["backup_readable"] else " (no readable backup to compare with)"))
        if fl["sectors_other"]:
            lines.append(f"  sectors neither: {_ranges(fl['sectors_other'])}")
    lines.append("  abandoning removes the journal only; the flash is left as it is")
    return lines
