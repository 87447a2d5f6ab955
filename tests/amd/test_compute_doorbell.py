"""The compute queue's doorbell goes through the NBIO's doorbell route: the driver programs the GC's ports
(tinyhw/boot/amd/compute.py ``route_doorbells``, amd-bringup.md §4.2 step 9c), the emulated board delivers a BAR2
doorbell write to the command processor only when the route reaches it (tinyhw/mocks/amd/doorbells.py), and a doorbell
that reaches nothing is a timeout whose message says the CP never saw it and shows the route.
The same for SDMA0's doorbell (NBIO port 2, amd-bringup.md §4.2 step 10).
Sabotages: a board that delivers every doorbell (the unrouted tests fail: the dispatch / the copy completes); a
driver that skips the route (every run times out naming the route)."""

from __future__ import annotations

import pytest
from clihelp import run
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot.amd import compute, copyengine
from tinyhw.boot.amd.copyengine import SDMA_DOORBELL_INDEX, fields, wr_far
from tinyhw.errors import DeviceTimeout
from tinyhw.kernels.manifest import prebuilt_dir
from tinyhw.mocks.amd.doorbells import DoorbellRouter
from tinyhw.regs import asic

PATTERN = next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf"))
A = asic("navi31")
DST = 128 << 20  # a VRAM offset the copy paths accept


@pytest.fixture
def booted() -> None:
    am_boot()


def _unroute(gpu, port: int) -> None:
    wr_far(gpu, f"nbio.S2A_DOORBELL_ENTRY_{port}_CTRL", 0)


def _run_pattern(eng: compute.ComputeEngine) -> bytes:
    return eng.run(compute.load_code_object(PATTERN.read_bytes()), (2,), (32,), [bytes(1024)]).outputs[0]


def test_the_driver_routes_the_gc_doorbell_ports(booted: None) -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport)
        with eng:
            assert _run_pattern(eng)[4:8] != bytes(4)
            route = eng.doorbell_route()
    assert "BIF_DOORBELL_APER_EN=1" in route
    assert route.count("(routed: ENABLE=1") == 2 and "AWID=3" in route and "AWID=6" in route, route


@pytest.mark.parametrize("cut", ["both ports", "aperture"])
def test_an_unrouted_doorbell_does_not_dispatch_and_the_error_says_so(booted: None, cut: str) -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=0.2)
        g = eng.gpu
        if cut == "aperture":
            g.wr("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", 0)
        else:
            _unroute(g, 0)
            _unroute(g, 3)
        cp = o.transport.board.cp
        with pytest.raises(DeviceTimeout) as e:
            _run_pattern(eng)
        msg = e.value.message
        assert cp.stats["doorbells"] == 0 and cp.stats["dispatches"] == 0  # the CP never ran anything
        eng.close()
    assert msg.startswith("the dispatch did not complete in 0.2 s; CP status: queue me1 pipe0 queue0"), msg
    assert "the cp never saw the doorbell (CP_HQD_PQ_WPTR 0x0, the driver rang 0x" in msg, msg
    assert "at BAR2 byte 0x18" in msg
    if cut == "aperture":
        assert "BIF_DOORBELL_APER_EN=0" in msg, msg
    else:
        assert "S2A_DOORBELL_ENTRY_0_CTRL 0x00000000 (not routed" in msg, msg
        assert "S2A_DOORBELL_ENTRY_3_CTRL 0x00000000 (not routed" in msg, msg


def test_one_gc_port_is_enough(booted: None) -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=0.5)
        _unroute(eng.gpu, 0)
        with eng:
            assert _run_pattern(eng)[4:8] != bytes(4)


def test_without_the_drivers_route_kernels_run_names_it(booted: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compute.ComputeEngine, "route_doorbells", lambda self: None)
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "256", "--timeout", "0.2")
    assert r.code == 1 and "the cp never saw the doorbell" in r.err and "not routed" in r.err, r.err


