"""pci.ids: the §5 grammar on inline snippets, the §4.3 name fallbacks, file discovery and
caching, and the real /usr/share/misc/pci.ids (names, size, speed)."""

from __future__ import annotations

import gzip
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.formats import pciids
from tinyhw.formats.pciids import PciIds, clear_cache, find_pci_ids, load_pci_ids

REAL = "/usr/share/misc/pci.ids"

SNIPPET = """\
#
#	List of PCI ID's
#
#	Version: 2099.01.01
#
1234  Acme
1af4  Red Hat, Inc.
	1041  Virtio 1.0 network device
# a comment inside a block
	1042  Virtio 1.0 block device

		1af4 1100  QEMU Virtio block
	1045\tVirtio 1.0 memory balloon
8086  Intel Corporation
S 1234
	5678  Generic widget
X 55  reserved block, skipped
	66  skipped too
C 02  Network controller
	00  Ethernet controller
C 03  Display controller
	00  VGA compatible controller
		00  VGA controller
		01  8514 controller
C 0c  Serial bus controller
	03  USB controller
		30  XHCI
C ff  Unassigned class
"""


@pytest.fixture(autouse=True)
def _fresh_cache():
    clear_cache()
    yield
    clear_cache()


def test_grammar_on_snippet() -> None:
    db = PciIds.parse(SNIPPET, "snippet")
    assert db.problems == [] and db.available and db.version == "2099.01.01"
    assert db.vendors == {0x1234: "Acme", 0x1AF4: "Red Hat, Inc.", 0x8086: "Intel Corporation"}
    assert db.device(0x1AF4, 0x1041) == "Virtio 1.0 network device"
    assert db.device(0x1AF4, 0x1045) == "Virtio 1.0 memory balloon"  # a TAB after the id is whitespace too
    assert db.device(0x8086, 0x1041) is None
    assert db.subsystem(0x1AF4, 0x1042, 0x1AF4, 0x1100) == "QEMU Virtio block"
    assert db.generic_subsystems == {0x1234 << 16 | 0x5678: "Generic widget"}
    assert db.class_name(0x03) == "Display controller" and db.subclass_name(0x03, 0x00) == "VGA compatible controller"
    assert db.prog_if_name(0x03, 0x00, 0x01) == "8514 controller" and db.prog_if_name(0x0C, 0x03, 0x30) == "XHCI"
    assert len(db.devices) == 3 and len(db.subsystems) == 1


@pytest.mark.parametrize(("class16", "plain", "nn"), [
    (0x0200, "Ethernet controller", "Ethernet controller [0200]"),  # sub-class known
    (0xFFFF, "Unassigned class [ffff]", "Unassigned class [ffff]"),  # only base known: number always
    (0x0280, "Network controller [0280]", "Network controller [0280]"),
    (0xEE00, "Class ee00", "Class [ee00]"),  # unknown
])
def test_class_fallbacks(class16: int, plain: str, nn: str) -> None:
    db = PciIds.parse(SNIPPET)
    assert db.class_text(class16, numeric=False) == plain
    assert db.class_text(class16) == nn


@pytest.mark.parametrize(("ids", "plain", "nn"), [
    ((0x1AF4, 0x1041), "Red Hat, Inc. Virtio 1.0 network device",
     "Red Hat, Inc. Virtio 1.0 network device [1af4:1041]"),
    ((0x8086, 0x0D57), "Intel Corporation Device 0d57", "Intel Corporation Device [8086:0d57]"),
    ((0x10EC, 0x8168), "Device 10ec:8168", "Device [10ec:8168]"),
])
def test_device_fallbacks(ids: tuple[int, int], plain: str, nn: str) -> None:
    db = PciIds.parse(SNIPPET)
    assert db.device_text(*ids, numeric=False) == plain
    assert db.device_text(*ids) == nn


