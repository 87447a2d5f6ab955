"""Turn a parsed firmware image into ``firmware inspect``'s JSON document and its human tree.

One function per type; each returns ``(doc, tree)``. The doc's keys are stable (numbers are JSON
integers); the tree is only for people. Checksums are shown OK/BAD where the format has a known rule
(option-ROM sum; the inferred Fletcher-32 of IFWI directories is labelled as inferred), and the amdgpu
``crc32`` as "matches payload" / "not verifiable" (specs/data-sources.md: the kernel never checks it).
"""

from __future__ import annotations

from typing import Any

from tinyhw.firmware.tree import Node, hexv, span
from tinyhw.formats.amdfw import AmdFirmware
from tinyhw.formats.elf import ElfFile
from tinyhw.formats.ifwi_layout import IfwiLayout
from tinyhw.formats.nvgsp import GspFirmware
from tinyhw.formats.vbios import CODE_TYPES, Vbios

Described = tuple[dict[str, Any], Node]


def _ok(flag: bool | None) -> str:
    return "n/a" if flag is None else ("OK" if flag else "BAD")


def _tail(doc: dict[str, Any], root: Node, regions: list, notes: list[str], problems: list[str]) -> None:
    doc["regions"] = [r.to_doc() for r in regions]
    doc["notes"] = list(notes)
    doc["problems"] = list(problems)
    if notes:
        n = root.add(f"notes ({len(notes)})")
        for x in notes:
            n.add(x)
    p = root.add(f"problems ({len(problems)})" if problems else "problems: none")
    for x in problems:
        p.add(x)


# -- amdgpu ------------------------------------------------------------------------------------------


def amdgpu(fw: AmdFirmware, title: str) -> Described:
    """The JSON document and the tree of an amdgpu firmware file."""
    ch = fw.common
    doc: dict[str, Any] = {"family": fw.family, "common_header": ch.to_doc() if ch else None,
                           "header": {"struct": fw.header_struct, **fw.header},
                           "components": [c.to_doc() for c in fw.components],
                           "crc32": {"value": ch.crc32 if ch else None, "status": fw.crc32_status},
                           "ip_version": {"header": [ch.ip_version_major, ch.ip_version_minor] if ch else None,
                                          "file_name": list(fw.ip_version_from_name) if fw.ip_version_from_name
                                          else None}}
    root = Node(f"amdgpu firmware {title} ({fw.size} bytes): family {fw.family or 'unknown'}, "
                f"{fw.header_struct or 'header not decoded'}")
    if ch:
        c = root.add(f"common_firmware_header {span(0, 32)}: header v{ch.header_version_major}."
                     f"{ch.header_version_minor}, ip {ch.ip_version_major}.{ch.ip_version_minor}, "
                     f"ucode_version 0x{ch.ucode_version:x}")
        for k, v in ch.to_doc().items():
            c.add(f"crc32 0x{v:08x}: {fw.crc32_status}" if k == "crc32" else f"{k} {hexv(v)}")
    if fw.header:
        h = root.add(f"{fw.header_struct or 'extra header bytes'}")
        for k, v in fw.header.items():
            _field(h, k, v)
    if fw.components:
        cs = root.add(f"components ({len(fw.components)})")
        for comp in fw.components:
            t = f" type 0x{comp.fw_type:x}" if comp.fw_type is not None else ""
            cs.add(f"{comp.name}{t} version 0x{comp.fw_version:x} {span(comp.offset, comp.size)}")
    _regions(root, fw.regions)
    _tail(doc, root, fw.regions, fw.notes, fw.problems)
    return doc, root


def _field(parent: Node, k: str, v: Any) -> None:
    if isinstance(v, dict):
        n = parent.add(k)
        for k2, v2 in v.items():
            _field(n, k2, v2)
    elif isinstance(v, list):
        n = parent.add(f"{k} ({len(v)})")
        for item in v:
            n.add(", ".join(f"{a} {hexv(b)}" for a, b in item.items()) if isinstance(item, dict)
                  else " ".join(hexv(x) for x in item))
    else:
        parent.add(f"{k} {hexv(v)}")


def _regions(root: Node, regions: list) -> None:
    n = root.add(f"regions ({len(regions)})")
    for r in regions:
        n.add(f"{r.name} {span(r.offset, r.size)}")


# -- ATOM VBIOS --------------------------------------------------------------------------------------


