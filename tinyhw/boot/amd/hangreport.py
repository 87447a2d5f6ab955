"""One document a user attaches to a bug report when the GPU hangs: status, rings, waves, recent marks.

Composes :mod:`tinyhw.boot.amd.gpustatus`, :mod:`tinyhw.boot.amd.rings` and :mod:`tinyhw.boot.amd.waves` (halting the
waves
while they are read, then resuming them), plus the board state of :mod:`tinyhw.boot.amd.state` and the recent marks
the caller hands in (:class:`MarkLog`: the boot steps and notes this session saw; there is no trace recorder to
take them from yet) and a line on the board state. A part
that cannot be read becomes a ``problem`` of the report instead of losing the rest. :func:`text` renders the
same document for people.
"""

from __future__ import annotations

import json
from collections import deque
from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd import gpustatus, rings, waves
from tinyhw.boot.amd.state import read_state
from tinyhw.errors import TinyhwError

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.transport.clock import Clock

VERSION = 1
MAX_MARKS = 256


class MarkLog:
    """The recent marks of a session, for the report: pass it as ``on_step`` to :func:`tinyhw.boot.amd.sequence.boot`
    (it takes the same ``(name, phase, detail)`` calls) and add lines with :meth:`note`; the last
    :data:`MAX_MARKS` are kept, each with the transport clock's time."""

    def __init__(self, clock: Clock | None = None) -> None:
        self.clock = clock
        self.lines: deque[str] = deque(maxlen=MAX_MARKS)

    def _stamp(self) -> str:
        return f"{self.clock.now():12.6f} " if self.clock is not None else ""

    def note(self, text: str) -> None:
        """Record one line."""
        self.lines.append(self._stamp() + text)

    def __call__(self, name: str, phase: str, detail: dict[str, Any]) -> None:
        if phase == "start":
            self.note(f"step {name} started")
        else:
            self.note(f"step {name} done in {detail.get('seconds', 0):.6f} s")


def collect(gpu: AmGpu, *, marks: MarkLog | list[str] | None = None, last: int = 16, halt: bool = True,
            vgprs: int = 4) -> dict[str, Any]:
    """The hang report of ``gpu`` (see the module docstring)."""
    ident = gpu.transport.identity()
    doc: dict[str, Any] = {"tinyhw_hang_report": VERSION, "device": ident.location or gpu.transport.name,
                           "pci_id": f"{ident.vendor_id:04x}:{ident.device_id:04x}",
                           "ip_versions": {k: ".".join(map(str, v)) for k, v in
                                           (gpu.discovery.versions() if gpu.discovery is not None else {}).items()},
                           "problems": [],
                           "marks": list(marks.lines if isinstance(marks, MarkLog) else marks or [])}
    parts = (("state", lambda: _state(gpu, doc["marks"])), ("status", lambda: gpustatus.read_status(gpu)),
             *((f"ring_{r}", lambda r=r: rings.read_ring(gpu, r, last=last)) for r in rings.RINGS))
    for key, fn in parts:
        try:
            doc[key] = fn()
        except TinyhwError as e:
            doc["problems"].append(f"{key}: {e}")
    try:
        if halt:
            with waves.halted(gpu):
                doc["waves"] = waves.scan(gpu, vgprs=vgprs)
        else:
            doc["waves"] = waves.scan(gpu, vgprs=vgprs)
        doc["waves"]["halted_while_read"] = halt
    except TinyhwError as e:
        doc["problems"].append(f"waves: {e}")
    return doc


def _state(gpu: AmGpu, marks: list[str]) -> dict[str, Any]:
    state = read_state(gpu).to_doc()
    marks.append(f"board state: {'tinyhw boot flags set' if state['tinyhw_booted'] else 'no tinyhw boot flags'}, "
                 f"next boot {state['next_boot']} ({state['next_boot_reason']})")
    return state


def to_json(doc: dict[str, Any]) -> bytes:
    """The report as JSON (one document, sorted keys)."""
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()


def text(doc: dict[str, Any]) -> str:
    """The report for people: the verdict, busy bits, ring packets, waves, marks."""
    out = [f"tinyhw hang report v{doc['tinyhw_hang_report']}: {doc['device']} ({doc['pci_id']})",
           "ip versions: " + ", ".join(f"{k} {v}" for k, v in sorted(doc["ip_versions"].items()))]
    st = doc.get("status")
    if st:
        out.append(f"status: {st['verdict']}")
        for group, regs in st["groups"].items():
            for r in regs:
                flags = " ".join(r["flagged"]) or "-"
                out.append(f"  {group:6} {r['name']:<32} 0x{r['value']:08x}  {flags}")
    for r in rings.RINGS:
        ring = doc.get(f"ring_{r}")
        if ring:
            out.append(f"ring {r}: rptr 0x{ring['rptr']:x} wptr 0x{ring['wptr']:x} "
                       f"({ring['pending_dwords']} dwords pending)")
            out += ring_lines(ring)
    w = doc.get("waves")
    if w is not None:
        out.append(f"waves: {len(w['waves'])} resident of {w['slots_scanned']} slots scanned")
        out += [f"  {wave_line(x)}" for x in w["waves"]]
    if doc["marks"]:
        out.append("recent marks:")
        out += [f"  {m}" for m in doc["marks"]]
    out += [f"problem: {p}" for p in doc["problems"]]
    return "\n".join(out) + "\n"


def packet_line(p: dict[str, Any]) -> str:
    """One decoded packet on one line."""
    f = p.get("fields") or {}
    if "registers" in f:
        body = " ".join(f"{k.split('.')[-1]}=0x{v:x}" for k, v in f["registers"].items())
    else:
        body = " ".join(f"{k}=0x{v:x}" for k, v in f.items())
    extra = f"  ({p['problem']})" if p.get("problem") else ""
    return f"0x{p['at']:06x} {p['name']:<20} {body}{extra}"


def ring_lines(ring: dict[str, Any], indent: str = "  ") -> list[str]:
    """The ring's history, a marker at the read pointer, then the pending packets (IB contents indented)."""
    out: list[str] = []

    def emit(p: dict[str, Any], pre: str) -> None:
        out.append(pre + packet_line(p))
        for q in p.get("ib", []):
            emit(q, pre + "    ib ")
        if p.get("ib_problem"):
            out.append(pre + "    ib " + p["ib_problem"])

    for p in ring["history"]:
        emit(p, indent + "  ")
    out.append(f"{indent}> read pointer")
    for p in ring["pending"]:
        emit(p, indent + "* ")
    out += [f"{indent}problem: {x}" for x in ring["problems"]]
    return out


def wave_line(w: dict[str, Any]) -> str:
    """One wave on one line: slot, PC, EXEC, flags, the instruction at the PC."""
    s = w["slot"]
    inst = w["instruction"].get("text") or w["instruction"].get("problem", "?")
    return (f"se{s['se']} sa{s['sa']} wgp{s['wgp']} simd{s['simd']} wave{s['wave']}  pc 0x{w['pc']:x}  "
            f"exec 0x{w['exec']:x}  {' '.join(w['status_flags'])}  {inst}")
