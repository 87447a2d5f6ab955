"""Helpers for the remote and serprog tests: a server in a thread on a short Unix path or loopback TCP."""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinyhw.connect import Opened, open_device
from tinyhw.serve import make_listener
from tinyhw.serve.listen import Audit, Listener
from tinyhw.serve.remote import RemoteServer
from tinyhw.transport.devstr import DeviceSpec, parse_device


class _Sink:
    def write(self, _s: str) -> None:
        pass

    def flush(self) -> None:
        pass


@dataclass
class Served:
    server: Any
    listener: Listener
    audit: Audit
    address: str
    opened: list[Opened] = field(default_factory=list)

    def wait_released(self, timeout: float = 60.0) -> None:
        """Wait until every connection that opened the device has released it (a peer that just went away)."""
        deadline = time.monotonic() + timeout
        while sum("device released" in line for line in self.audit.lines) < len(self.opened):
            assert time.monotonic() < deadline, "the server did not release the device"
            time.sleep(0.02)

    def device(self, extra: str = "") -> str:
        a = self.address
        return (f"remote:unix:{a}" if a.startswith("/") else f"remote:{a}") + extra


@contextmanager
def served(device: str = "mock:navi31", *, listen: str | None = None, kind: str = "remote",
           listener_kwargs: dict[str, Any] | None = None, open_delay: float = 0.0, **kwargs: Any) -> Iterator[Served]:
    """A server for ``device`` in a thread; the Unix socket lives in a short temporary directory.
    ``listener_kwargs`` go to the serprog listener (a test's kernel socket lookup); ``open_delay`` seconds pass
    before each opening of the device (a slow board)."""
    listener_kwargs = listener_kwargs or {}
    audit = Audit(_Sink())  # type: ignore[arg-type]
    opened: list[Opened] = []

    def opener(spec: DeviceSpec) -> Opened:
        time.sleep(open_delay)
        o = open_device(spec)
        opened.append(o)
        return o

    if kind == "remote":
        server: Any = RemoteServer(parse_device(device), audit, opener=opener, **kwargs)
    else:
        from tinyhw.serve.serprog import SerprogServer

        server = SerprogServer(parse_device(device), audit, opener=opener, **kwargs)
    tmp = Path(tempfile.mkdtemp(prefix="thw", dir="/tmp"))
    if kind == "remote":
        listener = make_listener(server.handle, audit, listen=listen, socket_path=tmp / "rt" / "s.sock",
                                 handshakes=True)
    else:  # what `tinyhw serve serprog --listen` runs: loopback, this uid only
        from tinyhw.serve.serprog import serprog_listener

        assert listen, "serprog serves a pty or loopback tcp; pass listen=..."
        listener = serprog_listener(server.handle, audit, listen, **listener_kwargs)
    thread = threading.Thread(target=listener.serve_forever, daemon=True)
    thread.start()
    try:
        yield Served(server, listener, audit, listener.address, opened)
    finally:
        listener.stop(10)
        thread.join(10)
        shutil.rmtree(tmp, ignore_errors=True)


class RawClient:
    """A hand-driven protocol client over a socket: the handshake, then sealed frames sent and read one by one."""

    def __init__(self, sock: Any, secret: bytes | None = None) -> None:
        import os

        from tinyhw.remote import protocol, session

        self.sock = sock
        hello = recv_all(sock, protocol.HELLO.size)
        head = protocol.CLIENT_HELLO.pack(protocol.MAGIC, protocol.VERSION, 0, os.urandom(32), bytes(32))[:-32]
        self.transcript = hello + head
        proof = session.client_proof(secret, self.transcript) if secret else bytes(32)
        sock.sendall(head + proof)
        c2s, s2c = session.session_keys(secret or b"", self.transcript)
        self.tx, self.rx = session.Direction(c2s), session.Direction(s2c)
        self.first = self.reply()

    def frame(self, op: int, payload: bytes = b"", seq: int = 1) -> bytes:
        from tinyhw.remote import protocol

        return self.tx.seal(protocol.REQ.pack(op, 0, seq, len(payload)), payload)

    def send(self, op: int, payload: bytes = b"", seq: int = 1) -> None:
        self.sock.sendall(self.frame(op, payload, seq))

    def reply(self) -> tuple[int, bytes] | None:
        """(status, payload) of the next reply (its tags checked), or None when the server closed."""
        from tinyhw.remote import protocol, session

        raw = recv_all(self.sock, protocol.REPLY.size + session.TAG)
        if len(raw) < protocol.REPLY.size + session.TAG:
            return None
        header = raw[:protocol.REPLY.size]
        status, _, _, length, _ = protocol.REPLY.unpack(header)
        if not (status == 1 and self.rx.seq == 0):  # a refused handshake's error may not verify
            self.rx.check_header(header, raw[protocol.REPLY.size:], "server")
        payload = recv_all(self.sock, length) if length else b""
        if length:
            tag = recv_all(self.sock, session.TAG)
            if not (status == 1 and self.rx.seq == 0):
                self.rx.check_payload(header, payload, tag, "server")
        self.rx.advance()
        return status, payload


def recv_all(s: Any, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            break
        buf += chunk
    return buf
