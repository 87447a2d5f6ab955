"""SDMA 6 packets the copy paths submit, built from the generated layout of ``sdma_v6_0_0_pkt_open.h``.

Spec: specs/asm24-usb-bridge.md §9.3 (POLL memory "equal", mask all ones, interval 4, retry 0xFFF; COPY; 64-bit
WRITE; 6 + 7 + 6 dwords per chunk), §9.1 (zero dwords are no-ops filling the ring tail). Field offsets, masks
and shifts come from :mod:`tinyhw.autogen.sdma_v6_0_0_pkt_open` (never typed by hand).
"""

from __future__ import annotations

from tinyhw.autogen.sdma_v6_0_0_pkt_open import CONSTANTS as SDMA_PKT

POLL_EQUAL = 3
COPY_MAX = SDMA_PKT["SDMA_PKT_COPY_LINEAR_COUNT_count_mask"] + 1  # bytes per COPY_LINEAR packet


def _put(pkt: list[int], name: str, value: int) -> None:
    key = f"SDMA_PKT_{name}"
    i = SDMA_PKT[key + "_offset"]
    pkt[i] |= (value & SDMA_PKT[key + "_mask"]) << SDMA_PKT[key + "_shift"]


def _header(pkt: list[int], kind: str, op: str, sub: str | None = None) -> None:
    _put(pkt, f"{kind}_HEADER_op", SDMA_PKT[f"SDMA_OP_{op}"])
    if sub is not None:
        _put(pkt, f"{kind}_HEADER_sub_op", SDMA_PKT[f"SDMA_SUBOP_{sub}"])


def copy_linear(src: int, dst: int, size: int) -> list[int]:
    """COPY_LINEAR packets moving ``size`` bytes (split at the packet's count limit)."""
    out: list[int] = []
    done = 0
    while done < size:
        n = min(COPY_MAX, size - done)
        pkt = [0] * 7
        _header(pkt, "COPY_LINEAR", "COPY", "COPY_LINEAR")
        _put(pkt, "COPY_LINEAR_COUNT_count", n - 1)
        s, d = src + done, dst + done
        _put(pkt, "COPY_LINEAR_SRC_ADDR_LO_src_addr_31_0", s & 0xFFFFFFFF)
        _put(pkt, "COPY_LINEAR_SRC_ADDR_HI_src_addr_63_32", s >> 32)
        _put(pkt, "COPY_LINEAR_DST_ADDR_LO_dst_addr_31_0", d & 0xFFFFFFFF)
        _put(pkt, "COPY_LINEAR_DST_ADDR_HI_dst_addr_63_32", d >> 32)
        out += pkt
        done += n
    return out


def write_linear(dst: int, dwords: list[int]) -> list[int]:
    """WRITE_UNTILED of ``dwords`` at ``dst`` (a 64-bit value is two dwords: 6 dwords in all)."""
    pkt = [0] * 4
    _header(pkt, "WRITE_UNTILED", "WRITE", "WRITE_LINEAR")
    _put(pkt, "WRITE_UNTILED_DST_ADDR_LO_dst_addr_31_0", dst & 0xFFFFFFFF)
    _put(pkt, "WRITE_UNTILED_DST_ADDR_HI_dst_addr_63_32", dst >> 32)
    _put(pkt, "WRITE_UNTILED_DW_3_count", len(dwords) - 1)
    return pkt + [d & 0xFFFFFFFF for d in dwords]


def write64(dst: int, value: int) -> list[int]:
    """WRITE_UNTILED of one 64-bit ``value`` at ``dst`` (low dword first)."""
    return write_linear(dst, [value & 0xFFFFFFFF, value >> 32])


def poll_mem_equal(addr: int, value: int, mask: int = 0xFFFFFFFF, interval: int = 4, retry: int = 0xFFF) -> list[int]:
    """POLL_REGMEM on memory until (mem & mask) == value."""
    pkt = [0] * 6
    _header(pkt, "POLL_REGMEM", "POLL_REGMEM")
    _put(pkt, "POLL_REGMEM_HEADER_mem_poll", 1)
    _put(pkt, "POLL_REGMEM_HEADER_func", POLL_EQUAL)
    _put(pkt, "POLL_REGMEM_ADDR_LO_addr_31_0", addr & 0xFFFFFFFF)
    _put(pkt, "POLL_REGMEM_ADDR_HI_addr_63_32", addr >> 32)
    _put(pkt, "POLL_REGMEM_VALUE_value", value)
    _put(pkt, "POLL_REGMEM_MASK_mask", mask)
    _put(pkt, "POLL_REGMEM_DW5_interval", interval)
    _put(pkt, "POLL_REGMEM_DW5_retry_count", retry)
    return pkt


def fence(addr: int, value: int) -> list[int]:
    """FENCE: write the 32-bit ``value`` at ``addr`` once the packets before it completed."""
    pkt = [0] * 4
    _header(pkt, "FENCE", "FENCE")
    _put(pkt, "FENCE_ADDR_LO_addr_31_0", addr & 0xFFFFFFFF)
    _put(pkt, "FENCE_ADDR_HI_addr_63_32", addr >> 32)
    _put(pkt, "FENCE_DATA_data", value)
    return pkt


def timestamp(addr: int) -> list[int]:
    """TIMESTAMP_GET_GLOBAL: write the GPU's 64-bit global timestamp at ``addr`` (8-byte aligned)."""
    pkt = [0] * 3
    _header(pkt, "TIMESTAMP_GET_GLOBAL", "TIMESTAMP", "TIMESTAMP_GET_GLOBAL")
    _put(pkt, "TIMESTAMP_GET_GLOBAL_WRITE_ADDR_LO_write_addr_31_3", (addr & 0xFFFFFFFF) >> 3)
    _put(pkt, "TIMESTAMP_GET_GLOBAL_WRITE_ADDR_HI_write_addr_63_32", addr >> 32)
    return pkt


def trap(context: int = 0) -> list[int]:
    """TRAP: raise the engine's trap interrupt with ``context`` as its context id."""
    pkt = [0] * 2
    _header(pkt, "TRAP", "TRAP")
    _put(pkt, "TRAP_INT_CONTEXT_int_context", context)
    return pkt


def nop_fill(dwords: int) -> list[int]:
    """``dwords`` zero dwords: each is a one-dword NOP (§9.1 tail fill)."""
    return [0] * dwords


def indirect(addr: int, dwords: int, vmid: int = 0) -> list[int]:
    """INDIRECT: run the ``dwords`` dwords of SDMA packets at GPU address ``addr`` (in ``vmid``), then go on; 6
    dwords (no context save area)."""
    pkt = [0] * 6
    _header(pkt, "INDIRECT", "INDIRECT")
    _put(pkt, "INDIRECT_HEADER_vmid", vmid)
    _put(pkt, "INDIRECT_BASE_LO_ib_base_31_0", addr & 0xFFFFFFFF)
    _put(pkt, "INDIRECT_BASE_HI_ib_base_63_32", addr >> 32)
    _put(pkt, "INDIRECT_IB_SIZE_ib_size", dwords)
    return pkt
