"""sysfs enumeration and ``lspci_line``: a fake tree (spec §13.1) and this machine's real /sys,
both checked against the real lspci (§13.3, §13.4). Everything here only reads sysfs."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.formats.test_formats_pciconfig import navi31_image, virtio_image
from tinyhw.errors import EnvironmentProblem
from tinyhw.formats.pciconfig import parse_config
from tinyhw.formats.pciids import PciIds
from tinyhw.pci.scan import (
    Resource,
    link_speed_gts,
    lspci_line,
    parse_bdf,
    parse_resource_text,
    read_function,
    scan,
    subsystem_line,
)

REAL_IDS = "/usr/share/misc/pci.ids"
REAL_SYSFS = "/sys/bus/pci/devices"
ZERO = "0x0000000000000000 0x0000000000000000 0x0000000000000000"


def run_lspci(*args: str) -> str:
    """stdout of the real lspci; fails (never skips) when it is missing, since it is the oracle."""
    exe = shutil.which("lspci")
    if exe is None:
        pytest.fail("lspci is not installed; these tests use it as the oracle (install pciutils)")
    return subprocess.run([exe, *args], capture_output=True, text=True, check=True).stdout


def ids_file() -> str:
    if not Path(REAL_IDS).exists():
        pytest.fail(f"{REAL_IDS} is missing; install the pci.ids package")
    return REAL_IDS


# -- a fake sysfs tree (§13.1) ---------------------------------------------------------------------------------


@dataclass
class Fake:
    bdf: str
    vendor: int
    device: int
    cls: int
    rev: int = 0
    sub: tuple[int, int] = (0, 0)
    driver: str | None = None
    dangling_driver: bool = False
    group: int | None = None
    resources: list[str] = field(default_factory=list)
    config: bytes | None = None
    link: tuple[str, str, int, int] | None = None  # current/max speed, current/max width


def header(f: Fake) -> bytes:
    img = bytearray(256)
    struct.pack_into("<HHHHBBBB", img, 0, f.vendor, f.device, 0x0006, 0, f.rev, f.cls & 0xFF, f.cls >> 8 & 0xFF,
                     f.cls >> 16)
    struct.pack_into("<HH", img, 0x2C, *f.sub)
    return bytes(img)


def make_tree(root: Path, fakes: list[Fake]) -> Path:
    """Build R/devices/pciDDDD:BB/<bdf>/..., R/bus/pci/devices/<bdf> links, drivers and iommu groups."""
    for f in fakes:
        dom_bus = f.bdf.rsplit(":", 1)[0]
        real = root / "devices" / f"pci{dom_bus}" / f.bdf
        real.mkdir(parents=True)
        attrs = {"vendor": f"0x{f.vendor:04x}", "device": f"0x{f.device:04x}", "class": f"0x{f.cls:06x}",
                 "revision": f"0x{f.rev:02x}", "subsystem_vendor": f"0x{f.sub[0]:04x}",
                 "subsystem_device": f"0x{f.sub[1]:04x}", "irq": "0", "numa_node": "-1", "enable": "1"}
        if f.link:
            attrs.update(current_link_speed=f.link[0], max_link_speed=f.link[1],
                         current_link_width=str(f.link[2]), max_link_width=str(f.link[3]))
        for name, value in attrs.items():
            (real / name).write_text(value + "\n")
        lines = f.resources or [ZERO] * 7
        (real / "resource").write_text("".join(line + "\n" for line in lines))
        (real / "config").write_bytes(f.config if f.config is not None else header(f))
        links = root / "bus" / "pci" / "devices"
        links.mkdir(parents=True, exist_ok=True)
        (links / f.bdf).symlink_to(f"../../../devices/pci{dom_bus}/{f.bdf}")
        if f.driver:
            if not f.dangling_driver:
                (root / "bus" / "pci" / "drivers" / f.driver).mkdir(parents=True, exist_ok=True)
            (real / "driver").symlink_to(f"../../../bus/pci/drivers/{f.driver}")
        if f.group is not None:
            (root / "kernel" / "iommu_groups" / str(f.group)).mkdir(parents=True, exist_ok=True)
            (real / "iommu_group").symlink_to(f"../../../kernel/iommu_groups/{f.group}")
    return root / "bus" / "pci" / "devices"


NAVI_RES = [
    "0x0000007800000000 0x000000780fffffff 0x000000000014220c",  # BAR0 256M 64-bit prefetchable
    ZERO,
    "0x0000007a00000000 0x0000007a001fffff 0x000000000014220c",  # BAR2 2M
    ZERO,
    "0x000000000000e000 0x000000000000e0ff 0x0000000000040101",  # BAR4 I/O
    "0x00000000fcc00000 0x00000000fccfffff 0x0000000000040200",  # BAR5 1M
    "0x00000000fcd00000 0x00000000fcd1ffff 0x0000000000046200",  # expansion ROM
] + [ZERO] * 6  # CONFIG_PCI_IOV: VF BARs 7-12

FAKES = [
    Fake("0000:00:00.0", 0x8086, 0x0D57, 0x060000),
    Fake("0000:00:01.0", 0x1AF4, 0x1045, 0xFFFF00, 1, (0x1AF4, 0x1045), "virtio-pci",
         resources=["0x0000004000000000 0x000000400007ffff 0x0000000000140204"] + [ZERO] * 6, config=virtio_image()),
    Fake("0000:03:00.0", 0x1002, 0x744C, 0x030000, 0xC8, (0x1DA2, 0xE471), "amdgpu", group=7, resources=NAVI_RES,
         config=navi31_image(), link=("8.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16)),
    Fake("0000:03:00.1", 0x1002, 0xAB30, 0x040300, 0, (0x1002, 0xAB30), "snd_hda_intel", dangling_driver=True),
    Fake("0000:0a:00.0", 0x1234, 0x9999, 0xEE0000, 0x10, (0xFFFF, 0xFFFF)),
    Fake("0000:0b:00.0", 0x1AF4, 0x1042, 0x0C0377, 0, (0x1AF4, 0x9999)),
    Fake("10000:00:02.0", 0x8086, 0x0D57, 0x010802, 0x02, (0x8086, 0x0D57)),  # VMD-style 5-digit domain
    Fake("2000:00:00.0", 0x10DE, 0x2684, 0x030000, 0xA1, (0x1043, 0x88E2)),
]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "sys", FAKES)


def test_scan_fake_tree_fields(tree: Path) -> None:
    devs = scan(str(tree))
    assert [d.address for d in devs] == ["0000:00:00.0", "0000:00:01.0", "0000:03:00.0", "0000:03:00.1",
                                         "0000:0a:00.0", "0000:0b:00.0", "2000:00:00.0", "10000:00:02.0"]
    navi = devs[2]
    assert (navi.vendor_id, navi.device_id, navi.class_code, navi.revision) == (0x1002, 0x744C, 0x030000, 0xC8)
    assert (navi.subsystem_vendor_id, navi.subsystem_id, navi.driver, navi.iommu_group) == (0x1DA2, 0xE471, "amdgpu", 7)
    assert (navi.domain, navi.bus, navi.slot, navi.function) == (0, 3, 0, 0) and navi.problems == []
    assert [(b.index, b.address, b.size, b.kind, b.prefetchable, b.is_64bit) for b in navi.bars] == [
        (0, 0x78_0000_0000, 256 << 20, "memory", True, True),
        (2, 0x7A_0000_0000, 2 << 20, "memory", True, True),
        (4, 0xE000, 256, "io", False, False),
        (5, 0xFCC00000, 1 << 20, "memory", False, False),
    ]
    assert navi.rom is not None and (navi.rom.start, navi.rom.size) == (0xFCD00000, 128 << 10)
    assert len(navi.resources) == 13
    assert (navi.current_link_speed, navi.max_link_speed, navi.current_link_width, navi.max_link_width) == (
        "8.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16)
    assert link_speed_gts(navi.current_link_speed) == 8.0 and link_speed_gts("Unknown") is None
    assert navi.identity.location == "0000:03:00.0" and navi.identity.class_code == 0x030000
    assert parse_config(navi.read_config()).resizable_bar.entries[0].current_size == 256 << 20
    assert devs[3].driver is None  # dangling link counts as unbound (§2.5)
    assert devs[0].driver is None and devs[0].iommu_group is None and devs[0].bars == [] and devs[0].rom is None
    assert devs[0].current_link_speed is None and devs[0].max_link_width is None
    assert (devs[7].domain, devs[7].address) == (0x10000, "10000:00:02.0")


def test_resource_flags_from_spec() -> None:
    """§2.4's observed line: MEM_64 | SIZEALIGN | MEM | 0x04 -> 64-bit non-prefetchable, 512 KiB."""
    res = parse_resource_text("0x0000004000000000 0x000000400007ffff 0x0000000000140204\n" + ZERO + "\n")
    assert res[0].bar_info().as_dict() == {"index": 0, "address": 0x40_0000_0000, "size": 512 << 10,
                                           "kind": "memory", "prefetchable": False, "is_64bit": True}
    assert res[1].size == 0 and res[1].bar_info() is None and res[1].kind is None  # not size 1 (tinygrad's pitfall)
    assert Resource(0, 0x1000, 0x1000, 0x200).size == 0
    assert not Resource(0, 0, 0xFFF, 0x20000200).assigned
    problems: list[str] = []
    assert parse_resource_text("garbage\n" + ZERO + "\n", problems)[0].index == 1 and "resource line 0" in problems[0]


