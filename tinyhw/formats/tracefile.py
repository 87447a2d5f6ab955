"""The tinyhw trace file: a recording of every transport operation of one session, in a pcapng container.

Format ``tinyhw-trace`` version 1 (docs/trace-format.md has the full schema). The container is pcapng
(IETF draft-ietf-opsawg-pcapng), chosen after specs/mmio-trace.md §7: every block carries its total length at
both ends, so a file cut by a crash, SIGKILL or a full disk reads up to its last complete block and a torn tail is
obvious; any pcapng reader (Wireshark, scapy) can open it. Layout:

* Section Header Block: ``shb_userappl`` = "tinyhw VERSION", ``opt_comment`` = ``"tinyhw-trace 1 "`` + one JSON
  object (the header: device identity, BAR map, tinyhw version, command line, clock semantics, byte limits).
* Interface Description Block: link type :data:`LINKTYPE` (LINKTYPE_USER0, 147, a private link type),
  ``if_name`` "tinyhw", ``if_tsresol`` 9 (nanoseconds).
* One Enhanced Packet Block per record; its timestamp is wall time (ns since the epoch) taken after the operation
  completed. The packet data is one record: :data:`HEAD` (op, bar, width, sequence number, the emulated board's
  virtual time in ns when the operation was issued, or :data:`NO_VTIME` on hardware and on USB wire records) and
  the op's own fields (:data:`BODY`), then a variable tail (bulk bytes, text).

Pure (layer 1 ``formats``): no transport; the reader takes bytes. Nothing here depends on a third-party package.
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import Refused

FORMAT = "tinyhw-trace"
VERSION = 1
#: LINKTYPE_USER0 (tcpdump.org link types): reserved for private use, so no real dissector claims the packets.
LINKTYPE = 147
SHB, IDB, EPB = 0x0A0D0D0A, 0x00000001, 0x00000006
BYTE_ORDER_MAGIC = 0x1A2B3C4D
OPT_END, OPT_COMMENT, SHB_USERAPPL, IF_NAME, IF_TSRESOL = 0, 1, 4, 2, 9
COMMENT_PREFIX = f"{FORMAT} {VERSION} "
#: Largest block the reader accepts (a bulk record keeps at most :data:`MAX_KEEP` bytes).
MAX_BLOCK = 64 << 20
MAX_KEEP = 16 << 20
#: Default byte limits of bulk transfers kept in a record (the hash and size are always kept): writes are kept
#: up to 1 MiB so that a replay can issue them again; reads, which a replay checks by hash, up to 4 KiB.
KEEP_WRITE = 1 << 20
KEEP_READ = 4096
NO_VTIME = 0xFFFFFFFFFFFFFFFF
NO_BAR = 0xFF

# op codes
CFG_READ, CFG_WRITE, READ32, WRITE32, BULK_READ, BULK_WRITE, POLL, SLEEP = 1, 2, 3, 4, 5, 6, 7, 8
USB_CONTROL, USB_BULK, MARK, DROPPED, ERROR, ABILITY = 9, 10, 11, 12, 13, 14
OP_NAMES = {CFG_READ: "cfg_read", CFG_WRITE: "cfg_write", READ32: "read32", WRITE32: "write32",
            BULK_READ: "bulk_read", BULK_WRITE: "bulk_write", POLL: "poll", SLEEP: "sleep",
            USB_CONTROL: "usb_control", USB_BULK: "usb_bulk", MARK: "mark", DROPPED: "dropped", ERROR: "error",
            ABILITY: "ability"}
OP_CODES = {v: k for k, v in OP_NAMES.items()}
READS = (CFG_READ, READ32, BULK_READ, POLL)
WRITES = (CFG_WRITE, WRITE32, BULK_WRITE)

#: op, bar (NO_BAR: none), width (bytes of a register access; 0 otherwise), sequence number, virtual time (ns)
HEAD = struct.Struct("<BBHIQ")
#: the fixed fields after HEAD, per op; a tail (bytes or UTF-8 text) may follow where noted
BODY: dict[int, struct.Struct] = {
    CFG_READ: struct.Struct("<II"),       # offset, value
    CFG_WRITE: struct.Struct("<II"),      # offset, value
    READ32: struct.Struct("<QI"),         # offset in the bar, value
    WRITE32: struct.Struct("<QI"),        # offset in the bar, value
    BULK_READ: struct.Struct("<QI16s"),   # offset, length, sha-256 prefix; tail: the first bytes (kept)
    BULK_WRITE: struct.Struct("<QI16s"),  # offset, length, sha-256 prefix; tail: the first bytes (kept)
    POLL: struct.Struct("<QIIIII"),       # offset, mask, expect, value read last, timeout (us), interval (us)
    SLEEP: struct.Struct("<Q"),           # ns
    USB_CONTROL: struct.Struct("<BBHHI16s"),  # bmRequestType, bRequest, wValue, wIndex, length, sha; tail: data
    USB_BULK: struct.Struct("<BI16s"),    # endpoint (bit 7: IN), length, sha; tail: data
    MARK: struct.Struct("<B"),            # phase (MARK_PHASES); tail: text
    DROPPED: struct.Struct("<Q"),         # records lost before this one
    ERROR: struct.Struct("<B"),           # op code of the access that raised; tail: the error's text
    ABILITY: struct.Struct("<B"),         # 0; tail: JSON {"name", "args"} of an optional ability's call
}
MARK_PHASES = ("point", "start", "done")
TEXT_LIMIT = 4096


class TraceError(Refused):
    """A trace file that cannot be read (exit 2): names the byte offset and what is wrong."""


NO_SHA = bytes(16)


def digest(data: bytes) -> bytes:
    """The 16-byte hash recorded for a bulk transfer: the first half of its SHA-256."""
    return hashlib.sha256(data).digest()[:16]


def _sha_of(stored: bytes, kept: bytes, length: int) -> bytes:
    """A record's hash: a writer may leave it zero when it kept the bytes whole (the reader computes it then)."""
    return digest(kept) if stored == NO_SHA and len(kept) == length else stored


