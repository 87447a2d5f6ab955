"""Batched register accesses: a list of independent operations run in order, in one message where it matters.

The optional :class:`Batching` ability (ARCHITECTURE.md "The transport seam") lets a
driver hand a transport a sequence of accesses whose order matters but whose results it needs only
later. Over a network (the ``remote:`` client) the whole sequence travels as one message, so a
4 KiB flash read costs one round trip instead of sixteen. Only what a driver needs is here: 32-bit
and block BAR accesses, config accesses, a wait on the device's clock, and a poll of a register on
the device side (so waiting for an engine's DONE bit needs no round trip of its own).

:func:`run_ops` executes a list on any transport through the plain seam; the remote server uses it.
:func:`check_ops` validates a list against a transport's BARs before anything runs (the server
rejects a bad batch without touching the device), and bounds the time the whole list may spend waiting
(:data:`MAX_BATCH_WAIT_S`), not only each operation's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from tinyhw.errors import Refused
from tinyhw.transport.base import Transport
from tinyhw.transport.wait import poll

#: Longest wait one operation may ask for (seconds): a sleep or a poll's timeout.
MAX_WAIT_S = 60.0
#: Longest one batch may spend waiting in the worst case (seconds): its sleeps plus its polls' timeouts. The
#: largest batch tinyhw's own drivers send is a streamed ROM_SW read over ``remote:``: 33 polls of DONE with a
#: 2 s timeout each (66 s); the client waits 300 s for a reply. Without this bound, 65,536 sleeps of 60 s, each
#: one acceptable, held the device for 45 days without the server reading from (or noticing the loss of) its peer.
MAX_BATCH_WAIT_S = 120.0


class W32(NamedTuple):
    """Write the 32-bit ``value`` at ``offset`` of memory BAR ``bar``."""

    bar: int
    offset: int
    value: int


class W(NamedTuple):
    """Write ``data`` (a multiple of 4 bytes) at ``offset`` of memory BAR ``bar``."""

    bar: int
    offset: int
    data: bytes


class R32(NamedTuple):
    """Read the 32-bit word at ``offset`` of memory BAR ``bar`` (result: an int)."""

    bar: int
    offset: int


class R(NamedTuple):
    """Read ``length`` bytes at ``offset`` of memory BAR ``bar`` (result: bytes)."""

    bar: int
    offset: int
    length: int


class Sleep(NamedTuple):
    """Wait ``seconds`` on the device's clock, at most :data:`MAX_WAIT_S`."""

    seconds: float


class Poll32(NamedTuple):
    """Read ``bar``/``offset`` until ``value & mask == expect``; time out after ``timeout`` s (DeviceTimeout)."""

    bar: int
    offset: int
    mask: int
    expect: int
    timeout: float
    interval: float
    what: str
    hint: str = ""


class CfgR(NamedTuple):
    """Read ``size`` (1, 2 or 4) bytes of config space at ``offset`` (result: an int)."""

    offset: int
    size: int


class CfgW(NamedTuple):
    """Write the low ``size`` (1, 2 or 4) bytes of ``value`` at ``offset`` of config space."""

    offset: int
    size: int
    value: int


Op = W32 | W | R32 | R | Sleep | Poll32 | CfgR | CfgW
#: Operations that produce a result (an int, or bytes for R).
RESULT_OPS = (R32, R, Poll32, CfgR)
#: Operations that change device state (``serve remote -v`` writes an audit line for a batch holding one).
WRITE_OPS = (W32, W, CfgW)


class Ticket(Protocol):
    """What :meth:`Batching.submit` returns: the handle on one submitted list's results."""

    def get(self) -> list[Any]:
        """Send what is queued (if not yet sent) and return the list's results in order; raises the first failed
        operation's error."""


@runtime_checkable
class Batching(Protocol):
    """A transport that queues operations and sends them together.

    ``submit(ops)`` queues ``ops`` after everything queued before (plain ``write32``/``write`` are
    queued too) and returns a ticket; ``ticket.get()`` sends what is queued, if it was not sent yet,
    and returns the results of ``ops`` (one per R32/R/Poll32/CfgR, in order). An error of any queued
    operation is raised by the ``get`` (or read) that sends it; the operations after it do not run.
    """

    def submit(self, ops: Sequence[Op]) -> Ticket:
        """Queue ``ops`` after everything queued before; returns the :class:`Ticket` of their results."""


