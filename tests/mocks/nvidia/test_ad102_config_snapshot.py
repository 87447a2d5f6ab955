"""The emulated AD102's config space is pinned byte for byte: all 4 KiB as built, and what writes to COMMAND, the BARs
(sizing probes, reassignment), the Resizable BAR control and a read-only register do. Built from the board's
description, it must read exactly as the hand-written layout it replaced."""

from __future__ import annotations

import hashlib

from tinyhw.boards.nvidia import Ad102Options
from tinyhw.mocks.nvidia.ad102 import Ad102Board


def _space(cfg: object) -> bytes:
    return b"".join(cfg.read32(r).to_bytes(4, "little") for r in range(0, 4096, 4))  # type: ignore[attr-defined]


def _board() -> Ad102Board:
    return Ad102Board(Ad102Options(), lock=False)


def test_config_space_as_built() -> None:
    space = _space(_board().cfg)
    assert space[:0x40].hex() == (
        "de10842607001000a100000300008000000000fb0c000000600000000c000010"
        "6000000001f0000000000000de107c16000000006000000000000000ff010000")
    assert hashlib.sha256(space).hexdigest() == "3c6ff08763c92002aa3d23e9c0f842fba506e4469f37755833852a4a9f42101c"


def test_config_writes() -> None:
    cfg = _board().cfg
    log = []
    for reg, value, be in [
        (0x04, 0xFFFFFFFF, 0xF), (0x04, 0x00000000, 0x1), (0x04, 0x0006, 0xF), (0x06, 0, 0xF),
        (0x10, 0xFFFFFFFF, 0xF), (0x14, 0xFFFFFFFF, 0xF), (0x18, 0xFFFFFFFF, 0xF), (0x1C, 0xFFFFFFFF, 0xF),
        (0x24, 0xFFFFFFFF, 0xF), (0x14, 0x1234_5678, 0x3), (0x18, 0xABCD_0000, 0xF),
        (0xBB8, 0x0000_0300, 0xF), (0xBB8, 0x0000_3F00, 0xF), (0xBB8, 0x0000_0900, 0x1), (0xBB8, 0x0000_0A00, 0xF),
        (0x14, 0xFFFFFFFF, 0xF), (0x18, 0xFFFFFFFF, 0xF), (0xBB8, 0x0000_0600, 0x2), (0xBB8, 0x0000_1000, 0xF),
        (0x14, 0xFFFFFFFF, 0xF), (0x18, 0xFFFFFFFF, 0xF), (0xBB8, 0xFFFF_FFFF, 0xF),
        (0x0C, 0xFFFFFFFF, 0xF), (0x3C, 0xFFFFFFFF, 0xF), (0x60 + 4, 0xFFFFFFFF, 0xF), (0x78 + 8, 0xFFFFFFFF, 0xF),
        (0x420 + 4, 0xFFFFFFFF, 0xF), (0x68 + 4, 0xFFFFFFFF, 0xF),
    ]:
        cfg.write32(reg, value, be)
        log.append((reg, cfg.command, cfg.read32(reg), sorted(cfg.bar_addr.items()), sorted(cfg.bar_size.items()),
                    cfg.resources()))
    assert hashlib.sha256(repr(log).encode()).hexdigest() == (
        "8990ab69ed3347c59def5571913fc09db5d21d8a00665756fb3e7871e0f77dac")
    assert hashlib.sha256(_space(cfg)).hexdigest() == "0162fe0f51eb51dc2bfbbb73d5d4b7287021f61cd504083bf3035df0c2348bf7"
