"""USB copy-in / copy-out figures of issue 12: the seed (published) protocol against tinyhw's own.

Prints, for the emulated Navi31 behind the emulated ASM24 bridge: the pipelined modelled MB/s of both
copy-in protocols (tinyhw.boot.usbcopy_model, parameters = specs/asm24-usb-bridge.md §1 figures, the
fitted host costs documented there) and the gain; the modelled copy-out; and, from a functional run of
both protocols on the emulator (4 MiB, verified byte for byte), the exact transfer counters and the
emulator's unpipelined virtual time. Targets: seed 250-350 MB/s (published 276-323), tinyhw >= 600 MB/s.

    python bench/bench_usbcopy.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
os.environ.setdefault("TINYHW_LOCK_DIR", tempfile.mkdtemp(prefix="tinyhw-bench-locks-"))

from usbcopyhelp import rig

from tinyhw.boot.usbcopy_model import LinkModel, copy_in, copy_out

SIZE = 64 << 20


def main() -> int:
    seed, own = copy_in(SIZE, "seed"), copy_in(SIZE, "tinyhw")
    out = copy_out(SIZE)
    print(f"modelled copy-in  {SIZE >> 20} MiB  seed   {seed['mb_s']:7.1f} MB/s  (target 250-350, published 276-323)")
    print(f"modelled copy-in  {SIZE >> 20} MiB  tinyhw {own['mb_s']:7.1f} MB/s  (target >= 600)")
    print(f"gain tinyhw / seed: {own['mb_s'] / seed['mb_s']:.2f}x")
    print(f"modelled copy-out {SIZE >> 20} MiB         {out['mb_s']:7.1f} MB/s")
    print("sensitivity to the fitted host staging rate (the seed's bottleneck in this model):")
    for rate in (0.3e9, 0.5e9, 1e9, 5e9):
        m = LinkModel(stage_rate=rate)
        print(f"  staging {rate / 1e9:3.1f} GB/s: seed {copy_in(SIZE, 'seed', m)['mb_s']:6.1f} MB/s, "
              f"tinyhw {copy_in(SIZE, 'tinyhw', m)['mb_s']:6.1f} MB/s")
    data = os.urandom(4 << 20)
    with tempfile.TemporaryDirectory() as tmp:
        for proto in ("seed", "tinyhw"):
            with rig(Path(tmp)) as r:
                n0, c0 = r.bridge.counters["usb_transfers"], r.t.clock.now()
                r.copier.copy_in(0x8000000, data, proto)
                n1, c1 = r.bridge.counters["usb_transfers"], r.t.clock.now()
                ok = r.copier.copy_out(0x8000000, len(data)) == data
                n2, c2 = r.bridge.counters["usb_transfers"], r.t.clock.now()
                print(f"emulator {proto:6s} 4 MiB: copy-in {n1 - n0} usb transfers ({r.copier.stats['fence_reads']} "
                      f"fence reads), unpipelined {len(data) / (c1 - c0) / 1e6:6.1f} MB/s; copy-out {n2 - n1} "
                      f"transfers, {len(data) / (c2 - c1) / 1e6:6.1f} MB/s; verified {ok}")
    ok = 250 <= seed["mb_s"] <= 350 and own["mb_s"] >= 600
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
