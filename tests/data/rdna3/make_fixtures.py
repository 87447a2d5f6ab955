"""Make the LLVM reference fixtures the rdna3 decoder and shader-core tests compare against.

    python tests/data/rdna3/make_fixtures.py      # needs llvm-mc-19 and llvm-objdump-19 (Debian llvm-19)

* ``inventory.txt``: ``inventory.s`` assembled by llvm-mc-19 (gfx1100): one line per instruction,
  ``<hex dwords>\\t<LLVM text>``.
* ``objdump_gfx1100.txt``: llvm-objdump-19 of every committed gfx1100 code object (the probes under
  tinyhw/kernels/prebuilt/gfx1100 and the captured programs under tests/data/sqtt/gfx1100 that LLVM
  can read): ``<file>\\t<.text byte offset>\\t<LLVM text>``, ``s_code_end`` padding included.
"""

from __future__ import annotations

import re
import struct
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent.parent
MC = "llvm-mc-19"
OBJDUMP = "llvm-objdump-19"
_ENC = re.compile(r"^\s*(\S.*?)\s*;\s*encoding:\s*\[([^\]]*)\]")
_LINE = re.compile(r"^\s+(\S.*?)\s*//\s*([0-9A-Fa-f]{6,16}):")


def inventory() -> str:
    r = subprocess.run([MC, "-arch=amdgcn", "-mcpu=gfx1100", "-show-encoding", str(HERE / "inventory.s")],
                       capture_output=True, text=True, check=True)
    out = []
    for line in r.stdout.splitlines():
        m = _ENC.match(line)
        if m:
            raw = bytes(int(x, 16) for x in m.group(2).split(","))
            words = struct.unpack(f"<{len(raw) // 4}I", raw)
            out.append(" ".join(f"{w:08X}" for w in words) + "\t" + " ".join(m.group(1).split()))
    return "\n".join(out) + "\n"


def code_objects() -> list[Path]:
    found = sorted((ROOT / "tinyhw/kernels/prebuilt/gfx1100").glob("*.elf"))
    found += sorted((ROOT / "tests/data/sqtt/gfx1100").glob("*/*.elf"))
    return found


def objdump() -> str:
    out = []
    for path in code_objects():
        r = subprocess.run([OBJDUMP, "-d", "--mcpu=gfx1100", str(path)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            continue                       # LLVM cannot read it (a hand-made capture); nothing to compare
        rel = path.relative_to(ROOT).as_posix()
        for line in r.stdout.splitlines():
            m = _LINE.match(line)
            if m:
                text = re.sub(r"\s*<[^>]*>$", "", " ".join(m.group(1).split()))
                out.append(f"{rel}\t{int(m.group(2), 16)}\t{text}")
    return "\n".join(out) + "\n"


def main() -> None:
    (HERE / "inventory.txt").write_text(inventory())
    (HERE / "objdump_gfx1100.txt").write_text(objdump())


if __name__ == "__main__":
    main()
