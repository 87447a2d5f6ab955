"""`tinyhw prof` decode speed on the largest vendored SQTT capture (issue 13 target: >= 1,000,000 packets/s).

Decodes every shader-engine stream of the capture in tests/data/sqtt with the most packets (all SEs,
all fields and timestamps) and prints, measured on this machine, packets per second of process CPU
time (min/median/max over the passes) and the wall-clock median.

If tinygrad is importable its decoder (``tinygrad.renderer.amd.sqtt.decode``) is timed on the same
streams in the same run: the two decoders alternate pass by pass (pair i runs tinyhw first when i is
even, tinygrad first when i is odd), both get the same number of passes, and each pass is timed on
process CPU time, so a neighbour job that steals the CPU slows neither side's figure. The ratio is
printed as the median of the per-pair ratios (tinygrad's CPU time / tinyhw's) with their min and max.
Without tinygrad the script says it is not installed.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from pathlib import Path

from tinyhw.formats.sqtt import decode

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "sqtt"
TARGET = 1_000_000

Pass = Callable[[], int]  # one pass over all streams, returns the packets it decoded


def timed(fn: Pass, clock: Callable[[], float]) -> tuple[float, int]:
    t0 = clock()
    packets = fn()
    return clock() - t0, packets


def alternate(a: Pass, b: Pass, repeats: int,
              clock: Callable[[], float] = time.process_time) -> tuple[list[float], list[float]]:
    """``repeats`` pairs of one pass of ``a`` and one of ``b``, the order swapped every pair; the times of each."""
    ta: list[float] = []
    tb: list[float] = []
    for i in range(repeats):
        if i % 2 == 0:
            ta.append(timed(a, clock)[0])
            tb.append(timed(b, clock)[0])
        else:
            tb.append(timed(b, clock)[0])
            ta.append(timed(a, clock)[0])
    return ta, tb


def spread(values: list[float]) -> tuple[float, float, float]:
    return min(values), statistics.median(values), max(values)


def pair_ratios(ta: list[float], tb: list[float]) -> list[float]:
    """Per pair: how many times longer ``b`` took than ``a`` (so > 1 means ``a`` is faster)."""
    return [y / max(x, 1e-12) for x, y in zip(ta, tb, strict=True)]


def tinygrad_decoder() -> tuple[Callable[[bytes], object] | None, str]:
    try:
        from tinygrad.renderer.amd import sqtt  # type: ignore[import-not-found]
    except ImportError:
        return None, "tinygrad: not installed, no comparison"
    fn = getattr(sqtt, "decode", None)
    if not callable(fn):
        return None, "tinygrad: installed, but its sqtt module has no decode(); no comparison"
    return fn, ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15, help="passes per decoder (equal for both; default 15)")
    args = ap.parse_args(argv)
    if not 1 <= args.repeats <= 1000:
        ap.error("--repeats must be 1..1000")
    caps = {d: [f.read_bytes() for f in sorted(d.glob("sqtt_*.bin"))] for d in sorted(DATA.glob("*/*"))
            if (d / "capture.json").is_file()}
    if not caps:
        ap.exit(3, f"no captures under {DATA}\n")
    sizes = {d: sum(len(decode(b)) for b in blobs) for d, blobs in caps.items()}
    largest = max(sizes, key=sizes.__getitem__)
    blobs = caps[largest]
    packets = sizes[largest]

    def ours() -> int:
        return sum(len(decode(b)) for b in blobs)

    print(f"capture: {largest.relative_to(DATA)} ({len(blobs)} SE streams, {sum(map(len, blobs))} bytes, "
          f"{packets} packets); all figures measured on this machine")
    wall = [timed(ours, time.perf_counter)[0] for _ in range(args.repeats)]
    cpu = [timed(ours, time.process_time)[0] for _ in range(args.repeats)]
    lo, med, hi = spread([packets / max(t, 1e-12) for t in cpu])
    print(f"tinyhw decode, {args.repeats} passes: {med:,.0f} packets/s of process cpu time (median; min {lo:,.0f}, "
          f"max {hi:,.0f}), {packets / statistics.median(wall):,.0f} packets/s wall clock (median) "
          f"(target >= {TARGET:,}: {'met' if med >= TARGET else 'NOT met'} on cpu time)")
    fn, why = tinygrad_decoder()
    if fn is None:
        print(why)
        return

    def theirs() -> int:
        return sum(sum(1 for _ in fn(b)) for b in blobs)

    theirs()  # first use builds tinygrad's decode tables; not part of any pass
    ta, tb = alternate(ours, theirs, args.repeats)
    lo, med, hi = spread(pair_ratios(ta, tb))
    print(f"tinygrad decode: {packets / statistics.median(tb):,.0f} packets/s of process cpu time (median); "
          f"tinyhw {packets / statistics.median(ta):,.0f} in the same {args.repeats} alternated pairs")
    print(f"tinyhw is {med:.2f}x tinygrad (median of {args.repeats} per-pair cpu-time ratios; "
          f"min {lo:.2f}x, max {hi:.2f}x)")


if __name__ == "__main__":
    main()
