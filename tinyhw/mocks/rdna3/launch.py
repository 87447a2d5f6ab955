"""Dispatch registers from a kernel descriptor, and code-object loading, for tests and benches.

Written from specs/amd-compute.md §3.4 (driver derivation of the dispatch registers) and §4.1 (user SGPR
order), independently of tinyhw's driver (which derives the same registers itself): a mock never imports
the driver it tests. The descriptor and ELF are parsed by :mod:`tinyhw.formats` (shared vendor facts).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.formats.amdgpu_code import KernelDescriptor, parse_amdgpu_code
from tinyhw.formats.elf import symbols
from tinyhw.mocks.rdna3.dispatch import DispatchRegs, FlatMemory
from tinyhw.mocks.rdna3.scratch import WAVESIZE_GRANULE

__all__ = ["LoadedKernel", "dispatch_regs", "load_kernel", "scratch_ring_bytes"]

# kernel code properties bit -> user SGPRs it takes, in the fixed order of §4.1
_USER_SGPR_ORDER = ((0, 4, "private_segment_buffer"), (1, 2, "dispatch_ptr"), (2, 2, "queue_ptr"),
                    (3, 2, "kernarg_segment_ptr"), (4, 2, "dispatch_id"), (5, 2, "flat_scratch_init"),
                    (6, 1, "private_segment_size"))


def dispatch_regs(kd: KernelDescriptor, entry: int, kernarg: int, grid: tuple[int, int, int],
                  block: tuple[int, int, int], *, dispatch_ptr: int = 0, queue_ptr: int = 0,
                  dispatch_id: int = 0, scratch: int = 0) -> DispatchRegs:
    """COMPUTE_* values for a launch of ``grid`` workgroups of ``block`` work-items (HIP semantics).

    ``scratch`` is the GPU VA (256-byte aligned) of the private-segment ring for a kernel with
    PRIVATE_SEGMENT_FIXED_SIZE > 0: COMPUTE_DISPATCH_SCRATCH_BASE points there and COMPUTE_TMPRING_SIZE gives every
    wave of one workgroup its slot (:func:`scratch_ring_bytes` bytes are needed)."""
    waves, wave_units = _scratch_shape(kd, block)
    values = {"dispatch_ptr": dispatch_ptr, "queue_ptr": queue_ptr, "kernarg_segment_ptr": kernarg,
              "dispatch_id": dispatch_id, "flat_scratch_init": scratch,
              "private_segment_size": -(-kd.scratch_bytes // 4) * 4}
    user: list[int] = []
    for bit, n, name in _USER_SGPR_ORDER:
        if kd.properties >> bit & 1:
            v = values.get(name, 0)
            user += [(v >> (32 * i)) & 0xFFFFFFFF for i in range(n)]
    rsrc2 = kd.rsrc2
    lds_units = -(-kd.lds_bytes // 512)
    rsrc2 = (rsrc2 & ~(0x1FF << 15)) | (max(lds_units, rsrc2 >> 15 & 0x1FF) << 15)
    initiator = 0x5 | (0x8000 if kd.wave32 else 0)
    if kd.scratch_bytes:
        rsrc2 |= 1                  # SCRATCH_EN with a private segment (§3.4)
    tmpring = waves | wave_units << 12 if rsrc2 & 1 else 0
    return DispatchRegs(pgm_lo=(entry >> 8) & 0xFFFFFFFF, pgm_hi=(entry >> 40) & 0xFF, rsrc1=kd.rsrc1,
                        rsrc2=rsrc2, rsrc3=kd.rsrc3, user_data=tuple(user[:16]), num_thread=block, dim=grid,
                        initiator=initiator, tmpring_size=tmpring, scratch_base_lo=(scratch >> 8) & 0xFFFFFFFF,
                        scratch_base_hi=(scratch >> 40) & 0xFF)


def _scratch_shape(kd: KernelDescriptor, block: tuple[int, int, int]) -> tuple[int, int]:
    """(waves of one workgroup, WAVESIZE in 256-byte units) of the kernel's private segment (dword-interleaved wave32:
    32 lanes x the per-work-item size rounded up to dwords)."""
    waves = -(-block[0] * block[1] * block[2] // 32)
    per_lane = -(-kd.scratch_bytes // 4) * 4
    return waves, max(1, -(-per_lane * 32 // WAVESIZE_GRANULE))


def scratch_ring_bytes(kd: KernelDescriptor, block: tuple[int, int, int]) -> int:
    """Bytes of private-segment ring :func:`dispatch_regs` needs at ``scratch`` for a launch of ``block`` (0 when the
    kernel has no private segment)."""
    if not kd.scratch_bytes and not kd.scratch_enabled:
        return 0
    waves, units = _scratch_shape(kd, block)
    return waves * units * WAVESIZE_GRANULE


@dataclass(frozen=True)
class LoadedKernel:
    """A kernel copied into emulated memory: its name, its kernel descriptor and the GPU VA of its first instruction."""

    name: str
    kd: KernelDescriptor
    entry: int           # GPU VA of the first instruction


def load_kernel(elf: bytes, mem: FlatMemory, name: str | None = None) -> LoadedKernel:
    """Copy a code object's ``.text`` into ``mem`` (256-byte aligned) and return the kernel's entry VA."""
    obj = parse_amdgpu_code(elf)
    if not obj.kernels:
        raise ValueError("; ".join(obj.problems) or "no kernel in the code object")
    kname = name or next(iter(obj.kernels))
    kd = obj.kernels[kname]
    text = obj.elf.section(".text")
    if text is None:
        raise ValueError("no .text section")
    base = mem.alloc(bytes(elf[text.offset:text.offset + text.size]), align=256)
    syms = [s for s in symbols(elf, obj.elf) if s.name == kname and s.shndx == text.index]
    off = syms[0].value - (text.addr if obj.elf.file_type != 1 else 0) if syms else 0
    return LoadedKernel(kname, kd, base + off)
