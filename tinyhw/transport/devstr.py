"""Device strings, parsed in one place (ARCHITECTURE.md, "The transport seam").

The kinds and emulated boards, the forms their strings take and the options each takes are listed in the board
registry (:mod:`tinyhw.boards.registry`): ``pci:0000:03:00.0`` (or the bare address), ``vfio:0000:03:00.0``,
``usb``, ``usb:N``, ``usb:BUS-ADDR``, ``remote:HOST:PORT``, ``remote:unix[:PATH]``, ``remote:ssh://[user@]host/DEV``,
``labgrid:PLACE``, ``mock:BOARD`` (``mock:navi31``, ``mock:navi31-usb``, ``mock:ad102``) and ``cuda:N``.

Options follow after commas: ``mock:navi31-usb,flash=FILE,faults=timeout@5+stuck-busy,strict``. Parsing checks
the syntax and that the kind and board exist; the options' names and values are typed by the entry's options
class where the device is opened (``tinyhw.connect``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from tinyhw.boards import registry
from tinyhw.errors import BadDeviceString

_BDF = re.compile(r"^(?:(?P<dom>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])$")
_PLACE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")  # a labgrid place name, as tinyhw accepts it
_OPTION_KEY = re.compile(r"^[a-z][a-z0-9_-]*$")


@dataclass(frozen=True)
class DeviceSpec:
    """A parsed device string.

    ``kind`` is one of pci, vfio, usb, remote, labgrid, mock, cuda. ``target`` is the canonical
    address: a full BDF for pci/vfio; for usb ``""`` (any), ``"N"`` (index) or
    ``"BUS-ADDR"``; ``"HOST:PORT"``, ``"unix[:PATH]"`` or ``"ssh://[user@]host/DEV"`` for remote;
    the board name for mock; the ordinal ``"N"`` for cuda.
    """

    kind: str
    target: str
    options: dict[str, str | bool] = field(default_factory=dict)
    text: str = ""

    @property
    def is_mock(self) -> bool:
        """True for an emulated board (``mock:...``)."""
        return self.kind == "mock"

    def option(self, name: str, default: str | bool | None = None) -> str | bool | None:
        """The value of option ``name`` (``True`` for a bare flag), or ``default`` when it was not given."""
        return self.options.get(name, default)

    def __str__(self) -> str:
        base = f"{self.kind}:{self.target}" if self.target else self.kind
        opts = [k if v is True else f"{k}={v}" for k, v in self.options.items()]
        return ",".join([base, *opts])


def _bad(text: str, why: str) -> BadDeviceString:
    return BadDeviceString(f"bad device string {text!r}: {why}", hint=f"accepted forms: {registry.accepted_forms()}")


def normalize_bdf(addr: str, text: str) -> str:
    """``addr`` as a full lower-case PCI address ``dddd:bb:dd.f`` (domain 0000 added); raises BadDeviceString (``text``
    is the whole string, for the message)."""
    m = _BDF.match(addr)
    if not m:
        raise _bad(text, f"{addr!r} is not a PCI address like 0000:03:00.0")
    dom = m.group("dom") or "0000"  # 4 hex digits, or more for VMD-style domains (0000:... / 10000:...)
    return f"{dom}:{m.group('bus')}:{m.group('dev')}.{m.group('fn')}".lower()


def _parse_options(parts: list[str], text: str) -> dict[str, str | bool]:
    opts: dict[str, str | bool] = {}
    for p in parts:
        if not p:
            raise _bad(text, "empty option between commas")
        key, eq, value = p.partition("=")
        key = key.strip().lower()
        if not _OPTION_KEY.match(key):
            raise _bad(text, f"bad option name {key!r}")
        if eq and not value:
            raise _bad(text, f"option {key!r} has an empty value")
        opts[key] = value if eq else True
    return opts


def parse_device(text: str) -> DeviceSpec:
    """Parse a device string; raise :class:`BadDeviceString` (exit 2) showing the accepted forms."""
    if text is None or not text.strip():
        raise _bad(str(text), "empty")
    raw = text.strip()
    head, *opt_parts = raw.split(",")
    options = _parse_options(opt_parts, raw)
    kind, colon, rest = head.partition(":")
    kind = kind.lower()
    if kind in ("pci", "vfio"):
        if not colon or not rest:
            raise _bad(raw, f"{kind} needs a PCI address, e.g. {kind}:0000:03:00.0")
        return DeviceSpec(kind, normalize_bdf(rest, raw), options, raw)
    if kind == "usb":
        if not colon:
            return DeviceSpec("usb", "", options, raw)
        if re.fullmatch(r"\d+", rest):
            return DeviceSpec("usb", str(int(rest)), options, raw)
        if re.fullmatch(r"\d+-\d+", rest):
            bus, addr = (int(x) for x in rest.split("-"))
            return DeviceSpec("usb", f"{bus}-{addr}", options, raw)
        raise _bad(raw, "usb takes an index (usb:0) or a bus-address pair (usb:2-7)")
    if kind == "remote":
        return DeviceSpec("remote", _remote_target(rest if colon else "", raw), options, raw)
    if kind == "labgrid":
        if not colon or not _PLACE.fullmatch(rest):
            raise _bad(raw, "labgrid needs a place name (letters, digits, . _ -; at most 64), e.g. labgrid:gpu-bench")
        return DeviceSpec("labgrid", rest, options, raw)
    if kind == "mock":
        board = rest.lower()
        if registry.find("mock", board) is None:
            known = ", ".join(e.target for e in registry.boards())
            raise _bad(raw, f"unknown emulated board {rest!r} (known: {known})")
        return DeviceSpec("mock", board, options, raw)
    if kind == "cuda":
        if not colon or not re.fullmatch(r"\d+", rest):
            raise _bad(raw, "cuda takes a device ordinal, e.g. cuda:0")
        return DeviceSpec("cuda", str(int(rest)), options, raw)
    if _BDF.match(head):
        return DeviceSpec("pci", normalize_bdf(head, raw), options, raw)
    raise _bad(raw, f"unknown transport {kind!r} (known: {', '.join(registry.kinds())})")


def _remote_target(rest: str, raw: str) -> str:
    """``HOST:PORT`` (``[v6]:PORT``), ``unix``, ``unix:PATH`` or ``ssh://[user@]host/DEV``."""
    if rest.startswith("ssh://"):
        host, slash, dev = rest[6:].partition("/")
        if not host or not slash or not dev or any(c.isspace() for c in rest):
            raise _bad(raw, "remote over ssh needs ssh://[user@]host/DEVICE, e.g. remote:ssh://lab1/usb:0")
        return rest
    if rest == "unix" or rest.startswith("unix:"):
        return rest if rest != "unix:" else "unix"
    host, sep, port = rest.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise _bad(raw, "remote needs HOST:PORT, unix[:PATH] or ssh://[user@]host/DEV, e.g. remote:127.0.0.1:7788")
    return f"{host}:{int(port)}"
def given_device(option: str | None, environ: Mapping[str, str] | None = None) -> DeviceSpec | None:
    """The device the user named: the ``--device`` option if it was given at all, else ``$TINYHW_DEVICE``;
    None when neither names one (a read-only command may then pick the single device present).

    An option given but empty (``--device ""``) is a bad device string (exit 2), never "pick one": a
    script whose variable came out empty must not reach another device. An empty ``$TINYHW_DEVICE``
    counts as unset.
    """
    if option is not None:
        return parse_device(option)
    env = (os.environ if environ is None else environ).get("TINYHW_DEVICE")
    return parse_device(env) if env and env.strip() else None
