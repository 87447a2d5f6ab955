"""``mock:ad102``: an emulated NVIDIA Ada (AD102) board attached directly, as a native PCIe function.

From specs/nv-bringup.md: BAR0 answers PMC_BOOT_0 (0x0) and PMC_BOOT_42 (0xA00) with an AD102's values
(§3), the registers tier 2 of the probe reads (§15: VRAM size 0x1183A4, GFW progress 0x118234 and its
privilege mask 0x118128, WPR2_ADDR_HI 0x1FA828, §4) and the 1 MiB PROM window at 0x300000 (§6.1) serving
the synthetic VBIOS of :mod:`tinyhw.mocks.nvidia.nv_vbios` (invented content in the real layout), all ones beyond
it. Config space: :class:`tinyhw.mocks.common.pcifunc.PciFunction` built from the board's description. Like
the ``pci:`` transport it offers the
:class:`~tinyhw.transport.abilities.DeviceAttributes` (sysfs-style attributes derived from the board:
no kernel driver, power state per the ``power=`` option) and
:class:`~tinyhw.transport.abilities.ReadOnlyPeek` abilities.

The boot path (§7-§13): the GSP and SEC2 falcons (:mod:`tinyhw.mocks.nvidia.nv_falcon`), the FWSEC and booter
black boxes and a scripted GSP-RM (:mod:`tinyhw.mocks.nvidia.nv_gsp`), WPR2_ADDR_LO/HI, BSI_SECURE_SCRATCH_14,
PBUS_BAR1_BLOCK and the GSP doorbell (QUEUE_HEAD[0]); BAR1 is a window onto the first 256 MiB of a 24 GiB
VRAM (sparse, zero where never written); host DMA buffers behind an emulated IOMMU (the ``DmaBuffers``
ability, as VFIO gives; :mod:`tinyhw.mocks.common.iommu`), reached by the GSP and booter only while bus mastering is
on; a function-level reset (the ``Resettable`` ability: falcons, WPR2 and GSP-RM back to power-on, config space
kept, as VFIO and the kernel restore it). WPR2 and whether GSP-RM runs outlive a command in the board-state
file (option ``state=``, default ``~/.cache/tinyhw/ad102-board.json``), written when the board closes or goes
away; VRAM and host memory do not (inferred simplification).

Options: ``strict`` (an uncovered access raises), ``gsp=off|running`` (WPR2 up as after a driver booted
GSP), ``power=d0|d3hot|suspended`` (in D3hot BAR0 reads all ones, as a powered-down function does),
``driver=none|vfio-pci|nvidia|nouveau`` (the binding its attributes report), ``faults=disconnect@N+timeout@N``
(the N-th BAR dword access, 1-based, from the start of the process; a block of k dwords is k accesses),
``gsp-fault=fwsec-error|booter-timeout|queue-silent``.
Every access advances the virtual clock by 1 us; register reads and writes are counted. NVIDIA boards are
reached over native PCIe only, so there is no ``-usb`` variant. The board takes the device lock ``mock:ad102``.
"""

from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

from tinyhw.boards.nvidia import (
    AD102,
    AD102_BOOT_0,
    AD102_BOOT_42,
    AD102_VRAM_MIB,
    PROM_SIZE,
    PROM_WINDOW,
    REG_BOOT_0,
    REG_BOOT_42,
    REG_GFW_PRIV_LEVEL_MASK,
    REG_GFW_PROGRESS,
    REG_VRAM_MIB,
    REG_WPR2_ADDR_HI,
    REG_WPR2_ADDR_LO,
    Ad102Options,
)
from tinyhw.boards.spec import BoardSpec
from tinyhw.errors import DeviceTimeout, Disconnected, Refused, StrictEmulationError, TinyhwError
from tinyhw.formats import boundedjson
from tinyhw.mocks.common.iommu import EmulatedIommu, HostBuffer, link_rate
from tinyhw.mocks.common.pcifunc import PciFunction
from tinyhw.mocks.common.physram import EmulatedRam
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.mocks.nvidia.nv_falcon import COVERED, EmulatedFalcon
from tinyhw.mocks.nvidia.nv_gsp import SecureBoot
from tinyhw.mocks.nvidia.nv_vbios import vbios_image
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo, set_bus_master
from tinyhw.transport.lock import DeviceLock
from tinyhw.transport.physmem import PhysicalMemory

