"""Config-space decoding: the spec's worked examples (§3.13 virtio, §3.14 Navi31), malformed
images, BAR sizing, and property tests that random or mutated images never crash the parser.

The synthetic Navi31 image is also fed to the real lspci (``-A dump``, spec §13.3) so the
image built here is checked to be the one the spec describes, not just our reading of it.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinyhw.boards.navi31 import NAVI31
from tinyhw.formats.pcicaps import Acs, Aer, Msi, MsiX, PowerManagement, SrIov, size_label
from tinyhw.formats.pciconfig import bar_size_from_mask, parse_config
from tinyhw.formats.pciexpress import PciExpress

MiB, GiB = 1 << 20, 1 << 30

# -- images ---------------------------------------------------------------------------------------------

VIRTIO_XXD = """\
00000000: f41a 4510 0604 1000 0100 ffff 0000 0000
00000010: 0400 0000 4000 0000 0000 0000 0000 0000
00000020: 0000 0000 0000 0000 0000 0000 f41a 4510
00000030: 0000 0000 4000 0000 0000 0000 0000 0000
00000040: 0950 1001 0000 0000 0000 0000 3800 0000
00000050: 0960 1003 0000 0000 0020 0000 0100 0000
00000060: 0970 1004 0000 0000 0040 0000 0010 0000
00000070: 0984 1402 0000 0000 0060 0000 0010 0000
00000080: 0400 0000 0998 1405 0000 0000 0000 0000
00000090: 0000 0000 0000 0000 1100 0480 0080 0000
000000a0: 0080 0400 0000 0000 0000 0000 0000 0000
"""


def virtio_image() -> bytes:
    """§3.13's dump (first 0xb0 bytes as xxd prints them), padded with zeros to the 256-byte file."""
    out = bytearray()
    for line in VIRTIO_XXD.splitlines():
        out += bytes.fromhex("".join(line.split(":", 1)[1].split()))
    return bytes(out) + bytes(256 - len(out))


class Image:
    """A little-endian config-space image under construction."""

    def __init__(self, size: int = 4096) -> None:
        self.b = bytearray(size)

    def w8(self, off: int, v: int) -> None:
        self.b[off] = v

    def w16(self, off: int, v: int) -> None:
        struct.pack_into("<H", self.b, off, v)

    def w32(self, off: int, v: int) -> None:
        struct.pack_into("<I", self.b, off, v)


def navi31_image() -> bytes:
    """The 4 KiB image of §3.14, built from the spec's description."""
    m = Image()
    m.w16(0x00, 0x1002), m.w16(0x02, 0x744C), m.w16(0x04, 0x0006), m.w16(0x06, 0x0010)  # Mem+ BusMaster+, Cap+
    m.w8(0x08, 0xC8), m.w8(0x0B, 0x03), m.w8(0x0E, 0x80)  # rev c8, class 030000, multifunction
    m.w32(0x10, 0x0000000C), m.w32(0x14, 0x78)  # BAR0: 64-bit prefetchable at 0x78_0000_0000
    m.w32(0x18, 0x0000000C), m.w32(0x1C, 0x7A)  # BAR2: 64-bit prefetchable at 0x7a_0000_0000
    m.w32(0x20, 0xE001), m.w32(0x24, 0xFCC00000)  # BAR4 I/O e000, BAR5 32-bit
    m.w16(0x2C, 0x1DA2), m.w16(0x2E, 0xE471), m.w8(0x34, 0x50), m.w8(0x3D, 1)
    m.w8(0x50, 0x01), m.w8(0x51, 0x64), m.w16(0x52, 0x0003)  # PM v3 -> 0x64
    m.w8(0x64, 0x10), m.w8(0x65, 0xA0), m.w16(0x66, 0x0002)  # Express v2 endpoint -> 0xa0
    m.w32(0x68, 0x10008022)  # DevCap: MPS 512, ExtTag, RBE, FLR
    m.w16(0x6C, 0x2930)  # DevCtl: RlxdOrd, MPS 256, ExtTag, NoSnoop, MRRS 512
    m.w32(0x70, 0x00028904)  # LnkCap: port 0, 16GT/s, x16, ASPM L1, L1 exit <32us
    m.w16(0x76, 0x0103)  # LnkSta: 8GT/s x16
    m.w32(0x90, 0x1E), m.w16(0x94, 0x4)  # LnkCap2 2.5-16GT/s, LnkCtl2 target 16GT/s
    m.w8(0xA0, 0x05), m.w16(0xA2, 0x0080)  # MSI, 64-bit, end of chain
    m.w32(0x100, 0x15020001), m.w32(0x110, 0x2000)  # AER v2 -> 0x150; CESta AdvNonFatalErr
    m.w32(0x150, 0x20010010)  # SR-IOV v1 -> 0x200
    m.w16(0x15C, 16), m.w16(0x15E, 16), m.w16(0x164, 4), m.w16(0x166, 1), m.w16(0x16A, 0x73AE)
    m.w32(0x200, 0x24010015)  # ReBAR v1 -> 0x240
    m.w32(0x204, 0x000FF000), m.w32(0x208, 0x840), m.w32(0x20C, 0x1FE0), m.w32(0x210, 0x102)
    m.w32(0x240, 0x0001000D), m.w16(0x244, 0x1F)  # ACS v1, end
    return bytes(m.b)


