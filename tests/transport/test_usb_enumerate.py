"""Enumeration behind the USB bridge (tinyhw/usb/enumerate.py) on a fake bridge: named header offsets,
the formats capability walker, the Resizable BAR decoding and BAR sizing of tinyhw.formats."""

from __future__ import annotations

import ast
import inspect
import re

from tinyhw.usb import enumerate as enum


class FakeBridge:
    """Config space of bus 1 as a dict of dwords; writes recorded."""

    def __init__(self, dwords: dict[int, int]) -> None:
        self.dwords = dwords
        self.writes: list[tuple[int, int, int]] = []
        self.reads: list[int] = []

    def config_read(self, bus: int, dev: int, fn: int, offset: int, size: int) -> int:
        self.reads.append(offset)
        word = self.dwords.get(offset & ~3, 0)
        return (word >> 8 * (offset & 3)) & ((1 << 8 * size) - 1)

    def config_write(self, bus: int, dev: int, fn: int, offset: int, size: int, value: int) -> None:
        self.writes.append((offset, size, value))


def test_rebar_found_behind_other_capabilities_and_set_to_the_largest() -> None:
    gb = 1 << 30
    br = FakeBridge({
        0x100: 0x1 | 1 << 16 | 0x150 << 20,  # AER v1, next 0x150
        0x150: 0x15 | 1 << 16 | 0x000 << 20,  # Resizable BAR v1, last
        0x154: sum(1 << (k + 4) for k in (8, 9, 10, 11, 12, 13, 14, 15)),  # 256 MiB .. 32 GiB
        0x158: 1 << 5 | 8 << 8,  # one entry, BAR 0, current 256 MiB
    })
    size, sizes = enum.resize_bar0(br, 1)  # type: ignore[arg-type]
    assert size == 32 * gb and sizes[0] == gb // 4 and len(sizes) == 8
    assert br.writes == [(0x158, 4, 1 << 5 | 15 << 8)]
    assert sorted(set(br.reads)) == [0x100, 0x150, 0x154, 0x158]  # the walk stops at the capability it wants


def test_a_looping_capability_list_ends_the_walk() -> None:
    br = FakeBridge({0x100: 0x1 | 1 << 16 | 0x100 << 20})  # AER pointing at itself, no Resizable BAR
    assert enum.resize_bar0(br, 1) == (None, [])  # type: ignore[arg-type]
    assert br.writes == []


def test_bar_sizing_uses_the_formats_arithmetic() -> None:
    br = FakeBridge({0x10: 0xC, 0x14: 0})  # BAR0: 64-bit prefetchable; the fake reads back 0 after sizing
    assert enum.size_and_place_bars(br, 1) == []  # type: ignore[arg-type]


def test_config_offsets_are_named_and_there_is_no_own_capability_walk() -> None:
    tree = ast.parse(inspect.getsource(enum))
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
             and n.func.attr in ("config_read", "config_write")]
    assert calls
    bare = [ast.unparse(c) for c in calls if isinstance(c.args[3], ast.Constant)]
    assert bare == [], "config offsets must be named (tinyhw.formats.pciconfig REG_*)"
    source = inspect.getsource(enum)
    assert "iter_ext_capabilities" in source and not re.search(r"0x100\b", source)
