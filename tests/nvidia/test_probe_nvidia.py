"""The NVIDIA probe tiers (specs/nv-bringup.md §15) against a fake sysfs/procfs tree with a file-backed BAR0.

An audit hook records every file opened (with its flags) and every mapping made under the fake trees, so
the tests assert the exact set of files and BAR0 pages touched at each tier: tier 0 opens attribute files
only (never ``config``, never ``resource0``); tier 2 adds ``resource0`` opened read-only and one read-only
page mapping per register page; nothing is ever opened for writing; the PROM window is never mapped.
"""

from __future__ import annotations

import json
import os
import struct
import sys
from pathlib import Path

import pytest
from clihelp import run
from nvromhelp import build_rom

from tests.transport.test_pci_scan import ZERO, Fake, make_tree

BDF = "0000:01:00.0"
RES = [
    "0x00000000fb000000 0x00000000fbffffff 0x0000000000040200",  # BAR0 16M registers
    "0x0000006000000000 0x000000600fffffff 0x000000000014220c",  # BAR1 256M 64-bit prefetchable
    ZERO,
    "0x0000006010000000 0x0000006011ffffff 0x000000000014220c",  # BAR3 32M
    ZERO,
    "0x000000000000f000 0x000000000000f07f 0x0000000000040101",  # BAR5 I/O
    ZERO,
]
GH100_BOOT42 = 0x180A1000
AD102_BOOT42 = 0x192A1000

_RECORD: list[tuple[str, object, object]] | None = None
_ROOTS: tuple[str, ...] = ()


def _hook(event: str, args: tuple) -> None:
    if _RECORD is None:
        return
    if event == "open" and isinstance(args[0], (str, bytes, os.PathLike)):
        path = os.fsdecode(args[0])
        if path.startswith(_ROOTS):
            _RECORD.append(("open", path, args[2]))
    elif event == "mmap.__new__":
        _RECORD.append(("mmap", args[1], args[3]))


sys.addaudithook(_hook)


class Recorder:
    def __init__(self, *roots: Path) -> None:
        self.roots = tuple(str(r) for r in roots)
        self.events: list[tuple[str, object, object]] = []

    def __enter__(self) -> Recorder:
        global _RECORD, _ROOTS
        _RECORD, _ROOTS = self.events, self.roots
        return self

    def __exit__(self, *exc: object) -> None:
        global _RECORD
        _RECORD = None

    def opened(self, base: Path) -> set[str]:
        return {os.path.relpath(str(p), base) for kind, p, _f in self.events if kind == "open"}

    def flags(self) -> set[int]:
        return {int(f) & os.O_ACCMODE for kind, _p, f in self.events if kind == "open"}

    def order(self, base: Path) -> list[str]:
        """Every file opened under ``base``, in the order of the opens (repeats kept)."""
        return [os.path.relpath(str(p), base) for kind, p, _f in self.events if kind == "open"]

    def maps(self) -> list[tuple[int, int]]:
        return sorted((int(n), int(o)) for kind, n, o in self.events if kind == "mmap")


