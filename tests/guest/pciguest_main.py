"""Runs INSIDE the QEMU guest (one boot for the whole tier): tinyhw against a real kernel and the edu device.

Usage: ``python pciguest_main.py OUTDIR``; writes ``OUTDIR/results.json`` with one entry per
step, which the host-side tests (test_guest_pci.py) assert on. Each step is isolated: an
exception is recorded as ``{"error": ...}`` so one failure does not hide the others.
CLI commands run in-process (one Python start-up for everything, as the guest is emulated).

Edu register map (real-kernel-harness.md): 0x00 id 0x010000ed, 0x04 liveness (reads ~value),
0x08 factorial, 0x20 status (bit 0 busy), 0x60/0x64 raise/ack interrupt, 0x80/0x88/0x90/0x98
DMA source/destination/count/command, device buffer at 0x40000 (4 KiB).
"""

from __future__ import annotations

import contextlib
import io
import json
import mmap
import os
import struct
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any

EDU = "0000:00:05.0"
IVSHMEM = "0000:00:06.0"  # ivshmem-plain, 64 MiB bar2 (tests/guest/qemu.py)
IVSHMEM_ROUNDS = 16  # equal repeats of each side in the bench comparison (ABBA order)
DMA_BUF = 0x40000
# QEMU 7.2's edu checks that the END of a transfer lies strictly inside its 4 KiB buffer
# (end < 0x41000), so a full 4096-byte transfer aborts the whole VM with "DMA range ... out of
# bounds": at most 0xfff bytes per transfer. 4092 keeps it a whole number of dwords.
DMA_LEN = 4092
RESULTS: dict[str, Any] = {}
#: a process that takes physical memory for edu, turns bus mastering on, says ready and waits to be killed
KILLED_HOLDER = """
import sys, time
from tinyhw.pci.sysfs import SysfsTransport
t = SysfsTransport(sys.argv[1])
memory = t.physical_memory()
memory.reserve([3 << 20])
t.config_write(0x04, 2, t.config_read(0x04, 2) | 0x4)
print("ready", flush=True)
time.sleep(120)
"""


def cli(*args: str) -> dict[str, Any]:
    """Run ``tinyhw ARGS`` in-process; exit code, stdout, stderr."""
    from tinyhw.cli import main

    out, err = io.StringIO(), io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 0
    return {"args": list(args), "code": code, "out": out.getvalue(), "err": err.getvalue()}


def sh(*args: str) -> str:
    return subprocess.run(list(args), capture_output=True, text=True, check=False).stdout


def step(name: str):  # decorator
    """Run the decorated function now as step ``name`` (unless $TINYHW_GUEST_STEPS names others)."""
    only = [x for x in os.environ.get("TINYHW_GUEST_STEPS", "").split(",") if x]

    def wrap(fn):
        if only and name not in only:
            return fn
        t0 = time.monotonic()
        try:
            RESULTS[name] = fn()
        except Exception:  # recorded for the host-side test to report
            RESULTS[name] = {"error": traceback.format_exc()}
        RESULTS.setdefault("timings", {})[name] = round(time.monotonic() - t0, 3)
        return fn

    return wrap


def wait_clear(region: Any, offset: int, bit: int, timeout_s: float = 5.0) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if not region.read32(offset) & bit:
            return True
        time.sleep(0.005)
    return False


def poll_status(device: str, tries: int = 100) -> dict[str, Any]:
    """`pci read 0 0x20` until the factorial busy bit (0) is clear; the last run's result."""
    for _ in range(tries):
        r = cli("-d", device, "pci", "read", "0", "0x20")
        if r["code"] or not int(r["out"], 16) & 1:
            return r
        time.sleep(0.01)
    return r


