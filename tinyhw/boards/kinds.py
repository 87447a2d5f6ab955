"""Device-string options of the real device kinds (``pci:``, ``remote:``, ``labgrid:``), named by the board registry
(:mod:`tinyhw.boards.registry`), which imports them only when a device string of that kind is parsed."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tinyhw.boards.options import DeviceOptions, flag, option, path, pattern


@dataclass
class PciOptions(DeviceOptions):
    """Options of ``pci:`` (sysfs)."""

    force_bound: bool = option(flag(), False, "open the function although a kernel driver is bound to it")
    nowc: bool = option(flag(), False, "map prefetchable BARs uncached (no write combining)")


@dataclass
class RemoteOptions(DeviceOptions):
    """Options of ``remote:HOST:PORT`` and ``remote:unix``; over ssh the options belong to the device there."""


    key: Path | None = option(path(), None, "the shared HMAC key of remote:HOST:PORT (default $TINYHW_REMOTE_KEY, "
                              "else ${XDG_CONFIG_HOME:-~/.config}/tinyhw/remote.key)")


@dataclass
class LabgridOptions(DeviceOptions):
    """Options of ``labgrid:PLACE``: where the coordinator is."""

    coordinator: str | None = option(pattern("HOST:PORT", r"[a-z0-9.\-\[\]:]{1,255}",
                                             "a coordinator address HOST[:PORT]"), None,
                                     "the labgrid coordinator (default $LG_COORDINATOR, else 127.0.0.1:20408)")
