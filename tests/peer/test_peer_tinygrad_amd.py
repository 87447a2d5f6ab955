"""Peer-driver tier (ARCHITECTURE.md "Testing tiers" 5): tinygrad 0.14.0's AMD driver boots and computes on the
emulated Navi31, unmodified above the one layer tinyhw.peers.tinygrad_amd replaces (its ``USB3`` for
``mock:navi31-usb``, its ``PCIDevice`` for ``mock:navi31``), with Debian's firmware and ``strict`` on.

Per attachment, one process boots the board from cold and runs the work list (module-scoped: one boot per
attachment per session); a second process on the same board takes tinygrad's partial-boot path. Each test reads
its part of the JSON the process printed (tests/peer/peeramd.py); a failure names the first divergence (the element,
expected vs got) or the error with the adapter's last accesses. Select the tier with ``-m peer``.

Needs the compile extra (tinygrad) and the amdgpu firmware: in CI (``TINYHW_REQUIRE_COMPILE=1``) a missing one
fails, elsewhere the tier is skipped with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kernelshelp import need_clang
from testpaths import ROOT

pytestmark = pytest.mark.peer

ATTACH = {"usb": "mock:navi31-usb", "pci": "mock:navi31"}
OPS = ["add", "matmul64", "sum_max", "lds_reduce", "f16", "int_math"]
PSP_BOOTLOADER = 4  # KDB, SPL, SYS_DRV, SOS (the components psp_13_0_0_sos.bin holds)


def _firmware() -> Path:
    from tinyhw.boards.navi31 import FIRMWARE
    from tinyhw.peers.tinygrad_amd import default_firmware_dir

    fw = default_firmware_dir()
    missing = [n for n in FIRMWARE.files if not (fw / n).is_file()]
    if missing:
        msg = f"amdgpu firmware {', '.join(missing)} not in {fw}; run tests/setup-system.sh"
        if os.environ.get("TINYHW_REQUIRE_COMPILE") == "1":
            pytest.fail(f"TINYHW_REQUIRE_COMPILE=1 but {msg}")
        pytest.skip(msg)
    return fw


def _run(device: str, cache: Path, *args: str) -> dict[str, Any]:
    """tests/peer/peeramd.py on ``device`` in a fresh process (tinygrad keeps one AMD device per process)."""
    env = {**os.environ, "DEV": "AMD", "XDG_CACHE_HOME": str(cache), "PYTHONPATH": str(ROOT)}
    for k in ("DEBUG", "AM_DEBUG", "AM_RESET", "HCQ2"):
        env.pop(k, None)
    p = subprocess.run([sys.executable, str(ROOT / "tests" / "peer" / "peeramd.py"), device, *args], env=env,
                       capture_output=True, text=True, timeout=1500, check=False)
    lines = p.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise AssertionError(f"peer process printed no result (exit {p.returncode}):\n{p.stdout[-3000:]}\n"
                             f"{p.stderr[-6000:]}") from None


@pytest.fixture(scope="module", params=sorted(ATTACH))
def session(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A cold board booted by tinygrad in one process with the work list run, then a second process's boot."""
    need_clang()
    _firmware()
    tmp = tmp_path_factory.mktemp(f"peer-{request.param}")
    device = f"{ATTACH[request.param]},strict,flash={tmp / 'flash.bin'}"
    first = _run(device, tmp / "cache", "--ops")
    second = _run(device, tmp / "cache") if first["boot"]["ok"] else None
    return {"attach": request.param, "first": first, "second": second}


def _boot_failure(run: dict[str, Any]) -> str:
    b = run["boot"]
    return f"boot failed: {b.get('error')}\n{b.get('last', '')}\n{b.get('trace', '')[-3000:]}"


def test_full_boot_strict(session: dict[str, Any]) -> None:
    """A cold board: tinygrad's full boot (PSP bootloader and KM ring, SMU, GFX, SDMA), strict, every PSP status 0."""
    first = session["first"]
    assert first["boot"]["ok"], _boot_failure(first)
    assert not first["boot"]["partial"] and first["boot"]["usb"] == (session["attach"] == "usb")
    psp = first["psp"]
    assert not psp["nonzero"], f"psp answered non-zero statuses: {psp['nonzero']}"
    assert sum(1 for what, _, _ in psp["commands"] if what == "bootloader") == PSP_BOOTLOADER
    assert first["counters"]["psp_commands"] > 0 and first["counters"]["smu_messages"] > 0
    assert first["uncovered"] == []
    assert first["finalize_errors"] == [], "tinygrad's fini failed on the board"


def test_second_process_takes_the_partial_boot(session: dict[str, Any]) -> None:
    """A second process finds the board booted by the first (SCRATCH_REG7, a clean SCRATCH_REG6) and starts only GFX
    and SDMA: no mode-1 reset, no PSP bootloader command."""
    second = session["second"]
    assert second is not None, _boot_failure(session["first"])
    assert second["boot"]["ok"], _boot_failure(second)
    assert second["boot"]["partial"]
    assert second["counters"]["mode1_resets"] == 0
    assert not [c for c in second["psp"]["commands"] if c[0] == "bootloader"]


@pytest.mark.parametrize("op", OPS)
def test_work_matches_numpy(session: dict[str, Any], op: str) -> None:
    """Tensor add, matmul 64x64, sum and max, a reduction through LDS, f16 and int32 math, each equal to numpy."""
    first = session["first"]
    assert first["boot"]["ok"], _boot_failure(first)
    result = first["ops"][op]
    assert result["ok"], f"{session['attach']} {op}: {result['detail']}"


def test_readme_tinygrad_example_runs_as_written(tmp_path: Path) -> None:
    """README's "The emulated board as tinygrad's mock GPU" example, as written there, in a fresh process."""
    need_clang()
    _firmware()
    text = (ROOT / "README.md").read_text()
    section = text.split("### The emulated board as tinygrad's mock GPU", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env.pop("DEV", None)
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=1500,
                       check=False)
    assert p.returncode == 0, p.stderr[-6000:]
    assert p.stdout.strip().splitlines()[-1] == "[3.0, 5.0, 7.0]"
