"""Optional abilities are checked explicitly, with a clear error when a transport lacks them."""

from __future__ import annotations

import pytest

from tinyhw.connect import open_device
from tinyhw.errors import NotAvailableYet
from tinyhw.pci.sysfs import SysfsTransport
from tinyhw.pci.vfio import VfioTransport
from tinyhw.transport.abilities import DmaBuffers, Interrupts, Resettable
from tinyhw.transport.base import require
from tinyhw.transport.devstr import parse_device


def test_native_transports_declare_their_abilities() -> None:
    assert issubclass(VfioTransport, DmaBuffers) and issubclass(VfioTransport, Interrupts)
    assert issubclass(VfioTransport, Resettable) and issubclass(SysfsTransport, Resettable)
    assert not issubclass(SysfsTransport, DmaBuffers)


@pytest.mark.parametrize("board", ["mock:navi31-usb"])  # mock:navi31 has host dma buffers (tests/test_dmacopy.py)
def test_missing_ability_is_a_clear_error(board: str) -> None:
    opened = open_device(parse_device(board))
    try:
        with pytest.raises(NotAvailableYet, match="cannot allocate dma buffers"):
            require(opened.transport, DmaBuffers, "allocate dma buffers")
    finally:
        opened.close()
