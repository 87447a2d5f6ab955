"""PM4 packets of the emulated command processor (tinyhw/mocks/amd/cp.py) beyond a plain dispatch, from
specs/amd-compute.md: RELEASE_MEM time stamps (§2.7, DATA_SEL 3) that follow the modelled time of the work between
them; WAIT_REG_MEM (§2.9) in its memory and register forms, every compare function, the mask, the write-then-wait
form of an HDP flush, and a wait that never completes (the queue hangs: the driver's timeout, no exception).
Strict boards; the compute queue is tinyhw's own (tinyhw/boot/amd/compute.py) on a booted mock:navi31."""

from __future__ import annotations

import struct

import pytest
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot.amd import compute, pm4
from tinyhw.kernels.manifest import prebuilt_dir
from tinyhw.mocks.amd import cp as mock_cp

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


# -- WAIT_REG_MEM (§2.9) -----------------------------------------------------------------------------------------
WORD = 0x2500  # the dword a memory-form wait polls, in the compute region's first page
FENCE_SEQ = iter(range(100, 1 << 30))


def wait_reg_mem(function: int, mem_space: int, operation: int, addr0: int, addr1: int, ref: int, mask: int,
                 interval: int = 4) -> list[int]:
    """The packet as §2.9 lays it out: dw1 FUNCTION 2:0, MEM_SPACE 5:4, OPERATION 7:6, ENGINE 9:8 (0: ME); dw2/dw3
    address lo/hi or reg0/reg1; dw4 reference, dw5 mask, dw6 poll interval."""
    return [pm4.header(0x3C, 6), function | mem_space << 4 | operation << 6, addr0, addr1, ref, mask, interval]


def _fenced(eng: compute.ComputeEngine, packets: list[int]) -> int:
    """Submit ``packets`` and a RELEASE_MEM of a fresh fence value after them; the value."""
    seq = next(FENCE_SEQ)
    eng.submit(packets + pm4.release_mem(compute.va(compute.FENCE), seq))
    return seq


def _cp_busy(eng: compute.ComputeEngine) -> bool:
    return bool(eng.gpu.rd("gc.GRBM_STATUS") >> 29 & 1)


#: (FUNCTION, value, mask, reference, met?) -- met by §2.9's rule (value & mask) FUNCTION reference, worked by hand;
#: FUNCTION 0 always, 1 <, 2 <=, 3 ==, 4 !=, 5 >=, 6 >
TABLE = [
    (0, 0x5, 0xFF, 0x9, True),
    (1, 0x105, 0xFF, 0x6, True),  # the mask drops bit 8: 5 < 6
    (1, 0x6, 0xFF, 0x6, False),
    (2, 0x6, 0xFF, 0x6, True),
    (2, 0x7, 0xFF, 0x6, False),
    (3, 0x1234, 0xFF00, 0x1200, True),
    (3, 0x1234, 0xFFFF, 0x1200, False),
    (4, 0x17, 0xF, 0x7, False),  # 7 != 7 is false once bit 4 is masked away
    (4, 0x8, 0xF, 0x7, True),
    (5, 0x7, 0xF, 0x7, True),
    (5, 0x16, 0xF, 0x7, False),
    (6, 0x8, 0xF, 0x7, True),
    (6, 0x7, 0xF, 0x7, False),
    (3, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, True),
]
#: a value that meets each unmet row, to release the queue (worked by hand from the same rule)
RELEASE = {(1, 0x6): 0x5, (2, 0x7): 0x6, (3, 0x1234): 0x1200, (4, 0x17): 0x18, (5, 0x16): 0x7, (6, 0x7): 0x8}


