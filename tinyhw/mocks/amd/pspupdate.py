"""The emulated Navi31 PSP's early-boot flash update: what it does with the items a host streams to it.

Written from specs/navi31-spi-flash.md §e.5/§e.6 (items streamed one by one, in the firmware's order,
the last with phase 2; "the firmware, not the host, picks the destination partition"; on stock
hardware both A/B payloads matched the source afterwards, the PSP booted the updated B partition,
and only its update cookie, the B descriptor's counter/checksum and metadata near 0x1EF000 changed)
and §g.1/§g.2 (where each item lives in a raw image). Everything else below is this model's
invention, chosen so that an interrupted update never leaves a board with nothing to boot, and
documented in docs/flash-update.md:

* Staging: every item is kept as it completes; nothing is written to the flash before the last
  (phase-2) item's END_TRANSFER.
* At that END_TRANSFER the PSP checks the payload's signature (invented rule, see
  :func:`tinyhw.mocks.amd.ifwi_image.payload_digest`: the first 32 bytes of the type-1 signature item
  are the SHA-256 of item 0x08), answering 0x0D (signature validation error) or 0x0F (not found)
  without writing anything; then it writes, one 4 KiB sector read-modify-write at a time (erase,
  then program, typical datasheet timings): (1) ISH B blanked, so B is invalid while it changes,
  (2) the payload into B's slot, (3) every other item at its image offset, (4) ISH B with its update
  counter (+0x08) incremented and its checksum fixed, (5) the metadata sector at 0x1EF000 with the
  update cookie (at +0x100) selecting B, sync pending. A write that fails answers 0x0C (write to
  SPI error) and leaves that sector erased.
* Boot (a power cycle): the cookie's partition if its ISH is valid (its eight dwords sum to 0 and
  its slot lies inside the flash), else the valid ISH of the highest boot priority, else none (the
  boot loader stalls). The first boot of a partition the cookie marks "sync pending" copies its
  payload into the other slot and rewrites the metadata sector (cookie kept, sync done).

So the commit point is the cookie write: before it the old partition boots, after it the new one.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass

from tinyhw.mocks.amd.ifwi_image import ISH_A, ISH_B, METADATA, PAYLOAD_SIGNATURE_TYPE

SECTOR = 0x1000
PAGE = 0x100
#: §e.3 codes the update answers
OK = 0x00
WRITE_TO_SPI_ERROR = 0x0C
SIGNATURE_VALIDATION_ERROR = 0x0D
SIGNATURE_NOT_FOUND = 0x0F
#: invented: where the update cookie sits inside the metadata sector, and its magic
COOKIE = METADATA + 0x100
COOKIE_MAGIC = b"$UPD"
META_MAGIC = b"$MET"
#: §g.1/§g.2: the fixed items' offsets in a raw image (the $SGN items are placed from the streamed table)
FIXED_OFFSETS = {0x01: 0x000000, 0x80: 0x001000, 0x02: 0x002000, 0x03: 0x003000, 0x04: 0x010000,
                 0x05: 0x011000, 0x06: ISH_A, 0x89: 0x1F0000}
PARTITIONS = {"A": ISH_A, "B": ISH_B}


def _u32(data: bytes, off: int) -> int:
    return int(struct.unpack_from("<I", data, off)[0])


def ish_valid(flash: bytes | bytearray, off: int) -> bool:
    """An ISH is valid when its eight dwords sum to 0 (mod 2^32), it is not erased, and its slot fits the flash."""
    words = struct.unpack_from("<8I", flash, off)
    if all(w == 0xFFFFFFFF for w in words) or sum(words) & 0xFFFFFFFF:
        return False
    location, size = words[4], words[6]
    return size > 0 and location + size <= len(flash)


def cookie(flash: bytes | bytearray) -> tuple[str, bool, int] | None:
    """(selected partition, sync pending, sequence) of a valid update cookie, None when there is none."""
    raw = bytes(flash[COOKIE:COOKIE + 16])
    if raw[:4] != COOKIE_MAGIC:
        return None
    selected, pending, seq = struct.unpack_from("<III", raw, 4)
    if selected not in (0, 1) or pending not in (0, 1):
        return None
    return "AB"[selected], bool(pending), seq


def select(flash: bytes | bytearray) -> tuple[str | None, str]:
    """The partition a power-on boot runs ("A", "B" or None: the boot loader stalls) and why, in words."""
    valid = {p: ish_valid(flash, off) for p, off in PARTITIONS.items()}
    c = cookie(flash)
    if c is not None and valid[c[0]]:
        return c[0], f"the update cookie selects {c[0]}"
    ranked = sorted((p for p in valid if valid[p]), key=lambda p: -_u32(flash, PARTITIONS[p] + 4))
    if ranked:
        why = "no valid update cookie" if c is None else f"the cookie's partition {c[0]} is not valid"
        return ranked[0], f"{why}; {ranked[0]} is the valid partition of the highest boot priority"
    return None, "neither ISH A nor ISH B is valid: the boot loader stalls"


def _metadata(flash: bytes | bytearray, selected: str, pending: bool, seq: int) -> bytes:
    """The metadata sector the PSP generates: ``$MET``, the selected payload's SHA-256, the sequence, the cookie."""
    ish = PARTITIONS[selected]
    location, size = _u32(flash, ish + 0x10), _u32(flash, ish + 0x18)
    sector = bytearray(b"\xff" * SECTOR)
    sector[0:4] = META_MAGIC
    sector[4:36] = hashlib.sha256(bytes(flash[location:location + size])).digest()
    sector[36:40] = struct.pack("<I", seq)
    sector[0x100:0x110] = COOKIE_MAGIC + struct.pack("<III", "AB".index(selected), int(pending), seq)
    return bytes(sector)


