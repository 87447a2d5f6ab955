"""Wave state, operand access and the shader core's errors (specs/amd-compute.md §4, §5.1, §5.3).

A wave32 wave holds 128 scalar registers as Python ints (SGPR0..105, VCC_LO 106, VCC_HI 107, TTMP
108..123, NULL 124, M0 125, EXEC_LO 126, EXEC_HI 127), SCC, and its VGPRs as one numpy ``uint32``
array of shape (VGPRs, 32): lane l of VGPR n is ``v[n, l]``. Vector sources are fetched as (32,) uint32
arrays (scalars and constants broadcast), so every VALU operation is a few numpy calls over all 32
lanes; results are written only to lanes whose EXEC bit is set.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from tinyhw.errors import OperationFailed, StrictEmulationError

M32 = 0xFFFFFFFF
M64 = (1 << 64) - 1
FULL = M32          # EXEC_LO of a full wave32
VCC, NULL, M0, EXEC = 106, 124, 125, 126
MODE_DEFAULT = 0xF0 | 1 << 8 | 1 << 9


def mode_from_rsrc1(rsrc1: int) -> int:
    """The MODE register a wave starts with (specs/amd-compute.md §4): FP_ROUND/FP_DENORM from RSRC1.FLOAT_MODE
    (bits 19:12), DX10_CLAMP from bit 21, IEEE from bit 23."""
    return (rsrc1 >> 12 & 0xFF) | (rsrc1 >> 21 & 1) << 8 | (rsrc1 >> 23 & 1) << 9
LANES = np.arange(32, dtype=np.uint32)
BIT = np.uint32(1) << LANES
U32 = np.uint32

# inline constants (§5.1): 128..192 = 0..64, 193..208 = -1..-16, 240..248 float bit patterns
_FLOAT_BITS = {240: 0x3F000000, 241: 0xBF000000, 242: 0x3F800000, 243: 0xBF800000, 244: 0x40000000,
               245: 0xC0000000, 246: 0x40800000, 247: 0xC0800000, 248: 0x3E22F983}
_FLOAT64 = {240: 0.5, 241: -0.5, 242: 1.0, 243: -1.0, 244: 2.0, 245: -2.0, 246: 4.0, 247: -4.0,
            248: 0.15915494309189535}


class ShaderError(OperationFailed):
    """The emulated shader core stopped: ``pc`` (byte address), ``mnemonic`` and ``encoding`` (hex dwords) say where."""

    def __init__(self, message: str, *, pc: int, mnemonic: str, encoding: str, hint: str | None = None) -> None:
        super().__init__(f"{message} at pc 0x{pc:x} ({mnemonic}, {encoding})", hint=hint)
        self.pc, self.mnemonic, self.encoding = pc, mnemonic, encoding


class Unimplemented(ShaderError, StrictEmulationError):
    """An instruction (or an operand form of one) the model does not implement: never a silent wrong result."""


class ShaderFault(ShaderError):
    """The program did something the hardware would fault on or the model refuses (LDS out of range, bad access)."""


class WatchdogExpired(ShaderError):
    """The dispatch ran more wave instructions than its limit (a shader that never ends).

    ``dispatch`` is the dispatch that ran out (set by :func:`~tinyhw.mocks.rdna3.run_dispatch`): its running
    workgroup's waves can stay resident."""

    dispatch: Any = None


#: SH_MEM_BASES when the dispatch names none: shared (LDS) aperture base 1, private base 2 (bits 63:48 of the
#: apertures), the value tinygrad's driver programs (tinyhw's own driver leaves the register alone)
SH_MEM_BASES_DEFAULT = 0x0001_0002
APERTURE_SRCS = (235, 236, 237, 238)     # SHARED_BASE, SHARED_LIMIT, PRIVATE_BASE, PRIVATE_LIMIT


def aperture(w: Wave, src: int) -> int:
    """The 64-bit value of the memory-aperture operand ``src`` (235..238) for wave ``w`` (ISA "Memory Aperture
    Query", 64-bit address mode): {SH_MEM_BASES.shared_base or .private_base, 48 zero bits}, the LIMITs with
    their low 32 bits all ones (a 4 GiB aperture). ``w.hw`` is read directly: a wave stand-in without it (the
    lockstep view) raises and the step runs wave by wave."""
    smb = SH_MEM_BASES_DEFAULT if w.hw is None else w.hw.sh_mem_bases
    base = (smb >> 16 if src < 237 else smb) & 0xFFFF
    return base << 48 | (M32 if src in (236, 238) else 0)


def inline_const(v: int) -> int | None:
    """The 32-bit pattern of an inline-constant source field, None when ``v`` is not one."""
    if 128 <= v <= 192:
        return v - 128
    if 193 <= v <= 208:
        return (192 - v) & M32
    return _FLOAT_BITS.get(v)


def inline_const64(v: int) -> int | None:
    """The 64-bit value of an inline constant used as a 64-bit integer operand (sign-extended)."""
    if 128 <= v <= 192:
        return v - 128
    if 193 <= v <= 208:
        return (192 - v) & M64
    if v in _FLOAT64:
        return int(np.array(_FLOAT64[v], dtype=np.float64).view(np.uint64))
    return None


