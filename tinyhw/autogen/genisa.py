"""Generate the gfx11 (RDNA3) opcode table ``tinyhw/formats/rdna3_ops.py`` from LLVM's disassembler.

Usage (the committed file was made exactly like this)::

    apt-get install llvm-19                    # gives /usr/bin/llvm-mc-19
    python -m tinyhw.autogen.genisa            # writes tinyhw/formats/rdna3_ops.py

For every encoding of the RDNA3 ISA reference's "Microcode Formats" chapter (specs/amd-compute.md §5.2:
the fixed bits that select the encoding and where its OP field lies) the generator builds one
instruction word per opcode value, with every register field set to a distinct register number, and
asks ``llvm-mc-19 --disassemble -mcpu=gfx1100 -show-encoding`` what it is. An opcode LLVM calls an
invalid encoding (or ``v_illegal``) is left out. From the printed operands the generator records, per
opcode, the mnemonic and the operand template: which field each operand comes from, its register kind
and width (``v[16:17]`` from VDST=16 is ``vdst:v2``), implicit operands (``vcc_lo``) as ``=text``, and a
literal constant as ``lit``. So the table is a fact sheet (names and operand shapes), never behaviour;
what each instruction does is written from the ISA reference in :mod:`tinyhw.mocks.rdna3`.

The decoder in :mod:`tinyhw.formats.amdisa` renders instruction text from this table; its tests check
that text against ``llvm-objdump-19`` on every committed gfx11 code object, and check the opcode numbers
the spec lists (§5.4) against the table.
"""

from __future__ import annotations

import re
import shutil
import struct
import subprocess
import sys
from pathlib import Path

COMMAND = "python -m tinyhw.autogen.genisa"
# the table is data for the pure decoder in tinyhw.formats (which may import nothing but errors), so it is
# written beside it; this generator imports nothing from tinyhw
OUT = Path(__file__).resolve().parent.parent / "formats" / "rdna3_ops.py"
LIT = 0x12345678

# canonical field values: register numbers that name the field they came from
_S = {"sdst": 16, "ssrc0": 32, "ssrc1": 48}
_V = {"vdst": 16, "src0": 32, "src1": 48, "src2": 64, "sdst": 8}


def _pick(*choices: list[int]) -> list[tuple[int, ...]]:
    """Every combination of per-field choices, the fullest (first choices) first."""
    combos: list[tuple[int, ...]] = [()]
    for ch in choices:
        combos = [c + (x,) for c in combos for x in ch]
    return sorted(combos, key=lambda c: sum(1 for x, ch in zip(c, choices, strict=True) if x != ch[0]))


Candidate = tuple[str, int, list[list[int]], dict[int, str]]