def vbios_doc(vb: Vbios) -> dict[str, Any]:
    """The JSON document of an ATOM VBIOS."""
    a = vb.atom
    return {
        "offset": vb.offset, "ati_magic": vb.ati_magic, "part_number": vb.part_number, "version": vb.version,
        "name": vb.name, "build_date": vb.build_date, "asic_info": vb.asic_info, "string_count": vb.string_count,
        "strings_offset": vb.strings_offset, "checksum_ok": vb.checksum_ok,
        "images": [{"offset": im.offset, "length": im.length, "checksum_ok": im.checksum_ok,
                    "pcir": None if im.pcir is None else {
                        "offset": im.pcir.offset, "vendor_id": im.pcir.vendor_id, "device_id": im.pcir.device_id,
                        "class_code": im.pcir.class_code, "image_length": im.pcir.image_length,
                        "code_type": im.pcir.code_type, "last": im.pcir.last}} for im in vb.images],
        "atom_rom_header": None if a is None else {k: getattr(a, k) for k in a.__dataclass_fields__},
        "identity": vb.identity().to_doc() if vb.atom else None,
    }


def vbios_tree(parent: Node, vb: Vbios) -> None:
    """Add the tree of an ATOM VBIOS under ``parent``."""
    n = parent.add(f"atom vbios {span(vb.offset, vb.images[0].length if vb.images else 0)}: "
                   f"part {vb.part_number or '?'}, version {vb.version or '?'}, checksum {_ok(vb.checksum_ok)}")
    if vb.name:
        n.add(f"name {vb.name!r}")
    if vb.build_date:
        n.add(f"build date {vb.build_date}")
    if vb.asic_info:
        n.add(f"asic info {vb.asic_info!r}")
    for i, im in enumerate(vb.images):
        kind = CODE_TYPES.get(im.pcir.code_type, f"0x{im.pcir.code_type:x}") if im.pcir else "no pcir"
        m = n.add(f"image {i} {span(im.offset, im.length)} ({kind}), checksum {_ok(im.checksum_ok)}")
        if im.pcir:
            p = im.pcir
            m.add(f"pcir @0x{p.offset:x}: {p.vendor_id:04x}:{p.device_id:04x} class {p.class_code:06x}, "
                  f"image length 0x{p.image_length:x}{', last image' if p.last else ''}")
    if vb.atom:
        a = vb.atom
        m = n.add(f"atom rom header {span(a.offset, a.structure_size)}: {a.signature} v{a.format_revision}."
                  f"{a.content_revision}")
        m.add(f"subsystem {a.subsystem_vendor_id:04x}:{a.subsystem_id:04x}, master command table "
              f"0x{a.master_command_table:x}, master data table 0x{a.master_data_table:x}")
        if a.psp_dir_table_offset is not None:
            m.add(f"psp directory table offset 0x{a.psp_dir_table_offset:x}")


def vbios(vb: Vbios, title: str, size: int) -> Described:
    """The JSON document and the tree of a VBIOS file."""
    doc = vbios_doc(vb)
    root = Node(f"vbios {title} ({size} bytes)")
    vbios_tree(root, vb)
    regions = vb.regions()
    _regions(root, regions)
    _tail(doc, root, regions, vb.notes, vb.problems)
    return doc, root


# -- Navi31 IFWI -------------------------------------------------------------------------------------


def _dir_doc(d: Any) -> dict[str, Any]:
    return {"offset": d.offset, "cookie": d.cookie, "checksum": d.checksum, "checksum_ok": d.checksum_ok,
            "count": d.count, "info": d.info, "size": d.size,
            "entries": [{"index": e.index, "type": e.type, "subprogram": e.subprogram, "size": e.size,
                         "location": e.location, "in_image": e.in_image} for e in d.entries]}


def _ifwi_board(lay: IfwiLayout) -> str:
    """The name of the board whose description has the PCI ids of the image's first ATOM VBIOS, else ``amd``."""
    from tinyhw.boards import by_pci

    for vb in lay.vbios:
        if vb.atom is not None:
            ident = vb.identity()
            board = by_pci(ident.vendor_id or 0, ident.device_id or 0)
            return board.name if board is not None else "amd"
    return "amd"


