"""The emulated Navi31's PSP boot path (specs/amd-bringup.md §10.4 "PSP bootloader"), driven as §5 says.

The driver is tests/helpers/mockboot.py (test side, from the spec). Both attachments: ``mock:navi31`` and
``mock:navi31-usb`` (the same board behind the emulated ASM24 bridge and pyusb).
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest
from mockboot import (
    BL,
    CMD_BUF,
    FENCE,
    MSG_BUF,
    RESP,
    G,
    firmware,
    ip_images,
    open_am,
    psp_components,
    reg,
    smu_image,
)

from tinyhw.boards.navi31 import FIRMWARE
from tinyhw.errors import DeviceTimeout
from tinyhw.mocks.amd import amfw, boardstate

BOARDS = ["mock:navi31", "mock:navi31-usb"]


def dev(board: str, tmp_path: Path, extra: str = "") -> str:
    return f"{board},flash={tmp_path / 'flash.bin'}" + (f",{extra}" if extra else "")


def test_fact_table_matches_the_debian_files() -> None:
    """Navi31's description's hashes, sizes and versions are what psp_13_0_0_sos.bin and smu_13_0_0.bin hold."""
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    assert sorted(comps) == sorted(FIRMWARE.sos)
    for fw_type, data in comps.items():
        img = FIRMWARE.sos[fw_type]
        assert (len(data), hashlib.sha256(data).hexdigest()) == (img.size, img.sha256)
    smu = smu_image()
    assert (len(smu), hashlib.sha256(smu).hexdigest()) == (FIRMWARE.smu.size, FIRMWARE.smu.sha256)


@pytest.mark.parametrize("board", BOARDS)
def test_full_boot_brings_up_sos_ring_tmr_firmware_and_autoload(board: str, tmp_path: Path) -> None:
    with open_am(dev(board, tmp_path)) as am:
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_35")) == 0x80000000  # idle bootloader
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")) == 0  # no sOS yet
        assert am.bar5.read32(reg("gc.CP_STAT")) != 0  # GFX not loaded yet
        tmr = am.full_boot()
        assert tmr == amfw.TMR_SIZE
        s = am.board.boot.s
        assert [x.split(":")[1] for x in s.loaded] == ["KDB", "SPL", "SYS_DRV", "SOS"]
        assert s.sos_alive == 0x00310025 and s.tmr == (am.mc(0x1000000), tmr)
        assert [t for t, _, _ in s.fw][:3] == [G["GFX_FW_TYPE_SMU"], G["GFX_FW_TYPE_SDMA_UCODE_TH1"],
                                               G["GFX_FW_TYPE_SDMA_UCODE_TH0"]]
        assert s.fw[-1][0] == G["GFX_FW_TYPE_RLC_G"]
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_71")) == 0x10000  # ring exists
        assert am.board.smuio.gated  # sOS gates the ROM_SW engine (navi31-spi-flash.md §1)
    saved = boardstate.load(tmp_path / "flash.bin")
    assert saved["psp"]["sos_alive"] and saved["regs"]["autoload"]


def test_the_bootloader_reads_a_component_mapped_through_mmhub_vmid0(tmp_path: Path) -> None:
    """The PSP is an MMHUB client (amd-bringup.md §4.5): C2PMSG_36 naming a VA outside the FB that MMHUB VMID0 maps
    to host memory (how a driver over USB stages firmware, at VA 0x2000_0000_0000) reads the component there and
    acks with status 0; an unmapped VA is refused."""
    with open_am(dev("mock:navi31", tmp_path)) as am:
        kdb = psp_components(firmware("psp_13_0_0_sos.bin"))[3]
        pages = -(-len(kdb) // 4096)
        am.t.config_write(0x04, 2, am.t.config_read(0x04, 2) | 0x6)  # memory and bus master on
        host = am.t.dma_alloc(pages * 4096)  # host memory behind the emulated iommu
        host.mem[:len(kdb)] = kdb
        va, table = 0x2000_0000_0000, 0x400000  # the PTE table (depth 0: the root) at a physical VRAM address
        am.vram_write(table, b"".join(struct.pack("<Q", (host.iova + 4096 * i) | 0b11) for i in range(pages)))

        def mm(name: str, value: int) -> None:
            am.bar5.write32(reg(f"mmhub.MMVM_CONTEXT0_{name}"), value)

        mm("PAGE_TABLE_BASE_ADDR_LO32", table | 1)
        mm("PAGE_TABLE_BASE_ADDR_HI32", 0)
        mm("PAGE_TABLE_START_ADDR_LO32", (va >> 12) & 0xFFFFFFFF)
        mm("PAGE_TABLE_START_ADDR_HI32", va >> 44)
        mm("PAGE_TABLE_END_ADDR_LO32", ((va >> 12) + pages - 1) & 0xFFFFFFFF)
        mm("PAGE_TABLE_END_ADDR_HI32", va >> 44)
        mm("CNTL", 1)
        c35, c36 = reg("mp0.MP0_SMN_C2PMSG_35"), reg("mp0.MP0_SMN_C2PMSG_36")
        am.bar5.write32(c36, (va + (1 << 30)) >> 20)  # unmapped: refused
        am.bar5.write32(c35, BL["PSP_BL__LOAD_KEY_DATABASE"])
        assert am.wait(c35, lambda v: v & 0x80000000, "ack") != 0x80000000
        am.bar5.write32(c36, va >> 20)
        am.bar5.write32(c35, BL["PSP_BL__LOAD_KEY_DATABASE"])
        assert am.wait(c35, lambda v: v & 0x80000000, "ack") == 0x80000000
        assert [x.split(":")[1] for x in am.board.boot.s.loaded] == ["KDB"]


def test_bootloader_polling_is_exercised_by_the_delays(tmp_path: Path) -> None:
    with open_am(dev("mock:navi31", tmp_path, "sosdelay=2")) as am:
        comps = psp_components(firmware("psp_13_0_0_sos.bin"))
        c35 = reg("mp0.MP0_SMN_C2PMSG_35")
        am.vram_write(MSG_BUF, comps[3])
        am.bar5.write32(reg("mp0.MP0_SMN_C2PMSG_36"), am.mc(MSG_BUF) >> 20)
        am.bar5.write32(c35, BL["PSP_BL__LOAD_KEY_DATABASE"])
        assert am.bar5.read32(c35) & 0x80000000 == 0  # busy right after the command
        am.wait(c35, lambda v: v & 0x80000000, "ack")
        start = am.clock.now()
        am.bootloader(comps, [(BL["PSP_BL__LOAD_TOS_SPL_TABLE"], 5), (BL["PSP_BL__LOAD_SYSDRV"], 2),
                              (BL["PSP_BL__LOAD_SOSDRV"], 1)])
        assert am.clock.now() - start >= 2.0  # sOS came alive after the configured delay


@pytest.mark.parametrize("case", ["byte-flip", "truncated", "wrong-order", "other-asic"])
def test_bootloader_rejects_wrong_components(case: str, tmp_path: Path) -> None:
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    with open_am(dev("mock:navi31", tmp_path)) as am:
        c35 = reg("mp0.MP0_SMN_C2PMSG_35")
        image, cmd = comps[3], BL["PSP_BL__LOAD_KEY_DATABASE"]
        if case == "byte-flip":
            image = image[:100] + bytes([image[100] ^ 1]) + image[101:]
        elif case == "truncated":
            image = image[:-64]
        elif case == "wrong-order":
            image, cmd = comps[2], BL["PSP_BL__LOAD_SYSDRV"]
            am.vram_write(MSG_BUF, image)
            am.bar5.write32(reg("mp0.MP0_SMN_C2PMSG_36"), am.mc(MSG_BUF) >> 20)
            am.bar5.write32(c35, cmd)
            assert am.wait(c35, lambda v: v & 0x80000000, "ack") == 0x80000000  # SYS first is fine...
            image, cmd = comps[5], BL["PSP_BL__LOAD_TOS_SPL_TABLE"]  # ...but SPL after SYS is out of order
        elif case == "other-asic":
            other = psp_components(firmware("psp_13_0_7_sos.bin"))
            image = other[3]
        am.vram_write(MSG_BUF, image + bytes(64))
        am.bar5.write32(reg("mp0.MP0_SMN_C2PMSG_36"), am.mc(MSG_BUF) >> 20)
        am.bar5.write32(c35, cmd)
        v = am.wait(c35, lambda v: v & 0x80000000, "ack")
        assert v == 0x80000001, hex(v)
        assert am.board.boot.log[-1] == ("bootloader", cmd, 1)


def test_sos_without_its_predecessors_never_comes_alive(tmp_path: Path) -> None:
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    with open_am(dev("mock:navi31", tmp_path)) as am:
        am.vram_write(MSG_BUF, comps[1])
        am.bar5.write32(reg("mp0.MP0_SMN_C2PMSG_36"), am.mc(MSG_BUF) >> 20)
        am.bar5.write32(reg("mp0.MP0_SMN_C2PMSG_35"), BL["PSP_BL__LOAD_SOSDRV"])
        with pytest.raises(DeviceTimeout, match="sOS alive"):
            am.wait(reg("mp0.MP0_SMN_C2PMSG_81"), lambda v: v != 0, "sOS alive", timeout=1)


def test_psp_hang_never_answers(tmp_path: Path) -> None:
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    with open_am(dev("mock:navi31", tmp_path, "psp=hang")) as am, \
            pytest.raises(DeviceTimeout, match="component consumed"):
        am.bootloader(comps)


def test_ring_commands_statuses_and_unknown_command(tmp_path: Path) -> None:
    comps = psp_components(firmware("psp_13_0_0_sos.bin"))
    with open_am(dev("mock:navi31", tmp_path)) as am:
        am.bootloader(comps)
        am.ring_create()
        # a second create without destroy is refused (invented status 1)
        c64 = reg("mp0.MP0_SMN_C2PMSG_64")
        am.bar5.write32(c64, G["GFX_CTRL_CMD_ID_INIT_GPCOM_RING"])
        assert am.wait(c64, lambda v: v & 0x80000000, "answer") & 0xFFFF == 1
        assert am.submit(0x77, {})[0] == G["PSP_ERR_UNKNOWN_COMMAND"]
        assert am.submit(G["GFX_CMD_ID_LOAD_TA"], {})[0] == 0x100
        # LOAD_IP_FW of a non-SMU image before SETUP_TMR: prerequisite missing
        assert am.load_ip_fw(G["GFX_FW_TYPE_RLC_G"], ip_images()[-1][1]) == 0xFFFF0010
        # a byte-flipped SMU image is refused; the SMU stays silent
        smu = bytearray(smu_image())
        smu[5000] ^= 0x40
        assert am.load_ip_fw(G["GFX_FW_TYPE_SMU"], bytes(smu)) == 0xFFFF000F
        assert not am.board.smu.s.loaded
        # AUTOLOAD_RLC before anything: refused
        assert am.submit(G["GFX_CMD_ID_AUTOLOAD_RLC"], {})[0] == 0xFFFF0010
        status, tmr = am.load_toc(comps[4])
        assert (status, tmr) == (0, amfw.TMR_SIZE)
        assert am.setup_tmr(tmr - 0x100000) == 0xFFFF0010  # smaller than the TOC asks
        # the fence is written with the frame's value, the status at +864 of the command buffer
        assert int.from_bytes(am.vram_read(FENCE, 4), "little") == am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_67")) // 16
        assert int.from_bytes(am.vram_read(CMD_BUF + RESP["resp.status"][0], 4), "little") == 0xFFFF0010
        # DESTROY_RINGS clears C2PMSG_71
        am.bar5.write32(c64, G["GFX_CTRL_CMD_ID_DESTROY_RINGS"])
        assert am.wait(c64, lambda v: v & 0x80000000, "destroy") & 0x8000FFFF == 0x80000000
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_71")) == 0


def test_sos_state_persists_and_a_second_process_sees_it(tmp_path: Path) -> None:
    with open_am(dev("mock:navi31", tmp_path)) as am:
        am.full_boot()
        am.bar5.write32(reg("gc.SCRATCH_REG7"), 0xA000000D)
        am.bar5.write32(reg("gc.SCRATCH_REG5"), amfw.TMR_SIZE)
    with open_am(dev("mock:navi31-usb", tmp_path)) as am:
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")) != 0
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_71")) == 0x10000
        assert am.bar5.read32(reg("gc.SCRATCH_REG7")) == 0xA000000D
        assert am.bar5.read32(reg("gc.SCRATCH_REG5")) == amfw.TMR_SIZE
        assert am.bar5.read32(reg("gc.CP_STAT")) == 0
        assert am.smu(0x2)[0] == 1  # the SMU still answers GetSmuVersion
        # the bootloader does not ack after sOS
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_35")) & 0x80000000 == 0
