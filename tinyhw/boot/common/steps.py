"""The step log of a boot (``am boot``, ``nv boot``): named steps, each timed on the transport's clock.

Every step is reported to the progress output and to an ``on_step`` callback, and recorded with its time and the
USB transfers and bytes it cost; a tinyhw error raised inside a step gets the step's name added.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from tinyhw import progress
from tinyhw.errors import TinyhwError
from tinyhw.transport.base import Transport
from tinyhw.transport.clock import Clock


class Stepped(Protocol):
    """What :class:`StepLog` needs of a GPU (:class:`AmGpu`, NVIDIA's ``NvGpu``): its transport and that one's clock."""

    @property
    def transport(self) -> Transport:
        """The transport the GPU is reached through (its counters are read per step)."""

    @property
    def clock(self) -> Clock:
        """The transport's clock (each step is timed on it)."""


class StepLog:
    """Runs named steps, timing each on the transport clock; ``on_step(name, phase, detail)`` reports them."""

    def __init__(self, gpu: Stepped, on_step: Callable[[str, str, dict[str, Any]], None] | None = None) -> None:
        self.gpu = gpu
        self.on_step = on_step or (lambda *_: None)
        self.steps: list[dict[str, Any]] = []

    def run(self, name: str, fn: Callable[[], Any], **detail: Any) -> Any:
        """Run step ``name`` (``fn()``) and record its time on the transport clock, USB transfers and bytes out; a
        tinyhw error gets the step's name added. Returns what ``fn`` returned."""
        t0 = self.gpu.clock.now()
        c0 = self.gpu.transport.counters.copy()
        self.on_step(name, "start", detail)
        progress.step(f"boot: {name}", "start")
        try:
            result = fn()
        except TinyhwError as e:  # a disconnect or timeout names the access; say which boot step it cut
            e.add_context("step", name, f"(in boot step '{name}')")
            raise
        delta = self.gpu.transport.counters - c0
        doc = {"step": name, "seconds": round(self.gpu.clock.now() - t0, 6), **detail,
               "usb_transfers": delta.usb_transfers, "bytes_out": delta.bytes_out}
        if isinstance(result, dict):
            doc.update(result)
        self.steps.append(doc)
        progress.step(f"boot: {name}", "done")
        self.on_step(name, "done", doc)
        return result
