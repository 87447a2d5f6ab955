"""NVIDIA GSP-RM firmware (``gsp_ga10x.bin``, ``gsp_tu10x.bin``, linux-firmware ``gsp-<ver>.bin``).

Spec: specs/nv-bringup.md §9.2 (which file serves which chips; here the list is derived from the file's
own ``.fwsignature_<family>`` sections, :func:`family_chips`, never from its name), §3.3 (the chips), §9.3
(the file is an ELF; a loader uses ``.fwimage``, the image mapped through a radix-3 table, and
``.fwsignature_<family>``, the chip family's signature copied into its own 4 KiB buffer), §10 (WPR meta:
``sizeOfRadix3Elf`` = the ``.fwimage`` length, ``sizeOfSignature`` = 0x1000), §11 (radix-3 page counts).
The version string is the ``.fwversion`` section (observed in Debian's firmware-nvidia-gsp 535.261.03: "535.261.03\\0").

:func:`parse_gsp` never raises; structural errors are ``problems``, observations are ``notes``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tinyhw.formats.elf import ElfFile, parse_elf
from tinyhw.formats.fwregion import Region

__all__ = ["GspFirmware", "SIGNATURE_BUFFER", "is_gsp_elf", "parse_gsp", "radix3_pages"]

PAGE = 0x1000
SIGNATURE_BUFFER = 0x1000  # §10: sizeOfSignature; each .fwsignature_* is copied into a 4 KiB buffer
#: §3.3: the chips (Linux nova-core's chipset list), by which a signature family is resolved.
CHIPS = ("tu102", "tu104", "tu106", "tu117", "tu116", "ga100", "ga102", "ga103", "ga104", "ga106", "ga107", "gh100",
         "ad102", "ad103", "ad104", "ad106", "ad107", "gb100", "gb102", "gb202", "gb203", "gb205", "gb206", "gb207")
#: Chips with a signature family of their own, never covered by a wildcard family (§9.2: GA100 is served by the
#: Turing file, whose ``.fwsignature_ga100`` is its own; ``ga10x`` means GA102 and later).
OWN_FAMILY = ("ga100",)
#: §9.3: the signature families tinygrad's loader picks from (others are listed, not used by it).
TINYGRAD_FAMILIES = ("ga10x", "ad10x", "gb20x")


@dataclass
class GspFirmware:
    """A parsed GSP-RM firmware ELF: version, image, signatures per chip family, chips served."""
    elf: ElfFile
    version: str | None = None
    image: Region | None = None
    image_elf: ElfFile | None = None  # when .fwimage is itself an ELF (gsp_tu10x: a stripped executable)
    signatures: dict[str, Region] = field(default_factory=dict)  # chip family -> .fwsignature_<family>
    radix3: dict[str, int] = field(default_factory=dict)
    serves: tuple[str, ...] = ()  # chips with a .fwsignature_* section in this file (see family_chips)
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def regions(self) -> list[Region]:
        """Named byte ranges of the file: the ELF's header tables and sections."""
        return self.elf.regions()


def radix3_pages(image_size: int) -> dict[str, int]:
    """Pages of each radix-3 level for an image of ``image_size`` bytes (§11), and their total."""
    level3 = -(-image_size // PAGE)
    level2 = ((level3 - 1) >> 9) + 1 if level3 else 0
    level1 = ((level2 - 1) >> 9) + 1 if level2 else 0
    level0 = ((level1 - 1) >> 9) + 1 if level1 else 0
    return {"level0": level0, "level1": level1, "level2": level2, "image": level3,
            "total": level0 + level1 + level2 + level3}


def family_chips(family: str) -> tuple[str, ...]:
    """The chips a ``.fwsignature_<family>`` section is for: the chip itself (``ga100``, ``gh100``; ``cc_gh100``
    is GH100's confidential-computing signature), or every chip of a wildcard family (``ad10x``: AD102 ...
    AD107; ``tu11x``: TU116, TU117) but those with a family of their own (:data:`OWN_FAMILY`)."""
    fam = family.removeprefix("cc_")
    if fam in CHIPS:
        return (fam,)
    if fam.endswith("x") and len(fam) > 1:
        return tuple(c for c in CHIPS if c.startswith(fam[:-1]) and c not in OWN_FAMILY)
    return ()


def is_gsp_elf(elf: ElfFile) -> bool:
    """True when the ELF has a ``.fwimage`` section (a GSP-RM firmware file)."""
    return elf.section(".fwimage") is not None


def parse_gsp(data: bytes | memoryview, name: str | None = None) -> GspFirmware:
    """Decode a GSP-RM firmware ELF: version, image, per-family signatures and the loader's figures."""
    elf = parse_elf(data)
    fw = GspFirmware(elf)
    fw.problems += elf.problems
    if elf.elf_class == 0:
        return fw
    img = elf.section(".fwimage")
    if img is None or not img.has_data:
        fw.problems.append(f"0x{elf.sh_table.offset if elf.sh_table else 0:x}: no .fwimage section "
                           "(expected the GSP-RM image a loader maps through the radix-3 table)")
    elif img.offset + img.size <= len(data):
        fw.image = Region(".fwimage", img.offset, img.size)
        fw.radix3 = radix3_pages(img.size)
        if bytes(data[img.offset:img.offset + 4]) == b"\x7fELF":
            fw.image_elf = parse_elf(memoryview(data)[img.offset:img.offset + img.size], with_sections=False)
            fw.notes += [f".fwimage: {p}" for p in fw.image_elf.problems]
    ver = elf.section(".fwversion")
    if ver is None:
        fw.problems.append("no .fwversion section (expected the firmware version string)")
    elif ver.offset + ver.size <= len(data):
        raw = bytes(data[ver.offset:ver.offset + min(ver.size, 64)]).split(b"\0")[0]
        fw.version = raw.decode("ascii", "replace")
    for s in elf.sections:
        if s.name.startswith(".fwsignature_") and s.offset + s.size <= len(data):
            fam = s.name.removeprefix(".fwsignature_")
            fw.signatures[fam] = Region(s.name, s.offset, s.size)
            if s.size > SIGNATURE_BUFFER:
                fw.problems.append(f"0x{s.offset:x}: {s.name} is 0x{s.size:x} bytes (expected at most 0x1000, "
                                   "the loader's signature buffer)")
    if img is not None and not fw.signatures:
        fw.problems.append("no .fwsignature_<family> section (expected one per supported chip family)")
    serves = {c for fam in fw.signatures for c in family_chips(fam)}
    fw.serves = tuple(c for c in CHIPS if c in serves)
    fw.notes += [f".fwsignature_{fam}: a signature family that names no chip tinyhw knows (§3.3)"
                 for fam in fw.signatures if not family_chips(fam)]
    _name_checks(fw, name)
    return fw


def _name_checks(fw: GspFirmware, name: str | None) -> None:
    if not name:
        return
    m = re.search(r"(\d+\.\d+(?:\.\d+)?)", name)
    if m and fw.version and m[1] != fw.version:
        fw.notes.append(f"the path names version {m[1]}, .fwversion says {fw.version}")
