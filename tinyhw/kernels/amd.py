"""``kernels run`` on an AMD GPU tinyhw booted: the committed gfx1100 binary through :mod:`tinyhw.boot.amd.compute`.

:func:`plan_amd` checks everything that can be refused before a device is opened (the probe, its gfx1100 binary in
the manifest, the element count); :func:`run_amd` is handed the open transport (this tool never opens one), checks
the GPU (an AMD gc 11 board a tinyhw boot brought up: else exit 2), creates the compute queue, uploads the probe's
inputs, dispatches every kernel of the probe, reads the outputs back and checks them against the host's answer.

Element counts: a committed binary is built for the manifest's ``n`` with no bounds check, so a run with fewer
workgroups computes a prefix of the full output; ``--n`` picks a multiple of the elements one workgroup computes,
up to the manifest's ``n``. On an emulated board the default is :data:`EMULATED_GROUPS` workgroups (the shader
core is an interpreter); on hardware the manifest's ``n``. The time is the fence wait on the transport's clock:
"modelled" on an emulated board (its board clock), "measured" on hardware.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.kernels.probes import get_probe
from tinyhw.transport.base import Transport

EMULATED_GROUPS = 32
MAX_REPEATS = 100


@dataclass(frozen=True)
class AmdPlan:
    """A checked ``kernels run`` on an AMD GPU, before the device is opened: the probe, the build folder and its
    manifest (the probe's entry), the element count, timed repeats and work-items per workgroup."""

    probe: Any
    folder: Path
    manifest: dict
    entry: dict
    n: int | None  # None: the default for the board (decided once it is known to be emulated or not)
    repeats: int
    per_group: int


def plan_amd(name: str, repeats: int = 1, n: int | None = None, build_dir: Path | None = None) -> AmdPlan:
    """Refusals of ``kernels run`` on an AMD device (exit 2), before the device is opened."""
    from tinyhw.kernels.manifest import load_manifest, prebuilt_dir, probe_entry

    probe = get_probe(name)
    if not 1 <= repeats <= MAX_REPEATS:
        raise Refused(f"--repeats {repeats}: an amd gpu run takes 1 .. {MAX_REPEATS}")
    folder = build_dir or prebuilt_dir() / "gfx1100"
    man = load_manifest(folder)
    if man["target"] != "gfx1100":
        raise Refused(f"{folder} holds {man['target']} binaries; navi3x gpus run gfx1100 code objects")
    entry = probe_entry(man, probe.name, str(folder / "manifest.json"))
    if len(entry["kernels"]) != 1:
        raise Refused(f"probe {name} has {len(entry['kernels'])} kernels; tinyhw runs one-kernel probes on amd gpus")
    k = entry["kernels"][0]
    groups = k["grid"][0] * k["grid"][1] * k["grid"][2]
    if k["grid"][1] != 1 or k["grid"][2] != 1 or entry["n"] % groups:
        raise Refused(f"probe {name}'s grid {tuple(k['grid'])} cannot be cut to fewer workgroups")
    per = entry["n"] // groups
    if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not per <= n <= entry["n"] or n % per):
        raise Refused(f"probe {name} on an amd gpu cannot take --n {n!r}",
                      hint=f"--n: a multiple of {per} (one workgroup) from {per} to {entry['n']}")
    return AmdPlan(probe, folder, man, entry, n, repeats, per)


def run_amd(plan: AmdPlan, transport: Transport, *, timeout: float = 10.0, buffer_path: str = "auto") -> dict:
    """Run ``plan`` on the GPU behind ``transport`` (handed in and closed by the caller); the buffers travel over
    ``buffer_path`` (:mod:`tinyhw.boot.amd.buffers`: the copy engine where there is one, verified through the BAR)."""
    from tinyhw.boot.amd.buffers import open_buffer_path
    from tinyhw.boot.amd.compute import check_booted, load_code_object, open_compute
    from tinyhw.kernels.manifest_check import read_binary

    emulated = transport.emulated
    gpu = check_booted(transport)  # refusals (not amd, other gc, not booted) before anything is written
    probe, entry = plan.probe, plan.entry
    k = entry["kernels"][0]
    n = plan.n or (min(entry["n"], EMULATED_GROUPS * plan.per_group) if emulated else entry["n"])
    kernel = load_code_object(read_binary(plan.folder, k, str(plan.folder / "manifest.json")), k["name"])
    host = probe.inputs(n)
    bufs = {b.name: b for b in probe.buffers(n)}
    order = [a["buffer"] for a in k["args"]]
    engine = open_compute(transport, timeout=timeout, gpu=gpu)
    seconds = []
    run = None
    with engine:
        path = engine.buffers = open_buffer_path(transport, gpu, engine.copy_engine, buffer_path)
        try:
            for _ in range(plan.repeats):
                data = [host.get(name, bytes(bufs[name].nbytes)) for name in order]
                run = engine.run(kernel, (n // plan.per_group, 1, 1), tuple(k["block"]), data)
                seconds.append(run.seconds)
        finally:
            path.close()
    assert run is not None
    outputs = {name: run.outputs[i] for i, name in enumerate(order) if bufs[name].role in ("out", "inout")}
    check = probe.check(n, outputs)
    best = min(seconds)
    kind = "modelled" if emulated else "measured"
    return {"probe": probe.name, "device": transport.name if not emulated else f"emulated {gpu.asic.name}", "n": n,
            "metric": probe.metric, "check": {"ok": check.ok, "detail": check.detail},
            "seconds": [round(s, 9) for s in seconds], "best_s": best,
            "figure": round(probe.figure(n, best), 4) if probe.metric and best > 0 else None,
            "figure_kind": kind, "work_per_run": probe.work(n) if probe.metric else None,
            "peak": None, "peak_note": f"time {kind}: the dispatch's fence on the transport's clock"
                                       + (" (the emulator's board clock, not a performance model)"
                                          if emulated else ""),
            "kernels": 1, "grid": list(run.grid), "block": list(run.block),
            "binary": f"prebuilt gfx1100 code object from tinygrad {plan.manifest['tinygrad']} ({plan.folder})",
            "buffer_path": {**path.summary(), "time_kind": kind}}


def run_amd_probe(name: str, transport: Transport, *, n: int | None = None, repeats: int = 1, timeout: float = 10.0,
                  build_dir: Path | None = None) -> dict:
    """The library's one call: :func:`plan_amd` and :func:`run_amd` on an open transport (``tinyhw.open(...)``'s
    ``.transport``), e.g. ``run_amd_probe("pattern", opened.transport, n=4096)``."""
    return run_amd(plan_amd(name, repeats, n, build_dir), transport, timeout=timeout)
