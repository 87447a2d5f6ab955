"""Invented NVIDIA boot firmware for the emulated AD102: a booter, a GSP bootloader and a small GSP-RM ELF.

Built from the layouts of specs/nv-bringup.md §9.3: ``nvfw_bin_hdr`` (magic 0x10DE, version 1, size rounded
to 256, header and data offsets), the booter's ``nvfw_hs_header_v2`` at 24 (signatures at 60, the patch
location, patch signature index, fuse version, engine id, ucode id and signature count as six u32 after the
signatures, whose *offsets* the header holds), its load header (OS code and data, one application), the
bootloader's 84-byte ``RM_RISCV_UCODE_DESC``, and a GSP-RM ELF with ``.fwimage``, ``.fwversion`` and
``.fwsignature_ad10x`` / ``.fwsignature_ga10x`` sections.

INVENTED CONTENT: every code, data and signature byte is a SHA-256 stream seeded with its name, and the
version is 535.261.03 only so the set matches Debian's GSP-RM release name. Debian's firmware-nvidia-gsp
ships no booter or bootloader (535 compiles them into the kernel module), so these files are what the
emulated board's booter expects: its signature check (``BOOTER_SIGNATURE``) passes only for the production
signature patched in at ``BOOTER_PATCH_LOC`` of the DMEM image, at PKC offset 0x10. The GSP-RM image starts with
``GSPRM_MARKER`` + version, which the emulated GSP reports as its version.

Written from the spec, independently of the loader it exercises.
"""

from __future__ import annotations

import struct
from functools import cache

from tinyhw.mocks.nvidia.nv_vbios import invented_stream

VERSION = "535.261.03"
SIG_SIZE, NUM_SIG = 384, 2
CODE_SIZE, DATA_SIZE = 0x1000, 0x400
APP_OFFSET = 0x100  # the application's code inside the image (256-byte aligned)
DATA_OFFSET = 0x1100  # the booter's DMEM image inside the image
BOOTER_PKC = 0x10  # the booter's PKC offset inside DMEM (§9.3: tinygrad hard-codes 0x10)
BOOTER_PATCH_LOC = DATA_OFFSET + BOOTER_PKC
PATCH_SIG_INDEX = 1  # which of the file's signatures is the production one (patch_sig value / SIG_SIZE)
GSPRM_MARKER = b"TINYHW-GSPRM "
GSP_IMAGE_SIZE = 0x23000  # 140 KiB: 35 pages, a two-level radix table is not needed (one page per level)


def _bin_header(total: int, header_offset: int, data_offset: int, data_size: int) -> bytes:
    return struct.pack("<6I", 0x10DE, 1, (total + 255) & ~255, header_offset, data_offset, data_size)


#: the signature the emulated booter's boot ROM accepts (the production one of the invented file)
BOOTER_SIGNATURE = invented_stream(f"booter signature {PATCH_SIG_INDEX}", SIG_SIZE)


@cache
def booter_load() -> bytes:
    """``booter_load-535.261.03.bin`` (invented content, real layout)."""
    sigs = b"".join(invented_stream(f"booter signature {i}", SIG_SIZE) for i in range(NUM_SIG))
    meta_at = 60 + len(sigs)  # patch_loc, patch_sig, fuse_ver, engine_id, ucode_id, num_sigs
    load_at = meta_at + 24
    data_offset = load_at + 36  # = 120 + signatures
    image_size = DATA_OFFSET + DATA_SIZE
    image = bytearray(invented_stream("booter image", image_size))
    image[BOOTER_PATCH_LOC:BOOTER_PATCH_LOC + SIG_SIZE] = bytes(SIG_SIZE)  # the loader patches the signature in
    total = data_offset + image_size
    out = bytearray(_bin_header(total, 24, data_offset, image_size))
    out += struct.pack("<9I", 60, len(sigs), meta_at, meta_at + 4, meta_at + 8, 12, meta_at + 20, load_at, 36)
    out += sigs
    out += struct.pack("<6I", BOOTER_PATCH_LOC, PATCH_SIG_INDEX * SIG_SIZE, 1, 1, 3, NUM_SIG)
    out += struct.pack("<9I", 0, APP_OFFSET, DATA_OFFSET, DATA_SIZE, 1, APP_OFFSET, CODE_SIZE, DATA_OFFSET, DATA_SIZE)
    assert len(out) == data_offset
    out += image
    return bytes(out + bytes(-len(out) % 256))


