"""BAR5 register offsets and fields the emulated Navi31 models, in one place.

Every offset and field comes from the generated register database (``tinyhw.regs``,
ASIC profile ``navi31``: SMUIO 13.0.6-style map, MP0 through the ``mp_13_0_2`` header
as the kernel does), never typed by hand. Facts the headers do not hold are cited to
specs/navi31-spi-flash.md (§0 gated status, §a.3 pad bits, §a.4 psp_v13_0.c masks).
The rest of ``tinyhw.mocks`` uses the names below.
"""

from __future__ import annotations

from tinyhw.regs import asic

_A = asic("navi31")


def _off(name: str) -> int:
    return _A.offset(name)


def _mask(name: str) -> int:
    return _A.field(name).mask


def _shift(name: str) -> int:
    return _A.field(name).shift


# -- SMUIO ROM block (§a.2) -----------------------------------------------------------------------------
ROM_CNTL = _off("smuio.ROM_CNTL")
PAGE_MIRROR_CNTL = _off("smuio.PAGE_MIRROR_CNTL")
ROM_STATUS = _off("smuio.ROM_STATUS")
CGTT_ROM_CLK_CTRL0 = _off("smuio.CGTT_ROM_CLK_CTRL0")
ROM_INDEX = _off("smuio.ROM_INDEX")
ROM_DATA = _off("smuio.ROM_DATA")
ROM_START = _off("smuio.ROM_START")
ROM_SW_CNTL = _off("smuio.ROM_SW_CNTL")
ROM_SW_STATUS = _off("smuio.ROM_SW_STATUS")
ROM_SW_COMMAND = _off("smuio.ROM_SW_COMMAND")
ROM_SW_DATA_1 = _off("smuio.ROM_SW_DATA_1")  # DATA_n at ROM_SW_DATA_1 + 4 (n - 1)
ROM_SW_DATA_COUNT = sum(1 for r in _A.find("smuio.ROM_SW_DATA_*"))  # DATA_1 .. DATA_64
ROM_SW_DATA_64 = _off(f"smuio.ROM_SW_DATA_{ROM_SW_DATA_COUNT}")
ROM_SW_WINDOW_BYTES = 4 * ROM_SW_DATA_COUNT  # 256
assert ROM_SW_DATA_64 == ROM_SW_DATA_1 + 4 * (ROM_SW_DATA_COUNT - 1), "ROM_SW data window is not contiguous"

#: First and last byte offset of the SMUIO ROM block (§0 "SMUIO ROM block 0x5A380…0x5A4AC").
ROM_BLOCK_FIRST = ROM_CNTL
ROM_BLOCK_LAST = ROM_SW_DATA_64
#: Every defined register of the ROM block (the gaps between them are not registers).
ROM_BLOCK_REGS: tuple[int, ...] = (
    ROM_CNTL, PAGE_MIRROR_CNTL, ROM_STATUS, CGTT_ROM_CLK_CTRL0, ROM_INDEX, ROM_DATA, ROM_START,
    ROM_SW_CNTL, ROM_SW_STATUS, ROM_SW_COMMAND,
    *(ROM_SW_DATA_1 + 4 * k for k in range(ROM_SW_DATA_COUNT)),
)

# -- SMUIO GPIO pads (§a.2) --------------------------------------------------------------------------------
SMU_GPIOPAD_SW_INT_STAT = _off("smuio.SMU_GPIOPAD_SW_INT_STAT")
SMU_GPIOPAD_MASK = _off("smuio.SMU_GPIOPAD_MASK")
SMU_GPIOPAD_A = _off("smuio.SMU_GPIOPAD_A")
SMU_GPIOPAD_TXIMPSEL = _off("smuio.SMU_GPIOPAD_TXIMPSEL")
SMU_GPIOPAD_EN = _off("smuio.SMU_GPIOPAD_EN")
SMU_GPIOPAD_Y = _off("smuio.SMU_GPIOPAD_Y")  # pad input value, read-only
GPIOPAD_REGS: tuple[int, ...] = (
    SMU_GPIOPAD_SW_INT_STAT, SMU_GPIOPAD_MASK, SMU_GPIOPAD_A, SMU_GPIOPAD_TXIMPSEL, SMU_GPIOPAD_EN, SMU_GPIOPAD_Y,
)
#: One bit per pad, bits 30:0 (§a.3).
GPIOPAD_BITS = _mask("smuio.SMU_GPIOPAD_MASK.GPIO_MASK")
#: Pads 7..10, cleared in MASK/A/EN for a ROM_SW transaction (§a.3, seed; inferred: the SPI pins).
GPIOPAD_SPI_PADS = 0x780

