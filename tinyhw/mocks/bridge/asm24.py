"""The emulated ASM24 USB-to-PCIe bridge with the tinygrad custom firmware: the device core.

Implements specs/asm24-usb-bridge.md §2-§8 as seen from the USB side, following the checklist of
§12 (the items on several host threads as far as synchronous transfers from them
allow: per-pipe busy-until times, arms queued while a bulk OUT lands, the GPU's writes held until
their modelled time) and the failure modes of §10 and edge cases of §13. Helpers: :mod:`.asm24_memory` (XDATA, SRAM,
windows), :mod:`.asm24_tlp` (link, TLP engine), :mod:`.asm24_endpoints` (bulk endpoints,
streams, 0xF2 data, the fault exceptions, timing), :mod:`.pcie_switch` (bridges and routing),
:mod:`.usb_descriptors` (identity).

One device core, several front ends: this module knows nothing of pyusb or FunctionFS. A front
end hands it setup packets and bulk data and maps its exceptions (:class:`Stall`,
:class:`Timeout`, :class:`Disconnect`, :class:`Overflow`) to its own error codes. All protocol
logic, state, counters, the timing model (advancing the shared :class:`VirtualClock`) and fault
injection live here. Decisions the spec leaves open are listed in the docstrings below and in
:mod:`.asm24_tlp`.
"""

from __future__ import annotations

import heapq
import random
import zlib
from collections.abc import Callable
from typing import Any, NamedTuple

from tinyhw.boards.amd import AmdBoardUsbOptions
from tinyhw.boards.asm24 import USB_GPU_BUS
from tinyhw.commands import CommandTable
from tinyhw.errors import StrictEmulationError
from tinyhw.mocks.bridge.asm24_endpoints import (
    Asm24Timing,
    Budget,
    BulkEndpoints,
    Disconnect,
    FirmwareBusy,
    Overflow,
    Stall,
    Timeout,
    UsbFault,
)
from tinyhw.mocks.bridge.asm24_memory import SLOT_SIZE, SRAM_SIZE, BridgeMemory, xdata_write_modelled
from tinyhw.mocks.bridge.asm24_tlp import REG_LTSSM, REG_PERST, Completion, LinkModel, TlpEngine, decode_fmt_type
from tinyhw.mocks.bridge.pcie_switch import Endpoint, PcieHierarchy
from tinyhw.mocks.bridge.usb_descriptors import (
    EP_IN,
    EP_OUT,
    EP_UAS_COMMAND,
    EP_UAS_STATUS,
    VENDOR_ID,
    UsbIdentity,
    bulk_max_packet,
)
from tinyhw.mocks.common.vclock import VirtualClock

__all__ = [
    "Asm24Bridge",
    "Asm24Timing",
    "DataStage",
    "Disconnect",
    "Overflow",
    "Setup",
    "Stall",
    "Timeout",
    "TransferRecord",
    "UsbFault",
]


class Setup(NamedTuple):
    """The fields of a control request's setup packet (wlen = wLength)."""

    rt: int
    req: int
    wv: int
    wi: int
    wlen: int


class TransferRecord(NamedTuple):
    """One counted transfer (vendor control or bulk), in submission order."""

    number: int
    kind: str  # "control", "bulk_out", "bulk_in"
    setup: Setup | None
    endpoint: int | None
    length: int  # bytes offered (OUT) or asked for (IN)
    actual: int  # bytes moved
    status: str  # "ok", "stall", "timeout", "disconnect", "overflow"
    crc32: int  # of the data moved


class DataStage:
    """The data stage of an OUT control request that the host sends only once the device takes it.

    A front end that sees the setup packet before the data (FunctionFS: the data is read from ep0
    after the SETUP event, and reading it completes the transfer on the host) hands this instead
    of bytes; the core calls :meth:`fetch` only after deciding from the setup packet that the
    firmware takes the data stage (:meth:`Asm24Bridge.control`), so a request it refuses is
    stalled or left unanswered before any data moves. ``fetch`` may raise :class:`Timeout`
    when the host gave up first.
    """

    def __init__(self, length: int, fetch: Callable[[int], bytes]) -> None:
        self.length, self._fetch = length, fetch

    def __len__(self) -> int:
        return self.length

    def fetch(self) -> bytes:
        """Take the host's OUT data stage now: ``length`` bytes from the host (may raise :class:`Timeout` when the host
        already gave up)."""
        return bytes(self._fetch(self.length))


