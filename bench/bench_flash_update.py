"""`tinyhw flash update` on mock:navi31-usb: time, and mailbox round trips per KiB.

Streams the emulated board's own 2 MiB synthetic IFWI through the emulated PSP's early-boot mailbox (after
`tinyhw mock power-cycle`, so the PSP is in the early state), then verifies it after a second power cycle.
Prints, from the exact --stats counters and the board's virtual clock:

- counted (exact, the transport's counters): round trips and USB transfers per KiB streamed, and per dword;
- modelled (the board's virtual clock: the emulated bridge's per-transfer latencies, the PSP's invented
  100 us answer time, typical flash timings for the PSP's writes): the update's duration and rate;
- measured (this machine's wall clock): how long the emulation took; it says nothing about hardware;
- for comparison, modelled from the spec (§i.1 "≥ 7 accesses per 4 bytes", each access one USB round
  trip, a read two transfers): the seed's handshake per dword (ready read, data, command, doorbell, one
  poll, response read) = 9 transfers.

Runs in a private cache/state/lock directory so it never touches the user's emulated flash file.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from bench_flash import run_cli

#: §i.1 handshake per DATA_TRANSFER over the bridge: 3 reads x 2 transfers (TLP out, completion in) + 3 writes
SEED_TRANSFERS_PER_DWORD = 3 * 2 + 3


def tinyhw(args: list[str], env: dict[str, str], cwd: str) -> tuple[float, dict, dict | None]:
    """One CLI run on mock:navi31-usb (bench_flash.run_cli), its --json document parsed when asked for."""
    wall, stats, out = run_cli(args, env, cwd)
    return wall, stats, json.loads(out) if "--json" in args else None


def main() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tinyhw.mocks.amd.ifwi_image import build_image

    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, XDG_CACHE_HOME=os.path.join(tmp, "cache"), XDG_STATE_HOME=os.path.join(tmp, "state"),
                   TINYHW_LOCK_DIR=os.path.join(tmp, "locks"), TINYHW_CLOCK="device")
        env.pop("TINYHW_STRICT", None)
        Path(tmp, "image.bin").write_bytes(build_image())
        tinyhw(["mock", "power-cycle"], env, tmp)
        wall, stats, doc = tinyhw(["--json", "flash", "update", "image.bin", "--yes"], env, tmp)
        assert doc is not None
        streamed, dwords = doc["bytes"], doc["data_transfers"]
        per_kib = 1024 / streamed
        print(f"flash update of the 2 MiB synthetic ifwi on mock:navi31-usb: {len(doc['items'])} items, "
              f"{streamed:,} bytes ({dwords:,} DATA_TRANSFERs)")
        print(f"  stream, modelled (virtual clock): {doc['seconds']:.2f} s, "
              f"{doc['bytes_per_second'] / 1024:.1f} KiB/s; whole command (preflight, stream, the psp's flash "
              f"writes): {stats['modelled_s']:.2f} s")
        print(f"  measured (this machine's wall clock, emulation cost only): {wall:.2f} s")
        print(f"  stream, counted: round trips/KiB {doc['round_trips_per_kib']:,.0f}, round trips/dword "
              f"{doc['round_trips'] / dwords:.2f}; whole command: round trips/KiB "
              f"{stats['round_trips'] * per_kib:,.0f}, usb transfers/KiB {stats['usb_transfers'] * per_kib:,.0f}")
        print(f"  seed handshake (modelled from spec §i.1, not run): usb transfers/dword {SEED_TRANSFERS_PER_DWORD}, "
              f"/KiB {SEED_TRANSFERS_PER_DWORD * 256:,}; the stream here: {doc['round_trips'] / dwords:.2f}/dword, "
              f"{SEED_TRANSFERS_PER_DWORD * dwords / doc['round_trips']:.2f}x fewer")
        tinyhw(["mock", "power-cycle"], env, tmp)
        wall_v, verify, _ = tinyhw(["flash", "verify", "image.bin", "--after-update"], env, tmp)
        print(f"flash verify --after-update (aperture read of 2 MiB): modelled {verify['modelled_s']:.2f} s, "
              f"measured {wall_v:.2f} s, round trips {verify['round_trips']:,}")


if __name__ == "__main__":
    main()
