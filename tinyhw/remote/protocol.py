"""The tinyhw remote protocol, version 2: handshake, authenticated frames, batched operations, limits.

Written from specs/pci-vfio-remote.md §12.2 (what a safe design needs) and §11.10 (what
tinygrad's protocol lacks: a version, a magic, request ids, length checks); version 2 makes
the authentication mutual and authenticates every frame (:mod:`tinyhw.remote.session`). All integers
little-endian.

Handshake (before anything else; nothing else is answered until it succeeds):

1. server -> client ``HELLO``: magic ``b"TINYHWR\\0"``, u16 version, u8 auth (0 none: a Unix socket with
   the peer uid checked, or stdio under ssh; 1 HMAC-SHA256 with the shared key), u8 0, 32-byte nonce.
2. client -> server: magic, u16 version, u16 0, 32-byte client nonce, 32-byte client proof (zeros with
   auth 0). The client first checks that the auth mode is the one its device string implies
   (``remote:HOST:PORT`` needs 1, ``remote:unix``/``remote:ssh://`` 0), else it stops here.
3. server -> client: the first authenticated frame (a reply with request id 0): on success a JSON
   document with the server's proof (``server_proof``, hex) and the device's description (identity,
   BARs, transport info, clock kind), which the client checks before it sends anything else; on failure
   an error and the connection closes (an error here may be unauthenticated: it can only stop the client).

Frames (each sealed as :mod:`tinyhw.remote.session` says: header, header tag, payload, payload tag):
request ``<B op, B flags, H id, I length>``; reply ``<B status, B 0, H id, I length, d server clock>``.
Status 0 ok, 1 error (payload: JSON ``{"type", "message", "hint", "op"}``). Lengths are checked against
:data:`MAX_PAYLOAD` (after the header's tag, before the payload is read).

Operations (op ``BATCH``): the :mod:`tinyhw.transport.batch` list, each item a kind byte plus fixed
fields (:data:`_FIXED`), W carries its data, Poll32 two u16-prefixed UTF-8 strings. The reply payload is
the results concatenated: 4 bytes per R32/Poll32/CfgR, ``length`` bytes per R.

Optional abilities of the served transport, added to version 2 compatibly: the description lists them under
``abilities`` (absent from older servers, ignored by older clients), and each has its own op, sent only when listed.
``OP_POWER`` (the bridge's PCIe power toggle, :class:`~tinyhw.transport.abilities.PciePower`): payload
:data:`POWER` (action 0 off, 1 on, 2 status; the wait in seconds), reply the link state as JSON (``ltssm``,
``state``, ``up``, ``powered``).
``OP_TIMED_BATCH`` (ability ``batch_time``, listed by every server that has it): a batch like ``OP_BATCH`` whose
reply payload starts with :data:`BATCH_TIME`, the seconds the served transport's clock advanced while the server ran
it (wall time on hardware, measured there; the board's virtual clock on an emulated board, modelled), then the
results. A client sends it only while the results and the prefix fit :data:`MAX_PAYLOAD`, else a plain batch.
Wide offsets (ability ``offsets64``): BAR accesses at offsets of 4 GiB and more (a resized VRAM BAR) travel as the
kinds 9-13, the W32, W, R32, R and Poll32 fields with a u64 offset (:data:`_WIDE`); a client uses them only when
the server lists the ability, and refuses such an access otherwise.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import Any

from tinyhw import errors
from tinyhw.errors import OperationFailed
from tinyhw.remote.channel import Channel
from tinyhw.remote.session import TAG, Direction
from tinyhw.transport.batch import R32, W32, CfgR, CfgW, Op, Poll32, R, Sleep, W

VERSION = 2
MAGIC = b"TINYHWR\0"
HELLO = struct.Struct("<8sHBB32s")
CLIENT_HELLO = struct.Struct("<8sHH32s32s")
REQ = struct.Struct("<BBHI")
REPLY = struct.Struct("<BBHId")
AUTH_NONE, AUTH_HMAC = 0, 1
OP_BATCH, OP_PING, OP_STATS, OP_BYE, OP_POWER, OP_TIMED_BATCH = 1, 2, 3, 4, 5, 6
OPS = {OP_BATCH: "batch", OP_PING: "ping", OP_STATS: "stats", OP_BYE: "bye", OP_POWER: "power",
       OP_TIMED_BATCH: "timed batch"}
#: what an OP_TIMED_BATCH reply starts with: the seconds the served device's clock advanced while the batch ran
BATCH_TIME = struct.Struct("<d")
#: OP_POWER's payload (action, wait in seconds) and actions; the reply is the link state's JSON document
POWER = struct.Struct("<Bd")
POWER_OFF, POWER_ON, POWER_STATUS = 0, 1, 2
POWER_ACTIONS = {POWER_OFF: "off", POWER_ON: "on", POWER_STATUS: "status"}
#: the optional abilities a server may list in its description's ``abilities`` (each carried by its own op)
ABILITY_PCIE_POWER = "pcie_power"
ABILITY_BATCH_TIME = "batch_time"
ABILITY_WIDE_OFFSETS = "offsets64"

#: Largest request or reply payload (bytes), checked before it is read.
MAX_PAYLOAD = 16 << 20
#: Most operations in one batch, and most bytes its reads may return (an allocation cap).
MAX_OPS = 1 << 16
MAX_READ_BYTES = 16 << 20
#: Shortest acceptable secret (bytes).
MIN_SECRET = 32

_KIND = {W32: 1, W: 2, R32: 3, R: 4, Sleep: 5, Poll32: 6, CfgR: 7, CfgW: 8}
_FIXED = {
    1: struct.Struct("<BII"),      # W32 bar, offset, value
    2: struct.Struct("<BII"),      # W bar, offset, length (+ data)
    3: struct.Struct("<BI"),       # R32 bar, offset
    4: struct.Struct("<BII"),      # R bar, offset, length
    5: struct.Struct("<d"),        # Sleep seconds
    6: struct.Struct("<BIIIdd"),   # Poll32 bar, offset, mask, expect, timeout, interval (+ what, hint)
    7: struct.Struct("<HB"),       # CfgR offset, size
    8: struct.Struct("<HBI"),      # CfgW offset, size, value
    9: struct.Struct("<BQI"),      # W32 with a u64 offset (bar, offset, value)
    10: struct.Struct("<BQI"),     # W with a u64 offset (+ data)
    11: struct.Struct("<BQ"),      # R32 with a u64 offset
    12: struct.Struct("<BQI"),     # R with a u64 offset
    13: struct.Struct("<BQIIdd"),  # Poll32 with a u64 offset (+ what, hint)
}
#: the wide kinds (an offset of 4 GiB or more) and the kind each widens
_WIDE = {9: 1, 10: 2, 11: 3, 12: 4, 13: 6}
_WIDEN = {base: wide for wide, base in _WIDE.items()}
#: the operations on a BAR offset: those with a wide kind
_BAR_OPS = (W32, W, R32, R, Poll32)
_U16 = struct.Struct("<H")
_BACKREF = 0xFFFF


class ProtocolError(OperationFailed):
    """The peer broke the protocol (bad magic, version, frame or length)."""


class ServerRefused(errors.Refused):
    """A server that had not proved its key refused the connection: its words are shown (escaped), its exit code is
    not taken: exit 2, refused before anything was touched (a wrong key file, or not the user's server)."""


def recv_frame(ch: Channel, d: Direction, head: struct.Struct, timeout: float | None, payload_timeout: float,
               peer: str) -> tuple[tuple[Any, ...], bytes]:
    """One sealed frame: its header fields and payload, both checked against their tags before use."""
    raw = ch.recv_exact(head.size + TAG, timeout)
    header = raw[:head.size]
    d.check_header(header, raw[head.size:], peer)
    fields = head.unpack(header)
    length = fields[3]
    if length > MAX_PAYLOAD:  # an authentic header: the peer's own bug; the stream cannot be resynchronised
        raise ProtocolError(f"{peer} sent a frame of {length} bytes, over the limit of {MAX_PAYLOAD}")
    payload = b""
    if length:
        payload = ch.recv_exact(length, payload_timeout)
        d.check_payload(header, payload, ch.recv_exact(TAG, payload_timeout), peer)
    d.advance()
    return fields, payload


# -- operations ---------------------------------------------------------------------------------------------------
def encode_ops(ops: Sequence[Op], *, wide: bool = False) -> bytes:
    """The wire form of a batch: one kind byte and fixed fields per operation; a poll's repeated texts refer back to
    their first use. A BAR offset of 4 GiB or more takes its wide kind where ``wide`` (the server lists
    ``offsets64``); else it is refused."""
    out = bytearray()
    texts: dict[str, int] = {}  # a poll's texts repeat: later uses refer back to the first (0xffff, index)
    for op in ops:
        kind = _KIND[type(op)]
        if isinstance(op, _BAR_OPS) and op.offset > 0xFFFFFFFF:
            if not wide:
                raise errors.Refused(f"bar{op.bar} offset 0x{op.offset:x} is past 4 GiB, which this server's "
                                     "protocol cannot carry", hint="install the same tinyhw version on both machines")
            kind = _WIDEN[kind]
        out.append(kind)
        if isinstance(op, W):
            out += _FIXED[kind].pack(op.bar, op.offset, len(op.data)) + bytes(op.data)
        elif isinstance(op, Poll32):
            out += _FIXED[kind].pack(*op[:6])
            for text in (op.what, op.hint):
                if text in texts:
                    out += _U16.pack(_BACKREF) + _U16.pack(texts[text])
                    continue
                if len(texts) < _BACKREF:
                    texts[text] = len(texts)
                raw = text.encode()[:4096]
                out += _U16.pack(len(raw)) + raw
        else:
            out += _FIXED[kind].pack(*op)
    return bytes(out)


def decode_ops(payload: bytes) -> list[Op]:
    """Parse a batch; :class:`ProtocolError` on anything malformed, over :data:`MAX_OPS` or reading too much."""
    ops: list[Op] = []
    texts: list[str] = []
    pos, n, reads = 0, len(payload), 0
    try:
        while pos < n:
            kind = payload[pos]
            pos += 1
            fixed = _FIXED.get(kind)
            if fixed is None:
                raise ProtocolError(f"unknown operation kind {kind} at byte {pos - 1}")
            fields = fixed.unpack_from(payload, pos)
            pos += fixed.size
            kind = _WIDE.get(kind, kind)
            op: Op
            if kind == 2:
                length = fields[2]
                if pos + length > n:
                    raise ProtocolError("a write's data runs past the end of the batch")
                op = W(fields[0], fields[1], bytes(payload[pos:pos + length]))
                pos += length
            elif kind == 6:
                pair: list[str] = []
                for _ in range(2):
                    (ln,) = _U16.unpack_from(payload, pos)
                    pos += 2
                    if ln == _BACKREF:
                        (index,) = _U16.unpack_from(payload, pos)
                        pos += 2
                        if index >= len(texts):
                            raise ProtocolError(f"a poll refers to text {index} of {len(texts)}")
                        pair.append(texts[index])
                        continue
                    if ln > 4096 or pos + ln > n:
                        raise ProtocolError("a poll's text is too long or runs past the end of the batch")
                    text = bytes(payload[pos:pos + ln]).decode("utf-8", "replace")
                    if len(texts) < _BACKREF:
                        texts.append(text)
                    pair.append(text)
                    pos += ln
                bar, offset, mask, expect, timeout, interval = fields
                op = Poll32(bar, offset, mask, expect, timeout, interval, pair[0], pair[1])
            else:
                op = {1: W32, 3: R32, 4: R, 5: Sleep, 7: CfgR, 8: CfgW}[kind](*fields)
            if isinstance(op, R):
                reads += op.length
            elif isinstance(op, (R32, Poll32, CfgR)):
                reads += 4
            ops.append(op)
            if len(ops) > MAX_OPS or reads > MAX_READ_BYTES:
                raise ProtocolError(f"a batch may hold at most {MAX_OPS} operations reading {MAX_READ_BYTES} bytes")
    except struct.error:
        raise ProtocolError("a batch operation is truncated") from None
    return ops


def encode_results(ops: Sequence[Op], results: Sequence[Any]) -> bytes:
    """The wire form of a batch's results: each int as 4 little-endian bytes, each R's bytes as they are (``ops`` gives
    the order)."""
    out = bytearray()
    for r in results:
        out += r if isinstance(r, (bytes, bytearray)) else (r & 0xFFFFFFFF).to_bytes(4, "little")
    return bytes(out)


def result_size(ops: Sequence[Op]) -> int:
    """How many bytes the results of ``ops`` take on the wire (4 per R32/Poll32/CfgR, ``length`` per R)."""
    return sum(op.length if isinstance(op, R) else 4 for op in ops if isinstance(op, (R, R32, Poll32, CfgR)))


def decode_results(ops: Sequence[Op], payload: bytes) -> list[Any]:
    """The results of ``ops`` from a reply payload (ints and bytes, in order); raises ProtocolError when its size does
    not match."""
    if len(payload) != result_size(ops):
        raise ProtocolError(f"the server answered {len(payload)} bytes where {result_size(ops)} were expected")
    out: list[Any] = []
    pos = 0
    for op in ops:
        if isinstance(op, R):
            out.append(payload[pos:pos + op.length])
            pos += op.length
        elif isinstance(op, (R32, Poll32, CfgR)):
            out.append(int.from_bytes(payload[pos:pos + 4], "little"))
            pos += 4
    return out


# -- errors -------------------------------------------------------------------------------------------------------
def encode_error(e: BaseException, op: int | None = None) -> bytes:
    """A JSON error reply: a tinyhw error's type, message and hint (anything else as a bare "server error" naming only
    its type), and the index ``op`` of the failed operation."""
    if isinstance(e, errors.TinyhwError):
        doc = {"type": type(e).__name__, "message": e.message, "hint": e.hint, "op": op}
    else:
        doc = {"type": "OperationFailed", "message": f"server error: {type(e).__name__}", "hint": None, "op": op}
    return json.dumps(doc).encode()


#: the most characters of a peer's text (an error message or hint) a client prints
PEER_TEXT_LIMIT = 300


def printable(text: str, limit: int = PEER_TEXT_LIMIT) -> str:
    """Peer-supplied ``text`` safe for a terminal: every character that is not printable (ESC and other controls,
    line breaks, Unicode format characters such as bidi overrides) escaped as Python writes it (``\\x1b``,
    ``\\u202e``), a backslash doubled, and at most ``limit`` characters kept (the rest counted)."""
    out: list[str] = []
    for i, ch in enumerate(text):
        if i >= limit:
            out.append(f"... ({len(text) - limit} more characters)")
            break
        out.append("\\\\" if ch == "\\" else ch if ch.isprintable() else ascii(ch)[1:-1])
    return "".join(out)


def decode_error(payload: bytes, *, trusted: bool = True) -> errors.TinyhwError:
    """The server's error, prefixed so the user sees where, its text escaped and bounded (:func:`printable`).

    From a ``trusted`` server (one that proved its key, or one reached over a channel whose owner was checked) it
    keeps its tinyhw error class, so its exit code; an untrusted one (an error before the server proved anything)
    becomes :class:`ServerRefused`, whose exit code is the client's own.
    """
    try:
        doc = json.loads(payload.decode())
        cls = getattr(errors, str(doc.get("type")), None)
        message, hint = printable(str(doc.get("message"))), doc.get("hint")
    except (ValueError, UnicodeDecodeError, AttributeError, RecursionError):
        return ProtocolError("the server sent a malformed reply: an unreadable error")
    hint = printable(str(hint)) if hint else None
    if not trusted:
        return ServerRefused(f"remote: the server refused the connection before proving it holds the key; it said: "
                             f"{message}", hint=hint)
    if not (isinstance(cls, type) and issubclass(cls, errors.TinyhwError)) or cls is errors.CompletionError:
        cls = errors.TransportError if cls is errors.CompletionError else errors.OperationFailed
    return cls(f"remote: {message}", hint=hint)
