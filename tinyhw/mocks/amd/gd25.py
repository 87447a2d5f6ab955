"""GD25LQ16E SPI NOR flash model: command state machine over a file-backed 2 MiB array.

Implements specs/navi31-spi-flash.md §c (c.1 geometry, c.2 command set, c.3 status registers,
c.4 protected-area table, c.5 state machine, c.6 timing, c.7 SFDP) and the emulator
behaviour of §h.3, plus 90h (manufacturer/device id, ``REMS_ID``: a GigaDevice datasheet fact the spec's
command table lacks; flashrom's probe sends it). The chip sees whole SPI transactions (CS# low ... CS#
high): ``out`` bytes the host shifts in, then ``n_in`` byte slots it captures, during which MOSI carries a filler byte.
A command executes at CS# rise only when it is complete (§c.5): write-type commands must end
exactly on their last byte, an incomplete command (a bare ``02h``) is ignored.

Program and erase take effect progressively over their modelled duration and are written
through to the flash file as they progress, so a power loss (:meth:`GD25LQ16E.freeze`) in the
middle leaves a torn range, as on hardware. The flash file and a 3-byte sidecar holding the
non-volatile status bits (FILE + ".sr") are handled by :class:`FlashStore`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.commands import CommandTable
from tinyhw.mocks.amd.flashstore import FlashStore
from tinyhw.transport.clock import Clock

SIZE = 0x200000
PAGE = 256
JEDEC_ID = bytes([0xC8, 0x60, 0x15])  # §c.1
#: 90h "Manufacturer/Device ID" (REMS) answer, from the GigaDevice GD25LQ16 datasheet: manufacturer C8h
#: (GigaDevice), device 14h (16 Mbit; the same byte the ABh legacy id gives). After 90h the host sends three
#: address bytes, 00h 00h then 00h or 01h: with A0 = 0 the chip answers manufacturer then device (C8 14), with
#: A0 = 1 device then manufacturer (14 C8), repeating the pair while clocked. flashrom's probe sends it.
REMS_ID = bytes([0xC8, 0x14])

# Status register bits (§c.3)
SR1_WIP = 0x01
SR1_WEL = 0x02
SR1_NV_MASK = 0xFC  # BP0-2, TB, SEC, SRP0
SR1_SRP0 = 0x80
SR2_SRP1 = 0x01
SR2_RW_MASK = 0x43  # SRP1, QE, CMP
SR2_LB_MASK = 0x38  # LB1..LB3: OTP, only 0 -> 1
SR2_SUS2 = 0x04  # program suspended (volatile, read-only)
SR2_SUS1 = 0x80  # erase suspended (volatile, read-only)
SR2_CMP = 0x40

#: Durations in seconds of PP, SE, BE32, BE64, CE, WRSR (tW) for the ``timing=`` option (§c.6; the
#: typical and maximum figures are the spec's (inferred) GD25LQ family values).
TIMINGS: dict[str, dict[str, float]] = {
    "instant": {"pp": 0.0, "se": 0.0, "be32": 0.0, "be64": 0.0, "ce": 0.0, "wrsr": 0.0},
    "typical": {"pp": 0.5e-3, "se": 45e-3, "be32": 0.15, "be64": 0.25, "ce": 8.0, "wrsr": 5e-3},
    "max": {"pp": 2.4e-3, "se": 0.3, "be32": 1.2, "be64": 1.6, "ce": 20.0, "wrsr": 15e-3},
}


def _build_sfdp() -> bytes:
    """JESD216 SFDP table (§c.7, §h.3): header, one parameter header, a 16-dword BFPT at 0x30.

    Dwords 1 (4 KiB erase, opcode 20h), 2 (density 0x00FFFFFF) and 8/9 (erase types 4K/20h,
    32K/52h, 64K/D8h) follow the spec; the remaining BFPT dwords are invented plausible values.
    """
    hdr = b"SFDP" + bytes([0x06, 0x01, 0x00, 0xFF])
    phdr = bytes([0x00, 0x06, 0x01, 16, 0x30, 0x00, 0x00, 0xFF])
    bfpt = [0xFFF120E5, 0x00FFFFFF, 0x6B08EB44, 0x3B42BB08, 0xFFFFFFFE, 0xFF000000, 0xEB40FFFF,
            0x520F200C, 0x0000D810, 0x00A60236, 0xEA14C98F, 0x68708762, 0x7A757A75, 0x5CD5BDF7,
            0xFF820F4A, 0x363CFFFF]
    body = b"".join(d.to_bytes(4, "little") for d in bfpt)
    table = hdr + phdr
    return table + b"\xff" * (0x30 - len(table)) + body


SFDP_TABLE = _build_sfdp()


def protected_range(sr1: int, sr2: int, size: int = SIZE) -> tuple[int, int]:
    """The protected byte range ``[start, end)`` for SR1/SR2 per the table of §c.4 (empty: start == end)."""
    bp = (sr1 >> 2) & 7
    tb = (sr1 >> 5) & 1
    sec = (sr1 >> 6) & 1
    if bp == 0:
        lo, hi = 0, 0
    elif bp >= 6:
        lo, hi = 0, size
    else:
        length = (4096 << min(bp - 1, 3)) if sec else (0x10000 << (bp - 1))
        lo, hi = (0, length) if tb else (size - length, size)
    if sr2 & SR2_CMP:
        if lo == hi:
            lo, hi = 0, size
        elif (lo, hi) == (0, size):
            lo, hi = 0, 0
        elif lo == 0:
            lo, hi = hi, size
        else:
            lo, hi = 0, lo
    return lo, hi


@dataclass
class Gd25Config:
    """Modelling choices the spec marks (inferred), with their defaults."""

    timing: str = "typical"
    #: WP# pin level; its wiring on the board is unknown (§c.3). High: SRP0 alone does not block WRSR.
    wp_high: bool = True
    #: WEL after a program/erase/WRSR rejected by protection: cleared (§c.5 asks to flag this choice).
    wel_clear_on_reject: bool = True
    #: What MOSI carries during an RX phase (invented: the line idles high, so it programs nothing).
    rx_filler: int = 0xFF
    #: ``stuck-busy`` fault: WIP never clears after PP/SE/BE/CE/WRSR.
    stuck_busy: bool = False
    #: ``bitflip@ADDR`` faults: the first array read covering ADDR returns it with bit 0 flipped.
    bitflips: tuple[int, ...] = ()
    #: ABh legacy device id (GigaDevice 16 Mbit parts answer 0x14; inferred for this die).
    device_id: int = 0x14
    #: 4Bh unique id (invented).
    unique_id: bytes = bytes(range(0x31, 0x41))


#: The commands of §c.2: opcode -> handler (the chip's methods, each registered with its opcodes and mnemonics)
COMMANDS: CommandTable[int] = CommandTable("gd25 command")


class _Op:
    """A program, erase or WRSR in progress: ``new`` replaces ``[addr, addr+len(new))`` over ``dur``."""

    __slots__ = ("kind", "addr", "new", "t0", "dur", "applied", "paused_at", "sr")

    def __init__(self, kind: str, addr: int, new: bytes, t0: float, dur: float, *, sr: bytes | None = None) -> None:
        self.kind, self.addr, self.new, self.t0, self.dur, self.sr = kind, addr, new, t0, dur, sr
        self.applied = 0
        self.paused_at: float | None = None


_READS_WHILE_BUSY = (0x05, 0x35, 0x15)


class GD25LQ16E:
    """The chip: feed it transactions with :meth:`transaction`, or controller reads with :meth:`read`."""

    def __init__(self, store: FlashStore, clock: Clock, config: Gd25Config | None = None) -> None:
        self.store = store
        self.clock = clock
        self.config = config or Gd25Config()
        self.size = store.size
        self._mem = store.data
        self._durations = TIMINGS[self.config.timing]
        self._flips = list(self.config.bitflips)
        self.flipped: list[int] = []
        self.op_counts: dict[int, int] = {}
        #: (kind, address, length) of every program/erase/WRSR started, and "<kind>-rejected" ones
        self.events: list[tuple[str, int, int]] = []
        #: opcode -> a handler ``(mosi, n_in, total) -> miso`` that replaces the table's on this chip (a test's or a
        #: fault model's seam: a chip that answers another id, a page program that drops a byte)
        self.overrides: dict[int, Callable[[bytes, int, int], bytes]] = {}
        self.power_up()

    def handler(self, op: int) -> Callable[[bytes, int, int], bytes] | None:
        """The handler opcode ``op`` runs on this chip (an override, else the table's, bound to the chip), or None
        for an opcode the chip ignores."""
        if op in self.overrides:
            return self.overrides[op]
        fn = COMMANDS.get(op)
        return None if fn is None else (lambda out, n_in, total: fn(self, out, n_in, total))

    # -- power and lifetime ------------------------------------------------------------------------------
    def power_up(self) -> None:
        """Power-on state: WEL, WIP, SUS and deep power-down clear; volatile SR copies reload from NV (§h.3)."""
        self._op: _Op | None = None
        self._wel = False
        self._dp = False
        self._vsr = False
        self._prev = -1
        nv = self.store.sr_nv
        if nv[1] & SR2_SRP1 and not nv[0] & SR1_SRP0:
            # SRP1=1, SRP0=0 is the power-supply lock-down: released by a power cycle (§c.3, family rule)
            nv[1] &= ~SR2_SRP1
            self.store.save_sr(bytes(nv))
        self._sr = bytearray(nv)

    def freeze(self) -> None:
        """Power lost: keep what a program/erase changed so far, drop the rest (a torn range)."""
        if self._op is not None and self._op.paused_at is None:
            self._settle()
        self._op = None
        self._wel = False

    def finish(self) -> None:
        """The host went away with power on: a running program/erase/WRSR completes on its own."""
        op = self._op
        if op is not None:
            self._apply(op, len(op.new))
            if op.sr is not None:
                self._commit_sr(op.sr)
            self._op = None
            self._wel = False

    # -- status ---------------------------------------------------------------------------------------------
    @property
    def busy(self) -> bool:
        """True while a program, erase or WRSR is running (WIP set) and not suspended; progress is applied first."""
        if self._op is not None:
            self._settle()
        return self._op is not None and self._op.paused_at is None

    def status(self) -> tuple[int, int, int]:
        """SR1, SR2, SR3 as RDSR would return them now."""
        if self._op is not None:
            self._settle()
        op = self._op
        sr1 = self._sr[0] | (SR1_WEL if self._wel else 0)
        sr2 = self._sr[1]
        if op is not None:
            if op.paused_at is None:
                sr1 |= SR1_WIP
            else:
                sr2 |= SR2_SUS2 if op.kind == "pp" else SR2_SUS1
        return sr1, sr2, self._sr[2]

    def protected(self) -> tuple[int, int]:
        """The byte range ``[start, end)`` the status registers protect now (§c.4; empty when start == end)."""
        return protected_range(self._sr[0], self._sr[1], self.size)

    # -- controller-side array read (ROM aperture) ---------------------------------------------------------
    def read(self, addr: int, n: int) -> bytes:
        """Array bytes as a controller-issued read sees them: ``FF`` while busy or in deep power-down."""
        if self._op is not None:
            self._settle()
            if self._op is not None and self._op.paused_at is None:
                return b"\xff" * n
        if self._dp:
            return b"\xff" * n
        return self._read_array(addr, n)

    def read_dword(self, addr: int) -> int:
        """Little-endian dword at ``addr`` (the ROM_DATA path; kept lean for 512k reads per dump)."""
        if self._op is None and not self._dp and not self._flips:
            a = addr % self.size
            if a <= self.size - 4:
                return int.from_bytes(self._mem[a:a + 4], "little")
        return int.from_bytes(self.read(addr, 4), "little")

    def _read_array(self, addr: int, n: int) -> bytes:
        a = addr % self.size
        mem = self._mem
        if a + n <= self.size:
            out = bytes(mem[a:a + n])
        else:
            buf = bytearray()
            while len(buf) < n:
                take = min(n - len(buf), self.size - a)
                buf += mem[a:a + take]
                a = (a + take) % self.size
            out = bytes(buf)
        if self._flips:
            out = self._flip(addr % self.size, out)
        return out

    def _flip(self, start: int, out: bytes) -> bytes:
        for target in list(self._flips):
            rel = (target - start) % self.size
            if rel < len(out):
                buf = bytearray(out)
                buf[rel] ^= 0x01
                out = bytes(buf)
                self._flips.remove(target)
                self.flipped.append(target)
        return out

    # -- progress of program/erase/WRSR --------------------------------------------------------------------
    def _settle(self) -> None:
        op = self._op
        if op is None or op.paused_at is not None:
            return
        elapsed = self.clock.now() - op.t0
        if elapsed >= op.dur:
            self._apply(op, len(op.new))
            if not self.config.stuck_busy:
                if op.sr is not None:
                    self._commit_sr(op.sr)
                self._op = None
                self._wel = False
        else:
            self._apply(op, int(len(op.new) * elapsed / op.dur))

    def _apply(self, op: _Op, upto: int) -> None:
        if upto > op.applied:
            self.store.write(op.addr + op.applied, op.new[op.applied:upto])
            op.applied = upto

    def _commit_sr(self, sr: bytes) -> None:
        self._sr[:] = sr
        self.store.save_sr(bytes(sr))

    def _start(self, kind: str, addr: int, new: bytes, sr: bytes | None = None) -> None:
        self.events.append((kind, addr, len(new)))
        self._op = _Op(kind, addr, new, self.clock.now(), self._durations[kind], sr=sr)
        self._settle()

    def _reject(self, kind: str, addr: int, length: int) -> None:
        self.events.append((kind + "-rejected", addr, length))
        if self.config.wel_clear_on_reject:
            self._wel = False

    # -- transactions -----------------------------------------------------------------------------------------
    def transaction(self, out: bytes, n_in: int) -> bytes:
        """One CS#-framed transaction: shift in ``out``, then capture ``n_in`` bytes (returned)."""
        if self._op is not None:
            self._settle()
        if not out:
            return b"\xff" * n_in
        op = out[0]
        self.op_counts[op] = self.op_counts.get(op, 0) + 1
        total = len(out) + n_in
        if self._dp:  # deep power-down: only ABh is recognised
            return self._release_power_down(out, n_in, total) if op == 0xAB else b"\xff" * n_in
        busy = self._op is not None and self._op.paused_at is None
        if busy and op not in _READS_WHILE_BUSY:  # only RDSR and suspend while busy (§h.3)
            if op == 0x75 and total == 1:
                self._suspend(out, n_in, total)
            return b"\xff" * n_in
        handler = self.handler(op)
        self._armed_vsr, self._vsr = self._vsr, False
        self._last, self._prev = self._prev, op
        if handler is None:
            return b"\xff" * n_in
        return handler(out, n_in, total)

    def _stream(self, out: bytes, n_in: int, start: int, end: int) -> bytes:
        """MOSI bytes at positions ``[start, end)`` of the transaction (filler during the RX phase)."""
        s = out[start:end]
        need = end - start - len(s)
        return s + bytes([self.config.rx_filler]) * need if need > 0 else s

    def _addr(self, out: bytes, n_in: int) -> int:
        return int.from_bytes(self._stream(out, n_in, 1, 4), "big") % self.size

    @staticmethod
    def _lead(out: bytes, n_in: int, hdr: int) -> int:
        """How many captured bytes fall before position ``hdr`` (they read FF: high-Z or a dummy slot)."""
        return min(n_in, max(0, hdr - len(out)))

    def _repeat(self, out: bytes, n_in: int, hdr: int, pattern: bytes) -> bytes:
        lead = self._lead(out, n_in, hdr)
        first = max(0, len(out) - hdr)
        body = bytes(pattern[(first + i) % len(pattern)] for i in range(n_in - lead))
        return b"\xff" * lead + body

    @COMMANDS.handles(0x9F)  # RDID
    def _read_jedec_id(self, out: bytes, n_in: int, total: int) -> bytes:
        return self._repeat(out, n_in, 1, JEDEC_ID)

    @COMMANDS.handles(0x90)  # REMS
    def _read_manufacturer_id(self, out: bytes, n_in: int, total: int) -> bytes:
        swap = self._stream(out, n_in, 3, 4)[0] & 1  # A0 picks the order of the pair
        return self._repeat(out, n_in, 4, REMS_ID[::-1] if swap else REMS_ID)

    @COMMANDS.handles(0x05)  # RDSR1
    @COMMANDS.handles(0x35)  # RDSR2
    @COMMANDS.handles(0x15)  # RDSR3
    def _read_status(self, out: bytes, n_in: int, total: int) -> bytes:
        sr1, sr2, sr3 = self.status()
        value = {0x05: sr1, 0x35: sr2, 0x15: sr3}[out[0]]
        return self._repeat(out, n_in, 1, bytes([value]))

    def _read_after_header(self, out: bytes, n_in: int, hdr: int, fetch: Callable[[int, int], bytes]) -> bytes:
        lead = self._lead(out, n_in, hdr)
        first = max(0, len(out) - hdr)
        body = fetch(self._addr(out, n_in) + first, n_in - lead) if n_in > lead else b""
        return b"\xff" * lead + body

    @COMMANDS.handles(0x03)  # READ
    @COMMANDS.handles(0x0B)  # FAST_READ
    def _read_data(self, out: bytes, n_in: int, total: int) -> bytes:
        # 03h: data right after the address; 0Bh: one dummy byte first (a ROM_SW host sees FF there, §h.3)
        return self._read_after_header(out, n_in, 4 if out[0] == 0x03 else 5, self._read_array)

    @COMMANDS.handles(0x5A)  # RDSFDP
    def _read_sfdp(self, out: bytes, n_in: int, total: int) -> bytes:
        def fetch(addr: int, n: int) -> bytes:
            chunk = SFDP_TABLE[addr:addr + n]
            return chunk + b"\xff" * (n - len(chunk))

        return self._read_after_header(out, n_in, 5, fetch)

    @COMMANDS.handles(0x4B)  # unique id
    def _read_unique_id(self, out: bytes, n_in: int, total: int) -> bytes:
        return self._repeat(out, n_in, 5, self.config.unique_id)

    @COMMANDS.handles(0x48)  # security registers
    def _read_security_registers(self, out: bytes, n_in: int, total: int) -> bytes:
        return b"\xff" * n_in  # security (OTP) registers are not modelled: they read erased

    @COMMANDS.handles(0x06)  # WREN
    def _write_enable(self, out: bytes, n_in: int, total: int) -> bytes:
        if total == 1:
            self._wel = True
        return b"\xff" * n_in

    @COMMANDS.handles(0x04)  # WRDI
    def _write_disable(self, out: bytes, n_in: int, total: int) -> bytes:
        if total == 1:
            self._wel = False
        return b"\xff" * n_in

    @COMMANDS.handles(0x50)  # volatile SR write enable
    def _volatile_write_enable(self, out: bytes, n_in: int, total: int) -> bytes:
        if total == 1:
            self._vsr = True  # the next WRSR writes the volatile copies (§h.3, inferred)
        return b"\xff" * n_in

    @COMMANDS.handles(0x66)  # RSTEN
    def _enable_reset(self, out: bytes, n_in: int, total: int) -> bytes:
        return b"\xff" * n_in  # 66h: enable reset, remembered as the previous opcode

    @COMMANDS.handles(0x99)  # RST
    def _reset(self, out: bytes, n_in: int, total: int) -> bytes:
        if total == 1 and self._last == 0x66:
            self._op = None
            self._wel = False
            self._sr = bytearray(self.store.sr_nv)
        return b"\xff" * n_in

    def _sr_blocked(self) -> bool:
        if self._sr[1] & SR2_SRP1:
            return True
        return bool(self._sr[0] & SR1_SRP0) and not self.config.wp_high

    @COMMANDS.handles(0x01)  # WRSR1
    @COMMANDS.handles(0x31)  # WRSR2
    @COMMANDS.handles(0x11)  # WRSR3
    def _write_status(self, out: bytes, n_in: int, total: int) -> bytes:
        op = out[0]
        nbytes = total - 1
        if nbytes < 1 or nbytes > (2 if op == 0x01 else 1) or self._op is not None:
            return b"\xff" * n_in
        volatile = self._armed_vsr
        if not volatile and not self._wel:
            return b"\xff" * n_in
        if self._sr_blocked():
            self._reject("wrsr", 0, nbytes)
            return b"\xff" * n_in
        data = self._stream(out, n_in, 1, total)
        sr = bytearray(self._sr)
        if op == 0x11:
            sr[2] = data[0]
        else:
            b1 = data[0] if op == 0x31 else (data[1] if nbytes == 2 else None)
            if op == 0x01:
                sr[0] = data[0] & SR1_NV_MASK
            if b1 is not None:
                sr[1] = (b1 & SR2_RW_MASK) | ((sr[1] | b1) & SR2_LB_MASK)
        if volatile:
            self._sr[:] = sr
        else:
            self._start("wrsr", 0, b"", bytes(sr))
        return b"\xff" * n_in

    @COMMANDS.handles(0x02)  # PP
    def _page_program(self, out: bytes, n_in: int, total: int) -> bytes:
        if total < 5 or not self._wel or self._op is not None:
            return b"\xff" * n_in
        addr = self._addr(out, n_in)
        data = self._stream(out, n_in, 4, total)
        page = addr & ~(PAGE - 1)
        pos = addr & (PAGE - 1)
        if len(data) > PAGE:  # only the last 256 bytes are kept (§h.3)
            pos = (pos + len(data) - PAGE) % PAGE
            data = data[-PAGE:]
        latch = bytearray(b"\xff" * PAGE)
        first = min(len(data), PAGE - pos)
        latch[pos:pos + first] = data[:first]
        latch[:len(data) - first] = data[first:]
        lo, hi = self.protected()
        if lo < page + PAGE and page < hi:
            self._reject("pp", page, PAGE)
            return b"\xff" * n_in
        old = int.from_bytes(self._mem[page:page + PAGE], "big")
        self._start("pp", page, (old & int.from_bytes(latch, "big")).to_bytes(PAGE, "big"))
        return b"\xff" * n_in

    @COMMANDS.handles(0x20)  # SE (4 KiB)
    @COMMANDS.handles(0x52)  # BE32
    @COMMANDS.handles(0xD8)  # BE64
    def _erase(self, out: bytes, n_in: int, total: int) -> bytes:
        if total != 4 or not self._wel or self._op is not None:
            return b"\xff" * n_in
        kind, length = {0x20: ("se", 0x1000), 0x52: ("be32", 0x8000), 0xD8: ("be64", 0x10000)}[out[0]]
        addr = self._addr(out, n_in) & ~(length - 1)
        lo, hi = self.protected()
        if lo < addr + length and addr < hi:
            self._reject(kind, addr, length)
            return b"\xff" * n_in
        self._start(kind, addr, b"\xff" * length)
        return b"\xff" * n_in

    @COMMANDS.handles(0xC7)  # CE
    @COMMANDS.handles(0x60)  # CE
    def _chip_erase(self, out: bytes, n_in: int, total: int) -> bytes:
        if total != 1 or not self._wel or self._op is not None:
            return b"\xff" * n_in
        lo, hi = self.protected()
        if lo != hi:  # CE with any protection is ignored (§c.4)
            self._reject("ce", 0, self.size)
            return b"\xff" * n_in
        self._start("ce", 0, b"\xff" * self.size)
        return b"\xff" * n_in

    @COMMANDS.handles(0xB9)  # DP
    def _deep_power_down(self, out: bytes, n_in: int, total: int) -> bytes:
        if total == 1:
            self._dp = True
        return b"\xff" * n_in

    @COMMANDS.handles(0xAB)  # RDP (and the legacy id)
    def _release_power_down(self, out: bytes, n_in: int, total: int) -> bytes:
        self._dp = False  # ABh releases deep power-down; with 3 dummy bytes it also returns the device id
        return self._repeat(out, n_in, 4, bytes([self.config.device_id]))

    @COMMANDS.handles(0x75)  # program/erase suspend
    def _suspend(self, out: bytes, n_in: int, total: int) -> bytes:
        op = self._op
        if total == 1 and op is not None and op.paused_at is None and op.kind in ("pp", "se", "be32", "be64"):
            self._settle()
            if self._op is op:
                op.paused_at = self.clock.now()
        return b"\xff" * n_in

    @COMMANDS.handles(0x7A)  # resume
    def _resume(self, out: bytes, n_in: int, total: int) -> bytes:
        op = self._op
        if total == 1 and op is not None and op.paused_at is not None:
            op.t0 += self.clock.now() - op.paused_at
            op.paused_at = None
        return b"\xff" * n_in
