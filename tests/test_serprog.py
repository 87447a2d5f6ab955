"""`tinyhw serve serprog` (issue 16 item 4; specs/flashrom-serprog.md): the O_SPIOP to ROM_SW translation
against a recording engine, and the byte protocol against the emulated board through a Python client."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import pytest

from tests.flashhelp import dev as mockdev
from tests.remotehelp import served
from tinyhw.flash.romsw import Rx
from tinyhw.serve import serprog as S


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
    assert S.spi_op(sw, b"\x06", 0) == b""  # WREN
    assert S.spi_op(sw, b"\x01\x00\x02", 0) == b""  # WRSR with two bytes: data, no address
    page = bytes(range(256))
    assert S.spi_op(sw, b"\x02\x12\x34\x00" + page, 0) == b""  # PP: address + 256 data bytes
    assert S.spi_op(sw, b"\x20\x00\x10\x00", 0) == b""  # sector erase
    assert sw.calls == [("tx", 0x06, None, b""), ("tx", 0x01, None, b"\x00\x02"),
                        ("tx", 0x02, 0x123400, page), ("tx", 0x20, 0x001000, b"")]


def test_rx_operations_with_address_dummy_and_chaining() -> None:
    sw = Recorder()
    assert S.spi_op(sw, b"\x9f", 3) == b"\x00\x01\x02"
    assert S.spi_op(sw, b"\x5a\x00\x00\x00\xff", 8) == bytes(range(1, 9))  # the dummy byte read and dropped
    data = S.spi_op(sw, b"\x03\x00\x01\x00", 600)  # three chained 256-byte-aligned transactions
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
    with pytest.raises(S.SpiOpRefused, match=why):
        S.spi_op(Recorder(), write, rlen)


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
            assert _cmd(s, b"\x10", 2) == S.NAK + S.ACK  # SYNCNOP
            assert _cmd(s, b"\x01", 3) == S.ACK + b"\x01\x00"
            cmdmap = _cmd(s, b"\x02", 33)[1:]
            assert all(bool(cmdmap[op // 8] >> (op % 8) & 1) == (op in S.SUPPORTED) for op in range(256))
            assert _cmd(s, b"\x03", 17)[1:].rstrip(b"\0") == b"tinyhw-romsw"
            assert _cmd(s, b"\x05", 2) == S.ACK + b"\x08"
            assert _cmd(s, b"\x08", 4) == S.ACK + (256).to_bytes(3, "little")
            assert _cmd(s, b"\x12\x08", 1) == S.ACK and _cmd(s, b"\x12\x01", 1) == S.NAK  # SPI only
            rdid = _cmd(s, b"\x13" + struct.pack("<I", 1)[:3] + struct.pack("<I", 3)[:3] + b"\x9f", 4)
            assert rdid == S.ACK + bytes([0xC8, 0x60, 0x15])
            read = _cmd(s, b"\x13" + (4).to_bytes(3, "little") + (1024).to_bytes(3, "little") + b"\x03\x00\x00\x00",
                        1025)
            assert read[0:1] == S.ACK
            assert read[1:] == (tmp_path / "flash.bin").read_bytes()[:1024]
            assert _cmd(s, b"\x0b", 1) == S.ACK  # O_INIT
            assert _cmd(s, b"\x0e" + (2_000_000).to_bytes(4, "little"), 1) == S.ACK  # 2 s of O_DELAY ...
            assert _cmd(s, b"\x0f", 1) == S.ACK  # ... executed on the board's virtual clock, no real sleep
            assert _cmd(s, b"\x13" + (2).to_bytes(3, "little") + (1).to_bytes(3, "little") + b"\x9f\x00", 1) == S.NAK
            assert _cmd(s, b"\x99", 1) == S.NAK  # unknown command
            assert _cmd(s, b"\x13" + (1 << 20).to_bytes(3, "little") + bytes(3), 1) == S.NAK  # over the limit: closed
            assert s.recv(1) == b""
        clock = sv.opened[0].transport.clock
        assert clock.virtual and clock.now() >= 2.0
    assert any("refused spi operation" in line for line in sv.audit.lines)


def test_pty_mode(tmp_path: Path) -> None:
    """`serve serprog --pty`: flashrom's dev=/dev/pts/N path speaks the same protocol (a Python client here)."""
    import json
    import os
    import subprocess
    import sys
    import tty

    p = subprocess.Popen([sys.executable, "-m", "tinyhw", "--json", "serve", "serprog", "--device", mockdev(tmp_path),
                          "--pty", "--idle-timeout", "3"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        doc = json.loads(p.stdout.readline())
        assert doc["flashrom"] == f"flashrom -p serprog:dev={doc['address']}:115200"
        fd = os.open(doc["address"], os.O_RDWR | os.O_NOCTTY)
        tty.setraw(fd)
        try:
            os.write(fd, b"\x13" + (1).to_bytes(3, "little") + (3).to_bytes(3, "little") + b"\x9f")
            got = b""
            while len(got) < 4:
                got += os.read(fd, 4 - len(got))
            assert got == S.ACK + bytes([0xC8, 0x60, 0x15])
        finally:
            os.close(fd)
        assert p.wait(timeout=30) == 0  # idle for 3 s: the device is released and the server ends
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


def test_serprog_listens_on_loopback_only() -> None:
    from tests.clihelp import run

    r = run("serve", "serprog", "--device", "mock:navi31", "--listen", "192.0.2.1:0")
    assert r.code == 2 and "not a loopback address" in r.err