@pytest.mark.parametrize("cut", ["port 2", "aperture"])
def test_an_unrouted_sdma_doorbell_moves_nothing_and_the_error_says_so(booted: None, cut: str) -> None:
    """SDMA0's doorbell goes through NBIO port 2 like the CP's through ports 0/3: cut it and the engine never sees
    the doorbell (no doorbell counted, the copy not made) and the driver's timeout says so, showing the route."""
    import os

    from tinyhw.boot.amd.dmacopy import open_dma_copier

    with tinyhw.open("mock:navi31,strict") as o:
        t = o.transport
        c = open_dma_copier(t, window=16 * 1024, timeout=0.2)
        assert "(routed: ENABLE=1 AWID=0xe" in copyengine.doorbell_route(c.gpu)
        c.copy_in(DST, b"x" * 64)  # routed: the engine runs
        seen = t.board.sdma.stats["doorbells"]
        assert seen >= 1 and c.engine.missed_doorbell() is None
        if cut == "aperture":
            c.gpu.wr("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN", 0)
        else:
            _unroute(c.gpu, 2)
        before = t.board.vram.read(DST + 4096, 4096)
        with pytest.raises(DeviceTimeout) as e:
            c.copy_in(DST + 4096, os.urandom(4096))
        assert t.board.sdma.stats["doorbells"] == seen and t.board.vram.read(DST + 4096, 4096) == before
        msg = e.value.message
        assert "did not signal fence 2" in msg and "sdma0 never saw the doorbell (SDMA0_QUEUE0_RB_WPTR 0x" in msg, msg
        assert f"at BAR2 byte 0x{8 * SDMA_DOORBELL_INDEX:x}" in msg and "iommu" not in msg, msg
        if cut == "aperture":
            assert "BIF_DOORBELL_APER_EN=0" in msg, msg
        else:
            assert "S2A_DOORBELL_ENTRY_2_CTRL 0x00000000 (not routed" in msg, msg
        with pytest.raises(DeviceTimeout, match="sdma0 did not consume its ring in 0.1 s .*: sdma0 never saw the "
                                                "doorbell"):
            c.engine.wait_idle(0.1)


class _Regs:
    def __init__(self) -> None:
        self.values: dict[int, int] = {}


def _entry(n: int, **f: int) -> tuple[int, int]:
    reg = f"nbio.S2A_DOORBELL_ENTRY_{n}_CTRL"
    value = 0
    for name, v in f.items():
        fld = A.field(f"{reg}.S2A_DOORBELL_PORT{n}_{name}")
        value |= (v << fld.shift) & fld.mask
    return A.offset(reg), value


def test_the_router_model() -> None:
    regs = _Regs()
    r = DoorbellRouter(A, regs)
    sdma_dword = SDMA_DOORBELL_INDEX * 2
    assert r.block(24) is None  # aperture off
    regs.values[A.offset("nbio.RCC_DEV0_EPF0_RCC_DOORBELL_APER_EN")] = 1
    assert r.block(24) is None  # no route
    regs.values.update([_entry(2, ENABLE=1, AWID=0xE, RANGE_OFFSET=sdma_dword, RANGE_SIZE=4)])
    assert r.block(4 * sdma_dword) == "sdma" and r.block(4 * sdma_dword + 12) == "sdma" and r.block(24) is None
    regs.values.update([_entry(0, ENABLE=1, AWID=3, AWADDR_31_28_VALUE=3)])
    assert r.block(24) == "cp" and r.block(4 * sdma_dword) == "sdma"  # the sized entry keeps its range
    regs.values.update([_entry(0, ENABLE=0, AWID=3)])
    assert r.block(24) is None
    regs.values.update([_entry(5, ENABLE=1, AWID=9)])
    assert r.block(24) is None  # an AWID of no modelled block


def test_fields_of_the_route_come_from_the_database() -> None:
    # the values §4.2 step 9c describes: enable, AWID 3 / 6, AWADDR[31:28] 3, no range
    class G:
        asic = A

    assert fields(G, "nbio.S2A_DOORBELL_ENTRY_0_CTRL", S2A_DOORBELL_PORT0_ENABLE=1, S2A_DOORBELL_PORT0_AWID=3,
                  S2A_DOORBELL_PORT0_AWADDR_31_28_VALUE=3) == 0x30000007
    assert fields(G, "nbio.S2A_DOORBELL_ENTRY_3_CTRL", S2A_DOORBELL_PORT3_ENABLE=1, S2A_DOORBELL_PORT3_AWID=6,
                  S2A_DOORBELL_PORT3_AWADDR_31_28_VALUE=3) == 0x3000000D
