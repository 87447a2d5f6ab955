"""Per-wave instruction tables: Timestamp | PC | Instruction | Type | Duration (specs/sqtt-pmc.md §6.1, §14.4).

RDNA (gfx11/gfx12): the instruction packets of a traced wave (INST without OTHER_* ops, VALUINST,
IMMEDIATE, IMMEDIATE_MASK bits, then WAVEEND for ``s_endpgm``) are matched to the program counter
walked through the code object's ``.text``: the wave starts at the first ``.text`` address,
``s_delay_alu``/``s_wait_alu``/``s_barrier_wait`` are stepped over (they emit no packet), a branch
must coincide with an INST JUMP (taken: PC += size + 4 × simm16) or JUMP_NO packet. When they disagree
the PC column is left empty from there on and a note says where mapping stopped. Instruction text
comes from llvm-objdump when one that knows the target is installed (:mod:`tinyhw.prof.disasm`),
else from tinyhw's own decoder; ``disassembler`` in the document says which.

CDNA (gfx9): CDNA_INST packets give the type; the PC is not reconstructed (the baseline trace has
no taken/not-taken information that this decoder uses), which the output says.

Timestamp is the packet time (rocprof's time + stall, §6.2); Duration is the cycles until the same
wave's next instruction packet (issue-to-issue; the last row: until WAVEEND), not rocprof's latency.
"""

from __future__ import annotations

from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats.amdisa import SILENT, decode_at, isa_family, text_section
from tinyhw.formats.sqtt import inst_op_name
from tinyhw.prof.analyze import select, trace_of, waves_of
from tinyhw.prof.capture import Capture
from tinyhw.prof.disasm import objdump_text

__all__ = ["insts_doc"]

_RDNA_INST = ("INST", "INST_RDNA4", "VALUINST", "IMMEDIATE", "IMMEDIATE_MASK", "WAVEEND", "WAVEEND_RDNA4")


def insts_doc(cap: Capture, kernel: str | None, se: int, wave: int) -> dict[str, Any]:
    runs = select(cap, kernel)
    kern, ex = runs[0]
    blobs = [s for s in cap.sqtt if (s.kern, s.exec_tag) == (kern, ex) and s.se == se]
    if not blobs:
        raise Refused(f"no sqtt stream for shader engine {se} of kernel {cap.kernel_name(kern)}")
    s = blobs[0]
    waves = waves_of(s)
    if not 0 <= wave < len(waves):
        have = f"--wave takes 0..{len(waves) - 1}" if waves else "it ran no wave"
        raise Refused(f"shader engine {se} has {len(waves)} wave(s); {have}",
                      hint="list them with `tinyhw prof waves FILE --se N`")
    w = waves[wave]
    doc: dict[str, Any] = {"source": cap.source, "kernel": cap.kernel_name(kern), "kern": kern, "exec_tag": ex,
                           "se": se, "wave_index": wave, "cu": w.cu, "simd": w.simd, "wave": w.slot,
                           "start": w.start, "end": w.end, "cycles": None if w.end is None else w.end - w.start,
                           "notes": [], "rows": []}
    if not s.itrace:
        doc["notes"].append(f"instruction tracing was off on shader engine {se}; only the wave's start and end exist")
        return doc
    if cap.arch == "cdna":
        _cdna(cap, s, w, doc)
    else:
        _rdna(cap, kern, s, w, doc)
    rows = doc["rows"]
    for a, b in zip(rows, rows[1:], strict=False):
        a["duration"] = b["time"] - a["time"]
    if rows:
        rows[-1]["duration"] = 0 if w.end is None else max(w.end - rows[-1]["time"], 0)
    return doc


