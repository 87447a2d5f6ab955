"""USB tier, the real stack for a driver that has run on real boards: tinygrad 0.14.0's AMD driver, unmodified and
with no adapter, boots the emulated Navi31 through its own libusb ``USB3`` class: libusb -> usbfs -> dummy_hcd ->
FunctionFS -> ``tinyhw mock gadget --strict`` -> the emulated ASM24 bridge -> the emulated Navi31, then adds two
tensors, compared with numpy.

The same single guest boot as test_usb_gadget_guest.py (the ``usb_guest`` session fixture; its step ``tinygrad``,
run by usbguest_main.py last, tinygrad in its own process: usbguest_tinygrad.py). tinygrad is given Debian's
firmware as the peer tier gives it (docs/peer-drivers.md, "Firmware without network"). A failure names the first
divergence: the gadget's first strict refusal (the register or request it does not model), the first transfer that
did not complete, tinygrad's error, the last milestone it reached and where it stood.
Needs the compile extra (tinygrad) and the amdgpu firmware: in CI (``TINYHW_REQUIRE_COMPILE=1``) a missing one
fails, elsewhere it is skipped with the reason.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from test_usb_gadget_guest import step

#: tinygrad's bring-up, in order: functions the sampler in usbguest_tinygrad.py must have seen on the driver's stack
MILESTONES = (
    "USB3.__init__",  # libusb opens the bridge: product string, configuration, interface
    "CustomASM24Controller.__init__",  # XDATA 0xB450 read over 0xE4: the PCIe link is up
    "_System.pci_setup_usb_bars",  # bridges and the GPU's BARs through config TLPs (0xF0)
    "AMDev._run_discovery",  # RCC_CONFIG_MEMSIZE over BAR5, the IP discovery table from VRAM
    "AMDev._build_regs",
    "AM_GMC.init_hw",
    "AM_PSP._bootloader_load_component",  # the sOS components staged through the bridge's SRAM (0xF2)
    "AM_PSP._load_ip_fw_cmd",
    "AM_SMU.init_hw",
    "AM_GFX.init_hw",
    "AM_SDMA.init_hw",
    "device up",
    "add done",
)
PSP_BOOTLOADER = 4  # KDB, SPL, SYS_DRV, SOS


@pytest.fixture(scope="module")
def tg(usb_guest: dict[str, Any]) -> dict[str, Any]:
    r = step(usb_guest, "tinygrad")
    if "unavailable" in r:
        if os.environ.get("TINYHW_REQUIRE_COMPILE") == "1":
            pytest.fail(f"TINYHW_REQUIRE_COMPILE=1 but {r['unavailable']}; run tests/setup-system.sh", pytrace=False)
        pytest.skip(r["unavailable"])
    return r


def divergence(r: dict[str, Any]) -> str:
    """The first thing that went wrong, from both sides, then the context."""
    run = r.get("run") or {}
    gadget = r.get("gadget") or {}
    rep = gadget.get("report") or {}
    summary = rep.get("transfer_summary") or {}
    reached = [m for m in MILESTONES if m in run.get("steps", {})]
    lines = [
        f"gadget's first strict refusal: {(rep.get('errors') or ['none'])[0]}",
        f"first transfer not completed: {(summary.get('not_ok') or ['none'])[0]}",
        f"tinygrad: {json.dumps(run.get('boot'))[:3000]}",
        f"last milestone reached: {reached[-1] if reached else 'none'} "
        f"(next: {MILESTONES[len(reached)] if len(reached) < len(MILESTONES) else '-'})",
    ]
    if run.get("timeout"):
        lines.append(f"cut after {run['timeout']['after_s']} s, standing at:\n{run['timeout']['stack']}")
    if not run:
        lines.append(f"no result from tinygrad's process: {json.dumps(r.get('proc'))[-4000:]}")
    lines.append(f"where it was, every few seconds: {run.get('profile', [])[-12:]}")
    lines.append(f"last transfers: {summary.get('last')}")
    lines.append(f"gadget stderr: {gadget.get('err', '')[-1500:]}")
    return "\n".join(lines)


def test_tinygrad_drives_its_own_libusb_usb3(tg: dict[str, Any]) -> None:
    """No adapter: the class that opened the bridge is tinygrad's own (libusb through ctypes), found by
    libusb's device list, with the gadget's product string."""
    run = tg["run"]
    assert run is not None, divergence(tg)
    assert run["libusb"]["class"] == "tinygrad.runtime.support.usb.USB3", run["libusb"]
    assert run["libusb"]["dll"].endswith(".so.0") and "usb-1.0" in run["libusb"]["dll"], run["libusb"]
    boot = run["boot"] or {}
    assert boot.get("ok"), divergence(tg)
    assert boot["usb_class"] == "tinygrad.runtime.support.usb.USB3" and boot["iface"] == "USBIface", boot
    assert boot["product"].startswith("custom"), boot


def test_bring_up_milestones_in_order(tg: dict[str, Any]) -> None:
    """Every bring-up step, in tinygrad's order: the first one missing is where it stopped."""
    steps = (tg["run"] or {}).get("steps", {})
    reached = [m for m in MILESTONES if m in steps]
    assert reached == list(MILESTONES), divergence(tg)
    times = [steps[m] for m in MILESTONES]
    assert times == sorted(times), list(zip(MILESTONES, times, strict=True))


