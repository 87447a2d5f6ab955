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

From NVIDIA's BIT documentation (open-gpu-doc "BIOS Information Table"): a ROM file may hold data for the
hardware before the PCI expansion ROM (an nvflash dump starts with an ``NVGI`` header and the chain at
0x9400): the chain is found on 512-byte boundaries by a ROM signature whose PCI data pointer leads to
"PCIR"; token pointers beyond the PC-compatible image are offsets into the data after the UEFI image; the
BIT header's bytes sum to 0 mod 256 (envytools' ``nvbios`` rejects a BIT that does not); BIOSDATA ('B',
v1/v2: BIOS version u32 @0, OEM version u8 @4) and the string pointers ('S', v1: sign-on, OEM string,
vendor, product, revision; v2 adds version and copyright after the sign-on: each a u16 pointer and a u8
maximum length). The 'i' token (envytools' "info", v2) repeats the version at the same place. The version
prints as the u32's bytes from the top, then the OEM byte, in hex: ``95.02.18.80.87``. PC-compatible
(x86) image: byte 2 = initialisation size in 512-byte blocks, and those bytes sum to 0 mod 256 (envytools
checks this too). UEFI image (EFI_PCI_EXPANSION_ROM_HEADER of the UEFI specification): initialisation size
u16 @2 (512-byte blocks), EfiSignature u32 @4 = 0x0EF1, subsystem u16 @8, machine type u16 @0xA,
compression type u16 @0xC, EFI image header offset u16 @0x16. Falcon table entries whose descriptor
pointer is 0 are unused slots (real RTX 4090 ROMs have 8): skipped. The FWSEC ucode's
application-interface table and DMEMMAPPER are decoded per §7.2 (:func:`fwsec_frts_image` patches them).

Where tinygrad assumes (BIT at 0x1B0, descriptor version 3, no signature/last-flag checks; §6.2, §17 q3),
this parser checks: it scans for the BIT header, validates the ROM signature and the last-image flag, bounds
every loop and every pointer, and decodes a descriptor only when its version bits say 3. Parsers never raise:
problems are listed as ``"0xOFF: what"`` and what could be read is returned.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

from tinyhw.formats.fwregion import Reader, Region, cstring

__all__ = ["FALCON_APPS", "BitTable", "BitToken", "FalconDesc", "FalconEntry", "FalconTable", "NvImage",
           "NvVbios", "bit_checksum", "find_bit", "find_chain", "frts_command", "fwsec_frts_image",
           "looks_like_nv_vbios", "parse_nv_vbios"]

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
CHAIN_SCAN_LIMIT = 4 << 20  # how far into a file the 512-byte scan for the chain looks
NVIDIA_VENDOR = 0x10DE
BIT_BIOSDATA, BIT_STRINGS, BIT_INFO = 0x42, 0x53, 0x69  # 'B', 'S', 'i'
#: 'S' token fields, each a (u16 pointer, u8 maximum length) pair, by data version.
STRING_FIELDS = {1: ("sign_on", "oem", "oem_vendor", "oem_product", "oem_revision"),
                 2: ("sign_on", "version", "copyright", "oem", "oem_vendor", "oem_product", "oem_revision")}
EFI_SIGNATURE = 0x0EF1
DMEMMAPPER_ID = 4  # §7.2: application-interface entry id of the DMEM mapper
DMAP_SIGNATURE = b"DMAP"
DMAP_SIZE = 64
FRTS_COMMAND = 0x15  # §7.1
#: §7.1's FRTS command: ``FWSECLIC_READ_VBIOS_DESC`` (24 bytes: version u32 @0, size u32 @4, gfwImageOffset u64 @8,
#: gfwImageSize u32 @16, flags u32 @20) then ``FWSECLIC_FRTS_REGION_DESC`` (20 bytes: version, size,
#: frtsRegionOffset4K, frtsRegionSize, frtsRegionMediaType, u32 each). Layout of NVIDIA's open-gpu-kernel-modules
#: (src/nvidia/src/kernel/gpu/gsp/arch/turing/kernel_gsp_frts_tu102.c, the typedefs of both descriptors and
#: FWSECLIC_READ_VBIOS_STRUCT_FLAGS = 2, FWSECLIC_FRTS_REGION_MEDIA_FB = 2, ..._SIZE_1MB_IN_4K = 0x100).
READ_VBIOS_DESC = struct.Struct("<IIQII")
FRTS_REGION_DESC = struct.Struct("<5I")
READ_VBIOS_FLAGS, FRTS_MEDIA_FB, FRTS_SIZE_1MB_IN_4K = 2, 2, 0x100
PKC_SIGNATURE_SIZE = 384  # §7.2 step 5: the RSA-3K signature copied into the image


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
    init_size: int | None = None  # bytes: x86 byte 2 or the EFI header's u16 @2, in 512-byte blocks
    checksum: int | None = None  # x86: sum of the init_size bytes mod 256 (0 when valid)
    efi: dict[str, int] | None = None  # EFI_PCI_EXPANSION_ROM_HEADER fields of a code type 0x03 image

    @property
    def code_name(self) -> str:
        """The image's code type name (x86, EFI, ...), or its number in hex."""
        return CODE_TYPES.get(self.code_type, f"type 0x{self.code_type:02x}")

    def to_doc(self) -> dict[str, Any]:
        """The image as a JSON-ready dict: offset, size, signature and its PCIR/NPDE fields."""
        return {"offset": self.offset, "size": self.size, "signature": ROM_SIGNATURES.get(self.signature, "?"),
                "pcir": {"offset": self.pcir_offset, "signature": self.pcir_signature, "vendor_id": self.vendor_id,
                         "device_id": self.device_id, "length": self.pcir_length, "class_code": self.class_code,
                         "image_length": self.pcir_image_length, "code_revision": self.code_revision,
                         "code_type": self.code_type, "last": self.pcir_last},
                "npde": None if self.npde_offset is None else {
                    "offset": self.npde_offset, "image_length": self.npde_image_length, "last": self.npde_last},
                "code_type": self.code_type, "code_name": self.code_name, "last": self.last,
                "init_size": self.init_size, "checksum": self.checksum, "efi": self.efi}


@dataclass(frozen=True)
class BitToken:
    """One BIT table token: id, data version, data size and pointer (relative to the chain start)."""
    id: int
    data_version: int
    data_size: int
    data_ptr: int  # relative to the chain start

    @property
    def letter(self) -> str:
        """The token id as a letter (``B``, ``i``, ``S``, ...), or ``?`` when not printable."""
        return chr(self.id) if 0x20 < self.id < 0x7F else "?"

    def to_doc(self) -> dict[str, Any]:
        """The token as a JSON-ready dict."""
        return {"id": self.id, "letter": self.letter, "data_version": self.data_version, "data_size": self.data_size,
                "data_ptr": self.data_ptr}


@dataclass(frozen=True)
class BitTable:
    """The BIT table: offset, version, header and token sizes, checksum and its tokens."""
    offset: int
    bcd_version: int
    header_size: int
    token_size: int
    token_entries: int
    header_checksum: int
    tokens: tuple[BitToken, ...]

    def to_doc(self) -> dict[str, Any]:
        """The BIT table as a JSON-ready dict, tokens included."""
        return {"offset": self.offset, "bcd_version": self.bcd_version, "header_size": self.header_size,
                "token_size": self.token_size, "token_entries": self.token_entries,
                "header_checksum": self.header_checksum, "tokens": [t.to_doc() for t in self.tokens]}


@dataclass(frozen=True)
class FalconEntry:
    """One falcon ucode table entry: application id, target id, descriptor pointer."""
    application_id: int
    target_id: int
    desc_ptr: int  # relative to expansion_rom_off

    @property
    def application(self) -> str:
        """The application's name (``FWSEC_PROD``, ...), or its id in hex."""
        return FALCON_APPS.get(self.application_id, f"app 0x{self.application_id:02x}")


@dataclass(frozen=True)
class FalconTable:
    """The falcon ucode table: offset, version, header/entry sizes, descriptor version/size, entries."""
    offset: int
    version: int
    header_size: int
    entry_size: int
    entry_count: int
    desc_version: int
    desc_size: int
    entries: tuple[FalconEntry, ...]

    def to_doc(self) -> dict[str, Any]:
        """The falcon ucode table as a JSON-ready dict, entries included."""
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
    interface: dict[str, Any] | None = None  # §7.2 application-interface table (+ DMEMMAPPER), when found

    @property
    def available(self) -> bool:
        """True when the descriptor's ``vdesc`` marks it available (bit 0)."""
        return bool(self.vdesc & 1)

    @property
    def encrypted(self) -> bool:
        """True when the descriptor's ``vdesc`` marks the ucode encrypted (bit 2)."""
        return bool(self.vdesc & 4)

    @property
    def version(self) -> int:
        """The descriptor version (``vdesc`` bits 15:8)."""
        return (self.vdesc >> 8) & 0xFF

    @property
    def size(self) -> int:
        """The descriptor size in bytes (``vdesc`` bits 31:16)."""
        return self.vdesc >> 16

    def to_doc(self) -> dict[str, Any]:
        """The descriptor as a JSON-ready dict: header, V3 fields, signatures and ucode regions."""
        return {"index": self.index, "application": self.application, "offset": self.offset, "vdesc": self.vdesc,
                "version": self.version, "available": self.available, "encrypted": self.encrypted,
                "size": self.size, "v3": dict(self.fields) or None,
                "signatures": [{"offset": o, "size": s} for o, s in self.signatures],
                "ucode": None if self.ucode is None else {"offset": self.ucode[0], "size": self.ucode[1]},
                "interface": self.interface}


@dataclass
class NvVbios:
    """A parsed NVIDIA VBIOS: image chain, BIT table, falcon table, descriptors and problems."""
    size: int
    chain_start: int = 0
    images: list[NvImage] = field(default_factory=list)
    expansion_rom_off: int | None = None
    bit: BitTable | None = None
    falcon_table: FalconTable | None = None
    descriptors: list[FalconDesc] = field(default_factory=list)
    bios_version: str | None = None  # "95.02.18.80.87", from BIOSDATA ('B') or else the 'i' token
    strings: dict[str, str] = field(default_factory=dict)  # the 'S' token's strings by field name
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def fwsec(self, application: str = "FWSEC_PROD") -> FalconDesc | None:
        """The falcon descriptor of ``application`` (FWSEC_PROD by default), or None."""
        return next((d for d in self.descriptors if d.application == application), None)

    def regions(self) -> list[Region]:
        """Named byte ranges of the VBIOS (images, BIT, falcon table, descriptors) for ``firmware diff``."""
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


def bit_checksum(data: bytes, at: int, header_size: int) -> int:
    """Sum of the BIT header's ``header_size`` bytes mod 256 (0 for a valid header)."""
    return sum(data[at:at + header_size]) & 0xFF


def _pcir_vendor(data: bytes, off: int) -> int | None:
    if off + 0x1A > len(data) or int.from_bytes(data[off:off + 2], "little") not in ROM_SIGNATURES:
        return None
    p = off + int.from_bytes(data[off + 0x18:off + 0x1A], "little")
    if data[p:p + 4] not in PCI_DATA_SIGNATURES or p + 8 > len(data):
        return None
    return int.from_bytes(data[p + 4:p + 6], "little")


def find_chain(data: bytes, vendor: int | None = None) -> int | None:
    """Offset of the PCI expansion ROM: 0, or the first 512-byte boundary (within :data:`CHAIN_SCAN_LIMIT`)
    holding a ROM signature whose PCI data pointer leads to a PCI data structure (of ``vendor``, when given).
    NVIDIA's BIT documentation: a ROM file may hold data for the hardware before it (nvflash: ``NVGI``)."""
    for off in range(0, min(len(data), CHAIN_SCAN_LIMIT) - 0x1A + 1, SCAN_ALIGN):
        found = _pcir_vendor(data, off)
        if found is not None and (vendor is None or found == vendor):
            return off
    return None


def looks_like_nv_vbios(data: bytes) -> bool:
    """An NVIDIA PCI expansion ROM at 0 or on a 512-byte boundary (an nvflash dump's chain at 0x9400), or a ROM
    signature at 0 with a BIT header in the first 64 KiB. Never an ELF file."""
    if data[:4] == b"\x7fELF":
        return False
    if int.from_bytes(data[:2], "little") in ROM_SIGNATURES and BIT_PATTERN in data[:0x10000]:
        return True
    return find_chain(data, NVIDIA_VENDOR) is not None


def _chain_start(data: bytes, v: NvVbios) -> int | None:
    off = find_chain(data)
    if off is None:
        v.problems.append("0x0: no rom image signature (55aa, VN, 77bb) with a pci data structure was found "
                          f"on a 512-byte boundary in the first 0x{CHAIN_SCAN_LIMIT:x} bytes")
    elif off:
        what = "an NVGI (nvflash) header" if data[:4] == b"NVGI" else f"0x{off:x} bytes of other data"
        v.notes.append(f"0x0: {what} precedes the rom; the image chain starts at 0x{off:x} "
                       "(found on a 512-byte boundary)")
    return off


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
        init, chk, efi = _image_header(data, r, v, off, ctype, size)
        img = NvImage(off, sig, pcir, PCI_DATA_SIGNATURES[psig], vid, did, plen, int.from_bytes(cls, "little"),
                      ilen * 512, crev, ctype, bool(ind & 0x80), npde_off, npde_len, npde_last, size, last,
                      init, chk, efi)
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


def _image_header(data: bytes, r: Reader, v: NvVbios, off: int, ctype: int,
                  size: int) -> tuple[int | None, int | None, dict[str, int] | None]:
    """The x86 image's init size and checksum, or the EFI image's header (see the module docstring)."""
    if ctype == 0x00:
        blocks = r.u8(off + 2, "x86 image init size")
        if blocks is None:
            return None, None, None
        init = blocks * 512
        if not init or init > size:
            v.problems.append(f"0x{off + 2:x}: x86 image init size 0x{init:x} (byte 2, in 512-byte blocks) is 0 "
                              f"or beyond the image's 0x{size:x} bytes")
            return init, None, None
        chk = sum(data[off:off + init]) & 0xFF
        if chk:
            v.problems.append(f"0x{off:x}: x86 image checksum: its 0x{init:x} init bytes sum to 0x{chk:02x} mod 256 "
                              "(expected 0)")
        return init, chk, None
    if ctype == 0x03:
        raw = r.unpack("HHIHHH8sH", off, "efi rom header")
        if raw is None:
            return None, None, None
        _sig, blocks, efisig, subsystem, machine, compression, _res, image_off = raw
        efi = {"efi_signature": efisig, "subsystem": subsystem, "machine_type": machine,
               "compression_type": compression, "image_header_offset": image_off}
        if efisig != EFI_SIGNATURE:
            v.problems.append(f"0x{off + 4:x}: efi image signature 0x{efisig:x} (expected 0x0ef1)")
        if not blocks or blocks * 512 > size:
            v.problems.append(f"0x{off + 2:x}: efi image init size 0x{blocks * 512:x} is 0 or beyond the image's "
                              f"0x{size:x} bytes")
        return blocks * 512, None, efi
    return None, None, None


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
    total = bit_checksum(data, at, hsize)
    if hsize < 12:
        v.problems.append(f"0x{at:x}: BIT header size {hsize} (expected at least 12)")
    elif total:
        v.problems.append(f"0x{at:x}: BIT header checksum: its {hsize} bytes sum to 0x{total:02x} mod 256 "
                          f"(expected 0; the checksum byte holds 0x{chk:02x})")
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


def token_data(v: NvVbios, ptr: int) -> int:
    """Absolute offset of a BIT token's data pointer: relative to the chain start, except that a pointer beyond
    the PC-compatible image points into the data after the UEFI image (NVIDIA's BIT documentation), which is
    where ``expansion_rom_off`` puts it."""
    base = next((im for im in v.images if im.code_type == 0x00), None)
    if base is not None and ptr >= base.size and v.expansion_rom_off is not None:
        return v.expansion_rom_off + ptr
    return v.chain_start + ptr


def _version(raw: bytes) -> str:
    return ".".join(f"{b:02x}" for b in (raw[3], raw[2], raw[1], raw[0], raw[4]))


def _tokens(data: bytes, r: Reader, v: NvVbios) -> None:
    """BIOSDATA ('B') and 'i' (the BIOS version), and the string pointers ('S')."""
    by_id = {t.id: t for t in (v.bit.tokens if v.bit else ())}
    versions = {}
    for tid, name in ((BIT_BIOSDATA, "BIOSDATA 'B'"), (BIT_INFO, "info 'i'")):
        t = by_id.get(tid)
        if t is None:
            continue
        at = token_data(v, t.data_ptr)
        if t.data_size < 5 or at + 5 > len(data):
            v.problems.append(f"0x{at:x}: BIT {name} data of {t.data_size} bytes (needs 5 for the version)")
            continue
        versions[name] = _version(data[at:at + 5])
    if versions:
        v.bios_version = versions.get("BIOSDATA 'B'") or versions["info 'i'"]
        if len(set(versions.values())) > 1:
            v.notes.append("BIOS versions differ: " + ", ".join(f"{k} {x}" for k, x in versions.items()))
    t = by_id.get(BIT_STRINGS)
    if t is None:
        return
    at = token_data(v, t.data_ptr)
    fields = STRING_FIELDS.get(t.data_version)
    if fields is None or t.data_size < 3 * len(fields):
        v.notes.append(f"0x{at:x}: BIT strings 'S' v{t.data_version} of {t.data_size} bytes is not decoded "
                       "(v1: 15 bytes, v2: 21 bytes of pointer/length pairs)")
        return
    for i, name in enumerate(fields):
        raw = r.unpack("HB", at + 3 * i, f"BIT string pointer {name}")
        if raw is None:
            return
        ptr, limit = raw
        if not ptr:
            continue
        where = token_data(v, ptr)
        if where + limit > len(data):
            v.problems.append(f"0x{where:x}: BIT string {name} of up to {limit} bytes extends beyond the data")
            continue
        v.strings[name] = cstring(data, where, limit).decode("latin-1").strip()


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
    entries: list[FalconEntry] = []
    if esize < 6:
        v.problems.append(f"0x{off:x}: falcon table entry size {esize} (expected at least 6)")
    else:
        for i in range(count):
            raw = r.unpack("BBI", off + hsize + i * esize, f"falcon table entry {i}")
            if raw is None:
                break
            entries.append(FalconEntry(*raw))
    v.falcon_table = FalconTable(off, ver, hsize, esize, count, dver, dsize, tuple(entries))
    unused = [i for i, e in enumerate(entries) if e.desc_ptr == 0]
    if unused:
        v.notes.append(f"0x{off:x}: {len(unused)} falcon table entr{'y' if len(unused) == 1 else 'ies'} with "
                       f"descriptor pointer 0 (unused slots, no descriptor): {', '.join(map(str, unused))}")
    for i, e in enumerate(entries):
        if e.desc_ptr:
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
    iface = _interface(data, v, e.application, fields, ucode) if ucode[0] + ucode[1] <= len(data) else None
    v.descriptors.append(FalconDesc(index, e.application, off, vdesc, fields, tuple(sigs), ucode, iface))


def _interface(data: bytes, v: NvVbios, app: str, f: dict[str, int], ucode: tuple[int, int]) -> dict | None:
    """§7.2: the application-interface table at IMEMLoadSize + InterfaceOffset of the ucode image and, from its
    DMEMMAPPER entry (id 4), the DMEM mapper ("DMAP") at IMEMLoadSize + dmemOffset. Missing in a FWSEC
    ucode: a problem (the FRTS patch cannot be made); in another application: a note."""
    u0, usize = ucode
    img = data[u0:u0 + usize]
    complain = v.problems.append if app.startswith("FWSEC") else v.notes.append
    at = f["imem_load_size"] + f["interface_offset"]
    if at + 4 > len(img):
        complain(f"0x{u0 + at:x}: {app} application-interface table lies beyond its 0x{usize:x}-byte ucode")
        return None
    ver, hsize, esize, count = img[at:at + 4]
    entries = []
    for i in range(count):
        e = at + hsize + i * esize
        if esize < 8 or e + 8 > len(img):
            complain(f"0x{u0 + e:x}: {app} application-interface entry {i} lies beyond the ucode")
            break
        entries.append(struct.unpack_from("<II", img, e))
    doc: dict[str, Any] = {"offset": u0 + at, "version": ver, "header_size": hsize, "entry_size": esize,
                           "entries": [{"id": i, "dmem_offset": o} for i, o in entries], "dmem_mapper": None}
    dm = next((o for i, o in entries if i == DMEMMAPPER_ID), None)
    if dm is None:
        complain(f"0x{u0 + at:x}: {app} application-interface table has no DMEMMAPPER (id 4) entry")
        return doc
    m = f["imem_load_size"] + dm
    if m + DMAP_SIZE > len(img) or img[m:m + 4] != DMAP_SIGNATURE:
        complain(f"0x{u0 + m:x}: {app} DMEMMAPPER is not a 64-byte 'DMAP' structure inside the ucode "
                 f"(starts {img[m:m + 4].hex() or 'beyond it'})")
        return doc
    names = ("version", "size", "cmd_in_buffer_offset", "cmd_in_buffer_size", "cmd_out_buffer_offset",
             "cmd_out_buffer_size", "nvf_img_data_buffer_offset", "nvf_img_data_buffer_size", "printf_buffer_hdr",
             "ucode_build_time_stamp", "ucode_signature", "init_cmd", "ucode_feature", "ucode_cmd_mask0",
             "ucode_cmd_mask1", "multi_tgt_tbl")
    doc["dmem_mapper"] = {"offset": u0 + m, **dict(zip(names, struct.unpack_from("<HH14I", img, m + 4),
                                                        strict=True))}
    return doc


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
    _tokens(data, r, v)
    _falcon(data, r, v)
    return v


def frts_command(frts_offset: int) -> bytes:
    """The 44-byte FRTS command of §7.1 for an FRTS region at ``frts_offset`` (bytes, 4 KiB aligned): READ_VBIOS
    v1 (gfw image offset and size 0, flags 2) then the FRTS region v1 (1 MiB in FB)."""
    return (READ_VBIOS_DESC.pack(1, READ_VBIOS_DESC.size, 0, 0, READ_VBIOS_FLAGS)
            + FRTS_REGION_DESC.pack(1, FRTS_REGION_DESC.size, frts_offset >> 12, FRTS_SIZE_1MB_IN_4K, FRTS_MEDIA_FB))


def fwsec_frts_image(data: bytes, v: NvVbios, frts_offset: int, application: str = "FWSEC_PROD") -> bytes:
    """The FWSEC ucode image patched to carve FRTS at ``frts_offset`` (§7.1-§7.2): the DMEM mapper's init_cmd
    set to 0x15, the FRTS command (READ_VBIOS descriptor then FRTS region descriptor) copied to its
    cmd_in buffer, and the last 384 bytes of the descriptor's signatures copied to PKCDataOffset (all at
    IMEMLoadSize + offset in the image). ValueError when the ROM lacks what the patch needs."""
    d = v.fwsec(application)
    if d is None or not d.fields or d.ucode is None:
        raise ValueError(f"no decoded v3 {application} descriptor")
    mapper = (d.interface or {}).get("dmem_mapper")
    if mapper is None:
        raise ValueError(f"{application} has no DMEMMAPPER ('DMAP') in its application-interface table")
    if not d.signatures or frts_offset % 4096:
        raise ValueError("no signature to copy" if not d.signatures else "the frts offset is not 4 KiB aligned")
    f, (u0, usize) = d.fields, d.ucode
    img = bytearray(data[u0:u0 + usize])
    dmem = f["imem_load_size"]
    cmd = frts_command(frts_offset)
    cmd_at = dmem + mapper["cmd_in_buffer_offset"]
    if len(cmd) > mapper["cmd_in_buffer_size"] or cmd_at + len(cmd) > len(img):
        raise ValueError(f"the {len(cmd)}-byte frts command does not fit the cmd_in buffer")
    img[cmd_at:cmd_at + len(cmd)] = cmd
    struct.pack_into("<I", img, mapper["offset"] - u0 + 44, FRTS_COMMAND)
    sig_end = d.signatures[-1][0] + d.signatures[-1][1]
    pkc = dmem + f["pkc_data_offset"]
    if pkc + PKC_SIGNATURE_SIZE > len(img):
        raise ValueError("PKCDataOffset + 384 lies beyond the ucode image")
    img[pkc:pkc + PKC_SIGNATURE_SIZE] = data[sig_end - PKC_SIGNATURE_SIZE:sig_end]
    return bytes(img)
