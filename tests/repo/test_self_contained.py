"""Tests and benches use only what the repository holds or installs (issue 20 item 9).

Two halves. Statically, every source under tests/ and bench/ is scanned: no string names the project's
shared folder or a machine path (``../shared``, ``/work/...``, a ``"shared"`` path component), no path
built from ``__file__`` climbs above the repository root (``parents[N]``, ``.parent`` chains,
``os.path.dirname`` nesting, ``/ ".."`` and ``os.path.join(..., "..")``, through module-level names too),
and no path literal resolves to an existing file outside the repository and outside what it installs.
At run time tests/helpers/repoguard.py (installed by tests/conftest.py) refuses and records every open or listing
of such a path; the tests below show both halves catching a sabotaged path.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import repoguard

REPO = repoguard.REPO
SCANNED = ("tests", "bench")
SKIP_DIRS = {"data", "__pycache__"}
# names the folder it forbids; nothing else may
EXEMPT_COMPONENT = {"tests/helpers/repoguard.py"}

_SHARED = "sha" + "red"  # spelled apart so that this file's own patterns do not match themselves
TEXT_PATTERNS = [
    (re.compile(r"\.\./+" + _SHARED + r"\b"), "names ../" + _SHARED),
    (re.compile(r"(^|[\s\"'=:])/" + "work" + r"(/|$)"), "a machine path under /" + "work"),
    (re.compile(r"(^|/)" + _SHARED + r"/(data|specs)\b"), _SHARED + "/data or /specs of the project"),
]


def sources() -> list[Path]:
    out = []
    for top in SCANNED:
        for p in sorted((REPO / top).rglob("*")):
            rel = p.relative_to(REPO)
            if p.is_file() and p.suffix in {".py", ".sh"} and not SKIP_DIRS & set(rel.parts[:-1]):
                out.append(p)
    return out


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _is_call(node: ast.AST, *names: str) -> bool:
    """``node`` is a call of one of ``names`` (``Path``, ``os.path.dirname``, ...) by its last dotted part."""
    if not isinstance(node, ast.Call):
        return False
    f = node.func
    name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
    return name in names


class _Depth:
    """How many path components below the repository root an expression built from ``__file__`` is.

    ``tests/x.py``'s ``__file__`` is 2, its folder 1, the root 0; anything below 0 is outside. None when the
    expression is not built from ``__file__``.
    """

    def __init__(self, rel: Path, tree: ast.Module) -> None:
        self.file_depth = len(rel.parts)
        self.names: dict[str, ast.AST] = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                self.names[node.targets[0].id] = node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value:
                self.names[node.target.id] = node.value
        self.escapes: list[int] = []

    def _steps(self, depth: int, parts: list[str], line: int) -> int:
        for part in parts:
            for comp in part.replace("\\", "/").split("/"):
                if comp in ("", "."):
                    continue
                depth += -1 if comp == ".." else 1
                if depth < 0:
                    self.escapes.append(line)
        return depth

    def of(self, node: ast.AST, seen: frozenset[str] = frozenset()) -> int | None:
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.Name):
            if node.id == "__file__":
                return self.file_depth
            if node.id in self.names and node.id not in seen:
                return self.of(self.names[node.id], seen | {node.id})
            return None
        if isinstance(node, ast.Attribute):
            if node.attr == "pardir":
                return None
            base = self.of(node.value, seen)
            if base is not None and node.attr == "parent":
                return self._up(base, 1, line)
            return base if node.attr not in {"name", "stem", "suffix", "parts"} else None
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "parents":
            base = self.of(node.value.value, seen)
            idx = node.slice
            if base is not None and isinstance(idx, ast.Constant) and isinstance(idx.value, int):
                return self._up(base, idx.value + 1, line)
            return None
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
            base = self.of(node.left, seen)
            if base is None:
                return None
            return self._join(base, [node.right], line)
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr in {"resolve", "absolute", "expanduser"}:
                return self.of(f.value, seen)
            if isinstance(f, ast.Attribute) and f.attr == "joinpath":
                base = self.of(f.value, seen)
                return None if base is None else self._join(base, node.args, line)
            if _is_call(node, "Path", "PurePath", "abspath", "realpath", "normpath", "fspath", "str") and node.args:
                base = self.of(node.args[0], seen)
                return None if base is None else self._join(base, node.args[1:], line)
            if _is_call(node, "dirname") and node.args:
                base = self.of(node.args[0], seen)
                return None if base is None else self._up(base, 1, line)
            if _is_call(node, "join") and node.args:
                base = self.of(node.args[0], seen)
                return None if base is None else self._join(base, node.args[1:], line)
        return None

    def _up(self, depth: int, n: int, line: int) -> int:
        if depth - n < 0:
            self.escapes.append(line)
        return depth - n

    def _join(self, depth: int, args: list[ast.AST], line: int) -> int:
        parts = []
        for a in args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                parts.append(a.value)
            elif isinstance(a, ast.Attribute) and a.attr == "pardir":
                parts.append("..")
        return self._steps(depth, parts, line)


def _looks_like_path(s: str) -> bool:
    """An absolute path or one that climbs (``../x``), naming at least one component (not ``/`` or ``../``)."""
    return (0 < len(s) < 300 and not any(c.isspace() for c in s) and (s.startswith("/") or "../" in s)
            and re.search(r"[^/.]", s) is not None)


def escapes(rel: Path, text: str, policy: repoguard.Policy | None = None) -> list[str]:
    """What in the source ``text`` of ``rel`` (a path relative to the repository) reaches outside it."""
    found: list[str] = []
    policy = policy or repoguard.Policy()
    lines = text.splitlines()

    def check_text(s: str, line: int) -> None:
        for pat, why in TEXT_PATTERNS:
            if pat.search(s):
                found.append(f"{rel}:{line}: {why}: {s[:80]!r}")
        if str(rel) not in EXEMPT_COMPONENT and s == _SHARED:
            found.append(f"{rel}:{line}: a {_SHARED!r} path component")

    if rel.suffix == ".sh":
        for i, ln in enumerate(lines, 1):
            if not ln.lstrip().startswith("#"):
                check_text(ln, i)
        return found
    tree = ast.parse(text)
    skip = _docstrings(tree)
    # the constant pieces of an f-string (f"{dev}/resource0") are fragments, not paths of their own
    fragments = {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    depth = _Depth(rel, tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip:
            check_text(node.value, node.lineno)
            s = node.value
            if _looks_like_path(s) and id(node) not in fragments:
                here = (REPO / rel).parent
                cands = [s] if s.startswith("/") else [os.path.normpath(here / s), os.path.normpath(REPO / s)]
                for c in cands:
                    if policy.refuses(c):
                        found.append(f"{rel}:{node.lineno}: path literal {s!r} is {c}, outside the repository")
        depth.of(node)
    found += [f"{rel}:{n}: a path built from __file__ climbs above the repository root: "
              f"{lines[n - 1].strip()[:100]}" for n in sorted(set(depth.escapes))]
    return found


def test_no_test_or_bench_source_reaches_outside_the_repository() -> None:
    files = sources()
    assert len(files) > 50 and REPO / "bench" / "bench_prof.py" in files
    policy = repoguard.Policy()
    found = [f for p in files for f in escapes(p.relative_to(REPO), p.read_text(), policy)]
    assert found == []


@pytest.mark.parametrize(("rel", "src"), [
    ("tests/test_x.py", 'DATA = Path(__file__).resolve().parents[2] / "other" / "data"'),
    ("tests/test_x.py", 'DATA = Path(__file__).parent.parent.parent / "x"'),
    ("tests/test_x.py", 'import os\nD = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))'),
    ("tests/test_x.py", 'import os\nD = os.path.join(os.path.dirname(__file__), "..", "..", "x")'),
    ("tests/test_x.py", 'ROOT = Path(__file__).resolve().parents[1]\nD = ROOT / ".." / "x"'),
    ("tests/test_x.py", 'ROOT = Path(__file__).resolve().parents[1]\nD = ROOT.parent / "x"'),
    ("tests/guest/x.py", 'D = Path(__file__).parents[3]'),
    ("bench/bench_x.py", 'D = Path(__file__).resolve().parents[1] / "../x"'),
    ("tests/test_x.py", 'D = Path("../' + _SHARED + '/data/sqtt")'),
    ("tests/test_x.py", 'D = Path("/' + 'work/' + _SHARED + '/data")'),
    ("tests/test_x.py", 'D = ROOT / "' + _SHARED + '" / "data"'),
    ("tests/run.sh", 'cp ../' + _SHARED + '/data/x .'),
])
def test_the_scan_catches_a_path_out_of_the_repository(rel: str, src: str) -> None:
    assert escapes(Path(rel), src), src


@pytest.mark.parametrize(("rel", "src"), [
    ("tests/test_x.py", 'DATA = Path(__file__).parent / "data" / "sqtt"'),
    ("tests/test_x.py", 'ROOT = Path(__file__).resolve().parents[1]\nD = ROOT / "bench" / "x.py"'),
    ("tests/guest/x.py", 'D = Path(__file__).parents[2] / "README.md"'),
    ("bench/bench_x.py", 'D = Path(__file__).resolve().parents[1] / "tests" / "data"'),
    ("tests/test_x.py", 'P = "/sys/bus/pci/devices"\nQ = "../../../bus/pci/drivers/vfio-pci"'),
    ("tests/test_x.py", '"""Reads nothing from ../' + _SHARED + ' (a docstring)."""'),
])
def test_the_scan_lets_paths_in_the_repository_through(rel: str, src: str) -> None:
    assert escapes(Path(rel), src) == []


def test_path_literal_to_an_existing_outside_file_is_caught(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "blob.bin").write_bytes(b"x")
    policy = repoguard.Policy()
    policy.forbidden += (str(outside),)
    assert escapes(Path("tests/test_x.py"), f'D = "{outside}/blob.bin"', policy)
    assert escapes(Path("tests/test_x.py"), f'D = "{outside}/missing.bin"', policy) == []


def test_policy(tmp_path: Path) -> None:
    repo = tmp_path / "clone"
    (repo / "tests").mkdir(parents=True)
    shared = tmp_path / _SHARED  # where CI lays the project's shared data beside its clone
    shared.mkdir()
    (shared / "f").write_text("x")
    (repo / "tests" / "data").symlink_to(shared)
    p = repoguard.Policy(repo)
    assert not p.refuses(str(repo / "tests" / "x.py"))
    assert not p.refuses(sys.executable) and not p.refuses("/proc/self/status")
    assert not p.refuses(str(tmp_path / "scratch"))  # the temporary directory is allowed...
    assert p.refuses(str(shared / "f")) and p.refuses(str(shared))  # ... but not the shared folder in it
    assert p.refuses(str(repo / "tests" / "data" / "f"))  # nor a link out of the repository
    assert p.refuses(str(repo / ".." / _SHARED / "f"))
    assert not p.refuses(str(shared / "missing")) and p.refuses(str(shared / "new"), writing=True)


def test_the_guard_refuses_and_records_a_read_outside(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "blob.bin").write_bytes(b"secret")
    monkeypatch.setenv("TINYHW_TEST_FORBID_READS", str(outside))
    repoguard.install()
    try:
        with pytest.raises(repoguard.ReadOutsideRepo):
            (outside / "blob.bin").read_bytes()
        with pytest.raises(repoguard.ReadOutsideRepo):
            os.listdir(outside)
        assert list(outside.glob("*")) == []  # pathlib swallows the PermissionError ...
        assert len(repoguard.take()) == 3  # ... but all three were recorded (taken, so this test passes)
        assert (REPO / "README.md").read_bytes()
    finally:
        monkeypatch.delenv("TINYHW_TEST_FORBID_READS")
        repoguard.install()
    assert (outside / "blob.bin").read_bytes() == b"secret"


def test_a_test_that_swallows_the_refusal_still_fails(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "blob.bin").write_bytes(b"secret")
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "test_sneaky.py").write_text(textwrap.dedent(f"""
        def test_reads_beside_the_clone():
            try:
                open({str(outside / 'blob.bin')!r}, "rb").read()
            except OSError:
                pass

        def test_fine():
            assert True
    """))
    env = {**os.environ, "PYTHONPATH": str(REPO / "tests" / "helpers"), "TINYHW_TEST_FORBID_READS": str(outside)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-p", "repoguard", "-p", "no:cacheprovider", "-q", "-rA",
                        str(suite)], check=False, cwd=suite, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "outside the repository" in r.stdout and "blob.bin" in r.stdout
    assert "PASSED test_sneaky.py::test_fine" in r.stdout
