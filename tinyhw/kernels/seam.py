"""The one module that imports tinygrad: a compiler library behind a narrow seam (specs/compiler-library.md).

tinygrad 0.14.0 ships its own GPU drivers, and picking a default device by itself can unbind a GPU, so the
seam pins it before the first import and uses it only as a compiler:

* ``DEV=NULL`` (schedules are built on the NULL device, which allocates nothing and opens no driver),
  ``PARALLEL=0`` (no pool of compile processes), ``CACHEDB`` under ``$XDG_CACHE_HOME/tinyhw/`` (a
  tinyhw-owned compile cache whose name carries the tinygrad version and the libLLVM used, since tinygrad's
  cache key does not), ``LLVM_PATH`` to a libLLVM >= 18 (older ones fail on tinygrad's IR).
* Renderers are built from ``Target(device, renderer, arch)`` for a fixed list of targets (an unknown LLVM
  target would abort the process), and ``Device[...]`` is never indexed for AMD, NV or CUDA. The one
  device used is tinygrad's ``CPU`` device, to run a probe on this machine (it needs ``clang``).
* The exact pin ``tinygrad==0.14.0`` is checked: every minor release changed this API.
"""

from __future__ import annotations

import glob
import os
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from tinyhw.errors import EnvironmentProblem, OperationFailed, Refused, install_hint
from tinyhw.kernels.probes import ATOMIC_CPU_THREADS, Probe

__all__ = ["PIN", "TARGETS", "CompiledKernel", "CpuRun", "compile_probe", "disassemble_amd", "find_libllvm", "load",
           "run_cpu"]

PIN = "0.14.0"
INSTALL_HINT = install_hint("compile", f"tinygrad=={PIN}")
# target -> (tinygrad device, renderer, arch, disassembler family)
TARGETS: dict[str, tuple[str, str, str, str | None]] = {
    "gfx1100": ("AMD", "LLVM", "gfx1100", "rdna3"),
    "gfx1200": ("AMD", "LLVM", "gfx1200", "rdna4"),
    "sm_90": ("CUDA", "PTX", "sm_90", None),
    "cpu": ("CPU", "CLANG", "x86_64,x86-64-v2", None),
}
MIN_LLVM = 18
_DRIVER_MODULES = ("tinygrad.runtime.ops_amd", "tinygrad.runtime.ops_nv", "tinygrad.runtime.ops_cuda",
                   "tinygrad.runtime.support.system", "tinygrad.runtime.support.usb")


def cache_dir() -> Path:
    """tinyhw's cache folder: ``$XDG_CACHE_HOME/tinyhw`` (default ``~/.cache/tinyhw``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "tinyhw"


def find_libllvm(major: int | None = None) -> tuple[str, int] | None:
    """A libLLVM >= 18 (path, major), or exactly ``major``: ``$TINYHW_LIBLLVM`` first, then the newest in the
    distribution's library folders (the generated AMD code depends on the LLVM version: manifests record it)."""
    given = os.environ.get("TINYHW_LIBLLVM") if major is None else None
    candidates = [given] if given else []
    for pattern in ("/usr/lib/*/libLLVM-[0-9]*.so*", "/usr/lib/llvm-*/lib/libLLVM*.so*", "/usr/lib64/libLLVM-*.so*",
                    "/usr/lib/*/libLLVM.so.[0-9]*"):
        candidates += sorted(glob.glob(pattern))
    best: tuple[str, int] | None = None
    for path in candidates:
        m = re.search(r"(?:LLVM-|llvm-|LLVM\.so\.)(\d+)", path)
        if not m or not os.path.exists(path):
            continue
        found = int(m.group(1))
        wanted = found >= MIN_LLVM and (major is None or found == major)
        if wanted and (best is None or found > best[1] or given == path):
            best = (path, found)
            if given == path:
                break
    return best


