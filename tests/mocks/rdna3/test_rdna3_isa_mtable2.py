"""Table tests of the RDNA3 memory instructions against the ISA guide: GLOBAL/FLAT atomics and DS (LDS).

Every opcode runs on edge and seeded random inputs (seeds ``zlib.crc32(name)``); the expected values are
computed here from the guide's pseudocode over a ``bytearray``/Python-int model of memory, never by the core.
Instructions are assembled by llvm-mc-19 (tests/helpers/rdna3asm.py) and run on one wave32.

Rules checked (RDNA3 ISA guide pseudocode; "the atomic of several lanes on one address" is the model's rule):
- atomics: ADD/SUB/RSUB, INC ``tmp >= src ? 0 : tmp + 1``, DEC ``tmp == 0 || tmp > src ? src : tmp - 1``,
  CSUB ``tmp < src ? 0 : tmp - src``, signed/unsigned MIN/MAX, AND/OR/XOR, SWAP; CMPSWAP (global/flat) and CMPSTORE
  (DS) ``tmp == cmp ? src : tmp`` with src = DATA[31:0] (DATA) and cmp = DATA[63:32] (DATA2); MSKOR
  ``(tmp & ~DATA) | DATA2``; WRAP ``tmp >= DATA ? tmp - DATA : tmp + DATA2``; float MIN/MAX ``src < tmp ? src :
  tmp`` / ``src > tmp ? src : tmp`` (so a NaN in memory stays and a NaN source is dropped; -0 vs +0 keeps memory),
  float CMPSWAP/CMPSTORE as a float compare (-0 == +0, NaN never equal), ADD_F32 one IEEE rounding (no denormal
  inputs here: the guide leaves their flushing to the memory side).
- several lanes on one address apply in lane order; GLC (global/flat) or the _rtn form (DS) returns the value
  before each lane's operation; without it VDST is untouched; inactive lanes do nothing.
- DS: address = ADDR + OFFSET (16 bits; 2addr: OFFSET0/OFFSET1 times the element size, times 64 more for
  stride64). An element not wholly inside the LDS allocation reads 0 and is not written (the model's rule; ISA
  "Data Share Operations" only says out-of-range accesses are discarded).
"""

from __future__ import annotations

import math
import random
import struct
import zlib

import numpy as np
import pytest
from rdna3asm import HAVE_LLVM_MC, asm_many
from rdna3isa import f32, f64, from32, from64, run, wave
from rdna3mem import LOADS, STORES, Waves, memory, regs, sext

from tinyhw.formats.rdna3_ops import OPS

pytestmark = pytest.mark.skipif(not HAVE_LLVM_MC, reason="llvm-mc-19 is not installed")
EXEC = 126
M32 = 0xFFFFFFFF


def _rng(name: str) -> random.Random:
    return random.Random(zlib.crc32(name.encode()))


# ---- the guide's atomic operations on Python ints ------------------------------------------------------------------

def _fval(bits: int, x: int) -> float:
    return from32(x) if bits == 32 else from64(x)


def _fadd(bits: int, a: int, b: int) -> int:
    ft, ut = (np.float32, np.uint32) if bits == 32 else (np.float64, np.uint64)
    with np.errstate(all="ignore"):
        r = ut(a).view(ft) + ut(b).view(ft)
    return int(np.asarray(r, dtype=ft).view(ut))


def reference(op: str, typ: str, old: int, src: int, cmp: int) -> int:
    """The new memory value of atomic ``op`` (guide name, e.g. ``min``, ``cmpswap``) on type ``typ``."""
    bits = 64 if typ.endswith("64") else 32
    m = (1 << bits) - 1
    if typ[0] == "f":
        a, s, c = _fval(bits, old), _fval(bits, src), _fval(bits, cmp)
        if op == "add":
            return _fadd(bits, old, src)
        if op == "min":
            return src if s < a else old
        if op == "max":
            return src if s > a else old
        assert op in ("cmpswap", "cmpstore")
        return src if a == c else old
    signed = typ[0] == "i"
    so, ss = (sext(old, bits), sext(src, bits)) if signed else (old, src)
    table = {
        "add": old + src, "sub": old - src, "rsub": src - old, "csub": 0 if old < src else old - src,
        "inc": 0 if old >= src else old + 1, "dec": src if old == 0 or old > src else old - 1,
        "min": src if ss < so else old, "max": src if ss > so else old,
        "and": old & src, "or": old | src, "xor": old ^ src, "swap": src, "storexchg": src,
        "cmpswap": src if old == cmp else old, "cmpstore": src if old == cmp else old,
        "mskor": (old & ~src) | cmp, "wrap": old - src if old >= src else old + cmp,
    }
    return table[op] & m


