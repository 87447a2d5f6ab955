"""The emulated ASM24 bridge's TLP engine and PCIe hierarchy, through real pyusb control transfers.

Spec: specs/asm24-usb-bridge.md §4.3, §5 (Fmt/Type, byte enables, completion record), §7.1
(engine registers), §8 (enumeration and BAR assignment), §12 items 5-7.
"""

from __future__ import annotations

import pytest

from tests.mocks.bridge.test_mock_asm24 import (
    StubGpu,
    cfg_addr,
    cfg_read,
    cfg_write,
    enumerate_gpu,
    open_bridge,
    parse_record,
    program_bridges,
    tlp_completion,
    tlp_request,
    xdata_read,
)
from tinyhw.mocks.bridge.asm24_tlp import POISON

UR, CRS, CA = 1, 2, 4


def test_config_type0_reaches_bus0_on_every_device_number() -> None:
    dev, _, _ = open_bridge()
    for d in (0, 5, 31):
        data, status, count, cpld, result = cfg_read(dev, 0, d, 0, 0)
        assert (data, status, count, cpld, result) == (0x24641B21, 0, 4, True, 0)
    assert cfg_read(dev, 0, 0, 0, 0x0C)[0] >> 16 & 0x7F == 1  # header type 1: a bridge
    assert cfg_read(dev, 0, 0, 1, 0)[1] == UR  # function 1 is absent


def test_type1_is_ur_until_bridges_are_programmed() -> None:
    dev, _, _ = open_bridge()
    data, status, _, cpld, result = cfg_read(dev, 1, 0, 0, 0)
    assert (status, cpld, result, data) == (UR, False, 0, POISON)
    assert cfg_read(dev, 4, 0, 0, 0)[1] == UR
    program_bridges(dev)
    assert cfg_read(dev, 1, 0, 0, 0)[:2] == (0x24641B21, 0)
    assert cfg_read(dev, 2, 0, 0, 0)[:2] == (0x14781002, 0)
    assert cfg_read(dev, 3, 0, 0, 0)[:2] == (0x14791002, 0)
    assert cfg_read(dev, 4, 0, 0, 0)[:2] == (0x744C1002, 0)
    assert cfg_read(dev, 4, 1, 0, 0)[1] == UR  # one device per link
    assert cfg_read(dev, 4, 0, 1, 0)[1] == UR
    assert cfg_read(dev, 5, 0, 0, 0)[1] == UR  # beyond the subordinate bus


def test_hop_by_hop_routing_needs_each_bridge() -> None:
    dev, _, _ = open_bridge()
    cfg_write(dev, (0, 0, 0), 0x18, 1 << 8 | 4 << 16)
    assert cfg_read(dev, 1, 0, 0, 0)[1] == 0
    assert cfg_read(dev, 2, 0, 0, 0)[1] == UR  # bridge on bus 1 still has no bus numbers
    assert cfg_read(dev, 0, 0, 0, 0x18)[0] == 0x00040100


def test_config_write_completion_and_byte_lanes() -> None:
    dev, _, _ = open_bridge()
    data, status, count, cpld, result = cfg_write(dev, (0, 0, 0), 0x19, 0x07, size=1)
    assert (status, count, cpld, result) == (0, 4, False, 0)
    assert data == 0x07 << 8  # a Cpl carries no data: bytes 0-3 still hold the written dword
    assert cfg_read(dev, 0, 0, 0, 0x18)[0] == 0x00000700
    cfg_write(dev, (0, 0, 0), 0x0E, 0xFF, size=1)  # header type is read-only
    assert cfg_read(dev, 0, 0, 0, 0x0C)[0] >> 16 & 0xFF == 1


def test_engine_registers_reflect_the_last_tlp() -> None:
    dev, _, _ = open_bridge()
    tlp_request(dev, 0x44, 0x3, cfg_addr(0, 0, 0, 0x20), 0xABCD)
    assert xdata_read(dev, 0xB210, 1) == b"\x44" and xdata_read(dev, 0xB217, 1) == b"\x03"
    assert xdata_read(dev, 0xB218, 8) == bytes.fromhex("0000002000000000")
    assert xdata_read(dev, 0xB220, 4) == bytes.fromhex("0000abcd")
    assert xdata_read(dev, 0xB296, 1) == b"\x02"  # complete
    tlp_completion(dev)
    tlp_request(dev, 0x04, 0xF, cfg_addr(0, 0, 0, 0), 0)
    assert xdata_read(dev, 0xB220, 4) == bytes.fromhex("24641b21") and xdata_read(dev, 0xB22A, 2) == b"\x00\x04"
    assert xdata_read(dev, 0xB284, 1) == b"\x01"


def test_completion_only_after_non_posted_request() -> None:
    dev, _, clock = open_bridge()
    t0 = clock.now()
    assert tlp_completion(dev) == bytes(7) + b"\xff"  # nothing was requested: the firmware polls out
    assert clock.now() - t0 >= 0.05
    tlp_request(dev, 0x60, 0xF, 0x1000, 1)  # posted write: no completion
    assert tlp_completion(dev)[7] == 0xFF
    tlp_request(dev, 0x34, 0x0, 0, 0)  # message: posted
    assert tlp_completion(dev)[7] == 0xFF
    cfg_read(dev, 0, 0, 0, 0)
    assert parse_record(tlp_completion(dev))[:2] == (0x24641B21, 0)  # the record stays until the next 0xF0 OUT


