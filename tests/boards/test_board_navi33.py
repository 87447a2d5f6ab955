"""A second AMD board from its description alone: ``mock:navi33`` / ``mock:navi33-usb`` (tinyhw/boards/navi33.py and
one registry row). Every feature asks the description, none names the board: probe, the register profile and IP
discovery, flash info/dump/write, am boot with Navi33's own Debian firmware, kernels run/exec, bench copy, prof
capture, trace record/replay, mock reset and power-cycle, and the labgrid fixtures' check. Kept short: one boot per
attachment."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from amfake import FW_DIR
from clihelp import run

from tinyhw.boards import by_pci, registry
from tinyhw.boards.navi31 import NAVI31
from tinyhw.boards.navi33 import NAVI33
from tinyhw.kernels.manifest import prebuilt_dir
from tinyhw.mocks.amd.ifwi_image import build_image

BANDWIDTH = next((prebuilt_dir() / "gfx1100").glob("bandwidth.*.elf"))


def _doc(*args: str) -> dict:
    r = run("--json", *args)
    assert r.code == 0, (r.out, r.err)
    return json.loads(r.out)


def _boot(device: str) -> dict:
    if not (FW_DIR / "psp_13_0_7_sos.bin").is_file():
        pytest.fail(f"navi33 firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    return _doc("--device", device, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))


def test_the_description_is_found_by_its_pci_identity_and_in_the_registry() -> None:
    assert by_pci(0x1002, 0x7480) is NAVI33 and by_pci(0x1002, 0x744C) is NAVI31 and by_pci(0x1002, 0x1) is None
    assert {"mock:navi33", "mock:navi33-usb"} <= {e.name for e in registry.boards()}
    assert registry.spec_named("navi33") is NAVI33 and "navi33" in registry.bridged_boards()


@pytest.mark.parametrize("board", ["mock:navi33", "mock:navi33-usb"])
def test_probe_and_discovery_report_the_description(board: str, tmp_path: Path) -> None:
    dev = f"{board},flash={tmp_path / 'f.bin'}"
    doc = _doc("--device", dev, "probe")
    assert (doc["vendor_id"], doc["device_id"], doc["revision"]) == (0x1002, 0x7480, 0xCF), doc
    disc = _doc("--device", dev, "reg", "discovery")
    ips = {i["block"]: i["version"] for i in disc["ips"]}
    assert {k: ips[k] for k in ("gc", "mp0", "mp1", "sdma0")} == {"gc": "11.0.2", "mp0": "13.0.7", "mp1": "13.0.7",
                                                                 "sdma0": "6.0.2"}, disc
    assert disc["vram_mib"] == 8192 and disc["gfx_target"] == "gfx1102"


def test_flash_info_dump_write_on_its_own_image(tmp_path: Path) -> None:
    dev = f"mock:navi33,flash={tmp_path / 'f.bin'},timing=instant"
    info = _doc("--device", dev, "flash", "info")
    assert (info["jedec_id"], info["size"]) == (NAVI33.flash_jedec.hex(), NAVI33.flash_size), info
    assert run("--device", dev, "flash", "dump", str(tmp_path / "d.bin")).code == 0
    dump = (tmp_path / "d.bin").read_bytes()
    assert dump == build_image(board=NAVI33) != build_image(board=NAVI31)
    pcir = dump.index(b"PCIR", 0x40000)
    assert struct.unpack_from("<HH", dump, pcir + 4) == (0x1002, 0x7480)  # its own VBIOS, not Navi31's
    new = bytearray(dump)
    new[0x180000:0x180010] = bytes(range(16))  # the NVRAM area: a change the write must carry
    (tmp_path / "new.bin").write_bytes(bytes(new))
    r = run("--device", dev, "flash", "write", str(tmp_path / "new.bin"), "--yes")
    assert r.code == 0, r.err
    assert (tmp_path / "f.bin").read_bytes() == bytes(new)


def test_boot_compute_bench_prof_trace_and_reset_on_mock_navi33(tmp_path: Path) -> None:
    flash = tmp_path / "f.bin"
    dev = f"mock:navi33,flash={flash}"
    run("--device", dev, "probe")
    pristine = flash.read_bytes()
    fresh = tmp_path / "fresh.bin"
    fresh.write_bytes(pristine)
    rec = tmp_path / "boot.pcapng"
    r = run("--device", dev, "--record", str(rec), "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    assert r.code == 0, r.err
    info = _doc("--device", dev, "am", "info")
    assert "13.0.7" in json.dumps(info) and "11.0.2" in json.dumps(info), info
    # kernels run and exec on the board's gfx11 core
    doc = _doc("--device", dev, "kernels", "run", "pattern", "--n", "1024")
    assert doc["check"]["ok"] and doc["device"] == "emulated navi33", doc
    words = struct.pack("<1024I", *range(7, 7 + 1024 * 3, 3))
    (tmp_path / "in.bin").write_bytes(words)
    r = run("--device", dev, "kernels", "exec", str(BANDWIDTH), "--grid", "2", "--block", "32", "--buffer",
            "zeros:4096", "--buffer", str(tmp_path / "in.bin"), "--out", f"0:{tmp_path / 'o.bin'}", "--timeout", "5")
    assert r.code == 0, r.err
    got = struct.unpack("<256I", (tmp_path / "o.bin").read_bytes()[:1024])
    assert got == tuple(w ^ 0x5A5A5A5A for w in struct.unpack("<256I", words[:1024]))
    # bench copy, verified
    rows = _doc("--device", dev, "bench", "copy", "--sizes", "4K", "--repeat", "1")["results"]
    assert [x["verified"] for x in rows] == [4096, 4096]
    # prof capture: two shader engines and the gfx1102 target, from its discovery
    cap = _doc("--device", dev, "prof", "capture", "pattern", "-o", str(tmp_path / "cap"))
    assert cap["check"]["ok"] and len(cap["shader_engines"]) == NAVI33.gc_info["gc_num_se"]
    summary = _doc("prof", "summary", str(tmp_path / "cap"))
    assert summary["device"]["target"] == "gfx1102" and summary["device"]["cus"] == 32
    # trace replay of the recorded boot on a fresh navi33 (and refused on a navi31)
    r = run("--device", f"mock:navi33,flash={fresh}", "trace", "replay", str(rec))
    assert r.code == 0 and "no divergence" in r.out + r.err, r.err
    r = run("--device", f"mock:navi31,flash={tmp_path / 'n31.bin'}", "trace", "replay", str(rec))
    assert r.code != 0 and "1002:7480" in r.err
    # mock reset: the board's own factory image back, the state file gone
    flash.write_bytes(pristine[:-1] + b"\0")  # contents of the user's: kept as the backup
    r = run("--device", dev, "mock", "reset", "--yes")
    assert r.code == 0, r.err
    assert flash.read_bytes() == build_image(board=NAVI33) and not Path(str(flash) + ".board.json").exists()
    assert Path(str(flash) + ".bak").read_bytes() == pristine[:-1] + b"\0"


def test_usb_attachment_boots_and_runs_a_kernel(tmp_path: Path) -> None:
    dev = f"mock:navi33-usb,flash={tmp_path / 'f.bin'}"
    boot = _boot(dev)
    assert "13.0.7" in json.dumps(boot) or boot, boot
    doc = _doc("--device", dev, "kernels", "run", "pattern", "--n", "1024")
    assert doc["check"]["ok"] and doc["device"] == "emulated navi33", doc
    r = run("--device", dev, "mock", "power-cycle")
    assert r.code == 0 and "booted partition" in r.out, r.err


def test_a_fresh_machine_creates_the_boards_default_file() -> None:
    """Without flash=, each board's default file is created with its cache directory, on first use."""
    assert not NAVI33.state_path().parent.exists()
    assert run("--device", "mock:navi33", "probe").code == 0
    assert NAVI33.state_path().read_bytes() == build_image(board=NAVI33)
    assert NAVI33.state_path() != NAVI31.state_path() and not NAVI31.state_path().exists()


