"""Type and range checks of a kernel build's ``manifest.json`` before anything in it is used.

A manifest can come from the user (``kernels run --device cuda:N --build-dir DIR``), so every field that
``kernels run`` reads is checked here, and the first one that is missing, of the wrong type or out of range
is refused (exit 2) by its path (``probes[1].kernels[0].grid``). What is checked: the format tag and target,
each probe's name, element count, buffers (name, dtype, count, role) and kernels (name, a plain file name in
the build folder, grid and block sizes, the buffer each parameter takes, the binary's size and sha256), and
for the probe that runs, that its buffers are the ones its host side computes. Fields nothing reads
(summaries, source hashes, the AMD kernel descriptor) may be anything. The JSON itself is read through the
bounded input reader, with nesting depth and NaN/Infinity refused.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused

__all__ = ["MAX_MANIFEST_BYTES", "check_manifest", "parse_manifest"]

MAX_MANIFEST_BYTES = 1 << 20
MAX_DEPTH = 16
MAX_PROBES = 64
MAX_BUFFERS = 16
MAX_KERNELS = 16
MAX_ELEMENTS = 1 << 30  # 4 GiB per u32 buffer
MAX_GRID = (1 << 31) - 1  # CUDA's x limit (y and z are smaller: the driver refuses those at launch)
MAX_BLOCK = 1024  # threads per block on every target
MAX_BINARY = 32 << 20
TARGETS = ("sm_90", "gfx1100", "gfx1200", "cpu")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
_FILE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,199}")
_SHA = re.compile(r"[0-9a-f]{64}")


def _fail(path: str, field: str, why: str) -> Refused:
    return Refused(f"{path}: {field} {why}", hint="rebuild it: tinyhw kernels build --target sm_90 -o DIR")


def _depth(value: Any, limit: int) -> int:
    """Nesting depth of a decoded JSON value, without recursion (a deep one must not raise RecursionError)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        deepest = max(deepest, d)
        if deepest > limit:
            return deepest
        if isinstance(v, dict):
            stack.extend((x, d + 1) for x in v.values())
        elif isinstance(v, list):
            stack.extend((x, d + 1) for x in v)
    return deepest


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def parse_manifest(data: bytes, path: str) -> Any:
    """Decode the manifest's JSON (refused, exit 2, when it is not JSON or nests deeper than 16)."""
    if len(data) > MAX_MANIFEST_BYTES:
        raise _fail(path, "the file", f"is larger than {MAX_MANIFEST_BYTES} bytes")
    text = data.decode("utf-8", errors="replace")
    # a cheap bound before json recurses: nesting needs brackets
    if text.count("[") + text.count("{") > MAX_MANIFEST_BYTES // 4:
        raise _fail(path, "the file", "holds too many arrays and objects")
    try:
        doc = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        raise _fail(path, "the json", f"nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise Refused(f"{path} is not valid json: {e}", hint="rebuild it: tinyhw kernels build") from None
    if _depth(doc, MAX_DEPTH) > MAX_DEPTH:
        raise _fail(path, "the json", f"nests deeper than {MAX_DEPTH} levels")
    return doc


class _Checker:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, field: str, why: str) -> Refused:
        return _fail(self.path, field, why)

    def obj(self, value: Any, field: str) -> dict:
        if not isinstance(value, dict):
            raise self.fail(field, f"must be an object, not {_kind(value)}")
        return value

    def get(self, parent: dict, key: str, field: str) -> Any:
        if key not in parent:
            raise self.fail(f"{field}.{key}" if field else key, "is missing")
        return parent[key]

    def integer(self, value: Any, field: str, lo: int, hi: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(field, f"must be an integer, not {_kind(value)}")
        if not lo <= value <= hi:
            raise self.fail(field, f"is {value}, outside {lo}..{hi}")
        return value

    def string(self, value: Any, field: str, pattern: re.Pattern[str] | None = None,
               choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(value, str):
            raise self.fail(field, f"must be a string, not {_kind(value)}")
        if choices is not None and value not in choices:
            raise self.fail(field, f"is {value[:40]!r}, not one of {', '.join(choices)}")
        if pattern is not None and not pattern.fullmatch(value):
            raise self.fail(field, f"{value[:40]!r} is not a valid name here")
        return value

    def array(self, value: Any, field: str, lo: int, hi: int) -> list:
        if not isinstance(value, list):
            raise self.fail(field, f"must be an array, not {_kind(value)}")
        if not lo <= len(value) <= hi:
            raise self.fail(field, f"has {len(value)} entries, expected {lo}..{hi}")
        return value

    def dims(self, value: Any, field: str, hi: int) -> list[int]:
        dims = self.array(value, field, 3, 3)
        return [self.integer(d, f"{field}[{i}]", 1, hi) for i, d in enumerate(dims)]


def _kind(value: Any) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null",
            int: "an integer", float: "a number"}.get(type(value), type(value).__name__)


def check_manifest(doc: Any, path: str, fmt: str) -> dict:
    """Check every field ``kernels run`` reads; return ``doc`` (exit 2 naming the first bad field)."""
    c = _Checker(path)
    top = c.obj(doc, "the manifest")
    if top.get("format") != fmt:
        raise Refused(f"{path} is not a {fmt} manifest (format {str(top.get('format'))[:40]!r})",
                      hint="rebuild it: tinyhw kernels build --target sm_90 -o DIR")
    c.string(c.get(top, "target", ""), "target", choices=TARGETS)
    c.string(c.get(top, "tinygrad", ""), "tinygrad", re.compile(r"[0-9A-Za-z.+-]{1,40}"))
    probes = c.array(c.get(top, "probes", ""), "probes", 0, MAX_PROBES)
    names = set()
    for i, raw in enumerate(probes):
        f = f"probes[{i}]"
        p = c.obj(raw, f)
        name = c.string(c.get(p, "name", f), f"{f}.name", _NAME)
        if name in names:
            raise c.fail(f"{f}.name", f"{name!r} is listed twice")
        names.add(name)
        _check_probe(c, p, f)
    return top


def _check_probe(c: _Checker, p: dict, f: str) -> None:
    c.integer(c.get(p, "n", f), f"{f}.n", 1, MAX_ELEMENTS)
    bufs: dict[str, dict] = {}
    for j, raw in enumerate(c.array(c.get(p, "buffers", f), f"{f}.buffers", 1, MAX_BUFFERS)):
        g = f"{f}.buffers[{j}]"
        b = c.obj(raw, g)
        bname = c.string(c.get(b, "name", g), f"{g}.name", _NAME)
        if bname in bufs:
            raise c.fail(f"{g}.name", f"{bname!r} is listed twice")
        c.string(c.get(b, "dtype", g), f"{g}.dtype", choices=("u32", "f32"))
        c.integer(c.get(b, "count", g), f"{g}.count", 1, MAX_ELEMENTS)
        c.string(c.get(b, "role", g), f"{g}.role", choices=("in", "out", "inout"))
        bufs[bname] = b
    files = set()
    for j, raw in enumerate(c.array(c.get(p, "kernels", f), f"{f}.kernels", 1, MAX_KERNELS)):
        g = f"{f}.kernels[{j}]"
        k = c.obj(raw, g)
        c.string(c.get(k, "name", g), f"{g}.name", _NAME)
        file = c.string(c.get(k, "file", g), f"{g}.file", _FILE)
        if file in files or file == "manifest.json" or ".." in file:
            raise c.fail(f"{g}.file", f"{file!r} is not a file of its own in the build folder")
        files.add(file)
        c.dims(c.get(k, "grid", g), f"{g}.grid", MAX_GRID)
        c.dims(c.get(k, "block", g), f"{g}.block", MAX_BLOCK)
        c.string(c.get(k, "binary_sha256", g), f"{g}.binary_sha256", _SHA)
        c.integer(c.get(k, "binary_bytes", g), f"{g}.binary_bytes", 1, MAX_BINARY)
        args = c.array(c.get(k, "args", g), f"{g}.args", 1, MAX_BUFFERS)
        for a_i, raw_arg in enumerate(args):
            h = f"{g}.args[{a_i}]"
            a = c.obj(raw_arg, h)
            c.integer(c.get(a, "index", h), f"{h}.index", a_i, a_i)
            buf = c.string(c.get(a, "buffer", h), f"{h}.buffer", _NAME)
            if buf not in bufs:
                raise c.fail(f"{h}.buffer", f"{buf!r} names no buffer of the probe")
    if "work_per_run" in p:
        w = p["work_per_run"]
        if isinstance(w, bool) or not isinstance(w, int | float) or not 0 <= w <= 1e18:
            raise c.fail(f"{f}.work_per_run", "must be a number from 0 to 1e18")


def check_entry_matches_probe(entry: dict, probe: Any, path: str) -> None:
    """The manifest's buffers for ``probe`` must be exactly those its host side computes (exit 2)."""
    want = [b.to_doc() for b in probe.buffers(entry["n"])]
    got = [{k: b[k] for k in ("name", "dtype", "count", "role")} for b in entry["buffers"]]
    if got != want:
        raise Refused(f"{path}: probe {probe.name}'s buffers do not match the probe of this tinyhw "
                      f"({', '.join(b['name'] for b in got)} vs {', '.join(b['name'] for b in want)} for n = "
                      f"{entry['n']})", hint="rebuild it with this tinyhw: tinyhw kernels build --target sm_90 -o DIR")


def read_binary(folder: Path, kernel: dict, path: str) -> bytes:
    """A kernel's binary through the bounded reader, checked against the manifest's size and sha256."""
    import hashlib

    from tinyhw.fileio import read_input

    data = read_input(folder / kernel["file"], MAX_BINARY, "kernel binary")
    if len(data) != kernel["binary_bytes"] or hashlib.sha256(data).hexdigest() != kernel["binary_sha256"]:
        raise Refused(f"{folder / kernel['file']} does not match {path} (size or sha256 differ)",
                      hint="rebuild the folder: tinyhw kernels build --target sm_90 -o DIR")
    return data
