"""Linux mmiotrace logs in and out: ``trace import mmiotrace`` writes a log's accesses to the GPU's BARs as a
tinyhw trace file (so ``show`` and ``diff`` work on what amdgpu or nouveau did); :func:`export` writes a tinyhw
trace in the kernel's text layout (for envytools' demmio, or to compare with a kernel capture line by line).

Import: the GPU is the log's PCIDEV function of an AMD or NVIDIA vendor id (or the one named by ``pci``); its
memory resources are the BARs, and an R/W line is kept when its physical address falls inside one, as (BAR,
offset). A log without PCIDEV lines takes each MAP line as one region instead. Widths 1, 2 and 4 are kept as one
register record of that width, width 8 as two dword records. MARK lines become marks, ``Lost N events`` a
DROPPED record, UNKNOWN lines inside a BAR an ERROR record naming the opcode. Config space is not in mmiotrace.

Export: 32-bit BAR reads, writes and polls become R/W lines at the BAR's recorded address (one MAP line per BAR,
map id = BAR index + 1); marks become MARK lines ("TEXT (start)", "TEXT (done)": the import reads these back as
the step's phases); bulk transfers and config accesses, which mmiotrace has no record for, and USB transfers are
left out.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from tinyhw.errors import Refused
from tinyhw.fileio import atomic_write, read_input
from tinyhw.formats import mmiotrace, tracefile
from tinyhw.formats.tracefile import Trace

#: Largest log read (bytes): about 11 million kernel lines.
MAX_LOG_BYTES = 512 << 20
GPU_VENDORS = (0x1002, 0x10DE)


@dataclass
class Imported:
    """What an import wrote: records kept, accesses outside the GPU's BARs, the malformed lines."""

    path: str
    records: int
    outside: int
    problems: list[tuple[int, str]]
    more_problems: int
    device: str

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"path": self.path, "records": self.records, "outside_bars": self.outside, "device": self.device,
                "malformed_lines": [{"line": n, "problem": p} for n, p in self.problems],
                "more_malformed_lines": self.more_problems}


def _device(log: mmiotrace.Log, pci: str | None) -> mmiotrace.PciDev | None:
    if pci is not None:
        want = pci.lower().removeprefix("0000:")
        for d in log.devices:
            if d.location == want:
                return d
        raise Refused(f"the log has no PCIDEV line for {pci}",
                      hint=f"its devices: {', '.join(d.location for d in log.devices) or 'none'}")
    gpus = [d for d in log.devices if d.vendor_id in GPU_VENDORS and any(i not in d.io for i, _, _ in d.resources)]
    if len(gpus) > 1:
        raise Refused(f"the log lists {len(gpus)} gpus ({', '.join(d.location for d in gpus)}): choose one",
                      hint="name it with --pci BB:DD.F")
    if not gpus and log.devices:
        raise Refused("the log's PCIDEV lines list no amd or nvidia gpu", hint="name the device with --pci BB:DD.F")
    return gpus[0] if gpus else None


def _phase(text: str) -> tuple[str, int]:
    """A mark's text and phase code: tinyhw's export writes a step's start and end as "TEXT (start)"/"(done)"."""
    for code, phase in enumerate(tracefile.MARK_PHASES):
        if code and text.endswith(f" ({phase})"):
            return text[: -len(phase) - 3], code
    return text, 0


