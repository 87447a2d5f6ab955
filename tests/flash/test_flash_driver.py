"""ROM_SW engine and GD25LQ16E chip drivers against the emulated board (specs/navi31-spi-flash.md §b, §c, §i).

Also the pure parts: the §c.4 protection table, rotation-tolerant JEDEC matching, the IFWI image check.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.errors import DeviceTimeout, OperationFailed, Refused
from tinyhw.flash import FlashDevice, protected_range
from tinyhw.flash.chip import find_rotation
from tinyhw.flash.protection import unprotected_status, writable_status
from tinyhw.formats.ifwi import check_image, require_flashable
from tinyhw.mocks.amd.direct import DirectTransport
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.mocks.amd.smuio import power_on_values
from tinyhw.regs import asic

R = flash_registers(asic("navi31"))  # the emulated Navi31's flash-side offsets
POWER_ON = power_on_values(R)  # offset -> power-on value of the SMUIO control registers

IMAGE = build_image(board=NAVI31)
CONTROLS = (R.SMU_GPIOPAD_MASK, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN, R.PAGE_MIRROR_CNTL, R.ROM_CNTL)


def open_board(tmp_path: Path, **options: str) -> DirectTransport:
    opts: dict[str, str | bool] = {"flash": str(tmp_path / "flash.bin"), "timing": "instant", **options}
    return DirectTransport(Navi31Options.from_options(opts), spec=NAVI31)


@pytest.fixture
def board(tmp_path: Path):
    t = open_board(tmp_path)
    yield t
    t.close()


def controls(t: DirectTransport) -> dict[int, int]:
    return {r: t.board.smuio.regs[r] for r in CONTROLS}


# -- pure parts -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("sr1", "sr2", "expected"), [
    (0x00, 0x00, (0, 0)),                      # x x 000, CMP 0: none
    (0x00, 0x40, (0, 0x200000)),               # CMP 1 with BP 0: everything
    (0x04, 0x00, (0x1F0000, 0x200000)),        # 0 0 001: upper 64 KiB
    (0x14, 0x00, (0x100000, 0x200000)),        # 0 0 101: upper 1 MiB
    (0x24, 0x00, (0, 0x10000)),                # 0 1 001: lower 64 KiB
    (0x30, 0x00, (0, 0x80000)),                # 0 1 100: lower 512 KiB
    (0x18, 0x00, (0, 0x200000)),               # x x 110: all
    (0x1C, 0x40, (0, 0)),                      # x x 111 with CMP: none
    (0x44, 0x00, (0x1FF000, 0x200000)),        # 1 0 001: top 4 KiB
    (0x54, 0x00, (0x1F8000, 0x200000)),        # 1 0 101: top 32 KiB (10x)
    (0x6C, 0x00, (0, 0x4000)),                 # 1 1 011: bottom 16 KiB
    (0x04, 0x40, (0, 0x1F0000)),               # CMP: lower 1984 KiB
    (0x24, 0x40, (0x10000, 0x200000)),         # CMP: upper 1984 KiB
    (0x44, 0x40, (0, 0x1FF000)),               # CMP: all except the top 4 KiB
])
def test_protection_table(sr1: int, sr2: int, expected: tuple[int, int]) -> None:
    p = protected_range(sr1, sr2, 0x200000)
    assert (p.start, p.end) == expected
    assert p.none == (expected[0] == expected[1])


def test_unprotect_keeps_srp_qe_and_lock_bits() -> None:
    sr1, sr2 = unprotected_status(0xFF, 0xFF)
    assert (sr1, sr2) == (0x80, 0x3B)  # SRP0 kept; SRP1, QE, LB1-3 kept; CMP and SUS1/SUS2 dropped
    assert protected_range(sr1, sr2, 0x200000).none
    assert writable_status(0x07, 0xC4) == (0x04, 0x40)


def test_jedec_rotation() -> None:
    jedec = bytes.fromhex("c86015")
    for cap in ("c86015c8", "6015c860", "15c86015", "ffc86015"):
        assert find_rotation(bytes.fromhex(cap), jedec)
    for cap in ("ffffffff", "c8601400", "ef4018ef"):
        assert not find_rotation(bytes.fromhex(cap), jedec)


def test_ifwi_check() -> None:
    assert check_image(IMAGE).ok and check_image(IMAGE).psp_directories == (0x2000, 0x3000)
    with pytest.raises(Refused, match="0x1000 bytes"):
        require_flashable(IMAGE[:0x1000], force=True)  # --force never waives the size
    bad = b"\0" * 4 + IMAGE[4:]
    with pytest.raises(Refused, match="magic"):
        require_flashable(bad)
    assert not require_flashable(bad, force=True).magic_ok


# -- ROM_SW session ----------------------------------------------------------------------------------------------
def test_session_sets_up_once_and_restores_exactly(board: DirectTransport) -> None:
    assert controls(board) == {r: POWER_ON[r] for r in CONTROLS}
    with FlashDevice(board) as dev:
        inside = controls(board)
        assert inside[R.ROM_CNTL] & R.ROM_CNTL_SCK_PRESCALE_OVERRIDE
        assert (inside[R.ROM_CNTL] & R.ROM_CNTL_SCK_PRESCALE_MASK) >> R.ROM_CNTL_SCK_PRESCALE_SHIFT == 8
        assert not inside[R.SMU_GPIOPAD_MASK] & 0x780
        assert board.board.smuio.pads_released()
        log_len = len(board.board.smuio.write_log)
        dev.chip.read(0, 0x1000)
        # no control register is touched between transactions (§i.2 step 1)
        assert {off for off, _ in list(board.board.smuio.write_log)[log_len:]} <= {
            R.ROM_SW_COMMAND, R.ROM_SW_STATUS, R.ROM_SW_CNTL}
    assert controls(board) == {r: POWER_ON[r] for r in CONTROLS}
    restore = [off for off, _ in list(board.board.smuio.write_log)[-5:]]
    assert restore == [R.ROM_CNTL, R.PAGE_MIRROR_CNTL, R.SMU_GPIOPAD_A, R.SMU_GPIOPAD_EN, R.SMU_GPIOPAD_MASK]


@pytest.mark.parametrize("exc", [RuntimeError, KeyboardInterrupt])
def test_controls_restored_on_errors(board: DirectTransport, exc: type[BaseException]) -> None:
    with pytest.raises(exc), FlashDevice(board) as dev:
        dev.chip.read(0, 256)
        raise exc()
    assert controls(board) == {r: POWER_ON[r] for r in CONTROLS}


def test_no_stray_transactions_and_chained_counts(board: DirectTransport) -> None:
    with FlashDevice(board) as dev:
        log = board.board.smuio.tx_log
        before, n0 = len(log), dev.sw.transactions
        assert dev.chip.read(0x10000, 0x2000) == IMAGE[0x10000:0x12000]
        assert dev.sw.transactions - n0 == 32 + 1  # chained: N + 1 transactions for N 256-byte reads
        fired = list(log)[before:]
        assert all(op == 0x03 and rx and size == 256 for op, _, size, rx, _ in fired)
        dev.sw.chain = False
        n0 = dev.sw.transactions
        assert dev.chip.read(0x10000, 0x2000) == IMAGE[0x10000:0x12000]
        assert dev.sw.transactions - n0 == 64  # paired: the seed's double read


def test_steady_state_accesses_per_256_bytes(board: DirectTransport) -> None:
    with FlashDevice(board) as dev:
        dev.chip.read(0, 256)  # learns the transaction time
        c0 = board.counters.copy()
        dev.chip.read(0, 0x10000)
        d = board.counters - c0
    # per transaction: COMMAND, STATUS=0, CNTL writes; one read of STATUS..DATA_64 (67 dwords)
    assert d.reg_writes == 3 * 257 and d.reg_reads == 1 + 67 * 256  # the first (priming) one reads STATUS only


def test_unaligned_reads(board: DirectTransport) -> None:
    with FlashDevice(board) as dev:
        for addr, n in ((1, 3), (0xFF, 2), (0x1FFFF0, 0x10), (0x12345, 0x777)):
            assert dev.chip.read(addr, n) == IMAGE[addr:addr + n]


def test_primed_window_model_mismatch_falls_back_to_paired(board: DirectTransport) -> None:
    board.board.smuio.config.rx_model = "direct"
    with FlashDevice(board) as dev:
        assert not dev.sw.chain and dev.chip.notes
        assert dev.chip.read(0x2000, 0x300) == IMAGE[0x2000:0x2300]


@pytest.mark.parametrize("option", [{"stray": "off"}, {"pad_gating": True}])
def test_other_engine_models(tmp_path: Path, option: dict) -> None:
    t = open_board(tmp_path, **{k: v for k, v in option.items() if k == "stray"})
    if "pad_gating" in option:
        t.board.smuio.config.pad_gating = True
    try:
        with FlashDevice(t) as dev:
            assert dev.chip.read(0, 0x1000) == IMAGE[:0x1000]
            dev.chip.erase_sector(511)
            dev.chip.program_page(0x1FF100, bytes(range(256)))
            assert dev.chip.read(0x1FF000, 0x200) == b"\xff" * 256 + bytes(range(256))
    finally:
        t.close()


def test_gated_engine_is_refused_and_restored(tmp_path: Path) -> None:
    t = open_board(tmp_path, psp="sos")
    try:
        with pytest.raises(OperationFailed, match="gated.*0x04000800"), FlashDevice(t):
            pass
        assert controls(t) == {r: POWER_ON[r] for r in CONTROLS}
    finally:
        t.close()


def test_unexpected_jedec_id(board: DirectTransport) -> None:
    board.board.chip.overrides[0x9F] = lambda out, n_in, total: bytes.fromhex("ef4018ef")[:n_in]
    with pytest.raises(OperationFailed, match="unexpected flash id ef4018"), FlashDevice(board):
        pass
    assert board.board.chip.events == []


def test_rotated_jedec_capture_is_accepted(board: DirectTransport) -> None:
    board.board.chip.overrides[0x9F] = lambda out, n_in, total: bytes.fromhex("6015c860")[:n_in]
    with FlashDevice(board) as dev:
        assert dev.chip.jedec.hex() == "c86015"


def test_write_enable_is_checked(board: DirectTransport) -> None:
    board.board.chip.overrides[0x06] = lambda out, n_in, total: b"\xff" * n_in  # WREN ignored
    with FlashDevice(board) as dev, pytest.raises(OperationFailed, match="write enable did not take.*sector 7"):
        dev.chip.erase_sector(7)
    assert board.board.chip.events == []


def test_stuck_busy_times_out_naming_the_sector(tmp_path: Path) -> None:
    t = open_board(tmp_path, timing="typical", faults="stuck-busy")
    try:
        with FlashDevice(t) as dev:
            t0 = t.clock.now()
            with pytest.raises(DeviceTimeout, match=r"erase of sector 9 \(0x009000\)"):
                dev.chip.erase_sector(9)
            assert 1.0 < t.clock.now() - t0 < 1.5  # datasheet max 0.5 s, x2 + 50 ms: bounded, never a hang
    finally:
        t.close()


def test_status_and_sfdp(board: DirectTransport) -> None:
    with FlashDevice(board) as dev:
        st = dev.chip.status()
        assert (st.sr1, st.sr2, st.sr3) == (0, 0, 0)
        present, offset, _ = dev.chip.sfdp()
        assert present and offset == 1  # the dummy slot ROM_SW cannot skip (§c.7)
        dev.chip.write_status(0x04, 0x00)
        assert dev.chip.read_status() == 0x04
        assert dev.chip.protection(0x04, 0).start == 0x1F0000


def test_deep_power_down_is_released(board: DirectTransport) -> None:
    board.board.chip._dp = True  # left in deep power-down (B9h): only ABh is recognised (§c.5, F9)
    with FlashDevice(board) as dev:
        assert any("deep power-down" in n for n in dev.chip.notes)
        assert dev.chip.read(0, 64) == IMAGE[:64]
