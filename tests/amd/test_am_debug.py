"""`tinyhw am status|rings|waves|hang-report` and the library views behind them, on the emulated Navi31.

A never-ending probe (s_add_u32 s0, s0, 1; s_branch back) is launched on a booted board; once it runs past the
command processor's budget its waves stay resident, and the views must show the hung queue (busy bits), the
unconsumed RELEASE_MEM after the DISPATCH_DIRECT, and the halted waves with their PC, SGPRs and VGPRs as the
program and the initial wave state (specs/amd-compute.md §4) say.
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

import pytest
from amfake import boot_emulated_board
from clihelp import run

import tinyhw
from tinyhw.boot.amd import compute, gpustatus, hangreport, rings, waves
from tinyhw.formats.amdgpu_code import KernelDescriptor
from tinyhw.mocks.amd import sqind

#: s_add_u32 s0, s0, 1 ; s_branch -2 (back to the add) ; s_endpgm -- wave32, 16 VGPRs, no user SGPRs
LOOP = compute.Kernel("loop", KernelDescriptor(0, 0, 0, 0, 0x40AF0081, 0, 0, 0x400),
                      struct.pack("<III", 0x80008100, 0xBFA0FFFE, 0xBFB00000), 0)
ENTRY = compute.va(compute.CODE)


@pytest.fixture
def booted() -> None:
    boot_emulated_board()


class _Board:
    """What the tests look at: ``transport.board`` (the emulator, beside the driver's view)."""

    def __init__(self, board) -> None:
        self.transport = type("T", (), {"board": board})()


def _drop(eng: compute.ComputeEngine) -> None:
    """Dequeue a hung queue the way ``am reset`` does (RESET_WAVES: a drain would wait for waves that never end)."""
    eng.close(reset_waves=True)


@pytest.fixture
def hung(booted: None, request: pytest.FixtureRequest, tmp_path: Path):
    """(board, engine) with the loop probe resident: 64 work-items, two waves. ``mock:navi31`` unless the test is
    parametrized with ``mock:navi31-usb``: the same board behind the emulated bridge, through the real USB driver."""
    if getattr(request, "param", "mock:navi31") == "mock:navi31-usb":
        from usbcopyhelp import rig

        with rig(tmp_path) as r:
            r.board.cp.watchdog = 2000
            eng = compute.ComputeEngine(r.gpu, timeout=0.2)
            eng.create()
            eng.launch(LOOP, (1,), (64,), [])
            yield _Board(r.board), eng
            _drop(eng)
        return
    with tinyhw.open("mock:navi31,strict") as o:
        o.transport.board.cp.watchdog = 2000
        eng = compute.open_compute(o.transport, timeout=0.2)
        eng.launch(LOOP, (1,), (64,), [])
        try:
            yield o, eng
        finally:
            _drop(eng)


def test_status_of_a_hung_queue_names_the_busy_bits(hung) -> None:
    o, eng = hung
    doc = gpustatus.read_status(eng.gpu)
    grbm = doc["groups"]["grbm"][0]
    assert grbm["name"] == "GRBM_STATUS" and {"CP_BUSY", "GUI_ACTIVE", "SPI_BUSY"} <= set(grbm["flagged"])
    mec = {r["name"]: r["flagged"] for r in doc["groups"]["mec"]}
    assert {"MEC1_BUSY", "CPC_BUSY"} <= set(mec["CP_CPC_STATUS"]) and mec["CP_CPC_BUSY_STAT"] == ["MEC1_PIPE0_BUSY"]
    assert doc["groups"]["grbm"][1]["flagged"] == ["CPC_BUSY"]  # GRBM_STATUS2
    assert doc["queue"]["active"] and doc["queue"]["pending_dwords"] == 8  # the RELEASE_MEM
    assert doc["verdict"].startswith("busy: ") and "8 dwords not consumed" in doc["verdict"]
    _drop(eng)
    idle = gpustatus.read_status(eng.gpu)
    assert idle["groups"]["grbm"][0]["flagged"] == [] and idle["verdict"].startswith("gfx idle")
    assert all(not r["flagged"] for r in idle["groups"]["mec"])


def test_flag_rule() -> None:
    assert gpustatus.flagged("CP_BUSY", 1) and not gpustatus.flagged("CP_BUSY", 0)
    assert gpustatus.flagged("IDLE", 0) and not gpustatus.flagged("MC_RD_IDLE", 1)
    assert not gpustatus.flagged("RB_SIZE", 5)
    assert not gpustatus.flagged("MEC_PIPE0_ACTIVE", 1, "CP_MEC_RS64_CNTL")
    assert gpustatus.flagged("MEC_HALT", 1, "CP_MEC_RS64_CNTL")


@pytest.mark.parametrize("hung", ["mock:navi31", "mock:navi31-usb"], indirect=True)
def test_compute_ring_shows_the_unconsumed_fence_and_the_dispatch_before_it(hung) -> None:
    o, eng = hung
    doc = rings.read_ring(eng.gpu, "compute", last=3)
    assert doc["problems"] == [] and doc["wptr"] == eng.wptr
    [fence] = doc["pending"]
    assert fence["name"] == "RELEASE_MEM" and fence["fields"]["addr"] == compute.va(compute.FENCE)
    assert fence["fields"]["data"] == eng.seq and fence["fields"]["data_sel"] == 1
    names = [p["name"] for p in doc["history"]]
    assert names == ["SET_SH_REG", "SET_SH_REG", "DISPATCH_DIRECT"], names
    d = doc["history"][-1]["fields"]
    assert (d["dim_x"], d["dim_y"], d["dim_z"]) == (1, 1, 1)
    regs = doc["history"][-2]["fields"]["registers"]
    assert regs["gc.COMPUTE_NUM_THREAD_X"] == 64
    full = rings.read_ring(eng.gpu, "compute", last=256)
    assert full["history"][0]["name"] == "ACQUIRE_MEM" and full["history"][0]["at"] == 0
    pgm = next(p for p in full["history"] if "gc.COMPUTE_PGM_LO" in p["fields"].get("registers", {}))
    assert pgm["fields"]["registers"]["gc.COMPUTE_PGM_LO"] == (ENTRY >> 8) & 0xFFFFFFFF


def test_an_indirect_buffer_is_followed(hung) -> None:
    o, eng = hung
    from tinyhw.boot.amd import pm4

    ib_at = compute.KERNARG + 0x8000
    ib = pm4.nop(2) + pm4.dispatch_direct((3, 2, 1), pm4.INITIATOR_W32)
    eng.gpu.vram_write(compute.REGION + ib_at, struct.pack(f"<{len(ib)}I", *ib))
    va = compute.va(ib_at)
    eng.submit([pm4.header(pm4.NVD["PACKET3_INDIRECT_BUFFER"], 3), va & 0xFFFFFFFC, va >> 32, len(ib) | 1 << 23])
    doc = rings.read_ring(eng.gpu, "compute", last=0)
    ibp = doc["pending"][-1]
    assert ibp["name"] == "INDIRECT_BUFFER" and ibp["fields"]["ib_va"] == va
    assert [p["name"] for p in ibp["ib"]] == ["NOP", "NOP", "DISPATCH_DIRECT"]
    assert ibp["ib"][-1]["fields"]["dim_x"] == 3
    text = "\n".join(hangreport.ring_lines(doc))
    assert "ib 0x000002 DISPATCH_DIRECT" in text and "* 0x" in text


def _s0(gpu) -> tuple[int, int]:
    scan = waves.scan(gpu, sgprs=1, vgprs=0)
    return tuple(w["sgprs"][0] for w in scan["waves"])  # type: ignore[return-value]


@pytest.mark.parametrize("hung", ["mock:navi31", "mock:navi31-usb"], indirect=True)
def test_halted_waves_show_the_known_program_and_initial_state(hung) -> None:
    o, eng = hung
    g = eng.gpu
    with waves.halted(g):
        scan = waves.scan(g, vgprs=1)
        again = _s0(g)
    ws = scan["waves"]
    assert len(ws) == 2 and scan["slots_scanned"] == 6 * 2 * 4 * 4 * 16
    for i, w in enumerate(ws):
        assert w["slot"] == sqind.slot_of(i).to_doc()
        assert w["hw_id1"]["SIMD_ID"] == i % 4
        assert "HALT" in w["status_flags"] and "VALID" in w["status_flags"]
        assert w["pc"] in (ENTRY, ENTRY + 4)
        assert w["instruction"]["text"] == ("s_add_u32 s0, s0, 1" if w["pc"] == ENTRY else "s_branch 65534")
        assert w["exec"] == 0xFFFFFFFF
        assert [lane[0] for lane in w["vgprs"]] == list(range(32 * i, 32 * i + 32))  # v0 = work-item id (§4.2)
        assert w["sgprs"][0] > 0  # the loop counter ran
    assert again == tuple(w["sgprs"][0] for w in ws), "a halted wave moved"
    after = _s0(g)
    assert all(b > a for a, b in zip(again, after, strict=True)), "resumed waves did not move"
    assert o.transport.board.cp.sq.stats["halts"] == 1 and o.transport.board.cp.sq.stats["resumes"] == 1


def test_halt_is_undone_after_an_error(hung) -> None:
    o, eng = hung
    with pytest.raises(KeyboardInterrupt), waves.halted(eng.gpu):
        raise KeyboardInterrupt
    assert not o.transport.board.cp.sq.halted


def test_a_dequeue_drops_the_resident_waves(hung) -> None:
    o, eng = hung
    _drop(eng)
    assert waves.scan(eng.gpu)["waves"] == []


@pytest.mark.parametrize("hung", ["mock:navi31", "mock:navi31-usb"], indirect=True)
def test_hang_report_collects_everything_and_renders_text(hung) -> None:
    o, eng = hung
    doc = hangreport.collect(eng.gpu, marks=["mark one"], last=2)
    assert doc["problems"] == [] and len(doc["waves"]["waves"]) == 2 and doc["waves"]["halted_while_read"]
    assert doc["ring_compute"]["pending"][0]["name"] == "RELEASE_MEM" and doc["ring_sdma0"]["problems"] == []
    assert not o.transport.board.cp.sq.halted  # resumed
    text = hangreport.text(doc)
    for want in ("status: busy:", "CP_BUSY", "ring compute", "RELEASE_MEM", "waves: 2 resident",
                 "s_add_u32 s0, s0, 1", "mark one"):
        assert want in text, want
    json.loads(hangreport.to_json(doc))


# -- the CLI, over the direct and the USB-bridged board ---------------------------------------------------------
@pytest.mark.parametrize("device", ["mock:navi31", "mock:navi31-usb"])
def test_cli_views_of_an_idle_board(booted: None, device: str) -> None:
    r = run("--device", device, "--json", "am", "status")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["verdict"].startswith("gfx idle") and doc["groups"]["sdma0"][0]["flagged"] == []
    r = run("--device", device, "--json", "am", "rings", "--ring", "sdma0", "--last", "4")
    assert r.code == 0, r.err
    assert json.loads(r.out)["ring"] == "sdma0"
    r = run("--device", device, "am", "waves", "--halt")
    assert r.code == 0 and "0 wave(s) resident" in r.out, r.err
    r = run("--device", device, "am", "status")
    assert r.code == 0 and "GRBM_STATUS" in r.out and "not booted" not in r.out


@pytest.mark.parametrize("view", [["status"], ["rings"], ["rings", "--ring", "sdma0"], ["waves"]])
def test_cli_views_say_a_cold_board_is_not_booted(view: list[str], tmp_path: Path) -> None:
    """A board no tinyhw boot brought up reads idle: the views still read it, and say plainly it is not booted."""
    device = f"mock:navi31,flash={tmp_path / 'flash.bin'}"
    r = run("--device", device, "am", *view)
    assert r.code == 0, r.err
    assert r.out.splitlines()[0].endswith("not booted by tinyhw (run: tinyhw am boot --yes)"), r.out
    r = run("--device", device, "--json", "am", *view)
    doc = json.loads(r.out)
    assert r.code == 0 and doc["booted"] is False and "tinyhw am boot --yes" in doc["boot_note"]
    boot_emulated_board(device)
    r = run("--device", device, "--json", "am", *view)
    doc = json.loads(r.out)
    assert r.code == 0 and doc["booted"] is True and doc["boot_note"] is None
    assert "not booted" not in run("--device", device, "am", *view).out


def test_cli_hang_report_writes_one_checked_file(booted: None, tmp_path: Path) -> None:
    out = tmp_path / "hang.json"
    r = run("--device", "mock:navi31", "--json", "am", "hang-report", "-o", str(out))
    assert r.code == 0, r.err
    doc = json.loads(out.read_text())
    assert doc["tinyhw_hang_report"] == 1 and "status" in doc and "ring_compute" in doc and "waves" in doc
    assert any(line.startswith("status: ") for line in doc["text"])
    assert json.loads(r.out)["output"] == str(out)
    r = run("--device", "mock:navi31", "am", "hang-report", "-o", str(out))
    assert r.code == 2 and "exists" in r.err
    r = run("--device", "mock:navi31", "am", "hang-report", "-o", str(out), "--force")
    assert r.code == 0, r.err


def test_cli_hang_report_never_replaces_a_fifo_or_a_device_behind_a_symlink(booted: None, tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    r = run("--device", "mock:navi31", "am", "hang-report", "-o", str(fifo), "--force")
    assert r.code == 2 and "fifo" in r.err.lower(), r.err
    link = tmp_path / "link"
    link.symlink_to("/dev/null")
    r = run("--device", "mock:navi31", "am", "hang-report", "-o", str(link), "--force")
    assert r.code == 2 and Path("/dev/null").exists()


def test_cli_refuses_a_board_that_is_not_amd() -> None:
    r = run("--device", "mock:ad102", "am", "status")
    assert r.code == 2 and "is not an amd gpu" in r.err, r.err


@pytest.mark.parametrize("args", [["rings", "--last", "257"], ["rings", "--ring", "gfx"], ["waves", "--vgprs", "-1"],
                                  ["hang-report"]])
def test_cli_bad_input_is_refused(args: list[str]) -> None:
    r = run("--device", "mock:navi31", "am", *args)
    assert r.code == 2, (r.out, r.err)


def test_mark_log_keeps_the_recent_steps_for_the_report(hung) -> None:
    o, eng = hung
    marks = hangreport.MarkLog(eng.gpu.clock)
    for i in range(hangreport.MAX_MARKS + 5):
        marks("copy engine", "start", {})
        marks("copy engine", "end", {"seconds": 0.5 * i})
    marks.note("launched the loop probe")
    doc = hangreport.collect(eng.gpu, marks=marks, halt=False)
    assert len(doc["marks"]) == hangreport.MAX_MARKS + 1  # the kept marks, then the board state line
    assert doc["marks"][-2].endswith("launched the loop probe") and "step copy engine done in" in doc["marks"][-3]
    assert doc["marks"][-1].startswith("board state: tinyhw boot flags set")
    assert not doc["waves"]["halted_while_read"]


def test_sdma_packets_decode_by_their_layout_names() -> None:
    from tinyhw.boot.amd import ringdecode, sdmapkt

    copy = sdmapkt.copy_linear(0x1_2345_6780, 0x9_8765_4320, 0x100)
    assert copy[0] == 0x00000001 and ringdecode.sdma_length(copy) == 7  # op COPY 1, sub-op COPY_LINEAR 0
    d = ringdecode.decode_sdma(copy)["fields"]
    assert d["count"] == 0xFF and d["src_addr_31_0"] == 0x23456780 and d["src_addr_63_32"] == 1
    assert d["dst_addr_31_0"] == 0x87654320 and d["dst_addr_63_32"] == 9
    w = sdmapkt.write64(0x4000, 0xAABBCCDD_11223344)
    assert ringdecode.sdma_length(w) == 6 and ringdecode.decode_sdma(w)["name"] == "WRITE_UNTILED"
    assert ringdecode.decode_sdma(w)["fields"]["data0"] == 0x11223344
    ib = sdmapkt.indirect(0x1_0000_2000, 24)
    assert ib[0] == 0x00000004 and ringdecode.sdma_length(ib) == 6  # INDIRECT: op 4, 6 dwords (generated layout)
    d = ringdecode.decode_sdma(ib)
    assert d["name"] == "INDIRECT" and ringdecode.sdma_ib(d) == (0x1_0000_2000, 24, 0)
    assert ringdecode.sdma_length([0x00000003, 0, 0, 0]) is None  # op 3: no layout, length unknown
    # POLL_REGMEM "memory equal", interval 4, retry 0xFFF (specs/asm24-usb-bridge.md §9.3): fields at high bits
    poll = ringdecode.decode_sdma([0xB0000008, 0x1000, 0, 5, 0xFFFFFFFF, 0x0FFF0004])
    assert poll["name"] == "POLL_REGMEM"
    f = poll["fields"]
    assert (f["func"], f["mem_poll"], f["value"], f["interval"], f["retry_count"]) == (3, 1, 5, 4, 0xFFF)


def test_sdma_ring_shows_what_the_copy_engine_ran(hung) -> None:
    from tinyhw.boot.amd import copyengine, sdmapkt

    o, eng = hung
    g = eng.gpu
    ce = copyengine.start_sdma(g)
    dst = g.mc(compute.REGION + 0x3000)
    ce.submit(sdmapkt.write64(dst, 0x1234) + [0, 0])
    ce.wait_idle()
    doc = rings.read_ring(g, "sdma0", last=8)
    assert doc["problems"] == [] and doc["pending"] == [] and doc["rptr"] == doc["wptr"] == 8
    assert [p["name"] for p in doc["history"]] == ["WRITE_UNTILED", "NOP", "NOP"]
    f = doc["history"][0]["fields"]
    assert f["dst_addr_31_0"] | f["dst_addr_63_32"] << 32 == dst and f["data0"] == 0x1234


def test_sdma_ring_follows_an_indirect_buffer_the_engine_ran(hung) -> None:
    """An INDIRECT submitted through SDMA0's ring: the emulated engine runs the buffer's packets (a write and a fence
    land), and ``am rings --ring sdma0`` decodes the INDIRECT by its fields and the buffer's packets inside it,
    then goes on after it."""
    from tinyhw.boot.amd import copyengine, sdmapkt

    o, eng = hung
    g = eng.gpu
    ce = copyengine.start_sdma(g)
    ib_at, dst, fence = compute.REGION + 0x4000, compute.REGION + 0x3000, compute.REGION + 0x3100
    ib = sdmapkt.write64(g.mc(dst), 0xAABB_CCDD_0000_1234) + sdmapkt.fence(g.mc(fence), 7)
    g.vram_write(ib_at, struct.pack(f"<{len(ib)}I", *ib))
    g.vram_write(fence, bytes(4))
    ce.submit(sdmapkt.indirect(g.mc(ib_at), len(ib)) + sdmapkt.write64(g.mc(dst + 8), 0x55))
    ce.wait_idle()
    assert g.vram_read(dst, 16) == struct.pack("<QQ", 0xAABB_CCDD_0000_1234, 0x55)  # the buffer ran, then the ring
    assert g.vram_read(fence, 4) == struct.pack("<I", 7)
    assert o.transport.board.sdma.stats["indirect_buffers"] == 1
    doc = rings.read_ring(g, "sdma0", last=8)
    assert doc["problems"] == [], doc["problems"]
    names = [p["name"] for p in doc["history"]]
    assert names == ["INDIRECT", "WRITE_UNTILED"], names
    ind = doc["history"][0]
    assert ind["fields"]["ib_size"] == len(ib) and "ib_problem" not in ind
    assert [p["name"] for p in ind["ib"]] == ["WRITE_UNTILED", "FENCE"]
    assert ind["ib"][0]["fields"]["data0"] == 0x1234 and ind["ib"][1]["fields"]["data"] == 7
    text = "\n".join(hangreport.ring_lines(doc))
    assert "ib 0x000006 FENCE" in text, text


def test_a_poll_parked_inside_an_indirect_buffer_resumes_there(hung) -> None:
    """A POLL that fails inside an indirect buffer parks the engine with the ring's read pointer on the INDIRECT; the
    next kick resumes at the POLL, so the write before it runs once and the buffer counts once."""
    from tinyhw.boot.amd import copyengine, sdmapkt

    o, eng = hung
    g = eng.gpu
    sdma = o.transport.board.sdma
    ce = copyengine.start_sdma(g)
    ib_at, flag, dst = compute.REGION + 0x4000, compute.REGION + 0x3100, compute.REGION + 0x3000
    g.vram_write(flag, bytes(4))
    g.vram_write(dst, bytes(16))
    ib = (sdmapkt.write64(g.mc(dst), 1) + sdmapkt.poll_mem_equal(g.mc(flag), 5) + sdmapkt.write64(g.mc(dst + 8), 2))
    g.vram_write(ib_at, struct.pack(f"<{len(ib)}I", *ib))
    ce.submit(sdmapkt.indirect(g.mc(ib_at), len(ib)))
    assert sdma.waiting and g.vram_read(dst, 16) == struct.pack("<QQ", 1, 0)
    writes = sdma.stats["writes"]
    assert rings.read_ring(g, "sdma0", last=0)["pending"][0]["name"] == "INDIRECT"  # the read pointer stays on it
    g.vram_write(flag, struct.pack("<I", 5))
    ce.submit([0])  # any doorbell kicks the parked engine
    ce.wait_idle()
    assert g.vram_read(dst, 16) == struct.pack("<QQ", 1, 2) and not sdma.waiting
    assert sdma.stats["writes"] == writes + 1 and sdma.stats["indirect_buffers"] == 1


def test_sdma_indirect_buffers_are_bounded(hung) -> None:
    """A buffer that does not end on a packet boundary is a problem of the packet; the emulated engine stops at a
    packet that runs past its indirect buffer, and at an INDIRECT inside one (one level deep)."""
    from tinyhw.boot.amd import copyengine, sdmapkt

    o, eng = hung
    g = eng.gpu
    sdma = o.transport.board.sdma
    sdma.strict = False  # a stop is the expected outcome here
    ce = copyengine.start_sdma(g)
    ib_at = compute.REGION + 0x4000
    ib = sdmapkt.write64(g.mc(compute.REGION + 0x3000), 1)
    g.vram_write(ib_at, struct.pack(f"<{len(ib)}I", *ib))
    ce.submit(sdmapkt.indirect(g.mc(ib_at), 4))  # the 6-dword write cut at 4
    assert sdma.error and "runs past its 4 dwords" in sdma.error
    doc = rings.read_ring(g, "sdma0", last=0)
    [ind] = doc["pending"]
    assert ind["name"] == "INDIRECT" and "needs 6 dwords, only 4 are there" in ind["ib"][0]["problem"]
    sdma.error = None
    g.vram_write(ib_at, struct.pack("<6I", *sdmapkt.indirect(g.mc(ib_at), 6)))  # an IB that names itself
    ce2 = copyengine.start_sdma(g)
    ce2.submit(sdmapkt.indirect(g.mc(ib_at), 6))
    assert sdma.error == "an INDIRECT inside an indirect buffer is not modelled"
    doc = rings.read_ring(g, "sdma0", last=0)
    inner = doc["pending"][0]["ib"][0]["ib"][0]
    assert inner["name"] == "INDIRECT" and inner["ib_problem"].startswith("not followed: deeper than 2 levels")


def test_cli_views_over_a_remote_board(booted: None, tmp_path: Path) -> None:
    from remotehelp import served

    with served("mock:navi31") as s:
        r = run("--device", s.device(), "--json", "am", "status")
        assert r.code == 0, r.err
        assert json.loads(r.out)["verdict"].startswith("gfx idle")
        r = run("--device", s.device(), "--json", "am", "waves", "--halt", "--sgprs", "0")
        assert r.code == 0 and json.loads(r.out)["waves"] == [], r.err
        out = tmp_path / "r.json"
        r = run("--device", s.device(), "am", "hang-report", "-o", str(out))
        assert r.code == 0 and json.loads(out.read_text())["ring_sdma0"]["ring"] == "sdma0", r.err
