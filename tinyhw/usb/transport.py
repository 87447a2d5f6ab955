"""The ``usb`` transport: a GPU behind an ASM24 bridge, through the transport seam.

Open sequence (asm24-usb-bridge.md §2): find the bridge, check its product string, take
the device lock, detach a kernel driver, configure and claim interface 0, bring the PCIe
link up, enumerate the hierarchy and place the BARs. Register reads are single TLPs
(completion status checked); block accesses are streamed.
"""

from __future__ import annotations

from typing import Any

from tinyhw.boards.asm24 import USB_GPU_BUS
from tinyhw.errors import Refused, TransportError
from tinyhw.transport.abilities import LinkState
from tinyhw.transport.base import BarInfo, BarRegion, Identity, Transport, TransportInfo
from tinyhw.transport.clock import Clock
from tinyhw.transport.lock import DeviceLock
from tinyhw.usb.bridge import LTSSM_NAMES, LTSSM_UP, Asm24
from tinyhw.usb.device import (
    PRODUCT_PREFIXES,
    FoundBridge,
    call,
    default_backend,
    find_endpoints,
    read_string,
    select_bridge,
    usb_errors,
)
from tinyhw.usb.enumerate import Enumeration, enumerate_gpu
from tinyhw.usb.queued import QueuedBulkOut


class UsbBarRegion(BarRegion):
    """A GPU BAR behind the ASM24 bridge: dword accesses are single TLPs, blocks are streamed (0xF0 modes 1 and 2)."""

    def __init__(self, info: BarInfo, bridge: Asm24) -> None:
        super().__init__(info)
        self._br = bridge

    def read32(self, offset: int) -> int:
        """One memory read TLP at ``offset`` (4-aligned) of the BAR."""
        self.check(offset, 4)
        return self._br.mem_read32(self.info.address + offset)

    def write32(self, offset: int, value: int) -> None:
        """One posted memory write TLP of ``value`` at ``offset`` (4-aligned) of the BAR."""
        self.check(offset, 4)
        self._br.mem_write32(self.info.address + offset, value)

    def read(self, offset: int, length: int) -> bytes:
        """``length`` bytes at ``offset`` by a streamed read (dword aligned; the firmware does not check completion
        status)."""
        self.check(offset, length)
        return self._br.stream_read(self.info.address + offset, length) if length else b""

    def write(self, offset: int, data: bytes) -> None:
        """Write ``data`` at ``offset`` by a streamed write (dword aligned)."""
        self.check(offset, len(data))
        if data:
            self._br.stream_write(self.info.address + offset, bytes(data))


#: libusb speed codes (pyusb ``Device.speed``) -> the link names ``info()["usb_link"]`` reports
USB_LINKS = {1: "low", 2: "full", 3: "high", 4: "superspeed", 5: "superspeed-plus"}

