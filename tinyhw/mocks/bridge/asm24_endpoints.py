"""Bulk endpoints of the emulated ASM24 bridge: 0xF0 streaming and the 0xF2 SRAM data path.

Implements specs/asm24-usb-bridge.md §3 (endpoints 0x81/0x02, packet sizes), §4.5 (0xF2 engine:
slot arithmetic, exact length, release of SRAM->host data by a bus-master write into 0x822000),
§6 (streaming modes 1 and 2: one dword counter, per-packet handling, chunked read prefetch,
cancellation, overrun, stale IN data) and §12. Also the device-side exceptions
every front end maps to its own error codes, the timing parameters and the per-transfer budget.

Model (synchronous transfers; choices marked inferred in the report):

- The IN endpoint is a FIFO of packets (each at most one max packet). A host read collects
  packets until it has what it asked for or a short packet ends it; an empty FIFO means the
  device NAKs and the host times out; a packet larger than the space left is an overflow.
- A streaming read prepares one chunk (256 dwords SS / 128 HS = one packet) when set up and the
  next one each time the host takes a packet; a chunk prepared after the host's transfer ended
  is "prefetched": it stays in the FIFO when the stream is cancelled (stale data) until a
  halt-clear or a SET_CONFIGURATION/SET_INTERFACE flushes it.
- The OUT endpoint accepts a packet when a 0xF2 host->SRAM arm is pending (arms queue up, data
  fills them in order) or a streaming write has room for it; otherwise it NAKs (host timeout).
  A streaming packet with more dwords than remain is dropped and the endpoint stops accepting.
- A 0xF2 SRAM->host arm holds its data back until :meth:`dma_release`; the data (from slot 0) is
  then queued on the IN endpoint. A host read that finds the FIFO empty first waits (``wait_held``) for
  a bus-master write the bridge holds until its modelled time (the GPU's release write), then NAKs.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from tinyhw.mocks.bridge.asm24_memory import CQ_RELEASE, LANDING_BUF, SRAM_SIZE, STREAM_BUF, BridgeMemory
from tinyhw.mocks.bridge.asm24_tlp import LinkTiming, TlpEngine
from tinyhw.mocks.bridge.usb_descriptors import EP_IN
from tinyhw.transport.clock import Clock

MASK64 = (1 << 64) - 1


class UsbFault(Exception):
    """A transfer the device did not complete normally; front ends map these to their error codes."""


class Stall(UsbFault):
    """The device stalled the request or the endpoint is halted (libusb -9, EPIPE)."""


class Timeout(UsbFault):
    """The device never answered within the host's time limit (libusb -7, ETIMEDOUT)."""


class Disconnect(UsbFault):
    """The device is gone (libusb -4, ENODEV); every later transfer fails the same way."""


class Overflow(UsbFault):
    """The device sent more data than the host asked for (libusb -8, EOVERFLOW)."""


@dataclass
class Asm24Timing:
    """Virtual-time costs (§1 cost model, §12); inferred defaults, all configurable."""

    control_rtt_s: float = 100e-6
    bulk_overhead_s: float = 100e-6
    #: a bulk transfer queued on its pipe while the previous one was still in flight (libusb's asynchronous
    #: transfers) pays only this gap instead of ``bulk_overhead_s`` (inferred, as the timing model's bulk_gap_s)
    bulk_gap_s: float = 10e-6
    usb_rate: dict[str, float] = field(default_factory=lambda: {"ss": 700e6, "hs": 40e6})
    f2_rate: dict[str, float] = field(default_factory=lambda: {"ss": 700e6, "hs": 40e6})
    stream_write_dword_s: float = 1.1e-6
    stream_read_dword_s: float = 2.2e-6
    single_tlp_s: float = 2e-6
    cpl_poll_budget_s: float = 0.05  # 500 000 polls of 0xB296 before result 0xFF (inferred)
    hang_s: float = 60.0  # stands for "forever" when a host waits without a time limit
    link: LinkTiming = field(default_factory=LinkTiming)


@dataclass
class FirmwareBusy:
    """Until when (virtual seconds) the firmware is busy with work a host gave up waiting for."""

    until: float = 0.0


class Budget:
    """The host's time limit for one transfer, spent as the modelled work advances the clock.

    ``limit`` None means the front end does not know the host's limit: a hang then raises
    :class:`Timeout` without advancing the clock. Work that runs past the limit keeps the firmware
    busy (``busy.until``) after the host gave up.
    """

    def __init__(self, clock: Clock, timeout: float | None, busy: FirmwareBusy) -> None:
        self.clock, self.busy = clock, busy
        self.start, self.limit = clock.now(), timeout

    def spend(self, dt: float) -> None:
        """Advance the clock by ``dt`` seconds of modelled firmware work; when that passes the host's limit the firmware
        stays busy until the work ends and the transfer times out (:meth:`hang`)."""
        end = self.clock.now() + dt
        if self.limit is not None and end - self.start > self.limit:
            self.busy.until = max(self.busy.until, end)
            self.hang()
        self.clock.advance(dt)

    def hang(self) -> None:
        """The device does not answer: the host gives up at its time limit."""
        if self.limit is not None:
            self.clock.advance(self.start + self.limit - self.clock.now())
        raise Timeout("the device did not answer")


