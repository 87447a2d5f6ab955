"""The emulated boards' virtual clock: modelled time, one time line per thread, the gate, the hybrid mode.

Every access to an emulated board advances the clock by the modelled latency (:meth:`VirtualClock.advance`), so
a driver's waits and time-outs (``now``/``sleep``, :mod:`tinyhw.transport.clock`) are deterministic.

Threads (the queued bulk seam, :mod:`tinyhw.transport.submitq`): a driver that hands transfers to a worker thread
does so through the clock's :class:`~tinyhw.transport.clock.Handover`, here :class:`ThreadGate`. Every enlisted
thread has its own time cursor (the enlisting one keeps the clock's shared cursor; a worker starts at the
enlisting thread's time), time is handed across (``catch_up``: what the worker does starts no earlier than when
it was handed over; the caller that waits for it continues no earlier than when it finished) and every enlisted
thread blocks only through the gate's condition, so the gate knows each thread's :class:`Phase`. An emulator calls
:meth:`VirtualClock.gate` before each transfer: it lets a thread's transfer run only when every other enlisted
thread is blocked or waiting at the gate with a later time, so the emulator sees the threads' transfers in
virtual-time order whatever the operating system's scheduling: the run is deterministic.

Two modes, named in every figure a bench prints:

* ``device`` (the default): a thread's time moves only by the emulator's modelled costs (the spec's per-transfer
  latencies, the pipes' busy-until times), by sleeps and by waits for another thread. The host's own CPU time is
  not on the clock: runs are exact and reproducible (the tests' mode).
* ``hybrid``: the same, plus the host's real CPU time. Each thread's time also moves by the CPU time the thread
  itself spent (``time.thread_time()``, measured) outside the emulator, i.e. in the driver code between its
  device interactions: staging copies, Python overhead, submission bookkeeping. It is charged at the thread's
  next contact with the clock (``now``, ``sleep``, ``catch_up``, ``wait_until``, entering :meth:`service`), so a
  thread's CPU work overlaps other threads' transfers only where it really runs beside them. The emulator brackets
  its own work on a driver's thread with :meth:`VirtualClock.service` (nothing inside is charged: the emulator's
  Python is not the host's cost) and marks threads of its own (an emulated queue's worker) ``host=False`` when
  enlisting them. Device time stays modelled. A board offers hybrid only if its emulator marks every access it
  services (``hybrid_ok``); figures on this clock are measured CPU + modelled device time, never bit-reproducible.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum

from tinyhw.transport.clock import Clock

MODES = ("device", "hybrid")


class Phase(Enum):
    """Where an enlisted thread stands, as the gate sees it."""

    RUN = "run"  # running, or woken and about to look: until it blocks or reaches the gate, nobody passes the gate
    IDLE = "idle"  # blocked in wait_until: waiting for another thread
    GATE = "gate"  # at the gate with a transfer, waiting for its turn


@dataclass
class Lane:
    """An enlisted thread's place on the clock."""

    order: int  # tie-break at equal times: the enlisting order
    cursor: float | None = None  # its own time line (a worker); None: the clock's shared cursor
    phase: Phase = Phase.RUN
    at: float = 0.0  # its time when it reached the gate (Phase.GATE)

    def lets_pass(self, at: float, order: int) -> bool:
        """Whether a thread at the gate with time ``at`` (enlisting order ``order``) may go before this one."""
        return self.phase is Phase.IDLE or (self.phase is Phase.GATE and (self.at, self.order) > (at, order))


@dataclass
class CpuLine:
    """A thread's host CPU bookkeeping on a hybrid clock."""

    mark: float | None = None  # its thread cpu time from which host time is still uncharged
    depth: int = 0  # service() nesting
    device_side: bool = False  # enlisted host=False: its cpu time is never host time


