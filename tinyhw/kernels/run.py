"""``kernels run``: one probe on tinygrad's CPU device or on an NVIDIA GPU, checked against the host's answer.

* ``cpu``: the probe is compiled now through :mod:`tinyhw.kernels.seam` (tinygrad's CPU device; needs clang)
  and timed with tinygrad's own per-kernel timer over several repeats.
* ``cuda:N``: the committed PTX (or a ``kernels build --target sm_90`` folder) is loaded with the CUDA driver
  API through the device object the caller hands in (a :class:`tinyhw.cuda.CudaDevice` from
  :func:`tinyhw.connect.open_cuda`; this feature never opens one), buffers are uploaded, every kernel launched
  with the manifest's grid and block sizes, timed with CUDA events, and the outputs read back. No compiler is
  needed. :func:`plan_cuda` checks everything that can be refused before the caller opens the GPU.

The measured figure (GB/s or TFLOP/s, from the best repeat) is reported with the device's theoretical peak
beside it where one is known; the result check is pass/fail against the host's expected answer.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.boards import registry
from tinyhw.errors import Refused
from tinyhw.kernels.probes import get_probe
from tinyhw.transport.devstr import parse_device

__all__ = ["CudaPlan", "is_amd_device", "parse_run_device", "plan_cuda", "run_cuda", "run_probe"]

AMD_VENDOR = 0x1002  # PCI vendor id of AMD

def is_amd_device(text: str) -> bool:
    """Whether a global --device names a board ``kernels run`` drives as an AMD GPU: an emulated board whose
    description has an AMD shader core (mock:navi31, mock:navi33 and their -usb forms), usb, pci:, vfio: (the GPU
    itself is checked once it is open). A malformed string is refused (exit 2) by the parser."""
    if text.strip().lower() == "cpu":
        return False
    spec = parse_device(text)
    if spec.kind == "mock":
        entry = registry.find(spec.kind, spec.target)
        board = entry.spec if entry is not None else None
        return board is not None and board.function.vendor_id == AMD_VENDOR and bool(board.engines.shader_core)
    return spec.kind in ("usb", "pci", "vfio")


def amd_mock_boards() -> list[str]:
    """The emulated boards, attached directly, that :func:`is_amd_device` accepts (``mock:navi31``, ``mock:navi33``;
    their ``-usb`` forms too), in registry order: what refusals list."""
    return [e.name for e in registry.boards() if e.opener == "direct" and is_amd_device(e.name)]


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


MAX_REPEATS = 1000


def _check_repeats(repeats: int) -> None:
    if repeats < 1:
        raise Refused("--repeats must be at least 1")
    if repeats > MAX_REPEATS:
        raise Refused(f"--repeats {repeats} is more than {MAX_REPEATS}")


def _summary(probe: Any, n: int, seconds: list[float]) -> dict:
    best = min(seconds) if seconds else None
    return {"seconds": [round(s, 9) for s in seconds], "best_s": best,
            "figure": round(probe.figure(n, best), 4) if best and probe.metric else None,
            "figure_kind": "measured" if probe.metric else None,
            "work_per_run": probe.work(n) if probe.metric else None}


def run_probe(name: str, device: str, repeats: int = 5, n: int | None = None) -> dict:
    """Run probe ``name`` on ``cpu`` (cuda:N goes through :func:`plan_cuda` and :func:`run_cuda`)."""
    probe = get_probe(name)
    kind, _ordinal = parse_run_device(device)
    if kind != "cpu":
        raise Refused("run_probe runs on the cpu; for cuda:N use plan_cuda() and run_cuda() with an open gpu")
    _check_repeats(repeats)
    if n is not None:
        probe.check_n(n)
    return _run_cpu(probe, probe.cpu_n if n is None else n, repeats)


@dataclass(frozen=True)
class CudaPlan:
    """A probe run on a GPU, checked before any driver call: the probe, its binaries and manifest entry."""

    probe: Any
    folder: Path
    manifest: dict
    entry: dict
    repeats: int


def plan_cuda(name: str, repeats: int = 5, n: int | None = None, build_dir: Path | None = None) -> CudaPlan:
    """Everything ``kernels run --device cuda:N`` refuses (exit 2), checked before the GPU is opened."""
    from tinyhw.kernels.manifest import load_manifest, prebuilt_dir, probe_entry

    probe = get_probe(name)
    _check_repeats(repeats)
    if n is not None:
        raise Refused("--n applies to cpu runs only: gpu binaries are built for a fixed size",
                      hint="rebuild with a different size in tinyhw.kernels.probes")
    folder = build_dir or prebuilt_dir() / "sm_90"
    man = load_manifest(folder)
    if man["target"] != "sm_90":
        raise Refused(f"{folder} holds {man['target']} binaries; cuda devices run sm_90 ptx")
    return CudaPlan(probe, folder, man, probe_entry(man, probe.name, str(folder / "manifest.json")), repeats)


def _run_cpu(probe: Any, n: int, repeats: int) -> dict:
    from tinyhw.kernels import seam
    tg = seam.load()
    result = seam.run_cpu(probe, n, repeats)
    extra: dict[str, Any] = {}
    if result.threads:
        check = probe.check_raced(n, result.outputs, result.threads, result.attempts)
        extra = {"threads": result.threads, "contention": result.contention, "attempts": result.attempts}
    else:
        check = probe.check(n, result.outputs)
    return {"probe": probe.name, "device": "cpu", "n": n, "metric": probe.metric,
            "check": {"ok": check.ok, "detail": check.detail}, **_summary(probe, n, result.seconds),
            "peak": None, "peak_note": "no theoretical peak is known for the host cpu (bench/bench_kernels.py "
                                       "compares with a numpy copy)",
            "kernels": result.kernels, **extra,
            "binary": f"compiled now by tinygrad {tg.version} (clang, cpu device)"
                      + (f", its {result.threads} threads run at once by tinyhw" if result.threads else "")}


def run_cuda(plan: CudaPlan, gpu: Any) -> dict:
    """Run ``plan`` on ``gpu`` (an open :class:`tinyhw.cuda.CudaDevice`, handed in and closed by the caller).
    Buffers and modules stay allocated on the device object, which releases them when it is closed."""
    from tinyhw.kernels.manifest_check import read_binary

    probe, folder, man, entry, repeats = plan.probe, plan.folder, plan.manifest, plan.entry, plan.repeats
    n = entry["n"]
    host = probe.inputs(n)
    peak = gpu.peak()
    ptrs = {}
    for b in entry["buffers"]:
        ptrs[b["name"]] = gpu.alloc(4 * b["count"])
        if b["role"] in ("in", "inout"):
            gpu.upload(ptrs[b["name"]], host[b["name"]])
    launches = []
    for k in entry["kernels"]:
        func = gpu.load_ptx(read_binary(folder, k, str(folder / "manifest.json")), k["name"])
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
    peak_value = {"GB/s": peak.gbps, "TFLOP/s": peak.tflops}.get(probe.metric or "")
    return {"probe": probe.name, "device": gpu.label, "gpu": peak.name, "cc": f"{peak.cc[0]}.{peak.cc[1]}",
            "driver_version": gpu.driver_version, "n": n, "metric": probe.metric,
            "check": {"ok": check.ok, "detail": check.detail}, **_summary(probe, n, seconds),
            "peak": round(peak_value, 2) if peak_value else None,
            "peak_note": "theoretical, from the driver's clock and width attributes",
            "kernels": len(launches), "binary": f"prebuilt sm_90 ptx from tinygrad {man['tinygrad']} ({folder})"}
