"""The part of tinygrad's ``PCIDevice`` interface both peer adapters share: config space, BAR views and BAR resizing
over a tinyhw transport, with a log of the last accesses for a failure's report.

tinygrad 0.14.0's ``tinygrad.runtime.support.system.PCIDevice`` gives its drivers config space
(``read_config``/``write_config``), BAR mappings shaped like its ``MMIOInterface`` (``map_bar``, ``bar_info``),
``resize_bar``, host memory for DMA (``alloc_sysmem``) and a function reset. :class:`PeerPciDevice` implements the
first three over a :class:`~tinyhw.transport.base.Transport`, written from that interface only; each adapter
(:mod:`tinyhw.peers.tinygrad_amd`, :mod:`tinyhw.peers.tinygrad_nv`) adds host memory and reset the way its board
offers them.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

from tinyhw.errors import Refused
from tinyhw.transport.base import Transport

#: PCIe extended capability id of Resizable BAR (PCIe base specification §7.8.6).
REBAR_CAP_ID = 0x15
_COMMAND, _MEMORY_DECODE = 0x04, 0x2


class AccessLog:
    """The last ``size`` accesses the peer driver made through the adapter (newest last), for failure reports."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self.entries: deque[str] = deque(maxlen=size)
        self.count = 0

    def add(self, text: str) -> None:
        """Record one access (``text`` says what, where and the value)."""
        self.count += 1
        self.entries.append(f"#{self.count} {text}")

    def tail(self, n: int = 24) -> list[str]:
        """The last ``n`` accesses, oldest first."""
        return list(self.entries)[-n:]

    def report(self, n: int = 24) -> str:
        """The last ``n`` accesses as lines, for an assertion message."""
        tail = self.tail(n)
        return "\n".join([f"last {len(tail)} of {self.count} accesses:", *tail])


class BarView:
    """A tinygrad ``MMIOInterface``-shaped view of ``nbytes`` at ``offset`` of one BAR of a :class:`PeerPciDevice`.

    Indexing is by elements of ``fmt`` (``B``, ``H``, ``I``, ``Q``, little endian), as tinygrad's views index; an
    element reads or writes the BAR through the device's :meth:`PeerPciDevice.bar_read` / ``bar_write`` (one access
    per dword, 64-bit elements low dword first), a slice as one block. Bytes that do not fill whole dwords are
    merged into the dwords around them (read, modify, write)."""

    def __init__(self, dev: PeerPciDevice, bar: int, offset: int, nbytes: int, fmt: str = "B") -> None:
        self.dev, self.bar, self.offset, self.nbytes, self.fmt = dev, bar, offset, nbytes, fmt
        self.el = struct.calcsize("<" + fmt)

    def __len__(self) -> int:
        return self.nbytes // self.el

    def view(self, offset: int = 0, size: int | None = None, fmt: str | None = None) -> BarView:
        """A view of ``size`` bytes (default: to the end) at ``offset`` bytes into this one."""
        return BarView(self.dev, self.bar, self.offset + offset, self.nbytes - offset if size is None else size,
                       fmt or self.fmt)

    def _span(self, index: int | slice) -> tuple[int, int]:
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self))
            if step != 1:
                raise Refused("a bar view takes contiguous slices only")
            return start * self.el, max(stop - start, 0) * self.el
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"element {index} is outside a view of {len(self)}")
        return index * self.el, self.el

    def __getitem__(self, index: int | slice) -> Any:
        off, n = self._span(index)
        data = self.dev.bar_read(self.bar, self.offset + off, n)
        if isinstance(index, slice):
            return memoryview(data) if self.fmt == "B" else list(struct.unpack(f"<{n // self.el}{self.fmt}", data))
        return int.from_bytes(data, "little")

    def __setitem__(self, index: int | slice, value: Any) -> None:
        off, n = self._span(index)
        if isinstance(value, int):
            data = (value & ((1 << (8 * self.el)) - 1)).to_bytes(self.el, "little")
        elif isinstance(value, bytes):
            data = value
        elif isinstance(value, (bytearray, memoryview)) or hasattr(value, "tobytes"):  # numpy and ctypes arrays
            data = bytes(memoryview(value).cast("B"))
        else:
            data = struct.pack(f"<{len(value)}{self.fmt}", *value)
        if isinstance(index, slice) and len(data) > n:
            raise Refused(f"{len(data)} bytes do not fit a slice of {n} bytes")
        self.dev.bar_write(self.bar, self.offset + off, data)


