"""The emulated Navi31's command processor: MEC compute queues (HQDs), their rings and doorbells, PM4 execution.

Facts: specs/amd-compute.md §0.2 (register offsets; the HQD registers CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI map
one-to-one onto MQD dwords 128 .. 183), §1.2 (GRBM_GFX_CNTL selects the (me, pipe, queue) bank: PIPEID 1:0,
MEID 3:2, QUEUEID 10:8), §1.5 (bit fields), §1.6 (b) (direct activation: CP_HQD_ACTIVE.ACTIVE=1 starts the queue,
which reads its MQD), §1.7 (ring of 2^(QUEUE_SIZE+1) dwords at PQ_BASE << 8; a 64-bit doorbell write whose byte
offset is 4 x DOORBELL_OFFSET sets WPTR and the CP runs packets from RPTR to WPTR, writing RPTR to its report
address), §1.8 (DEQUEUE_REQUEST drains and clears ACTIVE), §2 (PM4 type-3 header, NOP incl. the 0xFFFF1000
one-dword filler, SET_SH_REG, DISPATCH_DIRECT, ACQUIRE_MEM, RELEASE_MEM), §6 (every address the CP and the shader
use is a GPU virtual address of the queue's VMID; only VMID0 is modelled), §7 (the fence write is the completion).

What it does:

* **Registers**: the HQD range (0xC824 .. 0xC900 bytes, every dword of it, named in the database or not) is
  banked per (me, pipe, queue) through GRBM_GFX_CNTL; GRBM_STATUS reads CP_BUSY (bit 29) and GUI_ACTIVE (31)
  while a queue is hung, and SPI_BUSY (22) while waves are resident (:mod:`tinyhw.mocks.amd.sqind`);
  GRBM_STATUS2.CPC_BUSY, CP_CPC_STATUS MEC1_BUSY/CPC_BUSY and CP_CPC_BUSY_STAT.MEC1_PIPE0_BUSY read set while a
  queue is hung (reads only: writes stay the register file's). SH_MEM_BASES and SH_MEM_CONFIG are banked per
  VMID through GRBM_GFX_CNTL.VMID (7:4; amd-bringup.md §9c: the driver programs them for VMIDs 0..15 selecting each
  in turn, as Linux's ``soc21_grbm_select`` does): reads return the selected VMID's value, 0 at power-on and after a
  mode-1 reset (as the HQD banks; the hardware's reset value is not published: a choice); a dispatch gets the
  SH_MEM_BASES of its queue's VMID (CP_HQD_VMID.VMID) as ``DispatchRegs.sh_mem_bases``, the apertures its FLAT
  accesses and ``s_getreg`` see (a VMID never written: 0, so no LDS or private aperture; tinyhw's own driver does
  not program them). Everything else stays the register file's.
* **Activation** (ACTIVE 0 -> 1): the MQD at CP_MQD_BASE_ADDR is read through GPUVM; its header must be
  0xC0310800 (§1.4), else the queue stops with an error (``status()``). A zero MQD address is tolerated (the queue
  runs from its registers).
* **Doorbell**: a BAR2 write to the high dword of an active, enabled queue's doorbell (inside
  CP_MEC_DOORBELL_RANGE_LOWER..UPPER) kicks the queue; the board hands the CP only the doorbells the NBIO routes to
  it (:mod:`tinyhw.mocks.amd.doorbells`).
* **PM4**: NOP, SET_SH_REG (the COMPUTE_* window), EVENT_WRITE (handed to the SQ thread trace), ACQUIRE_MEM
  (data caches are not modelled: counted; GLI_INV drops the decoded-instruction cache, as does an activation),
  DISPATCH_DIRECT (:class:`tinyhw.mocks.rdna3.DispatchJob` with memory through GPUVM: see Beside the host),
  RELEASE_MEM (DATA_SEL 1/2
  write of the data, 3/4 the board time in 10 ns ticks at the queue's time cursor when the packet runs, i.e. when the
  earlier dispatches end in modelled time, so a time stamp after a dispatch is later than one before it by the
  dispatch's modelled time, however late the host looks). Any other packet
  stops the queue (strict boards raise, naming the opcode).
* **WAIT_REG_MEM** (§2.9): FUNCTION (0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >) of ``(value & mask)`` against the
  reference; MEM_SPACE 1 polls a dword at a GPU address (dword-aligned, through GPUVM), MEM_SPACE 0 a register (dw2 =
  its dword address); OPERATION 1 (registers only) first writes the reference into reg0 (dw2; what is written is
  inferred: amdgpu's HDP flush passes the request bit as both reference and mask), then polls reg1 (dw3). Register
  accesses go through the board's register handlers
  (:meth:`~tinyhw.mocks.common.services.CpServices.reg_read`/``reg_write``), e.g. the NBIO's GPU_HDP_FLUSH_REQ/DONE
  pair. A check that fails parks the queue at the packet: the read pointer stays there, GRBM_STATUS reads
  CP_BUSY/GUI_ACTIVE (and the MEC busy bits), later packets do not run and the board looks again at every host access
  (:meth:`CommandProcessor.retry`; the hardware polls continuously), each look counted in ``wait_polls``. When the
  condition holds the queue goes on after the packet's poll interval (dw6, in 10 ns units: inferred). A wait that
  never completes is a hung queue, as on hardware: the driver's fence times out; a dequeue (either kind) stops a
  waiting queue (inferred: the wait is a preemption point). FUNCTION 7, other MEM_SPACE/OPERATION values, a
  write-then-wait on memory and an unknown register are model gaps (strict boards raise).
* **Time**: the queue's cursor starts at the kick and advances 0.1 us per packet and, for a
  dispatch, 2 us plus its modelled issue cycles at 2.5 GHz divided over the 96 CUs' share it can use (at most one
  wave per CU at a time; all inferred, a functional model, not a performance one). The fence write is a board
  event at the cursor: a host that polls sees it only after that much of its clock passed.
* **Faults**: a GPUVM fault of a shader or packet access records the page address, VMID and read/write in
  GCVM_L2_PROTECTION_FAULT_STATUS / _ADDR_LO32 / _ADDR_HI32 (fields of the database) and stops the queue; a
  shader that runs past the watchdog hangs the queue (GRBM_STATUS.CP_BUSY): a DRAIN_PIPE dequeue never completes
  on it (its waves never finish), a RESET_WAVES dequeue drops the waves and stops it.
* **Beside the host**: a dispatch runs inside its doorbell write for at most ``dispatch_slice`` wall seconds (whole
  workgroups); a longer one stays running (the queue at its DISPATCH_DIRECT, GRBM_STATUS.CP_BUSY) and goes on at each
  later host access (:meth:`CommandProcessor.retry`) for as long as the board clock or, when further, real time moved
  since its last slice, so a driver's timeout on the board clock bounds its wall time too, and a host that touches
  the board seldom still sees it progress (a pacing model, inferred: the GPU computes while the host runs). A
  DRAIN_PIPE dequeue completes when it ends, RESET_WAVES drops it.
* **Dequeue** (§1.8): CP_HQD_DEQUEUE_REQUEST 1 (DRAIN_PIPE) or 2 (RESET_WAVES) on an active queue clears
  CP_HQD_ACTIVE.ACTIVE (see Faults for a hung queue).
* **Across commands**: a queue left active or hung is kept in the board state file (:meth:`to_state`), as the
  hardware keeps it between processes; a mode-1 reset powers the CP back on.

The CP takes a small explicit :class:`~tinyhw.mocks.common.services.CpServices` in its constructor (time, events,
memory, register access, strictness), which the board adapts from its own services; it never imports the board.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tinyhw.autogen.nvd import CONSTANTS as PM4
from tinyhw.commands import CommandTable
from tinyhw.errors import StrictEmulationError
from tinyhw.mocks.amd.gpuvm import VmFault
from tinyhw.mocks.amd.sqind import ShaderArray
from tinyhw.mocks.common.services import CpServices
from tinyhw.regs.asic import Asic

if TYPE_CHECKING:
    from tinyhw.mocks.rdna3 import DispatchRegs

#: The GC registers the CP reads or writes by name (offsets looked up in the board's database).
REGISTERS = (
    "CP_MQD_BASE_ADDR", "CP_MQD_BASE_ADDR_HI", "CP_HQD_ACTIVE", "CP_HQD_VMID", "CP_HQD_PQ_BASE", "CP_HQD_PQ_BASE_HI",
    "CP_HQD_PQ_RPTR", "CP_HQD_PQ_RPTR_REPORT_ADDR", "CP_HQD_PQ_RPTR_REPORT_ADDR_HI", "CP_HQD_PQ_DOORBELL_CONTROL",
    "CP_HQD_PQ_CONTROL", "CP_HQD_DEQUEUE_REQUEST", "CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI",
    "CP_HQD_EOP_BASE_ADDR", "CP_HQD_EOP_CONTROL", "CP_MEC_DOORBELL_RANGE_LOWER", "CP_MEC_DOORBELL_RANGE_UPPER",
    "GCVM_L2_PROTECTION_FAULT_STATUS", "GCVM_L2_PROTECTION_FAULT_ADDR_LO32", "GCVM_L2_PROTECTION_FAULT_ADDR_HI32",
    "COMPUTE_PGM_LO", "COMPUTE_PGM_HI", "COMPUTE_PGM_RSRC1", "COMPUTE_PGM_RSRC2", "COMPUTE_PGM_RSRC3",
    "COMPUTE_USER_DATA_0", "COMPUTE_NUM_THREAD_X", "COMPUTE_NUM_THREAD_Y", "COMPUTE_NUM_THREAD_Z",
    "COMPUTE_START_X", "COMPUTE_START_Y", "COMPUTE_START_Z", "COMPUTE_TMPRING_SIZE", "COMPUTE_DISPATCH_INITIATOR",
    "COMPUTE_THREAD_TRACE_ENABLE", "COMPUTE_PERFCOUNT_ENABLE", "COMPUTE_DISPATCH_SCRATCH_BASE_LO",
    "COMPUTE_DISPATCH_SCRATCH_BASE_HI", "SH_MEM_BASES", "SH_MEM_CONFIG")
#: The GC registers banked per VMID through GRBM_GFX_CNTL.VMID (SH_MEM_BASES: PRIVATE_BASE 15:0, SHARED_BASE 31:16)
VMID_BANKED = ("SH_MEM_BASES", "SH_MEM_CONFIG")
VMIDS = 16


class CpRegisters:
    """The CP's GC register offsets (bytes into BAR5) and fields ((mask, shift) pairs) in one register database."""

    def __init__(self, regs: Asic) -> None:
        def off(name: str) -> int:
            return regs.offset(f"gc.{name}")

        def fld(path: str) -> tuple[int, int]:
            f = regs.field(f"gc.{path}")
            return f.mask, f.shift

        self.grbm_gfx_cntl = off("GRBM_GFX_CNTL")
        self.grbm_status = off("GRBM_STATUS")
        #: first and last register of the per-queue HQD bank
        self.hqd_first, self.hqd_last = off("CP_MQD_BASE_ADDR"), off("CP_HQD_PQ_WPTR_HI")
        #: register name -> offset of every name in :data:`REGISTERS`
        self.offset = {n: off(n) for n in REGISTERS}
        self.pipeid, self.meid, self.queueid = (fld(f"GRBM_GFX_CNTL.{n}") for n in ("PIPEID", "MEID", "QUEUEID"))
        self.vmid = fld("GRBM_GFX_CNTL.VMID")
        self.hqd_vmid = fld("CP_HQD_VMID.VMID")
        self.doorbell_offset = fld("CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_OFFSET")
        self.doorbell_en = fld("CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_EN")
        self.queue_size = fld("CP_HQD_PQ_CONTROL.QUEUE_SIZE")
        self.range_lower = fld("CP_MEC_DOORBELL_RANGE_LOWER.DOORBELL_RANGE_LOWER")
        self.range_upper = fld("CP_MEC_DOORBELL_RANGE_UPPER.DOORBELL_RANGE_UPPER")
        self.fault_status = {n: fld(f"GCVM_L2_PROTECTION_FAULT_STATUS.{n}") for n in ("VMID", "RW", "MORE_FAULTS")}
        #: (offset, bits) the MEC's status registers read while a queue is hung: GRBM_STATUS2.CPC_BUSY, CP_CPC_STATUS
        #: MEC1_BUSY and CPC_BUSY, CP_CPC_BUSY_STAT.MEC1_PIPE0_BUSY (§8: MEC-side busy bits; which ones: inferred)
        self.mec_busy = tuple((off(reg), sum(regs.field(f"gc.{reg}.{f}").mask for f in names)) for reg, names in (
            ("GRBM_STATUS2", ("CPC_BUSY",)), ("CP_CPC_STATUS", ("MEC1_BUSY", "CPC_BUSY")),
            ("CP_CPC_BUSY_STAT", ("MEC1_PIPE0_BUSY",))))


