"""GD25LQ16E block protection: which byte range SR1/SR2 protect, and how to say it in words.

Implements specs/navi31-spi-flash.md §c.3 (status register bits: BP0-2 SR1.2-4, TB SR1.5, SEC SR1.6,
SRP0 SR1.7, SRP1 SR2.0, CMP SR2.6) and the §c.4 protected-area table of the 2 MiB part, including
"CMP = 1 with all BP bits 0 protects the entire array". Pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

SR1_WIP = 0x01
SR1_WEL = 0x02
SR1_BP_SHIFT = 2
SR1_BP_MASK = 0x1C
SR1_TB = 0x20
SR1_SEC = 0x40
SR1_SRP0 = 0x80
#: SR1 bits that select the protected area (BP0-2, TB, SEC).
SR1_PROTECT_MASK = SR1_BP_MASK | SR1_TB | SR1_SEC
SR2_SRP1 = 0x01
SR2_QE = 0x02
SR2_SUS2 = 0x04
SR2_LB_MASK = 0x38
SR2_CMP = 0x40
SR2_SUS1 = 0x80
#: Read-only (volatile status) bits of SR2 that a WRSR must not try to write.
SR2_READ_ONLY = SR2_SUS1 | SR2_SUS2
#: Non-volatile SR1 bits a WRSR writes (WIP and WEL are read-only).
SR1_WRITABLE = 0xFC

KiB = 1024


@dataclass(frozen=True)
class Protection:
    """The protected byte range ``[start, end)`` (empty when ``start == end``) for one SR1/SR2 pair."""

    start: int
    end: int
    size: int

    @property
    def none(self) -> bool:
        """True when no byte is protected."""
        return self.start == self.end

    @property
    def all(self) -> bool:
        """True when the whole flash is protected."""
        return self.start == 0 and self.end == self.size

    def overlaps(self, start: int, end: int) -> bool:
        """True when any byte of ``[start, end)`` is protected."""
        return self.start < end and start < self.end

    def words(self) -> str:
        """The protected range in words (``not protected``, ``whole flash protected``, or the range)."""
        if self.none:
            return "not protected"
        if self.all:
            return "whole flash protected"
        return f"protected 0x{self.start:06x}-0x{self.end - 1:06x} ({(self.end - self.start) // KiB} KiB)"


def _base_range(sr1: int, size: int) -> tuple[int, int]:
    """The CMP = 0 column of §c.4."""
    bp = (sr1 & SR1_BP_MASK) >> SR1_BP_SHIFT
    if bp == 0:
        return 0, 0
    if bp >= 6:  # "x x 11x": all
        return 0, size
    if sr1 & SR1_SEC:  # 4 / 8 / 16 / 32 KiB (BP = 10x both mean 32 KiB)
        length = 4 * KiB << min(bp - 1, 3)
    else:  # 64 KiB .. 1 MiB
        length = 64 * KiB << (bp - 1)
    return (0, length) if sr1 & SR1_TB else (size - length, size)


def protected_range(sr1: int, sr2: int, size: int) -> Protection:
    """The area SR1/SR2 protect on a ``size``-byte part (§c.4). CMP = 1 protects the complement."""
    lo, hi = _base_range(sr1, size)
    if sr2 & SR2_CMP:
        if lo == hi:
            lo, hi = 0, size
        elif lo == 0 and hi == size:
            lo, hi = 0, 0
        elif lo == 0:
            lo, hi = hi, size
        else:
            lo, hi = 0, lo
    return Protection(lo, hi, size)


def unprotected_status(sr1: int, sr2: int) -> tuple[int, int]:
    """SR1/SR2 to write so that nothing is protected: BP/TB/SEC and CMP cleared, SRP/QE/LB kept (§d.5)."""
    return (sr1 & SR1_WRITABLE & ~SR1_PROTECT_MASK, sr2 & ~SR2_READ_ONLY & ~SR2_CMP)


def writable_status(sr1: int, sr2: int) -> tuple[int, int]:
    """The writable (non-volatile) parts of SR1/SR2, as a WRSR restoring them sends them."""
    return sr1 & SR1_WRITABLE, sr2 & ~SR2_READ_ONLY
