"""NVIDIA figures on the emulated AD102 (issue 14), exact emulator counters, not machine noise:

* register reads and writes of ``probe`` at tier 0 (target: 0) and tier 2 (target: the spec's 5 reads, 0 writes);
* register reads of ``flash dump --method prom`` (1 MiB as dwords: 262144) and its modelled time;
* the wall time of ``firmware inspect`` and ``firmware diff`` on the 1 MiB dump (median of 5, in-process).

Run: ``python bench/bench_nv.py``.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path

import tinyhw
from tinyhw.firmware import diff_bytes, inspect_bytes
from tinyhw.flash.prom import dump_prom
from tinyhw.probe import probe_device


def main() -> None:
    for registers in (False, True):
        with tinyhw.open("mock:ad102") as dev:
            probe_device(dev.transport, registers=registers)
            s = dev.stats()
        print(f"probe tier {2 if registers else 0}: reg_reads {s['reg_reads']}, reg_writes {s['reg_writes']}")
    with tinyhw.open("mock:ad102") as dev:
        data = dump_prom(dev.transport)
        s = dev.stats()
    print(f"flash dump --method prom: {len(data)} bytes, reg_reads {s['reg_reads']}, reg_writes {s['reg_writes']}, "
          f"modelled {s['modelled_s']:.3f} s")
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        inspect_bytes(data, "vbios.rom")
        times.append(time.perf_counter() - t0)
    print(f"firmware inspect (1 MiB nvidia vbios), measured: median {statistics.median(times) * 1e3:.1f} ms (min "
          f"{min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f})")
    other = bytearray(data)
    other[0x12000] ^= 1
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        diff_bytes(data, "a", bytes(other), "b")
        times.append(time.perf_counter() - t0)
    print(f"firmware diff (two 1 MiB nvidia vbios), measured: median {statistics.median(times) * 1e3:.1f} ms (min "
          f"{min(times) * 1e3:.1f}, max {max(times) * 1e3:.1f})")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        import os

        os.environ.setdefault("TINYHW_LOCK_DIR", str(Path(d)))
        main()
