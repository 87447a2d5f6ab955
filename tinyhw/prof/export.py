"""Export waves and instructions as Chrome/Perfetto trace-event JSON, written safely.

Trace-event format (the JSON array/object form read by chrome://tracing and ui.perfetto.dev): one
process per kernel dispatch, one thread (track) per SE/CU/SIMD/wave slot, each wave a complete
("X") slice and, for instruction-traced waves, each instruction a nested slice. Timestamps are
shader-clock cycles written into the ``ts``/``dur`` fields (the viewer labels them µs: 1 µs shown =
1 cycle).

Output files are written atomically: a temporary file in the same directory, then a rename; an
existing file is replaced only with ``force`` (without it the final step is a hard link, which fails
if the name appeared meanwhile); directories, device nodes, FIFOs and sockets are never written.
"""

from __future__ import annotations

import json
from typing import Any

from tinyhw.fileio import atomic_write, check_output_path
from tinyhw.prof.analyze import is_traced, select, waves_of
from tinyhw.prof.capture import Capture
from tinyhw.prof.insts import insts_doc

__all__ = ["export_doc", "write_output"]


def export_doc(cap: Capture, kernel: str | None = None) -> dict[str, Any]:
    """The Chrome/Perfetto trace-event document of the selected kernel dispatches."""
    events: list[dict[str, Any]] = []
    slices = 0
    for pid, (kern, ex) in enumerate(select(cap, kernel), start=1):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"{cap.kernel_name(kern)} (dispatch {ex})"}})
        tids: dict[str, int] = {}
        for s in sorted(cap.sqtt, key=lambda s: s.se):
            if (s.kern, s.exec_tag) != (kern, ex):
                continue
            for n, w in enumerate(waves_of(s)):
                if w.key not in tids:
                    tids[w.key] = len(tids) + 1
                    events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[w.key],
                                   "args": {"name": w.key}})
                tid = tids[w.key]
                end = w.end if w.end is not None else w.start
                events.append({"ph": "X", "name": f"wave {w.slot}", "cat": "wave", "pid": pid, "tid": tid,
                               "ts": w.start, "dur": max(end - w.start, 0),
                               "args": {"se": w.se, "cu": w.cu, "simd": w.simd, "complete": w.end is not None}})
                slices += 1
                if not is_traced(cap, w):
                    continue
                doc = insts_doc(cap, str(cap.dispatches().index((kern, ex))), s.se, n)
                for r in doc["rows"]:
                    name = r["instruction"] or r["type"]
                    events.append({"ph": "X", "name": name, "cat": r["type"], "pid": pid, "tid": tid,
                                   "ts": r["time"], "dur": r["duration"] or 0,
                                   "args": {k: r[k] for k in ("pc", "type") if r[k] is not None}})
                    slices += 1
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": cap.source, "target": cap.target, "time_unit": "shader clock cycles",
                          "slices": slices}}


def write_output(path: str, data: bytes, *, force: bool) -> None:
    """Write ``data`` to ``path`` atomically; refuse (exit 2) what must not be written (tinyhw.fileio's rules:
    an existing file needs ``force``; device nodes, FIFOs, directories, an empty path never)."""
    check_output_path(path, force=force, what="trace")
    atomic_write(path, data)


def dumps(doc: dict[str, Any]) -> bytes:
    """The document as compact JSON bytes."""
    return json.dumps(doc, separators=(",", ":")).encode()