@pytest.mark.parametrize(("ids", "plain", "nn"), [
    ((0x1AF4, 0x1042, 0x1AF4, 0x1100), "Red Hat, Inc. QEMU Virtio block",
     "Red Hat, Inc. QEMU Virtio block [1af4:1100]"),  # per-device entry
    ((0x1AF4, 0x1041, 0x1234, 0x5678), "Acme Generic widget", "Acme Generic widget [1234:5678]"),  # generic entry
    ((0x1AF4, 0x1041, 0x1AF4, 0x1041), "Red Hat, Inc. Virtio 1.0 network device",
     "Red Hat, Inc. Virtio 1.0 network device [1af4:1041]"),  # subsystem ids equal the device ids
    ((0x1AF4, 0x1041, 0x1AF4, 0x1042), "Red Hat, Inc. Device 1042", "Red Hat, Inc. Device [1af4:1042]"),
    ((0x1AF4, 0x1041, 0x10EC, 0x0001), "Device 10ec:0001", "Device [10ec:0001]"),  # unknown sub-vendor
])
def test_subsystem_rules(ids: tuple[int, int, int, int], plain: str, nn: str) -> None:
    db = PciIds.parse(SNIPPET)
    assert db.subsystem_text(*ids) == nn
    assert db.subsystem_text(*ids, numeric=False) == plain


def test_prog_if_rules() -> None:
    db = PciIds.parse(SNIPPET)
    assert db.prog_if_text(0x030000) == "(prog-if 00 [VGA controller])"  # zero but named
    assert db.prog_if_text(0x0C0330) == "(prog-if 30 [XHCI])"
    assert db.prog_if_text(0x0C0377) == "(prog-if 77)"  # non-zero, unnamed
    assert db.prog_if_text(0x020000) is None  # zero, unnamed: nothing


def test_malformed_lines_are_reported_not_fatal() -> None:
    text = ("1af4  Red Hat\n\t1041  Net\n\t1041  Net again\n\t\t\t1041  too deep\nzzzz  Not hex\n"
            "\t+1a  bad\nC 0g  bad class\nS xyz\n")
    db = PciIds.parse(text, "bad.ids")
    db.parse_all()
    assert db.device(0x1AF4, 0x1041) == "Net"  # first one kept
    assert sorted(db.problems) == sorted([
        "bad.ids:3: duplicate entry (first one kept)",
        "bad.ids:4: bad subsystem line (expected two tabs, 'ssss dddd  name', under a device)",
        "bad.ids:5: bad vendor line (expected 'vvvv  name')",
        "bad.ids:7: bad class line (expected 'C cc  name')",
        "bad.ids:8: bad generic subsystem line (expected 'S vvvv')",
    ])


def test_missing_database_gives_numbers_only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TINYHW_PCI_IDS", str(tmp_path / "nonexistent"))
    db = load_pci_ids()
    assert not db.available and "cannot read" in db.problems[0]
    assert db.class_text(0x0200, numeric=False) == "Class 0200"  # as `lspci -i /nonexistent` (§4.3)
    assert db.device_text(0x1AF4, 0x1041, numeric=False) == "Device 1af4:1041"
    assert db.device_text(0x1AF4, 0x1041) == "Device [1af4:1041]"


