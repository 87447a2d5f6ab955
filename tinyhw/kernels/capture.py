"""``prof capture``: a probe kernel run under the SQ thread trace on an AMD GPU tinyhw booted, saved as a capture.

The composition lives here because it needs both halves: the probe (its committed gfx1100 code object, inputs
and check, :mod:`tinyhw.kernels.amd`) and the engines (the compute queue of :mod:`tinyhw.boot.amd.compute`, the thread
trace of :mod:`tinyhw.boot.amd.sqtt`). :func:`plan_capture` refuses everything it can before a device is opened (the
probe, the element count, the output directory: exit 2); :func:`run_capture` is handed the open transport,
checks the GPU (AMD, gc 11, booted by tinyhw: else exit 2), programs the trace, runs the probe once, stops the
trace, checks the probe's result, and writes the directory in the plain-file form ``tinyhw prof`` reads
(specs/sqtt-pmc.md §7 fields; the layout of tests/data/sqtt/*/*/): ``capture.json``, one
``sqtt_kern0_exec1_se<N>.bin`` per shader engine and ``program_0_<kernel>.elf``, and with counters
``pmc_kern0_exec1.bin`` (:mod:`tinyhw.boot.amd.perfmon`, the same dispatch). Times in the trace are shader
cycles: modelled by the emulated board's shader core, measured on hardware (``capture.json`` says which).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tinyhw.errors import Refused
from tinyhw.fileio import atomic_write_dir, check_output_dir
from tinyhw.kernels.amd import EMULATED_GROUPS, AmdPlan, plan_amd
from tinyhw.transport.base import Transport

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

__all__ = ["CapturePlan", "capture_probe", "plan_capture", "run_capture"]

KiB = 1 << 10
GFX1100 = 110000


@dataclass(frozen=True)
class CapturePlan:
    """A checked ``prof capture``: the probe run, the output directory, the trace buffer size and SIMD."""

    run: AmdPlan
    out: Path
    buffer_bytes: int | None
    simd: int
    counters: tuple[str, ...] = ()


def plan_capture(name: str, out: str | Path, *, n: int | None = None, buffer_kib: int | None = None,
                 simd: int = 0, counters: str | None = None, build_dir: Path | None = None) -> CapturePlan:
    """Refusals before a device is opened (exit 2): an unknown probe or a bad ``n`` (as ``kernels run``), an
    output directory that exists non-empty or is not a directory, a buffer size or SIMD out of range, an unknown
    counter or more than the block's counter registers (``counters``: comma-separated names or ``default``)."""
    from tinyhw.boot.amd.perfmon import parse_counters

    run = plan_amd(name, 1, n, build_dir)
    names = parse_counters(counters) if counters is not None else ()
    target = check_output_dir(out, what="capture directory")
    if buffer_kib is not None and (isinstance(buffer_kib, bool) or not isinstance(buffer_kib, int)
                                   or not 4 <= buffer_kib <= 5 * 1024 or buffer_kib % 4):
        raise Refused(f"--buffer-kib {buffer_kib!r}: a multiple of 4 from 4 to 5120 (KiB per shader engine)")
    if isinstance(simd, bool) or not isinstance(simd, int) or not 0 <= simd <= 3:
        raise Refused(f"--simd {simd!r}: a WGP has SIMDs 0 .. 3")
    return CapturePlan(run, target, None if buffer_kib is None else buffer_kib * KiB, simd, names)


def _props(gpu: AmGpu, shader_engines: int) -> dict[str, int]:
    """The device properties ``prof`` reads (the names of tinygrad's ProfileDeviceEvent, §7), from discovery."""
    from tinyhw.boot.amd.identify import gc_info

    info = gc_info(gpu) or {}
    d = info.get("derived") or {}
    arrays = d.get("shader_arrays") or 2 * shader_engines
    cus = d.get("cus_per_array") or 8
    gc = gpu.ip_version("gc")  # gfx_target_version is the GC version's digits: 11.0.2 -> 110002 (gfx1102)
    target = gc[0] * 10000 + gc[1] * 100 + gc[2] if gc else GFX1100
    return {"gfx_target_version": target, "array_count": arrays, "simd_arrays_per_engine": arrays // shader_engines,
            "cu_per_simd_array": cus, "simd_count": 2 * cus * arrays, "simd_per_cu": 2,
            "max_waves_per_simd": d.get("max_waves_per_simd") or 16, "lds_size_in_kb": d.get("lds_kib") or 64,
            "num_xcc": d.get("xccs") or 1}


def _shader_engines(gpu: AmGpu) -> int:
    from tinyhw.boot.amd.identify import gc_info

    se = ((gc_info(gpu) or {}).get("derived") or {}).get("shader_engines") or 6
    return int(se)


