"""Turning a device string into an open transport: the one place transports are constructed.

``tinyhw.open(device_string)`` (and the CLI) call :func:`open_device`. It sits in front of the transport
layer (ARCHITECTURE.md "Opening a device from Python"): it may import the transports and the emulated
boards; features never import it, they are handed the transport it returns. Emulated boards are
assembled here: ``mock:navi31`` is the board on the direct transport; ``mock:navi31-usb`` is the same
board behind the emulated ASM24 bridge, reached through a pyusb backend by the real ``usb`` transport;
``mock:ad102`` is the emulated NVIDIA Ada board on its own direct transport (NVIDIA boards: native PCIe only).
Every path takes the device lock (the emulated board takes it where it is built). ``cuda:N`` is not a
register transport: :func:`open_cuda` builds its device object (the CUDA driver's own context).

Example::

    import tinyhw
    with tinyhw.open("mock:navi31-usb") as dev:
        print(dev.transport.identity())
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tinyhw.errors import DeviceNotFound, NotAvailableYet
from tinyhw.transport.base import Transport
from tinyhw.transport.devstr import DeviceSpec, parse_device

if TYPE_CHECKING:
    from tinyhw.cuda import CudaDevice
    from tinyhw.mocks.options import MockOptions

NOT_YET: dict[str, str] = {}
EMULATED_HINT = "try the emulated board: --device mock:navi31 or --device mock:navi31-usb"


@dataclass
class Opened:
    """An open transport plus what must be closed with it and what the emulator noticed."""

    transport: Transport
    spec: DeviceSpec
    closers: list[Callable[[], None]] = field(default_factory=list)
    notes: Callable[[], list[str]] = list  # accesses an emulated board did not cover (non-strict)
    emulator_stats: Callable[[], dict] | None = None

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


def open_device(spec: DeviceSpec | str, register: Callable[[Opened], None] | None = None) -> Opened:
    """Open ``spec`` (a :class:`DeviceSpec` or a device string). ``register`` receives the :class:`Opened`
    before the device is connected, so the caller can report counters (``--stats``) and release everything
    even when opening fails."""
    if isinstance(spec, str):
        spec = parse_device(spec)
    register = register or (lambda _o: None)
    if spec.kind == "cuda":
        from tinyhw.errors import Refused

        raise Refused("cuda: devices serve only `bench copy` and `kernels run`",
                      hint="register commands need pci:, vfio:, usb or mock: devices")
    if spec.kind in NOT_YET:
        raise NotAvailableYet(NOT_YET[spec.kind], hint=EMULATED_HINT)
    if spec.kind == "mock":
        from tinyhw.mocks.options import MockOptions

        options = MockOptions.from_options(spec.options)
        if spec.target == "navi31":
            from tinyhw.errors import BadDeviceString
            from tinyhw.mocks.direct import DirectTransport

            if options.clock == "hybrid" and options.clock_explicit:
                raise BadDeviceString("option clock=hybrid is offered by mock:navi31-usb only (mock:navi31's "
                                      "emulator does not mark the work it does on the driver's thread)")

            t = DirectTransport(options)
            opened = Opened(t, spec, notes=lambda: list(t.board.uncovered))
            register(opened)
            return opened
        if spec.target == "ad102":
            return _open_ad102(spec, options, register)
        return _open_mock_usb(spec, options, register)
    if spec.kind in ("pci", "vfio"):
        return _open_native(spec, register)
    if spec.kind == "remote":
        from tinyhw.remote import open_remote

        opened = Opened(open_remote(spec), spec)
        register(opened)
        return opened
    if spec.kind == "usb":
        _no_options(spec)
        from tinyhw.usb.transport import UsbTransport

        t = UsbTransport(spec.target, connect=False)
        opened = Opened(t, spec)
        register(opened)
        t.connect()
        return opened
    raise DeviceNotFound(f"unknown device kind {spec.kind!r}")  # pragma: no cover - parse_device prevents it


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


def _open_mock_usb(spec: DeviceSpec, options, register: Callable[[Opened], None]) -> Opened:
    from tinyhw.mocks.navi31 import Navi31Board
    from tinyhw.mocks.pyusb_backend import make_backend
    from tinyhw.usb.transport import UsbTransport

    board = Navi31Board(options, attach="usb")  # takes the device lock; its virtual clock in options.clock's mode
    clock = board.clock
    try:
        backend = make_backend(board, options, clock)
        t = UsbTransport("", backend=backend, clock=clock, lock=False, emulated=True, connect=False)
    except BaseException:
        board.close()
        raise
    opened = Opened(t, spec, closers=[board.close], notes=lambda: list(board.uncovered),
                    emulator_stats=backend.bridge.stats)
    register(opened)
    t.connect()
    return opened


AD102_OPTIONS = ("strict", "gsp", "power")


def _open_ad102(spec: DeviceSpec, options: MockOptions, register: Callable[[Opened], None]) -> Opened:
    from tinyhw.errors import BadDeviceString
    from tinyhw.mocks.ad102 import Ad102Transport

    unknown = [k for k in spec.options if k not in AD102_OPTIONS]
    if unknown:
        raise BadDeviceString(f"mock:ad102 does not take option(s) {', '.join(unknown)} "
                              f"(allowed: {', '.join(AD102_OPTIONS)})")
    t = Ad102Transport(options)  # takes the device lock
    opened = Opened(t, spec, notes=lambda: list(t.board.uncovered))
    register(opened)
    return opened


PCI_OPTIONS = {"pci": ("force-bound", "nowc"), "vfio": ()}


def _open_native(spec: DeviceSpec, register: Callable[[Opened], None]) -> Opened:
    """``pci:`` (sysfs, options force-bound and nowc) and ``vfio:``; sysfs root from $TINYHW_SYSFS."""
    from tinyhw.errors import BadDeviceString
    from tinyhw.pci.sysfs import sysfs_root

    unknown = [k for k in spec.options if k not in PCI_OPTIONS[spec.kind]]
    if unknown:
        allowed = ", ".join(PCI_OPTIONS[spec.kind]) or "none"
        raise BadDeviceString(f"the {spec.kind} transport does not take option(s) {', '.join(unknown)} "
                              f"(allowed: {allowed})")
    t: Transport
    if spec.kind == "pci":
        from tinyhw.pci.sysfs import SysfsTransport

        t = SysfsTransport(spec.target, sysfs=sysfs_root(), force_bound=bool(spec.option("force-bound")),
                           write_combining=not spec.option("nowc"))
    else:
        from tinyhw.pci.vfio import VfioTransport

        t = VfioTransport(spec.target, sysfs=sysfs_root())
    opened = Opened(t, spec)
    register(opened)
    return opened


def _no_options(spec: DeviceSpec) -> None:
    if spec.options:
        from tinyhw.errors import BadDeviceString

        raise BadDeviceString(f"the {spec.kind} transport takes no options (got {', '.join(spec.options)})")
