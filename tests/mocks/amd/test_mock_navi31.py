"""The emulated Navi31 board and its direct transport (tinyhw.mocks.amd.board, pcifunc, direct).

Config space per specs/pci-vfio-remote.md §3, BAR contents per specs/navi31-spi-flash.md §h,
the transport per ARCHITECTURE.md (counters, clock, lock, faults, persistent flash file).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tinyhw.boards.navi31 import NAVI31, Navi31Options, default_flash_path
from tinyhw.boards.options import FaultPlan
from tinyhw.errors import DeviceLocked, DeviceTimeout, Disconnected, Refused, StrictEmulationError
from tinyhw.mocks.amd.board import Navi31Board, reset_flash
from tinyhw.mocks.amd.direct import DirectTransport
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.regs import asic

R = flash_registers(asic("navi31"))  # the emulated Navi31's flash-side offsets

IMAGE = build_image(board=NAVI31)
GiB = 1 << 30
MiB = 1 << 20


def opts(tmp_path: Path, **kw: object) -> Navi31Options:
    kw.setdefault("strict", True)
    return Navi31Options(flash=tmp_path / "flash.bin", **kw)


@pytest.fixture
def board(tmp_path: Path) -> Navi31Board:
    b = Navi31Board(opts(tmp_path), spec=NAVI31)
    yield b
    b.close()


def caps(board: Navi31Board) -> list[tuple[int, int]]:
    out, ptr = [], board.cfg_read32(0x34) & 0xFC
    while ptr:
        d = board.cfg_read32(ptr)
        out.append((ptr, d & 0xFF))
        ptr = (d >> 8) & 0xFC
    return out


def ext_caps(board: Navi31Board) -> list[tuple[int, int, int]]:
    out, ptr = [], 0x100
    while ptr:
        d = board.cfg_read32(ptr)
        out.append((ptr, d & 0xFFFF, (d >> 16) & 0xF))
        ptr = (d >> 20) & 0xFFC
    return out


# -- header and capabilities ----------------------------------------------------------------------------------
def test_header(board: Navi31Board) -> None:
    assert board.cfg_read32(0x00) == 0x744C1002
    assert board.cfg_read32(0x08) == 0x030000C8
    assert (board.cfg_read32(0x0C) >> 16) & 0xFF == 0x80  # type 0, multifunction
    assert board.cfg_read32(0x04) >> 16 & 0x10  # Cap+
    assert board.cfg_read32(0x04) & 0x7 == 0x6  # Mem+ BusMaster+
    assert board.cfg_read32(0x2C) == 0xE4711DA2
    assert board.cfg_read32(0x3C) >> 8 & 0xFF == 1


def test_capability_lists(board: Navi31Board) -> None:
    assert caps(board) == [(0x50, 0x01), (0x64, 0x10), (0xA0, 0x05)]
    assert ext_caps(board) == [(0x100, 0x01, 2), (0x200, 0x15, 1), (0x240, 0x0D, 1)]
    p = 0x64
    assert (board.cfg_read32(p) >> 16) & 0xFF == 0x02  # v2, endpoint
    assert board.cfg_read32(p + 4) & (1 << 28)  # FLR capable
    lnkcap = board.cfg_read32(p + 0x0C)
    assert (lnkcap & 0xF, (lnkcap >> 4) & 0x3F) == (4, 16)
    assert board.cfg_read32(p + 0x2C) & 0xFE == 0x1E  # 2.5-16 GT/s
    sta = board.cfg_read32(p + 0x10) >> 16
    assert (sta & 0xF, (sta >> 4) & 0x3F) == (4, 16)


def test_usb_attach_power_on_state(tmp_path: Path) -> None:
    b = Navi31Board(opts(tmp_path), attach="usb", spec=NAVI31)
    assert b.cfg_read32(0x04) & 0xFFFF == 0
    assert [b.cfg_read32(0x10 + 4 * i) for i in range(6)] == [0xC, 0, 0xC, 0, 0x1, 0]
    sta = b.cfg_read32(0x64 + 0x10) >> 16
    assert (sta & 0xF, (sta >> 4) & 0x3F) == (3, 4)
    assert b.decode(0) is None
    assert b.mem_read32(5, R.ROM_CNTL) == 0xFFFFFFFF  # memory decode off
    b.close()


# -- BARs, sizing, ReBAR ------------------------------------------------------------------------------------------
def size_bar(board: Navi31Board, reg: int) -> int:
    low = board.cfg_read32(reg)
    board.cfg_write32(reg, 0xFFFFFFFF)
    mask = board.cfg_read32(reg)
    if mask & 1:
        return (~(mask & ~0x3) + 1) & 0xFFFFFFFF
    if low & 0x6 == 0x4:
        board.cfg_write32(reg + 4, 0xFFFFFFFF)
        mask |= board.cfg_read32(reg + 4) << 32
        return (~(mask & ~0xF) + 1) & (2**64 - 1)
    return (~(mask & ~0xF) + 1) & 0xFFFFFFFF


def test_bar_sizing(board: Navi31Board) -> None:
    assert board.cfg_read32(0x10) == 0x0000000C and board.cfg_read32(0x14) == 0x78
    assert board.cfg_read32(0x24) == 0xFCC00000
    assert [size_bar(board, r) for r in (0x10, 0x18, 0x20, 0x24)] == [256 * MiB, 2 * MiB, 256, MiB]
    assert board.cfg_read32(0x10) == 0xF000000C and board.cfg_read32(0x14) == 0xFFFFFFFF
    assert board.cfg_read32(0x20) == 0xFFFFFF01


def test_bar_assignment_and_decode(board: Navi31Board) -> None:
    assert board.resources() == [(0, 0x78_0000_0000, 256 * MiB, 0xC), (2, 0x7A_0000_0000, 2 * MiB, 0xC),
                                 (4, 0xE000, 256, 0x1), (5, 0xFCC00000, MiB, 0x0)]
    assert board.decode(0xFCC00000 + R.ROM_CNTL) == (5, R.ROM_CNTL)
    assert board.decode(0x78_0000_1000) == (0, 0x1000)
    assert board.decode(0xFCD00000) is None
    board.cfg_write32(0x04, 0x4)  # memory decode off
    assert board.decode(0xFCC00000) is None
    board.cfg_write32(0x24, 0x10000000)
    board.cfg_write32(0x04, 0x6)
    assert board.decode(0x10000010) == (5, 0x10)


def test_rebar_resizes_bar0(board: Navi31Board) -> None:
    ctrl = 0x208
    assert board.cfg_read32(0x204) == 0x000FF000
    assert board.cfg_read32(ctrl) == 0x00000820  # 1 bar, size 256 MiB, bar 0
    board.cfg_write32(ctrl, (board.cfg_read32(ctrl) & ~0x3F00) | (15 << 8))
    assert board.cfg_read32(ctrl) == 0x00000F20
    assert size_bar(board, 0x10) == 32 * GiB
    assert board.cfg_read32(0x10) == 0x0000000C and board.cfg_read32(0x14) == 0xFFFFFFF8
    board.cfg_write32(ctrl, 0x00000320)  # 8 MiB: not supported, not taken
    assert board.cfg_read32(ctrl) == 0x00000F20
    assert board.resources()[0][2] == 32 * GiB


def test_config_byte_enables_and_rw1c(board: Navi31Board) -> None:
    board.cfg_write32(0x3C, 0x0000002A, 0x1)
    assert board.cfg_read32(0x3C) & 0xFFFF == 0x012A
    board.cfg_write32(0x00, 0xFFFFFFFF)  # read-only ids
    assert board.cfg_read32(0x00) == 0x744C1002
    board.pci._set(0x104, 4, 0x00004000, 0, 0x03FFF030)
    board.cfg_write32(0x104, 0x00004000)
    assert board.cfg_read32(0x104) == 0


# -- BAR5 coverage -----------------------------------------------------------------------------------------------
def test_strict_mode_names_the_offset(board: Navi31Board) -> None:
    with pytest.raises(StrictEmulationError, match="0x12340"):
        board.mem_read32(5, 0x12340)


def test_non_strict_mode_stores_and_lists(tmp_path: Path) -> None:
    b = Navi31Board(opts(tmp_path, strict=False), spec=NAVI31)
    b.mem_write32(5, 0x12340, 0xDEAD)
    assert b.mem_read32(5, 0x12340) == 0xDEAD
    assert b.mem_read32(5, 0x12344) == 0
    assert b.uncovered == ["write to bar5 offset 0x12340", "read of bar5 offset 0x12340",
                           "read of bar5 offset 0x12344"]
    b.close()


def test_vram_doorbells_and_byte_enables(board: Navi31Board) -> None:
    board.mem_write32(0, 0x0FFF_FFFC, 0x11223344)
    assert board.mem_read32(0, 0x0FFF_FFFC) == 0x11223344
    board.mem_write32(0, 0x0FFF_FFFC, 0xAABBCCDD, 0b0101)
    assert board.mem_read32(0, 0x0FFF_FFFC) == 0x11BB33DD
    board.mem_write32(2, 0x100, 7)
    assert board.mem_read32(2, 0x100) == 7 and board.mem_read32(0, 0x100) == 0
    board.mem_write32(5, R.ROM_CNTL, 0xFFFFFFFF, 0b0001)
    assert board.mem_read32(5, R.ROM_CNTL) == 0x020008FF
    assert board.accesses == 9


# -- the direct transport ------------------------------------------------------------------------------------------
def test_direct_transport_basics(tmp_path: Path) -> None:
    t = DirectTransport(opts(tmp_path), spec=NAVI31)
    ident = t.identity()
    assert (ident.vendor_id, ident.device_id, ident.revision, ident.class_code) == (0x1002, 0x744C, 0xC8, 0x030000)
    assert ident.location == "mock:navi31"
    assert t.config_read(0x02, 2) == 0x744C and t.config_read(0x0E, 1) == 0x80
    with pytest.raises(Refused):
        t.config_read(0x03, 2)
    assert [(b.index, b.kind, b.prefetchable, b.is_64bit) for b in t.bars()] == [
        (0, "memory", True, True), (2, "memory", True, True), (4, "io", False, False), (5, "memory", False, False)]
    info = t.info()
    assert (info.transport, info.emulated, info.extra) == ("mock", True, {"board": "navi31", "attach": "direct"})
    t.counters.reset()
    start = t.clock.now()
    bar5 = t.bar(5)
    bar5.write32(R.ROM_INDEX, 0)
    assert bar5.read(R.ROM_DATA, 4) == IMAGE[:4]
    assert bar5.read32(R.ROM_DATA) == int.from_bytes(IMAGE[4:8], "little")
    c = t.counters
    assert (c.reg_reads, c.reg_writes, c.round_trips, c.bytes_in, c.bytes_out) == (2, 1, 2, 8, 4)
    assert (c.tlp_reads, c.tlp_writes, c.usb_transfers) == (0, 0, 0)
    assert t.clock.now() - start == pytest.approx(3e-6)
    assert t.board.accesses == 3
    assert t.stats()["modelled_s"] > 0
    t.config_write(0x3C, 1, 0x2A)
    assert t.config_read(0x3C, 1) == 0x2A
    t.close()
    t.close()


def test_lock_is_taken_and_released(tmp_path: Path) -> None:
    t = DirectTransport(opts(tmp_path), spec=NAVI31)
    with pytest.raises(DeviceLocked):
        DirectTransport(opts(tmp_path), spec=NAVI31)
    t.close()
    DirectTransport(opts(tmp_path), spec=NAVI31).close()


def test_default_flash_file_is_created(tmp_path: Path) -> None:
    path = default_flash_path()
    assert not path.exists()
    DirectTransport(Navi31Options(strict=True), spec=NAVI31).close()
    assert path.read_bytes() == IMAGE


def program_via_rom_sw(bar5, addr: int, data: bytes) -> None:  # a BarRegion
    for cmd, cntl in ((0x06, 0), (addr << 8 | 0x02, (3 << 16) | len(data))):
        if cntl & 0xFFFF:
            for k in range(0, len(data), 4):
                bar5.write32(R.ROM_SW_DATA_1 + k, int.from_bytes(data[k:k + 4], "big"))
        bar5.write32(R.ROM_SW_COMMAND, cmd)
        bar5.write32(R.ROM_SW_CNTL, cntl)


def test_flash_persists_across_transports_and_reset(tmp_path: Path) -> None:
    o = opts(tmp_path, timing="instant")
    t = DirectTransport(o, spec=NAVI31)
    program_via_rom_sw(t.bar(5), 0x1F8000, b"\x12\x34\x56\x78")
    assert o.flash.read_bytes()[0x1F8000:0x1F8004] == b"\x12\x34\x56\x78"  # written through at once
    t.close()
    t = DirectTransport(o, spec=NAVI31)
    bar5 = t.bar(5)
    bar5.write32(R.ROM_INDEX, 0x1F8000)
    assert bar5.read32(R.ROM_DATA) == 0x78563412
    t.close()
    sha = reset_flash(o.flash, spec=NAVI31)
    assert sha == hashlib.sha256(IMAGE).hexdigest()
    assert o.flash.read_bytes() == IMAGE
    assert o.flash.with_name("flash.bin.sr").read_bytes() == bytes(3)


def test_wrong_size_flash_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "flash.bin").write_bytes(b"\xff" * 4096)
    with pytest.raises(Refused, match="0x1000"):
        DirectTransport(opts(tmp_path), spec=NAVI31)
    (tmp_path / "flash.bin").unlink()
    DirectTransport(opts(tmp_path), spec=NAVI31).close()  # the refused open released the lock


def test_disconnect_fault_and_later_accesses(tmp_path: Path) -> None:
    t = DirectTransport(opts(tmp_path, faults=FaultPlan.parse("disconnect@3")), spec=NAVI31)
    bar5 = t.bar(5)
    bar5.read32(R.ROM_CNTL)
    bar5.read32(R.ROM_CNTL)
    with pytest.raises(Disconnected, match="access 3"):
        bar5.read32(R.ROM_CNTL)
    with pytest.raises(Disconnected):
        bar5.read32(R.ROM_CNTL)
    with pytest.raises(Disconnected):
        t.config_read(0)
    t.close()


def test_timeout_fault_hits_one_access(tmp_path: Path) -> None:
    t = DirectTransport(opts(tmp_path, faults=FaultPlan.parse("timeout@2")), spec=NAVI31)
    bar5 = t.bar(5)
    bar5.write32(R.ROM_INDEX, 0)
    with pytest.raises(DeviceTimeout, match="0x5a394"):
        bar5.read32(R.ROM_DATA)
    assert bar5.read32(R.ROM_DATA) == 0x55AA55AA  # the timed-out read did not advance the index
    t.close()


def test_disconnect_mid_erase_leaves_a_torn_sector(tmp_path: Path) -> None:
    # WREN (2 writes), SE (2 writes), then polls of ROM_INDEX until the 3000th access (~3 ms of 45 ms)
    o = opts(tmp_path, timing="typical", faults=FaultPlan.parse("disconnect@3000"))
    t = DirectTransport(o, spec=NAVI31)
    bar5 = t.bar(5)
    bar5.write32(R.ROM_SW_COMMAND, 0x06)
    bar5.write32(R.ROM_SW_CNTL, 0)
    bar5.write32(R.ROM_SW_COMMAND, 0x20 | (0x20000 << 8))
    bar5.write32(R.ROM_SW_CNTL, 3 << 16)
    with pytest.raises(Disconnected):
        while True:
            bar5.read32(R.ROM_INDEX)
    t.close()
    sector = o.flash.read_bytes()[0x20000:0x21000]
    erased = len(sector) - len(sector.lstrip(b"\xff"))
    assert 0 < erased < 0x1000
    assert sector[erased:] == IMAGE[0x20000 + erased:0x21000]


def test_bitflip_fault_through_the_aperture(tmp_path: Path) -> None:
    t = DirectTransport(opts(tmp_path, faults=FaultPlan.parse("bitflip@0x40001")), spec=NAVI31)
    bar5 = t.bar(5)
    bar5.write32(R.ROM_INDEX, 0x40000)
    first = bar5.read32(R.ROM_DATA)
    bar5.write32(R.ROM_INDEX, 0x40000)
    assert bar5.read32(R.ROM_DATA) == int.from_bytes(IMAGE[0x40000:0x40004], "little")
    assert first == int.from_bytes(IMAGE[0x40000:0x40004], "little") ^ 0x100
    t.close()


def test_a_named_psp_state_is_never_silently_overridden_by_the_saved_state(tmp_path: Path) -> None:
    from clihelp import run

    flash = tmp_path / "board.bin"
    assert run("--device", f"mock:navi31,psp=sos,flash={flash}", "flash", "psp-status").code == 0
    for dev in (f"mock:navi31-usb,psp=early,flash={flash}", f"mock:navi31,psp=pbl,flash={flash}"):
        r = run("--device", dev, "flash", "psp-status")
        lines = [ln for ln in r.err.splitlines() if ln.strip()]
        assert r.code == 2 and len(lines) == 1 and "contradicts the saved state" in r.err, r.err
        assert "mock power-cycle" in r.err and "mock reset --yes" in r.err and "leave psp= out" in r.err
    r = run("--device", f"mock:navi31,flash={flash}", "flash", "psp-status")  # left out: the saved state goes on
    assert r.code == 0 and "gated" in r.out, r.out
    assert run("--device", f"mock:navi31,flash={flash}", "mock", "power-cycle").code == 0
    r = run("--device", f"mock:navi31-usb,psp=early,flash={flash}", "flash", "psp-status")
    assert r.code == 0 and "gated" not in r.out and "success" in r.out, r.out + r.err
    r = run("--device", f"mock:navi31,psp=sos,flash={flash}", "flash", "psp-status")  # named, and it holds
    assert r.code == 0 and "gated" in r.out, r.out
