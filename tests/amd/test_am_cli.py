"""`tinyhw am info|boot|reset` and `tinyhw smi` end to end on the emulated Navi31, strict mode.

Boards: mock:navi31 (direct) and mock:navi31-usb (the real USB driver through the emulated ASM24
bridge). Firmware: Debian's firmware-amd-graphics extracted by tests/fetch_firmware.sh (these tests
fail, naming that command, when it is missing).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from amfake import FW_DIR
from clihelp import run
from testpaths import ROOT

from tinyhw.boards.navi31 import default_flash_path
from tinyhw.mocks.amd import boardstate

BOARDS = ["mock:navi31", "mock:navi31-usb"]


@pytest.fixture(scope="module")
def fwdir() -> str:
    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"Debian's firmware-amd-graphics is not extracted in {FW_DIR}: run bash tests/fetch_firmware.sh",
                    pytrace=False)
    return str(FW_DIR)


def last_command() -> dict:
    """The emulator's own counters of the last command (board state file)."""
    return boardstate.load(default_flash_path())["last_command"]


def _json(r) -> dict:
    assert r.code == 0, r.err
    return json.loads(r.out)


def boot(dev: str, fwdir: str, *extra: str):
    return run("--device", dev, "--json", "--stats", "am", "boot", "--yes", "--firmware-dir", fwdir, *extra)


@pytest.mark.parametrize("dev", BOARDS)
def test_info_on_an_untouched_board(dev, fwdir) -> None:
    doc = _json(run("--device", dev, "--json", "am", "info", "--firmware-dir", fwdir))
    emu = last_command()
    assert emu["vram_bytes_written"] == 0 and emu["reg_writes"] == 0 and emu["smu_messages"] == 0  # read-only
    assert doc["vram_mib"] == 24576 and doc["gfx_target"] == "gfx1100" and doc["vf"] is False
    versions = {ip["block"]: ip["version"] for ip in doc["discovery"]["ips"]}
    assert versions["mp0"] == "13.0.0" and versions["mp1"] == "13.0.0" and versions["gc"] == "11.0.0"
    assert doc["gc_info"]["derived"]["compute_units"] == 96
    st = doc["state"]
    assert not st["tinyhw_booted"] and not st["sos_alive"] and st["next_boot"] == "full"
    files = {f["file"]: f for f in doc["firmware"]["files"]}
    assert set(files) == {"psp_13_0_0_sos.bin", "smu_13_0_0.bin", "sdma_6_0_0.bin", "gc_11_0_0_mec.bin",
                          "gc_11_0_0_imu.bin", "gc_11_0_0_rlc.bin"}
    assert all(f["ok"] for f in files.values())
    assert files["psp_13_0_0_sos.bin"]["ucode_version"] == 0x310025


def test_info_smu_probe_after_boot(fwdir) -> None:
    _json(boot("mock:navi31", fwdir))
    doc = _json(run("--device", "mock:navi31", "--json", "am", "info", "--probe-smu"))
    assert doc["smu"] == {"alive": True, "version": 0x004E4B00}
    assert doc["state"]["tinyhw_booted"] and doc["state"]["scratch_reg5_tmr_size"] == 0x1200000


def test_info_human_output(fwdir) -> None:
    r = run("--device", "mock:navi31", "am", "info", "--firmware-dir", fwdir)
    assert r.code == 0, r.err
    assert "gfx1100" in r.out and "96 CUs" in r.out and "next am boot: full" in r.out


