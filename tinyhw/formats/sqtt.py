"""Decoder (and encoder, for synthetic streams) of AMD SQ thread trace byte streams.

Implements specs/sqtt-pmc.md §5.1 (nibble framing, classification by the low byte, layout switch),
§5.2 (timestamps; CDNA times by the rules of AMD's own gfx9 decoder instead, see :func:`_cdna_times`) with the
tables of :mod:`tinyhw.formats.sqtt_tables`.

The stream is a sequence of nibbles (low nibble of each byte first); a packet at nibble ``p`` is
decoded while ``p + 16`` nibbles exist (the 64-bit look-ahead window must be full), so the last
fewer-than-16 nibbles are never decoded (tinygrad's decoder stops at the same place; the reference
counts in tests/prof/test_prof_reference.py depend on it). Packet boundaries
are found table-driven: the packet length at every nibble position of a window is computed at once with
numpy, then the chain of packet starts is followed in one tight loop; fields and timestamps are computed
for all packets at once from their 64-bit windows. A LAYOUT_HEADER selects the table for what follows
(layout 3 RDNA3, 4 RDNA4, anything else CDNA); decoding starts with the RDNA3 table. The walk is one pass
whatever the headers do (:data:`WORK` counts it), so time and memory are linear in the stream.

Nothing here raises on bad input: any byte string decodes, and :attr:`Trace.stop` says where and
why decoding ended.
"""

from __future__ import annotations

from array import array
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


# The walk, table by table: row k of each array is table k (RDNA3, RDNA4, CDNA), indexed by a packet's low byte.
_TABLES = (RDNA3, LAYOUTS[4], CDNA)
_CODES = np.stack([_TABLE_ARRAYS[t.name][0] for t in _TABLES])
_NIBS = np.stack([_TABLE_ARRAYS[t.name][1] for t in _TABLES])
_HEADER = _CODES == _LAYOUT_CODE
_INDEX = {t.name: k for k, t in enumerate(_TABLES)}
_CHUNK = 1 << 16           # nibbles per walk window: the walk's own memory is a few times this, whatever the input
_FLUSH = 1 << 16           # packet starts gathered in Python before they move into a numpy block
_AT_HEADER = 1 << 40       # a window's "next" of a LAYOUT_HEADER: past any window, so the walk stops there

#: Work counters of :func:`decode` since import (tests compare them at two input sizes: the walk is linear).
WORK = {"window_nibbles": 0, "packets": 0, "table_switches": 0}


def _layout_at(data: bytes, p: int) -> int:
    """The layout field (bits 12:7) of the LAYOUT_HEADER at nibble ``p``."""
    b = p >> 1
    return (int.from_bytes(data[b:b + 3], "little") >> (4 * (p & 1) + 7)) & 0x3F


