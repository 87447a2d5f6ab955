"""Typed device-string options: one dataclass per board and device kind (ARCHITECTURE.md "Emulated boards").

Each field of an options class that is declared with :func:`option` is one device-string option: its name in the
string, its type (:func:`flag`, :func:`choice`, :func:`path`, ... or any :class:`OptionType`), its default and a
one-line description. :meth:`DeviceOptions.from_options` turns the ``name=value`` pairs of a parsed device string
into the class, refusing an option the class does not declare (naming the ones it does) and a value its type
refuses (:class:`~tinyhw.errors.BadDeviceString`, exit 2). Adding an option is one field::

    sdma: str = option(choice("normal", "hang"), "normal", "hang: SDMA0 never executes its ring")
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from tinyhw.errors import BadDeviceString

T = TypeVar("T", bound="DeviceOptions")
Raw = str | bool  # what the device string holds: the text after ``=``, or True for a bare name


@dataclass(frozen=True)
class OptionType:
    """How an option's value is written (``text``, for help) and read (``parse``: the value's text -> the value;
    it raises ValueError with the reason, or BadDeviceString with a message of its own). A ``flag`` is written
    bare (``strict``) and parsed from True."""

    text: str
    parse: Callable[[str], Any]
    flag: bool = False


@dataclass(frozen=True)
class Option:
    """One declared option: its name in the device string, the field it fills, its type and description."""

    name: str
    field: str
    type: OptionType
    help: str
    env: str | None = None  # an environment variable read when the option is not given

    @property
    def usage(self) -> str:
        """How it is written: ``strict``, ``psp=pbl|early|...``, ``flash=FILE``."""
        return self.name if self.type.flag else f"{self.name}={self.type.text}"

    def read(self, raw: Raw) -> Any:
        """The typed value of ``raw`` (exit 2 with a one-line reason when the type refuses it)."""
        if raw is True:
            if self.type.flag:
                return True
            raise BadDeviceString(f"option {self.name} needs a value: {self.usage}", hint=self.help)
        return self._parse(str(raw), f"option {self.name}={raw}")

    def read_env(self, environ: Mapping[str, str]) -> Any:
        """The value ``$env`` gives (``dataclasses.MISSING`` when unset or empty)."""
        text = environ.get(self.env or "", "").strip()
        if not text:
            return dataclasses.MISSING
        if self.type.flag:
            return text != "0"
        return self._parse(text, f"{self.env}={text}")

    def _parse(self, text: str, shown: str) -> Any:
        try:
            return self.type.parse(text)
        except ValueError as e:
            raise BadDeviceString(f"{shown} is not {e}", hint=f"{self.usage}: {self.help}") from None


def option(type: OptionType, default: Any = None, help: str = "", *, name: str | None = None,
           env: str | None = None, factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field that is a device-string option (``name`` defaults to the field's name, ``_`` as ``-``)."""
    meta = {"option": (type, help, name, env)}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def strict_option() -> Any:
    """The ``strict`` option every emulated board takes: raise on an access its model does not cover."""
    return option(flag(), False, "raise on an access the model does not cover (also TINYHW_STRICT=1)",
                  env="TINYHW_STRICT")


# -- option types ---------------------------------------------------------------------------------------------------
def flag() -> OptionType:
    """Written bare (``strict``); ``strict=on|off`` (or 1/0, yes/no) also works."""
    words = {"on": True, "1": True, "yes": True, "off": False, "0": False, "no": False}

    def parse(text: str) -> bool:
        if text.lower() not in words:
            raise ValueError("on or off (or the bare name)")
        return words[text.lower()]

    return OptionType("on|off", parse, flag=True)


def choice(*values: str) -> OptionType:
    """One of ``values`` (case-insensitive)."""

    def parse(text: str) -> str:
        if text.lower() not in values:
            raise ValueError(f"one of {', '.join(values)}")
        return text.lower()

    return OptionType("|".join(values), parse)


def path() -> OptionType:
    """A file name (``~`` expanded)."""
    return OptionType("FILE", lambda text: Path(text).expanduser())


