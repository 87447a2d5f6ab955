"""``nv boot`` over ``pci:``: host memory at physical addresses (tinyhw.transport.physmem, specs/pci-vfio-remote.md §9).

The allocator is tested on its own (pagemap checks, huge-page chunks, scatter lists, reserve, quiesce before free),
against emulated RAM that invents scattered physical addresses and flags unsafe device accesses, through a whole
``nv boot`` of ``mock:ad102,dma=physical`` (the emulated board with no IOMMU), and through the ``pci:`` transport's
own checks on a fake sysfs tree. The real pagemap and huge pages with a real device's DMA run in the QEMU guest
tier (tests/guest)."""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import struct
from pathlib import Path
from typing import Any

import pytest
from clihelp import run
from nvboothelp import boot, device, firmware_set, nvidia_sysfs_tree, with_real_gsp_rm

from tinyhw.boot import nv
from tinyhw.boot.nv.gspmem import HostMemory, host_sizes, radix3
from tinyhw.boot.nv.rpc import SHARED_SIZE
from tinyhw.connect import open_device
from tinyhw.errors import Disconnected, EnvironmentProblem, OperationFailed, Refused
from tinyhw.mocks.common.physram import EmulatedRam
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.pci.sysfs import SysfsTransport
from tinyhw.transport.physmem import (
    CHUNK,
    PAGE,
    HugetlbBackend,
    PhysicalMemory,
    check_iommu,
    translate_pagemap,
)

MIB = 1 << 20


def ram(master: bool = True) -> EmulatedRam:
    state = {"on": master}
    r = EmulatedRam(VirtualClock(), 1e9, master=lambda: state["on"])
    r.bus = state  # type: ignore[attr-defined]
    return r


# -- pagemap ------------------------------------------------------------------------------------------------------
def _pagemap(tmp_path: Path, entries: dict[int, int]) -> str:
    path = tmp_path / "pagemap"
    with open(path, "wb") as f:
        for page, entry in entries.items():
            f.seek(page * 8)
            f.write(struct.pack("<Q", entry))
    return str(path)


def test_pagemap_entries_are_checked(tmp_path: Path) -> None:
    present = 1 << 63
    path = _pagemap(tmp_path, {0x10: present | 0x1D0578, 0x11: present | 0x1D059F, 0x12: present | (1 << 61) | 0x7})
    assert translate_pagemap(path, 0x10 * PAGE, 3) == [0x1D0578 * PAGE, 0x1D059F * PAGE, 0x7 * PAGE]
    bad = {0x20: present,  # present, pfn hidden (no CAP_SYS_ADMIN): never address 0
           0x21: 0,  # not present
           0x22: present | (1 << 62) | 0x55,  # swapped
           }
    path = _pagemap(tmp_path, bad)
    for page, what in ((0x20, "hides physical addresses"), (0x21, "not present"), (0x22, "swapped out")):
        with pytest.raises(EnvironmentProblem, match=what) as e:
            translate_pagemap(path, page * PAGE, 1)
        assert e.value.exit_code == 3
    with pytest.raises(EnvironmentProblem, match="gave 0 of 8 bytes"):
        translate_pagemap(path, 0x100000 * PAGE, 1)  # past the end of the file
    with pytest.raises(EnvironmentProblem, match="cannot read") as e:
        translate_pagemap(str(tmp_path / "none"), 0, 1)
    assert "root" in e.value.hint


def test_the_real_pagemap_shows_frames_only_with_privilege() -> None:
    """This process's own /proc/self/pagemap: root reads real frames (two pages of one mapping, each non-zero);
    anyone else is refused with the fix, never handed frame 0."""
    probe = HugetlbBackend()
    if os.geteuid() == 0:
        probe.probe()
        mem = mmap.mmap(-1, 2 * PAGE, flags=mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)
        mem[0] = mem[PAGE] = 1
        anchor = ctypes.c_char.from_buffer(mem)
        pages = translate_pagemap("/proc/self/pagemap", ctypes.addressof(anchor), 2)
        del anchor
        mem.close()
        assert all(p and p % PAGE == 0 for p in pages)
    else:
        with pytest.raises(EnvironmentProblem, match="hides physical addresses"):
            probe.probe()


