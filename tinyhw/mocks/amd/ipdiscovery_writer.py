"""Writes AMD IP discovery binaries for the emulated boards (the emulator's side of the format).

Spec: specs/amd-bringup.md §2 (own restatement of the kernel's ``discovery.h``): §2.2 the 60-byte binary
header (signature 0x28211407, version, 16-bit byte-sum checksum of everything after the checksum field,
binary_size, six 8-byte table_info slots), §2.3 the 80-byte IP discovery header ("IPDS", version, size, id,
num_dies, 16 die_info slots, then the v4 flag byte whose bit 0 says bases are 64-bit), §2.4 die headers
(die_id, num_ips) each followed by 8-byte IP entries with 4- or 8-byte bases, §2.7 the harvest table
("HARV", version, 32 four-byte slots). Every offset is from the start of the binary header.

This is the writer only; the parser lives in :mod:`tinyhw.formats.ipdiscovery` and is tested against
hand-written byte fixtures (tests/data/ipdiscovery/), so writer and parser cannot share a misreading.
The one fact taken from the parser's module is the §2.6 hw_id table (a vendor fact, not format code).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tinyhw.formats.ipdiscovery import BLOCK_HW_IDS

SIGNATURE = 0x28211407
IPDS = 0x53445049  # "IPDS" little-endian
HARV = 0x56524148  # "HARV" little-endian
HEADER = 60  # binary_header: 4+2+2+2+2 + 6 * table_info(8)
IP_HEADER = 80  # ip_discovery_header: 4+2+2+4+2 + 16 * die_info(4) + 2
DIE_SLOTS = 16
HARVEST_SLOTS = 32
TABLE_SLOTS = 6  # ip_discovery, gc, harvest_info, vcn_info, mall_info, nps_info
SLOT_IP, SLOT_HARVEST = 0, 2


def byte_sum(data: bytes) -> int:
    """The 16-bit wrapping sum of ``data`` (§2.2: how every checksum of the format is formed)."""
    return sum(data) & 0xFFFF


def _hw_id(block: str | int) -> int:
    return block if isinstance(block, int) else BLOCK_HW_IDS[block.lower()]


@dataclass(frozen=True)
class IpSpec:
    """One IP to write: ``block`` (a §2.6 name) or a raw ``hw_id``, its version and dword bases."""

    block: str | int
    version: tuple[int, int, int]
    bases: tuple[int, ...]
    instance: int = 0
    die: int = 0
    byte7: int = 0  # v1/v2: harvest nibble; v3/v4: sub_revision (low nibble), variant (high nibble)

    @property
    def hw_id(self) -> int:
        """The IP block's hardware id in the discovery table (the block's name looked up in the hw id table, or the
        number given)."""
        return _hw_id(self.block)


def _ip_table(ips: list[IpSpec], version: int, wide: bool, at: int) -> bytes:
    """The IP discovery table (§2.3-2.4) as it sits at byte ``at`` of the binary."""
    dies = sorted({ip.die for ip in ips}) or [0]
    if len(dies) > DIE_SLOTS:
        raise ValueError(f"at most {DIE_SLOTS} dies")
    fmt = "Q" if wide else "I"
    body = bytearray()
    slots = bytearray()
    for die in dies:
        mine = [ip for ip in ips if ip.die == die]
        slots += struct.pack("<HH", die, at + IP_HEADER + len(body))
        body += struct.pack("<HH", die, len(mine))
        for ip in mine:
            body += struct.pack("<HBB3BB", ip.hw_id, ip.instance, len(ip.bases), *ip.version, ip.byte7)
            body += struct.pack(f"<{len(ip.bases)}{fmt}", *ip.bases)
    slots += bytes(4 * DIE_SLOTS - len(slots))
    size = IP_HEADER + len(body)
    head = struct.pack("<IHHIH", IPDS, version, size, 0, len(dies)) + bytes(slots) + bytes([int(wide), 0])
    return head + bytes(body)


def _harvest_table(harvest: Sequence[tuple[str | int, int]]) -> bytes:
    if len(harvest) > HARVEST_SLOTS:
        raise ValueError(f"at most {HARVEST_SLOTS} harvest entries")
    out = struct.pack("<II", HARV, 0) + b"".join(struct.pack("<HBB", _hw_id(b), inst, 0) for b, inst in harvest)
    return out + bytes(8 + 4 * HARVEST_SLOTS - len(out))


def build_discovery(
    ips: Iterable[IpSpec],
    *,
    ip_version: int = 4,
    bases_64bit: bool = False,
    harvest: Sequence[tuple[str | int, int]] = (),
    extra_tables: Mapping[int, bytes] | None = None,
    binary_version: tuple[int, int] = (1, 0),
    pad_to: int = 0,
) -> bytes:
    """A discovery binary: the IP table, then the harvest table if ``harvest``, then ``extra_tables``.

    ``extra_tables`` maps a table_list slot (1 gc, 3 vcn_info, 4 mall_info, 5 nps_info) to the complete
    bytes of that table; its checksum and size are filled in. ``bases_64bit`` needs ``ip_version`` 4.
    ``pad_to`` appends zeros after the binary (what a read of the full 10 KiB returns); the checksums
    cover binary_size only.
    """
    if bases_64bit and ip_version < 4:
        raise ValueError("64-bit bases need ip discovery version 4")
    tables: dict[int, bytes] = {SLOT_IP: _ip_table(list(ips), ip_version, bases_64bit, HEADER)}
    if harvest:
        tables[SLOT_HARVEST] = _harvest_table(harvest)
    for slot, table in (extra_tables or {}).items():
        if slot in (SLOT_IP, SLOT_HARVEST) or not 0 <= slot < TABLE_SLOTS:
            raise ValueError(f"extra table slot {slot} is not one of 1, 3, 4, 5")
        tables[slot] = table
    body = bytearray()
    slots = bytearray(8 * TABLE_SLOTS)
    for slot in sorted(tables):
        table = tables[slot]
        struct.pack_into("<HHHH", slots, 8 * slot, HEADER + len(body), byte_sum(table), len(table), 0)
        body += table
    size = HEADER + len(body)
    after_checksum = struct.pack("<H", size) + bytes(slots) + bytes(body)
    out = struct.pack("<IHHH", SIGNATURE, *binary_version, byte_sum(after_checksum)) + after_checksum
    return out + bytes(max(0, pad_to - len(out)))