CP_BUSY, GUI_ACTIVE, SPI_BUSY = 1 << 29, 1 << 31, 1 << 22  # GRBM_STATUS bits (specs/amd-compute.md §8)
MQD_HEADER = 0xC0310800  # §1.4
NOP_FILLER = 0xFFFF1000  # §2.3: PACKET3(NOP, 0x3FFF) is a one-dword packet
SH_START = PM4["PACKET3_SET_SH_REG_START"]
SH_END = PM4["PACKET3_SET_SH_REG_END"]
#: The PM4 type-3 packets the CP executes: opcode -> handler (the methods below, each registered with its opcode)
PACKETS: CommandTable[int] = CommandTable("pm4 packet")
PM4_NAMES = {v: k[len("PACKET3_"):] for k, v in reversed(list(PM4.items()))
             if k.startswith("PACKET3_") and v < 0x100 and k.count("_") >= 1 and not k.endswith(("_START", "_END"))}
#: RELEASE_MEM dw2 DATA_SEL bits 31:29 (§2.7; nvd.h gives the field as a function-like macro, not a constant)
DATA_SEL_SHIFT = 29
PACKET_COST_S = 0.1e-6    # per packet (inferred)
DISPATCH_COST_S = 2e-6    # per dispatch launch (inferred)
SHADER_HZ, CUS = 2.5e9, 96  # modelled issue rate, and the CUs waves spread over by default (a board passes its own)
DRAIN_PIPE, RESET_WAVES = 1, 2  # CP_HQD_DEQUEUE_REQUEST codes (§1.5, inferred; amd-bringup.md §3.3: 2 resets waves)
#: wall seconds a dispatch runs at its doorbell before it goes on beside the host (``cp.dispatch_slice``; inferred:
#: a pacing choice so that every ordinary dispatch completes inside its doorbell write)
DISPATCH_SLICE_S = 1.0
WATCHDOG = 4_000_000      # wave instructions of one dispatch before the queue is declared hung (``cp.watchdog``)
POLL_UNIT_S = 10e-9       # WAIT_REG_MEM's poll interval unit (dw6; inferred: one 100 MHz reference-clock tick)
#: WAIT_REG_MEM FUNCTION (dw1 bits 2:0, §2.9): (masked value, reference) -> condition met
COMPARE: dict[int, Callable[[int, int], bool]] = {
    0: lambda v, r: True, 1: lambda v, r: v < r, 2: lambda v, r: v <= r, 3: lambda v, r: v == r,
    4: lambda v, r: v != r, 5: lambda v, r: v >= r, 6: lambda v, r: v > r}
