"""The bridge's vendor requests: XDATA, TLPs (single and streamed), PCIe power (asm24-usb-bridge.md §4-§6).

:class:`Asm24` owns an opened pyusb device and counts every transfer it submits. It knows
nothing about emulation: the emulated bridge is just another pyusb backend.
"""

from __future__ import annotations

import array
import contextlib
import threading
from typing import Any

from tinyhw.errors import (
    CompletionError,
    DeviceTimeout,
    Disconnected,
    LinkDown,
    OperationFailed,
    Refused,
    TransportError,
)
from tinyhw.transport.abilities import LTSSM_LINK_UP, LTSSM_STATES
from tinyhw.transport.clock import Clock
from tinyhw.transport.counters import Counters
from tinyhw.transport.wait import poll
from tinyhw.usb import tlp
from tinyhw.usb.device import Endpoints, UsbIoError, call, convert_usb_error, usb_errors
from tinyhw.usb.queued import QueuedBulkOut, open_bulk_queue, queue_kind

REQ_XDATA_READ, REQ_XDATA_WRITE, REQ_TLP, REQ_SRAM_DMA, REQ_PCIE_POWER = 0xE4, 0xE5, 0xF0, 0xF2, 0xF3
OUT, IN = 0x40, 0xC0

XDATA_LTSSM = 0xB450
LTSSM_UP = LTSSM_LINK_UP
LTSSM_NAMES = LTSSM_STATES

#: host time-outs per request, seconds (§4.1)
TIMEOUT_XDATA, TIMEOUT_TLP, TIMEOUT_POWER = 1.0, 5.0, 10.0
TIMEOUT_BULK_OUT, TIMEOUT_BULK_IN = 1.0, 30.0
#: TLP retry rule of the production host (§5.6): result byte != 0 -> 1 ms pause, up to 10 retries
TLP_RETRIES, TLP_RETRY_PAUSE = 10, 0.001
#: CRS is retried with a delay (PCIe allows it; §5.6, inferred)
CRS_RETRIES, CRS_PAUSE = 10, 0.01
#: largest streamed write per transfer: ~3.6 MB/s against the 1 s bulk-OUT timeout (§6)
STREAM_WRITE_MAX = 1 << 20
#: largest streamed read per transfer (reads at ~1.8 MB/s fit far more in 30 s; keep transfers modest)
STREAM_READ_MAX = 4 << 20
#: the 0xF2 engine's SRAM (§4.5): 32 slots of 16 KiB, moved in 512-byte sectors
SRAM_SIZE, SRAM_SLOT, SRAM_SECTOR = 512 << 10, 16 << 10, 512
TIMEOUT_SRAM_BULK = 10.0


def _ms(seconds: float) -> int:
    return int(seconds * 1000)


