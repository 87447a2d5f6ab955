"""``bench copy --device cuda:N`` against a FAKE CUDA driver (tests/helpers/fakecuda.py) and a fake sysfs tree.

HONEST LABEL: no NVIDIA GPU or CUDA driver exists where these tests run, and this path has not run on a real
GPU (bench/h200_cuda.sh is prepared for that). The fake really moves the bytes through the host addresses it
is handed and models each copy's time, so the figures, the verification and the link limit are checked
exactly against that model.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from clihelp import run
from fakecuda import COPY_LATENCY_S, COPY_RATES, PCI_ADDRESS, CUresult, FakeGpu, install
from testpaths import ROOT

from tinyhw.bench.copy import PCIE_LANE_MBPS

KEYS = {"direction", "size", "repeat", "mbps_min", "mbps_median", "mbps_max", "verified", "link_limit_mbps",
        "fraction_of_limit", "modelled", "memory"}
GEN5_X16 = PCIE_LANE_MBPS[5] * 16


def fake_sysfs(root: Path, speed: str = "32.0 GT/s PCIe", width: str = "16") -> Path:
    dev = root / "bus" / "pci" / "devices" / PCI_ADDRESS
    dev.mkdir(parents=True)
    for name, value in (("current_link_speed", speed), ("current_link_width", width),
                        ("max_link_speed", "32.0 GT/s PCIe"), ("max_link_width", "16")):
        (dev / name).write_text(value + "\n")
    return root


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> FakeGpu:
    g = FakeGpu({})
    install(monkeypatch, g)
    monkeypatch.setenv("TINYHW_SYSFS", str(fake_sysfs(tmp_path / "sys")))
    return g


def _clean(g: FakeGpu) -> None:
    assert g.mem == {} and g.pinned == {} and g.streams == 0 and g.contexts == 0 and g.events == 0


def _rate(memory: str, direction: str, size: int) -> float:
    return size / (COPY_LATENCY_S + size / COPY_RATES[(memory, direction)]) / 1e6


def test_json_results_pinned_and_pageable_match_the_fake_model(gpu: FakeGpu) -> None:
    r = run("--device", "cuda:0", "--json", "bench", "copy", "--sizes", "4K,1M", "--repeat", "2")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["device"] == "cuda:0" and doc["gpu"] == "NVIDIA H200 (fake driver)" and doc["driver_version"] == "12.8"
    assert doc["link"] == {"address": PCI_ADDRESS, "current_gen": 5, "current_width": 16, "max_gen": 5,
                           "max_width": 16}
    rows = doc["results"]
    assert [(x["memory"], x["size"], x["direction"]) for x in rows] == [
        (m, s, d) for m in ("pinned", "pageable") for s in (4096, 1 << 20) for d in ("h2d", "d2h")]
    for x in rows:
        assert set(x) >= KEYS
        assert x["modelled"] is False and x["repeat"] == 2 and x["verified"] == 2 * x["size"]
        want = _rate(x["memory"], x["direction"], x["size"])
        assert x["mbps_min"] == x["mbps_median"] == x["mbps_max"] == pytest.approx(want, abs=1e-3)
        assert x["link_limit_mbps"] == pytest.approx(GEN5_X16, abs=0.1)
        assert x["fraction_of_limit"] == pytest.approx(want / GEN5_X16, rel=1e-3)
        assert x["path"].startswith("cuMemcpyHtoDAsync" if x["direction"] == "h2d" else "cuMemcpyDtoHAsync")
    # pinned is faster than pageable in the model, and the rows say which is which
    by = {(x["memory"], x["direction"], x["size"]): x["mbps_median"] for x in rows}
    assert by[("pinned", "h2d", 1 << 20)] > by[("pageable", "h2d", 1 << 20)]
    # each timed copy really went through memory of the kind reported
    timed = [c for c in gpu.copies if c[1] == 1 << 20]
    assert {c[2] for c in timed} == {"pinned", "pageable"}
    _clean(gpu)


def test_every_copy_is_verified_by_a_readback_or_an_upload(gpu: FakeGpu) -> None:
    r = run("--device", "cuda:0", "--json", "bench", "copy", "--sizes", "64K", "--repeat", "3", "--memory",
            "pinned")
    assert r.code == 0, r.err
    sized = [c[0] for c in gpu.copies if c[1] == 65536]
    # warm-up h2d+d2h, then per h2d copy one read back, per d2h copy one upload first
    assert sized == ["h2d", "d2h"] + ["h2d", "d2h"] * 3 + ["h2d", "d2h"] * 3
    rows = json.loads(r.out)["results"]
    assert [x["memory"] for x in rows] == ["pinned", "pinned"]


@pytest.mark.parametrize("direction, number, copies", [("h2d", 2, "h2d"), ("d2h", 4, "d2h")])
def test_a_corrupted_copy_fails_with_exit_1(gpu: FakeGpu, direction: str, number: int, copies: str) -> None:
    # copies in order: warm-up h2d#1 d2h#1; timed h2d#2 + read-back d2h#2, timed h2d#3 + read-back d2h#3;
    # upload h2d#4 + timed d2h#4, ... So h2d#2 and d2h#4 are the first timed copy of each direction.
    gpu.corrupt = (direction, number, 1000)
    r = run("--device", "cuda:0", "bench", "copy", "--sizes", "4K", "--repeat", "2", "--memory", "pinned")
    assert r.code == 1, r.err
    assert f"{direction} copy of 4096 bytes (pinned host memory) on cuda:0 came back wrong at offset 0x3e8" in r.err
    _clean(gpu)


def test_pageable_only_and_one_direction(gpu: FakeGpu) -> None:
    r = run("--device", "cuda:0", "--json", "bench", "copy", "--sizes", "16K", "--repeat", "1", "--memory",
            "pageable", "--direction", "d2h")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    assert [(x["memory"], x["direction"]) for x in rows] == [("pageable", "d2h")]
    assert rows[0]["mbps_median"] == pytest.approx(_rate("pageable", "d2h", 16384), abs=1e-3)
    assert {c[2] for c in gpu.copies} == {"pageable"}


def test_human_output_has_table_link_and_chart(gpu: FakeGpu) -> None:
    r = run("--device", "cuda:0", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 0, r.err
    assert "NVIDIA H200 (fake driver), cuda driver 12.8" in r.out
    assert "pinned" in r.out and "pageable" in r.out and "measured" in r.out
    assert f"pcie gen5 x16 at {PCI_ADDRESS}" in r.out and "median MB/s by size" in r.out


def test_a_downtrained_link_is_the_limit_and_is_noted(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    monkeypatch.setenv("TINYHW_SYSFS", str(fake_sysfs(tmp_path / "slow", speed="16.0 GT/s PCIe", width="8")))
    r = run("--device", "cuda:0", "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 0, r.err
    rows = json.loads(r.out)["results"]
    assert rows[0]["link_limit_mbps"] == pytest.approx(PCIE_LANE_MBPS[4] * 8, abs=0.1)
    assert "below its maximum" in r.err


def test_no_sysfs_entry_leaves_the_limit_unknown(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    monkeypatch.setenv("TINYHW_SYSFS", str(tmp_path / "empty"))
    r = run("--device", "cuda:0", "--json", "bench", "copy", "--sizes", "4K", "--repeat", "1")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["link"] is None and doc["link_source"] == f"no sysfs entry for {PCI_ADDRESS}"
    assert all(x["link_limit_mbps"] is None and x["fraction_of_limit"] is None and x["verified"] for x in
               doc["results"])


def test_no_cuda_bindings_is_exit_3_with_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cuda", None)
    r = run("--device", "cuda:0", "bench", "copy")
    assert r.code == 3
    assert "cuda-bindings is not installed" in r.err and "pip install -e '.[cuda]'" in r.err


def test_no_driver_is_exit_3_with_the_reason(monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeGpu({}, init_error=RuntimeError('Failure finding "libcuda.so"')))
    r = run("--device", "cuda:0", "bench", "copy")
    assert r.code == 3 and r.err.startswith("error: no cuda driver on this machine: RuntimeError")
    assert "libcuda.so" in r.err
    install(monkeypatch, FakeGpu({}, init_result=CUresult.CUDA_ERROR_NO_DEVICE))
    r = run("--device", "cuda:0", "bench", "copy")
    assert r.code == 3 and "cuInit failed: CUDA_ERROR_NO_DEVICE" in r.err


def test_missing_ordinal_is_exit_3(gpu: FakeGpu) -> None:
    r = run("--device", "cuda:2", "bench", "copy")
    assert r.code == 3 and "cuda:2 does not exist" in r.err
    _clean(gpu)


def test_a_driver_error_mid_bench_is_exit_1_and_frees_everything(gpu: FakeGpu) -> None:
    sys.modules["cuda.bindings.driver"].cuMemcpyDtoHAsync = lambda *a: (CUresult.CUDA_ERROR_LAUNCH_FAILED,)
    r = run("--device", "cuda:0", "bench", "copy", "--sizes", "4K")
    assert r.code == 1 and "cuMemcpyDtoHAsync failed: CUDA_ERROR_LAUNCH_FAILED" in r.err
    _clean(gpu)


@pytest.mark.parametrize("args, message", [
    (["--bar", "0"], "--bar and --offset apply to bar copies"),
    (["--offset", "0x1000"], "--bar and --offset apply to bar copies"),
    (["--sizes", "6"], "multiple of 4"),
])
def test_refused_before_the_gpu_is_opened(gpu: FakeGpu, args: list[str], message: str) -> None:
    r = run("--device", "cuda:0", "bench", "copy", *args)
    assert r.code == 2 and message in r.err
    assert gpu.contexts == 0 and gpu.copies == []


def test_memory_option_is_for_cuda_only() -> None:
    r = run("--device", "mock:navi31", "bench", "copy", "--memory", "pinned")
    assert r.code == 2 and "--memory applies to cuda:N devices only" in r.err


def test_tinyhw_device_environment_selects_cuda(gpu: FakeGpu, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHW_DEVICE", "cuda:0")
    r = run("--json", "bench", "copy", "--sizes", "4K", "--repeat", "1", "--memory", "pinned")
    assert r.code == 0, r.err
    assert json.loads(r.out)["device"] == "cuda:0"


def test_register_commands_still_refuse_cuda() -> None:
    r = run("--device", "cuda:0", "reg", "read", "mmRLC_SAFE_MODE")
    assert r.code == 2 and "cuda: devices serve only" in r.err


def test_sysfs_link_formats(tmp_path: Path) -> None:
    from tinyhw.cuda.pcilink import read_pci_link

    dev = tmp_path / "bus" / "pci" / "devices" / "0000:03:00.0"
    dev.mkdir(parents=True)
    for name, value in (("current_link_speed", "8 GT/s"), ("current_link_width", "4"),
                        ("max_link_speed", "Unknown"), ("max_link_width", "0")):
        (dev / name).write_text(value + "\n")
    link = read_pci_link(str(tmp_path), "0000:03:00.0")
    assert (link.current_gen, link.current_width, link.max_gen, link.max_width) == (3, 4, None, None)
    assert link.describe() == "pcie gen3 x4 at 0000:03:00.0 (max unknown)"
    assert read_pci_link(str(tmp_path), "0000:04:00.0") is None


def test_the_h200_script_is_valid_bash_and_runs_the_bench() -> None:
    import subprocess

    script = ROOT / "bench" / "h200_cuda.sh"
    assert subprocess.run(["bash", "-n", str(script)], check=False).returncode == 0
    text = script.read_text()
    assert "NOT RUN YET" in text and "--sizes 256M" in text and "--memory pinned" in text
    assert "kernels run bandwidth --device cuda:0" in text


def test_features_are_handed_the_gpu_and_never_import_the_cuda_package() -> None:
    """tinyhw.cuda is layer 2 (transport-like): only tinyhw.connect builds it, kernels and bench are handed it."""
    import ast

    import tinyhw

    root = Path(tinyhw.__file__).parent
    for feature in ("bench", "kernels"):
        for path in (root / feature).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                assert not any(n == "tinyhw.cuda" or n.startswith("tinyhw.cuda.") for n in names), path


def test_open_cuda_from_python(gpu: FakeGpu) -> None:
    from tinyhw.bench import cuda_copy_bench
    from tinyhw.connect import open_cuda
    from tinyhw.errors import Refused

    with open_cuda("cuda:0") as dev:
        results, summary = cuda_copy_bench(dev, [8192], ("h2d",), 1, ("pinned",))
        assert gpu.contexts == 1 and summary["link"]["current_gen"] == 5
    assert [r.as_dict()["verified"] for r in results] == [8192]
    _clean(gpu)
    for bad, message in (("mock:navi31", "is not a cuda:N device"), ("cuda:0,fast", "take no options")):
        with pytest.raises(Refused, match=message):
            open_cuda(bad)
    assert gpu.contexts == 0


def test_a_copy_path_is_refused_on_cuda(gpu: FakeGpu) -> None:
    """cuda:N copies through the cuda driver: a --path it cannot honour is refused, not ignored (auto is fine)."""
    r = run("--device", "cuda:0", "bench", "copy", "--path", "sram", "--sizes", "4K")
    assert r.code == 2 and "--path sram" in r.err and "cuda driver" in r.err
    _clean(gpu)
    assert run("--device", "cuda:0", "bench", "copy", "--path", "auto", "--sizes", "4K", "--repeat", "1").code == 0
