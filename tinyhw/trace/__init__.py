"""Recorded sessions (``tinyhw trace``): show them decoded by register, replay them on a device, diff two, and
import the Linux kernel's mmiotrace logs into the same format.

Layer 3b (a tool): handed trace files and, for a replay, an open transport; it never opens a device. The file
format is :mod:`tinyhw.formats.tracefile` (docs/trace-format.md); recording is :mod:`tinyhw.transport.record`.

Example::

    import tinyhw
    from tinyhw.trace import load, replay

    trace = load("boot.pcapng")
    with tinyhw.open("mock:navi31") as dev:
        result = replay.replay(trace, dev.transport)
        print(result.divergence)
"""

from __future__ import annotations

import os

from tinyhw.fileio import read_input
from tinyhw.formats.tracefile import Trace, read_trace

#: Largest trace file read (bytes): an `am boot` over the bridge records about 3 MiB.
MAX_TRACE_BYTES = 1 << 30


def load(path: str | os.PathLike[str], *, strict: bool = False) -> Trace:
    """Read the trace file at ``path`` (regular files only, at most :data:`MAX_TRACE_BYTES`); a file cut short
    reads up to its last complete record (``Trace.truncated`` says where), unless ``strict``."""
    return read_trace(read_input(path, MAX_TRACE_BYTES, what="trace file"), strict=strict)


def load_bytes(path: str | os.PathLike[str]) -> bytes:
    """The bytes of the trace file at ``path``, read as :func:`load` reads them (for a reader that streams them)."""
    return read_input(path, MAX_TRACE_BYTES, what="trace file")


__all__ = ["MAX_TRACE_BYTES", "Trace", "load", "load_bytes"]
