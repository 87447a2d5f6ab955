"""AMD ATOM VBIOS images (PCI option ROMs), bare or embedded in a flash image, and board identity.

Spec: specs/navi31-spi-flash.md §g.3: the option-ROM header (``55 AA``, length byte × 512, PCIR
pointer at 0x18, string count at 0x2F, the " 761295520" magic at 0x30, ATOM ROM header pointer at
0x48, build date at 0x50, strings pointer at 0x6E, part-number fallback at 0x80, ASIC string at
0x94), the PCIR structure (Linux ``rom.c`` checks: "PCIR", structure length, image length, last-image
bit), ``atom_rom_header_v2_2`` and the kernel's rules (``atom.c``) for the part number, version and
name strings. The checksum is the option-ROM rule: all bytes of the image sum to 0 modulo 256.

:func:`vbios_identity` is what the flash feature compares before writing an image: it finds the
first ATOM VBIOS in any byte string (a 2 MiB IFWI, a bare ROM) and returns part number, PCI ids and
version. Parsers never raise: problems are listed as ``"0xOFF: found (expected)"``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tinyhw.formats.fwregion import Reader, Region, cstring

__all__ = [
    "ATI_MAGIC", "AtomRomHeader", "Pcir", "RomImage", "Vbios", "VbiosIdentity", "find_vbios", "identity_differences",
    "is_vbios", "parse_vbios", "vbios_identities", "vbios_identity",
]

ROM_SIGNATURE = b"\x55\xaa"
ATI_MAGIC = b" 761295520"  # AMD_VBIOS_SIGNATURE at 0x30
ATOM_SIGNATURES = (b"ATOM", b"MOTA")
VERSION_ANCHOR = b"ATOMBIOSBK-AMD"
PART_LIMIT, VERSION_LIMIT, NAME_LIMIT = 43, 32, 63
SCAN_ALIGN = 512
_MAX_IMAGES = 8
CODE_TYPES = {0: "x86", 1: "open firmware", 2: "pa-risc", 3: "efi", 0x70: "nvidia falcon", 0xE0: "nvidia ext"}
_DATE = re.compile(rb"^(\d\d)/(\d\d)/(\d\d) (\d\d):(\d\d)$")


@dataclass(frozen=True)
class Pcir:
    """PCI data structure of one option-ROM image (offsets absolute in the scanned data)."""

    offset: int
    vendor_id: int
    device_id: int
    length: int
    revision: int
    class_code: int
    image_length: int  # bytes (the field counts 512-byte units)
    code_revision: int
    code_type: int
    indicator: int

    @property
    def last(self) -> bool:
        """True when the PCIR indicator marks this the last image of the chain (bit 7)."""
        return bool(self.indicator & 0x80)


@dataclass(frozen=True)
class AtomRomHeader:
    """``atom_rom_header_v2_2`` at the pointer stored at image + 0x48."""

    offset: int
    structure_size: int
    format_revision: int
    content_revision: int
    signature: str
    bios_segment: int
    protected_mode_offset: int
    config_filename_offset: int
    crc_block_offset: int
    boot_message_offset: int
    int10_offset: int
    pci_bus_dev_init_code: int
    io_base_address: int
    subsystem_vendor_id: int
    subsystem_id: int
    pci_info_offset: int
    master_command_table: int
    master_data_table: int
    psp_dir_table_offset: int | None  # u32 at +0x24, when the structure is that long


@dataclass(frozen=True)
class RomImage:
    """One image of the expansion-ROM chain: offset, length, its PCIR and whether its checksum holds."""
    offset: int
    length: int  # header byte 2 x 512 (AMD_VBIOS_LENGTH)
    pcir: Pcir | None
    checksum_ok: bool | None  # None: the image extends beyond the data


@dataclass(frozen=True)
class VbiosIdentity:
    """What identifies a board's VBIOS: compare ``key()`` between an image and the current flash."""

    offset: int
    part_number: str
    vendor_id: int | None
    device_id: int | None
    subsystem_vendor_id: int | None
    subsystem_id: int | None
    version: str
    build_date: str | None
    name: str
    checksum_ok: bool | None

    def key(self) -> tuple[str, int | None, int | None]:
        """Part number and PCI ids: equal for two images of the same board (the version may change)."""
        return (self.part_number, self.vendor_id, self.device_id)

    def describe(self) -> str:
        """One line naming the board: part number, PCI ids, version and build date."""
        ids = f"{self.vendor_id:04x}:{self.device_id:04x}" if self.vendor_id is not None else "no pcir"
        return (f"part {self.part_number or '?'}, pci {ids}, version {self.version or '?'}"
                + (f", built {self.build_date}" if self.build_date else ""))

    def to_doc(self) -> dict[str, Any]:
        """JSON-able form (what a flash journal records, so a resumed write compares against it)."""
        return {k: getattr(self, k) for k in _IDENTITY_FIELDS}

    @classmethod
    def from_doc(cls, doc: dict[str, Any]) -> VbiosIdentity:
        """The identity from its JSON document (as a flash job's journal stores it)."""
        fields: dict[str, Any] = {k: doc.get(k) for k in _IDENTITY_FIELDS}
        return cls(**fields)