@pytest.mark.parametrize("dev", BOARDS)
def test_boot_partial_boot_smi_reset(dev, fwdir) -> None:
    r = boot(dev, fwdir)
    doc = _json(r)
    assert doc["boot"] == "full"
    steps = [s["step"] for s in doc["steps"]]
    assert steps.index("load smu") < steps.index("setup tmr") < steps.index("autoload rlc") < steps.index("flags")
    assert all(isinstance(s["seconds"], float) for s in doc["steps"])
    assert doc["tmr_size"] > 0 and doc["clocks_mhz"]["gfxclk"] > 0
    info = _json(run("--device", dev, "--json", "am", "info", "--firmware-dir", fwdir))
    assert info["state"]["tinyhw_booted"] and info["state"]["sos_alive"] and info["state"]["next_boot"] == "partial"
    again = _json(boot(dev, fwdir))
    assert again["boot"] == "partial" and again["tmr_size"] == doc["tmr_size"]
    assert not any(s["step"].startswith("psp") or s["step"].startswith("load") for s in again["steps"])
    smi = run("--device", dev, "--json", "--stats", "smi", "--once")
    m = _json(smi)
    assert m["clocks_mhz"]["gfx"] > 0 and m["power_w"]["limit"] > 0 and m["temperatures_c"]
    emu = last_command()  # one TransferTableSmu2Dram; the table address is never rewritten
    assert emu["smu_messages"] == 1 and emu["psp_commands"] == 0 and emu["reg_writes"] == 3
    if dev.endswith("-usb"):
        assert 0 < m["refresh"]["usb_transfers"] <= 20
    reset = _json(run("--device", dev, "--json", "am", "reset", "--yes"))
    assert reset["reset"] in ("smu", "psp")
    assert not reset["state"]["tinyhw_booted"] and not reset["state"]["sos_alive"]
    refused = run("--device", dev, "smi", "--once")
    assert refused.code == 2 and "no tinyhw boot has touched this gpu" in refused.err
    assert _json(boot(dev, fwdir))["boot"] == "full"


def test_smi_live_refreshes_and_human_table(fwdir) -> None:
    _json(boot("mock:navi31", fwdir))
    r = run("--device", "mock:navi31", "smi", "--count", "2", "--interval", "0.5")
    assert r.code == 0, r.err
    assert r.out.count("smu metrics") == 2 and "gfx" in r.out


def test_smi_off_a_terminal_is_one_refresh_and_the_interval_is_wall_time(fwdir, monkeypatch) -> None:
    """Off a terminal (a pipe, a log) smi prints one refresh unless --watch or --count asks for more, and waits
    --interval wall seconds between refreshes on an emulated board too (its clock would let it spin)."""
    from types import SimpleNamespace

    from tinyhw.boot.amd import Smi
    from tinyhw.cli import smi_cmd

    _json(boot("mock:navi31", fwdir))
    waits: list[float] = []
    monkeypatch.setattr(smi_cmd, "time", SimpleNamespace(sleep=waits.append))
    refresh, refreshes = Smi.refresh, []

    def counted(self):
        refreshes.append(1)
        if len(refreshes) > 5:  # bounds the old endless loop: it ends the command as a ctrl-c would
            raise KeyboardInterrupt
        return refresh(self)

    monkeypatch.setattr(Smi, "refresh", counted)
    r = run("--device", "mock:navi31", "smi")
    assert r.code == 0 and r.out.count("smu metrics") == 1 and waits == [], r.err
    refreshes.clear()
    r = run("--device", "mock:navi31", "smi", "--count", "3", "--interval", "0.25")
    assert r.code == 0 and r.out.count("smu metrics") == 3 and waits == [0.25, 0.25], r.err
    refreshes.clear()
    r = run("--device", "mock:navi31", "smi", "--watch", "--interval", "2")
    assert r.code == 130 and r.out.count("smu metrics") == 5  # until ctrl-c
    assert run("--device", "mock:navi31", "--json", "smi", "--watch").code == 2
    assert run("--device", "mock:navi31", "smi", "--once", "--count", "2").code == 2


def test_boot_needs_yes_and_writes_nothing_without_it(fwdir) -> None:
    r = run("--device", "mock:navi31", "--stats", "am", "boot", "--firmware-dir", fwdir)
    assert r.code == 2 and "needs --yes" in r.err and "plan: full boot" in r.err
    emu = last_command()
    assert emu["vram_bytes_written"] == 0 and emu["reg_writes"] == 0 and emu["smu_messages"] == 0


