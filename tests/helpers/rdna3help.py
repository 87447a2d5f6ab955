"""Run tinyhw's committed gfx1100 probe binaries on the emulated RDNA3 shader core (flat memory, small grids).

Each helper places the code object, the buffers and the kernarg segment in a FlatMemory, derives the
COMPUTE_* registers from the kernel descriptor (tinyhw.mocks.rdna3.launch, written from the spec) and
returns the output bytes with the dispatch's counters. Grids are cut to a few workgroups: the probe
kernels have no bounds checks, so a smaller grid computes a prefix of the full output.
"""

from __future__ import annotations

import json
import struct
import time

import numpy as np
from testpaths import ROOT

from tinyhw.kernels.probes import FMA_A, FMA_B, FMA_PERIOD, FMA_STEPS, PROBES
from tinyhw.mocks.rdna3 import DispatchResult, FlatMemory, dispatch_regs, load_kernel, run_dispatch

PREBUILT = ROOT / "tinyhw" / "kernels" / "prebuilt" / "gfx1100"
#: probe name -> its committed code object (from the build manifest, so a rebuilt probe is picked up)
ELF = {p["name"]: p["kernels"][0]["file"]
       for p in json.loads((PREBUILT / "manifest.json").read_text())["probes"]}
BASE = 0x7F00_0000_0000


def run_probe(name: str, groups: int = 8, timer: list[float] | None = None,
              **kw: object) -> tuple[dict[str, bytes], int, DispatchResult]:
    """(outputs by buffer name, elements computed, result) for ``groups`` workgroups of the probe.

    ``timer`` (a list) gets the wall time of the dispatch itself appended (setup and copies excluded).
    """
    mem = FlatMemory(BASE, 32 << 20)
    k = load_kernel((PREBUILT / ELF[name]).read_bytes(), mem)
    probe = PROBES[name]
    if name == "atomic":
        grid, block = (groups, 1, 1), (256, 1, 1)
        n = groups * 256
    else:
        grid, block = (groups, 1, 1), (32, 1, 1)
        n = groups * 128
    inputs = probe.inputs(n)
    bufs: dict[str, int] = {}
    sizes: dict[str, int] = {}
    for b in probe.buffers(n):
        raw = inputs.get(b.name, bytes(b.nbytes))
        bufs[b.name] = mem.alloc(raw)
        sizes[b.name] = len(raw)
    order = [b.name for b in probe.buffers(n)]
    kernarg = mem.alloc(b"".join(struct.pack("<Q", bufs[o]) for o in order), align=64)
    regs = dispatch_regs(k.kd, k.entry, kernarg, grid, block)
    t0 = time.perf_counter()
    res = run_dispatch(regs, mem, **kw)  # type: ignore[arg-type]
    if timer is not None:
        timer.append(time.perf_counter() - t0)
    outs = {o: mem.read(bufs[o], sizes[o]) for o in order}
    return outs, n, res


def fma_expected() -> np.ndarray:
    """The fused answer per input class: x*A exact in float64, + B exact too, one rounding to float32."""
    seeds = np.arange(FMA_PERIOD, dtype=np.float64)
    x = seeds.astype(np.float32)
    for _ in range(FMA_STEPS):
        x = (x.astype(np.float64) * FMA_A + FMA_B).astype(np.float32)
    return x
