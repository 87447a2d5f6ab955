"""Decoder (and encoder, for synthetic streams) of AMD SQ thread trace byte streams.

Implements specs/sqtt-pmc.md §5.1 (nibble framing, classification by the low byte, layout switch),
§5.2 (timestamps) with the tables of :mod:`tinyhw.formats.sqtt_tables`.

The stream is a sequence of nibbles (low nibble of each byte first); a packet at nibble ``p`` is
decoded while ``p + 16`` nibbles exist (the 64-bit look-ahead window must be full), so the last
fewer-than-16 nibbles are never decoded (they are padding in a complete trace). Packet boundaries
are found table-driven: the packet length at every nibble position is computed at once with numpy
and the boundary chain is then followed in one tight loop; fields and timestamps are computed for all
packets at once from their 64-bit windows. A LAYOUT_HEADER selects the table for what follows
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
        return {3: "rdna3", 4: "rdna4"}.get(self.layout, "cdna") if self.layout is not None else "rdna3"

    def name(self, i: int) -> str:
        return NAMES[int(self.code[i])]

    def fields(self, i: int) -> dict[str, int]:
        """Every field of packet ``i`` (bits beyond the first 64 of a 72-bit packet are not kept)."""
        t = TYPES[int(self.code[i])]
        w = int(self.word[i])
        return {n: (w >> lo) & ((1 << (hi - lo + 1)) - 1) for n, hi, lo in t.fields if hi < 64}

    def counts(self) -> dict[str, int]:
        c = np.bincount(self.code.astype(np.int64), minlength=len(TYPES))
        return {NAMES[i]: int(n) for i, n in enumerate(c) if n}

    def indices(self, *names: str) -> np.ndarray:
        return np.flatnonzero(np.isin(self.code, [_CODE[n] for n in names]))

    def field_array(self, name: str, idx: np.ndarray) -> np.ndarray:
        """Field ``name`` of the packets at ``idx`` (0 where a type lacks it)."""
        shift, mask = _FIELD_CACHE.get(name) or _FIELD_CACHE.setdefault(name, _field_arrays(name))
        c = self.code[idx]
        return ((self.word[idx] >> shift[c]) & mask[c]).astype(np.int64)

    def describe_stop(self) -> str:
        if self.stop_reason == "truncated":
            return f"stream truncated: the packet at nibble {self.stop} runs past the end ({self.nibbles} nibbles)"
        return f"decoded {len(self)} packets; stopped at nibble {self.stop} of {self.nibbles} (end of stream)"


_FIELD_CACHE: dict[str, tuple[np.ndarray, np.ndarray]] = {}


def _nibbles(data: bytes) -> np.ndarray:
    b = np.frombuffer(data, dtype=np.uint8)
    nib = np.empty(2 * len(b) + WINDOW + 2, dtype=np.uint8)
    nib[0:2 * len(b):2] = b & 15
    nib[1:2 * len(b):2] = b >> 4
    nib[2 * len(b):] = 0
    return nib


def _walk(nxt: list[int], start: int, limit: int) -> list[int]:
    out = []
    append = out.append
    p = start
    while p <= limit:
        append(p)
        p = nxt[p]
    return out


def _windows(nib: np.ndarray, pos: np.ndarray) -> np.ndarray:
    w = np.zeros(len(pos), dtype=np.uint64)
    for k in range(WINDOW):
        w |= nib[pos + k].astype(np.uint64) << np.uint64(4 * k)
    return w


def decode(data: bytes) -> Trace:
    """Decode one SE's SQTT byte stream (any bytes; never raises)."""
    nib = _nibbles(data)
    n = 2 * len(data)
    limit = n - WINDOW
    low = (nib[:-1].astype(np.int64) | (nib[1:].astype(np.int64) << 4))
    table, layout = RDNA3, None
    parts_pos: list[np.ndarray] = []
    parts_code: list[np.ndarray] = []
    start = 0
    ramp = np.arange(len(low), dtype=np.int64)
    end = 0
    while True:
        codes_t, nibs_t = _TABLE_ARRAYS[table.name]
        if start <= limit and codes_t[low[start]] == _LAYOUT_CODE:
            # a header at the segment start: take it alone and pick the table before walking on
            lay = int(_windows(nib, np.array([start]))[0] >> np.uint64(7)) & 0x3F
            layout = lay if layout is None else layout
            parts_pos.append(np.array([start], dtype=np.int64))
            parts_code.append(np.array([_LAYOUT_CODE], dtype=np.int16))
            end = start + 16
            table, start = LAYOUTS.get(lay, CDNA), start + 16
            codes_t, nibs_t = _TABLE_ARRAYS[table.name]
        nxt = (ramp + nibs_t[low]).tolist()
        pos = np.array(_walk(nxt, start, limit), dtype=np.int64)
        code = codes_t[low[pos]] if len(pos) else np.zeros(0, dtype=np.int16)
        # a LAYOUT_HEADER whose layout selects another table ends this segment
        hdr = np.flatnonzero(code == _LAYOUT_CODE)
        switch = None
        for h in hdr:
            lay = int(_windows(nib, pos[h:h + 1])[0] >> np.uint64(7)) & 0x3F
            if layout is None:
                layout = lay
            new = LAYOUTS.get(lay, CDNA)
            if new is not table:
                switch = (int(h), new)
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
    pos = np.concatenate(parts_pos) if parts_pos else np.zeros(0, dtype=np.int64)
    code = np.concatenate(parts_code) if parts_code else np.zeros(0, dtype=np.int16)
    word = _windows(nib, pos)
    time = _times(code, word)
    if len(pos) and end > n:
        stop, reason = int(pos[-1]), "truncated"
    else:
        stop, reason = int(end), "end"
    return Trace(pos, code, word, time, layout, n, stop, reason)


def _times(code: np.ndarray, word: np.ndarray) -> np.ndarray:
    delta = ((word >> _DELTA_SHIFT[code]) & _DELTA_MASK[code]).astype(np.int64)
    delta[code == _TS_SHORT] += 4
    marks = np.isin(code, _MARKS)
    if marks.any():
        mw = word[marks]
        is_marker = (((mw >> np.uint64(9)) & np.uint64(1)) == 1) & (((mw >> np.uint64(8)) & np.uint64(1)) == 0)
        # RDNA4 keeps rt at bit 7
        r4 = code[marks] == _MARKS[1]
        is_marker4 = (((mw >> np.uint64(7)) & np.uint64(1)) == 1) & (((mw >> np.uint64(8)) & np.uint64(1)) == 0)
        sel = np.where(r4, is_marker4, is_marker)
        d = delta[marks]
        d[sel] = 0
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
    return time


def inst_op_name(arch: str, op: int) -> str:
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
