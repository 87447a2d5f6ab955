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
@click.option("--force", is_flag=True, hidden=True)  # accepted as before; the one backup is replaced anyway
@click.pass_obj
def reset(app: App, yes: bool, force: bool) -> None:
    """Restore an emulated board to its power-on state (default: the first emulated board, mock:navi31).

    Touches only the emulated board's files. A board with a flash (mock:navi31, mock:navi33 and
    their -usb forms): the flash file named by the device's flash= option, else the board's
    default one in the user's cache directory, gets the board's factory (synthetic) image, as
    often as you like. Contents of your own (anything but the factory image) are kept beside it
    in ONE backup, FILE.bak, which the next reset of other contents replaces (the plan says so);
    a FILE.bak that is not a regular file (a device node, fifo, directory) is refused. The board
    state file beside it (FILE.board.json: firmware running, register values) is deleted: a cold
    board. A board without one (mock:ad102): its board-state file (state= option, else the
    default in the user's cache directory: WPR2, GSP-RM running) is deleted, so the next command
    finds WPR2 down and GSP-RM stopped.

    \b
    Examples:
      tinyhw mock reset --yes
      tinyhw --device mock:navi31,flash=/tmp/board.bin mock reset --yes
      tinyhw --device mock:ad102 mock reset --yes
    """
    from tinyhw.boards.registry import default_board
    from tinyhw.connect import entry_of, typed_options
    from tinyhw.mocks.amd.board import flash_backup_needed, flash_path, reset_flash
    from tinyhw.transport.devstr import given_device, parse_device
    from tinyhw.transport.lock import DeviceLock

    app.refuse_record()  # the reset rewrites the board's files; no device operation to record
    spec = given_device(app.device) or parse_device(default_board().name)
    if not spec.is_mock:
        raise Refused(f"mock reset works on emulated boards only, not {spec.kind}:")
    entry = entry_of(spec)
    options = typed_options(spec, entry)
    board = entry.spec
    if board is None:
        raise Refused(f"mock:{spec.target} has no board description: there is nothing to reset")
    if not board.flash_size:  # its state is a board-state file (the state= option)
        _reset_state(app, yes, options.state)
        return
    path = flash_path(options, spec=board)
    backup = path.with_name(path.name + ".bak")
    current = read_input(path, MAX_FLASH_FILE, "emulated flash file") if path.is_file() else None
    if path.parent.is_dir():  # else no flash file yet (a fresh cache dir): nothing to back up, the reset creates it
        check_output_path(backup, force=True, what="backup")  # replaced when needed, but never a fifo or device
    old = read_input(backup, MAX_FLASH_FILE, "backup") if backup.is_file() else None
    keep = current is not None and flash_backup_needed(current, old, spec=board)
    plan = f"reset the emulated flash {path} to the factory image and forget the board state (a cold board)"
    if keep:
        plan += f" (your contents kept as {backup}{', replacing the earlier backup' if old is not None else ''})"
    elif current is not None:
        plan += " (no backup: " + ("it holds the factory image)" if old != current else f"already kept as {backup})")
    app.confirm(yes, plan)
    with DeviceLock(str(path.resolve()), backend="mock"):
        if keep:
            atomic_write(backup, current)
        sha = reset_flash(path, spec=board)
    app.emit({"path": str(path), "sha256": sha, "backup": str(backup) if keep else None},
             lambda: app.out.print(f"emulated flash reset: {path} (sha256 {sha})"
                                   + (f"; your contents kept as {backup}" if keep else ""), markup=False, emoji=False))


def _reset_state(app: App, yes: bool, state: Path) -> None:
    """``mock reset`` of an emulated board that keeps a board-state file and no flash (the emulated AD102): delete
    the file under the board's device lock."""
    from tinyhw.mocks.nvidia.ad102 import LOCK_KEY, reset_state, state_kept
    from tinyhw.transport.lock import DeviceLock

    state_kept(state)  # a path that is not a regular file is refused before the plan
    app.confirm(yes, f"reset the emulated ad102 to power-on: delete its board state {state} (wpr2 down, gsp-rm "
                     "stopped)")
    with DeviceLock(LOCK_KEY, backend="mock"):
        deleted = reset_state(state)
    what = "board state deleted" if deleted else "no board state was kept: already at power-on"
    app.emit({"board": "ad102", "path": str(state), "deleted": deleted},
             lambda: app.out.print(f"emulated ad102 reset to power-on: {state} ({what})", markup=False, emoji=False))


@mock.command("power-cycle")
@click.pass_obj
def power_cycle(app: App) -> None:
    """Hard power-cycle an emulated AMD board: the flash is kept, everything else starts cold, and the PSP boots.

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
    from tinyhw.boards.registry import default_board
    from tinyhw.connect import entry_of, typed_options
    from tinyhw.mocks.amd.board import flash_path, power_cycle_flash
    from tinyhw.transport.devstr import given_device, parse_device
    from tinyhw.transport.lock import DeviceLock

    app.refuse_record()  # the power cycle rewrites the board's files; no device operation to record
    spec = given_device(app.device) or parse_device(default_board().name)
    if not spec.is_mock:
        raise Refused(f"mock power-cycle works on emulated boards only, not {spec.kind}:")
    entry = entry_of(spec)
    options = typed_options(spec, entry)
    board = entry.spec
    if board is None or not board.engines.psp_update:  # no flash the psp boots from (mock:ad102)
        raise Refused(f"mock:{spec.target} keeps no flash file: there is nothing to power-cycle",
                      hint=f"tinyhw --device mock:{spec.target} mock reset --yes returns it to power-on")
    path = flash_path(options, spec=board)
    with DeviceLock(str(path.resolve()), backend="mock"):
        booted, why = power_cycle_flash(path, options.timing, spec=board)
    state = "early (rom_sw gated; flash update possible)" if booted else "pbl (the boot loader stalled; rom_sw open)"
    doc = {"path": str(path), "booted": booted, "why": why, "psp": "early" if booted else "pbl"}
    app.emit(doc, lambda: app.out.print(
        f"power-cycled {path}: {'booted partition ' + booted if booted else 'nothing boots'} ({why}); psp {state}",
        markup=False, emoji=False))
