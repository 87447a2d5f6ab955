"""Finding, checking and cutting the NVIDIA boot firmware: GSP-RM, the booter and the GSP bootloader.

Spec: specs/nv-bringup.md §9.1 (files under ``nvidia/<dir>/gsp/``: ``booter_load-<ver>.bin``,
``bootloader-<ver>.bin``, ``gsp-<ver>.bin`` from the ga102 directory for every chip, with tinygrad's
SHA-256 pins of release 570.144), §9.2 (``gsp_ga10x.bin`` of NVIDIA's driver package is that GSP-RM file;
Debian's firmware-nvidia-gsp installs it as ``nvidia/<ver>/gsp_ga10x.bin``), §9.3 (``nvfw_bin_hdr``,
``RM_RISCV_UCODE_DESC``, the booter's HS header, signatures, patch location and load header; the booter's
preparation: signature ``sig_prod_offset + patch_sig`` of ``sig_prod_size / num_sig`` bytes copied over the
image at ``patch_loc``; run on SEC2 with PKC offset 0x10, engine mask 1, ucode id 3).

As the AMD boot does (:mod:`tinyhw.boot.amd.firmware`; the cache rule is :mod:`tinyhw.boot.common.fwdirs`), every
file is checked before anything is written to the GPU: missing, damaged, another version than the GSP-RM file's
``.fwversion``, or a SHA-256 that is not a known release's is refused with exit 2 (``allow_unknown`` loads an
unknown but well-formed file). Known releases: Debian firmware-nvidia-gsp 535.261.03-1 (``gsp_ga10x.bin``; Debian
ships no booter or bootloader: in 535 they are compiled into the kernel module) and linux-firmware's 570.144 set
(tinygrad's pins, §9.1).
"""

from __future__ import annotations

import hashlib
import os
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinyhw.boot.common.fwdirs import CACHE_SOURCE, SYSTEM_SOURCE, FirmwareDir, cache_root
from tinyhw.boot.nv.falcon import HsUcode
from tinyhw.boot.nv.gpu import ChipParams
from tinyhw.boot.nv.structs import layouts_for
from tinyhw.errors import Refused
from tinyhw.fileio import read_input
from tinyhw.formats.nvgsp import parse_gsp

DEFAULT_DIR = Path("/lib/firmware/nvidia")
MAX_FILE = 64 << 20  # gsp_ga10x.bin of 535.261.03 is 36.5 MiB
BIN_MAGIC = 0x10DE
PKG_HINT = ("install debian's firmware-nvidia-gsp for gsp-rm, and linux-firmware's nvidia/<chip>/gsp/ booter_load "
            "and bootloader of the same version (or pass --firmware-dir DIR holding them)")
#: sha256 -> (release, file): Debian firmware-nvidia-gsp 535.261.03-1 (computed from the package) and
#: linux-firmware's 570.144 files as tinygrad pins them (specs/nv-bringup.md §9.1).
KNOWN = {
    "a3986835541326050c344349b2b935bb830b33a346e20d578e9a6b297c1ea6df": ("535.261.03", "gsp_ga10x.bin"),
    "a8c3ebeed280323aedb51c061f321e73379cce7a9ae643a33dd03915df027f7f": ("570.144", "ga102/gsp/gsp-570.144.bin"),
    "4497e3eff7e95c774b8a569d17b27c08c9650158d10b229d2be81cdcad9a085b": ("570.144", "ga102/gsp/booter_load"),
    "8b293e19b637c5e22c87a2428d1c71bb13e0904e8a88ac6b3c6c1f2679c6e37a": ("570.144", "ad102/gsp/booter_load"),
    "82428f532240727e95bb3083fbaaba9b2cc7b937314323f2d546ce7245f27fad": ("570.144", "ga102/gsp/bootloader"),
    "65ab2e6b6e0fca95365c4deac79a34582abcfeb15b6ae234138f22e7183118a8": ("570.144", "ad102/gsp/bootloader"),
}
BOOTER_PKC, BOOTER_ENGINE_MASK, BOOTER_UCODE_ID = 0x10, 1, 3  # §9.3: tinygrad's hard-coded values
MAX_VERSIONS = 64


def firmware_dir(given: str | os.PathLike[str] | None) -> Path:
    """``--firmware-dir``, else $TINYHW_NVIDIA_FIRMWARE, else /lib/firmware/nvidia. A directory the user named
    (option or variable) must exist and be a directory, and an empty ``given`` is refused (exit 2): a typo never
    falls back to another directory. The default is checked only when a boot reads it (:func:`load_firmware`)."""
    if given is not None and not os.fspath(given).strip():
        raise Refused("--firmware-dir is empty", hint="name the directory holding the nvidia firmware")
    source = "--firmware-dir" if given is not None else "$TINYHW_NVIDIA_FIRMWARE"
    text = given if given is not None else os.environ.get("TINYHW_NVIDIA_FIRMWARE")
    if not text:
        return DEFAULT_DIR
    path = Path(text).expanduser()
    check_firmware_dir(path, source)
    return path


