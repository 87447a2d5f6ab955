"""Emulated blocks run on BoardServices alone (tinyhw/mocks/common/services.py), not on a particular board, and are
handed what they reach of the board when they are built (never wired afterwards)."""

from __future__ import annotations

import ast
from collections.abc import Callable
from pathlib import Path

import pytest
from testpaths import ROOT

from tinyhw.boards.navi31 import FIRMWARE, NAVI31
from tinyhw.mocks.amd.board import Navi31Board
from tinyhw.mocks.amd.gpuvm import GpuVm, VmFault
from tinyhw.mocks.amd.sdma import OP_FENCE, SdmaEngine
from tinyhw.mocks.amd.smu import MSG_IDS, Smu
from tinyhw.mocks.common.services import BoardServices, CpServices, Translation
from tinyhw.regs import asic

MOCKS = ROOT / "tinyhw" / "mocks"
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

    def vram_poke(self, offset: int, data: bytes) -> None:
        self.mem[offset:offset + len(data)] = data

    def vram_count(self, nbytes: int) -> None:
        pass

    def bus_read(self, addr: int, length: int) -> bytes | None:
        return None

    def bus_write(self, addr: int, data: bytes, at: float | None = None) -> bool:
        return False


def test_the_board_and_the_stub_provide_the_services(tmp_path):
    assert isinstance(StubBoard(), BoardServices)
    from tinyhw.boards.navi31 import Navi31Options
    board = Navi31Board(Navi31Options(flash=str(tmp_path / "f.bin"), strict=True), lock=False, spec=NAVI31)
    try:
        assert isinstance(board, BoardServices)
        assert board.regs is board.smu.services.regs
        assert isinstance(board.cp.s, CpServices) and board.cp.s.regs is board.regfile.values
    finally:
        board.close()


def test_the_smu_answers_on_a_stub_board():
    stub = StubBoard()
    resets: list[str] = []
    smu = Smu(stub, REGS, on_reset=resets.append, delay=1e-3, firmware=FIRMWARE)
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


def _fb_location(stub: StubBoard, block: str = "gc.GC") -> None:
    """The stub's FB placement in a hub's FB_LOCATION registers (16 MiB units): FB .. FB + 16 MiB - 1."""
    stub.reg_write(REGS.offset(f"{block}MC_VM_FB_LOCATION_BASE"), FB >> 24)
    stub.reg_write(REGS.offset(f"{block}MC_VM_FB_LOCATION_TOP"), FB >> 24)


def _tables(stub: StubBoard, root: int, addr_of) -> tuple[int, int]:
    """Four 4 KiB tables from VRAM offset ``root`` (PDB2, PDB1, PDB0, PTB), each PDE naming the next table by
    ``addr_of(vram offset)``; the PTB maps VA page 0 to VRAM 0x40000 and page 1 to bus page 0x7000 (system bit);
    PDB0 entry 1 is a 2 MiB page (PDE-is-PTE) at VRAM 0x200000. Returns (VRAM page of VA 0, of VA 2 MiB)."""
    for level in range(3):
        stub.mem[root + level * 0x1000:root + level * 0x1000 + 8] = \
            (addr_of(root + (level + 1) * 0x1000) | 1).to_bytes(8, "little")
    ptb = root + 3 * 0x1000
    stub.mem[ptb:ptb + 8] = (addr_of(0x40000) | 0x61).to_bytes(8, "little")
    stub.mem[ptb + 8:ptb + 16] = (0x7000 | 0x63).to_bytes(8, "little")
    pdb0 = root + 2 * 0x1000
    stub.mem[pdb0 + 8:pdb0 + 16] = (addr_of(0x200000) | 0x61 | 1 << 54).to_bytes(8, "little")
    return 0x40000, 0x200000


