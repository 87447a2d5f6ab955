"""`tinyhw pci` end to end: read-only against this machine's real sysfs with lspci as the oracle
(specs/pci-vfio-remote.md §4, §13.3, §13.4), and against fake sysfs trees ($TINYHW_SYSFS) for
capabilities this machine lacks (PCIe, AER, SR-IOV, ReBAR, ACS) and for BAR peek/poke,
bind, resize and bad input. Never writes to this machine's own devices.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from clihelp import as_nobody, run

from tests.transport.test_pci_scan import FAKES, ids_file, lspci_blocks, make_tree, run_lspci
from tests.transport.test_pci_sysfs import EDU, GPU, build

REAL_SYSFS = "/sys/bus/pci/devices"
CAPS_EXACT = ("Power Management", "MSI:", "MSI-X:", "Express", "Advanced Error", "Single Root", "Access Control",
              "Physical Resizable")


@pytest.fixture
def real_devices() -> list[str]:
    # The CI machine has PCI sysfs; a machine without it must not pass these tests by skipping them.
    assert os.path.isdir(REAL_SYSFS) and os.listdir(REAL_SYSFS), f"no PCI functions in {REAL_SYSFS} to compare"
    return sorted(os.listdir(REAL_SYSFS))


@pytest.fixture
def ids(monkeypatch: pytest.MonkeyPatch) -> str:
    path = ids_file()
    monkeypatch.setenv("TINYHW_PCI_IDS", path)  # the same file lspci reads (§5)
    return path


def compare_show(ours_text: str, theirs: list[str], where: str) -> None:
    """`pci show` against one `lspci -vvv -nn -D` block: header lines, regions, capabilities, driver."""
    ours = ours_text.splitlines()
    assert ours[0] == theirs[0], where
    for prefix in ("\tSubsystem:", "\tControl:", "\tStatus:", "\tRegion ", "\tKernel driver in use:"):
        assert [x for x in ours if x.startswith(prefix)] == [x for x in theirs if x.startswith(prefix)], \
            (where, prefix)
    caps_ours = [x for x in ours if x.startswith("\tCapabilities:")]
    caps_theirs = [x for x in theirs if x.startswith("\tCapabilities:")]
    assert len(caps_ours) == len(caps_theirs), (where, caps_ours, caps_theirs)
    for o, t in zip(caps_ours, caps_theirs, strict=True):
        name = o.split("] ", 1)[-1]
        if name.startswith(CAPS_EXACT) or "<access denied>" in o:
            assert o == t, where
        else:
            assert t.startswith(o), (where, o, t)


# -- this machine, read-only -------------------------------------------------------------------------------------


def test_pci_list_equals_lspci_Dnn(real_devices: list[str], ids: str) -> None:
    r = run("pci", "list")
    assert r.code == 0, r.err
    assert r.out.splitlines() == run_lspci("-i", ids, "-Dnn").splitlines()
    doc = json.loads(run("--json", "pci", "list").out)
    assert [d["address"] for d in doc] == real_devices
    assert [d["line"] for d in doc] == r.out.splitlines()
    numbers = run_lspci("-mm", "-n", "-D").splitlines()
    for d, line in zip(doc, numbers, strict=True):
        fields = line.replace('"', "").split()
        assert fields[:4] == [d["address"], f"{d['class_code'] >> 8:04x}", f"{d['vendor_id']:04x}",
                              f"{d['device_id']:04x}"]
        assert isinstance(d["vendor_id"], int) and d["class_name"]


def test_pci_show_agrees_with_lspci_vvv(real_devices: list[str], ids: str) -> None:
    theirs = {b[0].split()[0]: b for b in lspci_blocks(run_lspci("-i", ids, "-vvv", "-nn", "-D"))}
    assert sorted(theirs) == real_devices
    for addr in real_devices:
        r = run("--device", f"pci:{addr}", "pci", "show")
        assert r.code == 0, r.err
        compare_show(r.out, theirs[addr], addr)
        doc = json.loads(run("--device", f"pci:{addr}", "--json", "pci", "show").out)
        assert doc["address"] == addr and isinstance(doc["command"], int)
        caps = [x for x in theirs[addr] if x.startswith("\tCapabilities:") and "access denied" not in x]
        assert [f"[{c['offset']:02x}]" for c in doc["capabilities"]] == [c.split()[1] for c in caps]


def test_pci_config_equals_lspci_xxx(real_devices: list[str], ids: str) -> None:
    for addr in real_devices:
        r = run("--device", f"pci:{addr}", "pci", "config")
        assert r.code == 0, r.err
        assert r.out == run_lspci("-i", ids, "-D", "-xxx", "-s", addr)
        doc = json.loads(run("--device", f"pci:{addr}", "--json", "pci", "config").out)
        assert doc["length"] == 256 and bytes.fromhex(doc["data"])[:2] != b"\xff\xff"


def run_as_nobody(*args: str) -> dict:
    """The CLI in a forked child that dropped to user nobody (65534): what an unprivileged user sees.

    Everything the command imports or parses is loaded first, so the child needs no access to the
    checkout (CI's clone may sit in a directory nobody cannot read).
    """
    import tinyhw.cli.pci_cmd
    import tinyhw.formats.pciconfig
    import tinyhw.pci.describe
    import tinyhw.pci.sysfs  # noqa: F401
    from tinyhw.formats.pciids import load_pci_ids

    load_pci_ids()
    run("pci", "show", "--help")

    def child() -> bytes:
        r = run(*args)
        return json.dumps({"code": r.code, "out": r.out, "err": r.err}).encode()

    return json.loads(as_nobody(child))


def test_unprivileged_show_and_config_equal_lspci(real_devices: list[str], ids: str) -> None:
    """Without root only 64 config bytes are readable (§2.7): both tools say so the same way."""
    if os.geteuid() != 0:
        pytest.skip("needs root to drop to user nobody")
    addr = real_devices[0]
    lspci = shutil.which("lspci")
    assert lspci is not None

    def lspci_nobody(*args: str) -> str:
        return subprocess.run([lspci, "-i", ids, *args], capture_output=True, text=True, check=True,
                              user=65534, group=65534, extra_groups=[]).stdout

    for a in real_devices:
        r = run_as_nobody("--device", f"pci:{a}", "pci", "show")
        assert r["code"] == 0, r["err"]
        compare_show(r["out"], lspci_blocks(lspci_nobody("-vvv", "-nn", "-D", "-s", a))[0], a)
        r = run_as_nobody("--device", f"pci:{a}", "pci", "config")
        assert r["out"] == lspci_nobody("-D", "-xxx", "-s", a) and len(r["out"].splitlines()) == 1 + 4 + 1
    r = run_as_nobody("--device", f"pci:{addr}", "pci", "config", "--full")
    assert r["code"] == 0 and len(r["out"].splitlines()) == 6


def test_host_devices_are_never_mapped(real_devices: list[str]) -> None:
    """This machine's functions are bound (virtio-pci): mapping is refused before anything is opened."""
    bound = [a for a in real_devices if os.path.exists(f"{REAL_SYSFS}/{a}/driver")]
    for addr in bound:
        r = run("--device", f"pci:{addr}", "pci", "read", "0", "0")
        assert r.code == 2 and "refusing to map bar0" in r.err and "--force-bound" in r.err, r.err
        assert r.no_result and len(r.err.strip().splitlines()) == 1


# -- fake trees ---------------------------------------------------------------------------------------------------


def test_fake_tree_list_show_config_equal_lspci(tmp_path: Path, ids: str, monkeypatch: pytest.MonkeyPatch) -> None:
    devices = make_tree(tmp_path / "sys", FAKES)
    monkeypatch.setenv("TINYHW_SYSFS", str(tmp_path / "sys"))
    opt = f"sysfs.path={devices.parent}"
    assert run("pci", "list").out.splitlines() == run_lspci("-O", opt, "-i", ids, "-Dnn").splitlines()
    theirs = {b[0].split()[0]: b for b in lspci_blocks(run_lspci("-O", opt, "-i", ids, "-vvv", "-nn", "-D"))}
    assert any(len(addr.split(":")[0]) > 4 for addr in theirs)  # a 5-digit VMD domain is among them
    for addr, block in theirs.items():
        compare_show(run("--device", f"pci:{addr}", "pci", "show").out, block, addr)
    navi = run("--device", f"pci:{GPU}", "pci", "show").out
    for line in ("\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L1",
                 "\t\tLnkSta:\tSpeed 8GT/s (downgraded), Width x16",
                 "\t\tBAR 0: current size: 256MB, supported: 256MB 512MB 1GB 2GB 4GB 8GB 16GB 32GB",
                 "\t\tInitial VFs: 16, Total VFs: 16, Number of VFs: 0, Function Dependency Link: 00",
                 "\t\tACSCap:\tSrcValid+ TransBlk+ ReqRedir+ CmpltRedir+ UpstreamFwd+ EgressCtrl- DirectTrans-"):
        assert line in navi.splitlines() and line.strip() in theirs[GPU][0] + "".join(theirs[GPU]), line
    doc = json.loads(run("--device", f"pci:{GPU}", "--json", "pci", "show").out)
    rebar = next(c for c in doc["capabilities"] if c["id"] == 0x15 and c["extended"])
    assert rebar["decoded"]["entries"][0]["current_size"] == 256 << 20
    assert run("--device", f"pci:{GPU}", "pci", "config", "--full").out == \
        run_lspci("-O", opt, "-i", ids, "-D", "-xxxx", "-s", GPU)


def test_read_write_on_a_fake_tree(tmp_path: Path, ids: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs = build(tmp_path)
    monkeypatch.setenv("TINYHW_SYSFS", str(sysfs))
    dev = f"pci:{EDU}"
    r = run("--device", dev, "pci", "write", "0", "0x10", "0xdeadbeef", "--yes")
    assert r.code == 0 and "write 0xdeadbeef to bar0 offset 0x10 of 0000:00:05.0 (pci)" in r.err, r.err
    assert run("--device", dev, "pci", "read", "0", "0x10").out == "0xdeadbeef\n"
    r = run("--device", dev, "--json", "--stats", "pci", "read", "0", "0xc", "--count", "2")
    assert json.loads(r.out) == {"bar": 0, "offset": 0xC, "values": [0, 0xDEADBEEF]}
    assert r.stats["reg_reads"] == 2
    assert (sysfs / "bus/pci/devices" / EDU / "resource0").read_bytes()[0x10:0x14] == bytes.fromhex("efbeadde")


@pytest.mark.parametrize(("args", "code", "message"), [
    (("--device", "pci:0000:09:00.0", "pci", "read", "0", "0"), 3, "no pci function 0000:09:00.0"),
    (("--device", f"pci:{EDU}", "pci", "read", "2", "0"), 2, r"bar2 is not implemented by this device"),
    (("--device", f"pci:{EDU}", "pci", "read", "0", "0x100000"), 2, "outside the bar (size 0x100000)"),
    (("--device", f"pci:{EDU}", "pci", "read", "0", "0x2"), 2, "not dword aligned"),
    (("--device", f"pci:{EDU}", "pci", "read", "7", "0"), 2, "bar 0x7 is outside 0x0-0x5"),
    (("--device", f"pci:{EDU}", "pci", "write", "0", "0", "0x100000000", "--yes"), 2, "0x100000000 is outside"),
    (("--device", f"pci:{EDU}", "pci", "write", "0", "4", "1"), 2, "needs --yes"),
    (("--device", f"pci:{GPU}", "pci", "read", "5", "0"), 2, "bound to the kernel driver amdgpu"),
    (("--device", f"pci:{EDU},bogus", "pci", "read", "0", "0"), 2, "does not take option(s) bogus"),
    (("--device", f"vfio:{EDU}", "pci", "read", "0", "0"), 2, "not vfio-pci; bind it first"),
    (("--device", f"vfio:{EDU}", "pci", "read", "0", "0", "--force-bound"), 2, "applies to pci: devices only"),
    (("pci", "write", "0", "4", "1", "--yes"), 2, "name it with --device"),
])
def test_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], code: int,
                   message: str) -> None:
    sysfs = build(tmp_path, driver=None)
    gpu_dir = sysfs / "devices" / "pci0000:03" / GPU
    (sysfs / "bus/pci/drivers/amdgpu").mkdir(parents=True)
    (gpu_dir / "driver").symlink_to("../../../bus/pci/drivers/amdgpu")
    monkeypatch.setenv("TINYHW_SYSFS", str(sysfs))
    r = run(*args)
    assert r.code == code, (r.code, r.err)
    assert r.no_result and len(r.err.strip().splitlines()) <= 2  # a plan line may precede the error
    assert r.err.strip().splitlines()[-1].startswith("error: ") and message in r.err, r.err


