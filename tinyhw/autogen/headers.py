"""Parser and checker for the Linux amdgpu register headers (layer 0, imports nothing from tinyhw).

The kernel describes every IP block version in two generated C headers under
``drivers/gpu/drm/amd/include/asic_reg/<ip>/``:

* ``<ip>_<ver>_offset.h``: ``#define regNAME 0x00e8`` plus ``#define regNAME_BASE_IDX 0``
  (the older, Vega-era headers spell the prefix ``mm``). The value is a **dword** offset
  inside the segment whose index ``_BASE_IDX`` gives; the segment base comes per ASIC from
  the IP discovery table (or a static ``*_ip_offset.h``). ``ix``/``smn`` defines are indirect
  or SMN-space addresses, not BAR registers, and are skipped.
* ``<ip>_<ver>_sh_mask.h``: ``#define NAME__FIELD__SHIFT 0x10`` and ``#define NAME__FIELD_MASK 0x00070000L``.

:func:`parse_offset` and :func:`parse_sh_mask` turn the two texts into a :class:`Table`;
:func:`check` lists what is wrong with it (overlapping fields, fields past bit 31, duplicate
names, masks that do not match their shift); the generator stops on any finding that is not
in the explicit allow-list (``quirks.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_DEFINE = re.compile(r"^\s*#\s*define\s+(\w+)\s+\(?\s*(0[xX][0-9a-fA-F]+|\d+)[uUlL]*\s*\)?\s*(?://.*|/\*.*)?$")
_PREFIXES = ("reg", "mm")


@dataclass
class FieldDef:
    """One bit field of a register: ``value = (reg & mask) >> shift``."""

    name: str
    shift: int | None = None
    mask: int | None = None


@dataclass
class RegDef:
    """One register as the offset header gives it: dword offset inside segment ``segment``."""

    name: str
    offset: int
    segment: int | None = None
    fields: list[FieldDef] = field(default_factory=list)


@dataclass(frozen=True)
class Finding:
    """A checker finding. ``key`` is what the allow-list matches: (kind, register, detail)."""

    kind: str  # duplicate-register, duplicate-field, no-base-idx, incomplete-field, past-bit-31, bad-mask, overlap
    register: str
    detail: str
    message: str

    @property
    def key(self) -> tuple[str, str, str]:
        """What the quirk allow-list matches: (kind, register, detail)."""
        return (self.kind, self.register, self.detail)


@dataclass
class Table:
    """The registers of one header pair, in header order, plus what the parser had to leave out."""

    regs: dict[str, RegDef] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    skipped_defines: int = 0  # ix/smn/guard defines of the offset header
    orphan_fields: int = 0  # sh_mask fields of registers the offset header does not place


def _defines(text: str) -> list[tuple[str, int]]:
    """Every ``#define NAME <integer>`` of a header, in order (other lines ignored)."""
    out = []
    for line in text.splitlines():
        m = _DEFINE.match(line)
        if m:
            num = m.group(2)
            out.append((m.group(1), int(num, 16) if num[:2] in ("0x", "0X") else int(num, 10)))
    return out


def parse_offset(text: str) -> Table:
    """Parse an ``*_offset.h`` text into a table of registers (fields empty)."""
    table = Table()
    base_idx: dict[str, int] = {}
    defines = _defines(text)
    # A header uses one style: the prefix most of its _BASE_IDX defines carry (names may start lower case).
    counts = {p: sum(n.startswith(p) and n.endswith("_BASE_IDX") for n, _ in defines) for p in _PREFIXES}
    prefix = max(_PREFIXES, key=lambda p: counts[p])
    for name, value in defines:
        if not name.startswith(prefix) or len(name) == len(prefix):
            table.skipped_defines += 1
            continue
        bare = name[len(prefix) :]
        if bare.endswith("_BASE_IDX"):
            base_idx[bare[: -len("_BASE_IDX")]] = value
            continue
        if bare in table.regs:
            table.findings.append(
                Finding("duplicate-register", bare, "", f"register {bare} is defined twice (0x{value:x})")
            )
            continue
        table.regs[bare] = RegDef(bare, value)
    for bare, idx in base_idx.items():
        reg = table.regs.get(bare)
        if reg is not None:
            reg.segment = idx
        else:
            table.findings.append(Finding("no-base-idx", bare, "orphan", f"{bare}_BASE_IDX has no register {bare}"))
    for reg in table.regs.values():
        if reg.segment is None:
            table.findings.append(Finding("no-base-idx", reg.name, "", f"register {reg.name} has no _BASE_IDX"))
    seen: dict[str, str] = {}
    for bare in table.regs:
        other = seen.setdefault(bare.upper(), bare)
        if other != bare:
            table.findings.append(
                Finding("duplicate-register", bare, other, f"registers {other} and {bare} differ only in case")
            )
    return table


def _split_field(key: str, regs: dict[str, RegDef]) -> tuple[str, str] | None:
    """Split ``REG__FIELD`` at the longest ``__`` whose left side is a known register."""
    pos = key.rfind("__")
    while pos > 0:
        if key[:pos] in regs:
            return key[:pos], key[pos + 2 :]
        pos = key.rfind("__", 0, pos)
    return None


