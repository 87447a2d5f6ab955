"""Per-wave instruction tables: time, stall, duration, category, PC, instruction (specs/sqtt-pmc.md §6.1, §8, §14.4).

RDNA (gfx11/gfx12): the instruction packets of a traced wave (INST without OTHER_* ops, VALUINST,
IMMEDIATE, IMMEDIATE_MASK bits, then WAVEEND for ``s_endpgm``) are matched to the program counter
walked through the code object's ``.text``: the wave starts at the first ``.text`` address,
``s_delay_alu``/``s_wait_alu`` are stepped over (they emit no packet), a gfx12 ``s_barrier_wait`` (no
packet of its own either) becomes a row of its own, a branch must coincide with an INST JUMP (taken:
PC += size + 4 × simm16) or JUMP_NO packet. When they disagree the PC column is left empty from there
on and a note says where mapping stopped. Instruction text comes from llvm-objdump when one that
knows the target is installed (:mod:`tinyhw.prof.disasm`), else from tinyhw's own decoder;
``disassembler`` in the document says which. INST packets of the other SIMD (OTHER_LDS/FLAT/VMEM ops:
the partner SIMD's waves, which are not instruction-traced) are listed under ``other_simd``.

CDNA (gfx9): one row per instruction issued for the wave (CDNA_ISSUE codes 2 and 3), the type
from the CDNA_INST packets, the PC walked through ``.text`` with JUMP/NEXT deciding branches
(inferred from the shared gfx950 capture, see :func:`_cdna`).

``issue`` is the packet time (rocprof's time + stall, §6.2); ``time`` (first attempt), ``stall``,
``duration``, ``category``, the wave's state timeline and the per-PC totals come from
:mod:`tinyhw.prof.timing` (definitions and their sources: docs/prof-timing.md).
"""

from __future__ import annotations

from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats.amdisa import SILENT, decode_at, isa_family, text_section
from tinyhw.formats.sqtt import inst_op_name
from tinyhw.prof.analyze import select, trace_of, waves_of
from tinyhw.prof.capture import Capture
from tinyhw.prof.disasm import objdump_text
from tinyhw.prof.timing import BARRIER_WAIT, apply_timing, category, per_pc

__all__ = ["insts_doc", "other_simd_records"]

_RDNA_INST = ("INST", "INST_RDNA4", "VALUINST", "IMMEDIATE", "IMMEDIATE_MASK", "WAVEEND", "WAVEEND_RDNA4")


def insts_doc(cap: Capture, kernel: str | None, se: int, wave: int) -> dict[str, Any]:
    """The ``prof insts`` document: one row per instruction of wave ``wave`` on SE ``se``."""
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
                           "notes": [], "rows": [], "other_simd": []}
    doc["other_simd"] = other_simd_records(s)
    if not s.itrace:
        doc["notes"].append(f"instruction tracing was off on shader engine {se}; only the wave's start and end exist")
        _finish(doc, w, cap.arch)
        return doc
    if cap.arch == "cdna":
        _cdna(cap, s, w, doc)
    else:
        _rdna(cap, kern, s, w, doc)
    _finish(doc, w, cap.arch)
    return doc


def _finish(doc: dict[str, Any], w: Any, arch: str) -> None:
    timing = apply_timing(doc["rows"], w.start, w.end, arch)
    doc.update(timing)
    doc["per_pc"] = per_pc(doc["rows"])


def other_simd_records(s: Any) -> list[dict[str, Any]]:
    """The INST packets of one RDNA stream that report an op of the other SIMD (OTHER_* ops): time, op, wave slot."""
    t = trace_of(s)
    if t.arch == "cdna":
        return []
    out = []
    for i in t.indices("INST", "INST_RDNA4").tolist():
        f = t.fields(i)
        op = inst_op_name(t.arch, f["op"])
        if op.startswith("OTHER_"):
            out.append({"time": int(t.time[i]), "type": op, "category": category(op), "wave": f["wave"]})
    return out


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
        doc["disassembler"] = how if names else _own_decoder(fam, how)
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
            row = _row(int(t.time[i]), kind)
            if pc is not None and text is not None:
                inst = decode_at(text[1], pc, fam)
                guard = 0
                while inst.name in SILENT and guard < 64:
                    if inst.name == "s_barrier_wait":      # holds the wave, emits no packet: a row of its own
                        bw = _row(None, BARRIER_WAIT)
                        bw.update(pc=f"0x{base + pc:x}", offset=pc,
                                  instruction=(names.get(text[0] + pc) if names else None) or inst.text)
                        doc["rows"].append(bw)
                    pc += inst.size
                    inst = decode_at(text[1], pc, fam)
                    guard += 1
                full = names.get(text[0] + pc) if names else None
                row.update(pc=f"0x{base + pc:x}", offset=pc, instruction=full or inst.text)
                pc = _advance(inst, kind, pc, doc, row["time"])
            doc["rows"].append(row)


