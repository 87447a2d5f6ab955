"""``tinyhw trace``: show, replay, diff, import and export recorded sessions (front end of :mod:`tinyhw.trace`).

A session is recorded with the global ``--record FILE`` of any command that opens a device.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tinyhw.cli.app import EMITTED, App
from tinyhw.errors import OperationFailed


@click.group("trace")
def trace() -> None:
    """Recorded sessions: show them decoded, replay them on a device, diff two, import and export mmiotrace logs.

    Record any command with the global --record FILE (a pcapng file, see docs/trace-format.md).

    \b
    Examples:
      tinyhw --device mock:navi31 --record boot.pcapng am boot --yes --firmware-dir DIR
      tinyhw trace show boot.pcapng --block mp0 --writes
      tinyhw --device mock:navi31,flash=/tmp/fresh.bin trace replay boot.pcapng
      tinyhw trace diff boot.pcapng boot2.pcapng
      tinyhw trace import mmiotrace amdgpu-load.txt -o amdgpu.pcapng
      tinyhw trace export mmiotrace boot.pcapng -o boot.txt
    """


def _no_device(app: App) -> None:
    app.refuse_device("it reads trace files only")
    app.refuse_record()


def _print_header(app: App, doc: dict[str, Any]) -> None:
    h = doc["header"]
    ident = h.get("identity") or {}
    click.echo(f"recording of {' '.join(h.get('command') or []) or '(no command)'}")
    click.echo(f"  device {ident.get('vendor_id', 0):04x}:{ident.get('device_id', 0):04x} at "
               f"{ident.get('location', '?')} over {h.get('transport', '?')}, tinyhw {h.get('tinyhw_version', '?')}; "
               f"{doc['records']} records, {doc['shown']} shown")
    if doc["truncated"]:
        click.echo(f"  note: the file is cut short; read up to its last complete record ({doc['truncated']})")
    if doc["dropped"]:
        click.echo(f"  note: the recorder lost {doc['dropped']} records")


@trace.command("show")
@click.argument("file", type=click.Path())
@click.option("--block", metavar="BLOCK", help="Only registers of this block (e.g. smuio).")
@click.option("--register", metavar="NAME", help="Only this register (block.REGISTER or REGISTER; globs allowed).")
@click.option("--writes", is_flag=True, help="Only writes.")
@click.option("--usb", is_flag=True, help="Also the bridge's USB transfers under the register accesses.")
@click.pass_obj
def show_cmd(app: App, file: str, block: str | None, register: str | None, writes: bool, usb: bool) -> None:
    """Show a recording's accesses decoded by register (fields that changed), grouped by mark.

    Reads FILE only. Accesses to the register BAR are named from the register database of the
    recorded device; --json gives every record with its fields.

    \b
    Examples:
      tinyhw trace show boot.pcapng
      tinyhw trace show boot.pcapng --block smuio --writes
      tinyhw --json trace show boot.pcapng --register mp0.MP0_SMN_C2PMSG_64
    """
    from tinyhw.trace import decode, load_bytes
    from tinyhw.trace.show import Filter, Streamed, write_json

    _no_device(app)
    streamed = Streamed(load_bytes(file), Filter(block, register, writes, usb))   # refuses a damaged file here
    if app.json:   # streamed: records are written as they are read, never all held at once
        write_json(streamed, sys.stdout.write)
        EMITTED["json"] = True
        return
    _print_header(app, streamed.head())
    decoder = streamed.decoder
    path: list[str] | None = None
    for p, rec, rdoc in streamed.kept():
        if p != path:
            click.echo(f"== {' > '.join(p) or decode.NO_MARK}")
            path = p
        line = f"  {rec.index:>7} {decode.brief(rec, decoder)}"
        changed = rdoc.get("fields")
        if changed:
            parts = [f"{k}={v[1]:#x}" if isinstance(v, list) else f"{k}={v:#x}" for k, v in changed.items()]
            line += "  [" + " ".join(parts[:8]) + (" ..." if len(parts) > 8 else "") + "]"
        click.echo(line)


@trace.command("replay")
@click.argument("file", type=click.Path())
@click.option("--tolerate", "tolerate", multiple=True, metavar="REGISTERS",
              help="block.REGISTER names (comma-separated, repeatable) whose reads may differ.")
@click.pass_obj
def replay_cmd(app: App, file: str, tolerate: tuple[str, ...]) -> None:
    """Replay a recording's writes on --device and check every read against the recorded value.

    Writes to the device: every recorded write is issued again. Stops at the first divergence and
    prints the access, its mark, the expected and actual values and the register (exit 1).
    On an emulated board the recorded virtual time is reproduced, so polled registers read alike.

    \b
    Examples:
      tinyhw --device mock:navi31,flash=/tmp/fresh.bin trace replay boot.pcapng
      tinyhw --device mock:navi31 trace replay boot.pcapng --tolerate smuio.SMUIO_MCM_CONFIG
      tinyhw --device mock:navi31 --record again.pcapng trace replay boot.pcapng   # the replay, recorded
    """
    from tinyhw.trace import load, replay

    tr = load(file)
    names = [n.strip() for item in tolerate for n in item.split(",") if n.strip()]
    replay.tolerated_offsets(tr, names)  # an unknown name is refused before the device is opened
    transport = app.open_transport(writes=True)
    result = replay.replay(tr, transport, names)
    doc = result.as_dict()
    if result.truncated:
        app.log(f"note: the recording is cut short; replayed up to its last complete record ({result.truncated})")

    def human() -> None:
        click.echo(f"replayed {result.replayed} accesses, checked {result.reads_checked} reads"
                   + (f", tolerated {result.tolerated}" if result.tolerated else "")
                   + (f", skipped {result.skipped} usb transfers and queries" if result.skipped else ""))
        if result.stopped_at_error:
            click.echo(f"the recording ends in an error, replay stopped there: {result.stopped_at_error}")
        d = result.divergence
        if d is None:
            click.echo("no divergence")
            return
        exp = d.expected.hex() if isinstance(d.expected, bytes) else f"0x{d.expected:08x}"
        act = d.actual.hex() if isinstance(d.actual, bytes) else f"0x{d.actual:08x}"
        from tinyhw.trace.decode import Decoder, brief

        click.echo(f"divergence at record {d.record.index} ({brief(d.record, Decoder(tr.header))})")
        click.echo(f"  mark:     {d.mark}")
        click.echo(f"  expected: {exp}")
        click.echo(f"  actual:   {act}")
        if d.register:
            click.echo(f"  register: {d.register}"
                       + (" fields " + " ".join(f"{k} {a:#x}->{b:#x}" for k, (a, b) in d.fields.items())
                          if d.fields else ""))

    app.emit(doc, human)
    if result.divergence is not None:
        rec = result.divergence.record
        raise OperationFailed(f"replay diverged at record {rec.index} ({rec.name}) under {result.divergence.mark!r}")


@trace.command("diff")
@click.argument("a", type=click.Path())
@click.argument("b", type=click.Path())
@click.pass_obj
def diff_cmd(app: App, a: str, b: str) -> None:
    """Compare two recordings aligned by their marks: order, registers touched, values written.

    Reads both files only. Each difference is one row: the mark, what differs, and each side.
    Exit 0 when the sessions are alike, 1 when they differ (as firmware diff and flash verify),
    2 when either file cannot be read.

    \b
    Examples:
      tinyhw trace diff boot1.pcapng boot2.pcapng
      tinyhw --json trace diff tinyhw-boot.pcapng amdgpu.pcapng
    """
    from tinyhw.trace import diff, load

    _no_device(app)
    doc = diff.diff(load(a), load(b))

    def human() -> None:
        from rich.table import Table

        app.out.print(f"{doc['aligned_marks']} marks aligned, {doc['differences']} differences")
        if not doc["rows"]:
            return
        t = Table()
        for col in ("mark", "difference", "where", "a", "b"):
            t.add_column(col)
        for r in doc["rows"]:
            t.add_row(r["mark"], r["kind"], r["what"], r["a"], r["b"])
        app.out.print(t)

    app.emit(doc, human)
    if doc["differences"]:
        sys.exit(1)


@trace.group("import")
def import_group() -> None:
    """Convert logs of other tools into tinyhw trace files.

    \b
    Example:
      tinyhw trace import mmiotrace amdgpu-load.txt -o amdgpu.pcapng
    """


@import_group.command("mmiotrace")
@click.argument("log", type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(), help="The trace file to write.")
@click.option("--pci", metavar="BB:DD.F", help="The GPU, when the log lists several.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.pass_obj
def import_mmiotrace(app: App, log: str, output: str, pci: str | None, force: bool) -> None:
    """Import a Linux mmiotrace text log: the accesses inside the GPU's BARs, as a trace file.

    Reads LOG (captured from /sys/kernel/tracing/trace_pipe with the mmiotrace tracer) and writes
    OUTPUT whole or not at all. Malformed lines are reported with their line number and skipped.

    \b
    Example:
      tinyhw trace import mmiotrace amdgpu-load.txt -o amdgpu.pcapng
    """
    from tinyhw.cli.app import INVOCATION
    from tinyhw.trace.mmio import import_log

    _no_device(app)
    result = import_log(log, output, pci=pci, force=force, command=["tinyhw", *INVOCATION["argv"]])
    for n, problem in result.problems[:20]:
        click.echo(f"warning: {log}:{n}: {problem}", err=True)
    extra = len(result.problems) - 20 + result.more_problems
    if extra > 0:
        click.echo(f"warning: ... and {extra} more malformed lines", err=True)
    app.emit(result.as_dict(), lambda: click.echo(
        f"wrote {result.records} records of {result.device} to {result.path}"
        + (f" ({result.outside} accesses outside its bars left out)" if result.outside else "")))


@trace.group("export")
def export_group() -> None:
    """Write tinyhw trace files in other tools' formats.

    \b
    Example:
      tinyhw trace export mmiotrace boot.pcapng -o boot.txt
    """


@export_group.command("mmiotrace")
@click.argument("file", type=click.Path())
@click.option("-o", "--output", required=True, type=click.Path(), help="The text log to write.")
@click.option("--force", is_flag=True, help="Overwrite an existing output file.")
@click.pass_obj
def export_mmiotrace(app: App, file: str, output: str, force: bool) -> None:
    """Write a recording as a Linux mmiotrace text log (R/W of 32-bit BAR accesses, marks).

    \b
    Example:
      tinyhw trace export mmiotrace boot.pcapng -o boot-mmiotrace.txt
    """
    from tinyhw.fileio import atomic_write, check_output_path
    from tinyhw.trace import load
    from tinyhw.trace.mmio import export

    _no_device(app)
    check_output_path(output, force=force, what="mmiotrace log")
    text = export(load(file))
    target = atomic_write(output, text.encode(), overwrite=force)
    app.emit({"path": str(target), "lines": text.count("\n")}, lambda: click.echo(
        f"wrote {text.count(chr(10))} lines to {target}"))
