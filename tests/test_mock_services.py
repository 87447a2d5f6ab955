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


def test_gpuvm_sends_a_fault_to_the_default_page_only_where_the_hub_says_so():
    """A fault stops the access (VmFault) unless GCVM_L2_PROTECTION_FAULT_CNTL enables the default page for its kind:
    then a write lands in the default page at the same page offset, a read comes from it, and the first fault's page
    and direction stay latched until the status is cleared."""
    import pytest

    from tinyhw.mocks.gpuvm import VmFault

    stub = StubBoard()
    vm = GpuVm(stub, REGS)

    def wr(name: str, value: int) -> None:
        stub.reg_write(REGS.offset(f"gc.{name}"), value)

    def rd(name: str) -> int:
        return stub.reg_read(REGS.offset(f"gc.{name}"))

    va_lo, va_hi = 1 << 40, (1 << 40) + (1 << 30)  # vmid0's range; accesses above it are range faults
    wr("GCVM_CONTEXT0_CNTL", 1)
    wr("GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", (va_lo >> 12) & 0xFFFFFFFF)
    wr("GCVM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", va_lo >> 44)
    wr("GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", ((va_hi >> 12) - 1) & 0xFFFFFFFF)
    wr("GCVM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32", va_hi >> 44)
    dummy = 0x8000
    wr("GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", ((FB + dummy) >> 12) & 0xFFFFFFFF)
    wr("GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", (FB + dummy) >> 44)
    outside = va_hi + 0x5000
    with pytest.raises(VmFault, match="outside vmid0's page table range"):
        vm.write(outside + 0x10, b"\xaa" * 4)
    assert rd("GCVM_L2_PROTECTION_FAULT_STATUS") == 1 and stub.mem[dummy + 0x10:dummy + 0x14] == bytes(4)
    wr("GCVM_L2_PROTECTION_FAULT_STATUS", 0)
    wr("GCVM_L2_PROTECTION_FAULT_CNTL",
       REGS.field("gc.GCVM_L2_PROTECTION_FAULT_CNTL.PDE0_PROTECTION_FAULT_ENABLE_DEFAULT").mask)
    with pytest.raises(VmFault):  # another kind's bit does not cover a range fault
        vm.write(outside + 0x10, b"\xaa" * 4)
    wr("GCVM_L2_PROTECTION_FAULT_STATUS", 0)
    wr("GCVM_L2_PROTECTION_FAULT_CNTL",
       REGS.field("gc.GCVM_L2_PROTECTION_FAULT_CNTL.RANGE_PROTECTION_FAULT_ENABLE_DEFAULT").mask)
    vm.write(outside + 0x10, b"\xaa" * 4)
    assert stub.mem[dummy + 0x10:dummy + 0x14] == b"\xaa" * 4 and vm.redirected == 1
    rw = REGS.field("gc.GCVM_L2_PROTECTION_FAULT_STATUS.RW")
    assert rd("GCVM_L2_PROTECTION_FAULT_STATUS") == 1 | rw.mask
    assert rd("GCVM_L2_PROTECTION_FAULT_ADDR_LO32") == (outside >> 12) & 0xFFFFFFFF
    assert vm.read(outside + 0x3010 + (1 << 20), 4) == b"\xaa" * 4  # a read of another page: the same default page
    assert rd("GCVM_L2_PROTECTION_FAULT_ADDR_LO32") == (outside >> 12) & 0xFFFFFFFF  # the first fault stays latched
    assert rd("GCVM_L2_PROTECTION_FAULT_STATUS") == 1 | rw.mask
