"""Listening sockets and the accept loop shared by ``tinyhw serve remote`` and ``tinyhw serve serprog``.

specs/pci-vfio-remote.md §12.2 items 1 and 9: local-only by default (a Unix socket in a 0700 directory,
mode 0600, the peer's uid checked with SO_PEERCRED; or TCP on a loopback address); a non-loopback
address only when the caller allows it; bounded concurrent connections; an audit line per connection.
A server whose clients cannot authenticate (serprog: flashrom has no way to) also checks the uid of a loopback
TCP peer, looked up in /proc/net/tcp{,6} (issue 21 item 3), and refuses the connection when that fails.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tinyhw.errors import DeviceTimeout, Disconnected, EnvironmentProblem, Refused, TinyhwError
from tinyhw.formats.procnet import socket_uid
from tinyhw.remote.channel import Channel, SocketChannel

MAX_CONNECTIONS = 8
#: Largest /proc/net/tcp{,6} read for a peer lookup (about 400,000 sockets); beyond it the lookup fails (closed).
PROC_NET_LIMIT = 64 << 20


def end_reason(e: BaseException) -> str:
    """Why a connection's session ended, for its audit line (a bug ends the connection, never the server)."""
    if isinstance(e, Disconnected):
        return "peer went away"
    if isinstance(e, DeviceTimeout):
        return "idle or stalled peer (timed out)"
    if isinstance(e, TinyhwError):
        return f"error: {e.message}"
    return f"internal error: {type(e).__name__}: {e}"


class Audit:
    """One line per event: time, connection, what happened. Thread-safe; to stderr or a file."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self._lock = threading.Lock()
        self.lines: list[str] = []  # kept for tests (bounded)

    def __call__(self, conn: str, message: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} tinyhw-serve [{conn}] {message}"
        with self._lock:
            if len(self.lines) < 10000:
                self.lines.append(line)
            with contextlib.suppress(OSError, ValueError):
                self.stream.write(line + "\n")
                self.stream.flush()


def parse_listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise Refused(f"--listen wants HOST:PORT, e.g. 127.0.0.1:7788; port 0 picks a free one (got {text!r})")
    return host, int(port)


def is_loopback(host: str) -> bool:
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def check_network(host: str, allow_network: bool) -> None:
    """Refuse (exit 2) a non-loopback address unless allowed (§12.2 item 1)."""
    if not is_loopback(host) and not allow_network:
        raise Refused(f"{host} is not a loopback address; serving beyond this machine needs --allow-network",
                      hint="prefer remote:ssh://host/DEV, which needs no listening port at all")


def tcp_listener(host: str, port: int, *, allow_network: bool) -> socket.socket:
    check_network(host, allow_network)
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise EnvironmentProblem(f"cannot listen on {host}:{port}: {(e.strerror or str(e)).lower()}") from None
    sock.listen(MAX_CONNECTIONS)
    return sock


def unix_listener(path: Path) -> socket.socket:
    """A 0600 socket in a 0700 directory; a stale socket file left by a dead server is replaced."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.parent.stat()
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise Refused(f"the socket directory {path.parent} must belong to this user with mode 0700")
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            raise EnvironmentProblem(f"a server is already listening on {path}")
        except (ConnectionRefusedError, FileNotFoundError):
            path.unlink()
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(MAX_CONNECTIONS)
    return sock


def peer_uid(sock: socket.socket) -> int | None:
    with contextlib.suppress(OSError, AttributeError):
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return struct.unpack("3i", raw)[1]
    return None


def read_proc_net(name: str) -> str:
    """The text of ``/proc/net/NAME`` (``tcp`` or ``tcp6``), at most :data:`PROC_NET_LIMIT` bytes; else OSError."""
    with open(f"/proc/net/{name}", "rb") as f:
        data = f.read(PROC_NET_LIMIT + 1)
    if len(data) > PROC_NET_LIMIT:
        raise OSError(f"/proc/net/{name} is larger than {PROC_NET_LIMIT} bytes")
    return data.decode("ascii", "replace")


