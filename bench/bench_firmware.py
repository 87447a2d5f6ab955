"""`tinyhw firmware inspect` figures on real files (issue 5 performance targets).

Prints the best wall time of `tinyhw firmware inspect FILE` (a fresh process, human output, and
--json) for the largest file of Debian's firmware-amd-graphics and for the 38 MB gsp_ga10x.bin of
firmware-nvidia-gsp (target < 1 s each), plus the in-process parse time, and a `firmware diff` of
the two GSP files. The packages come from `bash tests/fetch_firmware.sh` (a cache, never the repo).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

FW_DIR = Path(os.environ.get("TINYHW_FIRMWARE_DIR")
              or Path(os.environ.get("TINYHW_CACHE") or Path.home() / ".cache" / "tinyhw") / "firmware")


def wall(args: list[str], n: int = 3) -> list[float]:
    """Wall seconds of ``n`` runs of ``tinyhw ARGS`` (measured)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "tinyhw", *args], capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - t0)
        if r.returncode not in (0, 1):
            sys.exit(f"bench: tinyhw {' '.join(args)} failed: {r.stderr.strip()}")
    return times


def spread(values: list[float]) -> str:
    """``median (min X, max Y)`` in seconds."""
    return f"{statistics.median(values):.3f} s (min {min(values):.3f}, max {max(values):.3f})"


def in_process(path: Path) -> float:
    from tinyhw.firmware import inspect_file

    t0 = time.perf_counter()
    inspect_file(path)
    return time.perf_counter() - t0


def main() -> None:
    amd = sorted((FW_DIR / "amd" / "lib" / "firmware" / "amdgpu").glob("*.bin"), key=lambda p: p.stat().st_size)
    gsp = sorted((FW_DIR / "nvidia-gsp" / "lib" / "firmware" / "nvidia").glob("*/gsp_*.bin"),
                 key=lambda p: p.stat().st_size)
    if not amd or not gsp:
        sys.exit(f"bench: the firmware packages are not under {FW_DIR}; run `bash tests/fetch_firmware.sh`")
    ok = True
    for path in (amd[-1], gsp[-1]):
        size = path.stat().st_size
        t_human = wall(["firmware", "inspect", str(path)])
        t_json = wall(["--json", "firmware", "inspect", str(path)])
        t_parse = in_process(path)
        print(f"firmware inspect {path.name} ({size / 1e6:.1f} MB), measured wall, 3 runs: {spread(t_human)}, --json "
              f"{spread(t_json)} (target < 1 s, median); in-process {t_parse:.3f} s (one run)")
        ok &= max(statistics.median(t_human), statistics.median(t_json)) < 1.0
    if len(gsp) >= 2:
        t_diff = wall(["firmware", "diff", str(gsp[-1]), str(gsp[-2])], n=1)
        print(f"firmware diff {gsp[-1].name} {gsp[-2].name}: {t_diff[0]:.3f} s (measured wall, one run)")
    print("result:", "ok" if ok else "over target")


if __name__ == "__main__":
    main()