def make(tmp_path: Path, *, driver: str | None = "nvidia", power: str = "D0", runtime: str = "active",
         boot42: int = AD102_BOOT42, boot0: int = 0x192000A1, wpr2: int = 0x00FFFF00, rom: bytes | None = None,
         proc: bool = True, device: int = 0x2684) -> tuple[Path, Path]:
    sysfs, procfs = tmp_path / "sys", tmp_path / "proc"
    make_tree(sysfs, [Fake(BDF, 0x10DE, device, 0x030000, 0xA1, (0x10DE, 0x167C), driver, group=12, resources=RES,
                           link=("16.0 GT/s PCIe", "16.0 GT/s PCIe", 16, 16))])
    dev = sysfs / "bus" / "pci" / "devices" / BDF
    (dev / "power_state").write_text(power + "\n")
    (dev / "power").mkdir()
    (dev / "power" / "runtime_status").write_text(runtime + "\n")
    bar0 = bytearray(16 << 20)
    for off, val in ((0x0, boot0), (0xA00, boot42), (0x1183A4, 81920 if boot42 == GH100_BOOT42 else 24576),
                     (0x118234, 0xFF), (0x1FA828, wpr2)):
        struct.pack_into("<I", bar0, off, val)
    if rom is not None:
        bar0[0x300000:0x300000 + len(rom)] = rom
    (dev / "resource0").write_bytes(bytes(bar0))
    if proc:
        (sysfs / "module" / "nvidia").mkdir(parents=True)
        (sysfs / "module" / "nvidia" / "version").write_text("570.144\n")
        gpu = procfs / "driver" / "nvidia" / "gpus" / BDF
        gpu.mkdir(parents=True)
        (procfs / "driver" / "nvidia" / "version").write_text(
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.144  Release Build\n")
        (gpu / "information").write_text("Model: \t\t NVIDIA GeForce RTX 4090\nVideo BIOS: \t 95.02.18.80.00\n")
    return sysfs, procfs


TIER0_FILES = {f"bus/pci/devices/{BDF}/{n}" for n in (
    "vendor", "device", "class", "revision", "subsystem_vendor", "subsystem_device", "resource",
    "current_link_speed", "max_link_speed", "current_link_width", "max_link_width", "numa_node", "power_state",
    "power/runtime_status")}
DRIVER_FILES = {"module/nvidia/version", "../proc/driver/nvidia/version",
                f"../proc/driver/nvidia/gpus/{BDF}/information"}


def _env(monkeypatch: pytest.MonkeyPatch, sysfs: Path, procfs: Path) -> None:
    monkeypatch.setenv("TINYHW_SYSFS", str(sysfs))
    monkeypatch.setenv("TINYHW_PROCFS", str(procfs))


def test_tier0_reads_attribute_files_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path)
    _env(monkeypatch, sysfs, procfs)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    (tmp_path / f"nv_{BDF}.lock").write_text("")
    with Recorder(tmp_path) as rec:
        r = run("--device", f"pci:{BDF}", "--json", "probe")
    assert r.code == 0, r.err
    assert rec.opened(sysfs) == TIER0_FILES | DRIVER_FILES
    assert rec.flags() == {os.O_RDONLY} and rec.maps() == []
    doc = json.loads(r.out)
    assert doc["tier"] == 0 and doc["driver"] == "nvidia" and doc["iommu_group"] == 12
    assert (doc["power_state"], doc["runtime_status"]) == ("D0", "active")
    assert [b["index"] for b in doc["bars"]] == [0, 1, 3, 5] and doc["bars"][0]["size"] == 16 << 20
    assert doc["link"]["current_width"] == 16 and doc["nvidia_driver"]["version"] == "570.144"
    assert "95.02.18.80.00" in doc["nvidia_driver"]["files"]["gpu_information"]
    assert doc["vbios_version"] == "95.02.18.80.00"  # from the driver's information file, never the prom
    assert "chip" not in doc and "registers" not in doc
    assert doc["tinygrad_lock"] == str(tmp_path / f"nv_{BDF}.lock")  # seen, never opened (the set above)


WAKING = ("current_link_speed", "current_link_width", "max_link_width")  # Linux 6.12 pci-sysfs.c: they resume
POWER = ("power_state", "power/runtime_status")


def _attr_order(rec: Recorder, sysfs: Path) -> list[str]:
    prefix = f"bus/pci/devices/{BDF}/"
    return [p.removeprefix(prefix) for p in rec.order(sysfs) if p.startswith(prefix)]


def test_tier0_reads_the_power_state_before_any_attribute_that_wakes(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path)
    _env(monkeypatch, sysfs, procfs)
    with Recorder(tmp_path) as rec:
        r = run("--device", f"pci:{BDF}", "--json", "probe")
    assert r.code == 0, r.err
    ids = ["vendor", "device", "class", "revision", "subsystem_vendor", "subsystem_device", "resource"]
    assert _attr_order(rec, sysfs) == [
        *POWER, *ids, "max_link_speed", *WAKING,  # the transport's open: power first, then the rest
        *POWER, "numa_node", "max_link_speed", *WAKING]  # tier 0: power first again (driver/iommu: links)
    doc = json.loads(r.out)
    assert doc["not_read"] is None and doc["link"]["current_width"] == 16


