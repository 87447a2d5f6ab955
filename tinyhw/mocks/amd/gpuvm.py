"""GPU virtual memory of the emulated Navi31: VMID0 of one memory hub (the GC hub, which the SDMA engine and the
command processor use, or the MMHUB).

Facts: specs/amd-bringup.md §4.2 step 3/9a (system aperture = FB base..top >> 18, VMID0 page table
start/end in 4 KiB pages, base = root table address with bit 0 valid, CONTEXT0_CNTL enable and
page_table_depth), §4.5 (MC address = FB base + VRAM offset; **inside page tables** -- the PAGE_TABLE_BASE_ADDR,
every PDE and every PTE into VRAM -- and in the fault default address the *physical* VRAM address, the offset from
VRAM's start on a single board, never the MC address; PTE bits on gfx10/11: 0 valid, 1 system, 12-47 address, 54
PDE-is-PTE; 4 KiB / 2 MiB / 1 GiB pages; root at PDB2), and specs/asm24-usb-bridge.md §7.2 (system pages are
bridge-internal PCIe addresses).

Translation of a GPU address (what the engine is handed in a packet):

* inside the system aperture (``*MC_VM_SYSTEM_APERTURE_LOW/HIGH_ADDR`` << 18, MC addresses): VRAM, MC - FB base;
* else inside VMID0's range with ``*VM_CONTEXT0_CNTL`` bit 0 set: a walk of ``depth`` PDE levels (9 bits
  each) and one PTE level from the root at the physical VRAM address in ``*VM_CONTEXT0_PAGE_TABLE_BASE_ADDR``;
  a PDE with bit 54 set is a huge page (2 MiB at PDB0, 1 GiB at PDB1), at the entry's address plus the access's offset
  inside the page (the specs do not say what hardware does with an entry whose address is not aligned to the page
  size; a driver proven on Navi31, tinygrad's AM, maps 2 MiB pages at 4 KiB-aligned physical addresses and its
  kernels read what it wrote, so by default the address is taken whole (inferred); the ``hugepage=aligned`` board
  option drops its low bits instead). Every PDE names its table by physical VRAM
  address; a PTE with the system bit names a bus address (the bridge's memory over USB), else a physical VRAM
  address. A table or page whose physical address lies past the hub's FB size (``*MC_VM_FB_LOCATION_TOP -
  BASE``), e.g. an MC address written where a physical one belongs, is a VM fault (inferred: what real hardware
  reads there is not known; it is not the VRAM the driver meant);
* a system access the attachment refuses (``mock:navi31``'s emulated IOMMU: an unmapped IOVA) raises
  :class:`~tinyhw.mocks.common.faults.BusFault` from the attachment, untouched by the GPU's fault status;
* anything else, or an invalid entry, is a VM fault: ``GCVM_L2_PROTECTION_FAULT_STATUS`` becomes non-zero
  (bit 0, invented encoding) and the access raises :class:`VmFault` (the engine stops: what a driver that
  leaves the fault defaults off gets, inferred) -- unless ``GCVM_L2_PROTECTION_FAULT_CNTL`` has the
  ``*_PROTECTION_FAULT_ENABLE_DEFAULT`` bit of that kind of fault set (range: outside VMID0's range; PDE0: an
  invalid PDE; valid: an invalid PTE): then the access goes to the default page
  (``VM_L2_PROTECTION_FAULT_DEFAULT_ADDR``, a physical page number, amd-bringup.md §4.2 step 3 and §4.5: the dummy
  page) and the engine goes
  on, with the fault latched in the status (its RW bit) and the address registers (the first fault's page,
  until the status is cleared) for the driver to find afterwards.

Walks are cached per 4 KiB page (the TLB) and the cache is dropped when the driver writes a GC or MM hub
``*_INVALIDATE_ENG*_REQ`` register, so a page table changed without an invalidation keeps its old mapping,
as on hardware (inferred simplification: one TLB for every engine).
"""

from __future__ import annotations

from tinyhw.mocks.common.services import BoardServices
from tinyhw.regs.asic import Asic

