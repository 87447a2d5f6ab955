"""The PSP early-boot flash mailbox, read-only: the probe of specs/navi31-spi-flash.md §e.4.

Implements §e.1 (the register handshake: refuse to send unless COMMAND bit 31 says ready, argument
to COMMAND_DATA, command id << 16 to COMMAND, DOORBELL = 1, poll COMMAND for bit 31 every 1 ms on
the transport's clock for up to 10 s, status = COMMAND bits 15:0, response = COMMAND_DATA), the
probe's command ids of §e.2, the status names of §e.3 and its special reading (status 0x0A on
GET_TRANSFER_TYPE: early commands gated, a host driver or SOS already running), and §e.4 (probe in
the order GET_BOOT_PARTITION, GET_FB_STATE, SPI_GET_MODEL_ID, GET_TRANSFER_TYPE; record status and
response of each without failing on a non-zero status; start no transfer).

Register offsets come from the register database (MP0 C2PMSG_73/115/116, §a.4); the ready/status/
command masks are psp_v13_0.c's (§a.4), the headers carry no fields for these registers.

Decoding is limited to what the spec knows: the transfer type (item in bits 7:0, named from the
§g.2 item table, phase in bits 8 and up; phase 2 = stream complete, §e.6). The response formats of
GET_BOOT_PARTITION, GET_FB_STATE and SPI_GET_MODEL_ID are an open question (spec, open question 7):
only their raw values are shown. There is no write path here: the validated item stream (``ifwi-all``)
is :mod:`tinyhw.flash.update`, which uses this handshake; single-item streaming and the live update
stay disabled (§e.7).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import OperationFailed
from tinyhw.flash.device import require_flash
from tinyhw.formats.ifwi_layout import ITEMS
from tinyhw.regs import Asic
from tinyhw.transport.base import Transport
from tinyhw.transport.wait import poll

# §e.2 command ids of the probe
GET_BOOT_PARTITION = 0x01
GET_FB_STATE = 0x06
GET_TRANSFER_TYPE = 0x07
SPI_GET_MODEL_ID = 0x0B
COMMAND_NAMES = {GET_BOOT_PARTITION: "GET_BOOT_PARTITION", GET_FB_STATE: "GET_FB_STATE",
                 GET_TRANSFER_TYPE: "GET_TRANSFER_TYPE", SPI_GET_MODEL_ID: "SPI_GET_MODEL_ID"}
#: §e.4: the probe's order.
PROBE_ORDER = (GET_BOOT_PARTITION, GET_FB_STATE, SPI_GET_MODEL_ID, GET_TRANSFER_TYPE)

# §a.4 (psp_v13_0.c masks) and §e.1
READY = 0x80000000
STATUS_MASK = 0x0000FFFF
COMMAND_SHIFT = 16
COMMAND_MASK = 0x00FF0000
POLL_INTERVAL = 1e-3
TIMEOUT = 10.0

#: §e.3 status/error codes (low 16 bits of COMMAND; seed).
STATUS_NAMES = {
    0x00: "success", 0x01: "generic error", 0x02: "out of bounds", 0x03: "invalid parameter",
    0x04: "off-chip boot error", 0x05: "address not set", 0x06: "parse off-chip error", 0x07: "address map error",
    0x08: "parse on-chip error", 0x09: "full update error", 0x0A: "partition update error",
    0x0B: "map on-chip error", 0x0C: "write to spi error", 0x0D: "signature validation error",
    0x0E: "invalid command", 0x0F: "signature not found", 0x10: "state machine not initialised",
    0x11: "state machine transfer error", 0x12: "initialisation error",
}
#: §e.3 special reading: this status on GET_TRANSFER_TYPE means the early commands are gated.
GATED_STATUS = 0x0A
GATED_WARNING = ("the psp early-boot mailbox is gated (GET_TRANSFER_TYPE status 0x0a): a host driver or the psp's "
                 "secure os (sos) is already running; early item streaming is not possible in this state. "
                 "Reset the card and access it before any driver or sos is loaded")
#: §e.6: phase 2 (a transfer type of the form 0x2xx) ends a full IFWI stream.
PHASE_COMPLETE = 2


def status_name(status: int) -> str:
    """The name of a PSP mailbox status code, or ``unknown error``."""
    return STATUS_NAMES.get(status, "unknown error")


def decode_transfer_type(value: int) -> dict[str, Any]:
    """§e.2 GET_TRANSFER_TYPE: item = bits 7:0 (named from the §g.2 table), phase = bits 8 and up."""
    item, phase = value & 0xFF, value >> 8
    return {"item": item, "item_name": ITEMS.get(item), "phase": phase,
            "phase_meaning": "stream complete; a hard power cycle is required" if phase == PHASE_COMPLETE else None}


@dataclass(frozen=True)
class Reply:
    """One handshake: the command sent, COMMAND as read at completion, its status and COMMAND_DATA."""

    command: int
    register: int  # COMMAND (C2PMSG_115) as read when bit 31 came back
    response: int  # COMMAND_DATA (C2PMSG_116) read after completion

    @property
    def name(self) -> str:
        """The command's name, or its number in hex."""
        return COMMAND_NAMES.get(self.command, f"command 0x{self.command:02x}")

    @property
    def status(self) -> int:
        """The status bits of the command register after the reply."""
        return self.register & STATUS_MASK

    @property
    def status_name(self) -> str:
        """The status in words."""
        return status_name(self.status)

    @property
    def decoded(self) -> dict[str, Any] | None:
        """The response's meaning where the spec knows it (a successful GET_TRANSFER_TYPE), else None."""
        if self.command == GET_TRANSFER_TYPE and self.status == 0:
            return decode_transfer_type(self.response)
        return None

    def as_dict(self) -> dict[str, Any]:
        """The reply as a JSON-ready dict."""
        return {"command": self.command, "name": self.name, "status": self.status, "status_name": self.status_name,
                "response": self.response, "command_register": self.register, "decoded": self.decoded}


