"""Clocks that drivers wait on.

Drivers never call ``time.sleep`` or ``time.monotonic`` directly: they use the
transport's clock. On hardware that is :class:`WallClock`; on an emulated board it
is the board's :class:`VirtualClock`, which every access advances by the modelled
latency, so waits and time-outs are deterministic and counts reproducible.
"""

from __future__ import annotations

import time


class Clock:
    """Interface: ``now()`` in seconds and ``sleep(seconds)``."""

    virtual = False

    def now(self) -> float:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError


class WallClock(Clock):
    """Real time (monotonic)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock(Clock):
    """Deterministic simulated time, advanced by the emulator and by ``sleep``."""

    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self._t = start

    def now(self) -> float:
        return self._t

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self._t += seconds

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