class Asm24:
    """Vendor-request layer over an opened, configured pyusb device."""

    def __init__(self, dev: Any, endpoints: Endpoints, counters: Counters, clock: Clock) -> None:
        self.dev = dev
        self.ep = endpoints
        self.counters = counters
        self.clock = clock
        self._count_lock = threading.Lock()  # transfers may come from a worker thread too (tinyhw.boot.amd.usbcopy)
        self.tap: Any = None  # a recording's tap, told of every vendor request and bulk transfer (TransferTap)
        #: True after :meth:`power_off`: every TLP and stream is refused until :meth:`ensure_link` powers it on
        self.pcie_off = False
        self._in_buffers: dict[int, array.array] = {}  # reused bulk-IN receive buffers by length (sram reads)

    def _count(self, **add: int) -> None:
        with self._count_lock:
            for key, n in add.items():
                setattr(self.counters, key, getattr(self.counters, key) + n)

    # -- raw transfers (every one counted here) ------------------------------------------
    def _call(self, what: str, fn, *args):
        """One transfer; an i/o error is turned into :class:`Disconnected` when the device is gone."""
        try:
            return call(what, fn, *args)
        except UsbIoError as e:
            self._raise_if_gone(what, e)
            raise

    def _raise_if_gone(self, what: str, error: UsbIoError) -> None:
        """Ask the bridge for one byte of XDATA: if that fails too, the device has left (§10 #10)."""
        self._count(usb_transfers=1, round_trips=1)
        try:
            call("presence check", self.dev.ctrl_transfer, IN, REQ_XDATA_READ, XDATA_LTSSM, 0, 1, 200)
        except (UsbIoError, Disconnected):
            raise Disconnected(f"device disconnected during {what}",
                               hint="replug the bridge and run the command again") from error
        except TransportError:
            pass

    def _ctrl(self, req_type: int, req: int, value: int, index: int, data: bytes | int, timeout: float, what: str):
        self._count(usb_transfers=1, round_trips=1)
        result = self._call(what, self.dev.ctrl_transfer, req_type, req, value, index, data, _ms(timeout))
        if req_type & 0x80:
            got = bytes(result)
            self._count(bytes_in=len(got))
            if self.tap is not None:
                self.tap.control(req_type, req, value, index, got)
            return got
        sent = bytes(data) if isinstance(data, (bytes, bytearray)) else b""
        self._count(bytes_out=len(sent))
        if self.tap is not None:
            self.tap.control(req_type, req, value, index, sent)
        return result

    def _bulk_out(self, data: bytes, timeout: float, what: str) -> None:
        self._count(usb_transfers=1, round_trips=1)
        n = self._call(what, self.dev.write, self.ep.bulk_out, data, _ms(timeout))
        self._count(bytes_out=n)
        if self.tap is not None:
            self.tap.bulk(self.ep.bulk_out, n, data)
        if n != len(data):
            raise TransportError(f"short bulk write during {what}: {n} of {len(data)} bytes")

    def bulk_queue_kind(self) -> str:
        """Which queue :meth:`bulk_out_queue` opens on this device ("libusb-async", "emulated" or "worker")."""
        return queue_kind(self.dev)

    def bulk_out_queue(self, depth: int, timeout: float, what: str) -> QueuedBulkOut:
        """Queued bulk OUT transfers on the data endpoint (:mod:`tinyhw.usb.queued`), counted as they are submitted
        (not as round trips: nothing waits for each); errors converted like every other transfer's."""

        def convert(e: Exception) -> Exception:
            err = convert_usb_error(e, what)
            if isinstance(err, UsbIoError):
                try:
                    self._raise_if_gone(what, err)
                except Disconnected as gone:
                    return gone
            return err

        return open_bulk_queue(self.dev, self.ep.bulk_out, depth, clock=self.clock, timeout=timeout, what=what,
                               convert=convert, on_submit=self._queued_submit)

    def _queued_submit(self, n: int) -> None:
        self._count(usb_transfers=1, bytes_out=n)
        if self.tap is not None:  # the queue hands over only the size
            self.tap.bulk(self.ep.bulk_out, n, b"")

    def _bulk_in(self, length: int, timeout: float, what: str) -> bytes:
        self._count(usb_transfers=1, round_trips=1)
        data = bytes(self._call(what, self.dev.read, self.ep.bulk_in, length, _ms(timeout)))
        self._count(bytes_in=len(data))
        if self.tap is not None:
            self.tap.bulk(self.ep.bulk_in, len(data), data)
        if len(data) != length:
            raise TransportError(f"short bulk read during {what}: {len(data)} of {length} bytes")
        return data

    # -- XDATA (§4.2) ------------------------------------------------------------------------
    def xdata_read(self, address: int, length: int) -> bytes:
        """``length`` bytes of the bridge's 16-bit XDATA space from ``address`` (0xE4 control reads, split at the
        firmware's cap); raises Refused outside 0x0000-0xFFFF."""
        if address < 0 or address + length > 0x10000:
            raise Refused(f"xdata range 0x{address:x}+0x{length:x} is outside the 16-bit space")
        out = bytearray()
        step = self.ep.xdata_read_max
        while len(out) < length:
            n = min(step, length - len(out))
            a = address + len(out)
            got = self._ctrl(IN, REQ_XDATA_READ, a, 0, n, TIMEOUT_XDATA, f"xdata read at 0x{a:04x}")
            if len(got) != n:
                raise TransportError(f"short xdata read at 0x{a:04x}: {len(got)} of {n} bytes")
            out += got
        return bytes(out)

    def xdata_write(self, address: int, value: int) -> None:
        """Write one byte ``value`` of XDATA at ``address`` (one 0xE5 control write); raises Refused outside
        0x0000-0xFFFF."""
        if not 0 <= address <= 0xFFFF:
            raise Refused(f"xdata address 0x{address:x} is outside the 16-bit space")
        self._ctrl(OUT, REQ_XDATA_WRITE, address, value & 0xFF, b"", TIMEOUT_XDATA, f"xdata write at 0x{address:04x}")

    # -- PCIe link (§2 step 6, §4.6) -----------------------------------------------------------
    def ltssm(self) -> int:
        """The PCIe link's LTSSM state byte, read from XDATA (``LTSSM_UP`` when the link is up)."""
        return self.xdata_read(XDATA_LTSSM, 1)[0]

    def ensure_link(self, wait: float = 1.0) -> int:
        """Power the PCIe side on if the link is not up (or the host powered it off); raise :class:`LinkDown` naming
        the LTSSM state when it does not train within ``wait`` seconds."""
        state = self.ltssm()
        if state == LTSSM_UP and not self.pcie_off:
            return state
        self._ctrl(OUT, REQ_PCIE_POWER, 1, 0, b"", TIMEOUT_POWER, "pcie power on")
        self.pcie_off = False
        # The request may return before the link trains (tinygrad PR #17380): poll briefly.
        try:
            return poll(self.clock, self.ltssm, lambda s: s == LTSSM_UP, timeout=wait, interval=0.05, what="pcie link")
        except DeviceTimeout:
            state = self.ltssm()
            name = LTSSM_NAMES.get(state, "training")
            raise LinkDown(
                f"pcie link not up behind the usb bridge (ltssm 0x{state:02x}: {name})",
                hint="check that the gpu is seated and its power connectors are plugged, then replug the bridge",
            ) from None

    def power_off(self, wait: float = 2.0) -> int:
        """0xF3 with wValue 0 (§4.6: PERST# asserted, training stopped, rails dropped); from then on every TLP is
        refused. Polls the LTSSM for up to ``wait`` seconds until it leaves L0 and returns it; raises
        :class:`OperationFailed` when the bridge still reports a trained link."""
        self._ctrl(OUT, REQ_PCIE_POWER, 0, 0, b"", TIMEOUT_POWER, "pcie power off")
        self.pcie_off = True
        try:
            return poll(self.clock, self.ltssm, lambda s: s != LTSSM_UP, timeout=wait, interval=0.05,
                        what="pcie power off")
        except DeviceTimeout:
            raise OperationFailed(
                f"the bridge still reports a trained pcie link (ltssm 0x{LTSSM_UP:02x}) {wait:g} s after power off",
                hint="the bridge firmware may not support 0xF3 power off; replug the bridge to cut the gpu's power",
            ) from None

    def _check_powered(self, what: str) -> None:
        if self.pcie_off:
            raise LinkDown(f"the bridge's pcie side is powered off: {what} refused",
                           hint="power it on: tinyhw --device DEV link power on")

    # -- single TLPs (§4.3, §5) ----------------------------------------------------------------
    def tlp(self, fmt_type: int, address: int, value: int = 0, be: int = 0xF, *, what: str) -> int | None:
        """Issue one TLP; for non-posted requests collect the completion, with the spec's retry rules."""
        self._check_powered(what)
        w_value, w_index, data = tlp.setup_packet(fmt_type, be, tlp.MODE_SINGLE, address, value)
        is_read = fmt_type in (tlp.MRD32, tlp.MRD64, tlp.CFG0_RD, tlp.CFG1_RD)
        if is_read:
            self.counters.tlp_reads += 1
        else:
            self.counters.tlp_writes += 1
        crs_left = CRS_RETRIES
        attempt = 0
        while True:
            self._ctrl(OUT, REQ_TLP, w_value, w_index, data, TIMEOUT_TLP, what)
            if not tlp.has_completion(fmt_type):
                return None
            cpl = tlp.parse_completion(self._ctrl(IN, REQ_TLP, 0, 0, 8, TIMEOUT_TLP, what))
            if cpl.result != tlp.RESULT_OK:
                attempt += 1
                if attempt > TLP_RETRIES:
                    kind = "engine error" if cpl.result == tlp.RESULT_ENGINE_ERROR else "no completion"
                    raise TransportError(
                        f"tlp error after {TLP_RETRIES} retries during {what} ({kind}, result 0x{cpl.result:02x})",
                        hint="the pcie link may be down; replug the bridge",
                    )
                self.clock.sleep(TLP_RETRY_PAUSE)
                continue
            if cpl.status == tlp.CPL_CRS and crs_left > 0:
                crs_left -= 1
                self.clock.sleep(CRS_PAUSE)
                continue
            if cpl.status != tlp.CPL_SC:
                raise CompletionError(
                    f"{cpl.status_name} during {what}", status=cpl.status, address=address,
                    hint="the address is not claimed by any device" if cpl.status == tlp.CPL_UR else None,
                )
            return cpl.data

    # -- config space ------------------------------------------------------------------------
    def config_read(self, bus: int, dev: int, fn: int, reg: int, size: int = 4) -> int:
        """Read ``size`` (1, 2, 4) bytes of config space at ``reg`` of ``bus:dev.fn`` with one type-0 (bus 0) or type-1
        TLP; raises CompletionError for a non-successful completion."""
        addr, be = tlp.byte_enables(reg, size)
        word = tlp.config_address(bus, dev, fn, addr)
        fmt = tlp.CFG0_RD if bus == 0 else tlp.CFG1_RD
        data = self.tlp(fmt, word, 0, be, what=f"config read {bus:02x}:{dev:02x}.{fn} 0x{reg:03x}")
        return tlp.extract_lanes(data or 0, reg, size)

    def config_write(self, bus: int, dev: int, fn: int, reg: int, size: int, value: int) -> None:
        """Write ``size`` (1, 2, 4) bytes of ``value`` at ``reg`` of ``bus:dev.fn``'s config space with one type-0 (bus
        0) or type-1 TLP."""
        addr, be = tlp.byte_enables(reg, size)
        word = tlp.config_address(bus, dev, fn, addr)
        fmt = tlp.CFG0_WR if bus == 0 else tlp.CFG1_WR
        self.tlp(fmt, word, tlp.lane_value(value, reg, size), be,
                 what=f"config write {bus:02x}:{dev:02x}.{fn} 0x{reg:03x}")

    # -- memory --------------------------------------------------------------------------------
    def mem_read32(self, address: int) -> int:
        """One 64-bit-address memory read TLP of the dword at PCIe ``address``; raises CompletionError for a
        non-successful completion."""
        self.counters.reg_reads += 1
        return self.tlp(tlp.MRD64, address, 0, 0xF, what=f"memory read at 0x{address:x}") or 0

    def mem_write32(self, address: int, value: int) -> None:
        """One posted memory write TLP of the 32-bit ``value`` at PCIe ``address``."""
        self.counters.reg_writes += 1
        self.tlp(tlp.MWR64, address, value, 0xF, what=f"memory write at 0x{address:x}")

    def stream_read(self, address: int, length: int) -> bytes:
        """Streamed read (0xF0 mode 2, §6): dword aligned; completion status is not checked by the firmware."""
        if address % 4 or length % 4:
            raise Refused(f"streamed read at 0x{address:x} of {length} bytes is not dword aligned")
        self._check_powered(f"streamed read at 0x{address:x}")
        out = bytearray()
        while len(out) < length:
            n = min(STREAM_READ_MAX, length - len(out))
            a = address + len(out)
            w_value, w_index, data = tlp.setup_packet(tlp.MRD64, 0xF, tlp.MODE_STREAM_READ, a, n // 4)
            self.counters.tlp_reads += 1
            self.counters.reg_reads += n // 4
            self._ctrl(OUT, REQ_TLP, w_value, w_index, data, TIMEOUT_TLP, f"stream read setup at 0x{a:x}")
            try:
                out += self._bulk_in(n, TIMEOUT_BULK_IN, f"stream read at 0x{a:x}")
            except TransportError:
                self.recover_endpoints()
                raise
        return bytes(out)

    def stream_write(self, address: int, data: bytes) -> None:
        """Streamed write (0xF0 mode 1, §6), split so each bulk OUT fits the 1 s time-out."""
        if address % 4 or len(data) % 4:
            raise Refused(f"streamed write at 0x{address:x} of {len(data)} bytes is not dword aligned")
        self._check_powered(f"streamed write at 0x{address:x}")
        for start in range(0, len(data), STREAM_WRITE_MAX):
            piece = data[start:start + STREAM_WRITE_MAX]
            a = address + start
            w_value, w_index, setup = tlp.setup_packet(tlp.MWR64, 0xF, tlp.MODE_STREAM_WRITE, a, len(piece) // 4)
            self.counters.tlp_writes += 1
            self.counters.reg_writes += len(piece) // 4
            self._ctrl(OUT, REQ_TLP, w_value, w_index, setup, TIMEOUT_TLP, f"stream write setup at 0x{a:x}")
            try:
                self._bulk_out(bytes(piece), TIMEOUT_BULK_OUT, f"stream write at 0x{a:x}")
            except TransportError:
                self.recover_endpoints()
                raise

    # -- 0xF2 SRAM DMA engine (§4.5) -------------------------------------------------------------
    def sram_write(self, slot: int, data: bytes | bytearray | memoryview) -> None:
        """Host -> SRAM: arm with (sectors, first slot | slots << 8), then one bulk OUT padded to 512 bytes."""
        if not data:
            return
        padded = bytes(data) + bytes(-len(data) % SRAM_SECTOR)
        if not 0 <= slot < SRAM_SIZE // SRAM_SLOT or slot * SRAM_SLOT + len(padded) > SRAM_SIZE:
            raise Refused(f"sram write of {len(data)} bytes at slot {slot} does not fit the 512 kib sram")
        self.sram_write_arm(slot, len(padded))
        self._bulk_out(padded, TIMEOUT_SRAM_BULK, f"sram write at slot {slot}")

    def sram_write_arm(self, slot: int, length: int) -> None:
        """Arm host -> SRAM (§4.5): the next ``length`` bytes (a multiple of 512) of bulk OUT land from ``slot`` on;
        value = sectors, index = first slot | slots << 8."""
        if length <= 0 or length % SRAM_SECTOR or not 0 <= slot < SRAM_SIZE // SRAM_SLOT \
                or slot * SRAM_SLOT + length > SRAM_SIZE:
            raise Refused(f"sram write arm of {length} bytes at slot {slot}: the length must be a positive multiple "
                          "of 512 that fits the 512 kib sram from that slot (32 slots of 16 kib)")
        slots = -(-length // SRAM_SLOT)
        self._ctrl(OUT, REQ_SRAM_DMA, length // SRAM_SECTOR, slot | (slots << 8), b"", TIMEOUT_XDATA,
                   f"sram write arm at slot {slot}")

    def sram_read_arm(self, length: int) -> None:
        """Arm an SRAM -> host transfer from slot 0; the data is released by a GPU write into 0x822000 (§4.5)."""
        if not 0 < length <= SRAM_SIZE:
            raise Refused(f"sram read of {length} bytes is outside 1..0x{SRAM_SIZE:x}")
        sectors = -(-length // SRAM_SECTOR)
        slots = -(-length // SRAM_SLOT)
        self._ctrl(OUT, REQ_SRAM_DMA, 0x8000 | sectors, slots << 8, b"", TIMEOUT_XDATA, "sram read arm")

    def sram_read_collect(self, length: int, into: Any = None) -> bytes | int:
        """The bulk IN of an armed SRAM read (rounded up to 512 bytes, truncated to ``length``). With ``into`` (a
        writable buffer of at least ``length`` bytes) the bytes land there and the count is returned: pyusb reads
        into ``into`` itself when it is an ``array.array`` of bytes of the wire length (pyusb fills only an
        ``array.array``), else into a receive buffer kept per wire length (no allocation per read) and one copy
        moves them into ``into``."""
        wire = -(-length // SRAM_SECTOR) * SRAM_SECTOR
        if into is None:
            data = self._bulk_in(wire, TIMEOUT_SRAM_BULK, "sram read")
            return data[:length]
        direct = isinstance(into, array.array) and into.itemsize == 1 and len(into) == wire
        buf = into if direct else self._in_buffers.get(wire)
        if buf is None:
            if len(self._in_buffers) >= 4:  # a copy-out uses two lengths at most (full pieces, the last one)
                self._in_buffers.clear()
            buf = self._in_buffers[wire] = array.array("B", bytes(wire))
        self._count(usb_transfers=1, round_trips=1)
        got = self._call("sram read", self.dev.read, self.ep.bulk_in, buf, _ms(TIMEOUT_SRAM_BULK))
        self._count(bytes_in=got)
        view = memoryview(buf)
        if self.tap is not None:
            self.tap.bulk(self.ep.bulk_in, got, bytes(view[:got]))
        if got != wire:
            raise TransportError(f"short bulk read during sram read: {got} of {wire} bytes")
        if not direct:
            memoryview(into).cast("B")[:length] = view[:length]
        return length

    def recover_endpoints(self) -> None:
        """Best-effort recovery after an abandoned stream (§6, §10 #9): clear halts, drain stale IN data."""
        import usb.core

        with contextlib.suppress(TransportError), usb_errors("endpoint recovery"):
            self.dev.clear_halt(self.ep.bulk_out)
            self.dev.clear_halt(self.ep.bulk_in)
            with contextlib.suppress(usb.core.USBTimeoutError):
                self.dev.read(self.ep.bulk_in, 64 * 1024, 100)
            self.dev.clear_halt(self.ep.bulk_in)
