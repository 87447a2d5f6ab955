"""A restricted, bounded loader for tinygrad profile pickles (specs/sqtt-pmc.md §7, §11.2).

tinygrad writes its profile (``profile.pkl``) as a pickled list of event dataclasses. The plain
unpickler would import tinygrad and can run arbitrary code chosen by whoever wrote the file, so this
loader never imports or calls anything: :meth:`SafeUnpickler.find_class` answers

- ``decimal.Decimal`` (timestamps) with the real class -- constructing a Decimal runs no user code;
- any ``tinygrad.*`` name with an inert placeholder class (:class:`Record`) that only stores its
  constructor arguments and ``__setstate__`` state;
- everything else (``os.system``, ``builtins.eval``, ``subprocess.*``, ...) with :class:`Refused`
  (exit 2), before the object is built.

Persistent ids and the extension registry are refused too. Every resource the file can make the
loader spend is bounded by what the file holds or by a fixed cap, each refused with exit 2:

- the file: at most :data:`MAX_PICKLE_BYTES`, refused before it is read;
- the memo is a dict (the pure-Python unpickler's), and a memo index may be at most the number of
  values memoized so far (what a pickler writes), so an index of 2**32 in an 11-byte file costs nothing
  (the C unpickler would size an array to it);
- opcodes: :data:`MAX_OPS`; the objects they build, estimated per opcode in bytes (a set 224, a tinygrad
  record 320, ...): :data:`BUILT_PER_BYTE` per byte of the file plus :data:`BUILT_BASE`, so memory stays
  proportional to the input, refused as soon as it is passed; MARK nesting: :data:`MAX_MARKS`; the nesting depth
  of the loaded object graph, walked without recursion and counting each shared object once:
  :data:`MAX_DEPTH`; distinct tinygrad class names: :data:`MAX_CLASSES`; integer opcodes: at most
  :data:`MAX_LONG_BYTES` bytes; a bytearray no longer than the file (the pure-Python unpickler would
  allocate whatever length the file announces);
- dict keys and set members must be strings, small integers, booleans or None (all a profile
  holds): nothing else is hashed, so a shared-tuple tree or a crafted hash collision as a key cannot
  make hashing exponential or quadratic.

The loader never formats (``str``/``repr``) what it loaded; callers convert the fields they need
with type and range checks (tinyhw.prof.capture) and name the field they refuse.
"""

from __future__ import annotations

import decimal
import io
import pickle
import struct
from collections.abc import Callable
from typing import Any

from tinyhw.errors import Refused

__all__ = ["MAX_DEPTH", "MAX_OPS", "MAX_PICKLE_BYTES", "Record", "SafeUnpickler", "describe", "graph_depth",
           "loads_profile"]

# A profile holds one trace per shader engine per traced kernel (SQTT_BUFFER_SIZE defaults to 256 MiB
# per SE, but real traces are far smaller); 1 GiB bounds the memory the loader can be made to use.
MAX_PICKLE_BYTES = 1 << 30
# The ten real profiles of tests/data/sqtt have 5,200-14,200 opcodes, MARK nesting <= 11, object depth
# <= 24, <= 31 tinygrad class names and integers of <= 8 bytes; the caps leave room for profiles of
# whole models (a range event is about 15 opcodes) and stay far below what a machine can hold.
MAX_OPS = 1 << 22
# The objects a profile builds, bounded by its size: tinygrad's own profiles build 5-30 bytes of Python objects per
# byte of pickle (measured with tracemalloc: the vendored ones 5-6, 100,000 range events 24-30; the estimate below
# says 5-8 and 35-44 for them); a file of one-byte EMPTY_SET opcodes would build 224 per byte (4 MiB of them held
# 1.5 GB). Refused past BUILT_PER_BYTE per byte: twice what the range events are estimated at, and a set-per-byte
# file is stopped at under half its cost.
BUILT_PER_BYTE = 96
BUILT_BASE = 32 << 20
MAX_MARKS = 256
MAX_DEPTH = 1000
MAX_CLASSES = 4096
MAX_NAME = 512          # characters of a module or class name
MAX_LONG_BYTES = 64
MAX_KEY_INT = (1 << 61) - 2   # below the int hash modulus: distinct integers hash apart

