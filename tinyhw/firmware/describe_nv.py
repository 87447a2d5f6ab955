"""``firmware inspect``'s document and tree for an NVIDIA VBIOS (specs/nv-bringup.md §6; parsed by
:mod:`tinyhw.formats.nvbios`): the image chain with PCIR/NPDE, the BIT table and its tokens, the falcon
ucode table and each descriptor with its signatures and ucode."""

from __future__ import annotations

from typing import Any

from tinyhw.firmware.tree import Node, span
from tinyhw.formats.nvbios import NvVbios

#: BIT token ids as letters, with the names envytools' BIT documentation gives them (only 0x70 is in the spec).
TOKEN_NAMES = {0x32: "I2C ports", 0x41: "analog", 0x42: "BIOSDATA", 0x43: "clock", 0x44: "DFP", 0x49: "init",
               0x69: "info",
               0x4C: "LVDS", 0x4D: "memory", 0x4E: "nop", 0x50: "performance", 0x53: "string", 0x54: "TMDS",
               0x55: "display", 0x56: "virtual", 0x63: "32-bit pointers", 0x64: "displayport", 0x70: "falcon data",
               0x75: "UEFI", 0x78: "MXM"}


def nv_vbios(v: NvVbios, title: str) -> tuple[dict[str, Any], Node]:
    """The JSON document and the tree of an NVIDIA VBIOS."""
    doc: dict[str, Any] = {
        "chain_start": v.chain_start,
        "bios_version": v.bios_version,
        "strings": dict(v.strings),
        "images": [im.to_doc() for im in v.images],
        "expansion_rom_off": v.expansion_rom_off,
        "bit": v.bit.to_doc() if v.bit else None,
        "falcon_ucode_table": v.falcon_table.to_doc() if v.falcon_table else None,
        "falcon_descriptors": [d.to_doc() for d in v.descriptors],
    }
    ids = f"{v.images[0].vendor_id:04x}:{v.images[0].device_id:04x}" if v.images else "no pcir"
    root = Node(f"nvidia vbios {title} ({v.size} bytes): pci {ids}, {len(v.images)} image(s), "
                f"version {v.bios_version or '?'}")
    imgs = root.add(f"images ({len(v.images)})" + (f", chain at 0x{v.chain_start:x}" if v.chain_start else ""))
    for i, im in enumerate(v.images):
        n = imgs.add(f"[{i}] {im.code_name} (code type 0x{im.code_type:02x}) {span(im.offset, im.size)}"
                     f"{' last' if im.last else ''}")
        n.add(f"{im.pcir_signature} {span(im.pcir_offset, im.pcir_length)}: {im.vendor_id:04x}:{im.device_id:04x} "
              f"class {im.class_code:06x}, length 0x{im.pcir_image_length:x}, last {im.pcir_last}")
        if im.npde_offset is not None:
            n.add(f"NPDE @0x{im.npde_offset:x}: length 0x{im.npde_image_length:x}, last {im.npde_last}")
        if im.checksum is not None:
            n.add(f"x86 init size 0x{im.init_size:x}, checksum {'ok' if im.checksum == 0 else hex(im.checksum)}")
        if im.efi is not None:
            efi = im.efi
            n.add(f"efi signature 0x{efi['efi_signature']:x}, init size 0x{im.init_size:x}, subsystem "
                  f"0x{efi['subsystem']:x}, machine 0x{efi['machine_type']:x}, compression {efi['compression_type']}")
    root.add("expansion_rom_off " + (f"0x{v.expansion_rom_off:x}" if v.expansion_rom_off is not None
                                     else "none (no ext image)"))
    if v.bit:
        b = v.bit
        bn = root.add(f"BIT @0x{b.offset:x}: version {b.bcd_version >> 8:x}.{b.bcd_version & 0xFF:02x}, "
                      f"{b.token_entries} tokens of {b.token_size} bytes")
        for t in b.tokens:
            bn.add(f"'{t.letter}' 0x{t.id:02x} {TOKEN_NAMES.get(t.id, '')} v{t.data_version} "
                   f"{span(t.data_ptr, t.data_size)}".replace("  ", " "))
        if v.strings:
            sn = root.add(f"strings ({len(v.strings)})")
            for k, text in v.strings.items():
                sn.add(f"{k}: {text}")
    if v.falcon_table:
        ft = v.falcon_table
        tn = root.add(f"falcon ucode table @0x{ft.offset:x}: v{ft.version}, {ft.entry_count} entries, "
                      f"descriptor v{ft.desc_version}")
        for e in ft.entries:
            tn.add(f"{e.application} (0x{e.application_id:02x}) target 0x{e.target_id:02x} desc_ptr 0x{e.desc_ptr:x}")
    for d in v.descriptors:
        dn = root.add(f"falcon[{d.index}] {d.application} descriptor @0x{d.offset:x}: v{d.version}, "
                      f"{d.size} bytes{', encrypted' if d.encrypted else ''}")
        if d.fields:
            df = d.fields
            dn.add(f"stored_size 0x{df['stored_size']:x} imem 0x{df['imem_load_size']:x} "
                   f"dmem 0x{df['dmem_load_size']:x} ucode_id 0x{df['ucode_id']:x} "
                   f"engine_id_mask 0x{df['engine_id_mask']:x}")
            sig = dn.add(f"signatures ({len(d.signatures)}, versions 0x{df['signature_versions']:x})")
            for idx, (o, size) in enumerate(d.signatures):
                sig.add(f"[{idx}] {span(o, size)}")
        if d.ucode:
            dn.add(f"ucode {span(*d.ucode)}")
        if d.interface:
            iface = d.interface
            an = dn.add(f"application interface @0x{iface['offset']:x}: v{iface['version']}, "
                        + ", ".join(f"id {e['id']} -> dmem 0x{e['dmem_offset']:x}" for e in iface["entries"]))
            m = iface["dmem_mapper"]
            if m:
                an.add(f"DMAP @0x{m['offset']:x}: v{m['version']}, cmd_in 0x{m['cmd_in_buffer_offset']:x}+"
                       f"0x{m['cmd_in_buffer_size']:x}, init_cmd 0x{m['init_cmd']:x}")
    doc["regions"] = [r.to_doc() for r in v.regions()]
    doc["notes"] = list(v.notes)
    doc["problems"] = list(v.problems)
    if v.notes:
        n = root.add(f"notes ({len(v.notes)})")
        for x in v.notes:
            n.add(x)
    p = root.add(f"problems ({len(v.problems)})" if v.problems else "problems: none")
    for x in v.problems:
        p.add(x)
    return doc, root
