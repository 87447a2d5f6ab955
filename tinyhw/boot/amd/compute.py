"""Compute dispatches on a booted Navi3x: one MEC queue created through registers, PM4 from the host, a fence.

Layer 3 (boot): handed a transport (through :class:`~tinyhw.boot.amd.gpu.AmGpu`), never opening one, never importing
an emulator. Spec: specs/amd-compute.md §1.3 (doorbell range, VMID0 page tables), §1.4 (the MQD, 512 dwords, the
values amdgpu writes), §1.5 (fields, by name from the register database), §1.6 (b) (direct activation order,
GRBM_GFX_CNTL selecting me 1 / pipe 0 / queue 0), §1.7 (ring, 64-bit WPTR in dwords, WPTR shadow then the 64-bit
doorbell at byte 4 x doorbell index, MEC_RING0 << 1), §1.8 (dequeue), §2.11 (the dispatch sequence: ACQUIRE_MEM,
SET_SH_REG of the COMPUTE_* registers, DISPATCH_DIRECT, RELEASE_MEM), §3.4 (registers from the kernel descriptor),
§3.5 (kernarg: the pointer arguments at 8-byte slots), §4.1 (user SGPR order), §7 (poll the fence).

Layout (tinyhw's own): VRAM 96 MiB .. 224 MiB (inside a 256 MiB BAR0, above the copy engine's page tables and
rings) is mapped with 2 MiB pages at VA base + 64 MiB (:func:`tinyhw.boot.amd.copyengine.map_vram_2m`); in it the MQD,
the EOP buffer, the read-pointer report, the WPTR shadow, the fence, the AQL dispatch packet, the 64 KiB ring, the
page tables of the buffer area, the code (1 MiB), the kernarg segment and, from 2 MiB, the buffers. Every address
the CP and the shader see is a GPU virtual address of VMID0. Each dispatch maps only its buffers' pages
(:func:`buffer_layout`): every buffer ends at the end of its last 4 KiB page (to within its 256-byte start
alignment) and has an unmapped page after it, so a kernel that reads or writes past the end of any buffer it was
given faults (a GPU VM fault, on the emulated board as on hardware), and the fence wait names the address and the
buffer it ran past instead of the run succeeding silently.
"""

from __future__ import annotations

import contextlib
import struct
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd import pm4
from tinyhw.boot.amd.copyengine import VA_BASE, fields, map_vram_2m, map_vram_pages, rd_far, wr_far
from tinyhw.errors import DeviceTimeout, OperationFailed, Refused, TinyhwError
from tinyhw.formats.amdgpu_code import KernelDescriptor, parse_amdgpu_code
from tinyhw.formats.amdgpu_meta import KernelMeta, MetadataError, kernel_metadata
from tinyhw.formats.elf import symbols
from tinyhw.transport.wait import poll

if TYPE_CHECKING:
    from tinyhw.boot.amd.buffers import BufferPath
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.transport.base import Transport

KiB, MiB = 1 << 10, 1 << 20
REGION, REGION_SIZE, REGION_VA = 96 * MiB, 128 * MiB, VA_BASE + 64 * MiB
MQD, EOP, RPTR, WPTR, FENCE, AQL = 0x0, 0x1000, 0x2000, 0x2008, 0x2100, 0x2200
RING, RING_SIZE = 0x10000, 64 * KiB
TABLES = 0x20000  # the 4 KiB page tables of the buffer area's partly mapped 2 MiB pages (map_vram_pages), to CODE
CODE, CODE_MAX = 0x100000, 960 * KiB
KERNARG, KERNARG_MAX = 0x1F0000, 64 * KiB
BUFFERS = 2 * MiB
BUFFER_ALIGN = 256
PAGE = 4 * KiB
GUARD = PAGE  # the unmapped page after each buffer
ME, PIPE, QUEUE = 1, 0, 0  # MEC1 pipe 0 queue 0 (§1.1: mec0 is me1)
MEC_RING0 = 0x003           # §1.3: Navi10 doorbell layout
DOORBELL_INDEX = MEC_RING0 << 1  # doorbell dword index of kernel compute ring 0 (§1.7)
USERQUEUE_END = 0x08A
#: the GC's doorbell ports of the NBIO (amd-bringup.md §4.2 step 9c, non-NBIO-7.9): (S2A entry, AWID), AWADDR[31:28]
GC_DOORBELL_PORTS = ((0, 3), (3, 6))
GC_DOORBELL_AWADDR = 0x3
MQD_HEADER = 0xC0310800
EOP_SIZE = 2048
DRAIN_PIPE, RESET_WAVES = 1, 2  # CP_HQD_DEQUEUE_REQUEST codes (§1.5: inferred values; amd-bringup.md §3.3: 2 resets)
DEQUEUE_TIMEOUT = 1.0
GFX11 = ("gfx1100",)
SH_MEM_ADDRESS_MODE_64, SH_MEM_ALIGNMENT_UNALIGNED = 0, 3  # SH_MEM_CONFIG field values (Linux gfx_v11_0.c)
SHARED_BASE, PRIVATE_BASE = 0x1, 0x2  # SH_MEM_BASES: the LDS and scratch apertures' address bits 63:48 (§4.2 9c)
LDS_GRANULE = 512  # RSRC2.LDS_SIZE granule on gfx11 (§3.4, conventional value, inferred)
MAX_GROUPS = 1 << 31
MAX_BLOCK = 1024
DEFAULT_TIMEOUT = 10.0
POLL_FIRST, POLL_MAX = 1e-6, 1e-3
FAULT_CHECK = 16  # fence polls between two looks at the vm fault status
#: kernel code property bit -> user SGPRs it takes, in the order of §4.1
USER_SGPRS = ((0, 4, "private_segment_buffer"), (1, 2, "dispatch_ptr"), (2, 2, "queue_ptr"),
              (3, 2, "kernarg_segment_ptr"), (4, 2, "dispatch_id"), (5, 2, "flat_scratch_init"),
              (6, 1, "private_segment_size"))


