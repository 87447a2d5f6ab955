"""Binding a PCI function to vfio-pci and back (specs/pci-vfio-remote.md §2.6, §8.2).

Bind: write the address to ``driver/unbind`` (if bound), ``vfio-pci`` to ``driver_override``,
the address to ``/sys/bus/pci/drivers_probe``, then check the ``driver`` link. Release: clear
``driver_override`` (a lone newline), unbind from vfio-pci, ``drivers_probe`` again so the
kernel's own driver (if any) takes the function back. Every write is one ``write()`` of ASCII.

These writes change which driver owns a device, so they are made under the device lock and
only after the caller showed the plan (:func:`plan`) and got ``--yes``. Never point this at a
function the machine needs (its disk or network): the CLI prints what it unbinds first.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from tinyhw.errors import EnvironmentProblem, OperationFailed
from tinyhw.pci.scan import read_function
from tinyhw.pci.sysfs import devices_dir, open_function, permission_problem, write_attr
from tinyhw.transport.lock import DeviceLock

VFIO_DRIVER = "vfio-pci"


@dataclass
class BindPlan:
    """What binding ``address`` to ``driver`` will do; ``group_members`` are (address, driver) pairs."""

    address: str
    driver: str
    current: str | None
    iommu_group: int | None
    group_members: list[tuple[str, str | None]] = field(default_factory=list)

    @property
    def needed(self) -> bool:
        """True unless the function is already bound to the target driver."""
        return self.current != self.driver

    def lines(self) -> list[str]:
        """The plan in words, one step a line, with a note for each IOMMU group member that stays bound to another
        driver."""
        if not self.needed:
            return [f"{self.address} is already bound to {self.driver}; nothing to do"]
        out = [f"unbind {self.address} from {self.current}" if self.current else f"{self.address} has no driver"]
        out.append(f"write {self.driver} to {self.address}/driver_override and probe it")
        others = [(a, d) for a, d in self.group_members if a != self.address and d not in (None, self.driver)]
        for a, d in others:
            out.append(f"note: {a} shares iommu group {self.iommu_group} and stays bound to {d}; "
                       "vfio needs every member bound to vfio-pci or to nothing")
        return out


def _write(path: str, text: str) -> None:
    try:
        write_attr(path, text)
    except PermissionError as e:
        raise permission_problem("write", path, e) from e
    except OSError as e:
        raise OperationFailed(f"writing {text.strip()!r} to {path} failed ({e.strerror})") from e


def plan(sysfs: str, address: str, driver: str = VFIO_DRIVER) -> BindPlan:
    """What binding ``address`` to ``driver`` would do (its current driver and IOMMU group members), read from the sysfs
    tree at ``sysfs``; writes nothing. Raises DeviceNotFound (exit 3) for an address that is not there."""
    fn = open_function(sysfs, address)
    members: list[tuple[str, str | None]] = []
    if fn.iommu_group is not None:
        gdir = os.path.join(sysfs, "kernel", "iommu_groups", str(fn.iommu_group), "devices")
        for name in sorted(os.listdir(gdir)) if os.path.isdir(gdir) else []:
            members.append((name, read_function(devices_dir(sysfs), name).driver))
    return BindPlan(fn.address, driver, fn.driver, fn.iommu_group, members)


def bind(sysfs: str, address: str, driver: str = VFIO_DRIVER) -> BindPlan:
    """Bind ``address`` to ``driver`` via driver_override + drivers_probe; return the plan carried out."""
    p = plan(sysfs, address, driver)
    if not p.needed:
        return p
    if not os.path.isdir(os.path.join(sysfs, "bus", "pci", "drivers", driver)):
        raise EnvironmentProblem(f"the {driver} driver is not loaded", hint=f"load it: modprobe {driver}")
    with DeviceLock(p.address, backend="bind"):
        dev = os.path.join(devices_dir(sysfs), p.address)
        if p.current is not None:
            _write(os.path.join(dev, "driver", "unbind"), p.address)
        _write(os.path.join(dev, "driver_override"), driver)
        _write(os.path.join(sysfs, "bus", "pci", "drivers_probe"), p.address)
        now = open_function(sysfs, p.address).driver
    if now != driver:
        raise OperationFailed(f"{p.address} is not bound to {driver} after probing (driver: {now or 'none'})",
                              hint="check dmesg; the function may lack an iommu group (boot with intel_iommu=on)")
    return p


def release(sysfs: str, address: str) -> tuple[str | None, str | None]:
    """Undo :func:`bind`: clear the override, unbind, re-probe. Returns (driver before, driver after)."""
    fn = open_function(sysfs, address)
    with DeviceLock(fn.address, backend="bind"):
        dev = os.path.join(devices_dir(sysfs), fn.address)
        _write(os.path.join(dev, "driver_override"), "\n")
        if fn.driver is not None:
            _write(os.path.join(dev, "driver", "unbind"), fn.address)
        _write(os.path.join(sysfs, "bus", "pci", "drivers_probe"), fn.address)
        return fn.driver, open_function(sysfs, fn.address).driver
