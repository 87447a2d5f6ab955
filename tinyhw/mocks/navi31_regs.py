"""BAR5 register offsets and fields the emulated Navi31 models, in one place.

Implements the register map of specs/navi31-spi-flash.md §a (a.1 bases, a.2 SMUIO ROM
block and GPIO pads, a.3 field layouts, a.4 MP0 C2PMSG mailbox) and §0 (gated status).
Every offset is a **byte offset into BAR5** = (segment base + dword index) x 4.

This is the only module of the emulator that spells register numbers; the rest of
``tinyhw.mocks`` uses these names. A later change replaces the literals below with
lookups in the generated register database, so keep the names stable.
"""

from __future__ import annotations

# -- §a.1 segment bases (dword indices; inferred, identical on every dGPU with a static table) --------
SMUIO_SEG0 = 0x16800  # bytes 0x5A000
MP0_SEG0 = 0x16000  # bytes 0x58000


def _smuio(idx: int) -> int:
    return (SMUIO_SEG0 + idx) * 4


def _mp0(idx: int) -> int:
    return (MP0_SEG0 + idx) * 4


# -- §a.2 SMUIO ROM block (smuio_13_0_6_offset.h) -----------------------------------------------------
ROM_CNTL = _smuio(0xE0)  # 0x5A380
PAGE_MIRROR_CNTL = _smuio(0xE1)  # 0x5A384
ROM_STATUS = _smuio(0xE2)  # 0x5A388, bit 0 ROM_BUSY
CGTT_ROM_CLK_CTRL0 = _smuio(0xE3)  # 0x5A38C
ROM_INDEX = _smuio(0xE4)  # 0x5A390
ROM_DATA = _smuio(0xE5)  # 0x5A394
ROM_START = _smuio(0xE6)  # 0x5A398 (0x5A39C is a gap)
ROM_SW_CNTL = _smuio(0xE8)  # 0x5A3A0
ROM_SW_STATUS = _smuio(0xE9)  # 0x5A3A4
ROM_SW_COMMAND = _smuio(0xEA)  # 0x5A3A8 (0x5A3AC is a gap)
ROM_SW_DATA_1 = _smuio(0xEC)  # 0x5A3B0; DATA_n at ROM_SW_DATA_1 + 4 (n - 1)
ROM_SW_DATA_COUNT = 64  # DATA_1 .. DATA_64 (§a.2: 64 dwords = 256 bytes)
ROM_SW_DATA_64 = ROM_SW_DATA_1 + 4 * (ROM_SW_DATA_COUNT - 1)  # 0x5A4AC
ROM_SW_WINDOW_BYTES = 4 * ROM_SW_DATA_COUNT  # 256

#: First and last byte offset of the SMUIO ROM block (§0 "SMUIO ROM block 0x5A380…0x5A4AC").
ROM_BLOCK_FIRST = ROM_CNTL
ROM_BLOCK_LAST = ROM_SW_DATA_64
#: Every defined register of the ROM block (the gaps 0x5A39C and 0x5A3AC are not registers).
ROM_BLOCK_REGS: tuple[int, ...] = (
    ROM_CNTL, PAGE_MIRROR_CNTL, ROM_STATUS, CGTT_ROM_CLK_CTRL0, ROM_INDEX, ROM_DATA, ROM_START,
    ROM_SW_CNTL, ROM_SW_STATUS, ROM_SW_COMMAND,
    *(ROM_SW_DATA_1 + 4 * k for k in range(ROM_SW_DATA_COUNT)),
)

# -- §a.2 SMUIO GPIO pads ---------------------------------------------------------------------------
SMU_GPIOPAD_SW_INT_STAT = _smuio(0x140)  # 0x5A500
SMU_GPIOPAD_MASK = _smuio(0x141)  # 0x5A504
SMU_GPIOPAD_A = _smuio(0x142)  # 0x5A508
SMU_GPIOPAD_TXIMPSEL = _smuio(0x143)  # 0x5A50C
SMU_GPIOPAD_EN = _smuio(0x144)  # 0x5A510
SMU_GPIOPAD_Y = _smuio(0x145)  # 0x5A514 (pad input value, read-only)
GPIOPAD_REGS: tuple[int, ...] = (
    SMU_GPIOPAD_SW_INT_STAT, SMU_GPIOPAD_MASK, SMU_GPIOPAD_A, SMU_GPIOPAD_TXIMPSEL, SMU_GPIOPAD_EN, SMU_GPIOPAD_Y,
)
#: One bit per pad, bits 30:0 (§a.3).
GPIOPAD_BITS = 0x7FFFFFFF
#: Pads 7..10, cleared in MASK/A/EN for a ROM_SW transaction (§a.3; inferred: the SPI pins).
GPIOPAD_SPI_PADS = 0x780

