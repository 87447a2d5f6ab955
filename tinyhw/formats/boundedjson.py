"""One JSON loader for untrusted files, bounded in size, nesting depth and the number of values it builds.

``json.loads`` recurses once per nesting level (a ``[[[[...`` file ends in ``RecursionError``) and builds
one Python object per value, so a file of empty objects costs about 20 times its size in memory. Before
parsing, :func:`loads` scans the text once (linear, with numpy: escaped quotes, strings and the structural
characters outside them) and refuses, with one line naming ``what``:

* more than ``max_bytes`` bytes;
* nesting deeper than ``max_depth``;
* more than ``max_values`` values (containers plus commas outside strings: every value but the first of a
  container follows a comma), so what the parser builds is bounded by the count, not only the bytes;
* text that is not UTF-8 or not JSON, and the constants ``NaN``/``Infinity`` (not JSON) unless ``allow_nan``.

Every refusal is :class:`~tinyhw.errors.Refused` (exit 2); callers that treat an unreadable file otherwise
(a cold emulated board) catch it.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from tinyhw.errors import Refused

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "loads", "shape"]

MAX_BYTES = 16 << 20
MAX_DEPTH = 64
MAX_VALUES = 1 << 20

_CHUNK = 1 << 20   # bytes scanned at a time: the scan's own memory stays a few times this, whatever the input
#: up to this size the scan is a plain loop (a board state file, a journal: no numpy imported for them)
SMALL = 64 << 10


@functools.cache
def _brackets() -> tuple[Any, Any]:
    """numpy tables: 1 at the bytes that open (``[``, ``{``) and that close (``]``, ``}``) a container."""
    import numpy as np

    opening = np.zeros(256, dtype=np.int8)
    opening[[ord("["), ord("{")]] = 1
    closing = np.zeros(256, dtype=np.int8)
    closing[[ord("]"), ord("}")]] = 1
    return opening, closing


def shape(data: bytes) -> tuple[int, int]:
    """(deepest nesting, values) of JSON text ``data``, counted outside strings in one linear pass (a plain loop up
    to :data:`SMALL` bytes, whole-array numpy operations beyond)."""
    return _shape_loop(data) if len(data) <= SMALL else _shape_numpy(data)


def _shape_loop(data: bytes) -> tuple[int, int]:
    depth = deepest = 0
    values = 1
    inside = escaped = False
    for b in data:
        if inside:
            if escaped:
                escaped = False
            elif b == 0x5C:  # backslash
                escaped = True
            elif b == 0x22:  # quote
                inside = False
        elif b == 0x22:
            inside = True
        elif b in (0x5B, 0x7B):  # [ {
            depth += 1
            deepest = max(deepest, depth)
            values += 1
        elif b in (0x5D, 0x7D):  # ] }
            depth -= 1
        elif b == 0x2C:  # comma
            values += 1
    return deepest, values if data else 0


def _shape_numpy(data: bytes) -> tuple[int, int]:
    import numpy as np

    opening, closing = _brackets()
    raw_all = np.frombuffer(data, dtype=np.uint8)
    bs_run = 0         # backslashes just before the chunk
    inside = False     # whether the chunk starts inside a string
    depth = deepest = 0
    values = 1
    for at in range(0, len(raw_all), _CHUNK):
        raw = raw_all[at:at + _CHUNK]
        n = len(raw)
        idx = np.arange(n, dtype=np.int64)
        # the run of backslashes ending just before each byte (a quote after an odd run is escaped)
        last = np.maximum.accumulate(np.where(raw != ord("\\"), idx, -1 - bs_run))
        run = np.empty(n, dtype=np.int64)
        run[0] = bs_run
        run[1:] = idx[:-1] - last[:-1]
        quote = (raw == ord('"')) & (run % 2 == 0)
        # inside a string: an odd number of real quotes at or before the byte (the opening quote itself included)
        count = np.cumsum(quote, dtype=np.int64) + int(inside)
        in_str = (count % 2 == 1) | quote
        structural = raw[~in_str]
        step = opening[structural].astype(np.int64) - closing[structural]
        if len(step):
            levels = np.cumsum(step) + depth
            deepest = max(deepest, int(levels.max()))
            depth = int(levels[-1])
        values += int(opening[structural].sum(dtype=np.int64)) + int(np.count_nonzero(structural == ord(",")))
        inside = bool(count[-1] % 2)
        bs_run = int(n - 1 - last[-1]) if raw[-1] == ord("\\") else 0
    return deepest, values if len(raw_all) else 0


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not json")


def loads(data: bytes | str, what: str, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH,
          max_values: int = MAX_VALUES, allow_nan: bool = False) -> Any:
    """Parse JSON ``data`` (the contents of ``what``, named in refusals) within the bounds; refuse (exit 2) else.

    ``allow_nan`` reads ``NaN``/``Infinity`` as Python's json module writes them (the caller's field checks then
    refuse them by name)."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    if len(raw) > max_bytes:
        raise Refused(f"{what} is {len(raw)} bytes, over the {max_bytes}-byte limit for this json file")
    depth, values = shape(raw)
    if depth > max_depth:
        raise Refused(f"{what} nests json deeper than {max_depth} levels; not read")
    if values > max_values:
        raise Refused(f"{what} holds more than {max_values} json values; not read")
    try:
        text = raw.decode("utf-8")
        return json.loads(text) if allow_nan else json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError:
        raise Refused(f"{what} is not utf-8 text, so not json") from None
    except (ValueError, RecursionError) as e:   # RecursionError cannot happen within the depth bound
        raise Refused(f"{what} is not json ({str(e)[:120].lower()})") from None
