"""Shared pieces of the NVIDIA boot tests: the invented firmware set on disk, opening mock:ad102, booting it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tinyhw.boot import nv
from tinyhw.connect import open_device
from tinyhw.mocks import nv_gspfw


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