PAGE = 4096
VALID, SYSTEM, HUGE = 1 << 0, 1 << 1, 1 << 54
ADDR_MASK = ((1 << 48) - 1) & ~(PAGE - 1)
#: the hub registers the translation reads (register database names of the gc block; the MMHUB's are the same names
#: with ``MM`` for ``GC``, in the mmhub block)
REGISTERS = (
    "GCVM_CONTEXT0_CNTL", "GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", "GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32",
    "GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", "GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32",
    "GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", "GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32",
    "GCMC_VM_SYSTEM_APERTURE_LOW_ADDR", "GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR", "GCVM_L2_PROTECTION_FAULT_STATUS",
    "GCVM_L2_PROTECTION_FAULT_CNTL", "GCVM_L2_PROTECTION_FAULT_ADDR_LO32", "GCVM_L2_PROTECTION_FAULT_ADDR_HI32",
    "GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", "GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32",
    "GCMC_VM_FB_LOCATION_BASE", "GCMC_VM_FB_LOCATION_TOP")
#: hub name -> (register database block, the prefix its registers have where the gc block's have ``GC``)
HUBS = {"gc": ("gc", "GC"), "mmhub": ("mmhub", "MM")}
#: the kind of a fault -> its GCVM_L2_PROTECTION_FAULT_CNTL bit that sends the access to the default page
DEFAULT_FIELDS = {"range": "RANGE_PROTECTION_FAULT_ENABLE_DEFAULT", "pde0": "PDE0_PROTECTION_FAULT_ENABLE_DEFAULT",
                  "valid": "VALID_PROTECTION_FAULT_ENABLE_DEFAULT"}


def hub_name(name: str, hub: str = "gc") -> str:
    """The register database name (``block.REGISTER``) of GC hub register ``name`` on ``hub`` (a key of
    :data:`HUBS`)."""
    block, prefix = HUBS[hub]
    return f"{block}.{prefix}{name[2:]}"


def register_offsets(regs: Asic, hub: str = "gc") -> dict[str, int]:
    """Offsets of :data:`REGISTERS` (keyed by their GC names) on ``hub`` in the register database ``regs``."""
    return {n: regs.offset(hub_name(n, hub)) for n in REGISTERS}


def invalidate_requests(regs: Asic) -> tuple[int, ...]:
    """Every invalidation request register of both hubs (18 engines each): a write drops the TLB."""
    return tuple(regs.offset(f"{hub}VM_INVALIDATE_ENG{i}_REQ") for hub in ("gc.GC", "mmhub.MM") for i in range(18))


class VmFault(Exception):
    """A GPU access with no valid translation; ``addr``: the address whose page faulted (for an access over several
    pages, the first one without a translation, as the hardware names it), None where no one page is to blame."""

    def __init__(self, message: str, addr: int | None = None, kind: str | None = None, first: bool = True) -> None:
        super().__init__(message)
        self.addr, self.kind, self.first = addr, kind, first  # kind: a key of DEFAULT_FIELDS, or None


