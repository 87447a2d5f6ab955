"""The pci: sysfs transport against a fake sysfs tree (specs/pci-vfio-remote.md §13.1): BAR mapping
with 32-bit accesses on sparse resourceN files, write-combining files, driver-bound refusal, the
device lock, memory-decode enable, reset and the resourceN_resize file protocol (§7.1).

A file-backed fake cannot model kernel semantics (§13.2); the real-kernel tier (tests/guest)
covers those. Nothing here touches this machine's own sysfs.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.formats.test_formats_pciconfig import navi31_image
from tests.transport.test_pci_scan import NAVI_RES, ZERO, Fake, make_tree
from tinyhw.errors import DeviceLocked, DeviceNotFound, EnvironmentProblem, Refused, TinyhwError
from tinyhw.pci.mmio import access_width
from tinyhw.pci.sysfs import FORCE_BOUND_RISK, SysfsTransport
from tinyhw.transport.lock import DeviceLock

GPU = "0000:03:00.0"
EDU = "0000:00:05.0"
EDU_RES = ["0x00000000fea00000 0x00000000feafffff 0x0000000000040200"] + [ZERO] * 6


def build(tmp_path: Path, *, driver: str | None = None, command: int = 0x0006) -> Path:
    """A tree with a Navi31-like GPU (BAR0/2 prefetchable, BAR5 registers) and an edu-like function."""
    cfg = bytearray(navi31_image())
    cfg[4:6] = command.to_bytes(2, "little")
    edu_cfg = bytearray(256)
    edu_cfg[0:4] = bytes.fromhex("3412e811")
    edu_cfg[4:6] = command.to_bytes(2, "little")
    sysfs = tmp_path / "sys"
    make_tree(sysfs, [Fake(GPU, 0x1002, 0x744C, 0x030000, 0xC8, (0x1DA2, 0xE471), driver, resources=NAVI_RES,
                           config=bytes(cfg)),
                      Fake(EDU, 0x1234, 0x11E8, 0x00FF00, 0x10, resources=EDU_RES, config=bytes(edu_cfg))])
    gpu = sysfs / "devices" / "pci0000:03" / GPU
    for name, size in (("resource0", 256 << 20), ("resource0_wc", 256 << 20), ("resource2", 2 << 20),
                       ("resource5", 1 << 20)):
        with open(gpu / name, "wb") as f:
            f.truncate(size)  # sparse, as §13.1 suggests
    (gpu / "resource0_resize").write_text("000000000000ff00\n")  # 256 MiB ... 32 GiB
    (gpu / "reset").write_text("")
    with open(sysfs / "devices" / "pci0000:00" / EDU / "resource0", "wb") as f:
        f.truncate(1 << 20)
    return sysfs


def test_bar_mapping_uses_single_32bit_accesses(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    res5 = sysfs / "bus" / "pci" / "devices" / GPU / "resource5"
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        region = t.bar(5)
        assert region.path == str(res5) and not region.write_combining
        assert access_width(region.view) == 4 and region.view.format == "I"
        region.write32(0x1000, 0xDEADBEEF)
        region.write(0x2000, bytes(range(16)))
        assert region.read32(0x1000) == 0xDEADBEEF
        assert region.read(0x2000, 16) == bytes(range(16))
        assert region.flush(0x1000) == 0xDEADBEEF
        c = t.counters
        # + the 2-byte COMMAND read that checks memory decoding before the mapping
        assert (c.reg_reads, c.reg_writes, c.bytes_in, c.bytes_out) == (1 + 4 + 1, 1 + 4, 24 + 2, 20)
        assert c.round_trips == 6 + 1 and c.tlp_reads == 6 and c.tlp_writes == 5
        for off, n in ((0x1002, 4), (0x100000, 4), (-4, 4), (0xFFFFC, 8)):
            with pytest.raises(Refused):
                region.read(off, n)
    data = res5.read_bytes()
    assert data[0x1000:0x1004] == bytes.fromhex("efbeadde") and data[0x2000:0x2010] == bytes(range(16))


def test_prefetchable_bar_maps_the_wc_file_unless_nowc(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    gpu = sysfs / "bus" / "pci" / "devices" / GPU
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        assert t.bar(0).path == str(gpu / "resource0_wc") and t.bar(0).write_combining
        assert t.bar(2).path == str(gpu / "resource2")  # prefetchable, but the kernel offers no _wc file
        t.bar(0).write32(0x10, 0x1234)
    assert (gpu / "resource0_wc").read_bytes()[0x10:0x14] == bytes.fromhex("34120000")
    with SysfsTransport(GPU, sysfs=str(sysfs), write_combining=False) as t:
        assert t.bar(0).path == str(gpu / "resource0")


def test_bar_errors(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        with pytest.raises(Refused, match=r"bar1 is not implemented by this device \(bars: \[0, 2, 4, 5\]\)"):
            t.bar(1)
        with pytest.raises(Refused, match="bar4 is an i/o bar"):
            t.bar(4)
    os.unlink(sysfs / "devices" / "pci0000:03" / GPU / "resource5")
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t, pytest.raises(EnvironmentProblem, match="resource5 does not"):
        t.bar(5)
    with pytest.raises(DeviceNotFound, match="no pci function 0000:09:00.0") as e:
        SysfsTransport("0000:09:00.0", sysfs=str(sysfs))
    assert e.value.exit_code == 3


def test_bound_function_is_refused_unless_forced(tmp_path: Path) -> None:
    sysfs = build(tmp_path, driver="amdgpu")
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        assert t.config_read(0, 4) == 0x744C1002  # reading config space is allowed
        for action in (lambda: t.bar(5), lambda: t.config_write(0x04, 2, 6), t.reset,
                       lambda: t.resize_bar(0, 1 << 30)):
            with pytest.raises(Refused, match="bound to the kernel driver amdgpu; refusing to") as e:
                action()
            assert e.value.exit_code == 2 and "--force-bound" in str(e.value) and FORCE_BOUND_RISK in str(e.value)
        assert not t.lock.held
    with SysfsTransport(GPU, sysfs=str(sysfs), force_bound=True) as t:
        t.bar(5).write32(0, 1)
        assert t.lock.held


def test_lock_is_shared_per_address(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    with SysfsTransport(EDU, sysfs=str(sysfs)) as a:
        a.bar(0).read32(0)
        with SysfsTransport(EDU, sysfs=str(sysfs)) as b:
            with pytest.raises(DeviceLocked, match=r"device 0000:00:05.0 is in use by pid \d+") as e:
                b.bar(0)
            assert e.value.exit_code == 3
        with pytest.raises(DeviceLocked):  # the lock any transport (vfio:, remote server) takes for this address
            DeviceLock(EDU, backend="vfio").acquire()
        with SysfsTransport(GPU, sysfs=str(sysfs)) as other:  # another device is independent
            other.bar(5).read32(0)
    with SysfsTransport(EDU, sysfs=str(sysfs)) as b:  # released on close
        b.bar(0).read32(0)


def test_config_access(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    cfg = sysfs / "devices" / "pci0000:00" / EDU / "config"
    with SysfsTransport(EDU, sysfs=str(sysfs)) as t:
        assert t.config_size() == 256
        assert (t.config_read(0, 2), t.config_read(2, 2), t.config_read(0, 4)) == (0x1234, 0x11E8, 0x11E81234)
        assert t.config_bytes(0xF0, 0x40) == bytes(16)  # short at the end of the file
        t.config_write(0x3C, 1, 0x0B)
        with pytest.raises(Refused, match="not naturally aligned"):
            t.config_read(1, 2)
        with pytest.raises(Refused):
            t.config_write(0x1000, 4, 0)
        with pytest.raises(EnvironmentProblem, match="not readable"):
            t.config_read(0x100, 4)
        assert t.lock.held
    assert cfg.read_bytes()[0x3C] == 0x0B
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        assert t.config_size() == 4096


def test_memory_decode_is_enabled_through_the_enable_file(tmp_path: Path) -> None:
    sysfs = build(tmp_path, command=0x0000)
    enable = sysfs / "devices" / "pci0000:00" / EDU / "enable"
    enable.write_text("")  # a regular file keeps old bytes past a shorter write; start empty
    with SysfsTransport(EDU, sysfs=str(sysfs)) as t:
        t.bar(0)
    assert enable.read_text() == "1"


def test_reset_writes_the_reset_file(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        t.reset()
    assert (sysfs / "devices" / "pci0000:03" / GPU / "reset").read_text() == "1"
    with SysfsTransport(EDU, sysfs=str(sysfs)) as t, pytest.raises(Refused, match="has no reset method"):
        t.reset()


def test_resize_through_resource_resize(tmp_path: Path) -> None:
    """§7.1: read the %016llx bitmap (bit k = 2^(k+20) bytes), write the decimal bit index."""
    sysfs = build(tmp_path)
    gpu = sysfs / "devices" / "pci0000:03" / GPU
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        assert t.resizable_sizes(0) == [1 << k for k in range(28, 36)]  # 256 MiB .. 32 GiB
        assert t.resizable_sizes(2) is None
        old = t.bar(0)
        with pytest.raises(Refused, match=r"bar0 cannot be 0x8000000 bytes \(supported: 0x10000000, "):
            t.resize_bar(0, 128 << 20)
        with pytest.raises(Refused, match="bar2 of 0000:03:00.0 is not resizable"):
            t.resize_bar(2, 4 << 20)
        # the kernel would recreate resource0 and rewrite `resource`; emulate its new BAR size
        lines = (gpu / "resource").read_text().splitlines()
        lines[0] = "0x0000007800000000 0x00000079ffffffff 0x000000000014220c"
        info_before = t.bar(0).info
        (gpu / "resource").write_text("\n".join(lines) + "\n")
        info = t.resize_bar(0, 8 << 30)
        # one write() of the decimal bit index 13 (8 GiB = 2^(13+20)) over the file's start
        assert (gpu / "resource0_resize").read_text() == "13" + "000000000000ff00\n"[2:]
        assert info.size == 8 << 30 and info_before.size == 256 << 20
        assert old._mm is None  # the old mapping was dropped: the kernel deletes resourceN on resize
    (gpu / "resource0_resize").write_text("not hex\n")
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t, pytest.raises(TinyhwError, match="hex bitmap"):
        t.resizable_sizes(0)


def test_identity_and_info(tmp_path: Path) -> None:
    sysfs = build(tmp_path, driver="vfio-pci")
    with SysfsTransport(GPU, sysfs=str(sysfs)) as t:
        ident = t.identity()
        assert (ident.vendor_id, ident.device_id, ident.revision, ident.location) == (0x1002, 0x744C, 0xC8, GPU)
        assert t.info().transport == "pci" and t.info().extra["driver"] == "vfio-pci"
        with pytest.raises(Refused, match="use --device vfio:0000:03:00.0"):
            t.bar(5)
