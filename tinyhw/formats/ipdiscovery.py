"""AMD IP discovery binary parser (bytes in, dataclasses out).

Spec: specs/amd-bringup.md §2 (own restatement of the kernel's discovery.h layouts):
§2.1 location (VRAM size - 64 KiB, 10 KiB read), §2.2 binary header (signature 0x28211407,
16-bit byte-sum checksums: the Linux rule), §2.3 IP discovery header (v1-v4, v4 has the
64-bit base flag), §2.4 die headers and 8-byte IP entries with 4- or 8-byte dword bases,
§2.5 walking order (the last entry of an IP/instance wins), §2.6 hw_id -> block, §2.7 harvest
table. Offsets inside the binary are relative to the start of the binary header.

:func:`parse` never raises on malformed input: every departure from the format is a
:class:`Problem` (offset, what was expected) and parsing goes on as far as it safely can.
The writer is the emulator's (:mod:`tinyhw.mocks.amd.ipdiscovery_writer`); this parser is tested against
hand-written byte fixtures (tests/data/ipdiscovery/), not only against that writer.
Imports only the standard library and ``tinyhw.errors``.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

#: §2.1: the binary sits this many bytes below the top of VRAM, and this much of it is read.
TMR_OFFSET = 64 << 10
READ_SIZE = 10 << 10

BINARY_SIGNATURE = 0x28211407  # §2.2
IPDS_SIGNATURE = 0x53445049  # "IPDS", §2.2
GC_TABLE_ID = 0x4347
HARVEST_SIGNATURE = 0x56524148  # "HARV"

BINARY_HEADER_SIZE = 60
IP_HEADER_SIZE = 80
MAX_DIES = 16
HARVEST_ENTRIES = 32
HARVEST_TABLE_SIZE = 8 + 4 * HARVEST_ENTRIES  # the size the harvest checksum covers
TABLE_NAMES = ("ip_discovery", "gc", "harvest_info", "vcn_info", "mall_info", "nps_info")  # §2.2 table index
IP_DISCOVERY, GC, HARVEST_INFO = 0, 1, 2

#: §2.6 hw_id -> block name, as tinyhw.regs profiles name blocks (lower case of the HWIP name).
HW_IDS: dict[int, str] = {
    1: "mp1", 3: "thm", 4: "smuio", 6: "clk", 11: "gc", 12: "vcn", 21: "vpe", 34: "mmhub", 35: "athub",
    40: "osssys", 41: "hdp", 42: "sdma0", 43: "sdma1", 46: "df", 68: "sdma2", 69: "sdma3", 70: "pcie",
    91: "lsdma", 108: "nbio", 150: "umc", 200: "xgmi", 255: "mp0", 271: "dce",
}
BLOCK_HW_IDS: dict[str, int] = {name: hw for hw, name in HW_IDS.items()}


@dataclass(frozen=True)
class Problem:
    """A problem found in an IP discovery binary: its byte offset and what was expected and found."""
    offset: int  # byte offset in the binary
    message: str  # what was expected, what was found

    def __str__(self) -> str:
        return f"0x{self.offset:04x}: {self.message}"


@dataclass(frozen=True)
class TableInfo:
    """One table of the discovery binary's table list: index, name, offset, checksum, size."""
    index: int
    name: str
    offset: int
    checksum: int
    size: int


@dataclass(frozen=True)
class IpEntry:
    """One IP entry (§2.4). ``block`` is the §2.6 name, or None for an unknown hw_id."""

    die: int
    hw_id: int
    instance: int
    major: int
    minor: int
    revision: int
    byte7: int  # v1/v2: low nibble harvest; v3/v4: low nibble sub_revision, high nibble variant
    bases: tuple[int, ...]
    offset: int  # where the entry starts in the binary

    @property
    def block(self) -> str | None:
        """The IP block's name for its hardware id (``gc``, ``mp0``, ...), or None when unknown."""
        return HW_IDS.get(self.hw_id)

    @property
    def version(self) -> tuple[int, int, int]:
        """The IP version as (major, minor, revision)."""
        return (self.major, self.minor, self.revision)

    @property
    def version_text(self) -> str:
        """The IP version as ``major.minor.revision``."""
        return f"{self.major}.{self.minor}.{self.revision}"


@dataclass(frozen=True)
class Die:
    """One die of the IP discovery table: its id, offset and how many IP entries it lists."""
    die_id: int
    offset: int
    num_ips: int


@dataclass(frozen=True)
class HarvestEntry:
    """One harvest-table entry: an IP instance (by hardware id) fused off on this board."""
    hw_id: int
    instance: int

    @property
    def block(self) -> str | None:
        """The harvested IP block's name for its hardware id, or None when unknown."""
        return HW_IDS.get(self.hw_id)


