"""tinygrad's AMD driver on the emulated Navi31: the one-layer adapter (tinygrad stays unmodified above it).

tinygrad 0.14.0 (the ``compile`` extra) drives an RX 7900 from user space with no kernel driver (``DEV=AMD``, its
AM driver in ``tinygrad/runtime/support/am/``) either through a PCI function (``PCIIface`` over
``tinygrad.runtime.support.system.PCIDevice``) or through the ASM24 USB bridge (``USBIface`` over
``tinygrad.runtime.support.usb.USB3``, under its ``CustomASM24Controller``). This module replaces exactly that
lowest layer, written from its interface only (docs/peer-drivers.md says precisely what is replaced):

* ``mock:navi31``: :class:`EmulatedPciDevice` stands in for tinygrad's ``PCIDevice`` (config space, BAR mappings,
  host memory for DMA) and the bus scan that names it (``System.pci_scan_bus``) lists the emulated function. Its
  BAR views forward every access to the tinyhw transport; host memory comes from the transport's emulated IOMMU
  (``dma_alloc``), so the GPU's system pages resolve through the IOMMU as with VFIO.
* ``mock:navi31-usb``: :class:`EmulatedUsb3` stands in for tinygrad's ``USB3`` (libusb control, bulk and
  asynchronous transfers) over pyusb and the emulated ASM24 bridge's pyusb backend
  (:mod:`tinyhw.mocks.bridge.pyusb_backend`); tinygrad's own ``CustomASM24Controller``, ``USBPCIDevice`` and
  ``USBMMIOInterface`` run unmodified on top of it.

Firmware: tinygrad pins linux-firmware files by SHA-256 and downloads them into its cache
(``<cache>/downloads/fw/<name>``). :func:`provide_firmware` puts Debian's ``firmware-amd-graphics`` files there
and points the pin table (``tinygrad.runtime.autogen.am.fw.hashes``) at their SHA-256 for as long as the session
lasts: no network, and tinygrad still checks every file it loads against a pin.

:func:`emulated_gpu` is the documented entry point: a context manager that opens the board, installs the adapter
and yields an :class:`EmulatedGpu` whose :class:`AccessLog` holds the last accesses (what a failure prints), e.g.::

    with emulated_gpu("mock:navi31-usb,strict") as gpu:
        from tinygrad import Tensor
        print((Tensor([1, 2]) + 1).numpy())

A process has one tinygrad ``Device["AMD"]``; on exit the context finalizes it (tinygrad's own process-exit
step) and forgets it, so one process can use the context once per attachment.
"""

from __future__ import annotations

import contextlib
import ctypes
import hashlib
import itertools
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tinyhw.errors import NotAvailableYet, Refused, install_hint
from tinyhw.peers.tinygrad_pci import AccessLog, PeerPciDevice
from tinyhw.transport.abilities import DmaBuffers
from tinyhw.transport.base import Transport, require

#: The PCI function tinygrad's PCIIface looks for (Navi31) and the id its USBIface looks for (the bridge).
AMD_VENDOR = 0x1002
BRIDGE_IDS = ((0xADD1, 0x0001), (0x3801, 0x0001))
#: Where tinygrad 0.14.0's ``fetch_fw`` downloads amdgpu firmware from (linux-firmware at a pinned commit); its
#: ``fetch`` caches a download as ``<cache>/downloads/fw/<md5 of this url>``.
FIRMWARE_URL = ("https://gitlab.com/kernel-firmware/linux-firmware/-/raw/0a6871b19abf5d6e024b5d208b101ae53e7fa0de/"
                "amdgpu/{name}")


