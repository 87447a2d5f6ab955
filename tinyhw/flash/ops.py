"""Read-only flash operations: info, read, dump, verify (specs/navi31-spi-flash.md §d.8).

Each takes an open :class:`~tinyhw.flash.device.FlashDevice` and returns plain data the CLI prints
or turns into JSON. Progress goes to a :class:`Progress` the caller provides (the CLI draws a rich
bar on a terminal; the library never prints).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import Refused
from tinyhw.flash import vote
from tinyhw.flash.chip import CHIP_NAME
from tinyhw.flash.device import FlashDevice
from tinyhw.flash.files import sha256
from tinyhw.flash.identity import probe_identity
from tinyhw.flash.protection import SR1_SRP0, SR1_WEL, SR1_WIP, SR2_CMP, SR2_SRP1
from tinyhw.progress import NO_PROGRESS, Progress


def info(dev: FlashDevice) -> dict[str, Any]:
    """JEDEC id, chip, size, SR1/SR2/SR3, protection in words and as a range, SFDP presence (§d.8), and the
    board identity of the flash's VBIOS (§g.3) where one sits at a 128 KiB boundary (not a whole-flash scan)."""
    chip = dev.chip
    st = chip.status()
    prot = chip.protection(st.sr1, st.sr2)
    present, offset, capture = chip.sfdp()
    board = probe_identity(chip.read, chip.size)
    return {
        "jedec_id": chip.jedec.hex(),
        "chip": CHIP_NAME,
        "size": chip.size,
        "sectors": chip.size // chip.sector_size,
        "sector_size": chip.sector_size,
        "sr1": st.sr1,
        "sr2": st.sr2,
        "sr3": st.sr3,
        "busy": bool(st.sr1 & SR1_WIP),
        "write_enabled": bool(st.sr1 & SR1_WEL),
        "protected": not prot.none,
        "protection": prot.words(),
        "protected_range": None if prot.none else {"start": prot.start, "end": prot.end},
        "cmp": bool(st.sr2 & SR2_CMP),
        "status_register_protect": {"srp0": bool(st.sr1 & SR1_SRP0), "srp1": bool(st.sr2 & SR2_SRP1)},
        "sfdp": present,
        "sfdp_offset": offset,
        "sfdp_capture": capture.hex(),
        "read_scheme": "chained" if dev.sw.chain else "paired",
        "location": dev.location,
        "board_identity": None if board is None else board.to_doc(),
    }


def check_range(dev: FlashDevice, address: int, size: int) -> None:
    """Refuse (exit 2) a byte range that is empty or runs past the flash."""
    if address < 0 or size < 0:
        raise Refused(f"the {'address' if address < 0 else 'size'} {address if address < 0 else size} is negative",
                      hint="address and size are 0 or more: decimal or 0x-hex, with a k or m suffix")
    if size == 0 or address + size > dev.size:
        raise Refused(f"range 0x{address:x}+0x{size:x} is not inside the flash (0x0-0x{dev.size - 1:x})",
                      hint="address and size may be decimal or 0x-hex, with a k or m suffix")


def read(dev: FlashDevice, address: int, size: int, progress: Progress = NO_PROGRESS) -> bytes:
    """Read ``size`` bytes from ``address`` (the range checked first)."""
    check_range(dev, address, size)
    with progress.task("read", size) as advance:
        return dev.chip.read(address, size, advance)


def dump(dev: FlashDevice, progress: Progress = NO_PROGRESS) -> bytes:
    """The whole flash."""
    with progress.task("dump", dev.size) as advance:
        return dev.chip.read(0, dev.size, advance)


@dataclass
class VerifyResult:
    """The outcome of comparing the flash with an image: match, first mismatch, mismatched sectors."""
    match: bool
    first_mismatch: int | None
    mismatched_sectors: list[int] = field(default_factory=list)
    flash_byte: int | None = None
    image_byte: int | None = None
    sha256: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {"match": self.match, "first_mismatch": self.first_mismatch,
                "mismatched_sectors": self.mismatched_sectors, "flash_byte": self.flash_byte,
                "image_byte": self.image_byte, "sha256": self.sha256}


def compare(flash: bytes, image: bytes, sector_size: int, base: int = 0) -> VerifyResult:
    """Compare equal-length ``flash`` and ``image`` starting at flash address ``base``."""
    result = VerifyResult(True, None, sha256=sha256(flash))
    if flash == image:
        return result
    result.match = False
    for off in range(0, len(flash), sector_size):
        a, b = flash[off:off + sector_size], image[off:off + sector_size]
        if a != b:
            result.mismatched_sectors.append((base + off) // sector_size)
            if result.first_mismatch is None:
                i = next(i for i in range(len(a)) if a[i] != b[i])
                result.first_mismatch = base + off + i
                result.flash_byte, result.image_byte = a[i], b[i]
    return result


def check_sector_range(total: int, start: int | None, count: int | None) -> tuple[int, int]:
    """§d.3: start in [0, total), count in [1, total - start]; the default count runs to the end."""
    s = 0 if start is None else start
    if not 0 <= s < total:
        raise Refused(f"--start-sector {s} is outside 0..{total - 1}")
    c = total - s if count is None else count
    if not 1 <= c <= total - s:
        raise Refused(f"--sector-count {c} is outside 1..{total - s} for start sector {s}")
    return s, c


def verify(dev: FlashDevice, image: bytes, progress: Progress = NO_PROGRESS,
           start_sector: int | None = None, sector_count: int | None = None, reads: int = 1) -> VerifyResult:
    """Compare the flash with ``image`` (a full raw image, exactly the flash size): the whole of it,
    or only the sectors ``start_sector`` .. ``start_sector + sector_count - 1``; with ``reads`` >= 3 the
    flash side is a majority-vote read (:mod:`tinyhw.flash.vote`), so a bad read is not a mismatch."""
    if len(image) != dev.size:
        raise Refused(f"the image is 0x{len(image):x} bytes, the flash 0x{dev.size:x}",
                      hint="verify compares a full raw flash image")
    start, count = check_sector_range(dev.size // dev.sector_size, start_sector, sector_count)
    lo, hi = start * dev.sector_size, (start + count) * dev.sector_size
    vote.check_reads(reads)
    flash = vote.read(dev, lo, hi - lo, reads, progress, label="verify").data
    return compare(flash, image[lo:hi], dev.sector_size, base=lo)
