"""The board registry: every device kind and emulated board tinyhw opens, in one table.

Each :class:`Entry` says a device's name, how its strings are written, which opener of ``tinyhw.connect`` opens it,
its options (a :class:`~tinyhw.boards.options.DeviceOptions` class: names, types, descriptions) and what it is.
Device-string parsing (tinyhw.transport.devstr), ``tinyhw.connect`` (which binds the openers: this layer holds
facts and cannot import a transport or an emulator), discovery (``tinyhw list``), the CLI's help and
``tinyhw mock gadget`` read it.

Adding an emulated board: its emulator in ``tinyhw/mocks/`` (see tinyhw/mocks/README.md, "A new board"), its facts
and options class in ``tinyhw/boards/``, and one :class:`Entry` in :data:`REGISTRY` whose ``opener`` is ``direct``
(the emulator is a transport) or ``asm24`` (the emulator is a board behind the emulated ASM24 bridge).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the options classes are imported when an entry's options are asked for (not for --help)
    from tinyhw.boards.options import DeviceOptions


#: openers ``tinyhw.connect`` binds (connect.OPENERS): native PCIe, the USB bridge, a server, the CUDA driver, an
#: emulated board that is its own transport, an emulated board behind the emulated ASM24 bridge, and a labgrid place.
OPENERS = ("pci", "vfio", "usb", "remote", "cuda", "direct", "asm24", "labgrid")


@dataclass(frozen=True)
class Entry:
    """One device kind (``pci``) or emulated board (``mock:navi31``)."""

    name: str  # "pci", "usb", "mock:navi31": the device string's head
    opener: str  # one of OPENERS
    options_at: str | type[DeviceOptions]  # "module:Class" of its options class (imported on first use), or the class
    description: str
    forms: str = ""  # how its strings are written, for help texts (default: the name)
    emulator: str = ""  # emulated boards: "module:Class" that connect constructs (a transport, or a board)
    board: str = ""  # emulated boards: the board modelled (mock:navi31 and mock:navi31-usb are one board)

    @property
    def options(self) -> type[DeviceOptions]:
        """Its options (a :class:`~tinyhw.boards.options.DeviceOptions` class), imported now: listing the registry
        (``tinyhw --help``) imports no options class."""
        if not isinstance(self.options_at, str):
            return self.options_at
        module, _, attr = self.options_at.partition(":")
        return getattr(importlib.import_module(module), attr)

    @property
    def usage(self) -> str:
        """How its strings are written: ``usb, usb:N, usb:BUS-ADDR``, ``mock:navi31``."""
        return self.forms or self.name

    @property
    def kind(self) -> str:
        """The device kind: ``pci``, ``vfio``, ``usb``, ``remote``, ``labgrid``, ``cuda`` or ``mock``."""
        return self.name.partition(":")[0]

    @property
    def target(self) -> str:
        """An emulated board's name in the string (``navi31-usb``); ``""`` for the other kinds."""
        return self.name.partition(":")[2]

    @property
    def emulated(self) -> bool:
        """True for an emulated board (``mock:...``), False for a real device kind."""
        return self.kind == "mock"

    @property
    def label(self) -> str:
        """How a refusal names it: ``mock:navi31``, ``the pci transport``."""
        return self.name if self.emulated else f"the {self.kind} transport"


REGISTRY: tuple[Entry, ...] = (
    Entry("pci", "pci", "tinyhw.boards.kinds:PciOptions", "native PCIe through sysfs resource files",
          forms="pci:DDDD:BB:DD.F (or a bare BB:DD.F)"),
    Entry("vfio", "vfio", "tinyhw.boards.options:NoOptions", "native PCIe through VFIO", forms="vfio:DDDD:BB:DD.F"),
    Entry("usb", "usb", "tinyhw.boards.options:NoOptions", "the ASM24 bridge with the custom firmware",
          forms="usb, usb:N, usb:BUS-ADDR"),
    Entry("remote", "remote", "tinyhw.boards.kinds:RemoteOptions",
          "a tinyhw serve remote on another machine (ssh runs it over stdio)",
          forms="remote:HOST:PORT, remote:unix[:PATH], remote:ssh://[user@]host/DEV"),
    Entry("labgrid", "labgrid", "tinyhw.boards.kinds:LabgridOptions", "a labgrid place: acquired through the "
          "coordinator, its tinyhw server reached through the remote transport (the labgrid extra)",
          forms="labgrid:PLACE"),
    Entry("mock:navi31", "direct", "tinyhw.boards.navi31:Navi31Options",
          "emulated navi31 (rx 7900) board, attached directly",
          emulator="tinyhw.mocks.direct:DirectTransport", board="navi31"),
    Entry("mock:navi31-usb", "asm24", "tinyhw.boards.navi31:Navi31UsbOptions",
          "emulated navi31 board behind an emulated asm24 usb bridge",
          emulator="tinyhw.mocks.navi31:Navi31Board", board="navi31"),
    Entry("mock:ad102", "direct", "tinyhw.boards.nvidia:Ad102Options",
          "emulated nvidia ada (ad102, rtx 4090) board, attached directly",
          emulator="tinyhw.mocks.ad102:ad102_transport", board="ad102"),
    Entry("cuda", "cuda", "tinyhw.boards.options:NoOptions",
          "an NVIDIA GPU through the CUDA driver (bench copy and kernels run only)", forms="cuda:N"),
)


def kinds() -> list[str]:
    """The device kinds, in table order (``mock`` once)."""
    return list(dict.fromkeys(e.kind for e in REGISTRY))


def boards() -> list[Entry]:
    """The emulated boards (``mock:`` entries), in table order."""
    return [e for e in REGISTRY if e.emulated]


def bridged_boards() -> list[str]:
    """The boards that can sit behind the emulated ASM24 bridge (``tinyhw mock gadget --board``)."""
    return list(dict.fromkeys(e.board for e in boards() if e.opener == "asm24"))


def find(kind: str, target: str = "") -> Entry | None:
    """The entry of a parsed device (``kind``, and for ``mock`` the board's name), None when there is none."""
    name = f"{kind}:{target}" if kind == "mock" else kind
    return next((e for e in REGISTRY if e.name == name), None)


def accepted_forms() -> str:
    """Every form a device string may take, in one line (the hint of a bad device string)."""
    parts = [e.usage + (" (bench copy and kernels run only)" if e.kind == "cuda" else "")
             for e in REGISTRY]
    return ", ".join(parts) + "; options after commas (e.g. mock:navi31,strict)"
