"""SMUIO model of the emulated Navi31: ROM controller registers, ROM_SW engine, GPIO pads, ROM aperture.

Implements specs/navi31-spi-flash.md §a.2/a.3 (registers and fields), §b (the ROM_SW
transaction as the hardware sees it: b.3 byte order, b.4 primed RX and stray transactions),
§f (ROM_INDEX/ROM_DATA) and the emulator behaviour of §h.1 (register file), §h.2 (ROM_SW engine) and
§h.4 (ROM aperture).

The block answers through two dicts, offset -> handler, built by :meth:`Smuio.handlers`, so
the board's per-access path is one dict lookup and one call. All offsets come from the
:class:`~tinyhw.mocks.amd.flashregs.FlashRegisters` the board builds from its register database.
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

from tinyhw.errors import StrictEmulationError
from tinyhw.mocks.amd.flashregs import FlashRegisters
from tinyhw.mocks.amd.gd25 import GD25LQ16E
from tinyhw.transport.clock import Clock

_WINDOW = struct.Struct("<64I")
_WINDOW_BE = struct.Struct(">64I")

#: Power-on register values by register name (invented: the real ones are not documented). They carry set bits
#: in fields the host must preserve, so tests can check that a driver restores them exactly (§h.1).
POWER_ON: dict[str, int] = {
    "ROM_CNTL": 0x02000802,  # READ_MODE=1, DUMMY_CYCLE_NUM=8, prescale field 2 without override
    "PAGE_MIRROR_CNTL": 0x00020000,
    "CGTT_ROM_CLK_CTRL0": 0x00000000,
    "ROM_START": 0x00000000,
    "SMU_GPIOPAD_SW_INT_STAT": 0x00000000,
    "SMU_GPIOPAD_MASK": 0x00000FF0,
    "SMU_GPIOPAD_A": 0x000007A0,
    "SMU_GPIOPAD_TXIMPSEL": 0x00000000,
    "SMU_GPIOPAD_EN": 0x00000F80,
}


def power_on_values(layout: FlashRegisters, by_name: dict[str, int] | None = None) -> dict[int, int]:
    """BAR5 offset -> power-on value of the plain SMUIO registers (``by_name`` defaults to :data:`POWER_ON`)."""
    return {getattr(layout, name): value for name, value in (POWER_ON if by_name is None else by_name).items()}


@dataclass
class SmuioConfig:
    """Modelling choices of the SMUIO block; the spec marks each of them (inferred)."""

    #: Timed DONE (§h.2): (command + data bytes) x 8 SCK periods, SCK = ref_hz / (prescale + 1), with the
    #: prescale from ROM_CNTL bits 27:24 when the override bit 28 is set, else ``default_prescale``.
    #: The formula and both numbers are invented (§a.3: the real SCK formula is unknown).
    ref_hz: float = 100e6
    default_prescale: int = 3
    #: Instant mode (§h.2): DONE as soon as the transaction starts (``timing=instant``).
    instant: bool = False
    #: Stray transactions (§b.4, §h.2): True = every ROM_SW_CNTL write fires (stray CNTL=0 transactions);
    #: False = a COMMAND write arms the engine and only the next CNTL write fires.
    stray: bool = True
    #: Primed RX (§h.2): "primed" = the window shows the previous RX transaction's data; "direct" = its own.
    rx_model: str = "primed"
    #: Power-on contents (§h.2) of every window byte.
    rx_power_on: int = 0x00
    #: Pad gating (§h.1, inferred): a transaction reaches the flash only with pads 7-10 released, PAGE_MIRROR ENABLE=1
    #: USAGE=1 and ROM_CNTL READ_MODE_OVERRIDE=1; otherwise RX returns FF. Off by default.
    pad_gating: bool = False
    #: ROM aperture (§h.1, §h.4): "normal", "mirrored" (20-bit index decode) or "unavailable" (the ROM block reads
    #: all ones).
    aperture: str = "normal"
    #: Gated mode (§h.2): the PSP has gated the engine (healthy boot or SOS loaded).
    gated: bool = False
    #: length of the register write log and of the transaction log
    log_size: int = 4096
    #: power-on values by register name (see :data:`POWER_ON`)
    power_on: dict[str, int] = field(default_factory=lambda: dict(POWER_ON))


class Smuio:
    """The SMUIO ROM block and GPIO pads, in front of a :class:`GD25LQ16E`."""

    def __init__(self, layout: FlashRegisters, chip: GD25LQ16E, clock: Clock,
                 config: SmuioConfig | None = None) -> None:
        self.layout = layout
        self._index_mask = layout.ROM_INDEX_MASK
        self.chip = chip
        self.clock = clock
        self.config = config or SmuioConfig()
        self.gated = self.config.gated
        self.aperture = self.config.aperture
        #: (offset, value) of every write to a control register, oldest first (§h.1)
        self.write_log: deque[tuple[int, int]] = deque(maxlen=self.config.log_size)
        #: (opcode, command bytes, data bytes, rx, reached flash) of every ROM_SW transaction fired
        self.tx_log: deque[tuple[int, int, int, bool, bool]] = deque(maxlen=self.config.log_size)
        self.transactions = 0
        self.regs: dict[int, int] = {}
        self.window: list[int] = [0] * self.layout.ROM_SW_DATA_COUNT
        self.hidden = bytearray(self.layout.ROM_SW_WINDOW_BYTES)
        self.power_on()

    def power_on(self) -> None:
        """Registers, window and engine to their power-on state (containers change in place: the
        handlers built by :meth:`handlers` keep pointing at them)."""
        self.regs.clear()
        self.regs.update(power_on_values(self.layout, self.config.power_on))
        self.index = 0
        self.sw_cntl = 0
        self.sw_command = 0
        self.sw_status = 0
        self._done_at: float | None = None
        self._armed = False
        fill = self.config.rx_power_on & 0xFF
        self.window[:] = [fill * 0x01010101] * self.layout.ROM_SW_DATA_COUNT
        self.hidden[:] = bytearray([fill]) * self.layout.ROM_SW_WINDOW_BYTES

    # -- dispatch ------------------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """(reads, writes): offset -> handler for every register of the block, for the current mode."""
        lay = self.layout
        reads: dict[int, Callable[[], int]] = {}
        writes: dict[int, Callable[[int], None]] = {}
        for off in (lay.SMU_GPIOPAD_SW_INT_STAT, lay.SMU_GPIOPAD_MASK, lay.SMU_GPIOPAD_A, lay.SMU_GPIOPAD_TXIMPSEL,
                    lay.SMU_GPIOPAD_EN):
            reads[off] = partial(self.regs.__getitem__, off)
            writes[off] = partial(self._store, off, 0xFFFFFFFF)
        reads[lay.SMU_GPIOPAD_Y] = self._pad_y
        writes[lay.SMU_GPIOPAD_Y] = self._ignore
        if self.aperture == "unavailable":  # every ROM-block register reads all ones (§h.1)
            for off in lay.ROM_BLOCK_REGS:
                reads[off] = _all_ones
                writes[off] = self._ignore
            return reads, writes
        for off in (lay.ROM_CNTL, lay.PAGE_MIRROR_CNTL, lay.CGTT_ROM_CLK_CTRL0):
            reads[off] = partial(self.regs.__getitem__, off)
            writes[off] = partial(self._store, off, 0xFFFFFFFF)
        reads[lay.ROM_START] = partial(self.regs.__getitem__, lay.ROM_START)
        writes[lay.ROM_START] = partial(self._store, lay.ROM_START, lay.ROM_START_MASK)
        reads[lay.ROM_STATUS] = _zero  # ROM_BUSY never set: the aperture answers at once
        writes[lay.ROM_STATUS] = self._ignore
        reads[lay.ROM_INDEX] = self._index_read
        writes[lay.ROM_INDEX] = self._index_write
        reads[lay.ROM_DATA] = self._data_read_mirrored if self.aperture == "mirrored" else self._data_read
        writes[lay.ROM_DATA] = self._ignore
        reads[lay.ROM_SW_CNTL] = self._cntl_read
        writes[lay.ROM_SW_CNTL] = self._cntl_write
        reads[lay.ROM_SW_STATUS] = self._status_read
        writes[lay.ROM_SW_STATUS] = self._status_write
        reads[lay.ROM_SW_COMMAND] = self._command_read
        writes[lay.ROM_SW_COMMAND] = self._command_write
        for k in range(lay.ROM_SW_DATA_COUNT):
            off = lay.ROM_SW_DATA_1 + 4 * k
            reads[off] = partial(self.window.__getitem__, k)
            writes[off] = partial(self.window.__setitem__, k)
        # (§h.1) the undefined dword between ROM_SW_COMMAND and DATA_1 reads 0, so that one streamed read
        # from ROM_SW_STATUS through the data window (§i.2, merged accesses) is covered in strict mode.
        reads[lay.ROM_SW_COMMAND + 4] = _zero
        return reads, writes

    def peek(self, offset: int) -> int:
        """A register's stored value without side effects (for byte-enable merges and tests)."""
        lay = self.layout
        if lay.ROM_BLOCK_FIRST <= offset <= lay.ROM_BLOCK_LAST and self.aperture == "unavailable":
            return 0xFFFFFFFF
        if offset in self.regs:
            return self.regs[offset]
        if lay.ROM_SW_DATA_1 <= offset <= lay.ROM_SW_DATA_64:
            return self.window[(offset - lay.ROM_SW_DATA_1) >> 2]
        return {lay.ROM_INDEX: self.index, lay.ROM_SW_CNTL: self.sw_cntl, lay.ROM_SW_COMMAND: self.sw_command,
                lay.ROM_SW_STATUS: lay.ROM_SW_STATUS_GATED if self.gated else self.sw_status}.get(offset, 0)

    # -- plain registers ----------------------------------------------------------------------------------
    def _store(self, off: int, mask: int, value: int) -> None:
        self.regs[off] = value & mask
        self.write_log.append((off, value))

    def _ignore(self, value: int) -> None:
        pass

    def _pad_y(self) -> int:
        # invented: a pad driven by the block (EN set) reads back its A value, the others read 0
        return self.regs[self.layout.SMU_GPIOPAD_A] & self.regs[self.layout.SMU_GPIOPAD_EN]

    # -- ROM aperture (§h.4) -----------------------------------------------------------------------------------
    def _index_read(self) -> int:
        return self.index

    def _index_write(self, value: int) -> None:
        self.index = value & self.layout.ROM_INDEX_MASK
        self.write_log.append((self.layout.ROM_INDEX, value))

    def _data_read(self) -> int:
        a = self.index
        self.index = (a + 4) & self._index_mask  # auto-increment, always on (§h.4)
        return self.chip.read_dword(a)

    def _data_read_mirrored(self) -> int:
        a = self.index
        self.index = (a + 4) & self._index_mask
        return self.chip.read_dword(a & 0xFFFFF)  # mirrored: only 20 index bits decode (§h.4)

    # -- ROM_SW engine (§h.2) ---------------------------------------------------------------------------------
    def _cntl_read(self) -> int:
        return self.sw_cntl

    def _command_read(self) -> int:
        return self.sw_command

    def _command_write(self, value: int) -> None:
        self.sw_command = value
        self._armed = True
        self.write_log.append((self.layout.ROM_SW_COMMAND, value))

    def _status_read(self) -> int:
        if self.gated:
            return self.layout.ROM_SW_STATUS_GATED
        if self._done_at is not None and self.clock.now() >= self._done_at:
            self.sw_status |= self.layout.ROM_SW_STATUS_DONE
            self._done_at = None
        return self.sw_status

    def _status_write(self, value: int) -> None:
        self.write_log.append((self.layout.ROM_SW_STATUS, value))
        if self.gated:
            return
        if self._done_at is not None and self.clock.now() >= self._done_at:
            self._done_at = None  # completed before this write: the write decides the bit
        self.sw_status = value

    def _cntl_write(self, value: int) -> None:
        self.sw_cntl = value
        self.write_log.append((self.layout.ROM_SW_CNTL, value))
        if self.gated:
            return
        if not self.config.stray and not self._armed:
            return
        self._armed = False
        self._fire(value)

    def sck_hz(self) -> float:
        """The modelled SPI clock (invented formula, see :class:`SmuioConfig`)."""
        lay = self.layout
        cntl = self.regs[lay.ROM_CNTL]
        if cntl & lay.ROM_CNTL_SCK_PRESCALE_OVERRIDE:
            prescale = (cntl & lay.ROM_CNTL_SCK_PRESCALE_MASK) >> lay.ROM_CNTL_SCK_PRESCALE_SHIFT
        else:
            prescale = self.config.default_prescale
        return self.config.ref_hz / (prescale + 1)

    def pads_released(self) -> bool:
        """The pad-gating condition (§h.1) for a transaction to reach the flash: pads 7-10 released in MASK/A/EN,
        PAGE_MIRROR ENABLE=1 and USAGE=1, ROM_CNTL READ_MODE_OVERRIDE=1."""
        lay = self.layout
        regs = self.regs
        pads = lay.GPIOPAD_SPI_PADS
        if (regs[lay.SMU_GPIOPAD_MASK] | regs[lay.SMU_GPIOPAD_A] | regs[lay.SMU_GPIOPAD_EN]) & pads:
            return False
        pm = regs[lay.PAGE_MIRROR_CNTL]
        usage = (pm & lay.PAGE_MIRROR_USAGE_MASK) >> lay.PAGE_MIRROR_USAGE_SHIFT
        read_override = bool(regs[lay.ROM_CNTL] & lay.ROM_CNTL_READ_MODE_OVERRIDE)
        return bool(pm & lay.PAGE_MIRROR_ENABLE) and usage == 1 and read_override

    def _fire(self, cntl: int) -> None:
        lay = self.layout
        data_size = cntl & lay.ROM_SW_CNTL_DATA_SIZE_MASK
        cmd_bytes = ((cntl & lay.ROM_SW_CNTL_COMMAND_SIZE_MASK) >> lay.ROM_SW_CNTL_COMMAND_SIZE_SHIFT) + 1
        if data_size > lay.ROM_SW_WINDOW_BYTES:  # undefined on hardware (§h.2): a host bug here
            raise StrictEmulationError(
                f"rom_sw_cntl 0x{cntl:08x} asks for 0x{data_size:x} data bytes; the window holds 0x100")
        if cmd_bytes > 4:
            raise StrictEmulationError(
                f"rom_sw_cntl 0x{cntl:08x} asks for {cmd_bytes} command bytes; rom_sw_command holds 4")
        rx = bool(cntl & lay.ROM_SW_CNTL_RETURN_DATA_ENABLE)
        cmd = self.sw_command
        out = bytes((cmd & 0xFF, (cmd >> 24) & 0xFF, (cmd >> 16) & 0xFF, (cmd >> 8) & 0xFF)[:cmd_bytes])
        if not rx and data_size:
            out += _WINDOW_BE.pack(*self.window)[:data_size]  # TX big-endian within each dword (§h.2)
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
        """RX bytes land little-endian in the window; primed: one RX transaction late."""
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
