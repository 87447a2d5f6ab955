"""A small C-header reader for protocol constants and struct layouts (layer 0, imports nothing from tinyhw).

It understands what the amdgpu interface headers use (``psp_gfx_if.h``, ``amdgpu_psp.h``,
``amdgpu_ucode.h``, ``smu_v13_0_0_ppsmc.h``, ``smu13_driver_if_v13_0_0.h``):

* ``#define NAME <integer expression>`` (other defines are ignored);
* ``enum [tag] { A = expr, B, ... }`` and ``typedef enum { ... } Name;`` (implicit values count up);
* ``struct``/``union`` definitions, named or ``typedef``-ed, with members of the fixed-width
  integer types, enums (4 bytes), nested named or anonymous structs/unions, arrays whose
  dimensions are constant expressions (``sizeof(union X)`` included) and bit fields.

Layout follows the C rules gcc uses on x86-64 and arm64 for these types: natural alignment,
struct alignment = largest member alignment, size rounded up to it; consecutive bit fields
share a storage unit of their declared type while they fit. The generator's test checks the
result against gcc's own ``offsetof``/``sizeof``.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field

BASE_TYPES = {
    "uint8_t": 1, "int8_t": 1, "char": 1, "bool": 1,
    "uint16_t": 2, "int16_t": 2,
    "uint32_t": 4, "int32_t": 4, "float": 4, "int": 4, "unsigned": 4,
    "uint64_t": 8, "int64_t": 8,
}

_TOKEN = re.compile(r"\s*(0[xX][0-9a-fA-F]+[uUlL]*|\d+[uUlL]*|[A-Za-z_]\w*|<<|>>|[{}()\[\];:,=+\-*/|&~<>.])")


class CError(ValueError):
    """The header uses something this reader does not understand (or an unknown name)."""


def strip_comments(text: str) -> str:
    """``text`` without its C comments; a block comment leaves its newlines, so line numbers stay right."""
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def tokenize(text: str) -> list[str]:
    """The C tokens of ``text`` (names, numbers, operators, punctuation); raises CError at the first thing that is none
    of them."""
    out, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m:
            raise CError(f"cannot tokenize near {text[pos:pos + 30]!r}")
        out.append(m.group(1))
        pos = m.end()
    return out


def _matching_brace(toks: list[str], k: int) -> int:
    """Index just after the ``}`` that closes the ``{`` at ``toks[k]``."""
    depth = 0
    while k < len(toks):
        depth += {"{": 1, "}": -1}.get(toks[k], 0)
        k += 1
        if depth == 0:
            break
    return k


@dataclass
class Member:
    """One member of a struct or union: its name, base type (or an inline aggregate), array dimensions as unevaluated
    tokens, and bit-field width."""

    name: str
    ctype: str  # base type name, "enum", "struct NAME" / "union NAME" or an inline Aggregate
    dims: list[list[str]] = field(default_factory=list)  # unevaluated dimension token lists
    bits: int | None = None
    inline: Aggregate | None = None


@dataclass
class Aggregate:
    """A struct or union definition: its kind, name, members and the ``#pragma pack`` in force where it was defined."""

    kind: str  # "struct" or "union"
    name: str
    members: list[Member] = field(default_factory=list)
    pack: int = 0  # #pragma pack(N) in force where it was defined (0: natural alignment)


@dataclass
class Entry:
    """One flattened layout entry: ``path`` (dotted), byte offset, C type, element count, bit field width."""

    path: str
    offset: int
    ctype: str
    count: int
    bits: int | None = None


class Header:
    """Every integer constant, enum value and aggregate of one or more header texts."""

    def __init__(self) -> None:
        self.constants: dict[str, int] = {}
        self.order: list[str] = []
        self.aggregates: dict[str, Aggregate] = {}  # "struct tag", "union tag" and typedef names
        self._pending_defines: list[tuple[str, list[str]]] = []
        self.skipped: list[str] = []  # aggregates whose body this reader could not model
        self._pack = 0  # the #pragma pack in force (0: none)

    # -- reading ---------------------------------------------------------------------------------
    def feed(self, text: str, defines_only: bool = False) -> Header:
        """Read one header text (``defines_only``: only its ``#define`` lines, as for a ``.c`` file)."""
        text = strip_comments(text)
        body = []
        lines = text.replace("\\\n", " ").splitlines()
        for line in lines:
            s = line.strip()
            if s.startswith("#"):
                pack = re.match(r"#\s*pragma\s+pack\s*\(\s*(\d*)\s*\)", s)
                if pack:  # kept as a pseudo declaration so aggregates know the packing in force
                    body.append(f"__pragma_pack {pack.group(1) or 0} ;")
                    continue
                m = re.match(r"#\s*define\s+(\w+)\s+(.+)$", s)
                if m:
                    with contextlib.suppress(CError):  # not an integer expression
                        self._pending_defines.append((m.group(1), tokenize(m.group(2))))
                body.append("")
            else:
                body.append(line)
        self._resolve_defines()
        if not defines_only:
            self._parse_decls(tokenize("\n".join(body)))
            self._resolve_defines()
        return self

    def _set(self, name: str, value: int) -> None:
        if name not in self.constants:
            self.order.append(name)
        self.constants[name] = value

    def _resolve_defines(self) -> None:
        progress = True
        while progress:
            progress = False
            rest = []
            for name, toks in self._pending_defines:
                try:
                    self._set(name, self.evaluate(toks))
                    progress = True
                except CError:
                    rest.append((name, toks))
            self._pending_defines = rest

    def _parse_decls(self, toks: list[str]) -> None:
        i = 0
        while i < len(toks):
            t = toks[i]
            if t == "__pragma_pack":
                self._pack = int(toks[i + 1], 0)
                i += 3
                continue
            typedef = t == "typedef"
            j = i + 1 if typedef else i
            if j < len(toks) and toks[j] in ("enum", "struct", "union") and j + 1 < len(toks):
                k = j + 1
                tag = None
                if toks[k] not in ("{",):
                    tag = toks[k]
                    k += 1
                if k < len(toks) and toks[k] == "{":
                    agg = None
                    try:
                        if toks[j] == "enum":
                            k = self._parse_enum(toks, k + 1)
                        else:
                            agg, k = self._parse_aggregate(toks, toks[j], tag or "", k + 1)
                            if tag:
                                self.aggregates[f"{toks[j]} {tag}"] = agg
                    except (CError, IndexError, ValueError):
                        # something this reader does not model (pointers, function types): skip the body
                        self.skipped.append(f"{toks[j]} {tag or '(anonymous)'}")
                        k = _matching_brace(toks, k)
                    # after the closing brace: optional typedef name(s), then ';'
                    while k < len(toks) and toks[k] != ";":
                        if typedef and agg is not None and re.match(r"[A-Za-z_]\w*$", toks[k]):
                            self.aggregates[toks[k]] = agg
                            agg.name = agg.name or toks[k]
                        k += 1
                    i = k + 1
                    continue
            # skip anything else up to the next ';' at brace depth 0
            depth = 0
            while i < len(toks):
                if toks[i] == "{":
                    depth += 1
                elif toks[i] == "}":
                    depth -= 1
                elif toks[i] == ";" and depth <= 0:
                    break
                i += 1
            i += 1

    def _parse_enum(self, toks: list[str], i: int) -> int:
        value = -1
        while toks[i] != "}":
            name = toks[i]
            i += 1
            if toks[i] == "=":
                expr = []
                i += 1
                depth = 0
                while depth > 0 or toks[i] not in (",", "}"):
                    depth += {"(": 1, ")": -1}.get(toks[i], 0)
                    expr.append(toks[i])
                    i += 1
                value = self.evaluate(expr)
            else:
                value += 1
            self._set(name, value)
            if toks[i] == ",":
                i += 1
        return i + 1

    def _parse_aggregate(self, toks: list[str], kind: str, name: str, i: int) -> tuple[Aggregate, int]:
        agg = Aggregate(kind, name, pack=self._pack)
        while toks[i] != "}":
            t = toks[i]
            inline = None
            if t in ("struct", "union", "enum"):
                if toks[i + 1] == "{" or (toks[i + 2] == "{" if i + 2 < len(toks) else False):
                    tag = "" if toks[i + 1] == "{" else toks[i + 1]
                    start = i + 2 if tag == "" else i + 3
                    if t == "enum":
                        i = self._parse_enum(toks, start)
                        ctype = "enum"
                    else:
                        inline, i = self._parse_aggregate(toks, t, tag, start)
                        ctype = t
                else:
                    ctype = "enum" if t == "enum" else f"{t} {toks[i + 1]}"
                    i += 2
            else:
                if t in ("const", "volatile", "unsigned", "signed") and toks[i + 1] in BASE_TYPES:
                    i += 1
                ctype = toks[i]
                i += 1
            if toks[i] == ";":  # anonymous inline member
                agg.members.append(Member("", ctype, inline=inline))
                i += 1
                continue
            while True:
                mname = toks[i]
                i += 1
                member = Member(mname, ctype, inline=inline)
                while toks[i] == "[":
                    dim, depth = [], 0
                    i += 1
                    while depth > 0 or toks[i] != "]":
                        depth += {"[": 1, "]": -1}.get(toks[i], 0)
                        dim.append(toks[i])
                        i += 1
                    member.dims.append(dim)
                    i += 1
                if toks[i] == ":":
                    member.bits = int(toks[i + 1].rstrip("uUlL"), 0)
                    i += 2
                agg.members.append(member)
                if toks[i] == ",":
                    i += 1
                    continue
                if toks[i] != ";":
                    raise CError(f"{kind} {name}: unexpected {toks[i]!r} after member {mname}")
                i += 1
                break
        return agg, i + 1

    # -- expressions -----------------------------------------------------------------------------
    def evaluate(self, toks: list[str]) -> int:
        """The integer value of a constant expression ``toks`` (numbers, known constants, ``sizeof``, casts to base
        types, ``| & << >> + - * /``, unary ``-`` and ``~``); raises CError for anything else."""
        pos = 0

        def atom() -> int:
            nonlocal pos
            t = toks[pos]
            pos += 1
            if t == "(":
                if toks[pos] in BASE_TYPES and toks[pos + 1] == ")":  # a cast
                    pos += 2
                    return atom()
                v = expr(0)
                pos += 1
                return v
            if t == "-":
                return -atom()
            if t == "~":
                return ~atom()
            if t == "sizeof":
                pos += 1  # "("
                depth, name = 0, []
                while depth > 0 or toks[pos] != ")":
                    depth += {"(": 1, ")": -1}.get(toks[pos], 0)
                    name.append(toks[pos])
                    pos += 1
                pos += 1
                return self.sizeof(" ".join(name))
            if re.match(r"\d", t):
                return int(t.rstrip("uUlL"), 0)
            if t in self.constants:
                return self.constants[t]
            raise CError(f"unknown name {t!r} in expression")

        prec = {"|": 1, "&": 2, "<<": 3, ">>": 3, "+": 4, "-": 4, "*": 5, "/": 5}

        def expr(level: int) -> int:
            nonlocal pos
            left = atom()
            while pos < len(toks) and toks[pos] in prec and prec[toks[pos]] > level:
                op = toks[pos]
                pos += 1
                right = expr(prec[op])
                if op in ("<<", ">>") and not 0 <= right < 128:
                    raise CError(f"shift by {right} in {' '.join(toks)!r}")
                if op == "|":
                    left |= right
                elif op == "&":
                    left &= right
                elif op == "<<":
                    left <<= right
                elif op == ">>":
                    left >>= right
                elif op == "+":
                    left += right
                elif op == "-":
                    left -= right
                elif op == "*":
                    left *= right
                else:
                    left = left // right if right else 0
            return left

        if not toks:
            raise CError("empty expression")
        try:
            value = expr(0)
        except IndexError as exc:
            raise CError(f"bad expression {' '.join(toks)!r}") from exc
        if pos != len(toks):
            raise CError(f"bad expression {' '.join(toks)!r}")
        return value

    # -- layout ----------------------------------------------------------------------------------
    def _type_info(self, member: Member) -> tuple[int, int, Aggregate | None]:
        """(size, alignment, aggregate or None) of one element of ``member``."""
        if member.inline is not None:
            size, align = self._agg_size(member.inline)
            return size, align, member.inline
        if member.ctype == "enum" or member.ctype.startswith("enum "):
            return 4, 4, None
        if member.ctype in BASE_TYPES:
            n = BASE_TYPES[member.ctype]
            return n, n, None
        agg = self.aggregates.get(member.ctype)
        if agg is None:
            raise CError(f"unknown type {member.ctype!r}")
        size, align = self._agg_size(agg)
        return size, align, agg

    def _count(self, member: Member) -> int:
        n = 1
        for dim in member.dims:
            n *= self.evaluate(dim)
        return n

    def _place(self, agg: Aggregate) -> tuple[list[tuple[Member, int, int]], int, int]:
        """Offsets of the members of ``agg``: ([(member, offset, count)], size, alignment)."""
        placed = []
        off = 0
        size = 0
        align = 1
        unit_end = unit_bits_left = 0
        for m in agg.members:
            esize, ealign, _ = self._type_info(m)
            if agg.pack:
                ealign = min(ealign, agg.pack)
            count = self._count(m)
            align = max(align, ealign)
            if agg.kind == "union":
                placed.append((m, 0, count))
                size = max(size, esize * count)
                continue
            if m.bits is not None:
                if unit_bits_left >= m.bits and off == unit_end:
                    placed.append((m, unit_end - esize, count))
                    unit_bits_left -= m.bits
                    continue
                off = (off + ealign - 1) // ealign * ealign
                placed.append((m, off, count))
                off += esize
                unit_end, unit_bits_left = off, esize * 8 - m.bits
                continue
            unit_bits_left = 0
            off = (off + ealign - 1) // ealign * ealign
            placed.append((m, off, count))
            off += esize * count
        if agg.kind == "struct":
            size = off
        size = (size + align - 1) // align * align
        return placed, size, align

    def _agg_size(self, agg: Aggregate) -> tuple[int, int]:
        _, size, align = self._place(agg)
        return size, align

    def sizeof(self, name: str) -> int:
        """The size in bytes of a base type or of a struct or union defined in the header (with its packing); raises
        CError for an unknown type."""
        if name in BASE_TYPES:
            return BASE_TYPES[name]
        agg = self.aggregates.get(name)
        if agg is None:
            raise CError(f"sizeof of unknown type {name!r}")
        return self._agg_size(agg)[0]

    def layout(self, name: str) -> list[Entry]:
        """Flattened members of aggregate ``name``: nested non-array aggregates are expanded with dotted paths."""
        agg = self.aggregates.get(name)
        if agg is None:
            raise CError(f"no struct or union {name!r}")
        out: list[Entry] = []
        self._flatten(agg, 0, "", out)
        return out

    def _flatten(self, agg: Aggregate, base: int, prefix: str, out: list[Entry]) -> None:
        placed, _, _ = self._place(agg)
        for m, off, count in placed:
            _, _, sub = self._type_info(m)
            path = f"{prefix}{m.name}" if m.name else prefix.rstrip(".")
            if sub is not None and count == 1 and not m.dims:
                self._flatten(sub, base + off, f"{path}." if path else "", out)
                continue
            ctype = m.ctype if m.inline is None else f"{m.ctype} (inline)"
            if ctype.startswith("enum"):
                ctype = "enum"
            out.append(Entry(path, base + off, ctype, count, m.bits))
