"""One AMD GPU as the boot code sees it: discovered registers, VRAM access, MC addresses, the clock.

Spec: specs/amd-bringup.md §1.2 (RCC_CONFIG_MEMSIZE, RCC_IOV_FUNC_IDENTIFIER, the MM_INDEX/MM_DATA
window), §2 (IP discovery, read through :func:`tinyhw.regs.discovery.asic_from_device`), §3 (registers
placed with the discovered bases), §4.5 (MC address of a VRAM byte = FB base + offset, FB base from
MMMC_VM_FB_LOCATION_BASE bits 23:0 << 24; HDP flush through BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL).

Layer 3: handed a transport, never constructing one. VRAM below the BAR0 size is written with the
transport's block writes (one streamed transfer per MiB over the USB bridge); VRAM above it only
through the indirect window, dword by dword.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyhw.errors import Refused
from tinyhw.regs import Mmio
from tinyhw.regs.discovery import asic_from_device
from tinyhw.regs.fixed import MM_DATA, MM_INDEX, MM_INDEX_HI, fixed

if TYPE_CHECKING:
    from collections.abc import Callable

    from tinyhw.regs.asic import Asic
    from tinyhw.transport.base import Transport

VRAM_BAR = 0

#: register names the boot code uses (block.REGISTER as the generated databases spell them)
PSP_BL_CMD = "mp0.MP0_SMN_C2PMSG_35"  # bootloader command / status, bit31 ready
PSP_BL_ADDR = "mp0.MP0_SMN_C2PMSG_36"  # bootloader payload MC address >> 20
PSP_CTRL = "mp0.MP0_SMN_C2PMSG_64"  # sOS control command / response
PSP_WPTR = "mp0.MP0_SMN_C2PMSG_67"  # KM ring write pointer (dwords)
PSP_RING_LO = "mp0.MP0_SMN_C2PMSG_69"
PSP_RING_HI = "mp0.MP0_SMN_C2PMSG_70"
PSP_RING_SIZE = "mp0.MP0_SMN_C2PMSG_71"
PSP_SOL = "mp0.MP0_SMN_C2PMSG_81"  # sOS sign of life
SMU_MSG = "mp1.MP1_SMN_C2PMSG_66"
SMU_ARG = "mp1.MP1_SMN_C2PMSG_82"
SMU_RESP = "mp1.MP1_SMN_C2PMSG_90"
SMU_DBG_ARG = "mp1.MP1_SMN_C2PMSG_53"
SMU_DBG_RESP = "mp1.MP1_SMN_C2PMSG_54"
SMU_DBG_MSG = "mp1.MP1_SMN_C2PMSG_75"
SCRATCH5, SCRATCH6, SCRATCH7 = "gc.SCRATCH_REG5", "gc.SCRATCH_REG6", "gc.SCRATCH_REG7"
CP_STAT = "gc.CP_STAT"
BOOTLOAD_COMPLETE = "gc.RLC_RLCS_BOOTLOAD_STATUS.BOOTLOAD_COMPLETE"
VM_FAULT = "gc.GCVM_L2_PROTECTION_FAULT_STATUS"
FB_BASE = "mmhub.MMMC_VM_FB_LOCATION_BASE"
IOV_FUNC = "nbio.RCC_DEV0_EPF0_RCC_IOV_FUNC_IDENTIFIER"
HDP_REMAP = "nbio.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL"


class AmGpu:
    """The registers and VRAM of one AMD GPU reached through ``transport``.

    Construction reads the IP discovery table (read-only). ``warn`` receives one line when the
    table cannot be used and the profile's fact table places the registers instead.
    """

    def __init__(self, transport: Transport, warn: Callable[[str], None] | None = None) -> None:
        self.transport = transport
        self.clock = transport.clock
        self.asic: Asic = asic_from_device(transport, warn=warn)
        self.discovery = self.asic.discovery
        self.regs = Mmio(transport, self.asic)
        self.mmio = transport.bar(self.asic.bar)
        bars = {b.index: b for b in transport.bars()}
        self.bar0_size = bars[VRAM_BAR].size if VRAM_BAR in bars else 0
        self.vram_mib = getattr(self.discovery, "vram_mib", 0) or self._memsize()
        self.vram_size = self.vram_mib << 20
        self._fb_base: int | None = None
        self._hdp: int | None | bool = False
        #: what the firmware copies cost (bytes, transfers), for ``--json`` and the bench
        self.copy_stats = {"bytes": 0, "usb_transfers": 0, "copies": 0}

    def _memsize(self) -> int:
        from tinyhw.regs.fixed import CONFIG_MEMSIZE

        return self.mmio.read32(fixed(CONFIG_MEMSIZE, self.asic).offset or 0)

    # -- registers ---------------------------------------------------------------------------------------
    def rd(self, name: str) -> int:
        """Read the register ``name`` (``block.REG``, looked up in the ASIC's register database)."""
        return self.regs.read(name)

    def wr(self, name: str, value: int) -> None:
        """Write the low 32 bits of ``value`` to the register ``name``."""
        self.regs.write(name, value & 0xFFFFFFFF)

    def offset(self, name: str) -> int:
        """The byte offset of register ``name`` in the register BAR."""
        return self.asic.offset(name)

    # -- VRAM ----------------------------------------------------------------------------------------------
    def vram_write(self, offset: int, data: bytes) -> None:
        """Write ``data`` (padded to dwords) at VRAM byte ``offset``: one block write when BAR0 covers it."""
        data = bytes(data) + bytes(-len(data) % 4)
        if offset % 4:
            raise Refused(f"vram write at 0x{offset:x} is not dword aligned")
        if offset + len(data) > self.vram_size:
            raise Refused(f"vram write at 0x{offset:x} of 0x{len(data):x} bytes is past the end of vram")
        if offset + len(data) <= self.bar0_size:
            self.transport.bar(VRAM_BAR).write(offset, data)
            return
        for i in range(0, len(data), 4):
            self._window(offset + i)
            self.mmio.write32(fixed(MM_DATA, self.asic).offset or 0, int.from_bytes(data[i:i + 4], "little"))

    def copy_firmware(self, offset: int, data: bytes) -> None:
        """``vram_write`` of firmware bytes, counted in :attr:`copy_stats`."""
        before = self.transport.counters.usb_transfers
        self.vram_write(offset, data)
        self.copy_stats["bytes"] += len(data)
        self.copy_stats["usb_transfers"] += self.transport.counters.usb_transfers - before
        self.copy_stats["copies"] += 1

    def vram_read(self, offset: int, length: int) -> bytes:
        """Read ``length`` bytes (a dword multiple) at VRAM byte ``offset``: one block read when BAR0 covers it."""
        if offset % 4 or length % 4:
            raise Refused(f"vram read at 0x{offset:x} of 0x{length:x} bytes is not dword aligned")
        if offset + length <= self.bar0_size:
            return self.transport.bar(VRAM_BAR).read(offset, length)
        out = bytearray()
        for a in range(offset, offset + length, 4):
            self._window(a)
            out += self.mmio.read32(fixed(MM_DATA, self.asic).offset or 0).to_bytes(4, "little")
        return bytes(out)

    def vram_read32(self, offset: int) -> int:
        """The 32-bit word at VRAM byte ``offset``: one BAR0 read when BAR0 covers it, else through the MM_INDEX window.
        """
        if offset + 4 <= self.bar0_size:
            return self.transport.bar(VRAM_BAR).read32(offset)
        return int.from_bytes(self.vram_read(offset, 4), "little")

    def _window(self, addr: int) -> None:
        index = fixed(MM_INDEX, self.asic)
        aper = index.field("MM_APER").mask
        low = index.field("MM_OFFSET").mask
        self.mmio.write32(fixed(MM_INDEX_HI, self.asic).offset or 0, addr >> 31)
        self.mmio.write32(index.offset or 0, (addr & low) | aper)

    # -- addresses -------------------------------------------------------------------------------------------
    @property
    def fb_base(self) -> int:
        """MC address of VRAM byte 0 (§4.5): MMMC_VM_FB_LOCATION_BASE bits 23:0 << 24 (read once)."""
        if self._fb_base is None:
            self._fb_base = (self.rd(FB_BASE) & 0xFFFFFF) << 24
        return self._fb_base

    def mc(self, offset: int) -> int:
        """The MC address the PSP and SMU use for VRAM byte ``offset``."""
        return self.fb_base + offset

    def hdp_flush(self) -> None:
        """Flush the host data path so the PSP/SMU see what the host wrote (§4.2 step 5).

        BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL holds the byte offset of the flush register; writing 0 there
        flushes. Read once; an implausible value (0, all ones, outside the register BAR) skips the flush.
        """
        if self._hdp is False:
            at = self.rd(HDP_REMAP)
            self._hdp = at if 0 < at < self.mmio.size and at % 4 == 0 else None
        if isinstance(self._hdp, int) and self._hdp is not True:
            self.mmio.write32(self._hdp, 0)

    # -- small probes ---------------------------------------------------------------------------------------
    def sos_alive(self) -> bool:
        """§5.1 / §7.1: C2PMSG_81 non-zero means the PSP secure OS runs."""
        v = self.rd(PSP_SOL)
        return v not in (0, 0xFFFFFFFF)

    def is_vf(self) -> bool:
        """§1.2: RCC_IOV_FUNC_IDENTIFIER bit0."""
        v = self.rd(IOV_FUNC)
        return v != 0xFFFFFFFF and bool(v & 1)

    def check_supported(self) -> None:
        """Refuse (exit 3) parts whose PSP/SMU protocol tinyhw does not carry yet.

        The generated ids are those of MP1 13.0.0, which amd-bringup.md §3.2 also applies to 13.0.7 and
        13.0.10 (Navi3x); the boot steps are those of MP0 13.0.x with a TOC and a driver-allocated TMR (§5.3).
        """
        from tinyhw.errors import NotAvailableYet

        v = self.discovery.versions() if self.discovery is not None else {}
        mp0, mp1, gc = v.get("mp0"), v.get("mp1"), v.get("gc")
        ok = {(13, 0, 0), (13, 0, 7), (13, 0, 10)}
        if mp0 not in ok or mp1 not in ok or gc is None or gc[0] != 11:
            show = ", ".join(f"{b} {'.'.join(map(str, x))}" for b, x in (("gc", gc), ("mp0", mp0), ("mp1", mp1)) if x)
            raise NotAvailableYet(f"tinyhw boots navi3x (gc 11, mp0/mp1 13.0.0/7/10) only; this gpu has {show}",
                                  hint="tinyhw am info still identifies it")

    def ip_version(self, block: str) -> tuple[int, int, int] | None:
        """The (major, minor, revision) of IP block ``block`` (``gc``, ``mp0``...) from the IP discovery table, or None
        when unknown."""
        if self.discovery is None:
            return None
        return self.discovery.versions().get(block)
