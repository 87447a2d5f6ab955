"""What GSP-RM reported at boot, kept for ``nv info`` in a small JSON file per device.

The GSP's queues live in host memory the booting process maps (specs/nv-bringup.md §5: the RPC queues are
always in system memory); when ``nv boot`` ends that memory is gone, so a later command cannot ask the GSP
again. ``nv boot`` writes the reply here together with the WPR2 registers it saw; ``nv info`` shows it only
while WPR2 still reads those values (the same boot), and ``nv reset`` deletes it. The file lives under
``$XDG_CACHE_HOME/tinyhw/nv/`` (``~/.cache`` by default), named after the device location.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from pathlib import Path
from typing import Any

MAX_RECORD = 1 << 16


def path(location: str) -> Path:
    """The record file of the device at ``location``."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tinyhw" / "nv" / (re.sub(r"[^A-Za-z0-9_.-]", "_", location) + ".json")


def save(location: str, doc: dict[str, Any]) -> None:
    """Write ``doc`` atomically (a temporary file renamed over the old one)."""
    p = path(location)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(json.dumps(doc, sort_keys=True))
    os.replace(tmp, p)


def load(location: str) -> dict[str, Any] | None:
    """The saved record, or None (none, unreadable or oversized)."""
    p = path(location)
    try:
        if p.stat().st_size > MAX_RECORD:
            return None
        doc = json.loads(p.read_text())
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None


def forget(location: str) -> None:
    """Delete the record (after a reset)."""
    with contextlib.suppress(FileNotFoundError):
        path(location).unlink()
