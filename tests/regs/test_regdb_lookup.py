"""Register lookups by name (tinyhw.regs) against the committed databases: the spec's constants,
fields, globs, closest-match errors, bases supplied from a device, lazy loading, data invariants."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tinyhw import regs
from tinyhw.autogen import sources
from tinyhw.errors import Refused

# navi31-spi-flash.md §0, §a.2, §a.4 (hardware-validated seed constants)
SPEC_OFFSETS = {
    "smuio.ROM_CNTL": 0x5A380,
    "smuio.PAGE_MIRROR_CNTL": 0x5A384,
    "smuio.ROM_INDEX": 0x5A390,
    "smuio.ROM_DATA": 0x5A394,
    "smuio.ROM_SW_CNTL": 0x5A3A0,
    "smuio.ROM_SW_STATUS": 0x5A3A4,
    "smuio.ROM_SW_COMMAND": 0x5A3A8,
    "smuio.ROM_SW_DATA_1": 0x5A3B0,
    "smuio.ROM_SW_DATA_64": 0x5A4AC,
    "smuio.SMU_GPIOPAD_MASK": 0x5A504,
    "smuio.SMU_GPIOPAD_A": 0x5A508,
    "smuio.SMU_GPIOPAD_EN": 0x5A510,
    "mp0.MP0_SMN_C2PMSG_73": 0x58224,
    "mp0.MP0_SMN_C2PMSG_115": 0x582CC,
    "mp0.MP0_SMN_C2PMSG_116": 0x582D0,
}


@pytest.mark.parametrize(("name", "offset"), sorted(SPEC_OFFSETS.items()))
def test_spec_constants_resolve_on_navi31(name: str, offset: int) -> None:
    assert regs.asic("navi31").reg(name).offset == offset
    assert regs.asic("navi31").offset(name.lower()) == offset


def test_spec_field_facts() -> None:
    n31 = regs.asic("navi31")
    assert n31.field("smuio.ROM_SW_CNTL.DATA_SIZE") == regs.Field("DATA_SIZE", 0, 0xFFFF)
    assert n31.field("smuio.ROM_SW_CNTL.COMMAND_SIZE").bits == "18:16"
    assert n31.field("smuio.ROM_SW_CNTL.ROM_SW_RETURN_DATA_ENABLE").mask == 1 << 19
    assert n31.field("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK").bits == "27:24"
    assert n31.field("smuio.ROM_SW_COMMAND.ROM_SW_ADDRESS").bits == "31:8"
    assert n31.field("smuio.ROM_STATUS.ROM_BUSY").mask == 1


def test_other_blocks_of_navi31_match_amd_bringup_worked_examples() -> None:
    # amd-bringup.md §3.4: MP1 (seg0 0x16000, inferred), GC seg1 0xA000 (inferred), MMHUB, OSSSYS, HDP
    n31 = regs.asic("navi31")
    assert n31.offset("mp1.MP1_SMN_C2PMSG_66") == 0x58A08
    assert n31.offset("mp1.MP1_SMN_C2PMSG_82") == 0x58A48
    assert n31.offset("mp1.MP1_SMN_C2PMSG_90") == 0x58A68
    assert n31.offset("mp0.MP0_SMN_C2PMSG_81") == 0x58244
    assert n31.offset("gc.SCRATCH_REG7") == 0x3011C
    assert n31.reg("gc.GRBM_SOFT_RESET").dword == 0xDA8
    assert n31.reg("mmhub.MMMC_VM_FB_LOCATION_BASE").dword == 0x8EC
    assert n31.reg("osssys.IH_RB_CNTL").dword == 0x80
    assert n31.reg("hdp.HDP_MEM_POWER_CTRL").dword == 0xD4
    assert n31.reg("sdma.SDMA0_QUEUE0_RB_CNTL").block == "sdma"
    assert n31.block("smuio").inferred and n31.block("mp0").table == "mp_13_0_2"


def test_gfx1200_profile() -> None:
    g = regs.asic("gfx1200")
    assert regs.asic("navi48") is g and regs.asic("NAVI44") is g
    assert g.offset("smuio.ROM_SW_CNTL") == 0x5A3A0
    assert g.offset("mp0.MPASP_SMN_C2PMSG_115") == 0x582CC
    assert g.offset("mp1.MP1_SMN_C2PMSG_66") == 0x58A08  # seg1 0x16200, derived (profiles.py [am-mp1])
    assert g.reg("gc.SCRATCH_REG7").segment == 1
    # smuio 14.0.2 really differs from 13.0.6 in ROM_CNTL: the kernel header says bits 27:23
    assert g.field("smuio.ROM_CNTL.SCK_PRESCALE_REFCLK").bits == "27:23"
    with pytest.raises(Refused, match="no field 'READ_MODE'"):
        g.field("smuio.ROM_CNTL.READ_MODE")  # left out: the header has no _MASK for it (quirks.py)


def test_names_are_case_insensitive_and_canonical() -> None:
    reg = regs.asic("navi31").reg("SMUIO.rom_sw_cntl")
    assert reg.name == "smuio.ROM_SW_CNTL" and reg.reg_name == "ROM_SW_CNTL"
    assert reg.field("data_size").name == "DATA_SIZE"
    assert reg.decode(0x80003) == {"DATA_SIZE": 3, "COMMAND_SIZE": 0, "ROM_SW_RETURN_DATA_ENABLE": 1}
    assert reg.encode(0, data_size=4, COMMAND_SIZE=3) == 0x30004
    with pytest.raises(Refused, match="does not fit field COMMAND_SIZE"):
        reg.encode(COMMAND_SIZE=8)


def test_unknown_names_are_refused_with_the_closest_matches() -> None:
    n31 = regs.asic("navi31")
    with pytest.raises(Refused) as e:
        n31.reg("smuio.ROM_SW_CNTX")
    assert e.value.exit_code == 2
    assert "closest: smuio.ROM_SW_CNTL" in str(e.value)
    with pytest.raises(Refused, match="closest: smuio"):
        n31.reg("smuoi.ROM_SW_CNTL")
    with pytest.raises(Refused, match="closest: smuio.ROM_SW_CNTL.DATA_SIZE"):
        n31.field("smuio.ROM_SW_CNTL.DATASIZE")
    with pytest.raises(Refused, match="write smuio.ROM_SW_CNTL"):
        n31.reg("ROM_SW_CNTL")
    with pytest.raises(Refused, match="it is smuio.ROM_SW_CNTL"):
        n31.reg("gc.ROM_SW_CNTL")
    with pytest.raises(Refused, match="unknown asic 'navi3'.*closest: .*navi31"):
        regs.asic("navi3")
    with pytest.raises(Refused, match="names a field"):
        n31.reg("smuio.ROM_SW_CNTL.DATA_SIZE")


def test_find_globs() -> None:
    n31 = regs.asic("navi31")
    names = [r.name for r in n31.find("smuio.ROM_SW_*")]
    assert names[:4] == ["smuio.ROM_SW_CNTL", "smuio.ROM_SW_STATUS", "smuio.ROM_SW_COMMAND", "smuio.ROM_SW_DATA_1"]
    assert len(names) == 3 + 64
    assert [r.name for r in n31.find("mp0.mp0_smn_c2pmsg_11[56]")] == [f"mp0.MP0_SMN_C2PMSG_{n}" for n in (115, 116)]
    assert [r.name for r in n31.find("ROM_SW_CNTL")] == ["smuio.ROM_SW_CNTL"]  # one part: every block
    hits = n31.find("smuio.ROM_*.*SIZE")
    assert [(r.name, [f.name for f in r.fields]) for r in hits] == [
        ("smuio.ROM_SW_CNTL", ["DATA_SIZE", "COMMAND_SIZE"])
    ]
    with pytest.raises(Refused, match="no navi31 register matches 'smuio.ROM_SW_CNTX\\*'.*closest: smuio.ROM_SW_CNTL"):
        n31.find("smuio.ROM_SW_CNTX*")


def test_bases_from_a_device_replace_the_offline_ones() -> None:
    g12 = regs.asic("gfx1200")  # its MP1 bases of segments 2-7 are unknown offline
    found = next(r for r in g12.find("mp1.*") if r.offset is None)
    assert found.segment >= 2
    with pytest.raises(Refused, match=f"segment {found.segment} of mp1, whose base gfx1200 does not know"):
        g12.reg(found.name)
    n31 = regs.asic("navi31")
    assert n31.offset("nbio.RCC_DEV0_EPF2_STRAP2") == 4 * (0x4040000 + 0xD102)  # the offline seg5 (profiles [navi2x])
    dev = regs.asic("navi31", bases={"nbio": (0x0, 0x14, 0xD20, 0x10400, 0x241B000, 0x5050000), "smuio": (0x17000,)})
    assert dev.offset("nbio.RCC_DEV0_EPF2_STRAP2") == 4 * (0x5050000 + 0xD102)
    assert dev.offset("smuio.ROM_SW_CNTL") == 4 * (0x17000 + 0xE8)
    assert not dev.block("smuio").inferred and dev.block("mp0").inferred
    assert regs.asic("navi31").offset("smuio.ROM_SW_CNTL") == 0x5A3A0  # the cached profile is untouched
    with pytest.raises(Refused, match="no register block 'smu'"):
        regs.asic("navi31", bases={"smu": (0,)})


def test_device_ids_map_to_profiles() -> None:
    assert regs.asic_for_device(0x1002, 0x744C).name == "navi31"
    assert regs.asic_for_device(0x1002, 0x7550).name == "gfx1200"
    with pytest.raises(Refused, match="no register profile for device 1002:1234"):
        regs.asic_for_device(0x1002, 0x1234)


def test_loading_one_block_does_not_load_the_others() -> None:
    code = (
        "import sys, tinyhw.regs as r\n"
        "assert not [m for m in sys.modules if m.endswith('_regs')], 'import loaded a table'\n"
        "assert r.asic('navi31').offset('smuio.ROM_SW_CNTL') == 0x5A3A0\n"
        "loaded = sorted(m for m in sys.modules if m.endswith('_regs'))\n"
        "assert loaded == ['tinyhw.autogen.smuio_13_0_6_regs'], loaded\n"
        "assert 'click' not in sys.modules and 'rich' not in sys.modules\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("stem", sources.STEMS)
def test_every_committed_table_is_clean(stem: str) -> None:
    """No overlap, nothing past bit 31, no duplicate names (case-insensitive), in the committed data."""
    t = regs.table(stem)
    assert t.kernel.startswith("Linux 6.12.") and t.headers == sources.header_paths(stem)
    names = t.names()
    assert len({n.upper() for n in names}) == len(names) > 50
    for name in names:
        _, seg, dword, fields = t.entry(name)
        assert 0 <= seg < 8 and dword >= 0
        seen = 0
        assert len({f.name.upper() for f in fields}) == len(fields)
        for f in fields:
            assert 0 < f.mask <= 0xFFFFFFFF and f.mask & seen == 0, (name, f)
            seen |= f.mask


def test_mp_blocks_hold_only_their_own_registers() -> None:
    n31, g = regs.asic("navi31"), regs.asic("gfx1200")
    assert {r.name.split(".")[1][:4] for r in n31.find("mp0.*")} == {"MP0_"}
    assert {r.name.split(".")[1][:4] for r in n31.find("mp1.*")} == {"MP1_"}
    assert {r.name.split(".")[1][:6] for r in g.find("mp0.*")} == {"MPASP_"}
    with pytest.raises(Refused, match="it is mp1.MP1_SMN_C2PMSG_66"):
        n31.reg("mp0.MP1_SMN_C2PMSG_66")