ALLOWED = {("decimal", "Decimal"): decimal.Decimal}


class Record:
    """An inert stand-in for a tinygrad object: class name, constructor args and state, nothing else."""

    _module = ""
    _qualname = ""
    args: tuple[Any, ...]       # set in __new__ (past __setattr__, which stores fields)
    fields: dict[str, Any]

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
        parts = state if isinstance(state, tuple) and len(state) == 2 else (state,)  # (dict state, slot state)
        if not all(isinstance(p, dict) or p is None for p in parts):
            self.fields["__state__"] = state
            return
        for part in parts:
            for k, v in (part or {}).items():
                if not isinstance(k, str):
                    raise Refused(f"pickle gives {_one_line(self._qualname)} a field named by a {type(k).__name__}, "
                                  "not a string; not a tinygrad profile")
                self.fields[k] = v

    def __setattr__(self, name: str, value: Any) -> None:  # BUILD without __setstate__ never happens
        self.fields[name] = value

    @property
    def type_name(self) -> str:
        """The qualified name of the tinygrad class this record stands in for."""
        return self._qualname

    def get(self, name: str, default: Any = None) -> Any:
        """The field ``name`` of the record, or ``default``."""
        return self.fields.get(name, default)

    def __repr__(self) -> str:  # never the arguments: they are untrusted and may be a huge shared tree
        return f"<{self._module}.{self._qualname} record: {len(self.args)} args, {len(self.fields)} fields>"


def _one_line(text: str, limit: int = 80) -> str:
    """A name from the pickle as error text: at most ``limit`` characters of it, escaped to printable ASCII (a
    hostile name may hold newlines or control characters; an error is always one line)."""
    return text[:limit].encode("unicode_escape").decode("ascii")


def _placeholder_class(module: str, name: str) -> type:
    return type(name.replace(".", "_") or "Record", (Record,), {"_module": module, "_qualname": name})


def _key_ok(k: Any) -> bool:
    """A dict key or set member a profile can hold, whose hash costs nothing and cannot be made to collide."""
    return k is None or isinstance(k, str) or (isinstance(k, int) and -MAX_KEY_INT <= k <= MAX_KEY_INT)


def _refuse_key(k: Any) -> None:
    raise Refused(f"pickle uses a value of type {type(k).__name__} as a dict key or set member, which a tinygrad "
                  "profile never does; not loaded")


_BASE = pickle._Unpickler  # the pure-Python unpickler: a dict memo and a dispatch table per opcode


# What each opcode builds, in bytes of Python objects (about sys.getsizeof of what it makes, plus its stack or
# memo slot); every other opcode 32. A string's or bytes' contents are not counted: they are bounded by the file.
_BUILDS = {
    **dict.fromkeys((pickle.EMPTY_SET, pickle.FROZENSET), 224),
    **dict.fromkeys((pickle.EMPTY_DICT, pickle.DICT), 72),
    **dict.fromkeys((pickle.EMPTY_LIST, pickle.LIST), 64),
    **dict.fromkeys((pickle.NEWOBJ, pickle.NEWOBJ_EX, pickle.REDUCE, pickle.OBJ, pickle.INST), 320),   # a Record
    **dict.fromkeys((pickle.MEMOIZE, pickle.PUT, pickle.BINPUT, pickle.LONG_BINPUT), 80),   # a memo entry
    **dict.fromkeys((pickle.SETITEM, pickle.SETITEMS, pickle.BUILD), 48),
}
_COST = {code[0]: cost for code, cost in _BUILDS.items()}


