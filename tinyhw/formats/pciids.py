"""The pci.ids database: parser, lookups, and names formatted exactly as lspci prints them.

Spec: specs/pci-vfio-remote.md §5 (file locations, grammar, lookup order), §4.2 (one-line
format, ``(prog-if ...)``), §4.3 (name formatting and fallbacks with and without ``-nn``).

Lookups use only the local file (no udev hwdb, no DNS). A missing or unreadable file gives
an empty database, so every name falls back to numbers as lspci does with an unreadable
``-i`` file. Where lspci refuses a whole file (duplicate entries, 3+ TAB nesting) this
parser keeps the first entry, skips the bad line and lists it in ``PciIds.problems``.
"""

from __future__ import annotations

import copy
import gzip
import os
import re

ENV_VAR = "TINYHW_PCI_IDS"
#: What a name looked up in a pci.ids file says it came from (``name_source``).
SOURCE = "pci.ids"
#: The hint shown when no pci.ids file could be read and a name fell back to ids.
INSTALL_HINT = ("install pci.ids for device names (Debian/Ubuntu: apt install pci.ids; Fedora: dnf install hwdata) "
                f"or point ${ENV_VAR} at a copy")
#: Search order when TINYHW_PCI_IDS is unset: Debian's libpci (.gz first), then hwdata.
DEFAULT_PATHS = (
    "/usr/share/misc/pci.ids.gz",
    "/usr/share/misc/pci.ids",
    "/usr/share/hwdata/pci.ids.gz",
    "/usr/share/hwdata/pci.ids",
)


def _hex(text: str, digits: int) -> int | None:
    if len(text) != digits or not text.isalnum():  # int() alone would accept "+1_a"
        return None
    try:
        return int(text, 16)
    except ValueError:
        return None


def _split(body: str, digits: int) -> tuple[int | None, str]:
    """``"1af4  Red Hat, Inc."`` -> (0x1af4, "Red Hat, Inc."); the id must be followed by whitespace."""
    if len(body) <= digits or body[digits] not in " \t":
        return None, ""
    return _hex(body[:digits], digits), body[digits:].strip()


_TOP = re.compile(r"^[^\t#\n][^\n]*", re.M)


