"""Speed of the emulated RDNA3 shader core (goal >= 1,000,000 lane-instructions/s), alone or against another tree.

Runs each committed gfx1100 probe (pattern, bandwidth, fma, atomic) on tinyhw.mocks.rdna3 with a flat
memory and a small grid (``--groups``), ``--passes`` times, and prints per probe, measured on this
machine: the wall time of one dispatch (median; memory setup, inputs and copies excluded), emulated
wave-instructions/s and lane-instructions/s (32 lanes per wave32 instruction; counters exact, time measured
with ``time.perf_counter``), and the modelled cycles; then the total.

``--compare TREE`` (a checkout of another commit, e.g. ``git worktree add /tmp/old main``) measures this tree
against that one side by side: for each ``--groups`` value, ``--repeats`` rounds, each running one worker
process per tree in alternating order; a worker runs every probe once untimed (warm-up: code decoded, caches
filled, as for any dispatch after the first) and then ``--passes`` timed dispatches, timed in thread CPU time
(``time.thread_time``, so other processes on the machine do not count). It prints each tree's median time per
dispatch summed over the probes, and the speed-up (other / this) as the median over the rounds with its
min..max spread.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
TARGET = 1_000_000
PROBE_NAMES = ("pattern", "bandwidth", "fma", "atomic")


def _worker(groups: int, passes: int) -> dict[str, float]:
    """Median thread-CPU seconds per dispatch of each probe in the tree on sys.path (run in a subprocess)."""
    import rdna3help

    from tinyhw.kernels.probes import PROBES

    rdna3help.time.perf_counter = time.thread_time      # the dispatch timer of run_probe, in thread CPU time
    out = {}
    for name in PROBE_NAMES:
        outs, n, _ = rdna3help.run_probe(name, groups=groups)          # warm-up
        if not PROBES[name].check(n, outs).ok:
            raise SystemExit(f"{name}: wrong result")
        times: list[float] = []
        for _ in range(passes):
            rdna3help.run_probe(name, groups=groups, timer=times)
        out[name] = statistics.median(times)
    return out


def _board_worker(groups: int, passes: int) -> dict[str, float]:
    """Median thread-CPU seconds per dispatch of each probe through a booted ``mock:navi31`` of the tree on sys.path,
    in the command processor's dispatch steps (run in a subprocess with a private XDG_CACHE_HOME)."""
    from amfake import FW_DIR
    from clihelp import run

    import tinyhw
    from tinyhw.kernels import run_amd_probe
    from tinyhw.mocks.amd import cp

    r = run("--device", "mock:navi31", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    if r.code:
        raise SystemExit(f"am boot failed: {r.err.strip()}")
    spent = [0.0]
    step = cp.CommandProcessor._step

    def timed(self: object, q: object) -> bool:
        t0 = time.thread_time()
        try:
            return step(self, q)  # type: ignore[arg-type]
        finally:
            spent[0] += time.thread_time() - t0
    cp.CommandProcessor._step = timed  # type: ignore[method-assign]
    out = {}
    with tinyhw.open("mock:navi31,strict") as o:
        for name in PROBE_NAMES:
            n = groups * (256 if name == "atomic" else 128)
            doc = run_amd_probe(name, o.transport, n=n)          # warm-up
            if not doc["check"]["ok"]:
                raise SystemExit(f"{name}: wrong result on the board: {doc['check']}")
            times: list[float] = []
            for _ in range(passes):
                spent[0] = 0.0
                run_amd_probe(name, o.transport, n=n)
                times.append(spent[0])
            out[name] = statistics.median(times)
    return out


def _run_worker(tree: Path, groups: int, passes: int, board: bool = False) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), str(tree / "tests" / "helpers")])}
    extra = []
    if board:
        import tempfile

        env["XDG_CACHE_HOME"] = tempfile.mkdtemp(prefix="bench-shader-board-")
        extra = ["--board"]
    r = subprocess.run([sys.executable, str(HERE / "bench" / "bench_shader.py"), "--worker", "--groups", str(groups),
                        "--passes", str(passes), *extra], env=env, capture_output=True, text=True, cwd=tree,
                       check=False)
    if r.returncode:
        raise SystemExit(f"bench worker in {tree} failed: {r.stderr.strip().splitlines()[-1:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def compare(other: Path, groups_list: list[int], passes: int, repeats: int, board: bool = False) -> int:
    """Side-by-side rounds of this tree against ``other``; prints times and the speed-up with its spread."""
    print(f"this tree: {HERE}\nother tree: {other}\n(thread CPU time per dispatch, median of {passes} passes after a "
          f"warm-up; {repeats} alternating rounds{'; through a booted mock:navi31' if board else ''})")
    for groups in groups_list:
        ratios: list[float] = []
        per: dict[str, list[tuple[float, float]]] = {n: [] for n in PROBE_NAMES}
        mine: list[float] = []
        theirs: list[float] = []
        for r in range(repeats):
            order = [(HERE, True), (other, False)] if r % 2 == 0 else [(other, False), (HERE, True)]
            res = {}
            for tree, is_mine in order:
                res[is_mine] = _run_worker(tree, groups, passes, board)
            t_new, t_old = sum(res[True].values()), sum(res[False].values())
            mine.append(t_new)
            theirs.append(t_old)
            ratios.append(t_old / t_new)
            for n in PROBE_NAMES:
                per[n].append((res[True][n], res[False][n]))
        print(f"\n--groups {groups}: this {statistics.median(mine) * 1e3:.1f} ms, other "
              f"{statistics.median(theirs) * 1e3:.1f} ms per set of 4 dispatches (medians)")
        for n in PROBE_NAMES:
            rs = [o / m for m, o in per[n]]
            print(f"  {n:<10} this {statistics.median(m for m, _ in per[n]) * 1e3:9.1f} ms  other "
                  f"{statistics.median(o for _, o in per[n]) * 1e3:9.1f} ms  speed-up {statistics.median(rs):.2f}x "
                  f"({min(rs):.2f}..{max(rs):.2f})")
        print(f"  speed-up (other / this, all probes): {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f} over {repeats} rounds; measured)")
    return 0


def main() -> int:
    """Parse the arguments and run the single-tree table, the comparison, or one worker."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--groups", type=int, nargs="+", default=[16], help="workgroups (fma: rows of 4) per dispatch")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--compare", type=Path, help="another checkout to measure against, side by side")
    ap.add_argument("--repeats", type=int, default=4, help="alternating rounds with --compare")
    ap.add_argument("--board", action="store_true", help="through a booted emulated board (mock:navi31), not a flat "
                    "memory; with --compare")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if any(not 1 <= g <= 4096 for g in a.groups) or not 1 <= a.passes <= 100 or not 1 <= a.repeats <= 50:
        ap.error("--groups takes 1..4096, --passes 1..100, --repeats 1..50")
    if a.worker:
        if a.board:
            sys.path.insert(0, str(Path.cwd() / "tests" / "helpers"))
        print(json.dumps((_board_worker if a.board else _worker)(a.groups[0], a.passes)))
        return 0
    if a.board and a.compare is None:
        ap.error("--board measures with --compare (run this tree against another)")
    if a.compare is not None:
        if not (a.compare / "tests" / "helpers" / "rdna3help.py").is_file():
            ap.error(f"{a.compare} is not a tinyhw checkout (no tests/helpers/rdna3help.py)")
        return compare(a.compare.resolve(), a.groups, a.passes, a.repeats, a.board)
    sys.path.insert(0, str(HERE / "tests" / "helpers"))
    from rdna3help import run_probe

    from tinyhw.kernels.probes import PROBES

    tot_w = tot_t = 0.0
    print(f"{'probe':<10} {'waves':>6} {'wave-insts':>11} {'time/dispatch':>14} {'wave-inst/s':>12} "
          f"{'lane-inst/s':>12} {'cycles (modelled)':>18}  check")
    for name in PROBE_NAMES:
        times: list[float] = []
        for _ in range(a.passes):
            outs, n, res = run_probe(name, groups=a.groups[0], timer=times)
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