def run_all() -> None:  # one linear script, in the order the issue lists the proofs
    addresses = sh("ls", "/sys/bus/pci/devices").split()

    @step("listing")
    def _() -> Any:
        return {"lspci": sh("lspci", "-Dnn"), "tinyhw": cli("pci", "list"), "json": cli("--json", "pci", "list")}

    @step("show")
    def _() -> Any:
        return {"lspci": sh("lspci", "-vvv", "-nn", "-D"), "lspci_x": sh("lspci", "-D", "-xxx"),
                "tinyhw": {a: cli("-d", f"pci:{a}", "pci", "show") for a in addresses},
                "config": {a: cli("-d", f"pci:{a}", "pci", "config") for a in addresses}}

    @step("edu_pci")
    def _() -> Any:
        d = f"pci:{EDU}"
        r = {"driver_before": os.path.basename(os.readlink(f"/sys/bus/pci/devices/{EDU}/driver"))
             if os.path.exists(f"/sys/bus/pci/devices/{EDU}/driver") else None,
             "id": cli("-d", d, "pci", "read", "0", "0"),
             "live_w": cli("-d", d, "pci", "write", "0", "4", "0x12345678", "--yes"),
             "live_r": cli("-d", d, "pci", "read", "0", "4"),
             "fact_w": cli("-d", d, "pci", "write", "0", "8", "5", "--yes")}
        r["fact_status"] = poll_status(d)
        r["fact_r"] = cli("-d", d, "pci", "read", "0", "8")
        r["stats"] = cli("-d", d, "--stats", "pci", "read", "0", "0", "--count", "4")
        r["no_bar"] = cli("-d", d, "pci", "read", "2", "0")
        r["outside"] = cli("-d", d, "pci", "read", "0", "0x100000")
        r["no_device"] = cli("-d", "pci:0000:00:09.0", "pci", "read", "0", "0")
        r["no_write_yes"] = cli("-d", d, "pci", "write", "0", "4", "1")
        return r

    @step("width")
    def _() -> Any:
        """Stores of 0x12345678 to the liveness register, issued three ways, then read back.

        edu answers only 4-byte accesses below 0x80; one 32-bit store reads back as the exact
        inverse, anything split into narrower stores does not. pack_into is recorded (its
        C code stores byte by byte, but a compiler may merge them), not relied upon.
        """
        from tinyhw.pci.mmio import access_width
        from tinyhw.pci.sysfs import SysfsTransport

        out: dict[str, Any] = {}
        value = 0x12345678
        with SysfsTransport(EDU) as t:
            region = t.bar(0)
            out["region_path"] = region.path
            out["view_width"] = access_width(region.view)
            fd = os.open(f"/sys/bus/pci/devices/{EDU}/resource0", os.O_RDWR | os.O_SYNC)
            mm = mmap.mmap(fd, 1 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            os.close(fd)

            def bytewise() -> None:
                for i, b in enumerate(struct.pack("<I", value)):
                    mm[4 + i] = b  # one single-byte store each

            for name, store in (("write32", lambda: region.write32(4, value)), ("bytewise", bytewise),
                                ("pack_into", lambda: struct.pack_into("<I", mm, 4, value))):
                region.write32(4, 0)
                store()
                out[name] = region.read32(4)
            region.write32(8, 1)
            wait_clear(region, 0x20, 1)
            region.write32(8, 6)
            wait_clear(region, 0x20, 1)
            out["factorial6"] = region.read32(8)
            mm.close()
        return out

    @step("reads_per_second")
    def _() -> Any:
        from tinyhw.pci.sysfs import SysfsTransport

        with SysfsTransport(EDU) as t:
            region = t.bar(0)
            n, t0 = 0, time.perf_counter()
            while time.perf_counter() - t0 < 1.0:
                for _ in range(1000):
                    region.read32(0)
                n += 1000
            dt = time.perf_counter() - t0
            return {"reads": n, "seconds": dt, "per_second": n / dt, "counted": t.counters.reg_reads}

    @step("ivshmem_bench")
    def _() -> dict[str, Any]:
        """bench copy through ivshmem's 64 MiB bar2, against a plain numpy copy into the same memory,
        interleaved round by round so the guest's timing noise hits both alike."""
        import numpy as np

        import tinyhw
        from tinyhw.bench import copy_bench

        r: dict[str, Any] = {"ids": Path(f"/sys/bus/pci/devices/{IVSHMEM}/vendor").read_text().strip() + ":"
                             + Path(f"/sys/bus/pci/devices/{IVSHMEM}/device").read_text().strip()}
        size = 16 << 20
        r["tinyhw"] = cli("-d", f"pci:{IVSHMEM}", "--json", "bench", "copy", "--sizes", "1M,16M", "--repeat", "3",
                          "--yes")
        r["refused_without_yes"] = cli("-d", f"pci:{IVSHMEM}", "bench", "copy", "--sizes", "4K")
        ours: dict[str, list[float]] = {"h2d": [], "d2h": []}
        theirs: dict[str, list[float]] = {"h2d": [], "d2h": []}
        fd = os.open(f"/sys/bus/pci/devices/{IVSHMEM}/resource2", os.O_RDWR | os.O_SYNC)
        try:
            mm = mmap.mmap(fd, 64 << 20, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            dst = np.frombuffer(mm, dtype=np.uint8)
            src = np.frombuffer(os.urandom(size), dtype=np.uint8)
            back = b""
            with tinyhw.open(f"pci:{IVSHMEM}") as dev:

                def by_tinyhw(direction: str) -> None:
                    res = copy_bench(dev.transport, [size], (direction,), 1, offset=32 << 20)[0]
                    ours[direction].append(res.mbps()[0])

                def by_numpy(direction: str) -> None:
                    nonlocal back
                    t0 = time.perf_counter()
                    if direction == "h2d":
                        dst[:size] = src
                    else:
                        back = np.array(dst[:size])
                    theirs[direction].append(size / (time.perf_counter() - t0) / 1e6)

                # equal repeats, alternated ABBA round by round, each pair back to back so a stall of the
                # guest (TCG, two host cores) hits both sides alike
                for i in range(IVSHMEM_ROUNDS):
                    for direction in ("h2d", "d2h"):
                        for run in ((by_tinyhw, by_numpy) if i % 2 == 0 else (by_numpy, by_tinyhw)):
                            run(direction)
            r["numpy_equal"] = bool((back == src).all())
            r["tinyhw_mbps"], r["numpy_mbps"] = ours, theirs
            dst = back = np.empty(0, dtype=np.uint8)  # no view of the mapping left, so it can close
            mm.close()
        finally:
            os.close(fd)
        return r

    @step("lock")
    def _() -> Any:
        """A pci: user and a vfio:/second pci: user of one device exclude each other (one lock key)."""
        from tinyhw.pci.sysfs import SysfsTransport

        with SysfsTransport(EDU) as t:
            t.bar(0).read32(0)
            return cli("-d", f"pci:{EDU}", "pci", "read", "0", "0")

    @step("bind")
    def _() -> Any:
        r = {"no_yes": cli("-d", f"pci:{EDU}", "pci", "bind"), "bind": cli("-d", f"pci:{EDU}", "pci", "bind", "--yes")}
        link = f"/sys/bus/pci/devices/{EDU}/driver"
        r["driver"] = os.path.basename(os.readlink(link)) if os.path.exists(link) else None
        r["override"] = Path(f"/sys/bus/pci/devices/{EDU}/driver_override").read_text().strip()
        r["group"] = os.path.basename(os.readlink(f"/sys/bus/pci/devices/{EDU}/iommu_group"))
        r["dev_vfio"] = sorted(os.listdir("/dev/vfio"))
        r["pci_refused"] = cli("-d", f"pci:{EDU}", "pci", "read", "0", "0")
        return r

    @step("edu_vfio")
    def _() -> Any:
        d = f"vfio:{EDU}"
        r = {"id": cli("-d", d, "pci", "read", "0", "0"),
             "live_w": cli("-d", d, "pci", "write", "0", "4", "0xcafe0001", "--yes"),
             "live_r": cli("-d", d, "pci", "read", "0", "4"),
             "fact_w": cli("-d", d, "pci", "write", "0", "8", "6", "--yes")}
        r["fact_status"] = poll_status(d)
        r["fact_r"] = cli("-d", d, "pci", "read", "0", "8")
        r["show"] = cli("-d", d, "pci", "show")
        r["config"] = cli("-d", d, "--json", "pci", "config")
        return r

    @step("vfio_api")
    def _() -> Any:
        from tinyhw.errors import TinyhwError
        from tinyhw.pci.vfio import VfioTransport

        out: dict[str, Any] = {}
        with VfioTransport(EDU) as t:
            out["iommu_type"] = t.iommu_type
            out["iova_pgsizes"] = t.iova_pgsizes
            out["num_regions"], out["num_irqs"] = t.num_regions, t.num_irqs
            out["device_flags"] = t.device_flags
            r0 = t.region(0)
            out["bar0"] = {"size": r0.size, "offset": r0.offset, "flags": r0.flags}
            out["config_region"] = {"size": t.region(7).size, "offset": t.region(7).offset}
            region = t.bar(0)
            out["bar0_path"] = region.path
            out["id"] = region.read32(0)
            # interrupts: MSI through an eventfd; edu raises it on a write to 0x60. An MSI is a
            # memory write by the device, so it needs bus mastering like DMA does.
            t.set_bus_master(True)
            fd = t.enable_irqs("msi", 1)[0]
            out["msi_before"] = t.wait_irq(fd, 0.05)
            region.write32(0x60, 1)
            out["msi_after"] = t.wait_irq(fd, 2.0)
            region.write32(0x64, 1)
            out["irq_status_after_ack"] = region.read32(0x24)
            t.disable_irqs("msi")
            # reset
            try:
                t.reset()
                out["reset"] = "ok"
            except TinyhwError as e:
                out["reset"] = f"refused: {e}"
            # DMA: host -> device buffer -> host, through the IOMMU at IOVAs below 256 MiB
            pattern = bytes((i * 7 + 3) & 0xFF for i in range(DMA_LEN))
            src, dst = t.dma_alloc(4096), t.dma_alloc(4096)
            out["iovas"] = [src.iova, dst.iova]
            src.write(0, pattern)

            def dma(src_addr: int, dst_addr: int, cmd: int) -> bool:
                region.write32(0x80, src_addr)
                region.write32(0x88, dst_addr)
                region.write32(0x90, DMA_LEN)
                region.write32(0x98, cmd)
                return wait_clear(region, 0x98, 1)

            t.set_bus_master(False)
            out["no_master_done"] = dma(src.iova, DMA_BUF, 1) and dma(DMA_BUF, dst.iova, 3)
            out["no_master_equal"] = dst.read(0, DMA_LEN) == pattern
            t.set_bus_master(True)
            out["command"] = t.config_read(4, 2)
            out["to_device_done"] = dma(src.iova, DMA_BUF, 1)
            out["to_host_done"] = dma(DMA_BUF, dst.iova, 3)
            got = dst.read(0, DMA_LEN)
            out["equal"] = got == pattern
            out["first_diff"] = next((i for i in range(DMA_LEN) if got[i] != pattern[i]), None)
            out["dma_buffers_before_close"] = len(t.dma)
            # the device lock is shared: while this vfio: user holds it, neither a pci: user nor an
            # unbind (which would pull the device from under us) gets in
            out["locked_pci"] = cli("-d", f"pci:{EDU}", "pci", "read", "0", "0")
            out["locked_unbind"] = cli("-d", f"pci:{EDU}", "pci", "unbind", "--yes")
            out["locked_vfio"] = cli("-d", f"vfio:{EDU}", "pci", "read", "0", "0")
        out["dma_buffers_after_close"] = len(t.dma)
        return out

    @step("dma_window")
    def _() -> Any:
        """Issue 12: the pinned DMA buffer the bench uses (tinyhw.bench.Staging -> VfioTransport.dma_alloc, type1
        MAP_DMA) at a realistic size, with the edu device DMAing from/to offsets inside it (page crossings, the
        middle, the last bytes); then `bench copy --path staging` on the vfio: device and the refusal of
        --path dma on a device with no copy engine."""
        from tinyhw.bench import Staging
        from tinyhw.pci.vfio import VfioTransport

        size = 32 << 20
        out: dict[str, Any] = {"size": size, "copies": []}
        with VfioTransport(EDU) as t:
            region = t.bar(0)
            t.set_bus_master(True)
            staging = Staging(t, size)
            buf = staging.buf
            out["iova"], out["buf_size"] = buf.iova, buf.size
            # (host offset the device reads, host offset the device writes back to)
            plan = [(0, 8 << 20), (4096 - 100, (20 << 20) + 4096 - 7 * 4), ((16 << 20) + 12, 4096 * 3 + 2048),
                    (size - DMA_LEN, (24 << 20) - 2)]
            for n, (src_off, dst_off) in enumerate(plan):
                pattern = bytes(((i * 13 + n * 101) >> 2) & 0xFF for i in range(DMA_LEN))
                staging.write(src_off, pattern)
                guard = staging.read(dst_off + DMA_LEN, 64)
                steps = []
                for src, dst, cmd in ((buf.iova + src_off, DMA_BUF, 1), (DMA_BUF, buf.iova + dst_off, 3)):
                    region.write32(0x80, src)
                    region.write32(0x88, dst)
                    region.write32(0x90, DMA_LEN)
                    region.write32(0x98, cmd)
                    steps.append(wait_clear(region, 0x98, 1))
                got = staging.read(dst_off, DMA_LEN)
                out["copies"].append({"src": src_off, "dst": dst_off, "done": all(steps), "equal": got == pattern,
                                      "first_diff": next((i for i in range(DMA_LEN) if got[i] != pattern[i]), None),
                                      "guard_kept": staging.read(dst_off + DMA_LEN, 64) == guard})
            out["buffers_mapped"] = len(t.dma)
            staging.close()
            out["buffers_after_free"] = len(t.dma)
        d = f"vfio:{EDU}"
        out["staging"] = cli("-d", d, "--json", "bench", "copy", "--path", "staging", "--sizes", "1M,16M",
                             "--repeat", "2")
        out["dma_refused"] = cli("-d", d, "bench", "copy", "--path", "dma", "--sizes", "4K", "--yes")
        out["dma_refused_sysfs"] = cli("-d", f"pci:{IVSHMEM}", "bench", "copy", "--path", "dma", "--sizes", "4K",
                                       "--yes")
        return out

    @step("unbind")
    def _() -> Any:
        r = {"unbind": cli("-d", f"pci:{EDU}", "pci", "unbind", "--yes")}
        link = f"/sys/bus/pci/devices/{EDU}/driver"
        r["driver"] = os.path.basename(os.readlink(link)) if os.path.exists(link) else None
        r["override"] = Path(f"/sys/bus/pci/devices/{EDU}/driver_override").read_text().strip()
        r["id_again"] = cli("-d", f"pci:{EDU}", "pci", "read", "0", "0")
        return r

    @step("physmem")
    def _() -> Any:
        """Host memory at physical addresses on pci: (tinyhw.transport.physmem) with the real kernel: refused behind a
        translating IOMMU and without huge pages; then, with edu's group in identity mode and 4 huge pages reserved,
        edu DMAs from and to pagemap-derived physical addresses of a 3 MiB scatter buffer (inside each of its two
        huge pages, at their edges), and closing the transport clears bus mastering and gives the pages back."""
        from tinyhw.errors import TinyhwError
        from tinyhw.pci.sysfs import SysfsTransport
        from tinyhw.transport.physmem import CHUNK, HugetlbBackend, free_hugepages

        out: dict[str, Any] = {}
        group = os.path.basename(os.readlink(f"/sys/bus/pci/devices/{EDU}/iommu_group"))
        type_path = f"/sys/kernel/iommu_groups/{group}/type"
        nr_path = "/sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages"
        out["type_before"] = Path(type_path).read_text().strip()

        def attempt() -> Any:
            with SysfsTransport(EDU) as t:
                try:
                    t.physical_memory()
                    return "accepted"
                except TinyhwError as e:
                    return {"code": e.exit_code, "text": str(e), "hint": e.hint}

        out["translated"] = attempt()
        try:
            Path(type_path).write_text("identity")
        except OSError as e:
            out["type_error"] = str(e)
        out["type_set"] = Path(type_path).read_text().strip()
        try:
            Path(nr_path).write_text("0")
            out["no_hugepages"] = attempt()
            Path(nr_path).write_text("4")
            out["reserved"] = free_hugepages()
            with SysfsTransport(EDU) as t:
                memory = t.physical_memory()
                region = t.bar(0)
                t.config_write(0x04, 2, t.config_read(0x04, 2) | 0x4)  # bus mastering on, as a boot does
                buf, dst = memory.dma_alloc(3 << 20), memory.dma_alloc(8192)
                out["scatter"] = {"contiguous": buf.contiguous, "chunks": len(memory.chunks),
                                  "first_pages": [hex(p) for p in buf.pages[:2]],
                                  "chunk_starts": [hex(buf.addr(0)), hex(buf.addr(CHUNK))],
                                  "free_while_held": free_hugepages()}
                checks = []
                for n, off in enumerate((0, CHUNK - DMA_LEN, CHUNK, (3 << 20) - DMA_LEN)):
                    pattern = bytes(((i * 29 + n * 53) >> 1) & 0xFF for i in range(DMA_LEN))
                    buf.write(off, pattern)
                    dst.write(0, bytes(DMA_LEN))
                    done = []
                    for src_addr, dst_addr, cmd in ((buf.addr(off), DMA_BUF, 1), (DMA_BUF, dst.addr(0), 3)):
                        region.write32(0x80, src_addr)  # a 32-bit store sets the whole register: ram is below 4 GiB
                        region.write32(0x88, dst_addr)
                        region.write32(0x90, DMA_LEN)
                        region.write32(0x98, cmd)
                        done.append(wait_clear(region, 0x98, 1))
                    got = dst.read(0, DMA_LEN)
                    checks.append({"offset": off, "done": all(done), "equal": got == pattern,
                                   "first_diff": next((i for i in range(DMA_LEN) if got[i] != pattern[i]), None)})
                out["dma"] = checks
            with SysfsTransport(EDU) as t:
                out["master_after_close"] = bool(t.config_read(0x04, 2) & 0x4)
            out["free_after_close"] = free_hugepages()
            # a process holding the memory with bus mastering on is killed: its guardian turns mastering off and
            # only then lets the huge pages go
            holder = subprocess.Popen([sys.executable, "-c", KILLED_HOLDER, EDU], stdout=subprocess.PIPE, text=True)
            ready = holder.stdout.readline().strip() if holder.stdout else ""
            config = f"/sys/bus/pci/devices/{EDU}/config"

            def master() -> bool:
                fd = os.open(config, os.O_RDONLY)
                try:
                    return bool(int.from_bytes(os.pread(fd, 2, 4), "little") & 0x4)
                finally:
                    os.close(fd)

            killed = {"ready": ready, "master_while_held": master(), "free_while_held": free_hugepages()}
            holder.kill()
            holder.wait(10)
            deadline = time.monotonic() + 60  # a hang bound, not a speed check
            while (master() or free_hugepages() != 4) and time.monotonic() < deadline:
                time.sleep(0.01)
            killed.update(master_after_kill=master(), free_after_kill=free_hugepages())
            out["killed"] = killed
            rd, wr = os.pipe()
            pid = os.fork()
            if pid == 0:  # as user nobody, pagemap hides the frames: refused, never frame 0
                os.close(rd)
                try:
                    os.setgid(65534)
                    os.setuid(65534)
                    try:
                        HugetlbBackend().probe()
                        res: Any = "accepted"
                    except TinyhwError as e:
                        res = {"code": e.exit_code, "text": str(e)}
                    os.write(wr, json.dumps(res).encode())
                finally:
                    os._exit(0)
            os.close(wr)
            data = os.read(rd, 65536)
            os.waitpid(pid, 0)
            out["nobody"] = json.loads(data or b"null")
        finally:
            Path(nr_path).write_text("0")
            with contextlib.suppress(OSError):
                Path(type_path).write_text(out["type_before"])
        return out

    @step("nobody")
    def _() -> Any:
        """Missing permission: the same read as user nobody (65534) in a forked child."""
        rd, wr = os.pipe()
        pid = os.fork()
        if pid == 0:  # child
            os.close(rd)
            code = 99
            try:
                os.makedirs("/tmp/nobody-locks", exist_ok=True)
                os.chmod("/tmp/nobody-locks", 0o777)
                os.setgid(65534)
                os.setuid(65534)
                os.environ["TINYHW_LOCK_DIR"] = "/tmp/nobody-locks"
                res = cli("-d", f"pci:{EDU}", "pci", "read", "0", "0")
                os.write(wr, json.dumps(res).encode())
                code = 0
            finally:
                os._exit(code)
        os.close(wr)
        data = b""
        while chunk := os.read(rd, 65536):
            data += chunk
        os.waitpid(pid, 0)
        return json.loads(data or b"{}")


def main() -> None:
    outdir = sys.argv[1]
    t0 = time.monotonic()
    try:
        run_all()
    finally:
        RESULTS["total_s"] = round(time.monotonic() - t0, 3)
        with open(os.path.join(outdir, "results.json"), "w") as f:
            json.dump(RESULTS, f, indent=1)


if __name__ == "__main__":
    main()
