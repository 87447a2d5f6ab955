"""Copy bandwidth host <-> an NVIDIA GPU through the CUDA driver: ``bench copy --device cuda:N``.

The same measurement as the BAR bench (:mod:`tinyhw.bench.copy`, the same JSON keys), through the driver's
copy engines instead of a BAR mapping. This feature is handed an open GPU (a :class:`tinyhw.cuda.CudaDevice`
built by :func:`tinyhw.connect.open_cuda`) and never imports the driver itself.

* Host memory of two kinds, reported separately (key ``memory``): ``pinned`` (page-locked by the driver,
  ``cuMemHostAlloc``; the copy engine reads it directly) and ``pageable`` (ordinary process memory, which the
  driver stages through its own pinned buffers).
* Each copy is one ``cuMemcpyHtoDAsync`` or ``cuMemcpyDtoHAsync`` on the bench's own stream, bracketed by two
  events recorded on that stream; the time is ``cuEventElapsedTime`` (GPU time, "measured", never modelled).
  One untimed copy each way warms the path up first.
* Every timed copy is verified: after a host->device copy the device buffer is read back (untimed) and its
  hash compared with the hash of the pattern sent; before a device->host copy the pattern is uploaded
  (untimed), the destination filled with a poison byte, and the hash of what arrived compared with the
  pattern's. Each copy moves a different pattern (a random block XORed with a per-copy key), so a copy that
  did not happen cannot pass. A mismatch raises ``OperationFailed`` (exit 1) naming the first bad offset.
* The link limit: the GPU's PCIe link as Linux reports it now (``current_link_speed`` x
  ``current_link_width`` of its PCI function, read after the copies, when a power-managed link has trained
  up), times the per-lane payload rate of that generation (:data:`tinyhw.bench.copy.PCIE_LANE_MBPS`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from tinyhw.bench.copy import DIRECTIONS, PCIE_LANE_MBPS, CopyResult
from tinyhw.errors import OperationFailed, Refused
from tinyhw.progress import NO_PROGRESS, Progress

__all__ = ["MEMORIES", "CudaCopyResult", "cuda_copy_bench", "cuda_link_limit"]

MEMORIES = ("pinned", "pageable")
POISON = 0xA5
_API = {"h2d": "cuMemcpyHtoDAsync", "d2h": "cuMemcpyDtoHAsync"}


@dataclass
class CudaCopyResult(CopyResult):
    """A copy bench result through the CUDA driver; ``memory`` says whether the host buffer was pinned or pageable."""

    memory: str = "pinned"

    def as_dict(self) -> dict[str, Any]:
        """:meth:`CopyResult.as_dict` plus the host memory kind."""
        doc = super().as_dict()
        doc["memory"] = self.memory
        return doc


def cuda_link_limit(gpu: Any) -> tuple[float | None, str, dict | None]:
    """(MB/s, how it was found, the link as a dict) of the GPU's current PCIe link, or (None, why, ...)."""
    link = gpu.pci_link()
    if link is None:
        address = gpu.pci_address()
        return None, (f"no sysfs entry for {address}" if address else "the driver gives no pci address"), None
    gen, width = link.current_gen, link.current_width
    if gen not in PCIE_LANE_MBPS or not width:
        return None, f"unknown link state ({link.describe()})", link.as_dict()
    return PCIE_LANE_MBPS[gen] * width, link.describe(), link.as_dict()


def _digest(a: np.ndarray) -> bytes:
    return hashlib.blake2b(a.data, digest_size=32).digest()


def _first_difference(got: np.ndarray, want: np.ndarray) -> int:
    bad = np.flatnonzero(got != want)
    return int(bad[0]) if bad.size else -1