def _split(name: str) -> tuple[str, str]:
    """(operation, type) of an atomic suffix such as ``cmpswap_b64`` or ``max_f32``."""
    op, _, typ = name.rpartition("_")
    return op, typ


F32_POOL = [0x00000000, 0x80000000, f32(1.0), f32(-2.5), f32(3.0), 0x7F800000, 0xFF800000, 0x7FC00000,
            0xFFC00001, f32(1e30), f32(-1e-3), f32(1.5), f32(-0.0), f32(7.25)]
F64_POOL = [0, 1 << 63, f64(1.0), f64(-2.5), f64(3.0), 0x7FF0 << 48, 0xFFF0 << 48, 0x7FF8 << 48,
            f64(1e300), f64(-1e-3), f64(1.5), f64(7.25)]
EDGE32 = [0, 1, 2, 5, 7, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFE]
EDGE64 = [0, 1, 5, 7, (1 << 63) - 1, 1 << 63, (1 << 64) - 1, 1 << 32, (1 << 32) - 1]


def _value(rng: random.Random, op: str, typ: str) -> int:
    bits = 64 if typ.endswith("64") else 32
    if typ[0] == "f":
        pool = F32_POOL if bits == 32 else F64_POOL
        if op == "add":
            pool = [x for x in pool if not math.isnan(_fval(bits, x))]
        return rng.choice(pool)
    if op in ("inc", "dec", "wrap", "csub") and rng.random() < 0.7:
        return rng.choice([0, 1, 3, 5, 7, 9])
    return rng.choice(EDGE32 if bits == 32 else EDGE64) if rng.random() < 0.5 else rng.getrandbits(bits)


