"""NVIDIA VBIOS images: the PCI expansion-ROM chain, PCIR/NPDE, the BIT table, the falcon ucode table and
the FWSEC descriptors with their signatures (pure; bytes in, a description out).

Spec: specs/nv-bringup.md §6.2 (image signatures 0xAA55 / 0x4E56 "VN" / 0xBB77, PCI-data pointer at +0x18,
PCIR/NPDS/RGIS signatures, image length in 512-byte blocks at +0x10, code type at +0x14, last-image flag
at +0x15, code types 0x00 base and 0xE0 EXT, ``expansion_rom_off`` = EXT image start - last base image
length), §6.3 (BIT header ``FF B8 'BIT' 00``, 6-byte tokens, token 0x70 FALCON_DATA v2 holding the falcon
ucode table pointer), §6.4 (falcon ucode table header/entries, application ids, ``vDesc`` bits,
FALCON_UCODE_DESC_V3, signatures after the 44-byte descriptor, ucode after the whole descriptor, rounded
up to 256 bytes). The NPDE structure (NVIDIA's PCI data extension: "NPDE" at the PCIR end rounded up to
16 bytes, image length in 512-byte blocks at +0x08, last-image bit 7 of +0x0A, overriding the PCIR's for
images other than code type 0x70) is taken from the facts of Linux nouveau ``nvkm/subdev/bios/npde.c``
and ``image.c``.

Where tinygrad assumes (BIT at 0x1B0, descriptor version 3, no signature/last-flag checks; §6.2, §17 q3),
this parser checks: it scans for the BIT header, validates the ROM signature and the last-image flag, bounds
every loop and every pointer, and decodes a descriptor only when its version bits say 3. Parsers never raise:
problems are listed as ``"0xOFF: what"`` and what could be read is returned.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinyhw.formats.fwregion import Reader, Region

__all__ = ["FALCON_APPS", "BitTable", "BitToken", "FalconDesc", "FalconEntry", "FalconTable", "NvImage",
           "NvVbios", "find_bit", "looks_like_nv_vbios", "parse_nv_vbios"]

ROM_SIGNATURES = {0xAA55: "55aa", 0x4E56: "VN", 0xBB77: "77bb"}
PCI_DATA_SIGNATURES = {b"PCIR": "PCIR", b"NPDS": "NPDS", b"RGIS": "RGIS"}
NPDE_SIGNATURE = b"NPDE"
BIT_PATTERN = b"\xff\xb8BIT\x00"
CODE_TYPES = {0x00: "base", 0x01: "open firmware", 0x03: "efi", 0x70: "falcon", 0xE0: "ext"}
BIT_FALCON_DATA = 0x70
FALCON_APPS = {0x05: "FIRMWARE_SEC_LIC", 0x45: "FWSEC_DBG", 0x85: "FWSEC_PROD"}
DESC_V3_SIZE = 44
MAX_IMAGES = 16
SCAN_ALIGN = 512
NVIDIA_VENDOR = 0x10DE


@dataclass(frozen=True)
class NvImage:
    """One image of the expansion-ROM chain (offsets absolute in the data)."""

    offset: int
    signature: int
    pcir_offset: int
    pcir_signature: str
    vendor_id: int
    device_id: int
    pcir_length: int
    class_code: int
    pcir_image_length: int  # bytes
    code_revision: int
    code_type: int
    pcir_last: bool
    npde_offset: int | None
    npde_image_length: int | None  # bytes
    npde_last: bool | None
    size: int  # what the walk advanced by (NPDE's length where present)
    last: bool

    @property
    def code_name(self) -> str:
        return CODE_TYPES.get(self.code_type, f"type 0x{self.code_type:02x}")

    def to_doc(self) -> dict[str, Any]:
        return {"offset": self.offset, "size": self.size, "signature": ROM_SIGNATURES.get(self.signature, "?"),
                "pcir": {"offset": self.pcir_offset, "signature": self.pcir_signature, "vendor_id": self.vendor_id,
                         "device_id": self.device_id, "length": self.pcir_length, "class_code": self.class_code,
                         "image_length": self.pcir_image_length, "code_revision": self.code_revision,
                         "code_type": self.code_type, "last": self.pcir_last},
                "npde": None if self.npde_offset is None else {
                    "offset": self.npde_offset, "image_length": self.npde_image_length, "last": self.npde_last},
                "code_type": self.code_type, "code_name": self.code_name, "last": self.last}


@dataclass(frozen=True)
class BitToken:
    id: int
    data_version: int
    data_size: int
    data_ptr: int  # relative to the chain start

    @property
    def letter(self) -> str:
        return chr(self.id) if 0x20 < self.id < 0x7F else "?"

    def to_doc(self) -> dict[str, Any]:
        return {"id": self.id, "letter": self.letter, "data_version": self.data_version, "data_size": self.data_size,
                "data_ptr": self.data_ptr}


@dataclass(frozen=True)
class BitTable:
    offset: int
    bcd_version: int
    header_size: int
    token_size: int
    token_entries: int
    header_checksum: int
    tokens: tuple[BitToken, ...]

    def to_doc(self) -> dict[str, Any]:
        return {"offset": self.offset, "bcd_version": self.bcd_version, "header_size": self.header_size,
                "token_size": self.token_size, "token_entries": self.token_entries,
                "header_checksum": self.header_checksum, "tokens": [t.to_doc() for t in self.tokens]}


@dataclass(frozen=True)
class FalconEntry:
    application_id: int
    target_id: int
    desc_ptr: int  # relative to expansion_rom_off

    @property
    def application(self) -> str:
        return FALCON_APPS.get(self.application_id, f"app 0x{self.application_id:02x}")


@dataclass(frozen=True)
class FalconTable:
    offset: int
    version: int
    header_size: int
    entry_size: int
    entry_count: int
    desc_version: int
    desc_size: int
    entries: tuple[FalconEntry, ...]

    def to_doc(self) -> dict[str, Any]:
        return {"offset": self.offset, "version": self.version, "header_size": self.header_size,
                "entry_size": self.entry_size, "entry_count": self.entry_count, "desc_version": self.desc_version,
                "desc_size": self.desc_size,
                "entries": [{"application_id": e.application_id, "application": e.application,
                             "target_id": e.target_id, "desc_ptr": e.desc_ptr} for e in self.entries]}


@dataclass(frozen=True)
class FalconDesc:
    """A falcon ucode descriptor (``vDesc`` decoded; the V3 fields when its version is 3)."""

    index: int  # entry index in the falcon table
    application: str
    offset: int
    vdesc: int
    fields: dict[str, int] = field(default_factory=dict)  # FALCON_UCODE_DESC_V3, when decoded
    signatures: tuple[tuple[int, int], ...] = ()  # (offset, size) of each signature
    ucode: tuple[int, int] | None = None  # (offset, size)

    @property
    def available(self) -> bool:
        return bool(self.vdesc & 1)

    @property
    def encrypted(self) -> bool:
        return bool(self.vdesc & 4)

    @property
    def version(self) -> int:
        return (self.vdesc >> 8) & 0xFF

    @property
    def size(self) -> int:
        return self.vdesc >> 16

    def to_doc(self) -> dict[str, Any]:
        return {"index": self.index, "application": self.application, "offset": self.offset, "vdesc": self.vdesc,
                "version": self.version, "available": self.available, "encrypted": self.encrypted,
                "size": self.size, "v3": dict(self.fields) or None,
                "signatures": [{"offset": o, "size": s} for o, s in self.signatures],
                "ucode": None if self.ucode is None else {"offset": self.ucode[0], "size": self.ucode[1]}}


@dataclass
class NvVbios:
    size: int
    chain_start: int = 0
    images: list[NvImage] = field(default_factory=list)
    expansion_rom_off: int | None = None
    bit: BitTable | None = None
    falcon_table: FalconTable | None = None
    descriptors: list[FalconDesc] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def fwsec(self, application: str = "FWSEC_PROD") -> FalconDesc | None:
        return next((d for d in self.descriptors if d.application == application), None)

    def regions(self) -> list[Region]:
        out = [Region(f"image[{i}] {im.code_name}", im.offset, min(im.size, self.size - im.offset))
               for i, im in enumerate(self.images)]
        if self.bit is not None:
            b = self.bit
            out.append(Region("bit", b.offset, b.header_size + b.token_size * len(b.tokens)))
        if self.falcon_table is not None:
            t = self.falcon_table
            out.append(Region("falcon ucode table", t.offset, t.header_size + t.entry_size * len(t.entries)))
        for d in self.descriptors:
            name = f"falcon[{d.index}] {d.application}"
            out.append(Region(f"{name} descriptor", d.offset, min(d.size, DESC_V3_SIZE) if d.fields else 4))
            for k, (o, s) in enumerate(d.signatures):
                out.append(Region(f"{name} signature[{k}]", o, s))
            if d.ucode is not None:
                out.append(Region(f"{name} ucode", *d.ucode))
        return out


def find_bit(data: bytes, start: int = 0) -> int | None:
    """Offset of the BIT header (``FF B8 'BIT' 00``), or None."""
    at = data.find(BIT_PATTERN, start)
    return None if at < 0 else at


def _pcir_vendor(data: bytes, off: int) -> int | None:
    if off + 0x1A > len(data) or int.from_bytes(data[off:off + 2], "little") not in ROM_SIGNATURES:
        return None
    p = off + int.from_bytes(data[off + 0x18:off + 0x1A], "little")
    if data[p:p + 4] not in PCI_DATA_SIGNATURES or p + 8 > len(data):
        return None
    return int.from_bytes(data[p + 4:p + 6], "little")


def looks_like_nv_vbios(data: bytes) -> bool:
    """A ROM signature at 0 and an NVIDIA PCI data structure, or a BIT header in the first 64 KiB."""
    if int.from_bytes(data[:2], "little") not in ROM_SIGNATURES:
        return False
    return _pcir_vendor(data, 0) == NVIDIA_VENDOR or BIT_PATTERN in data[:0x10000]


def _chain_start(data: bytes, v: NvVbios) -> int | None:
    if _pcir_vendor(data, 0) is not None:
        return 0
    for off in range(SCAN_ALIGN, len(data) - 0x1A, SCAN_ALIGN):
        if _pcir_vendor(data, off) is not None:
            v.notes.append(f"0x0: no rom image here; the image chain starts at 0x{off:x} (found by a 512-byte scan)")
            return off
    v.problems.append("0x0: no rom image signature (55aa, VN, 77bb) with a pci data structure was found")
    return None


def _walk(data: bytes, r: Reader, v: NvVbios, start: int) -> None:
    off, last_base_size = start, None
    for _ in range(MAX_IMAGES):
        sig = r.u16(off, "rom image signature")
        if sig is None:
            return
        if sig not in ROM_SIGNATURES:
            v.problems.append(f"0x{off:x}: rom image signature 0x{sig:04x} (expected 0xaa55, 0x4e56 or 0xbb77)")
            return
        ptr = r.u16(off + 0x18, "pci data pointer")
        pcir = off + (ptr or 0)
        raw = r.unpack("4sHHHHB3sHHBB", pcir, "pci data structure")
        if ptr is None or raw is None:
            return
        psig, vid, did, _dl, plen, _prev, cls, ilen, crev, ctype, ind = raw
        if psig not in PCI_DATA_SIGNATURES:
            v.problems.append(f"0x{pcir:x}: pci data signature {psig!r} (expected PCIR, NPDS or RGIS)")
            return
        size, last = ilen * 512, bool(ind & 0x80)
        npde_off = npde_len = npde_last = None
        if ctype != 0x70:
            n = (pcir + plen + 0x0F) & ~0x0F
            if data[n:n + 4] == NPDE_SIGNATURE and n + 0x0B <= len(data):
                npde_off = n
                npde_len = int.from_bytes(data[n + 8:n + 10], "little") * 512
                npde_last = bool(data[n + 0x0A] & 0x80)
                if npde_len != size:
                    v.notes.append(f"0x{n:x}: NPDE image length 0x{npde_len:x} differs from the PCIR's 0x{size:x}; "
                                   "the walk follows the NPDE (tinygrad follows the PCIR)")
                size, last = npde_len, npde_last
        else:
            last = True
        img = NvImage(off, sig, pcir, PCI_DATA_SIGNATURES[psig], vid, did, plen, int.from_bytes(cls, "little"),
                      ilen * 512, crev, ctype, bool(ind & 0x80), npde_off, npde_len, npde_last, size, last)
        v.images.append(img)
        if ctype == 0x00:
            last_base_size = size
        elif ctype == 0xE0 and v.expansion_rom_off is None:
            if last_base_size is None:
                v.problems.append(f"0x{off:x}: ext image without a base image before it")
            else:
                v.expansion_rom_off = off - last_base_size
        if size == 0:
            v.problems.append(f"0x{off:x}: image length 0; the chain cannot continue")
            return
        if off + size > len(data):
            v.problems.append(f"0x{off:x}: image of 0x{size:x} bytes extends beyond the data (ends 0x{len(data):x})")
            return
        if last:
            return
        off += size
    v.problems.append(f"more than {MAX_IMAGES} images without a last-image flag; the walk stopped")


def _bit(data: bytes, r: Reader, v: NvVbios) -> None:
    at = find_bit(data, v.chain_start)
    if at is None:
        v.problems.append("no BIT header (ff b8 'BIT' 00) found")
        return
    if at - v.chain_start != 0x1B0:
        v.notes.append(f"0x{at:x}: BIT header not at the 0x1b0 tinygrad assumes")
    h = r.unpack("HIHBBBB", at, "BIT header")
    if h is None:
        return
    _id, _sig, bcd, hsize, tsize, count, chk = h
    tokens = []
    if tsize < 6:
        v.problems.append(f"0x{at:x}: BIT token size {tsize} (expected at least 6)")
    else:
        for i in range(count):
            t = at + hsize + i * tsize
            raw = r.unpack("BBHI" if tsize >= 8 else "BBHH", t, f"BIT token {i}")
            if raw is None:
                break
            tokens.append(BitToken(*raw))
    v.bit = BitTable(at, bcd, hsize, tsize, count, chk, tuple(tokens))


def _falcon(data: bytes, r: Reader, v: NvVbios) -> None:
    tok = next((t for t in (v.bit.tokens if v.bit else ()) if t.id == BIT_FALCON_DATA), None)
    if tok is None:
        v.notes.append("no BIT falcon-data token (0x70): no falcon ucode table")
        return
    if tok.data_version != 2 or tok.data_size < 4:
        v.problems.append(f"BIT token 0x70: version {tok.data_version} size {tok.data_size} (expected v2, >= 4)")
        return
    table_ptr = r.u32(v.chain_start + tok.data_ptr, "falcon ucode table pointer")
    if table_ptr is None:
        return
    if v.expansion_rom_off is None:
        v.problems.append("no ext (0xe0) image: falcon table pointers (relative to it) cannot be resolved")
        return
    base = v.expansion_rom_off
    off = base + table_ptr
    h = r.unpack("BBBBBB", off, "falcon ucode table header")
    if h is None:
        return
    ver, hsize, esize, count, dver, dsize = h
    entries = []
    if esize < 6:
        v.problems.append(f"0x{off:x}: falcon table entry size {esize} (expected at least 6)")
    else:
        for i in range(count):
            e = r.unpack("BBI", off + hsize + i * esize, f"falcon table entry {i}")
            if e is None:
                break
            entries.append(FalconEntry(*e))
    v.falcon_table = FalconTable(off, ver, hsize, esize, count, dver, dsize, tuple(entries))
    for i, e in enumerate(entries):
        _desc(data, r, v, i, e, base + e.desc_ptr)


def _desc(data: bytes, r: Reader, v: NvVbios, index: int, e: FalconEntry, off: int) -> None:
    vdesc = r.u32(off, f"{e.application} descriptor header")
    if vdesc is None:
        return
    d = FalconDesc(index, e.application, off, vdesc)
    if d.version != 3:
        v.notes.append(f"0x{off:x}: {e.application} descriptor version {d.version} is not decoded (only 3)")
        v.descriptors.append(d)
        return
    if d.size < DESC_V3_SIZE:
        v.problems.append(f"0x{off:x}: {e.application} descriptor size {d.size} (a v3 descriptor is 44 bytes)")
        v.descriptors.append(d)
        return
    raw = r.unpack("9IHBBHH", off, f"{e.application} v3 descriptor")
    if raw is None:
        v.descriptors.append(d)
        return
    names = ("hdr", "stored_size", "pkc_data_offset", "interface_offset", "imem_phys_base", "imem_load_size",
             "imem_virt_base", "dmem_phys_base", "dmem_load_size", "engine_id_mask", "ucode_id",
             "signature_count", "signature_versions", "reserved")
    fields = dict(zip(names, raw, strict=True))
    sig_area, count = d.size - DESC_V3_SIZE, fields["signature_count"]
    sigs: list[tuple[int, int]] = []
    if count:
        if sig_area % count:
            v.problems.append(f"0x{off:x}: {sig_area} signature bytes do not divide into {count} signatures")
        else:
            each = sig_area // count
            sigs = [(off + DESC_V3_SIZE + k * each, each) for k in range(count)]
    elif sig_area:
        v.problems.append(f"0x{off:x}: {sig_area} signature bytes but a signature count of 0")
    if off + d.size > len(data):
        v.problems.append(f"0x{off:x}: {e.application} descriptor of {d.size} bytes extends beyond the data")
    ucode = (off + d.size, (fields["stored_size"] + 255) & ~255)
    if ucode[0] + ucode[1] > len(data):
        v.problems.append(f"0x{ucode[0]:x}: {e.application} ucode of 0x{ucode[1]:x} bytes extends beyond the data")
    v.descriptors.append(FalconDesc(index, e.application, off, vdesc, fields, tuple(sigs), ucode))


def parse_nv_vbios(data: bytes) -> NvVbios:
    """Parse an NVIDIA VBIOS (a PROM dump or a ROM file); never raises on malformed input."""
    data = bytes(data)
    v = NvVbios(len(data))
    r = Reader(data, v.problems)
    start = _chain_start(data, v)
    if start is None:
        return v
    v.chain_start = start
    _walk(data, r, v, start)
    _bit(data, r, v)
    _falcon(data, r, v)
    return v
