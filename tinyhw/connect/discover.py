"""What devices are reachable (``tinyhw list``, :func:`list_devices`) and which one a read-only command may
pick by itself."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.boards import registry
from tinyhw.errors import DeviceNotFound, Refused, TinyhwError
from tinyhw.transport.devstr import DeviceSpec, parse_device

GPU_VENDORS = {0x1002: "amd", 0x10DE: "nvidia"}
DISPLAY_CLASS = 0x03


@dataclass
class Listed:
    """One device ``tinyhw list`` shows: its device string, kind, whether it is emulated, a description and
    kind-specific extras."""

    device: str
    kind: str
    emulated: bool
    description: str
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        """The entry as a JSON-ready dict (the extras merged in)."""
        return {"device": self.device, "kind": self.kind, "emulated": self.emulated,
                "description": self.description, **self.extra}


def list_pci() -> list[Listed]:
    """Display-class AMD and NVIDIA functions in this machine's sysfs (read-only)."""
    from tinyhw.boards.pcinames import load_names
    from tinyhw.pci.scan import scan
    from tinyhw.pci.sysfs import devices_dir, sysfs_root

    ids = load_names()
    out = []
    for dev in scan(devices_dir(sysfs_root())):
        if dev.vendor_id in GPU_VENDORS and dev.class_code >> 16 == DISPLAY_CLASS:
            out.append(Listed(f"pci:{dev.address}", "pci", False, ids.device_name(dev.vendor_id, dev.device_id), {
                "vendor_id": dev.vendor_id, "device_id": dev.device_id, "driver": dev.driver}))
    return out


def list_usb(warn: bool = True) -> list[Listed]:
    """ASM24 bridges with the custom firmware (read-only: nothing is opened or configured)."""
    try:
        from tinyhw.usb.device import find_bridges

        bridges = find_bridges()
    except TinyhwError as e:
        if warn:
            print(f"note: usb bridges not searched: {e}", file=sys.stderr)
        return []
    return [Listed(b.name, "usb", False, "asm24 usb-to-pcie bridge (custom firmware)",
                   {"usb_id": f"{b.vendor_id:04x}:{b.product_id:04x}"}) for b in bridges]


def list_mocks() -> list[Listed]:
    """The emulated boards of the board registry (always present)."""
    return [Listed(e.name, "mock", True, e.description) for e in registry.boards()]


def list_remote(spec: DeviceSpec | str) -> list[Listed]:
    """The device a ``remote:`` server serves, as that server describes it (one session, nothing written)."""
    from tinyhw.boards.pcinames import load_names
    from tinyhw.connect import open_device

    if isinstance(spec, str):
        spec = parse_device(spec)
    if spec.kind != "remote":
        raise Refused(f"{spec.kind}: is not a server: only remote: devices are listed through a connection",
                      hint="tinyhw list (without --device) lists the devices of this machine")
    opened = open_device(spec)
    try:
        t = opened.transport
        ident, info = t.identity(), t.info()
        served = info.extra.get("served", {})
        name = load_names().device_name(ident.vendor_id, ident.device_id)
        where = f"{name}, served from {info.extra.get('server')}"
        return [Listed(f"remote:{spec.target}", "remote", info.emulated, where, {
            "vendor_id": ident.vendor_id, "device_id": ident.device_id, "location": ident.location,
            "served_transport": served.get("transport")})]
    finally:
        opened.close()


def list_devices(warn: bool = True, device: DeviceSpec | str | None = None) -> list[Listed]:
    """Every device tinyhw can reach: GPUs in sysfs, USB bridges, then the emulated boards.

    With ``device`` a ``remote:`` string: the device that server serves (the local ones are not listed)."""
    if device is not None:
        return list_remote(device)
    return list_pci() + list_usb(warn=warn) + list_mocks()


def pick_default_device(log: Callable[[str], None] = lambda _m: None, *, writes: bool,
                        example: str = "") -> DeviceSpec:
    """With no --device: a read-only command may use the single real device present; writes never guess.
    ``example`` is the device string the error's hint shows (an emulated board the command works on; default: the
    registry's first emulated board)."""
    from tinyhw.boards.registry import default_board

    example = example or default_board().name
    if writes:
        raise Refused("this command changes the device: name it with --device",
                      hint=f"tinyhw list shows the devices; e.g. --device {example}")
    real = list_pci() + list_usb(warn=False)
    if not real:
        raise DeviceNotFound("no gpu or usb bridge found", hint=f"name one with --device, e.g. --device {example}")
    if len(real) > 1:
        names = ", ".join(r.device for r in real)
        raise Refused(f"several devices are present ({names}): choose one with --device")
    log(f"using {real[0].device}")
    return parse_device(real[0].device)
