"""Listening sockets and the accept loop shared by ``tinyhw serve remote`` and ``tinyhw serve serprog``.

specs/pci-vfio-remote.md §12.2 items 1 and 9: local-only (a Unix socket in a 0700 directory, mode 0600,
the peer's uid checked with SO_PEERCRED; or TCP on a loopback address: plain TCP off this machine is
refused: it would be readable on the network, and ssh is the way there); bounded concurrent
connections; an audit line per connection. Connections that have not authenticated yet may hold at most
``max_connections - 1`` slots, and at most :data:`MAX_PENDING_PER_SOURCE` of them one source (the uid owning a
loopback TCP client's socket, else its address): a source's next connection replaces its own oldest, and when
every slot is taken the source holding the most loses its oldest, so a flood from one source never cuts
another's handshake, and slow or silent peers can neither hold every slot nor keep the owner out (each
handshake also has a deadline of its own, :class:`tinyhw.serve.remote.RemoteServer`). The kernel queues up to
:data:`BACKLOG` connections and the accept loop drains them, so a flood does not time the owner's connect out.
A server whose clients cannot authenticate (serprog: flashrom has no way to) also checks the uid of a loopback
TCP peer: it asks the kernel (sock_diag, an exact 4-tuple lookup whose cost does not depend on how many other
sockets are open) for the server's end, which must be the accepted socket itself (same inode) and established,
and for the client's end, which must be established and owned (a closing socket's leftover is listed with uid 0);
anything else, or a lookup that fails, refuses the connection (:func:`tcp_peer_uid`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import socket
import stat
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tinyhw.errors import DeviceTimeout, Disconnected, EnvironmentProblem, Refused, TinyhwError
from tinyhw.formats import inetdiag
from tinyhw.remote.channel import Channel, SocketChannel, is_loopback, peer_uid

MAX_CONNECTIONS = 8
#: seconds a sock_diag lookup may take before the connection is refused
DIAG_TIMEOUT = 2.0
#: connections the kernel queues for a loopback TCP listener before accept (a flood drains through the accept loop,
#: which closes what it cannot keep at once, instead of filling a short queue and timing the owner's connect out)
BACKLOG = 128
#: unauthenticated connections one source (a uid on loopback TCP, else an address) may hold at once; its next one
#: replaces its oldest, so a flood from one source never cuts another source's handshake
MAX_PENDING_PER_SOURCE = 4


def end_reason(e: BaseException) -> str:
    """Why a connection's session ended, for its audit line (a bug ends the connection, never the server)."""
    if isinstance(e, Disconnected):
        return "peer went away" + (" in the middle of a frame" if "middle of a frame" in e.message else "")
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
    """``HOST:PORT`` (IPv6 hosts in brackets) as (host, port); raises Refused (exit 2) for anything else or a port
    outside 0..65535 (0 picks a free one)."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) < 65536:
        raise Refused(f"--listen wants HOST:PORT, e.g. 127.0.0.1:7788; port 0 picks a free one (got {text!r})")
    return host, int(port)


def check_network(host: str) -> None:
    """Refuse (exit 2) a non-loopback address: plain TCP off this machine would be readable on the network."""
    if not is_loopback(host):
        raise Refused(f"{host} is not a loopback address; tinyhw serves plain tcp on loopback only (it would be "
                      "readable on the network)",
                      hint="listen on 127.0.0.1 and reach it from another machine over ssh (remote:ssh://host/DEV, "
                           "or ssh -L PORT:127.0.0.1:PORT host)")


def tcp_listener(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host``:``port``; raises Refused for a non-loopback host, EnvironmentProblem when the
    address cannot be bound."""
    check_network(host)
    family, _, _, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
    except OSError as e:
        sock.close()
        raise EnvironmentProblem(f"cannot listen on {host}:{port}: {(e.strerror or str(e)).lower()}") from None
    sock.listen(BACKLOG)
    return sock


