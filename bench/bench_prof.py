"""`tinyhw prof` decode speed on the largest shared SQTT capture (issue 13 target: >= 1,000,000 packets/s).

Decodes every shader-engine stream of the capture in ../shared/data/sqtt with the most packets
(all SEs, all fields and timestamps) several times and prints the best rate in packets per second,
by wall clock and by process CPU time (the latter barely moves when other jobs share the CPU).
If tinygrad is importable its decoder is timed on the same streams and the ratio printed; otherwise
the script says it is not installed.
"""

from __future__ import annotations

import time
from pathlib import Path

from tinyhw.formats.sqtt import decode

DATA = Path(__file__).resolve().parents[2] / "shared" / "data" / "sqtt"
TARGET = 1_000_000


def best_rate(blobs: list[bytes], fn, repeats: int = 15, clock=time.perf_counter) -> tuple[float, int]:
    """Packets per second of the fastest of ``repeats`` passes over all streams, timed with ``clock``."""
    best, packets = float("inf"), 0
    for _ in range(repeats):
        t0 = clock()
        packets = sum(fn(b) for b in blobs)
        best = min(best, clock() - t0)
    return packets / max(best, 1e-9), packets


def main() -> None:
    caps = {d: [f.read_bytes() for f in sorted(d.glob("sqtt_*.bin"))] for d in sorted(DATA.glob("*/*"))
            if (d / "capture.json").is_file()}
    sizes = {d: sum(len(decode(b)) for b in blobs) for d, blobs in caps.items()}
    largest = max(sizes, key=sizes.__getitem__)
    blobs = caps[largest]
    rate, packets = best_rate(blobs, lambda b: len(decode(b)))
    cpu_rate, _ = best_rate(blobs, lambda b: len(decode(b)), clock=time.process_time)
    print(f"capture: {largest.relative_to(DATA)} ({len(blobs)} SE streams, {sum(map(len, blobs))} bytes, "
          f"{packets} packets)")
    print(f"tinyhw decode: {rate:,.0f} packets/s wall clock, {cpu_rate:,.0f} packets/s of process cpu time "
          f"(target >= {TARGET:,}: {'met' if rate >= TARGET else 'NOT met'} on wall clock; on a busy machine the "
          "cpu-time figure is the steadier one)")
    try:
        import tinygrad.renderer.amd.sqtt as tg  # type: ignore[import-not-found]
    except ImportError:
        print("tinygrad: not installed, no comparison")
        return
    fn = getattr(tg, "decode", None)
    if not callable(fn):
        print("tinygrad: installed, but its sqtt module has no decode(); no comparison")
        return
    tg_rate, _ = best_rate(blobs, lambda b: sum(1 for _ in fn(b)), repeats=3)
    print(f"tinygrad decode: {tg_rate:,.0f} packets/s; tinyhw is {rate / tg_rate:.1f}x")


if __name__ == "__main__":
    main()