def _bad_dir(tmp: Path, fwdir: str, damage: str) -> str:
    d = tmp / damage
    d.mkdir()
    for name in ("psp_13_0_0_sos.bin", "smu_13_0_0.bin", "sdma_6_0_0.bin", "gc_11_0_0_mec.bin",
                 "gc_11_0_0_imu.bin", "gc_11_0_0_rlc.bin"):
        shutil.copy(Path(fwdir) / name, d / name)
    target = d / "psp_13_0_0_sos.bin"
    data = bytearray(target.read_bytes())
    if damage == "truncated":
        target.write_bytes(bytes(data[:100_000]))
    elif damage == "flipped":
        data[200_000] ^= 0x80
        target.write_bytes(bytes(data))
    elif damage == "foreign":
        target.write_bytes((Path(fwdir) / "psp_13_0_7_sos.bin").read_bytes())
    else:
        target.unlink()
    return str(d)


@pytest.mark.parametrize("dev", BOARDS)
@pytest.mark.parametrize("damage", ["truncated", "flipped", "foreign", "missing"])
def test_bad_firmware_refused_before_any_write(tmp_path, dev, damage, fwdir) -> None:
    r = boot(dev, _bad_dir(tmp_path, fwdir, damage))
    assert r.code == 2, r.err
    assert "psp_13_0_0_sos.bin" in r.err and "firmware-amd-graphics" in r.err
    emu = last_command()
    assert emu["vram_bytes_written"] == 0 and emu["reg_writes"] == 0 and emu["psp_commands"] == 0
    info = _json(run("--device", dev, "--json", "am", "info", "--firmware-dir", fwdir))
    assert not info["state"]["sos_alive"] and info["state"]["bootloader_ready"]


