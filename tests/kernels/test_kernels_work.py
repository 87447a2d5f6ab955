"""The work a FLOP/s probe counts is the work its kernel does: the formula against the FMA instructions of the
committed binaries, counted three ways (a regex over the PTX; tinyhw's own RDNA decoder; llvm-objdump-19 and
tinygrad's RDNA disassembler where installed), and against tinygrad's own op count of the cpu kernel.

Issue 20 item 2: the fma probe used to broadcast a 64-word input; tinygrad then computed each of the 4 equal
elements a thread held once (256 FMAs per thread), while the formula counted 2 x 64 FLOPs for every element,
so `kernels run fma` reported 4x the real rate. Setting the formula back to that (x4) fails these tests.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from kernelshelp import need_clang, need_tinygrad

from tinyhw.errors import OperationFailed
from tinyhw.formats.amdisa import count_f32_fma, text_section
from tinyhw.kernels.manifest import GPU_TARGETS, load_manifest, prebuilt_dir
from tinyhw.kernels.probes import PROBES

FAMILY = {"gfx1100": "gfx11", "gfx1200": "gfx12"}
OBJDUMP_FMA = re.compile(r"^\s*(v_fma_f32|v_fmac_f32(?:_e32|_e64)?|v_fmamk_f32|v_fmaak_f32)\b")


def metric_kernels(target: str):
    man = load_manifest(prebuilt_dir() / target)
    for p in man["probes"]:
        if PROBES[p["name"]].metric == "TFLOP/s":
            for k in p["kernels"]:
                yield p, k, (prebuilt_dir() / target / k["file"]).read_bytes()


def threads(k: dict) -> int:
    return math.prod(k["grid"]) * math.prod(k["block"])


def tinyhw_count(target: str, binary: bytes) -> int:
    if target == "sm_90":
        text = binary.decode()
        assert not re.search(r"^\s*(@\S+\s+)?bra\b", text, re.M), "a loop: a static count is not the work"
        return len(re.findall(r"^\s*fma\.rn\.f32\s", text, re.M))
    found = text_section(binary)
    assert found is not None
    return count_f32_fma(found[1], FAMILY[target])


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_formula_equals_the_fma_instructions_of_the_committed_binaries(target: str) -> None:
    seen = 0
    for p, k, binary in metric_kernels(target):
        probe = PROBES[p["name"]]
        fmas = tinyhw_count(target, binary)
        assert fmas > 0
        executed = 2 * fmas * threads(k)
        assert executed == probe.work(p["n"]), (
            f"{target} {k['file']}: {fmas} fma per thread x {threads(k)} threads = {executed} flops, "
            f"the formula counts {probe.work(p['n']):.0f}")
        assert executed == p["work_per_run"] and k["f32_fma_per_thread"] == fmas
        seen += 1
    assert seen == 1  # the fma probe


def test_fma_probe_is_64_fmas_per_element_on_every_gpu_target() -> None:
    for target in GPU_TARGETS:
        ((p, k, binary),) = metric_kernels(target)
        assert tinyhw_count(target, binary) * threads(k) == 64 * p["n"]


@pytest.mark.parametrize("target", ["gfx1100", "gfx1200"])
def test_llvm_objdump_counts_the_same_fmas(target: str, tmp_path: Path) -> None:
    """An independent decoder: LLVM's own disassembler (Debian llvm-19)."""
    tool = shutil.which("llvm-objdump-19")
    if tool is None:
        if os.environ.get("TINYHW_REQUIRE_COMPILE") == "1":  # CI installs it (tests/setup-system.sh)
            pytest.fail("llvm-objdump-19 is not installed (apt-get install llvm-19)")
        pytest.skip("llvm-objdump-19 is not installed (apt-get install llvm-19)")
    for _p, _k, binary in metric_kernels(target):
        path = tmp_path / "kernel.elf"
        path.write_bytes(binary)
        res = subprocess.run([tool, "-d", f"--mcpu={target}", str(path)], capture_output=True, timeout=60,
                             check=True)
        lines = res.stdout.decode().splitlines()
        assert sum(1 for line in lines if OBJDUMP_FMA.match(line)) == tinyhw_count(target, binary)
        # VOPD pairs would be counted per half by tinyhw; objdump prints them as "v_dual_fmac_f32 ... ::"
        assert not any("v_dual_fma" in line for line in lines)


