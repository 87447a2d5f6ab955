"""GD25LQ16E chip driver on top of the ROM_SW engine: identify, status, write enable, erase, program, read.

Implements specs/navi31-spi-flash.md §c.1 (identity and geometry, from tinyhw.boards.navi31), §c.2
(the single-I/O commands used: 9Fh, 05h/35h/15h, 06h, 01h, 03h, 02h, 20h, 5Ah, ABh), §c.3 status bits,
§c.6 timing (every busy wait times out at the datasheet maximum plus margin, never the typical
value, and names what it waited for, e.g. the sector), §c.7 SFDP capture, and the §d.4/§d.5/§d.6
helpers: JEDEC check before anything else, rotation-tolerant (§b.3); WREN confirmed by WEL.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.boards.spec import BoardSpec
from tinyhw.errors import OperationFailed
from tinyhw.flash.protection import SR1_WEL, SR1_WIP, Protection, protected_range
from tinyhw.flash.romsw import WINDOW_BYTES, RomSw, Rx

CHIP_NAME = "GD25LQ16E"

RDID, RDSR1, RDSR2, RDSR3, WREN, WRSR, READ, PP, SE, RDSFDP = 0x9F, 0x05, 0x35, 0x15, 0x06, 0x01, 0x03, 0x02, 0x20, 0x5A
RDP = 0xAB  # release from deep power-down


@dataclass(frozen=True)
class OpTiming:
    """Typical and maximum duration of one operation (§c.6) and the poll period used while waiting."""

    typical: float
    maximum: float
    interval: float

    @property
    def timeout(self) -> float:
        """Datasheet maximum plus margin: twice the maximum plus 50 ms (the maxima are partly inferred)."""
        return 2 * self.maximum + 0.05


#: §c.6: tPP ~0.5 ms typ / ~2.4 ms max (inferred); tSE 30-50 ms typ / 500 ms max at 125 °C;
#: tW (WRSR) a few ms / ~15 ms max (inferred); any operation a previous process may have left
#: running: chip erase ~20 s max.
TIMING = {
    "pp": OpTiming(0.3e-3, 2.4e-3, 0.1e-3),
    "se": OpTiming(30e-3, 0.5, 2e-3),
    "wrsr": OpTiming(2e-3, 15e-3, 0.5e-3),
    "any": OpTiming(0.0, 20.0, 5e-3),
}

BusyHint = "power-cycle the board, then rerun the command (a write continues with --resume)"


def find_rotation(capture: bytes, jedec: bytes) -> bool:
    """True when any cyclic rotation of ``jedec`` occurs in ``capture`` (§b.3: short-capture byte phase)."""
    return any(jedec[i:] + jedec[:i] in capture for i in range(len(jedec)))


@dataclass(frozen=True)
class Status:
    """The chip's three status registers as read (SR1, SR2, SR3)."""
    sr1: int
    sr2: int
    sr3: int


