"""amdgpu firmware files (``/lib/firmware/amdgpu/*.bin``): common header and type-specific headers.

Spec: specs/amd-bringup.md §5.4 (``common_firmware_header``, the per-family header table, PSP v2
``psp_fw_bin_desc``), §5.5 (what each section is and where it sits), §5.1 (``psp_fw_type`` values);
specs/data-sources.md ("Observations": ``size_bytes`` equals the file length in all 530 Debian files;
``crc32`` equals the CRC-32 of the ucode payload in only 56 of them, and the kernel never checks it,
so it is reported as "matches payload" or "not verifiable", never as a failure).

The header does not say which family a file belongs to: the kernel knows it from the file name, and
so does :func:`family_from_name`. Layouts not in the spec's table but fixed in the kernel's
``amdgpu_ucode.h`` (mc, dmcu, dmcub, gpu_info, the TA type names) are decoded too and marked so.
Any other (family, version) pair shows its extra header bytes as raw dwords.

:func:`parse_amdgpu` never raises: what was wrong is in ``AmdFirmware.problems`` as
``"0xOFF: what was found (what was expected)"``; observations that are not errors are ``notes``.
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass, field
from typing import Any

from tinyhw.formats.fwregion import Reader, Region, unique_names, within

__all__ = [
    "COMMON_FIELDS", "AmdFirmware", "CommonHeader", "Component", "family_from_name", "ip_version_from_name",
    "looks_like_amdgpu", "parse_amdgpu",
]

COMMON_SIZE = 32
#: The kernel's names for ``common_firmware_header``, in file order (§5.4).
COMMON_FIELDS = ("size_bytes", "header_size_bytes", "header_version_major", "header_version_minor",
                 "ip_version_major", "ip_version_minor", "ucode_version", "ucode_size_bytes",
                 "ucode_array_offset_bytes", "crc32")
_COMMON_FMT = "IIHHHHIIII"

#: The most PSP/TA component descriptors or SMC pptable entries a file may declare: the type
#: tables have 11 and 7 members and no Debian file has more than 6; a larger count is malformed, not decoded.
MAX_DESCRIPTORS = 64

#: ``psp_fw_type`` of a PSP v2 component (§5.1).
PSP_FW_TYPES = {1: "SOS", 2: "SYS_DRV", 3: "KDB", 4: "TOC", 5: "SPL", 6: "RL", 7: "SOC_DRV", 8: "INTF_DRV",
                9: "DBG_DRV", 10: "RAS_DRV", 11: "IPKEYMGR_DRV"}
#: ``ta_fw_type`` of a TA v2 component (kernel ``amdgpu_psp.h``; not in the spec's table).
TA_FW_TYPES = {1: "ASD", 2: "XGMI", 3: "RAS", 4: "HDCP", 5: "DTM", 6: "RAP", 7: "SECUREDISPLAY"}

# file-name token -> family (the kernel picks the header struct by what it loads)
_TOKENS = {"sos": "psp", "asd": "psp", "toc": "psp", "ta": "ta", "smc": "smc", "smu": "smc", "sdma": "sdma",
           "sdma1": "sdma", "rlc": "rlc", "pfp": "gfx", "me": "gfx", "ce": "gfx", "mec": "gfx", "mec2": "gfx",
           "mes": "mes", "mes1": "mes", "imu": "imu", "mc": "mc", "dmcu": "dmcu", "dmcub": "dmcub",
           "info": "gpu_info", "uvd": "uvd", "vce": "vce", "vcn": "vcn"}
_NAME_IP = re.compile(r"^[a-z][a-z_]*?_(\d+)_(\d+)_(\d+)(?:_|$)")

# -- struct layouts after the common header: (name, kind); kinds: I, H, desc (3 x u32 legacy
#    descriptor), rlcl (4 x u32 save/restore list). Offsets follow from the order (§5.4 table).
_DESC = ("fw_version", "offset_bytes", "size_bytes")
_RLCL = ("ucode_ver", "feature_ver", "size_bytes", "offset_bytes")
_KIND_SIZE = {"I": 4, "H": 2, "desc": 12, "rlcl": 16}

_RLC20 = [("ucode_feature_version", "I"), ("jt_offset", "I"), ("jt_size", "I"), ("save_and_restore_offset", "I"),
          ("clear_state_descriptor_offset", "I"), ("avail_scratch_ram_locations", "I"),
          ("reg_restore_list_size", "I"), ("reg_list_format_start", "I"), ("reg_list_format_separate_start", "I"),
          ("starting_offsets_start", "I"), ("reg_list_format_size_bytes", "I"),
          ("reg_list_format_array_offset_bytes", "I"), ("reg_list_size_bytes", "I"),
          ("reg_list_array_offset_bytes", "I"), ("reg_list_format_separate_size_bytes", "I"),
          ("reg_list_format_separate_array_offset_bytes", "I"), ("reg_list_separate_size_bytes", "I"),
          ("reg_list_separate_array_offset_bytes", "I")]
_RLC21 = [*_RLC20, ("reg_list_format_direct_reg_list_length", "I"), ("save_restore_list_cntl", "rlcl"),
          ("save_restore_list_gpm", "rlcl"), ("save_restore_list_srm", "rlcl")]
_RLC22 = [*_RLC21, ("rlc_iram_ucode_size_bytes", "I"), ("rlc_iram_ucode_offset_bytes", "I"),
          ("rlc_dram_ucode_size_bytes", "I"), ("rlc_dram_ucode_offset_bytes", "I")]
_RLC23 = [*_RLC22, ("rlcp_ucode_version", "I"), ("rlcp_ucode_feature_version", "I"), ("rlcp_ucode_size_bytes", "I"),
          ("rlcp_ucode_offset_bytes", "I"), ("rlcv_ucode_version", "I"), ("rlcv_ucode_feature_version", "I"),
          ("rlcv_ucode_size_bytes", "I"), ("rlcv_ucode_offset_bytes", "I")]
_RLC24 = [*_RLC23] + [(f"{w}_tap_delays_ucode_{k}_bytes", "I") for w in ("global", "se0", "se1", "se2", "se3")
                      for k in ("size", "offset")]
_PSP10 = [("sos", "desc")]
_PSP11 = [*_PSP10, ("toc", "desc"), ("kdb", "desc")]
_SDMA10 = [("ucode_feature_version", "I"), ("ucode_change_version", "I"), ("jt_offset", "I"), ("jt_size", "I")]
_SMC10 = [("ucode_start_addr", "I")]

LAYOUTS: dict[tuple[str, int, int], list[tuple[str, str]]] = {
    ("psp", 1, 0): _PSP10,
    ("psp", 1, 1): _PSP11,
    ("psp", 1, 2): [*_PSP10, ("res", "desc"), ("kdb", "desc")],
    ("psp", 1, 3): [*_PSP11, ("spl", "desc"), ("rl", "desc"), ("sys_drv_aux", "desc"), ("sos_aux", "desc")],
    ("psp", 2, 0): [("psp_fw_bin_count", "I")],
    ("psp", 2, 1): [("psp_fw_bin_count", "I"), ("psp_aux_fw_bin_index", "I")],
    ("ta", 1, 0): [("xgmi", "desc"), ("ras", "desc"), ("hdcp", "desc"), ("dtm", "desc"), ("securedisplay", "desc")],
    ("ta", 2, 0): [("ta_fw_bin_count", "I")],
    ("gfx", 1, 0): [("ucode_feature_version", "I"), ("jt_offset", "I"), ("jt_size", "I")],
    ("gfx", 2, 0): [("ucode_feature_version", "I"), ("ucode_size_bytes", "I"), ("ucode_offset_bytes", "I"),
                    ("data_size_bytes", "I"), ("data_offset_bytes", "I"), ("ucode_start_addr_lo", "I"),
                    ("ucode_start_addr_hi", "I")],
    ("mes", 1, 0): [("mes_ucode_version", "I"), ("mes_ucode_size_bytes", "I"), ("mes_ucode_offset_bytes", "I"),
                    ("mes_ucode_data_version", "I"), ("mes_ucode_data_size_bytes", "I"),
                    ("mes_ucode_data_offset_bytes", "I"), ("mes_uc_start_addr_lo", "I"), ("mes_uc_start_addr_hi", "I"),
                    ("mes_data_start_addr_lo", "I"), ("mes_data_start_addr_hi", "I")],
    ("sdma", 1, 0): _SDMA10,
    ("sdma", 1, 1): [*_SDMA10, ("digest_size", "I")],
    ("sdma", 2, 0): [("ucode_feature_version", "I"), ("ctx_ucode_size_bytes", "I"), ("ctx_jt_offset", "I"),
                     ("ctx_jt_size", "I"), ("ctl_ucode_offset", "I"), ("ctl_ucode_size_bytes", "I"),
                     ("ctl_jt_offset", "I"), ("ctl_jt_size", "I")],
    ("sdma", 3, 0): [("ucode_feature_version", "I"), ("ucode_offset_bytes", "I"), ("ucode_size_bytes", "I")],
    ("smc", 1, 0): _SMC10,
    ("smc", 2, 0): [*_SMC10, ("ppt_offset_bytes", "I"), ("ppt_size_bytes", "I")],
    ("smc", 2, 1): [*_SMC10, ("pptable_count", "I"), ("pptable_entry_offset", "I")],
    ("imu", 1, 0): [("imu_iram_ucode_size_bytes", "I"), ("imu_iram_ucode_offset_bytes", "I"),
                    ("imu_dram_ucode_size_bytes", "I"), ("imu_dram_ucode_offset_bytes", "I")],
    ("rlc", 2, 0): _RLC20,
    ("rlc", 2, 1): _RLC21,
    ("rlc", 2, 2): _RLC22,
    ("rlc", 2, 3): _RLC23,
    ("rlc", 2, 4): _RLC24,
    # kernel amdgpu_ucode.h, not in the spec's table:
    ("mc", 1, 0): [("io_debug_size_bytes", "I"), ("io_debug_array_offset_bytes", "I")],
    ("dmcu", 1, 0): [("intv_offset_bytes", "I"), ("intv_size_bytes", "I")],
    ("dmcub", 1, 0): [("inst_const_bytes", "I"), ("bss_data_bytes", "I")],
    ("gpu_info", 1, 0): [("version_major", "H"), ("version_minor", "H")],
}
# families whose files carry only the common header (kernel: uvd/vce/vcn use it alone)
_COMMON_ONLY = {"uvd", "vce", "vcn"}
_FAMILY_STRUCT = {"gfx": "gfx", "psp": "psp", "ta": "ta", "mes": "mes", "sdma": "sdma", "smc": "smc",
                  "imu": "imu", "rlc": "rlc", "mc": "mc", "dmcu": "dmcu", "dmcub": "dmcub", "gpu_info": "gpu_info"}


@dataclass(frozen=True)
class CommonHeader:
    """``common_firmware_header`` (§5.4), field names as in the kernel."""

    size_bytes: int
    header_size_bytes: int
    header_version_major: int
    header_version_minor: int
    ip_version_major: int
    ip_version_minor: int
    ucode_version: int
    ucode_size_bytes: int
    ucode_array_offset_bytes: int
    crc32: int

    def to_doc(self) -> dict[str, int]:
        """The header's fields as a JSON-ready dict (name -> value)."""
        return {k: getattr(self, k) for k in COMMON_FIELDS}