def _vmid0(stub: StubBoard, root_entry: int, block: str = "gc.GC", va: int = 1 << 40) -> None:
    def wr(name: str, value: int) -> None:
        stub.reg_write(REGS.offset(f"{block}{name}"), value)

    wr("VM_CONTEXT0_CNTL", 1 | 3 << REGS.field(f"{block}VM_CONTEXT0_CNTL.PAGE_TABLE_DEPTH").shift)
    wr("VM_CONTEXT0_PAGE_TABLE_START_ADDR_LO32", (va >> 12) & 0xFFFFFFFF)
    wr("VM_CONTEXT0_PAGE_TABLE_START_ADDR_HI32", va >> 44)
    end = (va + (1 << 30)) >> 12
    wr("VM_CONTEXT0_PAGE_TABLE_END_ADDR_LO32", end & 0xFFFFFFFF)
    wr("VM_CONTEXT0_PAGE_TABLE_END_ADDR_HI32", end >> 32)
    wr("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_LO32", root_entry & 0xFFFFFFFF)
    wr("VM_CONTEXT0_PAGE_TABLE_BASE_ADDR_HI32", root_entry >> 32)


@pytest.mark.parametrize("hub", ["gc", "mmhub"])
def test_gpuvm_page_tables_hold_physical_vram_addresses(hub):
    """amd-bringup.md §4.5: the PAGE_TABLE_BASE_ADDR, every PDE and every VRAM PTE hold the physical VRAM address (the
    offset from VRAM's start), not the MC address; a system PTE holds the bus address. The same tables built with MC
    addresses (FB base + offset) do not translate: the walk faults and latches the hub's fault status."""
    block = {"gc": "gc.GC", "mmhub": "mmhub.MM"}[hub]
    va = 1 << 40
    stub = StubBoard()
    stub.mem = bytearray(4 << 20)  # room for a 2 MiB page
    _fb_location(stub, block)
    root = 0x10000
    page0, huge = _tables(stub, root, lambda off: off)
    _vmid0(stub, root | 1, block, va)
    vm = GpuVm(stub, REGS, hub=hub)
    assert vm.translate(va + 0x123) == (False, page0 + 0x123)
    assert vm.translate(va + 0x1010) == (True, 0x7010)  # system PTE: a bus address, unchanged
    assert vm.translate(va + (2 << 20) + 0x5008) == (False, huge + 0x5008)
    assert vm.walks == 3
    stub.mem[0x40000:0x40004] = b"abcd"
    assert vm.read(va, 4) == b"abcd"

    mc_stub = StubBoard()  # the misreading: MC addresses inside the tables
    mc_stub.mem = bytearray(4 << 20)
    _fb_location(mc_stub, block)
    _tables(mc_stub, root, lambda off: FB + off)
    _vmid0(mc_stub, root | 1, block, va)
    mc_vm = GpuVm(mc_stub, REGS, hub=hub)
    status = REGS.offset(f"{block}VM_L2_PROTECTION_FAULT_STATUS")
    with pytest.raises(VmFault, match="physical address 0x8000011000 outside vram"):
        mc_vm.translate(va)
    assert mc_stub.reg_read(status) == 1
    mc_stub.reg_write(status, 0)
    _vmid0(mc_stub, (FB + root) | 1, block, va)  # an MC root too: the root itself is outside vram
    with pytest.raises(VmFault, match=f"physical address 0x{FB + root:x} outside vram"):
        mc_vm.translate(va)
    assert mc_stub.reg_read(status) == 1
    other = REGS.offset(("mmhub.MM" if hub == "gc" else "gc.GC") + "VM_L2_PROTECTION_FAULT_STATUS")
    assert mc_stub.reg_read(other) == 0  # each hub latches its own faults


@pytest.mark.parametrize("huge", ["offset", "aligned"])
def test_gpuvm_huge_page_at_an_unaligned_address(huge):
    """A 2 MiB page (PDB0 entry with bit 54) whose physical address is 4 KiB- but not 2 MiB-aligned, as tinygrad's AM
    maps its contiguous buffers: by default the address is taken whole and the access's offset inside the page is
    added (``hugepage=offset``); ``hugepage=aligned`` drops the address's low bits first."""
    va = 1 << 40
    stub = StubBoard()
    stub.mem = bytearray(4 << 20)
    _fb_location(stub)
    root = 0x10000
    _tables(stub, root, lambda off: off)
    pdb0 = root + 2 * 0x1000
    stub.mem[pdb0 + 8:pdb0 + 16] = (0x234000 | 0x61 | 1 << 54).to_bytes(8, "little")
    _vmid0(stub, root | 1, "gc.GC", va)
    vm = GpuVm(stub, REGS, huge=huge)
    want = 0x234000 + 0x5008 if huge == "offset" else 0x200000 + 0x5008
    assert vm.translate(va + (2 << 20) + 0x5008) == (False, want)


