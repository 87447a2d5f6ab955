"""A restricted loader for tinygrad profile pickles (specs/sqtt-pmc.md §7, §11.2).

tinygrad writes its profile (``profile.pkl``) as a pickled list of event dataclasses. The plain
unpickler would import tinygrad and can run arbitrary code chosen by whoever wrote the file, so this
loader never imports or calls anything: :meth:`SafeUnpickler.find_class` answers

- ``decimal.Decimal`` (timestamps) with the real class -- constructing a Decimal runs no user code;
- any ``tinygrad.*`` name with an inert placeholder class (:class:`Record`) that only stores its
  constructor arguments and ``__setstate__`` state;
- everything else (``os.system``, ``builtins.eval``, ``subprocess.*``, ...) with :class:`Refused`
  (exit 2), before the object is built.

Persistent ids are refused too. Files larger than :data:`MAX_PICKLE_BYTES` are refused before they
are read.
"""

from __future__ import annotations

import decimal
import io
import pickle
from typing import Any

from tinyhw.errors import Refused

__all__ = ["MAX_PICKLE_BYTES", "Record", "SafeUnpickler", "loads_profile"]

# A profile holds one trace per shader engine per traced kernel (SQTT_BUFFER_SIZE defaults to 256 MiB
# per SE, but real traces are far smaller); 1 GiB bounds the memory the loader can be made to use.
MAX_PICKLE_BYTES = 1 << 30

ALLOWED = {("decimal", "Decimal"): decimal.Decimal}


class Record:
    """An inert stand-in for a tinygrad object: class name, constructor args and state, nothing else."""

    _module = ""
    _qualname = ""

    def __new__(cls, *args: Any, **kwargs: Any) -> Record:
        self = object.__new__(cls)
        object.__setattr__(self, "args", tuple(args))
        object.__setattr__(self, "fields", dict(kwargs))
        return self

    def __init__(self, *args: Any, **kwargs: Any) -> None:  # REDUCE calls the class: keep the args
        if args and not self.args:
            object.__setattr__(self, "args", tuple(args))
        self.fields.update(kwargs)

    def __setstate__(self, state: Any) -> None:
        if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
            for part in state:
                if isinstance(part, dict):
                    self.fields.update({str(k): v for k, v in part.items()})
        elif isinstance(state, dict):
            self.fields.update({str(k): v for k, v in state.items()})
        else:
            self.fields["__state__"] = state

    def __setattr__(self, name: str, value: Any) -> None:  # BUILD without __setstate__ never happens
        self.fields[name] = value

    @property
    def type_name(self) -> str:
        return self._qualname

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def __repr__(self) -> str:
        return f"<{self._module}.{self._qualname} {self.args!r} {sorted(self.fields)!r}>"


_PLACEHOLDERS: dict[tuple[str, str], type] = {}


def _placeholder(module: str, name: str) -> type:
    key = (module, name)
    cls = _PLACEHOLDERS.get(key)
    if cls is None:
        cls = type(name.replace(".", "_") or "Record", (Record,), {"_module": module, "_qualname": name})
        _PLACEHOLDERS[key] = cls
    return cls


class SafeUnpickler(pickle.Unpickler):
    """Unpickler with an allow-list; tinygrad classes become :class:`Record` placeholders."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in ALLOWED:
            return ALLOWED[(module, name)]
        if module == "tinygrad" or module.startswith("tinygrad."):
            return _placeholder(module, name)
        raise Refused(f"pickle refers to {module}.{name}, which a tinygrad profile never contains; not loaded",
                      hint="only tinygrad profile pickles are read (nothing in them is executed)")

    def persistent_load(self, pid: Any) -> Any:
        raise Refused("pickle uses persistent ids, which a tinygrad profile never contains; not loaded")


def loads_profile(data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES) -> list[Any]:
    """Unpickle a tinygrad profile without importing or executing anything; a list of events."""
    if len(data) > max_bytes:
        raise Refused(f"pickle is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        obj = SafeUnpickler(io.BytesIO(data)).load()
    except Refused:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, IndexError, KeyError, AttributeError,
            RecursionError, MemoryError, decimal.InvalidOperation, UnicodeDecodeError) as e:
        raise Refused(f"not a readable profile pickle: {type(e).__name__}: {e}") from None
    if not isinstance(obj, list):
        raise Refused(f"pickle holds a {type(obj).__name__}, not a list of profile events")
    return obj
