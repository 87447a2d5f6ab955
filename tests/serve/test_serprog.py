"""`tinyhw serve serprog` (issue 16 item 4; specs/flashrom-serprog.md): the O_SPIOP to ROM_SW translation
against a recording engine, and the byte protocol against the emulated board through a Python client."""

from __future__ import annotations

import os
import socket
import struct
from pathlib import Path

import pytest
from clihelp import as_nobody
from flashhelp import dev as mockdev
from remotehelp import served

from tinyhw.flash.romsw import Rx
from tinyhw.serve import serprog


class Recorder:
    """Stands in for RomSw: records the transactions asked for and answers reads with a pattern."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def transmit(self, opcode: int, address: int | None = None, data: bytes = b"") -> None:
        self.calls.append(("tx", opcode, address, data))

    def receive(self, opcode: int, count: int, address: int | None = None) -> bytes:
        self.calls.append(("rx", opcode, address, count))
        return bytes(range(count))

    def receive_stream(self, reqs: list[Rx]):
        for r in reqs:
            self.calls.append(("stream", r.opcode, r.address, r.count))
            yield bytes([r.address & 0xFF]) * r.count


def test_tx_operations_map_onto_one_transaction() -> None:
    sw = Recorder()
    assert serprog.spi_op(sw, b"\x06", 0) == b""  # WREN
    assert serprog.spi_op(sw, b"\x01\x00\x02", 0) == b""  # WRSR with two bytes: data, no address
    page = bytes(range(256))
    assert serprog.spi_op(sw, b"\x02\x12\x34\x00" + page, 0) == b""  # PP: address + 256 data bytes
    assert serprog.spi_op(sw, b"\x20\x00\x10\x00", 0) == b""  # sector erase
    assert sw.calls == [("tx", 0x06, None, b""), ("tx", 0x01, None, b"\x00\x02"),
                        ("tx", 0x02, 0x123400, page), ("tx", 0x20, 0x001000, b"")]


def test_rx_operations_with_address_dummy_and_chaining() -> None:
    sw = Recorder()
    assert serprog.spi_op(sw, b"\x9f", 3) == b"\x00\x01\x02"
    assert serprog.spi_op(sw, b"\x5a\x00\x00\x00\xff", 8) == bytes(range(1, 9))  # the dummy byte read and dropped
    data = serprog.spi_op(sw, b"\x03\x00\x01\x00", 600)  # three chained 256-byte-aligned transactions
    assert len(data) == 600
    assert sw.calls[2:] == [("stream", 3, 0x100, 256), ("stream", 3, 0x200, 256), ("stream", 3, 0x300, 88)]
    assert sw.calls[1] == ("rx", 0x5A, 0, 9)


@pytest.mark.parametrize(("write", "rlen", "why"), [
    (b"", 1, "no opcode"),
    (b"\x02\x00\x00\x00" + bytes(257), 0, "257 data bytes out"),
    (b"\x9f\x00", 3, "data out and in together"),
    (b"\x05", 300, "only for array reads"),
])
def test_what_the_engine_cannot_do_is_refused(write: bytes, rlen: int, why: str) -> None:
    with pytest.raises(serprog.SpiOpRefused, match=why):
        serprog.spi_op(Recorder(), write, rlen)


def _cmd(s: socket.socket, data: bytes, n: int) -> bytes:
    s.sendall(data)
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, f"closed after {buf!r}"
        buf += chunk
    return buf


def test_protocol_against_the_emulated_board(tmp_path: Path) -> None:
    with served(mockdev(tmp_path), kind="serprog", listen="127.0.0.1:0") as sv:
        host, port = sv.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            assert _cmd(s, b"\x10", 2) == serprog.NAK + serprog.ACK  # SYNCNOP
            assert _cmd(s, b"\x01", 3) == serprog.ACK + b"\x01\x00"
            cmdmap = _cmd(s, b"\x02", 33)[1:]
            assert all(bool(cmdmap[op // 8] >> (op % 8) & 1) == (op in serprog.SUPPORTED) for op in range(256))
            assert _cmd(s, b"\x03", 17)[1:].rstrip(b"\0") == b"tinyhw-romsw"
            assert _cmd(s, b"\x05", 2) == serprog.ACK + b"\x08"
            assert _cmd(s, b"\x08", 4) == serprog.ACK + (256).to_bytes(3, "little")
            assert _cmd(s, b"\x12\x08", 1) == serprog.ACK and _cmd(s, b"\x12\x01", 1) == serprog.NAK  # SPI only
            rdid = _cmd(s, b"\x13" + struct.pack("<I", 1)[:3] + struct.pack("<I", 3)[:3] + b"\x9f", 4)
            assert rdid == serprog.ACK + bytes([0xC8, 0x60, 0x15])
            read = _cmd(s, b"\x13" + (4).to_bytes(3, "little") + (1024).to_bytes(3, "little") + b"\x03\x00\x00\x00",
                        1025)
            assert read[0:1] == serprog.ACK
            assert read[1:] == (tmp_path / "flash.bin").read_bytes()[:1024]
            assert _cmd(s, b"\x0b", 1) == serprog.ACK  # O_INIT
            assert _cmd(s, b"\x0e" + (2_000_000).to_bytes(4, "little"), 1) == serprog.ACK  # 2 s of O_DELAY ...
            assert _cmd(s, b"\x0f", 1) == serprog.ACK  # ... executed on the board's virtual clock, no real sleep
            spi_op = b"\x13" + (2).to_bytes(3, "little") + (1).to_bytes(3, "little") + b"\x9f\x00"
            assert _cmd(s, spi_op, 1) == serprog.NAK
            assert _cmd(s, b"\x99", 1) == serprog.NAK  # unknown command
            # over the limit: closed
            assert _cmd(s, b"\x13" + (1 << 20).to_bytes(3, "little") + bytes(3), 1) == serprog.NAK
            assert s.recv(1) == b""
        clock = sv.opened[0].transport.clock
        assert clock.virtual and clock.now() >= 2.0
    assert any("refused spi operation" in line for line in sv.audit.lines)


def test_a_board_that_cannot_open_ends_the_session_at_its_first_spi_operation(tmp_path: Path) -> None:
    """The handshake is answered while the board opens in the background; when the opening fails, the first
    command that needs the board is answered NAK, the connection is closed and the audit log says why."""
    bad = f"mock:navi31,flash={tmp_path / 'missing' / 'flash.bin'},timing=instant"
    with served(bad, kind="serprog", listen="127.0.0.1:0") as sv:
        host, port = sv.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            assert _cmd(s, b"\x10", 2) == serprog.NAK + serprog.ACK  # SYNCNOP
            assert _cmd(s, b"\x01", 3) == serprog.ACK + b"\x01\x00"
            rdid = _cmd(s, b"\x13" + struct.pack("<I", 1)[:3] + struct.pack("<I", 3)[:3] + b"\x9f", 1)
            assert rdid == serprog.NAK
            assert s.recv(1) == b""
    assert any("cannot open" in line for line in sv.audit.lines), sv.audit.lines
    assert not any("device released" in line for line in sv.audit.lines)


def test_a_failed_restore_is_audited_and_the_device_still_released() -> None:
    """A pulled cable fails the rom_sw restore at the end of a session: the audit line says so, the device is still
    closed and nothing is raised into the listener."""
    import threading
    import types
    from collections import Counter

    lines: list[str] = []
    closed: list[bool] = []

    class Sw:
        def close(self) -> None:
            raise OSError("the cable is gone")

    op = serprog._Opening.__new__(serprog._Opening)
    op.server = types.SimpleNamespace(audit=lambda _name, line: lines.append(line))  # type: ignore[assignment]
    op.name, op.error = "t", None
    op.sw = Sw()  # type: ignore[assignment]
    op.opened = types.SimpleNamespace(close=lambda: closed.append(True))  # type: ignore[assignment]
    op.thread = threading.Thread(target=lambda: None)
    op.thread.start()
    op.release("closed", Counter({"03": 2}))
    assert closed == [True]
    assert lines == ["device released (closed; restoring the rom_sw controls failed: the cable is gone); "
                     "operations {'03': 2}"]


def test_pty_mode(tmp_path: Path) -> None:
    """`serve serprog` (the pty is the default): flashrom's dev=/dev/pts/N path speaks the same protocol (a Python
    client here), on a pty only this uid may open."""
    import json
    import os
    import subprocess
    import sys
    import tty

    p = subprocess.Popen([sys.executable, "-m", "tinyhw", "--json", "serve", "serprog", "--device", mockdev(tmp_path),
                          "--idle-timeout", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        doc = json.loads(p.stdout.readline())
        assert doc["flashrom"] == f"flashrom -p serprog:dev={doc['address']}:115200"
        assert os.stat(doc["address"]).st_mode & 0o777 == 0o600
        fd = os.open(doc["address"], os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        try:
            os.write(fd, b"\x13" + (1).to_bytes(3, "little") + (3).to_bytes(3, "little") + b"\x9f")
            got = b""
            while len(got) < 4:
                got += os.read(fd, 4 - len(got))
            assert got == serprog.ACK + bytes([0xC8, 0x60, 0x15])
        finally:
            os.close(fd)
        assert p.wait(timeout=30) == 0  # idle for 3 s: the device is released and the server ends
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_serprog_listens_on_loopback_only() -> None:
    from clihelp import run

    r = run("serve", "serprog", "--device", "mock:navi31", "--listen", "192.0.2.1:0")
    assert r.code == 2 and "not a loopback address" in r.err


# -- who may connect (issue 21 item 3) -----------------------------------------------------------------------------
ERASE_0x40000 = (b"\x13" + (1).to_bytes(3, "little") + bytes(3) + b"\x06"  # WREN
                 + b"\x13" + (4).to_bytes(3, "little") + bytes(3) + b"\x20\x04\x00\x00")  # sector erase at 0x40000
SECTOR = slice(0x40000, 0x41000)


def _erase_over_tcp(address: str) -> bytes:
    """WREN, then a sector erase: what another local user did; returns what the server answered (b"" if closed)."""
    host, port = address.rsplit(":", 1)
    with socket.create_connection((host.strip("[]"), int(port)), timeout=10) as s:
        try:
            s.sendall(ERASE_0x40000)
            got = b""
            while len(got) < 2:
                chunk = s.recv(2 - len(got))
                if not chunk:
                    break
                got += chunk
        except (ConnectionResetError, BrokenPipeError):
            return b""
        return got


def _all_uids(uid: int):
    """A kernel lookup that reports every socket as owned by ``uid`` (another user, simulated)."""
    from tinyhw.serve.listen import SockDiag

    class Other(SockDiag):
        def lookup(self, family, local, remote):
            got = super().lookup(family, local, remote)
            return got._replace(uid=uid) if got is not None else None

    return Other()


def test_the_same_uid_over_loopback_tcp_is_served_and_erases(tmp_path: Path) -> None:
    import os

    with served(mockdev(tmp_path), kind="serprog", listen="127.0.0.1:0") as sv:
        assert _erase_over_tcp(sv.address) == serprog.ACK + serprog.ACK
        sv.wait_released()
    assert (tmp_path / "flash.bin").read_bytes()[SECTOR] == b"\xff" * 0x1000  # the erase really happens
    assert any(f"uid {os.geteuid()}" in ln and "connect from 127.0.0.1:" in ln for ln in sv.audit.lines)
    assert any("sector erase" in ln for ln in sv.audit.lines)


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "[::1]:0"])
def test_another_uid_is_refused_before_the_device_is_opened(tmp_path: Path, listen: str) -> None:
    import os

    with served(mockdev(tmp_path), kind="serprog", listen=listen,
                listener_kwargs={"diag": _all_uids(os.geteuid() + 4242)}) as sv:
        assert _erase_over_tcp(sv.address) == b""  # closed without an answer
        assert sv.opened == []  # the device was never opened
    assert any(f"tcp peer uid {os.geteuid() + 4242} is not the server's uid {os.geteuid()}" in ln
               for ln in sv.audit.lines), sv.audit.lines


class _Failing:
    """A kernel lookup that fails (no sock_diag) or finds nothing."""

    def __init__(self, error: OSError | None) -> None:
        self.error = error

    def lookup(self, family, local, remote):
        if self.error is not None:
            raise self.error


@pytest.mark.parametrize(("diag", "why"), [
    (_Failing(PermissionError(13, "Permission denied")), "cannot ask the kernel (sock_diag) who owns 127.0.0.1:"),
    (_Failing(None), "the kernel lists no socket 127.0.0.1:"),  # the entry is not there
])
def test_a_failed_lookup_refuses_the_connection(tmp_path: Path, diag, why: str) -> None:
    with served(mockdev(tmp_path), kind="serprog", listen="127.0.0.1:0", listener_kwargs={"diag": diag}) as sv:
        assert _erase_over_tcp(sv.address) == b""
        assert sv.opened == []
    assert any(why in ln and "refusing (fail closed)" in ln for ln in sv.audit.lines), sv.audit.lines


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to connect as another uid")
def test_a_real_other_uid_cannot_erase(tmp_path: Path) -> None:
    """The attack of issue 21 item 3, for real: a child process that is uid 65534 connects and erases."""
    flash = tmp_path / "flash.bin"
    with served(mockdev(tmp_path), kind="serprog", listen="127.0.0.1:0") as sv:
        assert _erase_over_tcp(sv.address).startswith(serprog.ACK)  # the same uid (root) erases, and makes the file
        sv.wait_released()
        before = flash.read_bytes()
        assert before[SECTOR] == b"\xff" * 0x1000
        flash.write_bytes(before[:0x40000] + b"\x5a" * 0x1000 + before[0x41000:])
        before = flash.read_bytes()
        answer = as_nobody(lambda: b"answer:" + _erase_over_tcp(sv.address))  # the other user
        assert answer == b"answer:"  # closed without an ACK
        assert len(sv.opened) == 1  # only root's connection opened the device
    assert flash.read_bytes() == before
    assert any("tcp peer uid 65534 is not the server's uid 0" in ln for ln in sv.audit.lines), sv.audit.lines


def test_serprog_refuses_non_loopback_without_suggesting_an_option_it_lacks() -> None:
    from clihelp import run

    r = run("serve", "serprog", "--device", "mock:navi31", "--listen", "0.0.0.0:0")
    assert r.code == 2, r.err
    assert "loopback only" in r.err and "--allow-network" not in r.err
    assert "pseudo-terminal" in r.err


def test_help_says_who_may_connect() -> None:
    from clihelp import run

    r = run("serve", "serprog", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    assert "mode 0600" in text and "other uid" in text and "sock_diag" in text


def test_pty_is_private_even_where_devpts_hands_out_0620(monkeypatch: pytest.MonkeyPatch) -> None:
    import stat

    real = os.openpty

    def openpty_0620() -> tuple[int, int]:
        m, s = real()
        os.fchmod(s, 0o620)  # what a devpts mounted with mode=620 (Debian's default) gives
        return m, s

    monkeypatch.setattr(os, "openpty", openpty_0620)
    master, slave, path = serprog.open_pty()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    finally:
        os.close(master)
        os.close(slave)


def test_pty_and_listen_together_are_refused() -> None:
    from clihelp import run

    r = run("serve", "serprog", "--device", "mock:navi31", "--pty", "--listen", "127.0.0.1:0")
    assert r.code == 2 and "choose one" in r.err


# -- delays (issue 21 item 7) -----------------------------------------------------------------------------------------
def _delay(us: int) -> bytes:
    return b"\x0e" + us.to_bytes(4, "little")


def test_delay_limits() -> None:
    assert serprog.delay_refusal(serprog.MAX_DELAY_US, 0, 0) is None
    assert "per delay" in (serprog.delay_refusal(serprog.MAX_DELAY_US + 1, 0, 0) or "")
    assert "per delay" in (serprog.delay_refusal(0xFFFFFFFF, 0, 0) or "")  # the largest u32: 71 minutes
    assert "before o_exec" in (serprog.delay_refusal(6_000_000, 6_000_000, 6_000_000) or "")
    assert "this session" in (serprog.delay_refusal(1, 0, serprog.MAX_SESSION_DELAY_US) or "")
    assert serprog.delay_refusal(1, 0, serprog.MAX_SESSION_DELAY_US - 1) is None


def test_o_delay_beyond_the_caps_is_naked_and_not_slept(tmp_path: Path) -> None:
    with served(mockdev(tmp_path), kind="serprog", listen="127.0.0.1:0") as sv:
        host, port = sv.address.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=10) as s:
            assert _cmd(s, _delay(0xFFFFFFFF), 1) == serprog.NAK  # one absurd delay
            # 12 s queued before o_exec
            assert _cmd(s, _delay(6_000_000) + _delay(6_000_000), 2) == serprog.ACK + serprog.NAK
            assert _cmd(s, b"\x0f", 1) == serprog.ACK  # runs the 6 s that were accepted
            clock = sv.opened[0].transport.clock
            start = clock.now()
            rounds = serprog.MAX_SESSION_DELAY_US // serprog.MAX_DELAY_US - 1  # the 6 s above count too
            assert _cmd(s, (_delay(serprog.MAX_DELAY_US) + b"\x0f") * rounds, 2 * rounds) == serprog.ACK * (2 * rounds)
            assert _cmd(s, _delay(4_000_000), 1) == serprog.ACK  # exactly the session's total
            assert _cmd(s, _delay(1) + b"\x0f", 2) == serprog.NAK + serprog.ACK  # one microsecond more is refused
            assert clock.now() - start == pytest.approx(rounds * 10.0 + 4.0, abs=1e-3)  # the NAKed delays never ran
            spi_op = b"\x13" + (1).to_bytes(3, "little") + (3).to_bytes(3, "little") + b"\x9f"
            assert _cmd(s, spi_op, 4)[:1] == serprog.ACK
        sv.wait_released()
    naks = [ln for ln in sv.audit.lines if "nak: o_delay" in ln]
    assert len(naks) == 1 and "over the limit of 10000000 us per delay" in naks[0]  # the first in full ...
    assert any("'delay refused': 3" in ln for ln in sv.audit.lines if "device released" in ln)  # ... all counted


# -- fuzzing the command parser ---------------------------------------------------------------------------------------
class _Clock:
    virtual = True

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


class _Bytes:
    """A channel fed from a byte string: Disconnected at its end, like a peer that went away."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.sent = data, 0, bytearray()

    def recv_exact(self, n: int, _timeout: float | None) -> bytes:
        from tinyhw.errors import Disconnected

        if self.pos + n > len(self.data):
            raise Disconnected("end of input")
        self.pos += n
        return self.data[self.pos - n:self.pos]

    def sendall(self, data: bytes) -> None:
        self.sent += data


