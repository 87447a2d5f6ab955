"""The probe kernels: each written once against tinygrad's tensor API, with its answer computed on the host.

A probe never imports tinygrad: :mod:`tinyhw.kernels.seam` hands ``graph`` a small namespace (``T.arange``,
``T.u32``, ``T.f32``) and one tensor per input buffer, on tinygrad's NULL device (to compile) or its CPU
device (to run). ``graph`` returns the expression each output buffer receives. The host side (inputs,
expected answer, work per run) is plain Python, so checking a GPU's result needs no compiler.

Probes (specs/compiler-library.md §4 for the seam):

* ``pattern``: out[i] = i * 0x9e3779b1 + 0x1234567 (mod 2**32); the host compares a crc32 checksum and, on a
  mismatch, names the first differing word.
* ``bandwidth``: out[i] = in[i] ^ 0x5a5a5a5a, a streaming copy the compiler cannot elide; bytes moved =
  read + write. The input repeats a 4093-word block (a prime, so an indexing slip shows).
* ``fma``: 64 dependent x = x * A + B steps per element (A = 1 - 2**-10, B = 0.5, exact in float32), so
  2 x 64 FLOPs per element; element i starts from x = i mod 256 (computed from the index, no input), so every
  element is its own chain: the compiler cannot merge two elements (an earlier version broadcast a 64-word
  input, and tinygrad computed each of the 4 equal elements a thread held once: 4x fewer FMAs than counted),
  only the 4-byte store per element touches memory (32 FLOP/byte), and the host computes 256 answers. The
  work per run is checked against the FMA instructions of the committed binaries (tests/kernels/test_kernels_work.py).
* ``atomic``: n work-items each take a ticket, out[i] = atomic fetch-and-add(counter, 1); the host checks
  counter == n and that the tickets are exactly 0 .. n-1 (none lost, none repeated). tinygrad's tensor API
  has no atomics, so this one uses its custom-kernel API (one inline operation per renderer: C for cpu,
  LLVM IR for gfx). Not for sm_90: tinygrad 0.14.0's PTX renderer cannot emit an atomic. On the cpu the
  kernel is split over ``ATOMIC_CPU_THREADS`` threads that tinyhw runs at the same time (tinygrad's own cpu
  runtime calls a kernel's threads one after another, which would race nothing); each thread waits at a start
  gate in ``counter[1]`` until all have arrived, and the check also needs proof that they contended: some
  thread's tickets are not consecutive (another thread took one in between).
"""

from __future__ import annotations

import array
import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

__all__ = ["PROBES", "Buffer", "Check", "Probe", "get_probe"]

GOLDEN = 0x9E3779B1
SEED = 0x01234567
XOR_KEY = 0x5A5A5A5A
BLOCK_WORDS = 4093
FMA_STEPS = 64
FMA_A = 1.0 - 2.0 ** -10
FMA_B = 0.5
FMA_PERIOD = 256  # element i starts from i mod FMA_PERIOD
ATOMIC_CPU_THREADS = 4  # threads racing on the counter in a cpu run


@dataclass(frozen=True)
class Buffer:
    """One buffer of a probe: its name, element type (``u32`` or ``f32``, 4 bytes each), element count and role (``in``
    uploaded, ``out`` read back, ``inout`` both)."""

    name: str
    dtype: str  # "u32" or "f32" (4-byte elements)
    count: int
    role: str  # "in" (uploaded), "out" (read back) or "inout" (both)

    @property
    def nbytes(self) -> int:
        """The buffer's size in bytes (4 per element)."""
        return 4 * self.count

    def to_doc(self) -> dict:
        """The buffer as the ``manifest.json`` entry records it."""
        return {"name": self.name, "dtype": self.dtype, "count": self.count, "role": self.role}


@dataclass(frozen=True)
class Check:
    """The host's verdict on a run's outputs: ``ok``, and a one-line ``detail`` saying what matched or the first
    difference."""

    ok: bool
    detail: str


