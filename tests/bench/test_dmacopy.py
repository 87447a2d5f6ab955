"""Host memory <-> VRAM through pinned DMA buffers and SDMA0 on ``mock:navi31`` (issue 12, ``bench copy --path dma``).

The emulated board's host DMA memory (tinyhw/mocks/common/iommu.py) is checked from its own side: VRAM is read from the
emulator, not through the driver, so a mistake made the same way in both copy directions cannot hide.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clihelp import run

import tinyhw
from tinyhw.bench.copy import PCIE_LANE_MBPS
from tinyhw.boot.amd.copyengine import PT_BASE
from tinyhw.boot.amd.dmacopy import open_dma_copier, window_va
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.mocks.amd.gpuvm import register_offsets
from tinyhw.mocks.common.iommu import HostBuffer, link_rate
from tinyhw.transport.abilities import DmaBuffers

KEYS = {"direction", "size", "repeat", "mbps_min", "mbps_median", "mbps_max", "verified", "link_limit_mbps",
        "fraction_of_limit", "modelled"}
DST = 128 << 20


def _boot(device: str = "mock:navi31") -> None:
    from amfake import FW_DIR

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware not extracted in {FW_DIR}: run bash tests/setup-system.sh", pytrace=False)
    r = run("--device", device, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    assert r.code == 0, r.err


def _one_error_line(err: str) -> str:
    lines = [x for x in err.splitlines() if x.startswith("error: ")]
    assert len(lines) == 1, err
    return lines[0]


# -- refusals ------------------------------------------------------------------------------------------------
def test_dma_path_refused_before_boot_with_a_hint() -> None:
    r = run("--device", "mock:navi31", "bench", "copy", "--path", "dma", "--sizes", "4K")
    assert r.code == 2 and r.out == ""
    assert "not a gpu tinyhw booted" in _one_error_line(r.err) and "tinyhw am boot" in r.err


def test_dma_path_refused_without_dma_buffers() -> None:
    r = run("--device", "mock:navi31-usb", "bench", "copy", "--path", "dma", "--sizes", "4K")
    assert r.code == 2 and "cannot map" in _one_error_line(r.err) and "vfio" in r.err
    r = run("--device", "mock:navi31-usb", "bench", "copy", "--path", "staging", "--sizes", "4K")
    assert r.code == 2 and "host dma buffers" in _one_error_line(r.err)


def test_dma_path_refuses_bar() -> None:
    r = run("--device", "mock:navi31", "bench", "copy", "--path", "dma", "--bar", "0", "--sizes", "4K")
    assert r.code == 2 and "--bar applies to --path bar" in r.err


# -- the CLI end to end ----------------------------------------------------------------------------------------
def test_dma_bench_json_is_verified_and_modelled_at_the_link_rate() -> None:
    _boot()
    r = run("--device", "mock:navi31", "--json", "bench", "copy", "--path", "dma", "--sizes", "4K,16M,1028",
            "--repeat", "2")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    assert [(x["direction"], x["size"]) for x in rows] == [("h2d", 4096), ("d2h", 4096), ("h2d", 16 << 20),
                                                           ("d2h", 16 << 20), ("h2d", 1028), ("d2h", 1028)]
    limit = PCIE_LANE_MBPS[4] * 16  # the emulated board's Link Status: 16 GT/s x16
    for x in rows:
        assert set(x) >= KEYS
        assert x["modelled"] is True and x["host_only"] is False and x["skipped"] is None
        assert x["verified"] == 2 * x["size"] and x["path"].startswith("pinned dma buffer + sdma0")
        assert x["link_limit_mbps"] == pytest.approx(limit, rel=1e-3)
        assert 0 < x["mbps_min"] <= x["mbps_median"] <= x["mbps_max"] < limit
    big = [x for x in rows if x["size"] == 16 << 20]
    # 16 MiB: the link's DMA rate (256-byte TLPs) less the submissions' register writes: 80-92 % of the line
    assert all(0.8 < x["fraction_of_limit"] < link_rate(4, 16) / (limit * 1e6) for x in big)
    small = [x for x in rows if x["size"] == 4096]
    assert all(x["mbps_median"] < 0.05 * limit for x in small)  # a 4 KiB copy is dominated by the submission


def test_dma_bench_human_output() -> None:
    _boot()
    r = run("--device", "mock:navi31", "bench", "copy", "--path", "dma", "--sizes", "64K", "--repeat", "1")
    assert r.code == 0, r.err
    assert "modelled" in r.out and "pinned dma buffer + sdma0" in r.out and "median MB/s by size" in r.out


def test_staging_is_host_only_measured_and_has_no_link_limit() -> None:
    r = run("--device", "mock:navi31", "--json", "bench", "copy", "--path", "staging", "--sizes", "64K,1M",
            "--repeat", "2")  # no boot needed: nothing reaches the device
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    for x in rows:
        assert x["host_only"] is True and x["modelled"] is False
        assert x["link_limit_mbps"] is None and x["fraction_of_limit"] is None
        assert x["verified"] == 2 * x["size"] and "no device transfer" in x["path"]
        assert x["mbps_median"] > 0
    human = run("--device", "mock:navi31", "bench", "copy", "--path", "staging", "--sizes", "4K", "--repeat", "1")
    assert human.code == 0 and "host only" in human.out and "modelled" not in human.out


# -- the library -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("size", [1, 3, 4096, 8191, 3 * 8192 + 5, 64 * 1024 + 4])
def test_copy_in_and_out_odd_sizes_through_a_small_window(size: int) -> None:
    """A 16 KiB window (two 8 KiB halves): every size above 16 KiB reuses both halves (double buffering)."""
    _boot()
    data = os.urandom(size)
    with tinyhw.open("mock:navi31") as dev:
        t = dev.transport
        c = open_dma_copier(t, window=16 * 1024, timeout=0.5)
        before = t.board.vram.read(DST + size, 8)
        c.copy_in(DST, data)
        assert t.board.vram.read(DST, size) == data  # the emulator's VRAM, not the driver's view
        assert t.board.vram.read(DST + size, 8) == before  # nothing written past the end
        other = os.urandom(size)
        t.board.vram.write(DST + 0x100000, other)  # VRAM the driver never wrote
        assert c.copy_out(DST + 0x100000, size) == other
        assert c.stats["pieces"] == 2 * -(-size // 8192)
        assert t.iommu.stats["bytes_read"] >= size and t.iommu.stats["faults"] == 0
        assert t.board.sdma.error is None
        c.close()
        assert t.iommu.buffers() == []


def test_library_use_with_the_bench_without_the_cli() -> None:
    from tinyhw.bench import CopyPath, copy_bench

    _boot()
    with tinyhw.open("mock:navi31") as dev:
        copier = open_dma_copier(dev.transport)
        via = CopyPath("dma", copier.copy_in, copier.copy_out)
        res = copy_bench(dev.transport, [1 << 20], repeat=1, offset=DST, via=via)
        copier.close()
    assert [r.verified for r in res] == [1 << 20, 1 << 20] and all(r.modelled for r in res)


def test_system_ptes_point_at_the_iova() -> None:
    """The window is mapped with 4 KiB system PTEs (bit 1) whose address is the buffer's IOVA (§4.5)."""
    _boot()
    with tinyhw.open("mock:navi31") as dev:
        t = dev.transport
        c = open_dma_copier(t, window=64 * 1024)
        for off in (0, 4096, 64 * 1024):
            system, bus = t.board.gpuvm.translate(window_va(off) + 12)
            assert system and bus == c.iova + off + 12
        c.close()


