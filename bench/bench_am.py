"""AMD bring-up figures of issue 11: `tinyhw am boot` and `tinyhw smi --once` over mock:navi31-usb.

Prints, from the exact counters of the commands (``--json`` boot document and ``--stats``): bytes of
firmware moved to VRAM, the USB transfers of the whole boot and of the firmware copies alone, bytes
per USB transfer of the firmware copy (goal >= 16 KiB), the modelled seconds of the boot, and the USB
transfers of one ``smi --once`` refresh (goal <= 20). Over mock:navi31-usb the boot runs twice: with the firmware
staged in the bridge sram (the default, ``--firmware-path auto``) and streamed into vram (``--firmware-path bar``),
with the register/streamed dword writes of each (exact). The same boot on mock:navi31 is shown for comparison.
Uses Debian's firmware-amd-graphics as extracted by ``bash tests/fetch_firmware.sh`` and a private cache/state/lock
directory, so it never touches the user's emulated board.

    python bench/bench_am.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FW = Path(os.environ.get("TINYHW_FIRMWARE_DIR")
          or Path(os.environ.get("TINYHW_CACHE") or Path.home() / ".cache" / "tinyhw") / "firmware") \
    / "amd" / "lib" / "firmware" / "amdgpu"


def tinyhw(device: str, args: list[str], env: dict[str, str]) -> tuple[float, dict, dict]:
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "tinyhw", "--device", device, "--json", "--stats", *args],
                       capture_output=True, text=True, env=env, check=False)
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        sys.exit(f"bench: tinyhw {' '.join(args)} on {device} failed ({r.returncode}): {r.stderr.strip()}")
    stats = json.loads([ln for ln in r.stderr.splitlines() if ln.startswith("{")][-1])
    return wall, json.loads(r.stdout), stats


def main() -> None:
    if not (FW / "psp_13_0_0_sos.bin").is_file():
        sys.exit(f"bench: no firmware under {FW}; run bash tests/fetch_firmware.sh")
    ok = True
    for device, path in (("mock:navi31-usb", "auto"), ("mock:navi31-usb", "bar"), ("mock:navi31", "auto")):
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"),
                       XDG_STATE_HOME=os.path.join(tmp, "state"), TINYHW_LOCK_DIR=os.path.join(tmp, "locks"))
            wall, doc, st = tinyhw(device, ["am", "boot", "--yes", "--firmware-dir", str(FW), "--firmware-path", path],
                                   env)
            copy = doc["firmware_copy"]
            per = copy["bytes"] / copy["usb_transfers"] if copy.get("usb_transfers") else 0.0
            print(f"am boot on {device} ({doc['boot']}, firmware path {copy.get('path')}): firmware "
                  f"{doc['firmware_bytes']:,} bytes in {copy['copies']} copies ({copy['bytes']:,} bytes with padding), "
                  f"{st['reg_writes']:,} register/streamed dword writes")
            print(f"  usb_transfers {st['usb_transfers']:,} in all, {copy['usb_transfers']:,} for the firmware copy "
                  f"-> {per / 1024:,.1f} KiB per usb transfer" if st["usb_transfers"] else
                  f"  register accesses {st['reg_reads'] + st['reg_writes']:,} (no usb)")
            print(f"  modelled_s {st['modelled_s']:.3f} (modelled, exact), wall {wall:.2f} s (measured, one run), "
                  f"steps {len(doc['steps'])}")
            if st["usb_transfers"]:
                ok = ok and per >= 16 * 1024
            _, smi, st2 = tinyhw(device, ["smi", "--once"], env)
            n = smi["refresh"]["usb_transfers"]
            print(f"smi --once on {device}: {n} usb transfers per refresh ({st2['usb_transfers']} for the whole "
                  f"command, attach included), gfx {smi['clocks_mhz']['gfx']} MHz, "
                  f"{smi['power_w']['socket']} W")
            if st["usb_transfers"]:
                ok = ok and n <= 20
    print("result:", "ok (>= 16 KiB per firmware transfer, <= 20 transfers per smi refresh)" if ok else "MISSED")


if __name__ == "__main__":
    main()
