"""SQ thread trace packet tables for RDNA3 (layout 3), RDNA4 (layout 4) and CDNA (gfx9).

Facts from specs/sqtt-pmc.md §5.3 (RDNA3), §5.4 (RDNA4 differences), §5.5-5.6 (enums) and §5.7
(CDNA). A packet type has an encoding (``enc_bits`` low bits equal ``enc_value``), a length in bits
(a multiple of 4: packets are whole nibbles) and fields as (hi, lo) bit ranges, bit 0 being the
lowest bit of the packet's first nibble. Names follow the ones tinygrad's decoder prints so that
totals can be compared with reference-decode.json.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CDNA", "INST_OPS", "LAYOUTS", "RDNA3", "RDNA4", "PacketType", "Table", "classify_table"]


@dataclass(frozen=True)
class PacketType:
    """One SQTT packet type: name, rocprof's type number, its encoding bits and fields."""
    name: str
    id: int                      # rocprof's type number (CDNA: the 4-bit format, LAYOUT_HEADER 16)
    enc_bits: int
    enc_value: int
    bits: int
    fields: tuple[tuple[str, int, int], ...]   # (name, hi, lo)

    @property
    def nibbles(self) -> int:
        """The packet's length in 4-bit nibbles."""
        return self.bits // 4

    def field(self, name: str) -> tuple[int, int] | None:
        """The (high, low) bit positions of field ``name``, or None."""
        for n, hi, lo in self.fields:
            if n == name:
                return hi, lo
        return None


def _t(name: str, tid: int, enc: str, bits: int, **fields: tuple[int, int] | int) -> PacketType:
    fl = tuple((k, v, v) if isinstance(v, int) else (k, v[0], v[1]) for k, v in fields.items())
    return PacketType(name, tid, len(enc), int(enc, 2), bits, fl)


LAYOUT_HEADER = _t("LAYOUT_HEADER", 23, "0010001", 64, layout=(12, 7), simd=(14, 13), group=(17, 15),
                   sel_a=(31, 28), sel_b=(36, 33), flag4=59)

_RDNA3 = [
    _t("VALUINST", 1, "011", 12, delta=(5, 3), flag=6, wave=(11, 7)),
    _t("VMEMEXEC", 2, "1111", 8, delta=(5, 4), src=(7, 6)),
    _t("ALUEXEC", 3, "1110", 8, delta=(5, 4), src=(7, 6)),
    _t("IMMEDIATE", 4, "1101", 12, delta=(6, 4), wave=(11, 7)),
    _t("IMMEDIATE_MASK", 5, "00100", 24, delta=(7, 5), mask=(23, 8)),
    _t("WAVERDY", 6, "10100", 24, delta=(7, 5), mask=(23, 8)),
    _t("TS_DELTA_S8_W3", 7, "0100001", 72, delta=(10, 8)),
    _t("WAVEEND", 8, "10101", 20, delta=(7, 5), sa=8, simd=(10, 9), wgp=(13, 11), wave=(19, 15)),
    _t("WAVESTART", 9, "01100", 32, delta=(6, 5), sa=7, simd=(9, 8), wgp=(12, 10), wave=(17, 13), id7=(31, 18)),
    _t("TS_DELTA_S5_W2", 10, "11100", 48, delta=(6, 5)),
    _t("WAVEALLOC", 11, "00101", 20, delta=(7, 5)),
    _t("TS_DELTA_S5_W3", 12, "00110", 52, delta=(7, 5)),
    _t("PERF", 13, "10110", 28, delta=(7, 5), arg=(27, 8)),
    _t("UTILCTR", 14, "0110001", 48, delta=(8, 7), ctr=(47, 9)),
    _t("TS_DELTA_SHORT", 15, "1000", 8, delta=(7, 4)),
    _t("NOP", 16, "0000", 4),
    _t("TS_WAVE_STATE", 17, "1010001", 24, delta=(15, 7), coarse=(23, 16)),
    _t("EVENT", 18, "01100001", 24, delta=(10, 8), event=(23, 11)),
    _t("EVENT_BIG", 19, "11100001", 32, delta=(10, 8), event=(31, 11)),
    _t("REG", 20, "1001", 64, delta=(6, 4), slot=(9, 7), hi_byte=(15, 8), subop=(31, 16), val32=(63, 32)),
    _t("SNAPSHOT", 21, "1110001", 64, delta=(9, 7), snap=(63, 10)),
    _t("TS_DELTA_OR_MARK", 22, "0000001", 48, pl=8, rt=9, delta=(47, 12)),
    LAYOUT_HEADER,
    _t("INST", 24, "010", 20, flag1=3, delta=(6, 4), flag2=7, wave=(12, 8), op=(19, 13)),
]

