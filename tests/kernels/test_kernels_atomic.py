"""The cpu `atomic` probe really races threads on the counter (issue 20 item 2: it compiled to one serial loop
and could never detect a broken atomic). tinygrad's cpu runtime calls a kernel's threads one after another,
so tinyhw calls the compiled kernel's 4 threads from 4 OS threads at once, behind a start gate; the verdict
needs every ticket once AND proof that the threads interleaved. A non-atomic increment swapped into the same
kernel never passes: it loses updates when the threads race, and is "not exercised" when they do not.
"""

from __future__ import annotations

import array
import json
import struct

import pytest
from clihelp import run
from kernelshelp import need_clang

from tinyhw.kernels.probes import ATOMIC_CPU_THREADS, PROBES

P = PROBES["atomic"]
T = ATOMIC_CPU_THREADS
NON_ATOMIC = "(*(volatile unsigned int*)({0}))++"  # load, add, store: loses updates when two threads race


def outputs(tickets: list[int], counter: int) -> dict[str, bytes]:
    return {"out": array.array("I", tickets).tobytes(), "counter": struct.pack("<II", counter, T)}


def test_contention_counts_tickets_taken_between_two_of_one_thread() -> None:
    n, per = 4096, 4096 // T
    serial = list(range(n))  # thread t took per consecutive tickets: they never overlapped
    assert P.contention(n, outputs(serial, n), T) == 0
    v = P.check_raced(n, outputs(serial, n), T, 5)
    assert not v.ok and "did not race (0 interleavings in the last of 5 runs" in v.detail
    raced = [0] * n  # round robin: every ticket of a thread is 4 after its last
    for k in range(n):
        raced[(k % T) * per + k // T] = k
    assert P.contention(n, outputs(raced, n), T) == n - T
    assert P.check_raced(n, outputs(raced, n), T, 1).ok
    few = list(serial)  # one core switching twice between threads: a handful, not a race
    few[10], few[per + 10] = few[per + 10], few[10]
    assert 0 < P.contention(n, outputs(few, n), T) < 16 and not P.check_raced(n, outputs(few, n), T, 1).ok
    lost = list(raced)
    lost[7] = lost[8]
    assert "handed out twice" in P.check_raced(n, outputs(lost, n), T, 1).detail
    assert "counter is 4095" in P.check_raced(n, outputs(raced, n - 1), T, 1).detail


def test_the_cpu_kernel_is_split_over_threads_behind_a_gate() -> None:
    need_clang()
    from tinyhw.kernels import seam

    (k,) = seam.compile_probe(P, "cpu", 1 << 16)
    assert k.grid == (T, 1, 1)  # tinygrad's core_id: the kernel is called once per thread
    assert "__atomic_fetch_add((data1_2+0) + 1, 1u, __ATOMIC_SEQ_CST)" in k.source  # the start gate
    assert "__atomic_load_n((data1_2+0) + 1, __ATOMIC_ACQUIRE) < 4u" in k.source
    assert "__atomic_fetch_add((data1_2+0), 1u, __ATOMIC_RELAXED)" in k.source  # the ticket


def test_threads_run_at_once_and_every_ticket_is_handed_out_once() -> None:
    need_clang()
    from tinyhw.kernels import seam

    n = 1 << 18
    r = seam.run_cpu(P, n, 1)
    assert r.threads == T and struct.unpack("<II", r.outputs["counter"][:8]) == (n, T)  # all passed the gate
    assert P.check(n, r.outputs).ok
    verdict = P.check_raced(n, r.outputs, T, r.attempts)
    # on a loaded machine the threads may get one core between them: then the verdict says so, never "pass"
    assert verdict.ok or "did not race" in verdict.detail


def test_a_non_atomic_increment_never_passes() -> None:
    """Sabotage: the same kernel with a plain read-modify-write instead of the atomic."""
    need_clang()
    from tinyhw.kernels import seam

    n = 1 << 18
    lost = 0
    for _ in range(3):
        r = seam.run_cpu(P, n, 0, cpu_atomic=seam.cpu_atomic_op(NON_ATOMIC))
        verdict = P.check_raced(n, r.outputs, T, r.attempts)
        assert not verdict.ok, verdict.detail
        if "did not race" not in verdict.detail:  # the threads raced: the plain increment lost updates
            assert "counter is" in verdict.detail or "handed out twice" in verdict.detail
            lost += 1


def test_cli_atomic_run_reports_the_race() -> None:
    need_clang()
    r = run("--json", "kernels", "run", "atomic", "--device", "cpu", "--n", "65536", "-r", "1")
    doc = json.loads(r.out)
    assert doc["threads"] == T and doc["attempts"] >= 1 and doc["metric"] is None
    if r.code == 0:
        assert doc["check"]["ok"] and "threads raced on the counter" in doc["check"]["detail"]
    else:
        assert r.code == 1 and "did not race" in doc["check"]["detail"]


@pytest.mark.parametrize("n", ["4095", "4097", "100"])
def test_atomic_n_is_a_multiple_of_the_threads_from_4096(n: str) -> None:
    r = run("kernels", "run", "atomic", "--device", "cpu", "--n", n)
    assert r.code == 2 and "a multiple of 4 from 4096 to 67108864" in r.err


def test_list_says_what_the_cpu_run_checks() -> None:
    doc = json.loads(run("--json", "kernels", "list").out)
    atomic = next(p for p in doc["probes"] if p["name"] == "atomic")
    assert "race on the counter" in atomic["cpu_note"] and "fails (exit 1) when they did not race" in atomic["cpu_note"]
    assert atomic["cpu_n_allowed"] == "a multiple of 4 from 4096 to 67108864"
    assert "measured" in doc["figures"]


def test_the_threads_really_race() -> None:
    """At least one of several runs shows the threads interleaving by the thousand (a launcher that calls the
    threads one after another, as tinygrad's cpu runtime does, never does)."""
    need_clang()
    import os

    from tinyhw.kernels import seam

    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("one cpu core: threads cannot race here")
    n = 1 << 21  # each thread takes about 2 ms of tickets: long enough to overlap on a busy 2-core machine
    seen = []
    for _ in range(8):
        r = seam.run_cpu(P, n, 0)
        seen.append(r.contention)
        if P.raced(n, r.contention):
            assert P.check_raced(n, r.outputs, T, r.attempts).ok
            return
    pytest.fail(f"the {T} threads never raced in 8 runs of up to 5 attempts (interleavings {seen})")
