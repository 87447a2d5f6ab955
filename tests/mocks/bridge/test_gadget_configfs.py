"""configfs set-up and tear-down of the gadget on a fake configfs tree (a temporary directory), and
the environment checks behind ``tinyhw mock gadget`` (specs/usb-real-stack-harness.md)."""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31UsbOptions
from tinyhw.errors import EnvironmentProblem
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.mocks.bridge.asm24 import Asm24Bridge
from tinyhw.mocks.bridge.gadget import ENABLE, SETUP, Event, ffs_descriptors
from tinyhw.mocks.bridge.gadget_configfs import GadgetSetup, SysOps, check_environment, serve_gadget
from tinyhw.mocks.common.vclock import VirtualClock


class FakeOps(SysOps):
    """Real mkdir/write/symlink on a temporary tree; mount creates the endpoint files; every call recorded."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[str] = []
        self.fail_on = fail_on

    def _rec(self, what: str) -> None:
        self.calls.append(what)
        if self.fail_on and what.startswith(self.fail_on):
            raise OSError(22, f"injected failure: {what}")

    def mkdir(self, path: Path) -> None:  # configfs creates a gadget's default groups with it
        self._rec(f"mkdir {path.name}")
        super().mkdir(path)
        if path.parent.name == "usb_gadget":
            for group in ("strings", "configs", "functions"):
                (path / group).mkdir()

    def write(self, path: Path, text: str) -> None:
        self._rec(f"write {path.name}={text.strip()}")
        super().write(path, text)

    def symlink(self, target: Path, link: Path) -> None:
        self._rec(f"symlink {link.name}")
        super().symlink(target, link)

    def unlink(self, path: Path) -> None:
        self._rec(f"unlink {path.name}")
        super().unlink(path)

    def rmdir(self, path: Path) -> None:  # configfs removes attribute files with their directory
        self._rec(f"rmdir {path.name}")
        for p in path.iterdir():
            if p.is_file() and not p.is_symlink():
                p.unlink()
            elif p.name in ("strings", "configs", "functions") and path.parent.name == "usb_gadget":
                p.rmdir()  # default groups go with the gadget (OSError if something is left in them)
        super().rmdir(path)

    def mount(self, source: str, target: Path, fstype: str) -> None:
        self._rec(f"mount {fstype} {source}")
        for ep in ("ep0", "ep1", "ep2"):
            (target / ep).touch()

    def umount(self, target: Path) -> None:
        self._rec("umount")
        for p in target.iterdir():
            p.unlink()


@pytest.fixture
def bridge(tmp_path: Path):
    options = Navi31UsbOptions(flash=tmp_path / "flash.bin", speed="hs")
    clock = VirtualClock()
    board = Navi31Board(options, clock, attach="usb", spec=NAVI31)
    yield Asm24Bridge(board, options, clock, serial="0123abcd")
    board.close()


def _opener(kernel: dict[str, socket.socket]):
    def opener(path: str, flags: int) -> int:
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        kernel[Path(path).name] = a
        fd = os.dup(b.fileno())
        b.close()
        os.set_blocking(fd, not flags & os.O_NONBLOCK)
        return fd
    return opener


def test_setup_serve_and_teardown(tmp_path: Path, bridge: Asm24Bridge) -> None:
    cfs = tmp_path / "config"
    (cfs / "usb_gadget").mkdir(parents=True)
    ops, kernel = FakeOps(), {}
    setup = GadgetSetup(name="g1", configfs=cfs, mount_dir=tmp_path / "ffs")
    g = cfs / "usb_gadget" / "g1"
    with serve_gadget(bridge, "dummy_udc.0", setup, ops=ops, opener=_opener(kernel)) as gadget:
        assert (g / "idVendor").read_text() == "0xadd1" and (g / "idProduct").read_text() == "0x0001"
        assert (g / "strings/0x409/product").read_text() == "custom v0.1"
        assert (g / "strings/0x409/manufacturer").read_text() == "tiny"
        assert (g / "strings/0x409/serialnumber").read_text() == "0123abcd"
        assert (g / "configs/c.1/bmAttributes").read_text() == "0xc0"
        assert os.readlink(g / "configs/c.1/ffs.g1") == str(g / "functions/ffs.g1")
        assert (g / "UDC").read_text() == "dummy_udc.0"
        kernel["ep0"].settimeout(2)
        assert kernel["ep0"].recv(4096) == ffs_descriptors()
        kernel["ep0"].recv(4096)  # strings
        kernel["ep0"].send(Event(ENABLE).pack())
        kernel["ep0"].send(Event(SETUP, 0xC0, 0xE4, 0xB450, 0, 1).pack())
        assert kernel["ep0"].recv(64) == b"\x78"
        assert gadget.running
    assert not gadget.running and gadget.teardown_errors == []
    assert not g.exists() and not (tmp_path / "ffs").exists()
    # descriptors are written before the UDC is bound; teardown is the set-up reversed
    assert ops.calls.index("mount functionfs g1") < ops.calls.index("write UDC=dummy_udc.0")
    tail = [c for c in ops.calls[ops.calls.index("write UDC=dummy_udc.0") + 1:]]
    assert tail == ["write UDC=", "umount", "rmdir ffs", "unlink ffs.g1", "rmdir ffs.g1", "rmdir c.1",
                    "rmdir 0x409", "rmdir g1"]


def test_failure_midway_undoes_what_was_done(tmp_path: Path, bridge: Asm24Bridge) -> None:
    cfs = tmp_path / "config"
    (cfs / "usb_gadget").mkdir(parents=True)
    ops = FakeOps(fail_on="mount")
    setup = GadgetSetup(name="g1", configfs=cfs, mount_dir=tmp_path / "ffs")
    with pytest.raises(EnvironmentProblem, match="cannot set up the usb gadget"), \
            serve_gadget(bridge, "dummy_udc.0", setup, ops=ops, opener=_opener({})):
        pass
    assert list((cfs / "usb_gadget").iterdir()) == [] and not (tmp_path / "ffs").exists()


def test_interrupt_tears_down(tmp_path: Path, bridge: Asm24Bridge) -> None:
    cfs = tmp_path / "config"
    (cfs / "usb_gadget").mkdir(parents=True)
    ops = FakeOps()
    setup = GadgetSetup(name="g1", configfs=cfs, mount_dir=tmp_path / "ffs")
    with pytest.raises(KeyboardInterrupt), serve_gadget(bridge, "dummy_udc.0", setup, ops=ops,
                                                        opener=_opener({})):
        raise KeyboardInterrupt
    assert list((cfs / "usb_gadget").iterdir()) == []
    assert ops.calls[-1] == "rmdir g1" and "write UDC=" in ops.calls


def test_leftover_gadget_is_refused_and_left_alone(tmp_path: Path, bridge: Asm24Bridge) -> None:
    cfs = tmp_path / "config"
    (cfs / "usb_gadget" / "g1").mkdir(parents=True)
    setup = GadgetSetup(name="g1", configfs=cfs, mount_dir=tmp_path / "ffs")
    with pytest.raises(EnvironmentProblem, match="left over or running"), \
            serve_gadget(bridge, "dummy_udc.0", setup, ops=FakeOps(), opener=_opener({})):
        pass
    assert (cfs / "usb_gadget" / "g1").is_dir()


def _env(tmp_path: Path, *, configfs: bool = True, ffs: bool = True, udcs: tuple[str, ...] = ("dummy_udc.0",)):
    shutil.rmtree(tmp_path / "env", ignore_errors=True)
    base = tmp_path / "env"
    (base / "udc").mkdir(parents=True)
    for u in udcs:
        (base / "udc" / u).mkdir()
    if configfs:
        (base / "config" / "usb_gadget").mkdir(parents=True)
    (base / "filesystems").write_text("nodev\tsysfs\n" + ("nodev\tconfigfs\n" if configfs else "")
                                      + ("nodev\tfunctionfs\n" if ffs else ""))
    return {"configfs": base / "config", "udc_class": base / "udc", "proc_filesystems": base / "filesystems"}


def test_environment_checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tinyhw.mocks.bridge.gadget_configfs as gcfs

    monkeypatch.setattr(gcfs, "FFS_MODULE", tmp_path / "no-module")
    assert check_environment(**_env(tmp_path)) == "dummy_udc.0"
    assert check_environment("dummy_udc.0", **_env(tmp_path)) == "dummy_udc.0"
    with pytest.raises(EnvironmentProblem, match="configfs is not available") as e:
        check_environment(**_env(tmp_path, configfs=False))
    assert "modprobe libcomposite" in str(e.value) and e.value.exit_code == 3
    with pytest.raises(EnvironmentProblem, match="functionfs"):
        check_environment(**_env(tmp_path, ffs=False))
    (tmp_path / "no-module").mkdir()  # usb_f_fs loaded: functionfs appears with the first function instance
    assert check_environment(**_env(tmp_path, ffs=False)) == "dummy_udc.0"
    with pytest.raises(EnvironmentProblem, match="no usb device controller") as e:
        check_environment(**_env(tmp_path, udcs=()))
    assert "dummy_hcd" in str(e.value)
    with pytest.raises(EnvironmentProblem, match="named 'other'"):
        check_environment("other", **_env(tmp_path))
