"""``tinyhw flash write|erase``: the state-changing flash commands, their journal, ``--resume`` and ``--abandon``.

Front end of :class:`tinyhw.flash.Writer` (specs/navi31-spi-flash.md §d) and of
:mod:`tinyhw.flash.jobfiles`: the image and the backup path are checked before
the device is opened (exit 2); ``--abandon`` shows an interrupted job's journal and the flash's
state, then removes the journal.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.flash_common import META, device_text, load_image, open_flash, say
from tinyhw.cli.numbers import Number
from tinyhw.cli.progressbar import ProgressBar
from tinyhw.errors import Refused, TinyhwError
from tinyhw.flash import Job, Writer


def _job_options(f: Any) -> Any:
    options = [
        click.option("--backup", type=click.Path(),
                     help="Back up the whole flash to this new file first (default: a new file named by the chip, "
                          "the board's vbios part number, the time and the content's hash in "
                          "$XDG_STATE_HOME/tinyhw/backups, else ~/.local/state/tinyhw/backups); never overwrites "
                          "a file."),
        click.option("--no-backup", is_flag=True, help="Do not back up first."),
        click.option("--start-sector", type=Number(), help="First 4 KiB sector of the range (default 0)."),
        click.option("--sector-count", type=Number(minimum=1), help="Number of sectors (default: to the end)."),
        click.option("--clear-protection", is_flag=True,
                     help="Clear block protection that covers the range, and restore it afterwards."),
        click.option("--resume", is_flag=True, help="Finish an interrupted job recorded in the journal."),
        click.option("--abandon", is_flag=True, help="Discard the journal of an interrupted job (with --yes) after "
                     "showing what it recorded and the state of the flash; the flash is left as it is."),
        click.option("--reads", type=Number(minimum=1, maximum=15), default=1, show_default=True,
                     help="Read every sector this many times (3..15) wherever the job reads the flash (backup, "
                     "verifies) and keep each byte's majority value: for an unreliable link."),
        click.option("--yes", is_flag=True, help="Do it without asking."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _total_sectors() -> int:
    """Sectors of a whole flash, known before the device is opened: a raw IFWI image's size in 4 KiB sectors (every
    board tinyhw flashes holds one; the job checks the chip's own geometry once it is open)."""
    from tinyhw.formats.ifwi import IMAGE_SIZE

    return IMAGE_SIZE // 4096


def _run_job(app: App, job: Job, resume: str) -> None:
    """Run ``job``; ``resume`` is the command line that finishes it after an interruption (the library's
    Writer takes it as its resume hint: the job itself carries no cli strings)."""
    from tinyhw.flash.jobfiles import check_backup

    if job.backup is not None and job.no_backup:
        raise Refused("--backup and --no-backup contradict each other")
    if job.resume and job.abandon:
        raise Refused("--resume and --abandon contradict each other", hint="finish the job or discard its journal")
    yes = bool(click.get_current_context().params.get("yes"))
    if job.abandon:
        _abandon(app, job, yes)
        return
    check_backup(job, _total_sectors())  # before the device is opened: nothing is read for a backup that cannot be
    with open_flash(app, writes=True) as dev:
        result = Writer(dev, job, confirm=lambda plan: app.confirm(yes, plan), progress=ProgressBar(app),
                        log=app.log, resume_hint=lambda _job: resume).run()
    doc = result.as_dict()

    def human() -> None:
        say(app, f"{job.kind} done{' (resumed)' if result.resumed else ''}: {result.sectors_changed} of "
                  f"{result.sectors_total} sector(s) changed, {result.sectors_skipped} already equal")
        if result.region:
            r = result.region
            say(app, f"  region {r['name']} (0x{r['start']:06x}-0x{r['end'] - 1:06x}); bytes around it kept")
        say(app, f"  backup: {result.backup or 'none'}")
        if result.protection_restored:
            say(app, "  protection restored")
        if result.sha256_after:
            say(app, f"  sha256 after: {result.sha256_after}")
        else:
            say(app, "  sha256 after: not computed (partial write without a backup; flash dump gives it)")

    app.emit(doc, human)


def _abandon(app: App, job: Job, yes: bool) -> None:
    """Show the interrupted job's journal and the flash's state in its range, then remove the journal."""
    from tinyhw.flash.jobfiles import describe_state, find_job_journal, job_target, journal_state

    _, journal = find_job_journal(job, _total_sectors())
    what = "write of this image" if job.kind == "write" else "erase of this range"
    if journal is None:
        raise Refused(f"nothing to abandon: no interrupted {what} is recorded")
    ss = 4096
    lo, hi = journal.start_sector * ss, (journal.start_sector + journal.sector_count) * ss
    target = job_target(journal, job.image, ss)
    current, error = None, None
    try:
        with open_flash(app) as dev:
            current = dev.chip.read(lo, hi - lo)
    except TinyhwError as e:
        error = e.message
    doc = journal_state(journal, target, ss, current, error)
    app.confirm(yes, "\n".join(describe_state(doc)))
    journal.remove()
    app.emit({**doc, "abandoned": True}, lambda: say(app, f"journal {journal.path} removed; the flash is left "
                                                          "as it is"))


