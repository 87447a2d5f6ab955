"""SMUIO model of the emulated Navi31: ROM controller registers, ROM_SW engine, GPIO pads, ROM aperture.

Implements specs/navi31-spi-flash.md §a.2/a.3 (registers and fields), §b (the ROM_SW
transaction as the hardware sees it: b.3 byte order, b.4 primed RX and stray transactions),
§f (ROM_INDEX/ROM_DATA) and the emulator items R1-R4, S1-S8 and A1-A4 of §h.

The block answers through two dicts, offset -> handler, built by :meth:`Smuio.handlers`, so
the board's per-access path is one dict lookup and one call. All offsets come from
:mod:`tinyhw.mocks.navi31_regs`.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from tinyhw.errors import StrictEmulationError
from tinyhw.mocks import navi31_regs as R
from tinyhw.mocks.gd25 import GD25LQ16E
from tinyhw.transport.clock import Clock

_WINDOW = struct.Struct("<64I")
_WINDOW_BE = struct.Struct(">64I")

#: Power-on register values (invented: the real ones are not documented). They carry set bits in
#: fields the host must preserve, so tests can check that a driver restores them exactly (R2).
POWER_ON: dict[int, int] = {
    R.ROM_CNTL: 0x02000802,  # READ_MODE=1, DUMMY_CYCLE_NUM=8, prescale field 2 without override
    R.PAGE_MIRROR_CNTL: 0x00020000,
    R.CGTT_ROM_CLK_CTRL0: 0x00000000,
    R.ROM_START: 0x00000000,
    R.SMU_GPIOPAD_SW_INT_STAT: 0x00000000,
    R.SMU_GPIOPAD_MASK: 0x00000FF0,
    R.SMU_GPIOPAD_A: 0x000007A0,
    R.SMU_GPIOPAD_TXIMPSEL: 0x00000000,
    R.SMU_GPIOPAD_EN: 0x00000F80,
}

#: Registers that are plain read/write storage (R2) and go into the write log.
_STORAGE = (R.ROM_CNTL, R.PAGE_MIRROR_CNTL, R.CGTT_ROM_CLK_CTRL0, R.SMU_GPIOPAD_SW_INT_STAT,
            R.SMU_GPIOPAD_MASK, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_TXIMPSEL, R.SMU_GPIOPAD_EN)


@dataclass
class SmuioConfig:
    """Modelling choices of the SMUIO block; the spec marks each of them (inferred)."""

    #: S5 timed DONE: (command + data bytes) x 8 SCK periods, SCK = ref_hz / (prescale + 1), with the
    #: prescale from ROM_CNTL bits 27:24 when the override bit 28 is set, else ``default_prescale``.
    #: The formula and both numbers are invented (§a.3: the real SCK formula is unknown).
    ref_hz: float = 100e6
    default_prescale: int = 3
    #: S5 instant mode: DONE as soon as the transaction starts (``timing=instant``).
    instant: bool = False
    #: S8: True = every ROM_SW_CNTL write fires (stray CNTL=0 transactions); False = a COMMAND
    #: write arms the engine and only the next CNTL write fires.
    stray: bool = True
    #: S4: "primed" = the window shows the previous RX transaction's data; "direct" = its own.
    rx_model: str = "primed"
    #: S4: power-on contents of every window byte.
    rx_power_on: int = 0x00
    #: R4: a transaction reaches the flash only with pads 7-10 released, PAGE_MIRROR ENABLE=1
    #: USAGE=1 and ROM_CNTL READ_MODE_OVERRIDE=1; otherwise RX returns FF. Off by default.
    pad_gating: bool = False
    #: R3/A2: "normal", "mirrored" (20-bit index decode) or "unavailable" (ROM block reads all ones).
    aperture: str = "normal"
    #: S7: the PSP has gated the engine (healthy boot or SOS loaded).
    gated: bool = False
    #: length of the register write log and of the transaction log
    log_size: int = 4096
    power_on: dict[int, int] = field(default_factory=lambda: dict(POWER_ON))


class Smuio:
    """The SMUIO ROM block and GPIO pads, in front of a :class:`GD25LQ16E`."""

    def __init__(self, chip: GD25LQ16E, clock: Clock, config: SmuioConfig | None = None) -> None:
        self.chip = chip
        self.clock = clock
        self.config = config or SmuioConfig()
        self.gated = self.config.gated
        self.aperture = self.config.aperture
        #: (offset, value) of every write to a control register, oldest first (R2)
        self.write_log: deque[tuple[int, int]] = deque(maxlen=self.config.log_size)
        #: (opcode, command bytes, data bytes, rx, reached flash) of every ROM_SW transaction fired
        self.tx_log: deque[tuple[int, int, int, bool, bool]] = deque(maxlen=self.config.log_size)
        self.transactions = 0
        self.regs: dict[int, int] = {}
        self.window: list[int] = [0] * R.ROM_SW_DATA_COUNT
        self.hidden = bytearray(R.ROM_SW_WINDOW_BYTES)
        self.power_on()

    def power_on(self) -> None:
        """Registers, window and engine to their power-on state (containers change in place: the
        handlers built by :meth:`handlers` keep pointing at them)."""
        self.regs.clear()
        self.regs.update(self.config.power_on)
        self.index = 0
        self.sw_cntl = 0
        self.sw_command = 0
        self.sw_status = 0
        self._done_at: float | None = None
        self._armed = False
        fill = self.config.rx_power_on & 0xFF
        self.window[:] = [fill * 0x01010101] * R.ROM_SW_DATA_COUNT
        self.hidden[:] = bytearray([fill]) * R.ROM_SW_WINDOW_BYTES

    # -- dispatch ------------------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """(reads, writes): offset -> handler for every register of the block, for the current mode."""
        reads: dict[int, Callable[[], int]] = {}
        writes: dict[int, Callable[[int], None]] = {}
        for off in (R.SMU_GPIOPAD_SW_INT_STAT, R.SMU_GPIOPAD_MASK, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_TXIMPSEL,
                    R.SMU_GPIOPAD_EN):
            reads[off] = partial(self.regs.__getitem__, off)
            writes[off] = partial(self._store, off, 0xFFFFFFFF)
        reads[R.SMU_GPIOPAD_Y] = self._pad_y
        writes[R.SMU_GPIOPAD_Y] = self._ignore
        if self.aperture == "unavailable":  # R3: every ROM-block register reads all ones
            for off in R.ROM_BLOCK_REGS:
                reads[off] = _all_ones
                writes[off] = self._ignore
            return reads, writes
        for off in (R.ROM_CNTL, R.PAGE_MIRROR_CNTL, R.CGTT_ROM_CLK_CTRL0):
            reads[off] = partial(self.regs.__getitem__, off)
            writes[off] = partial(self._store, off, 0xFFFFFFFF)
        reads[R.ROM_START] = partial(self.regs.__getitem__, R.ROM_START)
        writes[R.ROM_START] = partial(self._store, R.ROM_START, R.ROM_START_MASK)
        reads[R.ROM_STATUS] = _zero  # ROM_BUSY never set: the aperture answers at once
        writes[R.ROM_STATUS] = self._ignore
        reads[R.ROM_INDEX] = self._index_read
        writes[R.ROM_INDEX] = self._index_write
        reads[R.ROM_DATA] = self._data_read_mirrored if self.aperture == "mirrored" else self._data_read
        writes[R.ROM_DATA] = self._ignore
        reads[R.ROM_SW_CNTL] = self._cntl_read
        writes[R.ROM_SW_CNTL] = self._cntl_write
        reads[R.ROM_SW_STATUS] = self._status_read
        writes[R.ROM_SW_STATUS] = self._status_write
        reads[R.ROM_SW_COMMAND] = self._command_read
        writes[R.ROM_SW_COMMAND] = self._command_write
        for k in range(R.ROM_SW_DATA_COUNT):
            off = R.ROM_SW_DATA_1 + 4 * k
            reads[off] = partial(self.window.__getitem__, k)
            writes[off] = partial(self.window.__setitem__, k)
        # R1: the undefined dword between ROM_SW_COMMAND and DATA_1 reads 0, so that one streamed read
        # from ROM_SW_STATUS through the data window (§i.2, merged accesses) is covered in strict mode.
        reads[R.ROM_SW_COMMAND + 4] = _zero
        return reads, writes

    def peek(self, offset: int) -> int:
        """A register's stored value without side effects (for byte-enable merges and tests)."""
        if R.ROM_BLOCK_FIRST <= offset <= R.ROM_BLOCK_LAST and self.aperture == "unavailable":
            return 0xFFFFFFFF
        if offset in self.regs:
            return self.regs[offset]
        if R.ROM_SW_DATA_1 <= offset <= R.ROM_SW_DATA_64:
            return self.window[(offset - R.ROM_SW_DATA_1) >> 2]
        return {R.ROM_INDEX: self.index, R.ROM_SW_CNTL: self.sw_cntl, R.ROM_SW_COMMAND: self.sw_command,
                R.ROM_SW_STATUS: R.ROM_SW_STATUS_GATED if self.gated else self.sw_status}.get(offset, 0)

    # -- plain registers ----------------------------------------------------------------------------------
    def _store(self, off: int, mask: int, value: int) -> None:
        self.regs[off] = value & mask
        self.write_log.append((off, value))

    def _ignore(self, value: int) -> None:
        pass

    def _pad_y(self) -> int:
        # invented: a pad driven by the block (EN set) reads back its A value, the others read 0
        return self.regs[R.SMU_GPIOPAD_A] & self.regs[R.SMU_GPIOPAD_EN]

    # -- ROM aperture (A1-A4) --------------------------------------------------------------------------------
    def _index_read(self) -> int:
        return self.index

    def _index_write(self, value: int) -> None:
        self.index = value & R.ROM_INDEX_MASK
        self.write_log.append((R.ROM_INDEX, value))

    def _data_read(self) -> int:
        a = self.index
        self.index = (a + 4) & R.ROM_INDEX_MASK  # A1: auto-increment, always on
        return self.chip.read_dword(a)

    def _data_read_mirrored(self) -> int:
        a = self.index
        self.index = (a + 4) & R.ROM_INDEX_MASK
        return self.chip.read_dword(a & 0xFFFFF)  # A2: only 20 index bits decode

    # -- ROM_SW engine (S1-S8) ------------------------------------------------------------------------------
    def _cntl_read(self) -> int:
        return self.sw_cntl

    def _command_read(self) -> int:
        return self.sw_command

    def _command_write(self, value: int) -> None:
        self.sw_command = value
        self._armed = True
        self.write_log.append((R.ROM_SW_COMMAND, value))

    def _status_read(self) -> int:
        if self.gated:
            return R.ROM_SW_STATUS_GATED
        if self._done_at is not None and self.clock.now() >= self._done_at:
            self.sw_status |= R.ROM_SW_STATUS_DONE
            self._done_at = None
        return self.sw_status

    def _status_write(self, value: int) -> None:
        self.write_log.append((R.ROM_SW_STATUS, value))
        if self.gated:
            return
        if self._done_at is not None and self.clock.now() >= self._done_at:
            self._done_at = None  # completed before this write: the write decides the bit
        self.sw_status = value

    def _cntl_write(self, value: int) -> None:
        self.sw_cntl = value
        self.write_log.append((R.ROM_SW_CNTL, value))
        if self.gated:
            return
        if not self.config.stray and not self._armed:
            return
        self._armed = False
        self._fire(value)

    def sck_hz(self) -> float:
        """The modelled SPI clock (invented formula, see :class:`SmuioConfig`)."""
        cntl = self.regs[R.ROM_CNTL]
        if cntl & R.ROM_CNTL_SCK_PRESCALE_OVERRIDE:
            prescale = (cntl & R.ROM_CNTL_SCK_PRESCALE_MASK) >> R.ROM_CNTL_SCK_PRESCALE_SHIFT
        else:
            prescale = self.config.default_prescale
        return self.config.ref_hz / (prescale + 1)

    def pads_released(self) -> bool:
        """R4's condition for a transaction to reach the flash."""
        regs = self.regs
        pads = R.GPIOPAD_SPI_PADS
        if (regs[R.SMU_GPIOPAD_MASK] | regs[R.SMU_GPIOPAD_A] | regs[R.SMU_GPIOPAD_EN]) & pads:
            return False
        pm = regs[R.PAGE_MIRROR_CNTL]
        usage = (pm & R.PAGE_MIRROR_USAGE_MASK) >> R.PAGE_MIRROR_USAGE_SHIFT
        return bool(pm & R.PAGE_MIRROR_ENABLE) and usage == 1 and bool(regs[R.ROM_CNTL] & R.ROM_CNTL_READ_MODE_OVERRIDE)

    def _fire(self, cntl: int) -> None:
        data_size = cntl & R.ROM_SW_CNTL_DATA_SIZE_MASK
        cmd_bytes = ((cntl & R.ROM_SW_CNTL_COMMAND_SIZE_MASK) >> R.ROM_SW_CNTL_COMMAND_SIZE_SHIFT) + 1
        if data_size > R.ROM_SW_WINDOW_BYTES:  # S6: undefined on hardware, a host bug here
            raise StrictEmulationError(
                f"rom_sw_cntl 0x{cntl:08x} asks for 0x{data_size:x} data bytes; the window holds 0x100")
        if cmd_bytes > 4:
            raise StrictEmulationError(
                f"rom_sw_cntl 0x{cntl:08x} asks for {cmd_bytes} command bytes; rom_sw_command holds 4")
        rx = bool(cntl & R.ROM_SW_CNTL_RETURN_DATA_ENABLE)
        cmd = self.sw_command
        out = bytes((cmd & 0xFF, (cmd >> 24) & 0xFF, (cmd >> 16) & 0xFF, (cmd >> 8) & 0xFF)[:cmd_bytes])
        if not rx and data_size:
            out += _WINDOW_BE.pack(*self.window)[:data_size]  # S2: TX big-endian within each dword
        reached = not self.config.pad_gating or self.pads_released()
        n_in = data_size if rx else 0
        if reached:
            result = self.chip.transaction(out, n_in)
        else:
            result = b"\xff" * n_in
        if rx:
            self._receive(result)
        self.transactions += 1
        self.tx_log.append((out[0], cmd_bytes, data_size, rx, reached))
        now = self.clock.now()
        if self.config.instant:
            self._done_at = now
        else:
            self._done_at = now + (cmd_bytes + data_size) * 8 / self.sck_hz()

    def _receive(self, data: bytes) -> None:
        """S3/S4: RX bytes land little-endian in the window; primed: one RX transaction late."""
        if self.config.rx_model == "primed":
            self.window[:] = _WINDOW.unpack(self.hidden)
            self.hidden[:len(data)] = data
        else:
            self.hidden[:len(data)] = data
            self.window[:] = _WINDOW.unpack(self.hidden)


def _all_ones() -> int:
    return 0xFFFFFFFF


def _zero() -> int:
    return 0
