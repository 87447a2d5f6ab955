"""Recording a session: a transport wrapper that appends every operation crossing the seam to a trace file.

:func:`recording` wraps an open transport in a :class:`RecordingTransport`: the same seam (config space, BAR
regions, identity, counters, clock) and the same optional abilities as the transport it wraps, each call passed
through and appended to a :class:`TraceWriter` as one record of the ``tinyhw-trace`` format
(:mod:`tinyhw.formats.tracefile`, docs/trace-format.md). Batched accesses (the :class:`Batching` ability) are
recorded in the order the device runs them, with their results. On the ``usb`` transport the bridge's vendor
requests and bulk transfers are recorded too, through its :class:`~tinyhw.transport.abilities.TransferTap`.
The steps a command reports (:func:`tinyhw.progress.step`: boot steps, flash phases) become MARK records.

Crash safety: records are appended in blocks of at most :data:`FLUSH_BYTES` (and at every mark); a file cut by a
crash, SIGKILL or a full disk reads up to its last complete record. ``flush_each=True`` writes every record as it
happens (the m1n1 hypervisor's "unbuffered" mode), for sessions that may take the machine down.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import itertools
import json
import os
import stat
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from tinyhw import progress
from tinyhw.errors import Refused, TinyhwError
from tinyhw.fileio import check_output_path
from tinyhw.formats import tracefile
from tinyhw.transport import abilities
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo, has, require
from tinyhw.transport.batch import R32, W32, CfgR, CfgW, Op, Poll32, R, Sleep, W

#: Bytes of records held before they are written out (and at every mark, and on close).
FLUSH_BYTES = 64 << 10


class TraceWriter:
    """Appends records to a new trace file. Thread-safe; a failing write (a full disk) stops the recording,
    counts what is lost, and is reported by :meth:`close` (``failure``), never by the device access it followed."""

    def __init__(self, path: str | os.PathLike[str], header: dict[str, Any], *, force: bool = False,
                 flush_each: bool = False, keep_write: int = tracefile.KEEP_WRITE,
                 keep_read: int = tracefile.KEEP_READ) -> None:
        if not (0 <= keep_write <= tracefile.MAX_KEEP and 0 <= keep_read <= tracefile.MAX_KEEP):
            raise Refused(f"recorded bytes per transfer must be 0..{tracefile.MAX_KEEP}")
        self.path = check_output_path(path, force=force, what="recording", force_hint=None)
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
        flags |= os.O_TRUNC if force else os.O_EXCL
        try:
            self._fd = os.open(self.path, flags, 0o644)
        except FileExistsError:
            raise Refused(f"the recording {self.path} appeared meanwhile; refusing to overwrite it") from None
        except OSError as e:
            raise Refused(f"cannot create the recording {self.path}: {(e.strerror or str(e)).lower()}") from None
        st = os.fstat(self._fd)
        if not stat.S_ISREG(st.st_mode):  # never write into something that is not a plain file
            os.close(self._fd)
            raise Refused(f"refusing to record into {self.path}: not a regular file")
        self._made = (st.st_dev, st.st_ino)  # the file this writer wrote: the only one discard() removes
        self.keep_write, self.keep_read = keep_write, keep_read
        self.flush_each = flush_each
        self._seq = itertools.count()  # next() on it is atomic under the GIL: no lock on the hot path
        self.records = 0
        self.lost = 0
        self.failure: str | None = None
        # appended without a lock (deque.append is atomic under the GIL); drained by count under the lock, so a
        # record another thread appends while a flush runs waits for the next one instead of being lost
        self._buf: collections.deque[bytes] = collections.deque()
        self._size = 0  # bytes queued, approximate when threads add at once: only a threshold
        self._lock = threading.Lock()
        self.header = {**header, "keep_write_bytes": keep_write, "keep_read_bytes": keep_read,
                       "clock": {"wall": "ns since the epoch, after the operation completed",
                                 "virtual": "ns of the emulated board's clock when it was issued, or absent"}}
        self._write(tracefile.file_start(self.header))

    def _write(self, blob: bytes) -> None:
        view = memoryview(blob)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
        except OSError as e:
            self.failure = (e.strerror or str(e)).lower()
            if e.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO):
                self.failure += f" (errno {e.errno})"

    def add(self, blob: bytes) -> None:
        """Queue one encoded record (:func:`tinyhw.formats.tracefile.packet`)."""
        if self.failure is not None:
            self.lost += 1
            return
        self._buf.append(blob)
        self._size += len(blob)
        if self._size >= FLUSH_BYTES or self.flush_each:
            self.flush()

    def next_seq(self) -> int:
        """The sequence number of the next record (one counter for the whole file)."""
        return next(self._seq)

    def _flush_locked(self) -> None:
        buf = self._buf
        n = len(buf)
        if n and self._fd >= 0:
            pop = buf.popleft
            blob = b"".join([pop() for _ in range(n)])
            self._size = 0
            self._write(blob)
            if self.failure is None:
                self.records += n
            else:
                self.lost += n

    def flush(self) -> None:
        """Write what is queued."""
        with self._lock:
            self._flush_locked()

    def close(self) -> None:
        """Write what is queued and close the file. Safe to call twice."""
        with self._lock:
            if self._fd < 0:
                return
            self._flush_locked()
            if self.flush_each:  # the mode for sessions that may take the machine down: on the disk, not only cached
                with contextlib.suppress(OSError):
                    os.fsync(self._fd)
            os.close(self._fd)
            self._fd = -1

    def discard(self) -> bool:
        """Close, then remove the file this writer created (for a command that was refused: nothing worth keeping,
        and the name free for the retry). A path that meanwhile names another file is left alone; returns whether
        the file was removed."""
        self.close()
        try:
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) != self._made:
                return False
            os.unlink(self.path)
        except OSError:
            return False
        return True


def _summary(value: Any) -> Any:
    """A JSON-ready form of an ability call's argument or result (bytes as their length and hash)."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {"length": len(data), "sha": tracefile.digest(data).hex()}
    if isinstance(value, (int, float, str, bool)) or value is None:
        return value
    if isinstance(value, (list, tuple)):
        return [_summary(v) for v in value[:64]]
    return type(value).__name__


