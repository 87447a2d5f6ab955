"""``tinyhw flash info|read|dump|verify|write|erase|psp-status``: the Navi31 SPI flash.

Front end of :mod:`tinyhw.flash` (specs/navi31-spi-flash.md §d through the ROM_SW engine, §f the
ROM aperture dump, §e.4 the PSP mailbox probe, §g.3 the board identity checked before a write):
parses options, checks images before touching the device (exit 2), draws a progress bar on a
terminal, prints text or JSON.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import Number, parse_number
from tinyhw.errors import OperationFailed, Refused
from tinyhw.flash import FlashDevice, Job, Progress, Writer, ops
from tinyhw.flash.files import sha256, write_atomic

_META = "tinyhw.flash"


class _Bar(Progress):
    """A rich progress bar (bytes, rate, ETA) on stderr, only when stderr is a terminal and not -q."""

    def __init__(self, app: App) -> None:
        self.app = app
        self._bar: Any = None
        self._task: Any = None

    def start(self, label: str, total: int) -> None:
        if self.app.quiet or not self.app.err.is_terminal:
            return
        from rich.progress import BarColumn, DownloadColumn, TextColumn, TimeRemainingColumn, TransferSpeedColumn
        from rich.progress import Progress as RichProgress

        self._bar = RichProgress(TextColumn(f"{label:<12}"), BarColumn(), DownloadColumn(), TransferSpeedColumn(),
                                 TimeRemainingColumn(), console=self.app.err, transient=True)
        self._bar.start()
        self._task = self._bar.add_task(label, total=total)

    def advance(self, n: int) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, n)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None


def _writable_target(path: str) -> None:
    """Refuse (exit 2) before reading the flash when ``path`` cannot be created."""
    parent = Path(path).resolve().parent
    if not parent.is_dir() or not os.access(parent, os.W_OK):
        raise Refused(f"cannot create {path}: {parent} is not a writable directory")


def _load(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as e:
        raise Refused(f"cannot read {path}: {e.strerror}") from None


@contextmanager
def _device(app: App, *, writes: bool = False) -> Iterator[FlashDevice]:
    opts = click.get_current_context().meta.get(_META, {})
    transport = app.open_transport(writes=writes)
    dev = FlashDevice(transport, chain=opts.get("chain", True), prescale=opts.get("prescale", 8))
    with dev:
        for note in dev.chip.notes:
            app.log(f"note: {note}")
        yield dev


def _device_text(app: App) -> str:
    """The device string to repeat in a resume hint (an emulated board's one-shot faults= left out)."""
    from dataclasses import replace

    from tinyhw.transport.devstr import parse_device

    text = app.device or os.environ.get("TINYHW_DEVICE")
    if not text:
        return "DEVICE"
    spec = parse_device(text)
    return str(replace(spec, options={k: v for k, v in spec.options.items() if k != "faults"}))


@click.group()
@click.option("--no-chain", is_flag=True,
              help="Prime every read with an identical one (the seed's double read) instead of chaining reads.")
@click.option("--prescale", type=Number(maximum=15), default=8, show_default=True,
              help="SCK prescale written to ROM_CNTL for the session (restored afterwards).")
@click.pass_context
def flash(ctx: click.Context, no_chain: bool, prescale: int) -> None:
    """Read, back up, verify and rewrite a Navi31 board's 2 MiB SPI flash through the GPU's ROM_SW engine.

    Works while the board's PSP has not booted (a board stuck in its boot loader); a booted board
    gates the engine and is refused. The engine's controls are restored when the command ends.

    The ROM aperture dump (flash dump --method aperture) and the PSP mailbox probe (flash
    psp-status) also work on a booted board.

    \b
    Examples:
      tinyhw --device usb flash info
      tinyhw --device mock:navi31-usb flash dump backup.bin
      tinyhw --device usb flash write image.bin --yes
      tinyhw --device mock:navi31,psp=sos flash psp-status
    """
    ctx.meta[_META] = {"chain": not no_chain, "prescale": prescale}


@flash.command()
@click.pass_obj
def info(app: App) -> None:
    """Show the flash chip: JEDEC id, name, size, SR1/SR2/SR3, protection in words, SFDP presence.

    Read-only.

    \b
    Example:
      tinyhw --device mock:navi31 --json flash info
    """
    with _device(app) as dev:
        doc = ops.info(dev)

    def human() -> None:
        out = app.out
        out.print(f"{doc['chip']}  jedec {doc['jedec_id']}  {doc['size'] // 1024} KiB "
                  f"({doc['sectors']} sectors of {doc['sector_size']} bytes)  on {doc['location']}")
        out.print(f"  sr1 0x{doc['sr1']:02x}  sr2 0x{doc['sr2']:02x}  sr3 0x{doc['sr3']:02x}"
                  f"{'  busy' if doc['busy'] else ''}{'  write-enabled' if doc['write_enabled'] else ''}")
        out.print(f"  protection: {doc['protection']}{' (cmp set)' if doc['cmp'] else ''}")
        sfdp = f"present at capture offset {doc['sfdp_offset']}" if doc["sfdp"] else "not found"
        out.print(f"  sfdp: {sfdp}  (capture {doc['sfdp_capture']})")
        out.print(f"  reads: {doc['read_scheme']} priming")
        board = doc["board_identity"]
        if board is None:
            out.print("  vbios: none at a 128 KiB boundary")
        else:
            ids = f"{board['vendor_id']:04x}:{board['device_id']:04x}" if board["vendor_id"] is not None else "no pcir"
            out.print(f"  vbios at 0x{board['offset']:x}: part {board['part_number'] or '?'}, pci {ids}, "
                      f"version {board['version'] or '?'}")

    app.emit(doc, human)


def _hexdump(data: bytes, base: int) -> str:
    lines = []
    for off in range(0, len(data), 16):
        row = data[off:off + 16]
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in row)
        lines.append(f"{base + off:06x}  {row.hex(' '):<47}  {text}")
    return "\n".join(lines)


