"""Cost of reading the IP discovery table (10 KiB at VRAM size - 64 KiB) on both emulated boards.

Runs ``tinyhw --device BOARD --json --stats reg discovery`` and prints its counters:
on ``mock:navi31`` (BAR0 256 MiB < 24 GiB VRAM) the MM_INDEX/MM_DATA window, one register
write and one read per dword; on ``mock:navi31-usb`` (BAR0 resized to 32 GiB) one streamed
read through BAR0. The command's counters include opening the device (enumeration over USB).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

BOARDS = ("mock:navi31", "mock:navi31-usb")


def main() -> None:
    ok = True
    for board in BOARDS:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "tinyhw", "--device", board, "--json", "--stats", "reg",
                               "discovery"], capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        ok = ok and proc.returncode == 0
        doc = json.loads(proc.stdout) if proc.returncode == 0 else {}
        stats = json.loads([ln for ln in proc.stderr.splitlines() if ln.startswith("{")][-1])
        print(f"reg discovery on {board}: via {doc.get('path')}, {len(doc.get('ips', []))} ips, "
              f"reg_reads {stats['reg_reads']:,}, reg_writes {stats['reg_writes']:,}, "
              f"usb_transfers {stats['usb_transfers']:,} (exact), modelled {stats['modelled_s']:.4f} s (exact), "
              f"wall {wall:.2f} s (measured, one run: no spread)")
    print("result:", "ok" if ok else "failed")


if __name__ == "__main__":
    main()
