"""The declared command tables (tinyhw/commands.py) of the emulated blocks and the serprog server."""

from __future__ import annotations

import pytest

from tinyhw.commands import CommandTable
from tinyhw.mocks.amd import smu


def test_table_dispatches_with_registered_keywords():
    table: CommandTable[str] = CommandTable("thing")

    class Block:
        @table.handles("up", step=1)
        @table.handles("down", step=-1)
        def move(self, value, step):
            return value + step

    assert table.dispatch(Block(), "up", 5) == 6
    assert table.dispatch(Block(), "down", 5) == 4
    assert table.names() == {"up": "move", "down": "move"}
    assert "sideways" not in table and table.get("sideways") is None
    with pytest.raises(KeyError, match="no handler for thing 'sideways'"):
        table.dispatch(Block(), "sideways", 0)


def test_a_key_is_handled_once():
    table: CommandTable[int] = CommandTable("request")
    table.handles(1)(lambda self: None)
    with pytest.raises(ValueError, match="request 1 already handled"):
        table.handles(1)(lambda self: None)


def test_smu_handlers_are_real_messages():
    """A handler registered under a misspelt name would never run (the message would be accepted silently)."""
    assert len(smu.MESSAGES) >= 30
    assert set(smu.MESSAGES) <= set(smu.MSG_IDS.values())
    assert smu.MESSAGES.names()["SetSoftMaxByFreq"] == "set_clock_limit"


def test_sdma_packets_are_declared_by_opcode():
    from tinyhw.mocks.amd import sdma

    names = sdma.PACKETS.names()
    assert names[(sdma.OP_COPY, sdma.SUB_COPY_LINEAR)] == "copy_linear"
    assert names[(sdma.OP_FENCE, None)] == "write_fence"
    assert names[(sdma.OP_TIMESTAMP, sdma.SUB_TS_GET)] == names[(sdma.OP_TIMESTAMP, sdma.SUB_TS_GLOBAL)]
    assert names[(sdma.OP_INDIRECT, None)] == "run_indirect"
    assert len(names) == 9


def test_psp_commands_are_declared_by_id():
    from tinyhw.mocks.amd import pspboot

    g = pspboot.PSP_GFX
    assert pspboot.CONTROL.names()[g["GFX_CTRL_CMD_ID_INIT_GPCOM_RING"]] == "create_km_ring"
    assert pspboot.RING.names()[g["GFX_CMD_ID_LOAD_IP_FW"]] == "load_ip_firmware"
    assert len(pspboot.CONTROL) == 5 and len(pspboot.RING) == 6


def test_bridge_vendor_requests_are_declared_once_per_class():
    from tinyhw.mocks.bridge import asm24

    assert asm24.VENDOR_REQUESTS.names() == {
        (0xC0, 0xE4): "read_xdata", (0x40, 0xE5): "write_xdata_byte", (0x40, 0xF0): "send_tlp",
        (0xC0, 0xF0): "read_completion", (0x40, 0xF2): "arm_sram_dma", (0x40, 0xF3): "set_pcie_power"}


def test_pm4_packets_are_declared_by_opcode():
    from tinyhw.mocks.amd import cp

    names = {cp.PM4_NAMES[op]: name for op, name in cp.PACKETS.names().items()}
    assert names == {"NOP": "_pm4_nop", "ACQUIRE_MEM": "_pm4_acquire_mem", "EVENT_WRITE": "_pm4_event_write",
                     "SET_SH_REG": "_pm4_set_sh_reg", "DISPATCH_DIRECT": "_pm4_dispatch_direct",
                     "WAIT_REG_MEM": "_pm4_wait_reg_mem", "RELEASE_MEM": "_pm4_release_mem"}


def test_gd25_commands_are_declared_by_opcode():
    from tinyhw.mocks.amd import gd25

    names = gd25.COMMANDS.names()
    assert set(names) == {0x9F, 0x90, 0x05, 0x35, 0x15, 0x06, 0x04, 0x50, 0x01, 0x31, 0x11, 0x03, 0x0B, 0x5A,
                          0x4B, 0x48, 0x02, 0x20, 0x52, 0xD8, 0xC7, 0x60, 0xB9, 0xAB, 0x75, 0x7A, 0x66, 0x99}
    assert names[0x05] == names[0x35] == names[0x15] == "_read_status"
    assert names[0x20] == names[0x52] == names[0xD8] == "_erase"
    assert names[0x9F] == "_read_jedec_id" and names[0x99] == "_reset"


def test_serprog_supports_exactly_what_its_table_handles():
    """The Q_CMDMAP bitmap and SUPPORTED come from the table: a command cannot be announced and not handled."""
    from tinyhw.serve import serprog

    assert tuple(sorted(serprog.COMMANDS)) == serprog.SUPPORTED
    assert serprog.SUPPORTED == (0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x07, 0x08, 0x0B, 0x0E, 0x0F, 0x10, 0x11, 0x12,
                                 0x13)
    cmdmap = serprog.command_map()
    assert [op for op in range(256) if cmdmap[op // 8] >> (op % 8) & 1] == list(serprog.SUPPORTED)
    assert serprog.COMMANDS.names()[serprog.Q_IFACE] == serprog.COMMANDS.names()[serprog.NOP] == "answer"