def _resume_cmd(app: App, what: str) -> str:
    opts = click.get_current_context().meta.get(META, {})
    chain = "" if opts.get("chain", True) else " --no-chain"
    return f"tinyhw --device {device_text(app)} flash{chain} {what} --resume --yes"


@click.command()
@click.argument("image", type=click.Path())
@_job_options
@click.option("--region", metavar="NAME", help="Write only this region of the image's IFWI layout (flash layout "
              "IMAGE lists them): the bytes inside it, every other byte of the flash kept.")
@click.option("--force", is_flag=True,
              help="Write even without the IFWI magic at offset 0, a parsable $PSP directory or an ATOM VBIOS, "
                   "or when the image's region layout differs from the flash's (the size is always checked).")
@click.option("--force-board-mismatch", is_flag=True,
              help="Write even when the image's VBIOS names another board (part number, PCI ids) than the flash's.")
@click.pass_obj
def write(app: App, image: str, backup: str | None, no_backup: bool, start_sector: int | None,
          sector_count: int | None, clear_protection: bool, resume: bool, abandon: bool, reads: int, yes: bool,
          region: str | None, force: bool, force_board_mismatch: bool) -> None:
    """Write IMAGE (a full 2 MiB raw flash image) to the flash: only differing sectors, each verified.

    Checks the image before the device is opened: a regular file of exactly 2 MiB with AA55AA55
    at offset 0, a parsable $PSP directory at 0x2000 or 0x3000 and an ATOM VBIOS (--force skips
    all but the size); and that it is for this board: the part number and PCI ids of its VBIOS
    must match the flash's (--force-board-mismatch overrides; a side without a VBIOS is a
    warning; a resumed write compares against the identity its journal recorded); and that its
    region layout (the regions its own tables describe: flash layout) is the flash's (--force
    overrides; the first differing region is named). With --region NAME only that region is
    written: the sectors it touches are rewritten with the image's bytes inside the region and
    the flash's own bytes around it (journaled, backed up and verified like any write). Backs up the
    whole flash to a new file (--backup, checked before anything is read; never overwritten),
    keeps a journal in $XDG_STATE_HOME/tinyhw so an interrupted write is finished with --resume
    (a different --backup is used if the backup was not made yet) or discarded with --abandon,
    restores protection bits it had to clear, and verifies at the end. With --reads N every read
    of the flash (backup, each sector's read-back, the final verify) is a majority vote of N reads,
    for a link that returns a wrong byte now and then. Changes the flash.

    \b
    Examples:
      tinyhw --device usb flash write image.bin --yes
      tinyhw --device usb flash write image.bin --start-sector 64 --sector-count 16 --yes
      tinyhw --device usb flash write image.bin --region vbios-a --yes
      tinyhw --device usb flash write image.bin --resume --yes
      tinyhw --device usb flash write image.bin --abandon --yes
    """
    from tinyhw.flash.layout import image_layout
    from tinyhw.formats.ifwi import require_flashable

    data = load_image(image)
    if not abandon:
        check = require_flashable(data, force=force)
        for note in check.notes:
            app.log(f"note: {note}")
    if region is not None:
        region = image_layout(data).find(region).name  # exit 2 with the names, before the device is opened
    flags = ((f" --region {region}" if region else "") + (f" --reads {reads}" if reads != 1 else "")
             + (" --force" if force else "")
             + (" --force-board-mismatch" if force_board_mismatch else ""))
    _run_job(app, Job("write", image=data, image_path=str(Path(image).resolve()), start_sector=start_sector,
                      sector_count=sector_count, backup=Path(backup) if backup else None, no_backup=no_backup,
                      clear_protection=clear_protection, resume=resume, abandon=abandon, device=device_text(app),
                      force_board_mismatch=force_board_mismatch, region=region, force_layout=force, reads=reads),
             _resume_cmd(app, f"write {image}{flags}"))


@click.command()
@_job_options
@click.pass_obj
def erase(app: App, backup: str | None, no_backup: bool, start_sector: int | None, sector_count: int | None,
          clear_protection: bool, resume: bool, abandon: bool, reads: int, yes: bool) -> None:
    """Erase sectors of the flash (default: all of it), with the same backup, journal and protection rules as write.

    Changes the flash. --abandon discards an interrupted erase's journal (after showing it).

    \b
    Examples:
      tinyhw --device usb flash erase --start-sector 496 --sector-count 16 --yes
      tinyhw --device usb flash erase --resume --yes
    """
    rng = ""
    if start_sector is not None:
        rng += f" --start-sector {start_sector}"
    if sector_count is not None:
        rng += f" --sector-count {sector_count}"
    if reads != 1:
        rng += f" --reads {reads}"
    _run_job(app, Job("erase", start_sector=start_sector, sector_count=sector_count,
                      backup=Path(backup) if backup else None, no_backup=no_backup,
                      clear_protection=clear_protection, resume=resume, abandon=abandon, device=device_text(app),
                      reads=reads), _resume_cmd(app, f"erase{rng}"))
