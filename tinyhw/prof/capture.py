"""Loading a tinygrad SQTT/PMC capture: a profile pickle or a directory of plain files.

specs/sqtt-pmc.md §7 (profile events) and §11.2 (loading without tinygrad); the directory form is
the one of ``tests/data/sqtt/*/*/`` (``capture.json`` + ``sqtt_*.bin`` + ``pmc_*.bin`` + ``*.elf``).
Inputs larger than :data:`MAX_INPUT_BYTES` are refused before they are read (exit 2). Both forms go
through the same field converters: each field the tools use is checked for its type and range and
refused by name (exit 2) otherwise; nothing loaded is ever formatted with ``str``/``repr``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats import boundedjson
from tinyhw.formats.fields import MISSING, int_field, kind
from tinyhw.formats.tgpickle import MAX_PICKLE_BYTES, loads_profile

__all__ = ["MAX_INPUT_BYTES", "Capture", "Program", "SqttBlob", "load_capture", "target_name"]

MAX_INPUT_BYTES = MAX_PICKLE_BYTES  # 1 GiB: for a pickle the file, for a directory all files it names


@dataclass
class Program:
    """A code object the profile holds: its tag, kernel name, load address and ELF bytes."""
    tag: int
    name: str
    base: int
    lib: bytes
    device: str = ""


@dataclass
class SqttBlob:
    """One SQTT stream: the kernel dispatch and shader engine it belongs to, and its bytes."""
    kern: int
    exec_tag: int
    se: int
    itrace: bool
    blob: bytes
    device: str = ""
    decoded: Any = field(default=None, repr=False, compare=False)   # the Trace, once decoded


@dataclass
class PmcBlob:
    """The PMC samples and their bytes for one kernel dispatch."""
    kern: int
    exec_tag: int
    samples: list[dict]
    blob: bytes
    device: str = ""


@dataclass
class Capture:
    """A loaded profile: device properties, programs, SQTT streams and PMC blobs."""
    source: str
    props: dict[str, Any]
    programs: dict[int, Program] = field(default_factory=dict)
    sqtt: list[SqttBlob] = field(default_factory=list)
    pmc: list[PmcBlob] = field(default_factory=list)
    other_devices: list[str] = field(default_factory=list)   # traced devices left out (one is shown)

    @property
    def target(self) -> str:
        """The device's gfx target (``gfx1100``, ...) from its ``gfx_target_version``."""
        return target_name(int(self.props.get("gfx_target_version") or 0))

    @property
    def arch(self) -> str:
        """The device's family: ``rdna3``, ``rdna4`` or ``cdna``."""
        t = self.target
        return "rdna3" if t.startswith("gfx11") else "rdna4" if t.startswith("gfx12") else "cdna"

    def dispatches(self) -> list[tuple[int, int]]:
        """(kern, exec_tag) of every kernel run, in order of first appearance."""
        seen: dict[tuple[int, int], None] = {}
        for s in self.sqtt:
            seen.setdefault((s.kern, s.exec_tag), None)
        for p in self.pmc:
            seen.setdefault((p.kern, p.exec_tag), None)
        return list(seen)

    def kernel_name(self, kern: int) -> str:
        """The name of kernel ``kern``, or ``kern<N>`` when its program is not in the capture."""
        p = self.programs.get(kern)
        return p.name if p else f"kern{kern}"


def target_name(version: int) -> str:
    """``gfx_target_version`` (e.g. 110000, 120001, 90500, 90010) → ``gfx1100``, ``gfx1201``, ``gfx950``, ``gfx90a``."""
    if version <= 0:
        return "unknown"
    major, minor, step = version // 10000, (version // 100) % 100, version % 100
    return f"gfx{major}{minor:x}{step:x}"


def _regular_size(path: Path) -> int:
    try:
        st = path.stat()
    except OSError as e:
        raise Refused(f"cannot read {path}: {(e.strerror or str(e)).lower()}", hint="check the path") from None
    if not stat.S_ISREG(st.st_mode):
        raise Refused(f"{path} is not a regular file")
    return st.st_size