def va(offset: int) -> int:
    """GPU virtual address of byte ``offset`` of the compute region."""
    return REGION_VA + offset


@dataclass(frozen=True)
class Kernel:
    """A kernel of a code object, checked and ready to place: its descriptor, code bytes and entry offset."""

    name: str
    kd: KernelDescriptor
    text: bytes
    entry: int  # offset of the first instruction inside ``text``
    meta: KernelMeta | None = None  # the metadata note's entry (argument offsets and kinds), when there is one


def load_code_object(data: bytes, name: str | None = None, arch: tuple[str, ...] = GFX11) -> Kernel:
    """Parse an AMDGPU code object and pick kernel ``name`` (the only one when None); refused (exit 2) when it is
    not a code object for this GPU, the kernel is not in it, or it asks for scratch SGPRs gfx11 does not have."""
    obj = parse_amdgpu_code(data)
    if not obj.kernels:
        raise Refused(f"not a usable amdgpu code object: {'; '.join(obj.problems) or 'no kernel in it'}")
    if obj.arch not in arch:
        raise Refused(f"the code object is built for {obj.arch or f'unknown gfx 0x{obj.mach:x}'}; this gpu runs "
                      f"{', '.join(arch)}")
    if name is None:
        if len(obj.kernels) != 1:
            raise Refused(f"the code object holds {len(obj.kernels)} kernels ({', '.join(obj.kernels)}); name one")
        name = next(iter(obj.kernels))
    if name not in obj.kernels:
        raise Refused(f"kernel {name!r} is not in the code object (it holds {', '.join(obj.kernels)})")
    kd = obj.kernels[name]
    if kd.properties & 1 << 0 | kd.properties & 1 << 5:
        raise Refused(f"kernel {name} asks for the private segment buffer or flat scratch init sgprs, which gfx11 "
                      "(architected flat scratch) does not have")
    text = obj.elf.section(".text")
    if text is None or not text.size:
        raise Refused("the code object has no .text section")
    if text.size > CODE_MAX:
        raise Refused(f"the code object's .text is {text.size} bytes; at most {CODE_MAX} fit the code area")
    syms = [s for s in symbols(data, obj.elf) if s.name == name and s.shndx == text.index]
    if not syms:
        raise Refused(f"kernel {name} has no code symbol in .text")
    entry = syms[0].value - (text.addr if obj.elf.file_type != 1 else 0)  # ET_REL: offset in the section
    if not 0 <= entry < text.size or entry % 256:
        raise Refused(f"kernel {name}'s entry 0x{entry:x} is not a 256-byte aligned offset inside .text")
    try:
        meta = kernel_metadata(data, obj.elf).get(name)
    except MetadataError as e:
        raise Refused(f"the code object's metadata note is malformed: {e}") from None
    return Kernel(name, kd, bytes(data[text.offset:text.offset + text.size]), entry, meta)


