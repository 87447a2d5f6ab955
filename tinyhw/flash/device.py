"""One flash session on a device: the ROM_SW engine opened once, the chip identified first.

Implements the session rule of specs/navi31-spi-flash.md §i.2 step 1 (set up once, restored on exit,
also on errors and Ctrl-C) and §d.4 (identify before anything else). The feature is handed a
:class:`~tinyhw.transport.Transport`; it never constructs one.
"""

from __future__ import annotations

from types import TracebackType

from tinyhw.boards.navi31 import NAVI31
from tinyhw.errors import Refused
from tinyhw.flash.chip import Gd25
from tinyhw.flash.romsw import DEFAULT_PRESCALE, RomSw
from tinyhw.regs import Asic, asic_for_device
from tinyhw.transport.base import Identity, Transport


def require_navi31(transport: Transport) -> tuple[Asic, Identity]:
    """Refuse (exit 2) a device that is not a Navi31; return its register database and identity."""
    ident = transport.identity()
    fn = NAVI31.function
    if (ident.vendor_id, ident.device_id) != (fn.vendor_id, fn.device_id):
        raise Refused(f"device {ident.vendor_id:04x}:{ident.device_id:04x} at {ident.location} is not a navi31 "
                      f"({fn.vendor_id:04x}:{fn.device_id:04x}); tinyhw flash supports navi31 boards only")
    return asic_for_device(ident.vendor_id, ident.device_id), ident


class FlashDevice:
    """``with FlashDevice(transport) as dev:`` gives ``dev.chip`` (identified) and ``dev.sw`` (open)."""

    def __init__(self, transport: Transport, *, chain: bool = True, prescale: int = DEFAULT_PRESCALE,
                 merged: bool = True) -> None:
        asic, ident = require_navi31(transport)
        self.transport = transport
        self.location = ident.location
        self.sw = RomSw(transport, asic, chain=chain, prescale=prescale, merged=merged)
        self.chip = Gd25(self.sw, NAVI31)

    @property
    def size(self) -> int:
        """The flash size in bytes."""
        return self.chip.size

    @property
    def sector_size(self) -> int:
        """The erase sector size in bytes (4 KiB)."""
        return self.chip.sector_size

    def __enter__(self) -> FlashDevice:
        self.sw.open()
        try:
            self.chip.identify()
        except BaseException as e:
            self.sw.__exit__(type(e), e, e.__traceback__)
            raise
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None) -> None:
        self.sw.__exit__(et, e, tb)