def _words() -> list[Candidate]:
    """(encoding, opcode, candidate instruction words (fullest first), {register number: field}) per opcode.

    LLVM's decoder rejects a word whose unused operand fields are not zero, so each opcode is tried with
    the fields set and then with subsets of them cleared; the first candidate LLVM accepts is kept.
    """
    out: list[Candidate] = []
    s_rev = {v: k for k, v in _S.items()}
    v_rev = {v: k for k, v in _V.items()}
    v = 256
    for op in range(96):                                        # SOP2 [31:30]=10, OP[29:23] (96+: SOPK..SOPP)
        out.append(("SOP2", op, [[0x80000000 | op << 23 | d << 16 | b << 8 | a, LIT]
                                 for d, a, b in _pick([16, 0], [32, 0], [48, 0])], s_rev))
    for op in range(128):
        out.append(("SOPC", op, [[0xBF000000 | op << 16 | b << 8 | a, LIT]   # [31:23]=1_0111_1110
                                 for a, b in _pick([32, 0], [48, 0])], s_rev))
        out.append(("SOPP", op, [[0xBF800000 | op << 16]], {}))
    for op in range(29):                                        # SOPK [31:28]=1011, OP[27:23] (29+: SOP1..)
        out.append(("SOPK", op, [[0xB0000000 | op << 23 | d << 16 | 0x1234, LIT] for (d,) in _pick([16, 0])], s_rev))
    for op in range(256):
        out.append(("SOP1", op, [[0xBE800000 | d << 16 | op << 8 | a, LIT] for d, a in _pick([16, 0], [32, 0])],
                    s_rev))
        # SMEM: SDATA=16, SBASE=16 (pair s[32:33]), SOFFSET=null, OFFSET=0
        out.append(("SMEM", op, [[0xF4000000 | op << 18 | d << 6 | b, 0xF8000000] for d, b in _pick([16, 0], [16, 0])],
                    {16: "sdata", 32: "sbase"}))
        out.append(("VOP1", op, [[0x7E000000 | d << 17 | op << 9 | a, LIT] for d, a in _pick([16, 0], [v + 32, 0])],
                    v_rev))
        out.append(("VOPC", op, [[0x7C000000 | op << 17 | 48 << 9 | (v + 32), LIT]], v_rev))
        # DS: VDST=16, DATA1=64, DATA0=48, ADDR=32
        out.append(("DS", op, [[0xD8000000 | op << 18, d << 24 | d1 << 16 | d0 << 8 | a]
                               for d, d1, d0, a in _pick([16, 0], [64, 0], [48, 0], [32, 0])],
                    {16: "vdst", 32: "addr", 48: "data0", 64: "data1"}))
        out.append(("MUBUF", op, [[0xE0000000 | op << 18, 0]], {}))
    for op in range(62):                                        # VOP2 [31]=0, OP[30:25] (62, 63: VOPC, VOP1)
        out.append(("VOP2", op, [[op << 25 | 16 << 17 | b << 9 | (v + 32), LIT] for (b,) in _pick([48, 0])], v_rev))
    for op in range(1024):                                      # VOP3 [31:26]=110101, OP[25:16]
        out.append(("VOP3", op, [[0xD4000000 | op << 16 | 16, c << 18 | b << 9 | a, LIT]
                                 for a, b, c in _pick([v + 32, 0], [v + 48, 0], [v + 64, 64, 0])], v_rev))
    for op in range(128):                                       # VOP3P [31:24]=0xCC, OP[22:16]
        out.append(("VOP3P", op, [[0xCC000000 | op << 16 | 0x4000 | 16, 0x18000000 | c << 18 | b << 9 | a, LIT]
                                  for a, b, c in _pick([v + 32, 0], [v + 48, 0], [v + 64, 0])], v_rev))
        for seg, name in ((0, "FLAT"), (1, "SCRATCH"), (2, "GLOBAL")):
            # VDST=16, SADDR=off(0x7C), DATA=48, ADDR=32 (a pair for flat/global)
            w0 = 0xDC000000 | op << 18 | seg << 16
            cands = [[w0, d << 24 | 0x7C << 16 | dd << 8 | 32] for d, dd in _pick([16, 0], [48, 0])]
            if name == "SCRATCH":   # SVE (bit 55): the VGPR address is used
                cands = [[w0, c[1] | 1 << 23] for c in cands] + cands
            out.append((name, op, cands, {16: "vdst", 32: "addr", 48: "data"}))
    vx = {16: "vdstx", 32: "src0x", 48: "vsrc1x", 65: "vdsty", 34: "src0y", 50: "vsrc1y"}
    for op in range(16):                                        # VOPD [31:26]=110010: X half, Y = v_dual_mov_b32
        out.append(("VOPDX", op, [[0xC8000000 | op << 22 | 8 << 17 | b << 9 | (v + 32),
                                   16 << 24 | 32 << 17 | (v + 34), LIT] for (b,) in _pick([48, 0])], vx))
    for op in range(32):                                        # Y half, X = v_dual_mov_b32
        out.append(("VOPDY", op, [[0xC8000000 | 8 << 22 | op << 17 | (v + 32),
                                   16 << 24 | 32 << 17 | b << 9 | (v + 34), LIT] for (b,) in _pick([50, 0])], vx))
    # DPP source forms (specs/amd-compute.md §5.2): SRC0 = 250 (DPP16, one more dword: quad_perm identity,
    # row/bank masks 0xf) or 233 (DPP8: lane selects identity); the VGPR source moves into that dword
    dpp16, dpp8 = 0xFF00E400 | 32, 0xFAC688 << 8 | 32
    for op in range(256):
        for form, src, dw in (("DPP16", 250, dpp16), ("DPP8", 233, dpp8)):
            out.append((f"VOP1_{form}", op, [[0x7E000000 | d << 17 | op << 9 | src, dw] for (d,) in _pick([16, 0])],
                        v_rev))
            out.append((f"VOPC_{form}", op, [[0x7C000000 | op << 17 | 48 << 9 | src, dw]], v_rev))
    for op in range(62):
        for form, src, dw in (("DPP16", 250, dpp16), ("DPP8", 233, dpp8)):
            out.append((f"VOP2_{form}", op, [[op << 25 | 16 << 17 | b << 9 | src, dw] for (b,) in _pick([48, 0])],
                        v_rev))
    for op in range(1024):
        for form, src, dw in (("DPP16", 250, dpp16), ("DPP8", 233, dpp8)):
            out.append((f"VOP3_{form}", op, [[0xD4000000 | op << 16 | 16, c << 18 | b << 9 | src, dw]
                                             for b, c in _pick([v + 48, 0], [v + 64, 64, 0])], v_rev))
    for op in range(128):                                       # VINTERP [31:24]=0xCD, OP[22:16]
        out.append(("VINTERP", op, [[0xCD000000 | op << 16 | 16, c << 18 | b << 9 | a]
                                    for a, b, c in _pick([v + 32, 0], [v + 48, 0], [v + 64, 0])], v_rev))
    for op in range(4):                                         # LDSDIR [31:24]=0xCE, OP[21:20]
        out.append(("LDSDIR", op, [[0xCE000000 | op << 20 | 16]], {16: "vdst"}))
    for op in range(16):                                        # MTBUF [31:26]=111010, OP[18:15]
        out.append(("MTBUF", op, [[0xE8000000 | op << 15, 0]], {}))
    for op in range(256):                                       # MIMG [31:26]=111100, OP[25:18], DMASK 1
        out.append(("MIMG", op, [[0xF0000000 | op << 18 | 1 << 8, 0], [0xF0000000 | op << 18 | 0xF << 8, 0]], {}))
    return out


