"""The IP discovery parser (tinyhw.formats.ipdiscovery) on binaries from the emulator's writer (amd-bringup.md §2;
the hand-written byte fixtures are in test_formats_ipdiscovery_bytes.py),
and properties: random and mutated bytes never crash it, and every change of a covered byte is noticed."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.formats.ipdiscovery import (
    BINARY_SIGNATURE,
    HW_IDS,
    READ_SIZE,
    checksum16,
    parse,
)
from tinyhw.mocks.amd.ipdiscovery_writer import IpSpec, build_discovery

NAVI31_LIKE = [
    IpSpec("gc", (11, 0, 0), (0x1260, 0xA000, 0x1C000, 0x2402C00)),
    IpSpec("mp0", (13, 0, 0), (0x16000, 0xDC0000)),
    IpSpec("smuio", (13, 0, 6), (0x16800, 0x16A00)),
    IpSpec("nbio", (4, 3, 0), (0x0, 0x14, 0xD20)),
    IpSpec(999, (1, 2, 3), (0x1234,)),  # an unknown hw_id is kept, without a block name
]


def test_one_die_32bit_bases() -> None:
    blob = build_discovery(NAVI31_LIKE, ip_version=3, pad_to=READ_SIZE)
    assert len(blob) == READ_SIZE and struct.unpack_from("<I", blob)[0] == BINARY_SIGNATURE
    d = parse(blob)
    assert d.ok, d.problems
    assert d.ip_version == 3 and not d.bases_64bit and [die.die_id for die in d.dies] == [0]
    assert d.versions() == {"gc": (11, 0, 0), "mp0": (13, 0, 0), "smuio": (13, 0, 6), "nbio": (4, 3, 0)}
    assert d.bases("gc") == (0x1260, 0xA000, 0x1C000, 0x2402C00) and d.bases("NBIO") == (0, 0x14, 0xD20)
    assert d.ips[-1].hw_id == 999 and d.ips[-1].block is None and d.ips[-1].version_text == "1.2.3"
    assert d.gfx_target == "gfx1100" and d.xcc_count == 1 and d.harvest == []
    assert d.tables[0].name == "ip_discovery" and d.tables[0].offset == 60


def test_two_dies_64bit_bases_and_harvest() -> None:
    ips = [
        IpSpec("gc", (9, 4, 3), (0x1260, 0xA000), instance=0, die=0),
        IpSpec("gc", (9, 4, 3), (0x1_0000_1260, 0xA000), instance=1, die=0),
        IpSpec("gc", (9, 4, 3), (0x2_0000_1260,), instance=2, die=1),
        IpSpec("sdma3", (4, 4, 2), (0xFFFF_FFFF_FFFF,), die=1),
    ]
    d = parse(build_discovery(ips, bases_64bit=True, harvest=[("gc", 1), (77, 0)]))
    assert d.ok, d.problems
    assert d.bases_64bit and [(x.die_id, x.num_ips) for x in d.dies] == [(0, 2), (1, 2)]
    assert d.bases_of()["gc"] == {0: (0x1260, 0xA000), 1: (0x1_0000_1260, 0xA000), 2: (0x2_0000_1260,)}
    assert d.bases("sdma3") == (0xFFFF_FFFF_FFFF,) and d.ips[3].die == 1
    assert d.harvested() == {"gc": {1}, "hw_id 77": {0}}
    assert d.xcc_count == 2 and d.gfx_target == "gfx942"


def test_64bit_bases_need_v4_and_the_flag_is_ignored_before_v4() -> None:
    with pytest.raises(ValueError):
        build_discovery(NAVI31_LIKE, ip_version=3, bases_64bit=True)
    blob = bytearray(build_discovery(NAVI31_LIKE, ip_version=2))
    blob[60 + 78] = 1  # the flag byte; a v2 table has 4-byte bases whatever it says
    d = parse(_fix_checksums(bytes(blob)))
    assert d.ok and not d.bases_64bit and d.bases("gc") == NAVI31_LIKE[0].bases


def test_last_entry_of_an_instance_wins() -> None:
    d = parse(build_discovery([IpSpec("hdp", (5, 0, 0), (1,)), IpSpec("hdp", (6, 0, 0), (2,))]))
    assert d.bases("hdp") == (2,) and d.versions()["hdp"] == (6, 0, 0) and len(d.ips) == 2


def test_bad_binary_signature() -> None:
    blob = bytearray(build_discovery(NAVI31_LIKE))
    blob[0] ^= 0xFF
    d = parse(bytes(blob))
    assert not d.ok and d.problems[0].offset == 0 and "binary signature 0x28211407 expected" in d.problems[0].message
    assert d.ips == []


def test_bad_binary_checksum_names_the_rule() -> None:
    blob = bytearray(build_discovery(NAVI31_LIKE))
    blob[-1] ^= 1  # last base byte: binary and ip table checksums both change
    d = parse(bytes(blob))
    assert [p.offset for p in d.problems] == [8, 14]
    assert "binary checksum" in d.problems[0].message and "ip_discovery table checksum" in d.problems[1].message


def test_bad_table_signature_and_bad_harvest_signature() -> None:
    blob = bytearray(build_discovery(NAVI31_LIKE, harvest=[("gc", 0)]))
    blob[60] ^= 0xFF
    d = parse(_fix_checksums(bytes(blob)))
    assert any(p.offset == 60 and "ip discovery signature" in p.message for p in d.problems)
    blob = bytearray(build_discovery(NAVI31_LIKE, harvest=[("gc", 0)]))
    hoff = struct.unpack_from("<H", blob, 28)[0]
    blob[hoff] ^= 0xFF
    d = parse(_fix_checksums(bytes(blob)))
    assert [p.offset for p in d.problems] == [hoff] and d.bases("gc") is not None


def test_binary_size_larger_than_the_read() -> None:
    blob = build_discovery(NAVI31_LIKE)
    d = parse(blob[:100])
    assert not d.ok and d.problems[0].offset == 10 and "binary_size" in d.problems[0].message


def test_truncated_and_empty_inputs() -> None:
    assert "binary header" in parse(b"").problems[0].message
    assert not parse(b"\x07\x14\x21\x28").ok


def test_hw_id_names_cover_the_profile_blocks() -> None:
    for block in ("smuio", "mp0", "mp1", "gc", "nbio", "mmhub", "osssys", "hdp", "sdma0", "athub", "df", "umc", "vcn"):
        assert block in HW_IDS.values()
    assert HW_IDS[108] == "nbio" and HW_IDS[255] == "mp0" and HW_IDS[1] == "mp1"


def _fix_checksums(blob: bytes) -> bytes:
    """Recompute the table and binary checksums after a deliberate edit (so only the edit is wrong)."""
    out = bytearray(blob)
    for i in (0, 2):
        off, _c, size, _p = struct.unpack_from("<HHHH", out, 12 + 8 * i)
        if i == 0 and off:
            size = struct.unpack_from("<H", out, off + 6)[0]
        if off:
            struct.pack_into("<H", out, 12 + 8 * i + 2, checksum16(out[off:off + size]))
    size = struct.unpack_from("<H", out, 10)[0]
    struct.pack_into("<H", out, 8, checksum16(out[10:size]))
    return bytes(out)


# -- properties ------------------------------------------------------------------------------------------------

_ip = st.builds(
    IpSpec,
    block=st.sampled_from(sorted(HW_IDS.values())),
    version=st.tuples(st.integers(0, 255), st.integers(0, 255), st.integers(0, 255)),
    bases=st.lists(st.integers(0, 0xFFFF_FFFF), max_size=6).map(tuple),
    instance=st.integers(0, 3),
    die=st.integers(0, 2),
)


@settings(max_examples=150, deadline=None)
@given(st.binary(max_size=600))
def test_random_bytes_never_crash(data: bytes) -> None:
    d = parse(data)
    assert isinstance(d.problems, list) and (d.ok or all(p.message for p in d.problems))


@settings(max_examples=150, deadline=None)
@given(st.lists(_ip, max_size=12), st.booleans(), st.data())
def test_round_trip_and_mutations_are_noticed(ips: list[IpSpec], wide: bool, data: st.DataObject) -> None:
    blob = build_discovery(ips, bases_64bit=wide, harvest=[("gc", 1)] if ips else ())
    d = parse(blob)
    assert d.ok, d.problems
    assert [(ip.hw_id, ip.instance, ip.version, ip.bases, ip.die) for ip in d.ips] == [
        (s.hw_id, s.instance, s.version, s.bases, s.die) for s in sorted(ips, key=lambda s: s.die)
    ]
    pos = data.draw(st.integers(0, len(blob) - 1))
    flip = data.draw(st.integers(1, 255))
    mutated = bytearray(blob)
    mutated[pos] ^= flip
    m = parse(bytes(mutated))  # never raises
    if pos >= 10:  # a byte the binary checksum covers: always noticed
        assert not m.ok
    cut = data.draw(st.integers(0, len(blob)))
    parse(blob[:cut])