# -- ROM_CNTL fields (§a.3) --------------------------------------------------------------------------------
ROM_CNTL_CLOCK_GATING_EN = _mask("smuio.ROM_CNTL.CLOCK_GATING_EN")
ROM_CNTL_READ_MODE_MASK = _mask("smuio.ROM_CNTL.READ_MODE")
ROM_CNTL_READ_MODE_OVERRIDE = _mask("smuio.ROM_CNTL.READ_MODE_OVERRIDE")
ROM_CNTL_SPI_TIMING_RELAX_SCK = _mask("smuio.ROM_CNTL.SPI_TIMING_RELAX_SCK")
ROM_CNTL_SPI_TIMING_RELAX_SCK_OVERRIDE = _mask("smuio.ROM_CNTL.SPI_TIMING_RELAX_SCK_OVERRIDE")
ROM_CNTL_FOUR_BYTE_ADDRESS_MODE = _mask("smuio.ROM_CNTL.FOUR_BYTE_ADDRESS_MODE")
ROM_CNTL_DUMMY_CYCLE_NUM_SHIFT = _shift("smuio.ROM_CNTL.DUMMY_CYCLE_NUM")
ROM_CNTL_DUMMY_CYCLE_NUM_MASK = _mask("smuio.ROM_CNTL.DUMMY_CYCLE_NUM")
ROM_CNTL_SCK_PRESCALE_SHIFT = _shift("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK")
ROM_CNTL_SCK_PRESCALE_MASK = _mask("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK")
ROM_CNTL_SCK_PRESCALE_OVERRIDE = _mask("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK_OVERRIDE")
ROM_CNTL_ROM_INDEX_ADDRESS_AUTO_INCREASE = _mask("smuio.ROM_CNTL.ROM_INDEX_ADDRESS_AUTO_INCREASE")

# -- PAGE_MIRROR_CNTL fields (§a.3) -------------------------------------------------------------------------
PAGE_MIRROR_BASE_ADDR_MASK = _mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_BASE_ADDR")
PAGE_MIRROR_ENABLE = _mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_ENABLE")
PAGE_MIRROR_USAGE_SHIFT = _shift("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_USAGE")
PAGE_MIRROR_USAGE_MASK = _mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_USAGE")
PAGE_MIRROR_INVALIDATE = _mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_INVALIDATE")

# -- ROM_INDEX / ROM_START ---------------------------------------------------------------------------------
ROM_INDEX_MASK = _mask("smuio.ROM_INDEX.ROM_INDEX")  # 25-bit byte address (h.4 A1)
ROM_START_MASK = _mask("smuio.ROM_START.ROM_START")

# -- ROM_SW_CNTL / STATUS / COMMAND fields (§a.3) -------------------------------------------------------------
ROM_SW_CNTL_DATA_SIZE_MASK = _mask("smuio.ROM_SW_CNTL.DATA_SIZE")
ROM_SW_CNTL_COMMAND_SIZE_SHIFT = _shift("smuio.ROM_SW_CNTL.COMMAND_SIZE")
ROM_SW_CNTL_COMMAND_SIZE_MASK = _mask("smuio.ROM_SW_CNTL.COMMAND_SIZE")  # command bytes minus one
ROM_SW_CNTL_RETURN_DATA_ENABLE = _mask("smuio.ROM_SW_CNTL.ROM_SW_RETURN_DATA_ENABLE")  # 1 = RX
ROM_SW_STATUS_DONE = _mask("smuio.ROM_SW_STATUS.ROM_SW_DONE")
#: What ROM_SW_STATUS reads once the PSP has gated the engine (§0, seed): bits 11 and 26.
ROM_SW_STATUS_GATED = 0x04000800
ROM_SW_INSTRUCTION_MASK = _mask("smuio.ROM_SW_COMMAND.ROM_SW_INSTRUCTION")
ROM_SW_ADDRESS_SHIFT = _shift("smuio.ROM_SW_COMMAND.ROM_SW_ADDRESS")

# -- MP0 (PSP) C2PMSG mailbox (§a.4, mp_13_0_2 header as the kernel uses for MP0 13.0.x) ---------------------
MP0_SMN_C2PMSG_73 = _off("mp0.MP0_SMN_C2PMSG_73")
MP0_SMN_C2PMSG_115 = _off("mp0.MP0_SMN_C2PMSG_115")
MP0_SMN_C2PMSG_116 = _off("mp0.MP0_SMN_C2PMSG_116")
PSP_DOORBELL = MP0_SMN_C2PMSG_73
PSP_COMMAND = MP0_SMN_C2PMSG_115
PSP_COMMAND_DATA = MP0_SMN_C2PMSG_116
PSP_REGS: tuple[int, ...] = (PSP_DOORBELL, PSP_COMMAND, PSP_COMMAND_DATA)
# psp_v13_0.c masks (§a.4); the headers carry no fields for the C2PMSG registers
PSP_READY = 0x80000000
PSP_STATUS_MASK = 0x0000FFFF
PSP_COMMAND_SHIFT = 16
PSP_COMMAND_MASK = 0x00FF0000
