"""Flash figures of issue 4, from the exact --stats counters of `tinyhw flash ...` on mock:navi31-usb.

Prints, for the default timing of the emulated board (typical flash durations, modelled USB latency):

- `flash dump`: USB transfers and IN transfers per 256 bytes (targets <= 6 and <= 2; the seed needed
  about 52 and 26), modelled time of the whole 2 MiB dump, and its wall time on this machine (< 15 s);
- round trips and USB transfers per MiB for `dump`, `verify`, and `write` of an image that differs from
  the flash in 10% of its sectors (with its default backup, and with --no-backup);
- the same dump with --no-chain (the seed's paired reads) for comparison.

IN transfers are the transfers that bring data back: one per single TLP read (its completion) and one
per streamed read (its bulk IN); the counters give them as tlp_reads, plus one XDATA read at open.
Runs in a private cache/state/lock directory so it never touches the user's emulated flash file.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MiB = 1 << 20
SIZE = 2 * MiB
CHUNKS = SIZE // 256
SECTOR = 4096


def run_cli(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, dict, str]:
    """`tinyhw --device mock:navi31-usb --stats ARGS`: (wall seconds, --stats counters, stdout); exits on failure."""
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tinyhw", "--device", "mock:navi31-usb", "--stats", *args],
                       capture_output=True, text=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench: tinyhw {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    stats = json.loads([ln for ln in r.stderr.splitlines() if ln.startswith("{")][-1])
    return wall, stats, r.stdout


def tinyhw(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, dict]:
    wall, stats, _ = run_cli(args, env, cwd)
    return wall, stats


def per_mib(stats: dict) -> str:
    mib = SIZE / MiB
    return (f"round_trips/MiB={stats['round_trips'] / mib:,.0f}  usb_transfers/MiB={stats['usb_transfers'] / mib:,.0f}"
            f"  modelled_s={stats['modelled_s']:.2f}")


def changed_image(data: bytes, fraction: float, seed: int = 4) -> bytes:
    rnd = random.Random(seed)
    img = bytearray(data)
    sectors = rnd.sample(range(SIZE // SECTOR), round(fraction * SIZE / SECTOR))
    for s in sectors:
        img[s * SECTOR + 64:s * SECTOR + 1088] = rnd.randbytes(1024)
    return bytes(img)


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), XDG_STATE_HOME=os.path.join(tmp, "state"),
                   TINYHW_LOCK_DIR=os.path.join(tmp, "locks"))
        env.pop("TINYHW_STRICT", None)
        wall, dump = tinyhw(["flash", "dump", "dump.bin"], env, tmp)
        data = Path(tmp, "dump.bin").read_bytes()
        in_transfers = dump["tlp_reads"]
        print(f"flash dump (2 MiB, chained priming): wall {wall:.2f} s (measured, one run; target < 15 s), "
              f"modelled_s {dump['modelled_s']:.2f} (modelled, exact; counts below exact), "
              f"sha256 {hashlib.sha256(data).hexdigest()[:16]}")
        print(f"  per 256 bytes: usb_transfers {dump['usb_transfers'] / CHUNKS:.3f} (target <= 6), "
              f"IN transfers {in_transfers / CHUNKS:.3f} (target <= 2)  [seed: ~52 and ~26]")
        print(f"  totals: usb_transfers {dump['usb_transfers']:,} (seed: over 400,000), round_trips "
              f"{dump['round_trips']:,}, reg_reads {dump['reg_reads']:,}, reg_writes {dump['reg_writes']:,}")
        print(f"  {per_mib(dump)}")
        _, verify = tinyhw(["flash", "verify", "dump.bin"], env, tmp)
        print(f"flash verify: {per_mib(verify)}")
        img = changed_image(data, 0.10)
        Path(tmp, "img10.bin").write_bytes(img)
        wall_w, write = tinyhw(["flash", "write", "img10.bin", "--yes"], env, tmp)
        print(f"flash write, 10% of sectors differ, default backup: {per_mib(write)}  wall {wall_w:.2f} s "
              "(measured, one run)")
        Path(tmp, "img10b.bin").write_bytes(changed_image(img, 0.10, seed=5))
        wall_w, write = tinyhw(["flash", "write", "img10b.bin", "--no-backup", "--yes"], env, tmp)
        print(f"flash write, 10% of sectors differ, --no-backup:    {per_mib(write)}  wall {wall_w:.2f} s")
        wall_p, paired = tinyhw(["flash", "--no-chain", "dump", "paired.bin"], env, tmp)
        print(f"flash --no-chain dump (paired reads): usb_transfers/256 B {paired['usb_transfers'] / CHUNKS:.3f}, "
              f"IN/256 B {paired['tlp_reads'] / CHUNKS:.3f}, modelled_s {paired['modelled_s']:.2f}, "
              f"wall {wall_p:.2f} s")
        ok = wall < 15 and dump["usb_transfers"] / CHUNKS <= 6 and in_transfers / CHUNKS <= 2
        print("result:", "ok" if ok else "over target")


if __name__ == "__main__":
    main()