@dataclass(frozen=True)
class Component:
    """One firmware image inside a PSP/TA file: a v2 ``psp_fw_bin_desc`` or a v1 legacy descriptor."""

    name: str
    fw_type: int | None  # the v2 descriptor's type; None for a v1 (fixed-slot) descriptor
    fw_version: int
    offset: int  # absolute file offset (the descriptor's offset_bytes + ucode_array_offset_bytes)
    size: int

    def to_doc(self) -> dict[str, Any]:
        """The component as a JSON-ready dict: name, firmware type and version, offset, size."""
        return {"name": self.name, "fw_type": self.fw_type, "fw_version": self.fw_version, "offset": self.offset,
                "size": self.size}


@dataclass
class AmdFirmware:
    """Everything :func:`parse_amdgpu` found. ``regions`` are absolute, named byte ranges."""

    size: int
    common: CommonHeader | None = None
    family: str | None = None
    header_struct: str | None = None
    header: dict[str, Any] = field(default_factory=dict)
    components: list[Component] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    crc32_status: str = "not verifiable"
    ip_version_from_name: tuple[int, int, int] | None = None
    notes: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when parsing found no problems."""
        return not self.problems


def _stem(name: str) -> str:
    """``/lib/firmware/amdgpu/psp_13_0_0_sos.bin.orig`` -> ``psp_13_0_0_sos``."""
    return re.split(r"[\\/]", name)[-1].lower().split(".")[0]


def family_from_name(name: str | None) -> str | None:
    """The header family the kernel would use for a file called ``name`` (``psp_13_0_0_sos.bin`` -> psp)."""
    if not name:
        return None
    stem = _stem(name)
    for tok in reversed(stem.split("_")):
        if tok in _TOKENS:
            return _TOKENS[tok]
    return None


def ip_version_from_name(name: str | None) -> tuple[int, int, int] | None:
    """``gc_11_0_0_mec.bin`` -> (11, 0, 0); None for legacy names (``navi10_mec.bin``)."""
    if not name:
        return None
    stem = _stem(name)
    m = _NAME_IP.match(stem)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def looks_like_amdgpu(data: bytes) -> bool:
    """A cheap test for type detection: a plausible common header (not proof)."""
    if len(data) < COMMON_SIZE:
        return False
    import struct

    size, hsize, hmaj, hmin, _imaj, _imin, _uv, usize, uoff, _crc = struct.unpack_from("<" + _COMMON_FMT, data)
    return (1 <= hmaj <= 3 and hmin < 16 and COMMON_SIZE <= hsize <= 0x1000 and hsize % 4 == 0
            and size >= hsize and uoff >= COMMON_SIZE and uoff <= size and usize <= size)


def parse_amdgpu(data: bytes, name: str | None = None, family: str | None = None) -> AmdFirmware:
    """Decode an amdgpu firmware file. ``name`` (the file name) selects the family unless ``family`` is given."""
    fw = AmdFirmware(size=len(data))
    rd = Reader(data, fw.problems)
    vals = rd.unpack(_COMMON_FMT, 0, "common_firmware_header")
    if vals is None:
        return fw
    ch = fw.common = CommonHeader(*vals)
    fw.family = family or family_from_name(name)
    fw.ip_version_from_name = ip_version_from_name(name)
    _check_common(fw, ch, len(data))
    fw.regions.append(Region("common header", 0, COMMON_SIZE))
    payload = Region("ucode", ch.ucode_array_offset_bytes, ch.ucode_size_bytes)
    if ch.ucode_size_bytes and within(payload, len(data), fw.problems):
        fw.regions.append(payload)
        if zlib.crc32(memoryview(data)[payload.offset:payload.end]) == ch.crc32:
            fw.crc32_status = "matches payload"
    end = min(max(ch.header_size_bytes, _decode_specific(fw, rd, data)), len(data))
    if end > COMMON_SIZE:
        fw.regions.insert(1, Region("type-specific header", COMMON_SIZE, end - COMMON_SIZE))
    fw.regions = unique_names(fw.regions)
    return fw


def _check_common(fw: AmdFirmware, ch: CommonHeader, n: int) -> None:
    if ch.size_bytes != n:
        fw.problems.append(f"0x0: size_bytes is 0x{ch.size_bytes:x} but the file has 0x{n:x} bytes "
                           "(every amdgpu file's size_bytes equals its length)")
    if ch.header_size_bytes < COMMON_SIZE or ch.header_size_bytes > n:
        fw.problems.append(f"0x4: header_size_bytes 0x{ch.header_size_bytes:x} (expected 0x20..0x{n:x}, "
                           "within the file and at least the common header)")
    if ch.ucode_array_offset_bytes < min(ch.header_size_bytes, n):
        fw.problems.append(f"0x18: ucode_array_offset_bytes 0x{ch.ucode_array_offset_bytes:x} lies inside the "
                           f"header (expected >= header_size_bytes 0x{ch.header_size_bytes:x})")
    ip = fw.ip_version_from_name
    if ip and (ip[0], ip[1]) != (ch.ip_version_major, ch.ip_version_minor):
        fw.notes.append(f"the file name says ip {ip[0]}.{ip[1]}.{ip[2]}, the header says "
                        f"{ch.ip_version_major}.{ch.ip_version_minor}")


def _read_fields(rd: Reader, layout: list[tuple[str, str]], base: int, what: str) -> tuple[dict[str, Any], int]:
    out: dict[str, Any] = {}
    off = base
    for fname, kind in layout:
        if kind in ("I", "H"):
            v = rd.unpack(kind, off, f"{what}.{fname}")
            if v is None:
                break
            out[fname] = v[0]
        else:
            names = _DESC if kind == "desc" else _RLCL
            v = rd.unpack("I" * len(names), off, f"{what}.{fname}")
            if v is None:
                break
            out[fname] = dict(zip(names, v, strict=True))
        off += _KIND_SIZE[kind]
    return out, off


def _decode_specific(fw: AmdFirmware, rd: Reader, data: bytes) -> int:
    """Decode the family's header and its regions; return where the fixed header struct ends."""
    ch = fw.common
    assert ch is not None
    fam = fw.family
    key = (fam or "", ch.header_version_major, ch.header_version_minor)
    if fam in _COMMON_ONLY:
        fw.header_struct = "common_firmware_header"
        if ch.header_size_bytes > COMMON_SIZE:
            fw.notes.append(f"{fam} files carry only the common header; 0x{ch.header_size_bytes - COMMON_SIZE:x} "
                            "further header bytes are not decoded")
        return COMMON_SIZE
    layout = LAYOUTS.get(key)
    if layout is None:
        what = f"{fam} header v{key[1]}.{key[2]}" if fam else f"header v{key[1]}.{key[2]} of an unknown family"
        fw.notes.append(f"{what} is not decoded; its extra header bytes are shown raw")
        end = min(ch.header_size_bytes, len(data), 0x400)
        raw = [[o, int.from_bytes(data[o:o + 4], "little")] for o in range(COMMON_SIZE, end - 3, 4)]
        fw.header = {"raw_dwords": raw}
        return COMMON_SIZE
    fw.header_struct = f"{_FAMILY_STRUCT[fam or '']}_firmware_header_v{key[1]}_{key[2]}"
    fw.header, end = _read_fields(rd, layout, COMMON_SIZE, fw.header_struct)
    if len(fw.header) < len(layout):
        return end
    if ch.header_size_bytes < end:
        # raven2_rlc.bin / vega20_rlc.bin: v2.1 fields present, header_size_bytes still v2.0's 0x68
        msg = (f"0x4: header_size_bytes 0x{ch.header_size_bytes:x} is smaller than {fw.header_struct} "
               f"(0x{end:x} bytes)")
        if end <= ch.ucode_array_offset_bytes:
            fw.notes.append(msg + "; its fields are read by version, as the kernel does")
        else:
            fw.problems.append(msg + " and the struct runs into the ucode array")
    _REGIONS[fam or ""](fw, rd, data, key, end)
    return end