_READ32, _R32_N, _R32_TOTAL = tracefile.fixed_packer(tracefile.READ32)
_WRITE32, _W32_N, _W32_TOTAL = tracefile.fixed_packer(tracefile.WRITE32)


def _vt(vt: int) -> int | None:
    return None if vt == tracefile.NO_VTIME else vt


class RecordingRegion(BarRegion):
    """A BAR region whose accesses are passed to the wrapped transport's region and recorded."""

    def __init__(self, info: BarInfo, inner: BarRegion, rec: RecordingTransport) -> None:
        super().__init__(info)
        self._inner = inner
        self._rec = rec
        self._bar = info.index

    def read32(self, offset: int) -> int:
        """The wrapped region's read32, recorded with its value."""
        rec = self._rec
        vt = int(rec.now() * 1e9) if rec.virtual else tracefile.NO_VTIME
        try:
            value = self._inner.read32(offset)
        except TinyhwError as e:
            rec.error(tracefile.READ32, e)
            raise
        if rec.pending:
            rec.settle()
        wall = time.time_ns()
        rec.add(_READ32.pack(tracefile.EPB, _R32_TOTAL, 0, wall >> 32, wall & 0xFFFFFFFF, _R32_N, _R32_N,
                             tracefile.READ32, self._bar, 4, next(rec.seq) & 0xFFFFFFFF, vt, offset, value, _R32_TOTAL))
        return value

    def write32(self, offset: int, value: int) -> None:
        """The wrapped region's write32, recorded (after a pending batch, in its place)."""
        rec = self._rec
        vt = int(rec.now() * 1e9) if rec.virtual else tracefile.NO_VTIME
        try:
            self._inner.write32(offset, value)
        except TinyhwError as e:
            rec.error(tracefile.WRITE32, e)
            raise
        if rec.pending:
            rec.pending.append((tracefile.WRITE32, self._bar, 4, (offset, value & 0xFFFFFFFF), _vt(vt)))
            return
        wall = time.time_ns()
        rec.add(_WRITE32.pack(tracefile.EPB, _W32_TOTAL, 0, wall >> 32, wall & 0xFFFFFFFF, _W32_N, _W32_N,
                              tracefile.WRITE32, self._bar, 4, next(rec.seq) & 0xFFFFFFFF, vt, offset,
                              value & 0xFFFFFFFF, _W32_TOTAL))

    def read(self, offset: int, length: int) -> bytes:
        """The wrapped region's bulk read, recorded (size, hash, the first bytes)."""
        data, vt = self._rec.through(tracefile.BULK_READ, self._inner.read, offset, length)
        self._rec.bulk(tracefile.BULK_READ, self._bar, offset, data, vt)
        return data

    def write(self, offset: int, data: bytes) -> None:
        """The wrapped region's bulk write, recorded (size, hash, the first bytes)."""
        rec = self._rec
        vt = rec.vnow()
        try:
            self._inner.write(offset, data)
        except TinyhwError as e:
            rec.error(tracefile.BULK_WRITE, e)
            raise
        if rec.pending:
            rec.pending.append((tracefile.BULK_WRITE, self._bar, offset, bytes(data), vt))
        else:
            rec.bulk(tracefile.BULK_WRITE, self._bar, offset, data, vt)


