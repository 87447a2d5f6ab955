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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tinyhw.errors import NotAvailableYet, Refused
from tinyhw.peers.tinygrad_pci import AccessLog, PeerPciDevice
from tinyhw.transport.abilities import DmaBuffers, PhysicalDma, Resettable
from tinyhw.transport.base import Transport, has, require

#: The linux-firmware tree tinygrad 0.14.0 downloads from (specs/nv-bringup.md §9.1).
LINUX_FIRMWARE = ("https://gitlab.com/kernel-firmware/linux-firmware/-/raw/"
                  "0a6871b19abf5d6e024b5d208b101ae53e7fa0de/")
#: (linux-firmware path, sha256 tinygrad pins) of the files its NVDev loads for an AD102 (§9.1).
AD102_FIRMWARE = (
    ("nvidia/ga102/gsp/gsp-570.144.bin", "a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f"),
    ("nvidia/ad102/gsp/booter_load-570.144.bin", "8b293e19b637c5e22c87a2428d1c71bb13e0904e8a88ac6b3c6c1f2679c6e37a"),
    ("nvidia/ad102/gsp/bootloader-570.144.bin", "65ab2e6b6e0fca95365c4deac79a34582abcfeb15b6ae234138f22e7183118a8"),
)


class EmulatedNvPciDevice(PeerPciDevice):
    """tinygrad's ``PCIDevice`` interface over a tinyhw transport of ``mock:ad102`` (see the module docstring)."""

    def __init__(self, transport: Transport, pcibus: str = "0000:01:00.0", log_size: int = 64) -> None:
        super().__init__(transport, pcibus, AccessLog(log_size))
        self._bufs: list[Any] = []
        self._memory: Any = None

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
                self._memory = require(self.t, PhysicalDma, "give tinygrad host memory").physical_memory()
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
        require(self.t, Resettable, "reset the function").reset()

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
