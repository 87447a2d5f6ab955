"""The registers valid before IP discovery, at their absolute dword index (the one place they are typed).

specs/amd-bringup.md §1.2 gives these registers at fixed dword indices, valid before the IP
discovery table is read (the table is what tells the NBIO bases). Their definitions and
fields come from the generated database (``nbio_4_3_0`` on Navi31, ``nbif_6_3_1`` on Navi4x);
only the absolute placement is taken from the spec, because the database cannot place them
without NBIO bases, which for Navi31 are only inferred (profiles.py). On Navi31 the
spec's placement equals the fact table's (NBIO seg0 0x0, seg2 0xD20); a test checks it.
Shared by the discovery reader and the emulated board (vendor facts, no behaviour).
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache

from tinyhw.regs.asic import Asic, asic
from tinyhw.regs.model import Register

MM_INDEX = "nbio.BIF_BX_PF0_MM_INDEX"
MM_DATA = "nbio.BIF_BX_PF0_MM_DATA"
MM_INDEX_HI = "nbio.BIF_BX_PF0_MM_INDEX_HI"
CONFIG_MEMSIZE = "nbio.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE"  # VRAM size in MiB

#: amd-bringup.md §1.2: absolute dword index of each, valid before discovery ([amdev]).
FIXED_DWORDS: dict[str, int] = {
    MM_INDEX: 0x000,
    MM_DATA: 0x001,
    MM_INDEX_HI: 0x006,
    CONFIG_MEMSIZE: 0xDE3,
}


@cache
def _fixed(profile: str, name: str) -> Register:
    a = asic(profile)
    hits = [r for r in a.find(name) if r.name.upper() == name.upper()]
    assert hits, f"{name} is not in the {profile} register database"
    return replace(hits[0], offset=4 * FIXED_DWORDS[name])


def fixed(name: str, profile: str | Asic = "navi31") -> Register:
    """The pre-discovery register ``name`` (one of :data:`FIXED_DWORDS`), placed at its §1.2 index."""
    # The default is a family fact, not a board: the §1.2 index is the same on every AMD board, and "navi31"
    # only names the generated database whose field layout (nbio_4_3_0) the RDNA3 boards share; a caller with
    # another family's registers (Navi4x, nbif_6_3_1) passes its own.
    return _fixed(profile.name if isinstance(profile, Asic) else profile, name)
