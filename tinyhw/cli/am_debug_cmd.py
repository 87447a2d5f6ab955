"""``tinyhw am status|rings|waves|hang-report``: see inside a running or hung AMD GPU (front end of the boot views).

The work is :mod:`tinyhw.boot.amd.gpustatus`, :mod:`tinyhw.boot.amd.rings`, :mod:`tinyhw.boot.amd.waves` and
:mod:`tinyhw.boot.amd.hangreport`; this module parses the options and formats the documents. The views write only
selector registers (GRBM_GFX_CNTL, GRBM_GFX_INDEX, SQ_IND_INDEX) and, with ``--halt``, SQ_CMD; so they need a
named ``--device``, like every command that writes.
"""

from __future__ import annotations

from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import Number


def _gpu(app: App) -> Any:
    from tinyhw.boot.amd.gpustatus import open_gpu

    return open_gpu(app.open_transport(writes=True), warn=lambda line: click.echo(line, err=True))


@click.command("status")
@click.pass_obj
def status_cmd(app: App) -> None:
    """Decode the GPU's busy and stall registers by field name; busy ones highlighted.

    GRBM_STATUS/STATUS2/STATUS3, GRBM_STATUS_SE0..3, CP_STAT, CP_CPF_*, the MEC's CP_CPC_* status,
    SDMA0 status and the compute queue's HQD registers (selected through GRBM_GFX_CNTL, put back to 0
    afterwards). Reads only, besides that selector. On a board no tinyhw boot brought up the verdict says so
    (JSON: "booted": false); the registers are read all the same.

    \b
    Example:
      tinyhw --device mock:navi31 am status
      tinyhw --device mock:navi31 --json am status
    """
    from tinyhw.boot.amd import gpustatus

    doc = gpustatus.read_status(_gpu(app))
    app.emit(doc, lambda: _show_status(app, doc))


def _boot_note(app: App, doc: dict[str, Any]) -> None:
    """The view's first line on a board no tinyhw boot brought up (the views still read it)."""
    if doc.get("boot_note"):
        app.out.print(f"[yellow]board:[/yellow] {doc['boot_note']}")


def _fields(r: dict[str, Any]) -> str:
    shown = []
    for name, value in r["fields"].items():
        if name in r["flagged"]:
            shown.append(f"[bold red]{name}={value:#x}[/bold red]")
        elif value:
            shown.append(f"{name}={value:#x}")
    return " ".join(shown) or "[dim]0[/dim]"


def _show_status(app: App, doc: dict[str, Any]) -> None:
    out = app.out
    out.print(f"[bold]{doc['verdict']}[/bold]")
    for group, regs in doc["groups"].items():
        for r in regs:
            out.print(f"{group:6} {r['name']:<32} 0x{r['value']:08x}  {_fields(r)}", highlight=False)
    q = doc.get("queue")
    if q:
        out.print(f"queue me{q['me']} pipe{q['pipe']} queue{q['queue']}: {'active' if q['active'] else 'inactive'}, "
                  f"rptr 0x{q['rptr']:x} wptr 0x{q['wptr']:x} ({q['pending_dwords']} dwords pending)")
        for r in q["registers"]:
            out.print(f"       {r['name']:<32} 0x{r['value']:08x}  {_fields(r)}", highlight=False)
    for p in doc["problems"]:
        out.print(f"[yellow]problem:[/yellow] {p}")


@click.command("rings")
@click.option("--ring", "ring", type=click.Choice(["compute", "sdma0"]), default="compute", show_default=True,
              help="Which ring: the compute queue tinyhw creates (MEC1 pipe 0 queue 0) or SDMA0 queue 0.")
@click.option("--last", type=Number(maximum=256), default=16, show_default=True, metavar="N",
              help="Also show the last N packets before the read pointer (0 .. 256).")
@click.pass_obj
def rings_cmd(app: App, ring: str, last: int) -> None:
    """Decode the packets of a ring: those between the read and write pointer (not yet consumed) and the
    last N before the read pointer; PM4 opcode names and fields, SDMA packets by name; the compute
    ring's indirect buffers followed (two levels, 64 Ki dwords each).

    Reads the ring through the page tables (compute) or VRAM (sdma0); writes only GRBM_GFX_CNTL. On a board no
    tinyhw boot brought up the first line says so (JSON: "booted": false).

    \b
    Example:
      tinyhw --device mock:navi31 am rings --ring compute --last 8
    """
    from tinyhw.boot.amd import hangreport, rings

    doc = rings.read_ring(_gpu(app), ring, last=last)

    def show() -> None:
        _boot_note(app, doc)
        app.out.print(f"[bold]ring {doc['ring']}[/bold] at 0x{doc['base']:x} ({doc['address_space']}), "
                      f"{doc['size_dwords']} dwords, {'enabled' if doc['active'] else 'not active'}: "
                      f"rptr 0x{doc['rptr']:x} wptr 0x{doc['wptr']:x}, {doc['pending_dwords']} dwords pending")
        for line in hangreport.ring_lines(doc, indent=""):
            app.out.print(line, highlight=False, markup=False)

    app.emit({k: v for k, v in doc.items()}, show)


