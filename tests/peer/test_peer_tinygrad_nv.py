"""Peer-driver tier (ARCHITECTURE.md "Testing tiers" item 5): tinygrad 0.14.0's NVIDIA driver, unmodified above the
one layer tinyhw replaces (its ``PCIDevice``, :mod:`tinyhw.peers.tinygrad_nv`), boots the emulated AD102 with the
real 570.144 firmware (FWSEC-FRTS, the production-signed booter, GSP-RM, the golden-image RPCs), strict, over
``dma=iommu`` and ``dma=physical``; then ``tinyhw nv info`` reads the booted board.

A failure names the first divergence: the exception tinygrad raised, the emulator's uncovered accesses and GSP-RM's
problems, and the adapter's last accesses. The real files come from tests/fetch_firmware.sh (Debian sid's
firmware-nvidia-graphics): missing, the test fails in CI (``TINYHW_REQUIRE_COMPILE=1``) and is skipped elsewhere.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from typing import Any

import pytest
from clihelp import run

pytestmark = pytest.mark.peer

#: the falcon starts of a boot: FWSEC, the booter, then the sequencer's core start and core resume
SEQUENCED = [("gsp", 0), ("sec2", 0), ("gsp", 0), ("sec2", 0)]

REQUIRED = os.environ.get("TINYHW_REQUIRE_COMPILE") == "1"


def _unavailable(why: str) -> None:
    if REQUIRED:
        pytest.fail(f"TINYHW_REQUIRE_COMPILE=1 but {why}", pytrace=False)
    pytest.skip(why)


@pytest.fixture(scope="module")
def firmware() -> Path:
    if importlib.util.find_spec("tinygrad") is None:
        _unavailable("tinygrad (the compile extra) is not installed")
    from tinyhw.peers import tinygrad_nv

    fw = tinygrad_nv.default_firmware_dir()
    missing = [rel for rel, _ in tinygrad_nv.AD102_FIRMWARE if not (fw / rel).is_file()]
    if missing:
        _unavailable(f"the 570.144 nvidia firmware is missing under {fw} ({missing[0]}): run tests/fetch_firmware.sh")
    return fw


def divergence(e: BaseException, dev: Any, board: Any) -> str:
    """The first place tinygrad and the emulated board parted, for the assertion message."""
    gsp = board.secure.gsp_rm
    lines = [f"tinygrad's NVDev stopped: {type(e).__name__}: {e}",
             f"emulator uncovered accesses: {board.uncovered[:5]}",
             f"falcon results (name, mailbox0): {board.secure.results}",
             f"gsp-rm: version {gsp.version if gsp else None}, problems {gsp.problems[:5] if gsp else None}, "
             f"non-zero statuses {[s for s in (gsp.statuses if gsp else []) if s[1]][:5]}",
             dev.log.report(16)]
    return "\n".join(lines)


@pytest.mark.parametrize("dma", ["iommu", "physical"])
def test_tinygrad_nvdev_builds_the_golden_image(tmp_path: Path, firmware: Path, dma: str) -> None:
    from tinyhw.peers import tinygrad_nv

    tinygrad_nv.provide_firmware(firmware)
    state = tmp_path / "ad102.json"
    device = f"mock:ad102,strict,dma={dma},state={state}"
    with tinygrad_nv.attached(device) as dev:
        board = dev.t.board
        try:
            nvdev = tinygrad_nv.boot_nvdev(dev)
        except Exception as e:
            pytest.fail(divergence(e, dev, board), pytrace=False)
        gsp = board.secure.gsp_rm
        assert nvdev.chip_name == "AD102" and nvdev.large_bar  # BAR1 resized to cover the 24 GiB
        assert dev.bar_info(1)[1] == 32 << 30
        assert gsp.version == "570.144" and gsp.init_done and not gsp.problems
        # the golden image: root client, device, subdevice, VA space, channel, compute and copy objects, all NV_OK
        allocs = [s for f, s in gsp.statuses if f == 103]
        controls = [s for f, s in gsp.statuses if f == 76]
        assert allocs == [0] * 7 and controls == [0] * 4, gsp.statuses
        assert sorted(set(gsp.objects.values())) == [0x0, 0x80, 0x2080, 0x90F1, 0xC56F, 0xC7B5, 0xC9C0]
        assert board.secure.results == SEQUENCED
        assert not board.uncovered
        assert board.tlb_invalidates > 0
        if dma == "iommu":
            assert board.iommu.stats["faults"] == 0
    r = run("--device", f"mock:ad102,strict,state={state}", "--json", "nv", "info")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["chip"]["name"] == "AD102" and doc["wpr2_up"] and doc["gsp_riscv_active"]
    if dma == "physical":  # once: a second attach finds WPR2 up; tinygrad resets the function and boots again
        with tinygrad_nv.attached(device) as dev:
            try:
                tinygrad_nv.boot_nvdev(dev)
            except Exception as e:  # any stop is reported with where it happened
                pytest.fail(divergence(e, dev, dev.t.board), pytrace=False)
            assert dev.t.board.resets == 1 and dev.t.board.secure.gsp_rm.init_done