@runtime_checkable
class BatchTimes(Protocol):
    """A batching transport whose far end times each batch it runs (``remote:``, a server listing ``batch_time``).

    ``batch_time()`` is None when the far end does not (an older server); else (seconds its clock advanced running
    the batches sent so far, summed; how many batches went untimed; whether that clock is virtual, i.e. the time is
    an emulator's modelled time). The time of a stretch of work is the difference of two readings, valid when the
    untimed count did not change in between."""

    def batch_time(self) -> tuple[float, int, bool] | None:
        """(summed far-end seconds, untimed batches, virtual clock) so far, or None (see the class)."""


def batch_wait(ops: Sequence[Op]) -> float:
    """The longest ``ops`` can spend waiting: the sum of their sleeps and of their polls' timeouts (seconds)."""
    return sum(op.seconds if isinstance(op, Sleep) else op.timeout for op in ops if isinstance(op, (Sleep, Poll32)))


def check_ops(transport: Transport, ops: Sequence[Op]) -> None:
    """Refuse (exit 2) a list with an access outside a memory BAR, misaligned, or with an absurd wait
    (one operation's over :data:`MAX_WAIT_S`, or all of them together over :data:`MAX_BATCH_WAIT_S`)."""
    for op in ops:
        if isinstance(op, (W32, R32, W, R, Poll32)):
            length = 4 if isinstance(op, (W32, R32, Poll32)) else (len(op.data) if isinstance(op, W) else op.length)
            transport.bar(op.bar).check(op.offset, length)
            if isinstance(op, W32) and not 0 <= op.value <= 0xFFFFFFFF:
                raise Refused(f"value 0x{op.value:x} does not fit 32 bits")
            if isinstance(op, Poll32) and not (0 <= op.timeout <= MAX_WAIT_S and 0 <= op.interval <= MAX_WAIT_S):
                raise Refused(f"poll timeout {op.timeout:g} s or interval {op.interval:g} s is outside "
                              f"0..{MAX_WAIT_S:g}")
        elif isinstance(op, Sleep):
            if not 0 <= op.seconds <= MAX_WAIT_S:
                raise Refused(f"wait of {op.seconds:g} s is outside 0..{MAX_WAIT_S:g}")
        elif isinstance(op, (CfgR, CfgW)):
            if op.size not in (1, 2, 4) or op.offset % op.size or not 0 <= op.offset <= 0x1000 - op.size:
                raise Refused(f"config access of {op.size} bytes at 0x{op.offset:x} is not naturally aligned "
                              "inside 0x1000 bytes")
        else:
            raise Refused(f"unknown batch operation {type(op).__name__}")
    total = batch_wait(ops)
    if total > MAX_BATCH_WAIT_S:
        raise Refused(f"batch of {len(ops)} operations may wait {total:.12g} s in all (sleeps plus poll timeouts), "
                      f"over the limit of {MAX_BATCH_WAIT_S:g} s per batch",
                      hint="send the waits in several batches")


def _poll32(transport: Transport, op: Poll32) -> int:
    region = transport.bar(op.bar)
    return poll(transport.clock, lambda: region.read32(op.offset), lambda v: v & op.mask == op.expect,
                timeout=op.timeout, interval=op.interval, what=op.what, hint=op.hint or None)


def run_ops(transport: Transport, ops: Sequence[Op]) -> list[Any]:
    """Execute ``ops`` in order through the plain seam; return the results of the result-producing ones."""
    out: list[Any] = []
    for op in ops:
        if isinstance(op, W32):
            transport.bar(op.bar).write32(op.offset, op.value)
        elif isinstance(op, R):
            out.append(transport.bar(op.bar).read(op.offset, op.length))
        elif isinstance(op, W):
            transport.bar(op.bar).write(op.offset, op.data)
        elif isinstance(op, R32):
            out.append(transport.bar(op.bar).read32(op.offset))
        elif isinstance(op, Sleep):
            transport.clock.sleep(op.seconds)
        elif isinstance(op, Poll32):
            out.append(_poll32(transport, op))
        elif isinstance(op, CfgR):
            out.append(transport.config_read(op.offset, op.size))
        elif isinstance(op, CfgW):
            transport.config_write(op.offset, op.size, op.value)
        else:
            raise Refused(f"unknown batch operation {type(op).__name__}")
    return out