def test_bar_sizing_and_memory_single_tlps() -> None:
    gpu = StubGpu()
    dev, bridge, _ = open_bridge(gpu)
    bars = enumerate_gpu(dev)
    assert bars == {0: (0x8_0000_0000, 256 << 20), 2: (0x8_1000_0000, 2 << 20), 5: (0x10000000, 1 << 20)}
    tlp_request(dev, 0x60, 0xF, 0x10000000 + 0x40, 0x12345678)  # posted 64-bit-format write into BAR5
    assert gpu.mem[(5, 0x40)] == 0x12345678
    tlp_request(dev, 0x40, 0x4, 0x10000000 + 0x40, 0xAB << 16)  # 32-bit format, one byte lane
    assert gpu.mem[(5, 0x40)] == 0x12AB5678
    tlp_request(dev, 0x20, 0xF, 0x8_0000_0000 + 0x100, 0)
    gpu.mem[(0, 0x100)] = 0xCAFEF00D
    tlp_request(dev, 0x20, 0xF, 0x8_0000_0000 + 0x100, 0)
    assert parse_record(tlp_completion(dev)) == (0xCAFEF00D, 0, 4, True, 0)
    tlp_request(dev, 0x00, 0x6, 0x10000000 + 0x40, 0)  # 32-bit read of two middle bytes
    data, status, count, cpld, _ = parse_record(tlp_completion(dev))
    assert (data, status, count, cpld) == (0x12AB5678, 0, 2, True)
    assert bridge.stats()["tlp_reads"] >= 3 and bridge.stats()["config_reads"] > 0


def test_memory_ur_outside_bars_windows_or_decode() -> None:
    gpu = StubGpu()
    dev, _, _ = open_bridge(gpu)
    tlp_request(dev, 0x20, 0xF, 0x10000000, 0)
    assert parse_record(tlp_completion(dev))[1] == UR  # nothing assigned yet
    enumerate_gpu(dev)
    for addr in (0x10000000 + (1 << 20), 0x0800_0000, 0x7_FFFF_F000):  # past BAR5, below/outside windows
        tlp_request(dev, 0x20, 0xF, addr, 0)
        data, status, _, cpld, result = parse_record(tlp_completion(dev))
        assert (status, cpld, result, data) == (UR, False, 0, POISON)
    cfg_write(dev, (1, 0, 0), 0x04, 0x05, size=1)  # memory enable off on one bridge
    tlp_request(dev, 0x20, 0xF, 0x10000000, 0)
    assert parse_record(tlp_completion(dev))[1] == UR
    cfg_write(dev, (1, 0, 0), 0x04, 0x07, size=1)
    cfg_write(dev, (4, 0, 0), 0x04, 0x00, size=1)  # the GPU's own decode off
    tlp_request(dev, 0x20, 0xF, 0x10000000, 0)
    assert parse_record(tlp_completion(dev))[1] == UR


def test_malformed_byte_enables_are_ur() -> None:
    dev, _, _ = open_bridge()
    tlp_request(dev, 0x04, 0x1F, cfg_addr(0, 0, 0, 0), 0)
    assert parse_record(tlp_completion(dev))[1] == UR


@pytest.mark.parametrize(("fault", "status", "result"), [
    ("ur", UR, 0), ("ca", CA, 0), ("crs", CRS, 0), ("tlp-error", 0, 1), ("tlp-timeout", 0, 0xFF)])
def test_tlp_faults_hit_the_first_non_posted_request_from_transfer_n(fault: str, status: int, result: int) -> None:
    dev, bridge, _ = open_bridge(faults=f"{fault}@3")
    cfg_read(dev, 0, 0, 0, 0)  # transfers 1, 2
    tlp_request(dev, 0x60, 0xF, 0x1000, 0)  # transfer 3: posted, not affected
    rec = cfg_read(dev, 0, 0, 0, 0)  # transfers 4, 5: hit
    assert (rec[1], rec[4]) == (status, result)
    if result:
        assert rec[:4] == (0, 0, 0, False)  # no completion fields without result 0
    assert cfg_read(dev, 0, 0, 0, 0)[:2] == (0x24641B21, 0)  # once only
    assert bridge.stats()["usb_transfers"] == 7


def test_faulted_config_write_is_not_performed() -> None:
    dev, bridge, _ = open_bridge(faults="crs@1")
    assert cfg_write(dev, (0, 0, 0), 0x18, 0x00040100)[1] == CRS
    assert bridge.hierarchy.bridges[0].secondary == 0


def test_bridge_pcie_capability_and_secondary_bus_reset() -> None:
    gpu = StubGpu()
    dev, _, _ = open_bridge(gpu)
    enumerate_gpu(dev)
    assert cfg_read(dev, 3, 0, 0, 0x34)[0] & 0xFF == 0x80
    hdr = cfg_read(dev, 3, 0, 0, 0x80)[0]
    assert hdr & 0xFF == 0x10 and hdr >> 20 & 0xF == 6  # PCI Express capability, downstream port
    assert cfg_read(dev, 3, 0, 0, 0x90)[0] >> 16 & 0x3FF == 0x43  # link status: Gen3 x4
    cfg_write(dev, (3, 0, 0), 0x90, 0x23, size=2)  # ASPM bits + retrain
    assert cfg_read(dev, 3, 0, 0, 0x90)[0] & 0xFFFF == 0x03  # retrain self-clears
    cfg_write(dev, (3, 0, 0), 0xB0, 0x1, size=2)
    assert cfg_read(dev, 3, 0, 0, 0xB0)[0] & 0xF == 1  # link control 2 target speed
    cfg_write(dev, (1, 0, 0), 0x3E, 0x40, size=2)  # secondary bus reset below bus 1
    assert gpu.resets == 1 and gpu.command == 0
    assert cfg_read(dev, 2, 0, 0, 0)[1] == 0 and cfg_read(dev, 3, 0, 0, 0)[1] == UR  # bus 2 lost its numbers