# -- §a.3 ROM_CNTL fields -------------------------------------------------------------------------------
ROM_CNTL_CLOCK_GATING_EN = 1 << 0
ROM_CNTL_READ_MODE_MASK = 0x3 << 1
ROM_CNTL_READ_MODE_OVERRIDE = 1 << 3
ROM_CNTL_SPI_TIMING_RELAX_SCK = 1 << 4
ROM_CNTL_SPI_TIMING_RELAX_SCK_OVERRIDE = 1 << 5
ROM_CNTL_FOUR_BYTE_ADDRESS_MODE = 1 << 6
ROM_CNTL_DUMMY_CYCLE_NUM_SHIFT = 8
ROM_CNTL_DUMMY_CYCLE_NUM_MASK = 0xF << 8
ROM_CNTL_SCK_PRESCALE_SHIFT = 24
ROM_CNTL_SCK_PRESCALE_MASK = 0xF << 24
ROM_CNTL_SCK_PRESCALE_OVERRIDE = 1 << 28
ROM_CNTL_ROM_INDEX_ADDRESS_AUTO_INCREASE = 1 << 29

# -- §a.3 PAGE_MIRROR_CNTL fields -------------------------------------------------------------------
PAGE_MIRROR_BASE_ADDR_MASK = 0x01FFFFFF
PAGE_MIRROR_ENABLE = 1 << 25
PAGE_MIRROR_USAGE_SHIFT = 26
PAGE_MIRROR_USAGE_MASK = 0x3 << 26
PAGE_MIRROR_INVALIDATE = 1 << 28

# -- §a.3 ROM_INDEX ----------------------------------------------------------------------------------------
ROM_INDEX_MASK = 0x01FFFFFF  # 25-bit byte address (h.4 A1)
ROM_START_MASK = 0x01FFFFFF  # 25-bit field (§a.2)

# -- §a.3 ROM_SW_CNTL / STATUS / COMMAND fields --------------------------------------------------------
ROM_SW_CNTL_DATA_SIZE_MASK = 0xFFFF
ROM_SW_CNTL_COMMAND_SIZE_SHIFT = 16
ROM_SW_CNTL_COMMAND_SIZE_MASK = 0x7 << 16  # command bytes minus one
ROM_SW_CNTL_RETURN_DATA_ENABLE = 1 << 19  # 1 = the data phase receives (RX)
ROM_SW_STATUS_DONE = 1 << 0
#: What ROM_SW_STATUS reads once the PSP has gated the engine (§0, seed): bits 11 and 26.
ROM_SW_STATUS_GATED = 0x04000800
ROM_SW_INSTRUCTION_MASK = 0xFF
ROM_SW_ADDRESS_SHIFT = 8

# -- §a.4 MP0 (PSP) C2PMSG mailbox (mp_13_0_2_offset.h) ---------------------------------------------------
MP0_SMN_C2PMSG_73 = _mp0(0x89)  # 0x58224
MP0_SMN_C2PMSG_115 = _mp0(0xB3)  # 0x582CC
MP0_SMN_C2PMSG_116 = _mp0(0xB4)  # 0x582D0
PSP_DOORBELL = MP0_SMN_C2PMSG_73
PSP_COMMAND = MP0_SMN_C2PMSG_115
PSP_COMMAND_DATA = MP0_SMN_C2PMSG_116
PSP_REGS: tuple[int, ...] = (PSP_DOORBELL, PSP_COMMAND, PSP_COMMAND_DATA)
# psp_v13_0.c masks (§a.4)
PSP_READY = 0x80000000
PSP_STATUS_MASK = 0x0000FFFF
PSP_COMMAND_SHIFT = 16
PSP_COMMAND_MASK = 0x00FF0000
