"""System-memory structures the GSP boots from: the radix-3 image table and the LibOS / RM arguments.

Spec: specs/nv-bringup.md §11 (five 64 KiB log regions in one 2 MiB buffer, an RMARGS entry for
``GSP_ARGUMENTS_CACHED``, every ``LibosMemoryRegionInitArgument`` back to back in one 4 KiB page whose address
goes to the GSP falcon's MAILBOX0/1; the radix-3 table: level 0, 1, 2 pages then the image pages in one
contiguous allocation, each level listing the next level's page addresses) and §13.1 (the queue
arguments inside ``GSP_ARGUMENTS_CACHED``). Memory comes from the transport's ``DmaBuffers`` ability (host
pages the device reaches at their IOVA, as VFIO maps them) or, on ``pci:``, from physical-address huge pages
(:mod:`tinyhw.transport.physmem`): every address handed to the GSP is a buffer's ``addr(offset)``, so the
page-listing structures (the radix-3 levels, the queues' page table) work on scatter lists too.

``MESSAGE_QUEUE_INIT_ARGUMENTS`` and ``GSP_ARGUMENTS_CACHED`` differ between GSP-RM branches (535: 48 and 80
bytes, lockless-queue offsets and no bDmemStack; 570: 32 and 72 bytes, as the spec gives them): their offsets
come from :mod:`~tinyhw.boot.nv.structs`, derived in docs/nv-gsp-layouts.md from NVIDIA's published headers.
``LibosMemoryRegionInitArgument`` (:data:`ENTRY`) is the same 32 bytes in both.
"""

from __future__ import annotations

import contextlib
import struct
from typing import Any

from tinyhw.boot.nv.structs import GspLayouts
from tinyhw.errors import OperationFailed, Refused, TinyhwError
from tinyhw.formats.nvgsp import radix3_pages
from tinyhw.transport.abilities import DmaBuffers
from tinyhw.transport.base import Transport, has

PAGE = 0x1000
LOG_NAMES = ("LOGINIT", "LOGINTR", "LOGRM", "LOGMNOC", "LOGKRNL")
LOG_REGION = 64 << 10
LOG_BUFFER = 2 << 20
KIND_CONTIGUOUS, LOC_SYSMEM = 1, 1
ENTRY = struct.Struct("<QQQBB6x")  # LibosMemoryRegionInitArgument: id8, pa, size u64, kind u8 @24, loc u8 @25


def id8(name: str) -> int:
    """§11: the ASCII name packed big-endian into a u64 (``LOGINIT`` -> 0x004c4f47494e4954)."""
    return int.from_bytes(name.encode("ascii").rjust(8, b"\0"), "big")


class HostMemory:
    """DMA buffers of one boot, freed together: from the transport (``DmaBuffers``: IOVAs, as VFIO maps them) or from
    ``source``, the physical-address allocator a ``pci:`` transport gave (``PhysicalDma``, checked by the preflight);
    every buffer has ``addr(offset)``, the device address of a byte, and ``contiguous``."""

    def __init__(self, transport: Transport, source: Any = None) -> None:
        if source is None:
            if not has(transport, DmaBuffers):
                raise Refused(f"{transport.identity().location}: the {transport.name} transport gives no dma "
                              "buffers, and the gsp's queues and arguments live in host memory",
                              hint="open the gpu through vfio (vfio:ADDR) so tinyhw can map host memory for it")
            source = transport
        self.transport = transport
        self.source = source
        self.physical = source is not transport
        self.buffers: list[Any] = []
        self.reserved = 0

    def reserve(self, sizes: list[int]) -> int:
        """Before the first write to the gpu: map every chunk the allocations ``sizes`` need when memory is physical
        (running out of huge pages is then found before anything changed); returns the chunks mapped (0 for IOVAs)."""
        if self.physical:
            self.reserved = self.source.reserve(sizes)
        return self.reserved

    def alloc(self, size: int, *, contiguous: bool = False, what: str = "buffer") -> Any:
        """A zeroed host buffer of ``size`` bytes (page rounded) the device reaches; ``contiguous`` refuses a scatter
        list (the device is handed one address for all of it)."""
        buf = self.source.dma_alloc(size)
        self.buffers.append(buf)
        if contiguous and not getattr(buf, "contiguous", True):
            raise OperationFailed(f"the {what} ({size} bytes) is not contiguous in host memory",
                                  hint="the device is given one address for it")
        return buf

    def release(self) -> None:
        """Unmap and free every buffer; physical memory turns the function's bus mastering off first (the GSP must
        not run on after this: reset it before use)."""
        for buf in self.buffers:
            self.source.dma_free(buf)
        self.buffers.clear()
        if self.physical:
            with contextlib.suppress(TinyhwError):  # a gone device cannot be quiesced; its pages are freed all the same
                self.source.close()


