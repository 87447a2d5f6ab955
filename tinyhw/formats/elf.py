"""A small ELF reader: file header, section headers (with names) and program headers.

Written from the ELF format (System V gABI: ``e_ident``, ELF32/ELF64 header, ``Elf*_Shdr``,
``Elf*_Phdr``); enough for firmware containers (specs/nv-bringup.md §9.3: the GSP-RM ``gsp_*.bin``
and the FMC ELF32 with its four sections) and for AMDGPU code objects (``e_machine`` EM_AMDGPU = 0xe0,
the GPU generation in ``e_flags``; see :mod:`tinyhw.formats.amdgpu_code`). Both classes and both byte orders
are read. :func:`symbols` decodes a ``.symtab`` (``Elf*_Sym``) on request.

:func:`parse_elf` never raises and never copies section data: sections are (offset, size) pairs
into the caller's bytes, and everything malformed is listed in ``ElfFile.problems``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tinyhw.formats.fwregion import Reader, Region, cstring, unique_names, within

__all__ = ["ELF_MAGIC", "ElfFile", "Section", "Segment", "Symbol", "parse_elf", "symbols"]

ELF_MAGIC = b"\x7fELF"
SHT_NOBITS = 8
SECTION_TYPES = {0: "NULL", 1: "PROGBITS", 2: "SYMTAB", 3: "STRTAB", 4: "RELA", 5: "HASH", 6: "DYNAMIC", 7: "NOTE",
                 8: "NOBITS", 9: "REL", 11: "DYNSYM"}
MACHINES = {0x03: "x86", 0x28: "ARM", 0x3E: "x86-64", 0xB7: "AArch64", 0xBE: "NVIDIA CUDA", 0xE0: "AMDGPU",
            0xF3: "RISC-V"}
SHT_SYMTAB = 2
FILE_TYPES = {0: "NONE", 1: "REL", 2: "EXEC", 3: "DYN", 4: "CORE"}
_MAX_HEADERS = 4096  # more section or program headers than this is not a firmware container


@dataclass(frozen=True)
class Section:
    """One ELF section header: index, name, type, flags, address, file offset and size."""
    index: int
    name: str
    type: int
    flags: int
    addr: int
    offset: int
    size: int
    link: int
    info: int
    align: int
    entsize: int

    @property
    def type_name(self) -> str:
        """The section type's name (``PROGBITS``, ``NOBITS``, ...), or its number in hex."""
        return SECTION_TYPES.get(self.type, f"0x{self.type:x}")

    @property
    def has_data(self) -> bool:
        """True when the section occupies bytes in the file (not NULL or NOBITS, size > 0)."""
        return self.type not in (0, SHT_NOBITS) and self.size > 0


@dataclass(frozen=True)
class Segment:
    """One ELF program header (segment): type, flags, file offset, addresses and sizes."""
    type: int
    flags: int
    offset: int
    vaddr: int
    paddr: int
    filesz: int
    memsz: int
    align: int


@dataclass(frozen=True)
class Symbol:
    """One ELF symbol table entry."""
    name: str
    value: int  # in a relocatable file: the offset inside section ``shndx``
    size: int
    info: int
    shndx: int

    @property
    def bind(self) -> int:
        """The symbol's binding (``st_info`` high nibble: local, global, weak)."""
        return self.info >> 4

    @property
    def type(self) -> int:
        """The symbol's type (``st_info`` low nibble: object, function, section, ...)."""
        return self.info & 0xF


@dataclass
class ElfFile:
    """A parsed ELF file: header fields, sections, segments, symbols and the problems found."""
    size: int
    elf_class: int = 0  # 32 or 64
    big_endian: bool = False
    file_type: int = 0
    machine: int = 0
    entry: int = 0
    flags: int = 0  # e_flags (for AMDGPU: the gfx generation in bits 0-7, xnack/sramecc above)
    sections: list[Section] = field(default_factory=list)
    segments: list[Segment] = field(default_factory=list)
    header_size: int = 0
    sh_table: Region | None = None
    ph_table: Region | None = None
    problems: list[str] = field(default_factory=list)

    @property
    def machine_name(self) -> str:
        """The ``e_machine`` name (e.g. ``AMDGPU``), or its number in hex."""
        return MACHINES.get(self.machine, f"0x{self.machine:x}")

    @property
    def file_type_name(self) -> str:
        """The ``e_type`` name (``REL``, ``EXEC``, ``DYN``, ...), or its number in hex."""
        return FILE_TYPES.get(self.file_type, f"0x{self.file_type:x}")

    def section(self, name: str) -> Section | None:
        """The first section named ``name``, or None."""
        return next((s for s in self.sections if s.name == name), None)

    def regions(self) -> list[Region]:
        """ELF header, header tables and every section with file data, by name."""
        out = [Region("elf header", 0, self.header_size)] if self.header_size else []
        out += [r for r in (self.ph_table, self.sh_table) if r and r.size]
        out += [Region(f"section {s.name or f'[{s.index}]'}", s.offset, s.size) for s in self.sections
                if s.has_data and s.offset + s.size <= self.size]
        return unique_names(out)