@dataclass
class Record:
    """One decoded record. ``fields`` are the op's own fields (``offset``, ``value``, ``length``...);
    ``data`` the kept bytes (bulk) or None; ``text`` a mark's or an error's text; ``wall_ns`` the block's timestamp."""

    op: int
    seq: int
    wall_ns: int
    vtime_ns: int | None
    bar: int | None = None
    width: int = 0
    fields: dict[str, Any] = field(default_factory=dict)
    data: bytes | None = None
    text: str = ""
    index: int = 0  # position among the file's records, from 0
    at: int = 0  # byte offset of the block in the file

    @property
    def name(self) -> str:
        """The op's name (``read32``, ``mark`` ...)."""
        return OP_NAMES.get(self.op, f"op{self.op}")

    @property
    def is_read(self) -> bool:
        """True for an access whose result came from the device."""
        return self.op in READS or (self.op in (USB_CONTROL, USB_BULK) and self.fields.get("direction") == "in")

    def as_dict(self) -> dict[str, Any]:
        """The record as a JSON-ready dict (bytes as hex)."""
        doc: dict[str, Any] = {"index": self.index, "seq": self.seq, "op": self.name, "wall_ns": self.wall_ns,
                               "vtime_ns": self.vtime_ns}
        if self.bar is not None:
            doc["bar"] = self.bar
        if self.width:
            doc["width"] = self.width
        doc.update({k: (v.hex() if isinstance(v, bytes) else v) for k, v in self.fields.items()})
        if self.data is not None:
            doc["data_kept"] = len(self.data)
        if self.text:
            doc["text"] = self.text
        return doc


# -- writing ------------------------------------------------------------------------------------------------------
def _option(code: int, value: bytes) -> bytes:
    return struct.pack("<HH", code, len(value)) + value + b"\0" * (-len(value) % 4)


def _block(kind: int, body: bytes) -> bytes:
    total = 12 + len(body)
    return struct.pack("<II", kind, total) + body + struct.pack("<I", total)


def file_start(header: dict[str, Any]) -> bytes:
    """The Section Header Block (with the JSON header; its ``tinyhw_version`` names the writer) and the
    Interface Description Block."""
    doc = {"format": FORMAT, "version": VERSION, **header}
    opts = (_option(SHB_USERAPPL, f"tinyhw {header.get('tinyhw_version', '')}".encode())
            + _option(OPT_COMMENT, (COMMENT_PREFIX + json.dumps(doc, sort_keys=True)).encode())
            + _option(OPT_END, b""))
    shb = _block(SHB, struct.pack("<IHHq", BYTE_ORDER_MAGIC, 1, 0, -1) + opts)
    idb_opts = _option(IF_NAME, b"tinyhw") + _option(IF_TSRESOL, b"\x09") + _option(OPT_END, b"")
    idb = _block(IDB, struct.pack("<HHI", LINKTYPE, 0, 0) + idb_opts)
    return shb + idb


