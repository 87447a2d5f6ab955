"""The ASM2464/ASM2364 USB-to-PCIe bridge: where a GPU sits behind it, and the emulated bridge's device-string options.

Source: specs/asm24-usb-bridge.md §8 (topology behind the bridge: bridges on buses 0-3, the GPU at bus 4).
Facts and options only: the USB driver (tinyhw.usb) and the bridge emulator (tinyhw.mocks.bridge.asm24) read them; any
board may sit behind the bridge (its entry's options class adds :class:`Asm24Options` to the board's own).
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.boards.options import DeviceOptions, choice, integer, number, option

#: Where the GPU sits behind the ASM24 bridge (asm24-usb-bridge.md §8).
USB_GPU_BUS = 4


@dataclass
class Asm24Options(DeviceOptions):
    """Options of the emulated ASM24 bridge in front of a board (``mock:<board>-usb``)."""

    clock: str | None = option(choice("device", "hybrid"), None,
                               "the virtual clock's mode (tinyhw.mocks.common.vclock): device, modelled device time "
                               "only "
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
