"""A GPU's PCIe link from Linux sysfs, read-only (``current_link_speed``/``current_link_width`` and the
``max_`` pair under ``/sys/bus/pci/devices/ADDR``), for the link limit of ``bench copy --device cuda:N``.

The kernel writes speeds as ``"16.0 GT/s PCIe"`` (older kernels ``"8 GT/s"``, and ``"Unknown"`` when the
link is down); widths as a decimal lane count. Nothing here writes to sysfs. The root is handed in
(``$TINYHW_SYSFS`` or ``/sys``, chosen by :func:`tinyhw.connect.open_cuda`) so tests use a fake tree.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

__all__ = ["PciLink", "gen_of", "read_pci_link"]

# GT/s per PCIe generation (PCIe base specification, the link speeds of generations 1-6).
GEN_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}


def gen_of(gts: float | None) -> int | None:
    """2.5 -> 1, 32.0 -> 5; None for a speed that is not a PCIe generation."""
    for gen, rate in GEN_GTS.items():
        if gts is not None and abs(gts - rate) < 0.01:
            return gen
    return None


@dataclass(frozen=True)
class PciLink:
    """The PCIe link of one GPU from sysfs: current and maximum speed (GT/s) and width, None where unreadable."""

    address: str
    current_gts: float | None
    current_width: int | None
    max_gts: float | None
    max_width: int | None

    @property
    def current_gen(self) -> int | None:
        """The PCIe generation of the current link speed (None when unknown)."""
        return gen_of(self.current_gts)

    @property
    def max_gen(self) -> int | None:
        """The PCIe generation of the maximum link speed (None when unknown)."""
        return gen_of(self.max_gts)

    def describe(self) -> str:
        """The link in words: "pcie genN xW at ADDRESS (max genN xW)"."""
        def one(gts: float | None, width: int | None) -> str:
            gen = gen_of(gts)
            return f"gen{gen} x{width}" if gen and width else "unknown"
        return (f"pcie {one(self.current_gts, self.current_width)} at {self.address} "
                f"(max {one(self.max_gts, self.max_width)})")

    def as_dict(self) -> dict:
        """The link as a JSON-ready dict (address, current and maximum generation and width)."""
        return {"address": self.address, "current_gen": self.current_gen, "current_width": self.current_width,
                "max_gen": self.max_gen, "max_width": self.max_width}


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _gts(text: str | None) -> float | None:
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s", text or "")
    return float(m.group(1)) if m else None


def _width(text: str | None) -> int | None:
    return int(text) if text and text.isdigit() and int(text) > 0 else None


def read_pci_link(sysfs: str, address: str) -> PciLink | None:
    """The link of the PCI function at ``address`` (``0000:19:00.0``), or None when sysfs does not have it."""
    base = os.path.join(sysfs, "bus", "pci", "devices", address)
    if not os.path.isdir(base):
        return None

    def attr(name: str) -> str | None:
        return _read(os.path.join(base, name))

    return PciLink(address, _gts(attr("current_link_speed")), _width(attr("current_link_width")),
                   _gts(attr("max_link_speed")), _width(attr("max_link_width")))
