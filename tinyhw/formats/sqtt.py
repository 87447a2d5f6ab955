"""Decoder (and encoder, for synthetic streams) of AMD SQ thread trace byte streams.

Implements specs/sqtt-pmc.md §5.1 (nibble framing, classification by the low byte, layout switch),
§5.2 (timestamps) with the tables of :mod:`tinyhw.formats.sqtt_tables`.

The stream is a sequence of nibbles (low nibble of each byte first); a packet at nibble ``p`` is
decoded while ``p + 16`` nibbles exist (the 64-bit look-ahead window must be full), so the last
fewer-than-16 nibbles are never decoded (tinygrad's decoder stops at the same place; the reference
counts in tests/test_prof_reference.py depend on it). Packet boundaries
are found table-driven: the packet length at every nibble position is computed at once with numpy,
then the chain of packet starts is followed in one tight loop; fields and timestamps are computed
for all packets at once from their 64-bit windows. A LAYOUT_HEADER selects the table for what follows
(layout 3 RDNA3, 4 RDNA4, anything else CDNA); decoding starts with the RDNA3 table.

Nothing here raises on bad input: any byte string decodes, and :attr:`Trace.stop` says where and
why decoding ended.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tinyhw.formats.sqtt_tables import CDNA, INST_OPS, LAYOUTS, RDNA3, PacketType, Table

__all__ = ["TYPES", "Trace", "decode", "encode", "type_code"]

WINDOW = 16  # nibbles in the look-ahead window

# one global code per packet type name, across the three tables
TYPES: list[PacketType] = []
_CODE: dict[str, int] = {}
for _tab in (RDNA3, LAYOUTS[4], CDNA):
    for _t in _tab.types:
        if _t.name not in _CODE:
            _CODE[_t.name] = len(TYPES)
            TYPES.append(_t)
NAMES = [t.name for t in TYPES]


def type_code(name: str) -> int:
    """The numeric code of the packet type called ``name``."""
    return _CODE[name]


def _arrays(table: Table) -> tuple[np.ndarray, np.ndarray]:
    codes = np.array([_CODE[table.types[i].name] for i in table.by_byte], dtype=np.int16)
    nibs = np.array([table.types[i].nibbles for i in table.by_byte], dtype=np.int64)
    return codes, nibs


_TABLE_ARRAYS = {t.name: _arrays(t) for t in (RDNA3, LAYOUTS[4], CDNA)}


def _field_arrays(name: str) -> tuple[np.ndarray, np.ndarray]:
    shift = np.zeros(len(TYPES), dtype=np.uint64)
    mask = np.zeros(len(TYPES), dtype=np.uint64)
    for c, t in enumerate(TYPES):
        f = t.field(name)
        if f is not None and f[0] < 64:
            shift[c] = f[1]
            mask[c] = (1 << (f[0] - f[1] + 1)) - 1
    return shift, mask


_DELTA_SHIFT, _DELTA_MASK = _field_arrays("delta")
_LAYOUT_CODE = _CODE["LAYOUT_HEADER"]
_TS_SHORT = _CODE["TS_DELTA_SHORT"]
_MARKS = (_CODE["TS_DELTA_OR_MARK"], _CODE["TS_DELTA_OR_MARK_RDNA4"])
_CDNA_MISC = _CODE["CDNA_MISC"]
_CDNA_TS = _CODE["CDNA_TIMESTAMP"]


@dataclass
class Trace:
    """Decoded packets of one SE stream, as parallel numpy arrays (one entry per packet)."""

    pos: np.ndarray      # nibble offset of each packet (int64)
    code: np.ndarray     # global type code, index into TYPES (int16)
    word: np.ndarray     # the packet's first 64 bits (uint64)
    time: np.ndarray     # shader-clock time after the packet's own delta (int64)
    layout: int | None   # layout of the first LAYOUT_HEADER (3, 4, other = CDNA), None without one
    nibbles: int         # nibbles in the stream
    stop: int            # nibble offset where decoding stopped
    stop_reason: str     # "end" (fewer than 16 nibbles left), "truncated" (last packet runs past the end)

    def __len__(self) -> int:
        return len(self.code)

    @property
    def arch(self) -> str:
        """The trace's architecture family: ``rdna3``, ``rdna4`` or ``cdna``."""
        return {3: "rdna3", 4: "rdna4"}.get(self.layout, "cdna") if self.layout is not None else "rdna3"

    def name(self, i: int) -> str:
        """The type name of packet ``i``."""
        return NAMES[int(self.code[i])]

    def fields(self, i: int) -> dict[str, int]:
        """Every field of packet ``i`` (bits beyond the first 64 of a 72-bit packet are not kept)."""
        t = TYPES[int(self.code[i])]
        w = int(self.word[i])
        return {n: (w >> lo) & ((1 << (hi - lo + 1)) - 1) for n, hi, lo in t.fields if hi < 64}

    def counts(self) -> dict[str, int]:
        """Packets per type name (types that never occur left out)."""
        c = np.bincount(self.code.astype(np.int64), minlength=len(TYPES))
        return {NAMES[i]: int(n) for i, n in enumerate(c) if n}

    def indices(self, *names: str) -> np.ndarray:
        """Indices of the packets of the given type names."""
        return np.flatnonzero(np.isin(self.code, [_CODE[n] for n in names]))

    def field_array(self, name: str, idx: np.ndarray) -> np.ndarray:
        """Field ``name`` of the packets at ``idx`` (0 where a type lacks it)."""
        shift, mask = _FIELD_CACHE.get(name) or _FIELD_CACHE.setdefault(name, _field_arrays(name))
        c = self.code[idx]
        return ((self.word[idx] >> shift[c]) & mask[c]).astype(np.int64)

    def describe_stop(self) -> str:
        """Why decoding stopped where it did, in words."""
        if self.stop_reason == "truncated":
            return f"stream truncated: the packet at nibble {self.stop} runs past the end ({self.nibbles} nibbles)"
        left = self.nibbles - self.stop
        tail = f"; the last {left} nibbles are fewer than the 16-nibble window and not decoded" if left else ""
        return f"decoded {len(self)} packets; stopped at nibble {self.stop} of {self.nibbles} (end of stream{tail})"


