"""The emulated PSP's bootloader order and TMR size, and Navi31's firmware facts under their old names.

Each board's firmware facts (hashes, sizes, versions of the real files) are part of its description
(:class:`tinyhw.boards.spec.AmdFirmware`, e.g. tinyhw.boards.navi31.FIRMWARE); what follows describes Navi31's.

Source: Debian ``firmware-amd-graphics`` 20230210-5 (``bash tests/fetch_firmware.sh``), files
``amdgpu/psp_13_0_0_sos.bin`` (PSP header v2.0: six ``psp_fw_bin_desc`` components) and
``amdgpu/smu_13_0_0.bin`` (SMC header v2.1), read once with the layouts of specs/amd-bringup.md
§5.4 and recorded here as facts: each component's ``psp_fw_type`` (§5.1), firmware version,
size in bytes and SHA-256 of its bytes. The emulator never needs the files themselves; the test
``tests/mocks/amd/test_mock_boot_psp.py`` re-derives these numbers from the files.

Bootloader order (§5.1): KDB, SPL, SYS, SOC, INTF, DBG, RAS, SOS, those present. This file
holds SYS_DRV, SOS, TOC, KDB, SPL and RL: the bootloader sequence is KDB, SPL, SYS, SOS.
"""

from __future__ import annotations

from tinyhw.autogen import amdgpu_psp, smu13_driver_if_v13_0_0
from tinyhw.boards.navi31 import NAVI31
from tinyhw.boards.spec import FirmwareImage

_BL = amdgpu_psp.CONSTANTS


#: One firmware component the emulated PSP/SMU accepts (the type lives with the board descriptions).
Image = FirmwareImage

#: Navi31's firmware facts (tinyhw.boards.navi31.FIRMWARE): a board built from its description uses its own.
NAVI31_FIRMWARE = NAVI31.firmware
assert NAVI31_FIRMWARE is not None and NAVI31_FIRMWARE.smu is not None

#: Components of Debian's psp_13_0_0_sos.bin, by psp_fw_type.
PSP_13_0_0_SOS = NAVI31_FIRMWARE.sos

#: The SMU firmware image LOAD_IP_FW(SMU) must carry: smu_13_0_0.bin's ucode (offset 256, common header).
SMU_13_0_0 = NAVI31_FIRMWARE.smu

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

#: What the emulated Navi31's SMU reports (GetSmuVersion: the ucode_version of smu_13_0_0.bin; GetDriverIfVersion: the
#: header's).
SMU_VERSION = SMU_13_0_0.version
DRIVER_IF_VERSION = smu13_driver_if_v13_0_0.CONSTANTS["SMU13_0_0_DRIVER_IF_VERSION"]
assert NAVI31_FIRMWARE.smu_driver_if == DRIVER_IF_VERSION
