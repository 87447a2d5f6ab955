"""The SDMA engine 0 / queue 0 of the emulated Navi31: a ring in GPU memory executed on doorbell writes.

Facts: specs/amd-bringup.md §4.2 step 10 (SDMA ≥ 6 start: F32_CNTL halt 0, doorbell routing), §4.2 (one SDMA
queue at engine 0 queue 0), §1.1 (BAR2 doorbells), §4.5 (addresses through VMID0, :mod:`.gpuvm`);
specs/asm24-usb-bridge.md §9.1 (the ring is written without reading the read pointer; zero dwords are no-ops
that fill the tail before a wrap), §9.3/§9.4 (POLL on memory, COPY, 64-bit WRITE, the release write into
0x82200C). Packet layouts: the generated ``tinyhw.autogen.sdma_v6_0_0_pkt_open`` (Linux header).

What the driver programs (register database names, gc block):

* ``SDMA0_QUEUE0_RB_BASE``/``_HI`` = ring address >> 8 (a GPU address), ``RB_CNTL``: RB_ENABLE, RB_SIZE = log2
  of the ring size in dwords; ``RB_RPTR_ADDR_LO/HI`` where the engine writes back its read pointer (bytes,
  64-bit) when ``RPTR_WRITEBACK_ENABLE``; ``DOORBELL`` ENABLE and ``DOORBELL_OFFSET`` OFFSET = the doorbell's
  dword index in BAR2; ``SDMA0_F32_CNTL`` HALT must read 0 (step 10), else doorbells are only remembered.
* A doorbell is a 64-bit write pointer in bytes (two dword writes, low first: the high dword kicks).

Packets executed (everything else stops the engine with ``error``; strict boards raise):
NOP (op 0, with its count of extra dwords; a zero dword is a one-dword NOP), COPY_LINEAR (op 1/0: count =
bytes - 1), WRITE_UNTILED (op 2/0: count = dwords - 1), FENCE (op 5: one dword), TRAP (op 6: counted),
POLL_REGMEM with mem_poll (op 8: functions always/<, <=, ==, !=, >=, > on (value & mask)), TIMESTAMP
GET/GET_GLOBAL (op 13/1, 13/2: the board's virtual time in 10 ns ticks, inferred 100 MHz), INDIRECT (op 4: the
packets of an indirect buffer in VMID0, one level deep; its layout from the same generated header).

A POLL whose condition fails parks the engine; it re-checks on every later doorbell and whenever the board
reports bus activity (the bridge calls :meth:`Navi31Board.bus_activity` after each USB transfer), i.e. the
retry loop is modelled as "retry forever" (the driver's retry count 0xFFF is the hardware's infinite value,
inferred). ``sdma=hang`` (device-string option) makes the engine never start: rings are accepted, never
consumed, the read pointer never moves.

Injectable copy faults (device-string option ``sdma=``, for checks that must catch a broken copy engine): ``nop``:
every COPY_LINEAR is consumed and moves nothing; ``skip-in``: copies from system memory (the bridge SRAM, a host
DMA buffer) into VRAM move nothing; ``skip-out``: copies from VRAM into system memory move nothing; ``shift1m``:
the VRAM side of every copy (source or destination) is 1 MiB higher than the packet says. Fences, writes and polls
still run, so the driver sees every copy "complete". Dropped or shifted copies are counted (``faulted_copies``).

Timing (the engine takes time on the board clock): ``SdmaTiming`` gives a cost per packet and per
byte by memory kind (VRAM, system = the bridge over PCIe Gen3 x4); all of them are inferred parameters (asm24 spec
§1: "the PCIe side is never the bottleneck"; ``system_read_rate`` 3.0 GB/s is below the Gen3 x4 line rate). The
engine keeps its own time cursor ``now`` on the board's virtual clock: a kick (doorbell, bus activity) at host time
h moves it to at least h (an engine parked on a POLL resumes when the data that satisfies it landed, i.e. at the
transfer that kicked it), and every packet advances it by its cost. Execution is functional at the kick (VRAM, the
read pointer and its write-back change at once: a small, documented optimism for register reads of the read
pointer), but what the engine writes into the bridge over PCIe (the copy-in drain fence, the copy-out release
write) is handed to the bridge with its time ``now`` and becomes visible to the host only at that virtual time
(:meth:`tinyhw.mocks.bridge.asm24.Asm24Bridge.dma_write`). ``busy_s`` is the sum of the costs.
On ``mock:navi31`` the system pages are host memory behind the emulated IOMMU (:mod:`.iommu`), which charges
every byte on the board clock at the link's DMA rate; an IOMMU fault (:class:`~.faults.BusFault`) stops the
engine at that packet without a strict-mode error.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.autogen.sdma_v6_0_0_pkt_open import CONSTANTS as SDMA_PACKET
from tinyhw.commands import CommandTable
from tinyhw.errors import StrictEmulationError
from tinyhw.mocks.amd.gpuvm import VmFault
from tinyhw.mocks.common.faults import BusFault
from tinyhw.mocks.common.services import BoardServices
from tinyhw.regs.asic import Asic

#: the queue's registers and fields (register database names in the gc block, without ``SDMA0_``)
REGISTERS = (
    "QUEUE0_RB_CNTL", "QUEUE0_RB_BASE", "QUEUE0_RB_BASE_HI", "QUEUE0_RB_RPTR", "QUEUE0_RB_RPTR_HI",
    "QUEUE0_RB_WPTR", "QUEUE0_RB_WPTR_HI", "QUEUE0_RB_RPTR_ADDR_LO", "QUEUE0_RB_RPTR_ADDR_HI", "QUEUE0_DOORBELL",
    "QUEUE0_DOORBELL_OFFSET", "F32_CNTL")
FIELDS = (
    "QUEUE0_RB_CNTL.RB_ENABLE", "QUEUE0_RB_CNTL.RB_SIZE", "QUEUE0_RB_CNTL.RPTR_WRITEBACK_ENABLE",
    "QUEUE0_DOORBELL.ENABLE", "QUEUE0_DOORBELL_OFFSET.OFFSET", "F32_CNTL.HALT")
VMID = 0  # the queue's addresses go through VMID0 (§4.5)
#: packets by (op, sub-op), or (op, None) for every sub-op; a handler returns the packet's length in dwords,
#: or None when the engine must stop at it (parked on a POLL, or stopped)
PACKETS: CommandTable[tuple[int, int | None]] = CommandTable("sdma packet")
Dwords = Callable[[int], int]  # the i-th dword of the packet being executed

OP_NOP, OP_COPY, OP_WRITE, OP_FENCE, OP_TRAP, OP_POLL, OP_TIMESTAMP, OP_INDIRECT = (
    SDMA_PACKET[f"SDMA_OP_{name}"] for name in ("NOP", "COPY", "WRITE", "FENCE", "TRAP", "POLL_REGMEM", "TIMESTAMP",
                                                "INDIRECT"))
SUB_COPY_LINEAR, SUB_WRITE_LINEAR = SDMA_PACKET["SDMA_SUBOP_COPY_LINEAR"], SDMA_PACKET["SDMA_SUBOP_WRITE_LINEAR"]
SUB_TS_GET, SUB_TS_GLOBAL = SDMA_PACKET["SDMA_SUBOP_TIMESTAMP_GET"], SDMA_PACKET["SDMA_SUBOP_TIMESTAMP_GET_GLOBAL"]
COPY_FAULTS = (None, "nop", "skip-in", "skip-out", "shift1m")  # injectable copy faults (``sdma=`` option)
SHIFT = 1 << 20  # ``shift1m``: how far the VRAM side of a copy lands off


def fld(dwords: list[int] | tuple[int, ...], name: str) -> int:
    """Field ``name`` (e.g. ``COPY_LINEAR_COUNT_count``) of a packet, from the generated offsets/masks/shifts."""
    key = f"SDMA_PKT_{name}"
    return (dwords[SDMA_PACKET[key + "_offset"]] >> SDMA_PACKET[key + "_shift"]) & SDMA_PACKET[key + "_mask"]


def _addr(dwords: list[int], lo: str, hi: str) -> int:
    return fld(dwords, lo) | fld(dwords, hi) << 32


@dataclass
class SdmaTiming:
    """Inferred costs of the emulated engine (seconds, bytes per second)."""

    packet_s: float = 0.2e-6
    vram_rate: float = 400e9
    system_read_rate: float = 3.0e9  # PCIe Gen3 x4 reads of the bridge SRAM (inferred, below the 3.9 GB/s line)
    system_write_rate: float = 3.0e9
    poll_s: float = 1e-6  # one POLL_REGMEM check


class SdmaEngine:
    """SDMA0 queue 0 of the emulated board."""

    def __init__(self, services: BoardServices, regs: Asic, *, hang: bool = False, timing: SdmaTiming | None = None,
                 fault: str | None = None, strict: bool = False) -> None:
        if fault not in COPY_FAULTS:
            raise ValueError(f"unknown sdma copy fault {fault!r}")
        self.services = services
        self.strict = strict
        self.offsets = {n: regs.offset(f"gc.SDMA0_{n}") for n in REGISTERS}
        self.F = {n: regs.field(f"gc.SDMA0_{n}") for n in FIELDS}
        self.hang = hang
        self.fault = fault
        self.timing = timing or SdmaTiming()
        self.waiting = False
        self.error: str | None = None
        self.running = False
        self.stats = dict.fromkeys(("doorbells", "packets", "copies", "bytes_copied", "system_bytes_read",
                                    "system_bytes_written", "polls", "poll_retries", "fences", "traps", "writes",
                                    "timestamps", "faulted_copies", "indirect_buffers"), 0)
        self._ring_at = 0  # the ring read pointer of the packet being executed
        self._in_ib = False
        self._ib_resume: tuple[int, int] | None = None  # (ring read pointer of an INDIRECT, dword to resume at)
        self.busy_s = 0.0
        self.now = 0.0  # the engine's time cursor on the board clock (virtual seconds)
        self._status_at = regs.offset("gc.SDMA0_STATUS_REG")
        self._idle_bits = 0
        for f in regs.reg("gc.SDMA0_STATUS_REG").fields:  # every ..._IDLE field, IDLE and RB_EMPTY
            if f.name.endswith("IDLE") or f.name == "RB_EMPTY":
                self._idle_bits |= f.mask

    def _spend(self, dt: float) -> None:
        self.busy_s += dt
        self.now += dt

    # -- registers ----------------------------------------------------------------------------------------------
    def _reg(self, name: str) -> int:
        return self.services.reg_read(self.offsets[name])

    def _field(self, name: str) -> int:
        f = self.F[name]
        return (self._reg(name.split(".", maxsplit=1)[0]) & f.mask) >> f.shift

    def status_reg(self) -> int:
        """SDMA0_STATUS_REG: the idle bits (IDLE, RB_EMPTY and every other ..._IDLE field) when
        the ring is drained and nothing waits; 0 while work is pending, parked on a POLL, stopped or hung
        (inferred: the register is only a list of fields in the database)."""
        rptr = self._reg("QUEUE0_RB_RPTR") | self._reg("QUEUE0_RB_RPTR_HI") << 32
        wptr = self._reg("QUEUE0_RB_WPTR") | self._reg("QUEUE0_RB_WPTR_HI") << 32
        if rptr != wptr or self.waiting or self.error or self.running:
            return 0
        return self._idle_bits

    def handlers(self) -> dict[int, Callable[[], int]]:
        """BAR5 read handlers: SDMA0_STATUS_REG."""
        return {self._status_at: self.status_reg}

    def doorbell_offset(self) -> int | None:
        """Byte offset in BAR2 of the queue's doorbell, None while disabled."""
        if not self._field("QUEUE0_DOORBELL.ENABLE"):
            return None
        return self._field("QUEUE0_DOORBELL_OFFSET.OFFSET") * 4

    def on_doorbell(self, offset: int, doorbell_read32: Callable[[int], int]) -> None:
        """A BAR2 dword write at ``offset`` (``doorbell_read32`` reads the doorbell page); the high dword of the
        queue's doorbell sets the write pointer and kicks."""
        where = self.doorbell_offset()
        if where is None or offset not in (where, where + 4):
            return
        wptr = doorbell_read32(where) | doorbell_read32(where + 4) << 32
        self.services.reg_write(self.offsets["QUEUE0_RB_WPTR"], wptr & 0xFFFFFFFF)
        self.services.reg_write(self.offsets["QUEUE0_RB_WPTR_HI"], wptr >> 32)
        if offset == where + 4:
            self.stats["doorbells"] += 1
            self.kick()

    # -- execution ----------------------------------------------------------------------------------------------
    def kick(self) -> None:
        """Run the ring until it is empty, parked on a POLL, stopped by an error, halted or hung."""
        if self.hang or self.running or self.error or self._field("F32_CNTL.HALT"):
            return
        if not self._field("QUEUE0_RB_CNTL.RB_ENABLE"):
            return
        self.now = max(self.now, self.services.command_now())  # nothing runs before the kick that started it
        self.running = True
        try:
            self._run()
        except BusFault as exc:  # an iommu fault: the engine stops at this packet, the fence never comes
            self.error = str(exc)
        except VmFault as exc:
            self._stop(str(exc))
        finally:
            self.running = False

    def _stop(self, message: str) -> None:
        self.error = message
        if self.strict:
            raise StrictEmulationError(f"sdma0 stopped: {message}")

    def _read(self, addr: int, length: int) -> bytes:
        return self.services.gpu_read(VMID, addr, length)

    def _write(self, addr: int, data: bytes) -> None:
        """A write of the engine, at its own time (what it writes into the bridge lands then)."""
        self.services.gpu_write(VMID, addr, data, at=self.now)

    def _is_system(self, addr: int) -> bool:
        try:
            return self.services.translate(VMID, addr).system
        except VmFault:
            return False

    def _run(self) -> None:
        base = (self._reg("QUEUE0_RB_BASE") | self._reg("QUEUE0_RB_BASE_HI") << 32) << 8
        size = 4 << self._field("QUEUE0_RB_CNTL.RB_SIZE")
        while True:
            rptr = self._reg("QUEUE0_RB_RPTR") | self._reg("QUEUE0_RB_RPTR_HI") << 32
            wptr = self._reg("QUEUE0_RB_WPTR") | self._reg("QUEUE0_RB_WPTR_HI") << 32
            if rptr >= wptr:
                self.waiting = False
                return

            def dw(i: int, rptr: int = rptr) -> int:
                return int.from_bytes(self._read(base + (rptr + 4 * i) % size, 4), "little")

            hdr = dw(0)
            self._ring_at = rptr
            n = self._execute(hdr & 0xFF, (hdr >> 8) & 0xFF, hdr, dw)
            if n is None:  # parked on a poll, or stopped
                return
            self.stats["packets"] += 1
            self._spend(self.timing.packet_s)
            self._set_rptr(rptr + 4 * n)

    def _set_rptr(self, rptr: int) -> None:
        self.services.reg_write(self.offsets["QUEUE0_RB_RPTR"], rptr & 0xFFFFFFFF)
        self.services.reg_write(self.offsets["QUEUE0_RB_RPTR_HI"], rptr >> 32)
        if self._field("QUEUE0_RB_CNTL.RPTR_WRITEBACK_ENABLE"):
            addr = self._reg("QUEUE0_RB_RPTR_ADDR_LO") & ~3 | self._reg("QUEUE0_RB_RPTR_ADDR_HI") << 32
            if addr:
                self._write(addr, rptr.to_bytes(8, "little"))

    # -- packets (one named handler per packet, PACKETS) ------------------------------------------------------
    def _execute(self, op: int, sub: int, hdr: int, dw: Dwords) -> int | None:
        """Run one packet; its length in dwords, or None when the engine must stop here."""
        handler = PACKETS.get((op, sub)) or PACKETS.get((op, None))
        if handler is None:
            self._stop(f"packet op {op} sub-op {sub} is not modelled")
            return None
        return handler(self, hdr, dw)

    @PACKETS.handles((OP_NOP, None))
    def skip_nop(self, hdr: int, dw: Dwords) -> int | None:
        """NOP: skip the packet and the count of dwords its header names."""
        return 1 + ((hdr >> 16) & 0x3FFF)

    @PACKETS.handles((OP_COPY, SUB_COPY_LINEAR))
    def copy_linear(self, hdr: int, dw: Dwords) -> int | None:
        """COPY_LINEAR: copy count + 1 bytes from the source to the destination GPU address (VRAM or system pages),
        charging the time at the VRAM or system-memory rate of each side; 7 dwords."""
        d = [dw(i) for i in range(7)]
        count = fld(d, "COPY_LINEAR_COUNT_count") + 1
        src = _addr(d, "COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0", "COPY_LINEAR_SRC_ADDR_HI_src_addr_63_32")
        dst = _addr(d, "COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0", "COPY_LINEAR_DST_ADDR_HI_dst_addr_63_32")
        src_sys, dst_sys = self._is_system(src), self._is_system(dst)
        self._copy(src, dst, count, src_sys, dst_sys)
        self.stats["copies"] += 1
        self.stats["bytes_copied"] += count
        t = self.timing
        self.stats["system_bytes_read"] += count if src_sys else 0
        self.stats["system_bytes_written"] += count if dst_sys else 0
        self._spend(count / (t.system_read_rate if src_sys else t.vram_rate))
        self._spend(count / (t.system_write_rate if dst_sys else t.vram_rate))
        return 7

    @PACKETS.handles((OP_WRITE, SUB_WRITE_LINEAR))
    def write_linear(self, hdr: int, dw: Dwords) -> int | None:
        """WRITE_UNTILED: write the packet's count + 1 data dwords at the destination GPU address; 4 + count + 1 dwords.
        """
        d = [dw(i) for i in range(4)]
        ndw = fld(d, "WRITE_UNTILED_DW_3_count") + 1
        dst = _addr(d, "WRITE_UNTILED_DST_ADDR_LO_dst_addr_31_0", "WRITE_UNTILED_DST_ADDR_HI_dst_addr_63_32")
        self._write(dst, b"".join(dw(4 + i).to_bytes(4, "little") for i in range(ndw)))
        self.stats["writes"] += 1
        return 4 + ndw

    @PACKETS.handles((OP_FENCE, None))
    def write_fence(self, hdr: int, dw: Dwords) -> int | None:
        """FENCE: write the 32-bit fence value at the fence's GPU address; 4 dwords."""
        d = [dw(i) for i in range(4)]
        addr = fld(d, "FENCE_ADDR_LO_addr_31_0") | fld(d, "FENCE_ADDR_HI_addr_63_32") << 32
        self._write(addr, fld(d, "FENCE_DATA_data").to_bytes(4, "little"))
        self.stats["fences"] += 1
        return 4

    @PACKETS.handles((OP_TRAP, None))
    def count_trap(self, hdr: int, dw: Dwords) -> int | None:
        """TRAP: counted (no interrupt is modelled); 2 dwords."""
        self.stats["traps"] += 1
        return 2

    @PACKETS.handles((OP_POLL, None))
    def poll_memory(self, hdr: int, dw: Dwords) -> int | None:
        """POLL_REGMEM on memory: compare (dword at the address) & mask with the value by the packet's function; on a
        miss the engine parks (``waiting``) and retries on the next doorbell or bus activity. A register poll stops
        the engine (not modelled). 6 dwords."""
        d = [dw(i) for i in range(6)]
        if not fld(d, "POLL_REGMEM_HEADER_mem_poll"):
            self._stop("poll_regmem on a register is not modelled")
            return None
        addr = fld(d, "POLL_REGMEM_ADDR_LO_addr_31_0") | fld(d, "POLL_REGMEM_ADDR_HI_addr_63_32") << 32
        value, mask = fld(d, "POLL_REGMEM_VALUE_value"), fld(d, "POLL_REGMEM_MASK_mask")
        got = int.from_bytes(self._read(addr, 4), "little") & mask
        self._spend(self.timing.poll_s)
        if not _compare(fld(d, "POLL_REGMEM_HEADER_func"), got, value):
            self.stats["poll_retries"] += 1
            self.waiting = True
            return None
        self.stats["polls"] += 1
        return 6

    @PACKETS.handles((OP_TIMESTAMP, SUB_TS_GET))
    @PACKETS.handles((OP_TIMESTAMP, SUB_TS_GLOBAL))
    def write_timestamp(self, hdr: int, dw: Dwords) -> int | None:
        """TIMESTAMP GET / GET_GLOBAL: write the engine's virtual time in 10 ns ticks (64 bits) at the packet's 8-byte
        aligned address; 3 dwords."""
        d = [dw(i) for i in range(3)]
        addr = (fld(d, "TIMESTAMP_GET_WRITE_ADDR_LO_write_addr_31_3") << 3 |
                fld(d, "TIMESTAMP_GET_WRITE_ADDR_HI_write_addr_63_32") << 32)
        self._write(addr, int(max(self.now, self.services.now()) * 1e8).to_bytes(8, "little"))
        self.stats["timestamps"] += 1
        return 3

    @PACKETS.handles((OP_INDIRECT, None))
    def run_indirect(self, hdr: int, dw: Dwords) -> int | None:
        """INDIRECT: run the packets of the indirect buffer at the packet's GPU address (VMID0), ``ib_size`` dwords
        (inferred unit, as amdgpu's SDMA 6 code fills it), then go on after the packet; 6 dwords. A POLL that parks
        inside the buffer keeps the ring's read pointer on the INDIRECT and resumes at that packet of the buffer
        (inferred). Stops the engine (not modelled): another VMID, an INDIRECT inside an indirect buffer, a packet
        that runs past the buffer's end."""
        d = [dw(i) for i in range(6)]
        if self._in_ib:
            self._stop("an INDIRECT inside an indirect buffer is not modelled")
            return None
        if fld(d, "INDIRECT_HEADER_vmid") != VMID:
            self._stop(f"an indirect buffer in vmid {fld(d, 'INDIRECT_HEADER_vmid')} is not modelled (only vmid 0)")
            return None
        base = _addr(d, "INDIRECT_BASE_LO_ib_base_31_0", "INDIRECT_BASE_HI_ib_base_63_32")
        size = fld(d, "INDIRECT_IB_SIZE_ib_size")
        resume = self._ib_resume
        pos = resume[1] if resume is not None and resume[0] == self._ring_at else 0
        self._ib_resume = None
        if pos == 0:
            self.stats["indirect_buffers"] += 1
        self._in_ib = True
        try:
            while pos < size:
                def ib_dw(i: int, at: int = pos) -> int:
                    if at + i >= size:
                        raise _PastEnd
                    return int.from_bytes(self._read(base + 4 * (at + i), 4), "little")

                ib_hdr = ib_dw(0)
                try:
                    n = self._execute(ib_hdr & 0xFF, (ib_hdr >> 8) & 0xFF, ib_hdr, ib_dw)
                except _PastEnd:
                    n = None
                    self._stop(f"the packet at dword {pos} of the indirect buffer at 0x{base:x} runs past its "
                               f"{size} dwords")
                if n is None:
                    if self.waiting:
                        self._ib_resume = (self._ring_at, pos)
                    return None
                if pos + n > size:
                    self._stop(f"the packet at dword {pos} of the indirect buffer at 0x{base:x} runs past its "
                               f"{size} dwords")
                    return None
                self.stats["packets"] += 1
                self._spend(self.timing.packet_s)
                pos += n
        finally:
            self._in_ib = False
        return 6

    def _copy(self, src: int, dst: int, count: int, src_sys: bool, dst_sys: bool) -> None:
        """Move ``count`` bytes, or not, or to the wrong place, as the injected copy fault says."""
        fault = self.fault
        if fault == "nop" or (fault == "skip-in" and src_sys and not dst_sys) or \
                (fault == "skip-out" and dst_sys and not src_sys):
            self.stats["faulted_copies"] += 1
            return
        if fault == "shift1m":
            src += 0 if src_sys else SHIFT
            dst += 0 if dst_sys else SHIFT
            self.stats["faulted_copies"] += 1
        self._write(dst, self._read(src, count))

    def counters(self) -> dict[str, object]:
        """The engine's counters (doorbells, packets, copies, bytes, polls, fences, ...) with its busy time and cursor
        in seconds, whether it waits on a poll, its error and its fault mode."""
        return {**self.stats, "busy_s": self.busy_s, "now_s": self.now, "waiting": self.waiting, "error": self.error,
                "hang": self.hang, "fault": self.fault}


class _PastEnd(Exception):
    """A packet of an indirect buffer reads past the buffer's last dword."""


def _compare(func: int, got: int, value: int) -> bool:
    """POLL_REGMEM functions: 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 > (7 reserved: never)."""
    return (True, got < value, got <= value, got == value, got != value, got >= value, got > value, False)[func & 7]
