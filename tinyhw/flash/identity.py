"""Board identity: which board an image and the current flash belong to, compared before writing.

Spec: specs/navi31-spi-flash.md §g.3 (the ATOM VBIOS inside a flash image identifies it: PCIR ids,
part number, version; Linux reads it at ROM_OFFSET x 128 KiB, so expect 128 KiB alignment; the
search runs over 512-byte-aligned offsets). The parsing and the comparison rule are
:func:`tinyhw.formats.vbios.vbios_identity` / :func:`~tinyhw.formats.vbios.identity_differences`
(part number and PCI ids; the version may change between two images of one board).

Reading the flash's identity costs little: the option-ROM header (0x200 bytes) is read at the
offsets where the image holds a VBIOS and at every 128 KiB boundary; the first that is an ATOM
VBIOS is read whole (its length byte x 512) and parsed. Only when none is found there is the whole
flash read and scanned at 512-byte steps, as :func:`vbios_identity` does on an image.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats.vbios import VbiosIdentity, find_vbios, identity_differences, is_vbios, vbios_identity

#: §g.3: Linux's ROM_OFFSET unit, the alignment to expect.
ROM_OFFSET_UNIT = 0x20000
HEADER_BYTES = 0x200

Reader = Callable[[int, int], bytes]


def image_vbios_offsets(image: bytes) -> list[int]:
    """Offsets of the ATOM VBIOS images in ``image`` (where the flash is looked at first)."""
    return [vb.offset for vb in find_vbios(image) if vb.ati_magic and vb.atom is not None]


def probe_identity(read: Reader, size: int, hints: Iterable[int] = ()) -> VbiosIdentity | None:
    """The first ATOM VBIOS at a ``hints`` offset or a 128 KiB boundary of a flash of ``size`` bytes, or None."""
    for off in sorted({*(h for h in hints if 0 <= h < size), *range(0, size, ROM_OFFSET_UNIT)}):
        head = read(off, min(HEADER_BYTES, size - off))
        if not is_vbios(head):
            continue
        length = min(head[2] * 512, size - off)
        if length <= len(head):
            continue
        found = vbios_identity(read(off, length))
        if found is not None:
            return replace(found, offset=off + found.offset)
    return None


def read_identity(read: Reader, size: int, hints: Iterable[int] = ()) -> tuple[VbiosIdentity | None, bool]:
    """The flash's identity: :func:`probe_identity`, else a scan of the whole flash. Returns (identity, scanned)."""
    found = probe_identity(read, size, hints)
    if found is not None:
        return found, False
    return vbios_identity(read(0, size)), True


@dataclass
class BoardCheck:
    """The outcome of comparing an image's identity with the flash's (or the journal's record of it)."""

    image: VbiosIdentity | None
    flash: VbiosIdentity | None
    #: "flash": read now; "journal": recorded before an interrupted job changed anything; "unrecorded": a
    #: journal without a record; "image": the image has no VBIOS, so the flash was not read
    source: str
    differences: list[str]
    forced: bool = False

    @property
    def match(self) -> bool | None:
        """True/False when both sides have a VBIOS, None when one lacks it (not checked)."""
        if self.image is None or self.flash is None:
            return None
        return not self.differences

    def warnings(self) -> list[str]:
        """What the check could not establish, and a forced mismatch, as lines for the plan."""
        out = []
        if self.image is None:
            out.append("the image holds no atom vbios: the board it is for cannot be checked")
        elif self.source == "unrecorded":
            out.append("the interrupted job's journal recorded no board identity: the board is not checked")
        elif self.flash is None:
            where = "the flash held" if self.source == "journal" else "the flash holds"
            out.append(f"{where} no atom vbios: the board cannot be checked against the image")
        if self.forced and self.differences:
            out.append(f"writing an image for another board (--force-board-mismatch): {'; '.join(self.differences)}")
        return out

    def describe(self) -> str:
        """Both sides in words, for the plan and the refusal."""
        def side(x: VbiosIdentity | None) -> str:
            return "no atom vbios" if x is None else f"{x.describe()} (vbios at 0x{x.offset:x})"

        flash = "flash (as recorded before the interrupted job)" if self.source == "journal" else "flash"
        return f"image: {side(self.image)}; {flash}: {side(self.flash)}"

    def as_dict(self) -> dict[str, Any]:
        """The check as a JSON-ready dict: both identities, where the flash's came from, the outcome."""
        return {"image": None if self.image is None else self.image.to_doc(),
                "flash": None if self.flash is None else self.flash.to_doc(),
                "source": self.source, "match": self.match, "forced": self.forced}


def compare(image: VbiosIdentity | None, flash: VbiosIdentity | None, *, source: str = "flash",
            force: bool = False) -> BoardCheck:
    """Refuse (exit 2) an image for another board unless ``force``; one side without a VBIOS is not refused."""
    diffs = identity_differences(image, flash) if image is not None and flash is not None else []
    check = BoardCheck(image, flash, source, diffs, force)
    if diffs and not force:
        raise Refused(f"refusing the image: it is for another board ({'; '.join(diffs)}); {check.describe()}",
                      hint="check that the image belongs to this board; --force-board-mismatch writes it anyway")
    return check
