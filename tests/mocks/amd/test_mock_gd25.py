"""GD25LQ16E model (tinyhw.mocks.amd.gd25) against specs/navi31-spi-flash.md §c and §h.3 (F1-F9)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.errors import Refused
from tinyhw.mocks.amd.flashstore import FlashStore
from tinyhw.mocks.amd.gd25 import (
    GD25LQ16E,
    SFDP_TABLE,
    SIZE,
    TIMINGS,
    Gd25Config,
    protected_range,
)
from tinyhw.mocks.common.vclock import VirtualClock

KiB = 1024


def pattern_image() -> bytes:
    """A recognisable image: byte i = (i * 7 + (i >> 8)) & 0xFF, with an erased last 64 KiB."""
    img = bytearray((i * 7 + (i >> 8)) & 0xFF for i in range(SIZE))
    img[SIZE - 0x10000:] = b"\xff" * 0x10000
    return bytes(img)


_PATTERN = pattern_image()


def make_chip(path: Path, **cfg: object) -> tuple[GD25LQ16E, VirtualClock]:
    clock = VirtualClock()
    store = FlashStore(path, lambda: _PATTERN)
    return GD25LQ16E(store, clock, Gd25Config(**cfg)), clock


@pytest.fixture
def chip(tmp_path: Path) -> GD25LQ16E:
    return make_chip(tmp_path / "flash.bin", timing="instant")[0]


def cmd(chip: GD25LQ16E, *data: int, rx: int = 0) -> bytes:
    return chip.transaction(bytes(data), rx)


def addr3(a: int) -> tuple[int, int, int]:
    return (a >> 16) & 0xFF, (a >> 8) & 0xFF, a & 0xFF


def read(chip: GD25LQ16E, a: int, n: int) -> bytes:
    return cmd(chip, 0x03, *addr3(a), rx=n)


def sr1(chip: GD25LQ16E) -> int:
    return cmd(chip, 0x05, rx=1)[0]


def wrsr(chip: GD25LQ16E, s1: int, s2: int | None = None) -> None:
    cmd(chip, 0x06)
    cmd(chip, 0x01, s1, *(() if s2 is None else (s2,)))


# -- F1 identity and status reads ---------------------------------------------------------------------------
def test_rdid_repeats_and_rdsr_repeats(chip: GD25LQ16E) -> None:
    assert cmd(chip, 0x9F, rx=7) == bytes([0xC8, 0x60, 0x15, 0xC8, 0x60, 0x15, 0xC8])
    assert cmd(chip, 0x05, rx=3) == b"\x00\x00\x00"
    cmd(chip, 0x06)
    assert cmd(chip, 0x05, rx=4) == b"\x02\x02\x02\x02"
    assert cmd(chip, 0x35, rx=2) == b"\x00\x00"
    assert cmd(chip, 0x15, rx=2) == b"\x00\x00"


def test_file_created_and_read(chip: GD25LQ16E, tmp_path: Path) -> None:
    assert (tmp_path / "flash.bin").read_bytes() == _PATTERN
    assert read(chip, 0x1234, 16) == _PATTERN[0x1234:0x1244]


def test_wrong_size_file_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "short.bin"
    path.write_bytes(b"\x00" * 1000)
    with pytest.raises(Refused, match="0x3e8"):
        make_chip(path)


# -- F2 WEL -------------------------------------------------------------------------------------------------------
def test_program_without_wel_is_ignored(chip: GD25LQ16E) -> None:
    cmd(chip, 0x02, *addr3(0x1000), 0x00, 0x00)
    assert read(chip, 0x1000, 2) == _PATTERN[0x1000:0x1002]
    cmd(chip, 0x06)
    cmd(chip, 0x04)
    assert sr1(chip) & 2 == 0
    cmd(chip, 0x20, *addr3(0x1000))
    assert read(chip, 0x1000, 2) == _PATTERN[0x1000:0x1002]


def test_wel_clears_when_program_completes(chip: GD25LQ16E) -> None:
    cmd(chip, 0x06)
    assert sr1(chip) == 0x02
    cmd(chip, 0x02, *addr3(0x1F0000), 0x12)
    assert sr1(chip) == 0x00
    assert read(chip, 0x1F0000, 2) == b"\x12\xff"


# -- F3 busy timing -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("timing", ["typical", "max"])
def test_busy_for_the_datasheet_duration(tmp_path: Path, timing: str) -> None:
    chip, clock = make_chip(tmp_path / "f.bin", timing=timing)
    cmd(chip, 0x06)
    cmd(chip, 0x20, *addr3(0x2000))
    t_se = TIMINGS[timing]["se"]
    assert sr1(chip) == 0x03  # WIP and WEL
    assert cmd(chip, 0x9F, rx=3) == b"\xff\xff\xff"  # only RDSR while busy
    assert read(chip, 0x2000, 4) == b"\xff\xff\xff\xff"
    cmd(chip, 0x06)  # ignored while busy
    clock.advance(t_se * 0.999)
    assert sr1(chip) & 1
    clock.advance(t_se * 0.002)
    assert sr1(chip) == 0x00
    assert read(chip, 0x2000, 0x1000) == b"\xff" * 0x1000


def test_typical_durations_match_the_spec() -> None:
    assert TIMINGS["typical"] == {"pp": 0.5e-3, "se": 45e-3, "be32": 0.15, "be64": 0.25, "ce": 8.0, "wrsr": 5e-3}
    assert TIMINGS["max"] == {"pp": 2.4e-3, "se": 0.3, "be32": 1.2, "be64": 1.6, "ce": 20.0, "wrsr": 15e-3}


def test_stuck_busy_never_clears(tmp_path: Path) -> None:
    chip, clock = make_chip(tmp_path / "f.bin", timing="typical", stuck_busy=True)
    cmd(chip, 0x06)
    cmd(chip, 0x02, *addr3(0x1F0000), 0x00)
    clock.advance(100.0)
    assert sr1(chip) & 1


# -- F4 program and erase semantics ---------------------------------------------------------------------------
def test_program_only_clears_bits_and_wraps_in_page(chip: GD25LQ16E) -> None:
    base = 0x1F0000  # erased area
    cmd(chip, 0x06)
    cmd(chip, 0x02, *addr3(base + 0xFE), 0xF0, 0x0F, 0x55, 0xAA)  # wraps to the page start
    assert read(chip, base + 0xFE, 2) == b"\xf0\x0f"
    assert read(chip, base, 3) == b"\x55\xaa\xff"
    cmd(chip, 0x06)
    cmd(chip, 0x02, *addr3(base + 0xFE), 0xFF, 0xF0)  # AND: 0x0F & 0xF0 = 0
    assert read(chip, base + 0xFE, 2) == b"\xf0\x00"


def test_program_keeps_only_the_last_256_bytes(chip: GD25LQ16E) -> None:
    base = 0x1F0100
    data = bytes([0xA5]) * 10 + bytes(range(256))
    cmd(chip, 0x06)
    chip.transaction(bytes([0x02, *addr3(base)]) + data, 0)
    # the last 256 bytes land starting at (0 + 10) % 256
    page = read(chip, base, 256)
    assert page[10:] == bytes(range(246))
    assert page[:10] == bytes(range(246, 256))


@pytest.mark.parametrize(("op", "size"), [(0x20, 4 * KiB), (0x52, 32 * KiB), (0xD8, 64 * KiB)])
def test_erase_sizes(chip: GD25LQ16E, op: int, size: int) -> None:
    inside = 0x40000 + size // 2 + 3
    cmd(chip, 0x06)
    cmd(chip, op, *addr3(inside))
    assert read(chip, 0x40000, size) == b"\xff" * size
    assert read(chip, 0x40000 + size, 4) == _PATTERN[0x40000 + size:0x40000 + size + 4]
    assert read(chip, 0x40000 - 4, 4) == _PATTERN[0x40000 - 4:0x40000]


def test_chip_erase(chip: GD25LQ16E) -> None:
    cmd(chip, 0x06)
    cmd(chip, 0xC7)
    assert read(chip, 0, 64) == b"\xff" * 64
    assert chip.store.path.read_bytes() == b"\xff" * SIZE


def test_incomplete_commands_are_ignored(chip: GD25LQ16E) -> None:
    cmd(chip, 0x06)
    cmd(chip, 0x02)  # bare PP
    cmd(chip, 0x20)  # bare SE
    cmd(chip, 0x20, 0x00, 0x10)  # SE with 2 address bytes
    cmd(chip, 0x20, 0x00, 0x10, 0x00, 0x00)  # one byte too many
    assert sr1(chip) & 2  # WEL still set: nothing executed
    assert read(chip, 0x1000, 4) == _PATTERN[0x1000:0x1004]
    cmd(chip, 0x06, 0x00)  # WREN must end on its byte boundary too
    cmd(chip, 0x04)
    cmd(chip, 0x06, rx=1)
    assert sr1(chip) & 2 == 0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0xFFFF), st.binary(min_size=1, max_size=300)), max_size=6))
def test_program_matches_a_reference_model(tmp_path_factory: pytest.TempPathFactory,
                                           ops: list[tuple[int, bytes]]) -> None:
    chip, _ = make_chip(tmp_path_factory.mktemp("p") / "f.bin", timing="instant")
    base = 0x100000
    ref = bytearray(_PATTERN[base:base + 0x10000])
    for a, data in ops:
        cmd(chip, 0x06)
        chip.transaction(bytes([0x02, *addr3(base + a)]) + data, 0)
        page, pos = a & ~0xFF, a & 0xFF
        latch = {}
        for i, byte in enumerate(data):
            latch[(pos + i) % 256] = byte
        for p, byte in latch.items():
            ref[page + p] &= byte
    assert read(chip, base, 0x10000) == bytes(ref)
    assert chip.store.path.read_bytes()[base:base + 0x10000] == bytes(ref)


# -- F5 protection --------------------------------------------------------------------------------------------
M = 1 << 20


@pytest.mark.parametrize(("sec_tb_bp", "cmp", "expected"), [
    (0b00000, 0, (0, 0)), (0b00000, 1, (0, 2 * M)),
    (0b00001, 0, (0x1F0000, 2 * M)), (0b00001, 1, (0, 0x1F0000)),
    (0b00010, 0, (0x1E0000, 2 * M)), (0b00011, 0, (0x1C0000, 2 * M)),
    (0b00100, 0, (0x180000, 2 * M)), (0b00101, 0, (0x100000, 2 * M)), (0b00101, 1, (0, 0x100000)),
    (0b01001, 0, (0, 0x10000)), (0b01001, 1, (0x10000, 2 * M)), (0b01101, 0, (0, M)),
    (0b00110, 0, (0, 2 * M)), (0b11111, 0, (0, 2 * M)), (0b00111, 1, (0, 0)),
    (0b10001, 0, (2 * M - 4096, 2 * M)), (0b10010, 0, (2 * M - 8192, 2 * M)),
    (0b10011, 0, (2 * M - 16384, 2 * M)), (0b10100, 0, (2 * M - 32768, 2 * M)),
    (0b10101, 0, (2 * M - 32768, 2 * M)), (0b11001, 0, (0, 4096)), (0b11001, 1, (4096, 2 * M)),
])
def test_protected_range_table(sec_tb_bp: int, cmp: int, expected: tuple[int, int]) -> None:
    sr1 = (sec_tb_bp & 0x1F) << 2
    lo, hi = protected_range(sr1, cmp << 6)
    if expected[0] == expected[1]:
        assert lo == hi
    else:
        assert (lo, hi) == expected


def test_cmp_with_bp_zero_protects_everything(chip: GD25LQ16E) -> None:
    wrsr(chip, 0x00, 0x40)
    assert cmd(chip, 0x35, rx=1)[0] == 0x40
    cmd(chip, 0x06)
    cmd(chip, 0x20, *addr3(0x3000))
    assert read(chip, 0x3000, 8) == _PATTERN[0x3000:0x3008]
    assert chip.events[-1] == ("se-rejected", 0x3000, 0x1000)
    assert sr1(chip) & 2 == 0  # WEL cleared by the rejected erase (modelling choice)
    cmd(chip, 0x06)
    cmd(chip, 0xC7)
    assert read(chip, 0, 8) == _PATTERN[:8]


def test_partial_protection_blocks_only_its_range(chip: GD25LQ16E) -> None:
    wrsr(chip, 0b00001 << 2)  # upper 64 KiB
    cmd(chip, 0x06)
    cmd(chip, 0x02, *addr3(0x1F0000), 0x00)
    assert read(chip, 0x1F0000, 1) == b"\xff"
    cmd(chip, 0x06)
    cmd(chip, 0x02, *addr3(0x1E0000), 0x00)
    assert read(chip, 0x1E0000, 1) == b"\x00"
    cmd(chip, 0x06)
    cmd(chip, 0x60)  # CE with any protection: ignored
    assert read(chip, 0x1000, 2) == _PATTERN[0x1000:0x1002]


# -- F6 status register writes ----------------------------------------------------------------------------------
def test_wrsr_needs_wel_and_keeps_ro_bits(chip: GD25LQ16E) -> None:
    cmd(chip, 0x01, 0x1C, 0x40)
    assert cmd(chip, 0x05, rx=1)[0] == 0
    wrsr(chip, 0xFF, 0xFF)
    # WIP/WEL read-only (and cleared after completion), SUS bits read-only
    assert cmd(chip, 0x05, rx=1)[0] == 0xFC
    assert cmd(chip, 0x35, rx=1)[0] == 0x7B


def test_lock_bits_only_go_up(chip: GD25LQ16E) -> None:
    wrsr(chip, 0x00, 0x08)
    wrsr(chip, 0x00, 0x00)
    assert cmd(chip, 0x35, rx=1)[0] == 0x08


def test_nv_bits_survive_power_cycle_and_volatile_ones_do_not(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    chip, _ = make_chip(path, timing="instant")
    wrsr(chip, 0x1C, 0x40)
    cmd(chip, 0x06)
    chip.store.close()
    assert path.with_name("f.bin.sr").read_bytes() == bytes([0x1C, 0x40, 0x00])
    chip2, _ = make_chip(path, timing="instant")
    assert cmd(chip2, 0x05, rx=1)[0] == 0x1C  # WEL gone, BP kept
    assert cmd(chip2, 0x35, rx=1)[0] == 0x40
    cmd(chip2, 0x50)
    cmd(chip2, 0x01, 0x00, 0x00)  # volatile copy: no WEL needed
    assert cmd(chip2, 0x05, rx=1)[0] == 0x00
    chip2.store.close()
    chip3, _ = make_chip(path, timing="instant")
    assert cmd(chip3, 0x05, rx=1)[0] == 0x1C


def test_srp_protection(tmp_path: Path) -> None:
    chip, _ = make_chip(tmp_path / "a.bin", timing="instant", wp_high=False)
    wrsr(chip, 0x80)  # SRP0 with WP# low: hardware protected from now on
    wrsr(chip, 0x00)
    assert cmd(chip, 0x05, rx=1)[0] == 0x80
    chip2, _ = make_chip(tmp_path / "b.bin", timing="instant")
    wrsr(chip2, 0x80)  # WP# high: still writable
    wrsr(chip2, 0x00)
    assert cmd(chip2, 0x05, rx=1)[0] == 0x00
    wrsr(chip2, 0x00, 0x01)  # SRP1: locked until power-down
    wrsr(chip2, 0x00, 0x00)
    assert cmd(chip2, 0x35, rx=1)[0] == 0x01
    chip2.power_up()
    assert cmd(chip2, 0x35, rx=1)[0] == 0x00


# -- F7 reads --------------------------------------------------------------------------------------------------------
def test_read_wraps_at_chip_end_and_fast_read_dummy(chip: GD25LQ16E) -> None:
    assert read(chip, SIZE - 2, 4) == _PATTERN[-2:] + _PATTERN[:2]
    assert cmd(chip, 0x0B, *addr3(0x100), rx=5) == b"\xff" + _PATTERN[0x100:0x104]
    assert read(chip, SIZE + 0x10, 2) == _PATTERN[0x10:0x12]  # A21+ ignored


# -- F8 SFDP ---------------------------------------------------------------------------------------------------------
def test_sfdp_through_a_host_that_cannot_send_the_dummy(chip: GD25LQ16E) -> None:
    cap = cmd(chip, 0x5A, 0, 0, 0, rx=24)
    assert cap.index(b"SFDP") == 1
    assert SFDP_TABLE[0x0C] == 0x30
    bfpt = SFDP_TABLE[0x30:0x30 + 8]
    assert bfpt[0] & 3 == 1 and bfpt[1] == 0x20
    assert int.from_bytes(bfpt[4:8], "little") == 0x00FFFFFF


# -- F9 deep power-down -----------------------------------------------------------------------------------------
def test_deep_power_down(chip: GD25LQ16E) -> None:
    cmd(chip, 0xB9)
    assert cmd(chip, 0x9F, rx=3) == b"\xff\xff\xff"
    assert read(chip, 0, 4) == b"\xff" * 4
    cmd(chip, 0x06)
    cmd(chip, 0xAB)
    assert cmd(chip, 0x05, rx=1) == b"\x00"  # the WREN during DP was ignored
    assert cmd(chip, 0xAB, 0, 0, 0, rx=2) == b"\x14\x14"


# -- other state-machine corners ------------------------------------------------------------------------------------
def test_suspend_and_resume(tmp_path: Path) -> None:
    chip, clock = make_chip(tmp_path / "f.bin", timing="typical")
    cmd(chip, 0x06)
    cmd(chip, 0x20, *addr3(0x4000))
    clock.advance(0.010)
    cmd(chip, 0x75)
    assert cmd(chip, 0x05, rx=1)[0] & 1 == 0
    assert cmd(chip, 0x35, rx=1)[0] & 0x80  # SUS1
    assert read(chip, 0x8000, 4) == _PATTERN[0x8000:0x8004]  # reads allowed while suspended
    clock.advance(1.0)
    cmd(chip, 0x7A)
    assert cmd(chip, 0x05, rx=1)[0] & 1
    clock.advance(0.036)
    assert cmd(chip, 0x05, rx=1)[0] == 0
    assert read(chip, 0x4000, 0x1000) == b"\xff" * 0x1000


def test_reset_needs_enable_first(chip: GD25LQ16E) -> None:
    cmd(chip, 0x06)
    cmd(chip, 0x99)
    assert sr1(chip) & 2
    cmd(chip, 0x66)
    cmd(chip, 0x99)
    assert sr1(chip) & 2 == 0


def test_freeze_mid_erase_leaves_a_torn_sector_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    chip, clock = make_chip(path, timing="typical")
    cmd(chip, 0x06)
    cmd(chip, 0x20, *addr3(0x5000))
    clock.advance(TIMINGS["typical"]["se"] / 2)
    chip.freeze()
    chip.store.close()
    sector = path.read_bytes()[0x5000:0x6000]
    assert sector[:0x800] == b"\xff" * 0x800
    assert sector[0x800:] == _PATTERN[0x5800:0x6000]


def test_finish_completes_a_running_program(tmp_path: Path) -> None:
    path = tmp_path / "f.bin"
    chip, _ = make_chip(path, timing="max")
    cmd(chip, 0x06)
    cmd(chip, 0x02, *addr3(0x1F0000), 0x00, 0x11)
    chip.finish()
    chip.store.close()
    assert path.read_bytes()[0x1F0000:0x1F0003] == b"\x00\x11\xff"


def test_bitflip_hits_the_first_covering_read_once(tmp_path: Path) -> None:
    chip, _ = make_chip(tmp_path / "f.bin", timing="instant", bitflips=(0x1234,))
    assert read(chip, 0x1000, 16) == _PATTERN[0x1000:0x1010]
    first = read(chip, 0x1200, 0x100)
    assert first[0x34] == _PATTERN[0x1234] ^ 0x01
    assert first[:0x34] == _PATTERN[0x1200:0x1234]
    assert read(chip, 0x1200, 0x100) == _PATTERN[0x1200:0x1300]
    assert chip.flipped == [0x1234]


# -- 90h manufacturer/device id (flashrom's probe sends it) ---------------------------------------------------
def test_rems_manufacturer_device_id(chip: GD25LQ16E) -> None:
    """GigaDevice datasheet: 90h, address 000000h -> C8 14 (repeating); A0 = 1 swaps the pair."""
    assert cmd(chip, 0x90, 0, 0, 0, rx=2) == b"\xc8\x14"
    assert cmd(chip, 0x90, 0, 0, 0, rx=5) == b"\xc8\x14\xc8\x14\xc8"
    assert cmd(chip, 0x90, 0, 0, 1, rx=2) == b"\x14\xc8"
    # a host that clocks only the opcode reads the address slots as FF (high-Z), then the pair in A0=1 order
    # (the filler on MOSI is FF, so A0 = 1)
    assert cmd(chip, 0x90, rx=5) == b"\xff\xff\xff\x14\xc8"
    assert chip.op_counts[0x90] == 4


def test_rems_ignored_in_deep_power_down(chip: GD25LQ16E) -> None:
    cmd(chip, 0xB9)
    assert cmd(chip, 0x90, 0, 0, 0, rx=2) == b"\xff\xff"