_IDENTITY_FIELDS = ("offset", "part_number", "vendor_id", "device_id", "subsystem_vendor_id", "subsystem_id",
                    "version", "build_date", "name", "checksum_ok")


@dataclass
class Vbios:
    """A parsed AMD ATOM VBIOS: its ROM images, ATOM ROM header, part number, version and problems."""
    offset: int
    images: list[RomImage] = field(default_factory=list)
    ati_magic: bool = False
    atom: AtomRomHeader | None = None
    string_count: int = 0
    strings_offset: int = 0
    part_number: str = ""
    version: str = ""
    name: str = ""
    build_date: str | None = None
    asic_info: str = ""
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def checksum_ok(self) -> bool | None:
        """Whether the first image's checksum holds (None when there is no image or it runs past the data)."""
        return self.images[0].checksum_ok if self.images else None

    def identity(self) -> VbiosIdentity:
        """The board identity this VBIOS names (what ``flash write`` compares between images)."""
        p = self.images[0].pcir if self.images else None
        a = self.atom
        return VbiosIdentity(self.offset, self.part_number, p.vendor_id if p else None, p.device_id if p else None,
                             a.subsystem_vendor_id if a else None, a.subsystem_id if a else None, self.version,
                             self.build_date, self.name, self.checksum_ok)

    def regions(self, prefix: str = "vbios") -> list[Region]:
        """Named byte ranges of the VBIOS (its images, tables) for ``firmware diff``."""
        out: list[Region] = []
        for i, im in enumerate(self.images):
            kind = CODE_TYPES.get(im.pcir.code_type, "?") if im.pcir else "?"
            out.append(Region(f"{prefix} image {i} ({kind})", im.offset, im.length))
            if im.pcir:
                out.append(Region(f"{prefix} image {i} pcir", im.pcir.offset, im.pcir.length))
        if self.atom:
            out.append(Region(f"{prefix} atom rom header", self.atom.offset, self.atom.structure_size))
        return out


def is_vbios(data: bytes, off: int = 0) -> bool:
    """A bare VBIOS (§g.3 step 1): ``55 AA`` at ``off`` and the ATI magic at ``off + 0x30``."""
    return data[off:off + 2] == ROM_SIGNATURE and data[off + 0x30:off + 0x3A] == ATI_MAGIC