def lspci_dump_text(img: bytes, slot: str = "03:00.0") -> str:
    rows = [f"{slot} device"] + [f"{o:02x}: " + " ".join(f"{x:02x}" for x in img[o : o + 16])
                                 for o in range(0, len(img), 16)]
    return "\n".join(rows) + "\n\n"


def run_lspci(*args: str) -> str:
    exe = shutil.which("lspci")
    if exe is None:
        pytest.fail("lspci is not installed; these tests use it as the oracle (install pciutils)")
    return subprocess.run([exe, *args], capture_output=True, text=True, check=True).stdout


# -- §3.13 virtio ------------------------------------------------------------------------------------------


def test_virtio_worked_example() -> None:
    cfg = parse_config(virtio_image())
    h = cfg.header
    assert cfg.problems == [] and cfg.length == 256
    assert (h.vendor_id, h.device_id, h.command, h.status) == (0x1AF4, 0x1045, 0x0406, 0x0010)
    assert h.control_line == ("I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr- Stepping- SERR- FastB2B- "
                              "DisINTx+")
    assert h.status_line == ("Cap+ 66MHz- UDF- FastB2B- ParErr- DEVSEL=fast >TAbort- <TAbort- <MAbort- >SERR- "
                             "<PERR- INTx-")
    assert (h.revision, h.prog_if, h.subclass, h.base_class, h.class_code) == (1, 0, 0xFF, 0xFF, 0xFFFF00)
    assert (h.header_type, h.multifunction, h.cache_line_size, h.latency_timer, h.bist) == (0, False, 0, 0, 0)
    t0 = cfg.type0
    assert t0 is not None and cfg.type1 is None
    bar0 = cfg.bars[0]
    assert (bar0.index, bar0.kind, bar0.is_64bit, bar0.prefetchable, bar0.address) == (0, "memory", True, False,
                                                                                          0x40_0000_0000)
    assert bar0.type_label == "64-bit" and bar0.raw_high == 0x40
    assert [b.index for b in cfg.bars] == [0, 2, 3, 4, 5]  # slot 1 is BAR0's upper half
    assert (t0.subsystem_vendor_id, t0.subsystem_id, t0.cap_pointer, t0.interrupt_pin) == (0x1AF4, 0x1045, 0x40, 0)
    assert [(c.offset, c.id, c.next) for c in cfg.capabilities] == [
        (0x40, 9, 0x50), (0x50, 9, 0x60), (0x60, 9, 0x70), (0x70, 9, 0x84), (0x84, 9, 0x98), (0x98, 0x11, 0)]
    msix = cfg.capabilities[-1].data
    assert isinstance(msix, MsiX) and cfg.capabilities[-1].name == "MSI-X"
    assert (msix.enabled, msix.function_mask, msix.table_size) == (True, False, 5)
    assert (msix.table_bir, msix.table_offset, msix.pba_bir, msix.pba_offset) == (0, 0x8000, 0, 0x48000)
    assert cfg.ext_capabilities == [] and cfg.express is None


