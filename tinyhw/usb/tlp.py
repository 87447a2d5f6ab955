"""TLP encoding and completion decoding for the bridge's 0xF0 requests (asm24-usb-bridge.md §5).

Pure functions: no USB here, so they are unit-tested from byte strings.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from tinyhw.errors import Refused

# Fmt/Type bytes (§5.1)
MRD32, MRD64, MWR32, MWR64 = 0x00, 0x20, 0x40, 0x60
CFG0_RD, CFG0_WR, CFG1_RD, CFG1_WR = 0x04, 0x44, 0x05, 0x45

# 0xF0 modes (wIndex bits 1:0)
MODE_SINGLE, MODE_STREAM_WRITE, MODE_STREAM_READ = 0, 1, 2

# completion status codes (§5.5)
CPL_SC, CPL_UR, CPL_CRS, CPL_CA = 0b000, 0b001, 0b010, 0b100
CPL_NAMES = {CPL_SC: "successful", CPL_UR: "unsupported request", CPL_CRS: "configuration request retry",
             CPL_CA: "completer abort"}

# firmware result byte (§5.5 byte 7)
RESULT_OK, RESULT_ENGINE_ERROR, RESULT_NO_COMPLETION = 0, 1, 0xFF


def has_completion(fmt_type: int) -> bool:
    """True for non-posted requests: everything except memory writes and messages (§5.1 rule)."""
    return not ((fmt_type & 0xDF) == 0x40 or (fmt_type & 0xB8) == 0x30)


def byte_enables(address: int, size: int) -> tuple[int, int]:
    """(dword-aligned address, first-DW byte-enable mask) for an access of ``size`` bytes (§5.3)."""
    if size not in (1, 2, 3, 4):
        raise Refused(f"tlp access size {size} is not 1..4 bytes")
    offset = address & 3
    if offset + size > 4:
        raise Refused(f"tlp access of {size} bytes at 0x{address:x} crosses a dword boundary")
    return address & ~3, ((1 << size) - 1) << offset


def config_address(bus: int, dev: int, fn: int, reg: int) -> int:
    """The config address word (§5.2); register bits 1:0 are expressed by byte enables."""
    if not (0 <= bus < 256 and 0 <= dev < 32 and 0 <= fn < 8 and 0 <= reg < 4096):
        raise Refused(f"config address out of range: bus {bus} dev {dev} fn {fn} reg 0x{reg:x}")
    return (bus << 24) | (dev << 19) | (fn << 16) | (reg & 0xFFC)


def setup_packet(fmt_type: int, be: int, mode: int, address: int, value: int) -> tuple[int, int, bytes]:
    """wValue, wIndex and the 12 data bytes of a 0xF0 OUT request (§4.1)."""
    if not 0 < be <= 0xF:
        raise Refused(f"invalid byte-enable mask 0x{be:x}")
    w_value = (fmt_type & 0xFF) | (be << 8)
    data = struct.pack("<III", address & 0xFFFFFFFF, (address >> 32) & 0xFFFFFFFF, value & 0xFFFFFFFF)
    return w_value, mode, data


def lane_value(value: int, address: int, size: int) -> int:
    """Shift a write value into its byte lanes (§5.3)."""
    return (value & ((1 << (8 * size)) - 1)) << (8 * (address & 3))


def extract_lanes(dword: int, address: int, size: int) -> int:
    """Take ``size`` bytes at ``address``'s offset out of a completion dword (§5.3)."""
    return (dword >> (8 * (address & 3))) & ((1 << (8 * size)) - 1)


@dataclass(frozen=True)
class Completion:
    """The 8-byte 0xF0 IN record (§5.5)."""

    data: int
    status: int
    byte_count: int
    with_data: bool
    result: int

    @property
    def status_name(self) -> str:
        """The completion status in words ("successful", "unsupported request", "configuration request retry",
        "completer abort"), or "reserved status 0bNNN"."""
        return CPL_NAMES.get(self.status, f"reserved status {self.status:#05b}")


def parse_completion(record: bytes) -> Completion:
    """Decode the 8-byte 0xF0 IN record (data, completion status, byte count, with-data flag, firmware result byte);
    raises Refused for any other length."""
    if len(record) != 8:
        raise Refused(f"completion record must be 8 bytes, got {len(record)}")
    data = int.from_bytes(record[0:4], "little")
    header = (record[4] << 8) | record[5]
    return Completion(
        data=data,
        status=(header >> 13) & 0x7,
        byte_count=header & 0xFFF,
        with_data=bool(record[6] & 1),
        result=record[7],
    )