class UsbTransport(Transport):
    """A GPU behind an ASM24 bridge running the custom firmware."""

    name = "usb"

    def __init__(
        self,
        target: str = "",
        *,
        backend: Any | None = None,
        clock: Clock | None = None,
        gpu_bus: int = USB_GPU_BUS,
        lock_key: str | None = None,
        lock: bool = True,
        emulated: bool = False,
        connect: bool = True,
    ) -> None:
        super().__init__(clock)
        self.emulated = emulated
        self._target = target
        self._backend = backend
        self._gpu_bus = gpu_bus
        self._lock_key = lock_key
        self._take_lock = lock  # False when the caller already holds the device's lock (an emulated board does)
        self._lock: DeviceLock | None = None
        self._dev: Any = None
        self._closed = False
        if connect:
            self.connect()

    def connect(self) -> None:
        """Open the bridge and the GPU behind it (§2 open sequence); on failure everything is released."""
        try:
            backend = self._backend if self._backend is not None else default_backend()
            found = select_bridge(self._target, backend)
            self.found: FoundBridge = found
            dev = found.device
            self.product = read_string(dev, dev.iProduct, "product") or ""
            if not self.product.startswith(PRODUCT_PREFIXES):
                raise TransportError(
                    f"{found.name} reports product {self.product!r}, not the custom firmware",
                    hint="flash the tinygrad custom firmware onto the bridge",
                )
            self.serial = read_string(dev, dev.iSerialNumber, "serial") or ""
            port_path = ".".join(str(p) for p in (getattr(dev, "port_numbers", None) or ()))
            key = self._lock_key or (
                f"usb-serial:{self.serial}" if self.serial else f"usb-port:{found.bus}-{port_path}")
            if self._take_lock:
                self._lock = DeviceLock(key, backend="usb").acquire()
            self._dev = dev
            self._configure(dev)
            self.endpoints = find_endpoints(dev)
            self.bridge = Asm24(dev, self.endpoints, self.counters, self.clock)
            self.ltssm = self.bridge.ensure_link()
            self.enumeration: Enumeration = enumerate_gpu(self.bridge, self._gpu_bus)
        except BaseException:
            self.close()
            raise

    @staticmethod
    def _configure(dev: Any) -> None:
        """Detach a kernel driver (then reset), set configuration 1, claim interface 0, alt 0 (§2 steps 4-5)."""
        import usb.util

        with usb_errors("checking for a kernel driver"):
            try:
                active = dev.is_kernel_driver_active(0)
            except NotImplementedError:
                active = False
        if active:
            call("detaching the kernel driver", dev.detach_kernel_driver, 0)
            call("resetting the bridge", dev.reset)
        call("setting the configuration", dev.set_configuration, 1)
        call("claiming interface 0", usb.util.claim_interface, dev, 0)
        call("selecting alternate setting 0", dev.set_interface_altsetting, 0, 0)

    # -- the seam -------------------------------------------------------------------------------
    def _gpu(self) -> tuple[int, int, int]:
        return (self.enumeration.gpu_bus, 0, 0)

    def config_read(self, offset: int, size: int = 4) -> int:
        """Read ``size`` (1, 2, 4) bytes of the GPU's config space at ``offset`` (one config TLP)."""
        return self.bridge.config_read(*self._gpu(), offset, size)

    def config_write(self, offset: int, size: int, value: int) -> None:
        """Write ``size`` (1, 2, 4) bytes of ``value`` at ``offset`` of the GPU's config space (one config TLP)."""
        self.bridge.config_write(*self._gpu(), offset, size, value)

    def bars(self) -> list[BarInfo]:
        """The GPU's BARs as placed during enumeration."""
        return list(self.enumeration.bars)

    def _make_region(self, info: BarInfo) -> BarRegion:
        return UsbBarRegion(info, self.bridge)

    def identity(self) -> Identity:
        """The GPU's ids from its config space, and its address behind the bridge."""
        ids = self.config_read(0x00)
        rev_class = self.config_read(0x08)
        sub = self.config_read(0x2C)
        bus = self.enumeration.gpu_bus
        return Identity(
            vendor_id=ids & 0xFFFF,
            device_id=ids >> 16,
            revision=rev_class & 0xFF,
            class_code=rev_class >> 8,
            subsystem_vendor_id=sub & 0xFFFF,
            subsystem_id=sub >> 16,
            location=f"{self.found.name} {bus:02x}:00.0",
        )

    def info(self) -> TransportInfo:
        """``probe`` facts: the bridge's name, USB ids, product string, link speed, GPU bus, bridges on the way and
        BAR0's Resizable BAR size."""
        return TransportInfo(
            transport="usb",
            emulated=self.emulated,
            extra={
                "bridge": self.found.name,
                "usb_id": f"{self.found.vendor_id:04x}:{self.found.product_id:04x}",
                "product": self.product,
                "serial": self.serial,
                "usb_speed": "superspeed" if self.endpoints.superspeed else "high-speed",
                # the link the host negotiated (libusb's speed code): 5 and 10 Gbps SuperSpeed differ here only
                "usb_link": USB_LINKS.get(getattr(self._dev, "speed", None) or 0),
                "ltssm": self.ltssm,
                "link_state": LTSSM_NAMES.get(self.ltssm, "unknown"),
                "gpu_bus": self.enumeration.gpu_bus,
                "bridges": [f"{h.bus:02x}:00.0 {h.vendor_id:04x}:{h.device_id:04x}" for h in self.enumeration.hops],
                "rebar_size": self.enumeration.rebar_size,
            },
        )

    # -- the bridge-SRAM ability (tinyhw.transport.abilities.BridgeSram; asm24-usb-bridge.md §4.2, §4.5) ------------
    def arm_host_to_sram(self, first_slot: int, length: int) -> None:
        """Arm the 0xF2 engine: the next ``length`` bytes of bulk OUT land in the SRAM from ``first_slot`` on."""
        self.bridge.sram_write_arm(first_slot, length)

    def write_sram(self, slot: int, data: bytes | bytearray | memoryview) -> None:
        """Arm and send ``data`` into the SRAM from ``slot`` on (one bulk OUT, padded to 512 bytes)."""
        self.bridge.sram_write(slot, data)

    def open_sram_queue(self, depth: int, timeout: float, what: str) -> QueuedBulkOut:
        """Queued bulk OUT transfers on the data endpoint, up to ``depth`` in flight (:mod:`tinyhw.usb.queued`)."""
        return self.bridge.bulk_out_queue(depth, timeout, what)

    def sram_queue_kind(self) -> str:
        """The queue :meth:`open_sram_queue` opens here: "libusb-async", "emulated" or "worker"."""
        return self.bridge.bulk_queue_kind()

    def arm_sram_to_host(self, length: int) -> None:
        """Arm an SRAM -> host transfer of ``length`` bytes from slot 0 (released by a GPU write into 0x822000)."""
        self.bridge.sram_read_arm(length)

    def collect_sram(self, length: int, into: Any = None) -> bytes | int:
        """The bulk IN of an armed SRAM -> host transfer: its bytes, or with ``into`` (a writable buffer) the count
        of bytes put there."""
        return self.bridge.sram_read_collect(length, into)

    def read_xdata(self, address: int, length: int) -> bytes:
        """``length`` bytes of the bridge's XDATA from ``address`` on."""
        return self.bridge.xdata_read(address, length)

    def write_xdata(self, address: int, value: int) -> None:
        """One byte of the bridge's XDATA."""
        self.bridge.xdata_write(address, value)

    # -- the PCIe power ability (tinyhw.transport.abilities.PciePower; asm24-usb-bridge.md §4.6) --------------------
    def power_on(self, timeout: float = 5.0) -> LinkState:
        """Power the PCIe side on and train the link (nothing sent when it is up and was not powered off), then
        enumerate the GPU again: PERST# reset it, so its bus numbers and BARs are placed anew."""
        _check_wait("power on", timeout)
        was_off = self.bridge.pcie_off
        state = self.bridge.ltssm()
        if state != LTSSM_UP or was_off:
            self.ltssm = self.bridge.ensure_link(wait=timeout)
            self.enumeration = enumerate_gpu(self.bridge, self._gpu_bus)
            self._bar_regions.clear()  # placement is deterministic; new region objects carry the new BarInfo
        return self.link_state()

    def power_off(self, timeout: float = 2.0) -> LinkState:
        """Power the PCIe side off (PERST#, rails dropped: the GPU loses its state) and check the link left L0; until
        :meth:`power_on`, every config and BAR access raises LinkDown."""
        _check_wait("power off", timeout)
        self.ltssm = self.bridge.power_off(wait=timeout)
        return self.link_state()

    def link_state(self) -> LinkState:
        """The LTSSM register now (one XDATA read) and whether the PCIe side is left powered."""
        state = self.bridge.ltssm()
        return LinkState(ltssm=state, up=state == LTSSM_UP and not self.bridge.pcie_off,
                         powered=not self.bridge.pcie_off)

    def tap_transfers(self, tap: Any) -> None:
        """Report every vendor request and bulk transfer to ``tap`` (the TransferTap ability; None: stop): its
        ``control(request_type, request, value, index, data)`` and ``bulk(endpoint, length, data)``."""
        self.bridge.tap = tap

    def close(self) -> None:
        """Release the pyusb device's resources and the device lock (idempotent; never masks an earlier error)."""
        if self._closed:
            return
        self._closed = True
        if self._dev is not None:
            try:
                import usb.util

                usb.util.dispose_resources(self._dev)
            except Exception:  # closing must never mask the original error
                pass
        if self._lock is not None:
            self._lock.release()


#: the longest power on/off wait accepted, seconds (the firmware's own link wait is about 2 s, §4.6)
MAX_POWER_WAIT = 60.0


def _check_wait(what: str, timeout: float) -> None:
    if not (isinstance(timeout, (int, float)) and 0 < timeout <= MAX_POWER_WAIT):
        raise Refused(f"the {what} wait must be more than 0 and at most {MAX_POWER_WAIT:g} seconds (got {timeout!r})")