_RDNA4_CHANGES = [
    _t("WAVEEND_RDNA4", 8, "10101", 20, delta=(7, 5), sa=8, simd=(10, 9), wgp=(14, 11), wave=(19, 15)),
    _t("WAVESTART_RDNA4", 9, "01100", 32, delta=(6, 5), sa=7, simd=(9, 8), wgp=(13, 10), wave=(19, 15),
       id7=(31, 20)),
    _t("TS_DELTA_S5_W2_RDNA4", 10, "11100", 40, delta=(6, 5)),
    _t("WAVEALLOC_RDNA4", 11, "00101", 24, delta=(7, 5)),
    _t("TS_DELTA_S5_W3_RDNA4", 12, "00110", 56, delta=(9, 7)),
    _t("PERF_RDNA4", 13, "10110", 32, delta=(9, 7), arg=(31, 10)),
    _t("TS_DELTA_OR_MARK_RDNA4", 22, "0000001", 64, rt=7, pl=8, tl=9, delta=(63, 12)),
    _t("INST_RDNA4", 24, "010", 20, delta=(5, 3), w64h=6, wave=(11, 7), op=(19, 12)),
]

_WAVE: dict[str, tuple[int, int] | int] = {"sh": 5, "cu": (9, 6), "wave": (13, 10), "simd": (15, 14)}
# Every CDNA token but MISC carries a one-bit time delta at bit 4 (one 4-cycle tick), MISC an 8-bit one at 11:4:
# so AMD's own decoder reads them (ROCm/rocm-systems, projects/rocprof-trace-decoder/source/gfx9/gfx9token.h, the
# token's delta). The spec's §5.7 table, taken from tinygrad's decoder, leaves bit 4 out. On TIMESTAMP it lies
# inside ``reserved``.
_TICK: dict[str, tuple[int, int] | int] = {"delta": 4}
_CDNA = [
    _t("CDNA_MISC", 0, "0000", 16, delta=(11, 4), sh=12, misc_type=(15, 13)),
    _t("CDNA_TIMESTAMP", 1, "0001", 64, **_TICK, reserved=(15, 4), timestamp=(63, 16)),
    _t("CDNA_REG", 2, "0010", 64, **_TICK, pipe=(6, 5), me=(8, 7), regaddr=(31, 16), regdata=(63, 32)),
    _t("CDNA_WAVESTART", 3, "0011", 32, **_TICK, **_WAVE, pipe=(17, 16), me=(19, 18), count=(28, 22)),
    _t("CDNA_WAVEALLOC", 4, "0100", 16, **_TICK, **_WAVE),
    _t("CDNA_REG_CS", 5, "0101", 48, **_TICK, pipe=(6, 5), me=(8, 7), regaddr=(15, 9), regdata=(47, 16)),
    _t("CDNA_WAVEEND", 6, "0110", 16, **_TICK, **_WAVE),
    _t("CDNA_EVENT", 7, "0111", 16, **_TICK),
    _t("CDNA_EVENT_CS", 8, "1000", 16, **_TICK),
    _t("CDNA_EVENT_GFX1", 9, "1001", 16, **_TICK),
    _t("CDNA_INST", 10, "1010", 16, **_TICK, wave=(8, 5), simd=(10, 9), op=(15, 11)),
    _t("CDNA_INST_PC", 11, "1011", 64, **_TICK, wave=(8, 5), simd=(10, 9), err=15, pc=(63, 16)),
    _t("CDNA_USERDATA", 12, "1100", 48, **_TICK, **_WAVE, data=(47, 16)),
    _t("CDNA_ISSUE", 13, "1101", 32, **_TICK, simd=(6, 5), issue=(27, 8)),
    _t("CDNA_PERF", 14, "1110", 64, **_TICK, sh=5, cu=(9, 6), cntr_bank=(11, 10), cntr0=(24, 12), cntr1=(37, 25),
       cntr2=(50, 38), cntr3=(63, 51)),
    _t("CDNA_REG_CS_PRIV", 15, "1111", 48, **_TICK, pipe=(6, 5), me=(8, 7), regaddr=(15, 9), regdata=(47, 16)),
    PacketType("LAYOUT_HEADER", 16, 7, 0b0010001, 64, LAYOUT_HEADER.fields),
]


@dataclass(frozen=True)
class Table:
    """One decoding table: its packet types and the 256-entry low-byte → type index map."""

    name: str
    types: tuple[PacketType, ...]
    by_byte: tuple[int, ...]     # index into ``types`` for every low-byte value
    nop: int | None              # index of NOP (RDNA), None on CDNA

    def index(self, name: str) -> int:
        """The index of the packet type called ``name`` (KeyError when absent)."""
        for i, t in enumerate(self.types):
            if t.name == name:
                return i
        raise KeyError(name)


def classify_table(name: str, types: list[PacketType]) -> Table:
    """Build the low-byte map: the matching encoding with the most mask bits wins; NOP is the fallback."""
    names = [t.name for t in types]
    nop = names.index("NOP") if "NOP" in names else None
    by_byte = []
    for b in range(256):
        best, best_bits = nop, -1
        for i, t in enumerate(types):
            if t.enc_bits > best_bits and b & ((1 << t.enc_bits) - 1) == t.enc_value:
                best, best_bits = i, t.enc_bits
        assert best is not None, f"{name}: byte 0x{b:02x} matches no packet type"
        by_byte.append(best)
    return Table(name, tuple(types), tuple(by_byte), nop)


