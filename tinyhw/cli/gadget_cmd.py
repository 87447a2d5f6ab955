"""``tinyhw mock gadget``: serve an emulated board behind the ASM24 bridge as a real USB device.

Front end of :mod:`tinyhw.mocks.bridge.gadget` (FunctionFS) and :mod:`tinyhw.mocks.bridge.gadget_configfs`
(specs/usb-real-stack-harness.md): checks the gadget framework, takes the emulated board's lock,
serves until Ctrl-C or SIGTERM, tears configfs down, and reports what the emulator served.
"""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from tinyhw.boards.registry import bridged_boards, default_board
from tinyhw.cli.app import App


def _default_board() -> str:
    """The board served when --board is not given: the registry's first emulated board when it sits behind the
    bridge, else the first bridged board."""
    choices = bridged_boards()
    first = default_board().board
    return first if first in choices else choices[0]


@click.command("gadget")
@click.option("--board", type=click.Choice(bridged_boards()), default=_default_board(), show_default=True,
              help="The emulated board behind the bridge (the board registry's boards behind the usb bridge).")
@click.option("--flash", "flash", type=click.Path(dir_okay=False, path_type=Path), metavar="FILE",
              help="The emulated flash contents (default: the shared file in the user's cache directory).")
@click.option("--udc", metavar="NAME", help="USB device controller to bind to (default: the first in /sys/class/udc).")
@click.option("--faults", metavar="F1+F2",
              help="Fault plan, as the faults= device option (disconnect@N, timeout@N, ...).")
@click.option("--name", default="tinyhw", show_default=True, help="Name of the gadget in configfs and FunctionFS.")
@click.option("--strict", is_flag=True,
              help="Strict emulation, as the strict device option: an access the board or bridge does not model is an "
                   "error (the request stalls and the report names it) instead of a warning.")
@click.pass_obj
def gadget(app: App, board: str, flash: Path | None, udc: str | None, faults: str | None, name: str,
           strict: bool) -> None:
    """Serve an emulated board (--board) behind an ASM24 bridge as a real USB device (add1:0001, High-Speed).

    Uses the kernel's gadget framework (configfs + FunctionFS) on a USB device controller:
    dummy_hcd for tests, or a device-mode USB port so that another machine sees the bridge.
    The usb transport then works against it unchanged (tinyhw --device usb probe). Touches
    configfs (/sys/kernel/config/usb_gadget/NAME), mounts FunctionFS at /dev/ffs-NAME, binds the
    UDC, and writes only the emulated flash file; everything is removed again when it stops
    (Ctrl-C or SIGTERM), and the emulator's counters are printed (--json: with the transfer log).
    Needs root, configfs, usb_f_fs and a UDC (exit 3 otherwise).

    \b
    Example:
      modprobe dummy_hcd; modprobe usb_f_fs
      tinyhw mock gadget --board navi31 --flash /tmp/board.bin &
      tinyhw --device usb probe
      kill -INT %1
    """
    from tinyhw.connect import bridged_board
    from tinyhw.mocks.bridge.gadget import WallPacedClock
    from tinyhw.mocks.bridge.gadget_configfs import GadgetSetup, check_environment, serve_gadget

    chosen = check_environment(udc)
    opts: dict[str, str | bool] = {"speed": "hs"}
    if flash is not None:
        opts["flash"] = str(flash)
    if faults:
        opts["faults"] = faults
    if strict:
        opts["strict"] = True
    stop = threading.Event()
    served: dict[str, Any] = {}
    clock = WallPacedClock()  # the host times out on its wall clock
    emulated, bridge = bridged_board(board, opts, clock)  # the board takes the device lock
    try:
        previous = {s: signal.signal(s, lambda *_: stop.set()) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            with serve_gadget(bridge, chosen, GadgetSetup(name=name)) as g:
                app.log(f"serving the emulated {board} behind an asm24 bridge "
                        f"({bridge.identity.vendor_id:04x}:{bridge.identity.product_id:04x}, serial "
                        f"{bridge.identity.serial}) on {chosen}; flash {emulated.options.flash}; Ctrl-C stops")
                while g.running and not stop.wait(0.2):
                    pass
            served = _report(bridge, g, chosen, emulated)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
    finally:
        emulated.close()
    app.emit(served, lambda: _human(app, served))


def _board_report(board: Any) -> dict[str, Any]:
    """What the emulated board behind the bridge did: its counters and, where it keeps one, the PSP's command log
    (what, command, status) - a driver's boot through the gadget is judged by them."""
    counters = board.counters() if callable(getattr(board, "counters", None)) else {}
    boot = getattr(getattr(board, "am", None), "boot", None)
    psp = [list(entry) for entry in getattr(boot, "log", ())]
    return {"counters": counters, "psp": psp, "uncovered": list(getattr(board, "uncovered", ()))}


def _report(bridge: Any, g: Any, udc: str, board: Any) -> dict[str, Any]:
    stats = bridge.stats()
    transfers = [{"number": r.number, "kind": r.kind, "setup": list(r.setup) if r.setup else None,
                  "endpoint": r.endpoint, "length": r.length, "actual": r.actual, "status": r.status,
                  "crc32": r.crc32} for r in stats.pop("transfers")]
    return {"udc": udc, "counters": stats, "events": dict(g.event_counts), "out_landing": dict(g.out_landing),
            "errors": list(g.errors), "warnings": list(bridge.warnings), "teardown_errors": list(g.teardown_errors),
            "transfers": transfers, "board": _board_report(board)}


def _human(app: App, doc: dict[str, Any]) -> None:
    c = doc["counters"]
    print(f"served on {doc['udc']}: {c['usb_transfers']} transfers ({c['control_transfers']} control, "
          f"{c['bulk_transfers']} bulk), {c['bytes_in']} bytes in, {c['bytes_out']} bytes out, "
          f"{c['tlp_reads']} tlp reads, {c['tlp_writes']} tlp writes, modelled {c['modelled_s']:.6f} s")
    failed = [t for t in doc["transfers"] if t["status"] != "ok"]
    if failed:
        print(f"  {len(failed)} transfer(s) not completed: "
              + ", ".join(f"#{t['number']} {t['status']}" for t in failed[:10]))
    for what in ("errors", "warnings", "teardown_errors"):
        for line in doc[what]:
            print(f"  {what.rstrip('s').replace('_', ' ')}: {line}", file=sys.stderr)