# -- the iommu check ----------------------------------------------------------------------------------------------
def test_only_an_untranslated_function_gets_physical_addresses(tmp_path: Path) -> None:
    check_iommu(str(tmp_path), "0000:01:00.0", None)  # no iommu group: no iommu
    group = tmp_path / "kernel" / "iommu_groups" / "7"
    group.mkdir(parents=True)
    (group / "type").write_text("identity\n")
    check_iommu(str(tmp_path), "0000:01:00.0", 7)
    for kind in ("DMA-FQ", "DMA", "blocked"):
        (group / "type").write_text(kind + "\n")
        with pytest.raises(Refused, match=f"iommu group 7, type {kind}") as e:
            check_iommu(str(tmp_path), "0000:01:00.0", 7)
        assert e.value.exit_code == 2 and "vfio:0000:01:00.0" in e.value.hint and "identity" in e.value.hint
    (group / "type").unlink()
    with pytest.raises(Refused, match="type unknown"):
        check_iommu(str(tmp_path), "0000:01:00.0", 7)


# -- the allocator ------------------------------------------------------------------------------------------------
def test_buffers_up_to_a_huge_page_are_contiguous_and_larger_ones_are_scatter_lists() -> None:
    r = ram()
    mem = PhysicalMemory(r)
    small, two, big = mem.dma_alloc(5000), mem.dma_alloc(2 * MIB), mem.dma_alloc(5 * MIB + 123)
    assert small.size == 2 * PAGE and small.contiguous and small.addr(4097) == small.iova + 4097
    assert two.contiguous and two.addr(2 * MIB - 1) == two.iova + 2 * MIB - 1
    assert big.size == 5 * MIB + PAGE and not big.contiguous
    bases = sorted({p & ~(CHUNK - 1) for p in big.pages})
    assert len(bases) == 3 and all(b - a > CHUNK for a, b in zip(bases, bases[1:], strict=False))  # never adjacent
    pattern = bytes((i * 7) & 0xFF for i in range(big.size))
    big.write(0, pattern)
    assert big.read(0) == pattern
    for off in (0, CHUNK - 8, CHUNK, 2 * CHUNK + 5, big.size - 16):  # what the device reads at each byte's address
        assert r.dma_read(big.addr(off), 8) == pattern[off:off + 8]
    r.dma_write(small.addr(100), b"from the device")
    assert small.read(100, 15) == b"from the device"
    with pytest.raises(Exception, match="runs past the host's huge page"):  # contiguity across chunks is not assumed
        r.dma_read(big.addr(CHUNK - 8), 16)
    assert r.violations  # ... and the emulated ram calls that unsafe
    with pytest.raises(Refused, match="chosen address"):
        mem.dma_alloc(PAGE, iova=0x100000)


def test_reserve_maps_every_chunk_before_the_device_is_touched() -> None:
    """The nv boot's own sizes, for Debian's 36 MiB GSP-RM image: reserve maps every chunk; the boot's allocations
    (the same sizes in the same order) then map none."""
    sizes = host_sizes(36 * MIB + 4321, 6000, SHARED_SIZE)
    r = ram()
    mem = PhysicalMemory(r)
    mapped = mem.reserve(sizes)
    assert mapped == r.stats["chunks"] == PhysicalMemory.chunks_for(sizes) >= 20
    for size in sizes:
        mem.dma_alloc(size)
    assert r.stats["chunks"] == mapped
    r.limit = mapped - 1
    with pytest.raises(EnvironmentProblem, match="no free 2 MiB huge page"):
        PhysicalMemory(r).reserve(sizes)


