"""Scalar ALU, program control and scalar memory (SOP1/SOP2/SOPC/SOPK/SOPP/SMEM; specs/amd-compute.md §5.4).

Each ``compile_*`` takes a decoded instruction and returns a function of the wave that executes it once:
it returns None (fall through), a new PC (a taken branch), or END / BARRIER. SALU values are Python
ints masked to 32 (or 64) bits; SCC follows the rule of each opcode in the ISA reference.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from tinyhw.mocks.rdna3.state import EXEC, M32, M64, VCC, Wave, s_get, s_get64, s_put

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

    def minmax(f: Callable[[int, int], int], signed: bool) -> Callable[[Wave, int, int], int]:
        def op(w: Wave, a: int, b: int) -> int:
            x, y = (_i32(a), _i32(b)) if signed else (a, b)
            r = f(x, y)
            w.scc = int(r == x)
            return r
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
        "s_bfe_i32": logic(lambda a, b: _sext((a >> (b & 31)) & ((1 << (b >> 16 & 0x7F)) - 1), b >> 16 & 0x7F)),
        # high half of the 64-bit product (SCC unchanged)
        "s_mul_hi_u32": lambda w, a, b: (a * b) >> 32, "s_mul_hi_i32": lambda w, a, b: (_i32(a) * _i32(b)) >> 32,
        "s_min_u32": minmax(min, False), "s_max_u32": minmax(max, False),
        "s_min_i32": minmax(min, True), "s_max_i32": minmax(max, True),
    }


def _sext(x: int, width: int) -> int:
    """``x`` (``width`` bits) sign-extended; width 0 gives 0."""
    if width == 0:
        return 0
    width = min(width, 32)
    return x - (1 << width) if x >> (width - 1) & 1 else x


SOP2 = _sop2_ops()
SOP2_64 = {"s_lshl_b64": lambda a, b: a << (b & 63), "s_lshr_b64": lambda a, b: a >> (b & 63),
           "s_and_b64": lambda a, b: a & b, "s_or_b64": lambda a, b: a | b, "s_xor_b64": lambda a, b: a ^ b}
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
        b = s_get64(f["ssrc1"], lit, bad) if m.endswith(("and_b64", "or_b64", "xor_b64")) \
            else s_get(f["ssrc1"], lit, bad)

        def run64(w: Wave) -> None:
            r = op64(a64(w), b(w)) & M64
            w.scc = int(r != 0)
            s_put(w, d, r)
            s_put(w, d + 1, r >> 32)
        return run64
    raise bad("SOP2 opcode not modelled")


def compile_sopc(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a SOPC compare (s_cmp_<op>_u32/i32) into a function that sets SCC; ``bad`` builds the error for one not
    modelled."""
    f, m, lit = inst.fields, inst.mnemonic, inst.fields.get("literal")
    parts = m.split("_")   # s_cmp_lt_u32
    if len(parts) != 4 or parts[1] != "cmp" or parts[2] not in _CMP or parts[3] not in ("u32", "i32"):
        raise bad("SOPC opcode not modelled")
    cmp, signed = _CMP[parts[2]], parts[3] == "i32"
    a, b = s_get(f["ssrc0"], lit, bad), s_get(f["ssrc1"], lit, bad)

    def run(w: Wave) -> None:
        x, y = a(w), b(w)
        w.scc = int(cmp(_i32(x), _i32(y)) if signed else cmp(x, y))
    return run


def compile_sopk(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a SOPK instruction (SGPR with a 16-bit immediate: s_movk, s_cmpk, s_addk, s_mulk) into a function that
    runs it on a wave."""
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
    raise bad("SOPK opcode not modelled")


def compile_sop1(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile a SOP1 instruction (one scalar source: moves, not, bit count, the saveexec forms) into a function that
    runs it on a wave."""
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
                "s_and_not0_saveexec_b32": lambda s, e: ~s & e & M32}
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


_HINTS = frozenset({"s_nop", "s_clause", "s_delay_alu", "s_waitcnt", "s_set_inst_prefetch_distance",
                    "s_waitcnt_depctr", "s_icache_inv"})
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


def compile_smem(inst: Any, bad: Callable[[str], Exception]) -> Fn:
    """Compile an s_load_b32..b512 into a function that reads the dwords at SGPR-pair base + offset (+ SOFFSET) into
    SGPRs; other SMEM opcodes are not modelled."""
    f, m = inst.fields, inst.mnemonic
    if m not in _SLOAD:
        raise bad("SMEM opcode not modelled")
    n, d, base, off, so = _SLOAD[m], f["sdata"], f["sbase"], f["offset"], f["soffset"]
    if d + n > 106:
        raise bad("SMEM destination beyond the SGPRs")
    fmt = f"<{n}I"

    def run(w: Wave) -> None:
        s = w.s
        addr = ((s[base] | s[base + 1] << 32) + off + (0 if so == 124 else s[so])) & ~3 & M64
        s[d:d + n] = struct.unpack(fmt, w.mem.read(addr, 4 * n))
    return run