def _counted(fn: Callable[[Any], None], cost: int) -> Callable[[Any], None]:
    def op(self: SafeUnpickler) -> None:
        self.ops += 1
        self.cost += cost
        if self.ops > self.max_ops:
            raise Refused(f"pickle has more than {self.max_ops} opcodes; not loaded")
        if self.cost > self.max_cost:
            raise Refused(f"pickle builds more objects than a {self.size}-byte profile can hold (about "
                          f"{self.max_cost >> 20} MiB of them); not loaded")
        fn(self)
    return op


def _put(self: SafeUnpickler, i: int) -> None:
    # the pickler memoizes values in order: index == number memoized so far (or an earlier one, rewritten)
    if not 0 <= i <= len(self.memo):
        raise Refused(f"pickle memo index {i} lies beyond the {len(self.memo)} values memoized so far; not loaded")
    if not self.stack:
        raise Refused("pickle memoizes from an empty stack; not loaded")
    self.memo[i] = self.stack[-1]


def _load_put(self: SafeUnpickler) -> None:
    text = self.readline()[:-1]
    if not text.isdigit() or len(text) > 12:
        raise Refused("pickle PUT index is not a small decimal number; not loaded")
    _put(self, int(text))


def _load_binput(self: SafeUnpickler) -> None:
    _put(self, self.read(1)[0])


def _load_long_binput(self: SafeUnpickler) -> None:
    _put(self, struct.unpack("<I", self.read(4))[0])


def _base_op(code: bytes) -> Callable[[Any], None]:
    """The pure-Python unpickler's own handler of opcode ``code``."""
    return _BASE.dispatch[code[0]]


def _load_mark(self: SafeUnpickler) -> None:
    if len(self.metastack) >= MAX_MARKS:
        raise Refused(f"pickle nests MARKs deeper than {MAX_MARKS}; not loaded")
    _base_op(pickle.MARK)(self)


def _check_keys(items: list[Any], step: int) -> None:
    for k in items[::step]:
        if not _key_ok(k):
            _refuse_key(k)


def _load_setitem(self: SafeUnpickler) -> None:
    if len(self.stack) >= 2 and not _key_ok(self.stack[-2]):
        _refuse_key(self.stack[-2])
    _base_op(pickle.SETITEM)(self)


def _with_mark_items_checked(code: bytes, step: int) -> Callable[[Any], None]:
    """SETITEMS / DICT (keys at even places since the MARK), ADDITEMS / FROZENSET (every member)."""
    original = _base_op(code)

    def op(self: SafeUnpickler) -> None:
        _check_keys(self.stack, step)   # self.stack holds what was pushed since the MARK
        original(self)
    return op


def _load_long4(self: SafeUnpickler) -> None:
    n = struct.unpack("<i", self.read(4))[0]
    if not 0 <= n <= MAX_LONG_BYTES:
        raise Refused(f"pickle holds a {n}-byte integer (at most {MAX_LONG_BYTES}); not loaded")
    data = self.read(n)
    if len(data) != n:
        raise Refused("pickle ends inside an integer; not loaded")
    self.append(int.from_bytes(data, "little", signed=True))


def _load_bytearray8(self: SafeUnpickler) -> None:
    # the pure-Python unpickler would allocate the announced length before reading: read what is there instead
    n = struct.unpack("<Q", self.read(8))[0]
    if n > self.size:
        raise Refused(f"pickle announces a {n}-byte bytearray in a {self.size}-byte file; not loaded")
    data = self.read(n)
    if len(data) != n:
        raise Refused("pickle ends inside a bytearray; not loaded")
    self.append(bytearray(data))


def _refuse_extension(self: SafeUnpickler) -> None:
    raise Refused("pickle uses the extension registry (EXT1/2/4), which a tinygrad profile never does; not loaded")