def number(lo: float, hi: float, unit: str) -> OptionType:
    """A decimal number in ``lo..hi``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not lo <= value <= hi:
            raise ValueError(f"a number of {unit} {lo:g}..{hi:g}")
        return value

    return OptionType(unit[0].upper(), parse)


def integer(lo: int, hi: int, what: str) -> OptionType:
    """A whole decimal number in ``lo..hi`` (``what`` names it in help texts)."""

    def parse(text: str) -> int:
        if not text.isdigit() or not lo <= int(text) <= hi:
            raise ValueError(f"a whole number {lo}..{hi}")
        return int(text)

    return OptionType(what.upper(), parse)


def percent(named: Mapping[str, int]) -> OptionType:
    """A percentage 0..100, or one of the ``named`` ones."""

    def parse(text: str) -> int:
        text = text.lower()
        if text in named:
            return named[text]
        if text.isdigit() and int(text) <= 100:
            return int(text)
        raise ValueError(f"{', '.join(named)} or a percentage 0..100")

    return OptionType("|".join([*named, "N"]), parse)


def pattern(text: str, regex: str, what: str) -> OptionType:
    """A value matching ``regex`` (case-insensitive, kept lower-case); ``what`` says in words what it may be."""

    def parse(value: str) -> str:
        if not re.fullmatch(regex, value.lower()):
            raise ValueError(what)
        return value.lower()

    return OptionType(text, parse)


# -- fault plans (the faults= option of the emulated boards) --------------------------------------------------------
FAULT_KINDS_AT = ("disconnect", "timeout", "bitflip", "ur", "ca", "crs", "tlp-error", "tlp-timeout", "stall",
                  "psp-disconnect", "psp-timeout", "psp-spi")
FAULT_KINDS_FLAG = ("stuck-busy", "psp-badsig", "psp-cut-commit")


@dataclass(frozen=True)
class Fault:
    """One injected fault: its kind, and the transfer or access number (1-based) or flash byte address it fires at."""

    kind: str
    at: int | None = None  # transfer / access number (1-based), or flash byte address for bitflip


@dataclass
class FaultPlan:
    """Faults for one command.

    ``disconnect@N``, ``timeout@N``, ``stall@N``: the N-th transfer the driver submits
    (register access on ``mock:navi31``) fails that way (N counts from 1, from the
    start of the process). ``ur@N``, ``ca@N``, ``crs@N``, ``tlp-error@N``,
    ``tlp-timeout@N``: the first non-posted TLP whose request is transfer N or later
    completes with that status (``tlp-error``: engine error, result 1;
    ``tlp-timeout``: result 0xff). ``stuck-busy``: the flash never leaves BUSY.
    ``bitflip@ADDR``: the first read covering flash byte ADDR gets one bit flipped.
    The emulated Navi31's early-boot flash update (tinyhw.mocks.amd.pspupdate): ``psp-disconnect@K`` /
    ``psp-timeout@K``: the board loses power / the PSP never answers at the K-th DATA_TRANSFER of the
    command; ``psp-badsig``: the payload's signature check fails (status 0x0D); ``psp-spi@N``: the N-th
    sector the PSP writes fails (status 0x0C); ``psp-cut-commit``: the board loses power right after
    the PSP committed an update, before it answers.
    """

    faults: list[Fault] = field(default_factory=list)

    def at(self, kind: str) -> list[int]:
        """The numbers (or addresses) at which faults of ``kind`` fire."""
        return [f.at for f in self.faults if f.kind == kind and f.at is not None]

    def has(self, kind: str) -> bool:
        """True when a fault of ``kind`` is planned."""
        return any(f.kind == kind for f in self.faults)

    @classmethod
    def parse(cls, text: str | None) -> FaultPlan:
        """Parse a ``faults=`` value (``F1+F2+...``, each ``kind@N`` or a bare flag kind); raises BadDeviceString (exit
        2) for an unknown kind or a missing or unexpected ``@N``."""
        plan = cls()
        if not text:
            return plan
        for item in text.split("+"):
            m = re.fullmatch(r"([a-z-]+)(?:@(0x[0-9a-fA-F]+|\d+))?", item.strip())
            if not m:
                raise BadDeviceString(f"bad fault {item!r}", hint=_FAULT_HINT)
            kind, at = m.group(1), m.group(2)
            if kind in FAULT_KINDS_AT:
                if at is None:
                    raise BadDeviceString(f"fault {kind!r} needs @N", hint=_FAULT_HINT)
                plan.faults.append(Fault(kind, int(at, 0)))
            elif kind in FAULT_KINDS_FLAG:
                if at is not None:
                    raise BadDeviceString(f"fault {kind!r} takes no @N", hint=_FAULT_HINT)
                plan.faults.append(Fault(kind))
            else:
                raise BadDeviceString(f"unknown fault {kind!r}", hint=_FAULT_HINT)
        return plan


_FAULT_HINT = (
    "faults are joined with '+': disconnect@N, timeout@N, stall@N, ur@N, ca@N, crs@N, tlp-error@N, "
    "tlp-timeout@N, stuck-busy, bitflip@ADDR, psp-disconnect@K, psp-timeout@K, psp-spi@N, psp-badsig, "
    "psp-cut-commit"
)


def faults() -> OptionType:
    """A fault plan (:class:`FaultPlan`)."""
    return OptionType("F1+F2", FaultPlan.parse)


# -- the options classes --------------------------------------------------------------------------------------------
@dataclass
class DeviceOptions:
    """Base of every options class: the declared options, and reading them from a device string."""

    @classmethod
    def declared(cls) -> dict[str, Option]:
        """Option name -> :class:`Option`, in declaration order."""
        out: dict[str, Option] = {}
        for f in dataclasses.fields(cls):
            if "option" in f.metadata:
                type_, help_, name, env = f.metadata["option"]
                n = name or f.name.replace("_", "-")
                out[n] = Option(n, f.name, type_, help_, env)
        return out

    @classmethod
    def check_names(cls, options: Mapping[str, Raw], label: str = "this device") -> None:
        """Refuse (exit 2) a name the class does not declare, naming the ones it does."""
        allowed = cls.declared()
        unknown = [k for k in options if k not in allowed]
        if unknown:
            raise BadDeviceString(f"{label} does not take option(s) {', '.join(unknown)} "
                                  f"(unknown option; allowed: {', '.join(allowed) or 'none'})")

    @classmethod
    def from_options(cls: type[T], options: Mapping[str, Raw], label: str = "this device",
                     environ: Mapping[str, str] | None = None) -> T:
        """The typed options of a device string's ``name=value`` pairs (options not given: ``$env``, else the
        default)."""
        cls.check_names(options, label)
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name, opt in cls.declared().items():
            value = opt.read(options[name]) if name in options else opt.read_env(environ) if opt.env else \
                dataclasses.MISSING
            if value is not dataclasses.MISSING:
                values[opt.field] = value
        return cls(**values)


@dataclass
class NoOptions(DeviceOptions):
    """A device kind that takes no options."""