# lane masks by EXEC value, shared by every wave (read-only arrays)
_MASKS: dict[int, np.ndarray] = {}
_NO_LANES = np.zeros(32, dtype=bool)
_NO_LANES.flags.writeable = False


class Wave:
    """One wave32's architectural state: 128 SGPRs (EXEC, VCC, M0 among them), SCC, its VGPRs (32 lanes each), the
    workgroup's LDS, the PC, and the memory it reaches."""

    __slots__ = ("s", "scc", "v", "lds", "pc", "_mval", "_m", "done", "at_barrier", "wg", "index", "mem", "mode",
                 "scratch", "scratch_size", "hw", "trapsts", "ticks")

    def __init__(self, vgprs: int, lds: np.ndarray, mem: Any, wg: tuple[int, int, int], index: int,
                 v: np.ndarray | None = None) -> None:
        self.s: list[int] = [0] * 128
        self.scc = 0
        # the VGPRs (vgprs, 32), zeroed; ``v`` (a zeroed view of that shape) when the dispatcher keeps them elsewhere
        self.v = np.zeros((vgprs, 32), dtype=np.uint32) if v is None else v
        self.lds = lds
        self.mem = mem
        self.pc = 0
        self._mval = -1
        self._m = _NO_LANES
        self.done = False
        self.at_barrier = False
        self.wg = wg
        self.index = index
        # MODE register (hwreg 1): set from COMPUTE_PGM_RSRC1 by the dispatcher; this default is round to nearest
        # even, f32/f16/f64 denormals kept, DX10_CLAMP and IEEE on (what LLVM's kernel descriptors ask for)
        self.mode = MODE_DEFAULT
        # FLAT_SCRATCH (architected on gfx11: set by the dispatcher, never by the program): the GPU VA of this
        # wave's private segment, and its size in bytes (COMPUTE_TMPRING_SIZE.WAVESIZE); 0 without scratch
        self.scratch = 0
        self.scratch_size = 0
        # the dispatch's hardware state the wave can read (tinyhw.mocks.rdna3.rare.HwInfo: SH_MEM_BASES, queue ids ...;
        # None: the defaults), its TRAPSTS register and the count its SHADER_CYCLES/REALTIME reads advance
        self.hw: Any = None
        self.trapsts = 0
        self.ticks = 0

    def mask(self) -> np.ndarray:
        """EXEC_LO as a (32,) bool array (cached per value)."""
        e = self.s[EXEC]
        if e != self._mval:
            self._mval = e
            m = _MASKS.get(e)
            if m is None:
                if len(_MASKS) > 4096:
                    _MASKS.clear()
                m = _MASKS[e] = ((U32(e) >> LANES) & U32(1)).astype(bool)
                m.flags.writeable = False
            self._m = m
        return self._m


def bits_to_int(b: np.ndarray) -> Any:
    """(32,) bool array -> 32-bit lane mask. A (waves, 32) array (waves run in lockstep) gives a (waves, 1) uint64
    array of the masks, one per wave."""
    if b.ndim == 1:
        return int(np.packbits(b, bitorder="little").view("<u4")[0])
    return np.packbits(b, axis=-1, bitorder="little").view("<u4").astype(np.uint64)


def int_to_bits(x: Any) -> np.ndarray:
    """32-bit lane mask -> (32,) bool array (the inverse of :func:`bits_to_int`); a (waves, 1) array of masks gives
    (waves, 32)."""
    if type(x) is int:
        return ((U32(x & M32) >> LANES) & U32(1)).astype(bool)
    return ((np.asarray(x, dtype=np.uint64) & np.uint64(M32)).astype(U32) >> LANES & U32(1)).astype(bool)


# ---- source getters: each returns a callable(wave) -> value --------------------------------------------------------

Getter = Callable[[Wave], Any]


def _literal(literal: int | None, bad: Callable[[str], Exception]) -> Getter:
    if literal is None:
        raise bad("literal operand without a literal dword")
    return lambda w: literal


def s_get(src: int, literal: int | None, bad: Callable[[str], Exception]) -> Getter:
    """A 32-bit scalar source (SOP*/SMEM fields, or a VALU source that is not a VGPR) as a Python int."""
    if src <= 127:                  # SGPRs, VCC, TTMP, NULL, M0, EXEC
        if src == NULL:
            return lambda w: 0
        return lambda w: w.s[src]
    if src == 253:
        return lambda w: w.scc
    if src == 255:
        return _literal(literal, bad)
    if src in APERTURE_SRCS:        # a 32-bit read of the 64-bit aperture value: its low half (the model's reading)
        return lambda w: aperture(w, src) & M32
    c = inline_const(src)
    if c is None:
        raise bad(f"source operand {src} (DPP, LDS direct or a reserved value)")
    return lambda w: c


