"""``nv boot`` / ``nv info`` / ``nv reset`` against the emulated AD102, end to end, from Python and the CLI."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clihelp import run
from nvboothelp import boot, device, firmware_set, reset, with_real_gsp_rm

from tinyhw.boot import nv
from tinyhw.boot.nv.fwfiles import KNOWN, load_firmware
from tinyhw.boot.nv.gpu import chip_params
from tinyhw.errors import OperationFailed, Refused, TinyhwError
from tinyhw.mocks.nvidia import nv_gsp

#: the falcon starts of a boot: FWSEC, the booter, then the sequencer's core start and core resume
SEQUENCED = [("gsp", 0), ("sec2", 0), ("gsp", 0), ("sec2", 0)]

STEP_NAMES = set(nv.STEPS)


def test_boot_reaches_the_first_rpcs_and_names_every_step(tmp_path: Path) -> None:
    seen: list[str] = []
    result, err, board = boot(tmp_path, on_step=lambda n, p, d: seen.append(n) if p == "done" else None)
    assert err is None, err
    assert seen == list(nv.STEPS)
    assert result.gsp == {"gpu_name": nv_gsp.GPU_NAME, "gpu_short_name": "AD102", "fb_size": 24 << 30,
                          "fb_regions": 1}
    assert result.sequencer_runs == 1
    gsp = board.secure.gsp_rm
    assert gsp.received[:2] == [72, 73] and 65 in gsp.received and not gsp.problems
    assert board.registers[0x1180F8] & (1 << 26)  # the sequencer's read-modify-write landed
    assert board.secure.results == SEQUENCED
    lo, hi = result.wpr2
    assert hi and lo == (result.layout["wpr_start"] >> 12) << 4
    json.dumps(result.to_doc())


@pytest.mark.parametrize(("options", "match"), [
    ("driver=nvidia", "bound to the nvidia driver"), ("driver=nouveau", "bound to the nouveau driver"),
    ("power=d3hot", "not d0"), ("power=suspended", "not d0"), ("gsp=running", "wpr2 is already up"),
])
def test_refused_before_any_bar_write(tmp_path: Path, options: str, match: str) -> None:
    result, err, board = boot(tmp_path, options)
    assert isinstance(err, Refused) and err.exit_code == 2 and match in str(err)
    assert board.writes == []  # counted on the board: not one BAR write
    if "wpr2" in match:
        assert "nv reset --yes" in err.hint and "function-level reset" in err.hint


def test_a_gpu_tinyhw_booted_is_refused_until_reset(tmp_path: Path) -> None:
    assert boot(tmp_path)[1] is None
    _, err, board = boot(tmp_path)
    assert isinstance(err, Refused) and "wpr2 is already up" in str(err) and board.writes == []
    done = reset(tmp_path)
    assert done["wpr2_before"][1] and done["wpr2_after"] == [0, 0]
    assert boot(tmp_path)[1] is None


@pytest.mark.parametrize(("options", "step", "what"), [
    ("gsp-fault=fwsec-error", "fwsec-frts", "mailbox0 0xf5ec0005"),
    ("gsp-fault=booter-timeout", "start gsp", "sec2 falcon halt"),
    ("gsp-fault=queue-silent", "status queue", "did not initialise its status queue"),
])
def test_faults_give_one_line_naming_the_step_and_the_reset(tmp_path: Path, options: str, step: str,
                                                            what: str) -> None:
    _, err, _ = boot(tmp_path, options)
    assert isinstance(err, TinyhwError) and err.exit_code == 1
    text = str(err)
    assert what in text and f"(in boot step '{step}')" in text and "\n" not in text
    assert "nv reset --yes" in err.hint


def test_a_boot_stops_where_the_booter_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nv_gsp, "BOOTER_SIGNED", {})  # the board trusts no signature
    _, err, _ = boot(tmp_path)
    assert isinstance(err, OperationFailed) and "sec2 mailbox0 0xb0070001" in str(err)


def test_firmware_checks(tmp_path: Path) -> None:
    fw = firmware_set(tmp_path)
    chip = chip_params(0x19, 2)
    with pytest.raises(Refused, match="not a known release"):
        load_firmware(fw, chip)
    assert load_firmware(fw, chip, allow_unknown=True).version == "535.261.03"
    booter = fw / "ad102" / "gsp" / "booter_load-535.261.03.bin"
    good = booter.read_bytes()
    booter.write_bytes(b"\0" * 64)
    with pytest.raises(Refused, match="not a booter image"):
        load_firmware(fw, chip, allow_unknown=True)
    booter.unlink()
    with pytest.raises(Refused, match="booter_load-535.261.03.bin is missing"):
        load_firmware(fw, chip, allow_unknown=True)
    booter.write_bytes(good)
    (fw / "535.261.03").rename(fw / "535.999")
    with pytest.raises(Refused, match="says version 535.261.03, not 535.999"):
        load_firmware(fw, chip, allow_unknown=True)


def test_firmware_refusal_comes_before_any_write_and_amd_boards_are_refused(tmp_path: Path) -> None:
    from tinyhw.connect import open_device

    opened = open_device(device(tmp_path))
    try:
        gpu = nv.preflight_boot(opened.transport)
        with pytest.raises(Refused, match="no gsp-rm 9.9"):
            load_firmware(firmware_set(tmp_path), gpu.chip, version="9.9")
        assert opened.transport.board.writes == [] and opened.transport.counters.reg_writes == 0
    finally:
        opened.close()
    r = run("--device", "mock:navi31", "nv", "boot", "--yes")
    assert r.code == 2 and "not an nvidia gpu" in r.err


def test_real_debian_gsp_rm_boots_the_emulated_board(tmp_path: Path) -> None:
    """Debian's 36 MiB gsp_ga10x.bin: its .fwimage through a radix-3 table of several level-2 pages, its ad10x
    signature; the emulated booter walks the table to the image's last page."""
    with_real_gsp_rm(tmp_path)
    result, err, board = boot(tmp_path)
    assert err is None, err
    # a real image has no invented marker: the emulated booter knows it by its signature, as a release
    assert board.secure.gsp_rm.version == "535.261.03"
    assert result.gsp["fb_size"] == 24 << 30  # ... and answers in the 535 layout, the real image's branch
    assert board.iommu.stats["faults"] == 0


