"""``kernels exec``: a user's own code object on an AMD GPU tinyhw booted.

:func:`plan_exec` reads and checks everything before the device is touched (exit 2 with the reason): the code
object (bounded read; a gfx1100 AMDGPU ELF; the kernel by name, or the only one), the grid (workgroups per
dimension) and block (work-items per workgroup, HIP launch semantics), each ``--buffer`` (a file's bytes or
``zeros:N``; as many as the kernel's metadata lists pointer arguments), each ``--out INDEX:FILE`` (an index of a
buffer, a file that may be written: an existing regular file only with ``force``, never a device node, FIFO or
socket, also behind a symlink), the timeout. :func:`run_exec` is handed the open transport, runs the
dispatch through :mod:`tinyhw.boot.amd.compute` and writes the requested buffers back (atomically).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tinyhw.errors import Refused
from tinyhw.transport.base import Transport

MAX_CODE_OBJECT = 16 << 20
MAX_BUFFERS = 16
MAX_TOTAL = 120 << 20  # what the compute region's buffer area holds (tinyhw.boot.amd.compute: 126 MiB, some slack)


@dataclass(frozen=True)
class ExecPlan:
    """A checked ``kernels exec``, before the device is opened: the code object's path and kernel, grid (workgroups) and
    block (work-items per workgroup), each buffer's initial bytes and where it came from, which buffers to write back to
    which files, and the time-out in seconds."""

    path: Path
    kernel: Any  # tinyhw.boot.amd.compute.Kernel
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    buffers: list[bytes]
    sources: list[str]
    outs: list[tuple[int, Path]]
    timeout: float


def _dims(text: str | tuple[int, ...], what: str) -> tuple[int, ...]:
    if isinstance(text, tuple | list):
        return tuple(text)  # checked by _check_dims
    parts = text.split(",")
    try:
        dims = tuple(int(p.strip(), 0) for p in parts)
    except ValueError:
        raise Refused(f"{what} {text!r}: one to three whole numbers, X[,Y,Z]") from None
    if not 1 <= len(dims) <= 3:
        raise Refused(f"{what} {text!r}: one to three whole numbers, X[,Y,Z]")
    return dims


def _buffer(spec: str | bytes, index: int) -> bytes:
    from tinyhw.fileio import read_input

    if isinstance(spec, bytes | bytearray | memoryview):  # from Python: the bytes themselves
        if not 1 <= len(spec) <= MAX_TOTAL:
            raise Refused(f"buffer {index}: {len(spec)} bytes; a buffer takes 1 .. {MAX_TOTAL}")
        return bytes(spec)
    if spec.startswith("zeros:"):
        from tinyhw.formats.numbers import parse_number

        try:  # 4096, 0x1000, 4k, 4KiB: the command line's one number syntax
            n = parse_number(spec[6:], "zeros:N", units=True)
        except Refused:
            raise Refused(f"--buffer {spec!r}: zeros:N takes a byte count",
                          hint="write decimal or 0x-hex, optionally with a k/m/g unit (64k, 2M)") from None
        if not 1 <= n <= MAX_TOTAL:
            raise Refused(f"--buffer {spec!r}: zeros:N takes 1 .. {MAX_TOTAL} bytes (what the board's compute region "
                          "holds for buffers)")
        return bytes(n)
    data = read_input(spec, MAX_TOTAL, f"buffer {index} file")
    if not data:
        raise Refused(f"--buffer {spec}: the file is empty (a buffer needs at least one byte)")
    return data


def plan_exec(code_object: str | Path, *, kernel: str | None, grid: str | tuple[int, ...],
              block: str | tuple[int, ...], buffers: Sequence[str | bytes], outs: list[str],
              timeout: float = 10.0, force: bool = False) -> ExecPlan:
    """Everything ``kernels exec`` refuses (exit 2), checked before the device is opened. ``grid``/``block`` are
    ``"X[,Y,Z]"`` or tuples; each buffer is ``FILE``, ``zeros:N`` or (from Python) the bytes to upload; ``force``
    lets an ``--out`` file replace an existing regular file."""
    from tinyhw.boot.amd.compute import MAX_BLOCK, MAX_GROUPS, _check_dims, check_grid, load_code_object
    from tinyhw.fileio import check_output_path, read_input

    if not 0 < timeout <= 3600:
        raise Refused(f"--timeout {timeout:g}: more than 0 and at most 3600 seconds")
    grid3 = _check_dims("--grid", _dims(grid, "--grid"), MAX_GROUPS)
    block3 = _check_dims("--block", _dims(block, "--block"), MAX_BLOCK)
    if block3[0] * block3[1] * block3[2] > MAX_BLOCK:
        raise Refused(f"--block {block}: {block3[0] * block3[1] * block3[2]} work-items; a workgroup holds at most "
                      f"{MAX_BLOCK}")
    check_grid(grid3, block3)
    path = Path(code_object)
    k = load_code_object(read_input(path, MAX_CODE_OBJECT, "code object"), kernel)
    if len(buffers) > MAX_BUFFERS:
        raise Refused(f"{len(buffers)} --buffer options; at most {MAX_BUFFERS}")
    if k.meta is not None and len(k.meta.buffers) != len(buffers):
        raise Refused(f"kernel {k.name} takes {len(k.meta.buffers)} buffer argument(s) (its metadata), "
                      f"{len(buffers)} --buffer given")
    if k.meta is None and 8 * len(buffers) > max(k.kd.kernarg_size, 8):
        raise Refused(f"kernel {k.name} has {k.kd.kernarg_size} kernarg bytes: {len(buffers)} buffer pointers do not "
                      "fit")
    data = [_buffer(b, i) for i, b in enumerate(buffers)]
    if sum(-(-len(d) // 256) * 256 for d in data) > MAX_TOTAL:
        raise Refused(f"the buffers take {sum(map(len, data))} bytes; at most {MAX_TOTAL} fit")
    wanted: list[tuple[int, Path]] = []
    for o in outs:
        index, colon, file = o.partition(":")
        if not colon or not index.strip().isdigit() or not file:
            raise Refused(f"--out {o!r}: INDEX:FILE (INDEX a buffer's 0-based position)")
        i = int(index)
        if i >= len(data):
            raise Refused(f"--out {o}: there are {len(data)} buffers (0 .. {len(data) - 1})")
        target = check_output_path(file, force=force, what=f"buffer {i} output")
        if any(f.resolve() == target.resolve() for _, f in wanted):
            raise Refused(f"--out {o}: {file} is named twice (two buffers cannot land in one file)")
        wanted.append((i, target))
    sources = [b if isinstance(b, str) else f"bytes:{len(b)}" for b in buffers]
    return ExecPlan(path, k, grid3, block3, data, sources, wanted, timeout)


def run_exec(plan: ExecPlan, transport: Transport, *, buffer_path: str = "auto") -> dict:
    """Run ``plan`` on the GPU behind ``transport`` (handed in, closed by the caller); write the ``--out`` files.
    ``buffer_path``: how the buffers travel (:mod:`tinyhw.boot.amd.buffers`: auto, sram, dma, bar)."""
    return _run(plan, transport, buffer_path)[0]


def _run(plan: ExecPlan, transport: Transport, buffer_path: str = "auto") -> tuple[dict, list[bytes]]:
    from tinyhw.boot.amd.buffers import PATHS, open_buffer_path
    from tinyhw.boot.amd.compute import check_booted, open_compute
    from tinyhw.fileio import atomic_write

    if buffer_path not in PATHS:
        raise Refused(f"unknown buffer path {buffer_path!r}; known: {', '.join(PATHS)}")
    gpu = check_booted(transport, "kernels exec runs on")
    engine = open_compute(transport, timeout=plan.timeout, gpu=gpu)
    with engine:
        moved = engine.buffers = open_buffer_path(transport, gpu, engine.copy_engine, buffer_path)
        try:
            run = engine.run(plan.kernel, plan.grid, plan.block, plan.buffers)
        finally:
            moved.close()
    written = []
    for i, path in plan.outs:
        atomic_write(path, run.outputs[i])
        written.append({"index": i, "file": str(path), "bytes": len(run.outputs[i])})
    emulated = transport.emulated
    meta = plan.kernel.meta
    return ({"code_object": str(plan.path), "kernel": plan.kernel.name, "grid": list(run.grid),
            "block": list(run.block), "buffers": [{"source": s, "bytes": len(b)} for s, b in
                                                  zip(plan.sources, plan.buffers, strict=True)],
            "dispatch_s": run.seconds, "time_kind": "modelled" if emulated else "measured", "outputs": written,
            "kernarg_bytes": max(plan.kernel.kd.kernarg_size, meta.kernarg_size if meta else 0),
            "buffer_path": {**moved.summary(), "time_kind": "modelled" if emulated else "measured"}},
            run.outputs)


@dataclass(frozen=True)
class ExecResult:
    """What :func:`exec_kernel` ran (the same document ``kernels exec --json`` prints) and every buffer's bytes
    after the run."""

    doc: dict
    buffers: list[bytes]


def exec_kernel(transport: Transport, code_object: str | Path, *, grid: str | tuple[int, ...],
                block: str | tuple[int, ...], buffers: Sequence[str | bytes], kernel: str | None = None,
                outs: list[str] | None = None, timeout: float = 10.0, force: bool = False,
                buffer_path: str = "auto") -> ExecResult:
    """The library's one call behind ``kernels exec``: check everything (:func:`plan_exec`, refusals before the
    device is touched), run it on the booted GPU behind ``transport`` (``tinyhw.open(...)``'s ``.transport``), write
    any ``outs`` files (an existing one only with ``force``), and return the document with the buffers' bytes, e.g.
    ``exec_kernel(o.transport, "k.elf", grid=(4,), block=(32,), buffers=[b"...", "zeros:4096"]).buffers[1]``."""
    plan = plan_exec(code_object, kernel=kernel, grid=grid, block=block, buffers=buffers, outs=list(outs or []),
                     timeout=timeout, force=force)
    doc, data = _run(plan, transport, buffer_path)
    return ExecResult(doc, data)