def test_fuzzed_command_streams_never_crash_the_session() -> None:
    """Bounded (300 streams, a few seconds): any byte stream ends the session by end of input or by closing an
    oversized operation; every answer starts with ACK or NAK; no wait beyond the caps reaches the clock."""
    from collections import Counter

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from tinyhw.errors import Disconnected
    from tinyhw.serve.listen import Audit

    spiop = st.builds(lambda w, r: b"\x13" + len(w).to_bytes(3, "little") + r.to_bytes(3, "little") + w,
                      st.binary(max_size=300), st.integers(0, 1100))
    cmd = st.one_of(st.binary(min_size=1, max_size=8), spiop,
                    st.builds(_delay, st.integers(0, 0xFFFFFFFF)),
                    st.sampled_from([bytes([op]) for op in serprog.SUPPORTED]))
    stats: Counter[str] = Counter()

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(cmd, max_size=40))
    def stream(cmds: list[bytes]) -> None:
        sw = Recorder()
        sw.clock = _Clock()  # type: ignore[attr-defined]
        ch = _Bytes(b"".join(cmds))
        server = serprog.SerprogServer(None, Audit(_Sink()))  # type: ignore[arg-type]
        try:
            reason = server.session(ch, "fuzz", _Ready(sw), Counter())  # type: ignore[arg-type]
            assert reason == "oversized spi operation"
            stats["closed oversized"] += 1
        except Disconnected:
            stats["end of input"] += 1
        assert not ch.sent or ch.sent[:1] in (serprog.ACK, serprog.NAK)
        assert all(0 <= s <= serprog.MAX_DELAY_US * 1e-6 for s in sw.clock.sleeps)
        assert sum(sw.clock.sleeps) <= serprog.MAX_SESSION_DELAY_US * 1e-6
        stats["cases"] += 1

    stream()
    print(dict(stats))
    assert stats["cases"] >= 100


class _Ready:
    """A device that is already open (what the session waits for)."""

    def __init__(self, sw: object) -> None:
        self.sw = sw

    def get(self) -> object:
        return self.sw


class _Sink:
    def write(self, _s: str) -> None:
        pass

    def flush(self) -> None:
        pass


def test_fuzzed_spi_operations_are_answered_or_refused() -> None:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(st.binary(max_size=300), st.integers(0, serprog.MAX_READ))
    def op(write: bytes, rlen: int) -> None:
        refused = False
        try:
            data = serprog.spi_op(Recorder(), write, rlen)
        except serprog.SpiOpRefused:
            refused = True
        assert refused or len(data) == rlen

    op()