@flash.command()
@click.argument("address")
@click.argument("size")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the bytes to this file.")
@click.pass_obj
def read(app: App, address: str, size: str, output: str | None) -> None:
    """Read SIZE bytes at ADDRESS (decimal, 0x-hex, k/m suffixes): a hex dump, or bytes to a file.

    Read-only.

    \b
    Examples:
      tinyhw --device mock:navi31 flash read 0 256
      tinyhw --device usb flash read 0x40000 64k -o vbios.bin
    """
    # 3-byte SPI addresses: nothing past 16 MiB exists on any part; the device checks its own size
    addr = parse_number(address, "address", maximum=0xFFFFFF, units=True)
    n = parse_number(size, "size", minimum=1, maximum=0x1000000, units=True)
    if output:
        _writable_target(output)
    with _device(app) as dev:
        data = ops.read(dev, addr, n, _Bar(app))
    if output:
        write_atomic(Path(output), data)
    doc = {"address": addr, "size": n, "sha256": sha256(data), "path": output,
           "data": None if output else data.hex()}

    def human() -> None:
        if output:
            app.out.print(f"read {n} bytes at 0x{addr:06x} into {output}\nsha256 {doc['sha256']}")
        else:
            sys.stdout.write(_hexdump(data, addr) + "\n")

    app.emit(doc, human)


@flash.command()
@click.argument("file", type=click.Path(dir_okay=False))
@click.option("--method", type=click.Choice(["rom_sw", "aperture"]), default="rom_sw", show_default=True,
              help="rom_sw: raw SPI reads through the ROM_SW engine (board not booted). aperture: dword reads "
                   "through ROM_INDEX/ROM_DATA, which also work once the PSP has booted.")
@click.pass_obj
def dump(app: App, file: str, method: str) -> None:
    """Read the whole flash into FILE (written atomically: a temporary file, then a rename); print its sha256.

    With --method aperture the flash is read one dword per ROM_DATA read from plain byte addresses
    in ROM_INDEX; ROM_CNTL is left alone and ROM_INDEX and ROM_CNTL are restored exactly. The dump
    is refused (nothing written) when the controller reads 0xffffffff, when it is not 2 MiB with
    the AA55AA55 magic, or when both 1 MiB halves are equal (a mirrored aperture).

    Read-only on the board (the aperture method writes ROM_INDEX and restores it).

    \b
    Examples:
      tinyhw --device mock:navi31-usb flash dump board.bin
      tinyhw --device mock:navi31,psp=sos flash dump board.bin --method aperture
    """
    _writable_target(file)
    if method == "aperture":
        from tinyhw.boards.navi31 import NAVI31
        from tinyhw.flash import aperture

        bar = _Bar(app)
        bar.start("dump", NAVI31.flash_size)
        try:
            result = aperture.dump(app.open_transport(), advance=bar.advance)
        finally:
            bar.stop()
        data = result.data
        app.log(f"aperture: {result.reads} rom_data reads; rom_index 0x{result.rom_index:08x} and rom_cntl "
                f"0x{result.rom_cntl:08x} restored")
    else:
        with _device(app) as dev:
            data = ops.dump(dev, _Bar(app))
    write_atomic(Path(file), data)
    doc = {"path": file, "bytes": len(data), "sha256": sha256(data)}
    app.emit(doc, lambda: app.out.print(f"dumped {len(data)} bytes to {file}\nsha256 {doc['sha256']}"))


