"""Frozen board descriptions: vendor facts shared by drivers and emulators (never behaviour).

:func:`by_pci` finds the description (:class:`tinyhw.boards.spec.BoardSpec`) of a PCI function; features ask it
what the board has instead of testing a board's name or id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinyhw.boards.spec import BoardSpec


def by_pci(vendor_id: int, device_id: int) -> BoardSpec | None:
    """The description of the board whose PCI function is ``vendor_id:device_id`` (None: no board tinyhw knows)."""
    from tinyhw.boards.registry import by_pci as find

    return find(vendor_id, device_id)
