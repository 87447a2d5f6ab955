"""The vfio: transport's ABI (specs/pci-vfio-remote.md §8.4, §8.5, §8.7) and its refusals before any
ioctl, on a fake sysfs tree. The ioctls themselves run against a real kernel in tests/guest."""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path

import pytest

from tests.transport.test_pci_sysfs import EDU, build
from tinyhw.errors import EnvironmentProblem, Refused
from tinyhw.pci import vfio_abi as abi
from tinyhw.pci.dma import PAGE, DmaBuffer
from tinyhw.pci.vfio import VfioTransport
from tinyhw.transport.lock import DeviceLock


def test_ioctl_numbers_match_the_spec_table() -> None:
    """_IO(';', 100 + n) with no size or direction bits (§8.4)."""
    assert abi.VFIO_GET_API_VERSION == 15204  # 0x3b64
    table = {abi.VFIO_CHECK_EXTENSION: 0x3B65, abi.VFIO_SET_IOMMU: 0x3B66, abi.VFIO_GROUP_GET_STATUS: 0x3B67,
             abi.VFIO_GROUP_SET_CONTAINER: 0x3B68, abi.VFIO_GROUP_UNSET_CONTAINER: 0x3B69,
             abi.VFIO_GROUP_GET_DEVICE_FD: 0x3B6A, abi.VFIO_DEVICE_GET_INFO: 0x3B6B,
             abi.VFIO_DEVICE_GET_REGION_INFO: 0x3B6C, abi.VFIO_DEVICE_GET_IRQ_INFO: 0x3B6D,
             abi.VFIO_DEVICE_SET_IRQS: 0x3B6E, abi.VFIO_DEVICE_RESET: 0x3B6F, abi.VFIO_IOMMU_GET_INFO: 0x3B70,
             abi.VFIO_IOMMU_MAP_DMA: 0x3B71, abi.VFIO_IOMMU_UNMAP_DMA: 0x3B72}
    assert all(k == v for k, v in table.items())
    assert (abi.VFIO_TYPE1_IOMMU, abi.VFIO_TYPE1v2_IOMMU, abi.VFIO_NOIOMMU_IOMMU) == (1, 3, 8)


def test_struct_layouts() -> None:
    buf = abi.buffer(abi.REGION_INFO, 0, 7, 0, 0, 0)
    assert len(buf) == 32 and struct.unpack_from("<II", buf) == (32, 0) and buf[8] == 7
    m = abi.buffer(abi.DMA_MAP, 3, 0x7F0000001000, 0x100000, 0x2000)
    assert m == bytearray(struct.pack("<IIQQQ", 32, 3, 0x7F0000001000, 0x100000, 0x2000))
    assert len(abi.buffer(abi.DMA_UNMAP, 0, 0x100000, 0x2000)) == 24
    assert len(abi.buffer(abi.DEVICE_INFO, 0, 0, 0, 0, 0)) == 24 and len(abi.buffer(abi.GROUP_STATUS, 0)) == 8


def test_irq_set_payloads() -> None:
    """§8.7: MSI with one eventfd is argsz 24, flags 0x24, index 1, start 0, count 1, then the fd."""
    on = abi.irq_set(abi.PCI_MSI_IRQ_INDEX, abi.IRQ_SET_DATA_EVENTFD | abi.IRQ_SET_ACTION_TRIGGER, 0, [9])
    assert bytes(on) == struct.pack("<IIIIIi", 24, 0x24, 1, 0, 1, 9)
    off = abi.irq_set(abi.PCI_MSI_IRQ_INDEX, abi.IRQ_SET_DATA_NONE | abi.IRQ_SET_ACTION_TRIGGER, 0, [])
    assert bytes(off) == struct.pack("<IIIII", 20, 0x21, 1, 0, 0)


def test_dma_buffer_is_page_aligned_shared_memory() -> None:
    buf = DmaBuffer(100)
    assert buf.size == PAGE and buf.vaddr % PAGE == 0 and buf.iova is None
    buf.write(10, b"abc")
    assert buf.read(9, 5) == b"\0abc\0"
    buf.close()
    buf.close()
    with pytest.raises(ValueError):
        DmaBuffer(0)


def test_refusals_before_any_ioctl(tmp_path: Path) -> None:
    sysfs = build(tmp_path)
    with pytest.raises(Refused, match=r"bound to no driver, not vfio-pci.*pci bind --yes") as e:
        VfioTransport(EDU, sysfs=str(sysfs))
    assert e.value.exit_code == 2
    dev = sysfs / "devices" / "pci0000:00" / EDU
    (sysfs / "bus/pci/drivers/vfio-pci").mkdir(parents=True)
    (dev / "driver").symlink_to("../../../bus/pci/drivers/vfio-pci")
    with pytest.raises(EnvironmentProblem, match="has no iommu group") as e:
        VfioTransport(EDU, sysfs=str(sysfs))
    assert e.value.exit_code == 3
    (sysfs / "kernel/iommu_groups/3").mkdir(parents=True)
    (dev / "iommu_group").symlink_to("../../../kernel/iommu_groups/3")
    with pytest.raises(EnvironmentProblem, match=r"/vfio does not exist; load vfio-pci"):
        VfioTransport(EDU, sysfs=str(sysfs), dev_vfio=str(tmp_path / "dev-vfio"))
    DeviceLock(EDU).acquire().release()  # a failed open released the device lock


