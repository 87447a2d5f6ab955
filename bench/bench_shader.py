"""Speed of the emulated RDNA3 shader core (goal >= 1,000,000 lane-instructions/s), alone or against another tree.

Runs each committed gfx1100 probe (pattern, bandwidth, fma, atomic) on tinyhw.mocks.rdna3 with a flat
memory and a small grid (``--groups``), ``--passes`` times, and prints per probe, measured on this
machine: the wall time of one dispatch (median; memory setup, inputs and copies excluded), emulated
wave-instructions/s and lane-instructions/s (32 lanes per wave32 instruction; counters exact, time measured
with ``time.perf_counter``), and the modelled cycles; then the total. With llvm-mc-19 installed a fifth row,
``lds-reduce`` (not a committed probe: a kernel this script assembles, see :func:`lds_reduce_program`), measures
workgroups of 8 waves that sum through LDS with ``s_barrier``; it is printed apart and not in the total.

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
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
TARGET = 1_000_000
PROBE_NAMES = ("pattern", "bandwidth", "fma", "atomic")
LDS_PROBE = "lds-reduce"        # this script's own LDS reduction kernel (lds_reduce_program), when llvm-mc-19 is here
LDS_BLOCK, LDS_ITEMS = 256, 8   # work-items a workgroup (8 waves), elements each work-item adds before the LDS sum


def _asm(lines: list[str]) -> bytes:
    """The bytes llvm-mc-19 encodes gfx1100 instructions (one a line, no labels) to."""
    out = subprocess.run(["llvm-mc-19", "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"], input="\n".join(lines),
                         capture_output=True, text=True, check=True).stdout
    return b"".join(bytes(int(x, 16) for x in enc.split(",")) for enc in re.findall(r"encoding: \[([^\]]*)\]", out))


def lds_reduce_program() -> bytes:
    """A reduction the way compiled kernels do one, for the bench only (not a committed probe): each work-item of a
    256-work-item workgroup (s[0:1] in, s[2:3] out, s4 the workgroup id) adds 8 u32 of its workgroup's slice of 2048
    (a loop on an SGPR), stores the sum at LDS[4 id], s_barrier; then for each stride 128 .. 1 the work-items below
    it add LDS[id + stride] into LDS[id] (EXEC saved, the block skipped when EXEC is 0) and s_barrier; work-item 0
    stores LDS[0] at out[workgroup id]."""
    body = ["global_load_b32 v4, v2, s[0:1]", "s_waitcnt vmcnt(0)", "v_add_nc_u32 v3, v3, v4",
            f"v_add_nc_u32 v2, {4 * LDS_BLOCK:#x}, v2", "s_add_u32 s8, s8, 1", f"s_cmp_lt_u32 s8, {LDS_ITEMS}"]
    back = -(len(_asm(body)) // 4 + 1)
    lines = [f"s_lshl_b32 s5, s4, {(4 * LDS_BLOCK * LDS_ITEMS).bit_length() - 1}", "v_lshlrev_b32 v1, 2, v0",
             "v_add_nc_u32 v2, s5, v1", "v_mov_b32 v3, 0", "s_mov_b32 s8, 0", *body, f"s_cbranch_scc1 {back}",
             "ds_store_b32 v1, v3", "s_waitcnt lgkmcnt(0)", "s_barrier"]
    block = ["ds_load_b32 v4, v1 offset:{off}", "ds_load_b32 v5, v1", "s_waitcnt lgkmcnt(0)",
             "v_add_nc_u32 v4, v4, v5", "ds_store_b32 v1, v4", "s_waitcnt lgkmcnt(0)"]
    skip = len(_asm([x.format(off=4) for x in block])) // 4
    stride = LDS_BLOCK // 2
    while stride:
        lines += [f"v_cmp_gt_u32 vcc_lo, {stride}, v0", "s_and_saveexec_b32 s6, vcc_lo", f"s_cbranch_execz {skip}",
                  *(x.format(off=4 * stride) for x in block), "s_or_b32 exec_lo, exec_lo, s6", "s_barrier"]
        stride //= 2
    store = ["ds_load_b32 v4, v1", "s_waitcnt lgkmcnt(0)", "s_lshl_b32 s7, s4, 2", "v_mov_b32 v6, s7",
             "global_store_b32 v6, v4, s[2:3]"]
    lines += ["v_cmp_eq_u32 vcc_lo, 0, v0", "s_and_saveexec_b32 s6, vcc_lo",
              f"s_cbranch_execz {len(_asm(store)) // 4}", *store, "s_endpgm"]
    return _asm(lines)


def run_lds_reduce(code: bytes, groups: int, timer: list[float]) -> Any:
    """One dispatch of :func:`lds_reduce_program`'s code over ``groups`` workgroups on a flat memory, its answer
    checked against numpy (SystemExit when wrong); the dispatch's time (``time.perf_counter``) goes to ``timer``."""
    import numpy as np

    from tinyhw.mocks.rdna3 import DispatchRegs, FlatMemory, run_dispatch

    mem = FlatMemory(0x10_0000_0000, 4 * LDS_BLOCK * LDS_ITEMS * groups + (1 << 20))
    entry = mem.alloc(code + bytes(16), align=256)
    data = (np.arange(LDS_BLOCK * LDS_ITEMS * groups, dtype=np.uint64) * 2654435761 % (1 << 20)).astype(np.uint32)
    src, out = mem.alloc(data.tobytes()), mem.alloc(4 * groups)
    user = (src & 0xFFFFFFFF, src >> 32, out & 0xFFFFFFFF, out >> 32)
    # RSRC1: 16 VGPRs; RSRC2: 4 user SGPRs, the workgroup id X, LDS 1 KiB (2 x 512 bytes)
    regs = DispatchRegs(pgm_lo=entry >> 8 & 0xFFFFFFFF, pgm_hi=entry >> 40 & 0xFF, rsrc1=1,
                        rsrc2=4 << 1 | 1 << 7 | 2 << 15, user_data=user, num_thread=(LDS_BLOCK, 1, 1),
                        dim=(groups, 1, 1))
    t0 = time.perf_counter()
    res = run_dispatch(regs, mem)
    timer.append(time.perf_counter() - t0)
    want = data.reshape(groups, -1).astype(np.uint64).sum(axis=1) % (1 << 32)
    if np.frombuffer(mem.read(out, 4 * groups), dtype=np.uint32).tolist() != want.tolist():
        raise SystemExit(f"{LDS_PROBE}: wrong result")
    return res


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
    if shutil.which("llvm-mc-19"):
        code = lds_reduce_program()
        times = []
        run_lds_reduce(code, groups, times)       # warm-up
        times.clear()
        for _ in range(passes):
            run_lds_reduce(code, groups, times)
        out[LDS_PROBE] = statistics.median(times)
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
    # the test helpers are in tests/helpers since the tests moved into folders, in tests/ before (e8764b9 ...)
    path = [str(tree), str(tree / "tests" / "helpers"), str(tree / "tests")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
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
            t_new, t_old = (sum(res[side][n] for n in PROBE_NAMES) for side in (True, False))
            mine.append(t_new)
            theirs.append(t_old)
            ratios.append(t_old / t_new)
            for n in PROBE_NAMES:
                per[n].append((res[True][n], res[False][n]))
            if LDS_PROBE in res[True] and LDS_PROBE in res[False]:
                per.setdefault(LDS_PROBE, []).append((res[True][LDS_PROBE], res[False][LDS_PROBE]))
        print(f"\n--groups {groups}: this {statistics.median(mine) * 1e3:.1f} ms, other "
              f"{statistics.median(theirs) * 1e3:.1f} ms per set of 4 dispatches (medians)")
        for n in PROBE_NAMES:
            rs = [o / m for m, o in per[n]]
            print(f"  {n:<10} this {statistics.median(m for m, _ in per[n]) * 1e3:9.1f} ms  other "
                  f"{statistics.median(o for _, o in per[n]) * 1e3:9.1f} ms  speed-up {statistics.median(rs):.2f}x "
                  f"({min(rs):.2f}..{max(rs):.2f})")
        print(f"  speed-up (other / this, all probes): {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}, max {max(ratios):.2f} over {repeats} rounds; measured)")
        if per.get(LDS_PROBE):
            rs = [o / m for m, o in per[LDS_PROBE]]
            print(f"  {LDS_PROBE} (this script's kernel, not in the sum above): this "
                  f"{statistics.median(m for m, _ in per[LDS_PROBE]) * 1e3:.1f} ms  other "
                  f"{statistics.median(o for _, o in per[LDS_PROBE]) * 1e3:.1f} ms  speed-up "
                  f"{statistics.median(rs):.2f}x ({min(rs):.2f}..{max(rs):.2f})")
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
        if not any((a.compare / d / "rdna3help.py").is_file() for d in ("tests/helpers", "tests")):
            ap.error(f"{a.compare} is not a tinyhw checkout (no tests/helpers/rdna3help.py or tests/rdna3help.py)")
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
    if shutil.which("llvm-mc-19"):
        code, times = lds_reduce_program(), []
        for _ in range(a.passes):
            res = run_lds_reduce(code, a.groups[0], times)
        dt = statistics.median(times)
        print(f"{LDS_PROBE:<10} {res.waves:>6} {res.wave_instructions:>11} {dt * 1e3:>11.1f} ms "
              f"{res.wave_instructions / dt:>12,.0f} {res.lane_instructions / dt:>12,.0f} {res.cycles:>18}  ok "
              "(this script's kernel, not in the total)")
    rate = 32 * tot_w / tot_t
    print(f"{'total':<10} {'':>6} {int(tot_w):>11} {tot_t * 1e3:>11.1f} ms {tot_w / tot_t:>12,.0f} {rate:>12,.0f}"
          f"  (measured; goal {TARGET:,} lane-inst/s: {'met' if rate >= TARGET else 'NOT met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
