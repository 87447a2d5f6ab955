"""``tinyhw serve remote``: one device served to ``remote:`` clients (issue 16 items 1-3).

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
"""

from __future__ import annotations

import contextlib
import hmac
import json
import os
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from tinyhw.connect import Opened, open_device
from tinyhw.errors import DeviceTimeout, Refused, TinyhwError
from tinyhw.formats.pciconfig import parse_config
from tinyhw.formats.pciguard import guarded_ranges, refusal
from tinyhw.remote import protocol as P
from tinyhw.remote.channel import Channel
from tinyhw.serve.listen import Audit, end_reason
from tinyhw.transport.base import Transport
from tinyhw.transport.batch import WRITE_OPS, CfgW, Op, check_ops, run_ops
from tinyhw.transport.devstr import DeviceSpec

HANDSHAKE_TIMEOUT = 10.0
PAYLOAD_TIMEOUT = 30.0
IDLE_TIMEOUT = 600.0


class RemoteServer:
    """Serves ``spec`` to each connection handed to :meth:`handle`."""

    def __init__(self, spec: DeviceSpec, audit: Audit, *, secret: bytes | None = None,
                 idle_timeout: float = IDLE_TIMEOUT, allow_config_writes: bool = False,
                 opener: Callable[[DeviceSpec], Opened] = open_device) -> None:
        if secret is not None and len(secret) < P.MIN_SECRET:
            raise Refused(f"the key must hold at least {P.MIN_SECRET} bytes")
        self.spec = spec
        self.audit = audit
        self.secret = secret
        self.idle_timeout = idle_timeout
        self.allow_config_writes = allow_config_writes
        self.opener = opener
        #: connections whose device was opened (tests use it to check that garbage never opens it)
        self.opened_count = 0
        self._guarded: dict[str, list[tuple[int, int, str]]] = {}
        self._bye: dict[str, int] = {}  # connection -> id of its BYE, answered after the device is released

    # -- one connection -------------------------------------------------------------------------------------
    def handle(self, ch: Channel, name: str) -> None:
        opened: Opened | None = None
        reason = "closed"
        try:
            opened = self._handshake(ch, name)
            if opened is None:
                return
            reason = self._loop(ch, name, opened)
        except Exception as e:  # a bug must end this connection, never the server
            reason = end_reason(e)
        finally:
            self._guarded.pop(name, None)
            if opened is not None:
                stats = _safe_stats(opened)
                uncovered = _safe_notes(opened)
                opened.close()
                if uncovered:
                    self.audit(name, f"the emulated board does not model {len(uncovered)} access(es), first: "
                                     f"{uncovered[0]}")
                self.audit(name, f"device released ({reason}); counters {json.dumps(stats, sort_keys=True)}")
            bye = self._bye.pop(name, None)
            if bye is not None:  # answered once the device is released, so the client may reopen it at once
                with contextlib.suppress(TinyhwError):
                    self._reply(ch, bye, None, b"")

    def _handshake(self, ch: Channel, name: str) -> Opened | None:
        snonce = os.urandom(32)
        auth = P.AUTH_HMAC if self.secret is not None else P.AUTH_NONE
        ch.sendall(P.HELLO.pack(P.MAGIC, P.VERSION, auth, 0, snonce))
        magic, version, _, cnonce, mac = P.CLIENT_HELLO.unpack(ch.recv_exact(P.CLIENT_HELLO.size, HANDSHAKE_TIMEOUT))
        if magic != P.MAGIC:
            self.audit(name, "refused: not a tinyhw client (bad magic)")
            return None
        if version != P.VERSION:
            self.audit(name, f"refused: protocol version {version} (server {P.VERSION})")
            self._error(ch, 0, P.ProtocolError(f"the server speaks protocol {P.VERSION}, the client {version}",
                                               hint="install the same tinyhw version on both machines"))
            return None
        if self.secret is not None and not hmac.compare_digest(mac, P.client_mac(self.secret, snonce, cnonce)):
            self.audit(name, "refused: authentication failed")
            self._error(ch, 0, Refused("authentication failed: the client's key does not match the server's",
                                       hint="copy the server's key file to the client (0600)"))
            return None
        try:
            opened = self.opener(self.spec)
        except TinyhwError as e:
            self.audit(name, f"cannot open {self.spec}: {e.message}")
            self._error(ch, 0, e)
            return None
        self.opened_count += 1
        try:
            doc = describe(opened.transport)
            doc["guarded"] = [] if self.allow_config_writes else _guarded_config(opened.transport)
            if self.secret is not None:
                doc["server_mac"] = P.server_mac(self.secret, snonce, cnonce).hex()
            self._guarded[name] = doc.pop("guarded")
            self._reply(ch, 0, opened.transport, json.dumps(doc).encode())
        except BaseException:
            opened.close()
            raise
        self.audit(name, f"authenticated; opened {self.spec} ({doc['identity']['location']})")
        return opened

    def _loop(self, ch: Channel, name: str, opened: Opened) -> str:
        t = opened.transport
        while True:
            try:
                header = ch.recv_exact(P.REQ.size, self.idle_timeout)
            except DeviceTimeout:
                return f"idle for {self.idle_timeout:g} s"
            op, _, seq, length = P.REQ.unpack(header)
            if length > P.MAX_PAYLOAD:  # checked before reading; the stream cannot be resynchronised
                self._error(ch, seq, P.ProtocolError(f"request of {length} bytes exceeds the limit of "
                                                     f"{P.MAX_PAYLOAD}"))
                return f"oversized request ({length} bytes)"
            payload = ch.recv_exact(length, PAYLOAD_TIMEOUT) if length else b""
            if op == P.OP_BATCH:
                self._batch(ch, name, seq, t, payload)
            elif op == P.OP_PING:
                self._reply(ch, seq, t, b"")
            elif op == P.OP_STATS:
                self._reply(ch, seq, t, json.dumps(_safe_stats(opened)).encode())
            elif op == P.OP_BYE:
                self._bye[name] = seq
                return "client said bye"
            else:
                self._error(ch, seq, P.ProtocolError(f"unknown request {op}"))

    def _batch(self, ch: Channel, name: str, seq: int, t: Transport, payload: bytes) -> None:
        try:
            ops = P.decode_ops(payload)
            check_ops(t, ops)
            self._check_config(ops, self._guarded.get(name, []))
        except TinyhwError as e:
            self.audit(name, f"batch #{seq} refused: {e.message}")
            self._error(ch, seq, e)
            return
        writes = [op for op in ops if isinstance(op, WRITE_OPS)]
        if writes:
            self.audit(name, f"batch #{seq}: {len(ops)} operations, {len(writes)} writes "
                             f"(first {_show(writes[0])})")
        try:
            results = run_ops(t, ops)
        except TinyhwError as e:
            self._error(ch, seq, e)
            return
        self._reply(ch, seq, t, P.encode_results(ops, results))

    def _check_config(self, ops: list[Op], guarded: list[tuple[int, int, str]]) -> None:
        for op in ops:
            what = refusal(op.offset, op.size, guarded) if isinstance(op, CfgW) else None
            if what is not None:
                raise Refused(f"config write at 0x{op.offset:x} ({what}) is refused by the server",
                              hint="start the server with --allow-config-writes if this is intended")

    # -- frames ---------------------------------------------------------------------------------------------------
    def _reply(self, ch: Channel, seq: int, t: Transport | None, payload: bytes) -> None:
        now = t.clock.now() if t is not None else 0.0
        ch.sendall(P.REPLY.pack(0, 0, seq, len(payload), now) + payload)

    def _error(self, ch: Channel, seq: int, e: BaseException) -> None:
        body = P.encode_error(e)
        ch.sendall(P.REPLY.pack(1, 0, seq, len(body), 0.0) + body)


def describe(t: Transport) -> dict[str, Any]:
    info = t.info()
    return {
        "identity": asdict(t.identity()),
        "bars": [b.as_dict() for b in t.bars()],
        "info": {"transport": info.transport, "emulated": info.emulated, "extra": _jsonable(info.extra)},
        "clock": t.clock.now(),
        "clock_virtual": bool(t.clock.virtual),
    }


def _jsonable(x: Any) -> Any:
    try:
        json.dumps(x)
        return x
    except (TypeError, ValueError):
        return str(x)


def _guarded_config(t: Transport) -> list[tuple[int, int, str]]:
    """Config ranges a client may not write (:func:`tinyhw.formats.pciguard.guarded_ranges`), found by walking
    the function's conventional and extended capabilities (read lazily, a dword at a time)."""
    return guarded_ranges(parse_config(t.config_bytes))


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
        return list(opened.notes())
    except TinyhwError:
        return []