def _pin_environment() -> tuple[str, int] | None:
    """Set tinygrad's switches before its first import (it reads most of them at import time)."""
    if "tinygrad" in sys.modules and os.environ.get("DEV") != "NULL":
        raise EnvironmentProblem("tinygrad was imported before tinyhw could pin it to the NULL device",
                                 hint="import tinygrad only through tinyhw.kernels.seam")
    llvm = find_libllvm()
    tag = f"llvm{llvm[1]}" if llvm else "nollvm"
    os.environ["DEV"] = "NULL"
    os.environ["PARALLEL"] = "0"
    os.environ["CACHEDB"] = str(cache_dir() / f"tinygrad-{PIN}-{tag}.db")
    if llvm:
        os.environ["LLVM_PATH"] = llvm[0]
    return llvm


@cache
def load() -> Any:
    """Import tinygrad through the seam and return a namespace of what tinyhw uses; exit 3 when missing."""
    from importlib import metadata

    try:
        version = metadata.version("tinygrad")
    except metadata.PackageNotFoundError:
        raise EnvironmentProblem("tinygrad is not installed (needed to compile or run probe kernels on the cpu)",
                                 hint=INSTALL_HINT) from None
    if version != PIN:
        raise EnvironmentProblem(f"tinygrad {version} is installed; tinyhw's compile seam is written for {PIN}",
                                 hint=INSTALL_HINT)
    llvm = _pin_environment()
    import tinygrad
    from tinygrad import Device, Tensor, dtypes
    from tinygrad.codegen import to_program
    from tinygrad.engine.realize import get_call_arg_uops, run_linear, time_call
    from tinygrad.helpers import Target

    if Device.DEFAULT != "NULL":  # pragma: no cover - DEV=NULL is set above
        raise EnvironmentProblem(f"tinygrad's default device is {Device.DEFAULT}, not NULL")

    ns = SimpleNamespace()
    ns.version, ns.tinygrad, ns.libllvm = version, tinygrad, llvm
    ns.Tensor, ns.dtypes, ns.Device, ns.Target = Tensor, dtypes, Device, Target
    ns.to_program, ns.get_call_arg_uops, ns.run_linear, ns.time_call = to_program, get_call_arg_uops, run_linear, \
        time_call
    return ns


def loaded_driver_modules() -> list[str]:
    """tinygrad's own device drivers that are imported in this process (the seam keeps this empty)."""
    return [m for m in _DRIVER_MODULES if m in sys.modules]


@dataclass(frozen=True)
class CompiledKernel:
    """One kernel tinygrad rendered and compiled for a target: its name, grid and block sizes, the buffer bound to each
    pointer parameter, the rendered source and the binary (ELF, or PTX text for sm_90)."""

    name: str
    grid: tuple[int, int, int]  # workgroups / thread blocks (tinygrad's global_size)
    block: tuple[int, int, int]  # work-items / threads per group (tinygrad's local_size)
    args: tuple[str, ...]  # the probe buffer bound to each pointer parameter, in order
    source: str  # C, PTX or LLVM IR text as rendered
    binary: bytes  # ELF object (cpu, gfx) or PTX text (sm_90)


def _renderer(tg: Any, target: str) -> Any:
    if target not in TARGETS:
        raise Refused(f"unknown build target {target!r}", hint=f"known: {', '.join(TARGETS)}")
    dev, ren, arch, _ = TARGETS[target]
    t = tg.Target(dev, ren, arch)
    if dev == "AMD":
        if find_libllvm() is None:
            raise EnvironmentProblem(f"building for {target} needs libLLVM >= {MIN_LLVM} with the AMDGPU target",
                                     hint="Debian: apt-get install libllvm19, or set TINYHW_LIBLLVM=/path/libLLVM.so")
        return _amd_renderer_class()(t)
    if dev == "CUDA":
        from tinygrad.renderer.ptx import PTXRenderer

        return PTXRenderer(t)
    from tinygrad.renderer.cstyle import ClangRenderer

    return ClangRenderer(t)


@cache
def _amd_renderer_class() -> type:
    """tinygrad's AMD LLVM renderer plus one rule: an inline ``atomicrmw`` (the atomic probe) is emitted as is."""
    from tinygrad.renderer.llvmir import AMDLLVMRenderer
    from tinygrad.uop.ops import Ops, PatternMatcher, UPat

    def inline(ctx: Any, x: Any) -> str | None:
        if not str(x.arg).startswith("atomicrmw "):
            return None
        return f"  {ctx[x]} = " + x.arg.format(*[ctx[y] for y in x.src])

    class AmdWithAtomics(AMDLLVMRenderer):
        string_rewrite = PatternMatcher([(UPat(Ops.CUSTOMI, name="x"), inline)]) + AMDLLVMRenderer.string_rewrite

    return AmdWithAtomics