def convert(log: mmiotrace.Log, pci: str | None = None,
            command: list[str] | None = None) -> tuple[bytes, int, int, str]:
    """(trace file bytes, records, accesses outside the BARs, device) for a parsed log."""
    from tinyhw import __version__

    dev = _device(log, pci)
    if dev is not None:
        bars = [(i, s, n) for i, s, n in dev.resources if i not in dev.io and i < 6]
        ident = {"vendor_id": dev.vendor_id, "device_id": dev.device_id, "revision": 0, "class_code": 0,
                 "subsystem_vendor_id": 0, "subsystem_id": 0, "location": f"mmiotrace {dev.location}"}
        where = f"{dev.vendor_id:04x}:{dev.device_id:04x} at {dev.location}"
    elif log.maps:
        bars = [(k, phys, n) for k, (_, (phys, n)) in enumerate(sorted(log.maps.items())) if k < 0xFF]
        ident = {"vendor_id": 0, "device_id": 0, "revision": 0, "class_code": 0, "subsystem_vendor_id": 0,
                 "subsystem_id": 0, "location": "mmiotrace (regions from MAP lines)"}
        where = "the regions of the MAP lines"
    else:
        raise Refused("the log has neither PCIDEV nor MAP lines: no region to keep accesses of",
                      hint="capture with the tracer enabled before the driver loads (specs: mmiotrace usage)")
    header = {"tinyhw_version": __version__, "command": command or [], "device": "", "transport": "mmiotrace",
              "emulated": False, "identity": ident, "started_wall_ns": time.time_ns(),
              "bars": [{"index": i, "address": s, "size": n, "kind": "memory", "prefetchable": False,
                        "is_64bit": False} for i, s, n in bars],
              "source": {"kind": "mmiotrace", "version": log.version, "lines": log.lines,
                         "malformed_lines": len(log.problems) + log.more_problems},
              "clock": {"wall": "the log's timestamps (us resolution), taken after the access", "virtual": "absent"}}
    chunks = [tracefile.file_start(header)]
    seq = outside = 0

    def add(*args: Any) -> None:
        nonlocal seq
        chunks.append(tracefile.packet(args[0], seq, *args[1:]))
        seq += 1

    for ev in log.events:
        if ev.kind == "MARK":
            lost = mmiotrace.lost_events(ev)
            if lost is not None:
                add(tracefile.DROPPED, ev.ts_ns, None, None, 0, (lost,))
            else:
                text, phase = _phase(ev.text)
                add(tracefile.MARK, ev.ts_ns, None, None, 0, (phase,), text.encode()[:tracefile.TEXT_LIMIT])
            continue
        hit = next(((i, ev.phys - s) for i, s, n in bars if s <= ev.phys < s + n), None)
        if hit is None:
            outside += 1
            continue
        bar, offset = hit
        if ev.kind == "UNKNOWN":
            add(tracefile.ERROR, ev.ts_ns, None, bar, 0, (0,), f"{ev.text} at bar{bar}+0x{offset:x}".encode())
            continue
        op = tracefile.READ32 if ev.kind == "R" else tracefile.WRITE32
        if ev.width == 8:
            add(op, ev.ts_ns, None, bar, 4, (offset, ev.value & 0xFFFFFFFF))
            add(op, ev.ts_ns, None, bar, 4, (offset + 4, ev.value >> 32))
        else:
            add(op, ev.ts_ns, None, bar, ev.width, (offset, ev.value))
    return b"".join(chunks), seq, outside, where


def import_log(log_path: str | os.PathLike[str], out: str | os.PathLike[str], *, pci: str | None = None,
               force: bool = False, command: list[str] | None = None) -> Imported:
    """Read the mmiotrace log at ``log_path`` (bounded) and write the GPU's accesses to a new trace file ``out``
    (written whole or not at all; refused, exit 2, when it exists unless ``force``)."""
    from tinyhw.fileio import check_output_path

    check_output_path(out, force=force, what="trace file")
    text = read_input(log_path, MAX_LOG_BYTES, what="mmiotrace log").decode("utf-8", "replace")
    log = mmiotrace.parse(text)
    data, records, outside, where = convert(log, pci, command)
    target = atomic_write(out, data, overwrite=force)
    return Imported(str(target), records, outside, log.problems, log.more_problems, where)


def export(trace: Trace) -> str:
    """``trace`` as an mmiotrace text log (module docstring)."""
    ident = trace.header.get("identity") or {}
    bars = {b["index"]: b for b in trace.header.get("bars", []) if b.get("kind") == "memory" and b.get("size")}
    dev = mmiotrace.PciDev(0, 0, int(ident.get("vendor_id", 0)), int(ident.get("device_id", 0)),
                    tuple((i, b["address"], b["size"]) for i, b in sorted(bars.items()) if i < 7), driver="tinyhw")
    lines = mmiotrace.write_header(dev)
    t0 = trace.records[0].wall_ns if trace.records else 0
    lines += [mmiotrace.write_map(t0, i + 1, b["address"], b["size"]) for i, b in sorted(bars.items())]
    for rec in trace.records:
        f = rec.fields
        if rec.op in (tracefile.READ32, tracefile.WRITE32, tracefile.POLL) and rec.bar is not None and rec.bar in bars:
            kind = "W" if rec.op == tracefile.WRITE32 else "R"
            lines.append(mmiotrace.write_access(kind, rec.width or 4, rec.wall_ns, rec.bar + 1,
                                         bars[rec.bar]["address"] + f["offset"], f["value"]))
        elif rec.op == tracefile.MARK:
            suffix = "" if f["phase"] == "point" else f" ({f['phase']})"
            lines.append(mmiotrace.write_mark(rec.wall_ns, rec.text.replace("\n", " ") + suffix))
    return "\n".join(lines) + "\n"