class PciIds:
    """Parsed pci.ids. Vendors and classes are parsed when the file is loaded; the device and
    subsystem lines of a vendor are parsed the first time that vendor is looked up, which keeps
    loading the 36k-line file at about 15 ms (``parse_all()`` parses every block, for checks).
    """

    def __init__(self, text: str = "", path: str | None = None, available: bool = False,
                 source: str = SOURCE) -> None:
        self.path = path
        self.available = available  # a file was read
        self.source = source  # where this database's names come from (``name_source`` of a lookup)
        self.fallback: PciIds | None = None  # asked for every name this one lacks (see with_fallback)
        self.version: str | None = None  # from the "#\tVersion:" header line
        self.problems: list[str] = []
        self.vendors: dict[int, str] = {}
        self.classes: dict[int, str] = {}  # base
        self.subclasses: dict[int, str] = {}  # base << 8 | sub
        self.prog_ifs: dict[int, str] = {}  # base << 16 | sub << 8 | prog-if
        self.generic_subsystems: dict[int, str] = {}  # sv << 16 | sd
        self._devices: dict[int, str] = {}  # v << 16 | d
        self._subsystems: dict[int, str] = {}  # v << 48 | d << 32 | sv << 16 | sd
        self._text = text
        self._blocks: dict[int, tuple[int, int, int]] = {}  # vendor -> (start, end, line number of start)
        self._index()

    # -- loading -----------------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str, path: str | None = None) -> PciIds:
        """Parse the text of a pci.ids file (§5 grammar)."""
        return cls(text, path, available=True)

    @classmethod
    def from_names(cls, source: str, *, vendors: dict[int, str], devices: dict[tuple[int, int], str],
                   subsystems: dict[tuple[int, int, int, int], str], classes: dict[int, str],
                   subclasses: dict[int, str], prog_ifs: dict[int, str]) -> PciIds:
        """A small database built from tables rather than a file (e.g. the names of tinyhw's own boards):
        devices keyed (vendor, device), subsystems (vendor, device, sub-vendor, sub-device), subclasses
        ``base << 8 | sub``, prog-ifs by 24-bit class code. ``source`` is what lookups report it as."""
        db = cls(available=True, source=source)
        db.vendors.update(vendors)
        db._devices.update({v << 16 | d: n for (v, d), n in devices.items()})
        db._subsystems.update({v << 48 | d << 32 | sv << 16 | sd: n for (v, d, sv, sd), n in subsystems.items()})
        db.classes.update(classes)
        db.subclasses.update(subclasses)
        db.prog_ifs.update(prog_ifs)
        return db

    def with_fallback(self, fallback: PciIds) -> PciIds:
        """This database, asking ``fallback`` for every name it lacks (a view: this object is left as it is)."""
        view = copy.copy(self)  # shares the parsed tables, so lazily parsed vendor blocks are parsed once
        view.fallback = fallback
        return view

    @classmethod
    def load(cls, path: str | None = None) -> PciIds:
        """Read ``path`` (default: :func:`find_pci_ids`; gzip when it ends in ``.gz``).

        A missing or unreadable file gives an empty database (names become ids). Each call
        reads the file again; :func:`load_pci_ids` keeps one parsed copy per process.
        """
        if path is None:
            path = find_pci_ids()
            if path is None:
                db = cls()
                db.problems.append("no pci.ids file found; names are ids only")
                return db
        try:
            opener = gzip.open if path.endswith(".gz") else open
            with opener(path, "rb") as f:
                raw = f.read()
        except (OSError, EOFError) as e:
            db = cls(path=path)
            db.problems.append(f"{path}: cannot read ({e}); names are ids only")
            return db
        return cls.parse(raw.decode("utf-8", errors="replace"), path)

    def _problem(self, lineno: int, what: str) -> None:
        self.problems.append(f"{self.path or '<text>'}:{lineno}: {what}")

    def _put(self, table: dict[int, str], key: int, name: str, lineno: int) -> None:
        if key in table:
            self._problem(lineno, "duplicate entry (first one kept)")
        else:
            table[key] = name

    def _index(self) -> None:
        """Find the top-level lines; parse vendor names and every non-vendor block now."""
        text = self._text
        header_end = text.find("\n#\tVersion:")
        if header_end >= 0:
            self.version = text[header_end + 11 : text.find("\n", header_end + 1)].strip()
        tops = [(m.start(), m.end(), m.group().rstrip()) for m in _TOP.finditer(text)]
        lineno, pos = 1, 0
        for i, (start, line_end, line) in enumerate(tops):
            lineno += text.count("\n", pos, start)
            pos = start
            end = tops[i + 1][0] if i + 1 < len(tops) else len(text)
            if len(line) > 1 and line[1] == " " and "A" <= line[0] <= "Z":
                self._special_block(line, text[line_end:end], lineno)
                continue
            vendor, name = _split(line, 4)
            if vendor is None:
                self._problem(lineno, "bad vendor line (expected 'vvvv  name')")
            elif vendor in self.vendors:
                self._problem(lineno, "duplicate entry (first one kept)")
            else:
                self.vendors[vendor] = name
                self._blocks[vendor] = (line_end, end, lineno)

    def _special_block(self, line: str, body: str, lineno: int) -> None:
        """``C cc`` class blocks and ``S vvvv`` generic-subsystem blocks; other letters are skipped."""
        if line[0] == "C":
            cls_id, name = _split(line[2:], 2)
            if cls_id is None:
                self._problem(lineno, "bad class line (expected 'C cc  name')")
                return
            self._put(self.classes, cls_id, name, lineno)
            sub: int | None = None
            for n, ln in _lines(body, lineno):
                if ln[1:2] != "\t":
                    sub, sname = _split(ln[1:], 2)
                    if sub is None:
                        self._problem(n, "bad subclass line (expected 'ss  name')")
                    else:
                        self._put(self.subclasses, cls_id << 8 | sub, sname, n)
                    continue
                pi, pname = _split(ln[2:], 2) if ln[2:3] != "\t" else (None, "")
                if pi is None or sub is None:
                    self._problem(n, "bad prog-if line (expected two tabs, 'pp  name', under a subclass)")
                else:
                    self._put(self.prog_ifs, cls_id << 16 | sub << 8 | pi, pname, n)
        elif line[0] == "S":
            sv = _hex(line[2:].strip(), 4)
            if sv is None:
                self._problem(lineno, "bad generic subsystem line (expected 'S vvvv')")
                return
            for n, ln in _lines(body, lineno):
                sd, name = _split(ln[1:], 4) if ln[1:2] != "\t" else (None, "")
                if sd is None:
                    self._problem(n, "bad generic subsystem entry (expected one tab, 'dddd  name')")
                else:
                    self._put(self.generic_subsystems, sv << 16 | sd, name, n)

    def _vendor_block(self, vendor: int) -> None:
        """Parse the device and subsystem lines of ``vendor`` (once)."""
        block = self._blocks.pop(vendor, None)
        if block is None:
            return
        start, end, lineno = block
        device: int | None = None
        for n, ln in _lines(self._text[start:end], lineno):
            if ln[1:2] != "\t":
                device, name = _split(ln[1:], 4)
                if device is None:
                    self._problem(n, "bad device line (expected one tab, 'dddd  name')")
                else:
                    self._put(self._devices, vendor << 16 | device, name, n)
                continue
            sv = _hex(ln[2:6], 4) if ln[2:3] != "\t" and ln[6:7] == " " else None
            sd, name = _split(ln[7:], 4) if sv is not None else (None, "")
            if sd is None or sv is None or device is None:
                self._problem(n, "bad subsystem line (expected two tabs, 'ssss dddd  name', under a device)")
            else:
                self._put(self._subsystems, vendor << 48 | device << 32 | sv << 16 | sd, name, n)

    def parse_all(self) -> PciIds:
        """Parse every vendor block now (to validate a file: problems then lists every bad line)."""
        for vendor in list(self._blocks):
            self._vendor_block(vendor)
        return self

    @property
    def devices(self) -> dict[int, str]:
        """Every device name, keyed ``v << 16 | d`` (parses all vendor blocks)."""
        return self.parse_all()._devices

    @property
    def subsystems(self) -> dict[int, str]:
        """Every per-device subsystem name, keyed ``v << 48 | d << 32 | sv << 16 | sd``."""
        return self.parse_all()._subsystems

    # -- raw lookups (each asks the fallback when this database lacks the name) --------------------------
    def vendor(self, v: int) -> str | None:
        """The vendor's name, or None when this database and its fallback (tinyhw's boards) do not know it."""
        return self._or_fallback(self.vendors.get(v), "vendor", v)

    def device(self, v: int, d: int) -> str | None:
        """The device's name under vendor ``v``, or None when unknown."""
        self._vendor_block(v)
        return self._or_fallback(self._devices.get(v << 16 | d), "device", v, d)

    def subsystem(self, v: int, d: int, sv: int, sd: int) -> str | None:
        """Sub-device name: per-device entry, else generic entry, else the device name if ids are equal."""
        self._vendor_block(v)
        name = self._subsystems.get(v << 48 | d << 32 | sv << 16 | sd) or self.generic_subsystems.get(sv << 16 | sd)
        if name is None and (sv, sd) == (v, d):
            name = self._devices.get(v << 16 | d)
        return self._or_fallback(name, "subsystem", v, d, sv, sd)

    def class_name(self, base: int) -> str | None:
        """The name of PCI base class ``base``, or None."""
        return self._or_fallback(self.classes.get(base), "class_name", base)

    def subclass_name(self, base: int, sub: int) -> str | None:
        """The name of subclass ``sub`` of base class ``base``, or None."""
        return self._or_fallback(self.subclasses.get(base << 8 | sub), "subclass_name", base, sub)

    def prog_if_name(self, base: int, sub: int, prog_if: int) -> str | None:
        """The name of programming interface ``prog_if`` of a class and subclass, or None."""
        return self._or_fallback(self.prog_ifs.get(base << 16 | sub << 8 | prog_if), "prog_if_name", base, sub,
                                 prog_if)

    def _or_fallback(self, name: str | None, lookup: str, *key: int) -> str | None:
        if name is not None or self.fallback is None:
            return name
        return getattr(self.fallback, lookup)(*key)

    def name_source(self, v: int, d: int) -> str | None:
        """Where the name of device ``v:d`` comes from: this database's ``source`` ("pci.ids"), the fallback's
        (e.g. "tinyhw boards"), or None when neither knows the device (the name is then its ids)."""
        self._vendor_block(v)
        if v << 16 | d in self._devices:
            return self.source
        return self.fallback.name_source(v, d) if self.fallback is not None else None

    def name_origin(self, v: int, d: int, class_code: int,
                    subsystem: tuple[int, int] | None = None) -> dict[str, str | None]:
        """For a document about one function: ``name_source``, where its name came from (:meth:`name_source`),
        and ``name_hint``, the install hint when no pci.ids file was read and the device, its ``subsystem``
        (sub-vendor, sub-device) or its class (24-bit ``class_code``) has no name; else None."""
        base, sub = class_code >> 16, class_code >> 8 & 0xFF
        names = [self.device(v, d), self.subclass_name(base, sub) or self.class_name(base)]
        if subsystem is not None:
            names.append(self.subsystem(v, d, *subsystem))
        missing = not self.available and any(n is None for n in names)
        return {"name_source": self.name_source(v, d), "name_hint": INSTALL_HINT if missing else None}

    # -- lspci-formatted names (§4.3) -------------------------------------------------------------------
    def class_text(self, class16: int, numeric: bool = True) -> str:
        """Class from ``base << 8 | sub``: ``Ethernet controller [0200]``, ``Class 0200`` ...

        Only the base class known: its name and the number, with or without ``-nn``.
        """
        sub = self.subclass_name(class16 >> 8, class16 & 0xFF)
        if sub is not None:
            return f"{sub} [{class16:04x}]" if numeric else sub
        base = self.class_name(class16 >> 8)
        if base is not None:
            return f"{base} [{class16:04x}]"
        return f"Class [{class16:04x}]" if numeric else f"Class {class16:04x}"

    def device_text(self, v: int, d: int, numeric: bool = True) -> str:
        """Vendor and device: ``Red Hat, Inc. Virtio 1.0 RNG [1af4:1044]`` and its fallbacks."""
        return _pair(self.vendor(v), self.device(v, d), v, d, numeric)

    def device_name(self, v: int, d: int) -> str:
        """Vendor and device as plain ``lspci`` prints them (no ``-nn``), for listings."""
        return self.device_text(v, d, numeric=False)

    def subsystem_text(self, v: int, d: int, sv: int, sd: int, numeric: bool = True) -> str:
        """What lspci prints after ``Subsystem:``; an unknown sub-vendor gives ``Device ssss:dddd``."""
        return _pair(self.vendor(sv), self.subsystem(v, d, sv, sd), sv, sd, numeric)

    def prog_if_text(self, class_code: int) -> str | None:
        """``(prog-if 00 [VGA controller])`` for a 24-bit class code; None when lspci prints nothing."""
        pi = class_code & 0xFF
        name = self.prog_if_name(class_code >> 16, class_code >> 8 & 0xFF, pi)
        if name is not None:
            return f"(prog-if {pi:02x} [{name}])"
        return f"(prog-if {pi:02x})" if pi else None


