"""Device-string options of an emulated AMD board (``mock:navi31``, ``mock:navi33``, and their ``-usb`` forms).

One class for every AMD board the emulator builds from its description (tinyhw.boards.spec): the board registry's
row names :class:`AmdBoardOptions` (attached directly) or :class:`AmdBoardUsbOptions` (behind the emulated ASM24
bridge, whose own options come from :class:`tinyhw.boards.asm24.Asm24Options`). Options only: no behaviour.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tinyhw.boards.asm24 import Asm24Options
from tinyhw.boards.options import (
    DeviceOptions,
    FaultPlan,
    choice,
    faults,
    number,
    option,
    path,
    pattern,
    percent,
    strict_option,
)


@dataclass
class AmdBoardOptions(DeviceOptions):
    """Options of an emulated AMD board attached directly (``mock:navi31``, ``mock:navi33``; one field per option)."""

    strict: bool = strict_option()
    flash: Path | None = option(path(), None, "the file that holds the flash contents (default: the board's file in "
                                "the user cache dir, e.g. ~/.cache/tinyhw/navi31-flash.bin)")
    faults: FaultPlan = option(faults(), None, "fault plan for one command (disconnect@N, timeout@N, stuck-busy, "
                               "bitflip@ADDR, ...)", factory=FaultPlan)
    timing: str = option(choice("instant", "typical", "max"), "typical", "flash operation durations")
    psp: str | None = option(choice("pbl", "early", "gated", "sos", "hang"), None,
                             "board state for the PSP mailbox and ROM_SW gating: pbl, the stalled boot loader with "
                             "ROM_SW available; early, a healthy autonomous boot (ROM_SW gated, early flash mailbox "
                             "open); sos/gated: the secure OS is running; hang: the PSP never answers a boot command. "
                             "Default: what the last 'tinyhw mock power-cycle' booted into (early, or pbl when no "
                             "partition boots), else pbl. pbl/early/hang on a board whose saved state has the sos "
                             "running is refused (power-cycle or reset it first)")
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
                               "is offered by the -usb boards only: the directly attached emulator does not mark the "
                               "work it does on the driver's thread)")

    @property
    def smu_busy_at(self) -> int | None:
        """``smu=busy@N``: the message number N that answers busy (None otherwise)."""
        return int(self.smu[5:]) if self.smu.startswith("busy@") else None


@dataclass
class AmdBoardUsbOptions(Asm24Options, AmdBoardOptions):
    """Options of an emulated AMD board behind the emulated ASM24 bridge (``mock:navi31-usb``): the board's, plus
    the bridge's."""