def s_get64(src: int, literal: int | None, bad: Callable[[str], Exception]) -> Getter:
    """A getter for a 64-bit scalar source operand: an even SGPR pair (or NULL), the literal, or an inline constant;
    ``bad`` builds the error for one not modelled."""
    if src <= 127:                  # SGPRs, VCC, TTMP, NULL, M0, EXEC
        if src == NULL:
            return lambda w: 0
        if src & 1:
            raise bad(f"64-bit scalar operand in an odd register {src}")
        return lambda w: w.s[src] | w.s[src + 1] << 32
    if src == 255:
        return _literal(literal, bad)
    if src in APERTURE_SRCS:
        return lambda w: aperture(w, src)
    c = inline_const64(src)
    if c is None:
        raise bad(f"64-bit source operand {src}")
    return lambda w: c


def v_get(src: int, literal: int | None, bad: Callable[[str], Exception]) -> Getter:
    """A 32-bit vector source as a (32,) uint32 array."""
    if src >= 256:
        n = src - 256
        return lambda w: w.v[n]
    if src == 255:
        if literal is None:
            raise bad("literal operand without a literal dword")
        arr = np.full(32, literal, dtype=np.uint32)
        return lambda w: arr
    c = inline_const(src)
    if c is not None:
        arr = np.full(32, c, dtype=np.uint32)
        return lambda w: arr
    g = s_get(src, literal, bad)
    last: list[Any] = [None, None]      # the last scalar value and its broadcast (sources are never modified)

    def bcast(w: Wave) -> np.ndarray:
        x = g(w)
        if type(x) is not int:          # one value per wave (waves in lockstep): a (waves, 1) column
            return (np.asarray(x, dtype=np.uint64) & np.uint64(M32)).astype(np.uint32)
        if x != last[0]:
            last[0], last[1] = x, np.full(32, x, dtype=np.uint32)
        return last[1]
    return bcast


# The inline float constants (240..248: 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 4.0, -4.0, 1/(2 pi)) as a packed operand
# supplies them: f16 (or bf16) bits in the low half and 0 in the high half for the 16-bit float operations, the f32 bits
# for the packed integer ones; integer constants are always the sign-extended 32-bit value. This is the hardware
# behaviour LLVM's AMDGPU backend records (AMDGPUBaseInfo.cpp, getInlineEncodingV216: "the Instruction Set
# Architecture Reference Guide is misleading about how the inline operands work for (packed) 16-bit instructions").
PACKED_FLOAT_CONSTS = {
    "f16": (0x3800, 0xB800, 0x3C00, 0xBC00, 0x4000, 0xC000, 0x4400, 0xC400, 0x3118),
    "bf16": (0x3F00, 0xBF00, 0x3F80, 0xBF80, 0x4000, 0xC000, 0x4080, 0xC080, 0x3E22),
}


def v_get_packed(src: int, literal: int | None, bad: Callable[[str], Exception], kind: str) -> Getter:
    """A source of a packed 16-bit operation (``kind`` "f16", "bf16" or "int") as a (32,) uint32 array: registers,
    the 32-bit literal and integer constants as :func:`v_get`; the inline float constants as
    :data:`PACKED_FLOAT_CONSTS` says."""
    if 240 <= src <= 248 and kind in PACKED_FLOAT_CONSTS:
        arr = np.full(32, PACKED_FLOAT_CONSTS[kind][src - 240], dtype=np.uint32)
        return lambda w: arr
    return v_get(src, literal, bad)


def v_get64(src: int, literal: int | None, bad: Callable[[str], Exception]) -> Getter:
    """A 64-bit vector source as a (32,) uint64 array."""
    if src >= 256:
        n = src - 256
        return lambda w: w.v[n].astype(np.uint64) | (w.v[n + 1].astype(np.uint64) << np.uint64(32))
    g = s_get64(src, literal, bad)

    def bcast64(w: Wave) -> np.ndarray:
        x = g(w)
        if type(x) is not int:          # one value per wave (waves in lockstep): a (waves, 1) column
            return np.asarray(x, dtype=np.uint64)
        return np.full(32, x, dtype=np.uint64)
    return bcast64


def v_put(w: Wave, d: int, r: np.ndarray) -> None:
    """Write VGPR ``d`` with the per-lane values ``r``, only in the lanes EXEC enables."""
    e = w.s[EXEC]
    if type(e) is int and e == FULL:
        w.v[d] = r
    else:
        np.copyto(w.v[d], r, where=w.mask(), casting="unsafe")


def v_put64(w: Wave, d: int, r: np.ndarray) -> None:
    """Write the VGPR pair ``d``, ``d + 1`` with the 64-bit per-lane values ``r`` (low, high), only in EXEC's lanes."""
    v_put(w, d, (r & np.uint64(M32)).astype(np.uint32))
    v_put(w, d + 1, (r >> np.uint64(32)).astype(np.uint32))


def s_put(w: Wave, d: int, x: int) -> None:
    """Write SGPR ``d`` with ``x`` truncated to 32 bits (a write to NULL is dropped)."""
    if d != NULL:
        w.s[d] = x & M32
