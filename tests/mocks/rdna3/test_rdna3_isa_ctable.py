"""Table tests: float compares and classes (VOPC), the SOPK forms and packed 16-bit integer math (VOP3P).

Expected values come from the ISA reference's definitions written here in Python: IEEE comparisons on exact
rationals (a NaN is unordered: the ordered predicates are false, the "n" predicates and U true; -0 equals +0),
V_CMP_CLASS's ten class bits, SOPK's sign- or zero-extended SIMM16, and each packed half computed on its own.
"""

from __future__ import annotations

import operator
import random
import zlib
from collections.abc import Callable
from fractions import Fraction

import pytest
from rdna3isa import OPC, exact, run, sopk, v, vopc, wave

M32 = (1 << 32) - 1
VCC = 106
FMT = {"f16": (10, 5), "f32": (23, 8), "f64": (52, 11)}


def _nan(x: int, fmt: str) -> bool:
    m, e = FMT[fmt]
    return (x >> m) & ((1 << e) - 1) == (1 << e) - 1 and x & ((1 << m) - 1) != 0


def _value(x: int, fmt: str) -> Fraction | float:
    m, e = FMT[fmt]
    if (x >> m) & ((1 << e) - 1) == (1 << e) - 1:
        return float("-inf") if x >> (m + e) & 1 else float("inf")
    return exact(x, fmt)


def _inputs(fmt: str, seed: int) -> tuple[list[int], list[int]]:
    m, e = FMT[fmt]
    s = 1 << (m + e)
    inf, qnan, snan = ((1 << e) - 1) << m, ((1 << e) - 1) << m | 1 << (m - 1), ((1 << e) - 1) << m | 1
    one = ((1 << (e - 1)) - 1) << m
    edge = [0, s, 1, s | 1, inf, inf | s, qnan, snan, one, one | s, one + 1, (1 << m) - 1, 1 << m]
    rng = random.Random(seed)
    a = [rng.choice(edge) if rng.random() < 0.5 else rng.choice(edge) ^ rng.getrandbits(3) for _ in range(32)]
    b = [rng.choice(edge) if rng.random() < 0.5 else a[i] for i in range(32)]
    b[:4] = [s, 0, a[2], qnan]                       # -0 against +0, an equal pair, a NaN
    a[:2] = [0, s]
    return a, b


ORDERED: dict[str, Callable[[object, object], bool]] = {
    "lt": operator.lt, "eq": operator.eq, "le": operator.le, "gt": operator.gt, "lg": operator.ne,
    "ge": operator.ge}


def _pred(op: str, a: int, b: int, fmt: str) -> bool:
    if op in ("f", "t"):
        return op == "t"
    unordered = _nan(a, fmt) or _nan(b, fmt)
    if op == "o":
        return not unordered
    if op == "u":
        return unordered
    if op.startswith("n"):                           # nge = !(a >= b) ...; neq = !(a == b): true when unordered
        base = {"nge": "ge", "nlg": "lg", "ngt": "gt", "nle": "le", "neq": "eq", "nlt": "lt"}[op]
        return unordered or not ORDERED[base](_value(a, fmt), _value(b, fmt))
    return not unordered and ORDERED[op](_value(a, fmt), _value(b, fmt))


PREDS = ["f", "lt", "eq", "le", "gt", "lg", "ge", "o", "u", "nge", "nlg", "ngt", "nle", "neq", "nlt", "t"]


@pytest.mark.parametrize("fmt", ["f16", "f32", "f64"])
@pytest.mark.parametrize("op", PREDS)
def test_vopc_float_compares(op: str, fmt: str) -> None:
    a, b = _inputs(fmt, zlib.crc32(f"{op}{fmt}".encode()))
    w = wave()
    if fmt == "f64":
        w.v[2], w.v[3] = [x & M32 for x in a], [x >> 32 for x in a]
        w.v[4], w.v[5] = [x & M32 for x in b], [x >> 32 for x in b]
        words = vopc(f"v_cmp_{op}_f64_e32", v(2), 4)
    else:
        w.v[2], w.v[4] = a, [x | 0xABCD0000 if fmt == "f16" else x for x in b]   # f16: the high half is ignored
        words = vopc(f"v_cmp_{op}_{fmt}_e32", v(2), 4)
    w.s[VCC] = 0x5A5A5A5A
    run(words, w)
    want = sum(1 << i for i in range(32) if _pred(op, a[i], b[i], fmt))
    assert int(w.s[VCC]) == want, (op, fmt, hex(int(w.s[VCC]) ^ want))


