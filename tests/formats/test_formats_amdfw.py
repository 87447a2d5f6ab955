"""amdgpu firmware headers from synthetic files: every family/version branch, problems, fuzzing.

Real files (Debian's firmware-amd-graphics) are in test_firmware_real.py.
"""

from __future__ import annotations

import struct
import zlib

from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.formats.amdfw import (
    COMMON_FIELDS,
    LAYOUTS,
    family_from_name,
    ip_version_from_name,
    looks_like_amdgpu,
    parse_amdgpu,
)

UO = 0x100


def build(hmaj: int, hmin: int, fields: list[int], payload: bytes = b"\x11" * 0x200, *, ip: tuple[int, int] = (11, 0),
          crc: int | None = None, hsize: int | None = None, tail: bytes = b"") -> bytes:
    """common header + u32 fields + padding to 0x100 + payload + tail; crc defaults to the payload's CRC-32."""
    spec = b"".join(struct.pack("<I", f) for f in fields)
    hsize = 32 + len(spec) if hsize is None else hsize
    size = UO + len(payload) + len(tail)
    crc = zlib.crc32(payload) if crc is None else crc
    common = struct.pack("<IIHHHHIIII", size, hsize, hmaj, hmin, ip[0], ip[1], 0x1234, len(payload), UO, crc)
    head = (common + spec).ljust(UO, b"\0")
    return head + payload + tail


def names(fw) -> list[str]:
    return [r.name for r in fw.regions]


def test_common_header_field_names_and_crc_match() -> None:
    fw = parse_amdgpu(build(1, 0, [7, 0x10, 0x8]), "gc_11_0_0_pfp.bin")
    assert fw.problems == [] and fw.ok
    assert list(fw.common.to_doc()) == list(COMMON_FIELDS)
    assert fw.common.ucode_array_offset_bytes == UO and fw.common.ucode_size_bytes == 0x200
    assert fw.crc32_status == "matches payload"
    assert fw.family == "gfx" and fw.header_struct == "gfx_firmware_header_v1_0"
    assert fw.header == {"ucode_feature_version": 7, "jt_offset": 0x10, "jt_size": 0x8}
    regions = {r.name: (r.offset, r.size) for r in fw.regions}
    assert regions["code"] == (UO, 0x200 - 32) and regions["jump table"] == (UO + 0x40, 0x20)
    assert fw.ip_version_from_name == (11, 0, 0)


def test_crc_not_verifiable_is_not_a_problem() -> None:
    fw = parse_amdgpu(build(1, 0, [0, 0, 0], crc=0xDEADBEEF), "navi10_mec.bin")
    assert fw.crc32_status == "not verifiable" and fw.problems == []


def test_psp_v2_components() -> None:
    descs = [(2, 0x31, 0, 0x80), (1, 0x32, 0x80, 0x100), (4, 0xC, 0x180, 0x40), (0x63, 1, 0x1C0, 0x40)]
    fields = [len(descs)] + [x for d in descs for x in d]
    fw = parse_amdgpu(build(2, 0, fields, hsize=36), "psp_13_0_0_sos.bin")
    assert fw.problems == []
    assert fw.header_struct == "psp_firmware_header_v2_0" and fw.header["psp_fw_bin_count"] == 4
    got = [(c.name, c.fw_type, c.fw_version, c.offset, c.size) for c in fw.components]
    assert got == [("SYS_DRV", 2, 0x31, UO, 0x80), ("SOS", 1, 0x32, UO + 0x80, 0x100),
                   ("TOC", 4, 0xC, UO + 0x180, 0x40), ("type 0x63", 0x63, 1, UO + 0x1C0, 0x40)]
    assert "component table" in names(fw)


def test_psp_v21_aux_index_and_ta_v2_names() -> None:
    fw = parse_amdgpu(build(2, 1, [1, 0, 1, 7, 0, 0x200], hsize=40), "psp_14_0_2_sos.bin")
    assert fw.problems == [] and fw.header["psp_aux_fw_bin_index"] == 0
    assert fw.components[0].name == "SOS" and fw.components[0].offset == UO
    ta = parse_amdgpu(build(2, 0, [2, 4, 0x17, 0, 0x100, 5, 0x12, 0x100, 0x100], hsize=36), "psp_13_0_0_ta.bin")
    assert [c.name for c in ta.components] == ["HDCP", "DTM"] and ta.problems == []


