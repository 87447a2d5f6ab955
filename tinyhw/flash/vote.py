"""Majority-vote reads: every sector read N times, each byte taken from the value most reads agree on.

A link that occasionally returns a wrong byte (a marginal USB 2.0 connection to the ASM24 bridge, a
long cable) corrupts a single read without any error. flashrom's ``--read-repeated`` answers
it the same way: read each sector N >= 3 times and keep, per byte, the value more than half of the
reads returned. Sectors whose reads disagreed are reported with how many reads matched the voted
bytes ("2/3 reads matched"); a byte for which no value has a majority stops the read with exit 1
(:class:`NoMajority`), before the caller writes anything.

The reads of one sector travel in one chain of ROM_SW transactions (:meth:`Gd25.read_repeated`),
so a repeat costs its data transactions only. ``reads=1`` is a plain read (no vote).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tinyhw.errors import OperationFailed, Refused
from tinyhw.flash.device import FlashDevice
from tinyhw.progress import NO_PROGRESS, Progress

#: The most reads per sector a caller may ask for (each one costs a full read of the range).
MAX_READS = 15
#: The fewest reads that can outvote one bad read.
MIN_VOTE = 3


class NoMajority(OperationFailed):
    """No value of some byte was returned by more than half of the reads (exit 1)."""


@dataclass(frozen=True)
class SectorVote:
    """A sector whose reads disagreed: how many of the ``reads`` equal the voted bytes, and where they differed."""

    sector: int
    address: int
    matched: int
    reads: int
    bytes_disagreed: int

    def as_dict(self) -> dict[str, Any]:
        """The sector's vote as a JSON-ready dict."""
        return {"sector": self.sector, "address": self.address, "matched": self.matched, "reads": self.reads,
                "bytes_disagreed": self.bytes_disagreed, "text": f"{self.matched}/{self.reads} reads matched"}


@dataclass
class VotedRead:
    """The bytes of a range read ``reads`` times and voted per byte, and the sectors whose reads disagreed."""

    address: int
    data: bytes
    reads: int
    disagreed: list[SectorVote] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """The vote as a JSON-ready dict (the data itself is left out)."""
        return {"reads": self.reads, "sectors_disagreed": [s.as_dict() for s in self.disagreed]}


def check_reads(reads: int) -> int:
    """Refuse (exit 2) a read count that cannot vote: 1 (a plain read) or 3..:data:`MAX_READS`."""
    if reads == 1 or MIN_VOTE <= reads <= MAX_READS:
        return reads
    if reads == 2:
        raise Refused("2 reads cannot outvote a bad read: when they differ, neither has a majority",
                      hint=f"use --reads {MIN_VOTE} (or more, up to {MAX_READS}), or 1 for a plain read")
    raise Refused(f"--reads {reads} is outside 1 or {MIN_VOTE}..{MAX_READS}")


def majority(copies: list[bytes]) -> tuple[bytes, int | None]:
    """The per-byte majority of equal-length ``copies`` and the first offset where no value has more than half
    of the votes (None: every byte has a majority). A value held by more than half is the median of its column."""
    arr = np.frombuffer(b"".join(copies), dtype=np.uint8).reshape(len(copies), -1)
    cand = np.sort(arr, axis=0)[len(copies) // 2]
    votes = (arr == cand).sum(axis=0)
    bad = np.flatnonzero(votes * 2 <= len(copies))
    return cand.tobytes(), (int(bad[0]) if bad.size else None)


def read(dev: FlashDevice, address: int, size: int, reads: int = 1, progress: Progress = NO_PROGRESS,
         label: str = "read") -> VotedRead:
    """``size`` bytes at ``address``, each sector read ``reads`` times and voted (1: a plain read).

    Raises :class:`NoMajority` (exit 1) at the first byte no value has a majority for, naming its
    address and what the reads returned; nothing is returned then, so no caller can save it.
    """
    check_reads(reads)
    chip, ss = dev.chip, dev.sector_size
    if address < 0 or size <= 0 or address + size > dev.size:
        raise Refused(f"range 0x{address:x}+0x{size:x} is not inside the flash (0x0-0x{dev.size - 1:x})")
    if reads == 1:
        with progress.task(label, size) as advance:
            return VotedRead(address, chip.read(address, size, advance), 1)
    out = bytearray()
    disagreed: list[SectorVote] = []
    with progress.task(f"{label} ({reads} reads)", size * reads) as advance:
        a, end = address, address + size
        while a < end:
            n = min(ss - a % ss, end - a)
            copies = chip.read_repeated(a, n, reads, advance)
            voted, bad = majority(copies)
            if bad is not None:
                values = ", ".join(f"0x{c[bad]:02x}" for c in copies)
                raise NoMajority(f"no majority at 0x{a + bad:06x} (sector {(a + bad) // ss}): the {reads} reads "
                                 f"returned {values}", hint="the reads are unreliable: check the cable, the link "
                                 "speed and the board's power, then read again (more --reads outvote more errors)")
            matched = sum(c == voted for c in copies)
            if matched < reads:
                differ = int(np.any(np.frombuffer(b"".join(copies), dtype=np.uint8).reshape(reads, -1)
                                    != np.frombuffer(voted, dtype=np.uint8), axis=0).sum())
                disagreed.append(SectorVote(a // ss, a, matched, reads, differ))
            out += voted
            a += n
    return VotedRead(address, bytes(out), reads, disagreed)
