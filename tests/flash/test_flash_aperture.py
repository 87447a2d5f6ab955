"""``tinyhw flash dump FILE --method aperture`` (specs/navi31-spi-flash.md §f, §h.4 A1-A4, §h.1 R2/R3).

CLI end to end on both emulated boards: the dump equals the flash, in every PSP state (the aperture
also works once ROM_SW is gated); ROM_INDEX gets plain byte addresses, ROM_CNTL is never written but
restored, both exact originals come back also after a failure (checked in the SMUIO model's write
log); refusals (unavailable controller, mirrored halves, no magic) write no file.

A full 2 MiB aperture dump through the emulated USB bridge is about a million USB transfers (20-45 s
of wall time here), so full-size dumps run on ``mock:navi31``; on ``mock:navi31-usb`` the tests read
128 KiB through the real USB driver and run the CLI's refusal and fault paths.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from clihelp import run
from flashhelp import dev

from tinyhw.boards.navi31 import NAVI31, Navi31Options
from tinyhw.errors import OperationFailed
from tinyhw.flash import aperture
from tinyhw.mocks.amd import board as board_mod
from tinyhw.mocks.amd.direct import DirectTransport
from tinyhw.mocks.amd.flashregs import flash_registers
from tinyhw.mocks.amd.ifwi_image import build_image
from tinyhw.mocks.amd.smuio import Smuio
from tinyhw.regs import asic

R = flash_registers(asic("navi31"))  # the emulated Navi31's flash-side offsets

IMAGE = build_image(board=NAVI31)
SIZE = len(IMAGE)
PAGES = [p for p in range(0, SIZE, 0x10000)]
ORIG_CNTL, ORIG_INDEX = 0x38000001, 0x00123454  # non-default originals (the §f swap example's value)


@pytest.fixture
def smuios(monkeypatch: pytest.MonkeyPatch) -> list[Smuio]:
    """Every SMUIO model built during the test, started with ROM_CNTL/ROM_INDEX at non-default originals."""
    made: list[Smuio] = []
    real = board_mod.Smuio

    def build(layout: Any, chip: Any, clock: Any, config: Any) -> Smuio:
        config.power_on["ROM_CNTL"] = ORIG_CNTL
        s = real(layout, chip, clock, config)
        s.index = ORIG_INDEX
        made.append(s)
        return s

    monkeypatch.setattr(board_mod, "Smuio", build)
    return made


def left_over(tmp_path: Path, name: str) -> list[str]:
    return [p.name for p in tmp_path.iterdir() if p.name == name or p.name.startswith(f".{name}.tmp")]


def assert_restored(s: Smuio, *, full: bool = True) -> None:
    """ROM_CNTL written once (the restore, last), ROM_INDEX: plain page addresses, then the original."""
    log = [(off, v) for off, v in s.write_log if off in (R.ROM_CNTL, R.ROM_INDEX)]
    assert log[-2:] == [(R.ROM_INDEX, ORIG_INDEX), (R.ROM_CNTL, ORIG_CNTL)]
    assert [off for off, _ in log].count(R.ROM_CNTL) == 1  # ROM_CNTL left alone until the restore
    index_writes = [v for off, v in log[:-2]]
    assert index_writes == (PAGES if full else PAGES[:len(index_writes)]) and index_writes
    assert s.regs[R.ROM_CNTL] == ORIG_CNTL and s.index == ORIG_INDEX


# -- success ------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("psp", ["pbl", "early", "sos"])
def test_aperture_dump_equals_the_flash_in_every_psp_state(tmp_path: Path, psp: str, smuios: list[Smuio]) -> None:
    r = run("--device", dev(tmp_path, extra=f"psp={psp}"), "--json", "--stats", "flash", "dump", "ap.bin",
            "--method", "aperture")
    assert r.code == 0, r.err
    assert (tmp_path / "ap.bin").read_bytes() == IMAGE
    assert json.loads(r.out) == {"path": "ap.bin", "bytes": SIZE, "sha256": hashlib.sha256(IMAGE).hexdigest()}
    st = r.stats
    assert st["reg_reads"] == SIZE // 4 + 2  # one ROM_DATA read per dword, plus the two originals
    assert st["reg_writes"] == len(PAGES) + 2
    assert left_over(tmp_path, "ap.bin") == ["ap.bin"]  # no temporary left
    (s,) = smuios
    assert_restored(s)
    assert s.transactions == 0  # the ROM_SW engine is never used


def test_aperture_and_rom_sw_dumps_agree_and_text_output(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "flash", "dump", "a.bin", "--method", "aperture")
    assert r.code == 0 and hashlib.sha256(IMAGE).hexdigest() in r.out and "2097152 bytes" in r.out
    assert "524288 rom_data reads" in r.err and "restored" in r.err
    assert run("--device", dev(tmp_path), "flash", "dump", "r.bin").code == 0  # default method: rom_sw
    assert (tmp_path / "a.bin").read_bytes() == (tmp_path / "r.bin").read_bytes()


def test_help_names_the_method() -> None:
    r = run("flash", "dump", "--help")
    assert r.code == 0 and "--method" in r.out and "aperture" in r.out and "rom_sw" in r.out


def test_one_dword_read_per_rom_data_read_never_a_block(tmp_path: Path) -> None:
    """§h.4 A4: a block read across ROM_DATA returns the registers after it, so only read32 is allowed."""
    t = DirectTransport(Navi31Options.from_options({"flash": str(tmp_path / "f.bin"), "strict": True}), spec=NAVI31)
    bar = t.bar(5)
    reads: list[int] = []
    real_read32 = bar.read32

    def read32(off: int) -> int:
        reads.append(off)
        return real_read32(off)

    def block(off: int, n: int) -> bytes:
        raise AssertionError(f"block read at 0x{off:x}")

    bar.read32, bar.read = read32, block  # type: ignore[method-assign]
    try:
        out = aperture.dump(t)
    finally:
        t.close()
    assert out.data == IMAGE and out.reads == SIZE // 4
    assert reads.count(R.ROM_DATA) == SIZE // 4 and reads[:2] == [R.ROM_CNTL, R.ROM_INDEX]


# -- refusals (nothing written) ----------------------------------------------------------------------------------
@pytest.mark.parametrize("board", ["navi31", "navi31-usb"])
def test_unavailable_controller_is_refused_before_any_write(tmp_path: Path, board: str) -> None:
    r = run("--device", dev(tmp_path, board, "aperture=unavailable"), "--json", "--stats", "flash", "dump", "u.bin",
            "--method", "aperture")
    assert r.code == 1 and r.no_result and "rom_cntl reads 0xffffffff" in r.err and "unavailable" in r.err
    assert r.stats["reg_reads"] == 2 and r.stats["reg_writes"] == 0
    assert left_over(tmp_path, "u.bin") == []


def test_mirrored_aperture_is_refused(tmp_path: Path, smuios: list[Smuio]) -> None:
    r = run("--device", dev(tmp_path, extra="aperture=mirrored"), "--json", "flash", "dump", "m.bin", "--method",
            "aperture")
    assert r.code == 1 and r.no_result and "both 0x100000-byte halves are equal" in r.err
    # a fresh flash file is noted, the estimate said before the dump
    errors = [line for line in r.err.splitlines() if not line.startswith(("note: ", "aperture dump: "))]
    assert len(errors) == 1 and left_over(tmp_path, "m.bin") == []
    assert_restored(smuios[0])


def test_an_image_without_the_magic_is_refused(tmp_path: Path) -> None:
    (tmp_path / "flash.bin").write_bytes(b"\0\0\0\0" + IMAGE[4:])
    r = run("--device", dev(tmp_path), "flash", "dump", "x.bin", "--method", "aperture")
    assert r.code == 1 and "0x0: 00000000 (expected the ifwi magic aa55aa55)" in r.err
    assert left_over(tmp_path, "x.bin") == []


def test_dump_checks_are_the_spec_checks() -> None:
    aperture.check_dump(IMAGE)
    with pytest.raises(OperationFailed, match="0x100 bytes, not 0x200000"):
        aperture.check_dump(IMAGE[:0x100])
    with pytest.raises(OperationFailed, match="halves are equal"):
        aperture.check_dump(IMAGE[:SIZE // 2] * 2)
    with pytest.raises(OperationFailed, match="rom_index did not advance"):
        aperture.check_dump(IMAGE[:4] * (SIZE // 4))
    with pytest.raises(OperationFailed, match="ifwi magic"):
        aperture.check_dump(b"\xff" * SIZE)


def test_missing_directory_is_refused_before_reading(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path), "--stats", "flash", "dump", "nodir/a.bin", "--method", "aperture")
    assert r.code == 2 and "directory nodir does not exist" in r.err and r.stats["reg_reads"] == 0


# -- failures mid-dump: the originals still come back ------------------------------------------------------------
@pytest.mark.parametrize(("board", "n"), [("navi31", 70_000), ("navi31-usb", 3_000)])
def test_timeout_mid_dump_restores_both_registers(tmp_path: Path, board: str, n: int, smuios: list[Smuio]) -> None:
    r = run("--device", dev(tmp_path, board, f"faults=timeout@{n}"), "flash", "dump", "t.bin", "--method", "aperture")
    assert r.code == 1 and "timed out" in r.err and "Traceback" not in r.err
    assert left_over(tmp_path, "t.bin") == []
    assert_restored(smuios[0], full=False)


def test_disconnect_mid_dump_reports_the_disconnect(tmp_path: Path) -> None:
    r = run("--device", dev(tmp_path, extra="faults=disconnect@5000"), "flash", "dump", "d.bin", "--method",
            "aperture")
    assert r.code == 1 and "went away at register access 5000" in r.err
    assert left_over(tmp_path, "d.bin") == []


# -- through the real usb driver ----------------------------------------------------------------------------------
def test_usb_bridge_reads_one_tlp_per_dword_and_restores(tmp_path: Path, smuios: list[Smuio]) -> None:
    """128 KiB through the emulated bridge and the real usb driver: every ROM_DATA read is one single TLP."""
    from tinyhw.connect import open_device
    from tinyhw.transport.devstr import parse_device

    box: dict[str, Any] = {}
    open_device(parse_device(dev(tmp_path, "navi31-usb", "strict")), lambda o: box.setdefault("o", o))
    t = box["o"].transport
    try:
        before = t.stats()
        out = aperture.dump(t, size=0x20000, advance=lambda n: None)
        after = t.stats()
    finally:
        box["o"].close()
    assert out.data == IMAGE[:0x20000] and (out.rom_cntl, out.rom_index) == (ORIG_CNTL, ORIG_INDEX)
    reads = after["reg_reads"] - before["reg_reads"]
    assert reads == 0x20000 // 4 + 2
    # one single TLP per register read (a streamed read would be one TLP for many), plus the three config
    # reads of the device identity check
    assert after["tlp_reads"] - before["tlp_reads"] == reads + 3
    log = [(off, v) for off, v in smuios[0].write_log if off in (R.ROM_CNTL, R.ROM_INDEX)]
    assert log == [(R.ROM_INDEX, 0), (R.ROM_INDEX, 0x10000), (R.ROM_INDEX, ORIG_INDEX), (R.ROM_CNTL, ORIG_CNTL)]


# -- the cost, said before the dump starts -------------------------------------------------------------------------
def test_the_estimate_is_said_before_the_dump_and_matches_the_modelled_time(tmp_path: Path) -> None:
    """An aperture dump is one register read per dword (over USB each its own round trip, far slower than
    rom_sw's bulk reads): the command says its estimate before it starts, and the estimate is the emulated
    board's modelled time of the dump (virtual clock, exact counters, no wall time)."""
    from tinyhw.connect import open_device
    from tinyhw.transport.devstr import parse_device

    size = 0x20000
    opened = open_device(parse_device(dev(tmp_path, "navi31-usb", "strict")))
    told: list[tuple[aperture.ApertureEstimate, int]] = []
    try:
        t = opened.transport
        t0 = t.clock.now()
        aperture.dump(t, size=size, advance=lambda n: told.append((told[-1][0], n)),
                      on_estimate=lambda e: told.append((e, 0)))
        spent = t.clock.now() - t0
    finally:
        opened.close()
    est = told[0][0]
    assert told[0][1] == 0 and len(told) == size // 0x10000 + 1  # said before the first page completed
    assert est.kind == "modelled" and est.reads == size // 4 + 2
    assert abs(est.seconds - spent) <= 0.02 * spent, (est, spent)
    r = run("--device", dev(tmp_path), "flash", "dump", "e.bin", "--method", "aperture")
    assert r.code == 0, r.err
    lines = r.err.splitlines()
    first = next(i for i, x in enumerate(lines) if x.startswith("aperture dump: 524,290 register reads"))
    assert "(modelled): about" in lines[first] and "--method rom_sw" in lines[first]
    assert first < next(i for i, x in enumerate(lines) if x.startswith("aperture: 524288 rom_data reads"))