# -- mock:navi31: tinygrad's PCIDevice ----------------------------------------------------------------------------
class EmulatedPciDevice(PeerPciDevice):
    """tinygrad's ``PCIDevice`` interface over the emulated function of the active :class:`EmulatedGpu`.

    Built by tinygrad as ``PCIDevice(devpref, pcibus)`` (from the bus scan this module installs). Config space and
    BARs go to the tinyhw transport (:class:`~tinyhw.peers.tinygrad_pci.PeerPciDevice`); ``alloc_sysmem`` returns
    host buffers of the transport's emulated IOMMU (their IOVAs are the addresses the GPU's system pages carry)."""

    def __init__(self, devpref: str, pcibus: str, *args: Any, **kwargs: Any) -> None:
        gpu = EmulatedGpu.active
        if gpu is None or gpu.transport is None or pcibus != gpu.name:
            raise NotAvailableYet(f"no emulated pci function {pcibus!r} is attached")
        super().__init__(gpu.transport, pcibus, gpu.log)
        self.gpu = gpu
        self._bufs: list[Any] = []

    def dword_bar(self, bar: int) -> bool:
        """Every BAR but the VRAM aperture (BAR0) is a register file: its writes go dword by dword."""
        return bar != 0

    # host memory
    def alloc_sysmem(self, size: int, vaddr: int = 0, contiguous: bool = False) -> tuple[Any, list[int]]:
        """Host memory the GPU reaches: a buffer of the emulated IOMMU; (a host view of it, its 4 KiB page IOVAs)."""
        from tinygrad.runtime.support.hcq import MMIOInterface

        size = (size + 0xFFF) & ~0xFFF
        buf = require(self.t, DmaBuffers, "give tinygrad host memory").dma_alloc(size)
        self._bufs.append(buf)
        self.log.add(f"sysmem {size:#x} bytes at iova {buf.iova:#x}")
        host = (ctypes.c_char * size).from_buffer(buf.mem)
        buf.keep = host  # the view's address stays valid while the buffer lives
        return MMIOInterface(ctypes.addressof(host), size), [buf.iova + i for i in range(0, size, 0x1000)]

    def reset(self) -> None:
        """A function reset is not offered through this adapter (tinygrad's AM driver uses a mode-1 reset)."""
        raise NotAvailableYet("function reset is not offered by the tinygrad adapter")


# -- mock:navi31-usb: tinygrad's USB3 ------------------------------------------------------------------------------
class EmulatedUsb3:
    """tinygrad's ``USB3`` interface (libusb transfers) over pyusb and the emulated ASM24 bridge's backend.

    ``list_devices`` lists the active session's bridge; the asynchronous transfers complete at once (the backend
    carries them in order), so ``bulk_wait`` only reports a latched error."""

    @classmethod
    def list_devices(cls, vendor: int, dev: int) -> list[tuple[Any, str]]:
        """(pyusb device, name) of every emulated bridge with these ids (the active session's, when it is usb)."""
        gpu = EmulatedGpu.active
        usb = gpu.usb_device if gpu is not None else None
        if usb is None or (vendor, dev) != (usb.idVendor, usb.idProduct):
            return []
        return [(gpu.usb_device, gpu.name)]

    def __init__(self, dev: Any, *args: Any, **kwargs: Any) -> None:
        import usb.util

        gpu = EmulatedGpu.active
        if gpu is None:
            raise NotAvailableYet("no emulated usb bridge is attached")
        self.dev, self.log, self._tags = dev, gpu.log, itertools.count(1)
        self.product = usb.util.get_string(dev, dev.iProduct) or ""
        dev.set_configuration(1)
        usb.util.claim_interface(dev, 0)
        dev.set_interface_altsetting(0, 0)

    def control_write(self, request: int, value: int = 0, index: int = 0, data: bytes = b"",
                      timeout: int = 1000) -> None:
        """Vendor control OUT (bmRequestType 0x40)."""
        self.log.add(f"usb ctrl out {request:#04x} value={value:#x} index={index:#x} {bytes(data).hex()}")
        sent = self.dev.ctrl_transfer(0x40, request, value, index, bytes(data) or None, timeout)
        if sent != len(data):
            raise OSError(f"control out {request:#x} sent {sent} of {len(data)} bytes")

    def control_read(self, request: int, length: int, value: int = 0, index: int = 0,
                     timeout: int = 1000) -> memoryview:
        """Vendor control IN (bmRequestType 0xC0) of exactly ``length`` bytes."""
        got = bytes(self.dev.ctrl_transfer(0xC0, request, value, index, length, timeout))
        self.log.add(f"usb ctrl in {request:#04x} value={value:#x} index={index:#x} -> {got.hex()}")
        if len(got) != length:
            raise OSError(f"control in {request:#x} returned {len(got)} of {length} bytes")
        return memoryview(got)

    def bulk_write(self, payload: bytes, timeout: int = 1000) -> None:
        """Bulk OUT on endpoint 0x02, all of ``payload``."""
        self.log.add(f"usb bulk out {len(payload)} bytes")
        sent = self.dev.write(0x02, bytes(payload), timeout)
        if sent != len(payload):
            raise OSError(f"bulk out short write: {sent}/{len(payload)} bytes")

    def bulk_read(self, length: int, timeout: int = 1000) -> memoryview:
        """Bulk IN on endpoint 0x81 of up to ``length`` bytes."""
        got = bytes(self.dev.read(0x81, length, timeout))
        self.log.add(f"usb bulk in {len(got)} bytes")
        return memoryview(got)

    def bulk_write_async(self, payload: Any, timeout: int = 10000) -> int:
        """A bulk OUT, done now; its tag for ``bulk_wait``."""
        self.bulk_write(bytes(payload), timeout)
        return next(self._tags)

    def control_write_async(self, request: int, value: int = 0, index: int = 0, data: bytes = b"",
                            timeout: int = 1000) -> int:
        """A vendor control OUT, done now; its tag for ``bulk_wait``."""
        self.control_write(request, value, index, data, timeout)
        return next(self._tags)

    def control_read_async(self, request: int, length: int, value: int = 0, index: int = 0,
                           timeout: int = 1000) -> tuple[int, memoryview]:
        """A vendor control IN, done now; its tag and its data."""
        return next(self._tags), self.control_read(request, length, value, index, timeout)

    def bulk_wait(self, tag: int) -> None:
        """Nothing is left in flight: every transfer completed when it was submitted (errors were raised then)."""


