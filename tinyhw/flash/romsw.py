"""SMUIO ROM_SW engine driver: raw SPI transactions through BAR5, set up once per session.

Implements specs/navi31-spi-flash.md §a.2/§a.3 (registers and fields, all looked up in the register
database), §b.1-b.3 (open, transaction, window byte order), §b.4 (the primed RX window) and §i.2
(cost reductions): the five controls are saved and configured once per session and restored on
exit (also on errors and Ctrl-C); the flush read, the eager timeout-message read, the per-transaction
reset writes (and with them the stray transactions of §b.4) are dropped; the STATUS = 0 check runs
once per session as the gating detector; STATUS and the data window come back in one streamed
read (the window follows STATUS in BAR5); and priming is chained across consecutive reads (§i.2
step 3), with the seed's paired reads as the fallback (``chain=False``), because chaining is inferred.

Steady state per transaction: write COMMAND, write STATUS = 0, write CNTL (start), then one read of
STATUS (+ window). Before that read the driver waits on the transport clock for the SPI time it has
learned (§i.2 step 4), so the first poll normally finds DONE.

On a transport with the batching ability (``remote:``) the same transactions are queued
instead: DONE is polled on the device's side (a Poll32 operation) and chained reads travel
:data:`BATCH_READS` at a time, so a 4 KiB read costs half a network round trip.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from types import TracebackType

from tinyhw.errors import OperationFailed, TinyhwError
from tinyhw.regs import Asic
from tinyhw.transport.base import Transport, has
from tinyhw.transport.batch import Batching, Op, Poll32, R, Ticket
from tinyhw.transport.wait import poll

#: SMU GPIO pads 7..10 (the SPI pins, inferred), released for ROM_SW use (§a.3, §b.2 step 2).
SPI_PADS = 0x780
#: ROM_SW_STATUS once the PSP has gated the engine (§0, §1; seed).
GATED_STATUS = 0x04000800
#: Data bytes per transaction: DATA_1..DATA_64 (§b.5).
WINDOW_BYTES = 256
#: Default SCK prescale written at open (§b.1: 0..15, default 8).
DEFAULT_PRESCALE = 8
#: Seed's wait for DONE: 2 s (§b.2 step 11); polls between the first check and the timeout.
DONE_TIMEOUT = 2.0
DONE_INTERVAL = 10e-6
#: Reads sent in one message on a batching transport (remote:): 32 x 256 bytes = 8 KiB per round trip.
BATCH_READS = 32
DONE_WHAT = "the rom_sw transaction to finish"
DONE_HINT = f"the engine may be gated (rom_sw_status 0x{GATED_STATUS:08x} means gated); power-cycle the board"
#: What works on a board whose PSP has booted (ROM_SW gated): said by every ROM_SW refusal of that state.
GATED_WORKS = ("what works in this state: reading through the rom aperture (flash dump --method aperture, flash "
               "verify --after-update), and "
               "writing through the psp with flash update IMAGE --yes (its early mailbox, open after a power cycle "
               "until a driver or am boot starts the secure os); rom_sw itself needs a board whose boot loader "
               "stalled")
#: ... and on an emulated board, the command that brings it back to a cold board with ROM_SW open.
EMULATED_WORKS = "; on an emulated board also tinyhw mock reset --yes (the factory image, a cold board, rom_sw open)"


def gated_hint(emulated: bool) -> str:
    """The hint of a ROM_SW refusal on a gated engine: what works in that state (``emulated``: also mock reset)."""
    return GATED_WORKS + (EMULATED_WORKS if emulated else "")

_CONTROLS = ("SMU_GPIOPAD_MASK", "SMU_GPIOPAD_A", "SMU_GPIOPAD_EN", "PAGE_MIRROR_CNTL", "ROM_CNTL")
#: Restore order of §b.2 step 13: ROM_CNTL, PAGE_MIRROR_CNTL, A, EN, MASK.
_RESTORE = ("ROM_CNTL", "PAGE_MIRROR_CNTL", "SMU_GPIOPAD_A", "SMU_GPIOPAD_EN", "SMU_GPIOPAD_MASK")


@dataclass(frozen=True)
class Rx:
    """One RX transaction: ``opcode``, optional 24-bit ``address``, ``count`` data bytes (1..256)."""

    opcode: int
    address: int | None
    count: int


def _swap32(data: bytes) -> bytes:
    """Big-endian dwords (TX stream order, §b.3) as BAR bytes (little-endian dwords)."""
    out = bytearray(data)
    out[0::4], out[1::4], out[2::4], out[3::4] = data[3::4], data[2::4], data[1::4], data[0::4]
    return bytes(out)


class RomSw:
    """The ROM_SW engine of one device; use as a context manager (``open``/``close``)."""

    def __init__(self, transport: Transport, asic: Asic, *, chain: bool = True, prescale: int = DEFAULT_PRESCALE,
                 merged: bool = True) -> None:
        if not 0 <= prescale <= 15:
            raise OperationFailed(f"sck prescale {prescale} is outside 0..15")
        self.transport = transport
        self.clock = transport.clock
        self.bar = transport.bar(asic.bar)
        self.chain = chain
        self.prescale = prescale
        #: read STATUS and the window in one streamed read (§i.2); False: separate reads
        self.merged = merged
        self.transactions = 0
        r = {n: asic.reg(f"smuio.{n}") for n in (*_CONTROLS, "ROM_SW_CNTL", "ROM_SW_STATUS", "ROM_SW_COMMAND",
                                                  "ROM_SW_DATA_1", "ROM_SW_DATA_64")}
        self._reg = r
        self._off = {n: asic.offset(f"smuio.{n}") for n in r}
        self._cntl, self._status, self._command = (self._off[n] for n in ("ROM_SW_CNTL", "ROM_SW_STATUS",
                                                                          "ROM_SW_COMMAND"))
        self._data = self._off["ROM_SW_DATA_1"]
        if self._off["ROM_SW_DATA_64"] - self._data != WINDOW_BYTES - 4:
            raise OperationFailed("the register database's rom_sw data window is not 64 contiguous dwords")
        self._done = asic.field("smuio.ROM_SW_STATUS.ROM_SW_DONE").mask
        self._win_in_merged = self._data - self._status
        self._merged_ok = self._win_in_merged > 0  # the window must follow STATUS for one streamed read
        self._saved: dict[str, int] | None = None
        self._fired_at = 0.0
        self._fired_bytes = 1
        #: learned time from start to DONE per transaction length in bytes: the wait before the first poll
        self._lead: dict[int, float] = {}
        #: a transport that sends queued accesses together (remote:): DONE is polled on the device side and
        #: reads travel in groups; None: every access as it comes (the seed's order)
        self._batch = transport if has(transport, Batching) else None
        self.emulated = transport.emulated

    # -- session -------------------------------------------------------------------------------------------
    def open(self) -> RomSw:
        """Save and configure the controls once (§i.2 step 1), then check that the engine is not gated."""
        saved = {n: self.bar.read32(self._off[n]) for n in _CONTROLS}
        if saved["ROM_CNTL"] == 0xFFFFFFFF:
            raise OperationFailed("the smuio rom controller reads 0xffffffff: it is not reachable",
                                  hint="check that the board is powered and bar5 is mapped")
        self._saved = saved
        r = self._reg
        for n in ("SMU_GPIOPAD_MASK", "SMU_GPIOPAD_A", "SMU_GPIOPAD_EN"):
            self.bar.write32(self._off[n], saved[n] & ~SPI_PADS & 0xFFFFFFFF)
        pm = r["PAGE_MIRROR_CNTL"].encode(saved["PAGE_MIRROR_CNTL"], PAGE_MIRROR_ENABLE=1, PAGE_MIRROR_USAGE=1)
        self.bar.write32(self._off["PAGE_MIRROR_CNTL"], pm)
        rc = r["ROM_CNTL"].encode(saved["ROM_CNTL"], CLOCK_GATING_EN=0, READ_MODE=0, READ_MODE_OVERRIDE=1,
                                  SCK_PRESCALE_REFCLK=self.prescale, SCK_PRESCALE_REFCLK_OVERRIDE=1)
        self.bar.write32(self._off["ROM_CNTL"], rc)
        try:
            self._check_gate()
        except BaseException as e:
            self.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def _check_gate(self) -> None:
        """The session's one STATUS = 0 check (§b.2 step 6, kept once per session as the gating detector)."""
        self.bar.write32(self._status, 0)
        status = self.bar.read32(self._status)
        if status == GATED_STATUS:
            raise OperationFailed(
                f"the rom_sw engine is gated (rom_sw_status 0x{status:08x}): the psp has booted this board",
                hint=gated_hint(self.emulated))
        if status != 0:
            raise OperationFailed(f"rom_sw_status did not clear (0x{status:08x}): the engine may be gated or held "
                                  "by firmware", hint=gated_hint(self.emulated))

    def close(self) -> None:
        """Restore the five controls exactly as they were (§b.2 step 13 order)."""
        saved, self._saved = self._saved, None
        if saved is None:
            return
        for n in _RESTORE:
            self.bar.write32(self._off[n], saved[n])

    def __enter__(self) -> RomSw:
        return self.open()

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        if et is None:
            self.close()
            return
        # restoring must never mask the original error (a pulled cable fails here too)
        with contextlib.suppress(TinyhwError, OSError):
            self.close()

    @property
    def saved(self) -> dict[str, int] | None:
        """The controls as found at open (for tests and diagnostics)."""
        return None if self._saved is None else dict(self._saved)

    # -- one transaction -----------------------------------------------------------------------------------
    def fire(self, opcode: int, address: int | None, count: int, rx: bool) -> None:
        """Start one transaction: ``opcode``, a 3-byte ``address`` (None: none), ``count`` data bytes sent from the
        window or (``rx``) received into it; :meth:`finish` waits for it."""
        if not 0 <= count <= WINDOW_BYTES:
            raise OperationFailed(f"rom_sw transaction of {count} data bytes (at most {WINDOW_BYTES})")
        r = self._reg
        cmd = r["ROM_SW_COMMAND"].encode(0, ROM_SW_INSTRUCTION=opcode, ROM_SW_ADDRESS=(address or 0) & 0xFFFFFF)
        addr_len = 0 if address is None else 3
        cntl = r["ROM_SW_CNTL"].encode(0, DATA_SIZE=count, COMMAND_SIZE=addr_len,
                                       ROM_SW_RETURN_DATA_ENABLE=int(rx))
        bar = self.bar
        bar.write32(self._command, cmd)
        bar.write32(self._status, 0)
        bar.write32(self._cntl, cntl)
        self._fired_at = self.clock.now()
        self._fired_bytes = 1 + addr_len + count
        self.transactions += 1

    def finish(self, window: int) -> bytes:
        """Wait for DONE; return the first ``window`` bytes of the data window (rounded up to dwords)."""
        if self._batch is not None:
            ticket = self._batch.submit(self._finish_ops(window))
            return ticket.get()[-1] if window else b""  # without data nothing needs the answer yet
        clock = self.clock
        lead = self._lead.get(self._fired_bytes, 0.0) - (clock.now() - self._fired_at)
        if lead > 0:
            clock.sleep(lead)
        n = (window + 3) & ~3
        done = self._done
        missed = False
        if n and self.merged and self._merged_ok:
            blob = self.bar.read(self._status, self._win_in_merged + n)
            if int.from_bytes(blob[:4], "little") & done:
                return blob[self._win_in_merged:]
            missed = True
        probes = 0
        asked = 0.0

        def probe() -> int:
            nonlocal probes, asked
            probes += 1
            asked = clock.now()
            return self.bar.read32(self._status)

        poll(clock, probe, lambda v: bool(v & done), timeout=DONE_TIMEOUT, interval=DONE_INTERVAL,
             what=DONE_WHAT, hint=DONE_HINT)
        if missed or probes > 1:  # learn the SPI time, so that the next first poll finds DONE (§i.2 step 4)
            took = asked - self._fired_at  # the successful poll was sent then: start the next first poll there
            self._lead[self._fired_bytes] = max(self._lead.get(self._fired_bytes, 0.0), took)
        return self.bar.read(self._data, n) if n else b""

    def _finish_ops(self, window: int) -> list[Op]:
        """The device-side form of :meth:`finish`: poll DONE there, then read the window (batching transports)."""
        bar = self.bar.info.index
        ops: list[Op] = [Poll32(bar, self._status, self._done, self._done, DONE_TIMEOUT, DONE_INTERVAL,
                                DONE_WHAT, DONE_HINT)]
        n = (window + 3) & ~3
        if n:
            ops.append(R(bar, self._data, n))
        return ops

    def transmit(self, opcode: int, address: int | None = None, data: bytes = b"") -> None:
        """One TX transaction: opcode, optional 24-bit address, then ``data`` (0..256 bytes, §b.2 step 8)."""
        if data:
            if len(data) > WINDOW_BYTES:
                raise OperationFailed(f"rom_sw tx of {len(data)} bytes (at most {WINDOW_BYTES})")
            padded = bytes(data) + bytes(-len(data) % 4)
            self.bar.write(self._data, _swap32(padded))
        self.fire(opcode, address, len(data), rx=False)
        self.finish(0)

    # -- reads ---------------------------------------------------------------------------------------------
    def receive(self, opcode: int, count: int, address: int | None = None) -> bytes:
        """One read, always primed by an identical transaction (§b.4): correct under either RX model."""
        self.fire(opcode, address, count, rx=True)
        self.finish(0)
        self.fire(opcode, address, count, rx=True)
        return self.finish(count)[:count]

    def receive_stream(self, requests: Iterable[Rx]) -> Iterator[bytes]:
        """Data of each request in order. Chained: N + 1 transactions for N reads (the window after
        firing request k+1 shows request k); paired: 2 N transactions."""
        if not self.chain:
            for req in requests:
                yield self.receive(req.opcode, req.count, req.address)
            return
        if self._batch is not None:
            yield from self._stream_batched(requests)
            return
        prev: Rx | None = None
        for req in requests:
            self.fire(req.opcode, req.address, req.count, rx=True)
            window = self.finish(prev.count if prev else 0)
            if prev is not None:
                yield window[:prev.count]
            prev = req
        if prev is not None:
            self.fire(prev.opcode, prev.address, prev.count, rx=True)  # the tail: shows the last request
            yield self.finish(prev.count)[:prev.count]

    def _stream_batched(self, requests: Iterable[Rx]) -> Iterator[bytes]:
        """Chained reads on a batching transport: BATCH_READS transactions per message (one round trip)."""
        assert self._batch is not None
        pending: list[tuple[Ticket, int]] = []
        prev: Rx | None = None
        for req in requests:
            self.fire(req.opcode, req.address, req.count, rx=True)
            ticket = self._batch.submit(self._finish_ops(prev.count if prev else 0))
            if prev is not None:
                pending.append((ticket, prev.count))
            if len(pending) >= BATCH_READS:
                for t, count in pending:
                    yield t.get()[-1][:count]
                pending = []
            prev = req
        if prev is not None:
            self.fire(prev.opcode, prev.address, prev.count, rx=True)  # the tail: shows the last request
            pending.append((self._batch.submit(self._finish_ops(prev.count)), prev.count))
        for t, count in pending:
            yield t.get()[-1][:count]

    def poll_register(self, opcode: int, done: Callable[[int], bool], *, first_wait: float, interval: float,
                      timeout: float, what: str, hint: str | None = None) -> int:
        """Poll a one-byte status register (05h/35h/15h) until ``done(value)``; the clock's timeout names ``what``.

        Chained: one transaction per poll after a priming one (the value read is the one captured by
        the previous poll); paired: two per poll.
        """
        clock = self.clock
        if first_wait > 0:
            clock.sleep(first_wait)
        if self.chain:
            self.fire(opcode, None, 4, rx=True)
            self.finish(0)

            def probe() -> int:
                self.fire(opcode, None, 4, rx=True)
                return self.finish(4)[0]
        else:
            def probe() -> int:
                return self.receive(opcode, 4)[0]
        return poll(clock, probe, done, timeout=timeout, interval=interval, what=what, hint=hint)
