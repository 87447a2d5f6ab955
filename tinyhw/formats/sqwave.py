"""The SQ indirect wave registers of RDNA3 (gfx11): indices, the STATUS bits, HW_ID1, SQ_CMD halt words.

Facts shared by the driver side (:mod:`tinyhw.boot.amd.waves`) and the emulated shader core
(:mod:`tinyhw.mocks.amd.sqind`), like the generated register database: vendor facts, no behaviour.

Spec: specs/amd-compute.md §8 ("Wave state via SQ_IND_INDEX / SQ_IND_DATA"): SQ_IND_INDEX =
WAVE_ID[4:0] | WORKITEM_ID[10:5] | AUTO_INCR[11] | INDEX[31:16] (the fields are also in the register
database), the ``ixSQ_WAVE_*`` indices, SGPRs at INDEX 0x200 + n and VGPRs at 0x400 + n (WORKITEM_ID =
the lane), the SQ_WAVE_STATUS bits. The generated database leaves the ``ix`` defines out, so they are
written here once, from the spec.

Inferred (not in the specs; marked so everywhere they are used):

* HW_ID1 layout WAVE_ID 4:0, SIMD_ID 9:8, WGP_ID 13:10, SA_ID 16, SE_ID 20:18 (the RDNA3 ISA's
  ``HW_REG_HW_ID1`` table).
* GRBM_GFX_INDEX.INSTANCE_INDEX selects a SIMD as (WGP << 2) | SIMD on gfx11 (the spec says only that
  the SIMD id is part of the INSTANCE field).
* SQ_CMD halt / resume: CMD 1 (SETHALT) with DATA bit 0 = 1 to halt, 0 to resume, MODE 1 (broadcast to
  every wave); CMD and MODE are fields of the database's SQ_CMD.
"""

from __future__ import annotations

from dataclasses import dataclass

#: ixSQ_WAVE_* indices (INDEX field of SQ_IND_INDEX), in the order a wave view shows them (§8)
INDEX = {"MODE": 0x101, "STATUS": 0x102, "TRAPSTS": 0x103, "GPR_ALLOC": 0x105, "LDS_ALLOC": 0x106,
         "IB_STS": 0x107, "PC_LO": 0x108, "PC_HI": 0x109, "IB_DBG1": 0x10D, "HW_ID1": 0x117, "HW_ID2": 0x118,
         "IB_STS2": 0x11C, "M0": 0x27D, "EXEC_LO": 0x27E, "EXEC_HI": 0x27F}
SGPR_OFFSET, VGPR_OFFSET = 0x200, 0x400  # SQIND_WAVE_SGPRS_OFFSET / SQIND_WAVE_VGPRS_OFFSET (§8)
SGPRS = 106  # wave32 SGPRs s0..s105 readable through the SGPR window (inferred: gfx11's SGPR file per wave)

#: SQ_WAVE_STATUS bits (§8)
STATUS_BITS = {"SCC": 0, "PRIV": 5, "TRAP_EN": 6, "EXECZ": 9, "VCCZ": 10, "IN_BARRIER": 12, "HALT": 13,
               "TRAP": 14, "VALID": 16, "IDLE": 28, "SCRATCH_EN": 29}
VALID = 1 << STATUS_BITS["VALID"]
HALT = 1 << STATUS_BITS["HALT"]

#: HW_ID1 fields: name -> (shift, width) (inferred, see the module docstring)
HW_ID1 = {"WAVE_ID": (0, 5), "SIMD_ID": (8, 2), "WGP_ID": (10, 4), "SA_ID": (16, 1), "SE_ID": (18, 3)}

#: SQ_CMD (inferred, see the module docstring)
CMD_SETHALT, MODE_BROADCAST = 1, 1


def status_flags(status: int) -> list[str]:
    """The names of the SQ_WAVE_STATUS bits set in ``status``."""
    return [n for n, b in STATUS_BITS.items() if status >> b & 1]


def hw_id1(value: int) -> dict[str, int]:
    """HW_ID1 split into its fields."""
    return {n: value >> s & ((1 << w) - 1) for n, (s, w) in HW_ID1.items()}


def make_hw_id1(se: int, sa: int, wgp: int, simd: int, wave: int) -> int:
    """The HW_ID1 word of a wave slot."""
    out = 0
    for name, v in (("SE_ID", se), ("SA_ID", sa), ("WGP_ID", wgp), ("SIMD_ID", simd), ("WAVE_ID", wave)):
        s, w = HW_ID1[name]
        out |= (v & ((1 << w) - 1)) << s
    return out


def instance(wgp: int, simd: int) -> int:
    """GRBM_GFX_INDEX.INSTANCE_INDEX of a SIMD (inferred, see the module docstring)."""
    return wgp << 2 | simd


@dataclass(frozen=True)
class Slot:
    """Where a wave sits: shader engine, shader array, WGP, SIMD, wave slot."""

    se: int
    sa: int
    wgp: int
    simd: int
    wave: int

    def to_doc(self) -> dict[str, int]:
        """The slot as JSON keys."""
        return {"se": self.se, "sa": self.sa, "wgp": self.wgp, "simd": self.simd, "wave": self.wave}
