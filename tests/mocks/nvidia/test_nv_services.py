"""The emulated NVIDIA blocks (falcons, FWSEC/booter black boxes, GSP-RM) run on NvServices alone, not on the
AD102 board: on a small stub, and inside a whole ``nv boot`` through a guard that lets only the interface through."""

from __future__ import annotations

import ast
import struct
import typing
from pathlib import Path

import pytest
from nvboothelp import boot

from tests.mocks.nvidia.test_ad102_gsp import BROM_FWSEC, FRTS, fwsec
from tinyhw.boards.nvidia import REG_WPR2_ADDR_HI, REG_WPR2_ADDR_LO, Ad102Options
from tinyhw.mocks.common.faults import BusFault
from tinyhw.mocks.common.services import NvServices
from tinyhw.mocks.nvidia import ad102, nv_falcon, nv_gsp, nv_vbios
from tinyhw.mocks.nvidia.nv_gsp import PAGE, GspRm, SecureBoot

#: the falcon starts of a boot: FWSEC, the booter, then the sequencer's core start and core resume
SEQUENCED = [("gsp", 0), ("sec2", 0), ("gsp", 0), ("sec2", 0)]

MOCKS = Path(ad102.__file__).parent
#: the names NvServices declares (attributes and methods), what a block may touch on its services
MEMBERS = frozenset(typing.get_type_hints(NvServices)) | {
    n for n, v in vars(NvServices).items() if callable(v) and not n.startswith("_")}


class StubNv:
    """The smallest NVIDIA board: a flat FB, a register dict, one flat host buffer at bus address HOST."""

    HOST = 0x100000

    def __init__(self) -> None:
        self.vram_size = 24 << 30
        self.pci_ids = 0x268410DE
        self.fb = bytearray(4 << 20)
        self.regs: dict[int, int] = {}
        self.host = bytearray(1 << 20)

    def vram_read(self, offset: int, length: int) -> bytes:
        return bytes(self.fb[offset:offset + length])

    def reg_read(self, offset: int) -> int:
        return self.regs.get(offset, 0)

    def reg_write(self, offset: int, value: int) -> None:
        self.regs[offset] = value

    def _at(self, addr: int, length: int) -> int:
        if not 0 <= addr - self.HOST <= len(self.host) - length:
            raise BusFault(f"no host memory at 0x{addr:x}")
        return addr - self.HOST

    def bus_read(self, addr: int, length: int) -> bytes:
        o = self._at(addr, length)
        return bytes(self.host[o:o + length])

    def bus_write(self, addr: int, data: bytes) -> None:
        o = self._at(addr, len(data))
        self.host[o:o + len(data)] = data


class Guard:
    """Hands a block only what NvServices declares; anything else the block asks of the board fails the test."""

    def __init__(self, services: NvServices) -> None:
        object.__setattr__(self, "_inner", services)
        object.__setattr__(self, "used", set())

    def __getattr__(self, name: str) -> typing.Any:
        if name not in MEMBERS:
            raise AssertionError(f"an nvidia block reached board.{name}, which NvServices does not declare")
        self.used.add(name)
        return getattr(self._inner, name)

    def __setattr__(self, name: str, value: object) -> None:
        raise AssertionError(f"an nvidia block set board.{name}")


def test_the_board_and_the_stub_provide_the_services(tmp_path: Path) -> None:
    assert {"vram_size", "pci_ids", "vram_read", "reg_read", "reg_write", "bus_read", "bus_write"} == MEMBERS
    assert isinstance(StubNv(), NvServices)
    board = ad102.Ad102Board(Ad102Options(strict=True, state=tmp_path / "s.json"), lock=False)
    try:
        assert isinstance(board, NvServices)
        assert board.secure.services is board and board.gsp.services is board
    finally:
        board.close()


def _load(falcon: nv_falcon.EmulatedFalcon, stub: StubNv, image: bytes) -> None:
    """Engine reset, FBIF setup, DMA the FWSEC image (at FB 2 MiB) into IMEM and DMEM, boot-ROM parameters."""
    stub.fb[0x200000:0x200000 + len(image)] = image
    falcon.engine_reset(True)
    falcon.engine_reset(False)
    falcon.write(nv_falcon.FBIF_CTL, 1 << 7)
    falcon.write(nv_falcon.TRANSCFG0, 1 << 2)
    imem, dmem = nv_vbios.IMEM_LOAD, 0x340
    for size, src, cmd in ((imem, 0x200000, 0x14 | 0x600), (dmem, 0x200000 + imem, 0x600)):
        falcon.write(nv_falcon.DMATRFBASE, src >> 8)
        for n in range(0, size, 256):
            falcon.write(nv_falcon.DMATRFMOFFS, n)
            falcon.write(nv_falcon.DMATRFFBOFFS, n)
            falcon.write(nv_falcon.DMATRFCMD, cmd)
    for off, value in zip((nv_falcon.PARAADDR0, nv_falcon.ENGIDMASK, nv_falcon.UCODE_ID, nv_falcon.MOD_SEL),
                          BROM_FWSEC, strict=True):
        falcon.write(off, value)


