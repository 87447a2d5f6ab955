"""`tinyhw --device mock:navi31 kernels run NAME` end to end (issue 23 items 1, 2, 4): `am boot`, then the probe's
committed gfx1100 binary on a compute queue the driver (tinyhw/boot/amd/compute.py) creates through registers, run by
the emulated command processor (tinyhw/mocks/amd/cp.py) and shader core; strict boards. Sabotages: a CP that skips
RELEASE_MEM (the driver times out naming the CP status), a wrong kernarg pointer (the probe's check fails)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import pytest
from amfake import FW_DIR
from clihelp import run
from kernelshelp import am_boot, json_doc

import tinyhw
from tinyhw.boot.amd import compute
from tinyhw.commands import Handler
from tinyhw.errors import DeviceTimeout, OperationFailed, Refused, StrictEmulationError
from tinyhw.formats.amdgpu_code import KernelDescriptor
from tinyhw.kernels.manifest import prebuilt_dir
from tinyhw.mocks.amd import cp as mock_cp

PATTERN = next((prebuilt_dir() / "gfx1100").glob("pattern.*.elf"))


@pytest.fixture
def booted() -> None:
    am_boot()


_doc = json_doc


@pytest.mark.parametrize("name,n", [("pattern", 1024), ("bandwidth", 1024), ("fma", 1024), ("atomic", 2048)])
def test_every_probe_runs_and_passes_on_mock_navi31(booted: None, name: str, n: int) -> None:
    doc = _doc("--device", "mock:navi31", "kernels", "run", name, "--n", str(n))
    assert doc["check"]["ok"], doc["check"]
    assert doc["n"] == n and doc["figure_kind"] == "modelled" and doc["best_s"] > 0
    assert doc["grid"][0] == n // (256 if name == "atomic" else 128)


def test_probe_runs_on_mock_navi31_usb_and_human_output_says_modelled(booted: None) -> None:
    r = run("--device", "mock:navi31-usb", "kernels", "run", "fma", "--n", "512")
    assert r.code == 0, r.err
    assert "check: pass" in r.out and "modelled:" in r.out and "TFLOP/s" in r.out


def test_refused_when_not_booted() -> None:
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "1024")
    assert r.code == 2 and "is not a gpu tinyhw booted" in r.err and "am boot" in r.err


@pytest.mark.parametrize("args,says", [
    (["--n", "100"], "cannot take --n 100"),
    (["--n", str(1 << 22)], "cannot take --n"),
    (["--repeats", "0"], "--repeats 0"),
    (["--timeout", "0"], "--timeout 0"),
    (["--device", "cpu"], "disagree"),
])
def test_bad_input_is_refused_before_the_board_is_opened(args: list[str], says: str) -> None:
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", *args)
    assert r.code == 2 and says in r.err, r.err


def test_a_probe_without_a_binary_for_this_gpu_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "gfx1100"
    shutil.copytree(prebuilt_dir() / "gfx1100", folder)
    man = json.loads((folder / "manifest.json").read_text())
    man["probes"] = [p for p in man["probes"] if p["name"] != "fma"]
    (folder / "manifest.json").write_text(json.dumps(man))
    r = run("--device", "mock:navi31", "kernels", "run", "fma", "--build-dir", str(folder))
    assert r.code == 2 and "have no probe 'fma'" in r.err
    r = run("--device", "mock:navi31", "kernels", "run", "fma", "--build-dir", str(prebuilt_dir() / "gfx1200"))
    assert r.code == 2 and "holds gfx1200 binaries" in r.err


def test_unknown_gpu_is_refused() -> None:
    r = run("--device", "mock:ad102", "kernels", "run", "pattern")
    assert r.code == 2 and "an AMD board only" in r.err


# -- the engine from Python ------------------------------------------------------------------------------------
def _engine_run(kernarg=None, timeout: float = 0.5):
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=timeout)
        if kernarg is not None:
            eng.kernarg = kernarg
        try:
            k = compute.load_code_object(PATTERN.read_bytes())
            return eng.run(k, (4,), (32,), [bytes(4 * 512)])
        finally:
            eng.close()


def _pattern_ok(data: bytes) -> bool:
    words = memoryview(data).cast("I")
    return all(words[i] == (i * 0x9E3779B1 + 0x1234567) & 0xFFFFFFFF for i in range(len(words)))


def test_engine_dispatches_and_reads_back(booted: None) -> None:
    res = _engine_run()
    assert _pattern_ok(res.outputs[0]) and res.grid == (4, 1, 1) and res.seconds > 0


def test_sabotage_wrong_kernarg_pointer_fails_the_check(booted: None) -> None:
    real = compute.ComputeEngine.kernarg

    def shifted(by: int):  # every pointer ``by`` bytes off: the kernel writes beside the buffer
        return lambda kernel, pointers, *dims: real(None, kernel, [p + by for p in pointers], *dims)  # type: ignore

    res = _engine_run(kernarg=shifted(-256))  # still inside the buffer's first page: only the check sees it
    assert not _pattern_ok(res.outputs[0])
    with pytest.raises(OperationFailed, match=r"wrote at 0x[0-9a-f]+000 .* past the end of buffer 0 .* 2048 bytes"):
        _engine_run(kernarg=shifted(256))  # past its end: the guard page faults
    am_boot()  # (a reset and a fresh boot: the fault is latched)
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "512")
    assert r.code == 0  # and the unsabotaged tool passes on the same board


def test_sabotage_cp_skipping_release_mem_times_out_with_decoded_status(booted: None,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    release_mem = mock_cp.PM4["PACKET3_RELEASE_MEM"]  # the CP's packet table answers it with nothing
    monkeypatch.setitem(mock_cp.PACKETS._entries, release_mem, Handler(lambda self, q, body: None))
    with pytest.raises(DeviceTimeout) as e:
        _engine_run(timeout=0.25)
    msg = e.value.message
    assert msg.startswith("the dispatch did not complete in 0.25 s; CP status: queue me1 pipe0 queue0 "
                          "CP_HQD_ACTIVE.ACTIVE=1, CP_HQD_PQ_RPTR 0x"), msg
    assert "every packet consumed" in msg and "no gpu vm fault" in msg and "GRBM_STATUS 0x00000000 (idle)" in msg
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "512", "--timeout", "0.25")
    assert r.code == 1 and "the dispatch did not complete in 0.25 s; CP status:" in r.err


def test_engine_refusals(booted: None) -> None:
    with pytest.raises(Refused, match="built for gfx1200"):
        compute.load_code_object(next((prebuilt_dir() / "gfx1200").glob("pattern.*.elf")).read_bytes())
    with pytest.raises(Refused, match="is not in the code object"):
        compute.load_code_object(PATTERN.read_bytes(), "nope")
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport)
        k = compute.load_code_object(PATTERN.read_bytes())
        with pytest.raises(Refused, match="a workgroup holds at most 1024"):
            eng.run(k, (1,), (64, 32), [bytes(64)])
        with pytest.raises(Refused, match="each dimension"):
            eng.run(k, (0,), (32,), [bytes(64)])
        eng.close()


def test_unknown_pm4_packet_is_an_error_naming_the_opcode_in_strict_mode(booted: None) -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        eng = compute.open_compute(o.transport, timeout=0.1)
        with pytest.raises(StrictEmulationError, match=r"opcode 0x37 \(WRITE_DATA"):
            eng.submit([0xC0003700 | (3 << 16), 0, 0, 0, 0])  # WRITE_DATA, not modelled
    with tinyhw.open("mock:navi31,strict=off") as o:  # not strict: the queue stops with the opcode named
        eng = compute.open_compute(o.transport, timeout=0.1)
        eng.submit([0xC0003700 | (3 << 16), 0, 0, 0, 0])
        board = o.transport.board
        assert "opcode 0x37 (WRITE_DATA" in board.cp.status()[0]["error"]


# -- faults (issue 23 item 8) ----------------------------------------------------------------------------------
SPIN = compute.Kernel("spin", KernelDescriptor(0, 0, 0, 0, 0x40AF0081, 0, 0, 0x400),
                      struct.pack("<II", 0xBFA0FFFF, 0xBFB00000), 0)  # s_branch -1 (itself); s_endpgm


def test_a_shader_that_never_ends_hits_the_watchdog_and_the_queue_recovers(booted: None) -> None:
    with tinyhw.open("mock:navi31,strict") as o:
        o.transport.board.cp.watchdog = 2000
        eng = compute.open_compute(o.transport, timeout=0.2)
        with pytest.raises(DeviceTimeout) as e:
            eng.run(SPIN, (1,), (32,), [])
        msg = e.value.message
        assert msg.startswith("the dispatch did not complete in 0.2 s; CP status:"), msg
        # the hung queue (CP_BUSY, GUI_ACTIVE) and its waves, still resident (SPI_BUSY)
        assert "GRBM_STATUS 0xa0400000 (SPI_BUSY CP_BUSY GUI_ACTIVE)" in msg, msg
        assert "watchdog" in o.transport.board.cp.status()[0]["error"]
        with pytest.raises(DeviceTimeout, match="did not dequeue in 1 s .CP_HQD_DEQUEUE_REQUEST DRAIN_PIPE"):
            eng.close()  # a drain waits for waves that never end
        assert o.transport.board.cp.status()[0]["hung"]
        done = compute.teardown_compute(eng.gpu)  # what am reset does first: reset the waves
        assert done["dequeued"] and not o.transport.board.cp.status()[0]["hung"]
        eng.create()
        res = eng.run(compute.load_code_object(PATTERN.read_bytes()), (2,), (32,), [bytes(1024)])
        assert _pattern_ok(res.outputs[0])
        eng.close()


def test_an_illegal_memory_access_is_a_decoded_gpuvm_fault_and_am_reset_recovers(booted: None) -> None:
    bad = compute.VA_BASE + (900 << 20)  # no page table maps it
    with pytest.raises(OperationFailed) as e:
        _engine_run(kernarg=lambda k, p, *d: compute.ComputeEngine.kernarg(None, k, [bad], *d))  # type: ignore
    msg = e.value.message
    assert msg.startswith("the dispatch stopped on a gpu vm fault; CP status:"), msg
    assert f"gpu vm fault at page 0x{bad & ~0xFFF:x} (vmid 0, write;" in msg, msg
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "256")
    assert r.code == 2 and "a gpu vm fault is pending" in r.err and "am reset" in r.err
    assert run("--device", "mock:navi31", "am", "reset", "--yes").code == 0
    assert run("--device", "mock:navi31", "am", "boot", "--yes", "--firmware-dir", str(FW_DIR)).code == 0
    r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "256")
    assert r.code == 0 and "check: pass" in r.out, r.err


# -- kernels exec (issue 23 item 3) ----------------------------------------------------------------------------
BANDWIDTH = next((prebuilt_dir() / "gfx1100").glob("bandwidth.*.elf"))


def test_exec_uploads_a_file_runs_and_writes_the_buffer_back(booted: None, tmp_path: Path) -> None:
    words = struct.pack("<1024I", *range(7, 7 + 1024 * 3, 3))
    (tmp_path / "in.bin").write_bytes(words)
    r = run("--device", "mock:navi31", "kernels", "exec", str(BANDWIDTH), "--grid", "2", "--block", "32",
            "--buffer", "zeros:4096", "--buffer", str(tmp_path / "in.bin"), "--out", f"0:{tmp_path / 'o.bin'}",
            "--out", f"1:{tmp_path / 'i.bin'}", "--timeout", "5", "--json")  # the interface of issue 23 item 3
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    got = struct.unpack("<1024I", (tmp_path / "o.bin").read_bytes())
    want = struct.unpack("<1024I", words)
    assert all(g == w ^ 0x5A5A5A5A for g, w in zip(got[:256], want[:256], strict=True))  # 2 groups x 128 words
    assert got[256:] == (0,) * 768  # the rest of the zero buffer untouched
    assert (tmp_path / "i.bin").read_bytes() == words
    assert doc["kernel"].startswith("E_") and doc["grid"] == [2, 1, 1] and doc["block"] == [32, 1, 1]
    assert doc["time_kind"] == "modelled" and doc["dispatch_s"] > 0 and len(doc["outputs"]) == 2


@pytest.mark.parametrize("args,says", [
    (["--kernel", "nope"], "kernel 'nope' is not in the code object"),
    (["--buffer", "zeros:64"], "takes 2 buffer argument(s) (its metadata), 3 --buffer given"),
    (["--out", "5:x.bin"], "there are 2 buffers"),
    (["--out", "x.bin"], "INDEX:FILE"),
    (["--grid", "0"], "--grid 0"),
    (["--block", "2048"], "each dimension must be 1 .. 1024"),
    (["--block", "64,32"], "a workgroup holds at most 1024"),
    (["--timeout", "-1"], "--timeout -1"),
])
def test_exec_refuses_bad_input_before_the_device(tmp_path: Path, args: list[str], says: str) -> None:
    base = {"--grid": "1", "--block": "32"}
    rest = [a for k, v in base.items() if k not in args for a in (k, v)]
    r = run("--device", "mock:navi31", "kernels", "exec", str(BANDWIDTH), *rest, "--buffer", "zeros:512",
            "--buffer", "zeros:512", *args)
    assert r.code == 2 and says in r.err, r.err
    assert not (tmp_path / "x.bin").exists()


def test_exec_refuses_another_gpu_no_device_and_not_booted(tmp_path: Path) -> None:
    other = next((prebuilt_dir() / "gfx1200").glob("pattern.*.elf"))
    r = run("--device", "mock:navi31", "kernels", "exec", str(other), "--grid", "1", "--block", "32",
            "--buffer", "zeros:512")
    assert r.code == 2 and "built for gfx1200" in r.err
    r = run("kernels", "exec", str(PATTERN), "--grid", "1", "--block", "32", "--buffer", "zeros:512")
    assert r.code == 2 and "runs on an AMD board" in r.err
    r = run("--device", "mock:navi31", "kernels", "exec", str(PATTERN), "--grid", "1", "--block", "32",
            "--buffer", "zeros:512", "--out", f"0:{tmp_path / 'o.bin'}")
    assert r.code == 2 and "is not a gpu tinyhw booted" in r.err and not (tmp_path / "o.bin").exists()


def test_the_library_one_call(booted: None) -> None:
    from tinyhw.kernels import run_amd_probe

    with tinyhw.open("mock:navi31,strict") as o:
        doc = run_amd_probe("atomic", o.transport, n=512)
    assert doc["check"]["ok"] and doc["n"] == 512 and doc["figure_kind"] == "modelled"


def test_a_disconnect_during_the_run_is_one_clear_error_and_the_next_run_passes(booted: None) -> None:
    r = run("--device", "mock:navi31", "--stats", "kernels", "run", "pattern", "--n", "512")
    assert r.code == 0, r.err
    stats = json.loads(r.err.strip().splitlines()[-1])
    total = stats["reg_reads"] + stats["reg_writes"]
    for at in (total - 40, total - 8):  # around the doorbell / fence polling, and in the read back
        r = run("--device", f"mock:navi31,faults=disconnect@{at}", "kernels", "run", "pattern", "--n", "512")
        errors = [ln for ln in r.err.splitlines() if ln.startswith("error:")]
        assert r.code == 1 and len(errors) == 1 and "went away" in errors[0], r.err
        r = run("--device", "mock:navi31", "kernels", "run", "pattern", "--n", "512")
        assert r.code == 0 and "check: pass" in r.out, r.err