_STATUS = {Stall: "stall", Timeout: "timeout", Disconnect: "disconnect", Overflow: "overflow"}

#: bRequest of the firmware's vendor requests (§4): read XDATA, write one XDATA byte, send a TLP (OUT) or read its
#: completion (IN), arm an SRAM DMA, switch PCIe power
REQ_READ_XDATA, REQ_WRITE_XDATA, REQ_TLP, REQ_SRAM_DMA, REQ_PCIE_POWER = 0xE4, 0xE5, 0xF0, 0xF2, 0xF3
READ_XDATA_CAP = {"ss": 512, "hs": 64}
#: the OUT data stage (bytes) each vendor OUT request of the firmware takes (§4.1); others take none
#: the firmware's vendor requests by (bmRequestType, bRequest): one named handler each (§4)
VENDOR_REQUESTS: CommandTable[tuple[int, int]] = CommandTable("vendor request")
OUT_DATA_STAGE = {(0x40, REQ_TLP): 12, (0x40, REQ_WRITE_XDATA): 0, (0x40, REQ_SRAM_DMA): 0, (0x40, REQ_PCIE_POWER): 0}


class Asm24Bridge:
    """The bridge as a USB device: ``control``, ``bulk_out``, ``bulk_in``, ``clear_halt``, ``bus_reset``.

    ``board`` is the PCIe endpoint at bus ``gpu_bus`` device 0 function 0. Timeouts are host time
    limits in seconds (None: unknown, the clock is not advanced for the wait). With ``options.strict``
    accesses outside the model (E5 into firmware RAM, the alternate XDATA bank, malformed stream
    setups, an SRAM->host arm with a non-zero first slot) raise :class:`StrictEmulationError`;
    otherwise they are listed in ``warnings``.

    Counting and faults: every vendor control and bulk transfer that reaches the core is counted
    (``usb_transfers``, 1-based from creation), failed ones included; standard requests are only
    counted in ``standard_requests`` and logged in ``std_log``. ``bytes_in``/``bytes_out`` are the
    data-stage bytes of vendor requests plus bulk payload of transfers that succeeded. A
    ``disconnect@N`` fault fails transfer N and everything after (standard requests too) and calls
    ``board.disconnect()`` when the board has one; ``timeout@N`` drops transfer N unseen;
    ``stall@N`` stalls it (a bulk endpoint then stays halted until CLEAR_FEATURE(halt)). ``flaky=RATE``
    (with ``flaky-seed``) changes one byte of a bulk IN transfer at that rate on its way to the host
    (counted in ``flaky_corrupted``): a link whose reads are occasionally wrong, as over the custom
    firmware's USB 2.0 path.

    Choices where the firmware is not documented: requests the firmware does not handle (GET_STATUS,
    unknown descriptor types, unknown vendor requests, vendor requests with another recipient)
    take the fall-through branch of §4.8; an 0xF0 IN returns the latest completion again until the
    next 0xF0 OUT; an E4 longer than 64 bytes at High-Speed times out (:attr:`e4_overlong_hs`); a
    request that keeps the firmware busy past the host's limit times out on the host while the
    firmware finishes it, and later requests wait for it (``busy.until``).

    The bulk endpoints' state and data paths are :attr:`endpoints` (:class:`BulkEndpoints`).
    """

    #: What an E4 longer than the cap does at High-Speed: "timeout" (firmware PR #83 on hardware) or "short".
    e4_overlong_hs = "timeout"
    #: Hold bus-master writes stamped later than the host's present until a host transfer reaches that time
    #: (pyusb front end, virtual clock). The FunctionFS front end serves a real host on a wall-paced clock and
    #: lands them at once (nothing there would settle them while the host waits on a bulk IN).
    hold_bus_writes = True
    #: :meth:`dma_write` takes the writer's time (``at``); the board hands it the SDMA's
    timed_writes = True

    def __init__(self, board: Endpoint, options: AmdBoardUsbOptions, clock: VirtualClock, *,
                 timing: Asm24Timing | None = None, gpu_bus: int = USB_GPU_BUS, serial: str | None = None,
                 vendor_id: int = VENDOR_ID) -> None:
        self.board, self.options, self.clock = board, options, clock
        self.timing = timing or Asm24Timing()
        self.speed = options.speed
        if serial is None:
            serial = f"{zlib.crc32(str(options.flash).encode()):08x}"
        self.identity = UsbIdentity(self.speed, serial, vendor_id)
        self.memory = BridgeMemory()
        self.hierarchy = PcieHierarchy(board, gpu_bus)
        self.link = LinkModel(options.link, clock, self.timing.link)
        self.engine = TlpEngine(self.hierarchy, self.memory, self.link)
        self.max_packet = bulk_max_packet(self.speed)
        self.configuration = 1  # the OS configured the device when it enumerated
        self.alt_setting = 0
        self.disconnected = False
        self.busy = FirmwareBusy()
        self.pending_cpl: Completion | None = None
        self.log: list[TransferRecord] = []
        self.std_log: list[tuple[int, int, int, int, int, str]] = []
        self.warnings: list[str] = []
        #: bus-master writes with a modelled time later than the host's (the SDMA's fence and release writes):
        #: (time, order, address, data), applied by :meth:`settle` when a host transfer reaches that time
        self.pending: list[tuple[float, int, int, bytes]] = []
        self._pending_order = 0
        #: when each pipe (EP0, each bulk endpoint) is free again: a host's transfers on one pipe run one at a
        #: time, whichever of its threads submits them; different pipes overlap (§12)
        self.pipe_free: dict[str, float] = {}
        self._tlp_faults = sorted(
            (f.at, f.kind) for f in options.faults.faults if f.kind in ("ur", "ca", "crs", "tlp-error", "tlp-timeout")
            and f.at is not None)
        self.counters = dict.fromkeys(
            ("usb_transfers", "control_transfers", "bulk_transfers", "standard_requests", "tlp_reads", "tlp_writes",
             "config_reads", "config_writes", "bytes_in", "bytes_out", "stream_dwords_read", "stream_dwords_written",
             "f2_bytes_in", "f2_bytes_out", "flaky_corrupted"), 0)
        #: the flaky link (option ``flaky=RATE``): a seeded generator, so a seed corrupts the same transfers
        self._flaky_rng = random.Random(options.flaky_seed) if options.flaky > 0 else None
        self.endpoints = BulkEndpoints(
            clock=clock, timing=self.timing, speed=self.speed, max_packet=self.max_packet, memory=self.memory,
            engine=self.engine, counters=self.counters, warnings=self.warnings, busy=self.busy,
            anomaly=self.anomaly, tlp_fault=self.tlp_fault, wait_held=self._wait_held)
        attach = getattr(board, "attach_bus", None)  # the GPU's bus-master reads/writes reach our memory
        if callable(attach):
            attach(self)

    # -- bookkeeping ---------------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """The core's own counters (independent of the driver's), plus the transfer log."""
        return {**self.counters, "modelled_s": self.clock.now(), "transfers": list(self.log)}

    def anomaly(self, message: str) -> None:
        """Something the model does not cover: raise when strict, else remember it."""
        if self.options.strict:
            raise StrictEmulationError(f"asm24 emulator: {message}")
        self.warnings.append(message)

    def tlp_fault(self) -> str | None:
        """The injected TLP fault due for the current transfer (consumed), if any (FaultPlan rules)."""
        n = self.counters["usb_transfers"]
        if self._tlp_faults and self._tlp_faults[0][0] <= n:
            return self._tlp_faults.pop(0)[1]
        return None

    def _begin(self, kind: str, setup: Setup | None, ep: int | None, length: int,
               timeout: float | None) -> Budget:
        """Count a vendor/bulk transfer, apply transfer faults, wait while the firmware is busy."""
        self.counters["usb_transfers"] += 1
        self.counters["control_transfers" if kind == "control" else "bulk_transfers"] += 1
        n = self.counters["usb_transfers"]
        self._record = TransferRecord(n, kind, setup, ep, length, 0, "ok", 0)
        budget = Budget(self.clock, timeout, self.busy)
        self._pipe = "ep0" if kind == "control" else f"ep{ep:02x}"
        if getattr(self.board, "lost", False) and not self.disconnected:  # the gpu lost power: the bridge sees it go
            self.disconnected = True
            self.pending.clear()
        if self.disconnected:
            raise Disconnect("device disconnected")
        busy_until = self.pipe_free.get(self._pipe, 0.0)
        if busy_until > self.clock.now():
            budget.spend(busy_until - self.clock.now())
        self.settle()
        plan = self.options.faults
        if n in plan.at("disconnect"):
            self.disconnected = True
            self.pending.clear()
            lost_power = getattr(self.board, "disconnect", None)  # the GPU loses its state (§10 #10)
            if callable(lost_power):
                lost_power()
            raise Disconnect(f"injected disconnect at transfer {n}")
        if n in plan.at("timeout"):
            budget.hang()
        if n in plan.at("stall"):
            if ep is not None:
                self.endpoints.halted.add(ep)  # a stalled bulk endpoint stays halted until CLEAR_FEATURE
            raise Stall(f"injected stall at transfer {n}")
        if self.busy.until > self.clock.now():
            budget.spend(self.busy.until - self.clock.now())
        return budget

    def _end(self, error: BaseException | None, moved: bytes) -> None:
        """Log the transfer begun by :meth:`_begin` with its outcome."""
        status = next((s for cls, s in _STATUS.items() if isinstance(error, cls)), "ok" if error is None else "error")
        self.pipe_free[self._pipe] = self.clock.now()
        ok = error is None
        self.log.append(self._record._replace(actual=len(moved) if ok else 0, status=status,
                                              crc32=zlib.crc32(moved) if ok else 0))
        activity = getattr(self.board, "bus_activity", None)  # an SDMA parked on a poll of our SRAM looks again
        if callable(activity) and not self.disconnected:
            activity()

    # -- control endpoint ------------------------------------------------------------------------
    def control(self, bmRequestType: int, bRequest: int, wValue: int, wIndex: int,
                data: bytes | int | DataStage, *, timeout: float | None = None) -> bytes | int:
        """One control transfer. ``data``: the OUT payload (bytes, or a :class:`DataStage` read
        on demand), or the wLength of an IN request.

        Returns the IN data (possibly short) or the number of OUT bytes accepted.
        """
        wlen = data if isinstance(data, int) else len(data)
        payload = b"" if isinstance(data, (int, DataStage)) else bytes(data)
        setup = Setup(bmRequestType & 0xFF, bRequest & 0xFF, wValue & 0xFFFF, wIndex & 0xFFFF, wlen)
        if setup.rt & 0x60 != 0x40:
            return self._standard(setup, timeout)
        moved = b""
        error: BaseException | None = None
        try:
            budget = self._begin("control", setup, None, wlen, timeout)
            budget.spend(self.timing.control_rtt_s / 2)  # the firmware acts half way through the round trip
            self.settle()
            self._take_data_stage(setup, budget)
            if isinstance(data, DataStage) and wlen:
                payload = data.fetch()
            result = self._vendor(setup, payload, budget)
            budget.spend(self.timing.control_rtt_s / 2)
            moved = result if isinstance(result, bytes) else payload[:result]
            self.counters["bytes_in" if setup.rt & 0x80 else "bytes_out"] += len(moved)
            return result
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._end(error, moved)

    def _take_data_stage(self, setup: Setup, budget: Budget) -> None:
        """Decide from the setup packet alone whether the firmware takes an OUT data stage (§4.1, §4.8).

        A request the firmware does not handle gets no data stage (the host times out); a known
        request announcing another length than its own is stalled. Both front ends go through
        here before any data is used, whether the data came with the request (pyusb) or is read
        from the host afterwards (FunctionFS).
        """
        if setup.rt & 0x80 or not setup.wlen:
            return
        want = OUT_DATA_STAGE.get((setup.rt, setup.req))
        if want is None:
            budget.hang()
        if setup.wlen != want:
            raise Stall(f"request 0x{setup.req:02x} takes {want} data bytes, not {setup.wlen}")

    def _fallthrough(self, setup: Setup, budget: Budget) -> bytes | int:
        """A request the firmware does not handle: acknowledged without data, else no data stage."""
        if setup.wlen:
            budget.hang()
        return b"" if setup.rt & 0x80 else 0

    def _vendor(self, setup: Setup, payload: bytes, budget: Budget) -> bytes | int:
        handler = VENDOR_REQUESTS.get((setup.rt, setup.req))
        if handler is None:
            return self._fallthrough(setup, budget)
        return handler(self, setup, payload, budget)

    def _standard(self, setup: Setup, timeout: float | None) -> bytes | int:
        """Standard (and class) requests: answered, logged apart, not counted as driver transfers (§4.8)."""
        budget = Budget(self.clock, timeout, self.busy)
        outcome = "ok"
        rt, req, wv, wi, _ = setup
        try:
            if self.disconnected:
                raise Disconnect("device disconnected")
            self.counters["standard_requests"] += 1
            budget.spend(self.timing.control_rtt_s)
            if (rt, req) == (0x80, 6):
                desc = self.identity.descriptor(wv >> 8, wv & 0xFF)
                return self._fallthrough(setup, budget) if desc is None else desc[: setup.wlen]
            if (rt, req) == (0x00, 5):  # SET_ADDRESS
                return 0
            if (rt, req) == (0x00, 9):
                if wv not in (0, 1):
                    raise Stall(f"no configuration {wv}")
                self.configuration, self.alt_setting = wv, 0
                self.endpoints.reset()
                return 0
            if (rt, req) == (0x01, 11):
                if self.configuration == 0 or wi != 0 or wv >= (2 if self.speed == "ss" else 1):
                    raise Stall(f"no interface {wi} alt {wv}")
                self.alt_setting = wv
                self.endpoints.reset()
                return 0
            if (rt, req, wv) == (0x02, 1, 0) and wi & 0xFF in (EP_IN, EP_OUT):
                self.endpoints.halt_cleared(wi & 0xFF)
                return 0
            return self._fallthrough(setup, budget)
        except UsbFault as exc:
            outcome = _STATUS.get(type(exc), "error")
            raise
        finally:
            self.std_log.append((*setup, outcome))

    def clear_halt(self, ep: int, timeout: float | None = None) -> None:
        """CLEAR_FEATURE(ENDPOINT_HALT) as a host stack sends it."""
        self._standard(Setup(0x02, 1, 0, ep & 0xFF, 0), timeout)

    def bus_reset(self) -> None:
        """USB reset: the device returns to the default state (unconfigured); the firmware keeps running."""
        if self.disconnected:
            raise Disconnect("device disconnected")
        self.configuration = 0
        self.alt_setting = 0
        self.endpoints.reset()

    # -- bulk endpoints ---------------------------------------------------------------------------
    def bulk_out(self, ep: int, data: bytes, timeout: float | None = None, *, queued: bool = False) -> int:
        """A bulk OUT transfer; returns the bytes accepted (all of them, or a fault is raised). ``queued``: the
        host queued it while its previous transfer on this pipe was in flight (it pays ``bulk_gap_s`` only)."""
        data = bytes(data)
        return len(self._bulk("bulk_out", ep, data, len(data), timeout, queued))

    def bulk_in(self, ep: int, length: int, timeout: float | None = None) -> bytes:
        """A bulk IN transfer of up to ``length`` bytes (ends early on a short packet)."""
        return self._bulk("bulk_in", ep, b"", length, timeout)

    def _bulk(self, kind: str, ep: int, data: bytes, length: int, timeout: float | None,
              queued: bool = False) -> bytes:
        moved = b""
        error: BaseException | None = None
        try:
            budget = self._begin(kind, None, ep, length, timeout)
            self._check_ep(ep, kind == "bulk_out", budget)
            budget.spend(self.timing.bulk_gap_s if queued else self.timing.bulk_overhead_s)
            if kind == "bulk_out":
                self.endpoints.receive(data, budget)
                moved = data
            else:
                moved = self._flaky(self.endpoints.send(length, budget))
            self.counters["bytes_out" if kind == "bulk_out" else "bytes_in"] += len(moved)
            return moved
        except BaseException as exc:
            error = exc
            raise
        finally:
            self._end(error, moved)

    def _flaky(self, data: bytes) -> bytes:
        """A flaky link (``flaky=RATE``): at that rate a bulk IN transfer reaches the host with one byte changed,
        at a seeded position and to a seeded other value (the data the device sent is not affected)."""
        rng = self._flaky_rng
        if rng is None or not data or rng.random() >= self.options.flaky:
            return data
        out = bytearray(data)
        at = rng.randrange(len(out))
        out[at] ^= rng.randrange(1, 256)
        self.counters["flaky_corrupted"] += 1
        return bytes(out)

    def _check_ep(self, ep: int, out: bool, budget: Budget) -> None:
        valid = {EP_IN, EP_OUT}
        if self.alt_setting == 1 or self.speed == "hs":
            valid |= {EP_UAS_STATUS, EP_UAS_COMMAND}
        if self.configuration == 0 or ep not in valid or bool(ep & 0x80) == out or ep in self.endpoints.halted:
            raise Stall(f"endpoint 0x{ep:02x} is not usable")
        if ep in (EP_UAS_STATUS, EP_UAS_COMMAND):
            budget.hang()  # present in the descriptors, never armed by the custom firmware

    # -- vendor requests --------------------------------------------------------------------------
    @VENDOR_REQUESTS.handles((0xC0, REQ_READ_XDATA))
    def read_xdata(self, setup: Setup, payload: bytes, budget: Budget) -> bytes:
        """0xE4 XDATA read: up to 512 (SS) / 64 (HS) bytes; the high byte of wIndex picks the bank."""
        _, _, wv, wi, wlen = setup
        cap = READ_XDATA_CAP[self.speed]
        if wlen > cap and self.speed == "hs" and self.e4_overlong_hs == "timeout":
            budget.hang()  # a full max-packet reply without a terminating ZLP: the host keeps waiting
        n = min(wlen, cap)
        if wi >> 8:
            self.anomaly(f"e4 from alternate xdata bank 0x{wi >> 8:02x}")
            return bytes(n)
        self.memory.xdata[REG_LTSSM] = self.link.ltssm()
        self.memory.xdata[REG_PERST] = 0 if self.link.powered else 1
        return self.memory.read(wv, n)

    @VENDOR_REQUESTS.handles((0x40, REQ_WRITE_XDATA))
    def write_xdata_byte(self, setup: Setup, payload: bytes, budget: Budget) -> int:
        """0xE5 XDATA write of one byte (wIndex low byte) at wValue; the landing page ignores it."""
        _, _, wv, wi, wlen = setup
        if wi >> 8:
            self.anomaly(f"e5 to alternate xdata bank 0x{wi >> 8:02x}")
            return 0
        if not xdata_write_modelled(wv):
            self.anomaly(f"e5 to unmodelled xdata 0x{wv:04x}")
        if wv not in (REG_LTSSM, REG_PERST):
            self.memory.write(wv, bytes([wi & 0xFF]))
        return 0

    @VENDOR_REQUESTS.handles((0x40, REQ_TLP))
    def send_tlp(self, setup: Setup, payload: bytes, budget: Budget) -> int:
        """0xF0 OUT: cancel any stream, then one TLP (mode 0) or a stream setup (modes 1, 2)."""
        _, _, wv, wi, wlen = setup
        if wlen != 12:
            raise Stall(f"f0 out needs 12 bytes, got {wlen}")
        mode = wi & 0x3
        if mode == 3:
            raise Stall("f0 mode 3 is not defined")
        addr = int.from_bytes(payload[0:4], "little") | int.from_bytes(payload[4:8], "little") << 32
        value = int.from_bytes(payload[8:12], "little")
        fmt_type, byte_enable = wv & 0xFF, wv >> 8
        self.endpoints.cancel_stream()
        self.pending_cpl = None
        if mode == 0:
            self._single(fmt_type, byte_enable, addr, value, budget)
        else:
            self.endpoints.stream_setup(mode, fmt_type, byte_enable, addr, value, budget=budget)
        return 12

    def _single(self, fmt_type: int, byte_enable: int, addr: int, value: int, budget: Budget) -> None:
        kind = decode_fmt_type(fmt_type)
        cfg = kind.space in ("cfg0", "cfg1")
        key = ("config_" if cfg else "tlp_") + ("writes" if kind.has_data else "reads")
        self.counters[key] += 1
        if cfg:
            self.counters["tlp_writes" if kind.has_data else "tlp_reads"] += 1
        fault = None if kind.posted else self.tlp_fault()
        self.pending_cpl = self.engine.single(fmt_type, byte_enable, addr, value, fault)
        budget.spend(self.timing.single_tlp_s)

    @VENDOR_REQUESTS.handles((0xC0, REQ_TLP))
    def read_completion(self, setup: Setup, payload: bytes, budget: Budget) -> bytes:
        """0xF0 IN: the completion record; without a completion the firmware polls out: result 0xFF."""
        _, _, wv, wi, wlen = setup
        if wlen != 8:
            raise Stall(f"f0 in needs 8 bytes, got {wlen}")
        cpl = self.pending_cpl or Completion(result=0xFF)
        if cpl.result == 0xFF:
            budget.spend(self.timing.cpl_poll_budget_s)
        return cpl.record()

    @VENDOR_REQUESTS.handles((0x40, REQ_SRAM_DMA))
    def arm_sram_dma(self, setup: Setup, payload: bytes, budget: Budget) -> int:
        """0xF2 SRAM DMA arm: bit 15 direction, bits 14:0 sectors; wIndex = first slot | slots << 8."""
        _, _, wv, wi, wlen = setup
        to_host, sectors = bool(wv & 0x8000), wv & 0x7FFF
        slot, slots = wi & 0xFF, (wi >> 8) or 1
        length = sectors * 512
        if length > slots * SLOT_SIZE:
            self.warnings.append(f"f2 arm of 0x{length:x} bytes exceeds {slots} slot(s)")
        if to_host:
            if slot:
                self.anomaly(f"f2 sram->host arm with first slot {slot}; reads start at slot 0")
            self.endpoints.arm_sram_read(min(length, SRAM_SIZE))
        elif sectors:
            if slot * SLOT_SIZE + length > SRAM_SIZE:
                self.warnings.append(f"f2 arm at slot {slot} of 0x{length:x} bytes runs past the sram end")
            self.endpoints.arm_sram_write(slot * SLOT_SIZE, length)
        return 0

    @VENDOR_REQUESTS.handles((0x40, REQ_PCIE_POWER))
    def set_pcie_power(self, setup: Setup, payload: bytes, budget: Budget) -> int:
        """0xF3 PCIe power: 1 = rails on, PERST# pulse, train (the status stage waits); 0 = off."""
        _, _, wv, wi, wlen = setup
        if wv & 1:
            self.hierarchy.perst()
            budget.spend(self.link.power_on())
        else:
            if self.link.powered:  # the rails drop: the GPU loses its state (its flash is kept)
                self.pending.clear()  # its bus-master writes still in flight die with it
                lose = getattr(self.board, "power_lost", None)
                if callable(lose):
                    lose()
            self.link.power_off()
        return 0

    # -- the GPU (bus-master) side -------------------------------------------------------------------
    def dma_write(self, addr: int, data: bytes, *, at: float | None = None) -> bool:
        """A posted write from the GPU into bridge memory; a write into 0x822000 releases 0xF2 reads.

        ``at``: the writer's modelled time (the SDMA's clock). A write later than the host's present is held
        and lands when a host transfer reaches that time (:meth:`settle`), so the host never sees a fence or a
        release before the GPU could have written it. Returns whether the range is backed (known at once)."""
        if not (self.link.is_up() and self.hierarchy.upstream_enabled()):
            self.warnings.append(f"bus-master write at 0x{addr:x} dropped: link down or bus master off")
            return False
        if self.hold_bus_writes and at is not None and at > self.clock.now():
            backed = self.memory._region(addr, len(data)) is not None or self.endpoints.hits_release(addr, len(data))
            if backed:
                self._pending_order += 1
                heapq.heappush(self.pending, (at, self._pending_order, addr, bytes(data)))
                return True
        return self._land(addr, data)

    def settle(self, now: float | None = None) -> None:
        """Apply the held bus-master writes whose time has come (in time order)."""
        t = self.clock.now() if now is None else now
        while self.pending and self.pending[0][0] <= t:
            _, _, addr, data = heapq.heappop(self.pending)
            self._land(addr, data)

    def next_pending(self) -> float | None:
        """When the next held bus-master write lands (None: nothing held)."""
        return self.pending[0][0] if self.pending else None

    def _wait_held(self, budget: Budget) -> bool:
        """A host transfer waits (NAKed) for the next held bus-master write; False when none is held. Past the
        host's time limit it times out like any NAK."""
        t = self.next_pending()
        if t is None:
            return False
        if budget.limit is not None and t - budget.start > budget.limit:
            budget.hang()
        self.clock.advance(t - self.clock.now())
        self.settle()
        return True

    def _land(self, addr: int, data: bytes) -> bool:
        landed = self.memory.pcie_write(addr, data)
        released = self.endpoints.dma_release(addr, len(data))
        if not landed and not released:
            self.warnings.append(f"bus-master write at 0x{addr:x} hit no bridge memory")
        return landed or released

    def dma_read(self, addr: int, length: int) -> bytes | None:
        """A read from the GPU of bridge memory; None when blocked or unbacked."""
        if not (self.link.is_up() and self.hierarchy.upstream_enabled()):
            return None
        return self.memory.pcie_read(addr, length)
