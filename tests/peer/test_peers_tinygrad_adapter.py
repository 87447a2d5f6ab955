"""The tinygrad adapter's own parts (tinyhw/peers/tinygrad_amd.py), without booting: BAR views over a tinyhw
transport (element and slice indexing, partial dwords merged), the access log, the Resizable BAR, refused devices,
the firmware cache entries, and that tinygrad's layer is put back when the context ends."""

from __future__ import annotations

import hashlib
import importlib.util
from pathlib import Path

import pytest

import tinyhw
from tinyhw.errors import Refused
from tinyhw.peers import tinygrad_amd as peer


class _Gpu:
    """Just what EmulatedPciDevice reads of the active session."""

    def __init__(self, transport) -> None:
        self.transport, self.name, self.log = transport, "mock-test", peer.AccessLog(8)


@pytest.fixture
def pcidev(tmp_path: Path):
    with tinyhw.open(f"mock:navi31,strict,flash={tmp_path / 'flash.bin'}") as dev:
        previous, peer.EmulatedGpu.active = peer.EmulatedGpu.active, _Gpu(dev.transport)
        try:
            yield peer.EmulatedPciDevice("am", "mock-test")
        finally:
            peer.EmulatedGpu.active = previous


def test_bar_views_index_by_element_and_merge_partial_dwords(pcidev) -> None:
    vram = pcidev.map_bar(0)
    vram.view(0x1000, 16, fmt="I")[:] = [1, 2, 3, 4]
    assert vram.view(0x1000, 16, fmt="I")[1:3] == [2, 3]
    assert vram.view(0x1000, 8, fmt="Q")[0] == 2 << 32 | 1
    vram[0x1001:0x1003] = b"\xAA\xBB"  # two bytes inside a dword: read, merged, written back
    assert bytes(vram[0x1000:0x1004]) == b"\x01\xAA\xBB\x00"
    assert vram.view(0x1000, fmt="I")[-1] == 0  # negative index from the view's end (VRAM never written reads 0)
    mmio = pcidev.map_bar(5, fmt="I")
    assert len(mmio) == pcidev.bar_info(5)[1] // 4
    assert mmio[0xDE3] == 24576  # RCC_CONFIG_MEMSIZE in MiB, one logged dword read
    assert "bar5 read 0x378c -> 0x00006000" in pcidev.log.tail(1)[0]
    mmio[0xDE3] = 0  # a read-only register here: the write is logged all the same
    assert pcidev.log.count == 9 and len(pcidev.log.entries) == 8  # the log keeps the last entries only
    assert pcidev.log.report(2).splitlines()[0] == "last 2 of 9 accesses:"


def test_resize_bar_takes_the_largest_size_the_capability_offers(pcidev) -> None:
    before = pcidev.bar_info(0)[1]
    pcidev.resize_bar(0)
    after = pcidev.bar_info(0)[1]
    assert before == 256 << 20 and after > before and pcidev.map_bar(0).nbytes == after
    with pytest.raises(Refused, match="bar5 is not resizable"):
        pcidev.resize_bar(5)


def test_sysmem_is_host_memory_the_gpu_reaches_through_the_iommu(pcidev) -> None:
    view, pages = pcidev.alloc_sysmem(0x2000)
    view[0:4] = b"abcd"
    assert len(pages) == 2 and pages[1] == pages[0] + 0x1000
    iommu = pcidev.t.iommu
    assert iommu.dma_read(pages[0], 4) == b"abcd"


def test_only_the_emulated_navi31_boards_are_taken() -> None:
    gpu = peer.EmulatedGpu("mock:ad102")
    with pytest.raises(Refused, match="takes an emulated amd board"):
        gpu.open()


def test_firmware_goes_where_tinygrad_looks_and_the_pins_come_back(tmp_path: Path, monkeypatch) -> None:
    if importlib.util.find_spec("tinygrad") is None:
        pytest.skip("tinygrad is not installed (the compile extra)")
    import tinygrad.helpers
    from tinygrad.runtime.autogen.am import fw

    monkeypatch.setattr(tinygrad.helpers, "cache_dir", str(tmp_path / "tg"))
    src = tmp_path / "fw"
    src.mkdir()
    (src / "psp_13_0_0_sos.bin").write_bytes(b"sos")
    before = fw.hashes["psp_13_0_0_sos.bin"]
    old = peer.provide_firmware(src, ("psp_13_0_0_sos.bin",))
    try:
        url = peer.FIRMWARE_URL.format(name="psp_13_0_0_sos.bin")
        cached = tmp_path / "tg" / "downloads" / "fw" / hashlib.md5(url.encode()).hexdigest()
        assert cached.read_bytes() == b"sos"
        assert fw.hashes["psp_13_0_0_sos.bin"] == hashlib.sha256(b"sos").hexdigest()
        assert tinygrad.helpers.fetch_fw("amdgpu", "psp_13_0_0_sos.bin", fw.hashes["psp_13_0_0_sos.bin"]) == b"sos"
    finally:
        peer.restore_firmware_pins(old)
    assert fw.hashes["psp_13_0_0_sos.bin"] == before
    with pytest.raises(tinyhw.errors.NotAvailableYet, match="smu_13_0_0.bin is not in"):
        peer.provide_firmware(src, ("smu_13_0_0.bin",))


def test_installed_puts_tinygrads_layer_back(tmp_path: Path) -> None:
    if importlib.util.find_spec("tinygrad") is None:
        pytest.skip("tinygrad is not installed (the compile extra)")
    import tinygrad.runtime.ops_amd as tg_amd
    import tinygrad.runtime.support.system as tg_system
    import tinygrad.runtime.support.usb as tg_usb

    before = (tg_system.PCIDevice, tg_usb.USB3, tg_system.USB3, tg_amd.USB3)
    gpu = peer.EmulatedGpu(f"mock:navi31,flash={tmp_path / 'flash.bin'}")
    gpu.open()
    try:
        with peer.installed(gpu):
            assert tg_system.PCIDevice is peer.EmulatedPciDevice and tg_amd.USB3 is peer.EmulatedUsb3
            listed = tg_system.System.list_devices(0x1002, ((0xFFFF, (0x744C,)),))
            assert [(cls, bus) for cls, bus in listed] == [(peer.EmulatedPciDevice, gpu.name)]
            assert peer.EmulatedUsb3.list_devices(0xADD1, 0x0001) == []  # a pci session lists no bridge
    finally:
        gpu.close()
    assert (tg_system.PCIDevice, tg_usb.USB3, tg_system.USB3, tg_amd.USB3) == before
    assert "pci_scan_bus" not in vars(tg_system.System) and peer.EmulatedGpu.active is None
