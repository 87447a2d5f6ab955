"""Shared pieces of the firmware-image parsers: named byte regions and a bounded reader.

Used by :mod:`tinyhw.formats.amdfw`, :mod:`~tinyhw.formats.vbios`, :mod:`~tinyhw.formats.ifwi_layout`,
:mod:`~tinyhw.formats.elf` and :mod:`~tinyhw.formats.nvgsp`. The reader never raises on short input: a
read beyond the data records ``"0xOFF: <what> needs N bytes, the data ends at 0xLEN"`` in the caller's
problem list and returns ``None``, so every parser reports what it could read plus a precise reason.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass


@dataclass(frozen=True)
class Region:
    """A named byte range of a file (what ``firmware diff`` compares, what the tree shows)."""

    name: str
    offset: int
    size: int

    @property
    def end(self) -> int:
        """The offset just past the region."""
        return self.offset + self.size

    def to_doc(self) -> dict:
        """The region as a JSON-ready dict: name, offset, size."""
        return {"name": self.name, "offset": self.offset, "size": self.size}


class Reader:
    """Little- (or big-) endian reads at absolute offsets; out-of-range reads become problems."""

    def __init__(self, data: bytes | memoryview, problems: list[str], *, endian: str = "<") -> None:
        self.data = data
        self.problems = problems
        self.endian = endian

    def unpack(self, fmt: str, off: int, what: str) -> tuple | None:
        """Unpack ``fmt`` at ``off``; None (and a problem naming ``what``) when the data is too short."""
        size = struct.calcsize(self.endian + fmt)
        if off < 0 or off + size > len(self.data):
            self.problems.append(f"0x{off:x}: {what} needs {size} bytes, the data ends at 0x{len(self.data):x}")
            return None
        return struct.unpack_from(self.endian + fmt, self.data, off)

    def u8(self, off: int, what: str) -> int | None:
        """The byte at ``off``, or None (with a problem) past the end."""
        v = self.unpack("B", off, what)
        return None if v is None else v[0]

    def u16(self, off: int, what: str) -> int | None:
        """The 16-bit value at ``off`` in the reader's byte order, or None past the end."""
        v = self.unpack("H", off, what)
        return None if v is None else v[0]

    def u32(self, off: int, what: str) -> int | None:
        """The 32-bit value at ``off`` in the reader's byte order, or None past the end."""
        v = self.unpack("I", off, what)
        return None if v is None else v[0]

    def u64(self, off: int, what: str) -> int | None:
        """The 64-bit value at ``off`` in the reader's byte order, or None past the end."""
        v = self.unpack("Q", off, what)
        return None if v is None else v[0]


def within(region: Region, total: int, problems: list[str], where: str = "the file") -> bool:
    """True when ``region`` lies inside ``[0, total)``; otherwise record a precise problem."""
    if region.offset < 0 or region.size < 0 or region.end > total:
        problems.append(f"0x{region.offset:x}: {region.name} [0x{region.offset:x}, 0x{region.end:x}) "
                        f"extends beyond {where} (0x{total:x} bytes)")
        return False
    return True


def cstring(data: bytes | memoryview, off: int, limit: int) -> bytes:
    """Bytes from ``off`` up to the first NUL, at most ``limit`` bytes, clipped to the data."""
    if off < 0 or off >= len(data):
        return b""
    chunk = bytes(data[off:min(len(data), off + limit)])
    nul = chunk.find(b"\0")
    return chunk if nul < 0 else chunk[:nul]


def unique_names(regions: list[Region]) -> list[Region]:
    """Suffix repeated names with ``#2``, ``#3`` ... so every region can be looked up by name."""
    seen: dict[str, int] = {}
    out = []
    for r in regions:
        n = seen.get(r.name, 0) + 1
        seen[r.name] = n
        out.append(r if n == 1 else Region(f"{r.name} #{n}", r.offset, r.size))
    return out
