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

Two modes of a virtual clock (issue 20 item 5), named in every figure a bench prints:

* ``device`` (the default): a thread's time moves only by the emulator's modelled costs (the spec's per-transfer
  latencies, the pipes' busy-until times), by sleeps and by waits for another thread. The host's own CPU time is
  not on the clock: runs are exact and reproducible (the tests' mode).
* ``hybrid``: the same, plus the host's real CPU time. Each thread's time also moves by the CPU time the thread
  itself spent (``time.thread_time()``, measured) outside the emulator, i.e. in the driver code between its
  device interactions: staging copies, Python overhead, submission bookkeeping. It is charged at the thread's
  next contact with the clock (``now``, ``sleep``, ``catch_up``, ``wait_until``, entering :meth:`service`), so a
  thread's CPU work overlaps other threads' transfers only where it really runs beside them. The emulator brackets
  its own work on a driver's thread with :meth:`service` (nothing inside is charged: the emulator's Python is not
  the host's cost) and marks threads of its own (an emulated queue's worker) ``host=False`` when enlisting them.
  Device time stays modelled. A board offers hybrid only if its emulator marks every access it services
  (``hybrid_ok``); figures on this clock are measured CPU + modelled device time, never bit-reproducible.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


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

    def enlist(self, thread: threading.Thread, *, host: bool = True) -> None:
        """``thread`` (not yet started) and the calling thread take part in a pipeline from now on; ``host=False``:
        ``thread`` stands in for the device side (an emulator's own worker), its CPU time is never host time."""

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

    def service(self) -> _Service | _NoService:
        """``with clock.service():`` brackets an emulator's own work on the calling thread (not host CPU time)."""
        return _NO_SERVICE


class _NoService:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SERVICE = _NoService()


class _Service:
    """The context :meth:`VirtualClock.service` returns in hybrid mode (re-entrant per thread)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def __enter__(self) -> None:
        c = self.clock
        me = threading.current_thread()
        depth = c._depth.get(me, 0)
        if not depth:
            c._charge()
        c._depth[me] = depth + 1

    def __exit__(self, *exc: object) -> None:
        c = self.clock
        me = threading.current_thread()
        depth = c._depth.get(me, 1) - 1
        c._depth[me] = depth
        if not depth:
            c._mark[me] = time.thread_time()  # host cpu time counts again from here


class WallClock(Clock):
    """Real time (monotonic)."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            time.sleep(seconds)


MODES = ("device", "hybrid")


class VirtualClock(Clock):
    """Simulated time, advanced by the emulator and by ``sleep`` (and in ``hybrid`` mode by host CPU time).

    Threads that are not enlisted (and the first thread of a pipeline) share one cursor; a worker
    thread a pipeline enlists has its own, starting at the enlisting thread's time. ``mode``: ``"device"`` or
    ``"hybrid"`` (module docstring); None: ``"device"`` until a measurement prefers another (:meth:`measuring`).
    """

    virtual = True
    hybrid_ok = False  # set by an emulator that brackets every access it services with service()

    def __init__(self, start: float = 0.0, *, mode: str | None = None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"clock mode {mode!r} is not one of {', '.join(MODES)}")
        self._t = start
        self._own: dict[threading.Thread, float] = {}  # cursors of enlisted worker threads
        self._state: dict[threading.Thread, tuple] = {}  # enlisted thread -> ("run",) | ("idle",) | ("gate", t, n)
        self._order: dict[threading.Thread, int] = {}  # tie-break at equal times: the enlisting order
        self.fixed = mode is not None  # the user chose the mode: a measurement keeps it
        self.hybrid = mode == "hybrid"
        self._mark: dict[threading.Thread, float] = {}  # thread cpu time from which host time is still uncharged
        self._depth: dict[threading.Thread, int] = {}  # service() nesting per thread
        self._device_side: set[threading.Thread] = set()  # threads enlisted host=False
        self._service = _Service(self)
        self.accounts: dict[str, dict[str, float]] | None = None  # thread name -> seconds by kind (track())

    # -- modes ----------------------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        return "hybrid" if self.hybrid else "device"

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"clock mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "hybrid" and not self.hybrid_ok:
            raise ValueError("this emulated board does not mark the work it services: no hybrid clock on it")
        self._mark.clear()  # cpu time counts from each thread's next contact with the clock
        self.hybrid = mode == "hybrid"

    @contextmanager
    def measuring(self, preferred: str = "hybrid") -> Iterator[str]:
        """For one measurement: the ``preferred`` mode unless the user fixed one (or the board offers only device
        time); yields the mode in effect and restores the previous one afterwards."""
        before = self.mode
        mode = before if self.fixed or not self.hybrid_ok else preferred
        self.set_mode(mode)
        try:
            yield mode
        finally:
            self.set_mode(before)

    def track(self) -> dict[str, dict[str, float]]:
        """Start (afresh) the per-thread accounts: seconds of ``cpu`` (host cpu charged, hybrid only), ``device``
        (modelled costs the emulator spent on the thread's transfers), ``wait`` (for another thread) and
        ``sleep``; keyed by thread name."""
        self.accounts = {}
        return self.accounts

    def service(self) -> _Service | _NoService:
        return self._service if self.hybrid else _NO_SERVICE

    def _charge(self) -> None:
        """Put the calling thread's host cpu time since its last contact with the clock on its time line."""
        me = threading.current_thread()
        if self._depth.get(me) or me in self._device_side:
            return
        t = time.thread_time()
        last = self._mark.get(me)
        self._mark[me] = t
        if last is not None and t > last:
            self._advance(me, t - last, "cpu")

    def _advance(self, me: threading.Thread, seconds: float, kind: str) -> None:
        if me in self._own:
            self._own[me] += seconds
        else:
            self._t += seconds
        acc = self.accounts
        if acc is not None:
            mine = acc.get(me.name)
            if mine is None:
                mine = acc[me.name] = {"cpu": 0.0, "device": 0.0, "wait": 0.0, "sleep": 0.0}
            mine[kind] += seconds

    def now(self) -> float:
        if self.hybrid:
            self._charge()
        if self._own:
            mine = self._own.get(threading.current_thread())
            if mine is not None:
                return mine
        return self._t

    def advance(self, seconds: float) -> None:
        """The emulator's modelled cost on the calling thread's time line."""
        if seconds > 0:
            me = threading.current_thread()
            if self.accounts is not None:
                self._advance(me, seconds, "device")
            elif me in self._own:
                self._own[me] += seconds
            else:
                self._t += seconds

    # -- threads ------------------------------------------------------------------------------------------
    def enlist(self, thread: threading.Thread, *, host: bool = True) -> None:
        with self.cond:
            if not host:
                self._device_side.add(thread)
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
            if thread is not None:  # a thread that ends (the caller that delists itself keeps counting its cpu)
                self._device_side.discard(t)
                self._mark.pop(t, None)
                self._depth.pop(t, None)
            if len(self._state) == 1:  # the last one left needs no gate
                last = next(iter(self._state))
                if last not in self._own:
                    self._state.clear()
                    self._order.clear()
            self.cond.notify_all()

    def catch_up(self, t: float) -> None:
        gap = t - self.now()
        if gap > 0:
            self._advance(threading.current_thread(), gap, "wait")

    def wait_until(self, ready: Callable[[], bool]) -> None:
        if self.hybrid:
            self._charge()  # what the thread computed before it blocks happened before it blocked
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
        if self.hybrid:
            self._charge()
        if seconds > 0:
            self._advance(threading.current_thread(), seconds, "sleep")
