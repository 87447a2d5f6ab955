"""Shared pieces of the NVIDIA boot tests: the invented firmware set on disk (and with the real GSP-RM), opening
mock:ad102, booting it, and a fake sysfs tree holding an AD102."""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.transport.test_pci_scan import ZERO, Fake, make_tree
from tinyhw.boot import nv
from tinyhw.connect import open_device
from tinyhw.mocks.nvidia import nv_gspfw


def firmware_set(root: Path) -> Path:
    """The invented booter, bootloader and small GSP-RM in the layout nv boot reads, under ``root``/fw."""
    d = root / "fw"
    if not d.exists():
        nv_gspfw.write_set(str(d))
    return d


def device(root: Path, options: str = "") -> str:
    """A mock:ad102 device string with its board state in ``root`` (strict)."""
    return f"mock:ad102,strict,state={root / 'ad102.json'}" + (f",{options}" if options else "")


def boot(root: Path, options: str = "", **kw: Any) -> tuple[nv.BootResult | None, Exception | None, Any]:
    """Open the board, preflight, load the firmware and boot; returns (result, error, the board)."""
    opened = open_device(device(root, options))
    t = opened.transport
    try:
        gpu = nv.preflight_boot(t)
        fw = nv.load_firmware(firmware_set(root), gpu.chip, allow_unknown=True)
        return nv.boot(gpu, fw, **kw), None, t.board
    except Exception as e:
        return None, e, t.board
    finally:
        opened.close()


def reset(root: Path) -> dict[str, Any]:
    """nv reset on the board."""
    opened = open_device(device(root))
    try:
        return nv.reset(nv.preflight_reset(opened.transport))
    finally:
        opened.close()


def with_real_gsp_rm(tmp_path: Path) -> Path:
    """The invented firmware set with Debian's real 535.261.03 gsp_ga10x.bin linked in (fails if not fetched)."""
    src = Path(os.environ["TINYHW_FIRMWARE_DIR"]) / "nvidia-gsp" / "lib" / "firmware" / "nvidia"
    real = src / "535.261.03" / "gsp_ga10x.bin"
    if not real.is_file():
        pytest.fail(f"{real} is missing: run `bash tests/fetch_firmware.sh` first", pytrace=False)
    fw = firmware_set(tmp_path)
    (fw / "535.261.03" / "gsp_ga10x.bin").unlink()
    (fw / "535.261.03" / "gsp_ga10x.bin").symlink_to(real)
    return fw


def nvidia_sysfs_tree(tmp_path: Path, driver: str | None) -> tuple[Path, Path]:
    """A fake sysfs tree with one unbound (or ``driver``-bound) AD102 whose resource0 holds the registers the preflight
    reads; returns (sysfs root, resource0)."""
    res = ["0x00000000fb000000 0x00000000fbffffff 0x0000000000040200"] + [ZERO] * 6
    cfg = bytearray(256)
    cfg[0:4] = bytes.fromhex("de108426")
    cfg[4:6] = (6).to_bytes(2, "little")
    cfg[8:12] = bytes.fromhex("a1000003")
    sysfs = tmp_path / "sys"
    bdf = "0000:01:00.0"
    make_tree(sysfs, [Fake(bdf, 0x10DE, 0x2684, 0x030000, 0xA1, (0x10DE, 0x167C), driver, resources=res,
                           config=bytes(cfg))])
    r0 = sysfs / "devices" / "pci0000:01" / bdf / "resource0"
    with open(r0, "wb") as f:
        f.truncate(16 << 20)
    with open(r0, "r+b") as f:  # an AD102's registers, as the probe reads them
        for off, value in ((0xA00, 0x192A1000), (0x118128, 1), (0x118234, 0xFF), (0x1183A4, 24576)):
            f.seek(off)
            f.write(struct.pack("<I", value))
    return sysfs, r0
