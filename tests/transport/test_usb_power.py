"""The bridge's PCIe power toggle (vendor request 0xF3, specs/asm24-usb-bridge.md §4.6) as the PciePower ability:
on mock:navi31-usb directly, through remote:, through a recording, and as `tinyhw link power`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run
from flashhelp import dev as mockdev
from remotehelp import served

from tinyhw.connect import open_device
from tinyhw.errors import LinkDown, OperationFailed, Refused
from tinyhw.transport.abilities import LinkState, PciePower
from tinyhw.transport.base import require
from tinyhw.transport.devstr import parse_device
from tinyhw.transport.record import recording

NAVI31_IDS = 0x744C1002


def _usb(tmp_path: Path) -> str:
    return mockdev(tmp_path, board="navi31-usb")


def _cycle(t: object) -> None:
    """Off -> every access fails clearly -> on -> the GPU answers again (enumerated anew)."""
    power = require(t, PciePower, "switch the pcie power")
    assert power.link_state() == LinkState(ltssm=0x78, up=True, powered=True)
    off = power.power_off()
    assert off.powered is False and off.up is False and off.ltssm != 0x78, off
    assert power.link_state() == off
    for access in (lambda: t.bar(5).read32(0), lambda: t.config_read(0), lambda: t.bar(0).read(0, 64),
                   lambda: t.bar(5).write32(0, 0)):
        with pytest.raises(LinkDown) as e:
            access()
            t.config_read(0)  # a posted write over remote: fails with the next round trip
        assert "the bridge's pcie side is powered off" in e.value.message and "\n" not in e.value.message
        assert "link power on" in (e.value.hint or "")
    on = power.power_on()
    assert on == LinkState(ltssm=0x78, up=True, powered=True)
    assert t.config_read(0) == NAVI31_IDS
    assert t.identity().vendor_id == 0x1002
    assert t.bar(5).read32(0) is not None


def test_power_cycle_on_the_emulated_bridge(tmp_path: Path) -> None:
    with open_device(parse_device(_usb(tmp_path))) as opened:
        _cycle(opened.transport)
        # powering on a link that is up sends nothing
        before = opened.transport.counters.usb_transfers
        assert opened.transport.power_on().up
        assert opened.transport.counters.usb_transfers - before == 2  # the ltssm read and link_state's


def test_power_off_is_checked_against_the_bridge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bridge that ignores 0xF3(0) (the link stays trained) is an error, not a silent success."""
    from tinyhw.mocks.bridge.asm24_tlp import LinkModel

    monkeypatch.setattr(LinkModel, "power_off", lambda self: None)
    with open_device(parse_device(_usb(tmp_path))) as opened, \
            pytest.raises(OperationFailed, match="still reports a trained pcie link"):
        opened.transport.power_off(timeout=0.5)


