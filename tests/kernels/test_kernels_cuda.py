"""``kernels run --device cuda:N`` against a FAKE CUDA driver (tests/helpers/fakecuda.py).

HONEST LABEL: no NVIDIA GPU or CUDA driver exists where these tests run, and this path has never run on a
real GPU. The fake checks what it can (NUL-terminated sm_90 PTX, the void** parameter array, the launch
shape covering every element, frees and releases) and computes each probe's formula itself.
"""

from __future__ import annotations

import array
import json
import struct
import sys

import pytest
from clihelp import run
from fakecuda import CUresult, FakeGpu, Kernel, install

from tinyhw.kernels.manifest import load_manifest, prebuilt_dir

BW_MODEL = 4.0e12  # bytes/s the fake pretends the bandwidth kernel reaches
FMA_MODEL = 50e12  # FLOP/s for the fma kernel


def _pattern(gpu: FakeGpu, ptrs: list[int], n: int) -> None:
    out = gpu.buf(ptrs[0])
    out[:4 * n] = array.array("I", ((i * 0x9E3779B1 + 0x01234567) % 2**32 for i in range(n))).tobytes()


XOR_BYTES = bytes(b ^ 0x5A for b in range(256))  # out = in ^ 0x5a5a5a5a is a per-byte xor with 0x5a


