"""The emulated PSP's bootloader order and TMR size (facts of the PSP 13.x family every AMD board shares).

Each board's firmware facts (hashes, sizes, versions of the real files) are part of its description
(:class:`tinyhw.boards.spec.AmdFirmware`, e.g. tinyhw.boards.navi31.FIRMWARE), never a default here; Navi31's were
read as follows.

Source: Debian ``firmware-amd-graphics`` 20230210-5 (``bash tests/fetch_firmware.sh``), files
``amdgpu/psp_13_0_0_sos.bin`` (PSP header v2.0: six ``psp_fw_bin_desc`` components) and
``amdgpu/smu_13_0_0.bin`` (SMC header v2.1), read once with the layouts of specs/amd-bringup.md
§5.4 and recorded in the description as facts: each component's ``psp_fw_type`` (§5.1), firmware version,
size in bytes and SHA-256 of its bytes. The emulator never needs the files themselves; the test
``tests/mocks/amd/test_mock_boot_psp.py`` re-derives these numbers from the files.

Bootloader order (§5.1): KDB, SPL, SYS, SOC, INTF, DBG, RAS, SOS, those present. This file
holds SYS_DRV, SOS, TOC, KDB, SPL and RL: the bootloader sequence is KDB, SPL, SYS, SOS.
"""

from __future__ import annotations

from tinyhw.autogen import amdgpu_psp
from tinyhw.boards.spec import FirmwareImage

_BL = amdgpu_psp.CONSTANTS


#: One firmware component the emulated PSP/SMU accepts (the type lives with the board descriptions).
Image = FirmwareImage

#: Bootloader command -> the psp_fw_type(s) it accepts, in the §5.1 order. LOAD_TOS_SPL_TABLE takes the
#: SPL component, or (MP0 < 14.0.0, an open question of specs/amd-bringup.md) the KDB image again, as tinygrad's
#: AM sends.
BOOTLOADER_ORDER: tuple[tuple[int, tuple[int, ...]], ...] = (
    (_BL["PSP_BL__LOAD_KEY_DATABASE"], (3,)),
    (_BL["PSP_BL__LOAD_TOS_SPL_TABLE"], (5, 3)),
    (_BL["PSP_BL__LOAD_SYSDRV"], (2,)),
    (_BL["PSP_BL__LOAD_SOCDRV"], (7,)),
    (_BL["PSP_BL__LOAD_INTFDRV"], (8,)),
    (_BL["PSP_BL__LOAD_DBGDRV"], (9,)),
    (_BL["PSP_BL__LOAD_RASDRV"], (10,)),
    (_BL["PSP_BL__LOAD_SOSDRV"], (1,)),
)

#: TMR size LOAD_TOC answers (invented: 18 MiB, under the 19 MiB bound tinygrad's master kept, §5.3).
TMR_SIZE = 0x1200000

