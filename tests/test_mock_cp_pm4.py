"""PM4 packets of the emulated command processor (tinyhw/mocks/cp.py) beyond a plain dispatch, from
specs/amd-compute.md: RELEASE_MEM time stamps (§2.7, DATA_SEL 3) that follow the modelled time of the work between
them; WAIT_REG_MEM (§2.9) in its memory and register forms, every compare function, the mask, the write-then-wait
form of an HDP flush, and a wait that never completes (the queue hangs: the driver's timeout, no exception).
Strict boards; the compute queue is tinyhw's own (tinyhw/boot/compute.py) on a booted mock:navi31."""

from __future__ import annotations

import struct

import pytest
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot import compute, pm4
from tinyhw.kernels.manifest import prebuilt_dir
from tinyhw.mocks import cp as mock_cp

PATTERN = next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf"))
STAMPS = 0x2400  # two 64-bit time stamps in the compute region's first (mapped) page, after the AQL packet


@pytest.fixture
def booted() -> None:
    am_boot()


def _stamps(eng: compute.ComputeEngine) -> tuple[int, int]:
    return struct.unpack("<QQ", eng.gpu.vram_read(compute.REGION + STAMPS, 16))


def test_release_mem_time_stamps_around_a_dispatch_differ_by_its_modelled_time(booted: None) -> None:
    """A RELEASE_MEM time stamp (DATA_SEL 3) before and one after a dispatch: the later one is later by exactly the
    modelled time of the packets between them (dispatch packet, launch, the waves' issue time, the second
    RELEASE_MEM), in 10 ns ticks -- even when the host looks only long after both landed."""
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport)
        cp = o.transport.board.cp
        with eng:
            eng.gpu.vram_write(compute.REGION + STAMPS, bytes(16))
            eng.launch(compute.load_code_object(PATTERN.read_bytes()), (64,), (32,), [bytes(64 * 32 * 16)],
                       before=pm4.release_mem(compute.va(STAMPS), 0, data_sel=3),
                       after=pm4.release_mem(compute.va(STAMPS + 8), 0, data_sel=3))
            o.transport.clock.sleep(0.01)  # both time stamps are due long before the host's next access
            eng.wait(eng.seq)
            start, end = _stamps(eng)
            res = cp.last_dispatch
        parallel = max(1, min(res.waves, mock_cp.CUS))
        modelled = 2 * mock_cp.PACKET_COST_S + mock_cp.DISPATCH_COST_S + res.cycles / mock_cp.SHADER_HZ / parallel
        assert start > 0 and end > start
        assert abs((end - start) - modelled * 1e8) <= 1, (start, end, modelled)
