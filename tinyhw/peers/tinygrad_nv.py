"""tinygrad's NVIDIA driver on the emulated AD102: the one-layer adapter (tinygrad stays unmodified above it).

tinygrad 0.14.0 boots an Ampere/Ada GPU from user space (``tinygrad/runtime/support/nv/``: ``NVDev``, FWSEC-FRTS,
the booter, GSP-RM and its RPCs) over ``tinygrad.runtime.support.system.PCIDevice``: config space, BAR mappings,
host memory for DMA, a function reset and BAR resizing. :class:`EmulatedNvPciDevice` is that interface over a
tinyhw transport of ``mock:ad102``, written from the interface only (docs/peer-drivers.md, "NVIDIA"):

* config space goes to the transport (``config_read``/``config_write``);
* ``map_bar`` returns :class:`BarView` objects shaped like tinygrad's ``MMIOInterface`` (indexing in elements of
  ``B``/``I``/``Q``, slices as blocks, ``view``) whose every access is a transport BAR access;
* ``alloc_sysmem`` returns host memory the board reaches: a buffer of the emulated IOMMU (``dma=iommu``, the
  addresses are IOVAs) or of the emulated physical RAM (``dma=physical``), wrapped as tinygrad's own
  ``MMIOInterface`` over its host address;
* ``resize_bar`` does what Linux's ``resourceN_resize`` does: the largest size of the function's Resizable BAR
  capability, written to its control register with memory decode off, and a BAR the new size overlaps moved
  above it (the kernel's reassignment);
* ``reset`` is the function-level reset of the transport (sysfs ``reset``).

:func:`boot_nvdev` constructs ``NVDev`` on it exactly as tinygrad's ``PCIIfaceBase`` does (resize the VRAM BAR,
ignoring a failure, then ``NVDev(pci_dev)``); returning means "GSP-RM init done, golden image built".

Firmware: tinygrad fetches the 570.144 files by URL into its download cache and checks each SHA-256 pin.
:func:`provide_firmware` links the files :file:`tests/fetch_firmware.sh` extracted from Debian's
``firmware-nvidia-graphics`` (the same bytes as the pins) at the cache names tinygrad's ``fetch`` looks up, so no
network is used and tinygrad still checks every file.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import struct
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tinyhw.errors import NotAvailableYet, Refused
from tinyhw.transport.abilities import DmaBuffers
from tinyhw.transport.base import Transport, has

_REBAR = 0x15  # PCIe extended capability id of Resizable BAR (specs/pci-vfio-remote.md §3.9)
#: The linux-firmware tree tinygrad 0.14.0 downloads from (specs/nv-bringup.md §9.1).
LINUX_FIRMWARE = ("https://gitlab.com/kernel-firmware/linux-firmware/-/raw/"
                  "0a6871b19abf5d6e024b5d208b101ae53e7fa0de/")
#: (linux-firmware path, sha256 tinygrad pins) of the files its NVDev loads for an AD102 (§9.1).
AD102_FIRMWARE = (
    ("nvidia/ga102/gsp/gsp-570.144.bin", "a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f"),
    ("nvidia/ad102/gsp/booter_load-570.144.bin", "8b293e19b637c5e22c87a2428d1c71bb13e0904e8a88ac6b3c6c1f2679c6e37a"),
    ("nvidia/ad102/gsp/bootloader-570.144.bin", "65ab2e6b6e0fca95365c4deac79a34582abcfeb15b6ae234138f22e7183118a8"),
)


class AccessLog:
    """The last accesses the peer driver made through the adapter (newest last), for a failure's report."""

    def __init__(self, size: int = 64) -> None:
        self.entries: deque[str] = deque(maxlen=size)
        self.count = 0

    def add(self, text: str) -> None:
        """Record one access (``text`` says what, where and the value)."""
        self.count += 1
        self.entries.append(f"#{self.count} {text}")

    def report(self, n: int = 16) -> str:
        """The last ``n`` accesses as lines."""
        tail = list(self.entries)[-n:]
        return "\n".join([f"last {len(tail)} of {self.count} accesses:", *tail])


