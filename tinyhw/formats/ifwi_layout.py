"""The structure of a raw Navi31 IFWI image (the whole 2 MiB SPI flash), for ``firmware inspect|diff``.

Spec: specs/navi31-spi-flash.md §g.1 (landmarks: ``AA 55 AA 55`` header, the $SGN pointer at 0x1000,
$PSP directories at 0x2000/0x3000, ISH A/B at 0x12000/0x13000 and their fields, metadata near
0x1EF000; directory header = cookie, checksum, count, info; 16-byte entries, size (count + 1) x 16),
§g.2 (the item resolver: items 0x01-0x08 and 0x80-0x89, "exactly one" $SGN entry per signature type,
"item extends beyond IFWI"), §g.3 (the embedded VBIOS, found by :mod:`tinyhw.formats.vbios`).
Structure names and the directory checksum rule (Fletcher-32 over the directory from +8, as AMD's
PSP directories in coreboot's amdfwtool) are the spec's inferences; a checksum that does not match is
shown, never treated as an error. The landmark checks (size, magic, the $PSP cookies) and their
constants are :mod:`tinyhw.formats.ifwi`'s, the single source the flash feature gates writing with;
this module reports their findings among its problems and describes the rest.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tinyhw.formats.fwregion import Reader, Region, unique_names
from tinyhw.formats.ifwi import (
    PSP_COOKIE,
    ByteSlices,
    looks_like_ifwi,
    magic_problem,
    psp_directory_problem,
    size_problem,
)
from tinyhw.formats.ifwi import PSP_DIRECTORIES as PSP_DIRS
from tinyhw.formats.vbios import Vbios, find_vbios, vbios_identities

__all__ = ["DirEntry", "Directory", "IfwiLayout", "Ish", "Item", "ITEMS", "fletcher32", "looks_like_ifwi",
           "missing_structures", "parse_ifwi", "resolve_item"]

SGN_POINTER = 0x1000
ISH_OFFSETS = (0x12000, 0x13000)
FIRST_ISH_FIRMWARE_ID = 0x13C
METADATA = Region("psp update metadata (near 0x1ef000)", 0x1EF000, 0x1000)
#: The most entries a $PSP or $SGN directory may declare: real directories hold a few
#: dozen; a larger count is malformed (the item resolver then never scans the image entry by entry).
MAX_ENTRIES = 0x100

#: §g.2: item type -> name. Fixed items: (offset, size); the others are resolved from the image.
ITEMS = {0x01: "ifwi header", 0x02: "$PSP directory 1", 0x03: "$PSP directory 2", 0x04: "(meaning unknown)",
         0x05: "(meaning unknown)", 0x06: "ISH A", 0x07: "ISH B", 0x08: "ISH A payload", 0x80: "$SGN pointer",
         0x81: "$SGN table", **{0x81 + t: f"signature type {t}" for t in range(1, 8)}, 0x89: "(meaning unknown)"}
_FIXED = {0x01: (0, 0x54), 0x04: (0x10000, 0x1000), 0x05: (0x11000, 0x1000), 0x06: (0x12000, 0x20),
          0x07: (0x13000, 0x20), 0x80: (0x1000, 4), 0x89: (0x1F0000, 0x100)}


@dataclass(frozen=True)
class DirEntry:
    """A 16-byte directory entry: for $PSP type (low byte), sub-program (byte 1), size, location
    (u64, as amdfwtool; inferred); for $SGN the spec's four u32 (type, unknown, size, offset)."""

    index: int
    type: int
    subprogram: int
    size: int
    location: int
    in_image: bool


@dataclass(frozen=True)
class Directory:
    """A ``$PSP`` or ``$SGN`` directory: offset, cookie, checksum, entry count and entries."""
    offset: int
    cookie: str
    checksum: int
    count: int
    info: int
    entries: tuple[DirEntry, ...]
    checksum_ok: bool  # Fletcher-32 over +8 .. end (inferred rule)

    @property
    def size(self) -> int:
        """Bytes the directory takes: its 16-byte header and 16 bytes per entry."""
        return (self.count + 1) * 16


@dataclass(frozen=True)
class Ish:
    """Image slot header (§g.1, coreboot naming, inferred)."""

    offset: int
    checksum: int
    boot_priority: int
    update_retry_count: int
    glitch_retry: int
    payload_location: int
    firmware_id: int
    slot_max_size: int


@dataclass(frozen=True)
class Item:
    """One item of the IFWI layout: number, name, location and size where known, and its error."""
    item: int
    name: str
    offset: int | None
    size: int | None
    error: str | None = None


