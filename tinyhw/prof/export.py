"""Export waves and instructions as Chrome/Perfetto trace-event JSON, written safely.

Trace-event format (the JSON array/object form read by chrome://tracing and ui.perfetto.dev): one
process per kernel dispatch, one thread (track) per SE/CU/SIMD/wave slot, each wave a complete
("X") slice and, for instruction-traced waves, each instruction a nested slice from the cycle it was
first attempted (args: ``stall``, ``duration``, ``issue``, ``category``, ``pc``; the slice is cut
where the next instruction starts so slices nest, ``duration`` keeps the full figure). Occupancy:
one counter track ("C" events) per SE/CU, ``waves SE<s>/CU<c>``, with one series per SIMD giving
the waves resident on it (measured: from WAVESTART/WAVEEND; a wave without an end counts until the
stream's last packet). The other SIMD's memory ops of a traced stream are instant events on a track
``SE<s>/other SIMD``. Timestamps are shader-clock cycles written into the ``ts``/``dur`` fields (the
viewer labels them µs: 1 µs shown = 1 cycle).

Output files are written atomically: a temporary file in the same directory, then a rename; an
existing file is replaced only with ``force`` (without it the final step is a hard link, which fails
if the name appeared meanwhile); directories, device nodes, FIFOs and sockets are never written.
"""

from __future__ import annotations

import json
from typing import Any

from tinyhw.fileio import atomic_write, check_output_path
from tinyhw.prof.analyze import is_traced, select, trace_of, waves_of
from tinyhw.prof.capture import Capture
from tinyhw.prof.insts import insts_doc

__all__ = ["export_doc", "write_output"]


def export_doc(cap: Capture, kernel: str | None = None) -> dict[str, Any]:
    """The Chrome/Perfetto trace-event document of the selected kernel dispatches."""
    events: list[dict[str, Any]] = []
    slices = 0
    counters = 0
    for pid, (kern, ex) in enumerate(select(cap, kernel), start=1):
        events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                       "args": {"name": f"{cap.kernel_name(kern)} (dispatch {ex})"}})
        tids: dict[str, int] = {}

        for s in sorted(cap.sqtt, key=lambda s: s.se):
            if (s.kern, s.exec_tag) != (kern, ex):
                continue
            waves = waves_of(s)
            counters += _occupancy(events, pid, s, waves)
            others: list[dict[str, Any]] = []
            for n, w in enumerate(waves):
                tid = _track(events, pid, tids, w.key)
                end = w.end if w.end is not None else w.start
                events.append({"ph": "X", "name": f"wave {w.slot}", "cat": "wave", "pid": pid, "tid": tid,
                               "ts": w.start, "dur": max(end - w.start, 0),
                               "args": {"se": w.se, "cu": w.cu, "simd": w.simd, "complete": w.end is not None}})
                slices += 1
                if not is_traced(cap, w):
                    continue
                doc = insts_doc(cap, str(cap.dispatches().index((kern, ex))), s.se, n)
                others = doc["other_simd"]
                rows = doc["rows"]
                for k, r in enumerate(rows):
                    cut = rows[k + 1]["time"] if k + 1 < len(rows) else end
                    shown = max(min(r["duration"], cut - r["time"], end - r["time"]), 0)
                    args = {"stall": r["stall"], "duration": r["duration"], "issue": r["issue"],
                            "category": r["category"], "type": r["type"]}
                    if r["pc"] is not None:
                        args["pc"] = r["pc"]
                    events.append({"ph": "X", "name": r["instruction"] or r["type"], "cat": r["category"],
                                   "pid": pid, "tid": tid, "ts": r["time"], "dur": shown, "args": args})
                    slices += 1
            if others:
                tid = _track(events, pid, tids, f"SE{s.se}/other SIMD")
                for o in others:
                    events.append({"ph": "i", "s": "t", "name": o["type"], "cat": o["category"], "pid": pid,
                                   "tid": tid, "ts": o["time"], "args": {"wave": o["wave"]}})
    return {"traceEvents": events, "displayTimeUnit": "ns",
            "otherData": {"source": cap.source, "target": cap.target, "time_unit": "shader clock cycles",
                          "slices": slices, "counter_events": counters}}


def _track(events: list[dict[str, Any]], pid: int, tids: dict[str, int], name: str) -> int:
    """The thread id of track ``name`` in process ``pid``, named by a metadata event the first time."""
    if name not in tids:
        tids[name] = len(tids) + 1
        events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tids[name], "args": {"name": name}})
    return tids[name]


def _occupancy(events: list[dict[str, Any]], pid: int, s: Any, waves: list[Any]) -> int:
    """Counter events: waves resident per SIMD of each CU of one SE stream, at every change. Returns how many."""
    t = trace_of(s)
    last = int(t.time[-1]) if len(t) else 0
    by_cu: dict[int, list[tuple[int, int, int]]] = {}
    for w in waves:
        by_cu.setdefault(w.cu, []).append((w.start, w.simd, 1))
        by_cu[w.cu].append((w.end if w.end is not None else last, w.simd, -1))
    n = 0
    for cu in sorted(by_cu):
        simds = sorted({simd for _, simd, _ in by_cu[cu]})
        level = dict.fromkeys(simds, 0)
        steps = sorted(by_cu[cu], key=lambda e: (e[0], e[2]))   # ends before starts at the same cycle
        for i, (ts, simd, d) in enumerate(steps):
            level[simd] += d
            if i + 1 < len(steps) and steps[i + 1][0] == ts:
                continue                                        # one event per cycle, after all its changes
            events.append({"ph": "C", "name": f"waves SE{s.se}/CU{cu}", "pid": pid, "ts": ts,
                           "args": {f"SIMD{k}": v for k, v in level.items()}})
            n += 1
    return n


def write_output(path: str, data: bytes, *, force: bool) -> None:
    """Write ``data`` to ``path`` atomically; refuse (exit 2) what must not be written (tinyhw.fileio's rules:
    an existing file needs ``force``; device nodes, FIFOs, directories, an empty path never)."""
    check_output_path(path, force=force, what="trace")
    atomic_write(path, data)


def dumps(doc: dict[str, Any]) -> bytes:
    """The document as compact JSON bytes."""
    return json.dumps(doc, separators=(",", ":")).encode()
