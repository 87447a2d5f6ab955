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
from tinyhw.regs.plan import Assignment, RegisterWrite, WritePlan, Written

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
        done = self.apply(WritePlan(self.asic, [RegisterWrite(reg, [Assignment(reg, fld, value)])]))
        return done[0].old, done[0].new

    def update(self, name: str | Register, **fields: int) -> tuple[int, int]:
        """Read-modify-write of several fields of one register (keyword = field name); return (old, new)."""
        reg, fld = self._target(name)
        if fld is not None:
            raise Refused(f"update() takes a register name, not the field {reg.name}.{fld.name}")
        done = self.apply(WritePlan.fields(self.asic, reg, **fields))
        return done[0].old, done[0].new

    def apply(self, plan: WritePlan) -> list[Written]:
        """Carry out a write plan: per register one read, its assignments applied in order, one write."""
        for step in plan.steps:  # every register placed inside the bar before the first access
            self._offset(step.register)
        done = []
        for step in plan.steps:
            offset = self._offset(step.register)
            old = self.bar.read32(offset)
            new = step.new_value(old)
            self.bar.write32(offset, new)
            done.append(Written(step.register, old, new))
        return done