@pytest.mark.parametrize(("power", "runtime"), [("D3cold", "suspended"), ("D0", "suspended"), ("D3hot", "active")])
def test_tier0_of_a_sleeping_gpu_never_reads_what_would_wake_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               power: str, runtime: str) -> None:
    sysfs, procfs = make(tmp_path, power=power, runtime=runtime)
    _env(monkeypatch, sysfs, procfs)
    with Recorder(tmp_path) as rec:
        r = run("--device", f"pci:{BDF}", "--json", "probe")
    assert r.code == 0, r.err
    order = _attr_order(rec, sysfs)
    assert not set(order) & {*WAKING, "config", "rom"}, order
    assert order[:2] == list(POWER)  # the transport's open starts with them too
    doc = json.loads(r.out)
    assert doc["not_read"]["attributes"] == list(WAKING) and "resume" in doc["not_read"]["reason"]
    assert (doc["power_state"], doc["runtime_status"]) == (power, runtime)
    assert doc["link"] == {"current_speed": None, "current_width": None, "max_speed": "16.0 GT/s PCIe",
                           "max_width": None}  # max_link_speed is cached by the kernel: still shown
    human = run("--device", f"pci:{BDF}", "probe")
    assert human.code == 0 and "not read: current_link_speed, current_link_width, max_link_width" in human.out
    assert "current not read" in human.out


def test_pci_list_leaves_a_sleeping_gpu_asleep(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path, power="D3cold", runtime="suspended")
    _env(monkeypatch, sysfs, procfs)
    with Recorder(tmp_path) as rec:
        r = run("pci", "list")
    assert r.code == 0, r.err
    assert not set(_attr_order(rec, sysfs)) & {*WAKING, "config", "rom"}


def test_driver_version_from_proc_when_the_module_file_is_missing() -> None:
    from tinyhw.probe.nvidia import _driver_version

    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.144  Release Build  (dvs-builder@x)"
    assert _driver_version({"driver_version": proc}) == "570.144"
    closed = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\nGCC version: 12"
    assert _driver_version({"driver_version": closed}) == "550.54.15"
    assert _driver_version({"module_version": "580.65.06\n"}) == "580.65.06" and _driver_version({}) is None


def test_tier2_maps_one_readonly_page_per_register_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path, rom=build_rom()[0])  # a vbios in the window, which must stay untouched
    _env(monkeypatch, sysfs, procfs)
    with Recorder(tmp_path) as rec:
        r = run("--device", f"pci:{BDF}", "--json", "--stats", "probe", "--registers")
    assert r.code == 0, r.err
    assert rec.opened(sysfs) == TIER0_FILES | DRIVER_FILES | {f"bus/pci/devices/{BDF}/resource0"}
    assert rec.flags() == {os.O_RDONLY}
    assert rec.maps() == [(4096, 0x0), (4096, 0x118000), (4096, 0x1FA000)]  # never the prom window at 0x300000
    doc = json.loads(r.out)
    assert doc["tier"] == 2 and doc["driver"] == "nvidia"  # allowed while the driver owns the gpu
    assert doc["registers"] == {"pmc_boot_0": 0x192000A1, "pmc_boot_42": AD102_BOOT42, "vram_mib": 24576,
                                "gfw_boot_progress": 0xFF, "wpr2_addr_hi": 0x00FFFF00}
    chip = doc["chip"]
    assert (chip["name"], chip["chipset"], chip["architecture"], chip["tinygrad_pci_path"]) == ("AD102", 0x192,
                                                                                               0x19, True)
    assert doc["vram_bytes"] == 24 << 30 and doc["gfw_boot_completed"] is True and doc["gsp_running"] is True
    assert r.stats["reg_reads"] == 5 and r.stats["reg_writes"] == 0 and doc["problems"] == []


