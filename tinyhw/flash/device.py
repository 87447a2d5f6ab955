"""One flash session on a device: the ROM_SW engine opened once, the chip identified first.

Implements the session rule of specs/navi31-spi-flash.md §i.2 step 1 (set up once, restored on exit,
also on errors and Ctrl-C) and §d.4 (identify before anything else). The feature is handed a
:class:`~tinyhw.transport.Transport`; it never constructs one.
"""

from __future__ import annotations

from types import TracebackType

from tinyhw.boards import by_pci
from tinyhw.boards.spec import BoardSpec
from tinyhw.errors import Refused
from tinyhw.flash.chip import Gd25
from tinyhw.flash.romsw import DEFAULT_PRESCALE, RomSw
from tinyhw.regs import Asic, asic_for_device
from tinyhw.transport.base import Identity, Transport

#: what each engine a flash feature needs is called in a refusal
ENGINES = {"romsw_flash": "smuio rom_sw engine that reaches its spi flash",
           "psp_update": "psp early-boot flash update mailbox"}


def require_flash(transport: Transport, engine: str = "romsw_flash") -> tuple[Asic, Identity, BoardSpec]:
    """The register database, identity and description of the device's board, asked whether it has ``engine``
    (``romsw_flash`` or ``psp_update``: :class:`tinyhw.boards.spec.Engines`); exit 2 for a board tinyhw does not
    describe or whose description lacks it."""
    ident = transport.identity()
    ids = f"{ident.vendor_id:04x}:{ident.device_id:04x}"
    spec = by_pci(ident.vendor_id, ident.device_id)
    if spec is None or not getattr(spec.engines, engine):
        from tinyhw.boards.registry import specs

        able = ", ".join(f"{s.name} ({s.pci_id})" for s in specs() if getattr(s.engines, engine))
        what = "tinyhw knows no board" if spec is None else f"the {spec.name} board has no {ENGINES[engine]}"
        raise Refused(f"device {ids} at {ident.location}: {what}; tinyhw flash supports {able} only")
    return asic_for_device(ident.vendor_id, ident.device_id), ident, spec


class FlashDevice:
    """``with FlashDevice(transport) as dev:`` gives ``dev.chip`` (identified) and ``dev.sw`` (open)."""

    def __init__(self, transport: Transport, *, chain: bool = True, prescale: int = DEFAULT_PRESCALE,
                 merged: bool = True) -> None:
        asic, ident, spec = require_flash(transport)
        self.transport = transport
        self.location = ident.location
        self.spec = spec
        self.sw = RomSw(transport, asic, chain=chain, prescale=prescale, merged=merged)
        self.chip = Gd25(self.sw, board=spec)

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
