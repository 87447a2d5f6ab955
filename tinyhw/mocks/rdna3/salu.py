"""Scalar ALU, program control and scalar memory (SOP1/SOP2/SOPC/SOPK/SOPP/SMEM; specs/amd-compute.md §5.4).

Each ``compile_*`` takes a decoded instruction and returns a function of the wave that executes it once:
it returns None (fall through), a new PC (a taken branch), or END / BARRIER. SALU values are Python
ints masked to 32 (or 64) bits; SCC follows the rule of each opcode in the ISA reference.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from tinyhw.mocks.rdna3.state import EXEC, M0, M32, M64, NULL, VCC, Wave, s_get, s_get64, s_put

END = -1
BARRIER = -2
Fn = Callable[[Wave], Any]


def _i32(x: int) -> int:
    x &= M32
    return x - (1 << 32) if x >> 31 else x


def _sop2_ops() -> dict[str, Callable[[Wave, int, int], int]]:
    def add_u32(w: Wave, a: int, b: int) -> int:
        r = a + b
        w.scc = r >> 32 & 1
        return r

    def add_i32(w: Wave, a: int, b: int) -> int:
        r = _i32(a) + _i32(b)
        w.scc = int(r != _i32(r))
        return r

    def addc_u32(w: Wave, a: int, b: int) -> int:
        r = a + b + w.scc
        w.scc = r >> 32 & 1
        return r

    def sub_u32(w: Wave, a: int, b: int) -> int:
        w.scc = int(b > a)
        return a - b

    def sub_i32(w: Wave, a: int, b: int) -> int:
        r = _i32(a) - _i32(b)
        w.scc = int(r != _i32(r))
        return r

    def subb_u32(w: Wave, a: int, b: int) -> int:
        r = a - b - w.scc
        w.scc = int(r < 0)
        return r

    def logic(f: Callable[[int, int], int]) -> Callable[[Wave, int, int], int]:
        def op(w: Wave, a: int, b: int) -> int:
            r = f(a, b) & M32
            w.scc = int(r != 0)
            return r
        return op

    def mul_i32(w: Wave, a: int, b: int) -> int:
        return a * b

    def cselect(w: Wave, a: int, b: int) -> int:
        return a if w.scc else b

    def minmax(first: Callable[[int, int], bool], signed: bool) -> Callable[[Wave, int, int], int]:
        # the guide: SCC = S0 < S1 (min) or S0 >= S1 (max), D = SCC ? S0 : S1 (equal inputs: min clears SCC)
        def op(w: Wave, a: int, b: int) -> int:
            x, y = (_i32(a), _i32(b)) if signed else (a, b)
            w.scc = int(first(x, y))
            return x if w.scc else y
        return op

    return {
        "s_add_u32": add_u32, "s_add_i32": add_i32, "s_addc_u32": addc_u32, "s_sub_u32": sub_u32,
        "s_sub_i32": sub_i32, "s_subb_u32": subb_u32,
        "s_and_b32": logic(lambda a, b: a & b), "s_or_b32": logic(lambda a, b: a | b),
        "s_xor_b32": logic(lambda a, b: a ^ b), "s_and_not1_b32": logic(lambda a, b: a & ~b),
        "s_or_not1_b32": logic(lambda a, b: a | ~b), "s_nand_b32": logic(lambda a, b: ~(a & b)),
        "s_nor_b32": logic(lambda a, b: ~(a | b)), "s_xnor_b32": logic(lambda a, b: ~(a ^ b)),
        "s_lshl_b32": logic(lambda a, b: a << (b & 31)), "s_lshr_b32": logic(lambda a, b: a >> (b & 31)),
        "s_ashr_i32": logic(lambda a, b: _i32(a) >> (b & 31)),
        "s_mul_i32": mul_i32, "s_cselect_b32": cselect,
        # bit-field extract: offset S1[4:0], width S1[22:16]; SCC = result != 0
        "s_bfe_u32": logic(lambda a, b: (a >> (b & 31)) & ((1 << (b >> 16 & 0x7F)) - 1)),
        # signed: the guide shifts S0.i32 (arithmetic: bits past 31 are sign bits); a width over 32 acts as 32
        "s_bfe_i32": logic(lambda a, b: _sext((_i32(a) >> (b & 31)) & ((1 << min(b >> 16 & 0x7F, 32)) - 1),
                                              b >> 16 & 0x7F)),
        # high half of the 64-bit product (SCC unchanged)
        "s_mul_hi_u32": lambda w, a, b: (a * b) >> 32, "s_mul_hi_i32": lambda w, a, b: (_i32(a) * _i32(b)) >> 32,
        "s_min_u32": minmax(int.__lt__, False), "s_max_u32": minmax(int.__ge__, False),
        "s_min_i32": minmax(int.__lt__, True), "s_max_i32": minmax(int.__ge__, True),
    }


def _sext(x: int, width: int) -> int:
    """``x`` (``width`` bits) sign-extended; width 0 gives 0."""
    if width == 0:
        return 0
    width = min(width, 32)
    return x - (1 << width) if x >> (width - 1) & 1 else x


def _i64(x: int) -> int:
    x &= M64
    return x - (1 << 64) if x >> 63 else x


def _sop2_more() -> dict[str, Callable[[Wave, int, int], int]]:
    def absdiff(w: Wave, a: int, b: int) -> int:
        r = abs(_i32(a) - _i32(b)) & M32
        w.scc = int(r != 0)
        return r

    def lshl_add(n: int) -> Callable[[Wave, int, int], int]:
        def op(w: Wave, a: int, b: int) -> int:     # SCC: the 64-bit (S0 << n) + S1 does not fit in 32 bits
            r = (a << n) + b
            w.scc = int(r >> 32 != 0)
            return r
        return op

    def pack(hi_a: int, hi_b: int) -> Callable[[Wave, int, int], int]:
        return lambda w, a, b: (a >> 16 * hi_a & 0xFFFF) | (b >> 16 * hi_b & 0xFFFF) << 16

    return {"s_absdiff_i32": absdiff, **{f"s_lshl{n}_add_u32": lshl_add(n) for n in (1, 2, 3, 4)},
            "s_bfm_b32": lambda w, a, b: ((1 << (a & 31)) - 1) << (b & 31),
            "s_pack_ll_b32_b16": pack(0, 0), "s_pack_lh_b32_b16": pack(0, 1), "s_pack_hh_b32_b16": pack(1, 1),
            "s_pack_hl_b32_b16": pack(1, 0)}


def _bfe64(a: int, b: int, signed: bool) -> int:
    off, width = b & 63, min(b >> 16 & 0x7F, 64)     # a width over 64 acts as 64
    r = ((_i64(a) if signed else a) >> off) & ((1 << width) - 1) if width else 0   # signed: S0.i64 >> (arithmetic)
    if signed and width and r >> (width - 1) & 1:
        r -= 1 << width
    return r & M64


SOP2 = {**_sop2_ops(), **_sop2_more()}
# 64-bit SOP2: SCC = result != 0 (the shifts, logic ops and bit-field extracts)
SOP2_64 = {"s_lshl_b64": lambda a, b: a << (b & 63), "s_lshr_b64": lambda a, b: a >> (b & 63),
           "s_ashr_i64": lambda a, b: _i64(a) >> (b & 63),
           "s_and_b64": lambda a, b: a & b, "s_or_b64": lambda a, b: a | b, "s_xor_b64": lambda a, b: a ^ b,
           "s_nand_b64": lambda a, b: ~(a & b), "s_nor_b64": lambda a, b: ~(a | b), "s_xnor_b64": lambda a, b: ~(a ^ b),
           "s_and_not1_b64": lambda a, b: a & ~b, "s_or_not1_b64": lambda a, b: a | ~b,
           "s_bfe_u64": lambda a, b: _bfe64(a, b, False), "s_bfe_i64": lambda a, b: _bfe64(a, b, True)}
_SOP2_64_PAIR_B = frozenset({"s_and_b64", "s_or_b64", "s_xor_b64", "s_nand_b64", "s_nor_b64", "s_xnor_b64",
                             "s_and_not1_b64", "s_or_not1_b64"})
_CMP = {"eq": lambda a, b: a == b, "lg": lambda a, b: a != b, "gt": lambda a, b: a > b,
        "ge": lambda a, b: a >= b, "lt": lambda a, b: a < b, "le": lambda a, b: a <= b}


def compile_sop2(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a SOP2 instruction (two scalar sources, one SGPR destination, SCC) into a function that runs it on a
    wave; ``bad`` builds the error for an opcode or operand the model lacks."""
    f, m, lit = inst.fields, inst.mnemonic, inst.fields.get("literal")
    d = f["sdst"]
    if m in SOP2:
        op, a, b = SOP2[m], s_get(f["ssrc0"], lit, bad), s_get(f["ssrc1"], lit, bad)

        def run(w: Wave) -> None:
            s_put(w, d, op(w, a(w), b(w)))
        return run
    if m in SOP2_64:
        op64 = SOP2_64[m]
        a64 = s_get64(f["ssrc0"], lit, bad)
        b = s_get64(f["ssrc1"], lit, bad) if m in _SOP2_64_PAIR_B else s_get(f["ssrc1"], lit, bad)

        def run64(w: Wave) -> None:
            r = op64(a64(w), b(w)) & M64
            w.scc = int(r != 0)
            s_put(w, d, r)
            s_put(w, d + 1, r >> 32)
        return run64
    if m in ("s_cselect_b64", "s_bfm_b64"):
        a64, b64 = s_get64(f["ssrc0"], lit, bad), s_get64(f["ssrc1"], lit, bad)
        if m == "s_bfm_b64":
            a, b = s_get(f["ssrc0"], lit, bad), s_get(f["ssrc1"], lit, bad)

            def bfm64(w: Wave) -> None:
                r = ((1 << (a(w) & 63)) - 1) << (b(w) & 63) & M64
                s_put(w, d, r)
                s_put(w, d + 1, r >> 32)
            return bfm64

        def csel64(w: Wave) -> None:
            r = a64(w) if w.scc else b64(w)
            s_put(w, d, r)
            s_put(w, d + 1, r >> 32)
        return csel64
    raise bad("SOP2 opcode not modelled")


