"""Parser, checker and allow-list of the register-database generator (tinyhw/autogen/headers.py),
from inline header snippets in both kernel styles, and the rendered module format."""

from __future__ import annotations

import types

import pytest

from tinyhw.autogen import genregs, headers
from tinyhw.regs.table import RegTable

# New style (Linux >= 5.x SOC15 headers): reg prefix, _BASE_IDX; plus an indirect ix define to skip.
NEW_OFFSET = """\
#ifndef _smuio_13_0_6_OFFSET_HEADER
#define _smuio_13_0_6_OFFSET_HEADER
// addressBlock: smuio_smuio_rom_SmuSmuioDec
// base address: 0x5a380
#define regROM_CNTL                                         0x00e0
#define regROM_CNTL_BASE_IDX                                0
#define regROM_SW_CNTL                                      0x00e8
#define regROM_SW_CNTL_BASE_IDX                             0
// base address: 0x5a8a0
#define regPWROK_REFCLK_GAP_CYCLES                          0x0028
#define regPWROK_REFCLK_GAP_CYCLES_BASE_IDX                 1
#define ixGC_CAC_ID                                         0x0000
#endif
"""
NEW_SH_MASK = """\
//ROM_SW_CNTL
#define ROM_SW_CNTL__DATA_SIZE__SHIFT                       0x0
#define ROM_SW_CNTL__COMMAND_SIZE__SHIFT                    0x10
#define ROM_SW_CNTL__ROM_SW_RETURN_DATA_ENABLE__SHIFT       0x13
#define ROM_SW_CNTL__DATA_SIZE_MASK                         0x0000FFFFL
#define ROM_SW_CNTL__COMMAND_SIZE_MASK                      0x00070000L
#define ROM_SW_CNTL__ROM_SW_RETURN_DATA_ENABLE_MASK         0x00080000L
//GC_CAC_ID (indirect: no offset, so its fields are orphans)
#define GC_CAC_ID__CAC_BLOCK_ID__SHIFT                      0x0
#define GC_CAC_ID__CAC_BLOCK_ID_MASK                        0x0000003FL
"""

# Old (Vega-era) style: mm prefix, same _BASE_IDX (smuio_9_0_offset.h facts).
OLD_OFFSET = """\
#define mmROM_CNTL                                          0x0024
#define mmROM_CNTL_BASE_IDX                                 0
#define mmROM_SW_CNTL                                       0x002b
#define mmROM_SW_CNTL_BASE_IDX                              0
"""
OLD_SH_MASK = """\
#define ROM_SW_CNTL__DATA_SIZE__SHIFT                       0x0
#define ROM_SW_CNTL__COMMAND_SIZE__SHIFT                    0x10
#define ROM_SW_CNTL__ROM_SW_RETURN_DATA_ENABLE__SHIFT       0x12
#define ROM_SW_CNTL__DATA_SIZE_MASK                         0x0000FFFFL
#define ROM_SW_CNTL__COMMAND_SIZE_MASK                      0x00030000L
#define ROM_SW_CNTL__ROM_SW_RETURN_DATA_ENABLE_MASK         0x00040000L
"""


def _table(offset: str, sh_mask: str) -> headers.Table:
    return headers.parse_sh_mask(sh_mask, headers.parse_offset(offset))


def test_new_style_registers_segments_and_fields() -> None:
    t = _table(NEW_OFFSET, NEW_SH_MASK)
    assert list(t.regs) == ["ROM_CNTL", "ROM_SW_CNTL", "PWROK_REFCLK_GAP_CYCLES"]
    assert (t.regs["ROM_SW_CNTL"].offset, t.regs["ROM_SW_CNTL"].segment) == (0xE8, 0)
    assert (t.regs["PWROK_REFCLK_GAP_CYCLES"].offset, t.regs["PWROK_REFCLK_GAP_CYCLES"].segment) == (0x28, 1)
    fields = [(f.name, f.shift, f.mask) for f in t.regs["ROM_SW_CNTL"].fields]
    assert fields == [
        ("DATA_SIZE", 0, 0xFFFF),
        ("COMMAND_SIZE", 16, 0x70000),
        ("ROM_SW_RETURN_DATA_ENABLE", 19, 0x80000),
    ]
    assert t.skipped_defines == 1  # ixGC_CAC_ID (the include guard has no value: not a define of a number)
    assert t.orphan_fields == 1
    assert headers.check(t) == []


def test_old_mm_style() -> None:
    t = _table(OLD_OFFSET, OLD_SH_MASK)
    assert {n: (r.offset, r.segment) for n, r in t.regs.items()} == {"ROM_CNTL": (0x24, 0), "ROM_SW_CNTL": (0x2B, 0)}
    enable = t.regs["ROM_SW_CNTL"].fields[2]
    assert (enable.name, enable.shift, enable.mask) == ("ROM_SW_RETURN_DATA_ENABLE", 18, 0x40000)
    assert headers.check(t) == []


def test_field_split_prefers_the_longest_known_register() -> None:
    t = _table(
        "#define regFOO 0x1\n#define regFOO_BASE_IDX 0\n#define regFOO_BAR 0x2\n#define regFOO_BAR_BASE_IDX 0\n",
        "#define FOO_BAR__X__SHIFT 0x3\n#define FOO_BAR__X_MASK 0x8L\n"
        "#define FOO__A__B__SHIFT 0x0\n#define FOO__A__B_MASK 0x1L\n",
    )
    assert [f.name for f in t.regs["FOO_BAR"].fields] == ["X"]
    assert [f.name for f in t.regs["FOO"].fields] == ["A__B"]