def test_force_bound_maps_anyway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TINYHW_SYSFS", str(build(tmp_path, driver="amdgpu")))
    assert run("--device", f"pci:{GPU}", "pci", "read", "5", "0", "--force-bound").out == "0x00000000\n"
    assert run("--device", f"pci:{GPU},force-bound", "pci", "read", "5", "0").code == 0


def test_bind_file_protocol(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """§8.2 on a fake tree: unbind, driver_override, drivers_probe each get one write; a fake kernel does
    not bind, so tinyhw reports that the function is still not bound (exit 1)."""
    sysfs = build(tmp_path, driver="amdgpu")
    monkeypatch.setenv("TINYHW_SYSFS", str(sysfs))
    for f in ("bus/pci/drivers/amdgpu/unbind", "bus/pci/drivers_probe"):
        (sysfs / f).write_text("")
    (sysfs / "devices/pci0000:03" / GPU / "driver_override").write_text("")
    r = run("--device", f"pci:{GPU}", "pci", "bind", "--yes")
    assert r.code == 3 and "the vfio-pci driver is not loaded" in r.err and "modprobe vfio-pci" in r.err
    (sysfs / "bus/pci/drivers/vfio-pci").mkdir()
    r = run("--device", f"pci:{GPU}", "pci", "bind")
    assert r.code == 2 and "unbind 0000:03:00.0 from amdgpu" in r.err and "needs --yes" in r.err
    assert (sysfs / "bus/pci/drivers_probe").read_text() == ""
    r = run("--device", f"pci:{GPU}", "pci", "bind", "--yes")
    assert r.code == 1 and "not bound to vfio-pci after probing (driver: amdgpu)" in r.err, r.err
    assert (sysfs / "bus/pci/drivers/amdgpu/unbind").read_text() == GPU
    assert (sysfs / "devices/pci0000:03" / GPU / "driver_override").read_text() == "vfio-pci"
    assert (sysfs / "bus/pci/drivers_probe").read_text() == GPU


def test_resize_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sysfs = build(tmp_path)
    monkeypatch.setenv("TINYHW_SYSFS", str(sysfs))
    r = run("--device", f"pci:{GPU}", "pci", "resize", "0", "8G")
    assert r.code == 2 and "resize bar0 of 0000:03:00.0 to 0x200000000 bytes" in r.err
    r = run("--device", f"pci:{GPU}", "pci", "resize", "0", "8G", "--yes")
    assert r.code == 0, r.err
    assert (sysfs / "devices/pci0000:03" / GPU / "resource0_resize").read_text().startswith("13")
    assert run("--device", f"pci:{GPU}", "pci", "resize", "0", "100M", "--yes").code == 2


@pytest.mark.parametrize("sub", ["list", "show", "config", "read", "write", "bind", "unbind", "resize"])
def test_help_has_examples(sub: str) -> None:
    r = run("pci", sub, "--help")
    assert r.code == 0 and "Example" in r.out and "tinyhw" in r.out
