"""GSP-RM's boot structures at the offsets docs/nv-gsp-layouts.md derives from NVIDIA's 535.113.01 and 570.144
headers: the offsets are recomputed here by a small C-layout walk over the header field lists (natural alignment),
independently of tinyhw's table, and the packers and parser are checked against byte strings built by hand."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from clihelp import run
from nvboothelp import boot, firmware_set

from tinyhw.boot.nv import rpc
from tinyhw.boot.nv.gspmem import ENTRY, id8, queue_arguments, rm_arguments
from tinyhw.boot.nv.structs import BRANCH_535, BRANCH_570, GspLayouts, layouts_for
from tinyhw.errors import OperationFailed, Refused
from tinyhw.mocks.nvidia import nv_gsp, nv_gspfw

Field = tuple[int, int]  # (size, alignment) of a C type
U8, U16, U32, U64 = (1, 1), (2, 2), (4, 4), (8, 8)


def arr(t: Field, n: int) -> Field:
    """A C array of ``n`` elements of ``t``."""
    return t[0] * n, t[1]


def walk(fields: list[tuple[str, Field]]) -> tuple[dict[str, int], Field]:
    """Offsets of a C struct's fields under natural alignment, and the struct's own (size, alignment)."""
    at, top, out = 0, 1, {}
    for name, (size, align) in fields:
        at = -(-at // align) * align
        out[name] = at
        at += size
        top = max(top, align)
    return out, (-(-at // top) * top, top)


def typ(fields: list[tuple[str, Field]]) -> Field:
    """(size, alignment) of a nested struct."""
    return walk(fields)[1]


def n(count: int, t: Field = U8) -> list[tuple[str, Field]]:
    """``count`` anonymous fields of type ``t`` (runs of NvBool and the like)."""
    return [(f"_{i}", t) for i in range(count)]


# ctrl2080fb.h: NV2080_CTRL_CMD_FB_GET_FB_REGION_INFO_PARAMS, same in both branches
REGION = typ([("base", U64), ("limit", U64), ("reserved", U64), ("performance", U32), *n(3),
              ("blackList", arr(U8, 17))])
REGIONS = typ([("numFBRegions", U32), ("fbRegion", arr(REGION, 16))])
GID = typ([("index", U32), ("flags", U32), ("length", U32), ("data", arr(U8, 256))])
NAMES: list[tuple[str, Field]] = [("gpuNameString", arr(U8, 64)), ("gpuShortNameString", arr(U8, 64)),
                                  ("gpuNameString_Unicode", arr(U16, 64))]


def static_535() -> tuple[dict[str, int], Field]:
    """GspStaticConfigInfo, 535.113.01 (gsp_static_config.h)."""
    sku = typ([("BoardID", U32), ("chipSKU", arr(U8, 4)), ("chipSKUMod", arr(U8, 2)), ("project", arr(U8, 5)),
               ("projectSKU", arr(U8, 5)), ("CDP", arr(U8, 6)), ("projectSKUMod", arr(U8, 2)),
               ("businessCycle", U32)])
    sriov = typ([*n(3, U32), *n(6, U64), *n(7)])
    return walk([("grCapsBits", arr(U8, 23)), ("gidInfo", GID), ("gpcInfo", U32), ("tpcInfo", arr(arr(U32, 2), 32)),
                 ("zcullInfo", arr(arr(U32, 2), 32)), ("SKUInfo", sku), ("fbRegionInfoParams", REGIONS),
                 ("computeBranding", U32), ("sriovCaps", sriov), ("sriovMaxGfid", U32),
                 ("engineCaps", arr(U32, (0x3E - 1) // 32 + 1)), ("SM_info", arr(U32, 9)), ("poisonFuseEnabled", U8),
                 ("fb_length", U64), *n(5, U32), ("gfxpBufferSize", arr(U32, 5)), ("gfxpBufferAlignment", arr(U32, 5)),
                 *NAMES, *n(12), ("bar1PdeBase", U64), ("bar2PdeBase", U64), ("bVbiosValid", U8), *n(2, U32), *n(3),
                 ("displaylessMaxHeads", arr(U32, 2)), ("displaylessMaxResolution", arr(U32, 3)),
                 ("displaylessMaxPixels", U64), *n(3, U32), *n(3)])


def static_570() -> tuple[dict[str, int], Field]:
    """GspStaticConfigInfo, 570.144 (nouveau's r570 excerpt)."""
    sku = typ([("BoardID", U32), ("chipSKU", arr(U8, 9)), ("chipSKUMod", arr(U8, 5)), ("skuConfigVersion", U32),
               ("project", arr(U8, 5)), ("projectSKU", arr(U8, 5)), ("CDP", arr(U8, 6)), ("projectSKUMod", arr(U8, 2)),
               ("businessCycle", U32)])
    sriov = typ([*n(3, U32), *n(6, U64), *n(9)])
    return walk([("grCapsBits", arr(U8, 23)), ("gidInfo", GID), ("SKUInfo", sku), ("fbRegionInfoParams", REGIONS),
                 ("sriovCaps", sriov), ("sriovMaxGfid", U32), ("engineCaps", arr(U32, (0x54 - 1) // 32 + 1)),
                 ("poisonFuseEnabled", U8), ("fb_length", U64), ("fbio_mask", U64), *n(2, U32), ("fbp_mask", U64),
                 ("l2_cache_size", U32), *NAMES, *n(14), *n(2, U16), ("bar1PdeBase", U64), ("bar2PdeBase", U64),
                 ("bVbiosValid", U8), *n(2, U32), *n(3), ("displaylessMaxHeads", arr(U32, 2)),
                 ("displaylessMaxResolution", arr(U32, 3)), ("displaylessMaxPixels", U64), *n(3, U32), *n(4),
                 ("ecidInfo", arr(arr(U32, 3), 2)), ("fwWprLayoutOffset", arr(U64, 2))])


BUSINFO = typ([*n(4, U16), ("revisionID", U8)])
VF_INFO = typ([*n(2, U32), *n(3, U64), *n(3)])


def acpi(mux_tables: int) -> Field:
    """ACPI_METHOD_DATA with ``mux_tables`` MUX_METHOD_DATA_ELEMENT[16] tables (535: 2, 570: 3)."""
    mux = typ([("tableLen", U32), *[(f"t{i}", arr(arr(U32, 3), 16)) for i in range(mux_tables)]])
    return typ([("bValid", U8), ("dod", typ([*n(2, U32), ("list", arr(U32, 16))])),
                ("jt", typ([*n(2, U32), ("rev", U16), ("sb", U8)])), ("mux", mux), ("caps", arr(U32, 2))])


def system_535() -> tuple[dict[str, int], Field]:
    """GspSystemInfo, 535.113.01."""
    return walk([("gpuPhysAddr", U64), ("gpuPhysFbAddr", U64), ("gpuPhysInstAddr", U64),
                 ("nvDomainBusDeviceFunc", U64), ("simAccessBufPhysAddr", U64), ("pcieAtomicsOpMask", U64),
                 ("consoleMemSize", U64), ("maxUserVa", U64), ("pciConfigMirrorBase", U32),
                 ("pciConfigMirrorSize", U32), ("oorArch", U8), ("clPdbProperties", U64), ("Chipset", U32), *n(7),
                 ("FHBBusInfo", BUSINFO), ("chipsetIDInfo", BUSINFO), ("acpiMethodData", acpi(2)),
                 ("hypervisorType", U32), ("bIsPassthru", U8), ("sysTimerOffsetNs", U64), ("gspVFInfo", VF_INFO)])


def system_570() -> tuple[dict[str, int], Field]:
    """GspSystemInfo, 570.144."""
    return walk([("gpuPhysAddr", U64), ("gpuPhysFbAddr", U64), ("gpuPhysInstAddr", U64), ("gpuPhysIoAddr", U64),
                 ("nvDomainBusDeviceFunc", U64), ("simAccessBufPhysAddr", U64), ("notifyOp", U64),
                 ("pcieAtomicsOpMask", U64), ("consoleMemSize", U64), ("maxUserVa", U64),
                 ("pciConfigMirrorBase", U32), ("pciConfigMirrorSize", U32), ("PCIDeviceID", U32),
                 ("PCISubDeviceID", U32), ("PCIRevisionID", U32), ("cplMask", U32), ("oorArch", U8),
                 ("clPdbProperties", U64), ("Chipset", U32), *n(4), ("chipsetL1ssEnable", U32), *n(6),
                 ("FHBBusInfo", BUSINFO), ("chipsetIDInfo", BUSINFO), ("acpiMethodData", acpi(3)),
                 ("hypervisorType", U32), ("bIsPassthru", U8), ("sysTimerOffsetNs", U64), ("gspVFInfo", VF_INFO),
                 *n(2), ("linkCap", U32), ("gridBuildCsp", U32), *n(6), ("hostPageSize", U64)])


def rm_args(branch: int) -> tuple[dict[str, int], Field]:
    """GSP_ARGUMENTS_CACHED (gsp_init_args.h) with its MESSAGE_QUEUE_INIT_ARGUMENTS."""
    queues = typ([("sharedMemPhysAddr", U64), ("pageTableEntryCount", U32), ("cmd", U64), ("stat", U64),
                  *(n(2, U64) if branch == 535 else [])])
    sr = typ([("oldLevel", U32), ("flags", U32), ("bInPMTransition", U8)])
    return walk([("messageQueueInitArguments", queues), ("srInitArguments", sr), ("gpuInstance", U32),
                 *([("bDmemStack", U8)] if branch == 570 else []), ("profilerArgs", arr(U64, 2))])


@pytest.mark.parametrize(("abi", "static", "system"), [(BRANCH_535, static_535, system_535),
                                                        (BRANCH_570, static_570, system_570)])
def test_table_matches_the_offsets_walked_from_the_header_fields(abi: GspLayouts, static, system) -> None:
    st, (st_size, _) = static()
    si, (si_size, _) = system()
    ra, (ra_size, _) = rm_args(abi.branch)
    assert (abi.static_info_size, abi.fb_regions_at, abi.fb_length_at, abi.gpu_name_at, abi.gpu_short_name_at) == (
        st_size, st["fbRegionInfoParams"], st["fb_length"], st["gpuNameString"], st["gpuShortNameString"])
    assert (abi.system_info_size, abi.sys_bdf_at, abi.sys_max_user_va_at, abi.sys_config_mirror_at,
            abi.sys_passthru_at) == (si_size, si["nvDomainBusDeviceFunc"], si["maxUserVa"], si["pciConfigMirrorBase"],
                                     si["bIsPassthru"])
    assert abi.sys_pci_ids_at == si.get("PCIDeviceID") and abi.sys_phys_io_at == si.get("gpuPhysIoAddr")
    assert (abi.rm_args_size, abi.sr_init_at, abi.gpu_instance_at, abi.dmem_stack_at, abi.profiler_at) == (
        ra_size, ra["srInitArguments"], ra["gpuInstance"], ra.get("bDmemStack"), ra["profilerArgs"])
    assert abi.queue_args_size == ra["srInitArguments"]
    # the emulated GSP-RM keeps its own table (written from the same document): it must agree too
    mock = nv_gsp.LAYOUTS[abi.branch]
    assert (mock["static_info"], mock["fb_regions"], mock["fb_length"], mock["name"], mock["short_name"]) == (
        st_size, st["fbRegionInfoParams"], st["fb_length"], st["gpuNameString"], st["gpuShortNameString"])
    assert (mock["system_info"], mock["config_mirror"], mock["pci_ids"], mock["queue_args"]) == (
        si_size, si["pciConfigMirrorBase"], si.get("PCIDeviceID"), ra["srInitArguments"])


def test_the_documented_numbers() -> None:
    """The figures docs/nv-gsp-layouts.md states, as literals (the walk above re-derives them)."""
    assert static_535()[0]["fb_length"] == 1752 and static_535()[0]["gpuNameString"] == 1820
    assert static_535()[1][0] == 2168 and system_535()[1][0] == 664 and rm_args(535)[1][0] == 80
    assert static_570()[0]["fb_length"] == 1224 and static_570()[0]["gpuNameString"] == 1260
    assert static_570()[1][0] == 1656 and system_570()[1][0] == 928 and rm_args(570)[1][0] == 72
    assert walk([("id8", U64), ("pa", U64), ("size", U64), ("kind", U8), ("loc", U8)])[1][0] == ENTRY.size == 32


def test_static_info_reply_built_by_hand_535() -> None:
    reply = bytearray(2168)
    struct.pack_into("<I", reply, 840, 2)
    struct.pack_into("<Q", reply, 1752, 16 << 30)
    reply[1820:1820 + 20] = b"NVIDIA RTX 4000 Ada\0"
    reply[1884:1884 + 6] = b"AD104\0"
    assert rpc.parse_static_info(bytes(reply), BRANCH_535) == {
        "gpu_name": "NVIDIA RTX 4000 Ada", "gpu_short_name": "AD104", "fb_size": 16 << 30, "fb_regions": 2}
    with pytest.raises(OperationFailed, match="2167 bytes, the 535 branch's GspStaticConfigInfo is 2168"):
        rpc.parse_static_info(bytes(reply[:-1]), BRANCH_535)
    assert rpc.static_info_request(BRANCH_535) == bytes(2168)


def test_static_info_reply_built_by_hand_570() -> None:
    reply = bytearray(1656)
    struct.pack_into("<Q", reply, 1224, 24 << 30)
    reply[1260:1260 + 8] = b"RTX 4090"
    assert rpc.parse_static_info(bytes(reply), BRANCH_570)["gpu_name"] == "RTX 4090"
    assert rpc.parse_static_info(bytes(reply), BRANCH_570)["fb_size"] == 24 << 30


def test_a_reply_in_another_branch_s_layout_is_refused() -> None:
    """A 570 boot answered with 535's (longer) GspStaticConfigInfo would read an empty name and 0 bytes of
    memory at the 570 offsets: refused, as is a reply with trailing bytes."""
    reply_535 = bytearray(2168)
    reply_535[1820:1820 + 8] = b"RTX 4090"
    with pytest.raises(OperationFailed, match="2168 bytes, the 570 branch's GspStaticConfigInfo is 1656"):
        rpc.parse_static_info(bytes(reply_535), BRANCH_570)
    with pytest.raises(OperationFailed, match="1657 bytes, the 570 branch's"):
        rpc.parse_static_info(bytes(1657), BRANCH_570)


IDS = {"pci_device_id": 0x268410DE, "pci_sub_device_id": 0x167C10DE, "pci_revision_id": 0xA1}
BARS = {0: 0xFB000000, 1: 0x6000000000, 3: 0x6010000000}


def test_system_info_535_fields_at_their_offsets() -> None:
    si = rpc.system_info(BARS, (3, 0, 1), IDS, BRANCH_535)
    expect = bytearray(664)
    struct.pack_into("<QQQQ", expect, 0, 0xFB000000, 0x6000000000, 0x6010000000, (3 << 8) + 1)
    struct.pack_into("<Q", expect, 56, 0x7FFFFFFFF000)
    struct.pack_into("<II", expect, 64, 0x88000, 0x1000)
    expect[608] = 1
    assert si == bytes(expect)  # and no PCI ids anywhere: 535's structure has no field for them
    assert struct.pack("<I", 0x268410DE) not in si


def test_system_info_570_fields_at_their_offsets() -> None:
    si = rpc.system_info(BARS, (3, 0, 1), IDS, BRANCH_570)
    expect = bytearray(928)
    struct.pack_into("<QQQ", expect, 0, 0xFB000000, 0x6000000000, 0x6010000000)
    struct.pack_into("<Q", expect, 32, (3 << 8) + 1)
    struct.pack_into("<QII", expect, 72, 0x7FFFFFFFF000, 0x88000, 0x1000)
    struct.pack_into("<III", expect, 88, 0x268410DE, 0x167C10DE, 0xA1)
    expect[840] = 1
    assert si == bytes(expect)


def test_rm_arguments_per_branch() -> None:
    q535 = queue_arguments(0x1234000, 0x1000, 0x41000, 129, BRANCH_535)
    assert q535 == struct.pack("<QI4xQQQQ", 0x1234000, 129, 0x1000, 0x41000, 0, 0)
    args = rm_arguments(q535, BRANCH_535)
    assert len(args) == 80 and args[:48] == q535 and args[48:] == bytes(32)  # no bDmemStack on 535
    q570 = queue_arguments(0x1234000, 0x1000, 0x41000, 129, BRANCH_570)
    assert q570 == struct.pack("<QI4xQQ", 0x1234000, 129, 0x1000, 0x41000)
    args = rm_arguments(q570, BRANCH_570)
    assert len(args) == 72 and args[48] == 1 and args[32:48] == bytes(16) and args[49:] == bytes(23)
    with pytest.raises(ValueError, match="the 535 branch's are 48"):
        rm_arguments(q570, BRANCH_535)


def test_versions_pick_their_branch_and_others_are_refused() -> None:
    assert layouts_for("535.261.03") is BRANCH_535 and layouts_for("570.144") is BRANCH_570
    for bad in ("550.40.82", "x.1", ""):
        with pytest.raises(Refused, match="does not know"):
            layouts_for(bad)


def test_a_570_set_boots_the_emulated_board_in_the_570_layouts(tmp_path: Path) -> None:
    nv_gspfw.write_set(str(tmp_path / "fw"), version="570.144")
    assert firmware_set(tmp_path) == tmp_path / "fw"
    result, err, board = boot(tmp_path)
    assert err is None, err
    gsp = board.secure.gsp_rm
    assert gsp.layout is nv_gsp.LAYOUTS[570] and not gsp.problems
    assert result.gsp["gpu_name"] == nv_gsp.GPU_NAME and result.gsp["fb_size"] == 24 << 30


def test_libos_entry_queue_header_and_element_bytes() -> None:
    """The structures both branches share, against bytes laid out by hand at the documented offsets."""
    entry = ENTRY.pack(id8("RMARGS"), 0x12345000, 0x1000, 1, 1)
    # id8 is the name packed big-endian into a u64, so little-endian in memory it reads backwards
    assert entry == b"SGRAMR\0\0" + bytes.fromhex("0050341200000000" "0010000000000000") + b"\x01\x01" + bytes(6)
    tx = rpc.TX.pack(0, 0x40000, 0x1000, 63, 5, 1, 32, 0x1000)
    assert tx[16:20] == (5).to_bytes(4, "little") and tx[24:28] == (32).to_bytes(4, "little")
    assert tx[28:32] == (0x1000).to_bytes(4, "little") and len(tx) == 32
    e = rpc.element(9, 65, b"")
    assert e[36:40] == (9).to_bytes(4, "little") and e[40:44] == (1).to_bytes(4, "little")
    assert e[48:52] == (0x03000000).to_bytes(4, "little") and e[52:56] == b"VRPC"
    assert e[56:60] == (32).to_bytes(4, "little") and e[60:64] == (65).to_bytes(4, "little") and len(e) == 80


def test_cli_refuses_a_firmware_set_of_an_unknown_branch_before_touching_the_board(tmp_path: Path) -> None:
    nv_gspfw.write_set(str(tmp_path / "fw"), version="550.40.82")
    state = tmp_path / "ad102.json"
    r = run("--device", f"mock:ad102,strict,state={state}", "nv", "boot", "--yes", "--firmware-dir",
            str(tmp_path / "fw"), "--allow-unknown-firmware")
    assert r.code == 2 and r.err.count("\n") == 1 and "550.40.82 is of a release branch" in r.err, r.err
    assert not state.exists()  # nothing booted, nothing written
