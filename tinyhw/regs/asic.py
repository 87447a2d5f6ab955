"""Register lookup for one ASIC: ``block.REGISTER`` and ``block.REGISTER.FIELD`` names -> placed registers.

``asic("navi31").reg("smuio.ROM_SW_CNTL")`` gives the register with its byte offset in the
register BAR (0x5A3A0); ``.field("smuio.ROM_SW_CNTL.DATA_SIZE")`` gives the field. Names are
case-insensitive; an unknown name is refused (exit 2) with the closest matches. Lookups are
cached per ASIC, and only the tables of the blocks used are loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import cache
from typing import Any

from tinyhw.errors import Refused
from tinyhw.regs import names
from tinyhw.regs.model import Field, Register
from tinyhw.regs.profiles import AsicProfile, BlockSpec, find_profile, profile_names
from tinyhw.regs.table import table

Bases = Mapping[str, Sequence[int | None]]


class Asic:
    """The register space of one ASIC: a profile, optionally with bases read from the device.

    ``source`` says where the bases come from: "facts" (the profile) or "discovery" (set by
    :func:`tinyhw.regs.discovery.asic_from_device`, which also sets ``discovery``).
    """

    source = "facts"
    discovery: Any = None

    def __init__(self, profile: AsicProfile, bases: Bases | None = None) -> None:
        self.profile = profile
        self.name = profile.name
        self.bar = profile.bar
        self.blocks: dict[str, BlockSpec] = dict(profile.blocks)
        for block, segs in (bases or {}).items():
            spec = self.block(block)
            self.blocks[block.lower()] = replace(spec, bases=tuple(segs), inferred=False)
        self._regs: dict[tuple[str, str], Register | None] = {}

    def with_bases(self, bases: Bases) -> Asic:
        """A copy whose listed blocks use ``bases`` (dword base per segment, e.g. from IP discovery)."""
        merged: dict[str, Sequence[int | None]] = {b: s.bases for b, s in self.blocks.items() if not s.inferred}
        merged.update(bases)
        return Asic(self.profile, merged)

    # -- blocks -------------------------------------------------------------------------
    def block(self, name: str) -> BlockSpec:
        """The block called ``name`` (case-insensitive); Refused with the closest block names otherwise."""
        spec = self.blocks.get(name.lower())
        if spec is None:
            near = names.closest(name, self.blocks)
            raise Refused(
                f"{self.name} has no register block {name!r}",
                hint=f"blocks: {', '.join(self.blocks)}" + (f"; closest: {', '.join(near)}" if near else ""),
            )
        return spec

    def block_names(self, block: str) -> list[str]:
        """Register names of ``block`` as the kernel spells them, in header order."""
        spec = self.block(block)
        all_names = table(spec.table).names()
        if not spec.prefix:
            return all_names
        return [n for n in all_names if n.upper().startswith(spec.prefix)]

    # -- registers ----------------------------------------------------------------------
    def _lookup(self, block: str, reg: str) -> Register | None:
        key = (block.lower(), reg.upper())
        if key in self._regs:
            return self._regs[key]
        spec = self.block(block)
        entry = None if not key[1].startswith(spec.prefix) else table(spec.table).entry(reg)
        result = None
        if entry is not None:
            name, seg, dword, fields = entry
            base = spec.bases[seg] if seg < len(spec.bases) else None
            offset = None if base is None else 4 * (base + dword)
            result = Register(f"{key[0]}.{name}", key[0], offset, seg, dword, fields)
        self._regs[key] = result
        return result

    def _elsewhere(self, reg: str) -> list[str]:
        """``block.REG`` for every block that has a register called ``reg`` (loads every table)."""
        return [r.name for b in self.blocks if (r := self._lookup(b, reg)) is not None]

    def _unknown(self, block: str, reg: str) -> Refused:
        hits = [h for h in self._elsewhere(reg) if not h.startswith(f"{block.lower()}.")]
        hint: str | None
        if hits:
            hint = f"it is {' and '.join(hits)}"
        else:
            near = names.closest(reg, self.block_names(block))
            hint = f"closest: {', '.join(f'{block.lower()}.{n}' for n in near)}" if near else None
            hint = hint or f"list them with: tinyhw reg find '{block.lower()}.*' --asic {self.name}"
        return Refused(f"{self.name} has no register {block.lower()}.{reg}", hint=hint)

    def resolve(self, name: str) -> tuple[Register, Field | None]:
        """``block.REGISTER[.FIELD]`` -> (placed register, field or None)."""
        if "." not in name.strip():
            hits = self._elsewhere(name.strip()) if name.strip() else []
            if hits:
                raise Refused(f"register {name!r} needs its block", hint=f"write {' or '.join(hits)}")
        block, reg_name, field_name = names.split(name)
        reg = self._lookup(block, reg_name)
        if reg is None:
            raise self._unknown(block, reg_name)
        if reg.offset is None:
            raise Refused(
                f"{reg.name} is in segment {reg.segment} of {reg.block}, whose base {self.name} does not know",
                hint="supply the bases from the device's ip discovery table: tinyhw.regs.asic(name, bases=...)",
            )
        return reg, None if field_name is None else reg.field(field_name)

    def reg(self, name: str) -> Register:
        """The register ``block.REGISTER`` (a ``.FIELD`` suffix is refused)."""
        reg, fld = self.resolve(name)
        if fld is not None:
            raise Refused(f"{name!r} names a field; give block.REGISTER")
        return reg

    def field(self, name: str) -> Field:
        """The field ``block.REGISTER.FIELD``."""
        _, fld = self.resolve(name)
        if fld is None:
            raise Refused(f"{name!r} names a register; give block.REGISTER.FIELD")
        return fld

    def offset(self, name: str) -> int:
        """Byte offset of register ``block.REGISTER`` in the register BAR."""
        offset = self.reg(name).offset
        assert offset is not None  # resolve() refuses unplaced registers
        return offset

    # -- search -------------------------------------------------------------------------
    def find(self, pattern: str) -> list[Register]:
        """Registers matching a glob: ``REG``, ``block.REG`` or ``block.REG.FIELD`` (then only matching fields).

        One part searches every block. Registers whose segment base is unknown are included
        with ``offset`` None. Refused (with the closest names) when nothing matches.
        """
        parts = pattern.strip().split(".")
        if len(parts) > 3 or not all(parts):
            raise Refused(f"bad pattern {pattern!r}", hint="write REG, block.REG or block.REG.FIELD (globs allowed)")
        block_pat, reg_pat = ("*", parts[0]) if len(parts) == 1 else (parts[0], parts[1])
        block_re, reg_re = names.glob_matcher(block_pat), names.glob_matcher(reg_pat)
        field_re = names.glob_matcher(parts[2]) if len(parts) == 3 else None
        blocks = [b for b in self.blocks if block_re.match(b)]
        if not blocks:
            self.block(block_pat)  # raises with the closest block names
        out: list[Register] = []
        for b in blocks:
            for n in self.block_names(b):
                if not reg_re.match(n):
                    continue
                reg = self._lookup(b, n)
                assert reg is not None
                if field_re is not None:
                    fields = tuple(f for f in reg.fields if field_re.match(f.name))
                    if not fields:
                        continue
                    reg = replace(reg, fields=fields)
                out.append(reg)
        if not out:
            qualified = {n.upper(): f"{b}.{n}" for b in reversed(blocks) for n in self.block_names(b)}
            near = [
                qualified[n.upper()] for n in names.closest(reg_pat, [q.partition(".")[2] for q in qualified.values()])
            ]
            raise Refused(
                f"no {self.name} register matches {pattern!r}",
                hint=f"closest: {', '.join(near)}" if near else "names look like smuio.ROM_SW_CNTL",
            )
        return out


@cache
def _cached(profile_name: str) -> Asic:
    profile = find_profile(profile_name)
    assert profile is not None
    return Asic(profile)


def profile(name: str) -> AsicProfile:
    """The profile of ASIC ``name`` or alias; Refused with the known names otherwise."""
    found = find_profile(name)
    if found is None:
        near = names.closest(name, profile_names())
        raise Refused(
            f"unknown asic {name!r}",
            hint=f"known: {', '.join(profile_names())}" + (f"; closest: {', '.join(near)}" if near else ""),
        )
    return found


def asic(name: str, bases: Bases | None = None) -> Asic:
    """The register space of ASIC ``name`` (``navi31``, ``gfx1200``, or an alias).

    Without ``bases`` the result is shared and cached; ``bases`` (block -> dword base per
    segment, e.g. from the device's IP discovery table) replaces the profile's bases of the
    blocks it lists.
    """
    base = _cached(profile(name).name)
    return base if not bases else base.with_bases(bases)
