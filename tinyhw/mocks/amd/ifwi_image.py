"""The deterministic synthetic 2 MiB Navi31 flash image the emulated board starts from.

Follows specs/navi31-spi-flash.md §g.1 (raw IFWI landmarks, directory header and entry format,
ISH layout), §g.2 (every item 0x01-0x08, 0x80-0x89 resolves inside the image) and §g.3 (an
embedded ATOM VBIOS: option-ROM header, PCIR, " 761295520", ATOM ROM header, strings, date,
checksum). Nothing here is a real AMD image: where the spec gives no fact the content is
invented, says so, and is kept away from anything a real board would be judged by (no real
part number, version or signature). Regions alternate between pseudo-random bytes and 0xFF
(erased) so that diff-only writing and skipping of all-FF pages are meaningful.
"""

from __future__ import annotations

import hashlib
import struct
from functools import lru_cache

from tinyhw.boards.spec import BoardSpec

SIZE = 0x200000

# -- layout (offsets from §g.1; the ones marked invented are this model's choice) ---------------------
HEADER = 0x000000  # item 0x01, 0x54 bytes
HEADER_SIZE = 0x54
SGN_POINTER = 0x001000  # item 0x80
PSP_DIR_1 = 0x002000  # item 0x02
PSP_DIR_2 = 0x003000  # item 0x03
SGN_TABLE = 0x004000  # invented: where the $SGN pointer points (item 0x81)
SGN_BLOBS = 0x005000  # invented: signature blobs of types 1..7 (items 0x82-0x88)
ITEM_04 = 0x010000
ITEM_05 = 0x011000
ISH_A = 0x012000  # item 0x06
ISH_B = 0x013000  # item 0x07
PAYLOAD_A = 0x020000  # invented: payload of ISH A (item 0x08)
PAYLOAD_B = 0x100000  # invented: payload of ISH B (a copy of A)
SLOT_SIZE = 0x040000  # invented slot max size
FIRMWARE_ID = 0x13C  # §g.1: firmware id of the first ISH entry
VBIOS_IN_PAYLOAD = 0x020000  # invented: the VBIOS sits 128 KiB into each payload
VBIOS_A = PAYLOAD_A + VBIOS_IN_PAYLOAD  # 0x040000, 128 KiB aligned (ROM_OFFSET = 2)
VBIOS_B = PAYLOAD_B + VBIOS_IN_PAYLOAD  # 0x120000 (ROM_OFFSET = 9)
VBIOS_SIZE = 0x10000  # 128 x 512 bytes
NVRAM = 0x180000  # invented: a 32 KiB pseudo-random area in the otherwise erased upper half
METADATA = 0x1EF000  # §g.1: firmware-generated metadata
ITEM_89 = 0x1F0000  # 0x100 bytes
SGN_SIZES = (0x100, 0x200, 0x200, 0x180, 0x400, 0x100, 0x300)  # invented sizes of types 1..7
#: Invented signature rule the emulated PSP checks a streamed payload by (nothing like AMD's real RSA scheme):
#: the first 32 bytes of the signature-type-1 blob are the SHA-256 of the ISH A payload (item 0x08: the slot's
#: ``slot max size`` bytes at its payload location).
PAYLOAD_SIGNATURE_TYPE = 1

PART_NUMBER = b"113-TINYHW31-SYNTH"  # invented, deliberately not an AMD part number
VERSION = b"ATOMBIOSBK-AMD VER099.099.099.099.999999"  # invented version string
BUILD_DATE = b"01/02/26 03:04"  # invented, MM/DD/YY HH:MM
VBIOS_NAME = b"TINYHW SYNTHETIC NAVI31 VBIOS"


def prng(tag: str, n: int) -> bytes:
    """Deterministic pseudo-random bytes: SHA-256 of (tag, counter), concatenated."""
    out = bytearray()
    counter = 0
    seed = tag.encode()
    while len(out) < n:
        out += hashlib.sha256(seed + counter.to_bytes(8, "little")).digest()
        counter += 1
    return bytes(out[:n])


def fletcher32(data: bytes) -> int:
    """Fletcher-32 over little-endian 16-bit words (the $PSP directory checksum; inferred, amdfwtool)."""
    c0 = c1 = 0xFFFF
    for (w,) in struct.iter_unpack("<H", data[: len(data) & ~1]):
        c0 = (c0 + w) % 0xFFFF
        c1 = (c1 + c0) % 0xFFFF
    return (c1 << 16) | c0


