"""Typed, range-checked fields of untrusted records (JSON objects, the field dicts of unpickled records).

Every check refuses (exit 2) naming where the record sits and which field is wrong, and describes a bad
value by its type only (a number by its value), never by formatting it: an untrusted value may be a huge
or shared tree.
"""

from __future__ import annotations

from typing import Any

from tinyhw.errors import Refused

__all__ = ["MISSING", "int_field", "kind"]

MISSING: Any = object()


def kind(v: Any) -> str:
    """What a value is, for an error message, without formatting the value itself."""
    if isinstance(v, float):
        return f"number {v!r}"
    name = getattr(v, "type_name", None)   # tinygrad records (tinyhw.formats.tgpickle.Record)
    return f"{name[:60]} record" if isinstance(name, str) else type(v).__name__


def int_field(f: Any, key: str, where: str, *, lo: int, hi: int, default: Any = MISSING) -> int:
    """``f[key]`` as an int in ``lo..hi``: bools, floats (JSON Infinity, NaN), Decimals and strings are refused;
    a missing or null field is ``default``, or refused when there is none."""
    if not isinstance(f, dict):
        raise Refused(f"{where} is a {kind(f)}, not an object with fields")
    v = f.get(key, MISSING)
    if v is MISSING or v is None:
        if default is MISSING:
            raise Refused(f"{where}: field {key!r} is missing")
        return default
    if isinstance(v, bool) or not isinstance(v, int):
        raise Refused(f"{where}: field {key!r} is a {kind(v)}, not an integer")
    if not lo <= v <= hi:
        shown = str(v) if v.bit_length() <= 64 else f"a {v.bit_length()}-bit integer"
        raise Refused(f"{where}: field {key!r} = {shown} lies outside {lo}..{hi}")
    return v
