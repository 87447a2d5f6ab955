"""Host memory <-> VRAM through a pinned DMA buffer and SDMA0: the copy path of a GPU on native PCIe (``vfio:``).

Spec: specs/pci-vfio-remote.md §8.8 (type1 DMA: pinned host pages the device reaches at an IOVA, nothing else),
§9.1/§9.4 (why kernel pinning, not mlock); specs/amd-bringup.md §4.2 steps 3/9a and 10 (the hubs and SDMA0 that
:func:`tinyhw.boot.amd.copyengine.bring_up` programs), §4.5 (VMID0 from VA 0x2000_0000_0000, PDB2 -> PDB1 -> PDB0 ->
PTB, 4 KiB PTEs; bit 1 *system*: the address is a bus address, here the IOVA; snooped, MTYPE_UC). Layer 3: handed
a transport with the ``DmaBuffers`` ability (``VfioTransport``; ``mock:navi31`` emulates it), never opening one.

The window: one DMA buffer (``window`` bytes, two halves, plus one page for the fence) mapped at VA base + 1 GiB
with 4 KiB system PTEs in tinyhw's own page-table pages after the copy engine's (PDB1 entry 1 -> one PDB0 -> up to
247 PTBs, inside the 1 MiB below the SDMA ring; so at most 494 MiB). A copy moves in pieces of half the window,
double-buffered: the host fills (or drains) one half while SDMA0 copies the other; each piece is one submission
(COPY_LINEAR packets + FENCE of a sequence number into the fence page), and the host waits on the fence word in
its own memory (no register reads). A piece whose fence never comes (an IOMMU fault, a hung engine) is a
:class:`~tinyhw.errors.DeviceTimeout` naming the piece and the engine's read pointer.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from tinyhw.boot.amd import sdmapkt
from tinyhw.boot.amd.copyengine import (
    IH_RING_SIZE,
    IH_RINGS,
    MTYPE_UC,
    PT_BASE,
    RW,
    SNOOPED,
    SYSTEM,
    VA_BASE,
    VALID,
    invalidate,
    phys,
)
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.transport.abilities import DmaBuffers
from tinyhw.transport.base import Transport, has, require, set_bus_master

if TYPE_CHECKING:
    from tinyhw.boot.amd.copyengine import CopyEngine
    from tinyhw.boot.amd.gpu import AmGpu

KiB, MiB = 1 << 10, 1 << 20
PAGE = 4 * KiB
WINDOW_VA_OFFSET = 1 << 30  # PDB1 entry 1 (the copy engine uses entry 0: bridge pages, 2 MiB VRAM mappings)
PDB0_DMA = PT_BASE + 0x8000  # after the copy engine's pages (PDB2..PTB, scratch, dummy, rptr, ih wptr)
PTB_DMA = PDB0_DMA + PAGE
MAX_PTBS = (PT_BASE + MiB - PTB_DMA) // PAGE  # up to the SDMA ring (PT_BASE + 1 MiB)
MAX_WINDOW = 256 * MiB
DEFAULT_WINDOW = 16 * MiB
#: VRAM a copy must not touch: the boot layout (tinyhw.boot.amd.layout, < 80 MiB) and the copy engine's page tables,
#: ring and IH rings up to here; the top 64 MiB the firmware reserves (amd-bringup.md §4.5, discovery inside)
RESERVED_LOW = IH_RINGS + 2 * IH_RING_SIZE
RESERVED_TOP = 64 * MiB
SPIN = 2000  # fence reads before the waiter starts sleeping between them


def window_va(offset: int = 0) -> int:
    """The GPU virtual address ``offset`` bytes into the window where the host DMA buffer is mapped."""
    return VA_BASE + WINDOW_VA_OFFSET + offset


def map_system(gpu: AmGpu, bus: int, size: int) -> None:
    """Map ``size`` bytes of bus (IOVA) space at ``bus`` at :func:`window_va` with 4 KiB system PTEs, then flush."""
    pages = -(-size // PAGE)
    ptbs = -(-pages // 512)
    if bus % PAGE or ptbs > MAX_PTBS:
        raise Refused(f"a dma window of 0x{size:x} bytes at iova 0x{bus:x} cannot be mapped (page aligned, at most "
                      f"{MAX_PTBS * 2} MiB)")
    pdb1_entry = phys(PDB0_DMA) | VALID  # PDEs hold physical VRAM addresses (amd-bringup.md §4.5)
    gpu.vram_write(PT_BASE + PAGE + 8 * (WINDOW_VA_OFFSET >> 30), pdb1_entry.to_bytes(8, "little"))
    pdb0 = bytearray(PAGE)
    for i in range(ptbs):
        pdb0[8 * i:8 * i + 8] = (phys(PTB_DMA + i * PAGE) | VALID).to_bytes(8, "little")
    gpu.vram_write(PDB0_DMA, bytes(pdb0))
    ptes = bytearray(ptbs * PAGE)
    flags = RW | SYSTEM | SNOOPED | MTYPE_UC
    for p in range(pages):
        ptes[8 * p:8 * p + 8] = ((bus + p * PAGE) | flags).to_bytes(8, "little")
    gpu.vram_write(PTB_DMA, bytes(ptes))
    gpu.hdp_flush()
    invalidate(gpu)


def check_range(gpu: AmGpu, offset: int, length: int, what: str = "dma copy") -> None:
    """Refuse a VRAM range outside VRAM or over memory the booted GPU uses (boot region, page tables, rings, the
    reserved top)."""
    if offset < 0 or length < 0 or offset + length > gpu.vram_size:
        raise Refused(f"{what} of {length} bytes at vram 0x{offset:x} is outside vram (0x{gpu.vram_size:x} bytes)")
    top = gpu.vram_size - RESERVED_TOP
    if length and (offset < RESERVED_LOW or offset + length > top):
        raise Refused(f"{what} of {length} bytes at vram 0x{offset:x} overlaps memory the running gpu uses "
                      f"(tinyhw's boot region, page tables and rings below 0x{RESERVED_LOW:x}; the reserved "
                      f"top from 0x{top:x})", hint="copy at offsets from 0x8000000 (128 MiB), the default")


class DmaCopier:
    """Copies between host bytes and VRAM through one mapped DMA window; ``close()`` frees the window."""

    def __init__(self, engine: CopyEngine, *, window: int = DEFAULT_WINDOW, timeout: float = 10.0) -> None:
        if not 2 * PAGE <= window <= MAX_WINDOW or window % (2 * PAGE):
            raise Refused(f"dma window 0x{window:x} must be a multiple of 8 KiB between 8 KiB and "
                          f"{MAX_WINDOW >> 20} MiB")
        self.engine = engine
        self.gpu = engine.gpu
        self.transport = require(engine.gpu.transport, DmaBuffers, "map host dma buffers")
        self.clock = self.gpu.clock
        self.timeout = timeout
        self.half = window // 2
        self.buf = self.transport.dma_alloc(window + PAGE)
        try:
            map_system(self.gpu, self.buf.iova, self.buf.size)
        except BaseException:
            self.transport.dma_free(self.buf)
            raise
        self.fence_at = window  # byte offset of the fence word in the buffer (its last page)
        self.buf.write(self.fence_at, bytes(8))
        self.seq = 0
        self.stats = {"pieces": 0, "bytes_in": 0, "bytes_out": 0, "fence_reads": 0}

    @property
    def iova(self) -> int:
        """The bus (IOVA) address of the pinned host buffer the SDMA engine copies through."""
        return self.buf.iova

    # -- fences ----------------------------------------------------------------------------------------------
    def _fence(self) -> int:
        self.stats["fence_reads"] += 1
        return int.from_bytes(self.buf.read(self.fence_at, 4), "little")

    def _done(self, seq: int) -> bool:
        return ((self._fence() - seq) & 0xFFFFFFFF) < 0x80000000  # fence >= seq, modulo 2^32

    def _wait(self, seq: int, what: str) -> None:
        deadline = self.clock.now() + self.timeout
        spins = 0
        while not self._done(seq):
            if self.clock.now() >= deadline:
                rptr = self.engine.rptr()
                missed = self.engine.missed_doorbell()
                raise DeviceTimeout(
                    f"{what}: sdma0 did not signal fence {seq} in {self.timeout:g} s (fence {self._fence()}, "
                    f"read pointer 0x{rptr:x} of 0x{self.engine.wptr:x}); " + (missed or (
                        f"an iommu fault (dma buffer not mapped at iova 0x{self.buf.iova:x}) or a hung copy engine")),
                    hint="check the kernel log for iommu faults; reset the gpu (`tinyhw am reset`) and boot again")
            spins += 1
            if self.clock.virtual:
                self.clock.sleep(1e-3)  # nothing moves on an emulated board until virtual time passes
            elif spins > SPIN:
                self.clock.sleep(1e-5)
            elif not spins % 64:
                time.sleep(0)  # let other threads run while spinning on host memory

    def _submit(self, body: list[int]) -> int:
        self.seq = (self.seq + 1) & 0xFFFFFFFF
        self.engine.submit(body + sdmapkt.fence(window_va(self.fence_at), self.seq))
        self.stats["pieces"] += 1
        return self.seq

    def _check(self, offset: int, length: int, what: str) -> None:
        check_range(self.gpu, offset, length, what)

    # -- copies ----------------------------------------------------------------------------------------------
    def copy_in(self, dst_offset: int, data: bytes | bytearray | memoryview) -> dict[str, int]:
        """Host bytes -> VRAM byte ``dst_offset`` (any length); returns what it did."""
        view = memoryview(data).cast("B")
        self._check(dst_offset, len(view), "dma copy-in")
        pending = [0, 0]
        pieces = range(0, len(view), self.half)
        for k, off in enumerate(pieces):
            slot = k % 2
            if k >= 2:
                self._wait(pending[slot], f"dma copy-in piece {k - 2} (slot {slot})")
            n = min(self.half, len(view) - off)
            self.buf.write(slot * self.half, view[off:off + n])
            packet = sdmapkt.copy_linear(window_va(slot * self.half), self.gpu.mc(dst_offset + off), n)
            pending[slot] = self._submit(packet)
        if pieces:
            self._wait(self.seq, f"dma copy-in of {len(view)} bytes at vram 0x{dst_offset:x}")
        self.stats["bytes_in"] += len(view)
        return {"bytes": len(view), "pieces": len(pieces)}

    def copy_out(self, src_offset: int, length: int) -> bytes:
        """VRAM bytes at ``src_offset`` -> host bytes (any length)."""
        self._check(src_offset, length, "dma copy-out")
        out = bytearray(length)
        pieces = list(range(0, length, self.half))
        seqs: list[int] = []

        def issue(k: int) -> None:
            off = pieces[k]
            n = min(self.half, length - off)
            packet = sdmapkt.copy_linear(self.gpu.mc(src_offset + off), window_va((k % 2) * self.half), n)
            seqs.append(self._submit(packet))

        for k in range(min(2, len(pieces))):
            issue(k)
        for k, off in enumerate(pieces):
            self._wait(seqs[k], f"dma copy-out piece {k} of {length} bytes at vram 0x{src_offset:x}")
            n = min(self.half, length - off)
            out[off:off + n] = self.buf.read((k % 2) * self.half, n)
            if k + 2 < len(pieces):
                issue(k + 2)  # the slot is drained: the engine may fill it again
        self.stats["bytes_out"] += length
        return bytes(out)

    def poison(self, length: int, byte: int = 0xA5) -> None:
        """Fill the part of the window a copy-out of ``length`` bytes lands in with ``byte`` (not the fence page), so
        a copy that moves nothing cannot hand back what the buffer held before."""
        self.buf.write(0, bytes([byte]) * min(length, 2 * self.half))

    def close(self) -> None:
        """Free the window (its PTEs stay, pointing at an IOVA nothing maps: a stray access is an iommu fault)."""
        if self.buf is not None:
            self.transport.dma_free(self.buf)
            self.buf = None


def check_copy_engine(transport: Transport) -> AmGpu:
    """Refuse (exit 2), before any register access, a transport without DMA buffers or a function that is no GPU
    whose SDMA0 tinyhw drives; then the :class:`AmGpu` of a board a tinyhw boot brought up (else refuse, hinting
    at ``am boot``)."""
    if not has(transport, DmaBuffers):
        raise Refused(f"dma copies need host dma buffers, which the {transport.name} transport cannot map",
                      hint="bind the device to vfio-pci (tinyhw --device pci:ADDR pci bind --yes) and use vfio:ADDR")
    return booted_gpu(transport)


def booted_gpu(transport: Transport, what: str = "dma copies use") -> AmGpu:
    """The :class:`AmGpu` of a navi3x GPU a tinyhw boot brought up, whose SDMA0 the copy paths drive; anything else
    is refused (exit 2): a function that is no AMD GPU (checked from its identity, before any register access), a
    GC other than 11, a board not booted (hinting at ``am boot``). Read-only."""
    from tinyhw.boot.amd.gpu import AmGpu
    from tinyhw.boot.amd.state import read_state

    ident = transport.identity()
    where = ident.location or transport.name
    if ident.vendor_id != 0x1002 or ident.class_code >> 16 != 0x03:
        raise Refused(f"{where} ({ident.vendor_id:04x}:{ident.device_id:04x}) has no copy engine tinyhw drives "
                      f"({what} sdma0 of an amd navi3x gpu)", hint="use --path bar for this device")
    gpu = AmGpu(transport)
    gc = gpu.ip_version("gc")
    if gc is None or gc[0] != 11:
        shown = ".".join(map(str, gc)) if gc else "unknown"
        raise Refused(f"{where} has gc {shown}; tinyhw drives the sdma of gc 11 (navi3x) only",
                      hint="use --path bar for this device")
    state = read_state(gpu)
    if not (state.tinyhw_booted and state.busy == 0 and state.sos_alive):
        raise Refused(f"{where} is not a gpu tinyhw booted (sdma0 runs firmware the psp loads)",
                      hint="run tinyhw am boot --yes first (tinyhw am info shows the state)")
    return gpu


def open_dma_copier(transport: Transport, *, window: int = DEFAULT_WINDOW, timeout: float = 10.0,
                    gpu: AmGpu | None = None) -> DmaCopier:
    """A ready copier for a booted GPU on a transport with DMA buffers: checks (:func:`check_copy_engine`, unless
    its ``gpu`` is handed in), turns bus mastering on, brings the copy engine up
    (:func:`tinyhw.boot.amd.copyengine.bring_up`), maps the window."""
    from tinyhw.boot.amd.copyengine import bring_up

    gpu = gpu or check_copy_engine(transport)
    set_bus_master(transport, True)  # vfio-pci may hand the function over with bus mastering off
    return DmaCopier(bring_up(gpu), window=window, timeout=timeout)
