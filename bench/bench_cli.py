"""Start-up and probe figures of the CLI.

Prints (every figure measured on this machine, wall time of a fresh interpreter, with its spread): `tinyhw --help`
as a ratio to `python -c "import click"`, per interleaved pair (the two alternate, equal repeats; BENCH_REPEATS=N
pairs, default 15), median (min, max) (goal <= 1.3x: --help imports no feature package, no emulator, numpy or rich);
the wall time of `tinyhw --device mock:navi31-usb probe`, median (min, max) of 5 runs (target < 1 s); and the
probe's exact counters (round_trips, usb_transfers, modelled_s; modelled, machine-independent) from --stats.
Runs in a private cache/lock directory so it never touches the user's emulated flash file.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time


def run(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    """Wall time and result of one ``python -m tinyhw ARGS``."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tinyhw", *args], capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - t0, r


def spread(values: list[float], f: str = ".3f") -> str:
    """``median (min X, max Y)`` of ``values``."""
    return f"{statistics.median(values):{f}} (min {min(values):{f}}, max {max(values):{f}})"


def main() -> None:
    pairs = int(os.environ.get("BENCH_REPEATS", "15"))
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), TINYHW_LOCK_DIR=os.path.join(tmp, "locks"))
        run(["--device", "mock:navi31-usb", "probe"], env)  # create the flash file once
        helps, clicks = [], []
        for i in range(pairs):  # interleaved pairs, alternating which goes first, so machine noise hits both alike
            for which in (("help", "click") if i % 2 == 0 else ("click", "help")):
                if which == "help":
                    helps.append(run(["--help"], env)[0])
                else:
                    t0 = time.perf_counter()
                    subprocess.run([sys.executable, "-c", "import click"], check=True, env=env)
                    clicks.append(time.perf_counter() - t0)
        ratios = [h / c for h, c in zip(helps, clicks, strict=True)]
        probes, cpus = [], []
        for _ in range(5):
            r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            t, r = run(["--device", "mock:navi31-usb", "--stats", "probe"], env)
            r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            if r.returncode != 0:
                sys.exit(f"bench: tinyhw probe failed: {r.stderr.strip()}")
            probes.append(t)
            cpus.append(r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime)
        stats = json.loads(r.stderr.strip().splitlines()[-1])
        print(f"tinyhw --help: {spread(helps)} s; python -c 'import click': {spread(clicks)} s (measured, {pairs} "
              f"interleaved pairs)")
        print(f"  ratio per pair: {spread(ratios, '.2f')}x (goal <= 1.3x, median)")
        print(f"tinyhw --device mock:navi31-usb probe: {spread(probes)} s wall, {spread(cpus)} s process cpu "
              "(measured, 5 runs; target < 1 s wall)")
        print(f"  round_trips={stats['round_trips']} usb_transfers={stats['usb_transfers']} "
              f"tlp_reads={stats['tlp_reads']} tlp_writes={stats['tlp_writes']} modelled_s={stats['modelled_s']} "
              "(modelled, exact)")
        ok = statistics.median(ratios) <= 1.3 and statistics.median(probes) < 1.0
        print("result:", "ok" if ok else "over target")


if __name__ == "__main__":
    main()
