"""The PCIe side of the emulated ASM24 bridge: link training state and the single-TLP engine.

Implements specs/asm24-usb-bridge.md §4.3 (single TLP), §4.6 (0xF3 power/training), §5.1-§5.5
(Fmt/Type decode, config address word, byte enables, posted vs non-posted, the 8-byte completion
record), §7.1 (engine registers 0xB210-0xB296, LTSSM 0xB450, PERST# 0xB480) and §12.

Choices where the spec leaves room (all documented in the report of the change):

- Link modes (``Asm24Options.link``): ``up`` = trained at power-on (April firmware); ``down`` =
  off until 0xF3(1), which returns once the firmware has seen three stable 0x78 samples;
  ``slow`` = 0xF3(1) returns after ``slow_return_s`` with LTSSM at 0x01/0x10 and the link reaches
  0x78 ``slow_link_s`` later; ``wedged`` = 0xF3(1) ends in 0x4C for good; ``no-gpu`` = LTSSM stays
  at 0x01 (Detect.Active). Only ``up`` trains at power-on. Every 0xF3(1) pulses PERST#.
- With the link not at 0x78 every TLP gets no completion (result 0xFF); posted writes vanish.
- The engine's data register is what completion bytes 0-3 carry: the completion data for a read
  that got data, the written value for a write, and :data:`POISON` for a read that got none
  (UR/CA/CRS). Streaming reads return the data register whatever the status, so an unclaimed
  address streams :data:`POISON`.
- A first-DW byte-enable mask wider than 4 bits is a malformed single-DW TLP: UR (inferred).
- An injected UR/CA/CRS/engine error/timeout means the request did not reach the completer.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.mocks.bridge.asm24_memory import BridgeMemory
from tinyhw.mocks.bridge.pcie_switch import CPL_CA, CPL_CRS, CPL_SC, CPL_UR, PcieHierarchy
from tinyhw.mocks.common.vclock import VirtualClock

MASK64 = (1 << 64) - 1

#: What a read without completion data streams back (recognisable in tests and dumps).
POISON = 0xDEADBEEF

LTSSM_OFF, LTSSM_DETECT, LTSSM_POLLING, LTSSM_WEDGED, LTSSM_UP = 0x00, 0x01, 0x10, 0x4C, 0x78

REG_FMT_TYPE, REG_BE, REG_ADDR_LO, REG_ADDR_HI, REG_DATA = 0xB210, 0xB217, 0xB218, 0xB21C, 0xB220
REG_CPL_HDR, REG_CPL_TYPE, REG_STATUS, REG_LTSSM, REG_PERST = 0xB22A, 0xB284, 0xB296, 0xB450, 0xB480

FAULT_STATUS = {"ur": CPL_UR, "ca": CPL_CA, "crs": CPL_CRS}


@dataclass(frozen=True)
class TlpKind:
    """Decoded Fmt/Type byte (§5.1)."""

    fmt_type: int
    space: str  # "mem", "cfg0", "cfg1", "msg", "io", "other"
    has_data: bool
    addr64: bool

    @property
    def posted(self) -> bool:
        """Memory writes and messages have no completion; everything else does (§5.4)."""
        return (self.space == "mem" and self.has_data) or self.space == "msg"


def decode_fmt_type(fmt_type: int) -> TlpKind:
    """Decode a TLP Fmt/Type byte (§5.1): its address space (memory, type-0/1 config, message, I/O or other), whether it
    carries data and whether it has a 64-bit address."""
    typ = fmt_type & 0x1F
    has_data, addr64 = bool(fmt_type & 0x40), bool(fmt_type & 0x20)
    if typ == 0x00:
        space = "mem"
    elif typ in (0x04, 0x05) and not addr64:
        space = "cfg0" if typ == 0x04 else "cfg1"
    elif typ & 0x18 == 0x10 and addr64:
        space = "msg"
    elif typ == 0x02 and not addr64:
        space = "io"
    else:
        space = "other"
    return TlpKind(fmt_type & 0xFF, space, has_data, addr64)


def byte_count(byte_enable: int) -> int:
    """Bytes a one-dword memory read asks for, from its first-DW byte enables (PCIe rule)."""
    if byte_enable & 0xF == 0:
        return 1
    lanes = [i for i in range(4) if byte_enable >> i & 1]
    return lanes[-1] - lanes[0] + 1


@dataclass
class Completion:
    """What the engine holds after a non-posted request; :meth:`record` is the 0xF0 IN reply."""

    result: int = 0  # 0 completed, 1 engine error, 0xFF no completion within the poll budget
    status: int = CPL_SC
    byte_count: int = 4
    with_data: bool = False
    data: int = 0

    def record(self) -> bytes:
        """The 8-byte record of §5.5: data LE, big-endian status/byte count, CplD bit, result."""
        if self.result != 0:
            return bytes(7) + bytes([self.result])
        header = (self.status & 0x7) << 13 | (self.byte_count & 0xFFF)
        return (self.data & 0xFFFFFFFF).to_bytes(4, "little") + header.to_bytes(2, "big") + bytes(
            [1 if self.with_data else 0, 0])


@dataclass
class LinkTiming:
    """The link model's timing (seconds): training after PERST# release, the firmware's LTSSM sampling (every
    ``sample_s``, at most ``samples`` times, done after ``stable`` readings of L0) and the ``slow`` mode's delays;
    all inferred unless the field cites §4.6."""
    train_s: float = 0.05  # training time after PERST# release (inferred)
    sample_s: float = 0.1  # firmware samples LTSSM every 100 ms ...
    samples: int = 20  # ... up to 20 times ...
    stable: int = 3  # ... and stops after 3 consecutive 0x78 readings (§4.6)
    slow_return_s: float = 0.02  # 'slow': newer firmware returns after the 3.3 V settle
    slow_link_s: float = 0.05  # 'slow': link up this long after 0xF3 returned


class LinkModel:
    """PCIe power and LTSSM as 0xB450 shows it, driven by 0xF3 and virtual time."""

    def __init__(self, mode: str, clock: VirtualClock, timing: LinkTiming | None = None) -> None:
        self.mode = mode
        self.clock = clock
        self.timing = timing or LinkTiming()
        self.powered = mode == "up"
        self.train_start = -math.inf
        self.up_at = -math.inf if self.powered else math.inf

    def ltssm(self) -> int:
        """The LTSSM state byte the firmware reads now: off without power, detect with no GPU, the wedged value, else
        detect then polling during training and L0 (0x78) once the link is up."""
        if not self.powered:
            return LTSSM_OFF
        if self.mode == "no-gpu":
            return LTSSM_DETECT
        if self.mode == "wedged":
            return LTSSM_WEDGED
        now = self.clock.now()
        if now >= self.up_at:
            return LTSSM_UP
        return LTSSM_DETECT if now < (self.train_start + self.up_at) / 2 else LTSSM_POLLING

    def is_up(self) -> bool:
        """True when the link is in L0 (trained) now."""
        return self.ltssm() == LTSSM_UP

    def power_on(self) -> float:
        """0xF3(1): rails on, PERST# pulse, training. Returns how long the request takes."""
        t = self.timing
        now = self.clock.now()
        self.powered, self.train_start = True, now
        if self.mode == "slow":
            self.up_at = now + t.slow_return_s + t.slow_link_s
            return t.slow_return_s
        self.up_at = now + t.train_s if self.mode in ("up", "down") else math.inf
        good = 0
        for k in range(1, t.samples + 1):
            good = good + 1 if now + k * t.sample_s >= self.up_at else 0
            if good >= t.stable:
                return k * t.sample_s
        return t.samples * t.sample_s

    def power_off(self) -> None:
        """0xF3(0): PERST# asserted, training stopped, rails off."""
        self.powered, self.up_at = False, math.inf


