"""Who is at the other end of a serprog TCP connection: the kernel's exact sock_diag lookup (formats/inetdiag.py,
serve/listen.py), against a closing socket that the kernel lists with uid 0, and against a table flood."""

from __future__ import annotations

import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from clihelp import as_nobody
from flashhelp import dev as mockdev
from remotehelp import Audit, _Sink

from tinyhw.connect import open_device
from tinyhw.errors import Refused
from tinyhw.formats import inetdiag
from tinyhw.serve import serprog
from tinyhw.serve.listen import SockDiag, tcp_peer_uid
from tinyhw.transport.devstr import parse_device

ROOT = pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0,
                          reason="needs root to run a client as another uid")
ERASE_0x40000 = (b"\x13" + (1).to_bytes(3, "little") + bytes(3) + b"\x06"  # WREN
                 + b"\x13" + (4).to_bytes(3, "little") + bytes(3) + b"\x20\x04\x00\x00")  # sector erase at 0x40000
SECTOR = slice(0x40000, 0x41000)


# -- the pure codec --------------------------------------------------------------------------------------------------
def test_request_layout_follows_inet_diag_h() -> None:
    req = inetdiag.request(socket.AF_INET, inetdiag.endpoint("127.0.0.1", 0x1234),
                           inetdiag.endpoint("127.0.0.2", 0x5678), seq=7)
    assert len(req) == 16 + 56  # nlmsghdr + inet_diag_req_v2
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", req)
    assert (length, kind, flags, seq) == (72, 20, 1, 7)  # SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST, no NLM_F_DUMP
    assert req[16:18] == bytes([socket.AF_INET, 6])  # family, IPPROTO_TCP
    assert req[24:28] == b"\x12\x34\x56\x78"  # ports big-endian
    assert req[28:32] == bytes([127, 0, 0, 1]) and req[44:48] == bytes([127, 0, 0, 2])
    assert req[64:72] == b"\xff" * 8  # INET_DIAG_NOCOOKIE


def _answer(seq: int, state: int, uid: int, inode: int) -> bytes:
    body = (bytes([socket.AF_INET, state, 0, 0]) + struct.pack(">HH", 1, 2) + bytes(32) + bytes(12)
            + struct.pack("=IIIII", 0, 0, 0, uid, inode))
    return struct.pack("=IHHII", 16 + len(body), 20, 0, seq, 0) + body


def test_answers_parse_and_bad_ones_are_refused() -> None:
    reply = inetdiag.parse(_answer(3, 5, 0, 0), 3)
    assert reply.messages == 1 and reply.entries[0].state == 5 and reply.entries[0].uid == 0
    err = struct.pack("=IHHII", 20, 2, 0, 3, 0) + struct.pack("=i", -2)
    assert inetdiag.parse(err, 3).errno == 2
    with pytest.raises(Refused, match="answer to request 4"):
        inetdiag.parse(_answer(4, 1, 0, 1), 3)
    with pytest.raises(Refused, match="more than 4 messages"):  # a flood in one datagram is not read through
        inetdiag.parse(_answer(3, 1, 0, 1) * 100, 3)
    with pytest.raises(Refused, match="does not fit"):
        inetdiag.parse(_answer(3, 1, 0, 1)[:-1], 3)


# -- against the kernel ----------------------------------------------------------------------------------------------
def test_a_live_connection_is_found_with_its_owner_and_inode() -> None:
    with socket.create_server(("127.0.0.1", 0)) as srv:
        cli = socket.create_connection(srv.getsockname())
        conn, _ = srv.accept()
        with cli, conn:
            diag = SockDiag()
            assert tcp_peer_uid(conn, diag) == os.geteuid()
            mine = diag.lookup(socket.AF_INET, conn.getsockname(), conn.getpeername())
            assert mine is not None and mine.inode == os.fstat(conn.fileno()).st_ino
            assert diag.messages == 3 and diag.lookups == 3