def test_am_boot_and_the_dma_window_put_physical_vram_addresses_in_the_page_tables() -> None:
    """After `am boot` on mock:navi31 and a dma copier's window, read from the emulator's side: the hubs' page-table
    base, default-address and aperture registers (amd-bringup.md §4.5) and the window's PDEs hold physical VRAM
    addresses, not MC addresses."""
    from vmregs import check_physical_vm

    from tinyhw.boot.amd.dmacopy import PDB0_DMA, PTB_DMA, WINDOW_VA_OFFSET

    _boot()
    with tinyhw.open("mock:navi31") as dev:
        t = dev.transport
        c = open_dma_copier(t, window=64 * 1024)
        check_physical_vm(t.board, c.gpu.vram_size)
        pdb1 = PT_BASE + 4096 + 8 * (WINDOW_VA_OFFSET >> 30)
        assert int.from_bytes(t.board.vram.read(pdb1, 8), "little") == PDB0_DMA | 1
        assert int.from_bytes(t.board.vram.read(PDB0_DMA, 8), "little") == PTB_DMA | 1
        c.close()


def test_an_unmapped_iova_is_an_iommu_fault_and_a_clear_timeout() -> None:
    _boot()
    with tinyhw.open("mock:navi31") as dev:
        t = dev.transport
        c = open_dma_copier(t, window=16 * 1024, timeout=0.5)
        t.iommu.unmap(c.buf)  # the driver's PTEs now name an IOVA no buffer maps
        before = t.board.vram.read(DST, 4096)
        with pytest.raises(DeviceTimeout, match=r"did not signal fence .* iommu fault") as e:
            c.copy_in(DST, os.urandom(4096))
        assert "am reset" in (e.value.hint or "")
        assert t.board.vram.read(DST, 4096) == before  # the copy did not happen
        assert t.iommu.stats["faults"] >= 1 and "iommu fault" in t.iommu.faults[0]
        assert f"0x{c.iova:x}" in t.iommu.faults[0]
        assert t.board.sdma.error and "iommu fault" in t.board.sdma.error
        fault_status = register_offsets(t.board.regs)["GCVM_L2_PROTECTION_FAULT_STATUS"]
        assert t.board.regfile.values.get(fault_status, 0) == 0  # not a gpu vm fault


