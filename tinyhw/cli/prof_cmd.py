"""``tinyhw prof``: read tinygrad's AMD SQ thread trace and performance-counter captures offline.

specs/sqtt-pmc.md §14. Self-contained click group (``tinyhw.cli.prof_cmd:prof``); reads files
only, except ``prof capture`` (:mod:`tinyhw.kernels.capture`), which opens the global --device.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from tinyhw.cli.app import App
from tinyhw.cli.numbers import Number

FILE_HELP = "a tinygrad profile pickle (profile.pkl) or a capture directory with capture.json"


def _load(app: App, file: str) -> Any:
    from tinyhw.prof import load_capture

    app.refuse_device("it decodes capture files only")
    return load_capture(file)


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


@click.group()
def prof() -> None:
    """Decode AMD SQ thread traces (SQTT) and performance counters (PMC) captured by tinygrad
    on RDNA3 (gfx11), RDNA4 (gfx12) and CDNA (gfx9) GPUs.

    FILE is a tinygrad profile pickle (loaded without tinygrad; nothing in it is executed, foreign
    objects are refused with exit 2; at most 1 GiB) or a directory of plain files (capture.json,
    sqtt_*.bin, pmc_*.bin, program_*.elf). Reads files only; no device is opened, except by
    `prof capture`, which takes such a capture on an AMD board tinyhw booted.

    \b
    Examples:
      tinyhw prof summary /tmp/profile.pkl.$USER
      tinyhw --json prof summary tests/data/sqtt/gfx1100/profile_gemm_run_0
      tinyhw prof insts profile.pkl --se 1 --wave 0
      tinyhw prof export profile.pkl -o trace.json
      tinyhw --device mock:navi31 prof capture pattern -o /tmp/cap
    """


@prof.command("summary")
@click.argument("file", type=click.Path(path_type=str))
@click.pass_obj
def summary_cmd(app: App, file: str) -> None:
    """Device, kernel dispatches, per-SE packet/wave counts and time spans, PMC counters.

    Per shader engine: packets, waves (WAVESTART/WAVEEND), first and last time in shader cycles,
    whether instruction tracing was on, counts by packet type. PMC: sum, max and records per
    counter, VALU/SALU utilisation and L2 hit rate where the counters were captured.

    \b
    Examples:
      tinyhw prof summary profile.pkl
      tinyhw --json prof summary tests/data/sqtt/gfx950/profile_gemm_run_0
    """
    from tinyhw.prof.analyze import summary_doc

    doc = summary_doc(_load(app, file))
    app.emit(doc, lambda: _print_summary(doc))


def _print_summary(doc: dict) -> None:
    d = doc["device"]
    _out(f"device: {d['target']} ({d['arch']}), {d['shader_engines']} shader engines, {d['cus']} CUs, "
         f"{d['simds']} SIMDs, {d['xccs']} XCC(s)")
    if doc["other_devices"]:
        _out(f"note: the profile also traced {', '.join(doc['other_devices'])}; only the first device is shown")
    for k in doc["kernels"]:
        _out(f"\nkernel {k['index']}: {k['name']} (kern {k['kern']}, dispatch {k['exec_tag']})")
        if k["sqtt"]:
            _out(f"  {'SE':>3} {'itrace':>6} {'packets':>8} {'waves':>6} {'ends':>5} {'first':>10} {'last':>10} "
                 f"{'span':>10}  top packet types")
            for s in k["sqtt"]:
                top = ", ".join(f"{n} {c}" for n, c in list(s["by_type"].items())[:5])
                _out(f"  {s['se']:>3} {'on' if s['itrace'] else 'off':>6} {s['packets']:>8} {s['waves']:>6} "
                     f"{s['wave_ends']:>5} {s['first_time'] if s['first_time'] is not None else '-':>10} "
                     f"{s['last_time'] if s['last_time'] is not None else '-':>10} "
                     f"{s['span'] if s['span'] is not None else '-':>10}  {top}")
        if k["pmc"]:
            _out(f"  {'counter':<24} {'sum':>14} {'max':>12} {'records':>8}")
            for name, c in k["pmc"].items():
                _out(f"  {name:<24} {c['sum']:>14} {c['max']:>12} {c['records']:>8}")
        for key, label in (("valu_util_pct", "VALU utilisation"), ("salu_util_pct", "SALU utilisation"),
                           ("l2_hit_pct", "L2 hit rate")):
            if key in k["derived"]:
                _out(f"  {label}: {k['derived'][key]:.2f} %")


@prof.command("packets")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--kernel", "-k", metavar="K", help="Kernel name or dispatch index (as in summary).")
@click.option("--se", "-s", type=Number(), metavar="S", help="Only this shader engine.")
@click.option("--all", "show_all", is_flag=True, help="Also show timing and NOP packets.")
@click.option("--limit", "-n", type=Number(), metavar="N", help="At most N packets per stream.")
@click.pass_obj
def packets_cmd(app: App, file: str, kernel: str | None, se: int | None, show_all: bool, limit: int | None) -> None:
    """One line per packet: time (shader cycles), type, fields; timing/NOP packets only with --all.

    \b
    Examples:
      tinyhw prof packets profile.pkl --se 1
      tinyhw prof packets capture_dir --kernel r_32_32_16_2 --se 0 --all -n 200
    """
    from tinyhw.prof.analyze import packets_doc

    doc = packets_doc(_load(app, file), kernel, se, show_all, limit)
    app.emit(doc, lambda: _print_packets(doc))


def _print_packets(doc: dict) -> None:
    for s in doc["streams"]:
        _out(f"== {s['kernel']} (kern {s['kern']}, dispatch {s['exec_tag']}) SE {s['se']}: "
             f"{s['shown']} of {s['packets']} packets shown; {s['stop']}")
        for r in s["rows"]:
            fields = " ".join(f"{k}={v}" for k, v in r["fields"].items())
            _out(f"{r['time']:>10} {r['type']:<24} {fields}")


@prof.command("waves")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--kernel", "-k", metavar="K", help="Kernel name or dispatch index (as in summary).")
@click.option("--se", "-s", type=Number(), metavar="S", help="Only this shader engine.")
@click.pass_obj
def waves_cmd(app: App, file: str, kernel: str | None, se: int | None) -> None:
    """Per-wave timeline: SE, CU, SIMD, wave slot, start, end and cycles; marks instruction-traced waves.

    The index column is what `prof insts --wave` takes.

    \b
    Examples:
      tinyhw prof waves profile.pkl
      tinyhw --json prof waves capture_dir --se 1
    """
    from tinyhw.prof.analyze import waves_doc

    doc = waves_doc(_load(app, file), kernel, se)
    app.emit(doc, lambda: _print_waves(doc))


def _print_waves(doc: dict) -> None:
    _out(f"{'kernel':<20} {'SE':>3} {'index':>5} {'CU':>3} {'SIMD':>4} {'wave':>4} {'start':>10} {'end':>10} "
         f"{'cycles':>8} traced")
    for w in doc["waves"]:
        _out(f"{w['kernel'][:20]:<20} {w['se']:>3} {w['index']:>5} {w['cu']:>3} {w['simd']:>4} {w['wave']:>4} "
             f"{w['start']:>10} {w['end'] if w['end'] is not None else '-':>10} "
             f"{w['cycles'] if w['cycles'] is not None else '-':>8} {'yes' if w['traced'] else ''}")
    _out(f"{len(doc['waves'])} waves")


@prof.command("insts")
@click.argument("file", type=click.Path(path_type=str))
@click.option("--kernel", "-k", metavar="K", help="Kernel name or dispatch index (default: the first).")
@click.option("--se", "-s", type=Number(), required=True, metavar="S", help="Shader engine.")
@click.option("--wave", "-w", type=Number(), required=True, metavar="W",
              help="Wave index on that SE (see `prof waves`).")
@click.option("--by-pc", is_flag=True, help="Totals per instruction (PC) instead of one row per execution.")
@click.pass_obj
def insts_cmd(app: App, file: str, kernel: str | None, se: int, wave: int, by_pc: bool) -> None:
    """Instruction table of one traced wave: Time | Stall | Dur | Offset | Instruction | Category | Type.

    Time is the cycle the wave first attempted the instruction, Stall the cycles it could not issue
    it, Duration stall + execution (rocprof's definitions; the attempt cycle is modelled from the
    packets, see docs/prof-timing.md). Waits are charged to the waiting instruction (s_waitcnt,
    s_wait_loadcnt, ...). Also the wave's time executing / waiting on a counter / stalled / idle,
    which add up to its lifetime, and the other SIMD's memory ops seen in the same stream.
    PC and instruction come from walking the code object's .text (instruction lengths decoded by
    tinyhw for gfx11/gfx12/gfx9; mnemonics for program-control instructions, others as encoding +
    opcode, or full text from an llvm-objdump that knows the target). What is unavailable is said,
    not guessed. --json always holds rows, states, timeline, per_pc and other_simd.

    \b
    Examples:
      tinyhw prof insts profile.pkl --se 1 --wave 0
      tinyhw prof insts profile.pkl --se 0 --wave 0 --by-pc
      tinyhw --json prof insts tests/data/sqtt/gfx1200/profile_plus_run_0 --se 1 --wave 0
    """
    from tinyhw.prof.insts import insts_doc

    doc = insts_doc(_load(app, file), kernel, se, wave)
    app.emit(doc, lambda: _print_insts(app, doc, by_pc))


def _dash(v: Any) -> str:
    return "-" if v is None else str(v)


def _off(v: int | None) -> str:
    return "-" if v is None else f"+0x{v:x}"


def _col(name: str) -> dict[str, Any]:
    """Column options: only the instruction text wraps (folding long words), the rest stay on one line."""
    if name == "Instruction":
        return {"overflow": "fold", "min_width": 16}
    return {"no_wrap": True}


def _print_insts(app: App, doc: dict, by_pc: bool) -> None:
    from rich import box
    from rich.table import Table

    _out(f"{doc['kernel']} SE:{doc['se']} CU:{doc['cu']} SIMD:{doc['simd']} W:{doc['wave']} "
         f"start {doc['start']} end {_dash(doc['end'])} cycles {_dash(doc['cycles'])}")
    for n in doc["notes"]:
        _out(f"note: {n}")
    if doc.get("disassembler"):
        _out(f"note: {doc['disassembler']}")
    if doc["rows"] and doc["rows"][0]["pc"]:
        _out(f"offsets are from the first instruction, PC {doc['rows'][0]['pc']} (full PCs in --json)")
    if by_pc:
        t = Table(title="per instruction (PC)", box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("Offset", "Instruction", "Category", "Hits", "Dur total", "Dur mean", "Stall total"):
            t.add_column(col, justify="left" if col in ("Offset", "Instruction", "Category") else "right",
                         **_col(col))
        for e in doc["per_pc"]:
            t.add_row(_off(e["offset"]), _dash(e["instruction"]), e["category"], str(e["hits"]),
                      str(e["total_duration"]), f"{e['mean_duration']:g}", str(e["total_stall"]))
    else:
        t = Table(box=box.SIMPLE_HEAD, pad_edge=False)
        for col in ("Time", "Stall", "Dur", "Offset", "Instruction", "Category", "Type"):
            t.add_column(col, justify="right" if col in ("Time", "Stall", "Dur") else "left", **_col(col))
        for r in doc["rows"]:
            stall = str(r["stall"]) if not r["stall"] else f"[bold]{r['stall']}[/bold]"
            t.add_row(str(r["time"]), stall, str(r["duration"]), _off(r["offset"]), _dash(r["instruction"]),
                      r["category"], r["type"])
    app.out.print(t)
    st = doc["states"]
    life = doc["lifetime"]
    _out("states: " + ", ".join(f"{k} {v}" for k, v in st.items())
         + (f" (sum {sum(st.values())} = lifetime {life})" if life is not None else " (the wave has no end)"))
    if doc["other_simd"]:
        ops = ", ".join(f"{o['type']}@{o['time']} w{o['wave']}" for o in doc["other_simd"][:8])
        more = f" and {len(doc['other_simd']) - 8} more" if len(doc["other_simd"]) > 8 else ""
        _out(f"other SIMD ops in this stream: {len(doc['other_simd'])} ({ops}{more})")


@prof.command("export")
@click.argument("file", type=click.Path(path_type=str))
@click.option("-o", "--output", required=True, metavar="OUT", help="Trace file to write (JSON).")
@click.option("--kernel", "-k", metavar="K", help="Only this kernel (name or dispatch index).")
@click.option("--force", is_flag=True, help="Replace OUT if it exists.")
@click.pass_obj
def export_cmd(app: App, file: str, output: str, kernel: str | None, force: bool) -> None:
    """Write waves (and traced instructions) as Chrome/Perfetto trace-event JSON.

    One track per SE/CU/SIMD/wave, instructions as nested slices; 1 µs in the viewer = 1 shader
    cycle. Writes OUT atomically (temp file + rename in the same directory); refuses an existing OUT
    without --force, and directories, device nodes, FIFOs and an empty path always (exit 2).

    \b
    Examples:
      tinyhw prof export profile.pkl -o trace.json
      tinyhw prof export capture_dir -o trace.json --force   # open in ui.perfetto.dev
    """
    from tinyhw.fileio import check_output_path
    from tinyhw.prof.export import dumps, export_doc, write_output

    check_output_path(output, force=force, what="trace")  # before the capture is read and decoded
    doc = export_doc(_load(app, file), kernel)
    write_output(output, dumps(doc), force=force)
    info = {"output": output, "events": len(doc["traceEvents"]), "slices": doc["otherData"]["slices"]}
    app.emit(info, lambda: _out(f"wrote {output}: {info['slices']} slices ({info['events']} events)"))


@prof.command("capture")
@click.argument("probe")
@click.option("-o", "--output", required=True, metavar="DIR", help="Capture directory to write (new or empty).")
@click.option("--n", "n", type=Number(), metavar="N", help="Elements (as `kernels run --n`).")
@click.option("--buffer-kib", type=Number(), metavar="KIB", help="Trace buffer per shader engine (default 4096).")
@click.option("--simd", type=Number(), default=0, show_default=True, metavar="S",
              help="The SIMD of WGP 0 (SA 0) whose waves are traced at instruction level.")
@click.option("--counters", metavar="LIST",
              help="Also sample performance counters for the dispatch: comma-separated names, or `default`.")
@click.option("--timeout", type=float, default=10.0, show_default=True, help="Seconds to wait for the dispatch.")
@click.pass_obj
def capture_cmd(app: App, probe: str, output: str, n: int | None, buffer_kib: int | None, simd: int,
                counters: str | None, timeout: float) -> None:
    """Run probe PROBE once under the SQ thread trace on an AMD board `am boot` brought up, and write
    DIR in the plain-file form the other `prof` commands read (capture.json, one sqtt_*.bin per shader
    engine, the code object).

    Needs the global --device (mock:navi31, mock:navi31-usb, usb, pci:, vfio:). Programs the per-SE
    trace buffers in VRAM, instruction tracing on WGP 0 / SA 0 / SIMD --simd of SEs 0 and 1, runs
    the probe's committed gfx1100 code object, stops the trace and copies it out; --counters samples
    SQ/GRBM performance counters of the same dispatch (SQ_WAVES, SQ_INSTS_VALU, SQ_INSTS_SALU,
    SQ_WAVE_CYCLES, SQ_BUSY_CYCLES, SQC_LDS_*, GRBM_GUI_ACTIVE; `default`: the first four and
    GRBM_GUI_ACTIVE). Trace times are
    shader cycles: modelled on an emulated board, measured on hardware. Refuses (exit 2) before the
    device is touched: an unknown probe, DIR existing and not empty (or not a directory).

    \b
    Examples:
      tinyhw --device mock:navi31 prof capture pattern -o /tmp/cap
      tinyhw --device mock:navi31 prof capture fma -o /tmp/cap2 --counters default
      tinyhw prof summary /tmp/cap && tinyhw prof insts /tmp/cap --se 0 --wave 0
    """
    from tinyhw.errors import Refused
    from tinyhw.kernels.capture import plan_capture, run_capture
    from tinyhw.kernels.run import amd_mock_boards, is_amd_device

    if app.device is None:
        raise Refused("prof capture needs a device", hint="give the global --device (e.g. --device mock:navi31)")
    if not is_amd_device(app.device):
        app.refuse_device(f"it captures on an AMD board only ({', '.join(amd_mock_boards())}, their -usb forms, usb, "
                          "pci:, vfio:)",
                          hint="name an AMD board that tinyhw am boot brought up, e.g. --device mock:navi31")
    if not 0 < timeout <= 3600:
        raise Refused(f"--timeout {timeout:g}: more than 0 and at most 3600 seconds")
    plan = plan_capture(probe, output, n=n, buffer_kib=buffer_kib, simd=simd, counters=counters)  # before opening
    doc = run_capture(plan, app.open_transport(writes=True), timeout=timeout)

    def human() -> None:
        verdict = "pass" if doc["check"]["ok"] else "FAIL"
        _out(f"captured {doc['probe']} ({doc['kernel']}, {doc['n']} elements) on {doc['device']} into {doc['out']}")
        _out(f"check: {verdict}: {doc['check']['detail']}")
        for s in doc["shader_engines"]:
            _out(f"  SE {s['se']}: {s['bytes']} bytes{' (itrace)' if s['itrace'] else ''}"
                 f"{'  OVERFLOW: the buffer filled, raise --buffer-kib' if s['overflow'] else ''}")
        _out(f"trace times: shader cycles, {doc['cycles']}")
        if doc["counters"]:
            _out(f"counters: {', '.join(doc['counters'])} (see `tinyhw prof summary {doc['out']}`)")

    app.emit(doc, human)
    if not doc["check"]["ok"]:
        sys.exit(1)