# -- firmware --------------------------------------------------------------------------------------------------------
def provide_firmware(firmware_dir: Path, names: tuple[str, ...]) -> dict[str, str]:
    """Give tinygrad Debian's amdgpu firmware without network: copy each file into tinygrad's download cache
    (``<tinygrad cache>/downloads/fw/<md5 of its url>``, where ``fetch_fw`` looks first) and pin its SHA-256 in
    ``tinygrad.runtime.autogen.am.fw.hashes``. Returns the pins it replaced (for :func:`restore_firmware_pins`).
    Exit 3 when a file is missing."""
    from tinygrad.helpers import _ensure_downloads_dir
    from tinygrad.runtime.autogen.am import fw

    target = _ensure_downloads_dir() / "fw"
    target.mkdir(parents=True, exist_ok=True)
    old: dict[str, str] = {}
    for name in names:
        src = Path(firmware_dir) / name
        if not src.is_file():
            raise NotAvailableYet(f"amdgpu firmware {name} is not in {firmware_dir}",
                                  hint="install the debian package firmware-amd-graphics (tests/setup-system.sh)")
        data = src.read_bytes()
        cached = target / hashlib.md5(FIRMWARE_URL.format(name=name).encode()).hexdigest()
        if not cached.is_file() or cached.read_bytes() != data:
            shutil.copyfile(src, cached)
        old[name] = fw.hashes.get(name, "")
        fw.hashes[name] = hashlib.sha256(data).hexdigest()
    return old


def restore_firmware_pins(old: dict[str, str]) -> None:
    """Put back the pins :func:`provide_firmware` replaced."""
    from tinygrad.runtime.autogen.am import fw

    for name, pin in old.items():
        if pin:
            fw.hashes[name] = pin
        else:
            fw.hashes.pop(name, None)