def test_the_labgrid_fixtures_ask_the_description() -> None:
    pytest.importorskip("labgrid")
    from tinyhw.labgrid.fixtures import bootable

    assert bootable(0x1002, 0x7480) is None and bootable(0x1002, 0x744C) is None
    assert "ad102" in (bootable(0x10DE, 0x2684) or "") and "does not describe" in (bootable(0x1234, 0x1) or "")


def test_its_mmhub_is_3_0_2_at_the_offsets_a_peer_driver_reads(tmp_path: Path) -> None:
    """MMHUB 3.0.2 has its own register table (Linux mmhub_3_0_2): MMMC_VM_FB_LOCATION_BASE sits at 0x6a1b0, where
    tinygrad's AMD driver reads it on a Navi33, not at mmhub_3_0_0's 0x6a3b0; the strict emulated board answers it."""
    import tinyhw
    from tinyhw import regs

    assert regs.asic("navi33").offset("mmhub.MMMC_VM_FB_LOCATION_BASE") == 0x6A1B0
    assert regs.asic("navi31").offset("mmhub.MMMC_VM_FB_LOCATION_BASE") == 0x6A3B0
    with tinyhw.open(f"mock:navi33,strict,flash={tmp_path / 'f.bin'}") as dev:
        dev.transport.bar(5).read32(0x6A1B0)  # strict: an offset the model does not cover would raise


def test_the_command_processor_spreads_waves_over_the_boards_own_compute_units(tmp_path: Path) -> None:
    """The modelled dispatch time divides by the CUs the description's GC info gives (Navi33: 2 SEs x 2 SAs x 4 WGPs
    x 2 = 32, Navi31: 96), not by one board's count."""
    import tinyhw

    assert (NAVI31.compute_units, NAVI33.compute_units) == (96, 32)
    for name, cus in (("navi31", 96), ("navi33", 32)):
        with tinyhw.open(f"mock:{name},flash={tmp_path / (name + '.bin')}") as dev:
            assert dev.board.am.cp.cus == cus