@dataclass
class UpdateFaults:
    """Faults of the update (device-string faults): a forced signature failure, a failing sector write."""

    badsig: bool = False
    spi_at: int | None = None  # the N-th sector write (1-based) of the commit fails with 0x0C


class FlashUpdate:
    """The commit and the boot-time sync, on the flash array ``read``/``write`` (the board's store).

    ``write(offset, data)`` changes the flash (the persistent file); ``durations`` are the chip's
    (tinyhw.mocks.amd.gd25.TIMINGS entry) for the modelled time of each sector write."""

    def __init__(self, flash: Callable[[], bytearray], write: Callable[[int, bytes], None],
                 durations: dict[str, float], faults: UpdateFaults | None = None) -> None:
        self.flash = flash
        self.write = write
        self.durations = durations
        self.faults = faults or UpdateFaults()
        self.sector_writes = 0  # sector writes this command (fault numbering)
        #: (offset, what) of every sector write, in order, for tests
        self.log: list[tuple[int, str]] = []

    # -- the commit (the phase-2 item's END_TRANSFER) ------------------------------------------------------
    def commit(self, items: dict[int, bytes]) -> tuple[int, float]:
        """Check and write the staged ``items``; (status, modelled seconds)."""
        status = self.check_signature(items)
        if status != OK:
            return status, 0.0
        plan = self._plan(items)
        seconds = 0.0
        for offset, data, what in plan:
            ok, took = self._write_range(offset, data, what)
            seconds += took
            if not ok:
                return WRITE_TO_SPI_ERROR, seconds
        return OK, seconds

    def check_signature(self, items: dict[int, bytes]) -> int:
        """The invented payload signature: type-1 signature item starts with SHA-256(item 0x08)."""
        if self.faults.badsig:
            return SIGNATURE_VALIDATION_ERROR
        sig = items.get(0x81 + PAYLOAD_SIGNATURE_TYPE)
        payload = items.get(0x08)
        if sig is None or payload is None or len(sig) < 32:
            return SIGNATURE_NOT_FOUND
        return OK if sig[:32] == hashlib.sha256(payload).digest() else SIGNATURE_VALIDATION_ERROR

    def _plan(self, items: dict[int, bytes]) -> list[tuple[int, bytes, str]]:
        flash = self.flash()
        ish_b = items.get(0x07, bytes(flash[ISH_B:ISH_B + 0x20]))
        b_location, b_size = _u32(ish_b, 0x10), _u32(ish_b, 0x18)
        plan: list[tuple[int, bytes, str]] = [(ISH_B, b"\xff" * 0x20, "ISH B blanked")]
        payload = items.get(0x08, b"")[:b_size]
        plan += [(b_location + o, payload[o:o + SECTOR], "B payload") for o in range(0, len(payload), SECTOR)]
        for item, offset in self._offsets(items).items():
            plan.append((offset, items[item], f"item 0x{item:02x}"))
        counter = (_u32(flash, ISH_B + 8) + 1) & 0xFFFFFFFF
        new_b = bytearray(ish_b)
        struct.pack_into("<I", new_b, 8, counter)
        struct.pack_into("<I", new_b, 0, (-sum(struct.unpack_from("<7I", new_b, 4))) & 0xFFFFFFFF)
        plan.append((ISH_B, bytes(new_b), "ISH B"))
        seq = (cookie(flash) or ("A", False, 0))[2] + 1
        plan.append((METADATA, b"", f"metadata and cookie (select B, sequence {seq})"))
        self._seq = seq
        return plan

    @staticmethod
    def _offsets(items: dict[int, bytes]) -> dict[int, int]:
        """Where each streamed item other than the payload and ISH B goes (§g.2's table, from the streamed data)."""
        out = {item: off for item, off in FIXED_OFFSETS.items() if item in items}
        pointer = items.get(0x80)
        table = items.get(0x81)
        if pointer is not None and len(pointer) >= 4:
            t = _u32(pointer, 0)
            if 0x81 in items:
                out[0x81] = t
            if table is not None and table[:4] == b"$SGN":
                count = _u32(table, 8)
                for i in range(min(count, (len(table) - 16) // 16)):
                    kind, _, _, off = struct.unpack_from("<4I", table, 16 + 16 * i)
                    if 0x81 + kind in items and 1 <= kind <= 7:
                        out[0x81 + kind] = off
        return out

    def _write_range(self, offset: int, data: bytes, what: str) -> tuple[bool, float]:
        """Write ``data`` at ``offset`` sector by sector (read-modify-write); an empty ``data`` at the metadata
        sector writes the generated metadata. (all written, modelled seconds)."""
        flash = self.flash()
        if what.startswith("metadata"):
            merged = {METADATA: _metadata(flash, "B", True, self._seq)}
        else:
            merged = {}
            end = min(offset + len(data), len(flash))
            pos = offset
            while pos < end:
                base = pos & ~(SECTOR - 1)
                sector = bytearray(merged.get(base, flash[base:base + SECTOR]))
                n = min(end, base + SECTOR) - pos
                sector[pos - base:pos - base + n] = data[pos - offset:pos - offset + n]
                merged[base] = bytes(sector)
                pos += n
        seconds = 0.0
        for base, sector in merged.items():
            self.sector_writes += 1
            seconds += self.durations["se"] + (SECTOR // PAGE) * self.durations["pp"]
            self.log.append((base, what))
            if self.faults.spi_at == self.sector_writes:
                self.write(base, b"\xff" * SECTOR)  # erased, then the program failed
                return False, seconds
            self.write(base, sector)
        return True, seconds

    # -- the boot ----------------------------------------------------------------------------------------------
    def boot(self) -> tuple[str | None, str]:
        """A power-on boot: select a partition; the first boot after an update syncs the other slot."""
        flash = self.flash()
        chosen, why = select(flash)
        c = cookie(flash)
        if chosen is not None and c is not None and c[0] == chosen and c[1]:
            src, dst = PARTITIONS[chosen], PARTITIONS["A" if chosen == "B" else "B"]
            s_loc, s_size = _u32(flash, src + 0x10), _u32(flash, src + 0x18)
            d_loc, d_size = _u32(flash, dst + 0x10), _u32(flash, dst + 0x18)
            n = min(s_size, d_size)
            payload = bytes(flash[s_loc:s_loc + n])
            for o in range(0, n, SECTOR):
                self.write(d_loc + o, payload[o:o + SECTOR])
            self.write(METADATA, _metadata(self.flash(), chosen, False, c[2]))
            why += f"; first boot after the update: payload {chosen} copied into the other slot"
        return chosen, why

