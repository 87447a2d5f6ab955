"""PM4 type-3 packets the compute engine submits (specs/amd-compute.md §2), opcodes from the generated ``nvd.h``.

Opcodes, the SET_SH_REG window and the RELEASE_MEM cache flags come from :mod:`tinyhw.autogen.nvd` (the Linux
header through ``tinyhw.autogen.genproto``, never typed by hand). The few field positions ``nvd.h`` writes only as
function-like macros (which the generator does not evaluate) are taken from the spec's section named beside each:
the header layout (§2.1), RELEASE_MEM's EVENT_TYPE/EVENT_INDEX/CACHE_POLICY/DATA_SEL/INT_SEL (§2.7), the
ACQUIRE_MEM GCR_CNTL bits (§2.6) and CACHE_FLUSH_AND_INV_TS_EVENT = 0x14 (soc21_enum.h, quoted in §2.7).
"""

from __future__ import annotations

from tinyhw.autogen.nvd import CONSTANTS as NVD

NOP = NVD["PACKET3_NOP"]
SET_SH_REG = NVD["PACKET3_SET_SH_REG"]
SH_START, SH_END = NVD["PACKET3_SET_SH_REG_START"], NVD["PACKET3_SET_SH_REG_END"]
DISPATCH_DIRECT = NVD["PACKET3_DISPATCH_DIRECT"]
ACQUIRE_MEM = NVD["PACKET3_ACQUIRE_MEM"]
RELEASE_MEM = NVD["PACKET3_RELEASE_MEM"]
EVENT_WRITE = NVD["PACKET3_EVENT_WRITE"]
FILLER = 0xFFFF1000  # PACKET3(NOP, 0x3FFF): one dword (§2.3)

#: ACQUIRE_MEM GCR_CNTL: GL2_INV | GL2_WB | GLM_INV | GLM_WB | GL1_INV | GLV_INV | GLK_INV | GLI_INV(1) (§2.6)
GCR_FULL = 0xC3A1
CACHE_FLUSH_AND_INV_TS_EVENT = 0x14  # §2.7
#: CS_W32_EN (wave32), FORCE_START_AT_000, COMPUTE_SHADER_EN (§2.5)
INITIATOR_W32 = 1 << 15 | 1 << 2 | 1 << 0
INITIATOR_W64 = 1 << 2 | 1 << 0


def header(op: int, payload: int) -> int:
    """Type-3 header (§2.1): type 3 in 31:30, COUNT = payload dwords - 1 in 29:16, opcode in 15:8."""
    if not 1 <= payload <= 0x3FFF:
        raise ValueError(f"a pm4 packet carries 1..16383 payload dwords, not {payload}")
    return (NVD["PACKET_TYPE3"] << 30) | ((payload - 1) << 16) | (op << 8)


def set_sh_reg(byte_offset: int, values: list[int]) -> list[int]:
    """SET_SH_REG of consecutive registers from ``byte_offset`` (an absolute register byte offset, §2.4)."""
    dword = byte_offset // 4
    if not (dword >= SH_START and dword + len(values) <= SH_END):
        raise ValueError(f"register dword 0x{dword:x} is outside the SET_SH_REG window")
    return [header(SET_SH_REG, 1 + len(values)), dword - SH_START, *(v & 0xFFFFFFFF for v in values)]


def acquire_mem() -> list[int]:
    """Full invalidate before the dispatch (§2.6): all of memory, poll interval 10, GCR_CNTL = GCR_FULL."""
    return [header(ACQUIRE_MEM, 7), 0, 0xFFFFFFFF, 0xFFFFFF, 0, 0, 0x0A, GCR_FULL]


def dispatch_direct(grid: tuple[int, int, int], initiator: int) -> list[int]:
    """DISPATCH_DIRECT: run a ``grid`` of workgroups (x, y, z) with the ``initiator`` word (COMPUTE_DISPATCH_INITIATOR).
    """
    return [header(DISPATCH_DIRECT, 4), *grid, initiator]


def release_mem(addr: int, value: int, *, data_sel: int = 1, int_sel: int = 0) -> list[int]:
    """End-of-pipe fence (§2.7): write ``value`` (DATA_SEL 1: 32 bits, 2: 64 bits) at ``addr`` after earlier work."""
    dw1 = (NVD["PACKET3_RELEASE_MEM_GCR_SEQ"] | NVD["PACKET3_RELEASE_MEM_GCR_GL2_WB"]
           | NVD["PACKET3_RELEASE_MEM_GCR_GLM_INV"] | NVD["PACKET3_RELEASE_MEM_GCR_GLM_WB"]
           | 3 << 25 | 5 << 8 | CACHE_FLUSH_AND_INV_TS_EVENT)
    dw2 = data_sel << 29 | int_sel << 24
    return [header(RELEASE_MEM, 7), dw1, dw2, addr & 0xFFFFFFFF, addr >> 32, value & 0xFFFFFFFF,
            (value >> 32) & 0xFFFFFFFF, 0]


def event_write(event_type: int, *, index: int = 0) -> list[int]:
    """EVENT_WRITE of ``event_type`` (EVENT_TYPE 5:0, EVENT_INDEX 11:8; specs/sqtt-pmc.md §2.2-§2.3 name the
    events and indices)."""
    return [header(EVENT_WRITE, 1), (event_type & 0x3F) | (index & 0xF) << 8]


def nop(n: int) -> list[int]:
    """``n`` dwords of padding (§2.3)."""
    return [FILLER] * n
