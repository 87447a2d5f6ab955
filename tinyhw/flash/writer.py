"""``flash write`` and ``flash erase``: safe, diff-only, journalled and resumable (specs/navi31-spi-flash.md §d).

Order of a job (§d.1-§d.7, plus tinyhw's own hardening):

1. preflight, touching nothing: the journal rule (an interrupted job of the same image/range must
   be finished with ``--resume``), the range (§d.3), the protection check against the §c.4 range
   (refused unless ``--clear-protection``), the board identity of a write (§g.3: the image's VBIOS
   against the flash's, or on ``--resume`` against the identity the journal recorded before the job;
   refused unless ``--force-board-mismatch``), then the caller's confirmation;
2. backup of the whole flash, read twice and compared (a read error never reaches the backup), written
   atomically and read back from disk; those reads also find the sectors that differ (§d.7: a sector
   already equal costs only its read);
3. protection cleared if needed (original bits in the journal first);
4. per differing sector, ascending: erase (skipped when already erased), program its pages
   (all-0xFF pages skipped), read back and compare (§d.6); the journal records each phase;
5. original protection restored, then the target range read back once more and compared (the sha256
   of the whole flash after the job comes from that read and the pre-job read); the journal is removed.

Any interruption (disconnect, timeout, Ctrl-C) leaves the journal saying where, and the error names
the command that finishes the job.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.errors import EnvironmentProblem, Interrupted, OperationFailed, Refused, TinyhwError
from tinyhw.fileio import read_input
from tinyhw.flash import vote
from tinyhw.flash.device import FlashDevice
from tinyhw.flash.files import backup_dir, default_backup_name, sha256, write_verified
from tinyhw.flash.identity import BoardCheck, image_vbios_offsets, read_identity
from tinyhw.flash.identity import compare as compare_identity
from tinyhw.flash.jobfiles import backup_note, check_backup, find_job_journal, sector_target
from tinyhw.flash.journal import Journal, find_journals
from tinyhw.flash.layout import LayoutCheck, check_layout, image_layout, region_sectors
from tinyhw.flash.ops import check_sector_range, compare
from tinyhw.flash.protection import protected_range, unprotected_status, writable_status
from tinyhw.formats.ifwi_regions import FlashRegion
from tinyhw.formats.vbios import VbiosIdentity, vbios_identity
from tinyhw.progress import NO_PROGRESS, Progress


@dataclass
class Job:
    """What the user asked for. ``image`` is the full flash image for a write, None for an erase."""

    kind: str
    image: bytes | None = None
    image_path: str | None = None
    start_sector: int | None = None
    sector_count: int | None = None
    backup: Path | None = None  # explicit backup file; None: a default name (unless no_backup)
    no_backup: bool = False
    clear_protection: bool = False
    resume: bool = False
    device: str = ""
    #: write an image whose VBIOS names another board than the flash's (§g.3 identity)
    force_board_mismatch: bool = False
    #: the job is only looked up (``--abandon``), never run
    abandon: bool = False
    #: write only this region of the image's layout (``flash layout`` names; a write only)
    region: str | None = None
    #: write an image whose region layout differs from the flash's
    force_layout: bool = False
    #: reads per sector of every flash read the job makes (backup, sector and final verify), majority-voted
    #: (:mod:`tinyhw.flash.vote`); 1: the backup is read twice and compared, the verifies once
    reads: int = 1


@dataclass
class JobResult:
    """What a finished flash write or erase job did: sectors changed and skipped, hash after, backup."""
    sectors_total: int
    sectors_changed: int
    sectors_skipped: int
    sha256_after: str | None  # whole flash; None for a partial write without a backup to take the rest from
    backup: str | None
    resumed: bool
    start_sector: int
    sector_count: int
    protection_restored: bool
    #: the board identity check of a write (:meth:`BoardCheck.as_dict`), None for an erase
    board: dict[str, Any] | None = None
    #: the region of a region write (name, start, end), None otherwise
    region: dict[str, Any] | None = None
    #: the layout check of a write (:meth:`LayoutCheck.as_dict`); None for an erase and a resumed write
    layout: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return dict(self.__dict__)


def library_resume_hint(job: Job) -> str:
    """How to finish an interrupted job, in the library's terms (the CLI passes its own command line)."""
    return f"the same {job.kind} job with resume=True"


