"""The emulators' counters on a fixed set of commands equal a recorded baseline (tests/data/counters-baseline.json).

A refactoring of the emulated boards, the transports or the clock must leave every count the driver sees
(``--stats``: transfers, round trips, TLPs, register accesses, bytes) and the emulator's virtual time
(``modelled_s``) exactly as they were: these are the figures users and benches rely on. A change that is
meant to alter them (a driver that needs fewer transfers, a model that charges a different latency) re-records
the baseline on purpose and says why in its commit::

    TINYHW_RECORD_BASELINE=1 python -m pytest tests/repo/test_counters_baseline.py

Every scenario runs on the device clock (no host CPU on the virtual clock), in strict mode, on a fresh board.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from amfake import FW_DIR
from clihelp import run
from testpaths import DATA

BASELINE = DATA / "counters-baseline.json"
#: Wall-clock figures are this machine's; everything else is exact.
NOT_COMPARED = {"elapsed_s"}

#: name -> the commands of one scenario, run in order on one fresh board (``{D}``: the device string,
#: ``{tmp}``: the scenario's folder). Only the last command's --stats line is compared, plus each
#: command's exit code.
SCENARIOS: dict[str, tuple[str, ...]] = {
    "usb-probe": ("--device {D} --stats probe",),
    "direct-probe": ("--device {Dd} --stats probe",),
    "ad102-probe": ("--device mock:ad102 --stats probe",),
    "usb-flash-info": ("--device {D} --stats flash info",),
    "usb-flash-dump": ("--device {D} --stats flash dump {tmp}/dump.bin",),
    "direct-flash-dump": ("--device {Dd} --stats flash dump {tmp}/dump.bin",),
    "usb-reg-read": ("--device {D} --stats reg read smuio.ROM_SW_STATUS",),
    "usb-am-boot": ("--device {D} --stats am boot --yes --firmware-dir {fw}",),
    "direct-am-boot": ("--device {Dd} --stats am boot --yes --firmware-dir {fw}",),
    "usb-smi": ("--device {D} am boot --yes --firmware-dir {fw}", "--device {D} --stats smi --once"),
    "direct-am-reset": ("--device {Dd} am boot --yes --firmware-dir {fw}", "--device {Dd} --stats am reset --yes"),
    "usb-bench-sram": ("--device {D} am boot --yes --firmware-dir {fw}",
                       "--device {D} --stats bench copy --path sram --sizes 1M --repeat 1"),
    "direct-bench-dma": ("--device {Dd} am boot --yes --firmware-dir {fw}",
                         "--device {Dd} --stats bench copy --path dma --sizes 1M --repeat 1"),
}


def _scenario(name: str, tmp: Path) -> dict:
    flash = tmp / "flash.bin"
    subs = {"D": f"mock:navi31-usb,strict,clock=device,flash={flash}", "Dd": f"mock:navi31,strict,flash={flash}",
            "tmp": str(tmp), "fw": str(FW_DIR)}
    results = [run(*cmd.format(**subs).split()) for cmd in SCENARIOS[name]]
    stats = results[-1].stats
    return {"exit_codes": [r.code for r in results],
            "stats": {k: v for k, v in sorted(stats.items()) if k not in NOT_COMPARED}}


@pytest.fixture(scope="module")
def baseline() -> dict:
    if os.environ.get("TINYHW_RECORD_BASELINE") == "1":
        return {}
    assert BASELINE.is_file(), f"{BASELINE} is missing: record it with TINYHW_RECORD_BASELINE=1"
    return json.loads(BASELINE.read_text())


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_counters_equal_the_recorded_baseline(name: str, baseline: dict, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHW_CLOCK", "device")
    got = _scenario(name, tmp_path)
    assert got["exit_codes"] == [0] * len(SCENARIOS[name]), got
    if os.environ.get("TINYHW_RECORD_BASELINE") == "1":
        doc = json.loads(BASELINE.read_text()) if BASELINE.is_file() else {}
        doc[name] = got
        BASELINE.write_text(json.dumps(dict(sorted(doc.items())), indent=1) + "\n")
        return
    assert name in baseline, f"scenario {name} has no recorded baseline: record it with TINYHW_RECORD_BASELINE=1"
    assert got == baseline[name]


def test_every_recorded_scenario_still_runs(baseline: dict) -> None:
    # a scenario dropped from the table would silently stop guarding its counters
    assert set(baseline) <= set(SCENARIOS), sorted(set(baseline) - set(SCENARIOS))
