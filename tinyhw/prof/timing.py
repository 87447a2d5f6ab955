"""Per-instruction timing of a traced wave: first attempt, stall, duration, category; wave state timeline.

The definitions (docs/prof-timing.md gives them with their sources) follow AMD's thread-trace decoder
(rocprof-trace-decoder, as shown by rocprofv3 and ROCprof Compute Viewer) for RDNA:

- an instruction's packet time is when it issued, which is the decoder's ``time + stall``
  (specs/sqtt-pmc.md §6.2);
- ``time`` is the cycle the wave first attempted the instruction, ``stall`` the cycles it could not
  issue it, ``duration`` = stall + execution (gfx10+; on gfx9 stall + issue time, §8);
- idle is the gap between one instruction's end (time + duration) and the next one's time.

The packets do not say when a wave began to attempt an instruction; tinyhw models it (modelled, not
measured): an instruction that holds the wave by itself -- the waits (``s_waitcnt`` and the gfx12
``s_wait_*`` counters), ``s_nop``/``s_sleep``/``s_clause`` and the other immediates, the barriers,
``s_endpgm`` -- is attempted as soon as the previous instruction's execution ended, so its whole gap
is its stall; any other instruction is attempted when it issued (the gap before it is idle:
dependencies, arbitration, instruction fetch). Execution is the cost class the packet names (the
``_N`` suffix of VALUT_4, FLAT_WR_3, ... in cycles), else 1 cycle; on gfx9 the 4-cycle issue slot
(the gfx9 duration is stall + issue time, and gfx9 packet times have a 4-cycle resolution). On the
gfx1200 plus capture this gives the 14 times rocprof-trace-decoder reported (§6.2) exactly.

Barriers hold the wave until the other waves arrive: an RDNA3 ``s_barrier`` (its packet is written
when the wave arrives) and a gfx12 ``s_barrier_wait`` (no packet of its own) last until the next
instruction issues. ``s_endpgm`` lasts from its attempt to the wave's end (the wave waits for its
outstanding memory operations).

The state timeline covers the wave's lifetime exactly: ``executing`` (an instruction's execution
cycles), ``waiting`` (the stall of a counter wait), ``stalled`` (any other stall: barrier, nop,
sleep, an immediate whose text is unknown); the time ``s_endpgm`` spends before the wave ends counts
as ``waiting`` (the implicit wait for outstanding memory operations) and ``idle`` (no instruction in
flight: before the first attempt and between instructions).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["CATEGORIES", "STATES", "apply_timing", "category", "exec_cycles", "is_counter_wait", "per_pc"]

CATEGORIES = ("SALU", "VALU", "SMEM", "VMEM", "LDS", "branch", "message", "immediate")
STATES = ("executing", "waiting", "stalled", "idle")
_SUFFIX = re.compile(r"_(\d+)$")
BARRIER_WAIT = "BARRIER_WAIT"        # the row kind of a gfx12 s_barrier_wait (no packet of its own)
CDNA_ISSUE_CYCLES = 4   # a gfx9 SIMD is offered one instruction issue every 4 cycles (wave64 on SIMD16)
_HOLDING = {"IMMEDIATE", "ISSUE", "ENDPGM", "BARRIER", BARRIER_WAIT}   # attempted when the previous one ended


def category(kind: str, mnemonic: str | None = None) -> str:
    """The instruction category of a row of packet kind ``kind`` (and mnemonic, when known)."""
    k = kind.removeprefix("OTHER_")
    if kind in ("IMMEDIATE", "ISSUE", "ENDPGM", "BARRIER", BARRIER_WAIT) or k == "PC" or (
            mnemonic or "").startswith("s_endpgm"):
        return "immediate"
    if k in ("JUMP", "JUMP_NO", "CALL", "NEXT"):
        return "branch"
    if k in ("MESSAGE", "MSG", "OTHER_MSG") or kind == "OTHER_MSG":
        return "message"
    if k.startswith("SMEM"):
        return "SMEM"
    if k.startswith(("LDS",)):
        return "LDS"
    if k.startswith(("FLAT", "SGMEM", "VMEM", "BUF")):
        return "VMEM"
    if k.startswith(("VALU", "VINTERP", "WMMA")):
        return "VALU"
    if mnemonic and mnemonic.startswith("v_"):
        return "VALU"
    return "SALU"   # SALU*, SALU_WR_EXEC, BARRIER_SIGNAL/JOIN (scalar ops), anything unnamed


def exec_cycles(kind: str, arch: str = "rdna3") -> int:
    """Execution cycles of a packet kind on ``arch``: RDNA its ``_N`` cost class, else 1; CDNA (gfx9) the
    4-cycle issue slot (the ``_32``/``_64`` of CDNA kinds are operand widths, not cycles)."""
    if arch == "cdna":
        return CDNA_ISSUE_CYCLES
    m = _SUFFIX.search(kind)
    return int(m.group(1)) if m else 1


def is_counter_wait(mnemonic: str | None) -> bool:
    """True for ``s_waitcnt*`` and the gfx12 counter waits ``s_wait_loadcnt`` etc. (not ``s_wait_alu``)."""
    if not mnemonic:
        return False
    return mnemonic.startswith("s_waitcnt") or (mnemonic.startswith("s_wait_") and mnemonic != "s_wait_alu")


def _mnemonic(row: dict[str, Any]) -> str | None:
    text = row.get("instruction")
    return str(text).split()[0] if text else None


def apply_timing(rows: list[dict[str, Any]], start: int, end: int | None, arch: str = "rdna3") -> dict[str, Any]:
    """Fill ``time``, ``stall``, ``duration``, ``category`` of every row (``issue`` set, in order); return the
    wave's state timeline and totals. A ``BARRIER_WAIT`` row's ``issue`` may be None (filled here)."""
    prev_end: int | None = None
    n = len(rows)
    for k, r in enumerate(rows):
        kind = r["type"]
        mn = _mnemonic(r)
        nxt = next((rows[j]["issue"] for j in range(k + 1, n) if rows[j]["issue"] is not None), None)
        if kind == BARRIER_WAIT:
            attempt = prev_end if prev_end is not None else start
            release = nxt if nxt is not None else (end if end is not None else attempt + 1)
            r["issue"] = max(attempt, release - 1)
        issue = r["issue"]
        if kind in _HOLDING and prev_end is not None:
            attempt = min(prev_end, issue)
        else:
            attempt = issue
        stall = issue - attempt
        if kind == "ENDPGM" or (mn or "").startswith("s_endpgm"):
            stall, attempt = 0, min(attempt, issue)
            duration = max((end if end is not None else issue) - attempt, 0)
        elif kind == "BARRIER" and nxt is not None:
            duration = max(nxt - attempt, stall + 1)
        else:
            duration = stall + exec_cycles(kind, arch)
        r.update(time=attempt, stall=stall, duration=duration, category=category(kind, mn))
        r["state"] = ("waiting" if is_counter_wait(mn) or _is_end(r) else
                      "stalled" if stall or kind in ("BARRIER", BARRIER_WAIT) else "executing")
        prev_end = attempt + duration
    return _timeline(rows, start, end)


def _is_end(r: dict[str, Any]) -> bool:
    return r["type"] == "ENDPGM" or (_mnemonic(r) or "").startswith("s_endpgm")


def _timeline(rows: list[dict[str, Any]], start: int, end: int | None) -> dict[str, Any]:
    stop = end if end is not None else (max((r["time"] + r["duration"] for r in rows), default=start))
    segs: list[list[Any]] = []
    cursor = start

    def put(state: str, a: int, b: int) -> None:
        nonlocal cursor
        a, b = max(a, cursor), min(b, stop)
        if b <= a:
            return
        if a > cursor:
            put("idle", cursor, a)
        if segs and segs[-1][0] == state and segs[-1][2] == a:
            segs[-1][2] = b
        else:
            segs.append([state, a, b])
        cursor = b

    for k, r in enumerate(rows):
        limit = rows[k + 1]["time"] if k + 1 < len(rows) else stop
        hold = "waiting" if r["state"] == "waiting" else "stalled"
        exec_end = r["time"] + r["duration"]
        if _is_end(r):
            put("waiting", r["time"], stop)
            continue
        if r["type"] in ("BARRIER", BARRIER_WAIT):
            put("stalled", r["time"], min(exec_end, limit) - 1)
            put("executing", cursor, min(exec_end, limit))
            continue
        put(hold, r["time"], r["issue"])
        put("executing", r["issue"], min(exec_end, limit))
    put("idle", cursor, stop)
    totals = dict.fromkeys(STATES, 0)
    for state, a, b in segs:
        totals[state] += b - a
    return {"timeline": [{"state": s, "start": a, "end": b} for s, a, b in segs], "states": totals,
            "lifetime": None if end is None else end - start}


def per_pc(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Totals per program counter: hits, total and mean duration, total stall (rows without a PC left out)."""
    out: dict[int, dict[str, Any]] = {}
    for r in rows:
        if r["offset"] is None:
            continue
        e = out.setdefault(r["offset"], {"pc": r["pc"], "offset": r["offset"], "instruction": r["instruction"],
                                         "category": r["category"], "hits": 0, "total_duration": 0,
                                         "total_stall": 0})
        e["hits"] += 1
        e["total_duration"] += r["duration"]
        e["total_stall"] += r["stall"]
    for e in out.values():
        e["mean_duration"] = round(e["total_duration"] / e["hits"], 2)
    return [out[k] for k in sorted(out)]