class Gd25:
    """The flash chip behind a :class:`RomSw` session."""

    def __init__(self, romsw: RomSw, *, board: BoardSpec) -> None:
        self.sw = romsw
        self.size = board.flash_size
        self.sector_size = board.flash_sector
        self.page_size = board.flash_page
        self.jedec = board.flash_jedec
        self.notes: list[str] = []

    # -- identity ----------------------------------------------------------------------------------------------
    def identify(self) -> bytes:
        """Read RDID first of all and require the expected id (any rotation in the 4-byte capture).

        In chained mode this also checks the primed-window assumption: RDID is followed by an RDSR,
        and the window must then show the RDID data. If it does not, but a paired read finds the id,
        the window is not primed as assumed and the session falls back to paired reads.
        """
        capture = self._rdid_chained() if self.sw.chain else self.sw.receive(RDID, 4)
        if self.sw.chain and not find_rotation(capture, self.jedec):
            paired = self.sw.receive(RDID, 4)
            if find_rotation(paired, self.jedec):
                self.sw.chain = False
                self.notes.append("the rom_sw rx window did not behave as chained priming assumes; using paired reads")
            capture = paired
        if not find_rotation(capture, self.jedec) and capture in (b"\xff" * 4, b"\x00" * 4):
            sr1 = self.read_status(RDSR1)
            if sr1 == 0xFF:  # nothing answers: maybe deep power-down (§c.5), which only ABh leaves
                self.sw.transmit(RDP)
                self.notes.append("the flash did not answer; released it from deep power-down (abh)")
            elif sr1 & SR1_WIP:  # busy with an operation another run left: let it finish
                self.wait_ready("an operation left running by a previous process", TIMING["any"], started=True)
            capture = self.sw.receive(RDID, 4)
        if not find_rotation(capture, self.jedec):
            raise OperationFailed(f"unexpected flash id {capture[:3].hex()} (capture {capture.hex()}), expected "
                                  f"{self.jedec.hex()} ({CHIP_NAME})",
                                  hint="this is not the flash tinyhw knows; nothing was written")
        return self.jedec

    def _rdid_chained(self) -> bytes:
        sw = self.sw
        sw.fire(RDID, None, 4, rx=True)
        sw.finish(0)
        sw.fire(RDSR1, None, 4, rx=True)
        return sw.finish(4)[:4]

    def sfdp(self, length: int = 24) -> tuple[bool, int | None, bytes]:
        """5Ah read of ``length`` bytes at 0, searched for the "SFDP" signature (§c.7): (present, offset, capture)."""
        capture = self.sw.receive(RDSFDP, length, 0)
        offset = capture.find(b"SFDP")
        return offset >= 0, (offset if offset >= 0 else None), capture

    # -- status ------------------------------------------------------------------------------------------------
    def read_status(self, opcode: int = RDSR1) -> int:
        """One status register (05h, 35h or 15h); the chip repeats it, so the byte phase does not matter."""
        return self.sw.receive(opcode, 4)[0]

    def status(self) -> Status:
        """Read all three status registers."""
        return Status(self.read_status(RDSR1), self.read_status(RDSR2), self.read_status(RDSR3))

    def protection(self, sr1: int, sr2: int) -> Protection:
        """The block-protected range the status bits ``sr1``/``sr2`` describe on this chip."""
        return protected_range(sr1, sr2, self.size)

    def wait_ready(self, what: str, timing: OpTiming, *, started: bool = False) -> int:
        """Poll SR1 until WIP clears; time out at ``timing.timeout`` naming ``what`` (§c.6, §d.6)."""
        return self.sw.poll_register(RDSR1, lambda v: not v & SR1_WIP, first_wait=0.0 if started else timing.typical,
                                     interval=timing.interval, timeout=timing.timeout,
                                     what=f"the flash to finish {what}", hint=BusyHint)

    def write_enable(self, what: str) -> None:
        """WREN (06h), then confirm WEL in SR1 (§d "write-enable helper") with WIP clear.

        A chip still busy (an operation this driver did not wait for, e.g. one a lost run left) ignores
        WREN and the command after it (§c.5), while WEL, set for the running operation, would pass the
        check: then the program or erase would be dropped without a word. So WIP must be clear too; when
        it is not, the running operation is waited for and WREN sent again.
        """
        self.sw.transmit(WREN)
        sr1 = self.read_status(RDSR1)
        if sr1 & SR1_WIP and sr1 != 0xFF:
            self.wait_ready(f"an operation still running before {what}", TIMING["any"], started=True)
            self.notes.append(f"the flash was still busy before {what}; waited for it to finish")
            self.sw.transmit(WREN)
            sr1 = self.read_status(RDSR1)
        if not sr1 & SR1_WEL or sr1 & SR1_WIP or sr1 == 0xFF:
            why = "still busy" if sr1 & SR1_WIP and sr1 != 0xFF else "wel not set"
            raise OperationFailed(f"write enable did not take before {what} (sr1 0x{sr1:02x}, {why})",
                                  hint="check the board and connection, then rerun (a write continues with --resume)")

    # -- changes -------------------------------------------------------------------------------------------
    def write_status(self, sr1: int, sr2: int) -> None:
        """WRSR (01h) with SR1 and SR2, then wait out tW."""
        self.write_enable("the status register write")
        self.sw.transmit(WRSR, None, bytes([sr1 & 0xFF, sr2 & 0xFF]))
        self.wait_ready("the status register write", TIMING["wrsr"])

    def erase_sector(self, index: int) -> None:
        """SE (20h) of 4 KiB sector ``index``; the timeout error names the sector."""
        addr = index * self.sector_size
        what = f"the erase of sector {index} (0x{addr:06x})"
        self.write_enable(what)
        self.sw.transmit(SE, addr)
        self.wait_ready(what, TIMING["se"])

    def program_page(self, addr: int, data: bytes, sector: int | None = None) -> None:
        """PP (02h) of one page (never crossing a page boundary, §d.6 step 2)."""
        if addr % self.page_size or not 0 < len(data) <= self.page_size:
            raise OperationFailed(f"page program at 0x{addr:06x} of {len(data)} bytes is not one aligned page")
        where = f" in sector {sector}" if sector is not None else ""
        what = f"the program of page 0x{addr:06x}{where}"
        self.write_enable(what)
        self.sw.transmit(PP, addr, data)
        self.wait_ready(what, TIMING["pp"])

    # -- reads -------------------------------------------------------------------------------------------------
    def read(self, addr: int, length: int, progress: Callable[[int], None] | None = None) -> bytes:
        """``length`` bytes from ``addr`` with 03h reads of up to 256 bytes, page aligned where possible."""
        return self.read_repeated(addr, length, 1, progress)[0]

    def read_repeated(self, addr: int, length: int, times: int,
                      progress: Callable[[int], None] | None = None) -> list[bytes]:
        """The same range read ``times`` times in one stream of 03h reads (one chain, so a repeat costs no
        extra priming transaction); one bytes object per read, for a majority vote."""
        if addr < 0 or length < 0 or addr + length > self.size:
            raise OperationFailed(f"read of 0x{length:x} bytes at 0x{addr:x} runs past the flash (0x{self.size:x})")
        reqs = []
        a, end = addr, addr + length
        while a < end:
            n = min(WINDOW_BYTES - a % WINDOW_BYTES, end - a)
            reqs.append(Rx(READ, a, n))
            a += n
        out = bytearray()
        for chunk in self.sw.receive_stream(reqs * times):
            out += chunk
            if progress is not None:
                progress(len(chunk))
        return [bytes(out[i * length:(i + 1) * length]) for i in range(times)]
