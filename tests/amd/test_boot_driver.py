"""tinyhw.boot against a small register-level fake (tests/helpers/amfake.py): order, payloads, decisions, errors."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path

import pytest
from amfake import FB_BASE_MC, FW_DIR, SCRATCH, FakeBoard, FakeTransport

from tinyhw.boot.amd import AmGpu, Smi, firmware, ids, layout, read_state, sequence
from tinyhw.boot.amd.psp import PspError
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
    from tinyhw.boot.amd.metrics import decode

    doc = decode(bytes(data))
    assert doc["clocks_mhz"]["gfx"] == 2371 and doc["deep_sleep_view"]["gfx"] == "preds"
    assert doc["power_w"]["socket"] == 301 and doc["throttling_percent"]["ppt0"] == 12
    assert doc["temperatures_c"] == {}


def test_generated_ids_agree_with_the_spec_tables() -> None:
    """amd-bringup.md §5.1, §5.2, §6.2, §6.4 state these numbers; the generated modules must agree."""
    assert [(label, hex(cmd)) for label, cmd, _ in ids.BOOTLOADER_ORDER] == [
        ("KDB", "0x80000"), ("SPL", "0x10000000"), ("SYS", "0x10000"), ("SOC", "0xb0000"), ("INTF", "0xd0000"),
        ("DBG", "0xc0000"), ("RAS", "0xe0000"), ("SOS", "0x20000")]
    assert (ids.CMD_SETUP_TMR, ids.CMD_LOAD_IP_FW, ids.CMD_LOAD_TOC, ids.CMD_AUTOLOAD_RLC) == (0x5, 0x6, 0x20, 0x21)
    assert (ids.CTRL_INIT_GPCOM_RING, ids.CTRL_DESTROY_RINGS, ids.CTRL_MODE1_RST) == (0x20000, 0x30000, 0x70000)
    assert ids.cmd_off("resp.status") == 864 and ids.cmd_off("resp.tmr_size") == 880 and ids.FRAME_SIZE == 64
    assert {n: ids.msg(n) for n in ("GetSmuVersion", "EnableAllSmuFeatures", "SetDriverDramAddrHigh",
                                    "SetDriverDramAddrLow", "TransferTableSmu2Dram", "SetSoftMinByFreq",
                                    "SetSoftMaxByFreq", "GetDpmFreqByIndex", "Mode1Reset")} == {
        "GetSmuVersion": 0x2, "EnableAllSmuFeatures": 0x6, "SetDriverDramAddrHigh": 0xE, "SetDriverDramAddrLow": 0xF,
        "TransferTableSmu2Dram": 0x12, "SetSoftMinByFreq": 0x19, "SetSoftMaxByFreq": 0x1A, "GetDpmFreqByIndex": 0x1F,
        "Mode1Reset": 0x2F}
    assert ids.DEBUG_MODE1_RESET == 2 and ids.TABLE_SMU_METRICS == 5 and ids.METRICS_SIZE == 392
    f = ids.METRICS_FIELDS
    assert {k: f[k][0] for k in ("CurrClock", "AverageGfxclkFrequencyPreDs", "AverageGfxclkFrequencyPostDs",
                                 "AverageFclkFrequencyPreDs", "AverageMemclkFrequencyPreDs", "dGPU_W_MAX",
                                 "AvgVoltage", "AverageGfxActivity", "AverageUclkActivity", "AverageSocketPower",
                                 "AvgTemperature", "AvgFanPwm", "AvgFanRpm", "ThrottlingPercentage")} == {
        "CurrClock": 0, "AverageGfxclkFrequencyPreDs": 54, "AverageGfxclkFrequencyPostDs": 56,
        "AverageFclkFrequencyPreDs": 58, "AverageMemclkFrequencyPreDs": 62, "dGPU_W_MAX": 76, "AvgVoltage": 84,
        "AverageGfxActivity": 104, "AverageUclkActivity": 106, "AverageSocketPower": 116, "AvgTemperature": 120,
        "AvgFanPwm": 150, "AvgFanRpm": 152, "ThrottlingPercentage": 154}
    assert ids.CLOCKS["GFXCLK"] == 0 and ids.CLOCKS["FCLK"] == 3 and ids.TEMPS["HOTSPOT"] == 1


def test_firmware_hash_table_equals_a_fresh_generation(fw) -> None:
    from tinyhw.autogen import amdgpu_fw_sha256, genfwhash

    assert genfwhash.table(FW_DIR) == amdgpu_fw_sha256.SHA256
    assert genfwhash.package_version(FW_DIR) == amdgpu_fw_sha256.VERSION == "20230210-5"
    assert genfwhash.render(amdgpu_fw_sha256.SHA256, amdgpu_fw_sha256.VERSION) == \
        Path(amdgpu_fw_sha256.__file__).read_text()


def test_survey_reports_missing_and_bad_files(tmp_path) -> None:
    d = _copy_fw(tmp_path)
    (d / "smu_13_0_0.bin").unlink()
    (d / "sdma_6_0_0.bin").write_bytes(b"\0" * 64)
    got = {f["file"]: f for f in firmware.survey(d, NAVI31)}
    assert got["smu_13_0_0.bin"]["present"] is False
    assert got["sdma_6_0_0.bin"]["ok"] is False and "sdma_6_0_0.bin" in got["sdma_6_0_0.bin"]["problem"]
    assert got["gc_11_0_0_rlc.bin"]["ok"] and got["gc_11_0_0_rlc.bin"]["ucode_version"] == 0x6E


def test_staging_layout_is_aligned_and_bounded() -> None:
    offs = layout.stage([1, 4096, 4097, 10])
    assert offs == [0, 4096, 8192, 16384]
    with pytest.raises(ValueError):
        layout.stage([layout.STAGING_MAX + 1])
    assert layout.SMU_TABLE + layout.SMU_TABLE_SIZE <= layout.BL_SLOTS
    assert layout.BL_SLOTS + layout.BL_SLOT_SIZE * layout.BL_SLOT_COUNT <= layout.TMR
    assert layout.TMR + layout.TMR_MAX <= layout.STAGING and layout.STAGING + layout.STAGING_MAX <= 256 << 20


def test_other_asics_are_identified_but_not_booted() -> None:
    from tinyhw.boards.navi31 import NAVI31
    from tinyhw.errors import NotAvailableYet
    from tinyhw.mocks.amd.discovery import discovery_image, gc_info_table
    from tinyhw.regs.profiles import GFX1200

    gpu = AmGpu(FakeTransport(FakeBoard(discovery_image(GFX1200, gc_info_table(dict(NAVI31.gc_info))))))
    assert gpu.discovery.versions()["gc"] == (12, 0, 0)
    with pytest.raises(NotAvailableYet, match="this gpu has gc 12.0.0, mp0 14.0.2, mp1 14.0.2"):
        gpu.check_supported()


def test_xz_compressed_files_are_read_and_zstd_refused_clearly(tmp_path) -> None:
    import lzma

    d = _copy_fw(tmp_path)
    rlc = d / "gc_11_0_0_rlc.bin"
    (d / "gc_11_0_0_rlc.bin.xz").write_bytes(lzma.compress(rlc.read_bytes()))
    rlc.unlink()
    fs = firmware.load(d, NAVI31)
    assert fs.files["rlc"].path.name == "gc_11_0_0_rlc.bin.xz" and fs.files["rlc"].version == 0x6E
    (d / "gc_11_0_0_rlc.bin.xz").unlink()
    (d / "gc_11_0_0_rlc.bin.zst").write_bytes(b"(\xb5/\xfd")
    with pytest.raises(Refused, match="zstd-compressed"):
        firmware.load(d, NAVI31)
