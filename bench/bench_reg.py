"""Timing of the register database and the `tinyhw reg` commands (issue 3 performance targets).

Prints the best wall time (of 5) of:
  * `python -c "import tinyhw.regs; ...lookup of smuio.ROM_SW_CNTL"` (import + one block),
  * `tinyhw reg find 'smuio.ROM*' --asic navi31` and `tinyhw reg decode ...` via `python -m tinyhw`
    (targets < 0.5 s each),
and, in-process, the first-use load time of each generated table plus the bytes on disk.
Offline only: no device is opened.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time
from pathlib import Path

TARGET_S = 0.5
LOOKUP = "import tinyhw.regs as r; assert r.asic('navi31').reg('smuio.ROM_SW_CNTL').offset == 0x5A3A0"
COMMANDS = {
    "reg find 'smuio.ROM*' --asic navi31": ["reg", "find", "smuio.ROM*", "--asic", "navi31"],
    "reg decode smuio.ROM_SW_CNTL 0x80003 --asic navi31": [
        "reg",
        "decode",
        "smuio.ROM_SW_CNTL",
        "0x80003",
        "--asic",
        "navi31",
    ],
}


def best(argv: list[str], n: int = 5) -> tuple[list[float], subprocess.CompletedProcess]:
    """Wall seconds of ``n`` runs of ``argv`` (measured) and the last run's result."""
    runs = []
    for _ in range(n):
        t0 = time.perf_counter()
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        runs.append((time.perf_counter() - t0, proc))
    return [t for t, _ in runs], runs[-1][1]


def spread(values: list[float]) -> str:
    """``median (min X, max Y)`` in seconds."""
    return f"{statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def table_loads() -> list[tuple[str, float, int]]:
    """(stem, seconds to import and index it, bytes on disk) for every generated table, in a fresh process."""
    code = (
        "import time, json\n"
        "from tinyhw.autogen import sources\n"
        "from tinyhw.regs.table import table\n"
        "out = []\n"
        "for s in sources.STEMS:\n"
        "    t0 = time.perf_counter(); table(s).names(); out.append((s, time.perf_counter() - t0))\n"
        "print(json.dumps(out))\n"
    )
    import json

    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    autogen = Path(__file__).resolve().parent.parent / "tinyhw" / "autogen"
    return [(s, dt, (autogen / f"{s}_regs.py").stat().st_size) for s, dt in json.loads(proc.stdout)]


def main() -> None:
    ok = True
    t, proc = best([sys.executable, "-c", LOOKUP])
    if proc.returncode != 0:
        sys.exit(f"bench: lookup failed: {proc.stderr.strip()}")
    print(f"python -c 'import tinyhw.regs; lookup smuio.ROM_SW_CNTL': {spread(t)} (measured wall, 5 runs)")
    for label, args in COMMANDS.items():
        t, proc = best([sys.executable, "-m", "tinyhw", *args])
        if proc.returncode != 0:
            print(
                f"tinyhw {label}: not runnable ({proc.stderr.strip().splitlines()[-1:]}); is `reg` wired into the CLI?"
            )
            ok = False
            continue
        print(f"tinyhw {label}: {spread(t)} (measured wall, 5 runs; target < {TARGET_S} s, median)")
        ok = ok and statistics.median(t) < TARGET_S
    loads = table_loads()
    total = sum(size for _, _, size in loads)
    print("first use of each table (import + name index; measured, one run), size on disk:")
    for stem, dt, size in loads:
        print(f"  {stem:14} {dt * 1e3:6.1f} ms  {size:8d} bytes")
    print(f"  total {total} bytes in {len(loads)} generated modules")
    print("result:", "ok" if ok else "over target")


if __name__ == "__main__":
    main()