def compile_sopc(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a SOPC compare (s_cmp_<op>_u32/i32) into a function that sets SCC; ``bad`` builds the error for one not
    modelled."""
    f, m, lit = inst.fields, inst.mnemonic, inst.fields.get("literal")
    if m.startswith("s_bitcmp"):    # SCC = S0[S1[4:0]] (b64: S1[5:0]) == 0 / 1
        want, wide = int(m[8]), m.endswith("b64")
        a = s_get64(f["ssrc0"], lit, bad) if wide else s_get(f["ssrc0"], lit, bad)
        b = s_get(f["ssrc1"], lit, bad)
        bits = 63 if wide else 31

        def bitcmp(w: Wave) -> None:
            w.scc = int((a(w) >> (b(w) & bits) & 1) == want)
        return bitcmp
    if m in ("s_cmp_eq_u64", "s_cmp_lg_u64"):
        a, b = s_get64(f["ssrc0"], lit, bad), s_get64(f["ssrc1"], lit, bad)
        eq = m == "s_cmp_eq_u64"

        def cmp64(w: Wave) -> None:
            w.scc = int((a(w) == b(w)) == eq)
        return cmp64
    parts = m.split("_")   # s_cmp_lt_u32
    if len(parts) != 4 or parts[1] != "cmp" or parts[2] not in _CMP or parts[3] not in ("u32", "i32"):
        raise bad("SOPC opcode not modelled")
    cmp, signed = _CMP[parts[2]], parts[3] == "i32"
    a, b = s_get(f["ssrc0"], lit, bad), s_get(f["ssrc1"], lit, bad)

    def run(w: Wave) -> None:
        x, y = a(w), b(w)
        w.scc = int(cmp(_i32(x), _i32(y)) if signed else cmp(x, y))
    return run


def compile_sopk(inst: Any, bad: Callable[[str], Exception], pc: int = 0) -> Fn:
    """Compile a SOPK instruction at ``pc`` (SGPR with a 16-bit immediate: s_movk, s_cmovk, s_cmpk, s_addk, s_mulk,
    the SOPK waits, s_getreg/s_setreg of MODE, s_call_b64) into a function that runs it on a wave."""
    f, m = inst.fields, inst.mnemonic
    d, k = f["sdst"], f["simm16"]
    sk = k - 0x10000 if k & 0x8000 else k
    if m.startswith("s_cmpk_"):
        parts = m.split("_")   # s_cmpk_lt_u32: SGPR[SDST] compared with SIMM16 (zero-extended for u32, else signed)
        if len(parts) != 4 or parts[2] not in _CMP:
            raise bad("SOPK compare not modelled")
        cmp, signed = _CMP[parts[2]], parts[3] == "i32"

        def run_cmp(w: Wave) -> None:
            w.scc = int(cmp(_i32(w.s[d]), sk) if signed else cmp(w.s[d], k))
        return run_cmp
    if m == "s_movk_i32":
        return lambda w: s_put(w, d, sk)
    if m == "s_addk_i32":
        def run_add(w: Wave) -> None:
            r = _i32(w.s[d]) + sk
            w.scc = int(r != _i32(r))
            s_put(w, d, r)
        return run_add
    if m == "s_mulk_i32":
        return lambda w: s_put(w, d, _i32(w.s[d]) * sk)
    if m in _WAITK or m == "s_version":
        # memory completes at issue (§5.5): the SOPK waits (SGPR count or'd with SIMM16) have nothing to wait for
        return lambda w: None
    if m == "s_cmovk_i32":
        def cmovk(w: Wave) -> None:
            if w.scc:
                s_put(w, d, sk)
        return cmovk
    if m in ("s_getreg_b32", "s_setreg_b32", "s_setreg_imm32_b32"):
        return _hwreg(m, d, k, f.get("literal"), bad)
    if m == "s_call_b64":           # D = the return address, PC = PC + 4 + SIMM16 * 4
        target, ret = pc + 4 + 4 * sk, pc + 4

        def call(w: Wave) -> int:
            s_put(w, d, ret)
            s_put(w, d + 1, ret >> 32)
            return target
        return call
    raise bad("SOPK opcode not modelled")


_WAITK = frozenset({"s_waitcnt_vscnt", "s_waitcnt_vmcnt", "s_waitcnt_expcnt", "s_waitcnt_lgkmcnt"})
HW_REG_MODE = 1


def _hwreg(m: str, d: int, simm: int, literal: int | None, bad: Callable[[str], Exception]) -> Fn:
    """s_getreg_b32 / s_setreg_b32 / s_setreg_imm32_b32 of a hardware-register field: SIMM16 = ID[5:0],
    OFFSET[10:6], SIZE-1 [15:11]. Only MODE (ID 1) is modelled (FP round and denormal modes, DX10_CLAMP, IEEE)."""
    hid, off, size = simm & 0x3F, simm >> 6 & 0x1F, (simm >> 11 & 0x1F) + 1
    if hid != HW_REG_MODE:
        raise bad(f"hardware register {hid} (only MODE is modelled)")
    mask = ((1 << size) - 1) << off & M32
    if m == "s_getreg_b32":
        return lambda w: s_put(w, d, (w.mode & mask) >> off)
    if m == "s_setreg_imm32_b32":
        if literal is None:
            raise bad("s_setreg_imm32_b32 without its literal")
        val = literal

        def setimm(w: Wave) -> None:
            w.mode = (w.mode & ~mask) | (val << off & mask)
        return setimm

    def setreg(w: Wave) -> None:        # the SDST field names the source SGPR
        w.mode = (w.mode & ~mask) | ((0 if d == NULL else w.s[d]) << off & mask)
    return setreg


def compile_sop1(inst: Any, bad: Callable[[str], Exception], pc: int = 0) -> Fn:
    """Compile a SOP1 instruction at ``pc`` (one scalar source: moves, not, bit counts and scans, sign extension,
    the saveexec/wrexec forms, PC moves) into a function that runs it on a wave."""
    f, m, lit = inst.fields, inst.mnemonic, inst.fields.get("literal")
    d, src = f["sdst"], f["ssrc0"]
    if m == "s_mov_b32":
        a = s_get(src, lit, bad)
        return lambda w: s_put(w, d, a(w))
    if m == "s_mov_b64":
        a64 = s_get64(src, lit, bad)

        def mov64(w: Wave) -> None:
            x = a64(w)
            s_put(w, d, x)
            s_put(w, d + 1, x >> 32)
        return mov64
    if m == "s_not_b32":
        a = s_get(src, lit, bad)

        def not32(w: Wave) -> None:
            r = ~a(w) & M32
            w.scc = int(r != 0)
            s_put(w, d, r)
        return not32
    if m == "s_bcnt1_i32_b32":
        a = s_get(src, lit, bad)

        def bcnt(w: Wave) -> None:
            r = a(w).bit_count()
            w.scc = int(r != 0)
            s_put(w, d, r)
        return bcnt
    saveexec = {"s_and_saveexec_b32": lambda s, e: s & e, "s_or_saveexec_b32": lambda s, e: s | e,
                "s_xor_saveexec_b32": lambda s, e: s ^ e, "s_and_not1_saveexec_b32": lambda s, e: s & ~e & M32,
                "s_and_not0_saveexec_b32": lambda s, e: ~s & e & M32,
                "s_nand_saveexec_b32": lambda s, e: ~(s & e), "s_nor_saveexec_b32": lambda s, e: ~(s | e),
                "s_xnor_saveexec_b32": lambda s, e: ~(s ^ e), "s_or_not0_saveexec_b32": lambda s, e: ~s | e,
                "s_or_not1_saveexec_b32": lambda s, e: s | ~e}
    wrexec = {"s_and_not0_wrexec_b32": lambda s, e: ~s & e, "s_and_not1_wrexec_b32": lambda s, e: s & ~e}
    if m in wrexec:       # EXEC = op(S0, EXEC); D = the new EXEC; SCC = EXEC != 0
        opw, a = wrexec[m], s_get(src, lit, bad)

        def run_we(w: Wave) -> None:
            w.s[EXEC] = opw(a(w), w.s[EXEC]) & M32
            s_put(w, d, w.s[EXEC])
            w.scc = int(w.s[EXEC] != 0)
        return run_we
    more = _sop1_more(m, d, src, lit, pc, bad)
    if more is not None:
        return more
    if m in saveexec:
        op, a = saveexec[m], s_get(src, lit, bad)

        def run_se(w: Wave) -> None:
            e = w.s[EXEC]
            x = a(w)
            s_put(w, d, e)
            w.s[EXEC] = op(x, e) & M32
            w.scc = int(w.s[EXEC] != 0)
        return run_se
    raise bad("SOP1 opcode not modelled")


def _rev(x: int, bits: int) -> int:
    return int(f"{x:0{bits}b}"[::-1], 2)


def _clz(x: int, bits: int) -> int:
    return bits - x.bit_length() if x else M32


def _ctz(x: int) -> int:
    return (x & -x).bit_length() - 1 if x else M32


def _sop1_more(m: str, d: int, src: int, lit: int | None, pc: int, bad: Callable[[str], Exception]) -> Fn | None:
    """The rest of SOP1 (RDNA3 ISA pseudocode); None for an opcode not modelled."""
    wide = m.endswith(("b64", "u64", "i64"))
    a = s_get64(src, lit, bad) if wide else s_get(src, lit, bad)
    bits = 64 if wide else 32

    def put(w: Wave, r: int) -> None:
        s_put(w, d, r)
        if wide:
            s_put(w, d + 1, r >> 32)

    def scc_put(f: Callable[[int], int]) -> Fn:
        def run(w: Wave) -> None:
            r = f(a(w)) & (M64 if wide else M32)
            w.scc = int(r != 0)
            put(w, r)
        return run

    def plain(f: Callable[[int], int], out64: bool = False) -> Fn:
        def run(w: Wave) -> None:
            r = f(a(w))
            s_put(w, d, r)
            if out64:
                s_put(w, d + 1, r >> 32)
        return run

    if m in ("s_cmov_b32", "s_cmov_b64"):
        def cmov(w: Wave) -> None:
            if w.scc:
                put(w, a(w))
        return cmov
    if m in ("s_not_b64",):
        return scc_put(lambda x: ~x)
    if m in ("s_brev_b32", "s_brev_b64"):
        return plain(lambda x: _rev(x, bits), wide)
    if m in ("s_ctz_i32_b32", "s_ctz_i32_b64"):
        return plain(_ctz)
    if m in ("s_clz_i32_u32", "s_clz_i32_u64"):
        return plain(lambda x: _clz(x, bits))
    if m in ("s_cls_i32", "s_cls_i32_i64"):      # leading bits equal to the sign bit, counting it; -1 if all equal
        return plain(lambda x: _clz(x ^ (M64 if wide else M32) if x >> (bits - 1) else x, bits))
    if m == "s_sext_i32_i8":
        return plain(lambda x: _sext(x & 0xFF, 8))
    if m == "s_sext_i32_i16":
        return plain(lambda x: _sext(x & 0xFFFF, 16))
    if m in ("s_bitset0_b32", "s_bitset1_b32", "s_bitset0_b64", "s_bitset1_b64"):
        one, b = m[8] == "1", s_get(src, lit, bad)

        def bitset(w: Wave) -> None:
            cur = w.s[d] | (w.s[d + 1] << 32 if wide else 0)
            bit = 1 << (b(w) & (bits - 1))
            put(w, cur | bit if one else cur & ~bit)
        return bitset
    if m == "s_bitreplicate_b64_b32":
        return plain(lambda x: sum(3 << (2 * i) for i in range(32) if x >> i & 1), True)
    if m == "s_abs_i32":
        return scc_put(lambda x: abs(_i32(x)))
    if m in ("s_bcnt0_i32_b32", "s_bcnt0_i32_b64"):
        def bcnt0(w: Wave) -> None:
            r = bits - a(w).bit_count()
            w.scc = int(r != 0)
            s_put(w, d, r)
        return bcnt0
    if m == "s_bcnt1_i32_b64":
        def bcnt1(w: Wave) -> None:
            r = a(w).bit_count()
            w.scc = int(r != 0)
            s_put(w, d, r)
        return bcnt1
    if m in ("s_quadmask_b32", "s_quadmask_b64"):
        return scc_put(lambda x: sum(1 << i for i in range(bits // 4) if x >> (4 * i) & 0xF))
    if m in ("s_wqm_b32", "s_wqm_b64"):
        return scc_put(lambda x: sum(0xF << (4 * i) for i in range(bits // 4) if x >> (4 * i) & 0xF))
    if m == "s_getpc_b64":
        nxt = pc + 4
        return lambda w: put(w, nxt)
    if m in ("s_setpc_b64", "s_swappc_b64"):
        nxt, swap = pc + 4, m == "s_swappc_b64"

        def setpc(w: Wave) -> int:
            target = a(w) & ~3 & M64
            if swap:
                put(w, nxt)
            return target
        return setpc
    if m in ("s_movrels_b32", "s_movrels_b64"):        # D = SGPR[S0 + M0]
        if src > 105:
            raise bad("s_movrels from a non-SGPR")

        def movrels(w: Wave) -> None:
            i = src + w.s[M0]
            put(w, w.s[i] | (w.s[i + 1] << 32 if wide else 0))
        return movrels
    if m in ("s_movreld_b32", "s_movreld_b64"):        # SGPR[D + M0] = S0
        def movreld(w: Wave) -> None:
            i, x = d + w.s[M0], a(w)
            s_put(w, i, x)
            if wide:
                s_put(w, i + 1, x >> 32)
        return movreld
    return None


_HINTS = frozenset({"s_nop", "s_clause", "s_delay_alu", "s_waitcnt", "s_set_inst_prefetch_distance",
                    "s_waitcnt_depctr", "s_icache_inv", "s_sleep", "s_setprio", "s_wait_idle", "s_wait_event",
                    "s_wakeup", "s_incperflevel", "s_decperflevel", "s_ttracedata", "s_ttracedata_imm",
                    "s_code_end"})
_BRANCH: dict[str, Callable[[Wave], bool]] = {
    "s_branch": lambda w: True,
    "s_cbranch_scc0": lambda w: w.scc == 0, "s_cbranch_scc1": lambda w: w.scc == 1,
    "s_cbranch_vccz": lambda w: w.s[VCC] == 0, "s_cbranch_vccnz": lambda w: w.s[VCC] != 0,
    "s_cbranch_execz": lambda w: w.s[EXEC] == 0, "s_cbranch_execnz": lambda w: w.s[EXEC] != 0,
}
MSG_DEALLOC_VGPRS = 3


def compile_sopp(inst: Any, pc: int, bad: Callable[[str], Exception]) -> Fn:
    """Compile a SOPP instruction at ``pc``: waitcnt and hints are no-ops (memory completes at issue), s_endpgm and
    s_barrier return their markers, branches return the target PC when taken."""
    m, simm = inst.mnemonic, inst.simm16
    if m in _HINTS:
        # s_waitcnt is a no-op: every memory operation completes when it is issued (§5.5)
        return lambda w: None
    if m == "s_endpgm":
        return lambda w: END
    if m in ("s_round_mode", "s_denorm_mode"):      # MODE.FP_ROUND (3:0) / MODE.FP_DENORM (7:4) = SIMM16[3:0]
        sh, val = (0 if m == "s_round_mode" else 4), inst.fields["simm16"] & 0xF

        def setmode(w: Wave) -> None:
            w.mode = (w.mode & ~(0xF << sh)) | val << sh
        return setmode
    if m.startswith("s_cbranch_cdbg"):
        return lambda w: None           # no debugger is attached: the debug-condition branches are never taken
    if m == "s_barrier":
        return lambda w: BARRIER
    if m == "s_sendmsg":
        if inst.fields["simm16"] != MSG_DEALLOC_VGPRS:
            raise bad(f"s_sendmsg message {inst.fields['simm16']} not modelled")
        return lambda w: None
    if m in _BRANCH:
        cond, target = _BRANCH[m], pc + 4 + 4 * simm
        return lambda w: target if cond(w) else None
    raise bad("SOPP opcode not modelled")


_SLOAD = {"s_load_b32": 1, "s_load_b64": 2, "s_load_b128": 4, "s_load_b256": 8, "s_load_b512": 16}


def smem_address(base: int, offset: int, soffset: int) -> int:
    """An s_load address: SGPR-pair base + the signed instruction offset + the SOFFSET register. ISA guide, scalar
    memory addressing: "All components of the address (base, offset, inst_offset, M0) are in bytes, but the two
    LSBs are ignored and treated as if they were zero": each component is cut to a dword multiple before the sum
    (base 2 + offset 2 reads at base 0, not 4)."""
    return ((base & ~3) + (offset & ~3) + (soffset & ~3)) & M64


def compile_smem(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile an s_load_b32..b512 into a function that reads the dwords at SGPR-pair base + offset (+ SOFFSET) into
    SGPRs; other SMEM opcodes are not modelled."""
    f, m = inst.fields, inst.mnemonic
    if m in ("s_gl1_inv", "s_dcache_inv", "s_atc_probe", "s_atc_probe_buffer"):
        return lambda w: None        # no caches are modelled (every access reaches memory); no ATC
    if m.startswith("s_buffer_load_"):
        return _buffer_load(inst, bad)
    if m not in _SLOAD:
        raise bad("SMEM opcode not modelled")
    n, d, base, off, so = _SLOAD[m], f["sdata"], f["sbase"], f["offset"], f["soffset"]
    if d + n > 106:
        raise bad("SMEM destination beyond the SGPRs")
    fmt = f"<{n}I"

    def run(w: Wave) -> None:
        s = w.s
        addr = smem_address(s[base] | s[base + 1] << 32, off, 0 if so == 124 else s[so])
        s[d:d + n] = struct.unpack(fmt, w.mem.read(addr, 4 * n))
    return run


def _buffer_load(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """s_buffer_load_b32..b512: the buffer resource (V#) in SGPRs SBASE..SBASE+3 gives the base address (bits 47:0)
    and NUM_RECORDS (dword 2, bytes); dwords at base + offset (+ SOFFSET) at or beyond NUM_RECORDS read 0. The two
    LSBs of the base and of each offset are ignored (as for s_load, :func:`smem_address`)."""
    f = inst.fields
    n = _SLOAD[inst.mnemonic.replace("s_buffer_load", "s_load")]
    d, base, off, so = f["sdata"], f["sbase"], f["offset"], f["soffset"]
    if d + n > 106:
        raise bad("SMEM destination beyond the SGPRs")

    def run(w: Wave) -> None:
        s = w.s
        addr0 = (s[base] | (s[base + 1] & 0xFFFF) << 32) & ~3       # the V# base's two LSBs are ignored too
        rel = ((off & ~3) + ((0 if so == 124 else s[so]) & ~3)) & M32
        limit = s[base + 2]
        ok = max(0, min(n, (limit - rel + 3) // 4)) if rel < limit else 0
        vals = list(struct.unpack(f"<{ok}I", w.mem.read((addr0 + rel) & M64, 4 * ok))) if ok else []
        s[d:d + n] = vals + [0] * (n - ok)
    return run


def lockstep_ok(inst: Any) -> bool:
    """True when the compiled function of SOPP instruction ``inst`` may run once for several waves in lockstep (hints,
    s_endpgm, s_barrier, branches: they read SCC/VCC/EXEC only to pick the next PC, which the waves must agree on)."""
    m = inst.mnemonic
    return inst.encoding == "SOPP" and (m in _HINTS or m in _BRANCH or m in ("s_endpgm", "s_barrier", "s_sendmsg")
                                        or m.startswith("s_cbranch_cdbg"))
