"""`am boot` over the USB bridge stages firmware in the bridge SRAM, read by the PSP through MMHUB VMID0
(tinyhw.boot.amd.fwstage; specs/asm24-usb-bridge.md §4.5, §7.2, §9.5; specs/amd-bringup.md §4.5, §5.1).

Exact emulator counters on the device clock: the streamed dwords (the bridge controller's 0xF0 streaming writes)
and the modelled boot time drop against the VRAM path on the same board; a wrong system PTE or a wrong SRAM
address makes the emulated PSP refuse the image.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from amfake import FW_DIR, FakeBoard, FakeTransport

from tinyhw.boards import navi31 as boards_navi31
from tinyhw.boards.navi31 import Navi31UsbOptions
from tinyhw.boot.amd import copyengine, firmware, fwstage, sequence
from tinyhw.boot.amd.gpu import AmGpu
from tinyhw.boot.amd.psp import PspError
from tinyhw.errors import Refused
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.mocks.bridge.pyusb_backend import make_backend
from tinyhw.mocks.common.vclock import VirtualClock
from tinyhw.usb.transport import UsbTransport

NAVI31 = {"mp0": (13, 0, 0), "mp1": (13, 0, 0), "gc": (11, 0, 0), "sdma0": (6, 0, 0)}


@pytest.fixture(scope="module")
def fw() -> firmware.FirmwareSet:
    if not (FW_DIR / "psp_13_0_0_sos.bin").is_file():
        pytest.fail(f"firmware missing in {FW_DIR}: run bash tests/fetch_firmware.sh", pytrace=False)
    return firmware.load(FW_DIR, NAVI31)


@contextmanager
def usb_board(tmp: Path) -> Iterator[tuple[AmGpu, object, VirtualClock, UsbTransport]]:
    """The emulated Navi31 behind the emulated bridge, device clock; (gpu, bridge, clock, transport)."""
    tmp.mkdir(parents=True, exist_ok=True)
    opts = Navi31UsbOptions.from_options({"flash": str(tmp / "flash.bin"), "strict": True, "clock": "device"})
    clock = VirtualClock(mode=opts.clock)
    board = Navi31Board(opts, clock, attach="usb", spec=boards_navi31.NAVI31)
    backend = make_backend(board, opts, clock)
    t = UsbTransport("", backend=backend, clock=clock, lock=False, emulated=True, connect=False)
    try:
        t.connect()
        yield AmGpu(t), backend.bridge, clock, t
    finally:
        try:
            t.close()
        finally:
            board.close()


def _boot(tmp: Path, fw: firmware.FirmwareSet, path: str) -> dict:
    with usb_board(tmp) as (gpu, bridge, clock, _t):
        s0, t0 = bridge.stats()["stream_dwords_written"], clock.now()
        r = sequence.boot(gpu, fw, firmware_path=path)
        return {"result": r, "streamed": bridge.stats()["stream_dwords_written"] - s0, "seconds": clock.now() - t0,
                "usb": gpu.transport.counters.usb_transfers}


def test_usb_boot_moves_firmware_over_the_sram_not_streamed(tmp_path: Path, fw) -> None:
    """auto = sram over the bridge: the same boot, ~1.28 MB fewer streamed bytes, ~0.34 s less modelled time."""
    bar = _boot(tmp_path / "bar", fw, "bar")
    sram = _boot(tmp_path / "sram", fw, "auto")
    assert bar["result"].firmware_path == "bar" and sram["result"].firmware_path == "sram"
    for r in (bar["result"], sram["result"]):
        assert r.kind == "full" and r.tmr_size and r.smu_version and r.clocks
    assert sram["result"].firmware_bytes == bar["result"].firmware_bytes
    fw_bytes = sram["result"].copy["bytes"]
    assert fw_bytes >= bar["result"].firmware_bytes
    # every firmware byte left the streamed path: what is still streamed is page tables, the psp ring, commands
    assert bar["streamed"] - sram["streamed"] >= bar["result"].firmware_bytes // 4
    assert sram["streamed"] < 25_000
    assert sram["seconds"] < bar["seconds"] - 0.3
    # one 0xF2 arm + one bulk OUT per sram image: bootloader, toc, three batches of load_ip_fw images
    assert sram["result"].copy["copies"] == 5 and sram["result"].copy["usb_transfers"] == 10
    steps = [s["step"] for s in sram["result"].steps]
    assert steps[:3] == ["psp firmware copy", "psp bootloader KDB", "psp bootloader SPL"]
    assert steps.index("firmware copy") < steps.index("load smu") < steps.index("setup tmr") \
        < steps.index("firmware copy 2") < steps.index("load rlc_g")


def test_the_psp_is_handed_vmid0_addresses_of_the_sram(tmp_path: Path, fw) -> None:
    """C2PMSG_36 gets VA_BASE >> 20 (+1 MiB per further component); LOAD_IP_FW a VA inside the SRAM window."""
    seen: list[tuple[str, int]] = []
    with usb_board(tmp_path) as (gpu, _bridge, _clock, _t):
        wr = gpu.wr

        def spy(name: str, value: int) -> None:
            if name.endswith("C2PMSG_36"):
                seen.append((name, value))
            wr(name, value)

        gpu.wr = spy  # type: ignore[method-assign]
        sequence.boot(gpu, fw)
    va_mib = copyengine.VA_BASE >> 20
    assert [v for _, v in seen] == [va_mib, va_mib, va_mib + 1, va_mib + 2]  # KDB and SPL share one image


@pytest.mark.parametrize("sabotage", ["wrong pte", "wrong sram slot", "wrong window"])
def test_a_wrong_mapping_or_sram_address_makes_the_psp_refuse(tmp_path: Path, fw, monkeypatch, sabotage) -> None:
    """The PSP really reads the SRAM through the page tables tinyhw wrote: break either and the image is refused."""
    if sabotage == "wrong pte":  # the SRAM's own system PTEs point one slot off
        pages = tuple((bus + 0x4000 if bus == copyengine.SRAM_BUS else bus, size, off)
                      for bus, size, off in copyengine.BRIDGE_PAGES)
        monkeypatch.setattr(copyengine, "BRIDGE_PAGES", pages)
    elif sabotage == "wrong window":  # the further components' windows point one slot off
        monkeypatch.setattr(fwstage, "SRAM_BUS", copyengine.SRAM_BUS + 0x4000)
    with usb_board(tmp_path) as (gpu, _bridge, _clock, t):
        if sabotage == "wrong sram slot":  # the images land one slot further into the SRAM than the PTEs say
            write = t.write_sram
            t.write_sram = lambda slot, data: write(slot + 1, data)  # type: ignore[method-assign]
        with pytest.raises(PspError, match="rejected the (KDB|SYS) component"):
            sequence.boot(gpu, fw)


def test_direct_board_and_fallback_keep_the_vram_path(fw) -> None:
    """No bridge sram (here the register-level fake): auto is the vram path; "sram" is refused before any write."""
    board = FakeBoard()
    r = sequence.boot(AmGpu(FakeTransport(board)), fw)
    assert r.firmware_path == "bar" and r.to_doc()["firmware_copy"]["path"] == "bar"
    board = FakeBoard()
    with pytest.raises(Refused, match="cannot stage firmware in the usb bridge's sram"):
        sequence.boot(AmGpu(FakeTransport(board)), fw, firmware_path="sram")
    with pytest.raises(Refused, match="unknown firmware path"):
        sequence.boot(AmGpu(FakeTransport(FakeBoard())), fw, firmware_path="dma")


def test_pack_fills_the_sram_in_order() -> None:
    """Images go in order, 4 KiB aligned, a new batch when the next one would overflow 512 KiB; too big raises."""
    k = 1024
    assert fwstage.pack([261632, 16896, 17408, 267552, 139264, 66048, 66048]) == [[0, 1, 2], [3, 4, 5], [6]]
    assert fwstage.pack([512 * k, 1]) == [[0], [1]]
    with pytest.raises(ValueError, match="does not fit"):
        fwstage.pack([512 * k + 1])