def test_a_hung_engine_times_out() -> None:
    _boot()
    with tinyhw.open("mock:navi31,sdma=hang") as dev:
        c = open_dma_copier(dev.transport, window=16 * 1024, timeout=0.2)
        with pytest.raises(DeviceTimeout, match="did not signal fence 1"):
            c.copy_out(DST, 100)


def test_copies_outside_vram_and_bad_windows_are_refused() -> None:
    _boot()
    with tinyhw.open("mock:navi31") as dev:
        c = open_dma_copier(dev.transport, window=16 * 1024)
        with pytest.raises(Refused, match="outside vram"):
            c.copy_in(c.gpu.vram_size - 2, b"abcd")
        for at in (0, 80 << 20, c.gpu.vram_size - (64 << 20)):  # boot region, page tables, reserved top
            with pytest.raises(Refused, match="overlaps memory the running gpu uses"):
                c.copy_in(at, b"abcd")
        with pytest.raises(Refused, match="overlaps"):
            c.copy_out((82 << 20) + 4096, 4)
        with pytest.raises(Refused, match="dma window"):
            open_dma_copier(dev.transport, window=12345)
    r = run("--device", "mock:navi31", "bench", "copy", "--path", "dma", "--sizes", "4K", "--offset", "0x5000000")
    assert r.code == 2 and "overlaps memory the running gpu uses" in r.err


# -- the emulated iommu ------------------------------------------------------------------------------------------
def test_mock_navi31_has_dma_buffers_like_vfio(tmp_path: Path) -> None:
    with tinyhw.open(f"mock:navi31,flash={tmp_path / 'f.bin'}") as dev:
        t = dev.transport
        assert isinstance(t, DmaBuffers)
        a, b = t.dma_alloc(100), t.dma_alloc(4097)
        assert (a.iova, a.size, b.iova, b.size) == (1 << 20, 4096, (1 << 20) + 4096, 8192)
        with pytest.raises(Refused, match="overlaps"):
            t.dma_alloc(4096, iova=(1 << 20) + 8192)
        with pytest.raises(Refused, match="not page aligned"):
            t.dma_alloc(4096, iova=0x1234)
        a.write(10, b"xyz")
        assert t.iommu.dma_read(a.iova + 10, 3) == b"xyz"
        t.dma_free(a)
        assert t.iommu.buffers() == [b]
        assert isinstance(b, HostBuffer)
    assert t.iommu.buffers() == []  # closing the transport frees what is left


def test_link_rate_follows_link_status() -> None:
    assert link_rate(4, 16) == pytest.approx(16e9 * 128 / 130 / 8 * 16 * 256 / 280)
    assert link_rate(1, 1) == pytest.approx(2.5e9 * 0.8 / 8 * 256 / 280)


def test_bus_mastering_is_turned_on_and_needed() -> None:
    """vfio-pci hands the function over with bus mastering off: the copier sets it; cleared later, the gpu's
    requests are dropped (the copy times out)."""
    _boot()
    with tinyhw.open("mock:navi31") as dev:
        t = dev.transport
        t.config_write(4, 2, t.config_read(4, 2) & ~4)
        c = open_dma_copier(t, window=16 * 1024, timeout=0.2)
        assert t.config_read(4, 2) & 4
        c.copy_in(DST, b"1234")
        t.config_write(4, 2, t.config_read(4, 2) & ~4)
        with pytest.raises(DeviceTimeout, match="did not signal fence"):
            c.copy_in(DST, b"5678")
        assert "bus mastering is off" in t.iommu.faults[-1]
        assert t.board.vram.read(DST, 4) == b"1234"


def test_a_hung_engine_is_exit_1_with_one_line() -> None:
    _boot()
    r = run("--device", "mock:navi31,sdma=hang", "--json", "bench", "copy", "--path", "dma", "--sizes", "4K")
    assert r.code == 1 and r.no_result
    line = _one_error_line(r.err)
    assert "did not signal fence 1" in line and "hung copy engine" in line and "am reset" in line
    assert run("--device", "mock:navi31", "bench", "copy", "--path", "dma", "--sizes", "4K").code == 0
