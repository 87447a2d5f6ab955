"""Start-up and probe figures of the CLI (issue 2 and issue 10 performance targets).

Prints: the best wall time of `tinyhw --help` as a ratio to `python -c "import click"`, both measured
interleaved in this run (goal <= 1.3x: --help imports no feature package), the best wall time of
`tinyhw --device mock:navi31-usb probe` (target < 1 s), and the probe's exact counters
(round_trips, usb_transfers, modelled_s) from --stats, which do not depend on the machine.
Runs in a private cache/lock directory so it never touches the user's emulated flash file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time


def run(args: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tinyhw", *args], capture_output=True, text=True, env=env, check=False)
    return time.perf_counter() - t0, r


def best(args: list[str], env: dict[str, str], n: int = 5) -> tuple[float, subprocess.CompletedProcess]:
    results = [run(args, env) for _ in range(n)]
    for _, r in results:
        if r.returncode != 0:
            sys.exit(f"bench: tinyhw {' '.join(args)} failed: {r.stderr.strip()}")
    return min(results, key=lambda x: x[0])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), TINYHW_LOCK_DIR=os.path.join(tmp, "locks"))
        run(["--device", "mock:navi31-usb", "probe"], env)  # create the flash file once
        helps, clicks = [], []
        for _ in range(7):  # interleaved, so machine noise hits both alike
            helps.append(run(["--help"], env)[0])
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", "import click"], check=True, env=env)
            clicks.append(time.perf_counter() - t0)
        t_help, t_click = min(helps), min(clicks)
        t_probe, r = best(["--device", "mock:navi31-usb", "--stats", "probe"], env)
        stats = json.loads(r.stderr.strip().splitlines()[-1])
        print(f"tinyhw --help: {t_help:.3f} s; python -c 'import click': {t_click:.3f} s; "
              f"ratio {t_help / t_click:.2f}x (goal <= 1.3x)")
        print(f"tinyhw --device mock:navi31-usb probe: {t_probe:.3f} s (target < 1 s)")
        print(f"  round_trips={stats['round_trips']} usb_transfers={stats['usb_transfers']} "
              f"tlp_reads={stats['tlp_reads']} tlp_writes={stats['tlp_writes']} modelled_s={stats['modelled_s']}")
        ok = t_help / t_click <= 1.3 and t_probe < 1.0
        print("result:", "ok" if ok else "over target")


if __name__ == "__main__":
    main()