def _pcir(rd: Reader, data: bytes, image: int, problems: list[str]) -> Pcir | None:
    ptr = rd.u16(image + 0x18, "pcir pointer")
    if ptr is None:
        return None
    at = image + ptr
    if data[at:at + 4] != b"PCIR":
        problems.append(f"0x{at:x}: {bytes(data[at:at + 4]).hex() or 'end of data'} at the pcir pointer "
                        f"(expected 'PCIR')")
        return None
    v = rd.unpack("HHHHB3sHHBB", at + 4, "pcir structure")
    if v is None:
        return None
    vendor, device, _devlist, length, rev, cls, ilen, crev, ctype, ind = v
    if length < 0x18:
        problems.append(f"0x{at + 0xA:x}: pcir structure length 0x{length:x} (expected at least 0x18)")
    return Pcir(at, vendor, device, length, rev, int.from_bytes(cls, "little"), ilen * 512, crev, ctype, ind)


def parse_vbios(data: bytes, offset: int = 0) -> Vbios:
    """Decode the option-ROM image chain starting at ``offset`` and its ATOM headers and strings."""
    vb = Vbios(offset)
    rd = Reader(data, vb.problems)
    at = offset
    while len(vb.images) < _MAX_IMAGES:
        if data[at:at + 2] != ROM_SIGNATURE:
            vb.problems.append(f"0x{at:x}: {bytes(data[at:at + 2]).hex() or 'end of data'} "
                               f"(expected the option-rom signature 55aa)")
            break
        n = rd.u8(at + 2, "rom length byte")
        length = (n or 0) * 512
        pcir = _pcir(rd, data, at, vb.problems)
        ok = None if at + length > len(data) or length == 0 else sum(memoryview(data)[at:at + length]) % 256 == 0
        if at + length > len(data):
            vb.problems.append(f"0x{at + 2:x}: image length 0x{length:x} runs past the end of the data "
                               f"(0x{len(data):x})")
        vb.images.append(RomImage(at, length, pcir, ok))
        step = pcir.image_length if pcir and pcir.image_length else length
        if pcir is None or pcir.last or step == 0:
            break
        at += step
    if not vb.images:
        return vb
    vb.ati_magic = data[offset + 0x30:offset + 0x3A] == ATI_MAGIC
    if not vb.ati_magic:
        vb.notes.append(f"0x{offset + 0x30:x}: no ' 761295520' magic: not an amd atom vbios")
        return vb
    _atom(vb, rd, data, offset)
    return vb


def _atom(vb: Vbios, rd: Reader, data: bytes, base: int) -> None:
    vb.string_count = rd.u8(base + 0x2F, "string count") or 0
    vb.strings_offset = rd.u16(base + 0x6E, "strings pointer") or 0
    atom_ptr = rd.u16(base + 0x48, "atom rom header pointer") or 0
    hdr = rd.unpack("HBB4sHHHHHHHHHHHHHH", base + atom_ptr, "atom rom header")
    if hdr is not None:
        sig = hdr[3]
        if sig not in ATOM_SIGNATURES:
            vb.problems.append(f"0x{base + atom_ptr + 4:x}: atom rom header signature {sig!r} (expected b'ATOM')")
        else:
            psp = rd.u32(base + atom_ptr + 0x24, "psp directory table offset") if hdr[0] >= 0x28 else None
            fields = (base + atom_ptr, hdr[0], hdr[1], hdr[2], sig.decode("latin-1"), *hdr[4:17], psp)
            vb.atom = AtomRomHeader(*fields)
    vb.part_number = _part_number(vb, data, base)
    vb.version = _version(data, base, vb.strings_offset, atom_ptr)
    vb.name = _name(vb, data, base)
    raw = bytes(data[base + 0x50:base + 0x5E])
    m = _DATE.match(raw)
    vb.build_date = f"20{m[3].decode()}/{m[1].decode()}/{m[2].decode()} {m[4].decode()}:{m[5].decode()}" if m else None
    vb.asic_info = _printable(cstring(data, base + 0x94, 20))


def _printable(raw: bytes, limit: int | None = None) -> str:
    out = []
    for c in raw[:limit] if limit else raw:
        if not 0x20 <= c <= 0x7E:
            break
        out.append(chr(c))
    return "".join(out)


