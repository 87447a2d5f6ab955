"""What an emulated block (PSP, SMU, SDMA, GPU VM, command processor, ...) may ask of the board it sits on.

ARCHITECTURE.md "Emulated boards": a block is a small part the board owns. It never holds the board; it is
built with a :class:`BoardServices` (this module), the ASIC's register database (:class:`tinyhw.regs.asic.Asic`,
handed in by the board, never bound at import time) and its own options, and it declares its commands in
tables of named handlers (:mod:`tinyhw.commands`). A board implements :class:`BoardServices` once
(``tinyhw.mocks.amd.board.Navi31Board`` does); a block written against it runs on any board that does.

The interface is deliberately small and stable. Four concerns:

* **time and scheduling** -- :meth:`~BoardServices.now` (the board's virtual time over its whole life, what
  firmware models integrate over), :meth:`~BoardServices.command_now` (this command's clock, the base of
  scheduled events and of an engine's own time cursor) and :meth:`~BoardServices.schedule` (run a callback at
  the first board access ``delay`` virtual seconds later: firmware answers, fences, ...). Blocks never advance
  the clock: the attachment does, by its modelled latency.
* **memory-controller address translation** -- :meth:`~BoardServices.mc_to_vram` (an MC address, FB base +
  VRAM offset, to a VRAM offset) and :meth:`~BoardServices.translate` (a GPU virtual address of a VMID to a
  VRAM offset or a bus address, through the board's GPU VM; faults raise :class:`tinyhw.mocks.amd.gpuvm.VmFault`).
  :meth:`~BoardServices.gpu_read`/:meth:`~BoardServices.gpu_write` move bytes through that translation,
  page by page (what an engine fetching packets or copying does).
* **VRAM** -- :meth:`~BoardServices.vram_read`/:meth:`~BoardServices.vram_write` by VRAM offset.
* **bus access** -- :meth:`~BoardServices.bus_read`/:meth:`~BoardServices.bus_write`: the GPU as a bus
  master on system memory (the ASM24 bridge's SRAM over USB, host buffers behind the emulated IOMMU on
  ``mock:navi31``). ``None``/``False`` when nothing answers that address; an attachment that refuses an
  address it sees raises :class:`tinyhw.mocks.common.faults.BusFault`.

Plus the **register file** the blocks share (:meth:`~BoardServices.reg_read`/:meth:`~BoardServices.reg_write`:
the storage behind BAR5, by dword offset; a block's own writes, e.g. a read pointer, are not host writes and
are not counted) and the register database (:attr:`~BoardServices.regs`) the offsets come from.

The NVIDIA blocks take :class:`NvServices` (below) instead: no MC aperture, VMIDs or BAR5 register file there. The
command processor takes :class:`CpServices` (below): the board's services as a compute queue sees them (this command's
clock, board events at a time, VMID0 memory, the board's register handlers), which the board adapts from its own.

What is *not* here: board-specific events (sOS alive gates the flash mailbox, a mode-1 reset, "a compute queue
is active") are plain callbacks the board passes to the one block that raises or needs them, so this interface
does not grow with every block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple, Protocol, runtime_checkable

from tinyhw.regs.asic import Asic


class Translation(NamedTuple):
    """Where a GPU virtual address lands: a bus (system memory) address, or a VRAM offset."""

    system: bool
    address: int


@runtime_checkable
class BoardServices(Protocol):
    """The board as its emulated blocks see it (see the module docstring for the four concerns)."""

    #: the ASIC's register database (offsets and fields by name) the board was built for
    regs: Asic

    # -- time and scheduling -------------------------------------------------------------------------------
    def now(self) -> float:
        """The board's virtual time in seconds: what it lived in earlier commands plus this command's clock."""
        ...

    def command_now(self) -> float:
        """This command's virtual clock in seconds (the base of :meth:`schedule` and of engines' time cursors)."""
        ...

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at the first board access ``delay`` virtual seconds from now (or later); an event that
        schedules another counts its delay from its own due time."""
        ...

    # -- register file -----------------------------------------------------------------------------------------
    def reg_read(self, offset: int) -> int:
        """The stored value of the register at dword-aligned BAR5 byte ``offset`` (0 when never written)."""
        ...

    def reg_write(self, offset: int, value: int) -> None:
        """Store ``value`` as a block's own update of a register (not counted as a host write)."""
        ...

    # -- address translation -----------------------------------------------------------------------------------
    def mc_to_vram(self, mc: int, length: int = 1) -> int | None:
        """VRAM offset of memory-controller address ``mc`` (MC = FB base + offset); None when ``mc`` ..
        ``mc + length`` is not all inside VRAM."""
        ...

    def translate(self, vmid: int, va: int, write: bool = False) -> Translation:
        """Translate GPU virtual address ``va`` of ``vmid`` (raises ``VmFault`` and sets the fault status when it
        has no valid mapping)."""
        ...

    def gpu_read(self, vmid: int, va: int, length: int) -> bytes:
        """``length`` bytes at GPU virtual address ``va`` of ``vmid``, through :meth:`translate` page by page."""
        ...

    def gpu_write(self, vmid: int, va: int, data: bytes, at: float | None = None) -> None:
        """Write ``data`` at ``va`` of ``vmid``; ``at`` is the writer's virtual time, for bus writes an
        attachment holds until then (the USB bridge)."""
        ...

    # -- VRAM --------------------------------------------------------------------------------------------------
    def vram_read(self, offset: int, length: int) -> bytes:
        """``length`` bytes of VRAM at byte ``offset`` (never-written VRAM reads 0)."""
        ...

    def vram_write(self, offset: int, data: bytes) -> None:
        """Write ``data`` into VRAM at byte ``offset`` (counted in the board's VRAM write counter)."""
        ...

    def vram_poke(self, offset: int, data: bytes) -> None:
        """Write ``data`` into VRAM at byte ``offset`` without counting it (the undo of a shader-core lockstep run)."""
        ...

    def vram_count(self, nbytes: int) -> None:
        """Count ``nbytes`` written into VRAM by accesses that were made without effects and then kept."""
        ...

    # -- bus access (the GPU as a bus master on system memory) ----------------------------------------------
    def bus_read(self, addr: int, length: int) -> bytes | None:
        """``length`` bytes at bus address ``addr``; None when no attachment answers there."""
        ...

    def bus_write(self, addr: int, data: bytes, at: float | None = None) -> bool:
        """A posted write to bus address ``addr``; False when no attachment answers there. ``at``: see
        :meth:`gpu_write`."""
        ...


