"""Speed of the emulated RDNA3 shader core (issue 23 item 6; goal >= 1,000,000 lane-instructions/s).

Runs each committed gfx1100 probe (pattern, bandwidth, fma, atomic) on tinyhw.mocks.rdna3 with a flat
memory and a small grid (``--groups``), ``--passes`` times, and prints per probe, measured on this
machine: the wall time of one dispatch (median; memory setup, inputs and copies excluded), emulated
wave-instructions/s and lane-instructions/s (32 lanes per wave32 instruction, the issue's definition;
counters exact, time measured with ``time.perf_counter``), and the modelled cycles; then the total.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from rdna3help import run_probe

from tinyhw.kernels.probes import PROBES

TARGET = 1_000_000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, default=16, help="workgroups (fma: rows of 4) per dispatch")
    ap.add_argument("--passes", type=int, default=3)
    a = ap.parse_args()
    if not 1 <= a.groups <= 4096 or not 1 <= a.passes <= 100:
        ap.error("--groups takes 1..4096, --passes 1..100")
    tot_w = tot_t = 0.0
    print(f"{'probe':<10} {'waves':>6} {'wave-insts':>11} {'time/dispatch':>14} {'wave-inst/s':>12} "
          f"{'lane-inst/s':>12} {'cycles (modelled)':>18}  check")
    for name in ("pattern", "bandwidth", "fma", "atomic"):
        times: list[float] = []
        for _ in range(a.passes):
            outs, n, res = run_probe(name, groups=a.groups, timer=times)
        dt = statistics.median(times)
        check = PROBES[name].check(n, outs)
        tot_w += res.wave_instructions
        tot_t += dt
        print(f"{name:<10} {res.waves:>6} {res.wave_instructions:>11} {dt * 1e3:>11.1f} ms "
              f"{res.wave_instructions / dt:>12,.0f} {res.lane_instructions / dt:>12,.0f} {res.cycles:>18}  "
              f"{'ok' if check.ok else 'FAILED: ' + check.detail}")
    rate = 32 * tot_w / tot_t
    print(f"{'total':<10} {'':>6} {int(tot_w):>11} {tot_t * 1e3:>11.1f} ms {tot_w / tot_t:>12,.0f} {rate:>12,.0f}"
          f"  (measured; goal {TARGET:,} lane-inst/s: {'met' if rate >= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