_EPB_HEAD = struct.Struct("<IIIIIII")  # type, total length, interface, ts high, ts low, captured, original


def _whole(op: int) -> tuple[struct.Struct, int, int]:
    """One struct for a whole block of a record without a tail: EPB head, record head, body, padding, trailer."""
    n = HEAD.size + BODY[op].size
    pad = -n % 4
    return struct.Struct("<IIIIIII" + HEAD.format[1:] + BODY[op].format[1:] + f"{pad}xI"), n, 32 + n + pad


_WHOLE = {op: _whole(op) for op in BODY}
#: Tails up to this many bytes are packed with the block in one struct (cached per op and tail length).
_TAIL_CACHED = 4096
_TAILED: dict[tuple[int, int], tuple[struct.Struct, int, int]] = {}


def _tailed(op: int, n_tail: int) -> tuple[struct.Struct, int, int]:
    n = HEAD.size + BODY[op].size + n_tail
    pad = -n % 4
    return (struct.Struct("<IIIIIII" + HEAD.format[1:] + BODY[op].format[1:] + f"{n_tail}s{pad}xI"), n,
            32 + n + pad)


def fixed_packer(op: int) -> tuple[struct.Struct, int, int]:
    """(struct, record size, block size) that packs a whole block of a tail-less ``op`` record from: EPB, block
    size, 0, wall ns high, wall ns low, record size, record size, op, bar, width, seq, vtime, the op's fields,
    block size. The recorder's hot path packs with it directly; :func:`packet` is the general form."""
    return _WHOLE[op]


def packet(op: int, seq: int, wall_ns: int, vtime_ns: int | None, bar: int | None, width: int,
           body: tuple[Any, ...], tail: bytes = b"") -> bytes:
    """One Enhanced Packet Block holding one record (the hot path of recording: one struct pack without a tail)."""
    bar = NO_BAR if bar is None else bar
    vtime = NO_VTIME if vtime_ns is None else vtime_ns
    if not tail:
        whole, n, total = _WHOLE[op]
        return whole.pack(EPB, total, 0, wall_ns >> 32, wall_ns & 0xFFFFFFFF, n, n, op, bar, width,
                          seq & 0xFFFFFFFF, vtime, *body, total)
    n_tail = len(tail)
    if n_tail <= _TAIL_CACHED:
        entry = _TAILED.get((op, n_tail))
        if entry is None:
            entry = _TAILED[(op, n_tail)] = _tailed(op, n_tail)
        whole, n, total = entry
        return whole.pack(EPB, total, 0, wall_ns >> 32, wall_ns & 0xFFFFFFFF, n, n, op, bar, width,
                          seq & 0xFFFFFFFF, vtime, *body, tail, total)
    payload = HEAD.pack(op, bar, width, seq & 0xFFFFFFFF, vtime) + BODY[op].pack(*body) + tail
    n = len(payload)
    pad = -n % 4
    total = 32 + n + pad
    return b"".join((_EPB_HEAD.pack(EPB, total, 0, wall_ns >> 32, wall_ns & 0xFFFFFFFF, n, n), payload,
                     b"\0" * pad, total.to_bytes(4, "little")))


# -- reading ------------------------------------------------------------------------------------------------------
@dataclass
class Trace:
    """A read trace file: the header, the records, and whether (and where) the file was cut short."""

    header: dict[str, Any]
    records: list[Record]
    truncated: str | None = None  # why reading stopped before the end of the file, or None
    dropped: int = 0  # records the writer said it lost

    def marks(self) -> list[Record]:
        """The MARK records, in order."""
        return [r for r in self.records if r.op == MARK]


def _options(buf: bytes, at: int) -> dict[int, list[bytes]]:
    out: dict[int, list[bytes]] = {}
    pos = 0
    while pos + 4 <= len(buf):
        code, length = struct.unpack_from("<HH", buf, pos)
        if code == OPT_END:
            break
        if pos + 4 + length > len(buf):
            raise TraceError(f"trace file: option {code} at byte {at + pos} runs past its block")
        out.setdefault(code, []).append(buf[pos + 4:pos + 4 + length])
        pos += 4 + length + (-length % 4)
    return out