class Probe:
    """One probe: buffers, the tensor expression, host inputs, the host's check, and the work per run."""

    name = ""
    summary = ""
    metric: str | None = None  # "GB/s" or "TFLOP/s"
    gpu_n = 0  # elements for GPU builds (the committed binaries)
    cpu_n = 0  # elements for a run on tinygrad's CPU device
    targets: tuple[str, ...] = ("gfx1100", "gfx1200", "sm_90", "cpu")
    target_note = ""  # why a target is missing from ``targets``
    n_step = 1  # a cpu run's element count is a multiple of this ...
    n_min = 1  # ... from this ...
    n_max = 1 << 26  # ... to this (256 MiB per u32 buffer; the host's answer is computed in Python)
    cpu_threads: int | None = None  # run the cpu kernel's threads at the same time (tinyhw's own launcher)
    cpu_note = ""  # what a cpu run does and does not check, where that is not obvious

    def allowed_n(self) -> str:
        """The element counts a cpu run takes, in words (for the refusal and ``kernels list``)."""
        if self.n_step == 1:
            return f"{self.n_min} .. {self.n_max}"
        return f"a multiple of {self.n_step} from {self.n_min} to {self.n_max}"

    def check_n(self, n: int) -> None:
        """Refuse (exit 2) an element count this probe cannot take, before anything is compiled or run."""
        from tinyhw.errors import Refused

        if isinstance(n, bool) or not isinstance(n, int) or not (self.n_min <= n <= self.n_max) or n % self.n_step:
            raise Refused(f"probe {self.name} cannot take --n {n!r}", hint=f"--n for {self.name}: {self.allowed_n()}")

    def buffers(self, n: int) -> list[Buffer]:
        """The probe's buffers for ``n`` elements, in the order the kernel's pointer parameters take them."""
        raise NotImplementedError

    def graph(self, T: Any, bufs: dict[str, Any], n: int) -> dict[str, Any]:
        """The tensor expression each output buffer receives, built with the seam's namespace ``T`` from the input
        tensors ``bufs``."""
        raise NotImplementedError

    def inputs(self, n: int) -> dict[str, bytes]:
        """The initial bytes of each input buffer for ``n`` elements, by name (none by default)."""
        return {}

    def check(self, n: int, outputs: dict[str, bytes]) -> Check:
        """Compare a run's ``outputs`` (bytes by buffer name) with the host's answer for ``n`` elements."""
        raise NotImplementedError

    def work(self, n: int) -> float:
        """Bytes moved (GB/s probes) or floating-point operations (TFLOP/s probes) per run."""
        return 0.0

    def figure(self, n: int, seconds: float) -> float | None:
        """The run's figure in the probe's metric (GB/s or TFLOP/s, decimal units) from its work and ``seconds``; None
        without a metric or time."""
        if not self.metric or seconds <= 0:
            return None
        scale = 1e9 if self.metric == "GB/s" else 1e12
        return self.work(n) / seconds / scale


def _first_diff(got: bytes, want: bytes, fmt: str) -> str:
    if len(got) != len(want):
        return f"size {len(got)} bytes, expected {len(want)}"
    step = 1 << 16
    for base in range(0, len(want), step):
        if got[base:base + step] != want[base:base + step]:
            for off in range(base, min(base + step, len(want)), 4):
                if got[off:off + 4] != want[off:off + 4]:
                    g, w = struct.unpack_from(f"<{fmt}", got, off)[0], struct.unpack_from(f"<{fmt}", want, off)[0]
                    return f"word {off // 4}: got 0x{g:08x}, expected 0x{w:08x}"
    return "equal"


class PatternProbe(Probe):
    """Known-answer fill: out[i] = i * 0x9e3779b1 + 0x1234567 (u32), checked by crc32; a mismatch names the first
    differing word."""

    name = "pattern"
    summary = "known-answer fill: out[i] = i*0x9e3779b1 + 0x1234567 (u32), checked by crc32"
    gpu_n = 1 << 20
    cpu_n = 1 << 20

    def buffers(self, n: int) -> list[Buffer]:
        """One u32 output of ``n`` elements."""
        return [Buffer("out", "u32", n, "out")]

    def graph(self, T: Any, bufs: dict[str, Any], n: int) -> dict[str, Any]:
        """out = arange(n) * 0x9e3779b1 + 0x1234567 (mod 2**32)."""
        return {"out": T.arange(n, T.u32) * GOLDEN + SEED}

    def expected(self, n: int) -> bytes:
        """The host's answer for ``n`` elements, as little-endian u32 bytes."""
        return array.array("I", ((i * GOLDEN + SEED) & 0xFFFFFFFF for i in range(n))).tobytes()

    def check(self, n: int, outputs: dict[str, bytes]) -> Check:
        """Compare ``out`` with the host's answer (crc32 of both; on a mismatch, the first differing word)."""
        want = self.expected(n)
        got = outputs["out"]
        crc_got, crc_want = zlib.crc32(got), zlib.crc32(want)
        if got == want:
            return Check(True, f"crc32 0x{crc_got:08x} matches the host's")
        return Check(False, f"crc32 0x{crc_got:08x}, expected 0x{crc_want:08x}; {_first_diff(got, want, 'I')}")