@pytest.mark.slow
def test_disconnect_sweep_always_ends_booted_or_says_reset(fwdir) -> None:
    """A boot cut inside each phase (by USB transfer number), then a new boot: booted, or one clear error."""
    dev = "mock:navi31-usb"
    starts = _step_starts(dev, fwdir)  # where each step starts, in USB transfers from the start of the command
    phases = ["psp firmware copy", "psp bootloader KDB", "psp bootloader SYS", "psp bootloader SOS", "km ring",
              "load toc", "firmware copy", "load smu", "setup tmr", "load rlc_g", "autoload rlc", "smu driver table",
              "clocks", "flags"]
    points = [starts[p][0] + max(1, starts[p][1] // 2) for p in phases] + [5]
    outcomes = []
    for n in points:
        cut = boot(f"{dev},faults=disconnect@{n}", fwdir)
        assert cut.code == 1 and "disconnected" in cut.err, (n, cut.err)
        after = boot(dev, fwdir)
        if after.code == 0:
            outcomes.append(json.loads(after.out)["boot"])
        else:
            lines = [ln for ln in after.err.splitlines() if ln.startswith("error:")]
            assert len(lines) == 1 and ("reset" in lines[0] or "power-cycle" in lines[0]), (n, after.err)
            outcomes.append("error")
            assert run("--device", dev, "mock", "reset", "--yes").code == 0
        assert _json(run("--device", dev, "--json", "am", "reset", "--yes"))["reset"] in ("smu", "psp", "none")
    # every cut point ends booted on the emulated board: nothing leaves the bootloader half-way for long
    assert outcomes.count("error") == 0, list(zip(points, outcomes, strict=True))
    assert "reset+full" in outcomes and "full" in outcomes


@pytest.mark.parametrize(("option", "message"), [
    ("psp=hang", "timed out after 10 s waiting for the psp bootloader"),
    ("smu=silent", "timed out after 10 s waiting for the smu to answer GetSmuVersion"),
])
def test_firmware_that_never_answers_times_out_on_virtual_time(option, message, fwdir, monkeypatch) -> None:
    slept: list[float] = []  # real sleeps, counted exactly instead of timing the run
    real_sleep = time.sleep
    monkeypatch.setattr(time, "sleep", lambda s: (slept.append(s), real_sleep(min(s, 0.01))))
    r = boot(f"mock:navi31,{option}", fwdir)
    assert r.code == 1 and message in r.err, r.err
    assert r.stats["modelled_s"] >= 10.0 and sum(slept) < 1.0, (r.stats, sum(slept))
    print(f"timed out after {r.stats['modelled_s']:.1f} s modelled, {r.stats['elapsed_s']:.2f} s wall")
    if option == "psp=hang":  # nothing runs that could mode-1 reset the board: say so, and how to power-cycle
        assert "power-cycle the board (emulated boards: tinyhw mock reset --yes)" in r.err
        again = run("--device", "mock:navi31", "am", "reset", "--yes")
        assert again.code == 1 and "no firmware runs that could reset the gpu" in again.err
        assert run("--device", "mock:navi31", "mock", "reset", "--yes").code == 0
    else:  # the sOS runs: a mode-1 reset recovers
        assert "tinyhw am reset --yes" in r.err
        assert _json(run("--device", "mock:navi31", "--json", "am", "reset", "--yes"))["reset"] in ("smu", "psp")
    assert _json(boot("mock:navi31", fwdir))["boot"] == "full"


def test_busy_smu_answer_is_retried(fwdir) -> None:
    doc = _json(boot("mock:navi31,smu=busy@2", fwdir))
    assert doc["boot"] == "full" and doc["clocks_mhz"]["gfxclk"] > 0


def test_board_running_firmware_is_reset_before_the_boot(fwdir) -> None:
    doc = _json(boot("mock:navi31,psp=sos", fwdir))
    assert doc["boot"] == "reset+full" and doc["steps"][0]["step"] == "mode-1 reset"
    assert doc["steps"][0]["path"] == "psp"


def test_unknown_firmware_allowed_but_rejected_by_the_psp(tmp_path, fwdir) -> None:
    """--allow-unknown-firmware skips the hash check; the (emulated) PSP then rejects the flipped SOS image."""
    bad = _bad_dir(tmp_path, fwdir, "flipped")
    r = boot("mock:navi31", bad, "--allow-unknown-firmware")
    assert r.code == 1 and "the psp bootloader rejected the SOS component" in r.err, r.err
    assert r.stats["modelled_s"] < 5  # the rejection is seen at once, not after the 10 s sOS wait
    assert _json(boot("mock:navi31", fwdir))["boot"] == "full"  # the real files boot it again


@pytest.mark.parametrize("extra, has_engine", [((), True), (("--no-copy-engine",), False)])
def test_boot_brings_up_the_copy_engine_unless_told_not_to(fwdir, extra, has_engine) -> None:
    """Issue 12: `am boot` continues past the SMU: page tables, hubs, IH, MEC and SDMA0 (a step of its own)."""
    r = run("--device", "mock:navi31-usb", "--json", "am", "boot", "--yes", "--firmware-dir", fwdir, *extra)
    doc = _json(r)
    names = [s["name"] if isinstance(s, dict) and "name" in s else s.get("step") for s in doc["steps"]]
    assert ("copy engine" in names) is has_engine, names
    assert ("copy engine" in r.err) is has_engine  # the plan names it


def _step_starts(dev: str, fwdir: str) -> dict[str, tuple[int, int]]:
    """Where each step of a clean full boot starts (usb transfers from the start of the command) and its count."""
    full = boot(dev, fwdir)
    doc = _json(full)
    at = full.stats["usb_transfers"] - sum(s["usb_transfers"] for s in doc["steps"])
    starts = {}
    for s in doc["steps"]:
        starts[s["step"]] = (at, s["usb_transfers"])
        at += s["usb_transfers"]
    assert _json(run("--device", dev, "--json", "am", "reset", "--yes"))["reset"]
    return starts


@pytest.mark.parametrize(("fault", "says"), [("disconnect", "disconnected"), ("timeout", "timed out"),
                                             ("stall", "stalled")])
def test_transport_fault_names_the_boot_step(fault, says, fwdir) -> None:
    """A cut transfer names the access and the boot step it cut, in the line and in the --json error document."""
    dev = "mock:navi31-usb"
    starts = _step_starts(dev, fwdir)
    for step in ("psp bootloader SOS", "load smu", "autoload rlc"):
        first, count = starts[step]
        cut = boot(f"{dev},faults={fault}@{first + count // 2}", fwdir)
        assert cut.code == 1 and cut.no_result, cut.err
        lines = [ln for ln in cut.err.splitlines() if ln.startswith("error:")]
        assert len(lines) == 1 and says in lines[0] and f"(in boot step '{step}')" in lines[0], cut.err
        err = json.loads(cut.out)["error"]
        assert err["step"] == step and f"in boot step '{step}'" in err["message"], err
        assert run("--device", dev, "mock", "reset", "--yes", "--force").code == 0


def test_boot_progress_reaches_a_log_with_verbose(fwdir) -> None:
    """stderr that is not a terminal: a line per step with -v (so a log shows where a boot stopped), none without."""
    quiet = boot("mock:navi31", fwdir)
    assert quiet.code == 0 and "step km ring ..." not in quiet.err
    assert _json(run("--device", "mock:navi31", "--json", "am", "reset", "--yes"))["reset"]
    r = run("-v", "--device", "mock:navi31,faults=disconnect@150000", "am", "boot", "--yes", "--firmware-dir", fwdir)
    assert r.code == 1
    lines = r.err.splitlines()
    assert "step km ring ..." in lines and any(ln.startswith("ok km ring ") and ln.endswith(" s") for ln in lines)
    started = [ln[5:-4] for ln in lines if ln.startswith("step ")]
    errors = [ln for ln in lines if ln.startswith("error:")]
    assert errors and f"(in boot step '{started[-1]}')" in errors[-1]  # the last step started is the one named


# The CLI in a child with its address space capped (an unbounded read fails there instead of filling this machine's
# memory); it reports its peak resident size on stderr when it ends. The peak is VmHWM of its own address space:
# getrusage's ru_maxrss is not, on Linux it carries the forking parent's (pytest's) resident size across exec.
_MEASURED = """import re, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
from tinyhw.cli import main
try:
    main(sys.argv[1:])
finally:
    with open("/proc/self/status") as f:
        print("peak_rss_kib", re.search(r"VmHWM:\\s+(\\d+) kB", f.read()).group(1), file=sys.stderr)
"""


def _boot_measured(fwdir: str) -> tuple[int, str, int, float]:
    root = str(ROOT)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-c", _MEASURED, "--device", "mock:navi31", "am", "boot", "--yes",
                        "--firmware-dir", fwdir], capture_output=True, text=True, timeout=120, cwd=root, check=False,
                       env={**os.environ, "PYTHONPATH": root}, stdin=subprocess.DEVNULL)
    seconds = time.monotonic() - t0
    peak = [ln for ln in p.stderr.splitlines() if ln.startswith("peak_rss_kib ")]
    assert peak, p.stderr
    return p.returncode, p.stderr, int(peak[-1].split()[1]) << 10, seconds