class Writer:
    """Carries out a :class:`Job`. ``resume_hint(job)`` says how to finish it after an interruption: the
    CLI gives its command line (``tinyhw --device ... flash write IMAGE --resume --yes``)."""

    def __init__(self, dev: FlashDevice, job: Job, *, confirm: Callable[[str], None],
                 progress: Progress = NO_PROGRESS, log: Callable[[str], None] = lambda m: None,
                 resume_hint: Callable[[Job], str] = library_resume_hint) -> None:
        self.dev, self.chip, self.job = dev, dev.chip, job
        self.confirm, self.progress, self.log = confirm, progress, log
        self.resume_hint = resume_hint
        self.ss = dev.sector_size
        self.total = dev.size // self.ss
        self.journal: Journal | None = None
        self.board: BoardCheck | None = None
        self.layout: LayoutCheck | None = None

    # -- preflight ------------------------------------------------------------------------------------------
    def _preflight(self) -> tuple[Journal, bool]:
        job = self.job
        if job.abandon:
            raise Refused("an --abandon job is never run", hint="tinyhw.flash.jobfiles.journal_state describes it")
        vote.check_reads(job.reads)
        region = self._region()
        check_backup(job, self.total)
        key, journal = find_job_journal(job, self.total)
        what = "write of this image" if job.kind == "write" else "erase of this range"
        if journal is not None and not job.resume:
            raise Refused(f"an interrupted {what} is recorded ({journal.where()}, {len(journal.sectors_done)} "
                          f"sector(s) done; journal {journal.path})", hint=f"finish it with: {self.resume_hint(job)}")
        if journal is None and not job.resume:
            others = [j for kind in ("write", "erase") for j in find_journals(kind)]
            for j in others:
                self.log(f"note: another interrupted {j.kind} is recorded ({j.where()}, sectors {j.start_sector}.."
                         f"{j.start_sector + j.sector_count - 1}; journal {j.path})")
        if journal is None and job.resume:
            raise Refused(f"nothing to resume: no interrupted {what} is recorded", hint="run it without --resume")
        if journal is not None:
            for name, given in (("start_sector", job.start_sector), ("sector_count", job.sector_count)):
                if given is not None and given != getattr(journal, name):
                    raise Refused(f"--{name.replace('_', '-')} {given} differs from the interrupted job's "
                                  f"{getattr(journal, name)}", hint="resume without range options")
            start, count = journal.start_sector, journal.sector_count
            note = backup_note(job, journal)
            if note is not None:
                self.log(f"note: {note}")
                journal.backup, journal.backup_failed = str(job.backup), None
        elif region is not None:
            start, count = region_sectors(region, self.ss)
        else:
            start, count = check_sector_range(self.total, job.start_sector, job.sector_count)
        if journal is None and job.backup is not None and not job.no_backup and job.backup.exists():
            raise Refused(f"backup file {job.backup} exists; a backup never overwrites a file",
                          hint="give another --backup file name")
        st = self.chip.status()
        lo, hi = start * self.ss, (start + count) * self.ss
        prot = protected_range(st.sr1, st.sr2, self.dev.size)
        allow = job.clear_protection or (journal is not None and journal.clear_protection)
        blocked = prot.overlaps(lo, hi)
        if blocked and not allow:
            raise Refused(f"the flash is write-protected where the {job.kind} goes: {prot.words()} "
                          f"(sr1 0x{st.sr1:02x}, sr2 0x{st.sr2:02x})",
                          hint="--clear-protection clears it for this job and restores it afterwards")
        board = self.board = self._board(journal)
        if journal is None and job.kind == "write" and job.image is not None:
            self.layout = check_layout(job.image, self.dev, force=job.force_layout)
            if self.layout.difference is not None:
                self.log(f"warning: writing an image with another region layout (--force): {self.layout.difference}")
            if self.layout.flash_lacks:
                self.log(f"note: the flash lacks region(s) {', '.join(self.layout.flash_lacks)} of the image "
                         "(damaged or erased there); the write restores them")
        edges = None if region is None or journal is not None else self._edges(region, start, count)
        self.confirm(self._plan(start, count, prot.words(), blocked, journal))
        if journal is None:
            checked = board is not None and board.source == "flash"
            journal = Journal(kind=job.kind, key=key, device=job.device, start_sector=start, sector_count=count,
                              image_sha256=sha256(job.image) if job.image is not None else None,
                              image_path=job.image_path, backup=None if job.backup is None else str(job.backup),
                              protection={"sr1": st.sr1, "sr2": st.sr2, "cleared": False}, clear_protection=allow,
                              backup_wanted=not job.no_backup, phase="compare" if job.no_backup else "backup",
                              board_checked=checked,
                              board_identity=board.flash.to_doc() if checked and board and board.flash else None,
                              region=None if region is None else {"name": region.name, "start": region.start,
                                                                  "end": region.end, "edges": edges})
        journal.save(interrupted=None)
        return journal, blocked

    def _region(self) -> FlashRegion | None:
        """The region of a region write, from the image's own layout (refused, exit 2, naming the regions)."""
        job = self.job
        if job.region is None:
            return None
        if job.kind != "write" or job.image is None:
            raise Refused("a region is written from an image: only flash write takes a region")
        if job.start_sector is not None or job.sector_count is not None:
            raise Refused("--region and --start-sector/--sector-count contradict each other",
                          hint="the region decides the sectors")
        region = image_layout(job.image).find(job.region)
        job.region = region.name
        return region

    def _edges(self, region: FlashRegion, start: int, count: int) -> dict[str, str]:
        """The pre-job bytes of the sectors ``region`` only partly covers, read with a majority vote (they are
        written back around the region, so a bad read must not reach them)."""
        ss = self.ss
        out = {}
        for s in dict.fromkeys((start, start + count - 1)):
            lo = s * ss
            if not (region.start <= lo and lo + ss <= region.end):
                out[str(s)] = vote.read(self.dev, lo, ss, vote.MIN_VOTE).data.hex()
        return out

    def _board(self, journal: Journal | None) -> BoardCheck | None:
        """§g.3 board identity of a write: the image's VBIOS against the flash's (read now), or on a resume
        against the identity the journal recorded before anything was changed. Refuses (exit 2) a
        mismatch unless ``force_board_mismatch``; one side without a VBIOS is a warning."""
        job = self.job
        if job.kind != "write" or job.image is None:
            return None
        image = vbios_identity(job.image)
        if image is None:
            check = BoardCheck(None, None, "image", [])
        elif journal is not None:
            if not journal.board_checked:
                check = BoardCheck(image, None, "unrecorded", [])
            else:
                recorded = None if journal.board_identity is None else VbiosIdentity.from_doc(journal.board_identity)
                check = compare_identity(image, recorded, source="journal", force=job.force_board_mismatch)
        else:
            flash, scanned = read_identity(self.chip.read, self.dev.size, image_vbios_offsets(job.image))
            if scanned:
                self.log("note: no vbios at the usual offsets of the flash; read the whole flash to look for one")
            check = compare_identity(image, flash, source="flash", force=job.force_board_mismatch)
        for w in check.warnings():
            self.log(f"warning: {w}")
        return check

    def _plan(self, start: int, count: int, words: str, blocked: bool, journal: Journal | None) -> str:
        job = self.job
        lo, hi = start * self.ss, (start + count) * self.ss
        lines = [f"flash {job.kind}: sectors {start}..{start + count - 1} (0x{lo:06x}-0x{hi - 1:06x}) of the "
                 f"{self.dev.size // 1024} KiB flash on {self.dev.location}"]
        if job.image is not None:
            lines.append(f"  image {job.image_path or '(bytes)'} sha256 {sha256(job.image)}")
        if journal is not None:
            lines.append(f"  resuming the interrupted job ({journal.where()}, {len(journal.sectors_done)} sector(s) "
                         f"done); backup {journal.backup or 'none'}")
        elif job.no_backup:
            lines.append("  no backup (--no-backup)")
        else:
            lines.append(f"  backup of the whole flash first, to {job.backup or f'a new file in {backup_dir()}'}")
        if job.region is not None:
            lines.append(f"  region {job.region} only: the image's bytes inside it, every other byte kept")
        if self.layout is not None:
            diff = self.layout.difference
            lines.append("  layout: " + ("the image's regions sit where the flash's do" if diff is None
                                         else f"differs, written anyway (--force): {diff}"))
        if self.board is not None and self.board.image is not None:
            verdict = {True: "same board", False: "another board (forced)", None: "not checked"}[self.board.match]
            lines.append(f"  board: {verdict}; {self.board.describe()}")
        lines.append(f"  protection: {words}" + ("; cleared for the job and restored afterwards" if blocked else ""))
        lines.append("  only differing sectors are erased and programmed, each read back; the range checked at the end")
        return "\n".join(lines)

    # -- the job ----------------------------------------------------------------------------------------------
    def run(self) -> JobResult:
        """Run the job (or finish its journal's); an interruption leaves the journal and says how to resume."""
        journal, blocked = self._preflight()
        self.journal = journal
        try:
            return self._run(journal, blocked)
        except KeyboardInterrupt:
            self._record(journal, "interrupted by ctrl-c")
            raise Interrupted(f"flash {journal.kind} interrupted during {journal.where()}",
                              hint=f"the journal {journal.path} records where; finish with: "
                                   f"{self.resume_hint(self.job)}") from None
        except TinyhwError as e:
            self._record(journal, str(e))
            hint = (f"{e.hint}; " if e.hint else "") + f"then finish with: {self.resume_hint(self.job)}"
            err = OperationFailed(f"flash {journal.kind} stopped during {journal.where()}: {e.message}", hint=hint)
            err.exit_code = e.exit_code
            raise err from e

    def _record(self, journal: Journal, why: str, **more: Any) -> None:
        with contextlib.suppress(TinyhwError, OSError):
            journal.save(interrupted=why, **more)

    def _target(self, s: int) -> bytes:
        return sector_target(self.job.image, s, self.ss, self.journal.region if self.journal else None)

    def _backup(self, journal: Journal) -> bytes | None:
        """Phase "backup": the whole flash, written atomically and read back (never overwriting a file)."""
        if journal.backup_sha256 is not None or not journal.backup_wanted:
            return None
        if self.job.reads > 1:
            data = vote.read(self.dev, 0, self.dev.size, self.job.reads, self.progress, label="backup").data
        else:
            data = self._read_twice()
        path = Path(journal.backup) if journal.backup else default_backup_name(data, self.chip.jedec)
        if path.is_file():  # a resumed run whose earlier backup was linked into place: keep it if it is the same
            try:
                same = read_input(path, len(data), "backup") == data
            except Refused:
                same = False
            if not same:
                raise OperationFailed(f"backup file {path} exists and differs from the flash; it is never "
                                      "overwritten", hint="move it away")
            digest = sha256(data)
        else:
            try:
                digest = write_verified(path, data)
            except (EnvironmentProblem, Refused) as e:
                self._record(journal, str(e), backup=str(path), backup_failed=e.message)
                raise
        journal.save(backup=str(path), backup_sha256=digest, backup_failed=None)
        self.log(f"backup: {path} (sha256 {digest})")
        return data

    def _read_twice(self) -> bytes:
        """The whole flash, read twice and compared, so that a read error never ends up in the backup.

        A sector the two reads disagree on is read a third time and the two matching reads win;
        with three different answers the reads are unreliable and the job stops before any change.
        """
        size, ss = self.dev.size, self.ss
        reads = []
        for label in ("backup", "backup check"):
            with self.progress.task(label, size) as advance:
                reads.append(self.chip.read(0, size, advance))
        first, second = reads
        if first == second:
            return first
        out = bytearray(first)
        for off in range(0, size, ss):
            a, b = first[off:off + ss], second[off:off + ss]
            if a == b:
                continue
            third = self.chip.read(off, ss)
            if third not in (a, b):
                raise OperationFailed(f"flash reads are unreliable: three reads of sector {off // ss} differ",
                                      hint="check the connection and the board's power, then rerun")
            out[off:off + ss] = third
            self.log(f"note: a read error in sector {off // ss} was corrected (backup checked by a second read)")
        return bytes(out)

    def _before(self, journal: Journal, fresh: bytes | None) -> bytes | None:
        """What the whole flash held before the job: this run's backup read, else the journal's backup file."""
        if fresh is not None:
            return fresh
        if journal.backup and journal.backup_sha256:
            try:
                data = Path(journal.backup).read_bytes()
            except OSError:
                return None
            return data if sha256(data) == journal.backup_sha256 else None
        return None

    def _run(self, journal: Journal, blocked: bool) -> JobResult:
        chip, ss = self.chip, self.ss
        resumed = self.job.resume
        start, count = journal.start_sector, journal.sector_count
        lo, hi = start * ss, (start + count) * ss
        fresh = self._backup(journal)
        if fresh is not None:
            current = fresh[lo:hi]
        else:
            journal.save(phase="compare", sector=None)
            current = vote.read(self.dev, lo, hi - lo, self.job.reads, self.progress).data
        before = self._before(journal, fresh)
        changed = [s for s in range(start, start + count)
                   if current[(s - start) * ss:(s - start + 1) * ss] != self._target(s)]
        self.log(f"{len(changed)} of {count} sector(s) differ")
        orig = journal.protection or {}
        if blocked:
            journal.save(phase="unprotect", protection={**orig, "cleared": True})
            chip.write_status(*unprotected_status(orig["sr1"], orig["sr2"]))
            st = chip.status()
            if chip.protection(st.sr1, st.sr2).overlaps(lo, hi):
                raise OperationFailed(f"protection did not clear (sr1 0x{st.sr1:02x}, sr2 0x{st.sr2:02x} after the "
                                      "write): srp0/srp1 or the wp# pin lock the status registers")
        with self.progress.task(self.job.kind, len(changed) * ss):
            for s in changed:
                self._sector(journal, s, current[(s - start) * ss:(s - start + 1) * ss])
        restored = False
        if journal.protection and journal.protection.get("cleared"):
            journal.save(phase="restore-protection", sector=None)
            want = writable_status(journal.protection["sr1"], journal.protection["sr2"])
            chip.write_status(*want)
            st = chip.status()
            if writable_status(st.sr1, st.sr2) != want:
                raise OperationFailed(f"protection was not restored: sr1 0x{st.sr1:02x} sr2 0x{st.sr2:02x}, "
                                      f"expected 0x{want[0]:02x} 0x{want[1]:02x}")
            journal.save(protection={**journal.protection, "cleared": False})
            restored = True
        sha_after = self._final_verify(journal, lo, hi, before)
        journal.remove()
        return JobResult(sectors_total=count, sectors_changed=len(changed), sectors_skipped=count - len(changed),
                         sha256_after=sha_after, backup=journal.backup, resumed=resumed, start_sector=start,
                         sector_count=count, protection_restored=restored,
                         board=None if self.board is None else self.board.as_dict(),
                         region=None if journal.region is None else
                         {k: v for k, v in journal.region.items() if k != "edges"},
                         layout=None if self.layout is None else self.layout.as_dict())

    def _sector(self, journal: Journal, s: int, current: bytes) -> None:
        """Erase (unless erased), program the non-0xFF pages, read back and compare (§d.6)."""
        chip, ss, page = self.chip, self.ss, self.chip.page_size
        addr = s * ss
        want = self._target(s)
        journal.save(sector=s, phase="erase")
        if current != b"\xff" * ss:
            chip.erase_sector(s)
        journal.save(phase="program")
        for off in range(0, ss, page):
            data = want[off:off + page]
            if data != b"\xff" * page:
                chip.program_page(addr + off, data, sector=s)
        journal.save(phase="verify")
        back = vote.read(self.dev, addr, ss, self.job.reads).data
        if back != want:
            i = next(i for i in range(ss) if back[i] != want[i])
            raise OperationFailed(f"verify failed at 0x{addr + i:06x} in sector {s}: flash 0x{back[i]:02x}, "
                                  f"expected 0x{want[i]:02x}")
        journal.sectors_done.append(s)
        journal.save(sector=None)
        self.progress.advance(ss)

    def _final_verify(self, journal: Journal, lo: int, hi: int, before: bytes | None) -> str | None:
        """Read the target range back and compare it with the target; return the sha256 of the whole flash.

        The rest of the flash is never written: its bytes come from the pre-job read (this run's
        backup, or the journal's backup file when resuming). Without one, a partial write reports no
        whole-flash hash rather than reading the untouched rest (``flash dump`` gives it on demand).
        """
        journal.save(phase="final-verify", sector=None)
        size = self.dev.size
        flash = vote.read(self.dev, lo, hi - lo, self.job.reads, self.progress, label="final verify").data
        target = b"".join(self._target(s) for s in range(lo // self.ss, hi // self.ss))
        res = compare(flash, target, self.ss, base=lo)
        if not res.match:
            raise OperationFailed(f"final verify failed at 0x{res.first_mismatch:06x}: flash 0x{res.flash_byte:02x}, "
                                  f"expected 0x{res.image_byte:02x} (sectors {res.mismatched_sectors[:8]})")
        if lo == 0 and hi == size:
            return sha256(flash)
        if before is None:
            return None
        return sha256(before[:lo] + flash + before[hi:])
