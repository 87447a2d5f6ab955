"""Emulated blocks run on BoardServices alone (tinyhw/mocks/services.py), not on a particular board."""

from __future__ import annotations

from collections.abc import Callable

from tinyhw.mocks.gpuvm import GpuVm
from tinyhw.mocks.navi31 import Navi31Board
from tinyhw.mocks.sdma import OP_FENCE, SdmaEngine
from tinyhw.mocks.services import BoardServices, Translation
from tinyhw.mocks.smu import MSG_IDS, Smu
from tinyhw.regs import asic

REGS = asic("navi31")
FB = 1 << 39  # this stub board's FB base (MC address of VRAM offset 0)


class StubBoard:
    """The smallest board: a flat VRAM, a register dict, a list of events, MC = FB + offset, no VM, no bus."""

    regs = REGS

    def __init__(self) -> None:
        self.t = 0.0
        self.mem = bytearray(1 << 20)
        self.values: dict[int, int] = {}
        self.events: list[tuple[float, Callable[[], None]]] = []

    def now(self) -> float:
        return self.t

    def command_now(self) -> float:
        return self.t

    def schedule(self, delay: float, fn: Callable[[], None]) -> None:
        self.events.append((self.t + delay, fn))

    def run(self, seconds: float) -> None:
        self.t += seconds
        for due, fn in sorted(self.events, key=lambda e: e[0]):
            if due <= self.t:
                self.events.remove((due, fn))
                fn()

    def reg_read(self, offset: int) -> int:
        return self.values.get(offset, 0)

    def reg_write(self, offset: int, value: int) -> None:
        self.values[offset] = value

    def mc_to_vram(self, mc: int, length: int = 1) -> int | None:
        return mc - FB if mc - FB >= 0 and mc - FB + length <= len(self.mem) else None

    def translate(self, vmid: int, va: int, write: bool = False) -> Translation:
        return Translation(False, va)  # identity: GPU addresses are VRAM offsets

    def gpu_read(self, vmid: int, va: int, length: int) -> bytes:
        return self.vram_read(va, length)

    def gpu_write(self, vmid: int, va: int, data: bytes, at: float | None = None) -> None:
        self.vram_write(va, data)

    def vram_read(self, offset: int, length: int) -> bytes:
        return bytes(self.mem[offset:offset + length])

    def vram_write(self, offset: int, data: bytes) -> None:
        self.mem[offset:offset + len(data)] = data

    def bus_read(self, addr: int, length: int) -> bytes | None:
        return None

    def bus_write(self, addr: int, data: bytes, at: float | None = None) -> bool:
        return False


def test_the_board_and_the_stub_provide_the_services(tmp_path):
    assert isinstance(StubBoard(), BoardServices)
    from tinyhw.boards.navi31 import Navi31Options
    board = Navi31Board(Navi31Options(flash=str(tmp_path / "f.bin"), strict=True), lock=False)
    try:
        assert isinstance(board, BoardServices)
        assert board.regs is board.smu.services.regs
    finally:
        board.close()


def test_the_smu_answers_on_a_stub_board():
    stub = StubBoard()
    resets: list[str] = []
    smu = Smu(stub, REGS, on_reset=resets.append, delay=1e-3)
    smu.s.loaded = True
    reads, writes = smu.handlers()
    msg = {v: k for k, v in MSG_IDS.items()}
    writes[smu.ARG](41)
    writes[smu.MSG](msg["TestMessage"])
    assert reads[smu.RESP]() == 0  # not answered before its delay
    stub.run(2e-3)
    assert (reads[smu.RESP](), reads[smu.ARG]()) == (1, 42)
    writes[smu.MSG](msg["Mode1Reset"])
    stub.run(2e-3)
    stub.run(0)
    assert resets == ["smu"]


def test_sdma_executes_a_fence_on_a_stub_board():
    stub = StubBoard()
    engine = SdmaEngine(stub, REGS, strict=True)
    ring = 0x1000

    def reg(name: str, value: int) -> None:
        stub.reg_write(REGS.offset(f"gc.SDMA0_{name}"), value)

    f = REGS.field("gc.SDMA0_QUEUE0_RB_CNTL.RB_ENABLE")
    size = REGS.field("gc.SDMA0_QUEUE0_RB_CNTL.RB_SIZE")
    reg("QUEUE0_RB_CNTL", (1 << f.shift) | (10 << size.shift))
    reg("QUEUE0_RB_BASE", ring >> 8)
    fence = [OP_FENCE, 0x2000, 0, 0xC0FFEE]
    stub.vram_write(ring, b"".join(d.to_bytes(4, "little") for d in fence))
    reg("QUEUE0_RB_WPTR", 16)
    engine.kick()
    assert engine.error is None and engine.stats["fences"] == 1
    assert stub.vram_read(0x2000, 4) == (0xC0FFEE).to_bytes(4, "little")
    assert stub.reg_read(REGS.offset("gc.SDMA0_QUEUE0_RB_RPTR")) == 16


def test_gpuvm_walks_through_the_services():
    stub = StubBoard()
    vm = GpuVm(stub, REGS)
    aperture_lo = REGS.offset("gc.GCMC_VM_SYSTEM_APERTURE_LOW_ADDR")
    aperture_hi = REGS.offset("gc.GCMC_VM_SYSTEM_APERTURE_HIGH_ADDR")
    stub.reg_write(aperture_lo, FB >> 18)
    stub.reg_write(aperture_hi, (FB + (1 << 20) - 1) >> 18)
    assert vm.translate(FB + 0x1234) == (False, 0x1234)
