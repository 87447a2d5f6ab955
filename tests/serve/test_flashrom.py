"""Debian's flashrom against `tinyhw serve serprog` on the emulated boards (issue 16 item 5).

An independent client, with its own chip database and erase/write/verify logic, drives both the ROM_SW
driver path and the emulated GD25LQ16E: probe finds the chip (C8 60 15), a read equals `tinyhw flash
dump`, a changed image is written and verified, and the chip is erased. Needs the flashrom package
(`apt-get install flashrom`); skipped with that reason when it is missing, unless
TINYHW_REQUIRE_FLASHROM=1 (CI), where a missing flashrom fails.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev as mockdev
from remotehelp import served

FLASHROM = shutil.which("flashrom") or next((p for p in ("/usr/sbin/flashrom", "/sbin/flashrom")
                                             if os.access(p, os.X_OK)), None)
if FLASHROM is None and os.environ.get("TINYHW_REQUIRE_FLASHROM") != "1":
    pytest.skip("flashrom is not installed (apt-get install flashrom)", allow_module_level=True)


def flashrom(address: str, *args: str) -> str:
    assert FLASHROM is not None, "TINYHW_REQUIRE_FLASHROM=1 but flashrom is not installed"
    r = subprocess.run([FLASHROM, "-p", f"serprog:ip={address}", *args], capture_output=True, text=True,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
    return r.stdout


def _changed(image: bytes) -> bytes:
    out = bytearray(image)
    out[0x80010:0x80020] = b"flashrom-wrote!!"  # a few bytes in one sector ...
    out[0x81000:0x82000] = random.Random(16).randbytes(0x1000)  # ... a whole sector of noise ...
    out[0x8FFFF] ^= 0xFF  # ... and the last byte of the region
    return bytes(out)


@pytest.mark.slow
def test_flashrom_on_the_direct_board(tmp_path: Path) -> None:
    """mock:navi31, whole chip: probe, read == tinyhw flash dump, write + verify, verify, erase."""
    device = mockdev(tmp_path)
    flash = tmp_path / "flash.bin"
    with served(device, kind="serprog", listen="127.0.0.1:0") as sv:
        out = flashrom(sv.address)
        assert 'Found GigaDevice flash chip "GD25LQ16" (2048 kB, SPI)' in out
        read = tmp_path / "flashrom.bin"
        flashrom(sv.address, "-r", str(read))
        dump = tmp_path / "tinyhw.bin"
        sv.wait_released()  # flashrom has gone; the server is letting the device go
        r = run("--device", device, "flash", "dump", str(dump))
        assert r.code == 0, r.err
        assert read.read_bytes() == dump.read_bytes()

        image = bytearray(_changed(read.read_bytes()))
        image[0x1FFFFF] ^= 0xFF  # and the very last byte of the chip
        new = tmp_path / "new.bin"
        new.write_bytes(image)
        assert "VERIFIED" in flashrom(sv.address, "-w", str(new))
        assert flash.read_bytes() == bytes(image)
        assert "VERIFIED" in flashrom(sv.address, "-v", str(new))

        flashrom(sv.address, "-E")
        assert flash.read_bytes() == b"\xff" * (2 << 20)
    assert any("sector erase" in line or "chip erase" in line for line in sv.audit.lines)  # erases are audited


def test_flashrom_syncs_while_the_board_is_still_opening(tmp_path: Path) -> None:
    """A board that takes 3 s to open (a loaded machine booting the emulated board): flashrom drops the answers to
    its first SYNCNOPs after one second, so a server that opened the board before answering left late NAK/ACK
    pairs in the stream and flashrom read a NAK as the answer to its interface query. The handshake is answered at
    once, and the probe waits for the board."""
    with served(mockdev(tmp_path), kind="serprog", listen="127.0.0.1:0", open_delay=3.0) as sv:
        out = flashrom(sv.address)
        assert 'Found GigaDevice flash chip "GD25LQ16" (2048 kB, SPI)' in out


@pytest.mark.slow
def test_flashrom_through_the_usb_bridge(tmp_path: Path) -> None:
    """mock:navi31-usb (the real USB driver path; about 7x slower, so writes and erases stay in a 64 KiB
    region with -N): probe, read == tinyhw flash dump of the same board, write + verify, erase."""
    device = mockdev(tmp_path, "navi31-usb")
    flash = tmp_path / "flash.bin"
    layout = tmp_path / "layout.txt"
    layout.write_text("00080000:0008ffff test\n")
    region = ("-l", str(layout), "-i", "test", "-N")
    with served(device, kind="serprog", listen="127.0.0.1:0") as sv:
        read = tmp_path / "flashrom.bin"
        out = flashrom(sv.address, "-r", str(read))
        assert 'Found GigaDevice flash chip "GD25LQ16" (2048 kB, SPI)' in out
        dump = tmp_path / "tinyhw.bin"
        sv.wait_released()  # flashrom has gone; the server is letting the device go
        r = run("--device", mockdev(tmp_path), "flash", "dump", str(dump))  # the same board, attached directly
        assert r.code == 0, r.err
        assert read.read_bytes() == dump.read_bytes()

        image = _changed(read.read_bytes())
        new = tmp_path / "new.bin"
        new.write_bytes(image)
        assert "VERIFIED" in flashrom(sv.address, *region, "-w", str(new))
        assert flash.read_bytes() == image

        flashrom(sv.address, *region, "-E")
        after = flash.read_bytes()
        assert after[0x80000:0x90000] == b"\xff" * 0x10000
        assert after[:0x80000] == image[:0x80000] and after[0x90000:] == image[0x90000:]