def buffer_layout(sizes: list[int]) -> list[tuple[int, int, int]]:
    """Where the buffers of a dispatch lie in the region: [(offset, first page, end of its last page)] per buffer.
    Each takes whole 4 KiB pages from the buffer area (region offset 2 MiB) on, lies at their end (its start
    256-byte aligned, so at most 255 bytes after its end are still its page), and has one unmapped page after it:
    a kernel running past any buffer's end by more than that slack faults. Raises Refused when they do not fit."""
    at, out = BUFFERS, []
    for i, n in enumerate(sizes):
        size = max(4, -(-n // 4) * 4)
        hi = at + -(-size // PAGE) * PAGE
        if hi > REGION_SIZE:
            raise Refused(f"buffer {i} ({n} bytes) does not fit: the buffers may take {REGION_SIZE - BUFFERS} bytes "
                          "in all, each in whole 4 KiB pages with one unmapped 4 KiB page after it")
        out.append(((hi - size) // BUFFER_ALIGN * BUFFER_ALIGN, at, hi))
        at = hi + GUARD
    return out


#: bytes per COMPUTE_TMPRING_SIZE.WAVESIZE unit on gfx11 (tinygrad's driver sizes gfx11 scratch in 256-byte units;
#: inferred) and the shader engines whose scratch slots one ring holds (tinygrad divides the ring's waves by the SE
#: count: WAVES is per shader engine; Navi3x has at most 6, 8 are allocated)
SCRATCH_GRANULE, SCRATCH_SES = 256, 8


def scratch_ring(kd: KernelDescriptor, block: tuple[int, int, int]) -> tuple[int, int]:
    """(bytes of private-segment ring, COMPUTE_TMPRING_SIZE) for a launch of ``block`` work-items of a kernel with
    a private segment (PRIVATE_SEGMENT_FIXED_SIZE or RSRC2.SCRATCH_EN, §3.4), (0, 0) for one without. WAVES is one
    workgroup's waves (it must fit: its waves run together), WAVESIZE the per-work-item size in dwords for 64 lanes
    (as tinygrad sizes it: enough for wave64 too)."""
    if not kd.scratch_bytes and not kd.scratch_enabled:
        return 0, 0
    waves = -(-block[0] * block[1] * block[2] // (32 if kd.wave32 else 64))
    units = max(1, -(-(-(-kd.scratch_bytes // 4) * 4) * 64 // SCRATCH_GRANULE))
    if units >= 1 << 15 or waves * units * SCRATCH_GRANULE * SCRATCH_SES > 64 * MiB:
        raise Refused(f"{kd.scratch_bytes} bytes of scratch per work-item are more than tinyhw sets up")
    return waves * units * SCRATCH_GRANULE * SCRATCH_SES, waves | units << 12


def _check_dims(what: str, dims: tuple[int, ...], limit: int) -> tuple[int, int, int]:
    if not 1 <= len(dims) <= 3 or any(isinstance(d, bool) or not isinstance(d, int) for d in dims):
        raise Refused(f"{what} takes 1 to 3 whole numbers, not {dims!r}")
    x, y, z = tuple(dims) + (1,) * (3 - len(dims))
    out = (x, y, z)
    if any(not 1 <= d <= limit for d in out):
        raise Refused(f"{what} {','.join(map(str, out))}: each dimension must be 1 .. {limit}")
    return out


#: work-items per dimension a dispatch can name: its grid size in work-items is a 32-bit field (the HSA kernel
#: dispatch packet's grid_size_x/y/z, :meth:`ComputeEngine.aql_packet`; amd-compute.md §2.5 DIM_* and §3.5 hidden
#: block counts are u32 too) and a kernel's global id (workgroup id x size + local id) is 32-bit arithmetic
MAX_WORK_ITEMS = 0xFFFFFFFF


def check_grid(grid: tuple[int, int, int], block: tuple[int, int, int]) -> None:
    """Refuse (exit 2) a grid whose work-items in some dimension (workgroups x workgroup size) do not fit the
    dispatch's 32-bit grid size (:data:`MAX_WORK_ITEMS`): the board cannot be given it."""
    for axis, g, b in zip("xyz", grid, block, strict=True):
        if g * b > MAX_WORK_ITEMS:
            raise Refused(f"--grid {','.join(map(str, grid))} --block {','.join(map(str, block))}: {g} workgroups "
                          f"of {b} work-items in {axis} are {g * b} work-items; a dispatch holds at most "
                          f"{MAX_WORK_ITEMS} (32 bits) per dimension",
                          hint="split the work over several dispatches or use fewer workgroups")


@dataclass
class DispatchRun:
    """What one dispatch did: the buffers' bytes after it, and its time on the transport's clock."""

    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    outputs: list[bytes]
    seconds: float
    detail: dict[str, Any] = field(default_factory=dict)


class ComputeEngine:
    """One compute queue on MEC1 pipe 0 queue 0 of a booted GPU; :meth:`close` dequeues it."""

    def __init__(self, gpu: AmGpu, *, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.gpu = gpu
        self.timeout = timeout
        self.wptr = 0  # dwords, monotonic
        self.seq = 0
        self.active = False
        self.stats = {"dispatches": 0, "dwords": 0}
        self.placed: list[tuple[int, int]] = []  # the last dispatch's buffers: (region offset, bytes)
        self.pages: list[tuple[int, int]] = []  # and the region offsets of their mapped pages: (start, end)
        #: how the buffers go in and come out (:class:`tinyhw.boot.amd.buffers.BufferPath`; None: BAR writes and reads)
        self.buffers: BufferPath | None = None
        self.copy_engine: Any = None  # the copy engine open_compute brought up (for a buffer path over it)

    # -- queue --------------------------------------------------------------------------------------------------
    def select(self, on: bool = True) -> None:
        """GRBM_GFX_CNTL: the queue's HQD bank (§1.2), or 0 afterwards."""
        g = self.gpu
        g.wr("gc.GRBM_GFX_CNTL", fields(g, "gc.GRBM_GFX_CNTL", PIPEID=PIPE, MEID=ME, QUEUEID=QUEUE) if on else 0)

    def mqd(self) -> list[int]:
        """The 512-dword MQD (§1.4), zero except the fields amdgpu writes."""
        g = self.gpu
        m = [0] * 512
        m[0] = MQD_HEADER
        m[11] = 1
        for i in (23, 24, 26, 27):
            m[i] = 0xFFFFFFFF
        m[32] = 7
        mqd_va, ring_va, eop_va = va(MQD), va(RING), va(EOP)
        m[128], m[129] = mqd_va & 0xFFFFFFFC, mqd_va >> 32
        m[130] = 1  # loaded directly: ACTIVE
        m[132] = fields(g, "gc.CP_HQD_PERSISTENT_STATE", PRELOAD_SIZE=0x55)
        m[136], m[137] = (ring_va >> 8) & 0xFFFFFFFF, ring_va >> 40
        m[139], m[140] = va(RPTR) & 0xFFFFFFFC, (va(RPTR) >> 32) & 0xFFFF
        m[141], m[142] = va(WPTR) & 0xFFFFFFFC, (va(WPTR) >> 32) & 0xFFFF
        m[143] = fields(g, "gc.CP_HQD_PQ_DOORBELL_CONTROL", DOORBELL_OFFSET=DOORBELL_INDEX, DOORBELL_EN=1)
        m[145] = fields(g, "gc.CP_HQD_PQ_CONTROL", QUEUE_SIZE=(RING_SIZE // 4).bit_length() - 2, RPTR_BLOCK_SIZE=9,
                        UNORD_DISPATCH=1, PRIV_STATE=1, KMD_QUEUE=1)
        m[149] = fields(g, "gc.CP_HQD_IB_CONTROL", MIN_IB_AVAIL_SIZE=3)
        m[165], m[166] = (eop_va >> 8) & 0xFFFFFFFF, eop_va >> 40
        m[167] = fields(g, "gc.CP_HQD_EOP_CONTROL", EOP_SIZE=(EOP_SIZE // 4).bit_length() - 2)
        return m

    def route_doorbells(self) -> None:
        """Route the GC's doorbells through the NBIO to the CP (amd-bringup.md §4.2 step 9c: ports 0 and 3, AWID 3
        and 6, AWADDR[31:28] 3; the doorbell aperture itself is on since the copy engine's bring-up, step 2)."""
        g = self.gpu
        for port, awid in GC_DOORBELL_PORTS:
            reg, f = f"nbio.S2A_DOORBELL_ENTRY_{port}_CTRL", f"S2A_DOORBELL_PORT{port}"
            wr_far(g, reg, fields(g, reg, **{f"{f}_ENABLE": 1, f"{f}_AWID": awid,
                                             f"{f}_AWADDR_31_28_VALUE": GC_DOORBELL_AWADDR}))

    def doorbell_route(self) -> str:
        """The doorbell path as programmed, in words (for an error that says the CP never saw the doorbell)."""
        g = self.gpu
        aper = g.rd("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN")
        parts = [f"RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN.BIF_DOORBELL_APER_EN={aper & 1}"]
        for port, awid in GC_DOORBELL_PORTS:
            reg, f = f"nbio.S2A_DOORBELL_ENTRY_{port}_CTRL", f"S2A_DOORBELL_PORT{port}"
            v = rd_far(g, reg)
            d = g.asic.reg(reg).decode(v)
            ok = d.get(f"{f}_ENABLE") == 1 and d.get(f"{f}_AWID") == awid
            parts.append(f"S2A_DOORBELL_ENTRY_{port}_CTRL 0x{v:08x} ({'routed' if ok else 'not routed'}: "
                         f"ENABLE={d.get(f'{f}_ENABLE', 0)} AWID={d.get(f'{f}_AWID', 0)}, want AWID {awid})")
        return ", ".join(parts)

    def apertures(self) -> None:
        """SH_MEM_CONFIG and SH_MEM_BASES of the queue's VMID (0), selected by GRBM_GFX_CNTL VMID 0 with me/pipe/
        queue 0 (§1.2, §1.3 step 3): 64-bit addressing, unaligned accesses, instruction prefetch 3 (Linux
        gfx_v11_0.c DEFAULT_SH_MEM_CONFIG, 0xc00c), and the values amd-bringup.md §4.2 step 9c gives (shared base
        0x1, private base 0x2), so a kernel's FLAT accesses to LDS and private memory reach them. Each base is its
        aperture's address bits 63:48 (Linux's gfx_v11_0_init_compute_vmid comment puts base 0x6000 at
        0x6000_0000_0000_0000), so the apertures start at 0x0001_0000_0000_0000 and 0x0002_0000_0000_0000; the
        spec's parenthetical 0x1000_0000_0000_0000 / 0x2000_0000_0000_0000 shifts the same values by 60."""
        g = self.gpu
        g.wr("gc.GRBM_GFX_CNTL", 0)
        g.wr("gc.SH_MEM_CONFIG", fields(g, "gc.SH_MEM_CONFIG", ADDRESS_MODE=SH_MEM_ADDRESS_MODE_64,
                                        ALIGNMENT_MODE=SH_MEM_ALIGNMENT_UNALIGNED, INITIAL_INST_PREFETCH=3))
        g.wr("gc.SH_MEM_BASES", fields(g, "gc.SH_MEM_BASES", SHARED_BASE=SHARED_BASE, PRIVATE_BASE=PRIVATE_BASE))

    def create(self) -> None:
        """Route the doorbell, map the region, write the MQD, ring, EOP and pointers, and activate the queue
        (§1.6 (b))."""
        g = self.gpu
        self.route_doorbells()
        map_vram_2m(g, REGION_VA - VA_BASE, REGION, REGION_SIZE)
        m = self.mqd()
        g.vram_write(REGION + MQD, struct.pack("<512I", *m))
        g.vram_write(REGION + EOP, bytes(EOP_SIZE))
        g.vram_write(REGION + RPTR, bytes(0x200))  # rptr report, wptr shadow, fence
        g.vram_write(REGION + RING, bytes(RING_SIZE))
        g.hdp_flush()
        self.apertures()
        self.select()
        try:
            g.wr("gc.CP_PQ_WPTR_POLL_CNTL", 0)  # 1: EN = 0
            g.wr("gc.CP_HQD_EOP_BASE_ADDR", m[165])
            g.wr("gc.CP_HQD_EOP_BASE_ADDR_HI", m[166])
            g.wr("gc.CP_HQD_EOP_CONTROL", m[167])
            g.wr("gc.CP_HQD_PQ_DOORBELL_CONTROL", m[143])
            if g.rd("gc.CP_HQD_ACTIVE") & 1:  # 5: a queue left active: drain it first
                self.dequeue()
                g.wr("gc.CP_HQD_DEQUEUE_REQUEST", 0)
            g.wr("gc.CP_HQD_PQ_RPTR", 0)
            g.wr("gc.CP_HQD_PQ_WPTR_LO", 0)
            g.wr("gc.CP_HQD_PQ_WPTR_HI", 0)
            g.wr("gc.CP_MQD_BASE_ADDR", m[128])
            g.wr("gc.CP_MQD_BASE_ADDR_HI", m[129])
            g.wr("gc.CP_MQD_CONTROL", fields(g, "gc.CP_MQD_CONTROL", VMID=0))
            g.wr("gc.CP_HQD_PQ_BASE", m[136])
            g.wr("gc.CP_HQD_PQ_BASE_HI", m[137])
            g.wr("gc.CP_HQD_PQ_CONTROL", m[145])
            g.wr("gc.CP_HQD_PQ_RPTR_REPORT_ADDR", m[139])
            g.wr("gc.CP_HQD_PQ_RPTR_REPORT_ADDR_HI", m[140])
            g.wr("gc.CP_HQD_PQ_WPTR_POLL_ADDR", m[141])
            g.wr("gc.CP_HQD_PQ_WPTR_POLL_ADDR_HI", m[142])
            g.wr("gc.CP_MEC_DOORBELL_RANGE_LOWER", 0)  # KIQ index 0
            g.wr("gc.CP_MEC_DOORBELL_RANGE_UPPER", (USERQUEUE_END * 2) << 2)
            g.wr("gc.CP_HQD_PQ_DOORBELL_CONTROL", m[143])
            g.wr("gc.CP_HQD_VMID", 0)
            g.wr("gc.CP_HQD_PERSISTENT_STATE", m[132])
            g.wr("gc.CP_HQD_ACTIVE", 1)
            g.wr("gc.CP_PQ_STATUS", fields(g, "gc.CP_PQ_STATUS", DOORBELL_ENABLE=1))
        finally:
            self.select(False)
        self.active = True
        self.wptr = 0

    def dequeue(self, request: int = DRAIN_PIPE, timeout: float = DEQUEUE_TIMEOUT,
                 hint: str = "reset the gpu (`tinyhw am reset --yes`) and boot again") -> None:
        """CP_HQD_DEQUEUE_REQUEST = ``request`` on the selected queue, then wait for CP_HQD_ACTIVE.ACTIVE to clear
        (§1.8; 1 ms polls)."""
        g = self.gpu
        g.wr("gc.CP_HQD_DEQUEUE_REQUEST", request)
        try:
            poll(g.clock, lambda: g.rd("gc.CP_HQD_ACTIVE"), lambda v: not v & 1, timeout=timeout, interval=0.001,
                 what="the compute queue to dequeue")
        except DeviceTimeout as e:
            how = {DRAIN_PIPE: "DRAIN_PIPE", RESET_WAVES: "RESET_WAVES"}.get(request, str(request))
            raise DeviceTimeout(f"the compute queue did not dequeue in {timeout:g} s (CP_HQD_DEQUEUE_REQUEST "
                                f"{how}; {self.status()})", hint=hint) from e

    def __enter__(self) -> ComputeEngine:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, tb: object) -> None:
        """Close the queue; when a dispatch already failed, a queue that does not dequeue (hung waves) keeps that
        first error visible instead of replacing it (the queue stays for ``am reset`` to tear down)."""
        if exc is None:
            self.close()
            return
        with contextlib.suppress(TinyhwError):
            self.close()

    def close(self, *, reset_waves: bool = False) -> None:
        """Dequeue the queue (§1.8) and deselect; harmless when it was never created. The dequeue drains the pipe
        (its waves finish first); ``reset_waves`` drops them instead, what a hung dispatch needs."""
        if not self.active:
            return
        self.active = False
        self.select()
        try:
            if self.gpu.rd("gc.CP_HQD_ACTIVE") & 1:
                self.dequeue(RESET_WAVES if reset_waves else DRAIN_PIPE)
            self.gpu.wr("gc.CP_HQD_DEQUEUE_REQUEST", 0)
        finally:
            self.select(False)

    # -- submission ---------------------------------------------------------------------------------------------
    def submit(self, dwords: list[int]) -> None:
        """Write ``dwords`` into the ring (never across the wrap: filler NOPs pad the tail), the WPTR shadow, then
        the 64-bit doorbell (§1.7)."""
        g = self.gpu
        size = RING_SIZE // 4
        if len(dwords) >= size:
            raise Refused(f"a submission of {len(dwords)} dwords does not fit the {size}-dword ring")
        pos = self.wptr % size
        if pos + len(dwords) > size:
            g.vram_write(REGION + RING + 4 * pos, struct.pack(f"<{size - pos}I", *pm4.nop(size - pos)))
            self.wptr += size - pos
            pos = 0
        g.vram_write(REGION + RING + 4 * pos, struct.pack(f"<{len(dwords)}I", *dwords))
        self.wptr += len(dwords)
        self.stats["dwords"] += len(dwords)
        g.vram_write(REGION + WPTR, struct.pack("<Q", self.wptr))
        g.hdp_flush()
        bar = g.transport.bar(2)
        bar.write32(4 * DOORBELL_INDEX, self.wptr & 0xFFFFFFFF)
        bar.write32(4 * DOORBELL_INDEX + 4, self.wptr >> 32)

    def fence(self) -> int:
        """The compute queue's fence word in VRAM: the sequence number of the last dispatch that completed."""
        return self.gpu.vram_read32(REGION + FENCE)

    def status(self) -> str:
        """The CP's state in words, decoded by register and field name (for the timeout message)."""
        g = self.gpu
        self.select()
        try:
            active = g.rd("gc.CP_HQD_ACTIVE")
            rptr = g.rd("gc.CP_HQD_PQ_RPTR")
            wptr = g.rd("gc.CP_HQD_PQ_WPTR_HI") << 32 | g.rd("gc.CP_HQD_PQ_WPTR_LO")
        finally:
            self.select(False)
        grbm = g.rd("gc.GRBM_STATUS")
        busy = [n for n, v in g.asic.reg("gc.GRBM_STATUS").decode(grbm).items() if v]
        fault = g.rd("gc.GCVM_L2_PROTECTION_FAULT_STATUS")
        parts = [f"queue me{ME} pipe{PIPE} queue{QUEUE} CP_HQD_ACTIVE.ACTIVE={active & 1}",
                 f"CP_HQD_PQ_RPTR 0x{rptr:x} of WPTR 0x{wptr:x} (dwords; "
                 + ("every packet consumed)" if rptr == wptr & 0xFFFFFFFF else f"{(wptr - rptr) & 0xFFFFFFFF} "
                                                                                "not consumed)"),
                 f"GRBM_STATUS 0x{grbm:08x} ({' '.join(busy) or 'idle'})"]
        if self.active and wptr != self.wptr:
            parts.insert(1, f"the cp never saw the doorbell (CP_HQD_PQ_WPTR 0x{wptr:x}, the driver rang "
                            f"0x{self.wptr:x} "
                            f"at BAR2 byte 0x{4 * DOORBELL_INDEX:x}; doorbell route: {self.doorbell_route()})")
        if fault:
            addr = (g.rd("gc.GCVM_L2_PROTECTION_FAULT_ADDR_HI32") & 0xF) << 44 | \
                g.rd("gc.GCVM_L2_PROTECTION_FAULT_ADDR_LO32") << 12
            f = g.asic.reg("gc.GCVM_L2_PROTECTION_FAULT_STATUS").decode(fault)
            parts.append(f"gpu vm fault at page 0x{addr:x} (vmid {f.get('VMID', 0)}, "
                         f"{'write' if f.get('RW') else 'read'}; GCVM_L2_PROTECTION_FAULT_STATUS 0x{fault:08x})")
        else:
            parts.append("no gpu vm fault")
        return ", ".join(parts)

    def fault_message(self) -> str:
        """What a GPU VM fault during a dispatch means, in one line: past the end of the buffers (the faulting page
        and the buffer whose end the kernel ran past, from the last :meth:`place`), else the CP status."""
        g = self.gpu
        addr = (g.rd("gc.GCVM_L2_PROTECTION_FAULT_ADDR_HI32") & 0xF) << 44 | \
            g.rd("gc.GCVM_L2_PROTECTION_FAULT_ADDR_LO32") << 12
        status = g.asic.reg("gc.GCVM_L2_PROTECTION_FAULT_STATUS").decode(g.rd("gc.GCVM_L2_PROTECTION_FAULT_STATUS"))
        verb = "wrote" if status.get("RW") else "read"
        where = self.overrun(addr)
        if where is not None:
            return f"the kernel {verb} at 0x{addr:x} (gpu vm fault on that page), {where}: nothing is mapped there"
        return f"the dispatch stopped on a gpu vm fault; CP status: {self.status()}"

    def overrun(self, addr: int) -> str | None:
        """Which buffer of the last :meth:`place` a fault at VA ``addr`` ran past (the unmapped page after it), in
        words; None when ``addr`` is no such page."""
        n = len(self.placed)
        for i, ((off, size), (_lo, hi)) in enumerate(zip(self.placed, self.pages, strict=True)):
            nxt = self.pages[i + 1][0] if i + 1 < n else REGION_SIZE
            if va(hi) <= addr < va(nxt):
                what = (f"past the end of buffer {i} (0x{va(off):x} .. 0x{va(off) + max(size, 1) - 1:x}, {size} "
                        f"bytes), ")
                if i + 1 == n:
                    return what + f"the last of the {n} buffer(s) it was given"
                return what + f"in the guard page before buffer {i + 1} (from 0x{va(self.placed[i + 1][0]):x})"
        return None

    def wait(self, seq: int, timeout: float | None = None, since: float | None = None) -> float:
        """Poll the fence until it holds ``seq``; the seconds it took on the transport's clock. ``timeout`` bounds the
        wait on that clock and, where the clock is virtual (an emulated board), in wall time too, counted from
        ``since`` (a ``time.monotonic()`` value, e.g. taken before the submission) or from now."""
        g = self.gpu
        timeout = self.timeout if timeout is None else timeout
        t0 = g.clock.now()
        wall0 = time.monotonic() if since is None else since
        virtual = getattr(g.clock, "virtual", False)
        step, polls = POLL_FIRST, 0
        while True:
            done = self.fence() == seq
            took = g.clock.now() - t0  # the fence's time, before the fault check below
            polls += 1
            # a fault stops the queue, or, where the hub sends faulting accesses to its default page, lets the
            # dispatch finish with wrong data: so the status is looked at once more after the fence too
            if (done or polls % FAULT_CHECK == 0) and g.rd("gc.GCVM_L2_PROTECTION_FAULT_STATUS"):
                raise OperationFailed(self.fault_message(),
                                      hint="fix the kernel's addresses; then reset the gpu (`tinyhw am reset --yes`) "
                                           "and boot again")
            if done:
                return took
            if took >= timeout or (virtual and time.monotonic() - wall0 >= timeout):
                raise DeviceTimeout(f"the dispatch did not complete in {timeout:g} s; CP status: {self.status()}",
                                    hint="reset the gpu (`tinyhw am reset --yes`) and boot again")
            g.clock.sleep(min(step, timeout - took))
            step = min(2 * step, POLL_MAX)  # 1 us doubling to 1 ms: short dispatches are timed finely

    # -- a dispatch ---------------------------------------------------------------------------------------------
    def place(self, kernel: Kernel, buffers: list[bytes]) -> tuple[int, list[tuple[int, int]]]:
        """Copy the code and the buffers into the region (:func:`buffer_layout`) and map only the buffers' pages
        (module docstring); (entry VA, [(buffer offset, size)])."""
        g = self.gpu
        layout = buffer_layout([len(b) for b in buffers])
        g.vram_write(REGION + CODE, kernel.text)
        put = self.buffers.write if self.buffers is not None else g.vram_write
        for b, (off, _lo, _hi) in zip(buffers, layout, strict=True):
            put(REGION + off, bytes(b) + bytes(max(4, -(-len(b) // 4) * 4) - len(b)))
        map_vram_pages(g, REGION_VA - VA_BASE + BUFFERS, REGION + BUFFERS, REGION_SIZE - BUFFERS,
                       [(lo - BUFFERS, hi - BUFFERS) for _off, lo, hi in layout], REGION + TABLES, CODE - TABLES)
        self.placed = [(off, len(b)) for b, (off, _lo, _hi) in zip(buffers, layout, strict=True)]
        self.pages = [(lo, hi) for _off, lo, hi in layout]
        return va(CODE) + kernel.entry, self.placed

    def kernarg(self, kernel: Kernel, pointers: list[int], grid: tuple[int, int, int] = (1, 1, 1),
                block: tuple[int, int, int] = (1, 1, 1)) -> bytes:
        """The kernarg segment (§3.5): each pointer at its metadata offset (or in 8-byte slots in order without
        metadata); the hidden block counts, group sizes and grid dimensions filled, every other byte zero."""
        meta = kernel.meta
        size = max(kernel.kd.kernarg_size, meta.kernarg_size if meta else 0, 8 * len(pointers))
        if size > KERNARG_MAX:
            raise Refused(f"kernel {kernel.name} needs {size} kernarg bytes; at most {KERNARG_MAX} are set up")
        seg = bytearray(-(-size // 64) * 64 or 64)
        if meta is None:
            for i, p in enumerate(pointers):
                struct.pack_into("<Q", seg, 8 * i, p)
            return bytes(seg)
        hidden = {f"hidden_block_count_{a}": grid[i] for i, a in enumerate("xyz")}
        hidden.update({f"hidden_group_size_{a}": block[i] for i, a in enumerate("xyz")})
        hidden["hidden_grid_dims"] = 3 if grid[2] * block[2] > 1 else 2 if grid[1] * block[1] > 1 else 1
        ptrs = iter(pointers)
        for arg in meta.args:
            if arg.offset + arg.size > len(seg):
                raise Refused(f"kernel {kernel.name}: argument at {arg.offset} runs past the kernarg segment")
            if arg.kind == "global_buffer":
                value = next(ptrs, 0)
            else:
                value = hidden.get(arg.kind, 0)  # by_value arguments and other hidden ones are zero
            if arg.size in (1, 2, 4, 8):
                seg[arg.offset:arg.offset + arg.size] = (value & ((1 << (8 * arg.size)) - 1)).to_bytes(arg.size,
                                                                                                        "little")
        return bytes(seg)

    def packets(self, kernel: Kernel, entry: int, grid: tuple[int, int, int], block: tuple[int, int, int],
                seq: int, before: list[int] | None = None, after: list[int] | None = None,
                scratch: tuple[int, int] | None = None) -> list[int]:
        """The PM4 stream of one dispatch (amd-compute.md §2.11): acquire memory, the kernel's program address and
        resource words, its user SGPRs, DISPATCH_DIRECT of ``grid`` workgroups of ``block`` work-items, then an
        end-of-pipe fence writing ``seq``; raises Refused when the kernel enables more user SGPRs than it loads.
        ``before``/``after``: packets right before DISPATCH_DIRECT and right after it (before the fence), e.g. the
        thread trace's enable and finish (:mod:`tinyhw.boot.amd.sqtt`). ``scratch``: (ring VA, COMPUTE_TMPRING_SIZE) of
        a
        kernel with a private segment (:func:`scratch_ring`): COMPUTE_DISPATCH_SCRATCH_BASE points at the ring (gfx11
        sets each wave's flat scratch from it, architected flat scratch)."""
        kd = kernel.kd
        values = {"dispatch_ptr": va(AQL), "queue_ptr": 0, "kernarg_segment_ptr": va(KERNARG), "dispatch_id": 0}
        user: list[int] = []
        for bit, n, name in USER_SGPRS:
            if kd.properties >> bit & 1:
                v = values.get(name, 0)
                user += [(v >> (32 * i)) & 0xFFFFFFFF for i in range(n)]
        if len(user) > 16 or len(user) > kd.user_sgprs:
            raise Refused(f"kernel {kernel.name} enables {len(user)} user sgprs but loads {kd.user_sgprs}")
        lds_units = -(-kd.lds_bytes // LDS_GRANULE)
        rsrc2 = (kd.rsrc2 & ~(0x1FF << 15)) | (max(lds_units, kd.rsrc2 >> 15 & 0x1FF) << 15)
        g = self.gpu
        out = pm4.acquire_mem()
        out += pm4.set_sh_reg(g.offset("gc.COMPUTE_PGM_LO"), [(entry >> 8) & 0xFFFFFFFF, (entry >> 40) & 0xFF])
        out += pm4.set_sh_reg(g.offset("gc.COMPUTE_PGM_RSRC1"), [kd.rsrc1, rsrc2])
        out += pm4.set_sh_reg(g.offset("gc.COMPUTE_PGM_RSRC3"), [kd.rsrc3])
        ring_va, tmpring = scratch or (0, 0)
        out += pm4.set_sh_reg(g.offset("gc.COMPUTE_TMPRING_SIZE"), [tmpring])
        if scratch:
            out += pm4.set_sh_reg(g.offset("gc.COMPUTE_DISPATCH_SCRATCH_BASE_LO"), [(ring_va >> 8) & 0xFFFFFFFF,
                                                                                    (ring_va >> 40) & 0xFF])
        out += pm4.set_sh_reg(g.offset("gc.COMPUTE_RESOURCE_LIMITS"), [0])
        out += pm4.set_sh_reg(g.offset("gc.COMPUTE_START_X"), [0, 0, 0, *block])  # START_X..Z, NUM_THREAD_X..Z
        if user:
            out += pm4.set_sh_reg(g.offset("gc.COMPUTE_USER_DATA_0"), user)
        out += before or []
        out += pm4.dispatch_direct(grid, pm4.INITIATOR_W32 if kd.wave32 else pm4.INITIATOR_W64)
        out += after or []
        out += pm4.release_mem(va(FENCE), seq)
        return out

    def aql_packet(self, kernel: Kernel, entry: int, grid: tuple[int, int, int], block: tuple[int, int, int]) -> bytes:
        """The 64-byte dispatch packet a kernel with the dispatch pointer reads (HSA kernel dispatch packet layout:
        workgroup sizes at 4, grid sizes in work-items at 12, segment sizes, kernel object, kernarg address)."""
        grid_items = tuple(g * b for g, b in zip(grid, block, strict=True))
        return struct.pack("<HHHHHHIIIIIQQQQ", 0, 3, *block, 0, *(min(x, 0xFFFFFFFF) for x in grid_items),
                           0, kernel.kd.lds_bytes, entry, va(KERNARG), 0, 0)

    def run(self, kernel: Kernel, grid: tuple[int, ...], block: tuple[int, ...], buffers: list[bytes],
            *, timeout: float | None = None, before: list[int] | None = None,
            after: list[int] | None = None) -> DispatchRun:
        """Place, dispatch, wait for the fence, read every buffer back (``before``/``after``: see :meth:`packets`)."""
        wall0 = time.monotonic()  # an emulated board's dispatch may run inside the doorbell write: count it too
        grid3, block3, placed = self.launch(kernel, grid, block, buffers, before=before, after=after)
        g = self.gpu
        seconds = self.wait(self.seq, timeout, wall0)
        self.stats["dispatches"] += 1
        get = self.buffers.read if self.buffers is not None else g.vram_read
        outputs = [get(REGION + off, -(-n // 4) * 4)[:n] for off, n in placed]
        return DispatchRun(kernel.name, grid3, block3, outputs, seconds,
                           {"ring_dwords": self.wptr, "fence": self.seq})

    def launch(self, kernel: Kernel, grid: tuple[int, ...], block: tuple[int, ...], buffers: list[bytes], *,
               before: list[int] | None = None, after: list[int] | None = None
               ) -> tuple[tuple[int, int, int], tuple[int, int, int], list[tuple[int, int]]]:
        """Place and submit one dispatch without waiting for it (its fence value is :attr:`seq`): what a hang
        investigation starts; (grid, block, [(buffer offset, size)])."""
        if not self.active:
            raise OperationFailed("the compute queue is not created (ComputeEngine.create first)")
        grid3 = _check_dims("--grid", tuple(grid), MAX_GROUPS)
        block3 = _check_dims("--block", tuple(block), MAX_BLOCK)
        if block3[0] * block3[1] * block3[2] > MAX_BLOCK:
            raise Refused(f"--block {','.join(map(str, block3))} is {block3[0] * block3[1] * block3[2]} work-items; "
                          f"a workgroup holds at most {MAX_BLOCK}")
        check_grid(grid3, block3)
        ring, tmpring = scratch_ring(kernel.kd, block3)
        entry, placed = self.place(kernel, [*buffers, bytes(ring)] if ring else buffers)
        scratch = (va(placed[-1][0]), tmpring) if ring else None
        placed = placed[:len(buffers)]       # the scratch ring (its own mapped pages) is no kernel argument
        g = self.gpu
        g.vram_write(REGION + KERNARG, self.kernarg(kernel, [va(off) for off, _ in placed], grid3, block3))
        g.vram_write(REGION + AQL, self.aql_packet(kernel, entry, grid3, block3))
        self.seq = (self.seq + 1) & 0xFFFFFFFF or 1
        g.vram_write(REGION + FENCE, struct.pack("<I", (self.seq - 1) & 0xFFFFFFFF))
        self.submit(self.packets(kernel, entry, grid3, block3, self.seq, before, after, scratch=scratch))
        return grid3, block3, placed


def teardown_compute(gpu: AmGpu, timeout: float = DEQUEUE_TIMEOUT) -> dict[str, Any]:
    """Tear down tinyhw's compute queue before a reset (§1.8, amd-bringup.md §4.4 fini): when the queue is active,
    CP_HQD_DEQUEUE_REQUEST = RESET_WAVES (hung waves are dropped, not waited for), wait for CP_HQD_ACTIVE.ACTIVE to
    clear (``timeout`` s on the transport's clock: else :class:`DeviceTimeout` with the CP status, exit 1), then
    DEQUEUE_REQUEST = 0. Only on a gc 11 GPU tinyhw booted (a queue exists only there); what it found, as a dict."""
    from tinyhw.boot.amd.state import read_state

    where = {"me": ME, "pipe": PIPE, "queue": QUEUE}
    gc = gpu.ip_version("gc")
    if gc is None or gc[0] != 11 or not read_state(gpu).tinyhw_booted:
        return {**where, "checked": False, "was_active": False, "dequeued": False}
    engine = ComputeEngine(gpu)
    engine.select()
    try:
        active = gpu.rd("gc.CP_HQD_ACTIVE")
        was = active != 0xFFFFFFFF and bool(active & 1)
        if was:
            engine.dequeue(RESET_WAVES, timeout, hint="the gpu was not reset; power-cycle the board (emulated "
                                                       "boards: tinyhw mock reset --yes)")
            gpu.wr("gc.CP_HQD_DEQUEUE_REQUEST", 0)
    finally:
        engine.select(False)
    return {**where, "checked": True, "was_active": was, "dequeued": was}


def check_booted(transport: Transport, what: str = "kernels run on") -> AmGpu:
    """The :class:`AmGpu` of a gc 11 GPU a tinyhw boot brought up; else refused (exit 2): not an AMD GPU (from its
    identity, before any register access), an unknown or other GC, not booted (hinting at ``am boot``)."""
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.boot.amd.state import read_state

    ident = transport.identity()
    where = ident.location or transport.name
    if ident.vendor_id != 0x1002 or ident.class_code >> 16 != 0x03:
        raise Refused(f"{where} ({ident.vendor_id:04x}:{ident.device_id:04x}) is not an amd gpu; {what} "
                      "navi3x gpus only")
    gpu = AmGpu(transport)
    gc = gpu.ip_version("gc")
    if gc is None or gc[0] != 11:
        shown = ".".join(map(str, gc)) if gc else "unknown"
        raise Refused(f"{where} has gc {shown}, a gpu tinyhw does not run kernels on (gc 11 / gfx1100 only)")
    state = read_state(gpu)
    if not (state.tinyhw_booted and state.busy == 0 and state.sos_alive):
        raise Refused(f"{where} is not a gpu tinyhw booted (its mec runs firmware the psp loads)",
                      hint="run tinyhw am boot --yes first (tinyhw am info shows the state)")
    return gpu


def open_compute(transport: Transport, *, timeout: float = DEFAULT_TIMEOUT, gpu: AmGpu | None = None) -> ComputeEngine:
    """A compute queue on a booted GPU: checks (:func:`check_booted`), brings VMID0 and the copy engine up again
    (the page tables live in VRAM, :func:`tinyhw.boot.amd.copyengine.bring_up`), creates the queue."""
    from tinyhw.boot.amd.copyengine import bring_up

    gpu = gpu or check_booted(transport)
    if gpu.rd("gc.GCVM_L2_PROTECTION_FAULT_STATUS"):
        raise Refused("a gpu vm fault is pending (GCVM_L2_PROTECTION_FAULT_STATUS != 0): an earlier dispatch faulted",
                      hint="reset the gpu (`tinyhw am reset --yes`) and boot again")
    copy = bring_up(gpu)
    engine = ComputeEngine(gpu, timeout=timeout)
    engine.copy_engine = copy
    engine.create()
    return engine
