"""tinyhw.labgrid's resources and the driver's MMIO checks, without a farm (docs/labgrid.md "Resources").

Skipped only when labgrid is not installed (the test extra installs it).
"""

from __future__ import annotations

import pytest

pytest.importorskip("labgrid", reason="tinyhw.labgrid needs labgrid (pip install -e '.[test]')")

from labgrid import Target

from tinyhw.errors import Refused
from tinyhw.labgrid import TinyhwBridge, TinyhwPCI, TinyhwRemote
from tinyhw.labgrid.driver import _check_access


class FakeUdevDevice:
    """What TinyhwBridge.filter_match reads of a pyudev device: its properties."""

    def __init__(self, vendor: str, model: str) -> None:
        self.properties = {"ID_VENDOR_ID": vendor, "ID_MODEL_ID": model}


def test_the_bridge_matches_by_serial_or_port_path_and_only_the_custom_firmware_ids() -> None:
    bridge = TinyhwBridge(None, None, serial="TINYHW-0001", port_path="1-2.3")
    assert bridge.match == {"DEVTYPE": "usb_device", "ID_SERIAL_SHORT": "TINYHW-0001", "sys_name": "1-2.3",
                            "SUBSYSTEM": "usb"}
    assert bridge.filter_match(FakeUdevDevice("add1", "0001")) and bridge.filter_match(FakeUdevDevice("3801", "0001"))
    assert not bridge.filter_match(FakeUdevDevice("174c", "2463"))  # the stock firmware: not tinyhw's
    assert not bridge.filter_match(FakeUdevDevice("zz", "0001"))
    pinned = TinyhwBridge(None, None, match={"ID_VENDOR_ID": "174c"})  # the user's own match rules
    assert pinned.filter_match(FakeUdevDevice("174c", "2463"))
    assert bridge.serial_number is None  # nothing matched yet


def test_the_remote_resource_holds_a_key_path_and_checks_its_fields() -> None:
    target = Target("resources")
    remote = TinyhwRemote(target, "board", host="127.0.0.1", port=7788, key_file="/keys/b.key", device="usb:0")
    assert (remote.via, remote.key_file) == ("tcp", "/keys/b.key")
    for bad in ({"port": 0}, {"port": 70000}, {"via": "telnet"}, {"key_file": 7}):
        with pytest.raises((ValueError, TypeError)):
            TinyhwRemote(Target("bad"), "board", host="127.0.0.1", **bad)


def test_a_pci_function_is_named_by_its_address() -> None:
    assert TinyhwPCI(Target("pci"), "gpu", address="0000:03:00.0").address == "0000:03:00.0"
    with pytest.raises(ValueError, match="not a PCI address"):
        TinyhwPCI(Target("pci2"), "gpu", address="03:00")


def test_mmio_accesses_are_aligned_dwords() -> None:
    _check_access(0x10, 4, 8)
    for address, size, length in ((0x10, 2, 2), (0x11, 4, 4), (0x10, 4, 6), (-4, 4, 4), (0, 4, 0)):
        with pytest.raises(Refused):
            _check_access(address, size, length)
