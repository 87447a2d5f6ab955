"""The one number parser of tinyhw: addresses, sizes, counts, register values a user writes.

Accepts decimal, ``0x`` hex, ``0b`` binary, ``0o`` octal and ``_`` separators (``0x1_0000``); with
``units=True`` also a decimal number with a binary unit (``4k``, ``64KiB``, ``2M``, ``8G``). Every refusal is
one line (:class:`~tinyhw.errors.Refused`, exit 2), checked in this order: not a number, negative, outside the
allowed range, misaligned, so an offset past the end is reported as such even when it is also misaligned.
Pure (only :mod:`tinyhw.errors`): the command line's option type (:class:`tinyhw.cli.numbers.Number`) and the
library's own inputs (``zeros:N`` buffers of :mod:`tinyhw.kernels.execute`) parse with it alike.
"""

from __future__ import annotations

from tinyhw.errors import Refused

__all__ = ["parse_number"]

_UNITS = {"k": 10, "m": 20, "g": 30, "t": 40}


def _hint(units: bool) -> str:
    return "write decimal or 0x-hex" + (", optionally with a k/m/g unit (64k, 2M)" if units else "")


def _split_unit(t: str) -> tuple[str, int]:
    """``64kib`` -> (``64``, 10). Units only follow a decimal number (``0x1b`` is hex, not 1 byte)."""
    if t.startswith(("0x", "0b", "0o")):
        return t, 0
    for suffix in ("ib", "b"):
        if t.endswith(suffix) and t[:-len(suffix)][-1:] in _UNITS:
            t = t[:-len(suffix)]
            break
    if t[-1:] in _UNITS:
        return t[:-1], _UNITS[t[-1]]
    return t, 0


def parse_number(text: str, what: str = "number", *, minimum: int = 0, maximum: int | None = None,
                 align: int = 1, units: bool = False) -> int:
    """``text`` as an integer in ``[minimum, maximum]`` that is a multiple of ``align``, else :class:`Refused`.

    ``what`` names the value in the message (``offset``, ``size``, ``value for smuio.ROM_CNTL``).
    """
    t = text.strip().lower().replace("_", "")
    negative = t.startswith("-")
    body = t[1:] if t[:1] in ("+", "-") else t
    body, shift = _split_unit(body) if units else (body, 0)
    try:
        if not body.isascii() or body[:1] not in tuple("0123456789"):
            raise ValueError(body)
        magnitude = int(body, 0) if body.startswith(("0x", "0b", "0o")) else int(body, 10)
    except ValueError:
        raise Refused(f"{what} {text.strip()!r} is not a number", hint=_hint(units)) from None
    value = -(magnitude << shift) if negative else magnitude << shift
    if value < 0 <= minimum:
        raise Refused(f"{what} {text.strip()} is negative", hint=f"write a number from {minimum}")
    if maximum is not None and not minimum <= value <= maximum:
        raise Refused(f"{what} {_hex(value)} is outside {_hex(minimum)}-{_hex(maximum)}")
    if value < minimum:
        raise Refused(f"{what} {_hex(value)} is below {_hex(minimum)}")
    if align > 1 and value % align:
        raise Refused(f"{what} {_hex(value)} is not a multiple of {align}",
                      hint=f"round it down to {_hex(value - value % align)}")
    return value


def _hex(value: int) -> str:
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"