def search_dirs(env: Mapping[str, str] = os.environ) -> list[tuple[Path, str]]:
    """Where the nvidia files are looked for when no directory is named, in order: tinyhw's cache (the complete
    570.144 set from Debian's ``firmware-nvidia-graphics``, ``nvidia-570/nvidia``, then Debian's
    ``firmware-nvidia-gsp`` extracted there by tests/fetch_firmware.sh: ``nvidia-gsp/lib/firmware/nvidia``, or
    ``.../usr/lib/...``), then the system's (``/lib/firmware/nvidia``, ``/usr/lib/firmware/nvidia``)."""
    gsp = cache_root(env) / "nvidia-gsp"
    return [(cache_root(env) / "nvidia-570" / "nvidia", CACHE_SOURCE),
            (gsp / "lib" / "firmware" / "nvidia", CACHE_SOURCE), (gsp / "usr" / "lib" / "firmware" / "nvidia",
            CACHE_SOURCE), (DEFAULT_DIR, SYSTEM_SOURCE), (Path("/usr/lib/firmware/nvidia"), SYSTEM_SOURCE)]


def locate(given: str | os.PathLike[str] | None, env: Mapping[str, str] = os.environ) -> FirmwareDir:
    """The firmware directory: ``--firmware-dir`` or $TINYHW_NVIDIA_FIRMWARE (checked as :func:`firmware_dir`
    does), else the first of :func:`search_dirs` that holds a gsp-rm file, else the first that exists, else
    /lib/firmware/nvidia (whose missing files the boot then names)."""
    if given is not None or env.get("TINYHW_NVIDIA_FIRMWARE"):
        return FirmwareDir(firmware_dir(given), "--firmware-dir" if given is not None else "$TINYHW_NVIDIA_FIRMWARE")
    found = search_dirs(env)
    searched = tuple(d for d, _ in found)
    existing = [(d, why) for d, why in found if d.is_dir()]
    for d, why in existing:
        if gsp_candidates(d):
            return FirmwareDir(d, why, searched)
    if existing:
        return FirmwareDir(*existing[0], searched)
    return FirmwareDir(DEFAULT_DIR, "the default: none in tinyhw's cache either", searched)


def check_firmware_dir(path: Path, source: str = "the nvidia firmware directory") -> None:
    """Refuse (exit 2) a firmware directory ``path`` that does not exist or is not a directory; ``source`` names
    where it came from in the message (``--firmware-dir``, ``$TINYHW_NVIDIA_FIRMWARE``)."""
    try:
        is_dir, exists = path.is_dir(), path.exists()
    except (OSError, ValueError) as e:
        raise Refused(f"{source} {path} cannot be read ({e})", hint=PKG_HINT) from None
    if not exists:
        raise Refused(f"{source} {path} does not exist", hint=PKG_HINT)
    if not is_dir:
        raise Refused(f"{source} {path} is not a directory",
                      hint="name the directory holding <version>/gsp_ga10x.bin and <chip>/gsp/, not a file in it")


@dataclass
class FwFile:
    """One checked file: path, bytes, SHA-256 and the release it is known as (None: unknown, allowed)."""

    role: str
    path: Path
    data: bytes
    sha256: str
    known_as: str | None

    def to_doc(self) -> dict[str, Any]:
        """The file as a JSON-ready dict."""
        return {"role": self.role, "path": str(self.path), "size": len(self.data), "sha256": self.sha256,
                "known_release": self.known_as}


@dataclass
class NvFirmware:
    """The checked boot set of one chip: GSP-RM image and signature, the bootloader and the patched booter."""

    version: str
    directory: Path
    files: dict[str, FwFile] = field(default_factory=dict)
    gsp_image: bytes = b""
    gsp_signature: bytes = b""
    bootloader_image: bytes = b""
    bootloader_desc: dict[str, int] = field(default_factory=dict)
    booter_image: bytes = b""
    booter: HsUcode | None = None  # fb_address 0: the caller places the image

    def to_doc(self) -> dict[str, Any]:
        """The set as a JSON-ready dict (version and files)."""
        return {"version": self.version, "directory": str(self.directory),
                "files": [f.to_doc() for f in self.files.values()]}


