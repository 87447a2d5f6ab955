"""The emulated NVIDIA Ada board ``mock:ad102`` end to end through the CLI: list, probe (tier 0 and 2),
flash dump --method prom, firmware inspect and diff of the dump; its config space, strictness, options
and device lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from clihelp import run

import tinyhw
from tinyhw.errors import BadDeviceString, DeviceLocked, StrictEmulationError
from tinyhw.formats.nvbios import parse_nv_vbios
from tinyhw.formats.pciconfig import parse_config


def test_listed_as_emulated() -> None:
    doc = json.loads(run("--json", "list").out)
    rows = doc["devices"] if isinstance(doc, dict) else doc
    row = next(r for r in rows if r["device"] == "mock:ad102")
    assert row["emulated"] is True and "ad102" in row["description"]


def test_probe_tier0_touches_no_register() -> None:
    r = run("--device", "mock:ad102", "--json", "--stats", "probe")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["tier"] == 0 and doc["emulated"] and (doc["vendor_id"], doc["device_id"]) == (0x10DE, 0x2684)
    assert "AD102" in doc["name"] and doc["driver"] is None and doc["power_state"] == "D0"
    assert [(b["index"], b["size"]) for b in doc["bars"]] == [(0, 16 << 20), (1, 256 << 20), (3, 32 << 20), (5, 128)]
    assert r.stats["reg_reads"] == 0 and r.stats["reg_writes"] == 0


def test_probe_tier2_reads_exactly_the_spec_registers() -> None:
    with tinyhw.open("mock:ad102") as dev:
        from tinyhw.probe import probe_device

        doc = probe_device(dev.transport, registers=True)
        assert dev.transport.board.reads == [(0, 0x0), (0, 0xA00), (0, 0x1183A4), (0, 0x118234), (0, 0x1FA828)]
        assert dev.stats()["reg_writes"] == 0
    assert doc["chip"]["name"] == "AD102" and doc["vram_bytes"] == 24 << 30 and doc["gsp_running"] is False
    running = json.loads(run("--device", "mock:ad102,gsp=running", "--json", "probe", "--registers").out)
    assert running["gsp_running"] is True
    r = run("--device", "mock:ad102,power=d3hot", "probe", "--registers")
    assert r.code == 2 and "D3hot" in r.err
    r = run("--device", "mock:ad102", "probe", "--registers")
    assert r.code == 0 and "chip AD102" in r.out and "gsp not running" in r.out


def test_prom_dump_inspect_and_diff(tmp_path: Path) -> None:
    a, b = tmp_path / "a.rom", tmp_path / "b.rom"
    r = run("--device", "mock:ad102", "--stats", "flash", "dump", str(a), "--method", "prom")
    assert r.code == 0, r.err
    assert r.stats["reg_reads"] == (1 << 20) // 4 and r.stats["reg_writes"] == 0
    data = a.read_bytes()
    assert len(data) == 1 << 20 and data[-4:] == b"\xff" * 4
    doc = json.loads(run("--json", "firmware", "inspect", str(a)).out)
    assert doc["type"] == "nvidia-vbios" and doc["problems"] == []
    assert [i["code_type"] for i in doc["images"]] == [0x00, 0x03, 0xE0] and doc["expansion_rom_off"] == 0x1000
    assert [t["id"] for t in doc["bit"]["tokens"]] == [0x42, 0x69, 0x53, 0x70] and doc["bit"]["offset"] == 0x1B0
    assert doc["bios_version"] == "95.02.18.80.87" and doc["strings"]["version"] == "Version 95.02.18.80.87"
    prod = next(d for d in doc["falcon_descriptors"] if d["application"] == "FWSEC_PROD")
    assert prod["version"] == 3 and len(prod["signatures"]) == 3 and prod["ucode"]["size"] == 0x2400
    text = run("firmware", "inspect", str(a)).out
    assert "FWSEC_PROD" in text and "BIT @0x1b0" in text and "version 95.02.18.80.87" in text.splitlines()[0]
    patched = bytearray(data)
    patched[prod["ucode"]["offset"] + 5] ^= 0xFF
    b.write_bytes(bytes(patched))
    r = run("--json", "firmware", "diff", str(a), str(b))
    diff = json.loads(r.out)
    assert r.code == 1 and diff["differing_bytes"] == 1
    changed = [x["name"] for x in diff["regions"] if x["status"] == "differs"]
    assert changed == ["image[2] ext", "falcon[1] FWSEC_PROD ucode"]
    assert run("firmware", "diff", str(a), str(a)).code == 0


def test_config_space_capabilities() -> None:
    with tinyhw.open("mock:ad102") as dev:
        t = dev.transport
        cfg = parse_config(lambda o, n: t.config_bytes(o & ~3, (n + (o & 3) + 3) & ~3)[o & 3:(o & 3) + n], 4096)
    assert [(c.id, c.offset) for c in cfg.capabilities] == [(0x01, 0x60), (0x05, 0x68), (0x10, 0x78), (0x09, 0xB4)]
    assert [c.offset for c in cfg.ext_capabilities] == [0x100, 0x250, 0x258, 0x128, 0x420, 0x600, 0x900, 0xBB0,
                                                        0xC1C, 0xD00, 0xE00]
    assert cfg.problems == [] and cfg.express.lnksta.width == 16
    rebar = cfg.resizable_bar.entries[0]
    assert rebar.bar == 1 and rebar.current_size == 256 << 20 and rebar.supported_sizes[-1] == 32 << 30


def test_strict_lock_and_options() -> None:
    with tinyhw.open("mock:ad102") as dev:
        with pytest.raises(StrictEmulationError):
            dev.transport.bar(0).read32(0x1000)
        with pytest.raises(StrictEmulationError):
            dev.transport.bar(0).write32(0x0, 1)
        with pytest.raises(DeviceLocked):
            tinyhw.open("mock:ad102")
    with pytest.raises(BadDeviceString):
        tinyhw.open("mock:ad102,flash=/tmp/x")
    r = run("--device", "mock:ad102-usb", "probe")
    assert r.code == 2 and "mock:ad102" in r.err


def test_the_served_vbios_is_the_spec_layout() -> None:
    from tinyhw.mocks.nvidia.nv_vbios import vbios_image

    v = parse_nv_vbios(vbios_image())
    assert v.problems == [] and v.fwsec() is not None and v.fwsec().fields["signature_count"] == 3