def _class(x: int, fmt: str) -> int:
    """The class bit V_CMP_CLASS tests: 0 signalling NaN, 1 quiet NaN, 2 -inf, 3 -normal, 4 -denormal, 5 -0, 6 +0,
    7 +denormal, 8 +normal, 9 +inf."""
    m, e = FMT[fmt]
    sign, ex, man = x >> (m + e) & 1, (x >> m) & ((1 << e) - 1), x & ((1 << m) - 1)
    if ex == (1 << e) - 1:
        if man:
            return 1 if man >> (m - 1) else 0
        return 2 if sign else 9
    if ex == 0:
        if man == 0:
            return 5 if sign else 6
        return 4 if sign else 7
    return 3 if sign else 8


@pytest.mark.parametrize("fmt", ["f16", "f32", "f64"])
def test_vopc_class(fmt: str) -> None:
    a, _ = _inputs(fmt, zlib.crc32(fmt.encode()))
    rng = random.Random(3)
    masks = [rng.getrandbits(10) for _ in range(31)] + [0x3FF]
    for mask_set in (masks, [1 << (i % 10) for i in range(32)]):
        w = wave()
        if fmt == "f64":
            w.v[2], w.v[3] = [x & M32 for x in a], [x >> 32 for x in a]
        else:
            w.v[2] = a
        w.v[4] = mask_set
        run(vopc(f"v_cmp_class_{fmt}_e32", v(2), 4), w)
        want = sum(1 << i for i in range(32) if mask_set[i] >> _class(a[i], fmt) & 1)
        assert int(w.s[VCC]) == want, fmt


# ---- SOPK --------------------------------------------------------------------------------------------------------

def _sx16(k: int) -> int:
    return k - (1 << 16) if k >> 15 else k


def _i32(x: int) -> int:
    return x - (1 << 32) if x >> 31 else x


_ORDER = {"eq": operator.eq, "lg": operator.ne, "gt": operator.gt, "ge": operator.ge, "lt": operator.lt,
          "le": operator.le}


def _cmpk(f: Callable[[int, int], bool], signed: bool) -> Callable[[int, int], bool]:
    """S_CMPK_*_I32 compares S0.i32 with the sign-extended SIMM16, the _U32 forms S0.u32 with it zero-extended."""
    return (lambda s, k: f(_i32(s), _sx16(k))) if signed else f


SOPK_CMP: dict[str, Callable[[int, int], bool]] = {
    **{f"s_cmpk_{n}_i32": _cmpk(f, True) for n, f in _ORDER.items()},
    **{f"s_cmpk_{n}_u32": _cmpk(f, False) for n, f in _ORDER.items()},
}


