"""Shared helpers of the probe-kernel tests: what they need (tinygrad, clang, libLLVM) and how they say so.

Tests that compile or run kernels need the compile extra. In CI (``TINYHW_REQUIRE_COMPILE=1``) a missing
piece is a failure naming the install step; elsewhere the test is skipped with that reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import pytest

INSTALL = {
    "tinygrad": "pip install -e '.[test,compile]' (tinygrad==0.14.0)",
    "clang": "apt-get install clang (tinygrad's cpu device compiles with it)",
    "libllvm": "apt-get install libllvm19 (gfx targets need libLLVM >= 18)",
}


def _missing(what: str, why: str) -> None:
    msg = f"{why}; install: {INSTALL[what]}"
    if os.environ.get("TINYHW_REQUIRE_COMPILE") == "1":
        pytest.fail(f"TINYHW_REQUIRE_COMPILE=1 but {msg}")
    pytest.skip(msg)


def need_tinygrad() -> None:
    if importlib.util.find_spec("tinygrad") is None:
        _missing("tinygrad", "tinygrad is not installed")


def need_clang() -> None:
    need_tinygrad()
    if shutil.which(os.environ.get("CC", "clang")) is None:
        _missing("clang", "clang is not on PATH")


def need_libllvm() -> None:
    need_tinygrad()
    from tinyhw.kernels.seam import find_libllvm

    if find_libllvm() is None:
        _missing("libllvm", "no libLLVM >= 18 found")


def am_boot(device: str = "mock:navi31") -> None:
    """``tinyhw --device DEVICE am boot --yes`` with the test firmware (a missing firmware folder is a failure that
    names the fetch step): what every test of a kernel on an emulated AMD board starts with."""
    from amfake import FW_DIR
    from clihelp import run

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    r = run("--device", device, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
    assert r.code == 0, r.err