class RecordingTransport(Transport):
    """The wrapped transport's seam, every call recorded (module docstring). Its counters and clock are the
    wrapped transport's own objects, so ``--stats`` and waits are unchanged."""

    def __init__(self, inner: Transport, writer: TraceWriter) -> None:
        super().__init__(inner.clock)
        self.inner = inner
        self.writer = writer
        self.counters = inner.counters
        self.name = inner.name
        self.emulated = inner.emulated
        self.pending: list[Any] = []  # batched operations (and writes queued after them) not yet known to have run
        self.virtual = bool(getattr(inner.clock, "virtual", False))
        self.now = inner.clock.now  # the hot path's shortcuts: the clock, the writer's queue and counter
        self.add = writer.add
        self.seq = writer._seq
        self._stop_marks = progress.listen(self.mark)
        if has(inner, abilities.TransferTap):
            inner.tap_transfers(_Tap(self))

    # -- encoding -------------------------------------------------------------------------------------------------
    def vnow(self) -> int | None:
        """The emulated board's virtual time in ns (taken when an operation is issued), or None on hardware."""
        return int(self.now() * 1e9) if self.virtual else None

    def emit(self, op: int, bar: int | None, width: int, body: tuple[Any, ...], tail: bytes = b"",
             vt: int | None = None) -> None:
        """Append one record: ``vt`` the virtual time when the operation was issued (default: now), and the wall
        time now (after it completed)."""
        w = self.writer
        if vt is None:
            vt = self.vnow()
        w.add(tracefile.packet(op, w.next_seq(), time.time_ns(), vt, bar, width, body, tail))

    def bulk(self, op: int, bar: int, offset: int, data: bytes, vt: int | None = None) -> None:
        """A bulk BAR transfer: its size, hash and the first bytes up to the writer's limit (the hash is left zero
        when the bytes are kept whole: the reader computes it)."""
        keep = self.writer.keep_read if op == tracefile.BULK_READ else self.writer.keep_write
        data = bytes(data)
        sha = tracefile.NO_SHA if len(data) <= keep else tracefile.digest(data)
        self.emit(op, bar, 0, (offset, len(data), sha), data[:keep], vt)

    def error(self, op: int, e: BaseException) -> None:
        """The access of kind ``op`` raised ``e``: recorded, then the error goes on to the caller."""
        if self.pending:
            self._settle_quietly()
        self.emit(tracefile.ERROR, None, 0, (op,), str(e).encode()[:tracefile.TEXT_LIMIT])

    def mark(self, text: str, phase: str = "point") -> None:
        """A MARK record (a step of the command); the records so far are written out with it."""
        code = tracefile.MARK_PHASES.index(phase) if phase in tracefile.MARK_PHASES else 0
        self.emit(tracefile.MARK, None, 0, (code,), text.encode()[:tracefile.TEXT_LIMIT])
        self.writer.flush()

    # -- batched operations -----------------------------------------------------------------------------------------
    def settle(self) -> None:
        """Everything submitted before has run (a read returned, or a ticket was collected): record it, in order."""
        pending, self.pending = self.pending, []
        for item in pending:
            if isinstance(item, _Submitted):
                try:
                    results = item.ticket.get()
                except TinyhwError as e:
                    self.emit(tracefile.ERROR, None, 0, (0,), f"batch of {len(item.ops)} operations: {e}".encode())
                    continue
                self._record_ops(item.ops, results)
            else:
                op, bar, a, b, vt = item
                if op == tracefile.BULK_WRITE:
                    self.bulk(op, bar, a, b, vt)
                else:
                    self.emit(op, bar, a, b, b"", vt)

    def _settle_quietly(self) -> None:
        with contextlib.suppress(TinyhwError):
            self.settle()

    def _record_ops(self, ops: Sequence[Op], results: list[Any]) -> None:
        it = iter(results)
        for op in ops:
            if isinstance(op, W32):
                self.emit(tracefile.WRITE32, op.bar, 4, (op.offset, op.value & 0xFFFFFFFF))
            elif isinstance(op, R32):
                self.emit(tracefile.READ32, op.bar, 4, (op.offset, next(it)))
            elif isinstance(op, W):
                self.bulk(tracefile.BULK_WRITE, op.bar, op.offset, op.data)
            elif isinstance(op, R):
                self.bulk(tracefile.BULK_READ, op.bar, op.offset, next(it))
            elif isinstance(op, Poll32):
                self.emit(tracefile.POLL, op.bar, 4, (op.offset, op.mask, op.expect, next(it), int(op.timeout * 1e6),
                                               int(op.interval * 1e6)))
            elif isinstance(op, Sleep):
                self.emit(tracefile.SLEEP, None, 0, (int(op.seconds * 1e9),))
            elif isinstance(op, CfgR):
                self.emit(tracefile.CFG_READ, None, op.size, (op.offset, next(it)))
            elif isinstance(op, CfgW):
                self.emit(tracefile.CFG_WRITE, None, op.size, (op.offset, op.value))

    # -- the seam -----------------------------------------------------------------------------------------------------
    def through(self, op: int, fn: Callable[..., Any], *args: Any) -> tuple[Any, int | None]:
        """``fn(*args)`` (a reading operation of kind ``op`` of the wrapped transport) and the virtual time it was
        issued at; an error is recorded and raised; what a batch queued before it is recorded first."""
        vt = self.vnow()
        try:
            result = fn(*args)
        except TinyhwError as e:
            self.error(op, e)
            raise
        if self.pending:
            self.settle()
        return result, vt

    def config_read(self, offset: int, size: int = 4) -> int:
        """The wrapped transport's config read, recorded with its value."""
        value, vt = self.through(tracefile.CFG_READ, self.inner.config_read, offset, size)
        self.emit(tracefile.CFG_READ, None, size, (offset, value), b"", vt)
        return value

    def config_write(self, offset: int, size: int, value: int) -> None:
        """The wrapped transport's config write, recorded."""
        vt = self.vnow()
        try:
            self.inner.config_write(offset, size, value)
        except TinyhwError as e:
            self.error(tracefile.CFG_WRITE, e)
            raise
        masked = value & ((1 << (8 * size)) - 1)
        if self.pending:
            self.pending.append((tracefile.CFG_WRITE, None, size, (offset, masked), vt))
        else:
            self.emit(tracefile.CFG_WRITE, None, size, (offset, masked), b"", vt)

    def config_bytes(self, offset: int = 0, length: int = 256) -> bytes:
        """The wrapped transport's config block read, recorded as one cfg_read per dword."""
        data, vt = self.through(tracefile.CFG_READ, self.inner.config_bytes, offset, length)
        for i in range(0, len(data) - 3, 4):
            self.emit(tracefile.CFG_READ, None, 4, (offset + i, int.from_bytes(data[i:i + 4], "little")), b"", vt)
        return data

    def bars(self) -> list[BarInfo]:
        """The wrapped transport's BARs."""
        return self.inner.bars()

    def _make_region(self, info: BarInfo) -> BarRegion:
        return RecordingRegion(info, self.inner.bar(info.index), self)

    def identity(self) -> Identity:
        """The wrapped transport's identity."""
        return self.inner.identity()

    def info(self) -> TransportInfo:
        """The wrapped transport's info."""
        return self.inner.info()

    def stats(self) -> dict[str, Any]:
        """The wrapped transport's counters."""
        return self.inner.stats()

    def close(self) -> None:
        """Record what is still pending, close the file, then the wrapped transport. Safe to call twice."""
        try:
            if self.pending:
                self._settle_quietly()
            self._stop_marks()
            if has(self.inner, abilities.TransferTap):
                self.inner.tap_transfers(None)
            if self.writer.lost:
                self.writer.add(tracefile.packet(tracefile.DROPPED, self.writer.next_seq(), time.time_ns(), None,
                                                 None, 0, (self.writer.lost,)))
            self.writer.close()
        finally:
            self.inner.close()


