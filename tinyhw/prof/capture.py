"""Loading a tinygrad SQTT/PMC capture: a profile pickle or a directory of plain files.

specs/sqtt-pmc.md §7 (profile events) and §11.2 (loading without tinygrad); the directory form is
the one of ``tests/data/sqtt/*/*/`` (``capture.json`` + ``sqtt_*.bin`` + ``pmc_*.bin`` + ``*.elf``).
Inputs larger than :data:`MAX_INPUT_BYTES` are refused before they are read (exit 2).
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.formats.tgpickle import MAX_PICKLE_BYTES, loads_profile

__all__ = ["MAX_INPUT_BYTES", "Capture", "Program", "SqttBlob", "load_capture", "target_name"]

MAX_INPUT_BYTES = MAX_PICKLE_BYTES  # 1 GiB: for a pickle the file, for a directory all files it names


@dataclass
class Program:
    tag: int
    name: str
    base: int
    lib: bytes
    device: str = ""


@dataclass
class SqttBlob:
    kern: int
    exec_tag: int
    se: int
    itrace: bool
    blob: bytes
    device: str = ""
    decoded: Any = field(default=None, repr=False, compare=False)   # the Trace, once decoded


@dataclass
class PmcBlob:
    kern: int
    exec_tag: int
    samples: list[dict]
    blob: bytes
    device: str = ""


@dataclass
class Capture:
    source: str
    props: dict[str, Any]
    programs: dict[int, Program] = field(default_factory=dict)
    sqtt: list[SqttBlob] = field(default_factory=list)
    pmc: list[PmcBlob] = field(default_factory=list)
    other_devices: list[str] = field(default_factory=list)   # traced devices left out (one is shown)

    @property
    def target(self) -> str:
        return target_name(int(self.props.get("gfx_target_version") or 0))

    @property
    def arch(self) -> str:
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
        raise Refused(f"cannot read {path}: {e.strerror or e}") from None
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
    if data.lstrip()[:1] == b"{":
        raise Refused(f"{p} is JSON; pass the capture directory that holds it")
    return _from_events(str(p), loads_profile(data, max_bytes=max_bytes))


def _from_events(source: str, events: list[Any]) -> Capture:
    cap = Capture(source, {})
    props: dict[str, dict] = {}
    programs: list[Program] = []
    for ev in events:
        kind = getattr(ev, "type_name", None)
        f = getattr(ev, "fields", None)
        if kind is None or not isinstance(f, dict):
            continue
        dev = str(f.get("device", ""))
        if kind == "ProfileDeviceEvent":
            if isinstance(f.get("props"), dict):
                props.setdefault(dev, dict(f["props"]))
        elif kind == "ProfileProgramEvent":
            tag = _int(f.get("tag"), -1)
            lib = f.get("lib")
            programs.append(Program(tag, str(f.get("name", "")), _int(f.get("base"), 0),
                                    bytes(lib) if isinstance(lib, (bytes, bytearray)) else b"", dev))
        elif kind == "ProfileSQTTEvent":
            blob = f.get("blob")
            if isinstance(blob, (bytes, bytearray)):
                cap.sqtt.append(SqttBlob(_int(f.get("kern"), -1), _int(f.get("exec_tag"), 0), _int(f.get("se"), 0),
                                         bool(f.get("itrace")), bytes(blob), dev))
        elif kind == "ProfilePMCEvent":
            blob = f.get("blob")
            sched = f.get("sched") or []
            samples = [dict(s.fields) for s in sched if hasattr(s, "fields")]
            if isinstance(blob, (bytes, bytearray)):
                cap.pmc.append(PmcBlob(_int(f.get("kern"), -1), _int(f.get("exec_tag"), 0), samples, bytes(blob),
                                       dev))
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


def _int(v: Any, default: int) -> int:
    try:
        return int(v)
    except (TypeError, ValueError):
        return default


def _load_dir(d: Path, max_bytes: int) -> Capture:
    meta_path = d / "capture.json"
    if not meta_path.is_file():
        raise Refused(f"{d} has no capture.json; pass a profile pickle or a capture directory")
    budget = [max_bytes]

    def read(name: Any) -> bytes:
        if not isinstance(name, str) or not name or "/" in name or "\\" in name or name in (".", ".."):
            raise Refused(f"capture.json names the file {name!r}, which is not a plain name in {d}")
        fp = d / name
        size = _regular_size(fp)
        budget[0] -= size
        if budget[0] < 0:
            raise Refused(f"the files of {d} exceed the {max_bytes}-byte input limit")
        return fp.read_bytes()

    try:
        meta = json.loads(read("capture.json"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise Refused(f"{meta_path}: not json ({e})") from None
    if not isinstance(meta, dict):
        raise Refused(f"{meta_path}: expected an object")
    cap = Capture(str(d), {})
    props: dict[str, dict] = {}
    programs: list[Program] = []
    try:
        for dev in meta.get("devices") or []:
            if isinstance(dev.get("props"), dict):
                props.setdefault(str(dev.get("device", "")), dict(dev["props"]))
        for pr in meta.get("programs") or []:
            programs.append(Program(int(pr["tag"]), str(pr.get("name", "")), int(pr.get("base") or 0),
                                    read(pr["file"]) if pr.get("file") else b"", str(pr.get("device", ""))))
        for s in meta.get("sqtt") or []:
            cap.sqtt.append(SqttBlob(int(s["kern"]), int(s.get("exec_tag", 0)), int(s["se"]), bool(s.get("itrace")),
                                     read(s["file"]), str(s.get("device", ""))))
        for pm in meta.get("pmc") or []:
            cap.pmc.append(PmcBlob(int(pm["kern"]), int(pm.get("exec_tag", 0)), list(pm.get("samples") or []),
                                   read(pm["file"]), str(pm.get("device", ""))))
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise Refused(f"{meta_path}: malformed entry ({type(e).__name__}: {e})") from None
    if not cap.sqtt and not cap.pmc:
        raise Refused(f"{d} holds no sqtt or pmc entries")
    return _one_device(cap, props, programs)
