"""``tinyhw serve remote``: one device served to ``remote:`` clients.

Implements specs/pci-vfio-remote.md §12.2 for the protocol of :mod:`tinyhw.remote.protocol`: the
handshake (magic, version, HMAC-SHA256 challenge-response with a constant-time compare) comes before
anything else and before the device is opened; the device is opened per connection through
:func:`tinyhw.connect.open_device` (the same device lock as local users, exit 3 "in use" for a second
client) and released on disconnect; payload lengths are checked before a payload is read, and a
batch is decoded and validated as a whole (BAR bounds, alignment, waits, config-space policy) before
its first access runs; an audit line per connection and per state-changing request; an idle timeout.
Config-space writes to the BARs, the expansion ROM, the capability pointers and headers, MSI/MSI-X/power
management, PCIe link control and Resizable BAR (both capability lists walked:
:mod:`tinyhw.formats.pciguard`) are refused unless the server allows them (§12.2 item 7).

Beyond §12.2, the server proves the key to the client too, every frame is authenticated both ways
(:mod:`tinyhw.remote.session`; a frame that fails its tag ends the session, audited), the client's hello
must arrive within one deadline (``handshake_timeout``), timeouts are positive and finite, and a client
refused because the device is in use learns the holder's pid and program, not its command line.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import math
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tinyhw.connect import Opened, open_device
from tinyhw.errors import DeviceLocked, DeviceTimeout, Refused, TinyhwError
from tinyhw.formats.pciconfig import PciConfig, parse_config
from tinyhw.formats.pciguard import register_name, write_refusal
from tinyhw.remote import protocol
from tinyhw.remote.channel import Channel
from tinyhw.remote.session import Direction, FrameRejected, client_proof, server_proof, session_keys
from tinyhw.serve.listen import Audit, end_reason
from tinyhw.transport.abilities import PciePower
from tinyhw.transport.base import Transport, has, require
from tinyhw.transport.batch import WRITE_OPS, CfgW, Op, check_ops, run_ops
from tinyhw.transport.devstr import DeviceSpec

HANDSHAKE_TIMEOUT = 10.0
PAYLOAD_TIMEOUT = 30.0
IDLE_TIMEOUT = 600.0
MAX_TIMEOUT = 86400.0


class _Conn:
    """One connection: its channel, audit name and the two directions of its authenticated frames."""

    def __init__(self, ch: Channel, name: str) -> None:
        self.ch, self.name = ch, name
        self.tx = self.rx = Direction(b"")
        self.config: PciConfig | None = None  # the function's capabilities, to name a refused config write
        self.bye: int | None = None


class RemoteServer:
    """Serves ``spec`` to each connection handed to :meth:`handle`."""

    def __init__(self, spec: DeviceSpec, audit: Audit, *, secret: bytes | None = None,
                 idle_timeout: float = IDLE_TIMEOUT, allow_config_writes: bool = False,
                 opener: Callable[[DeviceSpec], Opened] = open_device,
                 handshake_timeout: float = HANDSHAKE_TIMEOUT, log_batches: bool = False) -> None:
        if secret is not None and len(secret) < protocol.MIN_SECRET:
            raise Refused(f"the key must hold at least {protocol.MIN_SECRET} bytes")
        for what, value in (("idle timeout", idle_timeout), ("handshake timeout", handshake_timeout)):
            check_timeout(what, value)
        self.spec = spec
        self.audit = audit
        self.secret = secret
        self.idle_timeout = idle_timeout
        self.handshake_timeout = handshake_timeout
        self.allow_config_writes = allow_config_writes
        self.opener = opener
        #: audit every batch that writes (``serve remote -v``); by default connections, refusals and errors only
        self.log_batches = log_batches
        #: connections whose device was opened (tests use it to check that garbage never opens it)
        self.opened_count = 0

    def check_device(self) -> str:
        """Open the device once and release it, before serving, so a missing or unusable one is said at start
        (raises what a client would get: DeviceNotFound, exit 3, for an absent bridge); returns where it is."""
        opened = self.opener(self.spec)
        try:
            return opened.transport.identity().location
        finally:
            opened.close()

    # -- one connection -------------------------------------------------------------------------------------
    def handle(self, ch: Channel, name: str) -> bool:
        """Serve one connection; False when it was refused or failed before it authenticated."""
        conn = _Conn(ch, name)
        opened: Opened | None = None
        reason = "closed"
        try:
            opened = self._handshake(conn)
            if opened is None:
                return False
            reason = self._loop(conn, opened)
        except Exception as e:  # a bug must end this connection, never the server
            reason = end_reason(e)
            if opened is None:
                self.audit(name, f"handshake ended: {reason}")
                return False
        finally:
            if opened is not None:
                stats = _safe_stats(opened)
                uncovered = _safe_notes(opened)
                opened.close()
                if uncovered:
                    self.audit(name, f"the emulated board does not model {len(uncovered)} access(es), first: "
                                     f"{uncovered[0]}")
                self.audit(name, f"device released ({reason}); counters {json.dumps(stats, sort_keys=True)}")
            if conn.bye is not None:  # answered once the device is released, so the client may reopen it at once
                with contextlib.suppress(TinyhwError):
                    self._reply(conn, conn.bye, None, b"")
        return True

    def _handshake(self, conn: _Conn) -> Opened | None:
        """Hello, the client's hello and proof within one deadline; then the device, the proof and description."""
        ch, name = conn.ch, conn.name
        auth = protocol.AUTH_HMAC if self.secret is not None else protocol.AUTH_NONE
        hello = protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, auth, 0, os.urandom(32))
        ch.sendall(hello)
        try:
            raw = ch.recv_exact(protocol.CLIENT_HELLO.size, self.handshake_timeout)
        except DeviceTimeout:
            self.audit(name, f"handshake timed out: no complete hello within {self.handshake_timeout:g} s")
            return None
        magic, version, _, _cnonce, proof = protocol.CLIENT_HELLO.unpack(raw)
        if magic != protocol.MAGIC:
            self.audit(name, "refused: not a tinyhw client (bad magic)")
            return None
        transcript = hello + raw[:-32]
        c2s, s2c = session_keys(self.secret or b"", transcript)
        conn.rx, conn.tx = Direction(c2s), Direction(s2c)
        if version != protocol.VERSION:
            self.audit(name, f"refused: protocol version {version} (server {protocol.VERSION})")
            self._error(conn, 0, protocol.ProtocolError(
                f"the server speaks protocol {protocol.VERSION}, the client {version}",
                hint="install the same tinyhw version on both machines"))
            return None
        if self.secret is not None and not hmac.compare_digest(proof, client_proof(self.secret, transcript)):
            self.audit(name, "refused: authentication failed")
            self._error(conn, 0, Refused("authentication failed: the client's key does not match the server's",
                                         hint="copy the server's key file to the client (0600)"))
            return None
        ch.authenticated = True
        try:
            opened = self.opener(self.spec)
        except TinyhwError as e:
            self.audit(name, f"cannot open {self.spec}: {e.message}")
            self._error(conn, 0, _for_client(e))
            return None
        self.opened_count += 1
        try:
            doc = describe(opened.transport)
            conn.config = None if self.allow_config_writes else parse_config(opened.transport.config_bytes)
            if self.secret is not None:
                doc["server_proof"] = server_proof(self.secret, transcript).hex()
            self._reply(conn, 0, opened.transport, json.dumps(doc).encode())
        except BaseException:
            opened.close()
            raise
        self.audit(name, f"authenticated; opened {self.spec} ({doc['identity']['location']})")
        return opened

    def _loop(self, conn: _Conn, opened: Opened) -> str:
        t = opened.transport
        while True:
            try:
                (op, _, seq, _length), payload = protocol.recv_frame(conn.ch, conn.rx, protocol.REQ, self.idle_timeout,
                                                                     PAYLOAD_TIMEOUT, "the client")
            except DeviceTimeout:
                return f"idle for {self.idle_timeout:g} s"
            except FrameRejected as e:
                return f"rejected a frame: {e.message}"
            except protocol.ProtocolError as e:  # oversized: said to the client, then closed (no resynchronising)
                self._error(conn, 0, e)
                return f"protocol error: {e.message}"
            if op in (protocol.OP_BATCH, protocol.OP_TIMED_BATCH):
                self._batch(conn, seq, t, payload, timed=op == protocol.OP_TIMED_BATCH)
            elif op == protocol.OP_PING:
                self._reply(conn, seq, t, b"")
            elif op == protocol.OP_STATS:
                self._reply(conn, seq, t, json.dumps(_safe_stats(opened)).encode())
            elif op == protocol.OP_POWER:
                self._power(conn, seq, t, payload)
            elif op == protocol.OP_BYE:
                conn.bye = seq
                return "client said bye"
            else:
                self._error(conn, seq, protocol.ProtocolError(f"unknown request {op}"))

    def _batch(self, conn: _Conn, seq: int, t: Transport, payload: bytes, *, timed: bool = False) -> None:
        """Run one batch (checked whole first); ``timed``: the reply starts with the seconds the device's clock
        advanced while it ran (``OP_TIMED_BATCH``)."""
        try:
            ops = protocol.decode_ops(payload)
            if timed and protocol.result_size(ops) + protocol.BATCH_TIME.size > protocol.MAX_PAYLOAD:
                raise protocol.ProtocolError(f"a timed batch's results and time take more than "
                                             f"{protocol.MAX_PAYLOAD} bytes: send it as a plain batch")
            check_ops(t, ops)
            self._check_config(t, ops, conn)
        except TinyhwError as e:
            self.audit(conn.name, f"batch #{seq} refused: {e.message}")
            self._error(conn, seq, e)
            return
        writes = [op for op in ops if isinstance(op, WRITE_OPS)] if self.log_batches else []
        if writes:
            self.audit(conn.name, f"batch #{seq}: {len(ops)} operations, {len(writes)} writes "
                                  f"(first {_show(writes[0])})")
        try:
            start = t.clock.now()
            results = run_ops(t, ops)
            spent = t.clock.now() - start
        except TinyhwError as e:
            self.audit(conn.name, f"batch #{seq} failed: {e.message}")
            self._error(conn, seq, e)
            return
        body = protocol.encode_results(ops, results)
        self._reply(conn, seq, t, protocol.BATCH_TIME.pack(max(0.0, spent)) + body if timed else body)

    def _power(self, conn: _Conn, seq: int, t: Transport, payload: bytes) -> None:
        """The bridge's PCIe power toggle (audited when it changes state); refused for a device without it."""
        try:
            if len(payload) != protocol.POWER.size:
                raise protocol.ProtocolError(f"a power request holds {len(payload)} bytes, not {protocol.POWER.size}")
            action, wait = protocol.POWER.unpack(payload)
            name = protocol.POWER_ACTIONS.get(action)
            if name is None:
                raise protocol.ProtocolError(f"unknown power action {action}")
            check_timeout("power wait", wait)
            powered = require(t, PciePower, "switch the pcie power (only a usb bridge can)", refuse=True)
            if name != "status":
                self.audit(conn.name, f"power #{seq}: pcie power {name}")
            state = (powered.link_state() if name == "status" else
                     powered.power_on(wait) if name == "on" else powered.power_off(wait))
        except TinyhwError as e:
            self._error(conn, seq, e)
            return
        self._reply(conn, seq, t, json.dumps(state.as_dict()).encode())

    def _check_config(self, t: Transport, ops: list[Op], conn: _Conn) -> None:
        """Refuse the batch when one of its config writes is outside the safe set
        (:data:`tinyhw.formats.pciguard.SAFE_WRITES`), unless the server allows config writes."""
        if self.allow_config_writes:
            return
        for op in ops:
            if not isinstance(op, CfgW):
                continue
            why = write_refusal(op.offset, op.size, op.value, t.config_read)
            if why is not None:
                what = register_name(op.offset, op.size, conn.config)
                raise Refused(f"config write at 0x{op.offset:x} ({what}) is refused by the server: {why}",
                              hint="start the server with --allow-config-writes if this is intended")

    # -- frames ---------------------------------------------------------------------------------------------------
    def _reply(self, conn: _Conn, seq: int, t: Transport | None, payload: bytes) -> None:
        now = t.clock.now() if t is not None else 0.0
        conn.ch.sendall(conn.tx.seal(protocol.REPLY.pack(0, 0, seq, len(payload), now), payload))

    def _error(self, conn: _Conn, seq: int, e: BaseException) -> None:
        body = protocol.encode_error(e)
        conn.ch.sendall(conn.tx.seal(protocol.REPLY.pack(1, 0, seq, len(body), 0.0), body))