class _Tap:
    """The TransferTap the recording installs: each USB vendor request and bulk transfer as one record, with wall
    time only (the register access or bulk transfer it is part of, recorded after it, carries the virtual time)."""

    def __init__(self, rec: RecordingTransport) -> None:
        self.w = rec.writer
        self.add = rec.add
        self.seq = rec.seq

    def control(self, request_type: int, request: int, value: int, index: int, data: bytes) -> None:
        """One vendor request (``data``: its data stage)."""
        keep = self.w.keep_read if request_type & 0x80 else self.w.keep_write
        n = len(data)
        sha = tracefile.NO_SHA if n <= keep else tracefile.digest(data)
        self.add(tracefile.packet(tracefile.USB_CONTROL, next(self.seq), time.time_ns(), None, None, 0,
                           (request_type, request, value, index, n, sha), data[:keep] if n > keep else data))

    def bulk(self, endpoint: int, length: int, data: bytes) -> None:
        """One bulk transfer of ``length`` bytes (``data``: what was moved, or empty when not at hand)."""
        keep = self.w.keep_read if endpoint & 0x80 else self.w.keep_write
        sha = tracefile.NO_SHA if len(data) <= keep else tracefile.digest(data)
        self.add(tracefile.packet(tracefile.USB_BULK, next(self.seq), time.time_ns(), None, None, 0,
                                  (endpoint, length, sha), bytes(data[:keep])))


