"""Firmware staging in the USB bridge's SRAM: where the PSP reads the images ``am boot`` hands it over USB.

Over the ASM24 bridge a BAR write of VRAM is streamed by the bridge controller at ~1.1 us per dword; the bridge's
512 KiB SRAM takes the same bytes with one 0xF2 arm and one bulk OUT (~700 MB/s). The GPU reaches that SRAM as
system memory at PCIe 0x200000 (specs/asm24-usb-bridge.md §4.5, §7.2: "also the PSP firmware message buffer during
GPU boot", §9.5), and the PSP is an MMHUB client: an address it is handed outside the FB is translated through
MMHUB VMID0 (specs/amd-bringup.md §4.5: over USB the published driver maps its firmware staging buffer, host memory
behind the bridge, in MMHUB VMID0 at VA 0x2000_0000_0000 and hands that VA to the bootloader (C2PMSG_36), LOAD_TOC
and LOAD_IP_FW). So before the first component (§4.2 step 3 before step 5) :class:`SramStage` writes the VMID0
page tables (:func:`tinyhw.boot.amd.copyengine.build_page_tables`: system PTEs naming the bridge's bus addresses, PDEs
and the root holding physical VRAM addresses), programs the MMHUB (:func:`~tinyhw.boot.amd.copyengine.program_hub`)
and flushes its TLB; then every image goes into the SRAM and the PSP gets its VA:

* bootloader components (C2PMSG_36 takes VA >> 20, so each needs a 1 MiB-aligned VA): all distinct components in
  one SRAM image (4 KiB aligned, padded as §5.1 says), the first at VA_BASE (where the SRAM is mapped whole), the
  k-th at VA_BASE + k MiB, a window of system PTEs onto its place in the SRAM; all are written before the first
  command, as on the VRAM path, so an interrupted copy never leaves the bootloader part-way;
* the TOC and the LOAD_IP_FW images: packed in order of use into SRAM images of at most 512 KiB (4 KiB aligned),
  each written in one transfer before its images' commands; the PSP has read an image once its command's fence
  came back, so the next batch may overwrite it.

When the transport has no bridge SRAM (:class:`~tinyhw.transport.abilities.BridgeSram`: ``pci:``, ``vfio:``,
``mock:navi31``, ``remote:``), or an image does not fit the SRAM, the boot keeps the VRAM path (streamed BAR writes
into the layout of :mod:`tinyhw.boot.amd.layout`). Layer 3.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tinyhw.boot.amd import copyengine
from tinyhw.boot.amd.copyengine import SRAM_BUS, SRAM_SIZE, VA_BASE, MiB
from tinyhw.errors import Refused
from tinyhw.transport.abilities import BridgeSram
from tinyhw.transport.base import has, require

if TYPE_CHECKING:
    from tinyhw.boot.amd.gpu import AmGpu

PAGE = 4096
ALIGN = PAGE  # each image's place in an SRAM image
#: how ``am boot`` moves firmware: "auto" (the SRAM when the transport has it), "sram" (refused without it), "bar"
PATHS = ("auto", "sram", "bar")


def _pad_bootloader(data: bytes) -> bytes:
    """A bootloader component as §5.1 places it: 4 zero bytes after the image, then zeros to a 16-byte multiple."""
    return bytes(data) + bytes(4) + bytes(-(len(data) + 4) % 16)


def _up(n: int, a: int = ALIGN) -> int:
    return -(-n // a) * a


def pack(sizes: list[int]) -> list[list[int]]:
    """Indices of images of ``sizes`` grouped, in order, into batches whose 4 KiB-aligned images fit the SRAM; an
    image larger than the SRAM raises ValueError."""
    batches: list[list[int]] = []
    used = SRAM_SIZE
    for i, n in enumerate(sizes):
        if n > SRAM_SIZE:
            raise ValueError(f"an image of 0x{n:x} bytes does not fit the 0x{SRAM_SIZE:x}-byte bridge sram")
        if used + n > SRAM_SIZE:
            batches.append([])
            used = 0
        batches[-1].append(i)
        used += _up(n)
    return batches


class SramStage:
    """Firmware images staged in the bridge SRAM for the PSP, reached through MMHUB VMID0 (see the module)."""

    def __init__(self, gpu: AmGpu) -> None:
        self.gpu = gpu
        self.sram: BridgeSram = require(gpu.transport, BridgeSram, "stage firmware in the usb bridge's sram",
                                        refuse=True, hint="use --firmware-path bar or a device behind the usb bridge")
        self.mapped = False
        self.stats = {"sram_writes": 0, "sram_bytes": 0}

    def _map(self, windows: tuple[tuple[int, int, int], ...] = ()) -> None:
        """MMHUB VMID0 over tinyhw's VA range: the bridge pages (SRAM at VA_BASE) plus ``windows``; TLB flushed."""
        copyengine.build_page_tables(self.gpu, windows)
        copyengine.program_hub(self.gpu, "mmhub.MM")
        copyengine.invalidate(self.gpu, ("mmhub.MM",))
        self.mapped = True

    def _write(self, image: bytes) -> None:
        before = self.gpu.transport.counters.usb_transfers
        self.sram.write_sram(0, image)
        st = self.gpu.copy_stats
        st["bytes"] += len(image)
        st["usb_transfers"] += self.gpu.transport.counters.usb_transfers - before
        st["copies"] += 1
        self.stats["sram_writes"] += 1
        self.stats["sram_bytes"] += len(image)

    def bootloader_fits(self, comps: list[Any]) -> bool:
        """True when the distinct components (padded, 4 KiB aligned) fit the SRAM at once, each with its own 1 MiB VA
        inside the first 1 GiB of the range."""
        distinct = list(dict.fromkeys(bytes(c.data) for c in comps))
        return sum(_up(len(_pad_bootloader(d))) for d in distinct) <= SRAM_SIZE and len(distinct) <= 8

    def bootloader(self, comps: list[Any]) -> dict[str, int]:
        """Write every distinct component into the SRAM in one transfer, map each at its own 1 MiB-aligned VA and
        return the VA (what C2PMSG_36 gets, shifted) by component label."""
        images: dict[bytes, tuple[int, bytes]] = {}  # data -> (sram offset, padded)
        at = 0
        for c in comps:
            d = bytes(c.data)
            if d not in images:
                padded = _pad_bootloader(d)
                images[d] = (at, padded)
                at += _up(len(padded))
        if at > SRAM_SIZE:
            raise Refused(f"psp components of 0x{at:x} bytes do not fit the usb bridge's sram")
        windows, va = [], {}
        for k, (off, padded) in enumerate(images.values()):
            va[off] = VA_BASE + k * MiB
            if k:  # the first lies at VA_BASE, where the whole SRAM is mapped
                windows.append((k * MiB, SRAM_BUS + off, _up(len(padded))))
        self._map(tuple(windows))
        image = bytearray(at)
        for off, padded in images.values():
            image[off:off + len(padded)] = padded
        self._write(bytes(image))
        return {c.label: va[images[bytes(c.data)][0]] for c in comps}

    def place(self, datas: list[bytes]) -> list[int]:
        """Write ``datas`` (fitting the SRAM together, 4 KiB aligned each) into the SRAM in one transfer; their VAs."""
        if not self.mapped:
            self._map()
        image, vas = bytearray(), []
        for d in datas:
            image += bytes(_up(len(image)) - len(image))  # each image 4 KiB aligned; none after the last
            vas.append(VA_BASE + len(image))
            image += d
        if len(image) > SRAM_SIZE:
            raise Refused(f"firmware images of 0x{len(image):x} bytes do not fit the usb bridge's sram")
        self._write(bytes(image))
        return vas


def open_stage(gpu: AmGpu, path: str = "auto") -> SramStage | None:
    """The SRAM staging for ``path`` ("auto": when the transport has the bridge SRAM; "sram": refused, exit 2, without
    it; "bar": None, the VRAM path)."""
    if path not in PATHS:
        raise Refused(f"unknown firmware path {path!r}; known: {', '.join(PATHS)}")
    if path == "bar" or (path == "auto" and not has(gpu.transport, BridgeSram)):
        return None
    return SramStage(gpu)