def _dispatch() -> dict[int, Callable[[Any], None]]:
    table: dict[int, Callable[[Any], None]] = dict(_BASE.dispatch)
    table.update({
        pickle.PUT[0]: _load_put, pickle.BINPUT[0]: _load_binput, pickle.LONG_BINPUT[0]: _load_long_binput,
        pickle.MARK[0]: _load_mark, pickle.SETITEM[0]: _load_setitem,
        pickle.SETITEMS[0]: _with_mark_items_checked(pickle.SETITEMS, 2),
        pickle.DICT[0]: _with_mark_items_checked(pickle.DICT, 2),
        pickle.ADDITEMS[0]: _with_mark_items_checked(pickle.ADDITEMS, 1),
        pickle.FROZENSET[0]: _with_mark_items_checked(pickle.FROZENSET, 1),
        pickle.LONG4[0]: _load_long4, pickle.BYTEARRAY8[0]: _load_bytearray8,
        pickle.EXT1[0]: _refuse_extension, pickle.EXT2[0]: _refuse_extension, pickle.EXT4[0]: _refuse_extension,
    })
    return {code: _counted(fn, _COST.get(code, 32)) for code, fn in table.items()}


class SafeUnpickler(_BASE):
    """Unpickler with an allow-list and bounds; tinygrad classes become :class:`Record` placeholders."""

    dispatch = _dispatch()
    # set by the pure-Python unpickler (its __init__ and load()), which typeshed does not describe
    memo: dict[int, Any]
    stack: list[Any]
    metastack: list[list[Any]]
    read: Callable[[int], bytes]
    readline: Callable[[], bytes]
    append: Callable[[Any], None]

    def __init__(self, file: Any, *, size: int, max_ops: int = MAX_OPS) -> None:
        super().__init__(file)
        self.size = size        # bytes in the input: no string, bytes or bytearray can be longer
        self.ops = 0
        self.max_ops = max_ops
        self.cost = 0           # bytes of objects built so far (estimated per opcode, see _BUILDS)
        self.max_cost = BUILT_PER_BYTE * size + BUILT_BASE
        self._classes: dict[tuple[str, str], type] = {}   # per load: nothing outlives the result

    def find_class(self, module: str, name: str) -> Any:
        """Only the allowed tinygrad classes (as inert records) and safe builtins; anything else refused."""
        if not isinstance(module, str) or not isinstance(name, str) or len(module) > MAX_NAME \
                or len(name) > MAX_NAME:
            raise Refused("pickle names a class whose name is not a short string; not loaded")
        if (module, name) in ALLOWED:
            return ALLOWED[(module, name)]
        if module == "tinygrad" or module.startswith("tinygrad."):
            key = (module, name)
            cls = self._classes.get(key)
            if cls is None:
                if len(self._classes) >= MAX_CLASSES:
                    raise Refused(f"pickle names more than {MAX_CLASSES} tinygrad classes; not loaded")
                cls = self._classes[key] = _placeholder_class(module, name)
            return cls
        raise Refused(f"pickle refers to {_one_line(module)}.{_one_line(name)}, which a tinygrad profile never "
                      "contains; not loaded",
                      hint="only tinygrad profile pickles are read (nothing in them is executed)")

    def persistent_load(self, pid: Any) -> Any:
        """Always refused: a tinygrad profile never contains persistent ids."""
        raise Refused("pickle uses persistent ids, which a tinygrad profile never contains; not loaded")


def _children(o: Any) -> tuple | list | None:
    if isinstance(o, list | tuple | set | frozenset):
        return o if isinstance(o, list | tuple) else list(o)
    if isinstance(o, dict):
        return [*o.keys(), *o.values()]
    if isinstance(o, Record):
        return [*o.args, *o.fields.values()]
    return None