class BarView:
    """``nbytes`` at ``offset`` of BAR ``bar``, indexed like tinygrad's ``MMIOInterface``: elements of ``fmt``
    (``B``, ``H``, ``I``, ``Q``; little endian), a slice as one block. Every access goes to the transport: one
    ``read32``/``write32`` per dword of an element, a block ``read``/``write`` for a slice; bytes that do not fill
    whole dwords are read, merged and written back."""

    def __init__(self, dev: EmulatedNvPciDevice, bar: int, offset: int, nbytes: int, fmt: str = "B") -> None:
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
            return data if self.fmt == "B" else list(struct.unpack(f"<{n // self.el}{self.fmt}", data))
        return int.from_bytes(data, "little")

    def __setitem__(self, index: int | slice, value: Any) -> None:
        off, n = self._span(index)
        if isinstance(value, int):
            data = (value & ((1 << (8 * self.el)) - 1)).to_bytes(self.el, "little")
        elif isinstance(value, (bytes, bytearray, memoryview)):
            data = bytes(memoryview(value).cast("B"))
        else:
            data = struct.pack(f"<{len(value)}{self.fmt}", *value)
        if isinstance(index, slice) and len(data) > n:
            raise Refused(f"{len(data)} bytes do not fit a slice of {n} bytes")
        self.dev.bar_write(self.bar, self.offset + off, data)


class EmulatedNvPciDevice:
    """tinygrad's ``PCIDevice`` interface over a tinyhw transport of ``mock:ad102`` (see the module docstring)."""

    def __init__(self, transport: Transport, pcibus: str = "0000:01:00.0", log_size: int = 64) -> None:
        self.t, self.pcibus, self.irq_poller, self.lock_fd = transport, pcibus, None, None
        self.log = AccessLog(log_size)
        self._bufs: list[Any] = []
        self._memory: Any = None

    # -- config space --------------------------------------------------------------------------------------------
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
            if hdr & 0xFFFF == _REBAR:
                count = (self.t.config_read(cap + 8, 4) >> 5) & 7
                for i in range(max(count, 1)):
                    ctrl_at = cap + 8 + 8 * i
                    ctrl = self.t.config_read(ctrl_at, 4)
                    if ctrl & 7 != bar_idx:
                        continue
                    enc = (self.t.config_read(cap + 4 + 8 * i, 4) >> 4).bit_length() - 1
                    command = self.t.config_read(4, 2)
                    self.write_config(4, command & ~0x2, 2)
                    self.write_config(ctrl_at, (ctrl & ~0x3F00) | (enc << 8), 4)
                    self._reassign(bar_idx)
                    self.write_config(4, command, 2)
                    self.t._bar_regions.clear()  # regions carry the old sizes and addresses
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
        if len(data) <= 8:
            for i in range(0, len(data), 4):
                value = int.from_bytes(data[i:i + 4], "little")
                self.log.add(f"bar{bar} write {start + i:#x} <- {value:#010x}")
                region.write32(start + i, value)
        else:
            self.log.add(f"bar{bar} block write {start:#x}+{len(data):#x}")
            region.write(start, data)

    # -- host memory -----------------------------------------------------------------------------------------------
    def alloc_sysmem(self, size: int, vaddr: int = 0, contiguous: bool = False) -> tuple[Any, list[int]]:
        """Host memory the board reaches: (tinygrad's ``MMIOInterface`` over it, the bus address of each 4 KiB page).
        ``dma=iommu``: a buffer of the emulated IOMMU; ``dma=physical``: one of the emulated RAM, inside one 2 MiB
        chunk so that it is contiguous on the host as tinygrad's view needs."""
        from tinygrad.runtime.support.hcq import MMIOInterface

        size = (size + 0xFFF) & ~0xFFF
        if has(self.t, DmaBuffers):
            buf = self.t.dma_alloc(size)
            host = (ctypes.c_char * size).from_buffer(buf.mem)
            pages = [buf.iova + i for i in range(0, size, 0x1000)]
        else:
            if self._memory is None:
                self._memory = self.t.physical_memory()  # type: ignore[attr-defined]
            buf = self._memory.dma_alloc(size)
            if len(buf._parts) != 1:
                raise Refused(f"a {size:#x}-byte host buffer spans two 2 MiB chunks of emulated ram")
            chunk, coff, _ = buf._parts[0]
            host = (ctypes.c_char * size).from_buffer(chunk.mem, coff)
            pages = [buf.addr(i) for i in range(0, size, 0x1000)]
        buf.keep = host  # the view's address stays valid while the buffer lives
        self._bufs.append(buf)
        self.log.add(f"sysmem {size:#x} bytes at {pages[0]:#x}")
        return MMIOInterface(ctypes.addressof(host), size), pages

    def reset(self) -> None:
        """A function-level reset (tinygrad writes sysfs ``reset``)."""
        self.log.add("function reset")
        self.t.reset()  # type: ignore[attr-defined]

    def close(self) -> None:
        """Forget the host buffers (the transport frees them when it closes)."""
        for buf in self._bufs:
            buf.keep = None
        self._bufs.clear()


