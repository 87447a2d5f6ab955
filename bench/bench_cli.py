"""Start-up and probe figures of the CLI (issue 2 performance targets).

Prints: the best wall time of `tinyhw --help` (target < 0.3 s) and of
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
        t_help, _ = best(["--help"], env)
        t_probe, r = best(["--device", "mock:navi31-usb", "--stats", "probe"], env)
        stats = json.loads(r.stderr.strip().splitlines()[-1])
        print(f"tinyhw --help: {t_help:.3f} s (target < 0.3 s)")
        print(f"tinyhw --device mock:navi31-usb probe: {t_probe:.3f} s (target < 1 s)")
        print(f"  round_trips={stats['round_trips']} usb_transfers={stats['usb_transfers']} "
              f"tlp_reads={stats['tlp_reads']} tlp_writes={stats['tlp_writes']} modelled_s={stats['modelled_s']}")
        ok = t_help < 0.3 and t_probe < 1.0
        print("result:", "ok" if ok else "over target")


if __name__ == "__main__":
    main()
