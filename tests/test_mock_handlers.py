"""The declared command tables of the emulated blocks (tinyhw/mocks/handlers.py)."""

from __future__ import annotations

import pytest

from tinyhw.mocks import smu
from tinyhw.mocks.handlers import CommandTable


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
    from tinyhw.mocks import sdma

    names = sdma.PACKETS.names()
    assert names[(sdma.OP_COPY, sdma.SUB_COPY_LINEAR)] == "copy_linear"
    assert names[(sdma.OP_FENCE, None)] == "write_fence"
    assert names[(sdma.OP_TIMESTAMP, sdma.SUB_TS_GET)] == names[(sdma.OP_TIMESTAMP, sdma.SUB_TS_GLOBAL)]
    assert names[(sdma.OP_INDIRECT, None)] == "run_indirect"
    assert len(names) == 9


def test_psp_commands_are_declared_by_id():
    from tinyhw.mocks import pspboot

    g = pspboot.PSP_GFX
    assert pspboot.CONTROL.names()[g["GFX_CTRL_CMD_ID_INIT_GPCOM_RING"]] == "create_km_ring"
    assert pspboot.RING.names()[g["GFX_CMD_ID_LOAD_IP_FW"]] == "load_ip_firmware"
    assert len(pspboot.CONTROL) == 5 and len(pspboot.RING) == 6


def test_bridge_vendor_requests_are_declared_once_per_class():
    from tinyhw.mocks import asm24

    assert asm24.VENDOR_REQUESTS.names() == {
        (0xC0, 0xE4): "read_xdata", (0x40, 0xE5): "write_xdata_byte", (0x40, 0xF0): "send_tlp",
        (0xC0, 0xF0): "read_completion", (0x40, 0xF2): "arm_sram_dma", (0x40, 0xF3): "set_pcie_power"}