def _one_copy(gpu: Any, stream: Any, dptr: Any, direction: str, data: Any, back: Any, size: int, memory: str) -> float:
    """One timed copy of ``data.array[:size]`` (already filled with the pattern) and its check; seconds."""
    sent, got = data.array[:size], back.array[:size]
    want = _digest(sent)
    if direction == "d2h":
        gpu.copy_async("h2d", dptr, data, size, stream)  # upload the pattern, untimed
        gpu.stream_synchronize(stream)
    got.fill(POISON)
    host = data if direction == "h2d" else back
    seconds = gpu.time_on_stream(stream, lambda: gpu.copy_async(direction, dptr, host, size, stream))
    if direction == "h2d":
        gpu.copy_async("d2h", dptr, back, size, stream)  # read back, untimed
        gpu.stream_synchronize(stream)
    if _digest(got) != want:
        bad = _first_difference(got, sent)
        raise OperationFailed(f"{direction} copy of {size} bytes ({memory} host memory) on {gpu.label} came back "
                              f"wrong at offset 0x{bad:x}: 0x{int(got[bad]):02x}, expected 0x{int(sent[bad]):02x}",
                              hint="the gpu or its link corrupted data; check dmesg for xid or aer errors")
    return seconds


Summary = dict[str, Any]


def cuda_copy_bench(gpu: Any, sizes: list[int], directions: tuple[str, ...] = DIRECTIONS, repeat: int = 3,
                    memories: tuple[str, ...] = MEMORIES, progress: Progress = NO_PROGRESS,
                    log: Callable[[str], None] = lambda _m: None,
                    seed: int = 0x7E57) -> tuple[list[CudaCopyResult], Summary]:
    """Run the copies on ``gpu``; returns the results (memory, then size, then direction) and a summary of the
    GPU (name, driver, link). Buffers stay on the device object, which releases them when it is closed."""
    if repeat < 1:
        raise Refused("--repeat must be at least 1")
    if not sizes or any(s <= 0 or s % 4 for s in sizes):
        raise Refused("copy sizes must be positive multiples of 4 bytes")
    for m in memories:
        if m not in MEMORIES:
            raise Refused(f"host memory {m!r} is not one of {', '.join(MEMORIES)}")
    biggest = max(sizes)
    dptr = gpu.alloc(biggest)
    stream = gpu.stream()
    base = np.frombuffer(np.random.default_rng(seed).bytes(biggest), dtype=np.uint32)
    log(f"copying with the cuda driver on {gpu.label} ({gpu.name()}, driver {gpu.driver_version_text}); "
        f"{', '.join(memories)} host memory; measured gpu time (cuda events)")
    results: list[CudaCopyResult] = []
    total = sum(sizes) * repeat * len(directions) * len(memories)
    key = 0
    with progress.task("copy", total) as advance:
        for memory in memories:
            data = gpu.host_buffer(biggest, memory == "pinned")
            back = gpu.host_buffer(biggest, memory == "pinned")
            for d in directions:  # warm-up, untimed, unverified
                gpu.copy_async(d, dptr, data if d == "h2d" else back, biggest, stream)
            gpu.stream_synchronize(stream)
            for size in sizes:
                for direction in directions:
                    r = CudaCopyResult(direction, size, repeat, f"{_API[direction]}, {memory} host memory",
                                       memory=memory)
                    results.append(r)
                    for _ in range(repeat):
                        key += 1  # a different pattern for every copy: the random block XOR a per-copy word
                        np.bitwise_xor(base[:size // 4], np.uint32((key * 0x9E3779B1) & 0xFFFFFFFF),
                                       out=data.array[:size].view(np.uint32))
                        r.seconds.append(_one_copy(gpu, stream, dptr, direction, data, back, size, memory))
                        r.verified += size
                        advance(size)
    limit, how, link = cuda_link_limit(gpu)  # after the copies: a power-managed link has trained up by now
    for r in results:
        r.link_limit_mbps = limit
    log(f"link limit: {'unknown' if limit is None else f'{limit:.0f} MB/s'} ({how})")
    if link and link["current_gen"] and link["max_gen"] and (link["current_gen"], link["current_width"]) < (
            link["max_gen"], link["max_width"]):
        log("note: the link runs below its maximum (power management, the slot, or a riser); the fraction of "
            "limit is against the current link")
    summary = {"device": gpu.label, "gpu": gpu.name(), "driver_version": gpu.driver_version_text,
               "link": link, "link_source": how}
    return results, summary
