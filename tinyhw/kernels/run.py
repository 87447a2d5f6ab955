"""``kernels run``: one probe on tinygrad's CPU device or on an NVIDIA GPU, checked against the host's answer.

* ``cpu``: the probe is compiled now through :mod:`tinyhw.kernels.seam` (tinygrad's CPU device; needs clang)
  and timed with tinygrad's own per-kernel timer over several repeats.
* ``cuda:N``: the committed PTX (or a ``kernels build --target sm_90`` folder) is loaded with the CUDA driver
  API (:mod:`tinyhw.kernels.cuda`), buffers are uploaded, every kernel launched with the manifest's grid and
  block sizes, timed with CUDA events, and the outputs read back. No compiler is needed.

The measured figure (GB/s or TFLOP/s, from the best repeat) is reported with the device's theoretical peak
beside it where one is known; the result check is pass/fail against the host's expected answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.kernels.probes import get_probe
from tinyhw.transport.devstr import parse_device

__all__ = ["parse_run_device", "run_probe"]


def parse_run_device(text: str) -> tuple[str, int]:
    """``cpu`` or ``cuda:N`` -> (kind, ordinal); anything else is refused (exit 2)."""
    if text.strip().lower() == "cpu":
        return "cpu", 0
    spec = parse_device(text)
    if spec.kind != "cuda":
        raise Refused(f"kernels run takes --device cpu or cuda:N, not {text!r}",
                      hint="register transports (pci:, usb, mock:) cannot run kernels")
    if spec.options:
        raise Refused(f"cuda devices take no options (got {', '.join(spec.options)})")
    return "cuda", int(spec.target)


def _summary(probe: Any, n: int, seconds: list[float]) -> dict:
    best = min(seconds) if seconds else None
    return {"seconds": [round(s, 9) for s in seconds], "best_s": best,
            "figure": round(probe.figure(n, best), 4) if best and probe.metric else None}


def run_probe(name: str, device: str, repeats: int = 5, n: int | None = None, build_dir: Path | None = None) -> dict:
    probe = get_probe(name)
    kind, ordinal = parse_run_device(device)
    if repeats < 1:
        raise Refused("--repeats must be at least 1")
    if kind == "cpu":
        return _run_cpu(probe, n or probe.cpu_n, repeats)
    if n is not None:
        raise Refused("--n applies to cpu runs only: gpu binaries are built for a fixed size",
                      hint="rebuild with a different size in tinyhw.kernels.probes")
    return _run_cuda(probe, ordinal, repeats, build_dir)


def _run_cpu(probe: Any, n: int, repeats: int) -> dict:
    from tinyhw.kernels import seam

    tg = seam.load()
    result = seam.run_cpu(probe, n, repeats)
    check = probe.check(n, result.outputs)
    return {"probe": probe.name, "device": "cpu", "n": n, "metric": probe.metric,
            "check": {"ok": check.ok, "detail": check.detail}, **_summary(probe, n, result.seconds),
            "peak": None, "peak_note": "no theoretical peak is known for the host cpu (bench/bench_kernels.py "
                                       "compares with a numpy copy)",
            "kernels": result.kernels, "binary": f"compiled now by tinygrad {tg.version} (clang, cpu device)"}


def _run_cuda(probe: Any, ordinal: int, repeats: int, build_dir: Path | None) -> dict:
    from tinyhw.kernels.cuda import CudaDevice
    from tinyhw.kernels.manifest import load_manifest, prebuilt_dir, probe_entry

    folder = build_dir or prebuilt_dir() / "sm_90"
    man = load_manifest(folder)
    if man["target"] != "sm_90":
        raise Refused(f"{folder} holds {man['target']} binaries; cuda devices run sm_90 ptx")
    entry = probe_entry(man, probe.name)  # before any driver call: a missing probe is refused (exit 2)
    n = entry["n"]
    host = probe.inputs(n)
    gpu = CudaDevice(ordinal)
    try:
        peak = gpu.peak()
        ptrs = {}
        for b in entry["buffers"]:
            ptrs[b["name"]] = gpu.alloc(4 * b["count"])
            if b["role"] in ("in", "inout"):
                gpu.upload(ptrs[b["name"]], host[b["name"]])
        launches = []
        for k in entry["kernels"]:
            func = gpu.load_ptx((folder / k["file"]).read_bytes(), k["name"])
            launches.append((func, tuple(k["grid"]), tuple(k["block"]), [ptrs[a["buffer"]] for a in k["args"]]))

        def once() -> None:
            for func, grid, block, args in launches:
                gpu.launch(func, grid, block, args)

        once()
        gpu.synchronize()
        outputs = {b["name"]: gpu.download(ptrs[b["name"]], 4 * b["count"]) for b in entry["buffers"]
                   if b["role"] in ("out", "inout")}
        check = probe.check(n, outputs)
        seconds = gpu.timed(once, repeats)
    finally:
        gpu.close()
    peak_value = {"GB/s": peak.gbps, "TFLOP/s": peak.tflops}.get(probe.metric or "")
    return {"probe": probe.name, "device": f"cuda:{ordinal}", "gpu": peak.name, "cc": f"{peak.cc[0]}.{peak.cc[1]}",
            "driver_version": gpu.driver_version, "n": n, "metric": probe.metric,
            "check": {"ok": check.ok, "detail": check.detail}, **_summary(probe, n, seconds),
            "peak": round(peak_value, 2) if peak_value else None,
            "peak_note": "theoretical, from the driver's clock and width attributes",
            "kernels": len(launches), "binary": f"prebuilt sm_90 ptx from tinygrad {man['tinygrad']} ({folder})"}
