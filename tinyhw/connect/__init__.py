"""Turning a device string into an open transport: the one place transports are constructed.

``tinyhw.open(device_string)`` (and the CLI) call :func:`open_device`. It sits in front of the transport
layer (ARCHITECTURE.md "Opening a device from Python"): it may import the transports and the emulated
boards; features never import it, they are handed the transport it returns. Which opener opens a device, and
the options it takes, is the device's entry in the board registry (tinyhw.boards.registry); the openers are
bound here (:data:`OPENERS`). Emulated boards are assembled here: ``direct`` entries (``mock:navi31``,
``mock:ad102``) are emulators that are their own transport; ``asm24`` entries (``mock:navi31-usb``) are a board
behind the emulated ASM24 bridge, reached through a pyusb backend by the real ``usb`` transport.
Every path takes the device lock (the emulated board takes it where it is built). ``cuda:N`` is not a
register transport: :func:`open_cuda` builds its device object (the CUDA driver's own context).

Example::

    import tinyhw
    with tinyhw.open("mock:navi31-usb") as dev:
        print(dev.transport.identity())
"""

from __future__ import annotations

import contextlib
import importlib
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tinyhw.boards import registry
from tinyhw.boards.amd import AmdBoardUsbOptions
from tinyhw.boards.options import DeviceOptions, Raw
from tinyhw.errors import BadDeviceString, Refused, TinyhwError
from tinyhw.fileio import check_output_path
from tinyhw.transport.base import Transport
from tinyhw.transport.devstr import DeviceSpec, parse_device

if TYPE_CHECKING:
    from tinyhw.cuda import CudaDevice
    from tinyhw.mocks.bridge.asm24 import Asm24Bridge
    from tinyhw.transport.clock import Clock


@dataclass
class Opened:
    """An open transport plus what must be closed with it and what the emulator noticed."""

    transport: Transport
    spec: DeviceSpec
    closers: list[Callable[[], None]] = field(default_factory=list)
    uncovered: Callable[[], list[str]] = list  # accesses an emulated board did not model (non-strict)
    emulator_stats: Callable[[], dict] | None = None
    #: what opening an emulated board did that its user should hear of (a fresh flash file); the CLI prints each
    #: as a ``note:`` line on stderr, a library caller reads them here
    notes: Callable[[], list[str]] = list
    #: the emulated board behind the transport (``mock:`` devices; None on hardware), for a caller that drives the
    #: emulator itself (a peer driver's adapter): what it reaches instead of the transport's own attributes
    board: Any = None

    def close(self) -> None:
        """Close the transport, then release the board and the lock. Safe to call twice."""
        try:
            self.transport.close()
        finally:
            closers, self.closers = self.closers, []
            for c in closers:
                c()

    def stats(self) -> dict:
        """The transport's counters (what ``--stats`` prints)."""
        return self.transport.stats()

    def __enter__(self) -> Opened:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_device(spec: DeviceSpec | str, register: Callable[[Opened], None] | None = None, *,
                record: str | os.PathLike[str] | None = None, command: Sequence[str] | None = None,
                force_hint: str | None = None, **record_options: Any) -> Opened:
    """Open ``spec`` (a :class:`DeviceSpec` or a device string). ``register`` receives the :class:`Opened`
    before the device is connected, so the caller can report counters (``--stats``) and release everything
    even when opening fails. The device's entry in the board registry names its opener (:data:`OPENERS`) and
    types its options; a kind or board the registry does not list is refused (exit 2).

    ``record``: a new trace file that every operation after the open is appended to (the transport is wrapped
    by :func:`tinyhw.transport.record.recording`, with ``command`` and ``record_options``); the path is checked
    before the device is touched (exit 2 for one that exists, a device node, a FIFO or a directory; ``force_hint``
    names what replaces an existing file, ``record_options`` ``force=True`` does)."""
    if isinstance(spec, str):
        spec = parse_device(spec)
    entry = entry_of(spec)
    if record is not None:
        check_output_path(record, force=bool(record_options.get("force")), what="recording", force_hint=force_hint)
    opened = OPENERS[entry.opener](spec, entry, register or (lambda _o: None))
    if record is not None:
        from tinyhw.transport.record import recording

        try:
            opened.transport = recording(opened.transport, record, command=command, device=str(spec),
                                         **record_options)
        except BaseException:
            opened.close()
            raise
    return opened