def parse_elf(data: bytes | memoryview, *, with_sections: bool = True) -> ElfFile:
    """Decode the ELF header, the section table (names resolved) and the program headers."""
    elf = ElfFile(size=len(data))
    p = elf.problems
    if bytes(data[:4]) != ELF_MAGIC:
        p.append(f"0x0: starts with {bytes(data[:4]).hex()} (expected the elf magic 7f454c46)")
        return elf
    ident = bytes(data[4:6])
    if len(ident) < 2 or ident[0] not in (1, 2) or ident[1] not in (1, 2):
        p.append(f"0x4: elf class/data bytes {ident.hex()} (expected 01|02 and 01|02)")
        return elf
    elf.elf_class = 32 if ident[0] == 1 else 64
    elf.big_endian = ident[1] == 2
    rd = Reader(data, p, endian=">" if elf.big_endian else "<")
    w = "I" if elf.elf_class == 32 else "Q"
    hdr = rd.unpack(f"HHI{w}{w}{w}IHHHHHH", 16, "elf header")
    if hdr is None:
        return elf
    (elf.file_type, elf.machine, _ver, elf.entry, phoff, shoff, elf.flags, ehsize, phentsize, phnum, shentsize,
     shnum, shstrndx) = hdr
    elf.header_size = 52 if elf.elf_class == 32 else 64
    if phnum:
        _program_headers(elf, rd, phoff, phentsize, phnum)
    if shnum and with_sections:
        _section_headers(elf, rd, data, shoff, shentsize, shnum, shstrndx)
    return elf


def _table(elf: ElfFile, name: str, off: int, entsize: int, num: int, want: int) -> Region | None:
    if entsize < want:
        elf.problems.append(f"0x{off:x}: {name} entry size {entsize} (expected at least {want})")
        return None
    if num > _MAX_HEADERS:
        elf.problems.append(f"0x{off:x}: {name} has {num} entries (expected at most {_MAX_HEADERS})")
        return None
    region = Region(name, off, entsize * num)
    return region if within(region, elf.size, elf.problems) else None


def _program_headers(elf: ElfFile, rd: Reader, off: int, entsize: int, num: int) -> None:
    want = 32 if elf.elf_class == 32 else 56
    elf.ph_table = _table(elf, "program header table", off, entsize, num, want)
    if elf.ph_table is None:
        return
    for i in range(num):
        at = off + i * entsize
        if elf.elf_class == 32:
            v = rd.unpack("IIIIIIII", at, f"program header {i}")
            if v is None:
                return
            ptype, poff, vaddr, paddr, filesz, memsz, flags, align = v
        else:
            v = rd.unpack("IIQQQQQQ", at, f"program header {i}")
            if v is None:
                return
            ptype, flags, poff, vaddr, paddr, filesz, memsz, align = v
        elf.segments.append(Segment(ptype, flags, poff, vaddr, paddr, filesz, memsz, align))


def _section_headers(elf: ElfFile, rd: Reader, data: bytes | memoryview, off: int, entsize: int, num: int,
                     strndx: int) -> None:
    want = 40 if elf.elf_class == 32 else 64
    elf.sh_table = _table(elf, "section header table", off, entsize, num, want)
    if elf.sh_table is None:
        return
    raw = []
    fmt = "IIIIIIIIII" if elf.elf_class == 32 else "IIQQQQIIQQ"
    for i in range(num):
        v = rd.unpack(fmt, off + i * entsize, f"section header {i}")
        if v is None:
            return
        raw.append(v)
    names = raw[strndx] if strndx < len(raw) else None
    if strndx and names is None:
        elf.problems.append(f"0x{off:x}: section name table index {strndx} (expected < {num})")
    for i, (name_off, stype, flags, addr, soff, size, link, info, align, entsize_) in enumerate(raw):
        name = ""
        if names is not None and name_off < names[5]:
            name = cstring(data, names[4] + name_off, min(256, names[5] - name_off)).decode("latin-1")
        sec = Section(i, name, stype, flags, addr, soff, size, link, info, align, entsize_)
        if sec.has_data:
            within(Region(f"section {name or f'[{i}]'}", soff, size), elf.size, elf.problems)
        elf.sections.append(sec)


def symbols(data: bytes | memoryview, elf: ElfFile) -> list[Symbol]:
    """Every entry of the ``SHT_SYMTAB`` section, names resolved through its linked string table.

    Malformed entries are skipped and listed in ``elf.problems``; no symbol table gives ``[]``.
    """
    tab = next((s for s in elf.sections if s.type == SHT_SYMTAB), None)
    if tab is None or not tab.has_data:
        return []
    want = 16 if elf.elf_class == 32 else 24
    entsize = tab.entsize or want
    if entsize < want or tab.offset + tab.size > elf.size:
        elf.problems.append(f"0x{tab.offset:x}: symbol table entry size {entsize} or extent is invalid")
        return []
    strtab = elf.sections[tab.link] if tab.link < len(elf.sections) else None
    rd = Reader(data, elf.problems, endian=">" if elf.big_endian else "<")
    out: list[Symbol] = []
    for i in range(min(tab.size // entsize, _MAX_HEADERS * 16)):
        at = tab.offset + i * entsize
        if elf.elf_class == 32:
            v = rd.unpack("IIIBBH", at, f"symbol {i}")
            if v is None:
                break
            name_off, value, size, info, _other, shndx = v
        else:
            v = rd.unpack("IBBHQQ", at, f"symbol {i}")
            if v is None:
                break
            name_off, info, _other, shndx, value, size = v
        name = ""
        if strtab is not None and strtab.has_data and name_off < strtab.size:
            name = cstring(data, strtab.offset + name_off, min(256, strtab.size - name_off)).decode("latin-1")
        out.append(Symbol(name, value, size, info, shndx))
    return out