def test_full_boot_strict_through_the_real_stack(tg: dict[str, Any]) -> None:
    """A cold board: tinygrad's full boot (PSP bootloader, KM ring, SMU, GFX, SDMA), every PSP status 0, nothing
    the strict emulation refused or did not model, every USB transfer completed."""
    run = tg["run"] or {}
    assert (run.get("boot") or {}).get("ok"), divergence(tg)
    assert run["boot"]["partial"] is False and run["boot"]["usb"] is True
    rep = tg["gadget"]["report"]
    assert tg["gadget"]["code"] == 0 and rep is not None, tg["gadget"]
    assert rep["errors"] == [] and rep["warnings"] == [], divergence(tg)
    assert rep["transfer_summary"]["not_ok"] == [], divergence(tg)
    board = rep["board"]
    assert board["uncovered"] == []
    assert [c for c in board["psp"] if c[2]] == [], f"psp answered non-zero statuses: {board['psp']}"
    assert sum(1 for what, _, _ in board["psp"] if what == "bootloader") == PSP_BOOTLOADER, board["psp"]
    assert board["counters"]["psp_commands"] > 0 and board["counters"]["smu_messages"] > 0, board["counters"]
    assert rep["counters"]["bulk_transfers"] > 0 and rep["counters"]["f2_bytes_out"] > 0, rep["counters"]


def test_tensor_add_matches_numpy(tg: dict[str, Any]) -> None:
    """Tensor add on the booted board (copy-in through the bridge's SRAM, a kernel on the emulated shader core,
    copy-out), equal to numpy element for element."""
    run = tg["run"] or {}
    assert (run.get("boot") or {}).get("ok"), divergence(tg)
    add = run["ops"].get("add")
    assert add is not None, divergence(tg)
    assert add["ok"], f"{add['detail']}\n{add.get('trace', '')}\n{divergence(tg)}"


def test_gadget_never_waited_in_vain_for_out_data(tg: dict[str, Any]) -> None:
    """tinygrad's copy-in queues an 0xF2 arm and an 0xE4 read of its drain fence together and sends the chunk only
    when both are answered: the gadget answers that read at once (it waits for armed OUT data only before requests
    the data can affect), so no request waited for data that was not coming."""
    rep = tg["gadget"]["report"]
    assert rep is not None, tg["gadget"]
    assert rep["out_landing"]["given_up"] == 0, (rep["out_landing"], divergence(tg))
