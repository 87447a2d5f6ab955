"""The ``remote:`` transport: the transport seam over the tinyhw remote protocol (issue 16 item 2).

Every access is queued; a read (or any result a caller asks for) sends everything queued as one
message and waits for one reply, so writes are posted and independent accesses travel together
(the :class:`~tinyhw.transport.batch.Batching` ability). ``round_trips`` counts messages that waited for
an answer. The clock is the server's device clock: waits are queued as ``Sleep`` operations and run
there, and every reply carries the server's time, so time-outs and ``modelled_s`` mean what they
mean on the device's own machine.
"""

from __future__ import annotations

import hmac
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from tinyhw.errors import TinyhwError
from tinyhw.remote import protocol as P
from tinyhw.remote.channel import Channel
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo
from tinyhw.transport.batch import R32, RESULT_OPS, W32, CfgR, CfgW, Op, Poll32, R, Sleep, W
from tinyhw.transport.clock import Clock

#: Queued bytes that force a send even before a result is needed.
FLUSH_BYTES = 1 << 20
HANDSHAKE_TIMEOUT = 20.0
#: Longest wait for a reply: the longest wait one batch may hold, plus margin.
REPLY_TIMEOUT = 300.0


class RemoteClock(Clock):
    """The server's clock as last reported, plus waits queued since (and wall time since, when it is wall time)."""

    def __init__(self, virtual: bool, transport: RemoteTransport) -> None:
        self.virtual = virtual
        self._t = transport
        self._base = 0.0
        self._at = time.monotonic()
        self._pending = 0.0

    def update(self, server_now: float) -> None:
        self._base, self._at, self._pending = server_now, time.monotonic(), 0.0

    def now(self) -> float:
        drift = 0.0 if self.virtual else time.monotonic() - self._at
        return self._base + drift + self._pending

    def sleep(self, seconds: float) -> None:
        if seconds > 0:
            self._t.submit([Sleep(float(seconds))])
            self._pending += seconds


class _Ticket:
    __slots__ = ("_t", "results", "error", "done")

    def __init__(self, transport: RemoteTransport) -> None:
        self._t = transport
        self.results: list[Any] = []
        self.error: TinyhwError | None = None
        self.done = False

    def get(self) -> list[Any]:
        if not self.done:
            self._t.flush()
        if self.error is not None:
            raise self.error
        return self.results