def test_memory_is_freed_only_after_bus_mastering_is_off() -> None:
    r = ram()
    mem = PhysicalMemory(r, quiesce=lambda: r.bus.update(on=False))  # type: ignore[attr-defined]
    buf = mem.dma_alloc(PAGE)
    at = buf.addr(0)
    mem.close()
    assert r.violations == [] and r.stats["chunks"] == 1 and mem.chunks == []
    r.bus["on"] = True  # type: ignore[attr-defined]
    with pytest.raises(Exception, match="already freed"):  # a late device write is caught, not silently applied
        r.dma_write(at, b"late")
    # sabotage: no quiesce hook, as a transport that forgot to stop the device
    r2 = ram()
    careless = PhysicalMemory(r2)
    careless.dma_alloc(PAGE)
    careless.close()
    assert r2.violations and "bus mastering on" in r2.violations[0]


def test_radix3_over_a_scatter_list_lists_every_page() -> None:
    """A 3 MiB image spans two non-adjacent chunks: each level-2 entry is that page's own physical address."""
    r = ram()
    phys = PhysicalMemory(r)

    class Transport:
        name = "pci"

    host = HostMemory(Transport(), phys)  # type: ignore[arg-type]
    image = bytes(range(256)) * (3 * MIB // 256)
    buf, pages = radix3(host, image)
    assert not buf.contiguous
    level1 = struct.unpack("<Q", r.dma_read(buf.addr(0), 8))[0]
    level2 = struct.unpack("<Q", r.dma_read(level1, 8))[0]
    entries = struct.unpack(f"<{pages['image']}Q", r.dma_read(level2, 8 * pages["image"]))
    first = pages["level0"] + pages["level1"] + pages["level2"]
    assert list(entries) == [buf.addr((first + i) * PAGE) for i in range(pages["image"])]
    assert r.dma_read(entries[-1], PAGE) == image[-PAGE:]
    assert r.violations == []


def test_a_buffer_the_gsp_gets_one_address_for_must_be_contiguous() -> None:
    """The bootloader, signature and log buffer are handed over as one address: a scatter list is refused."""
    class Transport:
        name = "pci"

    host = HostMemory(Transport(), PhysicalMemory(ram()))  # type: ignore[arg-type]
    assert host.alloc(2 * MIB, contiguous=True, what="log buffer").contiguous
    with pytest.raises(OperationFailed, match="the gsp bootloader .* is not contiguous"):
        host.alloc(3 * MIB, contiguous=True, what="gsp bootloader")
    assert not host.alloc(3 * MIB, what="radix-3 table").contiguous  # one that lists its pages may scatter


# -- the whole boot with no iommu ---------------------------------------------------------------------------------
def test_nv_boot_with_physical_memory_end_to_end(tmp_path: Path) -> None:
    r = run("--device", device(tmp_path, "dma=physical"), "--json", "nv", "boot", "--yes",
            "--firmware-dir", str(firmware_set(tmp_path)), "--allow-unknown-firmware")
    assert r.code == 0, r.err
    assert json.loads(r.out)["gsp"]["gpu_name"].startswith("NVIDIA GeForce RTX 4090")
    result, err, board = boot(tmp_path / "again", "dma=physical")
    assert err is None, err
    assert result.gsp["gpu_short_name"] == "AD102" and result.gsp["fb_size"] == 24 << 30
    ram_ = board.ram
    assert ram_.faults == [] and ram_.violations == [] and ram_.stats["dma_reads"] > 0
    assert ram_.stats["chunks"] >= 2 and ram_.live_chunks() == 0  # everything given back
    assert not board.cfg.command & 4  # bus mastering off: the freed queues are out of the gsp's reach


def test_the_real_gsp_rm_boots_through_a_scatter_list_of_huge_pages(tmp_path: Path) -> None:
    fw = nv.load_firmware(with_real_gsp_rm(tmp_path), nv.gpu.chip_params(0x19, 2), allow_unknown=True)
    result, err, board = boot(tmp_path, "dma=physical")
    assert err is None, err
    assert board.ram.faults == [] and board.ram.violations == []
    # every huge page was mapped by the up-front reserve: the boot's allocations match host_sizes, none came later
    reserved = PhysicalMemory.chunks_for(host_sizes(len(fw.gsp_image), len(fw.bootloader_image), SHARED_SIZE))
    assert board.ram.stats["chunks"] == reserved >= 19


def test_a_disconnect_in_any_step_leaves_no_host_memory_behind(tmp_path: Path) -> None:
    """Cut the link in the middle of each step of a physical-memory boot: every chunk is given back and no device
    access ever reached memory it was not given (or freed memory)."""
    opened = open_device(device(tmp_path / "clean", "dma=physical"))
    t = opened.transport
    marks: dict[str, list[int]] = {}
    try:
        gpu = nv.preflight_boot(t)
        fw = nv.load_firmware(firmware_set(tmp_path), gpu.chip, allow_unknown=True)
        nv.boot(gpu, fw, on_step=lambda n, p, d: marks.setdefault(n, []).append(t.accesses))
    finally:
        opened.close()
    cuts = {step: (a + b) // 2 + 1 for step, (a, b) in marks.items() if b > a}
    assert {"fwsec-frts", "load firmware", "start gsp", "cpu sequencer", "static info"} <= set(cuts)
    for step, n in cuts.items():
        _, err, board = boot(tmp_path / step.replace(" ", "-"), f"dma=physical,faults=disconnect@{n}")
        assert isinstance(err, Disconnected) and "(in boot step '" in str(err), (step, err)
        assert board.ram.live_chunks() == 0 and board.ram.violations == [], (step, board.ram.violations)


# -- the pci: transport's checks ----------------------------------------------------------------------------------
def test_pci_gpu_without_huge_pages_is_refused_after_reads_only(tmp_path: Path) -> None:
    sysfs, r0 = nvidia_sysfs_tree(tmp_path, None)
    before = r0.read_bytes()
    with SysfsTransport("0000:01:00.0", sysfs=str(sysfs)) as t:
        with pytest.raises(EnvironmentProblem, match="no free 2 MiB huge pages") as e:
            nv.preflight_boot(t)
        assert "nr_hugepages" in e.value.hint and "vfio:" in e.value.hint
        assert t.counters.reg_writes == 0 and t.counters.reg_reads > 0
    assert r0.read_bytes() == before


def test_pci_gpu_behind_a_translating_iommu_is_refused(tmp_path: Path) -> None:
    sysfs, r0 = nvidia_sysfs_tree(tmp_path, None)
    dev = sysfs / "devices" / "pci0000:01" / "0000:01:00.0"
    group = sysfs / "kernel" / "iommu_groups" / "12"
    (group / "devices").mkdir(parents=True)
    (group / "type").write_text("DMA-FQ\n")
    os.symlink(os.path.relpath(group, dev), dev / "iommu_group")
    before = r0.read_bytes()
    with SysfsTransport("0000:01:00.0", sysfs=str(sysfs)) as t:
        with pytest.raises(Refused, match="iommu group 12, type DMA-FQ") as e:
            nv.preflight_boot(t)
        assert e.value.exit_code == 2 and t.counters.reg_writes == 0
    assert r0.read_bytes() == before


def test_pci_gpu_with_huge_pages_needs_pagemap_frames(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, r0 = nvidia_sysfs_tree(tmp_path, None)
    pool = sysfs / "kernel" / "mm" / "hugepages" / "hugepages-2048kB"
    pool.mkdir(parents=True)
    (pool / "free_hugepages").write_text("64\n")
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    monkeypatch.setenv("TINYHW_PROCFS", str(proc))  # a procfs with no pagemap: as if it were unreadable
    with SysfsTransport("0000:01:00.0", sysfs=str(sysfs)) as t:
        with pytest.raises(EnvironmentProblem, match="cannot read .*pagemap") as e:
            nv.preflight_boot(t)
        assert "root" in e.value.hint and t.counters.reg_writes == 0


# -- the guardian: bus mastering off even when the process is killed ----------------------------------------------
GUARDED = """
import sys, time
from tinyhw.transport.physmem import start_guardian
start_guardian(sys.argv[1])
print("ready", flush=True)
time.sleep(60)
"""


def _command(config: Path) -> int:
    return int.from_bytes(config.read_bytes()[4:6], "little")


def test_a_killed_process_leaves_bus_mastering_off(tmp_path: Path) -> None:
    """SIGKILL the process that holds physical memory: its guardian clears COMMAND bit 2 (a regular file stands for
    the sysfs config file), keeping the other bits."""
    import signal
    import subprocess
    import sys

    config = tmp_path / "config"
    config.write_bytes(bytes(4) + (0x0406).to_bytes(2, "little") + bytes(250))  # memory, bus master, intx disable
    child = subprocess.Popen([sys.executable, "-c", GUARDED, str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        assert _command(config) == 0x0406
        _end_holder(child, signal.SIGKILL, config)
    finally:
        child.kill()


def _end_holder(child: Any, sig: int, config: Path) -> float:
    """End the holder with ``sig`` and wait (up to 60 s, a hang bound) for its guardian to clear bus mastering,
    keeping the other COMMAND bits; the deadline."""
    import time

    child.send_signal(sig)
    child.wait(60)
    deadline = time.monotonic() + 60
    while _command(config) & 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert _command(config) == 0x0402
    return deadline


def _state(pid: int) -> str | None:
    """The process's state letter (/proc/PID/stat), None when it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc/*/stat)."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(name))
    return out


def test_the_guardian_outlives_the_signals_that_reach_it_with_its_parent(tmp_path: Path) -> None:
    """`pkill -f tinyhw` signals the guardian too (same command line): it must not die of SIGTERM, SIGINT, SIGHUP or
    SIGQUIT, or a terminated holder would leave bus mastering on. The guardian is signalled first (it stays, the bit
    stays on: its holder still lives), then the holder is terminated: the guardian clears the bit and exits."""
    import signal
    import subprocess
    import sys
    import time

    config = tmp_path / "config"
    config.write_bytes(bytes(4) + (0x0406).to_bytes(2, "little") + bytes(250))
    child = subprocess.Popen([sys.executable, "-c", GUARDED, str(config)], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        (guardian,) = _children(child.pid)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGTSTP):
            os.kill(guardian, sig)
        time.sleep(0.2)
        assert _state(guardian) in ("S", "R")  # alive, not stopped
        assert _command(config) == 0x0406
        deadline = _end_holder(child, signal.SIGTERM, config)
        while _state(guardian) not in (None, "Z") and time.monotonic() < deadline:  # it exits once the bit is clear
            time.sleep(0.01)
        assert _state(guardian) in (None, "Z")
    finally:
        child.kill()


def test_closing_the_memory_stops_its_guardian(tmp_path: Path) -> None:
    from tinyhw.transport.physmem import start_guardian

    config = tmp_path / "config"
    config.write_bytes(bytes(4) + (0x0006).to_bytes(2, "little") + bytes(250))
    r = ram()
    mem = PhysicalMemory(r, quiesce=lambda: r.bus.update(on=False),  # type: ignore[attr-defined]
                         guardian=lambda: start_guardian(str(config)))
    mem.reserve([PAGE])
    assert _command(config) == 0x0006  # the guardian waits while this process holds the memory
    mem.dma_alloc(PAGE)  # inside the reservation
    with pytest.raises(OperationFailed, match="beyond what was reserved up front"):
        mem.dma_alloc(2 << 20)  # a chunk the guardian, forked already, would not share
    assert len(mem.chunks) == 1
    mem.close()  # stop() reaps the guardian, which cleared the bit on its way out
    assert _command(config) == 0x0002 and r.violations == []