_FIELD_CACHE: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def _walk(lens: np.ndarray, start: int, limit: int, zeros_from: int) -> np.ndarray:
    """Follow the chain of packet starts from ``start`` (``lens``: packet length at every nibble).

    A plain loop over a Python list (measured faster than numpy pointer doubling on real traces);
    from ``zeros_from`` on the stream is all zero padding, whose packets are evenly spaced.
    """
    if start > limit:
        return np.zeros(0, dtype=np.int64)
    nxt = (np.arange(limit + 1, dtype=np.int64) + lens[:limit + 1]).tolist()
    out = []
    append = out.append
    p = start
    stop = min(limit + 1, zeros_from)
    while p < stop:
        append(p)
        p = nxt[p]
    head = np.array(out, dtype=np.int64)
    if p > limit:
        return head
    return np.concatenate([head, np.arange(p, limit + 1, int(lens[p]), dtype=np.int64)])


def _windows(buf: np.ndarray, pos: np.ndarray) -> np.ndarray:
    """The 64 bits starting at each nibble offset in ``pos`` (``buf``: the bytes plus 9 zero bytes)."""
    b = pos >> 1
    rows = np.lib.stride_tricks.as_strided(buf, shape=(len(buf) - 8, 8), strides=(1, 1))[b]
    w = np.ascontiguousarray(rows).view("<u8").ravel()
    odd = (pos & 1).astype(bool)
    if odd.any():
        hi = (buf[b[odd] + 8] & 15).astype(np.uint64) << np.uint64(60)
        w[odd] = (w[odd] >> np.uint64(4)) | hi
    return w


