"""SH_MEM_BASES / SH_MEM_CONFIG banked per VMID on the emulated board's command processor (tinyhw/mocks/amd/cp.py).

Facts: the gc 11 register database (SH_MEM_BASES: PRIVATE_BASE 15:0, SHARED_BASE 31:16; GRBM_GFX_CNTL.VMID 7:4;
CP_HQD_VMID.VMID 3:0), amd-bringup.md §9c (the driver programs SH_MEM_CONFIG and SH_MEM_BASES for each of VMIDs
0..15, selecting it through GRBM_GFX_CNTL). A dispatch's shader sees the SH_MEM_BASES of its queue's VMID: the value
``s_getreg_b32 hwreg(HW_REG_SH_MEM_BASES)`` returns, the ``src_shared_base``/``src_private_base`` operands, and the
LDS aperture a FLAT access reaches.
"""

from __future__ import annotations

import struct

import pytest
from kernelshelp import am_boot
from rdna3asm import HAVE_LLVM_MC, asm_many

import tinyhw
from tinyhw.boot.amd import compute
from tinyhw.formats.amdgpu_code import KernelDescriptor
from tinyhw.regs import asic

A = asic("navi31")


def reg(name: str) -> int:
    return A.offset(f"gc.{name}")


def select_vmid(b5, vmid: int, queue_bits: int = 0) -> None:
    b5.write32(reg("GRBM_GFX_CNTL"), vmid << 4 | queue_bits)


def test_sh_mem_registers_are_banked_per_vmid_and_zero_at_power_on() -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        b5 = o.transport.bar(5)
        cp = o.transport.board.cp
        for vmid in range(16):
            select_vmid(b5, vmid)
            assert (b5.read32(reg("SH_MEM_BASES")), b5.read32(reg("SH_MEM_CONFIG"))) == (0, 0)
        for vmid in range(16):
            select_vmid(b5, vmid, queue_bits=(vmid & 3) | 1 << 2)   # the queue fields do not select the bank
            b5.write32(reg("SH_MEM_BASES"), 0x10000 * (vmid + 1) | (0x20 + vmid))
            b5.write32(reg("SH_MEM_CONFIG"), 0xC00 | vmid)
        for vmid in reversed(range(16)):
            select_vmid(b5, vmid)
            assert b5.read32(reg("SH_MEM_BASES")) == 0x10000 * (vmid + 1) | (0x20 + vmid), vmid
            assert b5.read32(reg("SH_MEM_CONFIG")) == 0xC00 | vmid, vmid
            assert cp.sh_mem_bases(vmid) == 0x10000 * (vmid + 1) | (0x20 + vmid)
        state = cp.to_state()
        cp.power_on()                                               # a mode-1 reset clears them
        select_vmid(b5, 7)
        assert b5.read32(reg("SH_MEM_BASES")) == 0 and cp.to_state() == {}
        cp.from_state(state)                                        # the board state file keeps them
        assert b5.read32(reg("SH_MEM_BASES")) == 0x80027


# s[0:1] the kernarg pointer, then the buffer's address: the SH_MEM_BASES the wave reads, the apertures' high
# dwords, and a dword stored through the LDS aperture (FLAT at {shared base, 0x10}) read back with ds_load
KERNEL = [
    "s_load_b64 s[0:1], s[0:1], 0x0",
    "s_waitcnt lgkmcnt(0)",
    "s_getreg_b32 s4, hwreg(HW_REG_SH_MEM_BASES)",
    "s_mov_b64 s[6:7], src_shared_base",
    "s_mov_b64 s[8:9], src_private_base",
    "v_mov_b32_e32 v0, 0",
    "v_mov_b32_e32 v1, s4",
    "v_mov_b32_e32 v2, s7",
    "v_mov_b32_e32 v3, s9",
    "v_mov_b32_e32 v5, 0x10",
    "v_mov_b32_e32 v6, s7",
    "v_mov_b32_e32 v7, 0xabcd1234",
    "flat_store_b32 v[5:6], v7",
    "s_waitcnt vmcnt(0) lgkmcnt(0)",
    "ds_load_b32 v4, v5",
    "s_waitcnt lgkmcnt(0)",
    "global_store_b128 v0, v[1:4], s[0:1]",
    "s_endpgm",
]


def _kernel() -> compute.Kernel:
    words = [w for ws in asm_many(KERNEL) for w in ws]
    code = struct.pack(f"<{len(words)}I", *words)
    # 16 VGPRs, 2 user SGPRs (the kernarg pointer), workgroup id X, 512 bytes of LDS (RSRC2.LDS_SIZE 1), wave32
    return compute.Kernel("apertures", KernelDescriptor(512, 0, 8, 0, 0x40AF0081, 2 << 1 | 1 << 7 | 1 << 15, 0,
                                                        0x400 | 0x8), code, 0)


def _run(program: dict[int, int], queue_vmid: int) -> tuple[int, ...]:
    """Write SH_MEM_BASES per VMID (``program``), give the queue ``queue_vmid``, run the kernel: its four dwords."""
    with tinyhw.open("mock:navi31,strict") as o:
        b5 = o.transport.bar(5)
        eng = compute.open_compute(o.transport, timeout=2.0)
        try:
            for vmid, value in program.items():
                select_vmid(b5, vmid)
                b5.write32(reg("SH_MEM_BASES"), value)
            eng.select()
            o.transport.bar(5).write32(reg("CP_HQD_VMID"), queue_vmid)
            eng.select(False)
            out = eng.run(_kernel(), (1,), (32,), [bytes(16)]).outputs[0]
        finally:
            eng.close()
        return struct.unpack("<4I", out)


@pytest.mark.skipif(not HAVE_LLVM_MC, reason="llvm-mc-19 is not installed")
def test_a_dispatch_sees_the_sh_mem_bases_of_its_queues_vmid() -> None:
    am_boot()
    # the queue's VMID 5: shared base 0x1234, private base 0x5678 (VMID 0 and 6 hold other values)
    assert _run({0: 0x0001_0002, 5: 0x1234_5678, 6: 0x0003_0004}, 5) == (0x1234_5678, 0x1234 << 16, 0x5678 << 16,
                                                                         0xABCD1234)
    # what tinygrad programs for every VMID: today's default, on VMID 0 as tinyhw's queue uses
    assert _run({v: 0x0001_0002 for v in range(16)}, 0) == (0x0001_0002, 1 << 16, 2 << 16, 0xABCD1234)


@pytest.mark.skipif(not HAVE_LLVM_MC, reason="llvm-mc-19 is not installed")
def test_tinyhws_own_driver_gives_its_queue_the_lds_and_private_apertures() -> None:
    """``open_compute`` programs VMID 0's SH_MEM_CONFIG (Linux's DEFAULT_SH_MEM_CONFIG 0xc00c) and SH_MEM_BASES
    (shared base 0x1, private base 0x2, amd-bringup.md §4.2 step 9c) itself, so its kernels reach LDS through FLAT."""
    am_boot()
    assert _run({}, 0) == (0x0001_0002, 1 << 16, 2 << 16, 0xABCD1234)
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=2.0)
        try:
            assert o.transport.board.cp.sh_mem_bases(0) == 0x0001_0002
            b5 = o.transport.bar(5)
            select_vmid(b5, 0)
            assert b5.read32(reg("SH_MEM_CONFIG")) == 0xC00C
        finally:
            eng.close()