@dataclass
class IfwiLayout:
    """The parsed layout of a Navi31 IFWI image: magic, directories, items and problems."""
    size: int
    magic_ok: bool = False
    psp_directories: list[Directory] = field(default_factory=list)
    sgn_pointer: int | None = None
    sgn: Directory | None = None
    ish: list[Ish] = field(default_factory=list)
    items: list[Item] = field(default_factory=list)
    vbios: list[Vbios] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def fletcher32(data: bytes | memoryview) -> int:
    """Fletcher-32 over little-endian 16-bit words (the inferred $PSP/$SGN directory checksum)."""
    c0 = c1 = 0xFFFF
    words = struct.unpack_from(f"<{len(data) // 2}H", data)
    for w in words:
        c0 = (c0 + w) % 0xFFFF
        c1 = (c1 + c0) % 0xFFFF
    return (c1 << 16) | c0


def _directory(data: bytes, off: int, cookie: bytes, problems: list[str], what: str) -> Directory | None:
    found = bytes(data[off:off + 4])
    if found != cookie:
        problems.append(f"0x{off:x}: {what}: {found.hex() or 'end of data'} (expected {cookie.decode()})")
        return None
    hdr = Reader(data, problems).unpack("III", off + 4, f"{what} header")
    if hdr is None:
        return None
    checksum, count, info = hdr
    problem = _count_problem(data, off, count)
    if problem is not None:
        problems.append(f"0x{off + 8:x}: {what}: {problem}")
        return None
    entries = []
    for i in range(count):
        a, b, c, d = struct.unpack_from("<IIII", data, off + 16 + 16 * i)
        if cookie == b"$SGN":  # (type, unknown, size, offset)
            entries.append(DirEntry(i, a, b, c, d, d + c <= len(data)))
        else:  # (type | subprogram << 8 ..., size, location u64; address-mode bits 62-63 masked)
            loc = (c | d << 32) & 0x3FFF_FFFF_FFFF_FFFF
            entries.append(DirEntry(i, a & 0xFF, a >> 8 & 0xFF, b, loc, loc + b <= len(data)))
    body = memoryview(data)[off + 8:off + 16 + 16 * count]
    return Directory(off, cookie.decode(), checksum, count, info, tuple(entries), fletcher32(body) == checksum)


def missing_structures(data: bytes) -> list[str]:
    """What a flashable image lacks beyond size and magic: a parsable ``$PSP`` directory
    at 0x2000 or 0x3000 (cookie, header, entries that fit) and an ATOM VBIOS (``55 AA``, the ATI magic and
    an ATOM ROM header); each missing structure is one line saying exactly what was found instead."""
    out = []
    why: list[str] = []
    if not any(_directory(data, off, PSP_COOKIE, why, f"$PSP directory {i}") is not None
               for i, off in enumerate(PSP_DIRS, start=1)):
        out.append("no parsable $PSP directory at 0x2000 or 0x3000 (" + "; ".join(why) + ")")
    if not vbios_identities(data):
        found = find_vbios(data)
        detail = (f"option roms at {', '.join(f'0x{v.offset:x}' for v in found)} have no ati magic and atom rom "
                  "header" if found else "no 55aa option rom at a 512-byte boundary")
        out.append(f"no atom vbios ({detail})")
    return out