def load_capture(path: str | os.PathLike[str], *, max_bytes: int = MAX_INPUT_BYTES) -> Capture:
    """Load a profile pickle or a capture directory; refuse (exit 2) anything else."""
    p = Path(path)
    if str(path) == "":
        raise Refused("empty capture path")
    if p.is_dir():
        return _load_dir(p, max_bytes)
    size = _regular_size(p)
    if size > max_bytes:
        raise Refused(f"{p} is {size} bytes, over the {max_bytes}-byte input limit")
    try:
        data = p.read_bytes()
    except OSError as e:
        raise Refused(f"cannot read {p}: {e.strerror or e}") from None
    if not data:
        raise Refused(f"{p} is empty: not a profile pickle",
                      hint="pass a tinygrad profile pickle or a capture directory")
    if data.lstrip()[:1] == b"{":
        raise Refused(f"{p} is JSON; pass the capture directory that holds it")
    return _from_events(str(p), loads_profile(data, max_bytes=max_bytes, source=str(p)))


_MISSING = MISSING
_kind = kind
U64 = (1 << 64) - 1
# Identifiers, handles, addresses and properties are bounded only by what the producer can write: tinygrad reads
# KFD's topology properties as Python ints of up to 64 bits (unique_id, local_mem_size, ...) and numbers programs
# and dispatches with unbounded counters; a value outside signed/unsigned 64 bits is refused. Sizes, counts and
# indices (se, entries) keep their tight bounds.
ID_LO, ID_HI = -1, U64
PROP_LO = -(1 << 63)
MAX_ENTRIES = 1 << 16      # events of one kind, schedule entries of one dispatch
# capture.json: the JSON values it may hold bound the objects parsing builds (a file of empty objects would
# otherwise cost about 25 times its size); every list it holds is bounded by MAX_ENTRIES anyway.
MAX_META_BYTES = 64 << 20
MAX_META_VALUES = 1 << 21
PROPS_INT = {"gfx_target_version": 999_999}   # others: any signed or unsigned 64-bit value


def _get(f: Any, key: str, where: str) -> Any:
    if not isinstance(f, dict):
        raise Refused(f"{where} is a {_kind(f)}, not an object with fields")
    return f.get(key, _MISSING)


def _int_field(f: Any, key: str, where: str, *, lo: int = 0, hi: int = U64, default: Any = _MISSING) -> int:
    return int_field(f, key, where, lo=lo, hi=hi, default=default)


def _str_field(f: Any, key: str, where: str, *, default: str = "", maxlen: int = 256) -> str:
    v = _get(f, key, where)
    if v is _MISSING or v is None:
        return default
    if not isinstance(v, str):
        raise Refused(f"{where}: field {key!r} is a {_kind(v)}, not a string")
    if len(v) > maxlen:
        raise Refused(f"{where}: field {key!r} is {len(v)} characters long (at most {maxlen})")
    return v


def _bool_field(f: Any, key: str, where: str) -> bool:
    v = _get(f, key, where)
    if v is _MISSING or v is None:
        return False
    if isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)):
        return bool(v)
    raise Refused(f"{where}: field {key!r} is a {_kind(v)}, not a boolean")


def _bytes_field(f: Any, key: str, where: str) -> bytes | None:
    v = _get(f, key, where)
    if v is _MISSING or v is None:
        return None
    if not isinstance(v, bytes | bytearray):
        raise Refused(f"{where}: field {key!r} is a {_kind(v)}, not bytes")
    return bytes(v)


def _list_field(f: Any, key: str, where: str) -> list[Any]:
    v = _get(f, key, where)
    if v is _MISSING or v is None:
        return []
    if not isinstance(v, list | tuple):
        raise Refused(f"{where}: field {key!r} is a {_kind(v)}, not a list")
    if len(v) > MAX_ENTRIES:
        raise Refused(f"{where}: field {key!r} has {len(v)} entries (at most {MAX_ENTRIES})")
    return list(v)


