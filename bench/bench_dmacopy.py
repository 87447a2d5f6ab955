"""DMA-buffer copy figures of issue 12 (``bench copy --path dma``) on ``mock:navi31``, with the emulator's counters.

Boots the emulated board (real Debian firmware, as the tests do), then copies host memory <-> VRAM through a
pinned DMA buffer (emulated IOMMU) and SDMA0 at several sizes, every copy verified against the emulator's own
VRAM. The figures are MODELLED: the board's virtual clock, charged 1 us per register access (the ring writes,
HDP flush and doorbell of each submission) and the link's DMA rate for every byte the engine moves through the
IOMMU (16 GT/s x16 from Link Status, 256-byte TLPs with 24 bytes of overhead: 28.8 GB/s of a 31.5 GB/s line).
The host memcpy into and out of the buffer costs no modelled time; it is measured on this machine by the
staging path, printed last (host only, no device transfer). Target: >= 80 % of the link limit at 16 MiB.

    python bench/bench_dmacopy.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "helpers"))
_tmp = tempfile.mkdtemp(prefix="tinyhw-bench-dma-")
os.environ.setdefault("TINYHW_LOCK_DIR", _tmp + "/locks")
os.environ["XDG_CACHE_HOME"] = _tmp + "/cache"  # a private emulated board (the firmware path is resolved below)

import tinyhw  # noqa: E402
from tinyhw.bench import Staging  # noqa: E402
from tinyhw.bench.copy import link_limit  # noqa: E402
from tinyhw.boot.amd.dmacopy import open_dma_copier  # noqa: E402

SIZES = (4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20)
DST = 128 << 20


def _boot(fw: Path) -> None:
    from clihelp import run

    r = run("--device", "mock:navi31", "am", "boot", "--yes", "--firmware-dir", str(fw))
    if r.code:
        sys.exit(f"am boot failed: {r.err.strip()}")


def main() -> int:
    fw = Path(os.environ.get("TINYHW_FIRMWARE_DIR") or Path.home() / ".cache" / "tinyhw" / "firmware") \
        / "amd" / "lib" / "firmware" / "amdgpu"
    if not (fw / "psp_13_0_0_sos.bin").is_file():
        print(f"firmware missing in {fw}: run bash tests/setup-system.sh")
        return 1
    _boot(fw)
    ok = True
    with tinyhw.open("mock:navi31") as dev:
        t = dev.transport
        limit, how = link_limit(t)
        print(f"mock:navi31, link limit {limit:.0f} MB/s ({how}); emulated iommu dma rate "
              f"{t.iommu.rate / 1e6:.0f} MB/s")
        copier = open_dma_copier(t)
        for size in SIZES:
            data = os.urandom(size)
            w0, c0 = t.counters.reg_writes, t.clock.now()
            copier.copy_in(DST, data)
            c1 = t.clock.now()
            good = t.board.vram.read(DST, size) == data
            back = copier.copy_out(DST, size)
            c2, w1 = t.clock.now(), t.counters.reg_writes
            good = good and back == data
            h2d, d2h = size / (c1 - c0) / 1e6, size / (c2 - c1) / 1e6
            print(f"  {size >> 10:>6} KiB  h2d {h2d:8.1f} MB/s ({h2d / limit:5.1%})  d2h {d2h:8.1f} MB/s "
                  f"({d2h / limit:5.1%})  modelled; {w1 - w0} register writes both ways; verified {good}")
            ok = ok and good
            if size == 16 << 20:
                ok = ok and min(h2d, d2h) >= 0.8 * limit
        print(f"  iommu: {t.iommu.stats}; sdma packets {t.board.sdma.stats['packets']}")
        copier.close()
        staging = Staging(t, 16 << 20)
        data = os.urandom(16 << 20)
        t0 = time.perf_counter()
        staging.write(0, data)
        t1 = time.perf_counter()
        staging.read(0, len(data))
        t2 = time.perf_counter()
        staging.close()
        print(f"host staging 16 MiB on this machine (measured, host only): in {16 / (t1 - t0) * 1.048576:.0f} MB/s, "
              f"out {16 / (t2 - t1) * 1.048576:.0f} MB/s")
    print("targets met" if ok else "targets NOT met")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
