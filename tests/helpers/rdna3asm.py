"""Assemble gfx1100 instructions with llvm-mc-19 for the single-instruction tests, many lines per process.

:func:`asm_many` hands a whole table of instruction texts to one llvm-mc-19 run (a table test has hundreds of
rows; one process per row would cost seconds), :func:`asm` one text; both cache per text. Tests that use them
skip themselves without llvm-mc-19 (:data:`HAVE_LLVM_MC`).
"""

from __future__ import annotations

import re
import shutil
import subprocess

HAVE_LLVM_MC = bool(shutil.which("llvm-mc-19"))
_CACHE: dict[str, list[int]] = {}
_ENC = re.compile(r"encoding: \[([^\]]*)\]")


def asm_many(texts: list[str]) -> list[list[int]]:
    """The dwords llvm-mc-19 encodes each of ``texts`` to (gfx1100), in order; one process for the uncached ones."""
    todo = [t for t in dict.fromkeys(texts) if t not in _CACHE]
    if todo:
        out = subprocess.run(["llvm-mc-19", "-triple=amdgcn", "-mcpu=gfx1100", "-show-encoding"],
                             input="\n".join(todo) + "\n", capture_output=True, text=True, check=False)
        assert not out.stderr.strip(), out.stderr
        encs = _ENC.findall(out.stdout)
        assert len(encs) == len(todo), out.stdout
        for text, enc in zip(todo, encs, strict=True):
            raw = bytes(int(x, 16) for x in enc.split(","))
            _CACHE[text] = [int.from_bytes(raw[i:i + 4], "little") for i in range(0, len(raw), 4)]
    return [_CACHE[t] for t in texts]


def asm(text: str) -> list[int]:
    """The dwords llvm-mc-19 encodes ``text`` to (gfx1100)."""
    return asm_many([text])[0]
