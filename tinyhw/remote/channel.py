"""Byte channels the remote protocol runs over: a socket (Unix or TCP) or a pair of pipes (ssh, stdio).

The one choke point where socket and pipe errors become tinyhw errors (ARCHITECTURE.md "The transport
seam"): a closed peer is :class:`~tinyhw.errors.Disconnected`, silence past the timeout is
:class:`~tinyhw.errors.DeviceTimeout`. A receive's timeout bounds the whole call, not each ``recv``
(a peer trickling one byte at a time cannot stretch it).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import struct
import time

from tinyhw.errors import DeviceTimeout, Disconnected


class Channel:
    """Send everything, receive exactly ``n`` bytes (or time out), close."""

    peer = "?"
    #: set by the server once the peer has authenticated (the listener keeps a slot for such connections)
    authenticated = False

    def sendall(self, data: bytes) -> None:
        """Send all of ``data``; raises Disconnected when the peer is gone (DeviceTimeout when it stops reading)."""
        raise NotImplementedError

    def recv_exact(self, n: int, timeout: float | None) -> bytes:
        """Receive exactly ``n`` bytes within ``timeout`` seconds (None: no limit); raises DeviceTimeout, or
        Disconnected when the peer closes first."""
        raise NotImplementedError

    def close(self) -> None:
        """Close the connection (idempotent)."""
        raise NotImplementedError

    def abort(self) -> None:
        """Cut the connection from another thread: a receive blocked on it returns at once (then close it)."""


def _gone(what: str, got: int = 0, n: int = 0) -> Disconnected:
    where = f" in the middle of a frame ({got} of {n} bytes)" if got else ""
    return Disconnected(f"the connection to {what} closed{where}", hint="check that the server is running, then rerun")


def _left(deadline: float | None, timeout: float | None) -> float | None:
    if deadline is None:
        return None
    left = deadline - time.monotonic()
    if left <= 0:
        raise DeviceTimeout(f"no answer within {timeout:g} s")
    return left


def is_loopback(host: str) -> bool:
    """Whether every address ``host`` resolves to is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def peer_uid(sock: socket.socket) -> int | None:
    """The uid of the process at the other end of a Unix socket (SO_PEERCRED), or None."""
    with contextlib.suppress(OSError, AttributeError):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", raw)[1]
    return None


class SocketChannel(Channel):
    """A :class:`Channel` over a connected stream socket (TCP with Nagle off, or a unix socket)."""

    def __init__(self, sock: socket.socket, peer: str = "?") -> None:
        self.sock = sock
        self.peer = peer
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def sendall(self, data: bytes) -> None:
        """Send all of ``data`` within 60 s; raises DeviceTimeout, or Disconnected when the peer is gone."""
        try:
            self.sock.settimeout(60.0)
            self.sock.sendall(data)
        except TimeoutError:
            raise DeviceTimeout(f"sending to {self.peer} timed out") from None
        except OSError:
            raise _gone(self.peer) from None

    def recv_exact(self, n: int, timeout: float | None) -> bytes:
        """Receive exactly ``n`` bytes within ``timeout`` seconds (None: no limit); raises DeviceTimeout, or
        Disconnected when the peer closes first."""
        buf = bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while len(buf) < n:
                self.sock.settimeout(_left(deadline, timeout))
                chunk = self.sock.recv(min(n - len(buf), 1 << 20))
                if not chunk:
                    raise _gone(self.peer, len(buf), n)
                buf += chunk
        except (TimeoutError, DeviceTimeout):
            raise DeviceTimeout(f"no answer from {self.peer} within {timeout:g} s") from None
        except OSError:
            raise _gone(self.peer, len(buf), n) from None
        return bytes(buf)

    def close(self) -> None:
        """Shut the socket down both ways and close it."""
        self.abort()
        self.sock.close()

    def abort(self) -> None:
        """Shut the socket down both ways, so a receive blocked in another thread returns at once."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)


class PipeChannel(Channel):
    """Read from ``rfd``, write to ``wfd`` (a child's stdout/stdin, or this process's stdin/stdout)."""

    def __init__(self, rfd: int, wfd: int, peer: str = "?", *, owns: bool = True) -> None:
        self.rfd, self.wfd, self.peer, self.owns = rfd, wfd, peer, owns

    def sendall(self, data: bytes) -> None:
        """Write all of ``data`` to ``wfd``; raises Disconnected when the reader is gone."""
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self.wfd, view):]
        except OSError:
            raise _gone(self.peer) from None

    def recv_exact(self, n: int, timeout: float | None) -> bytes:
        """Read exactly ``n`` bytes from ``rfd`` within ``timeout`` seconds (None: no limit); raises DeviceTimeout, or
        Disconnected at end of file."""
        buf = bytearray()
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while len(buf) < n:
                ready, _, _ = select.select([self.rfd], [], [], _left(deadline, timeout))
                if not ready:
                    raise DeviceTimeout(f"no answer from {self.peer} within {timeout:g} s")
                chunk = os.read(self.rfd, min(n - len(buf), 1 << 20))
                if not chunk:
                    raise _gone(self.peer, len(buf), n)
                buf += chunk
        except DeviceTimeout:
            raise DeviceTimeout(f"no answer from {self.peer} within {timeout:g} s") from None
        except OSError:
            raise _gone(self.peer, len(buf), n) from None
        return bytes(buf)

    def close(self) -> None:
        """Close both descriptors when this channel owns them (not this process's own stdin/stdout)."""
        if self.owns:
            for fd in {self.rfd, self.wfd}:
                with contextlib.suppress(OSError):
                    os.close(fd)
