"""The board registry: every device kind and emulated board tinyhw opens, in one table.

Each :class:`Entry` says a device's name, how its strings are written, which opener of ``tinyhw.connect`` opens it,
its options (a :class:`~tinyhw.boards.options.DeviceOptions` class: names, types, descriptions) and what it is.
Device-string parsing (tinyhw.transport.devstr), ``tinyhw.connect`` (which binds the openers: this layer holds
facts and cannot import a transport or an emulator), discovery (``tinyhw list``), the CLI's help and
``tinyhw mock gadget`` read it.

Adding an emulated board of a known family: its description (a :class:`~tinyhw.boards.spec.BoardSpec` in
``tinyhw/boards/<board>.py``) and one row in :data:`REGISTRY` naming it (``spec_at``; an AMD board's row is
:func:`amd_board`: ``mock:<board>`` and ``mock:<board>-usb``), whose ``opener`` is ``direct`` (the emulator is a
transport) or ``asm24`` (the emulator is a board behind the emulated ASM24 bridge); the family's emulator is built
from the description. :func:`by_pci` and :func:`spec_named` find a description.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the options classes are imported when an entry's options are asked for (not for --help)
    from tinyhw.boards.options import DeviceOptions
    from tinyhw.boards.spec import BoardSpec


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
    spec_at: str = ""  # emulated boards: "module:NAME" of its description (a tinyhw.boards.spec.BoardSpec)

    @property
    def spec(self) -> BoardSpec | None:
        """The board's description (imported now), None for a device kind or a board without one."""
        if not self.spec_at:
            return None
        module, _, attr = self.spec_at.partition(":")
        return getattr(importlib.import_module(module), attr)

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


def amd_board(board: str, product: str) -> tuple[Entry, Entry]:
    """The two rows of an emulated AMD board described by ``tinyhw.boards.<board>:<BOARD>``: ``mock:<board>``,
    attached directly, and ``mock:<board>-usb``, behind the emulated ASM24 bridge (one board, one flash file)."""
    spec_at = f"tinyhw.boards.{board}:{board.upper()}"
    return (Entry(f"mock:{board}", "direct", "tinyhw.boards.amd:AmdBoardOptions",
                  f"emulated {board} ({product}) board, attached directly",
                  emulator="tinyhw.mocks.amd.direct:DirectTransport", board=board, spec_at=spec_at),
            Entry(f"mock:{board}-usb", "asm24", "tinyhw.boards.amd:AmdBoardUsbOptions",
                  f"emulated {board} board behind an emulated asm24 usb bridge",
                  emulator="tinyhw.mocks.amd.board:AmdBoard", board=board, spec_at=spec_at))


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
    *amd_board("navi31", "rx 7900"),
    *amd_board("navi33", "rx 7600"),
    Entry("mock:ad102", "direct", "tinyhw.boards.nvidia:Ad102Options",
          "emulated nvidia ada (ad102, rtx 4090) board, attached directly",
          emulator="tinyhw.mocks.nvidia.ad102:ad102_transport", board="ad102", spec_at="tinyhw.boards.nvidia:AD102"),
    Entry("cuda", "cuda", "tinyhw.boards.options:NoOptions",
          "an NVIDIA GPU through the CUDA driver (bench copy and kernels run only)", forms="cuda:N"),
)


def kinds() -> list[str]:
    """The device kinds, in table order (``mock`` once)."""
    return list(dict.fromkeys(e.kind for e in REGISTRY))


def boards() -> list[Entry]:
    """The emulated boards (``mock:`` entries), in table order."""
    return [e for e in REGISTRY if e.emulated]


def default_board() -> Entry:
    """The emulated board a command takes when none is named (``mock reset``, ``mock power-cycle``; ``mock gadget``
    takes the first bridged board): the table's first emulated board."""
    return boards()[0]


def bridged_boards() -> list[str]:
    """The boards that can sit behind the emulated ASM24 bridge (``tinyhw mock gadget --board``)."""
    return list(dict.fromkeys(e.board for e in boards() if e.opener == "asm24"))


def find(kind: str, target: str = "") -> Entry | None:
    """The entry of a parsed device (``kind``, and for ``mock`` the board's name), None when there is none."""
    name = f"{kind}:{target}" if kind == "mock" else kind
    return next((e for e in REGISTRY if e.name == name), None)


def specs() -> list[BoardSpec]:
    """Every board description the registry names, once each, in table order."""
    out: list[BoardSpec] = []
    for e in boards():
        spec = e.spec
        if spec is not None and spec not in out:
            out.append(spec)
    return out


def by_pci(vendor_id: int, device_id: int) -> BoardSpec | None:
    """The description of the board whose PCI function is ``vendor_id:device_id``, None when no board has it."""
    return next((s for s in specs() if s.ids == (vendor_id, device_id)), None)


def spec_named(board: str) -> BoardSpec | None:
    """The description of the board called ``board`` (``navi31``), None when there is none."""
    return next((s for s in specs() if s.name == board), None)


def accepted_forms() -> str:
    """Every form a device string may take, in one line (the hint of a bad device string)."""
    parts = [e.usage + (" (bench copy and kernels run only)" if e.kind == "cuda" else "")
             for e in REGISTRY]
    return ", ".join(parts) + "; options after commas (e.g. mock:navi31,strict)"