MEM_SPACE_REGISTER, MEM_SPACE_MEMORY = 0, 1  # dw1 bits 5:4
OPERATION_WAIT, OPERATION_WRITE_WAIT = 0, 1  # dw1 bits 7:6


def field_of(value: int, f: tuple[int, int]) -> int:
    """The value of field ``f`` (its (mask, shift) pair) in register value ``value``."""
    return (value & f[0]) >> f[1]


@dataclass
class Hqd:
    """One hardware queue descriptor: its register bank and what the CP keeps for it."""

    key: tuple[int, int, int]
    offset: dict[str, int]  # register name -> BAR5 offset (:attr:`CpRegisters.offset`)
    regs: dict[int, int] = field(default_factory=dict)
    sh: dict[int, int] = field(default_factory=dict)  # SET_SH_REG values (absolute byte offsets)
    error: str = ""
    hung: bool = False
    #: a WAIT_REG_MEM the queue is parked on: (packet dwords, its payload), None while it runs
    wait: tuple[int, list[int]] | None = None
    #: the dispatch the queue is running (it stays at its DISPATCH_DIRECT until it ends), None when none
    job: Running | None = None
    #: a DRAIN_PIPE dequeue waits for the running dispatch to end
    drain: bool = False
    mqd: bytes = b""
    #: (DOORBELL_OFFSET, DOORBELL_EN) fields of CP_HQD_PQ_DOORBELL_CONTROL
    doorbell_fields: tuple[tuple[int, int], tuple[int, int]] = ((0, 0), (0, 0))

    def r(self, name: str) -> int:
        """The queue's stored value of HQD register ``name`` (0 until written)."""
        return self.regs.get(self.offset[name], 0)

    @property
    def active(self) -> bool:
        """CP_HQD_ACTIVE bit 0: the queue is running."""
        return bool(self.r("CP_HQD_ACTIVE") & 1)

    @property
    def doorbell_dword(self) -> int | None:
        """The doorbell's dword index in BAR2 (CP_HQD_PQ_DOORBELL_CONTROL.DOORBELL_OFFSET), or None while DOORBELL_EN is
        clear."""
        ctl = self.r("CP_HQD_PQ_DOORBELL_CONTROL")
        return field_of(ctl, self.doorbell_fields[0]) if field_of(ctl, self.doorbell_fields[1]) else None

    def addr64(self, lo: str, hi: str, shift: int = 0, hi_mask: int = 0xFFFFFFFF) -> int:
        """The 64-bit value of the register pair ``lo``/``hi`` (``hi`` masked by ``hi_mask``), shifted left by ``shift``
        bits: a byte address from registers that hold it in 256-byte units or split in two."""
        return ((self.r(hi) & hi_mask) << 32 | self.r(lo)) << shift


@dataclass
class Running:
    """A dispatch that runs beside the host: its :class:`~tinyhw.mocks.rdna3.DispatchJob`, memory and observer, the
    DISPATCH_DIRECT's length in dwords, and its pacing: ``credit`` wall seconds it may still run, ``mark`` the board
    time and ``wall_mark`` the wall time (``time.monotonic()``) of its last slice's end."""

    job: Any
    mem: Any
    trace: Any
    credit: float
    mark: float
    wall_mark: float = field(default_factory=time.monotonic)
    n: int = 0


class _Traced:
    """GPUVM memory for the shader core that remembers the access that faulted (the address of the page that faulted,
    read or write: a wave's access may span pages, and the mapped ones before it are not the fault)."""

    def __init__(self, services: CpServices) -> None:
        self.s = services
        self.fault: tuple[int, bool] | None = None

    def read(self, addr: int, n: int) -> bytes:
        try:
            return self.s.read(addr, n)
        except VmFault as e:
            self.fault = (addr if e.addr is None else e.addr, False)
            raise

    def write(self, addr: int, data: bytes) -> None:
        try:
            self.s.write(addr, data)
        except VmFault as e:
            self.fault = (addr if e.addr is None else e.addr, True)
            raise


