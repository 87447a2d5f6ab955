"""The one type every board is described with (AMD and NVIDIA): what a board *has*, asked by features and emulators.

A board description (:class:`BoardSpec`) is frozen facts: PCI identity and BARs (:class:`PciFunctionSpec`,
:class:`BarSpec`), the PCIe link, VRAM, the SPI flash chip and layout, the register profile and IP versions, the GC
info table, firmware names and the facts of the real firmware files the emulated PSP/SMU check, and which engines
it has (:class:`Engines`). Features never test a board's name or PCI id: they find the description
(:func:`tinyhw.boards.by_pci`, or an opened emulated board's ``spec``) and ask it (``spec.engines.romsw_flash``).
Emulated boards are built from it (tinyhw.mocks): their state files are named after it (:meth:`BoardSpec.state_path`).

No behaviour lives here; the boards themselves are described in ``tinyhw/boards/<board>.py`` and listed by the
board registry (tinyhw.boards.registry).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tinyhw.regs.profiles import AsicProfile

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class BarSpec:
    """One BAR of the board: its index, role (vram, doorbell, io, mmio), kind (memory or io), power-on size in bytes,
    width and prefetchability."""

    index: int
    role: str  # "vram", "doorbell", "io", "mmio"
    kind: str  # "memory" or "io"
    size: int  # power-on size (a resizable BAR's smallest)
    is_64bit: bool
    prefetchable: bool


@dataclass(frozen=True)
class ConfigLayout:
    """A board's own config-space layout, for a board whose capability lists differ from the Navi31 example of
    specs/pci-vfio-remote.md §3.14 (which the emulated PCI function builds when a board gives none).

    ``command``: COMMAND at power-on; ``raw``: (offset, bytes) pieces of what the board reports beyond the common
    header: its capability pointer (0x34), capability list and extended capability chain; ``rebar``: the offset of its
    Resizable BAR capability and ``rebar_bar`` the BAR that capability resizes (its supported sizes are the board's
    ``rebar_sizes``, its control register built from them); ``addresses``: (BAR, address) a BIOS assigned. Only
    COMMAND, the BARs and the ReBAR control take writes; every other register of such a layout is read-only."""

    command: int
    raw: tuple[tuple[int, bytes], ...]
    rebar: int
    rebar_bar: int
    addresses: tuple[tuple[int, int], ...] = ()


@dataclass(frozen=True)
class PciFunctionSpec:
    """The ids the board's PCI function reports in config space, and its config-space layout when it has its own
    (``layout``; None: the Navi31 example of specs/pci-vfio-remote.md §3.14)."""

    vendor_id: int
    device_id: int
    revision: int
    class_code: int
    subsystem_vendor_id: int
    subsystem_id: int
    layout: ConfigLayout | None = None


@dataclass(frozen=True)
class FirmwareImage:
    """One firmware component an emulated PSP/SMU accepts: its name, ``psp_fw_type``, version, size in bytes and the
    SHA-256 of its bytes in the real (Debian) firmware file."""

    name: str
    fw_type: int  # psp_fw_type (amd-bringup.md §5.1) for sOS components
    version: int
    size: int
    sha256: str


@dataclass(frozen=True)
class AmdFirmware:
    """An AMD board's firmware: the files a boot loads (names under ``amdgpu/``) and the facts of the real files the
    emulated PSP and SMU check images against (components of ``psp_*_sos.bin`` by ``psp_fw_type``, the SMU ucode,
    the SMU's driver-interface version)."""

    files: tuple[str, ...]
    sos: Mapping[int, FirmwareImage] = field(default_factory=dict, compare=False)
    smu: FirmwareImage | None = None
    smu_driver_if: int = 0


@dataclass(frozen=True)
class Engines:
    """Which engines a board has (what features ask before they drive one).

    ``romsw_flash``: the SMUIO ROM_SW engine reaches the SPI flash (tinyhw.flash); ``psp_update``: the PSP's
    early-boot flash update mailbox (tinyhw.flash.update); ``am_boot``: the PSP/SMU bring-up of tinyhw.boot;
    ``shader_core``: the ISA of its compute units (``gfx11``; ``""``: none tinyhw runs kernels on); ``sdma``: the SDMA
    IP version (``"6.0.0"``; ``""``: none); ``gsp_boot``: an NVIDIA board's GSP boot flavour (``fwsec-booter``)."""

    romsw_flash: bool = False
    psp_update: bool = False
    am_boot: bool = False
    shader_core: str = ""
    sdma: str = ""
    gsp_boot: str = ""


@dataclass(frozen=True)
class BoardSpec:
    """A frozen description of one board: its name and product, PCI ids, BARs, the sizes BAR0 may take, the PCIe
    link's maximum speed and width, VRAM, its SPI flash (size, JEDEC id, sector and page size, the VBIOS name of its
    factory image), the register BAR and profile, the GC info table, its firmware and its engines."""

    name: str
    function: PciFunctionSpec
    bars: tuple[BarSpec, ...]
    rebar_sizes: tuple[int, ...]  # sizes BAR0 may take, in bytes
    link_max_speed: int  # PCIe speed code (4 = 16 GT/s)
    link_max_width: int
    flash_size: int = 0
    flash_jedec: bytes = b""
    flash_sector: int = 0
    flash_page: int = 0
    product: str = ""  # "RX 7900 XTX"
    vram_size: int = 0  # bytes
    mmio_bar: int = 5  # the register aperture
    profile: AsicProfile | None = field(default=None, compare=False)  # the register profile (tinyhw.regs)
    gc_info: Mapping[str, int] = field(default_factory=dict, compare=False)  # gc_info_v1_3 field -> value
    firmware: AmdFirmware | None = None
    engines: Engines = field(default_factory=Engines)
    vbios_name: str = ""  # the chip name in the emulated board's synthetic VBIOS (default: the name, upper case)
    pci_name: str = ""  # its device's pci.ids name ("Navi 31 [Radeon RX 7900 XT/7900 XTX]")
    subsystem_vendor_name: str = ""  # pci.ids names of its subsystem vendor and subsystem ("" when not listed)
    subsystem_name: str = ""
    state_name: str = ""  # the name of the emulated board's state file (default: ``<name>-flash.bin``)

    @property
    def ids(self) -> tuple[int, int]:
        """(vendor id, device id) of its PCI function."""
        return self.function.vendor_id, self.function.device_id

    @property
    def pci_id(self) -> str:
        """``1002:744c``."""
        return f"{self.function.vendor_id:04x}:{self.function.device_id:04x}"

    @property
    def compute_units(self) -> int:
        """Its compute units from the GC info (shader engines x arrays per engine x WGPs per array x 2 CUs per WGP);
        0 when the description has no GC info."""
        g = self.gc_info
        if not g:
            return 0
        return g["gc_num_se"] * g["gc_num_sa_per_se"] * (g["gc_num_wgp0_per_sa"] + g["gc_num_wgp1_per_sa"]) * 2

    def state_path(self) -> Path:
        """The emulated board's default state file, in the user cache dir: its flash contents for a board with a
        flash (``$XDG_CACHE_HOME/tinyhw/<name>-flash.bin``; the direct and the bridged attachment share it), else
        its board state (``state_name``, e.g. ``ad102-board.json``)."""
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        return Path(base) / "tinyhw" / (self.state_name or f"{self.name}-flash.bin")
