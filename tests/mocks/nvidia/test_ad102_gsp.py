"""The emulated AD102's GPU side of the boot, driven register by register from the spec (no tinyhw.boot):
falcon reset and DMA, the FWSEC and booter black boxes and their error codes, WPR2, the function reset, the
board-state file, faults; and the safety promise on a fake sysfs (a pci: GPU bound to nvidia gets no write)."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from nvboothelp import nvidia_sysfs_tree

from tinyhw.boards.nvidia import Ad102Options
from tinyhw.boot import nv
from tinyhw.errors import Disconnected, Refused
from tinyhw.formats.nvbios import fwsec_frts_image, parse_nv_vbios
from tinyhw.mocks.nvidia import nv_gsp, nv_vbios
from tinyhw.mocks.nvidia.ad102 import Ad102Transport
from tinyhw.pci.sysfs import SysfsTransport

GSP, SEC2 = 0x110000, 0x840000
FRTS = (24 << 30) - (2 << 20)


def board(tmp_path: Path, **kw: object) -> Ad102Transport:
    return Ad102Transport(Ad102Options(strict=True, state=tmp_path / "state.json", **kw), lock=False)


def load_and_start(t: Ad102Transport, base: int, image: bytes, imem: int, dmem_at: int, dmem: int, brom: tuple,
                   fbif: bool = True) -> int:
    """Reset the falcon, DMA ``image`` (placed at FB 2 MiB) into IMEM/DMEM 256 bytes at a time, start it."""
    bar0, bar1 = t.bar(0), t.bar(1)
    bar1.write(0x200000, image + bytes(-len(image) % 4))
    engine = base + 0x3C0
    bar0.write32(engine, 1)
    assert bar0.read32(base + 0xF4) & (1 << 12)  # scrubbing while held in reset
    bar0.write32(engine, 0)
    assert not bar0.read32(base + 0xF4) & (1 << 12)
    if fbif:
        bar0.write32(base + 0x624, 1 << 7)
        bar0.write32(base + 0x600, 1 << 2)
    for (size, src, cmd) in ((imem, 0x200000, 0x14 | 0x600), (dmem, 0x200000 + dmem_at, 0x600)):
        bar0.write32(base + 0x110, src >> 8)
        bar0.write32(base + 0x128, 0)
        for n in range(0, size, 256):
            bar0.write32(base + 0x114, n)
            bar0.write32(base + 0x11C, n)
            bar0.write32(base + 0x118, cmd)
    for off, value in zip((0x1210, 0x119C, 0x1198, 0x1180), brom, strict=True):
        bar0.write32(base + off, value)
    bar0.write32(base + 0x100, 2)
    assert bar0.read32(base + 0x100) & (1 << 4)  # halted
    return bar0.read32(base + 0x40)


def fwsec(frts: int = FRTS, patch: bool = True) -> bytes:
    rom = nv_vbios.vbios_image()
    v = parse_nv_vbios(rom)
    if patch:
        return fwsec_frts_image(rom, v, frts)
    d = v.fwsec()
    return rom[d.ucode[0]:d.ucode[0] + d.ucode[1]]


BROM_FWSEC = (nv_vbios.PKC_OFFSET, 0x0400, 0x12, 1)


def run_fwsec(t: Ad102Transport, image: bytes, brom: tuple = BROM_FWSEC, fbif: bool = True) -> int:
    return load_and_start(t, GSP, image, nv_vbios.IMEM_LOAD, nv_vbios.IMEM_LOAD, 0x340, brom, fbif)


def test_fwsec_black_box_accepts_the_patched_image_and_raises_wpr2(tmp_path: Path) -> None:
    t = board(tmp_path)
    t.config_write(4, 2, 6)
    assert t.bar(0).read32(0x1FA828) == 0
    assert run_fwsec(t, fwsec()) == 0
    lo, hi = t.bar(0).read32(0x1FA824), t.bar(0).read32(0x1FA828)
    assert lo == (FRTS >> 12) << 4 and hi > lo


@pytest.mark.parametrize(("image", "brom", "fbif", "code"), [
    (lambda: fwsec(patch=False), BROM_FWSEC, True, nv_gsp.FWSEC_SIGNATURE),  # no signature copied in
    (fwsec, (nv_vbios.PKC_OFFSET, 0x0400, 0x13, 1), True, nv_gsp.FWSEC_BROM),  # another ucode id
    (lambda: fwsec(FRTS - 0x1000), BROM_FWSEC, True, nv_gsp.FWSEC_REGION),  # FRTS not at VRAM - 2 MiB
    (fwsec, BROM_FWSEC, False, nv_gsp.FWSEC_SIGNATURE),  # no FBIF setup: the DMA copied nothing
])
def test_fwsec_black_box_error_codes(tmp_path: Path, image, brom: tuple, fbif: bool, code: int) -> None:
    t = board(tmp_path)
    t.config_write(4, 2, 6)
    assert run_fwsec(t, image(), brom, fbif) == code
    assert t.bar(0).read32(0x1FA828) == 0


def test_fwsec_not_frts_command(tmp_path: Path) -> None:
    t = board(tmp_path)
    t.config_write(4, 2, 6)
    img = bytearray(fwsec())
    struct.pack_into("<I", img, nv_vbios.IMEM_LOAD + nv_vbios.DMAP_OFFSET + 44, 0x14)
    assert run_fwsec(t, bytes(img)) == nv_gsp.FWSEC_NOT_FRTS


def test_fwsec_refuses_flags_at_byte_16(tmp_path: Path) -> None:
    """A READ_VBIOS descriptor read as five u32 (flags @16, 4 bytes of padding @20) is not the FRTS command: the
    emulated FWSEC reads gfwImageOffset as a u64 @8 and flags @20 as NVIDIA's header has them (§7.1)."""
    t = board(tmp_path)
    t.config_write(4, 2, 6)
    assert run_fwsec(t, fwsec()) == 0
    t = board(tmp_path / "old")
    t.config_write(4, 2, 6)
    img = bytearray(fwsec())
    at = nv_vbios.IMEM_LOAD + nv_vbios.CMD_IN
    img[at + 16:at + 24] = struct.pack("<II", 2, 0)
    assert run_fwsec(t, bytes(img)) == nv_gsp.FWSEC_REGION