# -- §3.14 Navi31 ----------------------------------------------------------------------------------------------


def test_navi31_header_and_bars() -> None:
    cfg = parse_config(navi31_image())
    h = cfg.header
    assert cfg.problems == [] and cfg.length == 4096
    assert (h.vendor_id, h.device_id, h.revision, h.class_code, h.multifunction) == (0x1002, 0x744C, 0xC8, 0x030000,
                                                                                      True)
    assert h.control_line.startswith("I/O- Mem+ BusMaster+ ")
    bars = {b.index: b for b in cfg.bars}
    assert sorted(bars) == [0, 2, 4, 5]
    assert (bars[0].is_64bit, bars[0].prefetchable, bars[0].address) == (True, True, 0x78_0000_0000)
    assert (bars[2].is_64bit, bars[2].prefetchable, bars[2].address) == (True, True, 0x7A_0000_0000)
    assert (bars[4].kind, bars[4].address) == ("io", 0xE000)
    assert (bars[5].kind, bars[5].is_64bit, bars[5].prefetchable, bars[5].address) == ("memory", False, False,
                                                                                       0xFCC00000)
    for b in NAVI31.bars:  # the board facts agree with the image
        assert (bars[b.index].kind, bars[b.index].is_64bit, bars[b.index].prefetchable) == (b.kind, b.is_64bit,
                                                                                           b.prefetchable)
    assert (cfg.type0.subsystem_vendor_id, cfg.type0.subsystem_id) == (0x1DA2, 0xE471)
    assert [(c.offset, c.id) for c in cfg.capabilities] == [(0x50, 0x01), (0x64, 0x10), (0xA0, 0x05)]
    pm, msi = cfg.capabilities[0].data, cfg.capabilities[2].data
    assert isinstance(pm, PowerManagement) and (pm.version, pm.state_name) == (3, "D0")
    assert isinstance(msi, Msi) and msi.summary == "Enable- Count=1/1 Maskable- 64bit+"


def test_navi31_express() -> None:
    e = parse_config(navi31_image()).express
    assert isinstance(e, PciExpress)
    assert (e.version, e.port_type_name, e.interrupt_message, e.has_link) == (2, "Endpoint", 0, True)
    dc, ctl, sta = e.devcap, e.devctl, e.devsta
    assert (dc.max_payload, dc.phantom_functions, dc.l0s_latency, dc.l1_latency) == (512, 0, "<64ns", "<1us")
    assert (dc.ext_tag, dc.role_based_errors, dc.flr, dc.slot_power_limit_w) == (True, True, True, 0.0)
    assert (ctl.corr_err, ctl.nonfatal_err, ctl.fatal_err, ctl.unsup_req) == (False,) * 4
    assert (ctl.relaxed_ordering, ctl.ext_tag, ctl.phantom_functions, ctl.aux_power, ctl.no_snoop) == (
        True, True, False, False, True)
    assert (ctl.initiate_flr, ctl.max_payload, ctl.max_read_request) == (False, 256, 512)
    assert not any((sta.corr_err, sta.fatal_err, sta.transactions_pending))
    lc, ls = e.lnkcap, e.lnksta
    assert (lc.port, lc.speed, lc.max_width, lc.aspm, lc.l1_exit) == (0, "16GT/s", 16, "L1", "<32us")
    assert (ls.speed, ls.width, e.speed_downgraded, e.width_downgraded) == ("8GT/s", 16, True, False)
    assert (lc.max_speed, lc.max_width) == (NAVI31.link_max_speed, NAVI31.link_max_width)
    assert e.lnkcap2 is not None and e.lnkcap2.speeds == [1, 2, 3, 4] and e.lnkcap2.speeds_label == "2.5-16GT/s"
    assert e.lnkctl2 is not None and (e.lnkctl2.target, e.lnkctl2.enter_compliance, e.lnkctl2.speed_disable) == (
        "16GT/s", False, False)