def test_no_file_anywhere(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TINYHW_PCI_IDS", raising=False)
    monkeypatch.setattr(pciids, "DEFAULT_PATHS", (str(tmp_path / "a.gz"), str(tmp_path / "a")))
    assert find_pci_ids() is None
    db = load_pci_ids()
    assert not db.available and db.vendors == {} and "no pci.ids file found" in db.problems[0]
    assert PciIds.load().device_name(0x1AF4, 0x1041) == "Device 1af4:1041"


def test_gzip_env_override_and_cache(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    gz = tmp_path / "pci.ids.gz"
    gz.write_bytes(gzip.compress(SNIPPET.encode()))
    monkeypatch.setenv("TINYHW_PCI_IDS", str(gz))
    assert find_pci_ids() == str(gz)
    db = load_pci_ids()
    assert db.available and db.device(0x1AF4, 0x1041) == "Virtio 1.0 network device"
    assert load_pci_ids() is db  # parsed once
    fresh = PciIds.load()  # default path, read again
    assert fresh is not db and fresh.device_name(0x1AF4, 0x1041) == "Red Hat, Inc. Virtio 1.0 network device"
    clear_cache()
    assert load_pci_ids() is not db


def test_default_search_prefers_gz(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("TINYHW_PCI_IDS", raising=False)
    plain, gz = tmp_path / "pci.ids", tmp_path / "pci.ids.gz"
    plain.write_text(SNIPPET)
    monkeypatch.setattr(pciids, "DEFAULT_PATHS", (str(gz), str(plain)))
    assert find_pci_ids() == str(plain)
    gz.write_bytes(gzip.compress(b""))
    assert find_pci_ids() == str(gz)


# -- the real database -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real() -> PciIds:
    if not Path(REAL).exists():
        pytest.fail(f"{REAL} is missing; install the pci.ids package (the spec's CI machine has it)")
    return PciIds.load(REAL)


def test_real_navi31_names(real: PciIds) -> None:
    assert real.device_text(0x1002, 0x744C, numeric=False) == (
        "Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 [Radeon RX 7900 XT/7900 XTX]")
    assert real.device_text(0x1002, 0x744C).endswith("XTX] [1002:744c]")
    assert real.subsystem_text(0x1002, 0x744C, 0x1DA2, 0xE471) == (
        "Sapphire Technology Limited NITRO+ RX 7900 XTX Vapor-X [1da2:e471]")
    assert real.class_text(0x0300) == "VGA compatible controller [0300]"
    assert real.prog_if_text(0x030000) == "(prog-if 00 [VGA controller])"
    assert real.device_text(0x10DE, 0x2684, numeric=False) == "NVIDIA Corporation AD102 [GeForce RTX 4090]"
    assert real.class_text(0x1200, numeric=False) == "Processing accelerators"


def test_real_file_parses_cleanly(real: PciIds) -> None:
    db = PciIds.load(REAL).parse_all()
    assert db.problems == []
    if db.version == "2023.04.10":  # the figures of spec §5
        assert (len(db.vendors), len(db.devices)) == (2325, 17616)


def test_real_file_loads_lazily() -> None:
    """Loading indexes vendor blocks only; one lookup parses one vendor's devices (counted, not timed)."""
    if not Path(REAL).exists():
        pytest.fail(f"{REAL} is missing; install the pci.ids package")
    t0 = time.perf_counter()
    db = PciIds.load(REAL)
    assert db._devices == {}
    db.device_text(0x1002, 0x744C)
    assert db._devices and {k >> 16 for k in db._devices} == {0x1002}
    print(f"loading pci.ids and one lookup: {time.perf_counter() - t0:.3f} s wall")


# -- round trip ---------------------------------------------------------------------------------------------

_names = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), min_size=1, max_size=12)
_id16 = st.integers(0, 0xFFFF)


@settings(max_examples=100, deadline=None)
@given(st.dictionaries(_id16, st.tuples(_names, st.dictionaries(_id16, st.tuples(
    _names, st.dictionaries(st.tuples(_id16, _id16), _names, max_size=3)), max_size=4)), max_size=6))
def test_round_trip(vendors: dict) -> None:
    lines = []
    for v, (vname, devs) in vendors.items():
        lines.append(f"{v:04x}  {vname}")
        for d, (dname, subs) in devs.items():
            lines.append(f"\t{d:04x}  {dname}")
            lines += [f"\t\t{sv:04x} {sd:04x}  {sname}" for (sv, sd), sname in subs.items()]
    db = PciIds.parse("\n".join(lines) + "\n")
    for v, (vname, devs) in vendors.items():
        assert db.vendor(v) == vname
        for d, (dname, subs) in devs.items():
            assert db.device(v, d) == dname
            for (sv, sd), sname in subs.items():
                assert db.subsystem(v, d, sv, sd) == sname
    assert db.problems == []


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.sampled_from("\t #CSX0123456789abcdefg "), max_size=16), max_size=30))
def test_random_text_never_crashes(lines: list[str]) -> None:
    db = PciIds.parse("\n".join(lines)).parse_all()
    assert all(isinstance(p, str) for p in db.problems)
    db.class_text(0x0200), db.device_text(0, 0), db.subsystem_text(0, 0, 0, 0)


