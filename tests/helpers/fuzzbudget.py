"""A time and memory budget for each case of a fuzz test: ``with budget(cpu_s=..., mem=...):`` around the case.

The CPU time is the process's own (``time.process_time``), never wall time, and bounds only what would be a
hang or a blow-up: a budget is generous, tens of times what a case costs. Memory is the peak of what Python and
numpy allocate inside the block (``tracemalloc``: per case, unlike the process's resident size, which never
shrinks); the scaling tests (tests/inputs/test_input_scaling.py) bound a child process's resident memory for the large
inputs. A case over its budget fails the test, naming what it spent.
"""

from __future__ import annotations

import contextlib
import time
import tracemalloc
from collections.abc import Iterator

MIB = 1 << 20


@contextlib.contextmanager
def budget(*, cpu_s: float = 2.0, mem: int = 64 * MIB, what: str = "case") -> Iterator[None]:
    """Fail when the block spends more than ``cpu_s`` seconds of CPU or allocates more than ``mem`` bytes at peak."""
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    tracemalloc.reset_peak()
    base = tracemalloc.get_traced_memory()[0]
    t0 = time.process_time()
    try:
        yield
    finally:
        cpu = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1] - base
        if started:
            tracemalloc.stop()
    assert cpu <= cpu_s, f"{what} took {cpu:.2f} s of cpu, over its {cpu_s} s budget"
    assert peak <= mem, f"{what} allocated {peak / MIB:.1f} MiB at peak, over its {mem / MIB:.0f} MiB budget"