def test_power_on_fails_clearly_when_the_link_does_not_train(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    with open_device(parse_device(_usb(tmp_path))) as opened:
        t = opened.transport
        t.power_off()
        from tinyhw.mocks.bridge.asm24_tlp import LinkModel

        monkeypatch.setattr(LinkModel, "ltssm", lambda self: 0x4C)
        with pytest.raises(LinkDown, match=r"ltssm 0x4c: training wedged"):
            t.power_on(timeout=0.5)


def test_waits_are_bounded(tmp_path: Path) -> None:
    with open_device(parse_device(_usb(tmp_path))) as opened:
        for bad in (0, -1, 61, float("nan")):
            with pytest.raises(Refused):
                opened.transport.power_on(timeout=bad)
        assert opened.transport.link_state().up


def test_only_the_bridge_has_it(tmp_path: Path) -> None:
    with open_device(parse_device(mockdev(tmp_path))) as opened:
        assert not isinstance(opened.transport, PciePower)


def test_power_cycle_through_remote(tmp_path: Path) -> None:
    with served(_usb(tmp_path)) as s:
        with open_device(parse_device(s.device())) as opened:
            assert isinstance(opened.transport, PciePower)
            _cycle(opened.transport)
        s.wait_released()
        assert any("pcie power off" in line for line in s.audit.lines), s.audit.lines
    with served(mockdev(tmp_path)) as s, open_device(parse_device(s.device())) as opened:
        assert not isinstance(opened.transport, PciePower)  # a board without the bridge does not list it


def test_the_server_refuses_power_for_a_device_without_it(tmp_path: Path) -> None:
    from tinyhw.remote import protocol

    with served(mockdev(tmp_path)) as s, open_device(parse_device(s.device())) as opened:
        t = opened.transport
        with pytest.raises(Refused, match="cannot switch the pcie power"):
            t.request(protocol.OP_POWER, protocol.POWER.pack(protocol.POWER_OFF, 1.0))
        with pytest.raises(OperationFailed, match="unknown power action"):
            t.request(protocol.OP_POWER, protocol.POWER.pack(9, 1.0))
        assert t.config_read(0) == NAVI31_IDS


def test_a_recording_passes_it_on(tmp_path: Path) -> None:
    with open_device(parse_device(_usb(tmp_path))) as opened:
        rec = recording(opened.transport, tmp_path / "power.trace", command=["test"])
        try:
            assert isinstance(rec, PciePower)
            assert rec.power_off().powered is False
            assert rec.power_on().up
        finally:
            rec.close()


@pytest.mark.parametrize("where", ["direct", "remote"])
def test_cli_link_power(tmp_path: Path, where: str) -> None:
    def check(device: str) -> None:
        status = run("--device", device, "--json", "link", "power", "status")
        assert status.code == 0, status.err
        assert json.loads(status.out) == {"action": "status", "ltssm": 0x78, "state": "link up", "up": True,
                                          "powered": True}
        refused = run("--device", device, "link", "power", "off")
        assert refused.code == 2 and "needs --yes" in refused.err, refused.err
        off = run("--device", device, "--json", "link", "power", "off", "--yes")
        assert off.code == 0, off.err
        assert json.loads(off.out)["powered"] is False and json.loads(off.out)["ltssm"] != 0x78
        on = run("--device", device, "link", "power", "on")
        assert on.code == 0 and "ltssm 0x78 (link up)" in on.out, on.err

    if where == "direct":
        check(_usb(tmp_path))
    else:
        with served(_usb(tmp_path)) as s:
            check(s.device())


def test_cli_link_power_refused_without_the_bridge(tmp_path: Path) -> None:
    r = run("--device", mockdev(tmp_path), "link", "power", "status")
    errors = [line for line in r.err.splitlines() if not line.startswith("note: ")]  # a fresh flash file is noted
    assert r.code == 2 and "cannot switch the pcie power" in r.err and len(errors) == 1, r.err
    with served(mockdev(tmp_path)) as s:
        r = run("--device", s.device(), "link", "power", "off", "--yes")
        assert r.code == 2 and "cannot switch the pcie power" in r.err, r.err


def _scratch7() -> int:
    from tinyhw import regs

    return regs.asic("navi31").offset("gc.SCRATCH_REG7")


def _mark_booted(t: object) -> None:
    """Write tinyhw's boot flag (SCRATCH_REG7, the record read_state reads) and a VRAM dword, as a boot would."""
    from tinyhw.boot.amd.layout import BOOT_MAGIC

    t.bar(5).write32(_scratch7(), BOOT_MAGIC)
    t.bar(0).write32(0x1000, 0x5EED1234)


def _flags(t: object) -> tuple[bool, int]:
    """(tinyhw's boot flag is set, the VRAM dword), read by plain BAR reads (the same over remote:)."""
    from tinyhw.boot.amd.layout import BOOT_MAGIC

    return t.bar(5).read32(_scratch7()) == BOOT_MAGIC, t.bar(0).read32(0x1000)


@pytest.mark.parametrize("where", ["direct", "remote"])
def test_power_off_loses_the_gpus_state_and_keeps_its_flash(tmp_path: Path, where: str) -> None:
    """After power off and on the GPU is at power-on: tinyhw's boot flag gone, VRAM cleared; in the same session
    and in the next one (the board state file); the flash file is untouched."""
    device = _usb(tmp_path)
    with open_device(parse_device(device)) as opened:  # a first open writes the flash file
        _mark_booted(opened.transport)
        assert _flags(opened.transport) == (True, 0x5EED1234)
    flash = (tmp_path / "flash.bin").read_bytes()

    def cycle(t: object) -> None:
        assert _flags(t) == (True, 0)  # the flags outlive a command; VRAM is not kept between commands
        _mark_booted(t)
        assert _flags(t) == (True, 0x5EED1234)
        t.power_off()
        t.power_on()
        assert _flags(t) == (False, 0)

    if where == "direct":
        with open_device(parse_device(device)) as opened:
            cycle(opened.transport)
    else:
        with served(device) as s, open_device(parse_device(s.device())) as opened:
            cycle(opened.transport)
    with open_device(parse_device(device)) as opened:
        assert _flags(opened.transport) == (False, 0)
    assert (tmp_path / "flash.bin").read_bytes() == flash


@pytest.mark.slow
def test_cli_power_off_unboots_the_gpu_end_to_end(tmp_path: Path) -> None:
    """am boot -> kernels run works -> link power off -> on -> kernels run refused (not booted) -> am boot works
    again -> the flash reads back as before."""
    from amfake import FW_DIR

    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware not extracted in {FW_DIR}: run bash tests/setup-system.sh", pytrace=False)
    device = _usb(tmp_path)
    kernel = ("--device", device, "kernels", "run", "pattern", "--n", "1024")
    assert (r := run("--device", device, "flash", "dump", str(tmp_path / "before.bin"))).code == 0, r.err
    for _ in range(2):
        r = run("--device", device, "am", "boot", "--yes", "--firmware-dir", str(FW_DIR))
        assert r.code == 0 and "full boot done" in r.out, r.err
        assert (r := run(*kernel)).code == 0 and "check: pass" in r.out, r.err
        assert run("--device", device, "link", "power", "off", "--yes").code == 0
        assert run("--device", device, "link", "power", "on").code == 0
        r = run(*kernel)
        assert r.code == 2 and "not a gpu tinyhw booted" in r.err and "am boot --yes first" in r.err, r.err
        info = json.loads(run("--device", device, "--json", "am", "info").out)
        assert info["state"]["tinyhw_booted"] is False and info["state"]["sos_alive"] is False, info["state"]
    r = run("--device", device, "flash", "dump", "--method", "aperture", str(tmp_path / "after.bin"))
    assert r.code == 0, r.err
    assert (tmp_path / "after.bin").read_bytes() == (tmp_path / "before.bin").read_bytes()
