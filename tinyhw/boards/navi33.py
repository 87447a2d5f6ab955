"""Navi33 (RX 7600) board facts: its description (:data:`NAVI33`), which features and the emulator ask.

Public sources: pci.ids ``1002:7480`` "Navi 33 [Radeon RX 7700S/7600S]"; AMD's RX 7600
product specification (8 GiB GDDR6, 32 compute units, PCIe 4.0 x8); the IP versions Linux's amdgpu matches for it
(``amdgpu_discovery.c``: GC 11.0.2, MP0/MP1 13.0.7, SDMA 6.0.2) and the files it loads for them, which Debian
bookworm's ``firmware-amd-graphics`` 20230210-5 ships (``gc_11_0_2_*``, ``psp_13_0_7_sos``, ``smu_13_0_7``,
``sdma_6_0_2``); LLVM's AMDGPUUsage (gfx1102: 1024 VGPRs per SIMD, not gfx1100's 1536).

Not public, kept as fields and marked **inferred**: the IP discovery bases (Linux has no ``navi33_ip_offset.h``; the
Navi2x table of the Navi31 profile is used, as for Navi31), the SPI flash chip (the GD25LQ16E of Navi31), the board's
subsystem ids and revision, the ReBAR sizes, and the GC info fields not given by the product specification.
"""

from __future__ import annotations

from dataclasses import replace

from tinyhw.boards.spec import AmdFirmware, BarSpec, BoardSpec, Engines, FirmwareImage, GiB, MiB, PciFunctionSpec
from tinyhw.regs.profiles import NAVI31 as NAVI31_PROFILE
from tinyhw.regs.profiles import AsicProfile

_N31 = NAVI31_PROFILE.blocks

#: Register profile: Linux programs every GC 11.0.x with the gc_11_0_0 headers and every MP0/MP1 13.0.x with mp_13_0_2,
#: so Navi33 shares those tables with Navi31; MMHUB 3.0.2 has its own (mmhub_v3_0_2.c: mmhub_3_0_2, whose VM
#: registers sit elsewhere than mmhub_3_0_0's). The IP versions its discovery table states differ.
PROFILE = AsicProfile(
    name="navi33",
    aliases=("gfx1102",),
    description="Navi33, RX 7600 series (GC 11.0.2, gfx1102)",
    pci_ids=((0x1002, 0x7480),),  # pci.ids "Navi 33 [Radeon RX 7700S/7600S]"
    bar=5,
    blocks={
        **_N31,
        "mp0": replace(_N31["mp0"], version="13.0.7"),
        "mp1": replace(_N31["mp1"], version="13.0.7"),
        "gc": replace(_N31["gc"], version="11.0.2", source="gfx_v11_0.c (gc_11_0_0 headers for GC 11.0.2); bases "
                      "inferred as Navi31's"),
        "sdma": replace(_N31["sdma"], version="6.0.2"),
        "mmhub": replace(_N31["mmhub"], table="mmhub_3_0_2", version="3.0.2",
                         source="mmhub_v3_0_2.c (mmhub_3_0_2 headers); bases inferred as Navi31's"),
    },
)

#: The GC info table (gc_info_v1_3): 2 shader engines x 2 shader arrays x 4 WGPs = 32 CUs (the product's count),
#: 1024 VGPRs (gfx1102, LLVM AMDGPUUsage), 2 MiB L2 in 8 channels (the product's L2). Inferred: the other fields
#: keep Navi31's per-unit values, scaled where they count units (RBs, TCPs).
GC_INFO: dict[str, int] = {
    "gc_num_se": 2, "gc_num_wgp0_per_sa": 4, "gc_num_wgp1_per_sa": 0, "gc_num_rb_per_se": 4, "gc_num_gl2c": 8,
    "gc_num_gprs": 1024, "gc_num_max_gs_thds": 32, "gc_gs_table_depth": 32, "gc_gsprim_buff_depth": 1792,
    "gc_parameter_cache_depth": 1024, "gc_double_offchip_lds_buffer": 1, "gc_wave_size": 32,
    "gc_max_waves_per_simd": 16, "gc_max_scratch_slots_per_cu": 32, "gc_lds_size": 64, "gc_num_sc_per_se": 2,
    "gc_num_sa_per_se": 2, "gc_num_packer_per_sc": 4, "gc_num_gl2a": 4, "gc_num_tcp_per_sa": 8,
    "gc_num_sdp_interface": 8, "gc_num_tcps": 32, "gc_num_tcp_per_wpg": 2, "gc_tcp_l1_size": 16,
    "gc_num_sqc_per_wgp": 1, "gc_l1_instruction_cache_size_per_sqc": 32, "gc_l1_data_cache_size_per_sqc": 16,
    "gc_gl1c_per_sa": 1, "gc_gl1c_size_per_instance": 256, "gc_gl2c_per_gpu": 8, "gc_tcp_size_per_cu": 32,
    "gc_tcp_cache_line_size": 128, "gc_instruction_cache_size_per_sqc": 32, "gc_instruction_cache_line_size": 64,
    "gc_scalar_data_cache_size_per_sqc": 16, "gc_scalar_data_cache_line_size": 64, "gc_tcc_size": 2048,
    "gc_tcc_cache_line_size": 128,
}