def test_real_debian_gsp_rm_is_a_known_release(tmp_path: Path) -> None:
    fw = with_real_gsp_rm(tmp_path)
    with pytest.raises(Refused, match="bootloader-535.261.03.bin is not a known release"):
        load_firmware(fw, chip_params(0x19, 2))  # gsp-rm passes its pin; the invented booter does not
    got = load_firmware(fw, chip_params(0x19, 2), allow_unknown=True)
    assert got.files["gsp-rm"].known_as == "535.261.03" and len(got.gsp_image) > 1 << 20
    assert KNOWN[got.files["gsp-rm"].sha256] == ("535.261.03", "gsp_ga10x.bin")


def test_cli_boot_info_reset_with_json(tmp_path: Path) -> None:
    dev, fw = device(tmp_path), str(firmware_set(tmp_path))
    r = run("--device", dev, "--json", "nv", "info")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["chip"]["name"] == "AD102" and doc["gsp"] is None and not doc["wpr2_up"]
    r = run("--device", dev, "nv", "boot", "--firmware-dir", fw, "--allow-unknown-firmware")
    assert r.code == 2 and "needs --yes" in r.err
    r = run("--device", dev, "--json", "nv", "boot", "--yes", "--firmware-dir", fw, "--allow-unknown-firmware")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [s["step"] for s in doc["steps"]] == list(nv.STEPS) and doc["gsp"]["gpu_name"] == nv_gsp.GPU_NAME
    r = run("--device", dev, "--json", "nv", "info")
    doc = json.loads(r.out)
    assert doc["gsp"]["fb_size"] == 24 << 30 and doc["gsp_riscv_active"] and doc["wpr2_up"]
    r = run("--device", dev, "nv", "info")
    assert nv_gsp.GPU_NAME in r.out and "24576 MiB" in r.out
    r = run("--device", dev, "nv", "boot", "--yes", "--firmware-dir", fw, "--allow-unknown-firmware")
    assert r.code == 2 and "wpr2 is already up" in r.err and "nv reset --yes" in r.err
    r = run("--device", dev, "--json", "nv", "reset", "--yes")
    assert r.code == 0 and json.loads(r.out)["wpr2_after"] == [0, 0]
    r = run("--device", dev, "-v", "nv", "boot", "--yes", "--firmware-dir", fw, "--allow-unknown-firmware")
    assert r.code == 0 and all(f"step {s} ..." in r.err and f"ok {s}" in r.err for s in nv.STEPS), r.err
    assert run("--device", dev, "nv", "reset", "--yes").code == 0
    assert json.loads(run("--device", dev, "--json", "nv", "info").out)["gsp"] is None
    r = run("--device", dev + ",gsp-fault=fwsec-error", "nv", "boot", "--yes", "--firmware-dir", fw,
            "--allow-unknown-firmware")
    assert r.code == 1 and "(in boot step 'fwsec-frts')" in r.err
    r = run("--device", dev + ",driver=nvidia", "nv", "boot", "--yes", "--firmware-dir", fw)
    assert r.code == 2 and "nvidia driver" in r.err
    r = run("--device", dev + ",driver=nouveau", "nv", "info")
    assert r.code == 2 and "nouveau driver" in r.err and "tinyhw probe" in r.err
    r = run("--device", dev + ",driver=nvidia", "nv", "reset", "--yes")
    assert r.code == 2 and "does not reset a gpu a driver owns" in r.err



