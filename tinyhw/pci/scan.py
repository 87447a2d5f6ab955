"""Read-only enumeration of PCI functions through sysfs, and lspci's one-line description.

Spec: specs/pci-vfio-remote.md §1 (addresses, numeric sort), §2.1-§2.2 (layout, attribute
files and formats), §2.4 (the ``resource`` file and its IORESOURCE flag bits), §2.5 (driver
and IOMMU group links; a dangling link is "unbound"), §4.2 (``lspci -Dnn`` line grammar),
§13.1 (a fake tree under a temporary directory has the same shape).

Nothing here writes: this module only lists directories, reads attribute files and reads
links, so it is safe on a machine whose PCI devices are its disk and network.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from tinyhw.errors import EnvironmentProblem
from tinyhw.formats.pciids import PciIds
from tinyhw.transport.abilities import device_awake
from tinyhw.transport.base import BarInfo, Identity

DEFAULT_ROOT = "/sys/bus/pci/devices"

# Kernel IORESOURCE_* bits as they appear in the third column of ``resource`` (§2.4).
IORESOURCE_IO = 0x00000100
IORESOURCE_MEM = 0x00000200
IORESOURCE_PREFETCH = 0x00002000
IORESOURCE_READONLY = 0x00004000
IORESOURCE_SIZEALIGN = 0x00040000
IORESOURCE_STARTALIGN = 0x00080000
IORESOURCE_MEM_64 = 0x00100000
IORESOURCE_WINDOW = 0x00200000
IORESOURCE_EXCLUSIVE = 0x08000000
IORESOURCE_DISABLED = 0x10000000
IORESOURCE_UNSET = 0x20000000
IORESOURCE_BUSY = 0x80000000

ROM_RESOURCE = 6
_BDF = re.compile(r"^([0-9a-fA-F]{4,}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$")


def parse_bdf(name: str) -> tuple[int, int, int, int] | None:
    """``"0000:03:00.0"`` -> (domain, bus, slot, function); None if ``name`` is not a full address."""
    m = _BDF.match(name)
    if not m:
        return None
    dom, bus, slot, fn = (int(g, 16) for g in m.groups())
    return (dom, bus, slot, fn) if slot <= 0x1F else None


@dataclass(frozen=True)
class Resource:
    """One line of the ``resource`` file: start, inclusive end, IORESOURCE flags."""

    index: int
    start: int
    end: int
    flags: int

    @property
    def size(self) -> int:
        """end - start + 1 only when end > start; an unused resource (``0 0 0``) is 0 bytes."""
        return self.end - self.start + 1 if self.end > self.start else 0

    @property
    def kind(self) -> str | None:
        """``"io"``, ``"memory"``, or None for a line whose flags are neither."""
        if self.flags & IORESOURCE_IO:
            return "io"
        if self.flags & IORESOURCE_MEM:
            return "memory"
        return None

    @property
    def prefetchable(self) -> bool:
        """True for prefetchable memory (no read side effects)."""
        return bool(self.flags & IORESOURCE_PREFETCH)

    @property
    def is_64bit(self) -> bool:
        """True for a 64-bit memory BAR (it takes two BAR slots)."""
        return bool(self.flags & IORESOURCE_MEM_64)

    @property
    def assigned(self) -> bool:
        """True when the kernel placed the resource (neither unset nor disabled)."""
        return not self.flags & (IORESOURCE_UNSET | IORESOURCE_DISABLED)

    def bar_info(self) -> BarInfo | None:
        """The BarInfo of a used resource; None for an empty line or flags of neither I/O nor memory."""
        kind = self.kind
        if kind is None or self.size == 0:
            return None
        return BarInfo(self.index, self.start, self.size, kind, self.prefetchable, self.is_64bit)


def parse_resource_text(text: str, problems: list[str] | None = None) -> list[Resource]:
    """Parse a ``resource`` file (``0x%016llx 0x%016llx 0x%016llx`` per line; line index = resource index)."""
    out: list[Resource] = []
    for index, line in enumerate(text.splitlines()):
        parts = line.split()
        try:
            start, end, flags = (int(p, 16) for p in parts)
        except ValueError:
            if problems is not None:
                problems.append(f"resource line {index}: {line!r} (expected three hex numbers)")
            continue
        out.append(Resource(index, start, end, flags))
    return out


@dataclass
class PciFunction:
    """One PCI function as sysfs describes it."""

    address: str  # canonical "DDDD:BB:DD.F"
    domain: int
    bus: int
    slot: int
    function: int
    path: str  # the function's directory (through the devices/ symlink)
    vendor_id: int = 0xFFFF
    device_id: int = 0xFFFF
    class_code: int = 0  # 24-bit
    revision: int = 0
    subsystem_vendor_id: int = 0
    subsystem_id: int = 0
    driver: str | None = None
    iommu_group: int | None = None
    resources: list[Resource] = field(default_factory=list)
    current_link_speed: str | None = None  # as sysfs prints it: "8.0 GT/s PCIe"
    max_link_speed: str | None = None
    current_link_width: int | None = None
    max_link_width: int | None = None
    power_state: str | None = None  # "D0", "D3hot", "D3cold", ... (None: the kernel has no such attribute)
    runtime_status: str | None = None  # power/runtime_status: "active", "suspended", "unsupported", ...
    not_read: tuple[str, ...] = ()  # attributes skipped because reading them would resume the sleeping device
    problems: list[str] = field(default_factory=list)

    @property
    def awake(self) -> bool:
        """True when the function is in D0 and runtime-active: reading a waking sysfs attribute then resumes nothing."""
        return device_awake(self.power_state, self.runtime_status)

    @property
    def bars(self) -> list[BarInfo]:
        """Standard BARs 0-5 that have a size (a 64-bit BAR's upper slot is an empty line)."""
        infos = (r.bar_info() for r in self.resources if r.index < ROM_RESOURCE)
        return [b for b in infos if b is not None]

    @property
    def rom(self) -> Resource | None:
        """The expansion ROM resource, or None when the function has none."""
        rom = next((r for r in self.resources if r.index == ROM_RESOURCE), None)
        return rom if rom is not None and rom.size else None

    @property
    def identity(self) -> Identity:
        """The function's ids and address as a transport :class:`Identity` (from sysfs, not config space)."""
        return Identity(self.vendor_id, self.device_id, self.revision, self.class_code,
                        self.subsystem_vendor_id, self.subsystem_id, self.address)

    def read_config(self, length: int = 4096) -> bytes:
        """Read (never write) the ``config`` file: 64 bytes without root, 256 or 4096 with (§2.7)."""
        with open(os.path.join(self.path, "config"), "rb") as f:
            return f.read(length)


def _text(path: str, name: str) -> str | None:
    try:
        with open(os.path.join(path, name)) as f:
            return f.read().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(path: str, name: str, base: int, problems: list[str], required: bool) -> int | None:
    text = _text(path, name)
    if text is None:
        if required:
            problems.append(f"{name}: missing or unreadable")
        return None
    try:
        return int(text, base)
    except ValueError:
        problems.append(f"{name}: {text!r} is not a number")
        return None


def _link_name(path: str, name: str) -> str | None:
    """Basename of a symlink's target, if the link resolves (a dangling link counts as absent, §2.5)."""
    link = os.path.join(path, name)
    if not os.path.exists(link):
        return None
    try:
        return os.path.basename(os.readlink(link))
    except OSError:
        return None


def read_function(root: str, address: str) -> PciFunction:
    """Read one function's attributes under ``root`` (the ``devices`` directory)."""
    bdf = parse_bdf(address)
    if bdf is None:
        raise EnvironmentProblem(f"{address!r} is not a pci address like 0000:03:00.0")
    path = os.path.join(root, address)
    if not os.path.isdir(path):
        raise EnvironmentProblem(f"no pci function {address} under {root}", hint="list them with `lspci -D`")
    dom, bus, slot, fn = bdf
    dev = PciFunction(f"{dom:04x}:{bus:02x}:{slot:02x}.{fn}", dom, bus, slot, fn, path)
    p = dev.problems
    # the power state first: it decides whether the attributes that resume the device may be read at all
    dev.power_state = _text(path, "power_state")
    dev.runtime_status = _text(path, os.path.join("power", "runtime_status"))
    for attr, name, required in (
        ("vendor_id", "vendor", True), ("device_id", "device", True), ("class_code", "class", True),
        ("revision", "revision", False), ("subsystem_vendor_id", "subsystem_vendor", False),
        ("subsystem_id", "subsystem_device", False),
    ):
        value = _int(path, name, 16, p, required)
        if value is not None:
            setattr(dev, attr, value)
    res = _text(path, "resource")
    dev.resources = parse_resource_text(res, p) if res is not None else []
    dev.driver = _link_name(path, "driver")
    group = _link_name(path, "iommu_group")
    dev.iommu_group = int(group) if group is not None and group.isdigit() else None
    dev.max_link_speed = _text(path, "max_link_speed")
    if dev.awake:
        dev.current_link_speed = _text(path, "current_link_speed")
        dev.current_link_width = _int(path, "current_link_width", 10, p, False)
        dev.max_link_width = _int(path, "max_link_width", 10, p, False)
    else:
        dev.not_read = ("current_link_speed", "current_link_width", "max_link_width")
    return dev


def scan(root: str = DEFAULT_ROOT) -> list[PciFunction]:
    """Every function under ``root``, sorted numerically by (domain, bus, slot, function) as lspci does."""
    try:
        names = os.listdir(root)
    except OSError as e:
        raise EnvironmentProblem(f"cannot list pci devices in {root} ({e.strerror})",
                                 hint="is sysfs mounted at /sys?") from e
    found = sorted((bdf, name) for name in names if (bdf := parse_bdf(name)) is not None)
    return [read_function(root, name) for _, name in found]


def link_speed_gts(text: str | None) -> float | None:
    """``"8.0 GT/s PCIe"`` (or the old ``"5 GT/s"``) -> 8.0; None for absent or ``Unknown``."""
    if not text:
        return None
    head = text.split()[0]
    try:
        return float(head)
    except ValueError:
        return None


def lspci_line(dev: PciFunction, ids: PciIds | None, numeric_names: bool = True, verbose: bool = False,
               show_domain: bool = True) -> str:
    """The function's line exactly as ``lspci -Dnn`` prints it (``numeric_names=False``: ``lspci -D``).

    ``(rev RR)`` follows when the revision is non-zero; with ``verbose`` (``-v``) the
    ``(prog-if PP [name])`` part follows when the prog-if is non-zero or has a name. ``ids``
    None means no database: names fall back to numbers as lspci's do.
    """
    ids = ids if ids is not None else PciIds()
    addr = dev.address if show_domain else dev.address.split(":", 1)[1]
    line = (f"{addr} {ids.class_text(dev.class_code >> 8, numeric_names)}: "
            f"{ids.device_text(dev.vendor_id, dev.device_id, numeric_names)}")
    if dev.revision:
        line += f" (rev {dev.revision:02x})"
    if verbose:
        prog_if = ids.prog_if_text(dev.class_code)
        if prog_if:
            line += f" {prog_if}"
    return line


def subsystem_line(dev: PciFunction, ids: PciIds | None, numeric_names: bool = True) -> str | None:
    """``Subsystem: ...`` as lspci -v prints it; None when the sub-vendor is 0 or 0xffff (no line)."""
    if dev.subsystem_vendor_id in (0, 0xFFFF):
        return None
    ids = ids if ids is not None else PciIds()
    text = ids.subsystem_text(dev.vendor_id, dev.device_id, dev.subsystem_vendor_id, dev.subsystem_id,
                              numeric_names)
    return f"Subsystem: {text}"
