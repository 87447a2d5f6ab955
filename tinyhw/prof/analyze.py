"""Summary, packet listing and wave timelines of a capture (specs/sqtt-pmc.md §5, §9.5, §10, §14).

Everything here works on decoded :class:`tinyhw.formats.sqtt.Trace` objects and returns plain
JSON-ready documents; the CLI only formats them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyhw.errors import Refused
from tinyhw.formats.pmc import decode_pmc, derived_metrics
from tinyhw.formats.sqtt import NAMES, Trace, decode, inst_op_name
from tinyhw.prof.capture import Capture, SqttBlob

__all__ = ["HIDDEN", "Wave", "device_doc", "is_traced", "packets_doc", "select", "summary_doc", "waves_of", "waves_doc"]

# timing and padding packets, hidden from the packet listing unless --all
HIDDEN = frozenset({"NOP", "TS_DELTA_S8_W3", "TS_DELTA_S5_W2", "TS_DELTA_S5_W3", "TS_DELTA_SHORT", "TS_DELTA_OR_MARK",
                    "TS_WAVE_STATE", "TS_DELTA_S5_W2_RDNA4", "TS_DELTA_S5_W3_RDNA4", "TS_DELTA_OR_MARK_RDNA4",
                    "CDNA_MISC", "CDNA_TIMESTAMP"})
WAVESTARTS = ("WAVESTART", "WAVESTART_RDNA4", "CDNA_WAVESTART")
WAVEENDS = ("WAVEEND", "WAVEEND_RDNA4", "CDNA_WAVEEND")


def trace_of(s: SqttBlob) -> Trace:
    """The decoded stream, decoded once and kept with the capture (not in a global cache)."""
    if s.decoded is None:
        s.decoded = decode(s.blob)
    return s.decoded


def device_doc(cap: Capture) -> dict[str, Any]:
    """The capture's device as a JSON-ready dict: target, shader engines, CUs and the other properties."""
    p = cap.props
    arrays, per_se = int(p.get("array_count") or 0), int(p.get("simd_arrays_per_engine") or 0)
    return {
        "target": cap.target,
        "gfx_target_version": int(p.get("gfx_target_version") or 0),
        "arch": cap.arch,
        "shader_engines": arrays // per_se if per_se else None,
        "xccs": int(p.get("num_xcc") or 1),
        "cus": arrays * int(p.get("cu_per_simd_array") or 0) or None,
        "simds": int(p.get("simd_count") or 0) or None,
        "max_waves_per_simd": p.get("max_waves_per_simd"),
        "lds_kib": p.get("lds_size_in_kb"),
    }


def select(cap: Capture, kernel: str | None) -> list[tuple[int, int]]:
    """Dispatches matching ``kernel`` (a name, or the dispatch's index as listed by summary)."""
    runs = cap.dispatches()
    if kernel is None:
        return runs
    if kernel.isdigit() and int(kernel) < len(runs):
        return [runs[int(kernel)]]
    hit = [r for r in runs if cap.kernel_name(r[0]) == kernel]
    if not hit:
        names = ", ".join(f"{i}:{cap.kernel_name(k)}" for i, (k, _) in enumerate(runs))
        raise Refused(f"no kernel dispatch {kernel!r} in the capture", hint=f"choose one of {names}")
    return hit


def _se_doc(s: SqttBlob, t: Trace) -> dict[str, Any]:
    starts = len(t.indices(*WAVESTARTS))
    first, last = (int(t.time[0]), int(t.time[-1])) if len(t) else (None, None)
    return {
        "se": s.se, "itrace": s.itrace, "bytes": len(s.blob), "packets": len(t),
        "waves": starts, "wave_ends": len(t.indices(*WAVEENDS)),
        "complete_waves": sum(w.end is not None for w in waves_of(s)) if starts else 0,
        "first_time": first, "last_time": last, "span": None if first is None or last is None else last - first,
        "layout": t.layout, "by_type": dict(sorted(t.counts().items(), key=lambda kv: -kv[1])),
        "stop": {"nibble": t.stop, "of": t.nibbles, "reason": t.stop_reason},
    }


def summary_doc(cap: Capture) -> dict[str, Any]:
    """The ``prof summary`` document: device, and per kernel dispatch its SQTT streams per SE and PMC sums."""
    kernels = []
    for i, (kern, ex) in enumerate(cap.dispatches()):
        sq = [_se_doc(s, trace_of(s)) for s in sorted(cap.sqtt, key=lambda s: s.se)
              if (s.kern, s.exec_tag) == (kern, ex)]
        pmc: dict[str, Any] = {}
        derived: dict[str, float] = {}
        for pm in cap.pmc:
            if (pm.kern, pm.exec_tag) == (kern, ex):
                counters = decode_pmc(pm.blob, pm.samples)
                pmc = {c.name: {"block": c.block, "sum": c.sum, "max": c.max, "records": c.records} for c in counters}
                derived = derived_metrics(counters)
        kernels.append({"index": i, "kern": kern, "exec_tag": ex, "name": cap.kernel_name(kern), "sqtt": sq,
                        "pmc": pmc, "derived": derived})
    return {"source": cap.source, "device": device_doc(cap), "other_devices": cap.other_devices, "kernels": kernels}