def _walk(data: bytes, low: np.ndarray, limit: int, zeros_from: int) -> tuple[np.ndarray, np.ndarray, int | None]:
    """(packet starts, table index of each, layout of the first LAYOUT_HEADER) of the whole stream, in one pass.

    Windows of :data:`_CHUNK` nibbles hold the next packet start of every nibble for one table (a Python list:
    a plain loop over it was measured faster than numpy pointer doubling on real traces). A LAYOUT_HEADER's
    entry stops the loop; its layout picks the table the walk goes on with, 16 nibbles on. Each table's current
    window is kept, so a stream that switches tables at every packet still computes each (table, window) once:
    the work is linear in the stream. From ``zeros_from`` on the stream is all zero padding, whose packets are
    evenly spaced.
    """
    stop = min(limit + 1, zeros_from)
    windows: dict[int, tuple[int, list[int]]] = {}
    out: list[int] = []
    runs_at, runs_base, runs_table = array("q"), array("q"), array("q")   # where each run of ``out`` starts
    blocks_pos: list[np.ndarray] = []
    blocks_tab: list[np.ndarray] = []

    def flush() -> None:
        if not out:
            return
        lengths = np.diff(np.append(np.frombuffer(runs_at, dtype=np.int64), len(out)))
        blocks_pos.append(np.array(out, dtype=np.int64) + np.repeat(np.frombuffer(runs_base, dtype=np.int64), lengths))
        blocks_tab.append(np.repeat(np.frombuffer(runs_table, dtype=np.int64).astype(np.uint8), lengths))
        out.clear()
        del runs_at[:], runs_base[:], runs_table[:]

    t, layout, p = 0, None, 0
    while p < stop:
        w0 = p - p % _CHUNK
        win = windows.get(t)
        if win is None or win[0] != w0:
            w1 = min(w0 + _CHUNK, stop)
            seg = low[w0:w1]
            local = np.arange(w1 - w0, dtype=np.int64) + _NIBS[t][seg]
            local[_HEADER[t][seg]] = _AT_HEADER
            win = windows[t] = (w0, local.tolist())
            WORK["window_nibbles"] += w1 - w0
        nxt = win[1]
        end = len(nxt)
        runs_at.append(len(out))
        runs_base.append(w0)
        runs_table.append(t)
        append = out.append
        q = p - w0
        while q < end:
            append(q)
            q = nxt[q]
        if q == _AT_HEADER:   # the last packet appended is a LAYOUT_HEADER
            h = w0 + out[-1]
            lay = _layout_at(data, h)
            layout = lay if layout is None else layout
            new = _INDEX[LAYOUTS.get(lay, CDNA).name]
            WORK["table_switches"] += new != t
            t, p = new, h + 16
        else:
            p = w0 + q
        if len(out) >= _FLUSH:
            flush()
    flush()
    if stop <= p <= limit:   # the zero padding
        blocks_pos.append(np.arange(p, limit + 1, int(_NIBS[t][0]), dtype=np.int64))
        blocks_tab.append(np.full(len(blocks_pos[-1]), t, dtype=np.uint8))
    if not blocks_pos:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8), layout
    pos = np.concatenate(blocks_pos) if len(blocks_pos) > 1 else blocks_pos[0]
    tab = np.concatenate(blocks_tab) if len(blocks_tab) > 1 else blocks_tab[0]
    WORK["packets"] += len(pos)
    return pos, tab, layout


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
    """Decode one SE's SQTT byte stream (any bytes; never raises); time and memory linear in its length."""
    data = bytes(data)
    raw = np.frombuffer(data, dtype=np.uint8)
    buf = np.zeros(len(raw) + 9, dtype=np.uint8)
    buf[:len(raw)] = raw
    n = 2 * len(data)
    limit = n - WINDOW
    # low byte of a packet starting at every nibble offset
    low = np.empty(n + 1, dtype=np.uint8)
    low[0:n:2] = raw
    low[1:n - 1:2] = (raw[:-1] >> 4) | ((raw[1:] & 15) << 4)
    if n:
        low[n - 1] = raw[-1] >> 4
    low[n] = 0
    nz = np.flatnonzero(raw)
    zeros_from = 2 * (int(nz[-1]) + 1) if len(nz) else 0   # nibble offset where the zero padding starts
    del nz
    pos, tab, layout = _walk(data, low, limit, zeros_from)
    lows = low[pos]
    code = _CODES[tab, lows]
    end = int(pos[-1]) + int(_NIBS[tab[-1], lows[-1]]) if len(pos) else 0
    del low, lows, tab
    word = _windows(buf, pos)
    time = _times(code, word)
    if len(pos) and end > n:
        stop, reason = int(pos[-1]), "truncated"
    else:
        stop, reason = int(end), "end"
    return Trace(pos, code, word, time, layout, n, stop, reason)


