"""A bounded, in-order submission queue served by one worker thread (the USB copy-in's bulk transfers).

specs/asm24-usb-bridge.md §4.7 (the published host's asynchronous layer: transfers complete in submission order
per endpoint; the first failure is latched and every later wait raises it) and §12 item 12 (control and bulk
endpoints progress independently). pyusb offers only synchronous transfers; libusb is thread-safe and two
threads' synchronous transfers on different endpoints run concurrently, so a worker thread that makes the
bulk transfers lets the caller's control transfers overlap them. At most one transfer of this queue is in
flight at a time (the worker waits for each), so a transfer's fixed cost is not hidden behind the next one.

Rules: items run in submission order; ``submit`` blocks while ``depth`` items are outstanding; after an item
fails, the rest are dropped and every later ``submit``/``wait``/``close`` raises that error (once converted by
the caller's own code: the worker runs the caller's functions, which raise tinyhw errors); ``close`` waits for
everything, ``abort`` drops what has not started; either way the worker has ended when they return (it never
outlives the call that made it). All blocking and every hand-over of time goes through the clock's
:class:`~tinyhw.transport.clock.Handover`, so on an emulated board the caller and the worker each keep their own
virtual time and the run is deterministic (:mod:`tinyhw.mocks.common.vclock`); on the wall clock it is a plain
condition.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from tinyhw.transport.clock import Clock


class QueueLifetime:
    """What every queue of transfers shares: ``close()`` (wait for everything submitted, then release) on leaving
    a ``with`` block normally, ``abort()`` when it raised. Subclasses give ``submitted``, ``wait`` and ``abort``."""

    submitted = 0

    def wait(self, ticket: int) -> None:
        """Block until item ``ticket`` and all before it finished; raises the queue's latched failure."""
        raise NotImplementedError

    def abort(self) -> None:
        """Drop what has not started and release the queue; never raises."""
        raise NotImplementedError

    def close(self) -> None:
        """Wait for every item, then release; raises a failure no earlier wait raised."""
        try:
            self.wait(self.submitted)
        finally:
            self.abort()

    def __enter__(self) -> Any:
        return self

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


class WorkerBacked(QueueLifetime):
    """A queue whose transfers one :class:`SubmitQueue` worker (``self.q``) makes: waits and releases go to it."""

    q: SubmitQueue

    @property
    def submitted(self) -> int:  # type: ignore[override]
        """How many items were submitted so far (the last ticket handed out)."""
        return self.q.submitted

    def wait(self, ticket: int) -> None:
        """Block until item ``ticket`` and all before it finished (the worker's :meth:`SubmitQueue.wait`)."""
        self.q.wait(ticket)

    def close(self) -> None:
        """Wait for everything submitted, then end the worker; raises a failure not raised yet."""
        self.q.close()

    def abort(self) -> None:
        """Drop what has not started and end the worker (idempotent)."""
        self.q.abort()


class SubmitQueue(QueueLifetime):
    """``submit(fn, *args) -> ticket``; ``wait(ticket)``; ``close()`` or ``abort()`` (use as a context manager)."""

    def __init__(self, clock: Clock, *, depth: int = 4, name: str = "tinyhw-submit", host: bool = True) -> None:
        """``host=False``: the worker stands in for the device side (an emulated backend's queue), so on a hybrid
        clock its CPU time is not host time (:meth:`tinyhw.transport.clock.Handover.enlist`)."""
        self.clock, self.depth = clock, depth
        self.handover = h = clock.handover()
        self.items: deque[tuple[int, float, Callable[..., Any], tuple]] = deque()
        self.submitted = 0  # tickets handed out (1-based)
        self.finished = 0  # items done (in order)
        self.done_at: dict[int, float] = {}  # ticket -> the worker's time when it finished
        self.error: BaseException | None = None
        self.handed_at = 0.0  # the caller's time when the item now running was submitted
        self.stopping = False
        self.worker = threading.Thread(target=self._run, name=name, daemon=True)
        h.enlist(self.worker, host=host)
        self.worker.start()

    # -- caller side ---------------------------------------------------------------------------------------
    def submit(self, fn: Callable[..., Any], *args: Any) -> int:
        """Queue ``fn(*args)`` for the worker; returns its ticket, blocking while ``depth`` items are outstanding;
        raises an earlier item's failure."""
        with self.handover:
            self.handover.wait_until(lambda: self.error is not None or self.submitted - self.finished < self.depth)
            self._raise()
            # a slot freed when item (submitted + 1 - depth) finished: the caller goes on no earlier than that
            self.handover.catch_up(self.done_at.get(self.submitted + 1 - self.depth, 0.0))
            self.submitted += 1
            self.items.append((self.submitted, self.clock.now(), fn, args))
            self.handover.notify()
            return self.submitted

    def wait(self, ticket: int) -> None:
        """Until item ``ticket`` (and all before it) finished; the caller's time moves to when it did."""
        if ticket <= 0:
            return
        with self.handover:
            self.handover.wait_until(lambda: self.error is not None or self.finished >= ticket)
            self._raise()
            self.handover.catch_up(self.done_at.get(ticket, 0.0))

    def abort(self) -> None:
        """Drop what has not started, let the current item finish, end the worker (idempotent)."""
        with self.handover:
            self.stopping = True
            self.items.clear()
            self.handover.notify()
        if self.worker.is_alive() and self.worker is not threading.current_thread():
            with self.handover:
                self.handover.wait_until(lambda: not self.worker.is_alive() or self._ended)
            self.worker.join()
        self.handover.delist()

    def _raise(self) -> None:
        if self.error is not None:
            raise self.error

    # -- worker --------------------------------------------------------------------------------------------
    _ended = False

    def _run(self) -> None:
        clock, h = self.clock, self.handover
        try:
            while True:
                with h:
                    h.wait_until(lambda: bool(self.items) or self.stopping)
                    if not self.items:
                        return
                    ticket, stamp, fn, args = self.items.popleft()
                self.handed_at = stamp  # the item's function may look (an emulated queue: was the pipe busy then?)
                h.catch_up(stamp)  # handed over at the caller's time: nothing of it happens earlier
                try:
                    fn(*args)
                except BaseException as e:  # latched for the caller, who raises it (KeyboardInterrupt too)
                    with h:
                        self.error = e
                        self.items.clear()
                        h.notify()
                    return
                with h:
                    self.finished = ticket
                    self.done_at[ticket] = clock.now()
                    h.notify()
        finally:
            with h:
                self._ended = True
                h.delist(self.worker)
                h.notify()
