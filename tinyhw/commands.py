"""Tables of named command handlers, declared by decorator (facedancer's ``@vendor_request_handler`` is the model).

Every command table of tinyhw is one of these: an emulated block declares what it answers -- SMU messages, SDMA
and PM4 packets, PSP commands, SPI flash opcodes, the bridge's vendor requests -- and the serprog server the
commands flashrom sends, as methods named after what they do, each registered under the key the hardware (or the
protocol) sees (a message name, an opcode, an opcode pair, a (bmRequestType, bRequest) pair). What a table holds
is the list of what it supports (``key in table``, iteration), so no second list is kept beside it::

    MESSAGES = CommandTable("smu message")

    class Smu:
        @MESSAGES.handles("SetSoftMinByFreq", limit="min")
        @MESSAGES.handles("SetSoftMaxByFreq", limit="max")
        def set_clock_limit(self, arg, limit): ...

        def execute(self, name, arg):
            return MESSAGES.dispatch(self, name, arg)

The table is built once, when the class is defined (never per call); keyword arguments given at registration
are passed to the handler, so one handler can serve a family of keys. Registering one key twice is an error at
import time.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Handler:
    """One table entry: the function (an unbound method) and the keyword arguments it is registered with."""

    fn: Callable[..., Any]
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The handler's function name, which says what the command does (used in listings and errors)."""
        return self.fn.__name__

    def __call__(self, owner: object, *args: Any) -> Any:
        return self.fn(owner, *args, **self.extra)


class CommandTable(Generic[K]):
    """Handlers of one kind of command (``what`` names it in errors), keyed by what the hardware sees."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._entries: dict[K, Handler] = {}

    def handles(self, key: K, **extra: Any) -> Callable[[F], F]:
        """Decorator: register the method as the handler of ``key`` (``extra`` is passed to it as keywords)."""

        def register(fn: F) -> F:
            if key in self._entries:
                raise ValueError(f"{self.what} {key!r} already handled by {self._entries[key].name}")
            self._entries[key] = Handler(fn, dict(extra))
            return fn

        return register

    def get(self, key: K) -> Handler | None:
        """The handler of ``key``, None when the table has none."""
        return self._entries.get(key)

    def dispatch(self, owner: object, key: K, *args: Any) -> Any:
        """Call ``key``'s handler on ``owner`` with ``args``; KeyError when the table has none."""
        handler = self._entries.get(key)
        if handler is None:
            raise KeyError(f"no handler for {self.what} {key!r}")
        return handler(owner, *args)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[K]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> dict[K, str]:
        """Key -> handler name, for documentation and tests."""
        return {k: h.name for k, h in self._entries.items()}