def unix_listener(path: Path) -> socket.socket:
    """A 0600 socket in a 0700 directory; a stale socket left by a dead server is replaced, nothing else is."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    st = path.parent.stat()
    if st.st_uid != os.geteuid() or st.st_mode & 0o077:
        raise Refused(f"the socket directory {path.parent} must belong to this user with mode 0700")
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISSOCK(mode):  # never unlink a file, fifo, symlink or directory
        raise Refused(f"{path} exists and is not a socket; refusing to replace it",
                      hint="name a path that does not exist (or a stale tinyhw socket)")
    if mode is not None:
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(path))
            raise EnvironmentProblem(f"a server is already listening on {path}")
        except (ConnectionRefusedError, FileNotFoundError):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        finally:
            probe.close()
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(str(path))
    os.chmod(path, 0o600)
    sock.listen(MAX_CONNECTIONS)
    return sock


class PeerUnknown(Exception):
    """The uid at the other end of a TCP connection could not be determined (the connection is refused)."""


class SockDiag:
    """Exact TCP socket lookups over the kernel's sock_diag netlink (:mod:`tinyhw.formats.inetdiag`).

    ``messages`` counts the netlink messages read over every lookup: one per lookup, however many sockets the
    machine has (tests check that the cost stays independent of other users' sockets).
    """

    def __init__(self) -> None:
        self.messages = 0
        self.lookups = 0
        self._seq = 0
        self._lock = threading.Lock()

    def lookup(self, family: int, local: tuple[str, int], remote: tuple[str, int]) -> inetdiag.DiagEntry | None:
        """The socket whose own end is ``local`` and other end ``remote`` (host, port), or None when the kernel has
        none; raises OSError when the kernel cannot be asked (no sock_diag) or answers something else."""
        with self._lock:
            self._seq = (self._seq + 1) & 0xFFFFFFFF
            seq = self._seq
            self.lookups += 1
        want_local, want_remote = inetdiag.endpoint(*local), inetdiag.endpoint(*remote)
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, inetdiag.NETLINK_SOCK_DIAG) as nl:
            nl.settimeout(DIAG_TIMEOUT)
            nl.sendto(inetdiag.request(family, want_local, want_remote, seq), (0, 0))
            data = nl.recv(8192)
        try:
            reply = inetdiag.parse(data, seq)
        except TinyhwError as e:
            raise OSError(e.message) from None
        with self._lock:
            self.messages += reply.messages
        if reply.errno:
            if reply.errno == errno.ENOENT:
                return None
            raise OSError(reply.errno, os.strerror(reply.errno))
        found = [e for e in reply.entries if e.local == want_local and e.remote == want_remote]
        if len(found) != 1:
            return None
        return found[0]


def _state(entry: inetdiag.DiagEntry) -> str:
    return inetdiag.STATES.get(entry.state, f"state {entry.state}")


def tcp_peer_uid(conn: socket.socket, diag: SockDiag | None = None) -> int:
    """The uid owning the client's end of the loopback connection ``conn`` (the server's accepted socket).

    Two exact lookups: the server's end (local = server, remote = client) must be ``conn`` itself (the inode
    ``fstat`` gives) and established; the client's end (the mirror image) must be established and belong to a
    file (inode not 0). A closing client (its end a timewait leftover listed with uid 0) or anything unexpected
    raises :class:`PeerUnknown`, which says why.
    """
    diag = diag if diag is not None else SockDiag()
    try:
        server, client = conn.getsockname()[:2], conn.getpeername()[:2]
        inode = os.fstat(conn.fileno()).st_ino
    except OSError as e:
        raise PeerUnknown(f"the connection is gone ({(e.strerror or str(e)).lower()})") from None
    where = f"{client[0]}:{client[1]} -> {server[0]}:{server[1]}"
    try:
        mine = diag.lookup(conn.family, server, client)
        theirs = diag.lookup(conn.family, client, server)
    except (OSError, ValueError) as e:
        raise PeerUnknown(f"cannot ask the kernel (sock_diag) who owns {where}: "
                          f"{(getattr(e, 'strerror', None) or str(e)).lower()}") from None
    if mine is None or mine.inode != inode:
        raise PeerUnknown(f"the kernel lists no socket {server[0]}:{server[1]} -> {client[0]}:{client[1]} with the "
                          f"accepted socket's inode {inode}")
    if mine.state != inetdiag.TCP_ESTABLISHED:
        raise PeerUnknown(f"the connection is {_state(mine)} already, not established")
    if theirs is None:
        raise PeerUnknown(f"the kernel lists no socket {where}")
    if theirs.state != inetdiag.TCP_ESTABLISHED or theirs.inode == 0:
        raise PeerUnknown(f"the client's socket {where} is {_state(theirs)} (inode {theirs.inode}), not an "
                          "established socket with an owner")
    return theirs.uid


class Listener:
    """Accept connections and run ``handle(channel, name)`` for each in a thread, until :meth:`stop`.

    A Unix socket peer must be this process's uid (SO_PEERCRED). With ``same_uid``, so must a TCP peer
    (looked up through ``diag``, a :class:`SockDiag` unless a test injects one); a peer whose uid
    cannot be determined is refused too.

    With ``max_pending`` (servers whose connections authenticate first, and say so by setting the
    channel's ``authenticated``), at most that many connections may be unauthenticated at once; a new one
    then evicts the oldest of them (audited), so at least ``max_connections - max_pending`` slots stay
    with authenticated clients and a newcomer always gets its chance to authenticate.
    """

    def __init__(self, sock: socket.socket, handle: Callable[[Channel, str], object], audit: Audit,
                 *, max_connections: int = MAX_CONNECTIONS, max_pending: int | None = None, same_uid: bool = False,
                 diag: SockDiag | None = None) -> None:
        self.sock = sock
        self.same_uid = same_uid
        self.diag = diag if diag is not None else SockDiag()
        self.handle = handle
        self.audit = audit
        self.max_connections = max_connections
        self.max_pending = max_pending
        self.max_pending_per_source = MAX_PENDING_PER_SOURCE
        self._stop = threading.Event()
        self._conns: list[tuple[threading.Thread, Channel, str]] = []
        self._source: dict[str, str] = {}  # connection name -> its source (for the per-source limit)
        self._n = 0
        self.unix = sock.family == socket.AF_UNIX

    @property
    def address(self) -> str:
        """Where the listener is reachable: the socket path, or ``host:port`` (``[host]:port`` for IPv6)."""
        name = self.sock.getsockname()
        if isinstance(name, str):
            return name
        return f"[{name[0]}]:{name[1]}" if ":" in name[0] else f"{name[0]}:{name[1]}"

    def serve_forever(self) -> None:
        """Accept connections until :meth:`stop`, each handled in its own thread; closes the listening socket on return.
        """
        try:
            while not self._stop.is_set():
                ready, _, _ = select.select([self.sock], [], [], 0.2)
                for _ in range(BACKLOG if ready else 0):  # drain what queued up, then look at the stop flag again
                    if not self._accept():
                        break
        finally:
            self.sock.close()

    def _accept(self) -> bool:
        """Accept one queued connection (False when none was waiting) and keep it, or refuse it."""
        self.sock.setblocking(False)
        try:
            conn, addr = self.sock.accept()
        except OSError:
            return False
        finally:
            self.sock.setblocking(True)
        conn.setblocking(True)
        self._admit(conn, addr)
        return True

    def _admit(self, conn: socket.socket, addr: str | tuple[object, ...]) -> None:
        self._n += 1
        name = f"c{self._n}"
        peer = addr if isinstance(addr, str) and addr else (f"{addr[0]}:{addr[1]}" if addr else "unix")
        self._conns = [c for c in self._conns if c[0].is_alive()]
        if self.unix:
            uid = peer_uid(conn)
            if uid != os.geteuid():
                self.audit(name, f"refused unix peer uid {uid} (server uid {os.geteuid()})")
                conn.close()
                return
            peer = f"unix uid {uid}"
        elif self.same_uid:
            try:
                uid = tcp_peer_uid(conn, self.diag)
            except PeerUnknown as e:
                self.audit(name, f"refused {peer}: cannot tell which uid connected ({e}); refusing (fail closed)")
                conn.close()
                return
            if uid != os.geteuid():
                self.audit(name, f"refused {peer}: tcp peer uid {uid} is not the server's uid {os.geteuid()}")
                conn.close()
                return
            peer = f"{peer} uid {uid}"
        if self.max_pending is not None:
            self._make_room(name, self._source_of(conn, addr))
        if len(self._conns) >= self.max_connections:
            self.audit(name, f"refused {peer}: {self.max_connections} connections already open")
            conn.close()
            return
        self.audit(name, f"connect from {peer}")
        ch = SocketChannel(conn, peer)
        t = threading.Thread(target=self._run, args=(ch, name), daemon=True)
        self._conns.append((t, ch, name))
        t.start()

    def _source_of(self, conn: socket.socket, addr: object) -> str:
        """Who a connection comes from, for the per-source limit: the uid owning a loopback TCP client's socket (an
        exact sock_diag lookup), else its address; a Unix socket's peers are all this uid."""
        if self.unix or not isinstance(addr, tuple):
            return "unix"
        with contextlib.suppress(OSError, ValueError):
            entry = self.diag.lookup(conn.family, conn.getpeername()[:2], conn.getsockname()[:2])
            if entry is not None and entry.state == inetdiag.TCP_ESTABLISHED and entry.inode:
                return f"uid {entry.uid}"
        return f"address {addr[0]}"

    def _make_room(self, name: str, source: str) -> None:
        """Before ``name`` (from ``source``) starts its handshake: a source at its limit of unauthenticated
        connections loses its oldest; when all pending slots are taken, the source holding the most loses its
        oldest. Another source's handshake is never cut for it."""
        pending = [c for c in self._conns if not c[1].authenticated]
        mine = [c for c in pending if self._source.get(c[2]) == source]
        victim = None
        if len(mine) >= self.max_pending_per_source:
            victim, why = mine[0], f"{len(mine)} connections from {source} were not authenticated yet (its limit)"
        elif self.max_pending is not None and len(pending) >= self.max_pending:
            counts: dict[str, int] = {}
            for c in pending:
                counts[self._source.get(c[2], "")] = counts.get(self._source.get(c[2], ""), 0) + 1
            top = max(counts, key=lambda k: counts[k])
            victim = next(c for c in pending if self._source.get(c[2], "") == top)
            why = f"{len(pending)} connections were not authenticated yet, {counts[top]} of them from {top}"
        if victim is not None and not victim[1].authenticated:
            _, oldest, oname = victim
            self.audit(oname, f"handshake cut: {why}, and {name} arrived")
            oldest.abort()
            self._conns = [c for c in self._conns if c[1] is not oldest]
            self._source.pop(oname, None)
        self._source[name] = source

    def _run(self, channel: Channel, name: str) -> None:
        try:
            self.handle(channel, name)
        finally:
            channel.close()
            self._source.pop(name, None)

    def stop(self, wait: float = 5.0) -> None:
        """Stop accepting, then wait up to ``wait`` seconds for each connection's thread to end."""
        self._stop.set()
        for t, _, _ in list(self._conns):
            if t.ident is not None:  # the accept loop may be between listing a connection and starting its thread
                t.join(wait)