def _directory(cookie: bytes, entries: list[tuple[int, int, int, int]]) -> bytes:
    """16-byte header (cookie, checksum, count, info) + 16-byte entries of four u32 each (§g.1)."""
    body = struct.pack("<II", len(entries), 0) + b"".join(struct.pack("<4I", *e) for e in entries)
    return cookie + struct.pack("<I", fletcher32(body)) + body


def _ish(payload: int, priority: int) -> bytes:
    fields = struct.pack("<6I", priority, 0, 0, payload, FIRMWARE_ID, SLOT_SIZE) + b"\xff" * 4
    checksum = (-sum(struct.unpack("<7I", fields))) & 0xFFFFFFFF  # invented: dwords sum to 0
    return struct.pack("<I", checksum) + fields


def build_vbios(*, board: BoardSpec) -> bytes:
    """A legacy option-ROM image with ATOM headers per §g.3 (64 KiB, checksum byte last) naming ``board`` (its PCIR
    ids, its chip name)."""
    chip = (board.vbios_name or board.name.upper()).encode()
    name = VBIOS_NAME.replace(b"NAVI31", chip)
    img = bytearray(VBIOS_SIZE)
    img[0:3] = bytes([0x55, 0xAA, VBIOS_SIZE // 512])
    pcir, atom, strings = 0x01C0, 0x0240, 0x0110
    struct.pack_into("<H", img, 0x18, pcir)
    img[0x2F] = 1  # one ATOMBIOS string (the part number)
    img[0x30:0x3A] = b" 761295520"
    struct.pack_into("<H", img, 0x48, atom)
    img[0x50:0x50 + len(BUILD_DATE)] = BUILD_DATE
    struct.pack_into("<H", img, 0x6E, strings)
    img[0x80:0x80 + len(PART_NUMBER)] = PART_NUMBER
    img[0x94:0x94 + 20] = (chip + b" PCI_EXP GDDR6")[:20]
    text = PART_NUMBER + b"\x00\r\n" + name + b"  \x00" + VERSION + b"\x00"
    img[strings:strings + len(text)] = text
    assert strings + len(text) < pcir
    # PCIR: signature, vendor, device, device list, length, revision, class (3 bytes), image length,
    # code revision, code type 0 (x86), indicator bit 7 (last image)
    img[pcir:pcir + 0x18] = (b"PCIR" + struct.pack("<HHHHB", *board.ids, 0, 0x18, 0)
                             + bytes([0x00, 0x00, 0x03]) + struct.pack("<HHBBH", VBIOS_SIZE // 512, 0, 0, 0x80, 0))
    # ATOM ROM header v2.2: size, format/content revision, "ATOM", BIOS segment, offsets (invented)
    cmd_table, data_table = 0x0400, 0x0600
    hdr = bytearray(0x28)
    struct.pack_into("<HBB4sH", hdr, 0, 0x28, 2, 2, b"ATOM", 0xC000)
    struct.pack_into("<H", hdr, 0x1C, pcir)
    struct.pack_into("<HH", hdr, 0x1E, cmd_table, data_table)
    struct.pack_into("<I", hdr, 0x24, 0x2000)  # PSP directory table offset (invented)
    img[atom:atom + len(hdr)] = hdr
    # master command/data tables: common header (size, format/content revision) + invented offsets
    img[cmd_table:cmd_table + 4] = struct.pack("<HBB", 0x200, 2, 1)
    img[data_table:data_table + 4] = struct.pack("<HBB", 0x100, 2, 1)
    img[0x0800:0xC000] = prng("vbios-code", 0xC000 - 0x0800)  # "code"; the tail stays zero
    img[-1] = (-sum(img)) & 0xFF
    return bytes(img)


def payload_digest(image: bytes) -> bytes:
    """SHA-256 of the ISH A payload of ``image`` (item 0x08), the invented signature of :func:`sign`."""
    location, size = struct.unpack_from("<I", image, ISH_A + 0x10)[0], struct.unpack_from("<I", image, ISH_A + 0x18)[0]
    return hashlib.sha256(image[location:location + size]).digest()


def signature_blob(image: bytes, sig_type: int) -> tuple[int, int] | None:
    """(offset, size) of the $SGN entry of ``sig_type`` in ``image`` (the first one), None when there is none."""
    table = struct.unpack_from("<I", image, SGN_POINTER)[0]
    if image[table:table + 4] != b"$SGN":
        return None
    count = struct.unpack_from("<I", image, table + 8)[0]
    for i in range(min(count, 0x100)):
        t, _, size, off = struct.unpack_from("<4I", image, table + 16 + 16 * i)
        if t == sig_type:
            return off, size
    return None


def sign(image: bytes) -> bytes:
    """``image`` with its payload signature (:data:`PAYLOAD_SIGNATURE_TYPE`) recomputed: what the vendor's signing
    would do to a changed payload, in this model's invented scheme."""
    out = bytearray(image)
    blob = signature_blob(image, PAYLOAD_SIGNATURE_TYPE)
    if blob is not None:
        out[blob[0]:blob[0] + 32] = payload_digest(image)
    return bytes(out)


def with_slot_size(image: bytes, slot: int) -> bytes:
    """``image`` with both ISH slot sizes set to ``slot`` (checksums fixed) and re-signed: a smaller item 0x08,
    so that a test streams a whole IFWI in a fraction of the time."""
    out = bytearray(image)
    for ish in (ISH_A, ISH_B):
        struct.pack_into("<I", out, ish + 0x18, slot)
        struct.pack_into("<I", out, ish, (-sum(struct.unpack_from("<7I", out, ish + 4))) & 0xFFFFFFFF)
    return sign(bytes(out))


@lru_cache(maxsize=8)
def build_image(*, board: BoardSpec) -> bytes:
    """The synthetic 2 MiB raw IFWI image of ``board`` (deterministic; see the module docstring)."""
    img = bytearray(b"\xff" * SIZE)

    header = bytearray(HEADER_SIZE)
    header[0:4] = bytes([0xAA, 0x55, 0xAA, 0x55])
    # invented fields in the style of AMD's embedded firmware structure
    struct.pack_into("<4I", header, 0x10, 0, PSP_DIR_1, PSP_DIR_2, SGN_TABLE)
    header[0x30:HEADER_SIZE] = prng("ifwi-header", HEADER_SIZE - 0x30)
    img[HEADER:HEADER + HEADER_SIZE] = header

    struct.pack_into("<I", img, SGN_POINTER, SGN_TABLE)
    entries, off = [], SGN_BLOBS
    for sig_type, size in enumerate(SGN_SIZES, start=1):
        entries.append((sig_type, 1, size, off))  # (type, unknown, size, offset)
        img[off:off + size] = prng(f"sgn-{sig_type}", size)
        off += size
    table = _directory(b"$SGN", entries)
    img[SGN_TABLE:SGN_TABLE + len(table)] = table

    # $PSP directories (entries invented: type, size, location, reserved)
    for base, payload, tag in ((PSP_DIR_1, PAYLOAD_A, "a"), (PSP_DIR_2, PAYLOAD_B, "b")):
        d = _directory(b"$PSP", [(0x00, 0x400, ITEM_04, 0), (0x01, 0x20, ISH_A, 0), (0x08, 0x20000, payload, 0),
                                 (0x62, 0x10000, payload + VBIOS_IN_PAYLOAD, 0)])
        img[base:base + len(d)] = d
        img[base + 0x200:base + 0x300] = prng(f"psp-dir-extra-{tag}", 0x100)

    img[ITEM_04:ITEM_04 + 0x1000] = prng("item-04", 0x1000)
    img[ITEM_05:ITEM_05 + 0x800] = prng("item-05", 0x800)  # upper half of item 5 stays erased
    img[ISH_A:ISH_A + 0x20] = _ish(PAYLOAD_A, 1)
    img[ISH_B:ISH_B + 0x20] = _ish(PAYLOAD_B, 0)

    payload = bytearray(b"\xff" * SLOT_SIZE)
    payload[0:0x18000] = prng("payload-firmware", 0x18000)
    payload[VBIOS_IN_PAYLOAD:VBIOS_IN_PAYLOAD + VBIOS_SIZE] = build_vbios(board=board)
    payload[0x38000:0x3A000] = prng("payload-tail", 0x2000)
    img[PAYLOAD_A:PAYLOAD_A + SLOT_SIZE] = payload
    img[PAYLOAD_B:PAYLOAD_B + SLOT_SIZE] = payload

    img[NVRAM:NVRAM + 0x8000] = prng("nvram", 0x8000)
    img[METADATA:METADATA + 0x100] = b"$MET" + prng("metadata", 0xFC)  # invented tag
    img[ITEM_89:ITEM_89 + 0x100] = prng("item-89", 0x100)
    assert len(img) == SIZE
    return sign(bytes(img))
