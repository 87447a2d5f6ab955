"""Clocks that drivers wait on.

Drivers never call ``time.sleep`` or ``time.monotonic`` directly: they use the
transport's clock. On hardware that is :class:`WallClock`; on an emulated board it
is the board's :class:`VirtualClock`, which every access advances by the modelled
latency, so waits and time-outs are deterministic and counts reproducible.

Threads (issue 12, :mod:`tinyhw.transport.submitq`): a driver that hands transfers to a worker thread
tells the clock which threads take part (``enlist``/``delist``), hands time across (``catch_up``:
what the worker does starts no earlier than when it was handed over; the caller that waits for it
continues no earlier than when it finished) and blocks only through the clock's condition
(``wait_until``/``notify``). On a wall clock these are plain thread primitives. On a virtual clock
every enlisted thread has its own time cursor, and an emulator calls :meth:`VirtualClock.gate`
before each transfer: it lets a thread's transfer run only when every other enlisted thread is
blocked or waiting at the gate with a later time, so the emulator sees the threads' transfers in
virtual-time order whatever the operating system's scheduling: the run is deterministic.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Clock:
    """Interface: ``now()`` in seconds and ``sleep(seconds)``."""

    virtual = False

    def now(self) -> float:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    # -- threads (no-ops on clocks that need nothing more than the operating system's scheduling) -----------
    @property
    def cond(self) -> threading.Condition:
        """The condition every enlisted thread blocks on (created on first use)."""
        c = self.__dict__.get("_cond")
        if c is None:
            c = self.__dict__.setdefault("_cond", threading.Condition())
        return c

    def enlist(self, thread: threading.Thread) -> None:
        """``thread`` (not yet started) and the calling thread take part in a pipeline from now on."""

    def delist(self, thread: threading.Thread | None = None) -> None:
        """``thread`` (default: the calling one) no longer takes part."""

    def catch_up(self, t: float) -> None:
        """The calling thread's next step happens no earlier than ``t`` (a time another thread handed over)."""

    def wait_until(self, ready: Callable[[], bool]) -> None:
        """Block (holding :attr:`cond`) until ``ready()``; only :meth:`notify` wakes the waiters."""
        while not ready():
            self.cond.wait()

    def notify(self) -> None:
        """Wake the threads blocked in :meth:`wait_until` (call holding :attr:`cond`)."""
        self.cond.notify_all()

    def gate(self) -> None:
        """Called by an emulator before it runs a transfer of the calling thread."""


class WallClock(Clock):
    """Real time (monotonic)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


class VirtualClock(Clock):
    """Deterministic simulated time, advanced by the emulator and by ``sleep``.

    Threads that are not enlisted (and the first thread of a pipeline) share one cursor; a worker
    thread a pipeline enlists has its own, starting at the enlisting thread's time.
    """

    virtual = True

    def __init__(self, start: float = 0.0) -> None:
        self._t = start
        self._own: dict[threading.Thread, float] = {}  # cursors of enlisted worker threads
        self._state: dict[threading.Thread, tuple] = {}  # enlisted thread -> ("run",) | ("idle",) | ("gate", t, n)
        self._order: dict[threading.Thread, int] = {}  # tie-break at equal times: the enlisting order

    def now(self) -> float:
        if self._own:
            mine = self._own.get(threading.current_thread())
            if mine is not None:
                return mine
        return self._t

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            me = threading.current_thread()
            if me in self._own:
                self._own[me] += seconds
            else:
                self._t += seconds

    # -- threads ------------------------------------------------------------------------------------------
    def enlist(self, thread: threading.Thread) -> None:
        with self.cond:
            me = threading.current_thread()
            if me not in self._state:
                self._state[me] = ("run",)
                self._order[me] = len(self._order)
            self._own[thread] = self.now()
            self._state[thread] = ("run",)  # about to start: it will block or reach the gate
            self._order[thread] = len(self._order)

    def delist(self, thread: threading.Thread | None = None) -> None:
        with self.cond:
            t = thread or threading.current_thread()
            self._state.pop(t, None)
            self._own.pop(t, None)
            self._order.pop(t, None)
            if len(self._state) == 1:  # the last one left needs no gate
                last = next(iter(self._state))
                if last not in self._own:
                    self._state.clear()
                    self._order.clear()
            self.cond.notify_all()

    def catch_up(self, t: float) -> None:
        self.advance(t - self.now())

    def wait_until(self, ready: Callable[[], bool]) -> None:
        me = threading.current_thread()
        while not ready():
            if me in self._state:
                self._state[me] = ("idle",)
                self.cond.notify_all()  # a thread at the gate may go now
            self.cond.wait()
        if me in self._state:
            self._state[me] = ("run",)

    def notify(self) -> None:
        for t, st in self._state.items():
            if st[0] == "idle":
                self._state[t] = ("run",)  # it wakes and looks: until it blocks again nobody passes the gate
        self.cond.notify_all()

    def gate(self) -> None:
        if not self._state:
            return
        me = threading.current_thread()
        with self.cond:
            if me not in self._state:
                return
            mine = (self.now(), self._order[me])
            self._state[me] = ("gate", *mine)
            self.cond.notify_all()
            while not all(st[0] == "idle" or (st[0] == "gate" and st[1:] > mine)
                          for t, st in self._state.items() if t is not me):
                self.cond.wait()
            self._state[me] = ("run",)

    def sleep(self, seconds: float) -> None:
        self.advance(seconds)
