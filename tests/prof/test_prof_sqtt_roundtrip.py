"""SQTT encoder → decoder round trips over every packet type of RDNA3, RDNA4 and CDNA (property-based),
and truncated/corrupted streams (never crash, say where decoding stopped).

The expected times are computed here, packet by packet, from the rules of specs/sqtt-pmc.md §5.2,
independently of the decoder's vectorised arithmetic.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testpaths import DATA as TEST_DATA

from tinyhw.formats.sqtt import decode, encode
from tinyhw.formats.sqtt_tables import CDNA, RDNA3, RDNA4, Table

DATA = TEST_DATA / "sqtt"
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
HEADER = {"rdna3": 3, "rdna4": 4, "cdna": 0}


def _packet(table: Table) -> st.SearchStrategy:
    types = [t for t in table.types if t.name != "LAYOUT_HEADER"]

    @st.composite
    def build(draw: st.DrawFn) -> tuple[str, dict[str, int]]:
        t = draw(st.sampled_from(types))
        fields = {n: draw(st.integers(0, (1 << (min(hi, 63) - lo + 1)) - 1)) for n, hi, lo in t.fields}
        if t.name == "CDNA_TIMESTAMP":
            # reserved = 0: absolute timestamp. Otherwise keep bits 6:4 != 001, which would make the low
            # byte read as LAYOUT_HEADER (spec §15 open question 4: the encoding is ambiguous there).
            fields["reserved"] = draw(st.sampled_from([0, 0, 2, 0x100, 0xFF0]))
            fields["delta"] = fields["reserved"] & 1   # bit 4: both fields
            fields["timestamp"] = draw(st.integers(1 << 20, 1 << 40))
        return t.name, fields
    return build()


def _closing_stamp(packets: list[tuple[str, dict[str, int]]], i: int) -> int | None:
    """The TIMESTAMP after the TIME_RESET at ``i``, unless another TIME_RESET comes first."""
    for j in range(i + 1, len(packets)):
        name, f = packets[j]
        if name == "CDNA_TIMESTAMP":
            return j
        if name == "CDNA_MISC" and f.get("misc_type") == 1:
            return None
    return None


def _expected_times(packets: list[tuple[str, dict[str, int]]]) -> list[int]:
    """RDNA: the spec's §5.2 rules. CDNA: AMD's gfx9 decoder's (tinyhw/formats/sqtt.py ``_cdna_times``): every
    token adds 4 x its delta (MISC 11:4, the others bit 4); a TIME_RESET (MISC type 1) re-bases the time on the
    TIMESTAMP that closes it (which adds nothing), the first one anchoring base = absolute - time + 4."""
    t, base, closing, out = 0, 0, set(), []
    for i, (name, f) in enumerate(packets):
        if name.startswith("CDNA_"):
            if i not in closing:
                t += 4 * f.get("delta", 0)
            j = _closing_stamp(packets, i) if name == "CDNA_MISC" and f.get("misc_type") == 1 else None
            if j is not None:
                closing.add(j)
                absolute = packets[j][1]["timestamp"]
                if base == 0:
                    base = absolute - t + 4
                if absolute > base:
                    t = (absolute - base) & ~3
        elif name == "TS_DELTA_SHORT":
            t += f["delta"] + 4
        elif name.startswith("TS_DELTA_OR_MARK"):
            if not (f["rt"] == 1 and f["pl"] == 0):
                t += f["delta"]
        elif "delta" in f:
            t += f["delta"]
        out.append(t)
    return out


def _roundtrip(arch: str, table: Table, body: list[tuple[str, dict[str, int]]]) -> None:
    header = ("LAYOUT_HEADER", {"layout": HEADER[arch], "sel_a": 6})
    packets = [header, *body]
    data = encode(packets, table=table)
    assert len(data) % 32 == 0
    t = decode(data)
    assert t.arch == arch and t.stop_reason == "end"
    assert len(t) >= len(packets)
    assert [t.name(i) for i in range(len(packets))] == [n for n, _ in packets]
    for i, (name, fields) in enumerate(packets):
        typ = next(x for x in table.types if x.name == name)
        # fields may overlap (REG: slot 9:7 and hi_byte 15:8 share bits 9:8, as the spec defines them)
        packed = 0
        for n, hi, lo in typ.fields:
            packed |= (fields.get(n, 0) & ((1 << (hi - lo + 1)) - 1)) << lo
        want = {n: (packed >> lo) & ((1 << (hi - lo + 1)) - 1) for n, hi, lo in typ.fields if hi < 64}
        assert t.fields(i) == want, (i, name)
    assert [int(x) for x in t.time[:len(packets)]] == _expected_times(packets)
    pad = "CDNA_MISC" if arch == "cdna" else "NOP"
    assert {t.name(i) for i in range(len(packets), len(t))} <= {pad}
    assert all(v == 0 for i in range(len(packets), len(t)) for v in t.fields(i).values())


@SETTINGS
@given(st.lists(_packet(RDNA3), max_size=60))
def test_rdna3_roundtrip(body: list) -> None:
    _roundtrip("rdna3", RDNA3, body)


@SETTINGS
@given(st.lists(_packet(RDNA4), max_size=60))
def test_rdna4_roundtrip(body: list) -> None:
    _roundtrip("rdna4", RDNA4, body)


@SETTINGS
@given(st.lists(_packet(CDNA), max_size=60))
def test_cdna_roundtrip(body: list) -> None:
    _roundtrip("cdna", CDNA, body)


def test_every_type_examples() -> None:
    """Deterministic coverage: every type of every table once, odd nibble starts, 72-bit TS, markers."""
    for arch, table in (("rdna3", RDNA3), ("rdna4", RDNA4), ("cdna", CDNA)):
        body = [(typ.name, {n: (1 << (min(hi, 63) - lo + 1)) - 1 for n, hi, lo in typ.fields})
                for typ in table.types if typ.name != "LAYOUT_HEADER"]
        body = [(n, {**f, "reserved": 0, "delta": 0}) if n == "CDNA_TIMESTAMP" else (n, f) for n, f in body]
        if arch != "cdna":
            body.insert(0, ("VALUINST", {"delta": 7}))   # 12-bit packet: what follows starts at an odd nibble
            mark = "TS_DELTA_OR_MARK" if arch == "rdna3" else "TS_DELTA_OR_MARK_RDNA4"
            body += [(mark, {"rt": 1, "pl": 0, "delta": 123456}), (mark, {"rt": 0, "pl": 0, "delta": 77}),
                     ("TS_DELTA_S8_W3", {"delta": 5}), ("TS_DELTA_SHORT", {"delta": 0})]
        else:
            body += [("CDNA_MISC", {"delta": 3}), ("CDNA_TIMESTAMP", {"reserved": 0, "timestamp": 10_000}),
                     ("CDNA_MISC", {"delta": 255, "misc_type": 1}), ("CDNA_REG", {"delta": 1}),
                     ("CDNA_TIMESTAMP", {"reserved": 0, "timestamp": 20_003}), ("CDNA_MISC", {"delta": 1}),
                     ("CDNA_MISC", {"delta": 255, "misc_type": 1}), ("CDNA_MISC", {"delta": 255, "misc_type": 1}),
                     ("CDNA_WAVEEND", {"delta": 1}), ("CDNA_TIMESTAMP", {"reserved": 0, "timestamp": 30_001})]
        _roundtrip(arch, table, body)


def test_marker_delta_is_not_added() -> None:
    data = encode([("TS_DELTA_SHORT", {"delta": 1}), ("TS_DELTA_OR_MARK", {"rt": 1, "pl": 0, "delta": 999}),
                   ("TS_DELTA_OR_MARK", {"rt": 1, "pl": 1, "delta": 10})])
    assert [int(x) for x in decode(data).time[:3]] == [5, 5, 15]


def test_layout_header_mid_stream_switches_table() -> None:
    a = encode([("LAYOUT_HEADER", {"layout": 3}), ("WAVESTART", {"wave": 3})], table=RDNA3, pad=False)
    # 64 + 32 bits = whole bytes, so the second part can be appended byte-aligned
    b = encode([("LAYOUT_HEADER", {"layout": 4}), ("WAVESTART_RDNA4", {"wave": 17})], table=RDNA4)
    t = decode(a + b)
    assert [t.name(i) for i in range(4)] == ["LAYOUT_HEADER", "WAVESTART", "LAYOUT_HEADER", "WAVESTART_RDNA4"]
    assert t.fields(3)["wave"] == 17 and t.layout == 3


def test_truncated_mid_packet_is_reported() -> None:
    # a 72-bit packet with only its first 64 bits present: decoded (the window is full), marked truncated
    data = encode([("NOP", {}), ("NOP", {}), ("TS_DELTA_S8_W3", {"delta": 2})], pad=False)[:9]
    t = decode(data)
    assert t.name(len(t) - 1) == "TS_DELTA_S8_W3" and t.stop_reason == "truncated"
    assert "truncated" in t.describe_stop() and str(t.stop) in t.describe_stop()


def test_empty_and_tiny_streams() -> None:
    for data in (b"", b"\x11", b"\x00" * 7):
        t = decode(data)
        assert len(t) == 0 and t.stop == 0 and "stopped at nibble 0" in t.describe_stop()


_REAL = sorted(DATA.glob("*/*/sqtt_*_se1.bin"))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from(_REAL), st.floats(0, 1))
def test_truncated_real_streams_decode_a_prefix(path: Path, frac: float) -> None:
    data = path.read_bytes()
    full = decode(data)
    cut = decode(data[:int(len(data) * frac)])
    n = len(cut)
    assert n <= len(full)
    assert (cut.pos == full.pos[:n]).all() and (cut.code == full.code[:n]).all()
    # a CDNA TIME_RESET is closed by the next timestamp: when the cut falls between the two, the tokens from the
    # TIME_RESET on keep their lower-bound times in the prefix, so times agree up to that TIME_RESET
    m = _first_open_time_reset(cut)
    assert (cut.time[:m] == full.time[:m]).all()
    assert cut.stop <= cut.nibbles


def _first_open_time_reset(t) -> int:
    """Index of the first CDNA TIME_RESET that no timestamp of ``t`` closes (``len(t)`` when there is none)."""
    from tinyhw.formats import sqtt

    resets = [i for i in range(len(t)) if t.code[i] == sqtt._CDNA_MISC and (int(t.word[i]) >> 13) & 7 == 1]
    stamps = [i for i in range(len(t)) if t.code[i] == sqtt._CDNA_TS]
    last_stamp = stamps[-1] if stamps else -1
    open_resets = [i for i in resets if i > last_stamp]
    return open_resets[0] if open_resets else len(t)


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=400), st.sampled_from([b"", b"\x91\x01\x90\x68\x00\x00\x00\x00",
                                                   b"\x11\x02\x70\x68\x08\x10\x13\x09", b"\x11\x80\x0f\x01\0\0\0\0"]))
def test_corrupted_streams_never_crash(noise: bytes, head: bytes) -> None:
    t = decode(head + noise)
    assert len(t.time) == len(t) == len(t.pos)
    assert 0 <= t.stop <= t.nibbles + 18
    assert t.describe_stop()
    for i in range(min(len(t), 50)):
        t.fields(i)
