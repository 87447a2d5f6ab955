"""One generated register table (one IP block version), imported and parsed lazily.

The module ``tinyhw.autogen.<stem>_regs`` is imported the first time the table is used, so
looking up an SMUIO register never loads the (large) GC or NBIO tables. Its ``REGS`` text is
split into a name index on first use; a register's field list is parsed only when that
register is looked up (format: ``tinyhw/autogen/genregs.py``).
"""

from __future__ import annotations

import importlib
from functools import cache
from types import ModuleType

from tinyhw.autogen import sources
from tinyhw.errors import Refused
from tinyhw.regs.model import Field

#: (name as the kernel spells it, segment, dword offset, fields)
Entry = tuple[str, int, int, tuple[Field, ...]]


class RegTable:
    """The registers of one kernel header pair, e.g. ``smuio_13_0_6``."""

    def __init__(self, stem: str, module: ModuleType | None = None) -> None:
        """``module`` stands in for the generated module (tests); by default it is imported on first use."""
        if module is None and stem not in sources.STEMS:
            raise Refused(f"no generated register table {stem!r}", hint=f"known: {', '.join(sources.STEMS)}")
        self.stem = stem
        self._module = module
        self._lines: dict[str, str] | None = None
        self._names: list[str] = []
        self._fieldsets: list[str] = []
        self._parsed_sets: dict[int, tuple[Field, ...]] = {}
        self._entries: dict[str, Entry | None] = {}
        self._kernel = ""
        self._headers: tuple[str, ...] = ()

    def _index(self) -> dict[str, str]:
        if self._lines is None:
            mod = self._module or importlib.import_module(sources.module_name(self.stem))
            self._kernel, self._headers = mod.KERNEL, tuple(mod.HEADERS)
            self._fieldsets = mod.FIELDSETS.split("\n")
            lines: dict[str, str] = {}
            names: list[str] = []
            for line in mod.REGS.split("\n"):
                if line:
                    name = line[: line.index(" ")]
                    names.append(name)
                    lines[name.upper()] = line
            self._names, self._lines = names, lines
        return self._lines

    @property
    def kernel(self) -> str:
        """The kernel the table was generated from (``Linux 6.12.117 (Debian linux-source-6.12 ...)``)."""
        self._index()
        return self._kernel

    @property
    def headers(self) -> tuple[str, ...]:
        """Kernel-relative paths of the offset and sh_mask headers."""
        self._index()
        return self._headers

    def names(self) -> list[str]:
        """Register names as the kernel spells them, in header order."""
        self._index()
        return self._names

    def _fieldset(self, idx: int) -> tuple[Field, ...]:
        fields = self._parsed_sets.get(idx)
        if fields is None:
            out = []
            for tok in self._fieldsets[idx].split(" "):
                name, shift, width = tok.split(":")
                s, w = int(shift), int(width)
                out.append(Field(name, s, ((1 << w) - 1) << s))
            fields = self._parsed_sets[idx] = tuple(out)
        return fields

    def entry(self, name: str) -> Entry | None:
        """The register ``name`` (case-insensitive): (name, segment, dword offset, fields), or None."""
        key = name.upper()
        if key in self._entries:
            return self._entries[key]
        line = self._index().get(key)
        result: Entry | None = None
        if line is not None:
            reg, seg, off, fs = line.split(" ")
            result = (reg, int(seg), int(off, 16), () if fs == "-" else self._fieldset(int(fs)))
        self._entries[key] = result
        return result


@cache
def table(stem: str) -> RegTable:
    """The shared, lazily loaded table of ``stem`` (one instance per process)."""
    return RegTable(stem)
