"""Faults shared by every emulated product: what a board's attachment (its IOMMU, the emulated physical RAM)
raises when it refuses a bus-master access, whichever GPU block (AMD SDMA or GPU VM, NVIDIA falcons and GSP)
made it."""

from __future__ import annotations


class BusFault(Exception):
    """The bus attachment refused a bus-master access the translation allowed (an IOMMU fault on the host side):
    raised by the attachment, it stops the engine like a real fault, but it is modelled behaviour, not an access
    the model does not cover (strict boards do not raise it further)."""