# -- the fallback to tinyhw's own board names --------------------------------------------------------------------


def test_board_names_are_the_real_pci_ids_entries() -> None:
    """Each name tinyhw carries for its boards is what pci.ids says: the same output with or without the file."""
    from tinyhw.boards.pcinames import BOARD_NAMES

    real = PciIds.load(REAL)
    assert real.available
    for v, name in BOARD_NAMES.vendors.items():
        assert real.vendor(v) == name, hex(v)
    for key, name in BOARD_NAMES.devices.items():
        assert real.device(key >> 16, key & 0xFFFF) == name, hex(key)
    for key, name in BOARD_NAMES.subsystems.items():
        assert real.subsystem(key >> 48, key >> 32 & 0xFFFF, key >> 16 & 0xFFFF, key & 0xFFFF) == name, hex(key)
    for c, name in BOARD_NAMES.classes.items():
        assert real.class_name(c) == name
    for c, name in BOARD_NAMES.subclasses.items():
        assert real.subclass_name(c >> 8, c & 0xFF) == name
    for c, name in BOARD_NAMES.prog_ifs.items():
        assert real.prog_if_name(c >> 16, c >> 8 & 0xFF, c & 0xFF) == name


def test_missing_database_falls_back_to_board_names_and_hints_for_the_rest(tmp_path: Path) -> None:
    from tinyhw.boards.pcinames import load_names

    db = load_names(str(tmp_path / "nonexistent"))
    assert not db.available
    assert db.device_name(0x1002, 0x744C) == \
        "Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 [Radeon RX 7900 XT/7900 XTX]"
    assert db.class_text(0x0300) == "VGA compatible controller [0300]"
    assert db.prog_if_text(0x030000) == "(prog-if 00 [VGA controller])"
    assert db.subsystem_text(0x1002, 0x744C, 0x1DA2, 0xE471, numeric=False) == \
        "Sapphire Technology Limited NITRO+ RX 7900 XTX Vapor-X"
    assert db.name_origin(0x1002, 0x744C, 0x030000, (0x1DA2, 0xE471)) == \
        {"name_source": "tinyhw boards", "name_hint": None}
    # a device tinyhw does not describe: ids, and the hint to install pci.ids
    assert db.device_name(0x1AF4, 0x1041) == "Device 1af4:1041"
    other = db.name_origin(0x1AF4, 0x1041, 0x020000)
    assert other["name_source"] is None and "apt install pci.ids" in other["name_hint"]
    assert "TINYHW_PCI_IDS" in other["name_hint"]
    # a known board with a subsystem tinyhw has no name for still hints
    assert db.name_origin(0x1002, 0x744C, 0x030000, (0x1EAE, 0x7901))["name_hint"]


def test_a_real_database_wins_and_the_fallback_fills_only_its_gaps(tmp_path: Path) -> None:
    from tinyhw.boards.pcinames import load_names

    path = tmp_path / "pci.ids"
    path.write_text(SNIPPET)
    db = load_names(str(path))
    assert db.available and db.device_name(0x1AF4, 0x1041) == "Red Hat, Inc. Virtio 1.0 network device"
    assert db.name_origin(0x1AF4, 0x1041, 0x020000) == {"name_source": "pci.ids", "name_hint": None}
    assert db.name_source(0x1002, 0x744C) == "tinyhw boards"  # an old pci.ids without the board
    assert db.name_origin(0x1AF4, 0x9999, 0x020000) == {"name_source": None, "name_hint": None}  # file read: no hint
    plain = PciIds.load(str(path))
    assert plain.fallback is None and plain.device(0x1002, 0x744C) is None  # with_fallback left it as it was