@flash.command("psp-status")
@click.pass_obj
def psp_status(app: App) -> None:
    """Probe the PSP early-boot flash mailbox: boot partition, framebuffer state, SPI model id, transfer type.

    Sends the four read-only commands GET_BOOT_PARTITION, GET_FB_STATE, SPI_GET_MODEL_ID and
    GET_TRANSFER_TYPE (in that order) through the MP0 C2PMSG mailbox and shows each status (by
    name) and raw response; only the transfer type is decoded (item and phase). Warns when the
    mailbox is gated (a host driver or the PSP's SOS already running). Nothing is sent when the
    mailbox is not ready. Starts no transfer and writes nothing to the flash; a non-zero status
    is reported, not an error.

    \b
    Examples:
      tinyhw --device mock:navi31,psp=early flash psp-status
      tinyhw --device usb --json flash psp-status
    """
    from tinyhw.flash import psp

    result = psp.probe(app.open_transport())
    doc = result.as_dict()
    for warning in result.warnings:
        click.echo(f"warning: {warning}", err=True)

    def human() -> None:
        out = app.out
        state = "ready" if doc["ready_before"] else "not ready"
        out.print(f"psp mailbox on {doc['location']}: command register 0x{doc['command_register_before']:08x} "
                  f"before the probe ({state})")
        for c in doc["commands"]:
            line = (f"  {c['name']:<18} (0x{c['command']:02x})  status 0x{c['status']:04x} {c['status_name']:<30}"
                    f"  response 0x{c['response']:08x}")
            d = c["decoded"]
            if d is not None:
                line += f": item 0x{d['item']:02x} ({d['item_name'] or 'not in the item table'}), phase {d['phase']}"
                if d["phase_meaning"]:
                    line += f" ({d['phase_meaning']})"
            out.print(line)
        if doc["gated"]:
            out.print("  gated: early update commands are rejected (a host driver or sos is running)")

    app.emit(doc, human)


@flash.command()
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@click.option("--start-sector", type=Number(), help="Compare only from this 4 KiB sector (default 0).")
@click.option("--sector-count", type=Number(minimum=1), help="Compare only this many sectors (default: to the end).")
@click.pass_obj
def verify(app: App, image: str, start_sector: int | None, sector_count: int | None) -> None:
    """Compare the flash with IMAGE (a full 2 MiB image): exit 0 when equal, 1 otherwise (first
    differing address shown). With --start-sector/--sector-count only that range is read and compared.

    Read-only.

    \b
    Examples:
      tinyhw --device mock:navi31 flash verify board.bin
      tinyhw --device usb flash verify board.bin --start-sector 64 --sector-count 16
    """
    data = _load(image)
    with _device(app) as dev:
        result = ops.verify(dev, data, _Bar(app), start_sector, sector_count)
    doc = result.as_dict()

    def human() -> None:
        if result.match:
            app.out.print(f"flash matches {image} (sha256 {result.sha256})")
        else:
            app.out.print(f"flash differs from {image}: first at 0x{result.first_mismatch:06x} (flash "
                          f"0x{result.flash_byte:02x}, image 0x{result.image_byte:02x}); "
                          f"{len(result.mismatched_sectors)} sector(s) differ: {result.mismatched_sectors[:16]}")

    app.emit(doc, human)
    if not result.match:
        raise OperationFailed(f"flash differs from {image} at 0x{result.first_mismatch:06x} "
                              f"({len(result.mismatched_sectors)} sector(s))")


def _job_options(f: Any) -> Any:
    options = [
        click.option("--backup", type=click.Path(dir_okay=False), help="Back up the whole flash to this new file "
                     "first (default: navi31-flash-backup-DATE-HASH.bin in the current directory)."),
        click.option("--no-backup", is_flag=True, help="Do not back up first."),
        click.option("--start-sector", type=Number(), help="First 4 KiB sector of the range (default 0)."),
        click.option("--sector-count", type=Number(minimum=1), help="Number of sectors (default: to the end)."),
        click.option("--clear-protection", is_flag=True,
                     help="Clear block protection that covers the range, and restore it afterwards."),
        click.option("--resume", is_flag=True, help="Finish an interrupted job recorded in the journal."),
        click.option("--yes", is_flag=True, help="Do it without asking."),
    ]
    for opt in reversed(options):
        f = opt(f)
    return f