class _Undoable(_Traced):
    """:class:`_Traced` that the shader core can run workgroups in lockstep on (``peek``/``poke`` and the
    ``lockstep_begin``/``lockstep_end`` pair, :mod:`tinyhw.mocks.rdna3.dispatch`). Between the two every access is
    side-effect-free (:meth:`tinyhw.mocks.amd.gpuvm.GpuVm.peek`/``poke``: VRAM only, no TLB fill or walk count, no
    fault status, no ``fault`` here, writes uncounted): a system page or an address without a translation raises,
    the core undoes the run and runs the workgroups one at a time, where the real accesses have their real effects.
    A run that is kept settles what it owes at its end: the walks of the pages it touched that the TLB lacked, and
    its bytes in the VRAM write counter, the same as its accesses one at a time would have left (an undone run: the
    walks only, see :meth:`lockstep_end`)."""

    def __init__(self, services: CpServices) -> None:
        super().__init__(services)
        self.vm = services.vm
        self.wide = False
        self._seen: dict[int, tuple[bool, int]] = {}   # pages a lockstep run looked up that the TLB lacks
        self._written = 0

    def peek(self, addr: int, n: int) -> bytes:
        """``n`` bytes at ``addr`` with no effect (raises :class:`VmFault`, recording nothing, where the real access
        would fault or reach a system page)."""
        data: bytes = self.vm.peek(addr, n, self._seen)
        return data

    def poke(self, addr: int, data: bytes) -> None:
        """Write ``data`` at ``addr`` with no effect but the bytes (the undo of a lockstep run)."""
        self.vm.poke(addr, data, self._seen)

    def read(self, addr: int, n: int) -> bytes:
        """Through GPUVM; inside a lockstep run without effects (see the class text)."""
        if not self.wide:
            return super().read(addr, n)
        data: bytes = self.vm.peek(addr, n, self._seen)
        return data

    def write(self, addr: int, data: bytes) -> None:
        """Through GPUVM; inside a lockstep run without effects but the bytes (counted when the run is kept)."""
        if not self.wide:
            super().write(addr, data)
            return
        self.vm.poke(addr, data, self._seen)
        self._written += len(data)

    def lockstep_begin(self) -> None:
        """A lockstep run starts: accesses are side-effect-free until :meth:`lockstep_end`."""
        self.wide = True
        self._seen.clear()
        self._written = 0

    def lockstep_end(self, kept: bool) -> None:
        """The lockstep run ended: kept, its accesses' effects are settled; undone (its bytes already restored by
        :meth:`poke`), only the walks of the pages it looked up are: the code it fetched stays decoded, so the
        workgroups run again one at a time fetch none of it, where without lockstep their fetches would have walked
        those pages (the data pages they reach again anyway; a walk only caches what the tables say)."""
        self.wide = False
        self.vm.settle(self._seen, self._written if kept else 0)
        self._seen.clear()
        self._written = 0


