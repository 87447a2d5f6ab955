"""Tests read only what the repository holds or installs: a runtime guard and the policy it applies.

A fresh clone has no ``../shared`` beside it (CI's clone does), so a test that reads one passes in CI and
fails for a newcomer. tests/conftest.py installs :func:`install` (a ``sys.addaudithook`` hook on the
``open``, ``os.listdir`` and ``os.scandir`` events; glob and ``Path.glob`` go through scandir): while the
test process runs, a path that leaves the repository is refused (``ReadOutsideRepo``, a PermissionError)
and recorded, and the test that did it fails in teardown even if it swallowed the error; during
collection the refusal itself makes the module's import fail.

Allowed outside the repository: the system's own directories (``/usr``, ``/lib*``, ``/etc``, ``/proc``,
``/sys``, ``/dev``, ``/run``, ``/var``, ``/bin``, ``/sbin``), the temporary directory, the Python
installation and its site directories (the venv), the caches tests/setup-system.sh fills (pinned by
tests/helpers/cachedirs.py) and ``$TINYHW_TEST_ALLOW_READS`` (``os.pathsep``-separated). Always refused, allowed
or not: a ``shared`` folder beside the repository (where CI puts the project's shared data) and
``$TINYHW_TEST_FORBID_READS``. A path that does not exist is let through (it cannot leak data, and
tests probe missing files on purpose), except when it is opened for writing into an existing folder.
The static half (tests/repo/test_self_contained.py) scans the sources of tests/ and bench/ for paths that
escape; subprocesses are covered only by that.
"""

from __future__ import annotations

import os
import site
import sys
import tempfile
from pathlib import Path

import pytest
from testpaths import ROOT as REPO

SYSTEM_ROOTS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/proc", "/sys",
                "/dev", "/run", "/var", "/nix/store")
WATCHED = frozenset({"open", "os.listdir", "os.scandir"})
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC


class ReadOutsideRepo(PermissionError):
    """A test touched a path outside the repository and outside what it installs."""


def _env_paths(name: str) -> list[str]:
    return [p for p in os.environ.get(name, "").split(os.pathsep) if p]


def _roots(paths: list[str]) -> tuple[str, ...]:
    out: set[str] = set()
    for p in paths:
        if p:
            out.add(os.path.abspath(p))
            out.add(os.path.realpath(p))
    return tuple(sorted(out))


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or path.startswith(r.rstrip("/") + "/") for r in roots)


class Policy:
    """Which paths a test may touch; built once, when the session starts (after cachedirs pinned the caches)."""

    def __init__(self, repo: Path = REPO) -> None:
        self.repo = _roots([str(repo)])
        allowed = [*SYSTEM_ROOTS, tempfile.gettempdir(), sys.prefix, sys.base_prefix, sys.exec_prefix,
                   sys.base_exec_prefix, *site.getsitepackages(), site.getusersitepackages(),
                   os.environ.get("TINYHW_FIRMWARE_DIR", ""), os.environ.get("TINYHW_GUEST_CACHE", ""),
                   *_env_paths("TINYHW_TEST_ALLOW_READS")]
        self.allowed = _roots(allowed)
        self.forbidden = _roots([str(repo.parent / "shared"), *_env_paths("TINYHW_TEST_FORBID_READS")])

    def refuses(self, path: str, writing: bool = False) -> bool:
        """True if ``path`` (absolute or relative to the working directory) is off limits to a test."""
        p = os.path.abspath(path)
        if _under(p, self.repo) and not _under(p, self.forbidden):
            real = os.path.realpath(p)  # a link inside the repository that points out of it
            if real == p or _under(real, self.repo):
                return False
            p = real
        if _under(p, self.forbidden):
            return os.path.lexists(p) or (writing and os.path.isdir(os.path.dirname(p)))
        if _under(p, self.allowed) or _under(os.path.realpath(p), self.allowed):
            return False
        return os.path.lexists(p) or (writing and os.path.isdir(os.path.dirname(p)))


violations: list[str] = []
_policy: Policy | None = None


def _writing(mode: object, flags: object) -> bool:
    if isinstance(mode, str):
        return any(c in mode for c in "wax+")
    return isinstance(flags, int) and bool(flags & _WRITE_FLAGS)


def _hook(event: str, args: tuple) -> None:
    if event not in WATCHED or _policy is None or not args:
        return
    target = args[0]
    if target is None or isinstance(target, int):
        return
    try:
        path = os.fsdecode(os.fspath(target))
    except TypeError:
        return
    writing = event == "open" and len(args) >= 3 and _writing(args[1], args[2])
    if _policy.refuses(path, writing):
        msg = f"{event} {path!r}: outside the repository (tests use only what the repository holds or installs)"
        violations.append(msg)
        raise ReadOutsideRepo(msg)


def install() -> None:
    """Start guarding this process (idempotent; an audit hook cannot be removed, so it is added once)."""
    global _policy
    first = _policy is None
    _policy = Policy()
    if first:
        sys.addaudithook(_hook)


def take() -> list[str]:
    """The violations recorded since the last call (and forget them)."""
    out = violations[:]
    violations.clear()
    return out


@pytest.fixture(autouse=True)
def reads_stay_in_repo():
    """Fail the test that touched a path outside the repository, even if it caught the refusal."""
    take()
    yield
    found = take()
    if found:
        pytest.fail("; ".join(found[:3]) + (f" (+{len(found) - 3} more)" if len(found) > 3 else ""), pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    """When loaded as a plugin (``pytest -p repoguard``) rather than through tests/conftest.py."""
    install()
