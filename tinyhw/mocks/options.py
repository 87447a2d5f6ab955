"""Options and fault plans of the emulated boards (ARCHITECTURE.md, "Emulated boards").

Device-string options understood by every emulated board:

``strict``            raise on an access the model does not cover (also ``TINYHW_STRICT=1``)
``flash=FILE``        the file that holds the flash contents (default: user cache dir)
``faults=F1+F2``      fault plan, see :class:`FaultPlan`
``speed=ss|hs``       USB link speed of the emulated bridge (SuperSpeed default, High-Speed)
``timing=instant|typical|max``  flash operation durations (default typical)
``psp=early|gated|sos|pbl|hang``  board state for the PSP mailbox and ROM_SW gating (default pbl: stalled
                       boot loader, ROM_SW available; sos/gated: the secure OS is running; hang: the PSP
                       never answers a boot command)
``smu=normal|silent|busy@N``    SMU fault: never answers, or answers message N (1-based, this
                       process) with 0xFC busy
``load=idle|busy|N``  GFX load the SMU metrics follow (percent; idle = 0, busy = 100)
``sdma=normal|hang|nop|skip-in|skip-out|shift1m``  hang: SDMA0 never executes its ring (the copy paths time
                       out); nop: its copies move nothing; skip-in / skip-out: copies into / out of VRAM from / to
                       system memory move nothing; shift1m: the VRAM side of every copy lands 1 MiB higher
``sosdelay=S``        seconds of virtual time from the SOS load to "sOS alive" (default 0.3)
``fwcheck=on|off``    the PSP checks firmware images against the real Debian files (default on)
``aperture=normal|mirrored|unavailable``  ROM_INDEX/ROM_DATA behaviour
``stray=on|off``      ROM_SW model option S8 (CNTL writes fire stray transactions); default on
``link=up|down|slow|wedged|no-gpu``  PCIe link behaviour behind the emulated bridge
``gsp=off|running``   ``mock:ad102``: WPR2 up (a driver booted GSP) or not (default off)
``power=d0|d3hot|suspended``  ``mock:ad102``: power state its attributes report (default d0)
``clock=device|hybrid``  ``mock:navi31-usb``: the virtual clock's mode (tinyhw.mocks.vclock): ``device``, modelled
                       device time only (exact, reproducible); ``hybrid``, plus the host's measured CPU time between
                       transfers. Default (also ``TINYHW_CLOCK``): device, except that ``bench copy`` measures on
                       the hybrid clock unless a mode was given
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from tinyhw.errors import BadDeviceString

FAULT_KINDS_AT = ("disconnect", "timeout", "bitflip", "ur", "ca", "crs", "tlp-error", "tlp-timeout", "stall")
FAULT_KINDS_FLAG = ("stuck-busy",)


@dataclass(frozen=True)
class Fault:
    kind: str
    at: int | None = None  # transfer / access number (1-based), or flash byte address for bitflip


@dataclass
class FaultPlan:
    """Faults for one command.

    ``disconnect@N``, ``timeout@N``, ``stall@N``: the N-th transfer the driver submits
    (register access on ``mock:navi31``) fails that way (N counts from 1, from the
    start of the process). ``ur@N``, ``ca@N``, ``crs@N``, ``tlp-error@N``,
    ``tlp-timeout@N``: the first non-posted TLP whose request is transfer N or later
    completes with that status (``tlp-error``: engine error, result 1;
    ``tlp-timeout``: result 0xff). ``stuck-busy``: the flash never leaves BUSY.
    ``bitflip@ADDR``: the first read covering flash byte ADDR gets one bit flipped.
    """

    faults: list[Fault] = field(default_factory=list)

    def at(self, kind: str) -> list[int]:
        return [f.at for f in self.faults if f.kind == kind and f.at is not None]

    def has(self, kind: str) -> bool:
        return any(f.kind == kind for f in self.faults)

    @classmethod
    def parse(cls, text: str | None) -> FaultPlan:
        plan = cls()
        if not text:
            return plan
        for item in text.split("+"):
            m = re.fullmatch(r"([a-z-]+)(?:@(0x[0-9a-fA-F]+|\d+))?", item.strip())
            if not m:
                raise BadDeviceString(f"bad fault {item!r}", hint=_FAULT_HINT)
            kind, at = m.group(1), m.group(2)
            if kind in FAULT_KINDS_AT:
                if at is None:
                    raise BadDeviceString(f"fault {kind!r} needs @N", hint=_FAULT_HINT)
                plan.faults.append(Fault(kind, int(at, 0)))
            elif kind in FAULT_KINDS_FLAG:
                if at is not None:
                    raise BadDeviceString(f"fault {kind!r} takes no @N", hint=_FAULT_HINT)
                plan.faults.append(Fault(kind))
            else:
                raise BadDeviceString(f"unknown fault {kind!r}", hint=_FAULT_HINT)
        return plan


_FAULT_HINT = (
    "faults are joined with '+': disconnect@N, timeout@N, stall@N, ur@N, ca@N, crs@N, tlp-error@N, "
    "tlp-timeout@N, stuck-busy, bitflip@ADDR"
)

_CHOICES = {
    "speed": ("ss", "hs"),
    "timing": ("instant", "typical", "max"),
    "psp": ("pbl", "early", "gated", "sos", "hang"),
    "fwcheck": ("on", "off"),
    "aperture": ("normal", "mirrored", "unavailable"),
    "stray": ("on", "off"),
    "link": ("up", "down", "slow", "wedged", "no-gpu"),
    "gsp": ("off", "running"),
    "power": ("d0", "d3hot", "suspended"),
    "sdma": ("normal", "hang", "nop", "skip-in", "skip-out", "shift1m"),
    "clock": ("device", "hybrid"),
}
_KNOWN = {"strict", "flash", "faults", "smu", "load", "sosdelay", *_CHOICES}


def default_flash_path() -> Path:
    """The shared default flash file of the emulated Navi31 (both mock boards use it)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tinyhw" / "navi31-flash.bin"