def test_psp_v1_fixed_descriptors_and_implied_sys_drv() -> None:
    # v1.3: sos, toc, kdb, spl, rl, sys_drv_aux, sos_aux (12-byte {fw_version, offset, size})
    descs = [(5, 0x80, 0x40), (0, 0, 0), (1, 0xC0, 0x20), (0, 0, 0), (2, 0xE0, 0x20), (3, 0x100, 0x80),
             (4, 0x180, 0x80)]
    fw = parse_amdgpu(build(1, 3, [x for d in descs for x in d]), "aldebaran_sos.bin")
    assert fw.problems == [] and fw.header_struct == "psp_firmware_header_v1_3"
    assert [(c.name, c.offset, c.size) for c in fw.components] == [
        ("sys_drv", UO, 0x80), ("sos", UO + 0x80, 0x40), ("kdb", UO + 0xC0, 0x20), ("rl", UO + 0xE0, 0x20),
        ("sys_drv_aux", UO + 0x100, 0x80), ("sos_aux", UO + 0x180, 0x80)]
    assert fw.header["sos"] == {"fw_version": 5, "offset_bytes": 0x80, "size_bytes": 0x40}
    v12 = parse_amdgpu(build(1, 2, [0, 0x80, 0x40, 9, 9, 9, 0, 0xC0, 0x20]), "arcturus_sos.bin")
    assert "res" in v12.header and [c.name for c in v12.components] == ["sys_drv", "sos", "kdb"]
    ta1 = parse_amdgpu(build(1, 0, [0] * 6 + [0x17, 0, 0x100, 0x12, 0x100, 0x100] + [0] * 3), "navi10_ta.bin")
    assert [c.name for c in ta1.components] == ["hdcp", "dtm"] and ta1.problems == []


def test_gfx_v2_mes_imu_sdma_smc_regions() -> None:
    gfx = parse_amdgpu(build(2, 0, [0x1D, 0x100, UO, 0x100, UO + 0x100, 0x3000, 0]), "gc_11_0_0_mec.bin")
    assert {r.name: (r.offset, r.size) for r in gfx.regions}["data"] == (UO + 0x100, 0x100) and gfx.problems == []
    mes = parse_amdgpu(build(1, 0, [0, 0x180, UO, 0, 0x80, UO + 0x180, 1, 2, 3, 4]), "gc_11_0_0_mes1.bin")
    assert mes.header_struct == "mes_firmware_header_v1_0" and mes.problems == []
    imu = parse_amdgpu(build(1, 0, [0x100, 0, 0x100, 0x100]), "gc_11_0_0_imu.bin")
    assert [(r.name, r.offset) for r in imu.regions][-2:] == [("iram", UO), ("dram", UO + 0x100)]
    for hmin, fields in ((0, [1, 0, 0x40, 0x10]), (1, [1, 0, 0x40, 0x10, 5])):
        assert parse_amdgpu(build(1, hmin, fields), "vega10_sdma.bin").problems == []
    s2 = parse_amdgpu(build(2, 0, [0x3C, 0x100, 0x20, 0x10, UO + 0x100, 0x100, 0x20, 0]), "sdma_6_0_0.bin")
    assert {"ctx ucode", "ctl ucode", "ctx jump table"} <= set(names(s2)) and s2.problems == []
    s3 = parse_amdgpu(build(3, 0, [1, 0, 0x200]), "sdma_7_0_0.bin")
    assert "th0 ucode" in names(s3) and s3.problems == []
    tail = struct.pack("<3I3I", 0xE50, UO + 0x200 + 24, 8, 0x8F21, UO + 0x200 + 32, 8) + b"\xaa" * 16
    smc = parse_amdgpu(build(2, 1, [0x20000, 2, UO + 0x200], tail=tail), "smu_13_0_0.bin")
    assert smc.problems == [] and [e["id"] for e in smc.header["pptables"]] == [0xE50, 0x8F21]
    smc20 = parse_amdgpu(build(2, 0, [0x20000, UO + 0x200, 4], tail=b"ppt!"), "beige_goby_smc.bin")
    assert "pptable" in names(smc20) and smc20.problems == []


def test_rlc_versions_decode_and_regions() -> None:
    for hmin in range(5):
        n = len(LAYOUTS[("rlc", 2, hmin)])
        lists = 3 * 3 if hmin >= 1 else 0  # the rlcl groups count as one field each, four u32 wide
        fw = parse_amdgpu(build(2, hmin, [0] * (n + lists)), "gc_11_0_0_rlc.bin")
        assert fw.header_struct == f"rlc_firmware_header_v2_{hmin}" and fw.problems == [], (hmin, fw.problems)


