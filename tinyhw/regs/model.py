"""Register and field values: what a lookup in the register database gives back.

A :class:`Register` is placed for one ASIC: ``offset`` is its byte offset in the register
BAR, 4 x (segment base + dword offset) (specs/amd-bringup.md §3.1). A :class:`Field` is a
contiguous bit range: ``value = (reg & mask) >> shift``.
"""

from __future__ import annotations

from dataclasses import dataclass

from tinyhw.errors import Refused


@dataclass(frozen=True)
class Field:
    """One bit field of a register (the kernel's ``__SHIFT`` and ``_MASK``)."""

    name: str
    shift: int
    mask: int

    @property
    def width(self) -> int:
        """The field's width in bits."""
        return self.mask.bit_count()

    @property
    def msb(self) -> int:
        """The field's most significant bit."""
        return self.shift + self.width - 1

    @property
    def bits(self) -> str:
        """``"15:0"``, or ``"19"`` for a one-bit field."""
        return str(self.shift) if self.width == 1 else f"{self.msb}:{self.shift}"

    def extract(self, value: int) -> int:
        """This field's value inside the register value ``value``."""
        return (value & self.mask) >> self.shift

    def insert(self, value: int, field_value: int) -> int:
        """``value`` with this field replaced by ``field_value`` (refused when it does not fit)."""
        if field_value < 0 or field_value >> self.width:
            raise Refused(
                f"value 0x{field_value:x} does not fit field {self.name} ({self.width} bit{'s' * (self.width > 1)}, "
                f"max 0x{(1 << self.width) - 1:x})"
            )
        return (value & ~self.mask & 0xFFFFFFFF) | (field_value << self.shift)

    def as_dict(self) -> dict[str, int | str]:
        """The field as a JSON-ready dict: name, shift, mask."""
        return {"name": self.name, "shift": self.shift, "mask": self.mask}


@dataclass(frozen=True)
class Register:
    """One register of one block of one ASIC.

    ``name`` is the canonical ``block.REGISTER`` (block lower case, register as the kernel
    spells it); ``offset`` is the byte offset in the ASIC's register BAR, or None when the
    base of the register's segment is unknown for that ASIC (``Asic.reg`` never returns such
    a register; ``Asic.find`` may).
    """

    name: str
    block: str
    offset: int | None
    segment: int
    dword: int
    fields: tuple[Field, ...]

    @property
    def reg_name(self) -> str:
        """The register name without the block (``ROM_SW_CNTL``)."""
        return self.name.partition(".")[2]

    def field(self, name: str) -> Field:
        """The field called ``name`` (case-insensitive); Refused with the closest names otherwise."""
        want = name.upper()
        for f in self.fields:
            if f.name.upper() == want:
                return f
        from tinyhw.regs.names import closest

        near = closest(want, [f.name for f in self.fields])
        hint = f"closest: {', '.join(f'{self.name}.{n}' for n in near)}" if near else None
        fields = ", ".join(f.name for f in self.fields) or "none"
        raise Refused(f"{self.name} has no field {name!r} (fields: {fields})", hint=hint)

    def decode(self, value: int) -> dict[str, int]:
        """Field name -> value of every field of the register value ``value``."""
        return {f.name: f.extract(value) for f in self.fields}

    def encode(self, value: int = 0, **fields: int) -> int:
        """``value`` with the named fields (keyword = field name, case-insensitive) replaced."""
        for name, fv in fields.items():
            value = self.field(name).insert(value, fv)
        return value