def _sopk_cases(seed: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    ks = [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x1234] + [rng.getrandbits(16) for _ in range(10)]
    out = []
    for k in ks:
        out += [(k, k), (_sx16(k) & M32, k), (rng.getrandbits(32), k), ((_sx16(k) + 1) & M32, k), (M32, k)]
    return out


@pytest.mark.parametrize("name", sorted(SOPK_CMP))
def test_sopk_compares(name: str) -> None:
    w = wave()
    for s, k in _sopk_cases(zlib.crc32(name.encode())):
        w.s[5] = s
        w.scc = 1 - int(SOPK_CMP[name](s, k))
        run(sopk(name, 5, k), w)
        assert w.scc == int(SOPK_CMP[name](s, k)), (name, hex(s), hex(k))


def test_sopk_moves_adds_and_multiplies() -> None:
    w = wave()
    for s, k in _sopk_cases(9):
        w.s[5] = 0x77777777
        run(sopk("s_movk_i32", 5, k), w)
        assert int(w.s[5]) == _sx16(k) & M32
        for scc in (0, 1):
            w.s[5], w.scc = 0x77777777, scc
            run(sopk("s_cmovk_i32", 5, k), w)
            assert int(w.s[5]) == (_sx16(k) & M32 if scc else 0x77777777) and w.scc == scc
        w.s[5], w.scc = s, 0
        run(sopk("s_addk_i32", 5, k), w)
        total = _i32(s) + _sx16(k)
        assert int(w.s[5]) == total & M32
        assert w.scc == int(total != _i32(total & M32)), (hex(s), hex(k))     # signed overflow
        w.s[5], w.scc = s, 1
        run(sopk("s_mulk_i32", 5, k), w)
        assert int(w.s[5]) == (_i32(s) * _sx16(k)) & M32 and w.scc == 1         # SCC unchanged


# ---- VOP3P packed 16-bit integer math, each half on its own ---------------------------------------------------------

def _vop3p(m: str, vdst: int, s0: int, s1: int, s2: int = 128, *, opsel: int = 0, opsel_hi: int = 7) -> list[int]:
    enc, op = OPC[m]
    assert enc == "VOP3P"
    w0 = 0xCC000000 | op << 16 | (opsel_hi >> 2 & 1) << 14 | opsel << 11 | vdst
    return [w0, (opsel_hi & 3) << 27 | s2 << 18 | s1 << 9 | s0]


def _s16(x: int) -> int:
    return x - (1 << 16) if x >> 15 else x


PK: dict[str, Callable[..., int]] = {
    "v_pk_add_u16": lambda a, b: a + b, "v_pk_sub_u16": lambda a, b: a - b,
    "v_pk_add_i16": lambda a, b: _s16(a) + _s16(b), "v_pk_sub_i16": lambda a, b: _s16(a) - _s16(b),
    "v_pk_mul_lo_u16": lambda a, b: a * b, "v_pk_lshlrev_b16": lambda a, b: b << (a & 15),
    "v_pk_lshrrev_b16": lambda a, b: b >> (a & 15), "v_pk_ashrrev_i16": lambda a, b: _s16(b) >> (a & 15),
    "v_pk_max_i16": lambda a, b: max(_s16(a), _s16(b)), "v_pk_min_i16": lambda a, b: min(_s16(a), _s16(b)),
    "v_pk_max_u16": max, "v_pk_min_u16": min,
    "v_pk_mad_u16": lambda a, b, c: a * b + c, "v_pk_mad_i16": lambda a, b, c: _s16(a) * _s16(b) + _s16(c),
}


@pytest.mark.parametrize("name", sorted(PK))
def test_vop3p_packed_integer_halves(name: str) -> None:
    rng = random.Random(zlib.crc32(name.encode()))
    edges = [0, 1, 15, 16, 0x7FFF, 0x8000, 0xFFFF, 0x00FF]
    srcs = [[rng.choice(edges) << 16 | rng.getrandbits(16) if rng.random() < 0.3 else rng.getrandbits(32)
             for _ in range(32)] for _ in range(3)]
    nsrc = 3 if "mad" in name else 2
    for opsel, opsel_hi in ((0, 7), (0b101, 0b010), (0b011, 0b000), (0b110, 0b111)):
        w = wave()
        w.v[1], w.v[2], w.v[3] = srcs
        run(_vop3p(name, 4, v(1), v(2), v(3) if nsrc == 3 else 128, opsel=opsel, opsel_hi=opsel_hi), w)
        for i in range(32):
            def half(sel: int, i: int = i) -> list[int]:
                return [srcs[k][i] >> (16 if sel >> k & 1 else 0) & 0xFFFF for k in range(nsrc)]
            want = (PK[name](*half(opsel)) & 0xFFFF) | (PK[name](*half(opsel_hi)) & 0xFFFF) << 16
            assert int(w.v[4, i]) == want, (name, opsel, opsel_hi, i)
