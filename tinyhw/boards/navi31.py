"""Navi31 (RX 7900 series) board facts: its description (:data:`NAVI31`), which features and the emulator ask.

Sources: specs/navi31-spi-flash.md §0 and §a (ids, BAR5 size, flash geometry, JEDEC id),
specs/pci-vfio-remote.md §3.14 (BAR layout of a real Navi31: BAR0/BAR2 64-bit
prefetchable, BAR4 I/O, BAR5 32-bit registers; ReBAR sizes), specs/amd-bringup.md §2.8 (the GC info table),
§5.4 (firmware headers), Debian ``firmware-amd-graphics`` 20230210-5 (the firmware facts below).

These are facts only: both the drivers and the emulators may read them; no behaviour lives here. The generic types
are in :mod:`tinyhw.boards.spec`; the emulated board's options in :mod:`tinyhw.boards.amd` (the old names
:class:`Navi31Options` / :class:`Navi31UsbOptions` stay as aliases), the bridge's in :mod:`tinyhw.boards.asm24`.
"""

from __future__ import annotations

from pathlib import Path

from tinyhw.boards.amd import AmdBoardOptions, AmdBoardUsbOptions
from tinyhw.boards.spec import (
    AmdFirmware,
    BarSpec,
    BoardSpec,
    Engines,
    FirmwareImage,
    GiB,
    MiB,
    PciFunctionSpec,
)
from tinyhw.regs.profiles import NAVI31 as NAVI31_PROFILE

__all__ = ["GC_INFO", "MMIO_BAR", "NAVI31", "BarSpec", "BoardSpec", "Navi31Options", "Navi31UsbOptions",
           "PciFunctionSpec", "default_flash_path"]


#: The GC info table of a full Navi31 (gc_info_v1_3 field -> value).
GC_INFO: dict[str, int] = {
    "gc_num_se": 6, "gc_num_wgp0_per_sa": 4, "gc_num_wgp1_per_sa": 0, "gc_num_rb_per_se": 4, "gc_num_gl2c": 24,
    "gc_num_gprs": 1536, "gc_num_max_gs_thds": 32, "gc_gs_table_depth": 32, "gc_gsprim_buff_depth": 1792,
    "gc_parameter_cache_depth": 1024, "gc_double_offchip_lds_buffer": 1, "gc_wave_size": 32,
    "gc_max_waves_per_simd": 16, "gc_max_scratch_slots_per_cu": 32, "gc_lds_size": 64, "gc_num_sc_per_se": 2,
    "gc_num_sa_per_se": 2, "gc_num_packer_per_sc": 4, "gc_num_gl2a": 4, "gc_num_tcp_per_sa": 8,
    "gc_num_sdp_interface": 16, "gc_num_tcps": 96, "gc_num_tcp_per_wpg": 2, "gc_tcp_l1_size": 16,
    "gc_num_sqc_per_wgp": 1, "gc_l1_instruction_cache_size_per_sqc": 32, "gc_l1_data_cache_size_per_sqc": 16,
    "gc_gl1c_per_sa": 1, "gc_gl1c_size_per_instance": 256, "gc_gl2c_per_gpu": 24, "gc_tcp_size_per_cu": 32,
    "gc_tcp_cache_line_size": 128, "gc_instruction_cache_size_per_sqc": 32, "gc_instruction_cache_line_size": 64,
    "gc_scalar_data_cache_size_per_sqc": 16, "gc_scalar_data_cache_line_size": 64, "gc_tcc_size": 6144,
    "gc_tcc_cache_line_size": 128,
}