_DTYPES = {"u32": "uint32", "f32": "float32"}


GPU_ATOMIC = 'atomicrmw add i32* {0}, i32 1 syncscope("agent") monotonic'
# cpu: {0} is &counter[0], {1} the thread's loop index (filled in by tinygrad's renderer, which formats the
# string: C braces are doubled). At its first work-item each thread checks in at the start gate counter[1]
# and spins (bounded) until all have, so the threads really race; then it takes its ticket (@OP@).
CPU_GATE = ("({{ if ({1} == 0) {{ __atomic_fetch_add({0} + 1, 1u, __ATOMIC_SEQ_CST); "
            "for (unsigned long s_ = 0; __atomic_load_n({0} + 1, __ATOMIC_ACQUIRE) < @THREADS@u && "
            "s_ < 4000000000ul; s_++) {{ }} }} @OP@; }})")
CPU_ATOMIC = "__atomic_fetch_add({0}, 1u, __ATOMIC_RELAXED)"


def cpu_atomic_op(increment: str = CPU_ATOMIC) -> str:
    """The cpu atomic probe's inline C with ``increment`` as the ticket (a test swaps in a non-atomic one)."""
    return CPU_GATE.replace("@OP@", increment).replace("@THREADS@", str(ATOMIC_CPU_THREADS))


