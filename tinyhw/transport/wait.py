"""Polling helper: wait on the transport's clock, never on wall time directly."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from tinyhw.errors import DeviceTimeout
from tinyhw.transport.clock import Clock

T = TypeVar("T")


def poll(
    clock: Clock,
    probe: Callable[[], T],
    done: Callable[[T], bool],
    *,
    timeout: float,
    interval: float,
    what: str,
    hint: str | None = None,
) -> T:
    """Call ``probe`` until ``done(value)``; the first check is immediate.

    Raises :class:`DeviceTimeout` naming ``what`` and the last value seen when
    ``timeout`` seconds of the clock pass.
    """
    deadline = clock.now() + timeout
    while True:
        value = probe()
        if done(value):
            return value
        if clock.now() >= deadline:
            shown = f"0x{value:x}" if isinstance(value, int) else repr(value)
            raise DeviceTimeout(f"timed out after {timeout:g} s waiting for {what} (last value {shown})", hint=hint)
        clock.sleep(interval)
