"""A grid the board cannot be given is refused before the device is touched; a grid it can be given but that takes
too long to emulate (millions of one-instruction workgroups, which never reach the instruction watchdog) is bounded
in wall time by the emulated CP, and the driver's timeout reports the hung queue. The emulated CP runs such a
dispatch beside the host (a slice per host access), so ``--timeout`` bounds the whole dispatch, not only the wait
after it."""

from __future__ import annotations

import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from clihelp import run
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot.amd import compute
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.formats.amdgpu_code import KernelDescriptor, parse_amdgpu_code
from tinyhw.kernels.manifest import prebuilt_dir

UNTOUCHED = "mock:navi31,faults=disconnect@1"  # any device access would fail: a refusal must come first
ENDPGM = compute.Kernel("end", KernelDescriptor(0, 0, 0, 0, 0x40AF0081, 0, 0, 0x400), struct.pack("<I", 0xBFB00000),
                        0)  # s_endpgm


@pytest.mark.parametrize(("grid", "block"), [("2147483647", "1024"), ("4194305", "1024"), ("1,8388609", "1,512")])
def test_a_grid_beyond_32_bits_of_work_items_is_refused_before_the_device(grid: str, block: str) -> None:
    elf = str(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")))
    r = run("--device", UNTOUCHED, "kernels", "exec", elf, "--grid", grid, "--block", block, "--buffer", "zeros:64",
            "--timeout", "10")
    assert r.code == 2 and "a dispatch holds at most 4294967295 (32 bits) per dimension" in r.err, (r.code, r.err)
    assert len(r.err.splitlines()) == 1


def test_the_engine_refuses_it_too() -> None:
    with pytest.raises(Refused, match="32 bits"):
        compute.check_grid((2147483647, 1, 1), (1024, 1, 1))
    compute.check_grid((4194303, 1, 1), (1024, 1, 1))  # 2**32 - 1024 work-items: allowed


def test_a_huge_grid_of_tiny_workgroups_is_bounded_in_wall_time() -> None:
    """4194303 workgroups of 1024 work-items (32 waves each, one s_endpgm per wave): hours to emulate. The CP's
    wall-time watchdog hangs the queue and the driver's fence timeout reports it; the hang bound is generous."""
    am_boot()
    out: dict[str, Any] = {}

    def work() -> None:
        with tinyhw.open("mock:navi31,strict") as o:
            o.transport.board.cp.wall_watchdog = 1.0
            eng = compute.open_compute(o.transport, timeout=10)
            try:
                eng.run(ENDPGM, (4194303,), (1024,), [])
            except DeviceTimeout as e:
                out["error"] = e.message
            out["cp"] = o.transport.board.cp.status()[0]["error"]
            compute.teardown_compute(eng.gpu)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(300)
    assert not t.is_alive(), "the dispatch was not bounded (still running after 300 s)"
    assert out["error"].startswith("the dispatch did not complete in 10 s"), out
    assert "wall-time limit of 1 s" in out["cp"], out


def _endpgm_elf(tmp: Path) -> str:
    """The prebuilt pattern code object with s_endpgm at its kernel's entry (a kernel that does nothing)."""
    src = next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")).read_bytes()
    k = compute.load_code_object(src)
    text = parse_amdgpu_code(src).elf.section(".text")
    assert text is not None
    data = bytearray(src)
    data[text.offset + k.entry:text.offset + k.entry + 4] = struct.pack("<I", 0xBFB00000)
    out = tmp / "endpgm.elf"
    out.write_bytes(data)
    return str(out)


@pytest.mark.slow
def test_the_cli_timeout_bounds_a_huge_grid_and_am_reset_recovers(tmp_path: Path) -> None:
    """`kernels exec --timeout 10` of s_endpgm on 4194303 workgroups of 1024 (an allowed grid, hours to emulate)
    ends with exit 1 and the one-line timeout: the CP's dispatch was still running beside the host, not stopped by
    its own 60 s wall-time watchdog (what a dispatch run inside its doorbell write came to). `am reset` then
    recovers the queue and a normal `kernels run` passes. The hang bound is generous."""
    am_boot()
    elf = _endpgm_elf(tmp_path)
    out: dict[str, Any] = {}

    def work() -> None:
        out["r"] = run("--device", "mock:navi31", "kernels", "exec", elf, "--grid", "4194303", "--block", "1024",
                       "--buffer", "zeros:64", "--timeout", "10")

    t = threading.Thread(target=work, daemon=True)
    t.start()
    t.join(150)
    assert not t.is_alive(), "--timeout 10 did not bound the dispatch (still running after 150 s)"
    r = out["r"]
    assert r.code == 1 and "the dispatch did not complete in 10 s" in r.err, (r.code, r.err)
    assert len(r.err.strip().splitlines()) == 1, r.err
    with tinyhw.open("mock:navi31") as o:
        q = o.transport.board.cp.status()[0]
    assert q["hung"] and "still running" in q["error"] and "wall-time limit" not in q["error"], q
    r = run("--device", "mock:navi31", "am", "reset", "--yes")
    assert r.code == 0, r.err
    am_boot()
    r = run("--device", "mock:navi31", "kernels", "run", "pattern")
    assert r.code == 0, r.err


def test_a_dispatch_longer_than_its_slice_completes_exactly_beside_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """A dispatch that outlasts the CP's slice (made tiny here) goes on at the host's later accesses and completes
    with the same result and counters as one run in one go; the CP reports it running meanwhile. (A slice ends
    between runs of workgroups: two workgroups in lockstep here, else the four would be one run.)"""
    from tinyhw.mocks.rdna3 import dispatch

    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 2)
    am_boot()
    kernel = compute.load_code_object(next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf")).read_bytes())
    grid, block = (4,), (32,)
    n = 4 * 32 * 4 * 4  # the probe's 4 elements per work-item, 4 bytes each
    results = []
    for slice_s in (compute.DEFAULT_TIMEOUT, 0.0):
        with tinyhw.open("mock:navi31,strict") as o:
            cp = o.transport.board.cp
            cp.dispatch_slice = slice_s
            with compute.open_compute(o.transport, timeout=10) as eng:
                _grid, _block, placed = eng.launch(kernel, grid, block, [bytes(n)])
                running = cp.status()[0]["running"]
                eng.wait(eng.seq)
                data = eng.gpu.vram_read(compute.REGION + placed[0][0], n)
            res = cp.last_dispatch
            results.append((running, data, res.wave_instructions, res.per_mnemonic, res.workgroups))
    assert results[0][0] is False and results[1][0] is True, results
    assert results[0][1:] == results[1][1:] and results[0][4] == 4 and any(results[0][1])


def test_the_fence_wait_on_an_emulated_board_is_bounded_in_wall_time(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a virtual clock the fence wait also ends when the user's timeout has passed in wall time (the emulation
    of a long dispatch costs wall time the board clock does not see): here wall time is made to run 1 s per look,
    so the wait gives up after about 10 looks while the board clock moved far less than the 10 s timeout."""
    am_boot()
    ticks = iter(range(10**6))
    monkeypatch.setattr(compute, "time", type("FakeTime", (), {"monotonic": staticmethod(lambda: next(ticks))}))
    with tinyhw.open("mock:navi31,strict") as o:
        o.transport.board.cp.dispatch_slice = 0.0
        eng = compute.open_compute(o.transport, timeout=10)
        t0 = eng.gpu.clock.now()
        with pytest.raises(DeviceTimeout, match="did not complete in 10 s"):
            eng.run(ENDPGM, (4194303,), (1024,), [])
        assert eng.gpu.clock.now() - t0 < 1.0
        assert o.transport.board.cp.status()[0]["running"]
        compute.teardown_compute(eng.gpu)
        assert not o.transport.board.cp.status()[0]["active"]