def ifwi(lay: IfwiLayout, title: str) -> Described:
    """The JSON document and the tree of an AMD IFWI image (its embedded VBIOS included), titled by the board its
    VBIOS names."""
    doc: dict[str, Any] = {
        "magic_ok": lay.magic_ok, "psp_directories": [_dir_doc(d) for d in lay.psp_directories],
        "sgn_pointer": lay.sgn_pointer, "sgn_table": _dir_doc(lay.sgn) if lay.sgn else None,
        "ish": [{k: getattr(i, k) for k in i.__dataclass_fields__} for i in lay.ish],
        "items": [{"item": it.item, "name": it.name, "offset": it.offset, "size": it.size, "error": it.error}
                  for it in lay.items],
        "vbios": [vbios_doc(v) for v in lay.vbios],
    }
    root = Node(f"{_ifwi_board(lay)} ifwi {title} ({lay.size} bytes): magic {'OK' if lay.magic_ok else 'BAD'}")
    for d in lay.psp_directories + ([lay.sgn] if lay.sgn else []):
        n = root.add(f"{d.cookie} directory {span(d.offset, d.size)}: {d.count} entries, checksum 0x{d.checksum:08x} "
                     f"(fletcher-32, rule inferred: {_ok(d.checksum_ok)})")
        for e in d.entries:
            where = "" if e.in_image else " (outside the image)"
            if d.cookie == "$SGN":
                n.add(f"entry {e.index}: signature type {e.type} {span(e.location, e.size)}{where}")
            else:
                n.add(f"entry {e.index}: type 0x{e.type:02x} sub {e.subprogram} {span(e.location, e.size)}{where}")
    for i, ish in zip("AB", lay.ish, strict=False):
        n = root.add(f"ISH {i} @0x{ish.offset:x}: payload {span(ish.payload_location, ish.slot_max_size)}, "
                     f"firmware id 0x{ish.firmware_id:x}, boot priority {ish.boot_priority}")
        n.add(f"checksum 0x{ish.checksum:08x}, update retry {ish.update_retry_count}, glitch retry {ish.glitch_retry}")
    items = root.add("items (psp item table)")
    for it in lay.items:
        where = span(it.offset, it.size) if it.offset is not None and it.size is not None else "-"
        items.add(f"0x{it.item:02x} {it.name} {where}" + (f": {it.error}" if it.error else ""))
    for vb in lay.vbios:
        vbios_tree(root, vb)
    _regions(root, lay.regions)
    _tail(doc, root, lay.regions, lay.notes, lay.problems)
    return doc, root


# -- ELF / NVIDIA GSP --------------------------------------------------------------------------------


def _elf_doc(elf: ElfFile) -> dict[str, Any]:
    return {"class": elf.elf_class, "big_endian": elf.big_endian, "file_type": elf.file_type_name,
            "machine": elf.machine_name, "entry": elf.entry,
            "sections": [{"index": s.index, "name": s.name, "type": s.type_name, "flags": s.flags, "addr": s.addr,
                          "offset": s.offset, "size": s.size} for s in elf.sections],
            "segments": len(elf.segments)}


def _elf_tree(parent: Node, elf: ElfFile) -> None:
    n = parent.add(f"elf{elf.elf_class} {'big' if elf.big_endian else 'little'}-endian {elf.file_type_name}, "
                   f"machine {elf.machine_name}, {len(elf.sections)} sections, {len(elf.segments)} program headers")
    for s in elf.sections:
        if s.index:
            n.add(f"[{s.index}] {s.name or '(no name)'} {s.type_name} {span(s.offset, s.size)}")


def elf(e: ElfFile, title: str) -> Described:
    """The JSON document and the tree of a plain ELF file."""
    doc = _elf_doc(e)
    root = Node(f"elf file {title} ({e.size} bytes)")
    _elf_tree(root, e)
    regions = e.regions()
    _tail(doc, root, regions, [], e.problems)
    return doc, root


def gsp(fw: GspFirmware, title: str) -> Described:
    """The JSON document and the tree of an NVIDIA GSP-RM firmware file."""
    img = fw.image
    doc: dict[str, Any] = {
        "version": fw.version, "elf": _elf_doc(fw.elf),
        "image": img.to_doc() if img else None,
        "image_is_elf": fw.image_elf is not None,
        "signatures": {k: r.to_doc() for k, r in fw.signatures.items()},
        "serves": list(fw.serves),
        "loader": {"radix3_pages": fw.radix3, "size_of_radix3_elf": img.size if img else None,
                   "signature_buffer": 0x1000},
    }
    root = Node(f"nvidia gsp-rm firmware {title} ({fw.elf.size} bytes): version {fw.version or '?'}")
    if img:
        n = root.add(f".fwimage {span(img.offset, img.size)}: mapped through a radix-3 table of "
                     f"{fw.radix3['total'] - fw.radix3['image']} table page(s) + {fw.radix3['image']} image pages")
        n.add(f"wpr meta sizeOfRadix3Elf = 0x{img.size:x}")
        if fw.image_elf is not None:
            ie = fw.image_elf
            n.add(f"the image is itself an elf{ie.elf_class} {ie.file_type_name} for {ie.machine_name}, entry "
                  f"0x{ie.entry:x}, {len(ie.segments)} program headers")
    s = root.add(f"signatures ({len(fw.signatures)}), each copied into a 4 KiB buffer")
    for fam, r in fw.signatures.items():
        s.add(f"{fam} {span(r.offset, r.size)}")
    if fw.serves:
        root.add("serves " + " ".join(fw.serves))
    _elf_tree(root, fw.elf)
    regions = fw.regions()
    _tail(doc, root, regions, fw.notes, fw.problems)
    return doc, root
