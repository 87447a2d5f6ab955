"""Optional instruction text from ``llvm-objdump`` (specs/sqtt-pmc.md §15 question 2).

tinyhw decodes instruction lengths itself (:mod:`tinyhw.formats.amdisa`), which is all the PC walk
needs; full mnemonics with operands come from LLVM's disassembler when one that knows the target is
installed: ``$TINYHW_LLVM_OBJDUMP`` alone when set (``TINYHW_LLVM_OBJDUMP=none`` turns it off), else the
versioned ``llvm-objdump-NN`` on PATH from the highest NN down, then plain ``llvm-objdump``: the first that
disassembles the target is used (a distribution's plain ``llvm-objdump`` may be LLVM 14 while setup installed
``llvm-objdump-19``). An LLVM too old for the target (LLVM 14 knows neither gfx11 nor gfx12 nor gfx950) is
detected and skipped, never used with a different ``--mcpu``, so no text is guessed. Each runs with a 20 s
timeout on a private temp file.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from functools import lru_cache

__all__ = ["candidates", "objdump_text"]

_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]{6,16}):")


VERSIONS = range(99, 6, -1)   # llvm-objdump-NN looked for on PATH, newest first (LLVM 7 is the oldest packaged)


def candidates(path: str | None = None) -> list[str]:
    """The llvm-objdump executables on ``path`` (default ``$PATH``) to try, best first: ``llvm-objdump-NN`` from
    the highest NN down (each found as ``which`` finds it), then plain ``llvm-objdump``."""
    path = os.environ.get("PATH", "") if path is None else path
    found = [shutil.which(f"llvm-objdump-{v}", path=path) for v in VERSIONS]
    plain = shutil.which("llvm-objdump", path=path)
    return [f for f in found if f] + ([plain] if plain else [])


def objdump_text(lib: bytes, target: str) -> tuple[dict[int, str] | None, str]:
    """({ELF address: instruction text} or None, a note saying which disassembler was used or why none)."""
    exe = os.environ.get("TINYHW_LLVM_OBJDUMP")
    if exe == "none":
        return None, "llvm-objdump disabled (TINYHW_LLVM_OBJDUMP=none)"
    if exe:
        return _run(exe, lib, target)
    tried = candidates()
    if not tried:
        return None, "llvm-objdump is not installed"
    notes = []
    for exe in tried:
        text, note = _run(exe, lib, target)
        if text is not None:
            return text, note
        notes.append(note)
    return None, "; ".join(notes)


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
