"""Which firmware files a GPU needs, finding them, refusing bad ones, and cutting them into load images.

Spec: specs/amd-bringup.md §5.4 (headers, parsed by :mod:`tinyhw.formats.amdfw`), §5.5 (what is
extracted from each file and loaded with which GFX firmware type, in load order), §5.6 (file names
formed from the discovered IP versions; Navi31: psp_13_0_0_sos, smu_13_0_0, sdma_6_0_0,
gc_11_0_0_{mec,imu,rlc}). Every check runs before anything is written to the GPU: a file that is
missing, truncated, fails its header checks, carries another IP version, or whose SHA-256 is not
the one of Debian's firmware-amd-graphics file of that name (a byte flip, another ASIC's file
renamed) is refused with exit 2, naming the file and the package.
"""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinyhw.autogen.amdgpu_fw_sha256 import PACKAGE, SHA256, VERSION
from tinyhw.boot.amd import ids
from tinyhw.boot.common.fwdirs import CACHE_SOURCE, SYSTEM_SOURCE, FirmwareDir, cache_root
from tinyhw.errors import Refused
from tinyhw.fileio import read_input, read_xz_input
from tinyhw.formats.amdfw import AmdFirmware, parse_amdgpu

DEFAULT_DIR = Path("/lib/firmware/amdgpu")
#: The largest firmware file read (and the most an xz file may decompress to): amdgpu's files are 0.6 MiB at
#: most in Debian's firmware-amd-graphics; 16 MiB leaves room for newer releases and stops an 8 GiB file.
MAX_FILE = 16 << 20
PKG_HINT = (f"install the debian package {PACKAGE} or run bash tests/fetch_firmware.sh (or pass --firmware-dir "
            "DIR holding the files)")


def search_dirs(env: Mapping[str, str] = os.environ) -> list[tuple[Path, str]]:
    """Where the amdgpu files are looked for when no directory is named, in order: tinyhw's cache (Debian's
    ``firmware-amd-graphics`` extracted there: ``amd/lib/firmware/amdgpu``, or ``amd/usr/lib/...`` for a
    merged-/usr package), then the system's (``/lib/firmware/amdgpu``, ``/usr/lib/firmware/amdgpu``)."""
    amd = cache_root(env) / "amd"
    return [(amd / "lib" / "firmware" / "amdgpu", CACHE_SOURCE), (amd / "usr" / "lib" / "firmware" / "amdgpu",
            CACHE_SOURCE), (DEFAULT_DIR, SYSTEM_SOURCE), (Path("/usr/lib/firmware/amdgpu"), SYSTEM_SOURCE)]


def _holds(directory: Path, names: list[str]) -> bool:
    return all(any(_exists(directory / (n + ext)) for ext in ("", ".xz", ".zst")) for n in names)


def locate(given: str | os.PathLike[str] | None, versions: dict[str, tuple[int, int, int]] | None = None,
           env: Mapping[str, str] = os.environ) -> FirmwareDir:
    """The firmware directory: ``--firmware-dir`` (``given``), else $TINYHW_AMDGPU_FIRMWARE, else the first of
    :func:`search_dirs` that holds every file the board needs (``versions``: its discovered IP versions; None:
    the first that exists), else the first that exists, else /lib/firmware/amdgpu (whose missing files the boot
    then names)."""
    if given:
        return FirmwareDir(Path(given).expanduser(), "--firmware-dir")
    if env.get("TINYHW_AMDGPU_FIRMWARE"):
        return FirmwareDir(Path(env["TINYHW_AMDGPU_FIRMWARE"]).expanduser(), "$TINYHW_AMDGPU_FIRMWARE")
    found = search_dirs(env)
    searched = tuple(d for d, _ in found)
    names: list[str] | None = None
    if versions is not None:
        try:
            names = [n for _, n in needed_files(versions)]
        except Refused:
            names = None
    existing = [(d, why) for d, why in found if d.is_dir()]
    for d, why in existing:
        if names is None or _holds(d, names):
            return FirmwareDir(d, why, searched)
    if existing:
        return FirmwareDir(*existing[0], searched)
    return FirmwareDir(DEFAULT_DIR, "the default: none in tinyhw's cache either", searched)


def firmware_dir(given: str | os.PathLike[str] | None) -> Path:
    """The directory :func:`locate` picks (without the board's versions: the first that exists)."""
    return locate(given).path


def _v(version: tuple[int, int, int]) -> str:
    return "_".join(str(x) for x in version)


