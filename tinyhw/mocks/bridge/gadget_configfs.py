"""Setting up and tearing down the USB gadget in configfs for the FunctionFS front end.

Implements specs/usb-real-stack-harness.md "Gadget set-up (configfs + FunctionFS)" steps 1-5 with
the bridge's identity (specs/asm24-usb-bridge.md §2: ids, strings, self-powered configuration):
gadget directory and attributes, English strings, configuration ``c.1``, function ``ffs.NAME``
linked into it, FunctionFS mounted, descriptors written (by :class:`FunctionFsGadget`), and only
then the UDC bound. Every step that succeeded is undone in reverse order when the ``with`` block
ends, also on Ctrl-C and errors: UDC unbound, threads stopped, files closed, FunctionFS
unmounted, link removed, directories removed.

All file-system effects go through :class:`SysOps`, so tests run the same code on a fake
configfs tree in a temporary directory.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tinyhw.errors import EnvironmentProblem
from tinyhw.mocks.bridge.asm24 import Asm24Bridge
from tinyhw.mocks.bridge.gadget import FunctionFsGadget
from tinyhw.mocks.bridge.usb_descriptors import BCD_DEVICE, MANUFACTURER, PRODUCT, parse_configuration

CONFIGFS = Path("/sys/kernel/config")
UDC_CLASS = Path("/sys/class/udc")
PROC_FILESYSTEMS = Path("/proc/filesystems")
#: usb_f_fs registers the functionfs file system only when its first function instance is created
FFS_MODULE = Path("/sys/module/usb_f_fs")


class SysOps:
    """The file-system operations of the set-up (the real ones; tests override them)."""

    def mkdir(self, path: Path) -> None:
        """Create the configfs directory ``path`` (the kernel populates its attributes)."""
        path.mkdir()

    def write(self, path: Path, text: str) -> None:
        """Write ``text`` to the configfs attribute ``path`` in one write, as configfs requires."""
        with open(path, "w") as f:  # configfs attributes take one write
            f.write(text)

    def symlink(self, target: Path, link: Path) -> None:
        """Create the symlink ``link`` -> ``target`` (binds a function into a configuration)."""
        os.symlink(target, link)

    def unlink(self, path: Path) -> None:
        """Remove the symlink or file ``path``."""
        os.unlink(path)

    def rmdir(self, path: Path) -> None:
        """Remove the configfs directory ``path`` (the kernel tears down what it held)."""
        os.rmdir(path)

    def mount(self, source: str, target: Path, fstype: str) -> None:
        """mount(2) ``source`` of type ``fstype`` on ``target`` through libc; OSError with the errno on failure."""
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.mount(source.encode(), str(target).encode(), fstype.encode(), 0, None) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"mount -t {fstype} {source} {target}: {os.strerror(err)}")

    def umount(self, target: Path) -> None:
        """umount2(2) ``target`` through libc; OSError with the errno on failure."""
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        if libc.umount2(str(target).encode(), 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"umount {target}: {os.strerror(err)}")


def available_udcs(udc_class: Path | None = None) -> list[str]:
    """USB device controllers present (``dummy_udc.0`` with dummy_hcd)."""
    udc_class = udc_class or UDC_CLASS
    try:
        return sorted(p.name for p in udc_class.iterdir())
    except OSError:
        return []


def check_environment(udc: str | None = None, *, configfs: Path | None = None, udc_class: Path | None = None,
                      proc_filesystems: Path | None = None) -> str:
    """The UDC to bind to, or :class:`EnvironmentProblem` saying what is missing and how to get it."""
    configfs = configfs or CONFIGFS
    udc_class = udc_class or UDC_CLASS
    proc_filesystems = proc_filesystems or PROC_FILESYSTEMS
    try:
        filesystems = proc_filesystems.read_text()
    except OSError:
        filesystems = ""
    if "configfs" not in filesystems or not (configfs / "usb_gadget").is_dir():
        raise EnvironmentProblem(
            f"the usb gadget configfs is not available ({configfs / 'usb_gadget'} is missing)",
            hint=f"load libcomposite and mount configfs: modprobe libcomposite; mount -t configfs none {configfs}")
    if "functionfs" not in filesystems and not FFS_MODULE.exists():
        raise EnvironmentProblem("functionfs is not available in this kernel", hint="modprobe usb_f_fs")
    udcs = available_udcs(udc_class)
    if not udcs:
        raise EnvironmentProblem(
            "no usb device controller (udc) is present",
            hint="use a device-mode usb port, or for testing: modprobe dummy_hcd")
    if udc is None:
        return udcs[0]
    if udc not in udcs:
        raise EnvironmentProblem(f"no usb device controller named {udc!r}", hint=f"present: {', '.join(udcs)}")
    return udc


@dataclass(frozen=True)
class GadgetSetup:
    """Where and under which names the gadget is created."""

    name: str = "tinyhw"  # gadget directory, function instance and FunctionFS source name
    configfs: Path = CONFIGFS
    mount_dir: Path | None = None  # default /dev/ffs-NAME


class _Undo:
    """Undo steps, run in reverse order; each runs even if an earlier one failed."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, Callable[[], None]]] = []
        self.errors: list[str] = []

    def push(self, what: str, fn: Callable[[], None]) -> None:
        self.steps.append((what, fn))

    def run(self) -> None:
        while self.steps:
            what, fn = self.steps.pop()
            try:
                fn()
            except (OSError, KeyboardInterrupt) as e:
                self.errors.append(f"{what}: {e}")


