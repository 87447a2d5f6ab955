"""Emulator-side figures of the emulated Navi31 boot (issue 11 item 5), exact counters, no wall-clock noise.

Drives both attachments with the spec-side test driver (tests/helpers/mockboot.py: the protocol steps of
specs/amd-bringup.md §4.2 5-8, not the product's `tinyhw am boot`) and prints, per board:
firmware bytes copied into VRAM, BAR5 register writes, USB transfers (mock:navi31-usb), bytes per
USB transfer during the firmware copies, modelled seconds, and the USB transfers one metrics
refresh costs (TransferTableSmu2Dram + reading the 392-byte table: the floor for `smi --once`).
Needs the Debian firmware (`bash tests/fetch_firmware.sh`).
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "helpers"))

from mockboot import Am, open_am


class _Counting:
    """Wraps BAR0 writes to count firmware bytes and the USB transfers they cost."""

    def __init__(self, am: Am) -> None:
        self.am = am
        self.bytes = 0
        self.transfers = 0
        inner = am.vram_write

        def write(phys: int, data: bytes) -> None:
            before = am.t.counters.usb_transfers
            inner(phys, data)
            if len(data) >= 4096:  # the image copies (command buffers and frames are small)
                self.bytes += len(data)
                self.transfers += am.t.counters.usb_transfers - before

        am.vram_write = write  # type: ignore[method-assign]


def run(board: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d, open_am(f"{board},flash={Path(d) / 'flash.bin'}") as am:
        copy = _Counting(am)
        t0 = time.perf_counter()
        m0 = am.clock.now()
        am.full_boot()
        wall = time.perf_counter() - t0
        boot = {
            "fw_bytes": copy.bytes, "fw_usb_transfers": copy.transfers,
            "usb_transfers": am.t.counters.usb_transfers, "bar5_writes": am.board.counters()["bar5_writes"],
            "vram_bytes_written": am.board.counters()["vram_bytes_written"],
            "modelled_s": am.clock.now() - m0, "wall_s": wall,
        }
        before = am.t.counters.usb_transfers
        am.metrics()
        boot["metrics_refresh_usb_transfers"] = am.t.counters.usb_transfers - before
        return boot


def main() -> None:
    for board in ("mock:navi31", "mock:navi31-usb"):
        r = run(board)
        print(f"{board}: firmware {r['fw_bytes']} B into VRAM, VRAM written {r['vram_bytes_written']} B, "
              f"BAR5 writes {r['bar5_writes']}, modelled {r['modelled_s']:.3f} s (modelled, exact), "
              f"wall {r['wall_s']:.2f} s (measured, one run)")
        if board.endswith("usb"):
            per = r["fw_bytes"] / max(1, r["fw_usb_transfers"])
            print(f"  USB transfers: boot {r['usb_transfers']}, firmware copies {r['fw_usb_transfers']} "
                  f"({per / 1024:.1f} KiB per transfer, goal >= 16 KiB); one metrics refresh "
                  f"{r['metrics_refresh_usb_transfers']} (goal <= 20)")


if __name__ == "__main__":
    main()