class Mailbox:
    """The three C2PMSG registers of MP0 (§a.4), offsets from the register database."""

    def __init__(self, transport: Transport, asic: Asic) -> None:
        self.clock = transport.clock
        self.bar = transport.bar(asic.bar)
        self.command_offset = asic.offset("mp0.MP0_SMN_C2PMSG_115")
        self.data_offset = asic.offset("mp0.MP0_SMN_C2PMSG_116")
        self.doorbell_offset = asic.offset("mp0.MP0_SMN_C2PMSG_73")
        #: commands actually sent (written to COMMAND and rung), in order
        self.sent: list[int] = []

    def read_command(self) -> int:
        """Read the mailbox command register (C2PMSG_115)."""
        return self.bar.read32(self.command_offset)

    def send(self, command: int, argument: int | None = None, *, timeout: float = TIMEOUT) -> Reply:
        """§e.1 steps 1-6. Raises (nothing sent) when bit 31 is clear; never raises on a non-zero status."""
        if not 0 <= command <= COMMAND_MASK >> COMMAND_SHIFT:
            raise OperationFailed(f"psp command 0x{command:x} does not fit the command field")
        name = COMMAND_NAMES.get(command, f"command 0x{command:02x}")
        current = self.read_command()
        if not current & READY:
            raise OperationFailed(
                f"the psp mailbox is not ready (c2pmsg_115 reads 0x{current:08x}, bit 31 clear); {name} was not sent",
                hint="the psp is busy or not running; power-cycle the board and probe again")
        if argument is not None:
            self.bar.write32(self.data_offset, argument & 0xFFFFFFFF)
        self.bar.write32(self.command_offset, command << COMMAND_SHIFT)  # bit 31 written as 0: clears ready
        self.bar.write32(self.doorbell_offset, 1)
        self.sent.append(command)
        register = poll(self.clock, self.read_command, lambda v: bool(v & READY), timeout=timeout,
                        interval=POLL_INTERVAL, what=f"the psp to answer {name} (0x{command:02x})",
                        hint="the psp firmware did not complete the command; power-cycle the board")
        return Reply(command, register, self.bar.read32(self.data_offset))


@dataclass
class PspStatus:
    """The probe's findings (§e.4): the COMMAND register before the first command, and every reply."""

    location: str
    initial: int
    replies: list[Reply] = field(default_factory=list)

    def reply(self, command: int) -> Reply | None:
        """The reply to ``command``, or None when it was not sent."""
        return next((r for r in self.replies if r.command == command), None)

    @property
    def gated(self) -> bool:
        """True when GET_TRANSFER_TYPE answered the gated status."""
        r = self.reply(GET_TRANSFER_TYPE)
        return r is not None and r.status == GATED_STATUS

    @property
    def warnings(self) -> list[str]:
        """Warnings for the user (the gated board's)."""
        return [GATED_WARNING] if self.gated else []

    def as_dict(self) -> dict[str, Any]:
        """The probe as a JSON-ready dict: location, register before, replies, gated, warnings."""
        return {"location": self.location, "command_register_before": self.initial,
                "ready_before": bool(self.initial & READY), "commands": [r.as_dict() for r in self.replies],
                "gated": self.gated, "warnings": self.warnings}


def probe(transport: Transport, *, timeout: float = TIMEOUT) -> PspStatus:
    """§e.4: the four read-only commands in order, each status and response recorded."""
    asic, ident, _ = require_flash(transport, "psp_update")
    mailbox = Mailbox(transport, asic)
    result = PspStatus(ident.location, mailbox.read_command())
    for command in PROBE_ORDER:
        result.replies.append(mailbox.send(command, timeout=timeout))
    return result