_REG = re.compile(r"^(?:([sv])(\d+)|([sv])\[(\d+):(\d+)\])$")


def _template(enc: str, operands: list[str], fields: dict[int, str]) -> tuple[str, ...] | None:
    toks: list[str] = []
    for o in operands:
        m = _REG.match(o)
        if m:
            kind = m.group(1) or m.group(3)
            lo = int(m.group(2) or m.group(4))
            width = 1 if m.group(2) else int(m.group(5)) - lo + 1
            field = fields.get(lo)
            if field is None and enc.startswith("VOP") and lo == 0 and kind == "s":
                field = "sdst"                                  # VOP3SD carry-out SDST (bits 14:8 = 0)
            if field is None:
                return None
            toks.append(f"{field}:{kind}{width}")
        elif o == f"0x{LIT:x}":
            toks.append("lit")
        elif o == "0x1234" and enc == "SOPK":
            toks.append("simm16")
        elif re.fullmatch(r"[a-z_]+(\[\d+:\d+\])?", o):
            toks.append("=" + o)
        else:
            return None
    return tuple(toks)


def _parse(line: str) -> tuple[str, list[str], list[str]] | None:
    """(mnemonic, register-like operands, trailing modifiers) of one LLVM output line."""
    text = re.sub(r"/\*.*?\*/", "", line.split(";", maxsplit=1)[0]).strip()
    if not text or text.startswith("."):
        return None
    head, _, rest = text.partition(" ")
    if " :: " in text:
        return head, [text], []
    ops = [o.strip() for o in rest.split(", ")] if rest else []
    mods: list[str] = []
    if ops:
        last = ops[-1].split(" ")
        ops[-1] = last[0]
        mods = last[1:]
    return head, ops, mods


MARK = 0xBEE900FF   # s_mov_b32 s105, <literal>: the marker after each candidate (no candidate uses s105)
MARK_TAG = 0x7A000000   # keeps the marker's literal printed in hex (small ones would print as decimal)


