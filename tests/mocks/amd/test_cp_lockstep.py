"""Workgroups in lockstep on the emulated board: a dispatch through the command processor and GPUVM gives the same
bytes, errors and counters as one workgroup at a time.

The shader core runs the waves of several workgroups together only on a memory that can undo a run
(:mod:`tinyhw.mocks.rdna3.dispatch`); the board's dispatch memory (``cp._Undoable`` over
:class:`tinyhw.mocks.amd.gpuvm.GpuVm`) keeps a lockstep run's accesses free of effects (no TLB fill, no walk counted, no
fault status, writes uncounted) and settles a kept run's effects at its end. Every comparison here is against
``LOCKSTEP_WAVES = 1`` (no lockstep at all): outputs, the board's counters, the GPUVM's walks and TLB, the CP's
statistics and last dispatch, the fault registers and the queue's error.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import corpushelp
import numpy as np
import pytest
from kernelshelp import am_boot

import tinyhw
from tinyhw.boot.amd import compute
from tinyhw.errors import OperationFailed
from tinyhw.formats.amdgpu_code import KernelDescriptor
from tinyhw.kernels import exec_kernel
from tinyhw.mocks.rdna3 import dispatch


@pytest.fixture
def runs(lockstep_runs: list[bool]) -> list[bool]:
    """Whether each lockstep run was kept (True) or undone (False); the board booted."""
    am_boot()
    return lockstep_runs


def _state(o: Any) -> dict:
    """Everything the board keeps that a dispatch could change, beside memory the test reads itself."""
    b = o.transport.board
    vm, cp = b.am.gpuvm, b.cp
    last = cp.last_dispatch
    return {"counters": b.counters(), "walks": vm.walks, "tlb": sorted(vm.tlb.items()), "redirected": vm.redirected,
            "cp": dict(cp.stats), "status": cp.status(), "last": None if last is None else last.to_doc(),
            "fault": {r: b.regfile.values.get(cp.reg.offset[r]) for r in cp.reg.offset if r.startswith("GCVM_")}}


def _corpus_run(tmp: Path) -> tuple[list, dict]:
    meta, arrays = corpushelp.load_corpus()
    chosen = [e for e in meta["kernels"] if int(np.prod(e["grid"])) >= 4][:10:2]
    outs = []
    with tinyhw.open("mock:navi31,strict") as o:
        for e in chosen:
            key = f"k{e['seed']}"
            bufs: list = [f"zeros:{int(np.prod(e['out_shape'])) * 4}" if a == "out" else arrays[f"{key}_{a}"].tobytes()
                          for a in e["args"]]
            code = tmp / f"{key}.elf"
            code.write_bytes(arrays[f"{key}_code"].tobytes())
            res = exec_kernel(o.transport, code, kernel=e["name"], grid=tuple(e["grid"]),
                              block=tuple(e["block"]), buffers=bufs)
            outs.append((res.buffers, res.doc["dispatch_s"]))
            got = np.frombuffer(res.buffers[e["args"].index("out")], dtype=corpushelp.DT[e["out"]])
            assert corpushelp.compare_output(e, got.reshape(e["out_shape"]), arrays[f"{key}_out"])[0] != "FAIL"
        return outs, _state(o)


def test_corpus_kernels_through_the_board_equal_one_workgroup_at_a_time(runs: list[bool], tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    got = _corpus_run(tmp_path)
    assert runs.count(True) >= 3                # several kernels ran their workgroups in lockstep, kept
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)
    assert _corpus_run(tmp_path) == got


def _kernel(name: str, words: bytes) -> compute.Kernel:
    """A hand-assembled wave32 kernel: the kernarg pointer in s[0:1], the workgroup id X in s2, 16 VGPRs."""
    return compute.Kernel(name, KernelDescriptor(0, 0, 8, 0, 0x40AF0081, 2 << 1 | 1 << 7, 0, 0x400 | 0x8), words, 0)


# llvm-mc-19 -arch=amdgcn -mcpu=gfx1100 -show-encoding
LOAD_BUF = bytes([0x00, 0x00, 0x04, 0xF4, 0x00, 0x00, 0x00, 0xF8,    # s_load_b64 s[0:1], s[0:1], 0x0
                  0x07, 0xFC, 0x89, 0xBF])                              # s_waitcnt lgkmcnt(0)
END = bytes([0x00, 0x00, 0xB0, 0xBF])                                   # s_endpgm
# every wave: buf[0] += 1 (a load, an add, a store of one address): in lockstep every wave would read 0
RACE = _kernel("race", LOAD_BUF + bytes([
    0x00, 0x00, 0x52, 0xDC, 0x02, 0x00, 0x00, 0x01,                     # global_load_b32 v1, v2, s[0:1]
    0x07, 0xFC, 0x89, 0xBF,                                             # s_waitcnt (vmcnt form)
    0x81, 0x02, 0x02, 0x4A,                                             # v_add_nc_u32_e32 v1, 1, v1
    0x00, 0x00, 0x6A, 0xDC, 0x02, 0x01, 0x00, 0x00]) + END)             # global_store_b32 v2, v1, s[0:1]
# every workgroup g: buf[g] = g, then buf[g * 64 KiB + 64] = g: past the buffer from some workgroup on
STRIDE = _kernel("stride", LOAD_BUF + bytes([
    0x02, 0x02, 0x02, 0x7E,                                             # v_mov_b32_e32 v1, s2
    0x82, 0x02, 0x06, 0x30,                                             # v_lshlrev_b32_e32 v3, 2, v1
    0x00, 0x00, 0x6A, 0xDC, 0x03, 0x01, 0x00, 0x00,                     # global_store_b32 v3, v1, s[0:1]
    0x02, 0x90, 0x03, 0x84,                                             # s_lshl_b32 s3, s2, 16
    0x00, 0x03, 0x00, 0x80,                                             # s_add_u32 s0, s0, s3
    0x01, 0x80, 0x01, 0x82,                                             # s_addc_u32 s1, s1, 0
    0x40, 0x00, 0x6A, 0xDC, 0x02, 0x01, 0x00, 0x00]) + END)             # global_store_b32 v2, v1, s[0:1] offset:64
# the same with a load: buf[g] = buf[g * 64 KiB + 64]
STRIDE_LOAD = _kernel("stride_load", LOAD_BUF + bytes([
    0x02, 0x02, 0x02, 0x7E,                                             # v_mov_b32_e32 v1, s2
    0x82, 0x02, 0x06, 0x30,                                             # v_lshlrev_b32_e32 v3, 2, v1
    0x02, 0x90, 0x03, 0x84,                                             # s_lshl_b32 s3, s2, 16
    0x00, 0x03, 0x04, 0x80,                                             # s_add_u32 s4, s0, s3
    0x01, 0x80, 0x05, 0x82,                                             # s_addc_u32 s5, s1, 0
    0x40, 0x00, 0x52, 0xDC, 0x02, 0x00, 0x04, 0x01,                     # global_load_b32 v1, v2, s[4:5] offset:64
    0x07, 0xFC, 0x89, 0xBF,                                             # s_waitcnt (vmcnt form)
    0x00, 0x00, 0x6A, 0xDC, 0x03, 0x01, 0x00, 0x00]) + END)             # global_store_b32 v3, v1, s[0:1]


def _engine(kernel: compute.Kernel, grid: int, block: int, size: int) -> tuple[Any, dict]:
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=2.0)
        try:
            try:
                out: Any = eng.run(kernel, (grid,), (block,), [bytes(size)]).outputs
            except OperationFailed as exc:
                out = exc.message
        finally:
            eng.close()
        return out, _state(o)


def test_a_racy_kernel_through_the_board_is_undone_and_run_one_workgroup_at_a_time(
        runs: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    out, state = _engine(RACE, 6, 64, 64)
    assert runs == [False]                      # tried, found reordered, undone
    assert struct.unpack_from("<I", out[0])[0] == 12     # 6 workgroups x 2 waves, one after another
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)
    assert _engine(RACE, 6, 64, 64) == (out, state)


@pytest.mark.parametrize("kernel", [STRIDE, STRIDE_LOAD], ids=["store", "load"])
def test_a_gpuvm_fault_inside_a_lockstep_run_is_the_fault_one_at_a_time_gives(kernel: compute.Kernel, runs: list[bool],
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    msg, state = _engine(kernel, 8, 32, 3 << 16)
    assert runs == [False]                      # the run met the fault: undone
    assert isinstance(msg, str) and "gpu vm fault" in msg, msg
    assert "gpu vm fault" in state["status"][0]["error"] and state["fault"]["GCVM_L2_PROTECTION_FAULT_STATUS"]
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)
    am_boot()                                   # (a reset and a fresh boot: the fault is latched)
    assert _engine(kernel, 8, 32, 3 << 16) == (msg, state)


def test_the_stride_kernel_runs_in_lockstep_where_it_stays_inside(runs: list[bool],
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The fault test's kernel is not undone for another reason: inside the buffer the run is kept."""
    out, state = _engine(STRIDE, 3, 32, 3 << 16)
    assert runs == [True]
    assert [struct.unpack_from("<I", out[0], at)[0] for g in range(3) for at in (4 * g, (g << 16) + 64)] == \
        [0, 0, 1, 1, 2, 2]
    monkeypatch.setattr(dispatch, "LOCKSTEP_WAVES", 1)
    assert _engine(STRIDE, 3, 32, 3 << 16) == (out, state)
