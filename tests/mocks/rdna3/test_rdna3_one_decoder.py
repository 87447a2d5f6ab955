"""``prof insts`` and ``am waves`` decode every instruction the shader core runs, with the core's own table.

The core fetches and decodes through :func:`tinyhw.formats.amdisa.decode_at` (family gfx11, the table generated from
llvm-mc-19 in :mod:`tinyhw.formats.rdna3_ops`); ``prof insts`` walks a captured wave's PC with the same function when
no LLVM disassembler knows the target, and ``am waves`` renders a resident wave's instruction with it. Here, for every
(encoding, opcode) of that table the core compiles, one instance is rendered by both tools' code paths: each names
the table's mnemonic with operands (never the "ENC op 0xNN" fallback of an unknown opcode) and has the core's size.
"""

from __future__ import annotations

import struct

from tinyhw.boot.amd import waves
from tinyhw.formats import amdisa
from tinyhw.formats.rdna3_ops import OPS
from tinyhw.prof import insts


class _CodeAt:
    """A VmReader stand-in: ``raw`` at ``pc``, zeros after it."""

    def __init__(self, pc: int, raw: bytes) -> None:
        self.pc, self.raw = pc, raw

    def read(self, addr: int, n: int) -> bytes:
        """``n`` bytes at ``addr``."""
        off = addr - self.pc
        return (bytes(max(-off, 0)) + self.raw[max(off, 0):] + bytes(n))[:n]


def _core_compiled() -> list[tuple[tuple[str, int], bytes]]:
    """(table key, instruction bytes) of one instance of every table entry the shader core compiles."""
    from tinyhw.autogen import genisa
    from tinyhw.mocks.rdna3 import Unimplemented
    from tinyhw.mocks.rdna3.dispatch import _compile

    out: dict[tuple[str, int], bytes] = {}
    for enc, op, ws, _fields in genisa._words():
        for w in ws:
            raw = struct.pack(f"<{len(w)}I", *w)
            inst = amdisa.decode_at(raw + bytes(16), 0, "gfx11")
            key = inst.key if enc not in ("VOPDX", "VOPDY") else (enc, op)
            if key not in OPS or key in out or (enc not in ("VOPDX", "VOPDY") and inst.mnemonic != OPS[key][0]):
                continue
            try:
                _compile(inst, raw[:inst.size], 0, True, {})
            except Unimplemented:
                break
            out[key] = raw[:inst.size]
            break
    return sorted(out.items())


def test_both_tools_use_the_cores_decoder() -> None:
    from tinyhw.mocks.rdna3 import dispatch

    assert insts.decode_at is amdisa.decode_at is dispatch.decode_at and waves.amdisa is amdisa
    assert amdisa.isa_family("gfx1100") == "gfx11"      # the family prof insts decodes a gfx1100 capture with


def test_every_instruction_the_core_compiles_is_rendered_by_prof_insts_and_am_waves() -> None:
    compiled = _core_compiled()
    assert len(compiled) >= 1000                          # the core compiles 1078 entries today
    pc = 0x7F00_1234_5600
    for key, raw in compiled:
        mnemonic = OPS[key][0]
        core = amdisa.decode_at(raw + bytes(16), 0, "gfx11")
        prof = insts.decode_at(raw + bytes(16), 0, amdisa.isa_family("gfx1100"))     # prof insts' PC walk
        am = waves.instruction_at(_CodeAt(pc, raw), pc)                               # am waves
        assert mnemonic in core.mnemonic.split("::") if "::" in core.mnemonic else core.mnemonic == mnemonic, key
        assert prof.text == am["text"] == core.text, key
        assert core.text.split()[0] == core.mnemonic.split("::")[0], (key, core.text)    # a mnemonic, not "ENC op"
        assert prof.size == am["size"] == core.size == len(raw), key
        assert am["dwords"] == list(struct.unpack(f"<{len(raw) // 4}I", raw))
