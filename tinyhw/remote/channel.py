"""Byte channels the remote protocol runs over: a socket (Unix or TCP) or a pair of pipes (ssh, stdio).

The one choke point where socket and pipe errors become tinyhw errors (ARCHITECTURE.md "The transport
seam"): a closed peer is :class:`~tinyhw.errors.Disconnected`, silence past the timeout is
:class:`~tinyhw.errors.DeviceTimeout`.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket

from tinyhw.errors import DeviceTimeout, Disconnected


class Channel:
    """Send everything, receive exactly ``n`` bytes (or time out), close."""

    peer = "?"

    def sendall(self, data: bytes) -> None:
        raise NotImplementedError

    def recv_exact(self, n: int, timeout: float | None) -> bytes:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


def _gone(what: str) -> Disconnected:
    return Disconnected(f"the connection to {what} closed", hint="check that the server is running, then rerun")


class SocketChannel(Channel):
    def __init__(self, sock: socket.socket, peer: str = "?") -> None:
        self.sock = sock
        self.peer = peer
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def sendall(self, data: bytes) -> None:
        try:
            self.sock.settimeout(60.0)
            self.sock.sendall(data)
        except TimeoutError:
            raise DeviceTimeout(f"sending to {self.peer} timed out") from None
        except OSError:
            raise _gone(self.peer) from None

    def recv_exact(self, n: int, timeout: float | None) -> bytes:
        buf = bytearray()
        self.sock.settimeout(timeout)
        try:
            while len(buf) < n:
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
                if not chunk:
                    raise _gone(self.peer)
                buf += chunk
        except TimeoutError:
            raise DeviceTimeout(f"no answer from {self.peer} within {timeout:g} s") from None
        except OSError:
            raise _gone(self.peer) from None
        return bytes(buf)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class PipeChannel(Channel):
    """Read from ``rfd``, write to ``wfd`` (a child's stdout/stdin, or this process's stdin/stdout)."""

    def __init__(self, rfd: int, wfd: int, peer: str = "?", *, owns: bool = True) -> None:
        self.rfd, self.wfd, self.peer, self.owns = rfd, wfd, peer, owns

    def sendall(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.wfd, view):]
        except OSError:
            raise _gone(self.peer) from None

    def recv_exact(self, n: int, timeout: float | None) -> bytes:
        buf = bytearray()
        try:
            while len(buf) < n:
                ready, _, _ = select.select([self.rfd], [], [], timeout)
                if not ready:
                    raise DeviceTimeout(f"no answer from {self.peer} within {timeout:g} s")
                chunk = os.read(self.rfd, min(n - len(buf), 1 << 20))
                if not chunk:
                    raise _gone(self.peer)
                buf += chunk
        except OSError:
            raise _gone(self.peer) from None
        return bytes(buf)

    def close(self) -> None:
        if self.owns:
            for fd in {self.rfd, self.wfd}:
                with contextlib.suppress(OSError):
                    os.close(fd)