@pytest.mark.parametrize(("fault", "code"), [("none", 0), ("fwsec-error", nv_gsp.FWSEC_INJECTED)])
def test_fwsec_runs_on_a_stub_and_raises_wpr2_through_reg_write(fault: str, code: int) -> None:
    stub = StubNv()
    secure = SecureBoot(Guard(stub), fault)  # type: ignore[arg-type]
    _load(secure.gsp, stub, fwsec())
    assert secure.gsp.dma_bytes == nv_vbios.IMEM_LOAD + 0x400  # every 256-byte DMA read the stub's FB
    secure.gsp.write(nv_falcon.CPUCTL, 2)
    assert secure.gsp.read(nv_falcon.CPUCTL) & (1 << 4) and secure.gsp.read(nv_falcon.MAILBOX0) == code
    if code:
        assert stub.regs.get(REG_WPR2_ADDR_HI, 0) == 0
    else:
        assert stub.regs[REG_WPR2_ADDR_LO] == (FRTS >> 12) << 4 and secure.wpr2()[1] > secure.wpr2()[0]


def _queues(stub: StubNv) -> int:
    """LibOS arguments with an RMARGS entry, a 0x80-page shared region (command queue, then status queue) and its
    page table, all in the stub's host buffer; returns the LibOS arguments' bus address."""
    libos, rmargs, table, shared = StubNv.HOST, StubNv.HOST + 0x1000, StubNv.HOST + 0x2000, StubNv.HOST + 0x10000
    count = 0x80
    name = int.from_bytes(b"RMARGS".rjust(8, b"\0"), "big")
    stub.bus_write(libos, struct.pack("<QQQ", name, rmargs, 0x1000))
    stub.bus_write(rmargs, struct.pack("<QI4xQQ", table, count, 0, 0x40000))  # cmd queue at 0, status at 256 KiB
    stub.bus_write(table, struct.pack(f"<{count}Q", *(shared + PAGE * i for i in range(count))))
    return libos


def test_gsp_rm_answers_on_a_stub() -> None:
    stub = StubNv()
    guard = Guard(stub)
    rm = GspRm(guard, "535.261.03", silent=False)  # type: ignore[arg-type]
    rm.start(_queues(stub))
    status = StubNv.HOST + 0x10000 + 0x40000

    def posted(slot: int) -> int:
        return struct.unpack_from("<I", stub.bus_read(status + 0x1000 + slot * PAGE + 48 + 12, 4))[0]

    assert struct.unpack("<8I", stub.bus_read(status, 32))[1:4] == (0x40000, PAGE, 63)  # the status queue header
    assert posted(0) == 0x1002 and rm.sequencer_posted  # the CPU sequencer's script
    rm.on_register_write(0x110080, nv_gsp.SEQUENCER_DONE)
    assert posted(1) == 0x1001 and rm.init_done  # GSP_INIT_DONE
    assert (rm.vram_size, rm.pci_ids) == (stub.vram_size, stub.pci_ids)
    assert guard.used == {"vram_size", "pci_ids", "bus_read", "bus_write"}


def test_a_gsp_rm_bus_fault_on_the_stub_is_the_services_busfault() -> None:
    rm = GspRm(StubNv(), "535.261.03", silent=False)
    with pytest.raises(BusFault, match="no host memory"):
        rm.start(0x10)


def test_a_whole_boot_reaches_the_board_only_through_nvservices(tmp_path: Path, monkeypatch) -> None:
    guards: list[Guard] = []

    def guarded(services: NvServices, fault: str = "none") -> SecureBoot:
        guards.append(Guard(services))
        return SecureBoot(guards[-1], fault)  # type: ignore[arg-type]

    monkeypatch.setattr(ad102, "SecureBoot", guarded)
    result, err, board = boot(tmp_path)
    assert err is None, err
    assert result is not None and result.gsp["gpu_name"] == nv_gsp.GPU_NAME
    assert board.secure.results == SEQUENCED
    assert guards[0].used == MEMBERS  # every member is used: the interface holds nothing the blocks do not need


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
    return out


@pytest.mark.parametrize("module", ["nv_falcon.py", "nv_gsp.py"])
def test_no_nvidia_block_imports_the_board_or_holds_it_untyped(module: str) -> None:
    path = MOCKS / module
    assert not {m for m in _imports(path) if m.startswith("tinyhw.mocks.nvidia.ad102")}
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.arg) and node.annotation is not None:
            assert "Any" not in ast.unparse(node.annotation), f"{module}: parameter {node.arg} typed Any"
