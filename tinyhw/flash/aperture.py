"""Whole-flash dump through the SMUIO ROM_INDEX/ROM_DATA aperture (specs/navi31-spi-flash.md §f, §h.4).

The path that works in every board state (§1), also once the PSP has booted and gated ROM_SW. The
procedure, with the spec's conclusion on the seed's byte swaps applied (§f "Conclusion", open
question 2):

1. read ROM_CNTL and ROM_INDEX and keep both; refuse when ROM_CNTL reads 0xFFFFFFFF (the raw
   controller is unavailable; the NBIO function-ROM aperture is never a substitute, §1, §f step 2);
2. leave ROM_CNTL alone (Linux relies on auto-increment without setting bit 29);
3. per 64 KiB page, write ROM_INDEX = the plain byte address, then read ROM_DATA 16384 times,
   one aligned dword read each, never a block read (a block read walks the registers after ROM_DATA
   instead of re-reading it, §h.4 A4);
4. finally, in all cases, write back the exact original ROM_INDEX, then ROM_CNTL (§f step 5);
5. before any output: exactly the flash size, ``AA 55 AA 55`` at 0, and the two 1 MiB halves not
   equal (a mirrored aperture, §h.4 A2). One more check, inferred: a first 64 KiB that is one
   repeated dword means ROM_INDEX did not advance (auto-increment off), not a flash image.

Offsets come from the register database. The caller writes the file (atomically) and its sha256.
"""

from __future__ import annotations

import contextlib
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from tinyhw.errors import OperationFailed, TinyhwError
from tinyhw.flash.device import require_flash
from tinyhw.formats.ifwi import magic_problem
from tinyhw.transport.base import BarRegion, Transport

#: §f step 4: ROM_INDEX is rewritten at each 64 KiB page.
PAGE = 0x10000
#: §f step 2, §h.1 R3: what every ROM-block register reads when the controller is not reachable.
UNAVAILABLE = 0xFFFFFFFF
_DWORDS = struct.Struct(f"<{PAGE // 4}I")


@dataclass(frozen=True)
class ApertureDump:
    """A flash read through ROM_INDEX/ROM_DATA: the bytes, the ROM_CNTL/ROM_INDEX values restored, the reads."""
    data: bytes
    rom_cntl: int  # the originals, as found and as restored
    rom_index: int
    reads: int  # ROM_DATA reads (one dword each)


