"""The per-device advisory lock (ARCHITECTURE.md "Device lock"; specs/pci-vfio-remote.md §10.4).

One lock per device identity, shared by every transport and the remote server:
the key is the PCI address, the bridge's USB identity, or the emulated board's
flash file. Lock files live in ``/run/lock/tinyhw/`` (fallback
``$XDG_RUNTIME_DIR/tinyhw/``, then a per-user directory under the temp dir); they
are opened with O_NOFOLLOW and O_CLOEXEC, locked with ``flock``, never unlinked,
and carry the holder's pid and command so a refused user sees who has it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from tinyhw.errors import DeviceLocked, EnvironmentProblem


def lock_dirs() -> list[Path]:
    """Candidate lock directories, best first (``TINYHW_LOCK_DIR`` overrides all)."""
    override = os.environ.get("TINYHW_LOCK_DIR")
    if override:
        return [Path(override)]
    dirs = [Path("/run/lock/tinyhw")]
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    if xdg:
        dirs.append(Path(xdg) / "tinyhw")
    dirs.append(Path(tempfile.gettempdir()) / f"tinyhw-{os.getuid()}")
    return dirs


def lock_name(key: str) -> str:
    """A file name for ``key``: readable part plus a short hash so distinct keys never collide."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key)[-60:].strip("_") or "device"
    digest = hashlib.sha256(key.encode()).hexdigest()[:12]
    return f"{readable}.{digest}.lock"


class DeviceLock:
    """An exclusive, non-blocking flock on the lock file of ``key``."""

    def __init__(self, key: str, *, backend: str = "") -> None:
        self.key = key
        self.backend = backend
        self.path: Path | None = None
        self._fd: int | None = None

    def _open(self) -> tuple[int, Path]:
        errors = []
        for d in lock_dirs():
            try:
                d.mkdir(mode=0o755, parents=True, exist_ok=True)
                path = d / lock_name(self.key)
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, 0o660)
                return fd, path
            except OSError as e:
                errors.append(f"{d}: {e.strerror}")
        raise EnvironmentProblem("cannot create a lock file: " + "; ".join(errors))

    def acquire(self) -> DeviceLock:
        """Take the lock without waiting; returns self. Raises DeviceLocked (naming the holder's pid and tool) when
        another process holds it."""
        if self._fd is not None:
            return self
        fd, path = self._open()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            info = _holder_info(fd)
            os.close(fd)
            err = DeviceLocked(f"device {self.key} is in use by {holder} (lock {path})",
                               hint="wait for that process to finish, or stop it")
            # what a remote server may tell its client: pid and tool, not the holder's command line
            err.holder = {"key": self.key, "pid": info.get("pid", "?"), "tool": _tool(info.get("command"))}
            raise err from None
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o660)
        info = {"pid": os.getpid(), "command": " ".join(sys.argv)[:200], "started": int(time.time()),
                "backend": self.backend, "key": self.key}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(info).encode() + b"\n", 0)
        self._fd, self.path = fd, path
        return self

    def release(self) -> None:
        """Release the lock and close its file; safe to call twice."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    @property
    def held(self) -> bool:
        """True while this object holds the lock."""
        return self._fd is not None

    def __enter__(self) -> DeviceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder_info(fd: int) -> dict:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _tool(command: object) -> str:
    """The program of a command line: its first word's file name (``tinyhw`` for ``.../tinyhw/__main__.py``)."""
    words = str(command or "?").split()
    path = Path(words[0]) if words else Path("?")
    return path.parent.name if path.name == "__main__.py" else path.name


def _read_holder(fd: int) -> str:
    try:
        info = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        return f"pid {info.get('pid', '?')} ({info.get('command', '?')})"
    except (OSError, ValueError):
        return "another process"