def _bandwidth(gpu: FakeGpu, ptrs: list[int], n: int) -> None:
    out, inp = gpu.buf(ptrs[0]), gpu.buf(ptrs[1])
    out[:4 * n] = bytes(inp[:4 * n]).translate(XOR_BYTES)


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _fma(gpu: FakeGpu, ptrs: list[int], n: int) -> None:
    out = gpu.buf(ptrs[0])
    table = []
    for seed in range(256):  # element i starts from i mod 256
        x = float(seed)
        for _ in range(64):
            x = _f32(x * (1 - 2 ** -10) + 0.5)  # fused: one rounding per step, as the GPU's fma.rn does
        table.append(x)
    block = array.array("f", table).tobytes()
    out[:4 * n] = block * (n // 256)


def kernels() -> dict[str, Kernel]:
    """Entry name -> formula, from the committed manifest's kernel names (data, not tinyhw code)."""
    formulas = {"pattern": (4, _pattern, lambda n: 4 * n / 3e12),
                "bandwidth": (4, _bandwidth, lambda n: 8 * n / BW_MODEL),
                "fma": (4, _fma, lambda n: 2 * 64 * n / FMA_MODEL)}
    out = {}
    for p in load_manifest(prebuilt_dir() / "sm_90")["probes"]:
        per, fn, secs = formulas[p["name"]]
        for k in p["kernels"]:
            out[k["name"]] = Kernel(per, fn, secs)
    return out


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> FakeGpu:
    g = FakeGpu(kernels())
    install(monkeypatch, g)
    return g


def _clean(g: FakeGpu) -> None:
    assert g.mem == {} and g.modules == 0 and g.contexts == 0 and g.events == 0


def test_bandwidth_on_fake_gpu_reports_modelled_figure_and_peak(gpu: FakeGpu) -> None:
    r = run("--json", "kernels", "run", "bandwidth", "--device", "cuda:0", "--repeats", "2")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["check"]["ok"] and doc["device"] == "cuda:0" and doc["gpu"] == "NVIDIA H200 (fake driver)"
    assert doc["cc"] == "9.0" and doc["driver_version"] == 12080 and doc["n"] == 1 << 25
    assert doc["figure"] == pytest.approx(BW_MODEL / 1e9, rel=1e-6)
    assert doc["peak"] == pytest.approx(2 * 2.619e9 * 6144 / 8 / 1e9, abs=0.01)  # 4022.78 GB/s from attributes
    assert len(doc["seconds"]) == 2 and len(gpu.launches) == 3  # one checked run, two timed
    assert gpu.launches[0][1:] == ((262144, 1, 1), (32, 1, 1))
    assert all(".target sm_90" in p for p in gpu.ptx_seen)
    _clean(gpu)


def test_fma_and_pattern_on_fake_gpu(gpu: FakeGpu) -> None:
    r = run("--json", "kernels", "run", "fma", "--device", "cuda:0", "-r", "1")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["check"]["ok"] and doc["figure"] == pytest.approx(FMA_MODEL / 1e12, rel=1e-6)
    assert doc["peak"] == pytest.approx(132 * 128 * 2 * 1.98e9 / 1e12, abs=0.01)  # 66.91 TFLOP/s
    r = run("kernels", "run", "pattern", "-d", "cuda:0", "-r", "1")
    assert r.code == 0, r.err
    assert "check: pass" in r.out and "NVIDIA H200 (fake driver), cc 9.0" in r.out
    _clean(gpu)


def test_global_device_option_selects_the_gpu(gpu: FakeGpu) -> None:
    r = run("--device", "cuda:0", "kernels", "run", "pattern", "-r", "1")
    assert r.code == 0, r.err
    assert "pattern on cuda:0" in r.out


def test_wrong_result_fails_with_exit_1(gpu: FakeGpu) -> None:
    real = gpu.kernels
    bad = dict(real)
    for name, k in real.items():
        def broken(g: FakeGpu, ptrs: list[int], n: int, k: Kernel = k) -> None:
            k.fn(g, ptrs, n)
            g.buf(ptrs[0])[4 * 1000] ^= 0xFF
        bad[name] = Kernel(k.per_thread, broken, k.seconds)
    gpu.kernels = bad
    r = run("kernels", "run", "pattern", "--device", "cuda:0", "-r", "1")
    assert r.code == 1
    assert "check: FAIL" in r.out and "word 1000" in r.out
    _clean(gpu)


def test_wrong_launch_shape_is_caught_by_the_check(gpu: FakeGpu) -> None:
    for k in gpu.kernels.values():
        k.per_thread //= 2  # the GPU now covers half the elements with the manifest's grid
    r = run("--json", "kernels", "run", "pattern", "--device", "cuda:0", "-r", "1")
    assert r.code == 1 and json.loads(r.out)["check"]["ok"] is False


def test_no_cuda_bindings_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda", None)
    r = run("kernels", "run", "bandwidth", "--device", "cuda:0")
    assert r.code == 3
    assert "cuda-bindings is not installed" in r.err and "pip install -e '.[cuda]'" in r.err


def test_no_driver_is_exit_3(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGpu({}, init_error=RuntimeError("Failure finding \"libcuda.so\"")))
    r = run("kernels", "run", "fma", "--device", "cuda:0")
    assert r.code == 3 and r.err.startswith("error: no cuda driver on this machine: RuntimeError")
    install(monkeypatch, FakeGpu({}, init_result=CUresult.CUDA_ERROR_NO_DEVICE))
    r = run("kernels", "run", "fma", "--device", "cuda:0")
    assert r.code == 3 and "cuInit failed: CUDA_ERROR_NO_DEVICE" in r.err


def test_missing_ordinal_is_exit_3(gpu: FakeGpu) -> None:
    r = run("kernels", "run", "fma", "--device", "cuda:3")
    assert r.code == 3 and "cuda:3 does not exist: the driver sees 1 gpu(s)" in r.err
    _clean(gpu)


def test_launch_error_still_frees_everything(gpu: FakeGpu) -> None:
    gpu.cuLaunchKernel = lambda *a: (CUresult.CUDA_ERROR_LAUNCH_FAILED,)
    install_again = gpu  # the driver module holds bound methods: reinstall with the broken launch
    sys.modules["cuda.bindings.driver"].cuLaunchKernel = install_again.cuLaunchKernel
    r = run("kernels", "run", "pattern", "--device", "cuda:0")
    assert r.code == 1 and "cuLaunchKernel failed: CUDA_ERROR_LAUNCH_FAILED" in r.err
    _clean(gpu)


@pytest.mark.parametrize("args,message", [
    (["--device", "mock:ad102"], "it runs on cpu, cuda:N or an AMD board only"),
    (["--device", "cuda:x"], "cuda takes a device ordinal"),
    (["--device", "cuda:0,fast"], "cuda devices take no options"),
    (["--device", "cuda:0", "--n", "100"], "--n applies to cpu runs only"),
    (["--device", "cuda:0", "--repeats", "0"], "--repeats must be at least 1"),
])
def test_refused_before_touching_anything(gpu: FakeGpu, args: list[str], message: str) -> None:
    r = run("kernels", "run", "bandwidth", *args)
    assert r.code == 2 and message in r.err
    assert gpu.contexts == 0 and gpu.launches == []


def test_atomic_probe_has_no_sm90_binary(gpu: FakeGpu) -> None:
    r = run("kernels", "run", "atomic", "--device", "cuda:0")
    assert r.code == 2 and "the sm_90 binaries have no probe 'atomic'" in r.err and "ptx renderer" in r.err
    assert gpu.contexts == 0


def test_register_commands_refuse_cuda_devices() -> None:
    r = run("--device", "cuda:0", "probe")
    assert r.code == 2
    assert "cuda: devices serve only `bench copy` and `kernels run`" in r.err


def test_cuda_device_strings() -> None:
    from tinyhw.errors import BadDeviceString
    from tinyhw.transport.devstr import parse_device

    spec = parse_device("cuda:01")
    assert (spec.kind, spec.target, str(spec)) == ("cuda", "1", "cuda:1")
    for bad in ("cuda", "cuda:", "cuda:-1", "cuda:gpu0"):
        with pytest.raises(BadDeviceString, match="cuda takes a device ordinal"):
            parse_device(bad)


def test_missing_clock_attribute_gives_no_peak(gpu: FakeGpu) -> None:
    real = gpu.cuDeviceGetAttribute
    sys.modules["cuda.bindings.driver"].cuDeviceGetAttribute = lambda a, d: (
        (CUresult.CUDA_ERROR_INVALID_VALUE, None) if int(a) == 36 else real(a, d))
    r = run("--json", "kernels", "run", "pattern", "--device", "cuda:0", "-r", "1")
    assert r.code == 0, r.err
    r = run("--json", "kernels", "run", "bandwidth", "--device", "cuda:0", "-r", "1")
    doc = json.loads(r.out)
    assert r.code == 0 and doc["peak"] is None and doc["figure"] > 0