def entry_of(spec: DeviceSpec) -> registry.Entry:
    """The board registry's entry of ``spec``; exit 2 when the registry lists no such kind or board."""
    entry = registry.find(spec.kind, spec.target)
    if entry is None:
        known = ", ".join(e.name for e in registry.boards()) if spec.is_mock else ", ".join(registry.kinds())
        raise BadDeviceString(f"no device {spec.kind}:{spec.target} in the board registry (known: {known})")
    return entry


def typed_options(spec: DeviceSpec, entry: registry.Entry | None = None) -> Any:
    """The device's options as its entry's options class (exit 2 for one it does not take or a bad value)."""
    entry = entry or entry_of(spec)
    return entry.options.from_options(spec.options, entry.label)


def open_cuda(spec: DeviceSpec | str) -> CudaDevice:
    """Open ``cuda:N``: the GPU's primary context through the CUDA driver (a context manager; close it).

    Not a register transport (:func:`open_device` refuses ``cuda:``); ``kernels run`` and ``bench copy`` are
    handed what this returns. Exit 2 for a string that is not ``cuda:N`` or has options, exit 3 when
    cuda-bindings or the driver is missing or the ordinal does not exist. The PCIe link is read from
    ``$TINYHW_SYSFS`` (else ``/sys``), read-only.
    """
    from tinyhw.errors import Refused

    if isinstance(spec, str):
        spec = parse_device(spec)
    if spec.kind != "cuda":
        raise Refused(f"{spec} is not a cuda:N device", hint="name an nvidia gpu as cuda:0, cuda:1, ...")
    if spec.options:
        raise Refused(f"cuda devices take no options (got {', '.join(spec.options)})")
    from tinyhw.cuda import CudaDevice
    from tinyhw.pci.sysfs import sysfs_root

    return CudaDevice(int(spec.target), sysfs=sysfs_root())


def bridged_board(board: str, options: Mapping[str, Raw], clock: Clock | None = None) -> tuple[Any, Asm24Bridge]:
    """The emulated ``board`` (a registry board behind the bridge) and the emulated ASM24 bridge in front of it,
    on ``clock`` (default: the board's own virtual clock, in its ``clock=`` option's mode), with the
    device-string ``options`` of its ``asm24`` entry (what ``mock:navi31-usb`` opens and ``tinyhw mock gadget``
    serves). The board holds the device lock: close it."""
    entry = next((e for e in registry.boards() if e.board == board and e.opener == "asm24"), None)
    if entry is None:
        raise BadDeviceString(f"no emulated board {board!r} behind the bridge "
                              f"(known: {', '.join(registry.bridged_boards())})")
    return _bridged(entry, entry.options.from_options(options, entry.label), clock)


def _bridged(entry: registry.Entry, options: DeviceOptions, clock: Clock | None) -> tuple[Any, Asm24Bridge]:
    from tinyhw.mocks.bridge.asm24 import Asm24Bridge

    usb = bridge_options(entry, options)
    # the board takes the device lock and builds its clock if none is given
    board = _emulator(entry)(usb, clock, attach="usb", spec=entry.spec)
    try:
        return board, Asm24Bridge(board, usb, board.clock)
    except BaseException:
        board.close()
        raise


def bridge_options(entry: registry.Entry, options: DeviceOptions) -> AmdBoardUsbOptions:
    """``options`` as the options of a board behind the emulated bridge (the bridge's own, :class:`Asm24Options`, and
    the AMD board's); refused when ``entry``'s options class is not one (a registry row naming the asm24 opener for a
    board the bridge cannot front)."""
    if not isinstance(options, AmdBoardUsbOptions):
        raise BadDeviceString(f"{entry.name}: its options ({type(options).__name__}) are not a board's behind the "
                              "usb bridge")
    return options


def _emulator(entry: registry.Entry) -> Any:
    """The class an emulated board's entry names (``module:Class`` under tinyhw.mocks)."""
    module, _, name = entry.emulator.partition(":")
    if not module.startswith("tinyhw.mocks."):
        raise BadDeviceString(f"{entry.name}: its emulator {entry.emulator!r} is not in tinyhw.mocks")
    return getattr(importlib.import_module(module), name)