@pytest.mark.parametrize("target", ["gfx1100", "gfx1200"])
def test_tinygrad_disassembler_counts_the_same_fmas(target: str) -> None:
    need_tinygrad()
    from tinyhw.kernels import seam

    for _p, _k, binary in metric_kernels(target):
        code = text_section(binary)[1]
        lines = [text for _off, text in seam.disassemble_amd(code, seam.TARGETS[target][3])]
        assert sum(1 for t in lines if OBJDUMP_FMA.match(t)) == tinyhw_count(target, binary)


# single-precision FMA forms assembled with llvm-mc-19 -mcpu=gfx1100 and -mcpu=gfx1200 -show-encoding
# (the same bytes on both)
ENCODED = [
    (bytes([0x00, 0x00, 0x13, 0xD6, 0x01, 0x05, 0x0E, 0x04]), 1),  # v_fma_f32 v0, v1, v2, v3
    (bytes([0x01, 0x05, 0x00, 0x56]), 1),  # v_fmac_f32_e32 v0, v1, v2
    (bytes([0x00, 0x00, 0x2B, 0xD5, 0x01, 0x05, 0x02, 0x00]), 1),  # v_fmac_f32_e64 v0, v1, v2
    (bytes([0x01, 0x05, 0x00, 0x58, 0x00, 0x00, 0x00, 0x3F]), 1),  # v_fmamk_f32 v0, v1, 0x3f000000, v2
    (bytes([0x01, 0x05, 0x00, 0x5A, 0x00, 0x00, 0x00, 0x3F]), 1),  # v_fmaak_f32 v0, v1, v2, 0x3f000000
    (bytes([0x01, 0x05, 0x00, 0xC8, 0x04, 0x0B, 0x02, 0x00]), 2),  # v_dual_fmac_f32 :: v_dual_fmac_f32
    (bytes([0x01, 0x05, 0x44, 0xC8, 0x04, 0x0B, 0x02, 0x00, 0x00, 0x00, 0x00, 0x3F]), 2),  # fmaak :: fmamk
    (bytes([0x00, 0x00, 0x20, 0xCC, 0x01, 0x05, 0x0E, 0x04]), 0),  # v_fma_mix_f32 (mixed precision: not f32)
    (bytes([0x00, 0x00, 0x09, 0xD6, 0x01, 0x05, 0x0E, 0x04]), 0),  # v_fma_dx9_zero_f32 (not emitted for fma)
    (bytes([0x01, 0x05, 0x00, 0x10]), 0),  # v_mul_f32_e32 v0, v1, v2 (VOP2 8)
]


@pytest.mark.parametrize("fam", ["gfx11", "gfx12"])
def test_count_f32_fma_on_assembled_words(fam: str) -> None:
    for code, want in ENCODED:
        assert count_f32_fma(code, fam) == want, code.hex()
    assert count_f32_fma(b"".join(c for c, _ in ENCODED), fam) == sum(w for _, w in ENCODED)
    with pytest.raises(ValueError):
        count_f32_fma(ENCODED[0][0], "gfx9")


@pytest.mark.parametrize("n", [256, 4096, 786432, 1 << 20])
def test_cpu_kernel_does_the_work_the_formula_counts(n: int) -> None:
    """tinygrad's own count of the compiled cpu kernel's float ops (its Estimates, loops included): 2 x 64 per
    element plus the index arithmetic that makes each start value (an and and a convert, < 4 per element)."""
    need_clang()
    from tinyhw.kernels import seam

    tg = seam.load()
    probe = PROBES["fma"]
    ren = seam._renderer(tg, "cpu")
    _, calls, _ = seam._schedule(tg, probe, n, "NULL", "cpu")
    ops = sum(tg.to_program(call.src[0], ren).src[0].arg.estimates.ops for call, _ in calls)
    assert probe.work(n) <= ops < probe.work(n) + 4 * n


def test_build_refuses_a_formula_the_kernel_does_not_do(monkeypatch: pytest.MonkeyPatch) -> None:
    need_tinygrad()
    from tinyhw.kernels.manifest import build_target

    fma = PROBES["fma"]
    real = type(fma).work
    monkeypatch.setattr(type(fma), "work", lambda self, n: 4 * real(self, n))
    with pytest.raises(OperationFailed, match=r"executes 536870912 flops per run, the work formula counts 2147483648"):
        build_target("sm_90", ["fma"])
