"""tinyhw: bring up and rescue GPUs from user space.

The package is layered (see ARCHITECTURE.md): ``autogen`` (data) < core (``errors``,
``transport``, ``regs``, ``formats``, ``progress``, ``boards``) < transports (``pci``, ``usb``,
``mocks``) < ``connect`` (device strings to open transports) < features (``probe``, ``flash``, ...) < ``cli``.

From Python::

    import tinyhw
    from tinyhw.flash import FlashDevice, ops

    with tinyhw.open("mock:navi31-usb") as dev:          # the same device lock as the CLI
        with FlashDevice(dev.transport) as flash:
            image = ops.dump(flash)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tinyhw.connect import Opened
    from tinyhw.connect.discover import Listed

__version__ = "0.1.0"


def open(device: str, *, record: str | None = None, **record_options: Any) -> Opened:
    """Open the device named by ``device`` (``mock:navi31``, ``usb``, ``pci:0000:03:00.0``, ...).

    Returns a context manager with ``.transport`` (the transport seam: config space, BARs, identity,
    counters) that releases the device and its lock on exit. Raises a :class:`tinyhw.errors.TinyhwError`
    (``DeviceLocked`` when another process holds the device). ``record``: a new trace file every operation is
    appended to (docs/trace-format.md); ``record_options`` are those of :func:`tinyhw.transport.record.recording`.
    """
    from tinyhw.connect import open_device

    return open_device(device, record=record, **record_options)


def list_devices() -> list[Listed]:
    """GPUs in sysfs, USB bridges with the custom firmware, and the emulated boards (read-only)."""
    from tinyhw.connect.discover import list_devices as _list

    return _list(warn=False)
