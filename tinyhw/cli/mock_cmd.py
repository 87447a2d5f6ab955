"""``tinyhw mock ...``: manage the emulated boards' persistent state."""

from __future__ import annotations

from pathlib import Path

import click

from tinyhw.cli.app import App
from tinyhw.cli.gadget_cmd import gadget
from tinyhw.errors import Refused
from tinyhw.fileio import atomic_write, check_output_path, read_input

#: the emulated flash file is the board's 2 MiB flash; read no more than a generous bound of it
MAX_FLASH_FILE = 16 << 20


@click.group()
def mock() -> None:
    """Manage the built-in emulated boards (their flash contents live in a file)."""


mock.add_command(gadget)


@mock.command("reset")
@click.option("--yes", is_flag=True, help="Do it without asking.")
@click.option("--force", is_flag=True, help="Replace an existing FILE.bak (otherwise a backup is never overwritten).")
@click.pass_obj
def reset(app: App, yes: bool, force: bool) -> None:
    """Restore the emulated Navi31's flash file (and status registers) to the pristine synthetic image.

    Touches only the emulated board's files: the flash file named by the device's
    flash= option, else the default one in the user's cache directory. The previous
    contents are kept beside it as FILE.bak; an existing FILE.bak is replaced only with
    --force, and one that is not a regular file (a device node, fifo, directory) never.
    The board state file beside it (FILE.board.json: firmware running, register values)
    is deleted: a cold board.

    \b
    Example:
      tinyhw mock reset --yes
      tinyhw --device mock:navi31,flash=/tmp/board.bin mock reset --yes
    """
    from tinyhw.connect import typed_options
    from tinyhw.mocks.navi31 import reset_flash
    from tinyhw.transport.devstr import given_device, parse_device
    from tinyhw.transport.lock import DeviceLock

    app.refuse_record()  # the reset rewrites the board's files; no device operation to record
    spec = given_device(app.device) or parse_device("mock:navi31")
    if not spec.is_mock:
        raise Refused(f"mock reset works on emulated boards only, not {spec.kind}:")
    path: Path | None = getattr(typed_options(spec), "flash", None)
    if path is None:
        raise Refused(f"mock:{spec.target} keeps no flash file: there is nothing to reset")
    backup = path.with_name(path.name + ".bak")
    keep = path.is_file()
    if keep:
        check_output_path(backup, force=force, what="backup", force_hint="--force replaces it")
    plan = f"reset the emulated flash {path} to the synthetic image and forget the board state (a cold board)"
    if keep:
        plan += f" (current contents kept as {backup})"
    app.confirm(yes, plan)
    with DeviceLock(str(path.resolve()), backend="mock"):
        if keep:
            atomic_write(backup, read_input(path, MAX_FLASH_FILE, "emulated flash file"))
        sha = reset_flash(path)
    app.emit({"path": str(path), "sha256": sha, "backup": str(backup) if keep else None},
             lambda: app.out.print(f"emulated flash reset: {path} (sha256 {sha})", markup=False, emoji=False))


@mock.command("power-cycle")
@click.pass_obj
def power_cycle(app: App) -> None:
    """Hard power-cycle the emulated Navi31: the flash is kept, everything else starts cold, and the PSP boots.

    The emulated PSP boots the partition its update cookie selects (else the valid one of the
    highest priority; a first boot after flash update copies the new payload into the other slot).
    The next command finds the PSP in the early state (ROM_SW gated, flash update possible) when a
    partition booted, else the stalled boot loader (ROM_SW available). Says which partition booted.
    tinyhw mock reset restores the image instead.

    \b
    Example:
      tinyhw mock power-cycle
      tinyhw --device mock:navi31-usb,flash=/tmp/board.bin mock power-cycle
    """
    from tinyhw.connect import typed_options
    from tinyhw.mocks.navi31 import power_cycle_flash
    from tinyhw.transport.devstr import given_device, parse_device
    from tinyhw.transport.lock import DeviceLock

    app.refuse_record()  # the power cycle rewrites the board's files; no device operation to record
    spec = given_device(app.device) or parse_device("mock:navi31")
    if not spec.is_mock:
        raise Refused(f"mock power-cycle works on emulated boards only, not {spec.kind}:")
    options = typed_options(spec)
    path: Path | None = getattr(options, "flash", None)
    if path is None:
        raise Refused(f"mock:{spec.target} keeps no flash file: there is nothing to power-cycle")
    with DeviceLock(str(path.resolve()), backend="mock"):
        booted, why = power_cycle_flash(path, getattr(options, "timing", "typical"))
    state = "early (rom_sw gated; flash update possible)" if booted else "pbl (the boot loader stalled; rom_sw open)"
    doc = {"path": str(path), "booted": booted, "why": why, "psp": "early" if booted else "pbl"}
    app.emit(doc, lambda: app.out.print(
        f"power-cycled {path}: {'booted partition ' + booted if booted else 'nothing boots'} ({why}); psp {state}",
        markup=False, emoji=False))
