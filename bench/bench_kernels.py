"""Copy bandwidth of the ``bandwidth`` probe on tinygrad's CPU device next to a numpy copy of the same size.

Runs ``tinyhw kernels run bandwidth --device cpu`` (in-process, JSON) and times ``numpy.bitwise_xor(a, K,
out=b)`` (the same work: read n words, write n words) and ``numpy.copyto`` on the same machine, best of R.
Needs the compile extra, clang and numpy. Usage: python bench/bench_kernels.py [--n N] [--repeats R]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import time


def tinyhw_run(n: int, repeats: int) -> dict:
    from tinyhw.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(["--json", "kernels", "run", "bandwidth", "--device", "cpu", "--n", str(n), "--repeats", str(repeats)])
    return json.loads(out.getvalue())


def numpy_best(n: int, repeats: int) -> tuple[float, float]:
    import numpy as np

    a = np.arange(n, dtype=np.uint32)
    b = np.empty_like(a)
    key = np.uint32(0x5A5A5A5A)

    def best(fn) -> float:
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return min(times)

    xor = best(lambda: np.bitwise_xor(a, key, out=b))
    copy = best(lambda: np.copyto(b, a))
    return 8 * n / xor / 1e9, 8 * n / copy / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 23, help="u32 elements per buffer (default 8 Mi = 32 MiB)")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    try:
        import numpy  # noqa: F401
    except ImportError:
        sys.exit("bench_kernels needs numpy: pip install numpy")
    doc = tinyhw_run(args.n, args.repeats)
    if not doc["check"]["ok"]:
        sys.exit(f"bandwidth probe failed its check: {doc['check']['detail']}")
    np_xor, np_copy = numpy_best(args.n, args.repeats)
    mib = 4 * args.n / 2**20
    print(f"buffers: 2 x {mib:.0f} MiB (u32 x {args.n}), best of {args.repeats} (measured; the spread of the tinyhw "
          f"runs: {min(doc['seconds']) * 1e3:.3f}-{max(doc['seconds']) * 1e3:.3f} ms); GB/s counts read + write")
    print(f"tinyhw kernels run bandwidth --device cpu : {doc['figure']:8.2f} GB/s  (check: pass)")
    print(f"numpy bitwise_xor(a, K, out=b)            : {np_xor:8.2f} GB/s")
    print(f"numpy copyto(b, a)                        : {np_copy:8.2f} GB/s")
    print(f"ratio probe / numpy xor                   : {doc['figure'] / np_xor:8.2f}")
    print(f"ratio probe / numpy copy                  : {doc['figure'] / np_copy:8.2f}")


if __name__ == "__main__":
    main()