def _pack(bits: int, x: int) -> bytes:
    return x.to_bytes(bits // 8, "little")


def _set(w, reg: int, lane: int, bits: int, x: int) -> None:
    w.v[reg, lane] = x & M32
    if bits == 64:
        w.v[reg + 1, lane] = x >> 32


def _get(w, reg: int, lane: int, bits: int) -> int:
    x = int(w.v[reg, lane])
    return x | int(w.v[reg + 1, lane]) << 32 if bits == 64 else x


def _same(bits: int, typ: str, got: int, want: int) -> bool:
    """Equal bits; for float results, any NaN matches any NaN (the payload of an arithmetic NaN is not checked)."""
    if typ[0] == "f" and math.isnan(_fval(bits, want)):
        return math.isnan(_fval(bits, got))
    return got == want


# ---- GLOBAL / FLAT atomics -----------------------------------------------------------------------------------------

GLOBAL_ATOMICS = sorted(m.removeprefix("global_atomic_") for (enc, _o), (m, _t) in OPS.items()
                        if enc == "GLOBAL" and m.startswith("global_atomic_"))
FLAT_ATOMICS = sorted(m.removeprefix("flat_atomic_") for (enc, _o), (m, _t) in OPS.items()
                      if enc == "FLAT" and m.startswith("flat_atomic_"))
VMEM_ATOMIC_CASES = [(s, mode) for s in GLOBAL_ATOMICS for mode in ("vaddr", "saddr")] + \
    [(s, "flat") for s in FLAT_ATOMICS]


@pytest.mark.parametrize(("suffix", "mode"), VMEM_ATOMIC_CASES)
def test_global_flat_atomics_in_lane_order(suffix: str, mode: str) -> None:
    op, typ = _split(suffix)
    bits = 64 if typ.endswith("64") else 32
    nb, words = bits // 8, bits // 32
    two = op == "cmpswap"
    ret_regs, data_regs = regs(10, words), regs(4, 2 * words if two else words)
    off = 8 if mode == "flat" else -8
    seg = "flat" if mode == "flat" else "global"
    addr = {"vaddr": "v[2:3]", "saddr": "v2", "flat": "v[2:3]"}[mode]
    tail = {"vaddr": ", off", "saddr": ", s[20:21]", "flat": ""}[mode]
    texts = [f"{seg}_atomic_{suffix} {ret_regs}, {addr}, {data_regs}{tail} offset:{off} glc",
             f"{seg}_atomic_{suffix} {addr}, {data_regs}{tail} offset:{off}",
             f"{seg}_atomic_{suffix} {addr}, {data_regs}{tail} offset:{off} slc dlc"]
    rng = _rng(f"{suffix}/{mode}")
    for words_, glc in zip(asm_many(texts), (True, False, False), strict=True):
        cells = [_value(rng, op, typ) for _ in range(4)]
        mem, buf, ref = memory(rng, 0x200)
        base = buf + 0x40
        for k, c in enumerate(cells):
            ref[0x40 + 8 * k:0x40 + 8 * k + nb] = _pack(bits, c)
        mem.poke(buf, bytes(ref))
        w = wave(mem=mem)
        mask = rng.getrandbits(32) | 0b1011
        w.s[EXEC] = mask
        sbase = base - 0x100
        w.s[20], w.s[21] = sbase & M32, sbase >> 32
        lane_cell = [rng.randrange(4) for _ in range(32)]
        lane_cell[1] = lane_cell[0] = lane_cell[3]                # lanes 0, 1, 3 on one address
        srcs = [_value(rng, op, typ) for _ in range(32)]
        cmps = [rng.choice(cells + srcs[:lane]) if rng.random() < 0.6 else _value(rng, op, typ)
                for lane in range(32)]
        pre = [rng.getrandbits(bits) for _ in range(32)]
        for lane in range(32):
            a = base + 8 * lane_cell[lane] - off
            if mode == "saddr":
                w.v[2, lane] = a - sbase
            else:
                w.v[2, lane], w.v[3, lane] = a & M32, a >> 32
            _set(w, 4, lane, bits, srcs[lane])
            if two:
                _set(w, 4 + words, lane, bits, cmps[lane])
            _set(w, 10, lane, bits, pre[lane])
        before = w.v.copy()
        run(words_, w)
        ret_rows = list(range(10, 10 + words))               # the only VGPRs an atomic may write (VDST with GLC)
        assert np.array_equal(np.delete(w.v, ret_rows, axis=0), np.delete(before, ret_rows, axis=0)), texts
        want_ret = list(pre)
        for lane in range(32):                                    # lane order
            if not mask >> lane & 1:
                continue
            at = 0x40 + 8 * lane_cell[lane]
            old = int.from_bytes(ref[at:at + nb], "little")
            ref[at:at + nb] = _pack(bits, reference(op, typ, old, srcs[lane], cmps[lane]))
            if glc:
                want_ret[lane] = old
        got_mem = mem.peek(buf, len(ref))
        for k in range(4):
            at = 0x40 + 8 * k
            assert _same(bits, typ, int.from_bytes(got_mem[at:at + nb], "little"),
                         int.from_bytes(ref[at:at + nb], "little")), (texts, k)
        assert got_mem[:0x40] == bytes(ref[:0x40]) and got_mem[0x60:] == bytes(ref[0x60:])
        for lane in range(32):
            assert _same(bits, typ, _get(w, 10, lane, bits), want_ret[lane]), (texts, glc, lane)


# ---- DS loads and stores -------------------------------------------------------------------------------------------

LDS_BYTES = 2048
DS_LOADS = {"u8": "u8", "i8": "i8", "u16": "u16", "i16": "i16", "b32": "b32", "b64": "b64", "b96": "b96",
            "b128": "b128", "u8_d16": "d16_u8", "i8_d16": "d16_i8", "u16_d16": "d16_b16",
            "u8_d16_hi": "d16_hi_u8", "i8_d16_hi": "d16_hi_i8", "u16_d16_hi": "d16_hi_b16"}
DS_STORES = {"b8": "b8", "b16": "b16", "b32": "b32", "b64": "b64", "b96": "b96", "b128": "b128",
             "b8_d16_hi": "d16_hi_b8", "b16_d16_hi": "d16_hi_b16"}
DS_OFFSETS = [0, 3, 100, 2000, 65535]


def _lds(w, rng: random.Random) -> bytearray:
    data = bytearray(rng.randbytes(LDS_BYTES))
    w.lds = np.frombuffer(bytes(data), dtype=np.uint8).copy()
    return data


def _in(a: int, size: int) -> bool:
    return a >= 0 and a + size <= LDS_BYTES


@pytest.mark.parametrize("suffix", sorted(DS_LOADS))
def test_ds_loads_offsets_and_out_of_range(suffix: str) -> None:
    size, fn = LOADS[DS_LOADS[suffix]]
    n = max(size // 4, 1)
    texts = [f"ds_load_{suffix} {regs(10, n)}, v2" + (f" offset:{o}" if o else "") for o in DS_OFFSETS]
    rng = _rng(f"ds_load_{suffix}")
    for off, words in zip(DS_OFFSETS, asm_many(texts), strict=True):
        w = wave()
        ref = _lds(w, rng)
        mask = rng.getrandbits(32) | 1
        w.s[EXEC] = mask
        addrs = [rng.randrange(LDS_BYTES + 64) for _ in range(32)]
        if off < LDS_BYTES - size:
            addrs[1] = LDS_BYTES - size - off                     # the last element in range
            addrs[2] = LDS_BYTES - size - off + 1                 # straddles the end
        w.v[2] = addrs
        old = [[rng.getrandbits(32) for _ in range(32)] for _ in range(n)]
        for j in range(n):
            w.v[10 + j] = old[j]
        run(words, w)
        for lane in range(32):
            prev = [old[j][lane] for j in range(n)]
            got = [int(w.v[10 + j, lane]) for j in range(n)]
            a = addrs[lane] + off
            if not mask >> lane & 1:
                assert got == prev, (suffix, lane)
                continue
            raw = bytes(ref[a:a + size]) if _in(a, size) else bytes(size)
            assert got == fn(raw, prev), (suffix, off, lane, a)
        assert bytes(w.lds) == bytes(ref)


def _disjoint(rng: random.Random, spans: list[tuple[int, ...]], size: int, unit_offs: tuple[int, ...]) -> int:
    """A random base whose elements at ``unit_offs`` overlap no in-range element already in ``spans``."""
    while True:
        a = rng.randrange(LDS_BYTES + 64)
        mine = [a + u for u in unit_offs]
        if all(not _in(x, size) or all(not (x < y + size and y < x + size) for s in spans for y in s) for x in mine):
            spans.append(tuple(x for x in mine if _in(x, size)))
            return a


@pytest.mark.parametrize("suffix", sorted(DS_STORES))
def test_ds_stores_offsets_and_out_of_range(suffix: str) -> None:
    size, fn = STORES[DS_STORES[suffix]]
    n = max(size // 4, 1)
    texts = [f"ds_store_{suffix} v2, {regs(10, n)}" + (f" offset:{o}" if o else "") for o in DS_OFFSETS]
    rng = _rng(f"ds_store_{suffix}")
    for off, words in zip(DS_OFFSETS, asm_many(texts), strict=True):
        w = wave()
        ref = _lds(w, rng)
        mask = rng.getrandbits(32) | 0b111
        w.s[EXEC] = mask
        spans: list[tuple[int, ...]] = []
        addrs = [_disjoint(rng, spans, size, (off,)) for _ in range(32)]
        w.v[2] = addrs
        data = [[rng.getrandbits(32) for _ in range(32)] for _ in range(n)]
        for j in range(n):
            w.v[10 + j] = data[j]
        run(words, w)
        for lane in range(32):
            a = addrs[lane] + off
            if mask >> lane & 1 and _in(a, size):
                ref[a:a + size] = fn([data[j][lane] for j in range(n)])
        assert bytes(w.lds) == bytes(ref), (suffix, off)


DS_2ADDR = ["b32", "b64", "stride64_b32", "stride64_b64"]


def _unit(suffix: str) -> tuple[int, int]:
    size = 8 if suffix.endswith("b64") else 4
    return size, size * (64 if "stride64" in suffix else 1)


def _offset_pairs(rng: random.Random, unit: int) -> list[tuple[int, int]]:
    top = min(255, LDS_BYTES // unit + 1)
    return [(0, 1), (1, 0), (3, 3), (rng.randrange(top), rng.randrange(top)), (255, rng.randrange(top))]


@pytest.mark.parametrize("suffix", DS_2ADDR)
def test_ds_load_2addr(suffix: str) -> None:
    size, unit = _unit(suffix)
    words_ = size // 4
    rng = _rng(f"ds_load_2addr_{suffix}")
    pairs = _offset_pairs(rng, unit)
    texts = [f"ds_load_2addr_{suffix} {regs(10, 2 * words_)}, v2 offset0:{a} offset1:{b}" for a, b in pairs]
    for (o0, o1), words in zip(pairs, asm_many(texts), strict=True):
        w = wave()
        ref = _lds(w, rng)
        mask = rng.getrandbits(32) | 1
        w.s[EXEC] = mask
        addrs = [rng.randrange(LDS_BYTES) for _ in range(32)]
        w.v[2] = addrs
        old = [[rng.getrandbits(32) for _ in range(32)] for _ in range(2 * words_)]
        for j in range(2 * words_):
            w.v[10 + j] = old[j]
        run(words, w)
        for lane in range(32):
            got = [int(w.v[10 + j, lane]) for j in range(2 * words_)]
            if not mask >> lane & 1:
                assert got == [old[j][lane] for j in range(2 * words_)]
                continue
            want = b"".join(bytes(ref[a:a + size]) if _in(a, size) else bytes(size)
                            for a in (addrs[lane] + o0 * unit, addrs[lane] + o1 * unit))
            assert got == list(struct.unpack(f"<{2 * words_}I", want)), (suffix, o0, o1, lane)


@pytest.mark.parametrize("suffix", DS_2ADDR)
def test_ds_store_2addr(suffix: str) -> None:
    size, unit = _unit(suffix)
    words_ = size // 4
    rng = _rng(f"ds_store_2addr_{suffix}")
    pairs = [(o0, o1) for o0, o1 in _offset_pairs(rng, unit) if o0 != o1]
    d0, d1 = regs(10, words_), regs(10 + words_, words_)
    texts = [f"ds_store_2addr_{suffix} v2, {d0}, {d1} offset0:{a} offset1:{b}" for a, b in pairs]
    for (o0, o1), words in zip(pairs, asm_many(texts), strict=True):
        w = wave()
        ref = _lds(w, rng)
        mask = rng.getrandbits(32) | 1
        w.s[EXEC] = mask
        spans: list[tuple[int, ...]] = []
        addrs = [_disjoint(rng, spans, size, (o0 * unit, o1 * unit)) for _ in range(32)]
        w.v[2] = addrs
        data = [[rng.getrandbits(32) for _ in range(32)] for _ in range(2 * words_)]
        for j in range(2 * words_):
            w.v[10 + j] = data[j]
        run(words, w)
        for lane in range(32):
            if not mask >> lane & 1:
                continue
            for k, o in enumerate((o0, o1)):
                a = addrs[lane] + o * unit
                if _in(a, size):
                    ref[a:a + size] = struct.pack(f"<{words_}I", *[data[k * words_ + j][lane] for j in range(words_)])
        assert bytes(w.lds) == bytes(ref), (suffix, o0, o1)


@pytest.mark.parametrize("suffix", DS_2ADDR)
def test_ds_storexchg_2addr_rtn(suffix: str) -> None:
    size, unit = _unit(suffix)
    words_ = size // 4
    rng = _rng(f"ds_storexchg_2addr_{suffix}")
    pairs = _offset_pairs(rng, unit)
    d0, d1 = regs(10, words_), regs(10 + words_, words_)
    texts = [f"ds_storexchg_2addr_{suffix.replace('b', 'rtn_b')} {regs(20, 2 * words_)}, v2, {d0}, {d1} "
             f"offset0:{a} offset1:{b}" for a, b in pairs]
    for (o0, o1), words in zip(pairs, asm_many(texts), strict=True):
        w = wave()
        ref = _lds(w, rng)
        mask = rng.getrandbits(32) | 0b11
        w.s[EXEC] = mask
        addrs = [rng.randrange(0, LDS_BYTES, 4) for _ in range(32)]
        addrs[1] = addrs[0]                                       # two lanes exchange on the same elements
        w.v[2] = addrs
        data = [[rng.getrandbits(32) for _ in range(32)] for _ in range(2 * words_)]
        for j in range(2 * words_):
            w.v[10 + j] = data[j]
        pre = [[rng.getrandbits(32) for _ in range(32)] for _ in range(2 * words_)]
        for j in range(2 * words_):
            w.v[20 + j] = pre[j]
        run(words, w)
        for lane in range(32):                                    # lane order, OFFSET0's element first
            got = [int(w.v[20 + j, lane]) for j in range(2 * words_)]
            if not mask >> lane & 1:
                assert got == [pre[j][lane] for j in range(2 * words_)]
                continue
            want = []
            for k, o in enumerate((o0, o1)):
                a = addrs[lane] + o * unit
                if _in(a, size):
                    want += list(struct.unpack_from(f"<{words_}I", ref, a))
                    ref[a:a + size] = struct.pack(f"<{words_}I", *[data[k * words_ + j][lane] for j in range(words_)])
                else:
                    want += [0] * words_
            assert got == want, (suffix, o0, o1, lane)
        assert bytes(w.lds) == bytes(ref), (suffix, o0, o1)


# ---- DS atomics ----------------------------------------------------------------------------------------------------

_DS_SKIP = ("ds_nop", "ds_permute_b32", "ds_bpermute_b32", "ds_swizzle_b32", "ds_append", "ds_consume",
            "ds_bvh_stack_rtn_b32", "ds_condxchg32_rtn_b64")
DS_ATOMICS = sorted(m for (enc, _o), (m, _t) in OPS.items()
                    if enc == "DS" and m not in _DS_SKIP and not m.startswith(("ds_load", "ds_store_")) and
                    "2addr" not in m)


def _ds_atomic_parts(m: str) -> tuple[str, str, bool]:
    """(guide operation, type, returns) of a DS atomic mnemonic."""
    body = m.removeprefix("ds_")
    rtn = "_rtn_" in body
    op, typ = _split(body.replace("_rtn", ""))
    return op, typ, rtn


def test_ds_atomic_table_is_complete() -> None:
    assert len(DS_ATOMICS) == 73, DS_ATOMICS


@pytest.mark.parametrize("m", DS_ATOMICS)
def test_ds_atomics_in_lane_order(m: str) -> None:
    op, typ, rtn = _ds_atomic_parts(m)
    bits = 64 if typ.endswith("64") else 32
    nb, words_ = bits // 8, bits // 32
    two = op in ("cmpstore", "mskor", "wrap")
    data = regs(10, words_) + (f", {regs(12, words_)}" if two else "")
    rng = _rng(m)
    offs = [0, 8, 0x100]
    texts = [f"{m} {regs(20, words_)}, v2, {data}" if rtn else f"{m} v2, {data}" for _ in offs]
    texts = [t + (f" offset:{o}" if o else "") for t, o in zip(texts, offs, strict=True)]
    for off, words in zip(offs, asm_many(texts), strict=True):
        w = wave()
        ref = _lds(w, rng)
        cells = [_value(rng, op, typ) for _ in range(4)]
        for k, c in enumerate(cells):
            ref[0x100 + 8 * k:0x100 + 8 * k + nb] = _pack(bits, c)
        w.lds[:] = np.frombuffer(bytes(ref), dtype=np.uint8)
        mask = rng.getrandbits(32) | 0b1011
        w.s[EXEC] = mask
        lane_cell = [rng.randrange(4) for _ in range(32)]
        lane_cell[1] = lane_cell[0] = lane_cell[3]
        addrs = [(0x100 + 8 * c - off) & M32 for c in lane_cell]
        addrs[5] = LDS_BYTES + 8 - off if off <= LDS_BYTES else LDS_BYTES + 8   # out of range: no effect, returns 0
        w.v[2] = addrs
        srcs = [_value(rng, op, typ) for _ in range(32)]
        cmps = [rng.choice(cells + srcs[:lane]) if rng.random() < 0.6 else _value(rng, op, typ)
                for lane in range(32)]
        pre = [rng.getrandbits(bits) for _ in range(32)]
        for lane in range(32):
            _set(w, 10, lane, bits, srcs[lane])
            _set(w, 12, lane, bits, cmps[lane])
            _set(w, 20, lane, bits, pre[lane])
        before = w.v.copy()
        run(words, w)
        ret_rows = list(range(20, 20 + words_))              # the only VGPRs an atomic may write (VDST, _rtn)
        assert np.array_equal(np.delete(w.v, ret_rows, axis=0), np.delete(before, ret_rows, axis=0)), m
        want_ret = list(pre)
        for lane in range(32):
            if not mask >> lane & 1:
                continue
            a = addrs[lane] + off
            if not _in(a, nb):
                if rtn:
                    want_ret[lane] = 0
                continue
            old = int.from_bytes(ref[a:a + nb], "little")
            ref[a:a + nb] = _pack(bits, reference(op, typ, old, srcs[lane], cmps[lane]))
            if rtn:
                want_ret[lane] = old
        got = bytes(w.lds)
        for k in range(4):
            at = 0x100 + 8 * k
            assert _same(bits, typ, int.from_bytes(got[at:at + nb], "little"),
                         int.from_bytes(ref[at:at + nb], "little")), (m, off, k)
        assert got[:0x100] == bytes(ref[:0x100]) and got[0x120:] == bytes(ref[0x120:]), (m, off)
        for lane in range(32):
            assert _same(bits, typ, _get(w, 20, lane, bits), want_ret[lane]), (m, off, lane)


@pytest.mark.parametrize("suffix", GLOBAL_ATOMICS)
def test_lockstep_global_atomics_wave_after_wave(suffix: str) -> None:
    """vmem.wide_global's atomics for several waves at once: lane order within a wave, wave after wave."""
    from tinyhw.formats.amdisa import decode_at
    from tinyhw.mocks.rdna3.vmem import wide_global

    op, typ = _split(suffix)
    bits = 64 if typ.endswith("64") else 32
    nb, words = bits // 8, bits // 32
    two = op == "cmpswap"
    text = f"global_atomic_{suffix} {regs(10, words)}, v2, {regs(4, 2 * words if two else words)}, s[20:21] glc"
    (code,) = asm_many([text])
    fn = wide_global(decode_at(struct.pack(f"<{len(code)}I", *code) + bytes(16), 0, "gfx11"))
    assert fn is not None
    rng = _rng(f"wide/{suffix}")
    mem, buf, ref = memory(rng, 0x200)
    cells = [_value(rng, op, typ) for _ in range(4)]
    for c, x in enumerate(cells):
        ref[8 * c:8 * c + nb] = _pack(bits, x)
    mem.poke(buf, bytes(ref))
    k = 3
    ww = Waves(k, mem, rng)
    ww.s[20], ww.s[21] = buf & M32, buf >> 32
    cell = [[rng.randrange(4) for _ in range(32)] for _ in range(k)]
    vals = [[(_value(rng, op, typ), _value(rng, op, typ) if rng.random() < 0.5 else rng.choice(cells))
             for _ in range(32)] for _ in range(k)]
    for i in range(k):
        for lane in range(32):
            ww.v[2, i, lane] = 8 * cell[i][lane]
            src, cmp = vals[i][lane]
            ww.v[4, i, lane], ww.v[4 + words, i, lane] = src & M32, cmp & M32 if two else ww.v[4 + words, i, lane]
            if bits == 64:
                ww.v[5, i, lane] = src >> 32
                if two:
                    ww.v[7, i, lane] = cmp >> 32
    before = ww.v.copy()
    fn(ww)
    for i in range(k):                                            # wave after wave, lanes in order
        for lane in range(32):
            got = int(ww.v[10, i, lane]) | (int(ww.v[11, i, lane]) << 32 if bits == 64 else 0)
            if not ww.lanes[i, lane]:
                assert got == int(before[10, i, lane]) | (int(before[11, i, lane]) << 32 if bits == 64 else 0)
                continue
            at = 8 * cell[i][lane]
            old = int.from_bytes(ref[at:at + nb], "little")
            src, cmp = vals[i][lane]
            ref[at:at + nb] = _pack(bits, reference(op, typ, old, src, cmp if two else 0))
            assert _same(bits, typ, got, old), (suffix, i, lane)
    got_mem = mem.peek(buf, 32)
    for c in range(4):
        assert _same(bits, typ, int.from_bytes(got_mem[8 * c:8 * c + nb], "little"),
                     int.from_bytes(ref[8 * c:8 * c + nb], "little")), (suffix, c)
