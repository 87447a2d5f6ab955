"""``tinyhw flash info|read|dump|verify|write|erase|psp-status``: the Navi31 SPI flash.

Front end of :mod:`tinyhw.flash` (specs/navi31-spi-flash.md §d through the ROM_SW engine, §f the
ROM aperture dump, §e.4 the PSP mailbox probe, §g.3 the board identity checked before a write):
parses options, checks images before touching the device (exit 2), draws a progress bar on a
terminal, prints text or JSON.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.flash_common import FORCE_HELP, META, load_image, open_flash, say
from tinyhw.cli.flash_jobs import erase, write
from tinyhw.cli.flash_layout import layout
from tinyhw.cli.flash_update import DISABLED, update
from tinyhw.cli.numbers import Number, parse_number
from tinyhw.cli.progressbar import ProgressBar
from tinyhw.errors import OperationFailed, Refused
from tinyhw.fileio import atomic_write, check_output_path
from tinyhw.flash import ops
from tinyhw.flash.files import sha256


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
    psp-status) also work on a booted board; flash update rewrites a healthy board's flash through
    its PSP (right after a power-on, before any driver).

    \b
    Examples:
      tinyhw --device usb flash info
      tinyhw --device mock:navi31-usb flash dump backup.bin
      tinyhw --device usb flash write image.bin --yes
      tinyhw --device mock:navi31,psp=sos flash psp-status
      tinyhw --device usb flash update image.bin --yes
      tinyhw flash layout image.bin
    """
    ctx.meta[META] = {"chain": not no_chain, "prescale": prescale}


