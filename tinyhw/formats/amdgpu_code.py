"""AMDGPU code objects: the GPU generation in ``e_flags`` and the 64-byte kernel descriptor.

Written from the LLVM AMDGPU backend's public documentation ("AMDGPUUsage": ELF header ``EF_AMDGPU_MACH``
values, "Kernel Descriptor" for GFX6-GFX12) and specs/compiler-library.md §3 (tinygrad's LLVM output is a
relocatable ELF, machine 0xe0, with the descriptor ``<kernel>.kd`` in ``.rodata``). Pure: takes ``bytes``.

Kernel descriptor layout (little endian, 64 bytes):

=======  =====================================================================
0        group_segment_fixed_size (LDS bytes)
4        private_segment_fixed_size (scratch bytes per work-item)
8        kernarg_size
16       kernel_code_entry_byte_offset (i64; relocated in an ``ET_REL`` file)
44/48/52 compute_pgm_rsrc3 / rsrc1 / rsrc2
56       kernel code properties (u16): bit 3 kernarg segment pointer, bit 10 wave32
=======  =====================================================================
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tinyhw.formats.elf import ElfFile, parse_elf, symbols

__all__ = ["EM_AMDGPU", "MACH", "AmdgpuCodeObject", "KernelDescriptor", "parse_amdgpu_code", "parse_kernel_descriptor"]

EM_AMDGPU = 0xE0
EF_AMDGPU_MACH_MASK = 0xFF
# EF_AMDGPU_MACH values for the targets tinyhw builds or may meet
MACH = {"gfx900": 0x2C, "gfx906": 0x2F, "gfx908": 0x30, "gfx90a": 0x3F, "gfx942": 0x4C, "gfx950": 0x4F,
        "gfx1030": 0x36, "gfx1100": 0x41, "gfx1101": 0x46, "gfx1102": 0x47, "gfx1200": 0x48, "gfx1201": 0x4E}
MACH_NAMES = {v: k for k, v in MACH.items()}
KD_SIZE = 64


@dataclass(frozen=True)
class KernelDescriptor:
    """One 64-byte AMDGPU kernel descriptor (``.kd`` symbol): LDS, scratch, kernarg size, entry, RSRC words."""
    lds_bytes: int
    scratch_bytes: int
    kernarg_size: int
    entry_offset: int
    rsrc1: int
    rsrc2: int
    rsrc3: int
    properties: int

    @property
    def wave32(self) -> bool:
        """True when the kernel runs in wave32 mode (kernel code properties bit 10)."""
        return bool(self.properties >> 10 & 1)

    @property
    def kernarg_ptr(self) -> bool:
        """True when the kernarg segment pointer is passed in user SGPRs (properties bit 3)."""
        return bool(self.properties >> 3 & 1)

    @property
    def vgprs(self) -> int:
        """Work-item VGPRs allocated: (granulated count + 1) x granule (8 for wave32, 4 for wave64; GFX10+)."""
        return ((self.rsrc1 & 0x3F) + 1) * (8 if self.wave32 else 4)

    @property
    def user_sgprs(self) -> int:
        """How many user SGPRs the kernel takes (COMPUTE_PGM_RSRC2 bits 5:1)."""
        return self.rsrc2 >> 1 & 0x1F

    @property
    def scratch_enabled(self) -> bool:
        """True when private scratch memory is enabled (COMPUTE_PGM_RSRC2 bit 0)."""
        return bool(self.rsrc2 & 1)

    def to_doc(self) -> dict:
        """The descriptor as a JSON-ready dict, decoded fields and raw RSRC words."""
        return {"lds_bytes": self.lds_bytes, "scratch_bytes": self.scratch_bytes, "kernarg_size": self.kernarg_size,
                "wave32": self.wave32, "vgprs": self.vgprs, "user_sgprs": self.user_sgprs,
                "rsrc1": self.rsrc1, "rsrc2": self.rsrc2, "rsrc3": self.rsrc3, "properties": self.properties}


def parse_kernel_descriptor(raw: bytes | memoryview) -> KernelDescriptor:
    """Decode 64 descriptor bytes; raises ``ValueError`` when fewer are given."""
    if len(raw) < KD_SIZE:
        raise ValueError(f"a kernel descriptor is {KD_SIZE} bytes, got {len(raw)}")
    lds, scratch, kernarg = struct.unpack_from("<III", raw, 0)
    (entry,) = struct.unpack_from("<q", raw, 16)
    rsrc3, rsrc1, rsrc2 = struct.unpack_from("<III", raw, 44)
    (props,) = struct.unpack_from("<H", raw, 56)
    return KernelDescriptor(lds, scratch, kernarg, entry, rsrc1, rsrc2, rsrc3, props)


@dataclass
class AmdgpuCodeObject:
    """An AMDGPU ELF code object: its target from ``e_flags``, kernel descriptors by name, ``.text`` size."""
    elf: ElfFile
    arch: str | None = None  # from e_flags, None when the value is not known here
    mach: int = 0
    kernels: dict[str, KernelDescriptor] = field(default_factory=dict)  # kernel name (without .kd) -> descriptor
    text_size: int = 0
    problems: list[str] = field(default_factory=list)


def parse_amdgpu_code(data: bytes | memoryview) -> AmdgpuCodeObject:
    """Check an AMDGPU ELF (machine, e_flags generation) and decode each ``<name>.kd`` kernel descriptor."""
    elf = parse_elf(data)
    obj = AmdgpuCodeObject(elf, problems=elf.problems)
    if elf.problems and not elf.sections:
        return obj
    if elf.elf_class != 64 or elf.big_endian:
        obj.problems.append("an amdgpu code object is a 64-bit little-endian elf")
    if elf.machine != EM_AMDGPU:
        obj.problems.append(f"0x12: machine 0x{elf.machine:x} (expected 0x{EM_AMDGPU:x}, amdgpu)")
        return obj
    obj.mach = elf.flags & EF_AMDGPU_MACH_MASK
    obj.arch = MACH_NAMES.get(obj.mach)
    if obj.arch is None:
        obj.problems.append(f"0x30: e_flags 0x{elf.flags:x} names an unknown gfx generation 0x{obj.mach:x}")
    text = elf.section(".text")
    obj.text_size = text.size if text else 0
    if not text or not text.size:
        obj.problems.append("no .text section (no machine code)")
    for sym in symbols(data, elf):
        if not sym.name.endswith(".kd"):
            continue
        sec = elf.sections[sym.shndx] if 0 < sym.shndx < len(elf.sections) else None
        if sec is None or not sec.has_data:
            obj.problems.append(f"kernel descriptor {sym.name} points at section {sym.shndx}, which holds no data")
            continue
        rel = sym.value - (sec.addr if elf.file_type != 1 else 0)   # linked (ET_DYN): a VA, not a section offset
        start = sec.offset + rel
        if sym.size < KD_SIZE or rel < 0 or rel + KD_SIZE > sec.size or start + KD_SIZE > len(data):
            obj.problems.append(f"kernel descriptor {sym.name} at 0x{start:x} is cut short ({sym.size} bytes)")
            continue
        obj.kernels[sym.name[:-3]] = parse_kernel_descriptor(bytes(data[start:start + KD_SIZE]))
    if not obj.kernels:
        obj.problems.append("no kernel descriptor (<name>.kd symbol) found")
    return obj