@dataclass
class MockOptions:
    strict: bool = False
    flash: Path = field(default_factory=default_flash_path)
    faults: FaultPlan = field(default_factory=FaultPlan)
    speed: str = "ss"
    timing: str = "typical"
    psp: str = "pbl"
    aperture: str = "normal"
    stray: str = "on"
    link: str = "up"
    gsp: str = "off"
    power: str = "d0"
    fwcheck: str = "on"
    smu: str = "normal"  # normal, silent
    smu_busy_at: int | None = None
    load: int = 0  # percent
    sos_delay: float = 0.3
    sdma: str = "normal"  # hang: never consumes its ring; nop/skip-in/skip-out/shift1m: copy faults (mocks/sdma.py)
    clock: str | None = None  # device | hybrid; None: not chosen (the command's preference, device by default)
    clock_explicit: bool = False  # given as the option (not from TINYHW_CLOCK)

    @classmethod
    def from_options(cls, options: dict[str, str | bool]) -> MockOptions:
        unknown = set(options) - _KNOWN
        if unknown:
            raise BadDeviceString(
                f"unknown option(s) for an emulated board: {', '.join(sorted(unknown))}",
                hint=f"known: {', '.join(sorted(_KNOWN))}",
            )
        o = cls()
        o.strict = bool(options.get("strict")) or os.environ.get("TINYHW_STRICT", "") not in ("", "0")
        if "flash" in options:
            if options["flash"] is True:
                raise BadDeviceString("option flash needs a file name: flash=FILE")
            o.flash = Path(str(options["flash"])).expanduser()
        o.faults = FaultPlan.parse(str(options["faults"]) if "faults" in options else None)
        for name, allowed in _CHOICES.items():
            if name in options:
                value = str(options[name]).lower()
                if value not in allowed:
                    raise BadDeviceString(f"option {name}={value} is not one of {', '.join(allowed)}")
                setattr(o, name, value)
        o.clock_explicit = "clock" in options
        env = os.environ.get("TINYHW_CLOCK", "").strip().lower()
        if not o.clock_explicit and env:
            if env not in _CHOICES["clock"]:
                raise BadDeviceString(f"TINYHW_CLOCK={env} is not one of {', '.join(_CHOICES['clock'])}")
            o.clock = env
        o._parse_boot(options)
        return o

    def _parse_boot(self, options: dict[str, str | bool]) -> None:
        if "smu" in options:
            value = str(options["smu"]).lower()
            m = re.fullmatch(r"busy@(\d+)", value)
            if m:
                self.smu_busy_at = int(m.group(1))
            elif value in ("normal", "silent"):
                self.smu = value
            else:
                raise BadDeviceString(f"option smu={value} is not one of normal, silent, busy@N")
        if "load" in options:
            value = str(options["load"]).lower()
            named = {"idle": 0, "busy": 100}
            if value in named:
                self.load = named[value]
            elif value.isdigit() and int(value) <= 100:
                self.load = int(value)
            else:
                raise BadDeviceString(f"option load={value} is not idle, busy or a percentage 0..100")
        if "sosdelay" in options:
            try:
                self.sos_delay = float(str(options["sosdelay"]))
            except ValueError:
                self.sos_delay = -1.0
            if not 0 <= self.sos_delay <= 60:
                raise BadDeviceString(f"option sosdelay={options['sosdelay']} is not a number of seconds 0..60")