def _add(fw: AmdFirmware, name: str, offset: int, size: int) -> None:
    """Add a named region when it is non-empty; a region outside the file is a problem."""
    if size <= 0:
        return
    r = Region(name, offset, size)
    if within(r, fw.size, fw.problems):
        fw.regions.append(r)


def _component(fw: AmdFirmware, name: str, fw_type: int | None, version: int, rel: int, size: int) -> None:
    assert fw.common is not None
    if size <= 0:
        return
    c = Component(name, fw_type, version, fw.common.ucode_array_offset_bytes + rel, size)
    fw.components.append(c)
    _add(fw, f"component {name}", c.offset, c.size)


def _psp_like(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    h = fw.header
    if key[1] >= 2:
        count = h.get("psp_fw_bin_count", h.get("ta_fw_bin_count", 0))
        names = PSP_FW_TYPES if key[0] == "psp" else TA_FW_TYPES
        room = max(0, (len(data) - end) // 16)
        if count > MAX_DESCRIPTORS:
            field_name = "psp_fw_bin_count" if key[0] == "psp" else "ta_fw_bin_count"
            fw.problems.append(f"0x20: {field_name} {count} is more than {MAX_DESCRIPTORS} (malformed; the "
                               "component descriptors are not decoded)")
            count = 0
        elif count > room:
            fw.problems.append(f"0x20: {count} component descriptors at 0x{end:x} need 0x{16 * count:x} bytes, "
                               f"the file holds {room}")
            count = room
        _add(fw, "component table", end, 16 * count)
        for i in range(count):
            t, ver, off, size = rd.unpack("IIII", end + 16 * i, f"component descriptor {i}") or (0, 0, 0, 0)
            _component(fw, names.get(t, f"type 0x{t:x}"), t, ver, off, size)
        return
    # v1: fixed descriptors; for PSP the system driver is the bytes in front of the SOS image
    sos = h.get("sos")
    if key[0] == "psp" and sos and sos["size_bytes"]:
        _component(fw, "sys_drv", None, sos["fw_version"], 0, sos["offset_bytes"])
    for fname, v in h.items():
        if isinstance(v, dict) and fname != "res":
            _component(fw, fname, None, v["fw_version"], v["offset_bytes"], v["size_bytes"])


def _gfx(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    ch, h = fw.common, fw.header
    assert ch is not None
    uo = ch.ucode_array_offset_bytes
    if key[1] == 1:
        _add(fw, "code", uo, ch.ucode_size_bytes - 4 * h["jt_size"])
        _add(fw, "jump table", uo + 4 * h["jt_offset"], 4 * h["jt_size"])
    else:
        _add(fw, "code", h["ucode_offset_bytes"], h["ucode_size_bytes"])
        _add(fw, "data", h["data_offset_bytes"], h["data_size_bytes"])


def _mes(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    h = fw.header
    _add(fw, "code", h["mes_ucode_offset_bytes"], h["mes_ucode_size_bytes"])
    _add(fw, "data", h["mes_ucode_data_offset_bytes"], h["mes_ucode_data_size_bytes"])


def _sdma(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    ch, h = fw.common, fw.header
    assert ch is not None
    uo = ch.ucode_array_offset_bytes
    if key[1] == 1:
        _add(fw, "jump table", uo + 4 * h["jt_offset"], 4 * h["jt_size"])
    elif key[1] == 2:
        _add(fw, "ctx ucode", uo, h["ctx_ucode_size_bytes"])
        _add(fw, "ctx jump table", uo + 4 * h["ctx_jt_offset"], 4 * h["ctx_jt_size"])
        _add(fw, "ctl ucode", h["ctl_ucode_offset"], h["ctl_ucode_size_bytes"])
        _add(fw, "ctl jump table", h["ctl_ucode_offset"] + 4 * h["ctl_jt_offset"], 4 * h["ctl_jt_size"])
    else:
        _add(fw, "th0 ucode", uo, h["ucode_size_bytes"])


def _smc(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    h = fw.header
    if key[:3] == ("smc", 2, 0):
        _add(fw, "pptable", h["ppt_offset_bytes"], h["ppt_size_bytes"])
    elif key[:3] == ("smc", 2, 1):
        count, base = h["pptable_count"], h["pptable_entry_offset"]
        room = max(0, (len(data) - base) // 12) if base < len(data) else 0
        if count > MAX_DESCRIPTORS:
            fw.problems.append(f"0x24: pptable_count {count} is more than {MAX_DESCRIPTORS} (malformed; the "
                               "pptable entries are not decoded)")
            count = 0
        elif count > room:
            fw.problems.append(f"0x24: {count} pptable entries at 0x{base:x} need 0x{12 * count:x} bytes, "
                               f"the file holds {room}")
            count = room
        _add(fw, "pptable entries", base, 12 * count)
        entries = []
        for i in range(count):
            pid, off, size = rd.unpack("III", base + 12 * i, f"pptable entry {i}") or (0, 0, 0)
            entries.append({"id": pid, "ppt_offset_bytes": off, "ppt_size_bytes": size})
            _add(fw, f"pptable 0x{pid:x}", off, size)
        h["pptables"] = entries


def _imu(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    ch, h = fw.common, fw.header
    assert ch is not None
    uo = ch.ucode_array_offset_bytes
    _add(fw, "iram", uo + h["imu_iram_ucode_offset_bytes"], h["imu_iram_ucode_size_bytes"])
    _add(fw, "dram", uo + h["imu_dram_ucode_offset_bytes"], h["imu_dram_ucode_size_bytes"])


def _rlc(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    ch, h = fw.common, fw.header
    assert ch is not None
    _add(fw, "jump table", ch.ucode_array_offset_bytes + 4 * h["jt_offset"], 4 * h["jt_size"])
    _add(fw, "register list format", h["reg_list_format_array_offset_bytes"], h["reg_list_format_size_bytes"])
    _add(fw, "register list", h["reg_list_array_offset_bytes"], h["reg_list_size_bytes"])
    _add(fw, "separate register list format", h["reg_list_format_separate_array_offset_bytes"],
         h["reg_list_format_separate_size_bytes"])
    _add(fw, "separate register list", h["reg_list_separate_array_offset_bytes"], h["reg_list_separate_size_bytes"])
    for lst in ("cntl", "gpm", "srm"):
        d = h.get(f"save_restore_list_{lst}")
        if d:
            _add(fw, f"save/restore list {lst}", d["offset_bytes"], d["size_bytes"])
    for part in ("rlc_iram", "rlc_dram", "rlcp", "rlcv", "global_tap_delays", "se0_tap_delays", "se1_tap_delays",
                 "se2_tap_delays", "se3_tap_delays"):
        if f"{part}_ucode_size_bytes" in h:
            _add(fw, part.replace("_", " "), h[f"{part}_ucode_offset_bytes"], h[f"{part}_ucode_size_bytes"])


def _misc(fw: AmdFirmware, rd: Reader, data: bytes, key: tuple[str, int, int], end: int) -> None:
    ch, h = fw.common, fw.header
    assert ch is not None
    uo = ch.ucode_array_offset_bytes
    if key[0] == "mc":
        _add(fw, "io debug", h["io_debug_array_offset_bytes"], h["io_debug_size_bytes"])
    elif key[0] == "dmcu":
        _add(fw, "interrupt vectors", uo + h["intv_offset_bytes"], h["intv_size_bytes"])
    elif key[0] == "dmcub":
        _add(fw, "inst const", uo, h["inst_const_bytes"])
        _add(fw, "bss data", uo + h["inst_const_bytes"], h["bss_data_bytes"])


_REGIONS = {"psp": _psp_like, "ta": _psp_like, "gfx": _gfx, "mes": _mes, "sdma": _sdma, "smc": _smc, "imu": _imu,
            "rlc": _rlc, "mc": _misc, "dmcu": _misc, "dmcub": _misc, "gpu_info": _misc}