class PeerPciDevice:
    """Config space, BAR views and BAR resizing of tinygrad's ``PCIDevice`` over the transport ``t``; accesses are
    logged in ``log``. Subclasses say which BARs are register files (:meth:`dword_bar`) and add host memory and
    reset."""

    def __init__(self, transport: Transport, pcibus: str, log: AccessLog) -> None:
        self.t, self.pcibus, self.log = transport, pcibus, log
        self.irq_poller, self.lock_fd = None, None

    def dword_bar(self, bar: int) -> bool:
        """True when BAR ``bar`` is a register file whose writes of any length go as single dword accesses (a
        memory aperture takes a long write as one block). By default no BAR is."""
        return False

    # -- config space ----------------------------------------------------------------------------------------------
    def read_config(self, offset: int, size: int) -> int:
        """``size`` bytes of config space at ``offset``."""
        value = self.t.config_read(offset, size)
        self.log.add(f"cfg read {offset:#x}/{size} -> {value:#x}")
        return value

    def write_config(self, offset: int, value: int, size: int) -> None:
        """Write ``size`` bytes of config space at ``offset``."""
        self.log.add(f"cfg write {offset:#x}/{size} <- {value:#x}")
        self.t.config_write(offset, size, value)

    def write_config_flush(self, offset: int, value: int, size: int) -> None:
        """Write config space, then read it back (the flush a posted write needs)."""
        self.write_config(offset, value, size)
        self.read_config(offset, size)

    # -- BARs ------------------------------------------------------------------------------------------------------
    def bar_info(self, bar_idx: int) -> tuple[int, int]:
        """(bus address, size) of BAR ``bar_idx``."""
        info = {b.index: b for b in self.t.bars()}[bar_idx]
        return info.address, info.size

    def map_bar(self, bar: int, off: int = 0, addr: int = 0, size: int | None = None, fmt: str = "B") -> BarView:
        """A view of BAR ``bar`` from ``off`` (``addr``, a fixed host address for the mapping, means nothing here)."""
        return BarView(self, bar, off, size if size is not None else self.bar_info(bar)[1] - off, fmt)

    def resize_bar(self, bar_idx: int) -> None:
        """Resize BAR ``bar_idx`` to the largest size its Resizable BAR capability lists, as the kernel's
        ``resourceN_resize`` does: memory decode off, the size encoding written, overlapping BARs moved, decode
        restored. Refused when the BAR is not resizable."""
        cap = 0x100
        while cap:
            hdr = self.t.config_read(cap, 4)
            if hdr & 0xFFFF == REBAR_CAP_ID:
                count = (self.t.config_read(cap + 8, 4) >> 5) & 7
                for i in range(max(count, 1)):
                    ctrl_at = cap + 8 + 8 * i
                    ctrl = self.t.config_read(ctrl_at, 4)
                    if ctrl & 7 != bar_idx:
                        continue
                    enc = (self.t.config_read(cap + 4 + 8 * i, 4) >> 4).bit_length() - 1
                    command = self.t.config_read(_COMMAND, 2)
                    self.write_config(_COMMAND, command & ~_MEMORY_DECODE, 2)
                    self.write_config(ctrl_at, (ctrl & ~0x3F00) | (enc << 8), 4)
                    self._reassign(bar_idx)
                    self.write_config(_COMMAND, command, 2)
                    self.t.bars_changed()  # region objects carry the old sizes and addresses
                    self.log.add(f"bar{bar_idx} resized to {self.bar_info(bar_idx)[1]:#x}")
                    return
            cap = hdr >> 20
        raise Refused(f"bar{bar_idx} is not resizable")

    def _reassign(self, resized: int) -> None:
        """Move every 64-bit memory BAR the resized one now overlaps above it (naturally aligned), the way the
        kernel reassigns the function's resources after a resize."""
        bars = {b.index: b for b in self.t.bars()}
        top = bars[resized].address + bars[resized].size
        for b in sorted(bars.values(), key=lambda b: b.address):
            if b.index == resized or b.kind != "memory" or not b.is_64bit or b.size == 0:
                continue
            if b.address < top and bars[resized].address < b.address + b.size:
                new = (top + b.size - 1) & ~(b.size - 1)
                reg = 0x10 + 4 * b.index
                self.write_config(reg, (self.t.config_read(reg, 4) & 0xF) | (new & 0xFFFFFFF0), 4)
                self.write_config(reg + 4, new >> 32, 4)
                top = new + b.size

    def bar_read(self, bar: int, addr: int, n: int) -> bytes:
        """``n`` bytes of BAR ``bar`` at byte ``addr`` (dword accesses; partial dwords are read whole)."""
        region = self.t.bar(bar)
        start, end = addr & ~3, (addr + n + 3) & ~3
        if end - start == 4:
            value = region.read32(start)
            self.log.add(f"bar{bar} read {start:#x} -> {value:#010x}")
            data = value.to_bytes(4, "little")
        elif end - start == 8:
            lo, hi = region.read32(start), region.read32(start + 4)
            self.log.add(f"bar{bar} read {start:#x} -> {lo:#010x} {hi:#010x}")
            data = lo.to_bytes(4, "little") + hi.to_bytes(4, "little")
        else:
            data = region.read(start, end - start)
            self.log.add(f"bar{bar} block read {start:#x}+{end - start:#x}")
        return data[addr - start:addr - start + n]

    def bar_write(self, bar: int, addr: int, data: bytes) -> None:
        """Write ``data`` to BAR ``bar`` at byte ``addr`` (dword accesses; partial dwords read, merged, written)."""
        region = self.t.bar(bar)
        start, end = addr & ~3, (addr + len(data) + 3) & ~3
        if (start, end) != (addr, addr + len(data)):
            whole = bytearray(self.bar_read(bar, start, end - start))
            whole[addr - start:addr - start + len(data)] = data
            data = bytes(whole)
        if len(data) <= 8 or self.dword_bar(bar):
            for i in range(0, len(data), 4):
                value = int.from_bytes(data[i:i + 4], "little")
                self.log.add(f"bar{bar} write {start + i:#x} <- {value:#010x}")
                region.write32(start + i, value)
        else:
            self.log.add(f"bar{bar} block write {start:#x}+{len(data):#x}")
            region.write(start, data)
