"""Without --firmware-dir, `am boot`/`nv boot` find the firmware where tests/fetch_firmware.sh put it (tinyhw's
cache, the same rule as tests/helpers/cachedirs.py) or in the system's /lib/firmware, and say which directory they
used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from amfake import FW_DIR
from cachedirs import firmware_dir as cachedirs_firmware_dir
from clihelp import run

from tinyhw.boot.amd import firmware
from tinyhw.boot.common import fwdirs
from tinyhw.boot.nv import fwfiles
from tinyhw.mocks.nvidia import nv_gspfw

NAVI31 = {"mp0": (13, 0, 0), "mp1": (13, 0, 0), "gc": (11, 0, 0), "sdma0": (6, 0, 0)}


@pytest.mark.parametrize("env", [{}, {"XDG_CACHE_HOME": "/x"}, {"XDG_CACHE_HOME": "/x", "TINYHW_CACHE": "/c"},
                                 {"TINYHW_FIRMWARE_DIR": "/f", "TINYHW_CACHE": "/c", "XDG_CACHE_HOME": "/x"}])
def test_the_cache_rule_is_the_tests_and_fetch_scripts_rule(env: dict[str, str]) -> None:
    assert fwdirs.cache_root(env) == cachedirs_firmware_dir(env)


def _amd_cache(root: Path, names: list[str]) -> Path:
    d = root / "amd" / "lib" / "firmware" / "amdgpu"
    d.mkdir(parents=True)
    for n in names:
        (d / n).write_bytes(b"")
    return d


def test_amd_firmware_is_found_in_tinyhws_cache(tmp_path: Path) -> None:
    names = [n for _, n in firmware.needed_files(NAVI31)]
    d = _amd_cache(tmp_path, names)
    env = {"TINYHW_FIRMWARE_DIR": str(tmp_path)}
    where = firmware.locate(None, NAVI31, env)
    assert (where.path, where.source) == (d, fwdirs.CACHE_SOURCE) and d in where.searched
    assert firmware.DEFAULT_DIR in where.searched
    assert firmware.locate("/given", NAVI31, env).path == Path("/given")  # a named directory always wins
    assert firmware.locate(None, NAVI31, {**env, "TINYHW_AMDGPU_FIRMWARE": "/var"}).source == "$TINYHW_AMDGPU_FIRMWARE"
    (d / names[0]).unlink()  # incomplete: still the one that exists (the boot then names the missing file)
    assert firmware.locate(None, NAVI31, env).path == d


def test_amd_nothing_anywhere_falls_back_to_the_system_default(tmp_path: Path) -> None:
    where = firmware.locate(None, NAVI31, {"TINYHW_FIRMWARE_DIR": str(tmp_path / "none")})
    if not any(d.is_dir() for d, _ in firmware.search_dirs({"TINYHW_FIRMWARE_DIR": str(tmp_path / "none")})):
        assert where.path == firmware.DEFAULT_DIR and "default" in where.source


def test_am_boot_without_firmware_dir_uses_the_fetched_files_and_says_so() -> None:
    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"Debian's firmware-amd-graphics is not extracted in {FW_DIR}: run bash tests/fetch_firmware.sh",
                    pytrace=False)
    r = run("--device", "mock:navi31", "am", "boot", "--yes")
    assert r.code == 0, r.err
    assert f"firmware from {FW_DIR} ({fwdirs.CACHE_SOURCE})" in r.err, r.err
    r = run("--device", "mock:navi31", "--json", "am", "info")
    assert r.code == 0 and json.loads(r.out)["firmware"]["source"] == fwdirs.CACHE_SOURCE, r.err


def test_am_boot_with_no_firmware_anywhere_names_where_it_looked(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHW_FIRMWARE_DIR", str(tmp_path / "empty"))
    if any(d.is_dir() for d, _ in firmware.search_dirs()):
        pytest.skip("this machine has amdgpu firmware in the system's folders")
    r = run("--device", "mock:navi31", "am", "boot", "--yes")
    assert r.code == 2 and "looked in" in r.err and str(tmp_path / "empty" / "amd") in r.err, r.err


def test_nv_boot_without_firmware_dir_uses_tinyhws_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    d = tmp_path / "nvidia-gsp" / "lib" / "firmware" / "nvidia"
    nv_gspfw.write_set(str(d))
    monkeypatch.setenv("TINYHW_FIRMWARE_DIR", str(tmp_path))
    monkeypatch.delenv("TINYHW_NVIDIA_FIRMWARE", raising=False)
    where = fwfiles.locate(None)
    assert (where.path, where.source) == (d, fwdirs.CACHE_SOURCE)
    dev = f"mock:ad102,strict,state={tmp_path / 'ad102.json'}"
    r = run("--device", dev, "nv", "boot", "--yes", "--allow-unknown-firmware")
    assert r.code == 0 and f"firmware from {d} ({fwdirs.CACHE_SOURCE})" in r.err, r.err


def test_nv_prefers_the_complete_570_set_over_debians_gsp_only_package(tmp_path: Path) -> None:
    """Debian's firmware-nvidia-gsp has no booter, so the 570.144 set fetched from firmware-nvidia-graphics (which
    has gsp, booter and bootloader) is looked in first."""
    gsp_only = tmp_path / "nvidia-gsp" / "lib" / "firmware" / "nvidia" / "535.261.03"
    full = tmp_path / "nvidia-570" / "nvidia" / "ga102" / "gsp"
    gsp_only.mkdir(parents=True)
    (gsp_only / "gsp_ga10x.bin").write_bytes(b"")
    full.mkdir(parents=True)
    (full / "gsp-570.144.bin").write_bytes(b"")
    where = fwfiles.locate(None, {"TINYHW_FIRMWARE_DIR": str(tmp_path)})
    assert (where.path, where.source) == (tmp_path / "nvidia-570" / "nvidia", fwdirs.CACHE_SOURCE)