def test_tier2_on_an_h200_class_gh100(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path, boot42=GH100_BOOT42, boot0=0x180000A1, device=0x2335, wpr2=0)
    _env(monkeypatch, sysfs, procfs)
    doc = json.loads(run("--device", f"pci:{BDF}", "--json", "probe", "--registers").out)
    assert doc["chip"]["name"] == "GH100" and doc["chip"]["tinygrad_pci_path"] is False
    assert doc["vram_bytes"] == 80 << 30 and doc["gsp_running"] is False


@pytest.mark.parametrize(("power", "runtime", "words"), [("D3hot", "active", "power state D3hot"),
                                                         ("D0", "suspended", "runtime-suspended")])
def test_tier2_refused_unless_d0_and_active(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, power: str,
                                            runtime: str, words: str) -> None:
    sysfs, procfs = make(tmp_path, power=power, runtime=runtime)
    _env(monkeypatch, sysfs, procfs)
    with Recorder(tmp_path) as rec:
        r = run("--device", f"pci:{BDF}", "probe", "--registers")
    assert r.code == 2 and words in r.err and r.no_result
    assert f"bus/pci/devices/{BDF}/resource0" not in rec.opened(sysfs) and rec.maps() == []


def test_unreadable_registers_are_reported_not_decoded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path, boot42=0xFFFFFFFF, boot0=0xBADF1100, proc=False)
    _env(monkeypatch, sysfs, procfs)
    doc = json.loads(run("--device", f"pci:{BDF}", "--json", "probe", "--registers").out)
    assert doc["chip"] is None and doc["nvidia_driver"] is None and len(doc["problems"]) == 2
    assert "privilege or decode error" in doc["problems"][0] and "not readable" in doc["problems"][1]
    assert list(doc["registers"]) == ["pmc_boot_0", "pmc_boot_42"]  # nothing more is read


def test_registers_refused_for_a_non_nvidia_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    r = run("--device", "mock:navi31", "probe", "--registers")
    assert r.code == 2 and "nvidia" in r.err


def test_prom_dump_refused_while_a_driver_owns_the_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs, procfs = make(tmp_path, rom=build_rom()[0])
    _env(monkeypatch, sysfs, procfs)
    with Recorder(tmp_path) as rec:
        r = run("--device", f"pci:{BDF},force-bound", "flash", "dump", str(tmp_path / "v.rom"), "--method", "prom")
    assert r.code == 2 and "owned by the kernel driver nvidia" in r.err
    assert rec.maps() == [] and not (tmp_path / "v.rom").exists()


def test_prom_dump_of_an_unowned_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rom = build_rom()[0]
    sysfs, procfs = make(tmp_path, driver=None, rom=rom)
    _env(monkeypatch, sysfs, procfs)
    out = tmp_path / "v.rom"
    r = run("--device", f"pci:{BDF}", "flash", "dump", str(out), "--method", "prom")
    assert r.code == 0, r.err
    data = out.read_bytes()
    assert len(data) == 1 << 20 and data[:len(rom)] == rom
    doc = json.loads(run("--json", "firmware", "inspect", str(out)).out)
    assert doc["type"] == "nvidia-vbios" and doc["problems"] == [] and len(doc["falcon_descriptors"]) == 3


def test_peek32_is_bounded_lockless_and_readonly(tmp_path: Path) -> None:
    from tinyhw.errors import Refused, TransportError
    from tinyhw.pci.sysfs import SysfsTransport
    from tinyhw.transport.lock import DeviceLock

    sysfs, _ = make(tmp_path)
    with DeviceLock(BDF, backend="pci"), SysfsTransport(BDF, sysfs=str(sysfs)) as t:  # another holder: no matter
        assert t.peek32(0, 0xA00) == AD102_BOOT42 and t.peek32(0, 0xA04) == 0
        assert len(t._peek_pages) == 1  # one mapping per page, reused
        for bar, off in ((0, 16 << 20), (0, 0xA02), (5, 0), (2, 0)):
            with pytest.raises(Refused):
                t.peek32(bar, off)
        with pytest.raises(TransportError):
            t.peek32(1, 0)  # BAR1 has no resource1 file in the fake tree
        assert t.counters.reg_writes == 0 and t.counters.reg_reads == 2