def _rdna(cap: Capture, kern: int, s: Any, w: Any, doc: dict[str, Any]) -> None:
    if (w.cu, w.simd) != (0, 0):
        doc["notes"].append("only CU 0 SIMD 0 of each shader engine is instruction-traced; this wave ran elsewhere")
        return
    t = trace_of(s)
    arch = t.arch
    prog = cap.programs.get(kern)
    text = text_section(prog.lib) if prog and prog.lib else None
    if text is None:
        doc["notes"].append("the code object (.text) is not in the capture: PC and instruction text unavailable")
    fam = isa_family(cap.target)
    base = (prog.base if prog else 0) + (text[0] if text else 0)
    names: dict[int, str] | None = None
    if text is not None and prog is not None:
        names, how = objdump_text(prog.lib, cap.target)
        doc["disassembler"] = how if names else (
            f"tinyhw: instruction lengths; mnemonics only for program control (SOPP), other instructions "
            f"as encoding + opcode ({how})")
    pc: int | None = 0 if text else None
    end = w.end_index if w.end_index is not None else len(t) - 1
    idx = t.indices(*_RDNA_INST)
    idx = idx[(idx > w.start_index) & (idx <= end)]
    for i in idx.tolist():
        name = t.name(i)
        f = t.fields(i)
        if name.startswith("WAVEEND"):
            if i != w.end_index:
                continue
            kinds = ["ENDPGM"]
        elif name == "IMMEDIATE_MASK":
            if not (f["mask"] >> w.slot) & 1:
                continue
            kinds = ["IMMEDIATE"]
        else:
            if f["wave"] != w.slot:
                continue
            if name.startswith("INST"):
                op = inst_op_name(arch, f["op"])
                if op.startswith("OTHER_"):
                    continue
                kinds = [op]
            else:
                kinds = ["VALU" if name == "VALUINST" else "IMMEDIATE"]
        for kind in kinds:
            row: dict[str, Any] = {"time": int(t.time[i]), "pc": None, "offset": None, "instruction": None,
                                   "type": kind, "duration": None}
            if pc is not None and text is not None:
                inst = decode_at(text[1], pc, fam)
                guard = 0
                while inst.text in SILENT and guard < 64:
                    pc += inst.size
                    inst = decode_at(text[1], pc, fam)
                    guard += 1
                full = names.get(text[0] + pc) if names else None
                row.update(pc=f"0x{base + pc:x}", offset=pc, instruction=full or inst.text)
                pc = _advance(inst, kind, pc, doc, row["time"])
            doc["rows"].append(row)


def _advance(inst: Any, kind: str, pc: int, doc: dict[str, Any], time: int) -> int | None:
    if kind == "ENDPGM":
        if not inst.is_endpgm:
            doc["notes"].append(f"at time {time} the wave ended but the walked PC 0x{pc:x} holds {inst.text}; "
                                "PC mapping is off")
        return pc
    if inst.is_branch:
        if kind == "JUMP":
            return inst.target()
        if kind == "JUMP_NO":
            return pc + inst.size
        doc["notes"].append(f"at time {time} a {kind} packet met the branch {inst.text} at offset 0x{pc:x}; "
                            "PC mapping stopped there")
        return None
    if kind in ("JUMP", "JUMP_NO"):
        doc["notes"].append(f"at time {time} a {kind} packet met {inst.text} (not a branch) at offset 0x{pc:x}; "
                            "PC mapping stopped there")
        return None
    return pc + inst.size


def _cdna(cap: Capture, s: Any, w: Any, doc: dict[str, Any]) -> None:
    if w.cu != 0:
        doc["notes"].append("only CU 0 of each shader engine is instruction-traced; this wave ran elsewhere")
        return
    t = trace_of(s)
    doc["notes"].append("gfx9 traces: PC and instruction text are not reconstructed (type from CDNA_INST only)")
    end = w.end_index if w.end_index is not None else len(t) - 1
    idx = t.indices("CDNA_INST")
    idx = idx[(idx > w.start_index) & (idx <= end)]
    for i in idx.tolist():
        f = t.fields(i)
        if f["wave"] != w.slot or f["simd"] != w.simd:
            continue
        doc["rows"].append({"time": int(t.time[i]), "pc": None, "offset": None, "instruction": None,
                            "type": inst_op_name("cdna", f["op"]), "duration": None})