def _count_problem(data: ByteSlices, off: int, count: int) -> str | None:
    """Why the entry count of the directory at ``off`` cannot be right, or None: past :data:`MAX_ENTRIES`,
    or more entries than fit in the data (§g.2 "item extends beyond IFWI")."""
    room = max(0, (len(data) - off - 16) // 16)
    if count > room:
        return f"{count} entries (item extends beyond IFWI: room for {room})"
    if count > MAX_ENTRIES:
        return f"{count} entries (malformed: more than {MAX_ENTRIES})"
    return None


def resolve_item(data: ByteSlices, item: int) -> Item:
    """§g.2: the exact bytes the PSP asks for as ``item``: (offset, size), or an ``error``."""
    name = ITEMS.get(item, f"item 0x{item:02x}")

    def fail(msg: str) -> Item:
        return Item(item, name, None, None, msg)

    def u32(off: int) -> int | None:
        return int.from_bytes(data[off:off + 4], "little") if off + 4 <= len(data) else None

    if item in _FIXED:
        off, size = _FIXED[item]
    elif item in (0x02, 0x03):
        off = PSP_DIRS[item - 0x02]
        if psp_directory_problem(data, item - 0x01) is not None:
            return fail(f"no $PSP at 0x{off:x}")
        count = u32(off + 8)
        size = (count + 1) * 16 if count is not None else 0
        if count is not None and count > MAX_ENTRIES and off + size <= len(data):
            return fail(f"$PSP at 0x{off:x}: {count} entries (malformed: more than {MAX_ENTRIES})")
    elif item == 0x08:
        ish_off, ish_size = u32(0x12010), u32(0x12018)
        if ish_off is None or ish_size is None:
            return fail("ISH A is beyond the data")
        off, size = ish_off, ish_size
    elif 0x81 <= item <= 0x88:
        t = u32(SGN_POINTER)
        if t is None or data[t:t + 4] != b"$SGN":
            return fail(f"no $SGN at the pointer (0x{t:x})" if t is not None else "no $SGN pointer")
        count = u32(t + 8) or 0
        if (why := _count_problem(data, t, count)) is not None:
            return fail(f"$SGN at 0x{t:x}: {why}")
        if item == 0x81:
            off, size = t, (count + 1) * 16
        else:
            matches = [(u32(e + 8), u32(e + 12)) for e in range(t + 16, min(t + 16 + 16 * count, len(data) - 15), 16)
                       if u32(e) == item - 0x81]
            if len(matches) != 1:
                return fail(f"{len(matches)} $SGN entries of signature type {item - 0x81} (expected exactly one)")
            found_size, found_off = matches[0]
            assert found_off is not None and found_size is not None
            off, size = found_off, found_size
    else:
        return fail("unsupported item")
    if off + size > len(data) or size < 0:
        return Item(item, name, off, size, f"item extends beyond IFWI ([0x{off:x}, 0x{off + size:x}) "
                                           f"of 0x{len(data):x} bytes)")
    return Item(item, name, off, size)


def parse_ifwi(data: bytes) -> IfwiLayout:
    """Describe a raw IFWI image: header, directories, ISHs, every resolvable item, embedded VBIOS."""
    lay = IfwiLayout(size=len(data))
    p = lay.problems
    magic, size = magic_problem(data), size_problem(data)
    lay.magic_ok = magic is None
    p += [x for x in (magic, size) if x is not None]
    for i, off in enumerate(PSP_DIRS, start=1):
        missing = psp_directory_problem(data, i)
        if missing is not None:
            p.append(missing)
            continue
        d = _directory(data, off, PSP_COOKIE, p, f"$PSP directory {i}")
        if d is not None:
            lay.psp_directories.append(d)
    lay.sgn_pointer = Reader(data, p).u32(SGN_POINTER, "$SGN pointer")
    if lay.sgn_pointer is not None:
        lay.sgn = _directory(data, lay.sgn_pointer, b"$SGN", p, "$SGN table")
    for off in ISH_OFFSETS:
        v = Reader(data, p).unpack("7I", off, f"ISH at 0x{off:x}")
        if v is not None:
            lay.ish.append(Ish(off, *v))
    if lay.ish and lay.ish[0].firmware_id != FIRST_ISH_FIRMWARE_ID:
        lay.notes.append(f"0x12014: first ISH firmware id 0x{lay.ish[0].firmware_id:x} (the spec expects 0x13c)")
    for item in ITEMS:
        it = resolve_item(data, item)
        lay.items.append(it)
        if it.error is None:
            continue
        # a missing directory or $SGN table is reported once, above, not again for each item it holds
        already = ((item in (0x02, 0x03) and all(d.offset != PSP_DIRS[item - 2] for d in lay.psp_directories))
                   or (0x81 <= item <= 0x88 and lay.sgn is None))
        if not already:
            p.append(f"item 0x{item:02x} ({it.name}): {it.error}")
    lay.vbios = find_vbios(data)
    if not lay.vbios:
        p.append("no embedded vbios found (no 55aa option rom at a 512-byte boundary)")
    lay.regions = unique_names(_regions(lay))
    return lay


def _regions(lay: IfwiLayout) -> list[Region]:
    out = [Region(f"item 0x{it.item:02x} {it.name}", it.offset, it.size) for it in lay.items
           if it.error is None and it.offset is not None and it.size]
    for n, d in enumerate(lay.psp_directories, start=1):
        out += [Region(f"$PSP directory {n} entry {e.index} (type 0x{e.type:02x})", e.location, e.size)
                for e in d.entries if e.in_image and e.size]
    if len(lay.ish) == 2 and lay.ish[1].payload_location + lay.ish[1].slot_max_size <= lay.size:
        out.append(Region("ISH B payload", lay.ish[1].payload_location, lay.ish[1].slot_max_size))
    if lay.size >= METADATA.end:
        out.append(METADATA)
    for vb in lay.vbios:
        out += vb.regions(f"vbios@0x{vb.offset:x}")
    return out