class _Submitted:
    """A batch handed to the wrapped transport, recorded once it is known to have run."""

    def __init__(self, ops: Sequence[Op], ticket: Any) -> None:
        self.ops = list(ops)
        self.ticket = ticket


class _Ticket:
    def __init__(self, rec: RecordingTransport, item: _Submitted) -> None:
        self._rec, self._item = rec, item

    def get(self) -> list[Any]:
        """The wrapped ticket's results; what ran up to it is recorded."""
        try:
            results = self._item.ticket.get()
        finally:
            if self._rec.pending:
                self._rec._settle_quietly()
        return results


def _call(name: str) -> Callable[..., Any]:
    def forward(self: RecordingTransport, *args: Any, **kwargs: Any) -> Any:
        result, _ = self.through(tracefile.ABILITY, lambda: getattr(self.inner, name)(*args, **kwargs))
        doc = {"name": name, "args": [_summary(a) for a in args], "result": _summary(result)}
        self.emit(tracefile.ABILITY, None, 0, (0,), json.dumps(doc).encode()[:tracefile.TEXT_LIMIT])
        return result

    forward.__name__ = name
    forward.__doc__ = f"The wrapped transport's ``{name}``, recorded as an ability call."
    return forward


def _submit(self: RecordingTransport, ops: Sequence[Op]) -> _Ticket:
    """The wrapped transport's ``submit``; the operations are recorded once they have run."""
    batching = require(self.inner, abilities.Batching, "send batches")  # what _class_for saw it has
    item = _Submitted(ops, batching.submit(ops))
    self.pending.append(item)
    return _Ticket(self, item)


