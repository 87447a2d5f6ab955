"""Register write plans (tinyhw/regs/plan.py): library data that ``reg write`` only formats, carried out by
``Mmio.apply`` (which ``Mmio.update`` and field writes use too: one read-modify-write in the library)."""

from __future__ import annotations

import inspect

import pytest
from testpaths import ROOT

from tests.regs.test_reg_cli import FakeTransport
from tinyhw import regs
from tinyhw.errors import Refused
from tinyhw.regs import Mmio, WritePlan

NAVI31 = regs.asic("navi31")


def test_plan_groups_by_register_and_checks_before_any_access() -> None:
    plan = WritePlan.build(NAVI31, [("smuio.ROM_SW_CNTL.DATA_SIZE", 4), ("mp0.MP0_SMN_C2PMSG_116", 7),
                                    ("smuio.ROM_SW_CNTL.COMMAND_SIZE", 3)])
    assert [s.register.name for s in plan.steps] == ["smuio.ROM_SW_CNTL", "mp0.MP0_SMN_C2PMSG_116"]
    assert [a["name"] for a in plan.describe()] == [
        "smuio.ROM_SW_CNTL.DATA_SIZE", "smuio.ROM_SW_CNTL.COMMAND_SIZE", "mp0.MP0_SMN_C2PMSG_116"]
    first = plan.describe()[0]
    assert first == {"name": "smuio.ROM_SW_CNTL.DATA_SIZE", "register": "smuio.ROM_SW_CNTL", "bar": 5,
                     "offset": 0x5A3A0, "value": 4, "field": "DATA_SIZE", "bits": "15:0", "read_modify_write": True}
    with pytest.raises(Refused, match="does not fit field COMMAND_SIZE"):
        WritePlan.build(NAVI31, [("smuio.ROM_SW_CNTL.COMMAND_SIZE", 8)])
    with pytest.raises(Refused, match="does not fit the 32-bit register"):
        WritePlan.build(NAVI31, [("smuio.ROM_CNTL", 1 << 32)])


def test_apply_reads_once_and_writes_once_per_register() -> None:
    t = FakeTransport()
    t.mem[0x5A3A0] = 0xFFFF0000
    plan = WritePlan.build(NAVI31, [("smuio.ROM_SW_CNTL.DATA_SIZE", 4), ("smuio.ROM_SW_CNTL.COMMAND_SIZE", 3)])
    done = Mmio(t, NAVI31).apply(plan)
    assert [(w.register.name, w.old, w.new) for w in done] == [("smuio.ROM_SW_CNTL", 0xFFFF0000, 0xFFFB0004)]
    assert t.log == [("r", 0x5A3A0), ("w", 0x5A3A0, 0xFFFB0004)]
    assert done[0].as_dict() == {"name": "smuio.ROM_SW_CNTL", "offset": 0x5A3A0, "old": 0xFFFF0000, "new": 0xFFFB0004}


def test_update_is_a_one_register_plan() -> None:
    t = FakeTransport()
    t.mem[0x5A3A0] = 0xFFFF0000
    assert Mmio(t, NAVI31).update("smuio.ROM_SW_CNTL", data_size=4, COMMAND_SIZE=3) == (0xFFFF0000, 0xFFFB0004)
    with pytest.raises(Refused, match="has no field"):
        Mmio(t, NAVI31).update("smuio.ROM_SW_CNTL", NOPE=1)


def test_the_cli_and_mmio_have_no_read_modify_write_of_their_own() -> None:
    from tinyhw.cli import reg_cmd
    from tinyhw.regs import mmio

    assert ".insert(" not in inspect.getsource(reg_cmd)
    assert ".insert(" not in inspect.getsource(mmio) and ".encode(" not in inspect.getsource(mmio)


def test_readme_library_data_example_runs_as_written() -> None:
    import subprocess
    import sys

    text = (ROOT / "README.md").read_text()
    code = text.split("## Library data the CLI only formats", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[1] == "smuio.ROM_CNTL 0x2000802 0x8000802" and lines[2].startswith("mp0.MP0_SMN_C2PMSG_116 ")
    assert "'gfx_target': 'gfx1100'" in lines[3]
