"""`probe`, `list` and `mock reset` end to end on both emulated boards, and the bridge's error paths."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from clihelp import run

from tinyhw.connect import open_device
from tinyhw.formats.pciids import PciIds
from tinyhw.probe import probe
from tinyhw.transport.devstr import parse_device

BOARDS = ["mock:navi31", "mock:navi31-usb"]
NAVI31_NAME = "Advanced Micro Devices, Inc. [AMD/ATI] Navi 31 [Radeon RX 7900 XT/7900 XTX]"
STATS_KEYS = {"usb_transfers", "round_trips", "tlp_reads", "tlp_writes", "reg_reads", "reg_writes",
              "bytes_in", "bytes_out", "elapsed_s", "modelled_s"}


@pytest.mark.parametrize("board", BOARDS)
def test_probe_json_document(board: str) -> None:
    r = run("--device", board, "--json", "--stats", "probe")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert (doc["vendor_id"], doc["device_id"], doc["revision"], doc["class_code"]) == (0x1002, 0x744C, 0xC8, 0x030000)
    assert doc["name"] == NAVI31_NAME
    assert doc["subsystem_name"] == "Sapphire Technology Limited NITRO+ RX 7900 XTX Vapor-X"
    assert doc["emulated"] is True
    bars = {b["index"]: b for b in doc["bars"]}
    assert sorted(bars) == [0, 2, 4, 5]
    assert bars[0]["kind"] == "memory" and bars[0]["is_64bit"] and bars[0]["prefetchable"]
    assert bars[2]["size"] == 2 << 20 and bars[2]["is_64bit"] and bars[2]["prefetchable"]
    assert bars[4]["kind"] == "io" and bars[4]["size"] == 256
    assert bars[5]["size"] == 1 << 20 and not bars[5]["is_64bit"] and not bars[5]["prefetchable"]
    assert doc["link"]["max_speed"] == "16GT/s" and doc["link"]["max_width"] == 16
    assert doc["resizable_bar"][0]["supported"][-1] == 32 << 30
    assert set(r.stats) >= STATS_KEYS
    assert doc["problems"] == []
    if board == "mock:navi31-usb":
        assert doc["transport"] == "usb"
        # opening through the bridge resizes BAR0 to the largest ReBAR size, and sizing finds it
        assert bars[0]["size"] == 32 << 30 and doc["resizable_bar"][0]["current"] == 32 << 30
        assert doc["link"]["current_speed"] == "8GT/s" and doc["link"]["current_width"] == 4
        assert doc["bridge"]["product"] == "custom v0.1" and doc["bridge"]["usb_speed"] == "superspeed"
        assert doc["bridge"]["ltssm"] == 0x78
        assert r.stats["usb_transfers"] > 0 and r.stats["tlp_reads"] > 0
    else:
        assert doc["transport"] == "mock"
        assert bars[0]["size"] == 256 << 20 and bars[0]["address"] == 0x78_0000_0000
        assert r.stats["usb_transfers"] == 0 and r.stats["round_trips"] > 0


@pytest.mark.parametrize("board", BOARDS)
def test_probe_human_output(board: str) -> None:
    r = run("--device", board, "probe")
    assert r.code == 0, r.err
    assert NAVI31_NAME in r.out and "bar5: memory 1M" in r.out and "resizable bar0" in r.out


@pytest.mark.parametrize("board", BOARDS)
def test_probe_never_touches_a_bar_register(board: str) -> None:
    opened = open_device(parse_device(board))
    try:
        probe(opened.transport, PciIds.load())
        board_model = getattr(opened.transport, "board", None)
        if board_model is None:  # usb: the board sits behind the emulated bridge
            assert opened.emulator_stats is not None
        t = opened.transport
        assert t.counters.reg_reads == 0 and t.counters.reg_writes == 0
    finally:
        opened.close()


def test_usb_probe_really_goes_through_pyusb_and_counts_agree() -> None:
    """The emulator's own count of the transfers it answered equals the driver's count."""
    opened = open_device(parse_device("mock:navi31-usb"))
    try:
        import usb.core

        assert isinstance(opened.transport.found.device, usb.core.Device)
        probe(opened.transport, PciIds.load())
        driver = opened.transport.counters
        emulator = opened.emulator_stats()
        assert emulator["usb_transfers"] == driver.usb_transfers > 100
        assert emulator["tlp_reads"] == driver.tlp_reads and emulator["tlp_writes"] == driver.tlp_writes
        assert emulator["bytes_in"] == driver.bytes_in and emulator["bytes_out"] == driver.bytes_out
    finally:
        opened.close()


def test_usb_probe_counts_are_deterministic() -> None:
    a = run("--device", "mock:navi31-usb", "--stats", "--json", "probe").stats
    b = run("--device", "mock:navi31-usb", "--stats", "--json", "probe").stats
    a.pop("elapsed_s"), b.pop("elapsed_s")
    assert a == b


@pytest.mark.parametrize(("fault", "message"), [
    ("disconnect@30", "device disconnected"),
    ("timeout@30", "timed out"),
    ("ur@60", "unsupported request"),
    ("ca@60", "completer abort"),
])
def test_bridge_error_paths(fault: str, message: str) -> None:
    r = run("--device", f"mock:navi31-usb,faults={fault}", "--stats", "probe")
    assert r.code == 1, r.err
    errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and message in errors[0], r.err
    assert "Traceback" not in r.err
    assert r.no_result
    assert set(r.stats) >= STATS_KEYS  # --stats is printed even when the command fails


def test_transient_tlp_errors_are_retried() -> None:
    clean = run("--device", "mock:navi31-usb", "--stats", "--json", "probe")
    r = run("--device", "mock:navi31-usb,faults=tlp-error@40+tlp-timeout@80+crs@120", "--stats", "--json", "probe")
    assert r.code == 0, r.err
    assert json.loads(r.out)["bars"] == json.loads(clean.out)["bars"]
    assert r.stats["usb_transfers"] > clean.stats["usb_transfers"]  # the retries are visible in the counters


@pytest.mark.parametrize("link", ["no-gpu", "wedged"])
def test_link_down_is_reported_with_the_ltssm_state(link: str) -> None:
    r = run("--device", f"mock:navi31-usb,link={link}", "probe")
    assert r.code == 1
    assert "pcie link not up" in r.err and "ltssm 0x" in r.err


@pytest.mark.parametrize("link", ["down", "slow"])
def test_link_brought_up_by_the_driver(link: str) -> None:
    r = run("--device", f"mock:navi31-usb,link={link}", "--json", "probe")
    assert r.code == 0, r.err
    assert json.loads(r.out)["bridge"]["ltssm"] == 0x78


def test_high_speed_bridge() -> None:
    r = run("--device", "mock:navi31-usb,speed=hs", "--json", "probe")
    assert r.code == 0, r.err
    assert json.loads(r.out)["bridge"]["usb_speed"] == "high-speed"


def test_second_process_is_refused_by_the_lock() -> None:
    """Both emulated boards share one flash file, hence one lock: a second tinyhw process gets exit 3."""
    opened = open_device(parse_device("mock:navi31"))
    try:
        r = subprocess.run([sys.executable, "-m", "tinyhw", "--device", "mock:navi31-usb", "probe"],
                           capture_output=True, text=True, check=False)
        assert r.returncode == 3
        assert "in use by pid" in r.stderr and r.stderr.count("\n") == 1
    finally:
        opened.close()
    assert run("--device", "mock:navi31-usb", "probe").code == 0


def test_mock_reset_needs_yes_and_restores_the_image(tmp_path) -> None:
    flash = tmp_path / "board.bin"
    dev = f"mock:navi31,flash={flash}"
    assert run("--device", dev, "probe").code == 0  # creates the file
    pristine = flash.read_bytes()
    flash.write_bytes(b"\0" * len(pristine))
    r = run("--device", dev, "mock", "reset")
    assert r.code == 2 and "--yes" in r.err
    assert flash.read_bytes() == b"\0" * len(pristine)  # refused: untouched
    r = run("--device", dev, "--json", "mock", "reset", "--yes")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert flash.read_bytes() == pristine and doc["path"] == str(flash)
    assert (tmp_path / "board.bin.bak").read_bytes() == b"\0" * len(pristine)


def test_mock_reset_refuses_real_devices() -> None:
    r = run("--device", "usb:0", "mock", "reset", "--yes")
    assert r.code == 2 and "emulated boards only" in r.err


@pytest.mark.parametrize("board", [*BOARDS, "mock:ad102"])
def test_probe_without_pci_ids_names_the_board_from_tinyhw(board: str, monkeypatch, tmp_path) -> None:
    """A fresh machine without pci.ids: names from tinyhw's board descriptions, and --json says so."""
    name = NAVI31_NAME if board != "mock:ad102" else "NVIDIA Corporation AD102 [GeForce RTX 4090]"
    with_file = json.loads(run("--device", board, "--json", "probe").out)
    assert with_file["name"] == name and with_file["name_source"] == "pci.ids"
    monkeypatch.setenv("TINYHW_PCI_IDS", str(tmp_path / "missing"))
    r = run("--device", board, "--json", "probe")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["name"] == name and doc["name_source"] == "tinyhw boards" and doc["name_hint"] is None
    if board != "mock:ad102":
        assert doc["class_name"] == "VGA compatible controller"
        assert doc["subsystem_name"] == "Sapphire Technology Limited NITRO+ RX 7900 XTX Vapor-X"
    human = run("--device", board, "probe")
    assert name in human.out and "Device 1002:744c" not in human.out and "Class 0300" not in human.out
    assert "pci.ids" not in human.err  # every name is known: no hint


def test_pci_list_without_pci_ids_hints_at_installing_it(monkeypatch, tmp_path) -> None:
    """This machine's functions are no tinyhw board: ids only, and one note saying how to get names."""
    monkeypatch.setenv("TINYHW_PCI_IDS", str(tmp_path / "missing"))
    r = run("--json", "pci", "list")
    assert r.code == 0, r.err
    rows = json.loads(r.out)
    assert rows and all(row["name_source"] is None for row in rows if row["vendor_id"] not in (0x1002, 0x10DE))
    assert r.err.count("apt install pci.ids") == 1


def test_pci_show_without_pci_ids_uses_board_names(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TINYHW_PCI_IDS", str(tmp_path / "missing"))
    r = run("--device", "mock:navi31", "pci", "show")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == ("mock:navi31 VGA compatible controller [0300]: " + NAVI31_NAME
                        + " [1002:744c] (rev c8) (prog-if 00 [VGA controller])")
    assert lines[1] == "\tSubsystem: Sapphire Technology Limited NITRO+ RX 7900 XTX Vapor-X [1da2:e471]"
    doc = json.loads(run("--device", "mock:navi31", "--json", "pci", "show").out)
    assert doc["name_source"] == "tinyhw boards" and doc["name_hint"] is None
