"""BAR5 register offsets and fields of the flash side (SMUIO ROM block, GPIO pads, PSP flash mailbox).

Every offset and field is looked up in the register database the board passes in (``tinyhw.regs.Asic``;
for the Navi31 board the ``navi31`` profile: SMUIO 13.0.6-style map, MP0 through the ``mp_13_0_2`` header as
the kernel does), never typed by hand and never bound at import. Facts the headers do not hold are constants
of :class:`FlashRegisters`, cited to specs/navi31-spi-flash.md (§0 gated status, §a.3 pad bits, §a.4
psp_v13_0.c masks). The SMUIO, PSP-mailbox and ROM-aperture models read their offsets from one
:class:`FlashRegisters` built with :func:`flash_registers`.
"""

from __future__ import annotations

from functools import cache

from tinyhw.regs.asic import Asic


class FlashRegisters:
    """The offsets (bytes into BAR5) and field masks/shifts of the flash-side registers of one ASIC.

    Attribute names are the register names of the database (``ROM_CNTL``), ``<REG>_<FIELD>`` for a field's mask
    and ``..._SHIFT`` for its shift; tuples list a block's registers.
    """

    #: What ROM_SW_STATUS reads once the PSP has gated the engine (§0, seed): bits 11 and 26.
    ROM_SW_STATUS_GATED = 0x04000800
    #: Pads 7..10, cleared in MASK/A/EN for a ROM_SW transaction (§a.3, seed; inferred: the SPI pins).
    GPIOPAD_SPI_PADS = 0x780
    #: psp_v13_0.c masks of the C2PMSG mailbox (§a.4); the headers carry no fields for those registers.
    PSP_READY = 0x80000000
    PSP_STATUS_MASK = 0x0000FFFF
    PSP_COMMAND_SHIFT = 16
    PSP_COMMAND_MASK = 0x00FF0000

    def __init__(self, regs: Asic) -> None:
        def off(name: str) -> int:
            return regs.offset(name)

        def mask(name: str) -> int:
            return regs.field(name).mask

        def shift(name: str) -> int:
            return regs.field(name).shift

        self.asic_name = regs.name
        # -- SMUIO ROM block (§a.2) ------------------------------------------------------------------------
        self.ROM_CNTL = off("smuio.ROM_CNTL")
        self.PAGE_MIRROR_CNTL = off("smuio.PAGE_MIRROR_CNTL")
        self.ROM_STATUS = off("smuio.ROM_STATUS")
        self.CGTT_ROM_CLK_CTRL0 = off("smuio.CGTT_ROM_CLK_CTRL0")
        self.ROM_INDEX = off("smuio.ROM_INDEX")
        self.ROM_DATA = off("smuio.ROM_DATA")
        self.ROM_START = off("smuio.ROM_START")
        self.ROM_SW_CNTL = off("smuio.ROM_SW_CNTL")
        self.ROM_SW_STATUS = off("smuio.ROM_SW_STATUS")
        self.ROM_SW_COMMAND = off("smuio.ROM_SW_COMMAND")
        self.ROM_SW_DATA_1 = off("smuio.ROM_SW_DATA_1")  # DATA_n at ROM_SW_DATA_1 + 4 (n - 1)
        self.ROM_SW_DATA_COUNT = sum(1 for _ in regs.find("smuio.ROM_SW_DATA_*"))  # DATA_1 .. DATA_64
        self.ROM_SW_DATA_64 = off(f"smuio.ROM_SW_DATA_{self.ROM_SW_DATA_COUNT}")
        self.ROM_SW_WINDOW_BYTES = 4 * self.ROM_SW_DATA_COUNT  # 256
        if self.ROM_SW_DATA_64 != self.ROM_SW_DATA_1 + 4 * (self.ROM_SW_DATA_COUNT - 1):
            raise ValueError(f"{regs.name}: the ROM_SW data window is not contiguous")
        #: First and last byte offset of the SMUIO ROM block (§0 "SMUIO ROM block 0x5A380…0x5A4AC").
        self.ROM_BLOCK_FIRST = self.ROM_CNTL
        self.ROM_BLOCK_LAST = self.ROM_SW_DATA_64
        #: Every defined register of the ROM block (the gaps between them are not registers).
        self.ROM_BLOCK_REGS: tuple[int, ...] = (
            self.ROM_CNTL, self.PAGE_MIRROR_CNTL, self.ROM_STATUS, self.CGTT_ROM_CLK_CTRL0, self.ROM_INDEX,
            self.ROM_DATA, self.ROM_START, self.ROM_SW_CNTL, self.ROM_SW_STATUS, self.ROM_SW_COMMAND,
            *(self.ROM_SW_DATA_1 + 4 * k for k in range(self.ROM_SW_DATA_COUNT)),
        )
        # -- SMUIO GPIO pads (§a.2) ------------------------------------------------------------------------
        self.SMU_GPIOPAD_SW_INT_STAT = off("smuio.SMU_GPIOPAD_SW_INT_STAT")
        self.SMU_GPIOPAD_MASK = off("smuio.SMU_GPIOPAD_MASK")
        self.SMU_GPIOPAD_A = off("smuio.SMU_GPIOPAD_A")
        self.SMU_GPIOPAD_TXIMPSEL = off("smuio.SMU_GPIOPAD_TXIMPSEL")
        self.SMU_GPIOPAD_EN = off("smuio.SMU_GPIOPAD_EN")
        self.SMU_GPIOPAD_Y = off("smuio.SMU_GPIOPAD_Y")  # pad input value, read-only
        self.GPIOPAD_REGS: tuple[int, ...] = (
            self.SMU_GPIOPAD_SW_INT_STAT, self.SMU_GPIOPAD_MASK, self.SMU_GPIOPAD_A, self.SMU_GPIOPAD_TXIMPSEL,
            self.SMU_GPIOPAD_EN, self.SMU_GPIOPAD_Y,
        )
        #: One bit per pad, bits 30:0 (§a.3).
        self.GPIOPAD_BITS = mask("smuio.SMU_GPIOPAD_MASK.GPIO_MASK")
        # -- ROM_CNTL fields (§a.3) ------------------------------------------------------------------------
        self.ROM_CNTL_CLOCK_GATING_EN = mask("smuio.ROM_CNTL.CLOCK_GATING_EN")
        self.ROM_CNTL_READ_MODE_MASK = mask("smuio.ROM_CNTL.READ_MODE")
        self.ROM_CNTL_READ_MODE_OVERRIDE = mask("smuio.ROM_CNTL.READ_MODE_OVERRIDE")
        self.ROM_CNTL_SPI_TIMING_RELAX_SCK = mask("smuio.ROM_CNTL.SPI_TIMING_RELAX_SCK")
        self.ROM_CNTL_SPI_TIMING_RELAX_SCK_OVERRIDE = mask("smuio.ROM_CNTL.SPI_TIMING_RELAX_SCK_OVERRIDE")
        self.ROM_CNTL_FOUR_BYTE_ADDRESS_MODE = mask("smuio.ROM_CNTL.FOUR_BYTE_ADDRESS_MODE")
        self.ROM_CNTL_DUMMY_CYCLE_NUM_SHIFT = shift("smuio.ROM_CNTL.DUMMY_CYCLE_NUM")
        self.ROM_CNTL_DUMMY_CYCLE_NUM_MASK = mask("smuio.ROM_CNTL.DUMMY_CYCLE_NUM")
        self.ROM_CNTL_SCK_PRESCALE_SHIFT = shift("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK")
        self.ROM_CNTL_SCK_PRESCALE_MASK = mask("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK")
        self.ROM_CNTL_SCK_PRESCALE_OVERRIDE = mask("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK_OVERRIDE")
        self.ROM_CNTL_ROM_INDEX_ADDRESS_AUTO_INCREASE = mask("smuio.ROM_CNTL.ROM_INDEX_ADDRESS_AUTO_INCREASE")
        # -- PAGE_MIRROR_CNTL fields (§a.3) ----------------------------------------------------------------
        self.PAGE_MIRROR_BASE_ADDR_MASK = mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_BASE_ADDR")
        self.PAGE_MIRROR_ENABLE = mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_ENABLE")
        self.PAGE_MIRROR_USAGE_SHIFT = shift("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_USAGE")
        self.PAGE_MIRROR_USAGE_MASK = mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_USAGE")
        self.PAGE_MIRROR_INVALIDATE = mask("smuio.PAGE_MIRROR_CNTL.PAGE_MIRROR_INVALIDATE")
        # -- ROM_INDEX / ROM_START -------------------------------------------------------------------------
        self.ROM_INDEX_MASK = mask("smuio.ROM_INDEX.ROM_INDEX")  # 25-bit byte address (§h.4)
        self.ROM_START_MASK = mask("smuio.ROM_START.ROM_START")
        # -- ROM_SW_CNTL / STATUS / COMMAND fields (§a.3) --------------------------------------------------
        self.ROM_SW_CNTL_DATA_SIZE_MASK = mask("smuio.ROM_SW_CNTL.DATA_SIZE")
        self.ROM_SW_CNTL_COMMAND_SIZE_SHIFT = shift("smuio.ROM_SW_CNTL.COMMAND_SIZE")
        self.ROM_SW_CNTL_COMMAND_SIZE_MASK = mask("smuio.ROM_SW_CNTL.COMMAND_SIZE")  # command bytes minus one
        self.ROM_SW_CNTL_RETURN_DATA_ENABLE = mask("smuio.ROM_SW_CNTL.ROM_SW_RETURN_DATA_ENABLE")  # 1 = RX
        self.ROM_SW_STATUS_DONE = mask("smuio.ROM_SW_STATUS.ROM_SW_DONE")
        self.ROM_SW_INSTRUCTION_MASK = mask("smuio.ROM_SW_COMMAND.ROM_SW_INSTRUCTION")
        self.ROM_SW_ADDRESS_SHIFT = shift("smuio.ROM_SW_COMMAND.ROM_SW_ADDRESS")
        # -- MP0 (PSP) C2PMSG flash mailbox (§a.4, mp_13_0_2 header as the kernel uses for MP0 13.0.x) -------
        self.MP0_SMN_C2PMSG_73 = off("mp0.MP0_SMN_C2PMSG_73")
        self.MP0_SMN_C2PMSG_115 = off("mp0.MP0_SMN_C2PMSG_115")
        self.MP0_SMN_C2PMSG_116 = off("mp0.MP0_SMN_C2PMSG_116")
        self.PSP_DOORBELL = self.MP0_SMN_C2PMSG_73
        self.PSP_COMMAND = self.MP0_SMN_C2PMSG_115
        self.PSP_COMMAND_DATA = self.MP0_SMN_C2PMSG_116
        self.PSP_REGS: tuple[int, ...] = (self.PSP_DOORBELL, self.PSP_COMMAND, self.PSP_COMMAND_DATA)


@cache
def flash_registers(regs: Asic) -> FlashRegisters:
    """The :class:`FlashRegisters` of register database ``regs``, built once per database object."""
    return FlashRegisters(regs)
