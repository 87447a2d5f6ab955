"""Native PCIe figures (issue 6 performance targets).

Prints:
* the median wall time of `tinyhw pci list` over several runs (a fresh process each; target
  < 0.3 s) and its ratio to `lspci -Dnn` (also the median) on this machine;
* 32-bit register reads per second through the `pci:` transport (one mmap'ed ``resource0`` of
  QEMU's edu device, ``BarRegion.read32`` in a loop for one second) inside the real-kernel test
  guest (tests/guest, TCG-emulated: the figure measures tinyhw's per-access overhead under
  emulation, not a real bus). ``--results FILE`` takes it from a guest run's results.json
  instead of booting the guest; ``--no-guest`` skips it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def median_wall(cmd: list[str], runs: int) -> tuple[float, str]:
    times, out = [], ""
    for _ in range(runs):
        t0 = time.perf_counter()
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if r.returncode:
            sys.exit(f"bench: {' '.join(cmd)} failed: {r.stderr.strip()}")
        out = r.stdout
    return statistics.median(times), out


def guest_reads_per_second() -> dict:
    """Boot the test guest once and run only the reads-per-second step of pciguest_main.py."""
    sys.path.insert(0, str(REPO / "tests" / "guest"))
    from build import build_guest
    from qemu import boot

    outdir = Path(tempfile.mkdtemp(prefix="tinyhw-bench-"))
    script = (f"cd {REPO}\nexport PYTHONPATH={REPO} HOME=/root TINYHW_GUEST_STEPS=reads_per_second\n"
              f"{sys.executable} tests/guest/pciguest_main.py /run/out\n")
    result = boot(build_guest(), outdir, script, timeout_s=180)
    path = outdir / "results.json"
    if not path.exists():
        sys.exit(f"bench: the guest wrote no results (qemu rc {result.returncode})\n{result.serial[-2000:]}")
    return json.loads(path.read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--results", type=Path, help="results.json of a guest run (skips booting the guest)")
    ap.add_argument("--no-guest", action="store_true")
    args = ap.parse_args()

    t_ours, ours = median_wall([sys.executable, "-m", "tinyhw", "pci", "list"], args.runs)
    line = f"tinyhw pci list: {t_ours:.3f} s median of {args.runs} (target < 0.3 s)"
    lspci = shutil.which("lspci")
    if lspci:
        t_lspci, theirs = median_wall([lspci, "-Dnn"], args.runs)
        line += f"; lspci -Dnn: {t_lspci:.4f} s; ratio {t_ours / t_lspci:.1f}x"
        line += "; output identical" if ours == theirs else "; OUTPUT DIFFERS"
    print(line)
    if args.no_guest:
        return
    results = json.loads(args.results.read_text()) if args.results else guest_reads_per_second()
    rps = results.get("reads_per_second", {})
    if "per_second" not in rps:
        sys.exit(f"bench: no reads_per_second in the guest results: {rps}")
    print(f"pci: 32-bit register reads in the TCG guest (edu bar0 via resource0): {rps['per_second']:,.0f} /s "
          f"({rps['reads']} reads in {rps['seconds']:.2f} s)")


if __name__ == "__main__":
    main()