ACCESS_LATENCY = 1e-6
WPR2_RUNNING = 0x00FFFF00  # an invented non-zero WPR2 end address (field val 31:4)
_SPEEDS = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe"}
GSP_BASE, SEC2_BASE = 0x110000, 0x840000
ENGINE_RESET = {0x1103C0: "gsp", 0x8403C0: "sec2"}
REG_BSI_SCRATCH_14, REG_BAR1_BLOCK, REG_GSP_DOORBELL = 0x1180F8, 0x001704, 0x110C00
#: NV_VIRTUAL_FUNCTION_PRIV_MMU_INVALIDATE (specs/nv-bringup.md §5): a write with trigger (bit 31) set invalidates
#: the GPU's TLBs; the emulated MMU caches nothing, so the invalidate completes at once (trigger reads back 0)
REG_MMU_INVALIDATE, MMU_INVALIDATE_TRIGGER = 0xB830B0, 1 << 31
CHUNK = 1 << 16
#: the device lock every mock:ad102 board takes (one emulated AD102 per user, whatever its state file)
LOCK_KEY = "mock:ad102"


def state_kept(path: Path | str) -> bool:
    """Whether board-state file ``path`` holds a state to forget: False when there is none; Refused (exit 2) for a
    path that is not a regular file (a directory, a link, a device node), which :func:`reset_state` never deletes."""
    p = Path(path)
    if not p.exists() and not p.is_symlink():
        return False
    if p.is_symlink() or not p.is_file():
        raise Refused(f"the ad102 board-state file {p} is not a regular file: not deleting it",
                      hint="name another file with state=FILE, or remove it yourself")
    return True


def reset_state(path: Path | str) -> bool:
    """Return the emulated AD102 kept in board-state file ``path`` to power-on (WPR2 down, GSP-RM not running, as
    after a cold boot) by deleting the file; True when there was one. The caller holds the device lock
    (:data:`LOCK_KEY`; ``tinyhw mock reset`` does). A path that is not a regular file is refused and left alone."""
    if not state_kept(path):
        return False
    Path(path).unlink()
    return True