def test_bad_attributes_and_roots(tmp_path: Path) -> None:
    devices = make_tree(tmp_path / "sys", [Fake("0000:05:00.0", 0x1AF4, 0x1041, 0x020000)])
    real = tmp_path / "sys" / "devices" / "pci0000:05" / "0000:05:00.0"
    (real / "vendor").unlink()
    (real / "device").write_text("zzz\n")
    (devices / "not-a-bdf").mkdir()
    (dev,) = scan(str(devices))
    assert dev.vendor_id == 0xFFFF
    assert dev.problems == ["vendor: missing or unreadable", "device: 'zzz' is not a number"]
    with pytest.raises(EnvironmentProblem, match="cannot list pci devices"):
        scan(str(tmp_path / "nowhere"))
    with pytest.raises(EnvironmentProblem, match="no pci function"):
        read_function(str(devices), "0000:06:00.0")
    assert parse_bdf("0000:00:20.0") is None and parse_bdf("00:01.0") is None
    assert parse_bdf("10000:ff:1f.7") == (0x10000, 0xFF, 0x1F, 7)


def lspci_blocks(out: str) -> list[list[str]]:
    return [b.splitlines() for b in out.strip().split("\n\n") if b.strip()]


@pytest.mark.parametrize("ids_path", ["real", "snippet", "missing"])
def test_fake_tree_lines_equal_lspci(tree: Path, tmp_path: Path, ids_path: str) -> None:
    """Names, fallbacks, ``(rev)``, ``(prog-if)`` and ``Subsystem:`` exactly as lspci prints them."""
    path = {"real": ids_file(), "missing": str(tmp_path / "none.ids"), "snippet": str(tmp_path / "s.ids")}[ids_path]
    Path(tmp_path / "s.ids").write_text("1af4  Red Hat\n\t1042  Blk\n\t\t1af4 9999  SubBlk\n8086  Intel\n"
                                        "C 0c  Serial\n\t03  USB\nC 06  Bridge\n")
    ids = PciIds.load(path)
    devs = scan(str(tree))
    sysfs = f"sysfs.path={tree.parent}"
    for flags, numeric in (("-Dnn", True), ("-D", False)):
        assert run_lspci("-O", sysfs, "-i", path, flags).splitlines() == [lspci_line(d, ids, numeric) for d in devs]
        blocks = lspci_blocks(run_lspci("-O", sysfs, "-i", path, flags + "v"))
        assert [b[0] for b in blocks] == [lspci_line(d, ids, numeric, verbose=True) for d in devs]
        theirs = [next((ln.strip() for ln in b if ln.startswith("\tSubsystem:")), None) for b in blocks]
        assert theirs == [subsystem_line(d, ids, numeric) for d in devs]


