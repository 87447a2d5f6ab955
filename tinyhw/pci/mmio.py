"""Mapped BAR windows with register-safe accesses (specs/pci-vfio-remote.md §6.1, §6.3).

A :class:`MappedRegion` wraps a shared ``mmap`` of a BAR (a sysfs ``resourceN`` file or a
VFIO region of the device fd) and implements :class:`~tinyhw.transport.base.BarRegion`:

* ``read32``/``write32`` are single aligned 32-bit loads and stores: an element access of a
  ``memoryview`` cast to ``'I'`` (CPython copies exactly ``sizeof(unsigned int)`` bytes per
  element, which compiles to one 32-bit move). ``struct.pack_into`` or slice assignment do
  not guarantee that: the edu device (real-kernel-harness.md) ignored a ``pack_into`` store
  to its factorial register and honoured the element store. The guest tier proves the width
  on that device; :func:`access_width` states it for the unit tests.
* ``read``/``write`` are block moves, issued as consecutive 32-bit element accesses too, so
  they are also safe on register ranges (never a ``memcpy`` of unspecified width, §6.3 rule 2) —
  except on a prefetchable BAR, which by the PCI definition has no read side effects and tolerates
  merged writes (VRAM, ivshmem's shared memory): there a block is one slice copy (a ``memcpy``),
  which is what makes ``bench copy`` reach the mapping's real bandwidth.
* Writes are posted (§6.3 rule 3): :meth:`MappedRegion.flush` reads a register back.
"""

from __future__ import annotations

import contextlib
import mmap
import os
from collections.abc import Callable
from typing import Any

from tinyhw.transport.base import BarInfo, BarRegion
from tinyhw.transport.counters import Counters

PAGE = mmap.PAGESIZE
ALL_ONES = 0xFFFFFFFF


def access_width(view: memoryview) -> int:
    """Bytes moved by one element access of ``view`` (4 for the register views used here)."""
    return view.itemsize


class MappedRegion(BarRegion):
    """One BAR mapped into this process; ``path`` says which file (``resource0``, ``resource0_wc``, vfio)."""

    def __init__(self, info: BarInfo, fd: int, offset: int, counters: Counters, path: str,
                 write_combining: bool = False, on_close: Callable[[], None] | None = None) -> None:
        super().__init__(info)
        self.path = path
        self.write_combining = write_combining
        self.counters = counters
        length = (info.size + PAGE - 1) & ~(PAGE - 1)
        self._mm = mmap.mmap(fd, length, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ | mmap.PROT_WRITE,
                             offset=offset)
        self._view = memoryview(self._mm).cast("I")
        self._np: Any = None
        self._on_close = on_close

    @property
    def view(self) -> memoryview:
        """The 32-bit element view (index = offset // 4)."""
        return self._view

    def read32(self, offset: int) -> int:
        """One 32-bit load from the mapping at ``offset`` (4-aligned); raises Refused outside the BAR."""
        self.check(offset, 4)
        value = self._view[offset >> 2]
        c = self.counters
        c.reg_reads += 1
        c.tlp_reads += 1
        c.round_trips += 1
        c.bytes_in += 4
        return value

    def write32(self, offset: int, value: int) -> None:
        """One 32-bit store of ``value`` into the mapping at ``offset`` (4-aligned); raises Refused outside the BAR."""
        self.check(offset, 4)
        self._view[offset >> 2] = value & ALL_ONES
        c = self.counters
        c.reg_writes += 1
        c.tlp_writes += 1
        c.bytes_out += 4

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes from ``offset``: one block copy on a prefetchable BAR, else one 32-bit load per dword (both
        4-aligned)."""
        self.check(offset, length)
        v = self._view
        first = offset >> 2
        c = self.counters
        c.reg_reads += length >> 2
        c.tlp_reads += length >> 2
        c.round_trips += length >> 2
        c.bytes_in += length
        if self.info.prefetchable:  # memory without read side effects: one copy
            return self._bytes()[offset:offset + length].tobytes()
        words = [v[i] for i in range(first, first + (length >> 2))]
        return b"".join(w.to_bytes(4, "little") for w in words)

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset``: one block copy on a prefetchable BAR (merged writes allowed), else one 32-bit
        store per dword."""
        self.check(offset, len(data))
        v = self._view
        first = offset >> 2
        if self.info.prefetchable:  # merged writes are allowed: one copy
            import numpy as np

            self._bytes()[offset:offset + len(data)] = np.frombuffer(data, dtype=np.uint8)
        else:
            for i in range(len(data) >> 2):
                v[first + i] = int.from_bytes(data[4 * i:4 * i + 4], "little")
        c = self.counters
        c.reg_writes += len(data) >> 2
        c.tlp_writes += len(data) >> 2
        c.bytes_out += len(data)

    def _bytes(self) -> Any:
        """The mapping as a numpy byte array (its copy loops are the fastest way to move memory from Python;
        numpy is imported on the first block copy of a prefetchable BAR only)."""
        if self._np is None:
            import numpy as np

            self._np = np.frombuffer(self._mm, dtype=np.uint8)
        return self._np

    def flush(self, offset: int = 0) -> int:
        """Read a dword back so earlier posted writes have reached the device (§6.3 rule 3)."""
        return self.read32(offset)

    def close(self) -> None:
        """Unmap the BAR (idempotent); later accesses fail."""
        if self._mm is not None:
            self._np = None  # drop the array's export of the mapping so it can be unmapped
            self._view.release()
            with contextlib.suppress(BufferError):
                self._mm.close()
            self._mm = None  # type: ignore[assignment]
            if self._on_close is not None:
                self._on_close()


def open_readwrite(path: str) -> int:
    """Open a BAR file for a shared read-write mapping (O_SYNC as tinygrad does; harmless for sysfs)."""
    return os.open(path, os.O_RDWR | os.O_SYNC | os.O_CLOEXEC)