class SparseVram:
    """The board's VRAM: 64 KiB chunks made on first write, zero elsewhere."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.chunks: dict[int, bytearray] = {}
        self.bytes_written = 0

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` (zeros beyond VRAM or where never written)."""
        out = bytearray(length)
        at = 0
        while length > 0:
            k = min(length, CHUNK - offset % CHUNK)
            c = self.chunks.get(offset // CHUNK)
            if c is not None:
                out[at:at + k] = c[offset % CHUNK:offset % CHUNK + k]
            offset, length, at = offset + k, length - k, at + k
        return bytes(out)

    def write(self, offset: int, data: bytes) -> None:
        """Store ``data`` at ``offset`` (writes beyond VRAM are dropped)."""
        self.bytes_written += len(data)
        view = memoryview(data)  # slices without copying the rest each chunk
        while view and offset < self.size:
            k = min(len(view), CHUNK - offset % CHUNK)
            c = self.chunks.setdefault(offset // CHUNK, bytearray(CHUNK))
            c[offset % CHUNK:offset % CHUNK + k] = view[:k]
            offset, view = offset + k, view[k:]


class Ad102Board:
    """Config space, BAR0 registers, the PROM window, the falcons, VRAM and GSP-RM of the emulated AD102.

    It implements :class:`~tinyhw.mocks.common.services.NvServices` for its GPU blocks (the secure-boot component,
    which owns the GSP and SEC2 falcons and the GSP-RM)."""

    def __init__(self, options: Ad102Options, *, lock: bool = True, clock: VirtualClock | None = None) -> None:
        self.options = options
        self._lock = DeviceLock(LOCK_KEY, backend="mock").acquire() if lock else None
        self.cfg = PciFunction(AD102)
        self.rom = vbios_image()
        self.uncovered: list[str] = []
        self.reads: list[tuple[int, int]] = []  # (bar, offset) of every single BAR read, for tests
        self.writes: list[tuple[int, int, int]] = []  # (bar, offset, value) of every BAR dword write, for tests
        self.prom_bytes = 0  # bytes served by block reads of the PROM window
        self._strict = options.strict
        self.vram_size = AD102_VRAM_MIB << 20
        self.vram = SparseVram(self.vram_size)
        self.registers = {
            REG_BOOT_0: AD102_BOOT_0, REG_BOOT_42: AD102_BOOT_42, REG_VRAM_MIB: AD102_VRAM_MIB,
            REG_GFW_PRIV_LEVEL_MASK: 0x1, REG_GFW_PROGRESS: 0xFF, REG_WPR2_ADDR_LO: 0,
            REG_WPR2_ADDR_HI: WPR2_RUNNING if options.gsp == "running" else 0,
            REG_BSI_SCRATCH_14: 0, REG_BAR1_BLOCK: 0,
        }
        self.pci_ids = self.cfg.read32(0)
        self.secure = SecureBoot(self, options.gsp_fault)
        self.gsp, self.sec2 = self.secure.gsp, self.secure.sec2
        self.iommu = EmulatedIommu(clock or VirtualClock(), link_rate(AD102.link_max_speed, AD102.link_max_width),
                                   master=lambda: bool(self.cfg.command & 4))
        # host ram with no iommu (dma=physical); a device that has gone away sends nothing
        self.ram = EmulatedRam(self.iommu.clock, self.iommu.rate,
                               master=lambda: bool(self.cfg.command & 4) and not self.gone)
        self.physical = options.dma == "physical"
        self.tlb_invalidates = 0  # MMU invalidates the host triggered
        self.resets = 0
        self.gone = False
        self._load_state()

    # -- the board-state file ---------------------------------------------------------------------------------
    def _state_doc(self) -> dict[str, Any]:
        return {"wpr2": [self.registers[REG_WPR2_ADDR_LO], self.registers[REG_WPR2_ADDR_HI]],
                "gsp_running": self.gsp.running}

    def _load_state(self) -> None:
        self._saved = self._state_doc()
        path = Path(self.options.state)
        try:   # missing, unreadable, not json, too deep or too large: a cold board, as for an AMD board's board state
            doc = boundedjson.loads(path.read_bytes(), f"the board state file {path}", max_bytes=1 << 20)
        except (OSError, Refused):
            return
        if not isinstance(doc, dict) or self.options.gsp == "running":
            return
        wpr2 = doc.get("wpr2", [0, 0])
        if not (isinstance(wpr2, list) and len(wpr2) == 2
                and all(type(v) is int and 0 <= v <= 0xFFFFFFFF for v in wpr2)):
            return   # a field that no save wrote: a cold board too
        self.registers[REG_WPR2_ADDR_LO], self.registers[REG_WPR2_ADDR_HI] = wpr2
        self.secure.restore(doc.get("gsp_running") is True)
        self._saved = self._state_doc()

    def save_state(self) -> None:
        """Write WPR2 and whether GSP-RM runs to the board-state file (atomically) when they changed in this command;
        never for ``gsp=running`` (that option describes one command's board, not a state to keep)."""
        doc = self._state_doc()
        if doc == self._saved or self.options.gsp == "running":
            return
        p = Path(self.options.state)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
            tmp = p.with_name(p.name + ".tmp")
            tmp.write_text(json.dumps(doc))
            os.replace(tmp, p)
            self._saved = doc
        except OSError:
            pass

    # -- NvServices: what the GPU blocks ask of the board -------------------------------------------------------
    def vram_read(self, offset: int, length: int) -> bytes:
        """FB bytes for a falcon's DMA."""
        return self.vram.read(offset, length)

    def reg_read(self, offset: int) -> int:
        """The stored BAR0 register at ``offset`` (WPR2, BSI scratch, identity; 0 where the board keeps none)."""
        return self.registers.get(offset, 0)

    def reg_write(self, offset: int, value: int) -> None:
        """A block's own update of BAR0 register ``offset`` (FWSEC and the booter raising WPR2); not a host write."""
        self.registers[offset] = value & 0xFFFFFFFF

    def _own_bar1(self, addr: int, length: int) -> int | None:
        """The VRAM offset of bus range ``addr .. addr+length`` when it lies inside the board's own BAR1 window:
        a VRAM-resident boot structure handed to GSP as a BAR1 bus address (specs/nv-bringup.md §5, with a large
        BAR) is decoded by the GPU itself (inferred there: GSP reaches its own VRAM through the BAR)."""
        base, size = self.cfg.bar_addr[1], self.cfg.bar_size[1]
        if base <= addr and addr + length <= base + size and addr - base + length <= self.vram_size:
            return addr - base
        return None

    def bus_read(self, addr: int, length: int) -> bytes:
        """Host memory at bus address ``addr``: through the IOMMU, or physical with ``dma=physical`` (``BusFault``
        when it faults); the board's own BAR1 window reads VRAM."""
        own = self._own_bar1(addr, length)
        if own is not None:
            return self.vram.read(own, length)
        return self.ram.dma_read(addr, length) if self.physical else self.iommu.dma_read(addr, length)

    def bus_write(self, addr: int, data: bytes) -> None:
        """Write host memory at bus address ``addr``: through the IOMMU, or physical with ``dma=physical``
        (``BusFault`` when it faults); the board's own BAR1 window writes VRAM."""
        own = self._own_bar1(addr, len(data))
        if own is not None:
            self.vram.write(own, data)
        elif self.physical:
            self.ram.dma_write(addr, data)
        else:
            self.iommu.dma_write(addr, data)

    def function_reset(self) -> None:
        """A function-level reset: falcons, WPR2, GSP-RM and BSI scratch back to power-on; config space kept."""
        self.resets += 1
        self.secure.power_on()
        self.registers.update({REG_WPR2_ADDR_LO: 0, REG_WPR2_ADDR_HI: 0, REG_BSI_SCRATCH_14: 0, REG_BAR1_BLOCK: 0})

    @property
    def powered(self) -> bool:
        """True while the function is in D0 (option ``power=d0``); in D3hot or suspended every BAR read returns all
        ones."""
        return self.options.power == "d0"

    def _falcon(self, offset: int) -> tuple[EmulatedFalcon, int] | None:
        for base, f in ((GSP_BASE, self.gsp), (SEC2_BASE, self.sec2)):
            if base <= offset < base + 0x2000 and offset - base in COVERED:
                return f, offset - base
        return None

    def mem_read32(self, bar: int, offset: int) -> int:
        """One dword read of ``bar`` at byte ``offset``: BAR0 registers (identity, GFW, VRAM size, WPR2, falcons, BSI
        scratch) or a dword of the PROM window; BAR1 the VRAM window. All ones when powered down or memory decode is
        off. Every read is logged in ``reads``; an offset the model does not cover raises on strict boards, else
        reads 0xBADF5040 and is listed in ``uncovered``."""
        self.reads.append((bar, offset))
        if not self.powered or not self.cfg.command & 2:
            return 0xFFFFFFFF
        if bar == 1:
            return int.from_bytes(self.vram.read(offset, 4), "little")
        if bar == 0:
            if offset in self.registers:
                return self.registers[offset]
            hit = self._falcon(offset)
            if hit is not None:
                return hit[0].read(hit[1])
            if offset in ENGINE_RESET:
                return int((self.gsp if ENGINE_RESET[offset] == "gsp" else self.sec2).in_reset)
            if PROM_WINDOW <= offset < PROM_WINDOW + PROM_SIZE:
                o = offset - PROM_WINDOW
                word = self.rom[o:o + 4]
                return int.from_bytes(word + b"\xff" * (4 - len(word)), "little")
        return self._uncovered(f"bar{bar} read at 0x{offset:x}", 0xBADF5040)

    def prom_block(self, offset: int, length: int) -> bytes | None:
        """A block read lying wholly inside the PROM window (what a loop of dword reads would return); None
        when it does not, or the board does not decode, so the caller falls back to dword reads."""
        if not (self.powered and self.cfg.command & 2 and offset >= PROM_WINDOW
                and offset + length <= PROM_WINDOW + PROM_SIZE):
            return None
        o = offset - PROM_WINDOW
        self.prom_bytes += length
        data = self.rom[o:o + length]
        return data + b"\xff" * (length - len(data))

    def mem_write32(self, bar: int, offset: int, value: int) -> None:
        """A BAR dword write: BAR1 stores into VRAM; BAR0 the falcons' registers, their engine resets, BSI scratch 14,
        PBUS_BAR1_BLOCK and the GSP doorbell; anything else is an uncovered access. Logged in ``writes``."""
        self.writes.append((bar, offset, value))
        if not self.powered or not self.cfg.command & 2:
            return
        if bar == 1:
            self.vram.write(offset, value.to_bytes(4, "little"))
            return
        if bar == 0:
            hit = self._falcon(offset)
            if hit is not None:
                hit[0].write(hit[1], value)
                if hit[0] is self.gsp:
                    self.secure.on_gsp_register_write(hit[1], value)
                return
            if offset in ENGINE_RESET:
                (self.gsp if ENGINE_RESET[offset] == "gsp" else self.sec2).engine_reset(bool(value & 1))
                return
            if offset in (REG_BSI_SCRATCH_14, REG_BAR1_BLOCK):
                self.registers[offset] = value
                return
            if offset == REG_MMU_INVALIDATE:
                self.registers[offset] = value & ~MMU_INVALIDATE_TRIGGER
                self.tlb_invalidates += bool(value & MMU_INVALIDATE_TRIGGER)
                return
            if offset == REG_GSP_DOORBELL:
                self.secure.doorbell()
                return
        self._uncovered(f"bar{bar} write of 0x{value:08x} at 0x{offset:x}", 0)

    def block_write(self, bar: int, offset: int, data: bytes) -> bool:
        """A block write into the BAR1 VRAM window served at once (the same dword writes); False elsewhere."""
        if bar != 1 or not (self.powered and self.cfg.command & 2):
            return False
        self.vram.write(offset, data)
        self.writes.append((bar, offset, -len(data)))
        return True

    def _uncovered(self, what: str, value: int) -> int:
        if self._strict:
            raise StrictEmulationError(f"the emulated ad102 does not model {what}",
                                       hint="run without strict to list such accesses instead")
        if what not in self.uncovered:
            self.uncovered.append(what)
        return value

    def attributes(self) -> dict[str, str]:
        """What sysfs would show for the function (kernel-cached, no device access)."""
        c = self.cfg
        ident = c.read32(0)
        rev_class = c.read32(8)
        sub = c.read32(0x2C)
        lines = []
        for idx in range(7):
            res = next((r for r in c.resources() if r[0] == idx), None)
            if res is None:
                lines.append("0x0000000000000000 0x0000000000000000 0x0000000000000000")
                continue
            _, addr, size, fl = res
            flags = (0x100 if fl & 1 else 0x200) | (0x2000 if fl & 8 else 0) | (0x100000 if fl & 4 else 0)
            lines.append(f"0x{addr:016x} 0x{addr + size - 1:016x} 0x{flags:016x}")
        power = {"d0": ("D0", "active"), "d3hot": ("D3hot", "active"), "suspended": ("D3hot", "suspended")}
        state, runtime = power[self.options.power]
        return {
            "vendor": f"0x{ident & 0xFFFF:04x}", "device": f"0x{ident >> 16:04x}",
            "subsystem_vendor": f"0x{sub & 0xFFFF:04x}", "subsystem_device": f"0x{sub >> 16:04x}",
            "class": f"0x{rev_class >> 8:06x}", "revision": f"0x{rev_class & 0xFF:02x}", "resource": "\n".join(lines),
            "numa_node": "-1", "current_link_speed": _SPEEDS[AD102.link_max_speed],
            "max_link_speed": _SPEEDS[AD102.link_max_speed], "current_link_width": str(AD102.link_max_width),
            "max_link_width": str(AD102.link_max_width), "power_state": state,
            "power/runtime_status": runtime,
            **({"driver": self.options.driver} if self.options.driver != "none" else {}),
        }

    def close(self) -> None:
        """Save the board state and release the device lock taken when the board was built; safe to call twice."""
        if self._lock is not None:
            self.save_state()
            self._lock.release()
            self._lock = None


class Ad102Function(Transport):
    """The emulated AD102 reached with no bridge in between (transport name ``mock``), without host memory: see
    :class:`Ad102Transport` (an IOMMU, as ``vfio:``) and :class:`Ad102PhysicalTransport` (physical addresses, as
    ``pci:``)."""

    name = "mock"
    emulated = True

    def __init__(self, options: Ad102Options, *, lock: bool = True) -> None:
        clock = VirtualClock()
        super().__init__(clock)
        self.vclock = clock
        self.board = Ad102Board(options, lock=lock, clock=clock)
        self.accesses = 0
        disconnects = options.faults.at("disconnect")
        self._disconnect_at = min(disconnects) if disconnects else None
        self._timeouts = sorted(options.faults.at("timeout"))
        self._memories: list[PhysicalMemory] = []

    # -- faults ---------------------------------------------------------------------------------------------------
    def _count(self, bar: int, offset: int, n: int = 1) -> None:
        """Count ``n`` BAR dword accesses; raise when a planned fault falls among them or the board is gone."""
        self._check_gone()
        first = self.accesses + 1
        self.accesses += n
        cut = self._disconnect_at
        if cut is not None and first <= cut <= self.accesses:
            self.board.gone = True
            self.board.save_state()
            raise Disconnected(f"the emulated ad102 went away at bar access {cut} (bar{bar} offset "
                               f"0x{offset + 4 * (cut - first):x})", hint="reconnect the board and rerun the command")
        hit = next((k for k in self._timeouts if first <= k <= self.accesses), None)
        if hit is not None:
            raise DeviceTimeout(f"bar access {hit} (bar{bar} offset 0x{offset + 4 * (hit - first):x}) timed out",
                                hint="check the board and rerun the command")

    def _check_gone(self) -> None:
        if self.board.gone:
            raise Disconnected("the emulated ad102 has gone away", hint="reconnect the board and rerun the command")

    # -- abilities: Resettable ------------------------------------------------------------------------------------
    def reset(self) -> None:
        """A function-level reset (as VFIO_DEVICE_RESET): falcons, WPR2 and GSP-RM back to power-on."""
        self._check_gone()
        self.vclock.advance(ACCESS_LATENCY)
        self.board.function_reset()

    # -- config space ------------------------------------------------------------------------------------------
    def config_read(self, offset: int, size: int = 4) -> int:
        """Read ``size`` (1, 2 or 4) bytes of config space at ``offset`` (naturally aligned, below 0x1000); one round
        trip of 1 us of virtual time. Refused for a misaligned or out-of-range access."""
        if size not in (1, 2, 4) or offset % size or not 0 <= offset <= 0x1000 - size:
            raise Refused(f"config access of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000")
        self._check_gone()
        self.vclock.advance(ACCESS_LATENCY)
        self.counters.round_trips += 1
        self.counters.bytes_in += size
        return (self.board.cfg.read32(offset & ~3) >> (8 * (offset & 3))) & ((1 << (8 * size)) - 1)

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Write the low ``size`` bytes of ``value`` to config space at ``offset`` (only those byte lanes change); 1 us
        of virtual time. Refused for a misaligned or out-of-range access."""
        if size not in (1, 2, 4) or offset % size or not 0 <= offset <= 0x1000 - size:
            raise Refused(f"config access of {size} bytes at 0x{offset:x} is not naturally aligned inside 0x1000")
        self._check_gone()
        self.vclock.advance(ACCESS_LATENCY)
        self.counters.bytes_out += size
        shift = 8 * (offset & 3)
        self.board.cfg.write32(offset & ~3, (value & ((1 << (8 * size)) - 1)) << shift,
                               ((1 << size) - 1) << (offset & 3))

    # -- BARs ---------------------------------------------------------------------------------------------------
    def bars(self) -> list[BarInfo]:
        """The function's BARs as config space places them now (address, size, I/O or memory, 64-bit, prefetchable)."""
        out = []
        for index, address, size, flags in self.board.cfg.resources():
            io = bool(flags & 1)
            out.append(BarInfo(index, address, size, "io" if io else "memory", not io and bool(flags & 8),
                               not io and bool(flags & 4)))
        return out

    def _make_region(self, info: BarInfo) -> BarRegion:
        return _Region(info, self)

    def _read(self, bar: int, offset: int) -> int:
        self._count(bar, offset)
        self.vclock.advance(ACCESS_LATENCY)
        c = self.counters
        c.reg_reads += 1
        c.tlp_reads += 1
        c.round_trips += 1
        c.bytes_in += 4
        return self.board.mem_read32(bar, offset)

    # -- abilities: DeviceAttributes, ReadOnlyPeek --------------------------------------------------------------
    def attribute(self, name: str) -> str | None:
        """The sysfs attribute ``name`` of the function (``vendor``, ``resource``, ``power_state``, ...) as the kernel
        would cache it, or None; no device access."""
        return self.board.attributes().get(name)

    def driver_files(self) -> dict[str, str]:
        """The driver-owned sysfs files of the function: none, no driver binds an emulated board."""
        return {}  # no driver owns the emulated board

    def peek32(self, bar: int, offset: int) -> int:
        """One read-only dword of memory BAR ``bar`` at ``offset`` (dword aligned, inside the BAR), counted like any BAR
        read; Refused otherwise."""
        info = next((b for b in self.bars() if b.index == bar and b.kind == "memory"), None)
        if info is None or offset % 4 or not 0 <= offset < info.size:
            raise Refused(f"bar{bar} offset 0x{offset:x} is not a dword inside a memory bar")
        return self._read(bar, offset)

    # -- identity, info, lifetime -------------------------------------------------------------------------------
    def identity(self) -> Identity:
        """Vendor, device, revision, class and subsystem ids read from config space, named ``mock:ad102``."""
        ids = self.config_read(0x00)
        rev_class = self.config_read(0x08)
        sub = self.config_read(0x2C)
        return Identity(ids & 0xFFFF, ids >> 16, rev_class & 0xFF, rev_class >> 8, sub & 0xFFFF, sub >> 16,
                        "mock:ad102")

    def info(self) -> TransportInfo:
        """What the transport is: emulated ``mock``, board ``ad102``, attached directly."""
        return TransportInfo(transport="mock", emulated=True, extra={"board": "ad102", "attach": "direct"})

    def close(self) -> None:
        """Close the board (releases its device lock)."""
        self.board.close()


class _Region(BarRegion):
    def __init__(self, info: BarInfo, t: Ad102Transport) -> None:
        super().__init__(info)
        self._t = t

    def read32(self, offset: int) -> int:
        self.check(offset, 4)
        return self._t._read(self.info.index, offset)

    def write32(self, offset: int, value: int) -> None:
        self.check(offset, 4)
        self._t._count(self.info.index, offset)
        self._t.vclock.advance(ACCESS_LATENCY)
        self._t.counters.reg_writes += 1
        self._t.counters.bytes_out += 4
        self._t.board.mem_write32(self.info.index, offset, value & 0xFFFFFFFF)

    def read(self, offset: int, length: int) -> bytes:
        self.check(offset, length)
        t = self._t
        block = t.board.prom_block(offset, length) if self.info.index == 0 else None
        if block is not None:  # the same dword reads, counted as such, served at once
            n = length // 4
            t._count(self.info.index, offset, n)
            t.vclock.advance(ACCESS_LATENCY * n)
            c = t.counters
            c.reg_reads += n
            c.tlp_reads += n
            c.round_trips += n
            c.bytes_in += length
            return block
        return b"".join(self._t._read(self.info.index, o).to_bytes(4, "little")
                        for o in range(offset, offset + length, 4))

    def write(self, offset: int, data: bytes) -> None:
        self.check(offset, len(data))
        t = self._t
        if self.info.index == 1 and len(data) % 4 == 0 and t.board.powered and t.board.cfg.command & 2:
            n = len(data) // 4  # the same dword writes, counted as such, stored at once
            t._count(1, offset, n)
            t.vclock.advance(ACCESS_LATENCY * n)
            t.counters.reg_writes += n
            t.counters.tlp_writes += n
            t.counters.bytes_out += len(data)
            t.board.block_write(1, offset, data)
            return
        for i in range(0, len(data), 4):
            self.write32(offset + i, int.from_bytes(data[i:i + 4], "little"))


class Ad102Transport(Ad102Function):
    """The emulated AD102 with its host memory behind an emulated IOMMU, at IOVAs (what ``vfio:`` gives)."""

    # -- ability: DmaBuffers ----------------------------------------------------------------------------
    def dma_alloc(self, size: int, iova: int | None = None) -> HostBuffer:
        """Host memory visible to the emulated gpu at ``iova`` (the next free one from 1 MiB when None)."""
        self._check_gone()
        buf = HostBuffer(size)
        self.board.iommu.map(buf, iova)
        return buf

    def dma_free(self, buf: HostBuffer) -> None:
        """Unmap host buffer ``buf`` from the emulated IOMMU and free it."""
        self.board.iommu.unmap(buf)
        buf.close()


class Ad102PhysicalTransport(Ad102Function):
    """The emulated AD102 with no IOMMU: host memory at (invented) physical addresses of emulated RAM, the way a
    ``pci:`` function reaches it (option ``dma=physical``)."""

    def physical_memory(self) -> PhysicalMemory:
        """Physical-address DMA buffers over the board's emulated RAM; closing them turns bus mastering off first,
        as the ``pci:`` transport does."""
        self._check_gone()
        memory = PhysicalMemory(self.board.ram, quiesce=lambda: set_bus_master(self, False))
        self._memories.append(memory)
        return memory

    def close(self) -> None:
        """Free host memory (bus mastering off first), then close the board."""
        for memory in self._memories:
            with contextlib.suppress(TinyhwError):
                memory.close()
        self._memories.clear()
        super().close()


def ad102_transport(options: Ad102Options, *, lock: bool = True, spec: BoardSpec = AD102) -> Ad102Function:
    """The emulated AD102 (described by ``spec``) as its ``dma=`` option asks: :class:`Ad102Transport` (iommu) or
    :class:`Ad102PhysicalTransport` (physical)."""
    assert spec == AD102, f"{spec.name}: the emulated ada board models the ad102 only"
    if options.dma == "physical":
        return Ad102PhysicalTransport(options, lock=lock)
    return Ad102Transport(options, lock=lock)
