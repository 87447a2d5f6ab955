"""labgrid resources for what tinyhw drives (docs/labgrid.md "Resources").

A resource only says where something is. ``TinyhwRemote`` is how a client reaches a board: a ``tinyhw serve remote``
on the exporter host. The exporter publishes it unchanged (labgrid passes unknown classes through), so the exporter
host needs no tinyhw code for it; clients need this module. The key file is a path on the client, never the key.
``TinyhwBridge`` (the ASM24 bridge with the custom firmware, matched by udev on the exporter host) and ``TinyhwPCI``
(a native PCI function) say which board a place holds and whether it is present.
"""

from __future__ import annotations

import re

import attr
from labgrid.factory import target_factory
from labgrid.resource import Resource
from labgrid.resource.remote import RemoteUSBResource
from labgrid.resource.udev import USBResource

from tinyhw.usb.device import BRIDGE_IDS

_BDF = re.compile(r"(?:[0-9a-f]{4,8}:)?[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")


def _port(_instance: object, _attribute: object, value: int) -> None:
    if not isinstance(value, int) or not 0 < value < 65536:
        raise ValueError(f"port {value!r} is not a TCP port 1..65535")


@target_factory.reg_resource
@attr.s(eq=False)
class TinyhwRemote(Resource):
    """A ``tinyhw serve remote`` serving one board on the exporter host.

    ``via: tcp`` (default): the authenticated TCP protocol at ``host:port`` with the key in ``key_file`` (a path on
    the client; tinyhw refuses plain TCP off the machine, so a farm across machines runs the exporter with ``-i``
    or sets ``LG_PROXY``, and labgrid forwards the port over ssh). ``via: ssh``: ``remote:ssh://[ssh_user@]host/
    DEVICE`` runs the stdio server there. ``device`` is the device string the server serves.
    """

    host = attr.ib(validator=attr.validators.instance_of(str))
    port = attr.ib(default=7788, validator=_port)
    key_file = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
    device = attr.ib(default="", validator=attr.validators.instance_of(str))
    via = attr.ib(default="tcp", validator=attr.validators.in_(("tcp", "ssh")))
    ssh_user = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))


@target_factory.reg_resource
@attr.s(eq=False)
class TinyhwPCI(Resource):
    """A native PCI function on the exporter host, by address (``0000:03:00.0``)."""

    address = attr.ib(validator=attr.validators.instance_of(str))

    def __attrs_post_init__(self) -> None:
        if not _BDF.fullmatch(self.address.lower()):
            raise ValueError(f"{self.address!r} is not a PCI address like 0000:03:00.0")
        super().__attrs_post_init__()


@target_factory.reg_resource
@attr.s(eq=False)
class TinyhwBridge(USBResource):
    """The ASM24 USB-to-PCIe bridge with the custom firmware, on the exporter host.

    Matched by udev like any labgrid USB resource (``match``), plus the shortcuts ``serial`` (``ID_SERIAL_SHORT``)
    and ``port_path`` (the usb device's sysfs name, ``1-2.3``); only the custom firmware's vendor/product pairs
    match unless ``match`` names ``ID_VENDOR_ID`` itself.
    """

    serial = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))
    port_path = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))

    def __attrs_post_init__(self) -> None:
        self.match.setdefault("DEVTYPE", "usb_device")
        if self.serial:
            self.match["ID_SERIAL_SHORT"] = self.serial
        if self.port_path:
            self.match["sys_name"] = self.port_path
        super().__attrs_post_init__()

    def filter_match(self, device: object) -> bool:
        """Only the custom firmware's ids, unless the match pins a vendor id."""
        if "ID_VENDOR_ID" in self.match:
            return True
        props = getattr(device, "properties", {})
        try:
            ids = (int(props.get("ID_VENDOR_ID", ""), 16), int(props.get("ID_MODEL_ID", ""), 16))
        except ValueError:
            return False
        return ids in BRIDGE_IDS

    @property
    def serial_number(self) -> str | None:
        """The matched bridge's serial (udev ``ID_SERIAL_SHORT``), None before a match."""
        return self.device.properties.get("ID_SERIAL_SHORT") if self.device is not None else None


@target_factory.reg_resource
@attr.s(eq=False)
class NetworkTinyhwBridge(RemoteUSBResource):
    """A ``TinyhwBridge`` as clients see it (published by :mod:`tinyhw.labgrid.exporter`): host, bus and device
    numbers, port path, ids and serial."""

    serial = attr.ib(default=None, validator=attr.validators.optional(attr.validators.instance_of(str)))

    def __attrs_post_init__(self) -> None:
        self.timeout = 10.0
        super().__attrs_post_init__()