def test_booter_refuses_without_wpr2_or_signature(tmp_path: Path) -> None:
    from tinyhw.mocks.nvidia import nv_gspfw

    t = board(tmp_path)
    t.config_write(4, 2, 6)
    data = nv_gspfw.booter_load()
    image = bytearray(data[120 + 2 * 384:])
    brom = (0x10, 1, 3, 1)
    # IMEM gets the application's code (from APP_OFFSET), DMEM the data part, as the loaders place them (§9.3)
    args = (nv_gspfw.CODE_SIZE, nv_gspfw.DATA_OFFSET - nv_gspfw.APP_OFFSET, nv_gspfw.DATA_SIZE)
    code = load_and_start(t, SEC2, bytes(image[nv_gspfw.APP_OFFSET:]), *args, brom)
    assert code == nv_gsp.BOOTER_SIGNATURE  # the signature slot is still empty
    at = nv_gspfw.BOOTER_PATCH_LOC
    image[at:at + 384] = nv_gspfw.BOOTER_SIGNATURE
    assert load_and_start(t, SEC2, bytes(image[nv_gspfw.APP_OFFSET:]), *args, brom) == nv_gsp.BOOTER_NO_WPR2
    image[at] ^= 1  # one bit of the signature changed
    assert load_and_start(t, SEC2, bytes(image[nv_gspfw.APP_OFFSET:]), *args, brom) == nv_gsp.BOOTER_SIGNATURE
    image[at] ^= 1
    image[nv_gspfw.APP_OFFSET] ^= 1  # the signature over other code
    assert load_and_start(t, SEC2, bytes(image[nv_gspfw.APP_OFFSET:]), *args, brom) == nv_gsp.BOOTER_SIGNATURE


def test_function_reset_and_state_file(tmp_path: Path) -> None:
    t = board(tmp_path)
    t.config_write(4, 2, 6)
    run_fwsec(t, fwsec())
    t.board.close()
    t.board.save_state()
    t2 = board(tmp_path)
    assert t2.bar(0).read32(0x1FA828)  # WPR2 outlives the command
    t2.reset()
    assert t2.bar(0).read32(0x1FA828) == 0 and t2.board.resets == 1
    t2.board.save_state()
    assert board(tmp_path).bar(0).read32(0x1FA828) == 0


def test_disconnect_fault_and_gone_board(tmp_path: Path) -> None:
    t = board(tmp_path, faults=Ad102Options.declared()["faults"].read("disconnect@3"))
    t.bar(0).read32(0)
    t.bar(0).read32(0)
    with pytest.raises(Disconnected, match="bar access 3"):
        t.bar(0).read32(0xA00)
    with pytest.raises(Disconnected):
        t.config_read(0)


@pytest.mark.parametrize("driver", ["nvidia", "nouveau"])
def test_pci_gpu_bound_to_a_driver_gets_no_bar_write(tmp_path: Path, driver: str) -> None:
    sysfs, r0 = nvidia_sysfs_tree(tmp_path, driver)
    before = r0.read_bytes()
    with SysfsTransport("0000:01:00.0", sysfs=str(sysfs), force_bound=True) as t:
        with pytest.raises(Refused, match=f"bound to the {driver} driver") as e:
            nv.preflight_boot(t)
        assert e.value.exit_code == 2 and t.counters.reg_writes == 0 and t.counters.reg_reads == 0
    assert r0.read_bytes() == before


def test_bar1_is_resizable(tmp_path: Path) -> None:
    """The Resizable BAR capability at 0xBB0 (BAR1, 64 MiB .. 32 GiB) takes a listed size in control bits 13:8;
    BAR1 then decodes it (specs/pci-vfio-remote.md §3.9); an unlisted size is ignored."""
    t = board(tmp_path)
    assert t.config_read(0xBB0) & 0xFFFF == 0x15 and t.config_read(0xBB8) & 7 == 1
    sizes = t.config_read(0xBB4) >> 4
    assert {b.index: b.size for b in t.bars()}[1] == 256 << 20
    t.config_write(0xBB8, 4, (t.config_read(0xBB8) & ~0x3F00) | ((sizes.bit_length() - 1) << 8))
    bar1 = {b.index: b for b in t.bars()}[1]
    assert bar1.size == 32 << 30 and bar1.address % bar1.size == 0
    t.config_write(0xBB8, 4, (t.config_read(0xBB8) & ~0x3F00) | (20 << 8))  # 1 TiB: not listed
    assert {b.index: b.size for b in t.bars()}[1] == 32 << 30


def test_the_gpu_reaches_its_own_vram_through_its_bar1_address(tmp_path: Path) -> None:
    """A VRAM structure handed to GSP as a BAR1 bus address (nv-bringup §5, large BAR) reads the VRAM."""
    t = board(tmp_path)
    t.config_write(4, 2, 6)
    t.bar(1).write(0x3000, b"wpr meta")
    base = {b.index: b.address for b in t.bars()}[1]
    assert t.board.bus_read(base + 0x3000, 8) == b"wpr meta"
