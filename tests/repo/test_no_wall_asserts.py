"""No test asserts a wall-clock time: a loaded machine must never fail a correct program.

A source scan of every test file flags an ``assert`` that compares a wall-clock reading (``time.perf_counter()``,
``time.monotonic()``, ``time.time()``, a name computed from one, or a helper's return value computed from one)
against a bound under :data:`HANG_S`, one on a CLI's reported ``elapsed_s``/``wall_s`` at any bound, and a
deadline ``time.monotonic() + N`` with ``N`` under :data:`HANG_S`. Bounds of :data:`HANG_S` and more only catch
hangs; print figures instead, and keep real ones in bench/. Virtual clocks (``clock.now()``) are exact and not
flagged. A wall time that reaches the test as text (a subprocess's output) is not seen: keep to the rule there too.
"""

from __future__ import annotations

import ast
from pathlib import Path

from testpaths import TESTS

HANG_S = 60.0
WALL_FUNCS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns"}
WALL_KEYS = {"elapsed_s", "wall_s"}


def _is_wall_call(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WALL_FUNCS
            and isinstance(node.func.value, ast.Name) and node.func.value.id == "time")


def _reported(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Subscript) and isinstance(n.slice, ast.Constant) and n.slice.value in WALL_KEYS
               for n in ast.walk(node))


def _wall(node: ast.AST, tainted: set[str]) -> bool:
    return _reported(node) or any(_is_wall_call(n) or (isinstance(n, ast.Name) and n.id in tainted)
                                  for n in ast.walk(node))


def _small(node: ast.AST, limit: float = HANG_S) -> bool:
    return (isinstance(node, ast.Constant) and isinstance(node.value, int | float)
            and not isinstance(node.value, bool) and node.value < limit)


def _returns(tree: ast.Module) -> dict[str, set[int] | None]:
    """Module functions whose return value holds a wall reading: name -> tainted tuple positions (None: all)."""
    out: dict[str, set[int] | None] = {}
    for fn in tree.body:
        if not isinstance(fn, ast.FunctionDef):
            continue
        tainted = _taint(fn.body, {}, set())
        for r in ast.walk(fn):
            if isinstance(r, ast.Return) and r.value is not None:
                if isinstance(r.value, ast.Tuple):
                    hit = {i for i, e in enumerate(r.value.elts) if _wall(e, tainted)}
                    if hit:
                        out[fn.name] = (out.get(fn.name) or set()) | hit
                elif _wall(r.value, tainted):
                    out[fn.name] = None
    return out


def _taint(body: list[ast.stmt], funcs: dict[str, set[int] | None], tainted: set[str]) -> set[str]:
    tainted = set(tainted)
    for _ in range(3):  # a few passes reach names assigned from names
        for n in (x for s in body for x in ast.walk(s)):
            if not isinstance(n, ast.Assign):
                continue
            call = n.value if isinstance(n.value, ast.Call) and isinstance(n.value.func, ast.Name) else None
            positions = funcs.get(call.func.id, set()) if call is not None and call.func.id in funcs else set()
            for t in n.targets:
                if isinstance(t, ast.Name) and (_wall(n.value, tainted) or positions is None):
                    tainted.add(t.id)
                elif isinstance(t, ast.Tuple):
                    for i, e in enumerate(t.elts):
                        if isinstance(e, ast.Name) and (positions is None or i in positions):
                            tainted.add(e.id)
    return tainted


def findings(source: str, name: str = "<test>") -> list[str]:
    """Every wall-clock assertion and short wall deadline in ``source``, as ``name:line: text``."""
    tree = ast.parse(source)
    funcs = _returns(tree)
    out: set[tuple[int, str]] = set()
    for fn in (f for f in ast.walk(tree) if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)):
        tainted = _taint(fn.body, funcs, set())  # names are tracked per function: a virtual `elapsed` elsewhere is fine
        for n in ast.walk(fn):
            if isinstance(n, ast.Assert):
                for c in (x for x in ast.walk(n.test) if isinstance(x, ast.Compare)):
                    terms = [c.left, *c.comparators]
                    for op, a, b in zip(c.ops, terms, terms[1:], strict=False):
                        # a reported wall figure is a measurement at any bound; a reading, under HANG_S
                        lim_b = float("inf") if _reported(a) else HANG_S
                        lim_a = float("inf") if _reported(b) else HANG_S
                        if ((isinstance(op, ast.Lt | ast.LtE) and _wall(a, tainted) and _small(b, lim_b))
                                or (isinstance(op, ast.Gt | ast.GtE) and _small(a, lim_a) and _wall(b, tainted))):
                            out.add((n.lineno, ast.unparse(c)))
            elif (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add)
                  and ((_is_wall_call(n.left) and _small(n.right)) or (_is_wall_call(n.right) and _small(n.left)))):
                out.add((n.lineno, f"deadline {ast.unparse(n)}"))
    return [f"{name}:{line}: {text}" for line, text in sorted(out)]


def test_the_scan_finds_the_wall_clock_assertions_it_is_meant_to() -> None:
    src = '''
import time
def measured():
    t0 = time.monotonic()
    return 1, "err", time.monotonic() - t0
def test_a(guest):
    t = time.perf_counter()
    assert time.perf_counter() - t < 1.0
    elapsed = time.perf_counter() - t
    assert elapsed < 20, elapsed
    code, err, seconds = measured()
    assert code == 2 and seconds < 30
    assert guest["_boot"]["wall_s"] < 200
    assert r.stats["modelled_s"] >= 10.0 and r.stats["elapsed_s"] < 30
    deadline = time.monotonic() + 5
def test_fine(clock):
    t0 = clock.now()
    assert clock.now() - t0 < 0.06
    deadline = time.monotonic() + 60
    assert time.monotonic() < deadline
    took = time.monotonic() - t0
    assert took < 600
'''
    got = [f.split(":", 2)[1] for f in findings(src)]
    assert got == ["8", "10", "12", "13", "14", "15"], findings(src)


def test_no_test_asserts_a_wall_clock_time() -> None:
    bad = []
    for path in sorted(TESTS.rglob("*.py")):
        if path.name != Path(__file__).name:
            bad += findings(path.read_text(), str(path.relative_to(TESTS)))
    assert bad == [], "wall-clock assertions (bound only a hang, >= 60 s; print figures):\n" + "\n".join(bad)
