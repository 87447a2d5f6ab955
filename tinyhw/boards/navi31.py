"""Navi31 (RX 7900 series) board facts.

Sources: specs/navi31-spi-flash.md §0 and §a (ids, BAR5 size, flash geometry, JEDEC id),
specs/pci-vfio-remote.md §3.14 (BAR layout of a real Navi31: BAR0/BAR2 64-bit
prefetchable, BAR4 I/O, BAR5 32-bit registers; ReBAR sizes), specs/asm24-usb-bridge.md §8
(topology behind the ASM24 bridge: bridges on buses 0-3, the GPU at bus 4).

These are facts only: both the drivers and the emulators may read them; no behaviour lives here. The emulated
board's device-string options (:class:`Navi31Options`, :class:`Navi31UsbOptions`) are declared here too, one field
per option, for the board registry (tinyhw.boards.registry).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tinyhw.boards.options import (
    DeviceOptions,
    FaultPlan,
    choice,
    faults,
    integer,
    number,
    option,
    path,
    pattern,
    percent,
    strict_option,
)

MiB = 1 << 20
GiB = 1 << 30


@dataclass(frozen=True)
class BarSpec:
    """One BAR of the board: its index, role (vram, doorbell, io, mmio), kind (memory or io), power-on size in bytes,
    width and prefetchability."""

    index: int
    role: str  # "vram", "doorbell", "io", "mmio"
    kind: str  # "memory" or "io"
    size: int  # power-on size (BAR0 is resizable)
    is_64bit: bool
    prefetchable: bool


@dataclass(frozen=True)
class PciFunctionSpec:
    """The ids the board's PCI function reports in config space."""

    vendor_id: int
    device_id: int
    revision: int
    class_code: int
    subsystem_vendor_id: int
    subsystem_id: int


@dataclass(frozen=True)
class BoardSpec:
    """A frozen description of one board: its name, PCI ids, BARs, the sizes BAR0 may take, the PCIe link's maximum
    speed and width, and its SPI flash (size, JEDEC id, sector and page size)."""

    name: str
    function: PciFunctionSpec
    bars: tuple[BarSpec, ...]
    rebar_sizes: tuple[int, ...]  # sizes BAR0 may take, in bytes
    link_max_speed: int  # PCIe speed code (4 = 16 GT/s)
    link_max_width: int
    flash_size: int
    flash_jedec: bytes
    flash_sector: int
    flash_page: int


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
)

#: BAR index of the register aperture on Navi31.
MMIO_BAR = 5

#: Where the GPU sits behind the ASM24 bridge (asm24-usb-bridge.md §8).
USB_GPU_BUS = 4


# -- device-string options of the emulated board (tinyhw.boards.options; read by the registry) ----------------------
def default_flash_path() -> Path:
    """The shared default flash file of the emulated Navi31 (``mock:navi31`` and ``mock:navi31-usb`` use it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tinyhw" / "navi31-flash.bin"


@dataclass
class Navi31Options(DeviceOptions):
    """Options of ``mock:navi31``, the emulated Navi31 attached directly (one field per option)."""

    strict: bool = strict_option()
    flash: Path = option(path(), None, "the file that holds the flash contents (default: user cache dir)",
                         factory=default_flash_path)
    faults: FaultPlan = option(faults(), None, "fault plan for one command (disconnect@N, timeout@N, stuck-busy, "
                               "bitflip@ADDR, ...)", factory=FaultPlan)
    timing: str = option(choice("instant", "typical", "max"), "typical", "flash operation durations")
    psp: str | None = option(choice("pbl", "early", "gated", "sos", "hang"), None,
                             "board state for the PSP mailbox and ROM_SW gating: pbl, the stalled boot loader with "
                             "ROM_SW available; early, a healthy autonomous boot (ROM_SW gated, early flash mailbox "
                             "open); sos/gated: the secure OS is running; hang: the PSP never answers a boot command. "
                             "Default: what the last 'tinyhw mock power-cycle' booted into (early, or pbl when no "
                             "partition boots), else pbl")
    psp_order: str = option(choice("default", "layout", "payload-last"), "default",
                            "the order in which the emulated PSP requests the IFWI's items during an early-boot "
                            "update (the real order is unknown): default, layout (by image offset), payload-last")
    aperture: str = option(choice("normal", "mirrored", "unavailable"), "normal", "ROM_INDEX/ROM_DATA behaviour")
    stray: str = option(choice("on", "off"), "on", "ROM_SW model option S8: CNTL writes fire stray transactions")
    fwcheck: str = option(choice("on", "off"), "on", "the PSP checks firmware images against the real Debian files")
    smu: str = option(pattern("normal|silent|busy@N", r"normal|silent|busy@\d+", "one of normal, silent, busy@N"),
                      "normal", "SMU fault: never answers, or answers message N (1-based, this process) with 0xFC")
    load: int = option(percent({"idle": 0, "busy": 100}), 0, "GFX load in percent the SMU metrics follow")
    sos_delay: float = option(number(0, 60, "seconds"), 0.3, "virtual seconds from the SOS load to sOS alive",
                              name="sosdelay")
    hugepage: str = option(choice("offset", "aligned"), "offset",
                           "a 2 MiB / 1 GiB page whose entry's address is not aligned to its size: offset, the address "
                           "is taken whole (inferred default); aligned, its low bits are dropped")
    sdma: str = option(choice("normal", "hang", "nop", "skip-in", "skip-out", "shift1m"), "normal",
                       "hang: SDMA0 never executes its ring (copies time out); nop/skip-in/skip-out/shift1m: copy "
                       "faults (every copy, or copies into / out of VRAM, move nothing; the VRAM side lands 1 MiB "
                       "higher), fences still written")
    clock: str | None = option(choice("device"), None, "the virtual clock's mode: device only here (clock=hybrid "
                               "is offered by mock:navi31-usb only: mock:navi31's emulator does not mark the work it "
                               "does on the driver's thread)")

    @property
    def smu_busy_at(self) -> int | None:
        """``smu=busy@N``: the message number N that answers busy (None otherwise)."""
        return int(self.smu[5:]) if self.smu.startswith("busy@") else None


@dataclass
class Navi31UsbOptions(Navi31Options):
    """Options of ``mock:navi31-usb``: the board's, plus the emulated ASM24 bridge's in front of it."""

    clock: str | None = option(choice("device", "hybrid"), None,
                               "the virtual clock's mode (tinyhw.mocks.vclock): device, modelled device time only "
                               "(exact, reproducible); hybrid, plus the host's measured CPU time between transfers. "
                               "Default: device, except that bench copy measures on the hybrid clock unless a mode "
                               "was given", env="TINYHW_CLOCK")
    speed: str = option(choice("ss", "hs"), "ss", "USB link speed of the emulated bridge (SuperSpeed, High-Speed)")
    link: str = option(choice("up", "down", "slow", "wedged", "no-gpu"), "up",
                       "PCIe link behaviour behind the emulated bridge")
    flaky: float = option(number(0, 1, "rate"), 0.0,
                          "a flaky USB link: each bulk IN transfer (the streamed reads that carry BAR block reads, "
                          "such as the ROM_SW data window) comes back with one byte changed at this rate (0..1)")
    flaky_seed: int = option(integer(0, 2**32 - 1, "seed"), 1,
                             "the seed of the flaky link's corruption (the same seed corrupts the same transfers)")
