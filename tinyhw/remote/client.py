"""The ``remote:`` transport: the transport seam over the tinyhw remote protocol.

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
import math
import os
import time
from collections.abc import Sequence
from dataclasses import astuple, replace
from typing import Any

from tinyhw.errors import TinyhwError
from tinyhw.remote import protocol, session
from tinyhw.remote.channel import Channel
from tinyhw.transport.abilities import LinkState
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo
from tinyhw.transport.batch import R32, RESULT_OPS, W32, CfgR, CfgW, Op, Poll32, R, Sleep, W
from tinyhw.transport.clock import Clock

#: Queued bytes that force a send even before a result is needed.
FLUSH_BYTES = 1 << 20
#: Result bytes of the queued reads that force a send (a batch's results stay under the server's read cap).
FLUSH_READ_BYTES = 8 << 20
#: The largest piece of a BAR block read or write in one operation: a larger one is split into pieces, queued one
#: after another (the batches they fill stay within the frame and read limits of the protocol).
BLOCK_PIECE = 1 << 20
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
        """Take the server's clock reading ``server_now`` (seconds) from a reply; waits queued before it are now
        included."""
        self._base, self._at, self._pending = server_now, time.monotonic(), 0.0

    def now(self) -> float:
        """The server's time in seconds: its last reading, plus queued waits, plus wall time since when it is a wall
        clock."""
        drift = 0.0 if self.virtual else time.monotonic() - self._at
        return self._base + drift + self._pending

    def sleep(self, seconds: float) -> None:
        """Queue a wait of ``seconds`` on the server's clock (sent with the next batch); nothing for zero or less."""
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
        self._reading = 0  # result bytes of the queued reads
        self._seq = 0
        self._broken = False
        self._closed = False
        self.description: dict[str, Any] = {}
        self._identity: Identity | None = None
        self._bars: list[BarInfo] = []
        self._tx = self._rx = session.Direction(b"")
        self.reply_timeout = REPLY_TIMEOUT
        self._timed = False  # the server times each batch (ability batch_time)
        self._wide = False  # the server takes bar offsets of 4 GiB and more (ability offsets64)
        self._server_seconds = 0.0  # the server's time of the timed batches, summed
        self._untimed = 0  # batches sent while the server times batches, but plain (their results too large)

    @property
    def broken(self) -> bool:
        """Whether the connection failed (the server went away, or a frame did not verify): nothing more gets
        through it."""
        return self._broken

    # -- handshake ------------------------------------------------------------------------------------------------
    def connect(self) -> RemoteTransport:
        """The handshake: the auth mode this connection implies, the server's proof, then the description.

        With a key (TCP) the server must ask for HMAC and prove that it holds the key; without one (a Unix
        socket whose owner was checked, ssh) it must ask for none. Nothing but the client's hello is sent
        before the server's proof has been checked.
        """
        ch = self.channel
        hello = ch.recv_exact(protocol.HELLO.size, HANDSHAKE_TIMEOUT)
        magic, version, auth, _, _snonce = protocol.HELLO.unpack(hello)
        if magic != protocol.MAGIC:
            raise protocol.ProtocolError(f"{self.where} is not a tinyhw remote server")
        if version != protocol.VERSION:
            raise protocol.ProtocolError(
                f"{self.where} speaks tinyhw remote protocol {version}, this client {protocol.VERSION}",
                hint="install the same tinyhw version on both machines")
        secret = self._secret_loader() if self._secret_loader is not None else None
        want = protocol.AUTH_HMAC if secret is not None else protocol.AUTH_NONE
        if auth != want:
            raise ServerNotAuthenticated(
                f"{self.where} offers no authentication, but this connection needs the server to prove it holds "
                "the key; refusing it" if want == protocol.AUTH_HMAC else
                f"{self.where} asks for a key this kind of connection does not use; refusing it",
                hint="check the address: it may not be your tinyhw server")
        head = protocol.CLIENT_HELLO.pack(protocol.MAGIC, protocol.VERSION, 0, os.urandom(32), bytes(32))[:-32]
        transcript = hello + head
        proof = session.client_proof(secret, transcript) if secret is not None else bytes(32)
        ch.sendall(head + proof)
        c2s, s2c = session.session_keys(secret or b"", transcript)
        self._tx, self._rx = session.Direction(c2s), session.Direction(s2c)
        try:
            doc = self._handshake_reply(secret is not None)
        except session.FrameRejected:
            raise ServerNotAuthenticated(f"{self.where} could not prove that it holds the key (its first frame "
                                         "fails authentication); refusing it",
                                         hint="check the address and that both sides hold the same key file") \
                from None
        if secret is not None and not hmac.compare_digest(_unhex(doc.get("server_proof")),
                                                          session.server_proof(secret, transcript)):
            raise ServerNotAuthenticated(f"{self.where} could not prove that it holds the key; refusing it",
                                         hint="check the address and that both sides hold the same key file")
        self._describe(doc)
        abilities = doc.get("abilities")
        self._timed = isinstance(abilities, list) and protocol.ABILITY_BATCH_TIME in abilities
        self._wide = isinstance(abilities, list) and protocol.ABILITY_WIDE_OFFSETS in abilities
        if isinstance(abilities, list) and protocol.ABILITY_PCIE_POWER in abilities:
            self.__class__ = PoweredRemoteTransport  # the served transport's PCIe power toggle, forwarded
        return self

    def _handshake_reply(self, keyed: bool) -> dict[str, Any]:
        """The server's first frame: an error ends here (it can only stop us); else its JSON.

        A keyed connection's error keeps the server's exit code only when both its tags verify (a server with the
        key sent it); otherwise it is shown, escaped, as :class:`~tinyhw.remote.protocol.ServerRefused`.
        """
        head = self.channel.recv_exact(protocol.REPLY.size + session.TAG, HANDSHAKE_TIMEOUT)
        status, _, rseq, length, _now = protocol.REPLY.unpack(head[:protocol.REPLY.size])
        if status == 1 and rseq == 0 and length <= 4096:
            raise self._handshake_error(head, length, keyed)
        self._rx.check_header(head[:protocol.REPLY.size], head[protocol.REPLY.size:], self.where)
        if status != 0 or rseq != 0 or length > protocol.MAX_PAYLOAD:
            raise _malformed(f"{self.where} answered the handshake with status {status}, id {rseq}")
        payload = self.channel.recv_exact(length, HANDSHAKE_TIMEOUT) if length else b""
        tag = self.channel.recv_exact(session.TAG, HANDSHAKE_TIMEOUT) if length else b""
        self._rx.check_payload(head[:protocol.REPLY.size], payload, tag, self.where)
        self._rx.advance()
        self.counters.bytes_in += len(head) + length
        doc = _json(payload)
        if not isinstance(doc, dict):
            raise _malformed("the handshake reply is not a json object")
        return doc

    def _handshake_error(self, head: bytes, length: int, keyed: bool) -> TinyhwError:
        """The error a server answered the handshake with (``head`` is its header and header tag)."""
        header, tag = head[:protocol.REPLY.size], head[protocol.REPLY.size:]
        trusted = not keyed or self._rx.verifies(header, tag)
        try:
            payload = self.channel.recv_exact(length, HANDSHAKE_TIMEOUT) if length else b""
            if keyed and trusted and length:
                trusted = self._rx.verifies(header, self.channel.recv_exact(session.TAG, HANDSHAKE_TIMEOUT), payload)
        except TinyhwError:
            if not trusted:
                return protocol.ServerRefused(f"{self.where} refused the connection before proving it holds the key",
                                              hint="check the address and that both sides hold the same key file")
            raise
        return protocol.decode_error(payload, trusted=trusted)

    def _describe(self, doc: dict[str, Any]) -> None:
        """Check the description's shape once, so later accessors cannot fail on a server's bad document."""
        try:
            ident = Identity(**doc["identity"])
            bars = [BarInfo(**b) for b in doc["bars"]]
            info = doc["info"]
            emulated, virtual, now = info["emulated"], doc["clock_virtual"], doc["clock"]
            if not (isinstance(info, dict) and isinstance(emulated, bool) and isinstance(virtual, bool)
                    and isinstance(now, (int, float)) and math.isfinite(now)
                    and all(isinstance(v, int) for v in astuple(ident)[:6]) and isinstance(ident.location, str)
                    and all(isinstance(b.index, int) and isinstance(b.size, int) and isinstance(b.address, int)
                            for b in bars)):
                raise TypeError("a field of the wrong type")
        except (KeyError, TypeError) as e:
            raise _malformed(f"the device description lacks or mistypes {e}") from None
        self.description = doc
        self._identity, self._bars = replace(ident, location=protocol.printable(ident.location, 200)), bars
        self.emulated = emulated
        self.clock = RemoteClock(virtual, self)
        self.clock.update(float(now))

    def _reply(self, seq: int, timeout: float) -> tuple[float, bytes]:
        (status, _, rseq, _length, now), payload = protocol.recv_frame(self.channel, self._rx, protocol.REPLY, timeout,
                                                                       timeout, self.where)
        self.counters.bytes_in += protocol.REPLY.size + 2 * session.TAG + len(payload)
        if rseq != seq or status not in (0, 1) or not math.isfinite(now):
            self._broken = True
            raise _malformed(f"{self.where} sent reply id {rseq} with status {status} where {seq} was expected")
        if status:
            raise protocol.decode_error(payload)
        return now, payload

    def request(self, op: int, payload: bytes = b"") -> bytes:
        """One framed request and its reply (one round trip)."""
        if self._broken:
            raise protocol.ProtocolError(f"the connection to {self.where} is unusable after an earlier error")
        self._seq = (self._seq + 1) & 0xFFFF
        frame = self._tx.seal(protocol.REQ.pack(op, 0, self._seq, len(payload)), payload)
        self.counters.round_trips += 1
        self.counters.bytes_out += len(frame)
        try:
            self.channel.sendall(frame)
            now, data = self._reply(self._seq, self.reply_timeout)
        except protocol.ProtocolError:
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
        """Queue ``ops`` behind what is already queued (nothing is sent yet) and count them; returns the ticket of their
        results."""
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
                self._reading += op.length
            elif isinstance(op, W):
                c.reg_writes += len(op.data) // 4
                self._queued += len(op.data)
        self._queued += 16 * len(ops)
        if self._queued >= FLUSH_BYTES or self._reading >= FLUSH_READ_BYTES or len(self._ops) >= protocol.MAX_OPS // 2:
            self.flush()
        return ticket

    def flush(self) -> None:
        """Send everything queued as one batch and hand each ticket its results."""
        ops, tickets = self._ops, self._tickets
        self._ops, self._tickets, self._queued, self._reading = [], [], 0, 0
        if not ops:
            for t, _ in tickets:
                t.done = True
            return
        try:
            results = protocol.decode_results(ops, self._send_batch(ops))
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

    def _send_batch(self, ops: list[Op]) -> bytes:
        """One batch round trip; the results' bytes. Timed by the server where it can (its time summed for
        :meth:`batch_time`), unless the results and the time would not fit one reply."""
        prefix = protocol.BATCH_TIME.size
        if not self._timed or protocol.result_size(ops) + prefix > protocol.MAX_PAYLOAD:
            self._untimed += self._timed
            return self.request(protocol.OP_BATCH, protocol.encode_ops(ops, wide=self._wide))
        reply = self.request(protocol.OP_TIMED_BATCH, protocol.encode_ops(ops, wide=self._wide))
        (spent,) = protocol.BATCH_TIME.unpack_from(reply) if len(reply) >= prefix else (math.nan,)
        if not (math.isfinite(spent) and 0 <= spent <= REPLY_TIMEOUT):
            raise _malformed(f"a timed batch's reply holds no time the server could have spent ({spent!r})")
        self._server_seconds += spent
        return reply[prefix:]

    def batch_time(self) -> tuple[float, int, bool] | None:
        """The server's own time of the batches sent so far (the BatchTimes ability): (seconds summed over the
        batches it timed, how many it did not time, whether its clock is virtual: modelled, not measured); None
        when the server does not time batches (an older one)."""
        if not self._timed:
            return None
        return self._server_seconds, self._untimed, bool(self.clock.virtual)

    def ping(self) -> float:
        """One empty round trip; returns its wall time in seconds."""
        t0 = time.perf_counter()
        self.request(protocol.OP_PING)
        return time.perf_counter() - t0

    def server_stats(self) -> dict[str, Any]:
        """The server's counters for this connection (its transport to the device)."""
        self.flush()
        doc = _json(self.request(protocol.OP_STATS))
        if not isinstance(doc, dict):
            raise _malformed("the server's counters are not a json object")
        return doc

    # -- the seam -------------------------------------------------------------------------------------------------
    def config_read(self, offset: int, size: int = 4) -> int:
        """Read ``size`` (1, 2, 4) bytes of config space on the server (sends the queue, one round trip)."""
        return self.submit([CfgR(offset, size)]).get()[0]

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Queue a config write of the low ``size`` bytes of ``value`` at ``offset`` (sent with the next batch)."""
        self.submit([CfgW(offset, size, value & ((1 << (8 * size)) - 1))])

    def config_bytes(self, offset: int = 0, length: int = 256) -> bytes:
        """``length`` bytes of config space from ``offset`` (dword aligned), all in one batch and one round trip."""
        ops = [CfgR(off, 4) for off in range(offset, offset + length, 4)]
        return b"".join(v.to_bytes(4, "little") for v in self.submit(ops).get())

    def bars(self) -> list[BarInfo]:
        """The served device's BARs, as the server described them at connect."""
        return list(self._bars)

    def _make_region(self, info: BarInfo) -> BarRegion:
        return _RemoteRegion(info, self)

    def identity(self) -> Identity:
        """The served device's identity, as the server described it at connect."""
        assert self._identity is not None, "connect() first"
        return self._identity

    def info(self) -> TransportInfo:
        """``probe`` facts: the server's address, the protocol version and the served transport's own facts."""
        served = self.description["info"]
        return TransportInfo(transport="remote", emulated=self.emulated,
                             extra={"server": self.where, "protocol": protocol.VERSION, "served": served})

    def close(self) -> None:
        """Send what is still queued (so posted writes are not lost and their errors are seen), then say bye."""
        if self._closed:
            return
        self._closed = True
        try:
            if not self._broken:
                self.flush()
                self.request(protocol.OP_BYE)
        finally:
            self.channel.close()