def default_firmware_dir() -> Path:
    """Where Debian's amdgpu files are: $TINYHW_AMDGPU_FIRMWARE, else $TINYHW_FIRMWARE_DIR/amd/lib/firmware/amdgpu
    (what tests/fetch_firmware.sh extracts), else /lib/firmware/amdgpu."""
    if os.environ.get("TINYHW_AMDGPU_FIRMWARE"):
        return Path(os.environ["TINYHW_AMDGPU_FIRMWARE"])
    if os.environ.get("TINYHW_FIRMWARE_DIR"):
        return Path(os.environ["TINYHW_FIRMWARE_DIR"]) / "amd" / "lib" / "firmware" / "amdgpu"
    return Path("/lib/firmware/amdgpu")


# -- the session -----------------------------------------------------------------------------------------------------
def _amd_entry(device: str) -> Any:
    """The board registry's row of ``device`` when it is an emulated board whose description has the AMD bring-up,
    else None."""
    from tinyhw.boards.registry import find
    from tinyhw.transport.devstr import parse_device

    spec = parse_device(device)
    entry = find(spec.kind, spec.target) if spec.kind == "mock" else None
    board = entry.spec if entry is not None else None
    return entry if board is not None and board.engines.am_boot else None


class EmulatedGpu:
    """One emulated AMD board attached for tinygrad: the open board, the adapter's access log, what it replaced.

    ``attach`` is ``"pci"`` (``mock:navi31``) or ``"usb"`` (``mock:navi31-usb``). ``transport`` is the tinyhw
    transport of a direct board (None over usb); ``board`` the emulated board (``uncovered``, counters)."""

    active: EmulatedGpu | None = None

    def __init__(self, device: str, log_size: int = 256) -> None:
        self.device = device
        self.log = AccessLog(log_size)
        self.attach = "usb" if device.split(",", maxsplit=1)[0].endswith("-usb") else "pci"
        self.entry = _amd_entry(device)  # the registry row of the emulated board (None: not one the adapter takes)
        board = self.entry.board if self.entry is not None else "board"
        self.name = f"mock-{board}-{os.getpid()}" if self.attach == "pci" else f"usb:mock-{os.getpid()}"
        self.transport: Transport | None = None
        self.usb_device: Any = None
        self.board: Any = None
        self._closers: list[Any] = []
        #: errors of tinygrad devices that could not finalize when the context ended
        self.finalize_errors: list[str] = []

    def open(self) -> None:
        """Open the emulated board (it takes the device lock)."""
        from tinyhw.connect import bridged_board, open_device
        from tinyhw.transport.devstr import parse_device

        spec = parse_device(self.device)
        if self.entry is None:
            from tinyhw.boards.registry import boards

            names = ", ".join(e.name for e in boards() if e.opener == "direct" and _amd_entry(e.name) is not None)
            raise Refused(f"{self.device}: the tinygrad amd adapter takes an emulated amd board ({names}, their -usb "
                          "forms)")
        if self.attach == "pci":
            opened = open_device(spec)
            self._closers.append(opened.close)
            self.transport = opened.transport
            self.board = opened.board
            return
        import usb.core

        from tinyhw.mocks.bridge.pyusb_backend import Asm24Backend

        board, bridge = bridged_board(self.entry.board, spec.options)
        self._closers.append(board.close)
        self.board = board
        backend = Asm24Backend(bridge)
        self.usb_device = usb.core.find(backend=backend)
        if self.usb_device is None:
            raise NotAvailableYet("the emulated bridge did not enumerate")

    def close(self) -> None:
        """Close the board (releases the device lock). Safe to call twice."""
        closers, self._closers = self._closers, []
        for c in reversed(closers):
            c()

    @property
    def uncovered(self) -> list[str]:
        """The accesses the emulated board did not model (non-strict runs)."""
        return list(self.board.uncovered) if self.board is not None else []


