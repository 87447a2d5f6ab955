"""Built probe kernels on disk: one folder per target with the binaries and a ``manifest.json``.

The manifest names, for each probe, its buffers (name, element type, count, in/out), the work per run, and
for each kernel: name, file, grid (workgroups / thread blocks) and block (threads) sizes, the buffer bound to
each pointer parameter in order, sha256 of the rendered source and of the binary, the tinygrad version, and
for gfx targets the libLLVM major version that compiled them. GPU kernels also record the single-precision
FMAs one thread executes, counted in the binary (``fma.rn.f32`` in the PTX; ``v_fma_f32``, ``v_fmac_f32``,
``v_fmamk``/``v_fmaak`` and the VOPD halves in the RDNA code, with tinyhw's own decoder), and a FLOP/s probe
whose formula does not equal 2 x FMAs x threads is not built: the figure counts what the kernel does.
AMD binaries are checked with tinyhw's own ELF reader (:mod:`tinyhw.formats.amdgpu_code`): machine, the
generation in ``e_flags``, and the kernel descriptor (kernarg size = 8 bytes per pointer, no LDS, wave32).
Nothing here imports tinygrad: the committed binaries under ``prebuilt/`` are used without a compiler.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path
from typing import Any

from tinyhw.errors import EnvironmentProblem, OperationFailed, Refused
from tinyhw.fileio import atomic_write, check_output_path
from tinyhw.formats.amdgpu_code import parse_amdgpu_code
from tinyhw.formats.amdisa import count_f32_fma, decode_text, isa_family, text_section
from tinyhw.kernels.probes import PROBES, Probe

__all__ = ["FORMAT", "GPU_TARGETS", "build_target", "check_amd_binary", "load_manifest", "prebuilt_dir", "write_build"]

FORMAT = "tinyhw-kernels/1"
GPU_TARGETS = ("sm_90", "gfx1100", "gfx1200")  # the targets whose binaries are committed
SUFFIX = {"sm_90": "ptx", "gfx1100": "elf", "gfx1200": "elf", "cpu": "o"}


def prebuilt_dir() -> Path:
    """The folder of the committed probe binaries (``tinyhw/kernels/prebuilt``, one subfolder per target)."""
    return Path(__file__).parent / "prebuilt"


def _sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def check_amd_binary(binary: bytes, target: str, kernel: str, nargs: int) -> tuple[dict, list[str]]:
    """Validate an AMDGPU ELF for ``target``; return its kernel descriptor document and the problems found."""
    obj = parse_amdgpu_code(binary)
    problems = list(obj.problems)
    if obj.arch != target:
        problems.append(f"e_flags generation is {obj.arch or hex(obj.mach)}, expected {target}")
    kd = obj.kernels.get(kernel)
    if kd is None:
        problems.append(f"no kernel descriptor {kernel}.kd")
        return {}, problems
    if kd.kernarg_size != 8 * nargs:
        problems.append(f"kernarg size {kd.kernarg_size}, expected {8 * nargs} ({nargs} pointers)")
    if kd.lds_bytes:
        problems.append(f"uses {kd.lds_bytes} bytes of lds (the probes use none)")
    if not kd.wave32:
        problems.append("not compiled for wave32")
    if not kd.kernarg_ptr:
        problems.append("the kernarg segment pointer is not enabled")
    return {"arch": obj.arch, "text_bytes": obj.text_size, **kd.to_doc()}, problems


_PTX_FMA = re.compile(rb"^\s*fma\.rn\.f32\s", re.M)
_PTX_BRANCH = re.compile(rb"^\s*(?:@%?\w+\s+)?bra(?:\.uni)?\s", re.M)


def count_fma(target: str, binary: bytes) -> int | None:
    """Single-precision FMAs one thread executes in a loop-free GPU kernel, counted in its binary; None for
    the cpu target (x86 code is not counted) and for code with a branch (a static count is not the work)."""
    if target == "sm_90":
        return None if _PTX_BRANCH.search(binary) else len(_PTX_FMA.findall(binary))
    if target.startswith("gfx"):
        found = text_section(binary)
        if found is None:
            return None
        fam = isa_family(target)
        if any(i.is_branch for i in decode_text(found[1], fam)):
            return None
        return count_f32_fma(found[1], fam)
    return None


def _check_work(target: str, probe: Probe, n: int, kdocs: list[dict]) -> None:
    """A FLOP/s probe's formula must equal 2 x the FMAs its kernels execute (counted in the binaries)."""
    if probe.metric != "TFLOP/s" or target == "cpu":
        return
    counted = 0
    for k in kdocs:
        if k.get("f32_fma_per_thread") is None:
            raise OperationFailed(f"{target} {k['file']}: its fma instructions cannot be counted (the code branches)")
        counted += 2 * k["f32_fma_per_thread"] * math.prod(k["grid"]) * math.prod(k["block"])
    if counted != probe.work(n):
        raise OperationFailed(f"{target} probe {probe.name}: the kernel executes {counted} flops per run, the work "
                              f"formula counts {probe.work(n):.0f}: fix the formula or the kernel")