@pytest.mark.parametrize("form", ["memory", "register"])
def test_wait_reg_mem_compares_as_the_spec_table_says(booted: None, form: str) -> None:
    """Every row: a met condition lets the fence after it land; an unmet one parks the queue at the packet (no fence,
    GRBM_STATUS.CP_BUSY, the read pointer at the packet) until the host writes a value that meets it."""
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=1.0)
        cp = o.transport.board.cp
        g = eng.gpu
        scratch = g.offset("gc.SCRATCH_REG1")

        def put(value: int) -> None:
            if form == "memory":
                g.vram_write(compute.REGION + WORD, struct.pack("<I", value))
            else:
                g.wr("gc.SCRATCH_REG1", value)

        space, addr = (1, compute.va(WORD)) if form == "memory" else (0, scratch // 4)
        with eng:
            for function, value, mask, ref, met in TABLE:
                put(value)
                seq = _fenced(eng, wait_reg_mem(function, space, 0, addr & 0xFFFFFFFF, addr >> 32, ref, mask))
                row = (function, hex(value), hex(mask), hex(ref))
                if met:
                    assert eng.fence() == seq and not _cp_busy(eng), row
                    continue
                polls = cp.stats["wait_polls"]
                assert eng.fence() != seq and _cp_busy(eng), row
                assert eng.fence() != seq and cp.stats["wait_polls"] > polls, row  # it keeps looking
                put(RELEASE[(function, value)])
                assert eng.fence() == seq and not _cp_busy(eng), row
            assert cp.stats["wait_reg_mem"] == len(TABLE) and not any(q["error"] for q in cp.status())


def test_wait_reg_mem_write_then_wait_is_an_hdp_flush(booted: None) -> None:
    """OPERATION 1 on registers (amdgpu's HDP flush): write the reference into reg0 (GPU_HDP_FLUSH_REQ), then wait
    until (reg1 & mask) == reference (GPU_HDP_FLUSH_DONE); the emulated NBIO completes the flush at once."""
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=1.0)
        regfile = o.transport.board.regfile
        req, done = (eng.gpu.offset(f"nbio.BIF_BX_PF0_GPU_HDP_FLUSH_{n}") // 4 for n in ("REQ", "DONE"))
        with eng:
            flushes = regfile.hdp_flushes
            seq = _fenced(eng, wait_reg_mem(3, 0, 1, req, done, 1 << 0, 1 << 0, 0x20))
            assert eng.fence() == seq
            assert regfile.hdp_flushes >= flushes + 1 and eng.gpu.rd("nbio.BIF_BX_PF0_GPU_HDP_FLUSH_DONE") & 1


def test_the_poll_interval_delays_the_queue_after_the_condition_holds(booted: None) -> None:
    """A parked wait goes on one poll interval (dw6, 10 ns units) after the host's write that meets it: a RELEASE_MEM
    time stamp right after the wait is at least that much later than the write."""
    interval = 0xFFFF
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=1.0)
        board = o.transport.board
        g = eng.gpu
        with eng:
            g.vram_write(compute.REGION + WORD, struct.pack("<I", 0))
            g.vram_write(compute.REGION + STAMPS, bytes(16))
            seq = _fenced(eng, wait_reg_mem(3, 1, 0, compute.va(WORD) & 0xFFFFFFFF, compute.va(WORD) >> 32, 1, 1,
                                            interval) + pm4.release_mem(compute.va(STAMPS), 0, data_sel=3))
            assert eng.fence() != seq
            o.transport.clock.sleep(0.001)
            before = board.now()
            g.vram_write(compute.REGION + WORD, struct.pack("<I", 1))
            after = board.now()
            eng.wait(seq)
            stamp = _stamps(eng)[0]
        assert int(before * 1e8) + interval <= stamp <= int(after * 1e8) + interval + 100


def test_a_wait_that_never_completes_hangs_the_queue_and_the_driver_times_out(booted: None) -> None:
    """No exception from the board: the queue stays parked (GRBM_STATUS.CP_BUSY, the fence never lands), tinyhw's
    fence wait times out naming the CP status, and a dequeue stops the waiting queue."""
    from tinyhw.errors import DeviceTimeout

    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=0.2)
        cp = o.transport.board.cp
        eng.gpu.vram_write(compute.REGION + WORD, struct.pack("<I", 0))
        seq = _fenced(eng, wait_reg_mem(3, 1, 0, compute.va(WORD) & 0xFFFFFFFF, compute.va(WORD) >> 32, 1, 1))
        with pytest.raises(DeviceTimeout, match="the dispatch did not complete in 0.2 s; CP status"):
            eng.wait(seq)
        assert _cp_busy(eng) and cp.waiting and cp.stats["wait_polls"] > 10
        eng.close()
        assert not cp.waiting and not cp.any_active() and eng.fence() != seq


def test_wait_reg_mem_forms_the_model_lacks_are_gaps_on_a_strict_board(booted: None) -> None:
    """FUNCTION 7 (reserved) and a write-then-wait on memory are not modelled: a strict board says so, naming them."""
    from tinyhw.errors import StrictEmulationError

    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=0.2)
        with pytest.raises(StrictEmulationError, match=r"WAIT_REG_MEM control 0x00000017 \(function 7, mem_space 1"):
            _fenced(eng, wait_reg_mem(7, 1, 0, compute.va(WORD) & 0xFFFFFFFF, compute.va(WORD) >> 32, 0, 0))
        eng.close(reset_waves=True)