def _read(role: str, path: Path, allow_unknown: bool) -> FwFile:
    if not (path.is_file() or path.is_symlink()):
        raise Refused(f"nvidia firmware file {path} is missing", hint=PKG_HINT)
    data = read_input(path, MAX_FILE, "nvidia firmware file")
    digest = hashlib.sha256(data).hexdigest()
    known = KNOWN.get(digest)
    if known is None and not allow_unknown:
        raise Refused(f"nvidia firmware file {path} is not a known release (sha256 {digest[:16]}...)",
                      hint="install the packaged file, or pass --allow-unknown-firmware to load it anyway")
    return FwFile(role, path, data, digest, known[0] if known else None)


def gsp_candidates(directory: Path) -> dict[str, Path]:
    """version -> GSP-RM file: Debian's ``<ver>/gsp_ga10x.bin`` and linux-firmware's ``ga102/gsp/gsp-<ver>.bin``."""
    out: dict[str, Path] = {}
    pattern = re.compile(r"\d+\.\d+(\.\d+)?")
    try:
        for p in sorted(directory.iterdir())[:4096]:
            if pattern.fullmatch(p.name) and (p / "gsp_ga10x.bin").exists():
                out[p.name] = p / "gsp_ga10x.bin"
        lf = directory / "ga102" / "gsp"
        if lf.is_dir():
            for p in sorted(lf.glob("gsp-*.bin"))[:MAX_VERSIONS]:
                out.setdefault(p.name[4:-4], p)
    except OSError:
        return out
    return out


def _bin_header(role: str, path: Path, data: bytes) -> tuple[int, int, int]:
    if len(data) < 24:
        raise Refused(f"nvidia firmware file {path} is {len(data)} bytes, too short for its header", hint=PKG_HINT)
    magic, ver, _size, hoff, doff, dsize = struct.unpack_from("<6I", data, 0)
    if magic != BIN_MAGIC or ver != 1 or doff + dsize > len(data) or hoff >= len(data):
        raise Refused(f"nvidia firmware file {path} is not a {role} image (bin header magic 0x{magic:x} version "
                      f"{ver}, data 0x{doff:x}+0x{dsize:x} of 0x{len(data):x})", hint=PKG_HINT)
    return hoff, doff, dsize


DESC_FIELDS = ("version", "bootloader_offset", "bootloader_size", "bootloader_param_offset",
               "bootloader_param_size", "riscv_elf_offset", "riscv_elf_size", "app_version", "manifest_offset",
               "manifest_size", "monitor_data_offset", "monitor_data_size", "monitor_code_offset",
               "monitor_code_size", "is_monitor_enabled", "swbrom_code_offset", "swbrom_code_size",
               "swbrom_data_offset", "swbrom_data_size", "fb_reserved_size", "signed_as_code")


def cut_bootloader(path: Path, data: bytes) -> tuple[dict[str, int], bytes]:
    """§9.3: the ``RM_RISCV_UCODE_DESC`` fields and the image of a ``bootloader-<ver>.bin``."""
    hoff, doff, dsize = _bin_header("gsp bootloader", path, data)
    if hoff + 84 > len(data) or not dsize:
        raise Refused(f"nvidia firmware file {path} has no 84-byte riscv ucode descriptor", hint=PKG_HINT)
    desc = dict(zip(DESC_FIELDS, struct.unpack_from("<21I", data, hoff), strict=True))
    for k in ("monitor_code_offset", "monitor_data_offset", "manifest_offset"):
        if desc[k] >= dsize:
            raise Refused(f"nvidia firmware file {path}: {k} 0x{desc[k]:x} lies beyond its 0x{dsize:x}-byte image",
                          hint=PKG_HINT)
    return desc, data[doff:doff + dsize]


