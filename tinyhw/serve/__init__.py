"""``tinyhw serve``: serve a device to other programs.

* :mod:`~tinyhw.serve.remote`: the tinyhw remote protocol, for ``remote:`` clients (Unix socket, loopback
  TCP with an HMAC key, or stdio under ssh).
* :mod:`~tinyhw.serve.serprog`: a flashrom serprog programmer backed by the board's SMUIO ROM_SW engine.

Layer 3.5: above the features (it uses :mod:`tinyhw.flash`'s engine driver) and :mod:`tinyhw.connect`
(it opens the device it serves, with the device lock), below the CLI.
"""

from __future__ import annotations

import contextlib
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from tinyhw.errors import OperationFailed, Refused
from tinyhw.remote.channel import Channel, PipeChannel
from tinyhw.serve.listen import MAX_CONNECTIONS, Audit, Listener, parse_listen, tcp_listener, unix_listener


def make_listener(handle: Callable[[Channel, str], object], audit: Audit, *, listen: str | None,
                  socket_path: Path | None, handshakes: bool = False) -> Listener:
    """A TCP listener for ``listen`` (HOST:PORT, loopback only), else a Unix socket at ``socket_path``.

    ``handshakes``: the server's connections authenticate first (the remote server), so one slot is kept
    for authenticated ones (:class:`~tinyhw.serve.listen.Listener`).
    """
    if listen:
        host, port = parse_listen(listen)
        sock = tcp_listener(host, port)
    else:
        assert socket_path is not None
        sock = unix_listener(socket_path)
    return Listener(sock, handle, audit, max_pending=MAX_CONNECTIONS - 1 if handshakes else None)


def serve_stdio(handle: Callable[[Channel, str], object], audit: Audit) -> None:
    """One connection on this process's stdin/stdout (under ssh). Stray prints go to stderr, not the stream.

    A client refused at the handshake (bad magic, wrong version) makes this fail (exit 1), not succeed.
    """
    out = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    audit("stdio", f"connect over stdio (ssh client {os.environ.get('SSH_CLIENT', 'unknown').split(' ')[0]})")
    channel = PipeChannel(0, out, "stdio", owns=False)
    try:
        served = handle(channel, "stdio")
    finally:
        os.close(out)
    if served is False:
        raise OperationFailed("the stdio client was refused at the handshake (see the audit log)",
                              hint="run this through remote:ssh://host/DEVICE from a tinyhw of the same version")


def audit_stream(path: str | None, stdio: bool) -> TextIO:
    """stderr, or a file (the default for stdio, whose stderr reaches the ssh user's terminal)."""
    if path == "-" or (path is None and not stdio):
        return sys.stderr
    if path is None:
        base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
        path = str(Path(base) / "tinyhw" / "serve-audit.log")
    with contextlib.suppress(FileNotFoundError):
        if not stat.S_ISREG(os.stat(path).st_mode):  # a fifo would block the server, a device node take the lines
            raise Refused(f"refusing to append the audit log to {path}: it is not a regular file",
                          hint="name a regular file, or - for stderr")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    return open(path, "a", encoding="utf-8")