def test_navi31_extended_capabilities() -> None:
    cfg = parse_config(navi31_image())
    assert [(c.offset, c.id, c.version) for c in cfg.ext_capabilities] == [
        (0x100, 0x01, 2), (0x150, 0x10, 1), (0x200, 0x15, 1), (0x240, 0x0D, 1)]
    aer, sriov, rebar, acs = (c.data for c in cfg.ext_capabilities)
    assert isinstance(aer, Aer) and aer.correctable_errors == ["AdvNonFatalErr"]
    assert aer.correctable_line == "RxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+"
    assert aer.uncorrectable_errors == [] and aer.root_command is None
    assert isinstance(sriov, SrIov)
    assert (sriov.initial_vfs, sriov.total_vfs, sriov.num_vfs, sriov.function_dependency_link) == (16, 16, 0, 0)
    assert (sriov.vf_offset, sriov.vf_stride, sriov.vf_device_id, sriov.vf_enabled) == (4, 1, 0x73AE, False)
    assert sriov.vf_routing_id(0x0300, 1) == 0x0304 and sriov.vf_routing_id(0x0300, 16) == 0x0313
    assert rebar is cfg.resizable_bar and not rebar.virtual
    e0, e1 = rebar.entries
    assert (e0.bar, e0.current_size, e0.supported_sizes) == (0, 256 * MiB, NAVI31.rebar_sizes)
    assert e0.supported_sizes[0] == 256 * MiB and e0.supported_sizes[-1] == 32 * GiB
    assert (e1.bar, e1.current_size, e1.supported_sizes[0], e1.supported_sizes[-1]) == (2, 2 * MiB, 2 * MiB, 256 * MiB)
    assert e0.summary == "BAR 0: current size: 256MB, supported: 256MB 512MB 1GB 2GB 4GB 8GB 16GB 32GB"
    assert e1.summary == "BAR 2: current size: 2MB, supported: 2MB 4MB 8MB 16MB 32MB 64MB 128MB 256MB"
    assert isinstance(acs, Acs)
    assert acs.capability_line == "SrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"


SPEC_LINES = [  # verbatim from §3.14
    "Region 0: Memory at 7800000000 (64-bit, prefetchable)",
    "Region 4: I/O ports at e000 [disabled]",
    "Region 5: Memory at fcc00000 (32-bit, non-prefetchable)",
    "Capabilities: [64] Express (v2) Endpoint, MSI 00",
    "LnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L1, Exit Latency L1 <32us",
    "LnkSta:\tSpeed 8GT/s (downgraded), Width x16",
    "CESta:\tRxErr- BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr+",
    "VF offset: 4, stride: 1, Device ID: 73ae",
    "BAR 0: current size: 256MB, supported: 256MB 512MB 1GB 2GB 4GB 8GB 16GB 32GB",
    "BAR 2: current size: 2MB, supported: 2MB 4MB 8MB 16MB 32MB 64MB 128MB 256MB",
    "ACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-",
]


@pytest.mark.parametrize("make", [navi31_image, virtio_image])
def test_images_agree_with_lspci_dump_mode(make, tmp_path: Path) -> None:
    """lspci decodes our images: capability offsets match ours, and the Navi31 image reproduces §3.14."""
    img = make()
    dump = tmp_path / "dump.txt"
    dump.write_text(lspci_dump_text(img))
    out = run_lspci("-A", "dump", "-O", f"dump.name={dump}", "-vvv")
    lines = [ln.strip() for ln in out.splitlines()]
    cfg = parse_config(img)
    theirs = [ln.split("]")[0].split("[")[1] for ln in lines if ln.startswith("Capabilities: [")]
    ours = [f"{c.offset:02x}" for c in cfg.capabilities]
    ours += [f"{c.offset:03x} v{c.version}" for c in cfg.ext_capabilities]
    assert theirs == ours
    if make is navi31_image:
        for want in SPEC_LINES:
            assert want.strip() in lines
        e = cfg.express
        assert f"LnkSta:\tSpeed {e.lnksta.speed} (downgraded), Width x{e.lnksta.width}" in lines
        assert f"LnkCap2: Supported Link Speeds: {e.lnkcap2.speeds_label}, Crosslink- Retimer- 2Retimers- DRS-" in lines
    assert f"Control: {cfg.header.control_line}" in lines and f"Status: {cfg.header.status_line}" in lines


