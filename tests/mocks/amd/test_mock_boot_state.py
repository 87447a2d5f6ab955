"""The emulated Navi31's board state file: register writes, scratch flags and firmware state outlive a command.

ARCHITECTURE.md "Emulated boards" (state that must outlive a command lives in a file beside the flash),
specs/amd-bringup.md §4.1 / §10.4 (SCRATCH_REG5/6/7 persist between processes), issue 10 (a ``reg write``
on a mock board is seen by the next command).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run
from mockboot import open_am, reg

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Disconnected
from tinyhw.mocks.amd import amfw, boardstate


@pytest.mark.parametrize("first,second", [("mock:navi31", "mock:navi31"), ("mock:navi31", "mock:navi31-usb"),
                                          ("mock:navi31-usb", "mock:navi31")])
def test_reg_write_is_seen_by_the_next_command(first: str, second: str, tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    r = run("--device", f"{first},flash={flash}", "reg", "write", "gc.SCRATCH_REG7=0xa000000d", "--yes")
    assert r.code == 0, r.err
    r = run("--device", f"{second},flash={flash}", "--json", "reg", "read", "gc.SCRATCH_REG7")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["value"] == 0xA000000D
    assert boardstate.state_path(flash).is_file()


def test_smuio_register_write_is_seen_by_the_next_command(tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    r = run("--device", f"mock:navi31-usb,flash={flash}", "reg", "write", "smuio.ROM_CNTL.SCK_PRESCALE_REFCLK=4",
            "--yes")
    assert r.code == 0, r.err
    r = run("--device", f"mock:navi31,flash={flash}", "--json", "reg", "read", "smuio.ROM_CNTL")
    assert r.code == 0, r.err
    fields = {f["name"]: f["value"] for f in json.loads(r.out)[0]["fields"]}
    assert fields["SCK_PRESCALE_REFCLK"] == 4


def test_mock_reset_forgets_the_board_state(tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    assert run("--device", f"mock:navi31,flash={flash}", "reg", "write", "gc.SCRATCH_REG6=1", "--yes").code == 0
    assert boardstate.load(flash)["regs"]["values"]
    r = run("--device", f"mock:navi31,flash={flash}", "mock", "reset", "--yes")
    assert r.code == 0, r.err
    assert not boardstate.state_path(flash).exists()
    r = run("--device", f"mock:navi31,flash={flash}", "--json", "reg", "read", "gc.SCRATCH_REG6")
    assert r.code == 0, r.err
    assert json.loads(r.out)[0]["value"] == 0


def test_last_command_counters_prove_a_read_only_command_wrote_nothing(tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    assert run("--device", f"mock:navi31,flash={flash}", "reg", "read", "gc.SCRATCH_REG7").code == 0
    counters = boardstate.load(flash)["last_command"]
    assert counters["reg_writes"] == 0 and counters["vram_bytes_written"] == 0 and counters["accesses"] > 0
    assert counters["bar5_writes"] > 0  # only MM_INDEX/MM_INDEX_HI: the discovery table read indirectly
    assert run("--device", f"mock:navi31-usb,flash={flash}", "reg", "write", "gc.SCRATCH_REG7=1", "--yes").code == 0
    assert boardstate.load(flash)["last_command"]["reg_writes"] == 1


def test_board_time_and_vram_writes_are_counted(tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    with open_am(f"mock:navi31,flash={flash}") as am:
        am.vram_write(0x1000, bytes(range(256)) * 16)
        am.clock.sleep(5)
        assert am.board.counters()["vram_bytes_written"] == 4096
        assert am.vram_read(0x1000, 4096) == bytes(range(256)) * 16
        assert am.vram_read_indirect(0x1000, 16) == bytes(range(16))  # MM_INDEX/MM_DATA reach the same VRAM
    saved = boardstate.load(flash)
    assert saved["time"] >= 5
    with open_am(f"mock:navi31,flash={flash}") as am:
        assert am.board.now() >= 5  # the board's virtual time continues across commands
        # the discovery table at VRAM - 64 KiB, through the indirect window (BAR0 is 256 MiB)
        memsize = am.bar5.read32(0xDE3 * 4)
        assert memsize == 24576
        head = am.vram_read_indirect((memsize << 20) - (64 << 10), 16)
        assert head[:4] == bytes([0x07, 0x14, 0x21, 0x28])


def test_psp_option_sos_means_firmware_running(tmp_path: Path) -> None:
    with open_am(f"mock:navi31,flash={tmp_path / 'f.bin'},psp=sos") as am:
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")) != 0
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_64")) == 0x80000000


def test_unreadable_state_file_is_a_cold_board(tmp_path: Path) -> None:
    flash = tmp_path / "flash.bin"
    boardstate.state_path(flash).write_text("{not json")
    with open_am(f"mock:navi31,flash={flash}") as am:
        assert am.bar5.read32(reg("mp0.MP0_SMN_C2PMSG_81")) == 0
    assert boardstate.load(flash)["version"] == boardstate.VERSION


def test_boot_register_file_answers_the_passive_registers(tmp_path: Path) -> None:
    """§9/§10.4 passive registers: FB location, invalidation ACK/SEM, RLC safe mode, HQD dequeue, RSMU window."""
    with open_am(f"mock:navi31,flash={tmp_path / 'f.bin'}") as am:
        b5 = am.bar5
        assert b5.read32(reg("mmhub.MMMC_VM_FB_LOCATION_TOP")) - b5.read32(reg("mmhub.MMMC_VM_FB_LOCATION_BASE")) \
            == (24 << 30 >> 24) - 1
        assert b5.read32(reg("mmhub.MMVM_INVALIDATE_ENG17_SEM")) == 1
        assert b5.read32(reg("mmhub.MMVM_INVALIDATE_ENG17_ACK")) & 1
        assert b5.read32(reg("gc.GCVM_INVALIDATE_ENG17_ACK")) & 1
        b5.write32(reg("gc.RLC_SAFE_MODE"), 0x3)
        assert b5.read32(reg("gc.RLC_SAFE_MODE")) & 1 == 0
        b5.write32(reg("gc.CP_HQD_ACTIVE"), 1)
        assert am.board.compute_active()
        b5.write32(reg("gc.CP_HQD_DEQUEUE_REQUEST"), 2)
        assert b5.read32(reg("gc.CP_HQD_ACTIVE")) & 1 == 0
        assert b5.read32(reg("nbio.BIF_BX0_REMAP_HDP_MEM_FLUSH_CNTL")) == 0x80000
        b5.write32(0x80000, 0)  # the remapped HDP flush
        assert am.board.regfile.hdp_flushes == 1
        b5.write32(reg("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN"), 1)
        b5.write32(reg("nbio.BIF_BX_PF0_RSMU_INDEX"), reg("gc.SCRATCH_REG3"))
        b5.write32(reg("nbio.BIF_BX_PF0_RSMU_DATA"), 0x55)
        assert b5.read32(reg("gc.SCRATCH_REG3")) == 0x55
        assert b5.read32(reg("gc.GCVM_L2_PROTECTION_FAULT_STATUS")) == 0
        far = reg("nbio.S2A_DOORBELL_ENTRY_0_CTRL")  # beyond the 1 MiB BAR: only through the RSMU window (§3.1)
        assert far >= 1 << 20
        b5.write32(reg("nbio.BIF_BX_PF0_RSMU_INDEX"), far)
        b5.write32(reg("nbio.BIF_BX_PF0_RSMU_DATA"), 0x12345678)
        assert b5.read32(reg("nbio.BIF_BX_PF0_RSMU_DATA")) == 0x12345678
        assert am.board.regfile.values[far] == 0x12345678


@pytest.mark.slow
def test_a_boot_interrupted_anywhere_is_recovered_by_the_next_boot(tmp_path: Path) -> None:
    """Disconnect faults at many points of a boot; the next command (§4.1 decision, mode-1 reset when the
    firmware runs) always ends with a booted board: the state file carries what the PSP/SMU had done."""
    probe = tmp_path / "probe.bin"
    with open_am(f"mock:navi31,flash={probe}") as am:
        start = am.board.accesses
        am.boot()
        total = am.board.accesses - start
    for k in range(1, 12):
        flash = tmp_path / f"f{k}.bin"
        n = total * k // 12
        with pytest.raises(Disconnected), open_am(f"mock:navi31,flash={flash},faults=disconnect@{n}") as am:
            am.boot()
        with open_am(f"mock:navi31-usb,flash={flash}") as am:
            assert am.boot() == amfw.TMR_SIZE
            assert am.metrics()["MetricsCounter"] >= 1


def test_resizable_bar_exposes_all_of_vram_through_bar0(tmp_path: Path) -> None:
    """§1.1 step 5: resize BAR0 to its largest size; then VRAM (24 GiB) is reachable directly, discovery included."""
    from tinyhw.boards.navi31 import Navi31Options
    from tinyhw.mocks.amd.direct import DirectTransport

    t = DirectTransport(Navi31Options(strict=True, flash=tmp_path / "f.bin"), spec=NAVI31)
    try:
        off = 0x100
        while off:
            hdr = t.config_read(off)
            if hdr & 0xFFFF == 0x15:
                break
            off = hdr >> 20
        k = (t.config_read(off + 4) >> 4).bit_length() - 1
        t.config_write(off + 8, 4, t.config_read(off + 8) & ~0x1F00 | k << 8)
        bar0 = t.bar(0)
        assert bar0.size == 32 << 30
        top = (24576 << 20) - (64 << 10)
        assert bar0.read(top, 4) == bytes([0x07, 0x14, 0x21, 0x28])
        bar0.write(20 << 30, b"\x01\x02\x03\x04" * 4)
        assert bar0.read32((20 << 30) + 12) == 0x04030201
    finally:
        t.close()


@pytest.mark.parametrize("opt", ["smu=busy", "smu=busy@x", "smu=loud", "load=101", "load=warm", "sosdelay=-1",
                                 "sosdelay=abc", "psp=boot", "fwcheck=maybe"])
def test_bad_boot_options_are_refused(opt: str, tmp_path: Path) -> None:
    r = run("--device", f"mock:navi31,flash={tmp_path / 'f.bin'},{opt}", "reg", "read", "gc.SCRATCH_REG7")
    assert r.code == 2, (r.code, r.err)
    assert r.err.startswith("error: ") and opt.split("=", maxsplit=1)[0] in r.err


def test_discovery_gc_info_table_describes_a_full_navi31(tmp_path: Path) -> None:
    """§2.8: table_list[GC] -> gc_info v1.3; CUs = 2 x (wgp0 + wgp1) per SA x SAs per SE x SEs = 96."""
    import struct

    from tinyhw.autogen import amd_discovery
    from tinyhw.formats.ipdiscovery import checksum16

    with open_am(f"mock:navi31,flash={tmp_path / 'f.bin'}") as am:
        base = (24576 << 20) - (64 << 10)
        head = am.vram_read_indirect(base, 60)
        off, csum, size, _ = struct.unpack_from("<HHHH", head, 12 + 8)
        table = am.vram_read_indirect(base + off, (size + 3) & ~3)[:size]
    assert checksum16(table) == csum
    total, layout = amd_discovery.STRUCTS["struct gc_info_v1_3"]
    assert size == total

    def field(name: str) -> int:
        o, ctype, _ = layout[name]
        return struct.unpack_from("<H" if ctype == "uint16_t" else "<I", table, o)[0]

    assert field("header.table_id") == amd_discovery.CONSTANTS["GC_TABLE_ID"]
    assert (field("header.version_major"), field("header.version_minor")) == (1, 3)
    cus = 2 * (field("gc_num_wgp0_per_sa") + field("gc_num_wgp1_per_sa")) * field("gc_num_sa_per_se") \
        * field("gc_num_se")
    assert cus == 96 and field("gc_wave_size") == 32 and field("gc_lds_size") == 64


def test_a_usb_boot_interrupted_by_a_disconnect_is_recovered(tmp_path: Path) -> None:
    """The same over mock:navi31-usb, where disconnect@N counts USB transfers."""
    probe = tmp_path / "probe.bin"
    with open_am(f"mock:navi31-usb,flash={probe}") as am:
        start = am.t.counters.usb_transfers
        am.boot()
        total = am.t.counters.usb_transfers - start
    for k in (1, 3, 5):
        flash = tmp_path / f"u{k}.bin"
        with pytest.raises(Disconnected), \
                open_am(f"mock:navi31-usb,flash={flash},faults=disconnect@{start + total * k // 6}") as am:
            am.boot()
        with open_am(f"mock:navi31-usb,flash={flash}") as am:
            assert am.boot() == amfw.TMR_SIZE
