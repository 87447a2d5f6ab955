"""Facts about the real Navi31 firmware the emulated PSP checks images against (hashes, sizes, versions).

Source: Debian ``firmware-amd-graphics`` 20230210-5 (``bash tests/fetch_firmware.sh``), files
``amdgpu/psp_13_0_0_sos.bin`` (PSP header v2.0: six ``psp_fw_bin_desc`` components) and
``amdgpu/smu_13_0_0.bin`` (SMC header v2.1), read once with the layouts of specs/amd-bringup.md
§5.4 and recorded here as facts: each component's ``psp_fw_type`` (§5.1), firmware version,
size in bytes and SHA-256 of its bytes. The emulator never needs the files themselves; the test
``tests/test_mock_boot_psp.py`` re-derives these numbers from the files.

Bootloader order (§5.1): KDB, SPL, SYS, SOC, INTF, DBG, RAS, SOS, those present. This file
holds SYS_DRV, SOS, TOC, KDB, SPL and RL: the bootloader sequence is KDB, SPL, SYS, SOS.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.autogen import amdgpu_psp, smu13_driver_if_v13_0_0

_BL = amdgpu_psp.CONSTANTS


@dataclass(frozen=True)
class Image:
    """One firmware component the emulated PSP/SMU accepts: its name, psp_fw_type, version, size in bytes and the
    SHA-256 of its bytes in the real Debian firmware file."""
    name: str
    fw_type: int  # psp_fw_type (§5.1) for sOS components
    version: int
    size: int
    sha256: str


#: Components of Debian's psp_13_0_0_sos.bin, by psp_fw_type.
PSP_13_0_0_SOS: dict[int, Image] = {
    2: Image("SYS_DRV", 2, 0x00310025, 157584, "8ff372e135a0342b8d3b433efea9084e80d4a06e896e7388b37711acb63958d0"),
    1: Image("SOS", 1, 0x00310025, 99200, "d7dd89dbe13edbeac2f50363dff80af8dd672bbf932bb252d64dddfc8d417c0b"),
    4: Image("TOC", 4, 0x0000000C, 2304, "8d865fb30c90dee3ae5e7ee1d74a85b39b2516df3ccc84de68da100fab90c481"),
    3: Image("KDB", 3, 0x04003100, 5888, "c4854e032ba8783580508c216cf58ab8061cd4cda992de5ad80a36b9ce553bef"),
    5: Image("SPL", 5, 0x010031C0, 672, "021597a896603e375b023ffcae9d0dcc6444d02b6a0b45ba077dfc94061c9e9b"),
    6: Image("RL", 6, 0x07001C00, 2400, "6f128b3d364c3616dda145dc82363b61aa91b3928d86785c1f6fb6387d242bde"),
}

#: The SMU firmware image LOAD_IP_FW(SMU) must carry: smu_13_0_0.bin's ucode (offset 256, common header).
SMU_13_0_0 = Image("SMU", 0x12, 0x004E4B00, 261632,
                   "c0e6123d3c570fbf7dfc84522f71aa51419e2f30047a4681d518700fd81e7094")

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

#: What the SMU reports (GetSmuVersion: the ucode_version of smu_13_0_0.bin; GetDriverIfVersion: the header's).
SMU_VERSION = SMU_13_0_0.version
DRIVER_IF_VERSION = smu13_driver_if_v13_0_0.CONSTANTS["SMU13_0_0_DRIVER_IF_VERSION"]