def parse_sh_mask(text: str, table: Table) -> Table:
    """Add the fields of an ``*_sh_mask.h`` text to the registers of ``table`` (in place; returned)."""
    fields: dict[str, dict[str, FieldDef]] = {name: {} for name in table.regs}
    for name, value in _defines(text):
        if name.endswith("__SHIFT"):
            key, kind = name[: -len("__SHIFT")], "shift"
        elif name.endswith("_MASK"):
            key, kind = name[: -len("_MASK")], "mask"
        else:
            continue
        split = _split_field(key, table.regs)
        if split is None:
            table.orphan_fields += kind == "shift"
            continue
        reg, fname = split
        fdef = fields[reg].setdefault(fname, FieldDef(fname))
        if getattr(fdef, kind) is not None:
            table.findings.append(
                Finding("duplicate-field", reg, fname, f"field {reg}.{fname} has its {kind} defined twice")
            )
            continue
        setattr(fdef, kind, value)
    for reg, fdefs in fields.items():
        table.regs[reg].fields = list(fdefs.values())
    return table


def _field_findings(reg: RegDef) -> list[Finding]:
    out: list[Finding] = []
    upper: dict[str, str] = {}
    for f in reg.fields:
        other = upper.setdefault(f.name.upper(), f.name)
        if other != f.name:
            out.append(
                Finding(
                    "duplicate-field",
                    reg.name,
                    f.name,
                    f"fields {other} and {f.name} of {reg.name} differ only in case",
                )
            )
        if f.shift is None or f.mask is None:
            out.append(
                Finding("incomplete-field", reg.name, f.name, f"field {reg.name}.{f.name} lacks a shift or a mask")
            )
            continue
        if f.shift > 31 or f.mask > 0xFFFFFFFF:
            out.append(
                Finding(
                    "past-bit-31",
                    reg.name,
                    f.name,
                    f"field {reg.name}.{f.name} reaches past bit 31 (shift {f.shift}, mask 0x{f.mask:x})",
                )
            )
            continue
        low = f.mask & -f.mask
        contiguous = f.mask != 0 and ((f.mask + low) & f.mask) == 0
        if not contiguous or low != 1 << f.shift:
            out.append(
                Finding(
                    "bad-mask",
                    reg.name,
                    f.name,
                    f"field {reg.name}.{f.name} mask 0x{f.mask:x} does not match shift {f.shift}",
                )
            )
    placed = [f for f in reg.fields if f.mask is not None and f.mask <= 0xFFFFFFFF]
    for i, a in enumerate(placed):
        for b in placed[i + 1 :]:
            if a.mask & b.mask:  # type: ignore[operator]
                out.append(
                    Finding(
                        "overlap",
                        reg.name,
                        f"{a.name}/{b.name}",
                        f"fields {a.name} and {b.name} of {reg.name} overlap (0x{a.mask:x} & 0x{b.mask:x})",
                    )
                )
    return out


def check(table: Table) -> list[Finding]:
    """Everything wrong with a parsed table: the parser's findings, then the per-field ones."""
    out = list(table.findings)
    for reg in table.regs.values():
        out.extend(_field_findings(reg))
    return out


class CheckFailed(Exception):
    """The checker found problems that the allow-list does not cover (or stale allow-list entries)."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


Quirk = tuple[str, str, str, tuple[str, ...], str, str]


def apply_quirks(stem: str, table: Table, quirks: tuple[Quirk, ...] | list[Quirk]) -> list[str]:
    """Check ``table`` and apply the allow-list entries of ``stem``; return what was left out.

    Raises :class:`CheckFailed` listing every finding without an entry and every entry of
    ``stem`` without a finding; nothing is changed then. An ``omit`` entry removes the field
    named by its detail, or the register for a register-level finding (empty detail).
    """
    allow: dict[tuple[str, str, str], tuple[str, str]] = {}
    for q_stem, kind, register, details, action, reason in quirks:
        if q_stem != stem:
            continue
        if action not in ("omit", "as-is"):
            raise CheckFailed([f"{stem}: allow-list entry {kind} {register} has unknown action {action!r}"])
        for detail in details:
            allow[(kind, register, detail)] = (action, reason)
    findings = check(table)
    problems = [f"{stem}: {f.message} [{f.kind}]" for f in findings if f.key not in allow]
    used = {f.key for f in findings}
    problems += [f"{stem}: allow-list entry {k} matches no finding (stale)" for k in allow if k not in used]
    if problems:
        raise CheckFailed(problems)
    omitted: list[str] = []
    for f in findings:
        action, _ = allow[f.key]
        if action != "omit":
            continue
        reg = table.regs.get(f.register)
        if reg is None:
            continue
        if f.detail == "":
            del table.regs[f.register]
            omitted.append(f"register {f.register} ({f.kind})")
        else:
            reg.fields = [x for x in reg.fields if x.name != f.detail]
            omitted.append(f"field {f.register}.{f.detail} ({f.kind})")
    return omitted