def host_sizes(image: int, bootloader: int, shared: int) -> list[int]:
    """The sizes one boot allocates, in its order (radix-3 table and image, bootloader, signature, queues, logs,
    RM arguments, LibOS arguments, WPR meta), for :meth:`HostMemory.reserve`."""
    from tinyhw.boot.nv import layout

    return [radix3_pages(image)["total"] * PAGE, bootloader, layout.SIGNATURE_SIZE, shared, LOG_BUFFER, PAGE, PAGE,
            layout.WPR_META_SIZE]


def radix3(mem: HostMemory, image: bytes) -> tuple[Any, dict[str, int]]:
    """Build the radix-3 table for ``image`` (§11) in one allocation; returns it and the page counts. The WPR meta
    points at its first (level-0) page."""
    n = radix3_pages(len(image))
    buf = mem.alloc(n["total"] * PAGE, what="radix-3 table")  # each level lists pages: a scatter list is fine
    first = {"level0": 0, "level1": n["level0"], "level2": n["level0"] + n["level1"],
             "image": n["level0"] + n["level1"] + n["level2"]}
    for level, nxt in (("level0", "level1"), ("level1", "level2"), ("level2", "image")):
        addrs = [buf.addr((first[nxt] + i) * PAGE) for i in range(n[nxt])]
        buf.write(first[level] * PAGE, struct.pack(f"<{len(addrs)}Q", *addrs))
    buf.write(first["image"] * PAGE, image)
    return buf, n


def queue_arguments(shared: int, cmd_offset: int, stat_offset: int, entries: int, abi: GspLayouts) -> bytes:
    """``MESSAGE_QUEUE_INIT_ARGUMENTS``: sharedMemPhysAddr u64 @0, pageTableEntryCount u32 @8, cmdQueueOffset u64
    @16, statQueueOffset u64 @24; on 535 the lockless queue offsets @32 and @40 stay 0 (no lockless queues)."""
    out = bytearray(abi.queue_args_size)
    struct.pack_into("<QI4xQQ", out, 0, shared, entries, cmd_offset, stat_offset)
    return bytes(out)


def rm_arguments(queues: bytes, abi: GspLayouts) -> bytes:
    """``GSP_ARGUMENTS_CACHED`` for a cold boot: the queue arguments, srInitArguments (oldLevel, flags,
    bInPMTransition) zero, gpuInstance 0, bDmemStack true where the branch has it (570), no profiler buffer."""
    if len(queues) != abi.queue_args_size:
        raise ValueError(f"{len(queues)} bytes of queue arguments, the {abi.branch} branch's are "
                         f"{abi.queue_args_size}")
    out = bytearray(abi.rm_args_size)
    out[:len(queues)] = queues
    struct.pack_into("<IIB", out, abi.sr_init_at, 0, 0, 0)
    struct.pack_into("<I", out, abi.gpu_instance_at, 0)
    if abi.dmem_stack_at is not None:
        out[abi.dmem_stack_at] = 1
    struct.pack_into("<QQ", out, abi.profiler_at, 0, 0)
    return bytes(out)


def libos_arguments(mem: HostMemory, queues: bytes, abi: GspLayouts) -> tuple[Any, Any]:
    """The LibOS argument page (five log regions + RMARGS) and the RM-arguments page; returns (args page, logs).
    The args page's IOVA goes to the GSP's MAILBOX0/1."""
    logs = mem.alloc(LOG_BUFFER, contiguous=True, what="log buffer")
    rm = mem.alloc(PAGE)
    rm.write(0, rm_arguments(queues, abi))
    page = mem.alloc(PAGE)
    entries = [ENTRY.pack(id8(name), logs.addr(i * LOG_REGION), LOG_REGION, KIND_CONTIGUOUS, LOC_SYSMEM)
               for i, name in enumerate(LOG_NAMES)]
    entries.append(ENTRY.pack(id8("RMARGS"), rm.addr(0), PAGE, KIND_CONTIGUOUS, LOC_SYSMEM))
    page.write(0, b"".join(entries))
    return page, logs