def _props(f: Any, where: str) -> dict[str, Any] | None:
    """A device's properties: string keys, integer values (the ones tinyhw reads range-checked); else None."""
    v = _get(f, "props", where)
    if v is _MISSING or v is None:
        return None
    if not isinstance(v, dict):
        raise Refused(f"{where}: field 'props' is a {_kind(v)}, not an object")
    out: dict[str, Any] = {}
    for k in v:
        if not isinstance(k, str) or len(k) > 64:
            raise Refused(f"{where}: field 'props' has a key that is not a short string")
        out[k] = _int_field(v, k, f"{where} props", lo=PROP_LO,
                             hi=PROPS_INT.get(k, U64), default=None)
    return out


def _samples(sched: list[Any], where: str, key: str) -> list[dict]:
    """The PMC schedule: each entry's fields (a tinygrad PMCSample record or a JSON object); types checked later."""
    out = []
    for i, s in enumerate(sched):
        fields = getattr(s, "fields", s)
        if not isinstance(fields, dict):
            raise Refused(f"{where}: {key}[{i}] is a {_kind(s)}, not a counter sample")
        out.append(dict(fields))
    return out


def _from_events(source: str, events: list[Any]) -> Capture:
    cap = Capture(source, {})
    props: dict[str, dict] = {}
    programs: list[Program] = []
    for i, ev in enumerate(events):
        kind = getattr(ev, "type_name", None)
        f = getattr(ev, "fields", None)
        if not isinstance(kind, str) or not isinstance(f, dict):
            continue
        if kind not in ("ProfileDeviceEvent", "ProfileProgramEvent", "ProfileSQTTEvent", "ProfilePMCEvent"):
            continue
        where = f"{source}: event {i} ({kind})"
        dev = _str_field(f, "device", where)
        if kind == "ProfileDeviceEvent":
            p = _props(f, where)
            if p is not None:
                props.setdefault(dev, p)
        elif kind == "ProfileProgramEvent":
            lib = _bytes_field(f, "lib", where)
            programs.append(Program(_int_field(f, "tag", where, lo=ID_LO, hi=ID_HI, default=-1),
                                    _str_field(f, "name", where), _int_field(f, "base", where, default=0),
                                    lib or b"", dev))
        elif kind == "ProfileSQTTEvent":
            blob = _bytes_field(f, "blob", where)
            if blob is not None:
                cap.sqtt.append(SqttBlob(_int_field(f, "kern", where, lo=ID_LO, hi=ID_HI, default=-1),
                                         _int_field(f, "exec_tag", where, default=0),
                                         _int_field(f, "se", where, hi=1 << 10, default=0),
                                         _bool_field(f, "itrace", where), blob, dev))
        else:
            blob = _bytes_field(f, "blob", where)
            samples = _samples(_list_field(f, "sched", where), where, "sched")
            if blob is not None:
                cap.pmc.append(PmcBlob(_int_field(f, "kern", where, lo=ID_LO, hi=ID_HI, default=-1),
                                       _int_field(f, "exec_tag", where, default=0), samples, blob, dev))
        if len(cap.sqtt) > MAX_ENTRIES or len(programs) > MAX_ENTRIES or len(cap.pmc) > MAX_ENTRIES:
            raise Refused(f"{source} has more than {MAX_ENTRIES} events of one kind")
    if not cap.sqtt and not cap.pmc:
        raise Refused(f"{source} holds no sqtt or pmc events; capture with VIZ=-2 (or SQTT=1 PMC=1) on an amd gpu")
    return _one_device(cap, props, programs)


