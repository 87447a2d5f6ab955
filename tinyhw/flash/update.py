"""Update a healthy Navi31 board's flash through the PSP early-boot mailbox: the validated ``ifwi-all`` sequence.

Implements specs/navi31-spi-flash.md §e.5 (one item: START_TRANSFER, one DATA_TRANSFER per dword, each a
full mailbox round trip, END_TRANSFER with a 60 s timeout; any non-zero status aborts; the abort rule),
§e.6 (at most 19 items, each the one GET_TRANSFER_TYPE asks for, resolved from the image; phase 2 ends
the stream and a hard power cycle is required; the firmware picks the partition), §e.3 (status 0x0A on
GET_TRANSFER_TYPE: gated), §g.2 (the item resolver, :func:`tinyhw.formats.ifwi_layout.resolve_item`)
and §g.3 (the board identity, read through the ROM aperture, which works once the PSP has booted).

Preconditions, all checked before the first mailbox write (each a :class:`~tinyhw.errors.Refused`, exit 2):
the image passes the checks ``flash write`` uses (exactly 2 MiB, magic, a $PSP directory, an ATOM VBIOS);
every item of the §g.2 table resolves inside the image with a length the protocol can carry; the board
identity in the flash matches the image's. Then one GET_TRANSFER_TYPE (it starts no transfer): the PSP
must be in the early state and ask for an item (status 0x0A: gated).

Cost (§i.1: "≥ 7 accesses per 4 bytes"): a DATA_TRANSFER here is three writes (COMMAND_DATA, COMMAND,
DOORBELL) and the reads of COMMAND until bit 31 returns. §e.1 step 1 (ready before sending) is the
previous reply's last read of the same register, with nothing in between; DATA_TRANSFER has no response
(§e.2), so COMMAND_DATA is not read back. On a transport that batches (``remote:``) the four operations
travel as one message with the poll on the server's side: one round trip per dword however long the PSP
takes to answer (measured on the emulated board, whose PSP answers within one round trip, the plain path
costs the same there: the client already sends queued writes with the next read). The first poll waits
for the PSP's answer time as learned from earlier dwords, so that it usually finds the answer (as the
ROM_SW reads do, §i.2 step 4).

After a failure the error says which partition the next boot selects, as far as the host can know: the
PSP switches partitions only when the phase-2 item's END_TRANSFER succeeds (on stock hardware the update
ends with the updated B partition selected; inferred: it cannot have switched before), so a stream that
failed earlier leaves the old partition; an answer lost in that last END_TRANSFER leaves it unknown
until ``flash verify IMAGE --after-update`` after the power cycle.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import DeviceTimeout, Interrupted, OperationFailed, Refused, TinyhwError
from tinyhw.flash import aperture
from tinyhw.flash.device import require_flash
from tinyhw.flash.files import sha256
from tinyhw.flash.identity import BoardCheck, compare, image_vbios_offsets, read_identity
from tinyhw.flash.psp import (
    GATED_STATUS,
    GET_TRANSFER_TYPE,
    PHASE_COMPLETE,
    POLL_INTERVAL,
    READY,
    STATUS_MASK,
    Mailbox,
    status_name,
)
from tinyhw.formats.fwregion import Region
from tinyhw.formats.ifwi import require_flashable
from tinyhw.formats.ifwi_layout import ISH_OFFSETS, ITEMS, METADATA, resolve_item
from tinyhw.progress import NO_PROGRESS, Progress
from tinyhw.transport.base import Transport, has
from tinyhw.transport.batch import W32, Batching, Poll32

# §e.2 transfer command ids
START_TRANSFER = 0x08
DATA_TRANSFER = 0x09
END_TRANSFER = 0x0A
#: §e.6: Navi31's item count (AMDVBFlash's ASIC table)
MAX_ITEMS = 19
#: §e.1 / §e.5 timeouts
COMMAND_TIMEOUT = 10.0
END_TIMEOUT = 60.0
ABORT_END_TIMEOUT = 10.0
#: §e.5: progress every 4 KiB
REPORT_BYTES = 0x1000
#: §e.5: a 24-bit length
MAX_LENGTH = 0xFFFFFF
#: polls of COMMAND every 100 us for the first millisecond after the doorbell, then at the spec's 1 ms interval
FAST_INTERVAL = 1e-4
SLOW_AFTER = 1e-3
GATED_HINT = ("power-cycle the card (off, not a reset) and do not boot it (no amdgpu, no tinyhw am boot) before "
              "running flash update; reading works in this state through the rom aperture (flash dump --method "
              "aperture)")
#: the same on an emulated board, where the power cycle is a command
EMULATED_GATED_HINT = GATED_HINT + "; on an emulated board: tinyhw mock power-cycle, or mock reset --yes"
ROM_SW_HINT = ("the psp has not booted from this flash (its boot loader stalled?): recover through the rom_sw path "
               "instead: tinyhw flash write IMAGE --yes")

#: §e.6 observed outcome: the regions a PSP update rewrites (tolerated by :func:`compare_after_update`)
B_ISH = ISH_OFFSETS[1]
TOLERATED = (Region("ISH B checksum", B_ISH, 4), Region("ISH B update counter", B_ISH + 8, 4),
             Region("psp update cookie and metadata (near 0x1ef000)", METADATA.offset, METADATA.size))


class UpdateFailed(OperationFailed):
    """A ``flash update`` that stopped while streaming: ``outcome`` is what the next boot selects as far as
    the host knows (``old``: the old partition; ``unknown``: the last item's answer was lost)."""

    def __init__(self, message: str, *, outcome: str, item: int | None, sent: int, hint: str) -> None:
        super().__init__(message, hint=hint)
        self.outcome = outcome
        self.item = item
        self.sent = sent


@dataclass
class ItemReport:
    """One streamed item: its number and name, where it came from in the image, its bytes and duration."""

    item: int
    name: str
    offset: int
    size: int
    phase: int
    seconds: float
    round_trips: int

    def as_dict(self) -> dict[str, Any]:
        """The item as a JSON-ready dict."""
        return dict(self.__dict__)


@dataclass
class UpdatePlan:
    """What the preflight found: the image, the board check, the PSP's first request and the stream's size."""

    location: str
    image_sha256: str
    board: BoardCheck
    transfer_type: int
    stream_bytes: int  # bytes of every resolvable item (the firmware decides which it asks for)

    def describe(self, image_path: str | None) -> str:
        """The plan in words, for the confirmation."""
        item = self.transfer_type & 0xFF
        return "\n".join([
            f"flash update through the psp early-boot mailbox on {self.location}",
            f"  image {image_path or '(bytes)'} sha256 {self.image_sha256}",
            f"  board: {'same board' if self.board.match else 'not checked'}; {self.board.describe()}",
            f"  the psp asks for item 0x{item:02x} ({ITEMS.get(item, 'unknown')}) first; it picks the items (at "
            f"most {MAX_ITEMS}) and the partition it writes",
            "  each dword is one mailbox round trip; a hard power cycle is required when the psp reports phase 2"])


@dataclass
class UpdateResult:
    """A completed stream: the items, the bytes, the time on the transport's clock, the mailbox cost."""

    location: str
    image_sha256: str
    items: list[ItemReport] = field(default_factory=list)
    seconds: float = 0.0
    round_trips: int = 0
    data_transfers: int = 0
    final_state: int = 0

    @property
    def bytes_sent(self) -> int:
        """Payload bytes streamed (all items)."""
        return sum(i.size for i in self.items)

    @property
    def rate(self) -> float:
        """Bytes per second over the whole stream (on the transport's clock)."""
        return self.bytes_sent / self.seconds if self.seconds > 0 else 0.0

    @property
    def round_trips_per_kib(self) -> float:
        """Transport round trips per KiB streamed."""
        return self.round_trips * 1024 / self.bytes_sent if self.bytes_sent else 0.0

    next_boot: str = ("a hard power cycle is required (power off the card, not a reset); the next boot selects the "
                      "partition the psp wrote (on stock hardware: the updated b partition)")

    def as_dict(self) -> dict[str, Any]:
        """The result as a JSON-ready dict."""
        return {"location": self.location, "image_sha256": self.image_sha256, "phase2": True,
                "items": [i.as_dict() for i in self.items], "bytes": self.bytes_sent, "seconds": self.seconds,
                "bytes_per_second": self.rate, "round_trips": self.round_trips,
                "round_trips_per_kib": self.round_trips_per_kib, "data_transfers": self.data_transfers,
                "final_transfer_type": self.final_state, "power_cycle_required": True, "next_boot": self.next_boot}


def require_image(image: bytes) -> None:
    """``flash write``'s image checks (exit 2) with a hint of their own: ``flash write``'s name its --force
    options, which neither ``flash update`` nor ``flash verify --after-update`` has."""
    try:
        require_flashable(image)
    except Refused as err:
        raise Refused(err.message, hint="give a complete raw amd ifwi image (a dump of a healthy board)") from None


def check_image(image: bytes) -> int:
    """The image-only preconditions (exit 2): ``flash write``'s checks, then every §g.2 item resolvable with a
    length §e.5 can carry. Returns the bytes of all items."""
    require_image(image)
    problems, total = [], 0
    for item in ITEMS:
        it = resolve_item(image, item)
        if it.error is not None:
            problems.append(f"item 0x{item:02x} ({it.name}): {it.error}")
        elif not it.size or it.size % 4 or it.size > MAX_LENGTH:
            problems.append(f"item 0x{item:02x} ({it.name}): {it.size} bytes (the mailbox carries 4..0x{MAX_LENGTH:x} "
                            "bytes in whole dwords)")
        else:
            total += it.size
    if problems:
        raise Refused(f"refusing the image: the psp may ask for items it does not hold: {'; '.join(problems)}",
                      hint="give a complete raw amd ifwi image (a dump of a healthy board)")
    return total


class Updater:
    """Runs ``flash update`` on ``transport`` with ``image``. ``confirm(plan)`` raises to refuse; ``progress``
    gets one task per item (bytes); ``log`` gets progress lines for a non-terminal reader."""

    def __init__(self, transport: Transport, image: bytes, *, confirm: Callable[[str], None],
                 progress: Progress = NO_PROGRESS, log: Callable[[str], None] = lambda m: None,
                 image_path: str | None = None) -> None:
        self.transport, self.image = transport, image
        self.confirm, self.progress, self.log, self.image_path = confirm, progress, log, image_path
        self.clock = transport.clock
        self.lead = 0.0  # learned time from a DATA_TRANSFER's doorbell to its answer
        self.data_transfers = 0

    # -- preflight -----------------------------------------------------------------------------------------
    def _gated_hint(self) -> str:
        """What to do about a gated mailbox: power-cycle (a command on an emulated board), and what works meanwhile."""
        return EMULATED_GATED_HINT if self.transport.emulated else GATED_HINT

    def preflight(self) -> UpdatePlan:
        """Every precondition, in order; nothing is written to the mailbox before the last one."""
        total = check_image(self.image)
        asic, ident, self.spec = require_flash(self.transport, "psp_update")
        self.mailbox = Mailbox(self.transport, asic)
        board = self._board()
        current = self.mailbox.read_command()
        if not current & READY:
            raise Refused(f"the psp mailbox is not ready (c2pmsg_115 reads 0x{current:08x}, bit 31 clear); nothing "
                          "was sent", hint=self._gated_hint())
        reply = self.mailbox.send(GET_TRANSFER_TYPE, timeout=COMMAND_TIMEOUT)
        if reply.status == GATED_STATUS:
            raise Refused("the psp early-boot mailbox is gated (GET_TRANSFER_TYPE status 0x0a): a host driver or the "
                          "psp's secure os already runs", hint=self._gated_hint())
        if reply.status != 0:
            raise Refused(f"the psp does not take an update: GET_TRANSFER_TYPE answers status 0x{reply.status:02x} "
                          f"({reply.status_name})", hint=ROM_SW_HINT)
        state = reply.response
        if state >> 8 > PHASE_COMPLETE or (state & 0xFF) not in ITEMS:
            raise Refused(f"the psp asks for no item of an ifwi (transfer type 0x{state:x}): an update has finished "
                          "or the psp is in an unknown state", hint="hard power-cycle the card, then run flash "
                          "update again if it is still needed")
        plan = UpdatePlan(ident.location, sha256(self.image), board, state, total)
        self.confirm(plan.describe(self.image_path))
        return plan

    def _board(self) -> BoardCheck:
        """§g.3: the image's VBIOS identity against the flash's, read through the ROM aperture (exit 2 on mismatch)."""
        from tinyhw.formats.vbios import vbios_identity

        image_id = vbios_identity(self.image)
        with aperture.reader(self.transport) as read:
            flash_id, _ = read_identity(read, self.spec.flash_size, image_vbios_offsets(self.image))
        try:
            check = compare(image_id, flash_id, source="flash")
        except Refused as err:
            raise Refused(err.message, hint="check that the image belongs to this board; flash update does not "
                          "write another board's image") from None
        for w in check.warnings():
            self.log(f"warning: {w}")
        return check

    # -- the stream ------------------------------------------------------------------------------------------
    def run(self) -> UpdateResult:
        """Preflight, confirm, stream until phase 2 (§e.6)."""
        plan = self.preflight()
        result = UpdateResult(plan.location, plan.image_sha256)
        t0, rt0 = self.clock.now(), self.transport.counters.round_trips
        state = plan.transfer_type
        for _ in range(MAX_ITEMS):
            item, phase = state & 0xFF, state >> 8
            result.items.append(self._item(item, phase))
            if phase == PHASE_COMPLETE:
                result.seconds = self.clock.now() - t0
                result.round_trips = self.transport.counters.round_trips - rt0
                result.data_transfers = self.data_transfers
                result.final_state = state
                return result
            state = self._transfer_type(item)
        raise UpdateFailed(f"the psp did not reach phase 2 after {MAX_ITEMS} items (last transfer type 0x{state:x})",
                           outcome="old", item=None, sent=0, hint=self._old_hint())

    def _transfer_type(self, after: int) -> int:
        try:
            reply = self.mailbox.send(GET_TRANSFER_TYPE, timeout=COMMAND_TIMEOUT)
        except TinyhwError as e:
            raise self._failed(f"after item 0x{after:02x}: {e.message}", None, 0, last=False) from e
        if reply.status != 0:
            raise self._failed(f"GET_TRANSFER_TYPE after item 0x{after:02x} answered status 0x{reply.status:02x} "
                               f"({reply.status_name})", None, 0, last=False)
        return reply.response

    def _item(self, item: int, phase: int) -> ItemReport:
        """§e.5 for the item the firmware asks for: resolve, START, one DATA per dword, END; the abort rule."""
        it = resolve_item(self.image, item)
        name = ITEMS.get(item, f"item 0x{item:02x}")
        if it.error is not None or it.offset is None or not it.size or it.size % 4 or it.size > MAX_LENGTH:
            raise self._failed(f"the psp asks for item 0x{item:02x} ({name}), which the image cannot give "
                               f"({it.error or f'{it.size} bytes'}); nothing of it was sent", item, 0, last=False)
        data = self.image[it.offset:it.offset + it.size]
        last = phase == PHASE_COMPLETE
        t0, rt0 = self.clock.now(), self.transport.counters.round_trips
        self.sent = 0  # bytes of this item the psp has answered (the abort rule's count)
        self.log(f"item 0x{item:02x} ({name}): {len(data)} bytes from 0x{it.offset:06x}")
        try:
            with self.progress.task(f"item 0x{item:02x}", len(data)) as advance:
                self._command(START_TRANSFER, len(data) << 8 | item, COMMAND_TIMEOUT, f"START_TRANSFER of item "
                              f"0x{item:02x}")
                self._data(data, advance)
        except (TinyhwError, KeyboardInterrupt) as e:
            sent = self.sent
            self._abort_end(item, sent)
            if isinstance(e, KeyboardInterrupt):
                raise Interrupted(f"flash update interrupted during item 0x{item:02x} at byte {sent}",
                                  hint=self._old_hint()) from None
            assert isinstance(e, TinyhwError)
            raise self._failed(f"item 0x{item:02x} ({name}) at byte {sent} of {len(data)}: {e.message}", item, sent,
                               last=False) from e
        sent = self.sent
        try:  # all data sent: END_TRANSFER once, never again (the abort rule's second half)
            self._command(END_TRANSFER, sent << 8 | item, END_TIMEOUT, f"END_TRANSFER of item 0x{item:02x}")
        except TinyhwError as e:
            raise self._failed(f"item 0x{item:02x} ({name}): all {sent} bytes sent, then {e.message}", item, sent,
                               last=last, lost=not isinstance(e, _StatusError)) from e
        seconds = self.clock.now() - t0
        rate = len(data) / seconds if seconds > 0 else 0.0
        self.log(f"item 0x{item:02x}: done in {seconds:.3f} s ({rate / 1024:.1f} KiB/s, "
                 f"{self.transport.counters.round_trips - rt0} round trips)")
        return ItemReport(item, name, it.offset, len(data), phase, seconds, self.transport.counters.round_trips - rt0)

    def _command(self, command: int, argument: int, timeout: float, what: str) -> None:
        reply = self.mailbox.send(command, argument, timeout=timeout)
        if reply.status != 0:
            raise _StatusError(f"{what} answered status 0x{reply.status:02x} ({status_name(reply.status)})")

    def _data(self, data: bytes, advance: Callable[[int], None]) -> None:
        """One DATA_TRANSFER per dword (§e.5 step 2), counting the answered bytes in ``self.sent``. Progress
        every 4 KiB."""
        words = struct.unpack(f"<{len(data) // 4}I", data)
        batch = self.transport if has(self.transport, Batching) else None
        bar = self.mailbox.bar
        c_off, d_off, b_off = self.mailbox.command_offset, self.mailbox.data_offset, self.mailbox.doorbell_offset
        cmd = DATA_TRANSFER << 16
        for word in words:
            if batch is not None:
                index = bar.info.index
                value = batch.submit([W32(index, d_off, word), W32(index, c_off, cmd), W32(index, b_off, 1),
                                      Poll32(index, c_off, READY, READY, COMMAND_TIMEOUT, FAST_INTERVAL,
                                             "the psp to answer DATA_TRANSFER (0x09)")]).get()[-1]
            else:
                bar.write32(d_off, word)
                bar.write32(c_off, cmd)
                bar.write32(b_off, 1)
                value = self._answer(bar.read32, c_off)
            self.data_transfers += 1
            if value & STATUS_MASK:
                status = value & STATUS_MASK
                raise _StatusError(f"DATA_TRANSFER answered status 0x{status:02x} ({status_name(status)})")
            self.sent += 4
            if self.sent % REPORT_BYTES == 0 or self.sent == len(data):
                advance(REPORT_BYTES if self.sent % REPORT_BYTES == 0 else self.sent % REPORT_BYTES)

    def _answer(self, read32: Callable[[int], int], offset: int) -> int:
        """Poll COMMAND for bit 31 (§e.1 step 5): first after the learned answer time, then every
        :data:`FAST_INTERVAL` up to the spec's 10 s."""
        clock = self.clock
        rung = clock.now()
        if self.lead > 0:
            clock.sleep(self.lead)
        deadline = rung + COMMAND_TIMEOUT
        missed = False
        while True:
            asked = clock.now()
            value = read32(offset)
            if value & READY:
                if missed:
                    self.lead = max(self.lead, asked - rung)
                return value
            missed = True
            waited = clock.now() - rung
            if clock.now() >= deadline:
                raise DeviceTimeout(f"timed out after {COMMAND_TIMEOUT:g} s waiting for the psp to answer "
                                    f"DATA_TRANSFER (0x09) (last value 0x{value:x})",
                                    hint="the psp firmware did not complete the command; power-cycle the board")
            clock.sleep(FAST_INTERVAL if waited < SLOW_AFTER else POLL_INTERVAL)

    def _abort_end(self, item: int, sent: int) -> None:
        """§e.5 abort rule: a best-effort END_TRANSFER with the bytes actually sent, 10 s, errors ignored."""
        with contextlib.suppress(TinyhwError, OSError):
            self.mailbox.send(END_TRANSFER, sent << 8 | item, timeout=ABORT_END_TIMEOUT)

    # -- what a failure leaves --------------------------------------------------------------------------------
    @staticmethod
    def _old_hint() -> str:
        return ("hard power-cycle the card (do not boot a driver) and run flash update again; if the card no longer "
                "comes up, recover through the rom_sw path after a power cycle (flash write IMAGE --yes)")

    def _failed(self, what: str, item: int | None, sent: int, *, last: bool, lost: bool = False) -> UpdateFailed:
        if last and lost:
            return UpdateFailed(
                f"flash update: the answer to the last item was lost ({what}); the psp may have switched to the new "
                "partition", outcome="unknown", item=item, sent=sent,
                hint="hard power-cycle the card, then run flash verify IMAGE --after-update: a match means the new "
                     "partition is in place; otherwise the old one boots and flash update can run again")
        return UpdateFailed(f"flash update stopped: {what}; the psp had not finished the stream, so the next boot "
                            "selects the old partition",
                            outcome="old", item=item, sent=sent, hint=self._old_hint())


class _StatusError(OperationFailed):
    """A mailbox command answered a non-zero status (the mailbox itself worked)."""


# -- verify after the power cycle ------------------------------------------------------------------------------
@dataclass
class AfterUpdate:
    """The flash against the image after a PSP update: the regions tolerated (and whether each differed), the
    A/B payload comparison, and the first difference outside the tolerated regions."""

    tolerated: list[dict[str, Any]]
    payloads: dict[str, bool]
    first_mismatch: int | None
    flash_byte: int | None = None
    image_byte: int | None = None

    @property
    def match(self) -> bool:
        """True when nothing outside the tolerated regions differs."""
        return self.first_mismatch is None

    def as_dict(self) -> dict[str, Any]:
        """The comparison as a JSON-ready dict."""
        return {"match": self.match, "first_mismatch": self.first_mismatch, "flash_byte": self.flash_byte,
                "image_byte": self.image_byte, "payloads": self.payloads, "tolerated": self.tolerated}


def compare_after_update(flash: bytes, image: bytes) -> AfterUpdate:
    """§e.6: compare everything but :data:`TOLERATED`; the A and B payloads (ISH A/B location and slot size, from
    the image) are reported on their own."""
    if len(flash) != len(image):
        raise Refused(f"the image is 0x{len(image):x} bytes, the flash 0x{len(flash):x}")
    masked_f, masked_i = bytearray(flash), bytearray(image)
    tolerated = []
    for r in TOLERATED:
        tolerated.append({"name": r.name, "offset": r.offset, "end": r.end,
                          "differs": flash[r.offset:r.end] != image[r.offset:r.end]})
        masked_f[r.offset:r.end] = masked_i[r.offset:r.end] = bytes(r.size)
    payloads = {}
    for name, ish in zip("AB", ISH_OFFSETS, strict=True):
        location, size = struct.unpack_from("<I", image, ish + 0x10)[0], struct.unpack_from("<I", image, ish + 0x18)[0]
        payloads[name] = flash[location:location + size] == image[location:location + size]
    if masked_f == masked_i:
        return AfterUpdate(tolerated, payloads, None)
    block = next(o for o in range(0, len(image), 0x1000) if masked_f[o:o + 0x1000] != masked_i[o:o + 0x1000])
    first = next(i for i in range(block, block + 0x1000) if masked_f[i] != masked_i[i])
    return AfterUpdate(tolerated, payloads, first, flash[first], image[first])


def verify_after_update(transport: Transport, image: bytes, *,
                        advance: Callable[[int], None] = lambda n: None) -> AfterUpdate:
    """Read the whole flash through the ROM aperture (every board state) and :func:`compare_after_update`."""
    require_image(image)
    dump = aperture.dump(transport, advance=advance)
    return compare_after_update(dump.data, image)