@pytest.mark.parametrize("bomb", ["sparse", "xz"])
def test_oversized_firmware_is_refused_fast_with_bounded_memory(tmp_path, bomb, fwdir) -> None:
    """An 8 GiB sparse psp_13_0_0_sos.bin, or a small .xz that decompresses to 1 GiB: exit 2 before any write,
    in seconds, the process never larger than the 16 MiB cap allows (the unbounded read needed 8 GiB / 1 GiB)."""
    from tests.cli.test_fileio import xz_bomb

    d = Path(_bad_dir(tmp_path, fwdir, "missing"))  # every file but psp_13_0_0_sos.bin
    if bomb == "sparse":
        with open(d / "psp_13_0_0_sos.bin", "wb") as f:
            f.truncate(8 << 30)
    else:
        assert xz_bomb(d / "psp_13_0_0_sos.bin.xz", 1 << 30).stat().st_size < 256 << 10
    code, err, peak, seconds = _boot_measured(str(d))
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(lines) == 1 and "psp_13_0_0_sos.bin" in lines[0], err
    assert ("is more than the 16 mib" if bomb == "sparse" else "decompresses to more than the 16 mib") in lines[0]
    assert "firmware-amd-graphics" in lines[0]
    assert peak < 160 << 20, peak
    print(f"refused after {seconds:.1f} s wall (the subprocess timeout is the hang bound)")
    emu = last_command()
    assert emu["vram_bytes_written"] == 0 and emu["reg_writes"] == 0 and emu["psp_commands"] == 0


def test_a_fifo_firmware_file_is_refused_not_opened(tmp_path, fwdir) -> None:
    d = Path(_bad_dir(tmp_path, fwdir, "missing"))
    os.mkfifo(d / "psp_13_0_0_sos.bin")
    code, err, _, seconds = _boot_measured(str(d))
    assert code == 2 and "it is a fifo" in err, err
    print(f"refused after {seconds:.1f} s wall (the subprocess timeout is the hang bound)")