class PoweredRemoteTransport(RemoteTransport):
    """A ``remote:`` transport whose served device has the bridge's PCIe power toggle (the
    :class:`~tinyhw.transport.abilities.PciePower` ability), each call one ``OP_POWER`` round trip after what is
    queued has been sent."""

    def _power(self, action: int, wait: float) -> LinkState:
        self.flush()
        doc = _json(self.request(protocol.OP_POWER, protocol.POWER.pack(action, float(wait))))
        try:
            ltssm, up, powered = doc["ltssm"], doc["up"], doc["powered"]
            if not (isinstance(ltssm, int) and isinstance(up, bool) and isinstance(powered, bool)):
                raise TypeError
        except (KeyError, TypeError):
            raise _malformed("the link state lacks or mistypes a field") from None
        return LinkState(ltssm=ltssm, up=up, powered=powered)

    def power_on(self, timeout: float = 5.0) -> LinkState:
        """Power the served bridge's PCIe side on, train the link and enumerate the GPU again (on the server)."""
        return self._power(protocol.POWER_ON, timeout)

    def power_off(self, timeout: float = 2.0) -> LinkState:
        """Power the served bridge's PCIe side off (the GPU loses its state); accesses fail until power on."""
        return self._power(protocol.POWER_OFF, timeout)

    def link_state(self) -> LinkState:
        """The served bridge's LTSSM register now and whether its PCIe side is left powered."""
        return self._power(protocol.POWER_STATUS, 1.0)


class ServerNotAuthenticated(protocol.ProtocolError):
    """The server did not ask for the authentication this connection implies, or failed to prove its key."""


def _malformed(what: str) -> protocol.ProtocolError:
    return protocol.ProtocolError(f"the server sent a malformed reply: {what}",
                                  hint="install the same tinyhw version on both machines, or report a bug")


def _json(payload: bytes) -> Any:
    try:
        return json.loads(payload.decode())
    except (ValueError, UnicodeDecodeError, RecursionError) as e:
        raise _malformed(f"unreadable json ({type(e).__name__})") from None


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
        pieces = [self._t.submit([R(self._i, offset + o, min(BLOCK_PIECE, length - o))])
                  for o in range(0, length, BLOCK_PIECE)] or [self._t.submit([R(self._i, offset, 0)])]
        return b"".join(p.get()[0] for p in pieces)

    def write(self, offset: int, data: bytes) -> None:
        self.check(offset, len(data))
        view = memoryview(data)
        for o in range(0, len(data), BLOCK_PIECE):
            self._t.submit([W(self._i, offset + o, bytes(view[o:o + BLOCK_PIECE]))])