def graph_depth(root: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of ``root`` (a leaf is 0), each shared object visited once, no recursion; refuses past ``limit``.

    A reference cycle adds nothing (the edge back to an object being walked is not followed).
    """
    depth: dict[int, int] = {}
    open_: set[int] = set()
    keep: list[Any] = []      # ids are only unique while the objects live
    work: list[tuple[Any, bool]] = [(root, False)]
    while work:
        o, done = work.pop()
        k = id(o)
        if done:
            d = 1 + max((depth.get(id(c), 0) for c in _children(o) or ()), default=0)
            if d > limit:
                raise Refused(f"pickle nests objects deeper than {limit}; not loaded")
            depth[k] = d
            open_.discard(k)
            continue
        if k in depth or k in open_:
            continue
        kids = _children(o)
        if not kids:
            depth[k] = 0
            continue
        open_.add(k)
        keep.append(o)
        work.append((o, True))
        work.extend((c, False) for c in kids if id(c) not in depth and id(c) not in open_)
    return depth[id(root)]


_MAGIC = ((b"\x7fELF", "an ELF file"), (b"\x1f\x8b", "gzip-compressed"), (b"\xfd7zXZ\x00", "xz-compressed"),
          (b"PK\x03\x04", "a zip archive"), (b"\x0a\x0d\x0d\x0a", "a pcapng file"), (b"BZh", "bzip2-compressed"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed"))


def describe(data: bytes) -> str:
    """What a file that does not unpickle is, in words, for "X is not a tinygrad profile pickle: it is ..."."""
    for magic, words in _MAGIC:
        if data.startswith(magic):
            return f"it is {words}"
    head = data[:4096]
    if data[:1] == pickle.PROTO and len(data) > 1 and 2 <= data[1] <= pickle.HIGHEST_PROTOCOL:
        return "its pickle data is damaged"
    text: str | None
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        text = head[:e.start].decode("utf-8") if e.start > len(head) - 4 else None
    if text is not None and sum(c.isprintable() or c in "\t\r\n" for c in text) >= 0.95 * max(len(text), 1):
        return "it is text" + (" (json)" if text.lstrip()[:1] in ("{", "[") else "")
    return "it holds bytes that are not a pickle"


def _why(e: BaseException, data: bytes) -> str:
    """Why unpickling stopped, in words (never the exception's own text)."""
    kind = describe(data)
    if kind != "its pickle data is damaged" and not data.startswith(pickle.PROTO):
        return kind
    text = str(e).lower()
    if isinstance(e, EOFError | IndexError | struct.error) or "truncated" in text or "exhausted" in text:   # short read
        return f"it ends early, after {len(data)} bytes (a truncated pickle?)"
    if "memo" in text:
        return "its pickle data is damaged (it refers to a value it never stored)"
    if isinstance(e, KeyError):
        return "its pickle data is damaged (an opcode no pickle has)"
    return "its pickle data is damaged"


def loads_profile(data: bytes, *, max_bytes: int = MAX_PICKLE_BYTES, max_ops: int = MAX_OPS,
                  max_depth: int = MAX_DEPTH, source: str = "the file") -> list[Any]:
    """Unpickle a tinygrad profile without importing or executing anything, within bounds; a list of events.

    A file that does not unpickle is refused saying what it is instead (``source`` names it): text, JSON, an ELF
    file, compressed data, a truncated or damaged pickle, bytes that are no pickle."""
    if len(data) > max_bytes:
        raise Refused(f"pickle is {len(data)} bytes, over the {max_bytes}-byte limit")
    try:
        obj = SafeUnpickler(io.BytesIO(data), size=len(data), max_ops=max_ops).load()
    except Refused:
        raise
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, LookupError, AttributeError, struct.error,
            ArithmeticError) as e:  # no MemoryError or RecursionError: the bounds above make both a bug
        raise Refused(f"{source} is not a tinygrad profile pickle: {_why(e, data)}",
                      hint="pass a tinygrad profile pickle (VIZ=-2 or PROFILE=1 writes one) or a capture "
                           "directory") from None
    if not isinstance(obj, list):
        raise Refused(f"pickle holds a {type(obj).__name__}, not a list of profile events")
    graph_depth(obj, max_depth)
    return obj