def _row(issue: int | None, kind: str) -> dict[str, Any]:
    """A row with every key present (stable JSON): timing fields are filled by :func:`apply_timing`."""
    return {"time": None, "issue": issue, "stall": None, "duration": None, "category": None, "state": None,
            "pc": None, "offset": None, "instruction": None, "type": kind}


def _own_decoder(fam: str, how: str) -> str:
    if fam == "gfx11":
        return f"tinyhw's decoder: every instruction's mnemonic and operands ({how})"
    return (f"tinyhw: instruction lengths; mnemonics only for program control (SOPP), other instructions "
            f"as encoding + opcode ({how})")


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
    """gfx9: one row per instruction issued for the wave (CDNA_ISSUE), its type from CDNA_INST.

    (inferred from the shared gfx950 capture) In a CDNA_ISSUE packet a wave's 2-bit code is 2 for an
    instruction that also emits a CDNA_INST packet (in the same order) and 3 for one that does not
    (``s_waitcnt``, ``s_nop``); in the gemm capture every traced wave issues exactly the 58
    instructions from the entry to ``s_endpgm``, each CDNA_INST type matching its instruction's
    encoding, and the one conditional branch comes with a NEXT (not taken) packet. JUMP is read as
    taken. The PC column is dropped, with a note, as soon as this does not hold.
    """
    if w.cu != 0:
        doc["notes"].append("only CU 0 of each shader engine is instruction-traced; this wave ran elsewhere")
        return
    t = trace_of(s)
    end = w.end_index if w.end_index is not None else len(t) - 1
    idx = t.indices("CDNA_ISSUE", "CDNA_INST")
    idx = idx[(idx > w.start_index) & (idx <= end)]
    issues: list[tuple[int, int]] = []
    ops: list[str] = []
    for i in idx.tolist():
        f = t.fields(i)
        if f["simd"] != w.simd:
            continue
        if t.name(i) == "CDNA_ISSUE":
            code = (f["issue"] >> (2 * w.slot)) & 3
            if code in (2, 3):
                issues.append((int(t.time[i]), code))
        elif f["wave"] == w.slot:
            ops.append(inst_op_name("cdna", f["op"]))
    prog = cap.programs.get(s.kern)
    text = text_section(prog.lib) if prog and prog.lib else None
    with_inst = sum(code == 2 for _, code in issues)
    pc: int | None = 0
    if text is None:
        doc["notes"].append("the code object (.text) is not in the capture: PC and instruction text unavailable")
        pc = None
    elif with_inst != len(ops):
        doc["notes"].append(f"{with_inst} issue slots with an instruction packet but {len(ops)} CDNA_INST packets: "
                            "PC mapping skipped")
        pc = None
    names: dict[int, str] | None = None
    if pc is not None and prog is not None and text is not None:
        names, how = objdump_text(prog.lib, cap.target)
        doc["disassembler"] = how if names else _own_decoder("gfx9", how)
    base = (prog.base if prog else 0) + (text[0] if text else 0)
    k = 0
    for time, code in issues:
        kind = "ISSUE"
        if code == 2:
            kind = ops[k] if k < len(ops) else "ISSUE"
            k += 1
        row = _row(time, kind)
        if pc is not None and text is not None:
            inst = decode_at(text[1], pc, "gfx9")
            full = names.get(text[0] + pc) if names else None
            row.update(pc=f"0x{base + pc:x}", offset=pc, instruction=full or inst.text)
            if inst.is_branch:
                pc = inst.target() if kind == "JUMP" else pc + inst.size if kind == "NEXT" else None
                if pc is None:
                    doc["notes"].append(f"at time {time} the branch {inst.text} came without a JUMP/NEXT packet; "
                                        "PC mapping stopped there")
            else:
                pc += inst.size
        doc["rows"].append(row)
    rows = doc["rows"]
    if rows and rows[-1]["instruction"] is not None and not str(rows[-1]["instruction"]).startswith("s_endpgm"):
        doc["notes"].append("the last issued instruction is not s_endpgm: the gfx9 PC mapping is off for this wave")