@contextmanager
def serve_gadget(bridge: Asm24Bridge, udc: str, setup: GadgetSetup | None = None, *, ops: SysOps | None = None,
                 opener: Callable[[str, int], int] = os.open) -> Iterator[FunctionFsGadget]:
    """Create the gadget for ``bridge``, bind it to ``udc`` and serve until the block ends.

    Yields the running :class:`FunctionFsGadget`; ``gadget.teardown_errors`` lists undo steps that
    failed (also after an exception). Permission problems become :class:`EnvironmentProblem`.
    """
    setup = setup or GadgetSetup()
    ops = ops or SysOps()
    root = setup.configfs / "usb_gadget" / setup.name
    mount_dir = setup.mount_dir or Path(f"/dev/ffs-{setup.name}")
    cfg = parse_configuration(bridge.identity.configuration())
    undo = _Undo()
    gadget: FunctionFsGadget | None = None
    udc_file = root / "UDC"
    unbind_lock = threading.Lock()
    bound = [False]

    def unbind() -> None:
        with unbind_lock:
            if bound[0]:
                bound[0] = False
                try:
                    ops.write(udc_file, "\n")
                except OSError as e:
                    if e.errno != errno.ENODEV:  # ENODEV: already unbound (by hand, or the UDC went away)
                        raise

    def mkdir(path: Path) -> None:
        ops.mkdir(path)
        undo.push(f"rmdir {path}", lambda: ops.rmdir(path))

    try:
        try:
            mkdir(root)
            ident = bridge.identity
            for attr, value in (("idVendor", f"0x{ident.vendor_id:04x}"), ("idProduct", f"0x{ident.product_id:04x}"),
                                ("bcdDevice", f"0x{BCD_DEVICE:04x}")):
                ops.write(root / attr, value)
            strings = root / "strings" / "0x409"
            mkdir(strings)
            for attr, value in (("manufacturer", MANUFACTURER), ("product", PRODUCT), ("serialnumber", ident.serial)):
                ops.write(strings / attr, value)
            config = root / "configs" / "c.1"
            mkdir(config)
            ops.write(config / "bmAttributes", f"0x{cfg.bmAttributes:02x}")
            ops.write(config / "MaxPower", str(cfg.bMaxPower * 2))
            function = root / "functions" / f"ffs.{setup.name}"
            mkdir(function)
            link = config / f"ffs.{setup.name}"
            ops.symlink(function, link)
            undo.push(f"unlink {link}", lambda: ops.unlink(link))
            if not mount_dir.exists():
                mkdir(mount_dir)
            ops.mount(setup.name, mount_dir, "functionfs")
            undo.push(f"umount {mount_dir}", lambda: ops.umount(mount_dir))
            gadget = FunctionFsGadget(bridge, mount_dir, opener=opener, on_disconnect=unbind)
            undo.push("close the functionfs files", gadget.close)
            gadget.open()
            gadget.start()
            undo.push("stop the gadget threads", lambda: _stop(gadget))
            ops.write(udc_file, udc)
            bound[0] = True
            undo.push(f"unbind {udc}", unbind)
        except PermissionError as e:
            raise EnvironmentProblem(f"no permission to set up the usb gadget: {e}",
                                     hint="run as root (configfs and functionfs need it)") from e
        except FileExistsError as e:
            raise EnvironmentProblem(f"cannot set up the usb gadget: {e}",
                                     hint=f"a gadget named {setup.name!r} is left over or running: "
                                          f"stop it, or remove {root}") from e
        except OSError as e:
            raise EnvironmentProblem(f"cannot set up the usb gadget: {e}",
                                     hint="check the kernel log (dmesg) for the gadget framework's reason") from e
        yield gadget
    finally:
        undo.run()
        if gadget is not None:
            gadget.teardown_errors = undo.errors


def _stop(gadget: FunctionFsGadget) -> None:
    if not gadget.stop():
        raise OSError("a gadget thread did not end within 5 s")
