"""The flash's IFWI layout through a device, and the layout check before a write.

The regions are :func:`tinyhw.formats.ifwi_regions.flash_regions`'s (specs/navi31-spi-flash.md §g.1-§g.3):
an image file's from its bytes, the chip's from its own tables, read through the ROM_SW engine only
where they are (a few KiB; with ``reads`` >= 3 each table read is a majority vote). Before a write,
:func:`check_layout` compares the image's layout with the chip's region by region and refuses (exit 2)
an image whose regions sit elsewhere, naming the first that differs, unless forced (flashrom's
``--fmap-verify`` idea: an image for another layout is the wrong image).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tinyhw.errors import Refused
from tinyhw.flash import vote
from tinyhw.flash.device import FlashDevice
from tinyhw.formats.ifwi_regions import FlashLayout, FlashRegion, LazyImage, flash_regions, layout_difference


def image_layout(image: bytes) -> FlashLayout:
    """The layout an image's own tables describe."""
    return flash_regions(image)


def chip_layout(dev: FlashDevice, reads: int = 1) -> FlashLayout:
    """The layout the chip's tables describe, read where they are (``reads`` >= 3: each read voted)."""
    return flash_regions(LazyImage(lambda a, n: vote.read(dev, a, n, reads).data, dev.size))


@dataclass(frozen=True)
class LayoutCheck:
    """The image's layout against the chip's: the first difference (None: none), the image's regions the flash
    lacks (damaged or erased there: the write restores them) and whether a difference was forced."""

    difference: str | None
    flash_lacks: tuple[str, ...]
    forced: bool

    def as_dict(self) -> dict[str, Any]:
        """The check as a JSON-ready dict."""
        return {"match": self.difference is None, "difference": self.difference,
                "flash_lacks": list(self.flash_lacks), "forced": self.forced}


def check_layout(image: bytes, dev: FlashDevice, *, force: bool = False) -> LayoutCheck:
    """Refuse (exit 2) an image whose region layout differs from the chip's, unless ``force``: a region that sits
    elsewhere, or one the flash has and the image lacks. Regions only the image has are no conflict."""
    diff, lacking = layout_difference(image_layout(image), chip_layout(dev))
    if diff is not None and not force:
        raise Refused(f"refusing the image: its region layout differs from the flash's ({diff})",
                      hint="an image for another layout is likely the wrong image; --force writes it anyway")
    return LayoutCheck(diff, tuple(lacking), force)


def region_sectors(region: FlashRegion, sector_size: int) -> tuple[int, int]:
    """The sectors a region touches: (first sector, count)."""
    first = region.start // sector_size
    return first, (region.end + sector_size - 1) // sector_size - first
