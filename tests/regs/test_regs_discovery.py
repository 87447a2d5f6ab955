"""Segment bases from the device's IP discovery table (tinyhw.regs.discovery) on both emulated boards:
the table's bases equal the profile's facts, a corrupted table falls back with a warning, and a table
with other bases moves the offsets ``reg read`` uses (so the device, not the fact table, is the source)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from clihelp import run as run_cli

from tinyhw import regs
from tinyhw.boards.navi31 import NAVI31
from tinyhw.connect import open_device
from tinyhw.mocks.amd import discovery as mock_discovery
from tinyhw.mocks.amd.ipdiscovery_writer import IpSpec, build_discovery
from tinyhw.regs.discovery import asic_from_device, discovered_bases, read_discovery
from tinyhw.regs.fixed import FIXED_DWORDS, fixed
from tinyhw.transport.base import Transport
from tinyhw.transport.devstr import parse_device

BOARDS = ["mock:navi31", "mock:navi31-usb"]


@pytest.fixture(params=BOARDS)
def transport(request: pytest.FixtureRequest) -> Iterator[Transport]:
    opened = open_device(parse_device(request.param + ",strict"))
    try:
        yield opened.transport
    finally:
        opened.close()


def _facts(block: str) -> tuple[int, ...]:
    spec = regs.profile("navi31").blocks[block]
    bases = list(spec.bases)
    while bases and bases[-1] is None:
        bases.pop()
    return tuple(bases)  # type: ignore[arg-type]


def test_fixed_registers_come_from_the_database_and_agree_with_the_fact_table() -> None:
    navi31 = regs.asic("navi31")
    for name, dword in FIXED_DWORDS.items():
        assert fixed(name).offset == 4 * dword == navi31.offset(name)
    assert fixed("nbio.RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE").offset == 0x378C
    assert fixed("nbio.BIF_BX_PF0_MM_INDEX").field("MM_APER").mask == 0x80000000


def test_bases_read_from_the_board_equal_the_profile_facts(transport: Transport) -> None:
    before = transport.counters.copy()
    d = read_discovery(transport)
    cost = (transport.counters - before).as_dict()
    print(f"\ndiscovery read over {transport.name}: {d.path}, {cost}")
    assert d.ok, d.problems
    assert d.vram_mib == 24576 and d.address == 24576 * 2**20 - 65536
    prof = regs.profile("navi31")
    bases = discovered_bases(prof, d)
    assert set(bases) == set(prof.blocks)
    for block in prof.blocks:
        assert bases[block] == _facts(block), block
    assert d.versions()["gc"] == (11, 0, 0) and d.versions()["smuio"] == (13, 0, 6) and d.gfx_target == "gfx1100"
    if transport.name == "usb":  # BAR0 resized to 32 GiB: one streamed read of 10 KiB
        assert d.path == "bar0" and cost["usb_transfers"] <= 12 and cost["reg_writes"] == 0
    else:  # BAR0 256 MiB < 24 GiB: MM_INDEX_HI once, then MM_INDEX + MM_DATA per dword
        assert d.path == "indirect" and cost["reg_reads"] == 1 + 2560 and cost["reg_writes"] == 1 + 2560


def test_navi31_nbio_lists_six_bases_like_the_kernels_navi2x_tables(transport: Transport) -> None:
    """NBIO 4.3.0 registers of segment 5 exist (RCC_DEV0_EPF2_STRAP2, BIF_BX_PF1_GPU_HDP_FLUSH_REQ): the board's
    table gives the sixth base a driver building every NBIO register needs (Linux 6.12 beige_goby_ip_offset.h and
    dimgrey_cavefish_ip_offset.h: 0x04040000), and the register resolves through it."""
    d = read_discovery(transport)
    assert d.bases("nbio") == (0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x4040000)
    asic = asic_from_device(transport)
    assert asic.offset("nbio.RCC_DEV0_EPF2_STRAP2") == 4 * (0x4040000 + 0xD102)  # nbio_4_3_0: seg 5, dword 0xD102


def test_asic_from_device_resolves_the_spec_constants(transport: Transport) -> None:
    warnings: list[str] = []
    a = asic_from_device(transport, warn=warnings.append)
    assert a.source == "discovery" and warnings == [] and a.discovery is not None
    assert a.offset("smuio.ROM_SW_CNTL") == 0x5A3A0
    assert a.offset("mp0.MP0_SMN_C2PMSG_115") == 0x582CC
    assert not a.blocks["smuio"].inferred
    assert regs.Mmio(transport, a).read("smuio.ROM_SW_CNTL") == regs.Mmio(transport, regs.asic("navi31")).read(
        "smuio.ROM_SW_CNTL")


_PRISTINE = mock_discovery.discovery_image(NAVI31.profile, mock_discovery.gc_info_table(dict(NAVI31.gc_info)))


def _corrupt(*_board: object) -> bytes:  # the board passes its profile and gc info
    blob = bytearray(_PRISTINE)
    blob[-1] ^= 0x40  # a base byte: the checksums no longer match
    return bytes(blob)


@pytest.mark.parametrize("board", BOARDS)
def test_a_corrupted_table_falls_back_to_the_facts_with_one_warning(board: str, monkeypatch) -> None:
    monkeypatch.setattr(mock_discovery, "discovery_image", _corrupt)
    opened = open_device(parse_device(board + ",strict"))
    try:
        warnings: list[str] = []
        a = asic_from_device(opened.transport, warn=warnings.append)
    finally:
        opened.close()
    assert a.source == "facts" and a.offset("smuio.ROM_SW_CNTL") == 0x5A3A0
    assert len(warnings) == 1 and "fails its checks" in warnings[0] and "navi31 fact table" in warnings[0]

    res = run_cli("--device", board, "--json", "reg", "read", "smuio.ROM_SW_CNTL")
    assert res.code == 0, res.err
    assert json.loads(res.out)[0]["source"] == "facts"
    assert [ln for ln in res.err.splitlines() if ln.startswith("warning:")] == [warnings[0]]
    res = run_cli("--device", board, "reg", "discovery")
    assert res.code == 1 and "checksum" in res.out and "fails its checks" in res.err


def test_an_unreadable_vram_size_falls_back(monkeypatch) -> None:
    from dataclasses import replace

    from tinyhw.boards import navi31

    # the description the board is built from says no vram
    monkeypatch.setattr(navi31, "NAVI31", replace(navi31.NAVI31, vram_size=0))
    opened = open_device(parse_device("mock:navi31,strict"))
    try:
        warnings: list[str] = []
        assert asic_from_device(opened.transport, warn=warnings.append).source == "facts"
    finally:
        opened.close()
    assert "ip discovery unreadable (RCC_DEV0_EPF0_RCC_CONFIG_MEMSIZE reads 0x0" in warnings[0]


def _moved(*_board: object) -> bytes:
    """The board's table with SMUIO seg0 one dword higher: ROM_SW_CNTL then sits where ROM_SW_STATUS is."""
    ips = [IpSpec(i.block, i.version, (i.bases[0] + 1, *i.bases[1:]) if i.block == "smuio" else i.bases)
           for i in mock_discovery.profile_ips(NAVI31.profile)]
    return build_discovery(ips)