class BandwidthProbe(Probe):
    """Streaming copy: out[i] = in[i] ^ 0x5a5a5a5a (u32); its GB/s counts bytes read plus bytes written."""

    name = "bandwidth"
    summary = "streaming copy: out[i] = in[i] ^ 0x5a5a5a5a (u32); GB/s counts read + write"
    metric = "GB/s"
    gpu_n = 1 << 25  # 128 MiB each way: well beyond any GPU's L2 (H200: 50 MiB)
    cpu_n = 1 << 23  # 32 MiB each way

    def buffers(self, n: int) -> list[Buffer]:
        """A u32 output and a u32 input of ``n`` elements each."""
        return [Buffer("out", "u32", n, "out"), Buffer("in", "u32", n, "in")]

    def graph(self, T: Any, bufs: dict[str, Any], n: int) -> dict[str, Any]:
        """out = in ^ 0x5a5a5a5a."""
        return {"out": bufs["in"] ^ XOR_KEY}

    @staticmethod
    def _repeat(block: array.array, n: int) -> bytes:
        raw = block.tobytes()
        reps, rest = divmod(n, len(block))
        return raw * reps + raw[:4 * rest]

    def _block(self) -> array.array:
        return array.array("I", (((i + 1) * GOLDEN) >> 3 & 0xFFFFFFFF for i in range(BLOCK_WORDS)))

    def inputs(self, n: int) -> dict[str, bytes]:
        """``in``: a 4093-word pseudo-random block repeated to ``n`` words (a prime length, so an indexing slip shows).
        """
        return {"in": self._repeat(self._block(), n)}

    def check(self, n: int, outputs: dict[str, bytes]) -> Check:
        """True when every output word equals its input word XOR 0x5a5a5a5a; else the first difference."""
        want = self._repeat(array.array("I", (v ^ XOR_KEY for v in self._block())), n)
        got = outputs["out"]
        if got == want:
            return Check(True, f"all {n} words equal in ^ 0x{XOR_KEY:08x}")
        return Check(False, _first_diff(got, want, "I"))

    def work(self, n: int) -> float:
        """Bytes moved per run: 4 read plus 4 written per element."""
        return 8.0 * n


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


class FmaProbe(Probe):
    """FMA throughput: 64 dependent x = x * A + B steps (f32) per element from x = i mod 256; 2 FLOPs a step."""

    name = "fma"
    summary = (f"FMA throughput: {FMA_STEPS} dependent x = x*A + B (f32) per element, from x = i mod {FMA_PERIOD}; "
               "2 FLOPs each")
    metric = "TFLOP/s"
    gpu_n = 1 << 22
    cpu_n = 1 << 20
    n_step = n_min = FMA_PERIOD  # every starting value equally often; a smaller n lets the compiler fold it all

    def buffers(self, n: int) -> list[Buffer]:
        """One f32 output of ``n`` elements."""
        return [Buffer("out", "f32", n, "out")]

    def graph(self, T: Any, bufs: dict[str, Any], n: int) -> dict[str, Any]:
        """x = float(i mod 256), then 64 times x = x * A + B."""
        x = (T.arange(n, T.u32) & (FMA_PERIOD - 1)).cast(T.f32)
        for _ in range(FMA_STEPS):
            x = x * FMA_A + FMA_B
        return {"out": x}

    def _seeds(self) -> list[float]:
        return [float(k) for k in range(FMA_PERIOD)]

    def expected_values(self) -> list[float]:
        """The host's float32 answer for each of the 256 starting values (unfused multiply and add, rounded each step).
        """
        out = []
        for seed in self._seeds():
            x = seed
            for _ in range(FMA_STEPS):
                x = _f32(_f32(x * FMA_A) + FMA_B)  # unfused reference; a fused FMA differs in the last bits
            out.append(x)
        return out

    def check(self, n: int, outputs: dict[str, bytes]) -> Check:
        """True when every result is within a relative 1e-4 of the host's answer for its starting value (a fused FMA
        differs in the last bits); NaN fails."""
        got = array.array("f")
        got.frombytes(outputs["out"])
        want = self.expected_values()
        if len(got) != n:
            return Check(False, f"{len(got)} results, expected {n}")
        worst, where = 0.0, -1
        for i, w in enumerate(want):
            for g in got[i::FMA_PERIOD]:
                err = abs(g - w) / max(abs(w), 1.0)
                if not err <= worst:  # also catches NaN
                    worst, where = (float("inf") if math.isnan(err) else err), i
                    if worst > 1e-4:
                        break
        if worst <= 1e-4:
            return Check(True, f"all {n} results within {worst:.1e} of the host's float32 answer")
        return Check(False, f"element class {where}: relative error {worst:.1e} (expected <= 1e-4)")

    def work(self, n: int) -> float:
        """Floating-point operations per run: 2 per step, 64 steps, ``n`` elements."""
        return 2.0 * FMA_STEPS * n