class ThreadGate:
    """The virtual clock's :class:`~tinyhw.transport.clock.Handover`, and the gate emulators pass (module docstring)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock
        self.cond = threading.Condition()
        self.lanes: dict[threading.Thread, Lane] = {}  # the enlisted threads

    def __enter__(self) -> object:
        return self.cond.__enter__()

    def __exit__(self, *exc: object) -> None:
        self.cond.__exit__(*exc)

    def cursor(self, thread: threading.Thread) -> float | None:
        """``thread``'s own time, or None when it is on the clock's shared cursor."""
        lane = self.lanes.get(thread)
        return None if lane is None else lane.cursor

    def enlist(self, thread: threading.Thread, *, host: bool = True) -> None:
        """Give ``thread`` (about to start) its own time line starting at the caller's time, and put the caller on the
        gate too; ``host=False`` marks an emulator's own thread, whose CPU time is never host time on a hybrid clock."""
        with self.cond:
            if not host:
                self.clock.cpu_line(thread).device_side = True
            me = threading.current_thread()
            if me not in self.lanes:
                self.lanes[me] = Lane(order=len(self.lanes))
            # about to start (Phase.RUN): it will block or reach the gate
            self.lanes[thread] = Lane(order=len(self.lanes), cursor=self.clock.now())

    def delist(self, thread: threading.Thread | None = None) -> None:
        """Take ``thread`` (the caller when None) off the gate; a thread that ends is forgotten by the clock. When only
        one thread on the shared cursor is left the gate is dropped."""
        with self.cond:
            t = thread or threading.current_thread()
            self.lanes.pop(t, None)
            if thread is not None:  # a thread that ends (the caller that delists itself keeps counting its cpu)
                self.clock.forget(t)
            if len(self.lanes) == 1 and next(iter(self.lanes.values())).cursor is None:
                self.lanes.clear()  # the last one left, on the shared cursor, needs no gate
            self.cond.notify_all()

    def catch_up(self, t: float) -> None:
        """Time handed across threads: the calling thread's time moves forward to ``t`` (seconds) when it is behind,
        charged as waiting."""
        gap = t - self.clock.now()
        if gap > 0:
            self.clock.charge(threading.current_thread(), gap, "wait")

    def wait_until(self, ready: Callable[[], bool]) -> None:
        """Block the calling thread until ``ready()`` holds, marked idle meanwhile so that threads at the gate may pass;
        on a hybrid clock its CPU time so far is charged first."""
        if self.clock.hybrid:
            self.clock.charge_cpu()  # what the thread computed before it blocks happened before it blocked
        me = threading.current_thread()
        while not ready():
            lane = self.lanes.get(me)
            if lane is not None:
                lane.phase = Phase.IDLE
                self.cond.notify_all()  # a thread at the gate may go now
            self.cond.wait()
        lane = self.lanes.get(me)
        if lane is not None:
            lane.phase = Phase.RUN

    def notify(self) -> None:
        """Wake every thread blocked in :meth:`wait_until` to look again (they count as running until they block again).
        """
        for lane in self.lanes.values():
            if lane.phase is Phase.IDLE:
                lane.phase = Phase.RUN  # it wakes and looks: until it blocks again nobody passes the gate
        self.cond.notify_all()

    def gate(self) -> None:
        """Return when the calling thread's transfer is the next in virtual-time order."""
        if not self.lanes:
            return
        me = threading.current_thread()
        with self.cond:
            lane = self.lanes.get(me)
            if lane is None:
                return
            lane.at, lane.phase = self.clock.now(), Phase.GATE
            self.cond.notify_all()
            while not all(other.lets_pass(lane.at, lane.order) for t, other in self.lanes.items() if t is not me):
                self.cond.wait()
            lane.phase = Phase.RUN


class _Service:
    """The context :meth:`VirtualClock.service` returns in hybrid mode (re-entrant per thread)."""

    def __init__(self, clock: VirtualClock) -> None:
        self.clock = clock

    def __enter__(self) -> None:
        line = self.clock.cpu_line(threading.current_thread())
        if not line.depth:
            self.clock.charge_cpu()
        line.depth += 1

    def __exit__(self, *exc: object) -> None:
        line = self.clock.cpu_line(threading.current_thread())
        line.depth = max(0, line.depth - 1)
        if not line.depth:
            line.mark = time.thread_time()  # host cpu time counts again from here


class _NoService:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SERVICE = _NoService()