def build_target(target: str, names: list[str] | None = None) -> tuple[dict, dict[str, bytes], dict[str, str]]:
    """Compile the probes for ``target`` through the seam: (manifest, files by name, rendered sources by file)."""
    from tinyhw.kernels import seam

    tg = seam.load()
    if names:
        for name in names:
            if target not in PROBES[name].targets:
                raise Refused(f"probe {name} is not built for {target}", hint=PROBES[name].target_note)
    probes: list[Probe] = [PROBES[n] for n in (names or list(PROBES)) if target in PROBES[n].targets]
    files: dict[str, bytes] = {}
    sources: dict[str, str] = {}
    docs = []
    for probe in probes:
        n = probe.cpu_n if target == "cpu" else probe.gpu_n
        bufs = {b.name: b for b in probe.buffers(n)}
        kdocs = []
        for k in seam.compile_probe(probe, target, n):
            fname = f"{probe.name}.{k.name}.{SUFFIX[target]}"
            files[fname] = k.binary
            sources[fname] = k.source
            kdoc: dict[str, Any] = {
                "name": k.name, "file": fname, "grid": list(k.grid), "block": list(k.block),
                "args": [{"index": i, "buffer": a, "dtype": bufs[a].dtype, "count": bufs[a].count}
                         for i, a in enumerate(k.args)],
                "source_sha256": _sha(k.source), "binary_sha256": _sha(k.binary), "binary_bytes": len(k.binary),
            }
            if target != "cpu":
                kdoc["f32_fma_per_thread"] = count_fma(target, k.binary)
            if target.startswith("gfx"):
                kd, problems = check_amd_binary(k.binary, target, k.name, len(k.args))
                if problems:
                    raise OperationFailed(f"{target} {fname}: {'; '.join(problems)}")
                kdoc["amdgpu"] = kd
            kdocs.append(kdoc)
        _check_work(target, probe, n, kdocs)
        docs.append({"name": probe.name, "summary": probe.summary, "metric": probe.metric, "n": n,
                     "work_per_run": probe.work(n), "buffers": [b.to_doc() for b in bufs.values()],
                     "kernels": kdocs})
    manifest = {"format": FORMAT, "target": target, "tinygrad": tg.version, "probes": docs}
    if target.startswith("gfx"):
        manifest["libllvm"] = tg.libllvm[1]  # the AMD code depends on it; the regeneration test uses the same
    return manifest, files, sources


def write_build(out_dir: Path, manifest: dict, files: dict[str, bytes], *, force: bool = False) -> list[Path]:
    """Write a build into ``out_dir`` (created if missing): each file atomically. An existing regular file of the
    same name is replaced only in an earlier build's folder (``out_dir`` holds a manifest.json) or with ``force``;
    a device node, FIFO, socket or directory never (exit 2, before any file is written)."""
    earlier = (out_dir / "manifest.json").is_file() and not (out_dir / "manifest.json").is_symlink()
    outputs = {**files, "manifest.json": (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode()}
    hint = "--force overwrites it (the folder holds no earlier build: no manifest.json)"
    if out_dir.is_dir():
        for name in outputs:  # every name checked before any file is written
            check_output_path(out_dir / name, force=force or earlier, what="build output", force_hint=hint)
    elif out_dir.exists() or out_dir.is_symlink():
        raise Refused(f"cannot write the build into {out_dir}: it is not a directory", hint="name a folder")
    else:  # a folder of its own: no name in it can be taken
        try:
            out_dir.mkdir(parents=True)
        except OSError as e:
            raise Refused(f"cannot create the build folder {out_dir}: {(e.strerror or str(e)).lower()}",
                          hint="name a folder in a writable place") from None
    return [atomic_write(out_dir / name, data) for name, data in sorted(outputs.items())]


def load_manifest(folder: Path) -> dict:
    """The checked manifest of a build folder: missing is exit 3 (nothing built there); unreadable, not JSON,
    or a field missing, mistyped or out of range is exit 2 naming the field (:mod:`manifest_check`)."""
    from tinyhw.fileio import read_input
    from tinyhw.kernels.manifest_check import MAX_MANIFEST_BYTES, check_manifest, parse_manifest

    path = folder / "manifest.json"
    if not path.exists() and not path.is_symlink():
        raise EnvironmentProblem(f"no kernel manifest at {path}",
                                 hint="build one: tinyhw kernels build --target sm_90 -o DIR")
    data = read_input(path, MAX_MANIFEST_BYTES, "kernel manifest")
    return check_manifest(parse_manifest(data, str(path)), str(path), FORMAT)


def probe_entry(manifest: dict, name: str, path: str = "the manifest") -> dict:
    """The checked manifest's entry for probe ``name``, its buffers matching the probe's (exit 2 otherwise)."""
    from tinyhw.kernels.manifest_check import check_entry_matches_probe

    for p in manifest["probes"]:
        if p["name"] == name:
            if name in PROBES:
                check_entry_matches_probe(p, PROBES[name], path)
            return p
    note = PROBES[name].target_note if name in PROBES and manifest["target"] not in PROBES[name].targets else ""
    raise Refused(f"the {manifest['target']} binaries have no probe {name!r}" + (f": {note}" if note else ""))