def check_dump(data: bytes, size: int = 2 << 20) -> None:
    """§f step 6 (and the inferred index check): raise :class:`OperationFailed` unless ``data`` is a raw dump."""
    if len(data) != size:
        raise OperationFailed(f"refusing the aperture dump: it has 0x{len(data):x} bytes, not 0x{size:x}")
    bad = magic_problem(data)
    if bad is not None:
        raise OperationFailed(f"refusing the aperture dump: {bad}",
                              hint="the aperture does not show a raw flash image; try --method rom_sw")
    first = data[:PAGE]
    if first == first[:4] * (len(first) // 4):
        raise OperationFailed(f"refusing the aperture dump: the first 64 KiB repeat one dword ({first[:4].hex()}): "
                              "rom_index did not advance", hint="the aperture does not auto-increment on this "
                              "board; try --method rom_sw")
    half = size // 2
    if data[:half] == data[half:]:
        raise OperationFailed(f"refusing the aperture dump: both 0x{half:x}-byte halves are equal (a mirrored or "
                              "aliased aperture, not a raw dump)",
                              hint="the aperture decodes only 1 MiB here; use --method rom_sw on a board whose psp "
                                   "has not booted")


#: The first ROM_DATA reads of a dump, timed to estimate the whole (32 of a 2 MiB dump's 524,288).
SAMPLE_READS = 32


@dataclass(frozen=True)
class ApertureEstimate:
    """What a whole aperture dump will cost: ``reads`` register reads (one per dword, each its own round trip over
    USB or a network) at ``per_read_s`` seconds each, ``seconds`` in all; ``kind`` "modelled" (an emulated board's
    virtual clock) or "measured" (the wall clock, on hardware)."""

    reads: int
    per_read_s: float
    seconds: float
    kind: str

    def words(self) -> str:
        """One line for the user, said before the dump starts."""
        return (f"aperture dump: {self.reads:,} register reads (one per dword) at {self.per_read_s * 1e6:.1f} us each "
                f"({self.kind}): about {_duration(self.seconds)}")


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def _estimate(sample_s: float, samples: int, size: int, virtual: bool) -> ApertureEstimate:
    """The whole dump's cost from ``samples`` ROM_DATA reads that took ``sample_s`` on the device's clock."""
    per = max(0.0, sample_s) / samples
    reads = size // 4 + 2  # one per dword, plus the two originals
    accesses = reads + size // PAGE + 2  # and one ROM_INDEX write per page, and the two restores
    return ApertureEstimate(reads, per, per * accesses, "modelled" if virtual else "measured")


def dump(transport: Transport, *, size: int | None = None,
         advance: Callable[[int], None] = lambda n: None,
         on_estimate: Callable[[ApertureEstimate], None] | None = None) -> ApertureDump:
    """Read ``size`` bytes of the flash through ROM_INDEX/ROM_DATA, restore both registers, check the result.
    ``on_estimate`` is told the whole dump's cost once the first :data:`SAMPLE_READS` ROM_DATA reads are timed on
    the device's clock (no access is added for it), before the rest of the dump runs."""
    asic, _, spec = require_flash(transport)
    size = spec.flash_size if size is None else size
    bar = transport.bar(asic.bar)
    cntl_off, index_off = asic.offset("smuio.ROM_CNTL"), asic.offset("smuio.ROM_INDEX")
    data_off = asic.offset("smuio.ROM_DATA")
    index_mask = asic.field("smuio.ROM_INDEX.ROM_INDEX").mask
    if size % PAGE or not 0 < size <= index_mask + 1:
        raise OperationFailed(f"aperture dump size 0x{size:x} is not a multiple of 64 KiB inside the rom index")
    rom_cntl = bar.read32(cntl_off)
    rom_index = bar.read32(index_off)
    if rom_cntl == UNAVAILABLE:
        raise OperationFailed("refusing the aperture dump: rom_cntl reads 0xffffffff, the smuio rom controller is "
                              "unavailable (the nbio function-rom aperture is no substitute: it starts at the vbios)",
                              hint="check that the board is powered and bar5 is mapped, or try --method rom_sw")
    out = bytearray()
    reads = 0
    read32 = bar.read32
    n = PAGE // 4
    failed = True
    try:
        for page in range(0, size, PAGE):
            bar.write32(index_off, page)  # a plain byte address (§f byte-swap analysis)
            if page == 0 and on_estimate is not None:
                clock = transport.clock
                t0 = clock.now()
                first = [read32(data_off) for _ in range(SAMPLE_READS)]
                on_estimate(_estimate(clock.now() - t0, SAMPLE_READS, size, clock.virtual))
                out += _DWORDS.pack(*first, *[read32(data_off) for _ in range(n - SAMPLE_READS)])
            else:
                out += _DWORDS.pack(*[read32(data_off) for _ in range(n)])
            reads += n
            advance(PAGE)
        failed = False
    finally:
        if failed:  # restoring must never mask the original error (a pulled cable fails here too)
            with contextlib.suppress(TinyhwError, OSError):
                _restore(bar, index_off, rom_index, cntl_off, rom_cntl)
        else:
            _restore(bar, index_off, rom_index, cntl_off, rom_cntl)
    data = bytes(out)
    check_dump(data, size)
    return ApertureDump(data, rom_cntl, rom_index, reads)


def _restore(bar: BarRegion, index_off: int, rom_index: int, cntl_off: int, rom_cntl: int) -> None:
    """§f step 5: ROM_INDEX, then ROM_CNTL, the exact originals."""
    bar.write32(index_off, rom_index)
    bar.write32(cntl_off, rom_cntl)


@contextlib.contextmanager
def reader(transport: Transport) -> Iterator[Callable[[int, int], bytes]]:
    """A ``read(address, length)`` of the flash through ROM_INDEX/ROM_DATA, for small reads on a booted board
    (the board identity before a PSP update): ROM_CNTL and ROM_INDEX kept and restored exactly (§f steps 1, 4),
    one ROM_INDEX write per read and one ROM_DATA read per dword. Refused like :func:`dump` when the controller
    reads 0xffffffff."""
    asic, _, _ = require_flash(transport)
    bar = transport.bar(asic.bar)
    cntl_off, index_off = asic.offset("smuio.ROM_CNTL"), asic.offset("smuio.ROM_INDEX")
    data_off = asic.offset("smuio.ROM_DATA")
    rom_cntl = bar.read32(cntl_off)
    rom_index = bar.read32(index_off)
    if rom_cntl == UNAVAILABLE:
        raise OperationFailed("rom_cntl reads 0xffffffff: the smuio rom controller is unavailable, the flash cannot "
                              "be read through the aperture", hint="check that the board is powered and bar5 is mapped")
    read32 = bar.read32

    def read(address: int, length: int) -> bytes:
        start = address & ~3
        count = (address + length - start + 3) // 4
        bar.write32(index_off, start)
        raw = struct.pack(f"<{count}I", *[read32(data_off) for _ in range(count)])
        return raw[address - start:address - start + length]

    failed = True
    try:
        yield read
        failed = False
    finally:
        if failed:
            with contextlib.suppress(TinyhwError, OSError):
                _restore(bar, index_off, rom_index, cntl_off, rom_cntl)
        else:
            _restore(bar, index_off, rom_index, cntl_off, rom_cntl)
