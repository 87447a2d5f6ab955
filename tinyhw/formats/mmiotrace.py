"""The Linux kernel's mmiotrace text log (format version 20070824): a bounded parser, and a writer of the same layout.

Facts from specs/mmio-trace.md §1.3 (Linux Documentation/trace/mmiotrace.rst and kernel/trace/trace_mmiotrace.c):
one record per line, a keyword first, then space-separated fields (a MARK's text runs to the end of the line):

* ``VERSION 20070824``;
* ``PCIDEV BBDD VVVVDDDD IRQ`` + 7 resource starts (hex, low 4 bits are region flags, bit 0 = i/o) + 7 sizes
  (hex) + an optional driver name (the layout of ``/proc/bus/pci/devices``);
* ``MAP ts id 0xphys 0xvirt 0xlen pc pid`` / ``UNMAP ts id pc pid``;
* ``R width ts id 0xphys 0xvalue pc pid`` / ``W ...`` (width in bytes, phys the bus address);
* ``UNKNOWN ts id 0xphys xx,xx,xx pc pid``; ``MARK ts text`` (also ``MARK ts Lost N events.``); ``LSPCI text``.

Timestamps are ``secs.usecs``. Malformed lines are collected with their line number (never raised); lines longer
than :data:`MAX_LINE` characters and logs of more than :data:`MAX_LINES` lines are bounded the same way.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

VERSION = "20070824"
MAX_LINE = 4096
MAX_LINES = 20_000_000
MAX_PROBLEMS = 1000
LOST = re.compile(r"Lost (\d+) events")


@dataclass(frozen=True)
class PciDev:
    """One PCIDEV line: where the function sits, its ids, and its memory/io resources (start without flags)."""

    bus: int
    devfn: int
    vendor_id: int
    device_id: int
    resources: tuple[tuple[int, int, int], ...]  # (index, start, size) of each resource with a size
    io: frozenset[int] = frozenset()  # indices of i/o resources
    driver: str = ""

    @property
    def location(self) -> str:
        """``BB:DD.F``."""
        return f"{self.bus:02x}:{self.devfn >> 3:02x}.{self.devfn & 7}"


@dataclass(frozen=True)
class Event:
    """An access or annotation, in log order: kind "R", "W", "UNKNOWN" or "MARK"."""

    line: int
    kind: str
    ts_ns: int
    width: int = 0
    map_id: int = -1
    phys: int = 0
    value: int = 0
    text: str = ""


MAX_TS_SECONDS = ((1 << 64) - 1) // 1_000_000_000 - 1   # whole seconds whose nanoseconds fit 64 bits


@dataclass
class Log:
    """A parsed log: its version, devices, mappings (id -> (phys, length)), events, and the lines it rejected."""

    version: str | None = None
    devices: list[PciDev] = field(default_factory=list)
    maps: dict[int, tuple[int, int]] = field(default_factory=dict)
    events: list[Event] = field(default_factory=list)
    problems: list[tuple[int, str]] = field(default_factory=list)
    lines: int = 0
    more_problems: int = 0

    def problem(self, line: int, message: str) -> None:
        """Note a malformed line (the first :data:`MAX_PROBLEMS`; the rest are only counted)."""
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append((line, message))
        else:
            self.more_problems += 1


def _ts(text: str) -> int:
    secs, dot, frac = text.partition(".")
    if not secs.isdigit() or (dot and not (frac.isdigit() and len(frac) <= 9)):
        raise ValueError(f"bad timestamp {text[:40]!r}")
    if int(secs) > MAX_TS_SECONDS:   # a trace file keeps 64-bit nanoseconds
        raise ValueError(f"timestamp {text[:40]} lies beyond {MAX_TS_SECONDS} seconds (64-bit nanoseconds)")
    return int(secs) * 1_000_000_000 + (int(frac.ljust(9, "0")) if frac else 0)


def _hex(text: str) -> int:
    value = int(text, 16)
    if value < 0:
        raise ValueError(f"negative value {text!r}")
    return value


def _pcidev(parts: list[str]) -> PciDev:
    if len(parts) < 18:
        raise ValueError(f"PCIDEV needs 17 fields after the keyword, got {len(parts) - 1}")
    if len(parts[1]) != 4 or len(parts[2]) != 8:
        raise ValueError("PCIDEV ids must be BBDD and VVVVDDDD")
    bbdd, ids = _hex(parts[1]), _hex(parts[2])
    _hex(parts[3])
    starts = [_hex(p) for p in parts[4:11]]
    sizes = [_hex(p) for p in parts[11:18]]
    resources = tuple((i, s & ~0xF, n) for i, (s, n) in enumerate(zip(starts, sizes, strict=True)) if n)
    io = frozenset(i for i, s in enumerate(starts) if s & 1 and sizes[i])
    return PciDev(bbdd >> 8, bbdd & 0xFF, ids >> 16, ids & 0xFFFF, resources, io, " ".join(parts[18:]))


def _line(log: Log, number: int, line: str) -> None:
    keyword, _, rest = line.partition(" ")
    parts = line.split()
    if keyword == "VERSION":
        if rest.strip() != VERSION:
            raise ValueError(f"version {rest.strip()!r} is not {VERSION}")
        log.version = VERSION
    elif keyword == "PCIDEV":
        log.devices.append(_pcidev(parts))
    elif keyword == "MAP":
        if len(parts) != 8:
            raise ValueError(f"MAP needs 7 fields, got {len(parts) - 1}")
        _ts(parts[1])
        log.maps[int(parts[2])] = (_hex(parts[3]), _hex(parts[5]))
    elif keyword == "UNMAP":
        if len(parts) != 5:
            raise ValueError(f"UNMAP needs 4 fields, got {len(parts) - 1}")
        _ts(parts[1])
        int(parts[2])
    elif keyword in ("R", "W"):
        if len(parts) != 8:
            raise ValueError(f"{keyword} needs 7 fields, got {len(parts) - 1}")
        width = int(parts[1])
        if width not in (1, 2, 4, 8):
            raise ValueError(f"width {width} is not 1, 2, 4 or 8 bytes")
        value = _hex(parts[5])
        if value >> (8 * width):
            raise ValueError(f"value {parts[5]} does not fit {width} bytes")
        log.events.append(Event(number, keyword, _ts(parts[2]), width, int(parts[3]), _hex(parts[4]), value))
    elif keyword == "UNKNOWN":
        if len(parts) != 7:
            raise ValueError(f"UNKNOWN needs 6 fields, got {len(parts) - 1}")
        log.events.append(Event(number, "UNKNOWN", _ts(parts[1]), 0, int(parts[2]), _hex(parts[3]),
                                text=f"opcode {parts[4]}"))
    elif keyword == "MARK":
        ts, _, text = rest.partition(" ")
        log.events.append(Event(number, "MARK", _ts(ts), text=text))
    elif keyword == "LSPCI":
        pass
    else:
        raise ValueError(f"unknown keyword {keyword[:32]!r}")


def parse(text: str) -> Log:
    """Parse a log's text; every malformed line is noted in ``problems`` with its line number, never raised."""
    log = Log()
    for number, line in enumerate(text.splitlines(), 1):
        if number > MAX_LINES:
            log.problem(number, f"the log has more than {MAX_LINES} lines; the rest is not read")
            break
        log.lines = number
        text_line = line.rstrip("\r")
        if not text_line.strip():
            continue
        if len(text_line) > MAX_LINE:
            log.problem(number, f"line of {len(text_line)} characters is longer than {MAX_LINE}")
            continue
        try:
            _line(log, number, text_line)
        except ValueError as e:
            log.problem(number, str(e))
    return log