class _Namespace:
    """What a probe's ``graph`` may use: ``arange``, the two element types, and ``atomic_tickets``."""

    def __init__(self, tg: Any, device: str, target: str, cpu_atomic: str | None = None) -> None:
        self._tg, self._device, self._target = tg, device, target
        self.u32, self.f32 = tg.dtypes.uint32, tg.dtypes.float32
        self.cpu_atomic = cpu_atomic or cpu_atomic_op()

    def arange(self, n: int, dtype: Any) -> Any:
        return self._tg.Tensor.arange(n, dtype=dtype).to(self._device)

    def atomic_tickets(self, out: Any, counter: Any, n: int) -> tuple[Any, Any]:
        """One kernel, n work-items: out[i] = atomic fetch-and-add(counter[0], 1), relaxed.

        tinygrad 0.14.0 has no atomic in its tensor API; this is its custom-kernel API with one inline
        operation spelled for the target's renderer (C for cpu, LLVM IR for gfx). Its PTX renderer cannot
        take one, so sm_90 is refused.
        """
        from tinygrad.uop.ops import AxisType, KernelInfo, Ops, UOp

        tg, family = self._tg, self._target
        if family == "sm_90":
            raise Refused("the atomic probe cannot be built for sm_90: tinygrad 0.14.0's ptx renderer has no "
                          "atomic operation")
        gpu = family.startswith("gfx")
        group = 256

        def kernel(o: Any, c: Any) -> Any:
            if gpu:
                g, lane = UOp.range(n // group, 0, AxisType.GLOBAL), UOp.range(group, 1, AxisType.LOCAL)
                i, axes = g * group + lane, (g, lane)
                old = UOp(Ops.CUSTOMI, tg.dtypes.uint32, src=(c.index(i * 0),), arg=GPU_ATOMIC)
            else:
                threads = ATOMIC_CPU_THREADS
                t, j = UOp.range(threads, 0, AxisType.GLOBAL), UOp.range(n // threads, 1, AxisType.LOOP)
                i, axes = t * (n // threads) + j, (t, j)
                old = UOp(Ops.CUSTOMI, tg.dtypes.uint32, src=(c.index(i * 0), j), arg=self.cpu_atomic)
            return o.index(i).store(old).end(*axes).sink(arg=KernelInfo(name="atomic_tickets", opts_to_apply=()))

        o2, c2 = out.custom_kernel(counter, fxn=kernel)
        return o2, c2


def _schedule(tg: Any, probe: Probe, n: int, device: str, target: str,
              inputs: dict[str, Any] | None = None, cpu_atomic: str | None = None):
    bufs = probe.buffers(n)
    tensors = {}
    for b in bufs:
        dt = getattr(tg.dtypes, _DTYPES[b.dtype])
        if inputs is not None and b.role in ("in", "inout"):
            tensors[b.name] = inputs[b.name]
        else:
            tensors[b.name] = tg.Tensor.empty(b.count, dtype=dt, device=device)
    names = {id(t.uop.base): name for name, t in tensors.items()}
    exprs = probe.graph(_Namespace(tg, device, target, cpu_atomic), dict(tensors), n)
    outs = [b.name for b in bufs if b.role in ("out", "inout")]
    if sorted(exprs) != sorted(outs):
        raise OperationFailed(f"probe {probe.name} gives {sorted(exprs)}, its outputs are {outs}")
    # a custom kernel's results are its buffers already (AFTER the kernel); plain expressions are assigned
    assigned = [exprs[o] if exprs[o].uop.op.name == "AFTER" else tensors[o].assign(exprs[o]) for o in outs]
    lin = assigned[0].schedule_linear(*assigned[1:])
    calls = []
    for call in lin.src:
        if call.src[0].op.name != "SINK":
            raise OperationFailed(f"probe {probe.name}: tinygrad scheduled a {call.src[0].op.name} step, not a kernel")
        args = []
        for u in tg.get_call_arg_uops(call):
            if id(u.base) not in names:
                raise OperationFailed(f"probe {probe.name}: a kernel argument is no probe buffer (an intermediate)")
            args.append(names[id(u.base)])
        calls.append((call, args))
    return lin, calls, tensors


def compile_probe(probe: Probe, target: str, n: int | None = None) -> list[CompiledKernel]:
    """Compile ``probe`` for ``target`` on the NULL device; nothing is allocated or launched."""
    tg = load()
    ren = _renderer(tg, target)
    n = n or (probe.cpu_n if target == "cpu" else probe.gpu_n)
    if target not in probe.targets:
        raise Refused(f"probe {probe.name} is not built for {target}", hint=probe.target_note)
    _, calls, _ = _schedule(tg, probe, n, "NULL", target)
    out = []
    for call, args in calls:
        prg = tg.to_program(call.src[0], ren)
        info = prg.arg
        if info.vars and target != "cpu":
            raise OperationFailed(f"probe {probe.name}: kernel {info.function_name} takes scalar parameters")
        binary = prg.src[3].arg
        # tinygrad's global_size and local_size are three numbers each
        grid = cast("tuple[int, int, int]", tuple(int(x) for x in info.global_size))
        block = cast("tuple[int, int, int]", tuple(int(x) for x in info.local_size))
        out.append(CompiledKernel(info.function_name, grid, block, tuple(args[i] for i in info.globals),
                                  prg.src[2].arg, bytes(binary)))
    return out


@dataclass(frozen=True)
class CpuRun:
    """A probe's run on tinygrad's CPU device: the outputs by buffer name, each timed repeat's seconds, the kernels per
    run, and for a concurrent run the threads, the contention seen and how many runs it took to see the threads race."""

    outputs: dict[str, bytes]
    seconds: list[float]  # kernel time of each timed repeat (all kernels of the probe)
    kernels: int
    threads: int | None = None  # threads that ran at the same time (tinyhw's launcher), else None
    contention: int | None = None  # times a thread's next ticket was not its last + 1 (probe.contention)
    attempts: int = 1


def run_cpu(probe: Probe, n: int, repeats: int = 5, cpu_atomic: str | None = None) -> CpuRun:
    """Run ``probe`` on tinygrad's CPU device (clang compiles it); time ``repeats`` runs after a first one.

    A probe with ``cpu_threads`` (atomic) runs through :func:`_run_concurrent` instead: tinygrad's cpu runtime
    calls a kernel's threads one after another, so they would race nothing."""
    import shutil

    tg = load()
    if not os.environ.get("CC") and shutil.which("clang") is None:
        raise EnvironmentProblem("tinygrad's cpu device needs clang", hint="Debian: apt-get install clang")
    if probe.cpu_threads:
        return _run_concurrent(tg, probe, n, repeats, cpu_atomic)
    host = probe.inputs(n)
    inputs = {}
    for b in probe.buffers(n):
        if b.role in ("in", "inout"):
            dt = getattr(tg.dtypes, _DTYPES[b.dtype])
            inputs[b.name] = tg.Tensor(host[b.name], device="CPU").bitcast(dt).contiguous().realize()
    lin, calls, tensors = _schedule(tg, probe, n, "CPU", "cpu", inputs)
    tg.run_linear(lin, wait=True)
    outputs = {b.name: bytes(tensors[b.name].data()) for b in probe.buffers(n) if b.role in ("out", "inout")}
    timers = [tg.time_call(call) for call, _ in calls]
    seconds = [sum(next(t) for t in timers) for _ in range(max(0, repeats))]
    return CpuRun(outputs, seconds, len(calls))


CONTENTION_ATTEMPTS = 5


def _run_concurrent(tg: Any, probe: Any, n: int, repeats: int, cpu_atomic: str | None) -> CpuRun:
    """Compile the probe's one kernel for the cpu and call its threads (``core_id`` 0..T-1) from T OS threads
    at once (ctypes drops the GIL for the call). The first run is checked; it is repeated (up to 5 times)
    until the threads are seen to race (``probe.raced``). Buffers are tinyhw's own (ctypes arrays)."""
    import ctypes
    import threading
    import time

    from tinygrad.engine.realize import get_runtime

    _, calls, _ = _schedule(tg, probe, n, "NULL", "cpu", cpu_atomic=cpu_atomic)
    if len(calls) != 1:
        raise OperationFailed(f"probe {probe.name}: {len(calls)} kernels, a concurrent run takes one")
    call, args = calls[0]
    prg = tg.to_program(call.src[0], _renderer(tg, "cpu"))
    runtime = get_runtime("CPU", prg)
    threads = int(prg.arg.global_size[0])
    if "core_id" not in runtime.runtimevars or threads != probe.cpu_threads:
        raise OperationFailed(f"probe {probe.name}: the cpu kernel has {threads} threads, expected {probe.cpu_threads}")
    bufs = {b.name: (ctypes.c_uint32 * b.count)() for b in probe.buffers(n)}
    addrs = [ctypes.addressof(bufs[args[i]]) for i in prg.arg.globals]
    core = runtime.runtimevars["core_id"]
    host = probe.inputs(n)

    def once() -> float:
        for name, data in host.items():
            ctypes.memmove(bufs[name], data, len(data))
        gate = threading.Barrier(threads + 1)

        def worker(tid: int) -> None:
            argv = list(addrs) + [0] * (core + 1 - len(addrs))
            argv[core] = tid
            cargs = [ctypes.c_uint64(x) for x in argv]
            gate.wait()
            runtime.fxn(*cargs)

        pool = [threading.Thread(target=worker, args=(t,), daemon=True) for t in range(threads)]
        for th in pool:
            th.start()
        gate.wait()
        start = time.perf_counter()
        for th in pool:
            th.join()
        return time.perf_counter() - start

    outs = [b.name for b in probe.buffers(n) if b.role in ("out", "inout")]
    attempt = 0
    while True:
        attempt += 1
        once()
        outputs = {name: bytes(bufs[name]) for name in outs}
        contention = probe.contention(n, outputs, threads)
        if probe.raced(n, contention) or attempt == CONTENTION_ATTEMPTS:
            break
    seconds = [once() for _ in range(max(0, repeats))]
    return CpuRun(outputs, seconds, 1, threads, contention, attempt)


def disassemble_amd(code: bytes, family: str) -> list[tuple[int, str]]:
    """(offset, text) per instruction of ``code`` with tinygrad's own RDNA decoder, up to ``s_endpgm``."""
    load()
    from tinygrad.renderer.amd import decode_inst

    out: list[tuple[int, str]] = []
    off = 0
    while off + 4 <= len(code):
        try:
            inst = decode_inst(code[off:off + 16], family)
        except (ValueError, AssertionError) as e:
            out.append((off, f".word 0x{int.from_bytes(code[off:off + 4], 'little'):08x}  ; {e}"))
            off += 4
            continue
        text = repr(inst)
        out.append((off, text))
        off += inst.size()
        if text.startswith("s_endpgm"):
            break
    return out
