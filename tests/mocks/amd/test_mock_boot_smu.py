"""The emulated Navi31's SMU (specs/amd-bringup.md §10.4 "SMU mailbox", §6), driven as §6.1 says, and mode-1 reset.

The driver is tests/helpers/mockboot.py (test side, from the spec).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from mockboot import DIF, MSG, SMU_TABLE, G, firmware, open_am, psp_components, reg, smu_image

from tinyhw.boards.navi31 import FIRMWARE
from tinyhw.errors import DeviceTimeout
from tinyhw.mocks.amd import boardstate

BOARDS = ["mock:navi31", "mock:navi31-usb"]


def dev(board: str, tmp_path: Path, extra: str = "") -> str:
    return f"{board},flash={tmp_path / 'flash.bin'}" + (f",{extra}" if extra else "")


def test_smu_is_silent_before_its_firmware_is_loaded(tmp_path: Path) -> None:
    with open_am(dev("mock:navi31", tmp_path)) as am:
        # the "is SMU alive" probe of §6.1: GetSmuVersion with 100 ms, alive iff C2PMSG_90 != 0
        with pytest.raises(DeviceTimeout):
            am.smu(MSG["PPSMC_MSG_GetSmuVersion"], timeout=0.1)
        assert am.bar5.read32(reg("mp1.MP1_SMN_C2PMSG_90")) == 0


@pytest.mark.parametrize("board", BOARDS)
def test_messages_dpm_tables_and_response_codes(board: str, tmp_path: Path) -> None:
    with open_am(dev(board, tmp_path)) as am:
        am.full_boot()
        assert am.smu(MSG["PPSMC_MSG_GetSmuVersion"]) == (1, FIRMWARE.smu.version)
        assert am.smu(MSG["PPSMC_MSG_GetDriverIfVersion"]) == (1, DIF["SMU13_0_0_DRIVER_IF_VERSION"])
        gfx = DIF["PPCLK_GFXCLK"]
        resp, levels = am.smu(MSG["PPSMC_MSG_GetDpmFreqByIndex"], gfx << 16 | 0xFF)
        assert resp == 1 and levels >= 2
        freqs = [am.smu(MSG["PPSMC_MSG_GetDpmFreqByIndex"], gfx << 16 | i) for i in range(levels)]
        assert all(r == 1 and not f & 0x80000000 for r, f in freqs)
        mhz = [f for _, f in freqs]
        assert mhz == sorted(mhz) and mhz[-1] > 2000
        assert am.smu(MSG["PPSMC_MSG_GetDpmFreqByIndex"], gfx << 16 | levels)[0] == 0xFF  # past the last level
        assert am.smu(MSG["PPSMC_MSG_SetSoftMinByFreq"], gfx << 16 | mhz[-1])[0] == 1
        assert am.smu(MSG["PPSMC_MSG_SetSoftMaxByFreq"], gfx << 16 | mhz[-1])[0] == 1
        assert am.smu(MSG["PPSMC_MSG_SetSoftMinByFreq"], 40 << 16 | 100)[0] == 0xFF  # no clock 40
        assert am.smu(MSG["PPSMC_MSG_SetPptLimit"], 300)[0] == 1
        assert am.smu(MSG["PPSMC_MSG_GetPptLimit"]) == (1, 300)
        assert am.smu(MSG["PPSMC_MSG_SetPptLimit"], 0)[0] == 0xFF
        assert am.smu(0x7F)[0] == 0xFE  # unknown message
        assert am.smu(MSG["PPSMC_MSG_TransferTableSmu2Dram"], DIF["TABLE_OVERDRIVE"])[0] == 0xFF
        assert am.smu(MSG["PPSMC_MSG_Mode2Reset"])[0] == 0xFD
        m = am.metrics()
        assert m["CurrClock"][gfx] == mhz[-1] and m["dGPU_W_MAX"] == 300
        assert m["AverageGfxclkFrequencyPreDs"] >= mhz[-1] - 2


def test_prerequisites_before_enable_all_features(tmp_path: Path) -> None:
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    with open_am(dev("mock:navi31", tmp_path)) as am:
        am.bootloader(comps)
        am.ring_create()
        assert am.load_ip_fw(G["GFX_FW_TYPE_SMU"], smu_image()) == 0
        assert am.smu(MSG["PPSMC_MSG_GetSmuVersion"])[0] == 1  # alive right after LOAD_IP_FW(SMU)
        assert am.smu(MSG["PPSMC_MSG_SetSoftMinByFreq"], 0 << 16 | 500)[0] == 0xFD
        assert am.smu(MSG["PPSMC_MSG_TransferTableSmu2Dram"], DIF["TABLE_SMU_METRICS"])[0] == 0xFD


@pytest.mark.parametrize("extra,expect", [("smu=busy@3", 0xFC), ("smu=silent", None)])
def test_smu_faults(extra: str, expect: int | None, tmp_path: Path) -> None:
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    with open_am(dev("mock:navi31", tmp_path, extra)) as am:
        am.bootloader(comps)
        am.ring_create()
        assert am.load_ip_fw(G["GFX_FW_TYPE_SMU"], smu_image()) == 0
        if expect is None:
            with pytest.raises(DeviceTimeout):
                am.smu(MSG["PPSMC_MSG_GetSmuVersion"], timeout=0.5)
            return
        assert am.smu(MSG["PPSMC_MSG_GetSmuVersion"])[0] == 1
        assert am.smu(MSG["PPSMC_MSG_GetSmuVersion"])[0] == 1
        assert am.smu(MSG["PPSMC_MSG_GetSmuVersion"])[0] == expect
        assert am.smu(MSG["PPSMC_MSG_GetSmuVersion"])[0] == 1


def test_metrics_move_over_virtual_time_idle_vs_loaded(tmp_path: Path) -> None:
    with open_am(dev("mock:navi31", tmp_path)) as am:
        am.full_boot()
        idle = am.metrics()
        am.clock.sleep(30)
        idle2 = am.metrics()
        assert idle2["MetricsCounter"] == idle["MetricsCounter"] + 1
        assert idle2["AverageGfxActivity"] == 0 and idle2["AverageSocketPower"] < 30
        assert idle2["AverageGfxclkFrequencyPostDs"] < idle2["AverageGfxclkFrequencyPreDs"]  # deep sleep
        assert idle2["AvgFanPwm"] == 0
    with open_am(dev("mock:navi31", tmp_path, "load=busy")) as am:  # same board, next command, under load
        first = am.metrics()
        am.clock.sleep(60)
        hot = am.metrics()
        assert hot["AverageGfxActivity"] >= 99 and hot["AverageSocketPower"] >= 300
        assert hot["AvgTemperature"][1] > first["AvgTemperature"][1] > 0  # hotspot warms up
        assert hot["EnergyAccumulator"] > first["EnergyAccumulator"]
        assert hot["AvgTemperature"][DIF["TEMP_LIQUID0"]] == 0  # absent sensors read 0
        assert am.smu(MSG["PPSMC_MSG_SetPptLimit"], 200)[0] == 1
        am.clock.sleep(1)
        capped = am.metrics()
        assert capped["AverageSocketPower"] == 200
        assert capped["ThrottlingPercentage"][DIF["THROTTLER_PPT0_BIT"]] > 0
        raw = am.vram_read(SMU_TABLE, 392)
        assert len(raw) == 392


@pytest.mark.parametrize("how", ["debug", "mode1", "psp"])
def test_mode1_reset_clears_everything_and_the_bootloader_returns(how: str, tmp_path: Path) -> None:
    with open_am(dev("mock:navi31", tmp_path)) as am:
        am.full_boot()
        am.bar5.write32(reg("gc.SCRATCH_REG7"), 0xA000000D)
        am.bar5.write32(reg("gc.SCRATCH_REG6"), 1)
        if how == "debug":  # §7.2: debug mailbox message 2 for MP0 13.0.0
            am.bar5.write32(reg("mp1.MP1_SMN_C2PMSG_54"), 0)
            am.bar5.write32(reg("mp1.MP1_SMN_C2PMSG_53"), 0)
            am.bar5.write32(reg("mp1.MP1_SMN_C2PMSG_75"), MSG["DEBUGSMC_MSG_Mode1Reset"])
        elif how == "mode1":
            am.smu(MSG["PPSMC_MSG_Mode1Reset"])
        else:
            am.bar5.write32(reg("mp0.MP0_SMN_C2PMSG_64"), G["GFX_CTRL_CMD_ID_MODE1_RST"])
        am.clock.sleep(0.5)
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_35")) == 0x80000000  # bootloader answers again
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")) == 0
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_71")) == 0
        assert am.bar5.read32(reg("gc.SCRATCH_REG7")) == 0 and am.bar5.read32(reg("gc.SCRATCH_REG6")) == 0
        assert am.bar5.read32(reg("gc.CP_STAT")) != 0
        assert not am.board.smuio.gated
        with pytest.raises(DeviceTimeout):
            am.smu(MSG["PPSMC_MSG_GetSmuVersion"], timeout=0.1)  # silent again until its firmware is loaded
        assert am.board.resets
        am.full_boot()  # and the board boots again
    saved = boardstate.load(tmp_path / "flash.bin")
    assert saved["last_command"]["mode1_resets"] == 1