def lost_events(event: Event) -> int | None:
    """N of a ``MARK ... Lost N events.`` line, else None."""
    m = LOST.search(event.text) if event.kind == "MARK" else None
    return int(m.group(1)) if m else None


def _stamp(ns: int) -> str:
    return f"{ns // 1_000_000_000}.{ns // 1000 % 1_000_000:06d}"


def write_header(device: PciDev) -> list[str]:
    """The VERSION and PCIDEV lines of a log (kernel layout)."""
    starts = {i: s for i, s, _ in device.resources}
    sizes = {i: n for i, _, n in device.resources}
    res = " ".join(f"{starts.get(i, 0) | (1 if i in device.io else 0):x}" for i in range(7))
    size = " ".join(f"{sizes.get(i, 0):x}" for i in range(7))
    return [f"VERSION {VERSION}", f"PCIDEV {device.bus:02x}{device.devfn:02x} {device.vendor_id:04x}"
            f"{device.device_id:04x} 0 {res} {size} {device.driver}".rstrip()]


def write_map(ts_ns: int, map_id: int, phys: int, length: int) -> str:
    """A MAP line (virtual address, PC and PID as the kernel prints them without trace_pc)."""
    return f"MAP {_stamp(ts_ns)} {map_id} 0x{phys:x} 0x{0xFFFFC90000000000 + (map_id << 32):x} 0x{length:x} 0x0 0"


def write_access(kind: str, width: int, ts_ns: int, map_id: int, phys: int, value: int) -> str:
    """An R or W line."""
    return f"{kind} {width} {_stamp(ts_ns)} {map_id} 0x{phys:x} 0x{value:x} 0x0 0"


def write_mark(ts_ns: int, text: str) -> str:
    """A MARK line."""
    return f"MARK {_stamp(ts_ns)} {text}"