def _header(body: bytes, at: int) -> dict[str, Any]:
    if len(body) < 16:
        raise TraceError("trace file: the section header block is too short")
    magic, major, _minor, _section = struct.unpack_from("<IHHq", body, 0)
    if magic != BYTE_ORDER_MAGIC:
        raise TraceError("trace file: not a little-endian pcapng section (byte-order magic "
                         f"0x{magic:08x})", hint="tinyhw writes little-endian pcapng files only")
    if major != 1:
        raise TraceError(f"trace file: pcapng major version {major} is not 1")
    for raw in _options(body[16:], at + 24).get(OPT_COMMENT, []):
        text = raw.decode("utf-8", "replace")
        if text.startswith(f"{FORMAT} "):
            version_text, _, doc = text[len(FORMAT) + 1:].partition(" ")
            if version_text != str(VERSION):
                raise TraceError(f"trace file: {FORMAT} version {version_text} is not supported (this tinyhw reads "
                                 f"version {VERSION})", hint="read it with the tinyhw that wrote it")
            try:
                header = json.loads(doc)
            except ValueError as e:
                raise TraceError(f"trace file: the header is not valid json ({e})") from None
            if not isinstance(header, dict):
                raise TraceError("trace file: the header is not a json object")
            return header
    raise TraceError("trace file: a pcapng file, but not a tinyhw trace (no tinyhw-trace header comment)",
                     hint="record one with tinyhw --record FILE, or import mmiotrace logs with tinyhw trace import")


def _text(tail: bytes, at: int) -> str:
    try:
        return tail[:TEXT_LIMIT].decode("utf-8")
    except UnicodeDecodeError:
        raise TraceError(f"trace file: record at byte {at} has text that is not utf-8") from None


def decode_record(payload: bytes, wall_ns: int, at: int = 0) -> Record:
    """One record from an Enhanced Packet Block's data; :class:`TraceError` naming ``at`` if it is malformed."""
    if len(payload) < HEAD.size:
        raise TraceError(f"trace file: record at byte {at} is {len(payload)} bytes, shorter than its head")
    op, bar, width, seq, vtime = HEAD.unpack_from(payload, 0)
    body = BODY.get(op)
    if body is None:
        raise TraceError(f"trace file: record at byte {at} has unknown op code {op}")
    if len(payload) < HEAD.size + body.size:
        raise TraceError(f"trace file: {OP_NAMES[op]} record at byte {at} is too short ({len(payload)} bytes)")
    values = body.unpack_from(payload, HEAD.size)
    tail = payload[HEAD.size + body.size:]
    rec = Record(op, seq, wall_ns, None if vtime == NO_VTIME else vtime, None if bar == NO_BAR else bar, width)
    f = rec.fields
    if op in (CFG_READ, CFG_WRITE, READ32, WRITE32):
        f["offset"], f["value"] = values
    elif op in (BULK_READ, BULK_WRITE):
        f["offset"], f["length"], sha = values
        rec.data = tail
        f["sha"] = _sha_of(sha, tail, f["length"])
        if len(tail) > f["length"]:
            raise TraceError(f"trace file: {OP_NAMES[op]} record at byte {at} keeps {len(tail)} bytes of a "
                             f"{f['length']}-byte transfer")
    elif op == POLL:
        f["offset"], f["mask"], f["expect"], f["value"], f["timeout_us"], f["interval_us"] = values
    elif op == SLEEP:
        f["ns"] = values[0]
    elif op == USB_CONTROL:  # wIndex is "w_index": "index" is the record's position (Record.as_dict)
        f["request_type"], f["request"], f["value"], f["w_index"], f["length"], sha = values
        f["direction"] = "in" if values[0] & 0x80 else "out"
        rec.data = tail
        f["sha"] = _sha_of(sha, tail, f["length"])
    elif op == USB_BULK:
        f["endpoint"], f["length"], sha = values
        f["direction"] = "in" if values[0] & 0x80 else "out"
        rec.data = tail
        f["sha"] = _sha_of(sha, tail, f["length"])
    elif op == MARK:
        if values[0] >= len(MARK_PHASES):
            raise TraceError(f"trace file: mark at byte {at} has unknown phase {values[0]}")
        f["phase"] = MARK_PHASES[values[0]]
        rec.text = _text(tail, at)
    elif op == DROPPED:
        f["count"] = values[0]
    elif op == ERROR:
        f["failed_op"] = OP_NAMES.get(values[0], f"op{values[0]}")
        rec.text = _text(tail, at)
    elif op == ABILITY:
        try:
            doc = json.loads(_text(tail, at))
        except ValueError:
            raise TraceError(f"trace file: ability record at byte {at} is not json") from None
        f["call"] = doc.get("name", "") if isinstance(doc, dict) else ""
        f["args"] = doc.get("args", []) if isinstance(doc, dict) else []
    return rec