class VirtualClock(Clock):
    """Simulated time, advanced by the emulator and by ``sleep`` (and in ``hybrid`` mode by host CPU time).

    Threads that are not enlisted (and the first thread of a pipeline) share one cursor; a worker thread a
    pipeline enlists (:meth:`handover`) has its own, starting at the enlisting thread's time. ``mode``:
    ``"device"`` or ``"hybrid"`` (module docstring); None: ``"device"`` until a measurement prefers another
    (:meth:`measuring`).
    """

    virtual = True
    hybrid_ok = False  # set by an emulator that brackets every access it services with service()

    def __init__(self, start: float = 0.0, *, mode: str | None = None) -> None:
        if mode is not None and mode not in MODES:
            raise ValueError(f"clock mode {mode!r} is not one of {', '.join(MODES)}")
        self._t = start
        self.threads = ThreadGate(self)
        self.fixed = mode is not None  # the user chose the mode: a measurement keeps it
        self.hybrid = mode == "hybrid"
        self._cpu: dict[threading.Thread, CpuLine] = {}
        self._service = _Service(self)
        self.accounts: dict[str, dict[str, float]] | None = None  # thread name -> seconds by kind (track())

    # -- time ------------------------------------------------------------------------------------------------
    def now(self) -> float:
        """The calling thread's virtual time in seconds: its own time line when enlisted, else the shared cursor (on a
        hybrid clock its host CPU time is charged first)."""
        if self.hybrid:
            self.charge_cpu()
        mine = self.threads.cursor(threading.current_thread())
        return self._t if mine is None else mine

    def sleep(self, seconds: float) -> None:
        """Advance the calling thread's virtual time by ``seconds`` without waiting in wall time (on a hybrid clock its
        host CPU time is charged first)."""
        if self.hybrid:
            self.charge_cpu()
        if seconds > 0:
            self.charge(threading.current_thread(), seconds, "sleep")

    def advance(self, seconds: float) -> None:
        """The emulator's modelled cost on the calling thread's time line."""
        if seconds > 0:
            self.charge(threading.current_thread(), seconds, "device")

    def charge(self, thread: threading.Thread, seconds: float, kind: str) -> None:
        """Move ``thread``'s time line by ``seconds`` of ``kind`` (``cpu``, ``device``, ``wait``, ``sleep``)."""
        lane = self.threads.lanes.get(thread)
        if lane is not None and lane.cursor is not None:
            lane.cursor += seconds
        else:
            self._t += seconds
        acc = self.accounts
        if acc is not None:
            mine = acc.get(thread.name)
            if mine is None:
                mine = acc[thread.name] = {"cpu": 0.0, "device": 0.0, "wait": 0.0, "sleep": 0.0}
            mine[kind] += seconds

    # -- threads ---------------------------------------------------------------------------------------------
    def handover(self) -> ThreadGate:
        """The clock's :class:`ThreadGate`, through which a driver enlists its worker threads."""
        return self.threads

    def gate(self) -> None:
        """Called by an emulator before it runs a transfer of the calling thread (:meth:`ThreadGate.gate`)."""
        self.threads.gate()

    # -- modes -----------------------------------------------------------------------------------------------
    @property
    def mode(self) -> str:
        """``device`` (modelled time only) or ``hybrid`` (plus the host's measured CPU time)."""
        return "hybrid" if self.hybrid else "device"

    def set_mode(self, mode: str) -> None:
        """Switch to ``device`` or ``hybrid``; CPU time counts from each thread's next contact with the clock.
        ValueError for an unknown mode, or ``hybrid`` on a board whose emulator does not mark the work it services."""
        if mode not in MODES:
            raise ValueError(f"clock mode {mode!r} is not one of {', '.join(MODES)}")
        if mode == "hybrid" and not self.hybrid_ok:
            raise ValueError("this emulated board does not mark the work it services: no hybrid clock on it")
        for line in list(self._cpu.values()):
            line.mark = None  # cpu time counts from each thread's next contact with the clock
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

    # -- host cpu time (hybrid) ------------------------------------------------------------------------------
    def service(self) -> _Service | _NoService:
        """``with clock.service():`` brackets an emulator's own work on the calling thread (not host CPU time)."""
        return self._service if self.hybrid else _NO_SERVICE

    def cpu_line(self, thread: threading.Thread) -> CpuLine:
        """``thread``'s host CPU bookkeeping, created on first use."""
        line = self._cpu.get(thread)
        if line is None:
            line = self._cpu.setdefault(thread, CpuLine())
        return line

    def forget(self, thread: threading.Thread) -> None:
        """``thread`` has ended: drop its cpu bookkeeping."""
        self._cpu.pop(thread, None)

    def charge_cpu(self) -> None:
        """Put the calling thread's host cpu time since its last contact with the clock on its time line."""
        me = threading.current_thread()
        line = self._cpu.get(me)
        if line is not None and (line.depth or line.device_side):
            return
        t = time.thread_time()
        if line is None:
            line = self.cpu_line(me)
        last, line.mark = line.mark, t
        if last is not None and t > last:
            self.charge(me, t - last, "cpu")
