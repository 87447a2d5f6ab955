"""``remote:`` devices: a board served by ``tinyhw serve remote`` on this or another machine.

Layer 2: imports only the core. Three ways to reach a server, named by the device string:

=====================================  ===============================================================
``remote:unix`` / ``remote:unix:PATH``  a Unix socket (default ``$XDG_RUNTIME_DIR/tinyhw/remote.sock``);
                                        the OS authenticates both ends: the server checks that the peer
                                        runs as the same user, the client that the server does (or root)
``remote:HOST:PORT``                    TCP on a loopback address only (plain TCP off this machine is
                                        refused: it would be readable on the network); both ends prove
                                        they hold the shared key (``key=FILE`` option,
                                        ``$TINYHW_REMOTE_KEY``, or ``${XDG_CONFIG_HOME:-~/.config}/tinyhw/remote.key``)
``remote:ssh://[user@]host/DEV``        runs ``tinyhw serve remote --stdio --device DEV`` there through
                                        the system ssh (``$TINYHW_SSH``, default ``ssh``); OpenSSH
                                        authenticates and encrypts; options after
                                        commas belong to DEV (``...,/mock:navi31,strict``)
=====================================  ===============================================================

The kind of connection fixes the authentication the client demands: TCP needs the
server's proof of the key, so a key-less server (or one that cannot prove the key) is refused before any
request is sent; a Unix socket or ssh needs a key-less server (the OS or ssh has authenticated it). There
is no option for unauthenticated TCP. Every frame after the handshake is authenticated both ways
(:mod:`tinyhw.remote.session`).
"""

from __future__ import annotations

import ipaddress
import os
import random
import shlex
import socket
import subprocess
import time
from pathlib import Path

from tinyhw.errors import BadDeviceString, DeviceNotFound, DeviceTimeout, Disconnected, Refused, TinyhwError
from tinyhw.remote.channel import PipeChannel, SocketChannel, peer_uid
from tinyhw.remote.client import RemoteTransport
from tinyhw.remote.secret import default_key_path, default_socket_path, load_secret
from tinyhw.transport.devstr import DeviceSpec

CONNECT_TIMEOUT = 10.0
#: tries at a loopback TCP server's connect and handshake, and the first pause between two (:func:`_tcp`)
TCP_ATTEMPTS, TCP_BACKOFF = 5, 0.2

__all__ = ["RemoteTransport", "open_remote", "ssh_argv"]


def open_remote(spec: DeviceSpec) -> RemoteTransport:
    """Connect to the server ``spec`` names and complete the handshake (the server opens the device then)."""
    target = spec.target  # its options were checked against the board registry's entry (tinyhw.connect)
    if target.startswith("ssh://"):  # options belong to the device on the other machine
        opts = [k if v is True else f"{k}={v}" for k, v in spec.options.items()]
        t = _ssh(",".join([target, *opts]))
    elif target == "unix" or target.startswith("unix:"):
        if "key" in spec.options:
            raise BadDeviceString("a unix socket takes no key= (the server checks the peer's uid instead)")
        path = target[5:] or str(default_socket_path())
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _connect(sock, path, f"the remote socket {path}")
        owner = peer_uid(sock)
        if owner not in (os.geteuid(), 0):
            sock.close()
            raise Refused(f"the remote socket {path} is served by uid {owner}, not by this user; refusing it",
                          hint="connect only to a server you started (or root's)")
        t = RemoteTransport(SocketChannel(sock, path), where=path)
    else:
        host, _, port = target.rpartition(":")
        host = host.strip("[]")
        key = spec.option("key")
        secret = load_secret(Path(str(key)) if isinstance(key, str) else default_key_path())
        try:
            infos = socket.getaddrinfo(host, int(port), type=socket.SOCK_STREAM)
        except OSError as e:
            raise DeviceNotFound(f"cannot resolve remote host {host}: {e}") from None
        family, _, _, _, addr = infos[0]
        if not ipaddress.ip_address(addr[0]).is_loopback:  # the address connected to, not a second lookup
            raise Refused(f"{host} is not a loopback address: plain tcp off this machine is refused (it would be "
                          "readable and alterable on the network)",
                          hint=f"use remote:ssh://{host}/DEVICE, or forward the port with ssh -L")
        return _tcp(family, addr, target, secret)
    try:
        return t.connect()
    except BaseException:
        t.channel.close()
        raise


def _tcp(family: int, addr: tuple[object, ...], target: str, secret: bytes) -> RemoteTransport:
    """Connect to a loopback TCP server and complete the handshake, retrying with backoff (:data:`TCP_ATTEMPTS`,
    pauses from :data:`TCP_BACKOFF` s doubling, with jitter) when a connect times out or the handshake is cut or
    stalls: what a server under an unauthenticated connection flood may do to the owner. Nothing has reached the
    device then. A refused connect (no server there) and every other error end it at once."""
    delay = TCP_BACKOFF
    last: TinyhwError | None = None
    for attempt in range(TCP_ATTEMPTS):
        if attempt:
            time.sleep(delay * (1 + random.random()))  # the network's backoff, in wall time: no device involved
            delay *= 2
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            _connect(sock, addr, f"remote {target}")
        except DeviceNotFound as e:
            if isinstance(e.__context__, ConnectionRefusedError):
                raise
            last = e
            continue
        t = RemoteTransport(SocketChannel(sock, target), where=target, secret_loader=lambda: secret)
        try:
            return t.connect()
        except (Disconnected, DeviceTimeout) as e:
            t.channel.close()
            last = e
        except BaseException:
            t.channel.close()
            raise
    assert last is not None
    raise last


def _connect(sock: socket.socket, addr: str | tuple[object, ...], what: str) -> None:
    sock.settimeout(CONNECT_TIMEOUT)
    try:
        sock.connect(addr)
    except OSError as e:
        sock.close()
        reason = e.strerror or str(e) or type(e).__name__
        raise DeviceNotFound(f"cannot connect to {what}: {reason.lower()}",
                             hint="start `tinyhw serve remote` there, or check the address") from None


def ssh_argv(target: str) -> list[str]:
    """The command that runs the stdio server on the other machine: ``$TINYHW_SSH -T -- HOST tinyhw serve ...``."""
    rest = target[len("ssh://"):]
    host, slash, dev = rest.partition("/")
    if not host or not slash or not dev:
        raise BadDeviceString(f"bad remote device {target!r}: write remote:ssh://[user@]host/DEVICE")
    ssh = shlex.split(os.environ.get("TINYHW_SSH", "ssh"))
    remote = shlex.split(os.environ.get("TINYHW_REMOTE_TINYHW", "tinyhw"))
    command = " ".join(shlex.quote(a) for a in [*remote, "serve", "remote", "--stdio", "--device", dev])
    return [*ssh, "-T", "--", host, command]


def _ssh(target: str) -> RemoteTransport:
    argv = ssh_argv(target)
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, close_fds=True)
    except OSError as e:
        raise DeviceNotFound(f"cannot run {argv[0]}: {e.strerror}", hint="install openssh-client or set TINYHW_SSH") \
            from None
    assert proc.stdin is not None and proc.stdout is not None
    channel = _ProcChannel(proc, target)
    return RemoteTransport(channel, where=target)


class _ProcChannel(PipeChannel):
    """The pipes of an ssh child; closing them ends it (waited for briefly, then killed)."""

    def __init__(self, proc: subprocess.Popen, peer: str) -> None:
        assert proc.stdout is not None and proc.stdin is not None
        super().__init__(proc.stdout.fileno(), proc.stdin.fileno(), peer, owns=False)
        self.proc = proc

    def close(self) -> None:
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