def _rdna4() -> list[PacketType]:
    changed = {t.id: t for t in _RDNA4_CHANGES}
    return [changed.get(t.id, t) for t in _RDNA3]


RDNA3 = classify_table("rdna3", _RDNA3)
RDNA4 = classify_table("rdna4", _rdna4())
CDNA = classify_table("cdna", _CDNA)
LAYOUTS = {3: RDNA3, 4: RDNA4}   # any other layout value selects CDNA (§5.1)

MEM_SRC = {0: "LDS", 1: "LDS_ALT", 2: "VMEM", 3: "VMEM_ALT"}
ALU_SRC = {0: "NONE", 1: "SALU", 2: "VALU", 3: "VALU_SALU"}

_OPS3 = {0x00: "SALU", 0x01: "SMEM_RD", 0x03: "JUMP", 0x04: "JUMP_NO", 0x05: "CALL", 0x09: "MESSAGE",
         0x0B: "VALUT_4", 0x0D: "VALUB_2", 0x0E: "VALUB_4", 0x0F: "VALUB_16", 0x12: "VINTERP", 0x13: "BARRIER",
         0x1C: "FLAT_RD_2", 0x21: "SGMEM_RD_1", 0x22: "SGMEM_RD_2", 0x29: "LDS_RD", 0x72: "SALU_WR_EXEC",
         0x73: "VALU1_WR_EXEC"}
_OPS3.update({0x1D + i: f"FLAT_WR_{3 + i}" for i in range(4)})
_OPS3.update({0x24 + i: f"SGMEM_WR_{2 + i}" for i in range(5)})
_OPS3.update({0x2A + i: f"LDS_WR_{1 + i}" for i in range(5)})
_OPS3.update({0x50 + i: f"OTHER_LDS_{1 + i}" for i in range(5)})
_OPS3.update({0x55 + i: f"OTHER_FLAT_{2 + i}" for i in range(5)})
_OPS3.update({0x5A + i: f"OTHER_VMEM_{1 + i}" for i in range(13)})

_OPS4 = {0x00: "SALU", 0x01: "SMEM", 0x02: "SMEM_WR", 0x03: "JUMP", 0x04: "JUMP_NO", 0x05: "CALL",
         0x07: "SALU_NO_EXEC", 0x09: "MESSAGE", 0x0A: "VALU_1", 0x0B: "VALUT_4", 0x0C: "VALUB_1", 0x0D: "VALUB_2",
         0x0E: "VALUB_4", 0x0F: "VALUB_16", 0x12: "VINTERP", 0x13: "BARRIER_WAIT", 0x1C: "FLAT_RD_2",
         0x21: "VMEM_RD_1", 0x22: "VMEM_RD_2", 0x29: "LDS_RD", 0x2F: "BUF_RD_1", 0x30: "BUF_RD_2",
         0x6E: "LDS_DIR_LOAD", 0x6F: "LDS_PARAM_LOAD", 0x72: "SALU_WR_EXEC", 0x73: "VALU1_WR_EXEC",
         0x74: "VALU_WR_EXEC_2", 0x77: "OTHER_LDS_6", 0x78: "OTHER_LDS_10", 0x7A: "BARRIER_SIGNAL", 0x87: "DYN_VGPR",
         0x8A: "BARRIER_JOIN", 0x8C: "WMMA_8", 0x8D: "WMMA_16", 0x8E: "WMMA_32", 0x8F: "WMMA_64", 0x92: "VALU_DPFP",
         0x98: "SALU_FLOAT_3", 0x99: "VALU_SCL_TRANS", 0x9B: "SALU_2", 0x9C: "SALU_5"}
_OPS4.update({0x1D + i: f"FLAT_WR_{3 + i}" for i in range(4)})
_OPS4.update({0x23 + i: f"VMEM_WR_{1 + i}" for i in range(6)})
_OPS4.update({0x2A + i: f"LDS_WR_{1 + i}" for i in range(5)})
_OPS4.update({0x31 + i: f"BUF_WR_{1 + i}" for i in range(6)})
_OPS4.update({0x50 + i: f"OTHER_LDS_{1 + i}" for i in range(5)})
_OPS4.update({0x55 + i: f"OTHER_FLAT_{2 + i}" for i in range(5)})
_OPS4.update({0xBC + i: f"OTHER_VMEM_{1 + i}" for i in range(34)})

_OPS_CDNA = {0: "SMEM_RD", 1: "SALU_32", 2: "VMEM_RD", 3: "VMEM_WR", 4: "FLAT_WR", 5: "VALU_32", 6: "LDS", 7: "PC",
             12: "JUMP", 13: "NEXT", 14: "FLAT_RD", 15: "OTHER_MSG", 16: "SMEM_WR", 17: "SALU_64", 18: "VALU_64",
             28: "VALU_MAI"}

INST_OPS = {"rdna3": _OPS3, "rdna4": _OPS4, "cdna": _OPS_CDNA}