_CLASSES: dict[frozenset[str], type[RecordingTransport]] = {}


def forwarded() -> dict[type, tuple[str, ...]]:
    """The optional abilities a recording passes on, with the methods each consists of, read from the one list of
    them (:data:`tinyhw.transport.abilities.TRANSPORT_ABILITIES`) when a recording starts, so an ability added there
    is passed on with no edit here; Batching is recorded by operation (:func:`_submit`) and TransferTap is the
    recording's own use of the wrapped transport (its taps become USB records), not passed on."""
    return {ability: abilities.ability_methods(ability) for ability in abilities.TRANSPORT_ABILITIES
            if ability not in (abilities.Batching, abilities.TransferTap)}


def _class_for(inner: Transport) -> type[RecordingTransport]:
    """A RecordingTransport subclass with exactly the abilities ``inner`` has (so ``require`` answers the same)."""
    methods = {m for ability, names in forwarded().items() if has(inner, ability) for m in names}
    if has(inner, abilities.Batching):
        methods.add("submit")
    key = frozenset(methods)
    if key not in _CLASSES:
        ns: dict[str, Any] = {m: _call(m) for m in methods if m != "submit"}
        if "submit" in methods:
            ns["submit"] = _submit
        _CLASSES[key] = type("RecordingTransport", (RecordingTransport,), ns)
    return _CLASSES[key]


def recording(inner: Transport, path: str | os.PathLike[str], *, command: Sequence[str] | None = None,
              device: str = "", force: bool = False, flush_each: bool = False, keep_write: int = tracefile.KEEP_WRITE,
              keep_read: int = tracefile.KEEP_READ) -> RecordingTransport:
    """Wrap the open transport ``inner`` so that every operation is appended to a new trace file at ``path``
    (refused, exit 2, when it exists unless ``force``, or names a device node, FIFO or directory; a symlink is
    written through, never replaced). The header holds the device identity, the BAR map, the tinyhw version and
    ``command`` (default: this process's command line). Close the returned transport to finish the file."""
    from tinyhw import __version__

    ident = inner.identity()
    header = {
        "tinyhw_version": __version__,
        "command": list(command if command is not None else sys.argv),
        "device": device,
        "transport": inner.name,
        "emulated": bool(inner.emulated),
        "identity": {k: getattr(ident, k) for k in ("vendor_id", "device_id", "revision", "class_code",
                                                    "subsystem_vendor_id", "subsystem_id", "location")},
        "bars": [b.as_dict() for b in inner.bars()],
        "started_wall_ns": time.time_ns(),
    }
    writer = TraceWriter(path, header, force=force, flush_each=flush_each, keep_write=keep_write,
                         keep_read=keep_read)
    return _class_for(inner)(inner, writer)


def discard_recording(transport: Transport) -> str | None:
    """Remove the trace file of the recording ``transport`` (closing it first) when it is still the file the
    recording created; returns its path when removed, None otherwise (no recording, or not removed)."""
    writer = getattr(transport, "writer", None)
    if isinstance(writer, TraceWriter) and writer.discard():
        return str(writer.path)
    return None


def finish_note(transport: Transport) -> str | None:
    """A line for the user when a recording lost records (its file could not be written), else None."""
    writer = getattr(transport, "writer", None)
    if isinstance(writer, TraceWriter) and writer.failure is not None:
        return (f"the recording {writer.path} stopped after {writer.records} records ({writer.failure}); "
                f"{writer.lost} later records were not written")
    return None


__all__ = ["FLUSH_BYTES", "RecordingTransport", "TraceWriter", "discard_recording", "finish_note", "recording"]