@dataclass
class Discovery:
    """What a discovery binary says; ``problems`` empty means every check passed."""

    version: tuple[int, int] = (0, 0)  # binary header version major, minor
    size: int = 0  # binary_size
    checksum: int = 0
    tables: list[TableInfo] = field(default_factory=list)
    ip_version: int = 0  # IP discovery header version (1..4)
    bases_64bit: bool = False
    dies: list[Die] = field(default_factory=list)
    ips: list[IpEntry] = field(default_factory=list)
    harvest: list[HarvestEntry] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when parsing found no problems."""
        return not self.problems

    def bases_of(self) -> dict[str, dict[int, tuple[int, ...]]]:
        """block -> instance -> dword base per segment (§2.5: a later entry replaces an earlier one)."""
        out: dict[str, dict[int, tuple[int, ...]]] = {}
        for ip in self.ips:
            if ip.block is not None:
                out.setdefault(ip.block, {})[ip.instance] = ip.bases
        return out

    def versions(self) -> dict[str, tuple[int, int, int]]:
        """block -> (major, minor, revision); the last entry of a block wins (§2.5)."""
        return {ip.block: ip.version for ip in self.ips if ip.block is not None}

    def bases(self, block: str, instance: int = 0) -> tuple[int, ...] | None:
        """The dword bases per segment of ``block`` instance ``instance``, or None when absent."""
        return self.bases_of().get(block.lower(), {}).get(instance)

    def harvested(self) -> dict[str, set[int]]:
        """block -> harvested instances (§2.7)."""
        out: dict[str, set[int]] = {}
        for h in self.harvest:
            out.setdefault(h.block or f"hw_id {h.hw_id}", set()).add(h.instance)
        return out

    @property
    def gfx_target(self) -> str | None:
        """§2.9: gfx + GC major (decimal) + minor and revision (hex): GC 11.0.0 -> gfx1100; 9.4.3 is gfx942."""
        v = self.versions().get("gc")
        if v == (9, 4, 3):
            return "gfx942"
        return None if v is None else f"gfx{v[0]}{v[1]:x}{v[2]:x}"

    @property
    def xcc_count(self) -> int:
        """GC instances that are not harvested (§2.7)."""
        gc = {ip.instance for ip in self.ips if ip.block == "gc"}
        return len(gc - self.harvested().get("gc", set()))


def checksum16(data: bytes) -> int:
    """§2.2 (Linux rule): the 16-bit wrapping sum of the bytes."""
    return sum(data) & 0xFFFF


class _Reader:
    def __init__(self, data: bytes, problems: list[Problem]) -> None:
        self.data = data
        self.problems = problems

    def get(self, fmt: str, offset: int, what: str) -> tuple[int, ...] | None:
        size = struct.calcsize(fmt)
        if offset < 0 or offset + size > len(self.data):
            left = max(0, len(self.data) - offset)
            self.problems.append(Problem(offset, f"{what}: {size} bytes expected, only {left} left in the binary"))
            return None
        return struct.unpack_from(fmt, self.data, offset)


def parse(data: bytes) -> Discovery:
    """Parse a discovery binary (normally the 10 KiB read at VRAM size - 64 KiB)."""
    d = Discovery()
    data = bytes(data)
    r = _Reader(data, d.problems)
    head = r.get("<IHHHH", 0, "binary header")
    if head is None:
        return d
    sig, major, minor, csum, size = head
    d.version, d.checksum, d.size = (major, minor), csum, size
    if sig != BINARY_SIGNATURE:
        d.problems.append(Problem(0, f"binary signature 0x{BINARY_SIGNATURE:08x} expected, found 0x{sig:08x}"))
        return d
    if size < BINARY_HEADER_SIZE or size > len(data):
        d.problems.append(Problem(10, f"binary_size between 0x{BINARY_HEADER_SIZE:x} and the 0x{len(data):x} bytes "
                                      f"read expected, found 0x{size:x}"))
        size = min(max(size, BINARY_HEADER_SIZE), len(data))
    elif checksum16(data[10:size]) != csum:
        d.problems.append(Problem(8, f"binary checksum 0x{checksum16(data[10:size]):04x} (byte sum of 0xa..0x{size:x}) "
                                     f"expected, found 0x{csum:04x}"))
    for i, name in enumerate(TABLE_NAMES):
        t = r.get("<HHHH", 12 + 8 * i, f"table_list[{name}]")
        if t is not None:
            d.tables.append(TableInfo(i, name, t[0], t[1], t[2]))
    if len(d.tables) > IP_DISCOVERY and d.tables[IP_DISCOVERY].offset:
        _parse_ip_table(d, r, d.tables[IP_DISCOVERY], size)
    else:
        d.problems.append(Problem(12, "an ip discovery table (non-zero table_list[ip_discovery].offset) expected"))
    if len(d.tables) > HARVEST_INFO and d.tables[HARVEST_INFO].offset:
        _parse_harvest(d, r, d.tables[HARVEST_INFO], size)
    if len(d.tables) > GC and d.tables[GC].offset:
        _check_gc(d, r, d.tables[GC], size)
    return d


def _check_table(d: Discovery, data: bytes, info: TableInfo, length: int, limit: int) -> None:
    if info.offset + length > limit:
        d.problems.append(Problem(info.offset, f"{info.name} table of 0x{length:x} bytes inside the 0x{limit:x}-byte "
                                               "binary expected"))
        return
    got = checksum16(data[info.offset:info.offset + length])
    if got != info.checksum:
        d.problems.append(Problem(12 + 8 * info.index + 2, f"{info.name} table checksum 0x{got:04x} expected, found "
                                                           f"0x{info.checksum:04x}"))


def _parse_ip_table(d: Discovery, r: _Reader, info: TableInfo, limit: int) -> None:
    base = info.offset
    h = r.get("<IHHIH", base, "ip discovery header")
    if h is None:
        return
    sig, version, tsize, _id, num_dies = h
    d.ip_version = version
    if sig != IPDS_SIGNATURE:
        d.problems.append(Problem(base, f"ip discovery signature 0x{IPDS_SIGNATURE:08x} expected, found 0x{sig:08x}"))
        return
    if not 1 <= version <= 4:
        d.problems.append(Problem(base + 4, f"ip discovery header version 1..4 expected, found {version}"))
    _check_table(d, r.data, info, tsize, limit)
    flags = r.get("<B", base + 78, "ip discovery header flags")
    d.bases_64bit = version >= 4 and flags is not None and bool(flags[0] & 1)
    width = 8 if d.bases_64bit else 4
    if num_dies > MAX_DIES:
        d.problems.append(Problem(base + 12, f"at most {MAX_DIES} dies expected, found {num_dies}"))
        num_dies = MAX_DIES
    end = min(limit, base + tsize) if tsize else limit
    for k in range(num_dies):
        die_info = r.get("<HH", base + 14 + 4 * k, f"die_info[{k}]")
        if die_info is None:
            return
        die_id, die_off = die_info
        dh = r.get("<HH", die_off, f"die header {k}") if die_off + 4 <= end else None
        if dh is None:
            if die_off + 4 > end:
                d.problems.append(Problem(base + 14 + 4 * k, f"die {k} header inside the table (< 0x{end:x}) expected, "
                                                              f"found offset 0x{die_off:x}"))
            continue
        die_id2, num_ips = dh
        if die_id2 != die_id:
            d.problems.append(Problem(die_off, f"die id {die_id} (as in die_info[{k}]) expected, found {die_id2}"))
        d.dies.append(Die(die_id2, die_off, num_ips))
        p = die_off + 4
        for n in range(num_ips):
            if p + 8 > end:
                d.problems.append(Problem(p, f"ip entry {n} of die {die_id2} inside the table (< 0x{end:x}) expected"))
                break
            hw_id, inst, nbase, major, minor, rev, b7 = struct.unpack_from("<HBBBBBB", r.data, p)
            if p + 8 + width * nbase > end:
                d.problems.append(Problem(p + 3, f"{nbase} base addresses of ip entry {n} (hw_id {hw_id}) inside the "
                                                 f"table (< 0x{end:x}) expected"))
                break
            bases = struct.unpack_from(f"<{nbase}{'Q' if width == 8 else 'I'}", r.data, p + 8)
            d.ips.append(IpEntry(die_id2, hw_id, inst, major, minor, rev, b7, tuple(bases), p))
            p += 8 + width * nbase


def _parse_harvest(d: Discovery, r: _Reader, info: TableInfo, limit: int) -> None:
    h = r.get("<II", info.offset, "harvest table header")
    if h is None:
        return
    if h[0] != HARVEST_SIGNATURE:
        d.problems.append(Problem(info.offset, f"harvest signature 0x{HARVEST_SIGNATURE:08x} expected, found "
                                               f"0x{h[0]:08x}"))
        return
    _check_table(d, r.data, info, HARVEST_TABLE_SIZE, limit)
    for k in range(HARVEST_ENTRIES):
        e = r.get("<HBB", info.offset + 8 + 4 * k, f"harvest entry {k}")
        if e is None:
            return
        if e[0] == 0:  # an empty slot ends the list
            break
        d.harvest.append(HarvestEntry(e[0], e[1]))


def _check_gc(d: Discovery, r: _Reader, info: TableInfo, limit: int) -> None:
    """Only the gc table's id and checksum (its contents, §2.8, are not decoded here)."""
    h = r.get("<IHHI", info.offset, "gc info header")
    if h is None:
        return
    if h[0] != GC_TABLE_ID:
        d.problems.append(Problem(info.offset, f"gc table id 0x{GC_TABLE_ID:04x} expected, found 0x{h[0]:x}"))
        return
    _check_table(d, r.data, info, h[3], limit)
