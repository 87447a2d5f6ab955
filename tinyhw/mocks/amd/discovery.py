"""The emulated Navi31's VRAM size register, indirect VRAM window and IP discovery binary.

Facts: specs/amd-bringup.md §1.2 (RCC_CONFIG_MEMSIZE = VRAM size in MiB; MM_INDEX / MM_INDEX_HI /
MM_DATA: write ``addr >> 31`` to MM_INDEX_HI and ``(addr & 0x7FFFFFFF) | 0x80000000`` to MM_INDEX,
then MM_DATA is the VRAM dword at ``addr``), §2.1 (the discovery binary sits at VRAM size - 64 KiB),
§2.2-2.6 (its format, written with :func:`tinyhw.mocks.amd.ipdiscovery_writer.build_discovery`). Register
placement comes from :mod:`tinyhw.regs.fixed` (the §1.2 indices; definitions from the database).

The synthetic binary lists the IPs of the ``navi31`` register profile with the versions and
segment bases of that profile (tinyhw/regs/profiles.py, where each is cited), so a driver that
reads it gets exactly the fact table. A GC info table (§2.8, ``gc_info_v1_3``, layout generated
from the kernel's discovery.h) describes a full Navi31: 6 shader engines x 2 shader arrays x
4 WGPs = 96 CUs, wave32, 64 KiB LDS (counts from AMD's RX 7900 XTX specification; the cache and
buffer figures are invented but plausible). What a real Navi31's binary also holds (more IPs,
real header versions, harvest table) is not modelled.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Callable

from tinyhw.autogen import amd_discovery
from tinyhw.formats.ipdiscovery import BLOCK_HW_IDS, READ_SIZE, TMR_OFFSET, checksum16
from tinyhw.mocks.amd.ipdiscovery_writer import IpSpec, build_discovery
from tinyhw.regs.fixed import CONFIG_MEMSIZE, MM_DATA, MM_INDEX, MM_INDEX_HI, fixed
from tinyhw.regs.profiles import AsicProfile

OFF_MM_INDEX = fixed(MM_INDEX).offset
OFF_MM_DATA = fixed(MM_DATA).offset
OFF_MM_INDEX_HI = fixed(MM_INDEX_HI).offset
OFF_CONFIG_MEMSIZE = fixed(CONFIG_MEMSIZE).offset
_APER = fixed(MM_INDEX).field("MM_APER").mask
_OFFSET = fixed(MM_INDEX).field("MM_OFFSET").mask


def _version(text: str, table: str) -> tuple[int, int, int]:
    """The IP version a profile block states ("13.0.0"), else the version of its register table."""
    m = re.match(r"(\d+)\.(\d+)\.(\d+)", text) or re.search(r"(\d+)_(\d+)_(\d+)$", table)
    assert m is not None, text
    return int(m[1]), int(m[2]), int(m[3])


def profile_ips(profile: AsicProfile) -> list[IpSpec]:
    """One IP entry per block of ``profile``: its stated version and its fact-table bases.

    SMUIO is written as 13.0.6: the profile states a "13.0.6-style map" (inferred). SDMA0 gets
    the GC bases the profile places SDMA registers at (invented: a real SDMA0 entry's own bases
    are not in the specs). The header versions and IP order are invented.
    """
    out = []
    for spec in profile.blocks.values():
        if spec.ip.lower() not in BLOCK_HW_IDS:
            continue
        bases = list(spec.bases)
        while bases and bases[-1] is None:  # an unknown trailing segment is not written
            bases.pop()
        known = tuple(b for b in bases if b is not None)
        if len(known) == len(bases):  # a block with an unknown middle segment is left out
            out.append(IpSpec(spec.ip.lower(), _version(spec.version, spec.table), known))
    return out


def gc_info_table(values: dict[str, int]) -> bytes:
    """A ``gc_info_v1_3`` table (§2.8) with ``values`` (field -> value: a board description's ``gc_info``)."""
    size, layout = amd_discovery.STRUCTS["struct gc_info_v1_3"]
    fields = {"header.table_id": amd_discovery.CONSTANTS["GC_TABLE_ID"], "header.version_major": 1,
              "header.version_minor": 3, "header.size": size, **values}
    buf = bytearray(size)
    for name, value in fields.items():
        off, ctype, _ = layout[name]
        struct.pack_into("<H" if ctype == "uint16_t" else "<I", buf, off, value)
    return bytes(buf)


def discovery_image(profile: AsicProfile, gc_info: bytes) -> bytes:
    """The synthetic discovery binary the emulated board holds (v4 IP table, 32-bit bases: invented).

    The GC info table (``gc_info``, from :func:`gc_info_table`) follows the IP table; entry 1 of
    the table list points at it, with its checksum (§2.2).
    """
    out = bytearray(build_discovery(profile_ips(profile), ip_version=4, binary_version=(1, 0)))
    gc = gc_info
    at = len(out)
    out += gc
    struct.pack_into("<HHHH", out, 12 + 8 * 1, at, checksum16(gc), len(gc), 0)
    struct.pack_into("<H", out, 10, len(out))
    struct.pack_into("<H", out, 8, checksum16(out[10:]))
    return bytes(out)


class VramWindow:
    """RCC_CONFIG_MEMSIZE and the MM_INDEX/MM_INDEX_HI/MM_DATA window onto VRAM.

    ``vram_read``/``vram_write`` access a VRAM dword by byte address (below ``vram_mib`` MiB);
    ``reg_read``/``reg_write`` reach BAR5 registers when MM_INDEX has MM_APER clear
    (the window's register mode, inferred from the field's name).
    """

    def __init__(self, vram_mib: int, vram_read: Callable[[int], int], vram_write: Callable[[int, int], None],
                 reg_read: Callable[[int], int], reg_write: Callable[[int, int], None]) -> None:
        self.vram_mib = vram_mib
        self.index = 0
        self.index_hi = 0
        self._vr, self._vw, self._rr, self._rw = vram_read, vram_write, reg_read, reg_write

    def _addr(self) -> tuple[bool, int]:
        return bool(self.index & _APER), (self.index_hi << 31) | (self.index & _OFFSET)

    def _data_read(self) -> int:
        aper, addr = self._addr()
        return self._vr(addr) if aper else self._rr(addr & ~3)

    def _data_write(self, value: int) -> None:
        aper, addr = self._addr()
        if aper:
            self._vw(addr, value)
        else:
            self._rw(addr & ~3, value)

    def _set_index(self, value: int) -> None:
        self.index = value

    def _set_hi(self, value: int) -> None:
        self.index_hi = value

    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """(reads, writes): BAR5 offset -> handler for MM_INDEX, MM_INDEX_HI, MM_DATA (the indirect VRAM window) and
        RCC_CONFIG_MEMSIZE (VRAM size in MiB, read-only)."""
        reads: dict[int, Callable[[], int]] = {
            OFF_MM_INDEX: lambda: self.index,
            OFF_MM_INDEX_HI: lambda: self.index_hi,
            OFF_MM_DATA: self._data_read,
            OFF_CONFIG_MEMSIZE: lambda: self.vram_mib,
        }
        writes: dict[int, Callable[[int], None]] = {
            OFF_MM_INDEX: self._set_index,
            OFF_MM_INDEX_HI: self._set_hi,
            OFF_MM_DATA: self._data_write,
            OFF_CONFIG_MEMSIZE: lambda _v: None,  # read-only (inferred): a write is dropped
        }
        return reads, writes


def place(vram_write: Callable[[int, int], None], vram_mib: int, image: bytes) -> int:
    """Write ``image`` into VRAM at VRAM size - 64 KiB (§2.1); returns that address."""
    at = (vram_mib << 20) - TMR_OFFSET
    image = image[:READ_SIZE] + bytes(-len(image[:READ_SIZE]) % 4)
    for i in range(0, len(image), 4):
        word = int.from_bytes(image[i:i + 4], "little")
        if word:
            vram_write(at + i, word)
    return at
