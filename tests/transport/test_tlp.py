"""TLP encoding and completion decoding (asm24-usb-bridge.md §5)."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tinyhw.errors import Refused
from tinyhw.usb import tlp


def test_fmt_types_with_completions() -> None:
    assert tlp.has_completion(tlp.MRD32) and tlp.has_completion(tlp.MRD64)
    assert tlp.has_completion(tlp.CFG0_RD) and tlp.has_completion(tlp.CFG1_WR) and tlp.has_completion(tlp.CFG0_WR)
    assert not tlp.has_completion(tlp.MWR32) and not tlp.has_completion(tlp.MWR64)
    assert not any(tlp.has_completion(t) for t in range(0x30, 0x38))
    assert not any(tlp.has_completion(t) for t in range(0x70, 0x78))


@pytest.mark.parametrize(("addr", "size", "aligned", "be"), [
    (0x1000, 4, 0x1000, 0x0F), (0x1001, 1, 0x1000, 0x02), (0x1002, 2, 0x1000, 0x0C), (0x1003, 1, 0x1000, 0x08),
    (0x1001, 3, 0x1000, 0x0E), (0x1000, 2, 0x1000, 0x03),
])
def test_byte_enables(addr: int, size: int, aligned: int, be: int) -> None:
    assert tlp.byte_enables(addr, size) == (aligned, be)


@pytest.mark.parametrize(("addr", "size"), [(0x1003, 2), (0x1002, 4), (0x1000, 0), (0x1000, 5)])
def test_byte_enables_refuse_crossing_or_bad_sizes(addr: int, size: int) -> None:
    with pytest.raises(Refused):
        tlp.byte_enables(addr, size)


def test_config_address_word() -> None:
    assert tlp.config_address(4, 0, 0, 0x10) == 0x0400_0010
    assert tlp.config_address(1, 31, 7, 0xFFF) == (1 << 24) | (31 << 19) | (7 << 16) | 0xFFC
    for bad in [(256, 0, 0, 0), (0, 32, 0, 0), (0, 0, 8, 0), (0, 0, 0, 4096)]:
        with pytest.raises(Refused):
            tlp.config_address(*bad)


def test_setup_packet_layout() -> None:
    w_value, w_index, data = tlp.setup_packet(tlp.MWR64, 0x0C, tlp.MODE_SINGLE, 0x12_3456_7890, 0xAABBCCDD)
    assert w_value == 0x0C60 and w_index == 0
    assert data == struct.pack("<III", 0x34567890, 0x12, 0xAABBCCDD)
    with pytest.raises(Refused):
        tlp.setup_packet(tlp.MWR64, 0, 0, 0, 0)


def test_completion_record() -> None:
    # data 0x744c1002, status UR (001 -> 0x20 in byte 4), byte count 4, CplD, result 0
    cpl = tlp.parse_completion(bytes([0x02, 0x10, 0x4C, 0x74, 0x20, 0x04, 0x01, 0x00]))
    assert cpl.data == 0x744C1002 and cpl.status == tlp.CPL_UR and cpl.byte_count == 4
    assert cpl.with_data and cpl.result == 0 and cpl.status_name == "unsupported request"
    big = tlp.parse_completion(bytes([0, 0, 0, 0, 0x4F, 0xFF, 0, 0xFF]))
    assert big.status == tlp.CPL_CRS and big.byte_count == 0xFFF and big.result == tlp.RESULT_NO_COMPLETION
    with pytest.raises(Refused):
        tlp.parse_completion(b"\0" * 7)


@given(st.integers(0, 0xFFFF_FFFF), st.integers(0, 3), st.integers(1, 4))
def test_lanes_round_trip(value: int, offset: int, size: int) -> None:
    if offset + size > 4:
        return
    v = value & ((1 << (8 * size)) - 1)
    shifted = tlp.lane_value(v, offset, size)
    assert shifted < 1 << 32
    assert tlp.extract_lanes(shifted, offset, size) == v
