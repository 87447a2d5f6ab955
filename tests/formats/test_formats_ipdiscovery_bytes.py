"""The IP discovery parser on byte fixtures written by hand from the kernel's discovery.h layout.

The fixtures (tests/data/ipdiscovery/*.hex, annotated field by field) were not produced by tinyhw's writer,
so a misreading of the layout shared by parser and writer (tinyhw.mocks.amd.ipdiscovery_writer) shows up here
instead of cancelling itself out. The writer is then checked to reproduce the same bytes.
"""

from __future__ import annotations

import pytest
from testpaths import DATA as TEST_DATA

from tinyhw.formats.ipdiscovery import parse
from tinyhw.mocks.amd.ipdiscovery_writer import IpSpec, build_discovery

DATA = TEST_DATA / "ipdiscovery"


def load_hex(name: str) -> bytes:
    """Hex bytes with ``#`` comments; ``00*N`` is N copies of a byte."""
    out = bytearray()
    for line in (DATA / name).read_text().splitlines():
        for token in line.split("#")[0].split():
            byte, _, count = token.partition("*")
            out += bytes([int(byte, 16)]) * (int(count) if count else 1)
    return bytes(out)


def test_one_die_v4_with_harvest_table() -> None:
    blob = load_hex("v4_one_die_harvest.hex")
    assert len(blob) == 0x144
    d = parse(blob)
    assert d.ok, d.problems
    assert d.version == (1, 0) and d.size == 0x144 and d.checksum == 0x0A9D
    assert [(t.name, t.offset, t.checksum, t.size) for t in d.tables if t.offset] == [
        ("ip_discovery", 0x3C, 0x05EB, 0x80), ("harvest_info", 0xBC, 0x013E, 0x88)]
    assert d.ip_version == 4 and not d.bases_64bit
    assert [(x.die_id, x.offset, x.num_ips) for x in d.dies] == [(0, 0x8C, 3)]
    assert [(i.hw_id, i.instance, i.version, i.byte7, i.bases, i.offset) for i in d.ips] == [
        (11, 0, (11, 0, 0), 0x00, (0x1260, 0xA000), 0x90),
        (255, 0, (13, 0, 0), 0x00, (0x16000,), 0xA0),
        (4, 1, (13, 0, 6), 0x21, (0x16800, 0x16A00), 0xAC),
    ]
    assert [i.block for i in d.ips] == ["gc", "mp0", "smuio"]
    assert d.bases("smuio", 1) == (0x16800, 0x16A00) and d.bases("smuio", 0) is None
    assert d.harvested() == {"vcn": {1}}
    assert d.gfx_target == "gfx1100"


def test_two_dies_64bit_bases() -> None:
    d = parse(load_hex("v4_two_dies_64bit.hex"))
    assert d.ok, d.problems
    assert d.version == (1, 2) and d.size == 0xBC
    assert d.ip_version == 4 and d.bases_64bit
    assert [(x.die_id, x.offset, x.num_ips) for x in d.dies] == [(0, 0x8C, 1), (1, 0xA0, 1)]
    assert [(i.die, i.instance, i.bases) for i in d.ips] == [
        (0, 0, (0x1_0000_1260,)), (1, 1, (0x2_0000_1260, 0xA000))]
    assert d.gfx_target == "gfx942" and d.xcc_count == 2 and d.harvest == []


@pytest.mark.parametrize("name", ["v4_one_die_harvest.hex", "v4_two_dies_64bit.hex"])
def test_every_covered_byte_is_checked(name: str) -> None:
    """Changing any byte after the checksum field, inside binary_size, is reported."""
    blob = load_hex(name)
    for pos in range(10, len(blob)):
        mutated = bytearray(blob)
        mutated[pos] ^= 0x40
        assert not parse(bytes(mutated)).ok, hex(pos)


def test_the_emulators_writer_reproduces_the_hand_written_bytes() -> None:
    one = build_discovery([
        IpSpec("gc", (11, 0, 0), (0x1260, 0xA000)),
        IpSpec("mp0", (13, 0, 0), (0x16000,)),
        IpSpec("smuio", (13, 0, 6), (0x16800, 0x16A00), instance=1, byte7=0x21),
    ], ip_version=4, harvest=[("vcn", 1)])
    assert one == load_hex("v4_one_die_harvest.hex")
    two = build_discovery([
        IpSpec("gc", (9, 4, 3), (0x1_0000_1260,), instance=0, die=0),
        IpSpec("gc", (9, 4, 3), (0x2_0000_1260, 0xA000), instance=1, die=1),
    ], ip_version=4, bases_64bit=True, binary_version=(1, 2))
    assert two == load_hex("v4_two_dies_64bit.hex")