# -- malformed images (§3.6, §3.8 guards) -------------------------------------------------------------------------


def endpoint(size: int = 256, caps: dict[int, tuple[int, int]] | None = None, ptr: int = 0x40) -> Image:
    m = Image(size)
    m.w16(0, 0x1234), m.w16(2, 0x5678), m.w16(6, 0x10), m.w8(0x34, ptr)
    for off, (cap_id, nxt) in (caps or {}).items():
        m.w8(off, cap_id), m.w8(off + 1, nxt)
    return m


def test_capability_loop_is_detected() -> None:
    cfg = parse_config(bytes(endpoint(caps={0x40: (0x09, 0x50), 0x50: (0x09, 0x40)}).b))
    assert [c.offset for c in cfg.capabilities] == [0x40, 0x50]
    assert cfg.problems == ["0x040: capability chain looped"]


def test_capability_chain_broken_and_bad_pointers() -> None:
    cfg = parse_config(bytes(endpoint(caps={0x40: (0x09, 0x60), 0x60: (0xFF, 0x70)}).b))
    assert [c.offset for c in cfg.capabilities] == [0x40] and "chain broken" in cfg.problems[0]
    cfg = parse_config(bytes(endpoint(caps={0x40: (0x09, 0x20)}).b))
    assert [c.offset for c in cfg.capabilities] == [0x40] and cfg.problems[0].startswith("0x020: capability pointer")
    m = endpoint(caps={0x40: (0x09, 0)})
    m.w16(6, 0)  # Status Cap- : the pointer is not followed
    assert parse_config(bytes(m.b)).capabilities == []


def test_short_image_reports_unreadable_capabilities() -> None:
    """Non-root sysfs reads give 64 bytes (§2.7): the header decodes, the list is 'access denied'."""
    img = bytes(endpoint(caps={0x40: (0x11, 0)}).b)
    cfg = parse_config(img[:64])
    assert cfg.header.vendor_id == 0x1234 and cfg.capabilities == []
    assert cfg.problems == ["0x040: capability not readable (config space ends at 0x40)"]
    assert parse_config(img[:10]).header is None and "0x10 bytes" in parse_config(img[:10]).problems[0]


def test_capability_cut_short_keeps_entry() -> None:
    cfg = parse_config(bytes(endpoint(caps={0xFC: (0x11, 0)}, ptr=0xFC).b))
    assert [c.offset for c in cfg.capabilities] == [0xFC] and cfg.capabilities[0].data is None
    assert "MSI-X capability cut short" in cfg.problems[0]


def express_endpoint() -> Image:
    m = endpoint(4096, caps={0x40: (0x10, 0)})
    m.w16(0x42, 0x0002)
    return m


def test_extended_walk_guards() -> None:
    m = express_endpoint()
    m.w32(0x100, 0x2000000B), m.w32(0x200, 0x1000000B)  # 0x100 -> 0x200 -> 0x100
    cfg = parse_config(bytes(m.b))
    assert [c.offset for c in cfg.ext_capabilities] == [0x100, 0x200]
    assert cfg.problems == ["0x100: extended capability chain looped"]
    m.w32(0x200, 0x0800000B)  # next 0x080 < 0x100
    assert "expected >= 0x100" in parse_config(bytes(m.b)).problems[0]
    m.w32(0x200, 0xFFFFFFFF)
    cfg = parse_config(bytes(m.b))
    assert [c.offset for c in cfg.ext_capabilities] == [0x100] and "0xffffffff" in cfg.problems[0]
    m.w32(0x100, 0)
    cfg = parse_config(bytes(m.b))
    assert cfg.ext_capabilities == [] and cfg.problems == []


