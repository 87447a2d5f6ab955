"""The generated protocol modules (SMU message ids, PSP command ids, bootloader commands, metrics layout).

Two checks, both against Debian's linux-source-6.12 (the test FAILS without the tarball, on purpose):

1. the committed ``tinyhw/autogen/<name>.py`` files are exactly what ``genproto`` makes now;
2. every value tinyhw carries equals what **gcc** computes from the same headers: each constant is
   printed by a compiled C program, each struct field's offset by ``offsetof`` and its size by
   ``sizeof`` (an independent implementation of the C rules, so a reader bug cannot hide).
   Headers that cannot be compiled outside the kernel (``amdgpu_psp.h``, ``amdgpu_ucode.h``) give
   their ``enum`` blocks to gcc; ``.c`` files their ``#define`` lines.
"""

from __future__ import annotations

import difflib
import importlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tinyhw.autogen import genproto, genregs, sources

COMMITTED = Path(genproto.__file__).parent
COMPILABLE = ("psp_gfx_if.h", "smu13_driver_if_v13_0_0.h", "smu_v13_0_0_ppsmc.h", "discovery.h")


@pytest.fixture(scope="module")
def tree(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    tarball = genregs.default_tarball()
    if not tarball.is_file():
        pytest.fail(
            f"kernel tarball {tarball} is missing, so the protocol modules cannot be checked: "
            f"run `apt-get install {sources.KERNEL_PACKAGE}` (or set TINYHW_KERNEL_TARBALL)"
        )
    if os.environ.get("TINYHW_CACHE"):
        cache = Path(os.environ["TINYHW_CACHE"])
    elif getattr(request.config, "cache", None) is not None:
        cache = Path(request.config.cache.mkdir("tinyhw-kernel-proto"))
    else:
        cache = tmp_path_factory.mktemp("cache")
    return genproto.extract(tarball, cache)


def _without_version(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if not ln.startswith("KERNEL = ")]


@pytest.mark.slow
def test_committed_modules_match_a_fresh_generation(tree: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tinyhw.autogen.genproto", "--src", str(tree), "--out", str(out)],
        capture_output=True, text=True, check=False,
    )
    assert proc.returncode == 0, f"generator failed: {proc.stderr}"
    problems = []
    for name in genproto.NAMES:
        fresh = (out / f"{name}.py").read_text()
        committed = (COMMITTED / f"{name}.py").read_text()
        a, b = _without_version(committed), _without_version(fresh)
        if a != b:
            diff = difflib.unified_diff(a, b, f"committed/{name}.py", f"generated/{name}.py", lineterm="", n=1)
            problems.append("\n".join(list(diff)[:30]))
    assert not problems, f"regenerate with `{genproto.COMMAND}` and commit:\n" + "\n".join(problems)


def _c_program(tree: Path, name: str, files: tuple[tuple[str, bool], ...], mod: object) -> str:
    lines = [
        "#include <stdint.h>", "#include <stdbool.h>", "#include <stddef.h>", "#include <stdio.h>",
        "#define DECLARE_FLEX_ARRAY(T, n) T n[0]", "#define __packed __attribute__((packed))",
    ]
    for path, defines_only in files:
        text = (tree / path).read_text(errors="replace")
        if defines_only:
            number = re.compile(r"\s*#\s*define\s+\w+\s+\(?\s*(0x)?[0-9A-Fa-f]+\s*\)?\s*$")
            # object-like defines the generator evaluated from an expression (nvd.h: ``(1 << 27)``) count too
            kept = re.compile(r"\s*#\s*define\s+(\w+)\s")
            lines += [ln for ln in text.splitlines() if number.match(ln)
                      or ((m := kept.match(ln)) and m.group(1) in mod.CONSTANTS)]  # type: ignore[attr-defined]
        elif path.endswith(COMPILABLE):
            lines.append(f'#include "{tree / path}"')
        else:
            text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
            lines += re.findall(r"^enum\s+\w+\s*\{[^}]*\};", text, flags=re.M | re.S)
    lines.append("int main(void) {")
    for const in mod.CONSTANTS:  # type: ignore[attr-defined]
        lines.append(f'  printf("C {const} %lld\\n", (long long)({const}));')
    for struct, (_, fields) in mod.STRUCTS.items():  # type: ignore[attr-defined]
        lines.append(f'  printf("S {struct} %zu\\n", sizeof({struct}));')
        for path, (_, ctype, _) in fields.items():
            if ":" in ctype:
                continue  # bit fields have no offsetof
            lines.append(
                f'  printf("F {struct}|{path} %zu %zu\\n", offsetof({struct}, {path}), '
                f"sizeof((({struct} *)0)->{path}));"
            )
    lines += ["  return 0;", "}"]
    return "\n".join(lines) + "\n"


ELEM = {"uint8_t": 1, "int8_t": 1, "uint16_t": 2, "int16_t": 2, "uint32_t": 4, "int32_t": 4, "enum": 4,
        "uint64_t": 8, "int64_t": 8, "float": 4}


@pytest.mark.parametrize("name", genproto.NAMES)
def test_values_equal_what_gcc_computes_from_the_headers(tree: Path, tmp_path: Path, name: str) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    assert cc, "a C compiler (gcc, Debian package build-essential) is needed to cross-check the headers"
    mod = importlib.import_module(f"tinyhw.autogen.{name}")
    files = dict((p[0], p[1]) for p in genproto.PROTOCOLS)[name]
    src = tmp_path / "check.c"
    src.write_text(_c_program(tree, name, files, mod))
    exe = tmp_path / "check"
    proc = subprocess.run([cc, "-w", "-o", str(exe), str(src)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    got_c = {ln.split()[1]: int(ln.split()[2]) for ln in out if ln.startswith("C ")}
    for const, value in mod.CONSTANTS.items():
        want = got_c[const]
        # a shift into bit 31 of an int (nvd.h: ``(0x6 << 29)``) is negative in C; the bits are what counts
        assert value in (want, want & 0xFFFFFFFFFFFFFFFF, want & 0xFFFFFFFF if want < 0 else want), \
            (const, value, want)
    got_s = {ln[2:].rsplit(" ", 1)[0]: int(ln.rsplit(" ", 1)[1]) for ln in out if ln.startswith("S ")}
    got_f = {}
    for ln in out:
        if ln.startswith("F "):
            key, off, size = ln[2:].rsplit(" ", 2)
            got_f[key] = (int(off), int(size))
    checked = 0
    for struct, (size, fields) in mod.STRUCTS.items():
        assert size == got_s[struct], (struct, size, got_s[struct])
        for path, (offset, ctype, count) in fields.items():
            if ":" in ctype:
                continue
            goff, gsize = got_f[f"{struct}|{path}"]
            assert offset == goff, (struct, path, offset, goff)
            if ctype in ELEM:
                assert count * ELEM[ctype] == gsize, (struct, path, count, ctype, gsize)
            checked += 1
    assert len(mod.CONSTANTS) > 5 and (checked > 0 or not mod.STRUCTS)


def test_spec_figures_hold() -> None:
    """The numbers specs/amd-bringup.md quotes (§5.1, §5.2, §6.2, §6.4) are what the headers say."""
    from tinyhw.autogen import amdgpu_psp, psp_gfx_if, smu13_driver_if_v13_0_0, smu_v13_0_0_ppsmc

    msg = smu_v13_0_0_ppsmc.CONSTANTS
    assert (msg["PPSMC_MSG_GetSmuVersion"], msg["PPSMC_MSG_EnableAllSmuFeatures"]) == (0x2, 0x6)
    assert (msg["PPSMC_MSG_TransferTableSmu2Dram"], msg["PPSMC_MSG_GetDpmFreqByIndex"]) == (0x12, 0x1F)
    assert (msg["PPSMC_Result_UnknownCmd"], msg["DEBUGSMC_MSG_Mode1Reset"]) == (0xFE, 2)
    gfx = psp_gfx_if.CONSTANTS
    assert (gfx["GFX_CMD_ID_LOAD_TOC"], gfx["GFX_CMD_ID_AUTOLOAD_RLC"], gfx["PSP_ERR_UNKNOWN_COMMAND"]) == (
        0x20, 0x21, 0x100)
    assert gfx["GFX_FW_TYPE_SMU"] == 0x12 and gfx["GFX_FW_TYPE_RS64_MEC"] == 0x59
    size, resp = psp_gfx_if.STRUCTS["struct psp_gfx_cmd_resp"]
    assert size == 1024 and resp["resp.status"][0] == 864 and resp["resp.tmr_size"][0] == 880
    assert psp_gfx_if.STRUCTS["struct psp_gfx_rb_frame"][0] == 64
    bl = amdgpu_psp.CONSTANTS
    assert (bl["PSP_BL__LOAD_KEY_DATABASE"], bl["PSP_BL__LOAD_SOSDRV"], bl["PSP_FW_TYPE_PSP_KDB"]) == (
        0x80000, 0x20000, 3)
    size, metrics = smu13_driver_if_v13_0_0.STRUCTS["SmuMetricsExternal_t"]
    assert size == 392
    assert metrics["SmuMetrics.AvgTemperature"] == (120, "uint16_t", 13)
    assert metrics["SmuMetrics.ThrottlingPercentage"] == (154, "uint8_t", 22)
    assert smu13_driver_if_v13_0_0.CONSTANTS["TABLE_SMU_METRICS"] == 5