def _disassemble(words: list[list[int]], exe: str) -> list[str | None]:
    """For each candidate word list, the line llvm-mc prints for its first instruction, or None when LLVM calls the
    first dword an invalid encoding.

    Each candidate is one input line, followed by a line holding a marker instruction (``s_mov_b32 s105`` with
    the candidate's index in its literal): llvm-mc reads its input as one byte stream, so the candidate is padded with
    two s_nop words that only an instruction longer than its line would eat, and its output is everything before
    the next marker. LLVM may print a canonical encoding that differs from the input (a field it ignores is
    printed as zero), so lines are matched by position, never by their encoding bytes.
    """
    pad = [0xBF800000, 0xBF800000]
    lines = []
    for i, w in enumerate(words):
        lines.append(" ".join(f"0x{b:02x}" for b in struct.pack(f"<{len(w) + 2}I", *w, *pad)))
        lines.append(" ".join(f"0x{b:02x}" for b in struct.pack("<2I", MARK, MARK_TAG | i)))
    r = subprocess.run([exe, "--disassemble", "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding"],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
    invalid = {int(m.group(1)) for m in re.finditer(r"<stdin>:(\d+):1: warning: invalid instruction encoding",
                                                     r.stderr)}
    out: list[str | None] = [None] * len(words)
    first: str | None = None
    marker = re.compile(r"^\s*s_mov_b32 s105, 0x([0-9a-f]+)\s*;")
    for line in r.stdout.splitlines():
        if ";" not in line or "encoding:" not in line:
            continue
        m = marker.match(line)
        if m:
            i = int(m.group(1), 16) & ~MARK_TAG
            if i < len(words) and 2 * i + 1 not in invalid:
                out[i] = first
            first = None
        elif first is None:
            first = line
    return out


def generate(exe: str) -> str:
    """The text of ``tinyhw/formats/rdna3_ops.py``: every gfx11 opcode's mnemonic and operand template as llvm-mc
    ``exe`` decodes its candidate words."""
    items = _words()
    flat = [w for _, _, ws, _ in items for w in ws]
    decoded = _disassemble(flat, exe)
    table: dict[tuple[str, int], tuple[str, tuple[str, ...] | None]] = {}
    k = 0
    for enc, op, ws, fields in items:
        hit = None
        for line in decoded[k:k + len(ws)]:
            if line is not None and "v_illegal" not in line:
                hit = line
                break
        k += len(ws)
        if hit is None:
            continue
        parsed = _parse(hit)
        if parsed is None or parsed[0] in ("v_illegal",):
            continue
        mnem, ops, _mods = parsed
        if enc in ("VOPDX", "VOPDY"):
            x, _, y = ops[0].partition(" :: ")
            half = x if enc == "VOPDX" else y
            hm, _, hrest = half.partition(" ")
            hops = [o.strip() for o in hrest.split(",")] if hrest else []
            table[(enc, op)] = (hm, _template(enc, hops, fields))
            continue
        if enc in ("SOPP", "SMEM", "MUBUF", "MTBUF", "MIMG", "LDSDIR"):   # rendered by the decoder
            table[(enc, op)] = (mnem, None)
            continue
        table[(enc, op)] = (mnem, _template(enc, ops, fields) if ops and ops != [""] else ())
    lines = [f'"""gfx11 (RDNA3) opcode table: generated by ``{COMMAND}`` from llvm-mc-19; do not edit.',
             "",
             "OPS[(encoding, opcode)] = (mnemonic, operand template or None); see tinyhw/autogen/genisa.py.",
             '"""', "", "from __future__ import annotations", "",
             "OPS: dict[tuple[str, int], tuple[str, tuple[str, ...] | None]] = {"]
    for (enc, op), (mnem, tpl) in sorted(table.items()):
        lines.append(f"    ({enc!r}, {op}): ({mnem!r}, {tpl!r}),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    """``python -m tinyhw.autogen.genisa``: rewrite the opcode table with llvm-mc-19; returns 3 when it is not
    installed."""
    exe = shutil.which("llvm-mc-19") or shutil.which("llvm-mc")
    if not exe:
        print("genisa: llvm-mc-19 is not installed (apt-get install llvm-19)", file=sys.stderr)
        return 3
    OUT.write_text(generate(exe))
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
