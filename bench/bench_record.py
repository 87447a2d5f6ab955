"""What recording a session costs: `--record FILE` on `flash dump` and `am boot` over mock:navi31-usb.

Measured, on this machine: each command runs with and without `--record`, alternated (plain, recorded, plain,
recorded, ...), the same number of times each, every run on a fresh emulated board. Two times per run: the
command's own wall time (`--stats` elapsed_s: from the CLI's start to the end of the command, so Python's
start-up is left out) and the CPU time of the process (user + system, from wait4; this machine is shared, and CPU
time is the figure other processes disturb least). The figures are ratios recorded/plain of the minimum and of
the median over the repeats. Exact: records per access kind and bytes per access of the trace file, against
the same accesses written as Linux mmiotrace text lines (`tinyhw trace export mmiotrace`, the kernel's layout).
The emulated board runs on its device clock, so the modelled work is identical in every run.

Usage: python bench/bench_record.py [--repeats N] [--only 'flash dump'|'am boot']   (default: 5 repeats, both)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from tinyhw.formats import tracefile as tf

FW_DIR = os.environ.get("TINYHW_FIRMWARE_DIR", str(Path.home() / ".cache/tinyhw/firmware/amd/lib/firmware/amdgpu"))
COMMANDS = {"flash dump": ["flash", "dump", "{tmp}/dump.bin"],
            "am boot": ["am", "boot", "--yes", "--firmware-dir", FW_DIR]}


def _run(args: list[str], env: dict[str, str], tmp: Path, record: Path | None) -> tuple[float, float]:
    flash = tmp / "flash.bin"
    for leftover in (flash, tmp / "flash.bin.board.json", tmp / "dump.bin"):
        leftover.unlink(missing_ok=True)
    cmd = [sys.executable, "-m", "tinyhw", "--device", f"mock:navi31-usb,strict,flash={flash}", "--stats"]
    if record is not None:
        record.unlink(missing_ok=True)
        cmd += ["--record", str(record)]
    p = subprocess.Popen(cmd + [a.format(tmp=tmp) for a in args], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env, cwd=tmp)
    err = p.stderr.read() if p.stderr is not None else ""
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if p.returncode != 0:
        sys.exit(f"bench: {' '.join(args)} failed ({p.returncode}): {err.strip()[-400:]}")
    stats = [ln for ln in err.splitlines() if ln.startswith("{")]
    return float(json.loads(stats[-1])["elapsed_s"]), usage.ru_utime + usage.ru_stime


def _sizes(path: Path, tmp: Path, env: dict[str, str]) -> dict[str, float]:
    trace = tf.read_trace(path.read_bytes())
    regs = [r for r in trace.records if r.op in (tf.READ32, tf.WRITE32)]
    text = tmp / "export.txt"
    text.unlink(missing_ok=True)
    subprocess.run([sys.executable, "-m", "tinyhw", "trace", "export", "mmiotrace", str(path), "-o", str(text)],
                   check=True, capture_output=True, env=env, cwd=tmp)
    lines = [ln for ln in text.read_text().splitlines() if ln.startswith(("R ", "W "))]
    kinds: dict[str, int] = {}
    for r in trace.records:
        kinds[r.name] = kinds.get(r.name, 0) + 1
    one = len(tf.packet(tf.READ32, 0, 0, 0, 5, 4, (0x5A3A0, 0)))
    return {"records": len(trace.records), "file_bytes": path.stat().st_size, "register_accesses": len(regs),
            "bytes_per_register_record": one,
            "mmiotrace_bytes_per_line": round(sum(len(ln) + 1 for ln in lines) / max(1, len(lines)), 1),
            "file_bytes_per_record": round(path.stat().st_size / max(1, len(trace.records)), 1), "kinds": kinds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--only", choices=sorted(COMMANDS), help="Measure one command only.")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tinyhw-bench-record-") as d:
        tmp = Path(d)
        env = {**os.environ, "XDG_CACHE_HOME": str(tmp / "cache"), "XDG_STATE_HOME": str(tmp / "state"),
               "TINYHW_LOCK_DIR": str(tmp / "locks"), "TINYHW_CLOCK": "device", "TINYHW_STRICT": "1"}
        out: dict[str, dict] = {}
        for name, cmd in COMMANDS.items():
            if args.only and name != args.only:
                continue
            plain, recorded = [], []
            record = tmp / "rec.pcapng"
            _run(cmd, env, tmp, None)  # warm the page cache and the firmware reads
            for _ in range(args.repeats):
                plain.append(_run(cmd, env, tmp, None))
                recorded.append(_run(cmd, env, tmp, record))
            doc: dict = {"repeats": args.repeats}
            for k, what in ((0, "wall"), (1, "cpu")):
                a, b = [p[k] for p in plain], [r[k] for r in recorded]
                doc[what] = {"plain_min_s": round(min(a), 3), "recorded_min_s": round(min(b), 3),
                             "ratio_of_min": round(min(b) / min(a), 3),
                             "plain_median_s": round(statistics.median(a), 3),
                             "recorded_median_s": round(statistics.median(b), 3),
                             "ratio_of_median": round(statistics.median(b) / statistics.median(a), 3)}
            out[name] = {**doc, **_sizes(record, tmp, env)}
        print(json.dumps({"measured": "on this machine, alternated runs on fresh boards: wall = the command's own "
                                      "time (--stats elapsed_s), cpu = the process's user+system time (start-up "
                                      "included); sizes and record counts exact", **out}, indent=1))


if __name__ == "__main__":
    main()