def cut_booter(path: Path, data: bytes) -> tuple[HsUcode, bytes]:
    """§9.3: the booter's image with its production signature patched in, and how it loads on SEC2."""
    _, doff, dsize = _bin_header("booter", path, data)
    if len(data) < 24 + 36:
        raise Refused(f"nvidia firmware file {path} has no hs header", hint=PKG_HINT)
    sig_off, sig_size, patch_loc_at, patch_sig_at, _meta, _meta_size, num_sig_at, load_at, _ = \
        struct.unpack_from("<9I", data, 24)

    def u32(at: int, what: str) -> int:
        if at + 4 > len(data):
            raise Refused(f"nvidia firmware file {path}: its {what} lies beyond the file", hint=PKG_HINT)
        return struct.unpack_from("<I", data, at)[0]

    patch_loc, patch_sig, num_sig = u32(patch_loc_at, "patch_loc"), u32(patch_sig_at, "patch_sig"), \
        u32(num_sig_at, "num_sig")
    if not 1 <= num_sig <= 16 or sig_size % num_sig:
        raise Refused(f"nvidia firmware file {path} says {num_sig} signatures in 0x{sig_size:x} bytes", hint=PKG_HINT)
    sig_len = sig_size // num_sig
    sig_at = sig_off + patch_sig
    if sig_at + sig_len > len(data) or patch_loc + sig_len > dsize:
        raise Refused(f"nvidia firmware file {path}: signature or patch location out of range", hint=PKG_HINT)
    if load_at + 36 > len(data):
        raise Refused(f"nvidia firmware file {path}: its load header lies beyond the file", hint=PKG_HINT)
    _code_off, _code_size, data_off, data_size, num_apps = struct.unpack_from("<5I", data, load_at)
    if num_apps < 1:
        raise Refused(f"nvidia firmware file {path}: the booter lists no application", hint=PKG_HINT)
    app_off, app_size = struct.unpack_from("<II", data, load_at + 20)
    if app_off + app_size > dsize or data_off + data_size > dsize or data_off % 256 or app_off % 256:
        raise Refused(f"nvidia firmware file {path}: the booter's code or data lies outside its image or is not "
                      "256-byte aligned", hint=PKG_HINT)
    image = bytearray(data[doff:doff + dsize])
    image[patch_loc:patch_loc + sig_len] = data[sig_at:sig_at + sig_len]
    u = HsUcode(0, app_off, data_off, 0, app_off, app_size, 0, data_size, BOOTER_PKC, BOOTER_ENGINE_MASK,
                BOOTER_UCODE_ID)
    return u, bytes(image)


def load_firmware(directory: Path, chip: ChipParams | None, *, version: str | None = None,
                  allow_unknown: bool = False) -> NvFirmware:
    """Find and check the boot set for ``chip`` under ``directory`` (exit 2 on the first bad or missing file)."""
    if chip is None:
        raise Refused("the chip is not known; run the preflight first")
    check_firmware_dir(directory)
    found = gsp_candidates(directory)
    if version is None:
        if not found:
            raise Refused(f"no gsp-rm firmware under {directory} (looked for <version>/gsp_ga10x.bin and "
                          "ga102/gsp/gsp-<version>.bin)", hint=PKG_HINT)
        if len(found) > 1:
            raise Refused(f"several gsp-rm versions under {directory}: {', '.join(sorted(found))}",
                          hint="pick one with --gsp-version VERSION")
        version = next(iter(found))
    if version not in found:
        raise Refused(f"no gsp-rm {version} under {directory} (found: {', '.join(sorted(found)) or 'none'})",
                      hint=PKG_HINT)
    layouts_for(version)  # a branch whose boot structures tinyhw does not know is refused here
    fw = NvFirmware(version, directory)
    gsp = fw.files["gsp-rm"] = _read("gsp-rm", found[version], allow_unknown)
    parsed = parse_gsp(gsp.data, str(gsp.path))
    if parsed.problems or parsed.image is None:
        raise Refused(f"nvidia firmware file {gsp.path} is damaged ({(parsed.problems or ['no .fwimage'])[0]})",
                      hint=PKG_HINT)
    if parsed.version != version:
        raise Refused(f"nvidia firmware file {gsp.path} says version {parsed.version}, not {version}", hint=PKG_HINT)
    sig = parsed.signatures.get(chip.signature_family)
    if sig is None:
        raise Refused(f"nvidia firmware file {gsp.path} has no .fwsignature_{chip.signature_family} for the "
                      f"{chip.name}", hint=PKG_HINT)
    fw.gsp_image = gsp.data[parsed.image.offset:parsed.image.offset + parsed.image.size]
    fw.gsp_signature = gsp.data[sig.offset:sig.offset + sig.size]
    gdir = directory / chip.firmware_dir / "gsp"
    bl = fw.files["bootloader"] = _read("bootloader", gdir / f"bootloader-{version}.bin", allow_unknown)
    fw.bootloader_desc, fw.bootloader_image = cut_bootloader(bl.path, bl.data)
    bt = fw.files["booter"] = _read("booter", gdir / f"booter_load-{version}.bin", allow_unknown)
    fw.booter, fw.booter_image = cut_booter(bt.path, bt.data)
    for f in fw.files.values():
        if f.known_as is not None and f.known_as != version:
            raise Refused(f"nvidia firmware file {f.path} is release {f.known_as}, not {version} as the gsp-rm file",
                          hint=PKG_HINT)
    return fw