@contextlib.contextmanager
def installed(gpu: EmulatedGpu) -> Iterator[None]:
    """Replace tinygrad's lowest layer with ``gpu`` while the context lasts: ``system.PCIDevice`` and the bus scan
    (``System.pci_scan_bus``), and ``USB3`` where tinygrad's modules hold it (``support.usb``, ``support.system``,
    ``ops_amd``). Only the emulated function or bridge is listed, so ``DEV=AMD`` never reaches a real device."""
    import tinygrad.runtime.ops_amd as tg_amd
    import tinygrad.runtime.support.system as tg_system
    import tinygrad.runtime.support.usb as tg_usb

    def scan(vendor: int, devices: Any, base_class: int | None = None) -> list[str]:
        if gpu.attach != "pci" or vendor != AMD_VENDOR:
            return []
        device_id = gpu.transport.config_read(0, 4) >> 16 if gpu.transport is not None else 0
        return [gpu.name] if any((device_id & mask) in ids for mask, ids in devices) else []

    saved = [(tg_system, "PCIDevice", tg_system.PCIDevice), (tg_usb, "USB3", tg_usb.USB3),
             (tg_system, "USB3", tg_system.USB3), (tg_amd, "USB3", tg_amd.USB3)]
    system = tg_system.System
    had_scan = "pci_scan_bus" in vars(system)
    old_scan = vars(system).get("pci_scan_bus")
    previous, EmulatedGpu.active = EmulatedGpu.active, gpu
    try:
        tg_system.PCIDevice = EmulatedPciDevice
        tg_usb.USB3 = tg_system.USB3 = tg_amd.USB3 = EmulatedUsb3
        system.pci_scan_bus = scan
        type(system).list_devices.cache_clear()
        yield
    finally:
        for module, name, value in saved:
            setattr(module, name, value)
        if had_scan:
            system.pci_scan_bus = old_scan
        else:
            vars(system).pop("pci_scan_bus", None)
        type(system).list_devices.cache_clear()
        EmulatedGpu.active = previous


def _finalize_amd() -> list[str]:
    """tinygrad's process-exit step for the AMD devices opened so far (synchronize, then the AM driver's fini),
    then forget them, so the process's own exit does not finalize them a second time on a closed board. Returns the
    errors of devices that could not finalize (a device left in an error state)."""
    from tinygrad.device import Device

    errors = []
    for name in [d for d in list(Device._opened_devices) if d.split(":")[0] == "AMD"]:
        try:
            Device[name].finalize()
        except Exception as exc:  # a device that failed cannot finalize cleanly: say so, forget it all the same
            errors.append(f"{name}: {type(exc).__name__}: {exc}")
        finally:
            Device._opened_devices.discard(name)
    Device._Device__get_canonicalized_item.cache_clear()  # type: ignore[attr-defined]
    return errors


@contextlib.contextmanager
def emulated_gpu(device: str = "mock:navi31,strict", *, firmware_dir: Path | str | None = None,
                 log_size: int = 256) -> Iterator[EmulatedGpu]:
    """Run tinygrad's ``DEV=AMD`` code on ``device`` (``mock:navi31`` or ``mock:navi31-usb`` with its options) for
    the context's duration: open the board, give tinygrad the firmware in ``firmware_dir`` (default
    :func:`default_firmware_dir`), install the adapter; on exit finalize tinygrad's AMD device, restore tinygrad
    and close the board. Exit 2 for another device, 3 when tinygrad or a firmware file is missing."""
    try:
        import tinygrad  # noqa: F401  (a clear exit-3 error instead of an ImportError deep inside)
    except ImportError as e:
        raise NotAvailableYet("tinygrad is not installed", hint=install_hint("compile")) from e
    gpu = EmulatedGpu(device, log_size)
    board = gpu.entry.spec if gpu.entry is not None else None
    # the files the board's description names (none for a device the adapter refuses when it opens)
    names = board.firmware.files if board is not None and board.firmware is not None else ()
    pins = provide_firmware(Path(firmware_dir) if firmware_dir else default_firmware_dir(), names)
    try:
        gpu.open()
        try:
            with installed(gpu):
                try:
                    yield gpu
                finally:
                    gpu.finalize_errors = _finalize_amd()
        finally:
            gpu.close()
    finally:
        restore_firmware_pins(pins)