def test_gpuvm_sends_a_fault_to_the_default_page_only_where_the_hub_says_so():
    """A fault stops the access (VmFault) unless GCVM_L2_PROTECTION_FAULT_CNTL enables the default page for its kind:
    then a write lands in the default page at the same page offset, a read comes from it, and the first fault's page
    and direction stay latched until the status is cleared."""
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
    _fb_location(stub)
    wr("GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_LO32", dummy >> 12)  # a physical page number (amd-bringup.md §4.5)
    wr("GCVM_L2_PROTECTION_FAULT_DEFAULT_ADDR_HI32", 0)
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


# -- services: every block is handed what it reaches of the board when it is built ------------------------------------
WIRED_AFTER = ("thread_trace", "perfmon")  # the command processor's peers: constructor arguments


def wiring_after_construction(source: str) -> list[str]:
    """``line: target`` of every assignment in ``source`` that reaches into the command processor after it was built:
    its services (``<x>.cp.s.<name> = ...``, ``<x>.cp.s = ...``) or its peers (``<x>.cp.thread_trace = ...``)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] \
            if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else []
        for target in targets:
            for each in target.elts if isinstance(target, ast.Tuple) else [target]:
                chain, t = [], each
                while isinstance(t, ast.Attribute):
                    chain.insert(0, t.attr)
                    t = t.value
                text = ".".join(chain)
                if ".cp.s." in f".{text}." or text.endswith(("cp.s", *(f"cp.{a}" for a in WIRED_AFTER))):
                    found.append(f"{node.lineno}: {text}")
    return found


def test_the_command_processor_gets_its_services_in_its_constructor() -> None:
    found = {str(p.relative_to(MOCKS)): wiring_after_construction(p.read_text()) for p in sorted(MOCKS.rglob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {}


def test_the_wiring_scan_sees_each_form() -> None:
    src = ("self.cp.s.reg_read, self.cp.s.reg_write = a, b\nself.cp.thread_trace = t\nboard.cp.s = s\n"
           "self.cp.s.regs = r\nself.boot.s.sos_alive = 1\nself.cp = cp\n")
    assert wiring_after_construction(src) == ["1: cp.s.reg_read", "1: cp.s.reg_write", "2: cp.thread_trace",
                                              "3: cp.s", "4: cp.s.regs"]


def services_interfaces(path: Path) -> list[str]:
    """The classes ``path`` defines whose name ends in ``Services`` (a services interface, or a board's adapter of one,
    ``Am...Services``)."""
    return [n.name for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, ast.ClassDef) and n.name.endswith("Services") and not n.name.startswith("Am")]


def test_every_services_interface_is_a_protocol_of_services_py() -> None:
    """One style: what a block may ask of its board is a Protocol in common/services.py (BoardServices, NvServices,
    CpServices), which the board implements or adapts in its constructor; no block defines its own."""
    found = {str(p.relative_to(MOCKS)): services_interfaces(p) for p in sorted(MOCKS.rglob("*.py"))}
    assert {k: v for k, v in found.items() if v} == {"common/services.py": ["BoardServices", "NvServices",
                                                                              "CpServices"]}


def test_a_reset_keeps_the_register_storage_the_blocks_were_handed(tmp_path: Path) -> None:
    """A mode-1 reset restores the register file's power-on values in the storage the command processor was built with
    (not a new one it would have to be handed again)."""
    import tinyhw

    with tinyhw.open(f"mock:navi31,strict,flash={tmp_path / 'flash.bin'}") as dev:
        board = dev.transport.board
        storage = board.regfile.values
        assert board.cp.s.regs is storage
        storage[0x1234] = 5
        board.am.mode1_reset("test")
        assert board.regfile.values is storage and board.cp.s.regs is storage and 0x1234 not in storage
        assert board.cp.thread_trace is board.am.thread_trace and board.cp.perfmon is board.am.perfmon
