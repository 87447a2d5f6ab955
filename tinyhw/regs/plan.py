"""Register write plans: what ``NAME=VALUE`` assignments will do, checked before any access.

A plan groups the assignments by register, in the order first named: each register is read
once, every assignment to it applied in order (a whole-register value replaces all bits, a
field value only its bits), then it is written once. Building the plan resolves every name
and checks every value against its register or field, so a bad assignment is refused (exit 2)
before the device is touched. :meth:`tinyhw.regs.Mmio.apply` carries a plan out; the CLI shows
:meth:`WritePlan.describe` as its plan and the :class:`Written` results afterwards.

Example::

    plan = WritePlan.build(asic, [("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK", 8), ("mp0.MP0_SMN_C2PMSG_116", 0)])
    for step in Mmio(transport, asic).apply(plan):
        print(step.register.name, hex(step.old), hex(step.new))
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tinyhw.errors import Refused
from tinyhw.regs.asic import Asic
from tinyhw.regs.model import Field, Register

REGISTER_MAX = 0xFFFFFFFF


@dataclass(frozen=True)
class Assignment:
    """One ``NAME=VALUE``: a whole register (``field`` None) or one of its fields."""

    register: Register
    field: Field | None
    value: int

    def apply(self, old: int) -> int:
        """The register value after this assignment, given the value ``old`` it held."""
        return self.value if self.field is None else self.field.insert(old, self.value)

    @property
    def name(self) -> str:
        """What is assigned: ``block.REGISTER`` or ``block.REGISTER.FIELD``."""
        return self.register.name if self.field is None else f"{self.register.name}.{self.field.name}"


@dataclass
class RegisterWrite:
    """Everything assigned to one register: one read, then one write of ``new_value(old)``."""

    register: Register
    assignments: list[Assignment] = field(default_factory=list)

    def new_value(self, old: int) -> int:
        """The value to write, given the value ``old`` the register holds (every assignment applied)."""
        value = old
        for a in self.assignments:
            value = a.apply(value)
        return value


@dataclass(frozen=True)
class Written:
    """What a register held before a plan step and what was written."""

    register: Register
    old: int
    new: int

    def as_dict(self) -> dict[str, Any]:
        """The step as a JSON-ready dict: name, offset, old and new value."""
        return {"name": self.register.name, "offset": self.register.offset, "old": self.old, "new": self.new}


@dataclass
class WritePlan:
    """Register writes on one ASIC, grouped by register; every value already checked."""

    asic: Asic
    steps: list[RegisterWrite]

    @classmethod
    def build(cls, asic: Asic, assignments: Iterable[tuple[str, int]]) -> WritePlan:
        """Resolve and check every ``(name, value)``; Refused on the first bad one, before any access."""
        steps: dict[str, RegisterWrite] = {}
        for name, value in assignments:
            reg, fld = asic.resolve(name)
            if fld is None and not 0 <= value <= REGISTER_MAX:
                raise Refused(f"value 0x{value:x} does not fit the 32-bit register {reg.name}")
            if fld is not None:
                fld.insert(0, value)  # refuses a value wider than the field
            steps.setdefault(reg.name, RegisterWrite(reg)).assignments.append(Assignment(reg, fld, value))
        return cls(asic, list(steps.values()))

    @classmethod
    def fields(cls, asic: Asic, register: Register, **values: int) -> WritePlan:
        """One register, several fields by keyword (``DATA_SIZE=4``): what :meth:`Mmio.update` does."""
        step = RegisterWrite(register)
        for key, value in values.items():
            fld = register.field(key)
            fld.insert(0, value)  # refuses a value wider than the field
            step.assignments.append(Assignment(register, fld, value))
        return cls(asic, [step])

    def describe(self) -> list[dict[str, Any]]:
        """The plan as data, one entry per assignment: name, bar, offset, value, and the field's bits
        (``None`` for a whole register, which is written without keeping any old bits)."""
        return [{"name": a.name, "register": a.register.name, "bar": self.asic.bar, "offset": a.register.offset,
                 "value": a.value, "field": None if a.field is None else a.field.name,
                 "bits": None if a.field is None else a.field.bits, "read_modify_write": a.field is not None}
                for step in self.steps for a in step.assignments]