class RemoteTransport(Transport):
    """A device served by ``tinyhw serve remote``, reached over ``channel``."""

    name = "remote"

    def __init__(self, channel: Channel, *, where: str, secret_loader: Any = None) -> None:
        super().__init__()
        self.channel = channel
        self.where = where
        self._secret_loader = secret_loader
        self._ops: list[Op] = []
        self._tickets: list[tuple[_Ticket, int]] = []
        self._queued = 0
        self._seq = 0
        self._broken = False
        self._closed = False
        self.description: dict[str, Any] = {}

    # -- handshake ------------------------------------------------------------------------------------------------
    def connect(self) -> RemoteTransport:
        ch = self.channel
        magic, version, auth, _, snonce = P.HELLO.unpack(ch.recv_exact(P.HELLO.size, HANDSHAKE_TIMEOUT))
        if magic != P.MAGIC:
            raise P.ProtocolError(f"{self.where} is not a tinyhw remote server")
        if version != P.VERSION:
            raise P.ProtocolError(f"{self.where} speaks tinyhw remote protocol {version}, this client {P.VERSION}",
                                  hint="install the same tinyhw version on both machines")
        cnonce = os.urandom(32)
        secret = None
        if auth == P.AUTH_HMAC:
            if self._secret_loader is None:
                raise P.ProtocolError(f"{self.where} asks for a key this kind of connection does not use")
            secret = self._secret_loader()
        mac = P.client_mac(secret, snonce, cnonce) if secret is not None else bytes(32)
        ch.sendall(P.CLIENT_HELLO.pack(P.MAGIC, P.VERSION, 0, cnonce, mac))
        doc = json.loads(self._reply(0, HANDSHAKE_TIMEOUT)[1].decode())
        if secret is not None and not hmac.compare_digest(_unhex(doc.get("server_mac")),
                                                          P.server_mac(secret, snonce, cnonce)):
            raise P.ProtocolError(f"{self.where} could not prove that it holds the key")
        self.description = doc
        self.emulated = bool(doc["info"]["emulated"])
        self.clock = RemoteClock(bool(doc["clock_virtual"]), self)
        self.clock.update(float(doc["clock"]))
        return self

    def _reply(self, seq: int, timeout: float) -> tuple[float, bytes]:
        status, _, rseq, length, now = P.REPLY.unpack(self.channel.recv_exact(P.REPLY.size, timeout))
        if rseq != seq or length > P.MAX_PAYLOAD or status not in (0, 1):
            self._broken = True
            raise P.ProtocolError(f"{self.where} sent a malformed reply (id {rseq}, expected {seq})")
        payload = self.channel.recv_exact(length, timeout) if length else b""
        self.counters.bytes_in += P.REPLY.size + length
        if status:
            raise P.decode_error(payload)
        return now, payload

    def request(self, op: int, payload: bytes = b"") -> bytes:
        """One framed request and its reply (one round trip)."""
        if self._broken:
            raise P.ProtocolError(f"the connection to {self.where} is unusable after an earlier error")
        self._seq = (self._seq + 1) & 0xFFFF
        frame = P.REQ.pack(op, 0, self._seq, len(payload)) + payload
        self.counters.round_trips += 1
        self.counters.bytes_out += len(frame)
        try:
            self.channel.sendall(frame)
            now, data = self._reply(self._seq, REPLY_TIMEOUT)
        except P.ProtocolError:
            self._broken = True
            raise
        except TinyhwError as e:
            if not e.message.startswith("remote:"):  # the channel failed, not the device
                self._broken = True
            raise
        except BaseException:  # Ctrl-C while waiting: take the answer, so that what follows (restoring
            self._resync()     # the engine's controls, say) still reaches the device in order
            raise
        if isinstance(self.clock, RemoteClock):
            self.clock.update(now)
        return data

    def _resync(self) -> None:
        try:
            now, _ = self._reply(self._seq, 10.0)
            if isinstance(self.clock, RemoteClock):
                self.clock.update(now)
        except TinyhwError as e:
            self._broken = self._broken or not e.message.startswith("remote:")
        except BaseException:
            self._broken = True

    # -- batching (the Batching ability) -----------------------------------------------------------------------
    def submit(self, ops: Sequence[Op]) -> _Ticket:
        ticket = _Ticket(self)
        self._ops.extend(ops)
        self._tickets.append((ticket, len(ops)))
        c = self.counters
        for op in ops:
            if isinstance(op, W32):
                c.reg_writes += 1
            elif isinstance(op, (R32, Poll32)):
                c.reg_reads += 1
            elif isinstance(op, R):
                c.reg_reads += op.length // 4
            elif isinstance(op, W):
                c.reg_writes += len(op.data) // 4
                self._queued += len(op.data)
        self._queued += 16 * len(ops)
        if self._queued >= FLUSH_BYTES or len(self._ops) >= P.MAX_OPS // 2:
            self.flush()
        return ticket

    def flush(self) -> None:
        """Send everything queued as one batch and hand each ticket its results."""
        ops, tickets = self._ops, self._tickets
        self._ops, self._tickets, self._queued = [], [], 0
        if not ops:
            for t, _ in tickets:
                t.done = True
            return
        try:
            results = P.decode_results(ops, self.request(P.OP_BATCH, P.encode_ops(ops)))
        except TinyhwError as e:
            for t, _ in tickets:
                t.done, t.error = True, e
            raise
        pos = 0
        for t, n in tickets:
            k = sum(1 for op in ops[pos:pos + n] if isinstance(op, RESULT_OPS))
            t.results, t.done = results[:k], True
            results = results[k:]
            pos += n

    def ping(self) -> float:
        """One empty round trip; returns its wall time in seconds."""
        t0 = time.perf_counter()
        self.request(P.OP_PING)
        return time.perf_counter() - t0

    def server_stats(self) -> dict[str, Any]:
        """The server's counters for this connection (its transport to the device)."""
        self.flush()
        return json.loads(self.request(P.OP_STATS).decode())

    # -- the seam -------------------------------------------------------------------------------------------------
    def config_read(self, offset: int, size: int = 4) -> int:
        return self.submit([CfgR(offset, size)]).get()[0]

    def config_write(self, offset: int, size: int, value: int) -> None:
        self.submit([CfgW(offset, size, value & ((1 << (8 * size)) - 1))])

    def config_bytes(self, offset: int = 0, length: int = 256) -> bytes:
        ops = [CfgR(off, 4) for off in range(offset, offset + length, 4)]
        return b"".join(v.to_bytes(4, "little") for v in self.submit(ops).get())

    def bars(self) -> list[BarInfo]:
        return [BarInfo(**b) for b in self.description["bars"]]

    def _make_region(self, info: BarInfo) -> BarRegion:
        return _RemoteRegion(info, self)

    def identity(self) -> Identity:
        return Identity(**self.description["identity"])

    def info(self) -> TransportInfo:
        served = self.description["info"]
        return TransportInfo(transport="remote", emulated=self.emulated,
                             extra={"server": self.where, "protocol": P.VERSION, "served": served})

    def close(self) -> None:
        """Send what is still queued (so posted writes are not lost and their errors are seen), then say bye."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._broken:
                self.flush()
                self.request(P.OP_BYE)
        finally:
            self.channel.close()


def _unhex(text: object) -> bytes:
    try:
        return bytes.fromhex(str(text))
    except ValueError:
        return b""


class _RemoteRegion(BarRegion):
    def __init__(self, info: BarInfo, transport: RemoteTransport) -> None:
        super().__init__(info)
        self._t = transport
        self._i = info.index

    def read32(self, offset: int) -> int:
        self.check(offset, 4)
        return self._t.submit([R32(self._i, offset)]).get()[0]

    def write32(self, offset: int, value: int) -> None:
        self.check(offset, 4)
        self._t.submit([W32(self._i, offset, value & 0xFFFFFFFF)])

    def read(self, offset: int, length: int) -> bytes:
        self.check(offset, length)
        return self._t.submit([R(self._i, offset, length)]).get()[0]

    def write(self, offset: int, data: bytes) -> None:
        self.check(offset, len(data))
        self._t.submit([W(self._i, offset, bytes(data))])
