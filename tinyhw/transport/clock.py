"""Clocks that drivers wait on.

Drivers never call ``time.sleep`` or ``time.monotonic`` directly: they use the transport's clock, which has
``now()`` in seconds and ``sleep(seconds)``. On hardware that is :class:`WallClock`; on an emulated board it is
the board's virtual clock (:mod:`tinyhw.mocks.common.vclock`), which every access advances by the modelled latency, so
waits and time-outs are deterministic and counts reproducible. ``virtual`` says which kind a clock is.

One more thing a driver needs, and only where it runs a worker thread (the bulk queue's fallback,
:mod:`tinyhw.transport.submitq`): a way for its threads to hand work to one another, :meth:`Clock.handover`.
On the wall clock that is a plain condition variable (enlisting, delisting and handing time over do nothing);
a virtual clock gives each enlisted thread its own time line and sees when each is blocked, which it needs to
let the threads' transfers reach the emulator in virtual-time order. How it does that is the emulator's
business (:mod:`tinyhw.mocks.common.vclock`); drivers see only the :class:`Handover` interface.

A clock with modes a measurement may choose between (the emulator's device or hybrid time) says so by
providing :class:`Measuring`; the copy bench asks for it explicitly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Protocol, runtime_checkable


class Handover(Protocol):
    """How one clock's threads hand work to one another (a producer and the worker it feeds).

    ``with handover:`` holds the lock every participant holds while it looks at or changes the state they share;
    inside it, :meth:`wait_until` blocks (releasing the lock) until ``ready()`` and only :meth:`notify` wakes
    the waiters. :meth:`enlist` a worker (not yet started) before starting it, :meth:`delist` it when it ends;
    :meth:`catch_up` moves the calling thread's time to no earlier than ``t``, a time another thread handed
    over (when the work was submitted, or when it finished).
    """

    def __enter__(self) -> object: ...

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None: ...

    def enlist(self, thread: threading.Thread, *, host: bool = True) -> None:
        """``thread`` and the calling thread take part from now on; ``host=False``: ``thread`` stands in for the
        device side (an emulator's own worker), so its CPU time is never host time."""

    def delist(self, thread: threading.Thread | None = None) -> None:
        """``thread`` (default: the calling one) no longer takes part."""

    def wait_until(self, ready: Callable[[], bool]) -> None:
        """Block (holding the lock) until ``ready()``."""

    def notify(self) -> None:
        """Wake the threads blocked in :meth:`wait_until` (call holding the lock)."""

    def catch_up(self, t: float) -> None:
        """The calling thread's next step happens no earlier than ``t``."""


class ThreadHandover:
    """:class:`Handover` for a clock that needs nothing but the operating system's scheduling: a condition."""

    def __init__(self) -> None:
        self._cond = threading.Condition()

    def __enter__(self) -> object:
        return self._cond.__enter__()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._cond.__exit__(exc_type, exc, tb)

    def enlist(self, thread: threading.Thread, *, host: bool = True) -> None:
        """Nothing to do: real time needs no bookkeeping of who takes part."""

    def delist(self, thread: threading.Thread | None = None) -> None:
        """Nothing to do (see :meth:`enlist`)."""

    def wait_until(self, ready: Callable[[], bool]) -> None:
        """Block on the condition (releasing it while blocked) until ``ready()``."""
        while not ready():
            self._cond.wait()

    def notify(self) -> None:
        """Wake every thread blocked in :meth:`wait_until` (call holding the lock)."""
        self._cond.notify_all()

    def catch_up(self, t: float) -> None:
        """Nothing to do: real time is already past anything another thread handed over."""


class Clock:
    """Interface: ``now()`` in seconds and ``sleep(seconds)``; ``virtual``: modelled rather than real time."""

    virtual = False

    def now(self) -> float:
        """The time in seconds since an arbitrary start (monotonic)."""
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` on this clock (a virtual clock just advances)."""
        raise NotImplementedError

    def handover(self) -> Handover:
        """What a driver's threads use to hand work to one another on this clock (module docstring)."""
        return ThreadHandover()


class WallClock(Clock):
    """Real time (monotonic)."""

    def now(self) -> float:
        """``time.monotonic()``, in seconds."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """``time.sleep(seconds)``; nothing for zero or negative."""
        if seconds > 0:
            time.sleep(seconds)


@runtime_checkable
class Measuring(Protocol):
    """A clock with modes: ``with clock.measuring(preferred) as mode:`` runs one measurement in ``preferred``
    where the clock allows it (else its own mode), yields the mode in effect, and restores the previous one."""

    def measuring(self, preferred: str = "hybrid") -> AbstractContextManager[str]:
        """A context manager running one measurement in mode ``preferred`` where allowed; yields the mode in effect."""
