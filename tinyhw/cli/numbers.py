"""The command line's number option type: :class:`Number` parses with :func:`tinyhw.formats.numbers.parse_number`
(decimal, ``0x`` hex, ``0b``, ``0o``, ``_`` separators, and with ``units=True`` ``4k``/``64KiB``/``2M``), so
options and arguments take the same forms and get the same one-line messages (exit 2). Arguments call
:func:`parse_number` with the name they show in the message.
"""

from __future__ import annotations

from typing import Any

import click

from tinyhw.formats.numbers import parse_number

__all__ = ["Number", "parse_number"]


class Number(click.ParamType):
    """A click option type that parses with :func:`parse_number` (the same rules and messages as arguments)."""

    name = "number"

    def __init__(self, *, minimum: int = 0, maximum: int | None = None, align: int = 1, units: bool = False) -> None:
        self.limits = {"minimum": minimum, "maximum": maximum, "align": align, "units": units}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        """Parse ``value`` (ints pass through) with :func:`parse_number` and this option's limits; a bad value fails
        with the option's name."""
        if isinstance(value, int):
            return value
        what = f"--{param.name.replace('_', '-')}" if param is not None and param.name else "number"
        return parse_number(str(value), what, **self.limits)
