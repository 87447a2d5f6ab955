"""The emulated command processor's register interface (tinyhw/mocks/amd/cp.py), written from specs/amd-compute.md
§1.2 (GRBM_GFX_CNTL banks), §1.4 (MQD header read on activation), §1.3/§1.7 (doorbell range); strict board."""

from __future__ import annotations

import struct

import tinyhw
from tinyhw.regs import asic

A = asic("navi31")


def reg(name: str) -> int:
    return A.offset(f"gc.{name}")


def select(b5, me: int, pipe: int, queue: int) -> None:
    b5.write32(reg("GRBM_GFX_CNTL"), pipe | me << 2 | queue << 8)


def test_hqd_registers_are_banked_per_queue() -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        b5 = o.transport.bar(5)
        select(b5, 1, 0, 0)
        b5.write32(reg("CP_HQD_PQ_BASE"), 0x1234)
        assert b5.read32(reg("GRBM_GFX_CNTL")) == 1 << 2
        select(b5, 1, 0, 1)
        assert b5.read32(reg("CP_HQD_PQ_BASE")) == 0
        b5.write32(reg("CP_HQD_PQ_BASE"), 0x99)
        select(b5, 1, 0, 0)
        assert b5.read32(reg("CP_HQD_PQ_BASE")) == 0x1234
        select(b5, 1, 0, 1)
        assert b5.read32(reg("CP_HQD_PQ_BASE")) == 0x99


def test_every_dword_of_the_hqd_block_is_banked_storage_in_strict_mode() -> None:
    """Drivers write the HQD block whole from an MQD image (CP_MQD_BASE_ADDR .. CP_HQD_PQ_WPTR_HI, amd-compute.md
    §0.2), including dwords the register database names nothing at (0xC864, between PQ_DOORBELL_CONTROL and
    PQ_CONTROL): a strict board keeps them, per queue, like the named ones."""
    gap = reg("CP_HQD_PQ_DOORBELL_CONTROL") + 4
    assert gap == 0xC864 and gap + 4 == reg("CP_HQD_PQ_CONTROL")
    with tinyhw.open("mock:navi31,strict") as o:
        b5 = o.transport.bar(5)
        select(b5, 1, 0, 1)
        b5.write32(gap, 0x5A5A)
        select(b5, 1, 0, 2)
        assert b5.read32(gap) == 0
        select(b5, 1, 0, 1)
        assert b5.read32(gap) == 0x5A5A


def _activate(o, header: int) -> dict:
    """An MQD in VRAM at 1 MiB, reached through the system aperture (MC = FB base + offset), then ACTIVE=1."""
    t = o.transport
    b5, board = t.bar(5), t.board
    fb = board.regfile.fb_base
    b5.write32(A.offset("gc.GCMC_VM_SYSTEM_APERTURE_LOW_ADDR"), fb >> 18)
    b5.write32(A.offset("gc.GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR"), (fb + board.vram_size - 1) >> 18)
    t.bar(0).write(1 << 20, struct.pack("<512I", header, *([0] * 511)))
    select(b5, 1, 0, 0)
    mc = fb + (1 << 20)
    b5.write32(reg("CP_MQD_BASE_ADDR"), mc & 0xFFFFFFFF)
    b5.write32(reg("CP_MQD_BASE_ADDR_HI"), mc >> 32)
    b5.write32(reg("CP_HQD_PQ_DOORBELL_CONTROL"), 6 << 2 | 1 << 30)
    b5.write32(reg("CP_HQD_ACTIVE"), 1)
    select(b5, 0, 0, 0)
    return board.cp.status()[0]


def test_activation_reads_the_mqd_and_checks_its_header() -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        st = _activate(o, 0xC0310800)
        assert st["active"] and not st["error"] and o.transport.board.compute_active()
    with tinyhw.open("mock:navi31,strict") as o:  # the queue outlives the command, as on hardware
        b5 = o.transport.bar(5)
        assert o.transport.board.compute_active()
        select(b5, 1, 0, 0)
        b5.write32(reg("CP_HQD_DEQUEUE_REQUEST"), 1)
        b5.write32(reg("CP_HQD_DEQUEUE_REQUEST"), 0)
        st = _activate(o, 0xDEADBEEF)
        assert "has header 0xdeadbeef, not 0xc0310800" in st["error"]
        select(b5, 1, 0, 0)  # a driver's recovery dequeues and re-activates: the history keeps the first error
        b5.write32(reg("CP_HQD_DEQUEUE_REQUEST"), 2)
        st = _activate(o, 0xC0310800)
        assert not st["error"] and ["has header 0xdeadbeef" in e for e in o.transport.board.cp.errors] == [True]


def route_gc_doorbells(b5) -> None:
    """The NBIO's doorbell aperture and the GC's port 0 (AWID 3, no range), through the RSMU window."""
    b5.write32(A.offset("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN"), 1)
    b5.write32(A.offset("nbio.BIF_BX_PF0_RSMU_INDEX"), A.offset("nbio.S2A_DOORBELL_ENTRY_0_CTRL"))
    b5.write32(A.offset("nbio.BIF_BX_PF0_RSMU_DATA"), 1 | 3 << 1)


def test_a_doorbell_outside_the_mec_range_never_reaches_the_queue() -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        _activate(o, 0xC0310800)
        cp, b2, b5 = o.transport.board.cp, o.transport.bar(2), o.transport.bar(5)
        b2.write32(24, 0)
        b2.write32(28, 0)  # range upper is 0: the doorbell at byte 24 is outside
        assert cp.stats["doorbells"] == 0
        b5.write32(reg("CP_MEC_DOORBELL_RANGE_UPPER"), 0x450)
        b2.write32(24, 0)
        b2.write32(28, 0)
        assert cp.stats["doorbells"] == 0  # inside the range, but the NBIO routes it nowhere
        route_gc_doorbells(b5)
        b2.write32(24, 0)
        b2.write32(28, 0)
        assert cp.stats["doorbells"] == 1
        select(b5, 1, 0, 0)
        b5.write32(reg("CP_HQD_DEQUEUE_REQUEST"), 1)
        assert b5.read32(reg("CP_HQD_ACTIVE")) & 1 == 0 and not o.transport.board.compute_active()
