"""``tinyhw trace replay``: issue a recording's writes on a device and check every read against the recorded value.

Unlike envytools' nvammiotracereplay (writes only, 32-bit, BAR0 assumed), each access is replayed by (BAR,
offset, width) as recorded, reads are issued too and compared, and the first divergence stops the replay with the
access, the mark it belongs to, the expected and actual values and the decoded register. ``tolerate`` names
registers whose reads legitimately differ (timestamps, counters): they are read but not compared.

Replayed: config reads/writes, 32-bit BAR reads/writes, bulk BAR reads (compared by hash) and writes (the
recorded bytes; a write whose bytes were cut at the recording's limit cannot be replayed), polls (re-run with the
recorded timeout), sleeps (on the device's clock). The bridge's USB transfers are the wire under those accesses
and are not replayed on their own; a recorded error ends the replay there (the session failed at that point).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import OperationFailed, Refused, TinyhwError
from tinyhw.formats import tracefile
from tinyhw.formats.tracefile import Record, Trace
from tinyhw.trace.decode import NO_MARK, Decoder, fields_changed, mark_path
from tinyhw.transport.base import BarRegion, Transport
from tinyhw.transport.wait import poll

#: ability calls that only ask the transport something: skipped by a replay
QUERIES = {"sram_queue_kind", "attribute", "driver_files", "batch_time", "config_size", "resizable_sizes"}


@dataclass
class Divergence:
    """The first access whose result differs from the recording."""

    record: Record
    mark: str
    expected: Any
    actual: Any
    register: str | None = None
    fields: dict[str, list[int | None]] = field(default_factory=dict)
    why: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the access, its mark, expected and actual values, the register and fields that differ."""
        def hexed(v: Any) -> Any:
            return v.hex() if isinstance(v, bytes) else v

        return {"access": self.record.as_dict(), "mark": self.mark, "expected": hexed(self.expected),
                "actual": hexed(self.actual), "register": self.register, "fields": self.fields, "why": self.why}


@dataclass
class ReplayResult:
    """What a replay did: counts of accesses replayed, reads compared and tolerated, and the first divergence."""

    replayed: int = 0
    reads_checked: int = 0
    tolerated: int = 0
    skipped: int = 0
    divergence: Divergence | None = None
    stopped_at_error: str | None = None
    truncated: str | None = None  # the recording was cut short: where (only its complete records were replayed)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"replayed": self.replayed, "reads_checked": self.reads_checked, "tolerated": self.tolerated,
                "skipped": self.skipped, "divergences": 0 if self.divergence is None else 1,
                "divergence": None if self.divergence is None else self.divergence.as_dict(),
                "stopped_at_recorded_error": self.stopped_at_error, "truncated": self.truncated}


def check_target(trace: Trace, transport: Transport) -> None:
    """Refuse (exit 2) a device that is not the recorded kind (vendor and device id) before anything is replayed."""
    ident = trace.header.get("identity") or {}
    got = transport.identity()
    want = (ident.get("vendor_id"), ident.get("device_id"))
    if want != (got.vendor_id, got.device_id):
        raise Refused(f"the recording is of a {want[0]:04x}:{want[1]:04x} device, this one is "
                      f"{got.vendor_id:04x}:{got.device_id:04x}" if None not in want else
                      "the recording names no device identity", hint="replay it on a board of the recorded kind")


def _prepare(trace: Trace, transport: Transport) -> None:
    """Refuse (exit 2) before touching the device when the recording holds a write that cannot be replayed, or an
    access outside the device's BARs."""
    for rec in trace.records:
        bar_ops = (tracefile.READ32, tracefile.WRITE32, tracefile.POLL, tracefile.BULK_READ, tracefile.BULK_WRITE)
        if rec.bar is not None and rec.op in bar_ops:
            length = rec.fields["length"] if rec.op in (tracefile.BULK_READ, tracefile.BULK_WRITE) else 4
            transport.bar(rec.bar).check(rec.fields["offset"], length)
        if rec.op == tracefile.BULK_WRITE and rec.data is not None and len(rec.data) < rec.fields["length"]:
            raise Refused(f"record {rec.index} ({rec.name} of 0x{rec.fields['length']:x} bytes at bar{rec.bar}+"
                          f"0x{rec.fields['offset']:x}) kept only {len(rec.data)} bytes; it cannot be replayed",
                          hint="record again with a larger keep_write limit")
        if rec.op == tracefile.ABILITY and rec.fields["call"] not in QUERIES:
            hint = "replay recordings of register, config and bulk accesses"
            if rec.fields["call"] == "write_sram":  # am boot over a usb bridge stages firmware in its sram
                hint = "record `am boot` over a usb bridge with --firmware-path bar to replay it"
            raise Refused(f"record {rec.index} is a call of the {rec.fields['call']} ability, which a replay "
                          "cannot issue", hint=hint)


