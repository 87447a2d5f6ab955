"""tinyhw.boot against a small register-level fake (tests/amfake.py): order, payloads, decisions, errors."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from amfake import FB_BASE_MC, FW_DIR, SCRATCH, FakeBoard, FakeTransport

from tinyhw.boot import AmGpu, Smi, firmware, ids, layout, read_state, sequence
from tinyhw.boot.psp import PspError
from tinyhw.errors import DeviceTimeout, Refused

NAVI31 = {"mp0": (13, 0, 0), "mp1": (13, 0, 0), "gc": (11, 0, 0), "sdma0": (6, 0, 0)}


@pytest.fixture(scope="module")
def fw() -> firmware.FirmwareSet:
    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"Debian's firmware-amd-graphics is not extracted in {FW_DIR}: run bash tests/fetch_firmware.sh",
                    pytrace=False)
    return firmware.load(FW_DIR, NAVI31)


def _boot(board: FakeBoard, fw: firmware.FirmwareSet) -> sequence.BootResult:
    return sequence.boot(AmGpu(FakeTransport(board)), fw)


def test_needed_files_for_navi31() -> None:
    assert [n for _, n in firmware.needed_files(NAVI31)] == [
        "psp_13_0_0_sos.bin", "smu_13_0_0.bin", "sdma_6_0_0.bin", "gc_11_0_0_mec.bin", "gc_11_0_0_imu.bin",
        "gc_11_0_0_rlc.bin"]


def test_full_boot_order_and_payloads(fw) -> None:
    board = FakeBoard()
    result = _boot(board, fw)
    assert result.kind == "full"
    bl = [e[1] for e in board.log if e[0] == "bl"]
    assert bl == [ids.psp("PSP_BL__LOAD_KEY_DATABASE"), ids.psp("PSP_BL__LOAD_TOS_SPL_TABLE"),
                  ids.psp("PSP_BL__LOAD_SYSDRV"), ids.psp("PSP_BL__LOAD_SOSDRV")]
    cmds = [(e[1], e[2]) for e in board.log if e[0] == "cmd"]
    ids_only = [c for c, _ in cmds]
    assert ids_only[0] == ids.CMD_LOAD_TOC
    assert ids_only[1] == ids.CMD_LOAD_IP_FW and cmds[1][1][3] == ids.fw_type("SMU")  # SMU first
    assert ids_only[2] == ids.CMD_SETUP_TMR
    assert cmds[2][1][:3] == ((FB_BASE_MC + layout.TMR) & 0xFFFFFFFF, (FB_BASE_MC + layout.TMR) >> 32, 0x1300000)
    assert ids_only[-1] == ids.CMD_AUTOLOAD_RLC
    types = [a[3] for c, a in cmds if c == ids.CMD_LOAD_IP_FW]
    assert types[-1] == ids.fw_type("RLC_G") and len(types) == len(fw.ip_images())
    # every LOAD_IP_FW points at the image's bytes
    for c, a in cmds:
        if c == ids.CMD_LOAD_IP_FW:
            img = next(i for i in fw.ip_images() if i.code == a[3])
            assert board.vbytes(a[0] | a[1] << 32, 64) == img.data[:64] and a[2] == len(img.data)
    assert board.smu_table == FB_BASE_MC + layout.SMU_TABLE
    assert result.clocks == {"gfxclk": 2500, "socclk": 1200, "uclk": 1249, "fclk": 1900}
    assert board.soft[0] == (2500, 2500)
    assert board.reg[SCRATCH[7]] == layout.BOOT_MAGIC and board.reg[SCRATCH[6]] == 0
    assert board.reg[SCRATCH[5]] == 0x1300000 == result.tmr_size
    # firmware went into VRAM as blocks, never dword by dword
    assert not [e for e in board.log if e[0] == "vram"]
    copy = next(s for s in result.steps if s["step"] == "firmware copy")
    assert copy["bytes"] >= sum(len(i.data) for i in fw.ip_images())


def test_partial_boot_when_flags_are_intact(fw) -> None:
    board = FakeBoard()
    _boot(board, fw)
    board.log.clear()
    result = _boot(board, fw)
    assert result.kind == "partial"
    assert not [e for e in board.log if e[0] in ("bl", "cmd", "mode1")]
    assert result.tmr_size == 0x1300000


def test_unfinished_boot_is_reset_first(fw) -> None:
    board = FakeBoard()
    _boot(board, fw)
    board.reg[SCRATCH[6]] = 1  # a boot that did not finish
    board.log.clear()
    result = _boot(board, fw)
    assert result.kind == "reset+full"
    assert ("mode1",) in board.log
    assert [e for e in board.log if e[0] == "cfg"]  # bus master cleared and set around the reset


def test_foreign_firmware_running_is_reset_first(fw) -> None:
    board = FakeBoard()
    board.sos = board.smu_up = True
    board.smu_resp = 1
    st = read_state(AmGpu(FakeTransport(board)))
    assert st.decision()[0] == "reset+full"


def test_reset_uses_the_smu_then_clears_flags(fw) -> None:
    board = FakeBoard()
    _boot(board, fw)
    done = sequence.reset_gpu(AmGpu(FakeTransport(board)))
    assert done["path"] == "smu"
    assert all(board.reg[n] == 0 for n in SCRATCH.values())
    assert not board.sos


def test_reset_falls_back_to_the_psp_when_the_smu_is_silent(fw) -> None:
    board = FakeBoard()
    _boot(board, fw)
    board.silent_smu = True
    board.smu_resp = 0
    done = sequence.reset_gpu(AmGpu(FakeTransport(board)))
    assert done["path"] == "psp" and ("ctrl", ids.CTRL_MODE1_RST) in board.log


def test_psp_error_status_is_an_error_saying_to_reset(fw) -> None:
    board = FakeBoard()
    board.fail_cmd = ids.CMD_SETUP_TMR
    with pytest.raises(PspError, match="setup_tmr with status 0xffff") as e:
        _boot(board, fw)
    assert "am reset" in str(e.value)


def test_silent_smu_times_out_on_the_transport_clock(fw) -> None:
    board = FakeBoard()
    board.silent_smu = True
    t = FakeTransport(board)
    with pytest.raises(DeviceTimeout, match="smu to answer GetSmuVersion"):
        sequence.boot(AmGpu(t), fw)
    assert t.clock.now() >= 10.0  # the 10 s wait ran on the virtual clock


def test_smi_refuses_untouched_board_and_reads_booted_one(fw) -> None:
    board = FakeBoard()
    with pytest.raises(Refused, match="no tinyhw boot has touched this gpu"):
        Smi(AmGpu(FakeTransport(board)))
    _boot(board, fw)
    writes_before = [e for e in board.log if e[0] == "smu" and e[1] in (0xE, 0xF)]
    doc = Smi(AmGpu(FakeTransport(board))).refresh()
    assert [e for e in board.log if e[0] == "smu" and e[1] in (0xE, 0xF)] == writes_before  # never re-pointed
    assert doc["clocks_mhz"]["gfx"] == 30 and doc["deep_sleep_view"]["gfx"] == "postds"  # 3 % activity
    assert doc["temperatures_c"] == {"hotspot": 55}


def _copy_fw(tmp: Path) -> Path:
    d = tmp / "fw"
    d.mkdir()
    for _, name in firmware.needed_files(NAVI31):
        shutil.copy(FW_DIR / name, d / name)
    return d


@pytest.mark.parametrize("damage", ["missing", "truncated", "flipped", "foreign"])
def test_bad_firmware_is_refused_naming_file_and_package(tmp_path, damage, fw) -> None:
    d = _copy_fw(tmp_path)
    target = d / "psp_13_0_0_sos.bin"
    data = target.read_bytes()
    if damage == "missing":
        target.unlink()
    elif damage == "truncated":
        target.write_bytes(data[:len(data) // 2])
    elif damage == "flipped":
        flipped = bytearray(data)
        flipped[0x30000] ^= 0x01
        target.write_bytes(bytes(flipped))
    else:
        target.write_bytes((FW_DIR / "psp_13_0_7_sos.bin").read_bytes())
    with pytest.raises(Refused) as e:
        firmware.load(d, NAVI31)
    text = str(e.value)
    assert "psp_13_0_0_sos.bin" in text and "firmware-amd-graphics" in text
    if damage == "foreign":
        assert "psp_13_0_7_sos.bin" in text


def test_metrics_decoder_uses_generated_offsets() -> None:
    data = bytearray(ids.METRICS_SIZE)
    off = ids.METRICS_FIELDS
    struct.pack_into("<H", data, off["AverageGfxActivity"][0], 80)
    struct.pack_into("<H", data, off["AverageGfxclkFrequencyPreDs"][0], 2371)
    struct.pack_into("<H", data, off["AverageSocketPower"][0], 301)
    struct.pack_into("<B", data, off["ThrottlingPercentage"][0] + ids.THROTTLERS["PPT0"], 12)
    from tinyhw.boot.metrics import decode

    doc = decode(bytes(data))
    assert doc["clocks_mhz"]["gfx"] == 2371 and doc["deep_sleep_view"]["gfx"] == "preds"
    assert doc["power_w"]["socket"] == 301 and doc["throttling_percent"]["ppt0"] == 12
    assert doc["temperatures_c"] == {}