def run_capture(plan: CapturePlan, transport: Transport, *, timeout: float = 10.0) -> dict[str, Any]:
    """Run ``plan`` on the GPU behind ``transport`` (handed in and closed by the caller); write the capture."""
    from tinyhw.boot.amd.compute import CODE, check_booted, load_code_object, open_compute, va
    from tinyhw.boot.amd.perfmon import PerfCounters
    from tinyhw.boot.amd.sqtt import DEFAULT_BUFFER, ThreadTrace, TraceSetup
    from tinyhw.formats.elf import parse_elf
    from tinyhw.kernels.manifest_check import read_binary

    emulated = transport.emulated
    gpu = check_booted(transport, "prof capture runs on")  # refusals (not amd, other gc, not booted) first
    r = plan.run
    probe, entry = r.probe, r.entry
    k = entry["kernels"][0]
    n = r.n or (min(entry["n"], EMULATED_GROUPS * r.per_group) if emulated else entry["n"])
    binary = read_binary(r.folder, k, str(r.folder / "manifest.json"))
    kernel = load_code_object(binary, k["name"])
    ses = _shader_engines(gpu)
    setup = TraceSetup(shader_engines=ses, buffer_bytes=plan.buffer_bytes or DEFAULT_BUFFER, simd_sel=plan.simd)
    setup.check()
    host = probe.inputs(n)
    bufs = {b.name: b for b in probe.buffers(n)}
    order = [a["buffer"] for a in k["args"]]
    engine = open_compute(transport, timeout=timeout, gpu=gpu)
    trace = ThreadTrace(gpu, setup)
    pmc = PerfCounters(gpu, plan.counters, ses) if plan.counters else None
    try:
        trace.start()
        before = trace.before_dispatch()
        if pmc is not None:
            pmc.start()
            before += pmc.before_dispatch()
        data = [host.get(name, bytes(bufs[name].nbytes)) for name in order]
        run = engine.run(kernel, (n // r.per_group, 1, 1), tuple(k["block"]), data,
                         before=before, after=trace.after_dispatch())
        ses_out = trace.stop()
        pmc_blob, pmc_samples = pmc.read() if pmc is not None else (b"", [])
    finally:
        engine.close()
    outputs = {name: run.outputs[i] for i, name in enumerate(order) if bufs[name].role in ("out", "inout")}
    check = probe.check(n, outputs)
    elf = parse_elf(binary)
    text = elf.section(".text")
    base = va(CODE) - (text.addr if text is not None and elf.file_type != 1 else 0)
    kind = "modelled" if emulated else "measured"
    device = f"emulated {gpu.asic.name}" if emulated else transport.name
    program = f"program_0_{kernel.name}.elf"
    files: dict[str, bytes] = {program: binary}
    sqtt = []
    for s in ses_out:
        fname = f"sqtt_kern0_exec1_se{s.se}.bin"
        files[fname] = s.data
        sqtt.append({"device": "AMD", "kern": 0, "exec_tag": 1, "se": s.se, "itrace": s.itrace, "file": fname,
                     "bytes": len(s.data), "overflow": s.overflow})
    pmc_entries = []
    if pmc is not None:
        files["pmc_kern0_exec1.bin"] = pmc_blob
        pmc_entries.append({"device": "AMD", "kern": 0, "exec_tag": 1, "samples": pmc_samples,
                            "file": "pmc_kern0_exec1.bin"})
    meta = {"source": f"tinyhw prof capture {probe.name} on {device}",
            "tinyhw": {"probe": probe.name, "device": device, "n": n, "grid": list(run.grid),
                       "block": list(run.block), "check": {"ok": check.ok, "detail": check.detail},
                       "cycles": kind, "buffer_bytes": setup.buffer_bytes, "simd": setup.simd_sel,
                       "itrace_se_mask": setup.itrace_se_mask},
            "devices": [{"device": "AMD", "props": _props(gpu, ses)}],
            "programs": [{"device": "AMD", "name": kernel.name, "base": base, "tag": 0, "file": program}],
            "sqtt": sqtt, "pmc": pmc_entries}
    files["capture.json"] = (json.dumps(meta, indent=1) + "\n").encode()
    atomic_write_dir(plan.out, files)
    return {"probe": probe.name, "device": device, "out": str(plan.out), "n": n, "kernel": kernel.name,
            "check": {"ok": check.ok, "detail": check.detail}, "cycles": kind,
            "shader_engines": [{"se": s.se, "itrace": s.itrace, "bytes": len(s.data), "overflow": s.overflow}
                               for s in ses_out],
            "counters": list(plan.counters), "files": sorted(files)}


def capture_probe(name: str, out: str | Path, transport: Transport, *, n: int | None = None,
                  buffer_kib: int | None = None, simd: int = 0, counters: str | None = None,
                  timeout: float = 10.0) -> dict[str, Any]:
    """The library's one call: :func:`plan_capture` and :func:`run_capture` on an open transport
    (``tinyhw.open(...)``'s ``.transport``), e.g. ``capture_probe("pattern", "/tmp/cap", opened.transport)``."""
    return run_capture(plan_capture(name, out, n=n, buffer_kib=buffer_kib, simd=simd, counters=counters), transport,
                       timeout=timeout)
