"""Registers by name on a device: reads, writes and read-modify-writes through the register BAR.

``Mmio(transport, asic("navi31")).update("smuio.ROM_SW_CNTL", DATA_SIZE=4, COMMAND_SIZE=3)``
is one read and one write of BAR5 at 0x5A3A0. Features are handed a transport and use this
instead of typing offsets by hand (ARCHITECTURE.md, "Code").
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tinyhw.errors import Refused
from tinyhw.regs.asic import Asic
from tinyhw.regs.model import Field, Register

if TYPE_CHECKING:
    from tinyhw.transport.base import BarRegion, Transport


class Mmio:
    """One device's registers, addressed by ``block.REGISTER`` / ``block.REGISTER.FIELD`` names."""

    def __init__(self, transport: Transport, asic: Asic) -> None:
        self.asic = asic
        self.bar: BarRegion = transport.bar(asic.bar)

    def _target(self, name: str | Register) -> tuple[Register, Field | None]:
        if isinstance(name, Register):
            return name, None
        return self.asic.resolve(name)

    def _offset(self, reg: Register) -> int:
        if reg.offset is None:
            raise Refused(f"{reg.name} has no offset on {self.asic.name} (segment {reg.segment} base unknown)")
        if reg.offset + 4 > self.bar.size:
            raise Refused(
                f"{reg.name} at 0x{reg.offset:x} is outside bar{self.asic.bar} (size 0x{self.bar.size:x})",
                hint="registers past the bar need the indirect index/data window, which tinyhw does not use yet",
            )
        return reg.offset

    def read(self, name: str | Register) -> int:
        """The register's value, or the field's value for a ``block.REGISTER.FIELD`` name."""
        reg, fld = self._target(name)
        value = self.bar.read32(self._offset(reg))
        return value if fld is None else fld.extract(value)

    def write(self, name: str | Register, value: int) -> tuple[int | None, int]:
        """Write a register (no read), or one field (read-modify-write); return (old or None, new)."""
        reg, fld = self._target(name)
        if fld is None:
            if not 0 <= value <= 0xFFFFFFFF:
                raise Refused(f"value 0x{value:x} does not fit the 32-bit register {reg.name}")
            self.bar.write32(self._offset(reg), value)
            return None, value
        old = self.bar.read32(self._offset(reg))
        new = fld.insert(old, value)
        self.bar.write32(self._offset(reg), new)
        return old, new

    def update(self, name: str | Register, **fields: int) -> tuple[int, int]:
        """Read-modify-write of several fields of one register (keyword = field name); return (old, new)."""
        reg, fld = self._target(name)
        if fld is not None:
            raise Refused(f"update() takes a register name, not the field {reg.name}.{fld.name}")
        old = self.bar.read32(self._offset(reg))
        new = reg.encode(old, **fields)
        self.bar.write32(self._offset(reg), new)
        return old, new