def provide_firmware(firmware_dir: Path) -> list[Path]:
    """Link the AD102 570.144 files under ``firmware_dir`` (the ``nvidia/...`` tree of Debian's
    ``firmware-nvidia-graphics``) into tinygrad's download cache under the names its ``fetch`` gives the pinned
    URLs; every file is checked against tinygrad's pin first. Exit 3 when one is missing or differs."""
    from tinygrad.helpers import _ensure_downloads_dir

    target = _ensure_downloads_dir() / "fw"
    target.mkdir(parents=True, exist_ok=True)
    out = []
    for rel, sha in AD102_FIRMWARE:
        src = Path(firmware_dir) / rel
        if not src.is_file():
            raise NotAvailableYet(f"nvidia firmware {rel} is not under {firmware_dir}",
                                  hint="run tests/fetch_firmware.sh (debian sid's firmware-nvidia-graphics)")
        if hashlib.sha256(src.read_bytes()).hexdigest() != sha:
            raise NotAvailableYet(f"{src} is not the file tinygrad pins (sha256 {sha[:16]}...)")
        dest = target / hashlib.md5((LINUX_FIRMWARE + rel).encode(), usedforsecurity=False).hexdigest()  # fetch's name
        with contextlib.suppress(FileNotFoundError):
            dest.unlink()
        dest.symlink_to(src.resolve())
        out.append(dest)
    return out


def default_firmware_dir() -> Path:
    """Where the 570.144 ``nvidia/`` tree is: $TINYHW_NVIDIA570_FIRMWARE, else
    $TINYHW_FIRMWARE_DIR/nvidia-570 (what tests/fetch_firmware.sh extracts), else /lib/firmware."""
    if os.environ.get("TINYHW_NVIDIA570_FIRMWARE"):
        return Path(os.environ["TINYHW_NVIDIA570_FIRMWARE"])
    if os.environ.get("TINYHW_FIRMWARE_DIR"):
        return Path(os.environ["TINYHW_FIRMWARE_DIR"]) / "nvidia-570"
    return Path("/lib/firmware")


def boot_nvdev(dev: EmulatedNvPciDevice) -> Any:
    """tinygrad's ``NVDev`` on ``dev``, built as its ``PCIIfaceBase`` builds it: the VRAM BAR (1) resized (a failure
    ignored, as tinygrad ignores it), then ``NVDev(dev)``, which boots GSP-RM and builds the golden image."""
    from tinygrad.runtime.support.nv.nvdev import NVDev

    with contextlib.suppress(Exception):
        dev.resize_bar(1)
    return NVDev(dev)


@contextlib.contextmanager
def attached(device: str) -> Iterator[EmulatedNvPciDevice]:
    """Open ``device`` (a ``mock:ad102`` string) and yield the adapter over it; closes both on exit."""
    from tinyhw.connect import open_device

    opened = open_device(device)
    dev = EmulatedNvPciDevice(opened.transport)
    try:
        yield dev
    finally:
        dev.close()
        opened.close()
