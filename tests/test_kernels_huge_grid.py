"""A grid the board cannot be given is refused before the device is touched; a grid it can be given but that takes
too long to emulate (millions of one-instruction workgroups, which never reach the instruction watchdog) is bounded
in wall time by the emulated CP, and the driver's timeout reports the hung queue."""

from __future__ import annotations

import struct
import threading
from typing import Any

import pytest
from clihelp import run
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot import compute
from tinyhw.errors import DeviceTimeout, Refused
from tinyhw.formats.amdgpu_code import KernelDescriptor
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
