"""PSP (MP0) flash mailbox of the emulated Navi31: early-boot item streaming, probes, live update.

Implements specs/navi31-spi-flash.md §e (e.1 handshake, e.2 command ids, e.3 status codes,
e.4 probe, e.5/e.6 item streaming) and the emulator behaviour of §h.5, in the board states of
§1: ``pbl`` (stalled boot loader: probes answered, no streaming), ``early`` (healthy autonomous
boot: scripted GET_TRANSFER_TYPE sequence and item streaming), ``sos``/``gated`` (SOS loaded:
early commands rejected with 0x0A, the Linux live commands 2/3/4 accepted).

Which error code the firmware returns for each protocol violation is unknown; the choices
below are inferred and documented next to each case.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from tinyhw.mocks.amd.flashregs import FlashRegisters
from tinyhw.mocks.amd.pspupdate import FlashUpdate
from tinyhw.transport.clock import Clock

# §e.2 command ids
GET_BOOT_PARTITION = 0x01
UPDATE_ROM_IMAGE_ADDR_LO = 0x02
UPDATE_ROM_IMAGE_ADDR_HI = 0x03
UPDATE_FLASH_IMAGE = 0x04
GET_FB_STATE = 0x06
GET_TRANSFER_TYPE = 0x07
START_TRANSFER = 0x08
DATA_TRANSFER = 0x09
END_TRANSFER = 0x0A
SPI_GET_MODEL_ID = 0x0B
EARLY_COMMANDS = (GET_BOOT_PARTITION, GET_FB_STATE, GET_TRANSFER_TYPE, START_TRANSFER, DATA_TRANSFER,
                  END_TRANSFER, SPI_GET_MODEL_ID)
PROBE_COMMANDS = (GET_BOOT_PARTITION, GET_FB_STATE, SPI_GET_MODEL_ID)
LIVE_COMMANDS = (UPDATE_ROM_IMAGE_ADDR_LO, UPDATE_ROM_IMAGE_ADDR_HI, UPDATE_FLASH_IMAGE)

# §e.3 status codes used by the model
OK = 0x00
OUT_OF_BOUNDS = 0x02
INVALID_PARAMETER = 0x03
PARTITION_UPDATE_ERROR = 0x0A  # also the "early commands gated" answer (seed)
WRITE_TO_SPI_ERROR = 0x0C
INVALID_COMMAND = 0x0E
SM_NOT_INITIALISED = 0x10
SM_TRANSFER_ERROR = 0x11

#: Invented default GET_TRANSFER_TYPE script (the real 19-item order is an open question, §e.6):
#: the IFWI header, the $SGN pointer, table and signatures, both $PSP directories, items 4/5, both ISH,
#: the first ISH payload, then item 0x89 with phase 2. Phase 1 (bits 8 and up) marks "more to come".
DEFAULT_SCRIPT: tuple[int, ...] = (
    *(0x100 | item for item in (0x01, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88,
                                0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08)),
    0x200 | 0x89,
)
#: Invented value GET_TRANSFER_TYPE returns after the last scripted item: phase 3, item 0.
SCRIPT_DONE = 0x300
#: The item orders the emulated PSP can request (board option ``psp-order``; the real order is an open question,
#: §e.6): ``default`` (above: the IFWI header, the signatures, the directories, the rest, the payload, item 0x89),
#: ``layout`` (by offset in the image) and ``payload-last`` (the payload is the phase-2 item). All invented.
ORDERS: dict[str, tuple[int, ...]] = {
    "default": DEFAULT_SCRIPT,
    "layout": (*(0x100 | item for item in (0x01, 0x80, 0x02, 0x03, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
                                           0x88, 0x04, 0x05, 0x06, 0x07, 0x08)), 0x200 | 0x89),
    "payload-last": (*(0x100 | item for item in (0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x80, 0x81, 0x82, 0x83,
                                                 0x84, 0x85, 0x86, 0x87, 0x88, 0x89)), 0x200 | 0x08),
}


@dataclass
class PspConfig:
    """Modelling choices of the mailbox (§h.5); every value here is inferred or invented."""

    #: Time from the doorbell to the completed COMMAND (default 100 us).
    delay: float = 100e-6
    #: the same for UPDATE_FLASH_IMAGE (invented; Linux allows it 60 s)
    live_delay: float = 0.2
    #: Mailbox mode: "normal", "not-ready" (COMMAND bit 31 stays 0) or "hang" (commands never complete)
    mailbox: str = "normal"
    #: The early-boot script: GET_TRANSFER_TYPE values (item in bits 7:0, phase in bits 8 and up; last has phase 2)
    script: tuple[int, ...] = DEFAULT_SCRIPT
    #: (status, response) of the probe commands 0x01, 0x06, 0x0B (invented values)
    probe: dict[int, tuple[int, int]] = field(default_factory=lambda: {
        GET_BOOT_PARTITION: (OK, 0x00000000),
        GET_FB_STATE: (OK, 0x00000000),
        SPI_GET_MODEL_ID: (OK, 0x001560C8),
    })
    #: Fault: UPDATE_FLASH_IMAGE fails with 0x0C, as the seed observed on stock hardware
    live_fail: bool = False
    #: faults ``psp-disconnect@K`` / ``psp-timeout@K``: at the K-th DATA_TRANSFER of the command (1-based) the board
    #: loses power / the PSP never answers
    disconnect_at: int | None = None
    timeout_at: int | None = None
    #: fault ``psp-cut-commit``: the board loses power right after the PSP committed an update, before it answers
    cut_commit: bool = False


class PspMailbox:
    """The three C2PMSG registers and the firmware behind them."""

    def __init__(self, layout: FlashRegisters, clock: Clock, state: str = "pbl", config: PspConfig | None = None, *,
                 update: FlashUpdate | None = None, on_lost: Callable[[], None] = lambda: None) -> None:
        self.layout = layout
        if len(config.script if config else DEFAULT_SCRIPT) > 19:
            raise ValueError("a transfer-type script holds at most 19 entries (navi31's item count)")
        self.clock = clock
        self.config = config or PspConfig()
        #: the early-boot update behind the mailbox (tinyhw.mocks.amd.pspupdate); None: items are only logged
        self.update = update
        self.on_lost = on_lost
        #: host writes to COMMAND, COMMAND_DATA and DOORBELL this command (a refusal proves it wrote none)
        self.register_writes = 0
        #: START/DATA/END_TRANSFER commands executed this command, and DATA_TRANSFERs alone (fault numbering)
        self.transfer_commands = 0
        self.data_transfers = 0
        #: the status of the last commit (None: none ran); "committed" after a successful one
        self.commit_status: int | None = None
        self.commits = 0
        self.hung = False
        #: (command, argument, status, response) of every command processed
        self.log: list[tuple[int, int, int, int]] = []
        #: (item, payload) of every item streamed to completion, for comparison with a resolver
        self.payloads: list[tuple[int, bytes]] = []
        #: (item, bytes received) of every aborted stream
        self.aborted: list[tuple[int, bytes]] = []
        #: 64-bit image addresses given to UPDATE_FLASH_IMAGE
        self.live_updates: list[int] = []
        self.state = state
        self.power_on()

    def power_on(self) -> None:
        """Power-on mailbox: COMMAND reads ready (0 with ``mailbox=not-ready``), data and doorbell 0, no command
        pending, the transfer-type script back at its first item, no live-update address."""
        self.command = 0 if self.config.mailbox == "not-ready" else self.layout.PSP_READY
        self.data = 0
        self.doorbell = 0
        self._pending: tuple[float, int, int, int | None] | None = None  # (done_at, cmd, status, response)
        self._step = 0
        self._active: tuple[int, int, bytearray] | None = None
        self._addr_lo = 0
        self._addr_hi = 0
        self._staged: dict[int, bytes] = {}
        self._extra = 0.0
        self.hung = False

    def to_state(self) -> dict[str, object]:
        """What outlives a command (the board state file): the board state, the script position, a hang."""
        return {"state": self.state, "step": self._step, "hung": self.hung}

    def from_state(self, saved: dict[str, object]) -> None:
        """Take up the script position a previous command left (same board state only; staged items are lost)."""
        if saved.get("state") == self.state:
            step = saved.get("step", 0)
            self._step = step if isinstance(step, int) and 0 <= step <= len(self.config.script) else 0
            self.hung = bool(saved.get("hung", False))

    def set_state(self, state: str) -> None:
        """The test moves the board between pbl, early, sos and gated (hardware needs a power cycle)."""
        self.state = state
        self.power_on()

    @property
    def transfer_type(self) -> int:
        """What GET_TRANSFER_TYPE answers now in the early state."""
        return self.config.script[self._step] if self._step < len(self.config.script) else SCRIPT_DONE

    # -- registers --------------------------------------------------------------------------------------------
    def handlers(self) -> tuple[dict[int, Callable[[], int]], dict[int, Callable[[int], None]]]:
        """(reads, writes): BAR5 offset -> handler for the mailbox's command, data and doorbell registers."""
        lay = self.layout
        reads: dict[int, Callable[[], int]] = {
            lay.PSP_COMMAND: self._command_read, lay.PSP_COMMAND_DATA: self._data_read,
            lay.PSP_DOORBELL: self._bell_read,
        }
        writes: dict[int, Callable[[int], None]] = {
            lay.PSP_COMMAND: self._command_write, lay.PSP_COMMAND_DATA: self._data_write,
            lay.PSP_DOORBELL: self._bell_write,
        }
        return reads, writes

    def peek(self, offset: int) -> int:
        """A mailbox register's value without side effects (no pending answer lands); KeyError for others."""
        lay = self.layout
        return {lay.PSP_COMMAND: self.command, lay.PSP_COMMAND_DATA: self.data, lay.PSP_DOORBELL: self.doorbell}[offset]

    def _poll(self) -> None:
        p = self._pending
        if p is not None and self.clock.now() >= p[0]:
            self._pending = None
            _, cmd, status, response = p
            self.command = self.layout.PSP_READY | (cmd << self.layout.PSP_COMMAND_SHIFT) | status
            if response is not None:
                self.data = response
            self.doorbell = 0  # invented: the firmware clears the doorbell when it answers

    def _command_read(self) -> int:
        if self._pending is not None:
            self._poll()
        return self.command

    def _command_write(self, value: int) -> None:
        self.register_writes += 1
        if self._pending is not None:
            self._poll()
        self.command = value & ~self.layout.PSP_READY  # storing a command clears "ready"

    def _data_read(self) -> int:
        if self._pending is not None:
            self._poll()
        return self.data

    def _data_write(self, value: int) -> None:
        self.register_writes += 1
        self.data = value

    def _bell_read(self) -> int:
        if self._pending is not None:
            self._poll()
        return self.doorbell

    def _bell_write(self, value: int) -> None:
        self.register_writes += 1
        self.doorbell = value
        if value != 1 or self.config.mailbox == "not-ready" or self.hung:
            return
        cmd = (self.command & self.layout.PSP_COMMAND_MASK) >> self.layout.PSP_COMMAND_SHIFT
        arg = self.data
        if cmd in (START_TRANSFER, DATA_TRANSFER, END_TRANSFER, *LIVE_COMMANDS):
            self.transfer_commands += 1  # rung, whatever the board state answers
        if cmd == DATA_TRANSFER and self.state == "early":
            self.data_transfers += 1
            if self.data_transfers == self.config.disconnect_at:
                self.on_lost()  # power lost while the PSP takes this dword: nothing more happens
                return
            if self.data_transfers == self.config.timeout_at:
                self.hung = True  # the PSP never answers again until a power cycle
                return
        self._extra = 0.0
        commits = self.commits
        status, response = self._execute(cmd, arg)
        self.log.append((cmd, arg, status, response if response is not None else 0))
        if self.config.mailbox == "hang":
            return
        if self.commits > commits and self.config.cut_commit:
            self.on_lost()
            return
        live = cmd == UPDATE_FLASH_IMAGE and self.state in ("sos", "gated")
        delay = (self.config.live_delay if live else self.config.delay) + self._extra
        self._pending = (self.clock.now() + delay, cmd, status, response)

    # -- firmware -------------------------------------------------------------------------------------------------
    def _execute(self, cmd: int, arg: int) -> tuple[int, int | None]:
        if self.state in ("sos", "gated"):
            return self._sos(cmd, arg)
        if cmd in PROBE_COMMANDS:
            return self.config.probe.get(cmd, (OK, 0))
        if cmd not in EARLY_COMMANDS:
            return INVALID_COMMAND, None  # live commands need SOS (inferred code)
        if self.state != "early":
            return SM_NOT_INITIALISED, None  # stalled PBL: no streaming state machine (inferred code)
        return self._early(cmd, arg)

    def _sos(self, cmd: int, arg: int) -> tuple[int, int | None]:
        if cmd in EARLY_COMMANDS:
            return PARTITION_UPDATE_ERROR, None  # §e.3 "special reading": early commands are gated
        if cmd == UPDATE_ROM_IMAGE_ADDR_LO:
            self._addr_lo = arg
            return OK, None
        if cmd == UPDATE_ROM_IMAGE_ADDR_HI:
            self._addr_hi = arg
            return OK, None
        if cmd == UPDATE_FLASH_IMAGE:
            self.live_updates.append(self._addr_hi << 32 | self._addr_lo)
            return (WRITE_TO_SPI_ERROR if self.config.live_fail else OK), None
        return INVALID_COMMAND, None

    def _early(self, cmd: int, arg: int) -> tuple[int, int | None]:
        if cmd == GET_TRANSFER_TYPE:
            return OK, self.transfer_type
        if cmd == START_TRANSFER:
            item, length = arg & 0xFF, arg >> 8
            if self._active is not None or self._step >= len(self.config.script):
                return SM_TRANSFER_ERROR, None  # out of order (inferred code)
            if item != self.transfer_type & 0xFF or length == 0 or length % 4:
                return INVALID_PARAMETER, None  # wrong item or length (inferred code)
            self._active = (item, length, bytearray())
            return OK, None
        if cmd == DATA_TRANSFER:
            if self._active is None:
                return SM_TRANSFER_ERROR, None
            item, length, buf = self._active
            if len(buf) + 4 > length:
                return OUT_OF_BOUNDS, None
            buf += arg.to_bytes(4, "little")
            return OK, None
        if cmd == END_TRANSFER:
            return self._end(arg)
        return INVALID_COMMAND, None

    def _end(self, arg: int) -> tuple[int, int | None]:
        if self._active is None:
            return SM_TRANSFER_ERROR, None
        item, length, buf = self._active
        self._active = None
        sent = arg >> 8
        if (arg & 0xFF) != item or sent != len(buf):
            self.aborted.append((item, bytes(buf)))
            return INVALID_PARAMETER, None  # END names another item or a wrong count (inferred code)
        if sent != length:
            self.aborted.append((item, bytes(buf)))
            return SM_TRANSFER_ERROR, None  # fewer bytes than START announced: aborted (inferred code)
        self.payloads.append((item, bytes(buf)))
        self._staged[item] = bytes(buf)
        if self.transfer_type >> 8 == 2 and self.update is not None:
            status, seconds = self.update.commit(self._staged)
            self.commit_status = status
            self.commits += status == OK
            self._extra = seconds  # the answer comes when the flash writes are done (modelled time)
            if status != OK:
                return status, None  # the stream stays at this item; a power cycle starts over
        self._step += 1
        return OK, None
