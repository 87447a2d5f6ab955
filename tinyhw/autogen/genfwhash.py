"""Generator of ``amdgpu_fw_sha256.py``: the SHA-256 of the boot firmware files of Debian's package.

``python -m tinyhw.autogen.genfwhash [DIR]`` hashes every PSP secure-OS, SMU, SDMA and GC
microcode file (``psp_*_sos.bin``, ``smu_*.bin``, ``sdma_*.bin``, ``gc_*_{pfp,me,mec,imu,rlc}.bin``)
under DIR (default: the amdgpu directory that ``tests/fetch_firmware.sh`` extracts from
``firmware-amd-graphics``) and writes the table beside this file, with the package version read
from the extraction's ``.complete`` stamp. The boot code uses the table to tell a byte-flipped or
another ASIC's file from the real one before anything is written to a GPU (specs/amd-bringup.md §5.5:
every file is checked against a known hash before use).

Layer 0: imports nothing from tinyhw.
"""

from __future__ import annotations

import hashlib
import os
import re
import sys
from pathlib import Path

PATTERN = re.compile(r"^(psp_[0-9_]+_sos|smu_[0-9_]+|sdma_[0-9_]+|gc_[0-9_]+_(pfp|me|mec|imu|rlc))\.bin$")
OUT = Path(__file__).with_name("amdgpu_fw_sha256.py")


def default_dir() -> Path:
    """Where ``tests/fetch_firmware.sh`` extracts the amdgpu firmware: under ``$TINYHW_FIRMWARE_DIR``, else the tinyhw
    cache's ``firmware`` folder."""
    base = os.environ.get("TINYHW_FIRMWARE_DIR") or str(
        Path(os.environ.get("TINYHW_CACHE") or Path.home() / ".cache" / "tinyhw") / "firmware")
    return Path(base) / "amd" / "lib" / "firmware" / "amdgpu"


def table(directory: Path) -> dict[str, str]:
    """The SHA-256 (hex) of each boot firmware file in ``directory`` (PSP secure OS, SMU, SDMA and GC
    PFP/ME/MEC/IMU/RLC), by file name."""
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if PATTERN.match(p.name)}


def package_version(directory: Path) -> str:
    """The Debian package version the extraction recorded in its ``.complete`` stamp, or "unknown"."""
    stamp = directory.parents[2] / ".complete" if len(directory.parents) > 2 else None
    if stamp is not None and stamp.is_file():
        for line in stamp.read_text().splitlines():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
    return "unknown"


def render(hashes: dict[str, str], version: str) -> str:
    """The text of the generated ``amdgpu_fw_sha256.py`` for ``hashes`` from package version ``version``."""
    lines = [
        '"""SHA-256 of the boot firmware files of Debian\'s firmware-amd-graphics (generated; do not edit).',
        "",
        "Written by ``python -m tinyhw.autogen.genfwhash`` from the extracted package.",
        '"""',
        "",
        f"PACKAGE = {'firmware-amd-graphics'!r}",
        f"VERSION = {version!r}",
        "",
        "SHA256: dict[str, str] = {",
    ]
    lines += [f"    {name!r}: {digest!r}," for name, digest in hashes.items()]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m tinyhw.autogen.genfwhash [DIR]``: rewrite ``amdgpu_fw_sha256.py`` from DIR; returns 3 when DIR is not
    a folder."""
    args = sys.argv[1:] if argv is None else argv
    directory = Path(args[0]) if args else default_dir()
    if not directory.is_dir():
        print(f"genfwhash: {directory} is not a directory; run bash tests/fetch_firmware.sh", file=sys.stderr)
        return 3
    hashes = table(directory)
    OUT.write_text(render(hashes, package_version(directory)))
    print(f"genfwhash: {len(hashes)} files -> {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
