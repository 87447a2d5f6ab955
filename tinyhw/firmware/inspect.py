"""``firmware inspect``: read a file, detect its type, parse it, describe it.

Types (checked in this order, from the first bytes; specs/navi31-spi-flash.md §g.3 step 1 for the
first two): a raw Navi31 IFWI (``AA 55 AA 55``), an NVIDIA VBIOS (a ROM chain with an NVIDIA PCIR or a
BIT table; specs/nv-bringup.md §6), a bare option-ROM / ATOM VBIOS (``55 AA`` with the
ATI magic or a PCIR), an ELF (an NVIDIA GSP-RM firmware when it has a ``.fwimage`` section), an
amdgpu firmware file (a plausible ``common_firmware_header``). Anything else is refused (exit 2).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.fileio import read_input
from tinyhw.firmware import describe
from tinyhw.firmware.tree import Node
from tinyhw.formats.amdfw import looks_like_amdgpu, parse_amdgpu
from tinyhw.formats.elf import ELF_MAGIC, parse_elf
from tinyhw.formats.fwregion import Region
from tinyhw.formats.ifwi_layout import looks_like_ifwi, parse_ifwi
from tinyhw.formats.nvbios import looks_like_nv_vbios, parse_nv_vbios
from tinyhw.formats.nvgsp import is_gsp_elf, parse_gsp
from tinyhw.formats.vbios import ROM_SIGNATURE, is_vbios, parse_vbios

KINDS = ("ifwi", "vbios", "nvidia-vbios", "nvidia-gsp", "elf", "amdgpu")
#: The largest firmware file read: the biggest real ones (NVIDIA GSP-RM ELFs) are tens of MiB.
MAX_FILE = 256 << 20


@dataclass
class Inspection:
    """One inspected file: its name, kind, JSON document (problems included), tree and named regions."""
    name: str
    kind: str
    doc: dict[str, Any]
    tree: Node
    regions: list[Region]

    @property
    def ok(self) -> bool:
        """No problem was found (``firmware inspect`` exits 0 only then, 1 otherwise)."""
        return not self.doc.get("problems")


def read_image(path: str | Path) -> bytes:
    """The file's bytes, or a one-line :class:`Refused` (exit 2) saying why it cannot be read: not a regular
    file (a device node, fifo, directory) or larger than :data:`MAX_FILE`, checked before anything is read."""
    return read_input(path, MAX_FILE, "firmware file")


def detect(data: bytes, name: str | None = None) -> str | None:
    """The firmware type of ``data`` (one of :data:`KINDS`), or None when it is none of them."""
    if looks_like_ifwi(data):
        return "ifwi"
    if looks_like_nv_vbios(data):
        return "nvidia-vbios"
    if data[:2] == ROM_SIGNATURE:
        ptr = int.from_bytes(data[0x18:0x1A], "little")
        if is_vbios(data) or data[ptr:ptr + 4] == b"PCIR":
            return "vbios"
    if data[:4] == ELF_MAGIC:
        return "nvidia-gsp" if is_gsp_elf(parse_elf(data)) else "elf"
    if looks_like_amdgpu(data):
        return "amdgpu"
    return None


def inspect_bytes(data: bytes, name: str = "<bytes>", kind: str | None = None) -> Inspection:
    """Parse ``data`` as ``kind`` (detected when None) and describe it; Refused when the type is unknown."""
    kind = kind or detect(data, name)
    title = Path(name).name
    if kind is None:
        raise Refused(f"{name}: unknown firmware type (starts with {data[:8].hex() or 'nothing: empty file'})",
                      hint="expected an amd ifwi image, an atom vbios, an amdgpu firmware file, an nvidia "
                           "vbios or an nvidia gsp elf")
    if kind == "ifwi":
        lay = parse_ifwi(data)
        doc, tree = describe.ifwi(lay, title)
        regions = lay.regions
    elif kind == "vbios":
        vb = parse_vbios(data)
        doc, tree = describe.vbios(vb, title, len(data))
        regions = vb.regions()
    elif kind == "nvidia-vbios":
        from tinyhw.firmware.describe_nv import nv_vbios

        nv = parse_nv_vbios(data)
        doc, tree = nv_vbios(nv, title)
        regions = nv.regions()
    elif kind == "nvidia-gsp":
        fw = parse_gsp(data, name)
        doc, tree = describe.gsp(fw, title)
        regions = fw.regions()
    elif kind == "elf":
        e = parse_elf(data)
        doc, tree = describe.elf(e, title)
        regions = e.regions()
    elif kind == "amdgpu":
        a = parse_amdgpu(data, name)
        doc, tree = describe.amdgpu(a, title)
        regions = a.regions
    else:
        raise Refused(f"unknown firmware type {kind!r}", hint=f"one of {', '.join(KINDS)}")
    head = {"file": name, "type": kind, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    return Inspection(name, kind, {**head, **doc}, tree, regions)


def inspect_file(path: str | Path) -> Inspection:
    """Inspect the file at ``path`` (read bounded, as ``firmware inspect`` reads it)."""
    return inspect_bytes(read_image(path), str(path))
