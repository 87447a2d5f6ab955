"""Shared pieces of the memory table tests (tests/mocks/rdna3/test_rdna3_isa_mtable*.py): a flat memory with its
``bytearray`` reference copy, and the guide's load/store element rules written as plain Python on bytes.
"""

from __future__ import annotations

import random
import struct

import numpy as np

from tinyhw.mocks.rdna3 import FlatMemory

M32 = 0xFFFFFFFF
BASE = 0x10000


def memory(rng: random.Random, n: int, base: int = BASE) -> tuple[FlatMemory, int, bytearray]:
    """A flat memory with ``n`` random bytes at the returned address, and the reference copy of them."""
    mem = FlatMemory(base, n + 0x1000)
    data = rng.randbytes(n)
    return mem, mem.alloc(data), bytearray(data)


def sext(x: int, bits: int) -> int:
    """``x`` read as a signed ``bits``-bit integer."""
    return x - (1 << bits) if x >> (bits - 1) & 1 else x


def regs(first: int, n: int) -> str:
    """The assembler text of ``n`` VGPRs from ``first``."""
    return f"v{first}" if n == 1 else f"v[{first}:{first + n - 1}]"


#: load suffix -> (bytes, function of (raw bytes, old VDST dwords) -> new VDST dwords)
LOADS = {
    "u8": (1, lambda b, o: [b[0]]), "i8": (1, lambda b, o: [sext(b[0], 8) & M32]),
    "u16": (2, lambda b, o: [int.from_bytes(b, "little")]),
    "i16": (2, lambda b, o: [sext(int.from_bytes(b, "little"), 16) & M32]),
    "b32": (4, lambda b, o: list(struct.unpack("<I", b))), "b64": (8, lambda b, o: list(struct.unpack("<2I", b))),
    "b96": (12, lambda b, o: list(struct.unpack("<3I", b))), "b128": (16, lambda b, o: list(struct.unpack("<4I", b))),
    "d16_u8": (1, lambda b, o: [o[0] & 0xFFFF0000 | b[0]]),
    "d16_i8": (1, lambda b, o: [o[0] & 0xFFFF0000 | sext(b[0], 8) & 0xFFFF]),
    "d16_b16": (2, lambda b, o: [o[0] & 0xFFFF0000 | int.from_bytes(b, "little")]),
    "d16_hi_u8": (1, lambda b, o: [o[0] & 0xFFFF | b[0] << 16]),
    "d16_hi_i8": (1, lambda b, o: [o[0] & 0xFFFF | (sext(b[0], 8) & 0xFFFF) << 16]),
    "d16_hi_b16": (2, lambda b, o: [o[0] & 0xFFFF | int.from_bytes(b, "little") << 16]),
}
#: store suffix -> (bytes, function of the DATA dwords -> the bytes stored)
STORES = {
    "b8": (1, lambda d: struct.pack("<I", d[0])[:1]), "b16": (2, lambda d: struct.pack("<I", d[0])[:2]),
    "b32": (4, lambda d: struct.pack("<I", d[0])), "b64": (8, lambda d: struct.pack("<2I", *d[:2])),
    "b96": (12, lambda d: struct.pack("<3I", *d[:3])), "b128": (16, lambda d: struct.pack("<4I", *d[:4])),
    "d16_hi_b8": (1, lambda d: struct.pack("<I", d[0])[2:3]), "d16_hi_b16": (2, lambda d: struct.pack("<I", d[0])[2:4]),
}


class Waves:
    """The face of several waves in lockstep that vmem.wide_global and the SMEM lockstep function read: VGPRs as
    (regs, waves, 32), agreed SGPRs, EXEC as (waves, 32) lanes, the memory and the access log."""

    def __init__(self, k: int, mem: FlatMemory, rng: random.Random) -> None:
        self.waves = [None] * k
        self.v = np.array([[[rng.getrandbits(32) for _ in range(32)] for _ in range(k)] for _ in range(32)],
                          dtype=np.uint32)
        self.s = [0] * 128
        self.lanes = np.array([[rng.random() < 0.7 for _ in range(32)] for _ in range(k)])
        self.mem, self.log = mem, []

    def mask(self) -> np.ndarray:
        """EXEC as (waves, 32) lanes."""
        return self.lanes