def test_known_kernel_layouts_and_common_only_families() -> None:
    mc = parse_amdgpu(build(1, 0, [0x40, UO + 0x1C0]), "polaris10_mc.bin")
    assert mc.header_struct == "mc_firmware_header_v1_0" and "io debug" in names(mc)
    assert parse_amdgpu(build(1, 0, [0x1A0, 0x20]), "navi12_dmcu.bin").problems == []
    assert "bss data" in names(parse_amdgpu(build(1, 0, [0x180, 0x80]), "dcn_3_2_0_dmcub.bin"))
    gi = parse_amdgpu(build(1, 0, [0x20001]), "navi10_gpu_info.bin")
    assert gi.header == {"version_major": 1, "version_minor": 2}
    vcn = parse_amdgpu(build(1, 0, []), "vcn_4_0_0.bin")
    assert vcn.header_struct == "common_firmware_header" and vcn.problems == []


def test_unknown_version_or_family_shows_raw_dwords() -> None:
    fw = parse_amdgpu(build(1, 0, [1, 2, 3, 4, 5]), "bonaire_rlc.bin")
    assert fw.header_struct is None and fw.header["raw_dwords"][:2] == [[32, 1], [36, 2]]
    assert any("not decoded" in n for n in fw.notes) and fw.problems == []
    assert parse_amdgpu(build(1, 0, [9]), "mystery.bin").family is None


def test_stale_header_size_is_a_note_when_the_struct_fits() -> None:
    n = len(LAYOUTS[("rlc", 2, 1)]) + 9
    fw = parse_amdgpu(build(2, 1, [0] * n, hsize=0x68), "raven2_rlc.bin")
    assert fw.problems == [] and any("read by version" in x for x in fw.notes)


def test_problems_are_precise() -> None:
    good = build(1, 0, [0, 0, 0])
    assert parse_amdgpu(good[:20], "x_mec.bin").problems == [
        "0x0: common_firmware_header needs 32 bytes, the data ends at 0x14"]
    trunc = parse_amdgpu(good[:0x180], "x_mec.bin")
    assert any(p.startswith("0x0: size_bytes is 0x300 but the file has 0x180 bytes") for p in trunc.problems)
    assert any("ucode [0x100, 0x300) extends beyond the file (0x180 bytes)" in p for p in trunc.problems)
    bad_jt = parse_amdgpu(build(1, 0, [0, 0x1000, 8]), "x_mec.bin")
    assert any("jump table" in p and "extends beyond" in p for p in bad_jt.problems)
    many = parse_amdgpu(build(2, 0, [0xFFFFFF], hsize=36), "psp_13_0_0_sos.bin")
    assert any("component descriptors" in p for p in many.problems)


def test_file_name_helpers() -> None:
    assert family_from_name("/lib/firmware/amdgpu/psp_13_0_0_ta.bin") == "ta"
    assert family_from_name("gc_11_0_0_mes_2.bin") == "mes"
    assert family_from_name("navi14_ce_wks.bin") == "gfx" and family_from_name("polaris10_k_mc.bin") == "mc"
    assert family_from_name("picasso_rlc_am4.bin") == "rlc" and family_from_name(None) is None
    assert ip_version_from_name("dcn_3_2_1_dmcub.bin") == (3, 2, 1) and ip_version_from_name("navi10_mec.bin") is None
    fw = parse_amdgpu(build(1, 0, [0, 0], ip=(3, 0)), "dcn_3_2_1_dmcub.bin")
    assert fw.notes == ["the file name says ip 3.2.1, the header says 3.0"] and fw.problems == []
    assert looks_like_amdgpu(build(1, 0, [])) and not looks_like_amdgpu(b"\0" * 64)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=600), st.sampled_from(["psp_13_0_0_sos.bin", "gc_11_0_0_rlc.bin", "smu_13_0_0.bin",
                                                   "sdma_6_0_0.bin", "x.bin", "navi10_ta.bin"]))
def test_random_bytes_never_crash(data: bytes, name: str) -> None:
    fw = parse_amdgpu(data, name)
    for r in fw.regions:
        assert r.offset >= 0 and r.end <= len(data)


_SEEDS = [build(2, 0, [2, 2, 1, 0, 0x100, 1, 2, 0x100, 0x100], hsize=36),
          build(2, 3, [0] * 60), build(2, 1, [0x20000, 1, UO + 0x200], tail=struct.pack("<3I", 1, 0, 4))]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(range(len(_SEEDS))), st.lists(st.tuples(st.integers(0, 0x3FF), st.integers(0, 255)),
                                                       max_size=8), st.integers(0, 0x400))
def test_mutated_files_never_crash(seed: int, flips: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(_SEEDS[seed])
    for off, val in flips:
        if off < len(data):
            data[off] = val
    data = bytes(data[:len(data) - cut] if cut < len(data) else data)
    for name in ("psp_13_0_0_sos.bin", "gc_11_0_0_rlc.bin", "smu_13_0_0.bin"):
        fw = parse_amdgpu(data, name)
        assert all(r.end <= len(data) for r in fw.regions)
        assert all(isinstance(p, str) and p for p in fw.problems)