def region_text(b, command: int) -> str:
    """A BAR as lspci -vvv prints it (§4.4), for comparing BarInfo with lspci."""
    disabled = "" if command & (1 if b.kind == "io" else 2) else " [disabled]"
    size, unit = b.size, ""
    for u in ("K", "M", "G", "T"):
        if size % 1024:
            break
        size, unit = size // 1024, u
    if b.kind == "io":
        return f"Region {b.index}: I/O ports at {b.address:04x}{disabled} [size={size}{unit}]"
    width = "64-bit" if b.is_64bit else "32-bit"
    pref = "prefetchable" if b.prefetchable else "non-prefetchable"
    return f"Region {b.index}: Memory at {b.address:08x} ({width}, {pref}){disabled} [size={size}{unit}]"


def check_against_lspci_vvv(devices: str, out: str) -> None:
    """Capabilities (offsets, ids via names), regions and driver of every device agree with ``lspci -vvv``."""
    blocks = lspci_blocks(out)
    devs = scan(devices)
    assert len(blocks) == len(devs)
    for dev, block in zip(devs, blocks, strict=True):
        lines = [ln.strip() for ln in block]
        cfg = parse_config(dev.read_config())
        theirs = [ln for ln in lines if ln.startswith("Capabilities:")]
        if theirs == ["Capabilities: <access denied>"]:  # not root: 64 readable bytes (§2.7)
            assert cfg.capabilities == [] and "not readable" in cfg.problems[0]
            continue
        ours = [f"Capabilities: [{c.offset:02x}] " for c in cfg.capabilities]
        ours += [f"Capabilities: [{c.offset:03x} v{c.version}] " for c in cfg.ext_capabilities]
        assert len(theirs) == len(ours), dev.address
        for t, o, c in zip(theirs, ours, cfg.capabilities + cfg.ext_capabilities, strict=True):
            assert t.startswith(o), (dev.address, t, o)
            if c.id in ((0x01, 0x0D, 0x10, 0x15) if c.extended else (0x01, 0x05, 0x09, 0x10, 0x11)):
                assert c.name in t, (t, c.name)  # names lspci uses too
        regions = [region_text(b, cfg.header.command) for b in dev.bars]
        assert [ln for ln in lines if ln.startswith("Region ")] == regions
        driver = next((ln.split(": ", 1)[1] for ln in lines if ln.startswith("Kernel driver in use:")), None)
        assert driver == dev.driver
        flags = f"IOMMU group: {dev.iommu_group}"
        assert (flags in lines) == (dev.iommu_group is not None)
        assert f"Control: {cfg.header.control_line}" in lines and f"Status: {cfg.header.status_line}" in lines


