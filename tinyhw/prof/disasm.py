"""Optional instruction text from ``llvm-objdump`` (specs/sqtt-pmc.md §15 question 2).

tinyhw decodes instruction lengths itself (:mod:`tinyhw.formats.amdisa`), which is all the PC walk
needs; full mnemonics with operands come from LLVM's disassembler when one that knows the target is
installed (``$TINYHW_LLVM_OBJDUMP``, else ``llvm-objdump`` on PATH; ``TINYHW_LLVM_OBJDUMP=none`` turns
it off). An LLVM too old for the target
(LLVM 14 knows neither gfx11 nor gfx12 nor gfx950) is detected and reported, never used with a
different ``--mcpu``, so no text is guessed. Runs with a 20 s timeout on a private temp file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache

__all__ = ["objdump_text"]

_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]{6,16}):")


def objdump_text(lib: bytes, target: str) -> tuple[dict[int, str] | None, str]:
    """({ELF address: instruction text} or None, a note saying which disassembler was used or why none)."""
    exe = os.environ.get("TINYHW_LLVM_OBJDUMP") or shutil.which("llvm-objdump")
    if exe == "none":
        return None, "llvm-objdump disabled (TINYHW_LLVM_OBJDUMP=none)"
    if not exe:
        return None, "llvm-objdump is not installed"
    return _run(exe, lib, target)


@lru_cache(maxsize=32)
def _run(exe: str, lib: bytes, target: str) -> tuple[dict[int, str] | None, str]:
    with tempfile.NamedTemporaryFile(suffix=".elf") as f:
        f.write(lib)
        f.flush()
        try:
            r = subprocess.run([exe, "-d", "--triple=amdgcn-amd-amdhsa", f"--mcpu={target}", f.name],
                               capture_output=True, text=True, timeout=20, check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            return None, f"llvm-objdump did not run ({type(e).__name__})"
    if r.returncode != 0 or "not a recognized processor" in r.stderr or "not a recognized processor" in r.stdout:
        return None, f"{os.path.basename(exe)} cannot disassemble {target} (exit {r.returncode})"
    out: dict[int, str] = {}
    for line in r.stdout.splitlines():
        m = _LINE.match(line)
        if m and not m.group(1).startswith("."):
            out[int(m.group(2), 16)] = " ".join(m.group(1).split())
    if not out:
        return None, f"{os.path.basename(exe)} printed no instructions for {target}"
    return out, f"instruction text from {os.path.basename(exe)} --mcpu={target}"