def needed_files(versions: dict[str, tuple[int, int, int]]) -> list[tuple[str, str]]:
    """(role, file name) of every file the boot loads, from the discovered versions (§5.6)."""
    missing = [b for b in ("mp0", "mp1", "gc", "sdma0") if b not in versions]
    if missing:
        raise Refused(f"ip discovery does not list {', '.join(missing)}; cannot tell which firmware the board needs")
    gc = versions["gc"]
    out = [("psp", f"psp_{_v(versions['mp0'])}_sos.bin"), ("smu", f"smu_{_v(versions['mp1'])}.bin"),
           ("sdma", f"sdma_{_v(versions['sdma0'])}.bin")]
    if gc[0] >= 12:
        out += [("pfp", f"gc_{_v(gc)}_pfp.bin"), ("me", f"gc_{_v(gc)}_me.bin")]
    out.append(("mec", f"gc_{_v(gc)}_mec.bin"))
    if gc[0] >= 11:
        out.append(("imu", f"gc_{_v(gc)}_imu.bin"))
    out.append(("rlc", f"gc_{_v(gc)}_rlc.bin"))
    return out


@dataclass(frozen=True)
class Image:
    """One piece of firmware to hand to the PSP: a bootloader component or a LOAD_IP_FW image."""

    label: str  # "KDB", "SMU", "RS64_MEC", ...
    code: int  # bootloader command, or GFX firmware type
    data: bytes
    source: str  # file name

    def to_doc(self) -> dict[str, Any]:
        """The image as a JSON-ready dict: label, command or firmware type, size in bytes and source file."""
        return {"label": self.label, "code": self.code, "size": len(self.data), "file": self.source}


@dataclass
class FirmwareFile:
    """One firmware file of the boot set: its role (``psp``, ``smu``...), file name and path, bytes, parsed headers and
    SHA-256."""

    role: str
    name: str
    path: Path
    data: bytes
    parsed: AmdFirmware
    sha256: str

    @property
    def version(self) -> int:
        """The file's ``ucode_version`` from its common header (0 when it has none)."""
        return self.parsed.common.ucode_version if self.parsed.common else 0

    def to_doc(self) -> dict[str, Any]:
        """The file as a JSON-ready dict: role, name, path, size, ucode version, SHA-256 and its PSP components."""
        doc: dict[str, Any] = {"role": self.role, "file": self.name, "path": str(self.path), "size": len(self.data),
                               "ucode_version": self.version, "sha256": self.sha256}
        if self.parsed.components:
            doc["components"] = [{"name": c.name, "fw_version": c.fw_version, "size": c.size}
                                 for c in self.parsed.components]
        return doc


@dataclass
class FirmwareSet:
    """The validated files of one board, cut into what the bootloader and LOAD_IP_FW take."""

    directory: Path
    files: dict[str, FirmwareFile] = field(default_factory=dict)

    def _component(self, fw_type: int) -> bytes | None:
        psp = self.files["psp"]
        for c in psp.parsed.components:
            if c.fw_type == fw_type:
                return psp.data[c.offset:c.offset + c.size]
        return None

    def bootloader(self) -> list[Image]:
        """§5.1: the components present, in the documented order (KDB, SPL, SYS, SOC, INTF, DBG, RAS, SOS)."""
        out = []
        for label, cmd, fw_type in ids.BOOTLOADER_ORDER:
            if label == "SPL" and self._component(ids.PSP_FW_SPL) is None:
                continue  # LOAD_TOS_SPL_TABLE only when the file carries an SPL component
            data = self._component(fw_type)
            if data is not None:
                out.append(Image(label, cmd, data, self.files["psp"].name))
        return out

    def toc(self) -> bytes | None:
        """The PSP firmware's table of contents (the LOAD_TOC payload), or None when the PSP file has none."""
        return self._component(ids.PSP_FW_TOC)

    def ip_images(self) -> list[Image]:
        """§5.5: LOAD_IP_FW images in load order, SMU first and RLC_G last."""
        out: list[Image] = []
        smu = self.files["smu"]
        ch = smu.parsed.common
        assert ch is not None
        out.append(_img("SMU", smu, ch.ucode_array_offset_bytes, ch.ucode_size_bytes))
        out += _sdma(self.files["sdma"])
        for role in ("pfp", "me", "mec"):
            if role in self.files:
                out += _gfx(role, self.files[role])
        if "imu" in self.files:
            imu = self.files["imu"]
            h, uo = imu.parsed.header, _uoff(imu)
            out.append(_img("IMU_I", imu, uo + h["imu_iram_ucode_offset_bytes"], h["imu_iram_ucode_size_bytes"]))
            out.append(_img("IMU_D", imu, uo + h["imu_dram_ucode_offset_bytes"], h["imu_dram_ucode_size_bytes"]))
        out += _rlc(self.files["rlc"])
        return [i for i in out if i.data]

    def to_doc(self) -> list[dict[str, Any]]:
        """Every file of the set as :meth:`FirmwareFile.to_doc` gives it."""
        return [f.to_doc() for f in self.files.values()]


