"""NVIDIA chip identification facts: PMC_BOOT_0 / PMC_BOOT_42 decoding and chipset names.

Spec: specs/nv-bringup.md §3.1 (register layouts: BOOT_0 at BAR0 0x0, BOOT_42 at 0xA00), §3.2
(architecture codes), §3.3 (chipset ids = architecture << 4 | implementation, per Linux nova-core),
§3.4 (what tinygrad derives: name prefix, firmware directory, boot flavour), §2 (tinygrad's PCI device-id
filter and the Blackwell device-id ranges) and §15 (the probe's decode rules: ``0xFFFFFFFF`` = not
readable, ``0xBADFxxxx`` = privilege/decode error, "supported by tinygrad's PCI path").

Facts only, shared by the probe feature and the emulated board; no device access here. The emulated AD102's
device-string options (:class:`Ad102Options`) are declared here too, for the board registry.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.boards.options import DeviceOptions, FaultPlan, choice, faults, option, path, strict_option
from tinyhw.boards.spec import BarSpec, BoardSpec, ConfigLayout, Engines, PciFunctionSpec

NVIDIA_VENDOR = 0x10DE
REG_BOOT_0 = 0x000000
REG_BOOT_42 = 0x000A00
REG_GFW_PRIV_LEVEL_MASK = 0x118128  # §4: bit 0 set once GFW may be polled (pre-Blackwell)
REG_GFW_PROGRESS = 0x118234  # §4: low byte 0xFF = GFW_BOOT_PROGRESS_COMPLETED (pre-Blackwell)
REG_VRAM_MIB = 0x1183A4  # §4: NV_PGC6_AON_SECURE_SCRATCH_GROUP_42, VRAM size in MiB
REG_WPR2_ADDR_HI = 0x1FA828  # §4: non-zero => WPR2 up (GSP running or left locked)
PROM_WINDOW = 0x300000  # §6.1: the VBIOS PROM window in BAR0
PROM_SIZE = 1 << 20  # §6.1: tinygrad reads 1 MiB
GFW_COMPLETED = 0xFF
NOT_READABLE = 0xFFFFFFFF
REG_WPR2_ADDR_LO = 0x1FA824  # §4: WPR2 start (field val 31:4, 4 KiB units; inferred from the HI field's layout)

# -- the boot path's registers (§8 falcons, §11 mailboxes, §12.1, §13.3 doorbell, §13.5 sequencer) ---------------
FALCON_GSP = 0x110000  # §8: GSP falcon base
FALCON_SEC2 = 0x840000  # §8: SEC2 falcon base
#: §8: engine reset registers (absolute), bit 0 = reset
FALCON_ENGINE = {FALCON_GSP: 0x1103C0, FALCON_SEC2: 0x8403C0}
#: §8: offsets from a falcon's base
FALCON_MAILBOX0, FALCON_MAILBOX1, FALCON_OS, FALCON_RM = 0x040, 0x044, 0x080, 0x084
FALCON_HWCFG2, FALCON_CPUCTL, FALCON_BOOTVEC, FALCON_DMACTL = 0x0F4, 0x100, 0x104, 0x10C
FALCON_DMATRFBASE, FALCON_DMATRFMOFFS, FALCON_DMATRFCMD, FALCON_DMATRFFBOFFS = 0x110, 0x114, 0x118, 0x11C
FALCON_DMATRFBASE1, FALCON_CPUCTL_ALIAS = 0x128, 0x130
FBIF_TRANSCFG0, FBIF_CTL = 0x600, 0x624
RISCV_CPUCTL, RISCV_BCR_CTRL = 0x1388, 0x1668
FALCON2_MOD_SEL, FALCON2_BROM_UCODE_ID, FALCON2_BROM_ENGIDMASK, FALCON2_BROM_PARAADDR0 = 0x1180, 0x1198, 0x119C, 0x1210
#: §8 field bits
HWCFG2_RISCV, HWCFG2_MEM_SCRUBBING, HWCFG2_RESET_READY = 1 << 10, 1 << 12, 1 << 31
CPUCTL_STARTCPU, CPUCTL_HALTED, CPUCTL_ALIAS_EN = 1 << 1, 1 << 4, 1 << 6
RISCV_CPUCTL_HALTED, RISCV_CPUCTL_ACTIVE = 1 << 4, 1 << 7
BCR_VALID, BCR_CORE_RISCV, BCR_BRFETCH = 1 << 0, 1 << 4, 1 << 8
DMATRF_FULL, DMATRF_IDLE, DMATRF_IMEM, DMATRF_SIZE_256 = 1 << 0, 1 << 1, 1 << 4, 6 << 8
FBIF_ALLOW_PHYS_NO_CTX = 1 << 7
MOD_SEL_RSA3K = 1
GSP_QUEUE_HEAD0 = 0x110C00  # §13.3: the doorbell (NV_PGSP_QUEUE_HEAD[0])
BSI_SECURE_SCRATCH_14 = 0x1180F8  # §13.5 opcode 8: bit 26 boot_stage_3_handoff
PBUS_BAR1_BLOCK = 0x001704  # §12.1 step 9

#: §3.2, BOOT_42 ``architecture`` codes.
ARCHITECTURES = {
    0x11: "Maxwell GM100", 0x12: "Maxwell GM200", 0x13: "Pascal GP100", 0x14: "Volta GV100",
    0x15: "Volta GV110", 0x16: "Turing TU100", 0x17: "Ampere GA100", 0x18: "Hopper GH100", 0x19: "Ada AD100",
    0x1A: "Blackwell GB100", 0x1B: "Blackwell GB200", 0x1F: "AMODEL (simulation model)",
}

#: §3.3, chipset id -> chip name (Linux nova-core ``gpu.rs``).
CHIPSETS = {
    0x162: "TU102", 0x164: "TU104", 0x166: "TU106", 0x167: "TU117", 0x168: "TU116",
    0x170: "GA100", 0x172: "GA102", 0x173: "GA103", 0x174: "GA104", 0x176: "GA106", 0x177: "GA107",
    0x180: "GH100",
    0x192: "AD102", 0x193: "AD103", 0x194: "AD104", 0x196: "AD106", 0x197: "AD107",
    0x1A0: "GB100", 0x1A2: "GB102",
    0x1B2: "GB202", 0x1B3: "GB203", 0x1B5: "GB205", 0x1B6: "GB206", 0x1B7: "GB207",
}

#: §3.4: the architectures tinygrad's PCI path names (prefix) and the firmware directory it uses.
TINYGRAD_PREFIX = {0x17: ("GA1", "ga102"), 0x19: ("AD1", "ad102"), 0x1B: ("GB2", "gb202")}

#: §2: tinygrad's PCI path keeps device ids whose ``id & 0xFF00`` is one of these.
TINYGRAD_ID_PAGES = (0x2200, 0x2400, 0x2500, 0x2600, 0x2700, 0x2800, 0x2B00, 0x2C00, 0x2D00, 0x2F00)

#: §2: Blackwell PCI device-id ranges (NVIDIA gpu-admin-tools), inclusive.
DEVICE_ID_RANGES = (
    (0x2900, 0x29FF, "GB100/GB102"), (0x2B80, 0x2BFF, "GB202"), (0x2C00, 0x2C7F, "GB203"),
    (0x2D00, 0x2D7F, "GB206"), (0x2D80, 0x2DFF, "GB207"), (0x2F00, 0x2F7F, "GB205"),
)


@dataclass(frozen=True)
class Boot0:
    """NV_PMC_BOOT_0 fields (§3.1)."""

    raw: int
    minor_revision: int
    major_revision: int
    architecture: int  # architecture_0 | architecture_1 << 5
    implementation: int

    @property
    def chipset(self) -> int:
        """The chipset number: architecture << 4 | implementation (0x192 for AD102)."""
        return (self.architecture << 4) | self.implementation


@dataclass(frozen=True)
class Boot42:
    """NV_PMC_BOOT_42 fields (§3.1); ``chipset`` is bits 29:20."""

    raw: int
    minor_extended_revision: int
    minor_revision: int
    major_revision: int
    implementation: int
    architecture: int

    @property
    def chipset(self) -> int:
        """The chipset number, bits 29:20 of the raw value."""
        return (self.raw >> 20) & 0x3FF


def decode_boot0(value: int) -> Boot0:
    """The fields of an NV_PMC_BOOT_0 value (the architecture's 6th bit comes from bit 8)."""
    arch = ((value >> 24) & 0x1F) | (((value >> 8) & 1) << 5)
    return Boot0(value, value & 0xF, (value >> 4) & 0xF, arch, (value >> 20) & 0xF)


def decode_boot42(value: int) -> Boot42:
    """The fields of an NV_PMC_BOOT_42 value."""
    return Boot42(value, (value >> 8) & 0xF, (value >> 12) & 0xF, (value >> 16) & 0xF, (value >> 20) & 0xF,
                  (value >> 24) & 0x3F)


def register_problem(value: int) -> str | None:
    """Why a BAR0 value is not data (§15): all ones (device off/D3) or a ``0xBADFxxxx`` error pattern."""
    if value == NOT_READABLE:
        return "reads 0xffffffff: the device is not readable (off, in d3, or gone)"
    if value >> 16 == 0xBADF:
        return f"reads 0x{value:08x}: a privilege or decode error for this register"
    return None


def chip_name(chipset: int) -> str | None:
    """The chip's name for a chipset number (``AD102``...), or None when tinyhw does not know it."""
    return CHIPSETS.get(chipset)


def tinygrad_pci_id(device_id: int) -> bool:
    """§2: does tinygrad's PCI path accept this NVIDIA device id?"""
    return (device_id & 0xFF00) in TINYGRAD_ID_PAGES


def describe_chip(boot42: int, device_id: int | None = None) -> dict[str, Any]:
    """The probe's chip section from BOOT_42 (§3.3/§3.4/§15): chipset, name, architecture and derived values."""
    b = decode_boot42(boot42)
    arch = b.architecture
    name = chip_name(b.chipset)
    prefix = TINYGRAD_PREFIX.get(arch)
    doc: dict[str, Any] = {
        "chipset": b.chipset,
        "name": name,
        "architecture": arch,
        "architecture_name": ARCHITECTURES.get(arch),
        "implementation": b.implementation,
        "revision": f"{b.major_revision:x}{b.minor_revision:x}",
        "firmware_dir": prefix[1] if prefix else None,
        "boot_flavour": ("fmc/cot (fsp)" if arch >= 0x1A else "fwsec + booter") if arch >= 0x17 else None,
        "mmu_version": 3 if arch >= 0x1A else 2,
        "tinygrad_pci_path": prefix is not None and (device_id is None or tinygrad_pci_id(device_id)),
    }
    return doc


# -- the emulated Ada board (mock:ad102) ---------------------------------------------------------------------
_AD102_LINK = (4, 16)  # 16 GT/s x16


def _ada_config_layout(speed: int, width: int) -> ConfigLayout:
    """The config-space layout of an Ada board (specs/pci-vfio-remote.md §3.2-§3.9 for the structures): capabilities
    PM 0x60 -> MSI 0x68 -> PCI Express v2 (legacy endpoint) 0x78 -> vendor-specific 0xB4; extended capabilities
    Virtual Channel 0x100 -> LTR 0x250 -> L1 PM Substates 0x258 -> Power Budgeting 0x128 -> AER 0x420 ->
    vendor-specific 0x600 -> Secondary PCIe 0x900 -> Resizable BAR 0xBB0 (BAR1) -> Physical Layer 16 GT/s 0xC1C ->
    Lane Margining 0xD00 -> Data Link Feature 0xE00. The offsets and order are those published ``lspci -vvv``
    listings of RTX 40-series boards show (inferred: not in the spec); register values inside the capabilities are
    invented but well-formed."""
    cfg = bytearray(4096)

    def put(off: int, fmt: str, *values: int) -> None:
        struct.pack_into("<" + fmt, cfg, off, *values)

    put(0x34, "B", 0x60)
    put(0x60, "BBHH", 0x01, 0x68, 0x0603, 0x0008)  # PM v3, D0, no soft reset
    put(0x68, "BBH", 0x05, 0x78, 0x0081)  # MSI, 64-bit, enabled, 1 vector
    # PCI Express v2, legacy endpoint (port type 1); devcap, devctl, linkcap, linkctl/status, devcap2..linkctl2
    put(0x78, "BBH", 0x10, 0xB4, 0x0012)
    put(0x78 + 0x04, "I", 0x10008FE1)
    put(0x78 + 0x08, "HH", 0x2930, 0x0000)
    put(0x78 + 0x0C, "I", speed | (width << 4) | (3 << 10) | (0x11 << 15))
    put(0x78 + 0x10, "HH", 0x0040, speed | (width << 4) | 0x1000)
    put(0x78 + 0x24, "I", 0x00700813)
    put(0x78 + 0x2C, "I", ((1 << speed) - 1) << 1)
    put(0x78 + 0x30, "HH", speed, 0x001E)
    put(0xB4, "BBB", 0x09, 0x00, 0x14)  # vendor specific, length 0x14
    cfg[0xB7:0xB4 + 0x14] = bytes(range(1, 0x12))  # invented vendor bytes
    chain = [(0x100, 0x0002, 1), (0x250, 0x0018, 1), (0x258, 0x001E, 1), (0x128, 0x0004, 1), (0x420, 0x0001, 2),
             (0x600, 0x000B, 1), (0x900, 0x0019, 1), (0xBB0, 0x0015, 1), (0xC1C, 0x0026, 1), (0xD00, 0x0027, 1),
             (0xE00, 0x0025, 1)]
    for i, (off, cap_id, ver) in enumerate(chain):
        nxt = chain[i + 1][0] if i + 1 < len(chain) else 0
        put(off, "I", cap_id | (ver << 16) | (nxt << 20))
    put(0x600 + 4, "I", 0x0001 | (1 << 16) | (0x024 << 20))  # vendor-specific header: id 1 rev 1 len 0x24
    put(0x420 + 0x0C, "I", 0x00462030)  # AER uncorrectable severity (defaults)
    put(0x420 + 0x18, "I", 0x000000A0)
    return ConfigLayout(command=0x0007, raw=((0x34, bytes(cfg[0x34:0x35])), (0x40, bytes(cfg[0x40:]))),
                        rebar=0xBB0, rebar_bar=1,
                        addresses=((0, 0xFB00_0000), (1, 0x60_0000_0000), (3, 0x60_1000_0000), (5, 0xF000)))


#: The emulated Ada board's description: 10de:2684 is "AD102 [GeForce RTX 4090]" in pci.ids; revision 0xa1 and the
#: subsystem 10de:167c (Founders Edition) are inferred from published ``lspci -nn`` output, not from the spec.
#: BARs: BAR0 16 MiB registers, BAR1 VRAM aperture 256 MiB (resizable 64 MiB .. 32 GiB), BAR3 32 MiB, BAR5 128 I/O
#: ports (spec §2 roles; sizes inferred from lspci output); a Gen4 x16 link; 24 GiB VRAM; GSP booted by FWSEC and
#: the booter (§3.4: architecture 0x19). No SPI flash tinyhw reaches (the VBIOS is read through the PROM window);
#: its emulated state lives in a board-state file. Its config space has an Ada board's own capability layout
#: (BIOS-assigned BAR addresses invented), BAR1 the one the Resizable BAR capability resizes.
AD102 = BoardSpec(
    name="ad102",
    function=PciFunctionSpec(vendor_id=NVIDIA_VENDOR, device_id=0x2684, revision=0xA1, class_code=0x030000,
                             subsystem_vendor_id=NVIDIA_VENDOR, subsystem_id=0x167C,
                             layout=_ada_config_layout(*_AD102_LINK)),
    bars=(BarSpec(0, "mmio", "memory", 16 << 20, False, False), BarSpec(1, "vram", "memory", 256 << 20, True, True),
          BarSpec(3, "mmio", "memory", 32 << 20, True, True), BarSpec(5, "io", "io", 128, False, False)),
    rebar_sizes=tuple(64 << 20 << k for k in range(10)),
    link_max_speed=_AD102_LINK[0],
    link_max_width=_AD102_LINK[1],
    product="RTX 4090",
    vram_size=24576 << 20,
    mmio_bar=0,
    engines=Engines(gsp_boot="fwsec-booter"),
    state_name="ad102-board.json",
    pci_name="AD102 [GeForce RTX 4090]",
)
AD102_BOOT_0 = 0x192000A1  # architecture 0x19, implementation 2 (AD102), revision a1
AD102_BOOT_42 = 0x192A1000  # architecture 0x19, implementation 2, major 0xa, minor 1
AD102_VRAM_MIB = AD102.vram_size >> 20


def default_state_path() -> Path:
    """The emulated AD102's board-state file (WPR2 and GSP state that outlive one command), in the user cache dir."""
    return AD102.state_path()


@dataclass
class Ad102Options(DeviceOptions):
    """Options of ``mock:ad102``, the emulated AD102 attached directly (one field per option)."""

    strict: bool = strict_option()
    gsp: str = option(choice("off", "running"), "off", "WPR2 up (a driver booted GSP) or not")
    power: str = option(choice("d0", "d3hot", "suspended"), "d0", "the power state its attributes report")
    driver: str = option(choice("none", "vfio-pci", "nvidia", "nouveau"), "none",
                         "the kernel driver its attributes report as bound")
    faults: FaultPlan = option(faults(), None, "fault plan for one command (disconnect@N, timeout@N: the N-th BAR "
                               "access)", factory=FaultPlan)
    gsp_fault: str = option(choice("none", "fwsec-error", "booter-timeout", "queue-silent"), "none",
                            "boot fault: fwsec reports an error, the booter never halts, or the gsp's status "
                            "queue never answers", name="gsp-fault")
    dma: str = option(choice("iommu", "physical"), "iommu",
                      "how host memory reaches the gpu: at iovas through an emulated iommu (as vfio:), or at invented "
                      "physical addresses with no iommu (as pci:)")
    state: Path = option(path(), None, "the board-state file (default: user cache dir)", factory=default_state_path)