@flash.command()
@click.pass_obj
def info(app: App) -> None:
    """Show the flash chip: JEDEC id, name, size, SR1/SR2/SR3, protection in words, SFDP presence.

    Read-only.

    \b
    Example:
      tinyhw --device mock:navi31 --json flash info
    """
    with open_flash(app) as dev:
        doc = ops.info(dev)

    def human() -> None:
        say(app, f"{doc['chip']}  jedec {doc['jedec_id']}  {doc['size'] // 1024} KiB "
                  f"({doc['sectors']} sectors of {doc['sector_size']} bytes)  on {doc['location']}")
        say(app, f"  sr1 0x{doc['sr1']:02x}  sr2 0x{doc['sr2']:02x}  sr3 0x{doc['sr3']:02x}"
                  f"{'  busy' if doc['busy'] else ''}{'  write-enabled' if doc['write_enabled'] else ''}")
        say(app, f"  protection: {doc['protection']}{' (cmp set)' if doc['cmp'] else ''}")
        sfdp = f"present at capture offset {doc['sfdp_offset']}" if doc["sfdp"] else "not found"
        say(app, f"  sfdp: {sfdp}  (capture {doc['sfdp_capture']})")
        say(app, f"  reads: {doc['read_scheme']} priming")
        board = doc["board_identity"]
        if board is None:
            say(app, "  vbios: none at a 128 KiB boundary")
        else:
            ids = f"{board['vendor_id']:04x}:{board['device_id']:04x}" if board["vendor_id"] is not None else "no pcir"
            say(app, f"  vbios at 0x{board['offset']:x}: part {board['part_number'] or '?'}, pci {ids}, "
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
@click.option("-o", "--output", type=click.Path(), help="Write the bytes to this new file.")
@click.option("--force", is_flag=True, help="Overwrite the -o file if it exists (a regular file only).")
@click.pass_obj
def read(app: App, address: str, size: str, output: str | None, force: bool) -> None:
    """Read SIZE bytes at ADDRESS (decimal, 0x-hex, k/m suffixes): a hex dump, or bytes to a file.

    Read-only. The -o file is checked before the flash is read: an existing file needs --force,
    a device node, fifo, socket or directory is refused; a symlink is written through to its target.

    \b
    Examples:
      tinyhw --device mock:navi31 flash read 0 256
      tinyhw --device usb flash read 0x40000 64k -o vbios.bin
    """
    # 3-byte SPI addresses: nothing past 16 MiB exists on any part; the device checks its own size
    addr = parse_number(address, "address", maximum=0xFFFFFF, units=True)
    n = parse_number(size, "size", minimum=1, maximum=0x1000000, units=True)
    if output is not None:
        check_output_path(output, force=force, what="output file")
    with open_flash(app) as dev:
        data = ops.read(dev, addr, n, ProgressBar(app))
    if output is not None:
        atomic_write(output, data)
    doc = {"address": addr, "size": n, "sha256": sha256(data), "path": output,
           "data": None if output else data.hex()}

    def human() -> None:
        if output:
            say(app, f"read {n} bytes at 0x{addr:06x} into {output}\nsha256 {doc['sha256']}")
        else:
            sys.stdout.write(_hexdump(data, addr) + "\n")

    app.emit(doc, human)


@flash.command()
@click.argument("file", type=click.Path())
@click.option("--force", is_flag=True, help=FORCE_HELP)
@click.option("--method", type=click.Choice(["rom_sw", "aperture", "prom"]), default="rom_sw", show_default=True,
              help="rom_sw: raw SPI reads through the ROM_SW engine (board not booted). aperture: dword reads "
                   "through ROM_INDEX/ROM_DATA, which also work once the PSP has booted. prom: an NVIDIA "
                   "board's VBIOS (1 MiB) through the BAR0 PROM window; refused while a driver owns it.")
@click.option("--reads", type=Number(minimum=1, maximum=15), default=1, show_default=True,
              help="Read every sector this many times (3..15) and keep each byte's majority value; fails, "
                   "writing nothing, when a byte has no majority (rom_sw only).")
@click.option("--region", metavar="NAME", help="Dump only this region of the flash's IFWI layout (flash layout "
              "lists them); FILE then holds the region's bytes (rom_sw only).")
@click.pass_obj
def dump(app: App, file: str, force: bool, method: str, reads: int, region: str | None) -> None:
    """Read the whole flash into FILE (written atomically: a temporary file, then a rename); print its sha256.

    With --reads N (3 or more, like flashrom's --read-repeated) every sector is read N times and
    each byte is the value more than half of the reads returned; sectors whose reads disagreed are
    listed with "X/N reads matched". A byte without a majority fails the dump (exit 1) before
    FILE is written. With --region NAME only that region of the layout the flash's own tables
    describe is read (flash layout lists the names; an unknown name is refused, exit 2).

    With --method aperture the flash is read one dword per ROM_DATA read from plain byte addresses
    in ROM_INDEX; ROM_CNTL is left alone and ROM_INDEX and ROM_CNTL are restored exactly. The dump
    is refused (nothing written) when the controller reads 0xffffffff, when it is not 2 MiB with
    the AA55AA55 magic, or when both 1 MiB halves are equal (a mirrored aperture).

    With --method prom (NVIDIA) the 1 MiB PROM window at BAR0 0x300000 is read as dwords, with no
    write to the board; refused (exit 2) when a kernel driver owns the GPU, failed (exit 1, nothing
    saved) when the window reads all ones or holds no ROM image chain.

    FILE is checked before the flash is read: an existing file needs --force; a device node,
    fifo, socket or directory, an empty path or a directory that takes no new file is refused (exit
    2); a symlink is written through to its target (the link stays).

    Read-only on the board (the aperture method writes ROM_INDEX and restores it).

    \b
    Examples:
      tinyhw --device mock:navi31-usb flash dump board.bin
      tinyhw --device usb flash dump board.bin --reads 3
      tinyhw --device usb flash dump vbios.bin --region vbios-a
      tinyhw --device mock:navi31,psp=sos flash dump board.bin --method aperture
      tinyhw --device mock:ad102 flash dump vbios.rom --method prom
    """
    from tinyhw.flash import vote

    vote.check_reads(reads)
    if method != "rom_sw" and (reads != 1 or region is not None):
        raise Refused(f"--{'reads' if reads != 1 else 'region'} works with --method rom_sw only")
    check_output_path(file, force=force, what="dump")
    voted: vote.VotedRead | None = None
    where = None
    if method == "prom":
        from tinyhw.boards.nvidia import PROM_SIZE
        from tinyhw.flash.prom import dump_prom

        with ProgressBar(app).task("dump", PROM_SIZE) as advance:
            data = dump_prom(app.open_transport(), advance=advance)
    elif method == "aperture":
        from tinyhw.flash import aperture
        from tinyhw.formats.ifwi import IMAGE_SIZE

        def said(estimate: aperture.ApertureEstimate) -> None:
            app.log(estimate.words() + "; --method rom_sw reads in bulk, much faster, on a board whose psp has "
                    "not booted")

        with ProgressBar(app).task("dump", IMAGE_SIZE) as advance:  # a raw ifwi: the whole flash
            result = aperture.dump(app.open_transport(), advance=advance, on_estimate=said)
        data = result.data
        app.log(f"aperture: {result.reads} rom_data reads; rom_index 0x{result.rom_index:08x} and rom_cntl "
                f"0x{result.rom_cntl:08x} restored")
    else:
        from tinyhw.flash.layout import chip_layout

        with open_flash(app) as dev:
            lo, size = 0, dev.size
            if region is not None:
                where = chip_layout(dev, reads).find(region)
                lo, size = where.start, where.size
            voted = vote.read(dev, lo, size, reads, ProgressBar(app), label="dump")
        data = voted.data
    atomic_write(file, data)
    doc: dict[str, Any] = {"path": file, "bytes": len(data), "sha256": sha256(data)}
    if voted is not None:  # the rom_sw method: the vote and the region
        doc |= {"reads": reads, "region": None if where is None else where.to_doc(),
                "sectors_disagreed": [s.as_dict() for s in voted.disagreed]}

    def human() -> None:
        what = "" if where is None else f" (region {where.name}, 0x{where.start:06x}-0x{where.end - 1:06x})"
        say(app, f"dumped {len(data)} bytes{what} to {file}\nsha256 {doc['sha256']}")
        if voted is not None and reads > 1:
            rows = voted.disagreed
            say(app, f"{reads} reads per sector: " + (f"{len(rows)} sector(s) disagreed, each byte taken from the "
                                                       "majority" if rows else f"all {reads} reads matched"))
            for s in rows[:16]:
                say(app, f"  sector {s.sector} (0x{s.address:06x}): {s.matched}/{s.reads} reads matched, "
                          f"{s.bytes_disagreed} byte(s) disagreed")
            if len(rows) > 16:
                say(app, f"  ... and {len(rows) - 16} more (--json lists all)")

    app.emit(doc, human)


flash.add_command(layout)


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
        state = "ready" if doc["ready_before"] else "not ready"
        say(app, f"psp mailbox on {doc['location']}: command register 0x{doc['command_register_before']:08x} "
                  f"before the probe ({state})")
        for c in doc["commands"]:
            line = (f"  {c['name']:<18} (0x{c['command']:02x})  status 0x{c['status']:04x} {c['status_name']:<30}"
                    f"  response 0x{c['response']:08x}")
            d = c["decoded"]
            if d is not None:
                line += f": item 0x{d['item']:02x} ({d['item_name'] or 'not in the item table'}), phase {d['phase']}"
                if d["phase_meaning"]:
                    line += f" ({d['phase_meaning']})"
            say(app, line)
        if doc["gated"]:
            say(app, "  gated: early update commands are rejected (a host driver or sos is running)")

    app.emit(doc, human)


@flash.command()
@click.argument("image", type=click.Path())
@click.option("--start-sector", type=Number(), help="Compare only from this 4 KiB sector (default 0).")
@click.option("--sector-count", type=Number(minimum=1), help="Compare only this many sectors (default: to the end).")
@click.option("--after-update", is_flag=True,
              help="After flash update and a hard power cycle: read through the ROM aperture (works on a booted "
                   "board) and tolerate exactly the regions the PSP rewrites, listing them.")
@click.option("--reads", type=Number(minimum=1, maximum=15), default=1, show_default=True,
              help="Read every sector this many times (3..15) and compare each byte's majority value.")
@click.pass_obj
def verify(app: App, image: str, start_sector: int | None, sector_count: int | None, after_update: bool,
           reads: int) -> None:
    """Compare the flash with IMAGE (a full 2 MiB image): exit 0 when equal, 1 otherwise (first
    differing address shown). With --start-sector/--sector-count only that range is read and compared.
    With --reads N each sector is read N times and voted per byte first, so a read that arrived wrong
    is no mismatch (a byte without a majority fails, exit 1).

    With --after-update (after flash update and a hard power cycle) the A and B payloads are
    compared with the image and exactly the regions a PSP update rewrites are tolerated (the ISH B
    checksum and update counter, the update cookie and metadata sector near 0x1ef000); anything
    else that differs is exit 1 with its first offset.

    Read-only.

    \b
    Examples:
      tinyhw --device mock:navi31 flash verify board.bin
      tinyhw --device usb flash verify board.bin --start-sector 64 --sector-count 16
      tinyhw --device usb flash verify image.bin --after-update
    """
    data = load_image(image)
    if after_update:
        if start_sector is not None or sector_count is not None:
            raise Refused("--after-update compares the whole flash: drop --start-sector/--sector-count")
        if reads != 1:
            raise Refused("--after-update reads through the ROM aperture once: drop --reads")
        _verify_after_update(app, image, data)
        return
    with open_flash(app) as dev:
        result = ops.verify(dev, data, ProgressBar(app), start_sector, sector_count, reads)
    doc = result.as_dict()

    def human() -> None:
        if result.match:
            say(app, f"flash matches {image} (sha256 {result.sha256})")
        else:
            say(app, f"flash differs from {image}: first at 0x{result.first_mismatch:06x} (flash "
                          f"0x{result.flash_byte:02x}, image 0x{result.image_byte:02x}); "
                          f"{len(result.mismatched_sectors)} sector(s) differ: {result.mismatched_sectors[:16]}")

    app.emit(doc, human)
    if not result.match:
        raise OperationFailed(f"flash differs from {image} at 0x{result.first_mismatch:06x} "
                              f"({len(result.mismatched_sectors)} sector(s))")


def _verify_after_update(app: App, image: str, data: bytes) -> None:
    from tinyhw.flash.update import require_image, verify_after_update
    from tinyhw.formats.ifwi import IMAGE_SIZE

    require_image(data)  # before the device is opened
    transport = app.open_transport()
    with ProgressBar(app).task("verify", IMAGE_SIZE) as advance:  # the image is the whole flash
        result = verify_after_update(transport, data, advance=advance)
    doc = result.as_dict()

    def human() -> None:
        payloads = ", ".join(f"{k} {'matches' if v else 'differs'}" for k, v in result.payloads.items())
        say(app, f"payloads: {payloads}")
        for t in result.tolerated:
            say(app, f"  tolerated 0x{t['offset']:06x}-0x{t['end'] - 1:06x} {t['name']}: "
                      f"{'rewritten by the psp' if t['differs'] else 'unchanged'}")
        if result.match:
            say(app, f"flash matches {image} outside the regions the psp rewrites: the update is in place")
        else:
            say(app, f"flash differs from {image} at 0x{result.first_mismatch:06x} (flash 0x{result.flash_byte:02x}, "
                      f"image 0x{result.image_byte:02x}), outside the regions the psp rewrites")

    app.emit(doc, human)
    if not result.match:
        raise OperationFailed(f"flash differs from {image} at 0x{result.first_mismatch:06x} outside the regions a "
                              "psp update rewrites", hint="the update did not complete: on a board that boots, run "
                              "flash update again; otherwise recover with flash write IMAGE --yes")


flash.add_command(write)
flash.add_command(erase)
flash.add_command(update)
for _cmd in DISABLED:
    flash.add_command(_cmd)
