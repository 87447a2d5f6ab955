"""Run ``tinyhw ARGS`` in a child process under a memory and CPU limit, and report its exit code and peak memory.

For inputs crafted to exhaust a parser: if a bound regresses, the child hits RLIMIT_AS (MemoryError) or
RLIMIT_CPU (killed) instead of the machine that runs the tests, and the test fails on the exit code.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

CHILD = r"""
import contextlib, io, json, resource, sys, time
mem, cpu, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
from tinyhw.cli import main  # imported before the memory limit: imports are not the input's cost
def hwm():  # this process image's peak RSS in KiB: ru_maxrss keeps the forking parent's peak across exec
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
base = hwm()
soft, hard = resource.getrlimit(resource.RLIMIT_AS)
with open("/proc/self/status") as f:
    vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
resource.setrlimit(resource.RLIMIT_AS, (vm + mem, hard))
err = io.StringIO()
t0 = time.process_time()
code = 0
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
    try:
        main(sys.argv[4:])
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    except MemoryError:
        code = "MemoryError"
peak = hwm()
json.dump({"code": code, "err": err.getvalue(), "cpu_s": time.process_time() - t0,
           "peak_kib": peak, "base_kib": base}, open(out, "w"))
"""


@dataclass
class Bounded:
    code: int | str          # exit code; "MemoryError", "killed" or "timeout" when a limit stopped it
    err: str
    cpu_s: float
    peak_kib: int            # the child's peak resident memory (VmHWM: ru_maxrss would be the pytest parent's
                             # peak when that is larger, as Linux keeps it across exec) ...
    base_kib: int            # ... and what it was before the command ran (interpreter + imports)

    @property
    def grew_kib(self) -> int:
        return self.peak_kib - self.base_kib


def _private_dirs() -> dict[str, str]:
    """The test's private cache, state, config and lock folders (never the user's, which a bare env falls back to)."""
    names = ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "TINYHW_LOCK_DIR")
    return {k: os.environ[k] for k in names if k in os.environ}


def run_bounded(args: list[str], workdir: Path, *, mem: int = 512 << 20, cpu: int = 20,
                wall: float = 60) -> Bounded:
    out = workdir / "bounded-result.json"
    out.unlink(missing_ok=True)
    try:
        subprocess.run([sys.executable, "-c", CHILD, str(mem), str(cpu), str(out), *args], check=False,
                       capture_output=True, timeout=wall, env={"OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                                                              "TINYHW_STRICT": "1", "PYTHONPATH": ":".join(sys.path),
                                                              **_private_dirs()})
    except subprocess.TimeoutExpired:
        return Bounded("timeout", "", wall, 0, 0)
    if not out.exists():
        return Bounded("killed", "", cpu, 0, 0)
    return Bounded(**json.loads(out.read_text()))


@contextlib.contextmanager
def memory_cap(extra: int = 1 << 30) -> Iterator[None]:
    """In this process: allocations past its current size + ``extra`` fail (MemoryError) until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    cap = vm + extra if hard == resource.RLIM_INFINITY else min(vm + extra, hard)
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
