"""Progress of long operations: one interface the library reports to and the CLI draws.

Layer 1 (ARCHITECTURE.md). A long operation (a flash dump, a firmware copy, a boot) is "a task with a
total": it calls ``with progress.task(label, total) as advance:`` and ``advance(n)`` as work is done. The
library never prints; the CLI hands in a :class:`Progress` that draws a rich bar on a terminal.

The steps of a command (each task above, a boot step) are also announced through :func:`step` to whoever
:func:`listen` s: a recording (:mod:`tinyhw.transport.record`) turns them into marks on its timeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

_LISTENERS: list[Callable[[str, str], None]] = []


def listen(listener: Callable[[str, str], None]) -> Callable[[], None]:
    """Call ``listener(label, phase)`` for every :func:`step` from now on; returns the function that stops it."""
    _LISTENERS.append(listener)

    def stop() -> None:
        if listener in _LISTENERS:
            _LISTENERS.remove(listener)

    return stop


def step(label: str, phase: str = "point") -> None:
    """Announce a step of the running command: ``phase`` "start", "done" or "point" (a moment, not a span)."""
    for listener in list(_LISTENERS):
        listener(label, phase)


class Progress:
    """Where long operations report: ``start(label, total)``, ``advance(n)``, ``stop()``. This base is a no-op;
    subclasses draw. Use :meth:`task` rather than calling ``start``/``stop`` by hand."""

    def start(self, label: str, total: int) -> None:
        """Begin a task called ``label`` of ``total`` units (bytes, sectors...); nothing in this base."""
        pass

    def advance(self, n: int) -> None:
        """``n`` more units of the current task are done; nothing in this base."""
        pass

    def stop(self) -> None:
        """The current task ended (done or failed); nothing in this base."""
        pass

    @contextmanager
    def task(self, label: str, total: int) -> Iterator[Callable[[int], None]]:
        """One task with a total: started on entry, stopped on exit (also on errors); yields ``advance``."""
        step(label, "start")
        self.start(label, total)
        try:
            yield self.advance
        finally:
            self.stop()
            step(label, "done")


NO_PROGRESS = Progress()