def test_extended_space_only_walked_for_express() -> None:
    m = endpoint(4096, caps={0x40: (0x09, 0)})
    m.w32(0x100, 0x0001000D)
    assert parse_config(bytes(m.b)).ext_capabilities == []


def test_rebar_bad_count_and_virtual() -> None:
    m = express_endpoint()
    m.w32(0x100, 0x00010024), m.w32(0x104, 0x30), m.w32(0x108, 0x0000_0103)  # nbars 0, virtual ReBAR
    cfg = parse_config(bytes(m.b))
    rebar = cfg.ext_capabilities[0].data
    assert rebar.virtual and rebar.entries[0].supported_sizes == (1 * MiB, 2 * MiB)
    assert rebar.entries[0].bar == 3 and rebar.entries[0].current_size == 2 * MiB
    assert "resizable bar count 0" in cfg.problems[0]


def test_rebar_large_sizes_from_control_word() -> None:
    m = express_endpoint()
    m.w32(0x100, 0x00010015), m.w32(0x104, 0x80000000), m.w32(0x108, 0x0001_1B20)  # 128TB, 256TB; current 128TB
    e = parse_config(bytes(m.b)).resizable_bar.entries[0]
    assert e.supported_sizes == (1 << 47, 1 << 48) and e.current_size == 1 << 47
    assert [size_label(s) for s in e.supported_sizes] == ["128TB", "256TB"]
    assert size_label(1 << 60) == "1EB" and size_label(1 << 50) == "1PB"


def test_type1_bridge_header() -> None:
    m = Image(256)
    m.w16(0, 0x8086), m.w16(2, 0x1234), m.w8(0x0E, 0x01), m.w8(0x0B, 0x06), m.w8(0x0A, 0x04)
    m.w32(0x18, 0x00050400)  # primary 0, secondary 4, subordinate 5
    m.w8(0x1C, 0x11), m.w8(0x1D, 0x21), m.w16(0x30, 0x0001), m.w16(0x32, 0x0001)  # 32-bit I/O 0x1_1000-0x1_2fff
    m.w16(0x20, 0xFC00), m.w16(0x22, 0xFCF0)  # memory fc000000-fcffffff
    m.w16(0x24, 0x0001), m.w16(0x26, 0xFFF1), m.w32(0x28, 0x78), m.w32(0x2C, 0x7B)  # 64-bit prefetchable
    m.w16(0x3E, 0x0048)  # VGA + secondary bus reset
    cfg = parse_config(bytes(m.b))
    t1 = cfg.type1
    assert cfg.problems == [] and cfg.type0 is None and len(cfg.bars) == 2
    assert (t1.primary_bus, t1.secondary_bus, t1.subordinate_bus) == (0, 4, 5)
    assert (t1.io_window.base, t1.io_window.limit, t1.io_window.wide) == (0x11000, 0x12FFF, True)
    assert (t1.memory_window.base, t1.memory_window.limit, t1.memory_window.size) == (0xFC000000, 0xFCFFFFFF, 16 * MiB)
    pw = t1.prefetchable_window
    assert (pw.base, pw.limit, pw.wide) == (0x78_0000_0000, 0x7B_FFFF_FFFF, True)
    assert t1.vga_enable and t1.secondary_bus_reset
    m.w16(0x20, 0xFFF0), m.w16(0x22, 0x0000)  # base > limit: disabled
    assert not parse_config(bytes(m.b)).type1.memory_window.enabled
    m.w8(0x1C, 0x12)
    assert "i/o window types 2/1" in parse_config(bytes(m.b)).problems[0]