def _run_job(app: App, job: Job, resume: str) -> None:
    """Run ``job``; ``resume`` is the command line that finishes it after an interruption."""
    if job.backup is not None and job.no_backup:
        raise Refused("--backup and --no-backup contradict each other")
    yes = bool(click.get_current_context().params.get("yes"))
    with _device(app, writes=True) as dev:
        result = Writer(dev, job, confirm=lambda plan: app.confirm(yes, plan), progress=_Bar(app),
                        log=app.log, resume_hint=lambda _job: resume).run()
    doc = result.as_dict()

    def human() -> None:
        app.out.print(f"{job.kind} done{' (resumed)' if result.resumed else ''}: {result.sectors_changed} of "
                      f"{result.sectors_total} sector(s) changed, {result.sectors_skipped} already equal")
        app.out.print(f"  backup: {result.backup or 'none'}")
        if result.protection_restored:
            app.out.print("  protection restored")
        if result.sha256_after:
            app.out.print(f"  sha256 after: {result.sha256_after}")
        else:
            app.out.print("  sha256 after: not computed (partial write without a backup; flash dump gives it)")

    app.emit(doc, human)


def _resume_cmd(app: App, what: str) -> str:
    opts = click.get_current_context().meta.get(_META, {})
    chain = "" if opts.get("chain", True) else " --no-chain"
    return f"tinyhw --device {_device_text(app)} flash{chain} {what} --resume --yes"


@flash.command()
@click.argument("image", type=click.Path(exists=True, dir_okay=False))
@_job_options
@click.option("--force", is_flag=True,
              help="Write even without the IFWI magic at offset 0 (the size is always checked).")
@click.option("--force-board-mismatch", is_flag=True,
              help="Write even when the image's VBIOS names another board (part number, PCI ids) than the flash's.")
@click.pass_obj
def write(app: App, image: str, backup: str | None, no_backup: bool, start_sector: int | None,
          sector_count: int | None, clear_protection: bool, resume: bool, yes: bool, force: bool,
          force_board_mismatch: bool) -> None:
    """Write IMAGE (a full 2 MiB raw flash image) to the flash: only differing sectors, each verified.

    Checks the image first (exactly 2 MiB, AA55AA55 at offset 0; --force skips the magic), and
    that it is for this board: the part number and PCI ids of its VBIOS must match the flash's
    (--force-board-mismatch overrides; a side without a VBIOS is a warning; a resumed write
    compares against the identity its journal recorded). Backs up the whole flash, keeps a
    journal in $XDG_STATE_HOME/tinyhw so an interrupted write is finished with --resume,
    restores protection bits it had to clear, and verifies at the end. Changes the flash.

    \b
    Examples:
      tinyhw --device usb flash write image.bin --yes
      tinyhw --device usb flash write image.bin --start-sector 64 --sector-count 16 --yes
      tinyhw --device usb flash write image.bin --resume --yes
    """
    from tinyhw.formats.ifwi import require_flashable

    data = _load(image)
    check = require_flashable(data, force=force)
    for note in check.notes:
        app.log(f"note: {note}")
    _run_job(app, Job("write", image=data, image_path=str(Path(image).resolve()), start_sector=start_sector,
                      sector_count=sector_count, backup=Path(backup) if backup else None, no_backup=no_backup,
                      clear_protection=clear_protection, resume=resume, device=_device_text(app),
                      force_board_mismatch=force_board_mismatch),
             _resume_cmd(app, f"write {image}" + (" --force-board-mismatch" if force_board_mismatch else "")))


@flash.command()
@_job_options
@click.pass_obj
def erase(app: App, backup: str | None, no_backup: bool, start_sector: int | None, sector_count: int | None,
          clear_protection: bool, resume: bool, yes: bool) -> None:
    """Erase sectors of the flash (default: all of it), with the same backup, journal and protection rules as write.

    Changes the flash.

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
    _run_job(app, Job("erase", start_sector=start_sector, sector_count=sector_count,
                      backup=Path(backup) if backup else None, no_backup=no_backup,
                      clear_protection=clear_protection, resume=resume, device=_device_text(app)),
             _resume_cmd(app, f"erase{rng}"))

