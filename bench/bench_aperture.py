"""Aperture dump figure of issue 5: `tinyhw flash dump FILE --method aperture` of the whole 2 MiB flash.

Prints, from the exact --stats counters of the command on mock:navi31 (and with --usb also on
mock:navi31-usb, which takes about 20 s of wall time here): register reads and writes (one ROM_DATA
read per dword, so 524,288 reads plus the two originals; one ROM_INDEX write per 64 KiB page plus
the two restores), round trips, modelled time and wall time, and compares the dump with a ROM_SW
dump of the same board. Runs in a private cache/state/lock directory so it never touches the user's
emulated flash file.

    python bench/bench_aperture.py [--usb]
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SIZE = 2 << 20


def tinyhw(device: str, args: list[str], env: dict[str, str], cwd: str) -> tuple[float, dict]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tinyhw", "--device", device, "--stats", *args],
                       capture_output=True, text=True, env=env, cwd=cwd, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench: tinyhw {' '.join(args)} failed ({r.returncode}): {r.stderr.strip()}")
    return wall, json.loads([ln for ln in r.stderr.splitlines() if ln.startswith("{")][-1])


def main() -> None:
    boards = ["mock:navi31"] + (["mock:navi31-usb"] if "--usb" in sys.argv[1:] else [])
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), XDG_STATE_HOME=os.path.join(tmp, "state"),
                   TINYHW_LOCK_DIR=os.path.join(tmp, "locks"))
        env.pop("TINYHW_STRICT", None)
        tinyhw("mock:navi31", ["flash", "dump", "romsw.bin"], env, tmp)
        reference = hashlib.sha256(Path(tmp, "romsw.bin").read_bytes()).hexdigest()
        ok = True
        for board in boards:
            wall, st = tinyhw(board, ["flash", "dump", "ap.bin", "--method", "aperture"], env, tmp)
            data = Path(tmp, "ap.bin").read_bytes()
            same = len(data) == SIZE and hashlib.sha256(data).hexdigest() == reference
            ok = ok and same and st["reg_reads"] == SIZE // 4 + 2
            print(f"flash dump --method aperture (2 MiB) on {board}: reg_reads {st['reg_reads']:,} "
                  f"(ROM_DATA dwords {SIZE // 4:,} + 2 originals), reg_writes {st['reg_writes']:,}, "
                  f"round_trips {st['round_trips']:,}, usb_transfers {st['usb_transfers']:,}")
            print(f"  modelled_s {st['modelled_s']:.3f} (modelled, exact), wall {wall:.2f} s (measured, one run), "
                  f"{'equals' if same else 'DIFFERS from'} the rom_sw dump (sha256 {reference[:16]})")
        print("result:", "ok" if ok else "unexpected")


if __name__ == "__main__":
    main()