def test_fake_tree_capabilities_equal_lspci(tree: Path) -> None:
    out = run_lspci("-O", f"sysfs.path={tree.parent}", "-i", ids_file(), "-D", "-vvv")
    check_against_lspci_vvv(str(tree), out)


# -- this machine's real sysfs (§13.4), read-only ---------------------------------------------------------------


@pytest.fixture
def real_sysfs() -> str:
    # The CI machine has PCI sysfs; a machine without it must not pass these tests by skipping them.
    assert os.path.isdir(REAL_SYSFS), f"{REAL_SYSFS} does not exist on this machine: no PCI sysfs to compare"
    return REAL_SYSFS


def test_real_sysfs_lines_equal_lspci(real_sysfs: str) -> None:
    ids = PciIds.load(ids_file())
    devs = scan(real_sysfs)
    assert devs, "no pci functions found in sysfs"
    assert run_lspci("-i", ids_file(), "-Dnn").splitlines() == [lspci_line(d, ids) for d in devs]
    assert run_lspci("-i", ids_file(), "-D").splitlines() == [lspci_line(d, ids, numeric_names=False) for d in devs]
    blocks = lspci_blocks(run_lspci("-i", ids_file(), "-Dnnv"))
    assert [b[0] for b in blocks] == [lspci_line(d, ids, verbose=True) for d in devs]
    theirs = [next((ln.strip() for ln in b if ln.startswith("\tSubsystem:")), None) for b in blocks]
    assert theirs == [subsystem_line(d, ids) for d in devs]
    numbers = run_lspci("-mm", "-n", "-D").splitlines()  # name-free identity fields (§13.3)
    for dev, line in zip(devs, numbers, strict=True):
        fields = line.replace('"', "").split()
        assert fields[:4] == [dev.address, f"{dev.class_code >> 8:04x}", f"{dev.vendor_id:04x}", f"{dev.device_id:04x}"]


def test_real_sysfs_capabilities_equal_lspci(real_sysfs: str) -> None:
    check_against_lspci_vvv(real_sysfs, run_lspci("-i", ids_file(), "-D", "-vvv"))
