"""Where firmware is found: tinyhw's firmware cache and the firmware folder a command uses, for every vendor.

Each driver (:mod:`tinyhw.boot.amd.firmware`, :mod:`tinyhw.boot.nv.fwfiles`) lists its own folders under the cache
and the system's; this module holds the rule they share and the answer they give.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def cache_root(env: Mapping[str, str] = os.environ) -> Path:
    """tinyhw's firmware cache, where ``tests/fetch_firmware.sh`` extracts Debian's packages (one folder each,
    as ``dpkg-deb -x`` lays them out): $TINYHW_FIRMWARE_DIR, else $TINYHW_CACHE/firmware, else
    ${XDG_CACHE_HOME:-~/.cache}/tinyhw/firmware."""
    if env.get("TINYHW_FIRMWARE_DIR"):
        return Path(env["TINYHW_FIRMWARE_DIR"]).expanduser()
    if env.get("TINYHW_CACHE"):
        return Path(env["TINYHW_CACHE"]).expanduser() / "firmware"
    return Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tinyhw" / "firmware"


CACHE_SOURCE = "tinyhw's firmware cache, filled by bash tests/fetch_firmware.sh"
SYSTEM_SOURCE = "the system's firmware"


@dataclass(frozen=True)
class FirmwareDir:
    """The firmware directory a command uses, why (``source``), and every folder looked at to find it."""

    path: Path
    source: str
    searched: tuple[Path, ...] = ()

    def describe(self) -> str:
        """``DIR (why)``, as the CLI prints it."""
        return f"{self.path} ({self.source})"