class FakeVfio:
    """A stand-in for the kernel's VFIO ioctls (§13.1 "a VFIO ioctl layer"): answers them in the §8.5
    layouts and records each call, so the open sequence of §8.9 and the clean-up can be checked
    without a kernel. The device fd is a sparse file: BAR0 at 0, config space at 0x100000."""

    CONFIG_AT = 0x100000

    def __init__(self, tmp: Path, *, mmap_ok: bool = True, reset: bool = False) -> None:
        self.calls: list[tuple[int, object]] = []
        self.devfile = tmp / "device-fd"
        with open(self.devfile, "wb") as f:
            f.truncate(self.CONFIG_AT + 256)
        with open(self.devfile, "r+b") as f:
            f.seek(self.CONFIG_AT)
            f.write(bytes.fromhex("3412e811") + bytes.fromhex("0300"))
        self.mmap_ok, self.reset = mmap_ok, reset

    def __call__(self, fd: int, req: int, arg: object = 0, *_: object) -> int:
        self.calls.append((req, bytes(arg) if isinstance(arg, bytearray) else arg))
        if req == abi.VFIO_CHECK_EXTENSION:
            return int(arg in (abi.VFIO_TYPE1_IOMMU, abi.VFIO_TYPE1v2_IOMMU))
        if req == abi.VFIO_GROUP_GET_STATUS:
            struct.pack_into("<I", arg, 4, abi.GROUP_FLAGS_VIABLE)
        elif req == abi.VFIO_GROUP_GET_DEVICE_FD:
            assert bytes(arg) == EDU.encode() + b"\0"
            return os.open(self.devfile, os.O_RDWR)
        elif req == abi.VFIO_DEVICE_GET_INFO:
            struct.pack_into("<III", arg, 4, 2 | (1 if self.reset else 0), 9, 5)
        elif req == abi.VFIO_IOMMU_GET_INFO:
            struct.pack_into("<IQ", arg, 4, 1, 0x1000)
        elif req == abi.VFIO_DEVICE_GET_REGION_INFO:
            index = struct.unpack_from("<I", arg, 8)[0]
            flags, size, off = {0: (7 if self.mmap_ok else 3, 1 << 20, 0), 7: (3, 256, self.CONFIG_AT)}.get(
                index, (0, 0, 0))
            struct.pack_into("<IIIQQ", arg, 4, flags, index, 0, size, off)
        elif req == abi.VFIO_DEVICE_GET_IRQ_INFO:
            struct.pack_into("<I", arg, 12, 1)
        return 0

    def requests(self) -> list[int]:
        return [r for r, _ in self.calls]


@pytest.fixture
def bound(tmp_path: Path) -> tuple[Path, Path]:
    sysfs = build(tmp_path)
    dev = sysfs / "devices" / "pci0000:00" / EDU
    (sysfs / "bus/pci/drivers/vfio-pci").mkdir(parents=True)
    (dev / "driver").symlink_to("../../../bus/pci/drivers/vfio-pci")
    (sysfs / "kernel/iommu_groups/3").mkdir(parents=True)
    (dev / "iommu_group").symlink_to("../../../kernel/iommu_groups/3")
    nodes = tmp_path / "dev-vfio"
    nodes.mkdir()
    (nodes / "vfio").write_bytes(b"")
    (nodes / "3").write_bytes(b"")
    return sysfs, nodes