def _uoff(f: FirmwareFile) -> int:
    assert f.parsed.common is not None
    return f.parsed.common.ucode_array_offset_bytes


def _img(label: str, f: FirmwareFile, offset: int, size: int) -> Image:
    return Image(label, ids.fw_type(label), f.data[offset:offset + size], f.name)


def _sdma(f: FirmwareFile) -> list[Image]:
    h, ch = f.parsed.header, f.parsed.common
    assert ch is not None
    major = ch.header_version_major
    if major == 1:
        code = f.data[_uoff(f):_uoff(f) + ch.ucode_size_bytes]
        return [Image(name, ids.fw_type(name), code, f.name) for name in ("SDMA0", "SDMA1", "SDMA2", "SDMA3")]
    if major == 2:
        return [_img("SDMA_UCODE_TH1", f, h["ctl_ucode_offset"], h["ctl_ucode_size_bytes"]),
                _img("SDMA_UCODE_TH0", f, _uoff(f), h["ctx_ucode_size_bytes"])]
    return [_img("SDMA_UCODE_TH0", f, _uoff(f), h["ucode_size_bytes"])]


def _gfx(role: str, f: FirmwareFile) -> list[Image]:
    h, ch = f.parsed.header, f.parsed.common
    assert ch is not None
    unit = {"pfp": "PFP", "me": "ME", "mec": "MEC"}[role]
    if ch.header_version_major >= 2:
        return [_img(f"RS64_{unit}", f, h["ucode_offset_bytes"], h["ucode_size_bytes"]),
                _img(f"RS64_{unit}_P0_STACK", f, h["data_offset_bytes"], h["data_size_bytes"])]
    jt = 4 * h["jt_size"]
    out = [_img(f"CP_{unit}", f, _uoff(f), ch.ucode_size_bytes - jt)]
    if role == "mec" and jt:
        out.append(_img("CP_MEC_ME1", f, _uoff(f) + 4 * h["jt_offset"], jt))
    return out


def _rlc(f: FirmwareFile) -> list[Image]:
    h, ch = f.parsed.header, f.parsed.common
    assert ch is not None
    minor = ch.header_version_minor
    out = []
    if minor == 1:
        for lst, name in (("cntl", "RLC_RESTORE_LIST_SRM_CNTL"), ("gpm", "RLC_RESTORE_LIST_GPM_MEM"),
                          ("srm", "RLC_RESTORE_LIST_SRM_MEM")):
            d = h[f"save_restore_list_{lst}"]
            out.append(_img(name, f, d["offset_bytes"], d["size_bytes"]))
    if minor >= 2:
        out.append(_img("RLC_IRAM", f, h["rlc_iram_ucode_offset_bytes"], h["rlc_iram_ucode_size_bytes"]))
        out.append(_img("RLC_DRAM_BOOT", f, h["rlc_dram_ucode_offset_bytes"], h["rlc_dram_ucode_size_bytes"]))
    if minor == 3:
        out.append(_img("RLC_P", f, h["rlcp_ucode_offset_bytes"], h["rlcp_ucode_size_bytes"]))
        out.append(_img("RLC_V", f, h["rlcv_ucode_offset_bytes"], h["rlcv_ucode_size_bytes"]))
    out.append(_img("RLC_G", f, _uoff(f), ch.ucode_size_bytes))
    return out


def _known_as(digest: str) -> str | None:
    for name, known in SHA256.items():
        if known == digest:
            return name
    return None