class TlpEngine:
    """The one-request-at-a-time TLP engine: builds TLPs, routes them, mirrors its registers."""

    def __init__(self, hierarchy: PcieHierarchy, memory: BridgeMemory, link: LinkModel) -> None:
        self.hierarchy = hierarchy
        self.memory = memory
        self.link = link

    def _load(self, kind: TlpKind, byte_enable: int, addr: int, value: int | None) -> None:
        m = self.memory
        m.xdata[REG_FMT_TYPE] = kind.fmt_type
        m.xdata[REG_BE] = byte_enable & 0xFF
        m.put_be(REG_ADDR_LO, 4, addr)
        m.put_be(REG_ADDR_HI, 4, addr >> 32)
        if value is not None:
            m.put_be(REG_DATA, 4, value)
        m.xdata[REG_STATUS] = 0

    def _finish(self, cpl: Completion) -> Completion:
        m = self.memory
        if cpl.result == 0:
            m.put_be(REG_DATA, 4, cpl.data)
            m.put_be(REG_CPL_HDR, 2, (cpl.status & 0x7) << 13 | (cpl.byte_count & 0xFFF))
            m.xdata[REG_CPL_TYPE] = 1 if cpl.with_data else 0
        m.xdata[REG_STATUS] = {0: 0x02, 1: 0x01}.get(cpl.result, 0)
        return cpl

    def single(self, fmt_type: int, byte_enable: int, addr: int, value: int, fault: str | None = None,
               ) -> Completion | None:
        """Execute one mode-0 TLP; the completion for a non-posted one, None for a posted one."""
        kind = decode_fmt_type(fmt_type)
        addr = (addr if kind.addr64 else addr & 0xFFFFFFFF) & ~0x3
        self._load(kind, byte_enable, addr, value if kind.has_data else None)
        if not self.link.is_up():
            return None if kind.posted else self._finish(Completion(result=0xFF))
        if kind.posted:
            if kind.space == "mem" and byte_enable <= 0xF:
                self.hierarchy.mem_write(addr, value, byte_enable)
            return None
        old = int.from_bytes(self.memory.xdata[REG_DATA : REG_DATA + 4], "big")
        if fault in ("tlp-error", "tlp-timeout"):
            return self._finish(Completion(result=1 if fault == "tlp-error" else 0xFF))
        cfg = kind.space in ("cfg0", "cfg1")
        if fault in FAULT_STATUS:
            status, data = FAULT_STATUS[fault], 0
        elif byte_enable > 0xF or kind.space not in ("mem", "cfg0", "cfg1"):
            status, data = CPL_UR, 0
        elif cfg:
            status, data = self.hierarchy.config(
                kind.space == "cfg1", addr >> 24 & 0xFF, addr >> 19 & 0x1F, addr >> 16 & 0x7, addr & 0xFFC,
                write=kind.has_data, value=value, byte_enable=byte_enable)
        else:
            status, data = self.hierarchy.mem_read(addr)
        with_data = status == CPL_SC and not kind.has_data
        if not with_data:
            data = old if kind.has_data else POISON
        count = 4 if cfg else byte_count(byte_enable)
        return self._finish(Completion(0, status, count, with_data, data))

    def stream_write(self, addr: int, values: list[int]) -> None:
        """Dwords of a streaming write, one posted 0x60 TLP each at ascending addresses (full carry).

        Unclaimed dwords are dropped; the engine registers end up describing the last TLP.
        """
        self.stream_write_bytes(addr, struct.pack(f"<{len(values)}I", *values))

    def stream_write_bytes(self, addr: int, data: bytes) -> None:
        """:meth:`stream_write` of the little-endian dwords in ``data`` (whole dwords), without unpacking them
        when one BAR takes them as a burst."""
        count = len(data) // 4
        up = self.link.is_up()
        burst = up and count > 1 and addr + 4 * count <= MASK64
        if burst and self.hierarchy.mem_write_burst(addr, data[:4 * count]):
            up = False  # delivered as one burst (same effect as the per-dword loop below)
        if up:
            for i, value in enumerate(struct.unpack_from(f"<{count}I", data)):
                self.hierarchy.mem_write((addr + 4 * i) & MASK64, value, 0xF)
        if count:
            last = struct.unpack_from("<I", data, 4 * count - 4)[0]
            self._load(decode_fmt_type(0x60), 0xF, (addr + 4 * count - 4) & MASK64, last)

    def stream_read(self, addr: int, count: int, faults: Callable[[], str | None]) -> list[int] | None:
        """Dwords of a streaming read: each the data register whatever the completion status.

        ``faults`` is asked once per TLP for an injected fault. None: a TLP never completed (the
        firmware's loop would wait forever).
        """
        out: list[int] = []
        up = self.link.is_up()
        for i in range(count):
            a = (addr + 4 * i) & MASK64
            fault = faults()
            if not up or fault == "tlp-timeout":
                self._load(decode_fmt_type(0x20), 0xF, a, None)
                return None
            status, data = (CPL_UR, 0) if fault is not None else self.hierarchy.mem_read(a)
            out.append(data if status == CPL_SC else POISON)
            if i == count - 1:
                self._load(decode_fmt_type(0x20), 0xF, a, None)
                self._finish(Completion(0, status, 4, status == CPL_SC, out[-1]))
        return out