@pytest.mark.parametrize("mmap_ok", [True, False])
def test_open_sequence_regions_irqs_dma_and_cleanup(bound: tuple[Path, Path], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, mmap_ok: bool) -> None:
    sysfs, nodes = bound
    fake = FakeVfio(tmp_path, mmap_ok=mmap_ok)
    monkeypatch.setattr(fcntl, "ioctl", fake)
    t = VfioTransport(EDU, sysfs=str(sysfs), dev_vfio=str(nodes))
    assert fake.requests() == [abi.VFIO_GET_API_VERSION, abi.VFIO_CHECK_EXTENSION, abi.VFIO_CHECK_EXTENSION,
                               abi.VFIO_GROUP_GET_STATUS, abi.VFIO_GROUP_SET_CONTAINER, abi.VFIO_SET_IOMMU,
                               abi.VFIO_GROUP_GET_DEVICE_FD, abi.VFIO_DEVICE_GET_INFO, abi.VFIO_IOMMU_GET_INFO]
    assert fake.calls[5] == (abi.VFIO_SET_IOMMU, abi.VFIO_TYPE1v2_IOMMU)
    assert t.iommu_type == 3 and t.lock.held and t.config_size() == 256
    assert t.config_read(0, 4) == 0x11E81234 and t.config_read(4, 2) == 3
    t.set_bus_master(True)
    assert t.config_read(4, 2) == 7
    region = t.bar(0)
    assert region.path == "vfio region 0" and (region.__class__.__name__ == "MappedRegion") == mmap_ok
    region.write32(0x10, 0xCAFEF00D)
    assert region.read32(0x10) == 0xCAFEF00D and region.read(0x10, 8) == bytes.fromhex("0df0feca00000000")
    assert fake.devfile.read_bytes()[0x10:0x14] == bytes.fromhex("0df0feca")
    assert t.counters.reg_reads == 3 and t.counters.reg_writes == 1
    fds = t.enable_irqs("msi", 1)
    msi = next(a for r, a in fake.calls if r == abi.VFIO_DEVICE_SET_IRQS)
    assert msi == struct.pack("<IIIIIi", 24, 0x24, 1, 0, 1, fds[0])
    os.eventfd_write(fds[0], 1)
    assert t.wait_irq(fds[0], 0.1) == 1 and t.wait_irq(fds[0], 0.01) == 0
    with pytest.raises(Refused, match="has 1 msi vector"):
        t.enable_irqs("msi", 2)
    a, b = t.dma_alloc(100), t.dma_alloc(PAGE + 1)
    assert (a.iova, b.iova) == (0x100000, 0x101000) and b.size == 2 * PAGE
    maps = [x for r, x in fake.calls if r == abi.VFIO_IOMMU_MAP_DMA]
    assert maps[1] == struct.pack("<IIQQQ", 32, 3, b.vaddr, 0x101000, 2 * PAGE)
    with pytest.raises(Refused, match="not page aligned"):
        t.dma_alloc(10, iova=0x1234)
    with pytest.raises(Refused, match="offers no vfio reset"):
        t.reset()
    t.close()
    unmaps = [x for r, x in fake.calls if r == abi.VFIO_IOMMU_UNMAP_DMA]
    assert unmaps == [struct.pack("<IIQQ", 24, 0, 0x100000, PAGE), struct.pack("<IIQQ", 24, 0, 0x101000, 2 * PAGE)]
    assert fake.requests()[-3:] == [abi.VFIO_IOMMU_UNMAP_DMA, abi.VFIO_IOMMU_UNMAP_DMA,
                                abi.VFIO_GROUP_UNSET_CONTAINER]
    disable = [x for r, x in fake.calls if r == abi.VFIO_DEVICE_SET_IRQS][-1]
    assert disable == struct.pack("<IIIII", 20, 0x21, 1, 0, 0)
    assert not t.lock.held and t.dma == []
    t.close()  # twice is harmless


def test_group_not_viable_and_reset(bound: tuple[Path, Path], tmp_path: Path,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, nodes = bound
    fake = FakeVfio(tmp_path, reset=True)
    monkeypatch.setattr(fcntl, "ioctl", fake)
    with VfioTransport(EDU, sysfs=str(sysfs), dev_vfio=str(nodes)) as t:
        t.reset()
        assert fake.requests()[-1] == abi.VFIO_DEVICE_RESET

    def not_viable(fd: int, req: int, arg: object = 0, *rest: object) -> int:
        r = fake(fd, req, arg, *rest)
        if req == abi.VFIO_GROUP_GET_STATUS:
            struct.pack_into("<I", arg, 4, 0)
        return r

    monkeypatch.setattr(fcntl, "ioctl", not_viable)
    with pytest.raises(Refused, match="iommu group 3 is not viable"):
        VfioTransport(EDU, sysfs=str(sysfs), dev_vfio=str(nodes))
    DeviceLock(EDU).acquire().release()


def test_dma_buffer_past_the_memlock_limit_is_an_environment_problem(bound: tuple[Path, Path], tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """§9.2: type1 pins count against RLIMIT_MEMLOCK; the kernel's ENOMEM becomes exit 3 naming the limit."""
    import errno

    sysfs, nodes = bound
    fake = FakeVfio(tmp_path)

    def no_memory(fd: int, req: int, arg: object = 0, *rest: object) -> int:
        if req == abi.VFIO_IOMMU_MAP_DMA:
            raise OSError(errno.ENOMEM, "Cannot allocate memory")
        return fake(fd, req, arg, *rest)

    monkeypatch.setattr(fcntl, "ioctl", no_memory)
    t = VfioTransport(EDU, sysfs=str(sysfs), dev_vfio=str(nodes))
    try:
        with pytest.raises(EnvironmentProblem, match=r"cannot pin a 16384 KiB dma buffer .*RLIMIT_MEMLOCK") as e:
            t.dma_alloc(16 << 20)
        assert "ulimit -l" in (e.value.hint or "") and t.dma == []
    finally:
        t.close()