@runtime_checkable
class NvServices(Protocol):
    """The board as the emulated NVIDIA blocks (falcons, the FWSEC/booter black boxes, the scripted GSP-RM) see it.

    :class:`BoardServices` is AMD-shaped (an MC aperture, VMIDs, a BAR5 register file); an NVIDIA board has none of
    those, so its blocks get this smaller interface, named like :class:`BoardServices` where the meaning is the
    same. What the blocks actually ask of the board, in four concerns:

    * **facts** -- :attr:`vram_size` (the FB size the FRTS region and the WPR meta are placed against) and
      :attr:`pci_ids` (config dword 0, which GSP_SET_SYSTEM_INFO must carry);
    * **FB memory** -- :meth:`vram_read` (what a falcon's DMA copies into IMEM/DMEM);
    * **BAR0 register storage** -- :meth:`reg_read`/:meth:`reg_write` by BAR0 byte offset (WPR2_ADDR_LO/HI, which
      FWSEC and the booter raise): a block's own update, not a host write, not counted;
    * **host memory through the emulated IOMMU** -- :meth:`bus_read`/:meth:`bus_write` at bus addresses (IOVAs):
      the GSP and booter as bus masters. An access the IOMMU refuses (no buffer maps it, bus mastering off)
      raises :class:`tinyhw.mocks.common.faults.BusFault`; nothing is moved.

    No time or scheduling: these blocks answer at the host access that starts them (the IOMMU charges its own
    DMA time to the board's clock). A block never holds the board.
    """

    #: FB (VRAM) size in bytes
    vram_size: int
    #: PCI vendor id | device id << 16, as config space dword 0 reads
    pci_ids: int

    def vram_read(self, offset: int, length: int) -> bytes:
        """``length`` bytes of FB memory at byte ``offset`` (never-written memory reads 0)."""
        ...

    def reg_read(self, offset: int) -> int:
        """The stored value of the BAR0 register at byte ``offset`` (0 when the board keeps none there)."""
        ...

    def reg_write(self, offset: int, value: int) -> None:
        """Store ``value`` in the BAR0 register at byte ``offset`` as a block's own update (not a host write)."""
        ...

    def bus_read(self, addr: int, length: int) -> bytes:
        """``length`` bytes of host memory at bus address ``addr`` (raises ``BusFault`` when the IOMMU refuses)."""
        ...

    def bus_write(self, addr: int, data: bytes) -> None:
        """Write ``data`` to host memory at bus address ``addr`` (raises ``BusFault`` when the IOMMU refuses)."""
        ...


@runtime_checkable
class CpServices(Protocol):
    """The board as the command processor (``tinyhw.mocks.amd.cp.CommandProcessor``) sees it.

    A compute queue runs on this command's clock and raises board events at a time of that clock (a RELEASE_MEM that
    lands when the packets before it have ended); its memory is VMID0's GPU virtual addresses; its WAIT_REG_MEM and
    register writes go through the board's register handlers, as a host access would. The AMD board builds one in its
    constructor from its :class:`BoardServices`, its event queue, its GPU VM and its register file.
    """

    @property
    def regs(self) -> dict[int, int]:
        """The register file's storage by BAR5 byte offset (the queue registers; fault status lands here)."""
        ...

    @property
    def strict(self) -> bool:
        """True: what the emulator does not model raises instead of being skipped."""
        ...

    @property
    def vm(self) -> Any:
        """The GPU VM behind :meth:`read`/:meth:`write` (``tinyhw.mocks.amd.gpuvm.GpuVm``) for side-effect-free access
        (``lookup``/``peek``/``poke``/``settle``); None: the shader core runs workgroups one at a time."""
        ...

    def now(self) -> float:
        """This command's virtual clock in seconds (:meth:`BoardServices.command_now`)."""
        ...

    def at(self, t: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` when this command's clock reaches ``t`` (a board event)."""
        ...

    def ticks(self, t: float) -> int:
        """The board time in 10 ns ticks at this command's clock time ``t`` (RELEASE_MEM DATA_SEL 3/4)."""
        ...

    def read(self, va: int, length: int) -> bytes:
        """``length`` bytes at GPU virtual address ``va`` of VMID0, through the GPU VM (raises ``VmFault``)."""
        ...

    def write(self, va: int, data: bytes) -> None:
        """Write ``data`` at GPU virtual address ``va`` of VMID0, through the GPU VM (raises ``VmFault``)."""
        ...

    def reg_read(self, offset: int) -> int | None:
        """A register read by the CP at BAR5 byte ``offset`` through the board's handlers; None: no register there."""
        ...

    def reg_write(self, offset: int, value: int) -> bool:
        """A register write by the CP at BAR5 byte ``offset`` through the board's handlers; False: no register
        there."""
        ...