def test_a_gpu_reading_all_ones_is_refused_as_not_in_d0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A transport without sysfs attributes (vfio) still learns that the gpu is not in D0: BAR0 reads all ones."""
    from tinyhw.mocks.nvidia.ad102 import Ad102Board

    monkeypatch.setattr(Ad102Board, "attributes", lambda self: {})  # no power_state to read, as over vfio
    _, err, board = boot(tmp_path, "power=d3hot")
    assert isinstance(err, Refused) and "not in d0" in str(err) and board.writes == []


def _nv570() -> Path:
    fw = Path(os.environ["TINYHW_FIRMWARE_DIR"]) / "nvidia-570" / "nvidia"
    if not (fw / "ad102" / "gsp" / "booter_load-570.144.bin").is_file():
        pytest.fail(f"{fw} lacks the 570.144 set: run `bash tests/fetch_firmware.sh` first", pytrace=False)
    return fw


def test_nv_boot_with_the_real_570_files(tmp_path: Path) -> None:
    """linux-firmware's 570.144 set (Debian sid's firmware-nvidia-graphics, tinygrad's pins): the production-signed
    booter passes the emulated boot ROM, the real GSP-RM is known as 570.144 and answers in the 570 layout."""
    fw = _nv570()
    r = run("--device", f"mock:ad102,strict,state={tmp_path / 'ad102.json'}", "--json", "nv", "boot", "--yes",
            "--firmware-dir", str(fw))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["firmware"]["version"] == "570.144"
    assert all(f["known_release"] == "570.144" for f in doc["firmware"]["files"])
    assert doc["gsp"] == {"gpu_name": nv_gsp.GPU_NAME, "gpu_short_name": "AD102", "fb_size": 24 << 30,
                          "fb_regions": 1}


def test_a_570_boot_answered_in_535_s_layout_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The emulated GSP-RM taking the real 570 image for 535 (as it did before it knew real images by their
    signature) answers a 535-sized static info: the boot fails instead of reporting an empty name."""
    monkeypatch.setattr(nv_gsp, "GSP_RM_SIGNED", {k: ("535.261.03", v[1]) for k, v in nv_gsp.GSP_RM_SIGNED.items()})
    r = run("--device", f"mock:ad102,strict,state={tmp_path / 'ad102.json'}", "nv", "boot", "--yes",
            "--firmware-dir", str(_nv570()))
    assert r.code == 1 and "static info is 2168 bytes, the 570 branch's gspstaticconfiginfo is 1656" in r.err.lower()