class BulkEndpoints:
    """The bridge's two bulk endpoints (0x81 IN, 0x02 OUT): their state and data paths.

    Owned by :class:`~tinyhw.mocks.bridge.asm24.Asm24Bridge`, which hands it what it works with: the
    clock, timing, speed, the bridge memory and TLP engine, the shared counters and warnings, and
    the bridge's ``anomaly`` (strict emulation) and ``tlp_fault`` (injected faults) hooks. The
    bridge keeps the transfer bookkeeping (counting, faults, logging) and endpoint validity.
    """

    def __init__(self, *, clock: Clock, timing: Asm24Timing, speed: str, max_packet: int, memory: BridgeMemory,
                 engine: TlpEngine, counters: dict[str, int], warnings: list[str], busy: FirmwareBusy,
                 anomaly: Callable[[str], None], tlp_fault: Callable[[], str | None],
                 wait_held: Callable[[Budget], bool] = lambda _b: False) -> None:
        self.clock, self.timing, self.speed, self.max_packet = clock, timing, speed, max_packet
        self.memory, self.engine, self.counters, self.warnings, self.busy = memory, engine, counters, warnings, busy
        self.anomaly, self.tlp_fault, self.wait_held = anomaly, tlp_fault, wait_held
        self.in_fifo: deque[tuple[bytes, str, int]] = deque()  # (packet, "stream" | "f2", stream id)
        self.stream_id = 0
        self.halted: set[int] = set()
        self.stream_mode = 0  # 0 none, 1 write, 2 read
        self.stream_addr = 0
        self.stream_remaining = 0  # dwords
        self.out_armed = False
        #: OUT arms so far (streamed-write setups and 0xF2 host->SRAM arms): tells a front end a fresh arm
        #: from one it already knows of, even when both expect the same byte count
        self.out_arms = 0
        self.sram_write_arms: deque[list[int]] = deque()  # [sram offset, length, received]
        self.sram_read_length: int | None = None

    # -- resets and cancellation -------------------------------------------------------------------
    def cancel_stream(self) -> None:
        """The firmware's dwords-remaining counter goes to 0; packets already in the FIFO stay."""
        self.stream_mode, self.stream_remaining, self.out_armed = 0, 0, False

    def reset(self) -> None:
        """SET_CONFIGURATION / SET_INTERFACE / bus reset: both bulk endpoints start afresh."""
        self.cancel_stream()
        self.in_fifo.clear()
        self.halted.clear()
        self.sram_write_arms.clear()
        self.sram_read_length = None

    def halt_cleared(self, ep: int) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT): reset that endpoint (and its 0xF2 arms), cancel streaming."""
        self.halted.discard(ep)
        self.cancel_stream()
        if ep == EP_IN:
            self.in_fifo.clear()
            self.sram_read_length = None
        else:
            self.sram_write_arms.clear()

    # -- stream setup (from 0xF0 OUT modes 1 and 2) ----------------------------------------------------
    def stream_setup(self, mode: int, fmt_type: int, byte_enable: int, addr: int, count: int, *,
                     budget: Budget) -> None:
        """Start a streaming transfer armed by the 0xF0 OUT request: mode 1 a streaming write (the next bulk OUT data
        becomes ``count`` dword memory writes from ``addr``), mode 2 a streaming read (its first chunk is read and
        queued on the bulk IN endpoint at once). A fmt/type or byte-enable the firmware does not stream is logged as
        an anomaly; a count of 0 arms nothing."""
        want = 0x40 if mode == 1 else 0x00
        if byte_enable != 0xF or fmt_type & 0xDF != want:
            self.anomaly(f"stream mode {mode} with fmt/type 0x{fmt_type:02x} byte enables 0x{byte_enable:x}")
        if not fmt_type & 0x20:
            addr &= 0xFFFFFFFF
        if count == 0:
            return  # a count of 0 arms nothing (§6)
        self.stream_addr, self.stream_remaining, self.stream_mode = addr & ~0x3, count, mode
        self.stream_id += 1
        if mode == 1:
            self.counters["tlp_writes"] += 1
            if self.sram_write_arms:
                self.warnings.append("streaming write setup dropped a pending 0xf2 host->sram arm")
                self.sram_write_arms.clear()
            self.out_armed = True
            self.out_arms += 1
        else:
            self.counters["tlp_reads"] += 1
            self.stream_chunk(budget)

    def stream_chunk(self, budget: Budget | None) -> None:
        """Read the next chunk of a streaming read into 0x8000 and queue it on 0x81.

        ``budget`` None: prepared after the host's transfer ended (the firmware is busy meanwhile).
        A TLP that never completes stops the stream (the firmware is modelled as giving up).
        """
        n = min(self.stream_remaining, self.max_packet // 4)
        values = self.engine.stream_read(self.stream_addr, n, self.tlp_fault)
        if values is None:
            self.cancel_stream()
            if budget is not None:
                budget.hang()
            return
        buf = struct.pack(f"<{n}I", *values)
        self.stream_addr = (self.stream_addr + 4 * n) & MASK64
        self.stream_remaining -= n
        self.counters["stream_dwords_read"] += n
        if self.stream_remaining == 0:
            self.stream_mode = 0
        self.memory.write(STREAM_BUF, buf, cpu=False)
        self.in_fifo.append((buf, "stream", self.stream_id))
        cost = n * self.timing.stream_read_dword_s
        if budget is None:
            self.busy.until = max(self.busy.until, self.clock.now()) + cost
        else:
            budget.spend(cost)

    # -- 0xF2 arms and release ---------------------------------------------------------------------------
    def arm_sram_write(self, offset: int, length: int) -> None:
        """Arm a host -> SRAM transfer (0xF2 OUT direction): the next ``length`` bytes of bulk OUT land in bridge SRAM
        at ``offset``; cancels a streaming write that was armed."""
        if self.stream_mode == 1:
            self.warnings.append("0xf2 host->sram arm cancelled a streaming write")
            self.cancel_stream()
        self.sram_write_arms.append([offset, length, 0])
        self.out_arms += 1

    def arm_sram_read(self, length: int) -> None:
        """Arm an SRAM -> host transfer (0xF2 IN direction) of ``length`` bytes (0 disarms): the data is queued on bulk
        IN once the GPU writes the release range (:meth:`dma_release`)."""
        if self.sram_read_length is not None:
            self.warnings.append("0xf2 sram->host arm replaced one that was never released")
        self.sram_read_length = length or None

    def hits_release(self, addr: int, length: int) -> bool:
        """Whether a bus-master write at [addr, addr+length) falls in the 0x822000 release range."""
        return addr < CQ_RELEASE[1] and addr + length > CQ_RELEASE[0]

    def dma_release(self, addr: int, length: int) -> bool:
        """A bus-master write at [addr, addr+length): releases a pending SRAM->host arm if it hits 0x822000."""
        if self.sram_read_length is None or not self.hits_release(addr, length):
            return False
        data = bytes(self.memory.sram[: self.sram_read_length])
        self.sram_read_length = None
        for i in range(0, len(data), self.max_packet):
            self.in_fifo.append((data[i : i + self.max_packet], "f2", 0))
        self.counters["f2_bytes_in"] += len(data)
        return True

    # -- what a packet-level front end may move (FunctionFS) ------------------------------------------
    def in_pending(self) -> int:
        """Bytes the IN endpoint delivers without the host asking anything else first: the packets
        queued plus the rest of the current streaming read; 0 when it NAKs.

        A front end that sees packets rather than the host's transfers (FunctionFS) asks for this
        many bytes in one :meth:`bulk_in`; the custom firmware's host reads exactly a stream's or an
        0xF2 arm's length, so the transfers (and the log) match the pyusb front end's.
        """
        queued = sum(len(pkt) for pkt, _, _ in self.in_fifo)
        if self.stream_mode == 2:
            queued += 4 * self.stream_remaining
        return queued

    def out_pending(self) -> int:
        """Bytes the OUT endpoint accepts before it NAKs again: the open 0xF2 arms, else the rest of
        an armed streaming write; 0 when nothing is armed (the host's data then waits and times out)."""
        if self.sram_write_arms:
            return sum(length - received for _, length, received in self.sram_write_arms)
        if self.stream_mode == 1 and self.out_armed:
            return 4 * self.stream_remaining
        return 0

    # -- bulk data (the bridge has counted the transfer and checked the endpoint) -------------------
    def receive(self, data: bytes, budget: Budget) -> None:
        """The data of a bulk OUT transfer, packet by packet; a packet nothing accepts hangs the host."""
        mps = self.max_packet
        if budget.limit is None and len(data) > mps and self._take_streamed_block(data, budget):
            return
        for pkt in [data[i : i + mps] for i in range(0, len(data), mps)] or [b""]:
            self._accept(pkt, budget)

    def _take_streamed_block(self, data: bytes, budget: Budget) -> bool:
        """A whole transfer of an armed streaming write, taken in one step; False (nothing done) when it is not one.

        Only for a front end that hands over transfers the host has already completed and knows no host time limit
        (FunctionFS: ``budget.limit`` None), so no packet can time out half way. When every packet fits the stream in
        whole dwords, the packets land as one block with the effect of taking them one by one: the same dword TLPs
        at the same addresses, the landing page as the last packets left it, the engine registers describing the
        last TLP, the same counters and modelled time. Packet by packet, a megabyte kept the core (and the requests
        behind it) busy for seconds in an emulated guest, longer than a host waits for its next control request."""
        if self.sram_write_arms or not (self.stream_mode == 1 and self.out_armed):
            return False
        if len(data) % 4 or len(data) > 4 * self.stream_remaining:
            return False  # a partial dword or an overrun: packet by packet, with its anomaly or warning
        mps = self.max_packet
        last = (len(data) - 1) // mps * mps
        self.memory.write(LANDING_BUF, data[last - mps : last], cpu=False)  # as the last two packets left it
        self.memory.write(LANDING_BUF, data[last:], cpu=False)
        dwords = len(data) // 4
        self.engine.stream_write_bytes(self.stream_addr, data)
        self.stream_addr = (self.stream_addr + len(data)) & MASK64
        self.stream_remaining -= dwords
        self.counters["stream_dwords_written"] += dwords
        if self.stream_remaining == 0:
            self.cancel_stream()
        budget.spend(len(data) / self.timing.usb_rate[self.speed] + dwords * self.timing.stream_write_dword_s)
        return True

    def _accept(self, pkt: bytes, budget: Budget) -> None:
        if self.sram_write_arms:
            pos = 0
            while pos < len(pkt) and self.sram_write_arms:
                arm = self.sram_write_arms[0]
                take = min(len(pkt) - pos, arm[1] - arm[2])
                dst = arm[0] + arm[2]
                if dst < SRAM_SIZE:
                    self.memory.sram[dst : min(dst + take, SRAM_SIZE)] = pkt[pos : pos + min(take, SRAM_SIZE - dst)]
                arm[2] += take
                pos += take
                if arm[2] == arm[1]:
                    self.sram_write_arms.popleft()
            self.counters["f2_bytes_out"] += pos
            budget.spend(pos / self.timing.f2_rate[self.speed])
            if pos < len(pkt):
                self.warnings.append("bulk out carried more data than the 0xf2 arms; rest dropped")
                budget.hang()
            return
        if self.stream_mode == 1 and self.out_armed:
            if len(pkt) > 4 * self.stream_remaining:
                self.out_armed = False  # packet dropped, endpoint no longer re-armed
                self.warnings.append("streaming write overrun: packet dropped")
                budget.hang()
            if len(pkt) % 4:
                self.anomaly(f"streaming write packet of {len(pkt)} bytes is not whole dwords")
            self.memory.write(LANDING_BUF, pkt, cpu=False)
            dwords = len(pkt) // 4
            self.engine.stream_write_bytes(self.stream_addr, pkt)
            self.stream_addr = (self.stream_addr + 4 * dwords) & MASK64
            self.stream_remaining -= dwords
            self.counters["stream_dwords_written"] += dwords
            if self.stream_remaining == 0:
                self.cancel_stream()
            budget.spend(len(pkt) / self.timing.usb_rate[self.speed] + dwords * self.timing.stream_write_dword_s)
            return
        budget.hang()  # nothing armed: the endpoint NAKs until the host gives up

    def send(self, length: int, budget: Budget) -> bytes:
        """The data of a bulk IN transfer of up to ``length`` bytes (ends early on a short packet)."""
        out = bytearray()
        while len(out) < length:
            if not self.in_fifo:
                if self.wait_held(budget):  # a GPU write due later (the release of an 0xF2 read) may fill it
                    continue
                budget.hang()
            pkt, source, sid = self.in_fifo.popleft()
            if len(out) + len(pkt) > length:
                self._refill(source, sid, None)
                raise Overflow(f"device sent {len(pkt)} bytes with {length - len(out)} wanted")
            out += pkt
            rate = self.timing.f2_rate if source == "f2" else self.timing.usb_rate
            budget.spend(len(pkt) / rate[self.speed])
            more = len(out) < length and len(pkt) == self.max_packet
            self._refill(source, sid, budget if more else None)
            if len(pkt) < self.max_packet:
                break
        return bytes(out)

    def _refill(self, source: str, sid: int, budget: Budget | None) -> None:
        """After the host took a packet of the current streaming read the firmware prepares the next chunk."""
        if source == "stream" and sid == self.stream_id and self.stream_mode == 2 and self.stream_remaining:
            self.stream_chunk(budget)