def _kinds(offset: str, sh_mask: str = "") -> list[tuple[str, str, str]]:
    return [f.key for f in headers.check(_table(offset, sh_mask))]


REG = "#define regR 0x10\n#define regR_BASE_IDX 0\n"


def test_checker_rejects_overlapping_fields() -> None:
    sh = "#define R__A__SHIFT 0x0\n#define R__A_MASK 0x3L\n#define R__B__SHIFT 0x1\n#define R__B_MASK 0x2L\n"
    assert _kinds(REG, sh) == [("overlap", "R", "A/B")]


def test_checker_rejects_fields_past_bit_31() -> None:
    sh = "#define R__A__SHIFT 0x20\n#define R__A_MASK 0x100000000L\n"
    assert _kinds(REG, sh) == [("past-bit-31", "R", "A")]


def test_checker_rejects_duplicate_names() -> None:
    dup = REG + "#define regR 0x11\n#define regr 0x12\n#define regr_BASE_IDX 0\n"
    assert ("duplicate-register", "R", "") in _kinds(dup)
    assert ("duplicate-register", "r", "R") in _kinds(dup)
    sh = "#define R__A__SHIFT 0x0\n#define R__A__SHIFT 0x1\n#define R__A_MASK 0x1L\n"
    assert ("duplicate-field", "R", "A") in _kinds(REG, sh)


def test_checker_rejects_masks_that_do_not_match_their_shift_and_half_fields() -> None:
    sh = (
        "#define R__A__SHIFT 0x1\n#define R__A_MASK 0x1L\n"  # low bit 0, shift 1
        "#define R__B__SHIFT 0x4\n#define R__B_MASK 0x50L\n"  # not contiguous
        "#define R__C__SHIFT 0x8\n"  # no mask
        "#define R__D_MASK 0x1000L\n"  # no shift
    )
    assert _kinds(REG, sh) == [
        ("bad-mask", "R", "A"),
        ("bad-mask", "R", "B"),
        ("incomplete-field", "R", "C"),
        ("incomplete-field", "R", "D"),
    ]
    assert _kinds("#define regQ 0x1\n") == [("no-base-idx", "Q", "")]


def test_allow_list_is_honoured_and_must_be_exact() -> None:
    sh = "#define R__A__SHIFT 0x0\n#define R__A_MASK 0x3L\n#define R__B__SHIFT 0x1\n#define R__B_MASK 0x2L\n"
    with pytest.raises(headers.CheckFailed, match="overlap"):
        headers.apply_quirks("t", _table(REG, sh), [])
    allow = [
        ("t", "overlap", "R", ("A/B",), "as-is", "documented quirk"),
        ("other", "overlap", "R", ("A/B",), "omit", "another table's entry is ignored"),
    ]
    table = _table(REG, sh)
    assert headers.apply_quirks("t", table, allow) == []
    assert [f.name for f in table.regs["R"].fields] == ["A", "B"]
    # omit drops the field named by a field-level finding, and the register for a register-level one
    table = _table(REG + "#define regQ 0x1\n", "#define R__C__SHIFT 0x8\n")
    omitted = headers.apply_quirks(
        "t", table, [("t", "incomplete-field", "R", ("C",), "omit", "x"), ("t", "no-base-idx", "Q", ("",), "omit", "y")]
    )
    assert omitted == ["register Q (no-base-idx)", "field R.C (incomplete-field)"]
    assert list(table.regs) == ["R"] and table.regs["R"].fields == []
    # a stale entry (no such finding) stops generation too
    with pytest.raises(headers.CheckFailed, match="stale"):
        headers.apply_quirks("t", _table(REG, ""), [("t", "overlap", "R", ("A/B",), "as-is", "gone")])


def test_rendered_module_round_trips_and_is_deterministic() -> None:
    table = _table(NEW_OFFSET, NEW_SH_MASK)
    text = genregs.render("smuio_13_0_6", table, [], "6.12.999 (test)")
    assert text == genregs.render("smuio_13_0_6", _table(NEW_OFFSET, NEW_SH_MASK), [], "6.12.999 (test)")
    assert [ln for ln in text.splitlines() if "6.12.999" in ln] == ['KERNEL = "Linux 6.12.999 (test)"']
    assert "smuio/smuio_13_0_6_offset.h" in text and "python -m tinyhw.autogen.genregs" in text
    mod = types.ModuleType("fake_regs")
    exec(compile(text, "fake_regs.py", "exec"), mod.__dict__)  # our own generated text
    rt = RegTable("fake", module=mod)
    assert rt.names() == ["ROM_CNTL", "ROM_SW_CNTL", "PWROK_REFCLK_GAP_CYCLES"]
    name, seg, dword, fields = rt.entry("rom_sw_cntl")
    assert (name, seg, dword) == ("ROM_SW_CNTL", 0, 0xE8)
    assert [(f.name, f.shift, f.mask) for f in fields] == [
        ("DATA_SIZE", 0, 0xFFFF),
        ("COMMAND_SIZE", 16, 0x70000),
        ("ROM_SW_RETURN_DATA_ENABLE", 19, 0x80000),
    ]
    assert rt.entry("ROM_CNTL")[3] == () and rt.entry("NOPE") is None