def check_file(role: str, name: str, path: Path, data: bytes, *, allow_unknown: bool = False) -> FirmwareFile:
    """Refuse (exit 2) a file that is not the expected, intact ``name``; return it parsed otherwise."""
    where = f"{path}"
    parsed = parse_amdgpu(data, name)
    if parsed.problems:
        raise Refused(f"firmware file {where} is damaged ({parsed.problems[0]})", hint=PKG_HINT)
    if parsed.common is None or not parsed.header_struct:
        raise Refused(f"firmware file {where} is not an amdgpu firmware file", hint=PKG_HINT)
    want = parsed.ip_version_from_name
    ch = parsed.common
    if want is not None and (ch.ip_version_major, ch.ip_version_minor) != want[:2]:
        raise Refused(f"firmware file {where} is for ip {ch.ip_version_major}.{ch.ip_version_minor}, "
                      f"not {want[0]}.{want[1]} as its name says", hint=PKG_HINT)
    digest = hashlib.sha256(data).hexdigest()
    known = SHA256.get(name)
    if digest != known:
        other = _known_as(digest)
        if other is not None and other != name:
            raise Refused(f"firmware file {where} is {other} (another asic's file), not {name}", hint=PKG_HINT)
        if not allow_unknown:
            what = "differs from" if known else "is not"
            raise Refused(f"firmware file {where} {what} the {name} of {PACKAGE} {VERSION} "
                          f"(sha256 {digest[:16]}...: corrupted or another release)",
                          hint=f"reinstall {PACKAGE}, or pass --allow-unknown-firmware to load it anyway")
    if role == "psp" and not any(c.fw_type == ids.BOOTLOADER_ORDER[-1][2] for c in parsed.components):
        raise Refused(f"firmware file {where} holds no secure os (sos) component", hint=PKG_HINT)
    return FirmwareFile(role, name, path, data, parsed, digest)


def load(directory: Path, versions: dict[str, tuple[int, int, int]], *, allow_unknown: bool = False) -> FirmwareSet:
    """Read and check every needed file under ``directory`` (exit 2 on the first bad one)."""
    fs = FirmwareSet(directory)
    for role, name in needed_files(versions):
        path, data = read_file(directory, name)
        fs.files[role] = check_file(role, name, path, data, allow_unknown=allow_unknown)
    return fs


def read_file(directory: Path, name: str) -> tuple[Path, bytes]:
    """``name`` under ``directory``; a kernel-style ``name.xz`` is decompressed, ``name.zst`` is refused clearly.

    Read like every other input (:mod:`tinyhw.fileio`): regular files only (a fifo, device node or directory
    of that name is refused, never opened blocking), at most :data:`MAX_FILE` bytes read, and an xz file's
    decompression stops at the same cap (exit 2 beyond)."""
    path = directory / name
    what = "firmware file"
    try:
        if _exists(path):
            return path, _with_hint(read_input, path, what)
        xz = path.with_name(name + ".xz")
        if _exists(xz):
            return xz, _with_hint(read_xz_input, xz, what)
        zst = path.with_name(name + ".zst")
        if zst.is_file():
            raise Refused(f"firmware file {zst} is zstd-compressed, which python {sys.version_info.major}."
                          f"{sys.version_info.minor} cannot read",
                          hint=f"decompress it (zstd -d {zst}) into a directory and pass --firmware-dir DIR")
    except OSError as e:
        raise Refused(f"cannot read firmware file {path}: {e.strerror or e}", hint=PKG_HINT) from None
    raise Refused(f"firmware file {path} is missing", hint=PKG_HINT)


def _exists(path: Path) -> bool:
    return path.is_symlink() or path.exists()  # anything of that name (a dangling link too) is read, or refused


def _with_hint(reader: Any, path: Path, what: str) -> bytes:
    try:
        data: bytes = reader(path, MAX_FILE, what)
    except Refused as e:
        raise Refused(e.message, hint=PKG_HINT) from None
    return data


def survey(directory: Path, versions: dict[str, tuple[int, int, int]]) -> list[dict[str, Any]]:
    """For ``am info``: each needed file, whether it is present and intact, and its version (never raises)."""
    out = []
    for role, name in needed_files(versions):
        path = directory / name
        present = any(_exists(path.with_name(name + ext)) for ext in ("", ".xz", ".zst"))
        doc: dict[str, Any] = {"role": role, "file": name, "path": str(path), "present": present}
        if doc["present"]:
            try:
                path, data = read_file(directory, name)
                doc["path"] = str(path)
                f = check_file(role, name, path, data)
                doc.update(ok=True, ucode_version=f.version, sha256=f.sha256)
                if f.parsed.components:
                    doc["components"] = [{"name": c.name, "fw_version": c.fw_version}
                                         for c in f.parsed.components]
            except (Refused, OSError) as e:
                doc.update(ok=False, problem=str(e).split(";")[0])
        out.append(doc)
    return out
