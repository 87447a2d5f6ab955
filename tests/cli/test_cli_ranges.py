"""Small CLI fixes of issue 10 item 9: range messages, negative numbers, pci show/config on the emulated boards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.mocks.amd.direct import DirectTransport


def test_pci_read_negative_offset_says_negative() -> None:
    r = run("--device", "mock:navi31", "pci", "read", "--", "5", "-1")
    assert r.code == 2 and "offset -1 is negative" in r.err and "0..0x0" not in r.err
    r = run("--device", "mock:navi31", "pci", "read", "7", "0")
    assert r.code == 2 and "bar 0x7 is outside 0x0-0x5" in r.err
    r = run("--device", "mock:navi31", "pci", "read", "0", "0", "--count", "0")
    assert r.code == 2 and "count 0x0 is outside 0x1-0x100000" in r.err


@pytest.mark.parametrize("offset", ["0x123456789abcdef1", "0x10000001"])
def test_pci_read_past_the_bar_is_out_of_range_whatever_the_alignment(offset: str) -> None:
    r = run("--device", "mock:navi31", "pci", "read", "0", offset)
    assert r.code == 2 and "outside the bar (size 0x10000000)" in r.err and "aligned" not in r.err
    r = run("--device", "mock:navi31", "pci", "read", "0", "0x2")
    assert r.code == 2 and "not dword aligned" in r.err


def test_flash_read_negative_numbers(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--stats", "flash", "read", "--", "-1", "4")
    assert r.code == 2 and "0x-1" not in r.err and "-1 is negative" in r.err
    assert r.stats["reg_reads"] == 0
    r = run("--device", dev(tmp_path), "flash", "read", "0", "--", "-4")
    assert r.code == 2 and "-4 is negative" in r.err


def test_flash_ops_range_messages() -> None:
    from tinyhw.errors import Refused
    from tinyhw.flash import FlashDevice, ops

    t = DirectTransport(Navi31Options.from_options({"timing": "instant", "strict": True}), spec=NAVI31)
    try:
        with FlashDevice(t) as d:
            for args, words in (((-1, 4), "the address -1 is negative"), ((0, -4), "the size -4 is negative"),
                                ((0x1FFFFF, 16), r"range 0x1fffff\+0x10 is not inside the flash")):
                with pytest.raises(Refused, match=words):
                    ops.read(d, *args)
    finally:
        t.close()


@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_pci_show_and_config_on_the_emulated_boards(tmp_path: Path, board: str) -> None:
    device = dev(tmp_path, board)
    r = run("--device", device, "--json", "pci", "show")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["vendor_id"], doc["device_id"], doc["class_code"]) == (0x1002, 0x744C, 0x030000)
    names = [c["name"] for c in doc["capabilities"]]
    assert names == ["Power Management", "Express", "MSI", "Advanced Error Reporting", "Physical Resizable BAR",
                     "Access Control Services"]
    assert doc["problems"] == [] and doc["transport"] in ("mock", "usb")
    r = run("--device", device, "pci", "show")
    assert r.code == 0 and "Capabilities: [200 v1] Physical Resizable BAR" in r.out
    r = run("--device", device, "--json", "pci", "config", "--full")
    assert r.code == 0, r.err
    data = bytes.fromhex(json.loads(r.out)["data"])
    assert len(data) == 4096 and data[:4] == bytes.fromhex("02104c74")
    r = run("--device", device, "pci", "config")
    lines = r.out.splitlines()
    assert r.code == 0 and lines[1].startswith("00: 02 10 4c 74") and len(lines) == 1 + 16 + 1
