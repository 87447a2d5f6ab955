"""Bounded inputs of the remote client and server (issue 21 item 9, and fuzzing of both parsers).

A keyed fake server that proves the key but sends a malformed description; bad --idle-timeout values;
--socket over something that is not a stale socket; the lock holder as a remote client sees it; the
stdio server's exit after a bad hello; hypothesis fuzzing of the client's reply parsing and the server's
frame parsing (bounded: a few seconds).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from clihelp import run
from flashhelp import dev as mockdev
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from remotehelp import RawClient, recv_all, served

from tinyhw.connect import open_device
from tinyhw.errors import TinyhwError
from tinyhw.remote import protocol, session
from tinyhw.remote.channel import SocketChannel
from tinyhw.remote.client import RemoteTransport

SECRET = b"s" * 32
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))


def _keyed_fake(sock: socket.socket, first: bytes | Any, then: list[bytes] = ()) -> threading.Thread:
    """Play a server that holds SECRET: a genuine handshake whose reply payload is ``first`` (bytes, or a
    callable of the transcript), then a reply with each of ``then`` to each request."""

    def serve() -> None:
        try:
            hello = protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, protocol.AUTH_HMAC, 0, os.urandom(32))
            sock.sendall(hello)
            transcript = hello + recv_all(sock, protocol.CLIENT_HELLO.size)[:-32]
            c2s, s2c = session.session_keys(SECRET, transcript)
            tx, rx = session.Direction(s2c), session.Direction(c2s)
            body = first(transcript) if callable(first) else first
            sock.sendall(tx.seal(protocol.REPLY.pack(0, 0, 0, len(body), 0.0), body))
            for payload in then:
                (_, _, seq, _), _ = protocol.recv_frame(SocketChannel(sock, "c"), rx, protocol.REQ, 10, 10, "client")
                sock.sendall(tx.seal(protocol.REPLY.pack(0, 0, seq, len(payload), 0.0), payload))
        except (OSError, TinyhwError):
            pass
        finally:
            sock.close()

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    return t


def _doc(tmp_path: Path | None = None) -> dict:
    from tinyhw.serve.remote import describe

    with open_device("mock:navi31,timing=instant" + (f",flash={tmp_path / 'f.bin'}" if tmp_path else "")) as o:
        return describe(o.transport)


def _proved(doc: Any) -> Any:
    def body(transcript: bytes) -> bytes:
        if isinstance(doc, dict):
            return json.dumps({**doc, "server_proof": session.server_proof(SECRET, transcript).hex()}).encode()
        return doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    return body


def _connect(first: Any, then: list[bytes] = ()) -> RemoteTransport:
    a, b = socket.socketpair()
    _keyed_fake(b, first, then)
    t = RemoteTransport(SocketChannel(a, "fake"), where="fake", secret_loader=lambda: SECRET)
    try:
        return t.connect()
    except BaseException:
        a.close()
        raise


@pytest.mark.parametrize("bad", ["deep", "no-info", "bars-not-list", "clock-nan", "not-object"])
def test_a_malformed_description_is_a_clear_error(tmp_path: Path, bad: str) -> None:
    doc = _doc(tmp_path)
    body: Any = {"deep": b"[" * 100000 + b"]" * 100000, "no-info": {k: v for k, v in doc.items() if k != "info"},
                 "bars-not-list": {**doc, "bars": 7}, "clock-nan": {**doc, "clock": float("nan")},
                 "not-object": b"[1, 2]"}[bad]
    with pytest.raises(protocol.ProtocolError, match="the server sent a malformed reply") as e:
        _connect(_proved(body) if isinstance(body, dict) else body)
    assert e.value.exit_code == 1 and "\n" not in str(e.value)


def test_a_malformed_reply_after_the_handshake_is_a_clear_error(tmp_path: Path) -> None:
    deep = b"[" * 100000 + b"]" * 100000
    t = _connect(_proved(_doc(tmp_path)), [deep])
    with pytest.raises(protocol.ProtocolError, match="the server sent a malformed reply"):
        t.server_stats()
    t.channel.close()
    assert isinstance(protocol.decode_error(deep), protocol.ProtocolError)  # an error payload that deep, too


def test_the_cli_shows_a_malformed_reply_in_one_line(tmp_path: Path) -> None:
    from tests.serve.test_remote_auth import Impostor

    key = tmp_path / "k.key"
    key.write_bytes(SECRET)
    key.chmod(0o600)
    doc = {k: v for k, v in _doc(tmp_path).items() if k != "info"}

    def answer(transcript: bytes) -> bytes:
        body = _proved(doc)(transcript)
        _, s2c = session.session_keys(SECRET, transcript)
        return session.Direction(s2c).seal(protocol.REPLY.pack(0, 0, 0, len(body), 0.0), body)

    imp = Impostor(protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, protocol.AUTH_HMAC, 0, os.urandom(32)), answer)
    r = run("--device", f"remote:127.0.0.1:{imp.port},key={key}", "probe")
    imp.close()
    assert r.code == 1 and "the server sent a malformed reply" in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "0", "1e12"])
@pytest.mark.parametrize("command", ["remote", "serprog"])
def test_bad_idle_timeouts_are_refused(command: str, value: str) -> None:
    r = run("serve", command, "--device", "mock:navi31", "--idle-timeout", value)
    assert r.code == 2 and "idle timeout" in r.err and r.err.count("\n") == 1, r.err


@pytest.mark.parametrize("kind", ["file", "fifo", "symlink", "dir"])
def test_socket_path_that_is_not_a_stale_socket_is_never_replaced(tmp_path: Path, kind: str) -> None:
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="thw", dir="/tmp"))
    d.chmod(0o700)
    path, target = d / "s.sock", d / "precious"
    target.write_text("keep me")
    {"file": lambda: path.write_text("keep me"), "fifo": lambda: os.mkfifo(path),
     "symlink": lambda: path.symlink_to(target), "dir": path.mkdir}[kind]()
    r = run("serve", "remote", "--device", mockdev(tmp_path), "--socket", str(path))
    assert r.code == 2 and ("is not a socket" in r.err or kind == "dir"), r.err  # click itself refuses a dir
    assert os.path.lexists(path) and target.read_text() == "keep me"
    if kind == "file":
        assert path.read_text() == "keep me"


def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    import tempfile

    from tinyhw.serve.listen import unix_listener

    d = Path(tempfile.mkdtemp(prefix="thw", dir="/tmp"))
    d.chmod(0o700)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(d / "s.sock"))
    stale.close()  # a socket file with nobody listening: what a killed server leaves
    unix_listener(d / "s.sock").close()


def test_a_refused_client_sees_the_holders_pid_and_tool_not_its_command_line(tmp_path: Path) -> None:
    with served(mockdev(tmp_path)) as s, open_device(mockdev(tmp_path)):
        r = run("--device", s.device(), "probe")
    assert r.code == 3 and f"in use by pid {os.getpid()} (" in r.err, r.err
    assert " ".join(sys.argv[1:]) not in r.err and "(lock " not in r.err, r.err


def test_the_stdio_server_fails_after_a_bad_hello(tmp_path: Path) -> None:
    p = subprocess.run([sys.executable, "-m", "tinyhw", "serve", "remote", "--stdio", "--device", mockdev(tmp_path),
                        "--audit", str(tmp_path / "audit.log")], input=b"GET / HTTP/1.0\r\n" + bytes(60),
                       capture_output=True, timeout=60, check=False)
    assert p.returncode == 1 and b"refused at the handshake" in p.stderr, p.stderr
    assert "bad magic" in (tmp_path / "audit.log").read_text()


# -- fuzzing ------------------------------------------------------------------------------------------------------
_json_values = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
                            lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids,
                                                                                     max_size=4), max_leaves=20)


def test_fuzz_the_clients_reply_parsing(tmp_path: Path) -> None:
    """Handshake documents (mutated genuine ones, arbitrary JSON, bytes) and later replies: a tinyhw error or
    success, never another exception."""
    base = _doc(tmp_path)
    counts = {"cases": 0, "connected": 0}

    @FUZZ
    @given(st.one_of(
        st.builds(lambda k, v: {**base, k: v}, st.sampled_from(sorted(base)), _json_values),
        st.builds(lambda k, v: {**base, "info": {**base["info"], k: v}}, st.sampled_from(["emulated", "extra"]),
                  _json_values),
        _json_values, st.binary(max_size=64)), st.binary(max_size=40))
    def one(first: Any, later: bytes) -> None:
        counts["cases"] += 1
        try:
            t = _connect(_proved(first) if isinstance(first, dict) else
                         (first if isinstance(first, bytes) else json.dumps(first).encode()), [later, later])
        except TinyhwError:
            return
        counts["connected"] += 1
        try:
            t.identity(), t.bars(), t.info()
            with pytest.raises(TinyhwError):
                t.server_stats() if not later.startswith(b"{") else t.config_read(0)
        finally:
            t.channel.close()

    one()
    print(f"client reply fuzz: {counts}")


@pytest.mark.slow
def test_fuzz_the_servers_frame_parsing(tmp_path: Path) -> None:
    """Sealed frames with arbitrary headers and payloads, and raw bytes, after a genuine handshake: the
    server answers or closes, never an internal error, and keeps serving."""
    with served(mockdev(tmp_path)) as sv:

        @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.integers(0, 255), st.integers(0, 255), st.binary(max_size=48), st.booleans())
        def one(op: int, flags: int, payload: bytes, raw: bool) -> None:
            c = _handshake(sv)
            try:
                if raw:
                    c.sock.sendall(bytes([op, flags]) + payload)
                else:
                    c.sock.sendall(c.tx.seal(protocol.REQ.pack(op, flags, 1, len(payload)), payload))
                c.sock.shutdown(socket.SHUT_WR)
                try:
                    while c.reply() is not None:
                        pass
                except session.FrameRejected:
                    raise AssertionError("the server sent a frame that fails its tag") from None
                except ConnectionResetError:
                    pass  # the server closed with the bad frame partly unread: a reset, still a close
            finally:
                c.sock.close()

        one()
        sv.wait_released()
        assert not [line for line in sv.audit.lines if "internal error" in line]
        c = _handshake(sv)
        c.send(protocol.OP_PING)
        assert c.reply() == (0, b"")
        c.sock.close()


def _handshake(sv: Any) -> RawClient:
    import time

    deadline = time.monotonic() + 60  # a hang bound, not a speed check
    while True:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(sv.address)
        c = RawClient(s)
        if c.first is not None and c.first[0] == 0:
            return c
        s.close()
        assert time.monotonic() < deadline, c.first
        time.sleep(0.02)
