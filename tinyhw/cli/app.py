"""The per-invocation application object handed to every command (``@click.pass_obj``).

It holds the global options, opens the device on demand (and closes it at the end),
prints JSON or human output, asks for confirmation, and writes ``--stats``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from tinyhw.errors import Refused, TinyhwError

if TYPE_CHECKING:  # imported when a device is opened, not for --help
    from tinyhw.connect import Opened
    from tinyhw.transport.base import Transport


# Whether this invocation already wrote its JSON document: an error after it (a verify mismatch, exit 1)
# must not add a second document to stdout.
EMITTED: dict[str, bool] = {"json": False}
# The arguments of this invocation (set by tinyhw.cli.main): a recording's header names the command line.
INVOCATION: dict[str, list[str]] = {"argv": []}


class App:
    """One CLI invocation's global options, its open device (closed by :meth:`finish`) and its output consoles."""

    def __init__(self, device: str | None, json_out: bool, stats: bool, verbose: int, quiet: bool,
                 record: str | None = None, force_record: bool = False) -> None:
        EMITTED["json"] = False
        self.device = device
        self.record = record
        self.force_record = force_record  # --force-record: --record FILE may replace an existing file
        self._open_tried = False  # open_transport was called (a refused --record FILE is not "opened no device")
        self.json = json_out
        self.want_stats = stats
        self.verbose = verbose
        self.quiet = quiet
        self.started = time.monotonic()
        self._opened: Any = None
        self._out: Any = None
        self._err: Any = None

    # -- consoles (rich is imported only when something is printed for humans) ----------------
    @property
    def out(self) -> Any:
        """The rich console on stdout for human-readable output (created, and rich imported, on first use)."""
        if self._out is None:
            from rich.console import Console

            self._out = Console(highlight=False, soft_wrap=True)
        return self._out

    @property
    def err(self) -> Any:
        """The rich console on stderr (created, and rich imported, on first use)."""
        if self._err is None:
            from rich.console import Console

            self._err = Console(stderr=True, highlight=False, soft_wrap=True)
        return self._err

    def log(self, message: str) -> None:
        """A progress or status line on stderr (suppressed by -q)."""
        if not self.quiet:
            print(message, file=sys.stderr)

    # -- device ---------------------------------------------------------------------------------
    def refuse_record(self) -> None:
        """Refuse (exit 2) a global ``--record`` for a command that opens no device to record."""
        if self.record is not None:
            raise Refused("--record needs a command that opens a device", hint="drop the global --record")

    def refuse_device(self, why: str, hint: str | None = None) -> None:
        """Refuse (exit 2) a global ``--device`` this command cannot honour, before it does anything
        (ARCHITECTURE.md: never silently ignored). ``$TINYHW_DEVICE`` is a default, not an option: ignored.
        ``hint``: what to do instead, for a command that needs another device (default: drop --device)."""
        if self.device is None:
            return
        import click

        ctx = click.get_current_context(silent=True)
        name = " ".join(ctx.command_path.split()[1:]) if ctx else "this command"
        raise Refused(f"{name} cannot use --device {self.device}: {why}",
                      hint=hint or f"drop the global --device for {name}")

    def device_spec(self, *, writes: bool = False, example: str = ""):  # DeviceSpec
        """The device this command uses: the global ``--device`` (or ``$TINYHW_DEVICE``), else the single real device
        present; raises Refused for a command that ``writes`` or when several are present, DeviceNotFound when none is
        (their hint shows ``--device example``, default the registry's first emulated board).
        """
        from tinyhw.connect.discover import pick_default_device
        from tinyhw.transport.devstr import given_device

        spec = given_device(self.device)
        if spec is not None:
            return spec
        return pick_default_device(self.log, writes=writes, example=example)

    def open_transport(self, *, writes: bool = False, example: str = "") -> Transport:
        """Open the chosen device; it is closed when the command ends (``example``: see :meth:`device_spec`)."""
        if self._opened is None:
            from tinyhw.connect import open_device

            def keep(opened: Opened) -> None:
                self._opened = opened

            command = ["tinyhw", *INVOCATION["argv"]]
            self._open_tried = True
            open_device(self.device_spec(writes=writes, example=example), keep, record=self.record, command=command,
                        **({"force": True} if self.force_record else {"force_hint": "--force-record replaces it"}))
            for note in self._opened.notes():
                print(f"note: {note}", file=sys.stderr)
        return self._opened.transport

    @property
    def opened(self) -> Any:
        """What :meth:`open_transport` opened (the transport and its lock), or None."""
        return self._opened

    def finish(self) -> None:
        """Close the device, then report ``--stats`` and uncovered emulator accesses (also after errors). Run as
        the command's context closes, also while its error propagates: a command refused (exit 2) after the
        device opened removes the ``--record`` file it started, so the same command line can be run again."""
        error = sys.exc_info()[1]
        refused = isinstance(error, TinyhwError) and error.exit_code == 2
        opened, self._opened = self._opened, None
        notes: list[str] = []
        stats: dict[str, Any] | None = None
        if opened is not None:
            try:
                stats = opened.transport.stats()
                notes = opened.uncovered()
            finally:
                opened.close()
            from tinyhw.transport.record import discard_recording, finish_note

            if refused and (removed := discard_recording(opened.transport)) is not None:
                print(f"note: the command was refused; its recording {removed} was removed", file=sys.stderr)
            elif (lost := finish_note(opened.transport)) is not None:
                print(f"warning: {lost}", file=sys.stderr)
        elif self.record is not None and not self._open_tried:
            print(f"note: this command opened no device; nothing was recorded to {self.record}", file=sys.stderr)
        if notes:
            shown = notes[:20]
            print(f"note: the emulated board does not model {len(notes)} access(es):", file=sys.stderr)
            for n in shown:
                print(f"  {n}", file=sys.stderr)
            if len(notes) > len(shown):
                print(f"  ... and {len(notes) - len(shown)} more", file=sys.stderr)
        if self.want_stats:
            doc: dict[str, Any] = dict(stats or {
                "usb_transfers": 0, "round_trips": 0, "tlp_reads": 0, "tlp_writes": 0,
                "reg_reads": 0, "reg_writes": 0, "bytes_in": 0, "bytes_out": 0,
            })
            doc["elapsed_s"] = round(time.monotonic() - self.started, 6)
            import json

            print(json.dumps(doc, sort_keys=True), file=sys.stderr)

    # -- output ------------------------------------------------------------------------------------
    def emit(self, doc: Any, human: Callable[[], None]) -> None:
        """Print ``doc`` as JSON with ``--json``, else call ``human()`` to print it for people."""
        if self.json:
            import json

            sys.stdout.write(json.dumps(doc, indent=2, sort_keys=False) + "\n")
            EMITTED["json"] = True
        else:
            human()

    def confirm(self, yes: bool, plan: str) -> None:
        """Show the plan; go on only with --yes or an interactive 'y'. Otherwise refuse (exit 2)."""
        print(plan, file=sys.stderr)
        if yes:
            return
        if sys.stdin.isatty() and sys.stderr.isatty():
            import click

            if click.confirm("go ahead?", default=False, err=True):
                return
            raise Refused("cancelled by the user")
        raise Refused("this command changes state and needs --yes", hint="re-run with --yes after reading the plan")
