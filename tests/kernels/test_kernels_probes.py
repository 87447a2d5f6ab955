"""The probes' host side: expected answers, the checks catching wrong results, the reported figures.

No tinygrad here: the outputs are built by this test from the formulas in the probes' docstring.
"""

from __future__ import annotations

import array
import struct

import pytest

from tinyhw.errors import Refused
from tinyhw.kernels.probes import FMA_PERIOD, PROBES, get_probe


def pattern_words(n: int) -> bytes:
    return array.array("I", ((i * 0x9E3779B1 + 0x01234567) % 2**32 for i in range(n))).tobytes()


def test_pattern_accepts_the_formula_and_names_the_first_bad_word() -> None:
    p = get_probe("pattern")
    good = pattern_words(5000)
    assert p.check(5000, {"out": good}).ok
    bad = bytearray(good)
    bad[4 * 4321] ^= 0x10
    c = p.check(5000, {"out": bytes(bad)})
    assert not c.ok and "word 4321" in c.detail and "crc32" in c.detail
    assert not p.check(5000, {"out": good[:-4]}).ok


def test_bandwidth_input_and_check() -> None:
    p = get_probe("bandwidth")
    n = 10_000  # more than two 4093-word blocks, not a multiple
    inp = p.inputs(n)["in"]
    assert len(inp) == 4 * n
    words = array.array("I")
    words.frombytes(inp)
    assert words[0] != words[1] and words[4093] == words[0]
    out = array.array("I", (w ^ 0x5A5A5A5A for w in words)).tobytes()
    assert p.check(n, {"out": out}).ok
    assert not p.check(n, {"out": inp}).ok  # a plain copy is not the answer
    bad = bytearray(out)
    bad[4 * 9999 + 3] ^= 1
    assert "word 9999" in p.check(n, {"out": bytes(bad)}).detail
    assert p.work(n) == 8 * n
    assert p.figure(n, 1e-3) == pytest.approx(8 * n / 1e-3 / 1e9)


def test_fma_check_and_figure() -> None:
    p = get_probe("fma")
    n = 4 * FMA_PERIOD
    want = p.expected_values()
    assert len(want) == FMA_PERIOD == 256
    assert 0 < want[0] < 512 and want == sorted(want)  # moving towards B / (1 - A) = 512 from below
    out = array.array("f", want * 4).tobytes()
    assert p.check(n, {"out": out}).ok
    nan = bytearray(out)
    struct.pack_into("<f", nan, 4 * (256 + 6), float("nan"))
    c = p.check(n, {"out": bytes(nan)})
    assert not c.ok and "element class 6" in c.detail
    off = bytearray(out)
    struct.pack_into("<f", off, 0, want[0] * 1.01)
    assert not p.check(n, {"out": bytes(off)}).ok
    shifted = array.array("f", want[1:] + want[:1]).tobytes() * 4  # element i computed from seed i + 1
    assert not p.check(n, {"out": shifted}).ok
    assert p.figure(n, 1.0) == pytest.approx(2 * 64 * n / 1e12)
    assert p.inputs(n) == {} and [b.name for b in p.buffers(n)] == ["out"]


def test_every_probe_has_buffers_and_sizes() -> None:
    for p in PROBES.values():
        bufs = p.buffers(p.cpu_n)
        assert any(b.role == "out" for b in bufs)
        assert p.gpu_n % 512 == 0 and p.cpu_n % 512 == 0
        assert set(p.inputs(p.cpu_n)) == {b.name for b in bufs if b.role in ("in", "inout")}


def test_unknown_probe_is_refused() -> None:
    with pytest.raises(Refused, match="unknown probe kernel 'nope'"):
        get_probe("nope")


def test_atomic_check_needs_every_ticket_once() -> None:
    p = get_probe("atomic")
    n = 1000
    tickets = list(range(n))
    tickets.reverse()  # any order is fine
    good = {"out": array.array("I", tickets).tobytes(), "counter": struct.pack("<II", n, 4)}
    assert p.check(n, good).ok
    assert p.inputs(n) == {"counter": bytes(8)}  # the counter and the cpu threads' start gate
    lost = dict(good, counter=struct.pack("<II", n - 1, 4))
    assert "counter is 999, expected 1000" in p.check(n, lost).detail
    twice = list(tickets)
    twice[5] = twice[6]
    assert "handed out twice" in p.check(n, {**good, "out": array.array("I", twice).tobytes()}).detail
    big = list(tickets)
    big[0] = n
    assert "out of range" in p.check(n, {**good, "out": array.array("I", big).tobytes()}).detail
    assert "sm_90" not in p.targets and "ptx" in p.target_note