class _Held:
    """A serprog listener whose accept loop starts only when asked (so a client can close before it)."""

    def __init__(self, flash_dev: str) -> None:
        self.audit = Audit(_Sink())  # type: ignore[arg-type]
        self.opened: list = []

        def opener(spec):
            o = open_device(spec)
            self.opened.append(o)
            return o

        server = serprog.SerprogServer(parse_device(flash_dev), self.audit, opener=opener)
        self.listener = serprog.serprog_listener(server.handle, self.audit, "127.0.0.1:0")
        self.thread = threading.Thread(target=self.listener.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.listener.sock.getsockname()[1]

    def run_until(self, what: str, timeout: float = 30.0) -> None:
        self.thread.start()
        deadline = time.monotonic() + timeout
        while not any(what in ln for ln in self.audit.lines):
            assert time.monotonic() < deadline, self.audit.lines
            time.sleep(0.02)

    def stop(self) -> None:
        self.listener.stop(10)
        self.thread.join(10)


def _wait_not_established(port: int, client_port: int) -> None:
    """Until the client's end of the connection (client_port -> port) is no longer an established socket."""
    diag = SockDiag()
    deadline = time.monotonic() + 120  # a hang bound only
    while True:
        got = diag.lookup(socket.AF_INET, ("127.0.0.1", client_port), ("127.0.0.1", port))
        if got is None or got.state != inetdiag.TCP_ESTABLISHED:
            return
        assert time.monotonic() < deadline, "the client's socket stayed established"
        time.sleep(0.02)


@ROOT
def test_a_closing_socket_of_another_uid_cannot_pass_for_root(tmp_path: Path) -> None:
    """Another uid queues WREN + erase and closes at once: its end becomes a timewait leftover that the kernel
    lists with uid 0 (root, the server's uid); the connection must still be refused and the flash untouched."""
    flash = tmp_path / "flash.bin"
    srv = _Held(mockdev(tmp_path))
    try:
        def attack() -> bytes:
            s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
            s.sendall(ERASE_0x40000)
            port = s.getsockname()[1]
            s.close()
            return str(port).encode()

        client_port = int(as_nobody(attack))
        _wait_not_established(srv.port, client_port)
        srv.run_until("refused")
    finally:
        srv.stop()
    assert srv.opened == [], srv.audit.lines  # the device was never opened
    assert not flash.exists() or flash.read_bytes()[SECTOR] != b"\xff" * 0x1000
    assert any("refusing (fail closed)" in ln for ln in srv.audit.lines), srv.audit.lines


FILL = """
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
kept = []
for i in range(n):
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    if i % 2:
        s.close()  # closed first by the client: a TIME_WAIT entry of its own
    else:
        kept.append(s)
print("filled", flush=True)
sys.stdin.read()  # keep the established half open until the test is done
"""


def _python_for_nobody() -> str:
    """A Python interpreter user nobody may run (the test venv may sit in root's home, mode 0700)."""
    for cand in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        if os.path.exists(cand) and os.access(cand, os.X_OK) and os.stat(cand).st_mode & 0o001:
            return cand
    pytest.skip("no python interpreter that user nobody may run")


@ROOT
def test_lookup_cost_does_not_grow_with_other_users_sockets(tmp_path: Path) -> None:
    """Another uid fills the socket table (hundreds of TIME_WAIT and established sockets); the owner's connection
    is looked up with one netlink message per lookup, however full the table is."""
    flood = 400
    with socket.create_server(("127.0.0.1", 0), backlog=flood + 16) as sink:
        p = subprocess.Popen([_python_for_nobody(), "-c", FILL, str(sink.getsockname()[1]), str(flood)], user=65534,
                             group=65534, extra_groups=[], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd="/")
        try:
            assert p.stdout is not None and p.stdout.readline() == "filled\n", p.stderr.read()  # type: ignore[union-attr]
            with open("/proc/net/tcp", "rb") as f:
                assert f.read().count(b"\n") > flood  # the table really holds the flood
            srv = _Held(mockdev(tmp_path))
            try:
                srv.thread.start()
                with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as s:
                    s.sendall(b"\x00")  # NOP
                    assert s.recv(1) == serprog.ACK
            finally:
                srv.stop()
        finally:
            p.communicate(timeout=60)
    diag = srv.listener.diag
    assert diag.lookups == 2 and diag.messages == 2, (diag.lookups, diag.messages)