class CommandProcessor:
    """MEC1/MEC2 compute queues of the emulated Navi31 (see the module docstring)."""

    def __init__(self, services: CpServices, regs: Asic, *, thread_trace: Any = None, perfmon: Any = None,
                 cus: int = CUS) -> None:
        self.s = services
        self.reg = CpRegisters(regs)
        self.watchdog = WATCHDOG
        #: wall seconds one dispatch may take to emulate before the queue is declared hung like the instruction
        #: watchdog (a grid of many short workgroups never reaches that one). Measured on a loaded 2-core machine:
        #: a VALU loop reaches the 4M-instruction watchdog in 27 s, so this leaves every such dispatch its time
        self.wall_watchdog: float | None = 60.0
        #: wall seconds a dispatch runs inside its doorbell write; a longer one goes on at the host's later accesses,
        #: each time for as long as the board clock (or real time, when further) moved since (the GPU runs beside the
        #: host, so a driver's fence timeout on the board clock also bounds the wall time spent emulating)
        self.dispatch_slice = DISPATCH_SLICE_S
        self.sq = ShaderArray(services.now, lambda: self.s.regs, regs)
        self.cus = cus  # the compute units the waves of a dispatch spread over (the board's GC info)
        self.thread_trace = thread_trace  # the SQ thread trace (tinyhw.mocks.amd.thread_trace), when the board has one
        self.perfmon = perfmon  # the performance counters (tinyhw.mocks.amd.perfmon), when the board has one
        self.power_on()

    def power_on(self) -> None:
        """Power-on / mode-1-reset state: no queues, GRBM_GFX_CNTL 0, the time cursor and the counters at zero, no
        decoded code."""
        self.grbm_gfx_cntl = 0
        self.hqds: dict[tuple[int, int, int], Hqd] = {}
        self.now = 0.0
        self.busy_s = 0.0
        self.running = False
        self.cache: Any = None  # the shader core's decoded code (numpy: imported at the first dispatch)
        #: every queue error of this command, oldest first (a dequeue clears a queue's error, not this list)
        self.errors: list[str] = []
        self.stats = {"doorbells": 0, "packets": 0, "dispatches": 0, "acquire_mem": 0, "release_mem": 0,
                      "set_sh_reg": 0, "nops": 0, "activations": 0, "dequeues": 0, "drains_stuck": 0,
                      "wave_instructions": 0, "wait_reg_mem": 0, "wait_polls": 0}
        self.last_dispatch: Any = None
        #: the per-VMID registers (:data:`VMID_BANKED`): BAR5 offset -> the 16 VMIDs' values
        self.vmid_regs: dict[int, list[int]] = {self.reg.offset[n]: [0] * VMIDS for n in VMID_BANKED}
        self.sq.power_on()

    # -- registers ------------------------------------------------------------------------------------------------
    def selected(self) -> Hqd:
        """The HQD that GRBM_GFX_CNTL selects now (its ME, pipe and queue fields), created on first use."""
        v = self.grbm_gfx_cntl
        key = (field_of(v, self.reg.meid), field_of(v, self.reg.pipeid), field_of(v, self.reg.queueid))
        if key not in self.hqds:
            self.hqds[key] = Hqd(key, self.reg.offset,
                                 doorbell_fields=(self.reg.doorbell_offset, self.reg.doorbell_en))
        return self.hqds[key]

    def handlers(self, known: set[int]) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """BAR5 handlers for GRBM_GFX_CNTL, GRBM_STATUS and every dword of the HQD block (its first and last register
        from the database: a driver writes the block whole from an MQD image, dwords the database names nothing at
        included)."""
        cntl, status = self.reg.grbm_gfx_cntl, self.reg.grbm_status
        mec = {o: (lambda bits=b: bits if self.hung() else 0) for o, b in self.reg.mec_busy}
        reads: dict[int, Callable[[], int]] = {cntl: lambda: self.grbm_gfx_cntl, status: self.grbm_status, **mec}
        writes: dict[int, Callable[[int], None]] = {cntl: self._select, status: lambda v: None}
        for off in range(self.reg.hqd_first, self.reg.hqd_last + 4, 4):
            reads[off] = lambda o=off: self.selected().regs.get(o, 0)
            writes[off] = lambda v, o=off: self.hqd_write(o, v)
        for off in self.vmid_regs:
            reads[off] = lambda o=off: self.vmid_regs[o][self.selected_vmid()]
            writes[off] = lambda v, o=off: self.vmid_regs[o].__setitem__(self.selected_vmid(), v & 0xFFFFFFFF)
        return reads, writes

    def selected_vmid(self) -> int:
        """The VMID that GRBM_GFX_CNTL.VMID selects now (the bank of SH_MEM_BASES and SH_MEM_CONFIG)."""
        return field_of(self.grbm_gfx_cntl, self.reg.vmid)

    def sh_mem_bases(self, vmid: int) -> int:
        """SH_MEM_BASES as the driver programmed it for ``vmid`` (0 if it never did since power-on)."""
        return self.vmid_regs[self.reg.offset["SH_MEM_BASES"]][vmid & (VMIDS - 1)]

    def _select(self, value: int) -> None:
        self.grbm_gfx_cntl = value & 0xFFFFFFFF

    def grbm_status(self) -> int:
        """GRBM_STATUS as the driver reads it: CP_BUSY and GUI_ACTIVE while any queue is hung, SPI_BUSY while waves
        are resident, else 0."""
        busy = CP_BUSY | GUI_ACTIVE if self.hung() else 0
        return busy | (SPI_BUSY if self.sq.resident else 0)

    def hung(self) -> bool:
        """A queue is hung (its dispatch ran past the budget), parked on a WAIT_REG_MEM or running a dispatch, until a
        dequeue (or, for a wait, until its condition holds; for a dispatch, until it ends)."""
        return any(q.hung or q.wait is not None or q.job is not None for q in self.hqds.values())

    @property
    def waiting(self) -> bool:
        """Some active queue is parked on a WAIT_REG_MEM or runs a dispatch (the board then calls :meth:`retry` at
        each host access)."""
        return any((q.wait is not None or q.job is not None) and q.active for q in self.hqds.values())

    def retry(self) -> None:
        """Look again at every parked WAIT_REG_MEM (what the hardware's continuous polling sees): a queue whose
        condition holds now goes on with its next packets; a running dispatch runs on (:meth:`_step`)."""
        for q in list(self.hqds.values()):
            if q.wait is not None or q.job is not None:
                self.kick(q)

    def any_active(self) -> bool:
        """True while any queue is active (the SMU's metrics then count the GFX engine busy)."""
        return any(q.active for q in self.hqds.values())

    def hqd_write(self, offset: int, value: int) -> None:
        """A write to an HQD register of the selected queue: stored; DEQUEUE_REQUEST on an active queue dequeues it,
        CP_HQD_ACTIVE 0 -> 1 activates it (reads its MQD)."""
        q = self.selected()
        was = q.active
        if offset == self.reg.offset["CP_HQD_DEQUEUE_REQUEST"] and value & 0xF and was:
            q.regs[offset] = value & 0xFFFFFFFF
            self.dequeue(q, value & 0xF)
            return
        q.regs[offset] = value & 0xFFFFFFFF
        if offset == self.reg.offset["CP_HQD_ACTIVE"] and value & 1 and not was:
            self.activate(q)

    def activate(self, q: Hqd) -> None:
        """§1.6 (b) step 17: the queue starts; the CP reads its MQD (§1.4) from its VMID's memory."""
        self.stats["activations"] += 1
        q.error, q.hung, q.sh, q.job, q.drain = "", False, {}, None, False
        self.cache = None
        mqd = q.addr64("CP_MQD_BASE_ADDR", "CP_MQD_BASE_ADDR_HI") & ~3
        if not mqd:
            return
        try:
            q.mqd = self.s.read(mqd, 512 * 4)
        except VmFault as exc:
            self._stop(q, f"the mqd at 0x{mqd:x} is not readable ({exc})")
            return
        header = int.from_bytes(q.mqd[:4], "little")
        if header != MQD_HEADER:
            self._stop(q, f"the mqd at 0x{mqd:x} has header 0x{header:08x}, not 0x{MQD_HEADER:08x}")

    def dequeue(self, q: Hqd, request: int = DRAIN_PIPE) -> None:
        """§1.8: DRAIN_PIPE lets the waves finish (nothing runs between packets here, so it completes at once --
        except on a hung queue, whose waves never finish: the queue stays active with the request pending, and on a
        queue running a dispatch: it completes when the dispatch ends); RESET_WAVES (or any other request) drops the
        waves; then the queue stops."""
        if q.hung and request == DRAIN_PIPE:
            self.stats["drains_stuck"] += 1
            return
        if q.job is not None and request == DRAIN_PIPE:
            q.drain = True
            return
        self.stats["dequeues"] += 1
        q.wait, q.job, q.drain = None, None, False
        q.regs[self.reg.offset["CP_HQD_ACTIVE"]] = q.r("CP_HQD_ACTIVE") & ~1
        if q.hung:
            self.sq.drop()  # the resident waves of its hung dispatch are reset
        q.hung = False

    def to_state(self) -> dict[str, Any]:
        """The queues a command leaves behind (the board state file): a queue outlives the process that made it; one
        still running a dispatch is kept hung (nothing emulates it once the process is gone). The per-VMID registers
        too (key ``vmid_regs``, only when one is not 0), as the hardware keeps them between processes."""
        out: dict[str, Any] = {}
        if any(any(v) for v in self.vmid_regs.values()):
            out["vmid_regs"] = {f"{o:x}": list(v) for o, v in sorted(self.vmid_regs.items())}
        return out | {f"{k[0]}.{k[1]}.{k[2]}": {"regs": {f"{o:x}": v for o, v in sorted(q.regs.items())},
                                          "hung": q.hung or q.job is not None,
                                          "error": q.error or ("a dispatch was still running when the process that "
                                                               "submitted it ended" if q.job is not None else "")}
                for k, q in sorted(self.hqds.items()) if q.active or q.hung}

    def from_state(self, state: dict[str, Any]) -> None:
        """Queues an earlier command left (their rings and MQDs are gone with VRAM; a hung queue stays hung), and the
        per-VMID registers it programmed."""
        for key, ent in state.items():
            if key == "vmid_regs":
                for o, vals in ent.items():
                    if int(o, 16) in self.vmid_regs and len(vals) == VMIDS:
                        self.vmid_regs[int(o, 16)] = [int(x) & 0xFFFFFFFF for x in vals]
                continue
            me, pipe, queue = (int(x) for x in key.split("."))
            q = self.hqds[(me, pipe, queue)] = Hqd((me, pipe, queue), self.reg.offset,
                                                  doorbell_fields=(self.reg.doorbell_offset, self.reg.doorbell_en))
            q.regs = {int(o, 16): int(v) & 0xFFFFFFFF for o, v in ent.get("regs", {}).items()
                      if self.reg.hqd_first <= int(o, 16) <= self.reg.hqd_last}
            q.hung, q.error = bool(ent.get("hung")), str(ent.get("error", ""))

    def _stop(self, q: Hqd, why: str) -> None:
        self._error(q, why)

    def _error(self, q: Hqd, why: str) -> None:
        """Stop queue ``q`` with ``why``, and keep it in :attr:`errors` (a dequeue clears the queue's, not that)."""
        q.error = why
        self.errors.append(f"queue {q.key}: {why}")

    def status(self) -> list[dict[str, Any]]:
        """Every queue the driver touched: its key, activity, parked WAIT_REG_MEM, running dispatch, pointers and error
        (for tests and notes)."""
        return [{"me": k[0], "pipe": k[1], "queue": k[2], "active": q.active, "hung": q.hung, "error": q.error,
                 "waiting": q.wait is not None, "running": q.job is not None,
                 "rptr": q.r("CP_HQD_PQ_RPTR"), "wptr": q.addr64("CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI")}
                for k, q in sorted(self.hqds.items())]

    # -- doorbells ------------------------------------------------------------------------------------------------
    def on_doorbell(self, offset: int, value: int, read32: Callable[[int], int]) -> bool:
        """A BAR2 dword write at byte ``offset``; True when it was a compute queue's doorbell."""
        lower = field_of(self.s.regs.get(self.reg.offset["CP_MEC_DOORBELL_RANGE_LOWER"], 0), self.reg.range_lower) << 2
        upper = field_of(self.s.regs.get(self.reg.offset["CP_MEC_DOORBELL_RANGE_UPPER"], 0), self.reg.range_upper) << 2
        for q in self.hqds.values():
            dw = q.doorbell_dword
            if dw is None or not q.active or offset not in (4 * dw, 4 * dw + 4):
                continue
            if not lower <= 4 * dw <= upper:
                continue  # outside the MEC's doorbell range: the CP never sees it (§1.3 step 2)
            if offset == 4 * dw + 4:
                wptr = read32(4 * dw) | read32(4 * dw + 4) << 32
                q.regs[self.reg.offset["CP_HQD_PQ_WPTR_LO"]] = wptr & 0xFFFFFFFF
                q.regs[self.reg.offset["CP_HQD_PQ_WPTR_HI"]] = wptr >> 32
                self.stats["doorbells"] += 1
                self.kick(q)
            return True
        return False

    # -- execution ------------------------------------------------------------------------------------------------
    def kick(self, q: Hqd) -> None:
        """Run queue ``q`` from its read pointer to its write pointer, unless it is stopped, hung, inactive or the CP is
        already running (a fence landing during a run does not re-enter). The time cursor starts at the board clock
        if it lags behind."""
        if self.running or q.error or q.hung or not q.active:
            return
        self.now = max(self.now, self.s.now())
        self.running = True
        try:
            self._run(q)
        finally:
            self.running = False

    def _ring(self, q: Hqd) -> tuple[int, int]:
        base = q.addr64("CP_HQD_PQ_BASE", "CP_HQD_PQ_BASE_HI", 8) & ((1 << 48) - 1)
        return base, 1 << (field_of(q.r("CP_HQD_PQ_CONTROL"), self.reg.queue_size) + 1)

    def _run(self, q: Hqd) -> None:
        base, size = self._ring(q)
        wptr = q.addr64("CP_HQD_PQ_WPTR_LO", "CP_HQD_PQ_WPTR_HI")
        rptr = q.r("CP_HQD_PQ_RPTR")
        if q.job is not None:  # running a dispatch (its DISPATCH_DIRECT at rptr): run on
            n = q.job.n
            if not self._step(q):
                return
            rptr = (rptr + n) & 0xFFFFFFFF
            q.regs[self.reg.offset["CP_HQD_PQ_RPTR"]] = rptr
            self._report_rptr(q, rptr)
            if q.drain:  # a DRAIN_PIPE waited for it
                self.dequeue(q, DRAIN_PIPE)
                return
        if q.wait is not None:  # parked on a WAIT_REG_MEM at rptr: look again
            n, body = q.wait
            try:
                met = self._wait_check(q, body)
            except VmFault as exc:
                self._vm_fault(q, None, exc)
                return
            if not met:
                return
            q.wait = None
            self._cost(body[5] * POLL_UNIT_S)  # the CP notices at its next poll
            rptr = (rptr + n) & 0xFFFFFFFF
            q.regs[self.reg.offset["CP_HQD_PQ_RPTR"]] = rptr
            self._report_rptr(q, rptr)
        # the 32-bit RPTR (§1.7) against the low bits of the 64-bit WPTR, both in dwords
        while (rptr - wptr) & 0xFFFFFFFF and not q.error and not q.hung:
            pending = (wptr - rptr) & 0xFFFFFFFF
            if pending > size:
                self._fail(q, f"write pointer 0x{wptr:x} is more than a ring ({size} dwords) past the read pointer "
                              f"0x{rptr:x}")
                return
            try:
                header = self._dword(base, size, rptr)
                n = self._packet_len(header)
                if n > pending:
                    self._fail(q, f"packet 0x{header:08x} at read pointer 0x{rptr:x} needs {n} dwords, "
                                  f"only {pending} were submitted")
                    return
                body = [self._dword(base, size, rptr + i) for i in range(1, n)]
                self._execute(q, header, body, rptr)
            except VmFault as exc:
                self._vm_fault(q, None, exc)
                return
            if q.wait is not None:  # a WAIT_REG_MEM whose condition does not hold: the queue stays at the packet
                q.wait = (n, q.wait[1])
                return
            if q.job is not None:  # a dispatch that goes on beside the host: the queue stays at its packet
                q.job.n = n
                return
            rptr = (rptr + n) & 0xFFFFFFFF
            q.regs[self.reg.offset["CP_HQD_PQ_RPTR"]] = rptr
            self._report_rptr(q, rptr)

    def _dword(self, base: int, size: int, index: int) -> int:
        return int.from_bytes(self.s.read(base + 4 * (index % size), 4), "little")

    @staticmethod
    def _packet_len(header: int) -> int:
        kind = header >> 30
        if kind == PM4["PACKET_TYPE2"]:
            return 1
        if header == NOP_FILLER:
            return 1
        return ((header >> 16) & 0x3FFF) + 2

    def _report_rptr(self, q: Hqd, rptr: int) -> None:
        addr = q.addr64("CP_HQD_PQ_RPTR_REPORT_ADDR", "CP_HQD_PQ_RPTR_REPORT_ADDR_HI", 0, 0xFFFF) & ~3
        if addr:
            self.s.write(addr, rptr.to_bytes(4, "little"))

    def _cost(self, dt: float) -> None:
        self.now += dt
        self.busy_s += dt

    def _fail(self, q: Hqd, why: str, *, gap: bool = False) -> None:
        """Stop the queue with ``why``; a model gap (an unknown packet, an unimplemented instruction) raises on
        strict boards."""
        self._error(q, why)
        if gap and self.s.strict:
            raise StrictEmulationError(f"compute queue {q.key}: {why}",
                                       hint="run without strict to see the queue stop instead")

    def _execute(self, q: Hqd, header: int, body: list[int], at: int) -> None:
        self.stats["packets"] += 1
        self._cost(PACKET_COST_S)
        kind = header >> 30
        if kind == PM4["PACKET_TYPE2"]:
            self.stats["nops"] += 1
            return
        op = (header >> 8) & 0xFF
        if kind != PM4["PACKET_TYPE3"] or op not in PACKETS:
            name = PM4_NAMES.get(op, "unknown") if kind == PM4["PACKET_TYPE3"] else f"type-{kind}"
            self._fail(q, f"pm4 packet opcode 0x{op:02x} ({name}, header 0x{header:08x}) at read pointer 0x{at:x} "
                          "is not modelled", gap=True)
            return
        PACKETS.dispatch(self, op, q, body)

    @PACKETS.handles(PM4["PACKET3_NOP"])
    def _pm4_nop(self, q: Hqd, body: list[int]) -> None:
        self.stats["nops"] += 1

    @PACKETS.handles(PM4["PACKET3_ACQUIRE_MEM"])
    def _pm4_acquire_mem(self, q: Hqd, body: list[int]) -> None:
        self.stats["acquire_mem"] += 1  # data caches are not modelled (§2.6)
        if len(body) >= 7 and body[6] & 3:  # GCR_CNTL.GLI_INV: the instruction cache, i.e. the decoded code
            self.cache = None

    @PACKETS.handles(PM4["PACKET3_EVENT_WRITE"])
    def _pm4_event_write(self, q: Hqd, body: list[int]) -> None:
        """EVENT_WRITE: EVENT_TYPE in bits 5:0 of the first payload dword; the thread trace hears every event
        (THREAD_TRACE_FINISH matters to it), the others (CS_PARTIAL_FLUSH, ...) need no action here."""
        self.stats["event_write"] = self.stats.get("event_write", 0) + 1
        if body and self.thread_trace is not None:
            self.thread_trace.on_event(body[0] & 0x3F)

    @PACKETS.handles(PM4["PACKET3_SET_SH_REG"])
    def _pm4_set_sh_reg(self, q: Hqd, body: list[int]) -> None:
        self.stats["set_sh_reg"] += 1
        if not body:
            return
        first = SH_START + body[0]
        for i, v in enumerate(body[1:]):
            reg = first + i
            if not SH_START <= reg < SH_END:
                self._fail(q, f"SET_SH_REG writes dword 0x{reg:x}, outside the sh window", gap=True)
                return
            q.sh[4 * reg] = v

    def _regs(self, q: Hqd, dim: tuple[int, int, int], initiator: int) -> DispatchRegs:
        from tinyhw.mocks.rdna3 import DispatchRegs

        sh = q.sh

        def g(name: str) -> int:
            return sh.get(self.reg.offset[name], 0)

        return DispatchRegs(
            pgm_lo=g("COMPUTE_PGM_LO"), pgm_hi=g("COMPUTE_PGM_HI"), rsrc1=g("COMPUTE_PGM_RSRC1"),
            rsrc2=g("COMPUTE_PGM_RSRC2"), rsrc3=g("COMPUTE_PGM_RSRC3"),
            user_data=tuple(sh.get(self.reg.offset["COMPUTE_USER_DATA_0"] + 4 * i, 0) for i in range(16)),
            num_thread=tuple(g(f"COMPUTE_NUM_THREAD_{a}") & 0xFFFF for a in "XYZ"),  # type: ignore[arg-type]
            dim=dim, start=tuple(g(f"COMPUTE_START_{a}") for a in "XYZ"),  # type: ignore[arg-type]
            initiator=initiator, tmpring_size=g("COMPUTE_TMPRING_SIZE"),
            scratch_base_lo=g("COMPUTE_DISPATCH_SCRATCH_BASE_LO"),
            scratch_base_hi=g("COMPUTE_DISPATCH_SCRATCH_BASE_HI"),
            sh_mem_bases=self.sh_mem_bases(field_of(q.r("CP_HQD_VMID"), self.reg.hqd_vmid)))

    @PACKETS.handles(PM4["PACKET3_DISPATCH_DIRECT"])
    def _pm4_dispatch_direct(self, q: Hqd, body: list[int]) -> None:
        if len(body) < 4:
            self._fail(q, f"DISPATCH_DIRECT with {len(body)} payload dwords (4 needed)")
            return
        from tinyhw.mocks.rdna3 import CodeCache, DispatchJob, ShaderError, Unimplemented

        self.stats["dispatches"] += 1
        if self.cache is None:
            self.cache = CodeCache()
        dim = (body[0], body[1], body[2])
        regs = self._regs(q, dim, body[3])
        mem = _Undoable(self.s) if self.s.vm is not None and self.s.vm.can_poke else _Traced(self.s)
        self._cost(DISPATCH_COST_S)
        trace = self._observer(q)
        try:
            job = DispatchJob(regs, mem, strict=self.s.strict, cache=self.cache, watchdog=self.watchdog, trace=trace,
                              wall_limit=self.wall_watchdog)
        except Unimplemented as exc:
            self._fail(q, f"dispatch stopped: {exc}", gap=True)
            return
        except ShaderError as exc:      # a dispatch the hardware could not run (scratch without a ring)
            self._fail(q, f"dispatch stopped: {exc}")
            return
        q.job = Running(job, mem, trace, self.dispatch_slice, self.s.now())
        self._step(q)

    def _step(self, q: Hqd) -> bool:
        """Run queue ``q``'s dispatch for the wall time it has: its credit plus how far the board clock or, when
        further, real time moved since its last slice (the GPU runs while the host does too, also where the host
        touches the board seldom); True when it ended (completed, hung or stopped), False while it goes on."""
        from tinyhw.mocks.rdna3 import MemoryFault, ShaderError, Unimplemented, WatchdogExpired

        run = q.job
        assert run is not None
        t, w = self.s.now(), time.monotonic()
        run.credit += max(t - run.mark, w - run.wall_mark)
        run.mark, run.wall_mark = t, w
        if run.credit <= 0:
            return False
        spent = run.job.wall
        mem, trace = run.mem, run.trace
        try:
            res = run.job.step(run.credit)
            if res is None:
                run.credit -= run.job.wall - spent
                run.wall_mark = time.monotonic()  # the emulation's own time is not the host's
                return False
        except Unimplemented as exc:
            q.job = None
            self._fail(q, f"dispatch stopped: {exc}", gap=True)
            return True
        except WatchdogExpired as exc:
            q.job = None
            q.hung = True
            self._error(q, f"dispatch hung (the watchdog expired): {exc}")
            if exc.dispatch is not None:
                self.sq.admit(exc.dispatch)  # its running workgroup's waves stay resident
            return True
        except (VmFault, MemoryFault) as exc:
            q.job = None
            self._vm_fault(q, mem.fault, exc)
            return True
        except (ShaderError, ValueError) as exc:
            q.job = None
            self._fail(q, f"dispatch stopped: {exc}")
            return True
        q.job = None
        self.last_dispatch = res
        if trace is not None:
            if self.thread_trace is not None:
                self.thread_trace.after_dispatch()
            if trace.counts is not None:
                self.perfmon.add_dispatch(trace.counts, trace.cycles())
        self.stats["wave_instructions"] += res.wave_instructions
        parallel = max(1, min(res.waves, self.cus))
        self._cost(res.cycles / SHADER_HZ / parallel)
        return True

    def _observer(self, q: Hqd) -> Any:
        """What watches the dispatch's waves: the thread trace (COMPUTE_THREAD_TRACE_ENABLE) and the performance
        counters (COMPUTE_PERFCOUNT_ENABLE while CP_PERFMON_CNTL counts); None when neither is on."""
        tt, pm = self.thread_trace, self.perfmon
        tracing = q.sh.get(self.reg.offset["COMPUTE_THREAD_TRACE_ENABLE"], 0) & 1
        trace = tt.for_dispatch(self.now) if tt is not None and tracing else None
        if pm is not None and pm.counting and q.sh.get(self.reg.offset["COMPUTE_PERFCOUNT_ENABLE"], 0) & 1:
            if trace is None:
                from tinyhw.mocks.rdna3.sqtt import DispatchTrace

                trace = DispatchTrace.counting_only(tt.ses if tt is not None else 1)
            trace.counts = {}
        return trace

    def _vm_fault(self, q: Hqd, where: tuple[int, bool] | None, exc: Exception) -> None:
        """A GPUVM fault: the protection-fault registers name the page, VMID 0 and the direction; the queue stops."""
        status = 1
        if where is not None:
            addr, write = where
            m, s = self.reg.fault_status["RW"]
            status |= (int(write) << s) & m
            self.s.regs[self.reg.offset["GCVM_L2_PROTECTION_FAULT_ADDR_LO32"]] = (addr >> 12) & 0xFFFFFFFF
            self.s.regs[self.reg.offset["GCVM_L2_PROTECTION_FAULT_ADDR_HI32"]] = (addr >> 44) & 0xF
        self.s.regs[self.reg.offset["GCVM_L2_PROTECTION_FAULT_STATUS"]] = status
        self._error(q, f"gpu vm fault: {exc}")

    @PACKETS.handles(PM4["PACKET3_WAIT_REG_MEM"])
    def _pm4_wait_reg_mem(self, q: Hqd, body: list[int]) -> None:
        """WAIT_REG_MEM (§2.9): check once (after OPERATION 1's register write); park the queue when it fails."""
        self.stats["wait_reg_mem"] += 1
        if len(body) < 6:
            self._fail(q, f"WAIT_REG_MEM with {len(body)} payload dwords (6 needed)")
            return
        ctl = body[0]
        function, space, operation = ctl & 7, ctl >> 4 & 3, ctl >> 6 & 3
        if function not in COMPARE or space not in (MEM_SPACE_REGISTER, MEM_SPACE_MEMORY) or \
                operation not in (OPERATION_WAIT, OPERATION_WRITE_WAIT) or \
                (operation == OPERATION_WRITE_WAIT and space != MEM_SPACE_REGISTER):
            self._fail(q, f"WAIT_REG_MEM control 0x{ctl:08x} (function {function}, mem_space {space}, operation "
                          f"{operation}) is not modelled", gap=True)
            return
        if space == MEM_SPACE_MEMORY and body[1] & 3:
            self._fail(q, f"WAIT_REG_MEM address 0x{body[2] << 32 | body[1]:x} is not dword aligned")
            return
        if operation == OPERATION_WRITE_WAIT and not self._reg_write(q, body[1], body[3]):
            return
        if not self._wait_check(q, body):
            q.wait = (0, body)  # the packet length is filled in by the ring loop

    def _wait_check(self, q: Hqd, body: list[int]) -> bool:
        """One poll of a WAIT_REG_MEM (``body``: its payload): ``(value & mask) FUNCTION reference``; counted in
        ``wait_polls``. A register that is not there fails the queue (a model gap) and counts as met."""
        self.stats["wait_polls"] += 1
        ctl = body[0]
        if ctl >> 4 & 3 == MEM_SPACE_MEMORY:
            value = int.from_bytes(self.s.read((body[2] << 32 | body[1]) & ((1 << 64) - 1), 4), "little")
        else:
            reg = body[2] if ctl >> 6 & 3 == OPERATION_WRITE_WAIT else body[1]
            got = self._reg_read(q, reg)
            if got is None:
                return True
            value = got
        return COMPARE[ctl & 7](value & body[4], body[3])

    def _reg_read(self, q: Hqd, dword: int) -> int | None:
        value = self.s.reg_read(4 * dword)
        if value is None:
            self._fail(q, f"WAIT_REG_MEM polls register dword 0x{dword:x}, which the board does not model", gap=True)
        return value

    def _reg_write(self, q: Hqd, dword: int, value: int) -> bool:
        ok = self.s.reg_write(4 * dword, value & 0xFFFFFFFF)
        if not ok:
            self._fail(q, f"WAIT_REG_MEM writes register dword 0x{dword:x}, which the board does not model", gap=True)
        return ok

    @PACKETS.handles(PM4["PACKET3_RELEASE_MEM"])
    def _pm4_release_mem(self, q: Hqd, body: list[int]) -> None:
        self.stats["release_mem"] += 1
        if len(body) < 6:
            self._fail(q, f"RELEASE_MEM with {len(body)} payload dwords (7 needed)")
            return
        data_sel = body[1] >> DATA_SEL_SHIFT & 7
        addr = (body[3] << 32 | body[2]) & ((1 << 64) - 1)
        data = body[5] << 32 | body[4]
        if data_sel == 0:
            return
        size = 4 if data_sel == 1 else 8
        if addr % size:
            self._fail(q, f"RELEASE_MEM destination 0x{addr:x} is not {size}-byte aligned")
            return

        when = self.now  # the end of every earlier packet's modelled time: the time stamp is taken then

        def land() -> None:
            value = self.s.ticks(when) if data_sel in (3, 4) else data
            try:
                self.s.write(addr, (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little"))
            except VmFault as exc:
                self._vm_fault(q, (addr, True), exc)

        self.s.at(when, land)
