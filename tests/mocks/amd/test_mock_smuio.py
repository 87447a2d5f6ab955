"""SMUIO model (tinyhw.mocks.amd.smuio) through the board's BAR5: specs/navi31-spi-flash.md §a, §b, §f, §h R/S/A."""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.errors import StrictEmulationError
from tinyhw.mocks.amd.board import Navi31Board, Navi31Model
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.mocks.amd.smuio import SmuioConfig, power_on_values
from tinyhw.regs import asic

R = flash_registers(asic("navi31"))  # the emulated Navi31's flash-side offsets
POWER_ON = power_on_values(R)  # offset -> power-on value of the SMUIO control registers

IMAGE = build_image(board=NAVI31)
RX = R.ROM_SW_CNTL_RETURN_DATA_ENABLE


def make_board(tmp_path: Path, model: Navi31Model | None = None, **opts: object) -> Navi31Board:
    options = Navi31Options(strict=True, flash=tmp_path / "flash.bin", **opts)
    return Navi31Board(options, model=model, spec=NAVI31)


class RomSw:
    """Test-side ROM_SW host written from §b.2 (session-scoped setup, no reset writes)."""

    def __init__(self, board: Navi31Board) -> None:
        self.b = board

    def rd(self, off: int) -> int:
        return self.b.mem_read32(5, off)

    def wr(self, off: int, value: int) -> None:
        self.b.mem_write32(5, off, value)

    def open(self) -> None:
        for reg in (R.SMU_GPIOPAD_MASK, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN):
            self.wr(reg, self.rd(reg) & ~R.GPIOPAD_SPI_PADS)
        self.wr(R.PAGE_MIRROR_CNTL, (self.rd(R.PAGE_MIRROR_CNTL) & ~0x0E000000) | 0x06000000)
        self.wr(R.ROM_CNTL, (self.rd(R.ROM_CNTL) & ~0xF) | 0x8)

    def start(self, opcode: int, addr: int | None = None, tx: bytes = b"", rx: int = 0) -> None:
        self.wr(R.ROM_SW_COMMAND, ((addr or 0) & 0xFFFFFF) << 8 | opcode)
        for k in range(0, len(tx), 4):
            self.wr(R.ROM_SW_DATA_1 + k, int.from_bytes(tx[k:k + 4].ljust(4, b"\0"), "big"))
        cmd_bytes = 4 if addr is not None else 1
        self.wr(R.ROM_SW_CNTL, (cmd_bytes - 1) << 16 | (RX if rx else 0) | (rx or len(tx)))

    def wait(self) -> int:
        for _ in range(100000):
            if self.rd(R.ROM_SW_STATUS) & 1:
                self.wr(R.ROM_SW_STATUS, 0)
                return _
            self.b.clock.advance(1e-6)
        raise AssertionError("rom_sw never done")

    def window(self, n: int) -> bytes:
        raw = b"".join(self.rd(R.ROM_SW_DATA_1 + 4 * k).to_bytes(4, "little") for k in range((n + 3) // 4))
        return raw[:n]

    def xfer(self, opcode: int, addr: int | None = None, tx: bytes = b"", rx: int = 0) -> bytes:
        self.start(opcode, addr, tx, rx)
        self.wait()
        return self.window(rx)

    def read(self, opcode: int, addr: int | None, n: int) -> bytes:
        self.xfer(opcode, addr, rx=n)  # priming transaction (b.4)
        return self.xfer(opcode, addr, rx=n)


@pytest.fixture
def board(tmp_path: Path) -> Navi31Board:
    b = make_board(tmp_path, timing="instant")
    yield b
    b.close()


# -- §a register map -----------------------------------------------------------------------------------------
def test_register_offsets_match_the_spec() -> None:
    assert (R.ROM_CNTL, R.PAGE_MIRROR_CNTL, R.ROM_INDEX, R.ROM_DATA) == (0x5A380, 0x5A384, 0x5A390, 0x5A394)
    assert (R.ROM_SW_CNTL, R.ROM_SW_STATUS, R.ROM_SW_COMMAND) == (0x5A3A0, 0x5A3A4, 0x5A3A8)
    assert (R.ROM_SW_DATA_1, R.ROM_SW_DATA_64) == (0x5A3B0, 0x5A4AC)
    assert (R.SMU_GPIOPAD_MASK, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN) == (0x5A504, 0x5A508, 0x5A510)
    assert (R.PSP_DOORBELL, R.PSP_COMMAND, R.PSP_COMMAND_DATA) == (0x58224, 0x582CC, 0x582D0)
    assert 0x5A39C not in R.ROM_BLOCK_REGS and 0x5A3AC not in R.ROM_BLOCK_REGS


def test_gaps_are_not_covered_in_strict_mode(board: Navi31Board) -> None:
    with pytest.raises(StrictEmulationError, match="0x5a39c"):
        board.mem_read32(5, 0x5A39C)


# -- R2 storage and the write log ----------------------------------------------------------------------------
def test_controls_are_storage_and_writes_are_logged(board: Navi31Board) -> None:
    sw = RomSw(board)
    saved = {r: sw.rd(r) for r in (R.SMU_GPIOPAD_MASK, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN, R.PAGE_MIRROR_CNTL,
                                   R.ROM_CNTL)}
    assert saved == {r: POWER_ON[r] for r in saved}
    sw.open()
    assert sw.rd(R.SMU_GPIOPAD_MASK) & R.GPIOPAD_SPI_PADS == 0
    assert sw.rd(R.PAGE_MIRROR_CNTL) == (POWER_ON[R.PAGE_MIRROR_CNTL] | 0x06000000)
    for reg in (R.ROM_CNTL, R.PAGE_MIRROR_CNTL, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN, R.SMU_GPIOPAD_MASK):
        sw.wr(reg, saved[reg])
    assert [off for off, _ in list(board.smuio.write_log)[-3:]] == [R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN,
                                                                      R.SMU_GPIOPAD_MASK]
    assert {r: sw.rd(r) for r in saved} == saved
    sw.wr(R.ROM_SW_COMMAND, 0x12345605)
    assert sw.rd(R.ROM_SW_COMMAND) == 0x12345605


# -- R3 unavailable controller -------------------------------------------------------------------------------
def test_unavailable_controller_reads_all_ones(tmp_path: Path) -> None:
    board = make_board(tmp_path, aperture="unavailable")
    for off in (R.ROM_CNTL, R.ROM_INDEX, R.ROM_DATA, R.ROM_SW_STATUS, R.ROM_SW_DATA_64):
        board.mem_write32(5, off, 0)
        assert board.mem_read32(5, off) == 0xFFFFFFFF
    assert board.mem_read32(5, R.SMU_GPIOPAD_MASK) == POWER_ON[R.SMU_GPIOPAD_MASK]
    board.set_aperture("normal")
    assert board.mem_read32(5, R.ROM_CNTL) == POWER_ON[R.ROM_CNTL]
    board.close()


# -- R4 pad gating (optional) --------------------------------------------------------------------------------
def test_pad_gating_blocks_until_the_pads_are_released(tmp_path: Path) -> None:
    board = make_board(tmp_path, Navi31Model(smuio=SmuioConfig(pad_gating=True)), timing="instant")
    sw = RomSw(board)
    assert sw.read(0x9F, None, 3) == b"\xff\xff\xff"
    assert board.smuio.tx_log[-1][4] is False
    sw.open()
    sw.xfer(0x9F, rx=3)  # the window still holds the gated transaction's FF bytes
    assert sw.xfer(0x9F, rx=3) == bytes([0xC8, 0x60, 0x15])
    board.close()


# -- S1/S8 stray transactions --------------------------------------------------------------------------------
def test_every_cntl_write_fires_with_stray_on(board: Navi31Board) -> None:
    sw = RomSw(board)
    sw.xfer(0x06)
    sw.xfer(0x04)  # WRDI: WEL clear
    assert board.chip.status()[0] & 2 == 0
    board.mem_write32(5, R.ROM_SW_COMMAND, 0x06)
    sw.wr(R.ROM_SW_CNTL, 0)  # the WREN itself
    sw.wr(R.ROM_SW_CNTL, 0)  # a stray resend of the stale opcode
    assert [t[0] for t in list(board.smuio.tx_log)[-2:]] == [0x06, 0x06]
    assert board.chip.status()[0] & 2
    # a stale 03h alone is an incomplete command: no effect, no data
    sw.xfer(0x03, 0x1000, rx=4)
    before = board.smuio.transactions
    sw.wr(R.ROM_SW_CNTL, 0)
    assert board.smuio.transactions == before + 1
    assert board.smuio.tx_log[-1][:3] == (0x03, 1, 0)


def test_only_armed_cntl_writes_fire_with_stray_off(tmp_path: Path) -> None:
    board = make_board(tmp_path, timing="instant", stray="off")
    sw = RomSw(board)
    sw.xfer(0x06)
    assert board.chip.status()[0] & 2
    sw.wr(R.ROM_SW_CNTL, 0)
    sw.wr(R.ROM_SW_CNTL, 0)
    assert board.smuio.transactions == 1
    sw.wr(R.ROM_SW_COMMAND, 0x04)
    sw.wr(R.ROM_SW_CNTL, 0)
    assert board.smuio.transactions == 2
    assert board.chip.status()[0] & 2 == 0
    board.close()


# -- S2/S3 byte order, S4 primed RX --------------------------------------------------------------------------
def test_tx_is_big_endian_and_rx_little_endian(board: Navi31Board) -> None:
    sw = RomSw(board)
    sw.xfer(0x06)
    sw.xfer(0x02, 0x1F8000, tx=bytes(range(1, 11)))
    assert board.chip.read(0x1F8000, 11) == bytes(range(1, 11)) + b"\xff"
    sw.read(0x03, 0x1F8000, 8)
    assert sw.rd(R.ROM_SW_DATA_1) == 0x04030201
    assert sw.rd(R.ROM_SW_DATA_1 + 4) == 0x08070605


def test_primed_rx_window_lags_one_rx_transaction(board: Navi31Board) -> None:
    sw = RomSw(board)
    assert sw.xfer(0x03, 0x0, rx=8) == b"\x00" * 8  # power-on contents
    assert sw.xfer(0x03, 0x100, rx=8) == IMAGE[0:8]
    sw.xfer(0x06)  # non-RX transactions do not move the window
    sw.xfer(0x04)
    assert sw.xfer(0x9F, rx=4) == IMAGE[0x100:0x104]
    assert sw.xfer(0x05, rx=2)[:3] == bytes([0xC8, 0x60])
    assert sw.read(0x03, 0x40000, 256) == IMAGE[0x40000:0x40100]


def test_direct_rx_model_option(tmp_path: Path) -> None:
    board = make_board(tmp_path, Navi31Model(smuio=SmuioConfig(rx_model="direct", rx_power_on=0xA5)),
                       timing="instant")
    sw = RomSw(board)
    assert sw.window(4) == b"\xa5" * 4
    assert sw.xfer(0x03, 0x10, rx=4) == IMAGE[0x10:0x14]
    board.close()


# -- S5 DONE timing ------------------------------------------------------------------------------------------
def test_timed_done_follows_the_sck_formula(tmp_path: Path) -> None:
    board = make_board(tmp_path)  # typical timing: timed DONE
    sw = RomSw(board)
    sw.open()
    cntl = sw.rd(R.ROM_CNTL)
    sw.wr(R.ROM_CNTL, (cntl & ~0x1F800000) | R.ROM_CNTL_SCK_PRESCALE_OVERRIDE | (8 << 24))
    sw.start(0x03, 0x0, rx=256)
    expected = (4 + 256) * 8 / (100e6 / 9)
    assert board.smuio.sck_hz() == pytest.approx(100e6 / 9)
    polls = sw.wait()
    assert polls == pytest.approx(expected / 1e-6, abs=2)
    assert sw.rd(R.ROM_SW_STATUS) == 0  # cleared by the write of 0
    board.close()


def test_status_write_clears_done_and_instant_mode(board: Navi31Board) -> None:
    sw = RomSw(board)
    sw.start(0x05, rx=1)
    assert sw.rd(R.ROM_SW_STATUS) == 1
    sw.wr(R.ROM_SW_STATUS, 0)
    assert sw.rd(R.ROM_SW_STATUS) == 0


# -- S6 data size --------------------------------------------------------------------------------------------
def test_data_size_over_256_is_a_host_bug(board: Navi31Board) -> None:
    board.mem_write32(5, R.ROM_SW_COMMAND, 0x03)
    with pytest.raises(StrictEmulationError, match="0x101"):
        board.mem_write32(5, R.ROM_SW_CNTL, RX | 0x101)


# -- S7 gated engine -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("psp", ["early", "sos", "gated"])
def test_gated_engine(tmp_path: Path, psp: str) -> None:
    board = make_board(tmp_path, timing="instant", psp=psp)
    sw = RomSw(board)
    sw.wr(R.ROM_SW_CNTL, 0)
    sw.wr(R.ROM_SW_STATUS, 0)
    assert sw.rd(R.ROM_SW_STATUS) == R.ROM_SW_STATUS_GATED
    sw.start(0x06)
    assert board.smuio.transactions == 0
    assert board.chip.op_counts == {}
    board.set_psp_state("pbl")
    sw.wr(R.ROM_SW_STATUS, 0)
    assert sw.rd(R.ROM_SW_STATUS) == 0
    assert sw.read(0x9F, None, 3) == bytes([0xC8, 0x60, 0x15])
    board.close()


# -- A1-A4 aperture ------------------------------------------------------------------------------------------
def test_aperture_auto_increments(board: Navi31Board) -> None:
    board.mem_write32(5, R.ROM_INDEX, 0xFE000000 | 0x40000)
    assert board.mem_read32(5, R.ROM_INDEX) == 0x40000
    words = [board.mem_read32(5, R.ROM_DATA) for _ in range(4)]
    assert b"".join(w.to_bytes(4, "little") for w in words) == IMAGE[0x40000:0x40010]
    assert board.mem_read32(5, R.ROM_INDEX) == 0x40010


def test_rom_cntl_writes_do_not_break_reads(board: Navi31Board) -> None:
    board.mem_write32(5, R.ROM_CNTL, 0x01000038)  # the seed's byte-swapped value
    board.mem_write32(5, R.ROM_INDEX, 0)
    assert board.mem_read32(5, R.ROM_DATA) == 0x55AA55AA


def test_mirrored_aperture_repeats_the_first_mib(tmp_path: Path) -> None:
    board = make_board(tmp_path, aperture="mirrored")
    board.mem_write32(5, R.ROM_INDEX, 0x100000)
    assert board.mem_read32(5, R.ROM_DATA) == 0x55AA55AA
    board.close()


def test_block_read_across_rom_data_reads_the_next_registers(board: Navi31Board) -> None:
    board.mem_write32(5, R.ROM_START, 0x123)
    board.mem_write32(5, R.ROM_INDEX, 0)
    block = [board.mem_read32(5, R.ROM_DATA + 4 * k) for k in range(2)]
    assert block == [0x55AA55AA, 0x123]
    assert board.mem_read32(5, R.ROM_INDEX) == 4


def test_full_aperture_dump_equals_the_image(board: Navi31Board) -> None:
    board.mem_write32(5, R.ROM_INDEX, 0)
    rd = board.mem_read32
    dump = b"".join(rd(5, R.ROM_DATA).to_bytes(4, "little") for _ in range(0x80000))
    assert dump == IMAGE
