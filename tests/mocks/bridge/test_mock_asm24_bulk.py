"""The emulated ASM24 bridge's bulk paths through real pyusb transfers: 0xF0 streams and the 0xF2 engine.

Spec: specs/asm24-usb-bridge.md §4.5, §6, §9.3-§9.4 (how the copy paths use the engine), §10 #7-#9
and #16, §12 items 8, 9, 13, 14.
"""

from __future__ import annotations

import struct

import pytest
import usb.core

from tests.mocks.bridge.test_mock_asm24 import (
    StubGpu,
    enumerate_gpu,
    open_bridge,
    parse_record,
    tlp_completion,
    tlp_request,
    xdata_read,
)
from tinyhw.mocks.bridge.asm24_tlp import POISON

BAR0 = 0x8_0000_0000
BAR5 = 0x10000000


def stream_write(dev: usb.core.Device, addr: int, data: bytes, timeout: int = 1000) -> int:
    tlp_request(dev, 0x60, 0xF, addr, len(data) // 4, mode=1)
    return dev.write(0x02, data, timeout=timeout)


def stream_read(dev: usb.core.Device, addr: int, n: int, timeout: int = 30000) -> bytes:
    tlp_request(dev, 0x20, 0xF, addr, n // 4, mode=2)
    return bytes(dev.read(0x81, n, timeout=timeout))


def sram_dma_arm(dev: usb.core.Device, to_host: bool, length: int, slot: int = 0) -> None:
    """Vendor request 0xF2: arm the SRAM DMA engine for ``length`` bytes, host -> SRAM from ``slot`` or SRAM -> host."""
    sectors = -(-length // 512)
    slots = -(-length // 0x4000)
    dev.ctrl_transfer(0x40, 0xF2, (0x8000 if to_host else 0) | sectors, slot | slots << 8, None, timeout=1000)


@pytest.fixture
def gpu_dev() -> tuple[StubGpu, usb.core.Device, object, object]:
    gpu = StubGpu()
    dev, bridge, clock = open_bridge(gpu)
    enumerate_gpu(dev)
    return gpu, dev, bridge, clock


# -- streams (§6) -------------------------------------------------------------------------------------------

def test_stream_write_then_read_round_trip(gpu_dev: tuple) -> None:
    gpu, dev, bridge, clock = gpu_dev
    data = bytes(range(256)) * 12  # 3 KiB = 768 dwords, three packets
    before = bridge.stats()
    t0 = clock.now()
    assert stream_write(dev, BAR0 + 0x1000, data) == len(data)
    t_write = clock.now() - t0
    assert gpu.mem[(0, 0x1000)] == int.from_bytes(data[:4], "little")
    assert gpu.mem[(0, 0x1000 + len(data) - 4)] == int.from_bytes(data[-4:], "little")
    assert t_write == pytest.approx(2 * 100e-6 + len(data) / 700e6 + 768 * 1.1e-6)
    t0 = clock.now()
    assert stream_read(dev, BAR0 + 0x1000, len(data)) == data
    assert clock.now() - t0 == pytest.approx(2 * 100e-6 + len(data) / 700e6 + 768 * 2.2e-6)
    after = bridge.stats()
    assert after["tlp_writes"] - before["tlp_writes"] == 1 and after["tlp_reads"] - before["tlp_reads"] == 1
    assert after["stream_dwords_read"] - before["stream_dwords_read"] == 768
    assert xdata_read(dev, 0x8000, 4) == data[2048:2052]  # last chunk assembled at 0x8000
    assert xdata_read(dev, 0x7000, 4) == data[2048:2052]  # last write packet landed at 0x7000


def test_stream_read_outside_bars_returns_poison(gpu_dev: tuple) -> None:
    _, dev, _, _ = gpu_dev
    got = stream_read(dev, BAR5 + (1 << 20) - 8, 16)  # two dwords inside BAR5, two past its end
    assert struct.unpack("<4I", got) == (0, 0, POISON, POISON)


def test_short_last_packet_ends_the_read_and_reading_more_times_out(gpu_dev: tuple) -> None:
    _, dev, _, _ = gpu_dev
    tlp_request(dev, 0x20, 0xF, BAR0, 300, mode=2)  # 1200 bytes: 1024 + 176
    assert len(dev.read(0x81, 4096)) == 1200
    tlp_request(dev, 0x20, 0xF, BAR0, 256, mode=2)  # exactly one full packet: the host would wait for more
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 2048, timeout=100)


def test_abandoned_read_leaves_stale_data_until_halt_cleared(gpu_dev: tuple) -> None:
    gpu, dev, _, _ = gpu_dev
    for i in range(1024):
        gpu.mem[(0, 4 * i)] = 0x1000 + i
    tlp_request(dev, 0x20, 0xF, BAR0, 1024, mode=2)
    first = bytes(dev.read(0x81, 1024))
    assert struct.unpack_from("<I", first)[0] == 0x1000
    gpu.mem[(5, 0)] = 0x5555AAAA
    with pytest.raises(usb.core.USBError) as err:  # the prefetched 1024-byte chunk comes before the new dword
        stream_read(dev, BAR5, 4)
    assert err.value.backend_error_code == -8
    tlp_request(dev, 0x20, 0xF, BAR0, 1024, mode=2)
    dev.read(0x81, 1024)
    tlp_request(dev, 0x04, 0xF, 0, 0)  # abandon again, then recover as the firmware's tests do (§6)
    dev.clear_halt(0x02)
    dev.clear_halt(0x81)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 65536, timeout=100)  # drained
    assert stream_read(dev, BAR5, 4) == struct.pack("<I", 0x5555AAAA)


def test_stale_packet_is_read_first() -> None:
    gpu = StubGpu()
    dev, _, _ = open_bridge(gpu)
    enumerate_gpu(dev)
    for i in range(512):
        gpu.mem[(0, 4 * i)] = i
    tlp_request(dev, 0x20, 0xF, BAR0, 512, mode=2)
    dev.read(0x81, 1024)  # second chunk is prefetched now
    tlp_request(dev, 0x20, 0xF, BAR0 + 0x4000, 256, mode=2)
    stale = bytes(dev.read(0x81, 1024))
    assert struct.unpack_from("<I", stale)[0] == 256  # data of the abandoned stream, not of the new one


def test_set_configuration_and_interface_cancel_streams(gpu_dev: tuple) -> None:
    gpu, dev, _, _ = gpu_dev
    for reset in (lambda: dev.set_configuration(1), lambda: dev.set_interface_altsetting(0, 0)):
        tlp_request(dev, 0x60, 0xF, BAR0, 4, mode=1)
        reset()
        with pytest.raises(usb.core.USBTimeoutError):
            dev.write(0x02, b"\x00" * 16, timeout=100)
        tlp_request(dev, 0x20, 0xF, BAR0, 256, mode=2)
        reset()
        with pytest.raises(usb.core.USBTimeoutError):
            dev.read(0x81, 1024, timeout=100)


def test_new_f0_out_cancels_a_write_stream(gpu_dev: tuple) -> None:
    gpu, dev, _, _ = gpu_dev
    tlp_request(dev, 0x60, 0xF, BAR0, 4, mode=1)
    tlp_request(dev, 0x04, 0xF, 0, 0)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.write(0x02, b"\x01" * 16, timeout=100)
    assert (0, 0) not in gpu.mem


def test_write_overrun_drops_packet_and_stops_accepting(gpu_dev: tuple) -> None:
    gpu, dev, bridge, _ = gpu_dev
    tlp_request(dev, 0x60, 0xF, BAR0, 2, mode=1)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.write(0x02, b"\x07" * 12, timeout=100)  # 3 dwords for a count of 2
    assert (0, 0) not in gpu.mem
    with pytest.raises(usb.core.USBTimeoutError):
        dev.write(0x02, b"\x07" * 8, timeout=100)  # the endpoint no longer accepts
    tlp_request(dev, 0x60, 0xF, BAR0, 256, mode=1)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.write(0x02, b"\x01" * 2048, timeout=100)  # a full first packet lands, the second has no room
    assert gpu.mem[(0, 1020)] == 0x01010101 and "overrun" in " ".join(bridge.warnings)


def test_long_stream_write_exceeds_the_bulk_timeout(gpu_dev: tuple) -> None:
    _, dev, bridge, clock = gpu_dev
    t = bridge.timing
    per_byte = t.stream_write_dword_s / 4 + 1 / t.usb_rate["ss"]
    assert 3.4e6 < 1.0 / per_byte < 3.7e6  # §6: one streamed write beyond ~3.5 MB misses a 1 s limit
    t0 = clock.now()
    with pytest.raises(usb.core.USBTimeoutError):
        stream_write(dev, BAR0, bytes(1 << 20), timeout=250)  # ~0.29 s of 8051 time
    assert clock.now() - t0 == pytest.approx(0.25 + 100e-6)
    assert stream_write(dev, BAR0, bytes(512 << 10), timeout=250) == 512 << 10


def test_high_speed_streams_chunk_by_512() -> None:
    gpu = StubGpu()
    dev, bridge, _ = open_bridge(gpu, speed="hs")
    enumerate_gpu(dev)
    data = bytes(range(256)) * 6
    assert stream_write(dev, BAR0, data) == len(data)
    tlp_request(dev, 0x20, 0xF, BAR0, len(data) // 4, mode=2)
    assert len(bridge.endpoints.in_fifo[0][0]) == 512
    assert bytes(dev.read(0x81, len(data))) == data


def test_link_down_stream_read_setup_times_out() -> None:
    dev, _, clock = open_bridge(link="down")
    t0 = clock.now()
    with pytest.raises(usb.core.USBTimeoutError):
        tlp_request(dev, 0x20, 0xF, BAR0, 4, mode=2)
    assert clock.now() - t0 == pytest.approx(5.0)


def _enumerated_with_fault(fault: str) -> tuple[StubGpu, usb.core.Device, object, object]:
    """A bridge whose ``fault`` hits the first TLP after enumeration (enumeration is deterministic)."""
    probe_dev, probe, _ = open_bridge()
    enumerate_gpu(probe_dev)
    n = probe.stats()["usb_transfers"] + 1
    gpu = StubGpu()
    dev, bridge, clock = open_bridge(gpu, faults=f"{fault}@{n}")
    enumerate_gpu(dev)
    return gpu, dev, bridge, clock


@pytest.mark.parametrize("fault", ["ur", "ca", "tlp-error"])
def test_stream_read_ignores_completion_status(fault: str) -> None:
    gpu, dev, _, _ = _enumerated_with_fault(fault)
    gpu.mem[(0, 0)] = gpu.mem[(0, 4)] = 7
    assert struct.unpack("<2I", stream_read(dev, BAR0, 8)) == (POISON, 7)


def test_stream_read_tlp_timeout_hangs_the_setup() -> None:
    _, dev, _, clock = _enumerated_with_fault("tlp-timeout")
    t0 = clock.now()
    with pytest.raises(usb.core.USBTimeoutError):
        tlp_request(dev, 0x20, 0xF, BAR0, 8, mode=2)
    assert clock.now() - t0 == pytest.approx(5.0)
    assert stream_read(dev, BAR0, 8) == bytes(8)  # the firmware is modelled as giving the stream up


# -- the 0xF2 SRAM engine (§4.5) ---------------------------------------------------------------------------------

def test_f2_host_to_sram_lands_at_the_slot() -> None:
    dev, bridge, clock = open_bridge()
    data = bytes((i * 7) & 0xFF for i in range(1000)) + bytes(24)
    sram_dma_arm(dev, False, len(data), slot=0)
    t0 = clock.now()
    assert dev.write(0x02, data) == 1024
    assert clock.now() - t0 == pytest.approx(100e-6 + 1024 / 700e6)
    assert xdata_read(dev, 0xF000, 255) == data[:255]  # the first 4 KiB of SRAM through the 0xF000 window
    sram_dma_arm(dev, False, 512, slot=16)
    dev.write(0x02, b"\xaa" * 512)
    assert bridge.memory.sram[16 * 0x4000 : 16 * 0x4000 + 512] == b"\xaa" * 512
    assert bridge.stats()["f2_bytes_out"] == 1536


def test_f2_arms_queue_and_exact_length() -> None:
    dev, bridge, _ = open_bridge()
    sram_dma_arm(dev, False, 512, slot=1)
    sram_dma_arm(dev, False, 512, slot=3)  # accepted while the first one is still pending
    dev.write(0x02, b"\x01" * 512 + b"\x03" * 512)
    assert bridge.memory.sram[0x4000] == 1 and bridge.memory.sram[0xC000] == 3
    sram_dma_arm(dev, False, 512)
    with pytest.raises(usb.core.USBTimeoutError):
        dev.write(0x02, b"\x05" * 1024, timeout=100)  # more than armed: the rest is never taken
    assert bridge.memory.sram[511] == 5
    with pytest.raises(usb.core.USBTimeoutError):
        dev.write(0x02, b"\x05" * 512, timeout=100)  # nothing armed


def test_f2_read_is_released_only_by_a_bus_master_write() -> None:
    gpu = StubGpu()
    dev, bridge, clock = open_bridge(gpu)
    enumerate_gpu(dev)
    bridge.memory.sram[:2048] = bytes(range(256)) * 8
    sram_dma_arm(dev, True, 2048)
    t0 = clock.now()
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 2048, timeout=10000)  # unreleased: the host times out (§10 #16)
    assert clock.now() - t0 == pytest.approx(10.0)
    assert bridge.dma_write(0x820800, b"\x01" * 8)  # fence page: no release
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 2048, timeout=100)
    assert xdata_read(dev, 0xA800, 8) == b"\x01" * 8
    assert bridge.dma_write(0x82200C, bytes(4))
    assert bytes(dev.read(0x81, 2048)) == bytes(range(256)) * 8
    assert bridge.stats()["f2_bytes_in"] == 2048


def test_dma_needs_bus_master_on_the_bridges() -> None:
    dev, bridge, _ = open_bridge()
    sram_dma_arm(dev, True, 512)
    assert not bridge.dma_write(0x82200C, bytes(4))
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 512, timeout=100)