def _lines(body: str, top_lineno: int) -> list[tuple[int, str]]:
    """Indented lines of a block with their line numbers; comments and blank lines dropped.

    Lines nested deeper than two tabs are returned too and rejected by the callers' id checks.
    """
    out = []
    for n, raw in enumerate(body.split("\n"), top_lineno):
        ln = raw.rstrip()
        if ln and ln[0] != "#":
            out.append((n, ln))
    return out


def _pair(first: str | None, second: str | None, a: int, b: int, numeric: bool) -> str:
    ids = f"[{a:04x}:{b:04x}]"
    if first is None:
        return f"Device {ids}" if numeric else f"Device {a:04x}:{b:04x}"
    if second is None:
        return f"{first} Device {ids}" if numeric else f"{first} Device {b:04x}"
    return f"{first} {second} {ids}" if numeric else f"{first} {second}"


def find_pci_ids() -> str | None:
    """The file to use: ``$TINYHW_PCI_IDS`` if set (even if missing), else the first default path that exists."""
    env = os.environ.get(ENV_VAR)
    if env:
        return env
    return next((p for p in DEFAULT_PATHS if os.path.exists(p)), None)


_CACHE: dict[str | None, PciIds] = {}


def load_pci_ids(path: str | None = None) -> PciIds:
    """The database at ``path`` (default: :func:`find_pci_ids`), parsed once per process and path."""
    if path is None:
        path = find_pci_ids()
    db = _CACHE.get(path)
    if db is None:
        db = _CACHE[path] = PciIds.load(path)
    return db


def clear_cache() -> None:
    """Forget parsed databases (tests, or after ``update-pciids``)."""
    _CACHE.clear()