def _fmt_fields(name: str, f: dict[str, int], arch: str) -> dict[str, Any]:
    out: dict[str, Any] = dict(f)
    if "op" in f and name in ("INST", "INST_RDNA4", "CDNA_INST"):
        out["op"] = inst_op_name(arch, f["op"])
    if name in ("WAVESTART", "WAVEEND"):
        out["cu"] = f["wgp"] + (f["sa"] << 3)
    elif name in ("WAVESTART_RDNA4", "WAVEEND_RDNA4"):
        out["cu"] = f["wgp"] + (f["sa"] << 4)
    elif name == "ALUEXEC":
        out["src"] = {0: "NONE", 1: "SALU", 2: "VALU", 3: "VALU_SALU"}[f["src"]]
    elif name == "VMEMEXEC":
        out["src"] = {0: "LDS", 1: "LDS_ALT", 2: "VMEM", 3: "VMEM_ALT"}[f["src"]]
    return out


def packets_doc(cap: Capture, kernel: str | None, se: int | None, show_all: bool, limit: int | None) -> dict[str, Any]:
    """The ``prof packets`` document: packets of the selected kernel and SE (timing packets with ``show_all``)."""
    out = []
    for kern, ex in select(cap, kernel):
        for s in sorted(cap.sqtt, key=lambda s: s.se):
            if (s.kern, s.exec_tag) != (kern, ex) or (se is not None and s.se != se):
                continue
            t = trace_of(s)
            arch = t.arch
            idx = range(len(t)) if show_all else np.flatnonzero(~np.isin(t.code, [NAMES.index(n) for n in HIDDEN
                                                                                     if n in NAMES]))
            rows: list[dict[str, Any]] = []
            for i in idx:
                if limit is not None and len(rows) >= limit:
                    break
                name = t.name(int(i))
                rows.append({"time": int(t.time[i]), "nibble": int(t.pos[i]), "type": name,
                             "fields": _fmt_fields(name, t.fields(int(i)), arch)})
            out.append({"kernel": cap.kernel_name(kern), "kern": kern, "exec_tag": ex, "se": s.se,
                        "shown": len(rows), "packets": len(t), "stop": t.describe_stop(), "rows": rows})
    if se is not None and not out:
        raise Refused(f"no sqtt stream for shader engine {se} in the selected kernel(s)")
    return {"source": cap.source, "all": show_all, "streams": out}


@dataclass
class Wave:
    """One wave seen in a trace: where it ran, when it started and ended, whether it was instruction-traced."""
    se: int
    cu: int
    simd: int
    slot: int
    start: int
    end: int | None
    start_index: int
    end_index: int | None
    itrace: bool

    @property
    def key(self) -> str:
        """The wave's name, ``SE/CU/SIMD/W``."""
        return f"SE{self.se}/CU{self.cu}/SIMD{self.simd}/W{self.slot}"


def _wave_keys(t: Trace, idx: np.ndarray) -> list[tuple[int, int, int]]:
    """(cu, simd, slot) of the wave packets at ``idx``."""
    rows = []
    for i in idx.tolist():
        name = t.name(i)
        f = t.fields(i)
        if name.startswith("CDNA"):
            rows.append((f["cu"] | (f["sh"] << 4), f["simd"], f["wave"]))
        else:
            rows.append((f["wgp"] + (f["sa"] << (4 if name.endswith("RDNA4") else 3)), f["simd"], f["wave"]))
    return rows


def waves_of(s: SqttBlob) -> list[Wave]:
    """Pair WAVESTART with the next WAVEEND of the same (cu, simd, wave slot); open waves end as None."""
    t = trace_of(s)
    idx = np.sort(np.concatenate([t.indices(*WAVESTARTS), t.indices(*WAVEENDS)]))
    keys = _wave_keys(t, idx)
    open_: dict[tuple[int, int, int], list[Wave]] = {}
    waves: list[Wave] = []
    for i, key in zip(idx.tolist(), keys, strict=True):
        if t.name(i) in WAVESTARTS:
            w = Wave(s.se, key[0], key[1], key[2], int(t.time[i]), None, i, None, s.itrace)
            waves.append(w)
            open_.setdefault(key, []).append(w)
        elif open_.get(key):
            w = open_[key].pop(0)
            w.end, w.end_index = int(t.time[i]), i
    return waves


def is_traced(cap: Capture, w: Wave) -> bool:
    """Instruction packets come from CU 0 only (all four SIMDs on gfx9, SIMD 0 on RDNA: §2.1, §3, §6.1)."""
    return bool(w.itrace and w.cu == 0 and (cap.arch == "cdna" or w.simd == 0))


def waves_doc(cap: Capture, kernel: str | None, se: int | None) -> dict[str, Any]:
    """The ``prof waves`` document: every wave of the selected kernel and SE with its start, end and cycles."""
    out = []
    for kern, ex in select(cap, kernel):
        for s in sorted(cap.sqtt, key=lambda s: s.se):
            if (s.kern, s.exec_tag) != (kern, ex) or (se is not None and s.se != se):
                continue
            for n, w in enumerate(waves_of(s)):
                out.append({"kernel": cap.kernel_name(kern), "kern": kern, "exec_tag": ex, "se": w.se, "index": n,
                            "cu": w.cu, "simd": w.simd, "wave": w.slot, "start": w.start, "end": w.end,
                            "cycles": None if w.end is None else w.end - w.start,
                            "traced": is_traced(cap, w)})
    return {"source": cap.source, "waves": out}
