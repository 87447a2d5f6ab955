"""AMDGPU instruction-length decoding (and mnemonics where cheap) for gfx11, gfx12 and gfx9.

Written from the encoding tables of AMD's public ISA reference guides (RDNA3, RDNA4, CDNA3): the
high bits of an instruction's first dword select its encoding, which fixes its base size (32, 64
or 96 bits); a 32-bit literal follows when a source operand field holds 255 (gfx9: only in the
32-bit VOP/SOP encodings), and DPP/SDWA forms add one dword. specs/sqtt-pmc.md §6.1 uses this to
walk a wave's program counter through the code object's ``.text``.

Mnemonics are given for the scalar program-control encoding (SOPP: branches, waits, ``s_endpgm``);
every other instruction is named by its encoding and opcode (e.g. ``VOP2 op 0x3``), not guessed.
Anything not recognised decodes as ``unknown`` with size 4, so a walk never stops on a bad dword.
Not handled (size may be short by one dword): ``s_setreg_imm32_b32`` (SOPK with a literal) and
gfx11.5+ scalar float ``s_fmaak``/``s_fmamk``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

__all__ = ["Inst", "count_f32_fma", "decode_at", "decode_text", "isa_family"]

_SOPP = {
    "gfx11": {0: "s_nop", 1: "s_setkill", 2: "s_sethalt", 3: "s_sleep", 4: "s_set_inst_prefetch_distance",
              5: "s_clause", 7: "s_delay_alu", 8: "s_waitcnt_depctr", 9: "s_waitcnt", 10: "s_wait_idle",
              11: "s_wait_event", 16: "s_trap", 17: "s_round_mode", 18: "s_denorm_mode", 31: "s_code_end",
              32: "s_branch", 33: "s_cbranch_scc0", 34: "s_cbranch_scc1", 35: "s_cbranch_vccz",
              36: "s_cbranch_vccnz", 37: "s_cbranch_execz", 38: "s_cbranch_execnz", 39: "s_cbranch_cdbgsys",
              40: "s_cbranch_cdbguser", 41: "s_cbranch_cdbgsys_or_user", 42: "s_cbranch_cdbgsys_and_user",
              48: "s_endpgm", 49: "s_endpgm_saved", 52: "s_wakeup", 53: "s_setprio", 54: "s_sendmsg",
              55: "s_sendmsghalt", 56: "s_incperflevel", 57: "s_decperflevel", 58: "s_ttracedata",
              60: "s_icache_inv", 61: "s_barrier"},
    "gfx12": {0: "s_nop", 1: "s_setkill", 2: "s_sethalt", 3: "s_sleep", 5: "s_clause", 7: "s_delay_alu",
              8: "s_wait_alu", 10: "s_wait_idle", 11: "s_wait_event", 16: "s_trap", 17: "s_round_mode",
              18: "s_denorm_mode", 20: "s_barrier_wait", 31: "s_code_end", 32: "s_branch", 33: "s_cbranch_scc0",
              34: "s_cbranch_scc1", 35: "s_cbranch_vccz", 36: "s_cbranch_vccnz", 37: "s_cbranch_execz",
              38: "s_cbranch_execnz", 39: "s_cbranch_cdbgsys", 40: "s_cbranch_cdbguser",
              41: "s_cbranch_cdbgsys_or_user", 42: "s_cbranch_cdbgsys_and_user", 48: "s_endpgm",
              49: "s_endpgm_saved", 52: "s_wakeup", 53: "s_setprio", 54: "s_sendmsg", 55: "s_sendmsghalt",
              56: "s_incperflevel", 57: "s_decperflevel", 60: "s_icache_inv", 64: "s_wait_loadcnt",
              65: "s_wait_storecnt", 66: "s_wait_samplecnt", 67: "s_wait_bvhcnt", 68: "s_wait_expcnt",
              70: "s_wait_dscnt", 71: "s_wait_kmcnt", 72: "s_wait_loadcnt_dscnt", 73: "s_wait_storecnt_dscnt"},
    "gfx9": {0: "s_nop", 1: "s_endpgm", 2: "s_branch", 3: "s_wakeup", 4: "s_cbranch_scc0", 5: "s_cbranch_scc1",
             6: "s_cbranch_vccz", 7: "s_cbranch_vccnz", 8: "s_cbranch_execz", 9: "s_cbranch_execnz",
             10: "s_barrier", 11: "s_setkill", 12: "s_waitcnt", 13: "s_sethalt", 14: "s_sleep", 15: "s_setprio",
             16: "s_sendmsg", 17: "s_sendmsghalt", 18: "s_trap", 19: "s_icache_inv", 20: "s_incperflevel",
             21: "s_decperflevel", 22: "s_ttracedata", 23: "s_cbranch_cdbgsys", 24: "s_cbranch_cdbguser",
             25: "s_cbranch_cdbgsys_or_user", 26: "s_cbranch_cdbgsys_and_user", 27: "s_endpgm_saved",
             28: "s_set_gpr_idx_off", 29: "s_set_gpr_idx_mode", 30: "s_endpgm_ordered_ps_done"},
}
# VOP2 opcodes that always carry a 32-bit constant (fmamk/fmaak, madmk/madak)
_VOP2_K = {"gfx11": {0x2C, 0x2D, 0x37, 0x38}, "gfx12": {0x2C, 0x2D, 0x37, 0x38}, "gfx9": {0x17, 0x18, 0x24, 0x25}}
# instructions that produce no trace packet (skipped when walking the PC, §6.1)
SILENT = frozenset({"s_delay_alu", "s_wait_alu", "s_barrier_wait"})


@dataclass(frozen=True)
class Inst:
    offset: int        # byte offset in .text
    size: int          # bytes
    encoding: str      # SOPP, SOP1, VOP2, VOP3, SMEM, FLAT, ...
    op: int
    text: str          # mnemonic (SOPP) or "ENC op 0xNN"
    simm16: int        # SOPP immediate (sign-extended), else 0

    @property
    def is_branch(self) -> bool:
        return self.text == "s_branch" or self.text.startswith("s_cbranch_")

    @property
    def is_endpgm(self) -> bool:
        return self.text.startswith("s_endpgm")

    def target(self) -> int:
        """Byte offset a taken branch goes to."""
        return self.offset + self.size + 4 * self.simm16


def isa_family(target: str) -> str:
    """``gfx1100`` → ``gfx11``, ``gfx1201`` → ``gfx12``, ``gfx950`` / other gfx9 → ``gfx9``."""
    if target.startswith("gfx11"):
        return "gfx11"
    if target.startswith("gfx12"):
        return "gfx12"
    return "gfx9"


def _lit(*srcs: int) -> int:
    return 4 if 255 in srcs else 0


def _vop_extra(src0: int, fam: str) -> int:
    if src0 == 255:
        return 4
    if fam == "gfx9":
        return 4 if src0 in (249, 250) else 0   # SDWA, DPP
    return 4 if src0 in (233, 234, 250) else 0   # DPP8, DPP8 fi, DPP16


def _classify(w0: int, w1: int, fam: str) -> tuple[str, int, int]:
    """(encoding, opcode, size) from the first two dwords."""
    if w0 >> 23 == 0x17F:
        return "SOPP", (w0 >> 16) & 0x7F, 4
    if w0 >> 23 == 0x17D:
        return "SOP1", (w0 >> 8) & 0xFF, 4 + _lit(w0 & 0xFF)
    if w0 >> 23 == 0x17E:
        return "SOPC", (w0 >> 16) & 0x7F, 4 + _lit(w0 & 0xFF, (w0 >> 8) & 0xFF)
    if w0 >> 28 == 0xB:
        return "SOPK", (w0 >> 23) & 0x1F, 4
    if w0 >> 30 == 0b10:
        return "SOP2", (w0 >> 23) & 0x7F, 4 + _lit(w0 & 0xFF, (w0 >> 8) & 0xFF)
    if w0 >> 25 == 0x3F:
        return "VOP1", (w0 >> 9) & 0xFF, 4 + _vop_extra(w0 & 0x1FF, fam)
    if w0 >> 25 == 0x3E:
        return "VOPC", (w0 >> 17) & 0xFF, 4 + _vop_extra(w0 & 0x1FF, fam)
    if w0 >> 31 == 0:
        op = (w0 >> 25) & 0x3F
        return "VOP2", op, 4 + (4 if op in _VOP2_K[fam] else _vop_extra(w0 & 0x1FF, fam))
    top6, top8 = w0 >> 26, w0 >> 24
    srcs = (w1 & 0x1FF, (w1 >> 9) & 0x1FF, (w1 >> 18) & 0x1FF)
    if fam == "gfx9":
        table9 = {0b110000: ("SMEM", 8), 0b110100: ("VOP3", 8), 0b110110: ("DS", 8), 0b110111: ("FLAT", 8),
                  0b111000: ("MUBUF", 8), 0b111010: ("MTBUF", 8), 0b111100: ("MIMG", 8), 0b110001: ("EXP", 8)}
        enc, size = table9.get(top6, ("unknown", 4))
        if enc == "VOP3" and (w0 >> 23) & 0x7 == 0x7:
            enc = "VOP3P"
        if enc == "VOP3":
            size += 4 if srcs[0] in (249, 250) else 0
        return enc, (w0 >> 16) & 0x3FF if enc.startswith("VOP3") else (w0 >> 18) & 0xFF, size
    if top8 == 0xCC:
        return "VOP3P", (w0 >> 16) & 0x7F, 8 + _lit(*srcs)
    if top8 == 0xCD:
        return "VINTERP", (w0 >> 16) & 0x7F, 8
    if top8 == 0xCE:
        return "LDSDIR" if fam == "gfx11" else "VDSDIR", (w0 >> 20) & 0x3, 4
    if top6 == 0b110010:
        opx, opy = (w0 >> 22) & 0xF, (w0 >> 17) & 0x1F
        k = opx in (1, 2) or opy in (1, 2)
        return "VOPD", opx, 8 + (4 if k or 255 in (w0 & 0x1FF, w1 & 0x1FF) else 0)
    if top6 == 0b110101:
        return "VOP3", (w0 >> 16) & 0x3FF, 8 + (4 if srcs[0] in (233, 234, 250) else _lit(*srcs))
    if top6 == 0b111101:
        return "SMEM", (w0 >> 18) & 0xFF if fam == "gfx11" else (w0 >> 13) & 0x3F, 8
    if top6 == 0b110110:
        return "DS", (w0 >> 18) & 0xFF, 8
    if top6 == 0b111110:
        return "EXP", 0, 8
    if fam == "gfx11":
        table11 = {0b110111: "FLAT", 0b111000: "MUBUF", 0b111010: "MTBUF", 0b111100: "MIMG"}
        enc = table11.get(top6, "unknown")
        if enc == "MIMG":
            return enc, (w0 >> 18) & 0xFF, 8 + 4 * ((w0 >> 1) & 0x3)
        return enc, (w0 >> 18) & 0x7F, 8 if enc != "unknown" else 4
    table12 = {0xEC: "VFLAT", 0xED: "VSCRATCH", 0xEE: "VGLOBAL"}
    if top8 in table12:
        return table12[top8], (w0 >> 14) & 0x7F, 12
    t12 = {0b110001: "VBUFFER", 0b110100: "VIMAGE", 0b111001: "VSAMPLE"}
    if top6 in t12:
        return t12[top6], (w0 >> 14) & 0xFF, 12
    return "unknown", 0, 4


def decode_at(text: bytes, offset: int, fam: str) -> Inst:
    """The instruction at byte ``offset`` of ``text`` (offsets past the end decode as ``unknown``)."""
    if offset < 0 or offset + 4 > len(text):
        return Inst(offset, 4, "unknown", 0, "(outside .text)", 0)
    w0 = struct.unpack_from("<I", text, offset)[0]
    w1 = struct.unpack_from("<I", text, offset + 4)[0] if offset + 8 <= len(text) else 0
    enc, op, size = _classify(w0, w1, fam)
    simm = 0
    if enc == "SOPP":
        name = _SOPP[fam].get(op, f"SOPP op 0x{op:x}")
        simm = (w0 & 0xFFFF) - ((w0 & 0x8000) << 1)
    else:
        name = "unknown" if enc == "unknown" else f"{enc} op 0x{op:x}"
    return Inst(offset, size, enc, op, name, simm)


def decode_text(text: bytes, fam: str) -> list[Inst]:
    """Decode ``.text`` linearly from offset 0 (code objects hold no data in .text)."""
    out = []
    off = 0
    while off + 4 <= len(text):
        inst = decode_at(text, off, fam)
        out.append(inst)
        off += inst.size
    return out


# single-precision fused multiply-adds of gfx11/gfx12 by (encoding, opcode), checked by assembling each with
# llvm-mc-19 -mcpu=gfx1100 / gfx1200 -show-encoding: v_fmac_f32 (VOP2 43, its VOP3 form 256 + 43),
# v_fmamk_f32 (VOP2 44), v_fmaak_f32 (VOP2 45), v_fma_f32 (VOP3 531). v_pk_fma_f32 does not exist on either.
_F32_FMA = frozenset({("VOP2", 43), ("VOP2", 44), ("VOP2", 45), ("VOP3", 299), ("VOP3", 531)})
_VOPD_FMA = frozenset({0, 1, 2})  # VOPD OPX / OPY: v_dual_fmac_f32, v_dual_fmaak_f32, v_dual_fmamk_f32


def count_f32_fma(text: bytes, fam: str) -> int:
    """Single-precision FMAs in a gfx11/gfx12 ``.text``, each half of a dual-issue VOPD counted (the work a
    kernel does per work-item when it has no loops). ValueError for other families (opcodes differ)."""
    if fam not in ("gfx11", "gfx12"):
        raise ValueError(f"no fma opcode table for {fam}")
    count = 0
    for inst in decode_text(text, fam):
        if inst.encoding == "VOPD":
            w0 = struct.unpack_from("<I", text, inst.offset)[0]
            count += ((w0 >> 22) & 0xF in _VOPD_FMA) + ((w0 >> 17) & 0x1F in _VOPD_FMA)
        elif (inst.encoding, inst.op) in _F32_FMA:
            count += 1
    return count


def text_section(elf: bytes) -> tuple[int, bytes] | None:
    """(address, bytes) of an AMDGPU code object's ``.text``; None when it cannot be found.

    AMDGPU code objects are ELF64 little-endian; hand-assembled ones may leave ``EI_DATA`` and
    ``e_shentsize`` zero, so neither is taken from the header (the general reader in :mod:`elf` refuses those).
    """
    if len(elf) < 64 or elf[:4] != b"\x7fELF" or elf[4] != 2:
        return None
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    shentsize = shentsize or 64   # hand-written code objects may leave e_shentsize zero
    if shentsize < 64 or shnum == 0 or shnum > 4096 or shoff + shnum * shentsize > len(elf) or shstrndx >= shnum:
        return None

    def sh(i: int) -> tuple[int, int, int, int, int]:
        name, typ, _flags, addr, off, size = struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
        return name, typ, addr, off, size

    _, _, _, str_off, str_size = sh(shstrndx)
    for i in range(shnum):
        name, typ, addr, off, size = sh(i)
        end = elf.find(b"\0", str_off + name, str_off + str_size)
        if end < 0 or elf[str_off + name:end] != b".text":
            continue
        if typ == 8 or off + size > len(elf):
            return None
        return addr, bytes(elf[off:off + size])
    return None