#: Debian's Navi33 files (firmware-amd-graphics 20230210-5), read with the layouts of amd-bringup.md §5.4:
#: psp_13_0_7_sos.bin (PSP header v2.0, five components: no RL), smu_13_0_7.bin's ucode; the SMU's
#: driver-interface version is Linux's smu13_driver_if_v13_0_7.h SMU13_0_7_DRIVER_IF_VERSION.
FIRMWARE = AmdFirmware(
    files=("psp_13_0_7_sos.bin", "smu_13_0_7.bin", "sdma_6_0_2.bin", "gc_11_0_2_pfp.bin", "gc_11_0_2_me.bin",
           "gc_11_0_2_mec.bin", "gc_11_0_2_imu.bin", "gc_11_0_2_rlc.bin"),
    sos={
        2: FirmwareImage("SYS_DRV", 2, 0x0033001B, 141200,
                         "e79884a4ebb01e57161848c61e59438e72e9c999264ca85ceec801327873dc4d"),
        1: FirmwareImage("SOS", 1, 0x0033001B, 99184,
                         "e1eb0cfecf76dee4b607bc182d68129f9c76af1d535f90807758cbb887dff953"),
        4: FirmwareImage("TOC", 4, 0x0000000C, 2304,
                         "b06c57923c1d22b2f125d743e7309ef2e050ab52e200e42fb7f77625a2f96ad4"),
        3: FirmwareImage("KDB", 3, 0x04003300, 4880,
                         "ca54e9394737680f641f22adfaebf2b3f9405ee924e0fe18cfed86812472c1ec"),
        5: FirmwareImage("SPL", 5, 0x010033C0, 672, "95e4e3585ca38faec8842e7ca58af3d67f24d0b7fb27e6c8d6750179246d1f6c"),
    },
    smu=FirmwareImage("SMU", 0x12, 0x00523C00, 261632,
                      "10fed0a359101f919e11b9911edff3e4027b50fbd990d2f4c0b020cfab6a1d6b"),
    smu_driver_if=0x35,
)

NAVI33 = BoardSpec(
    name="navi33",
    function=PciFunctionSpec(
        vendor_id=0x1002,
        device_id=0x7480,
        revision=0xCF,  # inferred: the revision RX 7600 boards report in published lspci output
        class_code=0x030000,
        subsystem_vendor_id=0x1002,  # inferred: an AMD reference board (no board's subsystem is stated here)
        subsystem_id=0x7480,
    ),
    bars=(
        BarSpec(0, "vram", "memory", 256 * MiB, True, True),
        BarSpec(2, "doorbell", "memory", 2 * MiB, True, True),
        BarSpec(4, "io", "io", 256, False, False),
        BarSpec(5, "mmio", "memory", 1 * MiB, False, False),
    ),
    rebar_sizes=tuple(256 * MiB << k for k in range(6)),  # inferred: 256 MiB ... 8 GiB (its VRAM)
    link_max_speed=4,  # PCIe 4.0
    link_max_width=8,  # the RX 7600 is a x8 card
    flash_size=2 * MiB,  # inferred: the flash chip of Navi31 (GD25LQ16E)
    flash_jedec=bytes([0xC8, 0x60, 0x15]),
    flash_sector=4096,
    flash_page=256,
    product="RX 7600",
    vram_size=8 * GiB,
    mmio_bar=5,
    profile=PROFILE,
    gc_info=GC_INFO,
    firmware=FIRMWARE,
    engines=Engines(romsw_flash=True, psp_update=True, am_boot=True, shader_core="gfx11", sdma="6.0.2"),
    vbios_name="NAVI33",
    pci_name="Navi 33 [Radeon RX 7700S/7600S]",  # pci.ids of Debian bookworm (later ones add 7600, 7600M XT, ...)
)