def test_header_problems() -> None:
    gone = parse_config(b"\xff" * 256)
    assert gone.problems == ["0x000: vendor id 0xffff (no function answers; device gone or link down)"]
    m = endpoint()
    m.w8(0x0E, 0x05)
    assert parse_config(bytes(m.b)).problems == ["0x00e: header layout 5 (expected 0, 1 or 2)"]
    m = endpoint()
    m.w32(0x24, 0x4)  # 64-bit BAR in the last slot
    assert "bar5 is 64-bit but has no upper slot" in parse_config(bytes(m.b)).problems[0]


def test_callable_source_reads_lazily() -> None:
    img = navi31_image()
    reads: list[tuple[int, int]] = []

    def read(off: int, n: int) -> bytes:
        reads.append((off, n))
        return img[off : off + n]

    cfg = parse_config(read)
    assert [c.offset for c in cfg.ext_capabilities] == [0x100, 0x150, 0x200, 0x240] and cfg.problems == []
    assert all(n == 4 and off % 4 == 0 for off, n in reads)
    assert len(reads) == len(set(reads)) < 200  # cached, and far from all 1024 dwords
    short = parse_config(lambda off, n: img[off : off + n] if off < 64 else b"")
    assert short.header.device_id == 0x744C and short.capabilities == []
    assert short.length == 0x50  # read lazily: the first short read was the capability at 0x50
    assert short.problems == ["0x050: capability not readable (config space ends at 0x50)"]


# -- BAR sizing (§3.5) ------------------------------------------------------------------------------------------


def test_bar_size_from_mask() -> None:
    assert bar_size_from_mask(0xFFF00000, None, False) == 1 * MiB
    assert bar_size_from_mask(0xFFF80008, None, False) == 512 * 1024  # prefetchable flag masked off
    assert bar_size_from_mask(0xF000000C, 0xFFFFFFFF, False) == 256 * MiB
    assert bar_size_from_mask(0x0000000C, 0xFFFFFFF8, False) == 32 * GiB
    assert bar_size_from_mask(0xFFFFFF01, None, True) == 256
    assert bar_size_from_mask(0x0000FF01, None, True) == 256  # 16-bit I/O decode
    assert bar_size_from_mask(0, None, False) == 0 and bar_size_from_mask(0, 0, False) == 0
    with pytest.raises(ValueError):
        bar_size_from_mask(0xFF01, 0, True)


@settings(max_examples=200)
@given(k=st.integers(4, 63), prefetch=st.booleans())
def test_bar_size_property_memory(k: int, prefetch: bool) -> None:
    size = 1 << k
    mask = ((1 << 64) - size) | (0xC if prefetch else 0x4)
    assert bar_size_from_mask(mask & 0xFFFFFFFF, mask >> 32, False) == size
    if k < 32:
        assert bar_size_from_mask(((1 << 32) - size) | (0x8 if prefetch else 0), None, False) == size


# -- never crash ------------------------------------------------------------------------------------------------


def check_invariants(cfg) -> None:
    assert all(isinstance(p, str) and p.startswith("0x") for p in cfg.problems)
    offsets = [c.offset for c in cfg.capabilities]
    assert len(offsets) == len(set(offsets)) <= 48 and all(0x40 <= o <= 0xFC for o in offsets)
    ext = [c.offset for c in cfg.ext_capabilities]
    assert len(ext) == len(set(ext)) and all(0x100 <= o < 4096 for o in ext)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=0, max_size=4096))
def test_random_bytes_never_crash(data: bytes) -> None:
    check_invariants(parse_config(data))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4095), st.integers(0, 255)), max_size=24),
       st.sampled_from([64, 256, 4096, 300, 1000]))
def test_mutated_images_never_crash(mutations: list[tuple[int, int]], length: int) -> None:
    for base in (navi31_image(), virtio_image()):
        img = bytearray(base)
        for off, val in mutations:
            if off < len(img):
                img[off] = val
        cfg = parse_config(bytes(img[:length]))
        check_invariants(cfg)
        if not any(off < 0x10 for off, _ in mutations):
            assert cfg.header == parse_config(base).header