def _open_direct(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    """An emulated board that is its own transport (``mock:navi31``, ``mock:ad102``); it takes the device lock."""
    described = entry.spec  # the board's description, for the emulators built from one
    t = _emulator(entry)(typed_options(spec, entry), **({"spec": described} if described is not None else {}))
    opened = Opened(t, spec, board=t.board, uncovered=lambda: list(t.board.uncovered),
                    notes=lambda: list(getattr(t.board, "notes", [])))
    register(opened)
    return opened


def _open_asm24(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    """An emulated board behind the emulated ASM24 bridge, reached by the real usb transport through pyusb."""
    from tinyhw.mocks.bridge.pyusb_backend import Asm24Backend
    from tinyhw.usb.transport import UsbTransport

    options = typed_options(spec, entry)
    board, bridge = _bridged(entry, options, None)  # the board takes the device lock; its clock in clock='s mode
    clock = board.clock
    try:
        backend = Asm24Backend(bridge)
        t = UsbTransport("", backend=backend, clock=clock, lock=False, emulated=True, connect=False)
    except BaseException:
        board.close()
        raise
    opened = Opened(t, spec, board=board, closers=[board.close], uncovered=lambda: list(board.uncovered),
                    emulator_stats=bridge.stats, notes=lambda: list(getattr(board, "notes", [])))
    register(opened)
    t.connect()
    return opened


def _open_native(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    """``pci:`` (sysfs, options force-bound and nowc) and ``vfio:``; sysfs root from $TINYHW_SYSFS."""
    from tinyhw.pci.sysfs import sysfs_root

    options = typed_options(spec, entry)
    t: Transport
    if spec.kind == "pci":
        from tinyhw.pci.sysfs import SysfsTransport

        t = SysfsTransport(spec.target, sysfs=sysfs_root(), force_bound=options.force_bound,
                           write_combining=not options.nowc)
    else:
        from tinyhw.pci.vfio import VfioTransport

        t = VfioTransport(spec.target, sysfs=sysfs_root())
    opened = Opened(t, spec)
    register(opened)
    return opened


def _open_usb(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    from tinyhw.usb.transport import UsbTransport

    typed_options(spec, entry)
    t = UsbTransport(spec.target, connect=False)
    opened = Opened(t, spec)
    register(opened)
    t.connect()
    return opened


def _open_remote(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    """A ``tinyhw serve remote``; over ssh the options belong to the device there (its server types them)."""
    from tinyhw.remote import open_remote

    if not spec.target.startswith("ssh://"):
        typed_options(spec, entry)
    opened = Opened(open_remote(spec), spec)
    register(opened)
    return opened


def _open_labgrid(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    """A labgrid place (tinyhw.connect.place): the place first, then its server's session and device lock;
    closing ends the session, then releases the place (if this process acquired it)."""
    from tinyhw.connect import place
    from tinyhw.remote import open_remote

    options = typed_options(spec, entry)
    lease = place.acquire(spec.target, options.coordinator)
    try:
        transport = open_remote(place.remote_spec(lease.resource))
    except BaseException:
        with contextlib.suppress(TinyhwError):  # the server's refusal is the error to show
            place.release(lease)
        raise

    def release() -> None:
        try:
            place.release(lease)
        except TinyhwError:
            if not transport.broken:  # after a lost connection, that error is the one to show, not this one
                raise

    opened = Opened(transport, spec, closers=[release])
    register(opened)
    return opened


def _refuse_cuda(spec: DeviceSpec, entry: registry.Entry, register: Callable[[Opened], None]) -> Opened:
    raise Refused("cuda: devices serve only `bench copy` and `kernels run`",
                  hint="register commands need pci:, vfio:, usb or mock: devices")


#: the openers the board registry's entries name (tinyhw.boards.registry.OPENERS), bound here
OPENERS: dict[str, Callable[[DeviceSpec, registry.Entry, Callable[[Opened], None]], Opened]] = {
    "pci": _open_native, "vfio": _open_native, "usb": _open_usb, "remote": _open_remote, "cuda": _refuse_cuda,
    "direct": _open_direct, "asm24": _open_asm24, "labgrid": _open_labgrid,
}