class AtomicProbe(Probe):
    """Atomic counter: each of n work-items takes out[i] = fetch_add(counter, 1); the tickets must be exactly 0..n-1. On
    the CPU, several threads race on the counter."""

    name = "atomic"
    summary = ("atomic counter: out[i] = fetch_add(counter, 1) (u32); tickets must be exactly 0..n-1; on the cpu "
               f"{ATOMIC_CPU_THREADS} threads race on the counter")
    gpu_n = 1 << 20
    cpu_n = 1 << 20
    n_step = ATOMIC_CPU_THREADS
    n_min = 1 << 12  # each thread takes enough tickets for the threads to overlap
    cpu_threads = ATOMIC_CPU_THREADS
    cpu_note = (f"cpu: {ATOMIC_CPU_THREADS} threads run at once and race on the counter; the check fails (exit 1) "
                "when they did not race, as on a machine with one free core")
    targets = ("gfx1100", "gfx1200", "cpu")
    target_note = "tinygrad 0.14.0's ptx renderer has no atomic operation, so there is no sm_90 build"

    def buffers(self, n: int) -> list[Buffer]:
        """The u32 tickets (``n``) and a two-word counter: word 0 counts, word 1 is the CPU threads' start gate."""
        # counter[0] is the counter; counter[1] the cpu threads' start gate (unused on a gpu)
        return [Buffer("out", "u32", n, "out"), Buffer("counter", "u32", 2, "inout")]

    def graph(self, T: Any, bufs: dict[str, Any], n: int) -> dict[str, Any]:
        """The tickets and the final counter, from the seam's atomic fetch-and-add."""
        out, counter = T.atomic_tickets(bufs["out"], bufs["counter"], n)
        return {"out": out, "counter": counter}

    def inputs(self, n: int) -> dict[str, bytes]:
        """The counter and the start gate both start at 0."""
        return {"counter": bytes(8)}

    def check(self, n: int, outputs: dict[str, bytes]) -> Check:
        """True when the counter ends at ``n`` and every ticket 0..n-1 was handed out exactly once."""
        (counter,) = struct.unpack("<I", outputs["counter"][:4])
        tickets = array.array("I")
        tickets.frombytes(outputs["out"])
        if counter != n:
            return Check(False, f"counter is {counter}, expected {n} (increments lost or repeated)")
        seen = bytearray(n)
        for t in tickets:
            if t >= n or seen[t]:
                what = "out of range" if t >= n else "handed out twice"
                return Check(False, f"ticket {t} {what}")
            seen[t] = 1
        return Check(True, f"counter = {n}, every ticket 0..{n - 1} handed out exactly once")

    def contention(self, n: int, outputs: dict[str, bytes], threads: int) -> int:
        """How often a thread's next ticket was not its last + 1: another thread took one in between (the
        threads each take n / threads consecutive work-items; 0 means they never overlapped)."""
        tickets = array.array("I")
        tickets.frombytes(outputs["out"])
        per = n // threads
        return sum(1 for t in range(threads) for k in range(t * per, (t + 1) * per - 1)
                   if tickets[k + 1] != tickets[k] + 1)

    @staticmethod
    def raced(n: int, contention: int) -> bool:
        """Whether the threads ran at the same time: at least 1 in 4096 tickets taken between two of one
        thread's (threads racing on two cores interleave by the thousand; one core switching between them
        gives a handful, which proves nothing about the atomic)."""
        return contention >= max(16, n >> 12)

    def check_raced(self, n: int, outputs: dict[str, bytes], threads: int, attempts: int) -> Check:
        """The cpu verdict: every ticket once, and the threads really raced (else the atomic went untested)."""
        check = self.check(n, outputs)
        if not check.ok:
            return check
        contention = self.contention(n, outputs, threads)
        if not self.raced(n, contention):
            return Check(False, f"{check.detail}, but the {threads} threads did not race ({contention} interleavings "
                                f"in the last of {attempts} runs, fewer than {max(16, n >> 12)}): the atomic was not "
                                "exercised (is only one core free?)")
        return Check(True, f"{check.detail}; {threads} threads raced on the counter ({contention} tickets taken "
                           "between two of one thread's)")


PROBES: dict[str, Probe] = {p.name: p for p in (PatternProbe(), BandwidthProbe(), FmaProbe(), AtomicProbe())}


def get_probe(name: str) -> Probe:
    """The probe called ``name``; raises Refused (exit 2) naming the known ones."""
    from tinyhw.errors import Refused

    if name not in PROBES:
        raise Refused(f"unknown probe kernel {name!r}", hint=f"known: {', '.join(PROBES)} (tinyhw kernels list)")
    return PROBES[name]