def _part_number(vb: Vbios, data: bytes, base: int) -> str:
    """atom.c: first string at the strings pointer (0x80 when there are none), else after 'ATOMBIOS'."""
    at = base + (vb.strings_offset if vb.string_count else 0x80)
    if at >= len(data) or data[at] == 0:
        found = data.find(b"ATOMBIOS", base + 3, base + 1024 + 8)
        if found < 0:
            return ""
        at = found + len(b"ATOMBIOS")
        if at < len(data) and data[at] == 0:
            at += 1
    out = []
    for c in data[at:at + PART_LIMIT]:
        if not 0x20 <= c <= 0x7A:
            break
        out.append(chr(c))
    return "".join(out)


def _version(data: bytes, base: int, start: int, end: int) -> str:
    """atom.c: the text 18 characters after 'ATOMBIOSBK-AMD', searched between strings and atom header."""
    if end <= start:
        start, end = 3, 1024
    found = data.find(VERSION_ANCHOR, base + start, base + end + len(VERSION_ANCHOR))
    if found < 0:
        return ""
    return _printable(cstring(data, found + 18, VERSION_LIMIT))


def _name(vb: Vbios, data: bytes, base: int) -> str:
    """atom.c: skip the string-count strings and CR LF; the name follows, trailing spaces trimmed."""
    if not vb.string_count:
        return ""
    at = base + vb.strings_offset
    for _ in range(vb.string_count):
        nul = data.find(b"\0", at, at + 1024)
        if nul < 0:
            return ""
        at = nul + 1
    if data[at:at + 2] != b"\r\n":
        vb.notes.append(f"0x{at:x}: {bytes(data[at:at + 2]).hex()} after the strings (expected cr lf)")
    return _printable(cstring(data, at + 2, NAME_LIMIT)).rstrip(" ")


def find_vbios(data: bytes, align: int = SCAN_ALIGN) -> list[Vbios]:
    """Every option-ROM chain at an ``align``-aligned offset whose first image is an ATOM VBIOS
    (``55 AA`` and the ATI magic) or has a valid PCIR; images inside a found chain are skipped."""
    found: list[Vbios] = []
    skip_to = 0
    for off in range(0, max(0, len(data) - 1), align):
        if off < skip_to or data[off] != 0x55 or data[off + 1] != 0xAA:
            continue
        if not is_vbios(data, off):
            ptr = int.from_bytes(data[off + 0x18:off + 0x1A], "little")
            if data[off + ptr:off + ptr + 4] != b"PCIR":
                continue
        vb = parse_vbios(data, off)
        found.append(vb)
        skip_to = max(off + 1, *(im.offset + max(im.length, 1) for im in vb.images))
    return found


def vbios_identities(data: bytes) -> list[VbiosIdentity]:
    """The identity of every ATOM VBIOS in ``data`` (an IFWI usually holds one per A/B partition)."""
    return [vb.identity() for vb in find_vbios(data) if vb.ati_magic and vb.atom is not None]


def vbios_identity(data: bytes) -> VbiosIdentity | None:
    """The first ATOM VBIOS in ``data`` (a 2 MiB flash image or a bare ROM), or None when there is none."""
    ids = vbios_identities(data)
    return ids[0] if ids else None


def identity_differences(a: VbiosIdentity, b: VbiosIdentity) -> list[str]:
    """What makes ``a`` and ``b`` different boards (part number, PCI ids); empty when they match.
    The version and build date are not compared: updating the VBIOS of the same board changes them."""
    out = []
    if a.part_number != b.part_number:
        out.append(f"part number {a.part_number!r} != {b.part_number!r}")
    if (a.vendor_id, a.device_id) != (b.vendor_id, b.device_id):
        def ids(x: VbiosIdentity) -> str:
            return f"{x.vendor_id:04x}:{x.device_id:04x}" if x.vendor_id is not None else "none"

        out.append(f"pci ids {ids(a)} != {ids(b)}")
    return out