def test_f2_read_with_nonzero_first_slot_is_flagged() -> None:
    from tinyhw.errors import StrictEmulationError

    dev, _, _ = open_bridge()
    with pytest.raises(StrictEmulationError):
        sram_dma_arm(dev, True, 512, slot=5)


def test_halt_clear_cancels_pending_f2_read() -> None:
    gpu = StubGpu()
    dev, bridge, _ = open_bridge(gpu)
    enumerate_gpu(dev)
    sram_dma_arm(dev, True, 512)
    dev.clear_halt(0x81)
    bridge.dma_write(0x822000, bytes(4))
    with pytest.raises(usb.core.USBTimeoutError):
        dev.read(0x81, 512, timeout=100)


def test_single_tlp_after_stream_and_log_equality_material(gpu_dev: tuple) -> None:
    gpu, dev, bridge, _ = gpu_dev
    stream_write(dev, BAR5, struct.pack("<I", 0x11223344))
    tlp_request(dev, 0x20, 0xF, BAR5, 0)
    assert parse_record(tlp_completion(dev))[0] == 0x11223344
    kinds = [r.kind for r in bridge.log[-4:]]
    assert kinds == ["control", "bulk_out", "control", "control"]
    assert bridge.log[-3].actual == 4 and bridge.log[-3].crc32 != 0