class GpuVm:
    """VMID0 translation of memory hub ``hub`` (``gc`` or ``mmhub``) for the emulated engines, on the board's services
    (VRAM, bus, register file)."""

    def __init__(self, services: BoardServices, regs: Asic, hub: str = "gc", huge: str = "offset") -> None:
        self.services = services
        self.hub = hub
        #: how a huge page (a PDE with bit 54) whose address is not aligned to its size resolves: "offset" adds the
        #: access's offset inside the page to the entry's 4 KiB-aligned address, "aligned" drops the entry's address
        #: bits below the page size first (see the module docstring; the board option ``hugepage``)
        self.huge_mask = ~0 if huge == "offset" else None
        self.offsets = register_offsets(regs, hub)
        self.depth = regs.field(hub_name("GCVM_CONTEXT0_CNTL.PAGE_TABLE_DEPTH", hub))
        self.defaults = {kind: regs.field(hub_name(f"GCVM_L2_PROTECTION_FAULT_CNTL.{name}", hub))
                         for kind, name in DEFAULT_FIELDS.items()}
        self.rw = regs.field(hub_name("GCVM_L2_PROTECTION_FAULT_STATUS.RW", hub))
        self.redirected = 0  # accesses sent to the default page
        self.tlb: dict[int, tuple[bool, int]] = {}
        self.walks = 0
        self.invalidations = 0

    def _reg(self, name: str) -> int:
        return self.services.reg_read(self.offsets[name])

    def phys_to_vram(self, phys: int, length: int = PAGE) -> int | None:
        """VRAM offset of the physical VRAM address ``phys`` a page table holds (amd-bringup.md §4.5: the offset from
        VRAM's start; the XGMI offset is 0 on a single board), None where ``phys`` .. ``phys + length`` is not inside
        the hub's FB (``FB_LOCATION_TOP - FB_LOCATION_BASE``, 16 MiB units) and the board's VRAM."""
        base = self._reg("GCMC_VM_FB_LOCATION_BASE") & 0xFFFFFF
        top = self._reg("GCMC_VM_FB_LOCATION_TOP") & 0xFFFFFF
        if phys < 0 or top < base or phys + length > (top - base + 1) << 24:
            return None
        return self.services.mc_to_vram((base << 24) + phys, length)

    def invalidate(self, _value: int = 0) -> None:
        """A TLB invalidation request (a write to any hub's ``*_INVALIDATE_ENG*_REQ``, value ignored): every cached
        translation is dropped."""
        self.tlb.clear()
        self.invalidations += 1

    def fault(self, addr: int, why: str, kind: str | None = None, quiet: bool = False) -> VmFault:
        """Record a protection fault (GCVM_L2_PROTECTION_FAULT_STATUS := 1, unless a fault is latched there already)
        and return the :class:`VmFault` to raise for GPU address ``addr`` (``kind``: see :data:`DEFAULT_FIELDS`);
        ``quiet``: only the exception, nothing recorded (:meth:`lookup`)."""
        first = not self._reg("GCVM_L2_PROTECTION_FAULT_STATUS")
        if first and not quiet:
            self.services.reg_write(self.offsets["GCVM_L2_PROTECTION_FAULT_STATUS"], 1)
        return VmFault(f"gpu vm fault at 0x{addr:x}: {why}", addr, kind, first)

    def _default_page(self, e: VmFault, addr: int, write: bool) -> int:
        """The VRAM offset the access at ``addr`` that raised ``e`` goes to instead when its kind of fault is set to
        use the default page (the fault latched: status RW bit and address, for the first fault); else ``e``
        again."""
        field = self.defaults.get(e.kind or "")
        if field is None or not self._reg("GCVM_L2_PROTECTION_FAULT_CNTL") & field.mask:
            raise e
        page = (self._reg("GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32") << 32 |
                self._reg("GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32")) << 12
        phys = self.phys_to_vram(page)
        if phys is None:
            raise e
        if e.first:
            o = self.offsets
            self.services.reg_write(o["GCVM_L2_PROTECTION_FAULT_STATUS"], 1 | (int(write) << self.rw.shift))
            self.services.reg_write(o["GCVM_L2_PROTECTION_FAULT_ADDR_LO32"], (addr >> 12) & 0xFFFFFFFF)
            self.services.reg_write(o["GCVM_L2_PROTECTION_FAULT_ADDR_HI32"], (addr >> 44) & 0xF)
        self.redirected += 1
        return phys + (addr & (PAGE - 1))

    def _page(self, addr: int, write: bool) -> tuple[bool, int]:
        """(system, address) of the page at ``addr`` for an access, the default page where the fault says so."""
        try:
            return self.translate(addr)
        except VmFault as e:
            return False, self._default_page(e, addr, write)

    def translate(self, addr: int, quiet: bool = False) -> tuple[bool, int]:
        """(system, address) of GPU address ``addr``: a bus address, or a VRAM offset (``quiet``: no effect, see
        :meth:`lookup`)."""
        lo = (self._reg("GCMC_VM_SYSTEM_APERTURE_LOW_ADDR") & 0x3FFFFFFF) << 18  # MC addresses (§4.2 step 3)
        hi = ((self._reg("GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR") & 0x3FFFFFFF) << 18) | ((1 << 18) - 1)
        if lo and lo <= addr <= hi:
            phys = self.services.mc_to_vram(addr)
            if phys is None:
                raise self.fault(addr, "system aperture address outside vram", quiet=quiet)
            return False, phys
        page = addr >> 12
        hit = self.tlb.get(page)
        if hit is None:
            hit = self._walk(addr, quiet)
            if not quiet:
                self.tlb[page] = hit
        system, base = hit
        return system, base + (addr & (PAGE - 1))

    def _walk(self, addr: int, quiet: bool = False) -> tuple[bool, int]:
        if not self._reg("GCVM_CONTEXT0_CNTL") & 1:
            raise self.fault(addr, "outside the system aperture and vmid0 is not enabled", quiet=quiet)
        start = (self._reg("GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32") << 32 |
                 self._reg("GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32")) << 12
        end = (self._reg("GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32") << 32 |
               self._reg("GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32")) << 12
        if not start <= addr < end + PAGE:
            raise self.fault(addr, "outside vmid0's page table range", "range", quiet=quiet)
        entry = (self._reg("GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32") << 32 |
                 self._reg("GCVM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32"))
        if not entry & VALID:
            raise self.fault(addr, "vmid0 root page table not valid", quiet=quiet)
        depth = (self._reg("GCVM_CONTEXT0_CNTL") & self.depth.mask) >> self.depth.shift
        va = addr - start
        self.walks += not quiet
        for level in range(depth, -1, -1):  # level 0 is the PTE level
            table = self.phys_to_vram(entry & ADDR_MASK)
            if table is None:
                raise self.fault(addr, f"page table at physical address 0x{entry & ADDR_MASK:x} outside vram",
                                 quiet=quiet)
            shift = 12 + 9 * level
            index = (va >> shift) & 0x1FF
            entry = int.from_bytes(self.services.vram_read(table + 8 * index, 8), "little")
            if not entry & VALID:
                raise self.fault(addr, f"invalid entry at level {level}", "valid" if level == 0 else "pde0",
                                 quiet=quiet)
            if level == 0 or entry & HUGE:
                size = 1 << shift
                base = entry & ADDR_MASK & (self.huge_mask if self.huge_mask is not None else ~(size - 1))
                target = base + (va & (size - 1) & ~(PAGE - 1))
                if entry & SYSTEM:
                    return True, target
                phys = self.phys_to_vram(target)
                if phys is None:
                    raise self.fault(addr, f"pte names physical address 0x{target:x} outside vram", quiet=quiet)
                return False, phys
        raise self.fault(addr, "walk ended without a pte", quiet=quiet)  # pragma: no cover - the loop always returns

    # -- memory through the translation ------------------------------------------------------------------------
    def read(self, addr: int, length: int) -> bytes:
        """``length`` bytes at GPU address ``addr``, page by page through the translation: VRAM pages from the board's
        VRAM, system pages from its bus attachment. Raises :class:`VmFault` for an unmapped page or an unreachable
        bus address."""
        out = bytearray()
        while length:
            n = min(length, PAGE - (addr & (PAGE - 1)))
            system, where = self._page(addr, False)
            if system:
                data = self.services.bus_read(where, n)
                if data is None:
                    raise self.fault(addr, f"system page at bus address 0x{where:x} is not reachable")
                out += data
            else:
                out += self.services.vram_read(where, n)
            addr, length = addr + n, length - n
        return bytes(out)

    def write(self, addr: int, data: bytes, at: float | None = None) -> None:
        """Write ``data`` at GPU address ``addr`` page by page: VRAM pages into VRAM, system pages as posted bus writes
        carrying the engine's time ``at``. Raises :class:`VmFault` for an unmapped page or an unreachable bus
        address."""
        view = memoryview(data)
        while view:
            n = min(len(view), PAGE - (addr & (PAGE - 1)))
            system, where = self._page(addr, True)
            if system:
                if not self.services.bus_write(where, bytes(view[:n]), at):
                    raise self.fault(addr, f"system page at bus address 0x{where:x} is not reachable")
            else:
                self.services.vram_write(where, bytes(view[:n]))
            addr, view = addr + n, view[n:]

    # -- side-effect-free access (a lockstep run of the shader core, journalled and possibly undone) --------------
    def lookup(self, addr: int, seen: dict[int, tuple[bool, int]] | None = None) -> tuple[bool, int]:
        """(system, address) of GPU address ``addr`` as :meth:`translate` gives it, without an effect: a TLB miss walks
        the tables without filling the TLB or counting the walk (the walk is kept in ``seen``, by 4 KiB page, when
        given: see :meth:`settle`), and an address without a valid translation raises :class:`VmFault` with the fault
        status untouched and no default page (what the real access does then is left to the real access)."""
        page = addr >> 12
        if seen is not None:
            hit = self.tlb.get(page) or seen.get(page)
            if hit is not None:
                return hit[0], hit[1] + (addr & (PAGE - 1))
        system, where = self.translate(addr, quiet=True)
        if seen is not None and page not in self.tlb and not self._in_aperture(addr):
            seen[page] = (system, where - (addr & (PAGE - 1)))
        return system, where

    def _in_aperture(self, addr: int) -> bool:
        lo = (self._reg("GCMC_VM_SYSTEM_APERTURE_LOW_ADDR") & 0x3FFFFFFF) << 18
        hi = ((self._reg("GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR") & 0x3FFFFFFF) << 18) | ((1 << 18) - 1)
        return bool(lo) and lo <= addr <= hi

    @property
    def can_poke(self) -> bool:
        """True when the board can write VRAM uncounted (``vram_poke``) and count writes afterwards (``vram_count``):
        :meth:`poke` and :meth:`settle` work."""
        return all(callable(getattr(self.services, n, None)) for n in ("vram_poke", "vram_count"))

    def _vram_pages(self, addr: int, length: int, seen: dict[int, tuple[bool, int]] | None) -> list[tuple[int, int]]:
        """(VRAM offset, length) of each page of ``addr`` .. ``addr + length`` by :meth:`lookup`; a system page raises
        :class:`VmFault` too (a bus access always has effects: the attachment's counters, the link's time)."""
        out = []
        while length:
            n = min(length, PAGE - (addr & (PAGE - 1)))
            system, where = self.lookup(addr, seen)
            if system:
                raise VmFault(f"gpu address 0x{addr:x} is a system page: no access without effects", addr)
            out.append((where, n))
            addr, length = addr + n, length - n
        return out

    def peek(self, addr: int, length: int, seen: dict[int, tuple[bool, int]] | None = None) -> bytes:
        """``length`` bytes at GPU address ``addr`` with no effect at all (:meth:`lookup`; VRAM only)."""
        pages = self._vram_pages(addr, length, seen)
        if len(pages) == 1:
            return self.services.vram_read(*pages[0])
        return b"".join(self.services.vram_read(where, n) for where, n in pages)

    def poke(self, addr: int, data: bytes, seen: dict[int, tuple[bool, int]] | None = None) -> None:
        """Write ``data`` at GPU address ``addr`` with no effect but the bytes (:meth:`lookup`; VRAM only, not counted
        in the board's VRAM write counter). Nothing is written when any page fails to translate."""
        pages = self._vram_pages(addr, len(data), seen)
        poke = self.services.vram_poke
        at = 0
        for where, n in pages:
            poke(where, bytes(data[at:at + n]))
            at += n

    def settle(self, seen: dict[int, tuple[bool, int]], written: int) -> None:
        """The effects a kept run of side-effect-free accesses owes: the walks of the pages it looked up that the TLB
        lacked (``seen`` of :meth:`lookup`: walked, counted and cached now, as the real accesses would have) and
        ``written`` bytes in the board's VRAM write counter."""
        for page in sorted(seen):
            self.translate(page << 12)
        if written:
            self.services.vram_count(written)

    def is_system(self, addr: int) -> bool:
        """True when GPU address ``addr`` translates to a system (bus) page; False for VRAM and for an address that
        faults."""
        try:
            return self.translate(addr)[0]
        except VmFault:
            return False
