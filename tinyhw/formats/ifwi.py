"""Raw Navi31 IFWI image checks: is this file something that may be written to the board's flash?

Implements specs/navi31-spi-flash.md §g.1 (raw 2 MiB image landmarks: ``AA 55 AA 55`` at offset 0,
``$PSP`` directories at 0x2000 / 0x3000) and §d.2 (the image check before flashing: exactly
0x200000 bytes, plus the recommended magic check). Pure: bytes in, a result out; the flash
feature and the firmware feature both use it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tinyhw.errors import Refused

#: Size of a raw Navi31 IFWI image, the whole SPI flash (§0, §d.2).
IMAGE_SIZE = 0x200000
#: Raw image magic at offset 0 (§0, §g.1).
MAGIC = bytes([0xAA, 0x55, 0xAA, 0x55])
#: Offsets of the two $PSP directories (§g.1).
PSP_DIRECTORIES = (0x2000, 0x3000)
PSP_COOKIE = b"$PSP"


@dataclass(frozen=True)
class ImageCheck:
    """What :func:`check_image` found. ``ok`` is the hard rule (size and magic)."""

    size: int
    size_ok: bool
    magic_ok: bool
    psp_directories: tuple[int, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return self.size_ok and self.magic_ok


def check_image(data: bytes, expected_size: int = IMAGE_SIZE) -> ImageCheck:
    """Check ``data`` against §d.2: size exactly ``expected_size``, ``AA 55 AA 55`` at 0.

    ``$PSP`` at 0x2000/0x3000 is reported (``psp_directories``) but not required: the issue
    makes only size and magic a refusal; a missing directory is a note the CLI shows.
    """
    size_ok = len(data) == expected_size
    magic_ok = data[:4] == MAGIC
    found = tuple(off for off in PSP_DIRECTORIES if data[off:off + 4] == PSP_COOKIE)
    notes = []
    if not size_ok:
        notes.append(f"image is 0x{len(data):x} bytes, not 0x{expected_size:x}")
    if not magic_ok:
        notes.append(f"image starts with {data[:4].hex()}, not the ifwi magic {MAGIC.hex()}")
    if magic_ok and not found:
        notes.append("no $PSP directory at 0x2000 or 0x3000")
    return ImageCheck(len(data), size_ok, magic_ok, found, tuple(notes))


def require_flashable(data: bytes, *, force: bool = False, expected_size: int = IMAGE_SIZE) -> ImageCheck:
    """Raise :class:`Refused` (exit 2) unless ``data`` may be flashed; ``force`` waives only the magic."""
    result = check_image(data, expected_size)
    if not result.size_ok:
        raise Refused(f"refusing the image: it is 0x{result.size:x} bytes, the flash holds exactly "
                      f"0x{expected_size:x}", hint="give a full raw flash image (a dump of the board)")
    if not result.magic_ok and not force:
        raise Refused(f"refusing the image: it starts with {data[:4].hex()}, not the ifwi magic {MAGIC.hex()}",
                      hint="this does not look like a raw navi31 flash image; --force writes it anyway")
    return result