def tolerated_offsets(trace: Trace, tolerate: Iterable[str]) -> set[int]:
    """The register offsets ``tolerate`` (``block.REGISTER`` names) names in the recorded device's register database;
    an unknown name is refused (exit 2). Needs no device: callers check the names before opening one."""
    return Decoder(trace.header).offsets(tolerate)


def replay(trace: Trace, transport: Transport, tolerate: Iterable[str] = (),
           on_mark: Callable[[str], None] | None = None) -> ReplayResult:
    """Replay ``trace`` on ``transport`` (module docstring); stop at the first divergence. ``tolerate``:
    ``block.REGISTER`` names whose reads are not compared. A device error during the replay raises (the access
    is named in the error's context)."""
    tolerated = tolerated_offsets(trace, tolerate)
    check_target(trace, transport)
    _prepare(trace, transport)
    decoder = Decoder(trace.header)
    result = ReplayResult(truncated=trace.truncated)
    current = ""
    pace = _pacer(trace, transport)
    for path, rec in mark_path(trace):
        label = " > ".join(path)
        if label != current and on_mark is not None:
            on_mark(label)
        current = label
        if rec.op == tracefile.ERROR:
            result.stopped_at_error = f"record {rec.index}: {rec.text}"
            break
        if rec.op in (tracefile.USB_CONTROL, tracefile.USB_BULK, tracefile.DROPPED, tracefile.ABILITY):
            result.skipped += 1
            continue
        pace(rec)
        try:
            actual = _issue(transport, rec)
        except TinyhwError as e:
            e.add_context("replay_record", str(rec.index), f"(replaying record {rec.index}, {rec.name})")
            raise
        result.replayed += 1
        if not rec.is_read:
            continue
        expected = rec.fields["sha"] if rec.op == tracefile.BULK_READ else rec.fields["value"]
        register_read = rec.op in (tracefile.READ32, tracefile.POLL) and rec.bar == decoder.bar
        if register_read and rec.fields["offset"] in tolerated:
            result.tolerated += 1
            continue
        result.reads_checked += 1
        if actual != expected:
            reg = decoder.register(rec)
            changed = fields_changed(reg, expected, actual) if isinstance(actual, int) else {}
            result.divergence = Divergence(rec, label or NO_MARK, expected, actual,
                                           reg.name if reg else None, changed,
                                           "bulk read hash differs" if rec.op == tracefile.BULK_READ
                                           else "value differs")
            break
    return result


def _pacer(trace: Trace, transport: Transport) -> Callable[[Record], None]:
    """On an emulated board (virtual clock): wait before each access until the board's clock is as far past the
    replay's start as the recorded access was past the recording's first, so that every wait the driver did (not
    an access, so not recorded) is done again and polled registers read alike. The timeline is the recorded virtual
    time when the recording was made on an emulated board, else (hardware, an mmiotrace import) its wall time."""
    clock = transport.clock
    if not getattr(clock, "virtual", False) or not trace.records:
        return lambda _rec: None
    virtual = any(r.vtime_ns is not None for r in trace.records)

    def stamp(rec: Record) -> int | None:
        return rec.vtime_ns if virtual else rec.wall_ns

    first = next(s for r in trace.records if (s := stamp(r)) is not None)
    start = clock.now()

    def pace(rec: Record) -> None:
        at = stamp(rec)
        if at is not None:
            wait = start + (at - first) / 1e9 - clock.now()
            if wait > 0:
                clock.sleep(wait)

    return pace


def _region(t: Transport, rec: Record) -> BarRegion:
    """The BAR region a recorded BAR access names (a record of a BAR access without a BAR number is refused)."""
    if rec.bar is None:
        raise Refused(f"record {rec.index}: a bar access that names no bar")
    return t.bar(rec.bar)


def _issue(t: Transport, rec: Record) -> Any:
    """Issue one recorded access; return what a read gave (a bulk read: its hash)."""
    f = rec.fields
    op = rec.op
    if op == tracefile.READ32:
        return _region(t, rec).read32(f["offset"])
    if op == tracefile.WRITE32:
        return _region(t, rec).write32(f["offset"], f["value"])
    if op == tracefile.CFG_READ:
        return t.config_read(f["offset"], rec.width)
    if op == tracefile.CFG_WRITE:
        return t.config_write(f["offset"], rec.width, f["value"])
    if op == tracefile.BULK_READ:
        return tracefile.digest(_region(t, rec).read(f["offset"], f["length"]))
    if op == tracefile.BULK_WRITE:
        data = rec.data or b""
        if tracefile.digest(data) != f["sha"]:
            raise OperationFailed(f"record {rec.index}: the kept bytes do not match the recorded hash (corrupt)")
        return _region(t, rec).write(f["offset"], data)
    if op == tracefile.POLL:
        region = _region(t, rec)
        return poll(t.clock, lambda: region.read32(f["offset"]), lambda v: v & f["mask"] == f["expect"],
                    timeout=f["timeout_us"] / 1e6, interval=f["interval_us"] / 1e6, what=f"record {rec.index}")
    if op == tracefile.SLEEP:
        return t.clock.sleep(f["ns"] / 1e9)
    return None
