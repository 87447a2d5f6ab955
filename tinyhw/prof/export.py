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

import contextlib
import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

from tinyhw.errors import OperationFailed, Refused
from tinyhw.prof.analyze import is_traced, select, waves_of
from tinyhw.prof.capture import Capture
from tinyhw.prof.insts import insts_doc

__all__ = ["export_doc", "write_output"]


def export_doc(cap: Capture, kernel: str | None = None) -> dict[str, Any]:
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
    """Write ``data`` to ``path`` atomically; refuse (exit 2) what must not be written."""
    if not path:
        raise Refused("empty output path")
    p = Path(path)
    try:
        st = p.stat()
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise Refused(f"cannot use {path} as output: {e.strerror or e}") from None
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise Refused(f"{path} is a directory; give a file name")
        if not stat.S_ISREG(st.st_mode):
            raise Refused(f"{path} is a device node, fifo or socket; refusing to write to it")
        if not force:
            raise Refused(f"{path} exists", hint="use --force to replace it")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise Refused(f"directory {parent} does not exist")
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if force:
            os.replace(tmp, p)
        else:
            try:
                os.link(tmp, p)
            except FileExistsError:
                raise Refused(f"{path} appeared while writing", hint="use --force to replace it") from None
            except OSError:  # no hard links on this filesystem: check again, then rename
                if p.exists():
                    raise Refused(f"{path} appeared while writing", hint="use --force to replace it") from None
                os.replace(tmp, p)
    except OSError as e:
        raise OperationFailed(f"writing {path} failed: {e.strerror or e}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def dumps(doc: dict[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()
