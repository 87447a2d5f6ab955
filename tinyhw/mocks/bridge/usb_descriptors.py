"""USB descriptors of the emulated ASM24 bridge (custom tinygrad firmware), as bytes and as objects.

Implements specs/asm24-usb-bridge.md §2 (identity: VID:PID, strings, bcdUSB, bMaxPacketSize0,
self-powered single configuration, vendor-class interface 0, BOS with USB 2.0 extension and
SuperSpeed capability) and §3 (endpoints and packet sizes), for SuperSpeed and High-Speed.

The bytes are the single source of truth: the device core answers GET_DESCRIPTOR with them
(and a FunctionFS front end can write them), and the attribute objects that pyusb's ``usb.core``
reads (``bLength`` ... ``extra_descriptors``, plus ``bus``/``address``/``port_numbers``/``speed``
of the device) are parsed back from the same bytes.

Layouts: SuperSpeed alt 0 = bulk 0x81 IN and 0x02 OUT (1024 B, burst 16); SuperSpeed alt 1 = the
UAS-shaped layout with 0x81, 0x02, 0x83, 0x04 and streams; High-Speed = one alt setting with
the four bulk endpoints at 512 B. The interface stays vendor class 0xFF/0xFF/0xFF in every
setting (§2 names only that class; the stock firmware's UAS class codes are not reproduced).
``bMaxPacketSize0`` holds the raw descriptor value: 9 (an exponent, 512 bytes) at SuperSpeed,
64 at High-Speed; :func:`ep0_max_packet` gives the byte count.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

VENDOR_ID = 0xADD1
ALT_VENDOR_ID = 0x3801  # second accepted vendor id (§2)
PRODUCT_ID = 0x0001
MANUFACTURER = "tiny"
PRODUCT = "custom v0.1"
BCD_DEVICE = 0x0001
LANGID_EN_US = 0x0409

EP_IN, EP_OUT = 0x81, 0x02
EP_UAS_STATUS, EP_UAS_COMMAND = 0x83, 0x04

DESC_DEVICE, DESC_CONFIG, DESC_STRING, DESC_INTERFACE, DESC_ENDPOINT = 1, 2, 3, 4, 5
DESC_BOS, DESC_DEVICE_CAP, DESC_SS_EP_COMPANION = 0x0F, 0x10, 0x30

#: libusb speed codes, as pyusb reports them in ``Device.speed``.
SPEED_HIGH = 3
SPEED_SUPER = 4
#: SuperSpeedPlus (10 Gbps, USB 3.2 Gen 2): the port an emulated SuperSpeed bridge sits on, as the spec's measured
#: figures were taken on one (specs/asm24-usb-bridge.md §1: 0xF2 ~700 MB/s "on 10 Gbps USB3").
SPEED_SUPER_PLUS = 5


def bulk_max_packet(speed: str) -> int:
    """Bulk endpoint max packet size: 1024 B at SuperSpeed, 512 B at High-Speed (§3); 64 B at Full-Speed
    (the USB 2.0 limit, for a gadget's full-speed descriptor set)."""
    return {"ss": 1024, "hs": 512, "fs": 64}[speed]


def ep0_max_packet(speed: str) -> int:
    """Control endpoint max packet size in bytes: 512 at SuperSpeed, 64 at High-Speed (§2)."""
    return 512 if speed == "ss" else 64


def device_descriptor(speed: str, vendor_id: int = VENDOR_ID, product_id: int = PRODUCT_ID) -> bytes:
    """The 18-byte device descriptor: USB 3.2 with a 512-byte EP0 (``ss``) or USB 2.0 with 64 bytes, the given ids,
    string indexes 1-3, one configuration."""
    bcd_usb, mps0 = (0x0320, 9) if speed == "ss" else (0x0200, 64)
    return struct.pack("<BBHBBBBHHHBBBB", 18, DESC_DEVICE, bcd_usb, 0, 0, 0, mps0, vendor_id, product_id,
                       BCD_DEVICE, 1, 2, 3, 1)


def _endpoint(speed: str, address: int, streams: int) -> bytes:
    ep = struct.pack("<BBBBHB", 7, DESC_ENDPOINT, address, 0x02, bulk_max_packet(speed), 0)
    if speed == "ss":  # SuperSpeed endpoint companion: burst 16, 2**streams bulk streams
        ep += struct.pack("<BBBBH", 6, DESC_SS_EP_COMPANION, 15, streams, 0)
    return ep


def _interface(alt: int, endpoints: list[bytes]) -> bytes:
    return struct.pack("<BBBBBBBBB", 9, DESC_INTERFACE, 0, alt, len(endpoints), 0xFF, 0xFF, 0xFF, 0) + b"".join(
        endpoints)


def bulk_interface(speed: str) -> bytes:
    """Interface 0 alt 0 with the two bulk endpoints the custom firmware's host uses (0x81 IN,
    0x02 OUT, §3) at ``speed``'s packet size ("fs": 64 B): alt 0 of the SuperSpeed layout, and
    what a FunctionFS front end announces for High-Speed and Full-Speed."""
    return _interface(0, [_endpoint(speed, EP_IN, 0), _endpoint(speed, EP_OUT, 0)])


def configuration_descriptor(speed: str) -> bytes:
    """The full configuration descriptor (configuration 1, self-powered, interface 0)."""
    if speed == "ss":
        body = bulk_interface(speed)
        body += _interface(1, [_endpoint(speed, EP_IN, 5), _endpoint(speed, EP_OUT, 5),
                               _endpoint(speed, EP_UAS_STATUS, 5), _endpoint(speed, EP_UAS_COMMAND, 0)])
    else:
        body = _interface(0, [_endpoint(speed, a, 0) for a in (EP_IN, EP_OUT, EP_UAS_STATUS, EP_UAS_COMMAND)])
    return struct.pack("<BBHBBBBB", 9, DESC_CONFIG, 9 + len(body), 1, 1, 0, 0xC0, 0) + body


def bos_descriptor() -> bytes:
    """BOS: USB 2.0 extension (LPM) and SuperSpeed device capability (speeds mask 0x000E)."""
    usb2 = struct.pack("<BBBI", 7, DESC_DEVICE_CAP, 0x02, 0x00000002)
    ss = struct.pack("<BBBBHBBH", 10, DESC_DEVICE_CAP, 0x03, 0x00, 0x000E, 0x01, 0x0A, 0x07FF)
    return struct.pack("<BBHB", 5, DESC_BOS, 5 + len(usb2) + len(ss), 2) + usb2 + ss


def string_descriptor(text: str) -> bytes:
    """A string descriptor: length, type, then ``text`` in UTF-16LE."""
    raw = text.encode("utf-16-le")
    return bytes([2 + len(raw), DESC_STRING]) + raw


@dataclass(frozen=True)
class UsbIdentity:
    """Everything the bridge says about itself on the bus, for one link speed."""

    speed: str = "ss"
    serial: str = "ffffffff"
    vendor_id: int = VENDOR_ID
    product_id: int = PRODUCT_ID

    @property
    def strings(self) -> dict[int, str]:
        """String index -> text: manufacturer, product and this bridge's serial number."""
        return {1: MANUFACTURER, 2: PRODUCT, 3: self.serial}

    def device(self) -> bytes:
        """The device descriptor for this speed and these ids."""
        return device_descriptor(self.speed, self.vendor_id, self.product_id)

    def configuration(self) -> bytes:
        """The full configuration descriptor for this speed."""
        return configuration_descriptor(self.speed)

    def bos(self) -> bytes:
        """The BOS descriptor (USB 2.0 extension and SuperSpeed capability)."""
        return bos_descriptor()

    def string(self, index: int) -> bytes | None:
        """String descriptor ``index`` (0 = the LANGID list); None for an index the device lacks."""
        if index == 0:
            return struct.pack("<BBH", 4, DESC_STRING, LANGID_EN_US)
        text = self.strings.get(index)
        return None if text is None else string_descriptor(text)

    def descriptor(self, dtype: int, index: int) -> bytes | None:
        """What GET_DESCRIPTOR(type, index) answers, or None for a descriptor the firmware lacks."""
        if dtype == DESC_DEVICE and index == 0:
            return self.device()
        if dtype == DESC_CONFIG and index == 0:
            return self.configuration()
        if dtype == DESC_BOS and index == 0:
            return self.bos()
        if dtype == DESC_STRING:
            return self.string(index)
        return None


# -- attribute objects (what pyusb's usb.core reads from a backend) --------------------------------

@dataclass
class EndpointDesc:
    """An endpoint descriptor's fields as pyusb's backends expose them (plus its class-specific extra bytes)."""

    bLength: int
    bDescriptorType: int
    bEndpointAddress: int
    bmAttributes: int
    wMaxPacketSize: int
    bInterval: int
    bRefresh: int = 0
    bSynchAddress: int = 0
    extra_descriptors: list[int] = field(default_factory=list)


@dataclass
class InterfaceDesc:
    """An interface descriptor's fields, with its parsed endpoints, as pyusb's backends expose them."""

    bLength: int
    bDescriptorType: int
    bInterfaceNumber: int
    bAlternateSetting: int
    bNumEndpoints: int
    bInterfaceClass: int
    bInterfaceSubClass: int
    bInterfaceProtocol: int
    iInterface: int
    extra_descriptors: list[int] = field(default_factory=list)
    endpoints: list[EndpointDesc] = field(default_factory=list)


@dataclass
class ConfigDesc:
    """A configuration descriptor's fields, with its interfaces (each a list of alternate settings), as pyusb's backends
    expose them."""

    bLength: int
    bDescriptorType: int
    wTotalLength: int
    bNumInterfaces: int
    bConfigurationValue: int
    iConfiguration: int
    bmAttributes: int
    bMaxPower: int
    extra_descriptors: list[int] = field(default_factory=list)
    #: interfaces[interface index][alternate setting index]
    interfaces: list[list[InterfaceDesc]] = field(default_factory=list)


@dataclass
class DeviceDesc:
    """A device descriptor's fields as pyusb's backends expose them, with the bus, address, port path and speed code of
    where the device sits."""

    bLength: int
    bDescriptorType: int
    bcdUSB: int
    bDeviceClass: int
    bDeviceSubClass: int
    bDeviceProtocol: int
    bMaxPacketSize0: int
    idVendor: int
    idProduct: int
    bcdDevice: int
    iManufacturer: int
    iProduct: int
    iSerialNumber: int
    bNumConfigurations: int
    bus: int | None = None
    address: int | None = None
    port_number: int | None = None
    port_numbers: tuple[int, ...] | None = None
    speed: int | None = None


def parse_device(data: bytes, *, bus: int | None = None, address: int | None = None,
                 port_numbers: tuple[int, ...] | None = None, speed: int | None = None) -> DeviceDesc:
    """Device descriptor bytes -> attribute object, with where the device sits and its speed code."""
    return DeviceDesc(*struct.unpack("<BBHBBBBHHHBBBB", data[:18]), bus=bus, address=address,
                      port_number=port_numbers[-1] if port_numbers else None, port_numbers=port_numbers,
                      speed=speed)


def parse_configuration(data: bytes) -> ConfigDesc:
    """Full configuration descriptor bytes -> nested attribute objects (like libusb's parser)."""
    cfg = ConfigDesc(*struct.unpack("<BBHBBBBB", data[:9]))
    cfg.interfaces = [[] for _ in range(cfg.bNumInterfaces)]
    pos = cfg.bLength
    intf: InterfaceDesc | None = None
    ep: EndpointDesc | None = None
    while pos + 2 <= len(data):
        length, dtype = data[pos], data[pos + 1]
        raw = data[pos : pos + length]
        if dtype == DESC_INTERFACE:
            intf = InterfaceDesc(*struct.unpack("<BBBBBBBBB", raw))
            cfg.interfaces[intf.bInterfaceNumber].append(intf)
            ep = None
        elif dtype == DESC_ENDPOINT and intf is not None:
            ep = EndpointDesc(*struct.unpack("<BBBBHB", raw))
            intf.endpoints.append(ep)
        else:  # class/companion descriptors belong to the last endpoint, interface or configuration
            owner = ep or intf or cfg
            owner.extra_descriptors.extend(raw)
        pos += length
    return cfg
