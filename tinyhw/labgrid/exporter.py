"""``python -m tinyhw.labgrid.exporter [labgrid-exporter options] FILE``: labgrid's exporter, able to export bridges.

labgrid's exporter passes unknown resource classes through unchanged (``TinyhwRemote`` and ``TinyhwPCI`` need
nothing), but it exports USB resources only through its own table and only for classes of
``labgrid.resource.udev``, and it has no option to import more. This entry point adds ``TinyhwBridge`` to both,
with an export that publishes ``NetworkTinyhwBridge`` (the usual USB fields plus the bridge's serial), then runs
labgrid's exporter ``main`` with the same arguments.
"""

from __future__ import annotations

from typing import Any

import attr
from labgrid.remote import exporter as lg_exporter
from labgrid.resource import udev

from tinyhw.labgrid.resources import TinyhwBridge


@attr.s(eq=False)
class TinyhwBridgeExport(lg_exporter.USBGenericExport):
    """Exports a ``TinyhwBridge`` as ``NetworkTinyhwBridge``, with its serial."""

    def _get_params(self) -> dict[str, Any]:
        return {**super()._get_params(), "serial": self.local.serial_number}


def install() -> None:
    """Make labgrid's exporter know the bridge class and its export (idempotent)."""
    udev.TinyhwBridge = TinyhwBridge
    lg_exporter.exports["TinyhwBridge"] = TinyhwBridgeExport


def main() -> None:
    """Run labgrid-exporter with the bridge export installed."""
    install()
    lg_exporter.main()


if __name__ == "__main__":
    main()
