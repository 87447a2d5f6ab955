"""PSP mailbox model (tinyhw.mocks.amd.psp) through BAR5: specs/navi31-spi-flash.md §e and §h.5 (P1-P6)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.mocks.amd.board import Navi31Board, Navi31Model
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.mocks.amd.psp import DEFAULT_SCRIPT, PspConfig
from tinyhw.regs import asic

R = flash_registers(asic("navi31"))  # the emulated Navi31's flash-side offsets

IMAGE = build_image(board=NAVI31)


def make_board(tmp_path: Path, psp: str = "early", **cfg: object) -> Navi31Board:
    tmp_path.mkdir(parents=True, exist_ok=True)  # flash= refuses a file in a missing directory
    options = Navi31Options(strict=True, flash=tmp_path / "flash.bin", psp=psp, timing="instant")
    return Navi31Board(options, model=Navi31Model(psp=PspConfig(**cfg)), spec=NAVI31)


class Host:
    """Test-side mailbox host written from §e.1."""

    def __init__(self, board: Navi31Board) -> None:
        self.b = board

    def rd(self, off: int) -> int:
        return self.b.mem_read32(5, off)

    def wr(self, off: int, value: int) -> None:
        self.b.mem_write32(5, off, value)

    def send(self, cmd: int, arg: int | None = None, polls: int = 100) -> tuple[int, int]:
        assert self.rd(R.PSP_COMMAND) & R.PSP_READY
        if arg is not None:
            self.wr(R.PSP_COMMAND_DATA, arg)
        self.wr(R.PSP_COMMAND, cmd << 16)
        self.wr(R.PSP_DOORBELL, 1)
        for _ in range(polls):
            value = self.rd(R.PSP_COMMAND)
            if value & R.PSP_READY:
                assert (value >> 16) & 0xFF == cmd
                return value & 0xFFFF, self.rd(R.PSP_COMMAND_DATA)
            self.b.clock.advance(100e-6)
        raise TimeoutError(f"command 0x{cmd:x} never completed")

    def stream(self, item: int, payload: bytes) -> int:
        status, _ = self.send(0x08, len(payload) << 8 | item)
        if status:
            return status
        for k in range(0, len(payload), 4):
            status, _ = self.send(0x09, int.from_bytes(payload[k:k + 4], "little"))
            if status:
                return status
        return self.send(0x0A, len(payload) << 8 | item)[0]


def resolve(image: bytes, item: int) -> bytes:
    """§g.2 item resolver, written here from the spec for the test."""
    def u32(off: int) -> int:
        return struct.unpack_from("<I", image, off)[0]

    fixed = {0x01: (0, 0x54), 0x04: (0x10000, 0x1000), 0x05: (0x11000, 0x1000), 0x06: (0x12000, 0x20),
             0x07: (0x13000, 0x20), 0x80: (0x1000, 4), 0x89: (0x1F0000, 0x100)}
    if item in fixed:
        off, size = fixed[item]
    elif item in (0x02, 0x03):
        off = 0x2000 if item == 0x02 else 0x3000
        assert image[off:off + 4] == b"$PSP"
        size = (u32(off + 8) + 1) * 16
    elif item == 0x08:
        off, size = u32(0x12010), u32(0x12018)
    else:
        t = u32(0x1000)
        assert image[t:t + 4] == b"$SGN"
        if item == 0x81:
            off, size = t, (u32(t + 8) + 1) * 16
        else:
            hits = [struct.unpack_from("<4I", image, t + 0x10 + 16 * i) for i in range(u32(t + 8))]
            hits = [h for h in hits if h[0] == item - 0x81]
            assert len(hits) == 1
            _, _, size, off = hits[0]
    assert off + size <= len(image)
    return image[off:off + size]


# -- P1 handshake ---------------------------------------------------------------------------------------------
def test_idle_ready_and_completion_after_the_delay(tmp_path: Path) -> None:
    board = make_board(tmp_path, psp="pbl")
    h = Host(board)
    assert h.rd(R.PSP_COMMAND) == R.PSP_READY
    h.wr(R.PSP_COMMAND, 0x0B << 16)
    assert h.rd(R.PSP_COMMAND) == 0x0B << 16  # stored, ready cleared
    h.wr(R.PSP_DOORBELL, 1)
    board.clock.advance(99e-6)
    assert h.rd(R.PSP_COMMAND) & R.PSP_READY == 0
    board.clock.advance(2e-6)
    assert h.rd(R.PSP_COMMAND) == R.PSP_READY | 0x0B << 16
    assert h.rd(R.PSP_COMMAND_DATA) == 0x001560C8
    assert board.psp.log[-1] == (0x0B, 0, 0, 0x001560C8)


# -- P2 not ready / hang -----------------------------------------------------------------------------------------
def test_not_ready_and_hang_modes(tmp_path: Path) -> None:
    board = make_board(tmp_path / "a", mailbox="not-ready")
    assert board.mem_read32(5, R.PSP_COMMAND) & R.PSP_READY == 0
    board.close()
    board = make_board(tmp_path / "b", mailbox="hang")
    with pytest.raises(TimeoutError):
        Host(board).send(0x07, polls=1000)
    board.close()


# -- P3 early streaming ------------------------------------------------------------------------------------------
def test_transfer_type_script_shape() -> None:
    assert len(DEFAULT_SCRIPT) <= 19
    assert all(v >> 8 == 1 for v in DEFAULT_SCRIPT[:-1]) and DEFAULT_SCRIPT[-1] >> 8 == 2


def test_stream_protocol_errors(tmp_path: Path) -> None:
    board = make_board(tmp_path, script=(0x101, 0x280))
    h = Host(board)
    assert h.send(0x07) == (0, 0x101)
    assert h.send(0x08, 0x54 << 8 | 0x02)[0] == 0x03  # wrong item
    assert h.send(0x08, 0x53 << 8 | 0x01)[0] == 0x03  # length not a multiple of 4
    assert h.send(0x09, 0)[0] == 0x11  # data before start
    assert h.send(0x0A, 0)[0] == 0x11  # end before start
    assert h.send(0x08, 8 << 8 | 0x01)[0] == 0
    assert h.send(0x08, 8 << 8 | 0x01)[0] == 0x11  # second start
    assert h.send(0x09, 0x11223344)[0] == 0
    assert h.send(0x0A, 8 << 8 | 0x01)[0] == 0x03  # wrong count: aborted
    assert board.psp.aborted == [(0x01, bytes.fromhex("44332211"))]
    assert h.send(0x08, 4 << 8 | 0x01)[0] == 0
    assert h.send(0x09, 1)[0] == 0
    assert h.send(0x09, 2)[0] == 0x02  # past the announced length
    assert h.send(0x0A, 4 << 8 | 0x01)[0] == 0
    assert board.psp.payloads == [(0x01, b"\x01\x00\x00\x00")]
    assert h.send(0x07) == (0, 0x280)
    # the phase-2 item ends the stream: the PSP checks the payload's signature first (tinyhw.mocks.amd.pspupdate);
    # this stream holds neither, so it is refused with "signature not found" and nothing is written
    assert h.stream(0x80, b"abcd") == 0x0F
    assert h.send(0x07) == (0, 0x280)


def test_full_ifwi_stream_matches_the_resolver(tmp_path: Path) -> None:
    board = make_board(tmp_path)
    h = Host(board)
    for _ in range(19):
        status, state = h.send(0x07)
        assert status == 0
        item = state & 0xFF
        assert h.stream(item, resolve(IMAGE, item)) == 0
        if state >> 8 == 2:
            break
    else:
        pytest.fail("phase 2 never reached")
    assert [item for item, _ in board.psp.payloads] == [v & 0xFF for v in DEFAULT_SCRIPT]
    assert all(data == resolve(IMAGE, item) for item, data in board.psp.payloads)


# -- P4 SOS loaded -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("state", ["sos", "gated"])
def test_sos_rejects_early_commands_and_accepts_live_ones(tmp_path: Path, state: str) -> None:
    board = make_board(tmp_path, psp=state)
    h = Host(board)
    assert h.send(0x07)[0] == 0x0A
    assert h.send(0x08, 4 << 8 | 1)[0] == 0x0A
    assert h.send(0x02, 0x00100000)[0] == 0
    assert h.send(0x03, 0x8)[0] == 0
    assert h.send(0x04, polls=5000)[0] == 0
    assert board.psp.live_updates == [0x8_0010_0000]


def test_live_update_fault(tmp_path: Path) -> None:
    board = make_board(tmp_path, psp="sos", live_fail=True)
    assert Host(board).send(0x04, polls=5000)[0] == 0x0C


# -- P5 probes, P6 transitions --------------------------------------------------------------------------------------
def test_probe_values_are_configurable(tmp_path: Path) -> None:
    board = make_board(tmp_path, psp="pbl", probe={0x01: (0, 0x1), 0x06: (0x05, 0x77), 0x0B: (0, 0x42)})
    h = Host(board)
    assert [h.send(c) for c in (0x01, 0x06, 0x0B)] == [(0, 0x1), (0x05, 0x77), (0, 0x42)]
    assert h.send(0x07)[0] == 0x10  # stalled PBL: no streaming state machine
    assert h.send(0x04)[0] == 0x0E


def test_state_transitions_driven_by_the_test(tmp_path: Path) -> None:
    board = make_board(tmp_path, psp="pbl")
    h = Host(board)
    assert h.send(0x07)[0] == 0x10
    board.set_psp_state("early")
    assert h.send(0x07) == (0, DEFAULT_SCRIPT[0])
    assert board.mem_read32(5, R.ROM_SW_STATUS) == R.ROM_SW_STATUS_GATED
    board.set_psp_state("sos")
    assert h.send(0x07)[0] == 0x0A
    board.set_psp_state("pbl")
    board.mem_write32(5, R.ROM_SW_STATUS, 0)
    assert board.mem_read32(5, R.ROM_SW_STATUS) == 0
