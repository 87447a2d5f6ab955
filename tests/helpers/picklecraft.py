"""Crafted tinygrad-profile pickles for the loader's bound tests, assembled opcode by opcode (pickle protocol 4).

Written from the pickle opcode table (``pickle``/``pickletools`` constants), not by pickling objects, so
that a test can say exactly which opcodes and arguments a hostile file holds.
"""

from __future__ import annotations

import pickle
import struct

HEAD = pickle.PROTO + b"\x04"


def text(s: str) -> bytes:
    b = s.encode()
    return pickle.SHORT_BINUNICODE + bytes([len(b)]) + b if len(b) < 256 else \
        pickle.BINUNICODE + struct.pack("<I", len(b)) + b


def integer(n: int) -> bytes:
    if 0 <= n < 256:
        return pickle.BININT1 + bytes([n])
    if -(1 << 31) <= n < (1 << 31):
        return pickle.BININT + struct.pack("<i", n)
    b = n.to_bytes((n.bit_length() + 8) // 8, "little", signed=True)
    return pickle.LONG1 + bytes([len(b)]) + b


def get(i: int) -> bytes:
    return pickle.BINGET + bytes([i]) if i < 256 else pickle.LONG_BINGET + struct.pack("<I", i)


def record(module: str, name: str, fields: list[tuple[str, bytes]]) -> bytes:
    """A tinygrad dataclass instance (NEWOBJ + BUILD with a state dict), each field's value already assembled."""
    out = text(module) + text(name) + pickle.STACK_GLOBAL + pickle.EMPTY_TUPLE + pickle.NEWOBJ
    out += pickle.EMPTY_DICT + pickle.MARK
    for key, value in fields:
        out += text(key) + value
    return out + pickle.SETITEMS + pickle.BUILD


def profile(*events: bytes) -> bytes:
    """A pickled list of events."""
    return HEAD + pickle.EMPTY_LIST + pickle.MARK + b"".join(events) + pickle.APPENDS + pickle.STOP


def sqtt_event(**overrides: bytes) -> bytes:
    fields = {"device": text("AMD"), "kern": integer(0), "exec_tag": integer(1), "se": integer(0),
              "itrace": pickle.NEWFALSE, "blob": pickle.SHORT_BINBYTES + b"\x08" + bytes(8), **overrides}
    return record("tinygrad.runtime.ops_amd", "ProfileSQTTEvent", list(fields.items()))


def memo_index(index: int) -> bytes:
    """LONG_BINPUT ``index`` of an empty list: 11 bytes that make the C unpickler size its memo to ``index``."""
    return HEAD + pickle.EMPTY_LIST + pickle.LONG_BINPUT + struct.pack("<I", index) + pickle.STOP


def shared_tuple_tree(levels: int) -> bytes:
    """A value whose tree has 2**levels leaves in about 5 bytes a level: each level a pair of the last one."""
    out = text("x") + pickle.MEMOIZE + pickle.POP
    for i in range(levels):
        out += get(i) + get(i) + pickle.TUPLE2 + pickle.MEMOIZE + pickle.POP
    return out + get(levels)


def decimal_value(literal: str) -> bytes:
    """``decimal.Decimal(literal)``, as tinygrad's timestamps are pickled."""
    return text("decimal") + text("Decimal") + pickle.STACK_GLOBAL + text(literal) + pickle.TUPLE1 + pickle.REDUCE


def deep_list(depth: int) -> bytes:
    """[[[...]]] ``depth`` deep, built with a constant stack height."""
    out = pickle.EMPTY_LIST + pickle.MEMOIZE + pickle.POP
    for i in range(depth):
        out += pickle.EMPTY_LIST + get(i) + pickle.APPEND + pickle.MEMOIZE + pickle.POP
    return out + get(depth)


def colliding_keys(n: int) -> bytes:
    """A dict of ``n`` distinct big integers that all hash alike (k * (2**61 - 1)): quadratic to insert."""
    out = pickle.EMPTY_DICT + pickle.MARK
    for k in range(1, n + 1):
        out += integer(k * ((1 << 61) - 1)) + pickle.NONE
    return out + pickle.SETITEMS


def nested_marks(n: int) -> bytes:
    return pickle.MARK * n