class PeerUnknown(Exception):
    """The uid at the other end of a TCP connection could not be determined (the connection is refused)."""


def tcp_peer_uid(conn: socket.socket, read_table: Callable[[str], str] = read_proc_net) -> int:
    """The uid owning the client's end of the loopback connection ``conn`` (the server's accepted socket).

    The client's socket is the table entry whose local end is the client's address and whose remote end is
    the server's (the server's own entry is the mirror image). :class:`PeerUnknown` says why it failed.
    """
    table = "tcp6" if conn.family == socket.AF_INET6 else "tcp"
    try:
        server, client = conn.getsockname()[:2], conn.getpeername()[:2]
    except OSError as e:
        raise PeerUnknown(f"the connection is gone ({(e.strerror or str(e)).lower()})") from None
    try:
        text = read_table(table)
    except OSError as e:
        raise PeerUnknown(f"cannot read /proc/net/{table}: {(e.strerror or str(e)).lower()}") from None
    uid = socket_uid(text, local=client, remote=server)
    if uid is None:
        raise PeerUnknown(f"no socket {client[0]}:{client[1]} -> {server[0]}:{server[1]} owned by one uid "
                          f"in /proc/net/{table}")
    return uid


class Listener:
    """Accept connections and run ``handle(channel, name)`` for each in a thread, until :meth:`stop`.

    A Unix socket peer must be this process's uid (SO_PEERCRED). With ``same_uid``, so must a TCP peer
    (looked up through ``read_table``, :func:`read_proc_net` unless a test injects one); a peer whose uid
    cannot be determined is refused too.
    """

    def __init__(self, sock: socket.socket, handle: Callable[[Channel, str], None], audit: Audit,
                 *, max_connections: int = MAX_CONNECTIONS, same_uid: bool = False,
                 read_table: Callable[[str], str] = read_proc_net) -> None:
        self.sock = sock
        self.same_uid = same_uid
        self.read_table = read_table
        self.handle = handle
        self.audit = audit
        self.max_connections = max_connections
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._n = 0
        self.unix = sock.family == socket.AF_UNIX

    @property
    def address(self) -> str:
        name = self.sock.getsockname()
        if isinstance(name, str):
            return name
        return f"[{name[0]}]:{name[1]}" if ":" in name[0] else f"{name[0]}:{name[1]}"

    def serve_forever(self) -> None:
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self.sock], [], [], 0.2)
                if ready:
                    self._accept()
        finally:
            self.sock.close()

    def _accept(self) -> None:
        try:
            conn, addr = self.sock.accept()
        except OSError:
            return
        self._n += 1
        name = f"c{self._n}"
        peer = addr if isinstance(addr, str) and addr else (f"{addr[0]}:{addr[1]}" if addr else "unix")
        self._threads = [t for t in self._threads if t.is_alive()]
        if self.unix:
            uid = peer_uid(conn)
            if uid != os.geteuid():
                self.audit(name, f"refused unix peer uid {uid} (server uid {os.geteuid()})")
                conn.close()
                return
            peer = f"unix uid {uid}"
        elif self.same_uid:
            try:
                uid = tcp_peer_uid(conn, self.read_table)
            except PeerUnknown as e:
                self.audit(name, f"refused {peer}: cannot tell which uid connected ({e}); refusing (fail closed)")
                conn.close()
                return
            if uid != os.geteuid():
                self.audit(name, f"refused {peer}: tcp peer uid {uid} is not the server's uid {os.geteuid()}")
                conn.close()
                return
            peer = f"{peer} uid {uid}"
        if len(self._threads) >= self.max_connections:
            self.audit(name, f"refused {peer}: {self.max_connections} connections already open")
            conn.close()
            return
        self.audit(name, f"connect from {peer}")
        t = threading.Thread(target=self._run, args=(SocketChannel(conn, peer), name), daemon=True)
        self._threads.append(t)
        t.start()

    def _run(self, channel: Channel, name: str) -> None:
        try:
            self.handle(channel, name)
        finally:
            channel.close()

    def stop(self, wait: float = 5.0) -> None:
        self._stop.set()
        for t in list(self._threads):
            t.join(wait)
