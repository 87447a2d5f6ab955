"""Mutual authentication and authenticated frames of the remote protocol (issue 21 items 1-2).

Impostor servers on loopback (no auth, the wrong key, a replayed proof) are refused by a keyed client
before it sends any request; a man-in-the-middle proxy that flips a byte, drops, replays, reorders or
truncates frames in either direction is detected and the session ends with one line, audited on the server.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev as mockdev
from remotehelp import RawClient, recv_all, served

from tinyhw.connect import open_device
from tinyhw.errors import Disconnected, TinyhwError
from tinyhw.remote import protocol, session
from tinyhw.remote.secret import load_secret, write_secret

KEEP = object()  # a hook's answer: forward the frame as it is
CLOSE = b""      # in a hook's list: cut both connections there


def _listener() -> socket.socket:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(4)
    s.settimeout(20)
    return s


class Impostor:
    """A TCP listener that answers like a tinyhw server would, without the key; records what the client sends."""

    def __init__(self, hello: bytes, answer: Callable[[bytes], bytes]) -> None:
        self.sock = _listener()
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self._hello, self._answer = hello, answer
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        try:
            c, _ = self.sock.accept()
        except OSError:
            return
        with c:
            c.settimeout(20)
            c.sendall(self._hello)
            self.received = recv_all(c, protocol.CLIENT_HELLO.size)
            try:
                c.sendall(self._answer(self.hello_and(self.received)))
                while chunk := c.recv(65536):  # anything after the client's hello would be a request
                    self.received += chunk
            except OSError:
                pass

    def hello_and(self, client_hello: bytes) -> bytes:
        return self._hello + client_hello[:-32]

    def close(self) -> None:
        self.sock.close()
        self.thread.join(10)


def _description(tmp_path: Path) -> dict:
    from tinyhw.serve.remote import describe

    with open_device(mockdev(tmp_path)) as o:
        return describe(o.transport)


def _sealed_reply(secret: bytes, transcript: bytes, doc: dict) -> bytes:
    _, s2c = session.session_keys(secret, transcript)
    body = json.dumps(doc).encode()
    return session.Direction(s2c).seal(protocol.REPLY.pack(0, 0, 0, len(body), 0.0), body)


def _probe_refused(port: int, key: Path, imp: Impostor, what: str, sent: int = protocol.CLIENT_HELLO.size) -> None:
    r = run("--device", f"remote:127.0.0.1:{port},key={key}", "probe")
    imp.close()
    assert r.code == 1 and what in r.err and r.err.count("\n") == 1, (r.code, r.err)
    assert len(imp.received) == sent  # at most its hello: no request reached the impostor


def test_a_server_without_authentication_is_refused(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    doc = _description(tmp_path)
    imp = Impostor(protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, protocol.AUTH_NONE, 0, os.urandom(32)),
                   lambda transcript: _sealed_reply(b"", transcript, doc))
    _probe_refused(imp.port, key, imp, "offers no authentication", sent=0)  # not even its hello


def test_a_server_with_the_wrong_key_is_refused(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    wrong = load_secret(write_secret(tmp_path / "wrong.key"))
    doc = _description(tmp_path)

    def answer(transcript: bytes) -> bytes:
        return _sealed_reply(wrong, transcript, {**doc, "server_proof": session.server_proof(wrong, transcript).hex()})

    imp = Impostor(protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, protocol.AUTH_HMAC, 0, os.urandom(32)), answer)
    _probe_refused(imp.port, key, imp, "could not prove that it holds the key")


def test_a_replayed_server_proof_is_refused(tmp_path: Path) -> None:
    """A recorded session of the real server (its hello and first frame) replayed to a new client."""
    key = write_secret(tmp_path / "k.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key)) as s:
        rec: dict[str, bytes] = {}
        proxy = Proxy(s.address, lambda d, i, f: rec.setdefault(f"{d}{i}", f) and KEEP)
        with open_device(f"remote:127.0.0.1:{proxy.port},key={key}") as o:
            o.transport.config_read(0)
        proxy.close()
    hello, first = rec["s2c-1"], rec["s2c0"]
    assert protocol.HELLO.unpack(hello)[2] == protocol.AUTH_HMAC and b"server_proof" in first
    imp = Impostor(hello, lambda _transcript: first)
    _probe_refused(imp.port, key, imp, "could not prove that it holds the key")


def test_the_genuine_server_is_accepted_through_the_proxy(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key)) as s:
        proxy = Proxy(s.address, lambda d, i, f: KEEP)
        r = run("--device", f"remote:127.0.0.1:{proxy.port},key={key}", "--json", "probe")
        proxy.close()
    assert r.code == 0 and json.loads(r.out)["device_id"] == 0x744C, r.err


# -- a man in the middle -----------------------------------------------------------------------------------------
class Proxy:
    """Loopback TCP proxy to ``target`` that splits both streams into frames and lets ``hook`` rewrite them.

    ``hook(direction, index, frame)`` gets ``"c2s"``/``"s2c"``, the frame's index (-1 for the hellos,
    then 0, 1, ...) and its bytes; it returns KEEP or a list of byte strings to send instead (CLOSE cuts).
    """

    def __init__(self, target: str, hook: Callable[[str, int, bytes], object]) -> None:
        host, _, port = target.rpartition(":")
        self.target = (host.strip("[]"), int(port))
        self.hook = hook
        self.sock = _listener()
        self.port = self.sock.getsockname()[1]
        self.threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self.threads.append(t)

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(self.target, timeout=20)
            for args in ((c, u, "c2s", protocol.CLIENT_HELLO.size, protocol.REQ),
                         (u, c, "s2c", protocol.HELLO.size, protocol.REPLY)):
                t = threading.Thread(target=self._pump, args=args, daemon=True)
                t.start()
                self.threads.append(t)

    def _pump(self, src: socket.socket, dst: socket.socket, d: str, hello: int, head: object) -> None:
        try:
            frame, i = recv_all(src, hello), -1
            while frame:
                out = self.hook(d, i, frame)
                for piece in ([frame] if out is KEEP else out):  # type: ignore[union-attr]
                    if piece == CLOSE:
                        raise OSError("cut")
                    dst.sendall(piece)
                frame, i = _frame(src, head), i + 1  # type: ignore[arg-type]
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.sock.close()


def _frame(src: socket.socket, head: object) -> bytes:
    h = recv_all(src, head.size + session.TAG)  # type: ignore[attr-defined]
    if len(h) < head.size + session.TAG:  # type: ignore[attr-defined]
        return b""
    length = head.unpack(h[:head.size])[3]  # type: ignore[attr-defined]
    return h + (recv_all(src, length + session.TAG) if length else b"")


def _flip(frame: bytes, at: int) -> bytes:
    b = bytearray(frame)
    b[at] ^= 0x04
    return bytes(b)


def _wait_audit(s, text: str) -> str:
    import time

    deadline = time.monotonic() + 60  # a hang bound, not a speed check
    while time.monotonic() < deadline:
        hit = [line for line in s.audit.lines if text in line]
        if hit:
            return hit[-1]
        time.sleep(0.02)
    raise AssertionError(f"no audit line with {text!r}: {s.audit.lines[-5:]}")


ATTACKS: dict[str, Callable[[int, bytes, dict], object]] = {
    # frame index 1 is the second request (or reply) after the handshake
    "flip-payload": lambda i, f, st: [_flip(f, -session.TAG - 1)] if i == 1 else KEEP,  # the payload's last byte
    "flip-length": lambda i, f, st: [_flip(f, 6)] if i == 1 else KEEP,  # caught at once, not by a stalled read
    "replay": lambda i, f, st: [f, f] if i == 1 else KEEP,
    "truncate": lambda i, f, st: [f[:len(f) - 5], CLOSE] if i == 1 else KEEP,
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
@pytest.mark.parametrize("direction", ["c2s", "s2c"])
def test_the_real_client_detects_or_the_server_rejects_a_tampered_stream(tmp_path: Path, attack: str,
                                                                          direction: str) -> None:
    key = write_secret(tmp_path / "k.key")
    state: dict = {}
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key)) as s:
        hook = ATTACKS[attack]
        proxy = Proxy(s.address, lambda d, i, f: hook(i, f, state) if d == direction else KEEP)
        proxy.seen = {}
        real = proxy.hook
        proxy.hook = lambda d, i, f: (proxy.seen.setdefault(i, f) if d == direction else None, real(d, i, f))[1]
        r = run("--device", f"remote:127.0.0.1:{proxy.port},key={key}", "flash", "info")
        proxy.close()
        assert r.code == 1 and r.err.count("\n") == 1, (r.code, r.err)
        if direction == "s2c" and attack != "truncate":
            assert "failed authentication" in r.err, r.err
        elif direction == "s2c":
            assert "closed in the middle of a frame" in r.err, r.err
        else:
            assert "closed" in r.err, r.err
        line = _wait_audit(s, "device released")
        if direction == "c2s" and attack == "truncate":
            assert "in the middle of a frame" in line, line
        elif direction == "c2s":  # a flipped frame 1 fails as itself, a replayed one in the place of frame 2
            assert len(proxy.seen[1]) > 8 + 2 * session.TAG  # the frame attacked had a payload
            n = 2 if attack == "replay" else 1
            assert f"rejected a frame: frame {n} from the client failed authentication" in line, line


REORDER: dict[str, Callable[[int, bytes, dict], object]] = {
    "drop": lambda i, f, st: [] if i == 1 else KEEP,
    "reorder": lambda i, f, st: (st.__setitem__("held", f) or []) if i == 1 else ([f, st["held"]] if i == 2
                                                                                    else KEEP),
}


@pytest.mark.parametrize("attack", sorted(REORDER))
@pytest.mark.parametrize("direction", ["c2s", "s2c"])
def test_a_dropped_or_reordered_frame_is_detected(tmp_path: Path, attack: str, direction: str) -> None:
    """Two requests in flight (a pipelining client), so that a later frame arrives after the gap or swap."""
    key = load_secret(write_secret(tmp_path / "k.key"))
    state: dict = {}
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=key) as s:
        hook = REORDER[attack]
        skip = 1 if direction == "s2c" else 0  # the server's frame 0 is its handshake reply: attack its frame 2
        proxy = Proxy(s.address, lambda d, i, f: hook(i - skip, f, state) if d == direction else KEEP)
        c = RawClient(socket.create_connection(("127.0.0.1", proxy.port), timeout=20), key)
        assert c.first is not None and c.first[0] == 0
        c.sock.sendall(b"".join(c.frame(protocol.OP_PING, b"", n) for n in (1, 2, 3)))
        assert c.reply() == (0, b"")  # frame 0 is untouched
        if direction == "s2c":
            with pytest.raises(session.FrameRejected, match="frame 2 from server failed authentication"):
                c.reply()
        else:
            assert c.reply() is None  # the server closed the session
            assert "rejected a frame: frame 1 from the client" in _wait_audit(s, "device released")
        c.sock.close()
        proxy.close()


def test_an_injected_frame_ends_the_session(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key)) as s:
        proxy = Proxy(s.address, lambda d, i, f: [protocol.REQ.pack(protocol.OP_PING, 0, 9, 0) + bytes(session.TAG), f]
                      if (d, i) == ("c2s", 0) else KEEP)
        with pytest.raises(TinyhwError) as e, open_device(f"remote:127.0.0.1:{proxy.port},key={key}") as o:
            o.transport.config_read(0)
        proxy.close()
        assert isinstance(e.value, Disconnected)
        assert "rejected a frame: frame 0 from the client" in _wait_audit(s, "device released")


# -- slow clients (issue 21 item 4) ------------------------------------------------------------------------------
class Trickler:
    """A TCP peer that sends one byte every ``every`` seconds (never a complete hello) until the server cuts it."""

    def __init__(self, address: str, every: float = 0.1) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=20)
        self.closed_after: float | None = None
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(every,), daemon=True)
        self.thread.start()

    def _run(self, every: float) -> None:
        import time

        t0 = time.monotonic()
        try:
            recv_all(self.sock, protocol.HELLO.size)
            self.sock.settimeout(every)
            while not self._stop.is_set():
                self.sock.sendall(b"T")
                try:
                    if self.sock.recv(1) == b"":
                        break
                except TimeoutError:
                    continue
        except OSError:
            pass
        self.closed_after = time.monotonic() - t0

    def stop(self) -> None:
        self._stop.set()
        self.thread.join(10)
        self.sock.close()


def test_a_handshake_has_one_deadline_across_its_receives(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key), handshake_timeout=0.5) as s:
        slow = Trickler(s.address, every=0.1)  # 76 bytes at 10/s would take 7.6 s; per-receive timeouts never fire
        slow.thread.join(5)
        slow.stop()
        assert slow.closed_after is not None and slow.closed_after < 3, slow.closed_after
        assert "handshake timed out: no complete hello within 0.5 s" in _wait_audit(s, "handshake timed out")
        assert s.server.opened_count == 0


def test_slow_peers_holding_every_slot_do_not_lock_the_owner_out(tmp_path: Path) -> None:
    key = write_secret(tmp_path / "k.key")
    with served(mockdev(tmp_path), listen="127.0.0.1:0", secret=load_secret(key), handshake_timeout=60) as s:
        slow = [Trickler(s.address, every=0.2) for _ in range(8)]
        try:
            _wait_audit(s, "connect from")
            r = run("--device", f"remote:{s.address},key={key}", "--json", "probe")
            assert r.code == 0 and json.loads(r.out)["device_id"] == 0x744C, r.err
            assert "were not authenticated yet" in _wait_audit(s, "handshake cut")
            # an authenticated session keeps its slot while 7 slow peers (the most allowed) wait
            with open_device(f"remote:{s.address},key={key}") as o:
                slow += [Trickler(s.address, every=0.2) for _ in range(8)]
                assert o.transport.config_read(0) == 0x744C1002
        finally:
            for t in slow:
                t.stop()
        assert not any("already open" in line for line in s.audit.lines), s.audit.lines


HOSTILE = "\x1b]0;owned\x07\x1b[2J\x1b[31mdevice on fire\x1b[0m\nerror: fake second line\u202e" + "A" * 5000


@pytest.mark.parametrize("kind", ["DeviceLocked", "Interrupted", "Refused"])
def test_an_impostors_error_is_escaped_bounded_and_does_not_pick_the_exit_code(tmp_path: Path, kind: str) -> None:
    """An impostor (no key) answers the handshake with an unauthenticated error full of terminal escapes, a second
    line and a bidi override, naming an error class with another exit code: the client prints it escaped, cut to
    a bounded length, on one line, and exits 2 (its own code: refused before anything was touched)."""
    key = write_secret(tmp_path / "k.key")
    body = json.dumps({"type": kind, "message": HOSTILE[:1500], "hint": HOSTILE[:1500], "op": None}).encode()
    frame = protocol.REPLY.pack(1, 0, 0, len(body), 0.0) + os.urandom(session.TAG) + body + os.urandom(session.TAG)
    imp = Impostor(protocol.HELLO.pack(protocol.MAGIC, protocol.VERSION, protocol.AUTH_HMAC, 0, os.urandom(32)),
                   lambda transcript: frame)
    r = run("--device", f"remote:127.0.0.1:{imp.port},key={key}", "probe")
    imp.close()
    assert r.code == 2, (r.code, r.err)
    assert "\x1b" not in r.err and "\x07" not in r.err and "\u202e" not in r.err, repr(r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("error: ")
    assert "\\x1b]0;owned\\x07" in r.err and "\\u202e" in r.err
    assert "before proving it holds the key" in r.err
    assert len(r.err) < 2 * protocol.PEER_TEXT_LIMIT + 400, len(r.err)
    assert len(imp.received) == protocol.CLIENT_HELLO.size  # no request reached the impostor


def test_an_authenticated_servers_error_keeps_its_exit_code_but_is_escaped() -> None:
    err = protocol.decode_error(json.dumps({"type": "DeviceLocked", "message": "in use \x1b[2J", "hint": None})
                                .encode())
    assert err.exit_code == 3 and "\x1b" not in err.message and "\\x1b[2J" in err.message
    err = protocol.decode_error(json.dumps({"type": "DeviceLocked", "message": "x", "hint": None}).encode(),
                                trusted=False)
    assert err.exit_code == 2
