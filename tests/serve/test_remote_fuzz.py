"""Protocol fuzzing of `tinyhw serve remote` (issue 16 item 3; specs/pci-vfio-remote.md §12.2 items 2 and 4).

Garbage before or instead of the handshake never opens the device; after the handshake, truncated
frames, huge lengths, unknown requests and malformed or out-of-bounds batches are answered with an
error (or the connection is closed) without a single device access, and the server keeps serving.
"""

from __future__ import annotations

import os
import socket
import struct
import threading
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from remotehelp import RawClient, recv_all, served

from tinyhw.remote import protocol
from tinyhw.remote.session import TAG
from tinyhw.transport.batch import R32, W32, CfgR, Poll32, R, Sleep

FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))


def _connect(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


_recv = recv_all


def _reply(s: socket.socket) -> tuple[int, bytes] | None:
    """An unauthenticated reply (only before or instead of the handshake's success)."""
    head = _recv(s, protocol.REPLY.size + TAG)
    if len(head) < protocol.REPLY.size + TAG:
        return None  # the server closed the connection
    status, _, _, length, _ = protocol.REPLY.unpack(head[:protocol.REPLY.size])
    return status, _recv(s, length)


def _handshake(path: str) -> RawClient:
    """A raw client past the handshake; retried while the server still releases an abruptly closed peer."""
    deadline = time.monotonic() + 60  # a hang bound, not a speed check
    while True:
        c = RawClient(_connect(path))
        if c.first is not None and c.first[0] == 0:
            return c
        c.sock.close()
        assert c.first is not None and b"DeviceLocked" in c.first[1] and time.monotonic() < deadline, c.first
        time.sleep(0.05)


def _device_touches(sv) -> tuple[int, int, int]:
    c = sv.opened[-1].transport.counters
    return c.reg_reads, c.reg_writes, c.round_trips


def _still_serves(sv) -> None:
    c = _handshake(sv.address)
    try:
        c.send(protocol.OP_BATCH, protocol.encode_ops([CfgR(0, 2)]))
        assert c.reply() == (0, (0x1002).to_bytes(4, "little"))
    finally:
        c.sock.close()


def test_garbage_instead_of_the_handshake_never_opens_the_device() -> None:
    with served() as sv:

        @FUZZ
        @given(st.binary(max_size=200))
        def garbage(data: bytes) -> None:
            s = _connect(sv.address)
            try:
                _recv(s, protocol.HELLO.size)
                s.sendall(data)
                s.shutdown(socket.SHUT_WR)
                r = _reply(s)
                assert r is None or r[0] == 1
            finally:
                s.close()
            assert sv.server.opened_count == 0

        garbage()
        _still_serves(sv)
        assert sv.server.opened_count == 1  # only the check above opened it


def test_wrong_version_is_refused_before_opening() -> None:
    with served() as sv:
        s = _connect(sv.address)
        _recv(s, protocol.HELLO.size)
        s.sendall(protocol.CLIENT_HELLO.pack(protocol.MAGIC, protocol.VERSION + 1, 0, bytes(32), bytes(32)))
        r = _reply(s)
        s.close()
        assert r is not None and r[0] == 1 and b"protocol" in r[1]
        assert sv.server.opened_count == 0


_valid = st.sampled_from([R32(5, 0x0), W32(5, 0x100, 1), R(5, 0, 64), Sleep(0.001)])
_bad_tail = st.one_of(
    st.binary(min_size=1, max_size=40).filter(lambda b: b[0] not in range(1, 14)),  # unknown kind
    st.builds(lambda k: bytes([k]), st.integers(1, 8)),  # truncated operation
    st.just(protocol.encode_ops([R(5, 0xFFFFFFF0, 64)])),  # outside the bar
    st.just(protocol.encode_ops([R32(9, 0)])),  # no such bar
    st.just(protocol.encode_ops([R32(5, 2)])),  # misaligned
    st.just(protocol.encode_ops([Sleep(1e9)])),  # absurd wait
    st.just(protocol.encode_ops([Poll32(5, 0, 1, 1, 1e9, 0.0, "x")])),
    st.just(b"\x02" + struct.pack("<BII", 5, 0, 1 << 30)),  # a write longer than its batch
    st.just(b"\x07" + struct.pack("<HB", 0x10, 3)),  # config access of 3 bytes
)


def test_a_bad_batch_runs_none_of_its_operations() -> None:
    with served() as sv:
        c = _handshake(sv.address)

        @FUZZ
        @given(st.lists(_valid, max_size=5), _bad_tail)
        def bad_batch(ops, tail: bytes) -> None:
            before = _device_touches(sv)
            c.send(protocol.OP_BATCH, protocol.encode_ops(ops) + tail, 7)
            r = c.reply()
            assert r is not None and r[0] == 1, r
            assert _device_touches(sv) == before
            c.send(protocol.OP_PING, b"", 8)  # the same connection goes on
            assert c.reply() == (0, b"")

        try:
            bad_batch()
        finally:
            c.sock.close()


def test_unknown_requests_are_errors() -> None:
    with served() as sv:
        c = _handshake(sv.address)

        @FUZZ
        @given(st.integers(0, 255).filter(lambda op: op not in protocol.OPS), st.binary(max_size=64))
        def unknown(op: int, payload: bytes) -> None:
            before = _device_touches(sv)
            c.send(op, payload, 3)
            r = c.reply()
            assert r is not None and r[0] == 1 and b"unknown request" in r[1]
            assert _device_touches(sv) == before

        try:
            unknown()
        finally:
            c.sock.close()


def test_huge_length_is_refused_before_reading_and_truncated_frames_end_cleanly() -> None:
    with served() as sv:
        c = _handshake(sv.address)
        before = _device_touches(sv)
        header = protocol.REQ.pack(protocol.OP_BATCH, 0, 1, 0xFFFFFFFF)
        c.sock.sendall(header + c.tx._tag(b"H", header))  # an authentic header with a huge length
        r = c.reply()
        assert r is not None and r[0] == 1 and b"over the limit" in r[1]
        assert c.reply() is None  # then the server closes: the stream cannot be resynchronised
        c.sock.close()
        assert _device_touches(sv) == before
        # a frame cut short, then the peer goes away
        for cut in (1, protocol.REQ.size - 1, protocol.REQ.size + TAG + 3):
            c = _handshake(sv.address)
            c.sock.sendall(c.frame(protocol.OP_BATCH, bytes(20))[:cut])
            c.sock.close()
        _still_serves(sv)
        assert any("peer went away in the middle of a frame" in line for line in sv.audit.lines)


def _fake_server(hello: bytes, reply: bytes | None) -> tuple[socket.socket, threading.Thread]:
    """One end of a socket pair acting as a server: sends ``hello``, reads the client's, sends ``reply``."""
    a, b = socket.socketpair()

    def serve() -> None:
        try:
            b.sendall(hello)
            _recv(b, protocol.CLIENT_HELLO.size)
            if reply is not None:
                b.sendall(reply)
        except OSError:
            pass  # the client hung up first
        finally:
            b.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return a, t


def test_client_refuses_a_server_without_the_key_or_magic(tmp_path) -> None:
    import json

    import pytest

    from tinyhw.remote.channel import SocketChannel
    from tinyhw.remote.client import RemoteTransport

    doc = {"server_proof": "00" * 32, "identity": {}, "bars": [], "info": {"emulated": True}, "clock": 0.0,
           "clock_virtual": True}
    body = json.dumps(doc).encode()
    hello = protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, protocol.AUTH_HMAC, 0, os.urandom(32))
    sock, t = _fake_server(hello, protocol.REPLY.pack(0, 0, 0, len(body), 0.0) + body)
    client = RemoteTransport(SocketChannel(sock, "fake"), where="fake", secret_loader=lambda: b"s" * 32)
    with pytest.raises(protocol.ProtocolError, match="could not prove that it holds the key"):
        client.connect()
    sock.close()
    t.join(5)
    sock, t = _fake_server(b"SSH-2.0-OpenSSH_9.2p1 Debian\r\n" + bytes(protocol.HELLO.size), None)
    with pytest.raises(protocol.ProtocolError, match="is not a tinyhw remote server"):
        RemoteTransport(SocketChannel(sock, "fake"), where="fake").connect()
    sock.close()