def _one_device(cap: Capture, props: dict[str, dict], programs: list[Program]) -> Capture:
    """Keep the first traced device's events (a profile of several GPUs is shown one GPU at a time)."""
    traced = list(dict.fromkeys([s.device for s in cap.sqtt] + [p.device for p in cap.pmc]))
    dev = traced[0]
    cap.other_devices = traced[1:]
    cap.sqtt = [s for s in cap.sqtt if s.device == dev]
    cap.pmc = [p for p in cap.pmc if p.device == dev]
    cap.programs = {p.tag: p for p in programs if p.device == dev or not p.device}
    cap.props = props.get(dev) or next((v for v in props.values() if v.get("gfx_target_version")), {})
    return cap


def _load_dir(d: Path, max_bytes: int) -> Capture:
    meta_path = d / "capture.json"
    if not meta_path.is_file():
        raise Refused(f"{d} has no capture.json; pass a profile pickle or a capture directory")
    budget = [max_bytes]

    def read(name: Any) -> bytes:
        if name is _MISSING:
            raise Refused(f"{meta_path}: an entry lacks its 'file' field")
        if not isinstance(name, str):
            raise Refused(f"capture.json names a file by a {_kind(name)}, not a plain name in {d}")
        if not name or "/" in name or "\\" in name or name in (".", "..") or len(name) > 255:
            raise Refused(f"capture.json names the file {name[:80]!r}, which is not a plain name in {d}")
        fp = d / name
        size = _regular_size(fp)
        budget[0] -= size
        if budget[0] < 0:
            raise Refused(f"the files of {d} exceed the {max_bytes}-byte input limit")
        return fp.read_bytes()

    if _regular_size(meta_path) > MAX_META_BYTES:
        raise Refused(f"{meta_path} is over the {MAX_META_BYTES}-byte limit for a capture's json")
    meta = boundedjson.loads(read("capture.json"), str(meta_path), max_bytes=MAX_META_BYTES,
                             max_values=MAX_META_VALUES, allow_nan=True)
    if not isinstance(meta, dict):
        raise Refused(f"{meta_path}: expected an object")
    cap = Capture(str(d), {})
    props: dict[str, dict] = {}
    programs: list[Program] = []
    top = f"{meta_path}"
    for i, dev in enumerate(_list_field(meta, "devices", top)):
        where = f"{meta_path}: devices[{i}]"
        p = _props(dev, where)
        if p is not None:
            props.setdefault(_str_field(dev, "device", where), p)
    for i, pr in enumerate(_list_field(meta, "programs", top)):
        where = f"{meta_path}: programs[{i}]"
        file = _get(pr, "file", where)
        programs.append(Program(_int_field(pr, "tag", where, lo=ID_LO, hi=ID_HI), _str_field(pr, "name", where),
                                _int_field(pr, "base", where, default=0),
                                read(file) if file not in (_MISSING, None, "") else b"",
                                _str_field(pr, "device", where)))
    for i, s in enumerate(_list_field(meta, "sqtt", top)):
        where = f"{meta_path}: sqtt[{i}]"
        cap.sqtt.append(SqttBlob(_int_field(s, "kern", where, lo=ID_LO, hi=ID_HI),
                                 _int_field(s, "exec_tag", where, default=0), _int_field(s, "se", where, hi=1 << 10),
                                 _bool_field(s, "itrace", where), read(_get(s, "file", where)),
                                 _str_field(s, "device", where)))
    for i, pm in enumerate(_list_field(meta, "pmc", top)):
        where = f"{meta_path}: pmc[{i}]"
        cap.pmc.append(PmcBlob(_int_field(pm, "kern", where, lo=ID_LO, hi=ID_HI),
                               _int_field(pm, "exec_tag", where, default=0),
                               _samples(_list_field(pm, "samples", where), where, "samples"),
                               read(_get(pm, "file", where)),
                               _str_field(pm, "device", where)))
    if not cap.sqtt and not cap.pmc:
        raise Refused(f"{d} holds no sqtt or pmc entries")
    return _one_device(cap, props, programs)