BOOTLOADER_IMAGE = 0x2000
MONITOR_CODE, MONITOR_DATA, MANIFEST = 0x0, 0x1000, 0x1800


@cache
def bootloader() -> bytes:
    """``bootloader-535.261.03.bin``: bin header, RM_RISCV_UCODE_DESC, image (invented content)."""
    desc = [0] * 21
    desc[0] = 2
    desc[1], desc[2] = 0, BOOTLOADER_IMAGE
    desc[8], desc[9] = MANIFEST, 0x400
    desc[10], desc[11], desc[12], desc[13] = MONITOR_DATA, 0x800, MONITOR_CODE, 0x1000
    desc[14] = 1
    body = struct.pack("<21I", *desc) + invented_stream("gsp bootloader", BOOTLOADER_IMAGE)
    out = _bin_header(24 + len(body), 24, 24 + 84, BOOTLOADER_IMAGE) + body
    return out + bytes(-len(out) % 256)


def _elf(sections: list[tuple[str, bytes]]) -> bytes:
    """A little ELF64 (REL, machine RISC-V) holding ``sections`` as PROGBITS, then .shstrtab and the headers."""
    body = bytearray(64)
    offsets = []
    for _, data in sections:
        body += bytes(-len(body) % 16)
        offsets.append(len(body))
        body += data
    names = b"\0" + b"".join(n.encode() + b"\0" for n, _ in sections) + b".shstrtab\0"
    str_off = len(body)
    body += names + bytes(-(len(body) + len(names)) % 8)
    shoff = len(body)
    ident = b"\x7fELF\x02\x01\x01" + bytes(9)
    body[0:64] = ident + struct.pack("<HHIQQQIHHHHHH", 1, 0xF3, 1, 0, 0, shoff, 0, 64, 0, 0, 64,
                                     len(sections) + 2, len(sections) + 1)
    shdrs = [bytes(64)]
    pos = 1
    for (name, data), off in zip(sections, offsets, strict=True):
        shdrs.append(struct.pack("<IIQQQQIIQQ", pos, 1, 0, 0, off, len(data), 0, 0, 16, 0))
        pos += len(name) + 1
    shdrs.append(struct.pack("<IIQQQQIIQQ", pos, 3, 0, 0, str_off, len(names), 0, 0, 1, 0))
    return bytes(body) + b"".join(shdrs)


@cache
def gsp_rm(version: str = VERSION) -> bytes:
    """A GSP-RM file in ``gsp_ga10x.bin``'s form: ``.fwimage`` starting with the marker and version, the version
    string, and a 4 KiB signature per family (invented content)."""
    image = bytearray(invented_stream("gsp-rm image", GSP_IMAGE_SIZE))
    head = GSPRM_MARKER + version.encode() + b"\0"
    image[:len(head)] = head
    return _elf([(".fwimage", bytes(image)), (".fwversion", version.encode() + b"\0"),
                 (".fwsignature_ad10x", invented_stream("gsp-rm signature ad10x", 0x1000)),
                 (".fwsignature_ga10x", invented_stream("gsp-rm signature ga10x", 0x1000))])


def write_set(directory: str, version: str = VERSION) -> dict[str, str]:
    """Write the invented set in the layout ``nv boot`` reads (``<dir>/<ver>/gsp_ga10x.bin``,
    ``<dir>/ad102/gsp/{booter_load,bootloader}-<ver>.bin``); returns role -> path."""
    from pathlib import Path

    root = Path(directory)
    gsp = root / "ad102" / "gsp"
    paths = {"gsp-rm": root / version / "gsp_ga10x.bin", "booter": gsp / f"booter_load-{version}.bin",
             "bootloader": gsp / f"bootloader-{version}.bin"}
    data = {"gsp-rm": gsp_rm(version), "booter": booter_load(), "bootloader": bootloader()}
    for role, p in paths.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data[role])
    return {k: str(v) for k, v in paths.items()}
