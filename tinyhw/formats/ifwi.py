"""Raw Navi31 IFWI image checks: the single source of the size, magic and $PSP landmark checks.

Implements specs/navi31-spi-flash.md §g.1 (raw 2 MiB image landmarks: ``AA 55 AA 55`` at offset 0,
``$PSP`` directories at 0x2000 / 0x3000) and §d.2 (the image check before flashing: exactly
0x200000 bytes, plus the recommended magic check). Pure: bytes in, a result out.

Both users call the three landmark checks below and nothing else for these facts: the flash
feature gates writing with :func:`check_image` / :func:`require_flashable`, and the structure
parser :func:`tinyhw.formats.ifwi_layout.parse_ifwi` reports the same findings (same wording,
``"0xOFF: found (expected ...)"``) among its problems.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Protocol

from tinyhw.errors import Refused

#: Size of a raw Navi31 IFWI image, the whole SPI flash (§0, §d.2).
IMAGE_SIZE = 0x200000
#: Raw image magic at offset 0 (§0, §g.1).
MAGIC = bytes([0xAA, 0x55, 0xAA, 0x55])
#: Offsets of the two $PSP directories (§g.1).
PSP_DIRECTORIES = (0x2000, 0x3000)
PSP_COOKIE = b"$PSP"


class ByteSlices(Protocol):
    """What the table readers need of an image: its length and contiguous slices (``bytes``, or a
    :class:`~tinyhw.formats.ifwi_regions.LazyImage` that reads a device's flash only where it is sliced)."""

    def __len__(self) -> int:
        """The image's size in bytes."""

    def __getitem__(self, key: slice, /) -> bytes:
        """The bytes of a contiguous slice."""


# -- the landmark checks (None: fine; else one precise problem) ------------------------------------------------
def magic_problem(data: bytes) -> str | None:
    """``AA 55 AA 55`` at offset 0 (§g.1)."""
    found = bytes(data[:4])
    if found == MAGIC:
        return None
    return f"0x0: {found.hex() or 'empty'} (expected the ifwi magic {MAGIC.hex()})"


def size_problem(data: bytes, expected_size: int = IMAGE_SIZE) -> str | None:
    """Exactly ``expected_size`` bytes, the whole flash (§d.2)."""
    if len(data) == expected_size:
        return None
    return f"0x{len(data):x}: the image is 0x{len(data):x} bytes (expected 0x{expected_size:x}, the whole flash)"


def psp_directory_problem(data: ByteSlices, index: int) -> str | None:
    """The ``$PSP`` cookie of directory ``index`` (1 or 2) at its offset (§g.1, §g.2 items 0x02/0x03)."""
    off = PSP_DIRECTORIES[index - 1]
    found = bytes(data[off:off + 4])
    if found == PSP_COOKIE:
        return None
    return f"0x{off:x}: $PSP directory {index}: {found.hex() or 'end of data'} (expected {PSP_COOKIE.decode()})"


def looks_like_ifwi(data: bytes) -> bool:
    """The magic is there (what ``firmware inspect`` detects a raw image by)."""
    return magic_problem(data) is None


@dataclass(frozen=True)
class ImageCheck:
    """What :func:`check_image` found. ``ok`` is the hard rule (size and magic).

    ``problems`` holds the findings in the parser's precise form; ``notes`` the same facts in the
    words the flash commands show.
    """

    size: int
    size_ok: bool
    magic_ok: bool
    psp_directories: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        """True when the image has the expected size and the IFWI magic."""
        return self.size_ok and self.magic_ok


def check_image(data: bytes, expected_size: int = IMAGE_SIZE) -> ImageCheck:
    """Check ``data`` against §d.2: size exactly ``expected_size``, ``AA 55 AA 55`` at 0.

    ``$PSP`` at 0x2000/0x3000 is reported (``psp_directories``) but not required: the issue
    makes only size and magic a refusal; a missing directory is a note the CLI shows.
    """
    magic = magic_problem(data)
    size = size_problem(data, expected_size)
    psp = {off: psp_directory_problem(data, i) for i, off in enumerate(PSP_DIRECTORIES, start=1)}
    found = tuple(off for off, problem in psp.items() if problem is None)
    notes = []
    if size is not None:
        notes.append(f"image is 0x{len(data):x} bytes, not 0x{expected_size:x}")
    if magic is not None:
        notes.append(f"image starts with {data[:4].hex()}, not the ifwi magic {MAGIC.hex()}")
    if magic is None and not found:
        notes.append("no $PSP directory at 0x2000 or 0x3000")
    problems = tuple(p for p in (magic, size, *psp.values()) if p is not None)
    return ImageCheck(len(data), size is None, magic is None, found, tuple(notes), problems)


def require_flashable(data: bytes, *, force: bool = False, expected_size: int = IMAGE_SIZE) -> ImageCheck:
    """Raise :class:`Refused` (exit 2) unless ``data`` may be flashed.

    The size is always checked; ``force`` waives the rest: the magic, then a
    parsable ``$PSP`` directory and an ATOM VBIOS, each named exactly when missing. With ``force``
    the missing structures become notes.
    """
    from tinyhw.formats.ifwi_layout import missing_structures  # the structure parser, which builds on this module

    result = check_image(data, expected_size)
    if not result.size_ok:
        raise Refused(f"refusing the image: it is 0x{result.size:x} bytes, the flash holds exactly "
                      f"0x{expected_size:x}", hint="give a full raw flash image (a dump of the board)")
    if not result.magic_ok and not force:
        raise Refused(f"refusing the image: it starts with {data[:4].hex()}, not the ifwi magic {MAGIC.hex()}",
                      hint="this does not look like a raw amd (ifwi) flash image; --force writes it anyway")
    missing = missing_structures(data) if result.magic_ok else []
    if missing and not force:
        raise Refused(f"refusing the image: {'; '.join(missing)}",
                      hint="this is not a complete amd (ifwi) flash image; --force writes it anyway")
    if missing:
        kept = [n for n in result.notes if not n.startswith("no $PSP directory")]
        result = replace(result, notes=(*kept, *missing))
    return result