@pytest.mark.parametrize("board", BOARDS)
def test_other_bases_in_the_table_move_the_offsets_reg_read_uses(board: str, monkeypatch) -> None:
    monkeypatch.setattr(mock_discovery, "discovery_image", _moved)
    res = run_cli("--device", board, "--json", "reg", "read", "smuio.ROM_SW_CNTL", "mp0.MP0_SMN_C2PMSG_115")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert [(d["name"], d["offset"], d["source"]) for d in doc] == [
        ("smuio.ROM_SW_CNTL", 0x5A3A4, "discovery"),  # moved with the device's SMUIO base
        ("mp0.MP0_SMN_C2PMSG_115", 0x582CC, "discovery"),  # MP0 base unchanged
    ]
    offline = run_cli("--device", board, "--json", "reg", "read", "smuio.ROM_SW_CNTL", "--asic", "navi31")
    assert json.loads(offline.out)[0]["offset"] == 0x5A3A4  # --asic picks the profile; bases still from the device
    found = run_cli("--device", board, "--json", "reg", "find", "smuio.ROM_SW_CNTL")
    assert json.loads(found.out)[0]["offset"] == 0x5A3A4 and set(json.loads(found.out)[0]) == {"name", "offset",
                                                                                              "fields"}
    assert json.loads(run_cli("--json", "reg", "find", "smuio.ROM_SW_CNTL", "--asic", "navi31").out)[0][
        "offset"] == 0x5A3A0  # offline: the fact table


@pytest.mark.parametrize("board", BOARDS)
def test_reg_discovery_lists_the_ip_versions(board: str) -> None:
    res = run_cli("--device", board, "--json", "--stats", "reg", "discovery")
    assert res.code == 0, res.err
    doc = json.loads(res.out)
    assert doc["vram_mib"] == 24576 and doc["problems"] == [] and doc["gfx_target"] == "gfx1100"
    assert {ip["block"]: ip["version"] for ip in doc["ips"]}["mp0"] == "13.0.0"
    assert doc["path"] == ("bar0" if board.endswith("usb") else "indirect")
    print(f"\nreg discovery on {board}: {res.stats}")
    human = run_cli("--device", board, "reg", "discovery")
    assert "smuio   hw_id 4    #0  13.0.6    0x16800" in human.out


def test_a_transport_without_a_vram_bar_uses_the_facts_without_touching_registers() -> None:
    from tests.regs.test_reg_cli import FakeTransport

    t = FakeTransport()
    warnings: list[str] = []
    assert asic_from_device(t, warn=warnings.append).source == "facts"
    assert t.log == [] and "no vram bar" in warnings[0]


def test_the_discovery_document_is_library_data_the_cli_prints() -> None:
    """``reg discovery --json`` is exactly ``read_discovery(...).as_dict()``: the CLI only formats."""
    import tinyhw

    with tinyhw.open("mock:navi31") as dev:
        doc = read_discovery(dev.transport).as_dict()
    assert doc["gfx_target"] == "gfx1100" and doc["path"] in ("bar0", "indirect") and doc["problems"] == []
    smuio = next(ip for ip in doc["ips"] if ip["block"] == "smuio")
    assert (smuio["hw_id"], smuio["instance"], smuio["die"]) == (4, 0, 0)
    res = run_cli("--device", "mock:navi31", "--json", "reg", "discovery")
    assert res.code == 0, res.err
    assert json.loads(res.out) == doc
