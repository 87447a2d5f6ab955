"""Shared helpers of the probe-kernel tests: what they need (tinygrad, clang, libLLVM) and how they say so.

Tests that compile or run kernels need the compile extra. In CI (``TINYHW_REQUIRE_COMPILE=1``) a missing
piece is a failure naming the install step; elsewhere the test is skipped with that reason.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from typing import Any

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


def tinygrad_sqtt() -> Any:
    """tinygrad's SQTT module (``tinygrad.renderer.amd.sqtt``: the independent decoder and instruction mapper the
    emulated captures are checked against), imported through tinyhw's seam so that tinygrad is pinned to its
    NULL device first and later kernel tests in the same process still find it so."""
    need_tinygrad()
    import sys

    from tinyhw.errors import EnvironmentProblem
    from tinyhw.kernels import seam

    try:
        seam.load()
    except EnvironmentProblem:
        if "tinygrad" not in sys.modules:  # anything but "another test imported it first" is a real problem
            raise
    return importlib.import_module("tinygrad.renderer.amd.sqtt")


def am_boot(device: str = "mock:navi31") -> None:
    """``tinyhw --device DEVICE am boot --yes`` with the test firmware (a missing firmware folder is a failure that
    names the fetch step): what every test of a kernel on an emulated AMD board starts with."""
    from amfake import boot_emulated_board

    boot_emulated_board(device)


boot_mock_navi31 = am_boot


def json_doc(*args: str) -> dict:
    """The --json document of a CLI command that must succeed."""
    import json

    from clihelp import run

    r = run("--json", *args)
    assert r.code == 0, (r.out, r.err)
    return json.loads(r.out)
