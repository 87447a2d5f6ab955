"""System-memory structures the GSP boots from: the radix-3 image table and the LibOS / RM arguments.

Spec: specs/nv-bringup.md §11 (five 64 KiB log regions in one 2 MiB buffer, an RMARGS entry for
``GSP_ARGUMENTS_CACHED``, every ``LibosMemoryRegionInitArgument`` back to back in one 4 KiB page whose address
goes to the GSP falcon's MAILBOX0/1; the radix-3 table: level 0, 1, 2 pages then the image pages in one
contiguous allocation, each level listing the next level's page addresses) and §13.1 (the queue
arguments inside ``GSP_ARGUMENTS_CACHED``). Memory comes from the transport's ``DmaBuffers`` ability: host
pages the device reaches at their IOVA, as VFIO maps them.

``GSP_ARGUMENTS_CACHED`` beyond its first 32 bytes (srInitArguments, gpuInstance, bDmemStack, profilerArgs)
is laid out here as 12 + 4 + 8 + 16 bytes (inferred: the spec names the fields and the 72-byte total only).
"""

from __future__ import annotations

import struct
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats.nvgsp import radix3_pages
from tinyhw.transport.abilities import DmaBuffers
from tinyhw.transport.base import Transport

PAGE = 0x1000
LOG_NAMES = ("LOGINIT", "LOGINTR", "LOGRM", "LOGMNOC", "LOGKRNL")
LOG_REGION = 64 << 10
LOG_BUFFER = 2 << 20
KIND_CONTIGUOUS, LOC_SYSMEM = 1, 1
ENTRY = struct.Struct("<QQQBB6x")  # id8, pa, size, kind, loc: 32 bytes


def id8(name: str) -> int:
    """§11: the ASCII name packed big-endian into a u64 (``LOGINIT`` -> 0x004c4f47494e4954)."""
    return int.from_bytes(name.encode("ascii").rjust(8, b"\0"), "big")


class HostMemory:
    """DMA buffers of one boot, freed together (``DmaBuffers`` ability of the transport)."""

    def __init__(self, transport: Transport) -> None:
        if not isinstance(transport, DmaBuffers):
            raise Refused(f"{transport.identity().location}: the {transport.name} transport gives no dma buffers, "
                          "and the gsp's queues and arguments live in host memory",
                          hint="open the gpu through vfio (vfio:ADDR) so tinyhw can map host memory for it")
        self.transport = transport
        self.buffers: list[Any] = []

    def alloc(self, size: int) -> Any:
        """A zeroed host buffer of ``size`` bytes (page rounded) mapped for the device; ``.iova`` is its address."""
        buf = self.transport.dma_alloc(size)
        self.buffers.append(buf)
        return buf

    def release(self) -> None:
        """Unmap and free every buffer (the GSP must not run on after this: reset it first)."""
        for buf in self.buffers:
            self.transport.dma_free(buf)
        self.buffers.clear()


def radix3(mem: HostMemory, image: bytes) -> tuple[Any, dict[str, int]]:
    """Build the radix-3 table for ``image`` (§11) in one allocation; returns it and the page counts. The WPR meta
    points at its first (level-0) page."""
    n = radix3_pages(len(image))
    buf = mem.alloc(n["total"] * PAGE)
    base = buf.iova
    first = {"level0": 0, "level1": n["level0"], "level2": n["level0"] + n["level1"],
             "image": n["level0"] + n["level1"] + n["level2"]}
    for level, nxt in (("level0", "level1"), ("level1", "level2"), ("level2", "image")):
        addrs = [base + (first[nxt] + i) * PAGE for i in range(n[nxt])]
        buf.write(first[level] * PAGE, struct.pack(f"<{len(addrs)}Q", *addrs))
    buf.write(first["image"] * PAGE, image)
    return buf, n


def queue_arguments(shared: int, cmd_offset: int, stat_offset: int, entries: int) -> bytes:
    """``MESSAGE_QUEUE_INIT_ARGUMENTS`` (32 bytes, §11, §13.1)."""
    return struct.pack("<QI4xQQ", shared, entries, cmd_offset, stat_offset)


def rm_arguments(queues: bytes) -> bytes:
    """``GSP_ARGUMENTS_CACHED`` (72 bytes): the queue arguments, srInitArguments zero, gpuInstance 0, bDmemStack
    true, no profiler buffer (layout after byte 32 inferred, see the module docstring)."""
    return queues + bytes(12) + struct.pack("<I", 0) + struct.pack("<B7x", 1) + bytes(16)


def libos_arguments(mem: HostMemory, queues: bytes) -> tuple[Any, Any]:
    """The LibOS argument page (five log regions + RMARGS) and the RM-arguments page; returns (args page, logs).
    The args page's IOVA goes to the GSP's MAILBOX0/1."""
    logs = mem.alloc(LOG_BUFFER)
    rm = mem.alloc(PAGE)
    rm.write(0, rm_arguments(queues))
    page = mem.alloc(PAGE)
    entries = [ENTRY.pack(id8(name), logs.iova + i * LOG_REGION, LOG_REGION, KIND_CONTIGUOUS, LOC_SYSMEM)
               for i, name in enumerate(LOG_NAMES)]
    entries.append(ENTRY.pack(id8("RMARGS"), rm.iova, PAGE, KIND_CONTIGUOUS, LOC_SYSMEM))
    page.write(0, b"".join(entries))
    return page, logs