@click.command("waves")
@click.option("--halt", is_flag=True, help="Halt every wave (SQ_CMD) while they are read; resumed on exit, "
                                           "also after an error or Ctrl-C.")
@click.option("--sgprs", type=Number(maximum=106), default=106, show_default=True, metavar="N",
              help="SGPRs to read per wave (0 .. 106).")
@click.option("--vgprs", type=Number(maximum=256), default=4, show_default=True, metavar="N",
              help="VGPRs to read per wave, every lane (0 .. 256).")
@click.pass_obj
def waves_cmd(app: App, halt: bool, sgprs: int, vgprs: int) -> None:
    """List the waves resident on the GPU: status, PC and the instruction there, EXEC, HW_ID1, SGPRs, VGPRs.

    Scans every wave slot's SQ_WAVE_STATUS through GRBM_GFX_INDEX and SQ_IND_INDEX/DATA. Without --halt
    the waves keep running while they are read, so a wave's registers may come from different moments. On a
    board no tinyhw boot brought up the first line says so (JSON: "booted": false).

    \b
    Example:
      tinyhw --device mock:navi31 am waves --halt --vgprs 2
    """
    from tinyhw.boot.amd import waves

    gpu = _gpu(app)
    if halt:
        with waves.halted(gpu):
            doc = waves.scan(gpu, sgprs=sgprs, vgprs=vgprs)
    else:
        doc = waves.scan(gpu, sgprs=sgprs, vgprs=vgprs)
    doc["halted_while_read"] = halt
    app.emit(doc, lambda: _show_waves(app, doc))


def _show_waves(app: App, doc: dict[str, Any]) -> None:
    from tinyhw.boot.amd.hangreport import wave_line

    out = app.out
    _boot_note(app, doc)
    out.print(f"{len(doc['waves'])} wave(s) resident ({doc['slots_scanned']} slots scanned"
              f"{', halted while read' if doc['halted_while_read'] else ''})")
    for w in doc["waves"]:
        out.print(wave_line(w), highlight=False, markup=False)
        sg = w["sgprs"]
        for i in range(0, len(sg), 8):
            out.print("    " + " ".join(f"s{i + j}=0x{v:x}" for j, v in enumerate(sg[i:i + 8])), highlight=False)
        for lane, values in enumerate(w.get("vgprs", [])):
            out.print(f"    lane {lane:2}: " + " ".join(f"v{j}=0x{v:x}" for j, v in enumerate(values)),
                      highlight=False)


@click.command("hang-report")
@click.option("-o", "--output", required=True, metavar="FILE", help="The report file to write (JSON).")
@click.option("--force", is_flag=True, help="Replace FILE when it exists (a regular file only).")
@click.option("--last", type=Number(maximum=256), default=16, show_default=True, metavar="N",
              help="Packets before each ring's read pointer to include.")
@click.option("--no-halt", is_flag=True, help="Read the waves without halting them.")
@click.pass_obj
def hang_report_cmd(app: App, output: str, force: bool, last: int, no_halt: bool) -> None:
    """Write one file to attach to a bug report: status, both rings, the waves (halted while read), the board
    state and this session's marks, as JSON with the readable text form inside (key "text").

    The file is checked before the device is opened (never a device node, FIFO or directory; an existing
    file only with --force) and written atomically.

    \b
    Example:
      tinyhw --device mock:navi31 am hang-report -o hang.json
    """
    from tinyhw.boot.amd import hangreport
    from tinyhw.fileio import atomic_write, check_output_path

    target = check_output_path(output, force=force, what="hang report")
    marks = [f"tinyhw am hang-report on {app.device_spec(writes=True)}"]
    gpu = _gpu(app)
    doc = hangreport.collect(gpu, marks=marks, last=last, halt=not no_halt)
    doc["text"] = hangreport.text(doc).splitlines()
    atomic_write(target, hangreport.to_json(doc))
    summary = {"output": str(target), "waves": len(doc.get("waves", {}).get("waves", [])),
               "verdict": doc.get("status", {}).get("verdict"), "problems": doc["problems"]}
    app.emit(summary, lambda: app.out.print("\n".join(doc["text"]) + f"\nwritten to {target}", highlight=False,
                                            markup=False))


COMMANDS = (status_cmd, rings_cmd, waves_cmd, hang_report_cmd)