_IS_MARK = np.zeros(len(TYPES), dtype=bool)
_IS_MARK[list(_MARKS)] = True
_IS_CDNA = np.array([t.name.startswith("CDNA_") for t in TYPES], dtype=bool)


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
    cdna = _IS_CDNA[code]
    if not cdna.any():
        return np.cumsum(delta, dtype=np.int64)
    delta[cdna] *= 4
    return _cdna_times(code, word, delta)


def _cdna_times(code: np.ndarray, word: np.ndarray, delta: np.ndarray) -> np.ndarray:
    """Times of a CDNA stream, by the rules of AMD's own gfx9 decoder (ROCm rocprof-trace-decoder, whose source is
    public in ROCm/rocm-systems: its gfx9 token generator), the authority on what the hardware's fields mean:

    * Every token adds its delta in 4-cycle ticks before taking its time: MISC its 8-bit field (11:4), every other
      token the one bit at bit 4 (:mod:`tinyhw.formats.sqtt_tables`). tinygrad's decoder (the spec's §5.2 rule)
      adds only the MISC deltas, so each tick carried by a WAVESTART, WAVEEND, REG, INST, ISSUE ... packet was lost
      until the next re-synchronisation: in the gfx950 gemm capture 942 of the 1,024 wave starts came 4-56 cycles
      early, the very drift seen against AMD's decoder. (The captures alone cannot settle it: between two
      re-synchronisations nothing absolute is written.)
    * A MISC with misc_type 1 (TIME_RESET: the 8-bit delta overflowed, so it is saturated at 255 and only a lower
      bound) is closed by the next TIMESTAMP, unless another TIME_RESET comes first. The tokens between the two were
      written after the unknown gap, so they take the timestamp's time plus their own deltas; the timestamp adds
      nothing. The first such timestamp anchors the absolute clock: base = absolute - running time + 4; every one
      sets the running time to (absolute - base) & ~3 when absolute > base. So the first anchor moves time back
      4 cycles; later ones equal tinygrad's ((absolute - offset) & ~3) - 4. A TIMESTAMP that closes no TIME_RESET
      re-synchronises nothing (tinygrad's rule re-synchronised at every one whose reserved bits are 0; in the
      vendored captures every timestamp closes one). Summing the saturated 1020 cycles instead (tinygrad's rule)
      put the tokens of such a window up to the whole gap early: 11 wave ends of the gfx950 gemm capture by
      2.2-2.5k cycles.
    * AMD's decoder emits neither the TIME_RESET nor the TIMESTAMP; tinyhw keeps both, each at the re-based time
      (the window's start), so times stay non-decreasing across the first anchor's 4-cycle step back.
    """
    misc = code == _CDNA_MISC
    resets = np.flatnonzero(misc & (((word >> np.uint64(13)) & np.uint64(7)) == 1))
    stamps = np.flatnonzero(code == _CDNA_TS)
    windows: list[tuple[int, int]] = []   # (TIME_RESET, the TIMESTAMP that closes it)
    if len(resets) and len(stamps):
        nxt = np.searchsorted(stamps, resets, side="right")
        for k, (r, s) in enumerate(zip(resets.tolist(), nxt.tolist(), strict=True)):
            if s < len(stamps) and (k + 1 == len(resets) or stamps[s] < resets[k + 1]):
                windows.append((r, int(stamps[s])))
    for _, j in windows:
        delta[j] = 0
    time = np.cumsum(delta, dtype=np.int64)
    if not windows:
        return time
    jumps = np.zeros(len(code), dtype=np.int64)
    adj, base = 0, 0
    for r, j in windows:
        now = int(time[r]) + adj   # the running time at the TIME_RESET (its saturated delta included)
        absolute = int(word[j] >> np.uint64(16))
        if base == 0:
            base = absolute - now + 4
        new = (absolute - base) & ~3 if absolute > base else now
        jumps[r] += new - now   # the TIME_RESET itself too: its own time is only a lower bound
        adj += new - now
    return time + np.cumsum(jumps)


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
