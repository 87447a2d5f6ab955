"""bench/bench_prof.py compares the decoders fairly: alternated passes, equal repeats, CPU time, the spread."""

from __future__ import annotations

import importlib.util
import sys
import time

import pytest
from testpaths import ROOT

BENCH = ROOT / "bench" / "bench_prof.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_prof", BENCH)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["bench_prof"] = mod
    spec.loader.exec_module(mod)
    yield mod
    sys.modules.pop("bench_prof", None)


def test_passes_alternate_with_equal_repeats(bench) -> None:
    order: list[str] = []
    now = [0.0]

    def clock() -> float:
        return now[0]

    def a() -> int:
        order.append("a")
        now[0] += 1.0
        return 1

    def b() -> int:
        order.append("b")
        now[0] += 3.0
        return 1

    ta, tb = bench.alternate(a, b, 6, clock=clock)
    assert order == ["a", "b", "b", "a"] * 3
    assert len(ta) == len(tb) == 6
    assert ta == [1.0] * 6 and tb == [3.0] * 6
    assert bench.pair_ratios(ta, tb) == [3.0] * 6
    assert bench.spread([3.0, 1.0, 2.0]) == (1.0, 2.0, 3.0)


def test_default_clock_is_cpu_time(bench) -> None:
    assert bench.alternate.__defaults__ == (time.process_time,)


def test_bench_runs_and_says_measured(bench, capsys: pytest.CaptureFixture[str]) -> None:
    bench.main(["--repeats", "2"])
    out = capsys.readouterr().out
    assert "gfx950/profile_gemm_run_0" in out and "31809 packets" in out and "measured" in out
    assert "process cpu time" in out
    if "tinygrad decode:" in out:  # tinygrad is the optional compile extra
        assert "median of 2 per-pair cpu-time ratios; min" in out
    else:
        assert "tinygrad: " in out


def test_repeats_are_bounded(bench) -> None:
    with pytest.raises(SystemExit) as e:
        bench.main(["--repeats", "0"])
    assert e.value.code == 2