def iter_blocks(data: bytes) -> Iterator[tuple[int, int, bytes]]:
    """(offset, block type, body) of each complete block; a torn last block ends the iteration with a
    :class:`TraceError` whose message says where (callers that tolerate a cut file catch it)."""
    pos, n = 0, len(data)
    while pos < n:
        if n - pos < 12:
            raise TraceError(f"trace file: cut inside the block at byte {pos} ({n - pos} bytes left)")
        kind, total = struct.unpack_from("<II", data, pos)
        if total < 12 or total % 4 or total > MAX_BLOCK:
            raise TraceError(f"trace file: block at byte {pos} has an impossible length {total}")
        if pos + total > n:
            raise TraceError(f"trace file: cut inside the block at byte {pos} ({total} bytes, {n - pos} left)")
        (trailer,) = struct.unpack_from("<I", data, pos + total - 4)
        if trailer != total:
            raise TraceError(f"trace file: block at byte {pos} ends with length {trailer}, not {total} (corrupt)")
        yield pos, kind, data[pos + 8:pos + total - 4]
        pos += total


class Reader:
    """A trace file's records one at a time, so a reader of any size holds one record, not all of them.

    ``header`` is parsed at once (refused when the file is not a tinyhw trace); :meth:`records` yields each
    record in order and, once exhausted, ``truncated``, ``dropped`` and ``count`` describe the file as
    :class:`Trace` does. The rules are :func:`read_trace`'s (which collects what this yields).
    """

    def __init__(self, data: bytes, *, strict: bool = False) -> None:
        if len(data) < 12 or struct.unpack_from("<I", data, 0)[0] != SHB:
            raise TraceError("trace file: not a pcapng file (no section header block at the start)",
                             hint="tinyhw trace files are written by tinyhw --record FILE")
        self.data = data
        self.strict = strict
        self.truncated: str | None = None  # why reading stopped before the end of the file, or None
        self.dropped = 0
        self.count = 0
        try:
            at, kind, body = next(iter_blocks(data))
        except TraceError as e:
            if strict or "cut inside" not in e.message:
                raise
            raise TraceError("trace file: no section header block") from None
        self.header = _header(body, at)

    def records(self) -> Iterator[Record]:
        """Every record, in order (reading again starts from the beginning)."""
        self.truncated, self.dropped, self.count = None, 0, 0
        linktype_ok = False
        first = True
        blocks = iter_blocks(self.data)
        while True:
            try:
                at, kind, body = next(blocks)
            except StopIteration:
                break
            except TraceError as e:
                if self.strict or "cut inside" not in e.message:
                    raise
                self.truncated = e.message
                break
            if kind == SHB:
                if not first:
                    raise TraceError(f"trace file: a second section starts at byte {at}; one session per file")
            elif kind == IDB:
                if len(body) < 8 or struct.unpack_from("<H", body, 0)[0] != LINKTYPE:
                    raise TraceError(f"trace file: interface at byte {at} is not link type {LINKTYPE} (tinyhw records)")
                linktype_ok = True
            elif kind == EPB:
                if not linktype_ok:
                    raise TraceError(f"trace file: packet at byte {at} before the header and interface blocks")
                if len(body) < 20:
                    raise TraceError(f"trace file: packet block at byte {at} is too short")
                _iface, hi, lo, captured, _orig = struct.unpack_from("<IIIII", body, 0)
                if captured > len(body) - 20:
                    raise TraceError(f"trace file: packet at byte {at} claims {captured} bytes, more than its block")
                rec = decode_record(body[20:20 + captured], (hi << 32) | lo, at)
                rec.index, rec.at = self.count, at
                if rec.op == DROPPED:
                    self.dropped += rec.fields["count"]
                self.count += 1
                yield rec
            # other block types (a pcapng reader may add e.g. statistics blocks) are skipped, as pcapng allows
            first = False


def read_trace(data: bytes, *, strict: bool = False) -> Trace:
    """Parse a trace file's bytes. A file cut short (a torn last block) is read up to its last complete record and
    ``truncated`` says where it stopped; with ``strict`` that, like any other damage, raises :class:`TraceError`.
    Damage before the last block (a corrupt length, an unknown op) always raises."""
    reader = Reader(data, strict=strict)
    records = list(reader.records())
    return Trace(reader.header, records, reader.truncated, reader.dropped)