def check_timeout(what: str, value: float) -> None:
    """A timeout must be a positive finite number of seconds, at most a day (exit 2 otherwise)."""
    if not (isinstance(value, (int, float)) and math.isfinite(value) and 0 < value <= MAX_TIMEOUT):
        raise Refused(f"the {what} must be more than 0 and at most {MAX_TIMEOUT:g} seconds (got {value!r})")


def _for_client(e: TinyhwError) -> TinyhwError:
    """What a client is told: a lock holder by pid and tool, never its full command line."""
    holder = getattr(e, "holder", None)
    if isinstance(e, DeviceLocked) and isinstance(holder, dict):
        return DeviceLocked(f"device {holder.get('key', '?')} is in use by pid {holder.get('pid', '?')} "
                            f"({holder.get('tool', '?')})", hint=e.hint)
    return e


def describe(t: Transport) -> dict[str, Any]:
    """What a client learns about the served device at connect: identity, BARs, transport facts (made JSON-safe), the
    device clock's time and kind, and the optional abilities: timed batches (:data:`protocol.ABILITY_BATCH_TIME`) and
    wide offsets (:data:`protocol.ABILITY_WIDE_OFFSETS`), always, and those it forwards
    (:data:`protocol.ABILITY_PCIE_POWER`)."""
    info = t.info()
    return {
        "identity": asdict(t.identity()),
        "bars": [b.as_dict() for b in t.bars()],
        "info": {"transport": info.transport, "emulated": info.emulated, "extra": _jsonable(info.extra)},
        "clock": t.clock.now(),
        "clock_virtual": bool(t.clock.virtual),
        "abilities": [protocol.ABILITY_BATCH_TIME, protocol.ABILITY_WIDE_OFFSETS]
        + ([protocol.ABILITY_PCIE_POWER] if has(t, PciePower) else []),
    }


def _jsonable(x: Any) -> Any:
    try:
        json.dumps(x)
        return x
    except (TypeError, ValueError):
        return str(x)


def _show(op: Op) -> str:
    fields = ", ".join(f"{k}={v:#x}" if isinstance(v, int) else f"{k}={len(v)} bytes"
                       for k, v in op._asdict().items() if isinstance(v, (int, bytes)))
    return f"{type(op).__name__}({fields})"


def _safe_stats(opened: Opened) -> dict[str, Any]:
    try:
        return opened.stats()
    except TinyhwError:
        return {}


def _safe_notes(opened: Opened) -> list[str]:
    try:
        return list(opened.uncovered())
    except TinyhwError:
        return []
