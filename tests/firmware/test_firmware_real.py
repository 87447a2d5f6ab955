"""Real inputs: every file of Debian's firmware-amd-graphics and the GSP files of firmware-nvidia-gsp.

The packages are not committed: `bash tests/setup-system.sh` (README's test command, CI) extracts them into
${TINYHW_FIRMWARE_DIR:-${TINYHW_CACHE:-${XDG_CACHE_HOME:-~/.cache}/tinyhw}/firmware} (tests/helpers/cachedirs.py).
When they are missing these tests FAIL, naming that command; they never skip.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from cachedirs import firmware_dir
from clihelp import run

from tinyhw.firmware import detect, inspect_bytes
from tinyhw.formats.amdfw import ip_version_from_name, parse_amdgpu
from tinyhw.formats.nvgsp import parse_gsp

FETCH = "bash tests/setup-system.sh"
FW_DIR = firmware_dir()  # pinned by conftest when the session started
# header ip minor differs from the file name's in these (observed in 20230210-5; the major always agrees)
IP_MINOR_EXCEPTIONS = {"dcn_3_2_1_dmcub.bin", "vcn_3_1_2.bin"}


def _package(sub: str, what: str) -> tuple[Path, str]:
    stamp = FW_DIR / sub / ".complete"
    if not stamp.is_file():
        pytest.fail(f"Debian's {what} is not extracted under {FW_DIR / sub}: run `{FETCH}` first "
                    f"(it adds the bookworm non-free-firmware component)", pytrace=False)
    return FW_DIR / sub / "lib" / "firmware", stamp.read_text()


@pytest.fixture(scope="module")
def amd_files() -> tuple[dict[str, bytes], str]:
    root, stamp = _package("amd", "firmware-amd-graphics")
    files = {p.name: p.read_bytes() for p in sorted((root / "amdgpu").glob("*.bin"))}
    assert len(files) >= 500, f"only {len(files)} amdgpu files under {root}: re-run `{FETCH}`"
    return files, stamp


def test_every_amdgpu_file_parses_without_problems(amd_files) -> None:
    files, stamp = amd_files
    t0 = time.perf_counter()
    parsed = {name: parse_amdgpu(data, name) for name, data in files.items()}
    print(f"parsing {len(files)} files took {time.perf_counter() - t0:.1f} s wall (figures: bench/bench_firmware.py)")
    bad = {n: fw.problems for n, fw in parsed.items() if fw.problems}
    assert bad == {}
    crc_matches = 0
    undecoded = set()
    for name, fw in parsed.items():
        ch, n = fw.common, len(files[name])
        assert ch is not None and ch.size_bytes == n, name
        assert 32 <= ch.header_size_bytes <= ch.ucode_array_offset_bytes <= n, name
        assert ch.ucode_array_offset_bytes + ch.ucode_size_bytes <= n, name
        assert all(r.offset >= 0 and r.end <= n for r in fw.regions), name
        assert fw.family is not None, name
        assert fw.crc32_status in ("matches payload", "not verifiable")
        crc_matches += fw.crc32_status == "matches payload"
        if fw.header_struct is None:
            undecoded.add((fw.family, ch.header_version_major, ch.header_version_minor))
        ip = ip_version_from_name(name)
        if ip:
            assert ip[0] == ch.ip_version_major, name
            if name not in IP_MINOR_EXCEPTIONS:
                assert ip[1] == ch.ip_version_minor, name
        for c in fw.components:
            assert c.offset >= ch.ucode_array_offset_bytes and c.offset + c.size <= n, (name, c)
    assert undecoded <= {("rlc", 1, 0)}  # the pre-gfx8 RLC header is not in the spec's table
    if "20230210-5" in stamp:
        assert len(files) == 530 and crc_matches == 56  # data-sources.md
    assert crc_matches > 0


def test_every_amdgpu_file_is_detected_and_described(amd_files) -> None:
    files, _ = amd_files
    for name, data in files.items():
        assert detect(data, name) == "amdgpu", name
        res = inspect_bytes(data, name)
        json.dumps(res.doc)
        assert res.doc["common_header"]["size_bytes"] == len(data) and res.doc["problems"] == []


def test_known_values_of_navi31_files(amd_files) -> None:
    files, _ = amd_files
    sos = parse_amdgpu(files["psp_13_0_0_sos.bin"], "psp_13_0_0_sos.bin")
    assert sos.header_struct == "psp_firmware_header_v2_0"
    assert (sos.common.ip_version_major, sos.common.ip_version_minor) == (13, 0)
    assert {"SOS", "SYS_DRV", "KDB", "TOC"} <= {c.name for c in sos.components}
    assert next(c for c in sos.components if c.name == "SOS").fw_version == sos.common.ucode_version
    ta = parse_amdgpu(files["psp_13_0_0_ta.bin"], "psp_13_0_0_ta.bin")
    assert ta.header_struct == "ta_firmware_header_v2_0" and {"ASD", "HDCP", "DTM"} <= {c.name for c in ta.components}
    expect = {"gc_11_0_0_mec.bin": "gfx_firmware_header_v2_0", "gc_11_0_0_pfp.bin": "gfx_firmware_header_v2_0",
              "gc_11_0_0_imu.bin": "imu_firmware_header_v1_0", "gc_11_0_0_mes.bin": "mes_firmware_header_v1_0",
              "sdma_6_0_0.bin": "sdma_firmware_header_v2_0", "smu_13_0_0.bin": "smc_firmware_header_v2_1",
              "vcn_4_0_0.bin": "common_firmware_header", "navi10_sos.bin": "psp_firmware_header_v1_1"}
    for name, struct_name in expect.items():
        assert parse_amdgpu(files[name], name).header_struct == struct_name, name
    imu = parse_amdgpu(files["gc_11_0_0_imu.bin"], "gc_11_0_0_imu.bin")
    h = imu.header
    assert h["imu_iram_ucode_size_bytes"] + h["imu_dram_ucode_size_bytes"] == imu.common.ucode_size_bytes
    smu = parse_amdgpu(files["smu_13_0_0.bin"], "smu_13_0_0.bin")
    assert smu.header["pptable_count"] == len(smu.header["pptables"]) >= 1
    vcn = parse_amdgpu(files["vcn_4_0_0.bin"], "vcn_4_0_0.bin")
    assert vcn.crc32_status == "matches payload"  # the VCN files are among the 56


def test_cli_json_of_a_real_psp_file() -> None:
    root, _ = _package("amd", "firmware-amd-graphics")
    r = run("--json", "firmware", "inspect", str(root / "amdgpu" / "psp_13_0_0_sos.bin"))
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["type"] == "amdgpu" and doc["problems"] == []
    assert list(doc["common_header"]) == ["size_bytes", "header_size_bytes", "header_version_major",
                                          "header_version_minor", "ip_version_major", "ip_version_minor",
                                          "ucode_version", "ucode_size_bytes", "ucode_array_offset_bytes", "crc32"]
    assert doc["header"]["struct"] == "psp_firmware_header_v2_0"
    assert {c["name"] for c in doc["components"]} >= {"SOS", "SYS_DRV"}
    assert doc["crc32"]["status"] in ("matches payload", "not verifiable")


@pytest.mark.parametrize("name", ["gsp_ga10x.bin", "gsp_tu10x.bin"])
def test_gsp_files_parse(name: str) -> None:
    root, stamp = _package("nvidia-gsp", "firmware-nvidia-gsp")
    files = sorted((root / "nvidia").glob(f"*/{name}"))
    assert files, f"no nvidia/*/{name} under {root}: re-run `{FETCH}`"
    for path in files:
        fw = parse_gsp(path.read_bytes(), str(path))
        assert fw.problems == [] and fw.notes == [], path
        assert fw.version == path.parent.name  # .fwversion agrees with the directory (e.g. 535.261.03)
        assert fw.image is not None and fw.image.size > 16 << 20
        assert fw.radix3["image"] == -(-fw.image.size // 4096)
        fams = set(fw.signatures)
        assert ({"ga10x", "ad10x"} if name == "gsp_ga10x.bin" else {"tu10x"}) <= fams
        assert all(r.size == 0x1000 for r in fw.signatures.values())
        assert ("ga102" in fw.serves) == (name == "gsp_ga10x.bin")
        # derived from the sections: the 535 ga10x file has no gb20x/gb10x signature, so no Blackwell chip
        want = {"gsp_ga10x.bin": ("ga102", "ga103", "ga104", "ga106", "ga107", "gh100", "ad102", "ad103", "ad104",
                                  "ad106", "ad107"),
                "gsp_tu10x.bin": ("tu102", "tu104", "tu106", "tu117", "tu116", "ga100")}[name]
        if fams in ({"ga10x", "ad10x", "gh100", "cc_gh100"}, {"tu10x", "tu11x", "ga100"}):
            assert fw.serves == want, path
        assert not any(c.startswith("gb") for c in fw.serves) or {"gb10x", "gb20x"} & fams