#: The firmware a Navi31 boot loads, and the facts of Debian's files the emulated PSP/SMU check images against:
#: ``psp_13_0_0_sos.bin`` (PSP header v2.0: its ``psp_fw_bin_desc`` components by psp_fw_type: version, size,
#: SHA-256) and ``smu_13_0_0.bin``'s ucode (offset 256, common header); the SMU's driver-interface version is
#: smu13_driver_if_v13_0_0.h's SMU13_0_0_DRIVER_IF_VERSION. ``tests/mocks/amd/test_mock_boot_psp.py`` re-derives them.
FIRMWARE = AmdFirmware(
    files=("psp_13_0_0_sos.bin", "smu_13_0_0.bin", "sdma_6_0_0.bin", "gc_11_0_0_pfp.bin", "gc_11_0_0_me.bin",
           "gc_11_0_0_mec.bin", "gc_11_0_0_imu.bin", "gc_11_0_0_rlc.bin"),
    sos={
        2: FirmwareImage("SYS_DRV", 2, 0x00310025, 157584,
                         "8ff372e135a0342b8d3b433efea9084e80d4a06e896e7388b37711acb63958d0"),
        1: FirmwareImage("SOS", 1, 0x00310025, 99200,
                         "d7dd89dbe13edbeac2f50363dff80af8dd672bbf932bb252d64dddfc8d417c0b"),
        4: FirmwareImage("TOC", 4, 0x0000000C, 2304,
                         "8d865fb30c90dee3ae5e7ee1d74a85b39b2516df3ccc84de68da100fab90c481"),
        3: FirmwareImage("KDB", 3, 0x04003100, 5888,
                         "c4854e032ba8783580508c216cf58ab8061cd4cda992de5ad80a36b9ce553bef"),
        5: FirmwareImage("SPL", 5, 0x010031C0, 672, "021597a896603e375b023ffcae9d0dcc6444d02b6a0b45ba077dfc94061c9e9b"),
        6: FirmwareImage("RL", 6, 0x07001C00, 2400, "6f128b3d364c3616dda145dc82363b61aa91b3928d86785c1f6fb6387d242bde"),
    },
    smu=FirmwareImage("SMU", 0x12, 0x004E4B00, 261632,
                      "c0e6123d3c570fbf7dfc84522f71aa51419e2f30047a4681d518700fd81e7094"),
    smu_driver_if=0x3D,  # smu13_driver_if_v13_0_0.h SMU13_0_0_DRIVER_IF_VERSION
)

NAVI31 = BoardSpec(
    name="navi31",
    function=PciFunctionSpec(
        vendor_id=0x1002,
        device_id=0x744C,
        revision=0xC8,
        class_code=0x030000,
        # A real board's subsystem: Sapphire NITRO+ RX 7900 XTX Vapor-X (pci.ids "1da2 e471";
        # also the example of pci-vfio-remote.md §3.14).
        subsystem_vendor_id=0x1DA2,
        subsystem_id=0xE471,
    ),
    bars=(
        BarSpec(0, "vram", "memory", 256 * MiB, True, True),
        BarSpec(2, "doorbell", "memory", 2 * MiB, True, True),
        BarSpec(4, "io", "io", 256, False, False),
        BarSpec(5, "mmio", "memory", 1 * MiB, False, False),
    ),
    # ReBAR capability as on the Navi31 of pci-vfio-remote.md §3.14: 256 MiB ... 32 GiB.
    rebar_sizes=tuple(256 * MiB << k for k in range(8)),
    link_max_speed=4,
    link_max_width=16,
    flash_size=2 * MiB,
    flash_jedec=bytes([0xC8, 0x60, 0x15]),
    flash_sector=4096,
    flash_page=256,
    product="RX 7900 XTX",
    #: VRAM of an RX 7900 XTX: 24 GiB GDDR6 (AMD's product specification), as RCC_CONFIG_MEMSIZE reports it.
    vram_size=24 * GiB,
    mmio_bar=5,  # navi31-spi-flash.md §0: BAR5 is the 1 MiB register aperture
    profile=NAVI31_PROFILE,
    gc_info=GC_INFO,
    firmware=FIRMWARE,
    engines=Engines(romsw_flash=True, psp_update=True, am_boot=True, shader_core="gfx11", sdma="6.0.0"),
    vbios_name="NAVI31",
    pci_name="Navi 31 [Radeon RX 7900 XT/7900 XTX]",
    subsystem_vendor_name="Sapphire Technology Limited",
    subsystem_name="NITRO+ RX 7900 XTX Vapor-X",
)

#: BAR index of the register aperture on Navi31.
MMIO_BAR = NAVI31.mmio_bar

#: The emulated board's options (the names before every AMD board shared them).
Navi31Options = AmdBoardOptions
Navi31UsbOptions = AmdBoardUsbOptions


def default_flash_path() -> Path:
    """The shared default flash file of the emulated Navi31 (``mock:navi31`` and ``mock:navi31-usb`` use it)."""
    return NAVI31.state_path()
