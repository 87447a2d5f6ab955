"""The code object's kernel metadata: the ``NT_AMDGPU_METADATA`` note (msgpack), per kernel its arguments.

Written from LLVM's "AMDGPUUsage" ("Code Object V3+ Metadata": note name ``AMDGPU``, type 32, a msgpack map with
``amdhsa.kernels``, each kernel's ``.name``, ``.kernarg_segment_size`` and ``.args`` with ``.offset``, ``.size``
and ``.value_kind``) and specs/amd-compute.md §3.1/§3.5, and from the msgpack format specification (the subset a
metadata map uses). Pure: takes ``bytes``; every length is checked against what is left, nesting is bounded.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from tinyhw.formats.elf import ElfFile

NT_AMDGPU_METADATA = 32
SHT_NOTE = 7
MAX_DEPTH = 16


class MetadataError(ValueError):
    """Malformed metadata (the message says where)."""


@dataclass(frozen=True)
class KernelArg:
    """One kernel argument of the code object's metadata (``.args``): where it sits in the kernarg segment."""

    offset: int
    size: int
    kind: str  # .value_kind: global_buffer, by_value, hidden_block_count_x, ...
    name: str = ""


@dataclass(frozen=True)
class KernelMeta:
    """One kernel of the metadata note (``amdhsa.kernels``): its name, kernarg segment size and arguments."""

    name: str
    kernarg_size: int
    args: tuple[KernelArg, ...]

    @property
    def buffers(self) -> list[KernelArg]:
        """The pointer arguments (``global_buffer``), in order: what ``kernels exec --buffer`` fills."""
        return [a for a in self.args if a.kind == "global_buffer"]


def unpack(data: bytes) -> Any:
    """One msgpack value from ``data`` (must use all of it)."""
    value, at = _value(memoryview(data), 0, 0)
    if at != len(data):
        raise MetadataError(f"{len(data) - at} bytes after the msgpack value")
    return value


def _need(buf: memoryview, at: int, n: int) -> None:
    if n < 0 or at + n > len(buf):
        raise MetadataError(f"msgpack value at {at} needs {n} bytes, {len(buf) - at} are left")


def _value(buf: memoryview, at: int, depth: int) -> tuple[Any, int]:
    if depth > MAX_DEPTH:
        raise MetadataError("msgpack nesting deeper than 16")
    _need(buf, at, 1)
    b = buf[at]
    at += 1
    if b <= 0x7F:
        return b, at
    if b >= 0xE0:
        return b - 0x100, at
    if 0x80 <= b <= 0x8F:
        return _map(buf, at, b & 0xF, depth)
    if 0x90 <= b <= 0x9F:
        return _array(buf, at, b & 0xF, depth)
    if 0xA0 <= b <= 0xBF:
        return _str(buf, at, b & 0x1F)
    fixed = {0xC0: None, 0xC2: False, 0xC3: True}
    if b in fixed:
        return fixed[b], at
    sized = {0xCC: "<B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q", 0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
             0xCA: ">f", 0xCB: ">d"}
    if b in sized:
        fmt = sized[b]
        n = struct.calcsize(fmt)
        _need(buf, at, n)
        return struct.unpack_from(fmt, buf, at)[0], at + n
    lengths = {0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"), 0xC4: (">B", "bin"),
               0xC5: (">H", "bin"), 0xC6: (">I", "bin"), 0xDC: (">H", "array"), 0xDD: (">I", "array"),
               0xDE: (">H", "map"), 0xDF: (">I", "map")}
    if b in lengths:
        fmt, kind = lengths[b]
        n = struct.calcsize(fmt)
        _need(buf, at, n)
        count = struct.unpack_from(fmt, buf, at)[0]
        at += n
        if kind == "str":
            return _str(buf, at, count)
        if kind == "bin":
            _need(buf, at, count)
            return bytes(buf[at:at + count]), at + count
        return (_array if kind == "array" else _map)(buf, at, count, depth)
    raise MetadataError(f"msgpack type byte 0x{b:02x} at {at - 1} is not used by code object metadata")


def _str(buf: memoryview, at: int, n: int) -> tuple[str, int]:
    _need(buf, at, n)
    return bytes(buf[at:at + n]).decode("utf-8", errors="replace"), at + n


def _array(buf: memoryview, at: int, n: int, depth: int) -> tuple[list, int]:
    _need(buf, at, n)  # at least one byte per element
    out = []
    for _ in range(n):
        v, at = _value(buf, at, depth + 1)
        out.append(v)
    return out, at


def _map(buf: memoryview, at: int, n: int, depth: int) -> tuple[dict, int]:
    _need(buf, at, 2 * n)
    out = {}
    for _ in range(n):
        k, at = _value(buf, at, depth + 1)
        v, at = _value(buf, at, depth + 1)
        if isinstance(k, (list, dict)):
            raise MetadataError("a msgpack map key is a container")
        out[k] = v
    return out, at


def metadata_note(data: bytes, elf: ElfFile) -> bytes | None:
    """The descriptor bytes of the ``AMDGPU`` note of type 32, None when the code object has none."""
    for sec in elf.sections:
        if sec.type != SHT_NOTE or not sec.size or sec.offset + sec.size > len(data):
            continue
        at, end = sec.offset, sec.offset + sec.size
        while at + 12 <= end:
            namesz, descsz, ntype = struct.unpack_from("<III", data, at)
            name_at = at + 12
            desc_at = name_at + (-(-namesz // 4) * 4)
            nxt = desc_at + (-(-descsz // 4) * 4)
            if nxt > end:
                raise MetadataError(f"note at 0x{at:x} runs past its section")
            if ntype == NT_AMDGPU_METADATA and bytes(data[name_at:name_at + namesz]).rstrip(b"\0") == b"AMDGPU":
                return bytes(data[desc_at:desc_at + descsz])
            at = nxt
    return None


def kernel_metadata(data: bytes, elf: ElfFile) -> dict[str, KernelMeta]:
    """Kernel name -> its metadata; {} when the code object has no metadata note. Raises MetadataError."""
    raw = metadata_note(data, elf)
    if raw is None:
        return {}
    doc = unpack(raw)
    kernels = doc.get("amdhsa.kernels") if isinstance(doc, dict) else None
    if not isinstance(kernels, list):
        raise MetadataError("the metadata has no amdhsa.kernels list")
    out = {}
    for k in kernels:
        if not isinstance(k, dict) or not isinstance(k.get(".name"), str):
            raise MetadataError("a kernel entry without a .name")
        args = []
        for a in k.get(".args", []) or []:
            if not isinstance(a, dict) or not all(isinstance(a.get(f), int) for f in (".offset", ".size")):
                raise MetadataError(f"kernel {k['.name']}: an argument without .offset/.size")
            args.append(KernelArg(a[".offset"], a[".size"], str(a.get(".value_kind", "")), str(a.get(".name", ""))))
        size = k.get(".kernarg_segment_size", 0)
        out[k[".name"]] = KernelMeta(k[".name"], size if isinstance(size, int) else 0, tuple(args))
    return out