def decode(data: bytes) -> Trace:
    """Decode one SE's SQTT byte stream (any bytes; never raises)."""
    raw = np.frombuffer(data, dtype=np.uint8)
    buf = np.zeros(len(raw) + 9, dtype=np.uint8)
    buf[:len(raw)] = raw
    n = 2 * len(data)
    limit = n - WINDOW
    # low byte of a packet starting at every nibble offset
    low = np.empty(n + 1, dtype=np.int64)
    low[0:n:2] = raw
    low[1:n - 1:2] = (raw[:-1] >> 4) | ((raw[1:] & 15) << 4)
    if n:
        low[n - 1] = raw[-1] >> 4
    low[n] = 0
    nz = np.flatnonzero(raw)
    zeros_from = 2 * (int(nz[-1]) + 1) if len(nz) else 0   # nibble offset where the zero padding starts
    table, layout = RDNA3, None
    parts_pos: list[np.ndarray] = []
    parts_code: list[np.ndarray] = []
    start = 0
    end = 0
    while True:
        codes_t, nibs_t = _TABLE_ARRAYS[table.name]
        if start <= limit and codes_t[low[start]] == _LAYOUT_CODE:
            # a header at the segment start: take it alone and pick the table before walking on
            lay = int(_windows(buf, np.array([start]))[0] >> np.uint64(7)) & 0x3F
            layout = lay if layout is None else layout
            parts_pos.append(np.array([start], dtype=np.int64))
            parts_code.append(np.array([_LAYOUT_CODE], dtype=np.int16))
            end = start + 16
            table, start = LAYOUTS.get(lay, CDNA), start + 16
            codes_t, nibs_t = _TABLE_ARRAYS[table.name]
        pos = _walk(nibs_t[low], start, limit, zeros_from)
        code = codes_t[low[pos]]
        # a later LAYOUT_HEADER whose layout selects another table ends this segment
        switch = None
        for h in np.flatnonzero(code == _LAYOUT_CODE).tolist():
            lay = int(_windows(buf, pos[h:h + 1])[0] >> np.uint64(7)) & 0x3F
            if layout is None:
                layout = lay
            new = LAYOUTS.get(lay, CDNA)
            if new is not table:
                switch = (h, new)
                break
        if switch is None:
            parts_pos.append(pos)
            parts_code.append(code)
            if len(pos):
                end = int(pos[-1]) + int(nibs_t[low[pos[-1]]])
            break
        h, table = switch
        parts_pos.append(pos[:h + 1])
        parts_code.append(code[:h + 1])
        start = int(pos[h]) + 16
    pos = np.concatenate(parts_pos) if len(parts_pos) > 1 else parts_pos[0]
    code = np.concatenate(parts_code) if len(parts_code) > 1 else parts_code[0]
    word = _windows(buf, pos)
    time = _times(code, word)
    if len(pos) and end > n:
        stop, reason = int(pos[-1]), "truncated"
    else:
        stop, reason = int(end), "end"
    return Trace(pos, code, word, time, layout, n, stop, reason)


_IS_MARK = np.zeros(len(TYPES), dtype=bool)
_IS_MARK[list(_MARKS)] = True


def _times(code: np.ndarray, word: np.ndarray) -> np.ndarray:
    delta = ((word >> _DELTA_SHIFT[code]) & _DELTA_MASK[code]).astype(np.int64)
    delta[code == _TS_SHORT] += 4
    marks = _IS_MARK[code]
    if marks.any():
        mw = word[marks]
        # marker: rt = 1 and pl = 0 (rt is bit 9 on RDNA3, bit 7 on RDNA4; pl is bit 8 on both)
        rt_bit = np.where(code[marks] == _MARKS[1], np.uint64(7), np.uint64(9))
        is_marker = (((mw >> rt_bit) & np.uint64(1)) == 1) & (((mw >> np.uint64(8)) & np.uint64(1)) == 0)
        d = delta[marks]
        d[is_marker] = 0
        delta[marks] = d
    delta[code == _CDNA_MISC] *= 4
    time = np.cumsum(delta, dtype=np.int64)
    ts = np.flatnonzero((code == _CDNA_TS) & (((word >> np.uint64(4)) & np.uint64(0xFFF)) == 0))
    if len(ts):
        jumps = np.zeros(len(code), dtype=np.int64)
        adj = 0
        offset = None
        for j in ts.tolist():
            absolute = int(word[j] >> np.uint64(16))
            current = int(time[j]) + adj
            if offset is None:
                offset = absolute - current
                continue
            new = ((absolute - offset) & ~3) - 4
            jumps[j] += new - current
            adj += new - current
        time = time + np.cumsum(jumps)
        _overflow_windows(code, word, time, ts)
    return time


