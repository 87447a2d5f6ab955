"""``TinyhwDriver``: a board in a labgrid target, driven by tinyhw (docs/labgrid.md "Driver").

Bound to the target's ``TinyhwRemote`` (and optionally the ``TinyhwBridge``/``NetworkTinyhwBridge`` or ``TinyhwPCI``
naming the board). Activating it opens the remote device (the server takes tinyhw's device lock for the session;
the place is already acquired, as labgrid's ``RemotePlace`` requires); deactivating it closes it.

Protocols: ``MMIOProtocol`` (``read``/``write`` are aligned dword accesses to BAR ``mmio_bar``, default 5, the
AMD register BAR) and ``BootstrapProtocol`` (``load(image)`` is tinyhw's journaled, verified flash write, resumed
when its journal says an earlier one was interrupted). ``PowerProtocol`` is :class:`~tinyhw.labgrid.power.
TinyhwPowerDriver`, bound to this driver (the bridge's PCIe power toggle through this session). tinyhw's operations
are steps, so they show in labgrid's step log.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attr
from labgrid.driver import Driver
from labgrid.factory import target_factory
from labgrid.protocol import BootstrapProtocol, MMIOProtocol
from labgrid.step import step

from tinyhw.connect import Opened, open_device
from tinyhw.connect.place import PlaceResource, remote_spec
from tinyhw.errors import Refused, TinyhwError
from tinyhw.transport.base import Transport

REMOTE_FIELDS = ("host", "port", "key_file", "device", "via", "ssh_user")


@target_factory.reg_driver
@attr.s(eq=False)
class TinyhwDriver(Driver, MMIOProtocol, BootstrapProtocol):
    """tinyhw on the target's board: MMIO, flash load, probe, flash dump/verify, am boot, bench copy."""

    bindings = {
        "remote": "TinyhwRemote",
        "bridge": {"NetworkTinyhwBridge", "TinyhwBridge", None},
        "pci": {"TinyhwPCI", None},
    }
    mmio_bar = attr.ib(default=5, validator=attr.validators.instance_of(int))
    firmware_dir = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.opened: Opened | None = None

    # -- life cycle --------------------------------------------------------------------------------------------
    def device_spec(self) -> Any:
        """The ``remote:`` device the bound resource names (forwarded over ssh where labgrid says a proxy is needed)."""
        res = self.remote
        params = {k: getattr(res, k) for k in REMOTE_FIELDS}
        return remote_spec(PlaceResource(getattr(res, "name", None) or "TinyhwRemote", params,
                                         dict(getattr(res, "extra", None) or {}), bool(res.avail)))

    def on_activate(self) -> None:
        """Open the board through its server (the server takes the device lock)."""
        self.opened = open_device(self.device_spec())

    def on_deactivate(self) -> None:
        """Close the session (the server releases the device lock); a session whose connection was lost is only
        dropped (its error was raised where it was lost)."""
        opened, self.opened = self.opened, None
        if opened is not None:
            try:
                opened.close()
            except TinyhwError:
                if not opened.transport.broken:
                    raise

    @property
    def transport(self) -> Transport:
        """The open transport (the driver must be active)."""
        if self.opened is None:
            raise Refused("the tinyhw driver is not active", hint="target.activate(driver) first")
        return self.opened.transport

    # -- MMIOProtocol ----------------------------------------------------------------------------------------
    @Driver.check_active
    def read(self, address: int, size: int, count: int) -> bytes:
        """``count`` dwords (``size`` 4) from BAR ``mmio_bar`` at ``address``, little-endian."""
        _check_access(address, size, count * size)
        bar = self.transport.bar(self.mmio_bar)
        return b"".join(bar.read32(address + 4 * i).to_bytes(4, "little") for i in range(count))

    @Driver.check_active
    def write(self, address: int, size: int, data: bytes) -> None:
        """``data`` (whole dwords, ``size`` 4) to BAR ``mmio_bar`` at ``address``."""
        _check_access(address, size, len(data))
        bar = self.transport.bar(self.mmio_bar)
        for i in range(0, len(data), 4):
            bar.write32(address + i, int.from_bytes(data[i:i + 4], "little"))

    # -- BootstrapProtocol -----------------------------------------------------------------------------------
    @Driver.check_active
    @step(title="load", args=["filename"])
    def load(self, filename: str) -> dict[str, Any]:
        """Write the image ``filename`` to the flash: backup first (a new file in the current directory), only
        differing sectors, each verified, the journal kept so an interruption is finished by loading the same
        image again."""
        from tinyhw.fileio import read_input
        from tinyhw.flash import FlashDevice, Job, Writer
        from tinyhw.flash.files import MAX_IMAGE
        from tinyhw.flash.jobfiles import find_job_journal
        from tinyhw.formats.ifwi import require_flashable

        image = read_input(filename, MAX_IMAGE, "image")
        require_flashable(image)
        job = Job("write", image=image, image_path=str(Path(filename).resolve()), device=str(self.device_spec()))
        with FlashDevice(self.transport) as dev:
            _, journal = find_job_journal(job, dev.size // dev.sector_size)
            job.resume = journal is not None
            result = Writer(dev, job, confirm=lambda _plan: None, log=self.logger.info).run()
        return result.as_dict()

    # -- tinyhw's operations ---------------------------------------------------------------------------------
    @Driver.check_active
    @step(title="probe")
    def probe(self) -> dict[str, Any]:
        """What ``tinyhw probe`` reports (read-only)."""
        from tinyhw.boards.pcinames import load_names
        from tinyhw.probe import probe_device

        return probe_device(self.transport, load_names())

    @Driver.check_active
    def link_up(self) -> bool:
        """Whether the board answers config reads (vendor id not all ones)."""
        return self.transport.config_read(0, 2) not in (0xFFFF, 0)

    @Driver.check_active
    @step(title="flash_dump")
    def flash_dump(self) -> bytes:
        """The whole flash (read-only)."""
        from tinyhw.flash import FlashDevice, ops

        with FlashDevice(self.transport) as dev:
            return ops.dump(dev)

    @Driver.check_active
    @step(title="flash_verify", args=["filename"])
    def flash_verify(self, filename: str) -> dict[str, Any]:
        """Compare the flash with the image ``filename`` (``match``, ``first_mismatch``, ...; read-only)."""
        from tinyhw.fileio import read_input
        from tinyhw.flash import FlashDevice, ops
        from tinyhw.flash.files import MAX_IMAGE

        image = read_input(filename, MAX_IMAGE, "image")
        with FlashDevice(self.transport) as dev:
            return ops.verify(dev, image).as_dict()

    @Driver.check_active
    @step(title="am_boot")
    def am_boot(self, copy_engine: bool = True) -> dict[str, Any]:
        """``tinyhw am boot``: the PSP and SMU (full, partial, or reset then full), firmware from ``firmware_dir``
        (else $TINYHW_AMDGPU_FIRMWARE, else /lib/firmware/amdgpu)."""
        from tinyhw.boot.amd import AmGpu, firmware, preflight_boot, read_state, sequence

        gpu = preflight_boot(AmGpu(self.transport, warn=self.logger.warning))
        fw = firmware.load(firmware.firmware_dir(self.firmware_dir), gpu.discovery.versions())
        state = read_state(gpu)
        return sequence.boot(gpu, fw, state=state, copy_engine=copy_engine).to_doc()

    @Driver.check_active
    def boot_state(self) -> str:
        """What ``am boot`` would do now: ``partial`` once booted, else ``full`` or ``reset+full``."""
        from tinyhw.boot.amd import AmGpu, preflight_boot, read_state, sequence

        return sequence.plan(read_state(preflight_boot(AmGpu(self.transport, warn=self.logger.warning))))[0]

    @Driver.check_active
    @step(title="bench_copy", args=["sizes"])
    def bench_copy(self, sizes: list[int], directions: tuple[str, ...] = ("h2d", "d2h"), repeat: int = 3,
                   path: str = "auto") -> list[dict[str, Any]]:
        """``tinyhw bench copy``: every copy verified; the rows as ``--json`` prints them."""
        from tinyhw.bench import bench_copy

        return [r.as_dict() for r in bench_copy(self.transport, sizes, directions, repeat, path=path)]


def _check_access(address: int, size: int, length: int) -> None:
    if size != 4:
        raise Refused(f"mmio access size {size}: BAR accesses are aligned dwords (size 4)")
    if address < 0 or address % 4 or length % 4 or length <= 0:
        raise Refused(f"mmio access at 0x{address:x} of 0x{length:x} bytes is not whole aligned dwords")