def _overflow_windows(code: np.ndarray, word: np.ndarray, time: np.ndarray, ts: np.ndarray) -> None:
    """Stamp the packets between a CDNA delta overflow and the timestamp after it with that timestamp's time.

    A CDNA_MISC packet carries the cycles since the previous MISC in an 8-bit field counted in 4-cycle
    units, so it can say at most 255 × 4 = 1020 cycles. When more time passes the SQ writes a MISC
    with misc_type 1 and the field saturated at 255, then the packets that were waiting, then an
    absolute CDNA_TIMESTAMP (specs/sqtt-pmc.md §5.2, §5.7; in the vendored gfx950 captures every one
    of the 1,033 misc_type-1 packets has delta 255 and is followed by a timestamp, with no MISC delta
    in between, and the timestamp always lies 1,054 cycles or more past the saturated count). The
    saturated 1020 is therefore only a lower bound: the packets written after it happened at the time
    the timestamp gives, not 1020 cycles after the previous MISC. Summing 1020 (as tinygrad's decoder
    does) put them up to the whole overflowed gap early: in the gfx950 gemm capture 11 wave ends came
    2,196-2,456 cycles early and so did the register writes in such windows. Each window gets the
    timestamp's (re-synchronised) time instead; a window that no timestamp closes keeps the lower bound.
    """
    misc = code == _CDNA_MISC
    overflow = misc & (((word >> np.uint64(13)) & np.uint64(7)) == 1)
    if not overflow.any():
        return
    ticking = misc & (((word >> np.uint64(4)) & np.uint64(0xFF)) != 0)
    stops = np.flatnonzero(overflow | ticking | (code == _CDNA_TS))   # what ends a window, looking back
    before = np.searchsorted(stops, ts) - 1                         # the last such packet before each timestamp
    for j, b in zip(ts.tolist(), before.tolist(), strict=True):
        k = int(stops[b]) if b >= 0 else -1
        if k >= 0 and overflow[k] and k + 1 < j:
            time[k + 1:j] = time[j]


def inst_op_name(arch: str, op: int) -> str:
    """The name of instruction-packet op ``op`` on ``arch``, or the op in hex."""
    return INST_OPS.get(arch, {}).get(op, f"0x{op:x}")


# -- encoder (synthetic streams for tests and examples) ------------------------------------------------

def encode(packets: list[tuple[str, dict[str, int]]], *, table: Table = RDNA3, pad: bool = True) -> bytes:
    """Pack ``(type name, fields)`` packets into a nibble stream; pad to a 32-byte multiple (zeros).

    Field values are masked to their width; bits not covered by a field or the encoding are 0.
    """
    by_name = {t.name: t for t in table.types}
    acc = 0
    bit = 0
    for name, fields in packets:
        t = by_name[name]
        v = t.enc_value
        for fname, hi, lo in t.fields:
            if fname in fields:
                v |= (fields[fname] & ((1 << (hi - lo + 1)) - 1)) << lo
        acc |= v << bit
        bit += t.bits
    nbytes = (bit + 7) // 8
    if pad:
        nbytes = ((nbytes + 16 + 31) // 32) * 32
    return acc.to_bytes(nbytes, "little")
